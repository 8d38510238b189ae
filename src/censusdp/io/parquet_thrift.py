"""Parquet's footer and page headers: Thrift structures in the compact protocol, and the
codes of ``parquet.thrift`` (apache/parquet-format) that censusdp's Parquet code uses.

One place for both directions: :func:`encode_struct` and :func:`encode_list` encode (the NMF part
writer, :mod:`censusdp.io.parquet_chunks`), :class:`CompactReader` decodes (the
self-check's page reader, :mod:`censusdp.io.parquet_pages`).
"""

from __future__ import annotations

import struct as _struct_module
from collections.abc import Sequence
from typing import Any

__all__ = [
    "BINARY",
    "CODEC",
    "DATA_PAGE",
    "DATA_PAGE_V2",
    "DICTIONARY_PAGE",
    "ENCODING",
    "FALSE",
    "I16",
    "I32",
    "I64",
    "LIST",
    "PHYSICAL",
    "REQUIRED",
    "STRUCT",
    "TRUE",
    "UTF8",
    "CompactReader",
    "binaries",
    "encode_list",
    "encode_struct",
    "i32s",
    "varint",
    "zigzag",
]

# the compact protocol's field types
TRUE, FALSE, I16, I32, I64, BINARY, LIST, STRUCT = 1, 2, 4, 5, 6, 8, 9, 12

# parquet.thrift's enums
PHYSICAL = {"BYTE_ARRAY": 6, "INT32": 1, "INT64": 2, "DOUBLE": 5}
ENCODING = {
    "PLAIN": 0,
    "PLAIN_DICTIONARY": 2,
    "RLE": 3,
    "BIT_PACKED": 4,
    "DELTA_BINARY_PACKED": 5,
    "DELTA_LENGTH_BYTE_ARRAY": 6,
    "DELTA_BYTE_ARRAY": 7,
    "RLE_DICTIONARY": 8,
    "BYTE_STREAM_SPLIT": 9,
}
CODEC = {"UNCOMPRESSED": 0, "SNAPPY": 1, "GZIP": 2, "BROTLI": 4, "LZ4": 5, "ZSTD": 6}
DATA_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = 0, 2, 3
REQUIRED = 0  # FieldRepetitionType
UTF8 = 0  # ConvertedType


def varint(n: int) -> bytes:
    """``n`` (non-negative) as a ULEB128 varint."""
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def zigzag(n: int) -> int:
    """A signed 64-bit integer's zigzag code."""
    return (n << 1) ^ (n >> 63)


def encode_list(elem_type: int, items: Sequence[bytes]) -> bytes:
    """A list of already-encoded elements."""
    n = len(items)
    head = bytes([(n << 4) | elem_type]) if n < 15 else bytes([0xF0 | elem_type]) + varint(n)
    return head + b"".join(items)


def encode_struct(*fields: tuple[int, int, Any]) -> bytes:
    """A struct from ``(field id, type, value)``; ``None`` values are left out, booleans
    (type :data:`TRUE`) carry their value in the type, lists and structs are encoded
    bytes."""
    out = bytearray()
    last = 0
    for fid, kind, value in fields:
        if value is None:
            continue
        if kind == TRUE:
            kind = TRUE if value else FALSE
        delta = fid - last
        if 0 < delta <= 15:
            out.append((delta << 4) | kind)
        else:
            out.append(kind)
            out += varint(zigzag(fid))
        last = fid
        if kind in (I16, I32, I64):
            out += varint(zigzag(int(value)))
        elif kind == BINARY:
            raw = value.encode() if isinstance(value, str) else bytes(value)
            out += varint(len(raw)) + raw
        elif kind in (LIST, STRUCT):
            out += value
    out.append(0)
    return bytes(out)


def i32s(values: Sequence[int]) -> bytes:
    """A list of 32-bit integers."""
    return encode_list(I32, [varint(zigzag(v)) for v in values])


def binaries(values: Sequence[bytes]) -> bytes:
    """A list of binaries."""
    return encode_list(BINARY, [varint(len(v)) + v for v in values])


class CompactReader:
    """A reader of the Thrift compact protocol over ``buf`` from ``pos``: each struct as
    ``{field id: value}`` (integers, booleans, nested structs; binaries as bytes)."""

    def __init__(self, buf: bytes, pos: int = 0) -> None:
        self.buf, self.pos = buf, pos

    def byte(self) -> int:
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        out, shift = 0, 0
        while True:
            b = self.byte()
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7
            if shift > 63:
                raise ValueError("a varint longer than 64 bits")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def value(self, kind: int) -> Any:
        if kind in (1, 2):  # a boolean element of a list (a field's is in its header)
            return self.byte() == 1
        if kind == 3:
            return _struct_module.unpack("b", bytes([self.byte()]))[0]
        if kind in (4, 5, 6):
            return self.zigzag()
        if kind == 7:
            self.pos += 8
            return _struct_module.unpack("<d", self.buf[self.pos - 8 : self.pos])[0]
        if kind == 8:
            n = self.varint()
            self.pos += n
            return self.buf[self.pos - n : self.pos]
        if kind in (9, 10):
            head = self.byte()
            size = head >> 4 if head >> 4 != 15 else self.varint()
            return [self.value(head & 0x0F) for _ in range(size)]
        if kind == 11:
            size = self.varint()
            if not size:
                return {}
            types = self.byte()
            return {self.value(types >> 4): self.value(types & 0x0F) for _ in range(size)}
        if kind == 12:
            return self.struct()
        raise ValueError(f"unknown Thrift compact type {kind}")

    def struct(self) -> dict[int, Any]:
        out: dict[int, Any] = {}
        field = 0
        while True:
            head = self.byte()
            if head == 0:
                return out
            kind, delta = head & 0x0F, head >> 4
            field = field + delta if delta else self.zigzag()
            out[field] = (kind == 1) if kind in (1, 2) else self.value(kind)
