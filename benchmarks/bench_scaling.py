"""Scaling study: per-task costs by level, a fit of run time vs size, and a full-US projection.

Runs ``censusdp run`` (pl94-2020 + housing units, seed 1, in-process unless told
otherwise) on generated states at several scales, each in a fresh subprocess so its peak
memory is its own, and reads the per-level task statistics that every run's manifest
records (tasks, children, wall and CPU seconds of the tasks, the slowest task). From
them it reports

* per geolevel: CPU seconds per task and per child unit, and the slowest task;
* a least-squares fit of run CPU time against persons and blocks over the runs;
* the projection of a full-US run (default 8,000,000 blocks, 240,000 block groups,
  85,000 tracts, 3,221 counties, 52 states) on ``N`` Spark cores: per level,
  ``max(level CPU / N, critical path)``, where the critical path is the longest task or,
  for a family split into chunks (``--max-children``), its coarse solve plus its longest
  chunk, in CPU seconds measured on the runs (no machine load in them); plus measurement
  CPU / N, plus the driver's serial work (reading, writing the NMF and the MDF, the
  validation and the self-check), scaled by noisy values and persons;
* the memory: each run's peak (driver and, for the pool, every worker, sampled from
  ``/proc``), the per-executor memory of a pool run;
* a plot of the projection (``--plot FILE.png``);
* a peer ratio in the same run: the smallest configuration on the Spark executor
  (``local[2]``) and on the process pool, against in-process (skipped without pyspark).

    python benchmarks/bench_scaling.py                        # VT at 0.1, 0.3, 1.0
    python benchmarks/bench_scaling.py --configs VT:0.1,DE:0.5 --cores 64,512,4096
    python benchmarks/bench_scaling.py --from-manifests RUN1/manifest.json RUN2/...

Prints one JSON object on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import sampled  # noqa: E402

US_UNITS = {
    "US": 1,
    "State": 52,
    "County": 3_221,
    "Tract": 85_000,
    "BlockGroup": 240_000,
    "Block": 8_000_000,
}
"""Geounits of a national run (2020: 50 states, DC and Puerto Rico)."""

US_MAX_CHILDREN = {"State": 52, "County": 254, "Tract": 2_500, "BlockGroup": 12, "Block": 700}
"""Largest family at each level: states of the US, counties of Texas, tracts of Los
Angeles County, block groups of a tract, blocks of a block group (rural extremes)."""

US_PERSONS = 331_449_281


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _run(cmd: list[str]) -> tuple[float, float, dict]:
    """Run a command; return (wall s, its CPU s, memory: peak RSS MB of the process, of
    its largest child (a pool worker) and of the tree, sampled twice a second)."""
    wall, cpu, mem, _ = sampled(cmd)
    return wall, cpu, mem


def _censusdp() -> list[str]:
    return [sys.executable, "-m", "censusdp"]


def run_config(
    state: str, scale: float, work: Path, *, executor: str = "inprocess", extra=()
) -> dict:
    """Generate ``state`` at ``scale`` (cached) and time one release of it."""
    cef = work / f"{state}_{scale:g}"
    if not (cef / "persons.parquet").exists():
        _say(f"generate {state} scale {scale}")
        _run(
            [*_censusdp(), "generate", "--state", state, "--seed", "1", "--out", str(cef)]
            + ["--scale", str(scale), "--quiet"]
        )
    out = work / f"run_{state}_{scale:g}_{executor}"
    _say(f"run {state} scale {scale} on {executor}")
    wall, cpu, mem = _run(
        [*_censusdp(), "run", "--input", str(cef), "--out", str(out), "--seed", "1"]
        + ["--executor", executor, "--overwrite", "--quiet", *extra]
    )
    m = json.loads((out / "manifest.json").read_text())
    m["_bench"] = {
        "wall_s": wall,
        "cpu_s": cpu,
        "peak_rss_mb": mem["driver_mb"],
        "memory": mem,
        "executor": executor,
    }
    m["_bench"]["mdf_sha"] = _digest(out / "mdf_persons.parquet")
    return m


def _digest(path: Path) -> str:
    """A file's SHA-256, or a partitioned file's (its parts and index, in name order)."""
    import hashlib

    h = hashlib.sha256()
    for f in [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def self_check_task_cpu(timings: dict) -> float:
    """The CPU seconds of the self-check's part-reading tasks: those of the check of the
    NMF made beside the estimation (``check_measurements_task_cpu``, runs on a pool of
    processes since it was made) and those after it (``validate_files_task_cpu``)."""
    return timings.get("validate_files_task_cpu", 0.0) + timings.get(
        "check_measurements_task_cpu", 0.0
    )


def summarize(m: dict) -> dict:
    """The per-level task costs and the size of one run."""
    b = m.get("_bench", {})
    levels = []
    # every run the manifest records: persons and units, and a DHC household run's
    # units by tenvacgq ("unit_histogram"); other entries of it are not levels
    runs = {k: v for k, v in m.get("estimation", {}).items() if isinstance(v, list)}
    for run, run_levels in runs.items():
        for lv in run_levels:
            tasks = max(lv["tasks"], 1)
            # the tasks' CPU, plus what the driver did of their work (an in-process run
            # reads each family and builds its subproblem before the task; on other
            # executors the tasks read their own): parallel work, not the driver's
            cpu = lv.get("task_cpu_seconds", lv["task_seconds"]) + lv.get(
                "driver_build_cpu_seconds", 0.0
            )
            children = lv.get("children") or m["geounits"][lv["geolevel"]]
            levels.append(
                {
                    "run": run,
                    "geolevel": lv["geolevel"],
                    "tasks": lv["tasks"],
                    "children": children,
                    "cpu_s": round(cpu, 3),
                    "wall_s": lv["wall_seconds"],
                    "cpu_per_task_s": round(cpu / tasks, 5),
                    "cpu_per_child_s": round(cpu / max(children, 1), 6),
                    "max_task_s": lv["max_task_seconds"],
                    "max_children": lv.get("max_children"),
                    # CPU seconds of the level's critical path (longest task, or a split
                    # family's coarse solve + longest chunk); older manifests: wall
                    "critical_path_cpu_s": lv.get(
                        "critical_path_cpu_seconds",
                        lv.get("max_task_cpu_seconds", lv["max_task_seconds"]),
                    ),
                    "split_families": len(lv.get("split_families", [])),
                }
            )
    values = int(m.get("noisy_measurements", 0)) + int(m.get("noisy_measurements_units", 0))
    t = m.get("timings", {})
    # executor-independent work: task CPU of every level plus the driver's phases
    work = sum(lv["cpu_s"] for lv in levels) + sum(
        t.get(k, 0.0)
        for k in ("read", "aggregate", "measure", "write_release", "validate", "validate_files")
    )
    return {
        "work_s": round(work, 1),
        "persons": m.get("input_persons", m.get("persons_released")),
        "blocks": m["geounits"]["Block"],
        "block_groups": m["geounits"].get("BlockGroup"),
        "noisy_values": values,
        "timings": t,
        "wall_s": round(b.get("wall_s", t.get("total", 0.0)), 2),
        "cpu_s": round(b.get("cpu_s", 0.0), 2),
        # the run's own record (RUSAGE_CHILDREN of this script is a running maximum)
        "peak_rss_mb": round(m.get("peak_memory_mb", b.get("peak_rss_mb", 0.0)), 1),
        "memory": b.get("memory"),
        "executor": m.get("executor", {}).get("name"),
        "max_children": m.get("max_children"),
        "levels": levels,
    }


def fit(rows: list[dict]) -> dict:
    """Least squares (relative) of work seconds (task CPU + driver phases) on [1, persons, blocks]."""
    y_key = "work_s"
    x = np.array([[1.0, r["persons"], r["blocks"]] for r in rows], dtype=float)
    y = np.array([r[y_key] for r in rows], dtype=float)
    if len(rows) < 3:
        # not enough runs for three coefficients: time proportional to blocks
        coef = np.array([0.0, 0.0, float(y.sum() / x[:, 2].sum())])
    else:
        # relative errors: weight each run by 1 / its time, so the small runs count too
        w = 1.0 / np.maximum(y, 1e-9)
        coef, *_ = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)
    pred = x @ coef
    return {
        "target": y_key,
        "intercept_s": float(coef[0]),
        "s_per_person": float(coef[1]),
        "s_per_block": float(coef[2]),
        "relative_residuals": [float(v) for v in (pred - y) / np.maximum(y, 1e-9)],
    }


def project(
    reference: dict,
    cores: list[int],
    runs: list[dict] | None = None,
    write_fraction: float = 0.55,
    split_bench: dict | None = None,
) -> dict:
    """Full-US projection from the per-level costs of ``reference`` (the largest run).

    The critical path of each level (its longest task, or a split family's coarse solve
    plus its longest chunk, in CPU seconds) is the largest measured on ``runs`` (e.g.
    California, whose Los Angeles County is the widest county family in the US, or a
    state whose block groups have hundreds of blocks), and at least the per-child cost
    times the widest US family (capped at the run's ``max_children`` when families are
    split). The US-to-states family (52 children, exact state totals, never split) is
    taken as the largest measured state-to-counties family scaled by ``(52 / k)^2``.
    ``write_fraction`` is the share of the measurement phase spent writing the NMF on the
    driver, for manifests that do not record it. ``split_bench`` (the JSON of
    ``bench_split.py``) gives a floor for the tract level: its critical path (coarse solve
    plus longest chunk) of the widest family measured at the runs' ``max_children``, since
    a small state has no county as wide as Los Angeles (2,334 tracts of 4,300 people).
    """
    runs = runs or [reference]
    t = dict(reference["timings"])
    if "measure_task_cpu" not in t and "measure" in t:
        t["write_measurements"] = t["measure"] * write_fraction
        t["measure_task_cpu"] = t["measure"] - t["write_measurements"]
    per_child = {
        lv["geolevel"]: lv["cpu_per_child_s"]
        for lv in reference["levels"]
        if lv["run"] == "persons"
    }
    root = next(lv for lv in reference["levels"] if lv["geolevel"] == "US")
    unit_share = sum(lv["cpu_s"] for lv in reference["levels"] if lv["run"] == "units") / max(
        sum(lv["cpu_s"] for lv in reference["levels"] if lv["run"] == "persons"), 1e-9
    )
    values_scale = US_UNITS["Block"] / reference["blocks"]

    def phases(run: dict) -> dict[str, float]:
        """The driver's serial CPU seconds of a run, by what they scale with."""
        tt = run["timings"]

        def cpu(key: str) -> float:  # CPU seconds where the manifest has them (no load)
            return tt.get(f"{key}_cpu", tt.get(key, 0.0))

        out = {
            # reading builds the block histograms (CPU); "aggregate" is a wall-clock
            # mark that includes the read: only what follows it (the geography) is added
            "read": cpu("read") + max(tt.get("aggregate", 0.0) - tt.get("read", 0.0), 0.0),
            # the driver's share of the NMF: appending every chunk (before part files),
            # only recording each part's checksum once the tasks write the parts
            "nmf": cpu("write_measurements"),
            # MDF part files: what the tasks did (writing, reading back) is not the driver's
            "mdf": max(
                cpu("write_release")
                + cpu("validate")
                - tt.get("write_mdf_task_cpu", 0.0)
                - tt.get("check_mdf_task_cpu", 0.0),
                0.0,
            ),
            "self_check": max(cpu("validate_files") - tt.get("validate_files_task_cpu", 0.0), 0.0),
            "rest": 0.0,
        }
        # the rest of an in-process run's CPU (start-up, checksums, invariants): what
        # the process used beyond the tasks and the phases above
        tasks = (
            sum(lv["cpu_s"] for lv in run["levels"])
            + tt.get("measure_task_cpu", 0.0)
            + tt.get("write_parts_task_cpu", 0.0)
            + tt.get("write_mdf_task_cpu", 0.0)
            + tt.get("check_mdf_task_cpu", 0.0)
            + self_check_task_cpu(tt)
        )
        if run.get("executor") in ("in-process", "inprocess") and run.get("cpu_s"):
            out["rest"] = max(run["cpu_s"] - tasks - sum(out.values()), 0.0)
        return out

    # Each serial phase is scaled by its marginal cost between the reference and the
    # next smaller run when there is one (a fixed start-up cost is not multiplied by the
    # size of the US), else by its average cost.
    by = {"read": "persons", "nmf": "blocks", "mdf": "persons", "self_check": "blocks"}
    by["rest"] = "blocks"
    us_size = {"persons": US_PERSONS, "blocks": US_UNITS["Block"]}
    ref = phases(reference)
    smaller = [r for r in runs if r["blocks"] < reference["blocks"] and r.get("cpu_s")]
    small = max(smaller, key=lambda r: r["blocks"]) if smaller else None
    serial = {}
    for key, size in by.items():
        rate = ref[key] / max(reference[size], 1)
        if small is not None:
            grow = reference[size] - small[size]
            if grow > 0:
                rate = max((ref[key] - phases(small)[key]) / grow, 0.0)
        serial[key] = ref[key] + rate * (us_size[size] - reference[size])
    # parallel: measuring, and (part files) writing the NMF in the tasks
    measure_cpu = t.get("measure_task_cpu", 0.0) * values_scale
    part_write_cpu = t.get("write_parts_task_cpu", 0.0) * values_scale
    # MDF part tasks (writing, reading back) by persons; the self-check's part-reading
    # tasks (NMF and MDF parts) by noisy values
    persons_scale = US_PERSONS / max(reference["persons"], 1)
    mdf_task_cpu = (
        t.get("write_mdf_task_cpu", 0.0) + t.get("check_mdf_task_cpu", 0.0)
    ) * persons_scale + self_check_task_cpu(t) * values_scale
    driver_in, nmf_write = serial["read"], serial["nmf"]
    driver_out, self_check = serial["mdf"], serial["self_check"] + serial["rest"]
    driver_serial = driver_in + nmf_write + driver_out + self_check
    limit = reference.get("max_children")
    measured: dict[str, float] = {}
    family: dict[str, int] = {}
    for run in runs:
        for lv in run["levels"]:
            if lv["run"] != "persons":
                continue
            name = lv["geolevel"]
            if lv["critical_path_cpu_s"] > measured.get(name, -1.0):
                measured[name] = lv["critical_path_cpu_s"]
                family[name] = lv.get("max_children") or 1
    level_cpu = {"US": root["cpu_s"]}
    critical = {"US": root["critical_path_cpu_s"]}
    for name, n in US_UNITS.items():
        if name == "US":
            continue
        level_cpu[name] = per_child.get(name, 0.0) * n
        widest = US_MAX_CHILDREN[name] if limit is None else min(US_MAX_CHILDREN[name], limit)
        critical[name] = max(per_child.get(name, 0.0) * widest, measured.get(name, 0.0))
    if split_bench is not None and limit is not None:
        paths = [
            sp["critical_path_cpu_s"]
            for fam in split_bench["families"]
            for sp in fam["split"]
            if sp["max_children"] == limit
        ]
        if paths:
            critical["Tract"] = max(critical["Tract"], max(paths))
    if "County" in measured:
        k = max(family.get("County", 1), 1)
        critical["State"] = max(critical["State"], measured["County"] * max(52 / k, 1.0) ** 2)
    out: dict = {
        "assumptions": {
            "us_units": US_UNITS,
            "us_max_children": US_MAX_CHILDREN,
            "max_children": limit,
            "reference_blocks": reference["blocks"],
            "reference_persons": reference["persons"],
            "critical_paths_measured_on": [f"{r['blocks']} blocks" for r in runs],
            "note": "per-child CPU of each level from the reference run, the US root task as "
            "measured; a level takes max(level CPU / N, its critical path); the housing-unit "
            "run adds its measured share; measurement and part-writing task CPU (parallel), "
            "the driver's NMF recording and the self-check (serial) scale with noisy values; "
            "the driver's read, MDF write and validation (serial) scale with persons.",
        },
        "level_cpu_s": {k: round(v, 1) for k, v in level_cpu.items()},
        "critical_path_cpu_s": {k: round(v, 2) for k, v in critical.items()},
        "critical_path_h": round(sum(critical.values()) * (1 + unit_share) / 3600, 3),
        "measurement_cpu_s": round(measure_cpu, 1),
        "nmf_part_write_cpu_s": round(part_write_cpu, 1),
        "nmf_written_by": "tasks (part files)" if part_write_cpu > 0 else "driver",
        "mdf_part_tasks_cpu_s": round(mdf_task_cpu, 1),
        "mdf_written_by": "tasks (part files)" if mdf_task_cpu > 0 else "driver",
        "driver_serial_s": {
            "read_and_aggregate": round(driver_in, 1),
            "nmf_write": round(nmf_write, 1),
            "mdf_write_and_validate": round(driver_out, 1),
            "self_check": round(serial["self_check"], 1),
            "other": round(serial["rest"], 1),
        },
        "by_cores": {},
    }
    tasks_cpu = measure_cpu + part_write_cpu + mdf_task_cpu
    total_cpu = sum(level_cpu.values()) * (1 + unit_share) + tasks_cpu
    out["total_core_hours"] = round((total_cpu + driver_serial) / 3600, 1)
    for n in cores:
        est = sum(max(level_cpu[k] / n, critical[k]) for k in level_cpu) * (1 + unit_share)
        total = est + tasks_cpu / n + driver_serial
        longest = max(level_cpu, key=lambda k: max(level_cpu[k] / n, critical[k]))
        out["by_cores"][str(n)] = {
            "hours": round(total / 3600, 2),
            "minutes": round(total / 60, 1),
            "estimation_h": round(est / 3600, 3),
            "measurement_h": round(tasks_cpu / n / 3600, 3),
            "driver_serial_h": round(driver_serial / 3600, 3),
            # the chain the run waits for: the driver's serial phases, then each level
            # bounded by max(its CPU / N, its critical path), measurement in parallel
            "critical_path": {
                "driver_serial_s": round(driver_serial, 1),
                "estimation_s": round(est, 1),
                "measurement_nmf_and_mdf_parts_s": round(tasks_cpu / n, 1),
                "slowest_level": longest,
                "levels_bound_by_their_critical_path": [
                    k for k in level_cpu if critical[k] >= level_cpu[k] / n
                ],
            },
            # not implemented: the driver's reading, NMF/MDF writing and checks done by
            # the tasks in parallel (what the projection would be then)
            "minutes_if_driver_io_in_tasks": round((est + (tasks_cpu + driver_serial) / n) / 60, 1),
        }
    return out


def plot(result: dict, path: Path) -> None:
    """Projection by cores (stacked phases) and per-level CPU vs critical path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    proj = result["projection_full_us"]
    cores = list(proj["by_cores"])
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    bottom = np.zeros(len(cores))
    parts = proj.get("driver_serial_s", {})
    serial = [
        ("read_and_aggregate", "driver: reading the input"),
        ("other", "driver: the rest (estimation's driver side, start-up)"),
        ("mdf_write_and_validate", "driver: NMF, MDF, tables, self-check"),
    ]
    for key, label in serial if parts else (("driver_serial_h", "driver (serial)"),):
        if parts:
            hours = parts[key] / 3600
            if key == "mdf_write_and_validate":  # with the NMF's and the self-check's
                hours += (parts["nmf_write"] + parts["self_check"]) / 3600
            vals = np.full(len(cores), hours)
        else:
            vals = np.array([proj["by_cores"][c][key] for c in cores])
        a.bar(cores, vals, bottom=bottom, label=label)
        bottom += vals
    for key, label in (
        ("measurement_h", "measurement, NMF and MDF part tasks"),
        ("estimation_h", "estimation"),
    ):
        vals = np.array([proj["by_cores"][c][key] for c in cores])
        a.bar(cores, vals, bottom=bottom, label=label)
        bottom += vals
    a.axhline(0.5, color="k", ls="--", lw=0.8, label="30 minutes")
    a.set_xlabel("cores")
    a.set_ylabel("hours")
    a.set_title("projected US run")
    a.set_ylim(0, max(bottom.max(), 0.5) * 1.6)
    a.legend(fontsize=7, loc="upper right")
    levels = list(proj["level_cpu_s"])
    x = np.arange(len(levels))
    b.bar(x - 0.2, [proj["level_cpu_s"][k] / 3600 for k in levels], 0.4, label="level CPU (h)")
    b.bar(
        x + 0.2,
        [proj["critical_path_cpu_s"][k] / 3600 for k in levels],
        0.4,
        label="critical path (h)",
    )
    b.set_yscale("log")
    b.set_xticks(x, levels, rotation=30)
    b.set_title("US estimation by level")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", default="VT:0.1,VT:0.3,VT:1", help="STATE:SCALE,...")
    ap.add_argument("--cores", default="16,64,256,1024,4096")
    ap.add_argument("--work", default=None, help="work directory (default: a temp dir)")
    ap.add_argument("--from-manifests", nargs="*", default=None, help="skip runs; read these")
    ap.add_argument("--no-peers", action="store_true", help="skip the pool/Spark peer runs")
    ap.add_argument(
        "--largest-from",
        nargs="*",
        default=None,
        help="manifests of big states' runs (e.g. California) for measured critical paths",
    )
    ap.add_argument("--plot", default=None, help="write the projection plot to this PNG")
    ap.add_argument(
        "--split-json", default=None, help="bench_split.py output: the tract critical path floor"
    )
    args = ap.parse_args()
    cores = [int(c) for c in args.cores.split(",")]
    work = Path(args.work or tempfile.mkdtemp(prefix="censusdp_scaling_"))
    work.mkdir(parents=True, exist_ok=True)
    manifests = []
    if args.from_manifests:
        manifests = [json.loads(Path(p).read_text()) for p in args.from_manifests]
    else:
        for item in args.configs.split(","):
            state, scale = item.split(":")
            manifests.append(run_config(state, float(scale), work))
    rows = [summarize(m) for m in manifests]
    rows.sort(key=lambda r: r["blocks"])
    fractions = [
        r["timings"]["write_measurements"] / r["timings"]["measure"]
        for r in rows
        if "write_measurements" in r["timings"] and r["timings"].get("measure")
    ]
    write_fraction = float(np.mean(fractions)) if fractions else 0.55
    result: dict = {
        "benchmark": "scaling",
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "runs": rows,
        "fit": fit(rows),
        "projection_full_us": project(
            rows[-1],
            cores,
            rows + [summarize(json.loads(Path(p).read_text())) for p in args.largest_from or []],
            write_fraction,
            json.loads(Path(args.split_json).read_text()) if args.split_json else None,
        ),
    }
    if not args.from_manifests and not args.no_peers:
        state, scale = args.configs.split(",")[0].split(":")
        base = manifests[0]
        peers = {"inprocess": summarize(base)["wall_s"]}
        same = {}
        pool = run_config(state, float(scale), work, executor="pool", extra=["--workers", "2"])
        peers["pool2"] = summarize(pool)["wall_s"]
        same["pool2"] = pool["_bench"]["mdf_sha"] == base["_bench"]["mdf_sha"]
        memory = {"inprocess": base["_bench"]["memory"], "pool2": pool["_bench"]["memory"]}
        try:
            import pyspark  # noqa: F401

            sp = run_config(
                state, float(scale), work, executor="spark", extra=["--spark-master", "local[2]"]
            )
            peers["spark_local2"] = summarize(sp)["wall_s"]
            same["spark_local2"] = sp["_bench"]["mdf_sha"] == base["_bench"]["mdf_sha"]
            memory["spark_local2"] = sp["_bench"]["memory"]
        except ImportError:
            _say("pyspark not installed: no Spark peer")
        result["peers"] = {
            "config": f"{state}:{scale}",
            "wall_s": peers,
            "ratio_to_inprocess": {
                k: round(v / peers["inprocess"], 3) for k, v in peers.items() if k != "inprocess"
            },
            "mdf_byte_identical": same,
            # peak RSS sampled from /proc: the driver, the largest worker (memory per
            # executor: a pool worker; Spark's JVM and Python workers are children too)
            "memory_mb": memory,
        }
    if args.plot:
        plot(result, Path(args.plot))
        result["plot"] = args.plot
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
