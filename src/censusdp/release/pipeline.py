"""The release pipeline: read -> aggregate -> measure -> estimate -> write -> validate.

:func:`run_release` is what ``censusdp run`` calls. Data flows one way (docs/ARCHITECTURE.md):
the confidential input is read and validated, aggregated and measured; from then on
only the :class:`~censusdp.data.measurements.MeasurementSet` and the public
:class:`~censusdp.data.invariants.Invariants` are passed on, so :func:`reestimate` can rebuild
a release from a run directory's noisy measurement file alone.

Two runs compose, as in 2020 production: the person run (the preset's schema) and the
housing-unit run (schema ``units``: occupied vs vacant housing units, total housing
units invariant at every block), each with its own budget; the manifest reports both
and their total.

Every output is written into a staging directory next to ``out_dir`` and renamed into
place only when the whole release has been written and validated, so a failed run
leaves nothing half-written.

Memory is bounded by a chunk of families, not by the input: measurement runs as
executor tasks (:func:`censusdp.release.measure.measure_tasks`), each writing its own
part file of the NMF (:mod:`censusdp.release.parts`; the driver receives only each
part's checksum and counts, and records it in the checkpoint as it arrives);
estimation reads the NMF back chunk by chunk
(:class:`censusdp.io.nmf.NMFReader`), so the same code serves ``--from-measurements``
and a fresh run, and no level's measurements are ever all in memory; the MDF is written
block chunk by block chunk and validated by re-reading it in batches. What stays in
memory is sparse: the block histograms of the input and of the estimate and the per-level
bounds (about 1 GB for California's 710k blocks).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import scipy.sparse as sp

from censusdp.data.geography import GeoLevels, Hierarchy
from censusdp.data.histograms import pl94_map, unit_histogram_from_counts
from censusdp.data.invariants import Bounds, Invariants, level_bounds
from censusdp.data.measurements import Measurements
from censusdp.data.schema import Schema, get_schema
from censusdp.data.spine import UnitShares
from censusdp.errors import ConfigError, InputError, InternalError, ResumeError
from censusdp.execution import EXECUTOR_CHOICES, make_executor
from censusdp.io.atomic import write_parquet
from censusdp.io.cef_files import CEFInput, hash_input
from censusdp.io.cef_stream import read_cef_blocks
from censusdp.io.nmf import NMF_FILES, NMFReader, nmf_files, part_name, write_part_index
from censusdp.io.output import Staging
from censusdp.io.tables import write_table_index
from censusdp.privacy.budget import Budget
from censusdp.privacy.randomness import RandomSource
from censusdp.progress import Progress, say, task
from censusdp.release.checkpoint import Checkpoint, run_fingerprint
from censusdp.release.consistency import (
    UNIT_GROUP_VARIABLE,
    consistent_unit_bounds,
    household_persons,
    independent_unit_bounds,
)
from censusdp.release.manifest import (
    MANIFEST_FILE,
    commit_run,
    inherited_randomness,
    new_manifest,
    read_manifest,
    recorded_budgets,
)
from censusdp.release.measure import measure_tasks
from censusdp.release.parts import (
    PartTask,
    TablesTask,
    mdf_part_tasks,
    run_mdf_part_task,
    run_part_task,
    run_tables_task,
    write_mdf_index,
)
from censusdp.release.spine import (
    SPINE_CHOICES,
    ReleaseGeography,
    geography_for_input,
    geography_of_run,
    requested_spine,
)
from censusdp.release.topdown.driver import TopDownOptions, TopDownResult, run_topdown
from censusdp.release.topdown.maxent import default_estimator
from censusdp.release.topdown.split import DEFAULT_MAX_CHILDREN
from censusdp.release.validate import require_valid, validate_release, validate_run
from censusdp.tables import table_arrays

__all__ = [
    "EXECUTOR_CHOICES",
    "POSTPROCESS_CHOICES",
    "SPINE_CHOICES",
    "UNITS_CHOICES",
    "estimate_tables",
    "reestimate",
    "run_release",
]

POSTPROCESS_CHOICES = ("topdown", "bottomup", "none")
UNITS_CHOICES = ("consistent", "independent")
"""``consistent``: the unit run is held to the released persons per block
(:mod:`censusdp.release.consistency`); ``independent``: as 2020 production."""


def _geolevels(budget: Budget) -> GeoLevels:
    return GeoLevels.from_pairs(list(budget.geolevels))


def _plan(budget: Budget) -> list[tuple[str, str, Any]]:
    return [(m.geolevel, m.query, m.mechanism) for m in budget.measurements()]


def _person_bounds(inv: Invariants, hierarchy: Hierarchy) -> list[Bounds]:
    return [Bounds(*b) for b in level_bounds(inv, hierarchy)]


def _measure_to_parts(
    block_hist: sp.csr_matrix,
    hierarchy: Hierarchy,
    schema: Schema,
    plan: list[tuple[str, str, Any]],
    source: Callable[[], RandomSource],
    directory: Path,
    executor: Any,
    progress: Progress,
    timings: dict[str, float],
    unit_shares: UnitShares | None = None,
    *,
    done: dict[str, dict[str, Any]] | None = None,
    record: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[int, dict[str, int], list[dict[str, Any]]]:
    """Measure level by level, chunk by chunk; each task writes its own part of the NMF
    directory ``directory`` (:mod:`censusdp.release.parts`).

    ``unit_shares``: per-geounit budgets of a spine release (bypass), else ``None``.

    The only function that sees confidential histograms (it is given them, it does not
    read the input). The driver receives each part's record (rows, checksum, costs),
    hands it to ``record`` (the checkpoint's part log) and keeps it for the index.
    Parts in ``done`` (``{path relative to the run: record}``, from an interrupted run)
    are neither measured nor written again; ``source`` is called only if a part is
    missing (a resumed secure run whose parts are all written makes no key).
    Returns the rows written in total and by level (``done`` included) and every part's
    record; adds the tasks' measuring and writing CPU seconds (``measure_task_cpu``,
    ``write_parts_task_cpu``) and the driver's recording seconds
    (``write_measurements``) to ``timings``.
    """
    done = dict(done or {})
    levels = hierarchy.aggregate(block_hist)
    directory.mkdir(exist_ok=True)
    prefix = directory.name
    planned = {geolevel for geolevel, _, _ in plan}
    names = [lv.name for lv in hierarchy.geolevels.levels]
    total = sum(hierarchy.n_units(i) for i, name in enumerate(names) if name in planned)
    parts = list(done.values())
    seen: dict[str, int] = {}
    for rec in parts:
        seen[rec["geolevel"]] = seen.get(rec["geolevel"], 0) + int(rec["rows"])
    bar = task(progress, f"measuring ({schema.name})", total, unit="geounits", summary=False)
    bar.advance(sum(int(r["stop"]) - int(r["start"]) for r in parts))

    def jobs() -> Iterator[PartTask]:
        made: RandomSource | None = None
        tasks = measure_tasks(
            levels, hierarchy, schema, plan, _LazySource(), unit_shares=unit_shares
        )
        for i, mt in enumerate(tasks):
            name = part_name(i)
            if f"{prefix}/{name}" in done:
                continue
            made = made if made is not None else source()
            yield PartTask(replace(mt, source=made), str(directory / name))

    with bar:
        for rec in executor.map(run_part_task, jobs()):
            t = time.perf_counter()
            rec["path"] = f"{prefix}/{rec['file']}"
            if record is not None:
                record(rec)
            parts.append(rec)
            timings["write_measurements"] = (
                timings.get("write_measurements", 0.0) + time.perf_counter() - t
            )
            timings["measure_task_cpu"] = timings.get("measure_task_cpu", 0.0) + rec["cpu_seconds"]
            timings["write_parts_task_cpu"] = (
                timings.get("write_parts_task_cpu", 0.0) + rec["write_cpu_seconds"]
            )
            seen[rec["geolevel"]] = seen.get(rec["geolevel"], 0) + int(rec["rows"])
            bar.advance(int(rec["stop"]) - int(rec["start"]))
            level = hierarchy.geolevels.index(rec["geolevel"])
            if progress is not None and rec["stop"] == hierarchy.n_units(level):
                progress(
                    f"measured {rec['geolevel']:<10} {rec['stop']:>8,} units, "
                    f"{seen[rec['geolevel']]:>13,} noisy values ({schema.name})"
                )
    rows = sum(int(r["rows"]) for r in parts)
    by_level = {name: seen[name] for name in names if name in seen}
    return rows, by_level, parts


class _LazySource:
    """A placeholder source while the plan's tasks are cut (the real one is made only
    for a task that is measured)."""


@contextlib.contextmanager
def _run_directory(
    out_dir: str | Path,
    overwrite: bool,
    executor: str,
    workers: int,
    spark_master: str | None,
    source: str | Path,
    resume: bool = False,
) -> Iterator[tuple[Staging, Any]]:
    """The staging directory of a run and its executor; the staging is removed on failure
    (the body commits it on success; a refused resume or an interrupt keeps the
    checkpointed work)
    and the executor is always closed. The output may not overlap ``source`` (the input
    directory or the measured run)."""
    staging = Staging(Path(out_dir), overwrite, inputs=[source], resume=resume)
    ex = None
    try:
        ex = make_executor(workers, kind=executor, spark_master=spark_master)
        yield staging, ex
    except BaseException as exc:
        # an interrupt (SIGINT, or SIGTERM as the CLI raises it) keeps the finished,
        # checkpointed steps for --resume, as a refused resume does
        staging.abort(keep_resumable=isinstance(exc, ResumeError | KeyboardInterrupt))
        if isinstance(exc, KeyboardInterrupt) and staging.path.is_dir():
            exc.args = (
                f"its finished steps are kept in {staging.path.name}; rerun the same "
                "command with --resume to continue",
            )
        raise
    finally:
        close = getattr(ex, "close", None)
        if close is not None:
            close()


def _self_check(
    postprocess: str, timings: dict[str, float], progress: Progress = None, executor: Any = None
) -> Callable[[Path], None]:
    """A run validates its own files (as ``censusdp validate`` would) before it commits;
    the NMF's parts are checked by tasks on ``executor``."""

    def check(staged: Path) -> None:
        t, c = time.perf_counter(), time.process_time()
        report = validate_run(staged, progress=progress, executor=executor)
        timings["validate_files"] = time.perf_counter() - t
        timings["validate_files_cpu"] = time.process_time() - c
        timings["validate_files_task_cpu"] = report.task_cpu_seconds
        if not report.ok:
            raise InternalError(
                "the written release fails validation: " + "; ".join(report.failures())
            )

    return check


def _read_and_aggregate(
    cef_input: CEFInput,
    budget: Budget,
    *,
    with_units: bool,
    progress: Progress,
    timings: dict[str, float],
    spine: tuple[str, bool] = ("tabulation", False),
    executor: Any = None,
    record: dict[str, Any] | None = None,
) -> tuple[ReleaseGeography, Invariants, dict[str, sp.csr_matrix], int]:
    """Read and validate the CEF (its files as hashed: each read checks it is still the
    file hashed); return the geography, the invariants, the block
    histograms each run measures (``persons``, ``units``; blocks in the order of the
    geography's estimation hierarchy) and the number of persons.

    The input is read in parts by ``executor``'s tasks (:mod:`censusdp.io.cef_stream`),
    each part's records in its own process, only block histograms coming back;
    ``record`` (the manifest's) receives the parts and the processes that read them.

    ``spine`` is the spine requested and whether the user asked for it explicitly
    (:func:`censusdp.release.spine.geography_for_input`). The microdata are dropped when
    this returns: from here on only block histograms, then noisy measurements and
    invariants, exist.
    """
    t, c = time.perf_counter(), time.process_time()
    # read in parts (geocode ranges) by the executor's tasks, into block histograms
    # (io/cef_stream.py): the records never come to the driver
    cef = read_cef_blocks(
        cef_input,
        _geolevels(budget),
        get_schema(budget.schema),
        with_units=with_units,
        executor=executor,
        progress=progress,
    )
    timings["read"] = time.perf_counter() - t
    timings["read_cpu"] = time.process_time() - c
    if record is not None:
        record["input_parts"] = cef.parts
        record["input_part_readers"] = len(cef.readers)
        record["input_parts_by_driver"] = f"{socket.gethostname()}/{os.getpid()}" in cef.readers
    say(
        progress,
        f"read {cef.n_persons:,} persons and {cef.n_units:,} units from {cef_input.directory}",
    )
    hists = {"persons": cef.persons}
    if with_units:
        hists["units"] = cef.housing_units
    hierarchy, inv = cef.hierarchy, cef.invariants
    timings["aggregate"] = time.perf_counter() - t
    say(progress, f"built block histograms of {hierarchy.blocks.size:,} blocks")
    t = time.perf_counter()
    # one row per block: the geography needs the blocks' attributes, not the units'
    per_block = {"geocode": hierarchy.blocks, **cef.block_attributes}
    geo = geography_for_input(
        spine[0], budget, hierarchy, per_block, inv, explicit=spine[1], progress=progress
    )
    hists = {k: geo.to_estimation(v) for k, v in hists.items()}
    if geo.spine is not None:
        timings["spine"] = time.perf_counter() - t
    return geo, inv, hists, cef.n_persons


def _measure_runs(
    hists: dict[str, sp.csr_matrix],
    hierarchy: Hierarchy,
    budget: Budget,
    units_budget: Budget | None,
    source: Callable[[], RandomSource],
    out: Path,
    executor: Any,
    progress: Progress,
    timings: dict[str, float],
    checkpoint: Checkpoint | None = None,
    geo: ReleaseGeography | None = None,
) -> dict[str, Any]:
    """Measure each run into its NMF in ``out``, dropping each histogram once measured.

    With a spine ``geo``, each geounit spends its own share of each run's budget
    (:meth:`ReleaseGeography.unit_shares`: single children bypassed).

    A run whose NMF ``checkpoint`` holds from before an interruption is not measured
    again (no new noise is drawn for it); each newly finished NMF is recorded there.
    ``source`` is called only when a run is measured: a resumed secure run whose
    measurements are all written makes no key at all.
    Returns the manifest's record of the rows written.
    """
    t = time.perf_counter()
    runs = {"persons": (budget, get_schema(budget.schema))}
    if units_budget is not None:
        runs["units"] = (units_budget, get_schema("units"))
    record: dict[str, Any] = {"noisy_values_by_level": {}}
    for run, (b, schema) in runs.items():
        done = checkpoint.measured(run) if checkpoint is not None else None
        if done is not None:
            hists.pop(run)
            record[NMF_FILES[run].removesuffix(".parquet")] = done["rows"]
            record["noisy_values_by_level"][run] = done["by_level"]
            continue
        n_rows, by_level, parts = _measure_to_parts(
            hists.pop(run),
            hierarchy,
            schema,
            _plan(b),
            lambda run=run: source().child(run),
            out / NMF_FILES[run],
            executor,
            progress,
            timings,
            None if geo is None else geo.unit_shares(b),
            done=checkpoint.parts(run) if checkpoint is not None else None,
            record=(lambda rec, run=run: checkpoint.finish_part(run, rec))
            if checkpoint is not None
            else None,
        )
        record.setdefault("_writers", set()).update(p["writer"] for p in parts if "writer" in p)
        index = write_part_index(out / NMF_FILES[run], parts)
        record[NMF_FILES[run].removesuffix(".parquet")] = n_rows
        record["noisy_values_by_level"][run] = by_level
        if checkpoint is not None:
            checkpoint.finish_measurement(run, str(index.relative_to(out)), n_rows, by_level)
    timings["measure"] = time.perf_counter() - t
    return record


def run_release(
    input_dir: str | Path,
    out_dir: str | Path,
    *,
    budget: Budget,
    units_budget: Budget | None = None,
    seed: int | None = None,
    postprocess: str = "topdown",
    units: str = "consistent",
    workers: int = 1,
    method: str = "auto",
    estimator: str | None = None,
    executor: str = "auto",
    spark_master: str | None = None,
    overwrite: bool = False,
    resume: bool = False,
    progress: Progress = None,
    command: list[str] | None = None,
    spine: str | None = None,
    max_children: int | None = DEFAULT_MAX_CHILDREN,
) -> dict:
    """Produce a release from a CEF directory; returns the manifest.

    Args:
        input_dir: directory with ``persons.parquet`` and ``units.parquet``.
        out_dir: the run directory to create (see docs/file-formats.md for its files).
        budget: the person-run :class:`~censusdp.privacy.budget.Budget`.
        units_budget: the housing-unit run's budget (schema ``units``), or ``None`` to
            skip the unit run (then ``mdf_units`` and H1 carry housing units with the
            occupancy left unreleased: all marked vacant, and the manifest says so).
        seed: ``None`` for a release (secure randomness); an integer for a reproducible,
            non-secure run.
        postprocess: ``"topdown"``, ``"bottomup"`` or ``"none"`` (measurements only).
        units: ``"consistent"`` (per block, occupied units between one where household
            persons were released and the household persons; see
            :mod:`censusdp.release.consistency`) or ``"independent"`` (2020 production).
        workers: worker processes for the pool executor (``"auto"``: pool when > 1).
        method: least-squares method (``"auto"``, ``"admm"``, ``"clarabel"``).
        estimator: ``"ls"`` (least squares), ``"maxent"`` (maximum entropy over the
            informative measured marginals) or ``"auto"`` (per subproblem, by the public
            noise law); ``None``: the schema's default
            (:func:`~censusdp.release.topdown.maxent.default_estimator`: ``auto`` for
            ``dhc-lite``, least squares otherwise); see
            :mod:`censusdp.release.topdown.maxent`.
        executor: ``"auto"``, ``"inprocess"``, ``"pool"`` or ``"spark"``
            (see :mod:`censusdp.execution.local`); the release does not depend on it.
        spark_master: Spark master URL for ``executor="spark"`` (default ``local[*]``).
        overwrite: replace an existing non-empty ``out_dir`` (and discard the resumable
            work of an interrupted run of it, unless ``resume``).
        resume: continue an interrupted run of ``out_dir`` from its finished steps
            (:mod:`censusdp.release.checkpoint`): measurements already written are
            reused, never drawn again. Refused (:class:`~censusdp.errors.ResumeError`)
            unless the input files, budgets, randomness and options are the same; with
            nothing to continue, the run starts afresh.

        spine: the geography measured and estimated on (:mod:`censusdp.release.spine`):
            ``"optimized"`` (the 2020 production spine, built from the input's block
            attributes) or ``"tabulation"``; ``None``: the budget's choice (the
            budget may say ``spine = "optimized"``, which falls back to the tabulation
            hierarchy with a note when the input has no block attributes), else
            ``tabulation``.

        max_children: families with more children are estimated in chunks
            (:mod:`censusdp.release.topdown.split`); ``None`` never splits.

    Every run checkpoints its finished steps, so any run can be resumed.
    """
    if postprocess not in POSTPROCESS_CHOICES:
        raise ConfigError(
            f"--postprocess must be one of {POSTPROCESS_CHOICES}, got {postprocess!r}"
        )
    _check_units(units)
    spine_choice = (requested_spine(spine, budget), spine is not None)
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    # every input file hashed, and stamped: the reader checks it reads those very bytes
    cef_input = hash_input(input_dir)
    input_sha256 = cef_input.sha256
    fingerprint = run_fingerprint(
        input_sha256=input_sha256,
        budget=budget,
        units_budget=units_budget,
        seed=seed,
        postprocess=postprocess,
        units=units,
        method=method,
        spine=str(spine_choice[0]),
        estimator=estimator,
        max_children=max_children,
    )
    with _run_directory(
        out_dir, overwrite, executor, workers, spark_master, input_dir, resume=resume
    ) as (staging, ex):
        ckpt = Checkpoint.open(staging, fingerprint, progress)
        read_record: dict[str, Any] = {}
        geo, inv, hists, n_persons = _read_and_aggregate(
            cef_input,
            budget,
            with_units=units_budget is not None,
            progress=progress,
            timings=timings,
            spine=spine_choice,
            executor=ex,
            record=read_record,
        )
        made: list[RandomSource] = []

        def source() -> RandomSource:
            if not made:
                made.append(
                    RandomSource.seeded(seed) if seed is not None else RandomSource.secure()
                )
            return made[0]

        nmf_rows = _measure_runs(
            hists,
            geo.estimation,
            budget,
            units_budget,
            source,
            staging.path,
            ex,
            progress,
            timings,
            checkpoint=ckpt,
            geo=geo,
        )
        manifest = _estimate_and_write(
            staging.path,
            inv,
            geo.tabulation,
            geo=geo,
            budget=budget,
            units_budget=units_budget,
            postprocess=postprocess,
            units=units,
            method=method,
            estimator=estimator,
            executor=ex,
            workers=workers,
            progress=progress,
            timings=timings,
            checkpoint=ckpt,
            max_children=max_children,
        )
        writers = nmf_rows.pop("_writers", set())
        manifest.update(nmf_rows)
        # who wrote the NMF's parts this time: the tasks' processes, not the driver
        manifest["executor"]["nmf_part_writers"] = len(writers)
        manifest["executor"].update(read_record)
        manifest["executor"]["nmf_parts_by_driver"] = (
            f"{socket.gethostname()}/{os.getpid()}" in writers
        )
        if ckpt.summary() is not None:
            manifest["resumed"] = ckpt.summary()
        timings["checkpoint"] = ckpt.seconds
        manifest.update(
            {
                "seed": seed,
                "randomness": source().describe() if seed is not None or made else _NO_NOISE,
                "input": str(Path(input_dir).resolve()),
                "input_sha256": input_sha256,
                "input_persons": n_persons,
                "command": command,
            }
        )
        commit_run(
            manifest,
            staging,
            timings,
            t_start,
            check=_self_check(postprocess, timings, progress, ex),
        )
    say(progress, f"wrote release to {out_dir} in {timings['total']:.1f}s")
    return manifest


_NO_NOISE = {
    "mode": "secure",
    "seed": None,
    "generator": "none used by this run: every noisy measurement was written before the "
    "interruption it resumed from",
}


def _copy_measurements(
    run_dir: Path, hierarchy_levels: GeoLevels, with_units: bool, staging: Staging
) -> tuple[Hierarchy, Invariants, dict[str, int]]:
    """Read the published invariants and copy the NMF(s) unchanged into the staging dir."""
    blocks_table = pq.read_table(run_dir / "invariants.parquet")
    hierarchy = Hierarchy.from_blocks(
        np.asarray(blocks_table.column("geocode").to_numpy(zero_copy_only=False)).astype("U16"),
        hierarchy_levels,
    )
    inv = Invariants.from_tables(
        blocks_table, pq.read_table(run_dir / "invariant_totals.parquet"), hierarchy
    )
    rows = {}
    for run in ("persons", "units") if with_units else ("persons",):
        name = NMF_FILES[run]
        if (run_dir / name).is_dir():  # part files (and their index), copied unchanged
            shutil.copytree(run_dir / name, staging.path / name)
        else:
            shutil.copyfile(run_dir / name, staging.path / name)
        rows[name.removesuffix(".parquet")] = sum(
            pq.read_metadata(f).num_rows for f in nmf_files(staging.path / name)
        )
    return hierarchy, inv, rows


def reestimate(
    run_dir: str | Path,
    out_dir: str | Path,
    *,
    budget: Budget | None = None,
    units_budget: Budget | None = None,
    postprocess: str = "topdown",
    units: str = "consistent",
    workers: int = 1,
    method: str = "auto",
    estimator: str | None = None,
    executor: str = "auto",
    spark_master: str | None = None,
    overwrite: bool = False,
    progress: Progress = None,
    command: list[str] | None = None,
    max_children: int | None = DEFAULT_MAX_CHILDREN,
) -> dict:
    """Re-estimate a release from another run's NMF and published invariants alone.

    The budget, geography and noise are those the measurements were made with: they
    are read from ``run_dir/manifest.json``, and the manifest of the new run states
    that same privacy loss (re-estimation is post-processing and spends nothing) and
    the same randomness: the measurements' seed, or secure, with ``measured_by``
    naming ``run_dir`` (:func:`censusdp.release.manifest.inherited_randomness`). A
    ``budget`` or ``units_budget`` given here must match what was spent.

    The NMF is read chunk by chunk (never whole) and copied unchanged into ``out_dir``.

    Raises:
        InputError: for a missing file or a manifest without a recorded budget.
        ConfigError: for a given budget that differs from the one spent.
    """
    run_dir = Path(run_dir)
    _check_units(units)
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    for name in (NMF_FILES["persons"], "invariants.parquet", "invariant_totals.parquet"):
        if not (run_dir / name).exists():
            raise InputError(f"{run_dir / name}: missing file (needed by --from-measurements)")
    geo_source = read_manifest(run_dir)
    spent, spent_units = recorded_budgets(geo_source, str(run_dir / MANIFEST_FILE))
    for given, have, what in ((budget, spent, "person"), (units_budget, spent_units, "unit")):
        if given is not None and (have is None or not given.same_allocation(have)):
            raise ConfigError(
                f"the {what} budget given differs from the one {run_dir} spent; a re-estimate "
                "uses the budget of its measurements (drop --preset/--config/--rho/--epsilon)"
            )
    require_valid(run_dir, what="re-estimation", mdf=False, progress=progress)
    has_units = spent_units is not None and (run_dir / NMF_FILES["units"]).exists()
    with _run_directory(out_dir, overwrite, executor, workers, spark_master, run_dir) as (
        staging,
        ex,
    ):
        t = time.perf_counter()
        hierarchy, inv, rows = _copy_measurements(run_dir, _geolevels(spent), has_units, staging)
        geo = geography_of_run(run_dir, geo_source, hierarchy)
        timings["read_measurements"] = time.perf_counter() - t
        manifest = _estimate_and_write(
            staging.path,
            inv,
            hierarchy,
            geo=geo,
            budget=spent,
            units_budget=spent_units if has_units else None,
            postprocess=postprocess,
            units=units,
            method=method,
            estimator=estimator,
            executor=ex,
            workers=workers,
            progress=progress,
            timings=timings,
            max_children=max_children,
        )
        manifest.update(rows)
        # the noise is the measurements': seeded or secure as they were, whatever this run
        randomness = inherited_randomness(geo_source, run_dir)
        manifest.update({"seed": randomness["seed"], "randomness": randomness, "command": command})
        commit_run(
            manifest,
            staging,
            timings,
            t_start,
            check=_self_check(postprocess, timings, progress, ex),
        )
    return manifest


def _check_units(units: str) -> None:
    if units not in UNITS_CHOICES:
        raise ConfigError(f"--units must be one of {UNITS_CHOICES}, got {units!r}")


@dataclass
class _Estimated:
    """The estimate of both runs, the person bounds it was held to, and (for a
    consistent unit run) the household persons per block it was held to."""

    persons: TopDownResult
    units: TopDownResult | None
    bounds: list[Bounds]
    household: np.ndarray | None = None


def _estimate(
    nmf_dir: Path,
    inv: Invariants,
    hierarchy: Hierarchy,
    schema: Schema,
    *,
    with_units: bool,
    **options: Any,
) -> _Estimated:
    """Estimate persons (and units) from the NMF in ``nmf_dir`` and the invariants only:
    :func:`_estimate_measurements` (which takes ``options``) on the run's NMF readers."""
    ms = NMFReader(nmf_dir / NMF_FILES["persons"], schema, hierarchy)
    ums = (
        NMFReader(nmf_dir / NMF_FILES["units"], get_schema("units"), hierarchy)
        if with_units
        else None
    )
    return _estimate_measurements(ms, ums, inv, hierarchy, **options)


def _estimate_measurements(
    ms: Measurements,
    ums: Measurements | None,
    inv: Invariants,
    hierarchy: Hierarchy,
    *,
    postprocess: str,
    units_mode: str,
    method: str,
    estimator: str | None = None,
    executor: Any,
    progress: Progress,
    timings: dict[str, float],
    manifest: dict[str, Any],
    checkpoint: Checkpoint | None = None,
    person_bounds: list[Bounds] | None = None,
    max_children: int | None = DEFAULT_MAX_CHILDREN,
) -> _Estimated:
    """Estimate persons (and units, when ``ums`` is given) from measurements and invariants
    (continuing after the levels ``checkpoint`` holds, recording each finished level).

    ``inv`` and ``hierarchy`` are those of the measurements (the spine's, blocks in spine
    order, for a spine release); ``person_bounds`` replaces the bounds
    :func:`censusdp.data.invariants.level_bounds` gives (the spine's state parts)."""

    def levels(run: str) -> Any:
        return checkpoint.levels(run) if checkpoint is not None else None

    t = time.perf_counter()
    schema = ms.schema
    bounds = _person_bounds(inv, hierarchy) if person_bounds is None else person_bounds
    if postprocess == "bottomup":
        # Bottom-up estimates blocks alone: totals above the block level are sums of
        # noisy blocks and cannot be held to the state invariant.
        bounds = [
            Bounds(
                b.group_lower,
                b.group_upper,
                np.zeros_like(b.total_lower),
                np.full_like(b.total_upper, np.inf),
            )
            for b in bounds
        ]
        manifest["invariants_not_enforced"] = ["state total population (bottom-up)"]
    common = dict(executor=executor, progress=progress)
    options = TopDownOptions(
        postprocess=postprocess,
        method=method,
        estimator=default_estimator(schema.name) if estimator is None else estimator,
        max_children=max_children,
    )
    persons = run_topdown(ms, hierarchy, bounds, options, checkpoint=levels("persons"), **common)
    timings["estimate_persons"] = time.perf_counter() - t
    manifest["estimation"] = {"persons": persons.levels}
    manifest["estimator"] = options.estimator
    manifest["failsafe"] = {"persons": persons.failsafe}
    units, household = None, None
    if ums is not None:
        t = time.perf_counter()
        ubounds, group = independent_unit_bounds(inv.housing_units, hierarchy), None
        if units_mode == "consistent":
            household = household_persons(persons.histograms[-1], schema)
            ubounds = consistent_unit_bounds(household, inv.housing_units, hierarchy)
            group = UNIT_GROUP_VARIABLE
        if estimator is None:
            options = replace(options, estimator=default_estimator(ums.schema.name))
        units = run_topdown(
            ums,
            hierarchy,
            ubounds,
            replace(options, group_variable=group),
            checkpoint=levels("units"),
            **common,
        )
        timings["estimate_units"] = time.perf_counter() - t
        manifest["estimation"]["units"] = units.levels
        manifest["failsafe"]["units"] = units.failsafe
        manifest["units_estimation"] = units_mode
    return _Estimated(persons, units, bounds, household)


def _release_histograms(
    est: _Estimated, inv: Invariants, schema: Schema, manifest: dict[str, Any]
) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """The released block histograms the tables are tabulated from: ``pl94`` and units."""
    block_hist = est.persons.histograms[-1]
    pl94_hist = (
        block_hist if schema.name == "pl94" else sp.csr_matrix(block_hist @ pl94_map(schema))
    )
    occupied = _occupied(est, inv, manifest)
    return pl94_hist, unit_histogram_from_counts(inv.housing_units, occupied, inv.gq_facilities)


def estimate_tables(
    persons: Measurements,
    units: Measurements | None,
    inv: Invariants,
    hierarchy: Hierarchy,
    *,
    postprocess: str = "topdown",
    units_mode: str = "consistent",
    method: str = "auto",
    estimator: str | None = None,
    max_children: int | None = DEFAULT_MAX_CHILDREN,
    executor: Any = None,
    geo: ReleaseGeography | None = None,
) -> dict[str, list[np.ndarray]]:
    """The published tables a release would hold, estimated from these measurements.

    The same estimation as :func:`run_release` and :func:`reestimate` (person run, then
    the housing-unit run held to it), without writing anything: for re-running the
    post-processing on simulated measurements (``censusdp evaluate`` without truth).
    ``inv`` and ``hierarchy`` are the tabulation's; with a spine ``geo`` the
    measurements are of the spine's geounits and are estimated there (as the release
    was), then tabulated by geocode.

    Returns:
        Per table (P1-P5, H1), per level, the ``(units x lines)`` integer arrays
        (:func:`censusdp.tables.table_arrays` layout).
    """
    if postprocess not in ("topdown", "bottomup"):
        raise ConfigError(f"postprocess must be 'topdown' or 'bottomup', got {postprocess!r}")
    _check_units(units_mode)
    manifest: dict[str, Any] = {}
    geo = ReleaseGeography(hierarchy) if geo is None else geo
    est = _estimate_measurements(
        persons,
        units,
        geo.invariants(inv),
        geo.estimation,
        postprocess=postprocess,
        units_mode=units_mode,
        method=method,
        estimator=estimator,
        executor=executor,
        progress=None,
        timings={},
        manifest=manifest,
        max_children=max_children,
        person_bounds=None if geo.spine is None else geo.person_bounds(inv),
    )
    if geo.spine is not None:
        est = _on_tabulation(est, geo, inv, persons.schema, manifest)
    pl94_hist, units_hist = _release_histograms(est, inv, persons.schema, manifest)
    return table_arrays(pl94_hist, units_hist, hierarchy)


def _occupied(est: _Estimated, inv: Invariants, manifest: dict[str, Any]) -> np.ndarray:
    """Released occupied housing units per block (zero when the unit run was skipped)."""
    if est.units is not None:
        return np.asarray(est.units.histograms[-1][:, 1].todense()).ravel().astype(np.int64)
    manifest["occupancy"] = "not released (no housing-unit budget): all units marked vacant"
    return np.zeros(inv.blocks.size, dtype=np.int64)


def _write_outputs(
    out: Path,
    est: _Estimated,
    inv: Invariants,
    hierarchy: Hierarchy,
    schema: Schema,
    *,
    executor: Any,
    progress: Progress,
    timings: dict[str, float],
    manifest: dict[str, Any],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Write the MDF (persons and units) and the tables as part files by tasks on
    ``executor``; return the MDF tasks' results (records, checks, costs) and the tables'
    part-0 task's.

    Each task (:func:`censusdp.release.parts.run_mdf_part_task`) gets one run of blocks'
    released histogram rows and unit counts, writes that part of the four MDF files,
    reads it back and checks it; only its records come back here, and the driver writes
    each directory's ``_parts.json``.
    """
    t, c = time.perf_counter(), time.process_time()
    block_hist = est.persons.histograms[-1]
    occupied = _occupied(est, inv, manifest)
    pl94_hist, units_hist = _release_histograms(est, inv, schema, manifest)
    # part 0 of the tables: every level above the block, one small task
    pl94_levels, unit_levels = hierarchy.aggregate(pl94_hist), hierarchy.aggregate(units_hist)
    upper = list(zip(hierarchy.geolevels.levels[:-1], hierarchy.geocodes[:-1], strict=True))
    tables_job = TablesTask(
        [(lv.name, lv.length, codes) for lv, codes in upper],
        _stacked(pl94_levels[:-1], pl94_hist.shape[1]),
        _stacked(unit_levels[:-1], units_hist.shape[1]),
        str(out.resolve()),
    )
    bar = task(progress, "writing the MDF", int(block_hist.sum()), unit="persons", summary=False)
    (top,) = list(executor.map(run_tables_task, [tables_job]))
    block = hierarchy.geolevels.levels[-1]
    parts: list[dict[str, Any]] = []
    jobs = mdf_part_tasks(
        block_hist,
        hierarchy.blocks,
        schema.name,
        inv.housing_units,
        occupied,
        inv.gq_facilities,
        out.resolve(),
        geolevel=(block.name, block.length),
    )
    with bar:
        for res in executor.map(run_mdf_part_task, jobs):
            parts.append(res)
            bar.advance(res["persons"])
    write_mdf_index(out, parts)
    write_table_index(out / "tables", [top["tables"]] + [p["tables"] for p in parts])
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
        f"wrote {manifest['persons_released']:,} MDF persons in {len(parts)} parts and the tables",
    )
    return parts, top


def _stacked(levels: list[sp.csr_matrix], n_cells: int) -> sp.csr_matrix:
    """Levels' histograms stacked (top first); none: an empty matrix."""
    if not levels:
        return sp.csr_matrix((0, n_cells), dtype=np.int64)
    return sp.csr_matrix(sp.vstack(levels, format="csr"), dtype=np.int64)


def _validate_outputs(
    out: Path,
    est: _Estimated,
    inv: Invariants,
    hierarchy: Hierarchy,
    schema: Schema,
    written: tuple[list[dict[str, Any]], dict[str, Any]],
    *,
    timings: dict[str, float],
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
        unit_hists=est.units.histograms if est.units is not None else None,
        housing_units=inv.housing_units if est.units is not None else None,
        household_persons=est.household,
        failsafe_uses=len(est.persons.failsafe),
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
        or f"{len(parts)} parts read back by their tasks equal the estimate",
    )
    timings["validate"] = time.perf_counter() - t
    timings["validate_cpu"] = time.process_time() - c
    manifest["validation"] = report.to_dict()
    if not report.ok and not est.persons.failsafe:
        raise InternalError("release failed validation: " + "; ".join(report.failures()))


def _on_tabulation(
    est: _Estimated,
    geo: ReleaseGeography,
    inv: Invariants,
    schema: Schema,
    manifest: dict[str, Any],
) -> _Estimated:
    """A spine estimate checked on the spine, then seen on the tabulation geography.

    The spine's own checks (every spine geounit the sum of its blocks, every bound on
    the spine) go to the manifest as ``spine_validation``; the MDF, the tables and the
    release's validation then use the same blocks in geocode order, aggregated by
    tabulation geocode.
    """
    report = validate_release(
        est.persons.histograms,
        geo.estimation,
        schema,
        est.bounds,
        unit_hists=est.units.histograms if est.units is not None else None,
        housing_units=geo.invariants(inv).housing_units if est.units is not None else None,
        household_persons=est.household,
        failsafe_uses=len(est.persons.failsafe),
    )
    manifest["spine_validation"] = report.to_dict()
    if not report.ok and not est.persons.failsafe:
        raise InternalError("the spine estimate fails validation: " + "; ".join(report.failures()))

    def view(e: TopDownResult | None) -> TopDownResult | None:
        if e is None:
            return None
        return TopDownResult(geo.tabulation_histograms(e.histograms), e.levels, e.failsafe)

    persons = view(est.persons)
    assert persons is not None
    return _Estimated(
        persons,
        view(est.units),
        _person_bounds(inv, geo.tabulation),
        None if est.household is None else geo.to_tabulation(est.household),
    )


def _estimate_and_write(
    out: Path,
    inv: Invariants,
    hierarchy: Hierarchy,
    *,
    budget: Budget,
    units_budget: Budget | None,
    postprocess: str,
    units: str,
    method: str,
    estimator: str,
    executor: Any,
    workers: int,
    progress: Progress,
    timings: dict[str, float],
    checkpoint: Checkpoint | None = None,
    geo: ReleaseGeography | None = None,
    max_children: int | None = DEFAULT_MAX_CHILDREN,
) -> dict[str, Any]:
    """Everything after measurement: invariants, estimate, write, validate (NMF in ``out``;
    estimated levels checkpointed in ``checkpoint``, which is removed once all is written).

    ``hierarchy`` is the tabulation hierarchy; ``geo`` the geography the NMF was
    measured on (``None``: the tabulation hierarchy)."""
    geo = ReleaseGeography(hierarchy) if geo is None else geo
    schema = get_schema(budget.schema)
    manifest = new_manifest(
        schema=schema.name,
        postprocess=postprocess,
        hierarchy=hierarchy,
        executor=executor,
        workers=workers,
        budget=budget,
        units_budget=units_budget,
    )
    t = time.perf_counter()
    write_parquet(inv.to_table(), out / "invariants.parquet")
    write_parquet(inv.state_table(hierarchy), out / "invariant_totals.parquet")
    geo.write(out)
    manifest["spine"] = geo.record(budget)
    timings["write_invariants"] = time.perf_counter() - t
    manifest["max_children"] = max_children
    if postprocess != "none":
        steps = dict(timings=timings, manifest=manifest)
        est = _estimate(
            out,
            geo.invariants(inv),
            geo.estimation,
            schema,
            with_units=units_budget is not None,
            postprocess=postprocess,
            units_mode=units,
            method=method,
            estimator=estimator,
            executor=executor,
            progress=progress,
            checkpoint=checkpoint,
            person_bounds=None if geo.spine is None else geo.person_bounds(inv),
            max_children=max_children,
            **steps,
        )
        if geo.spine is not None:
            est = _on_tabulation(est, geo, inv, schema, manifest)
        written = _write_outputs(
            out, est, inv, hierarchy, schema, executor=executor, progress=progress, **steps
        )
        _validate_outputs(out, est, inv, hierarchy, schema, written, **steps)
    if checkpoint is not None:
        checkpoint.discard()
    manifest["outputs"] = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) + [
        "manifest.json"
    ]
    return manifest
