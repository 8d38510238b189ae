"""Pieces shared by the least-squares backends (internal)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from censusdp.release.topdown.problem import Subproblem

__all__: list[str] = []


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


def fixed_zeros(sub: Subproblem) -> np.ndarray:
    """``(k, c)`` mask of cells forced to 0: their group's upper bound for that child is 0."""
    return (sub.group_upper <= 0)[:, sub.groups]


def child_total_estimates(sub: Subproblem) -> np.ndarray:
    """Inverse-variance combination of every query's implied child totals, ``(k,)``.

    Every query is a marginal, so the sum of its answers is the child's total; with weight
    ``w_q`` per answer, that sum has variance ``r_q / w_q``.
    """
    num = np.zeros(sub.k)
    den = np.zeros(sub.k)
    for q in range(sub.n_queries):
        prec = sub.child_weights(q) / max(1, sub.query_sizes[q])
        num += prec * sub.noisy[q].sum(axis=1)
        den += prec
    if (den <= 0).all():
        return np.ones(sub.k)
    # a child with no measurement (weight 0 everywhere) gets the others' mean total
    mean = float(num.sum() / den.sum())
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), mean)


def start_point(sub: Subproblem) -> np.ndarray:
    """A proportional allocation ``x0`` with exact column sums (seed of the solvers).

    With a parent: ``x0[i, j] = p_j * share_i`` where the shares come from the children's
    estimated totals clipped into their total bounds. At the root: the most detailed
    query's non-negative answers spread evenly over the cells of each row.
    """
    k, c = sub.k, sub.c
    if c == 0:
        return np.zeros((k, c))
    if sub.parent is not None:
        t = child_total_estimates(sub)
        hi = np.where(np.isfinite(sub.total_upper), sub.total_upper, np.inf)
        t = np.clip(t, sub.total_lower, hi)
        t = np.maximum(t, 1e-3 * max(1.0, float(np.max(t, initial=0.0))))
        if not np.isfinite(t).all():
            t = np.ones(k)
        share = t / t.sum()
        return share[:, None] * sub.parent[None, :].astype(np.float64)
    if sub.n_queries == 0:
        return np.zeros((k, c))
    q = int(np.argmax(sub.query_sizes))
    rows = sub.query_rows[q]
    per_row = np.bincount(rows, minlength=sub.query_sizes[q]).astype(np.float64)
    y = np.maximum(sub.noisy[q], 0.0)
    return y[:, rows] / per_row[rows][None, :]


def clean(sub: Subproblem, x: np.ndarray, tol: float) -> np.ndarray:
    """Clip tiny negatives and rescale columns to the parent exactly.

    Values above ``-tol`` become ``max(x, 0)``; each column is then multiplied by
    ``p_j / sum_i x[i, j]`` (keeps non-negativity; an all-zero column is split evenly).
    Larger negatives are left for validation to reject.
    """
    x = np.array(x, dtype=np.float64)
    small = (x < 0) & (x >= -tol)
    x[small] = 0.0
    if sub.parent is not None and sub.c and (x >= 0).all():
        col = x.sum(axis=0)
        p = sub.parent.astype(np.float64)
        zero = col <= 0
        factor = np.where(zero, 0.0, p / np.where(zero, 1.0, col))
        x *= factor[None, :]
        if zero.any():
            x[:, zero] = p[zero][None, :] / sub.k
    return x


def feasibility_tolerance(sub: Subproblem, rel: float) -> float:
    """Absolute tolerance (persons) for constraint violations: ``rel * max(1, scale)``."""
    return rel * max(1.0, sub.scale())


def measured_queries(
    sub: Subproblem, comp: Compressed, feas_tol: float | None
) -> tuple[tuple[np.ndarray | None, str, int] | None, float, list[int]]:
    """What the marginal-space solvers (active set, interior point) start with.

    Returns ``(early, feas_tol, qs)``: ``early`` is the answer when there is nothing to
    solve (no kept cell: converged; no measured query: give up) and ``None`` otherwise;
    ``feas_tol`` defaults to ``5e-9 * scale`` persons (half of what ``solve_l2``
    accepts); ``qs`` are the queries with a positive weight and a present answer row.
    """
    if feas_tol is None:
        feas_tol = 5e-9 * max(1.0, sub.scale())
    if sub.c == 0:
        return (np.zeros((sub.k, 0)), "converged", 0), feas_tol, []
    qs = [q for q in range(len(comp.sizes)) if comp.w[q] > 0 and comp.sizes[q] > 0]
    if not qs:
        return (None, "no measurements", 0), feas_tol, qs
    return None, feas_tol, qs
