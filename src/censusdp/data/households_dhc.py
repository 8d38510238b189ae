"""Each household's 2020 DHC attributes (the ``dhch-2020`` schema), derived from its persons.

A household is one occupied housing unit. Its ``dhch-2020`` cell
(:data:`censusdp.data.schema_dhc.DHCH_2020`) is read from its persons' ``relgq``
(:data:`censusdp.data.schema_dhc.RELGQ_LEVELS`, levels 0..17 in households), sex, age,
Hispanic origin and race, and its unit's tenure:

* ``sex``, ``hhage``, ``hisp``, ``race``: the householder's (``relgq`` 0 or 1), in the
  levels of the 2010 household schema (:mod:`censusdp.data.households`);
* ``elderly``: persons 60+, 65+, 75+ present (0 none .. 3 someone 75+);
* ``hhtenshort_3lev``: the unit's tenure (0 owned with a mortgage or loan, 1 owned free
  and clear, 2 not owned);
* ``hhtype_dhch``: the household type (:data:`censusdp.data.schema_dhc.HHTYPE_DHCH_TYPES`)
  of its facts: size (7 for seven or more); the spouse (``relgq`` 2 or 4) or unmarried
  partner (3 or 5) and whether of the householder's sex; multigenerational (a child or
  child-in-law of the householder together with a grandchild, parent or parent-in-law,
  as :func:`censusdp.data.households.derive_households` decides it); own children under
  18 (``relgq`` 6-8) by age range; all children under 18 other than the householder,
  spouse or partner, by age range; anyone under 18; any relative (a spouse, ``relgq``
  6-14).

A household whose facts make none of the 522 types gets type ``-1`` (counted by the
caller; generated households always make one).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from censusdp.data.households import HHAGE_LOWER
from censusdp.data.schema_dhc import DHCH_2020, HHTYPE_DHCH_TYPES
from censusdp.errors import InternalError

__all__ = ["dhch_attributes", "dhch_cells"]

_TYPE_INDEX = {t: k for k, t in enumerate(HHTYPE_DHCH_TYPES)}


def _ranges(unit: np.ndarray, mask: np.ndarray, age: np.ndarray, n: int) -> np.ndarray:
    """Per unit: 0 no such child under 18; 1 under 6 only; 2 6..17 only; 3 both."""
    under6 = np.bincount(unit[mask & (age < 6)], minlength=n) > 0
    older = np.bincount(unit[mask & (age >= 6) & (age < 18)], minlength=n) > 0
    return under6.astype(np.int64) + 2 * older.astype(np.int64)


def dhch_attributes(
    unit_row: np.ndarray,
    n_units: int,
    persons: Mapping[str, np.ndarray],
    tenure: np.ndarray,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The occupied units (rows, in order) and each one's ``dhch-2020`` attribute levels.

    Args:
        unit_row: each person's unit row (0..``n_units - 1``).
        n_units: the number of units.
        persons: person columns ``relgq`` (0..41), ``sex`` (1, 2), ``age``, ``hispanic``,
            ``cenrace`` (1..63); one householder (``relgq`` 0 or 1) per household.
        tenure: per unit, 0 owned with a mortgage or loan, 1 owned free and clear, 2 not
            owned (read for occupied units only).

    Raises:
        InternalError: for a household without a householder (the input's rules were
            not checked).
    """
    relgq = np.asarray(persons["relgq"], dtype=np.int64)
    hh = relgq < 18
    unit, rel = unit_row[hh], relgq[hh]
    age, sex = persons["age"][hh], persons["sex"][hh]
    rows = np.flatnonzero(hh)
    size = np.bincount(unit, minlength=n_units)
    units = np.flatnonzero(size > 0)
    head_at = np.full(n_units, -1, dtype=np.int64)
    head_at[unit[rel <= 1]] = np.flatnonzero(rel <= 1)
    h = head_at[units]
    if (h < 0).any():
        raise InternalError(f"dhch_attributes: unit row {int(units[h < 0][0])} has no householder")

    def any_of(mask: np.ndarray) -> np.ndarray:
        return (np.bincount(unit[mask], minlength=n_units) > 0)[units]

    couple = np.zeros(units.size, dtype=np.int64)
    for code, rels in ((4, (5,)), (3, (3,)), (2, (4,)), (1, (2,))):  # a spouse wins
        couple[any_of(np.isin(rel, rels))] = code
    child = ((rel >= 6) & (rel <= 8)) | (rel == 13)
    facts = {
        "size": np.minimum(size[units], 7),
        "couple": couple,
        "multig": (any_of(child) & any_of(np.isin(rel, (10, 11, 12)))).astype(np.int64),
        "own_children": _ranges(unit, (rel >= 6) & (rel <= 8), age, n_units)[units],
        "children": _ranges(unit, rel >= 6, age, n_units)[units],
        "any_child": any_of(age < 18).astype(np.int64),
        "relatives": any_of((rel == 2) | (rel == 4) | ((rel >= 6) & (rel <= 14))).astype(np.int64),
    }
    hhtype = np.array(
        [_TYPE_INDEX.get(t, -1) for t in zip(*(facts[f].tolist() for f in facts), strict=True)],
        dtype=np.int64,
    )
    cenrace = np.asarray(persons["cenrace"])[rows[h]]
    attributes = {
        "sex": sex[h] - 1,
        "hhage": np.searchsorted(np.asarray(HHAGE_LOWER), age[h], side="right") - 1,
        "hisp": np.asarray(persons["hispanic"])[rows[h]],
        "race": np.where(cenrace <= 6, cenrace - 1, 6),
        "elderly": sum(any_of(age >= a).astype(np.int64) for a in (60, 65, 75)),
        "hhtenshort_3lev": np.asarray(tenure, dtype=np.int64)[units],
        "hhtype_dhch": hhtype,
    }
    return units, {k: np.asarray(v, dtype=np.int64) for k, v in attributes.items()}


def dhch_cells(attributes: Mapping[str, np.ndarray]) -> np.ndarray:
    """The ``dhch-2020`` cell of each household (-1 where its type is -1)."""
    levels = tuple(np.asarray(attributes[a]) for a in DHCH_2020.attribute_names)
    ok = levels[-1] >= 0
    out = np.full(levels[0].shape, -1, dtype=np.int64)
    out[ok] = np.ravel_multi_index(tuple(lv[ok] for lv in levels), DHCH_2020.shape)
    return out
