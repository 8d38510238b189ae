"""Persons-households consistency: the person run held to the released households.

A household run (a unit budget on the ``household2010`` schema, the 2010 DDP's household
histogram) is estimated **first**, with these bounds at every geounit: its households
between 0 and its housing units (the invariant housing units aggregated;
:func:`household_bounds`), one group (no group variable), every structural zero of the
schema zero (TopDown drops those cells). These are the DDP's household constraints
(``Constraints_Household2010.py``: ``total`` households at most the housing units,
``no_vacant`` and the structural-zero constraints ``living_alone``, ``size2``,
``size2plus_notalone``, ``not_multigen``, ``hh_elderly``).

Then the person run's household group (``hhgq = 0``) is held, at every geounit, to the
persons the released households need (:func:`household_person_bounds`). With
``n_{b,s}`` the released households of size level ``s`` in block ``b`` (``s = 7`` is
"7 or more"):

* ``L_b = sum_{s=1..6} s n_{b,s} + 7 n_{b,7}``: every household holds at least its size;
* ``U_b = L_b`` when ``n_{b,7} = 0`` (every size is then exact), else unbounded.

A geounit ``u`` above the block gets ``L_u = sum_b L_b`` and ``U_u = sum_b U_b`` over its
blocks (:func:`hold_persons_to_households` intersects them with the person bounds the
invariants give). The released blocks then have household persons exactly where they
have households, and as many as the households' sizes allow
(:func:`household_consistency_violations` counts the blocks that do not).

**Why no TopDown subproblem becomes infeasible.** Below the level where the person total
is invariant (the state), the person bounds of the household group are ``[0, inf)``
where the geounit has housing units and ``[0, 0]`` where it has none; the totals are
free. The intersection with ``[L_u, U_u]`` is non-empty: ``L_u <= U_u`` by construction
(``U_b`` is ``L_b`` or infinite), and where the geounit has no housing unit it has no
household (the household run held households to at most the housing units), so
``L_u = U_u = 0``. A parent's released household persons ``P`` lie in
``[L_p, U_p] = [sum_c L_c, sum_c U_c]`` (it was held to them), so ``P`` is a sum of
integers one from each child's interval: the children's subproblem has an integer
solution, and by induction every subproblem down to the blocks has one.

**Where the person total is invariant** (the state and, as their sum, the nation) the
household group is also tied to the total ``T``: it lies in
``[max(L, 0), min(U, T - sum_{g >= 1} l_g)]`` with ``l_g`` the persons the group-quarters
facilities need (one each), and the groups must add to ``T``. The household run alone
does not guarantee ``L <= P = T - sum_g l_g``: non-negative least squares over the
147,980 live cells of the detailed household query inflates the count of households (the
DDP's finding), past what a state's household population allows. censusdp therefore
estimates the household run's root with one more constraint (:func:`household_root_cap`),
``M <= sum_s s n_s <= P`` (``n_s`` the root's households of size level ``s``, 7 for "7 or
more"; ``M = max(T - sum_g u_g, 0)`` the persons no facility can hold: 0 where any
facility type is present, since a facility may hold any number, ``T`` in a state without
group quarters). The root's least squares keeps it and decides itself which households
to drop, and its rounding is repaired to keep it exactly
(:mod:`censusdp.release.topdown.weighted`: feasible since ``n = 0`` meets the upper side
and the root's other bounds are ``[0, housing units]``; the lower side, non-zero only
without group quarters, needs housing units to spare). One pass: the levels below split
the root's households as always, and for a one-state input the state is the root's one
child, so it gets exactly the root's. Then ``L_state <= P`` and, where no household is
of 7 or more, ``L_state >= M`` (``U`` is infinite otherwise), so the state's person
subproblem is feasible. In an input of several states the nation's households fitting
the nation's persons does not make each state's share fit its own, so every state gets
the same row with its own ``M_s`` and ``P_s`` (:func:`household_level_caps`), kept by
the states' family in its least squares and rounding
(:mod:`censusdp.release.topdown.weighted_family`: the states' rows add up to the
nation's, which its own row held inside the sum of their intervals). A state whose
households cannot meet its row (no household left to move between the states within
their bounds), or whose housing units cannot hold ``M``, is a one-line
:class:`~censusdp.errors.InfeasibleError` naming the geounit (the bounds are checked at
every geounit of every level before the person run starts); censusdp never relaxes an
invariant for it.

``--units independent`` (and ``--fidelity production``) estimates the two runs
independently, as the DDP did: its person-household constraints (``population_ub``,
``population_lb`` in the DDP's ``Constraints_Household2010.py``) are empty functions.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.invariants import Bounds
from censusdp.data.schema import HOUSEHOLD2010
from censusdp.errors import ConfigError, InfeasibleError, ValidationError
from censusdp.privacy.budget import Budget
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.topdown.weighted import RootCap
from censusdp.release.topdown.weighted_family import UnitCaps

__all__ = [
    "HOUSEHOLD_SCHEMA",
    "UNIT_SCHEMAS",
    "check_run_schemas",
    "hold_persons_to_households",
    "household_bounds",
    "household_consistency_violations",
    "household_level_caps",
    "household_person_bounds",
    "household_root_cap",
    "household_size_bounds",
    "is_household_run",
]

HOUSEHOLD_SCHEMA = HOUSEHOLD2010.name
"""The schema of a household run (``household2010``)."""

UNIT_SCHEMAS = ("units", HOUSEHOLD_SCHEMA, "dhch-2020")
"""The schemas a release's unit run may have: occupied / vacant housing units, the DDP's
households, or the 2020 DHC's households and units (:mod:`censusdp.release.dhc_units`)."""


def is_household_run(units: Budget | None) -> bool:
    """Whether a unit run's budget is a household run (schema ``household2010``)."""
    return units is not None and units.schema == HOUSEHOLD_SCHEMA


def check_run_schemas(budget: ReleaseBudget) -> None:
    """Refuse, in one line, a release whose runs are on schemas they cannot be on: the
    person run on a household schema, or the unit run on another than :data:`UNIT_SCHEMAS`.

    Raises:
        ConfigError: naming the budget and its schema.
    """
    if budget.persons.schema == HOUSEHOLD_SCHEMA:
        raise ConfigError(
            f"budget {budget.persons.name!r} is for households (schema {HOUSEHOLD_SCHEMA!r}); "
            f"give it as the unit run (--units-preset {budget.persons.name}) beside a person budget"
        )
    if budget.units is not None and budget.units.schema not in UNIT_SCHEMAS:
        raise ConfigError(
            f"unit budget {budget.units.name!r} is on schema {budget.units.schema!r}; a unit run "
            f"is on one of {list(UNIT_SCHEMAS)}"
        )


def household_bounds(housing_units: np.ndarray, hierarchy: Hierarchy) -> list[Bounds]:
    """The household run's bounds: one group, each geounit's households in ``[0, H_u]``
    (``H_u`` its invariant housing units, the blocks' summed); use with
    ``group_variable=None``."""
    agg = hierarchy.aggregate(np.asarray(housing_units, dtype=np.int64).reshape(-1, 1))
    out = []
    for li in range(hierarchy.n_levels):
        hu = np.asarray(agg[li], dtype=np.float64).ravel()
        n = hu.size
        out.append(Bounds(np.zeros((n, 1)), np.full((n, 1), np.inf), np.zeros(n), hu.copy()))
    return out


def household_size_bounds(household_block_hist: sp.spmatrix) -> tuple[np.ndarray, np.ndarray]:
    """Per block, ``(L_b, U_b)``: the fewest and most household persons the released
    households allow (``L_b = sum_s s n_{b,s}`` with 7 for "7 or more"; ``U_b = L_b``
    without a household of 7 or more, else ``inf``)."""
    hist = sp.csr_matrix(household_block_hist)
    size = HOUSEHOLD2010.cell_levels("hhsize").astype(np.float64)
    lower = np.asarray(hist @ size).ravel()
    large = np.asarray(hist @ (size == 7).astype(np.float64)).ravel()
    return lower, np.where(large > 0, np.inf, lower)


def household_root_cap(bounds: list[Bounds]) -> RootCap | None:
    """The household run's weighted row at the root, where the person total is invariant:
    ``sum_s s n_s <= P`` over the root's households (``s`` the size level, 7 for "7 or
    more"; ``P = T - sum_{g >= 1} l_g``, the root's invariant total less its
    group-quarters lower bounds), or ``None`` when the root's person total is not exact
    (bottom-up).

    :mod:`censusdp.release.topdown.weighted` keeps it in the root's least squares and
    rounding: the solve itself decides which households the root cannot hold.
    """
    b = bounds[0]
    if not np.array_equal(b.total_lower, b.total_upper) or b.total_upper.size != 1:
        return None
    room = max(float(b.total_upper[0] - b.group_lower[0, 1:].sum()), 0.0)
    # T - sum_g u_g: the persons nothing but households can hold (none where a group
    # quarters facility can take any number)
    must = max(float(b.total_lower[0] - b.group_upper[0, 1:].sum()), 0.0)
    size = HOUSEHOLD2010.cell_levels("hhsize").astype(np.float64)
    return RootCap(size, room, min(must, room), "household persons")


def household_level_caps(bounds: list[Bounds]) -> dict[int, UnitCaps]:
    """The household run's weighted row on every geounit below the root whose person
    total is invariant, where its level has more than one (the states of a several-state
    input): ``M_u <= sum_s s n_{u,s} <= P_u``, each geounit's own bounds as the root's
    (:func:`household_root_cap`), by level.

    A level of one geounit takes the root's households as they are (its family has one
    child), which the root's row holds already; a level whose totals are not all exact
    (below the state) gets none (:mod:`censusdp.release.household_consistency`: the
    person bounds there hold whatever the households need).
    """
    size = HOUSEHOLD2010.cell_levels("hhsize").astype(np.float64)
    out = {}
    for li, b in enumerate(bounds[1:], start=1):
        if b.total_upper.size < 2 or not np.array_equal(b.total_lower, b.total_upper):
            continue
        room = np.maximum(b.total_upper - b.group_lower[:, 1:].sum(axis=1), 0.0)
        must = np.maximum(b.total_lower - b.group_upper[:, 1:].sum(axis=1), 0.0)
        out[li] = UnitCaps(size, np.minimum(must, room), room, "household persons")
    return out


def household_person_bounds(
    household_block_hist: sp.spmatrix, hierarchy: Hierarchy
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per level (top first), ``(L_u, U_u)``: the household persons every geounit's
    released households allow, the sums of its blocks' (:func:`household_size_bounds`)."""
    lower, upper = household_size_bounds(household_block_hist)
    large = np.isinf(upper).astype(np.float64)
    agg = hierarchy.aggregate(np.column_stack([lower, large]))
    out = []
    for li in range(hierarchy.n_levels):
        a = np.asarray(agg[li], dtype=np.float64)
        out.append((a[:, 0].copy(), np.where(a[:, 1] > 0, np.inf, a[:, 0])))
    return out


def hold_persons_to_households(
    bounds: list[Bounds], household_block_hist: sp.spmatrix, hierarchy: Hierarchy
) -> list[Bounds]:
    """The person bounds with the household group (``hhgq`` level 0, group column 0) held
    to ``[L_u, U_u]`` at every geounit (:func:`household_person_bounds`).

    Raises:
        InfeasibleError: one line naming the first geounit whose bounds cannot all hold
            (a group's lower above its upper, or the groups unable to make an exact
            total); see the module's description of where this can happen.
    """
    held = household_person_bounds(household_block_hist, hierarchy)
    out = []
    for li, (b, (lo, hi)) in enumerate(zip(bounds, held, strict=True)):
        gl, gu = b.group_lower.astype(np.float64).copy(), b.group_upper.astype(np.float64).copy()
        gl[:, 0] = np.maximum(gl[:, 0], lo)
        gu[:, 0] = np.minimum(gu[:, 0], hi)
        bad = (
            (gl > gu).any(axis=1)
            | (gl.sum(axis=1) > b.total_upper)
            | (gu.sum(axis=1) < b.total_lower)
        )
        if bad.any():
            u = int(np.flatnonzero(bad)[0])
            where = f"{hierarchy.geolevels[li].name} {hierarchy.geocodes[li][u]}".strip()
            raise InfeasibleError(
                f"{where}: the released "
                f"households need {lo[u]:g} to {hi[u]:g} household persons, which its person "
                f"bounds (household group {b.group_lower[u, 0]:g} to {b.group_upper[u, 0]:g}, "
                f"total {b.total_lower[u]:g} to {b.total_upper[u]:g}) cannot meet; rerun with "
                "--units independent (docs/households.md)"
            )
        out.append(replace(b, group_lower=gl, group_upper=gu))  # keeps a state's parts' groups
    return out


def household_consistency_violations(
    household_persons: np.ndarray,
    household_block_hist: sp.spmatrix,
    housing_units: np.ndarray,
) -> dict[str, int]:
    """Blocks breaking persons-households consistency, by rule (all zero for a
    consistent release).

    Args:
        household_persons: ``(blocks,)`` released persons in households (``hhgq = 0``).
        household_block_hist: ``(blocks x 387,072)`` released household histogram.
        housing_units: ``(blocks,)`` invariant housing units.

    Returns:
        ``households_without_household_persons``: households, no household person;
        ``household_persons_without_households``: household persons, no household;
        ``household_persons_below_household_sizes``: fewer household persons than the
        households' sizes add to; ``household_persons_above_household_sizes``: more,
        where no household is of 7 or more; ``households_above_housing_units``;
        ``households_without_housing_units``: households in a block without housing units.
    """
    p = np.asarray(household_persons, dtype=np.float64)
    hu = np.asarray(housing_units, dtype=np.int64)
    hist = sp.csr_matrix(household_block_hist)
    if p.shape != (hist.shape[0],) or hu.shape != p.shape:
        raise ValidationError(
            f"household persons {p.shape}, housing units {hu.shape} and the household "
            f"histogram's {hist.shape[0]} blocks must match"
        )
    n = np.asarray(hist.sum(axis=1)).ravel()
    lower, upper = household_size_bounds(hist)
    return {
        "households_without_household_persons": int(((n > 0) & (p == 0)).sum()),
        "household_persons_without_households": int(((p > 0) & (n == 0)).sum()),
        "household_persons_below_household_sizes": int((p < lower).sum()),
        "household_persons_above_household_sizes": int((p > upper).sum()),
        "households_above_housing_units": int((n > hu).sum()),
        "households_without_housing_units": int(((n > 0) & (hu == 0)).sum()),
    }
