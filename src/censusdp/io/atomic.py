"""Atomic file output: write to a temporary file in the same directory, then rename.

A reader never sees a half-written file, and a failed run leaves nothing behind
under the final name.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.io.command_inputs import refuse_input_write

__all__ = [
    "HashingSink",
    "StreamingWriter",
    "atomic_path",
    "fsync_file",
    "link_or_copy",
    "sha256_of",
    "strict_json",
    "write_json",
    "write_parquet",
    "write_text",
]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success.

    On an exception the temporary file is removed and ``path`` is left untouched. A
    path inside an input of the running command is refused
    (:func:`censusdp.io.command_inputs.refuse_input_write`).
    """
    final = Path(path)
    refuse_input_write(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=suffix + ".tmp", dir=final.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the usual file mode
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


def sha256_of(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes, hex."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class HashingSink:
    """A binary file written through: every ``write`` also goes into a SHA-256.

    For a writer that makes a file front to back and needs its hash: the bytes are
    hashed as they are handed to the file, instead of read back once it is closed
    (the same digest; a 1 GB NMF part costs one pass over its bytes, not two).
    """

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self._hash = hashlib.sha256()

    def write(self, data: Any) -> int:
        self._hash.update(data)
        return self._raw.write(data)

    def hexdigest(self) -> str:
        """SHA-256 of every byte written so far, hex (as :func:`sha256_of` of the file)."""
        return self._hash.hexdigest()

    def close(self) -> None:
        self._raw.close()


def link_or_copy(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Give ``dst`` the contents of ``src``: a hard link where both lie on one file
    system, else a copy (``shutil.copy2``'s signature, for ``copytree``).

    For files no command changes in place (censusdp writes every file anew and renames
    it into place, :func:`atomic_path`): an NMF's part files re-estimated from
    (``run --from-measurements``), 46 GB for a ``dhc-2020`` person run of Vermont, are
    linked in a moment instead of copied, and take no more disk."""
    try:
        os.link(src, dst)
    except OSError:  # another file system, or one without hard links
        shutil.copy2(src, dst)


def fsync_file(path: str | os.PathLike[str]) -> None:
    """Flush a closed file's data to the disk (before it is recorded as finished)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_parquet(table: pa.Table, path: str | os.PathLike[str], **kwargs: Any) -> None:
    """Write an Arrow table to Parquet atomically (zstd-compressed by default)."""
    kwargs.setdefault("compression", "zstd")
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, **kwargs)


def strict_json(obj: Any) -> Any:
    """``obj`` with every non-finite float (NaN, infinity) replaced by ``None``.

    JSON has no NaN or infinity; Python's ``json`` writes them as bare ``NaN`` and
    ``Infinity``, which strict readers reject. An undefined value becomes ``null``.
    """
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: strict_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [strict_json(v) for v in obj]
    if isinstance(obj, np.floating):
        return strict_json(float(obj))
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.ndarray):
        return strict_json(obj.tolist())
    return obj


def write_json(obj: Any, path: str | os.PathLike[str]) -> None:
    """Write strict JSON (see :func:`strict_json`) atomically, pretty-printed."""
    text = json.dumps(strict_json(obj), indent=2, sort_keys=False, default=str, allow_nan=False)
    write_text(text + "\n", path)


def write_text(text: str, path: str | os.PathLike[str]) -> None:
    """Write a text file atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


class StreamingWriter:
    """A writer used as a context manager: :meth:`close` on success, :meth:`abort` on error.

    Subclasses write a file piece by piece into a temporary path and implement
    ``close`` (finish and rename into place) and ``abort`` (discard the partial file).
    """

    def close(self) -> Any:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
