"""The single-file outputs of a command (``--json``, ``--html``, ``--plot``, a report).

Files are written by :func:`output_file` (a temporary file beside the destination,
linked into place only if nothing appeared there meanwhile, replaced only with
``overwrite``), after the checks of
:func:`censusdp.io.output_rules.check_output_file`.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from censusdp.errors import ConfigError
from censusdp.io.command_inputs import ambient_overwrite
from censusdp.io.output_rules import check_output_file

__all__ = [
    "output_file",
    "write_output_json",
    "write_output_text",
]


@contextlib.contextmanager
def output_file(
    path: str | os.PathLike[str],
    *,
    overwrite: bool | None = None,
    inputs: Iterable[str | os.PathLike[str] | None] = (),
    option: str = "output",
    suffix: str = "",
) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; put it in place when the body succeeds.

    The path is checked first (:func:`~censusdp.io.output_rules.check_output_file`) and again at the end; without
    ``overwrite`` (``None``: the running command's) the file is linked into place so
    that a file that appeared meanwhile is never replaced. On an error the temporary
    file is removed and ``path`` is untouched.

    Raises:
        ConfigError: for a refused path, or one that appeared while writing.
    """
    final = check_output_file(path, overwrite, inputs, option=option)
    replace = ambient_overwrite(overwrite)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=suffix + ".tmp", dir=final.parent)
    os.close(fd)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        check_output_file(path, replace, inputs, option=option)
        if replace:
            os.replace(tmp_path, final)
        else:
            try:
                os.link(tmp_path, final)
            except FileExistsError:
                raise ConfigError(
                    f"{option} {path} appeared while it was written; nothing was replaced"
                ) from None
            except OSError:  # no hard links here
                os.replace(tmp_path, final)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()


def write_output_text(
    text: str,
    path: str | os.PathLike[str],
    *,
    overwrite: bool | None = None,
    inputs: Iterable[str | os.PathLike[str] | None] = (),
    option: str = "output",
) -> Path:
    """Write ``text`` (UTF-8) to the output file ``path`` through :func:`output_file`."""
    with output_file(path, overwrite=overwrite, inputs=inputs, option=option) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_output_json(
    obj: Any,
    path: str | os.PathLike[str],
    *,
    overwrite: bool | None = None,
    inputs: Iterable[str | os.PathLike[str] | None] = (),
    option: str = "--json",
) -> Path:
    """Write ``obj`` as strict, pretty-printed JSON to the output file ``path``."""
    from censusdp.io.atomic import strict_json

    text = json.dumps(strict_json(obj), indent=2, allow_nan=False, default=str) + "\n"
    return write_output_text(text, path, overwrite=overwrite, inputs=inputs, option=option)
