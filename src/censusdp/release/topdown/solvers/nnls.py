"""The last resort of the least-squares chain: a feasible non-negative least-squares point.

When every solver of :func:`~censusdp.release.topdown.solvers.least_squares.solve_l2` fails, the answer must
still come from the measurements, not from raw noise: rounding the clipped noisy
detailed query puts persons wherever the noise was positive (at epsilon 0.5 on a
233,856-cell schema its clipped sum is a thousand times the population, and the
rounding then fills the lowest-index cells). Instead we solve, per child,

    minimise   sum_q w_q ||A_q x - y_q||^2     subject to x >= 0, x = 0 where forced

and, with a parent, ``sum_i x[i, j] = p_j`` for every cell (at the root: each child's
total within its bounds), by projected FISTA (Beck & Teboulle 2009, "A fast iterative
shrinkage-thresholding algorithm for linear inverse problems", SIAM J. Imaging Sci. 2(1),
Algorithm 2 with constant step ``1/L``), which cannot fail: every step is a gradient (two
``bincount`` per query) and an exact Euclidean projection (one simplex per cell, or per
child at the root). ``L`` is Gershgorin's bound on the Hessian ``2 sum_q w_q A_q'A_q``:
row ``j`` sums to ``2 sum_q w_q n_q(j)`` with ``n_q(j)`` the number of kept cells in
``j``'s row of query ``q``. The integer rounding (a min-cost flow that may move cells any
distance) then makes the point meet the group bounds exactly too.
"""

from __future__ import annotations

import numpy as np

from censusdp.release.topdown.problem import Subproblem
from censusdp.release.topdown.solvers.admm import _project_simplex_columns
from censusdp.release.topdown.solvers.base import Compressed
from censusdp.release.topdown.solvers.common import fixed_zeros

__all__: list[str] = []

ITERATIONS = 500
"""FISTA iterations (each costs two passes over the kept cells per query)."""


def _projector(sub: Subproblem, free: np.ndarray):
    """Euclidean projection onto ``{x >= 0, x[~free] = 0}`` and the column sums (with a
    parent) or the children's total bounds (at the root)."""
    if sub.parent is not None:
        p = sub.parent.astype(np.float64)
        return lambda v: _project_simplex_columns(v, p, free)
    lo, hi = sub.total_lower, sub.total_upper

    def project(v: np.ndarray) -> np.ndarray:
        x = np.where(free, np.maximum(v, 0.0), 0.0)
        t = x.sum(axis=1)
        for bound, bad in ((hi, t > hi), (lo, t < lo)):
            if bad.any():  # the nearest point of the face sum = bound: a simplex
                x[bad] = _project_simplex_columns(v[bad].T, bound[bad], free[bad].T).T
        return x

    return project


def nnls_point(sub: Subproblem, comp: Compressed, iterations: int = ITERATIONS) -> np.ndarray:
    """A non-negative ``(k, c)`` point fitting the measurements, with exact column sums
    (or, at the root, totals within their bounds); group bounds are left to the flow."""
    k, c = sub.k, sub.c
    free = ~fixed_zeros(sub)
    if c == 0:
        return np.zeros((k, c))
    project = _projector(sub, free)
    queries = [q for q in range(len(comp.sizes)) if comp.w[q] > 0 and comp.sizes[q] > 0]
    counts = [np.bincount(comp.rows[q], minlength=comp.sizes[q]) for q in queries]
    lip = np.zeros(c)
    for q, n in zip(queries, counts, strict=True):
        lip += 2.0 * float(np.max(comp.child_w(q))) * n[comp.rows[q]]
    step = 1.0 / max(float(lip.max(initial=0.0)), 1e-12)

    # flat (child, row) index of every (child, cell): one bincount per query and step
    flat = {
        q: (comp.rows[q][None, :] + comp.sizes[q] * np.arange(k)[:, None]).ravel() for q in queries
    }

    def gradient(x: np.ndarray) -> np.ndarray:
        g = np.zeros_like(x)
        xr = x.ravel()
        for q in queries:
            rows, m = comp.rows[q], comp.sizes[q]
            ans = np.bincount(flat[q], weights=xr, minlength=k * m).reshape(k, m)
            g += 2.0 * comp.child_w(q) * (ans - comp.y[q])[:, rows]
        return g

    x = project(np.zeros((k, c)))
    z = x.copy()
    t = 1.0
    for _ in range(iterations):
        x_new = project(z - step * gradient(z))
        t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        z = x_new + ((t - 1.0) / t_new) * (x_new - x)
        x, t = x_new, t_new
    return x
