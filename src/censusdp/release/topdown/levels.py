"""The tasks of a level: what each level's families are, in what order they go out.

:class:`LevelTasks` builds the tasks of one level lazily, as the executor asks for them,
from runs of whole families (:func:`~censusdp.release.topdown.subproblems.family_runs`):
first the coarse solve of every split family (:mod:`~censusdp.release.topdown.split`),
then each family in order, a split family's chunk tasks as soon as its coarse result is
back. :func:`bottomup_tasks` are the blocks estimated alone (``postprocess="bottomup"``).
:class:`LevelPlan` is a level's passes (:mod:`~censusdp.release.topdown.multipass`);
:class:`TaskContext` what every task of a run is built from.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from censusdp.data.geography import DEFAULT_CHUNK_VALUES, Hierarchy
from censusdp.data.invariants import Bounds
from censusdp.data.measurements import Measurements
from censusdp.errors import InternalError
from censusdp.release.topdown.multipass import (
    L2Passes,
    RoundingPasses,
    RoundingTemplate,
    bind_l2,
    bind_rounding,
)
from censusdp.release.topdown.passes import plans_for
from censusdp.release.topdown.problem import Subproblem
from censusdp.release.topdown.split import (
    chunk_starts,
    chunk_subproblems,
    coarse_subproblem,
    splittable,
    splittable_family,
)
from censusdp.release.topdown.subproblems import (
    Family,
    FamilyRun,
    QueryCache,
    family_runs,
    make_subproblem,
)
from censusdp.release.topdown.tasks import DetachedFamily, Task, TaskResult
from censusdp.release.topdown.weighted_family import UnitCaps

__all__ = [
    "SPLIT_KEEP_BYTES",
    "LevelPlan",
    "LevelTasks",
    "TaskContext",
    "bottomup_tasks",
    "level_plans",
]

HEAVY_VARIABLES = 100_000
"""Families of at least this many variables (children x the parent's kept cells) that
their tasks read themselves go out first, the widest first (:class:`LevelTasks`):
solved in geocode order, production fidelity's longest task, Los Angeles County's
2,334-tract family (337 s of California's Tract level of 371), began about 30 s into
its level, and the other worker sat idle at the level's end for as long."""

SPLIT_KEEP_BYTES = 256 << 20
"""Most bytes of split families' whole subproblems the driver keeps between a family's
coarse task and its chunk tasks (:class:`LevelTasks`); a family beyond it is read again
for its chunks. Reading a family is most of the driver's work at a ``ddp-2010`` block
level (each of a rural block group's blocks is 338,502 noisy person values, of which
its subproblem keeps the few hundred answers on the parent's positive cells), so
keeping what was read halves it. The kept subproblems are small: the noisy answers of
``k`` children on the rows of the parent's kept cells."""


@dataclass(frozen=True, eq=False)
class TaskContext:
    """What every task of a run is built from, the same at every level.

    Attributes:
        ms: the noisy measurements.
        cache: their queries' operators.
        hierarchy: the geounits.
        cell_groups: the group of every schema cell.
        method: the least-squares method of every task.
        estimator: ``"ls"``, ``"maxent"`` or ``"auto"``.
        max_children: families with more children are split; ``None`` never splits.
        detach: a family that is not split is read by its own task where it runs
            (measurements with a ``detach(level, start, stop)`` method: the NMF reader).
        production: every task estimates as production (:class:`Task` ``production``).
        level_caps: by level, a weighted row on each of its geounits
            (:class:`~censusdp.release.topdown.weighted_family.UnitCaps`), given to the
            tasks whose children they are (such a family is never split).
    """

    ms: Measurements
    cache: QueryCache
    hierarchy: Hierarchy
    cell_groups: np.ndarray
    method: str = "auto"
    estimator: str = "ls"
    max_children: int | None = None
    detach: bool = False
    production: bool = False
    level_caps: Mapping[int, UnitCaps] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class LevelPlan:
    """The passes of one level's tasks: least squares bound to its measured queries, and
    the rounding template (``None``: one pass, cell-wise rounding)."""

    l2: L2Passes | None = None
    rounding: RoundingTemplate | None = None

    def bind(self, kept: np.ndarray) -> tuple[L2Passes | None, RoundingPasses | None]:
        """The passes on a task's kept cells."""
        return self.l2, None if self.rounding is None else self.rounding.on(kept)


def level_plans(
    ms: Measurements,
    hierarchy: Hierarchy,
    group_variable: str | None,
    passes: str,
    root_names: list[str] | None = None,
) -> list[LevelPlan]:
    """Per level, the passes of the tasks whose children are at that level (the root's
    bound to ``root_names``, its queries, when given)."""
    names = [g.name for g in hierarchy.geolevels]
    out = []
    templates: dict[int, RoundingTemplate] = {}  # one per plan: DHC rows are 1.2M cells
    for level, plan in enumerate(plans_for(ms.schema.name, names, passes)):
        if plan is None:
            out.append(LevelPlan())
            continue
        measured = [m.query for m in ms.read(level, 0, 0)]
        if level == 0 and root_names is not None:
            measured = root_names
        if id(plan) not in templates:
            templates[id(plan)] = bind_rounding(plan, ms.schema)
        out.append(
            LevelPlan(bind_l2(plan, ms.schema, measured, group_variable), templates[id(plan)])
        )
    return out


class LevelTasks:
    """The tasks of one level, built lazily as the executor asks for them.

    A family of at least :data:`HEAVY_VARIABLES` variables that its task reads itself
    goes out first, the widest first, so that the level's longest tasks start at once
    and the short ones fill the other workers around them.

    A family with more than ``max_children`` children and free totals is split
    (:mod:`censusdp.release.topdown.split`). Its coarse solve is a task like any other
    (``Task.chunks`` > 0): the coarse tasks of the whole level are handed out first, the
    widest family first, so the workers start on them at once, and the driver solves
    nothing. The consumer hands each coarse result back (:meth:`accept`); the next time
    a task is asked for, that family's chunk tasks go out ahead of the level's remaining
    families (a chunk is on the level's critical path). Chunks
    whose coarse result comes back after the last task has been handed out are in
    :meth:`rest`, a second pass of the executor over what is left.

    The tasks, and so the results, are those of solving each coarse problem on the driver
    and handing out its chunks in place: only their order changes, and the level's
    histogram does not depend on the order. Memory: the driver keeps the coarse
    problems in flight and the whole subproblems of split families read for them, up
    to :data:`SPLIT_KEEP_BYTES` in all; a family beyond that is read again for its
    chunks (:attr:`rereads`), so memory stays bounded by a family at a time beyond it.

    ``ctx.detach`` (measurements with a ``detach(level, start, stop)`` method: the NMF
    reader): a family that is not split is read by its own task where it runs
    (:class:`~censusdp.release.topdown.tasks.DetachedFamily`), not here; the tasks and
    their results are the same.
    """

    def __init__(
        self,
        ctx: TaskContext,
        parent_level: int,
        parent_hist: sp.csr_matrix,
        bounds: Bounds,
        plan: LevelPlan,
    ) -> None:
        self.ctx, self.ms, self.hierarchy = ctx, ctx.ms, ctx.hierarchy
        self.parent_level = parent_level
        self.parent_hist = parent_hist
        self.bounds, self.plan = bounds, plan
        self.max_children = ctx.max_children
        self.detach = ctx.detach and hasattr(ctx.ms, "detach")
        # CPU seconds this process spent reading families and building their tasks:
        # task work done on the driver (in process, or a family read whole)
        self.build_cpu = 0.0
        self.splits: list[tuple[TaskResult, int]] = []
        """Every coarse result accepted, with its number of chunks (family order)."""
        self._split: dict[int, int] = {}  # first child of a split family -> its parent unit
        self._ready: deque[TaskResult] = deque()
        # first child of a split family -> its whole task, kept from the coarse task's read
        # for the chunks (at most SPLIT_KEEP_BYTES in all; a family beyond is read again)
        self._wholes: dict[int, Task] = {}
        self._whole_bytes = 0
        self.rereads = 0
        """Split families read a second time for their chunks (beyond the keep)."""
        self._heavy: set[int] = set()  # parent units whose tasks went out first
        self._heads: list | None = None  # the level's measured queries, no values

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
        for t in itertools.chain(self._heavy_tasks(), self._family_tasks()):
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

    def _task(self, i: int, run: FamilyRun) -> Task:
        """Family ``i``'s whole task, its measurements read from ``run`` here (its CPU
        time added to :attr:`build_cpu`)."""
        c0 = time.process_time()
        try:
            return self._whole_task(i, run)
        finally:
            self.build_cpu += time.process_time() - c0

    def _family(self, i: int, kept: np.ndarray, parent_counts: np.ndarray) -> Family:
        """Parent unit ``i``'s family, on its kept cells ``kept``."""
        children = self.hierarchy.children(self.parent_level, i)
        return Family(
            start=children.start,
            k=children.stop - children.start,
            kept=kept,
            parent_counts=parent_counts,
            groups=self.ctx.cell_groups[kept],
            bounds=self.bounds.units(children),
            label=self._label(i),
            child_labels=self._child_labels(children),
        )

    def _whole_task(self, i: int, run: FamilyRun) -> Task:
        kept, parent_counts = self._parent(i)
        family = self._family(i, kept, parent_counts)
        mqs, local = run.family(family.children, kept, self.ctx.cache)
        sub = make_subproblem(mqs, self.ctx.cache, local, family)
        l2p, rounding = self.plan.bind(kept)
        return Task(
            self.parent_level,
            str(self.hierarchy.geocodes[self.parent_level][i]),
            family.start,
            kept,
            sub,
            self.ctx.method,
            l2p,
            rounding,
            self.ctx.estimator,
            self.ctx.cache.coarse(mqs, self.ctx.estimator, kept),
            production=self.ctx.production,
            caps=self._caps(family.children),
        )

    def _caps(self, children: slice) -> UnitCaps | None:
        """The weighted rows of ``children`` (a family's), if their level has them."""
        caps = self.ctx.level_caps.get(self.parent_level + 1)
        return None if caps is None else caps.on(children)

    def _alone(self, i: int) -> Task:
        """Family ``i``'s whole task, read on its own (a split family)."""
        children = self.hierarchy.children(self.parent_level, i)
        level = self.parent_level + 1
        width = sum(m.rows.size for m in self.ms.read(level, 0, 0))
        run = FamilyRun(self.ms, level, children.start, children.stop, width, DEFAULT_CHUNK_VALUES)
        return self._task(i, run)

    def _splits(self, i: int, k: int) -> bool:
        """Whether family ``i`` (``k`` children) is split (``splittable`` without reading it)."""
        if self.max_children is None or k <= self.max_children:
            return False
        children = self.hierarchy.children(self.parent_level, i)
        if self.bounds.unit_groups_of(children) is not None:
            return False  # grouped children (a state's parts) are solved in one problem
        if self.parent_level + 1 in self.ctx.level_caps:
            return False  # children under weighted rows too
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
            size = _nbytes(whole.sub)
            if self._whole_bytes + size <= SPLIT_KEEP_BYTES:
                self._wholes[whole.child_start] = whole
                self._whole_bytes += size
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
                production=whole.production,
            )

    def _ready_chunks(self) -> Iterator[Task]:
        """The chunk tasks of every coarse result accepted so far."""
        while self._ready:
            r = self._ready.popleft()
            whole = self._wholes.pop(r.child_start, None)
            if whole is None:
                self.rereads += 1
                whole = self._alone(self._split[r.child_start])
            else:
                self._whole_bytes -= _nbytes(whole.sub)
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
                    production=whole.production,
                )

    def _read_here(self, k: int) -> bool:
        """Whether a family of ``k`` children that is not split is read here, not by its
        task (an executor in process; a family over ``max_children`` left whole)."""
        return not self.detach or (self.max_children is not None and k > self.max_children)

    def _heavy_tasks(self) -> Iterator[Task]:
        """The tasks of the families of at least :data:`HEAVY_VARIABLES` variables that
        their tasks read, the widest first (ties in geocode order)."""
        pl, h = self.parent_level, self.parent_hist
        kids = np.diff(self.hierarchy.child_ptr[pl])
        rows = np.repeat(np.arange(h.shape[0]), np.diff(h.indptr))
        positive = np.bincount(rows[h.data > 0], minlength=h.shape[0])  # kept cells
        size = kids.astype(np.int64) * positive
        heavy = [int(i) for i in np.flatnonzero(size >= HEAVY_VARIABLES)]
        heavy = [i for i in heavy if not self._read_here(int(kids[i]))]
        heavy = [i for i in heavy if self.hierarchy.children(pl, i).start not in self._split]
        for i in sorted(heavy, key=lambda i: -int(size[i])):
            self._heavy.add(i)
            yield self._detached(i)

    def _family_tasks(self) -> Iterator[Task]:
        """The task of every family that is not split nor gone out first, in order."""
        pl = self.parent_level
        for p0, p1, run in family_runs(self.ms, self.hierarchy, pl + 1, lazy=True):
            for i in range(p0, p1):
                children = self.hierarchy.children(pl, i)
                if children.start in self._split or i in self._heavy:
                    continue  # split: its chunks follow its coarse result; heavy: sent first
                if self._read_here(children.stop - children.start):
                    t = self._task(i, run)
                    if splittable(t.sub, self.max_children):
                        raise InternalError(f"family {t.parent_geocode!r} was not split")
                    yield t
                    continue
                yield self._detached(i)

    def _detached(self, i: int) -> Task:
        """Family ``i``'s task, which reads the family itself where it runs."""
        pl = self.parent_level
        if self._heads is None:
            self._heads = self.ms.read(pl + 1, 0, 0)
        children = self.hierarchy.children(pl, i)
        kept, parent_counts = self._parent(i)
        l2p, rounding = self.plan.bind(kept)
        return Task(
            pl,
            str(self.hierarchy.geocodes[pl][i]),
            children.start,
            kept,
            None,  # type: ignore[arg-type]
            self.ctx.method,
            l2p,
            rounding,
            self.ctx.estimator,
            self.ctx.cache.coarse(self._heads, self.ctx.estimator, kept),
            source=DetachedFamily(
                self.ms.detach(pl + 1, children.start, children.stop),  # type: ignore[attr-defined]
                pl + 1,
                self._family(i, kept, parent_counts),
            ),
            production=self.ctx.production,
            caps=self._caps(children),
        )


def _nbytes(sub: Subproblem) -> int:
    """The bytes of a subproblem's arrays (what keeping it costs)."""
    arrays = (*sub.noisy, *sub.query_rows, sub.groups, sub.group_lower, sub.group_upper)
    return sum(int(getattr(a, "nbytes", 0)) for a in arrays)


def bottomup_tasks(ctx: TaskContext, live: np.ndarray, bounds: Bounds) -> Iterator[Task]:
    """Blocks estimated without a parent constraint, batched by their parent unit."""
    hierarchy, cache = ctx.hierarchy, ctx.cache
    bl = hierarchy.n_levels - 1
    codes = hierarchy.geocodes[bl - 1]
    for p0, p1, run in family_runs(ctx.ms, hierarchy, bl):
        for i in range(p0, p1):
            children = hierarchy.children(bl - 1, i)
            mqs, local = run.family(children, live, cache)
            family = Family(
                start=children.start,
                k=children.stop - children.start,
                kept=live,
                parent_counts=None,
                groups=ctx.cell_groups[live],
                bounds=bounds.units(children),
                label=f"bottom-up blocks of {codes[i]}",
            )
            yield Task(
                bl - 1,
                str(codes[i]),
                children.start,
                live,
                make_subproblem(mqs, cache, local, family),
                ctx.method,
                estimator=ctx.estimator,
                coarse=cache.coarse(mqs, ctx.estimator, live),
                production=ctx.production,
            )
