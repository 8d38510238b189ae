"""Measuring a release's runs: each run's block histograms answered with noise, level by
level, chunk by chunk, by executor tasks that each write their own part of the NMF.

The only step after reading that sees confidential histograms (it is given them; it
does not read the input). What comes back to the driver is each part's record (rows,
checksum, costs), which the checkpoint logs as it arrives so that an interrupted run
resumes without drawing noise again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.schema import Schema, get_schema
from censusdp.data.spine import UnitShares
from censusdp.io.layout import NMF_FILES
from censusdp.io.nmf_files import part_name, write_part_index
from censusdp.privacy.budget import Budget
from censusdp.privacy.randomness import RandomSource
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.progress import task
from censusdp.release.checkpoint import Checkpoint
from censusdp.release.measure import measure_tasks, plan_by_histogram
from censusdp.release.options import Runtime
from censusdp.release.parts import PartTask, run_part_task
from censusdp.release.spine import ReleaseGeography

__all__ = ["measure_runs"]


def _plan(budget: Budget) -> list[tuple[str, str, Any]]:
    return [(m.geolevel, m.query, m.mechanism) for m in budget.measurements()]


@dataclass(frozen=True, eq=False)
class _RunToMeasure:
    """One run's measuring job: its exact block histogram (on the estimation
    hierarchy), schema and plan, the per-geounit budgets of a spine release (bypass;
    ``None`` otherwise), its NMF directory, and whether structural-zero rows are
    measured (fidelity ``production``)."""

    histogram: sp.csr_matrix
    schema: Schema
    plan: list[tuple[str, str, Any]]
    unit_shares: UnitShares | None
    directory: Path
    structural_zeros: bool = False
    first_part: int = 0
    """The index of its first part file (a run's second histogram numbers its parts after
    the first's)."""


def _measure_to_parts(
    job: _RunToMeasure,
    hierarchy: Hierarchy,
    source: Callable[[], RandomSource],
    rt: Runtime,
    *,
    done: dict[str, dict[str, Any]] | None = None,
    record: Callable[[dict[str, Any]], None] | None = None,
) -> tuple[int, dict[str, int], list[dict[str, Any]], int]:
    """Measure level by level, chunk by chunk; each task writes its own part of the NMF
    directory ``job.directory`` (:mod:`censusdp.release.parts`).

    The only function that sees confidential histograms (it is given them, it does not
    read the input). The driver receives each part's record (rows, checksum, costs),
    hands it to ``record`` (the checkpoint's part log) and keeps it for the index.
    Parts in ``done`` (``{path relative to the run: record}``, from an interrupted run)
    are neither measured nor written again; ``source`` is called only if a part is
    missing (a resumed secure run whose parts are all written makes no key).
    Returns the rows written in total and by level (``done`` included), every part's
    record (each names the ``schema`` of the histogram it measured) and the index after
    its last part; adds the tasks' measuring and writing CPU seconds (``measure_task_cpu``,
    ``write_parts_task_cpu``) and the driver's recording seconds
    (``write_measurements``) to ``timings``.
    """
    done = {
        k: r for k, r in (done or {}).items() if r.get("schema", job.schema.name) == job.schema.name
    }
    schema, directory, progress, timings = job.schema, job.directory, rt.progress, rt.timings
    levels = hierarchy.aggregate(job.histogram)
    directory.mkdir(exist_ok=True)
    prefix = directory.name
    planned = {geolevel for geolevel, _, _ in job.plan}
    names = [lv.name for lv in hierarchy.geolevels.levels]
    total = sum(hierarchy.n_units(i) for i, name in enumerate(names) if name in planned)
    parts = list(done.values())
    seen: dict[str, int] = {}
    for rec in parts:
        seen[rec["geolevel"]] = seen.get(rec["geolevel"], 0) + int(rec["rows"])
    label = _LABELS.get(schema.name, "persons")
    bar = task(
        progress, f"measuring {label} ({schema.name})", total, unit="geounits", summary=False
    )
    bar.advance(sum(int(r["stop"]) - int(r["start"]) for r in parts))

    counted = [job.first_part]

    def jobs() -> Iterator[PartTask]:
        made: RandomSource | None = None
        tasks = measure_tasks(
            levels,
            hierarchy,
            schema,
            job.plan,
            _LazySource(),
            unit_shares=job.unit_shares,
            structural_zeros=job.structural_zeros,
        )
        for i, mt in enumerate(tasks, start=job.first_part):
            counted[0] = i + 1
            name = part_name(i)
            if f"{prefix}/{name}" in done:
                continue
            made = made if made is not None else source()
            yield PartTask(replace(mt, source=made), str(directory / name))

    with bar:
        for rec in rt.executor.map(run_part_task, jobs()):
            t = time.perf_counter()
            rec["path"] = f"{prefix}/{rec['file']}"
            rec["schema"] = schema.name
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
                progress(_measured_line(label, rec["geolevel"], rec["stop"], seen[rec["geolevel"]]))
    rows = sum(int(r["rows"]) for r in parts)
    by_level = {name: seen[name] for name in names if name in seen}
    return rows, by_level, parts, counted[0]


def _measured_line(label: str, geolevel: str, geounits: int, values: int) -> str:
    """One measured level in words (a level with no noisy value says why)."""
    where = f"{label + ':':<15}{geolevel:<10} {geounits:>8,} geounit{'s' if geounits != 1 else ''}"
    if values:
        return f"measured {where}, {values:>13,} noisy values"
    return (
        f"measured {where}, no noisy values (each is the only child of its parent, which "
        "is measured with its budget instead)"
    )


_LABELS = {
    "units": "housing units",
    "household2010": "households",
    "dhch-2020": "households",
    "dhc-units-2020": "units",
}


def histogram_key(run: str, schema: str, main: str) -> str:
    """The key in ``hists`` of run ``run``'s histogram on ``schema``: ``run`` for its main
    histogram (schema ``main``), ``run+schema`` for a unit histogram measured beside it."""
    return run if schema == main else f"{run}+{schema}"


class _LazySource:
    """A placeholder source while the plan's tasks are cut (the real one is made only
    for a task that is measured)."""


def _measure_run(
    run: str,
    hists: dict[str, sp.csr_matrix],
    what: tuple[Schema, dict[str, list], UnitShares | None, Path, Hierarchy],
    source: Callable[[], RandomSource],
    rt: Runtime,
    *,
    structural_zeros: bool,
    checkpoint: Checkpoint | None,
) -> tuple[int, dict[str, int], list[dict[str, Any]], list[dict[str, Any]]]:
    """Measure one run into its NMF directory: its main histogram, then any unit
    histogram measured beside it (``hists`` by schema name; ``what`` the run's schema,
    its plan by histogram, its per-geounit shares and its directory), the second's parts
    numbered after the first's. Returns the rows in total and by level, every part's
    record, and the records of the parts this call's tasks wrote (not an interrupted
    run's)."""
    schema, plans, shares, directory, hierarchy = what
    rows, by_level, parts, first = 0, {}, [], 0
    # the parts an interrupted run finished, read before this run adds its own
    done = checkpoint.parts(run) if checkpoint is not None else None
    for name, plan in plans.items():
        key = histogram_key(run, name, schema.name)
        job = _RunToMeasure(
            hists[name], get_schema(name), plan, shares, directory, structural_zeros, first
        )
        n, levels, p, first = _measure_to_parts(
            job,
            hierarchy,
            # the main histogram's noise is the run's stream, as before; a histogram
            # beside it draws from its own
            lambda key=key: source().child(key),
            rt,
            done=done,
            record=(lambda rec: checkpoint.finish_part(run, rec))
            if checkpoint is not None
            else None,
        )
        rows += n
        parts += p
        for lv, k in levels.items():
            by_level[lv] = by_level.get(lv, 0) + k
    fresh = [p for p in parts if done is None or p["path"] not in done]
    return rows, by_level, parts, fresh


def measure_runs(
    hists: dict[str, sp.csr_matrix],
    geo: ReleaseGeography,
    budget: ReleaseBudget,
    source: Callable[[], RandomSource],
    out: Path,
    rt: Runtime,
    checkpoint: Checkpoint | None = None,
    *,
    structural_zeros: bool = False,
) -> dict[str, Any]:
    """Measure each run into its NMF in ``out``, dropping each histogram once measured.

    ``structural_zeros``: measure the rows of structural-zero cells too, as production
    (:attr:`censusdp.release.options.ReleaseOptions.nmf_structural_zeros`).

    ``hists`` are each on its run's estimation hierarchy
    (:meth:`ReleaseGeography.for_run`: the unit run has its own spine); with a spine,
    each geounit spends its own share of its run's budget
    (:meth:`ReleaseGeography.unit_shares`: single children bypassed).

    A run whose NMF ``checkpoint`` holds from before an interruption is not measured
    again (no new noise is drawn for it); each newly finished NMF is recorded there.
    ``source`` is called only when a run is measured: a resumed secure run whose
    measurements are all written makes no key at all.
    The parts this call's tasks wrote (not an interrupted run's) go to ``rt.written``
    with the SHA-256 each task recorded, for estimation to read
    (:attr:`~censusdp.release.options.Runtime.written`).
    Returns the manifest's record of the rows written.
    """
    t = time.perf_counter()
    runs = {"persons": (budget.persons, get_schema(budget.persons.schema))}
    if budget.units is not None:
        runs["units"] = (budget.units, get_schema(budget.units.schema))
    record: dict[str, Any] = {"noisy_values_by_level": {}}
    for run, (b, schema) in runs.items():
        done = checkpoint.measured(run) if checkpoint is not None else None
        plans = plan_by_histogram(schema, _plan(b))
        if done is not None:
            for k in plans:
                hists.pop(histogram_key(run, k, schema.name))
            record[NMF_FILES[run].removesuffix(".parquet")] = done["rows"]
            record["noisy_values_by_level"][run] = done["by_level"]
            continue
        n_rows, by_level, parts, fresh = _measure_run(
            run,
            {k: hists.pop(histogram_key(run, k, schema.name)) for k in plans},
            (
                schema,
                plans,
                geo.for_run(run).unit_shares(b),
                out / NMF_FILES[run],
                geo.for_run(run).estimation,
            ),
            source,
            rt,
            structural_zeros=structural_zeros,
            checkpoint=checkpoint,
        )
        record.setdefault("_writers", set()).update(p["writer"] for p in parts if "writer" in p)
        # the parts this call's tasks wrote (not an interrupted run's): the SHA-256 each
        # task recorded, held here in memory, which lets estimation skip their layout check
        rt.written[run] = {str(out / p["path"]): str(p["sha256"]) for p in fresh}
        index = write_part_index(out / NMF_FILES[run], parts)
        record[NMF_FILES[run].removesuffix(".parquet")] = n_rows
        record["noisy_values_by_level"][run] = by_level
        if checkpoint is not None:
            checkpoint.finish_measurement(run, str(index.relative_to(out)), n_rows, by_level)
    rt.timings["measure"] = time.perf_counter() - t
    return record
