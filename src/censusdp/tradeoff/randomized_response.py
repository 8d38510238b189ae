"""The privacy-accuracy frontier of randomized response, in closed form.

Abowd & Schmutte, *An Economic Analysis of Privacy Protection and Statistical Accuracy
as Social Choices* (American Economic Review 109(1), 2019), Online Appendix B. A
custodian asks each of ``N`` people a sensitive yes/no question with probability
``rho`` and an innocuous one (``Pr[yes] = mu``) otherwise, and publishes the mixture
(eq. B-1). The equations implemented here, with ``c = pi - mu`` and
``beta(rho) = rho c + mu`` (the expected share of "yes", eq. B-6):

* (B-2), (B-3), (B-4) privacy loss ``epsilon(rho) = log(1 + rho / ((1 - rho) m))`` with
  ``m = min(mu, 1 - mu)``; for ``mu = 1/2`` this is ``log((1 + rho) / (1 - rho))``;
* (B-10) its inverse ``rho(epsilon) = m (e^eps - 1) / (1 + m (e^eps - 1))``, i.e.
  ``(e^eps - 1) / (1 + e^eps) = tanh(eps / 2)`` for ``mu = 1/2``;
* (B-12) ``rho'(eps) = 2 e^eps / (1 + e^eps)^2 = 1 / (1 + cosh eps)`` (``mu = 1/2``);
* (B-7), (B-8) ``Var[pi_hat(rho)] = beta (1 - beta) / (rho^2 N)``;
* (B-9) data quality ``I(rho) = Var[pi_hat(1)] - Var[pi_hat(rho)]`` (``<= 0``: the
  variance added by the privacy protection, with a minus sign; ``I(1) = 0``);
* (B-11) its slope ``I'(rho)``, and the chain rule ``dI/deps = I'(rho(eps)) rho'(eps)``;
* the curvature ``d2I/deps2 = I''(rho) rho'(eps)^2 + I'(rho) rho''(eps)``, which the
  appendix states is negative without printing it; derived below.

**Reading (B-11).** Differentiating (B-8)-(B-9) gives

    I'(rho) = [2 beta (1 - beta) / rho^3 - c (1 - 2 beta) / rho^2] / N
            = 2 Var[beta_hat(rho)] / rho^3 - (pi - 1/2)(1 - 2 pi) / (N rho)   (mu = 1/2).

The appendix prints ``2 Var[beta_hat(rho)] / rho - (pi - 1/2)(1 - 2 pi) / (N^2 rho)``;
the powers ``rho`` (for ``rho^3``) and ``N^2`` (for ``N``) are typesetting slips: the
printed expression is not the derivative of (B-9) and is not of the order ``1/N`` of a
variance. The functions here return the true derivative, checked against numerical
differentiation in the tests.

**A consequence worth knowing.** With ``mu = 1/2``, ``beta (1 - beta) = 1/4 - c^2
rho^2``, so ``Var[pi_hat(rho)] = 1 / (4 rho^2 N) - c^2 / N`` and the ``pi``-dependent
part cancels in (B-9): ``I(rho) = (1 - rho^-2) / (4 N)`` for every ``pi``. In terms of
``x = eps / 2``:

    N I        = -1 / (4 sinh^2 x)
    N dI/deps  =  cosh x / (4 sinh^3 x)
    N d2I/deps2 = -(1 + 2 cosh^2 x) / (8 sinh^4 x)

so the frontier is increasing and concave (the appendix's "both derivatives are
positive", "d2I/deps2 < 0"). For ``mu != 1/2`` the frontier depends on ``pi``.

Arithmetic: the ``rho``-domain functions are exact (``fractions.Fraction``); the
``epsilon``-domain ones use ``mpmath`` at 50 significant digits and round to float at
the end.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import mpmath

from censusdp.errors import BudgetError, ConfigError
from censusdp.privacy.parameters import as_fraction

__all__ = [
    "RRFrontierPoint",
    "RandomizedResponseFrontier",
    "data_quality",
    "data_quality_curvature",
    "data_quality_slope",
    "epsilon_of_truth_probability",
    "estimator_variance",
    "rr_frontier",
    "truth_probability",
]

_DPS = 50  # mpmath significant digits for the epsilon-domain functions

Number = Fraction | int | float | str


def _probability(value: Number, name: str, *, open_interval: bool) -> Fraction:
    p = as_fraction(value, name)
    ok = 0 < p < 1 if open_interval else 0 <= p <= 1
    if not ok:
        rule = "0 < {0} < 1" if open_interval else "0 <= {0} <= 1"
        raise ConfigError(f"{name} is {p}; it must satisfy {rule.format(name)}")
    return p


def _truth_prob(value: Number) -> Fraction:
    rho = as_fraction(value, "truth probability rho")
    if not 0 < rho <= 1:
        raise ConfigError(f"truth probability rho is {rho}; it must satisfy 0 < rho <= 1")
    return rho


def _population(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"population size N is {n!r}; it must be a positive integer")
    return n


def _epsilon(value: Number) -> Fraction:
    e = as_fraction(value, "epsilon")
    if e <= 0:
        raise BudgetError(f"epsilon is {e}; it must be positive")
    return e


def _mpf(x: Fraction) -> mpmath.mpf:
    return mpmath.mpf(x.numerator) / x.denominator


# -- rho domain (exact) -------------------------------------------------------------------


def estimator_variance(
    rho: Number, pi: Number, n: int = 1, mu: Number = Fraction(1, 2)
) -> Fraction:
    """Variance of the unbiased estimator ``pi_hat(rho)``, exactly (Abowd & Schmutte eq. B-8).

    ``Var[pi_hat(rho)] = [rho (pi - mu) + mu] [1 - rho (pi - mu) - mu] / (rho^2 N)``,
    which is ``Var[beta_hat(rho)] / rho^2`` with ``Var[beta_hat]`` from eq. B-7.

    Args:
        rho: probability ``0 < rho <= 1`` that the sensitive question is asked.
        pi: population share with the sensitive trait, ``0 <= pi <= 1``.
        n: population size ``N``.
        mu: probability of "yes" to the innocuous question, ``0 < mu < 1``.

    Raises:
        ConfigError: for a parameter outside its range.
    """
    r = _truth_prob(rho)
    p = _probability(pi, "pi", open_interval=False)
    m = _probability(mu, "mu", open_interval=True)
    beta = r * (p - m) + m
    return beta * (1 - beta) / (r * r * _population(n))


def data_quality(rho: Number, pi: Number, n: int = 1, mu: Number = Fraction(1, 2)) -> Fraction:
    """Data quality ``I(rho) = Var[pi_hat(1)] - Var[pi_hat(rho)]`` (eq. B-9), exactly.

    ``Var[pi_hat(1)] = pi (1 - pi) / N`` (no protection). ``I <= 0``, and ``I(1) = 0``.
    With ``mu = 1/2`` it equals ``(1 - rho^-2) / (4 N)`` whatever ``pi`` is.
    """
    return estimator_variance(1, pi, n, mu) - estimator_variance(rho, pi, n, mu)


def _slope_rho(rho: Any, pi: Any, n: int, mu: Any) -> Any:
    c = pi - mu
    beta = rho * c + mu
    return (2 * beta * (1 - beta) / rho**3 - c * (1 - 2 * beta) / rho**2) / n


def _curvature_rho(rho: Any, pi: Any, n: int, mu: Any) -> Any:
    c = pi - mu
    beta = rho * c + mu
    f, f1, f2 = beta * (1 - beta), c * (1 - 2 * beta), -2 * c * c
    # I = V(1) - V(rho), V = f / (rho^2 N): I'' = -(f''/rho^2 - 4 f'/rho^3 + 6 f/rho^4) / N
    return -(f2 / rho**2 - 4 * f1 / rho**3 + 6 * f / rho**4) / n


def data_quality_slope(
    rho: Number, pi: Number, n: int = 1, mu: Number = Fraction(1, 2)
) -> Fraction:
    """``dI/drho``, exactly: the slope in eq. B-11 (corrected; see the module docstring).

    ``I'(rho) = [2 beta (1 - beta) / rho^3 - (pi - mu)(1 - 2 beta) / rho^2] / N`` with
    ``beta = rho (pi - mu) + mu``; for ``mu = 1/2`` this is ``1 / (2 rho^3 N)``.
    """
    r = _truth_prob(rho)
    p = _probability(pi, "pi", open_interval=False)
    m = _probability(mu, "mu", open_interval=True)
    return _slope_rho(r, p, _population(n), m)


def data_quality_curvature(
    rho: Number, pi: Number, n: int = 1, mu: Number = Fraction(1, 2)
) -> Fraction:
    """``d2I/drho2``, exactly (second derivative of eqs. B-8, B-9).

    With ``f = beta (1 - beta)``, ``f' = (pi - mu)(1 - 2 beta)``, ``f'' = -2 (pi - mu)^2``:
    ``I''(rho) = -(f'' / rho^2 - 4 f' / rho^3 + 6 f / rho^4) / N``; for ``mu = 1/2``,
    ``-3 / (2 rho^4 N)``.
    """
    r = _truth_prob(rho)
    p = _probability(pi, "pi", open_interval=False)
    m = _probability(mu, "mu", open_interval=True)
    return _curvature_rho(r, p, _population(n), m)


def epsilon_of_truth_probability(rho: Number, mu: Number = Fraction(1, 2)) -> float:
    """Privacy loss of randomized response (eqs. B-2 to B-4), rounded up to a float.

    ``epsilon(rho) = log max(1 + rho / ((1 - rho) mu), 1 + rho / ((1 - rho)(1 - mu)))``;
    with ``mu = 1/2``, ``log((1 + rho) / (1 - rho))`` (eq. B-4). ``rho = 1`` gives
    ``inf``.
    """
    r = _truth_prob(rho)
    m = _probability(mu, "mu", open_interval=True)
    if r == 1:
        return math.inf
    factor = 1 + r / ((1 - r) * min(m, 1 - m))
    with mpmath.workdps(_DPS):
        value = mpmath.log(_mpf(factor))
        f = float(value)
        return math.nextafter(f, math.inf) if f < value else f


# -- epsilon domain (mpmath) --------------------------------------------------------------


def _rho_and_derivatives(eps: mpmath.mpf, m: mpmath.mpf) -> tuple[Any, Any, Any]:
    """``rho(eps)`` (B-10), ``rho'(eps)`` (B-12) and ``rho''(eps)`` for ``m = min(mu, 1-mu)``.

    ``rho = m (E - 1) / D`` with ``E = e^eps``, ``D = 1 + m (E - 1)``;
    ``rho' = m E / D^2``; ``rho'' = m E (D - 2 m E) / D^3``. For ``m = 1/2``:
    ``tanh(eps/2)``, ``1 / (1 + cosh eps)`` and ``-sinh eps / (1 + cosh eps)^2``.
    """
    big = mpmath.expm1(eps)  # E - 1, accurate for small eps
    e = big + 1
    d = 1 + m * big
    return m * big / d, m * e / d**2, m * e * (d - 2 * m * e) / d**3


def truth_probability(epsilon: Number, mu: Number = Fraction(1, 2)) -> float:
    """``rho(epsilon)``, eq. B-10: ``(e^eps - 1) / (1 + e^eps)`` for ``mu = 1/2``.

    For other ``mu``, the inverse of eqs. B-2/B-3: ``m (e^eps - 1) / (1 + m (e^eps - 1))``
    with ``m = min(mu, 1 - mu)``.
    """
    e = _epsilon(epsilon)
    m = _probability(mu, "mu", open_interval=True)
    with mpmath.workdps(_DPS):
        rho, _, _ = _rho_and_derivatives(_mpf(e), _mpf(min(m, 1 - m)))
        return float(rho)


@dataclass(frozen=True)
class RRFrontierPoint:
    """One point of the randomized-response frontier (Abowd & Schmutte App. B).

    Attributes:
        epsilon: privacy loss.
        pi, n, mu: the population share, population size and innocuous "yes" rate.
        rho: truth probability at ``epsilon`` (eq. B-10).
        drho_deps: ``rho'(epsilon)`` (eq. B-12).
        variance: ``Var[pi_hat(rho)]`` (eq. B-8).
        variance_no_privacy: ``Var[pi_hat(1)] = pi (1 - pi) / N``.
        quality: ``I`` (eq. B-9).
        slope: ``dI/depsilon`` (eqs. B-11, B-12), the marginal rate of transformation.
        curvature: ``d2I/depsilon2``.
    """

    epsilon: float
    pi: float
    n: int
    mu: float
    rho: float
    drho_deps: float
    variance: float
    variance_no_privacy: float
    quality: float
    slope: float
    curvature: float

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, with the per-respondent values ``N * I``, ``N * dI/deps``, ``N * d2I/deps2``."""
        return {
            "epsilon": self.epsilon,
            "pi": self.pi,
            "n": self.n,
            "mu": self.mu,
            "rho": self.rho,
            "drho_deps": self.drho_deps,
            "variance": self.variance,
            "variance_no_privacy": self.variance_no_privacy,
            "I": self.quality,
            "dI_deps": self.slope,
            "d2I_deps2": self.curvature,
            "I_times_N": self.quality * self.n,
            "dI_deps_times_N": self.slope * self.n,
            "d2I_deps2_times_N": self.curvature * self.n,
            "equations": {
                "rho": "B-10",
                "drho_deps": "B-12",
                "variance": "B-8",
                "I": "B-9",
                "dI_deps": "B-11 x B-12 (chain rule)",
                "d2I_deps2": "I''(rho) rho'^2 + I'(rho) rho''",
            },
        }


def _frontier_mp(e: Fraction, p: Fraction, n: int, m: Fraction) -> tuple[Any, ...]:
    """``(rho, rho', V(rho), V(1), I, dI/deps, d2I/deps2)`` as mpf, all divided by ``N``."""
    eps = _mpf(e)
    mm = _mpf(min(m, 1 - m))
    pi, mu = _mpf(p), _mpf(m)
    rho, d1, d2 = _rho_and_derivatives(eps, mm)
    beta = rho * (pi - mu) + mu
    var = beta * (1 - beta) / (rho**2 * n)
    var1 = pi * (1 - pi) / n
    if mu == mpmath.mpf(1) / 2:
        # closed forms in x = eps/2, free of the cancellation in V(1) - V(rho) at large eps
        x = eps / 2
        s, c = mpmath.sinh(x), mpmath.cosh(x)
        quality = -1 / (4 * s**2 * n)
        slope = c / (4 * s**3 * n)
        curvature = -(1 + 2 * c**2) / (8 * s**4 * n)
    else:
        quality = var1 - var
        i1 = _slope_rho(rho, pi, n, mu)
        i2 = _curvature_rho(rho, pi, n, mu)
        slope = i1 * d1
        curvature = i2 * d1**2 + i1 * d2
    return rho, d1, var, var1, quality, slope, curvature


def rr_frontier(
    epsilon: Number, pi: Number = Fraction(1, 2), n: int = 1, mu: Number = Fraction(1, 2)
) -> RRFrontierPoint:
    """The randomized-response frontier at ``epsilon``: ``I``, ``dI/deps``, ``d2I/deps2``.

    ``rho = rho(eps)`` (eq. B-10); ``I = Var[pi_hat(1)] - Var[pi_hat(rho)]`` (eqs. B-8,
    B-9); ``dI/deps = I'(rho) rho'(eps)`` (eqs. B-11, B-12, with B-11 read as the true
    derivative; see the module docstring); ``d2I/deps2 = I''(rho) rho'(eps)^2 +
    I'(rho) rho''(eps)``. For ``mu = 1/2`` these are ``-1/(4 N sinh^2(eps/2))``,
    ``cosh(eps/2) / (4 N sinh^3(eps/2))`` and ``-(1 + 2 cosh^2(eps/2)) / (8 N
    sinh^4(eps/2))``, independent of ``pi``.

    Args:
        epsilon: privacy loss, ``> 0``.
        pi: population share with the sensitive trait (default 1/2).
        n: population size ``N`` (default 1: per-respondent values).
        mu: innocuous "yes" probability (default 1/2, which minimises the privacy loss
            for a given ``rho``).

    Raises:
        BudgetError: for a non-positive epsilon.
        ConfigError: for ``pi``, ``n`` or ``mu`` out of range.
    """
    e = _epsilon(epsilon)
    p = _probability(pi, "pi", open_interval=False)
    m = _probability(mu, "mu", open_interval=True)
    nn = _population(n)
    with mpmath.workdps(_DPS):
        rho, d1, var, var1, quality, slope, curvature = _frontier_mp(e, p, nn, m)
        return RRFrontierPoint(
            epsilon=float(e),
            pi=float(p),
            n=nn,
            mu=float(m),
            rho=float(rho),
            drho_deps=float(d1),
            variance=float(var),
            variance_no_privacy=float(var1),
            quality=float(quality),
            slope=float(slope),
            curvature=float(curvature),
        )


@dataclass(frozen=True)
class RandomizedResponseFrontier:
    """``I(epsilon)`` of randomized response as a frontier for :mod:`censusdp.tradeoff.social_choice`.

    Attributes:
        pi: population share with the trait.
        n: population size.
        mu: innocuous "yes" probability.
    """

    pi: Fraction = Fraction(1, 2)
    n: int = 1
    mu: Fraction = Fraction(1, 2)
    label: str = "randomized response: I = Var[pi_hat(1)] - Var[pi_hat(q(eps))]"

    def __post_init__(self) -> None:
        object.__setattr__(self, "pi", _probability(self.pi, "pi", open_interval=False))
        object.__setattr__(self, "mu", _probability(self.mu, "mu", open_interval=True))
        _population(self.n)

    def quality(self, epsilon: float) -> float:
        """``I(epsilon)`` (eq. B-9)."""
        return rr_frontier(epsilon, self.pi, self.n, self.mu).quality

    def slope(self, epsilon: float) -> float:
        """``dI/depsilon`` (eqs. B-11, B-12)."""
        return rr_frontier(epsilon, self.pi, self.n, self.mu).slope

    def curvature(self, epsilon: float) -> float:
        """``d2I/depsilon2``."""
        return rr_frontier(epsilon, self.pi, self.n, self.mu).curvature
