"""Integer network flows over a :class:`~censusdp.release.topdown.problem.Subproblem`.

The constraints of a subproblem form a network (JASON (JSR-19-2F) sec. 5.7, "casting the
constraints as a series of network flows"):

    cell j --X[i, j]--> group node (i, g(j)) --[L_ig, U_ig]--> child node i --[T_lo_i, T_hi_i]--> sink

A child in a child group ``m`` (the AIAN and non-AIAN parts of a state under the US:
:attr:`~censusdp.release.topdown.problem.Subproblem.child_group`) sends its total to the
group's node instead of the sink, and the group node's one arc to the sink carries
exactly ``S_m`` (production's grouped child total; :func:`child_heads`,
:func:`add_child_group_arcs`). The arcs above the cells still form a tree, so the
incidence matrix stays totally unimodular.

Cell ``j`` supplies the parent count ``p_j`` and the sink absorbs ``sum_j p_j``. At the
root (no parent) a single source replaces the cells: it supplies a large amount ``M`` and a
zero-cost bypass arc source -> sink absorbs what the children do not take. The node-arc
incidence matrix of such a network is totally unimodular, so with integer supplies and
capacities every vertex of the flow polytope is integral: the integer rounding and the
feasibility / relaxation problems are min-cost flows.

This module builds the network as arrays and solves it with OR-Tools'
``SimpleMinCostFlow`` (primary) or SciPy's HiGHS dual simplex on the same LP (fallback and
cross-check; a simplex vertex of a totally unimodular LP is integral).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from censusdp.errors import InternalError

__all__: list[str] = []

# The builders' "no bound" capacity. OR-Tools holds flows in int64 and refuses a network
# in which a node's arcs' capacities (and its supply) may add up past 2^63
# (BAD_CAPACITY_RANGE), so `_solve_ortools` hands over each unbounded arc with the
# largest capacity its nodes' sums allow (`_finite_capacity`).
_INF_CAP = np.int64(1) << np.int64(50)

_SUM_LIMIT = 1 << 62
"""What a node's incident capacities plus its supply are kept under (OR-Tools' int64
sums, with a factor of 2 to spare)."""

_COST_GCD = True
"""``False``: :func:`solve` hands the costs over as given, not divided by their greatest
common divisor (for ``benchmarks/bench_whole_family.py --rounder before``)."""


@dataclass
class Network:
    """A min-cost flow problem with arc lower bounds.

    ``supply[v] > 0`` is a source, ``< 0`` a sink; supplies sum to zero. Arcs carry
    ``lower <= flow <= upper`` at ``cost`` per unit.
    """

    n_nodes: int
    supply: np.ndarray
    tails: list[np.ndarray] = field(default_factory=list)
    heads: list[np.ndarray] = field(default_factory=list)
    lower: list[np.ndarray] = field(default_factory=list)
    upper: list[np.ndarray] = field(default_factory=list)
    cost: list[np.ndarray] = field(default_factory=list)

    def add(
        self,
        tails: np.ndarray,
        heads: np.ndarray,
        lower: np.ndarray | int,
        upper: np.ndarray | int,
        cost: np.ndarray | int,
    ) -> slice:
        """Add arcs; returns the slice of their indices."""
        tails = np.asarray(tails, dtype=np.int64).ravel()
        n = tails.size
        start = sum(t.size for t in self.tails)
        self.tails.append(tails)
        self.heads.append(column(heads, n))
        self.lower.append(column(lower, n))
        self.upper.append(column(upper, n))
        self.cost.append(column(cost, n))
        return slice(start, start + n)

    def arrays(self) -> tuple[np.ndarray, ...]:
        """Concatenated (tails, heads, lower, upper, cost)."""
        cat = [
            np.concatenate(x) if x else np.zeros(0, dtype=np.int64)
            for x in (self.tails, self.heads, self.lower, self.upper, self.cost)
        ]
        return tuple(cat)


def column(value: np.ndarray | int, n: int) -> np.ndarray:
    """``value`` as ``n`` int64 arc values: an array of ``n`` values flattened, or one
    value repeated.

    The arc lists are built from a few dozen pieces a network, many of them one value
    (a bound, a cost); ``np.full`` makes those without ``np.broadcast_to``'s checks,
    which were a quarter of a block family's rounding CPU.
    """
    a = np.asarray(value, dtype=np.int64)
    if a.size == n and a.size != 1:
        return a.ravel()
    if a.size != 1:
        raise InternalError(f"{a.size} arc values for {n} arcs")
    return np.full(n, a.item(), dtype=np.int64)


def solve(net: Network, method: str = "ortools") -> np.ndarray | None:
    """Solve a min-cost flow; returns the integer flow on every arc, or None if infeasible.

    Args:
        net: the network.
        method: ``"ortools"`` (``SimpleMinCostFlow``) or ``"linprog"`` (SciPy HiGHS dual
            simplex on the same LP).
    """
    tails, heads, lower, upper, cost = net.arrays()
    if (upper < lower).any():
        return None
    if int(net.supply.sum()) != 0:
        raise InternalError(f"flow network supplies sum to {int(net.supply.sum())}, not 0")
    if _COST_GCD:
        cost = cost // cost_gcd(cost)
    if method == "ortools":
        return _solve_ortools(net.n_nodes, net.supply, tails, heads, lower, upper, cost)
    if method == "linprog":
        return _solve_linprog(net.n_nodes, net.supply, tails, heads, lower, upper, cost)
    raise InternalError(f"unknown flow method {method!r}")


def cost_gcd(cost: np.ndarray) -> int:
    """The greatest common divisor of the arc costs (1 when every cost is 0).

    :func:`solve` divides the costs by it: the same optimal flows, and OR-Tools' cost
    scaling runs about ``log(n C)`` refinements for costs up to ``C``. A rounding pass
    whose tie-break rounds to 0 (more than a million unknowns, as Los Angeles County's
    2,334 tracts) has costs in whole multiples of ``COST_SCALE``; divided, its two
    passes took 0.17 and 1.75 CPU s instead of 0.64 and 3.52 on a 400-tract family.
    """
    nonzero = np.abs(cost[cost != 0])
    return int(np.gcd.reduce(nonzero)) if nonzero.size else 1


def _solve_ortools(
    n_nodes: int,
    supply: np.ndarray,
    tails: np.ndarray,
    heads: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    cost: np.ndarray,
) -> np.ndarray | None:
    from ortools.graph.python import min_cost_flow

    # Lower bounds: send `lower` up front, shift supplies, keep upper - lower capacity.
    shifted = supply.astype(np.int64).copy()
    shifted -= np.bincount(tails, weights=lower, minlength=n_nodes).astype(np.int64)
    shifted += np.bincount(heads, weights=lower, minlength=n_nodes).astype(np.int64)
    capacity = (upper - lower).astype(np.int64)
    unbounded = upper >= _INF_CAP
    cap = _finite_capacity(n_nodes, shifted, tails, heads, capacity, unbounded)
    capacity[unbounded] = cap
    smcf = min_cost_flow.SimpleMinCostFlow()
    if tails.size:
        smcf.add_arcs_with_capacity_and_unit_cost(
            tails.astype(np.int32), heads.astype(np.int32), capacity, cost.astype(np.int64)
        )
    nodes = np.arange(n_nodes, dtype=np.int32)
    smcf.set_nodes_supplies(nodes, shifted)
    status = smcf.solve()
    if status == smcf.OPTIMAL:
        flow = np.asarray(smcf.flows(np.arange(tails.size, dtype=np.int32)), dtype=np.int64)
        if (flow[unbounded] >= cap).any():
            raise InternalError(
                f"an unbounded arc of a flow network reached the capacity {cap} it was given"
            )
        return flow + lower
    if status in (smcf.INFEASIBLE, smcf.UNBALANCED):
        return None
    raise InternalError(f"OR-Tools min-cost flow returned status {status}")


def _finite_capacity(
    n_nodes: int,
    supply: np.ndarray,
    tails: np.ndarray,
    heads: np.ndarray,
    capacity: np.ndarray,
    unbounded: np.ndarray,
) -> int:
    """The capacity an unbounded arc is given: the largest that keeps every node's
    outgoing (and incoming) capacities plus its supply under ``_SUM_LIMIT``, at most
    ``_INF_CAP``.

    A node with more than ``2^12`` unbounded arcs would pass OR-Tools' int64 limit at
    ``_INF_CAP`` each: a family's child under the hundreds of thousands of held rows of a
    DHC pass, or a root with a group node per row. No flow comes near the value returned:
    with the supplies and bounded capacities of a census (a few hundred million persons
    at most, about ``2^29``) it is ``2^62 / (d + 1)`` for a node of ``d`` unbounded arcs,
    ``2^39`` at a million of them; :func:`_solve_ortools` checks that no unbounded arc's
    flow reached it, so the optimum is the unbounded network's.
    """
    if not unbounded.any():
        return int(_INF_CAP)
    finite = np.where(unbounded, 0, capacity).astype(np.float64)
    spare = _SUM_LIMIT - np.abs(supply).astype(np.float64)
    cap = float(_INF_CAP)
    for ends in (tails, heads):
        fixed = np.bincount(ends, weights=finite, minlength=n_nodes)
        count = np.bincount(ends[unbounded], minlength=n_nodes)
        has = count > 0
        cap = min(cap, float(((spare[has] - fixed[has]) / count[has]).min()))
    if cap < 1.0:
        raise InternalError("a flow network's capacities and supplies overflow int64")
    return int(cap)


def _solve_linprog(
    n_nodes: int,
    supply: np.ndarray,
    tails: np.ndarray,
    heads: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    cost: np.ndarray,
) -> np.ndarray | None:
    from scipy.optimize import linprog

    n = tails.size
    arcs = np.arange(n)
    # node balance: outflow - inflow = supply
    a_eq = sp.csr_matrix(
        (
            np.concatenate([np.ones(n), -np.ones(n)]),
            (np.concatenate([tails, heads]), np.concatenate([arcs, arcs])),
        ),
        shape=(n_nodes, n),
    )
    ub = upper.astype(np.float64)
    ub[upper >= _INF_CAP] = np.inf
    res = linprog(
        cost.astype(np.float64),
        A_eq=a_eq,
        b_eq=supply.astype(np.float64),
        bounds=np.column_stack([lower.astype(np.float64), ub]),
        method="highs-ds",
    )
    if res.status == 2:
        return None
    if res.status != 0:
        raise InternalError(f"HiGHS LP for the flow network failed: {res.message}")
    flow = np.rint(res.x)
    if np.abs(flow - res.x).max(initial=0.0) > 1e-6:
        raise InternalError("HiGHS returned a non-integral vertex of a totally unimodular LP")
    return flow.astype(np.int64)


@dataclass
class Layout:
    """Node numbering of a subproblem's network.

    Attributes:
        cell_tail: ``(c,)`` node that supplies each cell (the cell node, or the source).
        group_base: first group node; node of (child i, group g) is ``group_base + i*G + g``.
        child_base: first child node.
        sink: the sink node.
        source: the source node at the root, else ``None``.
        n_nodes: number of nodes.
    """

    cell_tail: np.ndarray
    group_base: int
    child_base: int
    sink: int
    source: int | None
    n_nodes: int

    def cell_arcs(self, k: int, groups: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
        """(tails, heads) of the arc of every variable X[i, j], in row-major order."""
        c = groups.size
        tails = np.tile(self.cell_tail, k)
        heads = (
            self.group_base
            + np.repeat(np.arange(k, dtype=np.int64) * n_groups, c)
            + np.tile(groups, k)
        )
        return tails, heads

    def group_arcs(self, k: int, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
        """(tails, heads) of the (i, g) -> child i arcs, in row-major (i, g) order."""
        tails = self.group_base + np.arange(k * n_groups, dtype=np.int64)
        heads = self.child_base + np.repeat(np.arange(k, dtype=np.int64), n_groups)
        return tails, heads

    def child_arcs(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(tails, heads) of the child i -> sink arcs."""
        return self.child_base + np.arange(k, dtype=np.int64), np.full(k, self.sink)


def layout(c: int, k: int, n_groups: int, *, root: bool) -> Layout:
    """The node numbering for ``c`` cells, ``k`` children and ``n_groups`` groups."""
    if root:
        source = 0
        cell_tail = np.zeros(c, dtype=np.int64)
        base = 1
    else:
        source = None
        cell_tail = np.arange(c, dtype=np.int64)
        base = c
    group_base = base
    child_base = group_base + k * n_groups
    sink = child_base + k
    return Layout(cell_tail, group_base, child_base, sink, source, sink + 1)


def child_heads(sub_child_group: np.ndarray | None, k: int, sink: int, first: int) -> np.ndarray:
    """``(k,)`` the node each child's total flows into: the sink, or its child group's
    node ``first + m`` (``sub_child_group``: ``Subproblem.child_group`` or ``None``)."""
    heads = np.full(k, sink, dtype=np.int64)
    if sub_child_group is not None:
        inside = sub_child_group >= 0
        heads[inside] = first + sub_child_group[inside]
    return heads


def child_group_rhs(
    child_group: np.ndarray | None, totals: np.ndarray | None, base_totals: np.ndarray
) -> np.ndarray:
    """``(m,)`` integer flow each child group's arc to the sink must carry: its invariant
    total less its children's ``base_totals`` (what a box network already places; a
    negative value means the box holds no solution)."""
    if child_group is None or totals is None:
        return np.zeros(0, dtype=np.int64)
    inside = child_group >= 0
    base = np.bincount(child_group[inside], weights=base_totals[inside], minlength=totals.size)
    return (np.rint(totals) - np.rint(base)).astype(np.int64)


def add_child_group_arcs(net: Network, first: int, sink: int, rhs: np.ndarray) -> None:
    """The arcs group node ``first + m`` -> sink, each fixed at ``rhs[m]``."""
    if rhs.size:
        net.add(first + np.arange(rhs.size, dtype=np.int64), sink, rhs, rhs, 0)


def int_bounds(lo: np.ndarray, hi: np.ndarray, tol: float = 1e-9) -> tuple[np.ndarray, np.ndarray]:
    """Integer versions of real bounds: ``ceil(lo)`` and ``floor(hi)`` (``hi = inf`` -> cap)."""
    lo_i = np.ceil(np.asarray(lo, dtype=np.float64) - tol)
    hi_f = np.asarray(hi, dtype=np.float64)
    hi_i = np.where(np.isfinite(hi_f), np.floor(hi_f + tol), float(_INF_CAP))
    return lo_i.astype(np.int64), np.minimum(hi_i, float(_INF_CAP)).astype(np.int64)


INF_CAP = _INF_CAP
