"""Read and validate the confidential input (CEF): ``persons.parquet`` and ``units.parquet``.

Validation runs once, at the boundary, and reports *every* problem it finds, each
naming the file, column, row (0-based) and value, before anything is computed or
written. The rules (docs/file-formats.md):

* both exist, each a file or a directory of part files
  (:func:`censusdp.io.cef_files.input_files`: the one rule of every reader), the parts
  of a directory with the same columns and types;
* both have every column, with integer (or string / boolean) types
  (:func:`type_problem`) and no nulls;
* codes are in range (``hhgq`` 0..7, ``sex`` 1..2, ``age`` 0..115, ``hispanic`` 0..1,
  ``cenrace`` 1..63, ``gqtype`` 0..7; ids within int64), compared exactly whatever the
  integer type (:func:`outside`), and geocodes are 16 ASCII digits;
* ``person_id`` and ``unit_id`` are unique;
* every person's unit exists and is in the person's block;
* a person in group quarters (``hhgq`` = g > 0) lives in a facility of type g, and a
  household person (``hhgq`` = 0) in a housing unit;
* nobody lives in a unit marked vacant, and every unit marked occupied has a person;
* the optional block attributes of ``units.parquet`` (``aian_area``: 4-digit AIAN area
  code, ``place``: 5-digit place or minor-civil-division code; ``""`` for none) are
  strings of that form, the same for every unit of a block. A missing column means no
  AIAN areas (or no places) at all;
* the optional household columns (``rel``, ``citizen`` of ``persons.parquet``; the
  household attributes of ``units.parquet``) follow the rules of
  :mod:`censusdp.io.cef_households`: one householder per household, and a household
  column never disagrees with what the unit's persons give; so does the 2020 DHC's
  ``relgq`` of ``persons.parquet`` (a relationship in a household, the facility's GQ
  type in group quarters), and the 2020 DHC's unit columns ``ten``, ``vacs`` and
  ``qgqtyp`` of ``units.parquet`` (all three or none: a tenure on every occupied
  housing unit, a vacancy status on every vacant one, the facility's GQ type).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.data.geography import validate_geocodes
from censusdp.data.households import Households
from censusdp.data.schema import Schema
from censusdp.errors import InputError
from censusdp.io.cef_files import INPUT_NAMES, input_files, read_input
from censusdp.io.cef_households import (
    HOUSEHOLD_UNIT_COLUMNS,
    OPTIONAL_PERSON_COLUMNS,
    TENURE_UNIT_COLUMNS,
    household_column_rules,
    household_input_rules,
    households_of,
    missing_tenure_columns,
    qgqtyp_relgq_rule,
    relgq_householder_rule,
    relgq_rules,
    tenure_rules,
)
from censusdp.progress import Progress, Task, task

__all__ = [
    "CEF",
    "MAX_PER_RULE",
    "OCCUPIED_RULE",
    "OPTIONAL_UNIT_COLUMNS",
    "PERSON_COLUMNS",
    "UNIT_COLUMNS",
    "check_columns",
    "outside",
    "person_columns",
    "person_unit_rules",
    "read_cef",
    "read_cef_tables",
    "read_households",
    "same_within_block",
    "schema_difference",
    "tenure_column_missing",
    "type_problem",
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


def person_columns(
    schema: Schema, present: list[str] | tuple[str, ...], file: str | Path
) -> dict[str, tuple[str, tuple[int, int] | None]]:
    """The person columns a run in ``schema`` reads and checks: :data:`PERSON_COLUMNS` and
    the optional ones the schema's attributes read (``citizen`` for ``dhcp-hhgq``).

    Raises:
        InputError: one line naming ``file`` and the first such column not ``present``.
    """
    spec = dict(PERSON_COLUMNS)
    for name in schema.input_columns:
        if name in spec:
            continue
        if name not in present:
            raise InputError(
                f"{file}: missing column {name!r}, which the person schema "
                f"{schema.name!r} reads (found {list(present)})"
            )
        spec[name] = OPTIONAL_PERSON_COLUMNS[name]
    return spec


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
        input_sha256: the SHA-256 of the bytes read from each file, by path relative to
            ``source`` (``persons.parquet``, or ``persons.parquet/part-00000.parquet``,
            ...), as a release's manifest records its input.
    """

    persons: Mapping[str, np.ndarray]
    units: Mapping[str, np.ndarray]
    source: Path | None = None
    input_sha256: Mapping[str, str] = field(default_factory=dict)

    @property
    def n_persons(self) -> int:
        """Number of person records."""
        return int(self.persons["person_id"].size)

    @property
    def n_units(self) -> int:
        """Number of unit records."""
        return int(self.units["unit_id"].size)


class _Problems:
    """Problem lines; a row of a table read from several part files is named by its part
    and its row there (``parts``: label -> the part files and the first row of each)."""

    def __init__(self, parts: Mapping[str, tuple[list[Path], np.ndarray]] | None = None) -> None:
        self.lines: list[str] = []
        self.parts = dict(parts or {})

    def _where(self, file: str, r: int) -> tuple[str, int]:
        if file not in self.parts:
            return file, r
        paths, starts = self.parts[file]
        i = int(np.searchsorted(starts, r, side="right")) - 1
        return str(paths[i]), r - int(starts[i])

    def rows(self, file: str, column: str, mask: np.ndarray, values: np.ndarray, rule: str) -> None:
        idx = np.flatnonzero(mask)
        for r in idx[:MAX_PER_RULE]:
            v = values[r]
            v = v.item() if isinstance(v, np.generic) else v
            name, row = self._where(file, int(r))
            self.lines.append(f"{name}, column {column!r}, row {row}: value {v!r} {rule}")
        if idx.size > MAX_PER_RULE:
            self.lines.append(
                f"{file}, column {column!r}: {idx.size - MAX_PER_RULE} more rows {rule}"
            )

    def add(self, line: str) -> None:
        self.lines.append(line)


def type_problem(kind: str, t: pa.DataType) -> str | None:
    """Why a column of Arrow type ``t`` cannot hold values of ``kind`` (``None``: it can).

    The one type rule of both readers: ``int`` an integer type, ``bool`` boolean,
    ``geocode`` and ``code`` a string type (plain or dictionary-encoded).
    """
    if kind == "int":
        return None if pa.types.is_integer(t) else f"type {t} is not an integer type"
    if kind == "bool":
        return None if pa.types.is_boolean(t) else f"type {t} is not boolean"
    if pa.types.is_dictionary(t):
        t = t.value_type
    ok = pa.types.is_string(t) or pa.types.is_large_string(t)
    return None if ok else f"type {t} is not a string type"


def outside(values: np.ndarray, rng: tuple[int, int] | None) -> tuple[np.ndarray, str]:
    """The rows of an integer column (any width and sign, compared exactly, so a uint64
    above 2^63 is never read as a negative number) outside ``rng``, or outside int64
    when there is no range, and the rule they break."""
    if rng is not None:
        return (values < rng[0]) | (values > rng[1]), f"is outside {rng[0]}..{rng[1]}"
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    return (values < lo) | (values > hi), f"is outside the 64-bit integer range {lo}..{hi}"


def schema_difference(
    path: str | Path, schema: pa.Schema, first: str | Path, first_schema: pa.Schema
) -> str | None:
    """The problem of a part file whose columns or types differ from the first part's
    (``None``: the same), naming the first column that differs."""
    if schema.equals(first_schema):
        return None
    why = ""
    for f0 in first_schema:
        if f0.name not in schema.names:
            why = f" (column {f0.name!r} is missing)"
            break
        t = schema.field(f0.name).type
        if t != f0.type:
            why = f" (column {f0.name!r} is {t}, not {f0.type})"
            break
    else:
        extra = [n for n in schema.names if n not in first_schema.names]
        if extra:
            why = f" (column {extra[0]!r} is not in the first part)"
    return f"{path}: columns or types differ from {first}{why}"


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
        wrong = type_problem(kind, col.type)
        if wrong is not None:
            problems.add(f"{file}, column {name!r}: {wrong}")
            continue
        if kind == "int":
            raw = col.to_numpy()
            bad, rule = outside(raw, rng)
            if bad.any():
                problems.rows(file, name, bad, raw, rule)
            out[name] = raw.astype(np.int64, copy=False)
        elif kind == "bool":
            out[name] = col.to_numpy(zero_copy_only=False).astype(bool)
        elif kind == "code":
            out[name] = _code_column(col, name, rng, file, problems)
        else:  # geocode
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
) -> np.ndarray:
    """An optional code column (of a string type): ``width`` digits, or ``""`` for none."""
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
    parts: Mapping[str, tuple[list[Path], np.ndarray]] | None = None,
) -> list[str]:
    """Cross-file rules on columns that already passed the per-column checks.

    ``parts`` names a row by its part file (:class:`_Problems`) when an input was read
    from a directory of parts.

    Returns:
        One line per problem (empty if the input is valid).
    """
    problems = _Problems(parts)
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
    ) + household_input_rules(persons, units, unit_row, persons_file, units_file):
        problems.rows(file, column, mask, values, rule)
    if "relgq" in persons:
        for file, column, mask, values, rule in relgq_rules(
            persons["relgq"], persons["hhgq"], unit_row, int(uid.size), persons_file
        ):
            problems.rows(file, column, mask, values, rule)
        if "rel" in persons:
            problems.rows(*relgq_householder_rule(
                persons["relgq"], persons["rel"], persons["hhgq"], persons_file
            ))  # fmt: skip
    tenure = all(c in units for c in TENURE_UNIT_COLUMNS)
    for file, column, mask, values, rule in tenure_rules(units, units_file) if tenure else []:
        problems.rows(file, column, mask, values, rule)
    if tenure and "relgq" in persons:
        problems.rows(
            *qgqtyp_relgq_rule(
                persons["relgq"], persons["hhgq"], unit_row, units["qgqtyp"], persons_file
            )
        )
    if "rel" in persons and not problems.lines:
        households = households_of(persons, units, unit_row)
        for file, column, mask, values, rule in household_column_rules(
            households, units, units_file
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

    Each is a file or a directory of part files, listed by
    :func:`censusdp.io.cef_files.input_files` (the rule every reader of the input
    follows); each file's bytes are read once, hashed (:attr:`CEF.input_sha256`) and
    parsed. The parts of a directory must have the same columns and types; their rows
    are read in name order, and a problem is named by the part file and its row there,
    as the part reader of ``censusdp run`` names it.

    ``progress`` (``None``: silent) sees the four steps: each file read, the columns
    converted, the records validated.

    Raises:
        InputError: listing every problem found, each naming file, column, row, value.
    """
    directory = Path(directory)
    with task(progress, f"reading the CEF in {directory}", 4, unit="steps", summary=False) as bar:
        return _read_cef(directory, bar)


def _read_input(
    files: list[Path], directory: Path, sha256: dict[str, str], problems: list[str]
) -> tuple[pa.Table | None, np.ndarray]:
    """One input's files as one table (``None`` after a problem) and each file's first
    row in it; each file's SHA-256 into ``sha256``."""
    tables: list[pa.Table] = []
    first = files[0]
    for path in files:
        try:
            data, sha256[path.relative_to(directory).as_posix()] = read_input(path)
            table = pq.ParquetFile(pa.BufferReader(data)).read()
        except InputError as exc:
            problems.append(str(exc))
            continue
        except (OSError, pa.ArrowException) as exc:
            problems.append(f"{path}: not a readable Parquet file ({exc})")
            continue
        del data
        if tables:
            differs = schema_difference(path, table.schema, first, tables[0].schema)
            if differs is not None:
                problems.append(differs)
                continue
        else:
            first = path
        tables.append(table)
    starts = np.cumsum([0] + [t.num_rows for t in tables[:-1]]).astype(np.int64)
    if len(tables) != len(files):
        return None, starts
    if len(tables) == 1:
        return tables[0], starts
    return pa.concat_tables(tables), starts


def read_cef_tables(directory: str | Path) -> dict[str, pa.Table]:
    """``persons.parquet`` and ``units.parquet`` of ``directory`` as Arrow tables, every
    column, read as :func:`read_cef` reads them (the same files, the same rows) but not
    validated: for a tool that rewrites a CEF :func:`read_cef` has validated.

    Raises:
        InputError: naming a file the rule refuses, or that is not readable Parquet.
    """
    return _read_files(Path(directory), None)[0]


def _read_files(
    directory: Path, bar: Task | None
) -> tuple[dict[str, pa.Table], dict[str, tuple[list[Path], np.ndarray]], dict[str, str]]:
    """Both inputs as tables (by file name), the part files and first rows of each input
    read from a directory of parts (by label), and each file's SHA-256."""
    files, lines = input_files(directory)
    sha256: dict[str, str] = {}
    tables: dict[str, pa.Table] = {}
    parts: dict[str, tuple[list[Path], np.ndarray]] = {}
    for name, fs in zip(INPUT_NAMES, files, strict=True):
        if not fs:
            continue
        table, starts = _read_input(fs, directory, sha256, lines)
        if table is not None:
            tables[name] = table
            if len(fs) > 1 or fs[0] != directory / name:
                parts[str(directory / name)] = (fs, starts)
        if bar is not None:
            bar.advance()
    if lines:
        raise InputError(f"invalid input in {directory}", lines)
    return tables, parts, sha256


def _read_cef(directory: Path, bar: Task) -> CEF:
    """The body of :func:`read_cef`, advancing ``bar`` after each step."""
    tables, parts, sha256 = _read_files(directory, bar)
    labels = {name: str(directory / name) for name in INPUT_NAMES}
    problems = _Problems(parts)
    present = tables["persons.parquet"].column_names
    optional = {k: v for k, v in OPTIONAL_PERSON_COLUMNS.items() if k in present}
    persons = check_columns(
        tables["persons.parquet"],
        {**PERSON_COLUMNS, **optional},
        labels["persons.parquet"],
        problems,
    )
    present = tables["units.parquet"].column_names
    optional = {
        k: v
        for k, v in {
            **OPTIONAL_UNIT_COLUMNS,
            **HOUSEHOLD_UNIT_COLUMNS,
            **TENURE_UNIT_COLUMNS,
        }.items()
        if k in present
    }
    for name in missing_tenure_columns(present):
        problems.add(tenure_column_missing(labels["units.parquet"], name, present))
    units = check_columns(
        tables["units.parquet"], {**UNIT_COLUMNS, **optional}, labels["units.parquet"], problems
    )
    if problems.lines:
        raise InputError(f"invalid input in {directory}", problems.lines)
    del tables
    bar.advance()
    problems.lines.extend(
        validate_cef(
            persons,
            units,
            persons_file=labels["persons.parquet"],
            units_file=labels["units.parquet"],
            parts=parts,
        )
    )
    if problems.lines:
        raise InputError(f"invalid input in {directory}", problems.lines)
    bar.advance()
    return CEF(persons=persons, units=units, source=directory, input_sha256=sha256)


def tenure_column_missing(file: str | Path, name: str, present: list[str] | tuple[str, ...]) -> str:
    """The line of a units file that lacks the tenure column ``name`` while it has
    another (``ten``, ``vacs`` and ``qgqtyp`` come together)."""
    return (
        f"{file}: missing column {name!r}: ten, vacs and qgqtyp (the 2020 DHC's tenure, "
        f"vacancy status and GQ type) come together (found {list(present)})"
    )


def read_households(cef: CEF) -> Households:
    """The households of a validated input, each derived from its persons
    (:mod:`censusdp.io.cef_households`; :func:`read_cef` has checked their rules).

    Raises:
        InputError: one line naming ``persons.parquet`` when it has no ``rel`` column
            (an input without relationships serves every run but a household one).
    """
    if "rel" not in cef.persons:
        where = cef.source / "persons.parquet" if cef.source is not None else "persons"
        raise InputError(
            f"{where}: missing column 'rel' (each person's relationship to the "
            "householder), which households need"
        )
    unit_row = unit_rows_of(cef.units["unit_id"], cef.persons["unit_id"])
    return households_of(cef.persons, cef.units, unit_row)
