"""The Thrift compact protocol of Parquet's footers and page headers: what
``encode_struct`` writes, ``CompactReader`` reads back (one module, both directions)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from censusdp.io.parquet_thrift import (
    BINARY,
    I16,
    I32,
    I64,
    LIST,
    STRUCT,
    TRUE,
    CompactReader,
    binaries,
    encode_list,
    encode_struct,
    i32s,
)

_BITS = {I16: 15, I32: 31, I64: 63}


@given(
    st.lists(
        st.tuples(
            st.sampled_from([I16, I32, I64, BINARY, TRUE, LIST]),
            st.integers(-(2**63), 2**63 - 1),
            st.binary(max_size=40),
            st.lists(st.integers(-(2**31), 2**31 - 1), max_size=20),
        ),
        max_size=12,
    ),
    st.lists(st.integers(1, 40), max_size=12, unique=True),
)
def test_a_struct_reads_back_field_by_field(fields, ids):
    """Field ids in any gaps (short deltas and the long form), every scalar type,
    booleans in the header, lists short and long, a nested struct."""
    ids = sorted(ids)[: len(fields)]
    encoded, want = [], {}
    for fid, (kind, number, raw, ints) in zip(ids, fields[: len(ids)], strict=True):
        if kind in _BITS:
            bits = _BITS[kind]
            value = max(-(2**bits), min(2**bits - 1, number))
            encoded.append((fid, kind, value))
            want[fid] = value
        elif kind == BINARY:
            encoded.append((fid, kind, raw))
            want[fid] = raw
        elif kind == TRUE:
            encoded.append((fid, kind, number % 2 == 0))
            want[fid] = number % 2 == 0
        else:
            encoded.append((fid, LIST, i32s(ints)))
            want[fid] = ints
    outer = encode_struct(
        (1, STRUCT, encode_struct(*encoded)), (200, LIST, binaries([b"a", b"bc"]))
    )
    got = CompactReader(outer).struct()
    assert got == {1: want, 200: [b"a", b"bc"]}


def test_a_long_list_of_structs():
    items = [encode_struct((1, I32, i), (2, BINARY, f"x{i}")) for i in range(40)]
    got = CompactReader(encode_list(STRUCT, items)).value(LIST)
    assert got == [{1: i, 2: f"x{i}".encode()} for i in range(40)]
