"""Disclosure risk with hierarchical information (Kazan & Reiter (2022) sec. 3.2, eqs. 20-35).

Notation (levels ``l = 1..h``, level 1 the lowest, e.g. block then block group):

* ``X_1`` is the count with characteristics ``c`` in the target's group; prior
  ``P[X_1 = k + 1] = p``, ``P[X_1 = k] = 1 - p`` (eq. 9).
* ``X_{l+1} = X_l + Y_l``: ``Y_l >= 0`` is the count in the ``d_l`` *other* level-``l``
  groups inside the target's level-``(l+1)`` group, with the flat prior on
  ``{0, 1, ...}`` of the paper (``X_2 | X_1`` uniform on ``{X_1, X_1 + 1, ...}``).
* Released: ``X_l* = X_l + DG(rho_l)`` and ``Y_l* = Y_l + (sum of d_l DG(rho_l))``
  (eq. 20). The intruder either uses the approximation of eq. 21,
  ``sum of d DG(1/(2 rho)) ~ DG(d/(2 rho))`` (``sum_noise="approximate"``, the paper's
  choice), or the exact pmf of the sum, computed by convolution (``"exact"``).

The posterior is (eq. 25)
``P[x_1, .., x_h | D] ∝ P[x_1] prod_l f_l(x_l* - x_l) prod_l g_l(y_l* - (x_{l+1} - x_l))
1[x_1 <= x_2 <= ... <= x_h]``.

Three ways to compute it are provided and cross-checked in the tests:

* :func:`exact_posterior` -- a direct numerical posterior: forward-backward sums over
  the bounded support of every ``X_l``, for one data set and any ``h``;
* :func:`two_level_log_odds` -- the same for ``h = 2``, vectorized over many data sets
  (the sum over ``X_2`` is restricted to a window around the mode of eq. 35 that
  holds all but ``exp(-45)`` of it); :func:`two_level_risk` sums it over the exact
  distribution of the data to give the correct-decision probability, the marginal
  posterior and ``R`` without sampling;
* :func:`gibbs_sampler` -- the Gibbs sampler of eqs. 26-35 (and its ``h``-level
  generalisation), vectorized over many data sets at once.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

import numpy as np
from scipy.special import expit, logsumexp
from scipy.stats import binom

from censusdp.errors import CensusDPError
from censusdp.privacy.mechanisms import DiscreteGaussian
from censusdp.privacy.parameters import as_fraction
from censusdp.privacy.randomness import experiment_generator
from censusdp.risk._noise import (
    NoiseModel,
    check_probability,
    check_tolerance,
    sum_of_discrete_gaussians,
)

__all__ = [
    "DecisionRule",
    "GibbsResult",
    "HierarchicalModel",
    "TwoLevelRisk",
    "approximation_error",
    "decision_probability",
    "exact_posterior",
    "gibbs_sampler",
    "saturation_others",
    "simulate_data",
    "two_level_log_odds",
    "two_level_risk",
]

SumNoise = Literal["approximate", "exact"]

# The window over Y_1 in the vectorized two-level posterior holds all but exp(-_WIN)
# of the (log-concave) summand's mass relative to its peak.
_WIN = 45.0


@dataclass(frozen=True)
class HierarchicalModel:
    """The intruder's model for ``h`` nested levels (Kazan & Reiter (2022) sec. 3.2).

    Attributes:
        rhos: ``(rho_1, ..., rho_h)``: zCDP parameter of the count of cell ``c`` at each
            level, lowest first (block, block group, ...). Exact fractions.
        siblings: ``(d_1, ..., d_{h-1})``: the number of *other* level-``l`` groups in the
            target's level-``(l+1)`` group (``d = 27`` in the paper's example).
        prior: ``p = P[X_1 = k + 1]`` (eq. 9).
        known: ``k``, the count of other people in the target's group with ``c``.
        sum_noise: ``"approximate"`` (eq. 21) or ``"exact"`` (convolution) for the noise
            of each ``Y_l*``.
    """

    rhos: tuple[Fraction, ...]
    siblings: tuple[int, ...]
    prior: float
    known: int = 0
    sum_noise: SumNoise = "approximate"
    _cache: dict[str, object] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        rhos = tuple(as_fraction(r, f"rhos[{i}]") for i, r in enumerate(self.rhos))
        for i, r in enumerate(rhos):
            if r <= 0:
                raise CensusDPError(f"rhos[{i}] is {r}; every rho must be positive")
        if len(rhos) < 2:
            raise CensusDPError(
                f"rhos has {len(rhos)} level(s); a hierarchical model needs at least 2 "
                "(use censusdp.risk.one_level for one level)"
            )
        sib = tuple(self.siblings)
        if len(sib) != len(rhos) - 1:
            raise CensusDPError(
                f"siblings has {len(sib)} entries; it needs one per level above the lowest "
                f"({len(rhos) - 1})"
            )
        for i, d in enumerate(sib):
            if isinstance(d, bool) or int(d) != d or int(d) < 0:
                raise CensusDPError(f"siblings[{i}] is {d!r}; it must be an integer >= 0")
        if self.sum_noise not in ("approximate", "exact"):
            raise CensusDPError(
                f"sum_noise is {self.sum_noise!r}; it must be 'approximate' or 'exact'"
            )
        object.__setattr__(self, "rhos", rhos)
        object.__setattr__(self, "siblings", tuple(int(d) for d in sib))
        object.__setattr__(self, "prior", check_probability(self.prior, "prior"))
        object.__setattr__(self, "known", int(self.known))

    @classmethod
    def two_level(
        cls,
        rho1: float | Fraction | str,
        rho2: float | Fraction | str,
        d: int,
        prior: float,
        *,
        known: int = 0,
        sum_noise: SumNoise = "approximate",
    ) -> HierarchicalModel:
        """The two-level model of Kazan & Reiter (2022) eqs. 20-35."""
        return cls((rho1, rho2), (d,), prior, known, sum_noise)

    @property
    def levels(self) -> int:
        """Number of levels ``h``."""
        return len(self.rhos)

    def level_noise(self, level: int) -> NoiseModel:
        """Noise of ``X_l*`` (``level`` is 1-based)."""
        return NoiseModel.discrete_gaussian(self.rhos[level - 1])

    def sum_precision(self, level: int) -> float:
        """``rho_l / d_l``: the precision of eq. 21's approximation of ``Y_l*``'s noise."""
        d = self.siblings[level - 1]
        return math.inf if d == 0 else float(self.rhos[level - 1]) / d

    def log_sum_pmf(self, level: int, z: np.ndarray) -> np.ndarray:
        """Log pmf of the noise of ``Y_l*`` as the intruder models it.

        ``"approximate"``: ``DG(sigma^2 = d_l / (2 rho_l))`` (eq. 21); ``"exact"``: the
        convolution of ``d_l`` discrete Gaussians (values outside its computed support,
        below ``1e-40`` of the peak, fall back to the approximation). ``d_l = 0``: a
        point mass at 0.
        """
        z = np.asarray(z)
        d = self.siblings[level - 1]
        rho = self.rhos[level - 1]
        if d == 0:
            return np.where(z == 0, 0.0, -np.inf)
        approx = DiscreteGaussian.from_rho(rho / d).log_pmf(z)
        if self.sum_noise == "approximate":
            return approx
        key = f"sum{level}"
        if key not in self._cache:
            self._cache[key] = sum_of_discrete_gaussians(rho, d)
        k, lp = self._cache[key]  # type: ignore[misc]
        zi = np.asarray(z, dtype=np.int64)
        inside = (zi >= k[0]) & (zi <= k[-1])
        out = np.where(inside, lp[np.clip(zi - k[0], 0, k.size - 1)], approx)
        return out

    def describe(self) -> dict[str, object]:
        """Parameters for JSON output."""
        return {
            "rhos": [float(r) for r in self.rhos],
            "siblings": list(self.siblings),
            "prior": self.prior,
            "known": self.known,
            "sum_noise": self.sum_noise,
        }


@dataclass(frozen=True)
class DecisionRule:
    """How the 0-1-loss intruder turns a posterior into a decision (eq. 17).

    Attributes:
        draws: ``None``: decide from the exact posterior; an integer ``n``: decide from
            the fraction of ``n`` independent posterior draws with ``X_1 = k + 1`` (an
            idealised MCMC run of length ``n``).
        ties_to_target: decide ``X_1 = k + 1`` when the posterior (or the fraction) is
            exactly 1/2. ``False`` is eq. 18's strict ``>``. The paper's Monte Carlo
            figures (Figs. 5-6, 1,000 draws) are reproduced with ``True``.
    """

    draws: int | None = None
    ties_to_target: bool = False

    def __post_init__(self) -> None:
        if self.draws is not None and (isinstance(self.draws, bool) or int(self.draws) < 1):
            raise CensusDPError(f"draws is {self.draws!r}; it must be None or an integer >= 1")

    def describe(self) -> dict[str, object]:
        """Parameters for JSON output."""
        return {"draws": self.draws, "ties_to_target": self.ties_to_target}


def decision_probability(log_odds: np.ndarray, rule: DecisionRule) -> np.ndarray:
    """Probability that the intruder decides ``X_1 = k + 1`` given the posterior log-odds.

    Exact posterior: ``1[q > 1/2]`` (or ``>=``). ``n`` draws: ``P[B > n/2]`` (or
    ``P[B >= n/2]``) with ``B ~ Binomial(n, q)``.
    """
    lo = np.asarray(log_odds, dtype=np.float64)
    if rule.draws is None:
        return (lo >= 0 if rule.ties_to_target else lo > 0).astype(np.float64)
    n = int(rule.draws)
    q = expit(lo)
    cut = math.ceil(n / 2) - 1 if rule.ties_to_target else n // 2
    return binom.sf(cut, n, q)


# -- exact posterior for one data set, any h -------------------------------------------


def _lse(x: np.ndarray, axis: int) -> np.ndarray:
    """``log(sum(exp(x)))`` along ``axis`` (rows that are all ``-inf`` give ``-inf``)."""
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.sum(np.exp(x - m), axis=axis)) + np.squeeze(m, axis=axis)


def _check_data(model: HierarchicalModel, x_star: Sequence[int], y_star: Sequence[int]) -> None:
    h = model.levels
    if len(x_star) != h:
        raise CensusDPError(f"x_star has {len(x_star)} values; the model has {h} levels")
    if len(y_star) != h - 1:
        raise CensusDPError(f"y_star has {len(y_star)} values; it needs {h - 1} (one per d)")


def exact_posterior(
    model: HierarchicalModel, x_star: Sequence[int], y_star: Sequence[int]
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Direct numerical posterior of every ``X_l`` given one data set (Kazan & Reiter (2022) eq. 25).

    Forward-backward sums over the chain ``X_1 <= X_2 <= ... <= X_h`` on the grid
    ``k .. U``. ``U`` exceeds every released value and ``k + 1 + sum_l max(y_l*, 0)`` by
    ``h`` times the width that holds all but ``exp(-45)`` of the narrowest noise, so
    the left-out mass is negligible against double precision.

    Args:
        model: the intruder's model.
        x_star: ``(x_1*, ..., x_h*)``.
        y_star: ``(y_1*, ..., y_{h-1}*)``.

    Returns:
        For each level ``l``, ``(values, probabilities)`` of ``X_l``'s marginal posterior.
    """
    _check_data(model, x_star, y_star)
    h = model.levels
    k = model.known
    prec = [float(r) for r in model.rhos] + [
        model.sum_precision(i + 1) for i in range(h - 1) if model.siblings[i] > 0
    ]
    width = math.ceil(math.sqrt(_WIN / min(prec))) + 2
    top = max(max(int(x) for x in x_star), k + 1 + sum(max(int(y), 0) for y in y_star))
    grid = np.arange(k, top + h * width + 1, dtype=np.int64)
    G = grid.size
    log_phi = [model.level_noise(i + 1).log_pmf(int(x_star[i]) - grid) for i in range(h)]
    prior = np.full(G, -np.inf)
    prior[0] = math.log1p(-model.prior)
    prior[1] = math.log(model.prior)
    log_phi[0] = log_phi[0] + prior
    diff = grid[None, :] - grid[:, None]  # x_{l+1} - x_l
    psi = []
    for i in range(h - 1):
        m = model.log_sum_pmf(i + 1, int(y_star[i]) - diff)
        psi.append(np.where(diff >= 0, m, -np.inf))
    alpha = [log_phi[0]]
    for i in range(h - 1):
        alpha.append(logsumexp(alpha[-1][:, None] + psi[i], axis=0) + log_phi[i + 1])
    beta = [np.zeros(G)]
    for i in range(h - 2, -1, -1):
        beta.insert(0, logsumexp(psi[i] + (log_phi[i + 1] + beta[0])[None, :], axis=1))
    out = []
    for i in range(h):
        lm = alpha[i] + beta[i]
        pm = np.exp(lm - logsumexp(lm))
        out.append((grid, pm))
    return out


# -- two levels, vectorized ----------------------------------------------------------


def two_level_log_odds(
    model: HierarchicalModel, x1_star: np.ndarray, x2_star: np.ndarray, y1_star: np.ndarray
) -> np.ndarray:
    """Exact posterior log-odds ``log P[X_1 = k+1 | D] / P[X_1 = k | D]`` for many data sets.

    ``logit p + log f_1(x_1* - k - 1) / f_1(x_1* - k) + log G(1) / G(0)`` with
    ``G(j) = sum_{y >= 0} f_2(x_2* - k - j - y) g_1(y_1* - y)`` (eq. 25 summed over
    ``X_2 = X_1 + y``). The sum runs over a window around the mode of eq. 35 holding all
    but ``exp(-45)`` of it. With ``d = 0`` (a single block in its block group) ``X_2 = X_1``
    and both measurements enter the likelihood ratio directly.

    Args:
        model: a two-level model.
        x1_star, x2_star, y1_star: released values (broadcastable integer arrays).

    Returns:
        The log-odds, shape of the broadcast inputs.
    """
    if model.levels != 2:
        raise CensusDPError(f"two_level_log_odds needs a 2-level model, got {model.levels}")
    x1, x2, y1 = np.broadcast_arrays(
        np.asarray(x1_star, dtype=np.int64) - model.known,
        np.asarray(x2_star, dtype=np.int64) - model.known,
        np.asarray(y1_star, dtype=np.int64),
    )
    shape = x1.shape
    x1, x2, y1 = x1.ravel(), x2.ravel(), y1.ravel()
    n1, n2 = model.level_noise(1), model.level_noise(2)
    base = math.log(model.prior) - math.log1p(-model.prior) + n1.log_likelihood_ratio(x1)
    if model.siblings[0] == 0:
        return (base + n2.log_likelihood_ratio(x2)).reshape(shape)
    r2 = float(model.rhos[1])
    ry = model.sum_precision(1)
    a = r2 + ry
    width = math.ceil(math.sqrt(_WIN / a)) + 3
    centre = np.rint((r2 * (x2 - 0.5) + ry * y1) / a).astype(np.int64)
    start = np.maximum(0, centre - width)
    out = np.empty(x1.size)
    chunk = max(1, 2_000_000 // (2 * width + 1))
    offs = np.arange(2 * width + 1, dtype=np.int64)
    for s in range(0, x1.size, chunk):
        sl = slice(s, s + chunk)
        y = start[sl, None] + offs[None, :]
        lg = model.log_sum_pmf(1, y1[sl, None] - y)
        g1 = _lse(n2.log_pmf(x2[sl, None] - 1 - y) + lg, axis=1)
        g0 = _lse(n2.log_pmf(x2[sl, None] - y) + lg, axis=1)
        out[sl] = base[sl] + g1 - g0
    return out.reshape(shape)


@dataclass(frozen=True)
class TwoLevelRisk:
    """Exact two-level risk for one truth (Kazan & Reiter (2022) secs. 4.3.1-4.3.3).

    Attributes:
        model: the intruder's model (``sum_noise`` says how they model ``Y_1*``).
        others: the true ``Y_1 = xi_2 - xi_1``, people with ``c`` in the other blocks.
        rule: the decision rule.
        correct_decision: probability the intruder decides ``X_1 = k + 1``.
        marginal_posterior: expected posterior ``E[P[X_1 = k+1 | D]]`` (eq. 14's analogue).
        marginal_risk: ``marginal_posterior / p`` (eq. 15's analogue).
        one_level_correct: the same intruder's probability without hierarchy (exact).
        gain: mass of data where the hierarchy turns a wrong decision right (``draws``
            ``None`` only; Fig. 4's 2.48%).
        loss: mass where it turns a right decision wrong (Fig. 4's 1.83%).
        error_bound: bound on the left-out data mass.
    """

    model: HierarchicalModel
    others: int
    rule: DecisionRule
    correct_decision: float
    marginal_posterior: float
    marginal_risk: float
    one_level_correct: float
    gain: float | None
    loss: float | None
    error_bound: float

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready dictionary."""
        return {
            **self.model.describe(),
            "xi2": self.model.known + 1 + self.others,
            "others": self.others,
            **self.rule.describe(),
            "correct_decision_probability": self.correct_decision,
            "marginal_posterior": self.marginal_posterior,
            "marginal_risk": self.marginal_risk,
            "one_level_correct_decision_probability": self.one_level_correct,
            "gain": self.gain,
            "loss": self.loss,
            "error_bound": self.error_bound,
        }


def _y_noise_support(rho: Fraction, d: int, tol: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Support and pmf of the true ``Y*`` noise (sum of ``d`` DGs) holding all but ``tol``."""
    k, lp = sum_of_discrete_gaussians(rho, d)
    p = np.exp(lp - logsumexp(lp))
    # trim symmetric tails while their mass stays below tol
    c = np.cumsum(p)
    lo = int(np.searchsorted(c, tol / 2, side="right"))
    lo = min(lo, k.size // 2)
    hi = k.size - 1 - lo
    kept = p[lo : hi + 1]
    return k[lo : hi + 1], kept, float(max(0.0, 1.0 - math.fsum(kept)))


def two_level_risk(
    model: HierarchicalModel,
    others: int,
    *,
    rule: DecisionRule | None = None,
    tol: float = 1e-12,
) -> TwoLevelRisk:
    """Exact correct-decision probability, marginal posterior and R with two levels.

    The truth is ``X_1 = k + 1`` and ``Y_1 = others`` (``xi_2 = k + 1 + others``). The data
    are ``x_1* = k + 1 + eta_1``, ``x_2* = xi_2 + eta_2`` and ``y_1* = others + e`` with
    ``e`` the *exact* sum of ``d`` discrete Gaussians (the true release); the
    intruder's posterior uses ``model.sum_noise``. The probability is the sum over all
    ``(eta_1, eta_2, e)`` in supports that each hold all but ``tol`` of their mass of
    ``P[eta_1] P[eta_2] P[e] P[decide k+1 | D]`` -- no sampling. Error at most ``3 tol``
    (plus the ``exp(-45)`` window of :func:`two_level_log_odds`).

    Args:
        model: a two-level model.
        others: ``Y_1``, the true count of ``c`` in the other ``d`` blocks.
        rule: the decision rule (default: exact posterior, strict ``> 1/2``).
        tol: mass left out of each of the three noise supports.
    """
    if model.levels != 2:
        raise CensusDPError(f"two_level_risk needs a 2-level model, got {model.levels}")
    if isinstance(others, bool) or int(others) != others or int(others) < 0:
        raise CensusDPError(f"others is {others!r}; it must be an integer >= 0")
    tol = check_tolerance(tol)
    rule = rule or DecisionRule()
    k, others = model.known, int(others)
    e1, w1, b1 = model.level_noise(1).support(tol)
    e2, w2, b2 = model.level_noise(2).support(tol)
    d = model.siblings[0]
    if d > 0:
        ey, wy, by = _y_noise_support(model.rhos[0], d, tol)
    else:
        ey, wy, by = np.zeros(1, dtype=np.int64), np.ones(1), 0.0
    x2 = (k + 1 + others + e2)[:, None]
    y1 = (others + ey)[None, :]
    zero = np.zeros((1, 1), dtype=np.int64)
    part = two_level_log_odds(model, zero + k, x2, y1)  # log-odds at x1* = k
    n1 = model.level_noise(1)
    # log-odds(x1*) = part + LLR1(x1* - k) - LLR1(0)
    shift = n1.log_likelihood_ratio(1.0 + e1) - float(n1.log_likelihood_ratio(np.float64(0)))
    lo = part[:, :, None] + shift[None, None, :]

    def total(values: np.ndarray) -> float:
        # sum of values * w2 (x) wy (x) w1, contracted axis by axis (pairwise sums)
        return float(w2 @ (np.asarray(values, dtype=np.float64) @ w1) @ wy)

    dec = decision_probability(lo, rule)
    correct = total(dec)
    post = total(expit(lo))
    one_lo = math.log(model.prior) - math.log1p(-model.prior) + n1.log_likelihood_ratio(1.0 + e1)
    one_dec = decision_probability(one_lo, rule)
    one_correct = float(np.sum(one_dec * w1))
    gain = loss = None
    if rule.draws is None:
        hier = dec > 0.5
        alone = (one_dec > 0.5)[None, None, :]
        gain = total(hier & ~alone)
        loss = total(~hier & alone)
    return TwoLevelRisk(
        model=model,
        others=others,
        rule=rule,
        correct_decision=correct,
        marginal_posterior=post,
        marginal_risk=post / model.prior,
        one_level_correct=one_correct,
        gain=gain,
        loss=loss,
        error_bound=b1 + b2 + by + 1e-15,
    )


def saturation_others(model: HierarchicalModel, tol: float = 1e-12) -> int:
    """The ``others`` beyond which :func:`two_level_risk` no longer depends on it.

    ``two_level_risk`` sums over data ``x_2* = k + 1 + others + eta_2``,
    ``y_1* = others + e`` with ``eta_2``, ``e`` on fixed supports; the posterior sums
    over ``Y_1 >= 0`` on a window around ``y_1*`` and ``x_2*``. Once every window stays
    above 0 the constraint ``Y_1 >= 0`` never binds and the whole computation is a
    shift of the same numbers, so the result is identical for every larger ``others``.
    """
    if model.levels != 2:
        raise CensusDPError(f"saturation_others needs a 2-level model, got {model.levels}")
    tol = check_tolerance(tol)
    k2 = model.level_noise(2).half_width(tol)
    d = model.siblings[0]
    if d == 0:
        return 0
    ky = int(_y_noise_support(model.rhos[0], d, tol)[0][-1])
    a = float(model.rhos[1]) + model.sum_precision(1)
    width = math.ceil(math.sqrt(_WIN / a)) + 3
    return max(k2, ky) + width + 3


def approximation_error(rho: float | Fraction | str, d: int) -> dict[str, float]:
    """How far eq. 21's ``DG(d / (2 rho))`` is from the exact sum of ``d`` discrete Gaussians.

    Returns:
        ``total_variation`` and ``max_abs_pmf_difference`` between the two pmfs,
        ``exact_variance`` (of the sum) and ``approx_variance`` (of the single DG).
    """
    k, lp = sum_of_discrete_gaussians(rho, d)
    exact = np.exp(lp)
    r = as_fraction(rho, "rho")
    approx_mech = DiscreteGaussian.from_rho(r / d)
    approx = approx_mech.pmf(k)
    return {
        "d": int(d),
        "rho": float(r),
        "total_variation": 0.5 * math.fsum(np.abs(exact - approx))
        + 0.5 * approx_mech.tail(int(k[-1]) + 1),
        "max_abs_pmf_difference": float(np.max(np.abs(exact - approx))),
        "exact_variance": math.fsum(exact * k.astype(np.float64) ** 2),
        "approx_variance": approx_mech.variance,
    }


# -- simulation of released data --------------------------------------------------------


def _sample_pmf(
    k: np.ndarray, log_p: np.ndarray, size: int | tuple[int, ...], rng: np.random.Generator
) -> np.ndarray:
    p = np.exp(log_p - logsumexp(log_p))
    c = np.cumsum(p)
    c /= c[-1]
    u = rng.random(size)
    return k[np.minimum(np.searchsorted(c, u, side="right"), k.size - 1)]


def simulate_data(
    model: HierarchicalModel,
    others: Sequence[int],
    n: int,
    seed: int | np.random.SeedSequence | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n`` released data sets for the truth ``X_1 = k + 1``, ``Y_l = others[l]``.

    Noise is drawn by inverse CDF from the exact pmfs (each discrete Gaussian on a
    support holding all but ``1e-40`` relative mass; ``Y_l*`` from the exact
    convolution of ``d_l`` of them, which has the distribution of their sum).
    Experiment randomness (:func:`censusdp.privacy.randomness.experiment_generator`), never release noise.

    Returns:
        ``(x_star, y_star)`` of shapes ``(n, h)`` and ``(n, h - 1)``.
    """
    h = model.levels
    if len(others) != h - 1:
        raise CensusDPError(f"others has {len(others)} values; it needs {h - 1}")
    rng = experiment_generator(seed)
    truth = [model.known + 1]
    for y in others:
        truth.append(truth[-1] + int(y))
    xs = np.empty((n, h), dtype=np.int64)
    ys = np.empty((n, h - 1), dtype=np.int64)
    for i in range(h):
        rho = model.rhos[i]
        K = math.ceil(math.sqrt(92.0 / float(rho))) + 1
        k = np.arange(-K, K + 1)
        xs[:, i] = truth[i] + _sample_pmf(k, DiscreteGaussian.from_rho(rho).log_pmf(k), n, rng)
    for i in range(h - 1):
        d = model.siblings[i]
        if d == 0:
            ys[:, i] = int(others[i])
            continue
        k, lp = sum_of_discrete_gaussians(model.rhos[i], d)
        ys[:, i] = int(others[i]) + _sample_pmf(k, lp, n, rng)
    return xs, ys


# -- Gibbs sampler ------------------------------------------------------------------------


@dataclass(frozen=True)
class GibbsResult:
    """Output of :func:`gibbs_sampler` for ``n`` data sets.

    Attributes:
        posterior: fraction of kept draws with ``X_1 = k + 1``, per data set (the
            paper's estimate).
        rao_blackwell: average of the full-conditional probability of ``X_1 = k + 1``
            (eq. 30), per data set: the same target, lower variance.
        samples: kept draws of every ``X_l``, shape ``(n, iterations, h)``, if asked for.
        seconds: wall time.
    """

    posterior: np.ndarray
    rao_blackwell: np.ndarray
    samples: np.ndarray | None
    seconds: float


def _grid_sample(log_w: np.ndarray, grid: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    m = np.max(log_w, axis=1, keepdims=True)
    w = np.exp(log_w - m)
    c = np.cumsum(w, axis=1)
    u = rng.random(log_w.shape[0]) * c[:, -1]
    idx = (c < u[:, None]).sum(axis=1)
    return grid[np.arange(grid.shape[0]), np.minimum(idx, grid.shape[1] - 1)]


def gibbs_sampler(
    model: HierarchicalModel,
    x_star: np.ndarray,
    y_star: np.ndarray,
    *,
    iterations: int = 1000,
    burn_in: int = 100,
    seed: int | np.random.SeedSequence | None = None,
    keep_samples: bool = False,
    enforce_order_in_x1_update: bool = True,
) -> GibbsResult:
    """The Gibbs sampler of Kazan & Reiter (2022) eqs. 26-35, run on ``n`` data sets at once.

    State ``(X_1, ..., X_h)`` per data set; one sweep updates

    * ``X_1 in {k, k+1}`` from eq. 30 (the two-point full conditional
      ``∝ P[x_1] f_1(x_1* - x_1) g_1(y_1* - x_2 + x_1)``), restricted to ``x_1 <= x_2``
      (eq. 26);
    * each ``X_l`` (``l >= 2``) from its full conditional on the grid
      ``[x_{l-1}, x_{l+1}]``: for ``h = 2`` with the approximation of eq. 21 this is
      eq. 35, the discrete Gaussian with precision ``rho_2 + rho_1 / d`` centred at
      ``(rho_2 x_2* + (rho_1/d)(y_1* + x_1)) / (rho_2 + rho_1/d)`` truncated to
      ``x_2 >= x_1``; with the exact sum pmf the same grid carries the exact weights.
      The grid spans the centre plus or minus ``sqrt(45 / precision) + 3``.

    All chains advance together (numpy arrays of shape ``(n,)``), so cost is
    ``iterations * n * grid`` array operations.

    Long because one sweep is kept in one loop body: the ``X_1`` and ``X_l`` updates
    share the chain state, the generator and the precomputed grid widths, and each
    block maps line for line onto eqs. 30 and 35; split into helpers, the hot loop
    would pass a dozen arrays per call and the order of random draws would be harder
    to see.

    Args:
        model: the intruder's model (``siblings`` must all be ``>= 1``).
        x_star: released ``X_l*``, shape ``(n, h)`` (or ``(h,)`` for one data set).
        y_star: released ``Y_l*``, shape ``(n, h - 1)``.
        iterations: kept sweeps per chain.
        burn_in: discarded initial sweeps.
        seed: experiment seed.
        keep_samples: return all kept draws.
        enforce_order_in_x1_update: ``False`` drops the constraint ``x_1 <= x_2`` from
            the ``X_1`` update only (``X_2`` stays truncated at ``x_1``). That chain does
            not target eq. 25; it is kept because it reproduces the paper's Table 7 and
            its Fig. 5 finding that ``xi_2 = 1`` raises the intruder's success, which the
            exact posterior does not (see ``docs/risk.md``).

    Returns:
        A :class:`GibbsResult`.
    """
    t0 = time.perf_counter()
    xs = np.atleast_2d(np.asarray(x_star, dtype=np.int64))
    ys = np.atleast_2d(np.asarray(y_star, dtype=np.int64))
    h = model.levels
    if xs.shape[1] != h or ys.shape[1] != h - 1 or xs.shape[0] != ys.shape[0]:
        raise CensusDPError(
            f"x_star must have shape (n, {h}) and y_star (n, {h - 1}); got {xs.shape} and {ys.shape}"
        )
    if any(d == 0 for d in model.siblings):
        raise CensusDPError("gibbs_sampler needs siblings >= 1 at every level (d = 0 has no Y*)")
    if iterations < 1 or burn_in < 0:
        raise CensusDPError(f"iterations is {iterations} and burn_in {burn_in}; need >= 1 and >= 0")
    rng = experiment_generator(seed)
    n = xs.shape[0]
    k = model.known
    rho = [float(r) for r in model.rhos]
    ry = [model.sum_precision(i + 1) for i in range(h - 1)]
    lpo = math.log(model.prior) - math.log1p(-model.prior)
    noise = [model.level_noise(i + 1) for i in range(h)]
    llr1 = lpo + noise[0].log_likelihood_ratio(xs[:, 0] - k)
    # start at the released values, made consistent
    x = np.empty((n, h), dtype=np.int64)
    x[:, 0] = k + 1
    for i in range(1, h):
        x[:, i] = np.maximum(x[:, i - 1], xs[:, i])
    widths = []
    for i in range(1, h):
        a = rho[i] + ry[i - 1] + (ry[i] if i < h - 1 else 0.0)
        widths.append(math.ceil(math.sqrt(_WIN / a)) + 3)
    count = np.zeros(n)
    rb = np.zeros(n)
    samples = np.empty((n, iterations, h), dtype=np.int64) if keep_samples else None
    for it in range(burn_in + iterations):
        # X_1 | X_2 (eq. 30)
        y_hi = ys[:, 0] - (x[:, 1] - (k + 1))
        y_lo = ys[:, 0] - (x[:, 1] - k)
        lo = llr1 + model.log_sum_pmf(1, y_hi) - model.log_sum_pmf(1, y_lo)
        q = expit(lo)
        if enforce_order_in_x1_update:
            q = np.where(x[:, 1] >= k + 1, q, 0.0)
        x[:, 0] = k + (rng.random(n) < q)
        # X_l | neighbours (eq. 35 for h = 2)
        for i in range(1, h):
            a = rho[i] + ry[i - 1]
            num = rho[i] * xs[:, i] + ry[i - 1] * (x[:, i - 1] + ys[:, i - 1])
            if i < h - 1:
                a += ry[i]
                num = num + ry[i] * (x[:, i + 1] - ys[:, i])
            centre = np.rint(num / a).astype(np.int64)
            W = widths[i - 1]
            lower = x[:, i - 1]
            start = np.maximum(lower, centre - W)
            if i < h - 1:
                upper = x[:, i + 1]
                start = np.maximum(lower, np.minimum(start, upper - 2 * W))
            grid = start[:, None] + np.arange(2 * W + 1)[None, :]
            lw = noise[i].log_pmf(xs[:, i, None] - grid)
            lw = lw + model.log_sum_pmf(i, ys[:, i - 1, None] - (grid - x[:, i - 1, None]))
            if i < h - 1:
                lw = lw + model.log_sum_pmf(i + 1, ys[:, i, None] - (x[:, i + 1, None] - grid))
                lw = np.where(grid <= x[:, i + 1, None], lw, -np.inf)
            x[:, i] = _grid_sample(lw, grid, rng)
        if it >= burn_in:
            count += x[:, 0] == k + 1
            y_hi = ys[:, 0] - (x[:, 1] - (k + 1))
            y_lo = ys[:, 0] - (x[:, 1] - k)
            q = expit(llr1 + model.log_sum_pmf(1, y_hi) - model.log_sum_pmf(1, y_lo))
            if enforce_order_in_x1_update:
                q = np.where(x[:, 1] >= k + 1, q, 0.0)
            rb += q
            if samples is not None:
                samples[:, it - burn_in, :] = x
    return GibbsResult(
        posterior=count / iterations,
        rao_blackwell=rb / iterations,
        samples=samples,
        seconds=time.perf_counter() - t0,
    )
