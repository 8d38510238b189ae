"""rho -> (epsilon, delta) conversions, cross-checked against OpenDP and closed forms."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import optimize, stats

from censusdp.errors import BudgetError
from censusdp.privacy import accounting

RHO_2020 = Fraction(542, 339) ** 2


@pytest.mark.parametrize(
    ("rho", "expected", "digits"),
    [
        (RHO_2020, 17.14, 2),  # Kazan & Reiter 2022 sec. 2.3: 2020 production
        (Fraction("2.56"), 17.158, 3),  # rho = 2.56 under the same conversion
        (Fraction(1, 2), 6.839, 3),  # Kazan & Reiter sec. 2.1: epsilon 1 -> rho 1/2 -> 6.839
    ],
)
def test_reproduces_published_epsilons(rho: Fraction, expected: float, digits: int) -> None:
    assert round(accounting.epsilon_from_rho(rho, Fraction(1, 10**10)), digits) == expected


def test_implied_epsilon_kazan_reiter() -> None:
    """Kazan & Reiter 2022 sec. 2.3: 'the implied epsilon is 2.26' for rho = 2.56."""
    assert round(accounting.implied_epsilon("2.56"), 2) == 2.26
    assert accounting.rho_from_pure_epsilon(1) == Fraction(1, 2)
    assert accounting.rho_from_pure_epsilon("3/2") == Fraction(9, 8)


def _opendp_epsilon(rho: float, delta: float) -> float:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    scale = 1.0
    meas = dp.c.make_zCDP_to_approxDP(
        dp.m.make_gaussian(
            dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=scale
        )
    )
    d_in = math.sqrt(2 * rho) * scale  # rho = d_in^2 / (2 scale^2)
    return float(meas.map(d_in).epsilon(delta))


@pytest.mark.parametrize("rho", [0.001, 0.05, 0.5, 1.0, float(RHO_2020), 10.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-10, 1e-15])
def test_matches_opendp_cks_conversion(rho: float, delta: float) -> None:
    ours = accounting.epsilon_from_rho(rho, delta)
    theirs = _opendp_epsilon(rho, delta)
    assert ours == pytest.approx(theirs, rel=1e-7, abs=1e-9)


def _bruteforce(rho: float, delta: float) -> float:
    def f(log_a1: float) -> float:
        a = 1 + math.exp(log_a1)
        return a * rho + math.log1p(-1 / a) - (math.log(a) + math.log(delta)) / (a - 1)

    grid = np.linspace(-15, 15, 3001)
    best = grid[np.argmin([f(u) for u in grid])]
    res = optimize.minimize_scalar(f, bracket=(best - 0.02, best, best + 0.02))
    return float(res.fun)


@pytest.mark.parametrize("rho", [1e-4, 0.0991, 0.5, 2.56, 40.0])
def test_matches_independent_minimisation_of_eq7(rho: float) -> None:
    """Kazan & Reiter 2022 eq. (7) minimised independently with SciPy."""
    assert accounting.epsilon_from_rho(rho, 1e-10) == pytest.approx(
        _bruteforce(rho, 1e-10), rel=1e-9
    )


@pytest.mark.parametrize("rho", [0.01, 0.5, 2.56])
def test_bound_is_never_below_the_exact_gaussian_curve(rho: float) -> None:
    """The continuous Gaussian's exact (eps, delta) curve (Balle & Wang 2018, Thm. 8)
    lower-bounds any valid conversion of rho-zCDP: CKS must not report less."""
    sigma = 1 / math.sqrt(2 * rho)

    def delta_gauss(eps: float) -> float:
        a, b = 1 / (2 * sigma), eps * sigma
        return stats.norm.cdf(a - b) - math.exp(eps) * stats.norm.cdf(-a - b)

    eps = accounting.epsilon_from_rho(rho, 1e-10)
    assert delta_gauss(eps) <= 1e-10
    simple = accounting.epsilon_from_rho_simple(rho, 1e-10)
    assert simple >= eps
    assert simple == pytest.approx(rho + 2 * math.sqrt(rho * math.log(1e10)), rel=1e-12)


@pytest.mark.parametrize(
    ("rho", "delta_at_zero"), [(Fraction(1, 2), 0.5588356393474347), (RHO_2020, 0.9342646204911147)]
)
def test_delta_for_epsilon_inverts_epsilon_from_rho(rho: Fraction, delta_at_zero: float) -> None:
    eps = accounting.epsilon_from_rho(rho, 1e-10)
    assert accounting.delta_for_epsilon(rho, eps) == pytest.approx(1e-10, rel=1e-6)
    assert accounting.delta_for_epsilon(rho, eps + 0.5) < 1e-10
    # at epsilon 0 the optimum is inside (0, 1), not the cap (values: test_accounting_exact)
    assert accounting.delta_for_epsilon(rho, 0) == pytest.approx(delta_at_zero, rel=1e-14)


def test_rho_from_epsilon_is_conservative_and_tight() -> None:
    r = accounting.rho_from_epsilon("17.14", "1e-10")
    assert accounting.epsilon_from_rho(r, 1e-10) <= 17.14
    assert accounting.epsilon_from_rho(r + Fraction(1, 10**9), 1e-10) > 17.14 - 1e-6
    assert abs(float(r) - float(RHO_2020)) < 1e-3


def test_composition_and_sampling_delta() -> None:
    assert accounting.compose([Fraction(1, 3), Fraction(1, 6), "1/2"]) == 1
    tv = Fraction(1, 2**100)
    got = accounting.sampling_delta(2.0, [tv] * 10)
    # abs=0: pytest.approx's default absolute tolerance (1e-12) would accept any value here
    assert got == pytest.approx((1 + math.exp(2.0)) * 10 * 2.0**-100, rel=1e-12, abs=0)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: accounting.epsilon_from_rho(0, 1e-10), "rho is 0; it must be positive"),
        (lambda: accounting.epsilon_from_rho(-1, 1e-10), "rho is -1"),
        (lambda: accounting.epsilon_from_rho(1, 0), "delta is 0; it must satisfy 0 < delta < 1"),
        (lambda: accounting.epsilon_from_rho(1, 1), "delta is 1"),
        (lambda: accounting.epsilon_from_rho("x", 1e-10), "rho must be a number"),
        (lambda: accounting.delta_for_epsilon(1, -1), "epsilon is -1"),
        (lambda: accounting.compose([Fraction(-1)]), r"amounts\[0\] is -1"),
        (lambda: accounting.rho_from_pure_epsilon(0), "epsilon is 0"),
    ],
)
def test_invalid_inputs(call, match: str) -> None:
    with pytest.raises(BudgetError, match=match):
        call()
