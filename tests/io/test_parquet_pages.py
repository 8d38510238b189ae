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
