"""The production spine: AIAN split, optimized block groups, tract groups, bypass.

The rules follow Abowd et al. (2021), "Geographic spines in the 2020 Census Disclosure
Avoidance System TopDown algorithm" (secs. 4-5, Algorithms 1-3), as implemented in the
production code's ``optimize_spine.py``. Properties are checked on random geographies
against small independent re-computations (plain Python loops over blocks).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from fractions import Fraction
from math import isqrt

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.data.geography import Hierarchy
from censusdp.data.spine import (
    AIANNHCE_CATEGORIES,
    PRODUCTION_AIAN_AREAS,
    BlockAttributes,
    SpineRules,
    aian_category,
    aian_ranges_of,
    build_spine,
    bypass_shares,
)
from censusdp.errors import GeographyError

# -- random geographies ---------------------------------------------------------------


@st.composite
def geographies(draw):
    """Blocks of 1-2 states, with random AIAN areas, places and GQ types."""
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    blocks = []
    for state in rng.choice(["04", "50", "35"], size=int(rng.integers(1, 3)), replace=False):
        for c in range(int(rng.integers(1, 3))):
            for t in range(int(rng.integers(1, 5))):
                for g in range(int(rng.integers(1, 3))):
                    for b in rng.choice(200, size=int(rng.integers(1, 25)), replace=False):
                        blocks.append(f"{state}{c + 1:03d}{(t + 1) * 100:06d}{g + 1}{b + 1:04d}")
    blocks = np.asarray(blocks)
    rng.shuffle(blocks)
    n = blocks.size
    aian = np.where(
        rng.random(n) < draw(st.sampled_from([0.0, 0.2, 0.6])),
        # 5001 (Hawaiian home land) and 5600 (OTSA) are AIAN areas of production's spine,
        # 8100 (tribal designated) and 9600 (state designated) are not
        rng.choice(["0012", "0450", "5001", "5600", "8100", "9600"], size=n),
        "",
    )
    place = np.where(rng.random(n) < 0.6, rng.choice(["00100", "00250", "47000"], size=n), "")
    gq = (rng.random((n, 8)) < draw(st.sampled_from([0.0, 0.05]))).astype(np.int64)
    gq[:, 0] = 0
    rules = SpineRules(
        fanout_cutoff=draw(st.integers(0, 4)),
        entity_threshold=draw(st.integers(0, 3)),
        optimize_block_groups=draw(st.booleans()),
        tract_groups=draw(st.booleans()),
        gq_entities=draw(st.booleans()),
        aian_split=draw(st.booleans()),
        target_original_block_groups=draw(st.booleans()),
    )
    return blocks, BlockAttributes(aian, place, gq), rules


# production's aian_areas (prod_default.ini) with their rows of etc/AIANNHCE_ranges.csv
_PRODUCTION_AIAN = [(1, 4799), (4800, 4989), (5000, 5499), (6000, 7999), (9000, 9499),
                    (5500, 5899), (5900, 5999)]  # fmt: skip


def _aian_of(code: str) -> bool:
    return code != "" and any(lo <= int(code) <= hi for lo, hi in _PRODUCTION_AIAN)


def _ose_key(i: int, blocks, attrs: BlockAttributes, rules: SpineRules) -> tuple:
    """The block's off-spine-entity intersection, recomputed from the attributes."""
    aian = attrs.aian_area[i] if _aian_of(attrs.aian_area[i]) else ""
    key = [attrs.place[i], aian]
    if rules.target_original_block_groups:
        key.append(blocks[i][:12])
    if rules.gq_entities:
        key.append(tuple((attrs.gq_types[i, 1:] > 0).tolist()))
    return tuple(key)


def _part(i: int, blocks, attrs, rules) -> str:
    flag = rules.aian_split and _aian_of(attrs.aian_area[i])
    return ("1" if flag else "0") + blocks[i][:11]


# -- properties -----------------------------------------------------------------------


@settings(max_examples=60, deadline=None, derandomize=True)
@given(geographies())
def test_every_block_is_in_one_unit_per_level_and_units_nest(geo):
    blocks, attrs, rules = geo
    spine = build_spine(blocks, attrs, rules)
    h = spine.hierarchy
    assert list(h.geolevels.names) == list(rules.level_names)
    # the block codes end with the geocodes, one per block, and every level partitions them
    assert sorted(c[-16:] for c in spine.codes) == sorted(blocks)
    assert np.array_equal(h.blocks, np.sort(spine.codes))
    assert np.array_equal(spine.codes[spine.order], h.blocks)
    for li in range(h.n_levels):
        m = h.membership(li)
        assert np.array_equal(np.asarray(m.sum(axis=0)).ravel(), np.ones(blocks.size))
        units = spine.unit_codes(li)
        assert len(set(units)) == h.n_units(li)
        if li:
            # a block's unit at li lies inside its unit at li - 1
            above = spine.unit_codes(li - 1)
            parent_of = {}
            for u, p in zip(units, above, strict=True):
                assert parent_of.setdefault(u, p) == p
    # nesting seen through the hierarchy: each unit's parent is its ancestor
    for li in range(1, h.n_levels):
        assert np.array_equal(h.parent[li][h.ancestor_index(li)], h.ancestor_index(li - 1))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(geographies())
def test_units_are_homogeneous_in_state_part_county_tract_and_entities(geo):
    blocks, attrs, rules = geo
    spine = build_spine(blocks, attrs, rules)
    pos = {b: i for i, b in enumerate(blocks)}
    idx = np.asarray([pos[c[-16:]] for c in spine.codes])
    names = rules.level_names
    for li, name in enumerate(names):
        if name in ("US", "Block"):
            continue
        seen: dict[str, tuple] = {}
        for code, i in zip(spine.unit_codes(li), idx, strict=True):
            part = _part(i, blocks, attrs, rules)
            want = {
                "State": part[:3],
                "County": part[:6],
                "TractGroup": part[:6],
                "Tract": part,
            }.get(name)
            if name == "BlockGroup":
                want = (part, _ose_key(i, blocks, attrs, rules))
                if not rules.optimize_block_groups:
                    want = (part, blocks[i][11])
            assert seen.setdefault(code, want) == want, (name, code)
    # the AIAN digit of the state part says whether the block is in an AIAN area
    for code, i in zip(spine.codes, idx, strict=True):
        assert code[0] == ("1" if rules.aian_split and _aian_of(attrs.aian_area[i]) else "0")


@settings(max_examples=60, deadline=None, derandomize=True)
@given(geographies())
def test_block_groups_have_production_fanout_and_are_as_few_as_allowed(geo):
    blocks, attrs, rules = geo
    spine = build_spine(blocks, attrs, rules)
    pos = {b: i for i, b in enumerate(blocks)}
    bg_level = rules.level_names.index("BlockGroup")
    per_tract = Counter(_part(i, blocks, attrs, rules) for i in range(blocks.size))
    per_entity = Counter(
        (_part(i, blocks, attrs, rules), _ose_key(i, blocks, attrs, rules))
        for i in range(blocks.size)
    )
    bg_size = Counter(spine.unit_codes(bg_level))
    bgs_in_tract: dict[str, set[str]] = defaultdict(set)
    for code, full in zip(spine.unit_codes(bg_level), spine.codes, strict=True):
        i = pos[full[-16:]]
        tract = _part(i, blocks, attrs, rules)
        bgs_in_tract[tract].add(code)
        if rules.optimize_block_groups:
            # production: a new block group once one holds int(sqrt(n) + cutoff) blocks
            assert bg_size[code] <= isqrt(per_tract[tract]) + rules.fanout_cutoff + 1
    if rules.optimize_block_groups:
        for tract, codes in bgs_in_tract.items():
            cap = isqrt(per_tract[tract]) + rules.fanout_cutoff + 1
            fewest = sum(-(-k // cap) for (t, _), k in per_entity.items() if t == tract)
            assert len(codes) == fewest


@settings(max_examples=60, deadline=None, derandomize=True)
@given(geographies())
def test_tract_groups_stay_in_their_county_part_and_cover_each_tract_once(geo):
    blocks, attrs, rules = geo
    if not rules.tract_groups:
        rules = SpineRules(**{**rules.__dict__, "tract_groups": True})
    spine = build_spine(blocks, attrs, rules)
    tg = spine.unit_codes("TractGroup")
    tract = spine.unit_codes("Tract")
    group_of: dict[str, str] = {}
    for g, t in zip(tg, tract, strict=True):
        assert g[:6] == t[:6]
        assert group_of.setdefault(t, g) == g  # a tract part is in exactly one group
    per_part = Counter(t[:6] for t in set(tract))
    sizes = Counter(group_of.values())
    for g, k in sizes.items():
        n = per_part[g[:6]]
        cutoff = isqrt(n) + rules.fanout_cutoff
        # at most `cutoff` groups of at most `cutoff` tracts are ever merged
        assert k <= cutoff * cutoff


def test_tract_groups_follow_a_place_when_merging_would_split_it():
    """Four tracts, the first two wholly in place A: the OSED of A (the paper's Alg. 1)
    is 1 with groups {1, 2}, {3, 4} and 2 with one group, so the greedy keeps two."""
    blocks, place = [], []
    for t in range(4):
        for b in range(6):
            blocks.append(f"50001{(t + 1) * 100:06d}1{b + 1:04d}")
            place.append("00100" if t < 2 else "")
    rules = SpineRules(tract_groups=True, entity_threshold=1, fanout_cutoff=2)
    spine = build_spine(np.asarray(blocks), BlockAttributes(place=np.asarray(place)), rules)
    groups = {}
    for g, t in zip(spine.unit_codes("TractGroup"), spine.unit_codes("Tract"), strict=True):
        groups.setdefault(g, set()).add(t[-6:])
    assert sorted(map(sorted, groups.values())) == [["000100", "000200"], ["000300", "000400"]]
    # with a threshold above the bound (2), the entity is ignored and tracts merge
    loose = SpineRules(tract_groups=True, entity_threshold=2, fanout_cutoff=2)
    spine = build_spine(np.asarray(blocks), BlockAttributes(place=np.asarray(place)), loose)
    assert spine.hierarchy.n_units(spine.geolevels.index("TractGroup")) == 1


@settings(max_examples=60, deadline=None, derandomize=True)
@given(geographies(), st.lists(st.integers(1, 50), min_size=7, max_size=7))
def test_bypass_keeps_every_path_at_the_total_and_zeroes_only_single_children(geo, weights):
    blocks, attrs, rules = geo
    spine = build_spine(blocks, attrs, rules)
    h = spine.hierarchy
    total = sum(weights[: h.n_levels])
    shares = [Fraction(w, total) for w in weights[: h.n_levels]]
    out = bypass_shares(h, shares)
    path = np.zeros(blocks.size, dtype=object)
    for li in range(h.n_levels):
        path = path + np.asarray([out.share(li, int(u)) for u in h.ancestor_index(li)])
        n_children_of_parent = np.diff(h.child_ptr[li - 1])[h.parent[li]] if li else np.asarray([0])
        assert np.array_equal(out.measured(li), n_children_of_parent != 1)
    assert all(p == 1 for p in path)  # Theorem 3: sum of shares on every path unchanged


def test_bypass_moves_a_chain_of_single_children_to_its_top():
    # one state, one county, one tract with one block group of one block, and a second
    # tract with two blocks: the county's single chain is US -> State -> County
    blocks = ["50001000100" + "10001", "50001000200" + "10001", "50001000200" + "10002"]
    spine = build_spine(np.asarray(blocks), rules=SpineRules(optimize_block_groups=False))
    h = spine.hierarchy
    s = [Fraction(1, 16), Fraction(2, 16), Fraction(3, 16), Fraction(4, 16), Fraction(5, 16)]
    s.append(1 - sum(s))
    out = bypass_shares(h, s)
    assert out.share(0, 0) == s[0] + s[1] + s[2]  # US took State and County
    assert out.share(1, 0) == 0 and out.share(2, 0) == 0
    tract_100 = 0  # first tract: tract -> block group -> block, all single
    assert out.share(3, tract_100) == s[3] + s[4] + s[5]
    assert out.share(4, 0) == 0 and out.share(5, 0) == 0
    # second tract: its only block group (two blocks) gives its share to the tract
    assert out.share(3, 1) == s[3] + s[4]
    assert out.share(4, 1) == 0
    assert out.share(5, 1) == s[5] and out.share(5, 2) == s[5]


def test_aian_parts_of_a_state_form_one_union_group():
    blocks = np.asarray([f"04001000100100{i:02d}" for i in range(1, 5)] + ["35001000100" + "10001"])
    aian = np.asarray(["0012", "", "0012", "", "0012"])
    spine = build_spine(blocks, BlockAttributes(aian_area=aian))
    parts = spine.hierarchy.geocodes[1]
    assert list(parts) == ["004", "104", "135"]
    assert list(spine.state_groups()) == [0, 0, 1]
    # a tribal designated statistical area (8001) is not one of production's AIAN areas
    spine = build_spine(blocks, BlockAttributes(aian_area=np.where(aian == "", "", "8001")))
    assert list(spine.hierarchy.geocodes[1]) == ["004", "035"]


@pytest.mark.parametrize(
    ("code", "aian"),
    [
        ("0001", True),  # legal federally recognized American Indian area
        ("4799", True),
        ("4800", True),  # American Indian joint-use area
        ("4989", True),
        ("5000", True),  # Hawaiian home land
        ("5500", True),  # Oklahoma tribal statistical area
        ("5899", True),
        ("5900", True),  # joint-use OTSA
        ("6000", True),  # Alaska Native village statistical area
        ("7999", True),
        ("8000", False),  # tribal designated statistical area
        ("8999", False),
        ("9000", True),  # state recognized legal American Indian area
        ("9499", True),
        ("9500", False),  # state designated tribal statistical area
        ("9998", False),
        ("9999", False),  # in no area
    ],
)
def test_the_aian_part_holds_production_seven_categories(code, aian):
    """prod_default.ini ``aian_areas`` (seven categories) with the ranges of
    ``etc/AIANNHCE_ranges.csv``: an Oklahoma tribal statistical area block is in the AIAN
    part, a state designated tribal statistical area block is not."""
    blocks = np.asarray(["40001000100" + "10001", "40001000100" + "10002"])
    spine = build_spine(blocks, BlockAttributes(aian_area=np.asarray([code, ""])))
    want = ["040", "140"] if aian else ["040"]
    assert list(spine.hierarchy.geocodes[1]) == want
    assert (aian_category(code) in PRODUCTION_AIAN_AREAS) is aian
    assert _aian_of(code) is aian


def test_aiannhce_categories_are_production_ranges():
    assert list(AIANNHCE_CATEGORIES.values()) == [
        (1, 4799), (4800, 4989), (5000, 5499), (5500, 5899), (5900, 5999), (6000, 7999),
        (8000, 8999), (9000, 9499), (9500, 9998),
    ]  # fmt: skip
    assert SpineRules().aian_ranges == tuple(sorted(_PRODUCTION_AIAN))
    assert aian_ranges_of(["Hawaiian_Home_Land"]) == ((5000, 5499),)
    with pytest.raises(GeographyError, match="'Tribal_Areas' is not one of"):
        aian_ranges_of(["Tribal_Areas"])


def test_the_spine_hierarchy_aggregates_like_a_groupby_of_unit_codes():
    rng = np.random.default_rng(4)
    blocks, attrs, rules = _fixed_geography(rng)
    spine = build_spine(blocks, attrs, rules)
    values = rng.integers(0, 9, size=(blocks.size, 3))
    in_spine_order = values[np.argsort(blocks)][spine.order]
    agg = spine.hierarchy.aggregate(in_spine_order)
    sorted_blocks = np.sort(blocks)
    sorted_values = values[np.argsort(blocks)]
    for li in range(spine.hierarchy.n_levels):
        want: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(3, dtype=np.int64))
        for code, v in zip(spine.unit_codes(li), sorted_values, strict=True):
            want[code] = want[code] + v
        got = {c: agg[li][i] for i, c in enumerate(spine.hierarchy.geocodes[li])}
        assert set(got) == set(want)
        for c in got:
            assert np.array_equal(got[c], want[c])
    assert np.array_equal(spine.codes_of(sorted_blocks[::-1]), spine.codes[::-1])


def _fixed_geography(rng):
    blocks = np.asarray(
        [
            f"50{c:03d}{t:06d}{g}{b:04d}"
            for c in (1, 3)
            for t in (100, 200)
            for g in (1, 2)
            for b in range(1, 9)
        ]
    )
    n = blocks.size
    attrs = BlockAttributes(
        aian_area=np.where(rng.random(n) < 0.3, "0007", ""),
        place=np.where(rng.random(n) < 0.5, "00100", ""),
    )
    return blocks, attrs, SpineRules(fanout_cutoff=1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"fanout_cutoff": -1}, "fanout_cutoff is -1; it must be an integer >= 0"),
        ({"entity_threshold": 1.5}, "entity_threshold is 1.5"),
        ({"tract_groups": 1}, "tract_groups is 1; it must be true or false"),
        ({"aian_ranges": ((0, 10),)}, r"aian_ranges has \(0, 10\)"),
        ({"aian_ranges": ((50, 10),)}, r"aian_ranges has \(50, 10\)"),
    ],
)
def test_invalid_rules_are_named(kwargs, match):
    with pytest.raises(GeographyError, match=match):
        SpineRules(**kwargs)


@pytest.mark.parametrize(
    ("blocks", "attrs", "match"),
    [
        (["5000100010010001"] * 2, None, "'5000100010010001' is given more than once"),
        (["500010001001000"], None, "block geocode '500010001001000' is not 16 digits"),
        ([], None, "at least one block"),
        (
            ["5000100010010001"],
            BlockAttributes(aian_area=np.asarray(["12"])),
            "aian_area of block 0 is '12'; it must be 4 digits",
        ),
        (
            ["5000100010010001"],
            BlockAttributes(aian_area=np.asarray(["4995"])),
            "aian_area of block 0 is '4995'; AIANNHCE codes 4990-4999 are in no category",
        ),
        (["5000100010010001"], BlockAttributes(place=np.asarray(["1", "2"])), r"shape \(2,\)"),
        (["5000100010010001"], BlockAttributes(gq_types=np.zeros((1, 3))), "gq_types has shape"),
    ],
)
def test_invalid_blocks_and_attributes_are_named(blocks, attrs, match):
    with pytest.raises(GeographyError, match=match):
        build_spine(np.asarray(blocks, dtype=str), attrs)


def test_bypass_shares_reject_a_wrong_number_of_shares():
    h = Hierarchy.from_blocks(np.asarray(["5000100010010001"]))
    with pytest.raises(GeographyError, match="one share per geolevel"):
        bypass_shares(h, [Fraction(1, 2)] * 3)
    with pytest.raises(GeographyError, match="shares must be >= 0"):
        bypass_shares(h, [Fraction(-1, 6)] + [Fraction(1, 5)] * 5)


def test_block_columns_name_every_blocks_unit_at_every_level():
    rng = np.random.default_rng(8)
    blocks, attrs, rules = _fixed_geography(rng)
    spine = build_spine(blocks, attrs, rules)
    cols = spine.block_columns()
    assert list(cols) == ["geocode", "State", "County", "Tract", "BlockGroup", "Block"]
    assert np.array_equal(cols["geocode"], np.sort(blocks))
    assert np.array_equal(cols["Block"], spine.codes)
    for name in ("State", "County", "Tract", "BlockGroup"):
        assert all(b.startswith(u) for b, u in zip(cols["Block"], cols[name], strict=True))
    with pytest.raises(GeographyError, match="'5000199999910001' is not a block of the spine"):
        spine.codes_of(np.asarray(["5000199999910001"]))
