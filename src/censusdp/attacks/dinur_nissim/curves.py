"""Fraction of bits recovered over many trials (JASON (JSR-19-2F) figs. 4-1, 4-4 and 5-7).

A database is a secret vector ``d`` of ``n`` bits; a query is a subset ``q`` and its
exact answer is ``a_q = sum_{i in q} d_i`` (JASON (JSR-19-2F) eqs. (4-2), (4-3)). The attacker
asks ``m`` queries, receives (possibly noisy) answers ``b``, solves the bounded least
squares problem ``argmin ||Q x - b||^2, 0 <= x_i <= 1`` (eq. (4-4)) or Dinur and
Nissim's linear program, and rounds ``x`` to bits. The *fraction recovered* is the
share of bits equal to the secret; 1/2 is random guessing.

* :func:`recovery_curve`: fraction recovered vs number of queries with deciles
  (fig. 4-1 noiseless, n = 1000; fig. 4-4 with Gaussian noise of variance
  ``sqrt(n) ln(n) / 2``; any query family, noise and solver).
* :func:`laplace_grid`: fraction recovered vs epsilon and query multiple with
  Laplace noise, n = 4000 (fig. 5-7).

Each takes its options (:class:`RecoveryCurveOptions`, :class:`LaplaceGridOptions`:
what the experiment is, checked once) and how to run it (``workers``, ``progress``).
All noise is experiment noise (:mod:`~censusdp.attacks.dinur_nissim.noise`), never
release noise. Trials use independent streams from ``SeedSequence(seed)``; results do
not depend on the number of worker processes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from censusdp.attacks.dinur_nissim._engine import TrialResult, TrialTask, run_tasks, run_trial
from censusdp.attacks.dinur_nissim._trials import (
    TrialArrays,
    check_counts,
    check_experiment,
    check_workers,
    deciles,
    noise_draw,
    trial_arrays,
    trial_seeds,
)
from censusdp.attacks.dinur_nissim.noise import NoiseSpec
from censusdp.attacks.dinur_nissim.predictions import (
    information_bits,
    information_predictions,
    ls_gaussian_prediction,
)
from censusdp.errors import CensusDPError
from censusdp.progress import Progress

__all__ = [
    "JASON_FIG57_EPSILONS",
    "JASON_FIG57_MULTIPLES",
    "LaplaceGrid",
    "LaplaceGridOptions",
    "RecoveryCurve",
    "RecoveryCurveOptions",
    "laplace_grid",
    "recovery_curve",
]

#: Epsilons of JASON (JSR-19-2F) Appendix B, Listing 5 (fig. 5-7).
JASON_FIG57_EPSILONS: tuple[float, ...] = (
    0.01,
    0.02,
    0.03,
    0.04,
    0.05,
    0.1,
    0.2,
    0.25,
    0.3,
    0.4,
    0.5,
    1.0,
)
#: Query multiples of JASON (JSR-19-2F) Appendix B, Listing 5 (fig. 5-7).
JASON_FIG57_MULTIPLES: tuple[int, ...] = (1, 5, 10, 20)


# ---------------------------------------------------------------------------------------
# Fraction recovered vs number of queries (figs. 4-1, 4-4)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecoveryCurveOptions:
    """What a recovery-curve experiment is (JASON (JSR-19-2F) figs. 4-1 and 4-4), checked once.

    With ``nested=True`` (default) a trial's ``m``-query set is the first ``m`` rows of
    its largest set: every point has exactly the distribution of an independent
    experiment, the curves are smoother, and the Gram matrix is built once per trial.
    JASON's MATLAB draws a new matrix for every ``m`` (``nested=False``).

    Attributes:
        n: number of bits.
        query_counts: strictly increasing numbers of queries (kept as a tuple of ints).
        trials: number of independent trials (JASON: 100).
        seed: root seed; trial ``t`` uses ``SeedSequence(seed).spawn(trials)[t]``.
        noise: noise on every answer (default none).
        family: query family (``random``, ``pairs``, ``msequence``, ``hadamard``,
            ``matrix``).
        matrix: the query matrix for family ``matrix``.
        solver: ``fista``, ``lsq_linear`` or ``lp``.
        nested: reuse query prefixes within a trial (see above).
        tol: FISTA stopping tolerance.
        lp_objective: LP objective (``linf`` = Dinur-Nissim, ``l1``).

    Raises:
        CensusDPError: on construction, one line naming the value.
    """

    n: int
    query_counts: Sequence[int]
    trials: int = 100
    seed: int = 0
    noise: NoiseSpec = NoiseSpec()
    family: str = "random"
    matrix: np.ndarray | None = field(default=None, compare=False)
    solver: str = "fista"
    nested: bool = True
    tol: float = 1e-7
    lp_objective: Literal["linf", "l1"] = "linf"

    def __post_init__(self) -> None:
        check_experiment(self.n, self.trials, self.family, self.solver)
        counts = check_counts(self.query_counts, self.family, self.n, self.matrix)
        object.__setattr__(self, "query_counts", counts)


@dataclass(frozen=True)
class RecoveryCurve(TrialArrays):
    """Fraction of bits recovered vs number of queries over many trials.

    Attributes:
        n: number of bits.
        query_counts: the numbers of queries ``m`` evaluated.
        noise: the noise added to every answer.
        family: query family.
        solver: reconstruction solver.
        trials: number of trials.
        seed: the root seed.
        nested: whether each trial's smaller query sets are prefixes of its larger ones.
        fractions: ``(trials, len(query_counts))`` fractions recovered.
        residual_norms: ``(trials, len(query_counts))`` values of ``||Q x - b||``.
        converged: ``(trials, len(query_counts))`` solver convergence flags.
        seconds: wall time; ``gram_seconds`` and ``solve_seconds`` summed over trials.
    """

    n: int
    query_counts: np.ndarray
    noise: NoiseSpec
    family: str
    nested: bool

    @property
    def mean(self) -> np.ndarray:
        """Mean fraction recovered at each query count."""
        return self.fractions.mean(axis=0)

    def quantile(self, q: float) -> np.ndarray:
        """Quantile ``q`` of the fraction recovered at each query count."""
        return np.quantile(self.fractions, q, axis=0)

    def full_recovery_share(self) -> np.ndarray:
        """Share of trials that recovered every bit, at each query count."""
        return (self.fractions >= 1.0).mean(axis=0)

    def first_full_recovery(self, level: float = 1.0 - 1e-3) -> int | None:
        """Smallest evaluated ``m`` from which the mean fraction stays >= ``level``.

        JASON's statistic (Appendix B, Listings 1-2: the mean within 1e-3 of 1).
        """
        ok = self.mean >= level
        if not ok[-1]:
            return None
        idx = len(ok) - 1
        while idx > 0 and ok[idx - 1]:
            idx -= 1
        return int(self.query_counts[idx])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary with deciles and Appendix A predictions."""
        var = self.noise.noise_variance
        return {
            "experiment": "recovery_curve",
            "n": self.n,
            "noise": self.noise.to_dict(),
            "family": self.family,
            "solver": self.solver,
            "trials": self.trials,
            "seed": self.seed,
            "nested": self.nested,
            "query_counts": self.query_counts.tolist(),
            "query_multiples": (self.query_counts / self.n).tolist(),
            "fraction_recovered": deciles(self.fractions),
            "full_recovery_share": self.full_recovery_share().tolist(),
            "residual_norm_mean": self.residual_norms.mean(axis=0).tolist(),
            "all_converged": bool(self.converged.all()),
            "first_full_recovery_queries": self.first_full_recovery(),
            "predictions": information_predictions(self.n, var),
            "ls_gaussian_prediction": [
                ls_gaussian_prediction(self.n, int(m), var) for m in self.query_counts
            ]
            if var > 0
            else None,
            "timings": {
                "wall_seconds": self.seconds,
                "gram_seconds": self.gram_seconds,
                "solve_seconds": self.solve_seconds,
            },
        }


def recovery_curve(
    options: RecoveryCurveOptions, *, workers: int = 1, progress: Progress = None
) -> RecoveryCurve:
    """Fraction of bits recovered vs number of queries (JASON (JSR-19-2F) figs. 4-1 and 4-4).

    Each trial draws a fresh secret ``d`` (i.i.d. fair bits) and query stream, adds
    ``options.noise`` to every answer, solves eq. (4-4) at every ``m`` in
    ``options.query_counts`` and rounds.

    Args:
        options: the experiment (:class:`RecoveryCurveOptions`).
        workers: processes (1 = in-process); the results do not depend on it.
        progress: ``None`` (silent) or a callable taking lines: trials done / total.
    """
    check_workers(workers)
    o = options
    start = time.perf_counter()
    tasks = [
        TrialTask(
            n=int(o.n),
            query_counts=tuple(o.query_counts),
            noises=(noise_draw(o.noise),),
            family=o.family,
            solver=o.solver,
            nested=o.nested,
            tol=o.tol,
            seed=s,
            matrix=o.matrix,
            lp_objective=o.lp_objective,
        )
        for s in trial_seeds(o.seed, o.trials)
    ]
    results: list[TrialResult] = run_tasks(run_trial, tasks, workers, progress)
    return RecoveryCurve(
        n=int(o.n),
        query_counts=np.asarray(o.query_counts),
        noise=o.noise,
        family=o.family,
        solver=o.solver,
        trials=o.trials,
        seed=o.seed,
        nested=o.nested,
        **trial_arrays(results, start, 0),
    )


# ---------------------------------------------------------------------------------------
# Laplace grid (fig. 5-7)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LaplaceGridOptions:
    """What a fig. 5-7 experiment is (JASON (JSR-19-2F) sec. 5.6), checked once.

    Attributes:
        n: number of bits.
        epsilons: privacy-loss parameters (kept as a tuple of floats).
        multiples: query multiples, ``m = round(multiple * n)`` (kept as a tuple of floats).
        trials: trials (JASON: 10).
        seed: root seed.
        mechanism: ``laplace`` or ``geometric`` (two-sided geometric) noise.
        solver: ``fista`` (the others hold the full matrix; small grids only).
        tol: FISTA tolerance.

    Raises:
        CensusDPError: on construction, one line naming the value.
    """

    n: int = 4000
    epsilons: Sequence[float] = JASON_FIG57_EPSILONS
    multiples: Sequence[float] = JASON_FIG57_MULTIPLES
    trials: int = 10
    seed: int = 0
    mechanism: Literal["laplace", "geometric"] = "laplace"
    solver: str = "fista"
    tol: float = 1e-7

    def __post_init__(self) -> None:
        check_experiment(self.n, self.trials, "random", self.solver)
        if self.mechanism not in ("laplace", "geometric"):
            raise CensusDPError(
                f"mechanism must be 'laplace' or 'geometric'; got {self.mechanism!r}"
            )
        eps = np.asarray([float(e) for e in self.epsilons])
        if eps.size == 0 or np.any(eps <= 0) or not np.all(np.isfinite(eps)):
            raise CensusDPError(f"epsilons must be finite and positive; got {eps.tolist()}")
        object.__setattr__(self, "epsilons", tuple(eps.tolist()))
        object.__setattr__(self, "multiples", tuple(float(x) for x in self.multiples))
        self.query_counts()

    def query_counts(self) -> tuple[int, ...]:
        """The numbers of queries, ``round(multiple * n)``, checked."""
        counts = [int(round(x * self.n)) for x in self.multiples]
        return check_counts(counts, "random", self.n, None)


@dataclass(frozen=True)
class LaplaceGrid(TrialArrays):
    """Fraction recovered vs epsilon and query multiple (JASON (JSR-19-2F) fig. 5-7).

    Attributes:
        n: number of bits.
        epsilons: privacy-loss parameters.
        multiples: query multiples (``m = multiple * n``).
        mechanism: ``laplace`` or ``geometric``.
        fractions: ``(trials, len(epsilons), len(multiples))``.
        residual_norms: same shape.
    """

    n: int
    epsilons: np.ndarray
    multiples: np.ndarray
    mechanism: str

    @property
    def mean(self) -> np.ndarray:
        """Mean fraction recovered, shape ``(len(epsilons), len(multiples))``."""
        return self.fractions.mean(axis=0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready table with Appendix A predictions beside the measurements."""
        rows = []
        for i, eps in enumerate(self.epsilons):
            spec = NoiseSpec(self.mechanism, epsilon=float(eps))  # type: ignore[arg-type]
            var = spec.noise_variance
            pred = information_predictions(self.n, var)
            for j, mult in enumerate(self.multiples):
                m = int(round(mult * self.n))
                f = self.fractions[:, i, j]
                rows.append(
                    {
                        "epsilon": float(eps),
                        "multiple": float(mult),
                        "queries": m,
                        "mean": float(f.mean()),
                        "min": float(f.min()),
                        "p10": float(np.quantile(f, 0.1)),
                        "p90": float(np.quantile(f, 0.9)),
                        "max": float(f.max()),
                        "residual_norm_mean": float(self.residual_norms[:, i, j].mean()),
                        "noise_variance": var,
                        "information_over_n_A15": information_bits(self.n, m, var) / self.n,
                        "queries_needed_information": pred["queries_needed_information"],
                        "ls_gaussian_prediction": ls_gaussian_prediction(self.n, m, var),
                    }
                )
        return {
            "experiment": "laplace_grid",
            "n": self.n,
            "mechanism": self.mechanism,
            "solver": self.solver,
            "trials": self.trials,
            "seed": self.seed,
            "epsilons": self.epsilons.tolist(),
            "multiples": self.multiples.tolist(),
            "mean": self.mean.tolist(),
            "all_converged": bool(self.converged.all()),
            "small_noise_threshold_variance_n_over_48": self.n / 48.0,
            "cells": rows,
            "timings": {
                "wall_seconds": self.seconds,
                "gram_seconds": self.gram_seconds,
                "solve_seconds": self.solve_seconds,
            },
        }


def laplace_grid(
    options: LaplaceGridOptions, *, workers: int = 1, progress: Progress = None
) -> LaplaceGrid:
    """Fraction recovered vs epsilon and query multiple with Laplace noise (JASON (JSR-19-2F) fig. 5-7).

    JASON (JSR-19-2F) sec. 5.6 and App. B Listing 5: ``n = 4000`` bits, ``m = multiple * n``
    random 0/1 queries (multiples 1, 5, 10, 20; 80,000 queries at 20), each answer
    plus ``Lap(1/epsilon)`` (epsilon 0.01 to 1), bounded least squares, rounding.
    Each trial draws one secret and one stream of ``max(multiples) * n`` queries
    (smaller multiples use its prefixes), builds the Gram matrix once, and draws an
    independent noise stream per epsilon; all epsilons are solved together.

    Args:
        options: the experiment (:class:`LaplaceGridOptions`).
        workers: processes; the results do not depend on it.
        progress: ``None`` (silent) or a callable taking lines: trials done / total.
    """
    check_workers(workers)
    o = options
    eps = np.asarray(o.epsilons)
    specs = tuple(noise_draw(NoiseSpec(o.mechanism, epsilon=float(e))) for e in eps)
    start = time.perf_counter()
    tasks = [
        TrialTask(
            n=int(o.n),
            query_counts=o.query_counts(),
            noises=specs,
            family="random",
            solver=o.solver,
            nested=True,
            tol=o.tol,
            seed=s,
        )
        for s in trial_seeds(o.seed, o.trials)
    ]
    results: list[TrialResult] = run_tasks(run_trial, tasks, workers, progress)
    return LaplaceGrid(
        n=int(o.n),
        epsilons=eps,
        multiples=np.asarray(o.multiples),
        mechanism=o.mechanism,
        solver=o.solver,
        trials=o.trials,
        seed=o.seed,
        **trial_arrays(results, start),
    )
