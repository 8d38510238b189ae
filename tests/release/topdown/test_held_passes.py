"""Passes that hold a marginal query's answers within a tolerance (production's constrain-to).

Production's least squares in passes (``programs/optimization/l2_dataIndep_npass_optimizer.py``,
``addMultiPassDPQueryConstraints``; ``l2_dataIndep_npass_optimizer_decomp.py``,
``findOptimalTolAndAddConstrs``) holds, after an inner pass, every answer of the queries
its ``constrain_to`` ordering names for that pass within ``opt_tol + opt_tol_slack``
(``|A_h x - A_h x_prev| <= tol`` for every child and row) in the later inner passes of the
same outer pass; its rounder holds the rounded answers of earlier rounding passes
exactly (``multipass_rounder.py``). The DHC person ordering
(``DecompTestStrategyRegularOrderingDHCP_20220811_exp_21_1``) names ``relgq *
age_40_groups * hispanic * cenrace * sex`` to hold after its marginal pass, but that pass
is the only inner pass of its outer pass, so production holds it within no tolerance
(``test_outer_passes.py``); these tests hold the machinery in one outer pass, on the
pl94 schema (2,016 cells), holding ``hhgq * hispanic * cenrace``, which refines the
group attribute ``hhgq`` as the DHC's cross does.
"""

from __future__ import annotations

import ast
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from _topdown_gen import census_subproblem

from censusdp.data.queries import make_query
from censusdp.data.schema import get_schema
from censusdp.data.schema_dhc import QUERY_ORDERINGS
from censusdp.release.topdown import _held
from censusdp.release.topdown._pass_network import _refines
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
from censusdp.release.topdown.problem import Subproblem
from censusdp.release.topdown.solvers.least_squares import solve_l2

PL94 = get_schema("pl94")
HELD = "hhgq*hispanic*cenrace"
QUERIES = ("total", "hhgq", "votingage*hispanic", "cenrace", HELD, "detailed")
PLAN = PassPlan(  # marginals, then detailed holding HELD, in one outer pass
    l2=(QUERIES[:-1], ("detailed",)),
    hold=((HELD,), ("detailed",)),
    rounder=(("hhgq*hispanic", HELD), ("detailed",)),
)
LEVELS = ["US", "State", "County", "Prim", "TractSubsetGroup", "TractSubset", "BlockGroup"]


def _family(seed: int, *, free_groups: bool = False) -> Subproblem:
    rng = np.random.default_rng(seed)
    sub, _ = census_subproblem(rng, queries=QUERIES, n_children=6, n_people=300, rho=0.02)
    if free_groups:
        sub = sub.with_bounds(
            group_lower=np.zeros_like(sub.group_lower),
            group_upper=np.full_like(sub.group_upper, np.inf),
        )
    return sub


def _only(sub: Subproblem, queries: tuple[int, ...]) -> Subproblem:
    return replace(
        sub,
        query_rows=tuple(sub.query_rows[q] for q in queries),
        query_sizes=tuple(sub.query_sizes[q] for q in queries),
        noisy=tuple(sub.noisy[q] for q in queries),
        weights=sub.weights[list(queries)] / sub.weights[list(queries)].max(),
    )


def _held_answers(sub: Subproblem, x: np.ndarray) -> np.ndarray:
    return sub.answers(x)[QUERIES.index(HELD)]


# -- the plan -----------------------------------------------------------------------------


def test_the_dhc_person_plan_is_productions_ordering_at_every_level() -> None:
    plans = plans_for("dhcp-2020", LEVELS)
    ordering = QUERY_ORDERINGS["dhcp-2020"]
    assert all(p is PRODUCTION_PASSES["dhcp-2020"]["*"] for p in plans)
    plan = plans[0]
    assert len(plan.l2) == 2 and plan.l2[1] == ("detailed",) and len(plan.l2[0]) == 10
    assert plan.hold[0] == ("relgq*age_40_groups*hispanic*cenrace*sex",)
    assert len(plan.rounder) == 2 and len(plan.rounder[0]) == len(ordering["rounder"][0]) == 4
    dhcp = get_schema("dhcp-2020")
    measured = [
        "age_18_64_116*relgq_4_groups", "age_18_64_116*sex", "age_38_groups*sex",
        "hispanic*sex", "sex*relgq_4_groups", "gq_constr_groups*age_10_groups",
        "popsehsdtargetsrelship",
        "hispanic*sex*age_40_groups*relship_and_eight_level_gq*cenrace",
        "relgq*age_40_groups*hispanic*cenrace*sex", "detailed",
    ]  # fmt: skip
    bound = bind_l2(plan, dhcp, measured, "hhgq")
    # the unmeasured hhgq8lev cross is dropped; detailed alone in the second outer pass;
    # the cross named to hold is held by no least squares (test_outer_passes.py)
    assert bound.queries == (tuple(range(9)), (9,))
    assert bound.hold_queries == ((), ()) and bound.outer == (0, 1)
    assert bound.hold_total == (False, False) and bound.hold_groups == (False, False)


MIRROR = Path("/work/.mirror/uscensusbureau+DAS_2020_DHC_Production_Code/repo")


def _production_orderings(cls: str) -> dict[str, tuple[tuple[str, ...], ...]]:
    """The three orderings of ``cls`` in production's ``dhch_strategies.py`` (from the
    mirror), each as its passes of normalised query names."""
    if not MIRROR.exists():
        pytest.skip("the DHC production mirror is not on this machine")
    text = subprocess.run(
        ["git", "-C", str(MIRROR), "show",
         "HEAD:das_decennial/programs/strategies/dhch_strategies.py"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    body = text[text.index(f"class {cls}(") :]
    body = body[: body.index("\nclass ", 1)]
    out = {}
    for key in ("L2_QUERY_ORDERING", "L2_CONSTRAIN_TO_QUERY_ORDERING", "ROUNDER_QUERY_ORDERING"):
        start = body.index("{", body.index(f"CC.{key}:"))
        depth, end = 0, start
        while True:
            depth += {"{": 1, "}": -1}.get(body[end], 0)
            if depth == 0:
                break
            end += 1
        passes = ast.literal_eval(body[start : end + 1])
        out[key] = tuple(
            tuple("*".join(p.strip() for p in q.lower().split("*")) for q in passes[k][0])
            for k in sorted(passes)
        )
    return out


def test_the_dhc_household_plan_is_productions_ordering_without_the_unit_pass() -> None:
    """``PRODUCTION_PASSES["dhch-2020"]`` at every geolevel is production's household
    ordering (``unit_US.ini``: ``test_strategy_regular_ordering_dhch_20220922_exp_iteration_23_1``,
    read from production's file) less its first pass, ``tenvacgq`` alone, which is the
    unit histogram's own TopDown (release.dhc_units), with production's 0.01 slack."""
    prod = _production_orderings(
        "DecompTestStrategyRegularOrderingDHCH_20220922_exp_iteration_23_1"
    )
    for key in prod:
        assert prod[key][0] == ("tenvacgq",)
    plans = plans_for("dhch-2020", LEVELS)
    assert all(p is PRODUCTION_PASSES["dhch-2020"]["*"] for p in plans)
    plan = plans[0]
    assert plan.l2 == prod["L2_QUERY_ORDERING"][1:]
    assert plan.hold == prod["L2_CONSTRAIN_TO_QUERY_ORDERING"][1:]
    assert plan.rounder == prod["ROUNDER_QUERY_ORDERING"][1:]
    assert plan.opt_tol_slack == OPT_TOL_SLACK == 0.01
    # the data copy in schema_dhc is the same ordering
    ordering = QUERY_ORDERINGS["dhch-2020"]
    copy = PassPlan(ordering["l2"][1:], ordering["constrain_to"][1:], ordering["rounder"][1:])
    assert (plan.l2, plan.hold, plan.rounder) == (copy.l2, copy.hold, copy.rounder)


def test_the_dhc_household_plan_binds_to_the_measured_queries() -> None:
    """On the household run's nine measured queries: the six marginals, then the two
    crosses and ``detailed``, each in its outer pass; the 99-level cross named to hold is
    not measured, so no least-squares pass holds it (production's
    ``findOptimalTolAndAddConstrs`` loops over the measured queries only, and its one
    least-squares pass per outer pass holds for none). The outer passes are joined by the
    rounded crosses (``test_outer_passes.py``)."""
    from censusdp.io.budget_files import load_preset

    dhch = get_schema("dhch-2020")
    budget = load_preset("dhc-2020-units")
    block = budget.geolevel_names[-1]
    measured = [m.query for m in budget.measurements() if m.geolevel == block]
    measured = [q for q in measured if q != "tenvacgq"]
    bound = bind_l2(PRODUCTION_PASSES["dhch-2020"]["*"], dhch, measured, "hhtenshort_3lev")
    assert len(bound.queries) == 2 and sorted(bound.queries[0] + bound.queries[1]) == list(
        range(len(measured))
    )
    firsts = {measured[i].replace(" ", "") for i in bound.queries[0]}
    assert "detailed" not in firsts and len(firsts) == 6
    assert bound.hold_queries == ((), ()) and bound.slack == 0.01
    assert bound.outer == (0, 1)


@pytest.mark.slow  # five queries of the 1,227,744-cell DHC schema (14 s at load 15)
def test_the_dhc_rounding_passes_nest_with_hhgq_and_the_total() -> None:
    """The chain network needs every rounded query nested with the group attribute:
    production's four crosses of the first rounding pass refine each other and ``hhgq``."""
    dhcp = get_schema("dhcp-2020")
    live = ~dhcp.structural_zero_mask
    tpl = bind_rounding(PRODUCTION_PASSES["dhcp-2020"]["*"], dhcp)
    first = [tpl.rows[q][live] for q in tpl.passes[0]]
    coarse_to_fine = sorted(first, key=lambda r: np.unique(r).size)
    hhgq = make_query(dhcp, "hhgq").row_of_cell[live]
    for coarse, fine in zip([hhgq, *coarse_to_fine[:-1]], coarse_to_fine, strict=True):
        assert _refines(fine, coarse)


# -- least squares ------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_the_second_pass_keeps_every_held_answer_within_its_tolerance(seed: int) -> None:
    sub = _family(seed)
    bound = bind_l2(PLAN, PL94, list(QUERIES), "hhgq")
    assert bound.hold_queries == ((QUERIES.index(HELD),), ())
    first = solve_l2(_only(sub, bound.queries[0]))
    tol = first.max_violation + OPT_TOL_SLACK
    res = solve_l2_passes(sub, bound)
    assert res.status == "optimal"
    moved = np.abs(_held_answers(sub, res.x) - _held_answers(sub, first.x))
    assert moved.max() <= tol + 1e-6
    # every constraint of the family as exact as one pass (groups, totals, the parent)
    assert res.max_violation <= 1e-6 * sub.scale()
    assert sub.max_violation(res.x) <= 1e-6 * sub.scale()
    np.testing.assert_allclose(res.x.sum(axis=0), sub.parent, atol=1e-6)
    # the hold binds: the same second pass without it moves some held answer further
    free = solve_l2(_only(sub, bound.queries[1]))
    assert np.abs(_held_answers(sub, free.x) - _held_answers(sub, first.x)).max() > tol + 0.5


@pytest.mark.parametrize("seed", [0, 1])
def test_the_tolerance_is_per_row_so_the_held_rows_move_many_tolerances_in_all(
    seed: int,
) -> None:
    """Production holds each row of the held query within the tolerance, not the query as
    a whole (``addMultiPassDPQueryConstraints``: one pair of constraints per row and
    child): a tenth of a person on each of many rows adds up. The DHC State's Hispanic
    total rose so in the ``detailed`` pass of the person plan before outer passes
    (docs/dhc-2020.md, "The State's Hispanic total in passes"); a hold on the query's
    whole L1 change would stop it."""
    sub = _family(seed)
    bound = bind_l2(PLAN, PL94, list(QUERIES), "hhgq")
    first = solve_l2(_only(sub, bound.queries[0]))
    tol = first.max_violation + OPT_TOL_SLACK
    moved = _held_answers(sub, solve_l2_passes(sub, bound).x) - _held_answers(sub, first.x)
    assert np.abs(moved).max() <= tol + 1e-6
    assert (np.abs(moved) > tol - 1e-3).sum() >= 20  # many rows moved by the whole tolerance
    assert np.abs(moved).sum(axis=1).max() > 5 * tol  # a child's rows, in all, far more


def test_without_binding_group_bounds_the_pass_is_one_solve_and_optimal() -> None:
    """With free group bounds the held rows are the only layer: the relaxed solve is the
    pass's exact problem (the held rows as the group attribute) and no layer is shared out."""
    sub = _family(4, free_groups=True)
    bound = bind_l2(PLAN, PL94, list(QUERIES), "hhgq")
    first = solve_l2(_only(sub, bound.queries[0]))
    tol = first.max_violation + OPT_TOL_SLACK
    held = _held.Held.around(sub.query_rows[QUERIES.index(HELD)], first.x, tol)
    second = _only(sub, bound.queries[1])
    res, solves = _held.solve_held(second, [held], first.x, method="clarabel")
    assert solves == 1
    exact = replace(second, groups=held.rows, group_lower=held.lower, group_upper=held.upper)
    best = solve_l2(exact, method="clarabel")
    assert res.objective <= best.objective * (1 + 1e-6) + 1e-6
    assert held.violation(res.x) <= 1e-6


def test_a_clarabel_point_nothing_can_round_falls_back_to_the_rest_of_the_chain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Clarabel alone raising (its point rejected, the flow unable to round fractional
    held bounds) leaves the pass to the rest of the chain instead of failing the run."""
    from censusdp.errors import InfeasibleError

    sub = _family(4, free_groups=True)
    bound = bind_l2(PLAN, PL94, list(QUERIES), "hhgq")
    first = solve_l2(_only(sub, bound.queries[0]))
    held = _held.Held.around(
        sub.query_rows[QUERIES.index(HELD)], first.x, first.max_violation + OPT_TOL_SLACK
    )
    tried = []

    def program_fails(s, *, method="auto", **kw):
        tried.append(method)
        if method in ("piqp", "clarabel"):
            raise InfeasibleError(f"{method}'s point rejected and no flow")
        return solve_l2(s, method=method, **kw)

    monkeypatch.setattr(_held, "solve_l2", program_fails)
    second = _only(sub, bound.queries[1])
    res, _ = _held.solve_held(second, [held], first.x)
    assert tried[:3] == ["piqp", "clarabel", "auto"] and res.status == "optimal"
    assert held.violation(res.x) <= 1e-6 * sub.scale()


def test_a_binding_group_bound_is_shared_out_over_the_held_rows() -> None:
    """Group upper bounds at the first pass's group sums: the relaxed solve breaks them,
    the bounds are shared out over the held rows and the answer meets both layers."""
    sub = _family(5)
    bound = bind_l2(PLAN, PL94, list(QUERIES), "hhgq")
    first = solve_l2(_only(sub, bound.queries[0]))
    # the first pass is optimal for the tighter family too (it meets its bounds)
    tight = sub.with_bounds(group_upper=np.maximum(sub.group_sums(first.x), sub.group_lower))
    tol = first.max_violation + OPT_TOL_SLACK
    held = _held.Held.around(tight.query_rows[QUERIES.index(HELD)], first.x, tol)
    second = _only(tight, bound.queries[1])
    res, solves = _held.solve_held(second, [held], first.x)
    assert solves > 1
    gap = 1e-6 * tight.scale()
    assert held.violation(res.x) <= gap
    assert tight.max_violation(res.x) <= gap
    # the relaxation alone (held rows only) breaks a group bound
    relaxed = replace(second, groups=held.rows, group_lower=held.lower, group_upper=held.upper)
    assert tight.violations(solve_l2(relaxed).x)["group"] > 1e-3


def test_a_held_query_that_cuts_across_the_groups_is_held_too() -> None:
    """``votingage * cenrace`` does not refine ``hhgq``: the pass's groups are the common
    refinement, the held rows coarser sums over them, checked and shared out."""
    queries = ("total", "hhgq", "votingage*cenrace", "hispanic", "detailed")
    plan = PassPlan(
        l2=(queries[:-1], ("detailed",)), hold=(("votingage*cenrace",), ()), rounder=(("total",),)
    )
    rng = np.random.default_rng(11)
    sub, _ = census_subproblem(rng, queries=queries, n_children=5, n_people=300, rho=0.02)
    bound = bind_l2(plan, PL94, list(queries), "hhgq")
    first = solve_l2(_only(sub, bound.queries[0]))
    tol = first.max_violation + OPT_TOL_SLACK
    res = solve_l2_passes(sub, bound)
    held = sub.answers(res.x)[2]
    assert np.abs(held - sub.answers(first.x)[2]).max() <= tol + 1e-6
    assert sub.max_violation(res.x) <= 1e-6 * sub.scale()
    free = solve_l2(_only(sub, bound.queries[1]))
    assert np.abs(sub.answers(free.x)[2] - sub.answers(first.x)[2]).max() > tol + 0.5


@pytest.mark.parametrize("seed", range(6))
def test_the_separable_root_pass_is_clarabels_optimum(seed: int) -> None:
    """A root's held pass (one child, ``detailed`` alone, held rows as groups, the total
    exact or bounded) has a closed form; it equals Clarabel's solve of the same program."""
    rng = np.random.default_rng(seed)
    c, n = 60, 12
    groups = np.concatenate([np.arange(n), rng.integers(0, n, c - n)])
    truth = rng.poisson(3.0, c).astype(float)
    a = np.bincount(groups, weights=truth, minlength=n)
    exact = seed % 2 == 0
    sub = Subproblem(
        parent=None,
        query_rows=(rng.permutation(c),),
        query_sizes=(c,),
        noisy=((truth + rng.normal(0, 3.0, c))[None, :],),
        weights=np.array([1.0]),
        groups=groups,
        group_lower=np.maximum(a - 1.1, 0.0)[None, :],
        group_upper=(a + 1.1)[None, :],
        total_lower=np.array([truth.sum() - (0 if exact else 5)]),
        total_upper=np.array([truth.sum() + (0 if exact else 5)]),
    )
    x = _held._project(sub)
    assert x is not None and sub.max_violation(x) <= 1e-8
    best = solve_l2(sub, method="clarabel")
    assert sub.objective(x) <= best.objective + 1e-6
    np.testing.assert_allclose(x, best.x, atol=1e-4)
    # not a separable root: a query that sees several cells at once
    assert (
        _held._project(
            replace(sub, query_rows=(groups,), query_sizes=(n,), noisy=(sub.noisy[0][:, :n],))
        )
        is None
    )


# -- rounding -----------------------------------------------------------------------------


def _rounded(seed: int) -> tuple[Subproblem, RoundingPasses, np.ndarray]:
    sub = _family(seed)
    x = solve_l2_passes(sub, bind_l2(PLAN, PL94, list(QUERIES), "hhgq")).x
    kept = sub.query_rows[QUERIES.index("detailed")]
    return sub, bind_rounding(PLAN, PL94).on(kept), x


def _answers(both: RoundingPasses, counts: np.ndarray) -> list[np.ndarray]:
    """The answers of ``counts`` to the first rounding pass's queries."""
    out = []
    for q in both.passes[0]:
        rows = both.rows[q]
        a = np.zeros((counts.shape[0], int(rows.max()) + 1), dtype=np.int64)
        np.add.at(a.T, rows, counts.T)
        out.append(a)
    return out


def _first_pass_only(both: RoundingPasses, first: bool) -> RoundingPasses:
    s = slice(0, 1) if first else slice(1, None)
    return RoundingPasses(both.names, both.rows, both.passes[s], both.cellwise[s])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rounding_holds_the_first_passs_rounded_answers_exactly(seed: int) -> None:
    sub, both, x = _rounded(seed)
    once = round_in_passes(sub, x, _first_pass_only(both, True))
    final = round_in_passes(sub, x, both)
    assert sub.max_violation(final) == 0
    for a, b in zip(_answers(both, once), _answers(both, final), strict=True):
        np.testing.assert_array_equal(a, b)


def test_rounding_the_cells_alone_would_change_the_first_passs_answers() -> None:
    """The hold binds: without it (the second pass alone) some first-pass answer moves."""
    changed = []
    for seed in (0, 1, 2):
        sub, both, x = _rounded(seed)
        once = round_in_passes(sub, x, _first_pass_only(both, True))
        loose = round_in_passes(sub, x, _first_pass_only(both, False))
        pairs = zip(_answers(both, once), _answers(both, loose), strict=True)
        changed.append(any((a != b).any() for a, b in pairs))
    assert any(changed)
