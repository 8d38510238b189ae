"""The generator's distributions and block plan against their 2010 targets."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from censusdp.data.schema import CENRACE_RACES
from censusdp.generate import _model as m
from censusdp.generate import resolve_state, state_codes
from censusdp.generate._states import STATES
from censusdp.generate._synth import _facilities, _households
from censusdp.generate._tracts import load_tracts, plan_tracts


def test_states_table() -> None:
    assert len(state_codes()) == 52
    # 2010 block tallies: 11,078,297 blocks in the 50 states and DC.
    assert sum(s.blocks for s in STATES if s.postal != "PR") == 11_078_297
    assert resolve_state("vt") is resolve_state("50") is resolve_state(50) is resolve_state(" VT ")
    assert resolve_state("6").postal == "CA"


def test_household_size_mean_and_sampler() -> None:
    """Chi-square goodness of fit (false-failure rate 1e-3) accepts the 2010 household
    size distribution (SF1 H13, mean 2.58) and rejects one whose 1-person share is 30%
    larger."""
    assert m.MEAN_HOUSEHOLD_SIZE == pytest.approx(2.58, abs=0.005)
    rng = np.random.default_rng(11)
    hh_pop = np.full(200, 2_000)
    tract, size = _households(hh_pop, rng)
    assert np.array_equal(np.bincount(tract, weights=size), hh_pop)
    last = np.r_[tract[1:] != tract[:-1], True]  # truncated to fit the tract: not iid
    obs = np.bincount(size[~last] - 1, minlength=12)
    n = obs.sum()
    assert stats.chisquare(obs, n * m.HOUSEHOLD_SIZE_PROBS).pvalue > 1e-3
    wrong = m.HOUSEHOLD_SIZE_PROBS.copy()
    wrong[0] *= 1.3
    wrong[1:] *= (1 - wrong[0]) / wrong[1:].sum()
    assert stats.chisquare(obs, n * wrong).pvalue < 1e-3


def test_group_quarters_share_by_type() -> None:
    """Expected GQ persons per type match 2010 SF1 P42 shares (2.6% in total)."""
    rng = np.random.default_rng(3)
    pop = np.full(20_000, 4_000)
    tract, gqtype, size = _facilities(pop, rng)
    share = np.bincount(gqtype, weights=size, minlength=8) / pop.sum()
    assert share.sum() == pytest.approx(0.0259, rel=0.05)
    for g in (1, 3, 5, 7):  # the large types; small ones are noisier
        assert share[g] == pytest.approx(m.GQ_SHARE[g], rel=0.15)
    per_tract = np.bincount(tract, weights=size, minlength=pop.size)
    assert (per_tract <= m.GQ_MAX_SHARE_OF_TRACT * pop).all()


def test_race_probabilities() -> None:
    multi = np.array([len(r) > 1 for r in CENRACE_RACES])
    for fips, nhpi in (("50", 0.03), ("15", 0.20), ("72", 0.03)):
        p = m.group_race_probs(fips, nhpi)
        assert p.shape == (6, 63)
        assert np.allclose(p.sum(axis=1), 1.0)
        # the non-Hispanic single-race groups never produce multi-race codes, and the
        # two-or-more-races group only produces them
        assert p[:4, multi].sum() == 0
        assert p[4, ~multi].sum() == 0
        assert (p[4, multi] > 0).all() and (p[5] > 0).all()
    us = m.group_race_probs("50", 0.03)[5]
    assert us[0] == pytest.approx(0.530, abs=0.01)  # Hispanic, White alone
    assert us[5] == pytest.approx(0.367, abs=0.01)  # Hispanic, Some Other Race alone
    assert us[multi].sum() == pytest.approx(0.060, abs=0.001)
    pr = m.group_race_probs("72", 0.03)[5]
    assert pr[1] == pytest.approx(0.124, abs=0.01)  # Puerto Rico, Black alone
    # most common NH multi-race combination is White and Black (C2010BR-02)
    nh = m.group_race_probs("50", 0.03)[4]
    assert CENRACE_RACES[int(np.argmax(nh))] == frozenset({0, 1})


def test_age_weights() -> None:
    assert m.AGE_WEIGHTS.sum() == pytest.approx(1.0)
    assert m.AGE_WEIGHTS[18:].sum() == pytest.approx(0.760, abs=0.004)  # 2010: 76.0%
    assert m.AGE_WEIGHTS[65:].sum() == pytest.approx(0.130, abs=0.003)  # 2010: 13.0%


def test_national_block_plan() -> None:
    """Over all 50 states and DC the plan has the 2010 block count, 44% empty blocks
    (4,871,270 of 11,078,297) and about 3 block groups per tract (217,740 / 73,057)."""
    blocks = populated = bgs = tracts = 0
    empty_share = {}
    for s in STATES:
        t = load_tracts(s)
        plan = plan_tracts(t, s, np.random.default_rng(int(s.fips)))
        empty_share[s.postal] = 1 - plan.populated_blocks.sum() / plan.blocks.sum()
        assert (plan.blocks[t.pop > 0] >= plan.block_groups[t.pop > 0]).all()
        assert (plan.blocks[t.pop == 0] == 0).all()
        if s.postal == "PR":
            continue
        blocks += plan.blocks.sum()
        populated += plan.populated_blocks.sum()
        bgs += plan.block_groups.sum()
        tracts += (t.pop > 0).sum()
    assert blocks == pytest.approx(11_078_297, rel=1e-3)
    assert 1 - populated / blocks == pytest.approx(4_871_270 / 11_078_297, abs=0.015)
    assert bgs / tracts == pytest.approx(217_740 / 73_057, abs=0.15)
    # rural states have far more empty blocks than dense ones
    assert empty_share["WY"] > empty_share["VT"] > empty_share["NJ"] > empty_share["DC"]
    assert empty_share["ND"] > 0.6 and empty_share["DC"] < 0.3
