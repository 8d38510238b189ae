"""A column chunk's one string proven from its pages (``censusdp.io.parquet_pages``), and
the NMF self-check that reads ``geolevel`` and ``query`` that way.

Whatever the pages do not prove (two strings, nulls, plain encoding, an index that is
not 0, fewer values than rows) gives ``None``, so the self-check reads the column.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from censusdp.io.parquet_pages import _all_zero, one_value
from censusdp.release.validate import _nmf_rows


def _file(path: Path, n: int, **kw) -> pq.FileMetaData:
    table = pa.table(
        {
            "level": pa.array(["Block"] * n, pa.string()),
            "code": pa.array([f"{i // 7:05d}" for i in range(n)], pa.string()),
            "maybe": pa.array(["x"] * n, pa.string()),
        },
        schema=pa.schema(
            [
                pa.field("level", pa.string(), nullable=False),
                pa.field("code", pa.string(), nullable=False),
                pa.field("maybe", pa.string(), nullable=True),
            ]
        ),
    )
    pq.write_table(table, path, **kw)
    return pq.read_metadata(path)


def _proven(path: Path, md: pq.FileMetaData, column: int, rows: int | None = None):
    with open(path, "rb") as fh:
        rg = md.row_group(0)
        return one_value(fh, rg.column(column), rg.num_rows if rows is None else rows, True)


@pytest.mark.parametrize("version", ["1.0", "2.0"])
@pytest.mark.parametrize("compression", ["none", "zstd", "snappy"])
def test_a_one_entry_dictionary_is_proven_over_many_pages(tmp_path, version, compression):
    path = tmp_path / "f.parquet"
    md = _file(
        path,
        50_000,
        compression=compression,
        data_page_version=version,
        data_page_size=1 << 10,
        write_batch_size=1 << 10,
    )
    assert _proven(path, md, 0) == "Block"
    assert _proven(path, md, 1) is None  # thousands of geocodes
    assert _proven(path, md, 0, rows=50_001) is None  # the pages count the rows


def test_what_the_pages_do_not_prove_is_none(tmp_path):
    path = tmp_path / "plain.parquet"
    md = _file(path, 1000, use_dictionary=["code"])  # level stored plain
    assert _proven(path, md, 0) is None
    path = tmp_path / "optional.parquet"
    md = _file(path, 1000)
    with open(path, "rb") as fh:  # a nullable column is not proven (nulls are possible)
        assert one_value(fh, md.row_group(0).column(2), 1000, False) is None


def test_an_index_that_is_not_zero_is_not_proven():
    # bit width 1, an RLE run of 18 copies of 0: all 0
    assert _all_zero(bytes([1, 18 << 1, 0]), 18)
    assert not _all_zero(bytes([1, 18 << 1, 1]), 18)  # 18 copies of index 1
    assert not _all_zero(bytes([1, 18 << 1, 0]), 19)  # fewer indices than values
    # bit-packed: one group of 8 one-bit indices, one of them 1
    assert _all_zero(bytes([1, (1 << 1) | 1, 0]), 8)
    assert not _all_zero(bytes([1, (1 << 1) | 1, 0b100]), 8)
    assert not _all_zero(bytes([1, 18 << 1, 0, 7]), 18)  # bytes left over


def _nmf(tmp_path: Path, query_in_rows: str | None = None) -> tuple[Path, _nmf_rows.Tally]:
    """A one-level NMF of 3 geounits x 30,000 cells in one row group, and its tally; with
    ``query_in_rows``, its rows name that query while its row-group key names ``q``."""
    from censusdp.io.nmf_files import ROW_GROUPS_KEY, RowGroupKey, encode_row_group_keys

    codes = np.array(["0001", "0002", "0003"])
    r = 30_000
    n = codes.size * r
    table = pa.table(
        {
            "geolevel": pa.array(["County"] * n),
            "geocode": pa.array(np.repeat(codes, r).tolist()),
            "query": pa.array([query_in_rows or "q"] * n),
            "cell": pa.array(np.tile(np.arange(r, dtype=np.int32), codes.size)),
            "value": pa.array(np.arange(n, dtype=np.int64)),
            "variance": pa.array(np.full(n, 2.0)),
            "mechanism": pa.array(["DiscreteGaussian"] * n),
        }
    )
    table = table.cast(pa.schema([pa.field(f.name, f.type, nullable=False) for f in table.schema]))
    key = RowGroupKey(n, "County", "q", 2.0, "DiscreteGaussian", "0001", "0003")
    table = table.replace_schema_metadata({ROW_GROUPS_KEY: encode_row_group_keys([key])})
    path = tmp_path / "nmf.parquet"
    # no statistics: the footer settles neither column (as the NMF writer writes them)
    pq.write_table(table, path, row_group_size=n, use_dictionary=True, write_statistics=False)
    key_ = ("County", "q")
    tally = _nmf_rows.Tally(
        {key_: np.full(codes.size, 2.0)},
        {key_: np.zeros(codes.size, np.int64)},
        {key_: np.zeros(codes.size, np.uint64)},
        {0: codes},
        {"County": 0},
    )
    return path, tally


@pytest.mark.parametrize("proof_rows", [0, 1 << 40])
def test_the_self_check_counts_the_same_with_and_without_the_proof(
    tmp_path, monkeypatch, proof_rows
):
    monkeypatch.setattr(_nmf_rows, "PAGE_PROOF_ROWS", proof_rows)
    read = []
    real = pq.ParquetFile.read_row_groups

    def spy(self, groups, columns=None, **kw):
        read.append(tuple(columns))
        return real(self, groups, columns=columns, **kw)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", spy)
    path, tally = _nmf(tmp_path)
    assert _nmf_rows.count_files(path, [path], tally) is None
    assert tally.rows[("County", "q")].tolist() == [30_000] * 3
    want = _nmf_rows.cell_mix(np.arange(30_000)).sum(dtype=np.uint64)
    assert (tally.mix[("County", "q")] == want).all()
    proven = proof_rows == 0
    assert ("geolevel" in read[0]) != proven and ("query" in read[0]) != proven


@pytest.mark.parametrize("proof_rows", [0, 1 << 40])
def test_a_query_in_the_rows_other_than_the_key_is_caught_either_way(
    tmp_path, monkeypatch, proof_rows
):
    monkeypatch.setattr(_nmf_rows, "PAGE_PROOF_ROWS", proof_rows)
    path, tally = _nmf(tmp_path, query_in_rows="other")
    problem = _nmf_rows.count_files(path, [path], tally)
    assert problem is not None and "query is 'other' in its rows, 'q'" in problem


def test_a_later_page_unlike_the_ones_before_is_parsed_and_refused(tmp_path):
    """Pages byte for byte like the one before take its verdict; the last page with an
    index of 1 (bytes edited in the file) is not like them, and is refused."""
    from censusdp.io.parquet_pages import _one_value
    from censusdp.io.parquet_thrift import CompactReader

    path = tmp_path / "f.parquet"
    md = _file(path, 50_000, compression="none", data_page_size=1 << 10, write_batch_size=1 << 10)
    column = md.row_group(0).column(0)
    with open(path, "rb") as fh:
        fh.seek(column.dictionary_page_offset)
        chunk = bytearray(fh.read(column.total_compressed_size))
    assert _one_value(bytes(chunk), None, 50_000) == "Block"
    reader, last = CompactReader(bytes(chunk)), None
    pages = 0
    while reader.pos < len(chunk):
        header = reader.struct()
        last = (reader.pos, header[3])
        reader.pos += header[3]
        pages += 1
    assert pages > 3
    at, size = last
    body = bytes(chunk[at : at + size])
    assert body[0] >= 1 and body[-1] == 0  # bit width, then an RLE run's value 0
    chunk[at + size - 1] = 1
    assert _one_value(bytes(chunk), None, 50_000) is None


def _writer_nmf(tmp_path: Path, name: str = "w.parquet", units: int = 7, r: int = 300):
    """An NMF the writer wrote: two queries of ``units`` geounits, row groups of whole
    geounits and of parts of one (``row_group_rows`` below a query's rows)."""
    from censusdp.data.measurements import MeasuredQuery
    from censusdp.io.nmf_write import NMFWriter

    rng = np.random.default_rng(5)
    codes = np.array([f"{i:05d}" for i in range(units)])
    queries = [
        MeasuredQuery(
            "Block", "detailed", np.arange(r), rng.integers(-40, 40, (units, r)), 4.0, "DG"
        ),
        MeasuredQuery("Block", "total", np.arange(1), rng.integers(0, 9, (units, 1)), 2.0, "DG"),
    ]
    path = tmp_path / name
    with NMFWriter(path, row_group_rows=2 * r + r // 2) as w:
        for mq in queries:
            w.write_query(mq, codes)
    return path, codes


def test_the_writers_geocode_runs_and_cell_chunks_read_from_the_pages(tmp_path):
    from censusdp.io.parquet_pages import chunk_bytes, dictionary_runs

    path, codes = _writer_nmf(tmp_path)
    pf = pq.ParquetFile(path)
    md = pf.metadata
    names = pf.schema_arrow.names
    seen = {}
    with open(path, "rb") as fh:
        for rg in range(md.num_row_groups):
            meta = md.row_group(rg)
            n = meta.num_rows
            got = dictionary_runs(fh, meta.column(names.index("geocode")), n, True)
            assert got is not None
            entries, index, length = got
            decoded = pf.read_row_group(rg, columns=["geocode", "cell"])
            assert np.repeat(np.array(entries)[index], length).tolist() == (
                decoded.column("geocode").to_pylist()
            )
            assert dictionary_runs(fh, meta.column(names.index("geocode")), n + 1, True) is None
            stored = chunk_bytes(fh, meta.column(names.index("cell")))
            cells = decoded.column("cell").to_pylist()
            # a chunk of the same bytes (and rows) holds the same cells
            assert seen.setdefault((stored, n), cells) == cells
    assert len(seen) < md.num_row_groups  # the writer repeats a row-group shape's chunk


def test_bit_packed_or_out_of_range_indices_are_not_runs(tmp_path):
    from censusdp.io.parquet_pages import _dictionary_runs, _rle_runs, dictionary_runs

    path = tmp_path / "f.parquet"
    md = _file(path, 1000)  # geocodes in runs of 7: pyarrow bit-packs them
    with open(path, "rb") as fh:
        assert dictionary_runs(fh, md.row_group(0).column(1), 1000, True) is None
        assert dictionary_runs(fh, md.row_group(0).column(1), 1000, False) is None
    index, length = [], []
    assert _rle_runs(bytes([2, 5 << 1, 1, 3 << 1, 2]), 8, index, length)
    assert (index, length) == ([1, 2], [5, 3])
    assert not _rle_runs(bytes([2, (1 << 1) | 1, 0, 0]), 8, [], [])  # bit-packed
    assert not _rle_runs(bytes([2, 5 << 1, 1]), 8, [], [])  # fewer than the page's values
    assert not _rle_runs(bytes([2, 5 << 1, 1, 9]), 5, [], [])  # bytes left over
    from censusdp.io.parquet_chunks import dictionary_chunk, plain_strings

    chunk = dictionary_chunk("BYTE_ARRAY", plain_strings(["a", "b"]), 2, np.array([3, 4]))
    entries, index, length = _dictionary_runs(bytes(chunk.data), None, 7)
    assert (entries, index.tolist(), length.tolist()) == (["a", "b"], [0, 1], [3, 4])
    # a dictionary of one entry whose run names entry 1
    one = dictionary_chunk("BYTE_ARRAY", plain_strings(["a"]), 1, np.array([7]))
    data = bytearray(one.data)
    assert data[-1] == 0  # the one run's index
    data[-1] = 1
    assert _dictionary_runs(bytes(data), None, 7) is None


def _tally_of(codes: np.ndarray) -> _nmf_rows.Tally:
    keys = [("Block", "detailed"), ("Block", "total")]
    return _nmf_rows.Tally(
        {
            ("Block", "detailed"): np.full(codes.size, 4.0),
            ("Block", "total"): np.full(codes.size, 2.0),
        },
        {k: np.zeros(codes.size, np.int64) for k in keys},
        {k: np.zeros(codes.size, np.uint64) for k in keys},
        {0: codes},
        {"Block": 0},
    )


def test_the_self_check_counts_the_writers_row_groups_from_their_pages(tmp_path, monkeypatch):
    """Row groups of at least PAGE_PROOF_ROWS rows are counted without decoding geocode
    (and cell only once a chunk): the same tally as decoding every row."""
    monkeypatch.setattr(_nmf_rows, "PAGE_PROOF_ROWS", 1)
    path, codes = _writer_nmf(tmp_path)
    read = []
    real = pq.ParquetFile.read_row_group

    def spy(self, i, columns=None, **kw):
        read.append((i, tuple(columns)))
        return real(self, i, columns=columns, **kw)

    monkeypatch.setattr(pq.ParquetFile, "read_row_group", spy)
    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", None)  # nothing decoded whole
    _nmf_rows._CELL_SUMS.clear()
    proven = _tally_of(codes)
    assert _nmf_rows.count_files(path, [path], proven) is None
    groups = pq.read_metadata(path).num_row_groups
    assert read and all(c == ("cell",) for _, c in read) and len(read) < groups
    monkeypatch.undo()
    decoded = _tally_of(codes)
    monkeypatch.setattr(_nmf_rows, "_proven_runs", lambda *a: {})
    assert _nmf_rows.count_files(path, [path], decoded) is None
    for key in proven.rows:
        assert proven.rows[key].tolist() == decoded.rows[key].tolist()
        assert proven.mix[key].tolist() == decoded.mix[key].tolist()
    assert proven.rows[("Block", "detailed")].tolist() == [300] * codes.size


def test_a_changed_cell_chunk_is_decoded_and_caught_though_its_twin_was_not(tmp_path, monkeypatch):
    """Two row groups of one shape share their cell chunk's bytes; the second's changed
    on disk (a cell of it moved) is no longer the first's, so it is decoded and miscounts."""
    monkeypatch.setattr(_nmf_rows, "PAGE_PROOF_ROWS", 1)
    path, codes = _writer_nmf(tmp_path, units=4, r=300)
    md = pq.read_metadata(path)
    cell = pq.ParquetFile(path).schema_arrow.names.index("cell")
    chunks = {}
    for rg in range(md.num_row_groups):
        col = md.row_group(rg).column(cell)
        chunks.setdefault((col.total_compressed_size, md.row_group(rg).num_rows), []).append(col)
    twins = next(v for v in chunks.values() if len(v) > 1)
    data = bytearray(path.read_bytes())
    start = twins[1].data_page_offset
    blob = bytes(data[start : start + twins[1].total_compressed_size])
    assert blob == bytes(data[twins[0].data_page_offset : twins[0].data_page_offset + len(blob)])
    data[start + len(blob) - 1] ^= 0x01  # the last byte of the chunk's (zstd) page
    path.write_bytes(bytes(data))
    _nmf_rows._CELL_SUMS.clear()
    problem = _nmf_rows.count_files(path, [path], _tally_of(codes))
    if problem is None:  # the page still decodes: then its cells changed, and the count
        tally = _tally_of(codes)
        _nmf_rows._CELL_SUMS.clear()
        assert _nmf_rows.count_files(path, [path], tally) is None
        want = _nmf_rows.cell_mix(np.arange(300)).sum(dtype=np.uint64)
        assert (tally.mix[("Block", "detailed")] != want).any()
    else:
        assert "unreadable" in problem
