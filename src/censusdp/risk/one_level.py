"""Bayesian disclosure risk of one released count, without hierarchy (Kazan & Reiter (2022) sec. 3.1).

An intruder knows everyone in a group (a census block) except the target ``t`` and
so knows ``k``, the number of *other* people in the group with the target's
characteristics ``c``. Their prior is ``P[X = k + 1] = p`` and ``P[X = k] = 1 - p``
(eq. 9). The data holder releases ``X* = X + eta`` with discrete Gaussian or geometric
noise ``eta``. The truth is ``X = k + 1``.

Everything here is exact: posteriors in closed form (eqs. 10-12), and the marginal
quantities (eqs. 14, 15, 18-19) by summing over the noise distribution on a support
``[-K, K]`` chosen so that the left-out mass is below ``tol``. Because the summands
are probabilities times numbers in ``[0, 1]``, the left-out mass bounds the error;
it is returned with every value (:class:`ExactValue`). All results depend on ``k``
only through ``x* - k`` (sec. 5.2: non-unique targets are shifted copies of the
unique case).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from censusdp.errors import CensusDPError
from censusdp.risk._noise import NoiseModel, check_probability, check_tolerance

__all__ = [
    "ATTACKS",
    "ExactValue",
    "OneLevelRisk",
    "UnknownAttributeRisk",
    "attack_risk",
    "correct_decision_probability",
    "decision_threshold",
    "marginal_posterior",
    "marginal_risk",
    "one_level_risk",
    "posterior",
    "probability_mass",
    "risk_ratio",
    "unknown_attribute_posterior",
    "unknown_attribute_risk",
    "upper_tail",
]

DEFAULT_TOL = 1e-15

ATTACKS: dict[str, str] = {
    "characteristics": "the target has characteristics c (eq. 9, prior p)",
    "participation": "the target responded to the census at all (eq. 36, prior p_f)",
    "truthful": "the target reported their characteristics truthfully (eq. 38, prior p_l)",
}
"""The two-point attacks of Kazan & Reiter (2022) secs. 3.1 and 5.1; all share eqs. 10-19."""


@dataclass(frozen=True)
class ExactValue:
    """A number computed by truncated exact summation.

    Attributes:
        value: the computed value.
        error_bound: a bound on ``|value - exact value|`` (left-out probability mass,
            scaled as the quantity is).
    """

    value: float
    error_bound: float

    def __float__(self) -> float:
        return self.value


@dataclass(frozen=True)
class OneLevelRisk:
    """Summary of the one-level risk for one prior and one noise model.

    Attributes:
        prior: the intruder's prior ``p = P[X = k + 1]``.
        noise: the noise model of the released count.
        marginal_posterior: ``P[X = k + 1 | xi = k + 1]`` (eq. 14).
        marginal_risk: ``R`` (eq. 15).
        correct_decision: probability that the 0-1-loss intruder decides ``X = k + 1``
            (eqs. 18-19).
        threshold: ``x~* - k``: the intruder decides ``X = k + 1`` iff
            ``x* - k >= threshold`` (eq. 19); ``None`` if no released value leads to it.
        attack: which two-point question is asked (:data:`ATTACKS`).
    """

    prior: float
    noise: NoiseModel
    marginal_posterior: ExactValue
    marginal_risk: ExactValue
    correct_decision: ExactValue
    threshold: int | None
    attack: str = "characteristics"

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready dictionary."""
        return {
            "attack": self.attack,
            "prior": self.prior,
            **self.noise.describe(),
            "marginal_posterior": self.marginal_posterior.value,
            "marginal_risk": self.marginal_risk.value,
            "correct_decision_probability": self.correct_decision.value,
            "decision_threshold": self.threshold,
            "error_bound": max(
                self.marginal_posterior.error_bound,
                self.marginal_risk.error_bound,
                self.correct_decision.error_bound,
            ),
        }


def _log_prior_odds(p: float) -> float:
    return math.log(p) - math.log1p(-p)


def posterior(
    x_star: np.ndarray | int, *, prior: float, noise: NoiseModel, known: int = 0
) -> np.ndarray:
    """Posterior probability that the target has characteristics c (Kazan & Reiter (2022) eqs. 10-12).

    ``P[X = k+1 | X* = x*] = p L(x* | k+1) / (p L(x* | k+1) + (1 - p) L(x* | k))``;
    for the discrete Gaussian ``L(x* | x) ∝ exp(-rho (x* - x)^2)`` (eq. 11), for the
    geometric ``L(x* | x) ∝ exp(-epsilon |x* - x|)`` (eq. 12). Computed as
    ``expit(logit p + log L(x*|k+1) - log L(x*|k))``, stable for any ``x*``.

    Args:
        x_star: released noisy count(s) ``x*``.
        prior: ``p``, the prior probability that ``X = k + 1`` (eq. 9).
        noise: the noise model of the release.
        known: ``k``, the count of other people with characteristics c.

    Returns:
        The posterior probability for each ``x*`` (same shape).
    """
    p = check_probability(prior, "prior")
    z = np.asarray(x_star, dtype=np.float64) - float(known)
    return expit(_log_prior_odds(p) + noise.log_likelihood_ratio(z))


def risk_ratio(
    x_star: np.ndarray | int, *, prior: float, noise: NoiseModel, known: int = 0
) -> np.ndarray:
    """Disclosure risk of a released value, ``R'(x*) = P[X = k+1 | x*] / p`` (Kazan & Reiter (2022) eq. 13)."""
    return posterior(x_star, prior=prior, noise=noise, known=known) / check_probability(
        prior, "prior"
    )


def probability_mass(x_star: np.ndarray | int, *, noise: NoiseModel, true_count: int) -> np.ndarray:
    """``P[X* = x* | X = true_count] = P[eta = x* - true_count]`` (Kazan & Reiter (2022) eq. 8).

    Note: the "probability mass" column of Kazan & Reiter (2022) Table 3 equals this with
    ``true_count = 0`` (that is ``P[eta = x*]``: 0.161 at ``x* = 1``), although its
    caption says ``X_1 = 1``; with ``true_count = 1`` the value at ``x* = 1`` is 0.178.
    """
    return noise.pmf(np.asarray(x_star, dtype=np.int64) - int(true_count))


def _z_support(noise: NoiseModel, tol: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Released values relative to ``k`` (``z = 1 + eta``), their probabilities, tail."""
    eta, w, bound = noise.support(check_tolerance(tol))
    return eta + 1, w, bound


def marginal_posterior(*, prior: float, noise: NoiseModel, tol: float = DEFAULT_TOL) -> ExactValue:
    """``P[X = k+1 | xi = k+1] = sum_x* P[X = k+1 | x*] P[x* | X = k+1]`` (Kazan & Reiter (2022) eq. 14).

    Summed exactly over ``|eta| <= K`` with ``P[|eta| > K] <= tol``; the posterior is in
    ``[0, 1]`` so the error is at most that tail mass.
    """
    z, w, bound = _z_support(noise, tol)
    post = posterior(z, prior=prior, noise=noise)
    return ExactValue(math.fsum(post * w), bound)


def marginal_risk(*, prior: float, noise: NoiseModel, tol: float = DEFAULT_TOL) -> ExactValue:
    """``R = P[X = k+1 | xi = k+1] / p = sum_x* R'(x*) P[x* | xi]`` (Kazan & Reiter (2022) eq. 15)."""
    p = check_probability(prior, "prior")
    mp = marginal_posterior(prior=p, noise=noise, tol=tol)
    return ExactValue(mp.value / p, mp.error_bound / p)


def decision_threshold(*, prior: float, noise: NoiseModel, tol: float = DEFAULT_TOL) -> int | None:
    """``x~* - k``: the smallest ``x* - k`` with posterior ``> 1/2`` (Kazan & Reiter (2022) eq. 19).

    The log-likelihood ratio is non-decreasing in ``x*`` for both mechanisms, so the
    0-1-loss intruder (eq. 17) decides ``X = k + 1`` exactly when ``x* - k`` reaches
    this threshold. Returns ``None`` if no value does (geometric noise with
    ``logit p + epsilon <= 0``); returns the lower end of the searched support if
    every value does.
    """
    p = check_probability(prior, "prior")
    z, _, _ = _z_support(noise, tol)
    lo, hi = int(z[0]), int(z[-1])

    # widen until the decision is "no" at lo and "yes" at hi (or give up: constant)
    def yes(v: int) -> bool:
        return bool(_log_prior_odds(p) + float(noise.log_likelihood_ratio(np.float64(v))) > 0)

    for _ in range(60):
        if yes(hi):
            break
        if noise.kind == "geometric":
            return None
        hi = 2 * hi + 1
    else:  # pragma: no cover - the DG ratio is unbounded
        return None
    for _ in range(60):
        if not yes(lo):
            break
        if noise.kind == "geometric":
            return lo
        lo = 2 * lo - 1
    else:  # pragma: no cover
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if yes(mid):
            hi = mid
        else:
            lo = mid
    return hi


_SUM_ERROR = 1e-30
"""Error of :func:`upper_tail`: the mechanisms sum their pmf on a support whose tail is
below ``2**-101`` (discrete Gaussian) or use a closed form (geometric)."""


def upper_tail(noise: NoiseModel, s: int) -> float:
    """``P[eta >= s]`` for symmetric integer noise, with relative precision in the tails.

    Uses ``P[eta >= s] = P[|eta| >= s] / 2`` for ``s >= 1`` and
    ``1 - P[|eta| >= 1 - s] / 2`` for ``s <= 0``.
    """
    s = int(s)
    if s >= 1:
        return 0.5 * noise.tail(s)
    return 1.0 - 0.5 * noise.tail(1 - s)


def correct_decision_probability(
    *, prior: float, noise: NoiseModel, tol: float = DEFAULT_TOL
) -> ExactValue:
    """Probability the 0-1-loss intruder decides correctly that ``X = k + 1`` (Kazan & Reiter (2022) eqs. 18-19).

    ``P[xi^ = k+1] = sum_x* P[x* | X = k+1] 1[P[X = k+1 | x*] > 1/2] = P[X* >= x~* | X = k+1]``
    (eq. 19), evaluated as the upper tail ``P[eta >= x~* - k - 1]`` of the noise, which
    keeps full relative precision when the probability is tiny (``p = 1/50``). A
    posterior of exactly 1/2 does not count as a decision for ``k + 1`` (the strict
    ``>`` of eq. 18).
    """
    thr = decision_threshold(prior=prior, noise=noise, tol=tol)
    if thr is None:
        return ExactValue(0.0, 0.0)
    return ExactValue(upper_tail(noise, thr - 1), _SUM_ERROR)


def one_level_risk(
    *, prior: float, noise: NoiseModel, tol: float = DEFAULT_TOL, attack: str = "characteristics"
) -> OneLevelRisk:
    """All one-level risk measures for one prior (Kazan & Reiter (2022) eqs. 14-19).

    Args:
        prior: the intruder's prior probability of the true value (``p``, ``p_f`` or ``p_l``).
        noise: the noise model of the released count.
        tol: bound on the probability mass left out of every sum.
        attack: which question the prior is about (:data:`ATTACKS`); the arithmetic
            is the same for all three (sec. 5.1).
    """
    if attack not in ATTACKS:
        raise CensusDPError(f"attack is {attack!r}; it must be one of {sorted(ATTACKS)}")
    mp = marginal_posterior(prior=prior, noise=noise, tol=tol)
    p = check_probability(prior, "prior")
    return OneLevelRisk(
        prior=p,
        noise=noise,
        marginal_posterior=mp,
        marginal_risk=ExactValue(mp.value / p, mp.error_bound / p),
        correct_decision=correct_decision_probability(prior=p, noise=noise, tol=tol),
        threshold=decision_threshold(prior=p, noise=noise, tol=tol),
        attack=attack,
    )


def attack_risk(
    attack: str, *, prior: float, noise: NoiseModel, tol: float = DEFAULT_TOL
) -> OneLevelRisk:
    """Risk of one of the two-point attacks of Kazan & Reiter (2022) sec. 5.1.

    * ``"participation"``: the intruder knows all ``n`` people of the group and asks
      whether the target filled out the census; prior ``p_f`` that they did (eq. 36).
    * ``"truthful"``: whether the target reported correctly; prior ``p_l`` (eq. 38).
    * ``"characteristics"``: the main attack (eq. 9).

    In each case ``X = k + 1`` is the truth, and eqs. 10-19 apply unchanged.
    """
    return one_level_risk(prior=prior, noise=noise, tol=tol, attack=attack)


# -- unknown attribute (sec. 5.1, eq. 37) ------------------------------------------------


@dataclass(frozen=True)
class UnknownAttributeRisk:
    """Risk that the intruder learns an unknown attribute of the target (Kazan & Reiter (2022) eq. 37).

    Attributes:
        priors: the intruder's prior over the ``m`` levels of the attribute.
        true_level: the target's true level.
        correct_decision: probability that the posterior of the true level is strictly
            larger than that of every other level.
        marginal_posterior: expected posterior of the true level (``m = 2`` only;
            ``None`` otherwise).
        marginal_risk: ``marginal_posterior / priors[true_level]`` (``m = 2`` only).
    """

    priors: tuple[float, ...]
    true_level: int
    correct_decision: ExactValue
    marginal_posterior: ExactValue | None
    marginal_risk: ExactValue | None


def _check_levels(priors: Sequence[float], true_level: int) -> np.ndarray:
    pr = np.asarray([float(x) for x in priors], dtype=np.float64)
    if pr.ndim != 1 or pr.size < 2:
        raise CensusDPError(f"priors must list at least two levels, got {list(priors)!r}")
    if np.any(pr <= 0) or not math.isclose(float(pr.sum()), 1.0, rel_tol=0, abs_tol=1e-9):
        raise CensusDPError(f"priors are {pr.tolist()}; they must be positive and sum to 1")
    if not 0 <= int(true_level) < pr.size:
        raise CensusDPError(f"true_level is {true_level}; it must be in 0..{pr.size - 1}")
    return pr


def unknown_attribute_posterior(
    x_star: np.ndarray,
    *,
    known: np.ndarray,
    priors: Sequence[float],
    noise: NoiseModel,
) -> np.ndarray:
    """Posterior over the levels of the target's unknown attribute (Kazan & Reiter (2022) eq. 37).

    The intruder knows the other people of the group, hence ``known[j]``: the count of
    others in cell ``j`` (the target's known attributes with level ``j`` of the unknown
    one). The released counts are ``x*[j] = known[j] + [j = true] + eta_j`` with
    independent noise, so ``P[level j | x*] ∝ priors[j] L(x*_j | known_j + 1) /
    L(x*_j | known_j)``.

    Args:
        x_star: released counts, shape ``(..., m)``.
        known: counts of the other people, shape ``(m,)`` or broadcastable.
        priors: prior over the ``m`` levels.
        noise: the noise model.

    Returns:
        Posterior probabilities, shape ``(..., m)``.
    """
    pr = _check_levels(priors, 0)
    z = np.asarray(x_star, dtype=np.float64) - np.asarray(known, dtype=np.float64)
    if z.shape[-1] != pr.size:
        raise CensusDPError(f"x_star has {z.shape[-1]} levels but priors has {pr.size}")
    s = np.log(pr) + noise.log_likelihood_ratio(z)
    s -= s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def unknown_attribute_risk(
    *, priors: Sequence[float], true_level: int, noise: NoiseModel, tol: float = DEFAULT_TOL
) -> UnknownAttributeRisk:
    """Exact risk of the unknown-attribute attack (Kazan & Reiter (2022) sec. 5.1, eq. 37).

    Scores ``s_j = log priors[j] + log L(x*_j | k_j + 1) - log L(x*_j | k_j)`` depend on
    independent noises, so the probability of a correct decision is the one-dimensional
    sum ``sum_{eta_t} P[eta_t] prod_{j != t} P[s_j < s_t(eta_t)]``, each factor summed
    over the support. For ``m = 2`` the expected posterior is a two-dimensional sum.
    Error bound: ``m`` times the tail mass ``tol``.
    """
    pr = _check_levels(priors, true_level)
    t = int(true_level)
    eta, w, bound = noise.support(check_tolerance(tol))
    llr_true = noise.log_likelihood_ratio(eta + 1.0)  # the target's cell: z = 1 + eta
    llr_other = noise.log_likelihood_ratio(eta.astype(np.float64))  # z = eta
    s_t = np.log(pr[t]) + llr_true  # (n,)
    prob = w.copy()
    for j in range(pr.size):
        if j == t:
            continue
        s_j = np.log(pr[j]) + llr_other  # (n,)
        less = (s_j[None, :] < s_t[:, None]).astype(np.float64) @ w
        prob = prob * less
    correct = ExactValue(math.fsum(prob), pr.size * bound)
    mp = mr = None
    if pr.size == 2:
        o = 1 - t
        post = expit(s_t[:, None] - (np.log(pr[o]) + llr_other)[None, :])
        val = math.fsum((post * w[:, None] * w[None, :]).ravel())
        mp = ExactValue(val, 2 * bound)
        mr = ExactValue(val / pr[t], 2 * bound / pr[t])
    return UnknownAttributeRisk(
        priors=tuple(pr.tolist()),
        true_level=t,
        correct_decision=correct,
        marginal_posterior=mp,
        marginal_risk=mr,
    )
