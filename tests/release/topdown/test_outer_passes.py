"""Outer passes: production's ``L2PlusRounder_interleaved``, the 2020 DHC runs'.

Production's DHC configurations (``configs/production/dhc/unit_US.ini`` and
``person_US.ini``: ``seq_optimization_approach = L2PlusRounder_interleaved``) run each
outer pass of the ordering whole, least squares then rounding, and hold the rounded
answers of the queries of its last rounding pass *exactly* in every later outer pass
(``programs/optimization/sequential_optimizers.py``, ``interleave_optimizations``:
``Constraint(multi_query, pass_answer, "=", ...)`` appended to ``self.constraints``). The
household and person orderings have one least-squares and one rounding pass in each
outer pass, so their ``constrain_to`` names hold nothing (``DataIndQueriesL2NPassDecomp``
holds after an inner pass only ``if pass_num != self.pass_nums[-1]``): the marginal pass
reaches the final counts only through its rounded crosses. These tests hold that shape
on the pl94 schema.
"""

from __future__ import annotations

import numpy as np
import pytest
from _topdown_gen import census_subproblem

from censusdp.data.schema import get_schema
from censusdp.errors import ConfigError
from censusdp.release.topdown.multipass import (
    RoundingPasses,
    _restrict,
    bind_l2,
    bind_rounding,
    round_in_passes,
    solve_interleaved,
    solve_l2_passes,
)
from censusdp.release.topdown.passes import OPT_TOL_SLACK, PRODUCTION_PASSES, PassPlan
from censusdp.release.topdown.problem import Subproblem
from censusdp.release.topdown.solvers.least_squares import solve_l2
from censusdp.release.topdown.tasks import Task, run_task

PL94 = get_schema("pl94")
CROSS = "hhgq*hispanic*cenrace"
QUERIES = ("total", "hhgq", "votingage*hispanic", "cenrace", "votingage*cenrace", "detailed")
SHAPE = {  # the DHC household ordering's shape: marginals; then detailed
    "l2": (QUERIES[:-1], ("detailed",)),
    "hold": ((CROSS,), ("detailed",)),  # an unmeasured name, as production's
    "rounder": (("hhgq*hispanic", CROSS), ("detailed",)),
}
OUTER = PassPlan(**SHAPE, l2_outer=(0, 1), rounder_outer=(0, 1))
FLAT = PassPlan(**SHAPE)  # censusdp's plan before outer passes


def _family(seed: int) -> tuple[Subproblem, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    sub, truth = census_subproblem(rng, queries=QUERIES, n_children=6, n_people=300, rho=0.02)
    return sub, truth, sub.query_rows[QUERIES.index("detailed")]


def _answers(rounding: RoundingPasses, q: int, counts: np.ndarray) -> np.ndarray:
    rows = rounding.rows[q]
    out = np.zeros((counts.shape[0], int(rows.max()) + 1))
    np.add.at(out.T, rows, counts.T)
    return out


def _first_outer(sub: Subproblem, rounding: RoundingPasses) -> np.ndarray:
    """The first outer pass alone: least squares of the marginals, rounded in the crosses."""
    x = solve_l2(_restrict(sub, bind_l2(OUTER, PL94, list(QUERIES), "hhgq").queries[0])).x
    return round_in_passes(sub, x, rounding, run=[0])


# -- the plan ----------------------------------------------------------------------------


def test_the_dhc_household_plan_runs_productions_two_outer_passes() -> None:
    """Production's household ordering is three outer passes of one pass each (its first,
    ``tenvacgq``, is the unit TopDown here): two outer passes remain."""
    plan = PRODUCTION_PASSES["dhch-2020"]["*"]
    assert plan.l2_outer == (0, 1) and plan.rounder_outer == (0, 1)
    dhch = get_schema("dhch-2020")
    tpl = bind_rounding(plan, dhch)
    assert tpl.outer == (0, 1)
    held = [tpl.names[q].replace(" ", "") for q in tpl.passes[0]]
    assert held == [
        "hhtenshort_3lev*detailedcoupletypemultgendetownchildsize",
        "sex*hisp*hhtenshort_3lev*race*detailedcoupletypemultgendetownchildsize",
    ]


def test_the_dhc_person_plan_runs_productions_two_outer_passes() -> None:
    """``dhcp_strategies.py``, ``DecompTestStrategyRegularOrderingDHCP_20220811_exp_21_1``:
    ``{0: {0: marginals}, 1: {0: detailed}}`` in least squares and rounding. The marginal
    pass's rounded crosses are held exactly after it; its constrain-to cross is held by
    no least squares (the first outer pass has no later inner pass), production's 0.01
    slack notwithstanding."""
    plan = PRODUCTION_PASSES["dhcp-2020"]["*"]
    assert plan.l2_outer == (0, 1) and plan.rounder_outer == (0, 1)
    assert plan.opt_tol_slack == OPT_TOL_SLACK == 0.01
    dhcp = get_schema("dhcp-2020")
    measured = [n for n in plan.l2[0] if "hhgq8lev" not in n] + ["detailed"]
    bound = bind_l2(plan, dhcp, measured, "hhgq")
    assert bound.outer == (0, 1) and bound.queries == (tuple(range(9)), (9,))
    assert bound.hold_queries == ((), ())  # one outer pass: ((8,), ()), within 0.1
    assert bound.hold_total == bound.hold_groups == (False, False)
    assert plan.rounder[0][-1] == "relgq*age_40_groups*hispanic*cenrace*sex"
    assert plan.rounder[1] == ("detailed",)


def test_the_other_plans_stay_in_one_outer_pass() -> None:
    for schema, plans in PRODUCTION_PASSES.items():
        for plan in plans.values():
            if schema not in ("dhch-2020", "dhcp-2020"):
                assert set(plan.l2_outer) == set(plan.rounder_outer) == {0}


@pytest.mark.parametrize(
    ("l2_outer", "rounder_outer", "message"),
    [
        ((1, 1), (0, 1), "start at 0"),
        ((0, 2), (0, 2), "start at 0"),
        ((0,), (0, 1), "1 entries for 2 passes"),
        ((0, 0), (0, 1), "every outer pass has least squares and rounding"),
        ((0, True), (0, 1), "must be an integer"),
    ],
)
def test_a_bad_outer_pass_list_is_one_config_error(l2_outer, rounder_outer, message) -> None:
    with pytest.raises(ConfigError, match=message):
        PassPlan(**SHAPE, l2_outer=l2_outer, rounder_outer=rounder_outer)


def test_a_level_with_one_pass_left_is_one_pass_and_an_empty_outer_pass_is_refused() -> None:
    # a level that measures nothing (the US of a one-state input) or one pass's queries
    assert bind_l2(OUTER, PL94, [], "hhgq") is None
    assert bind_l2(OUTER, PL94, ["detailed"], "hhgq") is None
    three = PassPlan(
        l2=(("total",), ("hhgq",), ("detailed",)),
        hold=((), (), ()),
        rounder=(("hhgq",), ("detailed",)),
        l2_outer=(0, 0, 1),
        rounder_outer=(0, 1),
    )
    assert bind_l2(three, PL94, ["total", "hhgq", "detailed"], "hhgq").outer == (0, 0, 1)
    with pytest.raises(ConfigError, match="outer pass 1 has no measured query"):
        bind_l2(three, PL94, ["total", "hhgq"], "hhgq")


# -- the estimation ----------------------------------------------------------------------


@pytest.mark.parametrize("production", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_the_last_outer_pass_holds_the_first_ones_rounded_answers_exactly(
    seed: int, production: bool
) -> None:
    """Also with production's rounder, which never leaves the box ``floor(x) + {0, 1}``:
    the last least squares meets the held integer answers, so the box has a point
    meeting them."""
    sub, _, kept = _family(seed)
    rounding = bind_rounding(OUTER, PL94).on(kept)
    l2 = bind_l2(OUTER, PL94, list(QUERIES), "hhgq")
    solution, counts = solve_interleaved(sub, l2, rounding, production=production)
    x = solve_l2(_restrict(sub, l2.queries[0])).x
    first = round_in_passes(sub, x, rounding, run=[0], production=production)
    assert sub.max_violation(counts) == 0
    for q in rounding.passes[0]:
        np.testing.assert_array_equal(_answers(rounding, q, counts), _answers(rounding, q, first))
        # the last least squares already meets them (an equality, as production's)
        np.testing.assert_allclose(
            _answers(rounding, q, solution.x), _answers(rounding, q, first), atol=1e-6
        )
    assert solution.method == "piqp+piqp"


def test_one_outer_pass_would_lose_the_first_passs_answers() -> None:
    """The plan before outer passes (the marginal pass holding an unmeasured name, so
    nothing) rounds the last pass's answer, which moves the crosses of the first."""
    moved = []
    for seed in range(6):
        sub, _, kept = _family(seed)
        rounding = bind_rounding(FLAT, PL94).on(kept)
        x = solve_l2_passes(sub, bind_l2(FLAT, PL94, list(QUERIES), "hhgq")).x
        flat = round_in_passes(sub, x, rounding)
        first = _first_outer(sub, bind_rounding(OUTER, PL94).on(kept))
        q = rounding.passes[0][1]
        moved.append(np.abs(_answers(rounding, q, flat) - _answers(rounding, q, first)).sum())
    assert max(moved) >= 2


PERSON_QUERIES = ("total", "hhgq", "votingage*hispanic", "cenrace", CROSS, "detailed")
PERSON_SHAPE = {  # the DHC person ordering's shape: the held cross is measured
    "l2": (PERSON_QUERIES[:-1], ("detailed",)),
    "hold": ((CROSS,), ("detailed",)),
    "rounder": (("hhgq*hispanic", CROSS), ("detailed",)),
}


@pytest.mark.parametrize("seed", range(4))
def test_the_person_shape_holds_the_rounded_cross_exactly_not_the_real_one_within_a_tolerance(
    seed: int,
) -> None:
    """In outer passes the measured cross named to hold is held by no least squares
    within ``opt_tol + slack``; the ``detailed`` pass holds its *rounded* answers exactly
    (the person plan before outer passes held the first least squares' real answers
    within ``v + 0.1`` and rounded the cross after the ``detailed`` pass)."""
    rng = np.random.default_rng(seed)
    sub, _ = census_subproblem(rng, queries=PERSON_QUERIES, n_children=6, n_people=300, rho=0.02)
    kept = sub.query_rows[PERSON_QUERIES.index("detailed")]
    outer = PassPlan(**PERSON_SHAPE, l2_outer=(0, 1), rounder_outer=(0, 1))
    l2 = bind_l2(outer, PL94, list(PERSON_QUERIES), "hhgq")
    assert l2.hold_queries == ((), ())
    rounding = bind_rounding(outer, PL94).on(kept)
    solution, counts = solve_interleaved(sub, l2, rounding)
    first = round_in_passes(sub, solve_l2(_restrict(sub, l2.queries[0])).x, rounding, run=[0])
    q = rounding.passes[0][1]  # the cross
    held = _answers(rounding, q, first)
    np.testing.assert_array_equal(_answers(rounding, q, counts), held)
    np.testing.assert_allclose(_answers(rounding, q, solution.x), held, atol=1e-6)


def test_the_person_plan_before_outer_passes_released_another_cross() -> None:
    """One outer pass (the ``detailed`` least squares holding the cross within
    ``v + 0.1`` of the first least squares, then both roundings) releases cross answers
    that differ from the rounded marginal pass's, which production's plan keeps."""
    moved = []
    for seed in range(4):
        rng = np.random.default_rng(seed)
        sub, _ = census_subproblem(
            rng, queries=PERSON_QUERIES, n_children=6, n_people=300, rho=0.02
        )
        kept = sub.query_rows[PERSON_QUERIES.index("detailed")]
        flat = PassPlan(**PERSON_SHAPE)
        l2 = bind_l2(flat, PL94, list(PERSON_QUERIES), "hhgq")
        assert l2.hold_queries == ((PERSON_QUERIES.index(CROSS),), ())
        rounding = bind_rounding(flat, PL94).on(kept)
        released = round_in_passes(sub, solve_l2_passes(sub, l2).x, rounding)
        x = solve_l2(_restrict(sub, l2.queries[0])).x
        first = round_in_passes(sub, x, rounding, run=[0])
        q = rounding.passes[0][1]
        moved.append(np.abs(_answers(rounding, q, released) - _answers(rounding, q, first)).sum())
    assert max(moved) >= 2


def test_a_task_with_outer_passes_is_estimated_interleaved() -> None:
    sub, _, kept = _family(3)
    l2 = bind_l2(OUTER, PL94, list(QUERIES), "hhgq")
    rounding = bind_rounding(OUTER, PL94).on(kept)
    result = run_task(Task(1, "p", 0, kept, sub, l2_passes=l2, rounding=rounding))
    _, counts = solve_interleaved(sub, l2, rounding)
    np.testing.assert_array_equal(result.counts, counts)
    first = _first_outer(sub, rounding)
    q = rounding.passes[0][1]
    np.testing.assert_array_equal(
        _answers(rounding, q, result.counts), _answers(rounding, q, first)
    )


def test_passes_in_several_outer_passes_are_not_solved_as_one() -> None:
    sub, _, _ = _family(0)
    with pytest.raises(Exception, match="solve_interleaved"):
        solve_l2_passes(sub, bind_l2(OUTER, PL94, list(QUERIES), "hhgq"))
