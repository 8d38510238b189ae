"""TopDown estimation: per-parent least squares, integer rounding and the failsafe.

Seeds: 000 sec. 5.7 and 002 sec. 2.1-2.2. A :class:`Subproblem` is one parent with its
children; :func:`make_feasible` relaxes it if needed, :func:`solve_l2` finds the
non-negative weighted least-squares point, :func:`round_to_integers` the closest integer
point that keeps every constraint exact.
"""

from censusdp.release.topdown.failsafe import (
    FailsafeReport,
    Relaxation,
    check_feasible,
    make_feasible,
)
from censusdp.release.topdown.l2 import L2Result, solve_l2
from censusdp.release.topdown.problem import Subproblem, SubproblemError
from censusdp.release.topdown.rounding import check_integer_solution, round_to_integers

__all__ = [
    "FailsafeReport",
    "L2Result",
    "Relaxation",
    "Subproblem",
    "SubproblemError",
    "check_feasible",
    "check_integer_solution",
    "make_feasible",
    "round_to_integers",
    "solve_l2",
]
