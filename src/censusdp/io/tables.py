"""The published tables on disk: one Parquet file per table in ``RUN/tables/``, and
``RUN/tables/codebook.csv`` naming and labelling every column.

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

from censusdp.data.geography import Hierarchy
from censusdp.errors import InputError, SchemaError
from censusdp.io.atomic import atomic_path, write_parquet
from censusdp.tables import TABLE_NAMES, codebook, table_definition, tables_to_arrays

__all__ = ["CODEBOOK_FILE", "read_codebook", "read_table", "read_tables", "write_tables"]

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
    with atomic_path(d / CODEBOOK_FILE) as tmp:
        pacsv.write_csv(codebook(), tmp)


def read_tables(directory: str | os.PathLike[str]) -> dict[str, pa.Table]:
    """Read every table of :data:`TABLE_NAMES` from ``directory``.

    Raises:
        InputError: if the directory or a table file is missing.
    """
    d = Path(directory)
    missing = [n for n in TABLE_NAMES if not (d / f"{n}.parquet").is_file()]
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
        if not path.is_file():
            raise InputError(f"tables directory {str(d)!r} lacks {n}.parquet")
        names = pq.ParquetFile(path).schema_arrow.names
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
    if not path.is_file():
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
