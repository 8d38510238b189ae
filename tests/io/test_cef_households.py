"""The household columns of the input: read, derived from persons, and every bad one named by
file, row, column and value (docs/households.md)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from censusdp.data.geography import DEFAULT_GEOLEVELS
from censusdp.data.histograms import household_histogram
from censusdp.data.households import rel_of_gq
from censusdp.data.schema import get_schema
from censusdp.errors import InputError
from censusdp.io.cef import read_cef, read_households
from censusdp.io.cef_stream import read_cef_blocks
from synth import block_codes, make_cef, write_cef


def _with_households(persons: dict, units: dict) -> None:
    """Give ``make_cef``'s persons relationships: the first person of each housing unit
    is its householder (aged 15 or more), the others roommates; GQ persons their codes."""
    hh = persons["hhgq"] == 0
    first = np.r_[True, persons["unit_id"][1:] != persons["unit_id"][:-1]]
    rel = np.where(hh, np.where(first, 0, 12), rel_of_gq(persons["hhgq"]))
    persons["rel"] = rel.astype(np.int64)
    persons["age"][hh & first] = np.maximum(persons["age"][hh & first], 15)
    persons["citizen"] = np.ones(rel.size, dtype=np.int64)


@pytest.fixture
def cef(tmp_path):
    persons, units = make_cef(np.random.default_rng(11), block_codes(1, 1, 2, 4), gq_rate=1.0)
    _with_households(persons, units)
    return persons, units


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def test_households_are_derived_from_persons(cef, tmp_path) -> None:
    persons, units = cef
    read = read_cef(write_cef(tmp_path / "in", persons, units))
    assert read.persons["rel"].tolist() == persons["rel"].tolist()
    hh = read_households(read)
    household_unit = units["occupied"] & (units["gqtype"] == 0)
    assert hh.unit.tolist() == np.flatnonzero(household_unit).tolist()
    assert int(hh.persons.sum()) == int((persons["hhgq"] == 0).sum())
    # a roommate household: alone when one person, "no relatives, not alone" otherwise
    assert np.array_equal(hh.attributes["hhtype"], np.where(hh.persons == 1, 18, 23))


def test_household_columns_that_agree_are_accepted(cef, tmp_path) -> None:
    persons, units = cef
    hh = read_households(read_cef(write_cef(tmp_path / "a", persons, units)))
    for name in ("hhtype", "hhsize"):
        units[name] = np.zeros(units["unit_id"].size, dtype=np.int64)
        units[name][hh.unit] = hh.attributes[name]
    assert read_households(read_cef(write_cef(tmp_path / "b", persons, units))).n_households


def test_an_input_without_rel_serves_all_but_households(tmp_path) -> None:
    persons, units = make_cef(np.random.default_rng(2), block_codes(1, 1, 1, 3))
    cef = read_cef(write_cef(tmp_path / "in", persons, units))
    with pytest.raises(InputError) as info:
        read_households(cef)
    message = str(info.value)
    assert "\n" not in message
    assert "persons.parquet: missing column 'rel'" in message


def _bad_rel_out_of_range(p, u):
    p["rel"][3] = 17
    return r"persons\.parquet, column 'rel', row 3: value 17 is outside 0\.\.16"


def _bad_two_householders(p, u):
    hh = (p["hhgq"] == 0) & (p["rel"] != 0)
    r = _first(hh)
    p["rel"][r] = 0
    return rf"persons\.parquet, column 'rel', row {r}: value 0 is a second householder"


def _bad_no_householder(p, u):
    r = _first((p["hhgq"] == 0) & (p["rel"] == 0))
    p["rel"][r] = 12
    row = int(np.flatnonzero(u["unit_id"] == p["unit_id"][r])[0])
    return rf"units\.parquet, column 'unit_id', row {row}: value {row} is an occupied housing unit with no householder"


def _bad_young_householder(p, u):
    r = _first((p["hhgq"] == 0) & (p["rel"] == 0))
    p["age"][r] = 14
    return rf"persons\.parquet, column 'age', row {r}: value 14 is the age of a householder"


def _bad_gq_code_in_household(p, u):
    r = _first(p["hhgq"] == 0)
    p["rel"][r] = 15
    return rf"persons\.parquet, column 'rel', row {r}: value 15 is a group-quarters code"


def _bad_household_code_in_gq(p, u):
    r = _first(p["hhgq"] > 0)
    p["rel"][r] = 2
    return rf"persons\.parquet, column 'rel', row {r}: value 2 is not the code of the person's group quarters"


def _bad_citizen(p, u):
    p["citizen"][0] = 2
    return r"persons\.parquet, column 'citizen', row 0: value 2 is outside 0\.\.1"


def _bad_hhsize_column(p, u):
    u["hhsize"] = np.zeros(u["unit_id"].size, dtype=np.int64)  # 0 where a household is
    row = _first(u["occupied"] & (u["gqtype"] == 0))
    return rf"units\.parquet, column 'hhsize', row {row}: value 0 differs from the household attribute derived"


def _bad_hhtype_out_of_range(p, u):
    u["hhtype"] = np.full(u["unit_id"].size, 24, dtype=np.int64)
    return r"units\.parquet, column 'hhtype', row 0: value 24 is outside 0\.\.23"


BAD = [
    _bad_rel_out_of_range,
    _bad_two_householders,
    _bad_no_householder,
    _bad_young_householder,
    _bad_gq_code_in_household,
    _bad_household_code_in_gq,
    _bad_citizen,
    _bad_hhsize_column,
    _bad_hhtype_out_of_range,
]


@pytest.mark.parametrize("mutate", BAD)
def test_bad_household_input_is_named_by_file_row_column_value(cef, tmp_path, mutate) -> None:
    persons, units = cef
    expected = mutate(persons, units)
    with pytest.raises(InputError) as info:
        read_cef(write_cef(tmp_path / "in", persons, units))
    assert any(re.search(expected, line) for line in info.value.problems), info.value.problems


STREAMED = [m for m in BAD if m is not _bad_citizen]
"""The same rules on the streaming reader of ``censusdp run`` (it reads ``rel``, not
``citizen``, which no run measures yet)."""


@pytest.mark.parametrize("part_rows", [1, 1 << 19])
def test_the_streaming_reader_derives_the_household_histogram(cef, tmp_path, part_rows) -> None:
    persons, units = cef
    directory = write_cef(tmp_path / "in", persons, units)
    blocks = read_cef_blocks(
        directory, DEFAULT_GEOLEVELS, get_schema("pl94"), with_units="households",
        part_rows=part_rows,
    )  # fmt: skip
    whole = read_cef(directory)
    want = household_histogram(read_households(whole), whole.units["geocode"], blocks.hierarchy)
    assert blocks.households is not None and blocks.households.shape[1] == 387_072
    assert (blocks.households != want).nnz == 0 and blocks.households.sum() > 0
    assert blocks.housing_units is not None  # the occupancy is still there
    plain = read_cef_blocks(directory, DEFAULT_GEOLEVELS, get_schema("pl94"))
    assert plain.households is None


@pytest.mark.parametrize("mutate", STREAMED)
def test_the_streaming_reader_names_bad_household_input(cef, tmp_path, mutate) -> None:
    persons, units = cef
    expected = mutate(persons, units)
    directory = write_cef(tmp_path / "in", persons, units)
    with pytest.raises(InputError) as info:
        read_cef_blocks(
            directory, DEFAULT_GEOLEVELS, get_schema("pl94"), with_units="households", part_rows=1
        )
    assert any(re.search(expected, line) for line in info.value.problems), info.value.problems
    # an input read for persons and units alone does not need its households
    if mutate is _bad_rel_out_of_range:
        read_cef_blocks(directory, DEFAULT_GEOLEVELS, get_schema("pl94"))


def test_a_household_run_on_an_input_without_rel_is_one_line(tmp_path) -> None:
    persons, units = make_cef(np.random.default_rng(2), block_codes(1, 1, 1, 3))
    directory = write_cef(tmp_path / "in", persons, units)
    with pytest.raises(InputError) as info:
        read_cef_blocks(directory, DEFAULT_GEOLEVELS, get_schema("pl94"), with_units="households")
    assert "\n" not in str(info.value)
    assert re.search(r"in/persons\.parquet: missing column 'rel' .* household run", str(info.value))
