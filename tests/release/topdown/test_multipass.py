"""Tests of multipass estimation: production's query orderings, least squares and rounding in passes.

The method and orderings are those of the 2020 production DAS
(uscensusbureau/DAS_2020_Redistricting_Production_Code: programs/strategies/strategies.py,
Strategy1b_ST_CTY_TR_BG_isoTot_Ordering_dsepJune3; programs/optimization/
l2_dataIndep_npass_optimizer.py and multipass_rounder.py; configs/production/pl94/
person_default.ini, whose opt_tol_slack = 0.1 the interleaved optimizer does not read: it
passes 0.01). Independent checks: the first least-squares pass
against a closed-form projection, each rounding pass against a MILP (SciPy HiGHS) that
states production's objective directly.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from _topdown_gen import PL94_QUERIES, census_subproblem, random_subproblem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.optimize import Bounds as LPBounds
from scipy.optimize import LinearConstraint, milp

from censusdp.data.queries import make_query
from censusdp.data.schema import get_schema
from censusdp.errors import ConfigError
from censusdp.release.topdown import (
    Subproblem,
    check_integer_solution,
    round_to_integers,
    solve_l2,
)
from censusdp.release.topdown.multipass import (
    RoundingPasses,
    bind_l2,
    bind_rounding,
    round_in_passes,
    solve_l2_passes,
)
from censusdp.release.topdown.passes import (
    OPT_TOL_SLACK,
    PRODUCTION_PASSES,
    PassPlan,
    plans_for,
)

PL94 = get_schema("pl94")
LEVELS = ["US", "State", "County", "Tract", "BlockGroup", "Block"]
SETTINGS = settings(
    max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


def _kept(sub: Subproblem) -> np.ndarray:
    """The schema cells of a census subproblem (the detailed query's rows are the cells)."""
    return sub.query_rows[PL94_QUERIES.index("detailed")]


# -- the plans ----------------------------------------------------------------------------


def test_production_orderings_are_strategy1b_isolated_total() -> None:
    """strategies.py, Strategy1b_ST_CTY_TR_BG_isoTot_Ordering_dsepJune3.make."""
    plans = plans_for("pl94", LEVELS)
    us, state, county, tract, bg, block = plans
    assert state is county is tract is bg
    assert state.l2[0] == ("total",) and "total" not in state.l2[1]
    assert state.rounder == (
        ("total",),
        (
            "hhgq",
            "hhgq*hispanic",
            "hhgq*hispanic*cenrace",
            "hhgq*votingage*hispanic*cenrace",
            "detailed",
        ),
    )
    # the US measures no total; one pass each, rounding weighs all six queries at once
    assert len(us.l2) == 1 and "total" not in us.l2[0]
    assert us.rounder == (("total", *state.rounder[1]),)
    assert len(block.l2) == 1 and block.l2[0][0] == "total" and len(block.rounder) == 1
    # the eleven measured pl94 queries are all targeted, once ("hhgq" is listed twice)
    assert sorted(state.l2[0] + state.l2[1]) == sorted(PL94_QUERIES)
    # production's interleaved optimizer passes 0.01 and ignores person_default.ini's 0.1
    assert state.opt_tol_slack == OPT_TOL_SLACK == 0.01


def test_plans_for_other_schemas_modes_and_level_names() -> None:
    # dhc-lite: one least-squares pass, the published marginals rounded before the cells
    dhc = plans_for("dhc-lite", LEVELS)
    assert all(p is PRODUCTION_PASSES["dhc-lite"]["*"] for p in dhc)
    assert dhc[0].l2 == (("total",),) and dhc[0].rounder[-1] == ("detailed",)
    assert plans_for("units", LEVELS) == [None] * 6
    assert plans_for("pl94", LEVELS, "single") == [None] * 6
    # production's spelling of the block-group level is accepted
    plan = plans_for("pl94", ["US", "Block_Group"])[1]
    assert plan is PRODUCTION_PASSES["pl94"]["blockgroup"]
    with pytest.raises(ConfigError, match="passes must be one of"):
        plans_for("pl94", LEVELS, "two")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"l2": (), "hold": (), "rounder": (("total",),)}, "l2 must be a non-empty"),
        ({"l2": "total", "hold": "total", "rounder": (("total",),)}, "l2 must be a non-empty"),
        ({"l2": (("total",), ()), "hold": (("total",), ()), "rounder": (("x",),)}, "pass 1"),
        ({"l2": (("total",),), "hold": (), "rounder": (("total",),)}, "hold must be"),
        ({"l2": (("total",),), "hold": (("total",), ("hhgq",)), "rounder": (("a",),)}, "2 passes"),
        ({"l2": ((" ",),), "hold": (("total",),), "rounder": (("total",),)}, "invalid query"),
        ({"rounder": (("total",), ("hhgq", "total"))}, "'total' is in passes 0 and 1"),
        ({"opt_tol_slack": -0.1}, "opt_tol_slack is -0.1"),
        ({"opt_tol_slack": float("nan")}, "must be finite"),
        ({"opt_tol_slack": "0.1"}, "must be a number"),
    ],
)
def test_pass_plan_rejects_malformed_plans(kwargs: dict, match: str) -> None:
    base = {"l2": (("total",),), "hold": (("total",),), "rounder": (("total",),)}
    base.update(kwargs)
    with pytest.raises(ConfigError, match=match):
        PassPlan(**base)


def test_bind_l2_maps_names_to_measured_queries() -> None:
    plan = PRODUCTION_PASSES["pl94"]["county"]
    bound = bind_l2(plan, PL94, list(PL94_QUERIES), "hhgq")
    assert bound.queries == ((0,), tuple(range(1, 11)))
    assert bound.hold_total == (True, False) and bound.hold_groups[0] is False
    # a level without the total query has one pass left: the ordinary solve
    assert bind_l2(plan, PL94, [q for q in PL94_QUERIES if q != "total"], "hhgq") is None
    # spelling and order of the variables do not matter; unlisted queries join the last pass
    odd = PassPlan(
        l2=(("TOTAL",), ("cenrace * hispanic",)),
        hold=(("total",), ()),
        rounder=(("total",),),
    )
    bound = bind_l2(odd, PL94, ["hispanic*cenrace", "total", "votingage"], "hhgq")
    assert bound.queries == ((1,), (0, 2))


def test_bind_l2_holds_a_marginal_query_row_by_row() -> None:
    """A marginal (here ``cenrace``) is held row by row; ``total`` and the group attribute
    as bounds; ``detailed`` and queries the level did not measure are not held."""
    plan = PassPlan(
        l2=(("cenrace", "total", "hhgq", "votingage"), ("detailed",)),
        hold=(("cenrace", "total", "hhgq", "detailed", "hispanic"), ()),
        rounder=(("total",),),
    )
    bound = bind_l2(plan, PL94, ["cenrace", "detailed", "total", "hhgq"], "hhgq")
    assert bound.queries == ((0, 2, 3), (1,))
    assert bound.hold_queries == ((0,), ())
    assert bound.hold_total == (True, False) and bound.hold_groups == (True, False)


# -- least squares in passes --------------------------------------------------------------


def _projected_totals(y: np.ndarray, total: float) -> np.ndarray:
    """argmin sum (t - y)^2 subject to sum t = total, t >= 0 (Euclidean simplex projection)."""
    u = np.sort(y)[::-1]
    css = np.cumsum(u) - total
    rho = np.nonzero(u - css / np.arange(1, y.size + 1) > 0)[0][-1]
    return np.maximum(y - css[rho] / (rho + 1.0), 0.0)


@pytest.mark.parametrize("method", ["admm", "clarabel"])
def test_first_pass_fits_the_totals_alone_and_later_passes_hold_them(method: str) -> None:
    rng = np.random.default_rng(8)
    sub, _ = census_subproblem(rng, n_children=9, n_people=700, rho=0.05)
    # free group bounds, so the first pass is the projection of the noisy totals
    sub = sub.with_bounds(
        group_lower=np.zeros_like(sub.group_lower),
        group_upper=np.full_like(sub.group_upper, np.inf),
    )
    bound = bind_l2(PRODUCTION_PASSES["pl94"]["tract"], PL94, list(PL94_QUERIES), "hhgq")
    res = solve_l2_passes(sub, bound, method=method)
    assert res.status == "optimal" and res.method == f"{method}+{method}"
    expect = _projected_totals(sub.noisy[0][:, 0], float(sub.parent.sum()))
    got = res.x.sum(axis=1)
    assert np.abs(got - expect).max() <= OPT_TOL_SLACK + 1e-6
    # without the hold, the totals of the one-pass fit are far from the total query's
    one = solve_l2(sub, method=method).x.sum(axis=1)
    assert np.abs(one - expect).max() > 1.0
    assert res.max_violation <= 1e-8 * sub.scale()
    np.testing.assert_allclose(res.x.sum(axis=0), sub.parent, atol=1e-7)
    # the last pass is optimal for its queries among points holding the first pass's totals
    held = sub.with_bounds(
        total_lower=np.maximum(expect - OPT_TOL_SLACK, 0), total_upper=expect + OPT_TOL_SLACK
    )
    rest = Subproblem(
        parent=held.parent,
        query_rows=held.query_rows[1:],
        query_sizes=held.query_sizes[1:],
        noisy=held.noisy[1:],
        weights=held.weights[1:],
        groups=held.groups,
        group_lower=held.group_lower,
        group_upper=held.group_upper,
        total_lower=held.total_lower,
        total_upper=held.total_upper,
    )
    best = solve_l2(rest, method="clarabel").objective
    assert rest.objective(res.x) == pytest.approx(best, rel=1e-6)


def test_passes_keep_an_exact_invariant_total() -> None:
    rng = np.random.default_rng(3)
    sub, truth = census_subproblem(rng, n_children=5, n_people=400, total_invariant=True)
    bound = bind_l2(PRODUCTION_PASSES["pl94"]["state"], PL94, list(PL94_QUERIES), "hhgq")
    res = solve_l2_passes(sub, bound)
    np.testing.assert_allclose(res.x.sum(axis=1), truth.sum(axis=1), atol=1e-6)


# -- rounding in passes -------------------------------------------------------------------


def _milp_pass(
    sub: Subproblem,
    x: np.ndarray,
    queries: list[np.ndarray],
    cellwise: bool,
    held: list[tuple[np.ndarray, np.ndarray]],
) -> tuple[float, np.ndarray]:
    """One rounding pass as a MILP, written from production's formulation directly.

    Variables: binary b per fractional cell (X = floor(x) + b) and one epigraph variable
    per query row and child: minimise sum e + cellwise (1 - 2 frac) b subject to
    e >= +-(Q X - (Q floor(x) + round(Q frac))), column sums, group and total bounds, and
    the held answers Q X = a of earlier passes.
    """
    k, c = sub.k, sub.c
    f = np.floor(x)
    phi = x - f
    n = k * c
    mats = [sp.csr_matrix((np.ones(c), (r, np.arange(c))), shape=(r.max() + 1, c)) for r in queries]
    n_e = sum(k * m.shape[0] for m in mats)
    cost = np.concatenate([(1 - 2 * phi).ravel() if cellwise else np.zeros(n), np.ones(n_e)])
    rows, lo, hi = [], [], []

    def block(mat: sp.spmatrix) -> sp.csr_matrix:
        return sp.kron(sp.identity(k), mat, format="csr")

    e0 = 0
    for m in mats:
        big = block(m)
        r = big.shape[0]
        target = big @ f.ravel() + np.rint(big @ phi.ravel())
        sel = sp.csr_matrix((np.ones(r), (np.arange(r), e0 + np.arange(r))), shape=(r, n_e))
        rows += [sp.hstack([big, -sel]), sp.hstack([-big, -sel])]
        lo += [np.full(r, -np.inf)] * 2
        hi += [target, -target]
        e0 += r
    ones = sp.csr_matrix(np.ones((1, c)))
    member = sp.csr_matrix((np.ones(c), (sub.groups, np.arange(c))), shape=(sub.G, c))
    pad = sp.csr_matrix
    rows.append(sp.hstack([sp.kron(np.ones((1, k)), sp.identity(c)), pad((c, n_e))]))
    lo.append(sub.parent.astype(float))
    hi.append(sub.parent.astype(float))
    rows.append(sp.hstack([block(member), pad((k * sub.G, n_e))]))
    lo.append(sub.group_lower.ravel())
    hi.append(sub.group_upper.ravel())
    rows.append(sp.hstack([block(ones), pad((k, n_e))]))
    lo.append(sub.total_lower)
    hi.append(sub.total_upper)
    for rq, a in held:
        mat = sp.csr_matrix((np.ones(c), (rq, np.arange(c))), shape=(a.shape[1], c))
        rows.append(sp.hstack([block(mat), pad((k * mat.shape[0], n_e))]))
        lo.append(a.ravel().astype(float))
        hi.append(a.ravel().astype(float))
    lb = np.concatenate([f.ravel(), np.zeros(n_e)])
    ub = np.concatenate([np.where(phi.ravel() > 0, f.ravel() + 1, f.ravel()), np.full(n_e, np.inf)])
    res = milp(
        cost,
        constraints=LinearConstraint(
            sp.vstack(rows).tocsr(), np.concatenate(lo), np.concatenate(hi)
        ),
        integrality=np.concatenate([np.ones(n), np.zeros(n_e)]),
        bounds=LPBounds(lb, ub),
    )
    assert res.status == 0, res.message
    # the variables are X = floor(x) + b: drop the constant cost of floor(x)
    return float(res.fun - cost[:n] @ f.ravel()), np.rint(res.x[:n]).reshape(k, c).astype(np.int64)


def _objective(x: np.ndarray, out: np.ndarray, queries: list[np.ndarray], cellwise: bool) -> float:
    f = np.floor(x)
    phi = x - f
    total = float(((1 - 2 * phi) * (out - f)).sum()) if cellwise else 0.0
    for r in queries:
        m = sp.csr_matrix((np.ones(x.shape[1]), (r, np.arange(x.shape[1]))))
        target = f @ m.T + np.rint(phi @ m.T)
        total += float(np.abs(out @ m.T - target).sum())
    return total


def _answers(out: np.ndarray, rows: np.ndarray) -> np.ndarray:
    m = sp.csr_matrix((np.ones(out.shape[1]), (rows, np.arange(out.shape[1]))))
    return np.asarray(out @ m.T).astype(np.int64)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_each_rounding_pass_is_optimal_against_a_milp(seed: int) -> None:
    """Production's isolated-total rounding, pass by pass, vs. the MILP of its objective."""
    rng = np.random.default_rng(seed)
    sub, _ = census_subproblem(rng, n_children=4, n_people=60, rho=0.02)
    x = solve_l2(sub).x
    rp = bind_rounding(PRODUCTION_PASSES["pl94"]["tract"], PL94).on(_kept(sub))
    out = round_in_passes(sub, x, rp)
    assert check_integer_solution(sub, out) == []
    assert np.abs(out - x).max() < 1.0  # the box floor(x) + {0, 1}
    held: list[tuple[np.ndarray, np.ndarray]] = []
    for p, qs in enumerate(rp.passes):
        queries = [rp.rows[q] for q in qs]
        best, _ = _milp_pass(sub, x, queries, rp.cellwise[p], held)
        assert _objective(x, out, queries, rp.cellwise[p]) == pytest.approx(best, abs=1e-4)
        held += [(rp.rows[q], _answers(out, rp.rows[q])) for q in qs]
    # pass 0 rounds each child's total by itself: no total is further than 1 from x's
    assert np.abs(out.sum(axis=1) - x.sum(axis=1)).max() < 1.0


def test_rounding_passes_put_the_totals_first() -> None:
    """With the total isolated, released totals are the nearest integers where the sum allows."""
    rng = np.random.default_rng(21)
    sub, _ = census_subproblem(rng, n_children=12, n_people=600)
    x = solve_l2(sub).x
    rp = bind_rounding(PRODUCTION_PASSES["pl94"]["county"], PL94).on(_kept(sub))
    multi = round_in_passes(sub, x, rp)
    single = round_to_integers(sub, x)
    target = np.floor(x).sum(axis=1) + np.rint((x - np.floor(x)).sum(axis=1))
    err_multi = np.abs(multi.sum(axis=1) - target).sum()
    err_single = np.abs(single.sum(axis=1) - target).sum()
    assert err_multi <= abs(target.sum() - sub.parent.sum())  # only the sum's mismatch
    assert err_single > err_multi
    # cell by cell, the single pass stays the L1-closest
    assert np.abs(single - x).sum() <= np.abs(multi - x).sum() + 1e-9


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.sampled_from(["us", "state", "*"]), st.booleans())
def test_rounding_in_passes_keeps_every_constraint(seed: int, level: str, root: bool) -> None:
    rng = np.random.default_rng(seed)
    n_children = 1 if root else int(rng.integers(1, 8))
    sub, _ = census_subproblem(
        rng,
        n_children=n_children,
        n_people=int(rng.integers(5, 300)),
        root=root,
        total_invariant=bool(rng.integers(0, 2)),
    )
    x = solve_l2(sub).x
    rp = bind_rounding(PRODUCTION_PASSES["pl94"][level], PL94).on(_kept(sub))
    out = round_in_passes(sub, x, rp)
    assert out.dtype == np.int64
    assert check_integer_solution(sub, out) == []
    assert np.abs(out - x).max() < 1.0


def test_rounding_in_passes_leaves_the_box_when_x_is_infeasible() -> None:
    rng = np.random.default_rng(4)
    sub, truth = random_subproblem(rng, k=3, c=6, n_groups=2, n_queries=2)
    far = truth.astype(float) + rng.normal(0, 3, size=truth.shape)  # breaks the column sums
    rp = RoundingPasses(
        ("total", "detailed"), (np.zeros(6, int), np.arange(6)), ((0,), (1,)), (False, True)
    )
    out = round_in_passes(sub, far, rp)
    assert check_integer_solution(sub, out) == []


def test_rounding_queries_that_are_not_nested_are_refused() -> None:
    rng = np.random.default_rng(5)
    sub, _ = census_subproblem(rng, n_children=3, n_people=200)
    plan = PassPlan(l2=(("total",),), hold=(("total",),), rounder=(("votingage", "hispanic"),))
    rp = bind_rounding(plan, PL94).on(_kept(sub))
    with pytest.raises(
        ConfigError, match=r"rounding queries the group attribute and 'votingage' are not nested"
    ):
        round_in_passes(sub, solve_l2(sub).x, rp)


def test_rounding_template_cuts_rows_to_the_kept_cells() -> None:
    tmpl = bind_rounding(PRODUCTION_PASSES["pl94"]["state"], PL94)
    kept = np.array([0, 5, 2015])
    rp = tmpl.on(kept)
    assert rp.names[0] == "total" and rp.cellwise == (False, True)
    for name, rows in zip(rp.names, rp.rows, strict=True):
        np.testing.assert_array_equal(rows, make_query(PL94, name).row_of_cell[kept])
