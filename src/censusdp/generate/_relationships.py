"""Each person's relationship to the householder and citizenship, drawn after the persons.

The persons of a chunk are already drawn (:mod:`censusdp.generate._synth`): household
members in the order of their household, the householder first, each in a role
(householder, spouse or partner, minor, other adult) with an age and a sex. This module
draws, from its own random stream (so that no other column of a seeded run changes):

* the relationship code (``rel``, :data:`censusdp.data.households.REL_LEVELS`) of each
  member, consistent with the ages: a spouse or partner is a husband/wife or an
  unmarried partner (:data:`UNMARRIED_SHARE`, which depends on whether the couple is
  of the same sex); a minor is an own child of the householder (biological, adopted or
  step), a grandchild (only when the householder is at least
  :data:`GRANDPARENT_GAP` years older), another relative or a nonrelative; another
  adult is, in a household of relatives, the householder's child (at least 16 years
  younger), a parent or parent-in-law (at least 16 years older), a brother or sister
  or another relative (otherwise), and in a household of nonrelatives a housemate,
  roomer or other nonrelative. A person in group quarters is ``rel`` 15 or 16;
* citizenship (``citizen``), by race/ethnicity group and age.

The shares and what they are calibrated to are in ``docs/generator.md`` and
``tools/PROVENANCE.md``; every draw is a whole-array operation.
"""

from __future__ import annotations

import numpy as np

from censusdp.data import households as h
from censusdp.generate._synth import ROLE_MINOR, ROLE_OTHER_ADULT, ROLE_PARTNER

__all__ = ["citizenship", "relationships"]

UNMARRIED_SHARE = (0.114, 0.80)
"""P(unmarried partner | couple) for an opposite-sex and a same-sex couple. 2010 Census:
56.4M opposite-sex married couples and 7.2M opposite-sex unmarried-partner households;
131,729 same-sex spouse and 514,735 same-sex unmarried-partner households (C2010BR-14,
Table 2, with the Bureau's revised 2010 same-sex couple counts)."""

GRANDPARENT_GAP = 45
"""A member is a grandchild of the householder only if this many years younger."""

MINOR_GRANDCHILD = 0.12
"""P(grandchild | minor, at least :data:`GRANDPARENT_GAP` years younger than the
householder): about 7% of the children in households are the householder's grandchild."""

MINOR_OTHER = ((h.OTHER_RELATIVE, 0.03), (h.OTHER_NONRELATIVE, 0.025))
"""Shares of the other minors that are another relative or a nonrelative (foster
children); the rest are own children: :data:`OWN_CHILD`."""

OWN_CHILD = ((h.BIO_CHILD, 0.90), (h.ADOPTED_CHILD, 0.025), (h.STEPCHILD, 0.075))
"""Biological, adopted and step children among own children (2010: about 2% of the
householder's children adopted and 5 to 8% stepchildren)."""

NONRELATIVE_HOUSEHOLD = (0.45, 0.06)
"""P(the other adults of a household are nonrelatives) in a household without a spouse,
partner or minor, and in one with them; calibrated so that about 7% of households are
"nonfamily, not alone" (2010: 33.6% nonfamily less 26.7% alone, C2010BR-14 Table 1)."""

ADULT_RELATIVE = {
    "younger": ((h.BIO_CHILD, 0.80), (h.CHILD_IN_LAW, 0.08), (h.OTHER_RELATIVE, 0.12)),
    "older": ((h.PARENT, 0.72), (h.PARENT_IN_LAW, 0.20), (h.OTHER_RELATIVE, 0.08)),
    "same": ((h.SIBLING, 0.60), (h.OTHER_RELATIVE, 0.40)),
}
"""An adult relative by age against the householder's: at least 16 years younger,
at least 16 years older, or otherwise (a grandchild replaces the child at
:data:`GRANDPARENT_GAP` years and more with probability :data:`ADULT_GRANDCHILD`)."""
ADULT_GRANDCHILD = 0.10
NONRELATIVE = ((h.HOUSEMATE, 0.50), (h.ROOMER, 0.20), (h.OTHER_NONRELATIVE, 0.30))

NONCITIZEN = {"hispanic": (0.30, 0.08), "asian": (0.30, 0.08), "other": (0.03, 0.01)}
"""P(non-citizen) of an adult and of a minor, by group (Hispanic; non-Hispanic Asian
alone; everyone else): a modelling assumption whose national total is about 7%, the
2010 American Community Survey's share of non-citizens (21.8M of 309.3M)."""


def _pick(choices: tuple[tuple[int, float], ...], u: np.ndarray) -> np.ndarray:
    """The code of ``choices`` whose cumulative share first exceeds ``u`` (the last one
    for ``u`` beyond the sum)."""
    codes = np.asarray([c for c, _ in choices])
    edges = np.cumsum([p for _, p in choices])
    return codes[np.minimum(np.searchsorted(edges, u, side="right"), codes.size - 1)]


def relationships(
    person_unit: np.ndarray,
    hhgq: np.ndarray,
    role: np.ndarray,
    age: np.ndarray,
    sex: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """The ``rel`` code of every person (persons sorted by unit, a household's
    householder first; ``role`` as :data:`censusdp.generate._synth.ROLE_HOUSEHOLDER`
    ..., -1 in group quarters)."""
    n = person_unit.size
    counts = np.bincount(person_unit)
    start = np.cumsum(counts) - counts
    head = start[person_unit]
    gap = age[head] - age
    u, v = rng.random(n), rng.random(n)
    rel = np.where(hhgq > 0, h.rel_of_gq(hhgq), h.HOUSEHOLDER).astype(np.int64)

    partner = role == ROLE_PARTNER
    same_sex = sex == sex[head]
    unmarried = u < np.where(same_sex, UNMARRIED_SHARE[1], UNMARRIED_SHARE[0])
    rel[partner] = np.where(unmarried, h.PARTNER, h.SPOUSE)[partner]

    minor = role == ROLE_MINOR
    grand = minor & (gap >= GRANDPARENT_GAP) & (u < MINOR_GRANDCHILD)
    other_share = sum(p for _, p in MINOR_OTHER)
    other = minor & ~grand & (v < other_share)
    own = minor & ~grand & ~other
    rel[grand] = h.GRANDCHILD
    rel[other] = _pick(MINOR_OTHER, v[other])
    rel[own] = _pick(OWN_CHILD, u[own])

    adult = role == ROLE_OTHER_ADULT
    couple_or_minor = np.bincount(person_unit[partner | minor], minlength=counts.size) > 0
    p_nonrel = np.where(couple_or_minor, NONRELATIVE_HOUSEHOLD[1], NONRELATIVE_HOUSEHOLD[0])
    nonrel_unit = rng.random(counts.size) < p_nonrel
    nonrel = adult & nonrel_unit[person_unit]
    rel[nonrel] = _pick(NONRELATIVE, u[nonrel])
    relative = adult & ~nonrel
    for key, mask in (
        ("younger", relative & (gap >= 16)),
        ("older", relative & (gap <= -16)),
        ("same", relative & (np.abs(gap) < 16)),
    ):
        rel[mask] = _pick(ADULT_RELATIVE[key], u[mask])
    adult_grand = relative & (gap >= GRANDPARENT_GAP) & (v < ADULT_GRANDCHILD)
    rel[adult_grand] = h.GRANDCHILD
    return rel


def citizenship(
    age: np.ndarray, hispanic: np.ndarray, cenrace: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """``citizen`` (1 citizen, 0 not) of every person (:data:`NONCITIZEN`)."""
    group = np.where(hispanic == 1, 0, np.where(cenrace == 4, 1, 2))  # CENRACE 4: Asian alone
    table = np.asarray([NONCITIZEN[k] for k in ("hispanic", "asian", "other")])
    p = table[group, (age < 18).astype(np.int64)]
    return (rng.random(age.size) >= p).astype(np.int64)
