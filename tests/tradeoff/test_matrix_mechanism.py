"""The matrix mechanism's data-utility model (Abowd & Schmutte 2019, Online Appendices C and E).

"Direct computation" here means: enumerate every value of a discrete noise vector (or
simulate it) and average the utility of the realised wealth, without the Frobenius-norm
identity (E-20 to E-23) the library uses.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from censusdp.errors import BudgetError, ConfigError
from censusdp.tradeoff import (
    MatrixMechanismFrontier,
    data_utility,
    expected_utility_loss,
    l1_sensitivity,
    laplace_noise_variance,
    matrix_mechanism_accuracy,
)

# Two cells; the strategy measures each cell and their total (a two-level hierarchy).
A_TREE = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
Q_ALL = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])


def _enumerated_expected_utility(u, pi, q, a, x, sigma):
    """E[U(Pi^T (Q x + Q A^+ Delta e))] with e_j = +-sigma (Rademacher), all 2^p cases."""
    qa = q @ np.linalg.pinv(a)
    delta = np.abs(a).sum(axis=0).max()
    total = 0.0
    cases = list(itertools.product((-sigma, sigma), repeat=a.shape[0]))
    for e in cases:
        m = q @ x + delta * qa @ np.asarray(e)
        total += u(float(pi @ m))
    return total / len(cases)


def test_l1_sensitivity_is_the_largest_column_norm():
    """App. C, Theorem 3: Delta_Q = max_k ||q_k||_1."""
    assert l1_sensitivity(np.eye(4)) == 1
    assert l1_sensitivity(A_TREE) == 2
    assert l1_sensitivity(np.array([[1, -3], [2, 0.5]])) == 3.5
    # a 3-level tree over 4 cells: every cell is in one query per level
    tree = np.vstack([np.ones((1, 4)), np.kron(np.eye(2), np.ones((1, 2))), np.eye(4)])
    assert l1_sensitivity(tree) == 3


def test_laplace_variance():
    """App. E: Laplace of scale 1/eps has sigma_e^2 = 2/eps^2."""
    assert laplace_noise_variance(2) == 0.5
    assert laplace_noise_variance("1/2") == 8.0
    with pytest.raises(BudgetError, match="epsilon is 0"):
        laplace_noise_variance(0)


def test_accuracy_e27_identity_and_projection():
    """I = -sigma^2 Delta^2 ||Q A^+||_F^2: identity strategy gives -sigma^2 n; Q = A gives rank."""
    assert matrix_mechanism_accuracy(np.eye(3), np.eye(3), 2.0) == pytest.approx(-6.0)
    # Q = A (full column rank): Q A^+ is the projection on col(A), ||.||_F^2 = rank = 2
    assert matrix_mechanism_accuracy(A_TREE, A_TREE, 1.0) == pytest.approx(-2 * 2**2)
    # total only, answered from the tree: Q A^+ = [1/3, 1/3, 2/3], norm^2 = 2/3
    assert matrix_mechanism_accuracy(np.array([[1.0, 1.0]]), A_TREE, 1.0) == pytest.approx(
        -4 * 2 / 3
    )


def test_accuracy_is_minus_the_total_variance_of_the_answers_by_simulation():
    """E-27 against the empirical variance of Q A^+ Delta e with Laplace e (seeded)."""
    rng = np.random.default_rng(7)
    eps = 0.8
    e = rng.laplace(scale=1 / eps, size=(200_000, 3))
    noise = (2.0 * e) @ (Q_ALL @ np.linalg.pinv(A_TREE)).T
    empirical = noise.var(axis=0).sum()
    i = matrix_mechanism_accuracy(Q_ALL, A_TREE, laplace_noise_variance(eps))
    assert -i == pytest.approx(empirical, rel=0.02)
    assert abs(empirical / (-i * 2) - 1) > 0.3  # a factor 2 is detected


def test_quadratic_utility_loss_equals_direct_enumeration():
    """With U(w) = w - g w^2 / 2 the second-order expansion (E-26) is exact."""
    g = 0.05
    u = lambda w: w - g * w * w / 2  # noqa: E731
    x = np.array([3.0, 5.0])
    sigma = 1.5
    for pi in (np.array([1.0, 0.0, 0.0]), np.array([0.2, 0.0, 1.0]), np.array([1.0, -1.0, 0.5])):
        w0 = float(pi @ Q_ALL @ x)
        direct = u(w0) - _enumerated_expected_utility(u, pi, Q_ALL, A_TREE, x, sigma)
        loss = expected_utility_loss(pi, Q_ALL, A_TREE, sigma**2, -g)
        assert loss[0] == pytest.approx(direct, rel=1e-12)
        assert loss[0] > 0


def test_cara_utility_second_order_accuracy():
    """U = -exp(-a W), Gaussian noise: exact E[U] = -exp(-a w0 + a^2 v / 2); the loss of E-26
    matches to O(v^2), so the relative error shrinks in proportion to v."""
    a_coef = 0.3
    pi = np.array([0.5, 0.5, 0.0])
    w0 = float(pi @ Q_ALL @ np.array([2.0, 1.0]))
    errors = []
    for s2 in (0.4, 0.1, 0.025):
        u2 = -(a_coef**2) * math.exp(-a_coef * w0)
        loss = float(expected_utility_loss(pi, Q_ALL, A_TREE, s2, u2)[0])
        d = data_utility(pi, Q_ALL, A_TREE, s2, u2)
        v = d.sensitivity**2 * s2 * d.exposure[0]  # Var(W) for this person
        exact = -math.exp(-a_coef * w0) - (-math.exp(-a_coef * w0 + a_coef**2 * v / 2))
        errors.append(abs(loss - exact) / exact)
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.02
    assert errors[1] / errors[2] == pytest.approx(4.0, rel=0.1)  # O(v) relative error


def test_weights_e28_make_utility_linear_in_accuracy():
    """b_i = -1/2 E[U''] ||Pi_i^T Q A^+||^2 / ||Q A^+||^2 and loss_i = -b_i I, for k persons."""
    pi = np.array([[1.0, 0.0, 0.3], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    u2 = np.array([-1.0, -0.5, -2.0])
    d = data_utility(pi, Q_ALL, A_TREE, 0.7, u2)
    assert d.loss == pytest.approx(-d.weight * d.accuracy, rel=1e-12)
    qa = Q_ALL @ np.linalg.pinv(A_TREE)
    for i in range(3):
        expo = float(np.sum((pi[:, i] @ qa) ** 2))
        assert d.weight[i] == pytest.approx(-0.5 * u2[i] * expo / np.sum(qa * qa), rel=1e-12)
    # the same loss per person as one at a time
    for i in range(3):
        one = expected_utility_loss(pi[:, i], Q_ALL, A_TREE, 0.7, u2[i])
        assert one[0] == pytest.approx(d.loss[i], rel=1e-12)


def test_better_strategy_lowers_the_loss():
    """For the total query, the tree beats measuring the two cells only (less variance)."""
    q = np.array([[1.0, 1.0]])
    pi = np.array([1.0])
    tree = expected_utility_loss(pi, q, A_TREE, 1.0, -1.0, sensitivity=1.0)[0]
    cells = expected_utility_loss(pi, q, np.eye(2), 1.0, -1.0)[0]
    assert tree == pytest.approx(0.5 * 2 / 3)
    assert cells == pytest.approx(0.5 * 2)


def test_frontier_derivatives():
    f = MatrixMechanismFrontier(Q_ALL, A_TREE)
    k = 4 * 2  # Delta^2 ||Q A^+||^2
    assert f.scale == pytest.approx(k)
    for eps in (0.5, 2.0):
        assert f.quality(eps) == pytest.approx(
            matrix_mechanism_accuracy(Q_ALL, A_TREE, laplace_noise_variance(eps))
        )
        h = 1e-5
        assert f.slope(eps) == pytest.approx(
            (f.quality(eps + h) - f.quality(eps - h)) / (2 * h), rel=1e-6
        )
        assert f.curvature(eps) == pytest.approx(
            (f.slope(eps + h) - f.slope(eps - h)) / (2 * h), rel=1e-6
        )


@pytest.mark.parametrize(
    "args,match",
    [
        ((np.array([1.0, 0.0, 1.0]), np.eye(2), np.eye(2), 1.0, -1.0), "Pi must have one row"),
        ((np.array([1.0, 0.0]), np.eye(2), np.eye(3), 1.0, -1.0), "same histogram cells"),
        (
            (np.array([1.0]), np.array([[1.0, 0.0]]), np.array([[1.0, 1.0]]), 1.0, -1.0),
            "does not support workload",
        ),
        ((np.array([1.0, 0.0]), np.eye(2), np.eye(2), 0.0, -1.0), "noise variance"),
        ((np.array([1.0, 0.0]), np.eye(2), np.eye(2), 1.0, 0.5), "concave"),
        ((np.array([1.0, 0.0]), np.eye(2), np.ones(2), 1.0, -1.0), "2-D matrix"),
    ],
)
def test_invalid_inputs(args, match):
    with pytest.raises(ConfigError, match=match):
        data_utility(*args)
