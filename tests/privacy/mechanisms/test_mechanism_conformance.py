"""Shared conformance tests run against every mechanism class."""

from __future__ import annotations

import json
import pickle
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from censusdp.errors import BudgetError, CensusDPError
from censusdp.privacy.mechanisms import (
    DiscreteGaussian,
    Gaussian,
    Geometric,
    Laplace,
    RandomizedResponse,
)
from censusdp.privacy.randomness import RandomSource

ALL = [
    DiscreteGaussian(Fraction(10)),
    Geometric(Fraction(3)),
    Laplace(Fraction(3)),
    Gaussian(Fraction(10)),
]


@pytest.mark.parametrize("mech", ALL, ids=lambda m: m.name)
def test_release_shape_determinism_and_manifest(mech) -> None:
    values = np.arange(24).reshape(2, 3, 4)
    a = mech.release(values, RandomSource.seeded(1))
    b = mech.release(values, RandomSource.seeded(1))
    assert a.shape == values.shape
    np.testing.assert_array_equal(a, b)
    noise = (a - values).reshape(-1)
    again = mech.sample(24, RandomSource.seeded(1))
    if mech.exact:
        np.testing.assert_array_equal(noise, again)
    else:
        np.testing.assert_allclose(noise, again, rtol=1e-12, atol=1e-12)
    json.dumps(mech.describe())
    assert pickle.loads(pickle.dumps(mech)) == mech
    if mech.exact:
        assert a.dtype == np.int64
        assert mech.sampling_tv <= Fraction(1, 2**100)
    else:
        assert mech.sampling_tv is None


@pytest.mark.parametrize("mech", ALL, ids=lambda m: m.name)
def test_sample_variance_matches_stated_variance(mech) -> None:
    x = np.asarray(mech.sample(400_000, RandomSource.seeded(3)), dtype=np.float64)
    v = mech.variance
    # sample variance has standard error about v * sqrt((kurtosis - 1) / n) < v * 0.006
    assert abs(x.var() - v) < 0.03 * v
    assert abs(x.mean()) < 5 * np.sqrt(v / x.size)


@pytest.mark.parametrize("mech", ALL, ids=lambda m: m.name)
def test_privacy_cost_scales_with_sensitivity(mech) -> None:
    assert mech.rho(2) == 4 * mech.rho(1)
    assert isinstance(mech.rho(1), Fraction)
    if hasattr(mech, "epsilon"):
        assert mech.epsilon(2) == 2 * mech.epsilon(1)
        assert mech.rho(1) == mech.epsilon(1) ** 2 / 2


@pytest.mark.parametrize(
    ("cls", "ctor", "value"),
    [
        (DiscreteGaussian, "from_rho", Fraction(1, 7)),
        (Gaussian, "from_rho", Fraction(1, 7)),
        (Geometric, "from_epsilon", Fraction(2, 5)),
        (Laplace, "from_epsilon", Fraction(2, 5)),
    ],
)
@pytest.mark.parametrize("sensitivity", [1, 2, 3])
def test_constructors_round_trip_exactly(cls, ctor, value, sensitivity) -> None:
    mech = getattr(cls, ctor)(value, sensitivity)
    cost = mech.rho(sensitivity) if ctor == "from_rho" else mech.epsilon(sensitivity)
    assert cost == value


def test_parameter_conversions() -> None:
    assert DiscreteGaussian(5).sigma_squared == Fraction(5)
    assert DiscreteGaussian("1/3").sigma_squared == Fraction(1, 3)
    assert DiscreteGaussian(0.1).sigma_squared == Fraction(1, 10)
    assert DiscreteGaussian.from_rho(Fraction(542, 339) ** 2).rho() == Fraction(542, 339) ** 2
    assert Geometric.from_epsilon(1, sensitivity=2).scale == 2  # Van Riper et al. (2020) eq. 1


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: DiscreteGaussian(0), "sigma_squared is 0; it must be positive"),
        (lambda: DiscreteGaussian(-1), "must be positive"),
        (lambda: DiscreteGaussian("abc"), "sigma_squared must be a number"),
        (lambda: DiscreteGaussian(float("nan")), "must be finite"),
        (lambda: DiscreteGaussian(True), "got bool"),
        (lambda: DiscreteGaussian.from_rho(0), "rho is 0"),
        (lambda: DiscreteGaussian(1).rho(0), "sensitivity is 0"),
        (lambda: DiscreteGaussian(1).rho(1.5), "positive integer"),
        (lambda: Geometric.from_epsilon(-1), "epsilon is -1"),
        (lambda: Geometric(1).sample(-1, RandomSource.seeded(1)), "must be >= 0"),
        (lambda: RandomizedResponse(1), "must be < 1"),
        (lambda: RandomizedResponse("1/2", 0), "0 < mu < 1"),
        (lambda: DiscreteGaussian(10**12).variance, "too large for the exact table"),
    ],
)
def test_invalid_parameters_are_rejected(call, match: str) -> None:
    with pytest.raises(BudgetError, match=match):
        call()


def test_release_rejects_non_integer_counts() -> None:
    with pytest.raises(CensusDPError, match="integer counts"):
        DiscreteGaussian(1).release(np.array([0.5, 1.0]), RandomSource.seeded(1))
    with pytest.raises(CensusDPError, match="integer counts"):
        Geometric(1).release(np.array(["a"]), RandomSource.seeded(1))
    out = DiscreteGaussian(1).release(np.array([1.0, 2.0]), RandomSource.seeded(1))
    assert out.dtype == np.int64


def test_continuous_laplace_and_gaussian_fit_their_cdfs() -> None:
    src = RandomSource.seeded(8)
    lap = Laplace(Fraction(2)).sample(50_000, src)
    assert stats.kstest(lap, stats.laplace(scale=2).cdf).pvalue > 1e-4
    assert stats.kstest(lap, stats.laplace(scale=2.6).cdf).pvalue < 1e-4
    gau = Gaussian(Fraction(4)).sample(50_001, src)
    assert gau.size == 50_001
    assert stats.kstest(gau, stats.norm(scale=2).cdf).pvalue > 1e-4
    assert stats.kstest(gau, stats.norm(scale=2.6).cdf).pvalue < 1e-4


@pytest.mark.parametrize("mech", [DiscreteGaussian(Fraction(7)), Geometric(Fraction(2))], ids=str)
@pytest.mark.parametrize("cells", [1, 63, 70_000])
def test_release_units_rows_do_not_depend_on_the_other_units(mech, cells: int) -> None:
    """Row ``u`` is the same released alone, with any other units, in any order (what
    makes chunked, resumed and Spark measurements byte-identical)."""
    units = 3 if cells > 1000 else 40
    values = np.arange(units * cells, dtype=np.int64).reshape(units, cells)
    codes = np.array([f"{u:016d}" for u in range(units)])
    src = RandomSource.seeded(4)
    batched = mech.release_units(values, src, ("Block", "detailed"), codes)
    alone = np.stack(
        [mech.release_units(values[u : u + 1], src, ("Block", "detailed"), codes[u : u + 1])[0]
         for u in range(units)]
    )  # fmt: skip
    np.testing.assert_array_equal(batched, alone)
    order = np.random.default_rng(1).permutation(units)
    shuffled = mech.release_units(values[order], src, ("Block", "detailed"), codes[order])
    np.testing.assert_array_equal(shuffled, batched[order])
    noise = batched - values
    assert (noise != 0).any() and not (noise == noise[0]).all(axis=1).all()
    # another key (query) or another seed gives other noise
    other = mech.release_units(values, src, ("Block", "total"), codes)
    assert not np.array_equal(other, batched)
    with pytest.raises(CensusDPError, match="one code per unit"):
        mech.release_units(values, src, ("Block", "detailed"), codes[:-1])
