"""The running command's inputs: what no output of it may touch.

:func:`guarded_command` declares them (the CLI enters it with every input option it
parsed, the Python API with its arguments); :mod:`censusdp.io.output_rules` checks every
output path against them, and :mod:`censusdp.io.atomic` refuses any file written inside
one (:func:`refuse_input_write`), the last line of defence.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from censusdp.errors import ConfigError

__all__ = [
    "ambient_overwrite",
    "guarded_command",
    "overlap",
    "protected_inputs",
    "refuse_input_write",
]

_INPUT_WALK_LIMIT = 200_000
"""Entries of an input directory searched for symbolic links (a CEF of part files has
hundreds); a larger tree is protected by its own path only."""


@dataclass(frozen=True)
class _Command:
    inputs: tuple[Path, ...]
    overwrite: bool


_COMMAND: contextvars.ContextVar[_Command | None] = contextvars.ContextVar(
    "censusdp_command", default=None
)


def _expand(raw: str | os.PathLike[str]) -> list[Path]:
    """An input's resolved path and, for a directory, the targets of the links in it."""
    path = Path(raw).expanduser()
    found = [path.resolve()]
    if path.is_symlink():
        found.append(path.absolute())
    if not path.is_dir():
        return found
    seen = 0
    for root, dirs, files in os.walk(path, followlinks=False):
        for name in (*dirs, *files):
            seen += 1
            entry = Path(root, name)
            if entry.is_symlink():
                with contextlib.suppress(OSError, RuntimeError):
                    found.append(entry.resolve())
        if seen > _INPUT_WALK_LIMIT:
            break
    return found


def _resolve_inputs(inputs: Iterable[str | os.PathLike[str] | None]) -> tuple[Path, ...]:
    out: list[Path] = []
    for raw in inputs:
        if raw is None or (isinstance(raw, str) and raw in ("", "-")):
            continue
        out.extend(_expand(raw))
    return tuple(dict.fromkeys(out))


@contextlib.contextmanager
def guarded_command(
    inputs: Iterable[str | os.PathLike[str] | None], *, overwrite: bool = False
) -> Iterator[None]:
    """Declare the running command's inputs (and whether it may ``overwrite``): every
    output the guard checks inside this block may not touch any of them."""
    outer = _COMMAND.get()
    resolved = _resolve_inputs(inputs)
    if outer is not None:
        resolved = tuple(dict.fromkeys((*outer.inputs, *resolved)))
        overwrite = overwrite and outer.overwrite
    token = _COMMAND.set(_Command(resolved, overwrite))
    try:
        yield
    finally:
        _COMMAND.reset(token)


def protected_inputs(extra: Iterable[str | os.PathLike[str] | None] = ()) -> tuple[Path, ...]:
    """The running command's inputs (:func:`guarded_command`) and ``extra``, resolved."""
    cmd = _COMMAND.get()
    own = _resolve_inputs(extra)
    return tuple(dict.fromkeys((*(cmd.inputs if cmd else ()), *own)))


def refuse_input_write(path: str | os.PathLike[str]) -> None:
    """Refuse to write ``path`` when it is, or lies inside, an input of the running
    command (the last line of defence of every file censusdp writes).

    Raises:
        ConfigError: naming the path and the input.
    """
    cmd = _COMMAND.get()
    if cmd is None or not cmd.inputs:
        return
    out = Path(path).resolve()
    for inp in cmd.inputs:
        if out == inp or out.is_relative_to(inp):
            raise ConfigError(f"{path} lies inside the input {inp}; censusdp never writes there")


def ambient_overwrite(overwrite: bool | None) -> bool:
    """``overwrite``, or (``None``) the running command's ``--overwrite``."""
    if overwrite is not None:
        return overwrite
    cmd = _COMMAND.get()
    return bool(cmd and cmd.overwrite)


def overlap(out: Path, inputs: Iterable[Path]) -> Path | None:
    """The first input that is ``out``, lies inside it or holds it, or ``None``."""
    for inp in inputs:
        if out == inp or inp.is_relative_to(out) or out.is_relative_to(inp):
            return inp
    return None
