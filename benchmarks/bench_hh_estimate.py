"""The household run's estimation: the solver chain before and after its household row.

A generated state (default Vermont x0.01, seed 1) is read into its household histogram
and measured in memory with ``ddp-2010-households`` (no NMF: the measuring speed is
``bench_hh_measure.py``'s), then estimated top-down twice from the same measurements,
in this process, the runs alternating:

* ``previous``: the chain without the row "definite Hessian, capped totals" (the active
  set first on block families: it cycled on the housing-unit caps, then the ADMM);
* ``now``: the chain of ``censusdp.release.topdown.solvers.chain`` (Clarabel first there).

Printed (JSON): per geolevel the CPU seconds of each, the backends used, and the L1
error against the truth (households by cell and by geounit total), and whether the two
released histograms are equal. The ratio ``previous / now`` is the comparison; the
machine's load is printed beside it.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_hh_estimate.py --scale 0.01
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from collections import Counter
from pathlib import Path
from unittest import mock

import numpy as np

from _harness import cached_input, say
from censusdp.data.geography import GeoLevels
from censusdp.data.schema import get_schema
from censusdp.io.budget_files import load_preset
from censusdp.io.cef_stream import read_cef_blocks
from censusdp.privacy.randomness import RandomSource
from censusdp.release.estimation import person_bounds
from censusdp.release.household_consistency import household_bounds, household_root_cap
from censusdp.release.measure import measure
from censusdp.release.topdown import tasks as tasks_mod
from censusdp.release.topdown.driver import TopDownOptions, run_topdown
from censusdp.release.topdown.solvers import chain

HOUSEHOLD_ROW = "definite Hessian, capped totals, > 64 cells, not one large child"


def _estimate(ms, h, inv, previous: bool) -> dict:
    """One household TopDown, CPU seconds and backends per level."""
    table = tuple(r for r in chain.AUTO_CHAIN if not (previous and r.when == HOUSEHOLD_ROW))
    cpu: Counter = Counter()
    methods: dict[int, Counter] = {}
    run = tasks_mod.run_task

    def timed(task):
        c = time.process_time()
        r = run(task)
        cpu[task.level + 1] += time.process_time() - c
        methods.setdefault(task.level + 1, Counter())[r.method] += 1
        return r

    cap = household_root_cap(person_bounds(inv, h))
    bounds = household_bounds(inv.housing_units, h)
    with (
        mock.patch.object(chain, "AUTO_CHAIN", table),
        mock.patch.object(tasks_mod, "run_task", timed),
    ):
        c = time.process_time()
        res = run_topdown(ms, h, bounds, TopDownOptions(group_variable=None, root_cap=cap))
        total = time.process_time() - c
    return {"histograms": res.histograms, "cpu": cpu, "methods": methods, "total": total}


def _l1(released, truth) -> dict:
    diff = abs(released - truth)
    tot = np.abs(np.asarray(released.sum(axis=1)) - np.asarray(truth.sum(axis=1)))
    return {"cells": int(diff.sum()), "totals": int(tot.sum())}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", type=Path, help="a generated state (default: VT, seed 1)")
    ap.add_argument("--scale", type=float, default=0.01, help="of the default input")
    ap.add_argument("--work", type=Path, help="where the default input is generated (cached)")
    ap.add_argument("--repeats", type=int, default=1, help="runs of each (least CPU kept)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_hh_estimate_") as tmp:
        work = args.work or Path(tmp)
        input_dir = args.input or cached_input(work, "VT", args.scale, seed=1)
        persons, households = load_preset("ddp-2010"), load_preset("ddp-2010-households")
        cef = read_cef_blocks(
            input_dir,
            GeoLevels.from_pairs(list(persons.geolevels)),
            get_schema(persons.schema),
            with_units="households",
        )
        h, inv = cef.hierarchy, cef.invariants
        plan = [(m.geolevel, m.query, m.mechanism) for m in households.measurements()]
        truth = h.aggregate(cef.households)
        ms = measure(truth, h, get_schema(households.schema), plan, RandomSource.seeded(1))
        say(f"measured {h.n_units(h.n_levels - 1):,} blocks")
        runs: dict[str, dict] = {}
        for _ in range(args.repeats):
            for key in ("previous", "now"):
                r = _estimate(ms, h, inv, previous=key == "previous")
                if key not in runs or r["total"] < runs[key]["total"]:
                    runs[key] = r
                say(f"{key}: {r['total']:.1f} CPU s")
    names = [g.name for g in h.geolevels]
    out = {
        "benchmark": "bench_hh_estimate",
        "machine": platform.platform(),
        "cpus": os.cpu_count(),
        "load_average": [round(v, 2) for v in os.getloadavg()],
        "input": str(args.input or f"generated VT x{args.scale:g} seed 1"),
        "blocks": h.n_units(h.n_levels - 1),
        "households": int(cef.households.sum()),
        "cpu_seconds": {
            k: {"total": round(r["total"], 2)}
            | {names[lv]: round(s, 2) for lv, s in sorted(r["cpu"].items())}
            for k, r in runs.items()
        },
        "methods": {
            k: {names[lv]: dict(m) for lv, m in sorted(r["methods"].items())}
            for k, r in runs.items()
        },
        "l1_vs_truth": {
            k: {names[lv]: _l1(r["histograms"][lv], truth[lv]) for lv in range(len(names))}
            for k, r in runs.items()
        },
        "same_histograms": all(
            (a != b).nnz == 0
            for a, b in zip(runs["previous"]["histograms"], runs["now"]["histograms"], strict=True)
        ),
    }
    out["speedup"] = round(
        out["cpu_seconds"]["previous"]["total"] / out["cpu_seconds"]["now"]["total"], 2
    )
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
