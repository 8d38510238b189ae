"""One-level risk (Kazan & Reiter (2022) sec. 3.1): Tables 3-4, Fig. 3, sec. 2.1/2.3 numbers."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.errors import CensusDPError
from censusdp.privacy.accounting import epsilon_from_rho, implied_epsilon
from censusdp.risk import (
    NoiseModel,
    attack_risk,
    correct_decision_probability,
    decision_threshold,
    marginal_posterior,
    marginal_risk,
    one_level_risk,
    posterior,
    probability_mass,
    risk_ratio,
    unknown_attribute_posterior,
    unknown_attribute_risk,
)
from profiles import examples

# Kazan & Reiter (2022) sec. 2.3: rho_1 = 2.56 x 165/4099 x 3945/4097 ~= 0.099
RHO1 = Fraction(256, 100) * Fraction(165, 4099) * Fraction(3945, 4097)
DG1 = NoiseModel.discrete_gaussian(RHO1)
PRIORS = (0.5, 0.2, 0.1, 0.02)

# Kazan & Reiter (2022) Table 3: x* -> (probability mass, posteriors for p = 1/2, 1/5, 1/10, 1/50, risks)
TABLE3 = {
    1: (0.161, (0.525, 0.216, 0.109, 0.022), (1.05, 1.08, 1.09, 1.10)),
    2: (0.119, (0.574, 0.252, 0.130, 0.027), (1.15, 1.26, 1.30, 1.34)),
    3: (0.073, (0.622, 0.291, 0.154, 0.032), (1.24, 1.46, 1.54, 1.62)),
    4: (0.036, (0.667, 0.334, 0.182, 0.039), (1.33, 1.67, 1.82, 1.96)),
    5: (0.015, (0.710, 0.379, 0.213, 0.047), (1.42, 1.90, 2.13, 2.37)),
}
# Kazan & Reiter (2022) Table 4: p -> (marginal posterior, R)
TABLE4 = {0.5: (0.524, 1.05), 0.2: (0.225, 1.13), 0.1: (0.117, 1.17), 0.02: (0.024, 1.21)}


def test_rho1_value() -> None:
    """Sec. 2.3: the block detailed query gets rho ~= 0.103 x 3945/4097 ~= 0.099."""
    assert float(RHO1) == pytest.approx(0.0992, abs=5e-5)
    assert float(Fraction(256, 100) * Fraction(165, 4099)) == pytest.approx(0.103, abs=5e-4)


@pytest.mark.parametrize("x", sorted(TABLE3))
def test_table3(x: int) -> None:
    """Kazan & Reiter (2022) Table 3 to the printed digits (mass column is P[eta = x*], see docstring)."""
    mass, posts, risks = TABLE3[x]
    assert float(probability_mass(x, noise=DG1, true_count=0)) == pytest.approx(mass, abs=5e-4)
    for p, post, risk in zip(PRIORS, posts, risks, strict=True):
        assert float(posterior(x, prior=p, noise=DG1)) == pytest.approx(post, abs=5e-4)
        assert float(risk_ratio(x, prior=p, noise=DG1)) == pytest.approx(risk, abs=5e-3)


def test_table3_mass_text() -> None:
    """Sec. 4.2.1: x* = 4 occurs 3.6% of the time, x* = 5 1.5%."""
    m = probability_mass(np.array([4, 5]), noise=DG1, true_count=0)
    assert m[0] == pytest.approx(0.036, abs=5e-4)
    assert m[1] == pytest.approx(0.015, abs=5e-4)


@pytest.mark.parametrize("p", PRIORS)
def test_table4(p: float) -> None:
    """Kazan & Reiter (2022) Table 4: marginal posterior (eq. 14) and R (eq. 15)."""
    post, risk = TABLE4[p]
    mp = marginal_posterior(prior=p, noise=DG1)
    assert mp.value == pytest.approx(post, abs=5e-4)
    assert mp.error_bound <= 1e-15
    assert marginal_risk(prior=p, noise=DG1).value == pytest.approx(risk, abs=5e-3)


def test_correct_decision_059() -> None:
    """Sec. 4.2.3: at p = 1/2 the 0-1 intruder is right with probability 0.59 (58.89%, sec. 4.3.3)."""
    v = correct_decision_probability(prior=0.5, noise=DG1)
    assert v.value == pytest.approx(0.5889, abs=5e-5)
    # closed form: P[eta >= 0] = 1/2 + P[eta = 0] / 2
    assert v.value == pytest.approx(0.5 + 0.5 * float(DG1.pmf(np.array(0))), rel=1e-12)
    assert decision_threshold(prior=0.5, noise=DG1) == 1
    # p <= 1/5: "a fraction of a percent"
    for p in (0.2, 0.1, 0.02):
        assert correct_decision_probability(prior=p, noise=DG1).value < 0.005


def test_fig3_jagged() -> None:
    """Sec. 4.2.3: p = 1/5, rho 0.5 -> 0.30 and rho 0.6 -> 0.28, both with threshold 2."""
    a = NoiseModel.discrete_gaussian("1/2")
    b = NoiseModel.discrete_gaussian("3/5")
    assert decision_threshold(prior=0.2, noise=a) == 2
    assert decision_threshold(prior=0.2, noise=b) == 2
    va = correct_decision_probability(prior=0.2, noise=a).value
    vb = correct_decision_probability(prior=0.2, noise=b).value
    assert va == pytest.approx(0.30, abs=5e-3)
    assert vb == pytest.approx(0.28, abs=5e-3)
    assert vb < va  # non-monotone in rho: the jagged curve of Fig. 3
    # p = 1/2 is monotone in rho on the same grid
    grid = np.geomspace(0.01, 10, 60)
    half = [
        correct_decision_probability(prior=0.5, noise=NoiseModel.discrete_gaussian(float(g))).value
        for g in grid
    ]
    assert np.all(np.diff(half) > 0)
    fifth = [
        correct_decision_probability(prior=0.2, noise=NoiseModel.discrete_gaussian(float(g))).value
        for g in grid
    ]
    assert np.any(np.diff(fifth) < 0)


def test_fig2_limits() -> None:
    """Sec. 4.2.2: posterior -> p and R -> 1 as rho -> 0; R -> 1/p as rho grows."""
    small = NoiseModel.discrete_gaussian("1/10000")
    large = NoiseModel.discrete_gaussian(50)
    for p in PRIORS:
        assert marginal_risk(prior=p, noise=small).value == pytest.approx(1.0, abs=0.02)
        assert marginal_risk(prior=p, noise=large).value == pytest.approx(1 / p, rel=1e-6)


def test_section21_tails() -> None:
    """Sec. 2.1: around 5 with rho = 1/2, P[X* <= 2 or X* >= 8] = 0.91%; geometric eps = 1: 7.28%."""
    assert NoiseModel.discrete_gaussian("1/2").tail(3) == pytest.approx(0.0091, abs=5e-5)
    assert NoiseModel.geometric(1).tail(3) == pytest.approx(0.0728, abs=5e-5)


def test_zcdp_conversions() -> None:
    """Secs. 2.1/2.3: eps = 1 -> rho = 1/2 -> eps ~= 6.839; rho 2.56 -> 17.14/17.158; implied 2.26, 0.45.

    Checked against :mod:`censusdp.privacy.accounting` and an independent minimisation of eq. 7.
    """
    from scipy.optimize import minimize_scalar

    def eq7(rho: float, delta: float = 1e-10) -> float:
        f = lambda a: rho * a + math.log(1 - 1 / a) - math.log(a * delta) / (a - 1)  # noqa: E731
        r = minimize_scalar(
            lambda u: f(1 + math.exp(u)),
            bounds=(-12, 12),
            method="bounded",
            options={"xatol": 1e-12},
        )
        return float(r.fun)

    for rho, expected in ((0.5, 6.839), (2.56, 17.158), (float(Fraction(542, 339) ** 2), 17.14)):
        acc = epsilon_from_rho(rho if rho != 2.56 else "2.56", "1e-10")
        assert acc == pytest.approx(expected, abs=6e-3)
        assert acc == pytest.approx(eq7(rho), abs=1e-6)
    assert implied_epsilon("2.56") == pytest.approx(2.26, abs=5e-3)
    assert implied_epsilon(Fraction(256, 100) * Fraction(165, 4099)) == pytest.approx(
        0.45, abs=5e-3
    )


def test_geometric_eq12() -> None:
    """Eq. 12: with geometric noise the posterior takes two values, logistic(logit p +- eps)."""
    g = NoiseModel.geometric(1)
    post = posterior(np.arange(-5, 7), prior=0.5, noise=g)
    e = math.e
    assert np.allclose(post[post > 0.5], e / (1 + e))
    assert np.allclose(post[post < 0.5], 1 / (1 + e))
    assert decision_threshold(prior=0.2, noise=g) is None  # logit(0.2) + 1 < 0
    assert correct_decision_probability(prior=0.2, noise=g).value == 0.0
    # p = 1/2: decide k + 1 iff x* - k >= 1: P[eta >= 0] = 1/(1+a)
    a = math.exp(-1)
    assert correct_decision_probability(prior=0.5, noise=g).value == pytest.approx(1 / (1 + a))


@settings(max_examples=examples(40), deadline=None)
@given(
    rho=st.floats(0.005, 5.0),
    p=st.floats(0.01, 0.99),
    k=st.integers(0, 50),
    x=st.integers(-30, 30),
)
def test_independent_posterior(rho: float, p: float, k: int, x: int) -> None:
    """Eq. 11 written out directly, and sec. 5.2: non-unique targets are shifted copies."""
    noise = NoiseModel.discrete_gaussian(rho)
    import mpmath

    a = mpmath.mpf(p) * mpmath.exp(-mpmath.mpf(rho) * (x - 1) ** 2)
    b = (1 - mpmath.mpf(p)) * mpmath.exp(-mpmath.mpf(rho) * x**2)
    assert float(posterior(x, prior=p, noise=noise)) == pytest.approx(float(a / (a + b)), rel=1e-9)
    assert float(posterior(x + k, prior=p, noise=noise, known=k)) == pytest.approx(
        float(posterior(x, prior=p, noise=noise)), rel=1e-12
    )


@settings(max_examples=examples(25), deadline=None)
@given(rho=st.floats(0.01, 3.0), p=st.floats(0.02, 0.98))
def test_marginals_by_brute_force(rho: float, p: float) -> None:
    """Eqs. 14, 18 against a brute-force sum over |eta| <= 400 with the pmf written out."""
    noise = NoiseModel.discrete_gaussian(rho)
    eta = np.arange(-400, 401)
    w = np.exp(-rho * eta.astype(float) ** 2)
    w /= w.sum()
    x = 1 + eta
    lo = math.log(p / (1 - p)) + rho * (2 * x - 1)
    post = 1 / (1 + np.exp(-np.clip(lo, -700, 700)))
    r = one_level_risk(prior=p, noise=noise)
    assert r.marginal_posterior.value == pytest.approx(float(np.sum(post * w)), abs=1e-12)
    assert r.correct_decision.value == pytest.approx(float(np.sum(w[post > 0.5])), abs=1e-12)
    assert r.marginal_risk.value == pytest.approx(r.marginal_posterior.value / p, rel=1e-12)


def test_attacks_share_the_arithmetic() -> None:
    """Sec. 5.1 (eqs. 36, 38): participation and truthfulness are eq. 9 with other priors."""
    base = one_level_risk(prior=0.3, noise=DG1)
    for attack in ("participation", "truthful"):
        r = attack_risk(attack, prior=0.3, noise=DG1)
        assert r.attack == attack
        assert r.marginal_risk == base.marginal_risk
    with pytest.raises(CensusDPError, match="attack is 'guess'"):
        attack_risk("guess", prior=0.3, noise=DG1)


def test_unknown_attribute() -> None:
    """Eq. 37: two levels, checked by a brute-force double sum; m levels by simulation."""
    r = unknown_attribute_risk(priors=[0.5, 0.5], true_level=0, noise=DG1)
    eta = np.arange(-60, 61)
    w = DG1.pmf(eta)
    za = (1 + eta)[:, None].astype(float)
    zb = eta[None, :].astype(float)
    lo = float(RHO1) * (2 * za - 1) - float(RHO1) * (2 * zb - 1)
    post = 1 / (1 + np.exp(-np.clip(lo, -700, 700)))
    ww = w[:, None] * w[None, :]
    assert r.marginal_posterior.value == pytest.approx(float(np.sum(post * ww)), abs=1e-12)
    assert r.correct_decision.value == pytest.approx(float(np.sum(ww[lo > 0])), abs=1e-12)
    # posterior for given counts sums to one, favours the level with the larger excess
    post = unknown_attribute_posterior(
        np.array([5, 2]), known=np.array([1, 2]), priors=[0.5, 0.5], noise=DG1
    )
    assert post.sum() == pytest.approx(1.0)
    assert post[0] > post[1]
    # m = 4 levels: exact probability vs a seeded simulation (3 standard errors)
    m4 = unknown_attribute_risk(priors=[0.4, 0.3, 0.2, 0.1], true_level=1, noise=DG1)
    rng = np.random.default_rng(7)
    k = np.arange(-40, 41)
    pk = DG1.pmf(k)
    n = 40000
    noise = rng.choice(k, size=(n, 4), p=pk / pk.sum())
    x = noise + np.array([0, 1, 0, 0])
    s = np.log([0.4, 0.3, 0.2, 0.1]) + float(RHO1) * (2 * x - 1)
    hit = np.mean((s[:, 1][:, None] > np.delete(s, 1, axis=1)).all(axis=1))
    se = math.sqrt(hit * (1 - hit) / n)
    assert abs(hit - m4.correct_decision.value) < 4 * se
    assert m4.marginal_posterior is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"prior": 0.0}, "prior is 0.0"),
        ({"prior": 1.0}, "prior is 1.0"),
        ({"prior": 0.5, "tol": 0.5}, "tol is 0.5"),
    ],
)
def test_invalid_inputs(kwargs: dict, match: str) -> None:
    with pytest.raises(CensusDPError, match=match):
        one_level_risk(noise=DG1, **kwargs)


def test_invalid_levels() -> None:
    with pytest.raises(CensusDPError, match="must be positive and sum to 1"):
        unknown_attribute_risk(priors=[0.5, 0.6], true_level=0, noise=DG1)
    with pytest.raises(CensusDPError, match="true_level is 3"):
        unknown_attribute_risk(priors=[0.5, 0.5], true_level=3, noise=DG1)
    with pytest.raises(CensusDPError, match="rho is -1"):
        NoiseModel.discrete_gaussian(-1)
