"""Exactness and goodness of fit of the discrete Gaussian and geometric samplers.

Goodness-of-fit protocol (STYLE.md, "accept the true scale and reject a scale 30%
off"): for each scale we draw ``N = 100,000`` noise values with a fixed seed and run a
G-test (log-likelihood ratio, ``scipy.stats.power_divergence``) against the exact pmf,
binning every integer whose expected count is at least 5 and merging each tail into
one bin. The test passes if ``p > ALPHA = 1e-4``. For a correct sampler the p-value is
uniform, so a check fails falsely with probability ``1e-4`` per scale, below ``0.2%``
for the whole module over a fresh seed (with the fixed seed the outcome is
deterministic). Power: against the pmf with the variance parameter multiplied or
divided by 1.3, the expected G statistic is ``2 N KL`` (about 3,000 for the discrete
Gaussian, about 1,700 for the geometric, against roughly 10 to 800 degrees of freedom),
so the same samples must give ``p < ALPHA``: a wrong-scale sampler cannot pass.
"""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from censusdp.privacy.mechanisms import DiscreteGaussian, Geometric
from censusdp.privacy.mechanisms._table import CHUNK
from censusdp.privacy.randomness import RandomSource
from profiles import examples

ALPHA = 1e-4
N = 100_000


def g_test_pvalue(samples: np.ndarray, pmf) -> float:
    """G-test of integer samples against a pmf callable (tails merged)."""
    lo, hi = int(samples.min()) - 50, int(samples.max()) + 50
    k = np.arange(lo, hi + 1)
    p = pmf(k)
    expected = p * samples.size
    keep = np.flatnonzero(expected >= 5)
    a, b = k[keep[0]], k[keep[-1]]
    inner = np.arange(a, b + 1)
    counts = np.bincount(samples[(samples >= a) & (samples <= b)] - a, minlength=inner.size)
    obs = np.concatenate([[np.sum(samples < a)], counts, [np.sum(samples > b)]])
    p_inner = pmf(inner)
    p_left = max(0.0, float(np.sum(pmf(np.arange(a - 20_000, a)))))
    p_right = max(0.0, 1.0 - p_left - float(np.sum(p_inner)))
    exp = np.concatenate([[p_left], p_inner, [p_right]]) * samples.size
    mask = exp > 0
    exp = exp[mask] * obs[mask].sum() / exp[mask].sum()
    return float(stats.power_divergence(obs[mask], exp, lambda_="log-likelihood").pvalue)


DG_SCALES = [Fraction(1), Fraction(7, 3), Fraction(37), Fraction(1000), Fraction(10_000)]
GEO_SCALES = [Fraction(1, 2), Fraction(1), Fraction(25), Fraction(250, 3)]


@pytest.mark.parametrize("sigma2", DG_SCALES, ids=str)
def test_discrete_gaussian_fits_true_scale_and_rejects_30_percent_off(sigma2: Fraction) -> None:
    mech = DiscreteGaussian(sigma2)
    x = mech.sample(N, RandomSource.seeded(1000 + int(sigma2)))
    assert g_test_pvalue(x, mech.pmf) > ALPHA
    for wrong in (sigma2 * Fraction(13, 10), sigma2 / Fraction(13, 10)):
        assert g_test_pvalue(x, DiscreteGaussian(wrong).pmf) < ALPHA


@pytest.mark.parametrize("scale", GEO_SCALES, ids=str)
def test_geometric_fits_true_scale_and_rejects_30_percent_off(scale: Fraction) -> None:
    mech = Geometric(scale)
    x = mech.sample(N, RandomSource.seeded(2000 + int(scale)))
    assert g_test_pvalue(x, mech.pmf) > ALPHA
    for wrong in (scale * Fraction(13, 10), scale / Fraction(13, 10)):
        assert g_test_pvalue(x, Geometric(wrong).pmf) < ALPHA


@pytest.mark.parametrize(
    "mech", [DiscreteGaussian(Fraction(7, 3)), Geometric(Fraction(25))], ids=lambda m: m.name
)
@pytest.mark.parametrize("cells", [1, 250])
def test_per_unit_streams_fit_the_exact_pmf(mech, cells: int) -> None:
    """The measurement path (many geounits, each its own AES window): the same
    protocol, on N draws spread over units, pooled; and no dependence between the
    first draws of neighbouring units."""
    units = N // cells
    codes = [f"0560019627{u:06d}" for u in range(units)]
    noise = mech.release_units(
        np.zeros((units, cells), dtype=np.int64), RandomSource.seeded(3), ("Block", "q"), codes
    )
    x = noise.reshape(-1)
    assert g_test_pvalue(x, mech.pmf) > ALPHA
    scale = mech.scale if isinstance(mech, Geometric) else mech.sigma_squared
    for off in (Fraction(13, 10), Fraction(10, 13)):
        assert g_test_pvalue(x, type(mech)(scale * off).pmf) < ALPHA
    c = np.clip(noise[:, 0], -3, 3) + 3
    table = np.zeros((7, 7))
    np.add.at(table, (c[:-1], c[1:]), 1)
    assert stats.chi2_contingency(table).pvalue > ALPHA


def test_wrong_sampler_fails_the_protocol() -> None:
    """Rounded continuous Gaussian at sigma^2 = 1 is not the discrete Gaussian (power check)."""
    rng = np.random.default_rng(5)
    rounded = np.rint(rng.normal(0, 1, 400_000)).astype(np.int64)
    assert g_test_pvalue(rounded, DiscreteGaussian(1).pmf) < ALPHA


def test_kazan_reiter_tail_probabilities() -> None:
    """Kazan & Reiter (2022) sec. 2.1: rho = 1/2 around X = 5, P(X* <= 2 or X* >= 8) = 0.91% / 7.28%."""
    dg = DiscreteGaussian.from_rho(Fraction(1, 2))
    geo = Geometric.from_epsilon(1)
    assert round(100 * dg.tail(3), 2) == 0.91
    assert round(100 * geo.tail(3), 2) == 7.28
    n = 400_000
    for mech, p, seed in ((dg, dg.tail(3), 1), (geo, geo.tail(3), 2)):
        released = mech.release(np.full(n, 5), RandomSource.seeded(seed))
        frac = np.mean((released <= 2) | (released >= 8))
        assert abs(frac - p) < 5 * np.sqrt(p * (1 - p) / n)


def _exact_dg_pmf(sigma2: Fraction, k: int) -> mpmath.mpf:
    """Independent reference: Jacobi theta normaliser sum_k q^(k^2) = theta_3(0, q)."""
    s = mpmath.mpf(sigma2.numerator) / sigma2.denominator
    q = mpmath.exp(-1 / (2 * s))
    return q ** (k * k) / mpmath.jtheta(3, 0, q)


@pytest.mark.parametrize(
    "sigma2", [Fraction(1, 3), Fraction(1), Fraction(5), Fraction(400)], ids=str
)
def test_quantized_table_is_within_stated_tv_of_exact_pmf(sigma2: Fraction) -> None:
    mech = DiscreteGaussian(sigma2)
    table = mech._profile.table
    T = table.half_width
    assert sum(table.weights) == 2**128
    assert mech.sampling_tv <= Fraction(1, 2**100)
    with mpmath.workprec(300):
        tv = mpmath.mpf(0)
        for k in range(-T, T + 1):
            tv += abs(mpmath.mpf(table.weights[k + T]) / 2**128 - _exact_dg_pmf(sigma2, k))
        tail = 2 * mpmath.nsum(lambda j: _exact_dg_pmf(sigma2, int(j)), [T + 1, mpmath.inf])
        tv = (tv + tail) / 2
        assert tv <= mpmath.mpf(mech.sampling_tv.numerator) / mech.sampling_tv.denominator
        # the float pmf agrees with the reference
        for k in (0, 1, 3):
            assert float(_exact_dg_pmf(sigma2, k)) == pytest.approx(float(mech.pmf(k)), rel=1e-12)


def test_geometric_table_matches_closed_form() -> None:
    mech = Geometric(Fraction(3, 2))
    table = mech._profile.table
    T = table.half_width
    with mpmath.workprec(300):
        a = mpmath.exp(-mpmath.mpf(2) / 3)
        tv = mpmath.mpf(0)
        for k in range(-T, T + 1):
            exact = (1 - a) / (1 + a) * a ** abs(k)
            tv += abs(mpmath.mpf(table.weights[k + T]) / 2**128 - exact)
        tv += 2 * (1 - a) / (1 + a) * a ** (T + 1) / (1 - a)
        assert tv / 2 <= mpmath.mpf(mech.sampling_tv.numerator) / mech.sampling_tv.denominator
    assert mech.variance == pytest.approx(2 * float(a) / (1 - float(a)) ** 2, rel=1e-12)


def test_alias_columns_reproduce_weights_exactly() -> None:
    table = DiscreteGaussian(Fraction(9, 2))._profile.table
    b, T = table.column_bits, table.half_width
    cap = 2 ** (128 - b)
    mass: dict[int, int] = {}
    values = table.values
    for j in range(2**b):
        t = (int(table.threshold_hi[j]) << 64) | int(table.threshold_lo[j])
        assert 0 <= t <= cap
        mass[int(values[2 * j + 1])] = mass.get(int(values[2 * j + 1]), 0) + t
        mass[int(values[2 * j])] = mass.get(int(values[2 * j]), 0) + cap - t
    for k in range(-T, T + 1):
        assert mass.get(k, 0) == table.weights[k + T]


class _ScriptedSource:
    """A fake source returning chosen words, to exercise the exact tie-break path."""

    def __init__(self, words: list[int]) -> None:
        self.words = list(words)

    def uint64(self, n: int) -> np.ndarray:
        out, self.words = self.words[:n], self.words[n:]
        return np.array(out, dtype=np.uint64)


def test_tie_break_reads_low_word_and_compares_exactly() -> None:
    table = DiscreteGaussian(Fraction(3))._profile.table
    b = table.column_bits
    # a column whose threshold is strictly inside (0, capacity)
    cap = 2 ** (128 - b)
    j = next(
        j
        for j in range(2**b)
        if 0 < ((int(table.threshold_hi[j]) << 64) | int(table.threshold_lo[j])) < cap
        and int(table.threshold_lo[j]) > 0
    )
    hi, lo = int(table.threshold_hi[j]), int(table.threshold_lo[j])
    word = (j << (64 - b)) | hi  # r_hi ties with t_hi
    primary, alias = int(table.values[2 * j + 1]), int(table.values[2 * j])
    assert table.sample(1, _ScriptedSource([word, lo - 1])).tolist() == [primary]
    assert table.sample(1, _ScriptedSource([word, lo])).tolist() == [alias]
    if hi > 0:
        assert table.sample(1, _ScriptedSource([word - 1])).tolist() == [primary]


def test_sampling_is_deterministic_and_chunk_aligned() -> None:
    mech = DiscreteGaussian(50)
    a = mech.sample(2 * CHUNK + 17, RandomSource.seeded(9))
    src = RandomSource.seeded(9)
    b = np.concatenate([mech.sample(CHUNK, src), mech.sample(CHUNK, src), mech.sample(17, src)])
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, mech.sample(a.size, RandomSource.seeded(10)))
    assert a.dtype == np.int64


def test_successive_samples_are_independent() -> None:
    x = DiscreteGaussian(2).sample(200_000, RandomSource.seeded(77))
    c = np.clip(x, -3, 3) + 3
    table = np.zeros((7, 7))
    np.add.at(table, (c[:-1], c[1:]), 1)
    assert stats.chi2_contingency(table).pvalue > ALPHA


@settings(max_examples=examples(15), deadline=None)
@given(num=st.integers(1, 10**6), den=st.integers(1, 10**4))
def test_any_scale_builds_a_valid_table(num: int, den: int) -> None:
    sigma2 = Fraction(num, den)
    if sigma2 > 10**6:
        sigma2 = Fraction(10**6)
    mech = DiscreteGaussian(sigma2)
    table = mech._profile.table
    assert sum(table.weights) == 2**128
    assert mech.sampling_tv <= Fraction(1, 2**100)
    # For sigma^2 below ~1/1400 the true variance (~2 exp(-1/(2 sigma^2))) underflows to 0.0.
    assert 0 <= mech.variance < float(sigma2) * (1 + 1e-12)
    assert mech.pmf(np.arange(-3, 4)).sum() <= 1 + 1e-12


def test_discrete_gaussian_variance_is_below_sigma_squared() -> None:
    """CKS 2020 Prop. 19: Var < sigma^2, and -> sigma^2 quickly as sigma grows."""
    small = DiscreteGaussian(Fraction(1, 4))
    with mpmath.workprec(200):
        ref = sum(k * k * _exact_dg_pmf(Fraction(1, 4), k) for k in range(-40, 41))
    assert small.variance == pytest.approx(float(ref), rel=1e-12)
    assert small.variance < 0.25
    assert DiscreteGaussian(5).variance == pytest.approx(5, rel=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize(
    "mech",
    [DiscreteGaussian(Fraction(2)), DiscreteGaussian(Fraction(3000)), Geometric(Fraction(10))],
    ids=lambda m: m.name,
)
def test_large_sample_goodness_of_fit(mech) -> None:
    """10 million draws: the G-test still accepts (sensitive to TV of about 1e-3)."""
    x = mech.sample(10_000_000, RandomSource.seeded(31337))
    assert g_test_pvalue(x, mech.pmf) > ALPHA
