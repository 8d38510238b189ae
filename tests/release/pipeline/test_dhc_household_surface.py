"""A ``dhc-2020`` release with its household run (``dhc-2020-units``) re-estimated and read
back as the other releases are: ``run --from-measurements`` and ``run --resume`` (killed
inside the household run, after the persons and the unit histogram) give the same files
byte for byte as the uninterrupted run; the error bars re-release its person run (P1-P5
and the DHC person tables) and its household run (H1 and the DHC household tables);
``infer`` says in one line what it cannot read (the person schema, not the households).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_dhc_person_run import _small_vermont
from test_household_release import _files, killed_at

from censusdp.cli import main
from censusdp.evaluate.errorbars import simulate_release_errors
from censusdp.io.budget_files import load_preset
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release import pipeline
from censusdp.release.dhc_units import UNIT_HISTOGRAM_RUN
from censusdp.release.options import Execution, ReleaseOptions

pytestmark = pytest.mark.slow  # each release measures 1.2- and 1.6-million-cell histograms

BUDGET = ReleaseBudget(load_preset("dhc-2020"), load_preset("dhc-2020-units"))


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("dhc-surface")
    _small_vermont(d / "cef", d / "generated")
    pipeline.run_release(d / "cef", d / "reference", BUDGET, ReleaseOptions(seed=3))
    return d


def test_from_measurements_reproduces_the_dhc_release(state: Path, tmp_path: Path) -> None:
    manifest = pipeline.reestimate(state / "reference", tmp_path / "again")
    reference = state / "reference"
    assert _files(tmp_path / "again") == _files(reference)
    want = json.loads((reference / "manifest.json").read_text())
    assert manifest["households_released"] == want["households_released"] > 0
    assert manifest["units_estimation"] == want["units_estimation"]


def test_a_resumed_dhc_release_is_byte_identical(
    state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed once the households' first level is checkpointed: the persons and the
    unit histogram are finished, the households half done."""
    out = tmp_path / "run"
    done = killed_at(
        monkeypatch,
        lambda name: name.startswith("estimate/units/"),
        lambda: pipeline.run_release(state / "cef", out, BUDGET, ReleaseOptions(seed=3)),
    )
    assert any(n.startswith(f"estimate/{UNIT_HISTOGRAM_RUN}/") for n in done)
    manifest = pipeline.run_release(
        state / "cef", out, BUDGET, ReleaseOptions(seed=3), Execution(), resume=True
    )
    assert _files(out) == _files(state / "reference")
    reused = manifest["resumed"]["reused"]
    assert any(r.startswith("estimate/persons/") for r in reused), reused
    assert any(r.startswith(f"estimate/{UNIT_HISTOGRAM_RUN}/") for r in reused), reused
    assert any(r.startswith("estimate/units/") for r in reused), reused


def test_the_error_bars_simulate_both_runs_of_a_dhc_release(state: Path) -> None:
    result = simulate_release_errors(state / "reference", simulations=1, seed=2)
    iterations = [f"P12{k}" for k in "ABCDEFGHI"]  # P12's race and Hispanic origin
    household = ["H1", "P16", "H3", "H4", "H5", "H6", "H7", "H9", "H10", "H11", "H12"]
    assert result["measures"] == ["total_population", "P1", "P2", "P3", "P4", "P5", "H1",
                                  "P12", *iterations, "PCT12", "GQ1", *household[1:]]  # fmt: skip
    run = result["household_run"]
    assert run["schema"] == "dhch-2020" and run["tables"] == household
    assert "and units by tenvacgq" in run["re_released"]
    assert "facilities by GQ type (gq_vect)" in run["re_released"]
    assert run["person_run"] == "estimated apart from the households, as the release was"
    assert result["plausible_truth"].startswith("the release's blocks deconvolved")
    by_level = result["by_level"]
    assert set(by_level) == set(result["measures"])
    for table in ("P12", "P12A", "PCT12", "GQ1", *household):  # against the truth's
        block = by_level[table]["Block"]
        assert block["counts_per_simulation"] > 0
        assert block["mae"] > 0, table  # re-estimated from new noise: not the truth
    state_level = by_level["P12"]["State"]  # the state total exact, its age groups not
    assert by_level["total_population"]["State"]["mae"] == 0
    assert state_level["abs_q95"] >= 1
    # occupancy two ways, H1 from the households re-released, H3 from the units by
    # tenvacgq they were held to: the same counts
    for level in ("State", "BlockGroup", "Block"):
        assert by_level["H1"][level]["mae"] == by_level["H3"][level]["mae"]
    # the P.L. margins of the simulation, H1's occupancy now with them
    assert result["margins"]["H1"]["Block"]["moe90"] > 0
    assert result["margins"]["P1"]["Block"]["moe90"] > 0


def test_evaluate_and_infer_say_what_they_cover(state: Path, tmp_path: Path, capsys) -> None:
    run = str(state / "reference")
    assert main(["evaluate", run, "--simulations", "1", "-q", "--json", str(tmp_path / "e.json"),
                 "--html", str(tmp_path / "e.html")]) == 0  # fmt: skip
    out = capsys.readouterr().out
    line = (
        "H1, P16, H3, H4, H5, H6, H7, H9, H10, H11, H12: error bars of the household run "
        "(dhch-2020), re-released with the persons; the persons estimated apart from the "
        "households, as the release was"
    )
    assert line in out.splitlines()
    result = json.loads((tmp_path / "e.json").read_text())
    assert result["released"]["household_run"]["tables"][0] == "H1"
    assert result["gls"]["available"] is False  # the GLS reads pl94 person runs only
    page = (tmp_path / "e.html").read_text()
    assert 'id="household-run"' in page and "(dhch-2020)" in page
    assert "P12 Sex by age" in page and "H9 Household size: expected errors" in page
    assert "P16 Household type: expected errors" in page
    assert main(["infer", run, "--out", str(tmp_path / "inf"), "-q"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "'dhcp-2020'" in err and "pl94 schema only" in err
