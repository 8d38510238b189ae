"""The bounded least-squares solvers of the Dinur-Nissim laboratory (JASON (JSR-19-2F) eq. (4-4)).

The Gram-matrix FISTA must return a KKT point of ``min ||Qx - b||^2, 0 <= x <= 1``
(checked directly and against ``scipy.optimize.lsq_linear``), including problems
where the solution is interior, at a vertex, or degenerate.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.attacks.dinur_nissim._bounded_ls import (
    FistaSettings,
    gram_fista,
    lsq_linear_solve,
    round_bits,
)
from censusdp.errors import CensusDPError
from profiles import examples


def _kkt_violation(g: np.ndarray, c: np.ndarray, x: np.ndarray) -> float:
    grad = g @ x - c
    pg = np.where(x <= 0, np.minimum(grad, 0), np.where(x >= 1, np.maximum(grad, 0), grad))
    return float(np.max(np.abs(pg) / np.maximum(np.diag(g), 1e-300)[:, None]))


def test_interior_solution_equals_normal_equations() -> None:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(40, 10))
    x_true = rng.uniform(0.2, 0.8, 10)
    g, c = a.T @ a, a.T @ (a @ x_true)
    res = gram_fista(g, c, settings=FistaSettings(tol=1e-10))
    np.testing.assert_allclose(res.x[:, 0], x_true, atol=1e-7)
    assert res.converged.all()


def test_multiple_right_hand_sides_match_single_solves() -> None:
    rng = np.random.default_rng(1)
    q = rng.integers(0, 2, (90, 30)).astype(float)
    b = (q @ rng.integers(0, 2, 30))[:, None] + rng.laplace(0, 3.0, (90, 3))
    g, c = q.T @ q, q.T @ b
    together = gram_fista(g, c).x
    for j in range(3):
        alone = gram_fista(g, c[:, j]).x[:, 0]
        np.testing.assert_allclose(together[:, j], alone, atol=1e-5)
    assert _kkt_violation(g, c, together) <= 1e-7


@settings(max_examples=examples(15), deadline=None)
@given(
    n=st.integers(2, 25),
    ratio=st.sampled_from([0.3, 0.8, 1.5, 4.0]),
    scale=st.sampled_from([0.0, 0.5, 5.0]),
    seed=st.integers(0, 10_000),
)
def test_fista_is_a_kkt_point_and_matches_lsq_linear(
    n: int, ratio: float, scale: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    m = max(1, int(ratio * n))
    q = rng.integers(0, 2, (m, n)).astype(float)
    b = q @ rng.integers(0, 2, n) + scale * rng.standard_normal(m)
    res = gram_fista(q.T @ q, q.T @ b)
    x = res.x[:, 0]
    assert res.converged.all()
    assert np.all((x >= 0) & (x <= 1))
    assert _kkt_violation(q.T @ q, (q.T @ b)[:, None], res.x) <= 1e-7
    ref = lsq_linear_solve(q, b).x[:, 0]
    f_fista = float(np.sum((q @ x - b) ** 2))
    f_ref = float(np.sum((q @ ref - b) ** 2))
    assert f_fista <= f_ref + 1e-6 * (1 + f_ref)


def test_vertex_certificate_returns_exact_secret() -> None:
    rng = np.random.default_rng(3)
    n = 120
    d = rng.integers(0, 2, n)
    q = rng.integers(0, 2, (90, n)).astype(float)
    res = gram_fista(q.T @ q, q.T @ (q @ d))
    np.testing.assert_array_equal(res.x[:, 0], d.astype(float))  # exactly the vertex


def test_rounding_rule() -> None:
    np.testing.assert_array_equal(round_bits(np.array([0.0, 0.4999, 0.5, 1.0])), [0, 0, 1, 1])


@pytest.mark.parametrize(
    ("g", "c", "kwargs", "match"),
    [
        (np.eye(3)[:2], np.zeros(3), {}, "gram must be a square matrix"),
        (np.eye(3), np.zeros(4), {}, "rhs must have 3 rows"),
        (np.eye(3), np.zeros(3), {"lower": 1.0, "upper": 0.0}, "upper must exceed lower"),
    ],
)
def test_gram_fista_rejects(g: np.ndarray, c: np.ndarray, kwargs: dict, match: str) -> None:
    with pytest.raises(CensusDPError, match=match):
        gram_fista(g, c, **kwargs)


def test_fista_settings_reject_a_tolerance_of_zero() -> None:
    with pytest.raises(CensusDPError, match="tol must be positive"):
        FistaSettings(tol=0.0)


@pytest.mark.parametrize("seed", [0, 2, 3])
def test_stagnated_iterate_does_not_backtrack_on_rounding(seed: int) -> None:
    # Regression: `attack dn-figures --quick --seed 3` (fig. 5-7) stopped with "backtracking
    # exceeded the spectral bound": once the iterate stagnates (steps of 1e-16), the
    # curvature of a step, a difference of two Gram products, is rounding noise that can
    # exceed any step model. A tolerance no iterate reaches keeps FISTA iterating there.
    rng = np.random.default_rng(seed)
    q = rng.integers(0, 2, (160, 40)).astype(np.float64)
    x_true = rng.uniform(0.2, 0.8, 40)
    g = q.T @ q
    res = gram_fista(g, g @ x_true, settings=FistaSettings(tol=1e-300, max_iter=3000))
    assert res.iterations == 3000
    np.testing.assert_allclose(res.x[:, 0], x_true, atol=1e-12)
