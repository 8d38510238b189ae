"""Atomic file output: write to a temporary file in the same directory, then rename.

A reader never sees a half-written file, and a failed run leaves nothing behind
under the final name.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["StreamingWriter", "atomic_path", "write_json", "write_parquet", "write_text"]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success.

    On an exception the temporary file is removed and ``path`` is left untouched.
    """
    final = Path(path)
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


def write_parquet(table: pa.Table, path: str | os.PathLike[str], **kwargs: Any) -> None:
    """Write an Arrow table to Parquet atomically (zstd-compressed by default)."""
    kwargs.setdefault("compression", "zstd")
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, **kwargs)


def write_json(obj: Any, path: str | os.PathLike[str]) -> None:
    """Write JSON atomically, pretty-printed."""
    write_text(json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n", path)


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
