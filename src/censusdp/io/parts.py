"""Part files: one logical file written as a directory of parts by executor tasks.

Every large output of a run (the NMF, the MDF's persons and units, in Parquet and in
MDF2020 text) is a directory named like the single file it replaces
(``noisy_measurements.parquet/``, ``mdf_persons.parquet/``, ``mdf_persons.txt/``)
holding ``part-00000.<ext>``, ``part-00001.<ext>``, ... and a small index
``_parts.json``: each part's record (file, what it holds, rows, SHA-256), in file
order. A part's name is its task's place in the plan, never the executor's, so the same
seed gives the same parts, byte for byte, wherever the tasks ran. Files starting with
``_`` or ``.`` are not data (the Parquet dataset convention: Spark, ``pyarrow.dataset``
and DuckDB read a Parquet directory as one table).

This module is the one place for that layout: names (:func:`part_name`), the data
files of a path in either layout (:func:`part_files`), and the index
(:func:`write_part_index`, :func:`read_part_index`). The NMF (:mod:`censusdp.io.nmf`)
and the MDF (:mod:`censusdp.io.mdf`) use it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from censusdp.errors import InputError
from censusdp.io.atomic import write_json

__all__ = [
    "PART_INDEX",
    "indexed_checksums",
    "part_files",
    "part_name",
    "read_part_index",
    "write_part_index",
]

PART_INDEX = "_parts.json"
"""The index of a partitioned file's directory (not data: its name starts with ``_``)."""

_PART_FORMAT = 1


def part_name(index: int, suffix: str = ".parquet") -> str:
    """File name of the ``index``-th part (its task's place in the plan)."""
    if index < 0:
        raise ValueError(f"part index must be >= 0, got {index}")
    return f"part-{index:05d}{suffix}"


def part_files(path: str | Path, suffix: str = ".parquet", what: str = "part") -> list[Path]:
    """The data files of ``path``: itself (a single file), or a directory's parts.

    A directory's data files are its ``*<suffix>`` files not starting with ``_`` or
    ``.``, in name order (the order of the records they hold).

    Raises:
        InputError: for a missing path or a directory without parts (``what`` names
            the parts in the message).
    """
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise InputError(f"{p}: missing file")
    files = sorted(
        f for f in p.glob(f"*{suffix}") if f.is_file() and not f.name.startswith(("_", "."))
    )
    if not files:
        raise InputError(f"{p}: a directory without {what}s (part-*{suffix})")
    return files


def write_part_index(
    directory: str | Path, parts: Iterable[dict[str, Any]], fields: tuple[str, ...]
) -> Path:
    """Write ``directory/_parts.json``: each part's record (its ``fields``; ``file``,
    ``rows`` and ``sha256`` among them), in file order; return its path."""
    directory = Path(directory)
    ordered = sorted(({k: p[k] for k in fields} for p in parts), key=lambda p: p["file"])
    names = [p["file"] for p in ordered]
    if len(set(names)) != len(names):
        raise ValueError(f"{directory}: a part is listed twice in its index")
    path = directory / PART_INDEX
    write_json(
        {
            "format": _PART_FORMAT,
            "created_by": "censusdp",
            "rows": int(sum(int(p["rows"]) for p in ordered)),
            "parts": ordered,
        },
        path,
    )
    return path


def read_part_index(directory: str | Path, suffix: str = ".parquet") -> dict[str, Any]:
    """The index of a partitioned directory.

    Raises:
        InputError: when it is missing, not JSON, or does not list the directory's parts.
    """
    directory = Path(directory)
    path = directory / PART_INDEX
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a readable part index ({exc})") from None
    if not isinstance(index, dict) or index.get("format") != _PART_FORMAT:
        raise InputError(f"{path}: not a censusdp part index (format {_PART_FORMAT})")
    parts = index.get("parts")
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        raise InputError(f"{path}: its 'parts' is not a list of part records")
    listed = sorted(str(p.get("file")) for p in parts)
    present = [f.name for f in part_files(directory, suffix)]
    if listed != present:
        extra = sorted(set(present) - set(listed)) or sorted(set(listed) - set(present))
        raise InputError(f"{path}: lists other parts than the directory holds ({extra[:3]})")
    return index


def indexed_checksums(run_dir: str | Path) -> dict[str, str]:
    """The SHA-256 of every part listed in the indexes of ``run_dir``'s partitioned
    directories, by path relative to ``run_dir`` (what their tasks computed)."""
    run_dir = Path(run_dir)
    out: dict[str, str] = {}
    for index in sorted(run_dir.glob(f"*/{PART_INDEX}")):
        try:
            parts = json.loads(index.read_text(encoding="utf-8")).get("parts", [])
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
            continue  # not an index: its files are hashed like any other
        for p in parts if isinstance(parts, list) else []:
            if isinstance(p, dict) and isinstance(p.get("sha256"), str):
                out[f"{index.parent.name}/{p.get('file')}"] = p["sha256"]
    return out
