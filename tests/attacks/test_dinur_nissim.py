"""Small, fast reproductions of JASON (JSR-19-2F)'s Dinur-Nissim experiments (secs. 4.3-4.5, 5.5-5.6, App. A).

Every table here would fail on a wrong implementation: a solver that does not solve
eq. (4-4), noise on the wrong scale, a broken query family, or a wrong prediction
formula. Full-size reproductions are in ``test_dinur_nissim_slow.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from censusdp.attacks import (
    LaplaceGridOptions,
    NoiseSpec,
    RecoveryCurveOptions,
    RecoveryThresholdsOptions,
    adaptive_pairs_attack,
    expected_sum_accuracy,
    information_predictions,
    jason_gaussian_variance,
    laplace_grid,
    reconstruct,
    recovery_curve,
    recovery_thresholds,
    sum_query_accuracy,
)
from censusdp.errors import CensusDPError

# --- fig. 4-1 (sec. 4.3): noiseless, fraction recovered vs m -----------------------------


@pytest.fixture(scope="module")
def noiseless_200() -> object:
    n = 200
    counts = [20, 60, 100, 140, 200]
    return recovery_curve(RecoveryCurveOptions(n, counts, trials=8, seed=41))


def test_fig_4_1_noiseless_table(noiseless_200) -> None:
    """JASON (JSR-19-2F) fig. 4-1 at n = 200: ~1 at m >= 0.7 n, clearly < 1 at m = n/10."""
    c = noiseless_200
    mean = dict(zip(c.query_counts.tolist(), c.mean.tolist(), strict=True))
    assert mean[200] == 1.0  # m = n: every trial, every bit
    assert mean[140] == 1.0  # m = 0.7 n: past the ~n/2 transition
    assert 0.55 < mean[20] < 0.72  # m = n/10: little better than guessing
    assert mean[60] < 0.85
    # monotone in m (nested queries)
    assert np.all(np.diff(c.mean) >= -1e-12)
    assert c.converged.all()
    # zero residual once recovered (exact answers, exact solution)
    assert np.all(c.residual_norms[:, -1] < 1e-6)


def test_recovery_curve_is_seeded_and_prefix_consistent(noiseless_200) -> None:
    # Same queries whether m = 140 is computed alone or in a grid. (Below the ~n/2
    # threshold the minimiser is not unique and the warm-started solver may pick
    # another one, so compare where the solution is unique.)
    again = recovery_curve(RecoveryCurveOptions(200, [140], trials=8, seed=41))
    np.testing.assert_array_equal(again.fractions[:, 0], noiseless_200.fractions[:, 3])
    np.testing.assert_allclose(again.residual_norms[:, 0], 0.0, atol=1e-6)
    low = recovery_curve(RecoveryCurveOptions(200, [20], trials=8, seed=41))
    other = recovery_curve(RecoveryCurveOptions(200, [20], trials=8, seed=42))
    assert not np.array_equal(other.fractions[:, 0], low.fractions[:, 0])


def test_workers_do_not_change_results() -> None:
    one = recovery_curve(
        RecoveryCurveOptions(30, [10, 40], trials=3, seed=5, noise=NoiseSpec.laplace(1.0))
    )
    two = recovery_curve(
        RecoveryCurveOptions(30, [10, 40], trials=3, seed=5, noise=NoiseSpec.laplace(1.0)),
        workers=2,
    )
    np.testing.assert_array_equal(one.fractions, two.fractions)


def test_fresh_queries_mode_runs_and_differs_from_nested() -> None:
    fresh = recovery_curve(RecoveryCurveOptions(200, [40, 80], trials=4, seed=3, nested=False))
    nested = recovery_curve(RecoveryCurveOptions(200, [40, 80], trials=4, seed=3))
    assert fresh.fractions.shape == nested.fractions.shape == (4, 2)
    assert fresh.mean[1] > fresh.mean[0]
    # the first pass uses the same stream; later passes draw new matrices
    np.testing.assert_array_equal(fresh.fractions[:, 0], nested.fractions[:, 0])
    assert not np.array_equal(fresh.fractions[:, 1], nested.fractions[:, 1])


# --- figs. 4-2 / 4-3: queries for full recovery grow like n/2 ------------------------------


@pytest.mark.slow
def test_fig_4_2_slope_near_one_half() -> None:
    """JASON (JSR-19-2F) figs. 4-2/4-3: queries for 100% recovery ~ n/2 (slope near 1/2)."""
    thr = recovery_thresholds(RecoveryThresholdsOptions([40, 60, 80, 100], trials=3, seed=17))
    assert 0.40 <= thr.slope_mean <= 0.62
    ratio = thr.thresholds.mean(axis=1) / thr.ns
    assert np.all((ratio > 0.38) & (ratio < 0.75))
    # far below n and far above the information bound 2n/log2(n) at these sizes? no:
    # least squares needs more than the information-theoretic minimum.
    assert np.all(thr.thresholds.mean(axis=1) > 2 * thr.ns / np.log2(thr.ns) * 0.9)


# --- fig. 4-4 (sec. 4.4): Gaussian noise, variance sqrt(n) ln(n)/2 -------------------------


def test_fig_4_4_gaussian_noise_recovery_rises_to_one() -> None:
    n = 40
    var = jason_gaussian_variance(n)
    assert var == pytest.approx(math.sqrt(40) * math.log(40) / 2)
    c = recovery_curve(
        RecoveryCurveOptions(
            n, [20, 40, 200, 800], trials=12, seed=44, noise=NoiseSpec.gaussian(var)
        )
    )
    assert c.mean[0] < 0.85
    assert c.mean[-1] >= 0.97
    assert np.all(np.diff(c.mean) > 0)
    # the residual norm grows with m: the noise is not fitted (sec. 5.6)
    assert c.residual_norms.mean(axis=0)[-1] > 10 * c.residual_norms.mean(axis=0)[0]


# --- fig. 5-7 (sec. 5.6): Laplace noise, epsilon x query multiple --------------------------


@pytest.fixture(scope="module")
def small_grid() -> object:
    return laplace_grid(LaplaceGridOptions(150, [0.05, 0.2, 1.0], [1, 5, 10], trials=3, seed=57))


def test_fig_5_7_recovery_increases_with_multiple_and_epsilon(small_grid) -> None:
    mean = small_grid.mean  # (eps, multiple)
    assert np.all(np.diff(mean, axis=1) >= -0.01)  # more queries -> more bits
    assert np.all(np.diff(mean, axis=0) >= -0.01)  # larger epsilon -> more bits
    assert mean[0, 0] < 0.75  # eps = 0.05, m = n: near guessing
    assert mean[-1, -1] == 1.0  # eps = 1, m = 10 n: everything
    assert mean[1, 2] > mean[1, 0] + 0.1


def test_fig_5_7_matches_least_squares_gaussian_prediction(small_grid) -> None:
    """Above m = 5n the unconstrained LS error model Phi(sqrt(m-n)/(4 sigma)) fits within 0.06."""
    cells = small_grid.to_dict()["cells"]
    checked = 0
    for cell in cells:
        if cell["multiple"] >= 5 and cell["ls_gaussian_prediction"] < 0.999:
            assert cell["mean"] == pytest.approx(cell["ls_gaussian_prediction"], abs=0.06)
            checked += 1
    assert checked >= 2


def test_geometric_mechanism_grid_runs() -> None:
    g = laplace_grid(
        LaplaceGridOptions(80, [0.1, 1.0], [2], trials=2, seed=1, mechanism="geometric")
    )
    assert g.mean[1, 0] > g.mean[0, 0]


# --- fig. 5-6 (sec. 5.5): accuracy of a Laplace-noised sum --------------------------------


def test_fig_5_6_accuracy_matches_exact_expectation() -> None:
    acc = sum_query_accuracy([100, 1000, 5000], [0.01, 0.05, 0.2, 1.0], trials=2000, seed=56)
    z = (acc.measured - acc.expected) / acc.standard_error
    assert np.max(np.abs(z)) < 4.5
    # monotone in N and in epsilon; N = 5000 "imperceptible" at epsilon >= 0.2
    assert np.all(np.diff(acc.expected, axis=0) > 0)
    assert np.all(np.diff(acc.expected, axis=1) > 0)
    assert acc.expected[2, 2] > 0.995


def test_fig_5_6_rejects_a_wrong_noise_scale() -> None:
    """A 30%-too-wide Laplace scale would be detected by the same z-test."""
    rng = np.random.default_rng(5)
    n, eps, trials = 100, 0.05, 4000
    s = rng.binomial(n, 0.5, trials)
    wrong = 1.0 - np.abs(np.round(rng.laplace(0, 1.3 / eps, trials))) / s
    z = (wrong.mean() - expected_sum_accuracy(n, eps)) / (wrong.std(ddof=1) / math.sqrt(trials))
    assert abs(z) > 4.5


@pytest.mark.parametrize(("n", "eps"), [(100, 1.0), (100, 0.1), (7, 0.5)])
def test_expected_sum_accuracy_values(n: int, eps: float) -> None:
    # 1 - E[1/S | S > 0] E|round(L)|, by direct enumeration of both sums
    inv_s = sum(math.comb(n, s) / s for s in range(1, n + 1)) / (2**n - 1)
    abs_round = sum(
        k * (math.exp(-(k - 0.5) * eps) - math.exp(-(k + 0.5) * eps)) for k in range(1, 20000)
    )
    assert expected_sum_accuracy(n, eps) == pytest.approx(1.0 - inv_s * abs_round, rel=1e-9)


# --- Appendix A predictions ---------------------------------------------------------------


def test_information_predictions_appendix_a() -> None:
    p = information_predictions(1000)
    assert p["noiseless_min_queries_2n_over_log2n"] == pytest.approx(2000 / math.log2(1000))
    assert p["adaptive_pairs_queries"] == 750
    # eq.: r/2 (log2 n + log2(pi e / 8)) + 1/2 log2(1 + r) >= n
    r = p["noiseless_random_queries_A8"]
    assert 0.5 * r * math.log2(math.pi * math.e * 1000 / 8) + 0.5 * math.log2(1 + r) >= 1000
    assert 0.5 * (r - 1) * math.log2(math.pi * math.e * 1000 / 8) + 0.5 * math.log2(r) < 1000
    assert 190 <= r <= 215
    # sec. 4.5 item 2: below sigma^2 = n/48, r <= n suffices; above it, not
    assert information_predictions(1000, 1000 / 48 * 0.99)["queries_needed_information"] <= 1000
    assert information_predictions(1000, 1000 / 48 * 1.2)["queries_needed_information"] > 1000
    # large noise: the exact Gaussian-channel count is ~48 sigma^2 for r > n
    big = information_predictions(1000, 1000.0)
    assert big["queries_needed_information"] == pytest.approx(48_000, rel=0.03)
    assert big["queries_16_sigma2"] == 16_000
    assert big["queries_16_sigma2_ln2_A16"] == pytest.approx(16_000 * math.log(2))


def test_adaptive_pairs_attack_appendix_a1() -> None:
    rng = np.random.default_rng(11)
    counts = []
    for _ in range(40):
        d = rng.integers(0, 2, 1001)
        res = adaptive_pairs_attack(d, rng)
        np.testing.assert_array_equal(res.bits, d)
        counts.append(res.queries)
    assert np.mean(counts) == pytest.approx(0.75 * 1001, rel=0.02)


def test_pairs_family_recovers_three_quarters_at_n_over_2() -> None:
    """App. A.1: n/2 disjoint pairs fix the half of bits in 0/2 pairs; the rest are 1/2 -> 3/4."""
    c = recovery_curve(RecoveryCurveOptions(400, [200], trials=6, seed=12, family="pairs"))
    assert c.mean[0] == pytest.approx(0.75, abs=0.03)


@pytest.mark.parametrize(("family", "n", "m"), [("msequence", 127, 127), ("hadamard", 128, 127)])
def test_structured_families_recover(family: str, n: int, m: int) -> None:
    c = recovery_curve(RecoveryCurveOptions(n, [m // 8, m], trials=3, seed=9, family=family))
    assert c.mean[-1] == 1.0
    assert c.mean[0] < 0.9


def test_user_matrix_family_and_limits() -> None:
    rng = np.random.default_rng(2)
    w = rng.integers(0, 2, (30, 20))
    c = recovery_curve(
        RecoveryCurveOptions(20, [10, 30], trials=2, seed=1, family="matrix", matrix=w)
    )
    assert c.fractions.shape == (2, 2)
    with pytest.raises(CensusDPError, match="at most 30 queries"):
        recovery_curve(RecoveryCurveOptions(20, [31], trials=1, family="matrix", matrix=w))
    with pytest.raises(CensusDPError, match="n = 2\\^k - 1"):
        recovery_curve(RecoveryCurveOptions(100, [10], trials=1, family="msequence"))


# --- solvers ------------------------------------------------------------------------------


def test_solvers_agree_on_a_noisy_problem() -> None:
    rng = np.random.default_rng(8)
    n, m = 60, 180
    d = rng.integers(0, 2, n)
    q = rng.integers(0, 2, (m, n)).astype(float)
    b = q @ d + rng.laplace(0, 2.0, m)
    f = reconstruct(q, b, solver="fista")
    s = reconstruct(q, b, solver="lsq_linear")
    assert f.converged and s.converged
    assert np.max(np.abs(f.relaxed - s.relaxed)) < 1e-3
    assert f.residual_norm == pytest.approx(s.residual_norm, rel=1e-6)
    lp = reconstruct(q, b, solver="lp")
    assert np.all((lp.relaxed >= 0) & (lp.relaxed <= 1))


def test_lp_recovers_noiseless_bits() -> None:
    """Dinur and Nissim's LP (sec. 4.2) recovers every bit from 0.8 n exact answers."""
    rng = np.random.default_rng(4)
    n = 80
    d = rng.integers(0, 2, n)
    q = rng.integers(0, 2, (64, n)).astype(float)
    for objective in ("linf", "l1"):
        res = reconstruct(q, q @ d, solver="lp", lp_objective=objective)
        np.testing.assert_array_equal(res.bits, d)


# --- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kind": "laplace"}, "laplace noise needs a finite epsilon > 0"),
        ({"kind": "laplace", "epsilon": -1.0}, "epsilon > 0; got epsilon=-1.0"),
        ({"kind": "gaussian"}, "gaussian noise needs a finite variance"),
        ({"kind": "none", "epsilon": 1.0}, "epsilon applies only"),
        ({"kind": "laplace", "epsilon": 1.0, "variance": 2.0}, "variance applies only"),
        ({"kind": "cauchy"}, "noise kind must be"),
    ],
)
def test_noise_spec_rejects(kwargs: dict, match: str) -> None:
    with pytest.raises(CensusDPError, match=match):
        NoiseSpec(**kwargs)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((1, [1]), {}, "n must be an integer >= 2"),
        ((50, []), {}, "must not be empty"),
        ((50, [20, 10]), {}, "strictly increasing"),
        ((50, [0, 10]), {}, "query counts must be >= 1"),
        ((50, [10]), {"trials": 0}, "trials must be >= 1"),
        ((50, [10]), {"solver": "cvx"}, "solver must be one of"),
        ((50, [10]), {"family": "sparse"}, "query family must be one of"),
    ],
)
def test_recovery_curve_options_reject(args: tuple, kwargs: dict, match: str) -> None:
    with pytest.raises(CensusDPError, match=match):
        RecoveryCurveOptions(*args, **kwargs)


def test_recovery_curve_rejects_workers() -> None:
    with pytest.raises(CensusDPError, match="workers must be >= 1"):
        recovery_curve(RecoveryCurveOptions(50, [10]), workers=0)


def test_noise_variances() -> None:
    assert NoiseSpec.laplace(0.5).noise_variance == pytest.approx(8.0)
    q = math.exp(-0.5)
    assert NoiseSpec.geometric(0.5).noise_variance == pytest.approx(2 * q / (1 - q) ** 2)
    assert jason_gaussian_variance(100, "matlab") == pytest.approx(
        jason_gaussian_variance(100) ** 2
    )
