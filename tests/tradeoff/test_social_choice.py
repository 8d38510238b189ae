"""The social choice of epsilon: MRT = MRS (Abowd & Schmutte 2019; linear utility of eq. E-28)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from censusdp.errors import ConfigError
from censusdp.tradeoff import (
    ChooseOptions,
    LinearPreferences,
    MatrixMechanismFrontier,
    MeasuredFrontier,
    MisallocationPreferences,
    RandomizedResponseFrontier,
    choose_epsilon,
    optimal_epsilon,
)

A_TREE = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])


class PowerFrontier:
    """I = -K eps^-2 (Gaussian/Laplace variance scaling), for closed-form optima."""

    label = "power"

    def __init__(self, k: float) -> None:
        self.k = k

    def quality(self, e: float) -> float:
        return -self.k / e**2

    def slope(self, e: float) -> float:
        return 2 * self.k / e**3

    def curvature(self, e: float) -> float:
        return -6 * self.k / e**4


def test_linear_preferences_on_matrix_frontier_closed_form():
    """4 K / eps^3 = C / B  =>  eps* = (4 K B / C)^(1/3)."""
    f = MatrixMechanismFrontier(A_TREE, A_TREE)
    prefs = LinearPreferences(privacy_cost=2.0, accuracy_value=5.0)
    opt = optimal_epsilon(f, prefs)
    assert opt.interior
    assert opt.epsilon == pytest.approx((4 * f.scale * 5.0 / 2.0) ** (1 / 3), rel=1e-10)
    assert opt.mrt == pytest.approx(opt.mrs, rel=1e-9)
    assert opt.mrs == pytest.approx(0.4)


def test_misallocation_closed_form():
    """SW = -r sqrt(2G/pi) sqrt(K)/eps - C eps is maximal at eps* = sqrt(r sqrt(2G/pi) sqrt(K) / C)."""
    k, r, g, c = 50.0, 3.0, 4, 2.0
    prefs = MisallocationPreferences(privacy_cost=c, funds_per_person=r, areas=g)
    opt = optimal_epsilon(PowerFrontier(k), prefs)
    kk = r * math.sqrt(2 * g / math.pi)
    assert opt.epsilon == pytest.approx(math.sqrt(kk * math.sqrt(k) / c), rel=1e-10)
    assert opt.interior
    assert prefs.expected_misallocation(-k / opt.epsilon**2) == pytest.approx(
        kk * math.sqrt(k) / opt.epsilon
    )


def test_expected_misallocation_by_simulation():
    """r E sum_j |e_j| with G Gaussian errors of variance -I/G (seeded)."""
    rng = np.random.default_rng(3)
    g, i, r = 10, -40.0, 2.5
    e = rng.normal(scale=math.sqrt(-i / g), size=(100_000, g))
    empirical = r * np.abs(e).sum(axis=1).mean()
    prefs = MisallocationPreferences(privacy_cost=1, funds_per_person=r, areas=g)
    assert prefs.expected_misallocation(i) == pytest.approx(empirical, rel=0.01)


def test_randomized_response_optimum_is_where_the_slope_meets_the_price():
    f = RandomizedResponseFrontier(n=1)
    prefs = LinearPreferences(privacy_cost=1.0, accuracy_value=10.0)
    opt = optimal_epsilon(f, prefs)
    assert opt.interior
    assert f.slope(opt.epsilon) == pytest.approx(0.1, rel=1e-9)
    # N dI/deps = cosh(x) / (4 sinh^3(x)) = 0.1 solved independently
    from scipy.optimize import brentq

    x = brentq(lambda x: math.cosh(x) / (4 * math.sinh(x) ** 3) - 0.1, 0.01, 20)
    assert opt.epsilon == pytest.approx(2 * x, rel=1e-9)
    w = lambda e: 10.0 * f.quality(e) - e  # noqa: E731
    assert opt.welfare == pytest.approx(w(opt.epsilon))
    for e in (opt.epsilon * 0.97, opt.epsilon * 1.03, 0.5, 10.0):
        assert w(e) < opt.welfare


def test_higher_willingness_to_pay_for_accuracy_raises_epsilon():
    f = RandomizedResponseFrontier()
    eps = [
        optimal_epsilon(f, LinearPreferences(privacy_cost=1.0, accuracy_value=b)).epsilon
        for b in (1.0, 10.0, 100.0)
    ]
    assert eps[0] < eps[1] < eps[2]


def test_corner_when_the_curves_do_not_cross():
    f = RandomizedResponseFrontier()
    # accuracy almost worthless: welfare falls everywhere, optimum at the lower end
    opt = optimal_epsilon(
        f, LinearPreferences(privacy_cost=1e6, accuracy_value=1e-6), search_range=(0.5, 50)
    )
    assert not opt.interior and opt.epsilon == 0.5
    # privacy almost free: optimum at the upper end
    opt = optimal_epsilon(
        f, LinearPreferences(privacy_cost=1e-12, accuracy_value=1.0), search_range=(0.5, 5)
    )
    assert not opt.interior and opt.epsilon == 5


def test_measured_frontier_recovers_a_power_law():
    eps = (0.5, 1.0, 2.0, 4.0, 8.0)
    f = MeasuredFrontier(eps, tuple(-7.0 * e**-1.8 for e in eps))
    assert f.k == pytest.approx(7.0, rel=1e-10)
    assert f.alpha == pytest.approx(1.8, rel=1e-10)
    assert f.r_squared == pytest.approx(1.0)
    assert f.slope(3.0) == pytest.approx(1.8 * 7.0 * 3.0**-2.8)
    assert f.curvature(3.0) == pytest.approx(-1.8 * 2.8 * 7.0 * 3.0**-3.8)
    noisy = MeasuredFrontier(eps, (-30.0, -14.0, -3.0, -1.2, -0.25))
    assert 0 < noisy.r_squared < 1


@pytest.mark.parametrize(
    "eps,q,match",
    [
        ((1.0,), (-1.0,), "at least two"),
        ((1.0, 2.0), (-1.0, 0.0), "must be negative"),
        ((1.0, 1.0), (-1.0, -2.0), "two distinct"),
        ((1.0, 2.0), (-1.0, -2.0), "does not fall with epsilon"),
    ],
)
def test_measured_frontier_rejects_bad_points(eps, q, match):
    with pytest.raises(ConfigError, match=match):
        MeasuredFrontier(eps, q)


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda: LinearPreferences(privacy_cost=0, accuracy_value=1), "privacy cost C is 0"),
        (lambda: LinearPreferences(privacy_cost=1, accuracy_value=-2), "accuracy value B is -2"),
        (
            lambda: MisallocationPreferences(privacy_cost=1, funds_per_person=1, areas=0),
            "areas G is 0",
        ),
        (
            lambda: optimal_epsilon(
                RandomizedResponseFrontier(), LinearPreferences(1, 1), search_range=(2, 1)
            ),
            "0 < lo < hi",
        ),
    ],
)
def test_invalid_preferences(make, match):
    with pytest.raises(ConfigError, match=match):
        make()


def test_choose_epsilon_writes_the_figure_and_refuses_to_overwrite(tmp_path):
    png = tmp_path / "choice.png"
    out = choose_epsilon(
        ChooseOptions(privacy_cost=1.0, accuracy_value=10.0, pi=Fraction(1, 3), n=1), plot=png
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    assert out["optimum"]["interior"] and out["frontier"]["pi"] == pytest.approx(1 / 3)
    with pytest.raises(ConfigError, match="exists"):
        choose_epsilon(ChooseOptions(privacy_cost=1.0, accuracy_value=10.0), plot=png)
    with pytest.raises(ConfigError, match="exactly one"):
        ChooseOptions(privacy_cost=1.0)
    with pytest.raises(ConfigError, match="needs --results"):
        ChooseOptions(frontier="census", privacy_cost=1.0, accuracy_value=1.0)
