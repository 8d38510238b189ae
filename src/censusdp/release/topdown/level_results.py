"""A level's results folded as they arrive: its sparse histogram and its summary.

:class:`LevelResults` adds each task's integer counts to the level's histogram and its
times, statuses, methods, failsafe uses and fallbacks to the level's summary (the
manifest's ``estimation`` entry per geolevel, with the critical path of split families).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from censusdp.progress import logger
from censusdp.release.topdown.tasks import TaskResult

__all__ = ["LevelResults"]


class LevelResults:
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
        self.solve_seconds = 0.0
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
        """Fold one task's result in (a fallback is logged as a warning)."""
        k, c = r.counts.shape
        if c:
            rr, cc = np.nonzero(r.counts)
            self._rows.append((rr + r.child_start).astype(np.int64))
            self._cols.append(r.kept[cc].astype(np.int64))
            self._vals.append(r.counts[rr, cc].astype(np.int64))
        self.tasks += 1
        self.task_seconds += r.seconds
        self.cpu_seconds += r.cpu_seconds
        self.solve_seconds += r.solve_seconds
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
        """The level's integer histogram (units x cells) of every result folded in."""
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
        """The level's summary for the manifest, ``wall`` seconds after it started."""
        children = np.asarray([k for k, _ in self.task_times], dtype=np.float64)
        secs = np.asarray([t for _, t in self.task_times], dtype=np.float64)
        return {
            "geolevel": self.level_name,
            "tasks": self.tasks,
            "wall_seconds": round(wall, 4),
            "task_seconds": round(self.task_seconds, 4),
            "task_cpu_seconds": round(self.cpu_seconds, 4),
            "l2_seconds": round(self.solve_seconds, 4),  # least squares or maximum entropy
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
