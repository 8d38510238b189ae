"""End-to-end release benchmark: generate a state, run the pl94-2020 release, print JSON.

Runs the same pipeline twice on the same input and seed, once with the structure-
exploiting ADMM least squares (``--method auto``) and once with the generic solver
(Clarabel, ``--method clarabel``), and reports per-step and per-level timings, peak
memory (child processes included) and the speed-up ratio.

    .venv/bin/python benchmarks/bench_release.py --state VT --scale 1.0 --workers 2
    .venv/bin/python benchmarks/bench_release.py --state VT --scale 0.1 --methods auto,clarabel
"""

from __future__ import annotations

import argparse
import json
import resource

from _harness import add_input_arguments, generate, run_command, timed, workdir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    add_input_arguments(ap)
    ap.add_argument("--methods", default="auto,clarabel")
    args = ap.parse_args()
    base = workdir(args, "censusdp-bench-")
    cef = base / "cef"
    result: dict = {"state": args.state, "scale": args.scale, "workers": args.workers}
    result["generate_seconds"] = generate(args, cef)
    runs = {}
    for method in args.methods.split(","):
        out = base / f"run-{method}"
        wall, _ = timed(run_command(cef, out, args, "--method", method, "--overwrite"))
        m = json.loads((out / "manifest.json").read_text())
        runs[method] = {
            "wall_seconds": round(wall, 2),
            "timings": m["timings"],
            "persons": m.get("persons_released"),
            "levels": {
                lv["geolevel"]: {
                    "tasks": lv["tasks"],
                    "wall_seconds": lv["wall_seconds"],
                    "task_seconds": lv["task_seconds"],
                    "methods": lv["methods"],
                }
                for lv in m["estimation"]["persons"]
            },
            "validation_ok": m["validation"]["ok"],
        }
    result["runs"] = runs
    result["peak_rss_mb_children"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    if "auto" in runs and "clarabel" in runs:
        result["speedup_estimate_clarabel_over_auto"] = round(
            runs["clarabel"]["timings"]["estimate_persons"]
            / runs["auto"]["timings"]["estimate_persons"],
            2,
        )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
