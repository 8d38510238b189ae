"""Query families and experiment-noise samplers (JASON (JSR-19-2F) App. A.5, secs. 5.1.1-5.1.2)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from censusdp.attacks.dinur_nissim._engine import NoiseDraw
from censusdp.attacks.dinur_nissim._query_families import (
    hadamard_rows,
    make_source,
    msequence,
)


@pytest.mark.parametrize("k", [3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
def test_msequence_period_and_autocorrelation_eq_a9(k: int) -> None:
    """Eq. (A-9): sum_i b_i b_{i+j} = (n+1)/2 at j = 0 and (n+1)/4 otherwise."""
    b = msequence(k).astype(np.int64)
    n = (1 << k) - 1
    assert b.size == n and b.sum() == (n + 1) // 2
    spectrum = np.fft.fft(b)
    auto = np.rint(np.fft.ifft(spectrum * np.conj(spectrum)).real).astype(np.int64)
    assert auto[0] == (n + 1) // 2
    assert np.all(auto[1:] == (n + 1) // 4)


@pytest.mark.parametrize("k", [13, 16, 20])
def test_long_msequences_are_maximal(k: int) -> None:
    b = msequence(k).astype(np.int64)
    n = (1 << k) - 1
    assert b.sum() == (n + 1) // 2
    # maximal length: no shorter period dividing n
    for p in (d for d in range(1, n) if n % d == 0):
        assert not np.array_equal(b, np.roll(b, p))


def test_hadamard_rows_eq_a10() -> None:
    """Eq. (A-10): rows (without the all-ones row) have n/2 ones and share n/4."""
    w = hadamard_rows(64).astype(np.int64)
    gram = w @ w.T
    assert np.all(np.diag(gram) == 32)
    off = gram[~np.eye(63, dtype=bool)]
    assert np.all(off == 16)


def test_random_stream_does_not_depend_on_request_split() -> None:
    a = make_source("random", 37, np.random.default_rng(5))
    b = make_source("random", 37, np.random.default_rng(5))
    whole = a.rows(0, 700)
    parts = np.concatenate([b.rows(0, 13), b.rows(13, 300), b.rows(300, 700)])
    np.testing.assert_array_equal(whole, parts)
    assert 0.45 < whole.mean() < 0.55


def test_pairs_rounds_are_perfect_matchings() -> None:
    rows = make_source("pairs", 10, np.random.default_rng(1)).rows(0, 10)
    assert np.all(rows.sum(axis=1) == 2)
    np.testing.assert_array_equal(rows[:5].sum(axis=0), np.ones(10))
    np.testing.assert_array_equal(rows[5:].sum(axis=0), np.ones(10))


def test_rows_must_be_consecutive() -> None:
    src = make_source("random", 8, np.random.default_rng(0))
    src.rows(0, 4)
    with pytest.raises(ValueError, match="expected start 4, got 5"):
        src.rows(5, 6)


def test_laplace_noise_scale_accepts_true_rejects_30_percent_off() -> None:
    """Var Lap(1/eps) = 2/eps^2 (JASON (JSR-19-2F) sec. 5.1.1); a 30% scale error is rejected."""
    eps, size = 0.5, 200_000
    x = NoiseDraw("laplace", epsilon=eps).sample(np.random.default_rng(7), size)
    mad = np.mean(np.abs(x))  # E|X| = 1/eps; sd of the mean = (1/eps)/sqrt(size)
    z_true = (mad - 1 / eps) / ((1 / eps) / math.sqrt(size))
    z_wrong = (mad - 1.3 / eps) / ((1.3 / eps) / math.sqrt(size))
    assert abs(z_true) < 4.5
    assert abs(z_wrong) > 4.5


def test_two_sided_geometric_pmf() -> None:
    """P(k) = (alpha - 1)/(alpha + 1) alpha^-|k| with alpha = e^eps (JASON (JSR-19-2F) sec. 5.1.2)."""
    eps, size = 0.7, 200_000
    x = NoiseDraw("geometric", epsilon=eps).sample(np.random.default_rng(3), size)
    alpha = math.exp(eps)
    for k in (0, 1, -1, 3):
        p = (alpha - 1) / (alpha + 1) * alpha ** (-abs(k))
        se = math.sqrt(p * (1 - p) / size)
        assert abs(np.mean(x == k) - p) < 4.5 * se
    q = math.exp(-eps)
    assert np.var(x) == pytest.approx(2 * q / (1 - q) ** 2, rel=0.03)


def test_gaussian_noise_variance() -> None:
    x = NoiseDraw("gaussian", variance=9.0).sample(np.random.default_rng(2), 100_000)
    assert np.var(x) == pytest.approx(9.0, rel=0.02)
