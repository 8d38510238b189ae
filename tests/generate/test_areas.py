"""AIAN areas and places / MCDs of the synthetic CEF (the block attributes of the spine).

Plausibility rules (docs/generator.md): AIAN areas are runs of tracts around tracts with an
AIAN majority; in strong-MCD states (production's ``strong_mcd_states``) every block outside
AIAN areas is in a minor civil division; elsewhere places are clusters of consecutive
blocks, denser clusters more often incorporated.
"""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from censusdp.data.spine import (
    PRODUCTION_AIAN_AREAS,
    BlockAttributes,
    aian_category,
    build_spine,
)
from censusdp.generate import _model as m
from censusdp.generate import generate_state, resolve_state
from censusdp.generate._areas import block_entities, plan_aian_areas
from censusdp.generate._tracts import load_tracts
from censusdp.io.cef import read_cef


@pytest.fixture(scope="module")
def sd(tmp_path_factory):
    out = tmp_path_factory.mktemp("sd")
    summary = generate_state("SD", 3, out)
    return summary, read_cef(out)


def _blocks(cef):
    u = cef.units
    geo, first = np.unique(u["geocode"], return_index=True)
    return geo, u["aian_area"][first], u["place"][first]


def test_aian_areas_are_runs_of_tracts_around_aian_majority_tracts():
    tracts = load_tracts(resolve_state("SD"))
    plan = plan_aian_areas(tracts)
    share = np.divide(
        tracts.groups[:, 3], tracts.pop, out=np.zeros(len(tracts)), where=tracts.pop > 0
    )
    core = share >= m.AIAN_CORE_SHARE
    assert core.sum() >= 10
    assert (plan.code[core] != "").all()  # every AIAN-majority tract is in an area
    assert (share[plan.code != ""] >= m.AIAN_FRINGE_SHARE).all()
    assert np.array_equal(plan.fraction[core], np.ones(core.sum()))
    codes = plan.code[plan.code != ""]
    # areas are numbered 0001.. in geocode order, each a run of consecutive tracts
    assert list(dict.fromkeys(codes)) == [f"{k:04d}" for k in range(1, plan.n_areas + 1)]
    for code in np.unique(codes):
        idx = np.flatnonzero(plan.code == code)
        assert np.array_equal(idx, np.arange(idx[0], idx[-1] + 1))
        assert core[idx].any()
    assert 1 <= int(codes.astype(int).max()) <= 4799  # Legal Federally Recognized range
    assert {aian_category(str(c)) for c in codes} == {
        "Legal_Federally_Recognized_American_Indian_Area"
    }


def test_block_entities_keep_aian_blocks_contiguous_and_cover_strong_mcd_states():
    tracts = load_tracts(resolve_state("SD"))
    plan = plan_aian_areas(tracts)
    fringe = np.flatnonzero((plan.code != "") & (plan.fraction < 1))[0]
    tract = tracts.geoid[fringe].decode()
    geo = np.asarray([list(f"{tract}1{b:04d}".encode()) for b in range(1, 41)], dtype=np.uint8)
    pop = np.full(40, 10)
    rng = np.random.default_rng(0)
    aian, place, nxt = block_entities(
        geo, pop, plan, fips="46", state_density=10.0, first_code=7, rng=rng
    )
    inside = aian != ""
    k = int(inside.sum())
    assert k == int(np.ceil(plan.fraction[fringe] * 40 - 1e-9))
    # the inside blocks are a prefix (or, before a core, a suffix) of the tract
    want = np.arange(40) >= 40 - k if plan.at_end[fringe] else np.arange(40) < k
    assert np.array_equal(inside, want)
    named = np.unique(place[place != ""])
    assert nxt == 7 + named.size and (named.size == 0 or named[0] == "00007")
    # a strong-MCD state: every block outside AIAN areas has an MCD, runs are contiguous
    _, place, _ = block_entities(
        geo, pop, plan, fips="50", state_density=10.0, first_code=1, rng=rng
    )
    assert (place[~inside] != "").all()
    for code in np.unique(place[place != ""]):
        idx = np.flatnonzero(place == code)
        assert np.array_equal(idx, np.arange(idx[0], idx[-1] + 1))


def test_denser_clusters_are_more_often_places():
    tracts = load_tracts(resolve_state("SD"))
    plan = plan_aian_areas(tracts)
    geo = np.asarray(
        [list(f"46099000100{g}{b:04d}".encode()) for g in range(1, 10) for b in range(1, 999)],
        dtype=np.uint8,
    )
    n = geo.shape[0]
    rng = np.random.default_rng(1)
    dense = block_entities(
        geo, np.full(n, 50), plan, fips="46", state_density=5.0, first_code=1, rng=rng
    )[1]
    sparse = block_entities(
        geo, np.full(n, 1), plan, fips="46", state_density=5.0, first_code=1, rng=rng
    )[1]
    # p = d / (d + 0.6 D): 0.94 for d = 50, 0.25 for d = 1 (D = 5)
    assert (dense != "").mean() > 0.85
    assert 0.1 < (sparse != "").mean() < 0.4


def test_generated_state_carries_block_attributes_the_spine_splits_on(sd):
    summary, cef = sd
    geo, aian, place = _blocks(cef)
    assert summary.aian_areas >= 5 and summary.aian_blocks == int((aian != "").sum())
    in_aian = np.isin(cef.persons["geocode"], geo[aian != ""])
    assert summary.persons_in_aian_areas == int(in_aian.sum())
    # South Dakota is not a strong-MCD state: some blocks are unincorporated
    assert 0 < (place == "").mean() < 1
    assert 0.4 < summary.persons_in_places / summary.persons < 0.85
    spine = build_spine(geo, BlockAttributes(aian_area=aian, place=place))
    parts = spine.hierarchy.geocodes[1]
    assert list(parts) == ["046", "146"]  # the AIAN and non-AIAN parts of South Dakota
    assert list(spine.state_groups()) == [0, 0]


def test_entities_are_a_deterministic_function_of_the_seed(tmp_path, sd):
    """Same (state, seed): same counts and the same place of every unit (the entities
    draw from their own stream, so persons and units are those the seed gave before
    the columns existed)."""
    summary, cef = sd
    again = generate_state("SD", 3, tmp_path / "again")
    assert again.counts() == summary.counts()
    t = pq.read_table(tmp_path / "again" / "units.parquet", columns=["place"])
    assert np.array_equal(np.asarray(t.column("place").to_pylist()), cef.units["place"])


# -- the seven AIANNHCE categories of production's spine ------------------------------


def test_states_with_other_kinds_of_area_get_their_categories():
    """Where real 2010 geography has them: Oklahoma tribal statistical areas and joint-use
    OTSAs, Alaska Native village statistical areas, Hawaiian home lands, New Mexico joint
    use, New York state reservations, North Carolina state designated tribal statistical
    areas; together every one of production's seven ``aian_areas`` categories."""
    seen: dict[str, set[str]] = {}
    for state in ("OK", "AK", "HI", "NM", "NY", "NC", "SD"):
        plan = plan_aian_areas(load_tracts(resolve_state(state)))
        codes = np.unique(plan.code[plan.code != ""])
        assert codes.size == plan.n_areas
        seen[state] = {aian_category(str(c)) for c in codes}
        assert None not in seen[state]
    assert {
        "Oklahoma_Tribal_Statistical_Area",
        "Joint_Use_Oklahoma_Tribal_Statistical_Area",
    } <= seen["OK"]
    assert "Alaska_Native_Village_Statistical_Area" in seen["AK"]
    assert seen["HI"] == {"Hawaiian_Home_Land"}
    assert "State_Designated_Tribal_Statistical_Area" in seen["NC"]
    assert seen["SD"] == {"Legal_Federally_Recognized_American_Indian_Area"}
    assert set(PRODUCTION_AIAN_AREAS) <= set().union(*seen.values())


@pytest.mark.parametrize(("state", "scale"), [("OK", 0.04), ("AK", 0.2)])
def test_generated_state_aian_parts_follow_production_categories(tmp_path, state, scale):
    """On a generated Oklahoma and Alaska, a block is in its state's AIAN part exactly
    when its AIANNHCE category is one of production's seven; OTSA and ANVSA blocks are."""
    generate_state(state, 1, tmp_path, scale=scale)
    geo, aian, place = _blocks(read_cef(tmp_path))
    category = np.asarray([aian_category(str(c)) or "" for c in aian])
    expected = np.isin(category, PRODUCTION_AIAN_AREAS)
    main = {
        "OK": "Oklahoma_Tribal_Statistical_Area",
        "AK": "Alaska_Native_Village_Statistical_Area",
    }
    assert (category == main[state]).sum() > 10
    spine = build_spine(geo, BlockAttributes(aian_area=aian, place=place))
    part = np.asarray([c[0] for c in spine.unit_codes("State")])
    assert np.array_equal(part == "1", expected)
    assert sorted(spine.hierarchy.geocodes[1]) == ["0" + geo[0][:2], "1" + geo[0][:2]]
