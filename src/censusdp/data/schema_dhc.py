"""The 2020 Demographic and Housing Characteristics (DHC) schemas, as production ran them.

Read from the Census Bureau's public DAS_2020_DHC_Production_Code (``das_decennial/``):

* ``dhcp-2020``: the person schema ``DHCP_SCHEMA`` (``programs/schema/schemas/
  schemamaker.py``; ``configs/production/dhc/person_US.ini``: ``schema = DHCP_SCHEMA``,
  ``minimalschema = relgq``): RELGQ (42) x SEX (2) x AGE (116) x HISPANIC (2) x
  CENRACE (63) = 1,227,744 cells. RELGQ is the relationship to the householder (18
  levels) and the group-quarters type (24 levels) in one attribute
  (``programs/schema/attributes/relgq.py``).
* ``dhch-2020``: the household schema ``DHCH_SCHEMA_TEN_3LEV`` (``unit_US.ini``):
  SEX (2) x HHAGE (9) x HISP (2) x RACE (7) x ELDERLY (4) x HHTENSHORT_3LEV (3) x
  HHTYPE_DHCH (522) = 1,578,528 cells, one household each (the householder's sex, age,
  Hispanic origin and race; the presence of persons 60+, 65+, 75+; tenure; household
  type).
* ``dhc-units-2020``: the unit histogram production's household run measures beside it
  (``unit_schema_dict``: ``DHCH_SCHEMA_TEN_3LEV`` -> ``UNIT_TABLE_10_TENVACSGQ``):
  TENVACGQ (35): four tenures of occupied units, seven vacancy statuses, 24 GQ types
  (``programs/schema/attributes/tenvacgq.py``).

Attribute and recode names are production's, lower-cased (censusdp's query names are
case-insensitive), so the strategies' query names read as production wrote them:
``relgq * age_40_groups * hispanic * cenrace * sex``. The recodes are those the
strategies and query orderings of :mod:`censusdp.privacy.presets` ``dhc-2020*`` name.

Structural zeros are production's constraints that rule cells out:

* persons (``theconstraints.us/state/block`` of ``person_US.ini``): the 32 ``relgq*``
  age rules (``programs/constraints/Constraints_DHCP.py``), e.g. ``relgq0_lt15`` (no
  householder living alone under 15). ``relgq40_lt16_gt75`` is implemented there but
  not listed in the configuration, so it is not a zero here either.
* households (``unit_US.ini``): ``living_alone``, ``size2``, ``size3``, ``size4``,
  ``hh_elderly`` and ``age_child`` (``programs/constraints/Constraints_DHCH.py``).
  ``h1`` and ``gq_vect`` tie the household total to the unit invariants, and ``owned``
  (``Constraints_DHCH_Ten_3Lev.py``) equates the households' tenure with the unit
  histogram's: constraints across histograms, not zeros of one.

The household-type attribute and its recodes come from :mod:`censusdp.data._hhtype_dhc`.
Importing :mod:`censusdp.data` registers the three schemas with
:func:`censusdp.data.schema.get_schema`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from censusdp.data._hhtype_dhc import (
    COUPLES,
    OWN_CHILDREN,
    HouseholdType,
    household_types,
    type_label,
    types_where,
)
from censusdp.data.households import HHAGE_LEVELS, HHELDERLY_LEVELS, HHRACE_LEVELS
from censusdp.data.schema import (
    AGE,
    CENRACE,
    HISPANIC,
    MAX_AGE,
    SEX,
    Attribute,
    Recode,
    Schema,
    StructuralZero,
    register_schema,
)
from censusdp.errors import SchemaError

__all__ = [
    "DHC_SCHEMA_NAMES",
    "DHCH_2020",
    "DHCP_2020",
    "DHC_UNITS_2020",
    "FIRST_GQ_RELGQ",
    "GQ_CODES",
    "H1_UNIT_VECTOR",
    "HHGQ_UNIT_VECTOR",
    "HHTYPE_DHCH_TYPES",
    "QUERY_ORDERINGS",
    "RELGQ_LEVELS",
    "TENVACGQ_LEVELS",
]

_HH = tuple(f"household: {r}" for r in (
    "householder living alone", "householder not living alone", "opposite-sex spouse",
    "opposite-sex unmarried partner", "same-sex spouse", "same-sex unmarried partner",
    "biological son or daughter", "adopted son or daughter", "stepson or stepdaughter",
    "brother or sister", "father or mother", "grandchild", "parent-in-law",
    "son-in-law or daughter-in-law", "other relative", "roommate or housemate",
    "foster child", "other nonrelative",
))  # fmt: skip
_GQ_TYPES: tuple[tuple[int, str], ...] = (
    (101, "Federal detention centers"), (102, "Federal prisons"), (103, "State prisons"),
    (104, "Local jails and other municipal confinements"),
    (105, "Correctional residential facilities"), (106, "Military disciplinary barracks"),
    (201, "Group homes for juveniles"), (202, "Residential treatment centers for juveniles"),
    (203, "Correctional facilities intended for juveniles"), (301, "Nursing facilities"),
    (401, "Mental hospitals"), (402, "Hospitals with patients who have no usual home elsewhere"),
    (403, "In-patient hospice facilities"), (404, "Military treatment facilities"),
    (405, "Residential schools for people with disabilities"),
    (501, "College/university student housing"), (601, "Military quarters"),
    (602, "Military ships"), (701, "Emergency and transitional shelters"),
    (801, "Group homes intended for adults"), (802, "Residential treatment centers for adults"),
    (900, "Maritime/merchant vessels"),
    (901, "Workers' group living quarters and job corps centers"),
    (997, "Other noninstitutional (702, 704, 706, 903, 904)"),
)  # fmt: skip
RELGQ_LEVELS: tuple[str, ...] = _HH + tuple(f"GQ {c} {n}" for c, n in _GQ_TYPES)
"""``relgq`` level ``k``: 0..17 the relationship to the householder of a person in a
household, 18..41 the GQ type of a person in group quarters (production's order)."""

GQ_CODES: tuple[int, ...] = tuple(c for c, _ in _GQ_TYPES)
"""The three-digit GQ type of ``relgq`` levels 18..41."""

FIRST_GQ_RELGQ = len(_HH)
"""The first ``relgq`` level of a person in group quarters (18: GQ 101); ``relgq``
level ``FIRST_GQ_RELGQ + k`` is the GQ type ``GQ_CODES[k]``."""

TENVACGQ_LEVELS: tuple[str, ...] = (
    ("Owned with a mortgage or loan", "Owned free and clear", "Rented", "Occupied without rent")
    + tuple(f"Vacant: {v}" for v in (
        "for rent", "rented, not occupied", "for sale only", "sold, not occupied",
        "for seasonal, recreational, or occasional use", "for migrant workers", "other",
    ))
    + tuple(f"GQ {c} {n}" for c, n in _GQ_TYPES)
)  # fmt: skip
"""``tenvacgq`` level ``k``: 0..3 occupied units by tenure, 4..10 vacant units by status,
11..34 group-quarters units by type (production's ``TenureVacancyGQAttr``)."""


def _identity(name: str, levels: Sequence[str]) -> Attribute:
    n = len(levels)
    return Attribute(name, tuple(levels), name, tuple(range(n)), 0, name, tuple(range(n)))


def _recode(source: str, name: str, size: int, groups: dict[str, Sequence[int]]) -> Recode:
    """A recode of ``source`` (``size`` levels) from its groups, each a label and the
    source levels it takes; the groups must partition the source's levels."""
    mapping = [-1] * size
    for g, members in enumerate(groups.values()):
        for m in members:
            if mapping[m] != -1:
                raise SchemaError(f"recode {name!r}: level {m} of {source!r} is in two groups")
            mapping[m] = g
    if -1 in mapping:
        raise SchemaError(
            f"recode {name!r}: level {mapping.index(-1)} of {source!r} is in no group"
        )
    return Recode(name, source, tuple(groups), tuple(mapping))


def _age_groups(name: str, singles: int, cuts: Sequence[int]) -> Recode:
    """Single years below ``singles``, then ranges starting at ``cuts``, the last to 115."""
    groups: dict[str, Sequence[int]] = {str(a): [a] for a in range(singles)}
    bounds = [*cuts, MAX_AGE + 1]
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        groups[f"{lo} to {hi - 1}"] = range(lo, hi)
    return _recode("age", name, MAX_AGE + 1, groups)


_FIVE_YEARS = (20, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65, 67, 70, 75, 80, 85, 90, 95, 100, 105)
_110 = 110
_R = range


def _person_recodes() -> tuple[Recode, ...]:
    """The recodes of the DHCP strategies and orderings (``relgq.py``, ``age.py``)."""
    n = len(RELGQ_LEVELS)
    rel = {RELGQ_LEVELS[k]: [k] for k in range(18)}
    eight_gq = {
        "Correctional facilities for adults": _R(18, 24),
        "Juvenile facilities": _R(24, 27),
        "Nursing facilities/Skilled-nursing facilities": [27],
        "Other institutional facilities": _R(28, 33),
        "College/University student housing": [33],
        "Military quarters": [34, 35],
        "Other noninstitutional facilities": _R(36, 42),
    }
    return (
        _recode("relgq", "relgq_4_groups", n, {
            "Householders": [0, 1], "Non-householders in households": _R(2, 18),
            "Institutionalized population": _R(18, 33),
            "Noninstitutionalized population": _R(33, 42),
        }),
        _recode("relgq", "gq_constr_groups", n, {
            "In a household": _R(18), "GQ with an age floor of 3 (405)": [32],
            "GQ with an age floor of 15 (101-105)": _R(18, 23),
            "GQ with an age floor of 16 (501, 801-901, 997)": [33, *_R(37, 42)],
            "GQ with an age floor of 17 (106, 404, 601, 602)": [23, 31, 34, 35],
            "GQ without an age floor": [*_R(24, 31), 36],
        }),
        _recode("relgq", "popsehsdtargetsrelship", n, {**rel, "In group quarters": _R(18, 42)}),
        _recode("relgq", "relship_and_eight_level_gq", n, {**rel, **eight_gq}),
        _recode("relgq", "hhgq8lev", n, {"Household": _R(18), **eight_gq}),
        # the same groups under the name of the other schemas' group attribute: TopDown's
        # group bounds (households vs GQ major types) and the P.L. 94 tables read "hhgq"
        _recode("relgq", "hhgq", n, {"Household": _R(18), **eight_gq}),
        _recode("age", "age_18_64_116", MAX_AGE + 1, {
            "Under 18": _R(18), "18 to 64": _R(18, 65), "65 and over": _R(65, MAX_AGE + 1),
        }),
        _age_groups("age_38_groups", 15, (15, 18, *_FIVE_YEARS, _110)),
        _age_groups("age_40_groups", 18, (18, *_FIVE_YEARS, _110)),
        _recode("age", "age_10_groups", MAX_AGE + 1, {
            "Under 3": _R(3), "3 to 14": _R(3, 15), "15": [15], "16": [16], "17": [17],
            "18 to 19": _R(18, 20), "20 to 24": _R(20, 25), "25 to 29": _R(25, 30),
            "30 to 34": _R(30, 35), "35 and over": _R(35, MAX_AGE + 1),
        }),
        _recode("age", "votingage", MAX_AGE + 1, {
            "Under 18 years": _R(18), "18 years and over": _R(18, MAX_AGE + 1),
        }),
    )  # fmt: skip


_OLD = MAX_AGE + 1
_PERSON_AGE_RULES: tuple[tuple[int, str, Sequence[int]], ...] = (
    *((k, "lt15", _R(15)) for k in range(6)),
    *((k, "gt89", _R(90, _OLD)) for k in (6, 7, 8)),
    (10, "lt30", _R(30)), (11, "gt74", _R(75, _OLD)), (12, "lt30", _R(30)),
    (13, "lt15_gt89", [*_R(15), *_R(90, _OLD)]), (16, "gt20", _R(21, _OLD)),
    *((k, "lt15", _R(15)) for k in range(18, 23)),
    (23, "lt17_gt65", [*_R(17), *_R(66, _OLD)]),
    *((k, "gt25", _R(26, _OLD)) for k in (24, 25, 26)),
    (27, "lt20", _R(20)), (31, "lt17_gt65", [*_R(17), *_R(66, _OLD)]),
    (32, "lt3_gt30", [*_R(3), *_R(31, _OLD)]), (33, "lt16_gt65", [*_R(16), *_R(66, _OLD)]),
    (34, "lt17_gt65", [*_R(17), *_R(66, _OLD)]), (35, "lt17_gt65", [*_R(17), *_R(66, _OLD)]),
    (37, "lt16", _R(16)), (38, "lt16", _R(16)), (39, "lt16_gt75", [*_R(16), *_R(76, _OLD)]),
)  # fmt: skip
"""Production's ``relgq*`` structural zeros as configured: (relgq level, ages ruled out)."""


RELGQ = _identity("relgq", RELGQ_LEVELS)

DHCP_2020 = Schema(
    name="dhcp-2020",
    attributes=(RELGQ, SEX, AGE, HISPANIC, CENRACE),
    recodes=_person_recodes(),
    structural_zeros=tuple(
        StructuralZero(f"relgq{k}_{rule}", (("relgq", (k,)), ("age", tuple(ages))))
        for k, rule, ages in _PERSON_AGE_RULES
    ),
)
"""The 2020 DHC person schema (``DHCP_SCHEMA``), 1,227,744 cells."""

HHTYPE_DHCH_TYPES: tuple[HouseholdType, ...] = household_types()
"""Level ``k`` of ``hhtype_dhch`` is the ``k``-th household type (522)."""


def _where(test: Callable[[HouseholdType], bool]) -> tuple[int, ...]:
    return types_where(HHTYPE_DHCH_TYPES, test)


def _type_groups(
    axes: Sequence[Sequence[tuple[str, Callable[[HouseholdType], bool]]]],
) -> dict[str, Sequence[int]]:
    """Production's product recodes: one group per combination of the axes' conditions
    (in product order) that some type meets. Each axis's conditions partition the types."""
    keys = []
    for t in HHTYPE_DHCH_TYPES:
        key = tuple(next(i for i, (_, test) in enumerate(axis) if test(t)) for axis in axes)
        keys.append(key)
    members: dict[tuple[int, ...], list[int]] = {}
    for level, key in sorted(enumerate(keys), key=lambda lk: (lk[1], lk[0])):
        members.setdefault(key, []).append(level)
    return {", ".join(axes[a][i][0] for a, i in enumerate(k)): m for k, m in members.items()}


def _couple(order: Sequence[int]) -> list[tuple[str, Callable[[HouseholdType], bool]]]:
    return [(COUPLES[c], lambda t, c=c: t.couple == c) for c in order]


_PARTNER = [
    ("no spouse or partner", lambda t: t.couple == 0),
    ("married", lambda t: t.married),
    ("cohabiting", lambda t: t.couple in (3, 4)),
]
_OWN4 = [
    (f"own children {OWN_CHILDREN[k]}", lambda t, k=k: t.own_children == k) for k in (1, 0, 2, 3)
]
_OWN_DET = [
    (f"own children {OWN_CHILDREN[k]}", lambda t, k=k: t.own_children == k) for k in range(4)
]
_OWN2 = [
    ("no own children", lambda t: not t.own_children),
    ("own children", lambda t: t.own_children > 0),
]
_MULTIG = [
    ("not multigenerational", lambda t: not t.multig),
    ("multigenerational", lambda t: t.multig == 1),
]
_SIZE = [(f"size {s}", lambda t, s=s: t.size == s) for s in range(1, 8)]
_COUPLE_ORDER = (0, 2, 1, 4, 3)  # production's: none, married same-sex, married opposite-sex, ...


def _household_recodes() -> tuple[Recode, ...]:
    """The recodes of the DHCH strategies and orderings (``hhtype_dhch.py``,
    ``hhtenshort_3lev.py``)."""
    n = len(HHTYPE_DHCH_TYPES)
    return (
        _recode("hhtype_dhch", "multig", n, {
            "Not multigenerational": _where(lambda t: not t.multig),
            "Multigenerational": _where(lambda t: t.multig == 1),
        }),
        _recode("hhtype_dhch", "partner_type_detailed_own_child_status", n,
                _type_groups([_PARTNER, _OWN4])),
        _recode("hhtype_dhch", "coupled_hh_type", n, {
            "Married same-sex": _where(lambda t: t.couple == 2),
            "Married opposite-sex": _where(lambda t: t.couple == 1),
            "Unmarried same-sex": _where(lambda t: t.couple == 4),
            "Unmarried opposite-sex": _where(lambda t: t.couple == 3),
            "No spouse or partner": _where(lambda t: t.couple == 0),
        }),
        _recode("hhtype_dhch", "detailedcoupletypemultgenownchildsize", n,
                _type_groups([_couple(_COUPLE_ORDER), _MULTIG, _OWN2, _SIZE])),
        _recode("hhtype_dhch", "detailedcoupletypemultgendetownchildsize", n,
                _type_groups([_couple(_COUPLE_ORDER), _MULTIG, _OWN_DET, _SIZE])),
        _recode("hhtenshort_3lev", "hhtenshort_2lev", 3, {"Owned": [0, 1], "Not owned": [2]}),
    )  # fmt: skip


_UNDER60, _AGE60_64, _AGE65_74, _AGE75PLUS = _R(5), (5,), (6,), (7, 8)
_ELDERLY_RULES = (  # householder's age -> elderly levels it rules out when no one else decides
    ("eld0", _UNDER60, (1, 2, 3)),
    ("eld1", _AGE60_64, (0, 2, 3)),
    ("eld2", _AGE65_74, (0, 1, 3)),
    ("eld3", _AGE75PLUS, (0, 1, 2)),
)


def _household_zeros() -> tuple[StructuralZero, ...]:
    """Production's unit constraints that are zeros of the household histogram."""
    zeros: list[StructuralZero] = []

    def zero(
        name: str, test: Callable[[HouseholdType], bool], *more: tuple[str, Sequence[int]]
    ) -> None:
        levels = (("hhtype_dhch", _where(test)), *((v, tuple(lv)) for v, lv in more))
        zeros.append(StructuralZero(name, levels))

    def has_child_x(t: HouseholdType) -> bool:
        return bool(t.own_children or t.children)

    for rule, ages, elderly in _ELDERLY_RULES:  # living_alone: the householder decides
        zero(f"living_alone_{rule}", lambda t: t.size == 1, ("hhage", ages), ("elderly", elderly))
    zero("living_alone_childalone", lambda t: t.size == 1 and t.any_child == 1, ("hhage", _R(1, 9)))
    # size2: with a child (the householder or the other person), the householder decides
    zero(
        "size2_eld0",
        lambda t: t.size == 2 and has_child_x(t),
        ("hhage", _UNDER60),
        ("elderly", (1, 2, 3)),
    )
    for rule, ages, elderly in _ELDERLY_RULES[1:]:
        zero(
            f"size2_{rule}",
            lambda t: t.size == 2 and (has_child_x(t) or t.any_child == 1),
            ("hhage", ages),
            ("elderly", elderly),
        )
    zero(
        "size2_le25_eld3", lambda t: t.size == 2 and t.partnered, ("hhage", (0,)), ("elderly", (3,))
    )
    zero(
        "size3_le25_eld3",
        lambda t: t.size == 3 and t.partnered and t.own_children > 0,
        ("hhage", (0,)),
        ("elderly", (3,)),
    )
    for rule, ages, elderly in _ELDERLY_RULES:  # size3: a householder and two own children
        zero(
            f"size3_{rule}",
            lambda t: t.size == 3 and t.own_children == 3,
            ("hhage", ages),
            ("elderly", elderly),
        )
    zero(
        "size4_le25_eld3",
        lambda t: t.size == 4 and t.own_children == 3 and t.partnered,
        ("hhage", (0,)),
        ("elderly", (3,)),
    )
    zero("hh_elderly_eld3", lambda t: True, ("hhage", _AGE75PLUS), ("elderly", (0, 1, 2)))
    zero("hh_elderly_2", lambda t: True, ("hhage", _AGE65_74), ("elderly", (0, 1)))
    zero("hh_elderly_3", lambda t: True, ("hhage", _AGE60_64), ("elderly", (0,)))
    under6 = (1, 3)
    zero("age_child_1", lambda t: t.own_children in under6, ("sex", (0,)), ("hhage", _AGE75PLUS))
    zero("age_child_2", lambda t: t.own_children > 0, ("sex", (1,)), ("hhage", _AGE75PLUS))
    zero("age_child_3", lambda t: t.own_children in under6, ("sex", (1,)), ("hhage", _R(5, 9)))
    return tuple(zeros)  # fmt: skip


DHCH_2020 = Schema(
    name="dhch-2020",
    attributes=(
        _identity("sex", SEX.levels),
        _identity("hhage", HHAGE_LEVELS),
        _identity("hisp", HISPANIC.levels),
        _identity("race", HHRACE_LEVELS),
        _identity("elderly", HHELDERLY_LEVELS),
        _identity(
            "hhtenshort_3lev",
            ("Owned with a mortgage or loan", "Owned free and clear", "Not owned"),
        ),
        _identity("hhtype_dhch", tuple(type_label(t) for t in HHTYPE_DHCH_TYPES)),
    ),
    recodes=_household_recodes(),
    structural_zeros=_household_zeros(),
)
"""The 2020 DHC household schema (``DHCH_SCHEMA_TEN_3LEV``), 1,578,528 cells."""

HHGQ_UNIT_VECTOR = "hhgq_unit_vector"
"""The recode of ``tenvacgq`` production's ``gq_vect`` holds exact (``CC.HHGQ_UNIT_VECTOR``):
level 0 the housing units (occupied or vacant, ``tenvacgq`` 0..10), level ``1 + k`` the
facilities of the ``k``-th GQ type (``tenvacgq`` ``11 + k``)."""

H1_UNIT_VECTOR = "h1_unit_vector"
"""The recode of ``tenvacgq`` that production's ``gq_vect`` and ``h1`` together hold exact
when the run has an earlier H1 release: level 0 the vacant housing units (``tenvacgq``
4..10, production's ``H1Attr`` level 0, ``Vacant``), level 1 the occupied ones (0..3),
level ``2 + k`` the facilities of the ``k``-th GQ type (``tenvacgq`` ``11 + k``)."""

_GQ_UNIT_GROUPS = {lv: (11 + k,) for k, lv in enumerate(TENVACGQ_LEVELS[11:])}

DHC_UNITS_2020 = Schema(
    name="dhc-units-2020",
    attributes=(_identity("tenvacgq", TENVACGQ_LEVELS),),
    recodes=(
        _recode(
            "tenvacgq",
            HHGQ_UNIT_VECTOR,
            len(TENVACGQ_LEVELS),
            {"Housing unit": range(11), **_GQ_UNIT_GROUPS},
        ),
        _recode(
            "tenvacgq",
            H1_UNIT_VECTOR,
            len(TENVACGQ_LEVELS),
            {"Vacant": range(4, 11), "Occupied": range(4), **_GQ_UNIT_GROUPS},
        ),
    ),
)
"""The DHC household run's unit histogram (``UNIT_TABLE_10_TENVACSGQ``), 35 cells."""

QUERY_ORDERINGS: dict[str, dict[str, tuple[tuple[str, ...], ...]]] = {
    "dhcp-2020": {  # test_strategy_regular_ordering_dhcp_20220811_exp_21_1, every geolevel
        "l2": (
            (
                "age_18_64_116 * relgq_4_groups", "age_18_64_116 * sex", "age_38_groups * sex",
                "hispanic * sex", "sex * relgq_4_groups",
                "hispanic * sex * age_40_groups * hhgq8lev * cenrace",
                "gq_constr_groups * age_10_groups", "popsehsdtargetsrelship",
                "hispanic * sex * age_40_groups * relship_and_eight_level_gq * cenrace",
                "relgq * age_40_groups * hispanic * cenrace * sex",
            ),
            ("detailed",),
        ),
        "constrain_to": (("relgq * age_40_groups * hispanic * cenrace * sex",), ("detailed",)),
        "rounder": (
            (
                "hispanic * sex * votingage * hhgq8lev * cenrace",
                "hispanic * sex * age_18_64_116 * hhgq8lev * cenrace",
                "hispanic * sex * age_40_groups * relship_and_eight_level_gq * cenrace",
                "relgq * age_40_groups * hispanic * cenrace * sex",
            ),
            ("detailed",),
        ),
    },
    "dhch-2020": {  # test_strategy_regular_ordering_dhch_20220922_exp_iteration_23_1
        "l2": (
            ("tenvacgq",),
            (
                "multig * hisp * hhtenshort_2lev", "hisp * hhtenshort_2lev",
                "hisp * hhtenshort_2lev * race",
                "partner_type_detailed_own_child_status * sex * hhtenshort_2lev",
                "coupled_hh_type * hisp * hhtenshort_2lev",
                "sex * hisp * hhtenshort_3lev * race * detailedcoupletypemultgendetownchildsize",
            ),
            (
                "sex * hisp * hhtenshort_3lev * race * hhage"
                " * detailedcoupletypemultgendetownchildsize",
                "hhtenshort_3lev * hhage * detailedcoupletypemultgendetownchildsize",
                "detailed",
            ),
        ),
        "constrain_to": (
            ("tenvacgq",),
            ("sex * hisp * hhtenshort_3lev * race * detailedcoupletypemultgenownchildsize",),
            ("detailed",),
        ),
        "rounder": (
            ("tenvacgq",),
            (
                "hhtenshort_3lev * detailedcoupletypemultgendetownchildsize",
                "sex * hisp * hhtenshort_3lev * race * detailedcoupletypemultgendetownchildsize",
            ),
            ("detailed",),
        ),
    },
}  # fmt: skip
"""Production's query orderings of the DHC runs (``programs/strategies/dhcp_strategies.py``,
``dhch_strategies.py``; the configurations' ``query_ordering``), as data: per schema, the
least-squares passes (``l2``), the queries each pass holds for the later ones
(``constrain_to``) and the rounding passes (``rounder``), the same at every geolevel.
Verbatim except for case; where production names a query its strategy does not measure
(``hispanic * sex * age_40_groups * hhgq8lev * cenrace`` in the person ``l2`` pass) or a
query of the unit histogram (``tenvacgq``), so do these. TopDown runs both
(``release.topdown.passes``, ``PRODUCTION_PASSES["dhcp-2020"]`` and ``["dhch-2020"]``; the
household ordering's ``tenvacgq`` pass is the unit histogram's own TopDown, docs/dhc-2020.md)."""

DHC_SCHEMA_NAMES: tuple[str, ...] = (DHCP_2020.name, DHCH_2020.name, DHC_UNITS_2020.name)
"""The schemas of this module; ``censusdp run`` does not release them yet."""

register_schema(DHCP_2020)
register_schema(DHCH_2020, unit_schema=DHC_UNITS_2020)
register_schema(DHC_UNITS_2020)
