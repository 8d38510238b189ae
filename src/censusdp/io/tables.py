"""The published tables on disk: one Parquet file per table in ``RUN/tables/``, and
``RUN/tables/codebook.csv`` naming and labelling every column.

A run writes each table as part files (:mod:`censusdp.io.parts`):
``RUN/tables/P1.parquet/part-00000.parquet`` holds the geounits of every level above
the block, ``part-00001.parquet`` on the blocks of the MDF's first part, and so on, each
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
from censusdp.io.parts import part_files, part_name, write_part_index
from censusdp.tables import TABLE_NAMES, codebook, table_definition, tables_to_arrays

__all__ = [
    "CODEBOOK_FILE",
    "TABLE_PART_FIELDS",
    "read_codebook",
    "read_table",
    "read_table_part_values",
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

CODEBOOK_FILE = "codebook.csv"
"""File name of the codebook in a tables directory."""


def write_tables(tables: Mapping[str, pa.Table], directory: str | os.PathLike[str]) -> None:
    """Write each table to ``directory/<name>.parquet`` and the codebook, atomically."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        if name not in TABLE_NAMES:
            raise SchemaError(f"unknown table {name!r}; tables are {list(TABLE_NAMES)}")
        write_parquet(table, d / f"{name}.parquet")
    write_codebook(d)


def write_codebook(directory: str | os.PathLike[str]) -> None:
    """Write ``directory/codebook.csv`` atomically."""
    with atomic_path(Path(directory) / CODEBOOK_FILE) as tmp:
        pacsv.write_csv(codebook(), tmp)


def write_table_part(
    tables: Mapping[str, pa.Table], directory: str | os.PathLike[str], index: int
) -> dict[str, dict[str, object]]:
    """Write part ``index`` of each table (``directory/<name>.parquet/part-NNNNN.parquet``,
    atomically, flushed); return each table's part record (file, rows, SHA-256)."""
    out = {}
    for name, table in tables.items():
        if name not in TABLE_NAMES:
            raise SchemaError(f"unknown table {name!r}; tables are {list(TABLE_NAMES)}")
        path = Path(directory) / f"{name}.parquet" / part_name(index)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_parquet(table, path)
        fsync_file(path)
        out[name] = {"file": path.name, "rows": table.num_rows, "sha256": sha256_of(path)}
    return out


def write_table_index(
    directory: str | os.PathLike[str], parts: list[Mapping[str, dict[str, object]]]
) -> None:
    """Write each table's ``_parts.json`` from its parts' records (:func:`write_table_part`
    with ``geolevel``, ``start`` and ``stop`` added) and the codebook."""
    d = Path(directory)
    for name in TABLE_NAMES:
        recs = [p[name] for p in parts if name in p]
        if recs:
            write_part_index(d / f"{name}.parquet", recs, TABLE_PART_FIELDS)
    write_codebook(d)


def read_table_part_values(
    path: str | os.PathLike[str], name: str
) -> tuple[np.ndarray, np.ndarray]:
    """One table file's ``geocode`` column and its ``(rows x lines)`` counts, in file order.

    Raises:
        InputError: for an unreadable file or a missing column.
    """
    try:
        table = pq.read_table(path, columns=["geocode", *table_definition(name).variables])
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{path}: not a readable table part ({exc})") from None
    codes = np.asarray(table.column("geocode").to_numpy(zero_copy_only=False)).astype(str)
    values = (
        np.column_stack(
            [
                np.asarray(c.to_numpy(zero_copy_only=False), dtype=np.int64)
                for c in table.columns[1:]
            ]
        )
        if table.num_columns > 1
        else np.zeros((table.num_rows, 0), dtype=np.int64)
    )
    return codes, values


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
    return {n: pq.read_table(d / f"{n}.parquet") for n in TABLE_NAMES}


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
        table = pq.read_table(path, columns=[c for c in wanted if c in names])
        out[n] = tables_to_arrays({n: table}, hierarchy)[n]
    return out


def read_table(
    directory: str | os.PathLike[str], name: str, *, sumlev: str | None = None
) -> pa.Table:
    """Read one published table, optionally one summary level only (``sumlev="050"``).

    Raises:
        SchemaError: for an unknown table name.
        InputError: if the file is missing.
    """
    if name not in TABLE_NAMES:
        raise SchemaError(f"unknown table {name!r}; tables are {list(TABLE_NAMES)}")
    path = Path(directory) / f"{name}.parquet"
    if not path.exists():  # a file, or a directory of parts
        raise InputError(f"{path}: missing file")
    filters = [("SUMLEV", "=", sumlev)] if sumlev is not None else None
    return pq.read_table(path, filters=filters)


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
    geocodes: np.ndarray,
    person_rows: sp.spmatrix,
    unit_rows: sp.spmatrix,
) -> str | None:
    """What is wrong with a table's part file, or ``None``: it must hold exactly the
    geounits ``geocodes``, in order, with the counts tabulated from ``person_rows``
    (``pl94`` cells) and ``unit_rows`` (unit cells), one row per geounit."""
    try:
        codes, values = read_table_part_values(path, name)
    except InputError as exc:
        return str(exc)
    if codes.size != geocodes.size or not np.array_equal(codes, np.asarray(geocodes).astype(str)):
        return f"{path}: holds {codes.size} other geounits than the {geocodes.size} of its part"
    d = table_definition(name)
    rows = person_rows if d.source == "persons" else unit_rows
    want = np.asarray((sp.csr_matrix(rows) @ d.matrix).toarray(), dtype=np.int64)
    bad = np.flatnonzero((values != want).any(axis=1)) if values.shape == want.shape else [0]
    if len(bad):
        return f"{path}: {len(bad)} rows differ from the tabulation, first {codes[bad[0]]}"
    return None
