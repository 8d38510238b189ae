"""The staging of an output directory: built beside its destination, locked, committed atomically.

Every directory a censusdp command writes goes through :class:`Staging` (most often
through :func:`staged_output`), after the checks of :mod:`censusdp.io.output_rules`:

* it is built in a staging directory ``.NAME.partial-PID`` beside the destination,
  under an exclusive lock ``.NAME.lock`` (opened without following links, never a file
  of the user's), with an owner record ``.NAME.owner-PID`` that names the output, the
  process and its start time;
* it is committed atomically: a new output appears with one
  ``renameat2(RENAME_NOREPLACE)`` (an output that appeared meanwhile is never
  replaced), an ``--overwrite`` is one ``renameat2(RENAME_EXCHANGE)`` after which the
  old directory is checked once more before it is removed (anything else at the path
  is swapped back). Where the kernel or file system lacks ``renameat2``, a journal
  ``.NAME.commit-PID`` records the two renames so that the next writer completes an
  interrupted commit;
* only staging it can prove is censusdp's and dead is swept: a name of exactly the
  staging form, an owner record naming this output, and a process that no longer
  runs (the lock is held meanwhile, so no live writer of the same output exists).
  Resumable work (:data:`RESUMABLE_MARKER`, :mod:`censusdp.release.checkpoint`) is
  adopted by ``resume``, discarded only by ``overwrite``, and otherwise refused with a
  line saying how to continue.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import re
import shutil
import socket
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from censusdp.errors import ConfigError, OutputError
from censusdp.io.atomic import link_or_copy
from censusdp.io.command_inputs import protected_inputs
from censusdp.io.output_rules import (
    MANIFEST_MARKER,
    check_dir_against,
    check_replaceable,
    foreign_entries,
    is_empty_dir,
    seal_output,
)

__all__ = [
    "RESUMABLE_MARKER",
    "Staging",
    "staged_output",
]

RESUMABLE_MARKER = ".resumable"
"""A file in a staging directory that says it holds finished, checkpointed work which an
interrupted run's ``--resume`` may continue (:meth:`Staging.mark_resumable`)."""

# -- atomic renames --------------------------------------------------------------------

_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _libc_renameat2() -> Any:
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_renameat2 = _libc_renameat2()


class _Unsupported(Exception):
    """``renameat2`` with this flag is not available here."""


def _rename2(src: Path, dst: Path, flag: int) -> None:
    """``renameat2(src, dst, flag)``; raises :class:`_Unsupported` where it cannot run
    and :class:`OSError` for its own failures (``EEXIST``: ``dst`` appeared)."""
    if _renameat2 is None:
        raise _Unsupported()
    if _renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flag) == 0:
        return
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        raise _Unsupported()
    raise OSError(err, os.strerror(err), str(dst))


# -- processes -------------------------------------------------------------------------


def _start_time(pid: int) -> str | None:
    """The start time of a process (clock ticks since boot, from /proc), or ``None``."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[-1].split()[19]


def _alive(pid: int, start: str | None) -> bool:
    """Whether the process ``pid`` that started at ``start`` still runs. This process
    itself counts as gone: it calls this holding the output's lock, so no staging of
    its own for that output is in use."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    now = _start_time(pid)
    return start is None or now is None or now == start


# -- the staging of a directory --------------------------------------------------------


class Staging:
    """An output directory built beside its destination, locked, and committed atomically.

    Use it as a context manager (commit on success, abort on an exception) or call
    :meth:`commit` / :meth:`abort` yourself.

    Args:
        out_dir: the destination.
        overwrite: allow replacing an existing censusdp output that holds only what its
            manifest lists (and discard the resumable work of an interrupted run of it,
            unless ``resume``).
        inputs: the command's inputs (besides those of
            :func:`~censusdp.io.command_inputs.guarded_command`); the
            output may not overlap any of them.
        resume: adopt the resumable work of an interrupted run of ``out_dir`` as this
            staging directory (:attr:`resumed` says whether there was any).
        carry: names of entries of the existing output to start from (hard links, so
            the old output is never written): a cache a command reuses with
            ``overwrite``.
        option: the option that named ``out_dir``, for messages.

    Raises:
        ConfigError: for any refusal of
            :func:`~censusdp.io.output_rules.check_output_dir`, an output that another
            process is writing (naming its PID), a lock path that is not censusdp's, or
            resumable work of an interrupted run when neither ``resume`` nor
            ``overwrite`` is set.
        OutputError: when the parent directory cannot be created or written.
    """

    def __init__(
        self,
        out_dir: str | os.PathLike[str],
        overwrite: bool,
        inputs: Iterable[str | os.PathLike[str] | None] = (),
        *,
        resume: bool = False,
        carry: Iterable[str] = (),
        option: str = "--out",
    ) -> None:
        self._lock_fd = -1
        self._option = option
        self._shown = out_dir
        self._inputs = protected_inputs(inputs)
        self.out_dir = check_dir_against(out_dir, overwrite, self._inputs, option)
        self.overwrite = overwrite
        self.resumed = False
        self.resumed_from: str | None = None
        parent, name = self.out_dir.parent, self.out_dir.name
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(
                f"{option} {out_dir}: cannot create {parent} ({exc.strerror})"
            ) from None
        self._lock_path = parent / f".{name}.lock"
        self._lock_fd = self._lock()
        try:
            self._recover_commits()
            resumable = self._sweep(keep_resumable=resume or not overwrite)
            if resumable and not resume:
                raise ConfigError(
                    f"{option} {out_dir}: an interrupted run left resumable work in "
                    f"{resumable[0].name}; rerun the same command with --resume to continue "
                    "it, or with --overwrite to discard it"
                )
            # checked again under the lock: another writer may have finished meanwhile
            check_dir_against(self.out_dir, overwrite, self._inputs, option)
            self.path = parent / f".{name}.partial-{os.getpid()}"
            self._owner = parent / f".{name}.owner-{os.getpid()}"
            if resumable:
                # the newest interrupted run is continued; older ones are superseded
                for older in resumable[1:]:
                    self._remove_staging(older)
                self._remove_owner_of(resumable[0])
                self._write_owner()
                os.replace(resumable[0], self.path)
                self.resumed, self.resumed_from = True, resumable[0].name
            else:
                self._write_owner()
                self.path.mkdir()
                self._carry(carry)
        except OSError as exc:
            self._unlock()
            raise OutputError(
                f"{option} {out_dir}: cannot write in {parent} ({exc.strerror})"
            ) from None
        except BaseException:
            self._unlock()
            raise

    # the lock

    def _lock(self) -> int:
        """Lock ``.NAME.lock`` exclusively, without following a link and without ever
        truncating a file that is not a censusdp lock; the file is removed again on
        release, so a locker checks that the file it locked is still the one at the path."""
        path, shown = self._lock_path, self._shown
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        while True:
            try:
                fd = os.open(path, flags, 0o644)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                    raise ConfigError(
                        f"{self._option} {shown}: {path} is not a censusdp lock file "
                        "(a link or a special file); remove it or choose another output"
                    ) from None
                raise OutputError(
                    f"{self._option} {shown}: cannot write in {path.parent} ({exc.strerror})"
                ) from None
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size > 32:
                os.close(fd)
                raise ConfigError(
                    f"{self._option} {shown}: {path} is not a censusdp lock file; remove "
                    "it or choose another output"
                )
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
                os.close(fd)
                raise ConfigError(
                    f"{self._option} {shown} is being written by another censusdp process "
                    f"(PID {holder}); wait for it or choose another {self._option}"
                ) from None
            try:
                now = os.lstat(path)
                same = (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)  # the previous holder removed it as we locked: try again
                continue
            content = os.pread(fd, 33, 0).strip()
            if content and not content.isdigit():
                os.close(fd)
                raise ConfigError(
                    f"{self._option} {shown}: {path} is not a censusdp lock file; remove "
                    "it or choose another output"
                )
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            return fd

    def _unlock(self) -> None:
        if self._lock_fd >= 0:
            with contextlib.suppress(OSError):
                st, now = os.fstat(self._lock_fd), os.lstat(self._lock_path)
                if (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino):
                    os.unlink(self._lock_path)
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                os.close(self._lock_fd)
            self._lock_fd = -1

    # ownership, debris and interrupted commits

    def _write_owner(self) -> None:
        record = {
            "created_by": MANIFEST_MARKER,
            "out": str(self.out_dir),
            "pid": os.getpid(),
            "start": _start_time(os.getpid()),
            "host": socket.gethostname(),
        }
        fd = os.open(self._owner, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(record, f)

    def _owner_of(self, staging: Path) -> dict[str, Any] | None:
        """The owner record of a staging directory of this output, if it proves one."""
        pid = staging.name.rsplit("-", 1)[-1]
        record_path = staging.parent / f".{self.out_dir.name}.owner-{pid}"
        try:
            if not stat.S_ISREG(os.lstat(record_path).st_mode):
                return None
            record = json.loads(record_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        ok = (
            isinstance(record, dict)
            and record.get("created_by") == MANIFEST_MARKER
            and record.get("out") == str(self.out_dir)
            and str(record.get("pid")) == pid
            and record.get("host") == socket.gethostname()
        )
        return record if ok else None

    def _remove_owner_of(self, staging: Path) -> None:
        pid = staging.name.rsplit("-", 1)[-1]
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staging.parent / f".{self.out_dir.name}.owner-{pid}")

    def _remove_staging(self, staging: Path) -> None:
        shutil.rmtree(staging, ignore_errors=True)
        self._remove_owner_of(staging)

    def _sweep(self, *, keep_resumable: bool) -> list[Path]:
        """Remove the staging directories of earlier, dead writers of this output, except
        (with ``keep_resumable``) those marked resumable, which are returned, newest
        first. Only a directory of exactly the staging name whose owner record names
        this output and a process that no longer runs is touched."""
        parent, name = self.out_dir.parent, self.out_dir.name
        pattern = re.compile(rf"\.{re.escape(name)}\.(partial|owner)-(\d+)")
        kept: list[tuple[float, Path]] = []
        for entry in os.scandir(parent):
            m = pattern.fullmatch(entry.name)
            if m is None:
                continue
            if m.group(1) == "owner":
                # a record whose directory is gone (killed before or after it existed)
                staging = parent / f".{name}.partial-{m.group(2)}"
                record = self._owner_of(staging)
                if record is not None and not staging.exists():
                    if not _alive(int(record["pid"]), record.get("start")):
                        self._remove_owner_of(staging)
                continue
            if not entry.is_dir(follow_symlinks=False):
                continue
            staging = Path(entry.path)
            record = self._owner_of(staging)
            if record is None or _alive(int(record["pid"]), record.get("start")):
                continue
            marker = staging / RESUMABLE_MARKER
            if keep_resumable and marker.is_file():
                kept.append((marker.stat().st_mtime, staging))
                continue
            self._remove_staging(staging)
        return [p for _, p in sorted(kept, reverse=True)]

    def _journal_path(self, pid: int) -> Path:
        return self.out_dir.parent / f".{self.out_dir.name}.commit-{pid}"

    def _recover_commits(self) -> None:
        """Finish the commit of a writer killed between the two renames of the fallback
        (no ``renameat2``): its journal names the finished output and the old one."""
        parent, name = self.out_dir.parent, self.out_dir.name
        pattern = re.compile(rf"\.{re.escape(name)}\.commit-(\d+)")
        for entry in os.scandir(parent):
            if pattern.fullmatch(entry.name) is None or not entry.is_file(follow_symlinks=False):
                continue
            try:
                journal = json.loads(Path(entry.path).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not isinstance(journal, dict) or journal.get("out") != str(self.out_dir):
                continue
            if _alive(int(journal.get("pid", -1)), journal.get("start")):
                continue
            new, old = Path(journal["new"]), Path(journal["old"])
            if not self.out_dir.exists() and new.is_dir():
                os.rename(new, self.out_dir)
            if old.is_dir() and old.parent == parent and old.name.startswith(f".{name}.old-"):
                shutil.rmtree(old, ignore_errors=True)
            os.unlink(entry.path)

    def _carry(self, names: Iterable[str]) -> None:
        names = list(names)
        if not names or not self.out_dir.is_dir() or foreign_entries(self.out_dir) is None:
            return
        for name in names:
            src = self.out_dir / name
            if src.is_dir() and not src.is_symlink():
                shutil.copytree(src, self.path / name, copy_function=link_or_copy, symlinks=True)

    # resumable work

    def mark_resumable(self) -> None:
        """Say that this staging directory holds finished work an interrupted run may
        continue with ``resume=True``; the next writer will not sweep it."""
        (self.path / RESUMABLE_MARKER).write_text(f"{os.getpid()}\n", encoding="utf-8")

    def unmark_resumable(self) -> None:
        """Drop the mark (before the directory is committed as a finished output)."""
        with contextlib.suppress(FileNotFoundError):
            (self.path / RESUMABLE_MARKER).unlink()

    # the commit

    def commit(self) -> None:
        """Move the finished staging directory onto the destination and release the lock.

        Raises:
            ConfigError: when something appeared at the destination during the run
                that may not be replaced (the finished output is then removed).
        """
        try:
            self._commit()
        except BaseException:
            self.abort(keep_resumable=True)
            raise
        self._remove_owner_of(self.path)
        self._unlock()

    def _commit(self) -> None:
        out, shown, option = self.out_dir, self._shown, self._option
        try:
            _rename2(self.path, out, _RENAME_NOREPLACE)
            return
        except _Unsupported:
            if not out.exists() and not out.is_symlink():
                os.rename(self.path, out)  # the lock keeps other censusdp writers out
                return
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
        # something is at the destination: replace it only if the rules allow it now
        if out.is_symlink() or not out.is_dir():
            raise ConfigError(
                f"{option} {shown} appeared during the run and is not a directory; "
                "nothing was replaced"
            )
        if not is_empty_dir(out):
            if not self.overwrite:
                raise ConfigError(
                    f"{option} {shown} appeared during the run; nothing was replaced "
                    "(rerun with another --out, or with --overwrite)"
                )
            check_replaceable(out, shown, option)
        try:
            _rename2(self.path, out, _RENAME_EXCHANGE)
        except _Unsupported:
            self._commit_by_journal()
            return
        # the old directory is now at self.path: check once more what was replaced
        old = self.path
        if not is_empty_dir(old) and (not self.overwrite or foreign_entries(old) != []):
            _rename2(old, out, _RENAME_EXCHANGE)  # swap back: leave theirs in place
            raise ConfigError(f"{option} {shown} changed during the run; nothing was replaced")
        shutil.rmtree(old)

    def _commit_by_journal(self) -> None:
        """Two renames where ``renameat2`` is missing, recorded so that the next writer
        completes them if this process dies in between."""
        old = self.out_dir.parent / f".{self.out_dir.name}.old-{os.getpid()}"
        journal = self._journal_path(os.getpid())
        record = {
            "out": str(self.out_dir),
            "new": str(self.path),
            "old": str(old),
            "pid": os.getpid(),
            "start": _start_time(os.getpid()),
        }
        journal.write_text(json.dumps(record), encoding="utf-8")
        os.rename(self.out_dir, old)
        os.rename(self.path, self.out_dir)
        shutil.rmtree(old, ignore_errors=True)
        journal.unlink()

    def abort(self, *, keep_resumable: bool = False) -> None:
        """Remove the staging directory and release the lock; with ``keep_resumable``, a
        directory marked resumable is left (with its owner record) for a later
        ``resume``."""
        path = getattr(self, "path", None)
        if path is not None and not (keep_resumable and (path / RESUMABLE_MARKER).is_file()):
            shutil.rmtree(path, ignore_errors=True)
            self._remove_owner_of(path)
        self._unlock()

    def __enter__(self) -> Staging:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort(keep_resumable=issubclass(exc_type, KeyboardInterrupt))

    def __del__(self) -> None:  # a Staging dropped without commit or abort
        if getattr(self, "_lock_fd", -1) >= 0:
            self._unlock()


@contextlib.contextmanager
def staged_output(
    out_dir: str | os.PathLike[str],
    overwrite: bool,
    inputs: Iterable[str | os.PathLike[str] | None] = (),
    *,
    command: str,
    resume: bool = False,
    carry: Iterable[str] = (),
    resumable: bool = False,
    option: str = "--out",
) -> Iterator[Staging]:
    """A :class:`Staging` for a command that writes a directory: the body writes into
    ``staging.path``; on success the manifest is sealed (``created_by``, every file
    listed) and the directory committed; on an error or interrupt it is removed.

    ``resumable``: the command keeps a cache of finished work in its output; the
    staging directory is marked resumable from the start, kept on any error or
    interrupt, and adopted by the next writer with ``resume``."""
    staging = Staging(out_dir, overwrite, inputs, resume=resume, carry=carry, option=option)
    if resumable:
        staging.mark_resumable()
    try:
        yield staging
        staging.unmark_resumable()
        seal_output(staging.path, command)
    except BaseException as exc:
        staging.abort(keep_resumable=resumable or isinstance(exc, KeyboardInterrupt))
        raise
    staging.commit()
