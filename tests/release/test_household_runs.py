"""The analyses that re-measure or re-estimate a release's unit run refuse a household
run in one line (docs/households.md, "Outputs"); the others read it as any release."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from censusdp.cli import main
from censusdp.errors import ConfigError
from censusdp.evaluate import EvaluateOptions
from censusdp.evaluate.core import _trial_budget
from censusdp.evaluate.errorbars import simulate_release_errors
from censusdp.io.budget_files import load_preset
from censusdp.io.layout import INVARIANT_TOTALS_FILE, INVARIANTS_FILE, NMF_FILES
from censusdp.release.household_runs import has_household_run, refuse_household_run


def _manifest(units: str | None) -> dict:
    # a manifest names its person schema at the top, its unit run's under ``units``
    m = {"kind": "release", "schema": "dhc-lite", "persons": load_preset("ddp-2010").to_dict()}
    if units is not None:
        m["units"] = load_preset(units).to_dict()
    return m


def test_a_household_run_is_told_from_its_unit_budget() -> None:
    assert has_household_run(_manifest("ddp-2010-households")["units"])
    assert has_household_run(load_preset("ddp-2010-households"))
    assert not has_household_run(_manifest("ddp-2010-units")["units"])
    assert not has_household_run(load_preset("ddp-2010-units"))
    assert not has_household_run(None)
    refuse_household_run(_manifest("ddp-2010-units"), "RUN", "infer")  # no error


def _run(tmp_path: Path, units: str | None) -> Path:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "manifest.json").write_text(json.dumps(_manifest(units)))
    return tmp_path


def test_the_error_bars_refuse_a_household_run(tmp_path) -> None:
    run = _run(tmp_path, "ddp-2010-households")
    with pytest.raises(ConfigError, match="household run .*not support household runs yet") as e:
        simulate_release_errors(run, simulations=1)
    assert "\n" not in str(e.value) and "manifest.json" in str(e.value)


def test_trials_rerun_a_household_run_with_its_budget(tmp_path) -> None:
    """``evaluate --trials`` re-runs the release: its household budget, rebuilt from the
    manifest, measures what the preset measures, with the same mechanisms."""
    run = _run(tmp_path, "ddp-2010-households")
    budget = _trial_budget(EvaluateOptions(), json.loads((run / "manifest.json").read_text()), run)
    preset = load_preset("ddp-2010-households")
    assert budget.units is not None and has_household_run(budget.units)

    def plan(b):
        return [(m.geolevel, m.query, m.mechanism.variance) for m in b.measurements()]

    assert plan(budget.units) == plan(preset)
    assert budget.units.epsilon() == preset.epsilon() == 2


def test_infer_refuses_a_household_run(tmp_path) -> None:
    from censusdp.infer.release import _read_release
    from censusdp.io.rundir import RunDir

    run = _run(tmp_path, "ddp-2010-households")
    for name in (NMF_FILES["persons"], INVARIANTS_FILE, INVARIANT_TOTALS_FILE):
        (run / name).write_bytes(b"")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["geolevels"] = [["US", 0], ["State", 2]]
    (run / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="infer does not support household runs yet"):
        _read_release(RunDir(run))


@pytest.mark.parametrize(
    "args",
    [
        ["evaluate", "{run}"],
        ["evaluate", "{run}", "--simulations", "2", "--html", "{tmp}/e.html"],
        ["evaluate", "{run}", "--input", "{tmp}/no-truth", "--simulations", "1"],
        ["infer", "{run}", "--out", "{tmp}/gls"],
    ],
    ids=["errorbars", "errorbars-html", "evaluate-simulations", "infer"],
)
def test_what_does_not_read_a_household_run_says_so_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    """Each command that cannot read a household run refuses it in one line, exit 2 (a
    usage mistake), before any long work: the release here is a manifest alone, and the
    truth does not exist, so validating or reading would fail otherwise; nothing is
    written."""
    run = _run(tmp_path / "run", "ddp-2010-households")
    argv = [a.format(run=run, tmp=tmp_path) for a in args]
    assert main([*argv, "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "not support household runs yet" in err, err
    assert "missing" not in err and "valid" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_a_household_run_on_a_spine_is_refused_before_measuring(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the optimized spine the unit run would have its own spine, which a household
    run (estimated on the persons' hierarchy) cannot use: one line, after reading and
    before any noise is drawn; nothing is left behind."""
    from censusdp.errors import ConfigError
    from censusdp.generate import generate_state
    from censusdp.privacy.budget_config import budget_from_toml
    from censusdp.privacy.release_budget import ReleaseBudget
    from censusdp.release import pipeline
    from censusdp.release.options import ReleaseOptions

    generate_state("VT", 2, tmp_path / "cef", scale=0.002)
    persons = load_preset("pl94-2020")
    levels = [(n, k) for n, k in persons.geolevels]
    households = budget_from_toml(
        'name = "hh"\ndescription = "households on the spine levels"\n'
        'schema = "household2010"\nmechanism = "discrete_gaussian"\nrho = "1"\n'
        'delta = "1e-10"\nneighbours = "bounded"\n'
        + "".join(
            f'[[geolevels]]\nname = "{n}"\nlength = {k}\nshare = "1/{len(levels)}"\n'
            '[geolevels.queries]\ndetailed = "1"\n'
            for n, k in levels
        ),
        origin="test",
    )

    def no_noise(*args, **kwargs):
        raise AssertionError("measured before refusing")

    monkeypatch.setattr(pipeline, "measure_runs", no_noise)
    with pytest.raises(ConfigError, match="household run .* --spine tabulation"):
        pipeline.run_release(
            tmp_path / "cef",
            tmp_path / "run",
            ReleaseBudget(persons, households),
            ReleaseOptions(seed=1, spine="optimized"),
        )
    assert not (tmp_path / "run").exists()
