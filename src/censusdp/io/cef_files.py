"""The files of a CEF directory: which ones hold its rows, and reading the bytes hashed.

Every reader of the confidential input (the whole-file reader
:func:`censusdp.io.cef.read_cef` of ``evaluate``, ``validate --input``, ``protect``,
``risk``, ``attack``, ... and the part reader :mod:`censusdp.io.cef_stream` of ``run``)
takes its files from :func:`input_files` and opens them only through :func:`open_input`,
so every command reads the same rows from the same directory, and the SHA-256 a release
records is of the bytes its reader parsed.

The rule (docs/file-formats.md): ``persons.parquet`` and ``units.parquet`` are each a
regular file (a symbolic link to one is followed), or a directory holding only

* part files: regular ``*.parquet`` files whose names do not start with ``.`` or ``_``,
  read in name order (the rows of the directory are theirs, in that order);
* what Spark and Hadoop write beside them, which holds no rows and is not read:
  ``_SUCCESS``, ``_metadata``, ``_common_metadata``, and the checksum ``.NAME.crc`` of
  one of those or of a part file ``NAME`` of the directory.

Anything else in the directory (a subdirectory such as a hive ``key=value/`` folder, a
symbolic link, a file with another suffix, another hidden file, a FIFO) is refused,
naming it: rows the readers would disagree about, or that no checksum covers, are never
read. A file is checked to be a regular file on the open descriptor before a byte is
read (a FIFO or ``/dev/zero`` is refused, never waited on).

The part reader hashes every file first (:func:`hash_input`, whose digests enter the
run's fingerprint before the run starts) and then reads row groups in tasks; each task
opens the file again and checks it is the file hashed: same inode, size, modification
and change times (:class:`Stamp`, on the descriptor, when opened and after reading; the
change time cannot be set back by a user; on another host, size and modification time). A file replaced or rewritten between the two
is refused (:class:`InputChanged`), never read under the other file's hash. The
whole-file reader reads each file's bytes once, hashes them and parses that buffer
(:func:`read_input`).
"""

from __future__ import annotations

import hashlib
import os
import socket
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pyarrow.parquet as pq

from censusdp.errors import InputError

__all__ = [
    "INPUT_NAMES",
    "NOT_DATA",
    "CEFInput",
    "InputChanged",
    "Stamp",
    "check_unchanged",
    "hash_input",
    "input_files",
    "open_input",
    "parquet_input",
    "read_input",
    "sampled_fraction",
]

INPUT_NAMES = ("persons.parquet", "units.parquet")
"""The two inputs of a CEF directory, each a file or a directory of part files."""

NOT_DATA = frozenset({"_SUCCESS", "_metadata", "_common_metadata"})
"""Files Spark writes beside the parts (a marker, Parquet summary footers): never read."""

_CHUNK = 1 << 20


class InputChanged(InputError):
    """An input file is not the file that was hashed (replaced or rewritten since)."""


@dataclass(frozen=True)
class Stamp:
    """What identifies a file's bytes: inode, size, modification and change time (ns),
    and the host that took it.

    On another host (a Spark executor reading a shared file system, whose inode numbers
    and change times may be its own), size and modification time are compared.
    """

    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int
    host: str = ""

    @classmethod
    def of(cls, st: os.stat_result) -> Stamp:
        """The stamp of a ``stat`` result, taken on this host."""
        return cls(st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, socket.gethostname())

    def matches(self, st: os.stat_result) -> bool:
        """Whether ``st`` (a file's status now, on this host) is the stamped file's."""
        now = Stamp.of(st)
        if now.host != self.host:
            return (now.size, now.mtime_ns) == (self.size, self.mtime_ns)
        return now == self


def _part_files(path: Path, problems: list[str]) -> list[Path]:
    """The part files of the directory ``path`` (the module's rule), problems named."""
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError as exc:
        problems.append(f"{path}: cannot list the directory ({exc.strerror})")
        return []
    rule = "only regular *.parquet files directly inside are read; see docs/file-formats.md"
    files, others, found = [], [], []
    for e in entries:
        where = path / e.name
        if e.is_symlink():
            found.append(f"{where}: a symbolic link in a directory of parts ({rule})")
        elif e.is_dir(follow_symlinks=False):
            found.append(f"{where}: a subdirectory in a directory of parts ({rule})")
        elif not e.is_file(follow_symlinks=False):
            found.append(f"{where}: not a regular file (a FIFO, socket or device)")
        elif e.name.endswith(".parquet") and not e.name.startswith((".", "_")):
            files.append(where)
        else:
            others.append(e.name)
    known = NOT_DATA | {f.name for f in files}
    for name in others:
        if name in NOT_DATA:
            continue
        if name.startswith(".") and name.endswith(".crc"):
            if name[1:-4] not in known:
                found.append(f"{path / name}: the checksum of {name[1:-4]!r}, which is not "
                             "in the directory (a part file missing?)")  # fmt: skip
            continue
        kind = "a hidden file" if name.startswith((".", "_")) else "not a *.parquet file"
        found.append(f"{path / name}: {kind} in a directory of parts ({rule})")
    if not files:
        found.insert(0, f"{path}: no part files (*.parquet) in the directory")
    problems.extend(found)
    return files


def input_files(directory: str | Path) -> tuple[list[list[Path]], list[str]]:
    """The persons files and the units files of a CEF directory (each a file, or the
    part files of a directory, in name order), and the problems found (a missing file, a
    directory without parts, anything in it the rule refuses, a path that is neither a
    regular file nor a directory)."""
    directory = Path(directory)
    found: list[list[Path]] = []
    problems: list[str] = []
    for name in INPUT_NAMES:
        path = directory / name
        files: list[Path] = []
        try:
            st = os.stat(path)
        except FileNotFoundError:
            problems.append(f"{path}: missing file")
        except OSError as exc:
            problems.append(f"{path}: cannot be read ({exc.strerror})")
        else:
            if stat.S_ISDIR(st.st_mode):
                files = _part_files(path, problems)
            elif stat.S_ISREG(st.st_mode):
                files = [path]
            else:
                problems.append(
                    f"{path}: not a regular file or a directory of parts (a FIFO, socket or device)"
                )
        found.append(files)
    return found, problems


def open_input(path: str | Path, stamp: Stamp | None = None) -> BinaryIO:
    """Open an input file for reading: a regular file (checked on the descriptor, so a
    FIFO or a device is refused without blocking), and, given ``stamp``, the very file
    that was stamped.

    Raises:
        InputError: naming the file when it is missing, unreadable or not a regular
            file; :class:`InputChanged` when it is not the stamped file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{path}: missing file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{path}: not a regular file (a FIFO, socket, device or directory)")
        if stamp is not None and not stamp.matches(st):
            raise _changed(path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _changed(path: str | Path) -> InputChanged:
    return InputChanged(
        f"{path}: changed while the input was read (replaced or rewritten after its "
        "SHA-256 was taken); rerun on an input that is not being written"
    )


def check_unchanged(f: BinaryIO, path: str | Path, stamp: Stamp) -> None:
    """Raise :class:`InputChanged` unless the open file ``f`` still has ``stamp``."""
    if not stamp.matches(os.fstat(f.fileno())):
        raise _changed(path)


@contextmanager
def parquet_input(path: str | Path, stamp: Stamp | None) -> Iterator[pq.ParquetFile]:
    """A Parquet file of the input, read from a descriptor :func:`open_input` checked,
    checked again (``stamp``) once the caller is done reading."""
    f = open_input(path, stamp)
    try:
        yield pq.ParquetFile(f)
        if stamp is not None:
            check_unchanged(f, path, stamp)
    finally:
        f.close()


def read_input(path: str | Path) -> tuple[bytes, str]:
    """The bytes of an input file and their SHA-256 (hex): what a reader parses is what
    was hashed.

    Raises:
        InputError: as :func:`open_input`, or :class:`InputChanged` if the file was
            written while being read.
    """
    with open_input(path) as f:
        before = Stamp.of(os.fstat(f.fileno()))
        data = f.read()
        check_unchanged(f, path, before)
    return data, hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, eq=False)
class CEFInput:
    """The files of a CEF directory, hashed, for a reader that reads them later.

    Attributes:
        directory: the CEF directory.
        files: per input (persons, units), its files (:func:`input_files`).
        stamps: each file's :class:`Stamp` when it was hashed, by path (``str``).
        sha256: each file's SHA-256, by path relative to ``directory``
            (``persons.parquet``, or ``persons.parquet/part-00000.parquet``, ...).
    """

    directory: Path
    files: tuple[tuple[Path, ...], tuple[Path, ...]]
    stamps: dict[str, Stamp]
    sha256: dict[str, str]


def hash_input(directory: str | Path) -> CEFInput:
    """List (:func:`input_files`), stamp and hash every file of a CEF directory.

    Raises:
        InputError: ``invalid input in DIR``, naming every file the rule refuses (or
            one that changed while it was hashed).
    """
    directory = Path(directory)
    files, problems = input_files(directory)
    if problems:
        raise InputError(f"invalid input in {directory}", problems)
    stamps: dict[str, Stamp] = {}
    sha256: dict[str, str] = {}
    for p in (p for fs in files for p in fs):
        try:
            sha256[p.relative_to(directory).as_posix()], stamps[str(p)] = _hash_file(p)
        except InputError as exc:
            raise InputError(f"invalid input in {directory}", [str(exc)]) from None
    return CEFInput(directory, (tuple(files[0]), tuple(files[1])), stamps, sha256)


def _hash_file(path: Path) -> tuple[str, Stamp]:
    """SHA-256 of a file and its stamp, the file unchanged while it was read."""
    h = hashlib.sha256()
    with open_input(path) as f:
        before = Stamp.of(os.fstat(f.fileno()))
        for block in iter(lambda: f.read(_CHUNK), b""):
            h.update(block)
        check_unchanged(f, path, before)
    return h.hexdigest(), before


def sampled_fraction(cef_dir: str | os.PathLike[str]) -> float | None:
    """The fraction of its state's tracts a synthetic CEF keeps (``censusdp generate
    --scale F``, F < 1, a random sample of tracts), from its ``manifest.json``; ``None``
    for a whole state or an input censusdp did not generate (nothing else is read)."""
    import json

    from censusdp.io.output_rules import MANIFEST_FILE

    try:
        with open(Path(cef_dir) / MANIFEST_FILE, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("kind") != "censusdp synthetic CEF":
        return None
    scale = manifest.get("scale")
    if isinstance(scale, int | float) and not isinstance(scale, bool) and 0 < scale < 1:
        return float(scale)
    return None
