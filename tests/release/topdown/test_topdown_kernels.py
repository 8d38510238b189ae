"""Tests of the TopDown estimation kernels: least squares, rounding, failsafe.

The method is JASON (JSR-19-2F) sec. 5.7 (least squares under the parent's histogram, then an
integer rounding that keeps every sum, then a failsafe that relaxes conflicting
constraints) and Van Riper et al. (2020) sec. 2.2 (two-stage optimisation, footnote 17).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from _topdown_gen import (
    DHC_LITE_QUERIES,
    census_subproblem,
    l1_rounding_optimum,
    random_subproblem,
    small_subproblem,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from censusdp.errors import InfeasibleError
from censusdp.release.topdown import (
    Subproblem,
    SubproblemError,
    check_feasible,
    check_integer_solution,
    make_feasible,
    round_to_integers,
    solve_l2,
)
from censusdp.release.topdown.solvers import admm
from censusdp.release.topdown.solvers.base import compress
from profiles import examples

SETTINGS = settings(
    max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

shapes = st.fixed_dictionaries(
    {
        "seed": st.integers(0, 2**32 - 1),
        "k": st.integers(1, 6),
        "c": st.integers(1, 25),
        "n_groups": st.integers(1, 4),
        "n_queries": st.integers(1, 4),
        "root": st.booleans(),
        "tight": st.booleans(),
        "mean": st.sampled_from([0.5, 3.0, 40.0]),
    }
)


def _build(d: dict) -> tuple[Subproblem, np.ndarray]:
    rng = np.random.default_rng(d["seed"])
    return random_subproblem(
        rng,
        k=d["k"],
        c=d["c"],
        n_groups=d["n_groups"],
        n_queries=d["n_queries"],
        root=d["root"],
        tight=d["tight"],
        mean=d["mean"],
    )


# -- the whole kernel chain on random feasible subproblems -------------------------------


@SETTINGS
@given(shapes)
def test_l2_then_rounding_satisfies_every_constraint_exactly(d: dict) -> None:
    sub, truth = _build(d)
    sub2, report = make_feasible(sub)
    assert report.feasible and sub2 is sub  # feasible by construction: the truth fits
    res = solve_l2(sub)
    assert res.status == "optimal"
    assert res.max_violation <= 1e-8 * max(1.0, sub.scale())
    assert (res.x >= 0).all()
    if sub.parent is not None:
        np.testing.assert_allclose(res.x.sum(axis=0), sub.parent, rtol=0, atol=1e-9 * sub.scale())
    x_int = round_to_integers(sub, res.x)
    assert x_int.dtype == np.int64
    assert check_integer_solution(sub, x_int) == []
    if sub.parent is not None:
        np.testing.assert_array_equal(x_int.sum(axis=0), sub.parent)
    gs = sub.group_sums(x_int)
    assert (gs >= sub.group_lower).all() and (gs <= sub.group_upper).all()
    ts = x_int.sum(axis=1)
    assert (ts >= sub.total_lower).all() and (ts <= sub.total_upper).all()
    # the polytope is integral, so a feasible x has an integer neighbour within 1 per cell
    assert np.abs(x_int - res.x).max() < 1.0


@SETTINGS
@given(shapes)
def test_admm_matches_clarabel(d: dict) -> None:
    sub, _ = _build(d)
    a = solve_l2(sub, method="admm")
    c = solve_l2(sub, method="clarabel")
    only_child = sub.k == 1 and sub.parent is not None  # takes the parent's counts
    assert (a.method, c.method) == (("parent", "parent") if only_child else ("admm", "clarabel"))
    assert a.status == c.status == "optimal"
    # strictly convex in the answers, so the objectives agree to solver tolerance
    assert abs(a.objective - c.objective) <= 1e-6 * max(1.0, c.objective)


@SETTINGS
@given(shapes)
def test_min_cost_flow_and_lp_rounding_agree(d: dict) -> None:
    sub, _ = _build(d)
    x = solve_l2(sub).x
    a = round_to_integers(sub, x, method="ortools")
    b = round_to_integers(sub, x, method="linprog")
    assert check_integer_solution(sub, b) == []
    # both are L1-optimal (ties may differ; costs are quantised to 1e-6)
    assert abs(np.abs(a - x).sum() - np.abs(b - x).sum()) <= 1e-5 * x.size


def test_rounding_is_l1_optimal_against_a_direct_lp() -> None:
    """Independent check: the L1 rounding as a MILP with |X - x| epigraph variables."""
    rng = np.random.default_rng(7)
    sub, _ = random_subproblem(rng, k=3, c=6, n_groups=2, bound_slack=1)
    x = solve_l2(sub).x
    x_int = round_to_integers(sub, x)
    assert np.abs(x_int - x).sum() == pytest.approx(l1_rounding_optimum(sub, x), abs=1e-5)


# -- exactness ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["admm", "clarabel"])
@pytest.mark.parametrize("root", [False, True])
def test_huge_weights_with_exact_answers_reproduce_the_truth(method: str, root: bool) -> None:
    """Noise-free measurements with weight 1e9 (rho -> infinity) give back the truth."""
    rng = np.random.default_rng(3)
    sub, truth = random_subproblem(
        rng, k=5, c=20, n_groups=3, n_queries=4, noise=0.0, root=root, weight_scale=1e9
    )
    res = solve_l2(sub, method=method)
    assert res.status == "optimal"
    np.testing.assert_allclose(res.x, truth, atol=1e-3)
    np.testing.assert_array_equal(round_to_integers(sub, res.x), truth)


def test_census_block_group_exact_with_huge_rho() -> None:
    rng = np.random.default_rng(11)
    sub, truth = census_subproblem(rng, n_children=8, n_people=300, rho=1e9)
    res = solve_l2(sub)
    np.testing.assert_array_equal(round_to_integers(sub, res.x), truth)


def test_root_meets_an_exact_total_with_large_counts() -> None:
    rng = np.random.default_rng(5)
    sub, truth = random_subproblem(rng, k=1, c=30, n_groups=2, root=True, mean=3e7, noise=5.0)
    total = float(truth.sum())
    sub = sub.with_bounds(total_lower=np.array([total]), total_upper=np.array([total]))
    for method in ("admm", "clarabel"):
        res = solve_l2(sub, method=method)
        assert res.status == "optimal", res.solver_status
        x_int = round_to_integers(sub, res.x)
        assert int(x_int.sum()) == int(total)
        assert (x_int >= 0).all()
        assert np.abs(x_int - res.x).max() < 1.0


def test_snapping_tiny_negatives_does_not_floor_to_minus_one() -> None:
    rng = np.random.default_rng(2)
    sub, _ = random_subproblem(rng, k=2, c=5, n_groups=1, n_queries=2)
    x = solve_l2(sub).x
    x_int = round_to_integers(sub, x)
    x_noisy = x_int.astype(float)
    x_noisy[x_noisy == 0] = -1e-12
    x_noisy[x_noisy > 0] += 1e-12
    np.testing.assert_array_equal(round_to_integers(sub, x_noisy), x_int)


# -- failsafe ----------------------------------------------------------------------------


_small = small_subproblem


def test_failsafe_relaxes_a_facility_with_no_people_left_in_the_parent() -> None:
    # child 0 has a facility of group 1 (needs >= 1 person) but the parent has 0 there
    sub = _small(
        parent=[3, 2],
        groups=[0, 0],
        gl=[[0, 1], [0, 0]],
        gu=[[np.inf, np.inf], [np.inf, 0]],
        tl=[0, 0],
        tu=[np.inf, np.inf],
    )
    assert not check_feasible(sub)
    with pytest.raises(InfeasibleError, match="make_feasible"):
        round_to_integers(sub, np.array([[2.5, 1.0], [0.5, 1.0]]))
    relaxed, report = make_feasible(sub)
    assert not report.feasible and report.used and report.relaxed
    assert [r.to_dict() for r in report.relaxations] == [
        {"child": 0, "kind": "group", "group": 1, "side": "lower", "old": 1.0, "new": 0.0}
    ]
    assert report.total_relaxation == 1.0
    json.dumps(report.to_dict())
    assert check_feasible(relaxed)
    x_int = round_to_integers(relaxed, solve_l2(relaxed).x)
    assert check_integer_solution(relaxed, x_int) == []


def test_failsafe_prefers_group_bounds_over_invariant_totals() -> None:
    # exact totals 4 + 1 = 5 = parent; child 1 needs >= 2 in group 1, parent has 1 there
    sub = _small(
        parent=[4, 1],
        groups=[0, 1],
        gl=[[0, 0], [0, 2]],
        gu=[[np.inf, np.inf], [np.inf, np.inf]],
        tl=[4, 1],
        tu=[4, 1],
    )
    relaxed, report = make_feasible(sub)
    kinds = {(r.kind, r.side) for r in report.relaxations}
    assert ("total", "lower") not in kinds and ("total", "upper") not in kinds
    # child 1's total is 1 and it needs 2 in group 1: that lower bound must drop to <= 1
    assert relaxed.group_lower[1, 1] <= 1
    assert check_feasible(relaxed)


def test_failsafe_never_moves_invariant_totals_that_do_not_add_up() -> None:
    # exact child totals sum to 6, the parent holds 5: production stops here, and so do we
    sub = _small(
        parent=[3, 2],
        groups=[0, 0],
        gl=[[0], [0]],
        gu=[[np.inf], [np.inf]],
        tl=[4, 2],
        tu=[4, 2],
    )
    assert not check_feasible(sub)
    with pytest.raises(
        InfeasibleError,
        match=r"'test' is infeasible without moving an invariant.*invariant totals of child 0, "
        r"child 1 sum to 6 persons, which differ from the 5 persons the parent holds",
    ):
        make_feasible(sub)


def _one_group_child(invariant: float) -> Subproblem:
    """Parent [4 in group 0, 2 in group 1]; child 0 free, child 1 (an exact total) may
    hold only group 1."""
    return Subproblem(
        parent=np.array([4, 2]),
        query_rows=(np.arange(2),),
        query_sizes=(2,),
        noisy=(np.ones((2, 2)),),
        weights=np.array([1.0]),
        groups=np.array([0, 1]),
        group_lower=np.zeros((2, 2)),
        group_upper=np.array([[np.inf, np.inf], [0.0, np.inf]]),
        total_lower=np.array([0.0, invariant]),
        total_upper=np.array([np.inf, invariant]),
        label="County 50001",
        child_labels=("Tract 50001000100", "Tract 50001000200"),
    )


def test_failsafe_names_the_children_whose_invariants_exceed_the_parent() -> None:
    # child 1 has an invariant 7, the parent holds 6 persons; the free child 0 cannot help
    sub = _one_group_child(7.0)
    with pytest.raises(
        InfeasibleError,
        match=r"'County 50001'.*child 1 \(Tract 50001000200\) sum to 7 persons, which exceed "
        r"the 6 persons",
    ):
        make_feasible(sub)


def test_failsafe_relaxes_a_group_bound_rather_than_an_invariant() -> None:
    # child 1 (invariant 3) may hold only group 1, where the parent has 2 persons: its
    # group-0 upper bound (a constraint) moves to 1; its total stays 3
    sub = _one_group_child(3.0)
    relaxed, report = make_feasible(sub)
    assert [r.to_dict() for r in report.relaxations] == [
        {"child": 1, "kind": "group", "group": 0, "side": "upper", "old": 0.0, "new": 1.0}
    ]
    x_int = round_to_integers(relaxed, solve_l2(relaxed).x)
    assert x_int[1].sum() == 3


def _min_relaxation_lp(sub: Subproblem) -> float | None:
    """Independent LP: minimise group-bound slack + 1000 * slack of non-invariant totals,
    with invariant (exact) totals held exactly; ``None`` when that is infeasible."""
    k, c, n_groups = sub.k, sub.c, sub.G
    n = k * c
    m_g, m_t = k * n_groups, k
    exact = np.isfinite(sub.total_upper) & (sub.total_lower == sub.total_upper)
    # variables: X (n), gl_slack, gu_slack (m_g each), tl_slack, tu_slack (m_t each)
    nv = n + 2 * m_g + 2 * m_t
    cost = np.concatenate([np.zeros(n), np.ones(2 * m_g), 1000.0 * np.ones(2 * m_t)])
    member = sp.csr_matrix((np.ones(c), (sub.groups, np.arange(c))), shape=(n_groups, c))
    gmat = sp.kron(sp.identity(k), member).tocsr()
    tmat = sp.kron(sp.identity(k), np.ones((1, c))).tocsr()

    def cols(mat, start, size, sign):
        out = sp.lil_matrix((mat.shape[0], nv))
        out[:, :n] = mat
        out[np.arange(size), start + np.arange(size)] = sign
        return out.tocsr()

    a_ub, b_ub = [], []
    # group sum - gu_slack <= U ; -(group sum) - gl_slack <= -L
    gu = sub.group_upper.ravel()
    fin = np.isfinite(gu)
    a_ub.append(cols(gmat, n + m_g, m_g, -1.0)[fin])
    b_ub.append(gu[fin])
    a_ub.append(cols(-gmat, n, m_g, -1.0))
    b_ub.append(-sub.group_lower.ravel())
    tu = sub.total_upper
    fin = np.isfinite(tu) & ~exact
    a_ub.append(cols(tmat, n + 2 * m_g + m_t, m_t, -1.0)[fin])
    b_ub.append(tu[fin])
    a_ub.append(cols(-tmat, n + 2 * m_g, m_t, -1.0)[~exact])
    b_ub.append(-sub.total_lower[~exact])
    colsum = sp.hstack([sp.kron(np.ones((1, k)), sp.identity(c)), sp.csr_matrix((c, nv - n))])
    a_eq = sp.vstack([colsum, sp.hstack([tmat, sp.csr_matrix((k, nv - n))]).tocsr()[exact]])
    b_eq = np.concatenate([sub.parent.astype(float), sub.total_lower[exact]])
    res = linprog(
        cost,
        A_ub=sp.vstack(a_ub),
        b_ub=np.concatenate(b_ub),
        A_eq=a_eq,
        b_eq=b_eq,
        bounds=[(0, None)] * nv,
        method="highs",
    )
    if res.status == 2:
        return None
    assert res.status == 0
    return float(res.fun)


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(1, 12), st.integers(1, 3))
def test_failsafe_relaxation_is_minimal_and_feasible(seed: int, k: int, c: int, g: int) -> None:
    rng = np.random.default_rng(seed)
    sub, _ = random_subproblem(rng, k=k, c=c, n_groups=g, n_queries=2, mean=2.0)
    # scramble the bounds so that many draws are infeasible
    gl = rng.integers(0, 4, size=(k, g)).astype(float)
    gu = gl + rng.integers(0, 3, size=(k, g))
    gu[rng.random((k, g)) < 0.3] = 0.0
    tl = rng.integers(0, 10, size=k).astype(float)
    tu = np.where(rng.random(k) < 0.5, tl, np.inf)
    gu = np.maximum(gu, 0.0)
    sub = sub.with_bounds(group_lower=gl, group_upper=gu, total_lower=tl, total_upper=tu)
    best = _min_relaxation_lp(sub)
    if best is None:  # only moving an invariant total would help: refused, never relaxed
        with pytest.raises(InfeasibleError, match="without moving an invariant"):
            make_feasible(sub)
        return
    relaxed, report = make_feasible(sub)
    assert check_feasible(relaxed)
    assert report.feasible == (not report.used)
    np.testing.assert_array_equal(relaxed.total_lower[tl == tu], tl[tl == tu])
    np.testing.assert_array_equal(relaxed.total_upper[tl == tu], tl[tl == tu])
    cost = sum((1000.0 if r.kind == "total" else 1.0) * r.amount for r in report.relaxations)
    assert cost == pytest.approx(best, abs=1e-6)
    x_int = round_to_integers(relaxed, solve_l2(relaxed).x)
    assert check_integer_solution(relaxed, x_int) == []
    np.testing.assert_array_equal(x_int.sum(axis=0), sub.parent)


def test_solve_l2_on_an_infeasible_subproblem_raises_infeasible_error() -> None:
    sub = _small(
        parent=[1, 1],
        groups=[0, 0],
        gl=[[0], [0]],
        gu=[[np.inf], [np.inf]],
        tl=[3, 0],
        tu=[3, 0],
    )
    with pytest.raises(InfeasibleError, match="make_feasible"):
        solve_l2(sub, method="clarabel")


# -- realistic census subproblems --------------------------------------------------------


def test_pl94_block_group_admm_matches_clarabel() -> None:
    """A block group of 12 blocks on the 2,016-cell pl94 schema, 11 production queries."""
    rng = np.random.default_rng(1)
    sub, _ = census_subproblem(rng, n_children=12, n_people=600)
    a = solve_l2(sub, method="admm")
    c = solve_l2(sub, method="clarabel")
    assert abs(a.objective - c.objective) <= 1e-6 * c.objective
    x_int = round_to_integers(sub, a.x)
    assert check_integer_solution(sub, x_int) == []


def test_dhc_lite_sparse_factorisation_matches_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sparse KKT path (used beyond DENSE_MAX cells, e.g. dhc-lite) equals the dense one."""
    rng = np.random.default_rng(4)
    sub, _ = census_subproblem(
        rng, schema_name="dhc-lite", queries=DHC_LITE_QUERIES, n_children=6, n_people=150
    )
    dense = solve_l2(sub, method="admm")
    monkeypatch.setattr(admm, "DENSE_MAX", 8)
    sparse = solve_l2(sub, method="admm")
    assert abs(dense.objective - sparse.objective) <= 1e-6 * dense.objective
    comp = compress(sub)
    rows = [*comp.rows]
    vals = [1.0] * len(rows)
    r = rng.normal(size=(sub.c, 3))
    f_sparse = admm._Factor(sub.c, 0.5, rows, comp.sizes, vals)
    monkeypatch.setattr(admm, "DENSE_MAX", 10**6)
    f_dense = admm._Factor(sub.c, 0.5, rows, comp.sizes, vals)
    np.testing.assert_allclose(f_sparse.solve(r), f_dense.solve(r), rtol=1e-9, atol=1e-9)


# -- projections used by ADMM ------------------------------------------------------------


@SETTINGS
@given(st.integers(0, 2**32 - 1))
def test_admm_projections_satisfy_the_variational_inequality(seed: int) -> None:
    """P is the Euclidean projection onto C iff <v - P(v), q - P(v)> <= 0 for all q in C."""
    rng = np.random.default_rng(seed)
    sub, _ = random_subproblem(rng, k=4, c=10, n_groups=3)
    free = ~admm.fixed_zeros(sub)
    lam = admm._LaminarProjector(sub, free)
    p = sub.parent.astype(float)

    def simplex(v):
        return admm._project_simplex_columns(v, p, free)

    for proj in (lam, simplex):
        v = rng.normal(0, 10, size=(sub.k, sub.c))
        pv = proj(v)
        assert np.allclose(proj(pv), pv, atol=1e-9)  # idempotent
        for _ in range(5):
            q = proj(rng.normal(0, 10, size=(sub.k, sub.c)))
            assert np.sum((v - pv) * (q - pv)) <= 1e-7
    pv = lam(rng.normal(0, 10, size=(sub.k, sub.c)))
    gs = sub.group_sums(pv)
    assert (gs >= sub.group_lower - 1e-9).all() and (gs <= sub.group_upper + 1e-9).all()
    sv = simplex(rng.normal(0, 10, size=(sub.k, sub.c)))
    assert (sv >= 0).all() and np.allclose(sv.sum(axis=0), p)


# -- input validation --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"parent": np.array([1, 0])}, "parent counts on kept cells must be > 0"),
        ({"parent": np.array([1, 2, 3])}, "parent must have shape"),
        ({"groups": np.array([0, 5])}, "groups must lie in"),
        ({"weights": np.array([-1.0])}, "weights must be finite and >= 0"),
        ({"query_rows": (np.array([0, 9]),)}, r"query_rows\[0\] must lie in"),
        ({"noisy": (np.ones((3, 2)),)}, r"noisy\[0\] must have shape"),
        ({"group_lower": -np.ones((2, 1))}, "group_lower must be finite and >= 0"),
        ({"total_upper": np.ones(3)}, "total_upper must have shape"),
        ({"noise_scale": 0.0}, "noise_scale must be finite and > 0"),
        ({"noise_scale": float("inf")}, "noise_scale must be finite and > 0"),
        ({"child_labels": ("a",)}, "child_labels must name 2 children"),
    ],
)
def test_subproblem_rejects_inconsistent_arrays(change: dict, match: str) -> None:
    base = {
        "parent": np.array([1, 2]),
        "query_rows": (np.array([0, 1]),),
        "query_sizes": (2,),
        "noisy": (np.ones((2, 2)),),
        "weights": np.array([1.0]),
        "groups": np.array([0, 0]),
        "group_lower": np.zeros((2, 1)),
        "group_upper": np.full((2, 1), np.inf),
        "total_lower": np.zeros(2),
        "total_upper": np.full(2, np.inf),
    }
    base.update(change)
    with pytest.raises(SubproblemError, match=match):
        Subproblem(**base)
