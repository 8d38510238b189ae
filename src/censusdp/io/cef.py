"""Read and validate the confidential input (CEF): ``persons.parquet`` and ``units.parquet``.

Validation runs once, at the boundary, and reports *every* problem it finds, each
naming the file, column, row (0-based) and value, before anything is computed or
written. The rules (docs/file-formats.md):

* both files exist and have every column, with integer (or string / boolean) types
  and no nulls;
* codes are in range (``hhgq`` 0..7, ``sex`` 1..2, ``age`` 0..115, ``hispanic`` 0..1,
  ``cenrace`` 1..63, ``gqtype`` 0..7) and geocodes are 16 digits;
* ``person_id`` and ``unit_id`` are unique;
* every person's unit exists and is in the person's block;
* a person in group quarters (``hhgq`` = g > 0) lives in a facility of type g, and a
  household person (``hhgq`` = 0) in a housing unit;
* nobody lives in a unit marked vacant, and every unit marked occupied has a person;
* the optional block attributes of ``units.parquet`` (``aian_area``: 4-digit AIAN area
  code, ``place``: 5-digit place or minor-civil-division code; ``""`` for none) are
  strings of that form, the same for every unit of a block. A missing column means no
  AIAN areas (or no places) at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.data.geography import validate_geocodes
from censusdp.errors import InputError
from censusdp.progress import Progress, Task, task

__all__ = [
    "CEF",
    "MAX_PER_RULE",
    "OCCUPIED_RULE",
    "OPTIONAL_UNIT_COLUMNS",
    "PERSON_COLUMNS",
    "UNIT_COLUMNS",
    "check_columns",
    "person_unit_rules",
    "read_cef",
    "same_within_block",
    "unit_rows_of",
    "validate_cef",
]

# column -> (kind, inclusive range or None)
PERSON_COLUMNS: dict[str, tuple[str, tuple[int, int] | None]] = {
    "person_id": ("int", None),
    "unit_id": ("int", None),
    "geocode": ("geocode", None),
    "hhgq": ("int", (0, 7)),
    "sex": ("int", (1, 2)),
    "age": ("int", (0, 115)),
    "hispanic": ("int", (0, 1)),
    "cenrace": ("int", (1, 63)),
}
UNIT_COLUMNS: dict[str, tuple[str, tuple[int, int] | None]] = {
    "unit_id": ("int", None),
    "geocode": ("geocode", None),
    "gqtype": ("int", (0, 7)),
    "occupied": ("bool", None),
}

OPTIONAL_UNIT_COLUMNS: dict[str, tuple[str, tuple[int, int] | None]] = {
    "aian_area": ("code", (4, 4)),
    "place": ("code", (5, 5)),
}
"""Block attributes that shape the production spine (:mod:`censusdp.data.spine`):
column -> ("code", (digits, digits)); ``""`` means the block is in no such entity."""

MAX_PER_RULE = 20
"""Rows named per (file, column, rule); the rest are counted in one "more rows" line."""

OCCUPIED_RULE = "unit is marked occupied but no person lives in it (value shown is its unit_id)"
"""The last rule of :func:`person_unit_rules`, which the part reader completes across parts."""


@dataclass(frozen=True, eq=False)
class CEF:
    """A validated confidential input, as NumPy columns.

    Attributes:
        persons: person columns (``geocode`` as a ``U16`` array, the rest int64).
        units: unit columns (``occupied`` as bool).
        source: the directory it was read from (``None`` if built in memory).
    """

    persons: Mapping[str, np.ndarray]
    units: Mapping[str, np.ndarray]
    source: Path | None = None

    @property
    def n_persons(self) -> int:
        """Number of person records."""
        return int(self.persons["person_id"].size)

    @property
    def n_units(self) -> int:
        """Number of unit records."""
        return int(self.units["unit_id"].size)


class _Problems:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def rows(self, file: str, column: str, mask: np.ndarray, values: np.ndarray, rule: str) -> None:
        idx = np.flatnonzero(mask)
        for r in idx[:MAX_PER_RULE]:
            v = values[r]
            v = v.item() if isinstance(v, np.generic) else v
            self.lines.append(f"{file}, column {column!r}, row {int(r)}: value {v!r} {rule}")
        if idx.size > MAX_PER_RULE:
            self.lines.append(
                f"{file}, column {column!r}: {idx.size - MAX_PER_RULE} more rows {rule}"
            )

    def add(self, line: str) -> None:
        self.lines.append(line)


def check_columns(
    table: pa.Table,
    spec: Mapping[str, tuple[str, tuple[int, int] | None]],
    file: str,
    problems: _Problems,
) -> dict[str, np.ndarray]:
    """The per-column rules (presence, type, nulls, ranges, digits) of ``table``, each
    problem given to ``problems`` (``rows(file, column, mask, values, rule)`` and
    ``add(line)``: :class:`_Problems`, or the part reader's collector); returns the
    columns that passed, as NumPy arrays."""
    out: dict[str, np.ndarray] = {}
    for name, (kind, rng) in spec.items():
        if name not in table.column_names:
            problems.add(f"{file}: missing column {name!r} (found {table.column_names})")
            continue
        col = table.column(name)
        if col.null_count:
            arr = col.is_null().to_numpy(zero_copy_only=False)
            problems.rows(file, name, arr, np.full(arr.size, None, dtype=object), "is null")
            continue
        t = col.type
        if kind == "int":
            if not pa.types.is_integer(t):
                problems.add(f"{file}, column {name!r}: type {t} is not an integer type")
                continue
            values = col.to_numpy().astype(np.int64, copy=False)
            if rng is not None:
                bad = (values < rng[0]) | (values > rng[1])
                if bad.any():
                    problems.rows(file, name, bad, values, f"is outside {rng[0]}..{rng[1]}")
            out[name] = values
        elif kind == "bool":
            if not pa.types.is_boolean(t):
                problems.add(f"{file}, column {name!r}: type {t} is not boolean")
                continue
            out[name] = col.to_numpy(zero_copy_only=False).astype(bool)
        elif kind == "code":
            values = _code_column(col, name, rng, file, problems)
            if values is not None:
                out[name] = values
        else:  # geocode
            if not (
                pa.types.is_string(t)
                or pa.types.is_large_string(t)
                or (pa.types.is_dictionary(t) and pa.types.is_string(t.value_type))
            ):
                problems.add(f"{file}, column {name!r}: type {t} is not a string type")
                continue
            values = np.asarray(col.to_numpy(zero_copy_only=False), dtype=object)
            ok = validate_geocodes(values)
            if not ok.all():
                problems.rows(file, name, ~ok, values, "is not a 16-digit block geocode")
            out[name] = values.astype("U16")
    return out


def _code_column(
    col: pa.ChunkedArray,
    name: str,
    width: tuple[int, int] | None,
    file: str,
    problems: _Problems,
) -> np.ndarray | None:
    """An optional code column: strings of ``width`` digits, or ``""`` for none."""
    t = col.type
    if not (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or (pa.types.is_dictionary(t) and pa.types.is_string(t.value_type))
    ):
        problems.add(f"{file}, column {name!r}: type {t} is not a string type")
        return None
    digits = width[0] if width else 0
    raw = np.asarray(col.to_numpy(zero_copy_only=False), dtype=object)
    given = raw != ""
    ok = ~given
    if given.any():
        ok[given] = validate_geocodes(raw[given], digits)
    if not ok.all():
        problems.rows(file, name, ~ok, raw, f"is not {digits} digits or empty")
    return raw.astype(f"U{max(digits, 1)}")


def _duplicates(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    sv = values[order]
    dup_sorted = np.zeros(values.size, dtype=bool)
    if values.size > 1:
        same = sv[1:] == sv[:-1]
        dup_sorted[1:] = same
    mask = np.zeros(values.size, dtype=bool)
    mask[order] = dup_sorted
    return mask


def unit_rows_of(unit_ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Row of each ``wanted`` id in ``unit_ids`` (unique ids); ``-1`` where absent."""
    if unit_ids.size == 0:
        return np.full(wanted.size, -1, dtype=np.int64)
    order = np.argsort(unit_ids, kind="stable")
    su = unit_ids[order]
    pos = np.minimum(np.searchsorted(su, wanted), su.size - 1)
    return np.where(su[pos] == wanted, order[pos], -1).astype(np.int64)


def validate_cef(
    persons: Mapping[str, np.ndarray],
    units: Mapping[str, np.ndarray],
    *,
    persons_file: str = "persons.parquet",
    units_file: str = "units.parquet",
) -> list[str]:
    """Cross-file rules on columns that already passed the per-column checks.

    Returns:
        One line per problem (empty if the input is valid).
    """
    problems = _Problems()
    pid, uid = persons["person_id"], units["unit_id"]
    dup = _duplicates(pid)
    if dup.any():
        problems.rows(persons_file, "person_id", dup, pid, "is a duplicate id")
    dup = _duplicates(uid)
    if dup.any():
        problems.rows(units_file, "unit_id", dup, uid, "is a duplicate id")
        return problems.lines  # unit lookups below need unique ids

    unit_row = unit_rows_of(uid, persons["unit_id"])
    for file, column, mask, values, rule in person_unit_rules(
        persons, units, unit_row, persons_file, units_file
    ):
        problems.rows(file, column, mask, values, rule)
    for name in OPTIONAL_UNIT_COLUMNS:
        if name in units:
            same_within_block(units["geocode"], units[name], name, units_file, problems)
    return problems.lines


def person_unit_rules(
    persons: Mapping[str, np.ndarray],
    units: Mapping[str, np.ndarray],
    unit_row: np.ndarray,
    pf: str,
    units_file: str,
) -> list[tuple[str, str, np.ndarray, np.ndarray, str]]:
    """``(file, column, rows breaking the rule, values, rule)`` of every rule that ties
    a person to their unit (``unit_row``: the unit's row, ``-1`` when absent; ``pf``:
    the persons file's name)."""
    pid, uid, pg, hhgq = persons["person_id"], units["unit_id"], persons["geocode"], persons["hhgq"]
    has = unit_row >= 0
    ur = unit_row[has]
    other_block = np.zeros(pid.size, dtype=bool)
    other_block[has] = pg[has] != units["geocode"][ur]
    gqtype = np.full(pid.size, -1, dtype=np.int64)
    gqtype[has] = units["gqtype"][ur]
    occupied = units["occupied"]
    in_vacant = np.zeros(pid.size, dtype=bool)
    in_vacant[has] = ~occupied[ur]
    residents = np.bincount(ur, minlength=uid.size)
    return [
        (pf, "unit_id", ~has, persons["unit_id"], f"is not a unit_id in {units_file}"),
        (pf, "geocode", other_block, pg,
         f"differs from the block of the person's unit in {units_file}"),
        (pf, "hhgq", has & (hhgq > 0) & (gqtype == 0), hhgq,
         "is a group-quarters type but the person's unit is a housing unit"),
        (pf, "hhgq", has & (hhgq == 0) & (gqtype > 0), hhgq,
         "is household (0) but the person's unit is a group-quarters facility"),
        (pf, "hhgq", has & (hhgq > 0) & (gqtype > 0) & (hhgq != gqtype), hhgq,
         "differs from the gqtype of the person's facility"),
        (pf, "unit_id", in_vacant, persons["unit_id"],
         f"is a unit marked vacant (occupied = false) in {units_file}"),
        (units_file, "occupied", occupied & (residents == 0), uid, OCCUPIED_RULE),
    ]  # fmt: skip


def same_within_block(
    geocode: np.ndarray, values: np.ndarray, name: str, file: str, problems: _Problems
) -> None:
    """A block attribute must be the same on every unit of the block."""
    order = np.lexsort((values, geocode))
    g, v = geocode[order], values[order]
    differs = np.zeros(g.size, dtype=bool)
    differs[order[1:]] = (g[1:] == g[:-1]) & (v[1:] != v[:-1])
    if differs.any():
        problems.rows(
            file, name, differs, values, "differs from another unit's value in the same block"
        )


def read_cef(directory: str | Path, *, progress: Progress = None) -> CEF:
    """Read and validate ``persons.parquet`` and ``units.parquet`` from ``directory``.

    ``progress`` (``None``: silent) sees the four steps: each file read, the columns
    converted, the records validated.

    Raises:
        InputError: listing every problem found, each naming file, column, row, value.
    """
    directory = Path(directory)
    problems = _Problems()
    tables: dict[str, pa.Table] = {}
    with task(progress, f"reading the CEF in {directory}", 4, unit="steps", summary=False) as bar:
        return _read_cef(directory, tables, problems, bar)


def _read_cef(directory: Path, tables: dict[str, pa.Table], problems: _Problems, bar: Task) -> CEF:
    """The body of :func:`read_cef`, advancing ``bar`` after each step."""
    for name in ("persons.parquet", "units.parquet"):
        path = directory / name
        if not path.exists():
            problems.add(f"{path}: missing file")
            continue
        try:
            tables[name] = pq.read_table(path)
        except (OSError, pa.ArrowException) as exc:
            problems.add(f"{path}: not a readable Parquet file ({exc})")
        bar.advance()
    if problems.lines:
        raise InputError(f"invalid input in {directory}", problems.lines)
    persons = check_columns(
        tables["persons.parquet"], PERSON_COLUMNS, str(directory / "persons.parquet"), problems
    )
    optional = {
        k: v for k, v in OPTIONAL_UNIT_COLUMNS.items() if k in tables["units.parquet"].column_names
    }
    units = check_columns(
        tables["units.parquet"],
        {**UNIT_COLUMNS, **optional},
        str(directory / "units.parquet"),
        problems,
    )
    if problems.lines:
        raise InputError(f"invalid input in {directory}", problems.lines)
    bar.advance()
    problems.lines.extend(
        validate_cef(
            persons,
            units,
            persons_file=str(directory / "persons.parquet"),
            units_file=str(directory / "units.parquet"),
        )
    )
    if problems.lines:
        raise InputError(f"invalid input in {directory}", problems.lines)
    bar.advance()
    return CEF(persons=persons, units=units, source=directory)
