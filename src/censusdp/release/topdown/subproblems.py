"""From noisy measurements to one family's subproblem: what a TopDown task solves.

A family is the children of one parent (:class:`Family`: which children, the parent's
kept cells and counts, their groups and bounds, labels). :func:`make_subproblem` turns the
children's measurements into a :class:`~censusdp.release.topdown.problem.Subproblem`,
keeping of each query only the answer rows that hold a kept cell (:func:`present_rows`),
weighting each query by its inverse variance (plus :data:`VARIANCE_FLOOR`).

The measurements are read by runs of whole families (:func:`family_runs`, cut by
:func:`~censusdp.data.geography.family_chunks`); a family larger than a chunk is read in
pieces, each cut to its present rows at once (:class:`FamilyRun`), so memory is bounded
by a chunk even then. :class:`QueryCache` keeps each query's operator (one per schema per
process: :func:`worker_cache`) and the candidate coarsenings of maximum entropy.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from censusdp.data.geography import DEFAULT_CHUNK_VALUES, Hierarchy, family_chunks
from censusdp.data.invariants import Bounds
from censusdp.data.measurements import MeasuredQuery, Measurements, concat_units
from censusdp.data.queries import Query, make_query
from censusdp.release.topdown.maxent import coarsenings_for
from censusdp.release.topdown.problem import Subproblem

__all__ = [
    "VARIANCE_FLOOR",
    "Family",
    "FamilyRun",
    "QueryCache",
    "family_runs",
    "group_of_cells",
    "make_subproblem",
    "present_rows",
    "worker_cache",
]


VARIANCE_FLOOR = 1e-6
"""Added to every variance before weighting (weights ``1 / (variance + floor)``).

Irrelevant for real budgets (variances of order 1 and more), it keeps the weights of
near-exact measurements (huge budgets: a discrete Gaussian with ``sigma^2 = 0.01`` has
variance about ``1e-21``) finite and comparable, instead of letting one query's
astronomically small variance swamp every other measurement."""


class QueryCache:
    """Each query's operator on the schema, and the candidate coarsenings of a list of
    queries (built once each: a ``detailed`` query is costly to build)."""

    def __init__(self, ms: Measurements) -> None:
        self.ms = ms
        self._q: dict[str, Query] = {}

        self._coarse: dict[tuple[str, ...], tuple] = {}

    def get(self, name: str) -> Query:
        if name not in self._q:
            self._q[name] = make_query(self.ms.schema, name)
        return self._q[name]

    def coarse(self, mqs: list[MeasuredQuery], estimator: str, kept: np.ndarray) -> tuple:
        """The candidate coarsenings of ``mqs``'s queries (none for least squares), on
        the answer rows a subproblem of the cells ``kept`` keeps (:func:`present_rows`)."""
        if estimator == "ls":
            return ()
        names = tuple(m.query for m in mqs)
        if names not in self._coarse:
            self._coarse[names] = coarsenings_for(self.ms.schema, names)
        return tuple(
            tuple((name, bins[present_rows(self.get(q), kept)[0]]) for name, bins in cands)
            for q, cands in zip(names, self._coarse[names], strict=True)
        )


def group_of_cells(ms: Measurements, group_variable: str | None) -> tuple[np.ndarray, int]:
    """The group of every schema cell, and the number of groups.

    ``group_variable`` is one attribute or recode (its levels are the groups), a cross of
    several (``"hhgq * votingage * hispanic * cenrace"``: the groups are the cross's cells
    in C order, the last variable fastest, as the query of that name orders its rows), or
    ``None`` (one group)."""
    if group_variable is None:
        return np.zeros(ms.schema.size, dtype=np.int64), 1
    query = make_query(ms.schema, group_variable)
    return query.row_of_cell, query.n_rows


@dataclass(frozen=True, eq=False)
class Family:
    """One parent's children as their subproblem sees them, measurements aside.

    Attributes:
        start: the first child's unit index at its level.
        k: the number of children.
        kept: the parent's cells with a positive count (schema cell indices, sorted);
            every live cell at the root and for a bottom-up block batch.
        parent_counts: the parent's counts on ``kept``; ``None`` at the root and for a
            bottom-up block batch (no parent constraint).
        groups: the group of each kept cell.
        bounds: the children's bounds (cut to them: ``Bounds.units(children)``).
        label: the subproblem's name in messages (``"County 50001"``, ``"root"``).
        child_labels: each child's name (for the failsafe's report).
    """

    start: int
    k: int
    kept: np.ndarray
    parent_counts: np.ndarray | None
    groups: np.ndarray
    bounds: Bounds
    label: str
    child_labels: tuple[str, ...] = ()

    @property
    def children(self) -> slice:
        """The children's units at their level."""
        return slice(self.start, self.start + self.k)


def make_subproblem(
    mqs: list[MeasuredQuery], cache: QueryCache, local: slice, family: Family
) -> Subproblem:
    """The subproblem of ``family``, whose children's rows in ``mqs`` are ``local``.

    Each query keeps only its answer rows that hold a kept cell (:func:`present_rows`):
    a row with none has answer 0 for every candidate, its squared residual is a constant
    of the objective, and its true answer is 0 in every child (the parent is 0 there), so
    its noisy answer is pure noise for the start point's child totals too. Below the root
    this is what keeps a family of many children of a rich schema small: a block group
    of ``dhc-lite`` has a few hundred positive cells of 233,856, and the dense answers of
    540 children would be 1 GB.
    """
    rows, sizes, noisy = [], [], []
    for mq in mqs:
        present, local_rows = present_rows(cache.get(mq.query), family.kept)
        rows.append(local_rows)
        sizes.append(int(present.size))
        noisy.append(mq.columns(local, present))
    w, unit, least = _weights(mqs, local)
    noise = float(np.sqrt(least + VARIANCE_FLOOR)) if mqs else None
    if w.size and w.max() > 0:
        # Only relative weights matter; scaling them to max 1 keeps solver tolerances
        # meaningful when the budget is huge (variances near 0).
        w = w / w.max()
    b = family.bounds
    grouped = b.unit_groups_of(slice(None))
    return Subproblem(
        parent=family.parent_counts,
        query_rows=tuple(rows),
        query_sizes=tuple(sizes),
        noisy=tuple(noisy),
        weights=w,
        groups=family.groups,
        group_lower=b.group_lower,
        group_upper=b.group_upper,
        total_lower=b.total_lower,
        total_upper=b.total_upper,
        label=family.label,
        child_labels=family.child_labels,
        noise_scale=noise,
        unit_weights=unit,
        child_group=None if grouped is None else grouped[0],
        group_totals=None if grouped is None else grouped[1],
    )


def _weights(mqs: list[MeasuredQuery], local: slice) -> tuple[np.ndarray, np.ndarray | None, float]:
    """Per query the weight ``1 / (variance + floor)``, per child its multiplier, and the
    smallest variance.

    Children measured with their own budgets (a spine release's bypass) have their own
    variances: query ``q``'s weight is then its most precise child's and
    ``unit[q, i] <= 1`` child ``i``'s fraction of it (0 for a child not measured).
    ``unit`` is ``None`` when every child has its query's variance.
    """
    if all(mq.uniform for mq in mqs):
        var = np.asarray([float(mq.variance) for mq in mqs], dtype=np.float64)
        least = float(var.min()) if var.size else 0.0
        return 1.0 / (var + VARIANCE_FLOOR), None, least
    per = np.asarray([mq.unit_variances()[local] for mq in mqs], dtype=np.float64)
    finite = np.isfinite(per)
    child_w = np.where(finite, 1.0 / (np.where(finite, per, 0.0) + VARIANCE_FLOOR), 0.0)
    w = child_w.max(axis=1)
    unit = child_w / np.where(w > 0, w, 1.0)[:, None]
    least = float(per[finite].min()) if finite.any() else 0.0
    if (unit == 1.0).all():
        return w, None, least
    return w, unit, least


def present_rows(q: Query, kept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The answer rows of ``q`` holding a kept cell (sorted), and each kept cell's index
    among them."""
    present, local = np.unique(q.row_of_cell[kept], return_inverse=True)
    return present, local.astype(np.int64)


def family_runs(
    ms: Measurements,
    hierarchy: Hierarchy,
    child_level: int,
    target: int = DEFAULT_CHUNK_VALUES,
    *,
    lazy: bool = False,
) -> Iterator[tuple[int, int, FamilyRun]]:
    """``(first parent, parent stop, measurements of their children)`` per chunk of families
    (``lazy``: a run reads nothing until a family of it is asked for)."""
    width = sum(m.rows.size for m in ms.read(child_level, 0, 0))
    parent = hierarchy.parent[child_level]
    for c0, c1 in family_chunks(hierarchy, child_level, width, target):
        run = FamilyRun(ms, child_level, c0, c1, width, target, lazy=lazy)
        yield int(parent[c0]), int(parent[c1 - 1]) + 1, run


class FamilyRun:
    """The measurements of the children in one run of whole families (units ``c0:c1``).

    A run of at most ``target`` values is read at once. A larger run (one family of
    many children of a rich schema: 540 blocks x 229,320 measured cells is 124 million
    values) is never read whole: :meth:`family` reads its children ``target`` values at
    a time and keeps of each piece only the answer rows the family's problem uses.
    """

    def __init__(
        self,
        ms: Measurements,
        level: int,
        c0: int,
        c1: int,
        width: int,
        target: int,
        lazy: bool = False,
    ) -> None:
        self.ms, self.level, self.c0, self.c1 = ms, level, c0, c1
        self.per = max(1, target // max(width, 1))
        self.whole = c1 - c0 <= self.per
        self.mqs = ms.read(level, c0, c1) if self.whole and not lazy else None

    def family(
        self, children: slice, kept: np.ndarray, cache: QueryCache
    ) -> tuple[list[MeasuredQuery], slice]:
        """The measurements of ``children`` and their rows in them (``local``).

        Measurements that read a run of units on given answer rows only (``read_rows``:
        the NMF reader) are read so, on the rows of ``kept`` (:func:`present_rows`),
        when the family is the whole run or read in pieces; the same queries as reading
        them whole and keeping those rows (``MeasuredQuery.restricted``)."""
        rows_only = hasattr(self.ms, "read_rows")
        one = (children.start, children.stop) == (self.c0, self.c1)
        if self.mqs is None and self.whole and not (rows_only and one):
            self.mqs = self.ms.read(self.level, self.c0, self.c1)
        if self.mqs is not None:
            return self.mqs, slice(children.start - self.c0, children.stop - self.c0)
        wanted = _PresentRows(cache, kept)
        parts: list[list[MeasuredQuery]] = []
        for a in range(children.start, children.stop, self.per):
            b = min(a + self.per, children.stop)
            if rows_only:
                parts.append(self.ms.read_rows(self.level, a, b, wanted))  # type: ignore[attr-defined]
                continue
            piece = self.ms.read(self.level, a, b)
            parts.append([mq.restricted(wanted[mq.query]) for mq in piece])
        if not parts:
            return [], slice(0, 0)
        mqs = [concat_units([p[i] for p in parts]) for i in range(len(parts[0]))]
        return mqs, slice(0, children.stop - children.start)


class _PresentRows(dict):
    """Query name -> the answer rows of the kept cells (:func:`present_rows`), built
    when first asked for."""

    def __init__(self, cache: QueryCache, kept: np.ndarray) -> None:
        super().__init__()
        self.cache, self.kept = cache, kept

    def __missing__(self, name: str) -> np.ndarray:
        rows = present_rows(self.cache.get(name), self.kept)[0]
        self[name] = rows
        return rows


_WORKER_CACHES: dict[tuple[str, int], QueryCache] = {}


def worker_cache(ms: Measurements) -> QueryCache:
    """One query cache per schema per process (a ``detailed`` query is costly to build)."""
    key = (ms.schema.name, ms.schema.size)
    if key not in _WORKER_CACHES:
        _WORKER_CACHES[key] = QueryCache(ms)
    return _WORKER_CACHES[key]
