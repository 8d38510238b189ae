"""The household run of a release (issue 33): households first, then persons held to them.

A small generated state (one tract of Vermont) released with a person budget and the
DDP's household budget (``ddp-2010-households``): every household invariant and
constraint holds and every block's household persons are what its households need
(the manifest's named checks); ``--from-measurements`` and ``--resume`` reproduce it
byte for byte; ``--units independent`` runs the two as the DDP did. The person run is a
small pure-DP budget on ``pl94`` (a household run composes only with a run of its kind);
each release measures about 170,000 household cells per geounit, so the module is slow.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from censusdp.cli import main
from censusdp.data.schema_dhc import FIRST_GQ_RELGQ, GQ_CODES
from censusdp.io.budget_files import load_preset
from censusdp.io.staging import Staging
from censusdp.privacy.budget_config import budget_from_toml
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release import pipeline
from censusdp.release.checkpoint import Checkpoint
from censusdp.release.options import Execution, ReleaseOptions
from censusdp.release.validate import validate_run

pytestmark = pytest.mark.slow

LEVELS = (("US", 0, "1/5"), ("State", 2, "1/5"), ("County", 5, "3/25"), ("Tract_Group", 9, "3/25"),
          ("Tract", 11, "3/25"), ("BlockGroup", 12, "3/25"), ("Block", 16, "3/25"))  # fmt: skip
PERSONS_TOML = """
name = "pl94-pure"
description = "a small pure-DP person run (the DDP's mechanism) for household tests"
schema = "pl94"
mechanism = "geometric"
epsilon = "4"
delta = "1e-10"
neighbours = "bounded"
""" + "".join(
    f'[[geolevels]]\nname = "{n}"\nlength = {k}\nshare = "{s}"\n[geolevels.queries]\n'
    'detailed = "1/5"\nhhgq = "2/5"\n"votingage*hispanic*cenrace" = "2/5"\n\n'
    for n, k, s in LEVELS
)
BUDGET = ReleaseBudget(
    budget_from_toml(PERSONS_TOML, origin="test"), load_preset("ddp-2010-households")
)
HOUSEHOLD_CHECKS = (
    "households_nonnegative_integers",
    "households_hierarchy_consistent",
    "households_within_housing_units",
    "households_structural_zeros",
    "persons_households_consistent",
)


class _Killed(BaseException):
    """A simulated SIGKILL (nothing may catch it on the way out)."""


@pytest.fixture(scope="module")
def state(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("households")
    rc = main(["generate", "--state", "VT", "--seed", "2", "--scale", "0.003",
               "--out", str(base / "cef"), "--quiet"])  # fmt: skip
    assert rc == 0
    pipeline.run_release(base / "cef", base / "reference", BUDGET, ReleaseOptions(seed=7))
    return base


def _files(run: Path) -> dict[str, str]:
    return {
        str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    }


def killed_at(monkeypatch, stop: Callable[[str], bool], release: Callable[[], object]) -> list[str]:
    """Run ``release`` until its checkpoint records a step whose name ``stop`` accepts
    and kill it there (the staging left to resume, as after a SIGKILL); the steps it
    recorded."""
    real = Checkpoint.record
    done: list[str] = []

    def record(self, name, rec):
        real(self, name, rec)
        done.append(name)
        if stop(name):
            raise _Killed(name)

    with monkeypatch.context() as m:
        m.setattr(Checkpoint, "record", record)
        m.setattr(Staging, "abort", lambda self, **kw: self._unlock())
        with pytest.raises(_Killed):
            release()
    return done


def test_a_household_release_passes_every_household_check(state: Path) -> None:
    run = state / "reference"
    manifest = json.loads((run / "manifest.json").read_text())
    checks = manifest["validation"]["checks"]
    assert all(checks[name]["ok"] for name in HOUSEHOLD_CHECKS), checks
    assert "units_consistent" not in checks  # the occupancy checks are the households'
    assert manifest["units"]["schema"] == "household2010"
    assert manifest["estimation_order"] == ["units", "persons"]
    assert manifest["units_estimation"] == "consistent"
    assert manifest["epsilon"] == pytest.approx(BUDGET.persons.epsilon() + 2.0)
    # occupied units in the unit MDF (production's household layout: a housing unit with
    # TEN 9 and VACS 0) are the households released
    units = pq.read_table(run / "mdf_units.parquet", columns=["RTYPE", "TEN", "VACS"]).to_pydict()
    occupied = sum(
        r == "2" and t == "9" and v == "0"
        for r, t, v in zip(units["RTYPE"], units["TEN"], units["VACS"], strict=True)
    )
    assert occupied == manifest["households_released"] > 0
    # the root's households fit its persons (this one-tract state has no group quarters:
    # exactly), and the least squares chose which to drop: not fewer households than the
    # truth's 1,315 (proportional caps by size released 966)
    root = manifest["estimation"]["household_persons_at_root"]
    assert root["needed"] == root["available"] == manifest["persons_released"]
    assert manifest["households_released"] >= 1315
    report = validate_run(run)
    assert report.ok, report.failures()


def test_from_measurements_reproduces_the_household_release(state: Path, tmp_path: Path) -> None:
    manifest = pipeline.reestimate(state / "reference", tmp_path / "again")
    assert _files(tmp_path / "again") == _files(state / "reference")
    assert (
        manifest["households_released"]
        == json.loads((state / "reference" / "manifest.json").read_text())["households_released"]
    )


def test_a_resumed_household_release_is_byte_identical(
    state: Path, tmp_path: Path, monkeypatch
) -> None:
    """Killed after the household run's block level is checkpointed (before persons)."""
    out = tmp_path / "run"
    done = killed_at(
        monkeypatch,
        lambda name: name.startswith("estimate/units") and name.endswith("/5"),
        lambda: pipeline.run_release(state / "cef", out, BUDGET, ReleaseOptions(seed=7)),
    )
    assert not any(name.startswith("estimate/persons") for name in done)
    manifest = pipeline.run_release(
        state / "cef", out, BUDGET, ReleaseOptions(seed=7), Execution(), resume=True
    )
    assert _files(out) == _files(state / "reference")
    assert "estimate/units/5" in manifest["resumed"]["reused"]


def test_units_independent_runs_households_alone(state: Path, tmp_path: Path) -> None:
    manifest = pipeline.run_release(
        state / "cef",
        tmp_path / "run",
        BUDGET,
        ReleaseOptions(seed=7, unit_consistency="independent"),
    )
    checks = manifest["validation"]["checks"]
    assert manifest["units_estimation"] == "independent"
    assert "persons_households_consistent" not in checks
    assert all(checks[name]["ok"] for name in HOUSEHOLD_CHECKS[:-1])


def test_evaluate_reads_a_household_release(state: Path, tmp_path: Path, capsys) -> None:
    run = str(state / "reference")
    out = tmp_path / "eval.json"
    assert main(["evaluate", run, "--input", str(state / "cef"), "-q", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    # the household NMF checked against the truth's households: the realised noise of
    # every (level, query) has the stated variance (two-sided geometric, Table 2 scales)
    nmf = result["noisy_measurements"]["units"]
    assert nmf["schema"] == "household2010"
    for level, queries in nmf["by_level"].items():
        assert len(queries) == 6, level
        for query, rec in queries.items():
            emp = rec["empirical"]
            assert emp["n"] == rec["n"], (level, query)
    # the household tables against the truth's households (1,315 in this state)
    hh = result["households"]
    assert hh["available"] and list(hh["tables"]) == ["H13", "P18", "P22", "P15", "H1"]
    released = json.loads((state / "reference" / "manifest.json").read_text())[
        "households_released"
    ]
    assert hh["totals"]["State"] == {**hh["totals"]["State"], "truth": 1315, "released": released}
    assert hh["tables"]["H13"]["levels"]["Block"]["l1"] > 0
    block = nmf["by_level"]["Block"]["detailed"]["empirical"]
    assert block["n"] > 1_000_000  # the live cells of every block
    assert block["variance_ratio"] == pytest.approx(1.0, abs=0.01)
    assert block["coverage90"] == pytest.approx(0.90, abs=0.01)
    assert abs(block["mean_error"]) < 0.05


def test_error_bars_cover_the_household_run_and_infer_reads_the_person_run(
    state: Path, tmp_path: Path, capsys
) -> None:
    """The error bars re-release the household run with the persons (held to the
    households' sizes, as the release was): H1 and the household tables get theirs;
    infer's GLS reads the person run (``pl94``) and says in one line it has none of the
    household run's lines, whose AMC margins ``--simulations`` gives."""
    run = str(state / "reference")
    out = tmp_path / "expected.json"
    assert main(["evaluate", run, "--simulations", "1", "-q", "--json", str(out)]) == 0
    line = (
        "H1, P15, P18, P22, H13: error bars of the household run (household2010), "
        "re-released with the persons; the persons held to the re-released households' "
        "sizes, as the release held its persons (units_estimation consistent)"
    )
    assert line in capsys.readouterr().out.splitlines()
    result = json.loads(out.read_text())
    released = result["released"]
    household = ["H1", "P15", "P18", "P22", "H13"]
    assert released["measures"] == ["total_population", "P1", "P2", "P3", "P4", "P5", *household]
    assert released["household_run"]["tables"] == household
    assert "held to the re-released households' sizes" in released["household_run"]["person_run"]
    # the persons fit the households only in the release itself: no rough truth drawn
    assert released["plausible_truth"] == "the release itself (its MDF and tables)"
    for table in household:
        assert released["by_level"][table]["Block"]["mae"] > 0, table
        assert released["by_level"][table]["Block"]["counts_per_simulation"] >= 44
    assert released["margins"]["H1"]["Block"]["moe90"] > 0
    assert released["by_level"]["P1"]["Block"]["mae"] > 0
    assert result["gls"]["available"] and result["gls"]["by_level"]["P1"]["Block"]["mean_sd"] > 0
    args = ["infer", run, "--out", str(tmp_path / "inf"), "--simulations", "1", "-q"]
    assert main(args) == 0
    said = [ln for ln in capsys.readouterr().out.splitlines() if "not estimated" in ln]
    assert said == [
        "H1_002N, H1_003N not estimated: infer has no GLS of a household run (household2010); "
        "their moe90 and moe95 come from --simulations"
    ]
    margins = pq.read_table(tmp_path / "inf" / "margins.parquet").to_pydict()
    rows = list(zip(margins["variable"], margins["gls_sd"], margins["moe90"], strict=True))
    assert all(sd is None for v, sd, _ in rows if v in ("H1_002N", "H1_003N"))
    assert any(moe for v, _, moe in rows if v == "H1_002N")  # the households re-released
    assert all(sd == moe == 0 for v, sd, moe in rows if v == "H1_001N")  # invariant
    assert any(sd and moe for v, sd, moe in rows if v == "P1_001N")  # the person run's
    manifest = json.loads((tmp_path / "inf" / "manifest.json").read_text())
    assert set(manifest["not_estimated"]) == {"H1_002N", "H1_003N"}


def test_a_re_release_draws_the_households_noise_at_the_release_scale(state: Path) -> None:
    """Each re-release measures the households with the release's own mechanisms (the
    variance of every household query at every level is the NMF's) and fresh noise: at
    the release's budget the household tables' errors are those of its noise; with the
    household budget a million times larger they all but vanish (a re-release that kept
    the truth's answers, or drew them at another scale, fails one or the other)."""
    import dataclasses
    from fractions import Fraction

    import numpy as np
    import pyarrow as pa

    from censusdp.evaluate.errorbars import ErrorPool
    from censusdp.infer.amc import rerelease_measurements, simulate_margins
    from censusdp.infer.options import MarginOptions
    from censusdp.infer.release import amc_plan
    from censusdp.io.rundir import RunDir
    from censusdp.privacy.budget import scaled_mechanism

    run = state / "reference"
    plan = amc_plan(run)
    _, units = rerelease_measurements(plan, 5)
    assert set(units) == {"household2010"}
    nmf = RunDir(run).nmf_table("units").select(["geolevel", "query", "variance"])
    nmf = nmf.cast(pa.schema([("geolevel", pa.string()), ("query", pa.string()),
                              ("variance", pa.float64())]))  # fmt: skip
    distinct = nmf.group_by(nmf.column_names).aggregate([])
    recorded = set(zip(*(distinct[c].to_pylist() for c in nmf.column_names), strict=True))
    drawn = {
        (m.geolevel, m.query, float(v))
        for m in units["household2010"]
        for v in np.unique(m.variance)
        if np.isfinite(v)  # a bypassed single child is not measured
    }
    assert drawn == recorded and len(drawn) >= 30

    def block_errors(p) -> dict[str, float]:
        levels = tuple(p.geo.tabulation.geolevels.names)
        pool = ErrorPool(levels, ("H1", "P18", "H13"))
        margins = MarginOptions(simulations=1, seed=3, truth="release")
        simulate_margins(p, [], margins, observe=pool.add)
        return {t: rec["Block"]["mae"] for t, rec in pool.summary().items()}

    sharp_plan = [(g, q, scaled_mechanism(m, Fraction(10**6))) for g, q, m in plan.plans[1]]
    release = block_errors(plan)
    sharp = block_errors(dataclasses.replace(plan, plans=(plan.plans[0], sharp_plan)))
    for table in ("H1", "P18", "H13"):
        assert release[table] > 0.3, (table, release)
        assert sharp[table] < 0.1 * release[table], (table, sharp, release)


def test_evaluate_trials_rerun_a_household_release(state: Path, tmp_path: Path) -> None:
    """``evaluate --trials`` re-runs the release's plan (households, then persons held to
    them) and pools the trials' errors against the truth."""
    out = tmp_path / "eval.json"
    args = ["evaluate", str(state / "reference"), "--input", str(state / "cef"),
            "--trials", "1", "--trial-seed", "3", "-q", "--json", str(out)]  # fmt: skip
    assert main(args) == 0
    trials = json.loads(out.read_text())["trials"]
    assert trials["trials"] == 1 and len(trials["seeds"]) == 1
    errors = trials["errors"]
    assert errors and "total_population" in errors
    # the household tables' errors too, pooled as the P.L. tables' (1,315 households)
    assert {"P15", "P18", "P22", "H13"} <= set(errors)
    state_h13 = errors["H13"]["State"]
    assert state_h13["tvd"]["trials"] == 1 and 0 < state_h13["tvd"]["mean"] < 1
    assert sum(b["n"] for b in state_h13["by_bin"].values()) == 8  # the table's 8 lines


def _facilities(persons, units, n: int, residents: int):
    """``persons`` and ``units`` with ``n`` nursing facilities of ``residents`` persons
    in all, in the first unit's block (new ids past the others)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    block, place = units["geocode"][0].as_py(), units["place"][0].as_py()
    u0, p0 = pc.max(units["unit_id"]).as_py() + 1, pc.max(persons["person_id"]).as_py() + 1
    rng = np.random.default_rng(0)
    nursing = 301  # production's QGQTYP of a nursing facility, and its relgq level
    relgq = FIRST_GQ_RELGQ + GQ_CODES.index(nursing)
    gq = {"unit_id": np.arange(u0, u0 + n), "geocode": [block] * n, "gqtype": [3] * n,
          "occupied": [True] * n, "aian_area": [""] * n, "place": [place] * n,
          "ten": [0] * n, "vacs": [0] * n, "qgqtyp": [nursing] * n}  # fmt: skip
    res = {"person_id": np.arange(p0, p0 + residents), "unit_id": u0 + np.arange(residents) % n,
           "geocode": [block] * residents, "hhgq": [3] * residents,
           "sex": rng.integers(1, 3, residents), "age": rng.integers(70, 100, residents),
           "hispanic": [0] * residents, "cenrace": [1] * residents, "rel": [15] * residents,
           "citizen": [1] * residents, "relgq": [relgq] * residents}  # fmt: skip
    persons = pa.concat_tables(
        [persons, pa.table(res).select(persons.column_names).cast(persons.schema)]
    )
    units = pa.concat_tables([units, pa.table(gq).select(units.column_names).cast(units.schema)])
    return persons.sort_by("geocode"), units.sort_by("geocode")


def _two_states(vt: Path, out: Path, facilities: int) -> Path:
    """Delaware (tiny, generated here; with ``facilities`` nursing facilities of 300
    residents) beside the module's Vermont, as one input: Vermont's ids moved past
    Delaware's."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from censusdp.generate import generate_state

    generate_state("DE", 3, out / "de", scale=0.002)
    (out / "cef").mkdir()
    de = {n: pq.read_table(out / "de" / f"{n}.parquet") for n in ("persons", "units")}
    if facilities:
        de["persons"], de["units"] = _facilities(de["persons"], de["units"], facilities, 300)
    for name in ("persons", "units"):
        second = pq.read_table(vt / f"{name}.parquet")
        for col in ("person_id", "unit_id"):
            if col in second.column_names:
                moved = pc.add(second[col], pa.scalar(10**6, second[col].type))
                second = second.set_column(second.column_names.index(col), col, moved)
        pq.write_table(pa.concat_tables([de[name], second]), out / "cef" / f"{name}.parquet")
    return out / "cef"


@pytest.mark.parametrize("facilities", [0, 3], ids=["no-group-quarters", "nursing-facilities"])
def test_each_state_of_several_holds_its_own_households(
    state: Path, tmp_path: Path, facilities: int
) -> None:
    """Two states: each state's households must fit its own persons, not only the
    nation's theirs. With the row on the root alone the states' least squares shared
    the nation's households out without it, and the person run was a one-line
    InfeasibleError: without group quarters ``State 10: the released households need
    3579 to 3579 household persons, which its person bounds (... total 3974 to 3974)
    cannot meet``; with three nursing facilities (300 residents) in Delaware, ``State
    50: ... need 3943 to 3943 ... (total 3393 to 3393)``. There Delaware's households
    fill its housing units, so the rounding's repair exchanges households between the
    states rather than moving them."""
    cef = _two_states(state / "cef", tmp_path, facilities)
    manifest = pipeline.run_release(cef, tmp_path / "run", BUDGET, ReleaseOptions(seed=7))
    checks = manifest["validation"]["checks"]
    assert all(checks[name]["ok"] for name in HOUSEHOLD_CHECKS), checks
    rows = manifest["estimation"]["household_persons_by_level"]["State"]
    assert rows["50"] == {"least": 3393, "available": 3393, "needed": 3393}  # Vermont's
    de = rows["10"]
    assert de["least"] <= de["needed"] <= de["available"]
    assert de["least"] == (0 if facilities else de["available"])
    # each state's released households need at most its household persons (Vermont, no
    # group quarters: exactly, without a household of 7 or more)
    units = pq.read_table(tmp_path / "run" / "mdf_units.parquet", columns=["TABBLKST", "HHSIZE"])
    persons = pq.read_table(tmp_path / "run" / "mdf_persons.parquet", columns=["TABBLKST"])
    for st, gq in (("10", facilities), ("50", 0)):
        sizes = [int(s) for t, s in zip(*units.to_pydict().values(), strict=True) if t == st]
        n = sum(t == st for t in persons.column("TABBLKST").to_pylist()) - gq
        assert 0 < sum(sizes) <= n, st
        assert sum(sizes) == n or 7 in sizes or gq, st


def test_compare_puts_two_household_releases_side_by_side(state: Path, tmp_path: Path) -> None:
    """``compare`` of two household releases of one truth: each one's households and
    household tables beside the other's, in the JSON and on the page."""
    pipeline.run_release(state / "cef", tmp_path / "b", BUDGET, ReleaseOptions(seed=8))
    page, js = tmp_path / "c.html", tmp_path / "c.json"
    args = ["compare", str(state / "reference"), str(tmp_path / "b"), "--input",
            str(state / "cef"), "--html", str(page), "--json", str(js), "-q"]  # fmt: skip
    assert main(args) == 0
    rows = {r["geolevel"]: r for r in json.loads(js.read_text())["households"]}
    runs = [state / "reference", tmp_path / "b"]
    released = [json.loads((r / "manifest.json").read_text())["households_released"] for r in runs]
    assert rows["State"]["households"] == released and rows["State"]["households_true"] == 1315
    assert all(0 < x <= 1 for x in rows["Block"]["tvd"]["H13"])
    assert '<section id="households">' in page.read_text()
