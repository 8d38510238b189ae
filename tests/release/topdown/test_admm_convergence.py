"""The ADMM's step size, repair and acceptance (``solvers.admm``), and the chain's held
totals (``solvers.chain.HELD_TOTAL_BAND``).

The ADMM stops when its residuals are below the optimality tolerance and a repaired
(exactly feasible) point is at hand. Before: the step size was refactored only when the
residual balance asked for five times another, the repair projected every cell (it
lifted the zero cells' small negative residuals into every child's total, hundreds of
cells at once, and undid it at the next column projection), and any repaired point was
accepted, however far the repair had moved the children's totals. Now: a factor of two,
the repair's first rounds on the positive cells, and a repaired point accepted only when
no child's total moved more than ``_MOVE_UNITS`` residual tolerances; and the cells' bound
rows take ``_CELL_RHO`` times the step size, so that the zero cells' residuals, which
add up in a child's total, meet that acceptance in fewer iterations. These tests hold
the ADMM's answer to a reference (Clarabel at a millionth of the noise) on random
families, and each fails if its piece is undone (``BEFORE``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from _topdown_gen import census_subproblem, random_subproblem

from censusdp.release.topdown import Subproblem, solve_l2
from censusdp.release.topdown.multipass import _hold
from censusdp.release.topdown.solvers import admm
from censusdp.release.topdown.solvers.base import compress
from censusdp.release.topdown.solvers.chain import Shape, backend_order
from censusdp.release.topdown.solvers.common import clean, fixed_zeros

BEFORE = {
    "_CELL_RHO": 1.0,
    "_RHO_ADAPT": 5.0,
    "_DUAL_UNITS": 2.0,
    "_SUPPORT_ROUNDS": 0,
    "_MOVE_UNITS": float("inf"),
}
"""The ADMM's knobs as they were (benchmarks/bench_whole_family.py ``--admm before``)."""


def _as_driver_builds(sub: Subproblem) -> Subproblem:
    """Weights scaled to a largest of 1 and the noise scale of the most precise query,
    as ``subproblems.make_subproblem`` builds a family (the ADMM then stops at a
    thousandth of that noise)."""
    least = float((1.0 / sub.weights).min())
    return dataclasses.replace(
        sub, weights=sub.weights / sub.weights.max(), noise_scale=float(np.sqrt(least))
    )


def _reference(sub: Subproblem) -> np.ndarray:
    ref = solve_l2(sub, method="clarabel", noise_tol=1e-6)
    assert ref.status == "optimal" and ref.method == "clarabel"
    return ref.x


@pytest.mark.parametrize(("k", "seed"), [(20, 1), pytest.param(30, 2, marks=pytest.mark.slow)])
def test_admm_reaches_the_reference_point_on_census_families(monkeypatch, k, seed) -> None:
    """pl94 tract families (1,500 people a tract, rho 0.43): the ADMM's cells within
    0.01 persons of the reference (its tolerance is 0.002: a thousandth of the noise),
    its objective within 0.05 (of 296,010 at 30 tracts); as it was, its repair accepted
    points 0.02-0.2 persons off (objective 0.02-0.35 above)."""
    sub, _ = census_subproblem(
        np.random.default_rng(seed), n_children=k, n_people=k * 1500, rho=0.43
    )
    sub = _as_driver_builds(sub)
    ref = _reference(sub)
    got = solve_l2(sub, method="admm")
    assert got.method == "admm" and got.status == "optimal"
    assert got.max_violation <= 1e-8 * max(1.0, sub.scale())
    assert np.abs(got.x - ref).max() < 0.01
    assert got.objective - sub.objective(ref) < 0.05
    for name, value in BEFORE.items():
        monkeypatch.setattr(admm, name, value)
    before = solve_l2(sub, method="admm")
    assert np.abs(before.x - ref).max() > 0.015  # the test sees the difference


@pytest.mark.parametrize("seed", range(12))
def test_admm_matches_the_reference_on_small_random_families(seed: int) -> None:
    """Many small random families (groups with bounds, capped or free totals): the
    ADMM's point is feasible and its objective the reference's, within the tolerance."""
    rng = np.random.default_rng(100 + seed)
    sub, _ = random_subproblem(
        rng, k=int(rng.integers(3, 9)), c=int(rng.integers(8, 30)), n_queries=4, mean=20.0
    )
    sub = dataclasses.replace(sub, noise_scale=1.0)
    ref = _reference(sub)
    got = solve_l2(sub, method="admm")
    assert got.status == "optimal" and got.method == "admm"
    assert got.max_violation <= 1e-8 * max(1.0, sub.scale())
    ref_obj = sub.objective(ref)
    assert got.objective - ref_obj <= 1e-4 * max(1.0, abs(ref_obj))
    assert np.abs(got.x - ref).max() < 0.05


def _near_optimum(seed: int, hold: float) -> tuple[Subproblem, np.ndarray]:
    """A family's second pass (totals held within ``hold`` of the optimum's) and a point
    as the ADMM leaves one: exact column sums, the zero cells a residual below 0, the
    others the optimum's with noise of the same size (0.002 persons)."""
    sub, _ = census_subproblem(
        np.random.default_rng(seed), n_children=30, n_people=45_000, rho=0.43
    )
    ref = _reference(sub)
    ref = clean(sub, np.where(ref < 1e-6, 0.0, ref), 1e-6)
    held = _hold(sub, ref, True, False, hold)
    free = ~fixed_zeros(held)
    rng = np.random.default_rng(seed)
    e = 0.002
    x = np.where(ref <= 0, -e * rng.random(ref.shape), ref + e * rng.normal(size=ref.shape))
    x = np.where(free, x, 0.0)
    x = x + ((held.parent - x.sum(axis=0)) / free.sum(axis=0))[None, :] * free
    return held, x


def test_repair_on_the_positive_cells_converges_fast(monkeypatch) -> None:
    """From a point as the ADMM leaves one, the repair's rounds on the positive cells
    reach the bounds to 1e-7 persons in 20 rounds; the rounds on every cell alone do
    not (they went on for hundreds)."""
    held, x = _near_optimum(2, 0.001)
    assert held.violations(x)["total"] > 0.05  # the totals are off by more than the band
    start = clean(held, x, 1e-3)
    fixed = admm.repair(held, start, 1e-7, rounds=0)
    assert held.max_violation(fixed) <= 1e-7
    assert np.abs(fixed - x).max() < 0.05  # a repair, not another point
    monkeypatch.setattr(admm, "_SUPPORT_ROUNDS", 0)
    assert held.max_violation(admm.repair(held, start, 1e-7, rounds=20)) > 1e-7


def test_held_totals_are_not_caps() -> None:
    """A second pass's totals held within 0.1 person (production's ``opt_tol_slack``)
    keep the ADMM first on a tract family; a cap of one person or more (a household
    run's housing units) sends the family to the program's solvers first (PIQP, then
    Clarabel)."""
    sub, _ = census_subproblem(np.random.default_rng(4), n_children=20, n_people=30_000, rho=0.43)
    t = np.maximum(sub.noisy[0].sum(axis=1), 0.1)
    held = sub.with_bounds(total_lower=t - 0.1, total_upper=t + 0.1)
    comp = compress(held)
    assert not Shape.of(held, comp).capped_totals
    assert backend_order(held, comp, "auto")[0] == "admm"
    capped = sub.with_bounds(total_lower=np.zeros(sub.k), total_upper=np.round(t) + 1.0)
    assert Shape.of(capped, compress(capped)).capped_totals
    assert backend_order(capped, compress(capped), "auto")[:2] == ("piqp", "clarabel")


def test_the_cells_step_size_cuts_the_iterations(monkeypatch) -> None:
    """A second pass as production's (a 20-tract family's totals held within 0.1 person
    of the first pass's): with the cells' bound rows at ``_CELL_RHO`` times the step size
    the ADMM reaches the reference point in well under half the iterations it takes with
    one step size for every row (140 against 360), at the same point within the
    tolerance."""
    sub, _ = census_subproblem(np.random.default_rng(1), n_children=20, n_people=30_000, rho=0.43)
    sub = _as_driver_builds(sub)
    held = _hold(sub, solve_l2(sub, method="clarabel").x, True, False, 0.1)
    ref = _reference(held)
    got = solve_l2(held, method="admm")
    assert got.method == "admm" and got.status == "optimal"
    assert np.abs(got.x - ref).max() < 0.005
    monkeypatch.setattr(admm, "_CELL_RHO", 1.0)
    one = solve_l2(held, method="admm")
    assert one.status == "optimal" and np.abs(one.x - ref).max() < 0.005
    assert got.iterations <= 0.5 * one.iterations
