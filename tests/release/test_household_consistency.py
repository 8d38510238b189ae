"""Persons-households consistency: the person run held to the released households.

A household run is estimated first; the person run's household group is then held, at
every geounit, to ``[L, U]``: the persons the released households' sizes need (exact
unless a household is of 7 or more). ``censusdp.release.household_consistency`` proves
that no subproblem becomes infeasible below the state; these tests check the bounds on
hand-made blocks, their nesting on many random household histograms, and TopDown runs
held to them that never need the failsafe.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.data.geography import Hierarchy
from censusdp.data.invariants import Bounds, Invariants, level_bounds
from censusdp.data.schema import HOUSEHOLD2010, get_schema
from censusdp.errors import ConfigError, InfeasibleError
from censusdp.io.budget_files import load_preset
from censusdp.privacy.randomness import RandomSource
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.consistency import household_persons
from censusdp.release.household_consistency import (
    check_run_schemas,
    hold_persons_to_households,
    household_bounds,
    household_consistency_violations,
    household_person_bounds,
    household_root_cap,
    household_size_bounds,
    is_household_run,
)
from censusdp.release.measure import measure
from censusdp.release.topdown.driver import TopDownOptions, run_topdown
from synth import block_codes

PL94 = get_schema("pl94")
SIZES = np.arange(1, 8)


def _cell(size: int) -> int:
    """A household cell of ``size`` (7: 7 or more) that is no structural zero: one person
    alone (type 18), two a married couple (3), more a couple with a child under 6 (0)."""
    hhtype = 18 if size == 1 else 3 if size == 2 else 0
    cols = {"hhsex": 0, "hhage": 1, "hhhisp": 0, "hhrace": 0, "hhsize": size,
            "hhtype": hhtype, "hhelderly": 0, "hhmulti": 0}  # fmt: skip
    cell = int(HOUSEHOLD2010.cells_of({k: np.array([v]) for k, v in cols.items()})[0])
    assert not HOUSEHOLD2010.structural_zero_mask[cell]
    return cell


CELLS = np.array([_cell(s) for s in SIZES])


def _households(counts: np.ndarray) -> sp.csr_matrix:
    """``(blocks x 387,072)`` household histogram from ``(blocks x 7)`` counts by size 1..7+."""
    counts = np.asarray(counts, dtype=np.int64)
    rows, k = np.nonzero(counts)
    return sp.csr_matrix(
        (counts[rows, k], (rows, CELLS[k])), shape=(counts.shape[0], HOUSEHOLD2010.size)
    )


def _counts(*blocks: dict[int, int]) -> np.ndarray:
    out = np.zeros((len(blocks), 7), dtype=np.int64)
    for b, sizes in enumerate(blocks):
        for size, n in sizes.items():
            out[b, size - 1] = n
    return out


# an empty block, a block of a 1- and a 3-person household, a 7+ household with a couple,
# a block without housing units
HAND = _counts({}, {1: 1, 3: 1}, {7: 1, 2: 1}, {})
HAND_HU = np.array([2, 3, 2, 0])


def test_size_bounds_on_hand_made_blocks() -> None:
    lower, upper = household_size_bounds(_households(HAND))
    assert lower.tolist() == [0, 4, 9, 0]
    assert upper[:2].tolist() == [0, 4] and np.isinf(upper[2]) and upper[3] == 0


def test_person_bounds_sum_up_the_hierarchy_and_a_seven_makes_them_open() -> None:
    h = Hierarchy.from_blocks(np.asarray(block_codes(1, 1, 2, 2)))
    levels = household_person_bounds(_households(HAND), h)
    bg = h.geolevels.index("BlockGroup")
    assert levels[bg][0].tolist() == [4, 9]
    assert levels[bg][1][0] == 4 and np.isinf(levels[bg][1][1])
    assert levels[0][0].tolist() == [13] and np.isinf(levels[0][1][0])


def test_household_bounds_hold_households_to_housing_units() -> None:
    h = Hierarchy.from_blocks(np.asarray(block_codes(1, 1, 2, 2)))
    b = household_bounds(HAND_HU, h)
    assert b[-1].total_upper.tolist() == [2, 3, 2, 0] and (b[-1].total_lower == 0).all()
    assert b[0].total_upper.tolist() == [7] and b[0].group_lower.shape == (1, 1)


def test_person_bounds_are_held_to_the_households() -> None:
    h = Hierarchy.from_blocks(np.asarray(block_codes(1, 1, 2, 2)))
    # households 1 + 3 + 9 persons; one group-quarters facility (type 5) in block 0
    gq = np.zeros((4, 8), dtype=np.int64)
    gq[0, 5] = 1
    inv = Invariants(h.blocks, np.array([2, 4, 10, 0]), HAND_HU, gq, total_level=1)
    bounds = [Bounds(*b) for b in level_bounds(inv, h)]
    held = hold_persons_to_households(bounds, _households(HAND), h)
    assert held[-1].group_lower[:, 0].tolist() == [0, 4, 9, 0]
    assert held[-1].group_upper[:, 0].tolist()[:2] == [0, 4]
    assert np.isinf(held[-1].group_upper[2, 0]) and held[-1].group_upper[3, 0] == 0
    assert held[-1].group_lower[:, 5].tolist() == bounds[-1].group_lower[:, 5].tolist()
    # the state: 16 persons, one of them in the facility at least, 13 in households at least
    assert held[1].group_lower[0, 0] == 13 and held[1].total_lower[0] == 16


def test_a_state_too_small_for_its_households_is_one_line() -> None:
    h = Hierarchy.from_blocks(np.asarray(block_codes(1, 1, 2, 2)))
    gq = np.zeros((4, 8), dtype=np.int64)
    gq[0, 5] = 1
    inv = Invariants(h.blocks, np.array([1, 4, 6, 0]), HAND_HU, gq, total_level=1)  # 11 < 13 + 1
    bounds = [Bounds(*b) for b in level_bounds(inv, h)]
    with pytest.raises(InfeasibleError, match=r"^US: the released households need 13 to inf") as e:
        hold_persons_to_households(bounds, _households(HAND), h)
    assert "\n" not in str(e.value) and "--units independent" in str(e.value)


def test_violations_are_counted_by_rule() -> None:
    hist = _households(_counts({1: 2}, {}, {3: 1}, {7: 1}, {2: 1}, {1: 3}))
    persons = np.array([0, 2, 2, 9, 3, 3])
    hu = np.array([2, 1, 1, 1, 0, 2])
    assert household_consistency_violations(persons, hist, hu) == {
        "households_without_household_persons": 1,  # block 0
        "household_persons_without_households": 1,  # block 1
        "household_persons_below_household_sizes": 2,  # blocks 0 (0 < 2), 2 (2 < 3)
        "household_persons_above_household_sizes": 2,  # blocks 1 (2 > 0), 4 (3 > 2)
        "households_above_housing_units": 2,  # blocks 4, 5
        "households_without_housing_units": 1,  # block 4
    }
    ok = _households(_counts({1: 1, 2: 1}, {7: 2}, {}))
    clean = household_consistency_violations(np.array([3, 20, 0]), ok, np.array([2, 2, 0]))
    assert clean == dict.fromkeys(clean, 0)


def test_only_a_units_or_household_schema_is_a_unit_run() -> None:
    households, units = load_preset("ddp-2010-households"), load_preset("ddp-2010-units")
    assert is_household_run(households) and not is_household_run(units)
    assert not is_household_run(None)
    check_run_schemas(ReleaseBudget(units, households))  # a pure-DP run beside households
    with pytest.raises(ConfigError, match=r"is for households .* give it as the unit run"):
        check_run_schemas(ReleaseBudget(households, None))
    with pytest.raises(ConfigError, match=r"unit budget 'dhc-lite-demo' is on schema 'dhc-lite'"):
        check_run_schemas(ReleaseBudget(load_preset("pl94-2020"), load_preset("dhc-lite-demo")))


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**31 - 1),
    shape=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(1, 6)),
)
def test_person_bounds_are_non_empty_and_nest_on_random_households(seed, shape) -> None:
    rng = np.random.default_rng(seed)
    h = Hierarchy.from_blocks(np.asarray(block_codes(*shape)))
    nb = h.blocks.size
    hu = rng.integers(0, 6, nb) * (rng.random(nb) < 0.7)
    counts = rng.multinomial(1, np.full(7, 1 / 7), size=hu.sum()) if hu.sum() else None
    # each housing unit occupied with probability 0.8, by a household of a random size
    per_block = np.zeros((nb, 7), dtype=np.int64)
    if counts is not None:
        block_of = np.repeat(np.arange(nb), hu)
        occupied = rng.random(block_of.size) < 0.8
        np.add.at(per_block, block_of[occupied], counts[occupied])
    levels = household_person_bounds(_households(per_block), h)
    blocks = [np.asarray(a).ravel() for a in h.aggregate(np.column_stack([levels[-1][0]]))]
    for li, (lo, hi) in enumerate(levels):
        assert (lo <= hi).all() and (lo >= 0).all()
        assert np.array_equal(lo, blocks[li])  # a geounit's L is its blocks' sum
        kids = h.aggregate(np.isinf(levels[-1][1]).astype(np.int64).reshape(-1, 1))[li]
        assert np.array_equal(np.isinf(hi), np.asarray(kids).ravel() > 0)
    assert (levels[-1][1][hu == 0] == 0).all()  # no housing unit: no household person


def _person_block_hist(p: np.ndarray, gq_persons: np.ndarray, rng) -> sp.csr_matrix:
    """A pl94 person histogram: ``p[b]`` household persons and ``gq_persons[b]`` in
    noninstitutional group quarters (type 5), random race, age and ethnicity."""
    rows, cells = [], []
    for hhgq, n in ((0, p), (5, gq_persons)):
        b = np.repeat(np.arange(p.size), n)
        cols = {"hhgq": np.full(b.size, hhgq), "age": rng.integers(0, 90, b.size),
                "hispanic": rng.integers(0, 2, b.size), "cenrace": rng.integers(1, 64, b.size)}  # fmt: skip
        rows.append(b)
        cells.append(PL94.cells_of(cols))
    r, c = np.concatenate(rows), np.concatenate(cells)
    return sp.csr_matrix((np.ones(r.size, dtype=np.int64), (r, c)), shape=(p.size, PL94.size))


@pytest.mark.slow  # a pl94 TopDown per example: about 10 s each on an idle machine
@settings(max_examples=4, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1), eps=st.sampled_from(["1/10", "1", "10"]))
def test_a_person_run_held_to_households_is_feasible_and_consistent(seed, eps) -> None:
    """Persons measured with the pl94 strategy and estimated top-down, held to released
    households (the true ones, with block sizes mixing 7+ and exact ones): no failsafe,
    and every block consistent with the households."""
    rng = np.random.default_rng(seed)
    h = Hierarchy.from_blocks(np.asarray(block_codes(1, 2, 2, 3)))
    nb = h.blocks.size
    hu = rng.integers(0, 4, nb) * (rng.random(nb) < 0.75)
    per_block = np.zeros((nb, 7), dtype=np.int64)
    for b in np.flatnonzero(hu):
        sizes = rng.integers(1, 8, rng.integers(0, hu[b] + 1))
        np.add.at(per_block[b], sizes - 1, 1)
    extra = rng.integers(0, 3, nb) * (per_block[:, 6] > 0)  # 7+ households hold 7 or more
    p = per_block @ SIZES + extra
    gq_fac = np.zeros((nb, 8), dtype=np.int64)
    gq_fac[:, 5] = rng.random(nb) < 0.2
    gq_persons = gq_fac[:, 5] * rng.integers(1, 4, nb)
    block_hist = _person_block_hist(p, gq_persons, rng)
    inv = Invariants(h.blocks, p + gq_persons, hu, gq_fac, total_level=1)
    budget = load_preset("pl94-2020").scaled(epsilon=eps)
    plan = [(m.geolevel, m.query, m.mechanism) for m in budget.measurements()]
    ms = measure(h.aggregate(block_hist), h, PL94, plan, RandomSource.seeded(seed))
    households = _households(per_block)
    bounds = hold_persons_to_households([Bounds(*b) for b in level_bounds(inv, h)], households, h)
    est = run_topdown(ms, h, bounds, TopDownOptions(group_variable="hhgq"))
    assert est.failsafe == []
    released = household_persons(est.histograms[-1], PL94)
    broken = household_consistency_violations(released, households, hu)
    assert broken == dict.fromkeys(broken, 0), broken


def test_the_root_cap_is_the_persons_a_state_can_hold_in_households() -> None:
    h = Hierarchy.from_blocks(np.asarray(block_codes(1, 1, 2, 2)))
    gq = np.zeros((4, 8), dtype=np.int64)
    gq[0, 5] = 1  # one facility: at least one person, any number
    inv = Invariants(h.blocks, np.array([1, 4, 6, 0]), HAND_HU, gq, total_level=1)
    cap = household_root_cap(_bounds(inv, h))
    assert (cap.lower, cap.upper) == (0, 10)  # P = 11 - 1; the facility can take the rest
    size = HOUSEHOLD2010.cell_levels("hhsize")
    assert cap.weights[CELLS].tolist() == SIZES.tolist() and (cap.weights == size).all()
    alone = Invariants(h.blocks, np.array([1, 4, 6, 0]), HAND_HU, np.zeros((4, 8), np.int64), 1)
    cap = household_root_cap(_bounds(alone, h))
    assert (cap.lower, cap.upper) == (11, 11)  # no group quarters: households hold everyone
    free = [Bounds(b.group_lower, b.group_upper, np.zeros_like(b.total_lower),
                   np.full_like(b.total_upper, np.inf)) for b in _bounds(inv, h)]  # fmt: skip
    assert household_root_cap(free) is None  # no invariant total (bottom-up)


def _bounds(inv: Invariants, h: Hierarchy) -> list[Bounds]:
    return [Bounds(*b) for b in level_bounds(inv, h)]


@pytest.mark.slow  # the root's 169,344 live cells solved about ten times per example
@settings(max_examples=3, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31 - 1), with_gq=st.booleans())
def test_a_household_run_under_the_root_cap_fits_its_persons(seed, with_gq) -> None:
    """Households measured with the DDP's household budget and estimated top-down under
    the root's weighted row: inflated by non-negativity without it, the root's households
    then need at most the persons the state can hold in households (exactly them without
    group quarters), every block's households stay within its housing units, and the
    person bounds held to them are feasible at every geounit."""
    rng = np.random.default_rng(seed)
    h = Hierarchy.from_blocks(np.asarray(block_codes(1, 1, 2, 3)))
    nb = h.blocks.size
    hu = rng.integers(2, 12, nb)
    per_block = np.zeros((nb, 7), dtype=np.int64)
    for b in range(nb):
        np.add.at(per_block[b], rng.integers(1, 6, rng.integers(0, hu[b] + 1)) - 1, 1)
    gq_fac = np.zeros((nb, 8), dtype=np.int64)
    gq_fac[0, 5] = with_gq
    pop = per_block @ SIZES + 3 * gq_fac[:, 5]
    households = _households(per_block)
    budget = load_preset("ddp-2010-households")
    plan = [(m.geolevel, m.query, m.mechanism) for m in budget.measurements()]
    ms = measure(h.aggregate(households), h, HOUSEHOLD2010, plan, RandomSource.seeded(seed))
    bounds = _bounds(Invariants(h.blocks, pop, hu, gq_fac, total_level=1), h)
    cap = household_root_cap(bounds)
    assert (cap.lower, cap.upper) == ((0, pop.sum() - 1) if with_gq else (pop.sum(), pop.sum()))
    hb = household_bounds(hu, h)
    free = run_topdown(ms, h, hb, TopDownOptions(group_variable=None))
    need_free = household_size_bounds(free.histograms[0])[0].sum()
    assert need_free > cap.upper  # the DDP's inflation: the row binds
    est = run_topdown(ms, h, hb, TopDownOptions(group_variable=None, root_cap=cap))
    need = household_size_bounds(est.histograms[0])[0].sum()
    assert cap.lower <= need <= cap.upper
    blocks = np.asarray(est.histograms[-1].sum(axis=1)).ravel()
    assert (blocks <= hu).all() and (est.histograms[-1].data >= 0).all()
    hold_persons_to_households(bounds, est.histograms[-1], h)  # raises if infeasible
