"""Tasks that write and check their own part files: the NMF's, the MDF's and the tables'.

(The MDF's and the tables' tasks are at the end: :class:`MDFPartTask`, one run of blocks'
persons, units and table rows, and :class:`TablesTask`, the tables' rows of every level
above the block; the driver sends each its histogram rows and writes the indexes.)

A :class:`PartTask` is a :class:`~censusdp.release.measure.MeasureTask` with the path
of the part file it writes (``RUN/noisy_measurements.parquet/part-00012.parquet``, the
task's place in the plan). :func:`run_part_task` measures, writes the part
(:func:`censusdp.io.nmf_write.write_nmf_part`: atomically, flushed, checksummed) and returns
only its small record, so the driver never receives, holds or writes the noisy values:
whichever executor runs the tasks (in-process, a pool, Spark), the NMF is written in
parallel, and the same seed gives the same bytes in every part (noise is keyed per
geounit, the part boundaries are the plan's family chunks, not the executor's).

The part path must be reachable from where the task runs: any path on one machine;
on a cluster, a file system the driver and executors share (see docs/scaling.md).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from censusdp.data.histograms import pl94_map, unit_histogram_from_counts
from censusdp.data.schema import get_schema
from censusdp.errors import InputError
from censusdp.execution.base import keep_freed_memory
from censusdp.io.layout import MDF_FILES, TABLES_DIR
from censusdp.io.mdf_parts import (
    MDF_PART_FIELDS,
    BlockCounts,
    mdf_part_counts,
    mdf_part_dhc_units,
    mdf_part_households,
    write_mdf_part,
)
from censusdp.io.mdf_text import count_lines
from censusdp.io.nmf_write import write_nmf_part
from censusdp.io.parts import part_name, write_part_index
from censusdp.io.tables import table_part_mismatch, write_table_part
from censusdp.release.measure import MeasureTask, run_measure_task
from censusdp.tables import level_identifiers, release_table_names, tabulate_rows
from censusdp.tables.dhc import (
    tabulate_dhc_household_rows,
    tabulate_dhc_person_rows,
)
from censusdp.tables.entities import concat_identifiers
from censusdp.tables.households import tabulate_household_rows

__all__ = [
    "MDF_PART_BLOCKS",
    "MDF_PART_PERSONS",
    "MDFPartTask",
    "PartTask",
    "TablesTask",
    "mdf_part_ranges",
    "mdf_part_tasks",
    "run_mdf_part_task",
    "run_part_task",
    "run_tables_task",
    "run_write_task",
    "write_mdf_index",
]


@dataclass(frozen=True, eq=False)
class PartTask:
    """Measure ``task`` and write its answers to the part file ``path`` (absolute)."""

    task: MeasureTask
    path: str


def run_part_task(part: PartTask) -> dict[str, Any]:
    """Run one :class:`PartTask`; return the part's record plus the task's costs.

    The record is :func:`censusdp.io.nmf_write.write_nmf_part`'s (file, level, unit range,
    rows, SHA-256, write seconds) with ``n_values`` and ``cpu_seconds`` (measuring) and
    ``writer`` (host/PID of the process that wrote it) added: a few hundred bytes,
    whatever the size of the part.
    """
    keep_freed_memory()  # the next task reuses this one's pages (measuring is most of a run)
    chunk = run_measure_task(part.task)
    rec = write_nmf_part(chunk, part.path, structural_zeros=part.task.structural_zeros)
    rec["n_values"] = chunk.n_values
    rec["cpu_seconds"] = chunk.cpu_seconds
    rec["writer"] = f"{socket.gethostname()}/{os.getpid()}"
    return rec


# -- the MDF, written and checked by tasks ------------------------------------------------

MDF_PART_PERSONS = 1 << 21
"""Most persons in one MDF part (a block with more is a part alone)."""

MDF_PART_BLOCKS = 1 << 14
"""Most blocks in one MDF part (so the units of a sparsely populated area are split too)."""


@dataclass(frozen=True, eq=False)
class MDFPartTask:
    """Write (and check) part ``index`` of the MDF: the persons and units of the blocks
    ``start:stop`` of the release.

    ``counts`` are their released counts (their geocodes, sorted, their ``(blocks x
    cells)`` histogram and their unit counts); ``first_person`` the ``EPNUM`` of the
    part's first person; ``run`` the directory the part files go to (absolute;
    reachable from where the task runs)."""

    index: int
    start: int
    stop: int
    counts: BlockCounts
    first_person: int
    run: str
    text: bool = True
    tables: bool = True
    geolevel: tuple[str, int] = ("Block", 16)


def mdf_part_ranges(
    persons_per_block: np.ndarray,
    *,
    max_persons: int | None = None,
    max_blocks: int | None = None,
) -> list[tuple[int, int]]:
    """Consecutive block ranges ``(start, stop)`` covering every block, each with at most
    ``max_persons`` persons (unless one block alone has more) and ``max_blocks`` blocks.

    They depend on the released counts only, never on the executor, so the parts (and
    their bytes) are the same on every executor and worker count.
    """
    max_persons = MDF_PART_PERSONS if max_persons is None else max_persons
    max_blocks = MDF_PART_BLOCKS if max_blocks is None else max_blocks
    per = np.asarray(persons_per_block, dtype=np.int64)
    cum = np.concatenate([[0], np.cumsum(per)])
    out, b0, nb = [], 0, per.size
    while b0 < nb:
        b1 = int(np.searchsorted(cum, cum[b0] + max_persons, side="right")) - 1
        b1 = min(max(b1, b0 + 1), b0 + max_blocks, nb)
        out.append((b0, b1))
        b0 = b1
    return out or [(0, 0)]


def mdf_part_tasks(
    counts: BlockCounts,
    run: str | Path,
    *,
    text: bool = True,
    tables: bool = True,
    geolevel: tuple[str, int] = ("Block", 16),
    max_persons: int | None = None,
    max_blocks: int | None = None,
) -> Iterator[MDFPartTask]:
    """The MDF's part tasks, in part order (each slices only its own blocks' rows)."""
    counts = dataclasses.replace(counts, persons=sp.csr_matrix(counts.persons, dtype=np.int64))
    per_block = np.asarray(counts.persons.sum(axis=1)).ravel().astype(np.int64)
    first = np.concatenate([[0], np.cumsum(per_block)])
    ranges = mdf_part_ranges(per_block, max_persons=max_persons, max_blocks=max_blocks)
    for i, (a, b) in enumerate(ranges):
        yield MDFPartTask(
            i, a, b, counts.rows(a, b), int(first[a]), str(run), text, tables, geolevel
        )


def _mdf_paths(run: Path, index: int, text: bool) -> dict[str, tuple[Path, Path | None]]:
    out = {}
    for kind, (pq_name, txt_name) in MDF_FILES.items():
        out[kind] = (
            run / pq_name / part_name(index, ".parquet"),
            run / txt_name / part_name(index, ".txt") if text else None,
        )
    return out


def run_mdf_part_task(job: MDFPartTask) -> dict[str, Any]:
    """Write one MDF part (and, with ``job.tables``, the tables' rows of its blocks), read
    it back and check it against the histogram it was written from; return its records,
    its checks and its costs (a few hundred bytes).

    The checks are the release's ``mdf_matches_histogram`` and ``tables_match_mdf`` for
    these blocks, done where the part was written so that the driver never reads the
    MDF: the persons read back (decoded from the Parquet part) must give exactly
    ``counts.persons`` block by block, the units exactly the vacant, occupied and facility
    counts, each text part one line per record (plus the header in the first part), and
    each table's block rows the tabulation of the MDF part read back.
    """
    t, c = time.perf_counter(), time.process_time()
    run = Path(job.run)
    paths = _mdf_paths(run, job.index, job.text)
    for pq_path, txt_path in paths.values():
        pq_path.parent.mkdir(exist_ok=True)
        if txt_path is not None:
            txt_path.parent.mkdir(exist_ok=True)
    released = job.counts
    schema = get_schema(released.schema)
    records = write_mdf_part(
        job.counts, paths, first_person=job.first_person, header=job.index == 0
    )
    for recs in records.values():
        for rec in recs:
            rec["start"], rec["stop"] = job.start, job.stop
    units = unit_histogram_from_counts(
        released.housing_units, released.occupied, released.gq_facilities
    )
    tables = {}
    ids = None
    if job.tables:
        pl94 = released.persons if schema.name == "pl94" else released.persons @ pl94_map(schema)
        ids = level_identifiers([(job.geolevel[0], job.geolevel[1], released.blocks)])
        rows = tabulate_rows(pl94, units, ids)
        if released.dhc_units is not None and released.households is not None:
            rows.update(tabulate_dhc_household_rows(released.households, released.dhc_units, ids))
        elif released.households is not None:
            rows.update(tabulate_household_rows(released.households, ids))
        if schema.name == "dhcp-2020":
            rows.update(tabulate_dhc_person_rows(released.persons, ids))
        tables = write_table_part(rows, run / TABLES_DIR, job.index + 1)
        for rec in tables.values():
            rec.update(geolevel=job.geolevel[0], start=job.start, stop=job.stop)
    write_cpu = time.process_time() - c
    c2 = time.process_time()
    problem, table_problem = _check_mdf_part(job, paths, records, schema, ids)
    return {
        "index": job.index,
        "records": records,
        "tables": tables,
        "problem": problem,
        "table_problem": table_problem,
        "persons": int(records["persons"][0]["rows"]),
        "units": int(records["units"][0]["rows"]),
        "write_cpu_seconds": write_cpu,
        "check_cpu_seconds": time.process_time() - c2,
        "seconds": time.perf_counter() - t,
        "writer": f"{socket.gethostname()}/{os.getpid()}",
    }


def _check_mdf_part(
    job: MDFPartTask, paths: dict, records: dict, schema: Any, ids: dict | None = None
) -> tuple[str | None, str | None]:
    """The written part read back: (its MDF problem, its tables' problem), ``None`` if
    none; ``ids``: the identifiers of its blocks the tables' rows were written with."""
    released = job.counts
    try:
        hist, pl94, counts = mdf_part_counts(
            paths["persons"][0], paths["units"][0], released.blocks, schema
        )
    except InputError as exc:
        return str(exc), None
    diff = sp.csr_matrix(hist - released.persons)
    diff.eliminate_zeros()
    hu = np.asarray(released.housing_units, dtype=np.int64)
    occ = np.asarray(released.occupied, dtype=np.int64)
    want = np.stack([hu - occ, occ, np.asarray(released.gq_facilities).sum(axis=1)], axis=1)
    bad_units = np.flatnonzero((counts != want).any(axis=1))
    if diff.nnz:
        b = int(diff.nonzero()[0][0])
        return (
            f"{diff.nnz} block cells of part {job.index} differ from the estimate "
            f"(first at block {released.blocks[b]})"
        ), None
    if bad_units.size:
        return (
            f"{bad_units.size} blocks of part {job.index} have other unit records than "
            f"the release's counts (first {released.blocks[bad_units[0]]})"
        ), None
    households, dhc = None, None
    if released.dhc_units is not None:
        problem, dhc = _check_dhc_units(job, paths["units"][0])
        if problem:
            return problem, None
    elif released.households is not None:
        try:
            households = mdf_part_households(
                paths["units"][0], released.blocks, gq_facilities=released.gq_facilities
            )
        except InputError as exc:
            return str(exc), None
        bad_hh = sp.csr_matrix(households - released.households)
        bad_hh.eliminate_zeros()
        if bad_hh.nnz:
            b = int(bad_hh.nonzero()[0][0])
            return (
                f"{bad_hh.nnz} household cells of part {job.index} differ from the estimate "
                f"(first at block {released.blocks[b]})"
            ), None
    for kind, recs in records.items():
        if len(recs) > 1:
            lines = count_lines(Path(paths[kind][1]))
            want_lines = int(recs[1]["rows"]) + (job.index == 0)
            if lines != want_lines:
                return f"{kind} text part {job.index} has {lines} lines, not {want_lines}", None
    if not job.tables or ids is None:
        return None, None
    units = unit_histogram_from_counts(
        counts[:, 0] + counts[:, 1], counts[:, 1], released.gq_facilities
    )
    tables = Path(job.run) / TABLES_DIR
    dhc_rows = {"dhc_persons": hist}
    if dhc is not None:  # the DHC household tables: of the households and units read back
        dhc_rows.update(dhc_households=dhc[0], dhc_units=sp.csr_matrix(dhc[1]))
    household_schema = (
        "dhch-2020" if dhc is not None else "household2010" if households is not None else None
    )
    for name in release_table_names(schema.name, household_schema):
        path = tables / f"{name}.parquet" / part_name(job.index + 1)
        bad = table_part_mismatch(path, name, ids, pl94, units, households, dhc_rows=dhc_rows)
        if bad:
            return None, bad
    return None, None


def _check_dhc_units(
    job: MDFPartTask, units_path: Path
) -> tuple[str | None, tuple[sp.csr_matrix, np.ndarray] | None]:
    """A DHC unit MDF part read back (every record decoded) against the estimate: its
    households and its units by ``tenvacgq`` block by block; ``(the problem, None)``, or
    ``(None, (households, units))`` read back, of which its DHC household tables are
    checked."""
    released = job.counts
    assert released.households is not None and released.dhc_units is not None
    try:
        households, units = mdf_part_dhc_units(units_path, released.blocks)
    except InputError as exc:
        return str(exc), None
    bad_hh = sp.csr_matrix(households - released.households)
    bad_hh.eliminate_zeros()
    bad_units = np.flatnonzero((units != np.asarray(released.dhc_units)).any(axis=1))
    if bad_hh.nnz or bad_units.size:
        b = int(bad_hh.nonzero()[0][0]) if bad_hh.nnz else int(bad_units[0])
        return (
            f"{bad_hh.nnz} household cells and {bad_units.size} blocks' units of part "
            f"{job.index} differ from the estimate (first at block {released.blocks[b]})"
        ), None
    return None, (households, units)


@dataclass(frozen=True, eq=False)
class TablesTask:
    """Write part 0 of each table: the geounits of ``levels`` (name, geocode length,
    geocodes), with their ``pl94`` and unit histograms (rows in the same order), and
    their ``household2010`` histograms for a release with a household run (which adds
    the household tables, :mod:`censusdp.tables.households`). ``entities``: the
    identifiers of the geounits off the hierarchy that follow them (county subdivisions,
    places, AIAN areas: :class:`censusdp.tables.entities.EntityRows`), whose histograms
    are the last rows of ``persons``, ``units`` and ``households``. ``dhc_persons``: the
    same geounits' ``relgq x sex x age x hispanic x race`` histograms of a ``dhcp-2020`` release, which adds
    the DHC person tables (:mod:`censusdp.tables.dhc`). ``dhc_households``: their
    households in the household tables' cells (or ``dhch-2020``) and ``tenvacgq`` units
    of a release with the DHC's household run, which adds the DHC household and unit
    tables (P16, H3-H7, H9-H13)."""

    levels: list[tuple[str, int, np.ndarray]]
    persons: sp.csr_matrix
    units: sp.csr_matrix
    run: str
    households: sp.csr_matrix | None = None
    entities: dict[str, pa.Array] | None = None
    dhc_persons: sp.csr_matrix | None = None
    dhc_households: tuple[sp.csr_matrix, sp.csr_matrix] | None = None


def run_tables_task(job: TablesTask) -> dict[str, Any]:
    """Write the tables' part 0 (every level above the block), read it back and check it
    against the tabulation of the histograms it was given; return its records."""
    c = time.process_time()
    ids = level_identifiers(job.levels)
    if job.entities is not None:
        ids = concat_identifiers(ids, job.entities)
    out = Path(job.run) / TABLES_DIR
    rows = tabulate_rows(job.persons, job.units, ids)
    if job.households is not None:
        rows.update(tabulate_household_rows(job.households, ids))
    if job.dhc_persons is not None:
        rows.update(tabulate_dhc_person_rows(job.dhc_persons, ids))
    dhc_rows = {"dhc_persons": job.dhc_persons}
    if job.dhc_households is not None:
        rows.update(tabulate_dhc_household_rows(*job.dhc_households, ids))
        dhc_rows.update(dhc_households=job.dhc_households[0], dhc_units=job.dhc_households[1])
    names = release_table_names(
        "dhcp-2020" if job.dhc_persons is not None else "",
        "dhch-2020"
        if job.dhc_households is not None
        else "household2010"
        if job.households is not None
        else None,
    )
    records = write_table_part(rows, out, 0)
    n = len(ids["geocode"])
    geolevels = [name for name, *_ in job.levels]
    if job.entities is not None:
        geolevels += list(dict.fromkeys(job.entities["geolevel"].to_pylist()))
    for rec in records.values():
        rec.update(geolevel=",".join(geolevels), start=0, stop=n)
    problem = None
    for name in names:
        bad = table_part_mismatch(
            out / f"{name}.parquet" / part_name(0), name, ids, job.persons, job.units,
            job.households, dhc_rows=dhc_rows,
        )  # fmt: skip
        problem = problem or bad
    return {
        "tables": records,
        "table_problem": problem,
        "cpu_seconds": time.process_time() - c,
        "writer": f"{socket.gethostname()}/{os.getpid()}",
    }


def run_write_task(job: MDFPartTask | TablesTask) -> dict[str, Any]:
    """Run an MDF part task or the tables' part-0 task: one map of the executor runs them
    all, so part 0 (every level above the block: most of the long CSV) is written beside
    the MDF's parts, not before them."""
    if isinstance(job, TablesTask):
        return run_tables_task(job)
    return run_mdf_part_task(job)


def write_mdf_index(run: str | Path, parts: list[dict[str, Any]], text: bool = True) -> None:
    """Write the ``_parts.json`` of each MDF directory from the tasks' results."""
    run = Path(run)
    for kind, names in MDF_FILES.items():
        for j, name in enumerate(names if text else names[:1]):
            write_part_index(run / name, [p["records"][kind][j] for p in parts], MDF_PART_FIELDS)
