"""The streaming input reader: same aggregates as the whole-file reader, same error messages."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.data.geography import DEFAULT_GEOLEVELS
from censusdp.data.schema import get_schema
from censusdp.errors import InputError
from censusdp.io.cef import read_cef
from censusdp.io.cef_stream import read_cef_blocks
from synth import block_codes, cef_aggregates, make_cef, write_cef

PL94 = get_schema("pl94")


def _write_in_groups(directory, persons, units, group_rows):
    """Write the CEF with small row groups, persons shuffled (no county order assumed)."""
    write_cef(directory, persons, units)
    for name in ("persons.parquet", "units.parquet"):
        t = pq.read_table(directory / name)
        pq.write_table(t, directory / name, row_group_size=group_rows)


def _with_entities(units, rng):
    units = {k: v.copy() for k, v in units.items()}
    blocks, inv = np.unique(units["geocode"], return_inverse=True)
    aian = np.where(rng.random(blocks.size) < 0.3, "0012", "")
    place = np.where(rng.random(blocks.size) < 0.5, "04500", "")
    units["aian_area"] = aian[inv].astype(object)
    units["place"] = place[inv].astype(object)
    return units


@settings(max_examples=12)
@given(
    seed=st.integers(0, 2**31 - 1),
    batch=st.integers(1, 64),
    groups=st.integers(1, 40),
    shuffle=st.booleans(),
    entities=st.booleans(),
)
def test_streamed_aggregates_equal_the_whole_file_ones(
    tmp_path_factory, seed, batch, groups, shuffle, entities
):
    rng = np.random.default_rng(seed)
    persons, units = make_cef(rng, block_codes(2, 2, 2, 3), gq_rate=0.4)
    if shuffle:
        order = rng.permutation(persons["person_id"].size)
        persons = {k: v[order] for k, v in persons.items()}
        order = rng.permutation(units["unit_id"].size)
        units = {k: v[order] for k, v in units.items()}
    if entities:
        units = _with_entities(units, rng)
    d = tmp_path_factory.mktemp("cef")
    _write_in_groups(d, persons, units, groups)
    got = read_cef_blocks(d, DEFAULT_GEOLEVELS, PL94, batch_rows=batch)
    assert got.streamed
    hierarchy, inv, hist, hu = cef_aggregates(read_cef(d))
    assert np.array_equal(got.hierarchy.blocks, hierarchy.blocks)
    assert got.persons.dtype == np.int64 and (got.persons != hist).nnz == 0
    assert (got.housing_units != hu).nnz == 0
    assert np.array_equal(got.invariants.population, inv.population)
    assert np.array_equal(got.invariants.housing_units, inv.housing_units)
    assert np.array_equal(got.invariants.gq_facilities, inv.gq_facilities)
    assert got.n_persons == persons["person_id"].size and got.n_units == units["unit_id"].size
    if entities:
        first = {g: a for g, a in zip(units["geocode"], units["aian_area"], strict=True)}
        assert list(got.block_attributes["aian_area"]) == [first[b] for b in hierarchy.blocks]
        assert set(got.block_attributes["place"]) <= {"", "04500"}
    else:
        assert got.block_attributes == {}


def test_valid_input_never_reads_whole_files(tmp_path, monkeypatch):
    persons, units = make_cef(np.random.default_rng(3), block_codes(2, 2, 2, 3))
    _write_in_groups(tmp_path, persons, units, 10)

    def boom(*args, **kwargs):
        raise AssertionError("a whole file was read on a valid input")

    monkeypatch.setattr(pq, "read_table", boom)
    got = read_cef_blocks(tmp_path, DEFAULT_GEOLEVELS, PL94, with_units=False, batch_rows=7)
    assert got.streamed and got.housing_units is None
    assert int(got.persons.sum()) == persons["person_id"].size


def _hh_row(p):
    return int(np.flatnonzero(p["hhgq"] == 0)[0])


def _gq_row(p):
    return int(np.flatnonzero(p["hhgq"] > 0)[0])


def _occ_hu(u):
    return int(np.flatnonzero((u["gqtype"] == 0) & u["occupied"])[0])


# each breaks one rule; the streamed reader must refuse it with read_cef's message
BREAKS = {
    "age range": lambda p, u: p["age"].__setitem__(5, 116),
    "cenrace range": lambda p, u: p["cenrace"].__setitem__(1, 0),
    "gqtype range": lambda p, u: u["gqtype"].__setitem__(0, 8),
    "short geocode": lambda p, u: p["geocode"].__setitem__(0, "5000100"),
    "unit geocode": lambda p, u: u["geocode"].__setitem__(1, "50001000001100x1"),
    "duplicate person": lambda p, u: p["person_id"].__setitem__(2, p["person_id"][0]),
    "duplicate unit": lambda p, u: u["unit_id"].__setitem__(1, u["unit_id"][0]),
    "no such unit": lambda p, u: p["unit_id"].__setitem__(0, 10**9),
    "other block": lambda p, u: p["geocode"].__setitem__(
        0, next(g for g in u["geocode"] if g != p["geocode"][0])
    ),
    "gq person in a housing unit": lambda p, u: p["hhgq"].__setitem__(_hh_row(p), 5),
    "household person in a facility": lambda p, u: p["hhgq"].__setitem__(_gq_row(p), 0),
    "wrong facility type": lambda p, u: p["hhgq"].__setitem__(
        _gq_row(p), 1 + p["hhgq"][_gq_row(p)] % 7
    ),
    "person in a vacant unit": lambda p, u: u["occupied"].__setitem__(_occ_hu(u), False),
    "occupied without persons": lambda p, u: u["occupied"].__setitem__(
        int(np.flatnonzero(~u["occupied"])[0]), True
    ),
}


@pytest.mark.parametrize("name", sorted(BREAKS))
def test_a_broken_rule_gets_the_whole_file_readers_message(tmp_path, name):
    persons, units = make_cef(np.random.default_rng(11), block_codes(2, 2, 2, 3), gq_rate=1.0)
    persons = {k: v.astype(object) if k == "geocode" else v.copy() for k, v in persons.items()}
    units = {k: v.astype(object) if k == "geocode" else v.copy() for k, v in units.items()}
    BREAKS[name](persons, units)
    _write_in_groups(tmp_path, persons, units, 16)
    with pytest.raises(InputError) as want:
        read_cef(tmp_path)
    with pytest.raises(InputError) as got:
        read_cef_blocks(tmp_path, DEFAULT_GEOLEVELS, PL94, batch_rows=5)
    assert got.value.problems == want.value.problems and want.value.problems


def test_block_attribute_differing_within_a_block_is_refused(tmp_path):
    persons, units = make_cef(np.random.default_rng(5), block_codes(1, 1, 2, 3))
    units = _with_entities(units, np.random.default_rng(0))
    same = np.flatnonzero(units["geocode"] == units["geocode"][0])
    assert same.size > 1
    units["place"][same[-1]] = "09999" if units["place"][same[0]] != "09999" else ""
    _write_in_groups(tmp_path, persons, units, 8)
    with pytest.raises(InputError, match=r"column 'place', row \d+: .* differs from another"):
        read_cef_blocks(tmp_path, DEFAULT_GEOLEVELS, PL94)


def test_nulls_and_types_get_the_same_messages(tmp_path):
    persons, units = make_cef(np.random.default_rng(2), block_codes(1, 1, 2, 3))
    write_cef(tmp_path, persons, units)
    t = pq.read_table(tmp_path / "persons.parquet")
    ages = t.column("age").to_pylist()
    ages[4] = None
    t = t.set_column(t.column_names.index("age"), "age", pa.array(ages, pa.int64()))
    t = t.set_column(t.column_names.index("sex"), "sex", pa.array(["m"] * t.num_rows))
    pq.write_table(t, tmp_path / "persons.parquet")
    with pytest.raises(InputError) as got:
        read_cef_blocks(tmp_path, DEFAULT_GEOLEVELS, PL94)
    text = got.value.details()
    assert "column 'age', row 4: value None is null" in text
    assert "column 'sex': type string is not an integer type" in text
    (tmp_path / "units.parquet").unlink()
    with pytest.raises(InputError, match=r"units\.parquet: missing file"):
        read_cef_blocks(tmp_path, DEFAULT_GEOLEVELS, PL94)


def test_empty_input_with_block_attributes_streams(tmp_path):
    persons, units = make_cef(np.random.default_rng(4), block_codes(1, 1, 1, 2))
    units = _with_entities(units, np.random.default_rng(1))
    write_cef(tmp_path, persons, units)
    for name in ("persons.parquet", "units.parquet"):  # no rows, the same column types
        pq.write_table(pq.read_table(tmp_path / name).slice(0, 0), tmp_path / name)
    got = read_cef_blocks(tmp_path, DEFAULT_GEOLEVELS, PL94)
    assert got.streamed and got.n_persons == 0 and got.n_units == 0
    assert got.persons.shape == (0, PL94.size) and got.block_attributes["place"].size == 0
