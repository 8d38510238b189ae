"""The weighted non-negative least-squares stage of TopDown.

JASON (JSR-19-2F) sec. 5.7: "a least squares optimization which effects the Moore-Penrose inverse
subject to various constraints that the histogram being determined must be consistent with
the parent histogram"; Van Riper et al. (2020) sec. 2.2 ("minimizing the differences between that level's
set of noisy histograms and the output detailed histogram ... while matching invariants and
meeting other constraints ... the detailed histogram from the parent level"). For one
:class:`~censusdp.release.topdown.problem.Subproblem` we solve

    minimise   sum_q sum_i w_qi || A_q X[i] - y_q[i] ||^2,     w_qi = 1 / Var(y_q[i])
    subject to X >= 0, sum_i X[i, :] = p, L <= group sums <= U, T_lo <= totals <= T_hi.

The backends (each a :class:`~censusdp.release.topdown.solvers.base.Backend`, by name in
:data:`~censusdp.release.topdown.solvers.chain.BACKENDS`):

* ``"activeset"`` (:mod:`~censusdp.release.topdown.solvers.active_set`): a primal-dual
  active-set method whose linear systems are sized by the positive cells and the answers
  they touch (a 622 x 622 Cholesky at a dhc-lite root);
* ``"interior"`` (:mod:`~censusdp.release.topdown.solvers.interior`): a marginal-space
  interior point whose Newton systems are factored child by child with dense BLAS;
* ``"admm"`` (:mod:`~censusdp.release.topdown.solvers.admm`): operator splitting that
  exploits the structure. Every child has the same Hessian ``H = sum_q w_q A_q'A_q``, so
  one factorisation of ``H + rho I`` serves all children and all iterations;
* ``"clarabel"`` (:mod:`~censusdp.release.topdown.solvers.clarabel_qp`): Clarabel's
  interior-point method on a sparse formulation with auxiliary residuals; the generic
  backend, the fallback and cross-check of the others.

``"auto"`` tries them in the order of the chain table
(:mod:`~censusdp.release.topdown.solvers.chain`), after least squares on the group sums
when no query sees inside a group (:mod:`~censusdp.release.topdown.solvers.groups`). When
all fail, the answer is the integer flow closest to a non-negative least-squares point
(:mod:`~censusdp.release.topdown.solvers.nnls`), never the rounded raw noise; every failed
step is logged. A single child under a parent takes the parent's counts (a bypassed
spine geounit, not measured, is always such a child). Every answer is validated:
non-negativity, column sums, group and total bounds must hold to
``feas_tol * max(1, largest parent count)`` persons, tiny negatives are clipped and
columns rescaled to the parent exactly, and ``max_violation`` is reported.

Tolerances follow the noise (:class:`~censusdp.release.topdown.solvers.base.Tolerances`):
with ``Subproblem.noise_scale`` (the standard deviation of its most precise measurement,
set by the driver) the backends stop within :data:`NOISE_TOL` ``= 1e-3`` of it, instead of
a fixed ``1e-6`` persons; a thousandth of the noise moves no released count in practice.
"""

from __future__ import annotations

import time

import numpy as np

from censusdp.errors import InfeasibleError, InternalError
from censusdp.progress import logger
from censusdp.release.topdown.problem import Subproblem
from censusdp.release.topdown.solvers.admm import repair
from censusdp.release.topdown.solvers.base import RealSolution, Tolerances, compress
from censusdp.release.topdown.solvers.chain import BACKENDS, METHODS, backend_order
from censusdp.release.topdown.solvers.common import clean, feasibility_tolerance, hold_exact_groups

__all__ = ["NOISE_TOL", "solve_l2"]

NOISE_TOL = 1e-3
"""Optimality tolerance as a fraction of the subproblem's noise standard deviation
(:attr:`~censusdp.release.topdown.solvers.base.Tolerances.optimality`)."""


ROUNDING_MISS = 100.0
"""How many feasibility tolerances a point may miss its bounds by and still be moved onto
them: floating-point error, not a stalled solve. A point further off goes on to the next
backend, unless its backend claimed it solved and a full repair moves no cell further
than the optimality tolerance (:func:`_finish`'s ``move_tol``). At a root, each child's
exact groups are rescaled onto their bounds
(:func:`~censusdp.release.topdown.solvers.common.hold_exact_groups`; the DHC household
root: the active set 1e-7 persons off, Clarabel 2.2e-6, against 9.3e-8). Below one, the
point is repaired by alternating projections onto the bounds and the column sums
(:func:`~censusdp.release.topdown.solvers.admm.repair`, its first rounds): where every
group is exact (a DHC person run held to a P.L. 94 release's ``pl94`` cross), the final
clip and column rescale of :func:`~censusdp.release.topdown.solvers.common.clean` moves
the groups by the solver's own residuals, which no slack absorbs. At 1% of generated
Vermont, 7 block families' Clarabel points were within 0.4 tolerances before the rescale
and 1.0 to 3.9 after it (an active-set point 1.2), so they went on to the interior point
or the ADMM; one round of the repair brings them to 0.15 tolerances or less, moving no
cell more than 4.2e-9 persons (an objective 1e-12 relatively different), in 5 to 28
CPU ms. A tighter Clarabel (1e-11) passed them by a smaller margin with two more
iterations, equality rows for the exact groups passed 2 of 7."""

REPAIR_TO = 0.01
"""The repair stops when the point meets its bounds to this fraction of the tolerance."""


def _finish(
    sub: Subproblem, x: np.ndarray | None, tol: float, move_tol: float | None = None
) -> tuple[np.ndarray | None, float]:
    """``x`` cleaned (and repaired where it misses its bounds by little) with its
    violation, or ``None`` when it misses them by more than ``tol``.

    ``move_tol``: for a point its backend claims solved, a repair beyond
    :data:`ROUNDING_MISS` tolerances is kept when it moves no cell further than this
    (the optimality tolerance: every backend may stop that far from the optimum)."""
    if x is None or not np.isfinite(x).all():
        return None, float("inf")
    x = clean(sub, x, tol)
    viol = sub.max_violation(x)
    if tol < viol <= ROUNDING_MISS * tol:
        # missed by floating-point error, not by a stalled solve
        if sub.parent is None:
            x = hold_exact_groups(sub, x)
        else:
            x = repair(sub, x, REPAIR_TO * tol, rounds=0)
        viol = sub.max_violation(x)
    elif viol > tol and move_tol is not None and sub.parent is not None:
        # almost solved (Clarabel's AlmostSolved on Chittenden County's held Prim family
        # of full Vermont: 883 tolerances off, repaired in 0.2 CPU s moving no cell more
        # than 4.8e-5 persons, where the chain had spent 20 minutes in the active set)
        fixed = repair(sub, x, REPAIR_TO * tol)
        if np.abs(fixed - x).max(initial=0.0) <= move_tol:
            x = fixed
            viol = sub.max_violation(x)
    return (x, viol) if viol <= tol else (None, viol)


def _result(
    sub: Subproblem,
    x: np.ndarray,
    t0: float,
    attempts: list[tuple[str, str]],
    *,
    status: str = "optimal",
    iterations: int = 0,
    solver_status: str | None = None,
) -> RealSolution:
    """A :class:`RealSolution` for ``x``, produced by the last of ``attempts``."""
    return RealSolution(
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
) -> RealSolution:
    """Solve the weighted non-negative least-squares stage for one subproblem.

    The backends form a chain that never rounds raw noise: ``auto`` tries them in the
    order of :func:`~censusdp.release.topdown.solvers.chain.backend_order`, and when all
    fail it takes the integer flow closest to a non-negative least-squares point of the
    measurements (``status = "feasible_fallback"``, ``method = "nnls-flow"``). Every
    failed step is logged on the ``censusdp`` logger and listed in ``attempts``. A single
    child under a parent takes the parent's counts (``method = "parent"``): the column
    sums leave no other choice.

    Args:
        sub: the subproblem (feasible; run ``make_feasible`` first).
        method: ``"auto"`` or one backend of
            :data:`~censusdp.release.topdown.solvers.chain.METHODS` (then only that
            backend before the fallback).
        tol: :attr:`Tolerances.relative
            <censusdp.release.topdown.solvers.base.Tolerances.relative>`.
        feas_tol: accepted constraint violation relative to the largest parent count:
            :attr:`Tolerances.feasibility
            <censusdp.release.topdown.solvers.base.Tolerances.feasibility>` is
            ``feas_tol * max(1, scale)`` persons.
        noise_tol: :attr:`Tolerances.optimality
            <censusdp.release.topdown.solvers.base.Tolerances.optimality>` is
            ``noise_tol * noise_scale`` persons (a thousandth of the noise by default;
            ``noise_tol`` persons without a noise scale).
        max_iter: iteration cap of the backends (their defaults if ``None``).

    Returns:
        a :class:`~censusdp.release.topdown.solvers.base.RealSolution`.

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
        from censusdp.release.topdown.solvers.groups import group_reduction, spread

        reduction = group_reduction(sub)
        if reduction is not None:
            reduced, cell_group = reduction
            # the same tolerance in persons as the cells' (the group sums are larger)
            red_tol = 0.5 * abs_tol / max(1.0, reduced.scale())
            kw = {"tol": tol, "feas_tol": red_tol, "noise_tol": noise_tol}
            # the active set first: on California's County family (58 x 8, a parent of
            # 37M persons) Clarabel reported "Solved" 8x above the optimum's objective
            first = "activeset" if sub.child_group is None else "clarabel"
            r = solve_l2(reduced, method=first, **kw)
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
    order = backend_order(sub, comp, method)
    scale = sub.noise_scale if sub.noise_scale is not None else 1.0
    tols = Tolerances(optimality=noise_tol * scale, relative=tol, feasibility=abs_tol)
    for n, backend in enumerate(order):
        attempt = BACKENDS[backend].solve(sub, comp, tols, max_iter)
        status, iters = attempt.status, attempt.iterations
        claimed = status in ("Solved", "converged", "AlmostSolved")
        x, viol = _finish(sub, attempt.x, abs_tol, tols.optimality if claimed else None)
        if x is None and claimed:
            status = f"{status}; rejected (violation {viol:.3g} > {abs_tol:.3g})"
        attempts.append((backend, status))
        if x is not None:
            return _result(sub, x, t0, attempts, iterations=iters)
        following = order[n + 1] if n + 1 < len(order) else "the NNLS point and flow"
        logger.warning(
            "least squares of %r: %s failed (%s); trying %s", sub.label, backend, status, following
        )
    # Every solver failed: the integer flow closest to a feasible NNLS point.
    from censusdp.release.topdown.rounding import round_to_integers
    from censusdp.release.topdown.solvers.nnls import nnls_point

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
