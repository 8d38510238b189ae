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

__all__ = [
    "HOUSEHOLD_UNIT_COLUMNS",
    "OPTIONAL_PERSON_COLUMNS",
    "household_column_rules",
    "household_input_rules",
    "households_of",
]

OPTIONAL_PERSON_COLUMNS: dict[str, tuple[str, tuple[int, int] | None]] = {
    "rel": ("int", (0, GQ_NONINSTITUTIONAL)),
    "citizen": ("int", (0, 1)),
}
"""Person columns that households (``rel``) and citizenship (``citizen``) need; an input
without them serves every run that does not."""

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
