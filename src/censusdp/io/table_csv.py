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

A run's tables are written in parts by executor tasks (:mod:`censusdp.io.tables`); each
task also writes its parts' CSV rows, both forms (:func:`write_part_csvs`, into
:data:`~censusdp.io.layout.TABLE_CSV_PARTS_DIR`), so the driver's
:func:`write_table_csvs` only puts the header and those bytes together, in part order,
and removes them. A part without such rows (tables written whole, or by an older
writer) is converted where the CSV is put together: the bytes are the same either way.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from censusdp.io.atomic import atomic_path
from censusdp.io.layout import TABLE_CSV_FORMS, TABLE_CSV_PARTS_DIR, table_csv_file
from censusdp.io.parts import part_files, part_name, regular_file
from censusdp.tables import (
    ALL_TABLE_NAMES,
    IDENTIFIER_COLUMNS,
    TABLE_NAMES,
    table_definition,
)
from censusdp.tables.geoids import IDENTIFIER_LABELS, SUMLEVELS

__all__ = [
    "LONG_CSV_COLUMNS",
    "published_tables",
    "table_csv_chunks",
    "part_csv_bytes",
    "table_csv_check",
    "table_csv_mismatch",
    "write_part_csvs",
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
    (:data:`censusdp.tables.HOUSEHOLD_TABLE_NAMES`) of a release with a household run and
    the DHC tables (:data:`censusdp.tables.DHC_TABLE_NAMES`) of a DHC release, those
    whose Parquet is there."""
    d = Path(directory)
    extra = ALL_TABLE_NAMES[len(TABLE_NAMES) :]
    return TABLE_NAMES + tuple(n for n in extra if (d / f"{n}.parquet").exists())


def _header_chunks(name: str, form: str) -> list[bytes]:
    """The header line(s) of table ``name``'s CSV in ``form``."""
    if form == "wide":
        d = table_definition(name)
        return [
            _header([*IDENTIFIER_COLUMNS, *d.variables]),
            _header([IDENTIFIER_LABELS[c] for c in IDENTIFIER_COLUMNS] + list(d.labels)),
        ]
    return [_header(list(LONG_CSV_COLUMNS))]


def part_csv_bytes(path: str | os.PathLike[str], name: str, form: str) -> bytes:
    """The rows (no header) of table ``name``'s CSV in ``form`` (``wide`` or ``long``)
    from one Parquet file of the table, a part or the whole."""
    columns = [*IDENTIFIER_COLUMNS, *table_definition(name).variables]
    part = pq.read_table(path, columns=columns)
    part = pa.table({c: _decoded(part.column(c)) for c in columns})
    return _rows(part if form == "wide" else _long(part, name))


def table_csv_chunks(directory: str | os.PathLike[str], name: str, form: str) -> Iterator[bytes]:
    """The bytes of table ``name``'s CSV in ``form`` (``wide`` or ``long``), header first,
    then part by part of its Parquet in ``directory``."""
    yield from _header_chunks(name, form)
    for path in part_files(Path(directory) / f"{name}.parquet", ".parquet", "table part"):
        yield part_csv_bytes(path, name, form)


def _decoded(column: pa.ChunkedArray) -> pa.ChunkedArray:
    if pa.types.is_dictionary(column.type):
        return column.cast(column.type.value_type)
    return column


def _part_rows_file(directory: Path, name: str, form: str, part: Path) -> Path:
    """Where a task leaves the CSV rows of the table part ``part`` (``part-00001.parquet``
    gives ``_csv_parts/P1.csv/part-00001.csv``)."""
    return (
        directory / TABLE_CSV_PARTS_DIR / table_csv_file(name, form) / part.with_suffix(".csv").name
    )


def write_part_csvs(directory: str | os.PathLike[str], name: str, index: int) -> None:
    """Write the CSV rows, both forms, of part ``index`` of table ``name`` in
    ``directory`` (just written: ``P1.parquet/part-00001.parquet``), each atomically, for
    :func:`write_table_csvs` to put together; run by the task that wrote the part."""
    d = Path(directory)
    part = d / f"{name}.parquet" / part_name(index)
    for form in TABLE_CSV_FORMS:
        with atomic_path(_part_rows_file(d, name, form, part)) as tmp:
            Path(tmp).write_bytes(part_csv_bytes(part, name, form))


def write_table_csvs(directory: str | os.PathLike[str]) -> list[Path]:
    """Write every table's wide and long CSV beside its Parquet in ``directory``, each
    atomically; return their paths.

    Each part's rows are those its task wrote (:func:`write_part_csvs`), copied and then
    removed, or else converted from the part here."""
    d = Path(directory)
    written, used = [], []
    for name in published_tables(d):
        parts = part_files(d / f"{name}.parquet", ".parquet", "table part")
        for form in TABLE_CSV_FORMS:
            path = d / table_csv_file(name, form)
            with atomic_path(path) as tmp, open(tmp, "wb") as f:
                for chunk in _header_chunks(name, form):
                    f.write(chunk)
                for part in parts:
                    rows = _part_rows_file(d, name, form, part)
                    if regular_file(rows):
                        with open(rows, "rb") as src:
                            shutil.copyfileobj(src, f, 1 << 20)
                        used.append(rows)
                    else:
                        f.write(part_csv_bytes(part, name, form))
            written.append(path)
    _remove_part_rows(d, used)
    return written


def _remove_part_rows(directory: Path, used: list[Path]) -> None:
    """Remove the tasks' CSV rows once copied, and their directories once empty (a file
    there that was not copied is left, and shows in the release's outputs)."""
    for rows in used:
        rows.unlink()
    top = directory / TABLE_CSV_PARTS_DIR
    for sub in sorted({rows.parent for rows in used}):
        if not any(sub.iterdir()):
            sub.rmdir()
    if top.is_dir() and not any(top.iterdir()):
        top.rmdir()


def table_csv_mismatch(directory: str | os.PathLike[str], name: str, form: str) -> str | None:
    """What is wrong with a table's CSV, or ``None``: it must hold exactly the bytes
    :func:`write_table_csvs` writes from the table's Parquet beside it."""
    return table_csv_check(directory, name, form)[0]


def table_csv_check(
    directory: str | os.PathLike[str], name: str, form: str
) -> tuple[str | None, str | None]:
    """``(problem, sha256)``: :func:`table_csv_mismatch`'s verdict, and the file's
    SHA-256, hashed as it is read, when it holds what it must (else ``None``)."""
    path = Path(directory) / table_csv_file(name, form)
    if not regular_file(path):
        return f"{path}: missing, or not a regular file", None
    line = 1
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in table_csv_chunks(directory, name, form):
            got = f.read(len(chunk))
            if got != chunk:
                same = next(
                    (i for i, (a, b) in enumerate(zip(got, chunk, strict=False)) if a != b),
                    min(len(got), len(chunk)),
                )
                line += chunk[:same].count(b"\n")
                return f"{path}: line {line} differs from its table's Parquet", None
            digest.update(got)
            line += chunk.count(b"\n")
        if f.read(1):
            return f"{path}: has more than its table's {line - 1} lines", None
    return None, digest.hexdigest()
