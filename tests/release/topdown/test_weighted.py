"""A weighted row on the root: least squares under ``lower <= s'x <= upper``, then rounding.

``censusdp.release.topdown.weighted`` writes the row as a shift of one query's noisy
answers and finds the multiplier; these tests compare its optimum with a general solver
(SLSQP) on small random roots, check the rounded and repaired counts against every bound
and the row, and check the repair's choices and its one-line refusal.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from censusdp.errors import InfeasibleError, InternalError
from censusdp.release.topdown.problem import Subproblem
from censusdp.release.topdown.rounding import round_to_integers
from censusdp.release.topdown.weighted import RootCap, repair_counts, solve_capped


def _root(seed: int, c: int = 6, housing: float = 60.0) -> tuple[Subproblem, np.ndarray]:
    """A root of ``c`` cells: the detailed query and a query by weight, one group, total
    in [0, housing]; weights (household sizes) 1..4."""
    rng = np.random.default_rng(seed)
    weights = rng.integers(1, 5, c).astype(np.float64)
    truth = rng.integers(0, 12, c).astype(np.float64)
    by_weight = (weights - 1).astype(np.int64)
    noisy_detailed = truth + rng.normal(0, 3, c)
    noisy_weight = np.bincount(by_weight, truth, 4) + rng.normal(0, 2, 4)
    sub = Subproblem(
        parent=None,
        query_rows=(np.arange(c), by_weight),
        query_sizes=(c, 4),
        noisy=(noisy_detailed[None, :], noisy_weight[None, :]),
        weights=np.array([1 / 9, 1 / 4]),
        groups=np.zeros(c, dtype=np.int64),
        group_lower=np.zeros((1, 1)),
        group_upper=np.full((1, 1), np.inf),
        total_lower=np.zeros(1),
        total_upper=np.array([housing]),
    )
    return sub, weights


def _reference(sub: Subproblem, weights: np.ndarray, lower: float, upper: float) -> float:
    """The constrained optimum's objective by SLSQP (a general solver)."""
    cons = [
        {"type": "ineq", "fun": lambda x: upper - x @ weights},
        {"type": "ineq", "fun": lambda x: x @ weights - lower},
        {"type": "ineq", "fun": lambda x: sub.total_upper[0] - x.sum()},
    ]
    best = np.inf
    for x0 in (np.zeros(sub.c), np.full(sub.c, 1.0)):
        r = minimize(lambda x: sub.objective(x[None, :]), x0, method="SLSQP",
                     bounds=[(0, None)] * sub.c, constraints=cons,
                     options={"ftol": 1e-12, "maxiter": 500})  # fmt: skip
        if r.success and (r.x @ weights) <= upper + 1e-6:
            best = min(best, float(r.fun))
    return best


@settings(max_examples=25, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1), frac=st.sampled_from([0.3, 0.6, 0.9, 1.5]))
def test_the_capped_optimum_is_the_constrained_least_squares_optimum(seed, frac) -> None:
    sub, weights = _root(seed)
    free, _, _ = solve_capped(sub, RootCap(weights, 1e9), weights)
    upper = np.floor(frac * float(free.x[0] @ weights))
    cap = RootCap(weights, upper)
    sol, lam, solves = solve_capped(sub, cap, weights)
    got = float(sol.x[0] @ weights)
    assert got <= upper + 1e-6
    if frac < 1:  # binding: the row is met within the stopping tolerance
        assert lam > 0 and got >= upper - 0.5 - 1e-6 and solves > 1
        ref = _reference(sub, weights, 0.0, upper)
        assert sol.objective <= ref + 1e-3 * max(1.0, ref) + 0.5 * lam  # within the tolerance
        assert sol.objective >= ref - 1e-6 * max(1.0, ref)
    else:
        assert lam == 0 and solves == 1
    counts, _ = repair_counts(sub, round_to_integers(sub, sol.x), sol.x, cap, weights)
    assert counts.min() >= 0 and counts.sum() <= 60
    assert counts[0] @ weights <= upper


@settings(max_examples=15, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1))
def test_a_lower_bound_equal_to_the_upper_makes_the_row_exact(seed) -> None:
    """A root whose persons only households can hold: ``s'n`` is exactly ``P``."""
    sub, weights = _root(seed, housing=1000.0)
    free, _, _ = solve_capped(sub, RootCap(weights, 1e9), weights)
    target = np.floor(float(free.x[0] @ weights) * 1.2) + 3
    cap = RootCap(weights, target, target)
    sol, lam, _ = solve_capped(sub, cap, weights)
    assert lam < 0 and abs(float(sol.x[0] @ weights) - target) <= 0.5 + 1e-6
    counts, _ = repair_counts(sub, round_to_integers(sub, sol.x), sol.x, cap, weights)
    assert counts[0] @ weights == target and counts.sum() <= 1000


def test_the_repair_takes_off_what_was_rounded_up_most() -> None:
    sub, _ = _root(1, c=4)
    weights = np.array([1.0, 2.0, 3.0, 1.0])
    x = np.array([[2.2, 3.9, 1.6, 4.5]])
    counts = np.array([[2, 4, 2, 5]])  # 2 + 8 + 6 + 5 = 21
    fixed, moved = repair_counts(sub, counts, x, RootCap(weights, 17), weights)
    # rounded up by 0.4 (cell 2, weight 3), then 0.5 (cell 3, weight 1): 21 - 3 - 1 = 17
    assert fixed.tolist() == [[2, 4, 1, 4]] and moved == 2
    same, moved = repair_counts(sub, counts, x, RootCap(weights, 21), weights)
    assert same.tolist() == counts.tolist() and moved == 0


def test_the_repair_makes_a_household_of_one_size_one_of_another_when_bounds_block_it() -> None:
    """Below the row's lower side with every housing unit occupied (the total at its
    upper bound) no household can be added: one is moved to a larger size instead, the
    one rounded up most to the one rounded down most, the total kept. Above the upper
    side with the total at its lower bound, likewise to a smaller size."""
    sub, _ = _root(1, c=3)
    sub = sub.with_bounds(total_upper=np.array([4.0]))
    weights = np.array([1.0, 2.0, 2.0])
    x = np.array([[1.6, 1.0, 1.4]])  # 1.6 + 2.0 + 2.8 = 6.4
    counts = np.array([[2, 1, 1]])  # 2 + 2 + 2 = 6, four households: no room to add
    fixed, moved = repair_counts(sub, counts, x, RootCap(weights, 7, lower=7), weights)
    assert fixed.tolist() == [[1, 1, 2]] and moved == 1  # cell 0 up by 0.4, cell 2 down
    sub = sub.with_bounds(total_lower=np.array([4.0]))
    x = np.array([[1.6, 1.0, 1.4]])
    counts = np.array([[1, 2, 1]])  # 1 + 4 + 2 = 7
    fixed, moved = repair_counts(sub, counts, x, RootCap(weights, 6), weights)
    assert fixed.tolist() == [[2, 1, 1]] and moved == 1 and int(fixed.sum()) == 4


def test_the_repair_refuses_in_one_line_when_lower_bounds_block_it() -> None:
    """Above the cap with the total at its lower bound and every unit in the lightest
    cell, no count is left to move."""
    sub, _ = _root(1, c=2)
    sub = sub.with_bounds(total_lower=np.array([5.0]))
    weights = np.array([1.0, 2.0])
    with pytest.raises(
        InfeasibleError,
        match=r"^child 0: its counts give 5 weighted sum, which must lie in \[0, 4\]",
    ):
        repair_counts(sub, np.array([[3, 3]]), np.array([[3.0, 3.0]]), RootCap(weights, 4), weights)


def test_a_root_cap_is_checked_on_construction() -> None:
    with pytest.raises(InternalError, match="non-negative integers"):
        RootCap(np.array([1.5, 2.0]), 3)
    with pytest.raises(InternalError, match="lower bound"):
        RootCap(np.array([1.0, 2.0]), 3, 4)
    assert (
        RootCap(np.array([1.0]), 3.7, 1.2).upper == 3
        and RootCap(np.array([1.0]), 3.7, 1.2).lower == 2
    )
