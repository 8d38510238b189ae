"""The published tables on disk: one Parquet file per table in ``RUN/tables/``, and
``RUN/tables/codebook.csv`` naming and labelling every column, and each table as CSV
(wide and long, :mod:`censusdp.io.table_csv`).

A run writes each table as part files (:mod:`censusdp.io.parts`):
``RUN/tables/P1.parquet/part-00000.parquet`` holds the geounits of every level above
the block and, after them, the county subdivisions, places and AIAN areas of a release
that records them (:mod:`censusdp.tables.entities`), ``part-00001.parquet`` on the
blocks of the MDF's first part, and so on, each
written by a task (:func:`write_table_part`), with the index ``_parts.json``. Read in
name order, the parts are the single file's rows in the same order; every reader here
takes either layout.

Each table has ``geolevel``, ``geocode``, ``GEOID``, ``SUMLEV``, ``NAME`` and one int64
column per line (``P1_001N`` ...); the codebook has ``table``, ``variable``, ``label``,
``concept`` and ``universe`` (:func:`censusdp.tables.codebook`). Joining a table to a
TIGER/Line shapefile or to data.census.gov downloads is a join on ``GEOID``; selecting
one level is a filter on ``SUMLEV`` (or ``geolevel``).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.errors import InputError, SchemaError
from censusdp.io.atomic import atomic_path, fsync_file, sha256_of, write_parquet
from censusdp.io.layout import CODEBOOK_FILE
from censusdp.io.parts import part_files, part_name, read_parts, regular_file, write_part_index
from censusdp.io.table_csv import published_tables, write_part_csvs, write_table_csvs
from censusdp.tables import (
    ALL_TABLE_NAMES,
    IDENTIFIER_COLUMNS,
    TABLE_NAMES,
    codebook,
    table_definition,
    tables_to_arrays,
)
from censusdp.tables.dhc import dhc_source_rows
from censusdp.tables.geoids import summary_level

__all__ = [
    "TABLE_PART_FIELDS",
    "codebook_bytes",
    "codebook_mismatch",
    "read_codebook",
    "read_table",
    "table_part_mismatch",
    "read_tables",
    "write_codebook",
    "write_table_index",
    "write_table_part",
    "write_tables",
]

TABLE_PART_FIELDS = ("file", "geolevel", "start", "stop", "rows", "sha256")
"""A table part's record in ``_parts.json``: its geolevel(s) (``US,State,...`` for the
part of every level above the block), its units ``start:stop`` (blocks for a block
part), rows and SHA-256."""


def write_tables(tables: Mapping[str, pa.Table], directory: str | os.PathLike[str]) -> None:
    """Write each table to ``directory/<name>.parquet`` and the codebook, atomically;
    with every table, also their CSV (:func:`censusdp.io.table_csv.write_table_csvs`)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        if name not in TABLE_NAMES:
            raise SchemaError(f"unknown table {name!r}; tables are {list(TABLE_NAMES)}")
        write_parquet(table, d / f"{name}.parquet")
    write_codebook(d)
    if set(tables) == set(TABLE_NAMES):
        write_table_csvs(d)


def codebook_bytes(names: tuple[str, ...] = TABLE_NAMES) -> bytes:
    """The bytes of ``codebook.csv`` (:func:`censusdp.tables.codebook` of the tables
    ``names`` as CSV): what :func:`write_codebook` writes and :func:`codebook_mismatch`
    expects."""
    sink = pa.BufferOutputStream()
    pacsv.write_csv(codebook(names), sink)
    return sink.getvalue().to_pybytes()


def write_codebook(directory: str | os.PathLike[str]) -> None:
    """Write ``directory/codebook.csv`` atomically, of the tables the directory publishes
    (:func:`~censusdp.io.table_csv.published_tables`)."""
    with atomic_path(Path(directory) / CODEBOOK_FILE) as tmp:
        Path(tmp).write_bytes(codebook_bytes(published_tables(directory)))


def codebook_mismatch(directory: str | os.PathLike[str]) -> str | None:
    """What is wrong with a tables directory's ``codebook.csv``, or ``None``: it must be
    a regular file holding exactly what :func:`write_codebook` writes."""
    path = Path(directory) / CODEBOOK_FILE
    if not regular_file(path):
        return f"{path}: missing, or not a regular file (every release's tables carry it)"
    want = codebook_bytes(published_tables(directory))
    with open(path, "rb") as f:
        got = f.read(len(want) + 1)
    if got == want:
        return None
    pairs = itertools.zip_longest(got.split(b"\n"), want.split(b"\n"))
    line = next(i for i, (a, b) in enumerate(pairs) if a != b)
    return f"{path}: line {line + 1} differs from the codebook of the tables' columns"


def write_table_part(
    tables: Mapping[str, pa.Table], directory: str | os.PathLike[str], index: int
) -> dict[str, dict[str, object]]:
    """Write part ``index`` of each table (``directory/<name>.parquet/part-NNNNN.parquet``,
    atomically, flushed) and its CSV rows (:func:`censusdp.io.table_csv.write_part_csvs`,
    put together by :func:`write_table_index`); return each table's part record (file,
    rows, SHA-256)."""
    out = {}
    for name, table in tables.items():
        if name not in ALL_TABLE_NAMES:
            raise SchemaError(f"unknown table {name!r}; tables are {list(ALL_TABLE_NAMES)}")
        path = Path(directory) / f"{name}.parquet" / part_name(index)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_parquet(table, path)
        fsync_file(path)
        out[name] = {"file": path.name, "rows": table.num_rows, "sha256": sha256_of(path)}
        write_part_csvs(directory, name, index)
    return out


def write_table_index(
    directory: str | os.PathLike[str], parts: list[Mapping[str, dict[str, object]]]
) -> None:
    """Write each table's ``_parts.json`` from its parts' records (:func:`write_table_part`
    with ``geolevel``, ``start`` and ``stop`` added), the codebook and the tables' CSV
    (:func:`censusdp.io.table_csv.write_table_csvs`, from the parts' CSV rows)."""
    d = Path(directory)
    for name in ALL_TABLE_NAMES:
        recs = [p[name] for p in parts if name in p]
        if recs:
            write_part_index(d / f"{name}.parquet", recs, TABLE_PART_FIELDS)
    write_codebook(d)
    write_table_csvs(d)


_ID_COLUMNS = ("geolevel", "geocode", *IDENTIFIER_COLUMNS)
"""The columns before a table's lines: what :func:`censusdp.tables.level_identifiers`
gives of its geounits."""


def read_tables(directory: str | os.PathLike[str]) -> dict[str, pa.Table]:
    """Read every table of :data:`TABLE_NAMES` from ``directory``.

    Raises:
        InputError: if the directory or a table file is missing.
    """
    d = Path(directory)
    missing = [n for n in TABLE_NAMES if not (d / f"{n}.parquet").exists()]
    if missing:
        raise InputError(
            f"tables directory {str(d)!r} lacks {', '.join(f'{m}.parquet' for m in missing)}"
        )
    return {n: read_parts(d / f"{n}.parquet", what="table part") for n in TABLE_NAMES}


def read_table_arrays(
    directory: str | os.PathLike[str],
    hierarchy: Hierarchy,
    names: tuple[str, ...] = TABLE_NAMES,
) -> dict[str, list[np.ndarray]]:
    """:func:`censusdp.tables.tables_to_arrays` of the written tables (``names``), read one
    table at a time and only its count columns, so the Arrow copy of one table at most is
    held."""
    d = Path(directory)
    out = {}
    for n in names:
        path = d / f"{n}.parquet"
        if not path.exists():
            raise InputError(f"tables directory {str(d)!r} lacks {n}.parquet")
        names = pq.read_schema(part_files(path, ".parquet", "table part")[0]).names
        wanted = ["geolevel", "geocode", *table_definition(n).variables]
        table = read_parts(path, what="table part", columns=[c for c in wanted if c in names])
        out[n] = tables_to_arrays({n: table}, hierarchy)[n]
    return out


def read_table(
    directory: str | os.PathLike[str], name: str, *, sumlev: str | int | None = None
) -> pa.Table:
    """Read one published table, optionally one summary level only: its code with or
    without leading zeros or its name, in any case (``"050"``, ``"50"``, ``"county"``;
    :func:`censusdp.tables.geoids.summary_level`).

    Raises:
        SchemaError: for an unknown table name or summary level (listing the valid ones).
        InputError: if the file is missing.
    """
    if str(name).upper() not in ALL_TABLE_NAMES:
        raise SchemaError(f"unknown table {name!r}; tables are {list(ALL_TABLE_NAMES)}")
    code = summary_level(sumlev) if sumlev is not None else None
    path = Path(directory) / f"{str(name).upper()}.parquet"
    if not path.exists():  # a file, or a directory of parts
        raise InputError(f"{path}: missing file")
    filters = [("SUMLEV", "=", code)] if code is not None else None
    return read_parts(path, what="table part", filters=filters)


def read_codebook(directory: str | os.PathLike[str]) -> pa.Table:
    """Read ``codebook.csv`` of a tables directory (all columns as strings).

    Raises:
        InputError: if the file is missing (releases written before the codebook existed).
    """
    path = Path(directory) / CODEBOOK_FILE
    if not path.is_file():
        raise InputError(f"{path}: missing file")
    names = list(codebook().column_names)
    opts = pacsv.ConvertOptions(column_types={c: pa.string() for c in names})
    return pacsv.read_csv(path, convert_options=opts)


def table_part_mismatch(
    path: str | os.PathLike[str],
    name: str,
    ids: Mapping[str, pa.Array],
    person_rows: sp.spmatrix,
    unit_rows: sp.spmatrix,
    household_rows: sp.spmatrix | None = None,
    *,
    dhc_rows: Mapping[str, sp.spmatrix] | None = None,
) -> str | None:
    """What is wrong with a table's file (or part file), or ``None``.

    It must have exactly the table's columns in order (``geolevel``, ``geocode``,
    ``GEOID``, ``SUMLEV``, ``NAME``, then its lines) and one row per geounit of ``ids``
    (:func:`censusdp.tables.level_identifiers` of the geounits it holds, in order), whose
    identifiers are exactly those (GEOID, SUMLEV and NAME as the geography gives them,
    :mod:`censusdp.tables.geoids`) and whose counts are the tabulation of
    ``person_rows`` (``pl94`` cells) and ``unit_rows`` (unit cells), or for a household
    table (:mod:`censusdp.tables.households`) of ``household_rows`` (``household2010``
    cells), or for a DHC table (:mod:`censusdp.tables.dhc`) of ``dhc_rows`` of its source
    (``dhc_persons``: ``dhcp-2020`` cells; ``dhc_households``: ``dhch-2020``;
    ``dhc_units``: ``tenvacgq``).
    """
    d = table_definition(name)
    try:
        pf = pq.ParquetFile(path)
        table = pf.read()
    except (OSError, pa.ArrowException) as exc:
        return f"{path}: not a readable table part ({exc})"
    want_columns = [*_ID_COLUMNS, *d.variables]
    if table.column_names != want_columns:
        extra = [c for c in table.column_names if c not in want_columns]
        missing = [c for c in want_columns if c not in table.column_names]
        what = f"lacks {missing[:3]}" if missing else f"has {extra[:3]}" if extra else "order"
        return f"{path}: its columns are not table {name}'s ({what})"
    n = len(ids["geocode"])
    if table.num_rows != n:
        return f"{path}: holds {table.num_rows} rows, not the {n} geounits of its part"
    for col in _ID_COLUMNS:
        bad = _first_difference(table.column(col), ids[col])
        if bad is not None:
            row, got, want = bad
            code = ids["geocode"][row].as_py()
            return f"{path}: row {row} (geocode {code}) has {col} {got!r}; its geography gives {want!r}"
    values = (
        np.column_stack(
            [np.asarray(table.column(v).to_numpy(zero_copy_only=False)) for v in d.variables]
        )
        if d.variables
        else np.zeros((n, 0))
    )
    sources = {"persons": person_rows, "units": unit_rows, "households": household_rows}
    rows = sources[d.source] if d.source in sources else (dhc_rows or {}).get(d.source)
    if rows is None:
        return f"{path}: a table of {d.source}, but the release has no such histogram"
    rows = dhc_source_rows(d.source, rows)
    want = np.asarray((sp.csr_matrix(rows) @ d.matrix).toarray(), dtype=np.int64)
    bad_rows = np.flatnonzero((values != want).any(axis=1)) if values.shape == want.shape else [0]
    if len(bad_rows):
        code = ids["geocode"][int(bad_rows[0])].as_py()
        return f"{path}: {len(bad_rows)} rows differ from the tabulation, first {code}"
    return None


def _first_difference(got: pa.ChunkedArray, want: pa.Array) -> tuple[int, object, object] | None:
    """``(row, value, wanted value)`` of the first row where a string column differs
    (nulls compared as values), or ``None`` when it equals ``want``."""
    try:
        got_s = got.cast(pa.string())
    except pa.ArrowException:
        return 0, got[0].as_py() if len(got) else None, want[0].as_py() if len(want) else None
    want_s = want.cast(pa.string())
    if got_s.equals(pa.chunked_array([want_s], pa.string())):
        return None
    a, b = got_s.to_pylist(), want_s.to_pylist()
    row = next(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
    return row, a[row], b[row]
