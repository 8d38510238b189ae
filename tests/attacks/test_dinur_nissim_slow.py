"""Full-size reproductions of JASON (JSR-19-2F) figs. 4-1, 4-2/4-3 and 5-7 (run with ``-m slow``)."""

from __future__ import annotations

import numpy as np
import pytest

from censusdp.attacks import (
    LaplaceGridOptions,
    RecoveryCurveOptions,
    RecoveryThresholdsOptions,
    laplace_grid,
    recovery_curve,
    recovery_thresholds,
)

pytestmark = pytest.mark.slow


def test_fig_4_1_full_n_1000() -> None:
    """Fig. 4-1: n = 1000, noiseless; every bit recovered at about n/2 queries."""
    counts = [100, 300, 450, 500, 550, 600, 700, 1000]
    c = recovery_curve(RecoveryCurveOptions(1000, counts, trials=20, seed=401), workers=2)
    mean = dict(zip(counts, c.mean.tolist(), strict=True))
    assert mean[100] < 0.7
    assert mean[450] < 1.0
    assert mean[600] == 1.0 and mean[1000] == 1.0
    first = c.first_full_recovery()
    assert first is not None and 450 <= first <= 600


def test_fig_4_2_slope_n_100_to_1000() -> None:
    thr = recovery_thresholds(
        RecoveryThresholdsOptions([100, 250, 400, 550, 700, 850, 1000], trials=6, seed=402),
        workers=2,
    )
    assert 0.45 <= thr.slope_mean <= 0.56
    assert np.all(np.abs(thr.thresholds.mean(axis=1) / thr.ns - 0.5) < 0.08)


def test_fig_5_7_full_size_selected_cells() -> None:
    """Fig. 5-7 at n = 4000: near-guessing at eps = 0.01, m = n; all bits at eps = 1."""
    g = laplace_grid(
        LaplaceGridOptions(4000, [0.01, 0.05, 1.0], [1, 5, 20], trials=2, seed=507), workers=2
    )
    mean = g.mean
    assert 0.5 < mean[0, 0] < 0.56
    assert mean[0, 2] > mean[0, 0] + 0.1
    assert mean[1, 2] > 0.99
    assert mean[2, 1] == 1.0 and mean[2, 2] == 1.0
