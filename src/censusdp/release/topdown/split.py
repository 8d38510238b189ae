"""Splitting a very wide family: a coarse solve over chunks of children, then each chunk.

One parent-with-children problem costs more than linearly in its number of children: the
tracts of Los Angeles County (2,334 children, a single task) took 27 CPU minutes, 88% of
California's tract level, while the level's other 5,700 tracts took 3.5 minutes in all.
No number of cores shortens that task, so it bounds the run.

:func:`coarse_subproblem` cuts the ``k`` children into ``m`` consecutive chunks of about
equal size and builds the problem of the parent with ``m`` "chunk" children: a chunk's
noisy answers are the sums of its children's (unbiased, with the variance of each query
multiplied by the chunk size, the same for every query, so the relative weights are
unchanged), its bounds the sums of its children's bounds. Solving and rounding it gives
integer chunk histograms that sum exactly to the parent (:func:`chunk_subproblems` then
builds one problem per chunk with its rounded histogram as the parent, so every chunk
solve is exact to its chunk and, by the coarse step, to the parent. This is what an
inserted geolevel does (production inserts tract groups under wide counties); the
chunk solves are independent tasks, so the critical path of the family becomes the
coarse solve plus its largest chunk.

Feasibility: below the invariant level a child's total is free and its group bounds are
per (child, group), so within each group the children's split of a chunk histogram is a
transportation problem with free cells and bounded row sums, feasible whenever the chunk's
group sums lie within the summed bounds, which the coarse rounding guarantees. Exact or
bounded totals couple the groups and the summed bounds are then not enough, so a family
with any bounded total is never split (:func:`splittable`): the state totals of the US
family, and the unit run, whose totals are the invariant housing units.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from censusdp.release.topdown.problem import Subproblem

__all__ = [
    "DEFAULT_MAX_CHILDREN",
    "Chunk",
    "chunk_starts",
    "chunk_subproblems",
    "coarse_subproblem",
    "splittable",
    "splittable_family",
]

DEFAULT_MAX_CHILDREN = 100
"""Families with more children are solved in chunks of at most this many children.

From ``benchmarks/bench_split.py`` (synthetic county families, 4,300 people a tract): a
whole solve grows about as ``k^2`` (100 tracts 7.7 CPU s, 200 tracts 33 s); two chunks of
100 take 0.55x its CPU with a critical path of 0.29x, for 4.6% more cell error on that
family (chunks of 50: 0.19x CPU, 10% more error). Only families wider than this change:
the largest counties' tracts and rural block groups of hundreds of blocks."""


@dataclass(frozen=True, eq=False)
class Chunk:
    """One chunk of a split family: its children and problem.

    Attributes:
        offset: index of its first child in the family.
        kept: ``(c_chunk,)`` indices of its kept cells among the family's kept cells (the
            cells its rounded chunk histogram is positive on).
        sub: the problem of the chunk's children under its rounded histogram.
    """

    offset: int
    kept: np.ndarray
    sub: Subproblem


def splittable(sub: Subproblem, max_children: int | None) -> bool:
    """Whether to split: more than ``max_children`` children, a parent, every total free,
    no child groups (a state's parts under the US are solved in one problem)."""
    return (
        sub.parent is not None
        and sub.child_group is None
        and splittable_family(sub.k, sub.c, sub.total_lower, sub.total_upper, max_children)
    )


def splittable_family(
    k: int,
    c: int,
    total_lower: np.ndarray,
    total_upper: np.ndarray,
    max_children: int | None,
) -> bool:
    """:func:`splittable` for a family under a parent, from its size, its number of kept
    cells and its children's total bounds alone (no measurement read)."""
    return (
        max_children is not None
        and k > max_children
        and c > 0
        and not np.asarray(total_lower).any()
        and bool(np.isinf(total_upper).all())
    )


def chunk_starts(k: int, max_children: int) -> np.ndarray:
    """First child of each of ``ceil(k / max_children)`` consecutive, near-equal chunks."""
    if max_children < 1:
        raise ValueError(f"max_children must be >= 1, got {max_children}")
    m = max(1, -(-k // max_children))
    return np.asarray([i * k // m for i in range(m)], dtype=np.int64)


def coarse_subproblem(sub: Subproblem, starts: np.ndarray) -> Subproblem:
    """The parent with one child per chunk (children ``starts[i]:starts[i + 1]``).

    Noisy answers and bounds are summed over each chunk's children (``inf`` stays
    ``inf``); the weights are kept (every query's variance grows by the same factor).
    """
    sizes = np.diff(np.r_[starts, sub.k])
    bounds = np.r_[starts, sub.k]
    labels = tuple(
        f"children {a}..{b - 1}"
        + (f" ({sub.child_labels[a]}..{sub.child_labels[b - 1]})" if sub.child_labels else "")
        for a, b in zip(bounds[:-1], bounds[1:], strict=True)
    )
    scale = None if sub.noise_scale is None else sub.noise_scale * float(np.sqrt(sizes.mean()))
    unit = None
    if sub.unit_weights is not None:
        # a chunk's summed answer has variance sum_i v_q / u_qi; relative to the
        # uniform case (size v_q) its multiplier is size / sum_i (1 / u_qi)
        inv = np.where(
            sub.unit_weights > 0,
            1.0 / np.where(sub.unit_weights > 0, sub.unit_weights, 1.0),
            np.inf,
        )
        unit = sizes[None, :] / np.add.reduceat(inv, starts, axis=1)
    return Subproblem(
        parent=sub.parent,
        query_rows=sub.query_rows,
        query_sizes=sub.query_sizes,
        noisy=tuple(np.add.reduceat(n, starts, axis=0) for n in sub.noisy),
        weights=sub.weights,
        groups=sub.groups,
        group_lower=np.add.reduceat(sub.group_lower, starts, axis=0),
        group_upper=np.add.reduceat(sub.group_upper, starts, axis=0),
        total_lower=np.add.reduceat(sub.total_lower, starts),
        total_upper=np.add.reduceat(sub.total_upper, starts),
        label=f"{sub.label} ({starts.size} chunks of children)",
        child_labels=labels,
        noise_scale=scale,
        unit_weights=unit,
    )


def chunk_subproblems(sub: Subproblem, starts: np.ndarray, counts: np.ndarray) -> list[Chunk]:
    """One problem per chunk, its parent the chunk's row of the rounded coarse ``counts``.

    Cells where a chunk's count is zero are dropped from its problem (as the driver drops
    a parent's zero cells), so every chunk problem is a regular parent-with-children one.
    """
    counts = np.asarray(counts, dtype=np.int64)
    if counts.shape != (starts.size, sub.c):
        raise ValueError(
            f"coarse counts have shape {counts.shape}, expected {(starts.size, sub.c)}"
        )
    bounds = np.r_[starts, sub.k]
    out = []
    for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        keep = np.flatnonzero(counts[i] > 0)
        out.append(
            Chunk(
                offset=int(a),
                kept=keep,
                sub=Subproblem(
                    parent=counts[i, keep],
                    query_rows=tuple(r[keep] for r in sub.query_rows),
                    query_sizes=sub.query_sizes,
                    noisy=tuple(n[a:b] for n in sub.noisy),
                    weights=sub.weights,
                    groups=sub.groups[keep],
                    group_lower=sub.group_lower[a:b],
                    group_upper=sub.group_upper[a:b],
                    total_lower=sub.total_lower[a:b],
                    total_upper=sub.total_upper[a:b],
                    label=f"{sub.label} children {a}..{b - 1}",
                    child_labels=sub.child_labels[a:b],
                    noise_scale=sub.noise_scale,
                    unit_weights=None if sub.unit_weights is None else sub.unit_weights[:, a:b],
                ),
            )
        )
    return out
