"""The person run's block level of a ``ddp-2010`` release: what reading its families costs.

A ``ddp-2010`` block holds 338,502 noisy person values (``dhcp-hhgq``), of which its
family's subproblem keeps the few hundred answers on the parent's positive cells; at
the block level the reading of the NMF, not the solving, was most of the estimate's
CPU (10% Vermont, seed 1: 20 CPU s of tasks, 23 of them the driver's reading of split
families, against about 11 solving and rounding). This benchmark reads a release's
person block families (their kept cells from the release's own block-group
histogram), in this process, CPU seconds by ``time.process_time``, alternating the
methods ``--repeats`` times and keeping the least CPU of each (the machine may be
shared):

* ``reads``: every block family through ``FamilyRun.family`` as a task reads it,
  ``previous`` (each piece of a family read whole, every value copied into a
  ``(units, rows)`` array, then cut to the kept cells' answer rows:
  ``MeasuredQuery.restricted``) and ``now`` (``NMFSlice.read_rows``: the kept cells'
  answer rows gathered from the cached row groups); the noisy answers of every
  subproblem must be equal (checked);
* ``split``: the driver's work on the families of more than ``--max-children``
  blocks (``LevelTasks``: the coarse task, then the chunk tasks once its result is
  back; the coarse results here are the released chunk sums, nothing is solved),
  ``previous`` (each split family read again for its chunks: ``SPLIT_KEEP_BYTES = 0``)
  and ``now`` (its whole subproblem kept from the coarse task's read); the chunk tasks
  must be equal (checked).

* ``proof`` (``--proof``, any schema: ``dhc-2020`` too, alone): every block family
  read as a task reads it (``FamilyRun.family``), ``checked`` (each row group's
  ``geocode``, ``cell`` and ``value`` decoded and its layout checked: an NMF from
  elsewhere) and ``proven`` (``value`` alone, after each part's bytes are hashed and
  found to be its SHA-256: a part the run wrote, ``Runtime.written``; here the
  release's ``_parts.json`` stands in for the tasks' records); the cache is emptied
  before each, so the hashing is counted; the measurements read must be equal
  (checked).

Prints one JSON object (ratios ``previous / now``, the machine's load beside them).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_block_reads.py --run /tmp/vt10-ddp
    PYTHONPATH=src .venv/bin/python benchmarks/bench_block_reads.py --run /tmp/vt1-dhc --proof
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path
from unittest import mock

import numpy as np

from _harness import say
from censusdp.data.geography import DEFAULT_CHUNK_VALUES
from censusdp.data.invariants import Bounds
from censusdp.data.schema import get_schema
from censusdp.io import nmf_cache
from censusdp.io.mdf_read import read_mdf_histograms
from censusdp.io.nmf_read import NMFReader
from censusdp.io.rundir import RunDir
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.manifest import recorded_budgets
from censusdp.release.spine import geography_of_run, tabulation_levels
from censusdp.release.topdown import levels as levels_mod
from censusdp.release.topdown.levels import LevelPlan, LevelTasks, TaskContext
from censusdp.release.topdown.split import chunk_starts
from censusdp.release.topdown.subproblems import (
    Family,
    FamilyRun,
    QueryCache,
    group_of_cells,
    make_subproblem,
)
from censusdp.release.topdown.tasks import TaskResult


class _Whole:
    """The reader without ``read_rows``: a family's pieces read whole, then cut."""

    def __init__(self, reader: NMFReader) -> None:
        self.read, self.schema, self.geolevels = reader.read, reader.schema, reader.geolevels


def _families(h, hist_bg) -> list[tuple[int, int, np.ndarray]]:
    """(first block, blocks, kept cells) of every block group with persons."""
    out = []
    bg = h.n_levels - 2
    for i in range(h.n_units(bg)):
        kids = h.children(bg, i)
        lo, hi = hist_bg.indptr[i], hist_bg.indptr[i + 1]
        kept = np.sort(hist_bg.indices[lo:hi][hist_bg.data[lo:hi] > 0]).astype(np.int64)
        if kept.size:
            out.append((kids.start, kids.stop - kids.start, kept))
    return out


def _read(reader, families, h, cache, groups=None) -> tuple[float, list, int]:
    """CPU seconds to read every family's subproblem; the subproblems' noisy answers
    (``groups``: the cells' groups), or without ``groups`` only the family's
    measurements as a task reads them: ``(query, rows, values)`` each."""
    nmf_cache._CACHE.clear()
    bl = h.n_levels - 1
    width = sum(m.rows.size for m in reader.read(bl, 0, 0))
    c0 = time.process_time()
    out, values = [], 0
    for start, k, kept in families:
        run = FamilyRun(reader, bl, start, start + k, width, DEFAULT_CHUNK_VALUES, lazy=True)
        mqs, local = run.family(slice(start, start + k), kept, cache)
        if groups is None:
            out.append([(m.query, m.rows, m.values) for m in mqs])
        else:
            fam = Family(start, k, kept, None, groups[kept], _free(k, groups), "f")
            out.append(make_subproblem(mqs, cache, local, fam).noisy)
        values += k * width
    return time.process_time() - c0, out, values


def _proof(run: RunDir, schema, h, families, cache, repeats: int) -> dict:
    """``checked`` against ``proven`` reads of every block family (the ``proof`` mode)."""
    nmf = run.nmf_file("persons")
    index = json.loads((nmf / "_parts.json").read_text())
    written = {str(nmf / p["file"]): p["sha256"] for p in index["parts"]}
    readers = {
        "checked": NMFReader(nmf, schema, h),
        "proven": NMFReader(nmf, schema, h, written=written),
    }
    best: dict[str, float] = {}
    got: dict[str, list] = {}
    values = 0
    for _ in range(repeats):
        for key, reader in readers.items():
            cpu, got[key], values = _read(reader, families, h, cache)
            best[key] = min(cpu, best.get(key, np.inf))
            say(f"{key}: {best[key]:.2f} CPU s")
    same = all(
        qa == qb and np.array_equal(ra, rb) and np.array_equal(va, vb)
        for fa, fb in zip(got["checked"], got["proven"], strict=True)
        for (qa, ra, va), (qb, rb, vb) in zip(fa, fb, strict=True)
    )
    if not same:
        raise SystemExit("the checked and the proven reads differ")
    return {
        "noisy_values_read": int(values),
        "cpu_seconds": {k: round(v, 3) for k, v in best.items()},
        "ns_per_value": {k: round(v / max(values, 1) * 1e9, 2) for k, v in best.items()},
        "speedup": round(best["checked"] / max(best["proven"], 1e-9), 2),
        "same_measurements": True,
    }


def _free(k: int, groups: np.ndarray) -> Bounds:
    g = int(groups.max()) + 1
    return Bounds(np.zeros((k, g)), np.full((k, g), np.inf), np.zeros(k), np.full(k, np.inf))


def _split(reader, h, hist_bg, hist_b, cache, groups, max_children: int) -> tuple[float, list]:
    """The driver's CPU on the split families of the block level; their chunk tasks."""
    nmf_cache._CACHE.clear()
    bg = h.n_levels - 2
    n = h.n_units(bg + 1)
    ctx = TaskContext(reader, cache, h, groups, "auto", max_children=max_children, detach=True)
    tasks = LevelTasks(ctx, bg, hist_bg, _free(n, groups), LevelPlan())
    blocks = {
        int(a): int(b - a) for a, b in zip(h.child_ptr[bg][:-1], h.child_ptr[bg][1:], strict=True)
    }
    chunks = []
    for t in tasks:
        if t.chunks:  # the coarse task: its result is the released chunks' sums
            k = blocks[t.child_start]
            starts = t.child_start + chunk_starts(k, max_children)
            ends = np.r_[starts[1:], t.child_start + k]
            counts = np.vstack(
                [
                    np.asarray(hist_b[a:b][:, t.kept].sum(axis=0)).ravel()
                    for a, b in zip(starts, ends, strict=True)
                ]
            ).astype(np.int64)
            r = TaskResult(
                t.level,
                t.parent_geocode,
                t.child_start,
                t.kept,
                counts,
                "x",
                "x",
                0,
                0,
                0,
                0,
                chunks=t.chunks,
            )
            tasks.accept(r)
        elif t.source is None:
            chunks.append(t)
    chunks.extend(tasks.rest())
    return tasks.build_cpu, chunks


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, required=True, help="a ddp-2010 release directory")
    ap.add_argument("--repeats", type=int, default=2, help="runs of each (least CPU kept)")
    ap.add_argument("--max-children", type=int, default=100)
    ap.add_argument(
        "--proof", action="store_true", help="only the checked against the proven reads"
    )
    args = ap.parse_args(argv)
    run = RunDir(args.run)
    manifest = run.manifest()
    spent = ReleaseBudget(*recorded_budgets(manifest, str(run.manifest_file)))
    schema = get_schema(spent.persons.schema)
    tab, _ = run.invariants(tabulation_levels(spent.persons))
    # measured and estimated on the release's spine (a dhc-2020 release's prim spine)
    geo = geography_of_run(args.run, manifest, tab)
    h = geo.estimation
    reader = NMFReader(run.nmf_file("persons"), schema, h)
    hist_b = geo.to_estimation(read_mdf_histograms(args.run, tab, schema)[0].tocsr())
    hist_bg = h.aggregate(hist_b)[h.n_levels - 2].tocsr()
    families = _families(h, hist_bg)
    cache = QueryCache(reader)
    say(f"{len(families)} block families, {sum(k for _, k, _ in families):,} blocks")
    if args.proof:
        out = {
            "benchmark": "bench_block_reads --proof",
            "machine": platform.platform(),
            "cpus": os.cpu_count(),
            "run": str(args.run),
            "schema": schema.name,
            "families": len(families),
            "blocks": int(sum(k for _, k, _ in families)),
            **_proof(run, schema, h, families, cache, args.repeats),
            "load_average": [round(v, 2) for v in os.getloadavg()],
        }
        print(json.dumps(out, indent=2))
        return 0
    groups = group_of_cells(reader, "hhgq")[0]
    best: dict[str, dict[str, float]] = {"reads": {}, "split": {}}
    values = 0
    for _ in range(args.repeats):
        for key in ("previous", "now"):
            src = _Whole(reader) if key == "previous" else reader
            cpu, noisy, values = _read(src, families, h, cache, groups)
            best["reads"][key] = min(cpu, best["reads"].get(key, np.inf))
            if key == "previous":
                old = noisy
            else:
                same = all(
                    all(np.array_equal(a, b) for a, b in zip(x, y, strict=True))
                    for x, y in zip(old, noisy, strict=True)
                )
                if not same:
                    raise SystemExit("the two reads gave different subproblems")
            keep = 0 if key == "previous" else levels_mod.SPLIT_KEEP_BYTES
            with mock.patch.object(levels_mod, "SPLIT_KEEP_BYTES", keep):
                cpu, chunks = _split(reader, h, hist_bg, hist_b, cache, groups, args.max_children)
            best["split"][key] = min(cpu, best["split"].get(key, np.inf))
            if key == "previous":
                old_chunks = chunks
            elif len(chunks) != len(old_chunks) or not all(
                np.array_equal(a.kept, b.kept)
                and all(np.array_equal(x, y) for x, y in zip(a.sub.noisy, b.sub.noisy, strict=True))
                for a, b in zip(chunks, old_chunks, strict=True)
            ):
                raise SystemExit("the split families' chunk tasks differ")
            say(f"{key}: reads {best['reads'][key]:.2f} CPU s, split {best['split'][key]:.2f}")
    out = {
        "benchmark": "bench_block_reads",
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": [round(v, 2) for v in os.getloadavg()],
        "run": str(args.run),
        "families": len(families),
        "blocks": int(sum(k for _, k, _ in families)),
        "noisy_values_read": int(values),
        "split_chunk_tasks": len(chunks),
        "cpu_seconds": {k: {m: round(v, 3) for m, v in d.items()} for k, d in best.items()},
        "reads_ns_per_value": {
            m: round(v / max(values, 1) * 1e9, 2) for m, v in best["reads"].items()
        },
        "speedup": {k: round(d["previous"] / max(d["now"], 1e-9), 2) for k, d in best.items()},
        "same_subproblems": True,
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
