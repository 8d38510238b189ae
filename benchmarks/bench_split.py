"""Splitting a wide family: the critical path and CPU of one solve vs a coarse solve plus chunks.

California's tract level is dominated by one task, Los Angeles County with 2,334 tracts
(1,626 s of the level's 1,838 CPU seconds): a parent-with-children solve costs more than
linearly in its number of children. This benchmark builds synthetic county families of
``k`` tracts (about 4,300 people a tract, as in Los Angeles; the pl94 tract-level
queries with rho 0.43), and solves each

* whole: one task (failsafe, least squares, rounding: :func:`censusdp.release.topdown.tasks.run_task`);
* split (:mod:`censusdp.release.topdown.split`): the coarse problem over chunks of at most
  ``--max-children`` tracts, then one task per chunk.

For both it reports CPU seconds (``time.process_time``, which does not depend on the
machine's load), the critical path on unlimited cores (whole: the one task; split: the
coarse solve plus the longest chunk) and the error against the truth (L1 over cells, and
of the tract totals), and fits ``cpu ~ a k^b`` to the whole solves. Prints JSON.

    python benchmarks/bench_split.py                      # k = 100, 200, 400; chunks of 100
    python benchmarks/bench_split.py --k 200,800 --max-children 100,200 --seed 3
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "release" / "topdown"))

from _topdown_gen import census_subproblem  # noqa: E402

from censusdp.release.topdown.split import (  # noqa: E402
    chunk_starts,
    chunk_subproblems,
    coarse_subproblem,
)
from censusdp.release.topdown.tasks import Task, run_task  # noqa: E402

PEOPLE_PER_TRACT = 4_300
TRACT_RHO = 0.43


def _say(msg: str) -> None:
    print(f"[bench_split] {msg}", file=sys.stderr, flush=True)


def _task(sub) -> Task:
    return Task(0, "bench", 0, np.arange(sub.c), sub)


def _errors(x: np.ndarray, truth: np.ndarray) -> dict:
    return {
        "l1_cells": int(np.abs(x - truth).sum()),
        "mean_abs_tract_total": round(float(np.abs(x.sum(axis=1) - truth.sum(axis=1)).mean()), 3),
    }


def whole(sub, truth) -> dict:
    r = run_task(_task(sub))
    return {
        "cpu_s": round(r.cpu_seconds, 3),
        "wall_s": round(r.seconds, 3),
        "critical_path_cpu_s": round(r.cpu_seconds, 3),
        **_errors(r.counts, truth),
    }


def split(sub, truth, max_children: int) -> dict:
    starts = chunk_starts(sub.k, max_children)
    coarse = run_task(_task(coarse_subproblem(sub, starts)))
    x = np.zeros((sub.k, sub.c), dtype=np.int64)
    chunk_cpu = []
    for ch in chunk_subproblems(sub, starts, coarse.counts):
        r = run_task(Task(0, "bench", ch.offset, ch.kept, ch.sub))
        x[ch.offset : ch.offset + ch.sub.k][:, ch.kept] = r.counts
        chunk_cpu.append(r.cpu_seconds)
    if not np.array_equal(x.sum(axis=0), sub.parent):
        raise AssertionError("split solution does not sum to the parent")
    return {
        "max_children": max_children,
        "chunks": int(starts.size),
        "coarse_cpu_s": round(coarse.cpu_seconds, 3),
        "longest_chunk_cpu_s": round(max(chunk_cpu), 3),
        "cpu_s": round(coarse.cpu_seconds + sum(chunk_cpu), 3),
        "critical_path_cpu_s": round(coarse.cpu_seconds + max(chunk_cpu), 3),
        **_errors(x, truth),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", default="100,200,400", help="tracts per family, comma-separated")
    ap.add_argument("--max-children", default="100", help="chunk limits, comma-separated")
    ap.add_argument("--seed", type=int, default=2020)
    args = ap.parse_args(argv)
    ks = [int(v) for v in args.k.split(",")]
    limits = [int(v) for v in args.max_children.split(",")]
    rows = []
    t0 = time.perf_counter()
    for k in ks:
        sub, truth = census_subproblem(
            np.random.default_rng(args.seed + k),
            n_children=k,
            n_people=PEOPLE_PER_TRACT * k,
            rho=TRACT_RHO,
        )
        _say(f"k={k}: {sub.c} kept cells, whole ...")
        row = {"k": k, "people": int(truth.sum()), "cells": sub.c, "whole": whole(sub, truth)}
        row["split"] = []
        for m in limits:
            if m < k:
                _say(f"k={k}: split in chunks of <= {m} ...")
                row["split"].append(split(sub, truth, m))
        w = row["whole"]
        for s in row["split"]:
            s["critical_path_ratio"] = round(s["critical_path_cpu_s"] / w["cpu_s"], 4)
            s["cpu_ratio"] = round(s["cpu_s"] / w["cpu_s"], 4)
            s["l1_ratio"] = round(s["l1_cells"] / max(w["l1_cells"], 1), 4)
        rows.append(row)
        _say(json.dumps(row))
    fit = None
    if len(rows) >= 2:
        lk = np.log([r["k"] for r in rows])
        lc = np.log([max(r["whole"]["cpu_s"], 1e-6) for r in rows])
        b, a = np.polyfit(lk, lc, 1)
        fit = {"cpu_s": f"{np.exp(a):.3g} * k^{b:.2f}", "exponent": round(float(b), 3)}
    doc = {
        "benchmark": "split",
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "people_per_tract": PEOPLE_PER_TRACT,
        "rho": TRACT_RHO,
        "seed": args.seed,
        "seconds_total": round(time.perf_counter() - t0, 1),
        "whole_cpu_fit": fit,
        "families": rows,
    }
    json.dump(doc, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
