"""Tests of the random contiguous off-spine districts."""

from __future__ import annotations

import numpy as np
import pytest

from censusdp.errors import ConfigError
from censusdp.evaluate.districts import district_metrics, random_districts


def test_districts_are_contiguous_runs_near_target():
    rng = np.random.default_rng(0)
    pop = rng.poisson(30, 5000) * (rng.random(5000) < 0.6)
    target = 1000
    d = random_districts(pop, target, np.random.default_rng(1), jitter=0.2)
    kept = d[d >= 0]
    assert kept.size
    # Contiguous under geocode order: ids appear as consecutive runs 0, 1, 2, ...
    ids = np.flatnonzero(np.diff(kept) != 0)
    assert np.all(np.diff(kept) >= 0) and np.all(np.diff(kept) <= 1)
    assert ids.size == kept.max()
    assert set(np.unique(kept)) == set(range(int(kept.max()) + 1))
    first, last = np.flatnonzero(d >= 0)[[0, -1]]
    assert np.all(d[first : last + 1] >= 0)
    sums = np.bincount(kept, weights=pop[d >= 0])
    assert sums.min() >= 0.8 * target - pop.max() and sums.max() <= 1.2 * target + pop.max()
    # Reproducible with the same seed, different with another.
    np.testing.assert_array_equal(d, random_districts(pop, target, np.random.default_rng(1)))
    assert not np.array_equal(d, random_districts(pop, target, np.random.default_rng(2)))


def test_too_small_and_bad_arguments():
    assert (random_districts(np.array([5, 5]), 100, np.random.default_rng(0)) == -1).all()
    with pytest.raises(ConfigError, match="target population must be > 0"):
        random_districts(np.array([5]), 0, np.random.default_rng(0))
    with pytest.raises(ConfigError, match="jitter must be in"):
        random_districts(np.array([5]), 10, np.random.default_rng(0), jitter=1.5)


def test_district_metrics_exact_release_has_zero_error():
    rng = np.random.default_rng(3)
    p1 = rng.poisson(20, (800, 3))
    p1[:, 0] = p1.sum(axis=1)
    p3 = (p1 * 0.7).astype(np.int64)
    blocks = {"P1": p1, "P3": p3}
    out = district_metrics(blocks, blocks, (200, 1000), seed=5, draws=3)
    for rec in out.values():
        assert rec["n_districts"] > 0
        assert rec["total_population"]["mae"] == 0 and rec["tvd"]["P1"] == 1.0
    noisy = {"P1": p1 + np.array([1, 1, 0]), "P3": p3}
    out2 = district_metrics(blocks, noisy, (200,), seed=5, draws=3)
    rec = out2["200"]
    # every block adds one person to the total, so a district's error is its block count
    assert rec["total_population"]["bias"] > 0
    assert rec["mean_abs_pct_error"] > 0
