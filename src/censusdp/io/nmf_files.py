"""The files of a noisy measurement file (NMF): its columns, its part files and their index.

``noisy_measurements.parquet``: ``geolevel``, ``geocode``, ``query``, ``cell`` (row
within the query), ``value``, ``variance`` (plus ``mechanism``), one row per noisy
answer (:data:`NMF_COLUMNS`). A row group holds one level, query, variance and
mechanism: a file stores all seven in its rows (:data:`STORED_COLUMNS`) and those four
once per row group in its metadata too, as an index (:data:`ROW_GROUPS_KEY`,
:func:`row_group_keys`); files of an earlier round hold them in the metadata only, and
files written before the keys in rows only. :func:`read_nmf_table`, :func:`read_nmf_rows`
and :func:`iter_nmf_tables` give either as the seven columns.

A run writes the NMF as *part files*: ``noisy_measurements.parquet/`` is a directory
of ``part-00000.parquet``, ``part-00001.parquet``, ... (one per measurement task, each
written by the task itself with :func:`censusdp.io.nmf_write.write_nmf_part`, so the
driver never handles the values) and a small index ``_parts.json``
(:func:`write_part_index`: every part's level, unit range, rows and SHA-256). Every
part has the layout of a single-file NMF, and the parts together are one Parquet
dataset (``pyarrow.dataset``, Spark and DuckDB read the directory as one table; files
starting with ``_`` or ``.`` are not data). Every reader takes either form
(:func:`nmf_files`), so single-file releases written before stay readable.

A query's rows made only of structural-zero cells (``detailed`` of ``pl94``: the 126
cells of minors in nursing facilities) are not measured by default; a release of
fidelity ``production`` measures them, as production did, and marks each file so in its
Parquet key-value metadata (:data:`STRUCTURAL_ZEROS_KEY`). Readers hand estimation the
live rows either way (:func:`structural_zeros_measured`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.errors import InputError
from censusdp.io import parts as _parts

__all__ = [
    "NMF_COLUMNS",
    "ONE_VALUE_COLUMNS",
    "ROW_GROUPS_KEY",
    "STORED_COLUMNS",
    "STRUCTURAL_ZEROS_KEY",
    "STRUCTURAL_ZEROS_MEASURED",
    "RowGroupKey",
    "encode_row_group_keys",
    "has_row_group_keys",
    "iter_nmf_tables",
    "missing_columns",
    "nmf_files",
    "part_name",
    "read_nmf_rows",
    "read_nmf_table",
    "read_part_index",
    "row_group_keys",
    "structural_zeros_measured",
    "with_one_value_columns",
    "write_part_index",
]

NMF_COLUMNS = ("geolevel", "geocode", "query", "cell", "value", "variance", "mechanism")

STRUCTURAL_ZEROS_KEY = b"censusdp.structural_zeros"
"""Parquet key-value metadata of an NMF file whose queries include structural-zero rows."""
STRUCTURAL_ZEROS_MEASURED = b"measured"


def structural_zeros_measured(metadata: Any) -> bool:
    """Whether a file's Parquet metadata (``pq.read_metadata(f)``) says its queries hold
    their structural-zero rows."""
    kv = getattr(metadata, "metadata", None) or {}
    return kv.get(STRUCTURAL_ZEROS_KEY) == STRUCTURAL_ZEROS_MEASURED


def part_name(index: int) -> str:
    """File name of the ``index``-th part (the measurement task's place in the plan)."""
    return _parts.part_name(index, ".parquet")


def nmf_files(path: str | Path) -> list[Path]:
    """The Parquet files of a noisy measurement file: itself, or the parts a directory's
    index lists (:func:`censusdp.io.parts.part_files`).

    Raises:
        InputError: for a missing path, a directory without an index or parts, or a
            listed part that is missing.
    """
    return _parts.part_files(path, ".parquet", "noisy measurement part")


_PART_FIELDS = ("file", "geolevel", "start", "stop", "rows", "sha256")


def write_part_index(directory: str | Path, parts: list[dict[str, Any]]) -> Path:
    """Write ``directory/_parts.json``: every part's record, in file order; return its path."""
    return _parts.write_part_index(directory, parts, _PART_FIELDS)


def read_part_index(directory: str | Path) -> dict[str, Any]:
    """The index of a partitioned NMF directory (:func:`censusdp.io.parts.read_part_index`).

    Raises:
        InputError: when it is missing, not JSON, or does not list the directory's parts.
    """
    return _parts.read_part_index(directory, ".parquet")


ROW_GROUPS_KEY = b"censusdp.nmf_row_groups"
"""Parquet key-value metadata of an NMF file, an index of its row groups: per
row group its rows, ``geolevel``, ``query``, ``variance``, ``mechanism`` and first and
last ``geocode`` (JSON, :func:`row_group_keys`)."""

ONE_VALUE_COLUMNS = ("geolevel", "query", "variance", "mechanism")
"""The columns with one value per row group: in the file's metadata since the NMF holds
them once per row group (:data:`ROW_GROUPS_KEY`), in every row of files written before."""

STORED_COLUMNS = ("geolevel", "geocode", "query", "cell", "value", "variance", "mechanism")
"""The columns :class:`~censusdp.io.nmf_write.NMFWriter` stores row by row: all of
:data:`NMF_COLUMNS`, so any Parquet reader (pyarrow, pandas, Spark, DuckDB) sees the
documented table. Files written by an earlier round stored only ``geocode``, ``cell``
and ``value`` (the others in :data:`ROW_GROUPS_KEY` alone); every reader still reads
them."""

_KEY_FIELDS = ["rows", "geolevel", "query", "variance", "mechanism", "first", "last"]

_TEXT = pa.dictionary(pa.int32(), pa.string())
_TYPES = {"geolevel": _TEXT, "query": _TEXT, "variance": pa.float64(), "mechanism": _TEXT}


@dataclass(frozen=True)
class RowGroupKey:
    """What one row group of an NMF file holds: ``rows`` rows of one (``geolevel``,
    ``query``) with one ``variance`` (and ``mechanism``, ``None`` in files without that
    column), geocodes ``first`` to ``last``."""

    rows: int
    geolevel: str
    query: str
    variance: float
    mechanism: str | None
    first: str
    last: str


def encode_row_group_keys(keys: list[RowGroupKey]) -> bytes:
    """The :data:`ROW_GROUPS_KEY` metadata of a file whose row groups are ``keys``."""
    rows = [[getattr(k, f) for f in _KEY_FIELDS] for k in keys]
    return json.dumps({"fields": _KEY_FIELDS, "row_groups": rows}, allow_nan=False).encode()


def has_row_group_keys(metadata: Any) -> bool:
    """Whether a file's Parquet metadata holds its one-value columns once per row group
    (:data:`ROW_GROUPS_KEY`) instead of in its rows."""
    kv = getattr(metadata, "metadata", None) or {}
    return ROW_GROUPS_KEY in kv


def row_group_keys(metadata: Any, where: str) -> list[RowGroupKey | None]:
    """Each row group's :class:`RowGroupKey` (``pq.read_metadata(f)``): from the file's
    :data:`ROW_GROUPS_KEY`, or (files written before it) from the row-group statistics,
    ``None`` for a row group whose statistics do not give one level, query, variance
    (and mechanism) and a geocode range.

    Raises:
        InputError: naming ``where`` when the file's row-group keys are not one entry
            per row group with its row count.
    """
    n = metadata.num_row_groups
    kv = getattr(metadata, "metadata", None) or {}
    if ROW_GROUPS_KEY not in kv:
        return [_stat_key(metadata.row_group(rg)) for rg in range(n)]
    try:
        doc = json.loads(kv[ROW_GROUPS_KEY])
        at = {f: doc["fields"].index(f) for f in _KEY_FIELDS}
        keys = [
            RowGroupKey(
                int(r[at["rows"]]),
                str(r[at["geolevel"]]),
                str(r[at["query"]]),
                float(r[at["variance"]]),
                str(r[at["mechanism"]]),
                str(r[at["first"]]),
                str(r[at["last"]]),
            )
            for r in doc["row_groups"]
        ]
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise InputError(
            f"{where}: unreadable row-group keys {ROW_GROUPS_KEY.decode()} ({exc})"
        ) from None
    if not keys and metadata.num_rows == 0:  # an empty file (pyarrow may write one group)
        return [None] * n
    if len(keys) != n or any(
        k.rows != metadata.row_group(rg).num_rows for rg, k in enumerate(keys)
    ):
        raise InputError(
            f"{where}: its row-group keys {ROW_GROUPS_KEY.decode()} list {len(keys)} row "
            f"groups of {[k.rows for k in keys][:5]}... rows; the file has {n}"
        )
    return keys


def _stat_key(meta: Any) -> RowGroupKey | None:
    """A row group's key from its column statistics (files with the columns in rows)."""
    names = [meta.column(i).path_in_schema for i in range(meta.num_columns)]
    got: dict[str, tuple[Any, Any]] = {}
    for c in ("geolevel", "query", "geocode", "variance", "mechanism"):
        if c not in names:
            continue
        st = meta.column(names.index(c)).statistics
        if st is None or not st.has_min_max:
            return None
        got[c] = (st.min, st.max)
    if any(c not in got for c in ("geolevel", "query", "geocode", "variance")):
        return None
    if any(c in got and got[c][0] != got[c][1] for c in ONE_VALUE_COLUMNS):
        return None
    mech = str(got["mechanism"][0]) if "mechanism" in got else None
    return RowGroupKey(
        meta.num_rows,
        str(got["geolevel"][0]),
        str(got["query"][0]),
        float(got["variance"][0]),
        mech,
        str(got["geocode"][0]),
        str(got["geocode"][1]),
    )


def missing_columns(metadata: Any) -> list[str]:
    """The columns an NMF file needs (all of :data:`NMF_COLUMNS` but ``mechanism``) that
    it has neither in its rows nor in its row-group keys."""
    names = metadata.schema.to_arrow_schema().names
    keyed = ONE_VALUE_COLUMNS if has_row_group_keys(metadata) else ()
    return [c for c in NMF_COLUMNS[:6] if c not in names and c not in keyed]


def with_one_value_columns(
    table: pa.Table, keys: list[RowGroupKey], columns: Iterable[str] | None = None
) -> pa.Table:
    """``table`` (the stored rows of row groups ``keys``, in order) with the one-value
    columns it lacks rebuilt from the keys, in :data:`NMF_COLUMNS` order (or
    ``columns``'); a string column dictionary-encoded, as stored in rows before."""
    rows = np.array([k.rows for k in keys], dtype=np.int64)
    if int(rows.sum()) != table.num_rows:
        raise InputError(f"{table.num_rows} rows read; the row-group keys say {int(rows.sum())}")
    fields, arrays = [], []
    for name in columns if columns is not None else NMF_COLUMNS:
        if name in table.column_names:
            fields.append(table.schema.field(name))
            arrays.append(table.column(name))
        elif name in _TYPES:
            col = _repeated(name, [getattr(k, name) for k in keys], rows)
            fields.append(pa.field(name, col.type, nullable=col.null_count > 0))
            arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _repeated(name: str, values: list[Any], rows: np.ndarray) -> pa.Array:
    """A one-value column: ``values[i]`` repeated ``rows[i]`` times."""
    if name == "variance":
        return pa.array(np.repeat(np.asarray(values, dtype=np.float64), rows))
    if any(v is None for v in values):
        return pa.nulls(int(rows.sum()), _TYPES[name])
    distinct, index = np.unique(np.asarray(values, dtype=str), return_inverse=True)
    indices = np.repeat(index.astype(np.int32).ravel(), rows)
    return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32()), pa.array(distinct))


def read_nmf_table(
    file: str | Path,
    *,
    row_groups: list[int] | None = None,
    columns: list[str] | None = None,
) -> pa.Table:
    """One NMF file (or its ``row_groups``) as a table of :data:`NMF_COLUMNS` (or
    ``columns``), whichever layout it has: the one-value columns are rebuilt from its
    row-group keys when its rows do not hold them.

    Raises:
        InputError: naming the file when it is not readable Parquet or its row-group
            keys do not match it.
    """
    try:
        pf = pq.ParquetFile(file)
        md = pf.metadata
        groups = list(range(md.num_row_groups)) if row_groups is None else list(row_groups)
        if not has_row_group_keys(md):
            return pf.read_row_groups(groups, columns=columns)
        stored = [c for c in (columns or NMF_COLUMNS) if c in pf.schema_arrow.names]
        table = pf.read_row_groups(groups, columns=stored)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{file}: not readable Parquet ({exc})") from None
    keys = row_group_keys(md, str(file))
    picked = [keys[g] for g in groups if keys[g] is not None]  # None: an empty group
    if not stored:  # only one-value columns asked for: rows from the keys alone
        n = sum(k.rows for k in picked)
        table = pa.table({"_": pa.nulls(n, pa.int8())}).select([])
    return with_one_value_columns(table, picked, columns)


def read_nmf_rows(path: str | Path, columns: list[str] | None = None) -> pa.Table:
    """A whole NMF (a file, or the parts its directory's index lists) as one table of
    :data:`NMF_COLUMNS` (or ``columns``), whatever each file's layout
    (:func:`read_nmf_table`): what ``pyarrow.parquet.read_table`` gave before the
    one-value columns left the rows.

    Raises:
        InputError: as :func:`nmf_files` and :func:`read_nmf_table`.
    """
    tables = [read_nmf_table(f, columns=columns) for f in nmf_files(path)]
    return pa.concat_tables(tables, promote_options="permissive")


def iter_nmf_tables(
    path: str | Path, columns: list[str] | None = None, rows: int = 1 << 20
) -> Iterator[pa.Table]:
    """A whole NMF (file or parts) as tables of at most ``rows`` rows of
    :data:`NMF_COLUMNS` (or ``columns``), one row group at a time, whatever each
    file's layout: a stream for a summary that never holds the NMF at once.

    Raises:
        InputError: as :func:`nmf_files` and :func:`row_group_keys`.
    """
    want = list(columns or NMF_COLUMNS)
    for f in nmf_files(path):
        try:
            pf = pq.ParquetFile(f)
        except (OSError, pa.ArrowException) as exc:
            raise InputError(f"{f}: not readable Parquet ({exc})") from None
        md = pf.metadata
        keys = row_group_keys(md, str(f)) if has_row_group_keys(md) else None
        stored = [c for c in want if c in pf.schema_arrow.names]
        for rg in range(md.num_row_groups):
            if md.row_group(rg).num_rows == 0:
                continue
            if keys is None:
                for b in pf.iter_batches(batch_size=rows, row_groups=[rg], columns=want):
                    yield pa.Table.from_batches([b])
                continue
            key = keys[rg]
            if not stored:  # one-value columns only: no data page read
                for at in range(0, key.rows, rows):
                    n = min(rows, key.rows - at)
                    part = pa.table({"_": pa.nulls(n, pa.int8())}).select([])
                    yield with_one_value_columns(part, [replace(key, rows=n)], want)
                continue
            for b in pf.iter_batches(batch_size=rows, row_groups=[rg], columns=stored):
                part = pa.Table.from_batches([b])
                yield with_one_value_columns(part, [replace(key, rows=b.num_rows)], want)
