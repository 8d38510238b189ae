"""Checkpoints of a long run, and resuming an interrupted one without measuring again.

A run's staging directory (:class:`censusdp.io.staging.Staging`) keeps, as the run goes,
every finished step as a checksummed artefact recorded in ``checkpoint/journal.json``:

1. ``measure/persons``, ``measure/units``: the finished noisy measurement directories
   (``noisy_measurements.parquet/``, ``noisy_measurements_units.parquet/``), recorded by
   their part index ``_parts.json``; before that, every part file a measurement task
   finished is recorded as it arrives, one line each in ``checkpoint/parts.jsonl``
   (appended and flushed: no journal rewrite per part), with the SHA-256 the task
   computed after flushing it;
2. ``estimate/persons/L``, ``estimate/units/L``: the integer histogram of each estimated
   geolevel ``L`` (``checkpoint/estimate-persons-L.npz``) with its level summary and
   failsafe records.

Once the first step is recorded the directory is marked resumable, and the output guard
never sweeps it. ``censusdp run ... --resume`` adopts it (renamed, not copied: nothing in
it is rewritten), checks that the input files' SHA-256, both budgets, the randomness
(the seed's SHA-256, or "secure"), the options that change the release and the package
version are those the interrupted run recorded (:func:`run_fingerprint`), checks every
recorded artefact against its checksum, and continues after the last finished step:

* a finished measurement directory, and every recorded part of an unfinished one, is
  used as it is: no geounit a recorded part holds is ever measured again, so no new
  noise is drawn for it, also in a secure-randomness run (whose key is not kept
  anywhere: it is not needed for what is already written; the parts still missing are
  measured with a new key, their units' earlier noise having never been recorded);
* estimated levels are loaded, and estimation continues with the next level;
* everything after estimation (invariants, MDF, tables, validation) is recomputed: it is
  deterministic and takes a small part of a run.

A seeded run resumed this way writes the same bytes as an uninterrupted one. The
``checkpoint/`` directory and the marker are removed before the run is committed, so a
finished run directory holds only the release files.

Noise drawn for a step that had not finished (a part file that was still being written,
or written but not yet recorded) was never recorded nor released; the resumed run
measures that part afresh.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from censusdp.errors import ResumeError
from censusdp.io.atomic import atomic_path, fsync_file, sha256_of, strict_json, write_json
from censusdp.io.layout import CHECKPOINT_DIR, MANIFEST_FILE
from censusdp.io.staging import RESUMABLE_MARKER, Staging
from censusdp.privacy.randomness import GENERATOR
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.progress import Progress, say
from censusdp.release.options import ReleaseOptions
from censusdp.version import __version__

__all__ = [
    "JOURNAL",
    "PARTS_LOG",
    "Checkpoint",
    "LevelCheckpoint",
    "run_fingerprint",
]

JOURNAL = f"{CHECKPOINT_DIR}/journal.json"
PARTS_LOG = f"{CHECKPOINT_DIR}/parts.jsonl"
_FORMAT = 1


def _h1_fingerprint(release: Path) -> dict[str, Any]:
    """The ``--h1-from`` release's path and its manifest's SHA-256 (``None`` without
    one: the run then stops reading it, in one line)."""
    manifest = release / MANIFEST_FILE
    digest = sha256_of(manifest) if manifest.is_file() else None
    return {"h1_from": str(release), "h1_manifest_sha256": digest}


def run_fingerprint(
    input_sha256: Mapping[str, str],
    budget: ReleaseBudget,
    options: ReleaseOptions,
    spine: str,
) -> dict[str, Any]:
    """What a resumed run must share with the interrupted one: everything the release
    depends on (the options as chosen, the spine as resolved; not the executor, workers
    or Spark master, which do not change it)."""
    seed = options.seed
    seed_hash = None if seed is None else hashlib.sha256(str(int(seed)).encode()).hexdigest()
    # the H1 a DHC household run is held to, when it has one (absent otherwise, so the
    # fingerprints of runs without one are those of earlier versions): where it is and
    # which release it is (its manifest hashes its unit MDF), so a release replaced at
    # that path between the interruption and the resume is not taken for the same one
    h1 = {} if options.h1_from is None else _h1_fingerprint(Path(options.h1_from).resolve())
    return strict_json(
        {
            **h1,
            "package_version": __version__,
            "input_sha256": dict(input_sha256),
            "budget": budget.persons.to_dict(),
            "units_budget": None if budget.units is None else budget.units.to_dict(),
            "randomness": "secure" if seed is None else "seeded",
            "generator": GENERATOR,
            "seed_sha256": seed_hash,
            "postprocess": options.postprocess,
            "units": options.unit_consistency,
            "method": options.method,
            "spine": str(spine),
            "estimator": options.estimator,
            "max_children": options.max_children,
            "fidelity": options.fidelity,
            # one pass (absent for production's orderings, as in earlier versions)
            **({} if options.passes == "production" else {"passes": options.passes}),
        }
    )


_WHAT = {
    "package_version": "censusdp version",
    "input_sha256": "input files",
    "budget": "person budget",
    "units_budget": "housing-unit budget",
    "randomness": "randomness (seeded or secure)",
    "generator": "noise generator (an older version's streams)",
    "seed_sha256": "seed",
    "postprocess": "--postprocess",
    "units": "--units",
    "method": "--method",
    "spine": "--spine",
    "estimator": "--estimator",
    "max_children": "--max-children",
    "fidelity": "--fidelity",
    "passes": "--passes",
}


class LevelCheckpoint:
    """The estimated levels of one run (``persons`` or ``units``), for the TopDown driver.

    :func:`censusdp.release.topdown.driver.run_topdown` calls :meth:`load` before a level
    (``None``: estimate it) and :meth:`save` after it.
    """

    def __init__(self, checkpoint: Checkpoint, run: str) -> None:
        self._ck = checkpoint
        self.run = run

    def _stage(self, level: int) -> str:
        return f"estimate/{self.run}/{level}"

    def load(self, level: int) -> tuple[sp.csr_matrix, dict, list[dict]] | None:
        """The level's histogram, summary and failsafe records, if it was estimated."""
        rec = self._ck.stage(self._stage(level))
        if rec is None:
            return None
        with np.load(self._ck.root / rec["file"]) as z:
            hist = sp.csr_matrix(
                (z["data"], z["indices"], z["indptr"]), shape=tuple(int(x) for x in z["shape"])
            )
        self._ck.reused.append(self._stage(level))
        return hist, {**rec["summary"], "resumed": True}, list(rec["failsafe"])

    def save(self, level: int, hist: sp.csr_matrix, summary: dict, failsafe: list[dict]) -> None:
        """Record a finished level."""
        t = time.perf_counter()
        name = f"{CHECKPOINT_DIR}/estimate-{self.run}-{level}.npz"
        path = self._ck.root / name
        with atomic_path(path, suffix=".npz") as tmp, open(tmp, "wb") as f:
            np.savez(
                f,
                data=hist.data,
                indices=hist.indices,
                indptr=hist.indptr,
                shape=np.asarray(hist.shape, dtype=np.int64),
            )
            f.flush()
            os.fsync(f.fileno())
        with self._ck._lock:
            self._ck.seconds += time.perf_counter() - t
        self._ck.record(
            self._stage(level),
            {"file": name, "summary": summary, "failsafe": failsafe},
        )


class Checkpoint:
    """The journal of a run's finished steps in its staging directory.

    Use :meth:`open`. Steps are recorded with :meth:`record` (which checksums the file,
    rewrites the journal atomically and marks the directory resumable) and looked up with
    :meth:`stage`; a resume checks every recorded file against its checksum when it
    opens the journal, before any step is used.
    """

    def __init__(self, staging: Staging, journal: dict[str, Any], progress: Progress) -> None:
        self.staging = staging
        self.root = staging.path
        self.journal = journal
        self.progress = progress
        self.reused: list[str] = []
        self.seconds = 0.0
        """Time spent checksumming, flushing and writing checkpoints (for the timings)."""
        self._parts: dict[str, dict[str, dict[str, Any]]] = {}
        """Per run, the recorded part files (``{file: record}``, ``file`` relative to the run)."""
        self.parts_reused: dict[str, int] = {}
        self._lock = threading.Lock()
        """Held while a step is recorded: two runs estimated at once (a unit run beside
        the persons') record their levels from two threads."""

    @classmethod
    def open(cls, staging: Staging, fingerprint: dict[str, Any], progress: Progress) -> Checkpoint:
        """A fresh journal, or (when ``staging`` adopted an interrupted run) its journal,
        checked against ``fingerprint`` and its files' checksums.

        Raises:
            ResumeError: when the interrupted run differs (naming the first difference)
                or a recorded file is missing or fails its checksum.
        """
        if not staging.resumed:
            return cls(staging, cls._fresh(fingerprint), progress)
        where = staging.resumed_from
        path = staging.path / JOURNAL
        try:
            journal = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ResumeError(
                f"--resume: the interrupted run in {where} has no readable {JOURNAL} ({exc}); "
                "rerun with --overwrite to discard it"
            ) from None
        if not isinstance(journal, dict) or journal.get("format") != _FORMAT:
            raise ResumeError(f"--resume: {where}/{JOURNAL} is not a checkpoint journal")
        had = journal.get("fingerprint", {})
        for key, what in _WHAT.items():
            if had.get(key) != fingerprint.get(key):
                raise ResumeError(
                    f"--resume: the interrupted run in {where} differs from this command in "
                    f"its {what}; rerun it with the same input and options, or with "
                    "--overwrite to discard it"
                )
        ck = cls(staging, journal, progress)
        ck._load_parts(where)
        for name, rec in journal.get("stages", {}).items():
            file = staging.path / rec["file"]
            if not file.is_file() or sha256_of(file) != rec["sha256"]:
                raise ResumeError(
                    f"--resume: {where}/{rec['file']} (step {name}) is missing or fails its "
                    "checksum; the interrupted run cannot be continued (--overwrite discards it)"
                )
        ck._drop_unrecorded()
        finished = ", ".join(journal.get("stages", {})) or "nothing"
        say(progress, f"resuming the interrupted run {where}: finished {finished}")
        return ck

    def _load_parts(self, where: str | None) -> None:
        """Read the part log of an interrupted run, checking every part's checksum (a
        line cut short by the interruption is the part it was recording: not recorded)."""
        path = self.root / PARTS_LOG
        if not path.is_file():
            return
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            file = self.root / rec["path"]
            if not file.is_file() or sha256_of(file) != rec["sha256"]:
                raise ResumeError(
                    f"--resume: {where}/{rec['path']} (a recorded measurement part) is missing "
                    "or fails its checksum; the interrupted run cannot be continued "
                    "(--overwrite discards it)"
                )
            self._parts.setdefault(rec["run"], {})[rec["path"]] = rec

    def _drop_unrecorded(self) -> None:
        """Remove what the interrupted run had not finished (a half-written measurement
        file, temporary files): only recorded steps are continued from."""
        keep = {JOURNAL, RESUMABLE_MARKER, PARTS_LOG}
        keep |= {r["file"] for r in self.journal["stages"].values()}
        keep |= {f for parts in self._parts.values() for f in parts}
        for p in sorted(self.root.rglob("*"), reverse=True):
            rel = str(p.relative_to(self.root))
            if p.is_dir():
                if p.name != CHECKPOINT_DIR and not any(p.iterdir()):
                    p.rmdir()
            elif rel not in keep:
                p.unlink()

    @staticmethod
    def _fresh(fingerprint: dict[str, Any]) -> dict[str, Any]:
        return {
            "format": _FORMAT,
            "created_by": "censusdp",
            "fingerprint": fingerprint,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "stages": {},
        }

    def stage(self, name: str) -> dict[str, Any] | None:
        """The record of a finished step, or ``None``."""
        return self.journal["stages"].get(name)

    def record(self, name: str, rec: dict[str, Any]) -> None:
        """Record a finished step whose file is ``rec["file"]`` (relative to the run)."""
        t = time.perf_counter()
        file = self.root / rec["file"]
        fsync_file(file)
        digest = sha256_of(file)
        with self._lock:
            self.journal["stages"][name] = {**rec, "sha256": digest}
            write_json(self.journal, self.root / JOURNAL)
            fsync_file(self.root / JOURNAL)
            self.staging.mark_resumable()
            self.seconds += time.perf_counter() - t

    def measured(self, run: str) -> dict[str, Any] | None:
        """The record of ``run``'s finished measurement file (rows by level), if any."""
        rec = self.stage(f"measure/{run}")
        if rec is not None:
            self.reused.append(f"measure/{run}")
            say(self.progress, f"reusing {rec['file']} ({rec['rows']:,} rows): not measured again")
        return rec

    def finish_measurement(self, run: str, file: str, rows: int, by_level: dict) -> None:
        """Record ``run``'s finished measurements, ``file`` being its part index."""
        self.record(f"measure/{run}", {"file": file, "rows": rows, "by_level": by_level})

    def parts(self, run: str) -> dict[str, dict[str, Any]]:
        """``run``'s recorded part files, ``{path relative to the run: record}``; counted as
        reused (the caller measures none of them again)."""
        done = dict(self._parts.get(run, {}))
        if done:
            self.parts_reused[run] = len(done)
            say(self.progress, f"reusing {len(done):,} measured parts ({run}): not measured again")
        return done

    def finish_part(self, run: str, rec: dict[str, Any]) -> None:
        """Record one part file a task finished (``rec["path"]`` relative to the run,
        ``rec["sha256"]`` computed by the task after flushing it): one appended line."""
        t = time.perf_counter()
        line = json.dumps(strict_json({"run": run, **rec}), allow_nan=False)
        path = self.root / PARTS_LOG
        path.parent.mkdir(exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())
        self._parts.setdefault(run, {})[rec["path"]] = rec
        if not (self.root / RESUMABLE_MARKER).is_file():
            if not (self.root / JOURNAL).is_file():  # the fingerprint a resume checks
                write_json(self.journal, self.root / JOURNAL)
                fsync_file(self.root / JOURNAL)
            self.staging.mark_resumable()
        self.seconds += time.perf_counter() - t

    def levels(self, run: str) -> LevelCheckpoint:
        """The estimated-level checkpoints of ``run`` for the TopDown driver."""
        return LevelCheckpoint(self, run)

    def summary(self) -> dict[str, Any] | None:
        """For the manifest: what a resumed run reused (``None`` for a fresh run)."""
        if not self.staging.resumed:
            return None
        out: dict[str, Any] = {"from": self.staging.resumed_from, "reused": list(self.reused)}
        if self.parts_reused:
            out["parts_reused"] = dict(self.parts_reused)
        return out

    def discard(self) -> None:
        """Remove the checkpoints before the run is committed as a finished output."""
        shutil.rmtree(self.root / CHECKPOINT_DIR, ignore_errors=True)
        self.staging.unmark_resumable()
