"""Benchmark of the active-set least squares: dhc-lite-demo against pl94-2020, new chain
against the previous one, in the same run.

1. End to end: generate a state (``--state``, ``--scale``), run ``pl94-2020`` and
   ``dhc-lite-demo`` with ``--method auto`` (active set first) and ``dhc-lite-demo`` with
   ``--method clarabel`` (the previous chain for dhc-lite, where Clarabel came first at
   every level); report wall and CPU seconds (children's user + system), the dhc-lite /
   pl94 ratios (target: at most 3) and per-level least-squares seconds and methods.
2. Kernels: every subproblem of the dhc-lite run (captured by re-estimating from its
   noisy measurements) is solved by the new chain (``auto``) and by the previous one
   (``clarabel``); per geolevel, the summed seconds and the largest objective gap.

    .venv/bin/python benchmarks/bench_active_set.py --state VT --scale 0.05 --workers 2
    .venv/bin/python benchmarks/bench_active_set.py --state VT --scale 1 --skip-kernels

Prints one JSON document. The machine may be shared: CPU seconds are more stable than
wall seconds under load, and both are reported.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from _harness import add_input_arguments, generate, run_command, timed, workdir  # noqa: E402


def _release(cef: Path, out: Path, preset: str, method: str, args) -> dict:
    wall, cpu = timed(
        run_command(cef, out, args, "--preset", preset, "--method", method, "--overwrite")
    )
    m = json.loads((out / "manifest.json").read_text())
    return {
        "wall_seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2),
        "estimate_persons_seconds": round(m["timings"]["estimate_persons"], 2),
        "levels": {
            lv["geolevel"]: {
                "tasks": lv["tasks"],
                "l2_seconds": lv["l2_seconds"],
                "task_cpu_seconds": lv["task_cpu_seconds"],
                "methods": lv["methods"],
                "fallbacks": lv["fallbacks"],
            }
            for lv in m["estimation"]["persons"]
        },
        "validation_ok": m["validation"]["ok"],
    }


def _kernels(run_dir: Path, work: Path) -> dict:
    """Re-estimate ``run_dir`` in process, solving each subproblem with both chains."""
    import censusdp.release.topdown.tasks as topdown_tasks
    from censusdp.release.pipeline import reestimate
    from censusdp.release.topdown.solvers.least_squares import solve_l2

    per_level: dict[str, dict] = {}
    orig = topdown_tasks.run_task

    def patched(task):
        sub = task.sub
        if task.l2_passes is None and not (sub.parent is not None and sub.k == 1):
            name = "root" if task.level < 0 else f"children of level {task.level}"
            row = per_level.setdefault(
                name,
                {
                    "subproblems": 0,
                    "new_seconds": 0.0,
                    "previous_seconds": 0.0,
                    "max_relative_objective_gap": 0.0,
                    "new_methods": {},
                },
            )
            t = time.process_time()
            new = solve_l2(sub)
            t_new = time.process_time() - t
            t = time.process_time()
            old = solve_l2(sub, method="clarabel")
            t_old = time.process_time() - t
            row["subproblems"] += 1
            row["new_seconds"] += t_new
            row["previous_seconds"] += t_old
            gap = (new.objective - old.objective) / max(1.0, abs(old.objective))
            row["max_relative_objective_gap"] = max(row["max_relative_objective_gap"], gap)
            row["new_methods"][new.method] = row["new_methods"].get(new.method, 0) + 1
        return orig(task)

    topdown_tasks.run_task = patched
    try:
        reestimate(run_dir, work, overwrite=True, workers=1, executor="inprocess")
    finally:
        topdown_tasks.run_task = orig
    for row in per_level.values():
        row["speedup"] = round(row["previous_seconds"] / max(row["new_seconds"], 1e-9), 1)
        row["new_seconds"] = round(row["new_seconds"], 3)
        row["previous_seconds"] = round(row["previous_seconds"], 3)
    return per_level


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    add_input_arguments(ap, scale=0.05)
    ap.add_argument("--skip-previous", action="store_true", help="no --method clarabel run")
    ap.add_argument("--skip-kernels", action="store_true", help="no per-subproblem comparison")
    args = ap.parse_args()
    base = workdir(args, "censusdp-bench-as-")
    cef = base / "cef"
    generate(args, cef)
    result: dict = {
        "state": args.state,
        "scale": args.scale,
        "workers": args.workers,
        "load_average_at_start": os.getloadavg()[0],
    }
    runs = {
        "pl94-2020 auto": _release(cef, base / "pl94", "pl94-2020", "auto", args),
        "dhc-lite-demo auto": _release(cef, base / "dhc", "dhc-lite-demo", "auto", args),
    }
    if not args.skip_previous:
        runs["dhc-lite-demo clarabel (previous chain)"] = _release(
            cef, base / "dhc-prev", "dhc-lite-demo", "clarabel", args
        )
    result["runs"] = runs
    pl, dhc = runs["pl94-2020 auto"], runs["dhc-lite-demo auto"]
    result["dhc_over_pl94_wall"] = round(dhc["wall_seconds"] / pl["wall_seconds"], 2)
    result["dhc_over_pl94_cpu"] = round(dhc["cpu_seconds"] / pl["cpu_seconds"], 2)
    if not args.skip_previous:
        prev = runs["dhc-lite-demo clarabel (previous chain)"]
        result["previous_over_new_dhc_wall"] = round(prev["wall_seconds"] / dhc["wall_seconds"], 2)
        result["previous_over_new_dhc_cpu"] = round(prev["cpu_seconds"] / dhc["cpu_seconds"], 2)
    if not args.skip_kernels:
        result["kernels"] = _kernels(base / "dhc", base / "dhc-re")
    result["load_average_at_end"] = os.getloadavg()[0]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
