"""Bounded NMF row groups: written at geounit boundaries, read back from any split.

pyarrow caps a row group at 2^26 rows; a (Block, detailed) family of the 233,856-cell
dhc-lite schema passes that with ~290 blocks. The writer cuts row groups itself (at
most ``row_group_rows`` rows, whole geounits), and the reader accepts any split, even
one written by another tool that cuts a geounit in two.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.data.geography import Hierarchy
from censusdp.data.measurements import MeasuredChunk, MeasuredQuery, measured_rows
from censusdp.data.queries import make_query
from censusdp.data.schema import get_schema
from censusdp.errors import InputError
from censusdp.io import nmf_write
from censusdp.io.atomic import sha256_of
from censusdp.io.nmf_files import (
    NMF_COLUMNS,
    STORED_COLUMNS,
    read_nmf_table,
    row_group_keys,
    write_part_index,
)
from censusdp.io.nmf_read import NMFReader
from censusdp.io.nmf_write import NMF_SCHEMA, NMFWriter, row_group_bounds, write_nmf_part
from censusdp.release.validate._nmf_rows import Tally, count_files
from synth import block_codes

PL94 = get_schema("pl94")
QUERIES = ("total", "hhgq", "votingage*hispanic")


def _hierarchy(blocks: int) -> Hierarchy:
    return Hierarchy.from_blocks(np.asarray(block_codes(1, 1, 1, blocks)))


def _measure(h: Hierarchy, rng: np.random.Generator) -> list[tuple[MeasuredQuery, np.ndarray]]:
    """Every query above at every level, with distinct values (so misplacement shows)."""
    out = []
    for level in range(h.n_levels):
        for qname in QUERIES:
            q = make_query(PL94, qname)
            rows = measured_rows(PL94, q)
            values = rng.integers(-(10**6), 10**6, (h.n_units(level), rows.size))
            name = h.geolevels[level].name
            out.append(
                (
                    MeasuredQuery(name, q.name, rows, values, 3.0, "DiscreteGaussian"),
                    h.geocodes[level],
                )
            )
    return out


def _write(path, measured, **kw) -> None:
    with NMFWriter(path, **kw) as w:
        for mq, codes in measured:
            w.write_query(mq, codes)


@settings(max_examples=40)
@given(
    n_units=st.integers(0, 9),
    n_rows=st.integers(1, 12),
    cap=st.integers(1, 40),
    target=st.one_of(st.none(), st.integers(1, 50)),
)
def test_row_group_bounds_tile_the_rows_at_unit_boundaries(n_units, n_rows, cap, target):
    bounds = row_group_bounds(n_units, n_rows, cap, target)
    flat = [i for a, b in bounds for i in range(a, b)]
    assert flat == list(range(n_units * n_rows))  # every row once, in order
    assert all(0 < b - a <= cap for a, b in bounds)
    if n_rows <= cap:
        # whole units only, as many as fit in the target (at least one)
        fit = max(min(cap, target or cap) // n_rows, 1) * n_rows
        assert all(a % n_rows == 0 and b - a == min(fit, n_units * n_rows - a) for a, b in bounds)
    else:
        # a unit is cut only inside itself
        assert all(a // n_rows == (b - 1) // n_rows for a, b in bounds)
    with pytest.raises(ValueError, match="at least 1"):
        row_group_bounds(n_units, n_rows, 0)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    h = _hierarchy(11)
    measured = _measure(h, np.random.default_rng(5))
    d = tmp_path_factory.mktemp("rg")
    _write(d / "default.parquet", measured)
    return d, h, measured


@settings(max_examples=20)
@given(cap=st.integers(1, 60), data=st.data())
def test_any_cap_reads_back_the_same_values(base, tmp_path_factory, cap, data):
    d, h, measured = base
    path = tmp_path_factory.mktemp("cap") / f"nmf{cap}.parquet"
    _write(path, measured, row_group_rows=cap)
    md = pq.ParquetFile(path).metadata
    sizes = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
    assert max(sizes) <= cap
    reader = NMFReader(path, PL94, h)
    level = data.draw(st.integers(0, h.n_levels - 1))
    n = h.n_units(level)
    start = data.draw(st.integers(0, n))
    stop = data.draw(st.integers(start, n))
    got = {m.query: m for m in reader.read(level, start, stop)}
    want = [mq for mq, _ in measured if mq.geolevel == h.geolevels[level].name]
    assert list(got) == [mq.query for mq in want]
    for mq in want:
        g = got[mq.query]
        assert np.array_equal(g.rows, mq.rows) and g.variance == mq.variance
        assert g.values.shape == (stop - start, mq.rows.size)
        assert np.array_equal(g.values, mq.values[start:stop])


@settings(max_examples=15)
@given(
    shares=st.lists(st.sampled_from([2.0, 3.0, 7.5]), min_size=11, max_size=11),
    cap=st.integers(1, 200),
)
def test_units_at_other_shares_start_row_groups_and_read_back(base, tmp_path_factory, shares, cap):
    """Per-geounit variances (a spine's bypass shares): every row group holds one variance,
    the rows of whole units, and the reader gives back each unit's values and variance."""
    _, h, measured = base
    block = h.n_levels - 1
    unit_var = np.array(shares)
    queries = []
    for mq, codes in measured:
        if mq.geolevel == "Block":
            queries.append((
                MeasuredQuery("Block", mq.query, mq.rows, mq.values, unit_var, mq.mechanism),
                codes,
            ))  # fmt: skip
    path = tmp_path_factory.mktemp("shares") / "nmf.parquet"
    _write(path, queries, row_group_rows=cap)
    md = pq.ParquetFile(path).metadata
    runs = int((unit_var[1:] != unit_var[:-1]).sum()) + 1
    assert md.num_row_groups >= runs * len(queries)
    codes = list(h.geocodes[block])
    for key in row_group_keys(md, "nmf"):  # one variance a row group, its units'
        units = unit_var[codes.index(key.first) : codes.index(key.last) + 1]
        assert set(units.tolist()) == {key.variance}
    reader = NMFReader(path, PL94, h)
    got = {m.query: m for m in reader.read(block, 0, h.n_units(block))}
    for mq, _ in queries:
        assert np.array_equal(got[mq.query].values, mq.values)
        assert np.array_equal(np.broadcast_to(got[mq.query].variance, (11,)), unit_var)
        assert np.array_equal(reader.unit_variances(block, mq.query), unit_var)


def test_the_one_value_columns_are_in_rows_and_keyed_once_per_row_group(base):
    """geolevel, query, variance and mechanism hold one value per row group: the file
    stores all seven documented columns (what any Parquet reader sees) and each row
    group's key (rows, level, query, variance, mechanism, first and last geocode) in
    its metadata, the readers' index."""
    d, h, measured = base
    pf = pq.ParquetFile(d / "default.parquet")
    assert pf.schema_arrow.names == list(STORED_COLUMNS) == list(NMF_COLUMNS)
    plain = pq.read_table(d / "default.parquet").to_pandas()
    assert set(plain.columns) == set(NMF_COLUMNS)
    keys = row_group_keys(pf.metadata, "default")
    assert [k.rows for k in keys] == [
        pf.metadata.row_group(i).num_rows for i in range(pf.metadata.num_row_groups)
    ]
    assert [(k.geolevel, k.query) for k in keys] == [(m.geolevel, m.query) for m, _ in measured]
    level = {name: i for i, name in enumerate(h.geolevels.names)}
    for k, (mq, _) in zip(keys, measured, strict=True):
        codes = h.geocodes[level[k.geolevel]]
        assert (k.variance, k.mechanism, k.first, k.last) == (
            3.0,
            mq.mechanism,
            codes[0],
            codes[-1],
        )
    t = read_nmf_table(d / "default.parquet")
    assert t.column_names == list(NMF_SCHEMA.names)
    want = [
        (mq.geolevel, code, mq.query, int(cell), int(v), 3.0, mq.mechanism)
        for mq, codes in measured
        for code, row in zip(codes, mq.values, strict=True)
        for cell, v in zip(mq.rows, row, strict=True)
    ]
    assert list(zip(*(t.column(c).to_pylist() for c in NMF_SCHEMA.names), strict=True)) == want
    sub = read_nmf_table(d / "default.parquet", row_groups=[1, 2], columns=["query", "value"])
    assert sub.column_names == ["query", "value"]
    assert (
        sub.column("query").to_pylist()
        == [keys[1].query] * keys[1].rows + [keys[2].query] * keys[2].rows
    )
    only = read_nmf_table(d / "default.parquet", row_groups=[3], columns=["variance"])
    assert only.num_rows == keys[3].rows and set(only.column("variance").to_pylist()) == {3.0}


def test_row_group_keys_that_do_not_match_the_file_are_one_line_errors(base, tmp_path):
    """A file rewritten with another split but the keys of the first (a tool that copies
    the metadata) is refused, not read with the wrong levels or queries."""
    d, h, _ = base
    pf = pq.ParquetFile(d / "default.parquet")
    path = tmp_path / "resplit.parquet"
    copied = pf.schema_arrow.with_metadata(pf.metadata.metadata)  # the keys copied
    with pq.ParquetWriter(path, copied) as w:
        w.write_table(pf.read(), row_group_size=37)
    with pytest.raises(InputError, match="row-group keys") as e:
        NMFReader(path, PL94, h)
    assert "\n" not in str(e.value)
    with pytest.raises(InputError, match="row-group keys"):
        read_nmf_table(path)


def test_columns_are_required_value_and_cell_delta_encoded_statistics_on_variance_only(base):
    """What the writer's CPU per value rests on (``benchmarks/bench_nmf_write.py``):
    non-null columns (no definition levels: the self-check takes ``value``'s integers
    from that), ``value`` and ``cell`` delta-encoded without a dictionary, ``value`` and
    the one-value columns uncompressed, and statistics on ``variance`` alone (a float's
    min and max; those of a dictionary-encoded string column cost more than the rest of
    the column)."""
    d, _, _ = base
    pf = pq.ParquetFile(d / "default.parquet")
    assert all(not f.nullable for f in pf.schema_arrow)
    md = pf.metadata
    names = pf.schema_arrow.names
    for i in range(md.num_row_groups):
        rg = md.row_group(i)
        for j, name in enumerate(names):
            col = rg.column(j)
            if name in ("cell", "value"):
                assert "DELTA_BINARY_PACKED" in col.encodings, name
                assert not col.has_dictionary_page, name
            with_stats = name == "variance"
            assert (col.statistics is not None) == with_stats, name
            zstd = name in ("geocode", "cell")
            assert col.compression == ("ZSTD" if zstd else "UNCOMPRESSED"), name


def test_the_statistics_before_and_now_give_the_same_nmf(base, tmp_path):
    """The same measurements written with the statistics before (on ``geolevel``,
    ``query``, ``value`` and ``variance``) and now (``variance`` alone): the same seven
    columns and values read back, the same measurements for the estimator, and the
    self-check's count the same on both (it reads the level and query the footer no
    longer settles)."""
    d, h, measured = base
    before = tmp_path / "before.parquet"
    options = {
        **nmf_write.WRITE_OPTIONS,
        "write_statistics": ["geolevel", "query", "value", "variance"],
    }
    with mock.patch.object(nmf_write, "WRITE_OPTIONS", options):
        _write(before, measured, engine="pyarrow")
    now = d / "default.parquet"
    stats = {
        name
        for i, name in enumerate(STORED_COLUMNS)
        if pq.ParquetFile(before).metadata.row_group(0).column(i).statistics is not None
    }
    assert stats == {"geolevel", "query", "value", "variance"}
    assert read_nmf_table(before).equals(read_nmf_table(now))
    for level in range(h.n_levels):
        n = h.n_units(level)
        a = NMFReader(before, PL94, h).read(level, 0, n)
        b = NMFReader(now, PL94, h).read(level, 0, n)
        assert [m.query for m in a] == [m.query for m in b]
        assert all(np.array_equal(x.values, y.values) for x, y in zip(a, b, strict=True))
    tallies = []
    for path in (before, now):
        plan = {(m.geolevel, m.query): m for m, _ in measured}
        levels = {lv.name: i for i, lv in enumerate(h.geolevels)}
        tally = Tally(
            {k: np.full(h.n_units(levels[k[0]]), 3.0) for k in plan},
            {k: np.zeros(h.n_units(levels[k[0]]), np.int64) for k in plan},
            {k: np.zeros(h.n_units(levels[k[0]]), np.uint64) for k in plan},
            h.geocodes,
            levels,
        )
        assert count_files(path, [path], tally) is None
        tallies.append(tally)
    for k, rows in tallies[0].rows.items():
        assert np.array_equal(rows, tallies[1].rows[k]) and rows.min() == plan[k].rows.size
        assert np.array_equal(tallies[0].mix[k], tallies[1].mix[k])


def test_files_of_the_previous_layout_read_the_same(base, tmp_path):
    """An NMF written before (nullable columns, ``value`` with a dictionary and zstd,
    statistics on every column), alone or beside parts of the new layout, reads back to
    the same measurements."""
    d, h, measured = base
    new = read_nmf_table(d / "default.parquet")
    previous = new.cast(pa.schema([f.with_nullable(True) for f in NMF_SCHEMA]))
    old_path = tmp_path / "previous.parquet"
    pq.write_table(
        previous,
        old_path,
        compression="zstd",
        use_dictionary=["geolevel", "geocode", "query", "value", "variance", "mechanism"],
        column_encoding={"cell": "DELTA_BINARY_PACKED"},
    )
    assert pq.ParquetFile(old_path).schema_arrow.field("value").nullable
    for level in range(h.n_levels):
        n = h.n_units(level)
        a = NMFReader(d / "default.parquet", PL94, h).read(level, 0, n)
        b = NMFReader(old_path, PL94, h).read(level, 0, n)
        assert [m.query for m in a] == [m.query for m in b]
        for x, y in zip(a, b, strict=True):
            assert np.array_equal(x.values, y.values) and x.variance == y.variance
    # a directory of one old part (the levels above the block) and one new (the blocks)
    parts = tmp_path / "mixed"
    parts.mkdir()
    bl = h.n_levels - 1
    above = [m for m, _ in measured if m.geolevel != "Block"]
    with NMFWriter(parts / "part-00000.parquet") as w:
        for mq in above:
            w.write_query(mq, h.geocodes[h.geolevels.index(mq.geolevel)])
    t = read_nmf_table(parts / "part-00000.parquet")
    pq.write_table(
        t.cast(pa.schema([f.with_nullable(True) for f in NMF_SCHEMA])),
        parts / "part-00000.parquet",
        use_dictionary=["geolevel", "geocode", "query", "value", "variance", "mechanism"],
    )
    blocks = tuple(m for m, _ in measured if m.geolevel == "Block")
    chunk = MeasuredChunk("Block", 0, h.n_units(bl), h.geocodes[bl], blocks, 0.0)
    old_part = parts / "part-00000.parquet"
    recs = [
        {
            "file": old_part.name,
            "geolevel": h.geolevels[0].name,
            "start": 0,
            "stop": 1,
            "rows": pq.ParquetFile(old_part).metadata.num_rows,
            "sha256": sha256_of(old_part),
        },
        write_nmf_part(chunk, parts / "part-00001.parquet"),
    ]
    write_part_index(parts, recs)
    reader = NMFReader(parts, PL94, h)
    for level in range(h.n_levels):
        got = reader.read(level, 0, h.n_units(level))
        want = [m for m, _ in measured if m.geolevel == h.geolevels[level].name]
        for x, y in zip(got, want, strict=True):
            assert np.array_equal(x.values, y.values)


def test_the_reader_builds_each_query_once_whatever_the_row_groups(base, tmp_path, monkeypatch):
    """Opening an NMF builds each query's operator once, not once per row group: a
    ddp-2010 ``detailed`` query takes about 40 ms to build, and full Delaware's NMF has
    6,616 row groups (4.4 CPU minutes before the driver could estimate anything)."""
    from censusdp.io import nmf_read

    _, h, measured = base
    path = tmp_path / "small_groups.parquet"
    _write(path, measured, row_group_rows=5)
    assert pq.ParquetFile(path).metadata.num_row_groups > 3 * len(QUERIES)
    built = []
    real = nmf_read.make_query
    monkeypatch.setattr(nmf_read, "make_query", lambda s, q: built.append(q) or real(s, q))
    reader = NMFReader(path, PL94, h)
    assert sorted(built) == sorted({make_query(PL94, q).name for q in QUERIES})
    bl = h.n_levels - 1
    assert [m.query for m in reader.read(bl, 0, 2)] == [mq.query for mq, _ in measured[-3:]]


def test_the_writer_cuts_at_unit_boundaries(base, tmp_path):
    _, h, measured = base
    block = h.n_levels - 1
    mq = next(m for m, _ in measured if m.geolevel == "Block" and m.query != "total")
    r = mq.rows.size
    cap = 3 * r + r // 2  # room for three and a half blocks: three per row group
    path = tmp_path / "nmf.parquet"
    _write(path, [(mq, h.geocodes[block])], row_group_rows=cap)
    md = pq.ParquetFile(path).metadata
    sizes = [md.row_group(i).num_rows for i in range(md.num_row_groups)]
    assert sizes == [3 * r, 3 * r, 3 * r, 2 * r]  # 11 blocks


def test_a_foreign_split_inside_a_unit_is_read(base, tmp_path):
    """The failure of issue 16: pyarrow's own cut at a row that is not a unit boundary."""
    d, h, measured = base
    pf = pq.ParquetFile(d / "default.parquet")
    path = tmp_path / "cut.parquet"
    with pq.ParquetWriter(path, NMF_SCHEMA) as w:  # all seven columns in rows, as before
        for i in range(pf.metadata.num_row_groups):  # one (level, query) each
            t = read_nmf_table(d / "default.parquet", row_groups=[i])
            w.write_table(t, row_group_size=37)  # prime: cuts inside units
    md = pq.ParquetFile(path).metadata
    assert md.num_row_groups > 10
    reader = NMFReader(path, PL94, h)
    assert reader._fallback is None  # read by row groups, not whole
    for level in range(h.n_levels):
        n = h.n_units(level)
        for start, stop in ((0, n), (n // 3, n - n // 4)):
            want = [mq for mq, _ in measured if mq.geolevel == h.geolevels[level].name]
            for g, w in zip(reader.read(level, start, stop), want, strict=True):
                assert np.array_equal(g.values, w.values[start:stop]), (level, w.query)


def test_overlaps_and_gaps_are_one_line_errors(base, tmp_path):
    d, h, measured = base
    mq = next(m for m, _ in measured if m.geolevel == "Block" and m.query == "hhgq")
    codes = h.geocodes[h.n_levels - 1]
    r = mq.rows.size
    _write(tmp_path / "one.parquet", [(mq, codes)], row_group_rows=r + 1)
    pf = pq.ParquetFile(tmp_path / "one.parquet")
    n_groups = pf.metadata.num_row_groups
    groups = [read_nmf_table(tmp_path / "one.parquet", row_groups=[i]) for i in range(n_groups)]
    assert len(groups) == 11

    def rewrite(name, parts):
        with pq.ParquetWriter(tmp_path / name, parts[0].schema) as w:
            for t in parts:
                w.write_table(t)
        return tmp_path / name

    gap = rewrite("gap.parquet", groups[:4] + groups[5:])
    with pytest.raises(InputError, match=r"does not cover units 4\.\.4 exactly once") as e:
        NMFReader(gap, PL94, h)
    assert "\n" not in str(e.value)
    twice = rewrite("twice.parquet", groups[:5] + groups[4:])
    with pytest.raises(InputError, match="does not cover units"):
        NMFReader(twice, PL94, h)
    short = rewrite("short.parquet", groups[:-1])
    with pytest.raises(InputError, match="covers 10 of 11 units"):
        NMFReader(short, PL94, h)
    # half a unit missing at the end: the row counts no longer tile the units
    half = rewrite("half.parquet", [*groups[:-1], groups[-1].slice(0, r // 2)])
    with pytest.raises(InputError, match="cover"):
        NMFReader(half, PL94, h)


@pytest.mark.slow
def test_a_family_over_two_to_the_26_rows_round_trips(tmp_path):
    """Real size: 300 blocks x the dhc-lite detailed query (229,320 measured rows) is more
    than 2^26 rows, which pyarrow would have cut inside a block."""
    schema = get_schema("dhc-lite")
    q = make_query(schema, "detailed")
    rows = measured_rows(schema, q)
    n = 300
    assert n * rows.size > 1 << 26
    h = Hierarchy.from_blocks(np.asarray(block_codes(1, 1, 1, n)))
    values = np.arange(n * rows.size, dtype=np.int64).reshape(n, rows.size)
    mq = MeasuredQuery("Block", q.name, rows, values, 40.0, "Geometric")
    path = tmp_path / "big.parquet"
    with NMFWriter(path) as w:
        w.write_query(mq, h.geocodes[h.n_levels - 1])
    md = pq.ParquetFile(path).metadata
    sizes = np.array([md.row_group(i).num_rows for i in range(md.num_row_groups)])
    assert sizes.sum() == n * rows.size and sizes.max() <= 1 << 26
    assert (sizes % rows.size == 0).all()
    del values
    reader = NMFReader(path, schema, h)
    (got,) = reader.read(h.n_levels - 1, 0, n)
    assert got.values.shape == (n, rows.size)
    assert np.array_equal(got.values.ravel(), np.arange(n * rows.size))
    (mid,) = reader.read(h.n_levels - 1, 150, 153)
    assert np.array_equal(mid.values.ravel(), np.arange(150 * rows.size, 153 * rows.size))


def test_families_read_one_after_another_read_each_row_group_once(base, tmp_path, monkeypatch):
    """Tasks read their own families from NMF slices; consecutive families share row
    groups, which the process reads once (full Wyoming's block level read each row group
    about 50 times), and every family still gets its own values."""
    from censusdp.io import nmf_cache

    _, h, measured = base
    path = tmp_path / "nmf.parquet"
    _write(path, measured, row_group_rows=40)
    monkeypatch.setattr(nmf_cache, "_CACHE", nmf_cache._GroupCache(1 << 20, 2))
    reads = []
    real = nmf_cache._read_group
    monkeypatch.setattr(
        nmf_cache, "_read_group", lambda pf, span, *a: reads.append(span.rg) or real(pf, span, *a)
    )
    reader = NMFReader(path, PL94, h)
    bl = h.n_levels - 1
    want = [mq for mq, _ in measured if mq.geolevel == "Block"]
    for u in range(h.n_units(bl)):
        piece = reader.detach(bl, u, u + 1)
        assert piece.read(bl, u, u) and all(m.values.size == 0 for m in piece.read(bl, u, u))
        for g, w in zip(piece.read(bl, u, u + 1), want, strict=True):
            assert np.array_equal(g.values, w.values[u : u + 1]), (u, w.query)
    groups = {rg for rg in range(pq.ParquetFile(path).metadata.num_row_groups)}
    assert sorted(reads) == sorted(set(reads)) and set(reads) < groups  # once each, Block only
    assert nmf_cache._CACHE.hits > len(reads)


def test_a_cached_row_group_is_checked_and_a_rewritten_file_read_again(base, tmp_path):
    _, h, measured = base
    path = tmp_path / "nmf.parquet"
    _write(path, measured)
    bl = h.n_levels - 1
    first = NMFReader(path, PL94, h).read(bl, 2, 5)
    # a slice whose geocodes disagree with the file: a hit is checked as a read is
    piece = NMFReader(path, PL94, h).detach(bl, 2, 5)
    shifted = np.roll(piece.codes, 1)
    with pytest.raises(InputError, match="geocodes are not in geography order"):
        dataclasses.replace(piece, codes=shifted).read(bl, 2, 5)
    # the file replaced by one of other values (as a rerun with --overwrite would)
    changed = [
        (MeasuredQuery(mq.geolevel, mq.query, mq.rows, mq.values + 1, 3.0, mq.mechanism), c)
        for mq, c in measured
    ]
    _write(path, changed)
    again = NMFReader(path, PL94, h).read(bl, 2, 5)
    for a, b in zip(first, again, strict=True):
        assert np.array_equal(b.values, a.values + 1)


@settings(max_examples=30)
@given(
    sizes=st.lists(st.integers(0, 300), max_size=30),
    budget=st.integers(1, 1000),
)
def test_the_row_group_cache_stays_within_its_budget(sizes, budget):
    from censusdp.io.nmf_cache import _GroupCache

    cache = _GroupCache(budget, 2)
    kept: list[int] = []
    for i, n in enumerate(sizes):
        entry = (np.zeros(n, np.int8), np.zeros(0, np.int64), np.zeros(0, "<U1"))
        cache.put(("f", i), entry)
        assert cache._bytes <= budget
        assert cache._bytes == sum(sum(a.nbytes for a in e) for e in cache._groups.values())
        if n <= budget:
            kept.append(i)
    # what is kept is the most recent entries that fit
    held = [k[1] for k in cache._groups]
    assert held == kept[len(kept) - len(held) :]


def test_every_row_group_gets_its_own_querys_variance_and_names(base, tmp_path):
    """Each row group's key is its own query's (level, query, variance, mechanism),
    whatever the writer wrote before it."""
    _, h, measured = base
    bl = h.n_levels - 1
    blocks = [m for m, _ in measured if m.geolevel == "Block"]
    path = tmp_path / "variances.parquet"
    with NMFWriter(path) as w:
        for i, mq in enumerate(blocks * 3):
            w.write_query(dataclasses.replace(mq, variance=1.0 + i), h.geocodes[bl])
    t = read_nmf_table(path)
    got = Counter(zip(t.column("query").to_pylist(), t.column("variance").to_pylist(), strict=True))
    assert got == {(mq.query, 1.0 + i): mq.values.size for i, mq in enumerate(blocks * 3)}
    assert set(t.column("geolevel").to_pylist()) == {"Block"}
    assert set(t.column("mechanism").to_pylist()) == {"DiscreteGaussian"}


@settings(max_examples=25)
@given(cap=st.integers(1, 60), data=st.data())
def test_reading_on_wanted_rows_is_reading_whole_and_restricting(base, tmp_path_factory, cap, data):
    """``read_rows`` (a block family's task reads only its kept cells' answer rows) gives
    what ``read`` then ``MeasuredQuery.restricted`` gives, whatever the row groups and
    wanted rows (absent rows included), and reads and checks the same row groups."""
    d, h, measured = base
    path = tmp_path_factory.mktemp("rows") / f"nmf{cap}.parquet"
    _write(path, measured, row_group_rows=cap)
    reader = NMFReader(path, PL94, h)
    level = data.draw(st.integers(0, h.n_levels - 1))
    n = h.n_units(level)
    start = data.draw(st.integers(0, n))
    stop = data.draw(st.integers(start, n))
    wanted = {}
    for qname in QUERIES:
        q = make_query(PL94, qname)
        size = int(q.row_of_cell.max()) + 1
        picks = data.draw(st.lists(st.integers(0, size - 1), max_size=size, unique=True))
        wanted[q.name] = np.asarray(sorted(picks), dtype=np.int64)
    whole = reader.read(level, start, stop)
    got = reader.read_rows(level, start, stop, wanted)
    assert [g.query for g in got] == [w.query for w in whole]
    for g, w in zip(got, whole, strict=True):
        r = w.restricted(wanted[w.query])
        assert np.array_equal(g.rows, r.rows) and g.variance == r.variance
        assert g.values.dtype == r.values.dtype and np.array_equal(g.values, r.values)
    sliced = reader.detach(level, start, stop)
    if start < stop:
        with pytest.raises(InputError, match="outside the slice"):
            sliced.read_rows(level, start, stop + 1, wanted)


def test_reading_on_wanted_rows_across_a_foreign_split(base, tmp_path):
    """Rows of a unit cut between row groups by another tool are gathered from both."""
    d, h, measured = base
    pf = pq.ParquetFile(d / "default.parquet")
    path = tmp_path / "cut.parquet"
    with pq.ParquetWriter(path, NMF_SCHEMA) as w:
        for i in range(pf.metadata.num_row_groups):
            w.write_table(read_nmf_table(d / "default.parquet", row_groups=[i]), row_group_size=37)
    reader = NMFReader(path, PL94, h)
    rng = np.random.default_rng(3)
    for level in range(h.n_levels):
        n = h.n_units(level)
        wanted = {}
        for mq, _ in measured:
            if mq.geolevel == h.geolevels[level].name:
                wanted[mq.query] = np.sort(rng.choice(mq.rows, size=max(1, mq.rows.size // 2)))
                wanted[mq.query] = np.unique(wanted[mq.query])
        for start, stop in ((0, n), (n // 3, n - n // 4)):
            for g, w in zip(
                reader.read_rows(level, start, stop, wanted),
                reader.read(level, start, stop),
                strict=True,
            ):
                assert np.array_equal(g.values, w.restricted(wanted[w.query]).values)


def test_reading_on_wanted_rows_of_a_file_read_whole(base, tmp_path):
    """A file whose row groups mix queries is read whole (the reader's fallback);
    ``read_rows`` restricts what it read, the same as on the row-grouped file."""
    d, h, measured = base
    path = tmp_path / "mixed.parquet"
    pq.write_table(read_nmf_table(d / "default.parquet"), path, row_group_size=10**6)
    mixed = NMFReader(path, PL94, h)
    assert mixed._fallback is not None
    grouped = NMFReader(d / "default.parquet", PL94, h)
    bl = h.n_levels - 1
    wanted = {mq.query: mq.rows[::2] for mq, _ in measured if mq.geolevel == "Block"}
    for a, b in zip(
        mixed.read_rows(bl, 2, 7, wanted), grouped.read_rows(bl, 2, 7, wanted), strict=True
    ):
        assert a.query == b.query and np.array_equal(a.rows, b.rows)
        assert np.array_equal(a.values, b.values)


def test_a_part_the_run_wrote_is_read_for_its_values_once_its_bytes_are_proven(
    base, tmp_path, monkeypatch
):
    """``written`` (the SHA-256 the writing task recorded): the same values as a checked
    read, from the ``value`` column alone; a file changed after it was written, even one
    whose every geounit keeps its values, is refused by the proof, and read without one
    it is refused by the check."""
    from censusdp.io import nmf_cache

    _, h, measured = base
    path = tmp_path / "nmf.parquet"
    _write(path, measured, row_group_rows=40)
    digest = sha256_of(path)
    monkeypatch.setattr(nmf_cache, "_CACHE", nmf_cache._GroupCache(1 << 20, 2))
    columns: list[tuple[str, ...]] = []
    real = pq.ParquetFile.read_row_group

    def read_row_group(self, rg, columns_=None, **kw):
        columns.append(tuple(kw.get("columns", columns_)))
        return real(self, rg, **kw) if "columns" in kw else real(self, rg, columns_, **kw)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", read_row_group)
    bl = h.n_levels - 1
    checked = NMFReader(path, PL94, h).read(bl, 0, h.n_units(bl))
    assert set(columns) == {("geocode", "cell", "value")}
    columns.clear()
    proven = NMFReader(path, PL94, h, written={str(path): digest}).read(bl, 0, h.n_units(bl))
    assert set(columns) == {("value",)}
    for a, b in zip(checked, proven, strict=True):
        assert a.query == b.query and np.array_equal(a.values, b.values)
    # two cells of one unit swapped: the same values per geounit, in the wrong cells
    md = pq.read_metadata(path)
    groups = [md.row_group(g).num_rows for g in range(md.num_row_groups)]
    t = pq.read_table(path)
    cells = t.column("cell").to_numpy().copy()
    block = np.asarray(t.column("geolevel").to_pylist()) == "Block"
    i = int(np.flatnonzero(block[:-1] & (cells[:-1] != cells[1:]))[0])
    cells[[i, i + 1]] = cells[[i + 1, i]]
    field = t.schema.field("cell")
    t = t.set_column(t.schema.get_field_index("cell"), field, pa.array(cells, field.type))
    with pq.ParquetWriter(path, t.schema) as w:
        at = 0
        for n in groups:
            w.write_table(t.slice(at, n), row_group_size=max(n, 1))
            at += n
    with pytest.raises(InputError, match="changed after this run wrote it"):
        NMFReader(path, PL94, h, written={str(path): digest}).read(bl, 0, h.n_units(bl))
    with pytest.raises(InputError, match="cells are not the measured cells of the query"):
        NMFReader(path, PL94, h).read(bl, 0, h.n_units(bl))


def test_a_slice_of_proven_parts_carries_no_geocodes(base, tmp_path):
    """A task reads a part its run wrote for ``value`` alone, so its slice needs no
    geocodes: a query of one row a unit puts thousands of units in one row group, and
    their geocodes were most of a block task's pickled bytes. A slice of a file from
    elsewhere carries those of every unit its row groups hold, and reads the same."""
    _, h, measured = base
    path = tmp_path / "nmf.parquet"
    _write(path, measured, row_group_rows=1 << 16)
    bl = h.n_levels - 1
    proven = NMFReader(path, PL94, h, written={str(path): sha256_of(path)}).detach(bl, 3, 5)
    checked = NMFReader(path, PL94, h).detach(bl, 3, 5)
    assert proven.codes.size == 0
    assert checked.codes.size > 2
    assert np.array_equal(
        checked.codes, h.geocodes[bl][checked.first : checked.first + checked.codes.size]
    )
    for a, b in zip(proven.read(bl, 3, 5), checked.read(bl, 3, 5), strict=True):
        assert a.query == b.query and np.array_equal(a.values, b.values)
