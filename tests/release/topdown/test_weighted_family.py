"""A weighted row on each child of a family (the states of a several-state household run):
least squares under ``lower_c <= s'x_c <= upper_c``, then rounding and the repair that
moves units between children.

``censusdp.release.topdown.weighted_family`` finds one multiplier a child; these tests
compare its optimum with a general solver (SLSQP) on small random families, check that a
family whose rows do not bind is solved as without them, that the rounded and repaired
counts keep the parent's counts, every bound and every row, and the one-line refusal
when no unit can move.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from censusdp.data.invariants import Bounds
from censusdp.errors import InfeasibleError
from censusdp.release.household_consistency import household_level_caps
from censusdp.release.topdown.problem import Subproblem
from censusdp.release.topdown.rounding import round_to_integers
from censusdp.release.topdown.solvers.least_squares import solve_l2
from censusdp.release.topdown.weighted_family import (
    UnitCaps,
    repair_family_counts,
    solve_family_capped,
)


def _family(seed: int, k: int = 2, c: int = 6) -> tuple[Subproblem, np.ndarray]:
    """``k`` children of a parent over ``c`` cells (weights 1..4): the detailed query and
    a query by weight, one group, each child's total in [0, 80]."""
    rng = np.random.default_rng(seed)
    weights = rng.integers(1, 5, c).astype(np.float64)
    truth = rng.integers(1, 10, (k, c)).astype(np.float64)
    by_weight = (weights - 1).astype(np.int64)
    noisy_by_weight = np.stack([np.bincount(by_weight, t, 4) for t in truth])
    sub = Subproblem(
        parent=truth.sum(axis=0).astype(np.int64),
        query_rows=(np.arange(c), by_weight),
        query_sizes=(c, 4),
        noisy=(truth + rng.normal(0, 3, (k, c)), noisy_by_weight + rng.normal(0, 2, (k, 4))),
        weights=np.array([1 / 9, 1 / 4]),
        groups=np.zeros(c, dtype=np.int64),
        group_lower=np.zeros((k, 1)),
        group_upper=np.full((k, 1), np.inf),
        total_lower=np.zeros(k),
        total_upper=np.full(k, 80.0),
        label="US",
        child_labels=tuple(f"State {i}" for i in range(k)),
    )
    return sub, weights


def _reference(sub: Subproblem, weights: np.ndarray, caps: UnitCaps) -> float:
    """The constrained optimum's objective by SLSQP (a general solver)."""
    k, c = sub.k, sub.c

    def rows(v: np.ndarray) -> np.ndarray:
        return v.reshape(k, c) @ weights

    cons = [
        {"type": "ineq", "fun": lambda v: caps.upper - rows(v)},
        {"type": "ineq", "fun": lambda v: rows(v) - caps.lower},
        {"type": "ineq", "fun": lambda v: sub.total_upper - v.reshape(k, c).sum(axis=1)},
        {"type": "eq", "fun": lambda v: v.reshape(k, c).sum(axis=0) - sub.parent},
    ]
    x0 = np.tile(sub.parent / k, k)
    r = minimize(lambda v: sub.objective(v.reshape(k, c)), x0, method="SLSQP",
                 bounds=[(0, None)] * (k * c), constraints=cons,
                 options={"ftol": 1e-12, "maxiter": 1000})  # fmt: skip
    assert r.success, r.message
    return float(r.fun)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1), k=st.sampled_from([2, 3]))
def test_the_rows_are_kept_at_the_constrained_optimum(seed: int, k: int) -> None:
    """Child 0 held below its unconstrained row and child 1 above its own (the rows
    still add up to the parent's): each is met within the stopping tolerance, at the
    constrained least-squares optimum; rounded and repaired, every row holds exactly and
    the children still add up to the parent."""
    sub, weights = _family(seed, k)
    free = solve_l2(sub).x @ weights
    total = float(sub.parent @ weights)
    upper = np.full(k, total)
    lower = np.zeros(k)
    upper[0] = np.floor(free[0]) - 5  # child 0 must give at least 5 persons away
    lower[1] = np.ceil(free[1]) + 2  # child 1 must take at least 2
    caps = UnitCaps(np.asarray(weights), lower, upper, "household persons")
    sol, lam, solves = solve_family_capped(sub, caps, weights)
    got = sol.x @ weights
    assert (got <= caps.upper + 0.5 + 1e-6).all() and (got >= caps.lower - 0.5 - 1e-6).all()
    assert lam[0] > 0 and solves > 1
    assert np.allclose(sol.x.sum(axis=0), sub.parent, atol=1e-6)
    ref = _reference(sub, weights, caps)
    assert sol.objective >= ref - 1e-4 * max(1.0, ref)
    assert sol.objective <= ref + 0.05 * max(1.0, ref) + np.abs(lam).sum()  # the tolerance
    counts = round_to_integers(sub, sol.x)
    n, _ = repair_family_counts(sub, counts, sol.x, caps, weights)
    rows = n @ weights
    assert (rows <= caps.upper).all() and (rows >= caps.lower).all()
    assert (n.sum(axis=0) == sub.parent).all() and (n >= 0).all()
    assert (n.sum(axis=1) <= sub.total_upper).all()


def test_rows_that_do_not_bind_change_nothing() -> None:
    sub, weights = _family(7, 3)
    caps = UnitCaps(weights, np.zeros(3), np.full(3, 1e6))
    sol, lam, solves = solve_family_capped(sub, caps, weights)
    assert solves == 1 and not lam.any()
    assert np.array_equal(sol.x, solve_l2(sub).x)


def test_the_repair_moves_units_between_children_and_keeps_the_parent() -> None:
    """Rounded counts one person over child 0's row: a unit of weight 1 moves to child 1
    (the one rounded furthest apart), nothing else."""
    sub, weights = _family(3, 2)
    weights = np.array([1.0, 2, 3, 1, 2, 3])
    counts = np.vstack([sub.parent - sub.parent // 2, sub.parent // 2]).astype(np.int64)
    x = counts.astype(np.float64)
    x[0, 3] -= 0.4  # child 0 was rounded up at cell 3, child 1 down there
    x[1, 3] += 0.4
    rows = counts @ weights
    caps = UnitCaps(weights, np.zeros(2), np.array([rows[0] - 1, rows[1] + 1]))
    n, moved = repair_family_counts(sub, counts, x, caps, weights)
    assert moved == 1 and n[0, 3] == counts[0, 3] - 1 and n[1, 3] == counts[1, 3] + 1
    assert (n.sum(axis=0) == counts.sum(axis=0)).all()


def test_a_child_at_its_total_bound_exchanges_a_heavier_unit_for_a_lighter_one() -> None:
    """Both children at their totals' bounds (every housing unit occupied): no unit can
    move alone, so child 0 gives a unit of weight 2 and takes one of weight 1 back (its
    row down by one, its total kept); the parent's counts stay."""
    from dataclasses import replace

    sub, _ = _family(3, 2)
    weights = np.array([1.0, 2, 3, 1, 2, 3])
    counts = np.vstack([sub.parent - sub.parent // 2, sub.parent // 2]).astype(np.int64)
    sub = replace(sub, total_upper=counts.sum(axis=1).astype(float))
    rows = counts @ weights
    caps = UnitCaps(weights, np.zeros(2), np.array([rows[0] - 1, rows[1] + 1]))
    n, moved = repair_family_counts(sub, counts, counts.astype(float), caps, weights)
    assert moved == 2 and (n @ weights).tolist() == [rows[0] - 1, rows[1] + 1]
    assert (n.sum(axis=1) == counts.sum(axis=1)).all()
    assert (n.sum(axis=0) == counts.sum(axis=0)).all() and (n >= 0).all()


def test_no_unit_to_move_is_one_line() -> None:
    sub, weights = _family(5, 2)
    counts = np.vstack([sub.parent, np.zeros_like(sub.parent)]).astype(np.int64)
    rows = counts @ weights
    caps = UnitCaps(weights, np.zeros(2), np.array([rows[0] - 1, 0.0]), "household persons")
    with pytest.raises(
        InfeasibleError, match=r"\(State 0\): its counts give .* household persons"
    ) as e:
        repair_family_counts(sub, counts, counts.astype(float), caps, weights)
    assert "\n" not in str(e.value)


def _bounds(totals: list[float], gq_lower: list[float], gq_upper: list[float]) -> Bounds:
    n = len(totals)
    gl = np.column_stack([np.zeros(n), gq_lower])
    gu = np.column_stack([np.full(n, np.inf), gq_upper])
    return Bounds(gl, gu, np.asarray(totals, float), np.asarray(totals, float))


def test_every_state_of_several_gets_its_own_row() -> None:
    """Each state's row is the root's formula on its own bounds: ``P`` its total less its
    facilities' lower bounds, ``M`` what no facility can hold; one state, or a level whose
    totals are free, gets none."""
    us = _bounds([150.0], [12.0], [np.inf])
    states = _bounds([100.0, 50.0], [2.0, 10.0], [30.0, np.inf])
    free = Bounds(np.zeros((3, 2)), np.full((3, 2), np.inf), np.zeros(3), np.full(3, np.inf))
    caps = household_level_caps([us, states, free])
    assert list(caps) == [1]
    assert caps[1].upper.tolist() == [98.0, 40.0] and caps[1].lower.tolist() == [70.0, 0.0]
    assert caps[1].weights.size == 387_072 and caps[1].what == "household persons"
    assert household_level_caps([us, _bounds([150.0], [12.0], [np.inf]), free]) == {}
