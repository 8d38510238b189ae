"""One part of the CEF read where a task runs: a geocode range of both files, to blocks.

:func:`censusdp.io.cef_stream.read_cef_blocks` cuts the input into :class:`CEFPart`
tasks, each a half-open range ``[lo, hi)`` of block geocodes (a county or a row group
of persons, never part of a block), and an executor runs :func:`read_cef_part` on each:
in the calling process, on a pool, or on Spark's executors. A part reads, from the row
groups whose geocode statistics meet its range, the persons and units in it (both
files sorted by geocode, as the generator and a range-partitioned Spark job write them,
make that one or two row groups a part), checks them with the rules of
:mod:`censusdp.io.cef` and returns only what the driver needs: its blocks' person
histogram (sparse), per block the housing units (vacant, occupied), the occupied
group-quarters facilities by type and the block attributes, and the range of its
person and unit ids (for uniqueness across parts, :func:`ids_bucket`).

On the first problem found, the part reads its rows again as whole columns and
describes every problem with the functions of :mod:`censusdp.io.cef`, by file, column,
row (of the file, not of the part) and value. What one part cannot judge alone it
returns for the driver: persons whose unit is not in the part (the unit may exist in
another part, in another block), and occupied units without a resident in the part.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import scipy.sparse as sp

from censusdp.data.geography import BLOCK_GEOCODE_LENGTH
from censusdp.data.histograms import person_cells
from censusdp.data.invariants import N_HHGQ
from censusdp.data.schema import get_schema
from censusdp.data.schema_dhc import DHC_UNITS_2020
from censusdp.data.units_dhc import TENURE_COLUMNS, tenvacgq_of
from censusdp.errors import InputError
from censusdp.io.cef import (
    MAX_PER_RULE,
    OPTIONAL_UNIT_COLUMNS,
    UNIT_COLUMNS,
    check_columns,
    outside,
    person_columns,
    person_unit_rules,
    same_within_block,
    type_problem,
    unit_rows_of,
)
from censusdp.io.cef_files import Stamp, parquet_input
from censusdp.io.cef_households import (
    HOUSEHOLD_UNIT_COLUMNS,
    OPTIONAL_PERSON_COLUMNS,
    TENURE_UNIT_COLUMNS,
    dhch_type_rule,
    household_column_rules,
    household_input_rules,
    households_of,
    qgqtyp_relgq_rule,
    relgq_householder_rule,
    relgq_rules,
    tenure_rules,
)
from censusdp.io.cef_part_households import part_dhch, part_households

__all__ = [
    "CEFPart",
    "Found",
    "GroupRef",
    "IdBucket",
    "ids_bucket",
    "read_cef_part",
    "rule_rank",
]

# pyarrow imports pandas lazily the first time an array is turned into a NumPy array,
# and a SIGTERM arriving during that import is lost there (the CLI's handler, which
# removes unfinished output, never sees it); do that import now, before any output exists
pa.array([0]).to_numpy()

PERSONS, UNITS = 0, 1
"""Which file a problem or a row group belongs to."""

_RULE_NAMES = (
    "not a unit",
    "other block",
    "gq in a housing unit",
    "household in a facility",
    "other facility type",
    "in a vacant unit",
    "occupied without persons",
)
"""The rules of :func:`censusdp.io.cef.person_unit_rules`, in its order."""


@dataclass(frozen=True)
class GroupRef:
    """One row group: ``file`` (index into the part's files), ``group``, and ``offset``,
    the file row of its first row."""

    file: int
    group: int
    offset: int


@dataclass(frozen=True, eq=False)
class CEFPart:
    """One task of the input read.

    Attributes:
        files: per input, ``(index, path)`` of the files the part reads (the first
            file of the input always, for its schema): the index is the file's place
            in the input (one file, or the part files of a directory in name order).
        labels: how messages name the two inputs (``DIR/persons.parquet``, ...).
        groups: per input, the row groups to read.
        lo, hi: the geocode range ``lo <= geocode < hi`` (``None``: unbounded);
            both ``None`` reads every row.
        nulls: this part also owns rows whose geocode is null.
        schema: the person histogram's schema name.
        optional: the optional unit columns present.
        batch_rows: rows per batch read.
        index: the part's place in the plan.
        stamps: per input, the :class:`~censusdp.io.cef_files.Stamp` of each of
            ``files`` when it was hashed: every read checks it is still that file.
        households: also derive the part's households (``rel`` is read and checked,
            :mod:`censusdp.io.cef_households`) into a ``household2010`` histogram.
        household_columns: the household columns ``units.parquet`` carries, each
            checked against the household its unit's persons give.
        tenure: ``units.parquet`` carries the 2020 DHC's ``ten``, ``vacs`` and
            ``qgqtyp``: the part reads and checks them
            (:func:`censusdp.io.cef_households.tenure_rules`) and counts its units by
            ``tenvacgq``.
        dhch: also derive the part's households in the 2020 DHC's ``dhch-2020``
            schema (``rel`` and ``relgq`` read and checked, ``tenure`` needed).
    """

    files: tuple[tuple[tuple[int, str], ...], tuple[tuple[int, str], ...]]
    labels: tuple[str, str]
    groups: tuple[tuple[GroupRef, ...], tuple[GroupRef, ...]]
    lo: str | None
    hi: str | None
    nulls: bool
    schema: str
    optional: tuple[str, ...]
    batch_rows: int
    index: int = 0
    stamps: tuple[tuple[Stamp, ...], tuple[Stamp, ...]] = ((), ())
    households: bool = False
    household_columns: tuple[str, ...] = ()
    tenure: bool = False
    dhch: bool = False

    def stamp(self, which: int, file: int) -> Stamp | None:
        """The stamp of file ``file`` (its index in the input) of input ``which``."""
        for (f, _), st in zip(self.files[which], self.stamps[which], strict=False):
            if f == file:
                return st
        return None


class _Fallback(Exception):
    """The fast checks found something: describe the part's problems."""


class _Unreadable(Exception):
    """A file of the part could not be read (a damaged page, a vanished part file, a
    file replaced since it was hashed)."""

    def __init__(self, path: str, exc: Exception) -> None:
        line = (
            str(exc)
            if isinstance(exc, InputError)
            else f"{path}: not a readable Parquet file ({exc})"
        )
        super().__init__(line)


@dataclass
class Found:
    """Problems of one kind, ``key = (rank, file label, column, rule)``: the first
    :data:`~censusdp.io.cef.MAX_PER_RULE` rows as ``(file index, row, value)``, how
    many rows break it, or a whole ``line`` (a missing column, a wrong type)."""

    key: tuple[Any, ...]
    rows: list[tuple[int, int, Any]] = field(default_factory=list)
    count: int = 0
    line: str | None = None


def rule_rank(stage: int, which: int, position: int) -> tuple[int, int, int]:
    """The order :func:`~censusdp.io.cef.read_cef` reports problems in: ``stage`` 0 the
    per-column rules (``which`` file, ``position`` its column), 1 the rules across
    records (``which`` 0 duplicate ids, 1 the person-unit rules, 2 block attributes)."""
    return (stage, which, position)


class _Collector:
    """The ``problems`` argument of :func:`censusdp.io.cef.check_columns` (and of the
    rules across records) for a part: rows become ``(file index, file row)`` through
    ``where`` (file label -> both arrays); ``columns`` gives each label's column
    positions (stage 0) and ``fixed`` the rank of the rule being checked (stage 1)."""

    def __init__(
        self, where: dict[str, tuple[np.ndarray, np.ndarray]], columns: dict[str, dict[str, int]]
    ) -> None:
        self.where = where
        self.columns = columns
        self.fixed: tuple[int, int, int] | None = None
        self.found: list[Found] = []

    def _rank(self, file: str, column: str) -> tuple[int, int, int]:
        if self.fixed is not None:
            return self.fixed
        which = list(self.where).index(file)
        return rule_rank(0, which, self.columns[file].get(column, len(self.columns[file])))

    def rows(self, file: str, column: str, mask: np.ndarray, values: np.ndarray, rule: str) -> None:
        """Keep the first rows breaking ``rule`` and count them all."""
        idx = np.flatnonzero(mask)
        if idx.size == 0:
            return
        fidx, frow = self.where[file]
        keep = idx[:MAX_PER_RULE]
        rows = [
            (int(fidx[r]), int(frow[r]), v.item() if isinstance(v, np.generic) else v)
            for r, v in zip(keep, values[keep], strict=True)
        ]
        self.found.append(Found((self._rank(file, column), file, column, rule), rows, idx.size))

    def add(self, line: str) -> None:
        """A whole-column problem: ``FILE: missing column 'c' ...`` or
        ``FILE, column 'c': type ...``."""
        file = next(f for f in self.where if line.startswith(f))
        column = line.split("'")[1]
        self.found.append(Found((self._rank(file, column), file, column, line), line=line))


def _plain(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    return arr


def _in_range(part: CEFPart, batch: pa.RecordBatch) -> np.ndarray | None:
    """Which rows of ``batch`` are the part's (``None``: all of them)."""
    if part.lo is None and part.hi is None:
        return None
    g = _plain(batch.column("geocode"))
    mask = None
    if part.lo is not None:
        mask = pc.greater_equal(g, part.lo)
    if part.hi is not None:
        upper = pc.less(g, part.hi)
        mask = upper if mask is None else pc.and_(mask, upper)
    return np.asarray(pc.fill_null(mask, part.nulls), dtype=bool)


def _batches(
    part: CEFPart, which: int, columns: list[str] | None
) -> Iterator[tuple[pa.RecordBatch, int, np.ndarray]]:
    """The part's rows of input ``which``, batch by batch: ``(rows, file, file rows)``;
    each file opened once, and checked to be the file hashed when opened and when read."""
    files = dict(part.files[which])
    with contextlib.ExitStack() as stack:
        opened: dict[int, pq.ParquetFile] = {}
        for ref in part.groups[which]:
            at = ref.offset
            try:
                if ref.file not in opened:
                    stamp = part.stamp(which, ref.file)
                    opened[ref.file] = stack.enter_context(parquet_input(files[ref.file], stamp))
                batches = list(
                    opened[ref.file].iter_batches(
                        batch_size=part.batch_rows, row_groups=[ref.group], columns=columns
                    )
                )
            except (OSError, pa.ArrowException, InputError) as exc:
                raise _Unreadable(files[ref.file], exc) from None
            for batch in batches:
                mask = _in_range(part, batch)
                rows = np.arange(at, at + batch.num_rows, dtype=np.int64)
                at += batch.num_rows
                if mask is not None:
                    batch, rows = batch.filter(pa.array(mask)), rows[mask]
                yield batch, ref.file, rows
        try:
            stack.close()  # the files read are checked again: still the files hashed
        except InputError as exc:
            raise _Unreadable("", exc) from None


def _check_types(schema: pa.Schema, spec: dict) -> None:
    for name, (kind, _) in spec.items():
        if name not in schema.names or type_problem(kind, schema.field(name).type) is not None:
            raise _Fallback


def _ints(batch: pa.RecordBatch, name: str, rng: tuple[int, int] | None) -> np.ndarray:
    col = batch.column(name)
    if col.null_count:
        raise _Fallback
    values = np.asarray(col)
    if values.size and outside(values, rng)[0].any():
        raise _Fallback
    return values.astype(np.int64, copy=False)


_GEOCODE_PATTERN = f"^[0-9]{{{BLOCK_GEOCODE_LENGTH}}}$"


def _geocodes(batch: pa.RecordBatch) -> np.ndarray:
    """16-digit geocodes as int64 (their order is the strings' order)."""
    col = _plain(batch.column("geocode"))
    if len(col) == 0:
        return np.zeros(0, dtype=np.int64)
    if col.null_count or not pc.all(pc.match_substring_regex(col, _GEOCODE_PATTERN)).as_py():
        raise _Fallback
    return np.asarray(pc.cast(col, pa.int64()))


def _codes(batch: pa.RecordBatch, name: str, digits: int) -> np.ndarray:
    """An optional code column (``digits`` digits or ``""``) as int64, ``-1`` for none."""
    col = _plain(batch.column(name))
    pattern = f"^([0-9]{{{digits}}})?$"
    if col.null_count or (len(col) and not pc.all(pc.match_substring_regex(col, pattern)).as_py()):
        raise _Fallback
    filled = pc.if_else(pc.equal(col, ""), "-1", col)
    return np.asarray(pc.cast(filled, pa.int64()))


def _concat(chunks: list[np.ndarray], dtype: Any) -> np.ndarray:
    return np.concatenate(chunks).astype(dtype, copy=False) if chunks else np.zeros(0, dtype)


def _schema_of(part: CEFPart, which: int) -> pa.Schema:
    index, path = part.files[which][0]
    try:
        with parquet_input(path, part.stamp(which, index)) as pf:
            return pf.schema_arrow
    except (OSError, pa.ArrowException, InputError) as exc:
        raise _Unreadable(path, exc) from None


def _unit_spec(part: CEFPart) -> dict[str, tuple[str, tuple[int, int] | None]]:
    """The unit columns the part reads: the required, the block attributes present and,
    for a household part, the household columns present."""
    return {
        **UNIT_COLUMNS,
        **{k: OPTIONAL_UNIT_COLUMNS[k] for k in part.optional},
        **{k: HOUSEHOLD_UNIT_COLUMNS[k] for k in part.household_columns},
        **(TENURE_UNIT_COLUMNS if part.tenure else {}),
    }


def _person_spec(part: CEFPart) -> dict[str, tuple[str, tuple[int, int] | None]]:
    """The person columns the part reads: those of every run and those its schema reads
    (``citizen``; the driver has checked the file has them), and ``rel`` for a household
    part."""
    spec = dict(
        person_columns(
            get_schema(part.schema), _schema_of(part, PERSONS).names, part.labels[PERSONS]
        )
    )
    if part.households or part.dhch:
        spec["rel"] = OPTIONAL_PERSON_COLUMNS["rel"]
    if part.dhch:
        spec["relgq"] = OPTIONAL_PERSON_COLUMNS["relgq"]
    return spec


def _fast_units(part: CEFPart) -> dict[str, Any]:
    spec = _unit_spec(part)
    _check_types(_schema_of(part, UNITS), spec)
    ids, geo, gqtype, occupied = [], [], [], []
    attrs: dict[str, list[np.ndarray]] = {k: [] for k in part.optional}
    hh_cols: dict[str, list[np.ndarray]] = {k: [] for k in part.household_columns}
    ten_cols: dict[str, list[np.ndarray]] = {k: [] for k in TENURE_UNIT_COLUMNS if part.tenure}
    for batch, _, _ in _batches(part, UNITS, list(spec)):
        ids.append(_ints(batch, "unit_id", None))
        geo.append(_geocodes(batch))
        gqtype.append(_ints(batch, "gqtype", UNIT_COLUMNS["gqtype"][1]))
        occ = batch.column("occupied")
        if occ.null_count:
            raise _Fallback
        occupied.append(np.asarray(pc.cast(occ, pa.int8())) != 0)
        for k in part.optional:
            attrs[k].append(_codes(batch, k, OPTIONAL_UNIT_COLUMNS[k][1][0]))
        for k in part.household_columns:
            hh_cols[k].append(_ints(batch, k, HOUSEHOLD_UNIT_COLUMNS[k][1]))
        for k, chunks in ten_cols.items():
            chunks.append(_ints(batch, k, TENURE_UNIT_COLUMNS[k][1]))
    uid = _concat(ids, np.int64)
    blocks, block = np.unique(_concat(geo, np.int64), return_inverse=True)
    block = block.astype(np.int64)
    per_block = {}
    if block.size:
        order = np.argsort(block, kind="stable")
        starts = np.flatnonzero(np.r_[True, np.diff(block[order]) != 0])
        for k, chunks in attrs.items():
            sv = _concat(chunks, np.int64)[order]
            lo, hi = np.minimum.reduceat(sv, starts), np.maximum.reduceat(sv, starts)
            if (lo != hi).any():
                raise _Fallback  # a block attribute differs between units of one block
            per_block[k] = lo
    else:
        per_block = {k: np.zeros(0, dtype=np.int64) for k in attrs}
    order = np.argsort(uid, kind="stable")
    sorted_ids = uid[order]
    if sorted_ids.size > 1 and (sorted_ids[1:] == sorted_ids[:-1]).any():
        raise _Fallback
    units = {
        "gqtype": _concat(gqtype, np.int8),
        "occupied": _concat(occupied, bool),
        "tenure": {k: _concat(v, np.int64) for k, v in ten_cols.items()},
    }
    if part.tenure and any(r[2].any() for r in tenure_rules({**units, **units["tenure"]}, "")):
        raise _Fallback
    return {
        **units,
        "ids": sorted_ids,
        "order": order,
        "block": block,
        "blocks": blocks,
        "attributes": per_block,
        "household_columns": {k: _concat(v, np.int64) for k, v in hh_cols.items()},
    }


_HOUSEHOLD_PERSON_COLUMNS = ("unit", "hhgq", "rel", "sex", "age", "hispanic", "cenrace")
"""What a household part keeps of its persons to derive their households."""


def _checked(histogram: sp.csr_matrix | None) -> sp.csr_matrix:
    """A part's household histogram; :class:`_Fallback` when a rule broke (``None``)."""
    if histogram is None:
        raise _Fallback
    return histogram


def _fast(part: CEFPart) -> dict[str, Any]:
    """Read and check the part in bulk; raise :class:`_Fallback` at the first problem."""
    units = _fast_units(part)
    schema = get_schema(part.schema)
    spec = _person_spec(part)
    _check_types(_schema_of(part, PERSONS), spec)
    nb = units["blocks"].size
    keys, pids = [], []
    keep = (*_HOUSEHOLD_PERSON_COLUMNS, "relgq") if part.dhch else _HOUSEHOLD_PERSON_COLUMNS
    kept: dict[str, list[np.ndarray]] = {k: [] for k in keep}
    relgq: list[np.ndarray] = []  # (unit, hhgq, relgq) of each batch, for relgq_rules
    has_resident = np.zeros(units["ids"].size, dtype=bool)
    for batch, _, _ in _batches(part, PERSONS, list(spec)):
        m = batch.num_rows
        cols = {
            name: _ints(batch, name, rng) for name, (kind, rng) in spec.items() if kind == "int"
        }
        geo = _geocodes(batch)
        pids.append(cols["person_id"])
        if m == 0:
            continue
        if units["ids"].size == 0:
            raise _Fallback
        pos = np.minimum(np.searchsorted(units["ids"], cols["unit_id"]), units["ids"].size - 1)
        if (units["ids"][pos] != cols["unit_id"]).any():
            raise _Fallback  # the person's unit is not in this part
        unit = units["order"][pos]
        block = units["block"][unit]
        if (units["blocks"][block] != geo).any():
            raise _Fallback  # a person in another block than their unit
        # hhgq 0 needs a housing unit, g > 0 a facility of type g: hhgq == gqtype
        if (cols["hhgq"] != units["gqtype"][unit]).any() or not units["occupied"][unit].all():
            raise _Fallback
        has_resident[unit] = True
        keys.append(block * schema.size + person_cells(cols, schema, m))
        if part.households or part.dhch:
            for k in kept:
                kept[k].append(unit if k == "unit" else cols[k])
        if "relgq" in cols:
            relgq.append(np.stack([unit, cols["hhgq"], cols["relgq"]]))
    if (units["occupied"] & ~has_resident).any():
        raise _Fallback  # an occupied unit without a person (here)
    if relgq:
        unit, hhgq, rq = np.concatenate(relgq, axis=1)
        if any(r[2].any() for r in relgq_rules(rq, hhgq, unit, units["ids"].size, "")):
            raise _Fallback
        if (
            part.tenure
            and qgqtyp_relgq_rule(rq, hhgq, unit, units["tenure"]["qgqtyp"], "")[2].any()
        ):
            raise _Fallback
    pid = np.sort(_concat(pids, np.int64))
    if pid.size > 1 and (pid[1:] == pid[:-1]).any():
        raise _Fallback
    key = _concat(keys, np.int64)
    uniq, counts = np.unique(key, return_counts=True)
    rows, cells = np.divmod(uniq, schema.size)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=nb))])
    hist = sp.csr_matrix(
        (counts.astype(np.int64), cells.astype(np.int32), indptr.astype(np.int64)),
        shape=(nb, schema.size),
    )
    block, gqtype, occupied = units["block"], units["gqtype"].astype(np.int64), units["occupied"]
    is_hu = gqtype == 0
    occ_gq = ~is_hu & occupied
    gq = np.zeros((nb, N_HHGQ), dtype=np.int64)
    np.add.at(gq, (block[occ_gq], gqtype[occ_gq]), 1)
    households = None
    if part.households or part.dhch:
        people = {k: _concat(v, np.int64) for k, v in kept.items()}
    if part.households:
        households = _checked(part_households(units, people))
    tenvacgq = None
    if part.tenure:
        level = tenvacgq_of(*(units["tenure"][k] for k in TENURE_COLUMNS))
        tenvacgq = np.zeros((nb, DHC_UNITS_2020.size), dtype=np.int64)
        np.add.at(tenvacgq, (block, level), 1)
    return {
        "households": households,
        "dhch": _checked(part_dhch(units, people)) if part.dhch else None,
        "tenvacgq": tenvacgq,
        "blocks": units["blocks"],
        "attributes": units["attributes"],
        "persons": hist,
        "hu_vacant": np.bincount(block[is_hu & ~occupied], minlength=nb).astype(np.int64),
        "hu_occupied": np.bincount(block[is_hu & occupied], minlength=nb).astype(np.int64),
        "gq_facilities": gq,
        "n_persons": int(pid.size),
        "n_units": int(units["ids"].size),
        "person_ids": (int(pid[0]), int(pid[-1])) if pid.size else None,
        "unit_ids": (int(units["ids"][0]), int(units["ids"][-1])) if units["ids"].size else None,
    }


def _table(part: CEFPart, which: int) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """The part's rows of input ``which`` as one table (every column), with each row's
    file index and file row."""
    batches, fidx, frow = [], [], []
    for batch, f, rows in _batches(part, which, None):
        batches.append(batch)
        fidx.append(np.full(rows.size, f, dtype=np.int32))
        frow.append(rows)
    schema = _schema_of(part, which)
    table = pa.Table.from_batches(batches, schema=schema) if batches else schema.empty_table()
    return table, _concat(fidx, np.int32), _concat(frow, np.int64)


def _describe(part: CEFPart) -> dict[str, Any]:
    """Every problem of the part, by file row (the part's rows read again, whole)."""
    pt, pfile, prow = _table(part, PERSONS)
    ut, ufile, urow = _table(part, UNITS)
    plabel, ulabel = part.labels
    spec_p, spec_u = _person_spec(part), _unit_spec(part)
    positions = {
        plabel: {c: i for i, c in enumerate(spec_p)},
        ulabel: {c: i for i, c in enumerate(spec_u)},
    }
    found = _Collector({plabel: (pfile, prow), ulabel: (ufile, urow)}, positions)
    persons = check_columns(pt, spec_p, plabel, found)
    units = check_columns(ut, spec_u, ulabel, found)
    out: dict[str, Any] = {"found": found.found, "stage": 0}
    if found.found:
        return out
    del pt, ut
    out["stage"] = 1
    unit_row = unit_rows_of(units["unit_id"], persons["unit_id"])
    rules = person_unit_rules(persons, units, unit_row, plabel, ulabel)
    for i, (file, column, mask, values, rule) in enumerate(rules):
        if i == 0:  # the unit is not in this part: the driver looks it up
            out["foreign"] = {
                "file": pfile[mask],
                "row": prow[mask],
                "person_id": persons["person_id"][mask],
                "unit_id": persons["unit_id"][mask],
                "geocode": persons["geocode"][mask],
                "hhgq": persons["hhgq"][mask],
            }
        elif i == len(rules) - 1:  # a resident may live in another part
            out["lonely"] = {
                "file": ufile[mask],
                "row": urow[mask],
                "unit_id": units["unit_id"][mask],
            }
        else:
            found.fixed = rule_rank(1, 1, i)
            found.rows(file, column, mask, values, rule)
    if part.households or part.dhch:
        _describe_households(persons, units, unit_row, part.labels, found)
    if "relgq" in persons:
        n_units = int(units["unit_id"].size)
        for i, (file, column, mask, values, rule) in enumerate(
            relgq_rules(persons["relgq"], persons["hhgq"], unit_row, n_units, plabel)
        ):
            found.fixed = rule_rank(1, 1, 100 + i)  # after the household rules
            found.rows(file, column, mask, values, rule)
        if "rel" in persons:
            found.fixed = rule_rank(1, 1, 199)
            found.rows(
                *relgq_householder_rule(persons["relgq"], persons["rel"], persons["hhgq"], plabel)
            )
    if part.tenure:
        _describe_tenure(persons, units, unit_row, part.labels, found)
    if part.dhch and not found.found:
        found.fixed = rule_rank(1, 1, 300)
        found.rows(*dhch_type_rule(persons, units, unit_row, ulabel))
    for j, name in enumerate(part.optional):
        found.fixed = rule_rank(1, 2, j)
        same_within_block(units["geocode"], units[name], name, ulabel, found)
    out["found"] = found.found
    return out


def _describe_tenure(
    persons: dict[str, np.ndarray],
    units: dict[str, np.ndarray],
    unit_row: np.ndarray,
    labels: tuple[str, str],
    found: _Collector,
) -> None:
    """The rules on ``ten``, ``vacs`` and ``qgqtyp`` (after those on ``relgq``), as the
    whole-file reader orders them."""
    rules = tenure_rules(units, labels[UNITS])
    if "relgq" in persons:
        rules.append(
            qgqtyp_relgq_rule(
                persons["relgq"], persons["hhgq"], unit_row, units["qgqtyp"], labels[0]
            )
        )
    for i, (file, column, mask, values, rule) in enumerate(rules):
        found.fixed = rule_rank(1, 1, 200 + i)
        found.rows(file, column, mask, values, rule)


def _describe_households(
    persons: dict[str, np.ndarray],
    units: dict[str, np.ndarray],
    unit_row: np.ndarray,
    labels: tuple[str, str],
    found: _Collector,
) -> None:
    """The household rules of :mod:`censusdp.io.cef_households` on the part's rows, in
    the whole-file reader's order (after the person-unit rules); the household columns
    of ``units.parquet`` are compared with the derived households only once every other
    rule holds."""
    plabel, ulabel = labels
    first = len(_RULE_NAMES)
    for i, (file, column, mask, values, rule) in enumerate(
        household_input_rules(persons, units, unit_row, plabel, ulabel)
    ):
        found.fixed = rule_rank(1, 1, first + i)
        found.rows(file, column, mask, values, rule)
    if found.found or (unit_row < 0).any():
        return
    households = households_of(persons, units, unit_row)
    for j, (file, column, mask, values, rule) in enumerate(
        household_column_rules(households, units, ulabel)
    ):
        found.fixed = rule_rank(1, 1, 2 * first + j)
        found.rows(file, column, mask, values, rule)


def read_cef_part(part: CEFPart) -> dict[str, Any]:
    """Read, check and aggregate one part of the input (see the module's description).

    Returns a small record: ``ok`` and, if the part is valid, its blocks (sorted int64
    geocodes), their attributes, the person histogram (``blocks x cells``), per block
    the vacant and occupied housing units and the occupied facilities by type, the
    counts and the ``(min, max)`` of its person and unit ids; otherwise ``found``
    (:class:`Found` problems, ``stage`` 0 or 1), ``foreign`` persons and ``lonely``
    units. Also ``cpu_seconds``, ``seconds`` and ``reader`` (host/PID).
    """
    t, c = time.perf_counter(), time.process_time()
    try:
        try:
            rec = {"ok": True, **_fast(part)}
        except _Fallback:
            rec = {"ok": False, **_describe(part)}
    except _Unreadable as exc:
        line = str(exc)
        rec = {"ok": False, "stage": -1, "found": [Found((rule_rank(-1, 0, 0), line), line=line)]}
    rec["index"] = part.index
    rec["cpu_seconds"] = time.process_time() - c
    rec["seconds"] = time.perf_counter() - t
    rec["reader"] = f"{socket.gethostname()}/{os.getpid()}"
    return rec


@dataclass(frozen=True)
class IdBucket:
    """The second pass of the id check: the ids of ``column`` in all ``files`` whose
    hash falls in ``bucket`` of ``buckets`` (every id with equal value lands in one)."""

    files: tuple[str, ...]
    label: str
    column: str
    bucket: int
    buckets: int
    batch_rows: int
    which: int
    stamps: tuple[Stamp, ...] = ()


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def ids_bucket(task: IdBucket) -> Found:
    """Duplicate ids of one hash bucket, as :func:`~censusdp.io.cef.validate_cef`
    reports them: every occurrence after the first (in file order), first rows kept; a
    file that is not the file hashed is a ``line``."""
    fidx, rows, ids = [], [], []
    for f, path in enumerate(task.files):
        at = 0
        stamp = task.stamps[f] if task.stamps else None
        try:
            with parquet_input(path, stamp) as pf:
                for batch in pf.iter_batches(batch_size=task.batch_rows, columns=[task.column]):
                    v = np.asarray(batch.column(0)).astype(np.int64, copy=False)
                    with np.errstate(over="ignore"):  # multiplicative hashing wraps by design
                        h = (v.astype(np.uint64) * _GOLDEN) >> np.uint64(32)
                        h %= np.uint64(task.buckets)
                    keep = np.flatnonzero(h == task.bucket)
                    fidx.append(np.full(keep.size, f, dtype=np.int32))
                    rows.append(keep + at)
                    ids.append(v[keep])
                    at += batch.num_rows
        except InputError as exc:
            return Found((rule_rank(-1, 0, 0), str(exc)), line=str(exc))
    v = _concat(ids, np.int64)
    f, r = _concat(fidx, np.int32), _concat(rows, np.int64)
    order = np.argsort(v, kind="stable")  # within equal ids: file order
    sv = v[order]
    dup = np.zeros(v.size, dtype=bool)
    if v.size > 1:
        dup[order[1:]] = sv[1:] == sv[:-1]
    idx = np.flatnonzero(dup)  # already in (file, row) order
    found = Found(
        (rule_rank(1, 0, task.which), task.label, task.column, "is a duplicate id"),
        [(int(f[i]), int(r[i]), int(v[i])) for i in idx[:MAX_PER_RULE]],
        int(idx.size),
    )
    return found
