"""Read the confidential input (CEF) as a stream of row groups, straight into block histograms.

:func:`censusdp.io.cef.read_cef` holds every column of both files in memory, geocodes as
16-character strings (and as Python objects while it validates them): 15 GB for
California's 37M persons. A release needs none of that once the input is aggregated, so
:func:`read_cef_blocks` never holds more than one row group of persons (the generator
writes one per county; any row-group layout works):

1. ``units.parquet`` is read batch by batch into compact arrays (unit id, block as an
   int64 geocode, type, occupancy; 18 bytes a unit), from which the blocks, the
   hierarchy and the invariants come.
2. ``persons.parquet`` is read batch by batch: each batch is checked with Arrow compute
   kernels (types, nulls, ranges, 16-digit geocodes), joined to its units (exists, same
   block, group-quarters type, not vacant) and reduced to ``(block, cell)`` keys; only
   the keys and the person ids (for the uniqueness check) are kept, 16 bytes a person.

The checks are the rules of :mod:`censusdp.io.cef`, done in bulk. Problems are not
described here: on the first one found the input is read again with
:func:`~censusdp.io.cef.read_cef`, which names every problem by file, column, row and
value as before (and, should it find nothing after all, the aggregation is done from its
columns), so the messages are the same whichever reader runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import scipy.sparse as sp

from censusdp.data.geography import BLOCK_GEOCODE_LENGTH, GeoLevels, Hierarchy
from censusdp.data.histograms import (
    housing_unit_histogram,
    housing_unit_histogram_at,
    person_cells,
    person_histogram,
)
from censusdp.data.invariants import Invariants, compute_invariants, invariants_from_rows
from censusdp.data.schema import Schema
from censusdp.errors import InternalError
from censusdp.io.cef import OPTIONAL_UNIT_COLUMNS, PERSON_COLUMNS, UNIT_COLUMNS, read_cef
from censusdp.progress import Progress, Task, task

__all__ = ["DEFAULT_BATCH_ROWS", "CEFBlocks", "read_cef_blocks"]

# pyarrow imports pandas lazily the first time an array is turned into a NumPy array,
# and a SIGTERM arriving during that import is lost there (the CLI's handler, which
# removes unfinished output, never sees it); do that import now, before any output exists
pa.array([0]).to_numpy()

DEFAULT_BATCH_ROWS = 1 << 20
"""Rows per batch read from the input files (about 70 MB of person columns)."""


@dataclass(frozen=True, eq=False)
class CEFBlocks:
    """What a release needs of its input, aggregated to blocks.

    Attributes:
        hierarchy: the geounits of every level, built from the units' blocks.
        invariants: the exact public counts.
        persons: ``(blocks x cells)`` person histogram in the given schema.
        housing_units: ``(blocks x 2)`` housing-unit histogram (vacant, occupied), or
            ``None`` when not asked for.
        n_persons: person records read.
        n_units: unit records read.
        block_attributes: per block (the hierarchy's order), the optional unit columns
            present (``aian_area``, ``place``; ``""`` for none).
        streamed: ``False`` when the whole-file reader was used (a problem was found, or
            the files are not laid out for streaming).
    """

    hierarchy: Hierarchy
    invariants: Invariants
    persons: sp.csr_matrix
    housing_units: sp.csr_matrix | None
    n_persons: int
    n_units: int
    block_attributes: dict[str, np.ndarray] = field(default_factory=dict)
    streamed: bool = True


class _Fallback(Exception):
    """The streaming checks found something: let the whole-file reader describe it."""


_GEOCODE_PATTERN = f"^[0-9]{{{BLOCK_GEOCODE_LENGTH}}}$"


def _is_string(t: pa.DataType) -> bool:
    return (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or (pa.types.is_dictionary(t) and pa.types.is_string(t.value_type))
    )


def _check_types(pf: pq.ParquetFile, spec: dict[str, tuple[str, tuple[int, int] | None]]) -> None:
    schema = pf.schema_arrow
    for name, (kind, _) in spec.items():
        if name not in schema.names:
            raise _Fallback
        t = schema.field(name).type
        ok = {
            "int": pa.types.is_integer(t),
            "bool": pa.types.is_boolean(t),
            "geocode": _is_string(t),
            "code": _is_string(t),
        }[kind]
        if not ok:
            raise _Fallback


def _plain(col: pa.Array | pa.ChunkedArray) -> pa.Array:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    return arr


def _ints(batch: pa.RecordBatch, name: str, rng: tuple[int, int] | None) -> np.ndarray:
    col = batch.column(name)
    if col.null_count:
        raise _Fallback
    values = np.asarray(col).astype(np.int64, copy=False)
    if rng is not None and values.size and (values.min() < rng[0] or values.max() > rng[1]):
        raise _Fallback
    return values


def _geocodes(batch: pa.RecordBatch, name: str = "geocode") -> np.ndarray:
    """16-digit geocodes as int64 (their order is the strings' order)."""
    col = _plain(batch.column(name))
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
    empty = pc.equal(col, "")
    filled = pc.if_else(empty, "-1", col)
    return np.asarray(pc.cast(filled, pa.int64()))


def _duplicated(values: np.ndarray) -> bool:
    s = np.sort(values)
    return bool(s.size > 1 and (s[1:] == s[:-1]).any())


@dataclass
class _Units:
    ids_sorted: np.ndarray
    order: np.ndarray
    block: np.ndarray  # per unit, row of its block in ``blocks``
    gqtype: np.ndarray
    occupied: np.ndarray
    blocks: np.ndarray  # sorted unique int64 block geocodes
    attributes: dict[str, np.ndarray]  # per block, int64 codes (-1 none)


def _read_units(path: Path, batch_rows: int) -> _Units:
    pf = pq.ParquetFile(path)
    optional = {k: v for k, v in OPTIONAL_UNIT_COLUMNS.items() if k in pf.schema_arrow.names}
    spec = {**UNIT_COLUMNS, **optional}
    _check_types(pf, spec)
    n = pf.metadata.num_rows
    ids = np.empty(n, dtype=np.int64)
    geo = np.empty(n, dtype=np.int64)
    gqtype = np.empty(n, dtype=np.int8)
    occupied = np.empty(n, dtype=bool)
    attrs = {k: np.empty(n, dtype=np.int64) for k in optional}
    at = 0
    for batch in pf.iter_batches(batch_size=batch_rows, columns=list(spec)):
        m = batch.num_rows
        ids[at : at + m] = _ints(batch, "unit_id", None)
        geo[at : at + m] = _geocodes(batch)
        gqtype[at : at + m] = _ints(batch, "gqtype", UNIT_COLUMNS["gqtype"][1])
        occ = batch.column("occupied")
        if occ.null_count:
            raise _Fallback
        occupied[at : at + m] = np.asarray(pc.cast(occ, pa.int8())) != 0
        for k, (_, width) in optional.items():
            attrs[k][at : at + m] = _codes(batch, k, width[0] if width else 0)
        at += m
    if at != n or _duplicated(ids):
        raise _Fallback
    blocks, block = np.unique(geo, return_inverse=True)
    del geo
    block = block.astype(np.int64)
    per_block = {k: np.zeros(0, dtype=np.int64) for k in attrs}
    if optional and block.size:
        order = np.argsort(block, kind="stable")
        starts = np.flatnonzero(np.r_[True, np.diff(block[order]) != 0])
        for k, v in attrs.items():
            sv = v[order]
            lo, hi = np.minimum.reduceat(sv, starts), np.maximum.reduceat(sv, starts)
            if (lo != hi).any():
                raise _Fallback  # a block attribute differs between units of one block
            per_block[k] = lo
    order = np.argsort(ids, kind="stable")
    return _Units(ids[order], order, block, gqtype, occupied, blocks, per_block)


def _read_persons(
    path: Path, units: _Units, schema: Schema, n_blocks: int, batch_rows: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """``(block * cells + cell)`` key per person, persons per block, and the person count."""
    pf = pq.ParquetFile(path)
    _check_types(pf, PERSON_COLUMNS)
    n = pf.metadata.num_rows
    keys = np.empty(n, dtype=np.int64)
    person_ids = np.empty(n, dtype=np.int64)
    has_resident = np.zeros(units.ids_sorted.size, dtype=bool)
    at = 0
    for batch in pf.iter_batches(batch_size=batch_rows, columns=list(PERSON_COLUMNS)):
        m = batch.num_rows
        cols = {
            name: _ints(batch, name, rng)
            for name, (kind, rng) in PERSON_COLUMNS.items()
            if kind == "int"
        }
        geo = _geocodes(batch)
        person_ids[at : at + m] = cols["person_id"]
        if units.ids_sorted.size == 0:
            if m:
                raise _Fallback
            continue
        pos = np.minimum(
            np.searchsorted(units.ids_sorted, cols["unit_id"]), units.ids_sorted.size - 1
        )
        if (units.ids_sorted[pos] != cols["unit_id"]).any():
            raise _Fallback  # a person's unit does not exist
        unit = units.order[pos]
        block = units.block[unit]
        if (units.blocks[block] != geo).any():
            raise _Fallback  # a person in another block than their unit
        # hhgq 0 needs a housing unit, g > 0 a facility of type g: hhgq == gqtype
        if (cols["hhgq"] != units.gqtype[unit]).any() or not units.occupied[unit].all():
            raise _Fallback
        has_resident[unit] = True
        keys[at : at + m] = block * schema.size + person_cells(cols, schema, m)
        at += m
    if at != n or _duplicated(person_ids):
        raise _Fallback
    del person_ids
    if (units.occupied & ~has_resident).any():
        raise _Fallback  # an occupied unit without a person
    population = np.bincount(keys // schema.size, minlength=n_blocks).astype(np.int64)
    return keys, population, n


def _histogram(keys: np.ndarray, n_blocks: int, n_cells: int) -> sp.csr_matrix:
    uniq, counts = np.unique(keys, return_counts=True)
    rows, cols = np.divmod(uniq, n_cells)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n_blocks))])
    return sp.csr_matrix(
        (counts.astype(np.int64), cols.astype(np.int32), indptr.astype(np.int64)),
        shape=(n_blocks, n_cells),
    )


def read_cef_blocks(
    directory: str | Path,
    geolevels: GeoLevels,
    schema: Schema,
    *,
    with_units: bool = True,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    progress: Progress = None,
) -> CEFBlocks:
    """Read, validate and aggregate a CEF directory without holding its records.

    Args:
        directory: holds ``persons.parquet`` and ``units.parquet``.
        geolevels: the levels of the hierarchy to build.
        schema: the schema of the person histogram.
        with_units: also build the housing-unit histogram (the unit run's input).
        batch_rows: rows per batch read.
        progress: reports the four steps (units, persons, histograms, invariants).

    Everything is in geocode order (the hierarchy's blocks are the sorted 16-digit block
    geocodes); a spine (:mod:`censusdp.data.spine`) is built from ``hierarchy.blocks``
    and ``block_attributes`` and reorders the histograms with its ``order``.

    Raises:
        InputError: naming every problem, exactly as :func:`~censusdp.io.cef.read_cef`.
    """
    directory = Path(directory)
    with task(progress, f"reading the CEF in {directory}", 4, unit="steps", summary=False) as bar:
        try:
            return _stream(directory, geolevels, schema, with_units, batch_rows, bar)
        except (_Fallback, OSError, pa.ArrowException):
            return _whole(directory, geolevels, schema, with_units)


def _digits(codes: np.ndarray, width: int) -> np.ndarray:
    """Non-negative integers as ``width``-digit strings (leading zeros kept)."""
    if codes.size == 0:
        return np.zeros(0, dtype=f"U{width}")
    return np.char.zfill(codes.astype(f"U{width}"), width)


def _attribute_strings(codes: np.ndarray, name: str) -> np.ndarray:
    width = OPTIONAL_UNIT_COLUMNS[name][1][0]
    return np.where(codes < 0, "", _digits(np.maximum(codes, 0), width)).astype(f"U{width}")


def _stream(
    directory: Path,
    geolevels: GeoLevels,
    schema: Schema,
    with_units: bool,
    batch_rows: int,
    bar: Task,
) -> CEFBlocks:
    for name in ("persons.parquet", "units.parquet"):
        if not (directory / name).is_file():
            raise _Fallback
    units = _read_units(directory / "units.parquet", batch_rows)
    bar.advance()
    blocks = _digits(units.blocks, BLOCK_GEOCODE_LENGTH)
    nb = blocks.size
    keys, population, n_persons = _read_persons(
        directory / "persons.parquet", units, schema, nb, batch_rows
    )
    bar.advance()
    hierarchy = Hierarchy.from_blocks(blocks, geolevels)
    if not np.array_equal(hierarchy.blocks, blocks):
        raise InternalError("the hierarchy's blocks are not the input's sorted blocks")
    person_hist = _histogram(keys, nb, schema.size)
    del keys
    bar.advance()
    inv = invariants_from_rows(hierarchy, population, units.block, units.gqtype, units.occupied)
    hu = (
        housing_unit_histogram_at(units.block, units.gqtype, units.occupied, nb)
        if with_units
        else None
    )
    attributes = {k: _attribute_strings(v, k) for k, v in units.attributes.items()}
    bar.advance()
    return CEFBlocks(hierarchy, inv, person_hist, hu, n_persons, int(units.block.size), attributes)


def _whole(directory: Path, geolevels: GeoLevels, schema: Schema, with_units: bool) -> CEFBlocks:
    """The whole-file path: :func:`read_cef` (which raises on any problem), then aggregate."""
    cef = read_cef(directory)
    hierarchy = Hierarchy.from_blocks(cef.units["geocode"], geolevels)
    order = np.argsort(cef.units["geocode"], kind="stable")
    first = np.searchsorted(cef.units["geocode"][order], hierarchy.blocks)
    attributes = {
        k: np.asarray(cef.units[k])[order][first] for k in OPTIONAL_UNIT_COLUMNS if k in cef.units
    }
    return CEFBlocks(
        hierarchy,
        compute_invariants(cef.persons, cef.units, hierarchy),
        person_histogram(cef.persons, hierarchy, schema),
        housing_unit_histogram(cef.units, hierarchy) if with_units else None,
        cef.n_persons,
        cef.n_units,
        attributes,
        streamed=False,
    )
