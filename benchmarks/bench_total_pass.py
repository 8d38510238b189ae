"""Benchmark of pl94's total-only least-squares pass (production's ``isoTot`` pass 0) on
wide real families: the least squares on the group sums (``auto`` now) against the
previous cell-level chain (interior point first, then Clarabel) and each backend alone,
in the same process, one after another; and both passes of the family as the task runs
them (``solve_l2_passes``).

1. Capture (``--input CEF --staging DIR --save FOLDER``): resume an interrupted
   ``censusdp run`` of ``CEF`` from a *copy* of its resumable staging directory ``DIR``
   (renamed into place for the run, so copy it first: ``cp -al``) whose journal has
   the levels to capture removed, in process, and keep the widest County family (a
   state's counties) and the widest Tract families' coarse problems (``--tracts``) after
   ``make_feasible``, with their passes; the run stops there.
2. Kernels (``--load FOLDER``): each family's pass 0 by ``--methods``.

    python benchmarks/bench_total_pass.py --input CA_1 --staging .run.partial-1 --save fam
    python benchmarks/bench_total_pass.py --load fam

Prints one JSON document. The machine may be shared: CPU seconds are steadier than wall
seconds under load; both are reported with the load average.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import pickle  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

METHODS = ("auto", "cells", "clarabel", "interior", "activeset")


class _Stop(BaseException):
    """Raised inside the pipeline once the families have been captured (not an
    ``Exception``: the command line must not turn it into an error message)."""


def _capture(cef: Path, staging: Path, n_tracts: int, seed: int) -> list:
    import censusdp.release.topdown.tasks as topdown_tasks
    from censusdp.cli import main
    from censusdp.release.topdown.failsafe import make_feasible

    families: list[tuple[str, object, object]] = []
    orig = topdown_tasks.run_task

    def patched(task):
        if task.level >= 2 and not task.chunks:
            raise _Stop  # the coarse tasks come first, the widest first
        sub = task.subproblem()
        if task.level == 1 and sub.k > 1:
            name = f"County family of {task.parent_geocode}"
            families.append((name, make_feasible(sub)[0], task.l2_passes))
        if task.level == 2:
            name = f"Tract coarse family of {task.parent_geocode}"
            families.append((name, make_feasible(sub)[0], task.l2_passes))
            if sum(f[0].startswith("Tract") for f in families) >= n_tracts:
                raise _Stop
        return orig(task)

    out = staging.parent / staging.name.split(".partial-")[0].lstrip(".")
    topdown_tasks.run_task = patched
    try:  # the interrupted command, resumed in process
        main(["run", "--input", str(cef), "--out", str(out), "--seed", str(seed), "--resume",
              "--executor", "inprocess", "--quiet"])  # fmt: skip
    except _Stop:
        pass
    finally:
        topdown_tasks.run_task = orig
    county = [f for f in families if f[0].startswith("County")]
    tracts = sorted((f for f in families if f[0].startswith("Tract")), key=lambda f: -f[1].k)
    return sorted(county, key=lambda f: -f[1].k)[:1] + tracts[:n_tracts]


def _solve(sub, method: str):
    from censusdp.release.topdown.solvers import groups
    from censusdp.release.topdown.solvers.least_squares import solve_l2

    if method != "cells":
        return solve_l2(sub, method=method)
    real = groups.group_reduction
    groups.group_reduction = lambda s: None  # the chain before: on the cells
    try:
        return solve_l2(sub)
    finally:
        groups.group_reduction = real


def _timed(fn, *args) -> tuple[object, dict]:
    c0, t0 = time.process_time(), time.perf_counter()
    res = fn(*args)
    return res, {
        "cpu_seconds": round(time.process_time() - c0, 2),
        "wall_seconds": round(time.perf_counter() - t0, 2),
    }


def _kernels(families: list, methods: tuple[str, ...], passes_too: bool = True) -> list[dict]:
    from censusdp.release.topdown.multipass import _restrict, solve_l2_passes
    from censusdp.release.topdown.solvers import groups

    rows = []
    for name, sub, passes in families:
        pass0 = _restrict(sub, passes.queries[0])
        row: dict = {"family": name, "children": sub.k, "kept_cells": sub.c, "pass0": {}}
        for method in methods:
            res, t = _timed(_solve, pass0, method)
            row["pass0"][method] = {
                **t,
                "attempts": [list(a) for a in res.attempts],
                "objective": round(res.objective, 4),
                "max_violation": float(res.max_violation),
                "totals_max_abs_diff_vs_auto": None,
                "_totals": res.x.sum(axis=1),
            }
            print(json.dumps({name: {method: t}}), file=sys.stderr, flush=True)
        ref = row["pass0"]["auto"]["_totals"]
        for r in row["pass0"].values():
            r["totals_max_abs_diff_vs_auto"] = round(float(abs(r.pop("_totals") - ref).max()), 6)
        # both passes, as the family's task runs them, before (cells) and now
        real = groups.group_reduction
        for label in ("cells", "auto") if passes_too else ():
            if label == "cells":
                groups.group_reduction = lambda s: None
            try:
                res, t = _timed(solve_l2_passes, sub, passes)
            finally:
                groups.group_reduction = real
            row[f"both_passes_{label}"] = {**t, "method": res.method}
            print(json.dumps({name: {f"both_passes_{label}": t}}), file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", type=Path, help="the CEF of the interrupted run (capture)")
    ap.add_argument("--staging", type=Path, help="a copy of its resumable staging directory")
    ap.add_argument("--seed", type=int, default=1, help="the interrupted run's --seed")
    ap.add_argument("--tracts", type=int, default=2, help="widest Tract coarse families kept")
    ap.add_argument("--save", type=Path, help="pickle the captured families here")
    ap.add_argument("--load", type=Path, help="read families saved by --save")
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument(
        "--pass0-only", action="store_true", help="skip both passes (the second is long)"
    )
    ap.add_argument("--only", nargs="+", help="keep the families whose name has one of these")
    args = ap.parse_args(argv)
    if args.load:
        families = [pickle.loads(p.read_bytes()) for p in sorted(args.load.glob("*.pkl"))]
        if args.only:
            families = [f for f in families if any(o in f[0] for o in args.only)]
    else:
        if not (args.input and args.staging):
            ap.error("give --load, or --input and --staging to capture")
        families = _capture(args.input, args.staging, args.tracts, args.seed)
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            for f in families:
                (args.save / (f[0].replace(" ", "_") + ".pkl")).write_bytes(pickle.dumps(f))
    out = {
        "load_average": os.getloadavg(),
        "families": _kernels(families, tuple(args.methods), not args.pass0_only),
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
