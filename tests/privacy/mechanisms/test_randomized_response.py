"""Randomized response (Abowd & Schmutte (2019), Appendix B)."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from censusdp.privacy.mechanisms import RandomizedResponse
from censusdp.privacy.randomness import RandomSource


@pytest.mark.parametrize("rho", [Fraction(1, 10), Fraction(1, 2), Fraction(9, 10)])
def test_epsilon_of_rho_eq_b4(rho: Fraction) -> None:
    """Eq. (B-4): epsilon(rho) = log((1 + rho) / (1 - rho)) when mu = 1/2."""
    rr = RandomizedResponse(rho)
    assert rr.epsilon() == pytest.approx(math.log((1 + rho) / (1 - rho)), rel=1e-15)
    with mpmath.workprec(200):
        exact = mpmath.log(mpmath.mpf((1 + rho).numerator) / (1 - rho).numerator)
        assert rr.epsilon() >= exact  # rounded up, never below the true value


def test_epsilon_with_unbalanced_mu_is_max_of_b2_b3() -> None:
    rr = RandomizedResponse(Fraction(1, 2), Fraction(1, 5))
    b2 = 1 + 0.5 / (0.5 * 0.2)
    b3 = 1 + 0.5 / (0.5 * 0.8)
    assert rr.epsilon() == pytest.approx(math.log(max(b2, b3)))


def test_from_epsilon_inverts_b4_conservatively() -> None:
    rr = RandomizedResponse.from_epsilon(1)
    assert rr.epsilon() <= 1.0 + 1e-15
    assert float(rr.truth_probability) == pytest.approx(math.tanh(0.5), abs=1e-14)


def test_responses_are_exact_mixture_and_estimator_is_unbiased() -> None:
    """E[beta_hat] = pi rho + mu (1 - rho); pi_hat unbiased with variance (B-8)."""
    n, pi = 200_000, 0.3
    truth = (np.arange(n) < int(pi * n)).astype(np.int8)
    rr = RandomizedResponse(Fraction(2, 5))
    sd = math.sqrt(rr.estimator_variance(pi, n))
    estimates = [rr.estimate(rr.respond(truth, RandomSource.seeded(s))) for s in range(20)]
    assert abs(np.mean(estimates) - pi) < 4 * sd / math.sqrt(20)
    # the spread of the estimates matches eq. (B-8) within sampling error
    assert 0.5 * sd < np.std(estimates, ddof=1) < 1.6 * sd
    d = rr.respond(truth, RandomSource.seeded(99))
    assert set(np.unique(d)) <= {0, 1}
    beta = d.mean()
    assert abs(beta - (pi * 0.4 + 0.5 * 0.6)) < 5 * math.sqrt(0.42 * 0.58 / n)
