"""Pieces shared by the least-squares backends (internal)."""

from __future__ import annotations

import numpy as np

from censusdp.release.topdown.problem import Subproblem
from censusdp.release.topdown.solvers.base import Attempt, Compressed

__all__: list[str] = []


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


def hold_exact_groups(sub: Subproblem, x: np.ndarray) -> np.ndarray:
    """At a root (no parent whose column sums a rescale would move), each child's exact
    groups (lower bound = upper bound) rescaled to their bound; other cells as they are.

    A repair for a solution that missed only by floating-point error: on a root of a
    million cells held to a few exact groups (the DHC households' root, held to the
    units' tenure) the active set and Clarabel stop 1e-7 to 1e-6 persons off an exact
    group, over the 1e-9-relative feasibility tolerance. The groups partition the cells,
    so a rescale keeps every other group, non-negativity and the zero cells; the caller
    validates every constraint again (the children's totals, which a rescale may move)."""
    if sub.parent is not None or not sub.G or not sub.c:
        return x
    x = np.array(x, dtype=np.float64)
    sums = sub.group_sums(x)
    exact = (sub.group_lower == sub.group_upper) & (sums > 0)
    if not exact.any():
        return x
    factor = np.where(exact, sub.group_lower / np.where(exact, sums, 1.0), 1.0)
    x *= factor[:, sub.groups]
    return x


def feasibility_tolerance(sub: Subproblem, rel: float) -> float:
    """Absolute tolerance (persons) for constraint violations: ``rel * max(1, scale)``."""
    return rel * max(1.0, sub.scale())


def measured_queries(
    sub: Subproblem, comp: Compressed, feas_tol: float | None
) -> tuple[Attempt | None, float, list[int]]:
    """What the marginal-space solvers (active set, interior point) start with.

    Returns ``(early, feas_tol, qs)``: ``early`` is the answer when there is nothing to
    solve (no kept cell: converged; no measured query: give up) and ``None`` otherwise;
    ``feas_tol`` defaults to ``5e-9 * scale`` persons (half of what ``solve_l2``
    accepts); ``qs`` are the queries with a positive weight and a present answer row.
    """
    if feas_tol is None:
        feas_tol = 5e-9 * max(1.0, sub.scale())
    if sub.c == 0:
        return Attempt(np.zeros((sub.k, 0)), "converged", 0), feas_tol, []
    qs = [q for q in range(len(comp.sizes)) if comp.w[q] > 0 and comp.sizes[q] > 0]
    if not qs:
        return Attempt(None, "no measurements", 0), feas_tol, qs
    return None, feas_tol, qs
