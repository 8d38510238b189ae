"""Validation of the confidential input: every bad input gets a message naming file, column, row, value."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from censusdp.errors import InputError
from censusdp.io.cef import read_cef
from synth import block_codes, make_cef, write_cef


@pytest.fixture
def good(tmp_path):
    rng = np.random.default_rng(7)
    persons, units = make_cef(rng, block_codes(1, 1, 2, 3), gq_rate=1.0)
    return persons, units


def _gq_row(persons):
    return int(np.flatnonzero(persons["hhgq"] > 0)[0])


def _hh_row(persons):
    return int(np.flatnonzero(persons["hhgq"] == 0)[0])


def _vacant_unit(units):
    return int(np.flatnonzero(~units["occupied"])[0])


# (name, mutate(persons, units) -> None, expected message regex)
BAD_INPUTS = [
    (
        "age out of range",
        lambda p, u: p["age"].__setitem__(3, 130),
        r"persons\.parquet, column 'age', row 3: value 130 is outside 0\.\.115",
    ),
    (
        "sex out of range",
        lambda p, u: p["sex"].__setitem__(0, 3),
        r"column 'sex', row 0: value 3 is outside 1\.\.2",
    ),
    (
        "cenrace zero",
        lambda p, u: p["cenrace"].__setitem__(1, 0),
        r"column 'cenrace', row 1: value 0 is outside 1\.\.63",
    ),
    (
        "hispanic 2",
        lambda p, u: p["hispanic"].__setitem__(2, 2),
        r"column 'hispanic', row 2: value 2 is outside 0\.\.1",
    ),
    (
        "gqtype 9",
        lambda p, u: u["gqtype"].__setitem__(0, 9),
        r"units\.parquet, column 'gqtype', row 0: value 9 is outside 0\.\.7",
    ),
    (
        "short geocode",
        lambda p, u: (
            p.__setitem__("geocode", p["geocode"].astype("U16"))
            or p["geocode"].__setitem__(0, "5000100")
        ),
        r"column 'geocode', row 0: value '5000100' is not a 16-digit block geocode",
    ),
    (
        "duplicate person id",
        lambda p, u: p["person_id"].__setitem__(1, p["person_id"][0]),
        r"column 'person_id', row 1: value 0 is a duplicate id",
    ),
    (
        "duplicate unit id",
        lambda p, u: u["unit_id"].__setitem__(1, u["unit_id"][0]),
        r"units\.parquet, column 'unit_id', row 1: value 0 is a duplicate id",
    ),
    (
        "unit does not exist",
        lambda p, u: p["unit_id"].__setitem__(0, 10**9),
        r"column 'unit_id', row 0: value 1000000000 is not a unit_id in .*units\.parquet",
    ),
    (
        "person in another block",
        lambda p, u: p["geocode"].__setitem__(0, "5099999999999999"),
        r"column 'geocode', row 0: value '5099999999999999' differs from the block of the person's unit",
    ),
    (
        "GQ person in a housing unit",
        lambda p, u: p["hhgq"].__setitem__(_hh_row(p), 5),
        r"column 'hhgq', row \d+: value 5 is a group-quarters type but the person's unit is a housing unit",
    ),
    (
        "household person in a facility",
        lambda p, u: p["hhgq"].__setitem__(_gq_row(p), 0),
        r"value 0 is household \(0\) but the person's unit is a group-quarters facility",
    ),
]


@pytest.mark.parametrize(("name", "mutate", "message"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_input_is_reported(tmp_path, good, name, mutate, message):
    persons = {k: v.copy() for k, v in good[0].items()}
    units = {k: v.copy() for k, v in good[1].items()}
    mutate(persons, units)
    write_cef(tmp_path, persons, units)
    with pytest.raises(InputError, match=message):
        read_cef(tmp_path)


def test_valid_input_reads(tmp_path, good):
    write_cef(tmp_path, *good)
    cef = read_cef(tmp_path)
    assert cef.n_persons == good[0]["person_id"].size
    assert cef.persons["geocode"].dtype.kind == "U"


def test_missing_file(tmp_path, good):
    write_cef(tmp_path, *good)
    (tmp_path / "units.parquet").unlink()
    with pytest.raises(InputError, match=r"units\.parquet: missing file"):
        read_cef(tmp_path)


def test_missing_column_and_wrong_type(tmp_path, good):
    write_cef(tmp_path, *good)
    t = pq.read_table(tmp_path / "persons.parquet").drop_columns(["age"])
    t = t.set_column(t.column_names.index("sex"), "sex", pa.array(["m"] * t.num_rows))
    pq.write_table(t, tmp_path / "persons.parquet")
    with pytest.raises(InputError) as info:
        read_cef(tmp_path)
    text = info.value.details()
    assert "missing column 'age'" in text
    assert "column 'sex': type string is not an integer type" in text
    # the message itself is one line: the first problem and how many more there are
    assert "\n" not in str(info.value) and str(info.value).endswith("(and 1 more problem)")


def test_nulls_reported(tmp_path, good):
    write_cef(tmp_path, *good)
    t = pq.read_table(tmp_path / "persons.parquet")
    ages = t.column("age").to_pylist()
    ages[4] = None
    t = t.set_column(t.column_names.index("age"), "age", pa.array(ages, pa.int64()))
    pq.write_table(t, tmp_path / "persons.parquet")
    with pytest.raises(InputError, match=r"column 'age', row 4: value None is null"):
        read_cef(tmp_path)


def test_vacant_and_empty_occupied_units(tmp_path, good):
    persons = {k: v.copy() for k, v in good[0].items()}
    units = {k: v.copy() for k, v in good[1].items()}
    # make an occupied housing unit vacant: its residents now live in a vacant unit
    occ_hu = int(np.flatnonzero((units["gqtype"] == 0) & units["occupied"])[0])
    units["occupied"][occ_hu] = False
    write_cef(tmp_path, persons, units)
    with pytest.raises(InputError, match=r"is a unit marked vacant"):
        read_cef(tmp_path)
    # and a vacant unit marked occupied has nobody in it
    units = {k: v.copy() for k, v in good[1].items()}
    vac = _vacant_unit(units)
    units["occupied"][vac] = True
    write_cef(tmp_path, persons, units)
    with pytest.raises(InputError, match=r"unit is marked occupied but no person lives in it"):
        read_cef(tmp_path)


def test_every_problem_is_listed(tmp_path, good):
    persons = {k: v.copy() for k, v in good[0].items()}
    persons["age"][:3] = 200
    persons["sex"][5] = 0
    write_cef(tmp_path, persons, good[1])
    with pytest.raises(InputError) as info:
        read_cef(tmp_path)
    assert len(info.value.problems) == 4


def _with_entities(units, aian="", place=""):
    units = {k: v.copy() for k, v in units.items()}
    units["aian_area"] = np.full(units["unit_id"].size, aian, dtype=object)
    units["place"] = np.full(units["unit_id"].size, place, dtype=object)
    return units


def test_optional_block_attributes_are_read_when_present(tmp_path, good):
    units = _with_entities(good[1], aian="0012", place="")
    write_cef(tmp_path, good[0], units)
    cef = read_cef(tmp_path)
    assert (cef.units["aian_area"] == "0012").all() and (cef.units["place"] == "").all()
    write_cef(tmp_path, *good)  # absent: no AIAN areas and no places
    assert "aian_area" not in read_cef(tmp_path).units


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("aian_area", "12", r"column 'aian_area', row 2: value '12' is not 4 digits or empty"),
        ("place", "0010A", r"column 'place', row 2: value '0010A' is not 5 digits or empty"),
    ],
)
def test_malformed_block_attribute_is_reported(tmp_path, good, column, value, message):
    units = _with_entities(good[1], aian="0012", place="00100")
    units[column][2] = value
    write_cef(tmp_path, good[0], units)
    with pytest.raises(InputError, match=message):
        read_cef(tmp_path)


def test_block_attribute_must_agree_within_a_block(tmp_path, good):
    units = _with_entities(good[1], place="00100")
    same_block = np.flatnonzero(units["geocode"] == units["geocode"][0])
    assert same_block.size > 1
    units["place"][same_block[-1]] = "00200"
    write_cef(tmp_path, good[0], units)
    with pytest.raises(InputError, match=r"column 'place', row \d+: value '0\d+' differs from"):
        read_cef(tmp_path)
