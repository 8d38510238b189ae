"""Benchmark of the ADMM's group projection (``solvers.admm._LaminarProjector``).

Peers in the same run: the sweep of the sorted breakpoints (now) against the former
evaluation of the total at every breakpoint from scratch (``FormerProjector`` of
``tests/release/topdown/test_admm_projector.py``, which checks that the two agree), on
``k`` children of ``G`` groups: G = 8 (``hhgq``), 63 (``cenrace``) and 2,016 (the
``pl94`` cross a DHC person run held to a P.L. 94 release has), k = 10 and 100. The
rows are that test's random cases: exact, bounded and unbounded groups, total bounds
binding or not, about 1.5 kept cells a group.

Usage::

    .venv/bin/python benchmarks/bench_admm_projector.py [--groups 8 63 2016] [--children 10 100]

Prints one JSON document to stdout: per case the CPU seconds of one projection by each
peer (``time.process_time``, repeated until a peer has spent ``--min-cpu`` seconds), the
ratio and the largest difference of their answers. BLAS is limited to one thread.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "release" / "topdown"))

from test_admm_projector import FormerProjector, random_case  # noqa: E402

import censusdp  # noqa: E402
from censusdp.release.topdown.solvers.admm import _LaminarProjector  # noqa: E402


def _cpu_per_call(project, v: np.ndarray, min_cpu: float) -> tuple[float, np.ndarray]:
    """CPU seconds of one call of ``project(v)`` (the mean over calls until ``min_cpu``
    seconds are spent, at least one) and its answer."""
    calls, t0 = 0, time.process_time()
    while True:
        out = project(v)
        calls += 1
        spent = time.process_time() - t0
        if spent >= min_cpu:
            return spent / calls, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, nargs="+", default=[8, 63, 2016])
    ap.add_argument("--children", type=int, nargs="+", default=[10, 100])
    ap.add_argument("--min-cpu", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=34)
    args = ap.parse_args()
    cases = []
    for n_groups in args.groups:
        for k in args.children:
            rng = np.random.default_rng(args.seed)
            sub, free = random_case(rng, k, n_groups)
            v = rng.normal(0.0, 3.0, size=(sub.k, sub.c))
            print(f"G={n_groups} k={k} c={sub.c}", file=sys.stderr)
            sweep, x_new = _cpu_per_call(_LaminarProjector(sub, free), v, args.min_cpu)
            former, x_old = _cpu_per_call(FormerProjector(sub, free), v, args.min_cpu)
            cases.append(
                {
                    "groups": n_groups,
                    "children": k,
                    "cells": sub.c,
                    "sweep_cpu_s": sweep,
                    "former_cpu_s": former,
                    "speedup": former / sweep,
                    "max_abs_difference": float(np.abs(x_new - x_old).max()),
                }
            )
    doc = {
        "benchmark": "admm_projector",
        "censusdp": censusdp.__version__,
        "load_average": os.getloadavg()[0],
        "cases": cases,
    }
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
