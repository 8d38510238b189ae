"""The 2020 relationship and group-quarters detail (``relgq``) of generated persons.

The generator writes the 2010 relationship codes (``rel``, 0..14, 15/16 in group
quarters; :data:`censusdp.data.households.REL_LEVELS`) and seven group-quarters types
(``hhgq`` 1..7). The 2020 DHC's person schema reads one attribute instead,
``relgq`` (:data:`censusdp.data.schema_dhc.RELGQ_LEVELS`): 18 relationships to the
householder, with the 2020 categories, and 24 detailed GQ types. :func:`relgq_columns`
derives it from the generated columns, as a column set beside them, so that nothing
the generator writes changes:

* **households**: the 2010 code maps onto the 2020 category. The householder is "living
  alone" when the unit holds one person; a husband or wife is an opposite-sex or a
  same-sex spouse, and an unmarried partner an opposite-sex or a same-sex partner, by
  the householder's sex; a roomer or boarder under 21 is a foster child and one 21 or
  older another nonrelative (production's ``relgq.py`` levels 16 and 17 say so); another
  nonrelative under 18 is a foster child (the generator draws foster children as other
  nonrelatives, ``generate._relationships.MINOR_OTHER``), 18 or older another nonrelative.
  The generator's 2010 draws make most minors own children of the householder whatever
  the householder's age; production's DHC rules them out for old householders
  (``age_child``: no own child under 6 of a man 75+ or of a woman 60+, none under 18 of
  a woman 75+), so such a minor is the householder's grandchild here (4.3% of generated
  Vermont's households had one).
* **group quarters**: each facility gets one detailed type within its major type
  (correctional facilities for adults: 101-106; juvenile facilities: 201-203; nursing
  facilities: 301; other institutional: 401-405; college housing: 501; military: 601,
  602; other noninstitutional: 701, 801, 802, 900, 901, 997), drawn with
  :data:`GQ_DETAIL_SHARES` among the types whose age rules (production's ``relgq*``
  structural zeros) admit every resident. When none does, the facility keeps the
  first type of :data:`GQ_DETAIL_SHARES` for its major type and its residents outside
  that type's ages are counted by :func:`relgq_rule_violations`.

The draw uses its own random stream, from the seed and :data:`STREAM`, and walks the
facilities in ``unit_id`` order: the same seed gives the same column. ``censusdp
generate`` writes the column ``relgq`` into ``persons.parquet`` with this derivation,
each county part drawing its GQ detail from its own stream (the seed, the state, the
county and the part), so a generated file's GQ detail is not that of
``relgq_columns(..., seed=...)`` over the whole file; the household categories are the
same.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from censusdp.data import households as h
from censusdp.data.schema_dhc import DHCP_2020, GQ_CODES
from censusdp.errors import SchemaError

__all__ = ["GQ_DETAIL_SHARES", "STREAM", "relgq_columns", "relgq_rule_violations"]

STREAM = 2020_0034
"""Added to the seed's entropy for the draw of GQ detail (no other column uses it)."""

GQ_DETAIL_SHARES: dict[int, tuple[tuple[int, float], ...]] = {
    1: ((103, 0.55), (104, 0.33), (102, 0.08), (105, 0.03), (101, 0.008), (106, 0.002)),
    2: ((203, 0.45), (202, 0.30), (201, 0.25)),
    3: ((301, 1.0),),
    4: ((401, 0.25), (402, 0.10), (403, 0.10), (404, 0.05), (405, 0.50)),
    5: ((501, 1.0),),
    6: ((601, 0.90), (602, 0.10)),
    7: ((701, 0.20), (801, 0.35), (802, 0.10), (900, 0.01), (901, 0.14), (997, 0.20)),
}
"""For each ``hhgq`` major type, its detailed GQ types and their shares of facilities.
Orders of magnitude of the 2010 Census's group-quarters counts (C2010SR-01, Table 1:
state prisons and local jails hold most of the adult correctional population; group
homes and residential treatment centres about half the juveniles; residential schools
for people with disabilities and mental hospitals most of the other institutions;
group homes for adults the largest noninstitutional type after college housing and
military quarters)."""

_REL_TO_RELGQ = {
    h.BIO_CHILD: 6, h.ADOPTED_CHILD: 7, h.STEPCHILD: 8, h.SIBLING: 9, h.PARENT: 10,
    h.GRANDCHILD: 11, h.PARENT_IN_LAW: 12, h.CHILD_IN_LAW: 13, h.OTHER_RELATIVE: 14,
    h.HOUSEMATE: 15,
}  # fmt: skip
_FIRST_GQ = 18  # relgq of GQ code GQ_CODES[0]


def _allowed_ages() -> np.ndarray:
    """(42, 116) booleans: the ages production's configured ``relgq*`` rules admit."""
    zero = DHCP_2020.structural_zero_mask.reshape(DHCP_2020.shape)
    return ~zero.all(axis=(1, 3, 4))


def _household_relgq(
    rel: np.ndarray, sex: np.ndarray, age: np.ndarray, unit_row: np.ndarray, n_units: int
) -> np.ndarray:
    """2020 categories of household persons (``rel`` 0..14); -1 for GQ persons."""
    out = np.full(rel.shape, -1, dtype=np.int64)
    size = np.bincount(unit_row, minlength=n_units)
    householder_sex = np.zeros(n_units, dtype=np.int64)
    householder_age = np.zeros(n_units, dtype=np.int64)
    is_hh = rel == h.HOUSEHOLDER
    householder_sex[unit_row[is_hh]] = sex[is_hh]
    householder_age[unit_row[is_hh]] = age[is_hh]
    same_sex = sex == householder_sex[unit_row]
    out[is_hh] = np.where(size[unit_row[is_hh]] == 1, 0, 1)
    spouse, partner = rel == h.SPOUSE, rel == h.PARTNER
    out[spouse] = np.where(same_sex[spouse], 4, 2)
    out[partner] = np.where(same_sex[partner], 5, 3)
    for code, category in _REL_TO_RELGQ.items():
        out[rel == code] = category
    # production's age_child rule: no own child under 6 of a man 75+ or a woman 60+, and
    # no own child under 18 of a woman 75+; such a minor is the householder's grandchild
    own = (out >= 6) & (out <= 8)
    head_age, female = householder_age[unit_row], householder_sex[unit_row] == 2
    too_old = ((age < 6) & (head_age >= 75)) | ((age < 6) & female & (head_age >= 60))
    too_old |= (age < 18) & female & (head_age >= 75)
    out[own & too_old] = 11
    roomer, other = rel == h.ROOMER, rel == h.OTHER_NONRELATIVE
    out[roomer] = np.where(age[roomer] < 21, 16, 17)
    out[other] = np.where(age[other] < 18, 16, 17)
    return out


def _facility_relgq(
    rng: np.random.Generator,
    units: Mapping[str, np.ndarray],
    unit_row: np.ndarray,
    age: np.ndarray,
) -> np.ndarray:
    """The detailed GQ type (relgq 18..41) of each unit (-1 for housing units)."""
    allowed = _allowed_ages()
    gqtype = np.asarray(units["gqtype"], dtype=np.int64)
    n_units = gqtype.size
    # ages present in each facility: the youngest and the oldest resident
    lo = np.full(n_units, 200, dtype=np.int64)
    hi = np.full(n_units, -1, dtype=np.int64)
    np.minimum.at(lo, unit_row, age)
    np.maximum.at(hi, unit_row, age)
    out = np.full(n_units, -1, dtype=np.int64)
    order = np.argsort(np.asarray(units["unit_id"]), kind="stable")
    facilities = order[gqtype[order] > 0]
    draws = rng.random(facilities.size)
    index = {c: _FIRST_GQ + k for k, c in enumerate(GQ_CODES)}
    for u, x in zip(facilities.tolist(), draws.tolist(), strict=True):
        types = GQ_DETAIL_SHARES[int(gqtype[u])]
        fits = [
            (index[c], s)
            for c, s in types
            if hi[u] < 0 or allowed[index[c], lo[u] : hi[u] + 1].all()
        ]
        if not fits:
            out[u] = index[types[0][0]]
            continue
        cumulative = np.cumsum([s for _, s in fits])
        pick = int(np.searchsorted(cumulative / cumulative[-1], x, side="right"))
        out[u] = fits[min(pick, len(fits) - 1)][0]
    return out


def relgq_columns(
    persons: Mapping[str, np.ndarray],
    units: Mapping[str, np.ndarray],
    *,
    seed: int,
    rng: np.random.Generator | None = None,
) -> dict[str, np.ndarray]:
    """The 2020 ``relgq`` of every person, and each unit's detailed GQ type.

    Args:
        persons: the generated persons' columns ``unit_id``, ``rel``, ``hhgq``, ``sex``
            (1/2) and ``age`` (``censusdp.io.cef.read_cef(...).persons``).
        units: the units' columns ``unit_id`` and ``gqtype``.
        seed: the seed of the draw of GQ detail (the generator's seed, for example).
        rng: draw the GQ detail from this generator instead of ``seed``'s stream (the
            generator passes each county part's own).

    Returns:
        ``relgq`` per person (0..41, :data:`censusdp.data.schema_dhc.RELGQ_LEVELS`) and
        ``gq_code`` per unit (the three-digit GQ type, 0 for a housing unit).

    Raises:
        SchemaError: for a person whose unit is not among the units.
    """
    unit_ids = np.asarray(units["unit_id"], dtype=np.int64)
    sorter = np.argsort(unit_ids, kind="stable")
    pid = np.asarray(persons["unit_id"], dtype=np.int64)
    pos = np.searchsorted(unit_ids, pid, sorter=sorter)
    pos = np.minimum(pos, unit_ids.size - 1)
    unit_row = sorter[pos]
    if pid.size and not np.array_equal(unit_ids[unit_row], pid):
        bad = pid[unit_ids[unit_row] != pid][0]
        raise SchemaError(f"person column 'unit_id' value {bad} is not a unit_id of the units")
    rel = np.asarray(persons["rel"], dtype=np.int64)
    age = np.asarray(persons["age"], dtype=np.int64)
    sex = np.asarray(persons["sex"], dtype=np.int64)
    relgq = _household_relgq(rel, sex, age, unit_row, unit_ids.size)
    if rng is None:
        rng = np.random.default_rng(np.random.SeedSequence([int(seed), STREAM]))
    facility = _facility_relgq(rng, units, unit_row, age)
    in_gq = np.asarray(persons["hhgq"], dtype=np.int64) > 0
    relgq[in_gq] = facility[unit_row[in_gq]]
    codes = np.asarray((0, *GQ_CODES), dtype=np.int64)
    gq_code = codes[np.where(facility < 0, 0, facility - _FIRST_GQ + 1)]
    return {"relgq": relgq, "gq_code": gq_code}


def relgq_rule_violations(relgq: np.ndarray, age: np.ndarray) -> np.ndarray:
    """Per ``relgq`` level, the persons whose age one of production's configured
    ``relgq*`` rules rules out (``relgq0_lt15``: no householder living alone under 15...)."""
    allowed = _allowed_ages()
    bad = ~allowed[np.asarray(relgq, dtype=np.int64), np.asarray(age, dtype=np.int64)]
    return np.bincount(np.asarray(relgq, dtype=np.int64)[bad], minlength=allowed.shape[0])
