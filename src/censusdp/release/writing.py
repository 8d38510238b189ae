"""Writing a release: everything after measurement. The invariants and the spine, the
estimate of both runs, the MDF and the tables (part files written and checked by
executor tasks), and the release's own check of what it wrote.
"""

from __future__ import annotations

import itertools
import os
import socket
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.invariants import Invariants
from censusdp.data.schema import Schema, get_schema, unit_schema_of
from censusdp.data.schema_dhc import DHCP_2020
from censusdp.errors import InternalError
from censusdp.io.atomic import write_parquet
from censusdp.io.layout import (
    HELD_PL94_FILE,
    INVARIANT_TOTALS_FILE,
    INVARIANTS_FILE,
    MANIFEST_FILE,
    TABLES_DIR,
)
from censusdp.io.mdf_parts import BlockCounts
from censusdp.io.rundir import RunDir
from censusdp.io.tables import write_table_index
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.progress import say, task
from censusdp.release.checkpoint import Checkpoint
from censusdp.release.dhc_units import DHCH_FIDELITY, DHCH_FIDELITY_H1, DHCH_SCHEMA
from censusdp.release.estimation import (
    EstimationInputs,
    ReleaseEstimate,
    estimate_runs,
    occupied_units,
    on_tabulation,
    released_histograms,
    unit_run,
)
from censusdp.release.household_consistency import is_household_run
from censusdp.release.manifest import new_manifest
from censusdp.release.options import ReleaseOptions, Runtime
from censusdp.release.parts import (
    TablesTask,
    mdf_part_tasks,
    run_write_task,
    write_mdf_index,
)
from censusdp.release.spine import ReleaseGeography
from censusdp.release.validate import validate_release
from censusdp.tables.dhc import dhc_household_rows, dhc_person_rows
from censusdp.tables.entities import entity_rows

__all__ = ["write_release"]


def write_release(
    out: Path,
    inv: Invariants,
    geo: ReleaseGeography,
    budget: ReleaseBudget,
    options: ReleaseOptions,
    rt: Runtime,
    checkpoint: Checkpoint | None = None,
) -> dict[str, Any]:
    """Everything after measurement: invariants, estimate, write, validate (the NMF is
    in ``out``; estimated levels are checkpointed in ``checkpoint``, which is removed
    once all is written). Returns the manifest, all but its closing entries.

    ``inv`` are the tabulation's invariants; ``geo`` the geography the NMF was measured
    on (its ``tabulation`` hierarchy is what the files publish)."""
    hierarchy = geo.tabulation
    schema = get_schema(budget.persons.schema)
    manifest = new_manifest(
        schema=schema.name,
        postprocess=options.postprocess,
        hierarchy=hierarchy,
        executor=rt.executor,
        workers=rt.workers,
        budget=budget.persons,
        units_budget=budget.units,
    )
    t = time.perf_counter()
    write_parquet(inv.to_table(), out / INVARIANTS_FILE)
    write_parquet(inv.state_table(hierarchy), out / INVARIANT_TOTALS_FILE)
    held = inv.held_pl94_table()
    if held is not None:  # the P.L. 94 release's persons a DHC person run is held to
        write_parquet(held, out / HELD_PL94_FILE)
    geo.write(out, with_units=budget.units is not None)
    manifest["spine"] = geo.record(budget.persons, budget.units)
    rt.timings["write_invariants"] = time.perf_counter() - t
    manifest["max_children"] = options.max_children
    manifest["fidelity"] = options.fidelity_record()
    if is_household_run(budget.units) and options.unit_consistency == "consistent":
        manifest["fidelity"]["differences"]["units"] = (
            "consistent: households first, household persons held to their sizes"
        )
    elif budget.units is not None and budget.units.schema == DHCH_SCHEMA:
        manifest["fidelity"]["differences"]["units"] = (
            DHCH_FIDELITY if inv.h1_occupied is None else DHCH_FIDELITY_H1
        )
    if schema.name == DHCP_2020.name and inv.pl94_persons is None:
        manifest["fidelity"]["differences"]["persons_pl94"] = DHCP_FIDELITY_UNHELD
    if options.postprocess != "none":
        est = _estimate_from_nmf(
            RunDir(out),
            geo,
            inv,
            options,
            rt,
            unit_schema=None if budget.units is None else budget.units.schema,
            manifest=manifest,
            checkpoint=checkpoint,
        )
        if geo.spine is not None:
            est = on_tabulation(est, geo, inv, schema, manifest)
        written = _write_outputs(out, est, inv, geo, schema, rt, manifest)
        _validate_outputs(est, inv, hierarchy, schema, written, rt, manifest)
    if checkpoint is not None:
        checkpoint.discard()
    manifest["outputs"] = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) + [
        MANIFEST_FILE
    ]
    return manifest


DHCP_FIDELITY_UNHELD = (
    "dhc: persons' HHGQ x voting age x Hispanic x CENRACE (P1-P5) from this run's own "
    "noise; production's pl94 held every geounit to its P.L. 94 release's (--h1-from)"
)
"""The manifest's fidelity difference of a DHC person run not held to a P.L. 94 release."""


def _estimate_from_nmf(
    run: RunDir,
    geo: ReleaseGeography,
    inv: Invariants,
    options: ReleaseOptions,
    rt: Runtime,
    *,
    unit_schema: str | None,
    manifest: dict[str, Any],
    checkpoint: Checkpoint | None = None,
) -> ReleaseEstimate:
    """Estimate persons (and units, on ``unit_schema``: ``units`` or ``household2010``;
    ``None``: no unit run) from the NMF of ``run`` (read chunk by chunk, never whole),
    each run on its own estimation hierarchy of ``geo``
    (:meth:`~censusdp.release.spine.ReleaseGeography.for_run`); ``inv`` are the
    tabulation's invariants."""
    schema = get_schema(manifest["schema"])
    beside = None if unit_schema is None else unit_schema_of(unit_schema)
    # the parts this run's tasks wrote: their layout is the writer's (rt.written)
    mine, units = rt.written.get("persons"), rt.written.get("units")
    inputs = EstimationInputs.on(
        geo,
        inv,
        run.nmf_reader("persons", schema, geo.estimation, written=mine),
        run.nmf_reader(
            "units", get_schema(unit_schema), geo.units.estimation, unit_schema, written=units
        )
        if unit_schema
        else None,
        # a unit histogram measured beside the unit run's (the DHC's tenvacgq), same NMF
        None
        if beside is None
        else run.nmf_reader("units", beside, geo.units.estimation, unit_schema, written=units),
    )
    return estimate_runs(inputs, options, rt, manifest, checkpoint)


def _write_outputs(
    out: Path,
    est: ReleaseEstimate,
    inv: Invariants,
    geo: ReleaseGeography,
    schema: Schema,
    rt: Runtime,
    manifest: dict[str, Any],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Write the MDF (persons and units) and the tables as part files by tasks on
    ``executor``; return the MDF tasks' results (records, checks, costs) and the tables'
    part-0 task's.

    Each task (:func:`censusdp.release.parts.run_mdf_part_task`) gets one run of blocks'
    released histogram rows and unit counts, writes that part of the four MDF files and
    its tables' rows (Parquet and CSV), reads it back and checks it; only its records
    come back here, and the driver writes each directory's ``_parts.json`` and puts the
    tables' CSV together. The tables' part 0 goes first in the same map
    (:func:`censusdp.release.parts.run_write_task`), so it runs beside the MDF's parts;
    it holds the geounits off the hierarchy after the levels above the block (county
    subdivisions, places and AIAN areas where ``geo`` records the blocks' attributes:
    :mod:`censusdp.tables.entities`).
    """
    executor, progress, timings = rt.executor, rt.progress, rt.timings
    hierarchy = geo.tabulation
    t, c = time.perf_counter(), time.process_time()
    block_hist = est.persons.histograms[-1]
    occupied = occupied_units(est, inv, manifest)
    pl94_hist, units_hist = released_histograms(est, inv, schema, manifest)
    # part 0 of the tables: every level above the block, one small task
    pl94_levels, unit_levels = hierarchy.aggregate(pl94_hist), hierarchy.aggregate(units_hist)
    upper = list(zip(hierarchy.geolevels.levels[:-1], hierarchy.geocodes[:-1], strict=True))
    # a household run's block households (on the tabulation's blocks): its unit MDF
    # records and household tables
    households = (
        est.units.histograms[-1]
        if (est.households or est.dhc_households) and est.units is not None
        else None
    )
    # a DHC household run: its households and units by tenvacgq go to the DHC unit layout
    # and its tables (P16, H9 of the households; H3, H4, H5 of the units)
    dhc_units = None
    if est.dhc_households and est.units is not None and est.unit_histogram is not None:
        dhc_units = np.asarray(est.unit_histogram.histograms[-1].todense(), dtype=np.int64)
    ent = entity_rows(hierarchy.blocks, geo.entities)

    def upper_rows(block_rows: sp.spmatrix) -> sp.csr_matrix:
        # every level above the block, then the geographies off the hierarchy
        block_rows = sp.csr_matrix(block_rows, dtype=np.int64)
        return _stacked(
            [*hierarchy.aggregate(block_rows)[:-1], ent.rows(block_rows)], block_rows.shape[1]
        )

    dhc_persons = None
    if schema.name == "dhcp-2020":  # the DHC person tables: relgq x sex x age x hispanic x race
        dhc_persons = upper_rows(dhc_person_rows(block_hist))
    dhc_tables = None
    if dhc_units is not None and households is not None:  # household-table cells; tenvacgq
        dhc_tables = (upper_rows(dhc_household_rows(households)), upper_rows(dhc_units))
    tables_job = TablesTask(
        [(lv.name, lv.length, codes) for lv, codes in upper],
        _stacked([*pl94_levels[:-1], ent.rows(pl94_hist)], pl94_hist.shape[1]),
        _stacked([*unit_levels[:-1], ent.rows(units_hist)], units_hist.shape[1]),
        str(out.resolve()),
        None
        if households is None or dhc_units is not None
        else _stacked(
            [*hierarchy.aggregate(households)[:-1], ent.rows(households)], households.shape[1]
        ),
        ent.ids,
        dhc_persons,
        dhc_tables,
    )
    bar = task(progress, "writing the MDF", int(block_hist.sum()), unit="persons", summary=False)
    block = hierarchy.geolevels.levels[-1]
    parts: list[dict[str, Any]] = []
    released = BlockCounts(
        hierarchy.blocks,
        block_hist,
        schema.name,
        inv.housing_units,
        occupied,
        inv.gq_facilities,
        households,
        dhc_units,
    )
    if households is not None:
        manifest["households_released"] = int(households.sum())
    jobs = mdf_part_tasks(released, out.resolve(), geolevel=(block.name, block.length))
    # the tables' part 0 first, in the same map: it runs beside the first MDF parts
    results = executor.map(run_write_task, itertools.chain([tables_job], jobs))
    with bar:
        top = next(results)
        for res in results:
            parts.append(res)
            bar.advance(res["persons"])
    write_mdf_index(out, parts)
    write_table_index(out / TABLES_DIR, [top["tables"]] + [p["tables"] for p in parts])
    task_cpu = sum(p["write_cpu_seconds"] for p in parts) + top["cpu_seconds"]
    check_cpu = sum(p["check_cpu_seconds"] for p in parts)
    timings["write_mdf_task_cpu"] = timings.get("write_mdf_task_cpu", 0.0) + task_cpu
    timings["check_mdf_task_cpu"] = timings.get("check_mdf_task_cpu", 0.0) + check_cpu
    manifest["persons_released"] = sum(p["persons"] for p in parts)
    manifest["units_released"] = sum(p["units"] for p in parts)
    writers = {p["writer"] for p in [*parts, top]}
    manifest["executor"]["mdf_parts"] = len(parts)
    manifest["executor"]["mdf_part_writers"] = len(writers)
    manifest["executor"]["mdf_parts_by_driver"] = f"{socket.gethostname()}/{os.getpid()}" in writers
    timings["write_release"] = time.perf_counter() - t
    timings["write_release_cpu"] = time.process_time() - c
    say(
        progress,
        f"wrote {manifest['persons_released']:,} MDF persons in {_parts(len(parts))} and the tables",
    )
    return parts, top


def _stacked(levels: list[sp.csr_matrix], n_cells: int) -> sp.csr_matrix:
    """Levels' histograms stacked (top first); none: an empty matrix."""
    if not levels:
        return sp.csr_matrix((0, n_cells), dtype=np.int64)
    return sp.csr_matrix(sp.vstack(levels, format="csr"), dtype=np.int64)


def _validate_outputs(
    est: ReleaseEstimate,
    inv: Invariants,
    hierarchy: Hierarchy,
    schema: Schema,
    written: tuple[list[dict[str, Any]], dict[str, Any]],
    rt: Runtime,
    manifest: dict[str, Any],
) -> None:
    """Check the estimate, and what was written against it, independently.

    Neither the MDF nor the tables are read here: each part was read back and checked
    by the task that wrote it (``parts``, :func:`censusdp.release.parts.run_mdf_part_task`
    and :func:`~censusdp.release.parts.run_tables_task`), so ``mdf_matches_histogram``
    (each MDF part equals the estimate) and ``tables_match_mdf`` (each table part is the
    tabulation of its MDF part read back; part 0, of the levels above the block, that of
    their estimate, which ``hierarchy_consistent`` shows to be the blocks' sums) are
    their verdicts.
    """
    t, c = time.perf_counter(), time.process_time()
    report = validate_release(
        est.persons.histograms,
        hierarchy,
        schema,
        est.bounds,
        units=unit_run(est, inv),
        failsafe_uses=len(est.persons.failsafe),
        held_pl94=inv.pl94_persons,
    )
    parts, top = written
    bad_tables = [p["table_problem"] for p in [top, *parts] if p["table_problem"]]
    report.add(
        "tables_match_mdf",
        not bad_tables,
        "; ".join(bad_tables[:3])
        or "every table part read back by its task equals the tabulation of its MDF part",
    )
    problems = [p["problem"] for p in parts if p["problem"]]
    report.add(
        "mdf_matches_histogram",
        not problems,
        "; ".join(problems[:3])
        or f"{_parts(len(parts))} read back by their tasks equal the estimate",
    )
    rt.timings["validate"] = time.perf_counter() - t
    rt.timings["validate_cpu"] = time.process_time() - c
    manifest["validation"] = report.to_dict()
    if not report.ok and not est.persons.failsafe:
        raise InternalError("release failed validation: " + "; ".join(report.failures()))


def _parts(n: int) -> str:
    """``1 part``, ``3 parts``."""
    return f"{n} part{'' if n == 1 else 's'}"
