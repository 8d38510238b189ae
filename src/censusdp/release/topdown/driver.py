"""The TopDown driver: estimate the root, then each parent with its children, level by level.

Input is only what is public after measurement (JASON (JSR-19-2F) sec. 5.7; Van Riper et al. (2020) sec. 2.2):
the :class:`~censusdp.data.measurements.MeasurementSet` and, per level, the bounds implied by the
invariants and constraints. Each parent-with-children solve is an independent, picklable
:class:`Task` (a :class:`~censusdp.release.topdown.problem.Subproblem` plus bookkeeping), so an
executor may run the tasks of one level in any order, in any process.

For each task: the failsafe makes the subproblem feasible (recording any relaxation),
the weighted least-squares step finds a non-negative real solution, the rounding step
finds the nearest integer solution that keeps every cell summing to the parent and every
bound exact, and the result is checked exactly before it is accepted.

``postprocess="bottomup"`` estimates each block from its own measurements alone (no
parent constraint) and aggregates up: consistent, but with the noise of every block
summed at the higher levels.

Memory is bounded by a chunk, not by a level: the tasks of a level are built lazily from
runs of whole families (:func:`censusdp.data.geography.family_chunks`), each read from the
measurements (an in-memory set or the NMF reader) only when the executor asks for the
next task, and each result is folded into the level's sparse histogram as it arrives.
A family larger than a chunk (a block group of hundreds of ``ddp-2010`` blocks) is read in
pieces, and every task keeps only the answer rows that hold a cell its parent has
(:class:`_Run`, :func:`_make_subproblem`), so memory is bounded by a chunk even then.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from censusdp.data.geography import DEFAULT_CHUNK_VALUES, Hierarchy, family_chunks
from censusdp.data.invariants import Bounds
from censusdp.data.measurements import MeasuredQuery, Measurements, concat_units
from censusdp.data.queries import Query, make_query
from censusdp.errors import CensusDPError, ConfigError, InternalError
from censusdp.progress import logger, task
from censusdp.release.topdown.failsafe import make_feasible
from censusdp.release.topdown.maxent import ESTIMATORS, coarsenings_for, solve_maxent
from censusdp.release.topdown.multipass import (
    L2Passes,
    RoundingPasses,
    RoundingTemplate,
    bind_l2,
    bind_rounding,
    round_in_passes,
    solve_l2_passes,
)
from censusdp.release.topdown.passes import PASS_MODES, plans_for
from censusdp.release.topdown.pooling import pooled_root
from censusdp.release.topdown.problem import Subproblem
from censusdp.release.topdown.rounding import round_to_integers
from censusdp.release.topdown.solvers.least_squares import solve_l2
from censusdp.release.topdown.split import (
    DEFAULT_MAX_CHILDREN,
    chunk_starts,
    chunk_subproblems,
    coarse_subproblem,
    splittable,
    splittable_family,
)

__all__ = [
    "Estimate",
    "Task",
    "TaskResult",
    "estimate",
    "run_task",
    "run_tasks",
]


_VARIANCE_FLOOR = 1e-6
"""Added to every variance before weighting (weights ``1 / (variance + floor)``).

Irrelevant for real budgets (variances of order 1 and more), it keeps the weights of
near-exact measurements (huge budgets: a discrete Gaussian with ``sigma^2 = 0.01`` has
variance about ``1e-21``) finite and comparable, instead of letting one query's
astronomically small variance swamp every other measurement."""


@dataclass(frozen=True, eq=False)
class Task:
    """One estimation task: the children of one parent (or the root, or a block batch)."""

    level: int
    parent_geocode: str
    child_start: int
    kept: np.ndarray
    sub: Subproblem
    method: str = "auto"
    l2_passes: L2Passes | None = None
    rounding: RoundingPasses | None = None
    estimator: str = "ls"
    coarse: tuple = ()
    source: _Family | None = None
    chunks: int = 0
    """A split family's coarse solve: the number of chunks of children (0: any other task)."""

    def subproblem(self) -> Subproblem:
        """The task's subproblem: ``sub``, or built from ``source`` where the task runs."""
        if self.sub is not None:
            return self.sub
        if self.source is None:
            raise InternalError(f"task {self.parent_geocode!r} has no subproblem")
        return self.source.build()


@dataclass(frozen=True, eq=False)
class _Family:
    """A family that its task reads itself (:class:`Task` ``source``): the children's
    measurements as a slice of the NMF (``NMFReader.detach``: row-group locations, no
    values) and everything else :func:`_make_subproblem` needs, cut to the family.

    The driver then builds a ``ddp-2010`` block family's task without reading its
    millions of noisy values: the workers read in parallel, each the family it solves.
    """

    ms: Any
    level: int
    start: int
    k: int
    kept: np.ndarray
    parent_counts: np.ndarray
    groups: np.ndarray
    bounds: Bounds
    label: str
    child_labels: tuple[str, ...]

    def build(self) -> Subproblem:
        cache = _worker_cache(self.ms)
        children = slice(self.start, self.start + self.k)
        width = sum(m.rows.size for m in self.ms.read(self.level, self.start, self.start))
        run = _Run(self.ms, self.level, self.start, children.stop, width, DEFAULT_CHUNK_VALUES)
        mqs, local = run.family(children, self.kept, cache)
        cell_groups = np.zeros(self.ms.schema.size, dtype=np.int64)
        cell_groups[self.kept] = self.groups
        return _make_subproblem(
            mqs,
            cache,
            local,
            slice(0, self.k),
            self.kept,
            self.parent_counts,
            cell_groups,
            self.bounds,
            label=self.label,
            child_labels=self.child_labels,
        )


_WORKER_CACHES: dict[tuple[str, int], _QueryCache] = {}


def _worker_cache(ms: Any) -> _QueryCache:
    """One query cache per schema per process (a ``detailed`` query is costly to build)."""
    key = (ms.schema.name, ms.schema.size)
    if key not in _WORKER_CACHES:
        _WORKER_CACHES[key] = _QueryCache(ms)
    return _WORKER_CACHES[key]


@dataclass(frozen=True, eq=False)
class TaskResult:
    """The integer histograms of a task's children on its kept cells, and what happened."""

    level: int
    parent_geocode: str
    child_start: int
    kept: np.ndarray
    counts: np.ndarray
    status: str
    method: str
    seconds: float
    l2_seconds: float
    rounding_seconds: float
    max_violation: float
    failsafe: dict | None = None
    cpu_seconds: float = 0.0
    attempts: tuple[tuple[str, str], ...] = ()
    chunks: int = 0
    """The task's ``chunks``: a split family's coarse result when positive."""


@dataclass(frozen=True, eq=False)
class Estimate:
    """The integer detailed histograms of every level, and per-level task summaries."""

    histograms: list[sp.csr_matrix]
    levels: list[dict] = field(default_factory=list)
    failsafe: list[dict] = field(default_factory=list)


def _check_counts(sub: Subproblem, counts: np.ndarray, where: str) -> None:
    """Exact integer check of a rounded solution; a failure is a bug, not bad input."""
    if counts.shape != (sub.k, sub.c):
        raise InternalError(f"{where}: rounded shape {counts.shape} != {(sub.k, sub.c)}")
    if sub.c and counts.min() < 0:
        raise InternalError(f"{where}: negative count after rounding")
    if sub.parent is not None and not np.array_equal(counts.sum(axis=0), sub.parent):
        raise InternalError(f"{where}: children do not sum to the parent")
    gs = sub.group_sums(counts)
    if (gs < sub.group_lower - 1e-9).any() or (gs > sub.group_upper + 1e-9).any():
        raise InternalError(f"{where}: group bounds violated after rounding")
    ts = counts.sum(axis=1)
    if (ts < sub.total_lower - 1e-9).any() or (ts > sub.total_upper + 1e-9).any():
        raise InternalError(f"{where}: total bounds violated after rounding")


BATCH_VARIABLES = 4096
"""Small tasks are sent to the executor in batches of up to this many unknowns
(children x kept cells) in all: a housing-unit family of 20 blocks and 2 cells costs
less to solve than to ship to a worker and back."""
BATCH_MAX_TASKS = 64
"""At most this many tasks in one batch (progress and load balance stay fine-grained)."""


def run_tasks(batch: tuple[Task, ...]) -> list[TaskResult]:
    """Solve a batch of tasks in order (:func:`run_task` each)."""
    return [run_task(t) for t in batch]


def _task_size(t: Task) -> int:
    """Unknowns of a task (children x kept cells, at least one cell): the batching measure."""
    if t.sub is not None:
        return t.sub.k * max(t.sub.c, 1)
    return t.source.k * max(int(t.kept.size), 1)  # type: ignore[union-attr]


def _batched(tasks: Iterable[Task]) -> Iterator[tuple[Task, ...]]:
    """Consecutive tasks grouped into batches of at most :data:`BATCH_VARIABLES`
    unknowns and :data:`BATCH_MAX_TASKS` tasks (a larger task alone), in order."""
    batch: list[Task] = []
    size = 0
    for t in tasks:
        n = _task_size(t)
        if batch and (size + n > BATCH_VARIABLES or len(batch) >= BATCH_MAX_TASKS):
            yield tuple(batch)
            batch, size = [], 0
        batch.append(t)
        size += n
    if batch:
        yield tuple(batch)


def run_task(task: Task) -> TaskResult:
    """Solve one task: failsafe, least squares, rounding, exact check."""
    t0 = time.perf_counter()
    c0 = time.process_time()
    sub, report = make_feasible(task.subproblem())
    t1 = time.perf_counter()
    # maxent, or auto's pick; None: least squares
    l2 = (
        None
        if task.estimator == "ls"
        else solve_maxent(sub, task.estimator, method=task.method, coarse=task.coarse)
    )
    if l2 is None and task.l2_passes is None:
        l2 = solve_l2(sub, method=task.method)
    elif l2 is None:
        l2 = solve_l2_passes(sub, task.l2_passes, method=task.method)
    t2 = time.perf_counter()
    if task.rounding is None or (sub.parent is None and l2.method == "maxent"):
        # a maximum-entropy root (one geounit, its total invariant) has no children's
        # totals to keep: held to the published marginals first, its thin spread over
        # the detailed cells broke ties inside each row by cell order (the state's sex x
        # age TVD of Vermont x0.02 at epsilon 0.5, seed 1: 0.196 so, 0.189 cell by cell)
        counts = np.asarray(round_to_integers(sub, l2.x), dtype=np.int64)
    else:
        counts = np.asarray(round_in_passes(sub, l2.x, task.rounding), dtype=np.int64)
    t3 = time.perf_counter()
    _check_counts(sub, counts, f"task {task.parent_geocode or 'root'}")
    fs = None
    if getattr(report, "relaxed", False):
        fs = report.to_dict() if hasattr(report, "to_dict") else {"report": str(report)}
        fs["parent_geocode"] = task.parent_geocode
    return TaskResult(
        level=task.level,
        parent_geocode=task.parent_geocode,
        child_start=task.child_start,
        kept=task.kept,
        counts=counts,
        status=str(l2.status),
        method=str(l2.method),
        seconds=t3 - t0,
        l2_seconds=t2 - t1,
        rounding_seconds=t3 - t2,
        max_violation=float(l2.max_violation),
        failsafe=fs,
        cpu_seconds=time.process_time() - c0,
        attempts=tuple(l2.attempts),
        chunks=task.chunks,
    )


class _QueryCache:
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
        the answer rows a subproblem of the cells ``kept`` keeps (:func:`_present_rows`)."""
        if estimator == "ls":
            return ()
        names = tuple(m.query for m in mqs)
        if names not in self._coarse:
            self._coarse[names] = coarsenings_for(self.ms.schema, names)
        return tuple(
            tuple((name, bins[_present_rows(self.get(q), kept)[0]]) for name, bins in cands)
            for q, cands in zip(names, self._coarse[names], strict=True)
        )


def _group_of_cells(ms: Measurements, group_variable: str | None) -> tuple[np.ndarray, int]:
    schema = ms.schema
    if group_variable is None:
        return np.zeros(schema.size, dtype=np.int64), 1
    var = schema.variable(group_variable)
    return schema.cell_levels(group_variable), var.size


def _make_subproblem(
    mqs: list[MeasuredQuery],
    cache: _QueryCache,
    local: slice,
    children: slice,
    kept: np.ndarray,
    parent_counts: np.ndarray | None,
    cell_groups: np.ndarray,
    bounds: Bounds,
    label: str,
    child_labels: tuple[str, ...] = (),
) -> Subproblem:
    """The subproblem of ``children`` (units of the level), whose rows in ``mqs`` are ``local``.

    Each query keeps only its answer rows that hold a kept cell (:func:`_present_rows`):
    a row with none has answer 0 for every candidate, its squared residual is a constant
    of the objective, and its true answer is 0 in every child (the parent is 0 there), so
    its noisy answer is pure noise for the start point's child totals too. Below the root
    this is what keeps a family of many children of a rich schema small: a block group
    of ``dhc-lite`` has a few hundred positive cells of 233,856, and the dense answers of
    540 children would be 1 GB.
    """
    rows, sizes, noisy = [], [], []
    for mq in mqs:
        present, local_rows = _present_rows(cache.get(mq.query), kept)
        rows.append(local_rows)
        sizes.append(int(present.size))
        noisy.append(mq.columns(local, present))
    w, unit, least = _weights(mqs, local)
    noise = float(np.sqrt(least + _VARIANCE_FLOOR)) if mqs else None
    if w.size and w.max() > 0:
        # Only relative weights matter; scaling them to max 1 keeps solver tolerances
        # meaningful when the budget is huge (variances near 0).
        w = w / w.max()
    return Subproblem(
        parent=parent_counts,
        query_rows=tuple(rows),
        query_sizes=tuple(sizes),
        noisy=tuple(noisy),
        weights=w,
        groups=cell_groups[kept],
        group_lower=bounds.group_lower[children],
        group_upper=bounds.group_upper[children],
        total_lower=bounds.total_lower[children],
        total_upper=bounds.total_upper[children],
        label=label,
        child_labels=child_labels,
        noise_scale=noise,
        unit_weights=unit,
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
        return 1.0 / (var + _VARIANCE_FLOOR), None, least
    per = np.asarray([mq.unit_variances()[local] for mq in mqs], dtype=np.float64)
    finite = np.isfinite(per)
    child_w = np.where(finite, 1.0 / (np.where(finite, per, 0.0) + _VARIANCE_FLOOR), 0.0)
    w = child_w.max(axis=1)
    unit = child_w / np.where(w > 0, w, 1.0)[:, None]
    least = float(per[finite].min()) if finite.any() else 0.0
    if (unit == 1.0).all():
        return w, None, least
    return w, unit, least


def _present_rows(q: Query, kept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The answer rows of ``q`` holding a kept cell (sorted), and each kept cell's index
    among them."""
    present, local = np.unique(q.row_of_cell[kept], return_inverse=True)
    return present, local.astype(np.int64)


def _family_runs(
    ms: Measurements,
    hierarchy: Hierarchy,
    child_level: int,
    target: int = DEFAULT_CHUNK_VALUES,
    *,
    lazy: bool = False,
) -> Iterator[tuple[int, int, _Run]]:
    """``(first parent, parent stop, measurements of their children)`` per chunk of families
    (``lazy``: a run reads nothing until a family of it is asked for)."""
    width = sum(m.rows.size for m in ms.read(child_level, 0, 0))
    parent = hierarchy.parent[child_level]
    for c0, c1 in family_chunks(hierarchy, child_level, width, target):
        run = _Run(ms, child_level, c0, c1, width, target, lazy=lazy)
        yield int(parent[c0]), int(parent[c1 - 1]) + 1, run


class _Run:
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
        self, children: slice, kept: np.ndarray, cache: _QueryCache
    ) -> tuple[list[MeasuredQuery], slice]:
        """The measurements of ``children`` and their rows in them (``local``)."""
        if self.mqs is None and self.whole:
            self.mqs = self.ms.read(self.level, self.c0, self.c1)
        if self.mqs is not None:
            return self.mqs, slice(children.start - self.c0, children.stop - self.c0)
        parts: list[list[MeasuredQuery]] = []
        for a in range(children.start, children.stop, self.per):
            piece = self.ms.read(self.level, a, min(a + self.per, children.stop))
            parts.append(
                [mq.restricted(_present_rows(cache.get(mq.query), kept)[0]) for mq in piece]
            )
        if not parts:
            return [], slice(0, 0)
        mqs = [concat_units([p[i] for p in parts]) for i in range(len(parts[0]))]
        return mqs, slice(0, children.stop - children.start)


class _LevelTasks:
    """The tasks of one level, built lazily as the executor asks for them.

    A family with more than ``max_children`` children and free totals is split
    (:mod:`censusdp.release.topdown.split`). Its coarse solve is a task like any other
    (``Task.chunks`` > 0): the coarse tasks of the whole level are handed out first, the
    widest family first, so the workers start on them at once, and the driver solves
    nothing. The consumer hands each coarse result back (:meth:`accept`); the next time
    a task is asked for, that family is read again and its chunk tasks go out ahead of
    the level's remaining families (a chunk is on the level's critical path). Chunks
    whose coarse result comes back after the last task has been handed out are in
    :meth:`rest`, a second pass of the executor over what is left.

    The tasks, and so the results, are those of solving each coarse problem on the driver
    and handing out its chunks in place: only their order changes, and the level's
    histogram does not depend on the order. Memory: the driver keeps the coarse
    problems in flight and one family at a time, never every split family at once.

    ``detach`` (measurements with a ``detach(level, start, stop)`` method: the NMF
    reader): a family that is not split is read by its own task where it runs
    (:class:`_Family`), not here; the tasks and their results are the same.
    """

    def __init__(
        self,
        ms: Measurements,
        cache: _QueryCache,
        hierarchy: Hierarchy,
        parent_level: int,
        parent_hist: sp.csr_matrix,
        cell_groups: np.ndarray,
        bounds: Bounds,
        method: str,
        plan: _LevelPlan,
        estimator: str = "ls",
        max_children: int | None = None,
        detach: bool = False,
    ) -> None:
        self.ms, self.cache, self.hierarchy = ms, cache, hierarchy
        self.parent_level = parent_level
        self.parent_hist = parent_hist
        self.cell_groups, self.bounds = cell_groups, bounds
        self.method, self.plan, self.estimator = method, plan, estimator
        self.max_children, self.detach = max_children, detach and hasattr(ms, "detach")
        # CPU seconds this process spent reading families and building their tasks:
        # task work done on the driver (in process, or a family read whole)
        self.build_cpu = 0.0
        self.splits: list[tuple[TaskResult, int]] = []
        """Every coarse result accepted, with its number of chunks (family order)."""
        self._split: dict[int, int] = {}  # first child of a split family -> its parent unit
        self._ready: deque[TaskResult] = deque()

    # -- the consumer's side ------------------------------------------------------------

    def accept(self, r: TaskResult) -> None:
        """Take a split family's coarse result; its chunk tasks go out next."""
        if r.chunks <= 0 or r.child_start not in self._split:
            raise InternalError(f"task {r.parent_geocode!r} is not the coarse solve of a split")
        self.splits.append((r, r.chunks))
        self.splits.sort(key=lambda s: s[0].child_start)
        self._ready.append(r)

    def rest(self) -> Iterator[Task]:
        """The chunk tasks of coarse results accepted after the last task was handed out."""
        yield from self._ready_chunks()

    # -- the executor's side ------------------------------------------------------------

    def __iter__(self) -> Iterator[Task]:
        yield from self._coarse_tasks()
        for t in self._family_tasks():
            yield from self._ready_chunks()
            yield t
        yield from self._ready_chunks()

    def _parent(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """The kept cells of parent unit ``i`` (sorted) and its counts there."""
        h = self.parent_hist
        lo, hi = h.indptr[i], h.indptr[i + 1]
        nz = h.data[lo:hi] > 0
        kept = h.indices[lo:hi][nz].astype(np.int64)
        order = np.argsort(kept)
        return kept[order], h.data[lo:hi][nz][order].astype(np.int64)

    def _label(self, i: int) -> str:
        code = self.hierarchy.geocodes[self.parent_level][i]
        return f"{self.hierarchy.geolevels[self.parent_level].name} {code or 'US'}"

    def _child_labels(self, children: slice) -> tuple[str, ...]:
        level = self.parent_level + 1
        name = self.hierarchy.geolevels[level].name
        return tuple(f"{name} {code}" for code in self.hierarchy.geocodes[level][children])

    def _task(self, i: int, run: _Run) -> Task:
        """Family ``i``'s whole task, its measurements read from ``run`` here (its CPU
        time added to :attr:`build_cpu`)."""
        c0 = time.process_time()
        try:
            return self._whole_task(i, run)
        finally:
            self.build_cpu += time.process_time() - c0

    def _whole_task(self, i: int, run: _Run) -> Task:
        kept, parent_counts = self._parent(i)
        children = self.hierarchy.children(self.parent_level, i)
        mqs, local = run.family(children, kept, self.cache)
        sub = _make_subproblem(
            mqs,
            self.cache,
            local,
            children,
            kept,
            parent_counts,
            self.cell_groups,
            self.bounds,
            label=self._label(i),
            child_labels=self._child_labels(children),
        )
        l2p, rounding = self.plan.bind(kept)
        return Task(
            self.parent_level,
            str(self.hierarchy.geocodes[self.parent_level][i]),
            children.start,
            kept,
            sub,
            self.method,
            l2p,
            rounding,
            self.estimator,
            self.cache.coarse(mqs, self.estimator, kept),
        )

    def _alone(self, i: int) -> Task:
        """Family ``i``'s whole task, read on its own (a split family)."""
        children = self.hierarchy.children(self.parent_level, i)
        level = self.parent_level + 1
        width = sum(m.rows.size for m in self.ms.read(level, 0, 0))
        run = _Run(self.ms, level, children.start, children.stop, width, DEFAULT_CHUNK_VALUES)
        return self._task(i, run)

    def _splits(self, i: int, k: int) -> bool:
        """Whether family ``i`` (``k`` children) is split (``splittable`` without reading it)."""
        if self.max_children is None or k <= self.max_children:
            return False
        children = self.hierarchy.children(self.parent_level, i)
        h = self.parent_hist
        lo, hi = h.indptr[i], h.indptr[i + 1]
        return splittable_family(
            k,
            int((h.data[lo:hi] > 0).sum()),
            self.bounds.total_lower[children],
            self.bounds.total_upper[children],
            self.max_children,
        )

    def _coarse_tasks(self) -> Iterator[Task]:
        """The coarse task of every split family of the level, the widest first."""
        if self.max_children is None:
            return
        kids = np.diff(self.hierarchy.child_ptr[self.parent_level])
        wide = [int(i) for i in np.flatnonzero(kids > self.max_children)]
        wide = [i for i in wide if self._splits(i, int(kids[i]))]
        for i in sorted(wide, key=lambda i: -int(kids[i]) * int(self.parent_hist[i].nnz)):
            whole = self._alone(i)
            starts = chunk_starts(whole.sub.k, self.max_children)
            self._split[whole.child_start] = i
            yield Task(
                whole.level,
                whole.parent_geocode,
                whole.child_start,
                whole.kept,
                coarse_subproblem(whole.sub, starts),
                whole.method,
                *self.plan.bind(whole.kept),
                estimator=whole.estimator,
                coarse=whole.coarse,
                chunks=int(starts.size),
            )

    def _ready_chunks(self) -> Iterator[Task]:
        """The chunk tasks of every coarse result accepted so far."""
        while self._ready:
            r = self._ready.popleft()
            whole = self._alone(self._split[r.child_start])
            starts = chunk_starts(whole.sub.k, self.max_children)  # type: ignore[arg-type]
            if starts.size != r.chunks:
                raise InternalError(f"family {r.parent_geocode!r}: {r.chunks} coarse chunks")
            for ch in chunk_subproblems(whole.sub, starts, r.counts):
                kept = whole.kept[ch.kept]
                yield Task(
                    whole.level,
                    whole.parent_geocode,
                    whole.child_start + ch.offset,
                    kept,
                    ch.sub,
                    whole.method,
                    *self.plan.bind(kept),
                    estimator=whole.estimator,
                    coarse=whole.coarse,
                )

    def _family_tasks(self) -> Iterator[Task]:
        """The task of every family that is not split, in order."""
        pl = self.parent_level
        codes = self.hierarchy.geocodes[pl]
        heads = self.ms.read(pl + 1, 0, 0) if self.detach else []
        for p0, p1, run in _family_runs(self.ms, self.hierarchy, pl + 1, lazy=True):
            for i in range(p0, p1):
                children = self.hierarchy.children(pl, i)
                if children.start in self._split:
                    continue  # its chunks go out as its coarse result arrives
                k = children.stop - children.start
                if not self.detach or (self.max_children is not None and k > self.max_children):
                    t = self._task(i, run)
                    if splittable(t.sub, self.max_children):
                        raise InternalError(f"family {t.parent_geocode!r} was not split")
                    yield t
                    continue
                kept, parent_counts = self._parent(i)
                l2p, rounding = self.plan.bind(kept)
                b = self.bounds
                yield Task(
                    pl,
                    str(codes[i]),
                    children.start,
                    kept,
                    None,  # type: ignore[arg-type]
                    self.method,
                    l2p,
                    rounding,
                    self.estimator,
                    self.cache.coarse(heads, self.estimator, kept),
                    source=_Family(
                        self.ms.detach(pl + 1, children.start, children.stop),  # type: ignore[attr-defined]
                        pl + 1,
                        children.start,
                        k,
                        kept,
                        parent_counts,
                        self.cell_groups[kept],
                        Bounds(
                            b.group_lower[children],
                            b.group_upper[children],
                            b.total_lower[children],
                            b.total_upper[children],
                        ),
                        self._label(i),
                        self._child_labels(children),
                    ),
                )


def _bottomup_tasks(
    ms: Measurements,
    cache: _QueryCache,
    hierarchy: Hierarchy,
    live: np.ndarray,
    cell_groups: np.ndarray,
    bounds: Bounds,
    method: str,
    estimator: str = "ls",
) -> Iterator[Task]:
    """Blocks estimated without a parent constraint, batched by their parent unit."""
    bl = hierarchy.n_levels - 1
    codes = hierarchy.geocodes[bl - 1]
    for p0, p1, run in _family_runs(ms, hierarchy, bl):
        for i in range(p0, p1):
            children = hierarchy.children(bl - 1, i)
            mqs, local = run.family(children, live, cache)
            sub = _make_subproblem(
                mqs,
                cache,
                local,
                children,
                live,
                None,
                cell_groups,
                bounds,
                label=f"bottom-up blocks of {codes[i]}",
            )
            yield Task(
                bl - 1,
                str(codes[i]),
                children.start,
                live,
                sub,
                method,
                estimator=estimator,
                coarse=cache.coarse(mqs, estimator, live),
            )


@dataclass(frozen=True, eq=False)
class _LevelPlan:
    """The passes of one level's tasks: least squares bound to its measured queries, and
    the rounding template (``None``: one pass, cell-wise rounding)."""

    l2: L2Passes | None = None
    rounding: RoundingTemplate | None = None

    def bind(self, kept: np.ndarray) -> tuple[L2Passes | None, RoundingPasses | None]:
        return self.l2, None if self.rounding is None else self.rounding.on(kept)


def _level_plans(
    ms: Measurements,
    hierarchy: Hierarchy,
    group_variable: str | None,
    passes: str,
    root_names: list[str] | None = None,
) -> list[_LevelPlan]:
    """Per level, the passes of the tasks whose children are at that level (the root's
    bound to ``root_names``, its queries, when given)."""
    names = [g.name for g in hierarchy.geolevels]
    out = []
    for level, plan in enumerate(plans_for(ms.schema.name, names, passes)):
        if plan is None:
            out.append(_LevelPlan())
            continue
        measured = [m.query for m in ms.read(level, 0, 0)]
        if level == 0 and root_names is not None:
            measured = root_names
        out.append(
            _LevelPlan(
                bind_l2(plan, ms.schema, measured, group_variable), bind_rounding(plan, ms.schema)
            )
        )
    return out


class _LevelResults:
    """Folds task results into a level's sparse histogram and summary as they arrive."""

    def __init__(self, level_name: str, n_units: int, n_cells: int) -> None:
        self.level_name = level_name
        self.shape = (n_units, n_cells)
        self._rows: list[np.ndarray] = []
        self._cols: list[np.ndarray] = []
        self._vals: list[np.ndarray] = []
        self.tasks = 0
        self.task_seconds = 0.0
        self.cpu_seconds = 0.0
        self.l2_seconds = 0.0
        self.rounding_seconds = 0.0
        self.max_task_seconds = 0.0
        self.max_violation = 0.0
        self.statuses: dict[str, int] = {}
        self.methods: dict[str, int] = {}
        self.failsafe: list[dict] = []
        self.task_times: list[tuple[int, float]] = []
        self.fallbacks: dict[str, int] = {}
        self._longest: dict[str, float] = {}  # per parent, its longest task
        self._longest_cpu: dict[str, float] = {}
        self.max_task_cpu = 0.0
        self.split: list[dict] = []

    def add_splits(self, splits: list[tuple[TaskResult, int]]) -> None:
        """Record the coarse solves of split families (their CPU counts as the level's)."""
        for r, chunks in splits:
            self.cpu_seconds += r.cpu_seconds
            self.task_seconds += r.seconds
            if r.failsafe:
                self.failsafe.append(r.failsafe)
            self.split.append(
                {
                    "parent": r.parent_geocode,
                    "chunks": chunks,
                    "coarse_seconds": round(r.seconds, 4),
                    "coarse_cpu_seconds": round(r.cpu_seconds, 4),
                    "longest_chunk_seconds": round(self._longest.get(r.parent_geocode, 0.0), 4),
                    "longest_chunk_cpu_seconds": round(
                        self._longest_cpu.get(r.parent_geocode, 0.0), 4
                    ),
                }
            )

    def critical_path(self) -> float:
        """The level's shortest possible wall time on unlimited cores: its longest task, or
        a split family's coarse solve plus its longest chunk."""
        paths = [s["coarse_seconds"] + s["longest_chunk_seconds"] for s in self.split]
        return max([self.max_task_seconds, *paths])

    def critical_path_cpu(self) -> float:
        """:meth:`critical_path` in CPU seconds (what a projection uses: no machine load)."""
        paths = [s["coarse_cpu_seconds"] + s["longest_chunk_cpu_seconds"] for s in self.split]
        return max([self.max_task_cpu, *paths])

    def add(self, r: TaskResult) -> None:
        k, c = r.counts.shape
        if c:
            rr, cc = np.nonzero(r.counts)
            self._rows.append((rr + r.child_start).astype(np.int64))
            self._cols.append(r.kept[cc].astype(np.int64))
            self._vals.append(r.counts[rr, cc].astype(np.int64))
        self.tasks += 1
        self.task_seconds += r.seconds
        self.cpu_seconds += r.cpu_seconds
        self.l2_seconds += r.l2_seconds
        self.rounding_seconds += r.rounding_seconds
        self.max_task_seconds = max(self.max_task_seconds, r.seconds)
        self.max_violation = max(self.max_violation, r.max_violation)
        self.statuses[r.status] = self.statuses.get(r.status, 0) + 1
        self.methods[r.method] = self.methods.get(r.method, 0) + 1
        self.task_times.append((k, r.seconds))
        self._longest[r.parent_geocode] = max(self._longest.get(r.parent_geocode, 0.0), r.seconds)
        self._longest_cpu[r.parent_geocode] = max(
            self._longest_cpu.get(r.parent_geocode, 0.0), r.cpu_seconds
        )
        self.max_task_cpu = max(self.max_task_cpu, r.cpu_seconds)
        if r.failsafe:
            self.failsafe.append(r.failsafe)
        if len(r.attempts) > r.method.count("+") + 1:  # more tries than passes: a fallback
            chain = " > ".join(m for m, _ in r.attempts)
            self.fallbacks[chain] = self.fallbacks.get(chain, 0) + 1
            logger.warning(
                "%s task %s: %s",
                self.level_name,
                r.parent_geocode or "root",
                "; ".join(f"{m}: {st}" for m, st in r.attempts),
            )

    def histogram(self) -> sp.csr_matrix:
        if self._rows:
            m = sp.csr_matrix(
                (
                    np.concatenate(self._vals),
                    (np.concatenate(self._rows), np.concatenate(self._cols)),
                ),
                shape=self.shape,
                dtype=np.int64,
            )
        else:
            m = sp.csr_matrix(self.shape, dtype=np.int64)
        self._rows, self._cols, self._vals = [], [], []
        m.sum_duplicates()
        m.sort_indices()
        return m

    def summary(self, wall: float) -> dict:
        children = np.asarray([k for k, _ in self.task_times], dtype=np.float64)
        secs = np.asarray([t for _, t in self.task_times], dtype=np.float64)
        return {
            "geolevel": self.level_name,
            "tasks": self.tasks,
            "wall_seconds": round(wall, 4),
            "task_seconds": round(self.task_seconds, 4),
            "task_cpu_seconds": round(self.cpu_seconds, 4),
            "l2_seconds": round(self.l2_seconds, 4),
            "rounding_seconds": round(self.rounding_seconds, 4),
            "max_task_seconds": round(self.max_task_seconds, 4),
            "median_task_seconds": round(float(np.median(secs)), 4) if secs.size else 0.0,
            "children": int(children.sum()),
            "max_children": int(children.max()) if children.size else 0,
            "max_l2_violation": self.max_violation,
            "statuses": self.statuses,
            "methods": self.methods,
            "failsafe_uses": len(self.failsafe),
            "fallbacks": self.fallbacks,
            "max_task_cpu_seconds": round(self.max_task_cpu, 4),
            "critical_path_seconds": round(self.critical_path(), 4),
            "critical_path_cpu_seconds": round(self.critical_path_cpu(), 4),
            "split_families": self.split,
        }


def estimate(
    ms: Measurements,
    hierarchy: Hierarchy,
    bounds: list[Bounds],
    *,
    group_variable: str | None = "hhgq",
    postprocess: str = "topdown",
    method: str = "auto",
    passes: str = "production",
    estimator: str = "ls",
    executor: object | None = None,
    progress: Callable[[str], None] | None = None,
    checkpoint: Any = None,
    max_children: int | None = DEFAULT_MAX_CHILDREN,
    pool_root: bool = True,
    read_in_tasks: bool | None = None,
) -> Estimate:
    """Estimate integer detailed histograms for every level from noisy measurements.

    Args:
        ms: the noisy measurements (the only data-dependent input): a
            :class:`~censusdp.data.measurements.MeasurementSet` or any object with its ``read``
            method, such as the chunked NMF reader.
        hierarchy: the geounits the measurements refer to.
        bounds: per level, the constraint bounds (from the public invariants).
        group_variable: schema attribute whose levels the group bounds refer to
            (``"hhgq"`` for persons), or ``None`` for one group.
        postprocess: ``"topdown"`` or ``"bottomup"``.
        method: least-squares method passed to :func:`solve_l2`.
        passes: ``"production"`` (default): the production query orderings of
            :data:`~censusdp.release.topdown.passes.PRODUCTION_PASSES` where the schema
            has them (``pl94``), least squares and rounding in passes; ``"single"``: one
            pass everywhere. ``bottomup`` always runs one pass.
        estimator: ``"ls"`` (default): least squares; ``"maxent"``: the maximum-entropy
            estimate of :mod:`~censusdp.release.topdown.maxent` in every subproblem;
            ``"auto"``: per subproblem, least squares when every measured query is worth
            fitting at full resolution, else maximum entropy (decided from the public
            noise law, no extra solve). The rounding passes apply to every estimator:
            rounding a maximum-entropy point cell by cell moves the children's totals
            (each fractional cell goes to the child with the largest share of it, the
            largest child, so large units gained what small ones lost).
        executor: an object with ``map(fn, iterable) -> iterator`` preserving order
            (see :mod:`censusdp.execution.local`); in-process by default.
        progress: optional callback for one line per geolevel.
        checkpoint: optional store of finished levels (a run's
            :class:`censusdp.release.checkpoint.LevelCheckpoint`): ``load(level)``
            returns ``(histogram, summary, failsafe records)`` of a level estimated
            before an interruption, or ``None``; ``save(level, histogram, summary,
            failsafe)`` records a level when it is finished. A loaded level is not
            estimated again; the next level's tasks are built from its histogram.
        max_children: families with more children are solved in chunks
            (:mod:`censusdp.release.topdown.split`); ``None`` never splits.
        read_in_tasks: whether the tasks of a family that is not split read its
            measurements themselves (``ms.detach``, the NMF reader's slices) where they
            run; default: when ``ms`` can and ``executor`` is not in-process. Same
            results either way.
        pool_root: estimate the root from every level's measurements of its marginals
            (:func:`~censusdp.release.topdown.pooling.pooled_root`; default), or, as
            production does, from the root's own measurements only.

    Returns:
        the histograms of every level (top first), summaries, and failsafe records.
    """
    if postprocess not in ("topdown", "bottomup"):
        raise CensusDPError(f"postprocess must be 'topdown' or 'bottomup', got {postprocess!r}")
    if passes not in PASS_MODES:
        raise ConfigError(f"passes must be one of {PASS_MODES}, got {passes!r}")
    if estimator not in ESTIMATORS:
        raise ConfigError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    if executor is None:
        from censusdp.execution.local import InProcessExecutor

        executor = InProcessExecutor()
    if read_in_tasks is None:
        # tasks on other processes read their own families (the NMF reader's slices):
        # the driver then only hands out row-group locations; in process it reads them
        from censusdp.execution.local import InProcessExecutor

        read_in_tasks = hasattr(ms, "detach") and not isinstance(executor, InProcessExecutor)
    schema = ms.schema
    cache = _QueryCache(ms)
    cell_groups, n_groups = _group_of_cells(ms, group_variable)
    for b in bounds:
        if b.group_lower.shape[1] != n_groups:
            raise InternalError(
                f"bounds have {b.group_lower.shape[1]} groups, {group_variable} has {n_groups}"
            )
    live = np.flatnonzero(~schema.structural_zero_mask).astype(np.int64)
    n_levels = hierarchy.n_levels
    hists: list[sp.csr_matrix] = [None] * n_levels  # type: ignore[list-item]
    summaries: list[dict] = []
    failsafe: list[dict] = []

    if max_children is not None and max_children < 1:
        raise ConfigError(f"max_children must be at least 1, got {max_children}")

    def run_level(level: int, tasks: Iterable[Task]) -> sp.csr_matrix:
        done = checkpoint.load(level) if checkpoint is not None else None
        if done is not None:
            hist, summary, fs = done
            summaries.append(summary)
            failsafe.extend(fs)
            if progress is not None:
                progress(f"estimated {summary['geolevel']:<10} before the interruption: reused")
            return hist
        t0 = time.perf_counter()
        name = hierarchy.geolevels[level].name
        acc = _LevelResults(name, hierarchy.n_units(level), schema.size)
        # one task per parent (split families add chunk tasks): done / total, with an ETA
        n_tasks = hierarchy.n_units(level - 1) if level > 0 else 1
        split = tasks if isinstance(tasks, _LevelTasks) else None
        with task(progress, f"estimating {name}", n_tasks, summary=False) as bar:
            # small tasks travel in batches; results come back in task order either way.
            # A split family's coarse result goes back to the level's tasks, whose next
            # ones are its chunks; chunks of coarse results that came back after the last
            # task was handed out take a second pass.
            waves = [tasks] if split is None else [split, split.rest()]
            for wave in waves:
                for rs in executor.map(run_tasks, _batched(wave)):  # type: ignore[attr-defined]
                    for r in rs:
                        if r.chunks:
                            split.accept(r)  # type: ignore[union-attr]
                            continue
                        acc.add(r)
                        bar.advance()
        if split is not None:
            acc.add_splits(split.splits)
        hist = acc.histogram()
        summaries.append(acc.summary(time.perf_counter() - t0))
        # what the driver did of the tasks' work (reading families, building their
        # subproblems: in process, or families read whole); tasks do it on other executors
        built = tasks.build_cpu if isinstance(tasks, _LevelTasks) else 0.0
        summaries[-1]["driver_build_cpu_seconds"] = round(built, 4)
        failsafe.extend(acc.failsafe)
        if checkpoint is not None:
            checkpoint.save(level, hist, summaries[-1], acc.failsafe)
        if progress is not None:
            s = summaries[-1]
            progress(
                f"estimated {s['geolevel']:<10} {s['tasks']:>6} tasks in {s['wall_seconds']:.2f}s"
                f" (failsafe {s['failsafe_uses']})"
            )
        return hist

    if postprocess == "bottomup":
        hists[-1] = run_level(
            n_levels - 1,
            _bottomup_tasks(ms, cache, hierarchy, live, cell_groups, bounds[-1], method, estimator),
        )
        agg = hierarchy.aggregate(hists[-1])
        return Estimate([sp.csr_matrix(a, dtype=np.int64) for a in agg], summaries, failsafe)

    # Root: one unit, no parent constraint ("auto" tries the interior-point method first
    # there: measured 0.19 s vs 3.4 s for the ADMM on the 1,890-cell pl94 root).
    # The root's marginals from every level's measurements (pooling; a deliberate
    # difference from production, which uses the root's own only), or its own.
    root_mqs = (
        pooled_root(ms, hierarchy, variance_floor=_VARIANCE_FLOOR)
        if pool_root
        else ms.read(0, 0, 1)
    )
    root_sub = _make_subproblem(
        root_mqs,
        cache,
        slice(0, 1),
        slice(0, 1),
        live,
        None,
        cell_groups,
        bounds[0],
        label="root",
        child_labels=(f"{hierarchy.geolevels[0].name} {hierarchy.geocodes[0][0] or 'US'}",),
    )
    plans = _level_plans(ms, hierarchy, group_variable, passes, [m.query for m in root_mqs])
    hists[0] = run_level(
        0,
        [
            Task(
                -1,
                "",
                0,
                live,
                root_sub,
                method,
                *plans[0].bind(live),
                estimator=estimator,
                coarse=cache.coarse(root_mqs, estimator, live),
            )
        ],
    )
    for level in range(n_levels - 1):
        tasks = _LevelTasks(
            ms,
            cache,
            hierarchy,
            level,
            hists[level],
            cell_groups,
            bounds[level + 1],
            method,
            plans[level + 1],
            estimator,
            max_children,
            detach=read_in_tasks,
        )
        hists[level + 1] = run_level(level + 1, tasks)
    return Estimate(hists, summaries, failsafe)
