"""A redistricting plan: the district of every block, from a block-assignment file.

Redistricting offices exchange plans as block-assignment files: one row per block, its
GEOID and its district (the Census Bureau's own are pipe-delimited without a header,
``GEOID|DISTRICT``). :func:`read_plan` reads such a file (CSV, pipe or tab delimited,
with or without a header, or Parquet) against a release's blocks, and refuses a plan
that names an unknown block, assigns a block twice or leaves one out, with one line
naming the file, row, column and value.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.data.geography import Hierarchy
from censusdp.errors import InputError
from censusdp.tables.geoids import geoids

__all__ = ["PLAN_BLOCK_COLUMNS", "read_plan"]

PLAN_BLOCK_COLUMNS = ("GEOID", "GEOID20", "GEOID10", "BLOCKID", "BLOCK", "geocode")
"""Column names a plan's block identifiers may have (case-insensitive); else column 1."""


def _plan_rows(path: Path, option: str) -> tuple[list[str], list[list[str]], int, str]:
    """A plan's header, rows (strings) and the number of the first data row in the file
    (CSV lines, Parquet rows from 1), and what a row is called."""
    if path.suffix.lower() == ".parquet" or path.is_dir():
        try:
            table = pq.read_table(path)
        except (OSError, pa.ArrowException) as exc:
            raise InputError(f"{option} {path}: not a readable Parquet file ({exc})") from None
        cols = [table.column(c).cast(pa.string()).to_pylist() for c in table.column_names]
        return list(table.column_names), [list(r) for r in zip(*cols, strict=True)], 1, "row"
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{option} {path}: cannot be read as a UTF-8 text file ({exc})") from None
    lines = text.splitlines()
    delim = "|" if lines and "|" in lines[0] else ("\t" if lines and "\t" in lines[0] else ",")
    rows = [r for r in csv.reader(lines, delimiter=delim)]
    if not rows:
        raise InputError(f"{option} {path}: empty file")
    first = rows[0][0].strip() if rows[0] else ""
    if first.isdigit():  # no header (a Census block-assignment file: GEOID|DISTRICT)
        return ["GEOID", "DISTRICT"], rows, 1, "line"
    return [c.strip() for c in rows[0]], rows[1:], 2, "line"


def read_plan(
    path: str | Path, tabulation: Hierarchy, *, option: str = "--geography"
) -> np.ndarray:
    """The district of every block of a plan (block-assignment file), blocks in geocode order.

    A plan is CSV (comma, pipe or tab delimited, with or without a header) or Parquet:
    one row per block, the block's 15-character GEOID (or censusdp's 16-character
    geocode) in a column named as one of :data:`PLAN_BLOCK_COLUMNS` (else the first),
    its district in the next column (else the second).

    Raises:
        InputError: one line naming the file, row, column and value: an unknown block,
            a block listed twice, an empty district, a block of the release in no
            district.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{option} {path}: no such file")
    header, rows, first, unit = _plan_rows(path, option)
    lower = [h.lower() for h in header]
    gcol = next((lower.index(c.lower()) for c in PLAN_BLOCK_COLUMNS if c.lower() in lower), 0)
    dcol = 1 if gcol == 0 else 0
    if len(header) < 2:
        raise InputError(f"{option} {path}: needs two columns (block GEOID, district)")
    codes = tabulation.geocodes[-1]
    by_id = {g: i for i, g in enumerate(geoids(codes, 16).tolist()) if g is not None}
    by_code = {c: i for i, c in enumerate(codes.tolist())}
    out = np.full(codes.size, None, dtype=object)
    seen = np.zeros(codes.size, dtype=np.int64)
    for r, row in enumerate(rows):
        where = f"{option} {path}, {unit} {first + r}"
        if len(row) <= max(gcol, dcol):
            raise InputError(
                f"{where}: {len(row)} field(s), expected at least {max(gcol, dcol) + 1}"
            )
        block, district = (row[gcol] or "").strip(), (row[dcol] or "").strip()
        b = by_id.get(block, by_code.get(block))
        if b is None:
            raise InputError(
                f"{where}, column {header[gcol]!r}: value {block!r} is not a block GEOID of "
                "the release"
            )
        if not district:
            raise InputError(f"{where}, column {header[dcol]!r}: empty district for block {block}")
        if seen[b]:
            raise InputError(
                f"{where}, column {header[gcol]!r}: block {block} is assigned again (district "
                f"{district!r}; first at {unit} {seen[b]} to district {out[b]!r})"
            )
        seen[b], out[b] = first + r, district
    missing = np.flatnonzero(seen == 0)
    if missing.size:
        first_id = geoids(codes[missing[:1]], 16)[0] or codes[missing[0]]
        raise InputError(
            f"{option} {path}: {missing.size:,} block(s) of the release are in no district, "
            f"e.g. GEOID {first_id} (a plan assigns every block)"
        )
    return out.astype(str)
