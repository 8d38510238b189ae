"""Randomized response (Warner 1965) as analysed in Abowd & Schmutte (2019), Appendix B.

Each respondent ``i`` has a sensitive bit ``Y_i(1)``. With probability ``rho`` (the
*truth probability*; not the zCDP rho) the survey records it, otherwise it records
an innocuous bit ``Y_i(0) ~ Bernoulli(mu)`` independent of everything else:
``d_i = T_i Y_i(1) + (1 - T_i) Y_i(0)`` (eq. B-1).

* Privacy (eqs. B-2 to B-4): ``epsilon = log max(1 + rho / ((1 - rho) mu),
  1 + rho / ((1 - rho)(1 - mu)))``, which for ``mu = 1/2`` is
  ``epsilon(rho) = log((1 + rho) / (1 - rho))``.
* Unbiased estimator (App. B and eq. B-5): ``pi_hat = (beta_hat - mu (1 - rho)) / rho``
  with ``beta_hat`` the mean response, and variance (eq. B-8)
  ``[rho (pi - mu) + mu][1 - rho (pi - mu) - mu] / (rho^2 N)``.

Coins are exact: ``Bernoulli(a / b)`` for rational ``a / b`` is ``U < a`` with ``U``
exactly uniform on ``0..b-1`` (rejection sampling from the secure stream).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np

from censusdp.errors import BudgetError, CensusDPError
from censusdp.privacy.parameters import as_fraction, positive_fraction
from censusdp.privacy.randomness import RandomSource

__all__ = ["RandomizedResponse"]


def _bernoulli(p: Fraction, n: int, source: RandomSource) -> np.ndarray:
    if p.denominator > 2**63:
        raise BudgetError(f"probability {p} has a denominator above 2**63")
    return source.integers(n, p.denominator) < p.numerator


def _round_up(x: mpmath.mpf) -> float:
    f = float(x)
    return math.nextafter(f, math.inf) if f < x else f


@dataclass(frozen=True)
class RandomizedResponse:
    """Warner's randomized response with truth probability ``rho`` (Abowd & Schmutte (2019) App. B).

    Attributes:
        truth_probability: ``rho`` in Abowd & Schmutte (2019), ``0 < rho < 1``: probability that
            the sensitive answer is recorded.
        innocuous_probability: ``mu``, ``0 < mu < 1``: probability that the innocuous
            answer is 1 (``1/2`` minimises the privacy loss).
    """

    truth_probability: Fraction
    innocuous_probability: Fraction = Fraction(1, 2)
    name: str = field(default="randomized_response", init=False, repr=False)
    privacy_measure: str = field(default="pure", init=False, repr=False)
    exact: bool = field(default=True, init=False, repr=False)

    def __post_init__(self) -> None:
        rho = positive_fraction(self.truth_probability, "truth_probability")
        if rho >= 1:
            raise BudgetError(
                f"truth_probability is {rho}; it must be < 1 (1 means no privacy at all)"
            )
        mu = as_fraction(self.innocuous_probability, "innocuous_probability")
        if not 0 < mu < 1:
            raise BudgetError(f"innocuous_probability is {mu}; it must satisfy 0 < mu < 1")
        object.__setattr__(self, "truth_probability", rho)
        object.__setattr__(self, "innocuous_probability", mu)

    @classmethod
    def from_epsilon(cls, epsilon: Fraction | int | str | float) -> RandomizedResponse:
        """The largest rational ``rho`` (to ``1e-15``) with ``log((1+rho)/(1-rho)) <= epsilon``.

        Inverse of eq. B-4 with ``mu = 1/2``: ``rho = (e^eps - 1) / (e^eps + 1)``,
        rounded down so the guarantee is never weaker than asked for.
        """
        e = positive_fraction(epsilon, "epsilon")
        with mpmath.workprec(200):
            x = mpmath.mpf(e.numerator) / e.denominator
            rho = mpmath.tanh(x / 2)
            den = 10**15
            num = int(mpmath.floor(rho * den))
        if num <= 0:
            raise BudgetError(f"epsilon {e} is too small for randomized response")
        return cls(Fraction(num, den))

    def epsilon(self, sensitivity: int = 1) -> float:
        """``log max(1 + rho/((1-rho) mu), 1 + rho/((1-rho)(1-mu)))`` (eqs. B-2, B-3), rounded up.

        ``sensitivity`` must be 1 (one respondent's own answer).
        """
        if sensitivity != 1:
            raise BudgetError(f"randomized response has sensitivity 1, got {sensitivity}")
        rho, mu = self.truth_probability, self.innocuous_probability
        factor = 1 + rho / ((1 - rho) * min(mu, 1 - mu))
        with mpmath.workprec(200):
            return _round_up(mpmath.log(mpmath.mpf(factor.numerator) / factor.denominator))

    def rho(self, sensitivity: int = 1) -> float:
        """zCDP ``epsilon^2 / 2`` (Kazan & Reiter (2022) Thm. 2), as a float rounded up."""
        e = self.epsilon(sensitivity)
        return math.nextafter(e * e / 2, math.inf)

    def respond(self, answers: np.ndarray, source: RandomSource) -> np.ndarray:
        """Randomized responses ``d_i`` for true 0/1 ``answers`` (eq. B-1)."""
        x = np.asarray(answers)
        if x.size and not np.isin(x, (0, 1)).all():
            raise CensusDPError("randomized response answers must be 0/1")
        flat = x.reshape(-1).astype(np.int8)
        truth = _bernoulli(self.truth_probability, flat.size, source)
        innocuous = _bernoulli(self.innocuous_probability, flat.size, source).astype(np.int8)
        return np.where(truth, flat, innocuous).reshape(x.shape)

    def release(self, answers: np.ndarray, source: RandomSource) -> np.ndarray:
        """Alias of :meth:`respond` (the mechanism's output)."""
        return self.respond(answers, source)

    def estimate(self, responses: np.ndarray) -> float:
        """Unbiased estimate ``pi_hat = (beta_hat - mu (1 - rho)) / rho`` (Abowd & Schmutte (2019) App. B)."""
        d = np.asarray(responses, dtype=np.float64)
        if d.size == 0:
            raise CensusDPError("cannot estimate a proportion from zero responses")
        rho, mu = float(self.truth_probability), float(self.innocuous_probability)
        return (float(d.mean()) - mu * (1 - rho)) / rho

    def estimator_variance(self, pi: float, n: int) -> float:
        """``Var[pi_hat] = [rho(pi-mu)+mu][1-rho(pi-mu)-mu] / (rho^2 N)`` (eq. B-8)."""
        rho, mu = float(self.truth_probability), float(self.innocuous_probability)
        beta = rho * (pi - mu) + mu
        return beta * (1 - beta) / (rho * rho * n)

    def describe(self) -> dict[str, Any]:
        """Parameters for manifests."""
        return {
            "mechanism": self.name,
            "truth_probability": str(self.truth_probability),
            "innocuous_probability": str(self.innocuous_probability),
            "epsilon": self.epsilon(),
        }
