"""The files of a CEF: one rule for every reader, and the hash of the bytes read.

``read_cef`` (evaluate, validate --input, protect, risk, attack) and ``read_cef_blocks``
(run) take their files from :func:`censusdp.io.cef_files.input_files` and read them only
through :func:`censusdp.io.cef_files.open_input`: they read the same rows, refuse the
same things in the same words, and the SHA-256 they report is of the bytes they parsed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from censusdp.data.geography import DEFAULT_GEOLEVELS, validate_geocodes
from censusdp.data.schema import get_schema
from censusdp.errors import InputError
from censusdp.io.cef import read_cef, read_cef_tables
from censusdp.io.cef_files import InputChanged, Stamp, hash_input, input_files, open_input
from censusdp.io.cef_stream import read_cef_blocks
from synth import block_codes, make_cef, write_cef

PL94 = get_schema("pl94")


@pytest.fixture()
def cef(tmp_path):
    """A small valid CEF in single files."""
    persons, units = make_cef(np.random.default_rng(5), block_codes(1, 2, 2, 3), gq_rate=0.3)
    write_cef(tmp_path / "one", persons, units)
    return tmp_path / "one"


def _as_parts(cef, d, n=3):
    """``cef`` with both inputs as directories of ``n`` parts (Spark's markers beside)."""
    d.mkdir()
    for name in ("persons.parquet", "units.parquet"):
        t = pq.read_table(cef / name)
        (d / name).mkdir()
        cuts = np.linspace(0, t.num_rows, n + 1).astype(int)
        for i in range(n):
            pq.write_table(
                t.slice(cuts[i], cuts[i + 1] - cuts[i]), d / name / f"part-{i:05d}.parquet"
            )
        (d / name / "_SUCCESS").write_bytes(b"")
        (d / name / "._SUCCESS.crc").write_bytes(b"c")
        (d / name / ".part-00001.parquet.crc").write_bytes(b"c")
    return d


def _both(d):
    """The problems of both readers (each must refuse)."""
    with pytest.raises(InputError) as whole:
        read_cef(d)
    with pytest.raises(InputError) as parts:
        read_cef_blocks(d, DEFAULT_GEOLEVELS, PL94, part_rows=1)
    return whole.value.problems, parts.value.problems


def test_a_directory_of_parts_lists_its_parts_in_name_order(cef, tmp_path):
    d = _as_parts(cef, tmp_path / "parts")
    files, problems = input_files(d)
    assert problems == []
    assert [[f.name for f in fs] for fs in files] == [
        [f"part-{i:05d}.parquet" for i in range(3)]
    ] * 2


ENTRIES = {
    "subdirectory": lambda p: (p / "sub").mkdir(),
    "hive folder": lambda p: (p / "year=2020").mkdir(),
    "no suffix": lambda p: (p / "part-00009").write_bytes(b"x"),
    "other suffix": lambda p: (p / "part-00009.parquet.bak").write_bytes(b"x"),
    "hidden file": lambda p: (p / ".part-00009.parquet").write_bytes(b"x"),
    "underscore file": lambda p: (p / "_part-00009.parquet").write_bytes(b"x"),
    "orphan checksum": lambda p: (p / ".part-00009.parquet.crc").write_bytes(b"x"),
    "symbolic link": lambda p: (p / "part-00009.parquet").symlink_to(p / "part-00000.parquet"),
    "fifo": lambda p: os.mkfifo(p / "part-00009.parquet"),
}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
def test_anything_else_in_a_directory_of_parts_is_refused_by_both_readers(cef, tmp_path, entry):
    d = _as_parts(cef, tmp_path / "parts")
    before = {p.name for p in (d / "persons.parquet").iterdir()}
    ENTRIES[entry](d / "persons.parquet")
    (added,) = {p.name for p in (d / "persons.parquet").iterdir()} - before
    whole, parts = _both(d)
    assert whole == parts and len(whole) == 1, whole
    assert whole[0].startswith(f"{d / 'persons.parquet' / added}: "), whole


def test_not_a_regular_file_is_refused_without_opening_it(cef, tmp_path):
    d = tmp_path / "fifo"
    d.mkdir()
    shutil.copyfile(cef / "units.parquet", d / "units.parquet")
    os.mkfifo(d / "persons.parquet")  # opening it for reading would wait for a writer
    whole, parts = _both(d)
    assert whole == parts == [f"{d / 'persons.parquet'}: not a regular file or a directory of "
                              "parts (a FIFO, socket or device)"]  # fmt: skip
    with pytest.raises(InputError, match="not a regular file"):
        open_input("/dev/zero")


@pytest.mark.parametrize("content", [b"", b"not parquet" * 100])
def test_a_file_that_is_not_parquet_is_named_alike(cef, tmp_path, content):
    d = _as_parts(cef, tmp_path / "parts")
    part = d / "units.parquet" / "part-00001.parquet"
    part.write_bytes(content)
    whole, parts = _both(d)
    assert whole == parts and len(whole) == 1, (whole, parts)
    assert whole[0].startswith(f"{part}: not a readable Parquet file ("), whole


def test_both_readers_read_the_same_rows_from_parts(cef, tmp_path):
    d = _as_parts(cef, tmp_path / "parts")
    whole, one = read_cef(d), read_cef(cef)
    for k, v in one.persons.items():
        assert np.array_equal(whole.persons[k], v), k
    blocks = read_cef_blocks(d, DEFAULT_GEOLEVELS, PL94, part_rows=1)
    assert blocks.n_persons == whole.n_persons and blocks.n_units == whole.n_units


def test_a_part_of_another_type_is_refused_alike(cef, tmp_path):
    """``read_cef`` read a directory as one dataset, casting a later part's string ages
    to the first part's integers."""
    d = _as_parts(cef, tmp_path / "parts")
    part = d / "persons.parquet" / "part-00002.parquet"
    t = pq.read_table(part)
    ages = pa.array([str(a) for a in t.column("age").to_pylist()])
    pq.write_table(t.set_column(t.schema.get_field_index("age"), "age", ages), part)
    whole, parts = _both(d)
    first = d / "persons.parquet" / "part-00000.parquet"
    assert (
        whole
        == parts
        == [f"{part}: columns or types differ from {first} (column 'age' is string, not int64)"]
    )


def test_a_row_of_a_part_is_named_alike(cef, tmp_path):
    """A problem is named by the part file and its row there, by both readers (the
    whole-file reader numbered rows across the parts)."""
    d = _as_parts(cef, tmp_path / "parts")
    part = d / "persons.parquet" / "part-00001.parquet"
    t = pq.read_table(part)
    age = t.column("age").to_numpy().copy()
    age[2] = 200
    pq.write_table(t.set_column(t.schema.get_field_index("age"), "age", pa.array(age)), part)
    whole, parts = _both(d)
    assert whole == parts == [f"{part}, column 'age', row 2: value 200 is outside 0..115"]


@pytest.mark.parametrize(
    ("column", "value", "rule"),
    [
        ("age", 2**63 + 5, "is outside 0..115"),
        ("person_id", 2**64 - 1, "is outside the 64-bit integer range"),
    ],
)
def test_a_uint64_value_is_reported_as_it_is(cef, tmp_path, column, value, rule):
    d = tmp_path / "u64"
    shutil.copytree(cef, d)
    t = pq.read_table(d / "persons.parquet")
    v = t.column(column).to_numpy().astype(np.uint64)
    v[1] = value
    t = t.set_column(t.schema.get_field_index(column), column, pa.array(v, pa.uint64()))
    pq.write_table(t, d / "persons.parquet")
    whole, parts = _both(d)
    assert whole == parts
    assert whole[0].startswith(
        f"{d / 'persons.parquet'}, column {column!r}, row 1: value {value} {rule}"
    )


def test_a_unicode_digit_is_not_a_geocode_digit():
    assert "\u0663".isdigit()  # what the old check relied on
    codes = np.array(["5600100010001003", "560010001000100\u0663", "560010001000100"], dtype=object)
    assert list(validate_geocodes(codes)) == [True, False, False]
    assert list(validate_geocodes(np.array(["\u0664\u0665\u0666\u0667", "4567"]), 4)) == [
        False,
        True,
    ]


def test_the_hash_is_of_the_bytes_read(cef, tmp_path):
    d = _as_parts(cef, tmp_path / "parts")
    want = {
        p.relative_to(d).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(d.rglob("part-*.parquet"))
    }
    assert dict(read_cef(d).input_sha256) == want
    assert read_cef_blocks(d, DEFAULT_GEOLEVELS, PL94).input_sha256 == want
    assert hash_input(d).sha256 == want


@pytest.mark.parametrize("how", ["replaced", "rewritten in place"])
def test_a_file_changed_after_hashing_is_refused(cef, tmp_path, how):
    """The part reader hashes first and reads later (in tasks): a file replaced or
    rewritten in between is refused, never read under the other file's hash."""
    d = tmp_path / "in"
    shutil.copytree(cef, d)
    source = hash_input(d)
    t = pq.read_table(d / "persons.parquet")
    race = t.column("cenrace").to_numpy().copy()
    race[:5] = race[:5] % 63 + 1
    t = t.set_column(t.schema.get_field_index("cenrace"), "cenrace", pa.array(race))
    if how == "replaced":
        pq.write_table(t, tmp_path / "other.parquet")
        os.replace(tmp_path / "other.parquet", d / "persons.parquet")
    else:
        pq.write_table(t, d / "persons.parquet")
    with pytest.raises(InputError, match=r"persons\.parquet: changed while the input was read"):
        read_cef_blocks(source, DEFAULT_GEOLEVELS, PL94)
    assert issubclass(InputChanged, InputError)


def test_a_stamp_taken_on_another_host_compares_size_and_modification_time(cef):
    """A Spark executor on another host sees a shared file system's own inode numbers
    and change times: there, size and modification time identify the file."""
    st = os.stat(cef / "persons.parquet")
    here = Stamp.of(st)
    assert here.matches(st)
    assert not dataclasses.replace(here, inode=here.inode + 1).matches(st)
    there = dataclasses.replace(here, host=here.host + ".elsewhere", inode=1, ctime_ns=0)
    assert there.matches(st)
    assert not dataclasses.replace(there, mtime_ns=here.mtime_ns + 1).matches(st)
    assert not dataclasses.replace(there, size=here.size + 1).matches(st)


def test_the_tables_of_a_cef_are_read_by_the_same_rule(cef, tmp_path):
    """``read_cef_tables`` (a tool rewriting a CEF, e.g. ``tradeoff census``'s coarsened
    copy) reads the files ``read_cef`` reads, and refuses what it refuses."""
    d = _as_parts(cef, tmp_path / "parts")
    tables = read_cef_tables(d)
    assert tables["persons.parquet"].equals(pq.read_table(cef / "persons.parquet"))
    (d / "persons.parquet" / "extra").mkdir()
    with pytest.raises(InputError, match="a subdirectory in a directory of parts"):
        read_cef_tables(d)
