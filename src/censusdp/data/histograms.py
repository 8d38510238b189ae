"""Every histogram builder: microdata to block histograms, and schema to schema.

What is measured and what is published are both linear functions of histograms. This
module owns the step from records to histograms, for every caller: the confidential
input before measurement (:func:`person_histogram`, :func:`unit_histogram`,
:func:`housing_unit_histogram`, :func:`household_histogram`), the released MDF when it is tabulated and validated,
and the released units rebuilt from the invariants
(:func:`unit_histogram_from_counts`). A histogram is a sparse ``(blocks x cells)``
int64 matrix; :meth:`censusdp.data.geography.Hierarchy.aggregate` takes it up the
hierarchy. :func:`pl94_map` maps a richer schema's cells onto ``pl94`` cells, so the
PL94 tables of a ``dhc-lite`` release come from the same histogram.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.households import Households
from censusdp.data.schema import HHGQ_LEVELS, Schema, get_schema
from censusdp.errors import GeographyError, InputError

__all__ = [
    "N_GQTYPES",
    "PL94_CROSS",
    "UNIT_CELLS",
    "household_histogram",
    "housing_unit_histogram",
    "housing_unit_histogram_at",
    "person_cells",
    "person_histogram",
    "pl94_map",
    "pl94_view",
    "unit_histogram",
    "unit_histogram_from_counts",
]

N_GQTYPES = len(HHGQ_LEVELS)
"""Unit types: 0 housing unit, 1..7 group-quarters facility types (as ``hhgq``)."""

PL94_CROSS = "hhgq * votingage * hispanic * cenrace"
"""The cross of a person schema whose rows are the ``pl94`` schema's 2,016 cells in its
order (C order over HHGQ 8, voting age 2, Hispanic 2, CENRACE 63): what production's DHC
person run held every geounit to (``Constraints_DHCP.py``, ``pl94``), and the group
variable of a ``dhcp-2020`` TopDown held to a P.L. 94 release (:func:`pl94_map` maps
the same cells)."""

UNIT_CELLS = 2 * N_GQTYPES
"""Cells of the unit histogram: ``2 * gqtype + occupied``."""


def _column(frame: Mapping[str, np.ndarray], name: str, what: str) -> np.ndarray:
    if name not in frame:
        raise InputError(f"{what} needs column {name!r}; got columns {sorted(frame)}")
    col = frame[name]
    if isinstance(col, pa.ChunkedArray | pa.Array):
        col = col.to_numpy(zero_copy_only=False)
    return np.asarray(col)


def _block_rows(frame: Mapping[str, np.ndarray], hierarchy: Hierarchy, what: str) -> np.ndarray:
    codes = _column(frame, "geocode", what)
    rows = hierarchy.block_index(codes)
    if rows.size and rows.min() < 0:
        bad = codes[rows < 0][0]
        raise GeographyError(
            f"{what} row {int(np.flatnonzero(rows < 0)[0])} has geocode {bad!r}, which is not a "
            "block of the hierarchy (build it from the union of person and unit geocodes)"
        )
    return rows


def _person_cells(
    persons: Mapping[str, np.ndarray], schema: Schema, n: int | None = None
) -> np.ndarray:
    """Cell index of every person, from CEF columns or MDF columns.

    Each attribute is read from its microdata column (``age`` for ``votingage``) when
    present, else from its MDF column through the inverse of its MDF codes. ``n``, the
    number of persons, defaults to the length of the ``geocode`` column.
    """
    if n is None:
        n = len(_column(persons, "geocode", "persons"))
    levels = []
    for a in schema.attributes:
        if a.column in persons:
            values = _column(persons, a.column, "persons")
            lv = a.levels_of(values)
            col = a.column
        elif a.mdf_column in persons:
            values = _column(persons, a.mdf_column, "persons").astype(np.int64)
            codes = np.asarray(a.mdf_codes, dtype=np.int64)
            lookup = np.full(int(codes.max() - codes.min()) + 1, -1, dtype=np.int64)
            lookup[codes - codes.min()] = np.arange(codes.size)
            off = values - codes.min()
            inside = (off >= 0) & (off < lookup.size)
            lv = np.full(values.shape, -1, dtype=np.int64)
            lv[inside] = lookup[off[inside]]
            col = a.mdf_column
        else:
            raise InputError(
                f"persons need column {a.column!r} or {a.mdf_column!r} for attribute {a.name!r}"
            )
        if lv.shape != (n,):
            raise InputError(f"persons column {col!r} has {lv.size} rows, geocode has {n}")
        if n and lv.min() < 0:
            row = int(np.flatnonzero(lv < 0)[0])
            raise InputError(
                f"persons column {col!r} row {row} has value {values[row]}, "
                f"outside the levels of {a.name!r}"
            )
        levels.append(lv)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    return np.ravel_multi_index(tuple(levels), schema.shape).astype(np.int64)


def person_histogram(
    persons: Mapping[str, np.ndarray], hierarchy: Hierarchy, schema: str | Schema = "pl94"
) -> sp.csr_matrix:
    """The sparse (blocks x cells) int64 histogram of persons.

    Args:
        persons: columns ``geocode`` and, per schema attribute, its CEF column
            (``age``) or its MDF column (``votingage``).
        hierarchy: the geography; its blocks are the rows.
        schema: a schema or built-in schema name.

    Raises:
        InputError: for a missing column or a value outside an attribute's levels.
        GeographyError: for a geocode that is not a block of ``hierarchy``.
    """
    sch = get_schema(schema) if isinstance(schema, str) else schema
    rows = _block_rows(persons, hierarchy, "persons")
    cells = _person_cells(persons, sch)
    return sp.csr_matrix(
        (np.ones(rows.size, dtype=np.int64), (rows, cells)),
        shape=(hierarchy.blocks.size, sch.size),
    )


def household_histogram(
    households: Households, unit_geocodes: np.ndarray, hierarchy: Hierarchy
) -> sp.csr_matrix:
    """The sparse ``(blocks x 387,072)`` int64 histogram of households over the
    ``household2010`` schema: each household counted once, in its unit's block, in the
    cell of its derived attributes (:func:`censusdp.data.households.derive_households`).

    Args:
        households: the households of an input.
        unit_geocodes: the block geocode of every unit (``households.unit`` indexes it).
        hierarchy: the geography; its blocks are the rows.

    Raises:
        GeographyError: for a household's geocode that is not a block of ``hierarchy``.
    """
    sch = get_schema("household2010")
    rows = _block_rows({"geocode": np.asarray(unit_geocodes)[households.unit]}, hierarchy,
                       "households")  # fmt: skip
    cells = sch.cells_of(households.attributes)
    return sp.csr_matrix(
        (np.ones(rows.size, dtype=np.int64), (rows, cells)),
        shape=(hierarchy.blocks.size, sch.size),
    )


def person_cells(persons: Mapping[str, np.ndarray], schema: str | Schema, n: int) -> np.ndarray:
    """The cell index of each of ``n`` persons (no ``geocode`` needed): what
    :func:`person_histogram` counts, for callers that know the block rows already
    (the streaming input reader, :mod:`censusdp.io.cef_stream`)."""
    sch = get_schema(schema) if isinstance(schema, str) else schema
    return _person_cells(persons, sch, n)


def unit_histogram(units: Mapping[str, np.ndarray], hierarchy: Hierarchy) -> sp.csr_matrix:
    """The sparse (blocks x 16) int64 histogram of units; cell ``2 * gqtype + occupied``.

    Raises:
        InputError: for a missing column or a ``gqtype`` outside 0..7.
        GeographyError: for a geocode that is not a block of ``hierarchy``.
    """
    rows = _block_rows(units, hierarchy, "units")
    gq = _column(units, "gqtype", "units").astype(np.int64)
    occ = _column(units, "occupied", "units").astype(bool).astype(np.int64)
    bad = (gq < 0) | (gq >= N_GQTYPES)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(f"units column 'gqtype' row {row} has value {gq[row]}; must be 0..7")
    return sp.csr_matrix(
        (np.ones(rows.size, dtype=np.int64), (rows, 2 * gq + occ)),
        shape=(hierarchy.blocks.size, UNIT_CELLS),
    )


def housing_unit_histogram(units: Mapping[str, np.ndarray], hierarchy: Hierarchy) -> sp.csr_matrix:
    """The sparse ``(blocks x 2)`` histogram of housing units: column 0 vacant, 1 occupied.

    Group-quarters facilities (``gqtype > 0``) are left out: this is what the unit run
    measures.
    """
    return housing_unit_histogram_at(
        hierarchy.block_index(_column(units, "geocode", "units")),
        _column(units, "gqtype", "units"),
        _column(units, "occupied", "units"),
        hierarchy.blocks.size,
    )


def housing_unit_histogram_at(
    rows: np.ndarray, gqtype: np.ndarray, occupied: np.ndarray, n_blocks: int
) -> sp.csr_matrix:
    """:func:`housing_unit_histogram` of units whose block rows are already known."""
    hu = np.asarray(gqtype) == 0
    occ = np.asarray(occupied)[hu].astype(np.int64)
    r = np.asarray(rows)[hu]
    return sp.csr_matrix(
        (np.ones(r.size, dtype=np.int64), (r, occ)),
        shape=(n_blocks, 2),
    )


def unit_histogram_from_counts(
    housing_units: np.ndarray, occupied: np.ndarray, gq_facilities: np.ndarray
) -> sp.csr_matrix:
    """The ``(blocks x 16)`` unit histogram of released units.

    Args:
        housing_units: housing units per block (an invariant).
        occupied: released occupied housing units per block.
        gq_facilities: ``(blocks x 8)`` facilities per block and type (an invariant;
            every facility counts as occupied).
    """
    nb = np.asarray(housing_units).size
    dense = np.zeros((nb, UNIT_CELLS), dtype=np.int64)
    dense[:, 0] = np.asarray(housing_units) - np.asarray(occupied)
    dense[:, 1] = occupied
    for g in range(1, N_GQTYPES):
        dense[:, 2 * g + 1] = gq_facilities[:, g]
    return sp.csr_matrix(dense)


def pl94_view(cols: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The person columns the ``pl94`` schema reads (richer MDFs and CEFs carry them too)."""
    keep = ("geocode", "hhgq", "votingage", "age", "hispanic", "cenrace")
    return {k: cols[k] for k in keep if k in cols}


def pl94_map(schema: Schema) -> sp.csr_matrix:
    """The ``(schema cells x 2016)`` 0/1 matrix that maps a schema's cells to ``pl94`` cells."""
    pl94 = get_schema("pl94")
    cols = schema.mdf_columns(np.arange(schema.size, dtype=np.int64))
    levels = []
    for a in pl94.attributes:
        if a.column in cols:
            lv = np.asarray(a.levels_of(cols[a.column]), dtype=np.int64)
        else:
            lookup = {int(c): i for i, c in enumerate(a.mdf_codes)}
            lv = np.asarray([lookup[int(v)] for v in cols[a.mdf_column]], dtype=np.int64)
        levels.append(lv)
    target = np.ravel_multi_index(tuple(levels), pl94.shape)
    return sp.csr_matrix(
        (np.ones(schema.size, dtype=np.int64), (np.arange(schema.size), target)),
        shape=(schema.size, pl94.size),
    )
