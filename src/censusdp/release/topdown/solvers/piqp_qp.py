"""The least-squares program of the small families, solved by PIQP (internal).

PIQP (Schwan, Jiang, Kuhn and Jones 2023, "PIQP: A Proximal Interior-Point Quadratic
Programming Solver", IEEE CDC; BSD-2) is an interior-point method regularised by a
proximal method of multipliers. It takes the program of
:mod:`~censusdp.release.topdown.solvers.clarabel_qp` as it is
(:func:`~censusdp.release.topdown.solvers.clarabel_qp.build_program`), with one
difference in form: the cells' non-negativity is a bound on each variable, which its
KKT systems hold as a diagonal, where Clarabel's conic form needs one constraint row a
cell (as many rows as the block family has variables). Same optimum to the tolerances
(tests/release/topdown/test_piqp.py).

Measured on California's block and block-group families in production fidelity
(every twentieth task of a release of California x0.05, the programs each backend
solved, one process; ``benchmarks/bench_piqp.py``): Clarabel 7.7 CPU s, PIQP 5.4 on
489 block families, 1.43 times; 1.3 times on 189 block-group families; on full
California's tract families (their second pass; Clarabel factoring with faer above
20,000 non-zeros) 1.2 to 3.1 times from 5 to 51 tracts, 1.16 at 151, even at 199, 1.8
at 360 (Alameda County, 144,000 variables, 1.2 million non-zeros: 16 CPU s against 29). On
Los Angeles County's 2,334-tract family (11 million non-zeros) PIQP's sparse
factorisation did not finish in 20 CPU minutes against Clarabel's 6: the chain
(:mod:`~censusdp.release.topdown.solvers.chain`) gives PIQP the families of at most
:data:`~censusdp.release.topdown.solvers.chain.PIQP_MAX_VARIABLES` variables, Clarabel
the rest and every family PIQP does not solve.

One thread (``num_threads = 1``): a seeded release must not depend on the machine's load.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from censusdp.release.topdown.problem import Subproblem
from censusdp.release.topdown.solvers.base import Attempt, Compressed, Tolerances
from censusdp.release.topdown.solvers.clarabel_qp import Program, build_program

__all__ = ["MAX_ITER", "PiqpBackend", "almost_solved", "solve_piqp"]

MAX_ITER = 30
"""PIQP's iterations before it stops on a program: its point is then taken as almost
solved when it meets :data:`REDUCED_FEASIBILITY` and :data:`REDUCED_GAP`, and given up
otherwise (Clarabel takes the program next). On the 1,132 programs of the held
``dhc-2020`` re-estimate of generated Vermont x0.1 (median 10 iterations), PIQP
stalled on eight: its steps fell to zero with the primal residual at 1e-12 and the dual
stuck above the tolerance (1.7e-8 against 1e-9 on the largest, from the 13th iteration
on), and it ran to any cap given (100, 250). Stopped at 30, 16 programs reach the cap,
every one within the reduced tolerances, their objectives within 2.0e-8 relatively of
PIQP's at 250 iterations (eight of them still stalled there), one of them missing its
bounds by 7 tolerances, which the chain's repair mends; PIQP's CPU on all 1,132, 109 s
against 115, and the largest stalled program 1.8 CPU s instead of 5.5 and Clarabel's
solve after it."""

REDUCED_FEASIBILITY = 1e-4
"""The primal and dual residuals of an almost-solved point, absolute and relative to
PIQP's own scales (Clarabel's ``reduced_tol_feas``, its ``AlmostSolved``)."""

REDUCED_GAP = 5e-5
"""The duality gap of an almost-solved point, absolute and relative (Clarabel's
``reduced_tol_gap_abs`` and ``reduced_tol_gap_rel``)."""

SOLVED = "Solved"
"""The status of an answer PIQP solved (Clarabel's word, which the chain runner reads)."""

ALMOST_SOLVED = "AlmostSolved"
"""The status of a point PIQP stopped at :data:`MAX_ITER` within the reduced tolerances
(Clarabel's word: the chain checks it, and repairs it within the optimality tolerance,
as Clarabel's)."""


def solve_piqp(
    sub: Subproblem, comp: Compressed, *, tol: float = 1e-9, max_iter: int | None = None
) -> Attempt:
    """Solve the program of ``sub`` with PIQP; ``(x or None, status, iterations)``.

    Args:
        sub, comp: the subproblem and its compressed queries.
        tol: PIQP's absolute and relative tolerances on the primal and dual residuals
            and the duality gap, in the program's scaled units (as Clarabel's ``tol``).
        max_iter: iterations before PIQP gives up (default :data:`MAX_ITER`).
    """
    import piqp

    prog = build_program(sub, comp)
    if not isinstance(prog, Program):
        return Attempt(prog, SOLVED, 0)
    solver = piqp.SparseSolver()
    settings = solver.settings
    settings.verbose = False
    settings.num_threads = 1
    settings.max_iter = MAX_ITER if max_iter is None else max_iter
    settings.eps_abs = tol
    settings.eps_rel = tol
    settings.eps_duality_gap_abs = tol
    settings.eps_duality_gap_rel = tol
    has_eq, has_in = prog.b_eq.size > 0, prog.b_in.size > 0
    solver.setup(
        prog.p,
        prog.q,
        A=prog.a_eq if has_eq else None,
        b=prog.b_eq if has_eq else None,
        G=prog.a_in if has_in else None,
        h_u=prog.b_in if has_in else None,
        x_l=prog.lower,
    )
    status = solver.solve()
    info = solver.result.info
    iterations = int(info.iter)
    if status == piqp.PIQP_SOLVED:
        return Attempt(prog.point(np.asarray(solver.result.x)), SOLVED, iterations)
    if status == piqp.PIQP_MAX_ITER_REACHED and almost_solved(info):
        return Attempt(prog.point(np.asarray(solver.result.x)), ALMOST_SOLVED, iterations)
    return Attempt(None, str(status).removeprefix("Status."), iterations)


def almost_solved(info: Any) -> bool:
    """Whether PIQP's last iterate (its ``result.info``) meets the reduced tolerances:
    PIQP's own test of convergence, with :data:`REDUCED_FEASIBILITY` and
    :data:`REDUCED_GAP` in place of the tolerances it was given."""

    def within(res: float, scale: float, eps: float) -> bool:
        return bool(np.isfinite(res)) and res <= eps + eps * scale

    return (
        within(info.primal_res, info.primal_res_rel, REDUCED_FEASIBILITY)
        and within(info.dual_res, info.dual_res_rel, REDUCED_FEASIBILITY)
        and within(info.duality_gap, info.duality_gap_rel, REDUCED_GAP)
    )


class PiqpBackend:
    """PIQP (:func:`solve_piqp`) as a backend: the tolerances of
    :class:`~censusdp.release.topdown.solvers.clarabel_qp.ClarabelBackend`."""

    name = "piqp"

    def solve(
        self, sub: Subproblem, comp: Compressed, tols: Tolerances, max_iter: int | None
    ) -> Attempt:
        cap: dict = {} if max_iter is None else {"max_iter": max_iter}
        return solve_piqp(sub, comp, tol=min(tols.relative, 1e-9), **cap)
