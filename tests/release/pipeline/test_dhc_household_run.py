"""The 2020 DHC's household and unit run (``--preset dhc-2020``, its companion
``dhc-2020-units``) on a small generated input: both histograms measured into the unit
run's NMF with production's noise variance for every (level, query), the units
(``tenvacgq``) and the households estimated, the DHC unit MDF written, and every unit
constraint of production's run holding in the files; ``validate`` proves it and catches
a tampered unit record.

Production's values (DAS_2020_DHC_Production_Code, ``programs/strategies/dhch_strategies.py``,
``DecompTestStrategyDHCH_20220922_exp_iteration_23_1``, which ``unit_US.ini`` names) are
each measurement's rho in ten-thousandths, in the strategy's query order, ``tenvacgq``
(the unit histogram's query) last; ``tests/privacy/budget/test_dhc_presets.py`` checks
this transcription against the production file. The variance of a measurement is
``1 / rho_q`` (discrete Gaussian), and a geounit that takes its single child's budget
(bypass) is measured with the sum of both levels' rho.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_dhc_person_run import (
    LEVELS,
    _discrete_gaussian_variance,
    _small_vermont,
    validate_tampered_table,
)

from censusdp.data.invariants import Invariants
from censusdp.data.units_dhc import unit_constraint_violations
from censusdp.io.budget_files import load_preset
from censusdp.io.mdf_parts import mdf_part_dhc_units
from censusdp.io.nmf_files import read_nmf_rows
from censusdp.io.rundir import RunDir
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.dhc_units import gqhh_vector
from censusdp.release.options import ReleaseOptions
from censusdp.release.pipeline import reestimate, run_release
from censusdp.release.validate import validate_run

pytestmark = pytest.mark.slow  # two 1.2- and 1.6-million-cell histograms at ~15 geounits

UNIT_QUERIES = (
    "multig*hisp*hhtenshort_2lev", "hisp*hhtenshort_2lev", "hisp*hhtenshort_2lev*race",
    "partner_type_detailed_own_child_status*sex*hhtenshort_2lev",
    "coupled_hh_type*hisp*hhtenshort_2lev",
    "sex*hisp*hhtenshort_3lev*race*detailedcoupletypemultgendetownchildsize",
    "sex*hisp*hhtenshort_3lev*race*hhage*detailedcoupletypemultgendetownchildsize",
    "hhtenshort_3lev*hhage*detailedcoupletypemultgendetownchildsize", "detailed", "tenvacgq",
)  # fmt: skip
PRODUCTION_RHO = {  # ten-thousandths; level names without underscores
    "Block": (11, 3, 17, 22, 44, 15, 15, 3, 15, 15),
    "BlockGroup": (291, 78, 442, 581, 1162, 407, 407, 78, 407, 407),
    "TractSubset": (1150, 310, 1750, 2300, 4601, 1610, 1610, 310, 1610, 1610),
    "TractSubsetGroup": (973, 214, 1500, 1946, 973, 973, 973, 214, 973, 973),
    "Prim": (973, 214, 1500, 1946, 973, 973, 973, 214, 973, 973),
    "County": (986, 266, 1500, 1972, 3944, 1380, 1380, 266, 1380, 1380),
    "State": (714, 193, 191, 1428, 714, 3216, 3216, 193, 3931, 3216),
    "US": (792, 212, 212, 792, 792, 257, 257, 212, 1049, 259),
}


@pytest.fixture(scope="module")
def dhc_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("dhc-household-run")
    cef = _small_vermont(d / "cef", d / "generated")
    budget = ReleaseBudget(load_preset("dhc-2020"), load_preset("dhc-2020-units"))
    run_release(cef, d / "run", budget, ReleaseOptions(seed=3))
    return d / "run"


def test_every_unit_nmf_variance_is_productions(dhc_run: Path) -> None:
    t = read_nmf_rows(
        dhc_run / "noisy_measurements_units.parquet", columns=["geolevel", "query", "variance"]
    ).unify_dictionaries()
    distinct = t.group_by(["geolevel", "query", "variance"]).aggregate([]).to_pydict()
    got: dict[tuple[str, str], list[float]] = {}
    for level, query, v in zip(*distinct.values(), strict=True):
        got.setdefault((str(level), str(query).replace(" ", "").lower()), []).append(float(v))
    for (level, query), variances in got.items():
        q, at = UNIT_QUERIES.index(query), LEVELS.index(level)
        share = Fraction(PRODUCTION_RHO[level][q], sum(PRODUCTION_RHO[level]))
        allowed = [  # its level's rho, or (bypass) with single children's levels' added
            _discrete_gaussian_variance(
                float(1 / (share * sum(Fraction(sum(PRODUCTION_RHO[lv]), 10_000) for lv in run)))
            )
            for run in (LEVELS[at:b] for b in range(at + 1, len(LEVELS) + 1))
        ]
        for v in variances:
            assert np.isclose(allowed, v, rtol=1e-9).any(), (level, query, v)
    measured = {lv for lv, _ in got}
    for level in measured:  # the nine household queries and tenvacgq at every level
        assert {q for lv, q in got if lv == level} == set(UNIT_QUERIES), level
    assert {"State", "Prim", "Block"} <= measured and "US" not in measured
    for q, query in enumerate(UNIT_QUERIES):
        want = _discrete_gaussian_variance(10_000 / PRODUCTION_RHO["Block"][q])
        np.testing.assert_allclose(got[("Block", query)], [want], rtol=1e-9)


def _released(run: Path) -> tuple[object, object, Invariants]:
    rd = RunDir(run)
    manifest = json.loads((run / "manifest.json").read_text())
    levels = [tuple(x) for x in manifest["geolevels"]]
    from censusdp.data.geography import GeoLevels

    hierarchy, inv = rd.invariants(GeoLevels.from_pairs(levels))
    households, units = mdf_part_dhc_units(
        run / "mdf_units.parquet" / "part-00000.parquet", hierarchy.blocks
    )
    return households, units, inv


def test_every_unit_constraint_holds_in_the_files(dhc_run: Path) -> None:
    households, units, inv = _released(dhc_run)
    assert inv.gq_types is not None and inv.gq_types.sum() >= 1  # the GQ block's facility
    h1 = np.column_stack([units[:, 4:11].sum(axis=1), units[:, :4].sum(axis=1)])
    gqhh = np.column_stack([inv.housing_units, inv.gq_types])
    broken = unit_constraint_violations(households, units, h1, gqhh)
    assert not any(m.any() for m in broken.values()), {k: int(m.sum()) for k, m in broken.items()}
    assert np.array_equal(gqhh_vector(units), gqhh)  # housing units and GQ types exact
    assert households.sum() == units[:, :4].sum() > 0
    manifest = json.loads((dhc_run / "manifest.json").read_text())
    assert manifest["households_released"] == int(households.sum())
    assert manifest["units"]["schema"] == "dhch-2020"
    assert "tenvacgq" in manifest["units_estimation"]


def test_validate_passes_and_catches_a_tampered_unit_record(dhc_run: Path, tmp_path: Path) -> None:
    report = validate_run(dhc_run)
    assert report.ok, report.failures()
    assert report.checks["unit_constraints"]["ok"] and report.checks["dhc_unit_records"]["ok"]
    bad = tmp_path / "run"
    shutil.copytree(dhc_run, bad)
    part = bad / "mdf_units.parquet" / "part-00000.parquet"
    table = pq.read_table(part)
    gq = table.column("GQTYPE").to_pylist()
    row = next(i for i, g in enumerate(gq) if g not in ("000", None))
    gq[row] = "101" if gq[row] != "101" else "102"  # a facility of another GQ type
    table = table.set_column(
        table.column_names.index("GQTYPE"),
        "GQTYPE",
        pa.array(gq, table.schema.field("GQTYPE").type),
    )
    pq.write_table(table, part)
    report = validate_run(bad)  # the part's SHA-256 is not its index entry's
    assert not report.ok and not report.checks["mdf_readable"]["ok"]
    # the index rewritten to the tampered part: the records themselves are caught
    index = json.loads((part.parent / "_parts.json").read_text())
    index["parts"][0]["sha256"] = hashlib.sha256(part.read_bytes()).hexdigest()
    (part.parent / "_parts.json").write_text(json.dumps(index))
    report = validate_run(bad)
    assert not report.ok
    assert not report.checks["unit_constraints"]["ok"]
    assert "gq_vect" in report.checks["unit_constraints"]["detail"]


DHC_HOUSEHOLD_TABLES = ("P16", "H9", "H3", "H4", "H5", "H6", "H7", "H10", "H11", "H12")


def _columns(run: Path, names: tuple[str, ...]) -> dict[str, dict[str, np.ndarray]]:
    from censusdp.io.tables import read_table

    tables = {n: read_table(run / "tables", n) for n in names}
    return {n: {c: np.asarray(t.column(c).to_pylist()) for c in t.column_names}
            for n, t in tables.items()}  # fmt: skip


def test_the_dhc_household_tables_are_written_and_add_up(dhc_run: Path) -> None:
    from censusdp.io.layout import table_csv_file
    from censusdp.io.tables import read_codebook

    col = _columns(dhc_run, ("H1", *DHC_HOUSEHOLD_TABLES))
    geoids = col["H1"]["GEOID"]
    assert len(set(geoids)) == len(geoids) > 3
    for name in DHC_HOUSEHOLD_TABLES:
        for ident in ("GEOID", "SUMLEV", "NAME"):  # one row per geounit, as H1's
            np.testing.assert_array_equal(col[name][ident], col["H1"][ident], err_msg=name)
        for form in ("wide", "long"):
            assert (dhc_run / "tables" / table_csv_file(name, form)).is_file()
    p16, h9, h3, h4, h5, h6, h7, h10, h11, h12 = (col[n] for n in DHC_HOUSEHOLD_TABLES)
    households = p16["P16_001N"]
    assert households.sum() > 0
    # at every geounit: households = occupied units, by tenure, by size; the units H1's
    np.testing.assert_array_equal(h4["H4_001N"], households)
    np.testing.assert_array_equal(h9["H9_001N"], households)
    np.testing.assert_array_equal(h3["H3_002N"], households)
    np.testing.assert_array_equal(h3["H3_001N"], col["H1"]["H1_001N"])
    np.testing.assert_array_equal(h3["H3_002N"], col["H1"]["H1_002N"])
    np.testing.assert_array_equal(h5["H5_001N"], h3["H3_003N"])
    np.testing.assert_array_equal(p16["P16_002N"] + p16["P16_007N"], households)
    np.testing.assert_array_equal(h4["H4_002N"] + h4["H4_003N"] + h4["H4_004N"], households)
    # by the householder: the same households; the households' tenure is the units'
    for table, name in ((h6, "H6"), (h7, "H7"), (h10, "H10"), (h11, "H11"), (h12, "H12")):
        np.testing.assert_array_equal(table[f"{name}_001N"], households, err_msg=name)
    np.testing.assert_array_equal(h10["H10_002N"], h4["H4_002N"] + h4["H4_003N"])
    np.testing.assert_array_equal(h10["H10_010N"], h4["H4_004N"])
    np.testing.assert_array_equal(h12["H12_003N"] + h12["H12_011N"], h9["H9_002N"])
    np.testing.assert_array_equal(h11["H11_002N"], h10["H10_002N"])
    np.testing.assert_array_equal(h7["H7_002N"] + h7["H7_010N"], h6["H6_001N"])
    # the state rows: the unit MDF's households and units by tenvacgq
    mdf_households, units, inv = _released(dhc_run)
    state = list(p16["SUMLEV"]).index("040")
    assert households[state] == mdf_households.sum() == units[:, :4].sum()
    assert h3["H3_001N"][state] == inv.housing_units.sum() == units[:, :11].sum()
    assert h3["H3_003N"][state] == units[:, 4:11].sum()
    assert [h4[f"H4_00{k}N"][state] for k in (2, 3)] == [units[:, 0].sum(), units[:, 1].sum()]
    assert h4["H4_004N"][state] == units[:, 2:4].sum()
    assert [h5[f"H5_00{k + 2}N"][state] for k in range(7)] == list(units[:, 4:11].sum(axis=0))
    book = read_codebook(dhc_run / "tables").column("variable").to_pylist()
    assert {"P16_009N", "H9_008N", "H3_003N", "H4_004N", "H5_008N"} <= set(book)


@pytest.mark.parametrize(
    ("name", "part", "column"),
    [("H4", "part-00001.parquet", "H4_002N"), ("P16", "part-00000.parquet", "P16_003N")],
)
def test_validate_catches_a_tampered_dhc_household_table_cell(
    dhc_run: Path, tmp_path: Path, name: str, part: str, column: str
) -> None:
    report = validate_tampered_table(dhc_run, tmp_path, name, part, column)
    assert not report.checks["tables_match_mdf"]["ok"]
    detail = report.checks["tables_match_mdf"]["detail"]
    assert f"{name}.parquet/{part}: 1 rows differ from the tabulation" in detail
    assert report.checks["unit_constraints"]["ok"]  # the MDF itself is untouched


def test_evaluate_reads_a_dhc_household_release(dhc_run: Path, tmp_path: Path) -> None:
    """``evaluate`` of a DHC release with its household run against its truth: the
    persons measured against the truth (sex by age too), the unit NMF (two histograms)
    summarised without it, the households and units (P16, H9, H3, H4, H5) against the
    truth's, with the households released and true; before, the unit NMF's truth was built
    on the occupancy schema and evaluate stopped with an internal error."""
    from censusdp.evaluate import evaluate

    result = evaluate(dhc_run.parent / "cef", dhc_run, json_path=tmp_path / "e.json")
    nmf = result["noisy_measurements"]
    assert nmf["units"]["schema"] == "dhch-2020"
    levels = nmf["units"]["by_level"]
    assert levels and all(set(queries) == set(UNIT_QUERIES) for queries in levels.values())
    assert result["invariants_ok"]
    hh = result["households"]
    assert hh["available"] and list(hh["tables"]) == [
        "P16", "H9", "H3", "H4", "H5", "H6", "H7", "H10", "H11", "H12",
    ]  # fmt: skip
    state = hh["totals"]["State"]
    assert state["released"] == int(_released(dhc_run)[0].sum()) and state["truth"] > 0
    for name in ("P12", "PCT12"):
        assert result["metrics"][name]["State"]["pop"] == result["metrics"]["P1"]["State"]["pop"]
    assert (tmp_path / "e.json").is_file()


# -- held to a P.L. 94 release's H1 (--h1-from, production's h1) -----------------------


@pytest.fixture(scope="module")
def h1_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A P.L. 94 release of the small input, then the DHC release held to its H1."""
    d = tmp_path_factory.mktemp("dhc-h1")
    cef = _small_vermont(d / "cef", d / "generated")
    pl94 = ReleaseBudget(load_preset("pl94-2020"), load_preset("pl94-2020-units"))
    run_release(cef, d / "pl94", pl94.scaled(epsilon=2), ReleaseOptions(seed=5))
    budget = ReleaseBudget(load_preset("dhc-2020"), load_preset("dhc-2020-units"))
    run_release(cef, d / "dhc", budget, ReleaseOptions(seed=3, h1_from=str(d / "pl94")))
    return d / "pl94", d / "dhc"


def test_the_households_are_the_pl94_releases_occupied_units(h1_runs) -> None:
    from censusdp.io.atomic import sha256_of
    from censusdp.io.mdf_read import mdf_unit_counts
    from censusdp.privacy.release_budget import release_privacy

    pl94, dhc = h1_runs
    households, units, inv = _released(dhc)
    manifest = json.loads((dhc / "manifest.json").read_text())
    from censusdp.data.geography import GeoLevels, Hierarchy

    levels = GeoLevels.from_pairs([tuple(x) for x in manifest["geolevels"]])
    hierarchy = Hierarchy.from_blocks(inv.blocks, levels)
    pl = mdf_unit_counts(pl94 / "mdf_units.parquet", hierarchy)  # vacant, occupied, GQ
    assert np.array_equal(inv.h1_occupied, pl[:, 1])
    assert np.array_equal(np.asarray(households.sum(axis=1)).ravel(), pl[:, 1])
    assert np.array_equal(units[:, 4:11].sum(axis=1), pl[:, 0])
    source = manifest["h1_source"]
    assert source["manifest_sha256"] == sha256_of(pl94 / "manifest.json")
    assert (source["occupied"], source["vacant"]) == (int(pl[:, 1].sum()), int(pl[:, 0].sum()))
    # the privacy loss is the DHC budget's own; the P.L. release's is recorded beside it
    own = release_privacy(load_preset("dhc-2020"), load_preset("dhc-2020-units"))
    assert manifest["rho"] == own["rho"] and manifest["epsilon"] == own["epsilon"]
    pl_manifest = json.loads((pl94 / "manifest.json").read_text())
    assert source["privacy"]["spent_by_that_release"]["epsilon"] == pl_manifest["epsilon"]
    assert "P.L. 94" in manifest["fidelity"]["differences"]["units"]
    # the DHC release's H1 is the P.L. release's, at every geounit of the tables
    ours, theirs = _columns(dhc, ("H1",))["H1"], _columns(pl94, ("H1",))["H1"]
    for col in ("GEOID", "H1_001N", "H1_002N", "H1_003N"):
        np.testing.assert_array_equal(ours[col], theirs[col], err_msg=col)


def test_validate_checks_the_h1_source(h1_runs, tmp_path: Path) -> None:
    _, dhc = h1_runs
    report = validate_run(dhc)
    assert report.ok, report.failures()
    assert (
        report.checks["h1_source"]["ok"]
        and "h1_occupied" in (report.checks["unit_constraints"]["detail"])
    )
    report = _validate_with_h1_source_off_by_one(dhc, tmp_path / "dhc", "occupied")
    assert not report.ok and "h1_source.occupied" in report.checks["h1_source"]["detail"]


def _validate_with_h1_source_off_by_one(run: Path, copy: Path, key: str):
    """``validate`` of a copy of ``run`` whose manifest's ``h1_source.<key>`` is one more."""
    shutil.copytree(run, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["h1_source"][key] += 1
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return validate_run(copy)


# -- the persons held to the same P.L. 94 release (production's pl94) -----------------

PL94_TABLES = ("P1", "P2", "P3", "P4", "P5")


def test_the_persons_are_the_pl94_releases_at_every_geounit(h1_runs, dhc_run: Path) -> None:
    from censusdp.io.layout import HELD_PL94_FILE

    pl94, dhc = h1_runs
    ours, theirs = _columns(dhc, PL94_TABLES), _columns(pl94, PL94_TABLES)
    for name in PL94_TABLES:
        assert set(theirs[name]) <= set(ours[name]), name
        for col, values in theirs[name].items():
            np.testing.assert_array_equal(ours[name][col], values, err_msg=f"{name} {col}")
    manifest = json.loads((dhc / "manifest.json").read_text())
    held = pq.read_table(dhc / HELD_PL94_FILE)
    assert manifest["h1_source"]["persons"] == sum(held.column("count").to_pylist()) > 0
    assert manifest["h1_source"]["persons"] == int(ours["P1"]["P1_001N"][0])
    assert "pl94" in manifest["persons_estimation"]
    assert "persons_pl94" not in manifest["fidelity"]["differences"]
    # unheld, the DHC release's P1-P5 are its own noise's, and its manifest says so
    unheld = json.loads((dhc_run / "manifest.json").read_text())
    assert "persons_pl94" in unheld["fidelity"]["differences"]
    assert not (dhc_run / HELD_PL94_FILE).exists()
    own = _columns(dhc_run, ("P2",))["P2"]
    assert any(not np.array_equal(own[c], theirs["P2"][c]) for c in theirs["P2"])


def test_validate_catches_a_person_off_the_pl94_release(h1_runs, tmp_path: Path) -> None:
    _, dhc = h1_runs
    report = validate_run(dhc)
    assert report.ok, report.failures()
    assert report.checks["pl94_held"]["ok"] and "persons" in report.checks["h1_source"]["detail"]
    bad = tmp_path / "dhc"
    shutil.copytree(dhc, bad)
    part = bad / "mdf_persons.parquet" / "part-00000.parquet"
    table = pq.read_table(part)
    hisp = table.column("CENHISP").to_pylist()
    hisp[0] = "2" if hisp[0] == "1" else "1"  # one person's Hispanic origin turned
    table = table.set_column(
        table.column_names.index("CENHISP"),
        "CENHISP",
        pa.array(hisp, table.schema.field("CENHISP").type),
    )
    pq.write_table(table, part)
    index = json.loads((part.parent / "_parts.json").read_text())
    index["parts"][0]["sha256"] = hashlib.sha256(part.read_bytes()).hexdigest()
    (part.parent / "_parts.json").write_text(json.dumps(index))
    report = validate_run(bad)
    assert not report.ok and not report.checks["pl94_held"]["ok"]
    assert "P.L. 94 release's" in report.checks["pl94_held"]["detail"]
    # the held counts themselves are listed in the manifest: a changed count is caught
    report = _validate_with_h1_source_off_by_one(dhc, tmp_path / "dhc2", "persons")
    assert not report.ok and "h1_source.persons" in report.checks["h1_source"]["detail"]


def test_error_bars_of_a_held_release_are_conditional_on_the_pl94_release(h1_runs) -> None:
    from censusdp.evaluate.errorbars import simulate_release_errors

    _, dhc = h1_runs
    result = simulate_release_errors(dhc, simulations=1, seed=4)
    held = result["held_to_pl94_release"]
    assert (
        held["release"] == json.loads((dhc / "manifest.json").read_text())["h1_source"]["release"]
    )
    assert any("P1-P5" in line for line in held["held"]) and "conditional" in held["note"]
    # every re-release holds the same persons: the total population does not move
    for level, record in result["by_level"]["total_population"].items():
        assert record["mae"] == 0, (level, record)


def test_a_re_estimate_holds_the_same_persons(h1_runs, tmp_path: Path) -> None:
    from censusdp.io.layout import HELD_PL94_FILE

    pl94, dhc = h1_runs
    manifest = reestimate(dhc, tmp_path / "again")
    assert (
        manifest["h1_source"]["persons"]
        == json.loads((dhc / "manifest.json").read_text())["h1_source"]["persons"]
    )
    assert "pl94" in manifest["persons_estimation"]
    assert (tmp_path / "again" / HELD_PL94_FILE).read_bytes() == (dhc / HELD_PL94_FILE).read_bytes()
    ours, theirs = _columns(tmp_path / "again", PL94_TABLES), _columns(pl94, PL94_TABLES)
    for name in PL94_TABLES:
        for col, values in theirs[name].items():
            np.testing.assert_array_equal(ours[name][col], values, err_msg=f"{name} {col}")
    report = validate_run(tmp_path / "again")
    assert report.ok and report.checks["pl94_held"]["ok"], report.failures()
