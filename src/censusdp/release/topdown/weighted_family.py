"""A weighted row on every child of a family: ``lower_c <= sum_j s_j x_{c,j} <= upper_c``.

:mod:`~censusdp.release.topdown.weighted` keeps one weighted row on the root, a task of
one unit. The household run of an input of several states needs the same row on each
state, whose person total is invariant too (:mod:`censusdp.release.household_consistency`):
the nation's households fit the nation's persons, but the states' least squares share
them out without looking at each state's own persons. The states are the children of one
family (the nation's), tied by the parent's counts: every cell's children add to the
nation's count. :class:`UnitCaps` holds the rows of a level's geounits,
:func:`solve_family_capped` and :func:`repair_family_counts` keep them in the family's
least squares and rounding.

**Least squares.** With one multiplier ``lam_c`` a child, the Lagrangian of

    minimise  f(x) = sum_q w_q || A_q x - y_q ||^2   subject to the subproblem's
              constraints and  lower_c <= s'x_c <= upper_c  for every child c

is ``f(x) + sum_c lam_c (s'x_c - b_c)``: as for the root, the penalised problem is the
subproblem with child ``c``'s noisy answers of a query ``q`` whose rows determine ``s``
moved by ``-lam_c t / (2 w_{q,c})``, which every backend solves as it is. ``s'x_c(lam)``
does not increase with ``lam_c`` (the other multipliers fixed: the argument of
:mod:`~censusdp.release.topdown.weighted` on child ``c``'s term). The multipliers are
found one child at a time: the child furthest outside its interval gets the ``lam_c``
that brings it to the interval's nearer end (bracketing and regula falsi, each step one
solve), then the next, until every child is inside (a coordinate ascent on the concave
dual; a child's row moves the others' through the parent's counts, by as much as it
moves its own in total). Every multiplier is zero when no row binds, so the family's
solution is then its unconstrained one, solve for solve.

**Rounding.** The rounder keeps every laminar constraint and the parent's counts;
:func:`repair_family_counts` then moves one unit of one cell at a time from a child to
another (so the parent's counts stay), from the child outside its interval to one with
room, each move bringing the first closer to its interval without taking the second out
of its own or past any group or total bound. Where no unit can move alone (the other
child at its total's bound: a state whose households fill its housing units), two are
exchanged in one group: a unit of a heavier cell one way, of a lighter cell the other,
which keeps both totals and moves the rows by the difference. Each step lowers the
children's summed distance to their intervals by at least one, so the repair ends. The
children's rows add up to the parent's, which the parent's own row held inside the sum
of their intervals, so some child always has room; that a move or an exchange reaches
it is not guaranteed, and when none is left a one-line
:class:`~censusdp.errors.InfeasibleError` names the child (no bound is relaxed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from censusdp.errors import InfeasibleError, InternalError
from censusdp.release.topdown.problem import Subproblem
from censusdp.release.topdown.solvers.base import RealSolution
from censusdp.release.topdown.solvers.least_squares import solve_l2
from censusdp.release.topdown.weighted import capped_query

__all__ = ["MAX_FAMILY_SOLVES", "UnitCaps", "repair_family_counts", "solve_family_capped"]

MAX_FAMILY_SOLVES = 80
"""At most this many least-squares solves find a family's multipliers; the rounding's
repair then makes the integer answer exact (or names the child it cannot)."""

_TOL = 0.5
"""A child is brought to within this many persons inside its interval's nearer end, and
one within this many outside it is left to the rounding's repair."""

_EPS = 1e-9
"""A weighted sum past its bound by at most this relative amount is on the bound."""


@dataclass(frozen=True, eq=False)
class UnitCaps:
    """``lower[u] <= sum_j weights[j] x_{u,j} <= upper[u]`` on each geounit ``u`` of a level.

    Attributes:
        weights: ``(cells,)`` non-negative integer weight of each cell of the schema.
        lower, upper: ``(units,)`` the rows' bounds (integers, ``0 <= lower <= upper``).
        what: what the rows are, for messages (``"household persons"``).
    """

    weights: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    what: str = "weighted sum"

    def __post_init__(self) -> None:
        w = np.ascontiguousarray(self.weights, dtype=np.float64)
        lo = np.ceil(np.asarray(self.lower, dtype=np.float64))
        hi = np.floor(np.asarray(self.upper, dtype=np.float64))
        if w.ndim != 1 or (w < 0).any() or not np.array_equal(w, np.rint(w)):
            raise InternalError("a unit cap's weights must be non-negative integers (1-D)")
        if lo.shape != hi.shape or lo.ndim != 1 or not np.isfinite(hi).all():
            raise InternalError("a unit cap's bounds must be finite, one a unit")
        if (lo < 0).any() or (lo > hi).any():
            raise InternalError("a unit cap's bounds must satisfy 0 <= lower <= upper")
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "lower", lo)
        object.__setattr__(self, "upper", hi)

    def on(self, units: slice) -> UnitCaps:
        """The rows of the geounits ``units`` (a family's children)."""
        return UnitCaps(self.weights, self.lower[units], self.upper[units], self.what)


def _shifted(sub: Subproblem, q: int, weights: np.ndarray, lam: np.ndarray) -> Subproblem:
    """``sub`` with child ``c``'s answers of query ``q`` moved by ``-lam_c t / (2 w_{q,c})``."""
    if not lam.any():
        return sub
    t = np.zeros(sub.query_sizes[q])
    t[sub.query_rows[q]] = weights
    shift = lam[:, None] * t[None, :] / (2.0 * sub.child_weights(q)[:, None])
    noisy = tuple(y - shift if i == q else y for i, y in enumerate(sub.noisy))
    return replace(sub, noisy=noisy)


def _outside(sums: np.ndarray, caps: UnitCaps, slack: float = 0.0) -> np.ndarray:
    """How far each child's weighted sum is outside its interval, past ``slack`` plus
    the backends' relative tolerance (0 inside)."""
    slack = slack + _EPS * np.maximum(1.0, caps.upper)
    return np.maximum(np.maximum(sums - caps.upper, caps.lower - sums) - slack, 0.0)


def _search(
    excess: Callable[[float], tuple[RealSolution, float]], mu: float, f0: float, budget: int
) -> tuple[RealSolution | None, float, int]:
    """The smallest step found ``mu >= 0`` with ``-_TOL <= excess(mu) <= eps`` (``excess``
    does not increase; ``excess(0) = f0 > 0``): bracketing then regula falsi (Illinois).
    Returns the solution there, ``mu`` and the solves spent (``None``: out of solves
    before the bracket closed)."""
    used = 0
    lo, f_lo = 0.0, f0
    sol, f_hi = excess(mu)
    used += 1
    while f_hi > _EPS:
        if used >= budget:
            return None, mu, used
        lo, f_lo, mu = mu, f_hi, mu * 4.0
        sol, f_hi = excess(mu)
        used += 1
    hi, side, g_hi = mu, 0, f_hi
    while g_hi < -_TOL and used < budget:
        mid = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        if not lo < mid < hi:
            mid = 0.5 * (lo + hi)
        s, f = excess(mid)
        used += 1
        if f > _EPS:
            lo, f_lo = mid, f
            f_hi = f_hi / 2 if side == -1 else f_hi
            side = -1
        else:
            hi, f_hi, g_hi, sol = mid, f, f, s
            f_lo = f_lo / 2 if side == 1 else f_lo
            side = 1
    return sol, hi, used


def solve_family_capped(
    sub: Subproblem, caps: UnitCaps, weights: np.ndarray, method: str = "auto"
) -> tuple[RealSolution, np.ndarray, int]:
    """The least-squares solution of ``sub`` with every child ``c`` held to
    ``caps.lower[c] <= weights' x_c <= caps.upper[c]`` (module docstring).

    Args:
        sub: a family's subproblem (``caps`` has one row a child).
        caps: the children's rows.
        weights: ``(c,)`` weight of each kept cell (``caps.weights`` on them).
        method: the least-squares method
            (:func:`~censusdp.release.topdown.solvers.least_squares.solve_l2`).

    Returns:
        The solution (its ``objective`` that of ``sub``'s own answers), the multipliers
        (one a child) and the number of solves. A child still outside its interval when
        the solves run out is left to :func:`repair_family_counts`.
    """
    if caps.lower.shape != (sub.k,):
        raise InternalError(f"{sub.label}: {caps.lower.size} capped rows for {sub.k} children")
    q = capped_query(sub, weights)
    lam = np.zeros(sub.k)
    sol = solve_l2(sub, method=method)
    solves = 1
    sums = sol.x @ weights
    # within _TOL of its interval, a child is left to the rounding's repair (two children
    # tied by the parent, each on its bound, would otherwise chase each other's last digits)
    while solves < MAX_FAMILY_SOLVES and _outside(sums, caps, _TOL).any():
        c = int(np.argmax(_outside(sums, caps, _TOL)))
        sign, target = (1.0, caps.upper[c]) if sums[c] > caps.upper[c] else (-1.0, caps.lower[c])
        base = lam.copy()

        def excess(mu: float, c: int = c, sign: float = sign, target: float = target,
                   base: np.ndarray = base) -> tuple[RealSolution, float]:  # fmt: skip
            at = base.copy()
            at[c] += sign * mu
            s = solve_l2(_shifted(sub, q, weights, at), method=method)
            return s, sign * (float(s.x[c] @ weights) - target)

        positive = sol.x[c] > 0
        f0 = sign * (float(sums[c]) - target)
        wq = float(sub.child_weights(q)[c])
        mu0 = 2.0 * wq * f0 / max(float((weights[positive] ** 2).sum()), 1.0)
        found, mu, used = _search(excess, max(mu0, 1e-12), f0, MAX_FAMILY_SOLVES - solves)
        solves += used
        if found is None:
            break
        lam[c] += sign * mu
        sol, sums = found, found.x @ weights
    return replace(sol, objective=sub.objective(sol.x)), lam, solves


def _single_move(
    sub: Subproblem, n: np.ndarray, x: np.ndarray, caps: UnitCaps, weights: np.ndarray, c: int
) -> tuple[float, list[tuple[int, int, int]]] | None:
    """The best move of one unit of one cell between child ``c`` (outside its interval)
    and another, as ``(score, [(giver, taker, cell)])``; ``None`` when there is none."""
    sums, over = n @ weights, bool((n[c] @ weights) > caps.upper[c])
    gs, totals = sub.group_sums(n), n.sum(axis=1)
    gl, gu = np.ceil(sub.group_lower), np.floor(sub.group_upper)
    best: tuple[float, list[tuple[int, int, int]]] | None = None
    for p in range(sub.k):
        if p == c:
            continue
        giver, taker = (c, p) if over else (p, c)
        room = (n[giver] > 0) & (weights > 0)
        room &= (gs[giver] - gl[giver] > 0)[sub.groups]
        room &= totals[giver] > np.ceil(sub.total_lower[giver])
        room &= (gs[taker] < gu[taker])[sub.groups] & (totals[taker] < sub.total_upper[taker])
        room &= (sums[giver] - weights >= caps.lower[giver]) & (
            sums[taker] + weights <= caps.upper[taker]
        )
        if room.any():
            score = np.where(room, (n[giver] - x[giver]) - (n[taker] - x[taker]), -np.inf)
            j = int(np.argmax(score))
            if best is None or score[j] > best[0]:
                best = (float(score[j]), [(giver, taker, j)])
    return best


def _swap(
    sub: Subproblem, n: np.ndarray, x: np.ndarray, caps: UnitCaps, weights: np.ndarray, c: int
) -> tuple[float, list[tuple[int, int, int]]] | None:
    """The best exchange, when no single unit can move (a child at its total's bound): a
    unit of weight ``a`` from the giver to the taker and one of weight ``b < a`` back, in
    two cells of one group, so both children keep their totals and groups and the giver's
    row falls by ``a - b``. ``None`` when there is none."""
    if np.unique(sub.groups).size > 1:
        return None
    sums, over = n @ weights, bool((n[c] @ weights) > caps.upper[c])
    diff = n - x
    values = np.unique(weights[weights > 0])
    best: tuple[float, list[tuple[int, int, int]]] | None = None
    for p in range(sub.k):
        if p == c:
            continue
        giver, taker = (c, p) if over else (p, c)
        room = min(sums[giver] - caps.lower[giver], caps.upper[taker] - sums[taker])
        out = np.where(n[giver] > 0, diff[giver] - diff[taker], -np.inf)  # giver -> taker
        back = np.where(n[taker] > 0, diff[taker] - diff[giver], -np.inf)  # taker -> giver
        for a in values:
            ja = int(np.argmax(np.where(weights == a, out, -np.inf)))
            for b in values[(values < a) & (a - values <= room)]:
                jb = int(np.argmax(np.where(weights == b, back, -np.inf)))
                score = out[ja] + back[jb]
                if np.isfinite(score) and (best is None or score > best[0]):
                    best = (float(score), [(giver, taker, ja), (taker, giver, jb)])
    return best


def repair_family_counts(
    sub: Subproblem, counts: np.ndarray, x: np.ndarray, caps: UnitCaps, weights: np.ndarray
) -> tuple[np.ndarray, int]:
    """Rounded ``counts`` of a family moved into every child's interval (module
    docstring): one unit of one cell at a time from a child to another, the pair and
    cell rounded furthest apart (``counts - x`` highest at the giver, lowest at the
    taker), keeping the parent's counts and every group's and total's bounds; where no
    unit can move (the taker at its total's bound), two units exchanged, a heavier one
    for a lighter one (:func:`_swap`).

    Returns:
        The repaired counts and the number of units moved.

    Raises:
        InfeasibleError: one line naming the child, when no move is left.
    """
    n = np.asarray(counts, dtype=np.int64).copy()
    moved = 0
    while _outside(n @ weights, caps).any():
        c = int(np.argmax(_outside(n @ weights, caps)))
        best = _single_move(sub, n, x, caps, weights, c) or _swap(sub, n, x, caps, weights, c)
        if best is None:
            raise InfeasibleError(
                f"{sub.child_name(c)}: its counts give {n[c] @ weights:g} {caps.what}, which "
                f"must lie in [{caps.lower[c]:g}, {caps.upper[c]:g}], and no count can move "
                "to or from the other children within their bounds"
            )
        for giver, taker, j in best[1]:
            n[giver, j] -= 1
            n[taker, j] += 1
            moved += 1
    return n, moved
