"""Accuracy of a Laplace-noised sum query (JASON (JSR-19-2F) sec. 5.5, fig. 5-6).

:func:`sum_query_accuracy` measures ``A = 1 - |S~ - S| / S`` for the Laplace-noised sum
of ``N`` fair bits over many trials (App. B, Listing 4); :func:`expected_sum_accuracy`
is its exact expectation. The noise is experiment noise from
``censusdp.privacy.randomness.experiment_generator``, never release noise.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from censusdp.errors import CensusDPError
from censusdp.privacy.randomness import experiment_generator

__all__ = [
    "JASON_FIG56_EPSILONS",
    "JASON_FIG56_SIZES",
    "SumAccuracy",
    "expected_sum_accuracy",
    "sum_query_accuracy",
]

#: Database sizes of JASON (JSR-19-2F) Appendix B, Listing 4 (fig. 5-6).
JASON_FIG56_SIZES: tuple[int, ...] = (100, 200, 500, 1000, 2000, 5000)
#: Epsilons of JASON (JSR-19-2F) Appendix B, Listing 4 (fig. 5-6).
JASON_FIG56_EPSILONS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.1, 0.11, 0.12, 0.13,
    0.14, 0.15, 0.16, 0.17, 0.18, 0.19, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
)  # fmt: skip


def expected_sum_accuracy(n: int, epsilon: float) -> float:
    """Exact expectation of ``A = 1 - |round(S + L) - S| / S`` (JASON (JSR-19-2F) sec. 5.5, fig. 5-6).

    ``S ~ Binomial(n, 1/2)`` conditioned on ``S > 0`` and ``L ~ Lap(1/epsilon)`` are
    independent and ``round(S + L) - S = round(L)``, so
    ``E[A] = 1 - E|round(L)| E[1/S]`` with
    ``E|round(L)| = sum_{k>=1} P(|L| >= k - 1/2) = 1 / (2 sinh(epsilon / 2))``.
    """
    if n < 1:
        raise CensusDPError(f"n must be >= 1; got {n}")
    if not epsilon > 0:
        raise CensusDPError(f"epsilon must be positive; got {epsilon}")
    from scipy.stats import binom

    s = np.arange(1, n + 1)
    pmf = binom.pmf(s, n, 0.5)
    inv_s = float((pmf / s).sum() / pmf.sum())
    return 1.0 - inv_s / (2.0 * math.sinh(epsilon / 2.0))


@dataclass(frozen=True)
class SumAccuracy:
    """Mean accuracy of a Laplace-noised sum (JASON (JSR-19-2F) fig. 5-6).

    Attributes:
        ns: database sizes N.
        epsilons: privacy-loss parameters.
        measured: ``(len(ns), len(epsilons))`` mean accuracy over ``trials``.
        standard_error: standard error of each mean.
        expected: exact expectations (:func:`expected_sum_accuracy`).
    """

    ns: np.ndarray
    epsilons: np.ndarray
    trials: int
    seed: int
    measured: np.ndarray
    standard_error: np.ndarray
    expected: np.ndarray
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready table."""
        return {
            "experiment": "sum_query_accuracy",
            "ns": self.ns.tolist(),
            "epsilons": self.epsilons.tolist(),
            "trials": self.trials,
            "seed": self.seed,
            "measured": self.measured.tolist(),
            "standard_error": self.standard_error.tolist(),
            "expected": self.expected.tolist(),
            "timings": {"wall_seconds": self.seconds},
        }


def sum_query_accuracy(
    ns: Sequence[int] = JASON_FIG56_SIZES,
    epsilons: Sequence[float] = JASON_FIG56_EPSILONS,
    *,
    trials: int = 1000,
    seed: int = 0,
) -> SumAccuracy:
    """Accuracy ``A = 1 - |S~ - S| / S`` of the Laplace-noised sum of N bits (JASON (JSR-19-2F) fig. 5-6).

    As in App. B Listing 4: per trial a fresh database of N fair bits (redrawn if its
    sum is 0), ``S~ = round(S + Lap(1/epsilon))``; the mean of A over ``trials``.
    """
    ns_a = np.asarray([int(n) for n in ns])
    eps = np.asarray([float(e) for e in epsilons])
    if ns_a.size == 0 or np.any(ns_a < 1):
        raise CensusDPError(f"ns must be positive integers; got {ns_a.tolist()}")
    if eps.size == 0 or np.any(eps <= 0):
        raise CensusDPError(f"epsilons must be positive; got {eps.tolist()}")
    if trials < 2:
        raise CensusDPError(f"trials must be >= 2; got {trials}")
    start = time.perf_counter()
    rng = experiment_generator(seed)
    measured = np.zeros((ns_a.size, eps.size))
    se = np.zeros_like(measured)
    expected = np.zeros_like(measured)
    for i, n in enumerate(ns_a):
        for j, e in enumerate(eps):
            s = rng.binomial(n, 0.5, trials)
            while np.any(s == 0):
                s[s == 0] = rng.binomial(n, 0.5, int((s == 0).sum()))
            noisy = np.round(s + rng.laplace(0.0, 1.0 / e, trials))
            acc = 1.0 - np.abs(noisy - s) / s
            measured[i, j] = acc.mean()
            se[i, j] = acc.std(ddof=1) / math.sqrt(trials)
            expected[i, j] = expected_sum_accuracy(int(n), float(e))
    return SumAccuracy(ns_a, eps, trials, seed, measured, se, expected, time.perf_counter() - start)
