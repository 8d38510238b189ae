"""A weighted row on the root's histogram: least squares under ``sum_j s_j x_j <= P``.

The household run needs, at the geounit where the person total is invariant, one linear
constraint that is not a group bound: its households' sizes must fit in the persons the
state can hold in households, ``sum_j s_j x_j <= P`` with ``s_j`` the size of cell ``j``'s
households (:mod:`censusdp.release.household_consistency`). The group and total bounds
of a :class:`~censusdp.release.topdown.problem.Subproblem` are laminar, which the
rounding network needs; a weighted row is not. :class:`RootCap` is therefore handled in
the root's task (:func:`solve_capped`, :func:`repair_counts`), around the least-squares
backends and the rounder, which are left as they are.

**Least squares.** The Lagrangian of

    minimise  f(x) = sum_q w_q || A_q x - y_q ||^2   subject to the subproblem's
              constraints and  s'x <= P

is ``f(x) + lam (s'x - P)``. When ``s`` is a function of the answer rows of a measured
query ``q`` (``s_j = t_{row_q(j)}``; the detailed query, whose rows are the cells, always
qualifies), ``w_q ||A_q x - (y_q - lam t / (2 w_q))||^2 = w_q ||A_q x - y_q||^2 +
lam s'x + const``: the penalised problem is the subproblem itself with ``q``'s noisy
answers moved by ``-lam t / (2 w_q)``, which every backend solves as it is. By
Lagrangian duality (linear constraints, so no constraint qualification is needed) the
constrained optimum is the penalised optimum ``x(lam*)`` for the ``lam* >= 0`` where
``s'x(lam*) = P`` (``lam* = 0`` when ``s'x(0) <= P`` already). ``s'x(lam)`` does not
increase with ``lam`` (from the two optimality inequalities of ``lam_1`` and ``lam_2``:
``(lam_1 - lam_2)(s'x_1 - s'x_2) <= 0``) and is continuous where ``f`` is strictly
convex (a query that sees every cell alone makes it so), so ``lam*`` is found by
bracketing and regula falsi (Illinois) on ``s'x(lam) - P``, each step one solve, and the
step kept is always one with ``s'x(lam) <= P``. A lower bound ``s'x >= M`` (a state
without group quarters, whose persons only households can hold) is found the same way
with ``lam < 0``.

**Rounding.** The rounder keeps every laminar constraint and moves each cell by less than
one, so the rounded ``n`` may need up to a few persons more than ``x``. :func:`repair_counts`
then takes households off one at a time, first from the cells rounded up the most, each
step lowering ``s'n`` by ``s_j >= 1``, until ``s'n <= P``. It is provably possible when
the lower bounds are zero (the household run: groups and totals in ``[0, upper]``):
taking one off a positive cell keeps every upper bound and every zero lower bound, and
``n = 0`` meets ``s'n = 0 <= P``; so the repair stops after at most ``s'n - P`` steps.
Where a bound blocks it (a positive lower bound when above ``P``; when below a lower
side ``M``, the households already at their housing units), one unit is moved instead
between two cells of the same group whose weights differ (a household of one size made
one of another), which keeps every group's and the total's count; only where no such
pair is left does the repair raise a one-line
:class:`~censusdp.errors.InfeasibleError` naming the geounit. Only a task of one unit
(the root) takes a cap: with several children the row would couple them through the
parent's column sums, which taking a household off one child breaks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from censusdp.errors import InfeasibleError, InternalError
from censusdp.release.topdown.problem import Subproblem
from censusdp.release.topdown.solvers.base import RealSolution
from censusdp.release.topdown.solvers.least_squares import solve_l2

__all__ = ["MAX_SOLVES", "RootCap", "capped_query", "repair_counts", "solve_capped"]

MAX_SOLVES = 40
"""At most this many least-squares solves find the multiplier (bracket and regula falsi)."""

_TOL = 0.5
"""Stop when ``s'x(lam)`` is within this many persons below ``P``: the rounding moves it
by more, and :func:`repair_counts` makes the integer answer exact."""

_EPS = 1e-9
"""A solution whose weighted sum is past its bound by at most this relative amount (the
backends' own tolerance) is on the bound: rounding and :func:`repair_counts` follow."""


@dataclass(frozen=True, eq=False)
class RootCap:
    """``lower <= sum_j weights[j] x_j <= upper`` on the root's histogram (every cell of the schema).

    Attributes:
        weights: ``(cells,)`` non-negative integer weight of each cell of the schema (a
            household's size, 7 for "7 or more").
        upper: the right-hand side (the persons the root can hold in households).
        lower: the row's lower bound (0: none; the persons the root must hold in
            households when nothing else can hold them).
        what: what the row is, for messages (``"household persons"``).
    """

    weights: np.ndarray
    upper: float
    lower: float = 0.0
    what: str = "weighted sum"

    def __post_init__(self) -> None:
        w = np.ascontiguousarray(self.weights, dtype=np.float64)
        if w.ndim != 1 or (w < 0).any() or not np.array_equal(w, np.rint(w)):
            raise InternalError("a root cap's weights must be non-negative integers (1-D)")
        if not np.isfinite(self.upper) or self.upper < 0:
            raise InternalError(
                f"a root cap's upper bound must be finite and >= 0, got {self.upper}"
            )
        if not 0 <= self.lower <= self.upper:
            raise InternalError(
                f"a root cap's lower bound {self.lower} is not in [0, {self.upper}]"
            )
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "upper", float(np.floor(self.upper)))
        object.__setattr__(self, "lower", float(np.ceil(self.lower)))


def capped_query(sub: Subproblem, weights: np.ndarray) -> int:
    """The measured query whose answer rows determine ``weights`` (on the kept cells),
    the most precise of them; raises :class:`~censusdp.errors.InternalError` when none
    does (the row cannot then be written as a shift of noisy answers)."""
    best, best_w = -1, -1.0
    for q, rows in enumerate(sub.query_rows):
        per_row = np.zeros(sub.query_sizes[q])
        per_row[rows] = weights
        w = float(sub.child_weights(q).min()) if sub.k else 0.0
        if np.array_equal(per_row[rows], weights) and w > 0 and w > best_w:
            best, best_w = q, w
    if best < 0:
        raise InternalError(f"{sub.label}: no measured query determines the capped row's weights")
    return best


def _shifted(sub: Subproblem, q: int, weights: np.ndarray, lam: float) -> Subproblem:
    """``sub`` with query ``q``'s answers moved by ``-lam t / (2 w_q)`` (module docstring)."""
    if lam == 0.0:
        return sub
    t = np.zeros(sub.query_sizes[q])
    t[sub.query_rows[q]] = weights
    shift = lam * t[None, :] / (2.0 * sub.child_weights(q)[:, None])
    noisy = tuple(y - shift if i == q else y for i, y in enumerate(sub.noisy))
    return replace(sub, noisy=noisy)


def solve_capped(
    sub: Subproblem, cap: RootCap, weights: np.ndarray, method: str = "auto"
) -> tuple[RealSolution, float, int]:
    """The least-squares solution of ``sub`` (one unit) under ``lower <= weights' x <= upper``.

    Args:
        sub: a subproblem of one child (the root).
        cap: the row's bounds.
        weights: ``(c,)`` weight of each kept cell (``cap.weights`` on them).
        method: the least-squares method
            (:func:`~censusdp.release.topdown.solvers.least_squares.solve_l2`).

    Returns:
        The solution (its ``objective`` that of ``sub``'s own answers), the multiplier
        ``lam`` (negative when the lower bound binds) and the number of solves.
    """
    if sub.k != 1:
        raise InternalError(f"{sub.label}: a weighted row caps a task of one unit, not {sub.k}")
    q = capped_query(sub, weights)
    solves = [0]

    def weighted(lam: float) -> tuple[RealSolution, float]:
        solves[0] += 1
        s = solve_l2(_shifted(sub, q, weights, lam), method=method)
        return s, float(s.x[0] @ weights)

    sol, w0 = weighted(0.0)
    if cap.lower <= w0 <= cap.upper:
        return sol, 0.0, solves[0]
    # sign +1: lower the weighted sum to ``upper`` (lam > 0); -1: raise it to ``lower``
    sign, target = (1.0, cap.upper) if w0 > cap.upper else (-1.0, cap.lower)

    def excess(mu: float) -> tuple[RealSolution, float]:  # does not increase with mu
        s, w = weighted(sign * mu)
        return s, sign * (w - target)

    positive = sol.x[0] > 0
    f0 = sign * (w0 - target)
    mu = 2.0 * float(sub.child_weights(q)[0]) * f0 / max(float((weights[positive] ** 2).sum()), 1.0)
    lo, f_lo = 0.0, f0
    hi_sol, f_hi = excess(mu)
    while f_hi > _EPS * max(1.0, abs(target)):  # bracket: every step a larger multiplier
        if solves[0] >= MAX_SOLVES:
            raise InternalError(f"{sub.label}: no multiplier up to {mu:g} fits the weighted row")
        lo, f_lo, mu = mu, f_hi, mu * 4.0
        hi_sol, f_hi = excess(mu)
    hi, side, g_hi = mu, 0, f_hi  # g_hi: hi's own excess (f_hi is Illinois' halved one)
    while g_hi < -_TOL and solves[0] < MAX_SOLVES:  # regula falsi, Illinois
        mid = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        if not lo < mid < hi:
            mid = 0.5 * (lo + hi)
        s, f = excess(mid)
        if f > _EPS * max(1.0, abs(target)):
            lo, f_lo = mid, f
            f_hi = f_hi / 2 if side == -1 else f_hi
            side = -1
        else:
            hi, f_hi, g_hi, hi_sol = mid, f, f, s
            f_lo = f_lo / 2 if side == 1 else f_lo
            side = 1
    return replace(hi_sol, objective=sub.objective(hi_sol.x)), sign * hi, solves[0]


def repair_counts(
    sub: Subproblem, counts: np.ndarray, x: np.ndarray, cap: RootCap, weights: np.ndarray
) -> tuple[np.ndarray, int]:
    """Rounded ``counts`` of one unit moved into ``cap.lower <= weights' counts <= cap.upper``.

    Above ``upper``, one unit at a time is taken off the cell rounded up the most
    (``counts - x`` largest, after the units already taken off), of those whose weight does not take the sum below
    ``lower``, keeping every group's and the total's lower bound (module docstring:
    provably enough when the lower bounds are zero). Below ``lower``, one is added to
    the cell rounded down the most, of those whose weight does not take it above
    ``upper``, keeping every upper bound.

    Returns:
        The repaired counts and the number of units moved.

    Raises:
        InfeasibleError: one line naming the unit, when its bounds leave no cell to move.
    """
    n = np.asarray(counts, dtype=np.int64).copy()
    w = float(n[0] @ weights)
    if cap.lower <= w <= cap.upper:
        return n, 0
    step = -1 if w > cap.upper else 1
    moved = 0
    while not cap.lower <= w <= cap.upper:
        gs, total = sub.group_sums(n)[0], float(n[0].sum())
        if step < 0:
            room = (n[0] > 0) & (gs - np.ceil(sub.group_lower[0]) > 0)[sub.groups]
            room &= total > np.ceil(sub.total_lower[0])
            room &= (weights > 0) & (w - weights >= cap.lower)
        else:
            room = (gs < np.floor(sub.group_upper[0]))[sub.groups] & (total < sub.total_upper[0])
            room &= (weights > 0) & (w + weights <= cap.upper)
        if not room.any():
            pair = _swap(sub, n[0] - x[0], n[0], weights, w, cap, step)
            if pair is None:
                raise InfeasibleError(
                    f"{sub.child_name(0)}: its counts give {w:g} {cap.what}, which must lie "
                    f"in [{cap.lower:g}, {cap.upper:g}], and its bounds leave no count to move"
                )
            i, j = pair
            n[0, i] -= 1
            n[0, j] += 1
            w += weights[j] - weights[i]
            moved += 1
            continue
        # the cell rounded furthest in the direction of the move (now, after earlier moves)
        j = int(np.argmax(np.where(room, -step * (n[0] - x[0]), -np.inf)))
        n[0, j] += step
        w += step * weights[j]
        moved += 1
    return n, moved


def _swap(
    sub: Subproblem,
    rounded_up: np.ndarray,
    n: np.ndarray,
    weights: np.ndarray,
    w: float,
    cap: RootCap,
    step: int,
) -> tuple[int, int] | None:
    """One unit moved from a cell ``i`` to a cell ``j`` of the same group whose weight
    moves the weighted sum ``w`` toward the cap without passing it (``step`` +1: up,
    -1: down): every group's and the total's count is kept, so every bound still holds.
    For when no unit can be added or taken off (the households at their housing units
    and their sizes short of the persons, or the reverse). Of the pairs, the one whose
    ``i`` was rounded up the most and ``j`` down the most (``rounded_up`` is ``n - x``);
    ``None`` when there is none."""
    best, pair = -np.inf, None
    values = np.unique(weights)
    for a in values:
        source = (n > 0) & (weights == a)
        if not source.any():
            continue
        for b in values:
            change = b - a
            passes = w + change > cap.upper if step > 0 else w + change < cap.lower
            if step * change <= 0 or passes:
                continue
            target = weights == b
            for g in np.unique(sub.groups[source]):
                src = np.flatnonzero(source & (sub.groups == g))
                dst = np.flatnonzero(target & (sub.groups == g))
                if src.size == 0 or dst.size == 0:
                    continue
                i = int(src[np.argmax(rounded_up[src])])
                j = int(dst[np.argmin(rounded_up[dst])])
                score = rounded_up[i] - rounded_up[j]
                if score > best:
                    best, pair = score, (i, j)
    return pair
