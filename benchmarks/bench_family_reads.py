"""Reading the block level's families the way TopDown tasks do, with the row-group cache
against the previous reading (every family reads the row groups it touches).

Each block-level task reads its own family from an NMF slice (``NMFReader.detach``);
the families of a block group are small next to a row group, so consecutive families
share row groups. Three ways over the same release, every family in geography order:

* ``previous``: no row-group cache, and each task's width probe (``read(level, start,
  start)``, which read the row groups under ``start``) reproduced by reading the first
  child, as before;
* ``no_cache``: the zero-width probe reads nothing, still no cache;
* ``cache``: the process's cache (:data:`censusdp.io.nmf_cache.GROUP_CACHE_BYTES`).

The values each way returns are compared. Reads a release directory (``--run``) or makes
one: generates ``--state`` at ``--scale`` and releases it (pl94-2020, seed 1). CPU
seconds are this process's (``time.process_time``); wall seconds depend on the load.
Prints one JSON object.

    .venv/bin/python benchmarks/bench_family_reads.py --state WY --scale 0.25
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import time

import numpy as np

from _harness import add_release_arguments, release_of  # noqa: E402
from censusdp.data.geography import GeoLevels
from censusdp.data.schema import get_schema
from censusdp.io import nmf_cache, nmf_read
from censusdp.io.rundir import RunDir
from censusdp.release.spine import geography_of_run


def _read_all(reader: nmf_read.NMFReader, level: int, families: list[tuple[int, int]], probe: bool):
    """Every family read from its own slice, as tasks do; a digest of the values."""
    h = hashlib.sha256()
    c0, t0 = time.process_time(), time.perf_counter()
    for a, b in families:
        piece = reader.detach(level, a, b)
        if probe:  # the previous width probe read the row groups under the first child
            piece.read(level, a, a + 1)
        for mq in piece.read(level, a, b):
            h.update(np.ascontiguousarray(mq.values).tobytes())
    return time.process_time() - c0, time.perf_counter() - t0, h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_release_arguments(ap)
    args = ap.parse_args()
    run = release_of(args, "censusdp_familyreads_")
    manifest = json.loads((run / "manifest.json").read_text())
    hierarchy, _ = RunDir(run).invariants(GeoLevels.from_pairs(manifest["geolevels"]))
    est = geography_of_run(run, manifest, hierarchy).estimation
    schema = get_schema(str(manifest.get("schema", "pl94")))
    reader = nmf_read.NMFReader(run / "noisy_measurements.parquet", schema, est)
    level = est.n_levels - 1
    families = [
        (s.start, s.stop)
        for i in range(est.n_units(level - 1))
        if (s := est.children(level - 1, i)).stop > s.start
    ]
    out: dict = {
        "benchmark": "family_reads",
        "run": str(run),
        "level": est.geolevels[level].name,
        "families": len(families),
        "units": est.n_units(level),
        "cache_bytes": nmf_cache.GROUP_CACHE_BYTES,
        "python": platform.python_version(),
    }
    digests = {}
    ways = (
        ("previous", nmf_cache._GroupCache(0, 0), True),
        ("no_cache", nmf_cache._GroupCache(0, 0), False),
        (
            "cache",
            nmf_cache._GroupCache(nmf_cache.GROUP_CACHE_BYTES, nmf_cache.GROUP_CACHE_FILES),
            False,
        ),
    )
    for name, cache, probe in ways:
        nmf_cache._CACHE = cache
        cpu, wall, digests[name] = _read_all(reader, level, families, probe)
        out[name] = {
            "cpu_seconds": round(cpu, 3),
            "wall_seconds": round(wall, 3),
            "row_group_reads": cache.misses,
            "cpu_ms_per_family": round(1000 * cpu / max(len(families), 1), 3),
        }
    out["same_values"] = len(set(digests.values())) == 1
    out["speedup_cpu_vs_previous"] = round(
        out["previous"]["cpu_seconds"] / max(out["cache"]["cpu_seconds"], 1e-9), 2
    )
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
