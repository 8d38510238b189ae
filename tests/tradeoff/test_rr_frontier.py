"""The randomized-response frontier of Abowd & Schmutte (2019), Online Appendix B.

Independent checks: the variance (B-8) and quality (B-9) are re-typed here from the
appendix and differentiated numerically with mpmath; closed forms are recomputed with
the math module; (B-8) is checked by simulating the survey.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.errors import BudgetError, CensusDPError, ConfigError
from censusdp.privacy.mechanisms import RandomizedResponse
from censusdp.tradeoff import (
    RandomizedResponseFrontier,
    data_quality,
    data_quality_curvature,
    data_quality_slope,
    epsilon_of_truth_probability,
    estimator_variance,
    rr_frontier,
    truth_probability,
)


def _quality_of_eps(eps, pi, n, mu):
    """I(eps) typed from the appendix: B-2/B-3 inverted for rho, then B-8 and B-9 (mpmath)."""
    m = min(mu, 1 - mu)
    big = mpmath.expm1(eps)
    rho = m * big / (1 + m * big)

    def var(r):
        beta = r * (pi - mu) + mu
        return beta * (1 - beta) / (r**2 * n)

    return var(mpmath.mpf(1)) - var(rho)


# --- closed-form values (mu = 1/2) -----------------------------------------------------------


@pytest.mark.parametrize("eps", [0.01, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 17.14])
def test_closed_forms_at_several_epsilons(eps):
    """N I = -1/(4 sinh^2(eps/2)), N dI/deps = cosh/(4 sinh^3), N d2I/deps2 = -(1+2cosh^2)/(8 sinh^4)."""
    x = eps / 2
    s, c = math.sinh(x), math.cosh(x)
    d = rr_frontier(eps).as_dict()
    assert d["I_times_N"] == pytest.approx(-1 / (4 * s * s), rel=1e-12)
    assert d["dI_deps_times_N"] == pytest.approx(c / (4 * s**3), rel=1e-12)
    assert d["d2I_deps2_times_N"] == pytest.approx(-(1 + 2 * c * c) / (8 * s**4), rel=1e-12)
    # B-10 and B-12
    assert d["rho"] == pytest.approx((math.exp(eps) - 1) / (1 + math.exp(eps)), rel=1e-13)
    assert d["drho_deps"] == pytest.approx(1 / (1 + math.cosh(eps)), rel=1e-13)


def test_published_shape_at_epsilon_one():
    """At eps = 1: rho = tanh(1/2) = 0.46211..., Var[pi_hat] = 1/(4 rho^2) = 1.17067... per respondent."""
    p = rr_frontier(1)
    assert p.rho == pytest.approx(0.46211715726000974, rel=1e-14)
    assert p.variance == pytest.approx(1.1706735942077924, rel=1e-13)
    assert p.quality == pytest.approx(0.25 - 1.1706735942077924, rel=1e-13)
    assert p.slope == pytest.approx(1.9922947671249873, rel=1e-12)
    assert p.curvature == pytest.approx(-6.00651279663676, rel=1e-12)


@pytest.mark.parametrize(
    "eps,pi,n,mu",
    [
        (1.0, 0.5, 1, 0.5),
        (0.3, 0.1, 1, 0.5),
        (2.5, 0.9, 1000, 0.5),
        (1.0, 0.3, 1, 0.3),
        (3.0, 0.05, 50, 0.8),
        (0.7, 1.0, 7, 0.6),
    ],
)
def test_slope_and_curvature_match_numerical_differentiation(eps, pi, n, mu):
    """dI/deps and d2I/deps2 against mpmath's numerical derivatives of B-8/B-9 (any pi, mu)."""
    with mpmath.workdps(40):
        f = lambda e: _quality_of_eps(e, mpmath.mpf(pi), n, mpmath.mpf(mu))  # noqa: E731
        e0 = mpmath.mpf(eps)
        q, d1, d2 = f(e0), mpmath.diff(f, e0, 1), mpmath.diff(f, e0, 2)
    p = rr_frontier(str(eps), pi=str(pi), n=n, mu=str(mu))
    assert p.quality == pytest.approx(float(q), rel=1e-12)
    assert p.slope == pytest.approx(float(d1), rel=1e-10)
    assert p.curvature == pytest.approx(float(d2), rel=1e-9)


def test_b11_is_the_true_derivative_not_the_printed_powers():
    """The printed B-11 (rho for rho^3, N^2 for N) is off by rho^2 at pi = 1/2; we return the derivative."""
    rho, n = Fraction(1, 2), 10
    var_beta = Fraction(1, 4) / n  # beta = 1/2 at pi = 1/2
    true = data_quality_slope(rho, Fraction(1, 2), n)
    assert true == 2 * var_beta / rho**3 == Fraction(1, 2) / (rho**3 * n)
    printed = 2 * var_beta / rho
    assert true == printed / rho**2 and true != printed
    # and for pi != 1/2 the second term is 2 (pi - 1/2)^2 / (N rho), not / (N^2 rho)
    pi = Fraction(1, 5)
    beta = rho * (pi - Fraction(1, 2)) + Fraction(1, 2)
    vb = beta * (1 - beta) / n
    expected = 2 * vb / rho**3 - (pi - Fraction(1, 2)) * (1 - 2 * pi) / (n * rho)
    assert data_quality_slope(rho, pi, n) == expected


def test_per_respondent_values_do_not_depend_on_n_or_pi_when_mu_is_half():
    base = rr_frontier(1.5).as_dict()
    for pi, n in ((Fraction(1, 10), 1), (Fraction(1, 2), 1000), (Fraction(9, 10), 37)):
        d = rr_frontier(1.5, pi=pi, n=n).as_dict()
        for key in ("I_times_N", "dI_deps_times_N", "d2I_deps2_times_N"):
            assert d[key] == pytest.approx(base[key], rel=1e-12)
        assert d["I"] == pytest.approx(base["I"] / n, rel=1e-12)
    # with mu != 1/2 pi matters
    a = rr_frontier(1.5, pi=Fraction(1, 10), mu=Fraction(3, 10)).quality
    b = rr_frontier(1.5, pi=Fraction(9, 10), mu=Fraction(3, 10)).quality
    assert abs(a - b) > 0.01


# --- exact rho-domain arithmetic ------------------------------------------------------------


def test_variance_b8_exact():
    """rho = 1/2, pi = 1/3, mu = 1/2, N = 3: beta = 5/12, Var = (35/144) / (3/4) = 35/108."""
    v = estimator_variance(Fraction(1, 2), Fraction(1, 3), 3)
    assert v == Fraction(35, 108)
    assert isinstance(v, Fraction)
    assert estimator_variance(1, Fraction(1, 3), 3) == Fraction(2, 27)  # pi (1 - pi) / N


def test_quality_b9_exact_and_slope_curvature_exact():
    rho = Fraction(2, 3)
    assert data_quality(rho, Fraction(1, 7)) == (1 - 1 / rho**2) / 4 == Fraction(-5, 16)
    assert data_quality(1, Fraction(1, 7)) == 0
    assert data_quality_slope(rho, Fraction(1, 7)) == Fraction(1, 2) / rho**3
    assert data_quality_curvature(rho, Fraction(1, 7)) == Fraction(-3, 2) / rho**4


def test_matches_the_mechanism_module():
    """The same B-8 as censusdp.privacy.mechanisms.RandomizedResponse, and B-4 inverts B-10."""
    for rho in (Fraction(1, 10), Fraction(1, 2), Fraction(9, 10)):
        mech = RandomizedResponse(rho)
        assert float(estimator_variance(rho, Fraction(3, 10), 50)) == pytest.approx(
            mech.estimator_variance(0.3, 50), rel=1e-14
        )
        assert epsilon_of_truth_probability(rho) == pytest.approx(mech.epsilon(), rel=1e-15)
    for eps in (0.1, 1.0, 5.0):
        assert epsilon_of_truth_probability(
            Fraction(truth_probability(eps)).limit_denominator(10**15)
        ) == pytest.approx(eps, rel=1e-12)


def test_unbalanced_mu_uses_the_larger_bayes_factor():
    """B-2/B-3: epsilon = log(1 + rho / ((1 - rho) min(mu, 1 - mu)))."""
    eps = epsilon_of_truth_probability(Fraction(1, 2), mu=Fraction(1, 5))
    assert eps == pytest.approx(math.log(1 + 0.5 / (0.5 * 0.2)), rel=1e-15)
    assert truth_probability(eps, mu=Fraction(4, 5)) == pytest.approx(0.5, rel=1e-12)


def test_variance_b8_by_simulating_the_survey():
    """Var[pi_hat] over 4,000 simulated surveys of N = 400; accepts B-8, rejects it 30% off.

    For K independent estimates the sample variance s^2 satisfies (K-1) s^2 / V ~ chi2(K-1)
    approximately; the 99.99% interval is about V (1 +- 0.085).
    """
    rng = np.random.default_rng(20240601)
    n, k = 400, 4000
    rho, pi, mu = 0.4, 0.3, 0.5
    y1 = rng.random((k, n)) < pi
    y0 = rng.random((k, n)) < mu
    t = rng.random((k, n)) < rho
    d = np.where(t, y1, y0)
    pi_hat = (d.mean(axis=1) - mu * (1 - rho)) / rho
    s2 = pi_hat.var(ddof=1)
    v = float(estimator_variance("0.4", "0.3", n))
    assert abs(pi_hat.mean() - pi) < 5 * math.sqrt(v / k)
    assert abs(s2 / v - 1) < 0.085
    assert abs(s2 / (1.3 * v) - 1) > 0.085
    assert abs(s2 / (v / 1.3) - 1) > 0.085


# --- shape of the frontier ------------------------------------------------------------------


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    eps=st.floats(min_value=0.01, max_value=30.0),
    pi=st.fractions(min_value=0, max_value=1, max_denominator=100),
)
def test_frontier_is_negative_increasing_and_concave(eps, pi):
    """B-9 <= 0, dI/deps > 0 and d2I/deps2 < 0 (the appendix's claims, mu = 1/2)."""
    p = rr_frontier(eps, pi=pi)
    assert p.quality < 0
    assert p.slope > 0
    assert p.curvature < 0


def test_frontier_object_matches_point_function():
    f = RandomizedResponseFrontier(pi=Fraction(1, 4), n=10)
    p = rr_frontier(2, pi=Fraction(1, 4), n=10)
    assert (f.quality(2), f.slope(2), f.curvature(2)) == (p.quality, p.slope, p.curvature)


@pytest.mark.parametrize(
    "kwargs,err,match",
    [
        ({"epsilon": 0}, BudgetError, "epsilon is 0; it must be positive"),
        ({"epsilon": -1}, BudgetError, "must be positive"),
        ({"epsilon": "nan"}, BudgetError, "epsilon"),
        ({"epsilon": 1, "pi": Fraction(3, 2)}, ConfigError, "pi is 3/2"),
        ({"epsilon": 1, "n": 0}, ConfigError, "population size N is 0"),
        ({"epsilon": 1, "n": 2.5}, ConfigError, "population size N"),
        ({"epsilon": 1, "mu": 1}, ConfigError, "mu is 1; it must satisfy 0 < mu < 1"),
    ],
)
def test_invalid_parameters_are_named(kwargs, err, match):
    with pytest.raises(err, match=match):
        rr_frontier(**kwargs)
    assert issubclass(err, CensusDPError)


def test_invalid_truth_probability():
    with pytest.raises(ConfigError, match="truth probability rho is 0"):
        estimator_variance(0, Fraction(1, 2))
    with pytest.raises(ConfigError, match="truth probability rho is 3/2"):
        data_quality(Fraction(3, 2), Fraction(1, 2))
