"""The release pipeline: read -> aggregate -> measure -> estimate -> write -> validate.

:func:`run_release` is what ``censusdp run`` calls, :func:`reestimate` what ``censusdp
run --from-measurements`` calls. Data flows one way (docs/ARCHITECTURE.md): the
confidential input is read and validated, aggregated (:mod:`censusdp.release.intake`)
and measured (:mod:`censusdp.release.measure_runs`); from then on only the noisy
measurements and the public :class:`~censusdp.data.invariants.Invariants` are passed on
(:mod:`censusdp.release.writing`, :mod:`censusdp.release.estimation`), so a re-estimate
rebuilds a release from a run directory's noisy measurement file alone, by the same code.

Two runs compose, as in 2020 production: the person run (the preset's schema) and the
housing-unit run (schema ``units``: occupied vs vacant housing units, total housing
units invariant at every block), each with its own budget; the manifest reports both
and their total.

Every output is written into a staging directory next to ``out_dir`` and renamed into
place only when the whole release has been written and validated, so a failed run
leaves nothing half-written.

Memory is bounded by a chunk of families, not by the input: measurement runs as
executor tasks, each writing its own part file of the NMF (the driver receives only
each part's checksum and counts, and records it in the checkpoint as it arrives);
estimation reads the NMF back chunk by chunk (:class:`censusdp.io.nmf_read.NMFReader`), so
no level's measurements are ever all in memory; the MDF is written block chunk by block
chunk and validated by re-reading it in batches. What stays in memory is sparse: the
block histograms of the input and of the estimate and the per-level bounds (about 1 GB
for California's 710k blocks).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from censusdp.data.geography import Hierarchy
from censusdp.data.invariants import Invariants
from censusdp.data.schema_dhc import DHC_SCHEMA_NAMES, DHCH_2020, DHCP_2020
from censusdp.errors import (
    CensusDPError,
    ConfigError,
    InternalError,
    OutputError,
    ResumeError,
)
from censusdp.execution import make_executor
from censusdp.io.atomic import link_or_copy
from censusdp.io.cef_files import hash_input, sampled_fraction
from censusdp.io.cef_stream import check_dhch_input
from censusdp.io.layout import HELD_PL94_FILE, INVARIANTS_FILE
from censusdp.io.nmf_files import nmf_files
from censusdp.io.rundir import RunDir
from censusdp.io.staging import Staging
from censusdp.privacy.randomness import RandomSource
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.progress import say
from censusdp.release.checkpoint import Checkpoint, run_fingerprint
from censusdp.release.h1_source import check_h1_release, read_h1_source
from censusdp.release.household_consistency import check_run_schemas, is_household_run
from censusdp.release.intake import read_and_aggregate
from censusdp.release.manifest import commit_run, inherited_randomness, recorded_budgets
from censusdp.release.measure_runs import measure_runs
from censusdp.release.options import Execution, ReleaseOptions, Runtime
from censusdp.release.spine import (
    ReleaseGeography,
    geography_of_run,
    requested_spine,
    tabulation_levels,
)
from censusdp.release.validate import require_valid, validate_run
from censusdp.release.validate.measured import MeasurementsCheck
from censusdp.release.validate.run import CHECKED_IN_SOURCE
from censusdp.release.writing import write_release

__all__ = ["reestimate", "run_release"]


@dataclass
class _Session:
    """A run in progress: its staging directory, its runtime (live executor, progress,
    timings) and when it started."""

    staging: Staging
    rt: Runtime
    started: float
    checked_nmf: dict[str, tuple[str, str]] = field(default_factory=dict)
    """The NMF verdicts of the measured run a re-estimate copied its NMF from."""
    measured_check: MeasurementsCheck | None = None
    """This run's NMFs checked beside its estimation, joined by the self-check."""
    part_digests: dict[str, str] = field(default_factory=dict)
    """The SHA-256 of part files already read in this run (a re-estimate's NMF parts that
    are hard links to the source's it checked), by path in the run."""

    def commit(self, manifest: dict[str, Any]) -> None:
        """Close the manifest, check the staged release as ``censusdp validate`` would
        (the NMF's parts by tasks on the executor) and move it into place."""
        commit_run(manifest, self.staging, self.rt.timings, self.started, check=self._check)

    def _check(self, staged: Path) -> None:
        timings = self.rt.timings
        t, c = time.perf_counter(), time.process_time()
        checked, digests = dict(self.checked_nmf), dict(self.part_digests)
        if self.measured_check is not None:
            early = self.measured_check.result()
            checked.update(early.proofs)
            digests.update(early.digests)
            timings["check_measurements"] = early.seconds
            timings["check_measurements_task_cpu"] = early.task_cpu_seconds
        report = validate_run(
            staged,
            progress=self.rt.progress,
            executor=self.rt.executor,
            checked_nmf=checked,
            part_digests=digests,
        )
        timings["validate_files"] = time.perf_counter() - t
        timings["validate_files_cpu"] = time.process_time() - c
        timings["validate_files_task_cpu"] = report.task_cpu_seconds
        if not report.ok:
            raise InternalError(
                "the written release fails validation: " + "; ".join(report.failures())
            )


@contextlib.contextmanager
def _session(
    out_dir: str | Path,
    sources: list[str | Path],
    execution: Execution,
    *,
    overwrite: bool,
    resume: bool = False,
) -> Iterator[_Session]:
    """The staging directory of a run and its executor; the staging is removed on failure
    (the body commits it on success; a refused resume or an interrupt keeps the
    checkpointed work) and the executor is always closed. The output may not overlap
    ``sources`` (the input directory or the measured run, and a release read beside it:
    ``--h1-from``'s)."""
    started = time.perf_counter()
    staging = Staging(Path(out_dir), overwrite, inputs=sources, resume=resume)
    ex = None
    try:
        ex = make_executor(
            execution.workers, kind=execution.executor, spark_master=execution.spark_master
        )
        yield _Session(staging, Runtime(ex, execution.workers, execution.progress), started)
    except BaseException as exc:
        staging.abort(keep_resumable=_keeps_finished_steps(exc))
        if staging.path.is_dir():
            kept = (
                f"its finished steps are kept in {staging.path.name}; rerun the same "
                "command with --resume to continue"
            )
            if isinstance(exc, KeyboardInterrupt):
                exc.args = (kept,)
            elif not isinstance(exc, ResumeError):
                exc.add_note(kept + " (or with --overwrite to discard them)")
        raise
    finally:
        close = getattr(ex, "close", None)
        if close is not None:
            close()


def _keeps_finished_steps(exc: BaseException) -> bool:
    """Whether a run stopped by ``exc`` keeps its checkpointed steps for ``--resume``.

    An interrupt (SIGINT, or SIGTERM as the CLI raises it) and a refused resume keep
    them, and so does a failure that is not the input's or the options' (an internal
    error, a full disk (:class:`~censusdp.errors.OutputError`), a lost worker): the
    measurements of a state can take an hour, and a fixed bug or freed disk should not
    cost them again. Any other :class:`~censusdp.errors.CensusDPError` is the input's or
    the options', which a resume of the same command would meet again: its work is
    removed.
    """
    if isinstance(exc, ResumeError | OutputError | KeyboardInterrupt):
        return True
    return isinstance(exc, Exception) and not isinstance(exc, CensusDPError)


def run_release(
    input_dir: str | Path,
    out_dir: str | Path,
    budget: ReleaseBudget,
    options: ReleaseOptions | None = None,
    execution: Execution | None = None,
    *,
    overwrite: bool = False,
    resume: bool = False,
    command: list[str] | None = None,
) -> dict:
    """Produce a release from a CEF directory; returns the manifest.

    Args:
        input_dir: directory with ``persons.parquet`` and ``units.parquet``.
        out_dir: the run directory to create (see docs/file-formats.md for its files).
        budget: the person run's budget and the unit run's (schema ``units``, or
            ``household2010`` for a household run: households estimated first, then
            persons held to them, :mod:`censusdp.release.household_consistency`), or no
            unit run (``budget.units`` ``None``: then ``mdf_units`` and H1 carry
            housing units with the occupancy left unreleased, all marked vacant, and the
            manifest says so).
        options: what the release depends on beside input and budget (seed, estimator,
            spine, ...; :class:`~censusdp.release.options.ReleaseOptions`). A spine of
            ``None`` is the budget's choice (``spine = "optimized"`` falls back to the
            tabulation hierarchy with a note when the input has no block attributes).
        execution: where the tasks run and where progress goes; the release does not
            depend on it.
        overwrite: replace an existing non-empty ``out_dir`` that censusdp wrote (and
            discard the resumable work of an interrupted run of it, unless ``resume``).
        resume: continue an interrupted run of ``out_dir`` from its finished steps
            (:mod:`censusdp.release.checkpoint`): measurements already written are
            reused, never drawn again. Refused (:class:`~censusdp.errors.ResumeError`)
            unless the input files, budgets, randomness and options are the same; with
            nothing to continue, the run starts afresh.
        command: the command line, recorded in the manifest.

    Every run checkpoints its finished steps, so any run can be resumed.
    """
    options = options or ReleaseOptions()
    execution = execution or Execution()
    dhch = _check_runs(budget, options, input_dir)
    spine_choice = (requested_spine(options.spine, budget.persons), options.spine is not None)
    if spine_choice[0] == "tabulation" and "Prim" in budget.persons.geolevel_names:
        raise ConfigError(
            f"budget {budget.persons.name!r} has the prim spine's geolevels "
            f"{list(budget.persons.geolevel_names)}, which are not geocode prefixes: it runs "
            "on --spine optimized only"
        )
    # every input file hashed, and stamped: the reader checks it reads those very bytes
    cef_input = hash_input(input_dir)
    if options.h1_from is not None:  # a usage mistake in its manifest, before the input is read
        check_h1_release(options.h1_from, cef_input.sha256)
    fingerprint = run_fingerprint(cef_input.sha256, budget, options, spine_choice[0])
    sources = [input_dir] if options.h1_from is None else [input_dir, options.h1_from]
    with _session(out_dir, sources, execution, overwrite=overwrite, resume=resume) as run:
        rt = run.rt
        ckpt = Checkpoint.open(run.staging, fingerprint, rt.progress)
        read_record: dict[str, Any] = {}
        geo, inv, hists, n_persons = read_and_aggregate(
            cef_input,
            budget.persons,
            rt,
            with_units=budget.units is not None,
            spine=spine_choice,
            record=read_record,
            households="dhch" if dhch else is_household_run(budget.units),
        )
        inv, h1 = _held_to_h1(
            options.h1_from,
            geo.tabulation,
            inv,
            cef_input.sha256,
            rt,
            persons=budget.persons.schema == DHCP_2020.name,
            households=dhch,
        )
        if is_household_run(budget.units) and geo.unit_spine is not None:
            raise ConfigError(
                "a household run is estimated on the persons' hierarchy; on this spine the "
                "unit run would have its own (use --spine tabulation)"
            )
        made: list[RandomSource] = []

        def source() -> RandomSource:
            if not made:
                seed = options.seed
                made.append(
                    RandomSource.seeded(seed) if seed is not None else RandomSource.secure()
                )
            return made[0]

        nmf_rows = measure_runs(
            hists,
            geo,
            budget,
            source,
            run.staging.path,
            rt,
            ckpt,
            structural_zeros=options.nmf_structural_zeros,
        )
        run.measured_check = _check_beside(run, budget, geo)
        manifest = write_release(run.staging.path, inv, geo, budget, options, rt, ckpt)
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
        rt.timings["checkpoint"] = ckpt.seconds
        manifest.update(
            {
                "seed": options.seed,
                "randomness": source().describe()
                if options.seed is not None or made
                else _NO_NOISE,
                "input": str(Path(input_dir).resolve()),
                "input_sha256": cef_input.sha256,
                "input_persons": n_persons,
                "command": command,
            }
        )
        if h1 is not None:
            manifest["h1_source"] = h1
        scale = sampled_fraction(input_dir)
        if scale is not None:  # a random sample of a state's tracts: the release says so
            manifest["input_scale"] = scale
        run.commit(manifest)
    say(execution.progress, f"wrote release to {out_dir} in {rt.timings['total']:.1f}s")
    return manifest


def _check_beside(
    run: _Session, budget: ReleaseBudget, geo: ReleaseGeography
) -> MeasurementsCheck | None:
    """The run's NMFs, final once measured, checked beside its estimation on the cores it
    leaves idle (:class:`MeasurementsCheck`), where the executor takes maps from two
    threads at once (a pool of processes); ``None`` elsewhere (the self-check does it)."""
    if not getattr(run.rt.executor, "thread_safe", False):
        return None
    return MeasurementsCheck(
        run.staging.path,
        {"persons": budget.persons, "units": budget.units},
        geo,
        run.rt.executor,
        run.rt.progress,
    ).start()


def _check_runs(budget: ReleaseBudget, options: ReleaseOptions, input_dir: str | Path) -> bool:
    """Refuse, in one line, runs the budget and options cannot make: a DHC budget given
    as the other run's, a DHC household run on an input without its columns, a run
    schema a household run does not pair with, ``--h1-from`` without a DHC run to hold
    (the household run, or a ``dhcp-2020`` person run alone: production's person run,
    which its ``pl94`` held). Returns whether the unit run is the DHC's household run."""
    for i, run in enumerate(budget.runs):
        fits = DHCP_2020.name if i == 0 else DHCH_2020.name
        if run.schema in DHC_SCHEMA_NAMES and run.schema != fits:
            raise ConfigError(
                f"budget {run.name!r} is on the 2020 DHC's schema {run.schema!r}, which is "
                f"the {'person' if fits == DHCH_2020.name else 'unit'} run's; give it as that "
                "run (docs/dhc-2020.md)"
            )
    dhch = budget.units is not None and budget.units.schema == DHCH_2020.name
    if dhch:
        check_dhch_input(input_dir)  # an input without its columns: one line naming one
    check_run_schemas(budget)
    persons_alone = budget.units is None and budget.persons.schema == DHCP_2020.name
    if options.h1_from is not None and not (dhch or persons_alone):
        raise ConfigError(
            f"--h1-from {options.h1_from} holds the 2020 DHC's runs to a P.L. 94 release; "
            f"budget {budget.persons.name!r} has neither its household run nor its person run "
            "alone (use --preset dhc-2020, with its units run or --units-preset none)"
        )
    return dhch


def _held_to_h1(
    h1_from: str | None,
    hierarchy: Hierarchy,
    inv: Invariants,
    input_sha256: dict[str, str],
    rt: Runtime,
    *,
    persons: bool,
    households: bool,
) -> tuple[Invariants, dict[str, Any] | None]:
    """The invariants with what the P.L. 94 release ``h1_from`` holds a DHC run to, and
    the manifest's ``h1_source``; without one, ``inv`` and ``None``.

    With ``households`` (a DHC household run) its occupied units hold the household run
    (production's ``h1``); with ``persons`` (a ``dhcp-2020`` person run) its persons in
    the ``pl94`` cells hold every geounit of the person run (production's ``pl94``), as
    production took both from its P.L. 94 release. A person run alone is production's
    person run (``person_US.ini``), a DAS run of its own."""
    if h1_from is None:
        return inv, None
    h1 = read_h1_source(h1_from, hierarchy, inv, input_sha256, persons=persons)
    record = h1.record(inv.housing_units, households=households)
    held = []
    if households:
        held.append(
            f"the households to its H1, {record['occupied']:,} occupied and "
            f"{record['vacant']:,} vacant units"
        )
    if h1.persons is not None:
        held.append(
            f"the persons to its {record['persons']:,} persons by HHGQ x voting age x "
            "Hispanic x CENRACE at every geounit"
        )
    say(
        rt.progress,
        f"holding {' and '.join(held)}: the P.L. 94 release {record['release']} (manifest "
        f"SHA-256 {record['manifest_sha256'][:16]}...), whose privacy loss was spent by it",
    )
    occupied = h1.occupied if households else None
    return replace(inv, h1_occupied=occupied, pl94_persons=h1.persons), record


_NO_NOISE = {
    "mode": "secure",
    "seed": None,
    "generator": "none used by this run: every noisy measurement was written before the "
    "interruption it resumed from",
}


def reestimate(
    run_dir: str | Path,
    out_dir: str | Path,
    options: ReleaseOptions | None = None,
    execution: Execution | None = None,
    *,
    budget: ReleaseBudget | None = None,
    overwrite: bool = False,
    command: list[str] | None = None,
) -> dict:
    """Re-estimate a release from another run's NMF and published invariants alone.

    The budget, geography and noise are those the measurements were made with: they
    are read from ``run_dir/manifest.json``, and the manifest of the new run states
    that same privacy loss (re-estimation is post-processing and spends nothing) and
    the same randomness: the measurements' seed, or secure, with ``measured_by``
    naming ``run_dir`` (:func:`censusdp.release.manifest.inherited_randomness`). A
    ``budget`` given here must match what was spent; ``options.seed`` and
    ``options.spine`` must be unset (they are the measurements').

    The NMF is read chunk by chunk (never whole) and copied unchanged into ``out_dir``.

    Raises:
        InputError: for a missing file or a manifest without a recorded budget.
        ConfigError: for a given budget that differs from the one spent.
    """
    source = RunDir(run_dir)
    options = options or ReleaseOptions()
    execution = execution or Execution()
    if options.seed is not None or options.spine is not None:
        raise InternalError("a re-estimate uses the seed and spine of its measurements")
    if options.h1_from is not None:
        raise ConfigError(
            "--h1-from applies to a fresh run; a re-estimate holds what its measurements' "
            f"release was held to ({INVARIANTS_FILE}'s h1_occupied and {HELD_PL94_FILE}), "
            "if anything"
        )
    source.require(
        source.nmf_file("persons"),
        source.invariants_file,
        source.invariant_totals_file,
        needed_by="--from-measurements",
    )
    measured = source.manifest()
    spent = ReleaseBudget(*recorded_budgets(measured, str(source.manifest_file)))
    _check_same_budget(budget, spent, source.path)
    if spent.units is not None and not source.has_nmf("units"):
        spent = ReleaseBudget(spent.persons)
    with _session(out_dir, [source.path], execution, overwrite=overwrite) as run:
        # the source checked on the run's own executor (its part files as tasks); a
        # source that fails is refused before anything is written (the staging removed)
        checked = require_valid(
            source.path,
            what="re-estimation",
            mdf=False,
            progress=execution.progress,
            executor=run.rt.executor,
        )
        # the copied NMF is the one just checked: the self-check takes that verdict when
        # the copy's recorded SHA-256, budget and geounits are the same (checked once)
        run.checked_nmf = {
            k: (proof, f"{detail}; {CHECKED_IN_SOURCE}")
            for k, (proof, detail) in checked.nmf_proofs.items()
        }
        t = time.perf_counter()
        levels = tabulation_levels(spent.persons)
        hierarchy, inv = source.invariants(levels)
        rows = _copy_measurements(source, run.staging.path, with_units=spent.units is not None)
        # a part hard-linked from the source is the file just checked there: its SHA-256
        # is that check's (the checksums do not read a 46 GB NMF again)
        run.part_digests = {
            rel: digest
            for rel, digest in checked.part_digests.items()
            if _same_file(source.path / rel, run.staging.path / rel)
        }
        geo = geography_of_run(source.path, measured, hierarchy)
        run.rt.timings["read_measurements"] = time.perf_counter() - t
        manifest = write_release(run.staging.path, inv, geo, spent, options, run.rt)
        manifest.update(rows)
        # the noise is the measurements': seeded or secure as they were, whatever this run
        randomness = inherited_randomness(measured, source.path)
        manifest.update({"seed": randomness["seed"], "randomness": randomness, "command": command})
        if measured.get("h1_source") is not None:  # held to the same H1 (its invariants)
            manifest["h1_source"] = measured["h1_source"]
        run.commit(manifest)
    return manifest


def _check_same_budget(given: ReleaseBudget | None, spent: ReleaseBudget, run_dir: Path) -> None:
    if given is None:
        return
    for mine, have, what in (
        (given.persons, spent.persons, "person"),
        (given.units, spent.units, "unit"),
    ):
        if mine is not None and (have is None or not mine.same_allocation(have)):
            raise ConfigError(
                f"the {what} budget given differs from the one {run_dir} spent; a re-estimate "
                "uses the budget of its measurements (drop --preset/--config/--rho/--epsilon)"
            )


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one file (a hard link), both there."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _copy_measurements(source: RunDir, out: Path, *, with_units: bool) -> dict[str, int]:
    """Copy the NMF(s) of ``source`` unchanged into ``out`` (hard links where they can
    be, :func:`~censusdp.io.atomic.link_or_copy`); their rows by manifest key."""
    rows = {}
    for run in ("persons", "units") if with_units else ("persons",):
        nmf, target = source.nmf_file(run), out / source.nmf_file(run).name
        if nmf.is_dir():  # part files (and their index), unchanged
            shutil.copytree(nmf, target, copy_function=link_or_copy)
        else:
            link_or_copy(nmf, target)
        rows[nmf.name.removesuffix(".parquet")] = sum(
            pq.read_metadata(f).num_rows for f in nmf_files(target)
        )
    return rows
