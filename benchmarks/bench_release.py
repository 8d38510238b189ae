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
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _run(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--state", default="VT")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--methods", default="auto,clarabel")
    ap.add_argument("--dir", default=None, help="working directory (default: a temp dir)")
    args = ap.parse_args()
    exe = str(Path(sys.executable).with_name("censusdp"))
    base = Path(args.dir or tempfile.mkdtemp(prefix="censusdp-bench-"))
    cef = base / "cef"
    result: dict = {"state": args.state, "scale": args.scale, "workers": args.workers}
    result["generate_seconds"] = _run(
        [
            exe,
            "generate",
            "--state",
            args.state,
            "--seed",
            str(args.seed),
            "--out",
            str(cef),
            "--scale",
            str(args.scale),
        ]
    )
    runs = {}
    for method in args.methods.split(","):
        out = base / f"run-{method}"
        wall = _run(
            [
                exe,
                "run",
                "--input",
                str(cef),
                "--out",
                str(out),
                "--seed",
                str(args.seed),
                "--workers",
                str(args.workers),
                "--method",
                method,
                "--overwrite",
                "--quiet",
            ]
        )
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
