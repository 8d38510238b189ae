"""The DHC household run estimated as two TopDowns: the units (``tenvacgq``) with
production's ``gq_vect`` exact, then the households held to the units' tenure
(production's ``owned`` and ``h1`` households = occupied units), structural zeros zero.

On hand-made blocks of households and units (each household in a live ``dhch-2020`` cell
of its unit's tenure) measured with noise, the estimate must obey every unit constraint
of ``unit_US.ini`` at every geounit (:func:`censusdp.data.units_dhc.unit_constraint_violations`):
with ``h1`` taken from the estimated units themselves when the run has no earlier H1
release, and with ``h1`` an earlier P.L. 94 release's occupied units (``HeldUnits``,
``--h1-from``), in one pass and in production's household passes.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.schema import get_schema
from censusdp.data.schema_dhc import DHC_UNITS_2020, DHCH_2020
from censusdp.data.units_dhc import (
    FIRST_GQ_TENVACGQ,
    FIRST_VACANT_TENVACGQ,
    unit_constraint_violations,
)
from censusdp.privacy.mechanisms import DiscreteGaussian
from censusdp.privacy.randomness import RandomSource
from censusdp.release.dhc_units import (
    HeldUnits,
    estimate_dhch_run,
    gqhh_vector,
    tenure_bounds,
    tenure_of_units,
)
from censusdp.release.measure import measure
from censusdp.release.topdown.driver import TopDownOptions
from synth import block_codes

LIVE = np.flatnonzero(~DHCH_2020.structural_zero_mask)
TENURE = DHCH_2020.cell_levels("hhtenshort_3lev")[LIVE]


def _blocks(rng: np.random.Generator, n: int) -> tuple[np.ndarray, sp.csr_matrix]:
    """``(n x 35)`` units and ``(n x 1,578,528)`` households, each household in a live
    cell of its unit's tenure (``hhtenshort_3lev``)."""
    units = np.zeros((n, DHC_UNITS_2020.size), dtype=np.int64)
    units[:, :FIRST_GQ_TENVACGQ] = rng.poisson(0.8, (n, FIRST_GQ_TENVACGQ))
    units[rng.integers(0, n, 2), FIRST_GQ_TENVACGQ + rng.integers(0, 24, 2)] += 1
    rows, cells = [], []
    for b, tenure in enumerate(tenure_of_units(units)):
        for t, k in enumerate(tenure):
            rows += [b] * int(k)
            cells += list(rng.choice(LIVE[TENURE == t], int(k)))
    hh = sp.csr_matrix((np.ones(len(rows)), (rows, cells)), shape=(n, DHCH_2020.size))
    hh.sum_duplicates()
    return units, hh


def _plan(hierarchy: Hierarchy, queries: tuple[str, ...]) -> list[tuple[str, str, object]]:
    mech = DiscreteGaussian(Fraction(4))
    return [(lv.name, q, mech) for lv in hierarchy.geolevels.levels for q in queries]


def _measured(
    hierarchy: Hierarchy, units: np.ndarray, hh: sp.csr_matrix, queries: tuple[str, ...], seed: int
) -> tuple[object, object]:
    """The units' ``tenvacgq`` and the households' ``queries`` measured at every level."""
    source = RandomSource.seeded(seed)
    u_ms = measure(
        hierarchy.aggregate(sp.csr_matrix(units)),
        hierarchy,
        DHC_UNITS_2020,
        _plan(hierarchy, ("tenvacgq",)),
        source.child("units"),
    )
    h_ms = measure(
        hierarchy.aggregate(hh), hierarchy, DHCH_2020, _plan(hierarchy, queries),
        source.child("households"),
    )  # fmt: skip
    return u_ms, h_ms


@pytest.fixture(scope="module")
def estimated() -> tuple[Hierarchy, np.ndarray, sp.csr_matrix, object, object]:
    rng = np.random.default_rng(3)
    hierarchy = Hierarchy.from_blocks(np.array(block_codes(1, 2, 1, 3)))
    units, hh = _blocks(rng, hierarchy.blocks.size)
    u_ms, h_ms = _measured(hierarchy, units, hh, ("hhtenshort_3lev", "sex * hhage", "detailed"), 5)
    u_est, h_est = estimate_dhch_run(
        h_ms, u_ms, hierarchy, HeldUnits(gqhh_vector(units)), TopDownOptions(passes="single")
    )
    return hierarchy, units, hh, u_est, h_est


def test_every_unit_constraint_holds_at_every_geounit(estimated) -> None:
    hierarchy, units, _, u_est, h_est = estimated
    gqhh = hierarchy.aggregate(gqhh_vector(units))
    for li in range(hierarchy.n_levels):
        u = np.asarray(u_est.histograms[li].todense(), dtype=np.int64)
        h1 = np.column_stack(
            [u[:, FIRST_VACANT_TENVACGQ:FIRST_GQ_TENVACGQ].sum(axis=1), u[:, :4].sum(axis=1)]
        )
        bad = unit_constraint_violations(h_est.histograms[li], u, h1, np.asarray(gqhh[li]))
        assert not any(m.any() for m in bad.values()), (
            li,
            {k: int(m.sum()) for k, m in bad.items()},
        )


def test_children_sum_to_parents_and_counts_are_integers(estimated) -> None:
    hierarchy, _, _, u_est, h_est = estimated
    for est in (u_est, h_est):
        blocks = est.histograms[-1]
        assert (blocks.data >= 0).all() and np.array_equal(blocks.data, np.round(blocks.data))
        for li, level in enumerate(hierarchy.aggregate(blocks)):
            assert (sp.csr_matrix(level) != est.histograms[li]).nnz == 0


def test_occupancy_is_left_to_the_noise(estimated) -> None:
    """gq_vect holds the housing units, not how many are occupied: the blocks' occupied
    units are estimated (here they differ from the truth somewhere)."""
    _, units, _, u_est, _ = estimated
    est = np.asarray(u_est.histograms[-1].todense())
    assert np.array_equal(gqhh_vector(est), gqhh_vector(units))
    assert not np.array_equal(est[:, :4].sum(axis=1), units[:, :4].sum(axis=1))


def test_bounds_are_exact_groups() -> None:
    hierarchy = Hierarchy.from_blocks(np.array(block_codes(1, 1, 1, 2)))
    gqhh = np.zeros((2, 25), dtype=np.int64)
    gqhh[0, 0], gqhh[1, 3] = 4, 1
    top = HeldUnits(gqhh).bounds(hierarchy)[0]
    assert np.array_equal(top.group_lower, top.group_upper)
    assert top.group_lower[0, 0] == 4 and top.group_lower[0, 3] == 1 and top.total_lower[0] == 5
    units = np.zeros((1, 35))
    units[0, :4] = (1, 2, 3, 4)
    b = tenure_bounds([units])[0]
    assert b.group_lower.tolist() == b.group_upper.tolist() == [[1, 2, 7]]
    # the total is the groups' sum, not an equality of its own (free bounds)
    assert b.total_lower.tolist() == [0] and b.total_upper.tolist() == [np.inf]


def test_the_dhcs_household_run_is_told_from_its_unit_budget() -> None:
    from censusdp.release.household_runs import has_household_run, household_schema

    manifest = {"units": {"schema": "dhch-2020"}}
    assert has_household_run(manifest["units"]) and not has_household_run({"schema": "units"})
    assert household_schema(manifest) == "dhch-2020"


def test_the_household_run_measures_tenvacgq_on_its_unit_histogram() -> None:
    """The run's plan split by the histogram each query reads, in plan order: the nine
    household queries on ``dhch-2020``, ``tenvacgq`` on ``dhc-units-2020`` (its block
    histogram keyed beside the run's own)."""
    from censusdp.io.budget_files import load_preset
    from censusdp.release.measure import plan_by_histogram
    from censusdp.release.measure_runs import _plan, histogram_key

    budget = load_preset("dhc-2020-units")
    plans = plan_by_histogram(DHCH_2020, _plan(budget))
    assert list(plans) == ["dhch-2020", "dhc-units-2020"]
    assert {q for _, q, _ in plans["dhc-units-2020"]} == {"tenvacgq"}
    assert len(plans["dhc-units-2020"]) == len(budget.geolevel_names)
    assert all(q != "tenvacgq" for _, q, _ in plans["dhch-2020"])
    assert sum(len(p) for p in plans.values()) == len(budget.measurements())
    assert histogram_key("units", "dhch-2020", "dhch-2020") == "units"
    assert histogram_key("units", "dhc-units-2020", "dhch-2020") == "units+dhc-units-2020"
    # a run of one histogram is one plan, as before
    assert list(plan_by_histogram(get_schema("pl94"), _plan(load_preset("pl94-2020")))) == ["pl94"]


# -- production's passes and h1 held to a P.L. 94 release ------------------------------

PLAN_QUERIES = (  # two of the plan's first pass, one cross and detailed of its second
    "hisp * hhtenshort_2lev",
    "coupled_hh_type * hisp * hhtenshort_2lev",
    "hhtenshort_3lev * hhage * detailedcoupletypemultgendetownchildsize",
    "detailed",
)


@pytest.fixture(
    scope="module",
    params=[
        "single",
        # the root's first pass (six marginals, no detailed, over 1.1 million live cells
        # with the tenure exact) falls back from the active set to Clarabel: 43 CPU s
        pytest.param("production", marks=pytest.mark.slow),
    ],
)
def held_to_h1(request) -> tuple[Hierarchy, np.ndarray, HeldUnits, object, object, str]:
    """The same kind of blocks estimated in one pass or production's household passes
    (the default), held to a P.L. 94 H1 that is not the truth: each block's occupied
    units moved by up to one within its housing units, as another release's noise would."""
    rng = np.random.default_rng(11)
    hierarchy = Hierarchy.from_blocks(np.array(block_codes(1, 2, 1, 3)))
    units, hh = _blocks(rng, hierarchy.blocks.size)
    gqhh = gqhh_vector(units)
    occupied = np.clip(units[:, :4].sum(axis=1) + rng.integers(-1, 2, units.shape[0]), 0, None)
    occupied = np.minimum(occupied, gqhh[:, 0])
    held = HeldUnits(gqhh, occupied)
    u_ms, h_ms = _measured(hierarchy, units, hh, PLAN_QUERIES, 7)
    passes = request.param
    u_est, h_est = estimate_dhch_run(h_ms, u_ms, hierarchy, held, TopDownOptions(passes=passes))
    return hierarchy, units, held, u_est, h_est, passes


def test_the_households_run_in_productions_passes(held_to_h1) -> None:
    """With passes (the default) every family of the household TopDown is solved in two
    least-squares passes (the plan's marginals, then the cross and ``detailed``), with
    ``single`` in one; the unit TopDown always in one."""
    _, _, _, u_est, h_est, passes = held_to_h1
    n_plus = 1 if passes == "production" else 0
    for level in h_est.levels:
        assert level["methods"] and all(m.count("+") == n_plus for m in level["methods"]), level
    for level in u_est.levels:
        assert all("+" not in m for m in level["methods"]), level


def test_h1_and_every_unit_constraint_hold_at_every_geounit(held_to_h1) -> None:
    hierarchy, units, held, u_est, h_est, _ = held_to_h1
    h1 = hierarchy.aggregate(held.h1())
    gqhh = hierarchy.aggregate(held.gqhh)
    for li in range(hierarchy.n_levels):
        u = np.asarray(u_est.histograms[li].todense(), dtype=np.int64)
        bad = unit_constraint_violations(h_est.histograms[li], u, np.asarray(h1[li]), gqhh[li])
        assert not any(m.any() for m in bad.values()), (
            li,
            {k: int(m.sum()) for k, m in bad.items()},
        )
    # the households are the P.L. release's occupied units, block by block, not the truth's
    blocks = np.asarray(h_est.histograms[-1].sum(axis=1)).ravel()
    assert np.array_equal(blocks, held.occupied)
    assert not np.array_equal(blocks, units[:, :4].sum(axis=1))


def test_held_units_refuse_occupied_outside_the_housing_units() -> None:
    from censusdp.errors import InternalError

    gqhh = np.zeros((2, 25), dtype=np.int64)
    gqhh[:, 0] = (3, 1)
    assert HeldUnits(gqhh, np.array([3, 0])).vector()[:, :2].tolist() == [[0, 3], [1, 0]]
    with pytest.raises(InternalError):
        HeldUnits(gqhh, np.array([1, 2]))
