"""Queries needed to recover every bit, vs the database size (JASON (JSR-19-2F) figs. 4-2, 4-3).

For each ``n`` and trial, :func:`recovery_thresholds` finds the smallest ``m`` at which
bounded least squares on the first ``m`` noiseless queries recovers every bit
(bisection), then fits a line through (n, mean threshold); JASON found a slope near
1/2. Trials use independent streams from ``SeedSequence(seed)``; results do not depend
on the number of worker processes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from censusdp.attacks.dinur_nissim._bounded_ls import (
    FistaSettings,
    gram_fista,
    lp_solve,
    lsq_linear_solve,
    round_bits,
)
from censusdp.attacks.dinur_nissim._engine import run_tasks
from censusdp.attacks.dinur_nissim._query_families import make_source, max_queries
from censusdp.attacks.dinur_nissim._trials import check_experiment, check_workers, deciles
from censusdp.errors import CensusDPError
from censusdp.privacy.randomness import experiment_generator
from censusdp.progress import Progress

__all__ = ["RecoveryThresholds", "RecoveryThresholdsOptions", "recovery_thresholds"]


@dataclass(frozen=True)
class RecoveryThresholdsOptions:
    """What a full-recovery threshold experiment is (JASON (JSR-19-2F) figs. 4-2, 4-3), checked once.

    Attributes:
        ns: database sizes (kept as a tuple of ints).
        trials: trials per size.
        seed: root seed.
        family: query family (not ``matrix``: the experiment draws its own queries).
        solver: ``fista``, ``lsq_linear`` or ``lp``.
        max_multiple: largest ``m / n`` tried (thresholds above it are reported as
            ``max + 1``).
        tol: FISTA tolerance.

    Raises:
        CensusDPError: on construction, one line naming the value.
    """

    ns: Sequence[int]
    trials: int = 20
    seed: int = 0
    family: str = "random"
    solver: str = "fista"
    max_multiple: float = 1.0
    tol: float = 1e-7

    def __post_init__(self) -> None:
        ns_t = tuple(int(n) for n in self.ns)
        if not ns_t:
            raise CensusDPError("ns must not be empty")
        for n in ns_t:
            check_experiment(n, self.trials, self.family, self.solver)
        if self.family == "matrix":
            raise CensusDPError(
                "recovery_thresholds draws its own queries; family 'matrix' is not supported"
            )
        if self.max_multiple <= 0:
            raise CensusDPError(f"max_multiple must be positive; got {self.max_multiple}")
        object.__setattr__(self, "ns", ns_t)


@dataclass(frozen=True)
class _ThresholdTask:
    n: int
    max_queries: int
    family: str
    solver: str
    tol: float
    seed: np.random.SeedSequence


def _threshold_trial(task: _ThresholdTask) -> int:
    """Smallest ``m`` at which the first ``m`` queries recover every bit (bisection).

    Noiselessly, once ``d`` is the only box-feasible solution of ``Q_m x = a_m`` it stays
    so when rows are added, so recovery is monotone in ``m`` and bisection is exact
    (given the solver). Returns ``max_queries + 1`` if even ``max_queries`` fails.
    """
    rng_d = experiment_generator(
        np.random.SeedSequence(task.seed.entropy, spawn_key=(*task.seed.spawn_key, 0))
    )
    rng_q = experiment_generator(
        np.random.SeedSequence(task.seed.entropy, spawn_key=(*task.seed.spawn_key, 1))
    )
    n = task.n
    secret = rng_d.integers(0, 2, n).astype(np.float64)
    Q = make_source(task.family, n, rng_q).rows(0, task.max_queries)
    a = Q.astype(np.float64) @ secret

    def ok(m: int) -> bool:
        qm = Q[:m]
        if task.solver == "fista":
            res = gram_fista(
                (qm.T @ qm).astype(np.float64),
                qm.T.astype(np.float64) @ a[:m],
                settings=FistaSettings(tol=task.tol),
            )
        elif task.solver == "lsq_linear":
            res = lsq_linear_solve(qm, a[:m])
        else:
            res = lp_solve(qm, a[:m])
        return bool(np.all(round_bits(res.x[:, 0]) == secret))

    lo, hi = 0, task.max_queries
    if not ok(hi):
        return task.max_queries + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


@dataclass(frozen=True)
class RecoveryThresholds:
    """Queries needed to recover every bit, per trial, for several database sizes.

    Attributes:
        ns: database sizes.
        thresholds: ``(len(ns), trials)`` smallest ``m`` with full recovery.
        slope_mean, intercept_mean: least-squares line through (n, mean threshold).
        slope_max: slope of the line through (n, max threshold over trials).
        seconds: wall time.
    """

    ns: np.ndarray
    thresholds: np.ndarray
    family: str
    solver: str
    trials: int
    seed: int
    slope_mean: float
    intercept_mean: float
    slope_max: float
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary with Appendix A predictions beside the measurements."""
        mean = self.thresholds.mean(axis=1)
        return {
            "experiment": "recovery_thresholds",
            "family": self.family,
            "solver": self.solver,
            "trials": self.trials,
            "seed": self.seed,
            "ns": self.ns.tolist(),
            "queries_for_full_recovery": deciles(self.thresholds, axis=1),
            "normalized_by_n": (mean / self.ns).tolist(),
            "slope_mean": self.slope_mean,
            "intercept_mean": self.intercept_mean,
            "slope_max": self.slope_max,
            "predictions": [
                {
                    "n": int(n),
                    "noiseless_min_queries_2n_over_log2n": 2.0 * n / math.log2(n),
                    "adaptive_pairs_queries": 0.75 * n,
                    "linear_algebra_queries": int(n),
                }
                for n in self.ns
            ],
            "timings": {"wall_seconds": self.seconds},
        }


def recovery_thresholds(
    options: RecoveryThresholdsOptions, *, workers: int = 1, progress: Progress = None
) -> RecoveryThresholds:
    """Number of noiseless queries needed for full recovery vs ``n`` (JASON (JSR-19-2F) figs. 4-2, 4-3).

    For each ``n`` and trial, the smallest ``m`` at which bounded least squares on the
    first ``m`` queries recovers every bit (found by bisection; see
    :func:`_threshold_trial`); then a least-squares line through (n, mean threshold).
    JASON found a slope near 1/2.

    Args:
        options: the experiment (:class:`RecoveryThresholdsOptions`).
        workers: processes; the results do not depend on it.
        progress: ``None`` (silent) or a callable taking lines: tasks done / total.
    """
    check_workers(workers)
    o = options
    ns_t = tuple(o.ns)
    start = time.perf_counter()
    roots = np.random.SeedSequence(o.seed).spawn(len(ns_t))
    tasks = []
    for n, root in zip(ns_t, roots, strict=True):
        m_max = max(1, int(math.ceil(o.max_multiple * n)))
        limit = max_queries(o.family, n)
        if limit is not None:
            m_max = min(m_max, limit)
        tasks += [
            _ThresholdTask(n, m_max, o.family, o.solver, o.tol, s) for s in root.spawn(o.trials)
        ]
    flat = run_tasks(_threshold_trial, tasks, workers, progress)
    thr = np.asarray(flat, dtype=float).reshape(len(ns_t), o.trials)
    ns_arr = np.asarray(ns_t)
    if len(ns_t) >= 2:
        slope, intercept = np.polyfit(ns_arr, thr.mean(axis=1), 1)
        slope_max = float(np.polyfit(ns_arr, thr.max(axis=1), 1)[0])
    else:
        slope, intercept, slope_max = float("nan"), float("nan"), float("nan")
    return RecoveryThresholds(
        ns=ns_arr,
        thresholds=thr,
        family=o.family,
        solver=o.solver,
        trials=o.trials,
        seed=o.seed,
        slope_mean=float(slope),
        intercept_mean=float(intercept),
        slope_max=slope_max,
        seconds=time.perf_counter() - start,
    )
