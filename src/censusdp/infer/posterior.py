"""Mechanism-aware Bayesian inference for a proportion from noisy counts.

The model (Gong 2022, *Transparent Privacy is Principled Privacy*, sec. 4: the
marginal likelihood of the confidential quantity integrates the public privacy
mechanism over the unobserved confidential data, and the posterior follows from it):

    theta ~ Beta(a, b)
    k_i | theta ~ Binomial(n_i, theta)          (true count of the subgroup, i = 1..m)
    X_i | k_i   ~ k_i + Z_i,  Z_i ~ f           (the released noisy count)

so ``p(theta | X) prop. to Beta(theta; a, b) prod_i sum_{k=0}^{n_i} f(X_i - k)
C(n_i, k) theta^k (1 - theta)^(n_i - k)``. Collecting powers of ``theta`` by the total
``K = k_1 + ... + k_m`` gives the exact posterior as a finite mixture of Betas,

    p(theta | X) = sum_{K=0}^{N} w_K Beta(theta; a + K, b + N - K),
    w_K prop. to W(K) B(a + K, b + N - K),
    W = conv_i [ f(X_i - k) C(n_i, k) ]_{k=0..n_i},          N = sum_i n_i,

(for one count ``w_k`` is ``f(X - k)`` times the Beta-Binomial prior predictive of
``k``, and it is also the posterior of the true count). Its CDF is the same mixture of
regularised incomplete Beta functions, inverted by bracketing root-finding for the
equal-tailed interval. Nothing is approximated beyond dropping mixture components
below ``1e-25`` of the largest weight, and (one count) true counts whose likelihood is
below ``e^-800`` of the largest after allowing for the prior (:func:`_window`).

The *naive* analysis ignores the noise: it treats ``sum X_i`` (clipped to
``[0, N]``) as the true count and reports ``Beta(a + X, b + N - X)``.

Two samplers cover models where the exact sum is impractical, and agree with the exact
answer where both run (``tests/infer/test_posterior.py``):

* :func:`abc_draws`: rejection ABC with the mechanism as the kernel (Gong 2022 sec. 4,
  "approximate computation on exact data is exact computation on approximate data"):
  draw ``theta`` from the prior and true counts from the model, then either simulate
  the mechanism and accept when it reproduces the released values exactly (discrete
  laws), or accept with probability ``prod_i f(X_i - k_i) / f(0)`` (any law; the same
  acceptance in expectation, fewer wasted draws). Accepted ``theta`` are exact
  posterior draws.
* :func:`gibbs_draws`: data-augmentation Gibbs sampling, alternating
  ``k_i | theta, X_i`` (a discrete law on ``0..n_i`` prop. to
  ``Binomial(k; n_i, theta) f(X_i - k)``) and ``theta | k ~ Beta(a + K, b + N - K)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import optimize, special

from censusdp.errors import CensusDPError
from censusdp.infer._noise import NoiseLaw
from censusdp.privacy.randomness import experiment_generator

__all__ = [
    "POSTERIOR_METHODS",
    "BetaMixture",
    "BetaPrior",
    "NoisyCount",
    "abc_draws",
    "exact_posterior",
    "gibbs_draws",
    "infer_proportion",
    "naive_posterior",
]

POSTERIOR_METHODS: tuple[str, ...] = ("exact", "abc", "mcmc")

_TRIM = 1e-25
"""Mixture components with weight below this fraction of the largest are dropped."""


@dataclass(frozen=True)
class BetaPrior:
    """A ``Beta(a, b)`` prior on the proportion ``theta`` (``a = b = 1``: uniform)."""

    a: float = 1.0
    b: float = 1.0

    def __post_init__(self) -> None:
        for name, v in (("prior a", self.a), ("prior b", self.b)):
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise CensusDPError(f"{name} is {v!r}; it must be a finite number > 0")


@dataclass(frozen=True)
class NoisyCount:
    """One released count ``X`` of a subgroup of ``n`` people (``n`` is known exactly)."""

    n: int
    noisy: float

    def __post_init__(self) -> None:
        if isinstance(self.n, bool) or not isinstance(self.n, int | np.integer) or self.n < 1:
            raise CensusDPError(f"n is {self.n!r}; it must be an integer >= 1")
        if not math.isfinite(float(self.noisy)):
            raise CensusDPError(f"noisy count is {self.noisy!r}; it must be a finite number")


def _check(counts: Sequence[NoisyCount], law: NoiseLaw) -> None:
    if not counts:
        raise CensusDPError("give at least one noisy count")
    if law.discrete:
        for c in counts:
            if float(c.noisy) != math.floor(float(c.noisy)):
                raise CensusDPError(
                    f"noisy count is {c.noisy!r}; the {law.law} law releases integers"
                )


@dataclass(frozen=True, eq=False)
class BetaMixture:
    """``sum_j w_j Beta(a + K_j, b + N - K_j)``: the exact posterior of ``theta``.

    Attributes:
        a, b: the prior.
        n_total: ``N``, the number of people in all subgroups.
        k: the totals ``K_j`` with non-negligible weight.
        w: their weights (sum 1); also the posterior of the true total count.
    """

    a: float
    b: float
    n_total: int
    k: np.ndarray
    w: np.ndarray
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def alpha(self) -> np.ndarray:
        """First Beta parameter of each component."""
        return self.a + self.k

    @property
    def beta(self) -> np.ndarray:
        """Second Beta parameter of each component."""
        return self.b + self.n_total - self.k

    def mean(self) -> float:
        """``E[theta | X] = sum_j w_j (a + K_j) / (a + b + N)``."""
        return float(np.dot(self.w, self.alpha) / (self.a + self.b + self.n_total))

    def sd(self) -> float:
        """Posterior standard deviation from ``E[theta^2] = sum_j w_j a_j (a_j + 1) / (s (s + 1))``."""
        s = self.a + self.b + self.n_total
        m2 = float(np.dot(self.w, self.alpha * (self.alpha + 1.0)) / (s * (s + 1.0)))
        return math.sqrt(max(m2 - self.mean() ** 2, 0.0))

    def cdf(self, theta: float | np.ndarray) -> np.ndarray:
        """``P(theta' <= theta | X) = sum_j w_j I_theta(a + K_j, b + N - K_j)``."""
        t = np.atleast_1d(np.asarray(theta, dtype=np.float64))
        vals = special.betainc(self.alpha[None, :], self.beta[None, :], t[:, None])
        return vals @ self.w

    def pdf(self, theta: float | np.ndarray) -> np.ndarray:
        """The posterior density (log-space per component, then mixed)."""
        t = np.clip(np.atleast_1d(np.asarray(theta, dtype=np.float64)), 1e-300, 1 - 1e-16)
        al, be = self.alpha[None, :], self.beta[None, :]
        logc = (
            (al - 1) * np.log(t[:, None])
            + (be - 1) * np.log1p(-t[:, None])
            - special.betaln(al, be)
        )
        return np.exp(logc) @ self.w

    def quantile(self, p: float) -> float:
        """The ``p`` quantile, by Brent's method on the exact CDF.

        The bracket is ``[min_j q_j, max_j q_j]`` over the component quantiles ``q_j``:
        every component CDF is ``<= p`` at the lower end and ``>= p`` at the upper end,
        hence so is the mixture.
        """
        if not 0.0 < p < 1.0:
            raise CensusDPError(f"quantile level is {p}; it must be in (0, 1)")
        qs = special.betaincinv(self.alpha, self.beta, p)
        lo, hi = float(qs.min()), float(qs.max())
        if hi - lo < 1e-15:
            return 0.5 * (lo + hi)

        def f(t: float) -> float:
            return float(self.cdf(t)[0]) - p

        # at an end where the CDF is p up to rounding (one dominant component), that end
        # is the quantile
        if f(hi) <= 0.0:
            return hi
        if f(lo) >= 0.0:
            return lo
        return float(optimize.brentq(f, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps))

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """The equal-tailed ``level`` credible interval of ``theta``."""
        tail = (1.0 - level) / 2.0
        return self.quantile(tail), self.quantile(1.0 - tail)

    def count_summary(self, level: float = 0.95) -> dict[str, Any]:
        """Posterior of the true total count ``K``: mean, mode and equal-tailed interval."""
        cdf = np.cumsum(self.w)
        tail = (1.0 - level) / 2.0
        lo = int(self.k[min(int(np.searchsorted(cdf, tail, side="left")), self.k.size - 1)])
        hi = int(self.k[min(int(np.searchsorted(cdf, 1.0 - tail, side="left")), self.k.size - 1)])
        return {
            "mean": float(np.dot(self.w, self.k)),
            "mode": int(self.k[int(np.argmax(self.w))]),
            f"ci{round(level * 100)}": [lo, hi],
        }


def _log_choose(n: int, k: np.ndarray) -> np.ndarray:
    return special.gammaln(n + 1.0) - special.gammaln(k + 1.0) - special.gammaln(n - k + 1.0)


def _window(c: NoisyCount, law: NoiseLaw, prior: BetaPrior) -> tuple[int, int]:
    """True counts ``lo..hi`` that can carry posterior weight (one count).

    ``w_k`` is ``f(X - k)`` times the Beta-Binomial prior predictive ``BB(k)``, and
    ``max BB / min BB <= (n + 1)^(a + b + 1) / B(a, b)`` up to a constant (``BB`` is a
    Binomial pmf averaged over the prior; the prior density is at least
    ``(1/(n+1))^(a + b - 2) / B(a, b)`` where the Binomial pmf sits). Outside the window
    the likelihood is below ``e^-slack`` of its largest value on ``0..n``, with ``slack``
    800 nats above that bound, so dropped weights are below ``e^-800`` of the largest.
    """
    n, x, p = int(c.n), float(c.noisy), float(law.parameter)
    slack = (
        850.0
        + (prior.a + prior.b + 1.0) * math.log(n + 2.0)
        + abs(float(special.betaln(prior.a, prior.b)))
    )
    d0 = abs(x - min(max(x, 0.0), float(n)))  # distance to the likeliest real k in [0, n]
    reach = (
        d0 + slack * p
        if law.law in ("laplace", "geometric")
        else math.sqrt(d0 * d0 + 2.0 * slack * p)
    )
    return max(0, math.floor(x - reach)), min(n, math.ceil(x + reach))


def _total_log_weights(
    counts: Sequence[NoisyCount], law: NoiseLaw, tilt: float, k0: int, k1: int
) -> np.ndarray:
    """``log W(K)`` for ``K = k0..k1`` (``-inf`` where the product underflows).

    For one count ``k0..k1`` is its window (:func:`_window`); for several it is
    ``0..N``. Each factor ``f(X_i - k) C(n_i, k)`` is multiplied by ``e^{tilt k}``
    before the convolution (undone after: the total exponent is ``tilt K``), so that
    the vectors convolved are concentrated where the posterior is and no relevant entry
    underflows; the convolution itself sums positive terms directly (no FFT), so every
    entry keeps its relative precision.
    """
    if len(counts) == 1:
        c = counts[0]
        k = np.arange(k0, k1 + 1, dtype=np.float64)
        return law.log_kernel(float(c.noisy) - k) + _log_choose(c.n, k)
    acc = np.ones(1)
    offset = 0.0
    for c in counts:
        k = np.arange(c.n + 1, dtype=np.float64)
        v = law.log_kernel(float(c.noisy) - k) + _log_choose(c.n, k) + tilt * k
        m = float(v.max())
        acc = np.convolve(acc, np.exp(v - m))
        offset += m
        top = float(acc.max())
        acc /= top
        offset += math.log(top)
    big_k = np.arange(acc.size, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.log(acc) + offset - tilt * big_k


def _mixture(
    counts: Sequence[NoisyCount], law: NoiseLaw, prior: BetaPrior, tilt: float
) -> BetaMixture:
    n_total = int(sum(int(c.n) for c in counts))
    k0, k1 = _window(counts[0], law, prior) if len(counts) == 1 else (0, n_total)
    logw = _total_log_weights(counts, law, tilt, k0, k1)
    big_k = np.arange(k0, k1 + 1, dtype=np.float64)
    logw = logw + special.betaln(prior.a + big_k, prior.b + n_total - big_k)
    top = float(np.max(logw))
    keep = logw >= top + math.log(_TRIM)
    w = np.exp(logw[keep] - top)
    return BetaMixture(prior.a, prior.b, n_total, big_k[keep], w / w.sum())


def exact_posterior(
    counts: Sequence[NoisyCount] | NoisyCount, law: NoiseLaw, prior: BetaPrior | None = None
) -> BetaMixture:
    """The exact posterior of ``theta`` as a Beta mixture (module docstring).

    For several counts sharing ``theta`` the per-count factors are convolved after an
    exponential tilt at the posterior mean (two passes: first at the naive mean).

    Raises:
        CensusDPError: for no counts, or a non-integer released value of a discrete law.
    """
    counts = [counts] if isinstance(counts, NoisyCount) else list(counts)
    prior = prior or BetaPrior()
    _check(counts, law)
    if len(counts) == 1:
        return _mixture(counts, law, prior, 0.0)
    n_total = sum(int(c.n) for c in counts)
    guess = float(np.clip(sum(float(c.noisy) for c in counts), 0.5, n_total - 0.5)) / n_total
    mix = _mixture(counts, law, prior, math.log(guess / (1.0 - guess)))
    m = float(np.clip(mix.mean(), 0.5 / n_total, 1.0 - 0.5 / n_total))
    return _mixture(counts, law, prior, math.log(m / (1.0 - m)))


def naive_posterior(
    counts: Sequence[NoisyCount] | NoisyCount, prior: BetaPrior | None = None
) -> dict[str, Any]:
    """The analysis that ignores the noise: ``Beta(a + X, b + N - X)``, ``X`` clipped to ``[0, N]``."""
    counts = [counts] if isinstance(counts, NoisyCount) else list(counts)
    prior = prior or BetaPrior()
    if not counts:
        raise CensusDPError("give at least one noisy count")
    n_total = sum(int(c.n) for c in counts)
    x = sum(float(c.noisy) for c in counts)
    xc = min(max(x, 0.0), float(n_total))
    al, be = prior.a + xc, prior.b + n_total - xc
    mean = al / (al + be)
    sd = math.sqrt(al * be / ((al + be) ** 2 * (al + be + 1.0)))
    lo, hi = special.betaincinv(al, be, [0.025, 0.975])
    return {
        "description": "treats the noisy count as the true count: Beta(a + X, b + n - X)",
        "mean": mean,
        "sd": sd,
        "ci95": [float(lo), float(hi)],
        "clipped": bool(xc != x),
    }


def _model_draws(
    counts: Sequence[NoisyCount], prior: BetaPrior, size: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    theta = rng.beta(prior.a, prior.b, size)
    ks = np.stack([rng.binomial(int(c.n), theta) for c in counts], axis=1)
    return theta, ks


def abc_draws(
    counts: Sequence[NoisyCount] | NoisyCount,
    law: NoiseLaw,
    prior: BetaPrior | None = None,
    *,
    draws: int = 10_000,
    seed: int | None = 0,
    simulate: bool = False,
    batch: int = 1 << 16,
    max_proposals: int = 200_000_000,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Exact posterior draws of ``theta`` by rejection ABC with the mechanism as kernel.

    Proposals come from the model (``theta`` from the prior, true counts from the
    Binomial). With ``simulate=True`` (discrete laws only) the mechanism is simulated,
    ``X'_i = k_i + Z'_i``, and a proposal is accepted when ``X' = X`` exactly; with
    ``simulate=False`` it is accepted with probability ``prod_i f(X_i - k_i) / f(0)``,
    the conditional probability of the same event up to the constant ``f(0)^m``.
    Either way the accepted ``theta`` follow ``p(theta | X)`` exactly (Gong 2022 sec. 4).

    Returns:
        ``(theta draws, info)`` with the proposals made and the acceptance rate.

    Raises:
        CensusDPError: if fewer than ``draws`` proposals are accepted within
            ``max_proposals`` (use the exact method or MCMC), or ``simulate`` is asked
            for a continuous law.
    """
    counts = [counts] if isinstance(counts, NoisyCount) else list(counts)
    prior = prior or BetaPrior()
    _check(counts, law)
    if draws < 1:
        raise CensusDPError(f"draws is {draws}; it must be >= 1")
    if simulate and not law.discrete:
        raise CensusDPError(
            f"exact-match ABC needs a discrete law; {law.law} is continuous (use the kernel)"
        )
    rng = experiment_generator(seed)
    x = np.array([float(c.noisy) for c in counts])
    out: list[np.ndarray] = []
    got = proposals = 0
    while got < draws:
        if proposals >= max_proposals:
            raise CensusDPError(
                f"ABC accepted {got} of {proposals:,} proposals (rate {got / proposals:.2e}); "
                f"{draws} draws need more: use the exact method or MCMC"
            )
        theta, ks = _model_draws(counts, prior, batch, rng)
        if simulate:
            sim = ks + np.stack([law.sample(batch, rng) for _ in counts], axis=1)
            ok = np.all(sim == x[None, :], axis=1)
        else:
            log_acc = law.log_kernel(x[None, :] - ks).sum(axis=1)
            ok = np.log(rng.random(batch)) < log_acc
        out.append(theta[ok])
        got += int(ok.sum())
        proposals += batch
    sample = np.concatenate(out)[:draws]
    info = {
        "method": "abc",
        "acceptance": "exact match of the simulated mechanism" if simulate else "mechanism kernel",
        "proposals": proposals,
        "acceptance_rate": got / proposals,
        "seed": seed,
        "draws": draws,
    }
    return sample, info


def gibbs_draws(
    counts: Sequence[NoisyCount] | NoisyCount,
    law: NoiseLaw,
    prior: BetaPrior | None = None,
    *,
    draws: int = 10_000,
    seed: int | None = 0,
    burn_in: int = 500,
    thin: int = 5,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Posterior draws of ``theta`` by data-augmentation Gibbs sampling.

    Alternates ``k_i | theta, X_i`` with ``P(k) prop. to C(n_i, k) theta^k
    (1 - theta)^(n_i - k) f(X_i - k)`` on ``0..n_i`` (drawn exactly by the Gumbel-max
    trick) and ``theta | k ~ Beta(a + K, b + N - K)``. The chain starts at the naive
    estimate; ``burn_in`` sweeps are dropped and every ``thin``-th sweep is kept.

    Returns:
        ``(theta draws, info)``.
    """
    counts = [counts] if isinstance(counts, NoisyCount) else list(counts)
    prior = prior or BetaPrior()
    _check(counts, law)
    if draws < 1 or burn_in < 0 or thin < 1:
        raise CensusDPError(
            f"draws={draws}, burn_in={burn_in}, thin={thin}; need draws >= 1, burn_in >= 0, thin >= 1"
        )
    rng = experiment_generator(seed)
    n_total = sum(int(c.n) for c in counts)
    ks = [np.arange(c.n + 1, dtype=np.float64) for c in counts]
    base = [
        law.log_kernel(float(c.noisy) - k) + _log_choose(c.n, k)
        for c, k in zip(counts, ks, strict=True)
    ]
    theta = float(np.clip(sum(float(c.noisy) for c in counts) / n_total, 0.01, 0.99))
    out = np.empty(draws)
    sweeps = burn_in + draws * thin
    kept = 0
    for s in range(sweeps):
        lt, l1t = math.log(theta), math.log1p(-theta)
        total = 0
        for c, k, b0 in zip(counts, ks, base, strict=True):
            logp = b0 + k * lt + (c.n - k) * l1t
            total += int(np.argmax(logp + rng.gumbel(size=logp.size)))
        theta = float(rng.beta(prior.a + total, prior.b + n_total - total))
        theta = min(max(theta, 1e-300), 1.0 - 1e-16)
        if s >= burn_in and (s - burn_in) % thin == thin - 1:
            out[kept] = theta
            kept += 1
    info = {
        "method": "mcmc",
        "sampler": "data-augmentation Gibbs",
        "burn_in": burn_in,
        "thin": thin,
        "seed": seed,
        "draws": draws,
    }
    return out, info


def _draw_summary(sample: np.ndarray) -> dict[str, Any]:
    lo, med, hi = np.quantile(sample, [0.025, 0.5, 0.975])
    return {
        "mean": float(sample.mean()),
        "sd": float(sample.std(ddof=1)) if sample.size > 1 else 0.0,
        "median": float(med),
        "ci95": [float(lo), float(hi)],
        "mc_standard_error_of_mean": float(sample.std(ddof=1) / math.sqrt(sample.size))
        if sample.size > 1
        else 0.0,
    }


def infer_proportion(
    counts: Sequence[NoisyCount] | NoisyCount,
    law: NoiseLaw,
    prior: BetaPrior | None = None,
    *,
    method: str = "exact",
    draws: int = 20_000,
    seed: int | None = 0,
) -> dict[str, Any]:
    """Posterior summary of ``theta`` and the naive analysis, as a JSON-ready dict.

    Args:
        counts: the released counts (sharing one ``theta``).
        law: their noise law.
        prior: the Beta prior (uniform by default).
        method: ``"exact"`` (Beta mixture), ``"abc"`` or ``"mcmc"`` (the samplers).
        draws: posterior draws for the samplers.
        seed: the samplers' seed (written in the output).

    Returns:
        ``mean``, ``sd``, ``median``, ``ci95`` of ``theta``, the true count's posterior
        (exact method), ``naive``, and the model (counts, prior, every noise parameter).
    """
    counts = [counts] if isinstance(counts, NoisyCount) else list(counts)
    prior = prior or BetaPrior()
    if method not in POSTERIOR_METHODS:
        raise CensusDPError(f"method is {method!r}; it must be one of {list(POSTERIOR_METHODS)}")
    _check(counts, law)
    out: dict[str, Any] = {
        "parameter": "theta, the proportion of the n people in the subgroup",
        "method": method,
    }
    if len(counts) == 1:
        out["n"] = int(counts[0].n)
        out["noisy"] = float(counts[0].noisy)
    if method == "exact":
        mix = exact_posterior(counts, law, prior)
        lo, hi = mix.interval(0.95)
        out.update(
            {
                "mean": mix.mean(),
                "sd": mix.sd(),
                "median": mix.quantile(0.5),
                "ci95": [lo, hi],
                "true_count": mix.count_summary(0.95),
                "mixture_components": int(mix.k.size),
            }
        )
    else:
        if method == "abc":
            sample, info = abc_draws(counts, law, prior, draws=draws, seed=seed)
        else:
            sample, info = gibbs_draws(counts, law, prior, draws=draws, seed=seed)
        out.update(_draw_summary(sample))
        out["sampler"] = info
        out["seed"] = seed
    out["naive"] = naive_posterior(counts, prior)
    out["model"] = {
        "counts": [{"n": int(c.n), "noisy": float(c.noisy)} for c in counts],
        "prior": {"a": prior.a, "b": prior.b},
        "noise": law.describe(),
        "likelihood": "sum over true counts k = 0..n of f(X - k) x Beta-Binomial(k; n, a, b)",
    }
    return out
