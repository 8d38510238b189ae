"""The published tables on disk: one Parquet file per table in ``RUN/tables/``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.errors import InputError, SchemaError
from censusdp.io.atomic import write_parquet
from censusdp.tables import TABLE_NAMES

__all__ = ["read_tables", "write_tables"]


def write_tables(tables: Mapping[str, pa.Table], directory: str | os.PathLike[str]) -> None:
    """Write each table to ``directory/<name>.parquet`` atomically."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        if name not in TABLE_NAMES:
            raise SchemaError(f"unknown table {name!r}; tables are {list(TABLE_NAMES)}")
        write_parquet(table, d / f"{name}.parquet")


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
