"""The weighted non-negative least-squares stage of TopDown.

JASON (JSR-19-2F) sec. 5.7: "a least squares optimization which effects the Moore-Penrose inverse
subject to various constraints that the histogram being determined must be consistent with
the parent histogram"; Van Riper et al. (2020) sec. 2.2 ("minimizing the differences between that level's
set of noisy histograms and the output detailed histogram ... while matching invariants and
meeting other constraints ... the detailed histogram from the parent level"). For one
:class:`~censusdp.release.topdown.problem.Subproblem` we solve

    minimise   sum_q sum_i w_qi || A_q X[i] - y_q[i] ||^2,     w_qi = 1 / Var(y_q[i])
    subject to X >= 0, sum_i X[i, :] = p, L <= group sums <= U, T_lo <= totals <= T_hi.

Three backends:

* ``"activeset"`` (:mod:`censusdp.release.topdown._active_set`): a primal-dual active-set
  method whose linear systems are sized by the positive cells and the answers they
  touch (a 622 x 622 Cholesky at a dhc-lite root), first in the ``auto`` chain;
* ``"admm"`` (:mod:`censusdp.release.topdown._admm`): operator splitting that exploits the
  structure. Every child has the same Hessian ``H = sum_q w_q A_q'A_q``, so one
  factorisation of ``H + rho I`` serves all children and all iterations; the constraints
  split into two sets with cheap exact projections (per cell: non-negative with a fixed
  sum; per child: laminar group/total bounds).
* ``"clarabel"`` (:mod:`censusdp.release.topdown._clarabel`): Clarabel's interior-point method on
  a sparse formulation with auxiliary residuals; the generic fallback and cross-check.

``"auto"`` orders them per subproblem (:func:`_order`): the active set first when the
optimum is sparse (no parent, or a parent holding at most ``k c / 4`` persons) and
second otherwise; of the other two, Clarabel goes first for a single large child (the
root), for at most ``FEW_CELLS`` kept cells and when no measured query sees every kept
cell alone (a singular Hessian, where the ADMM crawls), ADMM first otherwise; a single
child of more than ``ADMM_MAX_ROOT_CELLS`` cells (a dhc-lite root) gets no ADMM. A dense
family with a singular Hessian (dhc-lite below the State) of more than
``INTERIOR_MIN_VARIABLES`` variables goes to the marginal-space interior point
(:mod:`censusdp.release.topdown._interior`) first, then Clarabel and the active set. When all
fail, the fallback is the integer flow closest to a non-negative least-squares point (:mod:`censusdp.release.topdown._nnls`), never the rounded raw noise; every failed
step is logged. A single child under a parent takes the parent's counts (a bypassed
spine geounit, not measured, is always such a child). Children measured with their own
budgets (``Subproblem.unit_weights``, a spine release's bypass) keep the ADMM when each
child's weights are one multiple of the query weights (what per-geounit budgets give:
:func:`censusdp.release.topdown._admm.child_scale`); otherwise the active set and
Clarabel (then the fallback) weigh them. Every answer is
validated: non-negativity, column sums, group and total bounds must hold to
``feas_tol * max(1, largest parent count)`` persons, tiny negatives are clipped and
columns rescaled to the parent exactly, and ``max_violation`` is reported.

Tolerances follow the noise: with ``Subproblem.noise_scale`` (the standard deviation of
its most precise measurement, set by the driver) the ADMM stops when its primal residual
is below ``NOISE_TOL = 1e-3`` of it (and the dual below twice that), instead of a fixed
``1e-6`` persons; a thousandth of the noise moves no released count in practice.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from censusdp.errors import InfeasibleError, InternalError
from censusdp.progress import logger
from censusdp.release.topdown._common import clean, compress, feasibility_tolerance
from censusdp.release.topdown.problem import Subproblem

__all__ = ["METHODS", "L2Result", "solve_l2"]

METHODS = ("auto", "activeset", "interior", "admm", "clarabel")
FEW_CELLS = 64
"""``auto`` solves subproblems with at most this many kept cells with Clarabel first."""
ADMM_MAX_ROOT_CELLS = 50_000
"""``auto`` leaves the ADMM out of the chain of a single child with more kept cells (a
dhc-lite root: the active set and Clarabel, then the NNLS point and flow)."""
INTERIOR_MIN_VARIABLES = 500_000
"""``auto`` tries the interior point before Clarabel on dense families with a singular
Hessian and more variables (children x kept cells) than this (above the largest family
measured, 150,000 variables, where Clarabel was faster)."""
NOISE_TOL = 1e-3
"""ADMM residual tolerance as a fraction of the subproblem's noise standard deviation."""


@dataclass(frozen=True)
class L2Result:
    """The least-squares solution of one subproblem.

    Attributes:
        x: ``(k, c)`` float64 solution (non-negative, columns summing to the parent).
        status: ``"optimal"``, or ``"feasible_fallback"`` when every solver failed and a
            feasible point (the integer flow closest to a non-negative least-squares
            point) is returned instead; the backends' own statuses are in
            ``solver_status``.
        method: the backend that produced ``x`` (``"admm"``, ``"clarabel"``,
            ``"parent"`` for a single child, ``"nnls-flow"`` for the fallback).
        iterations: iterations of that backend.
        seconds: wall time of the whole call (all attempts).
        max_violation: largest constraint violation of ``x`` in persons.
        objective: the weighted least-squares objective at ``x``.
        solver_status: the backend's status string.
        attempts: ``(method, status)`` of every backend tried, in order.
    """

    x: np.ndarray
    status: str
    method: str
    iterations: int
    seconds: float
    max_violation: float
    objective: float
    solver_status: str = ""
    attempts: tuple[tuple[str, str], ...] = ()


def _finish(sub: Subproblem, x: np.ndarray | None, tol: float) -> tuple[np.ndarray | None, float]:
    if x is None or not np.isfinite(x).all():
        return None, float("inf")
    x = clean(sub, x, tol)
    viol = sub.max_violation(x)
    return (x, viol) if viol <= tol else (None, viol)


def _order(sub: Subproblem, comp, method: str) -> tuple[str, ...]:
    """The backends to try, best first (``auto``), before the NNLS-and-flow fallback."""
    from censusdp.release.topdown._admm import DENSE_MAX, child_scale

    if sub.unit_weights is not None and child_scale(comp) is None:
        # children whose weights differ from query to query: the ADMM's one factorisation
        # needs every child's Hessian to be a multiple of one; the active set and
        # Clarabel weigh each child (a spine release's per-geounit budgets are multiples)
        if method in ("activeset", "clarabel"):
            return (method,)
        sparse = sub.parent is None or 4 * int(sub.parent.sum()) <= sub.k * sub.c
        return (
            ("activeset", "clarabel") if sparse and sub.c > FEW_CELLS else ("clarabel", "activeset")
        )
    if method != "auto":
        return (method,)

    # One large child (the root): nothing to share across children, and the
    # interior-point method is faster there.
    big_root = sub.k == 1 and sub.c > DENSE_MAX
    # Few kept cells (most block groups: 5-30 non-zero parent cells in generated
    # Vermont): the interior-point solve is small, and measured 1.2-1.7x faster than
    # the ADMM, which needs 700-5,000 iterations there. ADMM wins when many cells are
    # shared across children (county scale: 98x).
    few_cells = sub.c <= FEW_CELLS
    # Without a query that sees every kept cell alone (dhc-lite below the State), the
    # Hessian is singular, the ADMM crawls (3,000-12,700 iterations per dhc-lite block
    # family) and the interior-point method was 5-18x faster with the same objective.
    strict = comp.sees_every_cell()
    base = ("clarabel", "admm") if big_root or few_cells or not strict else ("admm", "clarabel")
    # The active-set method (``_active_set``) goes first when the optimum is sparse: its
    # systems are sized by the positive cells, and it measured 5-30x faster than
    # Clarabel at the dhc-lite root and block families with the same objective
    # (docs/estimation.md). A family whose parent holds more persons than a quarter of
    # its children x cells (a state's counties) has most cells positive, and the active
    # set's systems grow to the interior-point method's size; so do families of two
    # cells (housing units: every child's total exact, where it cycled). It then comes
    # second. So it does on families of at most ``FEW_CELLS`` kept cells (most block
    # groups' blocks): its Schur complement has a row per touched answer of every child,
    # more than the family's cells there (a 44-block family on 8 cells: 1.5 CPU s in
    # 0.4 s Cholesky factorisations, Clarabel 31 ms).
    sparse = sub.parent is None or 4 * int(sub.parent.sum()) <= sub.k * sub.c
    if sub.k == 1 and sub.c > ADMM_MAX_ROOT_CELLS:
        # A root this large (dhc-lite: 229,320 cells) makes the ADMM's sparse KKT
        # factorisation the size of the schema twice over: 20 iterations did not finish
        # in 10 minutes, where the NNLS point and flow after it take 11 s. Skip it.
        base = tuple(b for b in base if b != "admm")
    if sparse and sub.c > FEW_CELLS:
        return ("activeset", *base)
    if strict or sub.parent is None:
        # Dense families with a query that sees every cell alone (the Hessian is
        # definite): the first of Clarabel and the ADMM, the active set, the other;
        # the marginal-space interior point is Clarabel's first fallback.
        order = (base[0], "activeset", *base[1:])
        i = order.index("clarabel") + 1
        return (*order[:i], "interior", *order[i:])
    # Dense families with a singular Hessian (dhc-lite below the State: no query sees
    # every cell alone; most cells positive, the optimum a large face). The active set
    # jumps between vertices of that face: on full generated Vermont's County family (14
    # counties on 4,049 cells) it did not settle in 30 updates, and on four of its 14
    # Tract families it gave up after up to 85 CPU seconds. Clarabel, whose large
    # programs faer factors, goes first: on full Vermont's County family (14 counties on
    # 4,961 cells) 17.6 CPU s against 73.2 for the marginal-space interior point
    # (``_interior``), on its four slowest Tract families 1.5-6x faster (the largest, 34
    # tracts on 4,407 cells: 58 against 89 s, the same memory). With QDLDL it had been
    # the slower (122 and 411 s). The interior point, whose Newton systems are factored
    # child by child with dense BLAS, still goes first on families of more than
    # ``INTERIOR_MIN_VARIABLES`` variables, beyond what was measured.
    if sub.k * sub.c > INTERIOR_MIN_VARIABLES:
        return ("interior", "clarabel", "activeset", *base[1:])
    return ("clarabel", "interior", "activeset", *base[1:])


def _result(
    sub: Subproblem,
    x: np.ndarray,
    t0: float,
    attempts: list[tuple[str, str]],
    *,
    status: str = "optimal",
    iterations: int = 0,
    solver_status: str | None = None,
) -> L2Result:
    """An :class:`L2Result` for ``x``, produced by the last of ``attempts``."""
    return L2Result(
        x=x,
        status=status,
        method=attempts[-1][0],
        iterations=iterations,
        seconds=time.perf_counter() - t0,
        max_violation=sub.max_violation(x),
        objective=sub.objective(x),
        solver_status=attempts[-1][1] if solver_status is None else solver_status,
        attempts=tuple(attempts),
    )


def solve_l2(
    sub: Subproblem,
    *,
    method: str = "auto",
    tol: float = 1e-7,
    feas_tol: float = 1e-8,
    noise_tol: float = NOISE_TOL,
    max_iter: int | None = None,
) -> L2Result:
    """Solve the weighted non-negative least-squares stage for one subproblem.

    The backends form a chain that never rounds raw noise: ``auto`` tries the
    active-set method on the positive cells first, then the interior-point method
    (Clarabel) and the first-order method (ADMM) in the order that suits the
    subproblem, and when all fail it takes the integer flow closest to
    a non-negative least-squares point of the measurements (``status =
    "feasible_fallback"``, ``method = "nnls-flow"``). Every failed step is logged on the
    ``censusdp`` logger and listed in ``attempts``. A single child under a parent takes
    the parent's counts (``method = "parent"``): the column sums leave no other choice.

    Args:
        sub: the subproblem (feasible; run ``make_feasible`` first).
        method: ``"auto"``, ``"activeset"``, ``"admm"`` or ``"clarabel"`` (then only that
            backend before the fallback).
        tol: the backends' relative convergence tolerance (ADMM residuals when the
            subproblem has no ``noise_scale``; Clarabel uses ``min(tol, 1e-9)`` for its
            gap and feasibility tolerances).
        feas_tol: accepted constraint violation relative to the largest parent count
            (``feas_tol * max(1, scale)`` persons).
        noise_tol: with ``sub.noise_scale``, the ADMM stops when its residuals are below
            ``noise_tol * noise_scale`` persons (a thousandth of the noise by default),
            and the active-set method when no held cell's multiplier would move it by
            more than that many persons (``noise_tol`` persons without a noise scale).
        max_iter: iteration cap of the backends (their defaults if ``None``).

    Returns:
        an :class:`L2Result`.

    Raises:
        InfeasibleError: if every backend fails and the subproblem has no feasible point.
    """
    if method not in METHODS:
        raise InternalError(f"solve_l2 method must be one of {METHODS}, got {method!r}")
    t0 = time.perf_counter()
    if sub.parent is not None and sub.k == 1:
        # one child under a parent: the column sums leave it exactly the parent's counts
        return _result(sub, sub.parent.astype(np.float64)[None, :], t0, [("parent", "exact")])
    abs_tol = feasibility_tolerance(sub, feas_tol)
    attempts: list[tuple[str, str]] = []
    if method == "auto":
        # no query sees inside a group (pl94's total-only pass): solve on the group sums
        from censusdp.release.topdown._groups import group_reduction, spread

        reduction = group_reduction(sub)
        if reduction is not None:
            reduced, cell_group = reduction
            # the same tolerance in persons as the cells' (the group sums are larger)
            red_tol = 0.5 * abs_tol / max(1.0, reduced.scale())
            kw = {"tol": tol, "feas_tol": red_tol, "noise_tol": noise_tol}
            # the active set first: on California's County family (58 x 8, a parent of
            # 37M persons) Clarabel reported "Solved" 8x above the optimum's objective
            r = solve_l2(reduced, method="activeset", **kw)
            if r.status != "optimal":
                r = solve_l2(reduced, method="auto", **kw)
            x, viol = (None, float("inf"))
            if r.status == "optimal":
                x, viol = _finish(sub, spread(sub, cell_group, r.x), abs_tol)
            status = f"{r.method}: {r.solver_status}"
            if x is not None:
                return _result(sub, x, t0, [("groups", status)], iterations=r.iterations)
            attempts.append(("groups", f"{status}; {r.status}, violation {viol:.3g}"))
            logger.warning(
                "least squares of %r: the group sums failed (%s); trying the cells",
                sub.label,
                attempts[-1][1],
            )
    comp = compress(sub)
    order = _order(sub, comp, method)
    for n, backend in enumerate(order):
        kw = {} if max_iter is None else {"max_iter": max_iter}
        if backend == "activeset":
            from censusdp.release.topdown._active_set import solve_active_set

            scale = sub.noise_scale if sub.noise_scale is not None else 1.0
            x, status, iters = solve_active_set(
                sub, comp, tol=noise_tol * scale, feas_tol=0.5 * abs_tol, **kw
            )
        elif backend == "interior":
            from censusdp.release.topdown._interior import solve_interior

            scale = sub.noise_scale if sub.noise_scale is not None else 1.0
            x, status, iters = solve_interior(
                sub, comp, tol=noise_tol * scale, feas_tol=0.5 * abs_tol, **kw
            )
        elif backend == "admm":
            from censusdp.release.topdown._admm import solve_admm

            if sub.noise_scale is not None:
                kw["abs_tol"] = noise_tol * sub.noise_scale
            x, status, iters = solve_admm(sub, comp, tol=tol, feas_tol=abs_tol, **kw)
        else:
            from censusdp.release.topdown._clarabel import solve_clarabel

            x, status, iters = solve_clarabel(sub, comp, tol=min(tol, 1e-9), **kw)
        x, viol = _finish(sub, x, abs_tol)
        if x is None and status in ("Solved", "converged", "AlmostSolved"):
            status = f"{status}; rejected (violation {viol:.3g} > {abs_tol:.3g})"
        attempts.append((backend, status))
        if x is not None:
            return _result(sub, x, t0, attempts, iterations=iters)
        following = order[n + 1] if n + 1 < len(order) else "the NNLS point and flow"
        logger.warning(
            "least squares of %r: %s failed (%s); trying %s", sub.label, backend, status, following
        )
    # Every solver failed: the integer flow closest to a feasible NNLS point.
    from censusdp.release.topdown._nnls import nnls_point
    from censusdp.release.topdown.rounding import round_to_integers

    try:
        xf = round_to_integers(sub, nnls_point(sub, comp)).astype(np.float64)
    except InfeasibleError:
        raise InfeasibleError(
            f"subproblem {sub.label!r} is infeasible (solvers: {attempts}); "
            "call make_feasible before solve_l2"
        ) from None
    attempts.append(("nnls-flow", "feasible"))
    chain = "; ".join(f"{m}: {s}" for m, s in attempts)
    return _result(sub, xf, t0, attempts, status="feasible_fallback", solver_status=chain)
