"""The 2020 DHC's prim spine (``SpineRules(prim=True)``): Prims cut each county part by
place / MCD (production's ``create_prims``), tract subsets are tracts within a Prim,
tract-subset groups group them within their Prim, and block groups lie within a tract
subset; Puerto Rico's Prims are its municipios."""

from __future__ import annotations

import numpy as np
import pytest

from censusdp.data.spine import BlockAttributes, SpineRules, build_spine
from censusdp.errors import GeographyError

LEVELS = ["US", "State", "County", "Prim", "TractSubsetGroup", "TractSubset", "BlockGroup", "Block"]


def _blocks(state: str = "50") -> tuple[np.ndarray, np.ndarray]:
    """Two counties, three tracts each, eight blocks a tract; places cut across tracts."""
    rng = np.random.default_rng(4)
    blocks, places = [], []
    for county in ("001", "003"):
        for tract in ("000100", "000200", "000300"):
            for b in range(8):
                bg = 1 + b // 4  # the block group digit, then the 4-digit block
                blocks.append(f"{state}{county}{tract}{bg}{bg}{b:03d}")
                places.append(rng.choice(["", "00010", "00020"]))
    return np.asarray(blocks), np.asarray(places)


def test_levels_and_nesting_of_the_prim_spine() -> None:
    blocks, places = _blocks()
    rules = SpineRules(prim=True, target_original_block_groups=True)
    spine = build_spine(blocks, BlockAttributes(place=places), rules)
    assert list(spine.geolevels.names) == LEVELS == list(rules.level_names)
    at = np.searchsorted(spine.blocks, blocks)
    prim = spine.unit_codes("Prim")[at]
    county = spine.unit_codes("County")[at]
    # a Prim is one county part and one place (none: 99999)
    want = np.char.add(county, np.where(places == "", "99999", places))
    np.testing.assert_array_equal(prim, want)
    # a tract subset is one tract within one Prim; a block group within one tract subset
    subset = spine.unit_codes("TractSubset")[at]
    for code in np.unique(subset):
        mine = subset == code
        assert len({b[:11] for b in blocks[mine]}) == 1
        assert len(set(prim[mine])) == 1
    bg = spine.unit_codes("BlockGroup")[at]
    for code in np.unique(bg):
        mine = bg == code
        assert len(set(subset[mine])) == 1
        assert len({b[:12] for b in blocks[mine]}) == 1  # the tabulation block group targeted
    # every level's code is a prefix of the next one's
    codes = [spine.unit_codes(name)[at] for name in LEVELS[1:]]
    for upper, lower in zip(codes, codes[1:], strict=False):
        assert all(lo.startswith(up) for up, lo in zip(upper, lower, strict=True))
    # more Prims than counties, more tract subsets than tracts
    assert np.unique(prim).size > np.unique(county).size
    assert np.unique(subset).size > np.unique(blocks.astype("U11")).size


def test_puerto_ricos_prims_are_its_municipios() -> None:
    blocks, places = _blocks("72")
    rules = SpineRules(prim=True, nation=False)
    spine = build_spine(blocks, BlockAttributes(place=places), rules)
    at = np.searchsorted(spine.blocks, blocks)
    prim = spine.unit_codes("Prim")[at]
    np.testing.assert_array_equal(prim, np.char.add(spine.unit_codes("County")[at], "99999"))


def test_the_prim_rule_is_a_boolean() -> None:
    with pytest.raises(GeographyError, match="spine rule prim is 1"):
        SpineRules(prim=1)  # type: ignore[arg-type]
