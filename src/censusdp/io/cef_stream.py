"""Read the confidential input (CEF) in parts, as executor tasks, straight into block histograms.

:func:`censusdp.io.cef.read_cef` holds every column of both files in memory, geocodes as
16-character strings: 15 GB for California's 37M persons. A release needs none of that
once the input is aggregated, so :func:`read_cef_blocks` never brings a record to the
driver:

1. From the files' footers alone (row counts, geocode statistics of each row group) it
   cuts the geocode space into ranges of about ``part_rows`` persons, at row-group
   boundaries (the generator writes one row group per county, or per million persons
   of a large county): each range is a :class:`~censusdp.io.cef_parts.CEFPart`.
2. The executor runs :func:`~censusdp.io.cef_parts.read_cef_part` on every part: in
   this process one after another, on a pool, or on Spark's executors, each reading
   only its row groups of ``persons.parquet`` and ``units.parquet``. Memory is bounded
   by the largest part (a county, or a million persons of a large one), not the state.
3. The driver stacks the parts' block histograms (their ranges are in geocode order, so
   the blocks are already sorted) and checks what no part can check alone: person and
   unit ids unique across parts (the parts' id ranges, when they do not overlap;
   otherwise a second pass of hash buckets of ids, :func:`~censusdp.io.cef_parts.ids_bucket`),
   persons whose unit is in another part, occupied units whose residents are elsewhere.

``persons.parquet`` and ``units.parquet`` may each be a file or a directory of part
files (``persons.parquet/part-*.parquet``, as a Spark job writes them), listed by
:func:`censusdp.io.cef_files.input_files`, the rule of every reader of the input. Every
file is hashed first (:func:`censusdp.io.cef_files.hash_input`: the release records
those digests), and every read of it, in the driver or a task, checks it is still the
file hashed. Where row groups are not in geocode order, or
are much larger than a part, the parts are made larger until the input is read at most
:data:`MAX_READS` times over (down to one part, whose memory grows with the input).

The checks are the rules of :mod:`censusdp.io.cef`; a problem is named by file,
column, row (of the file) and value exactly as :func:`~censusdp.io.cef.read_cef` names
it, whichever part finds it, without any part reading more than its own rows.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from censusdp.data.geography import BLOCK_GEOCODE_LENGTH, GeoLevels, Hierarchy
from censusdp.data.invariants import Invariants
from censusdp.data.schema import Schema
from censusdp.errors import InputError, InternalError
from censusdp.io.cef import (
    MAX_PER_RULE,
    OCCUPIED_RULE,
    OPTIONAL_UNIT_COLUMNS,
    person_columns,
    person_unit_rules,
    schema_difference,
    tenure_column_missing,
    unit_rows_of,
)
from censusdp.io.cef_files import (
    INPUT_NAMES,
    CEFInput,
    Stamp,
    hash_input,
    input_files,
    parquet_input,
)
from censusdp.io.cef_households import (
    HOUSEHOLD_UNIT_COLUMNS,
    TENURE_UNIT_COLUMNS,
    missing_tenure_columns,
)
from censusdp.io.cef_parts import (
    PERSONS,
    UNITS,
    CEFPart,
    Found,
    GroupRef,
    IdBucket,
    ids_bucket,
    read_cef_part,
    rule_rank,
)
from censusdp.progress import Progress, task

__all__ = [
    "DEFAULT_BATCH_ROWS",
    "DEFAULT_PART_ROWS",
    "CEFBlocks",
    "DHCH_INPUT_COLUMNS",
    "check_dhch_columns",
    "check_dhch_input",
    "read_cef_blocks",
]

DEFAULT_BATCH_ROWS = 1 << 20
"""Rows per batch read from the input files (about 70 MB of person columns)."""

DEFAULT_PART_ROWS = 1 << 19
"""Persons per part, about: consecutive row groups are joined up to this many (a row
group larger than this is a part of its own)."""

MAX_READS = 3
"""The parts together read at most this many times the input's rows (else they are made
larger, up to one part for the whole input)."""

ID_BUCKET_ROWS = 1 << 22
"""Ids per bucket of the second pass of the id check (32 MB of ids a task)."""


@dataclass(frozen=True, eq=False)
class CEFBlocks:
    """What a release needs of its input, aggregated to blocks.

    Attributes:
        hierarchy: the geounits of every level, built from the units' blocks.
        invariants: the exact public counts.
        persons: ``(blocks x cells)`` person histogram in the given schema.
        housing_units: ``(blocks x 2)`` housing-unit histogram (vacant, occupied), or
            ``None`` when not asked for.
        households: ``(blocks x 387,072)`` sparse ``household2010`` histogram of the
            households derived from their persons, or ``None`` when not asked for.
        dhc_households: ``(blocks x 1,578,528)`` sparse ``dhch-2020`` histogram of the
            households (the 2020 DHC's household run), or ``None`` when not asked for.
        tenvacgq: ``(blocks x 35)`` counts of the units by ``tenvacgq`` (the 2020 DHC's
            unit histogram, ``dhc-units-2020``) when ``units.parquet`` has ``ten``,
            ``vacs`` and ``qgqtyp``; ``None`` otherwise.
        n_persons: person records read.
        n_units: unit records read.
        block_attributes: per block (the hierarchy's order), the optional unit columns
            present (``aian_area``, ``place``; ``""`` for none).
        streamed: always ``True``: no whole file was ever held (kept for callers).
        parts: the part tasks the input was read in.
        readers: the processes (host/PID) that read them.
        part_costs: per part, ``(persons, seconds, cpu_seconds)``.
        input_sha256: the SHA-256 of each input file read, by path relative to the
            CEF directory (:attr:`censusdp.io.cef_files.CEFInput.sha256`).
    """

    hierarchy: Hierarchy
    invariants: Invariants
    persons: sp.csr_matrix
    housing_units: sp.csr_matrix | None
    n_persons: int
    n_units: int
    block_attributes: dict[str, np.ndarray] = field(default_factory=dict)
    streamed: bool = True
    parts: int = 1
    readers: frozenset[str] = frozenset()
    part_costs: tuple[tuple[int, float, float], ...] = ()
    input_sha256: dict[str, str] = field(default_factory=dict)
    households: sp.csr_matrix | None = None
    tenvacgq: np.ndarray | None = None
    dhc_households: sp.csr_matrix | None = None


@dataclass
class _Group:
    ref: GroupRef
    rows: int
    lo: str | None  # geocode statistics; None when absent
    hi: str | None
    nulls: bool


@dataclass(frozen=True, eq=False)
class _Footers:
    """What the footers of both inputs say, read before any part is planned: the files
    of persons and units (``files``, their ``stamps`` and ``labels``), their row groups
    with geocode statistics (``groups``) and whether every group has them in geocode
    order (``ordered``); indexed by ``PERSONS`` and ``UNITS``."""

    files: list[list[Path]]
    stamps: dict[str, Stamp]
    labels: tuple[str, str]
    groups: list[list[_Group]]
    ordered: bool


def _footers(
    files: list[Path], stamps: dict[str, Stamp], problems: list[str]
) -> tuple[list[_Group], pa.Schema | None, bool]:
    """Row groups of ``files`` with their geocode statistics, the common schema, and
    whether the geocode column is a string column with statistics in every group."""
    groups: list[_Group] = []
    first: pa.Schema | None = None
    first_path = files[0] if files else None
    ordered = True
    for f, path in enumerate(files):
        try:
            with parquet_input(path, stamps[str(path)]) as pf:
                schema, md = pf.schema_arrow, pf.metadata
        except InputError as exc:
            problems.append(str(exc))
            continue
        except (OSError, pa.ArrowException) as exc:
            problems.append(f"{path}: not a readable Parquet file ({exc})")
            continue
        if first is None:
            first, first_path = schema, path
        else:
            differs = schema_difference(path, schema, first_path, first)
            if differs is not None:
                problems.append(differs)
                continue
        names = [md.schema.column(j).path for j in range(md.num_columns)]
        gi = names.index("geocode") if "geocode" in names else -1
        t = schema.field("geocode").type if "geocode" in schema.names else None
        if t is not None and pa.types.is_dictionary(t):
            t = t.value_type
        if gi < 0 or not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            ordered = False
        at = 0
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            lo = hi = None
            nulls = True
            if gi >= 0:
                st = rg.column(gi).statistics
                if st is not None and st.has_min_max:
                    lo, hi = st.min, st.max
                    if isinstance(lo, bytes) or isinstance(hi, bytes):
                        lo, hi = None, None
                nulls = st is None or not st.has_null_count or st.null_count > 0
            if rg.num_rows and lo is None:
                ordered = False
            groups.append(
                _Group(GroupRef(f, g, at), rg.num_rows, lo, hi, rg.num_rows > 0 and nulls)
            )
            at += rg.num_rows
    return groups, first, ordered


def _ranges(persons: list[_Group], part_rows: int) -> list[str]:
    """Cut points of the geocode ranges: the first geocode of each row group of persons
    that would take the persons since the last cut past ``part_rows`` (so a part holds
    at most ``part_rows`` persons, or one row group)."""
    cuts: list[str] = []
    acc = 0
    for g in sorted((g for g in persons if g.rows), key=lambda g: g.lo or ""):
        if acc and acc + g.rows > part_rows and g.lo is not None and (not cuts or g.lo > cuts[-1]):
            cuts.append(g.lo)
            acc = 0
        acc += g.rows
    return cuts


def _meets(g: _Group, lo: str | None, hi: str | None, first: bool) -> bool:
    if not g.rows:
        return False
    if first and g.nulls:
        return True
    if g.lo is None or g.hi is None:
        return True
    return (lo is None or g.hi >= lo) and (hi is None or g.lo < hi)


def _plan(
    footers: _Footers,
    schema: str,
    optional: tuple[str, ...],
    part_rows: int,
    batch_rows: int,
    household_columns: tuple[str, ...] | None = None,
    tenure: bool = False,
    dhch: bool = False,
) -> list[CEFPart]:
    """The parts: geocode ranges cut at row groups of persons, of about ``part_rows``
    persons, or larger where smaller ones would read the row groups too many times
    (:data:`MAX_READS`); one part reading everything when the files have no geocode
    statistics or are not in geocode order. ``household_columns`` (not ``None``): the
    parts derive households, checking those household columns of the units; ``tenure``:
    the parts read and check the units' ``ten``, ``vacs`` and ``qgqtyp``; ``dhch``: the
    parts derive the 2020 DHC's households."""
    files, stamps, labels, groups = footers.files, footers.stamps, footers.labels, footers.groups
    ordered = footers.ordered

    def make(lo: str | None, hi: str | None, index: int) -> tuple[CEFPart, int]:
        picked = [[g for g in gs if _meets(g, lo, hi, index == 0)] for gs in groups]
        refs = (tuple(g.ref for g in picked[PERSONS]), tuple(g.ref for g in picked[UNITS]))
        # only the files the part reads travel with it (a directory may hold thousands)
        names = tuple(
            tuple((f, str(files[w][f])) for f in sorted({0} | {r.file for r in refs[w]}))
            for w in (PERSONS, UNITS)
        )
        marks = tuple(tuple(stamps[p] for _, p in names[w]) for w in (PERSONS, UNITS))
        part = CEFPart(
            names, labels, refs, lo, hi, index == 0, schema, optional, batch_rows, index, marks,
            households=household_columns is not None,
            household_columns=household_columns or (), tenure=tenure, dhch=dhch,
        )  # fmt: skip
        return part, sum(g.rows for gs in picked for g in gs)

    total = sum(g.rows for gs in groups for g in gs)
    size = part_rows
    while ordered and size < total:
        bounds = [None, *_ranges(groups[PERSONS], size), None]
        made = [make(bounds[i], bounds[i + 1], i) for i in range(len(bounds) - 1)]
        # a row group that meets several ranges is read by each of their parts: where
        # that would read the input more than MAX_READS times over (row groups larger
        # than the parts, or not in geocode order), make the parts larger
        if sum(r for _, r in made) <= MAX_READS * total:
            return [p for p, _ in made]
        size *= 2
    return [make(None, None, 0)[0]]


def _run(executor: Any, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Any]:
    return executor.map(fn, tasks) if executor is not None else map(fn, tasks)


def read_cef_blocks(
    directory: str | Path | CEFInput,
    geolevels: GeoLevels,
    schema: Schema,
    *,
    with_units: bool | str = True,
    executor: Any = None,
    part_rows: int = DEFAULT_PART_ROWS,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    progress: Progress = None,
) -> CEFBlocks:
    """Read, validate and aggregate a CEF directory in parts, on ``executor``.

    Args:
        directory: holds ``persons.parquet`` and ``units.parquet`` (files, or
            directories of part files); or those files already hashed
            (:func:`censusdp.io.cef_files.hash_input`), each read then checked to be
            the file hashed.
        geolevels: the levels of the hierarchy to build.
        schema: the schema of the person histogram.
        with_units: also build the housing-unit histogram (the unit run's input);
            ``"households"``: also derive every household from its persons, per part (a
            household lies in one unit, one block), into the ``household2010``
            histogram (:attr:`CEFBlocks.households`), checking ``rel`` and any
            household column of ``units.parquet`` as :func:`~censusdp.io.cef.read_cef`
            does; ``"dhch"``: the same into the 2020 DHC's ``dhch-2020`` histogram
            (:attr:`CEFBlocks.dhc_households`), from ``rel``, ``relgq`` and the units'
            ``ten``, ``vacs`` and ``qgqtyp`` (:data:`DHCH_INPUT_COLUMNS`).
        executor: runs the part tasks (:mod:`censusdp.execution`); ``None``: in this
            process.
        part_rows: persons per part, about (parts are cut at row groups).
        batch_rows: rows per batch read.
        progress: reports the parts read.

    Everything is in geocode order (the hierarchy's blocks are the sorted 16-digit block
    geocodes); a spine (:mod:`censusdp.data.spine`) is built from ``hierarchy.blocks``
    and ``block_attributes`` and reorders the histograms with its ``order``.

    Raises:
        InputError: naming every problem, exactly as :func:`~censusdp.io.cef.read_cef`;
            for households without a ``rel`` column (a DHC household run without any of
            :data:`DHCH_INPUT_COLUMNS`), one line naming it.
    """
    if part_rows < 1 or batch_rows < 1:
        raise InternalError(f"part_rows and batch_rows must be >= 1, got {part_rows}, {batch_rows}")
    source = directory if isinstance(directory, CEFInput) else hash_input(directory)
    directory = source.directory
    files = [list(source.files[PERSONS]), list(source.files[UNITS])]
    labels = (str(directory / INPUT_NAMES[0]), str(directory / INPUT_NAMES[1]))
    groups, schemas, ordered, problems = [], [], True, []
    for which in (PERSONS, UNITS):
        g, sch, o = _footers(files[which], source.stamps, problems)
        groups.append(g)
        schemas.append(sch)
        ordered = ordered and o
    if problems:
        raise InputError(f"invalid input in {directory}", problems)
    person_columns(schema, schemas[PERSONS].names, labels[PERSONS])  # one line if missing
    optional = tuple(k for k in OPTIONAL_UNIT_COLUMNS if k in schemas[UNITS].names)
    household_columns = None
    if with_units == "households":
        if "rel" not in schemas[PERSONS].names:
            raise InputError(
                f"{labels[PERSONS]}: missing column 'rel' (each person's relationship to the "
                "householder), which a household run needs"
            )
        household_columns = tuple(k for k in HOUSEHOLD_UNIT_COLUMNS if k in schemas[UNITS].names)
    unit_names = schemas[UNITS].names
    missing = [tenure_column_missing(labels[UNITS], c, unit_names)
               for c in missing_tenure_columns(unit_names)]  # fmt: skip
    if missing:
        raise InputError(f"invalid input in {directory}", missing)
    tenure = all(c in unit_names for c in TENURE_UNIT_COLUMNS)
    if with_units == "dhch":
        check_dhch_columns(schemas[PERSONS].names, unit_names, labels)
    footers = _Footers(files, source.stamps, labels, groups, ordered)
    parts = _plan(
        footers, schema.name, optional, part_rows, batch_rows, household_columns, tenure,
        dhch=with_units == "dhch",
    )  # fmt: skip
    results = []
    with task(progress, f"reading the CEF in {directory}", len(parts), unit="parts") as bar:
        for rec in _run(executor, read_cef_part, parts):
            results.append(rec)
            bar.advance()
    if not all(r["ok"] for r in results):
        _refuse(source, labels, results, executor, batch_rows)
    for which, key in ((PERSONS, "person_ids"), (UNITS, "unit_ids")):
        spans = sorted(r[key] for r in results if r[key] is not None)
        if any(b[0] <= a[1] for a, b in zip(spans, spans[1:], strict=False)):
            dups = _duplicate_ids(source, labels, which, executor, batch_rows)
            if dups.count:
                _refuse(source, labels, results, executor, batch_rows)
    blocks = _assemble(results, geolevels, with_units, len(parts))
    return dataclasses.replace(blocks, input_sha256=dict(source.sha256))


def _assemble(
    results: list[dict[str, Any]], geolevels: GeoLevels, with_units: bool | str, n_parts: int
) -> CEFBlocks:
    """The parts' blocks and histograms, stacked in geocode order."""
    codes = np.concatenate([r["blocks"] for r in results])
    if codes.size > 1 and not (np.diff(codes) > 0).all():
        raise InternalError("the parts' blocks are not in increasing geocode order")
    blocks = _digits(codes, BLOCK_GEOCODE_LENGTH)
    hierarchy = Hierarchy.from_blocks(blocks, geolevels)
    if not np.array_equal(hierarchy.blocks, blocks):
        raise InternalError("the hierarchy's blocks are not the input's sorted blocks")
    households = _stack(results, "households") if results[0].get("households") is not None else None
    persons = _stack(results)
    population = np.asarray(persons.sum(axis=1), dtype=np.int64).ravel()
    vacant = np.concatenate([r["hu_vacant"] for r in results])
    occupied = np.concatenate([r["hu_occupied"] for r in results])
    gq = np.concatenate([r["gq_facilities"] for r in results])
    inv = Invariants(hierarchy.blocks, population, vacant + occupied, gq, geolevels.state_level)
    hu = sp.csr_matrix(np.column_stack([vacant, occupied])) if with_units else None
    attributes = {
        k: _attribute_strings(np.concatenate([r["attributes"][k] for r in results]), k)
        for k in results[0]["attributes"]
    }
    return CEFBlocks(
        hierarchy,
        inv,
        persons,
        hu,
        sum(r["n_persons"] for r in results),
        sum(r["n_units"] for r in results),
        attributes,
        parts=n_parts,
        readers=frozenset(r["reader"] for r in results),
        part_costs=tuple((r["n_persons"], r["seconds"], r["cpu_seconds"]) for r in results),
        households=households,
        dhc_households=_stack(results, "dhch") if results[0].get("dhch") is not None else None,
        tenvacgq=(
            np.concatenate([r["tenvacgq"] for r in results])
            if results[0].get("tenvacgq") is not None
            else None
        ),
    )


DHCH_INPUT_COLUMNS: tuple[tuple[int, str, str], ...] = (
    (PERSONS, "rel", "each person's relationship to the householder"),
    (PERSONS, "relgq", "the 2020 relationship or GQ type"),
    (UNITS, "ten", "each unit's tenure"),
    (UNITS, "vacs", "each unit's vacancy status"),
    (UNITS, "qgqtyp", "each unit's GQ type"),
)
"""The input columns the 2020 DHC's household run reads: (file, column, what it is)."""


def check_dhch_input(directory: str | Path) -> None:
    """The columns of :data:`DHCH_INPUT_COLUMNS` checked from the footers of the CEF in
    ``directory`` (its first persons and units files), before anything is read: a one-line
    :class:`~censusdp.errors.InputError` naming the first missing one. An input whose
    files the reader's rule refuses, or cannot open, passes here: the reader names it."""
    directory = Path(directory)
    files, problems = input_files(directory)
    if problems or not all(files):
        return
    try:
        names = [pq.read_schema(fs[0]).names for fs in files]
    except (OSError, pa.ArrowException):
        return
    labels = (str(directory / INPUT_NAMES[0]), str(directory / INPUT_NAMES[1]))
    check_dhch_columns(names[PERSONS], names[UNITS], labels)


def check_dhch_columns(
    person_names: list[str], unit_names: list[str], labels: tuple[str, str]
) -> None:
    """Raise a one-line :class:`~censusdp.errors.InputError` naming the file and the first
    column of :data:`DHCH_INPUT_COLUMNS` the input lacks (``labels``: how the persons and
    units files are named)."""
    names = (person_names, unit_names)
    for which, column, what in DHCH_INPUT_COLUMNS:
        if column not in names[which]:
            raise InputError(
                f"{labels[which]}: missing column {column!r} ({what}), which the 2020 "
                "DHC's household run reads (docs/dhc-2020.md)"
            )


def _stack(results: list[dict[str, Any]], key: str = "persons") -> sp.csr_matrix:
    """The parts' histograms (``persons``, ``households`` or ``dhch``) one under the other, each
    part's freed as it is copied (the driver holds the histogram once, not twice as
    ``sp.vstack`` would)."""
    nnz = sum(r[key].nnz for r in results)
    rows = sum(r[key].shape[0] for r in results)
    cells = results[0][key].shape[1]
    data = np.empty(nnz, dtype=np.int64)
    indices = np.empty(nnz, dtype=np.int32)
    indptr = np.zeros(rows + 1, dtype=np.int64)
    at = row = 0
    for r in results:
        m = r.pop(key)
        n, k = m.nnz, m.shape[0]
        data[at : at + n] = m.data
        indices[at : at + n] = m.indices
        indptr[row + 1 : row + k + 1] = m.indptr[1:] + at
        at, row = at + n, row + k
        del m
    return sp.csr_matrix((data, indices, indptr), shape=(rows, cells))


def _duplicate_ids(
    source: CEFInput, labels: tuple[str, str], which: int, executor: Any, batch_rows: int
) -> Found:
    """The second pass of the id check over every file of input ``which``."""
    paths = tuple(str(p) for p in source.files[which])
    stamps = tuple(source.stamps[p] for p in paths)
    total = 0
    for p, st in zip(paths, stamps, strict=True):
        with parquet_input(p, st) as pf:
            total += pf.metadata.num_rows
    n = max(1, math.ceil(total / ID_BUCKET_ROWS))
    column = ("person_id", "unit_id")[which]
    tasks = [
        IdBucket(paths, labels[which], column, b, n, batch_rows, which, stamps) for b in range(n)
    ]
    found = list(_run(executor, ids_bucket, tasks))
    lines = [f.line for f in found if f.line is not None]
    if lines:  # a file that changed since it was hashed
        raise InputError(f"invalid input in {source.directory}", lines[:1])
    return _merge(found)[0] if n else Found(())


def _merge(found: list[Found]) -> list[Found]:
    """One :class:`Found` per kind of problem, in :func:`~censusdp.io.cef.read_cef`'s
    order: the rows of all parts in file order, the first ones kept, all counted."""
    by_key: dict[tuple[Any, ...], Found] = {}
    for f in found:
        if f.line is None and f.count == 0:
            continue
        m = by_key.setdefault(f.key, Found(f.key, line=f.line))
        m.rows.extend(f.rows)
        m.count += f.count
    # a column with nulls is reported by its nulls alone, as the whole-file reader does
    nulls = {(k[1], k[2]) for k in by_key if k[0][0] == 0 and k[3] == "is null"}
    out = []
    for key in sorted(by_key, key=lambda k: (k[0], str(k[1:]))):
        if key[0][0] == 0 and (key[1], key[2]) in nulls and key[3] != "is null":
            continue
        m = by_key[key]
        m.rows = sorted(m.rows, key=lambda r: (r[0], r[1]))[:MAX_PER_RULE]
        out.append(m)
    return out or [Found(())]


def _lines(found: list[Found], files: list[list[Path]], labels: tuple[str, str]) -> list[str]:
    lines = []
    for f in found:
        if f.line is not None:
            lines.append(f.line)
            continue
        if not f.count:
            continue
        _, label, column, rule = f.key
        paths = files[labels.index(label)]
        for fi, row, v in f.rows:
            lines.append(f"{paths[fi]}, column {column!r}, row {row}: value {v!r} {rule}")
        if f.count > MAX_PER_RULE:
            lines.append(f"{label}, column {column!r}: {f.count - MAX_PER_RULE} more rows {rule}")
    return lines


def _refuse(
    source: CEFInput,
    labels: tuple[str, str],
    results: list[dict[str, Any]],
    executor: Any,
    batch_rows: int,
) -> None:
    """Raise the :class:`InputError` naming every problem, in the whole-file reader's
    words and order (the stage that found problems first: unreadable files, then the
    per-column rules, then the rules across records)."""
    directory = source.directory
    files = [list(fs) for fs in source.files]
    for stage in (-1, 0):
        found = [f for r in results if r.get("stage") == stage for f in r["found"]]
        if found:
            lines = _lines(_merge(found), files, labels)
            raise InputError(f"invalid input in {directory}", lines)
    dups = [_duplicate_ids(source, labels, w, executor, batch_rows) for w in (PERSONS, UNITS)]
    if dups[UNITS].count:
        raise InputError(f"invalid input in {directory}", _lines(_merge(dups), files, labels))
    found = [f for r in results for f in r.get("found", [])] + dups
    found += _across_parts(source, labels, results, batch_rows)
    lines = _lines(_merge(found), files, labels)
    if not lines:
        raise InternalError("a part of the input failed its checks, but no problem was found")
    raise InputError(f"invalid input in {directory}", lines)


def _across_parts(
    source: CEFInput,
    labels: tuple[str, str],
    results: list[dict[str, Any]],
    batch_rows: int,
) -> list[Found]:
    """The person-unit rules for persons whose unit is in no part of theirs (looked up in
    every units file), and occupied units whose residents all live in other parts."""
    foreign = [r["foreign"] for r in results if r.get("foreign") is not None]
    lonely = [r["lonely"] for r in results if r.get("lonely") is not None]
    cat = {
        k: np.concatenate([f[k] for f in foreign]) if foreign else np.zeros(0)
        for k in ("file", "row", "person_id", "unit_id", "geocode", "hhgq")
    }
    wanted = np.unique(cat["unit_id"]).astype(np.int64)
    units = _lookup_units(source, wanted, batch_rows)
    out: list[Found] = []
    if cat["unit_id"].size:
        persons = {k: cat[k] for k in ("person_id", "unit_id", "geocode", "hhgq")}
        unit_row = unit_rows_of(units["unit_id"], persons["unit_id"].astype(np.int64))
        rules = person_unit_rules(persons, units, unit_row, labels[PERSONS], labels[UNITS])
        where = (cat["file"].astype(np.int32), cat["row"].astype(np.int64))
        for i, (_, column, mask, values, rule) in enumerate(rules[:-1]):
            idx = np.flatnonzero(mask)
            if idx.size:
                out.append(_rows_found(rule_rank(1, 1, i), labels[PERSONS], column, rule, idx,
                                       where, values))  # fmt: skip
    referenced = units["unit_id"]  # units that exist and have a resident in another part
    for lon in lonely:
        idx = np.flatnonzero(~np.isin(lon["unit_id"], referenced))
        if idx.size:
            where = (lon["file"], lon["row"])
            out.append(_rows_found(rule_rank(1, 1, 6), labels[UNITS], "occupied", OCCUPIED_RULE,
                                   idx, where, lon["unit_id"]))  # fmt: skip
    return out


def _rows_found(
    rank: tuple[int, int, int],
    label: str,
    column: str,
    rule: str,
    idx: np.ndarray,
    where: tuple[np.ndarray, np.ndarray],
    values: np.ndarray,
) -> Found:
    keep = idx[np.lexsort((where[1][idx], where[0][idx]))][:MAX_PER_RULE]
    rows = [
        (int(where[0][i]), int(where[1][i]), values[i].item() if isinstance(values[i], np.generic)
         else values[i])
        for i in keep
    ]  # fmt: skip
    return Found((rank, label, column, rule), rows, int(idx.size))


def _lookup_units(source: CEFInput, wanted: np.ndarray, batch_rows: int) -> dict[str, np.ndarray]:
    """The units with the ``wanted`` ids (sorted, unique), read batch by batch."""
    cols: dict[str, list[np.ndarray]] = {"unit_id": [], "geocode": [], "gqtype": [], "occupied": []}
    for path in source.files[UNITS] if wanted.size else ():
        with parquet_input(path, source.stamps[str(path)]) as pf:
            for batch in pf.iter_batches(batch_size=batch_rows, columns=list(cols)):
                uid = np.asarray(batch.column("unit_id")).astype(np.int64, copy=False)
                hit = np.flatnonzero(np.isin(uid, wanted))
                if hit.size:
                    t = batch.take(pa.array(hit))
                    cols["unit_id"].append(uid[hit])
                    cols["geocode"].append(
                        np.asarray(t.column("geocode").to_pylist(), dtype=object).astype("U16")
                    )
                    cols["gqtype"].append(np.asarray(t.column("gqtype")).astype(np.int64))
                    cols["occupied"].append(
                        np.asarray(t.column("occupied").to_pylist(), dtype=bool)
                    )
    dtypes = {"unit_id": np.int64, "geocode": "U16", "gqtype": np.int64, "occupied": bool}
    return {k: np.concatenate(v) if v else np.zeros(0, dtype=dtypes[k]) for k, v in cols.items()}


def _digits(codes: np.ndarray, width: int) -> np.ndarray:
    """Non-negative integers as ``width``-digit strings (leading zeros kept)."""
    if codes.size == 0:
        return np.zeros(0, dtype=f"U{width}")
    return np.char.zfill(codes.astype(f"U{width}"), width)


def _attribute_strings(codes: np.ndarray, name: str) -> np.ndarray:
    width = OPTIONAL_UNIT_COLUMNS[name][1][0]
    return np.where(codes < 0, "", _digits(np.maximum(codes, 0), width)).astype(f"U{width}")
