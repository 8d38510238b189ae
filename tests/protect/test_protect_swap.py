"""Household swapping and top-coding (JASON (JSR-19-2F) sec. 3.3; Abowd & Schmutte (2019) App. A)."""

from __future__ import annotations

import numpy as np
import pytest

from censusdp.errors import ConfigError
from censusdp.generate import generate_state
from censusdp.io.cef import read_cef
from censusdp.protect import household_table, swap_households, top_code_ages


@pytest.fixture(scope="module")
def cef(tmp_path_factory):
    d = tmp_path_factory.mktemp("vt")
    generate_state("VT", 7, d, scale=0.03)
    return read_cef(d)


def _block_counts(geo, mask=None):
    geo = np.asarray(geo).astype("U16")
    if mask is not None:
        geo = geo[mask]
    codes, counts = np.unique(geo, return_counts=True)
    return dict(zip(codes.tolist(), counts.tolist(), strict=True))


def test_swap_keeps_block_totals_and_adults(cef):
    """Matching on size and adults leaves block totals and 18+ totals unchanged (Abowd & Schmutte (2019) App. A)."""
    res = swap_households(cef.persons, rate=0.1, seed=1)
    p = res.persons
    assert res.swapped > 0
    assert _block_counts(p["geocode"]) == _block_counts(cef.persons["geocode"])
    assert _block_counts(p["geocode"], p["age"] >= 18) == _block_counts(
        cef.persons["geocode"], cef.persons["age"] >= 18
    )
    # attributes travel with the person; only geography and unit change
    for c in ("person_id", "sex", "age", "hispanic", "cenrace", "hhgq"):
        np.testing.assert_array_equal(p[c], cef.persons[c])
    assert res.persons_moved > 0
    # every person still lives in a unit of their (new) block
    unit_geo = dict(zip(cef.units["unit_id"].tolist(), cef.units["geocode"].tolist(), strict=True))
    assert all(
        unit_geo[u] == g for u, g in zip(p["unit_id"].tolist(), p["geocode"].tolist(), strict=True)
    )


def test_swap_pairs_match_on_size_adults_and_county(cef):
    res = swap_households(cef.persons, rate=0.2, seed=2)
    before = household_table(cef.persons)
    after = household_table(res.persons)
    # map unit -> household signature before; members of each unit after
    sig = {
        int(u): (int(s), int(a))
        for u, s, a in zip(before["unit_id"], before["size"], before["adults"], strict=True)
    }
    for u, s, a in zip(after["unit_id"], after["size"], after["adults"], strict=True):
        assert sig[int(u)] == (int(s), int(a))
    moved = res.persons["geocode"] != cef.persons["geocode"]
    assert moved.any()
    same_county = res.persons["geocode"][moved].astype("U5") == cef.persons["geocode"][
        moved
    ].astype("U5")
    assert same_county.mean() > 0.9
    assert res.county_pairs + res.state_pairs == res.pairs
    assert res.swapped == 2 * res.pairs


def test_swap_rate_and_targeting(cef):
    """The swapped share is close to the rate, and at-risk households are over-sampled."""
    res = swap_households(cef.persons, rate=0.1, seed=3, risk_weight=10)
    assert abs(res.swapped / res.households - 0.1) < 0.03
    # at-risk households are a larger share of the swapped than of all households
    assert res.swapped_at_risk / res.swapped > 1.5 * res.at_risk / res.households
    none = swap_households(cef.persons, rate=0.0, seed=3)
    assert none.swapped == 0 and none.persons_moved == 0


def test_swap_is_seeded(cef):
    a = swap_households(cef.persons, rate=0.05, seed=11)
    b = swap_households(cef.persons, rate=0.05, seed=11)
    c = swap_households(cef.persons, rate=0.05, seed=12)
    np.testing.assert_array_equal(a.persons["geocode"], b.persons["geocode"])
    assert not np.array_equal(a.persons["geocode"], c.persons["geocode"])


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"rate": -0.1}, "swap rate must be in"),
        ({"rate": 1.5}, "swap rate must be in"),
        ({"rate": 0.1, "risk_weight": 0.5}, "risk_weight must be >= 1"),
        ({"rate": 0.1, "small_block": -1}, "small_block must be >= 0"),
    ],
)
def test_swap_rejects_bad_parameters(cef, kwargs, match):
    with pytest.raises(ConfigError, match=match):
        swap_households(cef.persons, seed=0, **kwargs)


def test_top_code_ages():
    a = np.array([0, 17, 89, 90, 91, 115])
    np.testing.assert_array_equal(top_code_ages(a, 90), [0, 17, 89, 90, 90, 90])
    np.testing.assert_array_equal(top_code_ages(a, None), a)
    with pytest.raises(ConfigError, match="top-code must be in 1..115"):
        top_code_ages(a, 200)
