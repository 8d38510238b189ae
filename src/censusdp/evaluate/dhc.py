"""The 2020 DHC's tables of the truth, for comparison with a release's.

* **Sex by age** (P12, 5-year groups; PCT12, single years): every release whose persons
  carry sex and single year of age (``dhc-2020``, ``dhc-lite-demo``, ``ddp-2010``; not
  a P.L. 94 release) is compared with the truth on them, from the release's MDF and the
  truth's persons, both tabulated by :func:`censusdp.tables.dhc.sex_by_age_rows` and the
  tables' own definitions: :func:`sex_by_age_metrics`, beside P1-P5 in ``evaluate``'s
  ``metrics``.
* **Households and housing units** (P16, H9, H3, H4, H5): the truth's tables for a
  ``dhc-2020`` household run (:func:`truth_dhc_household_tables`): each household's
  ``dhch-2020`` cell from its persons' ``relgq`` and its unit's ``ten``, as the run's
  reader derives it (:func:`censusdp.io.cef_households.dhch_household_cells`), and each
  unit's ``tenvacgq`` (:func:`censusdp.data.units_dhc.tenvacgq_of`).
  :mod:`censusdp.evaluate.households` compares them with the release's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import person_histogram
from censusdp.data.schema import get_schema
from censusdp.data.schema_dhc import DHC_UNITS_2020, DHCH_2020
from censusdp.data.units_dhc import TENURE_COLUMNS, tenvacgq_of
from censusdp.evaluate.metrics import table_record
from censusdp.io.cef import unit_rows_of
from censusdp.io.cef_households import dhch_household_cells
from censusdp.tables import household_table_arrays, table_definition
from censusdp.tables.dhc import (
    SEX_BY_AGE_TABLE_NAMES,
    sex_by_age_rows,
)

__all__ = [
    "SEX_BY_AGE_SCHEMA",
    "sex_by_age_metrics",
    "sex_by_age_tables",
    "truth_dhc_histograms",
    "truth_dhc_household_tables",
]

SEX_BY_AGE_SCHEMA = "dhc-lite"
"""The person schema the sex-by-age tables are tabulated through: its columns (``hhgq``,
``sex``, ``age``, ``hispanic``, ``cenrace``) are in the truth and in every MDF with age."""


def _tables(levels: list[Any], names: tuple[str, ...]) -> dict[str, list[np.ndarray]]:
    """Per table, the dense ``(units x lines)`` array of each level (its histogram in
    the table's cells)."""
    out: dict[str, list[np.ndarray]] = {}
    for name in names:
        d = table_definition(name)
        out[name] = [np.asarray((lv @ d.matrix).toarray(), dtype=np.int64) for lv in levels]
    return out


def sex_by_age_tables(
    persons: Mapping[str, np.ndarray], hierarchy: Hierarchy
) -> dict[str, list[np.ndarray]] | None:
    """P12 and PCT12 of every level (top first) from person records (the truth's or an
    MDF's, columns of :data:`SEX_BY_AGE_SCHEMA` and ``geocode``); ``None`` when they
    lack sex or age (a P.L. 94 MDF)."""
    columns = ("geocode", *get_schema(SEX_BY_AGE_SCHEMA).input_columns)
    if any(c not in persons for c in columns):
        return None
    block = person_histogram({c: persons[c] for c in columns}, hierarchy, SEX_BY_AGE_SCHEMA)
    levels = hierarchy.aggregate(sex_by_age_rows(block, SEX_BY_AGE_SCHEMA))
    return _tables(levels, SEX_BY_AGE_TABLE_NAMES)


def sex_by_age_metrics(
    truth_persons: Mapping[str, np.ndarray],
    released_persons: Mapping[str, np.ndarray],
    hierarchy: Hierarchy,
) -> dict[str, dict[str, Any]]:
    """``{table: {geolevel: record}}`` of P12 and PCT12, the release's persons against the
    truth's (:func:`censusdp.evaluate.metrics.table_record`); ``{}`` when either lacks
    sex or age."""
    truth = sex_by_age_tables(truth_persons, hierarchy)
    released = sex_by_age_tables(released_persons, hierarchy)
    if truth is None or released is None:
        return {}
    names = hierarchy.geolevels.names
    return {
        table: {
            lv: table_record(truth[table][li], released[table][li], table_definition(table).leaves)
            for li, lv in enumerate(names)
        }
        for table in SEX_BY_AGE_TABLE_NAMES
    }


def truth_dhc_histograms(
    persons: Mapping[str, np.ndarray], units: Mapping[str, np.ndarray], hierarchy: Hierarchy
) -> tuple[sp.csr_matrix, np.ndarray] | None:
    """The truth's ``(blocks x 1,578,528)`` households (``dhch-2020``) and ``(blocks x
    35)`` units (``tenvacgq``) on ``hierarchy``, as the household run's reader derives
    them; ``None`` when the truth lacks a column they need (``rel`` and ``relgq`` of the
    persons, ``ten``, ``vacs`` and ``qgqtyp`` of the units)."""
    if any(c not in persons for c in ("rel", "relgq")) or any(
        c not in units for c in TENURE_COLUMNS
    ):
        return None
    nb = hierarchy.blocks.size
    block = hierarchy.block_index(np.asarray(units["geocode"]).astype("U16"))
    unit_ids = np.asarray(units["unit_id"])
    unit_row = unit_rows_of(unit_ids, np.asarray(persons["unit_id"]))
    rows, cells = dhch_household_cells(persons, unit_row, unit_ids.size, units["ten"])
    households = sp.csr_matrix(
        (np.ones(rows.size, dtype=np.int64), (block[rows], cells)), shape=(nb, DHCH_2020.size)
    )
    level = tenvacgq_of(*(np.asarray(units[c]) for c in TENURE_COLUMNS))
    tenvacgq = np.zeros((nb, DHC_UNITS_2020.size), dtype=np.int64)
    np.add.at(tenvacgq, (block, level), 1)
    return households, tenvacgq


def truth_dhc_household_tables(
    persons: Mapping[str, np.ndarray], units: Mapping[str, np.ndarray], hierarchy: Hierarchy
) -> dict[str, list[np.ndarray]] | None:
    """Per DHC household and unit table (P16, H3, H4, H5, H9), the truth's dense ``(units
    x lines)`` arrays of every level (top first), from :func:`truth_dhc_histograms`;
    ``None`` when the truth lacks a column they need."""
    histograms = truth_dhc_histograms(persons, units, hierarchy)
    if histograms is None:
        return None
    return household_table_arrays(*histograms, hierarchy)
