"""The 2020 DHC schemas (dhcp-2020, dhch-2020, dhc-units-2020): production's shapes,
household types, recodes and structural zeros.

Production's numbers are from DAS_2020_DHC_Production_Code (``programs/schema/``,
``programs/constraints/Constraints_DHCP.py`` and ``Constraints_DHCH.py``,
``configs/production/dhc/*.ini``). Where the mirror of that repository is on this
machine, the household types and the product recodes are compared with production's
own table (``hhtype_map.py``) too; elsewhere those two tests skip.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import numpy as np
import pytest

from censusdp.data.queries import make_query
from censusdp.data.schema import get_schema, schema_names, unit_schema_of
from censusdp.data.schema_dhc import (
    HHTYPE_DHCH_TYPES,
    QUERY_ORDERINGS,
    RELGQ_LEVELS,
    TENVACGQ_LEVELS,
)

MIRROR = Path("/work/.mirror/uscensusbureau+DAS_2020_DHC_Production_Code/repo")


def _production_file(path: str) -> str:
    if not MIRROR.exists():
        pytest.skip("the DHC production mirror is not on this machine")
    out = subprocess.run(
        ["git", "-C", str(MIRROR), "show", f"HEAD:das_decennial/{path}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout


def _production_hhtypes() -> dict[int, dict[str, int]]:
    text = _production_file("programs/schema/attributes/dhch/hhtype_map.py")
    return ast.literal_eval(text[text.index("{") :])


def test_the_schemas_are_registered() -> None:
    names = schema_names()
    assert {"dhcp-2020", "dhch-2020", "dhc-units-2020"} <= set(names)
    assert unit_schema_of("dhch-2020") is get_schema("dhc-units-2020")
    assert unit_schema_of("dhcp-2020") is None


def test_cell_counts_are_production_shapes() -> None:
    # schemamaker.py: DHCP_SCHEMA = [RELGQ, SEX, AGE, HISPANIC, CENRACE]; relgq 0-41,
    # sex 0-1, age 0-115, hispanic 0-1, cenrace 0-62 (Constraints_DHCP.py docstring)
    p = get_schema("dhcp-2020")
    assert p.attribute_names == ("relgq", "sex", "age", "hispanic", "cenrace")
    assert p.shape == (42, 2, 116, 2, 63) and p.size == 1_227_744
    # DHCH_SCHEMA_TEN_3LEV = [SEX, HH_AGE, HH_HISPANIC, RACE, HH_ELDERLY,
    # HH_TENSHORT_3LEV, HH_TYPE_DHCH]
    h = get_schema("dhch-2020")
    assert h.attribute_names == (
        "sex", "hhage", "hisp", "race", "elderly", "hhtenshort_3lev", "hhtype_dhch",
    )  # fmt: skip
    assert h.shape == (2, 9, 2, 7, 4, 3, 522) and h.size == 1_578_528
    u = get_schema("dhc-units-2020")
    assert u.shape == (35,) and len(TENVACGQ_LEVELS) == 35
    assert RELGQ_LEVELS[18].startswith("GQ 101") and RELGQ_LEVELS[41].startswith("GQ 997")


def test_household_types_are_productions_522() -> None:
    types = HHTYPE_DHCH_TYPES
    assert len(types) == 522 and len(set(types)) == 522
    prod = _production_hhtypes()
    assert len(prod) == 522

    def facts(a: dict[str, int]) -> tuple[int, ...]:
        couple = [
            a["NO_SPOUSE_OR_PARTNER"],
            a["MARRIED_OPPOSITE_SEX"],
            a["MARRIED_SAME_SEX"],
            a["COHABITING_OPPOSITE_SEX"],
            a["COHABITING_SAME_SEX"],
        ].index(1)
        own = [
            a["NO_OWN_CHILD_UNDER_18"],
            a["OWN_CHILD_UNDER_6_ONLY"],
            a["OWN_CHILD_BETWEEN_6_AND_17"],
            a["OWN_CHILD_IN_BOTH_RANGES"],
        ].index(1)
        kids = [
            a["NO_CHILD_UNDER_18_EXCLUDING_HOUSEHOLDER_SPOUSE_PARTNER"],
            a["CHILD_UNDER_6_ONLY_EXCLUDING_HOUSEHOLDER_SPOUSE_PARTNER"],
            a["CHILD_BETWEEN_6_AND_17_EXCLUDING_HOUSEHOLDER_PARTNER"],
            a["CHILD_IN_BOTH_RANGES_EXCLUDING_HOUSEHOLDER_PARTNER"],
        ].index(1)
        return (
            a["SIZE"], couple, a["MULTIG"], own, kids, a["CHILD_UNDER_18"], a["WITH_RELATIVES"],
        )  # fmt: skip

    assert {facts(a) for a in prod.values()} == set(types)


def test_product_recodes_group_types_as_production() -> None:
    prod = _production_hhtypes()
    h = get_schema("dhch-2020")
    couples = ("NO_SPOUSE_OR_PARTNER", "MARRIED_SAME_SEX", "MARRIED_OPPOSITE_SEX",
               "COHABITING_SAME_SEX", "COHABITING_OPPOSITE_SEX")  # fmt: skip
    own = ("OWN_CHILD_UNDER_18==0", "OWN_CHILD_UNDER_6_ONLY", "OWN_CHILD_BETWEEN_6_AND_17",
           "OWN_CHILD_IN_BOTH_RANGES")  # fmt: skip

    def holds(a: dict[str, int], cond: str) -> bool:
        key, _, value = cond.partition("==")
        return a[key] == int(value or 1)

    # recodeDetCoupleTypeMultGenDetOwnChildSize: couple x MULTIG x own children x SIZE
    groups = []
    for c in couples:
        for m in (0, 1):
            for o in own:
                for s in range(1, 8):
                    conds = (c, f"MULTIG=={m}", o, f"SIZE=={s}")
                    members = [i for i, a in prod.items() if all(holds(a, x) for x in conds)]
                    if members:
                        groups.append(members)
    assert len(groups) == 183
    # the same groups, in the same order, as sets of (production index -> our level)
    ours = {t: k for k, t in enumerate(HHTYPE_DHCH_TYPES)}
    mapping = np.asarray(h.variable("detailedcoupletypemultgendetownchildsize").mapping)
    for g, members in enumerate(groups):
        assert {int(mapping[ours[_facts_of(prod[i])]]) for i in members} == {g}


def _facts_of(a: dict[str, int]) -> tuple[int, ...]:
    couple = [a["NO_SPOUSE_OR_PARTNER"], a["MARRIED_OPPOSITE_SEX"], a["MARRIED_SAME_SEX"],
              a["COHABITING_OPPOSITE_SEX"], a["COHABITING_SAME_SEX"]].index(1)  # fmt: skip
    own = (
        0
        if a["NO_OWN_CHILD_UNDER_18"]
        else (1 if a["OWN_CHILD_UNDER_6_ONLY"] else 2 if a["OWN_CHILD_BETWEEN_6_AND_17"] else 3)
    )
    kids = 0 if a["NO_CHILD_UNDER_18_EXCLUDING_HOUSEHOLDER_SPOUSE_PARTNER"] else (
        1 if a["CHILD_UNDER_6_ONLY_EXCLUDING_HOUSEHOLDER_SPOUSE_PARTNER"]
        else 2 if a["CHILD_BETWEEN_6_AND_17_EXCLUDING_HOUSEHOLDER_PARTNER"] else 3
    )  # fmt: skip
    return (a["SIZE"], couple, a["MULTIG"], own, kids, a["CHILD_UNDER_18"], a["WITH_RELATIVES"])


@pytest.mark.parametrize(
    ("name", "size"),
    [
        ("age_38_groups", 38), ("age_40_groups", 40), ("age_10_groups", 10),
        ("age_18_64_116", 3), ("relgq_4_groups", 4), ("gq_constr_groups", 6),
        ("popsehsdtargetsrelship", 19), ("relship_and_eight_level_gq", 25), ("hhgq8lev", 8),
    ],
)  # fmt: skip
def test_person_recode_sizes(name: str, size: int) -> None:
    assert get_schema("dhcp-2020").variable(name).size == size


def test_person_recodes_cut_where_production_does() -> None:
    p = get_schema("dhcp-2020")
    a38 = p.variable("age_38_groups").mapping
    assert a38[14] != a38[15] == a38[17] != a38[18] == a38[19] and a38[110] == a38[115]
    a40 = p.variable("age_40_groups").mapping
    assert a40[16] != a40[17] != a40[18] == a40[19] and a40[60] == a40[61] != a40[62]
    gq = p.variable("gq_constr_groups").mapping
    assert gq[32] == 1 and gq[18] == gq[22] == 2 and gq[33] == gq[41] == 3
    assert gq[23] == gq[31] == gq[34] == gq[35] == 4 and gq[24] == gq[30] == gq[36] == 5
    hh8 = p.variable("hhgq8lev").mapping
    assert set(hh8[:18]) == {0} and hh8[27] == 3 and hh8[34] == hh8[35] == 6


# production's configured relgq rules: (relgq level, first allowed age, last allowed age)
_RULES = {
    **{k: (15, 115) for k in (0, 1, 2, 3, 4, 5, 18, 19, 20, 21, 22)},
    **{k: (0, 89) for k in (6, 7, 8)},
    10: (30, 115), 11: (0, 74), 12: (30, 115), 13: (15, 89), 16: (0, 20),
    **{k: (17, 65) for k in (23, 31, 34, 35)},
    **{k: (0, 25) for k in (24, 25, 26)},
    27: (20, 115), 32: (3, 30), 33: (16, 65), 37: (16, 115), 38: (16, 115), 39: (16, 75),
}  # fmt: skip


def test_person_zeros_are_the_configured_relgq_age_rules() -> None:
    p = get_schema("dhcp-2020")
    assert len(p.structural_zeros) == 32 == len(_RULES)
    zero = p.structural_zero_mask.reshape(p.shape)
    for k in range(42):
        lo, hi = _RULES.get(k, (0, 115))
        ruled_out = np.array([not lo <= a <= hi for a in range(116)])
        assert np.array_equal(zero[k].all(axis=(0, 2, 3)), ruled_out), k
        assert np.array_equal(zero[k].any(axis=(0, 2, 3)), ruled_out), k
    # relgq40_lt16_gt75 is implemented by production but not configured
    assert not zero[40].any()
    expected = sum(116 - (hi - lo + 1) for lo, hi in _RULES.values()) * 2 * 2 * 63
    assert int(p.structural_zero_mask.sum()) == expected


def _hh_cell(**levels: int) -> int:
    h = get_schema("dhch-2020")
    idx = tuple(levels.get(a, 0) for a in h.attribute_names)
    return int(np.ravel_multi_index(idx, h.shape))


def _type(**facts: int) -> int:
    return next(
        k
        for k, t in enumerate(HHTYPE_DHCH_TYPES)
        if all(getattr(t, f) == v for f, v in facts.items())
    )


def test_household_zeros_follow_the_unit_constraints() -> None:
    h = get_schema("dhch-2020")
    z = h.structural_zero_mask
    alone = _type(size=1, any_child=0)
    child_alone = _type(size=1, any_child=1)
    # living_alone: a householder 60-64 alone has someone 60+ and no one 65+
    assert z[_hh_cell(hhtype_dhch=alone, hhage=5, elderly=0)]
    assert not z[_hh_cell(hhtype_dhch=alone, hhage=5, elderly=1)]
    assert z[_hh_cell(hhtype_dhch=alone, hhage=3, elderly=1)]
    assert not z[_hh_cell(hhtype_dhch=alone, hhage=3, elderly=0)]
    # a child living alone is under 25
    assert z[_hh_cell(hhtype_dhch=child_alone, hhage=1)]
    assert not z[_hh_cell(hhtype_dhch=child_alone, hhage=0)]
    # hh_elderly: a householder 75+ makes ELDERLY 3 whatever the household
    big = _type(size=5, couple=1, multig=0, own_children=2, children=2, relatives=1)
    assert z[_hh_cell(hhtype_dhch=big, hhage=7, elderly=2)]
    assert not z[_hh_cell(hhtype_dhch=big, hhage=7, elderly=3)]
    # age_child: a woman 60+ has no own child under 6; a man 60-74 may
    young = _type(size=2, couple=0, own_children=1, children=1, any_child=1, multig=0)
    assert z[_hh_cell(sex=1, hhage=5, hhtype_dhch=young, elderly=1)]
    assert not z[_hh_cell(sex=0, hhage=5, hhtype_dhch=young, elderly=1)]
    # size2 with a child: the householder under 60 means no one 60+
    assert z[_hh_cell(sex=0, hhage=2, hhtype_dhch=young, elderly=2)]
    # size2 couple: a householder under 25 with someone 75+ is ruled out
    couple = _type(size=2, couple=3, multig=0, own_children=0, children=0, any_child=0,
                   relatives=0)  # fmt: skip
    assert z[_hh_cell(hhtype_dhch=couple, hhage=0, elderly=3)]
    assert not z[_hh_cell(hhtype_dhch=couple, hhage=1, elderly=3)]
    assert 0 < z.mean() < 0.5


def test_every_ordering_query_builds() -> None:
    for schema_name, passes in QUERY_ORDERINGS.items():
        schema = get_schema(schema_name)
        unit = unit_schema_of(schema_name)
        names = {q for groups in passes.values() for group in groups for q in group}
        for q in sorted(names):
            target = unit if unit is not None and q == "tenvacgq" else schema
            assert make_query(target, q).n_rows > 0, q
    q = make_query(get_schema("dhcp-2020"), "relgq * age_40_groups * hispanic * cenrace * sex")
    assert q.n_rows == 42 * 40 * 2 * 63 * 2
