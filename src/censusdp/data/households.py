"""Households: relationship codes, and each household's attributes derived from its persons.

A household is the persons of one occupied housing unit. One of them is its
**householder** (``rel`` 0); every other member has a relationship to the householder.
The codes of ``rel`` (:data:`REL_LEVELS`) are the 15 household relationships of the
2010 Census questionnaire as the 2010 Demonstration Data Product (DDP) coded them
(its ``rel`` attribute, levels 0..14), then two group-quarters codes: censusdp has the
seven major group-quarters types (``hhgq`` 1..7) where the DDP had 28 detailed ones, so
a person in group quarters is ``rel`` 15 (institutional, ``hhgq`` 1..4) or 16
(non-institutional, ``hhgq`` 5..7), as the 2010 summary tables split them.

The household attributes are those of the DDP's ``Household2010`` schema, each level
``i`` coded ``i`` (docs/households.md has the rules with examples):

* ``hhsex``, ``hhhisp``: the householder's sex (0 male, 1 female) and Hispanic origin;
* ``hhage``: the householder's age in 9 bins (:data:`HHAGE_LOWER`); a householder is at
  least 15;
* ``hhrace``: the householder's race alone (0..5, CENRACE 1..6) or two or more races (6);
* ``hhsize``: the number of persons, 7 meaning 7 or more (level 0, "0 persons", is the
  DDP's and never a household's);
* ``hhtype`` (24 levels, :data:`HHTYPE_LEVELS`): married (a husband/wife, ``rel`` 1),
  else cohabiting (an unmarried partner, ``rel`` 13), else neither; opposite- or
  same-sex couple (the partner's sex against the householder's); the ages of the
  householder's own children under 18 (``rel`` 2, 3, 4: biological, adopted, step;
  under 6 only, 6 to 17 only, or both); without own children under 18, whether another
  relative (``rel`` 2..10) lives there (cohabiting and no-partner types), or whether the
  householder lives alone;
* ``hhelderly``: the oldest member is under 60 (0), 60..64 (1), 65..74 (2), 75+ (3);
* ``hhmulti``: three or more generations (the Census definition): a child (``rel`` 2,
  3, 4, or a son/daughter-in-law 9) and a grandchild (7), or a parent or parent-in-law
  (6, 8) and a child.

Everything is vectorised over whole columns: no Python loop over persons or households.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from censusdp.errors import InternalError

__all__ = [
    "CITIZEN_LEVELS",
    "GQ_INSTITUTIONAL",
    "GQ_NONINSTITUTIONAL",
    "HHAGE_LEVELS",
    "HHAGE_LOWER",
    "HHELDERLY_LEVELS",
    "HHMULTI_LEVELS",
    "HHRACE_LEVELS",
    "HHSIZE_LEVELS",
    "HHTYPE_LEVELS",
    "HOUSEHOLD_ATTRIBUTES",
    "MIN_HOUSEHOLDER_AGE",
    "REL_LEVELS",
    "Households",
    "derive_households",
    "household_rules",
    "rel_of_gq",
]

REL_LEVELS: tuple[str, ...] = (
    "Householder",
    "Husband/Wife",
    "Biological son/daughter",
    "Adopted son/daughter",
    "Stepson/Stepdaughter",
    "Brother/Sister",
    "Father/Mother",
    "Grandchild",
    "Parent-in-law",
    "Son/Daughter-in-law",
    "Other relative",
    "Roomer, boarder",
    "Housemate, roommate",
    "Unmarried partner",
    "Other nonrelative",
    "Institutionalized group quarters population",
    "Noninstitutionalized group quarters population",
)
"""``rel`` code ``k`` is level ``k``: 0..14 the DDP's household relationships, 15 and 16
persons in group quarters."""

HOUSEHOLDER, SPOUSE, BIO_CHILD, ADOPTED_CHILD, STEPCHILD = 0, 1, 2, 3, 4
SIBLING, PARENT, GRANDCHILD, PARENT_IN_LAW, CHILD_IN_LAW, OTHER_RELATIVE = 5, 6, 7, 8, 9, 10
ROOMER, HOUSEMATE, PARTNER, OTHER_NONRELATIVE = 11, 12, 13, 14
GQ_INSTITUTIONAL, GQ_NONINSTITUTIONAL = 15, 16
MAX_HOUSEHOLD_REL = OTHER_NONRELATIVE

CITIZEN_LEVELS: tuple[str, ...] = ("Non-citizen", "Citizen")
"""``citizen`` code ``k`` is level ``k`` (the DDP's ``citizen`` attribute)."""

MIN_HOUSEHOLDER_AGE = 15

HHAGE_LOWER: tuple[int, ...] = (15, 25, 35, 45, 55, 60, 65, 75, 85)
"""The first age of each ``hhage`` level."""
HHAGE_LEVELS: tuple[str, ...] = (
    "Householder 15 to 24 years",
    "Householder 25 to 34 years",
    "Householder 35 to 44 years",
    "Householder 45 to 54 years",
    "Householder 55 to 59 years",
    "Householder 60 to 64 years",
    "Householder 65 to 74 years",
    "Householder 75 to 84 years",
    "Householder 85 years and over",
)
HHRACE_LEVELS: tuple[str, ...] = (
    "Householder is White alone",
    "Householder is Black or African American alone",
    "Householder is American Indian and Alaska Native alone",
    "Householder is Asian alone",
    "Householder is Native Hawaiian and Other Pacific Islander alone",
    "Householder is Some Other Race alone",
    "Householder is two or more races",
)
HHSIZE_LEVELS: tuple[str, ...] = tuple(
    ["0-person household", "1-person household"]
    + [f"{k}-person household" for k in range(2, 7)]
    + ["7-or-more-person household"]
)
_CHILD_AGES = ("under 6 years only", "6 to 17 years only", "under 6 and 6 to 17 years")
HHTYPE_LEVELS: tuple[str, ...] = tuple(
    [f"Married opposite-sex, own children {a}" for a in _CHILD_AGES]
    + ["Married opposite-sex, no own children under 18"]
    + [f"Married same-sex, own children {a}" for a in _CHILD_AGES]
    + ["Married same-sex, no own children under 18"]
    + [f"Cohabiting opposite-sex, own children {a}" for a in _CHILD_AGES]
    + ["Cohabiting opposite-sex, relatives, no own children under 18"]
    + ["Cohabiting opposite-sex, no relatives, no own children under 18"]
    + [f"Cohabiting same-sex, own children {a}" for a in _CHILD_AGES]
    + ["Cohabiting same-sex, relatives, no own children under 18"]
    + ["Cohabiting same-sex, no relatives, no own children under 18"]
    + ["No spouse or partner, alone"]
    + [f"No spouse or partner, own children {a}" for a in _CHILD_AGES]
    + ["No spouse or partner, relatives, no own children under 18"]
    + ["No spouse or partner, no relatives, not alone"]
)
"""The DDP's 24 household types, in its order (level ``k`` is code ``k``)."""
HHELDERLY_LEVELS: tuple[str, ...] = (
    "No one 60 or over",
    "At least one person 60 or over, no one 65 or over",
    "At least one person 65 or over, no one 75 or over",
    "At least one person 75 or over",
)
HHMULTI_LEVELS: tuple[str, ...] = (
    "Household does not have three or more generations",
    "Household has three or more generations",
)

HOUSEHOLD_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "hhsex": ("Male", "Female"),
    "hhage": HHAGE_LEVELS,
    "hhhisp": ("Not Hispanic or Latino", "Hispanic or Latino"),
    "hhrace": HHRACE_LEVELS,
    "hhsize": HHSIZE_LEVELS,
    "hhtype": HHTYPE_LEVELS,
    "hhelderly": HHELDERLY_LEVELS,
    "hhmulti": HHMULTI_LEVELS,
}
"""Each derived household attribute and its levels, in the order of the DDP's schema."""


def rel_of_gq(hhgq: np.ndarray) -> np.ndarray:
    """The ``rel`` code of a person in group quarters of type ``hhgq`` (1..7): 15 for an
    institution (1..4), 16 otherwise (0 stays -1: a household person has no GQ code)."""
    hhgq = np.asarray(hhgq)
    return np.where(hhgq == 0, -1, np.where(hhgq <= 4, GQ_INSTITUTIONAL, GQ_NONINSTITUTIONAL))


@dataclass(frozen=True, eq=False)
class Households:
    """One record per household (occupied housing unit), in the order of its unit's row.

    Attributes:
        unit: the row of the household's unit (in the units' columns).
        householder: the row of its householder (in the persons' columns).
        persons: the exact number of its persons.
        attributes: :data:`HOUSEHOLD_ATTRIBUTES` name -> level of each household.
    """

    unit: np.ndarray
    householder: np.ndarray
    persons: np.ndarray
    attributes: dict[str, np.ndarray]

    @property
    def n_households(self) -> int:
        """Number of households."""
        return int(self.unit.size)


def _repeated_within(unit_row: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The rows of ``mask`` that are not the first such row of their unit."""
    idx = np.flatnonzero(mask)
    order = idx[np.argsort(unit_row[idx], kind="stable")]
    out = np.zeros(mask.size, dtype=bool)
    out[order[1:][unit_row[order[1:]] == unit_row[order[:-1]]]] = True
    return out


def household_rules(
    unit_row: np.ndarray,
    hhgq: np.ndarray,
    rel: np.ndarray,
    age: np.ndarray,
    household_unit: np.ndarray,
) -> list[tuple[str, np.ndarray, str]]:
    """``(person column, rows breaking the rule, rule)`` of every rule a person's ``rel``
    must meet, then ``("unit", units breaking it, rule)`` of the one rule on units.

    Args:
        unit_row: each person's unit row (``-1``: no such unit; such rows are skipped).
        hhgq, rel, age: person columns, codes already in range.
        household_unit: for each unit row, whether it is an occupied housing unit.
    """
    has = unit_row >= 0
    in_household = has & (hhgq == 0)
    gq_rel = rel_of_gq(hhgq)
    head = in_household & (rel == HOUSEHOLDER)
    heads = np.bincount(unit_row[head], minlength=household_unit.size)
    return [
        ("rel", in_household & (rel > MAX_HOUSEHOLD_REL),
         "is a group-quarters code (15, 16) but the person is in a household (hhgq 0)"),
        ("rel", has & (hhgq > 0) & (rel != gq_rel),
         "is not the code of the person's group quarters (15 for hhgq 1..4, 16 for 5..7)"),
        ("rel", _repeated_within(unit_row, head),
         "is a second householder (0) in the person's unit"),
        ("rel", _repeated_within(unit_row, in_household & (rel == SPOUSE)),
         "is a second husband/wife (1) in the person's unit"),
        ("rel", _repeated_within(unit_row, in_household & (rel == PARTNER)),
         "is a second unmarried partner (13) in the person's unit"),
        ("age", head & (age < MIN_HOUSEHOLDER_AGE),
         f"is the age of a householder (rel 0), who must be at least {MIN_HOUSEHOLDER_AGE}"),
        ("unit", household_unit & (heads == 0),
         "is an occupied housing unit with no householder (no person with rel 0)"),
    ]  # fmt: skip


def _any_by_unit(unit: np.ndarray, mask: np.ndarray, n: int) -> np.ndarray:
    return np.bincount(unit[mask], minlength=n) > 0


def _children_level(unit: np.ndarray, own: np.ndarray, age: np.ndarray, n: int) -> np.ndarray:
    """0 no own child under 18; 1 under 6 only; 2 6..17 only; 3 both."""
    under6 = _any_by_unit(unit, own & (age < 6), n)
    older = _any_by_unit(unit, own & (age >= 6) & (age < 18), n)
    return under6.astype(np.int64) + 2 * older.astype(np.int64)


def _household_type(
    married: np.ndarray,
    cohabiting: np.ndarray,
    same_sex: np.ndarray,
    children: np.ndarray,
    relatives: np.ndarray,
    alone: np.ndarray,
) -> np.ndarray:
    """The DDP's 24 types from per-household flags (``children``: 0..3 as
    :func:`_children_level`)."""
    with_kids = children > 0
    kid = children - 1  # 0 under 6 only, 1 6..17 only, 2 both
    married_t = np.where(same_sex, 4, 0) + np.where(with_kids, kid, 3)
    cohab_t = np.where(same_sex, 13, 8) + np.where(with_kids, kid, np.where(relatives, 3, 4))
    single_t = np.where(alone, 18, np.where(with_kids, 19 + kid, np.where(relatives, 22, 23)))
    return np.where(married, married_t, np.where(cohabiting, cohab_t, single_t)).astype(np.int64)


def derive_households(
    unit_row: np.ndarray,
    n_units: int,
    persons: dict[str, np.ndarray],
) -> Households:
    """Each household's attributes, derived from its persons.

    Args:
        unit_row: each person's unit row (0..``n_units - 1``).
        n_units: the number of units.
        persons: person columns ``hhgq``, ``rel``, ``sex`` (1, 2), ``age``,
            ``hispanic``, ``cenrace`` (1..63), valid and meeting
            :func:`household_rules` (one householder per household).

    Returns:
        One record per unit holding a household person, in unit-row order.
    """
    rel, sex, age = persons["rel"], persons["sex"], persons["age"]
    hh = persons["hhgq"] == 0
    unit, rel, sex, age = unit_row[hh], rel[hh], sex[hh], age[hh]
    rows = np.flatnonzero(hh)
    size = np.bincount(unit, minlength=n_units)
    units = np.flatnonzero(size > 0)
    head_at = np.full(n_units, -1, dtype=np.int64)
    head = rel == HOUSEHOLDER
    head_at[unit[head]] = np.flatnonzero(head)
    h = head_at[units]  # index into the household persons
    if (h < 0).any():
        raise InternalError(
            f"derive_households: unit row {int(units[h < 0][0])} has no householder; "
            "the input's household rules (household_rules) were not checked"
        )
    head_sex = np.zeros(n_units, dtype=np.int64)
    head_sex[units] = sex[h]
    same = sex == head_sex[unit]

    def any_of(mask: np.ndarray) -> np.ndarray:
        return _any_by_unit(unit, mask, n_units)[units]

    own = (rel >= BIO_CHILD) & (rel <= STEPCHILD)
    child = own | (rel == CHILD_IN_LAW)
    married = any_of(rel == SPOUSE)
    same_sex = np.where(married, any_of((rel == SPOUSE) & same), any_of((rel == PARTNER) & same))
    hhtype = _household_type(
        married,
        any_of(rel == PARTNER),
        same_sex,
        _children_level(unit, own, age, n_units)[units],
        any_of((rel >= BIO_CHILD) & (rel <= OTHER_RELATIVE)),
        size[units] == 1,
    )
    elderly = sum(any_of(age >= a).astype(np.int64) for a in (60, 65, 75))
    parent = (rel == PARENT) | (rel == PARENT_IN_LAW)
    multi = any_of(child) & (any_of(rel == GRANDCHILD) | any_of(parent))
    cenrace = persons["cenrace"][rows[h]]
    attributes = {
        "hhsex": sex[h] - 1,
        "hhage": np.searchsorted(np.asarray(HHAGE_LOWER), age[h], side="right") - 1,
        "hhhisp": persons["hispanic"][rows[h]],
        "hhrace": np.where(cenrace <= 6, cenrace - 1, 6),
        "hhsize": np.minimum(size[units], 7),
        "hhtype": hhtype,
        "hhelderly": elderly,
        "hhmulti": multi.astype(np.int64),
    }
    return Households(
        unit=units.astype(np.int64),
        householder=rows[h].astype(np.int64),
        persons=size[units].astype(np.int64),
        attributes={k: np.asarray(v, dtype=np.int64) for k, v in attributes.items()},
    )
