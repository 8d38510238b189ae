"""The input read in parts: per geocode range, as tasks, from one file or a directory of parts.

Every part checks its own rows; what no part can check alone (ids unique across parts,
a person whose unit is in another part, an occupied unit whose residents are elsewhere)
the driver completes. Whatever the cut, the aggregates and the error messages are those
of the whole-file reader.
"""

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
from censusdp.io import cef_stream
from censusdp.io.cef import read_cef
from censusdp.io.cef_parts import CEFPart, IdBucket
from censusdp.io.cef_stream import read_cef_blocks
from synth import block_codes, cef_aggregates, make_cef

PL94 = get_schema("pl94")


class Recording:
    """An executor that runs tasks in this process and keeps them."""

    name = "recording"

    def __init__(self) -> None:
        self.tasks: list = []

    def map(self, fn, tasks, *, ahead=None):
        for t in tasks:
            self.tasks.append(t)
            yield fn(t)


def _county_tables(persons, units):
    """The columns as Arrow tables, one per county (geocode characters 2..5)."""

    def table(cols, rows):
        return pa.table({k: pa.array(list(v[rows]) if k == "geocode" else v[rows])
                         for k, v in cols.items()})  # fmt: skip

    out = []
    counties = sorted({g[:5] for g in units["geocode"]})
    for c in counties:
        pr = np.flatnonzero(np.char.startswith(persons["geocode"].astype("U16"), c))
        ur = np.flatnonzero(np.char.startswith(units["geocode"].astype("U16"), c))
        out.append((table(persons, pr), table(units, ur)))
    return out


def _write_by_county(directory, persons, units, *, parts_dir=False, group_rows=None):
    """Sorted by geocode, one row group per county (or ``group_rows``); with
    ``parts_dir`` one part file per county in ``persons.parquet/`` and ``units.parquet/``."""
    directory.mkdir(parents=True, exist_ok=True)
    tables = _county_tables(persons, units)
    for which, name in ((0, "persons.parquet"), (1, "units.parquet")):
        if parts_dir:
            (directory / name).mkdir()
            for i, t in enumerate(tables):
                pq.write_table(t[which], directory / name / f"part-{i:05d}.parquet")
            (directory / name / "_SUCCESS").write_bytes(b"")
            (directory / name / ".part-00000.parquet.crc").write_bytes(b"x")
        else:
            with pq.ParquetWriter(directory / name, tables[0][which].schema) as w:
                for t in tables:
                    w.write_table(t[which], row_group_size=group_rows or max(t[which].num_rows, 1))


def _cef(seed, counties=3, gq_rate=0.4):
    persons, units = make_cef(np.random.default_rng(seed), block_codes(counties, 2, 2, 3),
                              gq_rate=gq_rate)  # fmt: skip
    persons = {k: v.astype(object) if k == "geocode" else v.copy() for k, v in persons.items()}
    units = {k: v.astype(object) if k == "geocode" else v.copy() for k, v in units.items()}
    return persons, units


@settings(max_examples=6, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    part_rows=st.integers(1, 80),
    group_rows=st.sampled_from([None, 7, 30]),
    ids=st.sampled_from(["increasing", "reversed", "shuffled"]),
)
def test_parts_give_the_whole_file_aggregates(tmp_path_factory, seed, part_rows, group_rows, ids):
    persons, units = _cef(seed, counties=4)
    rng = np.random.default_rng(seed)
    n = persons["person_id"].size
    # ids need not follow the geocode order: the parts' id ranges then overlap and the
    # second pass (hash buckets of ids) decides
    persons["person_id"] = {
        "increasing": np.arange(n), "reversed": np.arange(n)[::-1], "shuffled": rng.permutation(n)
    }[ids].astype(np.int64)  # fmt: skip
    d = tmp_path_factory.mktemp("cef")
    _write_by_county(d, persons, units, group_rows=group_rows)
    ex = Recording()
    got = read_cef_blocks(d, DEFAULT_GEOLEVELS, PL94, executor=ex, part_rows=part_rows)
    hierarchy, inv, hist, hu = cef_aggregates(read_cef(d))
    parts = [t for t in ex.tasks if isinstance(t, CEFPart)]
    assert len(parts) == got.parts >= 2  # four counties, small parts
    # ids in geocode order (or reversed) leave the parts' id ranges apart: no second pass
    second = [t for t in ex.tasks if isinstance(t, IdBucket)]
    assert not second if ids != "shuffled" else all(t.column == "person_id" for t in second)
    assert np.array_equal(got.hierarchy.blocks, hierarchy.blocks)
    assert (got.persons != hist).nnz == 0 and (got.housing_units != hu).nnz == 0
    assert np.array_equal(got.invariants.population, inv.population)
    assert np.array_equal(got.invariants.housing_units, inv.housing_units)
    assert np.array_equal(got.invariants.gq_facilities, inv.gq_facilities)
    assert got.n_persons == n and got.n_units == units["unit_id"].size
    # every person is read (and counted) by exactly one part
    assert sum(c[0] for c in got.part_costs) == n


def test_a_directory_of_parts_reads_as_one_file(tmp_path):
    persons, units = _cef(7, counties=3)
    _write_by_county(tmp_path / "one", persons, units)
    _write_by_county(tmp_path / "parts", persons, units, parts_dir=True)
    a = read_cef_blocks(tmp_path / "one", DEFAULT_GEOLEVELS, PL94, part_rows=1)
    ex = Recording()
    b = read_cef_blocks(tmp_path / "parts", DEFAULT_GEOLEVELS, PL94, part_rows=1, executor=ex)
    assert b.parts == 3 and a.parts == 3
    # a task carries the files it reads (and the first, for the schema), not all of them
    assert [[i for i, _ in t.files[0]] for t in ex.tasks] == [[0], [0, 1], [0, 2]]
    assert np.array_equal(a.hierarchy.blocks, b.hierarchy.blocks)
    assert (a.persons != b.persons).nnz == 0 and (a.housing_units != b.housing_units).nnz == 0
    assert np.array_equal(a.invariants.population, b.invariants.population)
    # the whole-file reader (evaluate, risk, protect) reads the directory too
    whole = read_cef(tmp_path / "parts")
    assert list(whole.persons["person_id"]) == list(persons["person_id"])


def test_an_error_in_a_part_file_names_that_file_and_its_row(tmp_path):
    persons, units = _cef(7, counties=3)
    last = [i for i, g in enumerate(persons["geocode"]) if g.startswith("50003")]
    persons["age"][last[4]] = 200
    _write_by_county(tmp_path, persons, units, parts_dir=True)
    with pytest.raises(InputError) as got:
        read_cef_blocks(tmp_path, DEFAULT_GEOLEVELS, PL94, part_rows=1)
    part = tmp_path / "persons.parquet" / "part-00002.parquet"
    assert got.value.problems == [f"{part}, column 'age', row 4: value 200 is outside 0..115"]


def test_an_empty_parts_directory_is_named(tmp_path):
    persons, units = _cef(7, counties=1)
    _write_by_county(tmp_path, persons, units, parts_dir=True)
    for p in (tmp_path / "units.parquet").glob("part-*"):
        p.unlink()
    with pytest.raises(InputError, match=r"units\.parquet: no part files"):
        read_cef_blocks(tmp_path, DEFAULT_GEOLEVELS, PL94)


def _in(p, county):
    return [i for i, g in enumerate(p["geocode"]) if g.startswith(county)]


def _unit_in(u, county, **where):
    rows = [i for i, g in enumerate(u["geocode"]) if g.startswith(county)]
    return next(i for i in rows if all(u[k][i] == v for k, v in where.items()))


def _move_person(p, u):
    """A person of county 3 given a unit of county 1 (another part, another block)."""
    r = _in(p, "50003")[0]
    p["unit_id"][r] = u["unit_id"][_unit_in(u, "50001", gqtype=0, occupied=True)]
    p["hhgq"][r] = 0


def _person_to_other_county(p, u):
    """A person's geocode moved to county 1: the part of county 1 reads them, their unit
    stays in county 3's part (which must not call that unit empty)."""
    rows = _in(p, "50003")
    alone = np.bincount(p["unit_id"][rows]) == 1  # the unit's only resident
    r = next(i for i in rows if alone[p["unit_id"][i]])
    p["geocode"][r] = u["geocode"][_unit_in(u, "50001")]


def _nulls_and_ranges(p, u):
    """Nulls in county 1 and out-of-range ages in county 3: the column is reported by
    its nulls alone, as the whole-file reader does."""
    p["age"] = p["age"].astype(object)
    p["age"][_in(p, "50001")[2]] = None
    p["age"][_in(p, "50003")[1]] = 300


# each breaks one rule in a later county (another part than the first)
LATER = {
    "age range": lambda p, u: p["age"].__setitem__(_in(p, "50003")[3], 116),
    "many ages in two parts": lambda p, u: [
        p["age"].__setitem__(i, 999) for i in _in(p, "50003")[:15] + _in(p, "50001")[-15:]
    ],
    "short geocode": lambda p, u: p["geocode"].__setitem__(_in(p, "50003")[0], "5000300"),
    "duplicate person across counties": lambda p, u: p["person_id"].__setitem__(
        _in(p, "50003")[2], p["person_id"][_in(p, "50001")[5]]
    ),
    "duplicate unit across counties": lambda p, u: u["unit_id"].__setitem__(
        _unit_in(u, "50003"), u["unit_id"][_unit_in(u, "50001")]
    ),
    "no such unit": lambda p, u: p["unit_id"].__setitem__(_in(p, "50003")[1], 10**9),
    "unit in another county": _move_person,
    "person in another county than their unit": _person_to_other_county,
    "occupied without persons": lambda p, u: u["occupied"].__setitem__(
        _unit_in(u, "50003", occupied=False), True
    ),
    "person in a vacant unit": lambda p, u: u["occupied"].__setitem__(
        _unit_in(u, "50003", occupied=True, gqtype=0), False
    ),
    "nulls and ranges": _nulls_and_ranges,
}


@pytest.mark.parametrize("name", sorted(LATER))
def test_a_problem_in_a_later_county_gets_the_whole_file_message(tmp_path, name):
    persons, units = _cef(11, counties=3, gq_rate=0.5)
    _write_by_county(tmp_path / "ok", persons, units)
    ex = Recording()
    read_cef_blocks(tmp_path / "ok", DEFAULT_GEOLEVELS, PL94, part_rows=1, executor=ex)
    assert len(ex.tasks) == 3  # one part per county
    LATER[name](persons, units)
    _write_by_county(tmp_path / "bad", persons, units)
    with pytest.raises(InputError) as want:
        read_cef(tmp_path / "bad")
    with pytest.raises(InputError) as got:
        read_cef_blocks(tmp_path / "bad", DEFAULT_GEOLEVELS, PL94, part_rows=1)
    assert got.value.problems == want.value.problems and want.value.problems
    rows = [int(m.split("row ")[1].split(":")[0]) for m in want.value.problems if ", row " in m]
    first_county_rows = len(_in(persons, "50001"))
    # (the others name a units row, a row of the first county on purpose, or a person
    # written with the first county whose unit is in the last)
    if name not in ("duplicate unit across counties", "occupied without persons",
                    "person in a vacant unit", "nulls and ranges",
                    "person in another county than their unit"):  # fmt: skip
        assert max(rows) >= first_county_rows  # the named row is past the first part


def test_parts_with_other_columns_are_named(tmp_path):
    persons, units = _cef(7, counties=2)
    _write_by_county(tmp_path, persons, units, parts_dir=True)
    second = tmp_path / "persons.parquet" / "part-00001.parquet"
    t = pq.read_table(second)
    pq.write_table(t.drop_columns(["age"]), second)
    with pytest.raises(InputError, match=r"part-00001\.parquet: columns or types differ from"):
        read_cef_blocks(tmp_path, DEFAULT_GEOLEVELS, PL94)


def test_a_file_out_of_geocode_order_is_read_in_few_large_parts(tmp_path):
    persons, units = _cef(9, counties=3)
    order = np.random.default_rng(0).permutation(persons["person_id"].size)
    _write_by_county(tmp_path / "sorted", persons, units, group_rows=20)
    shuffled = {k: v[order] for k, v in persons.items()}
    (tmp_path / "shuffled").mkdir()
    pq.write_table(pq.read_table(tmp_path / "sorted" / "units.parquet"),
                   tmp_path / "shuffled" / "units.parquet")  # fmt: skip
    pq.write_table(
        pa.table({k: pa.array(list(v)) if k == "geocode" else v for k, v in shuffled.items()}),
        tmp_path / "shuffled" / "persons.parquet",
        row_group_size=20,
    )
    a = read_cef_blocks(tmp_path / "sorted", DEFAULT_GEOLEVELS, PL94, part_rows=1)
    b = read_cef_blocks(tmp_path / "shuffled", DEFAULT_GEOLEVELS, PL94, part_rows=1)
    # shuffled, every row group of persons spans the state and is read by every part:
    # the parts are made larger until the input is read at most MAX_READS times over
    assert a.parts >= 3 * b.parts
    n = persons["person_id"].size + units["unit_id"].size
    assert sum(c[0] for c in b.part_costs) == persons["person_id"].size
    assert b.parts * persons["person_id"].size <= cef_stream.MAX_READS * n
    assert (a.persons != b.persons).nnz == 0
