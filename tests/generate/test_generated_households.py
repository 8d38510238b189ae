"""The generator's households: relationships consistent with ages and sexes, household types
and sizes near the 2010 national figures, group quarters without households, citizenship.

Targets (docs/generator.md, tools/PROVENANCE.md): 2010 Census Brief C2010BR-14 "Households
and Families: 2010", Tables 1 and 2 (married-couple households 48.4%, unmarried-partner
households 6.6%, one-person households 26.7%, married couples with own children under 18
20.2% of households), SF1 H13 (household size); about 7% of residents were not citizens
(2010 American Community Survey), far fewer in Vermont.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from censusdp.data import households as h
from censusdp.generate import generate_state
from censusdp.io.cef import read_cef, read_households


@pytest.fixture(scope="module")
def vt(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("vt-households")
    generate_state("VT", 5, out, scale=0.3)
    cef = read_cef(out)  # the reader's household rules: one householder per household, ...
    return out, cef, read_households(cef)


def test_every_occupied_housing_unit_is_one_household(vt) -> None:
    _, cef, hh = vt
    u = cef.units
    assert hh.unit.tolist() == np.flatnonzero(u["occupied"] & (u["gqtype"] == 0)).tolist()
    assert int(hh.persons.sum()) == int((cef.persons["hhgq"] == 0).sum())
    gq = cef.persons["hhgq"] > 0
    assert np.array_equal(cef.persons["rel"][gq], h.rel_of_gq(cef.persons["hhgq"][gq]))


def test_relationships_agree_with_ages_and_sexes(vt) -> None:
    _, cef, hh = vt
    p = cef.persons
    unit_of = np.full(cef.n_units, -1, dtype=np.int64)
    unit_of[hh.unit] = hh.householder
    uid_row = np.searchsorted(cef.units["unit_id"], p["unit_id"])
    in_hh = p["hhgq"] == 0
    head = unit_of[uid_row[in_hh]]
    rel, age, sex = p["rel"][in_hh], p["age"][in_hh], p["sex"][in_hh]
    gap = p["age"][head] - age
    assert (p["age"][hh.householder] >= h.MIN_HOUSEHOLDER_AGE).all()
    own = np.isin(rel, [h.BIO_CHILD, h.ADOPTED_CHILD, h.STEPCHILD])
    assert (gap[own] >= 16).all()  # children are younger than their parent
    assert (gap[rel == h.GRANDCHILD] >= 45).all()
    assert (gap[np.isin(rel, [h.PARENT, h.PARENT_IN_LAW])] <= -16).all()
    couple = np.isin(rel, [h.SPOUSE, h.PARTNER])
    assert (age[couple] >= 18).all()
    same = sex[couple] == p["sex"][head[couple]]
    assert 0.002 < same.mean() < 0.03  # 2010: about 1% of couples are of the same sex
    partner = rel[couple] == h.PARTNER
    assert partner[same].mean() > 0.5 > partner[~same].mean()


def test_household_types_and_sizes_are_near_2010(vt) -> None:
    _, _, hh = vt
    t, size = hh.attributes["hhtype"], hh.attributes["hhsize"]
    share = {
        "married": np.mean(t < 8),
        "married with own children": np.mean(np.isin(t, [0, 1, 2, 4, 5, 6])),
        "cohabiting": np.mean((t >= 8) & (t < 18)),
        "alone": np.mean(t == 18),
        "one person": np.mean(size == 1),
        "two persons": np.mean(size == 2),
    }
    target = {
        "married": 0.484,
        "married with own children": 0.202,
        "cohabiting": 0.066,
        "alone": 0.267,
        "one person": 0.267,
        "two persons": 0.336,
    }
    for k, v in target.items():
        assert abs(share[k] - v) < max(0.02, 0.15 * v), (k, share[k], v)
    assert np.array_equal(size == 1, t == 18)  # alone exactly when one person
    assert 0.02 < np.mean(hh.attributes["hhmulti"]) < 0.09  # 2010: 4.4%
    # every type and every householder age bin occurs
    assert set(np.unique(t)) >= set(range(24)) - {4, 5, 6, 13, 14, 15}  # rare same-sex kinds
    assert set(np.unique(hh.attributes["hhage"])) == set(range(9))


def test_citizenship(vt) -> None:
    _, cef, _ = vt
    noncitizen = 1 - cef.persons["citizen"].mean()
    assert 0.005 < noncitizen < 0.07  # Vermont: about 2.5% in 2010


def test_relationships_are_deterministic_from_the_seed(tmp_path: Path) -> None:
    def columns(out: Path) -> dict:
        generate_state("DE", 9, out, scale=0.02)
        t = pq.read_table(out / "persons.parquet", columns=["rel", "citizen", "age"])
        return {c: t[c].to_numpy() for c in t.column_names}

    a, b = columns(tmp_path / "a"), columns(tmp_path / "b")
    for c in a:
        assert np.array_equal(a[c], b[c])
