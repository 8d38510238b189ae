"""The 2020 Demographic and Housing Characteristics (DHC) tables: definitions and tabulation.

A ``dhc-2020`` release publishes, beside the P.L. 94-171 tables (P1-P5, H1, tabulated
from the same persons), the DHC tables its MDFs determine. Line layouts, variable names
(``P12_001N`` ...) and labels (the Census API's ``!!`` paths) follow the 2020 Census
DHC file as data.census.gov and the Census API publish it (``DECENNIALDHC2020``):

* persons (the DHC person run, ``dhcp-2020``):

  * **P12** Sex by age for selected age categories (49 lines): Total; Male, then its 23
    age groups (Under 5 years ... 85 years and over); Female, the same.
  * **P12A-P12I**, its race and Hispanic-origin iterations (49 lines each, P12's): of the
    persons who are White alone (A), Black or African American alone (B), American
    Indian and Alaska Native alone (C), Asian alone (D), Native Hawaiian and Other
    Pacific Islander alone (E), Some Other Race alone (F), of Two or More Races (G),
    Hispanic or Latino (H), White alone, not Hispanic or Latino (I).
  * **PCT12** Sex by single-year age (209 lines): Total; Male, then Under 1 year, 1 year
    ... 99 years, 100 to 104 years, 105 to 109 years, 110 years and over; Female, the
    same.
  * **GQ1** Group quarters population by group quarters type (32 lines): censusdp's
    table of the 24 detailed GQ types the DHC person MDF carries (``GQTYPE``), under the
    institutional / noninstitutional and major-type headings of the 2010 Summary File 1's
    PCT20, with 2020's GQ codes. Not a published 2020 table (the 2020 DHC publishes the
    major types, P18, which is the P.L. table P5 line for line).

* households and housing units (the DHC household run: households ``dhch-2020`` and
  units ``dhc-units-2020`` / ``tenvacgq``):

  * **P16** Household type (9 lines): family households (married couple family; other
    family by the householder's sex, no spouse present) and nonfamily households
    (householder living alone or not).
  * **H9** Household size (8 lines): 1-person to 7-or-more-person households.
  * by the householder's characteristics: **H6** Race of householder (8 lines), **H7**
    Hispanic or Latino origin of householder by race of householder (17), **H10**
    Tenure by race of householder (17), **H11** Tenure by Hispanic or Latino origin of
    householder (7), **H12** Tenure by household size (17): "Owner occupied" is
    ``hhtenshort_3lev`` 0-1 (owned with a mortgage or a loan, free and clear), "Renter
    occupied" level 2 (not owned).
  * **H3** Occupancy status (3 lines), **H4** Tenure (4 lines: owned with a mortgage or
    a loan, owned free and clear, renter occupied), **H5** Vacancy status (8 lines),
    all of the unit histogram ``tenvacgq``.

P1 (total population) and H1 (housing units) of the DHC are each one line, the first
line of the P.L. tables P1 and H1 of the same release (``P1_001N``, ``H1_001N``).

Each table is a linear function of a small histogram, stored as a sparse (cells x lines)
0/1 operator (:class:`censusdp.tables.TableDefinition`): the person tables of the
``relgq x sex x age x hispanic x race`` cells (136,416, ``race`` the six races alone and
two or more; :func:`dhc_person_rows` maps ``dhcp-2020`` cells to them), the household
tables of the ``tenure x hhage x hisp x race x sex x family x size`` cells (15,876:
tenure the three ``hhtenshort_3lev`` levels, family a married couple family / another
family / a nonfamily household, size 1 to 7 or more, the last two read from
``hhtype_dhch``; :func:`dhc_household_rows` maps ``dhch-2020`` cells to them), the unit
tables of the 35 ``tenvacgq`` cells. "Family" is a household type with a relative of the householder (a spouse, a
child, another relative), "married couple" one with a spouse (of the opposite or the same
sex): the facts production's MDF recode (``HHT``) reads.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.households import HHAGE_LEVELS
from censusdp.data.schema import MAX_AGE, get_schema
from censusdp.data.schema_dhc import (
    DHC_UNITS_2020,
    FIRST_GQ_RELGQ,
    HHTYPE_DHCH_TYPES,
    RELGQ_LEVELS,
)
from censusdp.data.units_dhc import FIRST_GQ_TENVACGQ, FIRST_VACANT_TENVACGQ
from censusdp.errors import InputError, SchemaError
from censusdp.tables._definition import SEP, Builder, TableDefinition

__all__ = [
    "DHC_HOUSEHOLD_TABLE_NAMES",
    "DHC_PERSON_CELLS",
    "DHC_PERSON_TABLE_NAMES",
    "DHC_TABLE_NAMES",
    "DHC_HOUSEHOLD_CELLS",
    "SEX_BY_AGE_TABLE_NAMES",
    "dhc_household_histograms",
    "dhc_household_rows",
    "dhc_person_rows",
    "dhc_person_table_arrays",
    "dhc_source_rows",
    "dhc_table_definition",
    "sex_by_age_rows",
    "tabulate_dhc_households",
    "tabulate_dhc_household_rows",
    "tabulate_dhc_person_rows",
]

_P12_ITERATIONS = {  # letter: the persons it counts, in the Census's words
    "A": "White alone",
    "B": "Black or African American alone",
    "C": "American Indian and Alaska Native alone",
    "D": "Asian alone",
    "E": "Native Hawaiian and Other Pacific Islander alone",
    "F": "Some Other Race alone",
    "G": "Two or More Races",
    "H": "Hispanic or Latino",
    "I": "White alone, not Hispanic or Latino",
}

DHC_PERSON_TABLE_NAMES: tuple[str, ...] = (
    "P12",
    *(f"P12{k}" for k in _P12_ITERATIONS),
    "PCT12",
    "GQ1",
)
"""The DHC person tables, tabulated from a ``dhcp-2020`` person run."""

SEX_BY_AGE_TABLE_NAMES: tuple[str, ...] = ("P12", "PCT12")
"""The DHC person tables of sex by age alone, which any person schema with ``sex`` and
``age`` determines (:func:`sex_by_age_rows`)."""

_HOUSEHOLDER_TABLES = ("H6", "H7", "H10", "H11", "H12")
"""The household tables by the householder's race and Hispanic origin, and H12 (tenure
by household size). The DHC's H13, tenure by age of householder, is not one: its name is
the ``ddp-2010`` release's H13 (household size, 2010 numbering), and table names are one
namespace (:func:`censusdp.tables.table_definition`)."""

DHC_HOUSEHOLD_TABLE_NAMES: tuple[str, ...] = (
    "P16", "H3", "H4", "H5", "H6", "H7", "H9", "H10", "H11", "H12",
)  # fmt: skip
"""The DHC household and housing-unit tables, tabulated from a DHC household run."""

DHC_TABLE_NAMES: tuple[str, ...] = DHC_PERSON_TABLE_NAMES + DHC_HOUSEHOLD_TABLE_NAMES
"""Every DHC table of this module."""

_N_RELGQ, _N_AGE = len(RELGQ_LEVELS), MAX_AGE + 1
_N_RACES = 7
"""The race iterations' races: the six races alone (``cenrace`` 0-5), two or more (6)."""
DHC_PERSON_CELLS = _N_RELGQ * 2 * _N_AGE * 2 * _N_RACES
"""Cells of the person tables' histogram:
``(((relgq * 2 + sex) * 116 + age) * 2 + hispanic) * 7 + race``."""

_N_SIZE = 7
_HOUSEHOLD_AXES = ("tenure", "hhage", "hisp", "race", "sex", "kind", "size")
_HOUSEHOLD_SHAPE = (3, len(HHAGE_LEVELS), 2, _N_RACES, 2, 3, _N_SIZE)
DHC_HOUSEHOLD_CELLS = int(np.prod(_HOUSEHOLD_SHAPE))
"""Cells of the household tables' histogram (15,876): ``tenure x hhage x hisp x race x
sex x kind x size`` in C order, ``kind`` 0 a married couple family, 1 another family, 2
a nonfamily household, ``size`` 0 for one person ... 6 for seven or more."""

_P12_GROUPS = (0, 5, 10, 15, 18, 20, 21, 22, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65, 67, 70,
               75, 80, 85)  # fmt: skip
_SEXES = ("Male:", "Female:")
_INSTITUTIONAL = (
    ("Correctional facilities for adults:", range(18, 24)),
    ("Juvenile facilities:", range(24, 27)),
    ("Nursing facilities/Skilled-nursing facilities", (27,)),
    ("Other institutional facilities:", range(28, 33)),
)
_NONINSTITUTIONAL = (
    ("College/University student housing", (33,)),
    ("Military quarters:", (34, 35)),
    ("Other noninstitutional facilities:", range(36, 42)),
)
_VACANCY = (
    "For rent", "Rented, not occupied", "For sale only", "Sold, not occupied",
    "For seasonal, recreational, or occasional use", "For migrant workers", "Other vacant",
)  # fmt: skip


def _age_label(lo: int, hi: int) -> str:
    """The label of the ages ``lo..hi`` (inclusive) as the DHC prints it."""
    if hi > MAX_AGE - 1 and lo >= 85:
        return f"{lo} years and over"
    if lo == hi:
        return "Under 1 year" if lo == 0 else f"{lo} year{'s' if lo != 1 else ''}"
    if lo == 0:
        return f"Under {hi + 1} years"
    return f"{lo} and {hi} years" if hi == lo + 1 else f"{lo} to {hi} years"


def _sex_by_age(
    b: Builder,
    groups: list[tuple[int, int]],
    sex: np.ndarray,
    age: np.ndarray,
    universe: np.ndarray,
) -> None:
    b.add("Total:", universe)
    for s, head in enumerate(_SEXES):
        b.add(f"Total:{SEP}{head}", universe & (sex == s))
        for lo, hi in groups:
            b.add(
                f"Total:{SEP}{head}{SEP}{_age_label(lo, hi)}",
                universe & (sex == s) & (age >= lo) & (age <= hi),
                True,
            )


def _iteration(letter: str, hispanic: np.ndarray, race: np.ndarray) -> np.ndarray:
    """The cells of the persons P12's iteration ``letter`` counts."""
    if letter == "H":
        return hispanic == 1
    if letter == "I":
        return (hispanic == 0) & (race == 0)
    return race == "ABCDEFG".index(letter)


def _gq_label(relgq: int) -> str:
    """``Federal detention centers (101)`` from ``GQ 101 Federal detention centers``."""
    _, code, name = RELGQ_LEVELS[relgq].split(" ", 2)
    return name if "(" in name else f"{name} ({code})"  # 997 lists the codes it holds


def _gq_table(b: Builder, relgq: np.ndarray) -> None:
    b.add("Total:", relgq >= FIRST_GQ_RELGQ)
    for head, types in (("Institutionalized population:", _INSTITUTIONAL),
                        ("Noninstitutionalized population:", _NONINSTITUTIONAL)):  # fmt: skip
        levels = [k for _, members in types for k in members]
        b.add(f"Total:{SEP}{head}", np.isin(relgq, levels))
        for major, members in types:
            prefix = f"Total:{SEP}{head}{SEP}{major}"
            if len(members) == 1:
                b.add(prefix, relgq == members[0], True)
                continue
            b.add(prefix, np.isin(relgq, list(members)))
            for k in members:
                b.add(f"{prefix}{SEP}{_gq_label(k)}", relgq == k, True)


def _person_table(name: str) -> TableDefinition:
    cells = np.arange(DHC_PERSON_CELLS)
    rest, origin = np.divmod(cells, 2 * _N_RACES)
    hispanic, race = np.divmod(origin, _N_RACES)
    relgq, rest = np.divmod(rest, 2 * _N_AGE)
    sex, age = np.divmod(rest, _N_AGE)
    everyone = np.ones(cells.size, dtype=bool)
    b = Builder(DHC_PERSON_CELLS)
    if name.startswith("P12"):
        bounds = [*_P12_GROUPS, MAX_AGE + 1]
        groups = [(lo, hi - 1) for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
        title, universe = "SEX BY AGE FOR SELECTED AGE CATEGORIES", "Total population"
        who = everyone
        if name != "P12":  # a race or Hispanic-origin iteration
            words = _P12_ITERATIONS[name[-1]]
            title, universe = f"{title} ({words.upper()})", f"People who are {words}"
            who = _iteration(name[-1], hispanic, race)
        _sex_by_age(b, groups, sex, age, who)
        return b.build(name, title, universe, "dhc_persons")
    if name == "PCT12":
        groups = [(a, a) for a in range(100)] + [(100, 104), (105, 109), (110, MAX_AGE)]
        _sex_by_age(b, groups, sex, age, everyone)
        return b.build(name, "SEX BY SINGLE-YEAR AGE", "Total population", "dhc_persons")
    _gq_table(b, relgq)
    return b.build(
        name,
        "GROUP QUARTERS POPULATION BY GROUP QUARTERS TYPE",
        "Population in group quarters",
        "dhc_persons",
    )


def _household_cells() -> dict[str, np.ndarray]:
    """The attributes of every household-table cell (:data:`DHC_HOUSEHOLD_CELLS`),
    ``size`` in persons (1 ... 7 for seven or more)."""
    levels = np.unravel_index(np.arange(DHC_HOUSEHOLD_CELLS), _HOUSEHOLD_SHAPE)
    cells = dict(zip(_HOUSEHOLD_AXES, levels, strict=True))
    cells["size"] = cells["size"] + 1
    return cells


def _size_label(size: int) -> str:
    return f"{size}-person household" if size < _N_SIZE else "7-or-more-person household"


_HH_RACES = (
    "White alone", "Black or African American alone",
    "American Indian and Alaska Native alone", "Asian alone",
    "Native Hawaiian and Other Pacific Islander alone", "Some Other Race alone",
)  # fmt: skip
_TENURES = (("Owner occupied:", (0, 1)), ("Renter occupied:", (2,)))
_ORIGINS = ((0, "Not Hispanic or Latino householder:"), (1, "Hispanic or Latino householder:"))


def _race_lines(b: Builder, prefix: str, universe: np.ndarray, race: np.ndarray) -> None:
    for r, words in enumerate(_HH_RACES):
        b.add(f"{prefix}Householder who is {words}", universe & (race == r), True)
    b.add(f"{prefix}Householder who is Two or More Races", universe & (race == 6), True)


def _householder_table(name: str, c: dict[str, np.ndarray]) -> TableDefinition:
    b = Builder(DHC_HOUSEHOLD_CELLS)
    everyone = np.ones(DHC_HOUSEHOLD_CELLS, dtype=bool)
    b.add("Total:", everyone)
    total = f"Total:{SEP}"
    if name == "H6":
        _race_lines(b, total, everyone, c["race"])
        return b.build(name, "RACE OF HOUSEHOLDER", "Occupied housing units", "dhc_households")
    if name == "H7":
        for origin, words in _ORIGINS:
            b.add(f"{total}{words}", c["hisp"] == origin)
            _race_lines(b, f"{total}{words}{SEP}", c["hisp"] == origin, c["race"])
        return b.build(
            name,
            "HISPANIC OR LATINO ORIGIN OF HOUSEHOLDER BY RACE OF HOUSEHOLDER",
            "Occupied housing units",
            "dhc_households",
        )
    title = {
        "H10": "TENURE BY RACE OF HOUSEHOLDER",
        "H11": "TENURE BY HISPANIC OR LATINO ORIGIN OF HOUSEHOLDER",
        "H12": "TENURE BY HOUSEHOLD SIZE",
    }[name]
    for words, levels in _TENURES:
        tenure = np.isin(c["tenure"], levels)
        prefix = f"{total}{words}{SEP}"
        b.add(f"{total}{words}", tenure)
        if name == "H10":
            _race_lines(b, prefix, tenure, c["race"])
        elif name == "H11":
            for origin, origin_words in _ORIGINS:
                b.add(f"{prefix}{origin_words.rstrip(':')}", tenure & (c["hisp"] == origin), True)
        else:
            for size in range(1, _N_SIZE + 1):
                b.add(f"{prefix}{_size_label(size)}", tenure & (c["size"] == size), True)
    return b.build(name, title, "Occupied housing units", "dhc_households")


def _household_table(name: str) -> TableDefinition:
    c = _household_cells()
    if name in _HOUSEHOLDER_TABLES:
        return _householder_table(name, c)
    married, family = c["kind"] == 0, c["kind"] < 2
    sex, size = c["sex"], c["size"]
    b = Builder(DHC_HOUSEHOLD_CELLS)
    b.add("Total:", np.ones(DHC_HOUSEHOLD_CELLS, dtype=bool))
    if name == "H9":
        for k in range(1, _N_SIZE + 1):
            b.add(f"Total:{SEP}{_size_label(k)}", size == k, True)
        return b.build(name, "HOUSEHOLD SIZE", "Occupied housing units", "dhc_households")
    fam, non = f"Total:{SEP}Family households:", f"Total:{SEP}Nonfamily households:"
    other = f"{fam}{SEP}Other family:"
    b.add(fam, family)
    b.add(f"{fam}{SEP}Married couple family", married, True)
    b.add(other, family & ~married)
    for s, words in ((0, "Male householder, no spouse present"),
                     (1, "Female householder, no spouse present")):  # fmt: skip
        b.add(f"{other}{SEP}{words}", family & ~married & (sex == s), True)
    b.add(non, ~family)
    b.add(f"{non}{SEP}Householder living alone", ~family & (size == 1), True)
    b.add(f"{non}{SEP}Householder not living alone", ~family & (size > 1), True)
    return b.build(name, "HOUSEHOLD TYPE", "Households", "dhc_households")


def _unit_table(name: str) -> TableDefinition:
    level = np.arange(DHC_UNITS_2020.size)
    occupied = level < FIRST_VACANT_TENVACGQ
    vacant = (level >= FIRST_VACANT_TENVACGQ) & (level < FIRST_GQ_TENVACGQ)
    b = Builder(DHC_UNITS_2020.size)
    if name == "H3":
        b.add("Total:", occupied | vacant)
        b.add(f"Total:{SEP}Occupied", occupied, True)
        b.add(f"Total:{SEP}Vacant", vacant, True)
        return b.build(name, "OCCUPANCY STATUS", "Housing units", "dhc_units")
    if name == "H4":
        b.add("Total:", occupied)
        b.add(f"Total:{SEP}Owned with a mortgage or a loan", level == 0, True)
        b.add(f"Total:{SEP}Owned free and clear", level == 1, True)
        b.add(f"Total:{SEP}Renter occupied", (level == 2) | (level == 3), True)
        return b.build(name, "TENURE", "Occupied housing units", "dhc_units")
    b.add("Total:", vacant)
    for k, words in enumerate(_VACANCY):
        b.add(f"Total:{SEP}{words}", level == FIRST_VACANT_TENVACGQ + k, True)
    return b.build(name, "VACANCY STATUS", "Vacant housing units", "dhc_units")


@cache
def dhc_table_definition(name: str) -> TableDefinition:
    """The definition of DHC table ``name`` (:data:`DHC_TABLE_NAMES`).

    Raises:
        SchemaError: for another name.
    """
    if name in DHC_PERSON_TABLE_NAMES:
        return _person_table(name)
    if name in ("P16", "H9", *_HOUSEHOLDER_TABLES):
        return _household_table(name)
    if name in ("H3", "H4", "H5"):
        return _unit_table(name)
    raise SchemaError(f"unknown DHC table {name!r}; DHC tables are {list(DHC_TABLE_NAMES)}")


@cache
def _person_map(schema: str = "dhcp-2020") -> sp.csr_matrix:
    """``(cells x 136,416)``: each cell of person schema ``schema`` as a ``relgq x sex x
    age x hispanic x race`` cell (``race``: ``cenrace`` 0-5, the races alone, or 6, two or
    more); a schema without ``relgq`` puts every cell at ``relgq`` 0."""
    sch = get_schema(schema)
    relgq = sch.cell_levels("relgq") if "relgq" in sch.attribute_names else 0
    base = (relgq * 2 + sch.cell_levels("sex")) * _N_AGE + sch.cell_levels("age")
    race = np.minimum(sch.cell_levels("cenrace"), _N_RACES - 1)
    target = (base * 2 + sch.cell_levels("hispanic")) * _N_RACES + race
    return sp.csr_matrix(
        (np.ones(sch.size, dtype=np.int64), (np.arange(sch.size), target)),
        shape=(sch.size, DHC_PERSON_CELLS),
    )


@cache
def _household_map() -> sp.csr_matrix:
    """``(1,578,528 x 15,876)``: each ``dhch-2020`` cell's household-table cell
    (:data:`DHC_HOUSEHOLD_CELLS`)."""
    sch = get_schema("dhch-2020")
    types = sch.cell_levels("hhtype_dhch")
    facts = {f: np.asarray([getattr(t, f) for t in HHTYPE_DHCH_TYPES])
             for f in ("size", "couple", "relatives")}  # fmt: skip
    married = np.isin(facts["couple"], (1, 2))
    kind = np.where(married, 0, np.where(facts["relatives"] == 1, 1, 2))[types]
    size = np.minimum(facts["size"], _N_SIZE)[types] - 1
    levels = [sch.cell_levels(a) for a in ("hhtenshort_3lev", "hhage", "hisp", "race", "sex")]
    target = np.ravel_multi_index((*levels, kind, size), _HOUSEHOLD_SHAPE)
    return sp.csr_matrix(
        (np.ones(sch.size, dtype=np.int64), (np.arange(sch.size), target)),
        shape=(sch.size, DHC_HOUSEHOLD_CELLS),
    )


def _rows(rows: sp.spmatrix, mapping: sp.csr_matrix, small: int, what: str) -> sp.csr_matrix:
    rows = sp.csr_matrix(rows, dtype=np.int64)
    if rows.shape[1] == small:
        return rows
    if rows.shape[1] != mapping.shape[0]:
        raise SchemaError(
            f"{what} rows must have {mapping.shape[0]:,} or {small:,} cells, got {rows.shape[1]:,}"
        )
    return sp.csr_matrix(rows @ mapping)


def dhc_person_rows(rows: sp.spmatrix) -> sp.csr_matrix:
    """Histogram rows of ``dhcp-2020`` cells as the person tables' ``relgq x sex x age x
    hispanic x race`` cells (rows already in those cells are returned as they are)."""
    return _rows(rows, _person_map(), DHC_PERSON_CELLS, "DHC person")


def sex_by_age_rows(rows: sp.spmatrix, schema: str) -> sp.csr_matrix:
    """Histogram rows of any person schema with ``sex`` and ``age`` (``dhc-lite``,
    ``dhcp-hhgq``, ``dhcp-2020`` ...) as the person tables' cells, for the tables of
    :data:`SEX_BY_AGE_TABLE_NAMES` only: a schema without ``relgq`` puts every person at
    ``relgq`` 0, which P12 and PCT12 do not read (GQ1 does).

    Raises:
        SchemaError: for a schema without ``sex`` or ``age``, or rows of another width.
    """
    names = get_schema(schema).attribute_names
    if "sex" not in names or "age" not in names:
        raise SchemaError(f"schema {schema!r} has no sex and single year of age: {list(names)}")
    return _rows(rows, _person_map(schema), DHC_PERSON_CELLS, f"{schema} person")


def dhc_household_rows(rows: sp.spmatrix) -> sp.csr_matrix:
    """Histogram rows of ``dhch-2020`` cells as the household tables' cells
    (:data:`DHC_HOUSEHOLD_CELLS`; rows already in those cells are returned as they are)."""
    return _rows(rows, _household_map(), DHC_HOUSEHOLD_CELLS, "DHC household")


def dhc_source_rows(source: str, rows: sp.spmatrix) -> sp.spmatrix:
    """Histogram rows as the cells of a table source (:attr:`TableDefinition.source`):
    ``dhcp-2020`` rows for ``dhc_persons`` and ``dhch-2020`` rows for ``dhc_households``
    mapped to the tables' cells; any other rows as they are."""
    if source == "dhc_persons":
        return dhc_person_rows(rows)
    if source == "dhc_households":
        return dhc_household_rows(rows)
    return rows


def _tables(
    sources: Mapping[str, sp.spmatrix | None], ids: Mapping[str, pa.Array], names: tuple[str, ...]
) -> dict[str, pa.Table]:
    out: dict[str, pa.Table] = {}
    for name in names:
        d = dhc_table_definition(name)
        rows = sources.get(d.source)
        if rows is None:
            raise SchemaError(f"table {name} needs {d.source} rows")
        values = (sp.csr_matrix(rows) @ d.matrix).toarray().astype(np.int64, copy=False)
        columns = list(ids.values()) + [pa.array(values[:, j]) for j in range(d.n_lines)]
        out[name] = pa.Table.from_arrays(columns, names=[*ids, *d.variables])
    return out


def tabulate_dhc_person_rows(
    person_rows: sp.spmatrix,
    ids: Mapping[str, pa.Array],
    names: tuple[str, ...] = DHC_PERSON_TABLE_NAMES,
) -> dict[str, pa.Table]:
    """The DHC person tables of some geounits: ``person_rows`` their ``dhcp-2020`` (or
    ``relgq x sex x age x hispanic x race``) histograms, one row each, ``ids`` their identifier columns
    (:func:`censusdp.tables.level_identifiers`) in the same order; the columns and rows
    as :func:`censusdp.tables.tabulate_rows` gives the P.L. tables."""
    return _tables({"dhc_persons": dhc_person_rows(person_rows)}, ids, names)


def dhc_person_table_arrays(
    person_hist: sp.spmatrix,
    hierarchy: Hierarchy,
    names: tuple[str, ...] = DHC_PERSON_TABLE_NAMES,
) -> dict[str, list[np.ndarray]]:
    """Per DHC person table, a dense ``(units x lines)`` int64 array for each level of
    ``hierarchy`` (top first), from its blocks' ``dhcp-2020`` (or ``relgq x sex x age x
    hispanic x race``) histogram, rows in block order: the layout :func:`censusdp.tables.table_arrays`
    gives the P.L. tables, for comparing a simulated re-release with its truth."""
    levels = hierarchy.aggregate(dhc_person_rows(person_hist))
    out: dict[str, list[np.ndarray]] = {}
    for name in names:
        d = dhc_table_definition(name)
        out[name] = [np.asarray((h @ d.matrix).toarray(), dtype=np.int64) for h in levels]
    return out


def tabulate_dhc_household_rows(
    household_rows: sp.spmatrix,
    unit_rows: sp.spmatrix | np.ndarray,
    ids: Mapping[str, pa.Array],
    names: tuple[str, ...] = DHC_HOUSEHOLD_TABLE_NAMES,
) -> dict[str, pa.Table]:
    """The DHC household and unit tables of some geounits: ``household_rows`` their
    ``dhch-2020`` (or :data:`DHC_HOUSEHOLD_CELLS`) histograms, ``unit_rows`` their ``tenvacgq``
    (35 cells), one row each, ``ids`` their identifier columns, all in the same order."""
    units = sp.csr_matrix(unit_rows, dtype=np.int64)
    if units.shape[1] != DHC_UNITS_2020.size:
        raise SchemaError(f"unit rows must have {DHC_UNITS_2020.size} cells, got {units.shape[1]}")
    sources = {"dhc_households": dhc_household_rows(household_rows), "dhc_units": units}
    return _tables(sources, ids, names)


def tabulate_dhc_households(
    households: sp.spmatrix, units: sp.spmatrix | np.ndarray, hierarchy: Hierarchy
) -> dict[str, pa.Table]:
    """The DHC household and unit tables of every geounit of every level of ``hierarchy``
    (top level first, geocodes sorted within a level), from its blocks' ``dhch-2020``
    households and ``tenvacgq`` units (``(blocks x cells)``, rows in block order): the
    entry point of a DHC household run, whose MDF :func:`dhc_household_histograms` reads
    back into these histograms."""
    from censusdp.tables import identifier_columns  # the package imports this module

    nb = hierarchy.blocks.size
    h, u = dhc_household_rows(households), sp.csr_matrix(units, dtype=np.int64)
    if h.shape[0] != nb or u.shape[0] != nb:
        raise SchemaError(f"household and unit histograms must have {nb} block rows")
    stacked_h = sp.vstack(hierarchy.aggregate(h), format="csr")
    stacked_u = sp.vstack(hierarchy.aggregate(u), format="csr")
    return tabulate_dhc_household_rows(stacked_h, stacked_u, identifier_columns(hierarchy))


def dhc_household_histograms(
    block: np.ndarray, cell: np.ndarray, level: np.ndarray, n_blocks: int
) -> tuple[sp.csr_matrix, np.ndarray]:
    """The ``(blocks x 1,578,528)`` households and ``(blocks x 35)`` units of decoded DHC
    unit records: each record's block row, ``dhch-2020`` cell (-1 for a vacant unit or a
    facility) and ``tenvacgq`` level, as
    :func:`censusdp.io.mdf_households_dhc.decode_dhch_units` returns them.

    Raises:
        InputError: for a block, cell or level out of range.
    """
    block, cell, level = (np.asarray(a, dtype=np.int64) for a in (block, cell, level))
    size = get_schema("dhch-2020").size
    if block.size and (block.min() < 0 or block.max() >= n_blocks):
        raise InputError(f"a unit record's block row is out of 0..{n_blocks - 1}")
    if level.size and (level.min() < 0 or level.max() >= DHC_UNITS_2020.size):
        raise InputError(f"a unit record's tenvacgq level is out of 0..{DHC_UNITS_2020.size - 1}")
    if cell.size and (cell.min() < -1 or cell.max() >= size):
        raise InputError(f"a unit record's dhch-2020 cell is out of -1..{size - 1}")
    units = np.zeros((n_blocks, DHC_UNITS_2020.size), dtype=np.int64)
    np.add.at(units, (block, level), 1)
    hh = cell >= 0
    households = sp.csr_matrix(
        (np.ones(int(hh.sum()), dtype=np.int64), (block[hh], cell[hh])), shape=(n_blocks, size)
    )
    households.sum_duplicates()
    return households, units
