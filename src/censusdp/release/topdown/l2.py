"""The weighted non-negative least-squares stage of TopDown.

Seed 000 sec. 5.7: "a least squares optimization which effects the Moore-Penrose inverse
subject to various constraints that the histogram being determined must be consistent with
the parent histogram"; seed 002 sec. 2.2 ("minimizing the differences between that level's
set of noisy histograms and the output detailed histogram ... while matching invariants and
meeting other constraints ... the detailed histogram from the parent level"). For one
:class:`~censusdp.release.topdown.problem.Subproblem` we solve

    minimise   sum_q w_q sum_i || A_q X[i] - y_q[i] ||^2,     w_q = 1 / Var(y_q)
    subject to X >= 0, sum_i X[i, :] = p, L <= group sums <= U, T_lo <= totals <= T_hi.

Two backends:

* ``"admm"`` (:mod:`censusdp.release.topdown._admm`): operator splitting that exploits the
  structure. Every child has the same Hessian ``H = sum_q w_q A_q'A_q``, so one
  factorisation of ``H + rho I`` serves all children and all iterations; the constraints
  split into two sets with cheap exact projections (per cell: non-negative with a fixed
  sum; per child: laminar group/total bounds).
* ``"clarabel"`` (:mod:`censusdp.release.topdown._clarabel`): Clarabel's interior-point method on
  a sparse formulation with auxiliary residuals; the generic fallback and cross-check.

``"auto"`` runs ADMM and falls back to Clarabel when ADMM does not converge or its answer
fails validation (for a single child with more than ``DENSE_MAX`` cells, e.g. the US root,
where there is no factorisation to share, and for subproblems with at most
``FEW_CELLS`` kept cells, it tries Clarabel first). Every answer is validated: non-negativity, column sums, group and total
bounds must hold to ``feas_tol * max(1, largest parent count)`` persons, tiny negatives are
clipped and columns rescaled to the parent exactly, and ``max_violation`` is reported.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from censusdp.errors import InfeasibleError, InternalError
from censusdp.release.topdown._common import clean, compress, feasibility_tolerance
from censusdp.release.topdown.problem import Subproblem

__all__ = ["METHODS", "L2Result", "solve_l2"]

METHODS = ("auto", "admm", "clarabel")
FEW_CELLS = 64
"""``auto`` solves subproblems with at most this many kept cells with Clarabel first."""


@dataclass(frozen=True)
class L2Result:
    """The least-squares solution of one subproblem.

    Attributes:
        x: ``(k, c)`` float64 solution (non-negative, columns summing to the parent).
        status: ``"optimal"``, or ``"feasible_fallback"`` when every solver failed and a
            feasible point (the integer flow closest to the proportional allocation) is
            returned instead; followed by the backend's own status in ``solver_status``.
        method: the backend that produced ``x`` (``"admm"``, ``"clarabel"``, ``"flow"``).
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


def solve_l2(
    sub: Subproblem,
    *,
    method: str = "auto",
    tol: float = 1e-7,
    feas_tol: float = 1e-8,
    max_iter: int | None = None,
) -> L2Result:
    """Solve the weighted non-negative least-squares stage for one subproblem.

    Args:
        sub: the subproblem (feasible; run ``make_feasible`` first).
        method: ``"auto"`` (ADMM, then Clarabel if needed), ``"admm"`` or ``"clarabel"``.
        tol: the backends' relative convergence tolerance (ADMM residuals; Clarabel uses
            ``min(tol, 1e-9)`` for its gap and feasibility tolerances).
        feas_tol: accepted constraint violation relative to the largest parent count
            (``feas_tol * max(1, scale)`` persons).
        max_iter: iteration cap of the backends (their defaults if ``None``).

    Returns:
        an :class:`L2Result`.

    Raises:
        InfeasibleError: if every backend fails and the subproblem has no feasible point.
    """
    if method not in METHODS:
        raise InternalError(f"solve_l2 method must be one of {METHODS}, got {method!r}")
    t0 = time.perf_counter()
    comp = compress(sub)
    abs_tol = feasibility_tolerance(sub, feas_tol)
    if method == "auto":
        from censusdp.release.topdown._admm import DENSE_MAX

        # One large child (the root): nothing to share across children, and the
        # interior-point method is faster there.
        big_root = sub.k == 1 and sub.c > DENSE_MAX
        # Few kept cells (most block groups: 5-30 non-zero parent cells in generated
        # Vermont): the interior-point solve is small, and measured 1.2-1.7x faster than
        # the ADMM, which needs 700-5,000 iterations there. ADMM wins when many cells are
        # shared across children (county scale: 98x).
        few_cells = sub.c <= FEW_CELLS
        order = ("clarabel", "admm") if big_root or few_cells else ("admm", "clarabel")
    else:
        order = (method,)
    attempts: list[tuple[str, str]] = []
    for backend in order:
        if backend == "admm":
            from censusdp.release.topdown._admm import solve_admm

            kw = {} if max_iter is None else {"max_iter": max_iter}
            x, status, iters = solve_admm(sub, comp, tol=tol, feas_tol=abs_tol, **kw)
        else:
            from censusdp.release.topdown._clarabel import solve_clarabel

            kw = {} if max_iter is None else {"max_iter": max_iter}
            x, status, iters = solve_clarabel(sub, comp, tol=min(tol, 1e-9), **kw)
        x, viol = _finish(sub, x, abs_tol)
        if x is None and status in ("Solved", "converged", "AlmostSolved"):
            status = f"{status}; rejected (violation {viol:.3g} > {abs_tol:.3g})"
        attempts.append((backend, status))
        if x is not None:
            return L2Result(
                x=x,
                status="optimal",
                method=backend,
                iterations=iters,
                seconds=time.perf_counter() - t0,
                max_violation=viol,
                objective=sub.objective(x),
                solver_status=status,
                attempts=tuple(attempts),
            )
    # Every backend failed: return a feasible point so the run can go on.
    from censusdp.release.topdown._common import start_point
    from censusdp.release.topdown.rounding import round_to_integers

    try:
        xf = round_to_integers(sub, start_point(sub)).astype(np.float64)
    except InfeasibleError:
        raise InfeasibleError(
            f"subproblem {sub.label!r} is infeasible (solvers: {attempts}); "
            "call make_feasible before solve_l2"
        ) from None
    attempts.append(("flow", "feasible"))
    return L2Result(
        x=xf,
        status="feasible_fallback",
        method="flow",
        iterations=0,
        seconds=time.perf_counter() - t0,
        max_violation=sub.max_violation(xf),
        objective=sub.objective(xf),
        solver_status="; ".join(f"{m}: {s}" for m, s in attempts),
        attempts=tuple(attempts),
    )
