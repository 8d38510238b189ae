"""What the multi-trial Dinur-Nissim experiments share: checks, seeds, per-trial arrays.

The experiments (:mod:`~censusdp.attacks.dinur_nissim.curves`,
:mod:`~censusdp.attacks.dinur_nissim.thresholds`) check their options with the same
one-line messages, spawn one independent seed per trial from ``SeedSequence(seed)``,
and collect the trial engine's results into arrays with their timings.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from censusdp.attacks.dinur_nissim._engine import NoiseDraw, TrialResult
from censusdp.attacks.dinur_nissim._query_families import QUERY_FAMILIES, max_queries
from censusdp.attacks.dinur_nissim.noise import NoiseSpec
from censusdp.attacks.dinur_nissim.reconstruction import SOLVERS
from censusdp.errors import CensusDPError

__all__ = [
    "TrialArrays",
    "check_counts",
    "check_experiment",
    "check_workers",
    "deciles",
    "noise_draw",
    "trial_arrays",
    "trial_seeds",
]


def check_experiment(n: int, trials: int, family: str, solver: str) -> None:
    """Check the size, trials, query family and solver of an experiment."""
    if not isinstance(n, int | np.integer) or n < 2:
        raise CensusDPError(f"n must be an integer >= 2; got {n!r}")
    if trials < 1:
        raise CensusDPError(f"trials must be >= 1; got {trials}")
    if family not in QUERY_FAMILIES:
        raise CensusDPError(f"query family must be one of {QUERY_FAMILIES}; got {family!r}")
    if solver not in SOLVERS:
        raise CensusDPError(f"solver must be one of {SOLVERS}; got {solver!r}")


def check_workers(workers: int) -> None:
    """Check a number of worker processes."""
    if workers < 1:
        raise CensusDPError(f"workers must be >= 1; got {workers}")


def check_counts(
    counts: Sequence[int], family: str, n: int, matrix: np.ndarray | None
) -> tuple[int, ...]:
    """The query counts as a tuple, checked: non-empty, >= 1, increasing, within the family."""
    out = tuple(int(m) for m in counts)
    if not out:
        raise CensusDPError("query_counts must not be empty")
    if any(m < 1 for m in out):
        raise CensusDPError(f"query counts must be >= 1; got {min(out)}")
    if list(out) != sorted(set(out)):
        raise CensusDPError(f"query counts must be strictly increasing; got {out}")
    limit = max_queries(family, n, matrix)
    if limit is not None and out[-1] > limit:
        raise CensusDPError(
            f"query family {family!r} allows at most {limit} queries on n={n} bits; got {out[-1]}"
        )
    return out


def noise_draw(spec: NoiseSpec) -> NoiseDraw:
    """What a worker needs to draw ``spec``'s noise."""
    return NoiseDraw(spec.kind, float(spec.variance or 0.0), float(spec.epsilon or 0.0))


def trial_seeds(seed: int, trials: int) -> list[np.random.SeedSequence]:
    """One independent seed per trial: ``SeedSequence(seed).spawn(trials)``."""
    return np.random.SeedSequence(seed).spawn(trials)


def deciles(values: np.ndarray, axis: int = 0) -> dict[str, list[float]]:
    """Mean, min, 10/50/90% quantiles and max along ``axis``, as lists."""
    return {
        "mean": np.mean(values, axis=axis).tolist(),
        "min": np.min(values, axis=axis).tolist(),
        "p10": np.quantile(values, 0.10, axis=axis).tolist(),
        "p50": np.quantile(values, 0.50, axis=axis).tolist(),
        "p90": np.quantile(values, 0.90, axis=axis).tolist(),
        "max": np.max(values, axis=axis).tolist(),
    }


@dataclass(frozen=True, kw_only=True)
class TrialArrays:
    """What every multi-trial experiment records: solver, trials, seed, per-trial arrays, times."""

    solver: str
    trials: int
    seed: int
    fractions: np.ndarray
    residual_norms: np.ndarray
    converged: np.ndarray
    seconds: float
    gram_seconds: float
    solve_seconds: float


def trial_arrays(
    results: list[TrialResult], start: float, pick: Any = slice(None)
) -> dict[str, Any]:
    """The per-trial arrays (``pick`` of each trial's) and summed timings of a finished run."""
    return {
        "fractions": np.stack([r.fractions[pick] for r in results]),
        "residual_norms": np.stack([r.residual_norms[pick] for r in results]),
        "converged": np.stack([r.converged[pick] for r in results]),
        "seconds": time.perf_counter() - start,
        "gram_seconds": float(sum(r.gram_seconds for r in results)),
        "solve_seconds": float(sum(r.solve_seconds for r in results)),
    }
