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

The index is what a directory holds: censusdp's readers read the parts it lists, in
its order, and nothing else, never what a listing of the directory finds, so a file
put into the directory afterwards (a copy of a part, a Parquet file named
``manifest.json`` or ``.hidden``) is never read as records (``censusdp validate``
refuses a release that holds one).

This module is the one place for that layout: names (:func:`part_name`), the data
files of a path in either layout (:func:`part_files`, :func:`read_parts`), and the
index (:func:`write_part_index`, :func:`read_part_index`). The NMF
(:mod:`censusdp.io.nmf_files`), the MDF (:mod:`censusdp.io.mdf_parts`) and the tables
(:mod:`censusdp.io.tables`) use it.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.errors import InputError
from censusdp.io.atomic import write_json

__all__ = [
    "PART_INDEX",
    "indexed_checksums",
    "part_files",
    "part_name",
    "read_part_index",
    "read_parts",
    "regular_file",
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


def regular_file(path: str | Path) -> bool:
    """True when ``path`` is a regular file itself: not a symbolic link (to anything),
    a directory, a FIFO or a device (whose reading could block forever or read another
    file than the one named)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except (OSError, ValueError):
        return False


def part_files(path: str | Path, suffix: str = ".parquet", what: str = "part") -> list[Path]:
    """The data files of ``path``: itself (a single file), or the parts a directory's
    index lists, in its order (the order of the records they hold).

    A directory is never listed: a file its ``_parts.json`` does not name is not read,
    whatever its name.

    Raises:
        InputError: for a missing path, a directory without an index or whose index
            lists no parts (``what`` names the parts in the message), or a listed part
            that is missing or not a regular file.
    """
    p = Path(path)
    if p.is_file():
        return [p]
    if not p.is_dir():
        raise InputError(f"{p}: missing file")
    if not (p / PART_INDEX).exists():
        raise InputError(f"{p}: a directory without {what}s (no {PART_INDEX} listing them)")
    files = [p / str(rec["file"]) for rec in read_part_index(p, suffix)["parts"]]
    if not files:
        raise InputError(f"{p}: a directory without {what}s ({PART_INDEX} lists none)")
    return files


def read_parts(
    path: str | Path,
    *,
    what: str = "part",
    columns: list[str] | None = None,
    filters: Any = None,
) -> pa.Table:
    """A Parquet file, or the parts of a directory that its index lists, as one table
    (``columns`` and ``filters`` as :func:`pyarrow.parquet.read_table` takes them).

    ``pyarrow.parquet.read_table`` given the directory itself would read every file it
    finds there (:func:`part_files`).

    Raises:
        InputError: as :func:`part_files`, or naming the path when a file is not
            readable Parquet.
    """
    files = part_files(path, ".parquet", what)
    try:
        return pq.read_table([str(f) for f in files], columns=columns, filters=filters)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{path}: not readable Parquet ({exc})") from None


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

    Every part it lists must be a plain file name ending in ``suffix`` (no path, not
    starting with ``_`` or ``.``), listed once, and present as a regular file.

    Raises:
        InputError: when it is missing, not JSON, or lists a part that is not one of
            the directory's part files.
    """
    directory = Path(directory)
    path = directory / PART_INDEX
    if path.exists() and not regular_file(path):
        raise InputError(f"{path}: not a regular file")
    try:
        index = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a readable part index ({exc})") from None
    if not isinstance(index, dict) or index.get("format") != _PART_FORMAT:
        raise InputError(f"{path}: not a censusdp part index (format {_PART_FORMAT})")
    parts = index.get("parts")
    if not isinstance(parts, list) or not all(isinstance(p, dict) for p in parts):
        raise InputError(f"{path}: its 'parts' is not a list of part records")
    listed = [p.get("file") for p in parts]
    bad = [
        f
        for f in listed
        if not isinstance(f, str)
        or f != Path(f).name
        or f.startswith(("_", "."))
        or not f.endswith(suffix)
    ]
    if bad:
        raise InputError(f"{path}: lists {bad[0]!r}, not a part file name (part-*{suffix})")
    if len(set(listed)) != len(listed):
        raise InputError(f"{path}: lists a part twice")
    absent = [f for f in listed if not regular_file(directory / f)]
    if absent:
        raise InputError(
            f"{path}: lists other parts than the directory holds ({absent[:3]} missing or "
            "not regular files)"
        )
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
