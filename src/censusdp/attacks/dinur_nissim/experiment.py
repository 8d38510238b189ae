"""The Dinur-Nissim reconstruction laboratory (JASON (JSR-19-2F) secs. 4.2-4.5, 5.5-5.6, Apps. A-B).

A database is a secret vector ``d`` of ``n`` bits; a query is a subset ``q`` and its
exact answer is ``a_q = sum_{i in q} d_i`` (JASON (JSR-19-2F) eqs. (4-2), (4-3)). The attacker
asks ``m`` queries, receives (possibly noisy) answers ``b``, solves the bounded least
squares problem ``argmin ||Q x - b||^2, 0 <= x_i <= 1`` (eq. (4-4)) or Dinur and
Nissim's linear program, and rounds ``x`` to bits. The *fraction recovered* is the
share of bits equal to the secret; 1/2 is random guessing.

The functions here reproduce JASON's experiments:

* :func:`recovery_curve`: fraction recovered vs number of queries with deciles
  (fig. 4-1 noiseless, n = 1000; fig. 4-4 with Gaussian noise of variance
  ``sqrt(n) ln(n) / 2``; any query family, noise and solver).
* :func:`recovery_thresholds`: queries needed for full recovery vs ``n`` and its
  slope (figs. 4-2, 4-3: about ``n / 2``).
* :func:`sum_query_accuracy`: accuracy ``A = 1 - |S~ - S| / S`` of a Laplace-noised
  sum (fig. 5-6), with its exact expectation.
* :func:`laplace_grid`: fraction recovered vs epsilon and query multiple with
  Laplace noise, n = 4000 (fig. 5-7).
* :func:`information_predictions`: Appendix A's information-theoretic predictions.
* :func:`adaptive_pairs_attack`: Appendix A.1's disjoint-pairs scheme (~3n/4 queries).

All noise here is **experiment noise** drawn with NumPy from
``censusdp.privacy.randomness.experiment_generator`` (Laplace ``Lap(1/epsilon)``, normal, or
two-sided geometric as a difference of geometrics). It reproduces the report's
experiments; it is not release noise and must never be used to publish data (use
``censusdp.privacy.mechanisms`` for that). Trials use independent streams from
``SeedSequence(seed)``; results do not depend on the number of worker processes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from scipy.special import ndtr

from censusdp.attacks.dinur_nissim._bounded_ls import (
    gram_fista,
    lp_solve,
    lsq_linear_solve,
    round_bits,
)
from censusdp.attacks.dinur_nissim._engine import (
    NoiseDraw,
    TrialResult,
    TrialTask,
    run_tasks,
    run_trial,
)
from censusdp.attacks.dinur_nissim._query_families import QUERY_FAMILIES, max_queries, msequence
from censusdp.errors import CensusDPError
from censusdp.privacy.randomness import experiment_generator
from censusdp.progress import Progress

__all__ = [
    "JASON_FIG57_EPSILONS",
    "JASON_FIG57_MULTIPLES",
    "JASON_FIG56_EPSILONS",
    "JASON_FIG56_SIZES",
    "LaplaceGrid",
    "NoiseSpec",
    "PairsAttack",
    "QUERY_FAMILIES",
    "Reconstruction",
    "RecoveryCurve",
    "RecoveryThresholds",
    "SOLVERS",
    "SumAccuracy",
    "adaptive_pairs_attack",
    "expected_sum_accuracy",
    "information_predictions",
    "jason_gaussian_variance",
    "laplace_grid",
    "ls_gaussian_prediction",
    "msequence",
    "reconstruct",
    "recovery_curve",
    "recovery_thresholds",
    "sum_query_accuracy",
]

SOLVERS: tuple[str, ...] = ("fista", "lsq_linear", "lp")

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
#: Database sizes of JASON (JSR-19-2F) Appendix B, Listing 4 (fig. 5-6).
JASON_FIG56_SIZES: tuple[int, ...] = (100, 200, 500, 1000, 2000, 5000)
#: Epsilons of JASON (JSR-19-2F) Appendix B, Listing 4 (fig. 5-6).
JASON_FIG56_EPSILONS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.1, 0.11, 0.12, 0.13,
    0.14, 0.15, 0.16, 0.17, 0.18, 0.19, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
)  # fmt: skip

# ---------------------------------------------------------------------------------------
# Noise
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NoiseSpec:
    """Experiment noise added to every query answer (never release noise).

    Attributes:
        kind: ``"none"``, ``"gaussian"`` (given ``variance``), ``"laplace"`` or
            ``"geometric"`` (given ``epsilon``; each query has sensitivity 1).
        variance: variance of the Gaussian noise.
        epsilon: privacy-loss parameter of the Laplace ``Lap(1/epsilon)`` (JASON (JSR-19-2F)
            sec. 5.1.1) or two-sided geometric, ``P(k) = (alpha-1)/(alpha+1) alpha^-|k|``
            with ``alpha = exp(epsilon)`` (sec. 5.1.2), noise.
    """

    kind: Literal["none", "gaussian", "laplace", "geometric"] = "none"
    variance: float | None = None
    epsilon: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("none", "gaussian", "laplace", "geometric"):
            raise CensusDPError(
                f"noise kind must be none, gaussian, laplace or geometric; got {self.kind!r}"
            )
        if self.kind == "gaussian":
            if self.variance is None or not math.isfinite(self.variance) or self.variance < 0:
                raise CensusDPError(
                    f"gaussian noise needs a finite variance >= 0; got variance={self.variance}"
                )
        elif self.variance is not None:
            raise CensusDPError(
                f"variance applies only to gaussian noise; got variance={self.variance} for {self.kind}"
            )
        if self.kind in ("laplace", "geometric"):
            if self.epsilon is None or not math.isfinite(self.epsilon) or self.epsilon <= 0:
                raise CensusDPError(
                    f"{self.kind} noise needs a finite epsilon > 0; got epsilon={self.epsilon}"
                )
        elif self.epsilon is not None:
            raise CensusDPError(
                f"epsilon applies only to laplace or geometric noise; got epsilon={self.epsilon} for {self.kind}"
            )

    @classmethod
    def none(cls) -> NoiseSpec:
        """Exact answers."""
        return cls("none")

    @classmethod
    def gaussian(cls, variance: float) -> NoiseSpec:
        """Normal noise with mean 0 and the given variance."""
        return cls("gaussian", variance=float(variance))

    @classmethod
    def laplace(cls, epsilon: float) -> NoiseSpec:
        """Laplace noise ``Lap(1/epsilon)``, variance ``2/epsilon^2`` (JASON (JSR-19-2F) sec. 5.1.1)."""
        return cls("laplace", epsilon=float(epsilon))

    @classmethod
    def geometric(cls, epsilon: float) -> NoiseSpec:
        """Two-sided geometric noise with ``alpha = exp(epsilon)`` (JASON (JSR-19-2F) sec. 5.1.2)."""
        return cls("geometric", epsilon=float(epsilon))

    @property
    def noise_variance(self) -> float:
        """Per-query noise variance: 0, ``variance``, ``2/eps^2`` or ``2q/(1-q)^2`` with ``q = e^-eps``."""
        if self.kind == "none":
            return 0.0
        if self.kind == "gaussian":
            return float(self.variance)  # type: ignore[arg-type]
        eps = float(self.epsilon)  # type: ignore[arg-type]
        if self.kind == "laplace":
            return 2.0 / eps**2
        q = math.exp(-eps)
        return 2.0 * q / (1.0 - q) ** 2

    def label(self) -> str:
        """Short human-readable description."""
        if self.kind == "none":
            return "no noise"
        if self.kind == "gaussian":
            return f"Gaussian, variance {self.variance:g}"
        return f"{self.kind.capitalize()}, epsilon {self.epsilon:g}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description, with the implied per-query variance."""
        return {
            "kind": self.kind,
            "variance": self.variance,
            "epsilon": self.epsilon,
            "per_query_variance": self.noise_variance,
        }

    def _draw(self) -> NoiseDraw:
        return NoiseDraw(self.kind, float(self.variance or 0.0), float(self.epsilon or 0.0))


def jason_gaussian_variance(n: int, convention: Literal["text", "matlab"] = "text") -> float:
    """Gaussian noise variance of JASON's fig. 4-4 for an ``n``-bit database.

    ``text``: ``sqrt(n) ln(n) / 2``, as JASON (JSR-19-2F) sec. 4.4 states. ``matlab``: the code of
    Appendix B, Listings 1 and 3, passes ``eta = sqrt(n) / 2 * log(n)`` to ``normrnd``,
    whose second argument is the *standard deviation*, so the variance there is
    ``(sqrt(n) ln(n) / 2)^2``. The two differ (23.0 vs 530 at n = 100).
    """
    if n < 2:
        raise CensusDPError(f"n must be >= 2 for JASON's noise variance; got n={n}")
    eta = math.sqrt(n) * math.log(n) / 2.0
    if convention == "text":
        return eta
    if convention == "matlab":
        return eta * eta
    raise CensusDPError(f"convention must be 'text' or 'matlab'; got {convention!r}")


# ---------------------------------------------------------------------------------------
# Information-theoretic predictions (Appendix A)
# ---------------------------------------------------------------------------------------


def _info_noiseless(r: float, n: int) -> float:
    """Eq. (A-8): ``I(C_bar) = r/2 log2(pi e n / 8) + 1/2 log2(1 + r)`` bits from r random queries."""
    return 0.5 * r * math.log2(math.pi * math.e * n / 8.0) + 0.5 * math.log2(1.0 + r)


def _info_noisy(r: float, n: int, var: float) -> float:
    """Eq. (A-15), extended to ``r > n``: ``1/2 log2 det(I + C / sigma^2)``.

    ``C = W'W / 4`` has (within the approximation of eq. (A-7)) ``min(r, n) - 1``
    eigenvalues ``max(r, n) / 16`` and one ``max(r, n) (min(r, n) + 1) / 16``; for
    ``r <= n`` this is exactly eq. (A-15).
    """
    lo, hi = min(r, n), max(r, n)
    return 0.5 * (lo - 1.0) * math.log2(1.0 + hi / (16.0 * var)) + 0.5 * math.log2(
        1.0 + hi * (lo + 1.0) / (16.0 * var)
    )


def _smallest_r(info: Callable[[float], float], target: float) -> int:
    hi = 1
    while info(hi) < target:
        hi *= 2
        if hi > 1 << 62:
            raise CensusDPError("information never reaches n bits")
    lo = hi // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if info(mid) >= target:
            hi = mid
        else:
            lo = mid
    return hi


def information_predictions(
    n: int, noise_variance: float = 0.0, queries: int | None = None
) -> dict[str, Any]:
    """Appendix A's information-theoretic predictions for an ``n``-bit database.

    JASON (JSR-19-2F) sec. 4.5 and App. A: (1) noiseless, about ``2n / log2 n`` queries determine
    the database (A.6); (2) with noise variance ``sigma^2 < n/48`` no more than ``~n``
    queries are needed (A.8); (3) for ``sigma^2 >> n/16`` about ``16 sigma^2`` queries
    (sec. 4.5). Eq. (A-16) gives ``I_net ~ n r log2(e) / (16 sigma^2)``, so ``I_net >= n``
    needs ``r >= 16 sigma^2 ln 2`` (the appendix prints ``16 sigma^2 / ln 2``; both are
    reported). ``queries_needed_information`` solves ``I(r) >= n`` with eq. (A-8)
    (noiseless) or (A-15) (noisy; extended to ``r > n``). These are necessary
    information counts for *some* decoder, not the behaviour of least squares.

    Args:
        n: number of bits.
        noise_variance: per-query noise variance ``sigma_N^2`` (0 = noiseless).
        queries: if given, also report the information gathered by that many queries.

    Returns:
        a JSON-ready dict.
    """
    if n < 2:
        raise CensusDPError(f"n must be >= 2; got n={n}")
    if noise_variance < 0 or not math.isfinite(noise_variance):
        raise CensusDPError(f"noise_variance must be finite and >= 0; got {noise_variance}")
    out: dict[str, Any] = {
        "n": n,
        "noise_variance": noise_variance,
        "linear_algebra_queries": n,
        "adaptive_pairs_queries": 0.75 * n,
        "noiseless_min_queries_2n_over_log2n": 2.0 * n / math.log2(n),
        "noiseless_random_queries_A8": _smallest_r(lambda r: _info_noiseless(r, n), n),
        "small_noise_threshold_variance_n_over_48": n / 48.0,
        "large_noise_variance_n_over_16": n / 16.0,
    }
    if noise_variance > 0:
        var = noise_variance
        out["regime"] = (
            "small noise (sigma^2 < n/48): <= n queries suffice"
            if var < n / 48.0
            else ("large noise (sigma^2 >> n/16)" if var > n / 16.0 else "intermediate noise")
        )
        out["queries_needed_information"] = _smallest_r(lambda r: _info_noisy(r, n, var), n)
        out["queries_16_sigma2"] = 16.0 * var
        out["queries_16_sigma2_ln2_A16"] = 16.0 * var * math.log(2.0)
        out["queries_16_sigma2_over_ln2_as_printed"] = 16.0 * var / math.log(2.0)
    else:
        out["regime"] = "noiseless"
        out["queries_needed_information"] = out["noiseless_random_queries_A8"]
    if queries is not None:
        bits = (
            _info_noisy(queries, n, noise_variance)
            if noise_variance > 0
            else _info_noiseless(min(queries, n), n)
        )
        out["queries"] = queries
        out["information_bits"] = bits
        out["information_over_n"] = bits / n
    return out


def ls_gaussian_prediction(n: int, queries: int, noise_variance: float) -> float:
    """Predicted fraction recovered by *unconstrained* least squares then rounding.

    Our own large-``m`` approximation (not in the seeds), a reference for the noisy
    experiments: for ``m > n`` random 0/1 queries, ``x_hat = d + (Q'Q)^-1 Q'z`` and the
    mean of ``[(Q'Q)^-1]_ii`` is ``4 / (m - n)`` (Marchenko-Pastur, bulk ``m/4``), so a bit
    is wrong when its error exceeds 1/2: ``P(correct) ~ Phi(sqrt(m - n) / (4 sigma))``.
    The box constraint makes the real attack somewhat better when this is far below 1.
    """
    if queries <= n:
        return float("nan")
    if noise_variance <= 0:
        return 1.0
    return float(ndtr(math.sqrt(queries - n) / (4.0 * math.sqrt(noise_variance))))


# ---------------------------------------------------------------------------------------
# Single reconstruction
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reconstruction:
    """Result of one reconstruction.

    Attributes:
        relaxed: the solution ``x`` in ``[0, 1]^n`` before rounding.
        bits: ``x`` rounded to 0/1.
        residual_norm: ``||Q x - b||_2`` of the relaxed solution.
        converged: whether the solver met its stopping rule.
    """

    relaxed: np.ndarray
    bits: np.ndarray
    residual_norm: float
    converged: bool


def reconstruct(
    queries: np.ndarray,
    answers: np.ndarray,
    *,
    solver: str = "fista",
    tol: float = 1e-7,
    lp_objective: Literal["linf", "l1"] = "linf",
) -> Reconstruction:
    """Reconstruct bits from subset-sum answers (JASON (JSR-19-2F) eq. (4-4), then rounding).

    Args:
        queries: the ``m x n`` query matrix (0/1 rows, or any real weights).
        answers: the ``m`` (noisy) answers.
        solver: ``fista`` (Gram-matrix FISTA), ``lsq_linear`` (scipy default) or ``lp``
            (Dinur-Nissim LP, HiGHS).
        tol: FISTA stopping tolerance.
        lp_objective: ``linf`` (DN) or ``l1`` for the LP.
    """
    Q = np.asarray(queries, dtype=np.float64)
    b = np.asarray(answers, dtype=np.float64)
    if Q.ndim != 2 or b.ndim != 1 or b.shape[0] != Q.shape[0]:
        raise CensusDPError(
            f"queries must be m x n and answers length m; got {Q.shape} and {b.shape}"
        )
    if solver == "fista":
        res = gram_fista(Q.T @ Q, Q.T @ b, tol=tol)
    elif solver == "lsq_linear":
        res = lsq_linear_solve(Q, b)
    elif solver == "lp":
        res = lp_solve(Q, b, objective=lp_objective)
    else:
        raise CensusDPError(f"solver must be one of {SOLVERS}; got {solver!r}")
    x = res.x[:, 0]
    return Reconstruction(
        x, round_bits(x), float(np.linalg.norm(Q @ x - b)), bool(res.converged[0])
    )


# ---------------------------------------------------------------------------------------
# Experiments
# ---------------------------------------------------------------------------------------


def _check_common(n: int, trials: int, family: str, solver: str, workers: int) -> None:
    if not isinstance(n, int | np.integer) or n < 2:
        raise CensusDPError(f"n must be an integer >= 2; got {n!r}")
    if trials < 1:
        raise CensusDPError(f"trials must be >= 1; got {trials}")
    if family not in QUERY_FAMILIES:
        raise CensusDPError(f"query family must be one of {QUERY_FAMILIES}; got {family!r}")
    if solver not in SOLVERS:
        raise CensusDPError(f"solver must be one of {SOLVERS}; got {solver!r}")
    if workers < 1:
        raise CensusDPError(f"workers must be >= 1; got {workers}")


def _check_counts(
    counts: Sequence[int], family: str, n: int, matrix: np.ndarray | None
) -> tuple[int, ...]:
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


def _deciles(values: np.ndarray, axis: int = 0) -> dict[str, list[float]]:
    return {
        "mean": np.mean(values, axis=axis).tolist(),
        "min": np.min(values, axis=axis).tolist(),
        "p10": np.quantile(values, 0.10, axis=axis).tolist(),
        "p50": np.quantile(values, 0.50, axis=axis).tolist(),
        "p90": np.quantile(values, 0.90, axis=axis).tolist(),
        "max": np.max(values, axis=axis).tolist(),
    }


@dataclass(frozen=True, kw_only=True)
class _TrialArrays:
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


def _trial_arrays(
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


@dataclass(frozen=True)
class RecoveryCurve(_TrialArrays):
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
            "fraction_recovered": _deciles(self.fractions),
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


def _trial_seeds(seed: int, trials: int) -> list[np.random.SeedSequence]:
    return np.random.SeedSequence(seed).spawn(trials)


def recovery_curve(
    n: int,
    query_counts: Sequence[int],
    *,
    trials: int = 100,
    seed: int = 0,
    noise: NoiseSpec | None = None,
    family: str = "random",
    matrix: np.ndarray | None = None,
    solver: str = "fista",
    nested: bool = True,
    workers: int = 1,
    tol: float = 1e-7,
    lp_objective: Literal["linf", "l1"] = "linf",
    progress: Progress = None,
) -> RecoveryCurve:
    """Fraction of bits recovered vs number of queries (JASON (JSR-19-2F) figs. 4-1 and 4-4).

    Each trial draws a fresh secret ``d`` (i.i.d. fair bits) and query stream, adds
    ``noise`` to every answer, solves eq. (4-4) at every ``m`` in ``query_counts`` and
    rounds. With ``nested=True`` (default) a trial's ``m``-query set is the first ``m``
    rows of its largest set: every point has exactly the distribution of an independent
    experiment, the curves are smoother, and the Gram matrix is built once per trial.
    JASON's MATLAB draws a new matrix for every ``m`` (``nested=False``).

    Args:
        n: number of bits.
        query_counts: strictly increasing numbers of queries.
        trials: number of independent trials (JASON: 100).
        seed: root seed; trial ``t`` uses ``SeedSequence(seed).spawn(trials)[t]``.
        noise: noise on every answer (default none).
        family: query family (``random``, ``pairs``, ``msequence``, ``hadamard``,
            ``matrix``).
        matrix: the query matrix for family ``matrix``.
        solver: ``fista``, ``lsq_linear`` or ``lp``.
        nested: reuse query prefixes within a trial (see above).
        workers: processes (1 = in-process).
        tol: FISTA stopping tolerance.
        lp_objective: LP objective (``linf`` = Dinur-Nissim, ``l1``).
        progress: ``None`` (silent) or a callable taking lines: trials done / total.
    """
    noise = noise or NoiseSpec.none()
    _check_common(n, trials, family, solver, workers)
    counts = _check_counts(query_counts, family, n, matrix)
    start = time.perf_counter()
    tasks = [
        TrialTask(
            n=int(n),
            query_counts=counts,
            noises=(noise._draw(),),
            family=family,
            solver=solver,
            nested=nested,
            tol=tol,
            seed=s,
            matrix=matrix,
            lp_objective=lp_objective,
        )
        for s in _trial_seeds(seed, trials)
    ]
    results: list[TrialResult] = run_tasks(run_trial, tasks, workers, progress)
    return RecoveryCurve(
        n=int(n),
        query_counts=np.asarray(counts),
        noise=noise,
        family=family,
        solver=solver,
        trials=trials,
        seed=seed,
        nested=nested,
        **_trial_arrays(results, start, 0),
    )


# ---------------------------------------------------------------------------------------
# Queries for full recovery (figs. 4-2, 4-3)
# ---------------------------------------------------------------------------------------


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
    from censusdp.attacks.dinur_nissim._query_families import make_source

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
                (qm.T @ qm).astype(np.float64), qm.T.astype(np.float64) @ a[:m], tol=task.tol
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
            "queries_for_full_recovery": _deciles(self.thresholds, axis=1),
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
    ns: Sequence[int],
    *,
    trials: int = 20,
    seed: int = 0,
    family: str = "random",
    solver: str = "fista",
    max_multiple: float = 1.0,
    workers: int = 1,
    tol: float = 1e-7,
    progress: Progress = None,
) -> RecoveryThresholds:
    """Number of noiseless queries needed for full recovery vs ``n`` (JASON (JSR-19-2F) figs. 4-2, 4-3).

    For each ``n`` and trial, the smallest ``m`` at which bounded least squares on the
    first ``m`` queries recovers every bit (found by bisection; see
    :func:`_threshold_trial`); then a least-squares line through (n, mean threshold).
    JASON found a slope near 1/2.

    Args:
        ns: database sizes.
        trials: trials per size.
        seed: root seed.
        family: query family.
        solver: ``fista``, ``lsq_linear`` or ``lp``.
        max_multiple: largest ``m / n`` tried (thresholds above it are reported as
            ``max + 1``).
        workers: processes.
        tol: FISTA tolerance.
        progress: ``None`` (silent) or a callable taking lines: tasks done / total.
    """
    ns_t = tuple(int(n) for n in ns)
    if not ns_t:
        raise CensusDPError("ns must not be empty")
    for n in ns_t:
        _check_common(n, trials, family, solver, workers)
    if family == "matrix":
        raise CensusDPError(
            "recovery_thresholds draws its own queries; family 'matrix' is not supported"
        )
    if max_multiple <= 0:
        raise CensusDPError(f"max_multiple must be positive; got {max_multiple}")
    start = time.perf_counter()
    roots = np.random.SeedSequence(seed).spawn(len(ns_t))
    tasks = []
    for n, root in zip(ns_t, roots, strict=True):
        m_max = max(1, int(math.ceil(max_multiple * n)))
        limit = max_queries(family, n)
        if limit is not None:
            m_max = min(m_max, limit)
        tasks += [_ThresholdTask(n, m_max, family, solver, tol, s) for s in root.spawn(trials)]
    flat = run_tasks(_threshold_trial, tasks, workers, progress)
    thr = np.asarray(flat, dtype=float).reshape(len(ns_t), trials)
    ns_arr = np.asarray(ns_t)
    if len(ns_t) >= 2:
        slope, intercept = np.polyfit(ns_arr, thr.mean(axis=1), 1)
        slope_max = float(np.polyfit(ns_arr, thr.max(axis=1), 1)[0])
    else:
        slope, intercept, slope_max = float("nan"), float("nan"), float("nan")
    return RecoveryThresholds(
        ns=ns_arr,
        thresholds=thr,
        family=family,
        solver=solver,
        trials=trials,
        seed=seed,
        slope_mean=float(slope),
        intercept_mean=float(intercept),
        slope_max=slope_max,
        seconds=time.perf_counter() - start,
    )


# ---------------------------------------------------------------------------------------
# Laplace grid (fig. 5-7)
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LaplaceGrid(_TrialArrays):
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
                        "information_over_n_A15": _info_noisy(m, self.n, var) / self.n,
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
    n: int = 4000,
    epsilons: Sequence[float] = JASON_FIG57_EPSILONS,
    multiples: Sequence[float] = JASON_FIG57_MULTIPLES,
    *,
    trials: int = 10,
    seed: int = 0,
    mechanism: Literal["laplace", "geometric"] = "laplace",
    solver: str = "fista",
    workers: int = 1,
    tol: float = 1e-7,
    progress: Progress = None,
) -> LaplaceGrid:
    """Fraction recovered vs epsilon and query multiple with Laplace noise (JASON (JSR-19-2F) fig. 5-7).

    JASON (JSR-19-2F) sec. 5.6 and App. B Listing 5: ``n = 4000`` bits, ``m = multiple * n``
    random 0/1 queries (multiples 1, 5, 10, 20; 80,000 queries at 20), each answer
    plus ``Lap(1/epsilon)`` (epsilon 0.01 to 1), bounded least squares, rounding.
    Each trial draws one secret and one stream of ``max(multiples) * n`` queries
    (smaller multiples use its prefixes), builds the Gram matrix once, and draws an
    independent noise stream per epsilon; all epsilons are solved together.

    Args:
        n: number of bits.
        epsilons: privacy-loss parameters.
        multiples: query multiples.
        trials: trials (JASON: 10).
        seed: root seed.
        mechanism: ``laplace`` or ``geometric`` (two-sided geometric) noise.
        solver: ``fista`` (the others hold the full matrix; small grids only).
        workers: processes.
        tol: FISTA tolerance.
        progress: ``None`` (silent) or a callable taking lines: trials done / total.
    """
    _check_common(n, trials, "random", solver, workers)
    if mechanism not in ("laplace", "geometric"):
        raise CensusDPError(f"mechanism must be 'laplace' or 'geometric'; got {mechanism!r}")
    eps = np.asarray([float(e) for e in epsilons])
    mults = np.asarray([float(x) for x in multiples])
    if eps.size == 0 or np.any(eps <= 0) or not np.all(np.isfinite(eps)):
        raise CensusDPError(f"epsilons must be finite and positive; got {eps.tolist()}")
    counts = _check_counts([int(round(x * n)) for x in mults], "random", n, None)
    specs = tuple(NoiseSpec(mechanism, epsilon=float(e))._draw() for e in eps)
    start = time.perf_counter()
    tasks = [
        TrialTask(
            n=int(n),
            query_counts=counts,
            noises=specs,
            family="random",
            solver=solver,
            nested=True,
            tol=tol,
            seed=s,
        )
        for s in _trial_seeds(seed, trials)
    ]
    results: list[TrialResult] = run_tasks(run_trial, tasks, workers, progress)
    return LaplaceGrid(
        n=int(n),
        epsilons=eps,
        multiples=mults,
        mechanism=mechanism,
        solver=solver,
        trials=trials,
        seed=seed,
        **_trial_arrays(results, start),
    )


# ---------------------------------------------------------------------------------------
# Sum-query accuracy (fig. 5-6)
# ---------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------
# Appendix A.1: adaptive disjoint pairs
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PairsAttack:
    """Result of :func:`adaptive_pairs_attack`."""

    bits: np.ndarray
    queries: int


def adaptive_pairs_attack(
    secret: np.ndarray, rng: np.random.Generator | None = None
) -> PairsAttack:
    """JASON (JSR-19-2F) App. A.1's adaptive scheme on a noiseless database.

    Query ``n/2`` disjoint pairs: a sum of 0 or 2 fixes both bits; for each ambiguous
    pair (sum 1, about ``n/4`` of them) query its first bit. About ``3n/4`` queries in
    all. An odd last bit is queried alone. The answers are computed from ``secret``
    (the oracle), so the attacker sees only sums.

    Args:
        secret: the 0/1 database.
        rng: if given, pairs are formed after a random permutation.
    """
    d = np.asarray(secret).astype(np.int64)
    n = d.size
    order = rng.permutation(n) if rng is not None else np.arange(n)
    bits = np.zeros(n, dtype=np.int8)
    queries = 0
    half = n // 2
    first, second = order[0 : 2 * half : 2], order[1 : 2 * half : 2]
    sums = d[first] + d[second]
    queries += half
    bits[first[sums == 2]] = 1
    bits[second[sums == 2]] = 1
    amb = sums == 1
    probe = d[first[amb]]
    queries += int(amb.sum())
    bits[first[amb]] = probe
    bits[second[amb]] = 1 - probe
    if n % 2:
        bits[order[-1]] = d[order[-1]]
        queries += 1
    return PairsAttack(bits, queries)
