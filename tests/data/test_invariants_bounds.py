"""Group bounds of a geounit whose total population is known (production's State-level
``hhgq_total_lb`` / ``hhgq_total_ub`` with the ``tot`` invariant,
``programs/constraints/querybase_constraints.py`` ``calculateRightHandSideHhgqTotal``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.data.invariants import hhgq_bounds_from_total


def _production(n: list[int], tot: int) -> tuple[list[float], list[float]]:
    """The rule, one geounit, written out per group (hhgq_lb = [0, 1, ..., 1])."""
    least = [0] + n[1:]
    lower, upper = [], []
    for g in range(8):
        others = sum(n) - n[g]
        lower.append(least[g] if others > 0 else tot)
        upper.append(tot - (sum(least) - least[g]) if n[g] > 0 else 0)
    return lower, upper


@pytest.mark.parametrize(
    ("units", "total", "lower", "upper"),
    [
        # housing units only: the households hold the whole total, exactly
        ([5, 0, 0, 0, 0, 0, 0, 0], 12, [12, 0, 0, 0, 0, 0, 0, 0], [12, 0, 0, 0, 0, 0, 0, 0]),
        # one prison and housing units: at least one prisoner, households up to T - 1
        ([5, 1, 0, 0, 0, 0, 0, 0], 12, [0, 1, 0, 0, 0, 0, 0, 0], [11, 12, 0, 0, 0, 0, 0, 0]),
        # two facility types, no housing unit
        ([0, 0, 2, 0, 0, 3, 0, 0], 40, [0, 0, 2, 0, 0, 3, 0, 0], [0, 0, 37, 0, 0, 38, 0, 0]),
        # one facility type only: everyone is in it
        ([0, 0, 0, 0, 4, 0, 0, 0], 30, [0, 0, 0, 0, 30, 0, 0, 0], [0, 0, 0, 0, 30, 0, 0, 0]),
    ],
)
def test_known_cases(units, total, lower, upper):
    lo, hi = hhgq_bounds_from_total(np.asarray([units]), np.asarray([total]))
    assert lo.tolist() == [lower] and hi.tolist() == [upper]


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    st.lists(st.integers(0, 4), min_size=8, max_size=8),
    st.integers(0, 60),
)
def test_matches_production_rule_and_holds_the_truth(n, extra):
    tot = sum(n[1:]) + extra  # a feasible total: one person per facility at least
    lo, hi = hhgq_bounds_from_total(np.asarray([n]), np.asarray([tot]))
    want_lo, want_hi = _production(n, tot)
    assert lo[0].tolist() == want_lo and hi[0].tolist() == want_hi
    # a true population (everyone beyond one per facility in a housing unit or the first
    # facility type) lies within the bounds
    pop = np.asarray([0] + n[1:], dtype=float)
    if n[0] > 0:
        pop[0] += extra
    elif any(n[1:]):
        pop[1 + int(np.flatnonzero(np.asarray(n[1:]))[0])] += extra
    if sum(n) > 0:
        assert (lo[0] <= pop).all() and (pop <= hi[0]).all()
