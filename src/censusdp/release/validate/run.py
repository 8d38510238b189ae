"""A release on disk checked from its own files: :func:`validate_run`, :func:`require_valid`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from censusdp.data.geography import Hierarchy
from censusdp.data.spine import UnitShares
from censusdp.errors import CensusDPError, InputError, ValidationError
from censusdp.io.layout import (
    HELD_PL94_FILE,
    INVARIANT_TOTALS_FILE,
    INVARIANTS_FILE,
    NMF_FILES,
    SPINE_FILES,
)
from censusdp.io.output_rules import is_censusdp_output
from censusdp.io.rundir import RunDir, not_a_release, read_manifest
from censusdp.progress import Progress, say, task
from censusdp.release.validate._entries import Entries, Hashed, check_checksums
from censusdp.release.validate._manifest import check_privacy_loss, check_randomness
from censusdp.release.validate._mdf import check_mdf
from censusdp.release.validate._nmf import check_nmf
from censusdp.release.validate._release import Release, rebuild
from censusdp.release.validate._truth import check_truth
from censusdp.release.validate.report import ValidationReport


def validate_run(
    run_dir: str | Path,
    truth_dir: str | Path | None = None,
    *,
    mdf: bool = True,
    progress: Progress = None,
    executor: Any = None,
    workers: int = 1,
    checked_nmf: Mapping[str, tuple[str, str]] | None = None,
    part_digests: Mapping[str, str] | None = None,
) -> ValidationReport:
    """Check a release from its own files: whole, consistent and untampered.

    * ``manifest``: ``manifest.json`` is strict JSON written by censusdp and records the
      budget of every run;
    * ``privacy_loss``: the manifest's headline ``rho``, ``epsilon``, ``delta`` (and
      the rest of :func:`~censusdp.privacy.release_budget.release_privacy`: mechanism, each
      run's budget record) are what the recorded budgets of the person and unit runs
      compose to, the budgets whose variances the NMF checks hold the NMF to;
    * ``randomness``: the seeded or secure record agrees with the manifest's seed and,
      for a re-estimate, with the record of the run it re-estimated
      (:func:`~censusdp.release.manifest.randomness_problem`);
    * ``checksums``: every file's SHA-256 equals the manifest's, no file is missing,
      and the directory holds nothing else: every entry is a listed file, a directory
      holding one, or ``manifest.json`` / ``signature.json`` at the top; an extra file
      (hidden or not, at any depth), a symbolic link, a FIFO or an empty directory
      fails, naming the first few (a listed file that is not a regular file stops
      the validation there, before anything is read);
    * ``nmf_persons`` / ``nmf_units``: the noisy measurement file has the NMF columns,
      measures exactly the (geolevel, query) pairs of the recorded budget, each at every
      geounit of its level exactly once with every measured cell, with finite integer
      values and the variance of the recorded mechanism;
    * the checks of :func:`~censusdp.release.validate.estimate.validate_release` on the
      MDF read back from disk (counts, hierarchy, every invariant and constraint,
      structural zeros, housing units), plus
      ``gq_facilities_exact``, ``mdf_text_matches_parquet`` (each text MDF file or part
      is its Parquet records, header and line by line, byte for byte),
      ``tables_match_mdf`` (each table's columns, its rows' GEOID, SUMLEV and NAME as
      the geography gives them, its counts the MDF's tabulation) and ``codebook``
      (``tables/codebook.csv`` is the one censusdp writes);
    * with ``truth_dir``: ``made_from_truth``, the release's invariants are those of
      the confidential file and its files are the ones the manifest hashed.

    ``mdf=False`` skips the MDF and table checks (what re-estimation needs of a run).
    ``executor``: check the part files of a partitioned NMF as tasks on it (a run's
    self-check uses the run's executor); without one, ``workers > 1`` checks them on a
    pool of that many processes. The outcome is the same.
    ``checked_nmf``: by run, a proof and the verdict's detail from a check of the same
    NMF elsewhere (a re-estimate's source, whose NMF it copied byte for byte; or this
    run's own NMF checked as soon as it was measured): a run whose NMF has the same proof
    (:func:`nmf_proof`: the same recorded SHA-256 of every NMF file, budget record and
    measured geounits) takes that verdict, detail as given, instead of being counted
    again, and ``checksums`` still holds every file to its recorded SHA-256, so a
    changed byte fails the release.
    ``part_digests``: the SHA-256 of part files this run's own tasks read (by path in the run;
    :class:`~censusdp.release.validate.measured.MeasurementsCheck`), taken by
    ``checksums`` instead of reading those files again.

    Returns:
        The report (``ok`` only if every check passed); it never raises for a bad
        release, only for a directory that is not a release at all.

    Raises:
        InputError: if ``run_dir`` has no readable manifest, or its manifest is not a
            release's (a CEF's, another command's output).
    """
    if executor is None and workers > 1:
        from censusdp.execution import make_executor

        with make_executor(workers, kind="pool") as pool:
            return validate_run(
                run_dir,
                truth_dir,
                mdf=mdf,
                progress=progress,
                executor=pool,
                workers=1,
                checked_nmf=checked_nmf,
                part_digests=part_digests,
            )
    run = Path(run_dir)
    rep = ValidationReport()
    manifest = read_manifest(run)
    problem = not_a_release(run)
    if problem is not None:
        raise InputError(f"{problem}; validate checks a directory made by 'censusdp run'")
    rep.add(
        "manifest",
        is_censusdp_output(run),
        "manifest.json written by censusdp" if is_censusdp_output(run) else "not censusdp's",
    )
    rep.add("privacy_loss", *check_privacy_loss(manifest))
    rep.add("randomness", *check_randomness(manifest))
    truth = None if truth_dir is None else Path(truth_dir)
    _check_files(
        run,
        manifest,
        rep,
        truth,
        mdf=mdf,
        progress=progress,
        executor=executor,
        before=_Before(checked_nmf or {}, Hashed(part_digests or {})),
    )
    return rep


@dataclass(frozen=True)
class _Before:
    """What :func:`_check_files` is given as checked before: the NMF verdicts by proof
    (``validate_run``'s ``checked_nmf``), and the SHA-256 of part files read by tasks,
    to which this check's tasks add theirs (``checksums`` reads the rest itself)."""

    nmf: Mapping[str, tuple[str, str]]
    hashed: Hashed


def _check_files(
    run: Path,
    manifest: dict[str, Any],
    rep: ValidationReport,
    truth: Path | None,
    *,
    mdf: bool,
    progress: Progress,
    executor: Any,
    before: _Before,
) -> None:
    """The checks of :func:`validate_run` that read the release's files, into ``rep``:
    nothing is read from a release listing a file that is not a regular file, nor
    checked against a geography that cannot be rebuilt (only ``checksums`` then)."""
    checked_nmf, hashed = before.nmf, before.hashed
    # the steps: checksums, the two NMFs, the MDF and tables, the truth (done or skipped)
    with task(progress, "validating the release", 4 + (truth is not None), unit="steps") as bar:
        only = None if mdf else _MEASUREMENT_FILES
        entries = Entries(run, manifest)
        if entries.unsafe:  # reading it could follow a link elsewhere or block (a FIFO)
            check_checksums(run, manifest, rep, entries, only=only)
            return
        try:
            release = rebuild(run, manifest)
        except (CensusDPError, OSError, KeyError, TypeError, pa.ArrowException) as exc:
            check_checksums(run, manifest, rep, entries, only=only)
            rep.add("geography", False, f"cannot rebuild the geography: {exc}")
            return
        for run_name in release.budgets:
            proof = _nmf_proof(release, run_name)
            if proof is not None and checked_nmf.get(run_name, ("", ""))[0] == proof:
                rep.add(f"nmf_{run_name}", True, checked_nmf[run_name][1])
            else:
                _check_nmf_of(
                    release,
                    run_name,
                    rep,
                    mdf=mdf,
                    progress=progress,
                    executor=executor,
                    hashed=hashed,
                )
            if proof is not None and rep.checks.get(f"nmf_{run_name}", {}).get("ok"):
                rep.nmf_proofs[run_name] = (proof, rep.checks[f"nmf_{run_name}"]["detail"])
            bar.advance()
        if mdf and RunDir(run).mdf_file("persons").exists():
            say(progress, "validate: MDF, invariants, constraints and tables")
            check_mdf(release, rep, executor, hashed)
        bar.advance()
        check_checksums(run, manifest, rep, entries, only=only, hashed=hashed)
        rep.task_cpu_seconds = hashed.task_cpu_seconds
        rep.part_digests = dict(hashed)
        bar.advance()
        if truth is not None:
            rep.add("made_from_truth", *check_truth(release, truth))
            bar.advance()


def _check_nmf_of(
    release: Release,
    run_name: str,
    rep: ValidationReport,
    *,
    mdf: bool,
    progress: Progress,
    executor: Any,
    hashed: Hashed,
) -> None:
    """``nmf_persons`` or ``nmf_units``: the noisy measurements of the run ``run_name``,
    where its budget is recorded (:func:`~censusdp.release.validate._nmf.check_nmf`);
    without the MDF (``mdf=False``), only the person measurements must be there."""
    budget, path = release.budgets[run_name], release.run / NMF_FILES[run_name]
    if budget is not None and path.exists():
        say(progress, f"validate: {NMF_FILES[run_name]}")
        rep.add(
            f"nmf_{run_name}",
            *check_nmf(
                path, budget, release.measured[run_name], release.shares[run_name], executor, hashed
            ),
        )
    elif budget is not None and (mdf or run_name == "persons"):
        # a release reduced to its person measurements still serves re-estimation
        rep.add(f"nmf_{run_name}", False, f"{NMF_FILES[run_name]} is missing")


CHECKED_IN_SOURCE = (
    "checked in the measured run before this run copied it byte for byte (the same "
    "SHA-256 of every file, budget and geounits; the checksums hold the copy to them)"
)
"""How a re-estimate's self-check states the verdict it took from its source."""


def _nmf_proof(release: Release, run_name: str) -> str | None:
    """A digest of everything the NMF check of ``run_name`` depends on
    (:func:`nmf_proof`), from the release's manifest and geography (``None`` without a
    recorded NMF)."""
    name = NMF_FILES[run_name]
    files = {
        k: v
        for k, v in (release.manifest.get("files") or {}).items()
        if k == name or k.startswith(name + "/")
    }
    if not files or release.budgets.get(run_name) is None:
        return None
    return nmf_proof(
        files, release.manifest.get(run_name), release.measured[run_name], release.shares[run_name]
    )


def nmf_proof(
    files: Mapping[str, str], record: Any, measured: Hierarchy, shares: UnitShares | None
) -> str:
    """A digest of everything the NMF check of a run depends on: the SHA-256 of every
    file of its NMF (by path in the run), its budget record (the manifest's), its
    measured geounits and their budget shares. Two checks with the same proof have the
    same verdict."""
    h = hashlib.sha256()
    h.update(json.dumps([dict(files), record], sort_keys=True).encode())
    for codes in measured.geocodes:
        h.update(b"\x1e" + "\x1f".join(np.asarray(codes).astype(str).tolist()).encode())
    if shares is not None:
        h.update(repr((shares.denominator, tuple(shares.level_numerators))).encode())
        for a in shares.numerators:
            h.update(b"\x1e" + np.ascontiguousarray(np.asarray(a, dtype=np.int64)).tobytes())
    return h.hexdigest()


_MEASUREMENT_FILES = (
    *NMF_FILES.values(),
    INVARIANTS_FILE,
    INVARIANT_TOTALS_FILE,
    HELD_PL94_FILE,
    *SPINE_FILES.values(),
)
"""What re-estimation and inference read: a release reduced to these still validates."""


def require_valid(
    run_dir: str | Path,
    *,
    what: str,
    mdf: bool = True,
    progress: Progress = None,
    executor: Any = None,
) -> ValidationReport:
    """Raise :class:`~censusdp.errors.ValidationError` unless ``run_dir`` validates;
    return its report.

    Args:
        what: the use refused, for the message (e.g. ``"re-estimation"``).
        progress: ``None`` (silent) or a callable taking lines: the steps checked.
        executor: where part files are checked as tasks (:func:`validate_run`; a
            re-estimate's run executor); the verdict is the same.
    """
    report = validate_run(run_dir, mdf=mdf, progress=progress, executor=executor)
    if report.ok:
        return report
    failures = report.failures()
    more = f" (and {len(failures) - 1} more; see censusdp validate)" if len(failures) > 1 else ""
    raise ValidationError(f"{run_dir} does not validate, so {what} refuses it: {failures[0]}{more}")
