"""The failsafe: decide a subproblem's feasibility exactly and relax it minimally.

JASON (JSR-19-2F) sec. 5.7: when the constraints of a parent-with-children problem conflict (a
"failed solve"), "the constraints impeding solution are relaxed and the optimizer finds the
closest feasible solution meaning a violation of the exact constraint will be allowed".
Typical cause: a block has an occupied group-quarters facility of a type (lower bound
>= 1 person of that type) but the parent's histogram has nobody of that type left.

Two things never move. The parent's counts: they are already published at the level
above, and keeping them is what keeps the hierarchy consistent. And the invariants: an
exact child total (``total_lower == total_upper``, e.g. a state's population) is
published exactly, and the 2020 production system likewise stops with an error rather
than relax one (``programs/optimization/sequential_optimizers.py`` raises when even the
failsafe solve fails). Only *constraints* move: the children's group bounds
(``group_lower``/``group_upper``, implied by the facility counts) and non-exact total
bounds. The relaxation solves, as one integer min-cost flow on the subproblem network
(:mod:`censusdp.release.topdown._flow`),

    minimise   sum_{i,g} (max(0, L_ig - s_ig) + max(0, s_ig - U_ig))
             + W * sum_{i: T_lo_i < T_hi_i} (max(0, T_lo_i - t_i) + max(0, t_i - T_hi_i))
    over integer flows X >= 0 with sum_i X[i, j] = p_j and t_i = T_i for every invariant,
    s_ig = sum_{j in g} X[i, j],  t_i = sum_j X[i, j],

with ``W = TOTAL_WEIGHT`` (1000). A zero optimum proves feasibility (the network is
totally unimodular, so the integer and real problems agree). Otherwise each violated bound
is moved to the flow's value (``L' = min(L, s)``, ``U' = max(U, s)``), which is the minimal
relaxation and makes the relaxed subproblem feasible, witnessed by that flow. When no flow
meets the invariants (a child group's total, a state's held on its AIAN and non-AIAN
parts, is one: always a fixed arc), :func:`make_feasible` raises :class:`~censusdp.errors.InfeasibleError`
naming the subproblem, the children whose invariants cannot be met, and why (group bounds
can always move, so the only obstruction is that the invariant totals need more persons
than the parent holds, or do not add up to it when every child has one).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from censusdp.errors import InfeasibleError, InternalError
from censusdp.release.topdown import _flow
from censusdp.release.topdown.problem import Subproblem

__all__ = [
    "TOTAL_WEIGHT",
    "FailsafeReport",
    "Relaxation",
    "check_feasible",
    "make_feasible",
]

TOTAL_WEIGHT = 1000
"""Cost of relaxing a child's total by one person, relative to one person of a group bound."""


@dataclass(frozen=True)
class Relaxation:
    """One relaxed bound.

    Attributes:
        child: index of the child (row of the subproblem).
        kind: ``"group"`` or ``"total"``.
        group: the group index for ``kind == "group"``, else ``None``.
        side: ``"lower"`` or ``"upper"``.
        old: the bound before relaxation.
        new: the bound after relaxation.
    """

    child: int
    kind: str
    group: int | None
    side: str
    old: float
    new: float

    @property
    def amount(self) -> float:
        """How far the bound moved (persons)."""
        return abs(self.old - self.new)

    def to_dict(self) -> dict:
        """A JSON-ready record."""
        return {
            "child": self.child,
            "kind": self.kind,
            "group": self.group,
            "side": self.side,
            "old": self.old,
            "new": self.new,
        }


@dataclass(frozen=True)
class FailsafeReport:
    """What the failsafe did to one subproblem.

    Attributes:
        feasible: whether the original subproblem was feasible.
        relaxations: every bound that moved.
        seconds: time spent deciding and relaxing.
        label: the subproblem's label.
    """

    feasible: bool
    relaxations: tuple[Relaxation, ...] = field(default=())
    seconds: float = 0.0
    label: str = ""

    @property
    def used(self) -> bool:
        """True if any bound was relaxed."""
        return bool(self.relaxations)

    @property
    def relaxed(self) -> bool:
        """Alias of :attr:`used` (the subproblem was relaxed)."""
        return self.used

    @property
    def total_relaxation(self) -> float:
        """Sum of the amounts of all relaxations (persons)."""
        return float(sum(r.amount for r in self.relaxations))

    def to_dict(self) -> dict:
        """A JSON-ready record for the run manifest."""
        return {
            "label": self.label,
            "feasible": self.feasible,
            "total_relaxation": self.total_relaxation,
            "relaxations": [r.to_dict() for r in self.relaxations],
            "seconds": self.seconds,
        }


def _penalty_arcs(
    net: _flow.Network,
    tails: np.ndarray,
    heads: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    weight: int,
) -> None:
    """Arcs whose flow ``f`` costs ``weight * (max(0, lo - f) + max(0, f - hi))`` + const."""
    inf = _flow.INF_CAP
    lo = lo.ravel()
    hi = hi.ravel()
    first = np.minimum(lo, hi)
    net.add(tails, heads, 0, first, -weight)
    middle = np.where(hi >= inf, inf, np.abs(hi - lo))
    net.add(tails, heads, 0, middle, 0)
    net.add(tails, heads, 0, inf, weight)


def _exact_totals(sub: Subproblem) -> np.ndarray:
    """``(k,)`` True where a child's total is an invariant (lower == upper, finite)."""
    return np.isfinite(sub.total_upper) & (sub.total_lower == sub.total_upper)


def _relaxation_flow(sub: Subproblem, *, hard_invariants: bool) -> np.ndarray | None:
    """Group sums ``s`` (k, G) of a minimum-relaxation integer flow (totals are its row sums).

    With ``hard_invariants`` the invariant (exact) totals are fixed arcs; returns ``None``
    when no flow meets them. Otherwise every total has penalty arcs (weight
    :data:`TOTAL_WEIGHT`), and a flow always exists.
    """
    k, c, n_groups = sub.k, sub.c, sub.G
    root = sub.parent is None
    lay = _flow.layout(c, k, n_groups, root=root)
    gl, gu = _flow.int_bounds(sub.group_lower, sub.group_upper)
    tl, tu = _flow.int_bounds(sub.total_lower, sub.total_upper)
    # a child group's total (a state's, held on its parts) is an invariant: always fixed
    rhs = _flow.child_group_rhs(sub.child_group, sub.group_totals, np.zeros(k))
    supply = np.zeros(lay.n_nodes + rhs.size, dtype=np.int64)
    inf = _flow.INF_CAP
    if root:
        big = int(np.maximum(tl, gl.sum(axis=1)).sum()) + int(rhs.sum()) + 1
        supply[lay.source] = big
        supply[lay.sink] = -big
    else:
        supply[:c] = sub.parent
        supply[lay.sink] = -int(sub.parent.sum())
    net = _flow.Network(lay.n_nodes + rhs.size, supply)
    tails, heads = lay.cell_arcs(k, sub.groups, n_groups)
    net.add(tails, heads, 0, inf, 0)
    gt, gh = lay.group_arcs(k, n_groups)
    g_start = sum(t.size for t in net.tails)
    _penalty_arcs(net, gt, gh, gl, gu, 1)
    ct, _ = lay.child_arcs(k)
    ch = _flow.child_heads(sub.child_group, k, lay.sink, lay.n_nodes)
    _flow.add_child_group_arcs(net, lay.n_nodes, lay.sink, rhs)
    hard = _exact_totals(sub) if hard_invariants else np.zeros(k, dtype=bool)
    if hard.any():
        net.add(ct[hard], ch[hard], tl[hard], tl[hard], 0)
    if (~hard).any():
        _penalty_arcs(net, ct[~hard], ch[~hard], tl[~hard], tu[~hard], TOTAL_WEIGHT)
    if root:
        net.add([lay.source], [lay.sink], 0, inf, 0)
    flow = _flow.solve(net, "ortools")
    if flow is None:
        if hard_invariants or rhs.size:
            return None
        raise InternalError(f"subproblem {sub.label!r}: the relaxation network has no flow")
    n_g = k * n_groups
    s = sum(flow[g_start + m * n_g : g_start + (m + 1) * n_g] for m in range(3))
    return s.reshape(k, n_groups)


def _invariant_error(sub: Subproblem) -> InfeasibleError:
    """Say which invariant totals cannot be met and why (no relaxation may move them).

    Group bounds can always be relaxed, so the invariants fail only through the parent's
    column sums: the exact children need more persons than the parent holds, or, when
    every child is exact, their totals do not add up to the parent's.
    """
    exact = _exact_totals(sub)
    tl, _ = _flow.int_bounds(sub.total_lower, sub.total_upper)
    names = [sub.child_name(int(i)) for i in np.flatnonzero(exact)]
    need = int(tl[exact].sum())
    covered = exact.copy()
    if sub.child_group is not None:  # a state's total held on its parts: also an invariant
        for m in range(sub.n_child_groups):
            parts = np.flatnonzero(sub.child_group == m)
            names.append(" + ".join(sub.child_name(int(i)) for i in parts))
            need += int(sub.group_totals[m])
            covered[parts] = True
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    if sub.parent is not None:
        have = int(sub.parent.sum())
        relation = "differ from" if covered.all() else "exceed"
        why = (
            f"the invariant totals of {shown} sum to {need} persons, which {relation} the "
            f"{have} persons the parent holds"
        )
    else:
        why = f"the invariant totals of {shown} ({need} persons) conflict with the bounds"
    return InfeasibleError(
        f"subproblem {sub.label!r} is infeasible without moving an invariant, which the "
        f"failsafe never does: {why}"
    )


def check_feasible(sub: Subproblem) -> bool:
    """Decide exactly whether an integer solution of ``sub`` exists."""
    s = _relaxation_flow(sub, hard_invariants=False)
    if s is None:  # a child group's total cannot be met
        return False
    t = s.sum(axis=1)
    gl, gu = _flow.int_bounds(sub.group_lower, sub.group_upper)
    tl, tu = _flow.int_bounds(sub.total_lower, sub.total_upper)
    return bool(((s >= gl) & (s <= gu)).all() and ((t >= tl) & (t <= tu)).all())


def make_feasible(sub: Subproblem) -> tuple[Subproblem, FailsafeReport]:
    """Return ``sub`` unchanged if feasible, else a minimally relaxed feasible copy.

    See the module docstring for the relaxation problem (JASON (JSR-19-2F) sec. 5.7, "failsafe").

    Args:
        sub: the subproblem as built by the driver.

    Returns:
        ``(sub', report)``: ``sub'`` is ``sub`` itself when it is feasible, otherwise a copy
        with relaxed constraint bounds (never an invariant) that has an integer solution; ``report`` lists every relaxed
        bound (child, group, side, old and new value) for the run manifest.

    Raises:
        InfeasibleError: when no relaxation of the constraints can restore feasibility
            without moving an invariant (an exact child total); the message names the
            subproblem, the child and why.
    """
    t0 = time.perf_counter()
    s = _relaxation_flow(sub, hard_invariants=True)
    if s is None:
        raise _invariant_error(sub)
    t = s.sum(axis=1)
    gl, gu = _flow.int_bounds(sub.group_lower, sub.group_upper)
    tl, tu = _flow.int_bounds(sub.total_lower, sub.total_upper)
    # Integer versions of the bounds are what the solution must meet exactly.
    new_gl = np.minimum(gl, s)
    new_gu = np.maximum(gu, s)
    new_tl = np.minimum(tl, t)
    new_tu = np.maximum(tu, t)
    relax: list[Relaxation] = []
    for i, g in zip(*np.nonzero(new_gl < gl), strict=True):
        relax.append(
            Relaxation(int(i), "group", int(g), "lower", float(gl[i, g]), float(new_gl[i, g]))
        )
    for i, g in zip(*np.nonzero(new_gu > gu), strict=True):
        relax.append(
            Relaxation(int(i), "group", int(g), "upper", float(gu[i, g]), float(new_gu[i, g]))
        )
    for i in np.flatnonzero(new_tl < tl):
        relax.append(Relaxation(int(i), "total", None, "lower", float(tl[i]), float(new_tl[i])))
    for i in np.flatnonzero(new_tu > tu):
        relax.append(Relaxation(int(i), "total", None, "upper", float(tu[i]), float(new_tu[i])))
    if not relax:
        return sub, FailsafeReport(True, (), time.perf_counter() - t0, sub.label)

    def back(new: np.ndarray, old: np.ndarray, moved: np.ndarray) -> np.ndarray:
        return np.where(moved, new.astype(np.float64), old)

    relaxed = sub.with_bounds(
        group_lower=back(new_gl, sub.group_lower, new_gl < gl),
        group_upper=back(new_gu, sub.group_upper, new_gu > gu),
        total_lower=back(new_tl, sub.total_lower, new_tl < tl),
        total_upper=back(new_tu, sub.total_upper, new_tu > tu),
    )
    if not check_feasible(relaxed):
        raise InternalError(f"failsafe relaxation of {sub.label!r} is still infeasible")
    return relaxed, FailsafeReport(False, tuple(relax), time.perf_counter() - t0, sub.label)
