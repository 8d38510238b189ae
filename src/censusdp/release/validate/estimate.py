"""The checks of an estimated release in memory: counts, hierarchy, bounds, units.

:func:`validate_release` runs them on a run's estimate (before anything is written)
and, from :func:`~censusdp.release.validate.run.validate_run`, on the MDF read back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import pl94_map
from censusdp.data.schema import Schema, get_schema
from censusdp.data.units_dhc import h1_of_occupied, h1_of_units, unit_constraint_violations
from censusdp.release.consistency import consistency_violations
from censusdp.release.household_consistency import (
    HOUSEHOLD_SCHEMA,
    household_bounds,
    household_consistency_violations,
)
from censusdp.release.validate.report import ValidationReport


def check_hierarchy(hists: list[sp.csr_matrix], hierarchy: Hierarchy) -> tuple[bool, str]:
    """Every level equals the aggregate of the blocks."""
    agg = hierarchy.aggregate(sp.csr_matrix(hists[-1]))
    for li in range(hierarchy.n_levels):
        diff = sp.csr_matrix(agg[li] - hists[li])
        diff.eliminate_zeros()
        if diff.nnz:
            return False, (
                f"{diff.nnz} cells at {hierarchy.geolevels[li].name} differ from the sum "
                "of their children"
            )
    return True, f"{hierarchy.n_levels} levels consistent"


def check_bounds(
    hists: list[sp.csr_matrix],
    cell_groups: np.ndarray,
    n_groups: int,
    bounds: list,
) -> tuple[bool, str]:
    """Group and total bounds hold exactly at every level, and grouped units' totals
    (:attr:`~censusdp.data.invariants.Bounds.unit_group`) sum to their groups' totals."""
    for li, (h, b) in enumerate(zip(hists, bounds, strict=True)):
        onehot = sp.csr_matrix(
            (np.ones(cell_groups.size), (np.arange(cell_groups.size), cell_groups)),
            shape=(cell_groups.size, n_groups),
        )
        gs = np.asarray((sp.csr_matrix(h) @ onehot).todense())
        ts = gs.sum(axis=1)
        bad_g = (gs < b.group_lower) | (gs > b.group_upper)
        bad_t = (ts < b.total_lower) | (ts > b.total_upper)
        if bad_g.any() or bad_t.any():
            u = int(np.flatnonzero(bad_g.any(axis=1) | bad_t)[0])
            return False, f"level {li} unit {u}: group sums {gs[u].tolist()} violate bounds"
        if b.unit_group is not None and b.group_totals is not None:
            # grouped totals: a state's AIAN and non-AIAN parts sum to its invariant
            inside = b.unit_group >= 0
            sums = np.bincount(
                b.unit_group[inside], weights=ts[inside], minlength=b.group_totals.size
            )
            grouped = np.bincount(b.unit_group[inside], minlength=b.group_totals.size) > 0
            off = np.flatnonzero(grouped & (np.rint(sums) != b.group_totals))
            if off.size:
                m = int(off[0])
                return False, (
                    f"level {li}: the units of group {m} sum to {sums[m]:g}, their invariant "
                    f"total is {b.group_totals[m]:g}"
                )
    return True, "all group and total bounds exact"


def check_held_pl94(
    hists: list[sp.csr_matrix], hierarchy: Hierarchy, schema: Schema, held: sp.csr_matrix
) -> tuple[bool, str]:
    """Every geounit of every level answers the ``pl94`` cross (HHGQ x voting age x
    Hispanic x CENRACE) with the held P.L. 94 release's counts, the sums of ``held``'s
    blocks (production's DHC ``pl94`` invariant)."""
    to_pl94 = pl94_map(schema)
    for li, want in enumerate(hierarchy.aggregate(sp.csr_matrix(held, dtype=np.int64))):
        released = sp.csr_matrix(sp.csr_matrix(hists[li]) @ to_pl94)
        diff = sp.csr_matrix(released - want)
        diff.eliminate_zeros()
        if diff.nnz:
            rows, cols = diff.nonzero()
            u, c = int(rows[0]), int(cols[0])
            return False, (
                f"{diff.nnz} cells at {hierarchy.geolevels[li].name} differ from the P.L. 94 "
                f"release's, e.g. {hierarchy.geocodes[li][u]} cell {c}: released "
                f"{int(released[u, c])}, held {int(want[u, c])}"
            )
    return True, (
        f"every geounit of the {hierarchy.n_levels} levels answers the pl94 cross "
        f"({int(held.sum()):,} persons) with the P.L. 94 release's counts"
    )


@dataclass(frozen=True, eq=False)
class UnitRun:
    """The housing-unit run of an estimated release, for its checks.

    Attributes:
        hists: per level, the released (units x 2) occupancy histograms, or for a
            household run (``schema`` ``household2010``) the household histograms.
        housing_units: ``(blocks,)`` invariant housing-unit counts.
        household_persons: ``(blocks,)`` released household persons, for a release
            whose runs were held to each other (checks ``persons_units_consistent``, or
            ``persons_households_consistent`` for a household run).
        hierarchy: the unit run's own hierarchy (its spine) when it is not the persons';
            the per-block arrays are then in its block order.
        schema: the unit run's schema, ``units`` or ``household2010``.
    """

    hists: list[sp.csr_matrix]
    housing_units: np.ndarray
    household_persons: np.ndarray | None = None
    hierarchy: Hierarchy | None = None
    schema: str = "units"
    unit_hists: list[sp.csr_matrix] | None = None
    gqhh: np.ndarray | None = None
    """A DHC household run (``schema`` ``dhch-2020``): per level its ``(units x 35)``
    units by ``tenvacgq`` (``unit_hists``), and per block the invariant housing units and
    facilities by GQ type (``gqhh``, ``(blocks x 25)``)."""
    h1_occupied: np.ndarray | None = None
    """A DHC household run held to a P.L. 94 release: per block the occupied units of
    its H1 (``None``: the run's own units are its H1)."""


@dataclass(frozen=True, eq=False)
class Written:
    """What was written, recomputed, to check against the estimate.

    Attributes:
        mdf_block_hist: the block histogram re-tabulated from the written MDF.
        tables, tables_from_mdf: per table, per level, dense (units x lines) arrays as
            written and as recomputed from the MDF (checked when both are given).
    """

    mdf_block_hist: sp.csr_matrix | None = None
    tables: Mapping[str, list[np.ndarray]] | None = None
    tables_from_mdf: Mapping[str, list[np.ndarray]] | None = None


def validate_release(
    hists: list[sp.csr_matrix],
    hierarchy: Hierarchy,
    schema: Schema,
    bounds: list,
    *,
    units: UnitRun | None = None,
    written: Written | None = None,
    failsafe_uses: int = 0,
    held_pl94: sp.csr_matrix | None = None,
) -> ValidationReport:
    """Run every check on an estimated release.

    Args:
        hists: per level, the released (units x cells) histograms.
        bounds: per level, the :class:`~censusdp.data.invariants.Bounds` in force. Where
            the failsafe relaxed a bound, its use is reported and the check is made
            against the original bounds with the failsafe count in the detail.
        units: the housing-unit run (``units_consistent``, ``persons_units_consistent``).
        written: what was written, recomputed (``mdf_matches_histogram``,
            ``tables_match_mdf``).
        held_pl94: ``(blocks, 2016)`` the P.L. 94 release's persons per block in its
            ``pl94`` cells that a DHC person run was held to (``pl94_held``: every
            geounit of every level answers the cross with their sums).
    """
    written = written or Written()
    unit_hists = units.hists if units is not None else None
    housing_units = units.housing_units if units is not None else None
    household_persons = units.household_persons if units is not None else None
    mdf_block_hist, tables, tables_from_mdf = (
        written.mdf_block_hist,
        written.tables,
        written.tables_from_mdf,
    )
    rep = ValidationReport()
    ok = all(
        np.issubdtype(h.dtype, np.integer) and (h.data.size == 0 or h.data.min() >= 0)
        for h in hists
    )
    rep.add("nonnegative_integers", ok, "all counts are non-negative integers" if ok else "")
    rep.add("hierarchy_consistent", *check_hierarchy(hists, hierarchy))
    # the bounds are the invariants' on the HHGQ groups (a hold to another release's
    # finer cross is its own check, pl94_held)
    cell_groups = schema.cell_levels("hhgq")
    n_groups = schema.variable("hhgq").size
    ok, detail = check_bounds(hists, cell_groups, n_groups, bounds)
    if not ok and failsafe_uses:
        detail += f" (the failsafe relaxed bounds in {failsafe_uses} tasks; see manifest)"
    rep.add("constraints_and_invariants", ok, detail)
    zeros = schema.structural_zero_mask
    nz = int(sp.csr_matrix(hists[-1])[:, np.flatnonzero(zeros)].sum()) if zeros.any() else 0
    rep.add("structural_zeros", nz == 0, f"{nz} persons in structural-zero cells")
    if held_pl94 is not None:
        rep.add("pl94_held", *check_held_pl94(hists, hierarchy, schema, held_pl94))
    if units is not None and units.unit_hists is not None:
        _check_dhc_households(rep, units, units.hierarchy or hierarchy)
    elif units is not None and units.schema == HOUSEHOLD_SCHEMA:
        _check_households(rep, units, units.hierarchy or hierarchy)
    elif unit_hists is not None and housing_units is not None:
        assert units is not None
        ok_u, detail_u = check_hierarchy(unit_hists, units.hierarchy or hierarchy)
        hu_rel = np.asarray(unit_hists[-1].sum(axis=1)).ravel()
        exact = np.array_equal(hu_rel, housing_units)
        rep.add(
            "units_consistent",
            ok_u and exact,
            detail_u + ("; housing units exact" if exact else "; housing units differ"),
        )
        if household_persons is not None:
            occupied = np.asarray(sp.csr_matrix(unit_hists[-1])[:, 1].todense()).ravel()
            broken = consistency_violations(household_persons, occupied, housing_units)
            _add_violations(rep, "persons_units_consistent", broken, "every block consistent")
    if mdf_block_hist is not None:
        diff = sp.csr_matrix(mdf_block_hist - hists[-1])
        diff.eliminate_zeros()
        rep.add("mdf_matches_histogram", diff.nnz == 0, f"{diff.nnz} differing block cells")
    if tables is not None and tables_from_mdf is not None:
        bad = [
            f"{name} level {li}"
            for name, levels in tables.items()
            for li, arr in enumerate(levels)
            if not np.array_equal(arr, tables_from_mdf[name][li])
        ]
        shown = ", ".join(bad[:4]) + (f" and {len(bad) - 4} more" if len(bad) > 4 else "")
        rep.add("tables_match_mdf", not bad, shown or "all tables recomputed exactly")
    return rep


def _check_households(rep: ValidationReport, run: UnitRun, hierarchy: Hierarchy) -> None:
    """The household run's checks: non-negative integers, every level the sum of its
    blocks, every geounit's households within ``[0, housing units]`` (the DDP's ``total``
    constraint), no household in a structural-zero cell (``no_vacant`` and the DDP's
    structural-zero constraints), and for a consistent release every block's household
    persons what its households need
    (:func:`~censusdp.release.household_consistency.household_consistency_violations`)."""
    hists = [sp.csr_matrix(h) for h in run.hists]
    ok = all(
        np.issubdtype(h.dtype, np.integer) and (h.data.size == 0 or h.data.min() >= 0)
        for h in hists
    )
    rep.add("households_nonnegative_integers", ok, "all household counts are non-negative integers")
    rep.add("households_hierarchy_consistent", *check_hierarchy(hists, hierarchy))
    over = []
    for li, (h, b) in enumerate(
        zip(hists, household_bounds(run.housing_units, hierarchy), strict=True)
    ):
        n = np.asarray(h.sum(axis=1)).ravel()
        bad = int((n > b.total_upper).sum())
        if bad:
            over.append(f"{bad} geounits at {hierarchy.geolevels[li].name}")
    rep.add(
        "households_within_housing_units",
        not over,
        "; ".join(over) + " with more households than housing units"
        if over
        else "every geounit's households at most its housing units",
    )
    zeros = np.flatnonzero(get_schema(HOUSEHOLD_SCHEMA).structural_zero_mask)
    nz = int(hists[-1][:, zeros].sum())
    rep.add("households_structural_zeros", nz == 0, f"{nz} households in structural-zero cells")
    if run.household_persons is not None:
        broken = household_consistency_violations(
            run.household_persons, hists[-1], run.housing_units
        )
        _add_violations(
            rep,
            "persons_households_consistent",
            broken,
            "every block's household persons what its households need",
        )


def _check_dhc_households(rep: ValidationReport, run: UnitRun, hierarchy: Hierarchy) -> None:
    """A DHC household run's checks: both histograms non-negative integers, every level
    the sum of its blocks, and every unit constraint of production's run at every geounit
    (:func:`~censusdp.data.units_dhc.unit_constraint_violations`; ``h1`` the P.L. 94
    release's occupied and vacant units the run was held to, else the released units'
    own counts)."""
    assert run.unit_hists is not None and run.gqhh is not None
    hists = [sp.csr_matrix(h) for h in run.hists]
    units = [sp.csr_matrix(h) for h in run.unit_hists]
    ok = all(
        np.issubdtype(h.dtype, np.integer) and (h.data.size == 0 or h.data.min() >= 0)
        for h in [*hists, *units]
    )
    rep.add(
        "households_nonnegative_integers",
        ok,
        "all household and unit counts are non-negative integers",
    )
    ok_h, detail_h = check_hierarchy(hists, hierarchy)
    ok_u, detail_u = check_hierarchy(units, hierarchy)
    rep.add(
        "households_hierarchy_consistent",
        ok_h and ok_u,
        f"households: {detail_h}; units: {detail_u}",
    )
    gqhh = hierarchy.aggregate(np.asarray(run.gqhh, dtype=np.int64))
    held_h1 = None
    if run.h1_occupied is not None:
        held_h1 = hierarchy.aggregate(h1_of_occupied(run.gqhh[:, 0], run.h1_occupied))
    broken: dict[str, int] = {}
    for li, (h, u) in enumerate(zip(hists, units, strict=True)):
        dense = np.asarray(u.todense(), dtype=np.int64)
        h1 = h1_of_units(dense) if held_h1 is None else np.asarray(held_h1[li])
        for rule, mask in unit_constraint_violations(h, dense, h1, np.asarray(gqhh[li])).items():
            if mask.any():
                broken[f"{rule} at {hierarchy.geolevels[li].name}"] = int(mask.sum())
    rep.add(
        "unit_constraints",
        not broken,
        "; ".join(f"{n} geounits break {k}" for k, n in broken.items())
        or "h1"
        + ("" if held_h1 is None else " (the P.L. 94 release's)")
        + ", gq_vect, owned and the structural zeros hold at every geounit",
    )


def _add_violations(rep: ValidationReport, name: str, broken: dict[str, int], ok: str) -> None:
    """Check ``name``: no block breaks any rule of ``broken`` (blocks by rule), else the
    rules broken, in words."""
    n_bad = sum(broken.values())
    rep.add(
        name,
        n_bad == 0,
        ok
        if n_bad == 0
        else "; ".join(f"{v} blocks {k.replace('_', ' ')}" for k, v in broken.items() if v),
    )
