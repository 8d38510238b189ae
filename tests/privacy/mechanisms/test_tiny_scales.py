"""Near-infinite budgets: tiny noise scales build their tables quickly and add no noise."""

from __future__ import annotations

import time
from fractions import Fraction

import numpy as np
import pytest

from censusdp.privacy.mechanisms import DiscreteGaussian, Geometric
from censusdp.privacy.randomness import RandomSource


@pytest.mark.parametrize(
    "mech",
    [
        DiscreteGaussian(Fraction(1, 10**11)),
        DiscreteGaussian.from_rho(10**9),
        Geometric.from_epsilon(10**9),
    ],
    ids=["dg-1e-11", "dg-rho-1e9", "geometric-eps-1e9"],
)
def test_tiny_scale_is_exact_and_fast(mech):
    start = time.perf_counter()
    values = np.arange(-50, 50, dtype=np.int64)
    out = mech.release(values, RandomSource.seeded(3))
    assert np.array_equal(out, values)
    assert mech.variance < 1e-12
    assert time.perf_counter() - start < 10
