"""The sweep with the real TopDown engine (dhc-lite-demo) on a small generated state.

JASON (JSR-19-2F) sec. 8.4.1: re-identification risk as a function of the privacy-loss budget.
Slow (two DP releases, a few minutes on 2 cores): run with ``-m slow``.
"""

from __future__ import annotations

import pytest

from censusdp.attacks.dhc.sweep import SweepOptions, attack_sweep
from censusdp.generate import generate_state

pytestmark = pytest.mark.slow


def test_real_engine_sweep_trend(tmp_path):
    truth = tmp_path / "truth"
    generate_state("DC", 2, truth, scale=0.01)
    options = SweepOptions(
        epsilons=[1.0], production=True, swap_dp_epsilons=[], swap_dp_production=False, seed=1
    )
    r = attack_sweep(truth, tmp_path / "sweep", options)
    rows = {row["name"]: row for row in r["rows"]}
    unprotected, prod, low = rows["unprotected"], rows["dp_production"], rows["dp_eps1"]
    base = rows["marginals"]
    assert unprotected["exact_rate"] > 0.8
    # DP reconstructs less than the unprotected tables, and less at smaller epsilon
    assert low["exact_rate"] < prod["exact_rate"] < unprotected["exact_rate"]
    # above-chance re-identification falls toward the marginals baseline as epsilon falls
    assert low["nonmodal_confirmed_share"] < prod["nonmodal_confirmed_share"]
    assert low["nonmodal_confirmed_share"] < base["nonmodal_confirmed_share"] + 0.1
    assert low["confirmed_share"] < unprotected["confirmed_share"]


def test_swap_then_dp_release_is_attackable(tmp_path):
    """DP on top of swapping (JASON (JSR-19-2F) sec. 8.4.3) writes a normal run with the swap recorded."""
    import json

    from censusdp.attacks.dhc.runs import run_reconstruct
    from censusdp.io.budget_files import load_preset
    from censusdp.privacy.release_budget import ReleaseBudget
    from censusdp.protect import SwapOptions, swap_then_dp
    from censusdp.release.options import ReleaseOptions

    truth = tmp_path / "truth"
    generate_state("DC", 3, truth, scale=0.01)
    run = tmp_path / "run"
    m = swap_then_dp(
        truth,
        run,
        SwapOptions(rate=0.05, seed=1),
        ReleaseBudget(load_preset("dhc-lite-demo").scaled(epsilon="64")),
        ReleaseOptions(seed=2),
    )
    assert m["swap"]["swapped"] > 0 and m["mechanism"] == "discrete_gaussian"
    assert json.loads((run / "manifest.json").read_text())["swap"]["rate"] == 0.05
    assert not any(p.name.startswith(".run.swap-") for p in tmp_path.iterdir())
    s = run_reconstruct(run, tmp_path / "rec", truth_dir=truth)
    assert s["status"]["deviation"] == 0
    assert 0.2 < s["match"]["exact_rate"] < 0.95
