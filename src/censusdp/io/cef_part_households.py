"""A part's households, in the 2010 DDP's ``household2010`` and the 2020 DHC's
``dhch-2020`` schema: the bulk path of :mod:`censusdp.io.cef_parts`.

Each function takes the part's units (file order: ``ids`` sorted with their ``order``,
``block``, ``blocks``, ``gqtype``, ``occupied``, ``household_columns``, ``tenure``) and
the columns it keeps of its persons (``unit``, each person's unit as an index into the
part's units in file order; every person's unit is in the part, checked before), and
returns the part's ``(blocks x cells)`` household histogram, or ``None`` at the first
broken rule: the part then reads its rows again and names every problem.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from censusdp.data.households import derive_households, household_rules
from censusdp.data.schema import HOUSEHOLD2010
from censusdp.data.schema_dhc import DHCH_2020
from censusdp.io.cef_households import dhch_household_cells, relgq_householder_rule

__all__ = ["part_dhch", "part_households"]


def _rules_hold(units: dict[str, Any], persons: dict[str, np.ndarray]) -> bool:
    """Whether every household rule (:func:`censusdp.data.households.household_rules`)
    holds on the part."""
    household_unit = units["occupied"] & (units["gqtype"] == 0)
    rules = household_rules(
        persons["unit"], persons["hhgq"], persons["rel"], persons["age"], household_unit
    )
    return not any(mask.any() for _, mask, _ in rules)


def part_households(units: dict[str, Any], persons: dict[str, np.ndarray]) -> sp.csr_matrix | None:
    """The part's ``(blocks x 387,072)`` ``household2010`` histogram; ``None`` at a broken
    household rule or a household column of ``units.parquet`` that differs from its
    persons' household.

    ``persons`` holds the part's ``unit``, ``hhgq``, ``rel``, ``sex``, ``age``,
    ``hispanic`` and ``cenrace``."""
    if not _rules_hold(units, persons):
        return None
    hh = derive_households(persons["unit"], int(units["ids"].size), persons)
    for name, given in units["household_columns"].items():
        if (given[hh.unit] != hh.attributes[name]).any():
            return None
    rows = units["block"][hh.unit]
    cells = HOUSEHOLD2010.cells_of(hh.attributes)
    return sp.csr_matrix(
        (np.ones(rows.size, dtype=np.int64), (rows, cells)),
        shape=(units["blocks"].size, HOUSEHOLD2010.size),
    )


def part_dhch(units: dict[str, Any], persons: dict[str, np.ndarray]) -> sp.csr_matrix | None:
    """The part's ``(blocks x 1,578,528)`` ``dhch-2020`` histogram: each household's cell
    from its persons' ``relgq`` and its unit's ``ten``
    (:func:`censusdp.io.cef_households.dhch_household_cells`); ``None`` at a broken
    household rule, a ``relgq`` householder that is not ``rel``'s, or a household of none
    of the 522 types.

    ``persons`` holds what :func:`part_households` reads and ``relgq``."""
    rule = relgq_householder_rule(persons["relgq"], persons["rel"], persons["hhgq"], "")
    if not _rules_hold(units, persons) or rule[2].any():
        return None
    rows, cells = dhch_household_cells(
        persons, persons["unit"], int(units["ids"].size), units["tenure"]["ten"]
    )
    if (cells < 0).any():
        return None
    return sp.csr_matrix(
        (np.ones(rows.size, dtype=np.int64), (units["block"][rows], cells)),
        shape=(units["blocks"].size, DHCH_2020.size),
    )
