"""The files of a noisy measurement file (NMF): its columns, its part files and their index.

``noisy_measurements.parquet``: ``geolevel``, ``geocode``, ``query``, ``cell`` (row
within the query), ``value``, ``variance`` (plus ``mechanism``), one row per noisy
answer (:data:`NMF_COLUMNS`).

A run writes the NMF as *part files*: ``noisy_measurements.parquet/`` is a directory
of ``part-00000.parquet``, ``part-00001.parquet``, ... (one per measurement task, each
written by the task itself with :func:`censusdp.io.nmf_write.write_nmf_part`, so the
driver never handles the values) and a small index ``_parts.json``
(:func:`write_part_index`: every part's level, unit range, rows and SHA-256). Every
part has the layout of a single-file NMF, and the parts together are one Parquet
dataset (``pyarrow.dataset``, Spark and DuckDB read the directory as one table; files
starting with ``_`` or ``.`` are not data). Every reader takes either form
(:func:`nmf_files`), so single-file releases written before stay readable.

A query's rows made only of structural-zero cells (``detailed`` of ``pl94``: the 126
cells of minors in nursing facilities) are not measured by default; a release of
fidelity ``production`` measures them, as production did, and marks each file so in its
Parquet key-value metadata (:data:`STRUCTURAL_ZEROS_KEY`). Readers hand estimation the
live rows either way (:func:`structural_zeros_measured`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from censusdp.io import parts as _parts

__all__ = [
    "NMF_COLUMNS",
    "STRUCTURAL_ZEROS_KEY",
    "STRUCTURAL_ZEROS_MEASURED",
    "structural_zeros_measured",
    "nmf_files",
    "part_name",
    "read_part_index",
    "write_part_index",
]

NMF_COLUMNS = ("geolevel", "geocode", "query", "cell", "value", "variance", "mechanism")

STRUCTURAL_ZEROS_KEY = b"censusdp.structural_zeros"
"""Parquet key-value metadata of an NMF file whose queries include structural-zero rows."""
STRUCTURAL_ZEROS_MEASURED = b"measured"


def structural_zeros_measured(metadata: Any) -> bool:
    """Whether a file's Parquet metadata (``pq.read_metadata(f)``) says its queries hold
    their structural-zero rows."""
    kv = getattr(metadata, "metadata", None) or {}
    return kv.get(STRUCTURAL_ZEROS_KEY) == STRUCTURAL_ZEROS_MEASURED


def part_name(index: int) -> str:
    """File name of the ``index``-th part (the measurement task's place in the plan)."""
    return _parts.part_name(index, ".parquet")


def nmf_files(path: str | Path) -> list[Path]:
    """The Parquet files of a noisy measurement file: itself, or the parts a directory's
    index lists (:func:`censusdp.io.parts.part_files`).

    Raises:
        InputError: for a missing path, a directory without an index or parts, or a
            listed part that is missing.
    """
    return _parts.part_files(path, ".parquet", "noisy measurement part")


_PART_FIELDS = ("file", "geolevel", "start", "stop", "rows", "sha256")


def write_part_index(directory: str | Path, parts: list[dict[str, Any]]) -> Path:
    """Write ``directory/_parts.json``: every part's record, in file order; return its path."""
    return _parts.write_part_index(directory, parts, _PART_FIELDS)


def read_part_index(directory: str | Path) -> dict[str, Any]:
    """The index of a partitioned NMF directory (:func:`censusdp.io.parts.read_part_index`).

    Raises:
        InputError: when it is missing, not JSON, or does not list the directory's parts.
    """
    return _parts.read_part_index(directory, ".parquet")
