"""TopDown estimation: per-parent least squares, integer rounding and the failsafe.

Seeds: 000 sec. 5.7 and 002 sec. 2.1-2.2. A :class:`Subproblem` is one parent with its
children; :func:`make_feasible` relaxes it if needed, :func:`solve_l2` (the
:mod:`~censusdp.release.topdown.solvers` package: one backend protocol, the chain table)
finds the non-negative weighted least-squares point, :func:`round_to_integers` the closest
integer point that keeps every constraint exact. :mod:`~censusdp.release.topdown.passes`
holds the 2020 production query orderings (:data:`PRODUCTION_PASSES`) and
:mod:`~censusdp.release.topdown.multipass` runs least squares and rounding in those passes.
:mod:`~censusdp.release.topdown.maxent` is the low-budget alternative to least squares
(``TopDownOptions(estimator="maxent" | "auto")``): the maximum-entropy fit of the
measured marginals that rise above their noise, each at the resolution the noise allows.
:mod:`~censusdp.release.topdown.pooling` estimates the root's marginals from every
level's measurements.

A whole release's estimation: :func:`~censusdp.release.topdown.driver.run_topdown` (the
entry point, returning a :class:`~censusdp.release.topdown.driver.TopDownResult`), over
the levels' tasks (:mod:`~censusdp.release.topdown.levels`), each one family's work
(:mod:`~censusdp.release.topdown.tasks`) on a subproblem built from the measurements
(:mod:`~censusdp.release.topdown.subproblems`), folded level by level
(:mod:`~censusdp.release.topdown.level_results`).
"""

from censusdp.release.topdown.failsafe import (
    FailsafeReport,
    Relaxation,
    check_feasible,
    make_feasible,
)
from censusdp.release.topdown.multipass import round_in_passes, solve_l2_passes
from censusdp.release.topdown.passes import PASS_MODES, PRODUCTION_PASSES, PassPlan, plans_for
from censusdp.release.topdown.problem import Subproblem, SubproblemError
from censusdp.release.topdown.rounding import check_integer_solution, round_to_integers
from censusdp.release.topdown.solvers.base import RealSolution
from censusdp.release.topdown.solvers.least_squares import solve_l2

__all__ = [
    "FailsafeReport",
    "RealSolution",
    "PASS_MODES",
    "PRODUCTION_PASSES",
    "PassPlan",
    "Relaxation",
    "Subproblem",
    "SubproblemError",
    "check_feasible",
    "check_integer_solution",
    "make_feasible",
    "plans_for",
    "round_in_passes",
    "round_to_integers",
    "solve_l2",
    "solve_l2_passes",
]
