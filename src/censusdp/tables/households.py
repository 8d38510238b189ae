"""The household tables: the 2010 Summary File 1 tables the DDP published from households.

A release with a household run (``household2010``, docs/households.md) publishes, beside
P1-P5 and H1, four tables of its released households, each a linear function of the
``household2010`` histogram (387,072 cells), tabulated exactly as the P.L. tables are:

* P15 Hispanic or Latino origin of householder by race of householder (17 lines);
* P18 Household type (9 lines): family (husband-wife; other family by the
  householder's sex) and nonfamily (living alone or not);
* P22 Household type by age of householder (21 lines);
* H13 Household size (8 lines): 1-person to 7-or-more-person households.

These are the 2010 SF1 tables of the same numbers, as the DDP's household table builder
(``programs/schema/table_building/building_Household2010_tables.py``) defines them from
the same attributes: "family" is every household type but the four nonfamily ones (no
spouse, partner or relative: types 12, 17, 18, 23), "husband-wife" every married type
(of the opposite or the same sex). Occupancy (H1) is a P.L. table already.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from censusdp.data.households import HOUSEHOLD_ATTRIBUTES
from censusdp.data.schema import get_schema
from censusdp.errors import SchemaError
from censusdp.tables._definition import SEP, Builder, TableDefinition

__all__ = [
    "HOUSEHOLD_TABLE_NAMES",
    "household_table_definition",
    "tabulate_household_rows",
]

HOUSEHOLD_TABLE_NAMES: tuple[str, ...] = ("P15", "P18", "P22", "H13")
"""The household tables, in publication order."""

_NONFAMILY = (12, 17, 18, 23)
_RACES = (
    "White alone",
    "Black or African American alone",
    "American Indian and Alaska Native alone",
    "Asian alone",
    "Native Hawaiian and Other Pacific Islander alone",
    "Some Other Race alone",
    "Two or More Races",
)


@cache
def household_table_definition(name: str) -> TableDefinition:
    """The definition of household table ``name`` (:data:`HOUSEHOLD_TABLE_NAMES`).

    Raises:
        SchemaError: for another name.
    """
    if name not in HOUSEHOLD_TABLE_NAMES:
        raise SchemaError(
            f"unknown household table {name!r}; household tables are {list(HOUSEHOLD_TABLE_NAMES)}"
        )
    sch = get_schema("household2010")
    lv = {a: sch.cell_levels(a) for a in sch.attribute_names}
    every = np.ones(sch.size, dtype=bool)
    family = ~np.isin(lv["hhtype"], _NONFAMILY)
    b = Builder(sch.size)
    b.add("Total:", every if name != "H13" else lv["hhsize"] >= 1)  # size 0: never one
    if name == "P15":
        for hisp, head in ((0, "Not Hispanic or Latino householder:"),
                           (1, "Hispanic or Latino householder:")):  # fmt: skip
            b.add(f"Total:{SEP}{head}", lv["hhhisp"] == hisp)
            for r, race in enumerate(_RACES):
                mask = (lv["hhhisp"] == hisp) & (lv["hhrace"] == r)
                b.add(f"Total:{SEP}{head}{SEP}Householder who is {race}", mask, True)
        title = "HISPANIC OR LATINO ORIGIN OF HOUSEHOLDER BY RACE OF HOUSEHOLDER"
    elif name == "P18":
        fam, non = f"Total:{SEP}Family households:", f"Total:{SEP}Nonfamily households:"
        other = f"{fam}{SEP}Other family:"
        b.add(fam, family)
        b.add(f"{fam}{SEP}Husband-wife family", lv["hhtype"] < 8, True)
        b.add(other, family & (lv["hhtype"] >= 8))
        for sex, words in ((0, "Male householder, no wife present"),
                           (1, "Female householder, no husband present")):  # fmt: skip
            b.add(f"{other}{SEP}{words}", family & (lv["hhtype"] >= 8) & (lv["hhsex"] == sex), True)
        b.add(non, ~family)
        b.add(f"{non}{SEP}Householder living alone", lv["hhtype"] == 18, True)
        b.add(f"{non}{SEP}Householder not living alone", ~family & (lv["hhtype"] != 18), True)
        title = "HOUSEHOLD TYPE"
    elif name == "P22":
        for mask, head in ((family, "Family households:"), (~family, "Nonfamily households:")):
            b.add(f"Total:{SEP}{head}", mask)
            for a, age in enumerate(HOUSEHOLD_ATTRIBUTES["hhage"]):
                b.add(f"Total:{SEP}{head}{SEP}{age}", mask & (lv["hhage"] == a), True)
        title = "HOUSEHOLD TYPE BY AGE OF HOUSEHOLDER"
    else:  # H13
        for size in range(1, 8):
            words = f"{size}-person household" if size < 7 else "7-or-more-person household"
            b.add(f"Total:{SEP}{words}", lv["hhsize"] == size, True)
        return b.build(name, "HOUSEHOLD SIZE", "Occupied housing units", "households")
    return b.build(name, title, "Households", "households")


def tabulate_household_rows(
    household_rows: sp.spmatrix,
    ids: Mapping[str, pa.Array],
    names: tuple[str, ...] = HOUSEHOLD_TABLE_NAMES,
) -> dict[str, pa.Table]:
    """The household tables of some geounits: ``household_rows`` their ``household2010``
    histograms, one row each, ``ids`` their identifier columns
    (:func:`censusdp.tables.level_identifiers`), in the same order; the columns and rows
    as :func:`censusdp.tables.tabulate_rows` gives the P.L. tables."""
    rows = sp.csr_matrix(household_rows, dtype=np.int64)
    out: dict[str, pa.Table] = {}
    for name in names:
        d = household_table_definition(name)
        values = (rows @ d.matrix).toarray().astype(np.int64, copy=False)
        columns = list(ids.values()) + [pa.array(values[:, j]) for j in range(d.n_lines)]
        out[name] = pa.Table.from_arrays(columns, names=[*ids, *d.variables])
    return out
