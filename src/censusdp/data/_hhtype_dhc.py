"""The 522 household types of the 2020 DHC household schema (``hhtype_dhch``).

Production's ``hhtype_dhch`` attribute (DAS_2020_DHC_Production_Code,
``programs/schema/attributes/dhch/hhtype_dhch.py``) is a list of 522 household types,
each a consistent combination of a few facts about the household: its size (1 to 7 or
more), the householder's spouse or partner, whether it is multigenerational, the
householder's own children under 18 by age range, all children under 18 other than the
householder, spouse or partner by age range, whether anyone under 18 lives there (the
householder included), and whether any relative of the householder does. Production
lists the types as the solutions of a constraint problem (its ``hhtype_map.py``).

censusdp derives the same 522 types from the household logic below
(:func:`household_types`), and tests that the set equals production's. The order of the
levels is censusdp's own (:data:`FIELDS` in lexicographic order), not production's; a
type's meaning is its :class:`HouseholdType`, so recodes and constraints select types
by their facts, never by position.

The rules (each a fact of how a household is made up):

* a person alone: no spouse or partner, not multigenerational, no relatives, no other
  children; the person may be under 18 (a child householder living alone);
* a spouse is a relative; so is an own child; a multigenerational household has
  relatives;
* own children are children under 18 other than the householder, spouse or partner, so
  those children's age ranges cover the own children's;
* a child other than the householder, spouse or partner means someone under 18 lives there;
* the size holds at least the householder, the spouse or partner, the children (one
  per age range present), and a relative when one is said to live there and nobody
  counted so far is one (neither a spouse nor an own child, and no child beyond the
  own children who could be one);
* a multigenerational household holds three generations: at least three persons beside
  a spouse or partner; with own children and no other child, one more person (a parent
  or grandchild); with children under 18 but none of them own, a middle generation
  beside them; and, without a spouse or partner and without children other than the
  householder, nobody under 18 (the householder cannot be a child of the middle
  generation).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import NamedTuple

__all__ = [
    "COUPLES",
    "FIELDS",
    "HouseholdType",
    "OWN_CHILDREN",
    "household_types",
    "type_label",
    "types_where",
]

COUPLES: tuple[str, ...] = (
    "no spouse or partner",
    "married opposite-sex",
    "married same-sex",
    "cohabiting opposite-sex",
    "cohabiting same-sex",
)
"""``couple`` code ``k``: the householder's spouse or unmarried partner."""

OWN_CHILDREN: tuple[str, ...] = ("none", "under 6 only", "6 to 17 only", "both ranges")
"""Children under 18 by age range (``own_children`` and ``children`` codes)."""

FIELDS = ("size", "couple", "multig", "own_children", "children", "any_child", "relatives")
"""The facts that make a household type, in the order that sorts the levels."""


class HouseholdType(NamedTuple):
    """One household type.

    Attributes:
        size: persons, 1..7 (7 is seven or more).
        couple: :data:`COUPLES` code.
        multig: 1 for a multigenerational household.
        own_children: the householder's own children under 18 (:data:`OWN_CHILDREN`).
        children: children under 18 other than the householder, spouse or partner
            (own children included), by age range (:data:`OWN_CHILDREN`).
        any_child: 1 when anyone under 18 lives there, the householder included.
        relatives: 1 when a relative of the householder lives there.
    """

    size: int
    couple: int
    multig: int
    own_children: int
    children: int
    any_child: int
    relatives: int

    @property
    def married(self) -> bool:
        """A spouse lives there."""
        return self.couple in (1, 2)

    @property
    def partnered(self) -> bool:
        """A spouse or unmarried partner lives there."""
        return self.couple != 0


_RANGE_COUNT = (0, 1, 1, 2)  # persons needed for children in none / one / one / both ranges


def _minimum_size(t: HouseholdType) -> int:
    partner = int(t.partnered)
    own = _RANGE_COUNT[t.own_children]
    kids = _RANGE_COUNT[t.children]
    n = 1 + partner + max(own, kids)
    if t.relatives and not t.married and not t.own_children and kids <= own:
        n += 1  # a relative who is none of the persons counted so far
    if t.multig:
        n = max(n, 3 + partner)
        if t.own_children and kids == own:
            n = max(n, 2 + partner + own)
        if not t.own_children and t.children:
            n = max(n, 2 + partner + kids)
    return n


def _consistent(t: HouseholdType) -> bool:
    if t.size == 1:
        return not (t.couple or t.multig or t.own_children or t.children or t.relatives)
    if (t.married or t.own_children or t.multig) and not t.relatives:
        return False
    if t.own_children and t.children not in (t.own_children, 3):
        return False
    if t.children and not t.any_child:
        return False
    if t.multig and not t.partnered and not t.children and t.any_child:
        return False
    return _minimum_size(t) <= t.size


def household_types() -> tuple[HouseholdType, ...]:
    """The 522 household types, sorted by :data:`FIELDS` (level ``k`` is the ``k``-th)."""
    grid = itertools.product(range(1, 8), range(5), (0, 1), range(4), range(4), (0, 1), (0, 1))
    return tuple(t for t in (HouseholdType(*g) for g in grid) if _consistent(t))


def types_where(
    types: tuple[HouseholdType, ...], test: Callable[[HouseholdType], bool]
) -> tuple[int, ...]:
    """The levels (indices into ``types``) of the types for which ``test`` holds."""
    return tuple(i for i, t in enumerate(types) if test(t))


def type_label(t: HouseholdType) -> str:
    """A readable label of a household type."""
    size = f"{t.size}+" if t.size == 7 else str(t.size)
    parts = [
        f"size {size}",
        COUPLES[t.couple],
        "multigenerational" if t.multig else "not multigenerational",
        f"own children {OWN_CHILDREN[t.own_children]}",
        f"children {OWN_CHILDREN[t.children]}",
        "someone under 18" if t.any_child else "no one under 18",
        "with relatives" if t.relatives else "no relatives",
    ]
    return ", ".join(parts)
