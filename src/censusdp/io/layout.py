"""The release directory's layout: the name of every file a release holds, spelled once.

A release (``censusdp run``) is a directory (docs/file-formats.md)::

    manifest.json                     what the release is, how it was made, its cost
    signature.json                    optional: ``censusdp sign``
    invariants.parquet                the published exact counts, one row per block
    invariant_totals.parquet          the state total population
    spine.parquet                     optional: the spine it was measured on
    noisy_measurements.parquet/       the person run's NMF (part files + _parts.json)
    noisy_measurements_units.parquet/ the unit run's NMF
    mdf_persons.parquet/  mdf_persons.txt/   the released persons (Parquet, MDF2020 text)
    mdf_units.parquet/    mdf_units.txt/     the released units
    tables/P1.parquet/ ... H1.parquet/, tables/codebook.csv
    tables/P1.csv, tables/P1_long.csv ...   each table as CSV, wide and long

Every module that reads or writes one of these files takes its name from here (or
through :class:`censusdp.io.rundir.RunDir`); a test checks that no other module of
``src/`` spells one.
"""

from __future__ import annotations

from censusdp.errors import SchemaError
from censusdp.io.output_rules import MANIFEST_FILE, SIGNATURE_FILE

__all__ = [
    "CHECKPOINT_DIR",
    "CODEBOOK_FILE",
    "INVARIANTS_FILE",
    "INVARIANT_TOTALS_FILE",
    "HELD_PL94_FILE",
    "MANIFEST_FILE",
    "MDF_FILES",
    "NMF_FILES",
    "RELEASE_FILE_NAMES",
    "RUNS",
    "SIGNATURE_FILE",
    "SPINE_FILE",
    "SPINE_FILES",
    "TABLES_DIR",
    "TABLE_CSV_FORMS",
    "TABLE_CSV_PARTS_DIR",
    "table_csv_file",
]

RUNS = ("persons", "units")
"""The two runs of a release, as in 2020 production: persons and housing units."""

NMF_FILES = {"persons": "noisy_measurements.parquet", "units": "noisy_measurements_units.parquet"}
"""The noisy measurement files (NMF) by run."""

MDF_FILES = {
    "persons": ("mdf_persons.parquet", "mdf_persons.txt"),
    "units": ("mdf_units.parquet", "mdf_units.txt"),
}
"""The MDF's files (Parquet, MDF2020 text) by run; each is a single file (releases
before part files) or a directory of parts."""

INVARIANTS_FILE = "invariants.parquet"
"""One row per block: geocode, housing units, group-quarters facilities by type."""

INVARIANT_TOTALS_FILE = "invariant_totals.parquet"
"""The state total population (and the totals of a spine's state parts)."""

HELD_PL94_FILE = "invariants_pl94.parquet"
"""A DHC release held to a P.L. 94 release (``--h1-from``) only: each block's persons of
that release in its ``pl94`` cells, which every geounit of the person run was held to
(long form: geocode, cell, count; :data:`censusdp.data.invariants.HELD_PL94_COLUMNS`)."""

SPINE_FILES = {"persons": "spine.parquet", "units": "spine_units.parquet"}
"""The spine each run was measured on, by run: each block's code at every spine level
(the unit run's spine differs from the persons' in its block groups, as production's)."""

SPINE_FILE = SPINE_FILES["persons"]
"""The spine the person run was measured on (the only one of a release made before the
unit run had its own)."""

TABLES_DIR = "tables"
"""The published tables: ``tables/<name>.parquet`` and the codebook."""

CODEBOOK_FILE = "codebook.csv"
"""The codebook, in the tables directory."""

TABLE_CSV_FORMS = ("wide", "long")
"""The two CSV forms of a published table, in the tables directory (docs/file-formats.md):
``wide`` one row per geounit, ``long`` one row per geounit and variable."""


TABLE_CSV_PARTS_DIR = "_csv_parts"
"""In the tables directory while a run writes its tables, never in a finished release:
``_csv_parts/P1.csv/part-00001.csv`` holds the CSV rows of ``P1.parquet``'s part 1,
written by the task that wrote the part; the driver puts each table's CSV together from
them and removes them (:mod:`censusdp.io.table_csv`)."""


def table_csv_file(table: str, form: str = "wide") -> str:
    """The CSV file of a published table in the tables directory: ``P1.csv`` (wide),
    ``P1_long.csv`` (long)."""
    if form not in TABLE_CSV_FORMS:
        raise SchemaError(f"unknown CSV form {form!r}; the forms are {list(TABLE_CSV_FORMS)}")
    return f"{table}.csv" if form == "wide" else f"{table}_long.csv"


CHECKPOINT_DIR = "checkpoint"
"""An unfinished run's checkpoint (removed when the run commits)."""

RELEASE_FILE_NAMES = (
    MANIFEST_FILE,
    SIGNATURE_FILE,
    INVARIANTS_FILE,
    INVARIANT_TOTALS_FILE,
    HELD_PL94_FILE,
    *SPINE_FILES.values(),
    TABLES_DIR,
    *NMF_FILES.values(),
    *(name for pair in MDF_FILES.values() for name in pair),
)
"""Every name at the top of a finished release."""
