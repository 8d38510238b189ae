"""Output directories that cannot lose data: the guard every writing command goes through.

A command that writes a directory (``run``, ``generate``, ``protect``, ``attack``,
``risk``, ``sweep``) goes through :class:`Staging`, which

* refuses an output that is, contains, or lies inside one of the command's inputs;
* refuses a non-empty output unless ``overwrite`` is set, and even then replaces only a
  directory censusdp made (its ``manifest.json`` says so): never a directory of the
  user's;
* takes an exclusive lock per output (``.NAME.lock`` beside it, :func:`fcntl.flock`),
  so a second writer fails at once with the holder's PID instead of interleaving;
* builds the result in a staging directory ``.NAME.partial-PID`` beside the output and
  renames it into place only when complete (:meth:`Staging.commit`), removing it on any
  error or interrupt (:meth:`Staging.abort`; the CLI turns SIGTERM into an exception so
  this runs); staging directories left by a killed run (SIGKILL) are swept by the next
  writer of the same output, which holds the lock and so knows they are dead;
* never sweeps *resumable* work: a staging directory marked with :data:`RESUMABLE_MARKER`
  (a long run that finished some checkpointed steps, :mod:`censusdp.release.checkpoint`)
  is adopted by a writer started with ``resume=True`` (renamed to its own staging name,
  so nothing in it is rewritten), discarded only by ``overwrite``, and otherwise makes the
  writer refuse with one line saying how to continue or discard it.

Output files (``--json PATH``, ``--html PATH``) go through :func:`check_output_file`:
never an input, never an existing file without ``overwrite``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from censusdp.errors import ConfigError

__all__ = [
    "MANIFEST_MARKER",
    "RESUMABLE_MARKER",
    "Staging",
    "check_output_dir",
    "check_output_file",
    "is_censusdp_output",
    "prepare_output_dir",
    "write_output_manifest",
]

MANIFEST_MARKER = "censusdp"
"""Every manifest censusdp writes has ``"created_by": "censusdp"``."""

RESUMABLE_MARKER = ".resumable"
"""A file in a staging directory that says it holds finished, checkpointed work which an
interrupted run's ``--resume`` may continue (:meth:`Staging.mark_resumable`)."""


def _resolved(path: str | os.PathLike[str]) -> Path:
    return Path(path).expanduser().resolve()


def _overlap(out: Path, inputs: Iterable[str | os.PathLike[str]]) -> Path | None:
    for raw in inputs:
        if raw is None:
            continue
        inp = _resolved(raw)
        if out == inp or inp.is_relative_to(out) or out.is_relative_to(inp):
            return inp
    return None


def is_censusdp_output(directory: Path) -> bool:
    """True when ``directory/manifest.json`` says censusdp wrote the directory."""
    path = directory / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(manifest, dict) and (
        manifest.get("created_by") == MANIFEST_MARKER or "package_version" in manifest
    )


def write_output_manifest(out_dir: Path, command: str, files: Iterable[str]) -> None:
    """Mark a directory a command wrote as censusdp's (``manifest.json``), so that
    ``--overwrite`` may replace it later."""
    from censusdp.io.atomic import write_json
    from censusdp.version import __version__

    write_json(
        {
            "created_by": MANIFEST_MARKER,
            "command": command,
            "package_version": __version__,
            "files": sorted(files),
        },
        out_dir / "manifest.json",
    )


def check_output_dir(
    out_dir: str | os.PathLike[str],
    overwrite: bool,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Check that ``out_dir`` may be written; return it resolved.

    Raises:
        ConfigError: when ``out_dir`` is a file, overlaps an input, or is a non-empty
            directory that ``overwrite`` does not allow replacing (not set, or the
            directory is not a censusdp output).
    """
    out = _resolved(out_dir)
    clash = _overlap(out, inputs)
    if clash is not None:
        raise ConfigError(f"--out {out_dir} overlaps the input {clash}; write the output elsewhere")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out_dir} is a file, not a directory")
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise ConfigError(
                f"--out {out_dir} exists and is not empty; choose another --out or pass --overwrite"
            )
        if not is_censusdp_output(out):
            raise ConfigError(
                f"--out {out_dir} is not a censusdp output (no censusdp manifest.json); "
                "--overwrite replaces only directories censusdp made"
            )
    return out


def check_output_file(
    path: str | os.PathLike[str],
    overwrite: bool,
    inputs: Iterable[str | os.PathLike[str]] = (),
    *,
    option: str = "output",
) -> Path:
    """Check that the file ``path`` may be written (never an input or a file inside one;
    not an existing file without ``overwrite``); return it resolved.

    Raises:
        ConfigError: naming ``option`` and the path.
    """
    out = _resolved(path)
    clash = _overlap(out, inputs)
    # a new file beside the inputs harms nothing; replacing one of them, or an input itself,
    # would lose data
    if clash is not None and (out == clash or out.exists() or clash.is_relative_to(out)):
        raise ConfigError(f"{option} {path} overlaps the input {clash}; write it elsewhere")
    if out.is_dir():
        raise ConfigError(f"{option} {path} is a directory, not a file")
    if out.exists() and not overwrite:
        raise ConfigError(f"{option} {path} exists; choose another path or pass --overwrite")
    if not out.parent.is_dir():
        raise ConfigError(f"{option} {path}: directory {out.parent} does not exist")
    return out


def prepare_output_dir(
    out_dir: str | os.PathLike[str],
    overwrite: bool,
    inputs: Iterable[str | os.PathLike[str]] = (),
) -> Path:
    """Check ``out_dir`` (see :func:`check_output_dir`) and create it; return it.

    For commands that write a directory in place; a command that can be interrupted
    half-way should use :class:`Staging` instead.
    """
    out = check_output_dir(out_dir, overwrite, inputs)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"--out {out_dir}: cannot create the directory ({exc.strerror})"
        ) from None
    return out


class Staging:
    """An output directory built beside its destination, locked, and renamed into place.

    Args:
        out_dir: the destination.
        overwrite: allow replacing an existing censusdp output (and discard the
            resumable work of an interrupted run of it, unless ``resume``).
        inputs: the command's inputs; the output may not overlap any of them.
        resume: adopt the resumable work of an interrupted run of ``out_dir`` as this
            staging directory (:attr:`resumed` says whether there was any).

    Raises:
        ConfigError: for any refusal of :func:`check_output_dir`, an unwritable parent,
            an output that another process is writing (naming its PID), or resumable
            work of an interrupted run when neither ``resume`` nor ``overwrite`` is set.
    """

    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        overwrite: bool,
        inputs: Iterable[str | os.PathLike[str]] = (),
        *,
        resume: bool = False,
    ) -> None:
        self._lock_fd = -1
        self.out_dir = check_output_dir(out_dir, overwrite, inputs)
        self.overwrite = overwrite
        self.resumed = False
        self.resumed_from: str | None = None
        parent = self.out_dir.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"--out {out_dir}: cannot create {parent} ({exc.strerror})") from None
        self._lock_path = parent / f".{self.out_dir.name}.lock"
        self._lock_fd = self._lock(self._lock_path, out_dir)
        resumable = self._sweep_debris(keep_resumable=resume or not overwrite)
        if resumable and not resume:
            self._unlock()
            raise ConfigError(
                f"--out {out_dir}: an interrupted run left resumable work in {resumable[0]}; "
                "rerun the same command with --resume to continue it, or with --overwrite "
                "to discard it"
            )
        # checked again under the lock: another writer may have finished meanwhile
        check_output_dir(self.out_dir, overwrite, inputs)
        self.path = parent / f".{self.out_dir.name}.partial-{os.getpid()}"
        try:
            if resumable:
                # the newest interrupted run is continued; older ones are superseded
                for older in resumable[1:]:
                    shutil.rmtree(older, ignore_errors=True)
                os.replace(resumable[0], self.path)
                self.resumed, self.resumed_from = True, resumable[0].name
            else:
                self.path.mkdir()
        except OSError as exc:
            self._unlock()
            raise ConfigError(
                f"--out {out_dir}: cannot write in {parent} ({exc.strerror})"
            ) from None

    @staticmethod
    def _lock(lock_path: Path, shown: object) -> int:
        """Lock ``lock_path`` exclusively; the file is removed again on release, so a
        locker checks that the file it locked is still the one at the path."""
        while True:
            try:
                fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as exc:
                raise ConfigError(
                    f"--out {shown}: cannot write in {lock_path.parent} ({exc.strerror})"
                ) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise ConfigError(
                    f"--out {shown} is being written by another censusdp process "
                    f"(PID {holder}); wait for it or choose another --out"
                ) from None
            try:
                same = os.stat(lock_path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                return fd
            os.close(fd)  # the previous holder removed it as we locked: try again

    def _sweep_debris(self, *, keep_resumable: bool) -> list[Path]:
        """Remove staging directories of earlier, dead writers of this output, except
        (with ``keep_resumable``) those marked resumable, which are returned, newest first."""
        parent, name = self.out_dir.parent, self.out_dir.name
        kept: list[tuple[float, Path]] = []
        for prefix in (f".{name}.partial-", f".{name}.old-"):
            for stale in parent.glob(prefix + "*"):
                marker = stale / RESUMABLE_MARKER
                if keep_resumable and prefix.endswith("partial-") and marker.is_file():
                    kept.append((marker.stat().st_mtime, stale))
                    continue
                shutil.rmtree(stale, ignore_errors=True)
        return [p for _, p in sorted(kept, reverse=True)]

    def mark_resumable(self) -> None:
        """Say that this staging directory holds finished work an interrupted run may
        continue with ``resume=True``; the next writer will not sweep it."""
        (self.path / RESUMABLE_MARKER).write_text(f"{os.getpid()}\n", encoding="utf-8")

    def unmark_resumable(self) -> None:
        """Drop the mark (before the directory is committed as a finished output)."""
        with contextlib.suppress(FileNotFoundError):
            (self.path / RESUMABLE_MARKER).unlink()

    def _unlock(self) -> None:
        if self._lock_fd >= 0:
            with contextlib.suppress(OSError):
                os.unlink(self._lock_path)
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
            self._lock_fd = -1

    def commit(self) -> None:
        """Move the finished staging directory onto the destination and release the lock."""
        try:
            if self.out_dir.exists():
                old = self.out_dir.parent / f".{self.out_dir.name}.old-{os.getpid()}"
                os.replace(self.out_dir, old)
                os.replace(self.path, self.out_dir)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(self.path, self.out_dir)
        finally:
            self._unlock()

    def abort(self, *, keep_resumable: bool = False) -> None:
        """Remove the staging directory and release the lock; with ``keep_resumable``, a
        directory marked resumable is left for a later ``resume``."""
        if not (keep_resumable and (self.path / RESUMABLE_MARKER).is_file()):
            shutil.rmtree(self.path, ignore_errors=True)
        self._unlock()

    def __del__(self) -> None:  # a Staging dropped without commit or abort
        if getattr(self, "_lock_fd", -1) >= 0:
            self._unlock()
