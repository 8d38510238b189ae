"""A partitioned MDF read back by tasks, one part each, and its part indexes checked.

:func:`mdf_from_parts` checks that the MDF's directories (and the tables', when they
are part files too) index the same parts, whose block ranges cover the release's
blocks in order, then has each part read by a task (:func:`_count_mdf_part`): its
records counted per block, its text parts compared with its Parquet parts, its
tables' block parts with its tabulation.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import unit_histogram_from_counts
from censusdp.data.invariants import Invariants
from censusdp.data.schema import Schema, get_schema
from censusdp.errors import CensusDPError, InputError
from censusdp.io.layout import MDF_FILES
from censusdp.io.mdf_parts import mdf_part_counts, mdf_part_dhc_units, mdf_part_households
from censusdp.io.mdf_read import read_mdf_records
from censusdp.io.mdf_records import record_layouts
from censusdp.io.mdf_text import text_mismatch
from censusdp.io.parts import part_name, read_part_index, regular_file
from censusdp.io.tables import table_part_mismatch
from censusdp.release.manifest import sha256_of
from censusdp.release.validate._entries import Hashed
from censusdp.tables import TABLE_NAMES, level_identifiers, release_table_names
from censusdp.tables.dhc import DHC_HOUSEHOLD_TABLE_NAMES

DHCH = "dhch"
"""``households`` of a release with the 2020 DHC's household run."""


@dataclass(frozen=True, eq=False)
class _MDFPartCount:
    """Read back part ``file`` (its name in each MDF directory) of a partitioned MDF:
    the blocks ``blocks`` (geocodes, sorted) of the level ``geolevel`` (name, geocode
    length); ``text``: the text parts to compare with the Parquet parts; ``header``:
    whether the first text line is the header; ``households``: the release has a
    household run, whose unit records carry their households (``"dhch"``: the 2020 DHC's,
    in its unit layout, read back with its units by ``tenvacgq``)."""

    run: str
    file: str
    text_file: str | None
    blocks: np.ndarray
    schema: str
    rows: tuple[int, int]
    header: bool
    tables: str | None = None
    gq_facilities: np.ndarray | None = None
    geolevel: tuple[str, int] = ("Block", 16)
    households: bool | str = False


def _count_mdf_part(
    job: _MDFPartCount,
) -> tuple[str | None, Any, dict[str, str], float]:
    """A task: one MDF part's ``(persons hist, pl94 hist, unit counts, tables' problem,
    text parts' problem, households, households' problem)`` (or its problem), the
    SHA-256 of each of its files, by path in the run, and its CPU seconds. With
    ``tables`` (the tables' block part file name) each table's rows of these blocks must
    be the tabulation of the part read back (facilities typed by ``gq_facilities``, the
    invariants'; the household tables of its households, the DHC household and unit
    tables of the households and units its DHC unit records decode to), with the
    blocks' identifiers. ``households`` is ``None`` without a household run, or when a record
    is not one household (``households' problem`` names it)."""
    c = time.process_time()
    problem, counts, digests, text_problem = _read_mdf_part(job)
    if problem is None and job.tables is not None:
        run = Path(job.run)
        units = unit_histogram_from_counts(
            counts[2][:, 0] + counts[2][:, 1], counts[2][:, 1], job.gq_facilities
        )
        ids = level_identifiers([(job.geolevel[0], job.geolevel[1], job.blocks)])
        bad = None
        households, dhc = counts[3], counts[5]
        dhc_rows = {"dhc_persons": counts[0]}
        if dhc is not None:  # the DHC household tables: of the unit records decoded
            dhc_rows.update(dhc_households=dhc[0], dhc_units=sp.csr_matrix(dhc[1]))
        household_schema = _household_schema(job.households)
        if household_schema == "household2010" and households is None:
            household_schema = None  # its records are not households: household_records
        for name in release_table_names(job.schema, household_schema):
            rel = f"tables/{name}.parquet/{job.tables}"
            if regular_file(run / rel):
                digests[rel] = sha256_of(run / rel)
            if job.households == DHCH and dhc is None and name in DHC_HOUSEHOLD_TABLE_NAMES:
                bad = bad or f"{rel}: not checked, its unit MDF part's records do not read back"
                continue
            bad = bad or table_part_mismatch(
                run / rel, name, ids, counts[1], units, households, dhc_rows=dhc_rows
            )
        counts = (*counts[:3], bad, text_problem, *counts[3:])
    elif problem is None:
        counts = (*counts[:3], None, text_problem, *counts[3:])
    return problem, counts, digests, time.process_time() - c


def _household_schema(run: bool | str) -> str | None:
    """The household schema whose tables a release publishes: ``dhch-2020`` for a DHC
    household run (``run`` is :data:`DHCH`), ``household2010`` for another household run,
    else ``None``."""
    return "dhch-2020" if run == DHCH else "household2010" if run is True else None


def _read_mdf_part(
    job: _MDFPartCount,
) -> tuple[str | None, Any, dict[str, str], str | None]:
    """``(problem, counts, digests, text problem)`` of one MDF part: its Parquet parts'
    records (as many as their index entries say) counted per block, and each text part
    compared with its Parquet part (and hashed as it is read)."""
    run = Path(job.run)
    layouts = record_layouts(get_schema(job.schema), households=bool(job.households))
    parquet = {kind: f"{pq_name}/{job.file}" for kind, (pq_name, _) in MDF_FILES.items()}
    digests = {rel: sha256_of(run / rel) for rel in parquet.values() if regular_file(run / rel)}
    text_problem = None
    try:
        records = {kind: read_mdf_records(run / rel) for kind, rel in parquet.items()}
        for (kind, rel), want in zip(parquet.items(), job.rows, strict=True):
            got = records[kind].num_rows
            if got != want:
                return f"{rel} has {got} records; its index entry says {want}", None, digests, None
        for kind, (_, txt_name) in MDF_FILES.items() if job.text_file is not None else ():
            rel = f"{txt_name}/{job.text_file}"
            bad, digests[rel] = text_mismatch(
                run / parquet[kind], run / rel, layouts[kind], header=job.header,
                records=records[kind],
            )  # fmt: skip
            text_problem = text_problem or bad
        counts = mdf_part_counts(
            run / parquet["persons"],
            run / parquet["units"],
            job.blocks,
            get_schema(job.schema),
            records=(records["persons"], records["units"]),
        )
    except (CensusDPError, OSError, pa.ArrowException) as exc:
        return str(exc), None, digests, None
    households, household_problem, dhc = None, None, None
    if job.households == DHCH:
        try:
            dhc = mdf_part_dhc_units(run / parquet["units"], job.blocks, records=records["units"])
        except CensusDPError as exc:
            household_problem = str(exc)
    elif job.households:
        try:
            households = mdf_part_households(
                run / parquet["units"],
                job.blocks,
                records=records["units"],
                gq_facilities=job.gq_facilities,
            )
        except CensusDPError as exc:
            household_problem = str(exc)
    return None, (*counts, households, household_problem, dhc), digests, text_problem


@dataclass(frozen=True, eq=False)
class MDFParts:
    """A partitioned MDF read back (:func:`mdf_from_parts`): its block histograms of
    persons (``hist``, in the release's schema; ``pl94``), its ``(blocks x 3)`` vacant,
    occupied and facility ``counts``, the problems of its tables' and its text parts,
    and for a household run its ``(blocks x 387,072)`` ``households`` (``None`` when a
    record is not one household: ``household_problems`` names it)."""

    hist: sp.csr_matrix
    pl94: sp.csr_matrix
    counts: np.ndarray
    table_problems: list[str]
    text_problems: list[str]
    households: sp.csr_matrix | None = None
    household_problems: list[str] = field(default_factory=list)
    dhc_units: tuple[sp.csr_matrix, np.ndarray] | None = None
    """A DHC household run's ``dhch-2020`` households and ``(blocks x 35)`` units by
    ``tenvacgq`` read back (``None`` when a record is not one: ``household_problems``)."""


def mdf_from_parts(
    run: Path,
    hierarchy: Hierarchy,
    inv: Invariants,
    schema: Schema,
    executor: Any,
    hashed: Hashed | None,
    *,
    with_households: bool | str = False,
) -> MDFParts:
    """A partitioned MDF's block histograms and unit counts, its parts read by tasks,
    the problems of the tables' block parts (checked by the same tasks when the tables
    are partitioned) and those of its text parts; ``with_households``: the release has a
    household run, whose households are read back and checked too.

    The parts are the ones their indexes list (:func:`_part_indexes`), each read as its
    index entry says, and their SHA-256 the entries' (:func:`_check_part_digests`).

    Raises:
        InputError: naming the first problem (an index, a part, a record).
    """
    tables = (run / "tables" / f"{TABLE_NAMES[0]}.parquet").is_dir()
    names = release_table_names(schema.name, _household_schema(with_households))
    indexes, ranges = _part_indexes(run, hierarchy, tables, names)
    jobs = _part_jobs(
        run, hierarchy, inv, schema, indexes, ranges, tables=tables, households=with_households
    )
    if executor is None:
        from censusdp.execution import make_executor

        executor = make_executor(1, kind="inprocess")
    hists, pl94s, counts, table_problems, text_problems = [], [], [], [], []
    households, household_problems, dhc = [], [], []
    for problem, got, digests, cpu in executor.map(_count_mdf_part, jobs):
        if hashed is not None:
            hashed.record(digests, cpu)
        if problem:
            raise InputError(problem)
        hists.append(got[0])
        pl94s.append(got[1])
        counts.append(got[2])
        if got[3]:
            table_problems.append(got[3])
        if got[4]:
            text_problems.append(got[4])
        households.append(got[5])
        if got[6]:
            household_problems.append(got[6])
        dhc.append(got[7])
    _check_part_digests(indexes, hashed)
    pl94 = get_schema("pl94")
    if not jobs:
        empty = np.zeros((0, 3), dtype=np.int64)
        return MDFParts(
            sp.csr_matrix((0, schema.size)), sp.csr_matrix((0, pl94.size)), empty, [], []
        )
    complete = with_households is True and not household_problems
    dhc_complete = with_households == DHCH and not household_problems
    return MDFParts(
        sp.csr_matrix(sp.vstack(hists, format="csr"), dtype=np.int64),
        sp.csr_matrix(sp.vstack(pl94s, format="csr"), dtype=np.int64),
        np.concatenate(counts),
        table_problems,
        text_problems,
        sp.csr_matrix(sp.vstack(households, format="csr"), dtype=np.int64) if complete else None,
        household_problems,
        (
            sp.csr_matrix(sp.vstack([h for h, _ in dhc], format="csr"), dtype=np.int64),
            np.concatenate([u for _, u in dhc]),
        )
        if dhc_complete
        else None,
    )


def _part_indexes(
    run: Path, hierarchy: Hierarchy, tables: bool, names: tuple[str, ...] = TABLE_NAMES
) -> tuple[dict[str, dict], list[tuple[int, int]]]:
    """The MDF directories' part indexes, by directory name, and the parts' block
    ranges, once the indexes are seen to agree.

    The four directories' indexes must list the same parts, whose block ranges cover
    the release's blocks in order, once each, each text part as many records as its
    Parquet part; with ``tables`` (the tables are part files), each table of ``names``
    (those the release publishes) has its index list the
    same parts after its part 0 (the levels above the block, and the geographies off
    the hierarchy).

    Raises:
        InputError: naming the first index that does not agree.
    """
    indexes = {}
    for pq_name, txt_name in MDF_FILES.values():
        indexes[pq_name] = read_part_index(run / pq_name, ".parquet")
        if (run / txt_name).is_dir():
            indexes[txt_name] = read_part_index(run / txt_name, ".txt")
    persons = indexes[MDF_FILES["persons"][0]]
    text = [indexes.get(t) for _, t in MDF_FILES.values()]
    ranges = [(int(p["start"]), int(p["stop"])) for p in persons["parts"]]
    nb = hierarchy.blocks.size
    for name, index in indexes.items():
        got = [(int(p["start"]), int(p["stop"])) for p in index["parts"]]
        if len(got) != len(ranges) or got != ranges:
            raise InputError(f"{name}/_parts.json lists other block ranges than mdf_persons'")
    if (text[0] is None) != (text[1] is None):
        raise InputError("one of the MDF's text directories is missing")
    for (pq_name, txt_name), index in zip(MDF_FILES.values(), text, strict=True):
        want = [int(p["rows"]) for p in indexes[pq_name]["parts"]]
        if index is not None and [int(p["rows"]) for p in index["parts"]] != want:
            raise InputError(f"{txt_name}/_parts.json lists other records than {pq_name}'s")
    for name in names if tables else ():
        rel = f"tables/{name}.parquet"
        got = [
            (p["file"], int(p["start"]), int(p["stop"]))
            for p in read_part_index(run / rel)["parts"]
        ]
        want = [(part_name(i + 1), a, b) for i, (a, b) in enumerate(ranges)]
        if got[1:] != want or not got or got[0][0] != part_name(0):
            raise InputError(f"{rel}/_parts.json lists other parts than the MDF's blocks")
    cover = [0] + [b for _, b in ranges]
    if [a for a, _ in ranges] != cover[:-1] or cover[-1] != nb:
        raise InputError(
            f"mdf_persons.parquet/_parts.json: its parts do not cover the {nb} blocks in order"
        )
    if text[1] is not None and [p["file"] for p in text[0]["parts"]] != [
        p["file"] for p in text[1]["parts"]
    ]:
        raise InputError("mdf_units.txt/_parts.json lists other files than mdf_persons.txt's")
    return indexes, ranges


def _part_jobs(
    run: Path,
    hierarchy: Hierarchy,
    inv: Invariants,
    schema: Schema,
    indexes: dict[str, dict],
    ranges: list[tuple[int, int]],
    *,
    tables: bool,
    households: bool | str = False,
) -> list[_MDFPartCount]:
    """One task per part of the MDF (:func:`_count_mdf_part`), as ``indexes`` list them
    (:func:`_part_indexes`); with ``tables``, each checks the tables' block part too."""
    persons, units = (indexes[n] for n, _ in MDF_FILES.values())
    text = indexes.get(MDF_FILES["persons"][1])
    block = hierarchy.geolevels.levels[-1]
    return [
        _MDFPartCount(
            str(run),
            str(p["file"]),
            None if text is None else str(text["parts"][i]["file"]),
            hierarchy.blocks[a:b],
            schema.name,
            (int(p["rows"]), int(units["parts"][i]["rows"])),
            i == 0,
            part_name(i + 1) if tables else None,
            inv.gq_facilities[a:b] if tables or households else None,
            (block.name, block.length),
            households,
        )
        for i, (p, (a, b)) in enumerate(zip(persons["parts"], ranges, strict=True))
    ]


def _check_part_digests(indexes: dict[str, dict], hashed: Hashed | None) -> None:
    """The parts the tasks hashed are the ones their index lists: each SHA-256 is its
    entry's in ``_parts.json``.

    Raises:
        InputError: naming the first part whose SHA-256 differs.
    """
    for name, index in indexes.items():
        for p in index["parts"]:
            rel = f"{name}/{p['file']}"
            if hashed is not None and rel in hashed and hashed[rel] != p.get("sha256"):
                raise InputError(f"{rel}: its SHA-256 differs from its entry in _parts.json")
