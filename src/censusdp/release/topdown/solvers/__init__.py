"""The least-squares solvers of TopDown: one backend protocol, a chain table, a runner.

* :mod:`~censusdp.release.topdown.solvers.base`: what a backend takes (the subproblem's
  :class:`Compressed` queries, one :class:`Tolerances`) and gives back (an
  :class:`Attempt`); the :class:`Backend` protocol; the :class:`RealSolution` of a
  subproblem (least squares or maximum entropy) that rounding starts from.
* :mod:`~censusdp.release.topdown.solvers.chain`: the backends by name
  (:data:`BACKENDS`) and the ``auto`` policy as a table (:data:`AUTO_CHAIN`).
* :mod:`~censusdp.release.topdown.solvers.least_squares`: :func:`solve_l2`, which runs the
  chain, validates each attempt and falls back to the NNLS point and flow.
* the backends: :mod:`~censusdp.release.topdown.solvers.active_set`,
  :mod:`~censusdp.release.topdown.solvers.interior`,
  :mod:`~censusdp.release.topdown.solvers.admm`,
  :mod:`~censusdp.release.topdown.solvers.clarabel_qp` (the generic one); and what the
  runner uses around them: :mod:`~censusdp.release.topdown.solvers.groups` (least
  squares on the group sums), :mod:`~censusdp.release.topdown.solvers.nnls` (the
  fallback's point), :mod:`~censusdp.release.topdown.solvers.common` (start points,
  clean-up, tolerances in persons).
"""

from censusdp.release.topdown.solvers.base import (
    Attempt,
    Backend,
    Compressed,
    RealSolution,
    Tolerances,
    compress,
)
from censusdp.release.topdown.solvers.chain import AUTO_CHAIN, BACKENDS, METHODS, backend_order
from censusdp.release.topdown.solvers.least_squares import NOISE_TOL, solve_l2

__all__ = [
    "AUTO_CHAIN",
    "BACKENDS",
    "METHODS",
    "NOISE_TOL",
    "Attempt",
    "Backend",
    "Compressed",
    "RealSolution",
    "Tolerances",
    "backend_order",
    "compress",
    "solve_l2",
]
