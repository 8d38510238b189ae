"""Least squares holding the answers of marginal queries found by an earlier pass (internal).

Production's multipass least squares (``l2_dataIndep_npass_optimizer.py``,
``addMultiPassDPQueryConstraints``) holds a query ``h`` of an earlier pass ``r`` with

    |A_h X[i] - A_h X_r[i]| <= tol         (every child i, every answer row of h)

A query is a partition of the cells (every cell in one answer row), so a held query is a
*layer* of sum constraints beside the subproblem's own two (the group attribute, the
total). The subproblem and its backends know one layer of groups. This module solves a
pass that holds partitions with them, without a backend of its own:

1. The **fine partition** ``F`` is the common refinement of the held partitions and the
   group attribute (for the DHC's ``relgq * age_40_groups * hispanic * cenrace * sex``,
   which refines ``hhgq``, ``F`` is the held query itself). ``F`` becomes the
   subproblem's group attribute, with bounds on each row of ``F``: a layer row that is
   one row of ``F`` gives its own bounds; a layer row made of several rows of ``F`` gives
   each of them its upper bound (cells are non-negative). On its rows present among the
   kept cells only, so a family's size, not the schema's 423,360 rows, sets the cost.
2. The pass is solved on that subproblem (:func:`solve_l2`, any backend). A layer row of
   several ``F`` rows (a group with several held rows, say) is not a constraint of it:
   the answer is checked against it. When none is violated the answer is the optimum of
   the pass exactly (it solves a relaxation and is feasible).
3. Otherwise each violated layer row's bounds are shared out over its ``F`` rows around
   the anchor (the previous pass's answer, feasible for every layer): row ``r`` of ``F``
   may move up by ``theta * (hi_r - a_r)`` with ``theta = min(1, slack_up / sum of
   room)``, and likewise down, so that any point within the new ``F`` bounds meets the
   layer row. The pass is solved again; after :data:`ROUNDS` rounds every layer row is
   shared out, which is feasible (the anchor is inside). The held answers then stay
   within ``tol`` and the layer bounds hold, a tighter set than production's where a
   layer binds (it has every constraint in one Gurobi model).

A root whose pass has ``detailed`` alone (one child, no parent: the DHC's second pass at
the top) is separable and solved in closed form (:func:`_project`, bisection on the
shifts of the total and of each held row), not by a solver over its 905,184 cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from censusdp.errors import InfeasibleError, InternalError
from censusdp.release.topdown.problem import Subproblem, _row_sums
from censusdp.release.topdown.solvers.base import RealSolution
from censusdp.release.topdown.solvers.chain import program_backends
from censusdp.release.topdown.solvers.common import feasibility_tolerance
from censusdp.release.topdown.solvers.least_squares import solve_l2

__all__: list[str] = []

ROUNDS = 3
"""Solves with only the violated layer rows shared out, before sharing out every one."""


def _compress(labels: np.ndarray) -> tuple[np.ndarray, int]:
    present, inverse = np.unique(labels, return_inverse=True)
    return inverse.astype(np.int64).reshape(-1), int(present.size)


@dataclass(frozen=True, eq=False)
class Held:
    """A partition of the kept cells whose per-child answers must stay within bounds.

    Attributes:
        rows: ``(c,)`` row of each kept cell, ``0..n-1`` (rows without a kept cell dropped).
        lower: ``(k, n)`` lower bound of each child's answer (>= 0).
        upper: ``(k, n)`` upper bound.
        name: the held query, for messages.
    """

    rows: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    name: str = ""

    @classmethod
    def around(cls, rows: np.ndarray, x: np.ndarray, tol: float, name: str = "") -> Held:
        """Hold the answers of ``x`` (``(k, c)``) to the partition ``rows`` within ``tol``."""
        labels, n = _compress(np.asarray(rows, dtype=np.int64))
        a = _row_sums(np.asarray(x, dtype=np.float64), labels, n)
        return cls(labels, np.maximum(a - tol, 0.0), a + tol, name)

    def answers(self, x: np.ndarray) -> np.ndarray:
        """``(k, n)`` the answers of ``x`` to the held partition."""
        return _row_sums(np.asarray(x, dtype=np.float64), self.rows, self.lower.shape[1])

    def violation(self, x: np.ndarray) -> float:
        """The largest amount by which an answer of ``x`` leaves its bounds (0 if none)."""
        s = self.answers(x)
        if not s.size:
            return 0.0
        return float(max(0.0, (self.lower - s).max(), (s - self.upper).max()))


@dataclass
class _Layer:
    """One layer (the group attribute or a held partition) over the fine rows."""

    up: np.ndarray  # (n_fine,) the layer row of each fine row
    lower: np.ndarray  # (k, n_layer)
    upper: np.ndarray  # (k, n_layer)
    single: np.ndarray  # (n_layer,) the layer row is one fine row
    count: np.ndarray  # (n_layer,) its fine rows (0: no kept cell, nothing to check)


def _fine(sub: Subproblem, holds: Sequence[Held]) -> tuple[np.ndarray, int, list[_Layer]]:
    """The common refinement of the group attribute and the held partitions, and each
    layer's rows over it."""
    parts = [(sub.groups, sub.G, sub.group_lower, sub.group_upper)]
    parts += [(h.rows, h.lower.shape[1], h.lower, h.upper) for h in holds]
    key = np.zeros(sub.c, dtype=np.int64)
    for rows, n, _, _ in parts:
        key, _ = _compress(key * n + rows)
    fine, n_fine = _compress(key)
    first = np.zeros(n_fine, dtype=np.int64)
    first[fine[::-1]] = np.arange(sub.c)[::-1]  # a cell of every fine row
    layers = []
    for rows, n, lo, hi in parts:
        up = rows[first]
        count = np.bincount(up, minlength=n)
        layers.append(_Layer(up, lo, hi, count == 1, count))
    return fine, n_fine, layers


def _fine_bounds(k: int, n_fine: int, layers: list[_Layer]) -> tuple[np.ndarray, np.ndarray]:
    lo = np.zeros((k, n_fine))
    hi = np.full((k, n_fine), np.inf)
    for lay in layers:
        hi = np.minimum(hi, lay.upper[:, lay.up])
        own = lay.single[lay.up]
        lo[:, own] = np.maximum(lo[:, own], lay.lower[:, lay.up[own]])
    return np.minimum(lo, hi), hi


def _coarse_violated(
    x_fine: np.ndarray, layers: list[_Layer], tol: float
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per layer, ``(k, n_layer)`` masks of the rows (of several fine rows) ``x`` breaks
    by more than ``tol`` persons a fine row (each fine row may be off by the solver's
    tolerance)."""
    out = []
    for lay in layers:
        s = _row_sums(x_fine, lay.up, lay.lower.shape[1])
        gap = tol * np.maximum(lay.count, 1)[None, :]
        bad = (s > lay.upper + gap) | (s < lay.lower - gap)
        out.append(bad & (lay.count > 1)[None, :])
    return out


def _share_out(
    lo: np.ndarray,
    hi: np.ndarray,
    anchor: np.ndarray,
    layers: list[_Layer],
    masks: list[np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """Tighten the fine bounds so that every masked layer row holds for any point within
    them (around ``anchor``, the fine answers of a point that meets every layer)."""
    lo, hi = lo.copy(), hi.copy()
    for lay, mask in zip(layers, masks, strict=True):
        if not mask.any():
            continue
        n = lay.lower.shape[1]
        count = np.maximum(np.bincount(lay.up, minlength=n), 1).astype(np.float64)
        a_sum = _row_sums(anchor, lay.up, n)
        capped = mask[:, lay.up]
        for sign, slack in ((1.0, lay.upper - a_sum), (-1.0, a_sum - lay.lower)):
            slack = np.maximum(slack, 0.0)
            room = np.maximum(hi - anchor if sign > 0 else anchor - lo, 0.0)
            # a row without a finite bound of its own takes an equal share of the slack
            share = np.where(np.isfinite(slack), slack / count, np.inf)[:, lay.up]
            room = np.where(np.isfinite(room), room, share)
            total = _row_sums(np.where(np.isfinite(room), room, 0.0), lay.up, n)
            tight = np.isfinite(slack) & (total > slack)
            theta = np.where(tight, slack / np.where(total > 0, total, 1.0), 1.0)[:, lay.up]
            move = np.where(np.isfinite(room), theta * room, np.inf)
            if sign > 0:
                hi = np.where(capped, np.minimum(hi, anchor + move), hi)
            else:
                lo = np.where(capped, np.maximum(lo, anchor - move), lo)
    return np.minimum(lo, hi), hi


BISECTIONS = 100
"""Halvings of each shift's bracket in :func:`_project` (doubles are exact well before)."""


def _shift_sums(y: np.ndarray, rows: np.ndarray, n: int, t: np.ndarray) -> np.ndarray:
    """``s_r(t_r) = sum_{j in r} max(0, y_j - t_r)`` for every row ``r``."""
    return np.bincount(rows, weights=np.maximum(y - t[rows], 0.0), minlength=n)


def _solve_shifts(y: np.ndarray, rows: np.ndarray, n: int, target: np.ndarray) -> np.ndarray:
    """Per row, the shift ``t_r`` with ``s_r(t_r) = target_r`` (bisection; ``s_r`` falls)."""
    count = np.maximum(np.bincount(rows, minlength=n), 1)
    lo = np.full(n, np.inf)
    np.minimum.at(lo, rows, y)
    hi = np.full(n, -np.inf)
    np.maximum.at(hi, rows, y)
    lo = np.where(np.isfinite(lo), lo - target / count - 1.0, 0.0)  # s_r(lo) > target
    hi = np.where(np.isfinite(hi), hi, 0.0)  # s_r(hi) = 0 <= target
    for _ in range(BISECTIONS):
        mid = 0.5 * (lo + hi)
        above = _shift_sums(y, rows, n, mid) > target
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
    return 0.5 * (lo + hi)


def _project(sub: Subproblem) -> np.ndarray | None:
    """The exact answer of a root pass whose one query is ``detailed`` (``None`` if ``sub``
    is not one): ``min ||x - y||^2`` over ``x >= 0``, the group bounds and the total bounds
    is separable, ``x_j = max(0, y_j - lambda - mu_g)``: each group's sum is its
    unconstrained sum at shift ``lambda`` clipped to its bounds, ``lambda`` makes the
    clipped sums meet the total (bisection), and each group's shift gives its sum."""
    if sub.parent is not None or sub.k != 1 or sub.n_queries != 1 or sub.child_group is not None:
        return None
    rows = sub.query_rows[0]
    if sub.c == 0 or np.unique(rows).size != sub.c:
        return None
    y, g, n = sub.noisy[0][0, rows], sub.groups, sub.G
    lo, hi = sub.group_lower[0], sub.group_upper[0]

    def clipped(lam: float) -> np.ndarray:
        return np.clip(_shift_sums(y, g, n, np.full(n, lam)), lo, hi)

    t_lo, t_hi = float(sub.total_lower[0]), float(sub.total_upper[0])
    sums = clipped(0.0)
    goal = min(max(sums.sum(), t_lo), t_hi)
    if goal != sums.sum():
        a, b = float(y.min()) - goal - 1.0, float(y.max()) + 1.0  # F(a) >= goal >= F(b)
        for _ in range(BISECTIONS):
            mid = 0.5 * (a + b)
            a, b = (mid, b) if clipped(mid).sum() > goal else (a, mid)
        sums = clipped(0.5 * (a + b))
        sums *= goal / sums.sum() if sums.sum() > 0 else 1.0
    x = np.maximum(y - _solve_shifts(y, g, n, sums)[g], 0.0)
    got = np.bincount(g, weights=x, minlength=n)
    x *= np.where(got > 0, sums / np.where(got > 0, got, 1.0), 0.0)[g]
    return x[None, :]


def _solve(sub: Subproblem, method: str, tol: float, feas_tol: float) -> RealSolution:
    """``auto``: the closed form of a separable root (:func:`_project`), else the
    least-squares program's solvers first (PIQP on a small family, then Clarabel:
    :func:`~censusdp.release.topdown.solvers.chain.program_backends`). The held rows are
    as many groups as a family has kept cells, nearly; the program takes each as one
    sparse row, while the active set finds each
    active group's cells by a pass over all of them (the first DHC Prim family of the test
    blocks ran for minutes in it).

    When Clarabel's point is rejected (a violation above the tolerance) its own fallback,
    the NNLS point rounded by a flow, can find no integer point within held bounds that
    are fractional (the previous pass's answers within a tolerance) and raises; the rest
    of the chain then has its turn (a DHC person run held to a P.L. 94 release's 2,016
    exact groups met it in a 1% Vermont block group)."""
    x = _project(sub) if method == "auto" else None
    if x is not None and sub.max_violation(x) <= feasibility_tolerance(sub, feas_tol):
        v = sub.max_violation(x)
        return RealSolution(x, "optimal", "projection", BISECTIONS, 0.0, v, sub.objective(x))
    if method == "auto":
        for backend in program_backends(sub):
            try:
                res = solve_l2(sub, method=backend, tol=tol, feas_tol=feas_tol)
            except InfeasibleError:
                continue
            if res.status == "optimal":
                return res
    return solve_l2(sub, method=method, tol=tol, feas_tol=feas_tol)


def solve_held(
    sub: Subproblem,
    holds: Sequence[Held],
    anchor: np.ndarray,
    *,
    method: str = "auto",
    tol: float = 1e-7,
    feas_tol: float = 1e-8,
) -> tuple[RealSolution, int]:
    """Least squares on ``sub`` with every partition of ``holds`` kept within its bounds.

    Args:
        sub: the pass's subproblem (its queries, the subproblem's own constraints).
        holds: the held partitions with their per-child bounds.
        anchor: ``(k, c)`` a point meeting ``sub``'s constraints and every hold (the
            previous pass's answer).
        method, tol, feas_tol: as for :func:`solve_l2`.

    Returns:
        the solution (``max_violation`` the largest of ``sub``'s and the holds'), and the
        number of solves it took.
    """
    if not holds:
        raise InternalError("solve_held needs at least one held partition")
    fine, n_fine, layers = _fine(sub, holds)
    lo, hi = _fine_bounds(sub.k, n_fine, layers)
    anchor_fine = _row_sums(np.asarray(anchor, dtype=np.float64), fine, n_fine)
    gap = feasibility_tolerance(sub, feas_tol)
    solves = 0
    while True:
        relaxed = replace(sub, groups=fine, group_lower=lo, group_upper=hi)
        res = _solve(relaxed, method, tol, feas_tol)
        solves += 1
        masks = _coarse_violated(_row_sums(res.x, fine, n_fine), layers, gap)
        if not any(m.any() for m in masks):
            break
        if solves > ROUNDS:  # share out every layer row: feasible around the anchor
            masks = [
                np.broadcast_to(lay.count > 1, m.shape)
                for m, lay in zip(masks, layers, strict=True)
            ]
        lo, hi = _share_out(lo, hi, anchor_fine, layers, masks)
        if solves > ROUNDS + 1:
            break
    viol = max(sub.max_violation(res.x), *(h.violation(res.x) for h in holds))
    return replace(res, max_violation=viol, objective=sub.objective(res.x)), solves
