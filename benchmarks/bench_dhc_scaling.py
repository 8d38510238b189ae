"""DHC scaling: the per-step and per-level costs of ``dhc-2020`` releases, and what they
project for full generated Vermont on 2 cores and for the US on ``N`` cores.

Runs ``censusdp run --preset dhc-2020`` (persons and households, seed 1, in process) on
generated states at small scales, each in a fresh subprocess so its peak memory is its
own (``bench_scaling.run_config``), or reads their manifests (``--from-manifests``), and
reads from each manifest

* the measuring CPU (noise and NMF part files, the tasks'), per noisy value, so the
  projection follows the NMF writer's cost as it changes;
* per run (persons, the units by ``tenvacgq``, the households) and level the tasks' CPU
  and the driver's share of their work (``bench_scaling.summarize``), and the longest task;
* the writing (MDF and tables, their part tasks) and the self-check of the files (its
  NMF-reading tasks).

Each cost is scaled by what it grows with (noisy values, blocks, persons) at its marginal
rate between the smallest and the largest run, so a fixed start-up cost is not multiplied; the
projection on ``C`` cores is the parallel work (measuring, estimation tasks, MDF parts,
the self-check's parts) over ``C`` cores, each level no faster than its longest task,
plus the driver's serial work. The peak memory is each run's own record.

``--compare OLD_SRC`` runs the self-check of the smallest run (what this round made
cheaper: the release is not changed) with the code under ``OLD_SRC`` (e.g. the main
checkout's ``src``) and with this checkout's, each in its own process, and reports both
CPU seconds and whether their verdicts are the same.

    python benchmarks/bench_dhc_scaling.py --configs VT:0.01,VT:0.03 --work /tmp/dhc
    python benchmarks/bench_dhc_scaling.py --from-manifests A/manifest.json B/manifest.json
    python benchmarks/bench_dhc_scaling.py --from-manifests A/manifest.json --compare ../main/src

Prints one JSON object on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import say  # noqa: E402
from bench_scaling import (  # noqa: E402
    US_PERSONS,
    US_UNITS,
    run_config,
    self_check_task_cpu,
    summarize,
)

FULL_VERMONT = {"blocks": 32_591, "persons": 625_741}
"""Generated Vermont at scale 1 (seed 1): its blocks and persons."""

PROCESS_WORK = ("read", "mdf", "self_check_driver", "rest")
"""The driver's serial phases (what no added core shortens)."""


def costs(m: dict) -> dict:
    """One DHC run's sizes and CPU seconds by step, from its manifest (and the benchmark's
    record of the process's CPU, ``_bench``, when it ran here)."""
    s = summarize(m)
    t = m.get("timings", {})
    levels = s["levels"]
    task_levels = sum(lv["cpu_s"] for lv in levels)
    parts = {
        "measure": t.get("measure_task_cpu", 0.0) + t.get("write_parts_task_cpu", 0.0),
        "estimate_tasks": task_levels,
        "mdf_parts": t.get("write_mdf_task_cpu", 0.0) + t.get("check_mdf_task_cpu", 0.0),
        "self_check_parts": self_check_task_cpu(t),
        "read": t.get("read_cpu", 0.0),
        "mdf": max(
            t.get("write_release_cpu", 0.0)
            + t.get("validate_cpu", 0.0)
            - t.get("write_mdf_task_cpu", 0.0)
            - t.get("check_mdf_task_cpu", 0.0),
            0.0,
        ),
        "self_check_driver": max(
            t.get("validate_files_cpu", 0.0) - t.get("validate_files_task_cpu", 0.0), 0.0
        ),
    }
    # the estimation's driver side (reading the NMF's footers, aggregating, the levels'
    # bookkeeping), where the manifest records the runs' CPU
    est_cpu = sum(v for k, v in t.items() if k.startswith("estimate_") and k.endswith("_cpu"))
    parts["estimate_driver"] = max(est_cpu - task_levels, 0.0) if est_cpu else 0.0
    cpu = s["cpu_s"] or 0.0
    parts["rest"] = max(cpu - sum(parts.values()), 0.0) if cpu else 0.0
    values = s["noisy_values"]
    return {
        "blocks": s["blocks"],
        "persons": s["persons"],
        "noisy_values": values,
        "measured_geounits": _measured_geounits(m),
        "wall_s": s["wall_s"],
        "cpu_s": round(cpu, 1),
        "peak_rss_mb": s["peak_rss_mb"],
        "cpu_by_step_s": {k: round(v, 2) for k, v in parts.items()},
        "measure_cpu_per_million_values_s": round(parts["measure"] / max(values, 1) * 1e6, 4),
        "levels": levels,
    }


def _measured_geounits(m: dict) -> int:
    """Geounits with noisy values in both runs (the spine's, less the bypassed)."""
    spine = m.get("spine", {})
    total = 0
    for rec in (spine, spine.get("units", {})):
        units = sum(rec.get("geounits", {}).values())
        bypass = rec.get("bypass", {})
        total += units - sum(v for v in bypass.values() if isinstance(v, int))
    return total


SCALES = {
    "measure": "noisy_values",
    "estimate_tasks": "blocks",
    "estimate_driver": "blocks",
    "mdf_parts": "persons",
    "self_check_parts": "noisy_values",
    "read": "persons",
    "mdf": "persons",
    "self_check_driver": "noisy_values",
    "rest": "blocks",
}
"""What each step's cost grows with."""


def scaled(small: dict, large: dict, size: dict) -> dict[str, float]:
    """Each step's CPU seconds at ``size`` (blocks, persons, noisy values): the large run's
    plus its marginal rate between the two runs (its average rate without a smaller run,
    or where the difference is not positive) times the growth."""
    out = {}
    for step, by in SCALES.items():
        big = large["cpu_by_step_s"][step]
        rate = big / max(large[by], 1)
        grow = large[by] - small[by]
        if small is not large and grow > 0:
            marginal = (big - small["cpu_by_step_s"][step]) / grow
            rate = marginal if marginal > 0 else rate
        out[step] = big + rate * (size[by] - large[by])
    return out


def critical_paths(runs: list[dict]) -> dict[str, float]:
    """Per (run, level) the longest measured task (CPU seconds) over ``runs``."""
    out: dict[str, float] = {}
    for r in runs:
        for lv in r["levels"]:
            key = f"{lv['run']}/{lv['geolevel']}"
            out[key] = max(out.get(key, 0.0), lv["critical_path_cpu_s"])
    return out


def project(small: dict, large: dict, size: dict, cores: list[int], runs: list[dict]) -> dict:
    """Minutes on each of ``cores``: parallel steps over the cores (estimation no faster
    than the longest task of each level), plus the driver's serial steps."""
    cpu = scaled(small, large, size)
    grow = size["blocks"] / max(large["blocks"], 1)
    level_cpu = {f"{lv['run']}/{lv['geolevel']}": lv["cpu_s"] * grow for lv in large["levels"]}
    # the estimation's task CPU as scaled above, split over the levels as measured
    share = cpu["estimate_tasks"] / max(sum(level_cpu.values()), 1e-9)
    level_cpu = {k: v * share for k, v in level_cpu.items()}
    longest = critical_paths(runs)
    serial = sum(cpu[k] for k in PROCESS_WORK) + cpu["estimate_driver"]
    parallel = cpu["measure"] + cpu["mdf_parts"] + cpu["self_check_parts"]
    out: dict = {
        "size": size,
        "cpu_s_by_step": {k: round(v, 1) for k, v in cpu.items()},
        "core_hours": round(sum(cpu.values()) / 3600, 2),
        "by_cores": {},
    }
    for n in cores:
        est = sum(max(v / n, longest.get(k, 0.0)) for k, v in level_cpu.items())
        total = parallel / n + est + serial
        out["by_cores"][str(n)] = {
            "minutes": round(total / 60, 1),
            "measuring_min": round(cpu["measure"] / n / 60, 1),
            "estimating_min": round((est + cpu["estimate_driver"]) / 60, 1),
            "writing_min": round((cpu["mdf_parts"] / n + cpu["mdf"]) / 60, 1),
            "self_check_min": round(
                (cpu["self_check_parts"] / n + cpu["self_check_driver"]) / 60, 1
            ),
            "other_min": round((cpu["read"] + cpu["rest"]) / 60, 1),
        }
    return out


def self_check(run: Path) -> dict:
    """The self-check of ``run`` (``validate_run`` as a release runs it, its NMF parts
    counted by tasks of an in-process executor) with whatever ``censusdp`` is imported
    (the caller's ``PYTHONPATH``): its CPU seconds, its tasks', and its verdicts."""
    from censusdp.execution import make_executor
    from censusdp.release.validate import validate_run

    c0 = time.process_time()
    report = validate_run(run, executor=make_executor(1, kind="inprocess"))
    return {
        "cpu_s": round(time.process_time() - c0, 2),
        "task_cpu_s": round(report.task_cpu_seconds, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "checks": report.to_dict(),
    }


def compare(run: Path, old_src: str) -> dict:
    """The self-check of ``run`` by the code under ``old_src`` and by this checkout's,
    each in its own process: their CPU seconds and whether their verdicts are the same."""
    new_src = str(Path(__file__).resolve().parent.parent / "src")
    result: dict = {"run": str(run)}
    for name, src in (("old", old_src), ("new", new_src)):
        say(f"self-check of {run.name} with the {name} code ({src})")
        env = {**os.environ, "PYTHONPATH": src}
        cmd = [sys.executable, __file__, "--self-check", str(run)]
        proc = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
        result[name] = json.loads(proc.stdout)
    checks = [result[k].pop("checks") for k in ("old", "new")]
    result["same_verdicts"] = checks[0] == checks[1]
    result["ok"] = bool(checks[1].get("ok"))
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="VT:0.01,VT:0.03", help="STATE:SCALE,...")
    ap.add_argument("--cores", default="64,512,4096", help="Spark cores of the US projection")
    ap.add_argument("--work", default=None, help="work directory (default: a temp dir)")
    ap.add_argument("--from-manifests", nargs="*", default=None, help="skip runs; read these")
    ap.add_argument("--compare", default=None, metavar="OLD_SRC", help="previous code's src")
    ap.add_argument("--self-check", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.self_check:  # the child of --compare
        print(json.dumps(self_check(Path(args.self_check))))
        return
    work = Path(args.work or tempfile.mkdtemp(prefix="censusdp_dhc_scaling_"))
    work.mkdir(parents=True, exist_ok=True)
    if args.from_manifests:
        paths = [Path(p) for p in args.from_manifests]
        manifests = [json.loads(p.read_text()) for p in paths]
        run_dirs = [p.parent for p in paths]
    else:
        manifests, run_dirs = [], []
        for item in args.configs.split(","):
            state, scale = item.split(":")
            manifests.append(run_config(state, float(scale), work, extra=["--preset", "dhc-2020"]))
            run_dirs.append(work / f"run_{state}_{float(scale):g}_inprocess")
    rows = sorted((costs(m) for m in manifests), key=lambda r: r["blocks"])
    small, large = rows[0], rows[-1]
    values_per_block = large["noisy_values"] / max(large["blocks"], 1)
    vermont = {**FULL_VERMONT, "noisy_values": int(values_per_block * FULL_VERMONT["blocks"])}
    us = {
        "blocks": US_UNITS["Block"],
        "persons": US_PERSONS,
        "noisy_values": int(values_per_block * US_UNITS["Block"]),
    }
    result: dict = {
        "benchmark": "dhc_scaling",
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
        },
        "runs": rows,
        "full_vermont": project(small, large, vermont, [1, 2], rows),
        "us": project(small, large, us, [int(c) for c in args.cores.split(",")], rows),
        "assumptions": (
            "noisy values per block and per-level task CPU per block as on the largest run; "
            "each step scaled at its marginal rate between the two runs by what it grows "
            "with; a level no faster than its longest measured task; the driver's steps "
            "serial"
        ),
    }
    if args.compare:
        smallest = run_dirs[
            min(range(len(manifests)), key=lambda i: manifests[i]["geounits"]["Block"])
        ]
        result["compare_self_check"] = compare(smallest, args.compare)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
