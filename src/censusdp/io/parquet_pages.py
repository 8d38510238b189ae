"""A Parquet column chunk read page by page, without decoding its rows.

:func:`chunk_bytes` gives a column chunk's bytes as stored (its pages, headers
included): two chunks of the same bytes, type and codec hold the same rows, which is how
the self-check of the NMF knows a row group's ``cell`` without decoding it again.
:func:`dictionary_runs` reads a dictionary-encoded string chunk whose indices are RLE
runs (the NMF's ``geocode``: one run a geounit) as its entries and runs. :func:`one_value`
proves from a column chunk's page headers, its dictionary page and
the dictionary indices of its data pages that every row of a row group holds one
string: the chunk's dictionary has one entry and every index is 0 (a run of zeros:
a few bytes a page). A data page byte for byte like the one before it (a writer's pages
of 20,000 rows each) takes that page's verdict without being parsed again. The self-check of the NMF reads
``geolevel`` and ``query`` this way (:mod:`censusdp.release.validate._nmf_rows`): a
row group of four million rows is a few dozen bytes of each, where decoding them was
about 1.3 ns a row each. Anything this does not prove (another encoding, a column with
nulls, an unknown page, a codec it does not know) gives ``None``, and the caller reads
the column.

The page headers are Thrift structures in the compact protocol (the Parquet format's
``PageHeader``), read by :class:`~censusdp.io.parquet_thrift.CompactReader`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, BinaryIO, TypeVar

import numpy as np
import pyarrow as pa

from censusdp.io.parquet_thrift import (
    DATA_PAGE,
    DATA_PAGE_V2,
    DICTIONARY_PAGE,
    ENCODING,
    CompactReader,
)

__all__ = ["chunk_bytes", "dictionary_runs", "one_value"]

_PLAIN, _PLAIN_DICTIONARY, _RLE_DICTIONARY = (
    ENCODING[e] for e in ("PLAIN", "PLAIN_DICTIONARY", "RLE_DICTIONARY")
)
_T = TypeVar("_T")
_CODECS = {"UNCOMPRESSED": None, "ZSTD": "zstd", "SNAPPY": "snappy", "GZIP": "gzip"}


def chunk_bytes(file: BinaryIO, column: Any, *, size: int | None = None) -> bytes | None:
    """The bytes of a column chunk as the file stores them (from its dictionary page, if
    any, to its last data page), or ``None`` where the footer places it outside the file.

    Args:
        file: the Parquet file, open for binary reading.
        column: the chunk's ``ColumnChunkMetaData`` (``row_group(i).column(j)``).
        size: the file's size in bytes, if known.
    """
    start = int(
        column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
    )
    length = int(column.total_compressed_size)
    if start < 0 or length <= 0 or (size is not None and start + length > size):
        return None
    file.seek(start)
    chunk = file.read(length)
    return chunk if len(chunk) == length else None


def dictionary_runs(
    file: BinaryIO, column: Any, rows: int, required: bool, *, size: int | None = None
) -> tuple[list[str], np.ndarray, np.ndarray] | None:
    """A string column chunk whose data pages' indices are all RLE runs, as
    ``(entries, index, length)``: its dictionary's entries and, in row order, each run's
    entry (index into ``entries``) and rows; ``None`` for anything else (bit-packed
    indices, nulls, another encoding, an unknown codec, a page it cannot parse, runs
    that do not count ``rows`` rows, an index past the dictionary), whose rows the
    caller decodes instead.

    The NMF writer's ``geocode`` is such a chunk (one run a geounit,
    :func:`censusdp.io.parquet_chunks.run_indices`): a row group of a million rows is
    its geocodes and a few bytes a geounit.
    """
    return _string_chunk(
        file, column, required, size, lambda c, codec: _dictionary_runs(c, codec, rows)
    )


def _dictionary_runs(
    chunk: bytes, codec: str | None, rows: int
) -> tuple[list[str], np.ndarray, np.ndarray] | None:
    """:func:`dictionary_runs` on the chunk's bytes: a ``PLAIN`` dictionary page of
    strings, then version-1 data pages of RLE runs only."""
    reader = CompactReader(chunk)
    entries: list[str] | None = None
    index: list[int] = []
    length: list[int] = []
    while reader.pos < len(chunk):
        page_read = _next_page(reader, chunk)
        if page_read is None:
            return None
        header, kind, raw, body = page_read
        if kind == DICTIONARY_PAGE and entries is None:
            page = header.get(7) or {}
            if page.get(2) not in (_PLAIN, _PLAIN_DICTIONARY) or not isinstance(page.get(1), int):
                return None
            entries = _plain_strings(_inflate(body, codec, raw), page[1])
            if entries is None:
                return None
        elif kind == DATA_PAGE and entries is not None:
            page = header.get(5) or {}
            values = page.get(1)
            if page.get(2) not in (_PLAIN_DICTIONARY, _RLE_DICTIONARY) or not isinstance(
                values, int
            ):
                return None
            if not _rle_runs(_inflate(body, codec, raw), values, index, length):
                return None
        else:
            return None
    if entries is None or sum(length) != rows:
        return None
    idx = np.asarray(index, dtype=np.int64)
    if idx.size and (idx.min() < 0 or idx.max() >= len(entries)):
        return None
    return entries, idx, np.asarray(length, dtype=np.int64)


def _next_page(reader: CompactReader, chunk: bytes) -> tuple[dict, Any, int, bytes] | None:
    """The page at ``reader.pos`` of ``chunk`` (its header, kind, size uncompressed and
    stored bytes; ``reader`` moved past it), or ``None`` if its header or bytes are
    not whole."""
    header = reader.struct()
    kind, raw, packed = header.get(1), header.get(2), header.get(3)
    if not isinstance(raw, int) or not isinstance(packed, int) or packed < 0:
        return None
    body = chunk[reader.pos : reader.pos + packed]
    reader.pos += packed
    return (header, kind, raw, body) if len(body) == packed else None


def _plain_strings(data: bytes, n: int) -> list[str] | None:
    """``n`` ``PLAIN`` strings (each a 4-byte little-endian length, then UTF-8) that are
    exactly ``data``, or ``None``."""
    out = []
    at = 0
    for _ in range(n):
        (size,) = struct.unpack_from("<i", data, at)
        at += 4
        if size < 0 or at + size > len(data):
            return None
        out.append(data[at : at + size].decode("utf-8"))
        at += size
    return out if at == len(data) else None


def _rle_runs(data: bytes, values: int, index: list[int], length: list[int]) -> bool:
    """Append the RLE runs of a data page's dictionary indices (``data``: the bit-width
    byte, then the runs) holding ``values`` indices to ``index`` and ``length``;
    ``False`` if a run is bit-packed or the runs do not hold exactly ``values``."""
    if not data or data[0] > 32:
        return False
    width = (data[0] + 7) // 8
    reader = CompactReader(data, 1)
    seen = 0
    while seen < values:
        if reader.pos >= len(data):
            return False
        run = reader.varint()
        n = run >> 1
        if run & 1 or n == 0 or reader.pos + width > len(data):
            return False
        index.append(int.from_bytes(data[reader.pos : reader.pos + width], "little"))
        length.append(n)
        reader.pos += width
        seen += n
    return seen == values and reader.pos == len(data)


def one_value(
    file: BinaryIO, column: Any, rows: int, required: bool, *, size: int | None = None
) -> str | None:
    """The one string every row of a column chunk holds, proven from its pages; else
    ``None``.

    Args:
        file: the Parquet file, open for binary reading.
        column: the chunk's ``ColumnChunkMetaData`` (``row_group(i).column(j)``).
        rows: the row group's rows (every one must be counted by a data page).
        required: whether the column is ``REQUIRED`` (no definition levels, no nulls);
            an optional column is not proven here.
        size: the file's size in bytes, if known (a chunk said to lie past it is not
            read).
    """
    return _string_chunk(file, column, required, size, lambda c, codec: _one_value(c, codec, rows))


def _string_chunk(
    file: BinaryIO,
    column: Any,
    required: bool,
    size: int | None,
    parse: Callable[[bytes, str | None], _T],
) -> _T | None:
    """``parse(chunk, codec)`` of a ``REQUIRED`` dictionary-encoded string column chunk's
    bytes, or ``None``: another column, an unknown codec, a chunk outside the file, or
    bytes ``parse`` cannot read."""
    if not required or column.physical_type != "BYTE_ARRAY" or not column.has_dictionary_page:
        return None
    codec = _CODECS.get(str(column.compression), "?")
    chunk = None if codec == "?" else chunk_bytes(file, column, size=size)
    if chunk is None:
        return None
    try:
        return parse(chunk, codec)
    except (ValueError, IndexError, struct.error, pa.ArrowException, UnicodeDecodeError):
        return None


def _one_value(chunk: bytes, codec: str | None, rows: int) -> str | None:
    """:func:`one_value` on the chunk's bytes: its first page the one-entry dictionary,
    every other page a dictionary-encoded data page of indices 0, ``rows`` values."""
    reader = CompactReader(chunk)
    entry: str | None = None
    counted = 0
    same, same_values = b"", 0  # the last data page's bytes (header and body): proven
    while reader.pos < len(chunk):
        if same and chunk.startswith(same, reader.pos):  # a page like the last: its verdict
            reader.pos += len(same)
            counted += same_values
            continue
        begin = reader.pos
        page_read = _next_page(reader, chunk)
        if page_read is None:
            return None
        header, kind, raw, body = page_read
        if kind == DICTIONARY_PAGE and entry is None and counted == 0:
            page = header.get(7) or {}
            if page.get(1) != 1 or page.get(2) not in (_PLAIN, _PLAIN_DICTIONARY):
                return None
            plain = _inflate(body, codec, raw)
            (n,) = struct.unpack("<i", plain[:4])
            if n < 0 or 4 + n != len(plain):
                return None
            entry = plain[4:].decode("utf-8")
        elif kind == DATA_PAGE and entry is not None:
            page = header.get(5) or {}
            if page.get(2) not in (_PLAIN_DICTIONARY, _RLE_DICTIONARY):
                return None
            values = page.get(1)
            if not isinstance(values, int) or not _all_zero(_inflate(body, codec, raw), values):
                return None
            counted += values
            same, same_values = chunk[begin : reader.pos], values
        elif kind == DATA_PAGE_V2 and entry is not None:
            page = header.get(8) or {}
            values = page.get(1)
            if (
                page.get(4) not in (_PLAIN_DICTIONARY, _RLE_DICTIONARY)
                or page.get(2) != 0
                or page.get(5, 0) != 0
                or page.get(6, 0) != 0
                or not isinstance(values, int)
            ):
                return None
            data = _inflate(body, codec if page.get(7, True) else None, raw)
            if not _all_zero(data, values):
                return None
            counted += values
            same, same_values = chunk[begin : reader.pos], values
        else:
            return None
    return entry if counted == rows else None


def _inflate(body: bytes, codec: str | None, raw: int) -> bytes:
    """A page's bytes uncompressed (``raw``: their size uncompressed)."""
    if codec is None:
        if len(body) != raw:
            raise ValueError("an uncompressed page whose sizes differ")
        return body
    return pa.decompress(body, decompressed_size=raw, codec=codec).to_pybytes()


def _all_zero(data: bytes, values: int) -> bool:
    """Whether dictionary indices ``data`` (a bit-width byte, then RLE and bit-packed
    runs) are ``values`` indices that are all 0: the dictionary's one entry."""
    if not data or data[0] > 32:
        return False
    width = (data[0] + 7) // 8  # bytes of an RLE run's value
    reader = CompactReader(data, 1)
    seen = 0
    while seen < values and reader.pos < len(data):
        run = reader.varint()
        if run & 1:  # bit-packed: (run >> 1) groups of 8 values, data[0] bytes a group
            size = (run >> 1) * data[0]
            seen += (run >> 1) * 8
        else:  # RLE: run >> 1 copies of one value
            size = width
            seen += run >> 1
        if any(data[reader.pos : reader.pos + size]) or reader.pos + size > len(data):
            return False
        reader.pos += size
    return seen >= values and reader.pos == len(data)
