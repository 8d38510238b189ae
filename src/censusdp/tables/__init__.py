"""The PL 94-171 redistricting tables (P1-P5, H1): definitions and tabulation.

Every table is a linear function of a histogram: the person tables (P1-P5) of the
``pl94`` detailed histogram (HHGQ x VOTINGAGE x HISPANIC x CENRACE, 2,016 cells), and
H1 of a small unit histogram (GQTYPE x OCCUPIED, 16 cells). A table is therefore stored
as a sparse (cells x lines) 0/1 operator, and tabulating every geounit of every level is

1. one sparse block histogram built from the microdata (:mod:`censusdp.data.histograms`),
2. :meth:`censusdp.data.geography.Hierarchy.aggregate` to every geolevel, and
3. one sparse product per table.

Line layouts follow the 2020 Census P.L. 94-171 Redistricting Data Summary File
(variable names ``P1_001N`` ...; labels in the Census API's ``!!`` path form):

* P1 Race (71 lines): Total; Population of one race (6 "alone" lines); Population of
  two or more races; Population of two races (15), three (20), four (15), five (6) and
  six races (1). CENRACE levels in :mod:`censusdp.data.schema` are already in this order.
* P2 Hispanic or Latino, and not Hispanic or Latino by race (73 lines): Total; Hispanic
  or Latino; Not Hispanic or Latino, then the P1 breakdown for the not-Hispanic.
* P3, P4: P1 and P2 for the population 18 years and over.
* P5 Group quarters population by major group quarters type (10 lines).
* H1 Occupancy status (3 lines): Total housing units; Occupied; Vacant (housing units
  only, ``gqtype == 0``).

Tables are returned as wide Arrow tables: ``geolevel`` (string), ``geocode``
(string), the Census identifiers ``GEOID``, ``SUMLEV`` and ``NAME`` (strings; see
:mod:`censusdp.tables.geoids`), then one int64 column per line, one row per geounit of
every level. :func:`codebook` lists every column with its Census label. A release adds
the rows of the published geographies off the hierarchy (county subdivisions, places,
AIAN areas), each the sum of its blocks: :mod:`censusdp.tables.entities`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import cache

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import UNIT_CELLS, person_histogram, unit_histogram
from censusdp.data.schema import HHGQ_LEVELS, Schema, get_schema
from censusdp.errors import InputError, SchemaError
from censusdp.tables._definition import SEP, Builder, TableDefinition
from censusdp.tables.dhc import (
    DHC_HOUSEHOLD_TABLE_NAMES,
    DHC_PERSON_TABLE_NAMES,
    DHC_TABLE_NAMES,
    dhc_household_rows,
    dhc_table_definition,
)
from censusdp.tables.geoids import (
    ENTITY_LEVELS,
    IDENTIFIER_COLUMNS,
    IDENTIFIER_LABELS,
    geo_identifiers,
)
from censusdp.tables.households import HOUSEHOLD_TABLE_NAMES, household_table_definition

__all__ = [
    "ALL_TABLE_NAMES",
    "LazyTables",
    "CODEBOOK_COLUMNS",
    "DHC_TABLE_NAMES",
    "HOUSEHOLD_TABLE_NAMES",
    "IDENTIFIER_COLUMNS",
    "PERSON_TABLES",
    "TABLE_NAMES",
    "TableDefinition",
    "codebook",
    "household_table_arrays",
    "identifier_columns",
    "level_identifiers",
    "release_table_names",
    "table_arrays",
    "table_definition",
    "table_lines",
    "table_matrix",
    "tables_to_arrays",
    "tabulate",
    "tabulate_histograms",
    "tabulate_rows",
]

TABLE_NAMES: tuple[str, ...] = ("P1", "P2", "P3", "P4", "P5", "H1")
"""The PL 94-171 tables, in publication order."""

PERSON_TABLES: tuple[str, ...] = ("P1", "P2", "P3", "P4", "P5")
"""Tables tabulated from persons (the others are tabulated from units)."""

ALL_TABLE_NAMES: tuple[str, ...] = TABLE_NAMES + HOUSEHOLD_TABLE_NAMES + DHC_TABLE_NAMES
"""Every table censusdp can write: P.L. 94-171, the DDP's household tables and the DHC's
(:mod:`censusdp.tables.dhc`); the names are unique across the three."""


def release_table_names(person_schema: str, household_schema: str | None = None) -> tuple[str, ...]:
    """The tables a release publishes: P1-P5 and H1 always, the DHC person tables of a
    ``dhcp-2020`` person run, the household tables of a ``household2010`` household run
    and the DHC household tables of a ``dhch-2020`` one."""
    names = TABLE_NAMES
    if person_schema == "dhcp-2020":
        names += DHC_PERSON_TABLE_NAMES
    if household_schema == "household2010":
        names += HOUSEHOLD_TABLE_NAMES
    elif household_schema == "dhch-2020":
        names += DHC_HOUSEHOLD_TABLE_NAMES
    return names


def _person_table(name: str, schema: Schema) -> TableDefinition:
    hhgq = schema.cell_levels("hhgq")
    adult = schema.cell_levels("votingage") == 1
    hisp = schema.cell_levels("hispanic") == 1
    cenrace = schema.cell_levels("cenrace")
    b = Builder(schema.size)
    everyone = np.ones(schema.size, dtype=bool)
    if name in ("P1", "P3"):
        universe = adult if name == "P3" else everyone
        b.add("Total:", universe)
        b.race_breakdown(f"Total:{SEP}", universe, cenrace)
        if name == "P1":
            return b.build(name, "RACE", "Total population", "persons")
        return b.build(
            name,
            "RACE FOR THE POPULATION 18 YEARS AND OVER",
            "Total population 18 years and over",
            "persons",
        )
    if name in ("P2", "P4"):
        universe = adult if name == "P4" else everyone
        b.add("Total:", universe)
        b.add(f"Total:{SEP}Hispanic or Latino", universe & hisp, True)
        nh = f"Total:{SEP}Not Hispanic or Latino:"
        b.add(nh, universe & ~hisp)
        b.race_breakdown(f"{nh}{SEP}", universe & ~hisp, cenrace)
        title = "HISPANIC OR LATINO, AND NOT HISPANIC OR LATINO BY RACE"
        if name == "P2":
            return b.build(name, title, "Total population", "persons")
        return b.build(
            name,
            f"{title} FOR THE POPULATION 18 YEARS AND OVER",
            "Total population 18 years and over",
            "persons",
        )
    if name == "P5":
        gq = hhgq >= 1
        b.add("Total:", gq)
        inst = f"Total:{SEP}Institutionalized population:"
        b.add(inst, (hhgq >= 1) & (hhgq <= 4))
        for g in range(1, 5):
            b.add(f"{inst}{SEP}{HHGQ_LEVELS[g]}", hhgq == g, True)
        non = f"Total:{SEP}Noninstitutionalized population:"
        b.add(non, hhgq >= 5)
        for g in range(5, 8):
            b.add(f"{non}{SEP}{HHGQ_LEVELS[g]}", hhgq == g, True)
        return b.build(
            name,
            "GROUP QUARTERS POPULATION BY MAJOR GROUP QUARTERS TYPE",
            "Population in group quarters",
            "persons",
        )
    raise SchemaError(
        f"table {name!r} is not a person table; person tables are {list(PERSON_TABLES)}"
    )


def _unit_table() -> TableDefinition:
    cells = np.arange(UNIT_CELLS)
    gqtype, occupied = cells // 2, cells % 2 == 1
    hu = gqtype == 0
    b = Builder(UNIT_CELLS)
    b.add("Total:", hu)
    b.add(f"Total:{SEP}Occupied", hu & occupied, True)
    b.add(f"Total:{SEP}Vacant", hu & ~occupied, True)
    return b.build("H1", "OCCUPANCY STATUS", "Housing units", "units")


@cache
def table_definition(name: str) -> TableDefinition:
    """The definition of table ``name`` (``"P1"`` ... ``"H1"``, a household table of
    :data:`HOUSEHOLD_TABLE_NAMES` or a DHC table of :data:`DHC_TABLE_NAMES`).

    Raises:
        SchemaError: for an unknown table name.
    """
    if name in HOUSEHOLD_TABLE_NAMES:
        return household_table_definition(name)
    if name in DHC_TABLE_NAMES:
        return dhc_table_definition(name)
    if name not in TABLE_NAMES:
        raise SchemaError(f"unknown table {name!r}; tables are {list(ALL_TABLE_NAMES)}")
    if name == "H1":
        return _unit_table()
    return _person_table(name, get_schema("pl94"))


def table_lines(name: str) -> list[tuple[str, str]]:
    """The lines of table ``name`` as ``(variable, label)`` pairs, e.g. ``("P1_001N", "Total:")``."""
    d = table_definition(name)
    return list(zip(d.variables, d.labels, strict=True))


CODEBOOK_COLUMNS: tuple[str, ...] = ("table", "variable", "label", "concept", "universe")
"""Columns of :func:`codebook` (``concept`` is the table title, as in the Census API)."""


def codebook(names: tuple[str, ...] = TABLE_NAMES) -> pa.Table:
    """Every column of the published tables with its Census name and label.

    One row per identifier column (``table`` empty) and one per table line, e.g.
    ``("P1", "P1_001N", "Total:", "RACE", "Total population")``. Labels use the Census
    API's ``!!`` path form (2020 Census P.L. 94-171 Redistricting Data Summary File).
    Written next to the tables as ``codebook.csv`` by :func:`censusdp.io.tables.write_tables`.
    ``names``: the tables (a release with a household run adds the household tables).
    """
    rows: list[tuple[str, str, str, str, str]] = [
        ("", col, IDENTIFIER_LABELS[col], "Geography", "")
        for col in ("geolevel", "geocode", *IDENTIFIER_COLUMNS)
    ]
    for name in names:
        d = table_definition(name)
        rows += [
            (name, v, lab, d.title, d.universe)
            for v, lab in zip(d.variables, d.labels, strict=True)
        ]
    return pa.table(
        {c: pa.array([r[i] for r in rows], pa.string()) for i, c in enumerate(CODEBOOK_COLUMNS)}
    )


def table_matrix(name: str) -> sp.csr_matrix:
    """The ``(cells x lines)`` 0/1 operator of table ``name`` (see :class:`TableDefinition`)."""
    return table_definition(name).matrix


# -- histograms -> tables --------------------------------------------------------------


def _check_hist_shapes(
    person_hist: sp.spmatrix, unit_hist: sp.spmatrix, hierarchy: Hierarchy
) -> None:
    if person_hist.shape != (hierarchy.blocks.size, get_schema("pl94").size):
        raise SchemaError(
            f"person histogram must be (blocks x 2016) = ({hierarchy.blocks.size}, 2016), "
            f"got {person_hist.shape}"
        )
    if unit_hist.shape != (hierarchy.blocks.size, UNIT_CELLS):
        raise SchemaError(
            f"unit histogram must be ({hierarchy.blocks.size}, {UNIT_CELLS}), got {unit_hist.shape}"
        )


def table_arrays(
    person_hist: sp.spmatrix, unit_hist: sp.spmatrix, hierarchy: Hierarchy
) -> dict[str, list[np.ndarray]]:
    """Per table, a dense ``(units x lines)`` int64 array for each level (top first).

    Args:
        person_hist: ``(blocks x 2016)`` ``pl94`` histogram (:func:`person_histogram`).
        unit_hist: ``(blocks x 16)`` unit histogram (:func:`unit_histogram`).
        hierarchy: the geography whose blocks are the rows.
    """
    _check_hist_shapes(person_hist, unit_hist, hierarchy)
    levels = {
        "persons": hierarchy.aggregate(sp.csr_matrix(person_hist, dtype=np.int64)),
        "units": hierarchy.aggregate(sp.csr_matrix(unit_hist, dtype=np.int64)),
    }
    return _level_tables(TABLE_NAMES, levels)


def _level_tables(
    names: tuple[str, ...], levels: Mapping[str, list[sp.spmatrix]]
) -> dict[str, list[np.ndarray]]:
    """Per table of ``names``, its dense ``(units x lines)`` int64 array of each level,
    from ``levels``: per table source, the histograms of every level."""
    out: dict[str, list[np.ndarray]] = {}
    for name in names:
        d = table_definition(name)
        out[name] = [np.asarray((h @ d.matrix).toarray(), dtype=np.int64) for h in levels[d.source]]
    return out


def household_table_arrays(
    households: sp.spmatrix, tenure: sp.spmatrix | np.ndarray | None, hierarchy: Hierarchy
) -> dict[str, list[np.ndarray]]:
    """Per household table of a household run, a dense ``(units x lines)`` int64 array
    for each level (top first), the layout of :func:`table_arrays`: from ``household2010``
    block households (``tenure`` ``None``) the DDP's P15, P18, P22, H13; from
    ``dhch-2020`` ones and their blocks' ``(blocks x 35)`` units by ``tenvacgq``
    (``tenure``) the DHC's P16, H3, H4, H5, H9."""
    hh = sp.csr_matrix(households, dtype=np.int64)
    if tenure is None:
        names, levels = HOUSEHOLD_TABLE_NAMES, {"households": hierarchy.aggregate(hh)}
    else:
        names = DHC_HOUSEHOLD_TABLE_NAMES
        levels = {
            "dhc_households": hierarchy.aggregate(dhc_household_rows(hh)),
            "dhc_units": hierarchy.aggregate(sp.csr_matrix(tenure, dtype=np.int64)),
        }
    return _level_tables(names, levels)


def tabulate_histograms(
    person_hist: sp.spmatrix,
    unit_hist: sp.spmatrix,
    hierarchy: Hierarchy,
    names: tuple[str, ...] = TABLE_NAMES,
) -> dict[str, pa.Table]:
    """Tables for every geounit from block histograms (see :func:`tabulate`); ``names``
    limits it to some tables."""
    _check_hist_shapes(person_hist, unit_hist, hierarchy)
    person_levels = hierarchy.aggregate(sp.csr_matrix(person_hist, dtype=np.int64))
    unit_levels = hierarchy.aggregate(sp.csr_matrix(unit_hist, dtype=np.int64))
    stacked = {
        "persons": sp.vstack(person_levels, format="csr"),
        "units": sp.vstack(unit_levels, format="csr"),
    }
    return tabulate_rows(stacked["persons"], stacked["units"], identifier_columns(hierarchy), names)


def tabulate_rows(
    person_rows: sp.spmatrix,
    unit_rows: sp.spmatrix,
    ids: Mapping[str, pa.Array],
    names: tuple[str, ...] = TABLE_NAMES,
) -> dict[str, pa.Table]:
    """Tables of some geounits: ``person_rows`` (``pl94`` cells) and ``unit_rows`` (unit
    cells) are their histograms, one row each, and ``ids`` their identifier columns
    (:func:`identifier_columns`, :func:`level_identifiers`), in the same order.

    What :func:`tabulate_histograms` returns for all geounits, for any subset (a part
    file of the tables holds a run of one level's geounits).
    """
    out: dict[str, pa.Table] = {}
    rows = {"persons": sp.csr_matrix(person_rows), "units": sp.csr_matrix(unit_rows)}
    for name in names:
        d = table_definition(name)
        values = (rows[d.source] @ d.matrix).toarray().astype(np.int64, copy=False)
        columns = list(ids.values()) + [pa.array(values[:, j]) for j in range(d.n_lines)]
        out[name] = pa.Table.from_arrays(columns, names=[*ids, *d.variables])
    return out


def level_identifiers(levels: list[tuple[str, int, np.ndarray]]) -> dict[str, pa.Array]:
    """:func:`identifier_columns` of some geounits: per level (name, geocode length,
    its geocodes), in that order."""
    out = {
        "geolevel": pa.array(
            np.repeat(
                np.asarray([n for n, _, _ in levels], dtype=object), [c.size for *_, c in levels]
            ),
            pa.string(),
        ),
        "geocode": pa.array(
            np.concatenate([c.astype(object) for *_, c in levels])
            if levels
            else np.zeros(0, dtype=object),
            pa.string(),
        ),
    }
    per_level = [geo_identifiers(codes, length, name) for name, length, codes in levels]
    for col in IDENTIFIER_COLUMNS:
        out[col] = pa.array(
            np.concatenate([p[col] for p in per_level]) if per_level else np.zeros(0, object),
            pa.string(),
        )
    return out


def identifier_columns(hierarchy: Hierarchy) -> dict[str, pa.Array]:
    """``geolevel``, ``geocode``, ``GEOID``, ``SUMLEV`` and ``NAME`` of every geounit.

    Rows are in table order: top level first, geocodes sorted within a level (see
    :mod:`censusdp.tables.geoids` for the identifiers).
    """
    return level_identifiers(
        [
            (lv.name, lv.length, codes)
            for codes, lv in zip(hierarchy.geocodes, hierarchy.geolevels.levels, strict=True)
        ]
    )


def tabulate(
    persons: Mapping[str, np.ndarray], units: Mapping[str, np.ndarray], hierarchy: Hierarchy
) -> dict[str, pa.Table]:
    """Tabulate P1-P5 and H1 for every geounit of every level of ``hierarchy``.

    Args:
        persons: columns ``geocode`` (16-char block), ``hhgq``, ``hispanic``,
            ``cenrace`` (1..63), and ``age`` (CEF) or ``votingage`` (MDF). Values may
            be NumPy arrays or Arrow arrays.
        units: columns ``geocode``, ``gqtype`` (0 housing unit, 1..7) and ``occupied``.
        hierarchy: built by the caller from the union of person and unit block
            geocodes.

    Returns:
        One wide table per name in :data:`TABLE_NAMES`: ``geolevel``, ``geocode``,
        ``GEOID``, ``SUMLEV``, ``NAME`` (:func:`identifier_columns`), then one int64
        column per line, with one row per geounit of every level (top level first,
        geocodes sorted within a level).

    Raises:
        InputError: for a missing column or an out-of-range value.
        GeographyError: for a geocode that is not a block of ``hierarchy``.
    """
    return tabulate_histograms(
        person_histogram(persons, hierarchy), unit_histogram(units, hierarchy), hierarchy
    )


def tables_to_arrays(
    tables: Mapping[str, pa.Table], hierarchy: Hierarchy
) -> dict[str, list[np.ndarray]]:
    """Per table, a dense ``(units x lines)`` int64 array for each level, aligned to ``hierarchy``.

    Rows absent from a table (a geounit with no released row) are zero; the rows of the
    geographies off the hierarchy (county subdivisions, places, AIAN areas:
    :mod:`censusdp.tables.entities`) are not among its levels and are left out.

    Raises:
        InputError: if a table names a geolevel or geocode that ``hierarchy`` lacks, or
            is missing a line column.
    """
    names = hierarchy.geolevels.names
    out: dict[str, list[np.ndarray]] = {}
    for tname, table in tables.items():
        d = table_definition(tname)
        missing = [v for v in ("geolevel", "geocode", *d.variables) if v not in table.column_names]
        if missing:
            raise InputError(f"table {tname} lacks columns {missing[:5]}")
        levels = np.asarray(table.column("geolevel").to_numpy(zero_copy_only=False)).astype(str)
        codes = np.asarray(table.column("geocode").to_numpy(zero_copy_only=False)).astype(str)
        values = np.column_stack(
            [
                np.asarray(table.column(v).to_numpy(zero_copy_only=False), dtype=np.int64)
                for v in d.variables
            ]
        )
        unknown = sorted(set(np.unique(levels)) - set(names) - set(ENTITY_LEVELS))
        if unknown:
            raise InputError(
                f"table {tname} has geolevel {str(unknown[0])!r}; hierarchy has {list(names)}"
            )
        per_level = []
        for li, lname in enumerate(names):
            sel = levels == lname
            arr = np.zeros((hierarchy.n_units(li), d.n_lines), dtype=np.int64)
            if sel.any():
                ref = hierarchy.geocodes[li]
                c = codes[sel]
                idx = np.minimum(np.searchsorted(ref, c), ref.size - 1)
                found = ref[idx] == c
                if not found.all():
                    raise InputError(
                        f"table {tname} has {lname} geocode {c[~found][0]!r}, not in the hierarchy"
                    )
                np.add.at(arr, idx, values[sel])
            per_level.append(arr)
        out[tname] = per_level
    return out


class LazyTables(Mapping[str, list[np.ndarray]]):
    """Per table, arrays computed when asked for and not kept (``load(name)``), so a
    comparison of two sets of tables holds one table of each at a time: the dense
    per-block arrays of every table of a state are hundreds of MB."""

    def __init__(
        self, load: Callable[[str], list[np.ndarray]], names: tuple[str, ...] = TABLE_NAMES
    ):
        self._load = load
        self._names = tuple(names)

    def __getitem__(self, name: str) -> list[np.ndarray]:
        if name not in self._names:
            raise KeyError(name)
        return self._load(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)
