"""The published tables as CSV, beside their Parquet: wide and long, for census users.

Every release writes, in its tables directory, two CSV files per table (names from
:func:`censusdp.io.layout.table_csv_file`), from the table's Parquet parts read back one
at a time (so one part's rows at most are held):

* **wide**, ``P1.csv``: one row per geounit of every level (as the Parquet, in its
  order), the columns ``GEOID``, ``SUMLEV``, ``NAME`` and one per line of the table
  (``P1_001N`` ...). As in data.census.gov's downloads (and NHGIS's optional descriptive
  header), the first line holds the column names and the second their labels (the
  codebook's: ``Total:``, ``Total:!!Population of one race:`` ...); read it with
  ``pandas.read_csv(path, skiprows=[1])``.
* **long**, ``P1_long.csv``: one row per geounit and line, as tidycensus's tidy form
  and the Census API: ``GEOID``, ``SUMLEV``, ``NAME``, ``variable``, ``label``,
  ``value``, one header line. Blocks are left out of the long form (a state's blocks
  times the table's lines is a file of gigabytes); they are in the wide CSV and the
  Parquet.

Strings are quoted, counts are integers, an undefined identifier is empty. The files
are written by :func:`write_table_csvs` and checked by :func:`table_csv_mismatch`
(``censusdp validate``'s ``tables_csv``), which writes them again in memory, part by part,
and compares the bytes.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from censusdp.io.atomic import atomic_path
from censusdp.io.layout import table_csv_file
from censusdp.io.parts import part_files, regular_file
from censusdp.tables import (
    HOUSEHOLD_TABLE_NAMES,
    IDENTIFIER_COLUMNS,
    TABLE_NAMES,
    table_definition,
)
from censusdp.tables.geoids import IDENTIFIER_LABELS, SUMLEVELS

__all__ = [
    "LONG_CSV_COLUMNS",
    "published_tables",
    "table_csv_chunks",
    "table_csv_mismatch",
    "write_table_csvs",
]

LONG_CSV_COLUMNS = (*IDENTIFIER_COLUMNS, "variable", "label", "value")
"""The columns of a table's long CSV."""

_BLOCK_SUMLEV = SUMLEVELS[16]


def _header(cells: list[str]) -> bytes:
    """One CSV line of quoted strings (as pyarrow quotes the strings of the rows)."""
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerow(cells)
    return out.getvalue().encode("utf-8")


def _rows(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pacsv.write_csv(table, sink, pacsv.WriteOptions(include_header=False))
    return sink.getvalue().to_pybytes()


def _long(part: pa.Table, name: str) -> pa.Table:
    """A part's geounits above the block, one row per geounit and line, line within
    geounit."""
    d = table_definition(name)
    keep = pc.fill_null(pc.not_equal(part.column("SUMLEV"), _BLOCK_SUMLEV), True)
    part = part.filter(keep)
    n, k = part.num_rows, len(d.variables)
    values = (
        np.column_stack(
            [np.asarray(part.column(v).to_numpy(zero_copy_only=False)) for v in d.variables]
        )
        if n
        else np.zeros((0, k), dtype=np.int64)
    )
    at = pa.array(np.repeat(np.arange(n), k))
    return pa.table(
        {
            **{c: part.column(c).take(at) for c in IDENTIFIER_COLUMNS},
            "variable": pa.array(np.tile(np.asarray(d.variables, dtype=object), n), pa.string()),
            "label": pa.array(np.tile(np.asarray(d.labels, dtype=object), n), pa.string()),
            "value": pa.array(values.reshape(-1).astype(np.int64)),
        }
    )


def published_tables(directory: str | os.PathLike[str]) -> tuple[str, ...]:
    """The tables a tables directory publishes: P1-P5 and H1, and the household tables
    (:data:`censusdp.tables.HOUSEHOLD_TABLE_NAMES`) of a release with a household run,
    those whose Parquet is there."""
    d = Path(directory)
    return TABLE_NAMES + tuple(n for n in HOUSEHOLD_TABLE_NAMES if (d / f"{n}.parquet").exists())


def table_csv_chunks(directory: str | os.PathLike[str], name: str, form: str) -> Iterator[bytes]:
    """The bytes of table ``name``'s CSV in ``form`` (``wide`` or ``long``), header first,
    then part by part of its Parquet in ``directory``."""
    d = table_definition(name)
    if form == "wide":
        yield _header([*IDENTIFIER_COLUMNS, *d.variables])
        yield _header([IDENTIFIER_LABELS[c] for c in IDENTIFIER_COLUMNS] + list(d.labels))
    else:
        yield _header(list(LONG_CSV_COLUMNS))
    columns = [*IDENTIFIER_COLUMNS, *d.variables]
    for path in part_files(Path(directory) / f"{name}.parquet", ".parquet", "table part"):
        part = pq.read_table(path, columns=columns)
        part = pa.table({c: _decoded(part.column(c)) for c in columns})
        yield _rows(part if form == "wide" else _long(part, name))


def _decoded(column: pa.ChunkedArray) -> pa.ChunkedArray:
    if pa.types.is_dictionary(column.type):
        return column.cast(column.type.value_type)
    return column


def write_table_csvs(directory: str | os.PathLike[str]) -> list[Path]:
    """Write every table's wide and long CSV beside its Parquet in ``directory``, each
    atomically; return their paths."""
    written = []
    for name in published_tables(directory):
        for form in ("wide", "long"):
            path = Path(directory) / table_csv_file(name, form)
            with atomic_path(path) as tmp, open(tmp, "wb") as f:
                for chunk in table_csv_chunks(directory, name, form):
                    f.write(chunk)
            written.append(path)
    return written


def table_csv_mismatch(directory: str | os.PathLike[str], name: str, form: str) -> str | None:
    """What is wrong with a table's CSV, or ``None``: it must hold exactly the bytes
    :func:`write_table_csvs` writes from the table's Parquet beside it."""
    path = Path(directory) / table_csv_file(name, form)
    if not regular_file(path):
        return f"{path}: missing, or not a regular file"
    line = 1
    with open(path, "rb") as f:
        for chunk in table_csv_chunks(directory, name, form):
            got = f.read(len(chunk))
            if got != chunk:
                same = next(
                    (i for i, (a, b) in enumerate(zip(got, chunk, strict=False)) if a != b),
                    min(len(got), len(chunk)),
                )
                line += chunk[:same].count(b"\n")
                return f"{path}: line {line} differs from its table's Parquet"
            line += chunk.count(b"\n")
        if f.read(1):
            return f"{path}: has more than its table's {line - 1} lines"
    return None
