"""Persons-units consistency: the housing-unit run held to the released persons.

The 2020 production system estimates persons and housing units in two independent runs,
so published blocks can have occupied housing units and no household population, or
household population and no occupied unit. censusdp estimates the unit run after the
person run, subject to per-block bounds built from the released household persons
``p_b`` (persons with ``hhgq = 0``) and the invariant housing units ``H_b``:

* ``occupied_b >= 1`` where ``p_b > 0`` (somebody lives in a housing unit, so one is
  occupied), and ``occupied_b <= min(p_b, H_b)`` (every occupied unit has a person);
* household persons only where housing units exist (``p_b > 0`` implies ``H_b >= 1``):
  this is a constraint of the person run already (its household upper bound is zero
  where ``H_b = 0``) and is checked here, not imposed.

The total ``H_b`` stays exact at every block, and so at every level. A geounit ``u``
above the block gets the sums of its blocks' bounds:
``L_u = sum_b [p_b > 0]``, ``U_u = sum_b min(p_b, H_b)``.

**Infeasibility cannot occur.** Each block's interval is non-empty: ``p_b > 0`` implies
``H_b >= 1`` (the precondition), so ``1 <= min(p_b, H_b)``. The root's interval is the
sum of non-empty intervals, so the root subproblem is feasible. If a parent's released
occupied count ``O`` lies in ``[L, U]`` (it does: the parent was held to its bounds),
its children can share it: ``O`` lies in ``[sum_c L_c, sum_c U_c]`` because
``L = sum_c L_c`` and ``U = sum_c U_c``, and any integer in a sum of integer intervals
is a sum of integers one from each interval; each child's vacant count is then
``H_c - O_c >= 0`` because ``U_c <= H_c``. By induction every TopDown subproblem, down to
the blocks, has an integer solution, so the failsafe is never needed and no invariant
moves. Where the precondition fails (household persons in a block without housing units,
which a validated person release cannot contain), :func:`consistent_unit_bounds` raises
:class:`~censusdp.errors.ValidationError` naming the block rather than relax an invariant.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.invariants import Bounds
from censusdp.data.schema import Schema
from censusdp.errors import ValidationError

__all__ = [
    "UNIT_GROUP_VARIABLE",
    "consistency_violations",
    "consistent_unit_bounds",
    "household_persons",
    "independent_unit_bounds",
]

UNIT_GROUP_VARIABLE = "occupancy"
"""The unit schema's attribute whose levels (vacant, occupied) the bounds refer to."""


def household_persons(block_hist: sp.spmatrix | np.ndarray, schema: Schema) -> np.ndarray:
    """Persons in households (``hhgq = 0``) per block of a released person histogram."""
    household = np.flatnonzero(schema.cell_levels("hhgq") == 0)
    hist = sp.csr_matrix(block_hist)
    return np.asarray(hist[:, household].sum(axis=1)).ravel().astype(np.int64)


def independent_unit_bounds(housing_units: np.ndarray, hierarchy: Hierarchy) -> list[Bounds]:
    """The bounds of 2020 production's unit run: one group, housing units exact at every
    level, occupancy free (use with ``group_variable=None``)."""
    agg = hierarchy.aggregate(np.asarray(housing_units).reshape(-1, 1))
    out = []
    for li in range(hierarchy.n_levels):
        tot = np.asarray(agg[li], dtype=np.float64).ravel()
        n = tot.size
        out.append(Bounds(np.zeros((n, 1)), np.full((n, 1), np.inf), tot.copy(), tot.copy()))
    return out


def consistent_unit_bounds(
    household: np.ndarray, housing_units: np.ndarray, hierarchy: Hierarchy
) -> list[Bounds]:
    """Per-level bounds for the unit run that make it consistent with the person run.

    Args:
        household: ``(blocks,)`` released household persons per block (hierarchy order).
        housing_units: ``(blocks,)`` invariant housing units per block.
        hierarchy: the geounits of the unit run.

    Returns:
        Per level (top first), :class:`~censusdp.data.invariants.Bounds` with two
        groups, the levels of ``occupancy`` (vacant, occupied): occupied in
        ``[sum [p_b > 0], sum min(p_b, H_b)]`` over the unit's blocks, vacant unbounded
        above, and the total exactly the housing units.

    Raises:
        ValidationError: if a block has household persons and no housing unit, or the
            arrays do not match the hierarchy's blocks.
    """
    p = np.asarray(household, dtype=np.int64)
    hu = np.asarray(housing_units, dtype=np.int64)
    nb = hierarchy.blocks.size
    if p.shape != (nb,) or hu.shape != (nb,):
        raise ValidationError(
            f"household persons {p.shape} and housing units {hu.shape} must both be "
            f"({nb},), one per block"
        )
    if (p < 0).any() or (hu < 0).any():
        raise ValidationError("household persons and housing units must be non-negative")
    orphan = (p > 0) & (hu == 0)
    if orphan.any():
        b = int(np.flatnonzero(orphan)[0])
        raise ValidationError(
            f"block {hierarchy.blocks[b]} has {int(p[b])} household persons and no housing "
            "unit; the person release breaks its own constraint, so no unit release can be "
            "consistent with it"
        )
    block = np.column_stack([(p > 0).astype(np.int64), np.minimum(p, hu), hu])
    agg = hierarchy.aggregate(block)
    out = []
    for li in range(hierarchy.n_levels):
        a = np.asarray(agg[li], dtype=np.float64)
        n = a.shape[0]
        lower = np.column_stack([np.zeros(n), a[:, 0]])
        upper = np.column_stack([np.full(n, np.inf), a[:, 1]])
        out.append(Bounds(lower, upper, a[:, 2].copy(), a[:, 2].copy()))
    return out


def consistency_violations(
    household: np.ndarray, occupied: np.ndarray, housing_units: np.ndarray
) -> dict[str, int]:
    """Blocks breaking persons-units consistency, by rule (all zero for a consistent release).

    Returns:
        ``occupied_above_household_persons``: more occupied units than household persons;
        ``household_persons_without_occupied_unit``: household persons, no occupied unit;
        ``household_persons_without_housing_unit``: household persons, no housing unit;
        ``occupied_above_housing_units``: more occupied units than housing units.
    """
    p = np.asarray(household, dtype=np.int64)
    o = np.asarray(occupied, dtype=np.int64)
    hu = np.asarray(housing_units, dtype=np.int64)
    return {
        "occupied_above_household_persons": int((o > p).sum()),
        "household_persons_without_occupied_unit": int(((p > 0) & (o == 0)).sum()),
        "household_persons_without_housing_unit": int(((p > 0) & (hu == 0)).sum()),
        "occupied_above_housing_units": int((o > hu).sum()),
    }
