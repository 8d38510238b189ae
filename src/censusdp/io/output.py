"""Output directories: the guard every writing command goes through, and staging.

A command writes a directory of results. :func:`prepare_output_dir` refuses to write
into a non-empty directory unless the caller allows overwriting; :class:`Staging`
builds a directory beside its destination and renames it into place only when it is
complete, so a failed run never leaves a half-written result under the final name.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from censusdp.errors import ConfigError

__all__ = ["Staging", "check_output_dir", "prepare_output_dir"]


def check_output_dir(out_dir: Path, overwrite: bool) -> None:
    """Raise :class:`ConfigError` if ``out_dir`` holds anything and ``overwrite`` is off."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--out {out_dir} is a file, not a directory")
    if out_dir.exists() and any(out_dir.iterdir()) and not overwrite:
        raise ConfigError(
            f"output directory {out_dir} exists and is not empty; "
            "choose another --out or pass --overwrite"
        )


def prepare_output_dir(out_dir: str | os.PathLike[str], overwrite: bool) -> Path:
    """Check ``out_dir`` (see :func:`check_output_dir`) and create it; return it."""
    out = Path(out_dir)
    check_output_dir(out, overwrite)
    out.mkdir(parents=True, exist_ok=True)
    return out


class Staging:
    """A staging directory renamed onto ``out_dir`` on :meth:`commit`, removed on :meth:`abort`."""

    def __init__(self, out_dir: Path, overwrite: bool) -> None:
        self.out_dir = out_dir
        check_output_dir(out_dir, overwrite)
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        self.path = out_dir.parent / f".{out_dir.name}.partial-{os.getpid()}"
        if self.path.exists():
            shutil.rmtree(self.path)
        self.path.mkdir()

    def commit(self) -> None:
        """Move the finished staging directory onto the destination."""
        if self.out_dir.exists():
            old = self.out_dir.parent / f".{self.out_dir.name}.old-{os.getpid()}"
            os.replace(self.out_dir, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(self.path, self.out_dir)

    def abort(self) -> None:
        """Remove the staging directory."""
        shutil.rmtree(self.path, ignore_errors=True)
