"""The run manifest: what a release is, how it was made, and what it cost.

Every run writes ``manifest.json`` (strict JSON) last, after every other file; its
presence marks a complete run. It records the budget in rho and (epsilon, delta)
(:func:`censusdp.privacy.release_budget.release_privacy`), the mechanism, the seed or the secure
randomness, package and library versions, the executor, per-step timings, peak memory,
solver statuses and failsafe uses, the validator's result and the list of outputs.

``files`` lists every file of the run but the two at its top that cannot be: the
manifest itself and its signature (:data:`UNLISTED_FILES`); a run holds nothing else
(:func:`run_entries` lists what it holds). ``randomness`` records where the noise came
from (:func:`randomness_problem`): ``mode`` (``seeded`` or ``secure``), ``seed`` and
``generator``, and for a re-estimate ``measured_by``, the run whose measurements it
re-estimated and that run's own record (:func:`inherited_randomness`).
"""

from __future__ import annotations

import contextlib
import os
import platform
import resource
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from censusdp.data.geography import Hierarchy
from censusdp.errors import CensusDPError, InputError, InternalError
from censusdp.execution.base import Executor
from censusdp.io.atomic import sha256_of, write_json
from censusdp.io.output_rules import MANIFEST_FILE, MANIFEST_MARKER, SIGNATURE_FILE
from censusdp.io.parts import indexed_checksums
from censusdp.io.release_manifest import ReleaseManifest
from censusdp.io.staging import Staging
from censusdp.privacy.budget import Budget
from censusdp.privacy.release_budget import release_privacy
from censusdp.version import __version__

__all__ = [
    "MANIFEST_FILE",
    "SIGNATURE_FILE",
    "UNLISTED_FILES",
    "commit_run",
    "file_checksums",
    "inherited_randomness",
    "new_manifest",
    "peak_rss_mb",
    "randomness_problem",
    "recorded_budgets",
    "run_entries",
    "sha256_of",
    "versions",
]

UNLISTED_FILES = (MANIFEST_FILE, SIGNATURE_FILE)
"""The files at the top of a run that its manifest's ``files`` does not list (and hash)."""

RANDOMNESS_MODES = ("seeded", "secure")
"""``randomness.mode`` of a release: reproducible from a seed (not secure), or secure."""

_LIBRARIES = ("numpy", "scipy", "pyarrow", "clarabel", "piqp", "ortools", "cryptography", "mpmath")


def versions() -> dict[str, str]:
    """Python's and the numerical libraries' versions."""
    out = {"python": platform.python_version()}
    for pkg in _LIBRARIES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[pkg] = metadata.version(pkg)
    return out


def peak_rss_mb() -> float:
    """Peak resident memory of this process (and of waited-for children), in MB."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(own, kids) / 1024.0, 1)


def _executor_record(executor: Executor, workers: int) -> dict:
    describe = getattr(executor, "describe", None)
    if describe is not None:
        return describe()
    return {"name": executor.name, "workers": workers}


def new_manifest(
    *,
    schema: str,
    postprocess: str,
    hierarchy: Hierarchy,
    executor: Executor,
    workers: int,
    budget: Budget,
    units_budget: Budget | None,
) -> dict[str, Any]:
    """The manifest's fixed part: package, schema, geography, platform and privacy loss."""
    manifest: dict[str, Any] = {
        "created_by": MANIFEST_MARKER,
        "kind": "release",
        "package_version": __version__,
        "schema": schema,
        "postprocess": postprocess,
        "geolevels": [[lv.name, lv.length] for lv in hierarchy.geolevels.levels],
        "geounits": {
            lv.name: hierarchy.n_units(i) for i, lv in enumerate(hierarchy.geolevels.levels)
        },
        "versions": versions(),
        "platform": platform.platform(),
        "argv": sys.argv,
        "executor": _executor_record(executor, workers),
    }
    manifest.update(release_privacy(budget, units_budget))
    return manifest


def run_entries(run_dir: str | Path) -> Iterator[tuple[str, str]]:
    """Every entry below ``run_dir``, in path order, without following symbolic links:
    ``(path relative to run_dir with "/", kind)``, kind ``"file"`` (a regular file),
    ``"directory"``, ``"symbolic link"`` or ``"special file"`` (a FIFO, socket or
    device). A symbolic link to a directory is not entered."""
    stack = [("", Path(run_dir))]
    found: list[tuple[str, str]] = []
    while stack:
        prefix, directory = stack.pop()
        with os.scandir(directory) as it:
            for e in it:
                rel = prefix + e.name
                if e.is_symlink():
                    kind = "symbolic link"
                elif e.is_dir(follow_symlinks=False):
                    kind = "directory"
                    stack.append((rel + "/", Path(e.path)))
                elif e.is_file(follow_symlinks=False):
                    kind = "file"
                else:
                    kind = "special file"
                found.append((rel, kind))
    yield from sorted(found)


def file_checksums(
    run_dir: Path, known: Mapping[str, str] | None = None, *, under: str | None = None
) -> dict[str, str]:
    """SHA-256 of every file of a run directory but its :data:`UNLISTED_FILES`, by
    relative path.

    ``known``: digests already computed by the tasks that wrote the files (part files),
    by relative path; those files are not read again here. ``under``: only the entry of
    that name at the top of ``run_dir`` (a file, or a directory's files), as the whole
    directory's checksums would list them."""
    known = known or {}
    if under is None:
        entries: Iterable[tuple[str, str]] = run_entries(run_dir)
    else:
        top = run_dir / under
        if top.is_dir() and not top.is_symlink():
            entries = ((f"{under}/{rel}", kind) for rel, kind in run_entries(top))
        else:
            entries = [(under, "file" if top.is_file() and not top.is_symlink() else "other")]
    return {
        rel: known[rel] if rel in known else sha256_of(run_dir / rel)
        for rel, kind in entries
        if kind == "file" and rel not in UNLISTED_FILES
    }


def commit_run(
    manifest: dict[str, Any],
    staging: Staging,
    timings: dict[str, float],
    t_start: float,
    *,
    check: Callable[[Path], None] | None = None,
) -> None:
    """Record checksums, total time and peak memory, write the manifest, run ``check``
    on the finished staging directory (it raises to stop the commit), and move the run
    into place. ``timings["total"]`` is the run's whole time, ``check`` included.

    Part files are not read again for the checksums: their digests are those their
    tasks computed when they wrote them, recorded in each directory's index
    (:func:`censusdp.io.parts.indexed_checksums`); ``check`` re-reads them (as tasks)."""
    manifest["files"] = file_checksums(staging.path, indexed_checksums(staging.path))
    try:  # only the entries a release records (a misspelt key is a bug here)
        ReleaseManifest.from_dict(manifest)
    except InputError as exc:
        raise InternalError(str(exc)) from None
    timings["total"] = time.perf_counter() - t_start
    manifest["timings"] = {k: round(v, 4) for k, v in timings.items()}
    manifest["peak_memory_mb"] = peak_rss_mb()
    write_json(manifest, staging.path / MANIFEST_FILE)
    if check is not None:
        check(staging.path)
        # the self-check's own timings, and the total with it: the run's whole time
        # (manifest.json is not among the checksummed files)
        timings["total"] = time.perf_counter() - t_start
        manifest["timings"] = {k: round(v, 4) for k, v in timings.items()}
        write_json(manifest, staging.path / MANIFEST_FILE)
    staging.commit()


def recorded_budgets(manifest: dict[str, Any], where: str) -> tuple[Budget, Budget | None]:
    """The person and unit budgets a run's manifest says its measurements spent.

    Raises:
        InputError: naming ``where`` when the manifest records no valid budget.
    """
    if "persons" not in manifest:
        raise InputError(f"{where}: records no person budget")
    try:
        persons = Budget.from_dict(manifest["persons"])
        units = Budget.from_dict(manifest["units"]) if "units" in manifest else None
    except CensusDPError as exc:
        raise InputError(f"{where}: {exc}") from None
    return persons, units


def inherited_randomness(parent: Mapping[str, Any], parent_dir: str | Path) -> dict[str, Any]:
    """The ``randomness`` of a re-estimate of ``parent_dir`` (whose manifest is
    ``parent``): its noise is the parent's measurements', so it is the parent's mode,
    seed and generator, with ``measured_by`` naming the parent and holding its record.

    Raises:
        InputError: when the parent's own record is not valid (:func:`randomness_problem`).
    """
    problem = randomness_problem(parent)
    if problem:
        raise InputError(f"{Path(parent_dir) / MANIFEST_FILE}: {problem}")
    record = parent["randomness"]
    return {
        "mode": record["mode"],
        "seed": record["seed"],
        "generator": record["generator"],
        "measured_by": {"run": str(Path(parent_dir).resolve()), "randomness": record},
    }


def randomness_problem(manifest: Mapping[str, Any]) -> str | None:
    """What is wrong with a release manifest's record of its randomness, or ``None``.

    ``randomness`` must be an object with ``mode`` ``"seeded"`` (an integer ``seed``,
    the manifest's ``seed``) or ``"secure"`` (``seed`` null, the manifest's too) and a
    ``generator``. A run measured from an input (``input_sha256``) records no parent;
    a re-estimate records ``measured_by``: the run whose measurements it re-estimated
    (``run``) and that run's own record (``randomness``), which must be valid in turn
    and have the same mode, seed and generator: a re-estimate of seeded measurements is
    seeded, however it was run.
    """
    record = manifest.get("randomness")
    where = "randomness"
    fresh = "input_sha256" in manifest
    problem = _record_problem(record)
    if problem is None and not _same(manifest.get("seed", _MISSING), record["seed"]):
        problem = f"seed {record['seed']!r}, but the manifest's seed is {manifest.get('seed')!r}"
    if problem is None and fresh == ("measured_by" in record):
        problem = (
            "a run measured from its input (input_sha256) cannot record measured_by"
            if fresh
            else "records neither an input it measured (input_sha256) nor the run whose "
            "measurements it re-estimated (measured_by)"
        )
    for _ in range(_MAX_GENERATIONS):
        if problem:
            return f"{where}: {problem}"
        parent = record.get("measured_by")
        if parent is None:
            return None
        if not isinstance(parent, Mapping) or not isinstance(parent.get("run"), str):
            return f"{where}.measured_by: not a record of the run measured (run, randomness)"
        up = parent.get("randomness")
        problem = _record_problem(up)
        if problem:
            return f"{where}.measured_by.randomness: {problem}"
        for key in ("mode", "seed", "generator"):
            if not _same(record[key], up[key]):
                return (
                    f"{where}: {key} is {record[key]!r}, but the measurements it re-estimated "
                    f"({parent['run']}) were made with {key} {up[key]!r}"
                )
        record, where = up, f"{where}.measured_by.randomness"
    return f"{where}: measured_by nested more than {_MAX_GENERATIONS} deep"


_MAX_GENERATIONS = 64
"""Re-estimates of re-estimates a manifest's ``measured_by`` may chain."""

_MISSING = object()


def _same(a: object, b: object) -> bool:
    """Equal and of one JSON type (``7`` is not ``7.0`` nor ``True``)."""
    return type(a) is type(b) and a == b


def _record_problem(record: object) -> str | None:
    """One ``randomness`` record's own consistency (its mode, seed and generator)."""
    if not isinstance(record, Mapping):
        return f"{record!r} is not a record of the mode, seed and generator"
    mode, seed = record.get("mode"), record.get("seed")
    if "seed" not in record:
        return "records no seed (null when secure)"
    if mode not in RANDOMNESS_MODES:
        return f"mode {mode!r} is not one of {list(RANDOMNESS_MODES)}"
    if not isinstance(record.get("generator"), str):
        return "names no generator"
    if mode == "seeded" and type(seed) is not int:
        return f"mode 'seeded' with seed {seed!r} (not an integer)"
    if mode == "secure" and seed is not None:
        return f"mode 'secure' with seed {seed!r} (a secure run has none)"
    return None
