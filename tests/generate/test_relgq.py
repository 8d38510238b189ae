"""The 2020 relationship and group-quarters detail (relgq) derived from generated persons:
every 2010 code in its 2020 category, every facility one detailed type of its major type,
production's configured relgq age rules obeyed, deterministic, and the generator's own
files unchanged by it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from censusdp.data import households as h
from censusdp.data.schema_dhc import DHCP_2020, GQ_CODES
from censusdp.errors import SchemaError
from censusdp.generate import generate_state, relgq_columns, relgq_rule_violations
from censusdp.io.cef import read_cef


@pytest.fixture(scope="module")
def vt(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("vt-relgq")
    generate_state("VT", 3, out, scale=0.2)
    return out, read_cef(out)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_relgq_maps_each_2010_code_to_its_2020_category(vt) -> None:
    _, cef = vt
    p = cef.persons
    relgq = relgq_columns(p, cef.units, seed=3)["relgq"]
    assert relgq.shape == p["rel"].shape and relgq.min() >= 0 and relgq.max() <= 41
    in_gq = p["hhgq"] > 0
    assert (relgq[in_gq] >= 18).all() and (relgq[~in_gq] < 18).all()
    rel = p["rel"]
    pairs = {
        h.SIBLING: 9, h.PARENT: 10, h.GRANDCHILD: 11, h.PARENT_IN_LAW: 12,
        h.CHILD_IN_LAW: 13, h.OTHER_RELATIVE: 14, h.HOUSEMATE: 15,
    }  # fmt: skip
    for code, category in pairs.items():
        assert (relgq[rel == code] == category).all(), code
    # own children keep their kind, unless production's age_child rule makes a minor the
    # grandchild of a householder too old to be its parent
    row = np.searchsorted(cef.units["unit_id"], p["unit_id"])
    head_age = np.zeros(cef.n_units, dtype=np.int64)
    female = np.zeros(cef.n_units, dtype=bool)
    heads = rel == h.HOUSEHOLDER
    head_age[row[heads]], female[row[heads]] = p["age"][heads], p["sex"][heads] == 2
    ha, fe, age = head_age[row], female[row], p["age"]
    too_old = (age < 6) & ((ha >= 75) | (fe & (ha >= 60))) | ((age < 18) & fe & (ha >= 75))
    for code, category in ((h.BIO_CHILD, 6), (h.ADOPTED_CHILD, 7), (h.STEPCHILD, 8)):
        mine = rel == code
        assert np.array_equal(relgq[mine], np.where(too_old[mine], 11, category)), code
    assert too_old[rel == h.BIO_CHILD].any()
    # householders: alone exactly when the unit holds one person
    size = np.bincount(row, minlength=cef.n_units)
    head = rel == h.HOUSEHOLDER
    assert np.array_equal(relgq[head] == 0, size[row[head]] == 1)
    assert set(np.unique(relgq[head]).tolist()) == {0, 1}
    # spouses and partners: same-sex exactly when the householder's sex is theirs
    head_sex = np.zeros(cef.n_units, dtype=np.int64)
    head_sex[row[head]] = p["sex"][head]
    same = p["sex"] == head_sex[row]
    spouse, partner = rel == h.SPOUSE, rel == h.PARTNER
    assert np.array_equal(relgq[spouse] == 4, same[spouse]) and (relgq[spouse] != 3).all()
    assert np.array_equal(relgq[partner] == 5, same[partner])
    assert (relgq[spouse] == 4).any() or (relgq[partner] == 5).any()
    # foster children: the generator's nonrelative minors
    other = rel == h.OTHER_NONRELATIVE
    assert np.array_equal(relgq[other] == 16, p["age"][other] < 18)


def test_each_facility_has_one_detailed_type_of_its_major_type(vt) -> None:
    _, cef = vt
    cols = relgq_columns(cef.persons, cef.units, seed=3)
    gq_code = cols["gq_code"]
    gqtype = cef.units["gqtype"]
    assert (gq_code[gqtype == 0] == 0).all()
    majors = {1: (101, 106), 2: (201, 203), 3: (301, 301), 4: (401, 405), 5: (501, 501),
              6: (601, 602), 7: (701, 997)}  # fmt: skip
    for g, (lo, hi) in majors.items():
        codes = gq_code[gqtype == g]
        assert ((codes >= lo) & (codes <= hi)).all(), g
    # every resident of a facility has the facility's type
    row = np.searchsorted(cef.units["unit_id"], cef.persons["unit_id"])
    in_gq = cef.persons["hhgq"] > 0
    level = cols["relgq"][in_gq] - 18
    assert np.array_equal(np.asarray(GQ_CODES)[level], gq_code[row[in_gq]])
    assert len(np.unique(gq_code[gqtype == 1])) >= 2  # several correctional types drawn


def test_relgq_obeys_productions_age_rules(vt) -> None:
    _, cef = vt
    relgq = relgq_columns(cef.persons, cef.units, seed=3)["relgq"]
    assert relgq_rule_violations(relgq, cef.persons["age"]).sum() == 0
    # the check can fail: a 14-year-old householder living alone breaks relgq0_lt15
    bad = relgq_rule_violations(np.array([0, 27, 6]), np.array([14, 19, 50]))
    assert bad[0] == 1 and bad[27] == 1 and bad.sum() == 2
    cells = DHCP_2020.cells_of(
        {"relgq": relgq, **{k: cef.persons[k] for k in ("sex", "age", "hispanic", "cenrace")}}
    )
    assert not DHCP_2020.structural_zero_mask[cells].any()


def test_relgq_is_deterministic_and_leaves_the_generated_files_alone(vt) -> None:
    out, cef = vt
    before = {f.name: _digest(f) for f in out.glob("*.parquet")}
    a = relgq_columns(cef.persons, cef.units, seed=3)
    b = relgq_columns(cef.persons, cef.units, seed=3)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    c = relgq_columns(cef.persons, cef.units, seed=4)
    assert np.array_equal(a["relgq"] < 18, c["relgq"] < 18)  # households do not draw
    assert {f.name: _digest(f) for f in out.glob("*.parquet")} == before


def test_a_person_outside_the_units_is_named() -> None:
    persons = {"unit_id": np.array([7]), "rel": np.array([0]), "hhgq": np.array([0]),
               "sex": np.array([1]), "age": np.array([40])}  # fmt: skip
    units = {"unit_id": np.array([1]), "gqtype": np.array([0])}
    with pytest.raises(SchemaError, match="'unit_id' value 7"):
        relgq_columns(persons, units, seed=1)
