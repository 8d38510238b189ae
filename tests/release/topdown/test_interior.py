"""The marginal-space interior-point backend against Clarabel on many random dense
families: same objective within the noise-scaled tolerance, every constraint exact, and
a forced failure falls through the chain."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from _topdown_gen import (
    DHC_LITE_QUERIES,
    census_subproblem,
    of_shape,
    solver_shapes,
    solver_tolerance,
)
from hypothesis import HealthCheck, given, settings

from censusdp.release.topdown import Subproblem, solve_l2
from censusdp.release.topdown.solvers import active_set, chain, clarabel_qp, interior, piqp_qp
from censusdp.release.topdown.solvers.base import Attempt, compress
from censusdp.release.topdown.solvers.chain import backend_order
from profiles import examples

SETTINGS = settings(
    max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

shapes = solver_shapes(k_min=2, c_max=24, means=[3.0, 40.0, 400.0])
_build = of_shape
_tolerance = solver_tolerance


def _reference(sub: Subproblem):
    ref = solve_l2(sub, method="clarabel")
    if ref.method != "clarabel":  # Clarabel gave up (rarely): the ADMM then
        ref = solve_l2(sub, method="admm")
        assert ref.method == "admm", ref.attempts
    return ref


@SETTINGS
@given(shapes)
def test_interior_matches_clarabel_with_every_constraint_exact(d: dict) -> None:
    sub = _build(d)
    got = solve_l2(sub, method="interior")
    if sub.parent is not None and sub.k == 1:
        return  # takes the parent, no solve
    # the method may give up (the chain then runs the next backend; see the rate test
    # below), but whatever it returns must be right
    assert got.method in ("interior", "nnls-flow"), got.attempts
    if got.method == "nnls-flow":
        assert got.attempts[0][0] == "interior"
        assert not got.attempts[0][1].startswith("converged")
        return
    ref = _reference(sub)
    assert got.max_violation <= 1e-8 * max(1.0, sub.scale())
    assert (got.x >= 0).all()
    if sub.parent is not None:
        np.testing.assert_allclose(got.x.sum(axis=0), sub.parent, rtol=0, atol=1e-9 * sub.scale())
    gs = sub.group_sums(got.x)
    tol = 1e-8 * max(1.0, sub.scale())
    assert (gs >= sub.group_lower - tol).all() and (gs <= sub.group_upper + tol).all()
    ts = got.x.sum(axis=1)
    assert (ts >= sub.total_lower - tol).all() and (ts <= sub.total_upper + tol).all()
    assert abs(got.objective - ref.objective) <= _tolerance(sub, ref.objective)


def test_the_interior_point_converges_on_most_random_subproblems() -> None:
    """Rounding error can stall the last steps on tiny subproblems with tight bounds;
    the chain then runs the next backend. Most converge."""
    rng = np.random.default_rng(21)
    outcomes = []
    for _ in range(40):
        d = {
            "seed": int(rng.integers(2**32)),
            "k": int(rng.integers(2, 8)),
            "c": int(rng.integers(1, 31)),
            "n_groups": int(rng.integers(1, 5)),
            "n_queries": int(rng.integers(1, 5)),
            "root": bool(rng.integers(2)),
            "tight": bool(rng.integers(2)),
            "mean": float(rng.choice([3.0, 40.0, 400.0])),
            "noise": float(rng.choice([0.5, 3.0, 20.0])),
            "singular": bool(rng.integers(2)),
        }
        sub = _build(d)
        status = interior.solve_interior(sub, compress(sub), tol=1e-3).status
        outcomes.append(status.startswith("converged"))
    assert np.mean(outcomes) >= 0.8


@pytest.mark.slow
def test_interior_solves_dense_dhc_lite_families_like_clarabel() -> None:
    """Dense dhc-lite families (no detailed query: a singular Hessian, most cells
    positive at the optimum): what the method returns has Clarabel's objective; the
    last steps may stall in rounding error (then the chain moves on), but not often."""
    solved = 0
    for seed in (31, 32, 33):
        sub, _ = census_subproblem(
            np.random.default_rng(seed),
            schema_name="dhc-lite",
            queries=DHC_LITE_QUERIES,
            n_children=5,
            n_people=3000,
        )
        assert 4 * sub.parent.sum() > sub.k * sub.c  # dense
        got = solve_l2(sub, method="interior")
        ref = solve_l2(sub, method="clarabel")
        assert ref.method == "clarabel"
        if got.method != "interior":
            continue
        solved += 1
        assert abs(got.objective - ref.objective) <= 1e-6 * ref.objective
        assert got.max_violation <= 1e-8 * sub.scale()
    assert solved >= 2


@pytest.mark.slow
def test_the_newton_systems_are_sized_by_answers_and_constraints_not_cells(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(32)
    sub, _ = census_subproblem(
        rng, schema_name="dhc-lite", queries=DHC_LITE_QUERIES, n_children=8, n_people=2000
    )
    sizes: list[int] = []
    orig = interior._factor

    def spy(s_mat):
        sizes.append(s_mat.shape[0])
        return orig(s_mat)

    monkeypatch.setattr(interior, "_factor", spy)
    orig_blocks = interior._Blocks.__init__

    def spy_blocks(self, gk, *args, **kwargs):
        sizes.append(gk.shape[0])  # the rows of S, factored child by child
        orig_blocks(self, gk, *args, **kwargs)
        # no dense block larger than one child's rows, the coupling one per column sum
        assert max(f[0].shape[0] for _, f, _ in self.blocks) < sub.k * sub.c / 2
        assert self.cpl.size <= sub.c  # a column open to one child only is its own row

    monkeypatch.setattr(interior._Blocks, "__init__", spy_blocks)
    got = solve_l2(sub, method="interior")
    assert got.method == "interior"
    answers = sub.k * sum(sub.query_sizes)
    # at most one row per answer, per column sum and per group or total bound row
    assert sizes and max(sizes) <= answers + sub.c + sub.k * (sub.G + 1)
    assert max(sizes) < sub.k * sub.c


def test_the_interior_point_catches_clarabel_and_falls_through_when_it_fails(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(33)
    sub, _ = census_subproblem(
        rng, schema_name="dhc-lite", queries=DHC_LITE_QUERIES, n_children=3, n_people=1500
    )
    order = backend_order(sub, compress(sub), "auto")
    # dense with a singular Hessian, few variables: the program (PIQP, Clarabel), the
    # interior point, the active set, the ADMM
    assert 4 * sub.parent.sum() > sub.k * sub.c
    assert sub.k * sub.c <= chain.INTERIOR_MIN_VARIABLES
    assert order == ("piqp", "clarabel", "interior", "activeset", "admm")
    ok = solve_l2(sub, method="clarabel")
    assert ok.method == "clarabel"

    def fail(status):
        return lambda *args, **kwargs: Attempt(None, status, 7)

    monkeypatch.setattr(clarabel_qp, "solve_clarabel", fail("PrimalInfeasible"))
    monkeypatch.setattr(piqp_qp, "solve_piqp", fail("PIQP_PRIMAL_INFEASIBLE"))
    with caplog.at_level(logging.WARNING, logger="censusdp"):
        res = solve_l2(sub)
    assert res.attempts[:2] == (
        ("piqp", "PIQP_PRIMAL_INFEASIBLE"),
        ("clarabel", "PrimalInfeasible"),
    )
    assert res.attempts[2][0] == "interior" and res.attempts[2][1].startswith("converged")
    assert len(res.attempts) == 3
    assert "clarabel failed (PrimalInfeasible); trying interior" in caplog.text
    assert abs(res.objective - ok.objective) <= 1e-6 * ok.objective
    assert res.max_violation <= 1e-8 * sub.scale()
    monkeypatch.setattr(interior, "solve_interior", fail("max_iter"))
    monkeypatch.setattr(active_set, "solve_active_set", fail("max_iter"))
    with caplog.at_level(logging.WARNING, logger="censusdp"):
        res = solve_l2(sub)
    assert res.attempts[2:4] == (("interior", "max_iter"), ("activeset", "max_iter"))
    assert res.method == "admm" and res.status == "optimal"
    assert "interior failed (max_iter); trying activeset" in caplog.text


def test_large_singular_families_go_to_the_interior_point_first_and_fall_through(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(35)
    sub, _ = census_subproblem(
        rng, schema_name="dhc-lite", queries=DHC_LITE_QUERIES, n_children=3, n_people=1000
    )
    monkeypatch.setattr(chain, "INTERIOR_MIN_VARIABLES", sub.k * sub.c - 1)
    assert backend_order(sub, compress(sub), "auto") == (
        "interior",
        "piqp",
        "clarabel",
        "activeset",
        "admm",
    )
    res = solve_l2(sub)
    assert res.attempts[0][0] == "interior" and res.method == "interior"
    monkeypatch.setattr(interior, "solve_interior", lambda *a, **k: Attempt(None, "stalled", 3))
    with caplog.at_level(logging.WARNING, logger="censusdp"):
        fell = solve_l2(sub)
    assert fell.attempts[0] == ("interior", "stalled") and fell.method == "piqp"
    assert "interior failed (stalled); trying piqp" in caplog.text
    assert abs(res.objective - fell.objective) <= _tolerance(sub, fell.objective)


def _blocked_everywhere():
    """Every family takes the blocked factorisation (``_Blocks``), however small."""
    return _Patch(interior, "DENSE_MAX", 0)


class _Patch:
    def __init__(self, obj, name, value) -> None:
        self.obj, self.name, self.value = obj, name, value

    def __enter__(self) -> None:
        self.old = getattr(self.obj, self.name)
        setattr(self.obj, self.name, self.value)

    def __exit__(self, *exc) -> None:
        setattr(self.obj, self.name, self.old)


@SETTINGS
@given(shapes)
def test_the_blocked_factorisation_gives_the_sparse_one_s_answer(d: dict) -> None:
    """Families factored child by child with dense blocks: what converges has
    Clarabel's objective within the noise-scaled tolerance, every constraint exact."""
    sub = _build(d)
    if sub.parent is None or sub.k == 1:
        return
    with _blocked_everywhere():
        got = solve_l2(sub, method="interior")
    if got.method != "interior":
        return  # gave up: the chain moves on (the rate test below)
    ref = _reference(sub)
    assert abs(got.objective - ref.objective) <= _tolerance(sub, ref.objective)
    assert (got.x >= 0).all()
    assert got.max_violation <= 1e-8 * max(1.0, sub.scale())


def test_the_blocked_factorisation_is_used_and_converges_on_dense_dhc_families(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built = []
    orig = interior._Blocks.__init__

    def spy(self, gk, *args, **kwargs):
        built.append(kwargs.get("single", False))
        orig(self, gk, *args, **kwargs)

    monkeypatch.setattr(interior._Blocks, "__init__", spy)
    sparse_calls = []
    orig_factor = interior._factor
    monkeypatch.setattr(interior, "_factor", lambda s: sparse_calls.append(1) or orig_factor(s))
    monkeypatch.setattr(interior, "DENSE_MAX", 0)
    sub, _ = census_subproblem(
        np.random.default_rng(36),
        schema_name="dhc-lite",
        queries=DHC_LITE_QUERIES,
        n_children=3,
        n_people=1000,
    )
    got = solve_l2(sub, method="interior")
    assert got.method == "interior" and built and not sparse_calls
    # early steps in single precision, the last ones in double
    assert built[0] and not built[-1]
    ref = solve_l2(sub, method="clarabel")
    assert abs(got.objective - ref.objective) <= 1e-6 * ref.objective
    assert got.max_violation <= 1e-8 * sub.scale()
    monkeypatch.setattr(interior, "SINGLE_GAP", np.inf)
    double = solve_l2(sub, method="interior")
    assert abs(double.objective - got.objective) <= 1e-6 * ref.objective
    # a coupling block too large to hold densely: the sparse factorisation, same answer
    built.clear()
    monkeypatch.setattr(interior, "BLOCK_MAX_COUPLING", 10)
    sparse_path = solve_l2(sub, method="interior")
    assert sparse_path.method == "interior" and not built and sparse_calls
    assert abs(sparse_path.objective - got.objective) <= 1e-6 * ref.objective
    monkeypatch.setattr(interior, "BLOCK_MAX_COUPLING", 12_000)
    rng = np.random.default_rng(37)
    converged = 0
    for _ in range(12):
        d = {
            "seed": int(rng.integers(2**32)),
            "k": int(rng.integers(2, 8)),
            "c": int(rng.integers(2, 31)),
            "n_groups": int(rng.integers(1, 5)),
            "n_queries": int(rng.integers(1, 5)),
            "root": False,
            "tight": bool(rng.integers(2)),
            "mean": float(rng.choice([3.0, 40.0, 400.0])),
            "noise": float(rng.choice([0.5, 3.0, 20.0])),
            "singular": bool(rng.integers(2)),
        }
        s = _build(d)
        status = interior.solve_interior(s, compress(s), tol=1e-3).status
        converged += status.startswith("converged")
    assert converged >= 10


def test_an_iteration_cap_reports_failure_instead_of_a_wrong_answer() -> None:
    rng = np.random.default_rng(34)
    sub, _ = census_subproblem(
        rng, schema_name="dhc-lite", queries=DHC_LITE_QUERIES, n_children=4, n_people=3000
    )
    attempt = interior.solve_interior(sub, compress(sub), tol=1e-3, max_iter=2)
    x, status, steps = attempt.x, attempt.status, attempt.iterations
    assert x is None and status == "max_iter" and steps == 2


def _hessians(sub: Subproblem) -> tuple[np.ndarray, np.ndarray, int, int]:
    """The answer rows' Hessian ``B' (2W) B`` unfolded and folded (``_fold``), and the
    numbers of rows of each."""
    import scipy.sparse as sp

    from censusdp.release.topdown.solvers.common import fixed_zeros

    comp = compress(sub)
    fidx = np.flatnonzero(~fixed_zeros(sub).ravel())
    cell_qs = {q for q in range(len(comp.sizes)) if comp.sizes[q] == sub.c and comp.w[q] > 0}
    b, _, e = interior._rows(sub, comp, fidx, cell_qs)
    g, e_fold = interior._fold(sub, comp, fidx, cell_qs)
    unfolded = (b.T @ sp.diags(1.0 / e) @ b).toarray()
    folded = (g.T @ sp.csr_matrix(np.linalg.inv(e_fold.toarray())) @ g).toarray()
    return unfolded, folded, b.shape[0], g.shape[0]


@SETTINGS
@given(shapes)
def test_folding_nested_queries_keeps_the_hessian_exactly(d: dict) -> None:
    sub = _build(d)
    unfolded, folded, _, _ = _hessians(sub)
    np.testing.assert_allclose(folded, unfolded, rtol=0, atol=1e-9 * max(1.0, unfolded.max()))


def test_dhc_lite_families_fold_total_and_hispanic_cenrace_with_the_same_answer() -> None:
    rng = np.random.default_rng(36)
    sub, _ = census_subproblem(
        rng, schema_name="dhc-lite", queries=DHC_LITE_QUERIES, n_children=3, n_people=400
    )
    unfolded, folded, n_rows, n_folded = _hessians(sub)
    np.testing.assert_allclose(folded, unfolded, rtol=0, atol=1e-12 * unfolded.max())
    comp = compress(sub)
    # votingage*hispanic*cenrace keeps its rows; hispanic*cenrace and total leave
    hc, total = DHC_LITE_QUERIES.index("hispanic*cenrace"), DHC_LITE_QUERIES.index("total")
    folded_away = sum(
        np.unique(np.arange(sub.k)[:, None] * comp.sizes[q] + comp.rows[q][None, :]).size
        for q in (hc, total)
    )
    assert n_folded == n_rows - folded_away
    with _blocked_everywhere():
        got = solve_l2(sub, method="interior")
        with _Patch(interior, "FOLD", False):
            plain = solve_l2(sub, method="interior")
    assert got.method == plain.method == "interior"
    assert abs(got.objective - plain.objective) <= _tolerance(sub, plain.objective)
    assert got.max_violation <= 1e-8 * max(1.0, sub.scale())
