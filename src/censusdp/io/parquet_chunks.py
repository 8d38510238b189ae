"""Parquet files assembled from column chunks: the few pieces of the format the NMF writer
encodes itself.

A Parquet file is ``PAR1``, then each row group's column chunks one after another (each
a run of pages: a page header in Thrift's compact protocol, then the page's bytes), then
the footer (a Thrift ``FileMetaData``), its length and ``PAR1`` again (the format's
``parquet.thrift``, apache/parquet-format). Nothing in a column chunk refers to where
it lies in the file, so a chunk encoded elsewhere (by pyarrow, in memory) can be copied
into another file as it is, with its offsets in the footer.

:class:`ChunkFileWriter` writes such a file from :class:`Chunk` s: chunks pyarrow
encoded (:func:`pyarrow_chunks`, the columns whose values need an encoder: delta-packed
integers) and chunks encoded here, where the column is a dictionary whose indices are a
few runs (:func:`dictionary_chunk`: a value that is the same on every row of a row
group, or one per geounit), whose pages cost a few bytes however many rows they hold.
Only what the NMF's columns need is here: ``REQUIRED`` flat columns, data pages of
version 1, ``PLAIN`` dictionaries, indices as runs of the RLE/bit-packed hybrid.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.io.parquet_thrift import (
    BINARY,
    CODEC,
    DATA_PAGE,
    DICTIONARY_PAGE,
    ENCODING,
    I16,
    I32,
    I64,
    LIST,
    PHYSICAL,
    REQUIRED,
    STRUCT,
    TRUE,
    UTF8,
    binaries,
    encode_list,
    encode_struct,
    i32s,
    varint,
)

__all__ = [
    "Chunk",
    "ChunkFileWriter",
    "dictionary_chunk",
    "double_statistics",
    "plain_strings",
    "pyarrow_chunks",
    "run_indices",
]

MAGIC = b"PAR1"


def _data_page_header(n_values: int, size: int, stored: int, encoding: int) -> bytes:
    data = encode_struct((1, I32, n_values), (2, I32, encoding), (3, I32, 3), (4, I32, 3))
    return encode_struct((1, I32, DATA_PAGE), (2, I32, size), (3, I32, stored), (5, STRUCT, data))


def _dictionary_page_header(n_entries: int, size: int, stored: int) -> bytes:
    dictionary = encode_struct((1, I32, n_entries), (2, I32, ENCODING["PLAIN"]), (3, TRUE, False))
    return encode_struct(
        (1, I32, DICTIONARY_PAGE), (2, I32, size), (3, I32, stored), (7, STRUCT, dictionary)
    )


@dataclass(frozen=True)
class Chunk:
    """One column chunk's bytes and what the footer says of it.

    ``data_page_offset`` and ``dictionary_page_offset`` are relative to the chunk's
    first byte; ``statistics`` is an encoded Thrift ``Statistics`` (or ``None``),
    ``encoding_stats`` encoded ``PageEncodingStats`` structs.
    """

    data: bytes | memoryview
    physical_type: int
    encodings: tuple[int, ...]
    codec: int
    num_values: int
    uncompressed_size: int
    data_page_offset: int
    dictionary_page_offset: int | None = None
    statistics: bytes | None = None
    encoding_stats: tuple[bytes, ...] = ()


_FEW_RUNS = 64
"""Runs :func:`run_indices` encodes one by one; more are encoded vectorized."""


def run_indices(lengths: np.ndarray, n_entries: int) -> bytes:
    """The indices ``0, 1, ...`` repeated ``lengths[i]`` times each, as a data page's body
    of an ``RLE_DICTIONARY`` column: the bit width (one byte), then one RLE run per
    entry (its length ``<< 1`` as a ULEB128, then the index in whole bytes).

    Vectorized over the runs: a level's part can hold thousands of one-row geounits.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if lengths.size != n_entries or (lengths < 1).any():
        raise ValueError("one run of at least one row per dictionary entry")
    width = max(int(n_entries - 1).bit_length(), 1)
    nbytes = (width + 7) // 8
    if n_entries <= _FEW_RUNS:  # a row group's few geounits: numpy's overhead would dominate
        return bytes([width]) + b"".join(
            varint(int(n) << 1) + i.to_bytes(nbytes, "little")
            for i, n in enumerate(lengths.tolist())
        )
    heads = lengths << 1
    sizes = np.ones(heads.size, dtype=np.int64)  # ULEB128 length of each run's header
    for shift in range(7, 64, 7):
        sizes += heads >= (1 << shift)
    run_size = sizes + nbytes
    ends = np.cumsum(run_size)
    out = np.zeros(int(ends[-1]) + 1, dtype=np.uint8)  # more than _FEW_RUNS runs
    out[0] = width
    starts = 1 + ends - run_size
    rest = heads.copy()
    for k in range(int(sizes.max())):
        live = sizes > k
        more = sizes > k + 1
        byte = (rest[live] & 0x7F) | np.where(more[live], 0x80, 0)
        out[starts[live] + k] = byte
        rest >>= 7
    index = np.arange(n_entries, dtype=np.int64)
    for k in range(nbytes):
        out[starts + sizes + k] = (index >> (8 * k)) & 0xFF
    return out.tobytes()


def dictionary_chunk(
    physical_type: str,
    dictionary: bytes,
    n_entries: int,
    lengths: np.ndarray,
    *,
    statistics: bytes | None = None,
    compression: str | None = None,
) -> Chunk:
    """A dictionary-encoded column chunk: a ``PLAIN`` dictionary page of ``n_entries``
    entries (``dictionary``: their ``PLAIN`` bytes) and one data page whose rows are
    entry 0 ``lengths[0]`` times, then entry 1 ``lengths[1]`` times, ...
    (:func:`run_indices`); both pages compressed with ``compression`` (a pyarrow codec
    name, e.g. ``"zstd"``) or stored as they are (``None``).
    """
    body = run_indices(lengths, n_entries)
    rows = int(np.sum(lengths))
    if compression is None:
        codec, stored_dict, stored_body = "UNCOMPRESSED", dictionary, body
    else:
        codec = compression.upper()
        stored_dict = pa.compress(dictionary, compression, asbytes=True)
        stored_body = pa.compress(body, compression, asbytes=True)
    dict_header = _dictionary_page_header(n_entries, len(dictionary), len(stored_dict))
    data_header = _data_page_header(rows, len(body), len(stored_body), ENCODING["RLE_DICTIONARY"])
    data = b"".join((dict_header, stored_dict, data_header, stored_body))
    stats = (
        encode_struct((1, I32, DICTIONARY_PAGE), (2, I32, ENCODING["PLAIN"]), (3, I32, 1)),
        encode_struct((1, I32, DATA_PAGE), (2, I32, ENCODING["RLE_DICTIONARY"]), (3, I32, 1)),
    )
    return Chunk(
        data=data,
        physical_type=PHYSICAL[physical_type],
        encodings=(ENCODING["PLAIN"], ENCODING["RLE"], ENCODING["RLE_DICTIONARY"]),
        codec=CODEC[codec],
        num_values=rows,
        uncompressed_size=len(dict_header) + len(dictionary) + len(data_header) + len(body),
        data_page_offset=len(dict_header) + len(stored_dict),
        dictionary_page_offset=0,
        statistics=statistics,
        encoding_stats=stats,
    )


def plain_strings(values: Sequence[str]) -> bytes:
    """``PLAIN`` bytes of strings (each a 4-byte little-endian length, then UTF-8)."""
    return b"".join(struct.pack("<i", len(b)) + b for b in (v.encode() for v in values))


def double_statistics(lo: float, hi: float) -> bytes:
    """A Thrift ``Statistics`` of a ``DOUBLE`` column without nulls (exact min and max,
    in both the legacy and the current fields, as parquet-cpp writes them)."""
    mn, mx = struct.pack("<d", lo), struct.pack("<d", hi)
    return encode_struct(
        (1, BINARY, mx),
        (2, BINARY, mn),
        (3, I64, 0),
        (5, BINARY, mx),
        (6, BINARY, mn),
        (7, TRUE, True),
        (8, TRUE, True),
    )


def pyarrow_chunks(tables: Sequence[pa.Table], **options: Any) -> list[Chunk]:
    """Encode each one-column table as one column chunk with pyarrow (``options`` as
    :class:`pyarrow.parquet.ParquetWriter` takes them), in memory, and return the
    chunks to copy into another file.

    The tables are written as the row groups of one in-memory file; each row group's
    chunk is cut out of it by the offsets and sizes its footer gives.
    """
    if not tables:
        return []
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, tables[0].schema, **options) as writer:
        for table in tables:
            writer.write_table(table, row_group_size=max(table.num_rows, 1))
    buf = sink.getvalue()
    meta = pq.read_metadata(pa.BufferReader(buf))
    view = memoryview(buf)
    out = []
    for rg in range(meta.num_row_groups):
        col = meta.row_group(rg).column(0)
        dict_at = col.dictionary_page_offset if col.has_dictionary_page else None
        start = dict_at if dict_at is not None else col.data_page_offset
        if col.statistics is not None and col.is_stats_set:
            raise ValueError("pyarrow_chunks copies chunks without statistics only")
        out.append(
            Chunk(
                data=view[start : start + col.total_compressed_size],
                physical_type=PHYSICAL[col.physical_type],
                encodings=tuple(ENCODING[e] for e in col.encodings),
                codec=CODEC[col.compression],
                num_values=col.num_values,
                uncompressed_size=col.total_uncompressed_size,
                data_page_offset=col.data_page_offset - start,
                dictionary_page_offset=None if dict_at is None else dict_at - start,
            )
        )
    return out


@dataclass(frozen=True)
class _Column:
    name: str
    physical_type: int
    string: bool


def _schema_elements(schema: pa.Schema) -> list[_Column]:
    """The flat, non-null columns of ``schema`` as Parquet stores them (strings and
    dictionaries of strings as ``BYTE_ARRAY`` annotated ``STRING``)."""
    out = []
    for field in schema:
        t = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
        if field.nullable:
            raise ValueError(f"column {field.name!r}: only non-null columns are written")
        if pa.types.is_string(t):
            out.append(_Column(field.name, PHYSICAL["BYTE_ARRAY"], True))
        elif pa.types.is_int32(t):
            out.append(_Column(field.name, PHYSICAL["INT32"], False))
        elif pa.types.is_int64(t):
            out.append(_Column(field.name, PHYSICAL["INT64"], False))
        elif pa.types.is_float64(t):
            out.append(_Column(field.name, PHYSICAL["DOUBLE"], False))
        else:
            raise ValueError(f"column {field.name!r}: type {t} is not written here")
    return out


class ChunkFileWriter:
    """Write a Parquet file of ``schema`` row group by row group from :class:`Chunk` s.

    The footer has the schema as parquet-cpp writes it for these types, the key-value
    metadata given at :meth:`close` plus pyarrow's ``ARROW:schema`` (so pyarrow reads
    the columns back with ``schema``'s Arrow types, dictionaries included), and each
    column's type-defined sort order (so readers use its statistics).
    """

    def __init__(self, sink: BinaryIO, schema: pa.Schema, created_by: str) -> None:
        self._sink = sink
        self.schema = schema
        self._columns = _schema_elements(schema)
        self._created_by = created_by
        self._row_groups: list[bytes] = []
        self._rows = 0
        self._offset = len(MAGIC)
        sink.write(MAGIC)

    def write_row_group(self, chunks: Sequence[Chunk], rows: int) -> None:
        """Append one row group: one chunk per column, in the schema's order."""
        if len(chunks) != len(self._columns):
            raise ValueError(f"{len(chunks)} chunks for {len(self._columns)} columns")
        start = self._offset
        metas = []
        total_uncompressed = 0
        for chunk, column in zip(chunks, self._columns, strict=True):
            if chunk.physical_type != column.physical_type or chunk.num_values != rows:
                raise ValueError(f"column {column.name!r}: chunk does not fit the row group")
            at = self._offset
            self._sink.write(chunk.data)
            size = len(chunk.data)
            self._offset += size
            total_uncompressed += chunk.uncompressed_size
            meta = encode_struct(
                (1, I32, chunk.physical_type),
                (2, LIST, i32s(chunk.encodings)),
                (3, LIST, binaries([column.name.encode()])),
                (4, I32, chunk.codec),
                (5, I64, chunk.num_values),
                (6, I64, chunk.uncompressed_size),
                (7, I64, size),
                (9, I64, at + chunk.data_page_offset),
                (
                    11,
                    I64,
                    None
                    if chunk.dictionary_page_offset is None
                    else at + chunk.dictionary_page_offset,
                ),
                (12, STRUCT, chunk.statistics),
                (
                    13,
                    LIST,
                    encode_list(STRUCT, chunk.encoding_stats) if chunk.encoding_stats else None,
                ),
            )
            metas.append(encode_struct((2, I64, 0), (3, STRUCT, meta)))
        self._row_groups.append(
            encode_struct(
                (1, LIST, encode_list(STRUCT, metas)),
                (2, I64, total_uncompressed),
                (3, I64, rows),
                (5, I64, start),
                (6, I64, self._offset - start),
                (7, I16, len(self._row_groups)),
            )
        )
        self._rows += rows

    def close(self, metadata: dict[bytes, bytes]) -> None:
        """Write the footer with ``metadata`` (key-value pairs) and the ``ARROW:schema``."""
        elements = [
            encode_struct((3, I32, REQUIRED), (4, BINARY, "schema"), (5, I32, len(self._columns)))
        ]
        for c in self._columns:
            string = c.string
            elements.append(
                encode_struct(
                    (1, I32, c.physical_type),
                    (3, I32, REQUIRED),
                    (4, BINARY, c.name),
                    (6, I32, UTF8 if string else None),
                    (10, STRUCT, encode_struct((1, STRUCT, encode_struct())) if string else None),
                )
            )
        kv = {**metadata, **_arrow_schema(self.schema)}
        pairs = [encode_struct((1, BINARY, k), (2, BINARY, v)) for k, v in kv.items()]
        type_order = encode_struct((1, STRUCT, encode_struct()))
        footer = encode_struct(
            (1, I32, 2),
            (2, LIST, encode_list(STRUCT, elements)),
            (3, I64, self._rows),
            (4, LIST, encode_list(STRUCT, self._row_groups)),
            (5, LIST, encode_list(STRUCT, pairs)),
            (6, BINARY, self._created_by),
            (7, LIST, encode_list(STRUCT, [type_order] * len(self._columns))),
        )
        self._sink.write(footer)
        self._sink.write(struct.pack("<i", len(footer)))
        self._sink.write(MAGIC)


def _arrow_schema(schema: pa.Schema) -> dict[bytes, bytes]:
    """pyarrow's ``ARROW:schema`` metadata for ``schema``, its metadata included (what
    pyarrow writes itself: an empty file of it, in memory)."""
    return _arrow_schema_of(schema, tuple(sorted((schema.metadata or {}).items())))


@functools.lru_cache(maxsize=16)
def _arrow_schema_of(
    schema: pa.Schema, metadata: tuple[tuple[bytes, bytes], ...]
) -> dict[bytes, bytes]:
    # ``metadata`` is in the key because pyarrow schemas compare equal without it
    sink = pa.BufferOutputStream()
    pq.write_table(schema.with_metadata(dict(metadata)).empty_table(), sink)
    kv = pq.read_metadata(pa.BufferReader(sink.getvalue())).metadata or {}
    return {b"ARROW:schema": kv[b"ARROW:schema"]}
