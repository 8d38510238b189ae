"""Flow networks whose nodes have thousands of unbounded arcs.

OR-Tools refuses a network in which a node's arcs' capacities may add up past int64
(``BAD_CAPACITY_RANGE``): at the builders' unbounded capacity of ``2^50`` that is any node
with more than ``2^13`` unbounded arcs. A DHC State family's child has one group arc a
held row (hundreds of thousands); the run of generated Vermont at half its tracts
stopped there. ``_solve_ortools`` now gives unbounded arcs the largest capacity the
nodes' sums allow.
"""

from __future__ import annotations

import numpy as np
import pytest

from censusdp.errors import InternalError
from censusdp.release.topdown import _flow
from censusdp.release.topdown.problem import Subproblem
from censusdp.release.topdown.rounding import round_to_integers

WIDE = 20_000
"""Unbounded arcs into one node: more than ``2^63 / 2^50 = 8,192``."""


def _hub_network(supply: int, costs: np.ndarray) -> _flow.Network:
    """source -> hub and hub -> sink, each by ``costs.size`` parallel unbounded arcs."""
    net = _flow.Network(3, np.array([supply, 0, -supply], dtype=np.int64))
    net.add(np.zeros(costs.size, dtype=np.int64), 1, 0, _flow.INF_CAP, costs)
    net.add(np.ones(costs.size, dtype=np.int64), 2, 0, _flow.INF_CAP, costs[::-1])
    return net


def test_a_node_with_twenty_thousand_unbounded_arcs_solves_at_its_optimum() -> None:
    costs = np.random.default_rng(1).permutation(np.arange(5, 5 + WIDE, dtype=np.int64))
    flow = _flow.solve(_hub_network(123_456_789, costs))
    assert flow is not None
    cheapest = int(np.argmin(costs))
    # all of it on the cheapest arc in, and on the cheapest arc out
    assert flow[cheapest] == 123_456_789 and flow[:WIDE].sum() == 123_456_789
    assert flow[WIDE + int(np.argmin(costs[::-1]))] == 123_456_789
    assert np.array_equal(flow, _flow.solve(_hub_network(123_456_789, costs), "linprog"))


def test_a_supply_that_would_reach_the_capacity_given_is_an_internal_error() -> None:
    # each arc gets about 2^62 / 20,000 = 2.3e14: a supply of 2^55 (3.6e16) fills the
    # cheapest, which the unbounded network would not
    with pytest.raises(InternalError, match="reached the capacity"):
        _flow.solve(_hub_network(1 << 55, np.arange(WIDE, dtype=np.int64)))


def _one_child_many_groups(n_groups: int) -> tuple[Subproblem, np.ndarray]:
    """One child under a parent of ``n_groups`` cells, each its own unbounded group (the
    shape of a held pass's rows), and a least-squares point off the integers."""
    rng = np.random.default_rng(7)
    parent = rng.integers(1, 5, n_groups).astype(np.int64)
    x = parent[None, :].astype(np.float64)
    cells = np.arange(n_groups, dtype=np.int64)
    sub = Subproblem(
        parent=parent,
        query_rows=(cells,),
        query_sizes=(n_groups,),
        noisy=(x.copy(),),
        weights=np.ones(1),
        groups=cells,
        group_lower=np.zeros((1, n_groups)),
        group_upper=np.full((1, n_groups), np.inf),
        total_lower=np.zeros(1),
        total_upper=np.full(1, np.inf),
        label="State",
    )
    return sub, x


@pytest.mark.parametrize("production", [False, True])
def test_rounding_a_family_with_more_groups_than_int64_allowed_before(production: bool) -> None:
    sub, x = _one_child_many_groups(WIDE)
    counts = round_to_integers(sub, x, production=production)
    assert np.array_equal(counts[0], sub.parent)  # one child: it is its parent


def test_arc_values_are_one_for_every_arc_or_one_an_arc() -> None:
    """``Network.add`` takes a bound or cost as one value for every arc or one value an
    arc (any shape of that size, flattened in order); any other count is refused."""
    net = _flow.Network(4, np.zeros(4, dtype=np.int64))
    net.add(np.array([0, 1, 2]), 3, np.array([[1], [2], [3]]), _flow.INF_CAP, -7)
    net.add(np.array([[0, 1]]), np.array([2, 3]), np.int64(0), np.array([5]), np.array([1, 2]))
    tails, heads, lower, upper, cost = net.arrays()
    assert tails.tolist() == [0, 1, 2, 0, 1]
    assert heads.tolist() == [3, 3, 3, 2, 3]
    assert lower.tolist() == [1, 2, 3, 0, 0]
    assert upper.tolist() == [int(_flow.INF_CAP)] * 3 + [5, 5]
    assert cost.tolist() == [-7, -7, -7, 1, 2]
    assert all(a.dtype == np.int64 for a in (tails, heads, lower, upper, cost))
    with pytest.raises(InternalError, match="2 arc values for 3 arcs"):
        net.add(np.array([0, 1, 2]), 3, np.array([1, 2]), 4, 0)
