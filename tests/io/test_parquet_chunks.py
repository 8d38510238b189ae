"""Parquet files assembled from column chunks (``censusdp.io.parquet_chunks``) and the NMF
writer built on them: every reader sees what pyarrow's own writer gives."""

from __future__ import annotations

import shutil
import struct

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.data.measurements import MeasuredQuery
from censusdp.io.nmf_files import read_nmf_table, row_group_keys
from censusdp.io.nmf_write import ENGINES, NMFWriter
from censusdp.io.parquet_chunks import (
    ChunkFileWriter,
    dictionary_chunk,
    double_statistics,
    plain_strings,
    pyarrow_chunks,
    run_indices,
)


def _one_column_file(path, chunks_rows, schema):
    with open(path, "wb") as f:
        w = ChunkFileWriter(f, schema, "test")
        for chunk, rows in chunks_rows:
            w.write_row_group([chunk], rows)
        w.close({b"k": b"v"})


@pytest.mark.parametrize(
    "lengths",
    [
        [1],
        [5_000_000],  # a run header of four ULEB128 bytes
        [3, 1, 200, 70_000],  # the few-runs path, headers of 1 to 3 bytes
        list(range(1, 300)),  # vectorized, indices of two bytes
        [1] * 70_000,  # vectorized, a geounit a row
    ],
)
def test_dictionary_runs_read_back_as_the_runs(tmp_path, lengths):
    entries = [f"code{i:06d}" for i in range(len(lengths))]
    chunk = dictionary_chunk(
        "BYTE_ARRAY", plain_strings(entries), len(entries), np.asarray(lengths), compression="zstd"
    )
    schema = pa.schema([pa.field("geocode", pa.dictionary(pa.int32(), pa.string()), False)])
    _one_column_file(tmp_path / "f.parquet", [(chunk, sum(lengths))], schema)
    got = pq.read_table(tmp_path / "f.parquet").column("geocode").to_numpy()
    want = np.repeat(np.asarray(entries, dtype=object), lengths)
    assert got.shape == want.shape and (got == want).all()
    assert pq.read_metadata(tmp_path / "f.parquet").metadata[b"k"] == b"v"


def test_run_indices_paths_agree():
    """The one-by-one and vectorized encodings of the same runs are the same bytes."""
    from censusdp.io import parquet_chunks

    lengths = np.array([1, 127, 128, 16_383, 16_384, 2, 3] * 12)
    vectorized = run_indices(lengths, lengths.size)
    few = parquet_chunks._FEW_RUNS
    try:
        parquet_chunks._FEW_RUNS = 10**9
        one_by_one = run_indices(lengths, lengths.size)
    finally:
        parquet_chunks._FEW_RUNS = few
    assert vectorized == one_by_one


def test_variance_statistics_are_read_as_pyarrow_writes_them(tmp_path):
    chunk = dictionary_chunk(
        "DOUBLE", struct.pack("<d", 2.5), 1, np.array([10]), statistics=double_statistics(2.5, 2.5)
    )
    _one_column_file(
        tmp_path / "v.parquet", [(chunk, 10)], pa.schema([pa.field("v", pa.float64(), False)])
    )
    stats = pq.read_metadata(tmp_path / "v.parquet").row_group(0).column(0).statistics
    assert stats.has_min_max and stats.min == 2.5 and stats.max == 2.5 and stats.null_count == 0
    assert pq.read_table(tmp_path / "v.parquet").column("v").to_pylist() == [2.5] * 10


def test_copied_pyarrow_chunks_read_back(tmp_path):
    values = [
        pa.table({"x": pa.array(np.arange(n, dtype=np.int64) * 7 - 3)}) for n in (1, 1000, 70_000)
    ]
    options = {
        "compression": "zstd",
        "use_dictionary": False,
        "write_statistics": False,
        "column_encoding": {"x": "DELTA_BINARY_PACKED"},
    }
    schema = pa.schema([pa.field("x", pa.int64(), False)])
    values = [t.cast(schema) for t in values]
    chunks = pyarrow_chunks(values, **options)
    _one_column_file(
        tmp_path / "x.parquet",
        [(c, t.num_rows) for c, t in zip(chunks, values, strict=True)],
        schema,
    )
    pf = pq.ParquetFile(tmp_path / "x.parquet")
    assert pf.metadata.num_row_groups == 3
    for i, t in enumerate(values):
        assert pf.read_row_group(i).column("x").equals(t.column("x"))


def _write(path, queries, codes, engine, row_group_rows):
    with NMFWriter(path, engine=engine, row_group_rows=row_group_rows) as w:
        for mq in queries:
            w.write_query(mq, codes)


@st.composite
def _queries(draw):
    units = draw(st.integers(1, 12))
    out = []
    for q in range(draw(st.integers(1, 3))):
        cells = draw(st.integers(1, 40))
        rows = np.flatnonzero(
            np.asarray(draw(st.lists(st.booleans(), min_size=cells, max_size=cells)))
        )
        if rows.size == 0:
            rows = np.array([cells - 1])
        seed = draw(st.integers(0, 2**32 - 1))
        values = np.random.default_rng(seed).integers(-(10**9), 10**9, (units, rows.size))
        if draw(st.booleans()):
            variance: float | np.ndarray = draw(st.sampled_from([0.5, 3.0, 1e6]))
        else:
            pick = draw(
                st.lists(st.sampled_from([1.5, 2.5, np.inf]), min_size=units, max_size=units)
            )
            variance = np.asarray(pick)
        out.append(MeasuredQuery("Block", f"q{q}", rows, values, variance, "DiscreteGaussian"))
    return units, out


@settings(max_examples=30, deadline=None)
@given(_queries(), st.sampled_from([1, 7, 64, 1 << 22]))
def test_both_engines_give_the_same_file_to_every_reader(tmp_path_factory, shaped, cap):
    """Random queries (gaps in the measured rows, per-unit variances, unmeasured units,
    row groups cutting geounits) read back the same from both engines: the seven
    columns with their types and metadata, the row groups and their keys, the
    ``variance`` statistics, through pyarrow's file and dataset readers."""
    units, queries = shaped
    d = tmp_path_factory.mktemp("engines")
    codes = np.asarray([f"50001{i:011d}" for i in range(units)])
    paths = {e: d / f"{e}.parquet" for e in ENGINES}
    for engine, path in paths.items():
        _write(path, queries, codes, engine, cap)
    a, b = (pq.read_table(paths[e]) for e in ENGINES)
    assert a.schema.equals(b.schema, check_metadata=True)
    assert a.equals(b)
    assert read_nmf_table(paths["censusdp"]).equals(read_nmf_table(paths["pyarrow"]))
    assert ds.dataset(paths["censusdp"]).to_table().equals(ds.dataset(paths["pyarrow"]).to_table())
    ma, mb = (pq.read_metadata(paths[e]) for e in ENGINES)
    assert ma.num_row_groups == mb.num_row_groups
    assert row_group_keys(ma, "a") == row_group_keys(mb, "b")
    at = a.schema.get_field_index("variance")
    for i in range(ma.num_row_groups):
        sa, sb = ma.row_group(i).column(at).statistics, mb.row_group(i).column(at).statistics
        assert (sa.min, sa.max) == (sb.min, sb.max)
        assert ma.row_group(i).num_rows == mb.row_group(i).num_rows


def test_engines_store_the_same_value_and_cell_bytes(tmp_path):
    """``value`` and ``cell`` are pyarrow's own chunks, copied: the bytes of every row
    group's chunk are the ones pyarrow's writer stores."""
    rng = np.random.default_rng(3)
    mq = MeasuredQuery(
        "Block", "detailed", np.arange(0, 900, 2), rng.integers(-90, 90, (30, 450)), 2.0, "g"
    )
    codes = np.asarray([f"50001{i:011d}" for i in range(30)])
    paths = {e: tmp_path / f"{e}.parquet" for e in ENGINES}
    for engine, path in paths.items():
        _write(path, [mq], codes, engine, 1000)
    raw = {e: p.read_bytes() for e, p in paths.items()}
    meta = {e: pq.read_metadata(p) for e, p in paths.items()}
    for rg in range(meta["pyarrow"].num_row_groups):
        for name in ("cell", "value"):
            j = meta["pyarrow"].schema.names.index(name)
            got = []
            for e in ENGINES:
                col = meta[e].row_group(rg).column(j)
                got.append(
                    raw[e][col.data_page_offset : col.data_page_offset + col.total_compressed_size]
                )
            assert got[0] == got[1], (rg, name)


def test_unknown_engine_is_refused(tmp_path):
    with pytest.raises(ValueError, match="engine must be one of"):
        NMFWriter(tmp_path / "x.parquet", engine="fast")
    assert not list(tmp_path.iterdir())


@pytest.mark.slow
@pytest.mark.spark
def test_spark_reads_the_nmf_as_pyarrow_does(tmp_path):
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:  # pragma: no cover - depends on the machine
        pytest.skip("Spark needs a Java runtime (java not on PATH)")
    from pyspark.sql import SparkSession

    rng = np.random.default_rng(4)
    codes = np.asarray([f"50001{i:011d}" for i in range(25)])
    queries = [
        MeasuredQuery(
            "Block", "detailed", np.arange(0, 300, 3), rng.integers(-50, 50, (25, 100)), 2.0, "g"
        ),
        MeasuredQuery(
            "Block",
            "total",
            np.array([0]),
            rng.integers(0, 90, (25, 1)),
            np.r_[[1.5] * 10, [np.inf] * 5, [3.0] * 10],
            "g",
        ),
    ]
    path = tmp_path / "nmf" / "part-00000.parquet"
    path.parent.mkdir()
    _write(path, queries, codes, "censusdp", 700)
    spark = SparkSession.builder.master("local[1]").appName("nmf-read").getOrCreate()
    try:
        frame = spark.read.parquet(str(path.parent))
        names = frame.columns
        got = [tuple(r) for r in frame.collect()]
    finally:
        spark.stop()
    want = pq.read_table(path)
    assert names == want.column_names
    assert sorted(got) == sorted(zip(*(want.column(n).to_pylist() for n in names), strict=True))


def test_the_censusdp_engine_cuts_smaller_row_groups_of_the_same_rows(tmp_path):
    """Row groups of about 2^19 rows of whole geounits (pyarrow's engine: 2^22): the
    rows, decoded, are the same, and each row group's ``cell`` chunk of one size is the
    same bytes (encoded once)."""
    rng = np.random.default_rng(7)
    mq = MeasuredQuery(
        "Block",
        "detailed",
        np.arange(0, 200_000, 2),
        rng.integers(-50, 50, (12, 100_000)),
        2.0,
        "g",
    )
    codes = np.asarray([f"50001{i:011d}" for i in range(12)])
    paths = {e: tmp_path / f"{e}.parquet" for e in ENGINES}
    for engine, path in paths.items():
        _write(path, [mq], codes, engine, 1 << 22)
    meta = pq.read_metadata(paths["censusdp"])
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert sizes == [500_000, 500_000, 200_000]
    assert pq.read_metadata(paths["pyarrow"]).num_row_groups == 1

    def decoded(path):
        t = read_nmf_table(path)
        return pa.table(
            {
                n: (c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c)
                for n, c in zip(t.column_names, t.columns, strict=True)
            }
        )

    assert decoded(paths["censusdp"]).equals(decoded(paths["pyarrow"]))
    raw = paths["censusdp"].read_bytes()
    j = meta.schema.names.index("cell")
    first, second = (meta.row_group(i).column(j) for i in (0, 1))
    assert (
        raw[first.data_page_offset : first.data_page_offset + first.total_compressed_size]
        == raw[second.data_page_offset : second.data_page_offset + second.total_compressed_size]
    )
