"""Integer rounding of a least-squares solution (the second TopDown stage).

JASON (JSR-19-2F) sec. 5.7: "the second step is to perform an optimization that assigns integer
values to the histogram cells such that the entries are non-negative integers that are
rounded values of the fractional results and that sum to the same totals consistent with
the parent histograms"; Van Riper et al. (2020) sec. 2.2, footnote 17 (two stages). We solve

    minimise   sum_{i,j} | X[i, j] - x[i, j] |
    subject to X integer >= 0, sum_i X[i, j] = p_j,
               ceil(L_ig) <= sum_{j in g} X[i, j] <= floor(U_ig),
               ceil(T_lo_i) <= sum_j X[i, j] <= floor(T_hi_i),
               sum_{i: h(i) = m} sum_j X[i, j] = S_m      (child groups),

a min-cost flow on the network of :mod:`censusdp.release.topdown._flow` (totally unimodular, so
the optimum is integral). When ``x`` is feasible the integral polytope meets the box
``floor(x) <= X <= ceil(x)``, so the first attempt only decides ``X = floor(x) + {0, 1}``
per fractional cell, with unit cost ``1 - 2 * frac(x)`` (the change in ``|X - x|``). If
``x`` is too far from feasible for that, a second network lets every cell move by any
amount at the exact piecewise-linear L1 cost. Costs are scaled to integers by ``1e6``.
"""

from __future__ import annotations

import numpy as np

from censusdp.errors import InfeasibleError, InternalError
from censusdp.release.topdown import _flow
from censusdp.release.topdown.problem import Subproblem, _row_sums

__all__ = ["COST_SCALE", "check_integer_solution", "round_to_integers"]

COST_SCALE = 1_000_000
"""Fractional L1 distances are multiplied by this and rounded to integer arc costs."""

_SNAP_ABS = 1e-9
_SNAP_REL = 1e-12


def _snap(x: np.ndarray) -> np.ndarray:
    """Clip tiny negatives to 0 and snap near-integers (``-1e-12`` must not floor to -1).

    A value snaps when within ``1e-9 + 1e-12 |x|`` of an integer (floating-point noise).
    """
    tol = _SNAP_ABS + _SNAP_REL * np.abs(x)
    r = np.rint(x)
    out = np.where(np.abs(x - r) <= tol, r, x)
    return np.maximum(out, 0.0)


def _network(
    sub: Subproblem, x: np.ndarray, *, box: bool, every_cell: bool = False
) -> tuple[_flow.Network, list[tuple[slice, np.ndarray, int]], np.ndarray]:
    """Build the rounding network (``every_cell``: in the box, integer cells may move up
    by one too, as production's binary variables).

    Returns:
        the network, a list of (arc slice, variable indices, sign) whose flows add up to
        X - base, and the base integer matrix (``floor(x)`` in the box network, 0 otherwise).
    """
    k, c, n_groups = sub.k, sub.c, sub.G
    root = sub.parent is None
    lay = _flow.layout(c, k, n_groups, root=root)
    f = np.floor(x)
    phi = x - f
    fi = f.astype(np.int64)
    base = fi if box else np.zeros_like(fi)
    gl, gu = _flow.int_bounds(sub.group_lower, sub.group_upper)
    tl, tu = _flow.int_bounds(sub.total_lower, sub.total_upper)
    base_group = _row_sums(base, sub.groups, n_groups)
    base_total = base.sum(axis=1)
    rhs = _flow.child_group_rhs(sub.child_group, sub.group_totals, base_total)
    supply = np.zeros(lay.n_nodes + rhs.size, dtype=np.int64)
    inf = _flow.INF_CAP
    if root:
        big = int(np.ceil(x.sum())) + k * c + int(np.maximum(tl, gl.sum(axis=1)).sum()) + 1
        big += int(np.maximum(sub.group_totals, 0).sum()) if rhs.size else 0
        supply[lay.source] = big
        supply[lay.sink] = -big
    else:
        supply[:c] = sub.parent - base.sum(axis=0)
        supply[lay.sink] = -int(supply[:c].sum())
    net = _flow.Network(lay.n_nodes + rhs.size, supply)
    tails, heads = lay.cell_arcs(k, sub.groups, n_groups)
    costs_first = np.rint((1.0 - 2.0 * phi.ravel()) * COST_SCALE).astype(np.int64)
    parts: list[tuple[slice, np.ndarray, int]] = []
    idx = np.arange(k * c, dtype=np.int64)
    if box:
        frac = np.ones(k * c, dtype=bool) if every_cell else phi.ravel() > 0
        s = net.add(tails[frac], heads[frac], 0, 1, costs_first[frac])
        parts.append((s, idx[frac], 1))
    else:
        # units 1..floor(x): each brings X closer to x by one
        s = net.add(tails, heads, 0, fi.ravel(), -COST_SCALE)
        parts.append((s, idx, 1))
        s = net.add(tails, heads, 0, 1, costs_first)
        parts.append((s, idx, 1))
        s = net.add(tails, heads, 0, inf, COST_SCALE)
        parts.append((s, idx, 1))
    gt, gh = lay.group_arcs(k, n_groups)
    g_lo = np.maximum(gl - base_group, 0).ravel()
    g_hi = np.where(gu >= inf, inf, gu - base_group).ravel()
    net.add(gt, gh, g_lo, g_hi, 0)
    ct, _ = lay.child_arcs(k)
    ch = _flow.child_heads(sub.child_group, k, lay.sink, lay.n_nodes)
    net.add(ct, ch, np.maximum(tl - base_total, 0), np.where(tu >= inf, inf, tu - base_total), 0)
    _flow.add_child_group_arcs(net, lay.n_nodes, lay.sink, rhs)
    if root:
        net.add([lay.source], [lay.sink], 0, inf, 0)
    return net, parts, base


def round_to_integers(
    sub: Subproblem, x: np.ndarray, *, method: str = "ortools", production: bool = False
) -> np.ndarray:
    """The integer solution closest to ``x`` in L1 that keeps every constraint exact.

    ``production=True`` is production's one-pass rounder (``GeoRound`` of
    ``programs/optimization/simple_rounder.py``): the same objective, a binary variable
    on every kept cell (an integer cell may move up by one), and no unbounded fallback:
    when the box ``floor(x) + {0, 1}`` holds no feasible point it raises.

    Args:
        sub: the subproblem (after :func:`~censusdp.release.topdown.failsafe.make_feasible`).
        x: ``(k, c)`` least-squares solution (e.g. ``solve_l2(sub).x``).
        method: ``"ortools"`` (min-cost flow, default) or ``"linprog"`` (SciPy HiGHS
            dual simplex on the same network LP; a cross-check).
        production: production's rounder (above).

    Returns:
        ``(k, c)`` int64 ``X``: non-negative, columns summing exactly to ``sub.parent``,
        group and total bounds exact. When ``x`` is feasible, ``|X - x| < 1`` per cell.

    Raises:
        InfeasibleError: if no integer point satisfies the constraints (call
            ``make_feasible`` first).
    """
    x = np.asarray(x, dtype=np.float64)
    if x.shape != (sub.k, sub.c):
        raise InternalError(f"rounding input has shape {x.shape}, expected {(sub.k, sub.c)}")
    if not np.isfinite(x).all():
        raise InternalError("rounding input contains NaN or infinity")
    if method not in ("ortools", "linprog"):
        raise InternalError(f"unknown rounding method {method!r}")
    xs = _snap(x)
    for box in (True,) if production else (True, False):
        net, parts, base = _network(sub, xs, box=box, every_cell=production)
        if box and (net.supply[: sub.c if sub.parent is not None else 0] < 0).any():
            continue
        rhs = _flow.child_group_rhs(sub.child_group, sub.group_totals, base.sum(axis=1))
        if box and (rhs < 0).any():
            continue  # the floors alone exceed a child group's total
        flow = _flow.solve(net, method)
        if flow is None:
            continue
        out = base.ravel().copy()
        for s, idx, sign in parts:
            out[idx] += sign * flow[s]  # indices are distinct within a part
        return accept(sub, out.reshape(sub.k, sub.c))
    if production:
        raise InfeasibleError(
            f"subproblem {sub.label!r}: no integer point with each cell at floor(x) or "
            "floor(x) + 1 satisfies the constraints; production's rounder stops here "
            "(fidelity 'production' has no fallback)"
        )
    raise no_integer_solution(sub)


def accept(sub: Subproblem, result: np.ndarray) -> np.ndarray:
    """``result`` after an exact check of every constraint (a violation is a bug)."""
    problems = check_integer_solution(sub, result)
    if problems:
        raise InternalError(f"rounded solution violates constraints: {problems}")
    return result


def no_integer_solution(sub: Subproblem) -> InfeasibleError:
    """The error for a subproblem that no integer point satisfies."""
    return InfeasibleError(
        f"subproblem {sub.label!r}: no non-negative integer solution satisfies the parent "
        "counts and the group/total bounds; run make_feasible first"
    )


def check_integer_solution(sub: Subproblem, x: np.ndarray) -> list[str]:
    """Exact checks of an integer solution; returns the list of violations (empty if none)."""
    problems = []
    x = np.asarray(x)
    if x.shape != (sub.k, sub.c):
        return [f"shape {x.shape} != {(sub.k, sub.c)}"]
    if not np.issubdtype(x.dtype, np.integer):
        return [f"dtype {x.dtype} is not integer"]
    if x.size and x.min() < 0:
        problems.append(f"negative count {x.min()}")
    if sub.parent is not None and sub.c:
        bad = np.flatnonzero(x.sum(axis=0) != sub.parent)
        if bad.size:
            problems.append(f"{bad.size} cells do not sum to the parent (first: cell {bad[0]})")
    gl, gu = _flow.int_bounds(sub.group_lower, sub.group_upper)
    gs = _row_sums(x.astype(np.int64), sub.groups, sub.G)
    if ((gs < gl) | (gs > gu)).any():
        problems.append("group bounds violated")
    tl, tu = _flow.int_bounds(sub.total_lower, sub.total_upper)
    ts = x.sum(axis=1)
    if ((ts < tl) | (ts > tu)).any():
        problems.append("total bounds violated")
    if sub.group_totals is not None:
        if (sub.child_group_sums(x) != sub.group_totals).any():
            problems.append("child group totals violated")
    return problems
