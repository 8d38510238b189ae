"""The run manifest: what a release is, how it was made, and what it cost.

Every run writes ``manifest.json`` (strict JSON) last, after every other file; its
presence marks a complete run. It records the budget in rho and (epsilon, delta)
(:func:`censusdp.privacy.budget.release_privacy`), the mechanism, the seed or the secure
randomness, package and library versions, the executor, per-step timings, peak memory,
solver statuses and failsafe uses, the validator's result and the list of outputs.
"""

from __future__ import annotations

import contextlib
import json
import platform
import resource
import sys
import time
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from censusdp.data.geography import Hierarchy
from censusdp.errors import CensusDPError, InputError
from censusdp.io.atomic import sha256_of, write_json
from censusdp.io.output import MANIFEST_MARKER, Staging
from censusdp.io.parts import indexed_checksums
from censusdp.privacy.budget import Budget, release_privacy
from censusdp.version import __version__

__all__ = [
    "commit_run",
    "file_checksums",
    "new_manifest",
    "peak_rss_mb",
    "read_manifest",
    "recorded_budgets",
    "sha256_of",
    "versions",
]

_LIBRARIES = ("numpy", "scipy", "pyarrow", "clarabel", "ortools", "cryptography", "mpmath")


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


def _executor_record(executor: Any, workers: int) -> dict:
    describe = getattr(executor, "describe", None)
    if describe is not None:
        return describe()
    return {"name": executor.name, "workers": workers}


def new_manifest(
    *,
    schema: str,
    postprocess: str,
    hierarchy: Hierarchy,
    executor: Any,
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


def file_checksums(run_dir: Path, known: Mapping[str, str] | None = None) -> dict[str, str]:
    """SHA-256 of every file of a run directory but its manifest, by relative path.

    ``known``: digests already computed by the tasks that wrote the files (part files),
    by relative path; those files are not read again here."""
    known = known or {}
    out = {}
    for p in sorted(run_dir.rglob("*")):
        if p.is_file() and p.name != "manifest.json":
            rel = str(p.relative_to(run_dir))
            out[rel] = known[rel] if rel in known else sha256_of(p)
    return out


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
    into place.

    Part files are not read again for the checksums: their digests are those their
    tasks computed when they wrote them, recorded in each directory's index
    (:func:`censusdp.io.parts.indexed_checksums`); ``check`` re-reads them (as tasks)."""
    manifest["files"] = file_checksums(staging.path, indexed_checksums(staging.path))
    timings["total"] = time.perf_counter() - t_start
    manifest["timings"] = {k: round(v, 4) for k, v in timings.items()}
    manifest["peak_memory_mb"] = peak_rss_mb()
    write_json(manifest, staging.path / "manifest.json")
    if check is not None:
        check(staging.path)
        # the self-check's own timings (manifest.json is not among the checksummed files)
        if any(k not in manifest["timings"] for k in timings):
            manifest["timings"] = {k: round(v, 4) for k, v in timings.items()}
            write_json(manifest, staging.path / "manifest.json")
    staging.commit()


def read_manifest(run_dir: str | Path) -> dict[str, Any]:
    """The manifest of a run directory.

    Raises:
        InputError: naming the file when it is missing or not valid JSON.
    """
    path = Path(run_dir) / "manifest.json"
    if not path.is_file():
        raise InputError(f"{path}: missing file (not a censusdp run directory?)")

    def refuse(token: str) -> None:
        raise ValueError(f"{token} is not JSON")

    try:
        manifest = json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise InputError(f"{path}: not a manifest (a JSON object)")
    return manifest


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
