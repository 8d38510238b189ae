"""Releases on the production spine (``censusdp run --spine optimized``).

Property tests estimate on the spine of random small geographies with random AIAN areas
and places and check, independently of the library's validator: every spine geounit is
the sum of its blocks, the state total is exact on the union of its AIAN and non-AIAN
parts, counts are non-negative integers and the block invariants hold. End-to-end tests
check that ``spine.parquet`` reproduces the noisy measurement file's geounits and that
validation, re-estimation and inference work on a spine release.
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.cli import main
from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import housing_unit_histogram, person_histogram
from censusdp.data.invariants import compute_invariants
from censusdp.data.schema import get_schema
from censusdp.data.spine import bypass_shares
from censusdp.errors import ConfigError
from censusdp.io.budget_files import load_preset
from censusdp.io.cef import read_cef
from censusdp.io.mdf_read import read_mdf_persons
from censusdp.io.nmf_files import read_nmf_rows, read_nmf_table
from censusdp.privacy.budget import Budget, scaled_mechanism
from censusdp.privacy.randomness import RandomSource
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.measure import measure
from censusdp.release.options import ReleaseOptions
from censusdp.release.pipeline import reestimate, run_release
from censusdp.release.spine import geography_for_input, geography_of_run
from censusdp.release.topdown.driver import TopDownOptions, run_topdown
from censusdp.release.validate import validate_run
from profiles import examples
from synth import block_codes, make_cef, write_cef

PL94 = get_schema("pl94")
# the pl94-2020 preset says spine = "optimized" (with single-child bypass)
BUDGET = Budget.from_dict({**load_preset("pl94-2020").to_dict(), "spine": "optimized"})


def _attributes(rng: np.random.Generator, units: dict, aian_rate: float, n_places: int) -> dict:
    """Per-unit ``aian_area`` / ``place`` columns, the same within a block: AIAN areas are
    whole tracts or single blocks, places random clusters of blocks."""
    blocks = np.unique(units["geocode"])
    tracts = np.unique(blocks.astype("U11"))
    aian_tract = rng.random(tracts.size) < aian_rate
    aian_block = aian_tract[np.searchsorted(tracts, blocks.astype("U11"))]
    aian_block |= rng.random(blocks.size) < aian_rate / 4
    codes = np.where(aian_block, rng.choice(["0012", "0345"], blocks.size), "")
    places = np.asarray([""] + [f"{100 * (i + 1):05d}" for i in range(n_places)])
    place = places[rng.integers(0, places.size, blocks.size)]
    at = np.searchsorted(blocks, units["geocode"])
    return {**units, "aian_area": codes[at].astype("U4"), "place": place[at].astype("U5")}


@settings(max_examples=examples(6), deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    fan=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 2), st.integers(1, 6)),
    aian_rate=st.sampled_from([0.0, 0.3, 1.0]),
    n_places=st.integers(0, 3),
)
def test_spine_estimate_sums_blocks_and_holds_the_state_total_on_the_union(
    seed, fan, aian_rate, n_places
):
    rng = np.random.default_rng(seed)
    persons, units = make_cef(rng, block_codes(*fan), gq_rate=0.3)
    units = _attributes(rng, units, aian_rate, n_places)
    tab = Hierarchy.from_blocks(units["geocode"])
    inv = compute_invariants(persons, units, tab)
    geo = geography_for_input("optimized", BUDGET, tab, units, inv)
    h = geo.estimation
    # the spine has one or two State parts; AIAN blocks all sit in the AIAN part
    parts = h.geocodes[1]
    assert 1 <= parts.size <= 2
    spine_codes = geo.spine.codes_of(units["geocode"])
    assert ((np.char.str_len(units["aian_area"]) > 0) == (spine_codes.astype("U1") == "1")).all()
    block_hist = geo.to_estimation(person_histogram(persons, tab, PL94))
    plan = [(m.geolevel, m.query, m.mechanism) for m in BUDGET.measurements()]
    # one state, not the nation: the US level's share is the nation's (not measured here)
    assert geo.nation_outside
    shares = bypass_shares(h, [BUDGET.geolevel_shares[n] for n in h.geolevels.names], top=1)
    unit_shares = geo.unit_shares(BUDGET)
    assert unit_shares is not None and not shares.measured(0).any()
    ms = measure(
        h.aggregate(block_hist), h, PL94, plan, RandomSource.seeded(seed), unit_shares=unit_shares
    )
    # each unit's variance is that of its own share (bypassed units: not measured)
    by_key = {(m.geolevel, m.query): m for m in BUDGET.measurements()}
    for mq in ms:
        li = h.geolevels.index(mq.geolevel)
        planned = by_key[(mq.geolevel, mq.query)]
        for u, v in enumerate(mq.unit_variances()):
            share = shares.share(li, u)
            if share == 0:
                assert v == np.inf and not mq.values[u].any()
            else:
                level = BUDGET.geolevel_shares[mq.geolevel]
                m = scaled_mechanism(planned.mechanism, share / level)
                assert v == m.variance
    est = run_topdown(ms, h, geo.person_bounds(inv), TopDownOptions(group_variable="hhgq"))
    hists = [x.toarray() for x in est.histograms]
    # non-negative integers
    assert all(x.dtype.kind == "i" and (x >= 0).all() for x in hists)
    # every spine geounit is the sum of its blocks
    up = h.aggregate(est.histograms[-1])
    for li in range(h.n_levels - 1):
        assert np.array_equal(np.asarray(up[li].todense()), hists[li]), h.geolevels[li].name
    # the state total is exact on the union of the parts (and at the root)
    assert hists[0].sum() == persons["geocode"].size
    assert hists[1].sum() == persons["geocode"].size
    # back on the tabulation geography: per block GQ and household bounds
    block = geo.to_tabulation(hists[-1])
    groups = PL94.cell_levels("hhgq")
    pop = np.stack([block[:, groups == g].sum(axis=1) for g in range(8)], axis=1)
    assert (pop[:, 1:] >= inv.gq_facilities[:, 1:]).all()
    assert (pop[:, 1:][inv.gq_facilities[:, 1:] == 0] == 0).all()
    assert (pop[inv.housing_units == 0, 0] == 0).all()
    # a spine geounit's code is the prefix of its blocks' codes
    for li in range(1, h.n_levels):
        anc = h.ancestor_index(li)
        width = h.geolevels[li].length
        assert np.array_equal(h.geocodes[li][anc], h.blocks.astype(f"U{width}"))
    assert spine_codes.size == units["geocode"].size


def test_an_unmeasured_us_root_is_estimated_from_the_levels_below_with_or_without_pooling():
    """The US of a one-state input is the nation's (not measured): production's root
    (``pool_root=False``, its own measurements) has none, so it is estimated from the
    measurements below, the same as the pooled root; not from nothing."""
    rng = np.random.default_rng(5)
    persons, units = make_cef(rng, block_codes(1, 2, 2, 3), gq_rate=0.3)
    units = _attributes(rng, units, 0.3, 3)
    tab = Hierarchy.from_blocks(units["geocode"])
    inv = compute_invariants(persons, units, tab)
    geo = geography_for_input("optimized", BUDGET, tab, units, inv)
    h = geo.estimation
    plan = [(m.geolevel, m.query, m.mechanism) for m in BUDGET.measurements()]
    hist = h.aggregate(geo.to_estimation(person_histogram(persons, tab, PL94)))
    ms = measure(hist, h, PL94, plan, RandomSource.seeded(5), unit_shares=geo.unit_shares(BUDGET))
    assert not any(mq.measured_units().any() for mq in ms if mq.geolevel == "US")
    bounds = geo.person_bounds(inv)
    pooled = run_topdown(ms, h, bounds, TopDownOptions(group_variable="hhgq"))
    own = run_topdown(ms, h, bounds, TopDownOptions(group_variable="hhgq", pool_root=False))
    for a, b in zip(pooled.histograms, own.histograms, strict=True):
        assert (a != b).nnz == 0
    assert pooled.histograms[0].sum() == persons["geocode"].size


def test_person_bounds_fix_a_single_part_state_and_free_two_parts():
    rng = np.random.default_rng(3)
    persons, units = make_cef(rng, block_codes(2, 2, 1, 4), gq_rate=0.2)
    tab = Hierarchy.from_blocks(units["geocode"])
    inv = compute_invariants(persons, units, tab)
    for rate, exact_parts in ((0.0, True), (1.0, True), (0.5, False)):
        u = _attributes(np.random.default_rng(7), units, rate, 1)
        if rate == 0.5:  # exactly one AIAN tract
            first = np.char.startswith(u["geocode"], block_codes(2, 2, 1, 4)[0][:11])
            u["aian_area"] = np.where(first, "0012", "").astype("U4")
        geo = geography_for_input("optimized", BUDGET, tab, u, inv)
        b = geo.person_bounds(inv)
        assert b[0].total_lower[0] == b[0].total_upper[0] == persons["geocode"].size
        n_parts = geo.estimation.n_units(1)
        assert n_parts == (1 if exact_parts else 2)
        assert (b[1].total_lower == b[1].total_upper).all() == exact_parts
        if exact_parts:
            assert b[1].total_lower[0] == persons["geocode"].size
        # two parts: each bounded by its own total (both have housing units and facilities)
        assert (b[1].total_lower <= geo.part_population).all()
        assert (geo.part_population <= b[1].total_upper).all()
        assert geo.part_population.sum() == persons["geocode"].size


def _two_part_state(gq_in_aian: bool):
    """One state: an AIAN tract (housing units only, unless ``gq_in_aian``) and a
    non-AIAN tract with housing units and group quarters."""
    rng = np.random.default_rng(21)
    codes = block_codes(1, 2, 1, 4)
    persons, units = make_cef(rng, codes, gq_rate=1.0)
    aian_tract = codes[0][:11]
    in_aian = np.char.startswith(units["geocode"], aian_tract)
    if not gq_in_aian:  # drop the AIAN tract's facilities and their persons
        drop = in_aian & (units["gqtype"] > 0)
        dropped = units["unit_id"][drop]
        keep_p = ~np.isin(persons["unit_id"], dropped)
        persons = {k: v[keep_p] for k, v in persons.items()}
        units = {k: v[~drop] for k, v in units.items()}
        in_aian = in_aian[~drop]
    units = {
        **units,
        "aian_area": np.where(in_aian, "5512", "").astype("U4"),  # an OTSA
        "place": np.full(units["geocode"].size, "", dtype="U5"),
    }
    tab = Hierarchy.from_blocks(units["geocode"])
    inv = compute_invariants(persons, units, tab)
    return persons, units, tab, inv, aian_tract


@pytest.mark.parametrize("gq_in_aian", [False, True])
def test_each_state_part_is_bounded_by_its_own_total(gq_in_aian):
    """Production's State-level hhgq_total_lb / hhgq_total_ub with each AIAN / non-AIAN
    part's own ``tot``: a part with housing units only gets its total exactly, a part
    with facilities bounds each GQ type by its total less the other types' facilities."""
    persons, units, tab, inv, aian_tract = _two_part_state(gq_in_aian)
    geo = geography_for_input("optimized", BUDGET, tab, units, inv)
    h = geo.estimation
    assert h.geocodes[1].tolist() == ["050", "150"]
    in_aian = np.char.startswith(persons["geocode"], aian_tract)
    truth = np.asarray([(~in_aian).sum(), in_aian.sum()])
    assert geo.part_population.tolist() == truth.tolist()
    b = geo.person_bounds(inv)[1]
    for part, inside in ((0, ~in_aian), (1, in_aian)):
        u_in = np.char.startswith(units["geocode"], aian_tract) == bool(part)
        n = np.bincount(units["gqtype"][u_in], minlength=8)
        n[1:] = np.bincount(units["gqtype"][u_in & units["occupied"]], minlength=8)[1:]
        facilities = n[1:].sum()
        tot = int(truth[part])
        for g in range(8):
            others = n.sum() - n[g]
            least = n[g] if g else 0
            assert b.group_lower[part, g] == (least if others > 0 else tot), (part, g)
            want_hi = tot - (facilities - least) if n[g] > 0 else 0
            assert b.group_upper[part, g] == want_hi, (part, g)
        # the part's true population by group lies within its bounds
        pop = np.bincount(persons["hhgq"][inside], minlength=8)
        assert (b.group_lower[part] <= pop).all() and (pop <= b.group_upper[part]).all()
    exact = b.total_lower == b.total_upper
    assert exact.tolist() == [False, not gq_in_aian]
    if not gq_in_aian:
        assert b.total_lower[1] == truth[1] and b.group_lower[1, 0] == truth[1]
    # without the parts' totals (a release that did not record them) the parts are free
    from dataclasses import replace

    free = replace(geo, part_population=None).person_bounds(inv)[1]
    assert not (free.total_lower == free.total_upper).any()
    assert np.isinf(free.group_upper[:, 0]).all()


@pytest.fixture(scope="module")
def spine_input(tmp_path_factory):
    rng = np.random.default_rng(11)
    persons, units = make_cef(rng, block_codes(2, 2, 2, 3), gq_rate=0.3)
    units = _attributes(rng, units, 0.3, 3)
    return write_cef(tmp_path_factory.mktemp("spine_cef"), persons, units)


@pytest.fixture(scope="module")
def spine_run(spine_input, tmp_path_factory):
    out = tmp_path_factory.mktemp("spine_run") / "run"
    run_release(
        spine_input,
        out,
        ReleaseBudget(BUDGET, load_preset("pl94-2020-units")),
        ReleaseOptions(seed=4),
    )
    return out


def _nmf_codes(path, level):
    t = read_nmf_rows(path, columns=["geolevel", "geocode"]).to_pydict()
    return {str(c) for c, lv in zip(t["geocode"], t["geolevel"], strict=True) if lv == level}


def test_spine_parquet_reproduces_the_nmf_geounits(spine_run, spine_input):
    manifest = json.loads((spine_run / "manifest.json").read_text())
    assert manifest["spine"]["kind"] == "optimized"
    assert manifest["spine"]["rules"]["fanout_cutoff"] == 12
    # bypass moves shares, not budget: the release's privacy loss is the budget's
    from censusdp.privacy.release_budget import release_privacy

    whole = release_privacy(BUDGET, load_preset("pl94-2020-units"))
    assert manifest["rho_exact"] == whole["rho_exact"]
    assert manifest["epsilon"] == whole["epsilon"] and manifest["delta"] == whole["delta"]
    assert manifest["validation"]["ok"] and manifest["spine_validation"]["ok"]
    spine = pq.read_table(spine_run / "spine.parquet").to_pydict()
    cef = read_cef(spine_input)
    assert spine["geocode"] == sorted(set(cef.units["geocode"].tolist()))
    geo = geography_of_run(spine_run, manifest, Hierarchy.from_blocks(cef.units["geocode"]))
    h = geo.estimation
    assert manifest["spine"]["bypass"]["applied"] is True
    # the state parts' totals, which bound their groups, are recorded and read back
    in_aian = np.isin(cef.persons["geocode"], cef.units["geocode"][cef.units["aian_area"] != ""])
    truth = {"050": int((~in_aian).sum()), "150": int(in_aian.sum())}
    assert manifest["spine"]["state_part_population"] == {
        k: v for k, v in truth.items() if k in h.geocodes[1].tolist()
    }
    assert geo.part_population.tolist() == [truth[c] for c in h.geocodes[1].tolist()]
    # each run on its own spine: the unit run's in spine_units.parquet (manifest spine.units)
    assert manifest["spine"]["units"]["file"] == "spine_units.parquet"
    assert manifest["spine"]["units"]["rules"]["gq_entities"] is False
    for run, budget, g, spine_file in (
        ("noisy_measurements.parquet", BUDGET, geo, "spine.parquet"),
        ("noisy_measurements_units.parquet", load_preset("pl94-2020-units"), geo.units, None),
    ):
        h = g.estimation
        if spine_file is None:
            spine_file = manifest["spine"]["units"]["file"]
        spine = pq.read_table(spine_run / spine_file).to_pydict()
        shares = bypass_shares(h, [budget.geolevel_shares[n] for n in h.geolevels.names], top=1)
        assert _nmf_codes(spine_run / run, "US") == set()  # the nation's share, not measured
        for li, (name, _) in enumerate(manifest["spine"]["geolevels"]):
            if li == 0:
                continue
            # every geounit the spine file names, except the bypassed single children
            measured = set(h.geocodes[li][shares.measured(li)].tolist())
            assert _nmf_codes(spine_run / run, name) == measured, (run, name)
            assert measured <= set(spine[name])
            rec = manifest["spine"] if g is geo else manifest["spine"]["units"]
            n_bypassed = rec["bypass"]["single_children"].get(name, 0)
            assert len(set(spine[name])) - len(measured) == n_bypassed
    # the NMF's state parts are AIAN flag + state FIPS; blocks end with their geocode
    assert all(len(c) == 3 and c[1:] == "50" for c in spine["State"])
    assert all(c.endswith(g) for c, g in zip(spine["Block"], spine["geocode"], strict=True))
    # the MDF stays on tabulation geocodes, and the state total is exact
    mdf = read_mdf_persons(spine_run / "mdf_persons.parquet")
    assert mdf["geocode"].size == cef.n_persons
    assert set(mdf["geocode"].tolist()) <= set(spine["geocode"])


def test_the_unit_run_is_measured_on_its_own_spine(spine_run, spine_input):
    """Production's US and PR unit certificates set ``ignore_gqs_in_block_groups = True``
    (the persons' set False): the unit run's block groups ignore the GQ types of a block.
    The units NMF's block groups must be those of that spine."""
    from dataclasses import replace

    from censusdp.data.invariants import compute_invariants
    from censusdp.data.spine import build_spine
    from censusdp.release.spine import block_attributes

    cef = read_cef(spine_input)
    tab = Hierarchy.from_blocks(cef.units["geocode"])
    inv = compute_invariants(cef.persons, cef.units, tab)
    attrs, _ = block_attributes(cef.units, tab, inv)
    manifest = json.loads((spine_run / "manifest.json").read_text())
    persons_rules = geography_of_run(spine_run, manifest, tab).spine.rules
    assert persons_rules.gq_entities  # the persons' spine: GQ combinations are entities
    unit_spine = build_spine(tab.blocks, attrs, replace(persons_rules, gq_entities=False))
    h = unit_spine.hierarchy
    units_budget = load_preset("pl94-2020-units")
    shares = bypass_shares(h, [units_budget.geolevel_shares[n] for n in h.geolevels.names])
    li = h.geolevels.index("BlockGroup")
    want = set(h.geocodes[li][shares.measured(li)].tolist())
    person_bgs = set(geography_of_run(spine_run, manifest, tab).estimation.geocodes[li].tolist())
    assert want != person_bgs  # the input's GQ facilities make the two spines differ
    assert _nmf_codes(spine_run / "noisy_measurements_units.parquet", "BlockGroup") == want


def test_the_unit_spine_is_built_without_gq_entities_and_recorded_with_a_unit_run(tmp_path):
    """The unit run's spine: the persons' rules without GQ entities (production's unit
    run), the same state parts, counties and tracts; its block order mapped block by
    block; written and recorded only for a release with a unit run."""
    from censusdp.release.spine import unit_rules

    rng = np.random.default_rng(11)
    persons, units = make_cef(rng, block_codes(2, 2, 2, 3), gq_rate=0.3)
    units = _attributes(rng, units, 0.3, 3)
    tab = Hierarchy.from_blocks(units["geocode"])
    inv = compute_invariants(persons, units, tab)
    geo = geography_for_input("optimized", BUDGET, tab, units, inv)
    assert geo.spine.rules.gq_entities and geo.unit_spine.rules == unit_rules(geo.spine.rules)
    assert geo.for_run("persons") is geo and geo.for_run("units") is geo.units
    h, uh = geo.estimation, geo.units.estimation
    for level in ("US", "State", "County", "Tract"):
        li = h.geolevels.index(level)
        assert h.geocodes[li].tolist() == uh.geocodes[li].tolist()
    bg = h.geolevels.index("BlockGroup")
    assert h.n_units(bg) > uh.n_units(bg)  # GQ combinations no longer split block groups
    # the persons' block order -> the unit run's, through the tabulation order
    rows = np.arange(tab.blocks.size)
    assert np.array_equal(geo.to_estimation(rows)[geo.unit_order()], geo.units.to_estimation(rows))
    assert np.array_equal(geo.units.to_tabulation(geo.units.to_estimation(rows)), rows)
    units_budget = load_preset("pl94-2020-units")
    rec = geo.record(BUDGET, units_budget)
    assert rec["units"]["rules"]["gq_entities"] is False
    assert rec["units"]["geounits"]["BlockGroup"] == uh.n_units(bg)
    assert "units" not in geo.record(BUDGET)
    (tmp_path / "with").mkdir()
    geo.write(tmp_path / "with", with_units=True)
    (tmp_path / "without").mkdir()
    geo.write(tmp_path / "without", with_units=False)
    assert sorted(p.name for p in (tmp_path / "with").iterdir()) == [
        "spine.parquet",
        "spine_units.parquet",
    ]
    assert [p.name for p in (tmp_path / "without").iterdir()] == ["spine.parquet"]
    # the tabulation hierarchy: one geography for both runs
    flat = geography_for_input("tabulation", BUDGET, tab, units, inv)
    assert flat.units is flat and flat.unit_order() is None


def test_the_unit_nmf_geoids_come_from_the_unit_spine(spine_run, tmp_path):
    """``Release.nmf(units=True)`` names each unit geounit by the unit run's own spine
    (``spine_units.parquet``); a release made before it had one, by ``spine.parquet``."""
    import shutil

    from censusdp.api import Release
    from censusdp.io.rundir import RunDir

    assert RunDir(spine_run).run_spine_file("units").name == "spine_units.parquet"
    assert RunDir(spine_run).run_spine_file("persons").name == "spine.parquet"
    t = Release.open(spine_run).nmf("BlockGroup", units=True).to_pydict()
    spine = pq.read_table(spine_run / "spine_units.parquet").to_pydict()
    assert set(t["geocode"]) <= set(spine["BlockGroup"])
    counties = Release.open(spine_run).nmf("County", units=True).to_pydict()
    assert all(g is not None and len(g) == 5 for g in counties["GEOID"])
    old = tmp_path / "old"
    shutil.copytree(spine_run, old)
    (old / "spine_units.parquet").unlink()
    assert RunDir(old).run_spine_file("units").name == "spine.parquet"


def test_a_spine_release_validates_reestimates_and_infers(spine_run, tmp_path, capsys):
    assert validate_run(spine_run).ok
    assert main(["validate", str(spine_run)]) == 0
    again = tmp_path / "again"
    m = reestimate(spine_run, again)
    assert m["spine"]["kind"] == "optimized" and m["validation"]["ok"]
    assert (again / "spine.parquet").is_file()
    assert pq.read_table(again / "spine.parquet").equals(pq.read_table(spine_run / "spine.parquet"))
    # the unit run's own spine is carried over as it was measured
    units_spine = pq.read_table(spine_run / "spine_units.parquet")
    assert pq.read_table(again / "spine_units.parquet").equals(units_spine)
    assert (
        m["spine"]["units"]
        == json.loads((spine_run / "manifest.json").read_text())["spine"]["units"]
    )
    # per-geounit variances (bypass): the GLS reads each unit's own variance
    assert main(["infer", str(spine_run), "--out", str(tmp_path / "inf"), "--quiet"]) == 0
    est = pq.read_table(tmp_path / "inf" / "estimates.parquet")
    spine = pq.read_table(spine_run / "spine.parquet").to_pydict()
    lv = np.asarray(est.column("geolevel").to_numpy(zero_copy_only=False)).astype(str)
    codes = np.asarray(est.column("geocode").to_numpy(zero_copy_only=False)).astype(str)
    assert set(codes[lv == "BlockGroup"]) == set(spine["BlockGroup"])
    # every geounit is estimated, the bypassed ones too, with the invariant total exact
    manifest = json.loads((spine_run / "manifest.json").read_text())
    for name, count in manifest["spine"]["geounits"].items():
        assert len(set(codes[lv == name])) == count, name
    # which tabulation geounits are exactly one spine geounit (their estimate is theirs)
    tab = json.loads((tmp_path / "inf" / "manifest.json").read_text())["tabulation_geounits"]
    assert "covariance" in tab["note"]
    for name, width in (("County", 5), ("Tract", 11), ("BlockGroup", 12)):
        spine_of_tab: dict = {}
        tab_of_spine: dict = {}
        for g, code in zip(spine["geocode"], spine[name], strict=True):
            spine_of_tab.setdefault(g[:width], set()).add(code)
            tab_of_spine.setdefault(code, set()).add(g[:width])
        same = sum(
            1
            for t, codes_ in spine_of_tab.items()
            if len(codes_) == 1 and tab_of_spine[next(iter(codes_))] == {t}
        )
        rec = tab["levels"][name]
        assert rec == {
            "tabulation_geounits": len(spine_of_tab),
            "estimated_as_one_spine_geounit": same,
        }, name
    _check_unit_lines_on_the_persons_geounits(est, spine, spine_run)


def _check_unit_lines_on_the_persons_geounits(est, spine, spine_run):
    """The unit GLS (on the unit run's own spine) reported at the persons' geounits: a
    geounit's H1 estimates are the sums of its blocks' (GLS estimates add up), the housing
    units of every block are its invariant, and a persons' block group that is not one
    of the unit run's gets a finite sd from the unit tree's covariance (positive where
    it has housing units)."""
    d = est.to_pydict()
    lv, code, q = (np.asarray(d[k]).astype(str) for k in ("geolevel", "geocode", "query"))
    value, sd = np.asarray(d["estimate"]), np.asarray(d["sd"])
    block_code = np.asarray(spine["Block"])
    inv = pq.read_table(spine_run / "invariants.parquet").to_pydict()
    hu = dict(zip(inv["geocode"], inv["housing_units"], strict=True))
    sel = (lv == "Block") & (q == "H1_001N")
    assert sel.sum() == block_code.size
    for c, v in zip(code[sel], value[sel], strict=True):
        assert v == pytest.approx(hu[c[-16:]], abs=1e-6)
    units_bgs = set(
        pq.read_table(spine_run / "spine_units.parquet").column("BlockGroup").to_pylist()
    )
    for line in ("H1_001N", "H1_002N"):
        blocks = {
            c: v
            for c, v in zip(
                code[(lv == "Block") & (q == line)],
                value[(lv == "Block") & (q == line)],
                strict=True,
            )
        }
        for name in ("State", "County", "Tract", "BlockGroup"):
            at = (lv == name) & (q == line)
            col = np.asarray(spine[name])
            for c, v in zip(code[at], value[at], strict=True):
                want = sum(blocks[b] for b in block_code[col == c])
                assert v == pytest.approx(want, abs=1e-6), (line, name, c)
    other = (lv == "BlockGroup") & (q == "H1_002N") & ~np.isin(code, list(units_bgs))
    assert other.any()  # the input's GQ facilities make the two spines' block groups differ
    housing = dict(
        zip(
            code[(lv == "BlockGroup") & (q == "H1_001N")],
            value[(lv == "BlockGroup") & (q == "H1_001N")],
            strict=True,
        )
    )
    assert np.isfinite(sd[other]).all() and (sd[other] >= 0).all()
    # where there are housing units, their occupancy is uncertain
    has_units = np.asarray([housing[c] > 0 for c in code[other]])
    assert has_units.any() and (sd[other][has_units] > 0).all()


def test_a_tampered_spine_file_fails_validation(spine_run, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(spine_run, copy)
    t = pq.read_table(copy / "spine.parquet").to_pydict()
    t["BlockGroup"] = [c[:-1] + ("1" if c[-1] != "1" else "2") for c in t["BlockGroup"]]
    import pyarrow as pa

    pq.write_table(pa.table(t), copy / "spine.parquet")
    report = validate_run(copy)
    assert not report.ok
    assert any("spine.parquet" in f for f in report.failures())


def test_a_tampered_or_missing_unit_spine_fails_validation_in_one_line(spine_run, tmp_path):
    """The unit NMF is checked against ``spine_units.parquet``: a block moved to another
    unit block group fails validation; a missing file or a malformed ``spine.units``
    entry is one line naming it."""
    import shutil

    import pyarrow as pa

    from censusdp.errors import InputError

    copy = tmp_path / "copy"
    shutil.copytree(spine_run, copy)
    t = pq.read_table(copy / "spine_units.parquet").to_pydict()
    t["BlockGroup"] = [c[:-1] + ("1" if c[-1] != "1" else "2") for c in t["BlockGroup"]]
    pq.write_table(pa.table(t), copy / "spine_units.parquet")
    report = validate_run(copy)
    assert not report.ok
    assert any("spine_units.parquet" in f for f in report.failures())
    manifest = json.loads((spine_run / "manifest.json").read_text())
    tab = Hierarchy.from_blocks(read_cef_units(spine_run))
    (copy / "spine_units.parquet").unlink()
    with pytest.raises(InputError, match="spine_units.parquet: missing file"):
        geography_of_run(copy, manifest, tab)
    bad = {**manifest, "spine": {**manifest["spine"], "units": "spine_units.parquet"}}
    with pytest.raises(InputError, match="spine.units must be an object"):
        geography_of_run(spine_run, bad, tab)


def test_input_without_block_attributes_falls_back_to_tabulation(tmp_path):
    rng = np.random.default_rng(2)
    persons, units = make_cef(rng, block_codes(1, 2, 2, 3), gq_rate=0.2)
    cef = write_cef(tmp_path / "cef", persons, units)
    m = run_release(
        cef, tmp_path / "run", ReleaseBudget(BUDGET), ReleaseOptions(seed=1, postprocess="none")
    )
    assert m["spine"]["kind"] == "tabulation"
    assert "no block attributes" in m["spine"]["note"]
    assert not (tmp_path / "run" / "spine.parquet").exists()
    # one state on the tabulation hierarchy: the US is the nation's, as on the spine
    assert m["spine"]["nation"]["measured"] is False
    assert _nmf_codes(tmp_path / "run" / "noisy_measurements.parquet", "US") == set()
    assert _nmf_codes(tmp_path / "run" / "noisy_measurements.parquet", "State") == {"50"}


def test_spine_choice_flag_and_refusals(spine_input, tmp_path, capsys):
    m = run_release(
        spine_input,
        tmp_path / "tab",
        ReleaseBudget(BUDGET),
        ReleaseOptions(seed=1, postprocess="none", spine="tabulation"),
    )
    assert m["spine"]["kind"] == "tabulation" and set(m["spine"]) == {"kind", "nation"}
    assert m["spine"]["nation"]["measured"] is False  # one state: the US is the nation's
    assert _nmf_codes(tmp_path / "tab" / "noisy_measurements.parquet", "US") == set()
    assert _nmf_codes(tmp_path / "tab" / "noisy_measurements.parquet", "State") == {"50"}
    with pytest.raises(ConfigError, match="--spine must be one of"):
        run_release(spine_input, tmp_path / "x", ReleaseBudget(BUDGET), ReleaseOptions(spine="opt"))
    # a budget without the spine's levels (the DDP's, with a tract group)
    ddp = load_preset("ddp-2010")
    assert "Tract_Group" in ddp.geolevel_names
    other = Budget(
        schema="dhc-lite",
        mechanism=ddp.mechanism,
        total=ddp.total,
        delta=ddp.delta,
        geolevels=ddp.geolevels,
        geolevel_shares=ddp.geolevel_shares,
        query_shares={g: {"detailed": Fraction(1)} for g in ddp.geolevel_names},
    )
    with pytest.raises(ConfigError, match="geolevels"):
        run_release(
            spine_input, tmp_path / "y", ReleaseBudget(other), ReleaseOptions(spine="optimized")
        )
    rc = main(
        [
            "run",
            "--from-measurements",
            str(tmp_path / "tab"),
            "--out",
            str(tmp_path / "z"),
            "--spine",
            "optimized",
            "--quiet",
        ]
    )
    assert rc == 2
    assert "--spine applies to a fresh run" in capsys.readouterr().err


def test_several_states_with_a_split_state_release_and_validate(tmp_path):
    """Refused before grouped child totals; now each state's total holds on its parts
    (tests/release/pipeline/test_split_states.py checks more)."""
    rng = np.random.default_rng(5)
    codes = block_codes(1, 2, 1, 3) + [c.replace("50", "33", 1) for c in block_codes(1, 2, 1, 3)]
    persons, units = make_cef(rng, codes, gq_rate=0.0)
    units = {
        **units,
        "aian_area": np.where(
            np.char.startswith(units["geocode"], "50001000001"), "0012", ""
        ).astype("U4"),
        "place": np.full(units["geocode"].size, "", dtype="U5"),
    }
    cef = write_cef(tmp_path / "cef", persons, units)
    rc = main(
        ["run", "--input", str(cef), "--out", str(tmp_path / "run"), "--seed", "1", "--quiet"]
        + ["--spine", "optimized"]
    )
    assert rc == 0
    parts = json.loads((tmp_path / "run" / "manifest.json").read_text())["spine"]
    assert set(parts["state_part_population"]) == {"033", "050", "150"}
    report = validate_run(tmp_path / "run")
    assert report.ok and report.checks["state_totals_on_parts"]["ok"]
    released = read_mdf_persons(tmp_path / "run" / "mdf_persons.parquet")
    states, counts = np.unique(np.asarray(released["geocode"]).astype("U2"), return_counts=True)
    truth = np.unique(persons["geocode"].astype("U2"), return_counts=True)
    assert states.tolist() == truth[0].tolist() and counts.tolist() == truth[1].tolist()


def test_units_histogram_moves_with_the_blocks():
    rng = np.random.default_rng(9)
    persons, units = make_cef(rng, block_codes(2, 2, 2, 3))
    units = _attributes(rng, units, 0.5, 2)
    tab = Hierarchy.from_blocks(units["geocode"])
    inv = compute_invariants(persons, units, tab)
    geo = geography_for_input("optimized", BUDGET, tab, units, inv)
    hu = housing_unit_histogram(units, tab)
    moved = geo.to_estimation(hu)
    assert np.array_equal(geo.to_tabulation(moved).toarray(), hu.toarray())
    sp_inv = geo.invariants(inv)
    assert np.array_equal(sp_inv.housing_units, inv.housing_units[geo.spine.order])
    assert np.array_equal(sp_inv.blocks, geo.estimation.blocks)
    # the spine block of a geocode is the block the permutation put there
    assert np.array_equal(
        np.asarray([c[-16:] for c in geo.estimation.blocks.tolist()]), tab.blocks[geo.spine.order]
    )


def test_evaluate_checks_a_spine_release_noise_on_its_spine_geounits(spine_run, spine_input):
    from censusdp.evaluate import EvaluateOptions, evaluate

    result = evaluate(spine_input, spine_run, EvaluateOptions(district_draws=1))
    nmf = result["noisy_measurements"]["persons"]["by_level"]
    # the truth was found for every spine geounit: the realised noise has a ratio of
    # empirical to stated variance (a truth lookup on the wrong geounits has none or a
    # huge one), at the spine's block groups too
    spine = json.loads((spine_run / "manifest.json").read_text())["spine"]
    for level in ("State", "County", "BlockGroup", "Block"):
        if level not in nmf:  # every geounit of the level is a bypassed single child
            assert spine["bypass"]["single_children"][level] == spine["geounits"][level]
            continue
        stats = nmf[level]
        assert all(q["empirical"]["n"] == q["n"] for q in stats.values()), level
    widest = max(nmf["BlockGroup"].values(), key=lambda q: q["n"])
    assert widest["n"] > 1000 and 0.7 < widest["empirical"]["variance_ratio"] < 1.4


def test_budget_files_name_the_spine_and_reject_an_unknown_one():
    from censusdp.privacy.budget import Budget, BudgetConfigError
    from censusdp.privacy.budget_config import budget_from_mapping

    assert load_preset("pl94-2020").spine == "optimized"
    assert load_preset("pl94-2020-pr-units").spine is None
    assert load_preset("dhc-lite-demo").spine is None
    d = BUDGET.to_dict()
    assert d["spine"] == "optimized" and Budget.from_dict(d).spine == "optimized"
    assert BUDGET.scaled(rho="1").spine == "optimized"
    doc = {
        "schema": "pl94",
        "mechanism": "discrete_gaussian",
        "rho": "1",
        "spine": "opt_spine",
        "geolevels": [
            {"name": "US", "length": 0, "share": "1/2", "queries": {"total": "1"}},
            {"name": "Block", "length": 16, "share": "1/2", "queries": {"total": "1"}},
        ],
    }
    with pytest.raises(BudgetConfigError, match="opt_spine"):
        budget_from_mapping(doc, "b.toml")
    doc["spine"] = "tabulation"
    assert budget_from_mapping(doc, "b.toml").spine == "tabulation"


def _rewrite_nmf(src, dst, change, level, unit):
    """Copy the release ``src`` to ``dst`` with the rows of the person NMF's part that
    covers geounit ``unit`` (its index) of ``level`` changed by ``change`` (a function of
    the part's whole table) and the index's row counts made to agree; the other parts
    and the manifest are left as they are."""
    import shutil

    import pyarrow as pa

    shutil.copytree(src, dst)
    nmf = dst / "noisy_measurements.parquet"
    index = json.loads((nmf / "_parts.json").read_text())
    changed = 0
    for entry in index["parts"]:
        if entry["geolevel"] == level and entry["start"] <= unit < entry["stop"]:
            t = change(read_nmf_table(nmf / entry["file"]), pa)  # seven columns, as before
            pq.write_table(t, nmf / entry["file"])
            index["rows"] += t.num_rows - entry["rows"]
            entry["rows"] = t.num_rows  # so that only the rows themselves are wrong
            changed += 1
    (nmf / "_parts.json").write_text(json.dumps(index))
    assert changed == 1
    return dst


def test_validate_checks_each_unit_variance_against_its_share(spine_run, tmp_path):
    """A row whose variance is not its unit's share's (e.g. the geolevel's where the unit
    took a single child's share) fails; so do rows at a bypassed unit."""
    manifest = json.loads((spine_run / "manifest.json").read_text())
    report = validate_run(spine_run)
    assert "bypassed" in report.checks["nmf_persons"]["detail"]
    geo = geography_of_run(spine_run, manifest, Hierarchy.from_blocks(read_cef_units(spine_run)))
    h = geo.estimation
    shares = geo.unit_shares(BUDGET)
    # a unit that took its single child's share: its variance is below its level's
    li = next(
        i for i in range(h.n_levels) if (shares.numerators[i] > shares.level_numerators[i]).any()
    )
    u = int(np.flatnonzero(shares.numerators[li] > shares.level_numerators[li])[0])
    level, code = h.geolevels[li].name, str(h.geocodes[li][u])
    level_var = {m.query: m.variance for m in BUDGET.measurements() if m.geolevel == level}

    def wrong_variance(t, pa):
        lv = np.asarray(t.column("geolevel").to_numpy(zero_copy_only=False)).astype(str)
        gc = np.asarray(t.column("geocode").to_numpy(zero_copy_only=False)).astype(str)
        qu = np.asarray(t.column("query").to_numpy(zero_copy_only=False)).astype(str)
        var = t.column("variance").to_numpy().copy()
        at = np.flatnonzero((lv == level) & (gc == code))
        want = np.asarray([level_var[q] for q in qu[at]])
        assert at.size and (var[at] < want).all()  # more budget, less noise
        var[at[0]] = level_var[qu[at[0]]]  # the geolevel's variance, not the unit's share's
        return t.set_column(t.schema.get_field_index("variance"), "variance", pa.array(var))

    bad = validate_run(_rewrite_nmf(spine_run, tmp_path / "var", wrong_variance, level, u))
    detail = bad.checks["nmf_persons"]["detail"]
    assert not bad.checks["nmf_persons"]["ok"] and "variance" in detail and code in detail

    # rows at a bypassed unit (a copy of its parent's rows under its code)
    bl = next(i for i in range(1, h.n_levels) if not shares.measured(i).all())
    b = int(np.flatnonzero(~shares.measured(bl))[0])
    b_code = str(h.geocodes[bl][b])
    p_code = str(h.geocodes[bl - 1][h.parent[bl][b]])

    def extra_rows(t, pa):
        # the part of the bypassed unit may hold no rows: copy the parent's from the NMF
        full = read_nmf_rows(spine_run / "noisy_measurements.parquet")
        lv = np.asarray(full.column("geolevel").to_numpy(zero_copy_only=False)).astype(str)
        gc = np.asarray(full.column("geocode").to_numpy(zero_copy_only=False)).astype(str)
        sel = np.flatnonzero((lv == h.geolevels[bl - 1].name) & (gc == p_code))
        if sel.size == 0:
            sel = np.flatnonzero(lv != h.geolevels[bl - 1].name)[:1]
        add = full.take(pa.array(sel)).to_pydict()
        add["geolevel"] = [h.geolevels[bl].name] * len(sel)
        add["geocode"] = [b_code] * len(sel)
        plain = t.cast(
            pa.schema(
                [
                    pa.field(f.name, pa.string()) if pa.types.is_dictionary(f.type) else f
                    for f in full.schema  # an empty part's columns are typed as strings
                ]
            )
        )
        return pa.concat_tables([plain, pa.table(add, schema=plain.schema)])

    bad = validate_run(
        _rewrite_nmf(spine_run, tmp_path / "rows", extra_rows, h.geolevels[bl].name, b)
    )
    detail = bad.checks["nmf_persons"]["detail"]
    assert not bad.checks["nmf_persons"]["ok"] and "bypassed" in detail and b_code in detail


def read_cef_units(run):
    t = pq.read_table(run / "invariants.parquet", columns=["geocode"])
    return np.asarray(t.column("geocode").to_numpy(zero_copy_only=False)).astype("U16")


def test_error_bars_of_a_spine_release_remeasure_its_spine_with_its_shares(spine_run, monkeypatch):
    """``evaluate`` without truth simulates releases as this one was made: measured on
    the spine's geounits with each geounit's own share (bypassed ones not at all), as
    ``infer``'s AMC does (:mod:`censusdp.infer.amc`), the unit run on its own spine."""
    import censusdp.evaluate.errorbars as eb
    import censusdp.infer.amc as amc

    seen = []
    real = amc.measure

    def spy(levels, hierarchy, schema, plan, source, **kw):
        ms = real(levels, hierarchy, schema, plan, source, **kw)
        seen.append((hierarchy, kw.get("unit_shares"), ms))
        return ms

    monkeypatch.setattr(amc, "measure", spy)
    out = eb.simulate_release_errors(spine_run, simulations=1, seed=2)
    assert out["by_level"]["total_population"]["County"]["mae"] >= 0
    manifest = json.loads((spine_run / "manifest.json").read_text())
    # persons and units, re-releasing the published microdata, then again the rough truth
    # drawn from them (the AMC's default); no second generation: calibration is off
    assert len(seen) == 4
    budgets = (BUDGET, load_preset("pl94-2020-units")) * 2
    for (h, shares, ms), budget in zip(seen, budgets, strict=True):
        assert list(h.geolevels.names) == [n for n, _ in manifest["spine"]["geolevels"]]
        want = bypass_shares(h, [budget.geolevel_shares[n] for n in h.geolevels.names], top=1)
        for li in range(h.n_levels):
            np.testing.assert_array_equal(shares.numerators[li], want.numerators[li])
        for mq in ms:
            li = h.geolevels.index(mq.geolevel)
            assert np.array_equal(mq.measured_units(), want.measured(li))


def test_the_tabulation_us_is_the_nations_below_51_states_and_read_back_as_recorded():
    """On the tabulation hierarchy, fewer than the nation's 51 states leave the US to the
    nation (no share, every other geounit its geolevel's); 51 states measure it; a
    manifest without ``spine.nation`` (an older release) is re-read as measured."""
    budget = load_preset("pl94-2020")
    one = Hierarchy.from_blocks(np.array(block_codes(2, 1, 1, 2)))
    geo = geography_for_input("tabulation", budget, one, {}, None)
    assert geo.nation_outside and geo.spine is None
    shares = geo.unit_shares(budget)
    assert shares is not None and not shares.measured(0).any()
    for li, name in enumerate(one.geolevels.names[1:], start=1):
        want = budget.geolevel_shares[name]
        assert all(shares.share(li, u) == want for u in range(one.n_units(li)))
    record = geo.record(budget)
    assert record["nation"]["measured"] is False and record["nation"]["share"] == "104/4099"
    assert "1 state(s)" in record["nation"]["detail"]
    assert geography_of_run("run", {"spine": record}, one).nation_outside
    assert (
        geography_of_run("run", {"spine": {"kind": "tabulation"}}, one).unit_shares(budget) is None
    )
    fips = [f"{s:02d}" for s in range(1, 52)]
    nation = Hierarchy.from_blocks(
        np.array([f"{s}{c[2:]}" for s in fips for c in block_codes(1, 1, 1, 1)])
    )
    whole = geography_for_input("tabulation", budget, nation, {}, None)
    assert not whole.nation_outside and whole.unit_shares(budget) is None
    assert "nation" not in whole.record(budget)
