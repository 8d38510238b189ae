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

``units.parquet`` may carry the 2020 DHC's unit columns ``ten``, ``vacs`` and ``qgqtyp``
(production's CEF unit codes, :mod:`censusdp.data.units_dhc`), all three or none
(:data:`TENURE_UNIT_COLUMNS`), which the DHC household run reads. With them the reader
checks (:func:`tenure_rules`): an occupied housing unit has a tenure (``ten`` 1..4) and
no vacancy status, a vacant one a status (``vacs`` 1..7) and no tenure, a facility
neither; ``qgqtyp`` is 0 on a housing unit and on a facility one of production's GQ
codes of the facility's ``gqtype`` (101-106 type 1, ..., 701-997 type 7); and, with
``relgq``, every resident of a facility has the ``relgq`` of its ``qgqtyp``
(:func:`qgqtyp_relgq_rule`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from censusdp.data.households import (
    GQ_NONINSTITUTIONAL,
    HOUSEHOLD_ATTRIBUTES,
    HOUSEHOLDER,
    Households,
    derive_households,
    household_rules,
)
from censusdp.data.households_dhc import dhch_attributes, dhch_cells
from censusdp.data.schema_dhc import FIRST_GQ_RELGQ, GQ_CODES, RELGQ_LEVELS
from censusdp.data.units_dhc import (
    TEN_LEVELS,
    TENURE_COLUMNS,
    VACS_LEVELS,
    gq_level_of,
    hhtenshort_3lev_of,
)

__all__ = [
    "HOUSEHOLD_UNIT_COLUMNS",
    "OPTIONAL_PERSON_COLUMNS",
    "TENURE_UNIT_COLUMNS",
    "household_column_rules",
    "household_input_rules",
    "dhch_household_cells",
    "dhch_type_rule",
    "households_of",
    "missing_tenure_columns",
    "qgqtyp_relgq_rule",
    "relgq_householder_rule",
    "relgq_rules",
    "tenure_rules",
]

OPTIONAL_PERSON_COLUMNS: dict[str, tuple[str, tuple[int, int] | None]] = {
    "rel": ("int", (0, GQ_NONINSTITUTIONAL)),
    "citizen": ("int", (0, 1)),
    "relgq": ("int", (0, len(RELGQ_LEVELS) - 1)),
}
"""Person columns that households (``rel``), citizenship (``citizen``) and the 2020 DHC's
relationship or GQ type (``relgq``) need; an input without them serves every run that
does not."""

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

TENURE_UNIT_COLUMNS: dict[str, tuple[str, tuple[int, int] | None]] = {
    "ten": ("int", (0, len(TEN_LEVELS) - 1)),
    "vacs": ("int", (0, len(VACS_LEVELS) - 1)),
    "qgqtyp": ("int", (0, 999)),
}
"""The 2020 DHC's unit columns (production's TEN, VACS, QGQTYP), all three or none."""

Rule = tuple[str, str, np.ndarray, np.ndarray, str]


def missing_tenure_columns(present: list[str] | tuple[str, ...]) -> list[str]:
    """The tenure columns absent from ``present`` when some are there (all three come
    together); empty when all three or none are present."""
    missing = [c for c in TENURE_COLUMNS if c not in present]
    return [] if len(missing) == len(TENURE_COLUMNS) else missing


def tenure_rules(units: Mapping[str, np.ndarray], uf: str) -> list[Rule]:
    """``(file, column, rows breaking the rule, values, rule)`` of every rule on the
    units' ``ten``, ``vacs`` and ``qgqtyp`` (in range, :data:`TENURE_UNIT_COLUMNS`).

    Args:
        units: the units' ``gqtype``, ``occupied``, ``ten``, ``vacs`` and ``qgqtyp``.
        uf: the units file's name.
    """
    gqtype = np.asarray(units["gqtype"], dtype=np.int64)
    occupied = np.asarray(units["occupied"], dtype=bool)
    ten, vacs, q = (np.asarray(units[c], dtype=np.int64) for c in TENURE_COLUMNS)
    housing = gqtype == 0
    household = housing & occupied
    known = gq_level_of(q) >= 0
    major = np.minimum(q // 100, 7)
    return [
        (uf, "ten", household & (ten == 0), ten,
         "is 0 (no tenure) but the unit is an occupied housing unit"),
        (uf, "ten", ~household & (ten > 0), ten,
         "is a tenure but the unit is not an occupied housing unit (vacant, or a facility)"),
        (uf, "vacs", housing & ~occupied & (vacs == 0), vacs,
         "is 0 (not vacant) but the unit is a vacant housing unit"),
        (uf, "vacs", ~(housing & ~occupied) & (vacs > 0), vacs,
         "is a vacancy status but the unit is not a vacant housing unit"),
        (uf, "qgqtyp", housing & (q != 0), q, "is a GQ type but the unit is a housing unit"),
        (uf, "qgqtyp", ~housing & ~known, q,
         "is not a GQ type production reads (101-106, 201-203, 301, 401-405, 501, 601, "
         "602, 701, 702, 704, 706, 801, 802, 900, 901, 903, 904, 997)"),
        (uf, "qgqtyp", ~housing & known & (major != gqtype), q,
         "is not a GQ type of the unit's gqtype"),
    ]  # fmt: skip


def qgqtyp_relgq_rule(
    relgq: np.ndarray, hhgq: np.ndarray, unit_row: np.ndarray, qgqtyp: np.ndarray, pf: str
) -> Rule:
    """The rule that a facility's residents have the ``relgq`` of its ``qgqtyp``. A
    person whose ``relgq`` is not a GQ type of their ``hhgq`` (which :func:`relgq_rules`
    names), a household person, or a person whose unit is absent breaks no rule here.

    Args:
        relgq, hhgq: the persons' columns (``relgq`` 0..41).
        unit_row: each person's unit row (``-1`` when absent).
        qgqtyp: the units' ``qgqtyp``.
        pf: the persons file's name.
    """
    relgq = np.asarray(relgq, dtype=np.int64)
    has = unit_row >= 0
    level = np.full(relgq.size, -1, dtype=np.int64)
    level[has] = gq_level_of(np.asarray(qgqtyp)[unit_row[has]])
    typed = (relgq >= FIRST_GQ_RELGQ) & (RELGQ_MAJOR[relgq] == np.asarray(hhgq))
    wrong = has & typed & (level >= 0) & (relgq != FIRST_GQ_RELGQ + level)
    return (pf, "relgq", wrong, relgq, "differs from the GQ type (qgqtyp) of the person's facility")


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


def relgq_householder_rule(relgq: np.ndarray, rel: np.ndarray, hhgq: np.ndarray, pf: str) -> Rule:
    """The rule that a household person's ``relgq`` names a householder (0 living alone,
    1 not) exactly where ``rel`` does (0): both columns name one householder per
    household, the DHC's household run reads the householder from ``relgq``.

    Args:
        relgq, rel, hhgq: the persons' columns.
        pf: the persons file's name.
    """
    relgq = np.asarray(relgq, dtype=np.int64)
    household = (np.asarray(hhgq) == 0) & (relgq < FIRST_GQ_RELGQ)  # else relgq_rules names it
    wrong = household & ((relgq <= 1) != (np.asarray(rel) == HOUSEHOLDER))
    return (pf, "relgq", wrong, relgq,
            "names a householder (0, 1) where rel does not (0), or the reverse")  # fmt: skip


def dhch_household_cells(
    persons: Mapping[str, np.ndarray], unit_row: np.ndarray, n_units: int, ten: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The occupied units (rows) and each one's ``dhch-2020`` cell (-1 for a household
    whose persons make none of the 522 household types), from the persons' ``relgq``,
    ``sex``, ``age``, ``hispanic`` and ``cenrace`` and the units' ``ten``
    (:func:`censusdp.data.households_dhc.dhch_attributes`; one householder per household,
    the rules of :func:`household_input_rules` and :func:`relgq_householder_rule` met).
    """
    rows, attributes = dhch_attributes(unit_row, n_units, persons, hhtenshort_3lev_of(ten))
    return rows, dhch_cells(attributes)


def dhch_type_rule(
    persons: Mapping[str, np.ndarray],
    units: Mapping[str, np.ndarray],
    unit_row: np.ndarray,
    uf: str,
) -> Rule:
    """The rule that every household makes one of the 522 DHC household types (the input
    meets every other household rule)."""
    n = int(units["unit_id"].size)
    rows, cells = dhch_household_cells(persons, unit_row, n, units["ten"])
    wrong = np.zeros(n, dtype=bool)
    wrong[rows[cells < 0]] = True
    return (uf, "unit_id", wrong, units["unit_id"],
            "is a household whose persons make none of the 522 DHC household types")  # fmt: skip
