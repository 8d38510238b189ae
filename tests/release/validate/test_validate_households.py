"""``censusdp validate``'s household checks, from the files of a release with a household
run: its MDF and tables written by the part tasks from generated truth, then tampered
one row at a time, each tampering caught by the check that names it."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from censusdp.data.schema import get_schema
from censusdp.io.budget_files import load_preset
from censusdp.io.mdf_households import decode_households
from censusdp.release.validate._mdf import check_mdf
from censusdp.release.validate._release import Release
from censusdp.release.validate.report import ValidationReport
from household_counts import household_counts, write_household_parts

S = get_schema("household2010")
HOUSEHOLD_CHECKS = (
    "household_records",
    "households_within_housing_units",
    "persons_households_consistent",
)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("hh-validate")
    counts, hierarchy, inv = household_counts(d / "cef")
    write_household_parts(d / "run", counts, hierarchy)
    return d / "run", counts, hierarchy, inv


def _release(run: Path, hierarchy, inv, units: str | None = "ddp-2010-households") -> Release:
    budgets = {"persons": load_preset("dhc-lite-demo"),
               "units": None if units is None else load_preset(units)}  # fmt: skip
    return Release(run, {}, budgets, hierarchy, inv, hierarchy, {"persons": None, "units": None})


def _check(release: Release) -> ValidationReport:
    rep = ValidationReport()
    check_mdf(release, rep)
    return rep


@pytest.fixture
def copy(written, tmp_path: Path):
    run, counts, hierarchy, inv = written
    shutil.copytree(run, tmp_path / "run")
    return tmp_path / "run", counts, hierarchy, inv


def test_the_written_release_passes_every_household_check(written) -> None:
    run, _, hierarchy, inv = written
    rep = _check(_release(run, hierarchy, inv))
    assert rep.ok, rep.failures()
    assert set(HOUSEHOLD_CHECKS) <= set(rep.checks)
    # without a household run recorded, the household checks are not made
    rep = _check(_release(run, hierarchy, inv, units=None))
    assert not set(HOUSEHOLD_CHECKS) & set(rep.checks)


def _rewrite(path: Path, edit) -> None:
    table = pq.read_table(path)
    columns = {c: table.column(c).cast(pa.string()).to_pylist()
               if pa.types.is_dictionary(table.column(c).type) else table.column(c).to_pylist()
               for c in table.column_names}  # fmt: skip
    edit(columns)
    pq.write_table(pa.table(columns, schema=pa.schema(
        [pa.field(c, pa.string() if pa.types.is_dictionary(table.schema.field(c).type)
                  else table.schema.field(c).type) for c in table.column_names])), path)  # fmt: skip


def _a_household(run: Path, want) -> tuple[Path, int]:
    """A units part and a row of it holding a household whose cell ``want`` accepts."""
    for path in sorted((run / "mdf_units.parquet").glob("part-*.parquet")):
        rows, cells, _ = decode_households(pq.read_table(path), path)
        hit = np.flatnonzero(want(cells))
        if hit.size:
            return path, int(rows[hit[0]])
    raise AssertionError("no such household")


def _failed(rep: ValidationReport) -> set[str]:
    return {name for name, check in rep.checks.items() if not check["ok"]}


def test_a_record_that_is_not_one_household_is_named(copy) -> None:
    run, _, hierarchy, inv = copy
    married = S.cell_levels("hhtype") < 3
    path, row = _a_household(run, lambda c: married[c])

    def edit(cols):
        cols["HHT2"][row] = "05"  # living alone, but married with children

    _rewrite(path, edit)
    rep = _check(_release(run, hierarchy, inv))
    assert "household_records" in _failed(rep)
    assert f"row {row}" in rep.checks["household_records"]["detail"]


@pytest.mark.slow  # household_records' refusal by row is the case above; this its DDP zero
def test_a_household_the_ddp_ruled_out_is_named(copy) -> None:
    """A couple of two whose householder is 15-24 and whose other member is 75+: a
    household the MDF reads (an input can have it), a structural zero of the DDP's
    ``size2`` constraint (``size2_le25_eld3``) no release has."""
    run, _, hierarchy, inv = copy
    lv = {a: S.cell_levels(a) for a in ("hhsize", "hhtype")}
    couple = (lv["hhsize"] == 2) & (lv["hhtype"] == 3)
    path, row = _a_household(run, lambda c: couple[c])

    def edit(cols):
        cols["HHLDRAGE"][row] = "1"  # 15 to 24
        cols["P60"][row] = cols["P65"][row] = cols["P75"][row] = "1"

    _rewrite(path, edit)
    rep = _check(_release(run, hierarchy, inv))
    assert "household_records" in _failed(rep)
    assert "1 households in structural-zero cells" in rep.checks["household_records"]["detail"]


def test_more_households_than_housing_units_is_caught(copy) -> None:
    run, counts, hierarchy, inv = copy
    b = int(np.flatnonzero(counts.occupied)[0])
    hu = inv.housing_units.copy()
    hu[b] = counts.occupied[b] - 1  # as if invariants.parquet published fewer
    rep = _check(_release(run, hierarchy, dataclasses.replace(inv, housing_units=hu)))
    assert "households_within_housing_units" in _failed(rep)
    assert str(counts.blocks[b]) in rep.checks["households_within_housing_units"]["detail"]


def test_household_sizes_that_disagree_with_the_persons_are_caught(copy) -> None:
    run, _, hierarchy, inv = copy
    lv = {a: S.cell_levels(a) for a in ("hhsize", "hhtype", "hhmulti")}
    two = (lv["hhsize"] == 2) & (lv["hhtype"] == 3)  # a couple: 3 persons is a valid cell
    path, row = _a_household(run, lambda c: two[c])

    def edit(cols):
        cols["HHSIZE"][row], cols["MULTG"][row] = "3", "1"

    _rewrite(path, edit)
    rep = _check(_release(run, hierarchy, inv))
    failed = _failed(rep)
    assert "persons_households_consistent" in failed
    assert "household_records" not in failed
    assert "tables_match_mdf" in failed  # H13 no longer the MDF's tabulation


def test_a_household_table_row_that_differs_from_the_mdf_is_caught(copy) -> None:
    run, _, hierarchy, inv = copy
    path = run / "tables" / "H13.parquet" / "part-00001.parquet"

    def edit(cols):
        cols["H13_002N"][0] += 1

    _rewrite(path, edit)
    rep = _check(_release(run, hierarchy, inv))
    assert _failed(rep) >= {"tables_match_mdf"}
    assert "H13.parquet" in rep.checks["tables_match_mdf"]["detail"]
    assert not set(HOUSEHOLD_CHECKS) & _failed(rep)


@pytest.mark.slow  # the facilities' types are checked by default in the unit layout's tests
def test_a_facility_of_another_type_is_caught(copy) -> None:
    run, counts, hierarchy, inv = copy
    for path in sorted((run / "mdf_units.parquet").glob("part-*.parquet")):
        types = pq.read_table(path, columns=["GQTYPE"]).column("GQTYPE").cast(pa.string())
        facilities = [i for i, t in enumerate(types.to_pylist()) if t != "000"]
        if facilities:
            break
    row = facilities[0]
    other = "701" if types[row].as_py() != "701" else "601"

    def edit(cols):
        cols["GQTYPE"][row] = other

    _rewrite(path, edit)
    rep = _check(_release(run, hierarchy, inv))
    assert "household_records" in _failed(rep)
    assert "the invariants publish" in rep.checks["household_records"]["detail"]
