"""The active-set least-squares backend against Clarabel and SciPy on many random
subproblems: same objective within the noise-scaled tolerance, constraints exact, and
linear systems sized by the positive cells and the answers, not children x cells."""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np
import pytest
from _topdown_gen import (
    DHC_LITE_QUERIES,
    census_subproblem,
    of_shape,
    random_subproblem,
    solver_shapes,
    solver_tolerance,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from censusdp.release.topdown import solve_l2
from censusdp.release.topdown.solvers import active_set
from censusdp.release.topdown.solvers.base import Attempt, compress
from profiles import examples

SETTINGS = settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

shapes = solver_shapes(k_min=1, c_max=30, means=[0.3, 3.0, 40.0])
_build = of_shape
_tolerance = solver_tolerance


@SETTINGS
@given(shapes)
def test_active_set_matches_clarabel_with_every_constraint_exact(d: dict) -> None:
    sub = _build(d)
    got = solve_l2(sub, method="activeset")
    one_child = sub.parent is not None and sub.k == 1  # takes the parent, no solve
    # the method may give up (the chain then runs Clarabel; see the rate test below),
    # but whatever it returns must be right
    assert got.method in (("parent",) if one_child else ("activeset", "nnls-flow"))
    if one_child:
        np.testing.assert_array_equal(got.x[0], sub.parent)
        return
    if got.method == "nnls-flow":
        assert got.attempts[0][0] == "activeset"
        assert got.attempts[0][1].startswith(("max_iter", "inconsistent"))
        return
    ref = solve_l2(sub, method="clarabel")
    if ref.method != "clarabel":  # Clarabel gave up (it does, rarely): the ADMM then
        ref = solve_l2(sub, method="admm")
        assert ref.method == "admm", ref.attempts
    assert got.max_violation <= 1e-8 * max(1.0, sub.scale())
    assert (got.x >= 0).all()
    if sub.parent is not None:
        np.testing.assert_allclose(got.x.sum(axis=0), sub.parent, rtol=0, atol=1e-9 * sub.scale())
    assert abs(got.objective - ref.objective) <= _tolerance(sub, ref.objective)


def test_the_active_set_converges_on_most_random_subproblems() -> None:
    """The primal-dual active-set method can cycle when the Hessian is not an M-matrix
    and PDAS activates contradictory bounds (every child's total against the column
    sums); damping leaves few such cases, which the chain hands to Clarabel."""
    rng = np.random.default_rng(20)
    outcomes = []
    for _ in range(60):
        d = {
            "seed": int(rng.integers(2**32)),
            "k": int(rng.integers(2, 8)),
            "c": int(rng.integers(1, 31)),
            "n_groups": int(rng.integers(1, 5)),
            "n_queries": int(rng.integers(1, 5)),
            "root": bool(rng.integers(2)),
            "tight": bool(rng.integers(2)),
            "mean": float(rng.choice([0.3, 3.0, 40.0])),
            "noise": float(rng.choice([0.5, 3.0, 20.0])),
            "singular": bool(rng.integers(2)),
        }
        sub = _build(d)
        status = active_set.solve_active_set(sub, compress(sub), tol=1e-3).status
        outcomes.append(status == "converged")
    assert np.mean(outcomes) >= 0.9


def test_active_set_matches_scipy_on_a_small_problem_with_every_bound_kind() -> None:
    """An independent reference: SciPy's SLSQP on the explicit constraints."""
    rng = np.random.default_rng(11)
    sub, _ = random_subproblem(rng, k=3, c=6, n_groups=2, n_queries=3, noise=4.0, bound_slack=1)
    got = solve_l2(sub, method="activeset")
    assert got.method == "activeset"
    k, c = sub.k, sub.c
    cons = [{"type": "eq", "fun": lambda v: v.reshape(k, c).sum(axis=0) - sub.parent}]
    for i in range(k):
        for g in range(sub.G):
            cells = np.flatnonzero(sub.groups == g)

            def gsum(v, i=i, cells=cells):
                return v.reshape(k, c)[i, cells].sum()

            if np.isfinite(sub.group_upper[i, g]):
                cons.append(
                    {"type": "ineq", "fun": lambda v, u=sub.group_upper[i, g], f=gsum: u - f(v)}
                )
            cons.append(
                {"type": "ineq", "fun": lambda v, lo=sub.group_lower[i, g], f=gsum: f(v) - lo}
            )
        if np.isfinite(sub.total_upper[i]):
            cons.append(
                {
                    "type": "ineq",
                    "fun": lambda v, i=i: sub.total_upper[i] - v.reshape(k, c)[i].sum(),
                }
            )
        cons.append(
            {"type": "ineq", "fun": lambda v, i=i: v.reshape(k, c)[i].sum() - sub.total_lower[i]}
        )
    ref = minimize(
        lambda v: sub.objective(v.reshape(k, c)),
        solve_l2(sub, method="clarabel").x.ravel() + 0.3,
        method="SLSQP",
        bounds=[(0, None)] * (k * c),
        constraints=cons,
        options={"ftol": 1e-12, "maxiter": 2000},
    )
    assert ref.success
    assert got.objective <= ref.fun + 1e-6 * max(1.0, ref.fun)
    assert got.objective >= ref.fun - 1e-4 * max(1.0, ref.fun)  # SLSQP is no better


@pytest.mark.parametrize("root", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_census_shaped_families_are_solved_on_the_support(
    root: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dhc-lite: the reduced systems have one row per touched marginal answer and per
    active equality; the detailed query adds only a scalar; children x cells never
    appears."""
    rng = np.random.default_rng(12)
    queries = DHC_LITE_QUERIES + (("detailed",) if root else ())
    sub, truth = census_subproblem(
        rng,
        schema_name="dhc-lite",
        queries=queries,
        n_children=1 if root else 40,
        n_people=600,
        root=root,
        total_invariant=root,
    )
    sizes: list[tuple[int, int]] = []
    orig = active_set._System.__init__

    def spy(self, *args, **kwargs):
        orig(self, *args, **kwargs)
        sizes.append((self.n, self.g.shape[0]))

    monkeypatch.setattr(active_set._System, "__init__", spy)
    got = solve_l2(sub, method="activeset")
    assert got.method == "activeset"
    ref = solve_l2(sub, method="clarabel")
    assert abs(got.objective - ref.objective) <= 1e-6 * ref.objective
    marginal_rows = sum(
        m for m, name in zip(sub.query_sizes, queries, strict=True) if name != "detailed"
    )
    for n_free, rows in sizes:
        assert n_free < 0.5 * sub.k * sub.c  # the free set stays a fraction of the cells
        if root:
            # one row per marginal answer and per active bound: 619 + a few at most
            assert rows <= marginal_rows + sub.G + 1
    positive = int((got.x > 1e-9).sum())
    assert positive < 0.2 * sub.k * sub.c


def test_active_set_failure_on_a_dhc_family_falls_back_to_the_program(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(13)
    sub, _ = census_subproblem(
        rng, schema_name="dhc-lite", queries=DHC_LITE_QUERIES, n_children=12, n_people=300
    )

    def fail(*args, **kwargs):
        return Attempt(None, "max_iter", 60)

    monkeypatch.setattr(active_set, "solve_active_set", fail)
    with caplog.at_level(logging.WARNING, logger="censusdp"):
        res = solve_l2(sub)
    assert res.method == "piqp" and res.status == "optimal"
    assert res.attempts[0] == ("activeset", "max_iter")
    assert "activeset failed (max_iter); trying piqp" in caplog.text
    assert res.max_violation <= 1e-8 * sub.scale()
    np.testing.assert_allclose(res.x.sum(axis=0), sub.parent, rtol=0, atol=1e-9 * sub.scale())


def test_an_iteration_cap_reports_failure_instead_of_a_wrong_answer() -> None:
    rng = np.random.default_rng(14)
    sub, _ = census_subproblem(
        rng, schema_name="dhc-lite", queries=DHC_LITE_QUERIES, n_children=20, n_people=500
    )
    attempt = active_set.solve_active_set(sub, compress(sub), max_iter=1)
    x, status, iters = attempt.x, attempt.status, attempt.iterations
    assert x is None and status == "max_iter" and iters == 1
    attempt = active_set.solve_active_set(sub, compress(sub))
    x, status = attempt.x, attempt.status
    assert status == "converged" and x is not None


def test_noise_scaled_tolerance_bounds_the_objective_gap() -> None:
    """A looser tolerance (in persons) stops earlier; the objective stays within the
    bound the tolerance implies."""
    rng = np.random.default_rng(15)
    sub, _ = census_subproblem(
        rng, schema_name="dhc-lite", queries=DHC_LITE_QUERIES, n_children=30, n_people=800
    )
    comp = compress(sub)
    attempt = active_set.solve_active_set(sub, comp, tol=1e-4)
    tight, st1, it1 = attempt.x, attempt.status, attempt.iterations
    attempt = active_set.solve_active_set(sub, comp, tol=0.5)
    loose, st2, it2 = attempt.x, attempt.status, attempt.iterations
    assert st1 == st2 == "converged" and it2 <= it1
    assert sub.objective(loose) >= sub.objective(tight) - 1e-6 * sub.objective(tight)
    assert sub.objective(loose) - sub.objective(tight) <= 1e-3 * sub.objective(tight)


@SETTINGS
@given(shapes, st.integers(0, 2**32 - 1))
def test_children_with_their_own_weights_match_clarabel(d: dict, wseed: int) -> None:
    """Per-child weights (a spine release's per-geounit budgets): the active set and
    Clarabel reach the same weighted objective, which the unweighted solution does not
    beat."""
    sub = _build(d)
    if sub.parent is not None and sub.k == 1:
        return
    rng = np.random.default_rng(wseed)
    unit = rng.choice([1.0, 1.5, 4.0], size=(sub.n_queries, sub.k))
    weighted = replace(sub, unit_weights=unit)
    got = solve_l2(weighted, method="activeset")
    ref = solve_l2(weighted, method="clarabel")
    if got.method != "activeset" or ref.method != "clarabel":
        return  # a failure falls back (checked by the tests above); nothing to compare
    assert got.max_violation <= 1e-8 * max(1.0, sub.scale())
    assert (got.x >= 0).all()
    assert abs(got.objective - ref.objective) <= _tolerance(sub, ref.objective)
    assert got.objective == pytest.approx(weighted.objective(got.x))
    plain = solve_l2(sub, method="clarabel")
    if plain.method == "clarabel":
        assert weighted.objective(plain.x) >= ref.objective - _tolerance(sub, ref.objective)


@SETTINGS
@given(shapes, st.integers(0, 2**32 - 1))
def test_the_admm_weighs_children_measured_with_their_own_budgets(d: dict, wseed: int) -> None:
    """Per-child weights that are one multiple per child (a spine geounit that took its
    only child's share): the ADMM reaches Clarabel's weighted objective."""
    sub = _build(d)
    if sub.parent is not None and sub.k == 1:
        return
    rng = np.random.default_rng(wseed)
    u = rng.choice([1.0, 0.25, 0.5], size=sub.k)
    weighted = replace(sub, unit_weights=np.tile(u, (sub.n_queries, 1)))
    got = solve_l2(weighted, method="admm")
    ref = solve_l2(weighted, method="clarabel")
    plain = solve_l2(sub, method="admm")
    if plain.method == "admm":  # where the ADMM solves the unweighted family, it must
        assert got.method == "admm"  # solve the weighted one (not fall back)
    if got.method != "admm" or ref.method != "clarabel":
        return  # a failure falls back (checked by the tests above); nothing to compare
    assert got.max_violation <= 1e-8 * max(1.0, sub.scale())
    assert (got.x >= 0).all()
    assert abs(got.objective - ref.objective) <= _tolerance(sub, ref.objective)
    if plain.method == "admm":  # the unweighted point is no better under the weights
        assert weighted.objective(plain.x) >= got.objective - _tolerance(sub, ref.objective)


def test_per_child_weights_change_the_solution_in_every_backend() -> None:
    """One child measured four times as precisely: its answers pull harder, in the ADMM
    too (its penalties scale with the child); weights that differ between queries keep
    the ADMM out of the auto chain (one factorisation for all children)."""
    from _topdown_gen import small_subproblem

    sub = small_subproblem(
        np.array([10]),
        np.array([0]),
        np.zeros((2, 1)),
        np.full((2, 1), np.inf),
        np.zeros(2),
        np.full(2, np.inf),
        k=2,
        noisy=np.array([[8.0], [8.0]]),
    )
    even = solve_l2(sub)
    np.testing.assert_allclose(even.x[:, 0], [5.0, 5.0], atol=1e-6)
    heavy = replace(sub, unit_weights=np.array([[4.0, 1.0]]))
    got = solve_l2(heavy)
    # minimise 4 (a - 8)^2 + (b - 8)^2 with a + b = 10: a = 8 - 6/5, b = 8 - 24/5
    np.testing.assert_allclose(got.x[:, 0], [6.8, 3.2], atol=1e-6)
    admm = solve_l2(heavy, method="admm")
    assert admm.method == "admm"
    np.testing.assert_allclose(admm.x[:, 0], [6.8, 3.2], atol=1e-5)
    two = replace(
        heavy,
        query_rows=(*heavy.query_rows, heavy.query_rows[0]),
        query_sizes=(*heavy.query_sizes, heavy.query_sizes[0]),
        noisy=(*heavy.noisy, heavy.noisy[0]),
        weights=np.ones(2),
        unit_weights=np.array([[4.0, 1.0], [1.0, 1.0]]),
    )
    assert all(m != "admm" for m, _ in solve_l2(two).attempts)
    assert solve_l2(two, method="admm").method != "admm"  # declined, then the fallback


def test_a_few_dense_equalities_are_factored_by_their_schur_complement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Exact group sums (the DHC households held to their units' tenure) are dense rows
    of the reduced system: they are factored apart (the answers' block sparse, their
    Schur complement dense), which must give the same solution as factoring them in."""
    monkeypatch.setattr(active_set, "DENSE_MAX", 0)  # the sparse path, even when small
    monkeypatch.setattr(active_set, "DENSE_FILL", 1.0)
    calls = []
    bordered = active_set._System._factor_bordered

    def spy(self, s_mat):
        calls.append(self.n_eq)
        return bordered(self, s_mat)

    monkeypatch.setattr(active_set._System, "_factor_bordered", spy)
    for seed in range(5):
        rng = np.random.default_rng(seed)
        sub, _ = random_subproblem(
            rng, k=1, c=40, n_groups=3, n_queries=3, noise=3.0, root=True, tight=True
        )
        got = solve_l2(sub, method="activeset")
        assert got.method == "activeset" and calls
        monkeypatch.setattr(active_set, "BORDER_MAX", 0)
        plain = solve_l2(sub, method="activeset")
        monkeypatch.setattr(active_set, "BORDER_MAX", 32)
        groups = np.zeros((1, sub.G))
        np.add.at(groups.T, sub.groups, got.x.T)
        np.testing.assert_allclose(groups, sub.group_lower, atol=1e-8 * max(1.0, sub.scale()))
        assert abs(got.objective - plain.objective) <= _tolerance(sub, plain.objective)
