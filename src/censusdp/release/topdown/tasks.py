"""One TopDown task and its work: failsafe, least squares (or maximum entropy), rounding,
exact check.

A :class:`Task` is one parent with its children (or the root, or a bottom-up block
batch): a :class:`~censusdp.release.topdown.problem.Subproblem` plus bookkeeping, or the
family it reads itself where it runs (:class:`DetachedFamily`). :func:`run_task` solves it
into a :class:`TaskResult`; :func:`run_tasks` solves a batch (:func:`batched`: small tasks
travel together). Tasks are independent and picklable, so an executor may run them in
any order, in any process.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from censusdp.data.geography import DEFAULT_CHUNK_VALUES
from censusdp.data.measurements import Measurements
from censusdp.errors import InfeasibleError, InternalError
from censusdp.progress import logger
from censusdp.release.topdown.failsafe import FailsafeReport, check_feasible, make_feasible
from censusdp.release.topdown.maxent import solve_maxent
from censusdp.release.topdown.multipass import (
    L2Passes,
    RoundingPasses,
    round_in_passes,
    solve_interleaved,
    solve_l2_passes,
)
from censusdp.release.topdown.problem import Subproblem
from censusdp.release.topdown.rounding import round_to_integers
from censusdp.release.topdown.solvers.least_squares import solve_l2
from censusdp.release.topdown.subproblems import Family, FamilyRun, make_subproblem, worker_cache
from censusdp.release.topdown.weighted import RootCap, repair_counts, solve_capped
from censusdp.release.topdown.weighted_family import (
    UnitCaps,
    repair_family_counts,
    solve_family_capped,
)

__all__ = [
    "BATCH_MAX_TASKS",
    "BATCH_VARIABLES",
    "DetachedFamily",
    "Task",
    "TaskResult",
    "batched",
    "check_counts",
    "run_task",
    "run_tasks",
]


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
    source: DetachedFamily | None = None
    chunks: int = 0
    """A split family's coarse solve: the number of chunks of children (0: any other task)."""
    production: bool = False
    """Production's estimation (fidelity ``production``): no failsafe (an infeasible
    subproblem raises) and production's rounder
    (:func:`~censusdp.release.topdown.multipass.round_in_passes`)."""
    cap: RootCap | None = None
    """A weighted row on the task's one unit (the root), solved and rounded as
    :mod:`~censusdp.release.topdown.weighted` describes; its weights over every cell."""
    caps: UnitCaps | None = None
    """A weighted row on each child (the states of a several-state household run), its
    rows one a child, solved and rounded as
    :mod:`~censusdp.release.topdown.weighted_family` describes."""

    def subproblem(self) -> Subproblem:
        """The task's subproblem: ``sub``, or built from ``source`` where the task runs."""
        if self.sub is not None:
            return self.sub
        if self.source is None:
            raise InternalError(f"task {self.parent_geocode!r} has no subproblem")
        return self.source.build()


@dataclass(frozen=True, eq=False)
class DetachedFamily:
    """A family that its task reads itself (:class:`Task` ``source``): the children's
    measurements as a slice of the NMF (``NMFReader.detach``: row-group locations, no
    values) and the :class:`~censusdp.release.topdown.subproblems.Family` it is.

    The driver then builds a ``ddp-2010`` block family's task without reading its
    millions of noisy values: the workers read in parallel, each the family it solves.
    """

    ms: Measurements
    level: int
    family: Family

    def build(self) -> Subproblem:
        """The family's subproblem, its measurements read here."""
        cache = worker_cache(self.ms)
        f = self.family
        width = sum(m.rows.size for m in self.ms.read(self.level, f.start, f.start))
        run = FamilyRun(
            self.ms, self.level, f.start, f.children.stop, width, DEFAULT_CHUNK_VALUES, lazy=True
        )
        mqs, local = run.family(f.children, f.kept, cache)
        return make_subproblem(mqs, cache, local, f)


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
    solve_seconds: float
    """Least squares (or maximum entropy): the real solution before rounding."""
    rounding_seconds: float
    max_violation: float
    failsafe: dict | None = None
    cpu_seconds: float = 0.0
    attempts: tuple[tuple[str, str], ...] = ()
    chunks: int = 0
    """The task's ``chunks``: a split family's coarse result when positive."""


def check_counts(sub: Subproblem, counts: np.ndarray, where: str) -> None:
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
    return t.source.family.k * max(int(t.kept.size), 1)  # type: ignore[union-attr]


def batched(tasks: Iterable[Task]) -> Iterator[tuple[Task, ...]]:
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


def _feasible(task: Task) -> tuple[Subproblem, FailsafeReport | None]:
    """The task's subproblem made feasible by the failsafe; in production fidelity the
    subproblem itself, unchecked: the 2020 production run had no failsafe
    (``programs/optimization/sequential_optimizers.py``,
    ``L2PlusRounderWithBackup_interleaved``, sets ``failsafe_invoked = False`` and raises
    when the least-squares solve is infeasible), and :func:`run_task` decides
    feasibility only when the estimation fails (:func:`_no_failsafe`)."""
    sub = task.subproblem()
    if not task.production:
        return make_feasible(sub)
    return sub, None


def _no_failsafe(sub: Subproblem) -> InfeasibleError | None:
    """Production fidelity's error for an infeasible subproblem, or ``None`` when it is
    feasible (the failure that led here is then the solver's or the rounder's own).

    Asked only after a production task's estimation failed: an infeasible subproblem
    always fails it (the rounding holds every constraint exactly and raises when no
    integer point does), so the feasible ones, all of them in a release that completes,
    skip the exact check, a min-cost flow per family (4-6% of a block family's CPU).
    """
    if check_feasible(sub):
        return None
    return InfeasibleError(
        f"subproblem {sub.label!r}: the parent's counts and the children's constraints "
        "(group-quarters bounds, totals) have no common solution; fidelity "
        "'production' has no failsafe (the 2020 production run stopped here); the "
        "default fidelity relaxes the least binding constraints and records it"
    )


def run_task(task: Task) -> TaskResult:
    """Solve one task: failsafe, least squares, rounding, exact check (a production
    task's subproblem is checked for feasibility only when its estimation fails)."""
    t0 = time.perf_counter()
    c0 = time.process_time()
    sub, report = _feasible(task)
    try:
        return _estimate(task, sub, report, t0, c0)
    except Exception as exc:
        error = _no_failsafe(sub) if task.production else None
        if error is None:
            raise
        raise error from exc


def _estimate(
    task: Task, sub: Subproblem, report: FailsafeReport | None, t0: float, c0: float
) -> TaskResult:
    """:func:`run_task` after the failsafe (``t0``, ``c0``: its start, wall and CPU)."""
    t1 = time.perf_counter()
    # maxent, or auto's pick; None: least squares
    if task.cap is not None:  # least squares under the weighted row, one pass
        if task.l2_passes is not None:
            raise InternalError("a capped root is estimated in one least-squares pass")
        weights = task.cap.weights[task.kept]
        solution, lam, solves = solve_capped(sub, task.cap, weights, task.method)
        cap = f"{task.cap.what} in [{task.cap.lower:g}, {task.cap.upper:g}]"
    elif task.caps is not None:  # least squares under each child's weighted row
        if task.l2_passes is not None:
            raise InternalError("a family under weighted rows is estimated in one pass")
        weights = task.caps.weights[task.kept]
        solution, lams, solves = solve_family_capped(sub, task.caps, weights, task.method)
    else:
        # least squares where children are grouped (a state's parts under the US): only
        # its Clarabel program holds the group rows
        solution = (
            None
            if task.estimator == "ls" or sub.child_group is not None
            else solve_maxent(sub, task.estimator, method=task.method, coarse=task.coarse)
        )
    counts = None  # rounded with the least squares: outer passes
    if solution is None and task.l2_passes is None:
        solution = solve_l2(sub, method=task.method)
    elif solution is None and task.l2_passes.outer[-1] > 0 and task.rounding is not None:
        solution, counts = solve_interleaved(
            sub, task.l2_passes, task.rounding, method=task.method, production=task.production
        )
    elif solution is None:
        solution = solve_l2_passes(sub, task.l2_passes, method=task.method)
    t2 = time.perf_counter()
    if counts is not None:  # the earlier outer passes' rounding is in solve_seconds
        counts = np.asarray(counts, dtype=np.int64)
    elif task.rounding is None or (sub.parent is None and solution.method == "maxent"):
        # a maximum-entropy root (one geounit, its total invariant) has no children's
        # totals to keep: held to the published marginals first, its thin spread over
        # the detailed cells broke ties inside each row by cell order (the state's sex x
        # age TVD of Vermont x0.02 at epsilon 0.5, seed 1: 0.196 so, 0.189 cell by cell)
        counts = round_to_integers(sub, solution.x, production=task.production)
        counts = np.asarray(counts, dtype=np.int64)
    else:
        counts = round_in_passes(sub, solution.x, task.rounding, production=task.production)
        counts = np.asarray(counts, dtype=np.int64)
    if task.cap is not None:
        counts, moved = repair_counts(sub, counts, solution.x, task.cap, weights)
        logger.info(
            f"root under {cap}: {solves} least-squares solves (multiplier {lam:.4g}), "
            f"{moved} moved after rounding"
        )
        if not task.cap.lower <= float(counts[0] @ weights) <= task.cap.upper:
            raise InternalError("task root: the capped row is violated after repair")
    if task.caps is not None:
        counts, moved = repair_family_counts(sub, counts, solution.x, task.caps, weights)
        logger.info(
            f"{sub.label} under {task.caps.what} per child: {solves} least-squares solves "
            f"(multipliers {', '.join(f'{v:.4g}' for v in lams)}), {moved} moved after rounding"
        )
    t3 = time.perf_counter()
    check_counts(sub, counts, f"task {task.parent_geocode or 'root'}")
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
        status=str(solution.status),
        method=str(solution.method),
        seconds=t3 - t0,
        solve_seconds=t2 - t1,
        rounding_seconds=t3 - t2,
        max_violation=float(solution.max_violation),
        failsafe=fs,
        cpu_seconds=time.process_time() - c0,
        attempts=tuple(solution.attempts),
        chunks=task.chunks,
    )
