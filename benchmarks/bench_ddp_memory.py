"""Memory of one wide ``ddp-2010`` family: measuring and estimating it, now vs before.

A ``ddp-2010`` block had 229,320 measured detailed cells (233,856 less the structural
zeros; the preset's ``dhcp-hhgq`` schema now has 337,680 of 467,712), so one block group
of 540 blocks was 124 million noisy values; Vermont x0.01 ran
out of memory measuring one. This benchmark takes the widest block group of a generated
state and measures, in one process, the peak of the memory traced by ``tracemalloc``
(NumPy reports its arrays to it) for

* measuring the family's blocks into an NMF: ``before``, one task of the whole family
  (what ``measure_tasks`` did); ``now``, the tasks of ``measure_tasks`` (the family cut
  at unit boundaries, about ``DEFAULT_CHUNK_VALUES`` values each);
* building the family's estimation problem from that NMF: ``before``, the whole family
  read and every query made dense over its rows (``MeasuredQuery.dense``, what
  ``make_subproblem`` did); ``now``, the driver's tasks (the family read in pieces,
  only the answer rows holding a cell the parent has: ``release.topdown.driver``);

and the seconds of each. It then solves the family's task (failsafe, least squares,
rounding) from the ``now`` problem and reports its time and peak. Prints JSON; the run
takes a minute or two on an idle machine.

    python benchmarks/bench_ddp_memory.py                         # generated VT x0.02, seed 4
    python benchmarks/bench_ddp_memory.py --input DIR --max-blocks 300
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from _harness import cached_input  # noqa: E402
from censusdp.data.geography import GeoLevels  # noqa: E402
from censusdp.data.invariants import Bounds  # noqa: E402
from censusdp.data.schema import get_schema  # noqa: E402
from censusdp.io.budget_files import load_preset  # noqa: E402
from censusdp.io.cef_stream import read_cef_blocks  # noqa: E402
from censusdp.io.nmf_read import NMFReader  # noqa: E402
from censusdp.io.nmf_write import NMFWriter  # noqa: E402
from censusdp.privacy.randomness import RandomSource  # noqa: E402
from censusdp.release.measure import MeasureTask, measure_tasks, run_measure_task  # noqa: E402
from censusdp.release.topdown.levels import LevelPlan, LevelTasks, TaskContext  # noqa: E402
from censusdp.release.topdown.subproblems import QueryCache, group_of_cells  # noqa: E402
from censusdp.release.topdown.tasks import run_task  # noqa: E402

MB = 1 << 20


def _say(msg: str) -> None:
    print(f"[bench_ddp_memory] {msg}", file=sys.stderr, flush=True)


class _Peak:
    """Peak traced bytes and wall / CPU seconds of a block of code."""

    def __enter__(self) -> _Peak:
        tracemalloc.reset_peak()
        self.base = tracemalloc.get_traced_memory()[0]
        self.t, self.c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.t
        self.cpu = time.process_time() - self.c
        self.peak_mb = (tracemalloc.get_traced_memory()[1] - self.base) / MB

    def row(self) -> dict:
        return {
            "peak_mb": round(self.peak_mb, 1),
            "seconds": round(self.seconds, 2),
            "cpu_seconds": round(self.cpu, 2),
        }


def _cut_to_family(input_dir: Path, out_dir: Path, max_blocks: int) -> int:
    """Write the records of the widest block group's first ``max_blocks`` blocks."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    units = pq.read_table(input_dir / "units.parquet")
    persons = pq.read_table(input_dir / "persons.parquet")
    codes = np.asarray(units.column("geocode").to_pylist())
    blocks = np.unique(codes)
    bgs, counts = np.unique([b[:12] for b in blocks], return_counts=True)
    widest = bgs[int(np.argmax(counts))]
    keep = {b for b in blocks if b[:12] == widest}
    keep = set(sorted(keep)[:max_blocks])
    out_dir.mkdir(parents=True)
    for name, table in (("units", units), ("persons", persons)):
        mask = pa.array([g in keep for g in table.column("geocode").to_pylist()])
        pq.write_table(table.filter(mask), out_dir / f"{name}.parquet")
    return len(keep)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", type=Path, help="a generated state (default: VT x0.02, seed 4)")
    ap.add_argument("--max-blocks", type=int, default=150, help="blocks of the family kept")
    ap.add_argument("--seed", type=int, default=1, help="noise seed")
    ap.add_argument("--no-solve", action="store_true", help="skip the least-squares solve")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_ddp_memory_") as tmp:
        tmp_path = Path(tmp)
        input_dir = args.input or cached_input(tmp_path, "VT", 0.02, seed=4)
        family_dir = tmp_path / "family"
        k = _cut_to_family(input_dir, family_dir, args.max_blocks)
        budget = load_preset("ddp-2010")
        schema = get_schema(budget.schema)
        cef = read_cef_blocks(family_dir, GeoLevels.from_pairs(list(budget.geolevels)), schema)
        h = cef.hierarchy
        levels = h.aggregate(cef.persons)
        bl = h.n_levels - 1
        assert h.n_units(bl - 1) == 1 and h.n_units(bl) == k
        plan = [
            (m.geolevel, m.query, m.mechanism)
            for m in budget.measurements()
            if m.geolevel == h.geolevels[bl].name
        ]
        _say(f"family: block group {h.geocodes[bl - 1][0]}, {k} blocks")
        source = RandomSource.seeded(args.seed)
        hist = levels[bl].tocsr()
        queries = tuple((q, m) for _, q, m in plan)
        out: dict = {
            "benchmark": "bench_ddp_memory",
            "machine": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average": [round(v, 2) for v in os.getloadavg()],
            "input": str(args.input or "generated VT x0.02 seed 4"),
            "family_blocks": k,
            "cells": schema.size,
            "persons_in_family": int(cef.n_persons),
        }
        tracemalloc.start()

        # -- measuring ------------------------------------------------------------------
        whole = MeasureTask(
            h.geolevels[bl].name,
            0,
            h.geocodes[bl],
            hist,
            schema,
            queries,
            source,
        )
        with _Peak() as before:
            with NMFWriter(tmp_path / "before.parquet") as w:
                chunk = run_measure_task(whole)
                n_values = chunk.n_values
                w.write_chunk(chunk)
                del chunk
        (tmp_path / "before.parquet").unlink()
        _say(f"measured the family as one task into an NMF: {before.peak_mb:,.0f} MB")
        nmf = tmp_path / "nmf.parquet"
        with _Peak() as now:
            with NMFWriter(nmf) as w:
                tasks = measure_tasks(levels, h, schema, plan, source)
                for t in tasks:
                    w.write_chunk(run_measure_task(t))
        _say(f"measured the level in unit chunks into an NMF: {now.peak_mb:,.0f} MB")
        out["noisy_values_in_family"] = n_values
        out["measure"] = {"before_one_task": before.row(), "now_unit_chunks_to_nmf": now.row()}

        # -- building the estimation problem -------------------------------------------
        reader = NMFReader(nmf, schema, h)
        parent = levels[bl - 1].tocsr()
        kept = parent.indices[parent.data > 0]
        cache = QueryCache(reader)
        with _Peak() as before:
            mqs = reader.read(bl, 0, k)
            dense = [mq.dense(slice(0, k), cache.get(mq.query).n_rows) for mq in mqs]
            dense_mb = sum(d.nbytes for d in dense) / MB
            del mqs, dense
        _say(f"family read whole and made dense: {before.peak_mb:,.0f} MB")
        cell_groups, n_groups = group_of_cells(reader, "hhgq")
        n = h.n_units(bl)
        bounds = Bounds(
            np.zeros((n, n_groups)),
            np.full((n, n_groups), np.inf),
            np.zeros(n),
            np.full(n, np.inf),
        )
        ctx = TaskContext(reader, cache, h, cell_groups, "auto", max_children=None)
        with _Peak() as now:
            (task,) = LevelTasks(ctx, bl - 1, parent, bounds, LevelPlan())
        _say(f"family read in pieces, present rows only: {now.peak_mb:,.0f} MB")
        out["estimate_problem"] = {
            "kept_cells": int(kept.size),
            "before_dense": {**before.row(), "noisy_arrays_mb": round(dense_mb, 1)},
            "now_present_rows": {
                **now.row(),
                "noisy_arrays_mb": round(sum(y.nbytes for y in task.sub.noisy) / MB, 2),
                "rows_per_query": list(task.sub.query_sizes),
            },
        }
        if not args.no_solve:
            with _Peak() as solve:
                r = run_task(task)
            _say(f"solved the family: {solve.cpu:.1f} CPU s, {solve.peak_mb:,.0f} MB")
            out["solve"] = {**solve.row(), "method": r.method, "status": r.status}
        tracemalloc.stop()
    b = out["measure"]["before_one_task"]["peak_mb"]
    nw = out["measure"]["now_unit_chunks_to_nmf"]["peak_mb"]
    out["measure"]["peak_ratio"] = round(b / max(nw, 1e-9), 1)
    b = out["estimate_problem"]["before_dense"]["peak_mb"]
    nw = out["estimate_problem"]["now_present_rows"]["peak_mb"]
    out["estimate_problem"]["peak_ratio"] = round(b / max(nw, 1e-9), 1)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
