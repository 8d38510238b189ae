"""The household columns of the input, and their rules (docs/households.md).

``persons.parquet`` may carry each person's relationship to the householder (``rel``,
:data:`censusdp.data.households.REL_LEVELS`) and citizenship (``citizen``, 0
non-citizen, 1 citizen). Without them the input serves every run that needs no
households; with ``rel``, every household's attributes are derived from its persons
(:func:`censusdp.data.households.derive_households`), and the reader checks:

* every ``rel`` is in range (0..16), a household person's a household code (0..14), a
  group-quarters person's the code of their facility (15 institutional, 16 not);
* every occupied housing unit has exactly one householder (``rel`` 0), at least 15 years
  old, and at most one husband/wife and one unmarried partner;
* ``units.parquet`` may carry household columns (``hhsex``, ``hhage``, ... with the
  levels of :data:`censusdp.data.households.HOUSEHOLD_ATTRIBUTES`); they are never
  trusted: on every occupied housing unit each must equal what the unit's persons give
  (on other units they need only be valid levels).

``persons.parquet`` may also carry the 2020 DHC's ``relgq`` (0..41,
:data:`censusdp.data.schema_dhc.RELGQ_LEVELS`: 18 relationships to the householder,
then 24 detailed group-quarters types), which the ``dhcp-2020`` schema reads. With it
the reader checks (:func:`relgq_rules`): a household person's ``relgq`` is a
relationship (0..17), a group-quarters person's a GQ type of their ``hhgq`` major type
(GQ 101-106 are type 1, ..., 701-997 type 7), every resident of one facility has the
same GQ type, a householder living alone (0) is alone in the unit, and a householder
not living alone (1) is not.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from censusdp.data.households import (
    GQ_NONINSTITUTIONAL,
    HOUSEHOLD_ATTRIBUTES,
    Households,
    derive_households,
    household_rules,
)
from censusdp.data.schema_dhc import GQ_CODES, RELGQ_LEVELS

__all__ = [
    "HOUSEHOLD_UNIT_COLUMNS",
    "OPTIONAL_PERSON_COLUMNS",
    "household_column_rules",
    "household_input_rules",
    "households_of",
    "relgq_rules",
]

OPTIONAL_PERSON_COLUMNS: dict[str, tuple[str, tuple[int, int] | None]] = {
    "rel": ("int", (0, GQ_NONINSTITUTIONAL)),
    "citizen": ("int", (0, 1)),
    "relgq": ("int", (0, len(RELGQ_LEVELS) - 1)),
}
"""Person columns that households (``rel``), citizenship (``citizen``) and the 2020 DHC's
relationship or GQ type (``relgq``) need; an input without them serves every run that
does not."""

FIRST_GQ_RELGQ = 18
"""The first ``relgq`` level of a person in group quarters (GQ 101)."""

RELGQ_MAJOR = np.asarray(
    [0] * FIRST_GQ_RELGQ + [min(code // 100, 7) for code in GQ_CODES], dtype=np.int64
)
"""``hhgq`` major type of each ``relgq`` level (0 for the household relationships):
GQ 1xx is 1 (correctional facilities for adults), ..., 6xx 6 (military quarters),
7xx, 8xx and 9xx 7 (other noninstitutional)."""

HOUSEHOLD_UNIT_COLUMNS: dict[str, tuple[str, tuple[int, int] | None]] = {
    name: ("int", (0, len(levels) - 1)) for name, levels in HOUSEHOLD_ATTRIBUTES.items()
}
"""Optional unit columns, checked against the household derived from the unit's persons."""

Rule = tuple[str, str, np.ndarray, np.ndarray, str]


def _household_unit(units: Mapping[str, np.ndarray]) -> np.ndarray:
    return np.asarray(units["occupied"], dtype=bool) & (units["gqtype"] == 0)


def household_input_rules(
    persons: Mapping[str, np.ndarray],
    units: Mapping[str, np.ndarray],
    unit_row: np.ndarray,
    pf: str,
    uf: str,
) -> list[Rule]:
    """``(file, column, rows breaking the rule, values, rule)`` of every rule on ``rel``
    (:func:`censusdp.data.households.household_rules`); empty without a ``rel`` column.

    Args:
        unit_row: each person's unit row (``-1`` when the unit is absent).
        pf, uf: the persons and units files' names.
    """
    if "rel" not in persons:
        return []
    out: list[Rule] = []
    for column, mask, rule in household_rules(
        unit_row, persons["hhgq"], persons["rel"], persons["age"], _household_unit(units)
    ):
        if column == "unit":
            out.append((uf, "unit_id", mask, units["unit_id"], rule))
        else:
            out.append((pf, column, mask, persons[column], rule))
    return out


def households_of(
    persons: Mapping[str, np.ndarray], units: Mapping[str, np.ndarray], unit_row: np.ndarray
) -> Households:
    """The households of valid columns (every rule of :func:`household_input_rules` met)."""
    return derive_households(unit_row, int(units["unit_id"].size), dict(persons))


def household_column_rules(
    households: Households, units: Mapping[str, np.ndarray], uf: str
) -> list[Rule]:
    """The household columns ``units`` carries, each against the derived value: one rule
    per column, naming the unit rows whose value differs."""
    out: list[Rule] = []
    n = int(units["unit_id"].size)
    for name in HOUSEHOLD_UNIT_COLUMNS:
        if name not in units:
            continue
        derived = np.full(n, -1, dtype=np.int64)
        derived[households.unit] = households.attributes[name]
        wrong = (derived >= 0) & (units[name] != derived)
        out.append(
            (uf, name, wrong, units[name],
             "differs from the household attribute derived from the unit's persons")
        )  # fmt: skip
    return out


def relgq_rules(
    relgq: np.ndarray, hhgq: np.ndarray, unit_row: np.ndarray, n_units: int, pf: str
) -> list[Rule]:
    """``(file, column, rows breaking the rule, values, rule)`` of every rule on a
    ``relgq`` column whose values are in range (0..41).

    Args:
        relgq, hhgq: the persons' columns.
        unit_row: each person's unit row (``-1`` when the unit is absent: such a person
            breaks no rule here; the person-unit rules name them).
        n_units: the number of units ``unit_row`` indexes.
        pf: the persons file's name.
    """
    relgq = np.asarray(relgq, dtype=np.int64)
    hhgq = np.asarray(hhgq, dtype=np.int64)
    has = unit_row >= 0
    in_gq = relgq >= FIRST_GQ_RELGQ
    size = np.bincount(unit_row[has], minlength=n_units)
    residents = np.zeros(relgq.size, dtype=np.int64)
    residents[has] = size[unit_row[has]]
    wrong_major = (hhgq > 0) & (RELGQ_MAJOR[relgq] != hhgq)
    # one GQ type per facility: among the residents of a type of the facility's major
    # type, every relgq equals the facility's smallest
    typed = has & (hhgq > 0) & ~wrong_major
    lowest = np.full(n_units, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(lowest, unit_row[typed], relgq[typed])
    other_type = np.zeros(relgq.size, dtype=bool)
    other_type[typed] = relgq[typed] != lowest[unit_row[typed]]
    return [
        (pf, "relgq", (hhgq == 0) & in_gq, relgq,
         "is a group-quarters type (18..41) but the person's hhgq is 0 (household)"),
        (pf, "relgq", wrong_major, relgq,
         "is not a GQ type of the person's hhgq (a household relationship, or another "
         "major type)"),
        (pf, "relgq", other_type, relgq,
         "differs from another resident's relgq in the same facility"),
        (pf, "relgq", has & (relgq == 0) & (residents > 1), relgq,
         "is a householder living alone but the person's unit holds several persons"),
        (pf, "relgq", has & (relgq == 1) & (residents == 1), relgq,
         "is a householder not living alone but the person is alone in the unit"),
    ]  # fmt: skip
