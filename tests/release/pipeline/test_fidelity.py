"""``--fidelity production``: every deliberate difference from the 2020 production system
off at once (docs/production-fidelity.md), recorded in the manifest; the default keeps
censusdp's improvements and states each one."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from censusdp.errors import ConfigError
from censusdp.io.budget_files import load_preset
from censusdp.io.release_manifest import ReleaseManifest
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.options import ReleaseOptions
from censusdp.release.pipeline import reestimate, run_release
from censusdp.release.topdown import driver
from censusdp.release.topdown.split import DEFAULT_MAX_CHILDREN
from synth import block_codes, make_cef, write_cef


def test_production_fidelity_turns_every_difference_off() -> None:
    d = ReleaseOptions()
    assert (d.fidelity, d.unit_consistency, d.max_children) == (
        "default",
        "consistent",
        DEFAULT_MAX_CHILDREN,
    )
    assert d.pool_root and d.failsafe and d.rounder == "censusdp" and not d.production_mode
    p = ReleaseOptions(fidelity="production")
    assert p.production_mode and p.unit_consistency == "independent" and p.max_children is None
    assert p.estimator_for("dhc-lite") == "ls" and d.estimator_for("dhc-lite") == "auto"
    assert not p.pool_root and not p.failsafe and p.rounder == "production"
    assert p.nmf_structural_zeros is True and d.nmf_structural_zeros is False
    assert set(p.differences()) == set(d.differences())
    assert all("production" in v for v in p.differences().values())
    assert p.fidelity_record() == {"mode": "production", "differences": p.differences()}


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"fidelity": "prod"}, "--fidelity must be one of"),
        ({"fidelity": "production", "units": "consistent"}, "--units consistent contradicts"),
        ({"fidelity": "production", "max_children": 50}, "--max-children 50 contradicts"),
        ({"fidelity": "production", "estimator": "maxent"}, "--estimator maxent contradicts"),
        ({"fidelity": "production", "passes": "single"}, "--passes single contradicts"),
        ({"passes": "one"}, "--passes must be one of"),
    ],
)
def test_contradictory_options_are_refused(options: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ReleaseOptions.from_mapping(options)


@pytest.fixture(scope="module")
def cef(tmp_path_factory):
    base = tmp_path_factory.mktemp("fidelity")
    persons, units = make_cef(np.random.default_rng(3), block_codes(1, 2, 2, 3), gq_rate=0.2)
    write_cef(base / "cef", persons, units)
    return base


def test_a_production_release_is_recorded_and_estimated_as_production(cef, monkeypatch):
    seen = []
    real = driver.run_topdown

    def spy(ms, hierarchy, bounds, options, **kw):
        seen.append(options)
        return real(ms, hierarchy, bounds, options, **kw)

    monkeypatch.setattr("censusdp.release.estimation.run_topdown", spy)
    budget = ReleaseBudget(
        load_preset("pl94-2020").scaled(rho="1/20"), load_preset("pl94-2020-units")
    )
    m = run_release(
        cef / "cef", cef / "prod", budget, ReleaseOptions(seed=4, fidelity="production")
    )
    assert m["validation"]["ok"] is True
    assert m["fidelity"]["mode"] == "production" and m["units_estimation"] == "independent"
    assert m["max_children"] is None and m["failsafe"] == {"persons": [], "units": []}
    assert [(o.production, o.pool_root, o.max_children) for o in seen] == [(True, False, None)] * 2
    assert ReleaseManifest.from_dict(m).fidelity == m["fidelity"]
    # item 9: production measures detailed over all 2,016 cells (126 structural zeros)
    assert _detailed_rows_per_unit(cef / "prod") == 2016
    # the same measurements re-estimated with censusdp's improvements state them
    seen.clear()
    r = reestimate(cef / "prod", cef / "default", ReleaseOptions())
    assert r["fidelity"]["mode"] == "default" and r["units_estimation"] == "consistent"
    assert r["fidelity"]["differences"]["root_pooling"].startswith("on")
    assert [(o.production, o.pool_root) for o in seen] == [(False, True)] * 2
    assert r["validation"]["ok"] is True and _detailed_rows_per_unit(cef / "default") == 2016
    d = run_release(cef / "cef", cef / "dflt", budget_small(), ReleaseOptions(seed=4))
    assert d["fidelity"]["mode"] == "default" and _detailed_rows_per_unit(cef / "dflt") == 1890


def test_one_pass_is_chosen_recorded_and_resumable_by_name(cef, monkeypatch):
    """``--passes single``: every TopDown of the release in one pass, the manifest's
    fidelity record says so, and the checkpoint's fingerprint holds it (a resume with
    the other choice is refused by name)."""
    from censusdp.release.checkpoint import _WHAT, run_fingerprint

    seen = []
    real = driver.run_topdown

    def spy(ms, hierarchy, bounds, options, **kw):
        seen.append(options.passes)
        return real(ms, hierarchy, bounds, options, **kw)

    monkeypatch.setattr("censusdp.release.estimation.run_topdown", spy)
    m = run_release(
        cef / "cef", cef / "single", budget_small(), ReleaseOptions(seed=4, passes="single")
    )
    assert m["validation"]["ok"] is True and seen == ["single"]
    assert m["fidelity"]["differences"]["passes"].startswith("one pass")
    assert ReleaseOptions().differences()["passes"].endswith("(production)")
    sha, budget = {"persons.parquet": "0" * 64}, budget_small()
    one = run_fingerprint(sha, budget, ReleaseOptions(seed=4, passes="single"), "tabulation")
    default = run_fingerprint(sha, budget, ReleaseOptions(seed=4), "tabulation")
    assert one["passes"] == "single" and "passes" not in default and _WHAT["passes"] == "--passes"


def budget_small() -> ReleaseBudget:
    return ReleaseBudget(load_preset("pl94-2020").scaled(rho="1/20"))


def _detailed_rows_per_unit(run) -> int:
    """Rows of ``detailed`` per geounit in a release's NMF (every unit has the same)."""
    from censusdp.api import Release

    t = Release.open(run).nmf("Block").to_pydict()
    rows = [g for g, q in zip(t["geocode"], t["query"], strict=True) if q == "detailed"]
    counts = {g: rows.count(g) for g in set(rows)}
    assert len(set(counts.values())) == 1
    return next(iter(counts.values()))


def test_cli_refuses_a_contradiction_in_one_line(cef, tmp_path):
    argv = [sys.executable, "-m", "censusdp", "run", "--input", str(cef / "cef")]
    argv += ["--out", str(tmp_path / "x"), "--fidelity", "production", "--units", "consistent"]
    r = subprocess.run(argv, capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--units consistent contradicts --fidelity production" in r.stderr
    assert not (tmp_path / "x").exists()
