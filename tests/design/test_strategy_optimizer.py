"""The strategy optimiser's numerics (censusdp.design._optimize, censusdp.design._l2dual).

Independent references: gradients against central finite differences; errors against
``numpy.linalg.pinv`` of explicit workload and strategy matrices; the L2 optimum against
its optimality conditions (unit diagonal, ``X^{-1} G X^{-1}`` diagonal) and against a
direct search over every entry of a small strategy matrix, which shares no code with
the dual search.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize
from test_strategy import explicit_marginals, ref_all_range, ref_prefix, ref_rootmse

from censusdp.design import DesignError, StrategyRequest, evaluate_strategy, make_workload
from censusdp.design._accuracy import squared_error
from censusdp.design._l2dual import dual_value, eigen_strategy, l2_optimum
from censusdp.design._matrices import (
    EigenStrategy,
    all_range_factor,
    prefix_factor,
    total_factor,
)
from censusdp.design._optimize import (
    marginals_l2_optimum,
    pidentity_matrix,
    pidentity_objective,
)


def _central_gradient(fun, x: np.ndarray, h: float) -> np.ndarray:
    out = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        out[i] = (fun(x + e) - fun(x - e)) / (2 * h)
    return out


def _explicit_error(g: np.ndarray, a: np.ndarray) -> float:
    """``sens_2(A)^2 tr(G (A^T A)^+)`` by pinv (a second computation of the error)."""
    sens2 = float(np.square(a).sum(axis=0).max())
    return sens2 * float(np.trace(g @ np.linalg.pinv(a.T @ a)))


@pytest.mark.parametrize("norm", [1, 2])
def test_pidentity_objective_matches_pinv_and_finite_differences(norm: int) -> None:
    rng = np.random.default_rng(5)
    n, p = 9, 3
    w = ref_all_range(n)
    g = w.T @ w
    x = rng.uniform(0.1, 1.0, p * n)
    f, grad = pidentity_objective(x, g, p, norm)
    a = pidentity_matrix(x.reshape(p, n), norm)
    assert f == pytest.approx(np.linalg.norm(w @ np.linalg.pinv(a), "fro") ** 2, rel=1e-10)
    numeric = _central_gradient(lambda z: pidentity_objective(z, g, p, norm)[0], x, 1e-6)
    assert np.allclose(grad, numeric, rtol=1e-6, atol=1e-6 * np.abs(numeric).max())


def test_dual_gradient_matches_finite_differences() -> None:
    rng = np.random.default_rng(6)
    b = rng.normal(size=(7, 7))
    g = b.T @ b
    u = rng.normal(scale=0.5, size=7)
    _, grad = dual_value(g, u)
    numeric = _central_gradient(lambda z: dual_value(g, z)[0], u, 1e-6)
    assert np.allclose(grad, numeric, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(("name", "ref"), [("all-range", ref_all_range), ("prefix", ref_prefix)])
def test_l2_optimum_is_certified_and_meets_its_optimality_conditions(name: str, ref) -> None:
    n = 16
    w = ref(n)
    g = w.T @ w
    opt = l2_optimum(g)
    a = opt.strategy
    # the error it reports is the error of the matrix it returns, computed a second way
    assert np.allclose(np.square(a).sum(axis=0), 1.0)
    assert opt.error == pytest.approx(_explicit_error(g, a), rel=1e-9)
    assert math.sqrt(opt.error / w.shape[0]) == pytest.approx(ref_rootmse(w, a, 2), rel=1e-9)
    # certified: the dual value is a lower bound within the gap
    assert opt.lower_bound <= opt.error <= opt.lower_bound * (1 + 1e-8)
    # KKT of min tr(G X^-1) s.t. diag(X) <= 1: X^-1 G X^-1 is diagonal (the multipliers)
    x_inv = np.linalg.inv(a.T @ a)
    kkt = x_inv @ g @ x_inv
    off = kkt - np.diag(np.diag(kkt))
    assert np.abs(off).max() < 1e-4 * np.abs(np.diag(kkt)).max()
    # the SVD bound is the dual at uniform multipliers, so the optimum lies above it
    svd = np.linalg.svd(w, compute_uv=False).sum() ** 2 / n
    assert opt.lower_bound >= svd * (1 - 1e-12)
    assert _explicit_error(g, eigen_strategy(g)) >= opt.error


def test_l2_optimum_agrees_with_a_direct_search_over_the_matrix() -> None:
    # a second optimiser: every entry of a 4 x 4 strategy (columns rescaled to norm 1,
    # which keeps the error smooth), error by pinv, numerical gradients, two starts; it
    # cannot beat the certified optimum and gets close to it
    w = ref_all_range(4)
    g = w.T @ w
    opt = l2_optimum(g)
    rng = np.random.default_rng(8)

    def err(z: np.ndarray) -> float:
        b = z.reshape(4, 4)
        return _explicit_error(g, b / np.sqrt(np.square(b).sum(axis=0)))

    direct = min(
        minimize(err, rng.normal(size=16), method="BFGS", options={"gtol": 1e-9}).fun
        for _ in range(2)
    )
    assert opt.error <= direct * (1 + 1e-9)
    assert direct <= opt.error * (1 + 1e-5)


def test_l2_optimum_lower_bounds_random_strategies() -> None:
    rng = np.random.default_rng(9)
    g = prefix_factor(10).gram
    opt = l2_optimum(g)
    for _ in range(30):
        a = rng.normal(size=(int(rng.integers(10, 20)), 10))
        assert _explicit_error(g, a) >= opt.lower_bound * (1 - 1e-12)


def test_l2_optimum_of_a_singular_gram() -> None:
    # W = 3 * (the total): the best strategy measures the total once; error 9 * 1
    opt = l2_optimum(9.0 * total_factor(6).gram)
    assert opt.strategy.shape[0] == 1
    assert opt.error == pytest.approx(9.0, rel=1e-12)
    assert opt.lower_bound == pytest.approx(9.0, rel=1e-9) and opt.lower_bound <= 9.0 * (1 + 1e-12)


def test_l2_optimum_leaves_a_cell_in_no_query_unmeasured() -> None:
    w = np.hstack([ref_prefix(5), np.zeros((5, 1))])
    g = w.T @ w
    opt = l2_optimum(g)
    assert np.all(np.isfinite(opt.strategy)) and not opt.strategy[:, -1].any()
    assert opt.error == pytest.approx(_explicit_error(g, opt.strategy), rel=1e-8)
    assert opt.error == pytest.approx(l2_optimum(g[:5, :5]).error, rel=1e-8)


def test_l2_optimum_warm_start_is_in_the_units_of_g() -> None:
    g = all_range_factor(32).gram
    cold = l2_optimum(g)
    warm = l2_optimum(4.0 * g, cold.log_multipliers + math.log(4.0))
    assert warm.error == pytest.approx(4.0 * cold.error, rel=1e-8)
    assert warm.evaluations <= 2


# -- the optimiser against the HDMM reference (McKenna et al. 2018; issue 38's figures) ----

HDMM_ZCDP = {("all-range", 512): 3.207253}
HDMM_PURE = {("prefix", 128): 4.45388, ("pl94", None): 2.51803}


@pytest.mark.parametrize(("workload", "n"), list(HDMM_ZCDP))
def test_zcdp_optimum_below_hdmm(workload: str, n: int) -> None:
    r = evaluate_strategy(StrategyRequest(workload, n, "optimized"))
    assert r.rootmse < HDMM_ZCDP[(workload, n)]
    bound = r.optimizer["lower_bound_rootmse"]
    assert bound <= r.rootmse <= bound * (1 + 1e-9)
    assert r.optimizer["method"] == "kron-l2"


@pytest.mark.parametrize(("workload", "n"), list(HDMM_PURE))
def test_pure_optimiser_below_hdmm(workload: str, n: int | None) -> None:
    r = evaluate_strategy(StrategyRequest(workload, n, "optimized", privacy="pure"))
    assert r.rootmse < HDMM_PURE[(workload, n)]


def test_product_workload_l2_optimum_is_the_product_of_the_factors() -> None:
    r = evaluate_strategy(StrategyRequest("all-range", "8x12", "optimized"))
    cands = r.optimizer["candidates"]
    assert r.optimizer["method"] == "kron-l2"
    assert cands["kron-l2"]["rootmse"] <= cands["kron-pidentity"]["rootmse"]
    # a single Kronecker term: the product of the per-attribute L2 optima
    per = [l2_optimum(all_range_factor(k).gram).error for k in (8, 12)]
    assert r.rootmse == pytest.approx(math.sqrt(per[0] * per[1] / r.m), rel=1e-8)
    # which is the L2 optimum: certified by the factorised dual, and the dual over all 96
    # cells (no Kronecker structure) finds nothing better
    bound = r.optimizer["lower_bound_rootmse"]
    assert bound <= r.rootmse <= bound * (1 + 1e-8)
    dense = l2_optimum(np.kron(all_range_factor(8).gram, all_range_factor(12).gram))
    assert math.sqrt(dense.lower_bound / r.m) <= r.rootmse * (1 + 1e-9)
    assert math.sqrt(dense.error / r.m) >= bound * (1 - 1e-12)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("workload", "n", "hdmm"), [("all-range", 1024, 3.515083), ("prefix", 1024, 2.955452)]
)
def test_zcdp_optimum_at_1024(workload: str, n: int, hdmm: float) -> None:
    r = evaluate_strategy(StrategyRequest(workload, n, "optimized"))
    # HDMM's figure is rounded to 7 digits; the certified optimum is within 1e-9 of it
    assert r.rootmse < hdmm + 5e-7
    assert r.rootmse <= r.optimizer["lower_bound_rootmse"] * (1 + 1e-9)


def _explicit_eigen_strategy(domain: tuple[int, ...], mu: np.ndarray) -> np.ndarray:
    """The rows ``sqrt(mu_S) (x)_i Q_i`` built densely from their definition."""
    blocks = []
    for key, m in enumerate(mu):
        if m == 0:
            continue
        p = np.ones((1, 1))
        for i, n in enumerate(domain):
            q = np.full((n, n), 1.0 / n) if key >> i & 1 else np.eye(n) - 1.0 / n
            p = np.kron(p, q)
        blocks.append(math.sqrt(m) * p)
    return np.vstack(blocks)


def test_marginals_l2_optimum_matches_dense_matrices_and_the_svd_bound() -> None:
    domain = (2, 3, 4)
    workload = make_workload("marginals:2x3x4:1,2", None)
    w = explicit_marginals(domain, list(workload.marginal_keys), [1.0] * 6)
    r = evaluate_strategy(StrategyRequest("marginals:2x3x4:1,2", None, "optimized"))
    assert r.optimizer["method"] == "marginals-eigen"
    s = marginals_l2_optimum(workload).strategy
    a = _explicit_eigen_strategy(domain, s.mu)
    assert a.shape[0] == s.rows
    # error, both sensitivities and the bound, each computed a second way
    assert r.rootmse == pytest.approx(ref_rootmse(w, a, 2), rel=1e-9)
    assert s.column_norm(1) == pytest.approx(np.abs(a).sum(axis=0).max(), rel=1e-12)
    assert s.column_norm(2) == pytest.approx(np.sqrt(np.square(a).sum(axis=0).max()), rel=1e-12)
    svd = np.linalg.svd(w, compute_uv=False).sum() / math.sqrt(w.shape[0] * w.shape[1])
    assert r.rootmse == pytest.approx(svd, rel=1e-9)
    assert r.optimizer["lower_bound_rootmse"] == pytest.approx(svd, rel=1e-9)
    # and the dual over all 24 cells (no symmetry assumed) certifies it is the optimum
    dense = l2_optimum(w.T @ w)
    assert math.sqrt(dense.error / w.shape[0]) >= r.rootmse * (1 - 1e-9)
    assert math.sqrt(dense.lower_bound / w.shape[0]) == pytest.approx(r.rootmse, rel=1e-8)


def test_eigen_strategy_refuses_what_it_cannot_answer() -> None:
    workload = make_workload("marginals:2x3:all", None)
    with pytest.raises(DesignError, match="does not support"):
        squared_error(workload, EigenStrategy((2, 3), np.array([0.0, 1.0, 1.0, 1.0])))
    with pytest.raises(DesignError, match="answers marginals"):
        squared_error(make_workload("prefix", 6), EigenStrategy((6,), np.ones(2)))
