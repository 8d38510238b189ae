"""Least squares on the group sums, when no measured query sees inside a group (internal).

Production's pl94 passes fit the ``total`` query alone first (``isoTot``, see
:mod:`censusdp.release.topdown.passes`) at the State, County, Tract and Block Group. That
pass's objective depends on each child's total only, so the optimum is a face of
dimension about ``k x c`` (58 counties x 1,019 kept cells on California's County family):
the marginal-space interior point stalled on it and Clarabel's systems filled in.

When every query of a subproblem answers a function of the group sums (each group's kept
cells fall in one answer row of every query), the problem is one on the group sums
``G[i, g] = sum_{j in g} X[i, j]`` exactly: the objective, the group and total bounds
read only ``G``, and the column sums ``sum_i X[i, j] = p_j`` hold for some ``X >= 0``
with these group sums if and only if ``sum_i G[i, g] = P_g`` (the parent's group sum)
and ``G >= 0``. Any such ``G`` is spread over the group's cells in proportion to the
parent, ``X[i, j] = G[i, g] p_j / P_g``, which meets every column sum and keeps every
group sum. So the ``k x G`` problem (58 x 8) is solved instead (by the active set, then the
chain: Clarabel stopped at 8x the optimal objective on that County family's group sums,
with a parent of 37M persons), and its optimum is an optimum of the whole problem (the same objective value; among the optimal
``X``, the proportional one).
"""

from __future__ import annotations

import numpy as np

from censusdp.release.topdown.problem import Subproblem

__all__: list[str] = []


def group_reduction(sub: Subproblem) -> tuple[Subproblem, np.ndarray] | None:
    """The problem on the group sums and each kept cell's group among them, or ``None``
    when a query sees inside a group, there is no parent, or there is nothing to gain."""
    if sub.parent is None or sub.k < 2 or sub.c == 0:
        return None
    present, cell_group = np.unique(sub.groups, return_inverse=True)
    cell_group = cell_group.astype(np.int64)
    if present.size >= sub.c:
        return None
    rows = []
    for r in sub.query_rows:
        of_group = np.zeros(present.size, dtype=np.int64)
        of_group[cell_group] = r
        if not np.array_equal(of_group[cell_group], r):
            return None  # the query separates two cells of one group
        rows.append(of_group)
    parent = np.bincount(cell_group, weights=sub.parent, minlength=present.size)
    reduced = Subproblem(
        parent=np.rint(parent).astype(np.int64),
        query_rows=tuple(rows),
        query_sizes=sub.query_sizes,
        noisy=sub.noisy,
        weights=sub.weights,
        groups=present,
        group_lower=sub.group_lower,
        group_upper=sub.group_upper,
        total_lower=sub.total_lower,
        total_upper=sub.total_upper,
        label=f"{sub.label} (group sums)",
        child_labels=sub.child_labels,
        noise_scale=sub.noise_scale,
        unit_weights=sub.unit_weights,
        child_group=sub.child_group,
        group_totals=sub.group_totals,
    )
    return reduced, cell_group


def spread(sub: Subproblem, cell_group: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``X[i, j] = G[i, g(j)] p_j / P_g(j)``: the group sums ``g`` (``(k, G)``) spread over
    the kept cells in proportion to the parent."""
    parent = np.asarray(sub.parent, dtype=np.float64)
    totals = np.bincount(cell_group, weights=parent)
    return g[:, cell_group] * (parent / totals[cell_group])[None, :]
