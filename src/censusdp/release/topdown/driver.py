"""The TopDown driver: estimate the root, then each parent with its children, level by level.

Input is only what is public after measurement (JASON (JSR-19-2F) sec. 5.7; Van Riper et
al. (2020) sec. 2.2): the measurements (a
:class:`~censusdp.data.measurements.MeasurementSet` or the NMF reader) and, per level, the
:class:`~censusdp.data.invariants.Bounds` implied by the invariants and constraints.
:func:`run_topdown` is the entry point; it returns a :class:`TopDownResult`.

Each parent-with-children solve is an independent, picklable
:class:`~censusdp.release.topdown.tasks.Task` (:mod:`~censusdp.release.topdown.tasks`:
failsafe, least squares or maximum entropy, rounding, exact check), so an executor may
run the tasks of one level in any order, in any process. The tasks of a level are built
lazily (:class:`~censusdp.release.topdown.levels.LevelTasks`) from runs of whole families
(:mod:`~censusdp.release.topdown.subproblems`), each read from the measurements only when
the executor asks for the next task, and each result is folded into the level's sparse
histogram as it arrives (:class:`~censusdp.release.topdown.level_results.LevelResults`):
memory is bounded by a chunk, not by a level.

``postprocess="bottomup"`` estimates each block from its own measurements alone (no
parent constraint) and aggregates up: consistent, but with the noise of every block
summed at the higher levels.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.invariants import Bounds
from censusdp.data.measurements import Measurements
from censusdp.errors import CensusDPError, ConfigError, InternalError
from censusdp.execution.base import Executor
from censusdp.progress import task
from censusdp.release.topdown.level_results import LevelResults
from censusdp.release.topdown.levels import (
    LevelPlan,
    LevelTasks,
    TaskContext,
    bottomup_tasks,
    level_plans,
)
from censusdp.release.topdown.maxent import ESTIMATORS
from censusdp.release.topdown.passes import PASS_MODES
from censusdp.release.topdown.pooling import pooled_root
from censusdp.release.topdown.split import DEFAULT_MAX_CHILDREN
from censusdp.release.topdown.subproblems import (
    VARIANCE_FLOOR,
    Family,
    QueryCache,
    group_of_cells,
    make_subproblem,
)
from censusdp.release.topdown.tasks import Task, batched, run_tasks
from censusdp.release.topdown.weighted import RootCap
from censusdp.release.topdown.weighted_family import UnitCaps

__all__ = ["LevelStore", "TopDownOptions", "TopDownResult", "run_topdown"]


@dataclass(frozen=True)
class TopDownOptions:
    """How :func:`run_topdown` estimates.

    Attributes:
        group_variable: schema attribute whose levels the group bounds refer to
            (``"hhgq"`` for persons), a cross of several (``"hhgq * votingage *
            hispanic * cenrace"``: a DHC person run held to a P.L. 94 release's persons,
            :func:`~censusdp.release.topdown.subproblems.group_of_cells`), or ``None``
            for one group.
        postprocess: ``"topdown"`` or ``"bottomup"``.
        method: least-squares method passed to
            :func:`~censusdp.release.topdown.solvers.least_squares.solve_l2`.
        passes: ``"production"`` (default): the production query orderings of
            :data:`~censusdp.release.topdown.passes.PRODUCTION_PASSES` where the schema
            has them (``pl94``, ``dhcp-2020``, ``dhch-2020``, ...), least squares and
            rounding in passes; ``"single"``: one
            pass everywhere. ``bottomup`` always runs one pass.
        estimator: ``"ls"`` (default): least squares; ``"maxent"``: the maximum-entropy
            estimate of :mod:`~censusdp.release.topdown.maxent` in every subproblem;
            ``"auto"``: per subproblem, least squares when every measured query is worth
            fitting at full resolution, else maximum entropy (decided from the public
            noise law, no extra solve). The rounding passes apply to every estimator:
            rounding a maximum-entropy point cell by cell moves the children's totals
            (each fractional cell goes to the child with the largest share of it, the
            largest child, so large units gained what small ones lost).
        max_children: families with more children are solved in chunks
            (:mod:`censusdp.release.topdown.split`); ``None`` never splits.
        pool_root: estimate the root from every level's measurements of its marginals
            (:func:`~censusdp.release.topdown.pooling.pooled_root`; default), or, as
            production does, from the root's own measurements only.
        production: estimate as the 2020 production run did in every task: no
            failsafe (an infeasible subproblem raises
            :class:`~censusdp.errors.InfeasibleError`) and production's rounder (no
            cell-wise term, every cell in the box, no fallback;
            :func:`~censusdp.release.topdown.multipass.round_in_passes`). Fidelity
            ``production`` also sets ``pool_root=False`` and ``max_children=None``.
        read_in_tasks: whether the tasks of a family that is not split read its
            measurements themselves (``ms.detach``, the NMF reader's slices) where they
            run; default: when ``ms`` can and the executor is not in-process. Same
            results either way.
        root_cap: a weighted row on the root's histogram
            (:class:`~censusdp.release.topdown.weighted.RootCap`: the household run's
            ``sum_s s n_s <= P``), kept by the root's least squares and rounding; the
            root is then estimated by least squares in one pass, whatever ``estimator``.
        level_caps: by level, a weighted row on each geounit
            (:class:`~censusdp.release.topdown.weighted_family.UnitCaps`: the household
            run's row on each state of a several-state input), kept by the least squares
            and rounding of the families whose children they are, in one pass.
    """

    group_variable: str | None = "hhgq"
    postprocess: str = "topdown"
    method: str = "auto"
    passes: str = "production"
    estimator: str = "ls"
    max_children: int | None = DEFAULT_MAX_CHILDREN
    pool_root: bool = True
    production: bool = False
    read_in_tasks: bool | None = None
    root_cap: RootCap | None = None
    level_caps: Mapping[int, UnitCaps] = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class TopDownResult:
    """The integer detailed histograms of every level (top first), per-level task
    summaries (the manifest's ``estimation``), and the failsafe's records."""

    histograms: list[sp.csr_matrix]
    levels: list[dict] = field(default_factory=list)
    failsafe: list[dict] = field(default_factory=list)


class LevelStore(Protocol):
    """Where finished levels are kept (a run's
    :class:`censusdp.release.checkpoint.LevelCheckpoint`)."""

    def load(self, level: int) -> tuple[sp.csr_matrix, dict, list[dict]] | None:
        """The level's histogram, summary and failsafe records, if it was estimated."""
        ...

    def save(self, level: int, hist: sp.csr_matrix, summary: dict, failsafe: list[dict]) -> None:
        """Record a finished level."""
        ...


def run_topdown(
    ms: Measurements,
    hierarchy: Hierarchy,
    bounds: list[Bounds],
    options: TopDownOptions = TopDownOptions(),
    *,
    executor: Executor | None = None,
    progress: Callable[[str], None] | None = None,
    checkpoint: LevelStore | None = None,
) -> TopDownResult:
    """Estimate integer detailed histograms for every level from noisy measurements.

    Args:
        ms: the noisy measurements (the only data-dependent input): a
            :class:`~censusdp.data.measurements.MeasurementSet` or any object with its
            ``read`` method, such as the chunked NMF reader.
        hierarchy: the geounits the measurements refer to.
        bounds: per level, the constraint bounds (from the public invariants).
        options: how to estimate (:class:`TopDownOptions`).
        executor: where the tasks run (:class:`~censusdp.execution.base.Executor`);
            in-process by default.
        progress: optional callback for one line per geolevel.
        checkpoint: optional store of finished levels (:class:`LevelStore`): a level it
            holds (estimated before an interruption) is not estimated again; the next
            level's tasks are built from its histogram. Each finished level is saved.

    Returns:
        the histograms of every level (top first), summaries, and failsafe records.
    """
    o = options
    if o.postprocess not in ("topdown", "bottomup"):
        raise CensusDPError(f"postprocess must be 'topdown' or 'bottomup', got {o.postprocess!r}")
    if o.passes not in PASS_MODES:
        raise ConfigError(f"passes must be one of {PASS_MODES}, got {o.passes!r}")
    if o.estimator not in ESTIMATORS:
        raise ConfigError(f"estimator must be one of {ESTIMATORS}, got {o.estimator!r}")
    from censusdp.execution.local import InProcessExecutor

    if executor is None:
        executor = InProcessExecutor()
    read_in_tasks = o.read_in_tasks
    if read_in_tasks is None:
        # tasks on other processes read their own families (the NMF reader's slices):
        # the driver then only hands out row-group locations; in process it reads them
        read_in_tasks = hasattr(ms, "detach") and not isinstance(executor, InProcessExecutor)
    cell_groups, n_groups = group_of_cells(ms, o.group_variable)
    for b in bounds:
        if b.group_lower.shape[1] != n_groups:
            raise InternalError(
                f"bounds have {b.group_lower.shape[1]} groups, {o.group_variable} has {n_groups}"
            )
    if o.max_children is not None and o.max_children < 1:
        raise ConfigError(f"max_children must be at least 1, got {o.max_children}")
    ctx = TaskContext(
        ms,
        QueryCache(ms),
        hierarchy,
        cell_groups,
        method=o.method,
        estimator=o.estimator,
        max_children=o.max_children,
        detach=read_in_tasks,
        production=o.production,
        level_caps=o.level_caps,
    )
    live = np.flatnonzero(~ms.schema.structural_zero_mask).astype(np.int64)
    levels = _Levels(hierarchy, ms.schema.size, executor, progress, checkpoint)
    if o.postprocess == "bottomup":
        blocks = levels.run(hierarchy.n_levels - 1, bottomup_tasks(ctx, live, bounds[-1]))
        agg = hierarchy.aggregate(blocks)
        histograms = [sp.csr_matrix(a, dtype=np.int64) for a in agg]
        return TopDownResult(histograms, levels.summaries, levels.failsafe)
    root, plans = _root_task(ctx, bounds[0], live, o)
    hists = [levels.run(0, [root])]
    for level in range(hierarchy.n_levels - 1):
        tasks = LevelTasks(ctx, level, hists[level], bounds[level + 1], plans[level + 1])
        hists.append(levels.run(level + 1, tasks))
    return TopDownResult(hists, levels.summaries, levels.failsafe)


def _root_task(
    ctx: TaskContext, bounds: Bounds, live: np.ndarray, o: TopDownOptions
) -> tuple[Task, list[LevelPlan]]:
    """The root's task (one unit, no parent constraint), and every level's passes.

    The root's marginals come from every level's measurements (pooling; a deliberate
    difference from production, which uses the root's own only), or its own, or, when
    the root has none, from the levels below it.
    """
    ms, hierarchy = ctx.ms, ctx.hierarchy
    root_mqs = [] if o.pool_root else [m for m in ms.read(0, 0, 1) if m.measured_units().all()]
    if not root_mqs:
        # pooled; or, without its own measurements (the US of an input of some states,
        # whose budget was spent on the nation), from the levels below: the State of a
        # one-state input measures the same persons, the parts of a state their union
        root_mqs = pooled_root(ms, hierarchy, variance_floor=VARIANCE_FLOOR)
    family = Family(
        start=0,
        k=1,
        kept=live,
        parent_counts=None,
        groups=ctx.cell_groups[live],
        bounds=bounds.units(slice(0, 1)),
        label="root",
        child_labels=(f"{hierarchy.geolevels[0].name} {hierarchy.geocodes[0][0] or 'US'}",),
    )
    root_sub = make_subproblem(root_mqs, ctx.cache, slice(0, 1), family)
    plans = level_plans(ms, hierarchy, o.group_variable, o.passes, [m.query for m in root_mqs])
    if o.root_cap is not None:
        if o.root_cap.weights.shape != (ms.schema.size,):
            raise InternalError(f"a root cap has {o.root_cap.weights.size} weights, not one a cell")
        return Task(-1, "", 0, live, root_sub, o.method, cap=o.root_cap), plans
    root = Task(
        -1,
        "",
        0,
        live,
        root_sub,
        o.method,
        *plans[0].bind(live),
        estimator=o.estimator,
        coarse=ctx.cache.coarse(root_mqs, o.estimator, live),
        production=o.production,
    )
    return root, plans


class _Levels:
    """Runs the tasks of each level on the executor, one level after the other, and keeps
    the levels' summaries and failsafe records (a level from ``checkpoint`` reused)."""

    def __init__(
        self,
        hierarchy: Hierarchy,
        n_cells: int,
        executor: Executor,
        progress: Callable[[str], None] | None,
        checkpoint: LevelStore | None,
    ) -> None:
        self.hierarchy, self.n_cells = hierarchy, n_cells
        self.executor, self.progress, self.checkpoint = executor, progress, checkpoint
        self.summaries: list[dict] = []
        self.failsafe: list[dict] = []

    def run(self, level: int, tasks: Iterable[Task]) -> sp.csr_matrix:
        """The integer histogram of ``level``, from its ``tasks`` (or the checkpoint)."""
        done = self.checkpoint.load(level) if self.checkpoint is not None else None
        if done is not None:
            hist, summary, fs = done
            self.summaries.append(summary)
            self.failsafe.extend(fs)
            if self.progress is not None:
                self.progress(
                    f"estimated {summary['geolevel']:<10} before the interruption: reused"
                )
            return hist
        t0 = time.perf_counter()
        name = self.hierarchy.geolevels[level].name
        acc = LevelResults(name, self.hierarchy.n_units(level), self.n_cells)
        self._solve(level, name, tasks, acc)
        hist = acc.histogram()
        summary = acc.summary(time.perf_counter() - t0)
        # what the driver did of the tasks' work (reading families, building their
        # subproblems: in process, or families read whole); tasks do it on other executors
        built = tasks.build_cpu if isinstance(tasks, LevelTasks) else 0.0
        summary["driver_build_cpu_seconds"] = round(built, 4)
        self.summaries.append(summary)
        self.failsafe.extend(acc.failsafe)
        if self.checkpoint is not None:
            self.checkpoint.save(level, hist, summary, acc.failsafe)
        if self.progress is not None:
            self.progress(
                f"estimated {summary['geolevel']:<10} {summary['tasks']:>6} "
                f"task{'s' if summary['tasks'] != 1 else ''} in "
                f"{summary['wall_seconds']:.2f}s (failsafe used {summary['failsafe_uses']} times)"
            )
        return hist

    def _solve(self, level: int, name: str, tasks: Iterable[Task], acc: LevelResults) -> None:
        """Run ``tasks`` on the executor, folding each result into ``acc``."""
        # one task per parent (split families add chunk tasks): done / total, with an ETA
        n_tasks = self.hierarchy.n_units(level - 1) if level > 0 else 1
        split = tasks if isinstance(tasks, LevelTasks) else None
        with task(self.progress, f"estimating {name}", n_tasks, summary=False) as bar:
            # small tasks travel in batches; results come back in task order either way.
            # A split family's coarse result goes back to the level's tasks, whose next
            # ones are its chunks; chunks of coarse results that came back after the last
            # task was handed out take a second pass.
            waves = [tasks] if split is None else [split, split.rest()]
            for wave in waves:
                for rs in self.executor.map(run_tasks, batched(wave)):
                    for r in rs:
                        if r.chunks:
                            split.accept(r)  # type: ignore[union-attr]
                            continue
                        acc.add(r)
                        bar.advance()
        if split is not None:
            acc.add_splits(split.splits)
