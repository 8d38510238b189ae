"""Invariants (counts published exactly) and the constraints they imply.

The 2020 production invariants (Van Riper, Kugler & Ruggles 2020, sec. 2): the total population of
each state, and at every block the number of housing units and of occupied group-quarters
facilities of each type. They are computed from the input once, published with the
release (``RUN/invariants.parquet``), and are all that estimation knows of the input
besides the noisy measurements.

Constraints derived from them, per geounit and HHGQ group ``g`` (sums of the blocks
below the unit):

* GQ type ``g`` > 0: at least one person per occupied facility of that type
  (lower bound = number of facilities), and no such persons where there is no such
  facility (upper bound 0, otherwise unbounded);
* households (``g`` = 0): no household population where there are no housing units;
* total population exact at the state level and above.

Where a geounit's total population is known, production bounds each group by it as well
(:func:`hhgq_bounds_from_total`): the spine's AIAN and non-AIAN parts of a state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.schema_dhc import GQ_CODES
from censusdp.errors import InputError

__all__ = [
    "H1_OCCUPIED",
    "HELD_PL94_COLUMNS",
    "N_HHGQ",
    "Bounds",
    "HeldBounds",
    "Invariants",
    "compute_invariants",
    "held_cross_bounds",
    "held_pl94_from_table",
    "hhgq_bounds_from_total",
    "invariants_from_rows",
    "level_bounds",
]

N_HHGQ = 8

H1_OCCUPIED = "h1_occupied"
"""The column of ``invariants.parquet`` holding :attr:`Invariants.h1_occupied`."""

HELD_PL94_COLUMNS = ("geocode", "cell", "count")
"""The long form of :attr:`Invariants.pl94_persons` (one row per block and ``pl94`` cell
with persons: the block's geocode, the cell's index in the ``pl94`` schema, the count),
published by a release held to them (:meth:`Invariants.held_pl94_table`)."""


@dataclass(frozen=True, eq=False)
class Invariants:
    """Public exact counts by block.

    Attributes:
        blocks: sorted block geocodes (the hierarchy's blocks).
        population: ``(blocks,)`` persons per block; only its sums at the invariant
            level (``total_level``) and above are public.
        housing_units: ``(blocks,)`` housing units per block.
        gq_facilities: ``(blocks, 8)`` occupied GQ facilities by type (column 0 is 0).
        total_level: index of the geolevel whose total population is invariant
            (1 = State); levels above it are invariant too, as sums.
        gq_types: ``(blocks, 24)`` GQ facilities by the 2020 DHC's detailed GQ type
            (:data:`censusdp.data.schema_dhc.GQ_CODES`), or ``None``: with
            ``housing_units`` the ``gqhh_vect`` invariant of the DHC household run,
            published only by a release that has one.
        h1_occupied: ``(blocks,)`` occupied housing units per block of an earlier P.L.
            94 release's H1 that a DHC household run is held to (production's ``h1``
            invariant: households = these, vacant units = ``housing_units`` minus
            these), or ``None``: published only by a release held to one.
        pl94_persons: ``(blocks, 2016)`` int64 persons per block of an earlier P.L. 94
            release in its ``pl94`` cells (HHGQ x voting age x Hispanic x CENRACE) that a
            DHC person run is held to at every geounit (production's ``pl94``
            invariant), or ``None``: published only by a release held to one.
    """

    blocks: np.ndarray
    population: np.ndarray
    housing_units: np.ndarray
    gq_facilities: np.ndarray
    total_level: int = 1
    gq_types: np.ndarray | None = None
    h1_occupied: np.ndarray | None = None
    pl94_persons: sp.csr_matrix | None = None

    def reordered(self, order: np.ndarray, blocks: np.ndarray, total_level: int) -> Invariants:
        """The same invariants with block rows ``order`` (codes ``blocks``)."""
        return Invariants(
            blocks,
            self.population[order],
            self.housing_units[order],
            self.gq_facilities[order],
            total_level,
            None if self.gq_types is None else self.gq_types[order],
            None if self.h1_occupied is None else self.h1_occupied[order],
            None if self.pl94_persons is None else sp.csr_matrix(self.pl94_persons[order]),
        )

    def to_table(self) -> pa.Table:
        """Block-level table for ``invariants.parquet`` (population only as state sums)."""
        cols: dict[str, pa.Array] = {
            "geocode": pa.array(self.blocks.astype(object), pa.string()),
            "housing_units": pa.array(self.housing_units, pa.int64()),
        }
        for g in range(1, N_HHGQ):
            cols[f"gq_facilities_{g}"] = pa.array(self.gq_facilities[:, g], pa.int64())
        if self.gq_types is not None:
            for k, code in enumerate(GQ_CODES):
                cols[f"gq_type_{code}"] = pa.array(self.gq_types[:, k], pa.int64())
        if self.h1_occupied is not None:
            cols[H1_OCCUPIED] = pa.array(self.h1_occupied, pa.int64())
        return pa.table(cols)

    def held_pl94_table(self) -> pa.Table | None:
        """:attr:`pl94_persons` in long form (:data:`HELD_PL94_COLUMNS`, blocks in row
        order, cells ascending, no zero count), or ``None`` when not held."""
        if self.pl94_persons is None:
            return None
        held = sp.csr_matrix(self.pl94_persons, dtype=np.int64)
        held.eliminate_zeros()
        held.sort_indices()
        rows = np.repeat(np.arange(held.shape[0]), np.diff(held.indptr))
        return pa.table(
            {
                "geocode": pa.array(self.blocks[rows].astype(object), pa.string()),
                "cell": pa.array(held.indices.astype(np.int32), pa.int32()),
                "count": pa.array(held.data, pa.int64()),
            }
        )

    def state_table(self, hierarchy: Hierarchy) -> pa.Table:
        """Invariant total population of each unit at ``total_level``."""
        pops = hierarchy.aggregate(self.population.reshape(-1, 1))[self.total_level]
        return pa.table(
            {
                "geolevel": pa.array(
                    [hierarchy.geolevels[self.total_level].name] * pops.shape[0], pa.string()
                ),
                "geocode": pa.array(hierarchy.geocodes[self.total_level].astype(object)),
                "population": pa.array(np.asarray(pops).ravel(), pa.int64()),
            }
        )

    @classmethod
    def from_tables(
        cls,
        blocks_table: pa.Table,
        totals_table: pa.Table,
        hierarchy: Hierarchy,
        pl94_persons: sp.csr_matrix | None = None,
    ) -> Invariants:
        """Rebuild from the published tables (used to re-estimate from an NMF);
        ``pl94_persons`` the held counts read back (:func:`held_pl94_from_table`).

        The block population is not public; it is replaced by a block vector whose sums
        at the invariant level equal the published totals (all of a unit's total placed
        on its first block), which is all that estimation reads.
        """
        codes = np.asarray(blocks_table.column("geocode").to_numpy(zero_copy_only=False)).astype(
            "U16"
        )
        if not np.array_equal(codes, hierarchy.blocks):
            raise InputError("invariants.parquet blocks do not match the measured blocks")
        hu = blocks_table.column("housing_units").to_numpy().astype(np.int64)
        gq = np.zeros((codes.size, N_HHGQ), dtype=np.int64)
        for g in range(1, N_HHGQ):
            gq[:, g] = blocks_table.column(f"gq_facilities_{g}").to_numpy()
        types = None
        if f"gq_type_{GQ_CODES[0]}" in blocks_table.column_names:
            types = np.column_stack(
                [blocks_table.column(f"gq_type_{c}").to_numpy() for c in GQ_CODES]
            ).astype(np.int64)
        h1 = None
        if H1_OCCUPIED in blocks_table.column_names:
            h1 = blocks_table.column(H1_OCCUPIED).to_numpy().astype(np.int64)
        level_name = totals_table.column("geolevel")[0].as_py() if totals_table.num_rows else None
        level = hierarchy.geolevels.index(level_name) if level_name else 1
        pop = np.zeros(codes.size, dtype=np.int64)
        unit_codes = np.asarray(
            totals_table.column("geocode").to_numpy(zero_copy_only=False)
        ).astype(str)
        totals = totals_table.column("population").to_numpy().astype(np.int64)
        anc = hierarchy.ancestor_index(level)
        first_block = np.searchsorted(anc, np.arange(hierarchy.n_units(level)))
        idx = np.searchsorted(hierarchy.geocodes[level], unit_codes)
        pop[first_block[idx]] = totals
        return cls(codes, pop, hu, gq, level, types, h1, pl94_persons)


def held_pl94_from_table(
    table: pa.Table, blocks: np.ndarray, n_cells: int, what: str
) -> sp.csr_matrix:
    """:attr:`Invariants.pl94_persons` from its long form (:meth:`Invariants.held_pl94_table`).

    Args:
        table: the columns :data:`HELD_PL94_COLUMNS`.
        blocks: the release's sorted block geocodes.
        n_cells: the cells of the ``pl94`` schema (2,016).
        what: the file read, for the message.

    Raises:
        InputError: in one line naming ``what``, the field and the value: a missing
            column, a block that is not the release's, a cell outside ``0..n_cells-1``,
            a count that is not positive, or a block and cell given twice.
    """
    missing = [c for c in HELD_PL94_COLUMNS if c not in table.column_names]
    if missing:
        raise InputError(f"{what}: missing column {missing[0]!r} (has {table.column_names})")
    codes = np.asarray(table.column("geocode").to_numpy(zero_copy_only=False)).astype("U16")
    cell = table.column("cell").to_numpy().astype(np.int64)
    count = table.column("count").to_numpy().astype(np.int64)
    row = np.searchsorted(blocks, codes)
    known = (row < blocks.size) & (blocks[np.minimum(row, blocks.size - 1)] == codes)
    for ok, field, value, want in (
        (known, "geocode", codes, "a block of this release"),
        ((cell >= 0) & (cell < n_cells), "cell", cell, f"within 0..{n_cells - 1}"),
        (count > 0, "count", count, "positive"),
    ):
        if not ok.all():
            i = int(np.argmin(ok))
            raise InputError(f"{what}: {field} {value[i].item()!r} in row {i} is not {want}")
    key = row * n_cells + cell
    _, first, times = np.unique(key, return_index=True, return_counts=True)
    if (times > 1).any():
        twice = np.setdiff1d(np.arange(key.size), first)
        i = int(twice[0])
        raise InputError(f"{what}: geocode {codes[i]} and cell {cell[i]} given twice (row {i})")
    return sp.csr_matrix((count, (row, cell)), shape=(blocks.size, n_cells), dtype=np.int64)


def compute_invariants(
    persons: dict[str, np.ndarray],
    units: dict[str, np.ndarray],
    hierarchy: Hierarchy,
    *,
    total_level: int = 1,
) -> Invariants:
    """Compute the invariants from validated input columns."""
    pb = hierarchy.block_index(persons["geocode"])
    pop = np.bincount(pb, minlength=hierarchy.blocks.size).astype(np.int64)
    return invariants_from_rows(
        hierarchy,
        pop,
        hierarchy.block_index(units["geocode"]),
        units["gqtype"],
        units["occupied"],
        total_level=total_level,
    )


def invariants_from_rows(
    hierarchy: Hierarchy,
    population: np.ndarray,
    unit_rows: np.ndarray,
    gqtype: np.ndarray,
    occupied: np.ndarray,
    *,
    total_level: int = 1,
) -> Invariants:
    """The invariants from persons per block and each unit's block row, type and occupancy
    (what :func:`compute_invariants` computes, for callers that never hold geocodes per
    record: the streaming input reader)."""
    nb = hierarchy.blocks.size
    gqtype = np.asarray(gqtype).astype(np.int64, copy=False)
    is_hu = gqtype == 0
    hu = np.bincount(unit_rows[is_hu], minlength=nb).astype(np.int64)
    occ_gq = (~is_hu) & np.asarray(occupied, dtype=bool)
    gq = np.zeros((nb, N_HHGQ), dtype=np.int64)
    np.add.at(gq, (unit_rows[occ_gq], gqtype[occ_gq]), 1)
    pop = np.asarray(population, dtype=np.int64)
    return Invariants(hierarchy.blocks, pop, hu, gq, total_level)


@dataclass(frozen=True, eq=False)
class Bounds:
    """The constraint bounds of one level's geounits, implied by the invariants.

    ``group_lower`` / ``group_upper``: ``(units, G)`` bounds on each group's population
    (``G`` the levels of the group attribute: the eight HHGQ groups of persons, or one);
    ``total_lower`` / ``total_upper``: ``(units,)`` bounds on each unit's total (equal
    where the total is invariant, ``0`` and ``inf`` where it is free). Estimation holds
    every geounit's answer within them (:mod:`censusdp.release.topdown`).

    ``unit_group`` / ``group_totals`` (optional, together): geounits whose totals sum to
    one invariant while none of them is invariant alone, the AIAN and non-AIAN parts of
    a state on the spine: ``unit_group`` is ``(units,)`` int64, each unit's group
    (``-1``: none), ``group_totals`` each group's invariant total (production's grouped
    child total, ``addGroupedChildTotalConstraint``).
    """

    group_lower: np.ndarray
    group_upper: np.ndarray
    total_lower: np.ndarray
    total_upper: np.ndarray
    unit_group: np.ndarray | None = None
    group_totals: np.ndarray | None = None

    def units(self, units: slice) -> Bounds:
        """The bounds of the geounits ``units`` of the level (views, not copies); the
        group totals stay whole (indexed by the groups' numbers)."""
        return Bounds(
            self.group_lower[units],
            self.group_upper[units],
            self.total_lower[units],
            self.total_upper[units],
            None if self.unit_group is None else self.unit_group[units],
            self.group_totals,
        )

    def unit_groups_of(self, units: slice) -> tuple[np.ndarray, np.ndarray] | None:
        """The groups of ``units`` renumbered from 0 and their totals, or ``None`` when
        none of them is in a group."""
        if self.unit_group is None or self.group_totals is None:
            return None
        ug = np.asarray(self.unit_group[units], dtype=np.int64)
        inside = ug >= 0
        if not inside.any():
            return None
        present, local = np.unique(ug[inside], return_inverse=True)
        out = np.full(ug.size, -1, dtype=np.int64)
        out[inside] = local
        return out, np.asarray(self.group_totals, dtype=np.float64)[present]


def level_bounds(
    inv: Invariants, hierarchy: Hierarchy
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Per level: ``(group_lower, group_upper, total_lower, total_upper)`` for every unit.

    ``group_*`` are ``(units, 8)`` bounds on the population of each HHGQ group; totals
    are exact at ``inv.total_level`` and above, free below.
    """
    nb = inv.blocks.size
    facilities = inv.gq_facilities.astype(np.int64)
    has = np.zeros((nb, N_HHGQ), dtype=np.int64)
    has[:, 0] = inv.housing_units > 0
    has[:, 1:] = facilities[:, 1:] > 0
    agg_fac = hierarchy.aggregate(facilities)
    agg_has = hierarchy.aggregate(has)
    agg_pop = hierarchy.aggregate(inv.population.reshape(-1, 1))
    out = []
    for li in range(hierarchy.n_levels):
        lower = np.asarray(agg_fac[li], dtype=np.float64).copy()
        lower[:, 0] = 0.0
        upper = np.where(np.asarray(agg_has[li]) > 0, np.inf, 0.0)
        n = hierarchy.n_units(li)
        if li <= inv.total_level:
            tot = np.asarray(agg_pop[li], dtype=np.float64).ravel()
            tl, tu = tot.copy(), tot.copy()
        else:
            tl, tu = np.zeros(n), np.full(n, np.inf)
        out.append((lower, upper, tl, tu))
    return out


@dataclass(frozen=True, eq=False)
class HeldBounds(Bounds):
    """A level's bounds held exactly to counts (:func:`held_cross_bounds`): its
    ``group_lower`` and ``group_upper`` are one sparse ``(units, G)`` matrix, made dense
    only for the geounits :meth:`units` takes (one family's children), so a level of
    millions of blocks by 2,016 groups never lies dense in memory."""

    def units(self, units: slice) -> Bounds:
        held = np.asarray(self.group_lower[units].toarray(), dtype=np.float64)
        return Bounds(held, held, self.total_lower[units], self.total_upper[units])


def held_cross_bounds(block_counts: sp.spmatrix | np.ndarray, hierarchy: Hierarchy) -> list[Bounds]:
    """Per level, the bounds of a run held exactly to counts of another release.

    ``block_counts`` is ``(blocks, G)``: each block's persons in the ``G`` cells of a cross
    coarser than the run's schema (a P.L. 94 release's 2,016 ``pl94`` cells, which
    production's DHC person run held every geounit to: ``Constraints_DHCP.py``, ``pl94``).
    Every geounit's group ``g`` (the cross's cell ``g``) is held to the sum of its blocks'
    counts (``lower = upper``), and so is its total. The HHGQ bounds of
    :func:`level_bounds` follow: the counts were released under them.

    Each level's groups are one sparse matrix (:class:`HeldBounds`), dense a family at
    a time.
    """
    out: list[Bounds] = []
    for level in hierarchy.aggregate(sp.csr_matrix(block_counts)):
        held = sp.csr_matrix(level, dtype=np.float64)
        total = np.asarray(held.sum(axis=1), dtype=np.float64).ravel()
        out.append(HeldBounds(held, held, total, total.copy()))
    return out


def hhgq_bounds_from_total(
    units_of_type: np.ndarray, total: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds on each HHGQ group of geounits whose total population ``T`` is known.

    Production's ``hhgq_total_lb`` / ``hhgq_total_ub`` with the ``tot`` invariant
    (``programs/constraints/querybase_constraints.py``,
    ``calculateRightHandSideHhgqTotal``; the PL94_2020 schema's ``hhgq_lb = [0, 1, ..., 1]``,
    a housing unit may be vacant). With ``n_g`` the units of type ``g`` (housing units
    for ``g = 0``, occupied facilities of GQ type ``g`` otherwise), ``l_g = n_g`` for
    ``g >= 1`` and ``l_0 = 0``:

    * lower: ``l_g`` when the geounit has units of another type, else ``T`` (everyone is
      in the only type there is);
    * upper: ``T - sum_{h != g} l_h`` when ``n_g > 0`` (everyone but one person per
      facility of the other types), else 0.

    A geounit whose units are all of one type (no facility, only housing units) thus gets
    its total exactly. Production also caps each group at ``99999 n_g``; censusdp does
    not (no real geounit reaches it).

    Args:
        units_of_type: ``(units, 8)`` housing units (column 0) and occupied GQ
            facilities by type (columns 1-7).
        total: ``(units,)`` each geounit's total population.

    Returns:
        ``(lower, upper)``, both ``(units, 8)`` floats.
    """
    n = np.asarray(units_of_type, dtype=np.float64)
    tot = np.broadcast_to(np.asarray(total, dtype=np.float64).reshape(-1, 1), n.shape)
    least = n.copy()
    least[:, 0] = 0.0
    others = n.sum(axis=1, keepdims=True) - n
    in_others = least.sum(axis=1, keepdims=True) - least
    lower = np.where(others > 0, least, tot)
    upper = np.where(n > 0, tot - in_others, 0.0)
    return lower, upper
