"""The household unit MDF: production's household layout and recodes, written from a
household histogram and read back to the same histogram, every record checked."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from censusdp.data.schema import get_schema
from censusdp.errors import InputError
from censusdp.io.mdf_households import (
    HOUSEHOLD_UNIT_COLUMNS,
    decode_households,
    household_codes,
    household_unit_records,
)
from censusdp.io.mdf_parts import mdf_part_counts, mdf_part_households, write_mdf_part
from censusdp.io.mdf_read import read_mdf_units
from household_counts import household_counts

S = get_schema("household2010")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("hh-mdf")
    counts, hierarchy, inv = household_counts(d / "cef")
    paths = {
        "persons": (d / "p.parquet", d / "p.txt"),
        "units": (d / "u.parquet", d / "u.txt"),
    }
    records = write_mdf_part(counts, paths, first_person=0, header=True)
    return counts, hierarchy, inv, paths, records


def _codes_of(cell: tuple[int, ...]) -> dict[str, str]:
    c = int(np.ravel_multi_index(cell, S.shape))
    table = household_unit_records(
        np.asarray(["5600100010001000"]),
        np.asarray([1]),
        sp.csr_matrix(([1], ([0], [c])), shape=(1, S.size)),
        np.zeros((1, 8), np.int64),
    )
    return {k: v[0] for k, v in table.to_pydict().items()}


def test_a_household_carries_production_codes() -> None:
    # a woman of 66 (hhage 6), Hispanic, two or more races, 3 persons, no spouse, a
    # relative, no own child (type 22), someone 75+, multi-generational
    got = _codes_of((1, 6, 1, 6, 3, 22, 3, 1))
    want = dict(RTYPE="2", GQTYPE="000", TEN="9", VACS="0", HHSIZE="3", HHT="3", HHT2="07",
                CPLT="0", UPART="5", MULTG="2", HHLDRAGE="7", HHSPAN="2", HHRACE="07",
                PAOC="4", P18="9", P60="1", P65="1", P75="1", PAC="9", HHSEX="2")  # fmt: skip
    assert {k: got[k] for k in want} == want
    # a man alone (type 18): HHT 4, HHT2 09; same-sex cohabiting with children under 6
    got = _codes_of((0, 2, 0, 0, 1, 18, 0, 0))
    assert [got[k] for k in ("HHT", "HHT2", "MULTG", "HHSIZE")] == ["4", "09", "0", "1"]
    got = _codes_of((0, 3, 0, 0, 4, 13, 0, 0))
    assert [got[k] for k in ("HHT", "HHT2", "CPLT", "UPART", "PAOC", "MULTG")] == [
        "2", "03", "4", "1", "1", "1"]  # fmt: skip


def test_every_valid_cell_has_its_own_codes() -> None:
    codes = household_codes()
    valid = ~S.structural_zero_mask
    assert np.unique(codes[valid], axis=0).shape[0] == int(valid.sum()) == 147_980


def test_units_read_back_to_the_released_households(written) -> None:
    counts, hierarchy, inv, paths, records = written
    table = pq.read_table(paths["units"][0])
    assert tuple(table.column_names) == HOUSEHOLD_UNIT_COLUMNS
    got = mdf_part_households(paths["units"][0], counts.blocks)
    assert counts.households.nnz > 100
    assert (got != counts.households).nnz == 0
    hist, _, units = mdf_part_counts(
        paths["persons"][0], paths["units"][0], counts.blocks, get_schema("dhc-lite")
    )
    assert (hist != counts.persons).nnz == 0
    assert np.array_equal(units[:, 1], counts.occupied)
    assert np.array_equal(units[:, 0] + units[:, 1], counts.housing_units)
    assert np.array_equal(units[:, 2], counts.gq_facilities.sum(axis=1))
    # the text is the Parquet records, header first
    text = paths["units"][1].read_text().splitlines()
    assert text[0] == "|".join(HOUSEHOLD_UNIT_COLUMNS)
    assert len(text) == table.num_rows + 1 == records["units"][0]["rows"] + 1
    # the facilities carry their type; the readers of other commands see the units
    units_cols = read_mdf_units(paths["units"][0], inv.to_table())
    assert units_cols["occupied"].sum() == counts.occupied.sum() + counts.gq_facilities.sum()


def _tampered(table: pa.Table, column: str, row: int, value: str) -> pa.Table:
    values = table.column(column).cast(pa.string()).to_pylist()
    values[row] = value
    i = table.column_names.index(column)
    return table.set_column(i, column, pa.array(values, pa.string()))


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("HHT2", "05", "not one household"),  # a married couple's record as living alone
        ("MULTG", "0", "not one household"),
        ("HHSIZE", "0", "not one household"),  # size 0: a structural zero
        ("TEN", "0", "not a housing unit"),
        ("HHSEX", "3", "not an MDF2020 code"),
    ],
)
def test_a_tampered_household_record_is_named(written, column, value, message) -> None:
    _, _, _, paths, _ = written
    table = pq.read_table(paths["units"][0])
    rows, cells, _ = decode_households(table, "u.parquet")
    # a household of 3 or more persons, married (so every tampering above breaks it)
    pick = np.flatnonzero(
        (S.cell_levels("hhsize", cells) >= 3) & (S.cell_levels("hhtype", cells) < 3)
    )
    row = int(rows[pick[0]])
    with pytest.raises(InputError, match=message) as info:
        decode_households(_tampered(table, column, row, value), "u.parquet")
    assert f"row {row}" in str(info.value) and "\n" not in str(info.value)


def test_a_vacant_unit_with_household_variables_is_named(written) -> None:
    _, _, _, paths, _ = written
    table = pq.read_table(paths["units"][0])
    vacs = table.column("VACS").cast(pa.string()).to_pylist()
    row = vacs.index("9")
    with pytest.raises(InputError, match=f"row {row} .*vacant unit or facility"):
        decode_households(_tampered(table, "HHSIZE", row, "2"), "u.parquet")


def test_more_households_than_housing_units_is_refused(written) -> None:
    counts = written[0]
    b = int(np.flatnonzero(counts.occupied)[0])
    hu = counts.housing_units.copy()
    hu[b] = counts.occupied[b] - 1
    with pytest.raises(InputError, match=f"block {counts.blocks[b]}: .* households of"):
        household_unit_records(counts.blocks, hu, counts.households, counts.gq_facilities)


# the household types of each code, as docs/file-formats.md lists them
_HHT2_TYPES = {1: {0, 1, 2, 4, 5, 6}, 2: {3, 7}, 3: {8, 9, 10, 13, 14, 15}, 4: {11, 12, 16, 17},
               5: {18}, 6: {19, 20, 21}, 7: {22}, 8: {23}}  # fmt: skip
_PAOC_TYPES = {1: {0, 4, 8, 13, 19}, 2: {1, 5, 9, 14, 20}, 3: {2, 6, 10, 15, 21}}
_NONFAMILY = {12, 17, 18, 23}


def test_every_cell_is_recoded_as_the_table_of_codes_says() -> None:
    from censusdp.io.mdf_households import HOUSEHOLD_FIELDS

    codes = household_codes()
    col = {name: codes[:, j] for j, name in enumerate(HOUSEHOLD_FIELDS)}
    lv = {a: S.cell_levels(a) for a in S.attribute_names}
    t, female, size = lv["hhtype"], lv["hhsex"] == 1, lv["hhsize"]
    hht2 = np.zeros(S.size, np.int64)
    for code, types in _HHT2_TYPES.items():
        hht2[np.isin(t, list(types))] = code
    hht2 += 4 * ((t >= 18) & ~female)  # the male codes of the no-spouse types
    assert np.array_equal(col["HHT2"], hht2)
    cplt = np.select([t < 4, t < 8, t < 13, t < 18], [1, 2, 3, 4], 0)
    assert np.array_equal(col["CPLT"], cplt)
    upart = np.select([(t >= 13) & (t < 18), (t >= 8) & (t < 13)], [1, 2], 5)
    assert np.array_equal(col["UPART"], np.where(upart < 5, upart + 2 * female, 5))
    paoc = np.full(S.size, 4)
    for code, types in _PAOC_TYPES.items():
        paoc[np.isin(t, list(types))] = code
    assert np.array_equal(col["PAOC"], paoc)
    non = np.isin(t, list(_NONFAMILY))
    hht = np.where(t < 8, 1, np.where(non, np.where(size == 1, 4, 5), 2)) + np.where(
        (t >= 8), np.where(non, 2, 1), 0) * female  # fmt: skip
    assert np.array_equal(col["HHT"], hht)
    assert np.array_equal(col["MULTG"], np.where(size < 3, 0, lv["hhmulti"] + 1))
    assert np.array_equal(col["HHSIZE"], size)
    assert np.array_equal(col["HHLDRAGE"], lv["hhage"] + 1)
    assert np.array_equal(col["HHRACE"], lv["hhrace"] + 1)
    assert np.array_equal(col["HHSPAN"], lv["hhhisp"] + 1)
    assert np.array_equal(col["HHSEX"], lv["hhsex"] + 1)
    elderly = lv["hhelderly"]
    assert np.array_equal(col["P60"] + col["P65"] + col["P75"], elderly)
    assert np.array_equal(col["P65"], elderly >= 2)


def test_write_mdf_units_writes_households_that_read_back(tmp_path) -> None:
    """``write_mdf_units`` with households (the swapping release's units): the household
    layout, read back to the households, a household the DDP ruled out of its estimate
    (a householder of 20 married to someone of 80) included; households that are not
    the occupied units are one line."""
    from censusdp.data.geography import Hierarchy
    from censusdp.io.mdf_text import text_mismatch
    from censusdp.io.mdf_write import write_mdf_units

    blocks = np.asarray(["5000100010001000", "5000100010001001", "5000100010001002"])
    h = Hierarchy.from_blocks(blocks)
    implausible = int(np.ravel_multi_index((0, 0, 0, 0, 2, 3, 3, 0), S.shape))
    ordinary = int(np.ravel_multi_index((1, 3, 1, 6, 3, 0, 0, 0), S.shape))
    assert S.structural_zero_mask[implausible] and not S.structural_zero_mask[ordinary]
    households = sp.csr_matrix(
        ([1, 2, 1], ([0, 0, 2], [implausible, ordinary, ordinary])), shape=(3, S.size)
    )
    hu, occupied = np.array([4, 0, 1]), np.array([3, 0, 1])
    gq = np.zeros((3, 8), np.int64)
    gq[1, 5] = 1
    path, text = tmp_path / "u.parquet", tmp_path / "u.txt"
    n = write_mdf_units(h, hu, occupied, gq, path, text, households=households)
    assert n == 6
    assert tuple(pq.read_table(path).column_names) == HOUSEHOLD_UNIT_COLUMNS
    got = mdf_part_households(path, blocks, gq_facilities=gq)
    assert (got != households).nnz == 0
    assert text_mismatch(path, text, HOUSEHOLD_UNIT_COLUMNS, header=True)[0] is None
    with pytest.raises(InputError) as info:
        write_mdf_units(
            h, hu, np.array([2, 0, 1]), gq, tmp_path / "v.parquet", households=households
        )
    assert str(info.value) == "block 5000100010001000: 3 households but 2 occupied housing units"
