"""What every least-squares backend takes and gives back, and what a subproblem's real
solution is.

A backend takes the subproblem with its queries :func:`compress` ed to the answer rows
that hold a kept cell (:class:`Compressed`) and one :class:`Tolerances`.

A backend (:class:`Backend`) has a ``name`` (what ``--method``, the chain table of
:mod:`~censusdp.release.topdown.solvers.chain` and the manifest's ``methods`` call it) and a
``solve`` taking the subproblem, its compressed queries and one :class:`Tolerances`; it
returns an :class:`Attempt`. The chain runner
(:func:`~censusdp.release.topdown.solvers.least_squares.solve_l2`) validates every
attempt's point itself (non-negativity, column sums, group and total bounds to
``Tolerances.feasibility``) and turns the accepted one into a :class:`RealSolution`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import scipy.sparse as sp

from censusdp.release.topdown.problem import Subproblem

__all__ = ["Attempt", "Backend", "Compressed", "RealSolution", "Tolerances", "compress"]


@dataclass
class Compressed:
    """The queries restricted to the answer rows that contain at least one kept cell.

    A row with no kept cell has answer 0 whatever ``X`` is; its squared residual is a
    constant of the objective (``const``).

    Attributes:
        rows: per query, ``(c,)`` local row index of each cell in ``0..m_q-1``.
        sizes: per query, ``m_q``.
        y: per query, ``(k, m_q)`` noisy answers on the present rows.
        w: ``(n_queries,)`` weights.
        const: ``sum_q sum_i w_qi sum_{absent r} y_q[i, r]^2``.
        cw: ``(n_queries, k)`` per-child multipliers of ``w`` (the subproblem's
            ``unit_weights``), or ``None`` when every child has its query's weight.
    """

    rows: list[np.ndarray]
    sizes: list[int]
    y: list[np.ndarray]
    w: np.ndarray
    const: float
    cw: np.ndarray | None = None

    def child_w(self, q: int) -> np.ndarray | float:
        """Weight of each child's answers to query ``q``: ``(k, 1)`` or a float."""
        if self.cw is None:
            return float(self.w[q])
        return float(self.w[q]) * self.cw[q][:, None]

    def sees_every_cell(self) -> bool:
        """Whether a weighted query has every kept cell as its own answer (a detailed
        query): the least-squares Hessian is then definite."""
        return any(
            m == r.size for m, r, w in zip(self.sizes, self.rows, self.w, strict=True) if w > 0
        )

    def matrix(self, q: int, c: int) -> sp.csr_matrix:
        """The ``(m_q, c)`` 0/1 operator of query ``q`` on kept cells."""
        return sp.csr_matrix((np.ones(c), (self.rows[q], np.arange(c))), shape=(self.sizes[q], c))


def compress(sub: Subproblem) -> Compressed:
    """Drop the answer rows with no kept cell (see :class:`Compressed`)."""
    rows, sizes, ys = [], [], []
    const = 0.0
    for q in range(sub.n_queries):
        present, local = np.unique(sub.query_rows[q], return_inverse=True)
        rows.append(local.astype(np.int64))
        sizes.append(int(present.size))
        y = sub.noisy[q]
        ys.append(np.ascontiguousarray(y[:, present]))
        absent = np.ones(sub.query_sizes[q], dtype=bool)
        absent[present] = False
        const += float(np.sum(sub.child_weights(q) * np.sum(y[:, absent] ** 2, axis=1)))
    cw = None if sub.unit_weights is None else sub.unit_weights.copy()
    return Compressed(rows, sizes, ys, sub.weights.copy(), const, cw)


@dataclass(frozen=True, eq=False)
class Attempt:
    """What one backend returned for one subproblem.

    Attributes:
        x: the ``(k, c)`` point, or ``None`` when the backend gave up.
        status: the backend's own word for how it ended (``"converged"``, ``"Solved"``,
            ``"max_iter"``, ``"singular system (...)"`` ...); the chain runner reads
            ``"converged"``, ``"Solved"`` and ``"AlmostSolved"`` as claims of success.
        iterations: the backend's iterations (active-set updates, interior-point or
            ADMM steps, Clarabel iterations).
    """

    x: np.ndarray | None
    status: str
    iterations: int


@dataclass(frozen=True)
class Tolerances:
    """The tolerances of one least-squares solve, each with one meaning for every backend.

    Attributes:
        optimality: persons: how far from the optimum a backend may stop, as the largest
            move of a cell its remaining KKT (stationarity) residual asks for:
            ``noise_tol`` times the subproblem's noise standard deviation (or
            ``noise_tol`` persons without one). The active set stops when no held
            cell's multiplier would move it further, the marginal-space interior point
            when no cell's stationarity residual would, the ADMM (with a noise scale)
            when its primal and dual residuals are below it.
        relative: the relative residual for backends that have no persons scale: the
            ADMM's primal and dual residuals relative to the iterates when the
            subproblem has no noise scale, and Clarabel's duality-gap and feasibility
            tolerances (``min(relative, 1e-9)``).
        feasibility: persons: the largest constraint violation (negative cells, column
            sums, group and total bounds) an accepted point may have,
            ``feas_tol * max(1, largest parent count)``. The chain runner checks every
            point against it; the marginal-space backends aim at half of it (room for
            the final clip and rescale), the ADMM at all of it.
    """

    optimality: float
    relative: float
    feasibility: float

    def marginal_space(self, max_iter: int | None) -> dict[str, float | int]:
        """The stopping keywords of the marginal-space backends (active set, interior
        point): stop at ``optimality`` persons, aim at half of ``feasibility``, and the
        iteration cap if one is given."""
        cap: dict[str, float | int] = {} if max_iter is None else {"max_iter": max_iter}
        return {"tol": self.optimality, "feas_tol": 0.5 * self.feasibility, **cap}


class Backend(Protocol):
    """A least-squares backend: a name and one ``solve``."""

    name: str

    def solve(
        self, sub: Subproblem, comp: Compressed, tols: Tolerances, max_iter: int | None
    ) -> Attempt:
        """Solve ``sub`` (its queries compressed to ``comp``) to ``tols``; ``max_iter``
        caps the backend's iterations (its own default when ``None``)."""
        ...


@dataclass(frozen=True)
class RealSolution:
    """The real-valued (not yet rounded) solution of one subproblem, by least squares or
    by maximum entropy.

    Attributes:
        x: ``(k, c)`` float64 solution (non-negative, columns summing to the parent).
        status: ``"optimal"``; ``"feasible_fallback"`` when every least-squares backend
            failed and a feasible point (the integer flow closest to a non-negative
            least-squares point) is returned instead; ``"max_iter"`` for a maximum-entropy
            fit that did not converge. The backends' own statuses are in
            ``solver_status``.
        method: what produced ``x``: a backend's name (``"activeset"``, ``"admm"``,
            ``"clarabel"``, ``"interior"``), ``"groups"`` (least squares on the group
            sums), ``"parent"`` for a single child, ``"nnls-flow"`` for the fallback,
            ``"maxent"``; passes join theirs with ``+``.
        iterations: iterations of that method.
        seconds: wall time of the whole call (all attempts).
        max_violation: largest constraint violation of ``x`` in persons.
        objective: the weighted least-squares objective at ``x``.
        solver_status: the method's status string.
        attempts: ``(method, status)`` of every method tried, in order.
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
