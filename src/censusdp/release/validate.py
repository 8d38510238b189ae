"""The release validator: proves that a release obeys every constraint, after every run.

Checks (each recorded with its outcome in the manifest):

* ``nonnegative_integers``: every released count is a non-negative integer;
* ``hierarchy_consistent``: at every level each unit's histogram is the sum of its
  children's (so every table adds up across geography);
* ``state_totals_exact``: the invariant total population of each state (and the US);
* ``gq_and_housing_constraints``: at every block and every level, the population of
  each GQ type is at least its number of occupied facilities and zero where there is
  none, household population zero where there is no housing unit;
* ``structural_zeros``: no released person in a structural-zero cell;
* ``units_consistent``: occupied housing units never exceed housing units, and the unit
  histogram is consistent across levels;
* ``persons_units_consistent`` (a release whose unit run was held to its persons): per
  block, occupied housing units at most the household persons, at least one where
  there are household persons, and household persons only where housing units exist;
* ``mdf_matches_histogram`` and ``tables_match_mdf``: the MDF and the tables were
  produced from the estimated block histograms.

A release on disk (:func:`validate_run`) is also checked for what only its files can
show: that it holds exactly the files its manifest lists (``checksums``), that the
privacy loss it states is the one its recorded budgets compose to
(``privacy_loss``), that its randomness record is consistent with its history
(``randomness``), that its text MDF is its Parquet MDF (``mdf_text_matches_parquet``),
and that its tables carry the geography's identifiers and their codebook
(``tables_match_mdf``, ``codebook``).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import scipy.sparse as sp

from censusdp.data.geography import GeoLevels, Hierarchy
from censusdp.data.histograms import unit_histogram_from_counts
from censusdp.data.invariants import Invariants, compute_invariants, level_bounds
from censusdp.data.measurements import measured_rows
from censusdp.data.queries import make_query
from censusdp.data.schema import Schema, get_schema
from censusdp.data.spine import UnitShares
from censusdp.errors import CensusDPError, InputError, ValidationError
from censusdp.io.cef import read_cef
from censusdp.io.layout import MDF_FILES, NMF_FILES
from censusdp.io.mdf_parts import mdf_part_counts
from censusdp.io.mdf_read import mdf_unit_counts, read_mdf_histograms, read_mdf_records
from censusdp.io.mdf_records import record_layouts
from censusdp.io.mdf_text import text_mismatch
from censusdp.io.nmf_files import NMF_COLUMNS, nmf_files
from censusdp.io.output_rules import is_censusdp_output
from censusdp.io.parts import PART_INDEX, part_name, read_part_index, regular_file
from censusdp.io.rundir import read_manifest
from censusdp.io.tables import codebook_mismatch, table_part_mismatch
from censusdp.privacy.budget import Budget
from censusdp.privacy.release_budget import release_privacy
from censusdp.progress import Progress, say, task
from censusdp.release.consistency import consistency_violations
from censusdp.release.consistency import household_persons as _household_persons
from censusdp.release.manifest import (
    MANIFEST_FILE,
    UNLISTED_FILES,
    randomness_problem,
    recorded_budgets,
    run_entries,
    sha256_of,
)
from censusdp.release.measure import unit_variances
from censusdp.release.spine import geography_of_run
from censusdp.release.topdown.driver import Bounds
from censusdp.tables import TABLE_NAMES, identifier_columns, level_identifiers

__all__ = [
    "ValidationReport",
    "check_bounds",
    "check_hierarchy",
    "validate_release",
    "require_valid",
    "validate_run",
]


@dataclass
class ValidationReport:
    """Outcome of every check; ``ok`` only if all passed."""

    checks: dict[str, dict] = field(default_factory=dict)
    task_cpu_seconds: float = 0.0
    """CPU seconds of the tasks that read part files (not part of the verdict)."""

    def add(self, name: str, ok: bool, detail: str = "") -> None:
        """Record one check."""
        self.checks[name] = {"ok": bool(ok), "detail": detail}

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(c["ok"] for c in self.checks.values())

    def failures(self) -> list[str]:
        """Names and details of failed checks."""
        return [f"{k}: {v['detail']}" for k, v in self.checks.items() if not v["ok"]]

    def to_dict(self) -> dict:
        """For the manifest."""
        return {"ok": self.ok, "checks": self.checks}


def check_hierarchy(hists: list[sp.csr_matrix], hierarchy: Hierarchy) -> tuple[bool, str]:
    """Every level equals the aggregate of the blocks."""
    agg = hierarchy.aggregate(sp.csr_matrix(hists[-1]))
    for li in range(hierarchy.n_levels):
        diff = sp.csr_matrix(agg[li] - hists[li])
        diff.eliminate_zeros()
        if diff.nnz:
            return False, (
                f"{diff.nnz} cells at {hierarchy.geolevels[li].name} differ from the sum "
                "of their children"
            )
    return True, f"{hierarchy.n_levels} levels consistent"


def check_bounds(
    hists: list[sp.csr_matrix],
    cell_groups: np.ndarray,
    n_groups: int,
    bounds: list,
) -> tuple[bool, str]:
    """Group and total bounds hold exactly at every level."""
    for li, (h, b) in enumerate(zip(hists, bounds, strict=True)):
        onehot = sp.csr_matrix(
            (np.ones(cell_groups.size), (np.arange(cell_groups.size), cell_groups)),
            shape=(cell_groups.size, n_groups),
        )
        gs = np.asarray((sp.csr_matrix(h) @ onehot).todense())
        ts = gs.sum(axis=1)
        bad_g = (gs < b.group_lower) | (gs > b.group_upper)
        bad_t = (ts < b.total_lower) | (ts > b.total_upper)
        if bad_g.any() or bad_t.any():
            u = int(np.flatnonzero(bad_g.any(axis=1) | bad_t)[0])
            return False, f"level {li} unit {u}: group sums {gs[u].tolist()} violate bounds"
    return True, "all group and total bounds exact"


def validate_release(
    hists: list[sp.csr_matrix],
    hierarchy: Hierarchy,
    schema: Schema,
    bounds: list,
    *,
    group_variable: str = "hhgq",
    unit_hists: list[sp.csr_matrix] | None = None,
    housing_units: np.ndarray | None = None,
    mdf_block_hist: sp.csr_matrix | None = None,
    tables: Mapping[str, list[np.ndarray]] | None = None,
    tables_from_mdf: Mapping[str, list[np.ndarray]] | None = None,
    failsafe_uses: int = 0,
    household_persons: np.ndarray | None = None,
) -> ValidationReport:
    """Run every check on an estimated release.

    Args:
        hists: per level, the released (units x cells) histograms.
        bounds: per level, the :class:`~censusdp.release.topdown.driver.Bounds` in force. Where
            the failsafe relaxed a bound, its use is reported and the check is made
            against the original bounds with the failsafe count in the detail.
        unit_hists: per level, the released (units x 2) occupancy histograms.
        housing_units: ``(blocks,)`` invariant housing-unit counts.
        mdf_block_hist: the block histogram re-tabulated from the written MDF.
        tables, tables_from_mdf: per table, per level, dense (units x lines) arrays as
            written and as recomputed from the MDF.
        household_persons: ``(blocks,)`` released household persons, for a release
            whose unit run was held to them (checks ``persons_units_consistent``).
    """
    rep = ValidationReport()
    ok = all(
        np.issubdtype(h.dtype, np.integer) and (h.data.size == 0 or h.data.min() >= 0)
        for h in hists
    )
    rep.add("nonnegative_integers", ok, "all counts are non-negative integers" if ok else "")
    rep.add("hierarchy_consistent", *check_hierarchy(hists, hierarchy))
    cell_groups = schema.cell_levels(group_variable)
    n_groups = schema.variable(group_variable).size
    ok, detail = check_bounds(hists, cell_groups, n_groups, bounds)
    if not ok and failsafe_uses:
        detail += f" (the failsafe relaxed bounds in {failsafe_uses} tasks; see manifest)"
    rep.add("constraints_and_invariants", ok, detail)
    zeros = schema.structural_zero_mask
    nz = int(sp.csr_matrix(hists[-1])[:, np.flatnonzero(zeros)].sum()) if zeros.any() else 0
    rep.add("structural_zeros", nz == 0, f"{nz} persons in structural-zero cells")
    if unit_hists is not None and housing_units is not None:
        ok_u, detail_u = check_hierarchy(unit_hists, hierarchy)
        hu_rel = np.asarray(unit_hists[-1].sum(axis=1)).ravel()
        exact = np.array_equal(hu_rel, housing_units)
        rep.add(
            "units_consistent",
            ok_u and exact,
            detail_u + ("; housing units exact" if exact else "; housing units differ"),
        )
        if household_persons is not None:
            occupied = np.asarray(sp.csr_matrix(unit_hists[-1])[:, 1].todense()).ravel()
            broken = consistency_violations(household_persons, occupied, housing_units)
            n_bad = sum(broken.values())
            rep.add(
                "persons_units_consistent",
                n_bad == 0,
                "every block consistent"
                if n_bad == 0
                else "; ".join(f"{v} blocks {k.replace('_', ' ')}" for k, v in broken.items() if v),
            )
    if mdf_block_hist is not None:
        diff = sp.csr_matrix(mdf_block_hist - hists[-1])
        diff.eliminate_zeros()
        rep.add("mdf_matches_histogram", diff.nnz == 0, f"{diff.nnz} differing block cells")
    if tables is not None and tables_from_mdf is not None:
        bad = [
            f"{name} level {li}"
            for name, levels in tables.items()
            for li, arr in enumerate(levels)
            if not np.array_equal(arr, tables_from_mdf[name][li])
        ]
        shown = ", ".join(bad[:4]) + (f" and {len(bad) - 4} more" if len(bad) > 4 else "")
        rep.add("tables_match_mdf", not bad, shown or "all tables recomputed exactly")
    return rep


# -- a release on disk, checked from its own files ------------------------------------


def validate_run(
    run_dir: str | Path,
    truth_dir: str | Path | None = None,
    *,
    mdf: bool = True,
    progress: Progress = None,
    executor: Any = None,
    workers: int = 1,
) -> ValidationReport:
    """Check a release from its own files: whole, consistent and untampered.

    * ``manifest``: ``manifest.json`` is strict JSON written by censusdp and records the
      budget of every run;
    * ``privacy_loss``: the manifest's headline ``rho``, ``epsilon``, ``delta`` (and
      the rest of :func:`~censusdp.privacy.budget.release_privacy`: mechanism, each
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
    * the checks of :func:`validate_release` on the MDF read back from disk (counts,
      hierarchy, every invariant and constraint, structural zeros, housing units), plus
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

    Returns:
        The report (``ok`` only if every check passed); it never raises for a bad
        release, only for a directory that is not a release at all.

    Raises:
        InputError: if ``run_dir`` has no readable manifest.
    """
    if executor is None and workers > 1:
        from censusdp.execution import make_executor

        with make_executor(workers, kind="pool") as pool:
            return validate_run(
                run_dir, truth_dir, mdf=mdf, progress=progress, executor=pool, workers=1
            )
    run = Path(run_dir)
    rep = ValidationReport()
    manifest = read_manifest(run)
    rep.add(
        "manifest",
        is_censusdp_output(run),
        "manifest.json written by censusdp" if is_censusdp_output(run) else "not censusdp's",
    )
    rep.add("privacy_loss", *_check_privacy_loss(manifest))
    rep.add("randomness", *_check_randomness(manifest))
    # the steps: checksums, the two NMFs, the MDF and tables, the truth (done or skipped)
    bar = task(progress, "validating the release", 4 + (truth_dir is not None), unit="steps")
    # the SHA-256 of part files hashed by the tasks that read them (the rest: here)
    hashed = _Hashed()
    only = None if mdf else _MEASUREMENT_FILES
    entries = _Entries(run, manifest)
    if entries.unsafe:  # reading it could follow a link elsewhere or block (a FIFO)
        _check_checksums(run, manifest, rep, entries, only=only)
        bar.close()
        return rep
    try:
        budgets = dict(zip(("persons", "units"), recorded_budgets(manifest, str(run)), strict=True))
        geolevels = GeoLevels.from_pairs([tuple(g) for g in manifest["geolevels"]])
        blocks_table = pq.read_table(run / "invariants.parquet")
        hierarchy = Hierarchy.from_blocks(
            np.asarray(blocks_table.column("geocode").to_numpy(zero_copy_only=False)).astype("U16"),
            geolevels,
        )
        inv = Invariants.from_tables(
            blocks_table, pq.read_table(run / "invariant_totals.parquet"), hierarchy
        )
        # the geounits measured: the spine's (spine.parquet) or the tabulation's
        geo = geography_of_run(run, manifest, hierarchy)
        measured = geo.estimation
        shares = {k: None if b is None else geo.unit_shares(b) for k, b in budgets.items()}
    except (CensusDPError, OSError, KeyError, TypeError, pa.ArrowException) as exc:
        _check_checksums(run, manifest, rep, entries, only=only)
        rep.add("geography", False, f"cannot rebuild the geography: {exc}")
        bar.close()
        return rep
    for run_name, budget in budgets.items():
        if budget is not None and (run / NMF_FILES[run_name]).exists():
            say(progress, f"validate: {NMF_FILES[run_name]}")
            rep.add(
                f"nmf_{run_name}",
                *_check_nmf(
                    run / NMF_FILES[run_name],
                    budget,
                    measured,
                    shares[run_name],
                    executor,
                    hashed,
                ),
            )
        elif budget is not None and (mdf or run_name == "persons"):
            # a release reduced to its person measurements still serves re-estimation
            rep.add(f"nmf_{run_name}", False, f"{NMF_FILES[run_name]} is missing")
        bar.advance()
    if mdf and (run / "mdf_persons.parquet").exists():
        say(progress, "validate: MDF, invariants, constraints and tables")
        exact_totals = manifest.get("postprocess") != "bottomup"
        consistent = manifest.get("units_estimation") == "consistent"
        _check_mdf(
            run,
            budgets["persons"],
            hierarchy,
            inv,
            rep,
            exact_totals=exact_totals,
            consistent=consistent,
            executor=executor,
            hashed=hashed,
        )
    bar.advance()
    _check_checksums(run, manifest, rep, entries, only=only, hashed=hashed)
    rep.task_cpu_seconds = hashed.task_cpu_seconds
    bar.advance()
    if truth_dir is not None:
        rep.add("made_from_truth", *_check_truth(run, manifest, inv, hierarchy, Path(truth_dir)))
        bar.advance()
    bar.close()
    return rep


_MEASUREMENT_FILES = (
    "noisy_measurements.parquet",
    "noisy_measurements_units.parquet",
    "invariants.parquet",
    "invariant_totals.parquet",
    "spine.parquet",
)
"""What re-estimation and inference read: a release reduced to these still validates."""


def _check_privacy_loss(manifest: Mapping[str, Any]) -> tuple[bool, str]:
    """The manifest's statement of the privacy loss is what its recorded budgets compose
    to (:func:`~censusdp.privacy.budget.release_privacy`, recomputed here): the
    headline ``rho``, ``epsilon`` and ``delta``, the mechanism, and each run's record."""
    try:
        persons, units = recorded_budgets(dict(manifest), MANIFEST_FILE)
        want = release_privacy(persons, units)
    except CensusDPError as exc:
        return False, f"cannot recompute the privacy loss: {exc}"
    for key, value in want.items():
        problem = _differs(key, manifest.get(key, _MISSING), value)
        if problem:
            return False, f"{problem}, recomputed from the recorded budgets"
    runs = "persons + units" if units is not None else "persons"
    return True, (
        f"rho {want['rho']:.6g}, epsilon {want['epsilon']:.6g}, delta {want['delta']:.3g}: "
        f"the composition of the recorded budgets ({runs})"
    )


_MISSING = object()


def _differs(where: str, got: Any, want: Any) -> str | None:
    """Where a manifest's value ``got`` differs from the recomputed ``want`` (the first
    key path), or ``None``: objects key by key, lists item by item, floats to 1e-9
    relative (the same computation; a library may round its last digit otherwise),
    everything else exactly and of the same JSON type."""
    if got is _MISSING:
        return f"{where}: missing, should be {want!r}"
    if isinstance(want, Mapping):
        if not isinstance(got, Mapping):
            return f"{where}: {got!r} is not a record"
        extra = sorted(set(got) - set(want), key=str)
        if extra:
            return f"{where}.{extra[0]}: not part of the recorded budget's statement"
        return next(
            (
                p
                for k, v in want.items()
                if (p := _differs(f"{where}.{k}", got.get(k, _MISSING), v))
            ),
            None,
        )
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return f"{where}: {got!r}, should be {len(want)} items"
        return next(
            (
                p
                for i, (g, w) in enumerate(zip(got, want, strict=True))
                if (p := _differs(f"{where}[{i}]", g, w))
            ),
            None,
        )
    if isinstance(want, float):
        ok = type(got) in (int, float) and math.isclose(got, want, rel_tol=1e-9, abs_tol=0.0)
    else:
        ok = type(got) is type(want) and got == want
    return None if ok else f"{where}: the manifest says {got!r}, the budgets give {want!r}"


def _check_randomness(manifest: Mapping[str, Any]) -> tuple[bool, str]:
    """The randomness record is consistent (:func:`~censusdp.release.manifest.randomness_problem`)
    and, for a re-estimate whose measured run is still where it records it, with
    that run: when its noisy measurement files are the very files this release copied
    (the same SHA-256), its own randomness record must be the one this release
    inherited."""
    problem = randomness_problem(manifest)
    if problem:
        return False, problem
    record = manifest["randomness"]
    what = "seeded (not secure)" if record["mode"] == "seeded" else "secure"
    parent = record.get("measured_by")
    if parent is None:
        return True, what
    try:
        theirs = read_manifest(parent["run"])
    except (InputError, OSError):
        return True, (
            f"{what}, as recorded of the measurements it re-estimated ({parent['run']}, "
            "not there to compare)"
        )
    ours_files, their_files = manifest.get("files") or {}, theirs.get("files") or {}
    nmf = {  # the measurements themselves (their parts' index is how they are listed)
        k: v
        for k, v in ours_files.items()
        if k.split("/")[0] in NMF_FILES.values() and not k.endswith(f"/{PART_INDEX}")
    }
    if not nmf or any(their_files.get(k) != v for k, v in nmf.items()):
        return True, (
            f"{what}, as recorded of the measurements it re-estimated ({parent['run']} now "
            "holds other measurements)"
        )
    if theirs.get("randomness") != parent["randomness"]:
        mode = (theirs.get("randomness") or {}).get("mode")
        return False, (
            f"randomness: records the measurements of {parent['run']} as "
            f"{parent['randomness']['mode']}; that run, whose measurements these are, "
            f"records {mode!r}"
        )
    return True, f"{what}, as the measurements it re-estimated ({parent['run']})"


class _Entries:
    """What a run directory holds, against what its manifest lists (``files``).

    ``problems``: every entry that is not a listed file, a directory holding one, or
    one of :data:`~censusdp.release.manifest.UNLISTED_FILES` at the top, every entry of
    a directory of parts that is neither its ``_parts.json`` nor a part it lists (even
    if the manifest lists it), and every listed path that is not a plain relative path
    inside the run; ``unsafe``: the listed files that are there but not regular files
    (a link, a FIFO, a directory) and the directories of listed files that are not
    directories, which nothing may read."""

    def __init__(self, run: Path, manifest: Mapping[str, Any]) -> None:
        recorded = manifest.get("files")
        recorded = recorded if isinstance(recorded, Mapping) else {}
        self.bad_names = sorted(str(k) for k in recorded if not _inside(k))
        listed = {k for k in recorded if _inside(k)} | set(UNLISTED_FILES)
        dirs = {"/".join(k.split("/")[:i]) for k in listed for i in range(1, k.count("/") + 1)}
        self.problems: list[str] = [
            f"the manifest lists {_shown_name(k)}, not a path inside the release"
            for k in self.bad_names
        ]
        self.unsafe: list[str] = []
        entries = list(run_entries(run))
        extra = _not_indexed(run, listed, entries)
        for rel, kind in entries:
            shown = _shown_name(rel)
            if rel in listed and kind != "file" or rel in dirs and kind != "directory":
                # where the release has a file (or a directory of them), something else:
                # reading it could follow a link elsewhere, block (a FIFO), or read a
                # directory's files as the file's records
                self.problems.append(
                    f"{shown} is a {kind}, not {'a directory' if rel in dirs else 'a regular file'} of the release"
                )
                self.unsafe.append(rel)
            elif kind == "file" and rel in listed or kind == "directory" and rel in dirs:
                if rel in extra:
                    self.problems.append(f"{shown} is not one of the parts its {PART_INDEX} lists")
            elif kind == "file":
                self.problems.append(f"{shown} is not part of the release")
            elif kind == "directory":
                self.problems.append(f"{shown}/ is a directory the release has not")
            else:
                self.problems.append(f"{shown} is a {kind}, not a file of the release")


def _not_indexed(run: Path, listed: set[str], entries: list[tuple[str, str]]) -> set[str]:
    """The entries of directories of parts (a listed ``_parts.json`` in them) that are
    neither that index nor a part it lists."""
    out: set[str] = set()
    for index in sorted(k for k in listed if k.endswith(f"/{PART_INDEX}")):
        directory = index[: -len(PART_INDEX) - 1]
        try:
            parts = json.loads((run / index).read_text(encoding="utf-8"))["parts"]
            allowed = {index} | {f"{directory}/{p['file']}" for p in parts}
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
            continue  # not an index: the checks of the files it indexes say so
        out |= {
            rel for rel, _ in entries if rel.rpartition("/")[0] == directory and rel not in allowed
        }
    return out


def _inside(rel: object) -> bool:
    """A plain relative path inside a run: ``a/b``, never absolute, ``..``, ``.`` or empty."""
    if not isinstance(rel, str) or not rel or "\0" in rel:
        return False
    parts = rel.split("/")
    return all(p not in ("", ".", "..") for p in parts)


def _shown_name(rel: str) -> str:
    """A path as a message can print it (bytes that are not UTF-8 escaped)."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def _check_checksums(
    run: Path,
    manifest: dict,
    rep: ValidationReport,
    entries: _Entries,
    only: tuple[str, ...] | None = None,
    hashed: Mapping[str, str] | None = None,
) -> None:
    """Every file's SHA-256 is the manifest's, no file is missing, and nothing else is
    there (``entries``); a file in ``hashed`` (a part hashed by the task that read it)
    is not read again here. With ``only`` (the measurement files), only those must be
    there (and are hashed): a release reduced to them still serves re-estimation."""
    hashed = hashed or {}
    recorded = manifest.get("files")
    if not isinstance(recorded, dict) or not recorded:
        rep.add("checksums", False, "the manifest records no file checksums")
        return
    recorded = {k: v for k, v in recorded.items() if k not in entries.bad_names}
    if only is not None:
        # a partitioned NMF's files are NAME/part-*.parquet and NAME/_parts.json
        recorded = {k: v for k, v in recorded.items() if k.split("/")[0] in only}
    bad = []
    for rel, digest in recorded.items():
        if os.path.lexists(run / rel) and not regular_file(run / rel):
            continue  # a link, a FIFO, a directory: among the entries' problems
        if not regular_file(run / rel):
            if only is None or rel.split("/")[0] != NMF_FILES["units"]:
                bad.append(f"{rel} is missing")
        elif (
            not entries.unsafe
            and (hashed[rel] if rel in hashed else sha256_of(run / rel)) != digest
        ):  # nothing is read from a run holding a link or a FIFO it lists
            bad.append(f"{rel} changed (SHA-256 differs from the manifest)")
    bad += entries.problems
    shown = "; ".join(bad[:5]) + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "")
    what = "measurement files" if only is not None else "files"
    rep.add("checksums", not bad, shown or f"{len(recorded)} {what} intact, nothing else")


class _Hashed(dict):
    """The SHA-256 of part files hashed by the tasks that read them, by path in the run,
    and (``task_cpu_seconds``) those tasks' CPU seconds."""

    task_cpu_seconds: float = 0.0


def _add_cost(hashed: dict | None, cpu: float) -> None:
    if isinstance(hashed, _Hashed):
        hashed.task_cpu_seconds += cpu


def _cell_mix(cells: np.ndarray) -> np.ndarray:
    """A per-cell fingerprint whose sums identify a set of cells (multiplicative hash)."""
    return (cells.astype(np.uint64) * np.uint64(2654435761) + np.uint64(97)) % np.uint64(1 << 31)


def _shown(path: Path, file: Path) -> str:
    """``noisy_measurements.parquet`` or ``noisy_measurements.parquet/part-00003.parquet``."""
    return path.name if file == path else f"{path.name}/{file.name}"


def _check_nmf(
    path: Path,
    budget: Budget,
    hierarchy: Hierarchy,
    unit_shares: UnitShares | None = None,
    executor: Any = None,
    hashed: dict[str, str] | None = None,
) -> tuple[bool, str]:
    """The NMF measures the budget's plan, completely, with the stated noise.

    Streamed a row group at a time, part by part for a partitioned NMF (whose index must
    list exactly its parts), whatever the row groups hold: per (geolevel,
    query) and geounit it counts the rows and sums a fingerprint of their cells, and
    compares both with the query's measured cells at the end. With per-geounit budgets
    (``unit_shares``, a spine release's bypass) every row's variance must be its unit's
    own (its share of the budget, exactly as recorded) and a bypassed unit has no rows.
    With an ``executor``, the parts of a partitioned NMF are counted by its tasks
    (:func:`_count_part`), each returning its unit range's counts, and only those are
    added up here, and each task's SHA-256 of its part goes to ``hashed`` (by the
    part's path in the run) for the checksum check.
    """
    try:
        files = nmf_files(path)
        index = read_part_index(path) if path.is_dir() else None
        metas = [pq.read_metadata(f) for f in files]
    except InputError as exc:
        return False, str(exc)
    except (OSError, pa.ArrowException) as exc:
        return False, f"{path.name}: not readable Parquet ({exc})"
    for f, md in zip(files, metas, strict=True):
        missing = [c for c in NMF_COLUMNS[:6] if c not in md.schema.to_arrow_schema().names]
        if missing:
            return False, f"{_shown(path, f)}: missing columns {missing}"
    schema = get_schema(budget.schema)
    levels = {name: i for i, name in enumerate(hierarchy.geolevels.names)}
    plan = {(m.geolevel, m.query): m for m in budget.measurements()}
    want = {k: measured_rows(schema, make_query(schema, k[1])) for k in plan}
    unit_var = {
        k: (
            np.full(hierarchy.n_units(levels[k[0]]), float(m.variance))
            if unit_shares is None
            else unit_variances(
                m.mechanism,
                unit_shares.numerators[levels[k[0]]],
                unit_shares.level_numerators[levels[k[0]]],
            )
        )
        for k, m in plan.items()
    }
    rows = {k: np.zeros(hierarchy.n_units(levels[k[0]]), dtype=np.int64) for k in plan}
    mix = {k: np.zeros(hierarchy.n_units(levels[k[0]]), dtype=np.uint64) for k in plan}
    if index is not None:
        problem = _check_index(path, index, metas, hierarchy, levels)
        if problem:
            return False, problem
    if executor is not None and index is not None:
        problem = _count_parts(
            executor, path, index, unit_var, hierarchy, levels, rows, mix, hashed
        )
    else:
        problem = _count_files(path, files, unit_var, rows, mix, hierarchy, levels)
    if problem:
        return False, problem
    for key, count in rows.items():
        full = _cell_mix(want[key]).sum(dtype=np.uint64)
        measured = np.isfinite(unit_var[key])
        bad = np.where(measured, (count != want[key].size) | (mix[key] != full), count != 0)
        if bad.any():
            u = int(np.flatnonzero(bad)[0])
            code = hierarchy.geocodes[levels[key[0]]][u] or "(the whole)"
            if not measured[u]:
                return False, (
                    f"({key[0]}, {key[1]}) at geounit {code} has {int(count[u])} rows; it is "
                    "a bypassed single child (budget share 0) and must have none"
                )
            return False, (
                f"({key[0]}, {key[1]}) at geounit {code} has {int(count[u])} rows; every "
                f"geounit must have each of the query's {want[key].size} measured cells once"
            )
    if unit_shares is None:
        return True, f"{len(plan)} level-queries, every geounit once, variances as recorded"
    skipped = sum(int((~np.isfinite(v)).sum()) for v in unit_var.values())
    return True, (
        f"{len(plan)} level-queries, every measured geounit once with its own share's "
        f"variance; {skipped:,} bypassed (geounit, query) pairs without rows"
    )


def _stat_range(md: Any, column: str) -> tuple[str, str] | None:
    """The min and max of a string column over a file's row groups (footer only)."""
    i = md.schema.to_arrow_schema().names.index(column)
    lo = hi = None
    for rg in range(md.num_row_groups):
        if md.row_group(rg).num_rows == 0:
            continue
        st = md.row_group(rg).column(i).statistics
        if st is None or not st.has_min_max:
            return None
        lo = str(st.min) if lo is None else min(lo, str(st.min))
        hi = str(st.max) if hi is None else max(hi, str(st.max))
    return None if lo is None else (lo, hi)


def _check_index(
    path: Path, index: dict, metas: list, hierarchy: Hierarchy, levels: dict
) -> str | None:
    """The part index (``_parts.json``) agrees with each part's footer: its rows, its one
    geolevel and its geocodes (within the unit range ``start:stop``)."""
    for rec, md in zip(index["parts"], metas, strict=True):
        where = f"{path.name}/{rec['file']}"
        if int(rec["rows"]) != md.num_rows:
            return f"{where} has {md.num_rows} rows; its index entry says {rec['rows']}"
        level = str(rec["geolevel"])
        li = levels.get(level)
        a, b = int(rec["start"]), int(rec["stop"])
        if li is None or not 0 <= a < b <= hierarchy.n_units(li):
            return f"{where}: index entry {level} units {a}..{b - 1} is not in the release"
        if md.num_rows == 0:
            continue
        lv, codes = _stat_range(md, "geolevel"), _stat_range(md, "geocode")
        want = (str(hierarchy.geocodes[li][a]), str(hierarchy.geocodes[li][b - 1]))
        # within the range, not equal to it: bypassed units at either end have no rows
        # (which units must have rows is checked when the rows are counted)
        outside = codes is not None and (codes[0] < want[0] or codes[1] > want[1])
        if lv is not None and lv != (level, level) or outside:
            return (
                f"{where} holds {lv} geocodes {codes}; its index entry says {level} "
                f"units {a}..{b - 1} ({want[0]}..{want[1]})"
            )
    return None


def _count_files(
    path: Path, files: list[Path], plan: dict, rows: dict, mix: dict, hierarchy: Any, levels: dict
) -> str | None:
    """Count every row group of ``files`` into ``rows`` and ``mix``; a problem or ``None``.

    Consecutive row groups whose footers settle the same columns are read in one call
    (:data:`READ_BATCH_ROWS` rows at most) and then checked one by one: a spine's
    per-geounit budget shares cut the NMF into row groups of a few thousand rows, and
    one read call per row group was a third of reading them."""
    for f in files:
        try:
            pf = pq.ParquetFile(f)
        except (OSError, pa.ArrowException) as exc:
            return f"{_shown(path, f)}: not readable Parquet ({exc})"
        md = pf.metadata
        names = pf.schema_arrow.names
        constants = [_footer_constants(md.row_group(rg), names) for rg in range(md.num_row_groups)]
        for batch in _read_batches(md, constants):
            columns = [c for c in NMF_COLUMNS[:6] if c not in constants[batch[0]]]
            try:
                t = pf.read_row_groups(batch, columns=columns, use_threads=False)
            except (OSError, pa.ArrowException) as exc:
                return f"{_shown(path, f)} row groups {batch[0]}..{batch[-1]}: unreadable ({exc})"
            at = 0
            for rg in batch:
                n = md.row_group(rg).num_rows
                part = t.slice(at, n)
                at += n
                problem = _check_nmf_rows(part, plan, rows, mix, hierarchy, levels, constants[rg])
                if problem:
                    return f"{_shown(path, f)}: {problem}"
            if at != t.num_rows:
                return (
                    f"{_shown(path, f)}: row groups {batch[0]}..{batch[-1]} hold "
                    f"{t.num_rows} rows, their footers {at}"
                )
    return None


READ_BATCH_ROWS = 1 << 22
"""Most rows :func:`_count_files` reads in one call."""


def _read_batches(md: Any, constants: list[dict[str, Any]]) -> list[list[int]]:
    """Runs of consecutive row groups with the same footer-settled columns, each at most
    :data:`READ_BATCH_ROWS` rows (or one row group)."""
    out: list[list[int]] = []
    rows = 0
    for rg, const in enumerate(constants):
        n = md.row_group(rg).num_rows
        if out and constants[out[-1][0]].keys() == const.keys() and rows + n <= READ_BATCH_ROWS:
            out[-1].append(rg)
            rows += n
        else:
            out.append([rg])
            rows = n
    return out


def _footer_constants(meta: Any, names: list[str]) -> dict[str, Any]:
    """Columns of a row group whose check its footer statistics already settle, so
    they are not read: ``value`` stored as integers without nulls (every value a finite
    integer), ``variance``, ``geolevel`` and ``query`` without nulls and one value (its
    min equals its max).

    Reading them was about 70% of reading a ``ddp-2010`` part's checked columns. The
    statistics are part of the file the manifest's SHA-256 covers."""
    out: dict[str, Any] = {}
    kinds = {
        "value": ("INT32", "INT64"),
        "variance": ("DOUBLE",),
        "geolevel": ("BYTE_ARRAY",),
        "query": ("BYTE_ARRAY",),
    }
    for name, physical in kinds.items():
        if name not in names:
            continue
        col = meta.column(names.index(name))
        st = col.statistics
        if col.physical_type not in physical or st is None or not st.has_null_count:
            continue
        if st.null_count != 0 or st.num_values != meta.num_rows:
            continue
        if name == "value":
            out[name] = np.int64(0)
        elif st.has_min_max and st.min == st.max:
            out[name] = np.float64(st.min) if name == "variance" else str(st.min)
    return out


@dataclass(frozen=True, eq=False)
class _PartCount:
    """Count one NMF part (``file``) said to hold units ``start:start + len(codes)`` of
    ``level`` (index ``li``) against the level's planned queries ``plan`` (each one's
    variance at each of those units; ``inf`` where a bypassed unit must have no rows)."""

    file: str
    shown: str
    level: str
    li: int
    start: int
    codes: np.ndarray
    plan: dict


def _count_part(job: _PartCount) -> tuple[str | None, dict, str, float]:
    """A task: the part's per-unit row counts and cell fingerprints, or its problem, and
    the part's SHA-256 (with the task's CPU seconds under the key ``cpu``)."""
    c = time.process_time()
    view = SimpleNamespace(geocodes={job.li: job.codes})  # all _check_pair looks up
    n = job.codes.size
    rows = {k: np.zeros(n, dtype=np.int64) for k in job.plan}
    mix = {k: np.zeros(n, dtype=np.uint64) for k in job.plan}
    problem = _count_files(
        Path(job.shown).parent, [Path(job.file)], job.plan, rows, mix, view, {job.level: job.li}
    )
    digest = sha256_of(job.file)
    if problem:
        return (
            f"{problem} (a part of {job.level} units {job.start}..{job.start + n - 1})",
            {},
            digest,
            time.process_time() - c,
        )
    return None, {k: (rows[k], mix[k]) for k in job.plan}, digest, time.process_time() - c


def _count_parts(
    executor: Any,
    path: Path,
    index: dict,
    plan: dict,
    hierarchy: Hierarchy,
    levels: dict,
    rows: dict,
    mix: dict,
    hashed: dict[str, str] | None = None,
) -> str | None:
    """Count a partitioned NMF's parts on ``executor``; add their counts up here (and
    their SHA-256 to ``hashed``)."""
    jobs = []
    for rec in index["parts"]:
        level = str(rec["geolevel"])
        if level not in levels:
            return f"{path.name}/{rec['file']}: geolevel {level!r} is not a level of the release"
        li, a, b = levels[level], int(rec["start"]), int(rec["stop"])
        if not 0 <= a < b <= hierarchy.n_units(li):
            return f"{path.name}/{rec['file']}: units {a}..{b - 1} are not units of {level}"
        jobs.append(
            _PartCount(
                str(path / rec["file"]),
                f"{path.name}/{rec['file']}",
                level,
                li,
                a,
                hierarchy.geocodes[li][a:b],
                {k: v[a:b] for k, v in plan.items() if k[0] == level},
            )
        )
    for job, (problem, counts, digest, cpu) in zip(
        jobs, executor.map(_count_part, jobs), strict=True
    ):
        _add_cost(hashed, cpu)
        if hashed is not None:
            hashed[job.shown] = digest
        if problem:
            return problem
        span = slice(job.start, job.start + job.codes.size)
        for key, (r, m) in counts.items():
            rows[key][span] += r
            mix[key][span] += m
    return None


def _encoded(col: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(distinct strings, index of each row into them)`` of a string column, plain or
    dictionary-encoded, without a Python string per row; ``None`` if it has nulls."""
    if col.null_count:
        return None
    dicts, idxs = [], []
    for ch in col.chunks:
        if not pa.types.is_dictionary(ch.type):
            ch = pc.dictionary_encode(ch)
        dicts.append(np.asarray(ch.dictionary.cast(pa.string()).to_pylist(), dtype=str))
        idxs.append(np.asarray(ch.indices))  # int32 as stored: no copy per row
    if not dicts:
        return np.zeros(0, dtype="U1"), np.zeros(0, dtype=np.int64)
    if len(dicts) == 1 and (dicts[0].size < 2 or (dicts[0][1:] > dicts[0][:-1]).all()):
        return dicts[0], idxs[0]  # one sorted dictionary of distinct strings (NMFWriter's)
    distinct, inverse = np.unique(np.concatenate(dicts), return_inverse=True)
    offsets = np.cumsum([0] + [d.size for d in dicts[:-1]])
    return distinct, np.concatenate(
        [inverse[o + i] for o, i in zip(offsets, idxs, strict=True)]
    ).astype(np.int64)


def _column(t: pa.Table, name: str, constant: dict[str, Any] | None) -> np.ndarray:
    """Column ``name`` of ``t`` as NumPy, or a row group's footer constant for it (a
    read-only view, no copy)."""
    if constant and name in constant:
        return np.broadcast_to(constant[name], (t.num_rows,))
    return t.column(name).to_numpy(zero_copy_only=False)


def _check_nmf_rows(
    t: pa.Table,
    plan: dict,
    rows: dict,
    mix: dict,
    hierarchy: Hierarchy,
    levels: dict,
    constant: dict[str, Any] | None = None,
) -> str | None:
    """One row group: known (geolevel, query) pairs, known geocodes, stated variance.

    Strings are handled through their dictionaries (a row group of 4M values has one
    level, one query and a few thousand geocodes), never as one Python string per row.
    ``constant``: columns not read, settled by the footer (:func:`_footer_constants`).
    """
    one = np.broadcast_to(np.int64(0), (t.num_rows,))
    enc = [
        (np.array([constant[c]]), one) if constant and c in constant else _encoded(t.column(c))
        for c in ("geolevel", "query", "geocode")
    ]
    if any(e is None for e in enc):
        return _check_nmf_rows_plain(t, plan, rows, mix, hierarchy, levels, constant)
    (level_names, level_i), (query_names, query_i), (code_names, code_i) = enc
    cells_all = t.column("cell").to_numpy(zero_copy_only=False)
    values_all = _column(t, "value", constant)
    var_all = _column(t, "variance", constant)

    def check(key: tuple[str, str], sel: np.ndarray | slice) -> str | None:
        return _check_pair(
            key, sel, plan, rows, mix, hierarchy, levels, code_names, code_i,
            cells_all, values_all, var_all,
        )  # fmt: skip

    if level_names.size == 1 and query_names.size == 1:  # what NMFWriter writes
        return check((str(level_names[0]), str(query_names[0])), slice(None))
    pair = level_i * max(query_names.size, 1) + query_i
    pairs, inverse = np.unique(pair, return_inverse=True)
    # the same order as sorting (level, query) strings: level names and query names
    # are each sorted, so their pair ids sort like the pairs
    for j, pid in enumerate(pairs):
        key = (str(level_names[pid // query_names.size]), str(query_names[pid % query_names.size]))
        problem = check(key, np.flatnonzero(inverse == j))
        if problem:
            return problem
    return None


def _check_pair(
    key: tuple[str, str],
    sel: np.ndarray | slice,
    plan: dict,
    rows: dict,
    mix: dict,
    hierarchy: Hierarchy,
    levels: dict,
    code_names: np.ndarray,
    code_i: np.ndarray,
    cells_all: np.ndarray,
    values_all: np.ndarray,
    var_all: np.ndarray,
) -> str | None:
    """The rows ``sel`` of one (geolevel, query): count them per geounit.

    Counted per geocode (the row group's dictionary entries, a few thousand), not per
    row: one pass for the row counts, one for the cell fingerprints, and the variance
    compared per geocode when the rows share one (what :class:`NMFWriter` writes; a
    row group never mixes variances), else row by row. On ``ddp-2010`` parts this
    made the self-check of the NMF about 2x cheaper (``benchmarks/bench_nmf_write.py``).
    """
    if key not in plan:
        return f"({key[0]}, {key[1]}) is not a measurement of the recorded budget"
    values = values_all[sel]
    if values.dtype.kind == "f" and not np.all(np.isfinite(values) & (values == np.round(values))):
        return f"({key[0]}, {key[1]}) has a value that is not a finite integer"
    li = levels[key[0]]
    codes = hierarchy.geocodes[li]
    unit_of = np.minimum(np.searchsorted(codes, code_names.astype(codes.dtype)), codes.size - 1)
    known = codes[unit_of] == code_names
    row_codes = code_i[sel]
    if row_codes.size == 0:
        return None
    per_code = np.bincount(row_codes, minlength=code_names.size)
    used = np.flatnonzero(per_code)
    wrong = ~known[used]
    if wrong.any():
        return f"geocode {code_names[used[np.argmax(wrong)]]} is not a {key[0]} of the release"
    units = unit_of[used]
    var = var_all[sel]
    lo, hi = float(var.min()), float(var.max())
    if lo == hi:  # one variance: compare it per geocode
        want_var = plan[key][units]
        off = ~np.isfinite(want_var) | (np.abs(lo - want_var) > 1e-9 * want_var) | ~np.isfinite(lo)
        i = int(np.argmax(off))
        got = lo
    else:
        want_var = plan[key][unit_of[row_codes]]
        off = ~np.isfinite(var) | (np.abs(var - want_var) > 1e-9 * want_var)
        i = int(np.argmax(off))
        got = float(var[i]) if off.any() else lo
        units_i = unit_of[row_codes[i]]
    if off.any():
        u = int(units[i]) if lo == hi else int(units_i)
        code = codes[u] or "(the whole)"
        if not np.isfinite(want_var[i]):
            return f"({key[0]}, {key[1]}) has rows at {code}, a bypassed geounit (share 0)"
        return (
            f"({key[0]}, {key[1]}) at {code} has variance {got}; its share's mechanism's "
            f"is {want_var[i]}"
        )
    # the fingerprints are < 2^31, so their float64 sums per geocode are exact (fewer
    # than 2^22 rows a geounit)
    cells = np.asarray(cells_all[sel])
    if cells.size and 0 <= cells.min() and cells.max() < 1 << 20:
        weights = _cell_mix(np.arange(int(cells.max()) + 1)).astype(np.float64)[cells]
    else:
        weights = _cell_mix(cells).astype(np.float64)
    sums = np.bincount(row_codes, weights=weights, minlength=code_names.size)[used]
    np.add.at(rows[key], units, per_code[used])
    np.add.at(mix[key], units, sums.astype(np.uint64))
    return None


def _check_nmf_rows_plain(
    t: pa.Table,
    plan: dict,
    rows: dict,
    mix: dict,
    hierarchy: Hierarchy,
    levels: dict,
    constant: dict[str, Any] | None = None,
) -> str | None:
    """:func:`_check_nmf_rows` for columns with nulls: one string per row."""
    level_col, query_col = (
        np.full(t.num_rows, constant[c])
        if constant and c in constant
        else np.asarray(t.column(c).to_numpy(zero_copy_only=False)).astype(str)
        for c in ("geolevel", "query")
    )
    codes_all = np.asarray(t.column("geocode").to_numpy(zero_copy_only=False)).astype(str)
    code_names, code_i = np.unique(codes_all, return_inverse=True)
    cells_all = t.column("cell").to_numpy(zero_copy_only=False)
    values_all = _column(t, "value", constant)
    var_all = _column(t, "variance", constant)
    pairs, inverse = np.unique(np.stack([level_col, query_col]), axis=1, return_inverse=True)
    for j in range(pairs.shape[1]):
        key = (str(pairs[0, j]), str(pairs[1, j]))
        sel = np.flatnonzero(inverse.ravel() == j)
        problem = _check_pair(
            key,
            sel,
            plan,
            rows,
            mix,
            hierarchy,
            levels,
            code_names,
            code_i.ravel(),
            cells_all,
            values_all,
            var_all,
        )
        if problem:
            return problem
    return None


def _check_mdf(
    run: Path,
    budget: Budget,
    hierarchy: Hierarchy,
    inv: Invariants,
    rep: ValidationReport,
    *,
    exact_totals: bool,
    consistent: bool = False,
    executor: Any = None,
    hashed: dict[str, str] | None = None,
) -> None:
    """The MDF obeys every invariant and constraint, its text files are its Parquet
    files, and the tables are its tabulation with the geography's identifiers.

    A bottom-up release estimates blocks alone and says so in its manifest: its state
    totals are sums of noisy blocks, so only they are not held exact.

    An MDF of part files is read by tasks on ``executor`` (in this process without
    one), one part each (:func:`_count_mdf_part`): each returns its blocks' histograms
    and unit counts, its text parts' and table parts' problems, and its files'
    SHA-256 (into ``hashed``), and only those sparse per-block counts are put together
    here.
    """
    schema = get_schema(budget.schema)
    partitioned = (run / MDF_FILES["persons"][0]).is_dir()
    table_problems: list[str] | None = None
    try:
        if partitioned:
            hist, pl94, counts, table_problems, text_problems = _mdf_from_parts(
                run, hierarchy, schema, executor, hashed, inv
            )
        else:
            counts = mdf_unit_counts(run / MDF_FILES["units"][0], hierarchy)
            text_problems = _check_text_files(run, schema, hashed)
    except (CensusDPError, OSError, KeyError, pa.ArrowException) as exc:
        rep.add("mdf_readable", False, f"cannot read the MDF: {exc}")
        return
    facilities = inv.gq_facilities.sum(axis=1)
    wrong = np.flatnonzero(counts[:, 2] != facilities)
    rep.add(
        "gq_facilities_exact",
        wrong.size == 0,
        "occupied facility records per block equal the invariants"
        if wrong.size == 0
        else f"{wrong.size} blocks, e.g. {hierarchy.blocks[wrong[0]]}: {counts[wrong[0], 2]} "
        f"facility records, {facilities[wrong[0]]} published",
    )
    try:
        if partitioned:
            # the facilities' types are the invariants' (their number was checked above)
            units = unit_histogram_from_counts(
                counts[:, 0] + counts[:, 1], counts[:, 1], inv.gq_facilities
            )
        else:
            hist, pl94, units = read_mdf_histograms(run, hierarchy, schema)
        if (run / "tables" / f"{TABLE_NAMES[0]}.parquet").is_dir():
            if table_problems is None:  # tables in parts, the MDF not: not a release's
                raise InputError("the tables are part files but the MDF is not")
            table_problems += _check_table_tops(run, hierarchy, pl94, units)
        else:
            table_problems = _check_table_files(run, hierarchy, pl94, units)
    except (CensusDPError, OSError, KeyError, pa.ArrowException) as exc:
        rep.add("mdf_readable", False, f"cannot read the MDF or tables: {exc}")
        return
    levels = hierarchy.aggregate(hist)
    bounds = [Bounds(*b) for b in level_bounds(inv, hierarchy)]
    if not exact_totals:
        bounds = [
            Bounds(b.group_lower, b.group_upper, 0 * b.total_lower, b.total_upper + np.inf)
            for b in bounds
        ]
    occupancy = [sp.csr_matrix(h[:, :2]) for h in hierarchy.aggregate(units)]
    sub = validate_release(
        levels,
        hierarchy,
        schema,
        bounds,
        unit_hists=occupancy,
        housing_units=inv.housing_units,
        household_persons=_household_persons(hist, schema) if consistent else None,
    )
    rep.checks.update(sub.checks)
    rep.add(
        "mdf_text_matches_parquet",
        not text_problems,
        "; ".join(text_problems[:3])
        or "every text MDF file is its Parquet records, header and line by line",
    )
    rep.add(
        "tables_match_mdf",
        not table_problems,
        "; ".join(table_problems[:3])
        or "every table equals the tabulation of the MDF, with the geography's GEOID, "
        "SUMLEV and NAME",
    )
    problem = codebook_mismatch(run / "tables")
    rep.add("codebook", problem is None, problem or "tables/codebook.csv is censusdp's")


def _check_text_files(run: Path, schema: Schema, hashed: dict[str, str] | None) -> list[str]:
    """An MDF of single files: each text file present is its Parquet file's records
    (:func:`~censusdp.io.mdf_text.text_mismatch`); its SHA-256 goes to ``hashed``."""
    problems = []
    layouts = record_layouts(schema)
    for kind, (pq_name, txt_name) in MDF_FILES.items():
        if not regular_file(run / txt_name):
            continue  # a release without its text MDF: checksums says whether it should
        problem, digest = text_mismatch(run / pq_name, run / txt_name, layouts[kind], header=True)
        if hashed is not None:
            hashed[txt_name] = digest
        if problem:
            problems.append(problem)
    return problems


def _check_table_files(
    run: Path, hierarchy: Hierarchy, pl94: sp.csr_matrix, units: sp.csr_matrix
) -> list[str]:
    """Tables written as single files (not part files): each holds every geounit of every
    level in table order, with the geography's identifiers and the MDF's tabulation."""
    ids = identifier_columns(hierarchy)
    p_rows = sp.vstack(hierarchy.aggregate(pl94), format="csr")
    u_rows = sp.vstack(hierarchy.aggregate(units), format="csr")
    out = []
    for name in TABLE_NAMES:
        path = run / "tables" / f"{name}.parquet"
        bad = (
            table_part_mismatch(path, name, ids, p_rows, u_rows)
            if regular_file(path)
            else f"{path}: missing file"
        )
        if bad:
            out.append(bad)
    return out


def _check_table_tops(
    run: Path, hierarchy: Hierarchy, pl94: sp.csr_matrix, units: sp.csr_matrix
) -> list[str]:
    """Part 0 of each partitioned table: the levels above the block, tabulated from the
    MDF's block histograms aggregated (a few hundred thousand geounits for the US), with
    their identifiers."""
    p_levels, u_levels = hierarchy.aggregate(pl94), hierarchy.aggregate(units)
    ids = level_identifiers(
        [
            (lv.name, lv.length, codes)
            for lv, codes in zip(
                hierarchy.geolevels.levels[:-1], hierarchy.geocodes[:-1], strict=True
            )
        ]
    )
    p_top = sp.vstack(p_levels[:-1], format="csr")
    u_top = sp.vstack(u_levels[:-1], format="csr")
    out = []
    for name in TABLE_NAMES:
        path = run / "tables" / f"{name}.parquet" / part_name(0)
        bad = table_part_mismatch(path, name, ids, p_top, u_top)
        if bad:
            out.append(bad)
    return out


@dataclass(frozen=True, eq=False)
class _MDFPartCount:
    """Read back part ``file`` (its name in each MDF directory) of a partitioned MDF:
    the blocks ``blocks`` (geocodes, sorted) of the level ``geolevel`` (name, geocode
    length); ``text``: the text parts to compare with the Parquet parts; ``header``:
    whether the first text line is the header."""

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


def _count_mdf_part(
    job: _MDFPartCount,
) -> tuple[str | None, Any, dict[str, str], float]:
    """A task: one MDF part's ``(persons hist, pl94 hist, unit counts, tables' problem,
    text parts' problem)`` (or its problem), the SHA-256 of each of its files, by path
    in the run, and its CPU seconds. With ``tables`` (the tables' block part file name)
    each table's rows of these blocks must be the tabulation of the part read back
    (facilities typed by ``gq_facilities``, the invariants'), with the blocks'
    identifiers."""
    c = time.process_time()
    problem, counts, digests, text_problem = _read_mdf_part(job)
    if problem is None and job.tables is not None:
        run = Path(job.run)
        units = unit_histogram_from_counts(
            counts[2][:, 0] + counts[2][:, 1], counts[2][:, 1], job.gq_facilities
        )
        ids = level_identifiers([(job.geolevel[0], job.geolevel[1], job.blocks)])
        bad = None
        for name in TABLE_NAMES:
            rel = f"tables/{name}.parquet/{job.tables}"
            if regular_file(run / rel):
                digests[rel] = sha256_of(run / rel)
            bad = bad or table_part_mismatch(run / rel, name, ids, counts[1], units)
        counts = (*counts, bad, text_problem)
    elif problem is None:
        counts = (*counts, None, text_problem)
    return problem, counts, digests, time.process_time() - c


def _read_mdf_part(
    job: _MDFPartCount,
) -> tuple[str | None, Any, dict[str, str], str | None]:
    """``(problem, counts, digests, text problem)`` of one MDF part: its Parquet parts'
    records (as many as their index entries say) counted per block, and each text part
    compared with its Parquet part (and hashed as it is read)."""
    run = Path(job.run)
    layouts = record_layouts(get_schema(job.schema))
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
    return None, counts, digests, text_problem


def _mdf_from_parts(
    run: Path,
    hierarchy: Hierarchy,
    schema: Schema,
    executor: Any,
    hashed: dict | None,
    inv: Invariants | None = None,
) -> tuple[sp.csr_matrix, sp.csr_matrix, np.ndarray, list[str], list[str]]:
    """A partitioned MDF's block histograms and unit counts, its parts read by tasks,
    the problems of the tables' block parts (checked by the same tasks when the tables
    are partitioned and ``inv`` is given) and those of its text parts.

    The four directories' indexes must list the same parts, whose block ranges cover
    the release's blocks in order, once each, each text part as many records as its
    Parquet part; each table's index the same parts after its part 0 (the levels above
    the block).

    Raises:
        InputError: naming the first problem (an index, a part, a record).
    """
    tables = inv is not None and (run / "tables" / f"{TABLE_NAMES[0]}.parquet").is_dir()
    indexes = {}
    for pq_name, txt_name in MDF_FILES.values():
        indexes[pq_name] = read_part_index(run / pq_name, ".parquet")
        if (run / txt_name).is_dir():
            indexes[txt_name] = read_part_index(run / txt_name, ".txt")
    persons, units = (indexes[n] for n, _ in MDF_FILES.values())
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
    for name in TABLE_NAMES if tables else ():
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
    block = hierarchy.geolevels.levels[-1]
    jobs = [
        _MDFPartCount(
            str(run),
            str(p["file"]),
            None if text[0] is None else str(text[0]["parts"][i]["file"]),
            hierarchy.blocks[a:b],
            schema.name,
            (int(p["rows"]), int(units["parts"][i]["rows"])),
            i == 0,
            part_name(i + 1) if tables else None,
            inv.gq_facilities[a:b] if tables else None,
            (block.name, block.length),
        )
        for i, (p, (a, b)) in enumerate(zip(persons["parts"], ranges, strict=True))
    ]
    if text[1] is not None and [p["file"] for p in text[0]["parts"]] != [
        p["file"] for p in text[1]["parts"]
    ]:
        raise InputError("mdf_units.txt/_parts.json lists other files than mdf_persons.txt's")
    if executor is None:
        from censusdp.execution import make_executor

        executor = make_executor(1, kind="inprocess")
    hists, pl94s, counts, table_problems, text_problems = [], [], [], [], []
    for problem, got, digests, cpu in executor.map(_count_mdf_part, jobs):
        _add_cost(hashed, cpu)
        if hashed is not None:
            hashed.update(digests)
        if problem:
            raise InputError(problem)
        hists.append(got[0])
        pl94s.append(got[1])
        counts.append(got[2])
        if got[3]:
            table_problems.append(got[3])
        if got[4]:
            text_problems.append(got[4])
    for name, index in indexes.items():  # the parts are the ones their index lists
        for p in index["parts"]:
            rel = f"{name}/{p['file']}"
            if hashed is not None and rel in hashed and hashed[rel] != p.get("sha256"):
                raise InputError(f"{rel}: its SHA-256 differs from its entry in _parts.json")
    pl94 = get_schema("pl94")
    if not jobs:
        empty = np.zeros((0, 3), dtype=np.int64)
        return sp.csr_matrix((0, schema.size)), sp.csr_matrix((0, pl94.size)), empty, [], []
    return (
        sp.csr_matrix(sp.vstack(hists, format="csr"), dtype=np.int64),
        sp.csr_matrix(sp.vstack(pl94s, format="csr"), dtype=np.int64),
        np.concatenate(counts),
        table_problems,
        text_problems,
    )


def _check_truth(
    run: Path, manifest: dict, inv: Invariants, hierarchy: Hierarchy, truth: Path
) -> tuple[bool, str]:
    """The release's invariants are the truth's, and its input was these very files."""
    try:
        cef = read_cef(truth)
    except CensusDPError as exc:
        return False, f"cannot read the truth: {exc}"
    # the bytes read are the bytes the release was made from: every file, none more (a
    # re-estimate records no input: its invariants alone are compared)
    made_from = manifest.get("input_sha256", cef.input_sha256)
    if not isinstance(made_from, dict):
        made_from = {}
    for name in sorted(set(made_from) | set(cef.input_sha256)):
        if name not in cef.input_sha256:
            return False, f"{truth / name}: the release was made from it, but the truth has none"
        if name not in made_from:
            return False, f"{truth / name} is not among the files the release was made from"
        if cef.input_sha256[name] != made_from[name]:
            return False, f"{truth / name} is not the file the release was made from"
    try:
        h = Hierarchy.from_blocks(cef.units["geocode"], hierarchy.geolevels)
    except CensusDPError as exc:
        return False, f"the truth's geography does not fit the release's: {exc}"
    if not np.array_equal(h.blocks, hierarchy.blocks):
        return False, "the truth's blocks differ from the release's"
    true_inv = compute_invariants(cef.persons, cef.units, h)
    same = np.array_equal(true_inv.housing_units, inv.housing_units) and np.array_equal(
        true_inv.gq_facilities, inv.gq_facilities
    )
    totals = hierarchy.aggregate(true_inv.population.reshape(-1, 1))[inv.total_level]
    released = hierarchy.aggregate(inv.population.reshape(-1, 1))[inv.total_level]
    same = same and np.array_equal(np.asarray(totals), np.asarray(released))
    return same, (
        "invariants equal the truth's" if same else "the release's invariants are not the truth's"
    )


def require_valid(
    run_dir: str | Path, *, what: str, mdf: bool = True, progress: Progress = None
) -> None:
    """Raise :class:`~censusdp.errors.ValidationError` unless ``run_dir`` validates.

    Args:
        what: the use refused, for the message (e.g. ``"re-estimation"``).
        progress: ``None`` (silent) or a callable taking lines: the steps checked.
    """
    report = validate_run(run_dir, mdf=mdf, progress=progress)
    if not report.ok:
        failures = report.failures()
        more = (
            f" (and {len(failures) - 1} more; see censusdp validate)" if len(failures) > 1 else ""
        )
        raise ValidationError(
            f"{run_dir} does not validate, so {what} refuses it: {failures[0]}{more}"
        )
