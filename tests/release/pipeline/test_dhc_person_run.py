"""The 2020 DHC person run (``--preset dhc-2020 --units-preset none``) on a small generated
input: production's prim spine, production's noise variance for every measurement, and
a release whose invariants are exact, counts non-negative integers, structural zeros
zero and children the sum of their parents, checked from the files.

Production's values (DAS_2020_DHC_Production_Code,
``programs/strategies/dhcp_strategies.py``, ``DecompTestStrategyDHCP_20220922_exp_iteration_23_1``,
which ``configs/production/dhc/person_US.ini`` names) are each measurement's rho in
ten-thousandths, in the strategy's query order; the noise variance of a measurement is
``1 / rho_q`` (discrete Gaussian, bounded neighbours), and a geounit that takes its single
child's budget (bypass, ``define_spines.py``) is measured with the sum of both levels' rho.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from censusdp.data.schema import get_schema
from censusdp.generate import generate_state
from censusdp.io.budget_files import load_preset
from censusdp.io.cef import read_cef
from censusdp.io.mdf_read import read_mdf_persons
from censusdp.io.nmf_files import read_nmf_rows
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.options import ReleaseOptions
from censusdp.release.pipeline import run_release
from censusdp.release.validate import validate_run

pytestmark = pytest.mark.slow  # a 1,227,744-cell histogram measured at each of ~20 geounits

DHCP = get_schema("dhcp-2020")
QUERIES = (
    "age_18_64_116*relgq_4_groups", "age_18_64_116*sex", "age_38_groups*sex",
    "hispanic*sex", "sex*relgq_4_groups", "gq_constr_groups*age_10_groups",
    "popsehsdtargetsrelship",
    "hispanic*sex*age_40_groups*relship_and_eight_level_gq*cenrace",
    "relgq*age_40_groups*hispanic*cenrace*sex", "detailed",
)  # fmt: skip
PRODUCTION_RHO = {  # ten-thousandths, production's level names without underscores
    "Block": (11, 11, 11, 11, 11, 11, 11, 11, 11, 11),
    "BlockGroup": (430, 430, 430, 430, 430, 430, 430, 430, 430, 430),
    "TractSubset": (868, 868, 868, 868, 868, 3472, 3472, 868, 868, 868),
    "TractSubsetGroup": (478, 478, 478, 478, 478, 1912, 478, 478, 478, 478),
    "Prim": (478, 478, 478, 478, 478, 1912, 478, 478, 478, 478),
    "County": (310, 310, 310, 310, 310, 1240, 1240, 310, 310, 310),
    "State": (999, 999, 999, 999, 999, 3996, 999, 999, 999, 999),
    "US": (73, 73, 73, 73, 73, 292, 73, 73, 73, 73),
}
LEVELS = ("US", "State", "County", "Prim", "TractSubsetGroup", "TractSubset", "BlockGroup", "Block")


def _small_vermont(out: Path, work: Path) -> Path:
    """Twelve blocks of a generated 1% of Vermont and a block with a group-quarters
    facility, every person and unit of them."""
    generate_state("VT", 1, work, scale=0.01)
    units = pq.read_table(work / "units.parquet")
    persons = pq.read_table(work / "persons.parquet")
    geo = np.asarray(units.column("geocode").to_pylist())
    blocks = np.unique(geo)
    keep = set(blocks[:12].tolist()) | {str(geo[units.column("gqtype").to_numpy() > 0][0])}
    out.mkdir()
    for name, table in (("units.parquet", units), ("persons.parquet", persons)):
        mask = np.isin(np.asarray(table.column("geocode").to_pylist()), sorted(keep))
        pq.write_table(table.filter(pa.array(mask)), out / name)
    return out


@pytest.fixture(scope="module")
def dhc_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("dhc-person-run")
    cef = _small_vermont(d / "cef", d / "generated")
    run_release(
        cef,
        d / "run",
        ReleaseBudget(load_preset("dhc-2020")),
        ReleaseOptions(seed=3),
    )
    return cef, d / "run"


def _discrete_gaussian_variance(sigma2: float) -> float:
    half = int(40 * np.sqrt(sigma2)) + 10
    k = np.arange(-half, half + 1, dtype=np.float64)
    w = np.exp(-(k * k) / (2 * sigma2))
    return float(np.sum(k * k * w) / np.sum(w))


def test_the_run_is_on_productions_prim_spine(dhc_run) -> None:
    import json

    _, run = dhc_run
    manifest = json.loads((run / "manifest.json").read_text())
    spine = manifest["spine"]
    assert [name for name, _ in spine["geolevels"]] == list(LEVELS)
    assert spine["rules"]["prim"] is True and spine["rules"]["target_original_block_groups"]
    assert spine["geounits"]["Block"] == 13 and spine["geounits"]["Prim"] >= 1
    assert [name for name, _ in manifest["geolevels"]] == [
        "US", "State", "County", "Tract", "BlockGroup", "Block",
    ]  # fmt: skip


def test_every_variance_is_productions_for_its_level_and_query(dhc_run) -> None:
    _, run = dhc_run
    t = read_nmf_rows(run / "noisy_measurements.parquet", columns=["geolevel", "query", "variance"])
    t = t.unify_dictionaries()
    distinct = t.group_by(["geolevel", "query", "variance"]).aggregate([]).to_pydict()
    got: dict[tuple[str, str], list[float]] = {}
    for level, query, v in zip(*distinct.values(), strict=True):
        got.setdefault((str(level), str(query).replace(" ", "")), []).append(float(v))
    for (level, query), variances in got.items():
        q, at = QUERIES.index(query), LEVELS.index(level)
        share = Fraction(PRODUCTION_RHO[level][q], sum(PRODUCTION_RHO[level]))
        # a geounit measured at its own level's rho, or (bypass) with the budget of a run
        # of single children below it added to its level's, split by its level's query
        # shares (production's move_to_pareto_frontier)
        allowed = [
            _discrete_gaussian_variance(
                float(1 / (share * sum(Fraction(sum(PRODUCTION_RHO[lv]), 10_000) for lv in run)))
            )
            for run in (LEVELS[at:b] for b in range(at + 1, len(LEVELS) + 1))
        ]
        for v in variances:
            assert np.isclose(allowed, v, rtol=1e-9).any(), (level, query, v)
    # every measured level measures all ten queries; blocks at the Block rho exactly
    for level in {lv for lv, _ in got}:
        assert {q for lv, q in got if lv == level} == set(QUERIES), level
    assert {"State", "Prim", "Block"} <= {lv for lv, _ in got}  # the others bypassed here
    assert "US" not in {lv for lv, _ in got}  # one state: the US is the nation's
    for q, query in enumerate(QUERIES):
        want = _discrete_gaussian_variance(10_000 / PRODUCTION_RHO["Block"][q])
        np.testing.assert_allclose(got[("Block", query)], [want], rtol=1e-9)


def test_the_release_holds_the_invariants_and_structural_zeros(dhc_run) -> None:
    cef_dir, run = dhc_run
    assert validate_run(run).ok
    truth = read_cef(cef_dir)
    mdf = read_mdf_persons(run / "mdf_persons.parquet")
    assert mdf["geocode"].size == truth.n_persons  # the state total is invariant
    # gqhh_vect: a block's persons of a GQ major type number at least its facilities of
    # that type, and none of a type it has no facility of
    blocks = np.unique(np.concatenate([truth.units["geocode"], mdf["geocode"]]))
    facilities = np.zeros((blocks.size, 8), dtype=np.int64)
    gq = truth.units["gqtype"] > 0
    np.add.at(
        facilities,
        (np.searchsorted(blocks, truth.units["geocode"][gq]), truth.units["gqtype"][gq]),
        1,
    )
    released = np.zeros_like(facilities)
    np.add.at(released, (np.searchsorted(blocks, mdf["geocode"]), mdf["hhgq"]), 1)
    assert facilities[:, 1:].sum() > 0
    assert (released[:, 1:] >= facilities[:, 1:]).all()
    assert (released[:, 1:][facilities[:, 1:] == 0] == 0).all()
    # the relgq age rules: no released person in a structural zero
    cells = DHCP.cells_of(
        {
            "relgq": mdf["relgq"],
            **{k: mdf[k] for k in ("sex", "age", "hispanic", "cenrace")},
        }
    )
    assert not DHCP.structural_zero_mask[cells].any()


def test_the_dhc_person_tables_are_written_and_join_on_geoid(dhc_run) -> None:
    from censusdp.io.layout import table_csv_file
    from censusdp.io.tables import read_codebook, read_table
    from censusdp.tables import table_definition

    cef_dir, run = dhc_run
    iterations = tuple(f"P12{k}" for k in "ABCDEFGHI")  # by race and Hispanic origin
    dhc = ("P12", *iterations, "PCT12", "GQ1")
    tables = {n: read_table(run / "tables", n) for n in ("P1", "P2", "P5", *dhc)}
    geoids = tables["P1"].column("GEOID").to_pylist()
    assert len(set(geoids)) == len(geoids)
    for name in dhc:
        t = tables[name]
        assert t.column("GEOID").to_pylist() == geoids, name  # one row per geounit, joined
        assert t.column("SUMLEV").to_pylist() == tables["P1"].column("SUMLEV").to_pylist()
        for form in ("wide", "long"):
            assert (run / "tables" / table_csv_file(name, form)).is_file()
    col = {
        n: {c: np.asarray(t.column(c).to_pylist()) for c in t.column_names}
        for n, t in tables.items()
    }
    # the DHC's P1 is the P.L. P1's total; its P18 (GQ1's major types) the P.L. P5's
    np.testing.assert_array_equal(col["P12"]["P12_001N"], col["P1"]["P1_001N"])
    np.testing.assert_array_equal(col["PCT12"]["PCT12_001N"], col["P1"]["P1_001N"])
    np.testing.assert_array_equal(col["GQ1"]["GQ1_001N"], col["P5"]["P5_001N"])
    np.testing.assert_array_equal(
        col["P12"]["P12_002N"] + col["P12"]["P12_026N"], col["P12"]["P12_001N"]
    )
    # the races alone and two or more partition P12, line by line; P12H is P2's Hispanic
    # total, P12I its White alone not Hispanic (P2_005N)
    for v in table_definition("P12").variables:
        line = v.split("_", 1)[1]
        got = sum(col[f"P12{k}"][f"P12{k}_{line}"] for k in "ABCDEFG")
        np.testing.assert_array_equal(got, col["P12"][v], err_msg=v)
    np.testing.assert_array_equal(col["P12H"]["P12H_001N"], col["P2"]["P2_002N"])
    np.testing.assert_array_equal(col["P12I"]["P12I_001N"], col["P2"]["P2_005N"])
    state = tables["P12"].column("SUMLEV").to_pylist().index("040")
    assert col["P12A"]["P12A_001N"][state] > 0  # generated Vermont: White alone
    assert col["P12"]["P12_001N"][state] == read_cef(cef_dir).n_persons  # invariant
    book = read_codebook(run / "tables").column("variable").to_pylist()
    assert {"P12_049N", "P12I_049N", "PCT12_209N", "GQ1_032N"} <= set(book)


def validate_tampered_table(run: Path, tmp_path: Path, name: str, part: str, column: str):
    """``validate`` of a copy of ``run`` whose table ``name`` has one cell of ``column``
    in ``part`` changed by one: the last row's (a block in part 1, a geounit above the
    block in part 0)."""
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    path = copy / "tables" / f"{name}.parquet" / part
    table = pq.read_table(path)
    values = np.asarray(table.column(column).to_pylist())
    values[-1] += 1
    i = table.column_names.index(column)
    pq.write_table(table.set_column(i, column, pa.array(values, pa.int64())), path)
    return validate_run(copy)


@pytest.mark.parametrize(
    ("name", "part", "column"),
    [
        ("P12", "part-00001.parquet", "P12_003N"),
        ("PCT12", "part-00000.parquet", "PCT12_050N"),
        ("P12H", "part-00001.parquet", "P12H_030N"),
    ],  # fmt: skip
)
def test_validate_catches_a_tampered_dhc_table_cell(dhc_run, tmp_path, name, part, column) -> None:
    _, run = dhc_run
    report = validate_tampered_table(run, tmp_path, name, part, column)
    assert not report.checks["tables_match_mdf"]["ok"]
    assert f"{name}.parquet" in report.checks["tables_match_mdf"]["detail"]
