"""The DDP's household schema (Schema_Household2010), its structural zeros, and the household
histogram built from derived household records."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import censusdp
from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import household_histogram
from censusdp.data.households import HOUSEHOLD_ATTRIBUTES, Households, derive_households
from censusdp.data.queries import make_query
from censusdp.data.schema import get_schema
from censusdp.errors import ConfigError
from censusdp.generate import generate_state
from censusdp.io.cef import read_cef, read_households


def test_schema_is_the_ddp_household_schema() -> None:
    s = get_schema("household2010")
    assert s.attribute_names == tuple(HOUSEHOLD_ATTRIBUTES)
    assert s.shape == (2, 9, 2, 7, 8, 24, 4, 2) and s.size == 387_072
    assert make_query(s, "hhsex*hhage*hhtype").n_rows == 432
    # the DDP's constraints: no 0-person household, alone exactly when one person, ...
    z = s.structural_zero_mask
    cell = np.ravel_multi_index((0, 2, 0, 0, 0, 3, 0, 0), s.shape)  # size 0
    assert z[cell]
    cell = np.ravel_multi_index((0, 2, 0, 0, 1, 3, 0, 0), s.shape)  # 1 person, married
    assert z[cell]
    cell = np.ravel_multi_index((0, 2, 0, 0, 1, 18, 0, 0), s.shape)  # 1 person, alone
    assert not z[cell]
    cell = np.ravel_multi_index((1, 7, 0, 0, 1, 18, 0, 0), s.shape)  # aged 75+, no one 60+
    assert z[cell]


def _households(attributes: list[tuple[int, ...]], units: list[int]) -> Households:
    cols = np.asarray(attributes, dtype=np.int64).T
    n = len(units)
    return Households(
        unit=np.asarray(units),
        householder=np.arange(n),
        persons=np.ones(n, dtype=np.int64),
        attributes={k: cols[i] for i, k in enumerate(HOUSEHOLD_ATTRIBUTES)},
    )


def test_household_histogram_counts_each_household_once_in_its_block() -> None:
    blocks = ["5000100010001000", "5000100010001001"]
    hierarchy = Hierarchy.from_blocks(np.asarray(blocks))
    unit_geocodes = np.asarray([blocks[1], blocks[0], blocks[1], blocks[0]])
    a = (0, 2, 0, 0, 1, 18, 0, 0)
    b = (1, 6, 1, 6, 3, 19, 2, 0)
    hh = _households([a, b, a], units=[0, 1, 2])  # unit 3 is vacant
    hist = household_histogram(hh, unit_geocodes, hierarchy)
    s = get_schema("household2010")
    ca, cb = (int(np.ravel_multi_index(c, s.shape)) for c in (a, b))
    assert hist.shape == (2, s.size) and hist.sum() == 3
    row = {code: i for i, code in enumerate(hierarchy.blocks)}
    assert hist[row[blocks[1]], ca] == 2
    assert hist[row[blocks[0]], cb] == 1


@pytest.fixture(scope="module")
def wy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wy-households")
    generate_state("WY", 4, out, scale=0.05)
    return out


def test_derived_households_never_fall_in_a_structural_zero(wy: Path) -> None:
    cef = read_cef(wy)
    hh = read_households(cef)
    s = get_schema("household2010")
    cells = s.cells_of(hh.attributes)
    assert not s.structural_zero_mask[cells].any()
    hierarchy = Hierarchy.from_blocks(cef.units["geocode"])
    hist = household_histogram(hh, cef.units["geocode"], hierarchy)
    # one household per occupied housing unit, block by block
    occupied = cef.units["occupied"] & (cef.units["gqtype"] == 0)
    want = np.bincount(
        hierarchy.block_index(cef.units["geocode"][occupied]), minlength=hierarchy.blocks.size
    )
    assert np.array_equal(np.asarray(hist.sum(axis=1)).ravel(), want)
    # per geounit: the histogram taken up the hierarchy, the nation's is every household's
    levels = hierarchy.aggregate(hist)
    nation = np.asarray(levels[0].todense()).ravel()
    assert np.array_equal(nation, np.bincount(cells, minlength=s.size))
    county = hierarchy.geolevels.index("County")
    counties, per_county = np.unique(
        np.asarray(cef.units["geocode"][hh.unit], dtype="U5"), return_counts=True
    )
    assert np.array_equal(np.asarray(levels[county].sum(axis=1)).ravel(), per_county)
    assert hierarchy.geocodes[county].tolist() == counties.tolist()
    # re-derived from shuffled persons: the same households
    order = np.random.default_rng(0).permutation(cef.n_persons)
    unit_row = np.searchsorted(cef.units["unit_id"], cef.persons["unit_id"][order])
    again = derive_households(unit_row, cef.n_units, {k: v[order] for k, v in cef.persons.items()})
    for k in HOUSEHOLD_ATTRIBUTES:
        assert np.array_equal(again.attributes[k], hh.attributes[k])


def test_a_household_budget_is_refused_by_run_in_one_line(wy: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        censusdp.run_release(wy, tmp_path / "run", budget="ddp-2010-households", seed=1)
    assert "\n" not in str(info.value)
    assert "'ddp-2010-households' is for households" in str(info.value)
    assert not (tmp_path / "run").exists()
