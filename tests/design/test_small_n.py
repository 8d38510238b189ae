"""Mechanisms for one small count (censusdp.design.small_n), JASON JSR-19-2F sec. 5.2.3."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest

from censusdp.cli import main
from censusdp.design import DesignError
from censusdp.design.small_n import (
    LP_VARIANTS,
    SmallNRequest,
    actual_epsilon,
    fair_mechanism,
    geometric_clamped,
    geometric_conditioned,
    mechanism_properties,
    optimal_mechanism,
    small_n_report,
)

EPSILONS = ["1/4", "1/2", "1", "2"]


def as_float(eps: str) -> float:
    return float(Fraction(eps))


def two_sided_geometric(k: int, alpha: float) -> float:
    return (1 - alpha) / (1 + alpha) * alpha ** abs(k)


@pytest.mark.parametrize("eps", EPSILONS)
def test_geometric_is_the_clamped_noise_distribution(eps: str) -> None:
    n, alpha = 5, math.exp(-as_float(eps))
    p = geometric_clamped(n, eps)
    # reference: clamp a + delta over a wide range of delta
    ref = np.zeros((n + 1, n + 1))
    for j in range(n + 1):
        for k in range(-400, 401):
            ref[min(n, max(0, j + k)), j] += two_sided_geometric(k, alpha)
    np.testing.assert_allclose(p, ref, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(p.sum(axis=0), 1.0)
    assert actual_epsilon(p) == pytest.approx(-math.log(alpha))


def test_geometric_pathologies_named_by_the_report() -> None:
    # n = 2: the true answer 1 is less likely than either wrong answer (small epsilon)
    p = geometric_clamped(2, "1/2")
    assert p[1, 1] < p[0, 1] and p[1, 1] < p[2, 1]
    assert not mechanism_properties(p)["column_honesty"]
    # weak honesty holds exactly when n >= 2 alpha / (1 - alpha) (with an interior, n >= 2)
    for eps in (0.3, 0.5, 1.0):
        alpha = math.exp(-eps)
        threshold = 2 * alpha / (1 - alpha)
        for n in range(2, 20):
            props = mechanism_properties(geometric_clamped(n, eps))
            assert props["weak_honesty"] == (n >= threshold - 1e-12), (eps, n)
    # closer answers more likely requires alpha <= 1/2 (epsilon >= ln 2)
    assert mechanism_properties(geometric_clamped(6, 0.7))["column_monotonicity"]
    assert not mechanism_properties(geometric_clamped(6, 0.69))["column_monotonicity"]


@pytest.mark.parametrize("n", range(1, 13))
def test_fair_mechanism(n: int) -> None:
    for eps in EPSILONS:
        p = fair_mechanism(n, eps)
        np.testing.assert_allclose(p.sum(axis=0), 1.0, rtol=1e-12)
        assert actual_epsilon(p) == pytest.approx(as_float(eps))
        assert all(mechanism_properties(p).values())
        alpha = math.exp(-as_float(eps))
        # "the probability of returning the correct answer is a little larger than in the
        # geometric mechanism" (interior columns)
        assert np.diag(p).min() > (1 - alpha) / (1 + alpha)
        if n % 2 == 0:  # the report's normaliser, as printed, for even n
            y = (1 - alpha) / (1 + alpha - 2 * alpha ** (n / 2 + 1))
            assert p[0, 0] == pytest.approx(y, rel=1e-12)


def test_conditioned_geometric_spends_more_than_epsilon() -> None:
    for n in (2, 5, 10):
        eps = actual_epsilon(geometric_conditioned(n, 1))
        assert 1.0 < eps <= 2.0 + 1e-12
    assert actual_epsilon(geometric_conditioned(1, 1)) == pytest.approx(1.0)


def expected_correct(p: np.ndarray) -> float:
    return float(np.trace(p) / p.shape[0])


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("eps", ["1/2", "1", "2"])
def test_lp_optimum_equals_brute_force_over_remappings_of_geometric(n: int, eps: str) -> None:
    """Ghosh, Roughgarden & Sundararajan (2012, Thm. 1.1): every Bayesian consumer with a
    loss monotone in |i - j| does best with the geometric mechanism followed by its own
    remapping. So the DP-only LP optimum must equal the best of all (n+1)^(n+1)
    deterministic remappings of the range-restricted geometric mechanism."""
    geo = geometric_clamped(n, eps)
    size = n + 1
    best_correct, best_abs = 0.0, math.inf
    dist = np.abs(np.arange(size)[:, None] - np.arange(size)[None, :])
    for remap in itertools.product(range(size), repeat=size):
        q = np.zeros((size, size))
        for out, ans in enumerate(remap):
            q[ans] += geo[out]
        best_correct = max(best_correct, expected_correct(q))
        best_abs = min(best_abs, float((dist * q).sum() / size))
    p, info = optimal_mechanism(n, eps)
    assert 1 - info["objective"] == pytest.approx(best_correct, abs=1e-9)
    assert expected_correct(p) == pytest.approx(best_correct, abs=1e-9)
    _, info = optimal_mechanism(n, eps, loss="abs")
    assert info["objective"] == pytest.approx(best_abs, abs=1e-9)


def grid_search_n1(alpha: float, cons: tuple[str, ...], steps: int) -> float:
    a = np.linspace(0, 1, steps + 1)
    p00, p11 = np.meshgrid(a, a, indexing="ij")
    p10, p01 = 1 - p00, 1 - p11
    ok = (
        (p00 >= alpha * p01 - 1e-12)
        & (p01 >= alpha * p00 - 1e-12)
        & (p10 >= alpha * p11 - 1e-12)
        & (p11 >= alpha * p10 - 1e-12)
    )
    if "weak_honesty" in cons:
        ok &= (p00 >= 0.5) & (p11 >= 0.5)
    if "symmetry" in cons:
        ok &= np.isclose(p00, p11)
    if "column_honesty" in cons:
        ok &= (p00 >= p10) & (p11 >= p01)
    return float(((p00 + p11) / 2)[ok].max())


def grid_search_n2_symmetric(alpha: float, cons: tuple[str, ...], steps: int) -> float:
    """n = 2 under symmetry: column 0 = (x0, x1, x2), column 2 its mirror, column 1 = (b, 1-2b, b)."""
    g = np.linspace(0, 1, steps + 1)
    x0, x1, b = np.meshgrid(g, g, g / 2, indexing="ij")
    x2 = 1 - x0 - x1
    c0 = [x0, x1, x2]
    c1 = [b, 1 - 2 * b, b]
    c2 = [x2, x1, x0]
    cols = [c0, c1, c2]
    ok = x2 >= -1e-12
    for j in range(2):
        for i in range(3):
            u, v = cols[j][i], cols[j + 1][i]
            ok &= (u >= alpha * v - 1e-12) & (v >= alpha * u - 1e-12)
    if "weak_honesty" in cons:
        ok &= (x0 >= 1 / 3) & (1 - 2 * b >= 1 / 3)
    if "column_honesty" in cons:
        ok &= (x0 >= x1) & (x0 >= x2) & (1 - 2 * b >= b)
    if "column_monotonicity" in cons:
        ok &= (x0 >= x1) & (x1 >= x2) & (1 - 2 * b >= b)
    correct = (x0 + (1 - 2 * b) + x0) / 3
    return float(correct[ok].max())


@pytest.mark.parametrize("eps", ["1/2", "1"])
@pytest.mark.parametrize("variant", list(LP_VARIANTS))
def test_lp_optimum_matches_grid_search_on_tiny_n(eps: str, variant: str) -> None:
    cons = LP_VARIANTS[variant]
    alpha = math.exp(-as_float(eps))
    p1, info1 = optimal_mechanism(1, eps, cons)
    grid1 = grid_search_n1(alpha, cons, 2000)
    assert 1 - info1["objective"] >= grid1 - 1e-9  # the LP is at least as good as any grid point
    assert 1 - info1["objective"] <= grid1 + 1e-3  # and the grid gets within its step
    if "symmetry" in cons:
        p2, info2 = optimal_mechanism(2, eps, cons)
        grid2 = grid_search_n2_symmetric(alpha, cons, 160)
        assert 1 - info2["objective"] >= grid2 - 1e-9
        assert 1 - info2["objective"] <= grid2 + 1e-2
    # the returned mechanism is DP and has every property it was asked for
    for n in (1, 2, 5, 9):
        p, _ = optimal_mechanism(n, eps, cons)
        np.testing.assert_allclose(p.sum(axis=0), 1.0)
        assert actual_epsilon(p) <= as_float(eps) + 1e-7
        props = mechanism_properties(p, tol=1e-7)
        assert all(props[c] for c in cons)


@pytest.mark.parametrize("n", [1, 2, 3, 6, 9])
@pytest.mark.parametrize("eps", EPSILONS)
def test_fair_mechanism_is_minimax_optimal(n: int, eps: str) -> None:
    """The LP minimising the worst-case wrong-answer rate reaches the fair mechanism's."""
    _, info = optimal_mechanism(n, eps, loss="worst")
    fair = fair_mechanism(n, eps)
    assert info["objective"] == pytest.approx(1 - np.diag(fair).min(), abs=1e-8)


def test_constraints_cost_accuracy_in_order() -> None:
    report = small_n_report(SmallNRequest(10, "1/2"))
    rates = {m.name: m.wrong_answer_rate for m in report.mechanisms}
    assert rates["lp"] <= rates["lp_honest_symmetric"] + 1e-12 <= rates["lp_all"] + 2e-12
    assert rates["lp"] == pytest.approx(rates["geometric_clamped"], abs=1e-9)
    assert rates["lp_all"] > rates["lp"] + 1e-3  # monotonicity costs at alpha > 1/2
    assert max(rates.values()) == rates["uniform"] == pytest.approx(10 / 11)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n": 0}, "n is 0; it must be an integer in 1..200"),
        ({"n": 201}, "n is 201"),
        ({"epsilon": "-1"}, "epsilon is -1; it must be positive"),
        ({"epsilon": "abc"}, "epsilon"),
        ({"loss": "l2"}, "loss is 'l2'"),
    ],
)
def test_invalid_requests(kwargs: dict, match: str) -> None:
    args = {"n": 4, "epsilon": "1", **kwargs}
    with pytest.raises(DesignError, match=match):
        SmallNRequest(**args)


def test_unknown_constraint() -> None:
    with pytest.raises(DesignError, match="unknown constraint 'honest'"):
        optimal_mechanism(3, 1, ("honest",))


def test_cli_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["design", "small-n", "--n", "4", "--epsilon", "1/2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n"] == 4 and out["epsilon"] == "1/2"
    mechs = out["mechanisms"]
    assert set(mechs) >= {
        "uniform",
        "geometric_clamped",
        "fair",
        "lp",
        "lp_honest_symmetric",
        "lp_all",
    }
    for m in mechs.values():
        dist = np.array(m["distribution"])
        assert dist.shape == (5, 5)
        np.testing.assert_allclose(dist.sum(axis=1), 1.0)
        assert m["wrong_answer_rate"] == pytest.approx(1 - np.trace(dist) / 5)
    assert mechs["geometric_conditioned"]["actual_epsilon"] > 0.5
    assert mechs["lp"]["lp"]["solver"].startswith("HiGHS")


def test_mechanism_names_say_which_geometric_is_dp(capsys: pytest.CaptureFixture[str]) -> None:
    """JASON sec. 5.2.3's reader: the clamped geometric mechanism is epsilon-DP
    (post-processing), the conditioned one (noise redrawn until in range) is not; the
    names and the JSON's ``epsilon_dp`` say so, and no plain ``geometric_truncated``."""
    assert main(["design", "small-n", "--n", "4", "--epsilon", "1", "--json"]) == 0
    mechs = json.loads(capsys.readouterr().out)["mechanisms"]
    assert "geometric_truncated" not in mechs and "geometric" not in mechs
    clamped, conditioned = mechs["geometric_clamped"], mechs["geometric_conditioned"]
    assert clamped["epsilon_dp"] and clamped["actual_epsilon"] == pytest.approx(1.0)
    assert not conditioned["epsilon_dp"] and conditioned["actual_epsilon"] > 1.0
    assert "not epsilon-DP" in conditioned["description"]
    assert all(mechs[k]["epsilon_dp"] for k in ("uniform", "fair", "lp", "lp_all"))
    assert main(["design", "small-n", "--n", "4", "--epsilon", "1"]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()}
    assert rows["geometric_clamped"][5] == "yes" and rows["geometric_conditioned"][5] == "no"
