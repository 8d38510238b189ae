"""The published invariants of a release directory, read back with their geography.

``RUN/invariants.parquet`` (one row per block: geocode, housing units, group-quarters
facilities by type) and ``RUN/invariant_totals.parquet`` (the state total population)
are what a release publishes exactly (docs/file-formats.md). Their blocks are every
block of the release, so they also rebuild its :class:`~censusdp.data.geography.Hierarchy`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from censusdp.data.geography import GeoLevels, Hierarchy
from censusdp.data.invariants import Invariants
from censusdp.errors import InputError

__all__ = ["read_invariants"]


def read_invariants(run_dir: str | Path, geolevels: GeoLevels) -> tuple[Hierarchy, Invariants]:
    """The hierarchy of a release's blocks and its published invariants.

    Raises:
        InputError: naming the file that is missing.
    """
    run = Path(run_dir)
    for name in ("invariants.parquet", "invariant_totals.parquet"):
        if not (run / name).is_file():
            raise InputError(f"{run / name}: missing file (not a release directory?)")
    blocks = pq.read_table(run / "invariants.parquet")
    codes = np.asarray(blocks.column("geocode").to_numpy(zero_copy_only=False)).astype("U16")
    hierarchy = Hierarchy.from_blocks(codes, geolevels)
    inv = Invariants.from_tables(blocks, pq.read_table(run / "invariant_totals.parquet"), hierarchy)
    return hierarchy, inv
