"""Tests of empirical error bars (trials) and the epsilon sweep (JASON (JSR-19-2F) Figs. 6-1, 6-2).

The release engine is replaced by a fake mechanism whose noise shrinks as rho grows
(persons re-drawn with probability 1 / (1 + 4 rho)), so these tests check the
plumbing, the pooling and the outputs quickly; ``test_sweep_with_engine`` (slow) runs
the real TopDown engine.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from censusdp.cli import main
from censusdp.data.geography import Hierarchy
from censusdp.errors import ConfigError
from censusdp.evaluate import EvaluateOptions, SweepOptions, evaluate, sweep
from censusdp.evaluate.sweep import budget_for_epsilon
from censusdp.evaluate.trials import budget_from_manifest
from censusdp.io.budget_files import load_preset
from censusdp.io.cef import read_cef
from censusdp.io.tables import write_tables
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.options import Execution, ReleaseOptions
from censusdp.tables import tabulate
from synth import write_record_release


def fake_run_release(input_dir, out_dir, release_budget, options, execution=None, **_kw):
    budget, seed = release_budget.persons, options.seed
    cef = read_cef(input_dir)
    rng = np.random.default_rng(seed)
    p = cef.persons
    n = p["geocode"].size
    redraw = rng.random(n) < 1.0 / (1.0 + 4.0 * float(budget.rho))
    geocode = p["geocode"].copy()
    hh_blocks = np.unique(cef.units["geocode"][cef.units["gqtype"] == 0])
    move = redraw & (p["hhgq"] == 0)
    geocode[move] = hh_blocks[rng.integers(0, hh_blocks.size, int(move.sum()))]
    cenrace = np.where(redraw, rng.integers(1, 64, n), p["cenrace"])
    persons = {
        "geocode": geocode,
        "hhgq": p["hhgq"],
        "votingage": (p["age"] >= 18).astype(np.int64),
        "hispanic": p["hispanic"],
        "cenrace": cenrace,
    }
    units = {k: cef.units[k] for k in ("geocode", "gqtype", "occupied")}
    out_dir.mkdir(parents=True)
    h = Hierarchy.from_blocks(np.concatenate([p["geocode"], cef.units["geocode"]]))
    write_record_release(out_dir, persons, units, h)
    write_tables(tabulate(persons, units, h), out_dir / "tables")
    manifest = {"persons": budget.to_dict(), "postprocess": "topdown", "seed": seed}
    (out_dir / "manifest.json").write_text(json.dumps(manifest))
    return manifest


@pytest.fixture
def fake_engine(monkeypatch):
    import censusdp.release.pipeline

    monkeypatch.setattr(censusdp.release.pipeline, "run_release", fake_run_release)


def test_budget_for_epsilon_meanings():
    base = load_preset("pl94-2020")
    assert base.privacy_measure == "zCDP"
    b = budget_for_epsilon(base, 2.0, "rho")
    assert float(b.rho) == pytest.approx(2.0)  # rho = eps^2 / 2
    assert float(budget_for_epsilon(base, 0.25, "rho").rho) == pytest.approx(0.03125)
    cks = budget_for_epsilon(base, 2.0)  # the default: total epsilon at the preset's delta
    assert float(cks.rho) < float(b.rho)
    assert 0.99 * 2.0 <= cks.epsilon() <= 2.0
    pure = budget_for_epsilon(load_preset("ddp-2010"), 6.0)
    assert float(pure.total) == pytest.approx(6.0)
    with pytest.raises(ConfigError, match="must be positive"):
        budget_for_epsilon(base, 0.0)
    with pytest.raises(ConfigError, match="epsilon meaning"):
        budget_for_epsilon(base, 1.0, "other")


def test_budget_from_manifest_roundtrip():
    for name in ("pl94-2020", "ddp-2010"):
        b = load_preset(name)
        back = budget_from_manifest(b.to_dict())
        assert back.rho == b.rho and back.total == b.total
        assert [(m.geolevel, m.query, m.rho) for m in back.measurements()] == [
            (m.geolevel, m.query, m.rho) for m in b.measurements()
        ]


def test_trials_error_bars(fake_engine, truth_release, tmp_path):
    truth_dir, _, truth, _ = truth_release
    release = tmp_path / "release"
    budget = ReleaseBudget(load_preset("pl94-2020").scaled(rho=1))
    fake_run_release(truth_dir, release, budget, ReleaseOptions(seed=99))
    result = evaluate(
        truth_dir,
        release,
        EvaluateOptions(trials=3, trial_seed=7, district_targets=(100,), allow_invalid=True),
        execution=Execution(progress=lambda _m: None),
    )
    tr = result["trials"]
    assert tr["trials"] == 3 and len(set(tr["seeds"])) == 3
    errs = tr["errors"]["total_population"]
    n_blocks = result["units"]["Block"]
    assert sum(b["n"] for b in errs["Block"]["by_bin"].values()) == 3 * n_blocks
    assert errs["State"]["by_bin"]["1000+"]["interval90"] == [0, 0]  # moves keep the total
    blk = errs["Block"]["by_bin"]["10-99"]
    assert blk["interval90"][0] < 0 < blk["interval90"][1]
    assert 0 < blk["abs_q90"] <= blk["abs_q95"] and blk["abs_q50"] <= blk["abs_q90"]
    assert set(tr["errors"]) == {"total_population", "P1", "P2", "P3", "P4", "P5", "H1"}
    assert errs["Block"]["tvd"]["trials"] == 3
    # Same master seed -> same trial seeds (reproducible error bars).
    again = evaluate(
        truth_dir,
        release,
        EvaluateOptions(trials=3, trial_seed=7, district_targets=(100,), allow_invalid=True),
        execution=Execution(progress=lambda _m: None),
    )
    assert again["trials"] == tr


def test_sweep_outputs_and_monotone_tvd(fake_engine, truth_release, tmp_path):
    truth_dir, _, _, _ = truth_release
    result = sweep(
        truth_dir,
        SweepOptions(epsilons=[0.25, 1, 8], trials=2, seed=3, epsilon_meaning="rho"),
        out_dir=tmp_path / "sw",
        execution=Execution(progress=lambda _m: None),
    )
    assert result["epsilon_meaning"] == "rho = epsilon^2/2"
    assert [p["rho"] for p in result["points"]] == pytest.approx([0.03125, 0.5, 32.0])
    for measure in ("total_population", "hispanic*cenrace"):
        for lv in ("Tract", "BlockGroup", "Block"):
            means = [p["tvd"][measure][lv]["mean"] for p in result["points"]]
            assert means == sorted(means), (measure, lv, means)
        assert result["points"][-1]["tvd"][measure]["Block"]["mean"] > 0.9
    files = {p.name for p in (tmp_path / "sw").iterdir()}
    assert {"sweep.json", "sweep.csv", "sweep.png", "manifest.json"} <= files
    assert not any(name.startswith(".sweep-") for name in files)
    with (tmp_path / "sw" / "sweep.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 3 * 2 * 2 * 6
    png = (tmp_path / "sw" / "sweep.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    man = json.loads((tmp_path / "sw" / "manifest.json").read_text())
    assert man["seed"] == 3 and man["config"]["epsilons"] == [0.25, 1.0, 8.0]


def test_cli_sweep(fake_engine, truth_release, tmp_path, capsys):
    truth_dir, _, _, _ = truth_release
    code = main(
        [
            "sweep",
            "--input",
            str(truth_dir),
            "--epsilons",
            "0.5,4",
            "--out",
            str(tmp_path / "s"),
            "--quiet",
        ]
    )
    assert code == 0
    assert "accuracy = 1 - TVD of total population, 1 = exact" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(
            ["sweep", "--input", str(truth_dir), "--epsilons", "1,-2", "--out", str(tmp_path / "x")]
        )


@pytest.mark.slow
def test_sweep_with_engine(truth_release, tmp_path):
    """The real TopDown engine: TVD rises with epsilon (JASON (JSR-19-2F) Figs. 6-1, 6-2).

    On this 1,853-person state, TVD above the block level moves by a person or two
    between runs, so strict monotonicity is asserted where the noise dominates (blocks)
    and closeness to 1 elsewhere.
    """
    truth_dir, _, _, _ = truth_release
    result = sweep(
        truth_dir,
        SweepOptions(epsilons=[0.25, 2, 8], seed=1),
        out_dir=tmp_path / "sw",
        execution=Execution(progress=lambda _m: None),
    )
    for measure in ("total_population", "hispanic*cenrace"):
        means = [p["tvd"][measure]["Block"]["mean"] for p in result["points"]]
        assert means[0] < means[1] < means[2], (measure, means)
    last = result["points"][-1]["tvd"]["total_population"]
    assert all(last[lv]["mean"] > 0.99 for lv in ("State", "County", "Tract", "BlockGroup"))
    assert last["Block"]["mean"] > 0.9
