"""What a measuring task costs per noisy value by its size: the NMF parts before (tasks
of 2^22 values, glibc's default allocator settings) and now (2^24 values, freed pages
kept: ``censusdp.execution.base.keep_freed_memory``), in the same run.

Takes a generated state's block level (``--input`` or ``--state``/``--scale``) under a
preset (``--preset``, default ``dhc-2020``: ten queries a block, from 4 to 905,184 rows
each) and, in a fresh process per way, runs the pipeline's own measuring tasks
(``measure_tasks``, ``run_part_task``: noise, then the part file written, flushed and
hashed) until ``--values`` noisy values are done, in ``--workers`` such processes at
once (as a pool's workers measure side by side: the kernel's page faults of one slow the
other); the two ways alternate ``--repeats`` times and the best wall time of each way is
kept (the machine may be shared). A fresh process is what a pool worker is when a run
begins, so the first tasks' page faults count. Per way: wall ns a noisy value of all the
workers together (the slowest worker's measuring time over all their values), user and
system CPU ns a value (``getrusage``), bytes a value written, the largest process's
peak resident memory. Both ways draw the same noise (keyed per
geounit); the NMF's rows are the same whatever the task size (tests/release/pipeline).
Prints one JSON object.

    .venv/bin/python benchmarks/bench_measure_chunks.py --input /tmp/VT_0.1
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from _harness import cached_input, say  # noqa: E402

WAYS = {"before": (1 << 22, False), "now": (1 << 24, True)}
"""Each way's task size (noisy values) and whether the process keeps freed pages."""


def _worker(args: argparse.Namespace) -> None:
    """One way in this process: measure and write parts; print JSON."""
    from censusdp.data.geography import GeoLevels
    from censusdp.data.schema import get_schema
    from censusdp.execution import base
    from censusdp.io.budget_files import load_preset
    from censusdp.io.cef_stream import read_cef_blocks
    from censusdp.privacy.randomness import RandomSource
    from censusdp.release import parts
    from censusdp.release.measure import measure_tasks

    target, keep = WAYS[args.worker]
    if not keep:  # the previous code: no mallopt
        parts.keep_freed_memory = lambda: None
    budget = load_preset(args.preset)
    schema = get_schema(budget.schema)
    cef = read_cef_blocks(
        Path(args.input), GeoLevels.from_pairs(list(budget.geolevels)), schema, with_units=True
    )
    h = cef.hierarchy
    block = h.geolevels[h.n_levels - 1].name
    plan = [
        (m.geolevel, m.query, m.mechanism) for m in budget.measurements() if m.geolevel == block
    ]
    levels = h.aggregate(cef.persons)
    tasks = measure_tasks(levels, h, schema, plan, RandomSource.seeded(1), target=target)
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    n = size = count = 0
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        for i, task in enumerate(tasks):
            rec = parts.run_part_task(
                parts.PartTask(task, str(Path(tmp) / f"part-{i:05d}.parquet"))
            )
            n += rec["n_values"]
            size += (Path(tmp) / rec["file"]).stat().st_size
            count += 1
            if n >= args.values:
                break
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "tasks": count,
                "values": n,
                "wall_seconds": wall,
                "user_seconds": r1.ru_utime - r0.ru_utime,
                "system_seconds": r1.ru_stime - r0.ru_stime,
                "bytes": size,
                "peak_rss_mb": r1.ru_maxrss / 1024,
                "kept_freed_memory": base._kept == [True],
            }
        )
    )


def _together(outs: list[dict]) -> dict:
    """The workers of one repeat as one measuring phase."""
    n = sum(o["values"] for o in outs)
    user = sum(o["user_seconds"] for o in outs)
    system = sum(o["system_seconds"] for o in outs)
    return {
        "values": n,
        "tasks": sum(o["tasks"] for o in outs),
        "wall_ns": round(max(o["wall_seconds"] for o in outs) / n * 1e9, 2),
        "cpu_ns": round((user + system) / n * 1e9, 2),
        "user_ns": round(user / n * 1e9, 2),
        "system_ns": round(system / n * 1e9, 2),
        "bytes_per_value": round(sum(o["bytes"] for o in outs) / n, 4),
        "peak_rss_mb": round(max(o["peak_rss_mb"] for o in outs), 1),
        "kept_freed_memory": all(o["kept_freed_memory"] for o in outs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", default=None, help="a generated state (default: generate one)")
    ap.add_argument("--state", default="VT")
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--work", default=None, help="where a generated input is cached")
    ap.add_argument("--preset", default="dhc-2020")
    ap.add_argument("--values", type=float, default=2e8, help="noisy values a way measures")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2, help="processes measuring at once")
    ap.add_argument("--tmp", default=None, help="where the parts are written (then removed)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(args)
        return
    work = Path(args.work or tempfile.mkdtemp(prefix="bench_measure_chunks_"))
    source = Path(args.input) if args.input else cached_input(work, args.state, args.scale)
    runs: dict[str, list[dict]] = {w: [] for w in WAYS}
    for r in range(args.repeats):
        for way in WAYS if r % 2 == 0 else reversed(list(WAYS)):
            say(f"repeat {r + 1}: {way}, {args.workers} processes")
            cmd = [sys.executable, __file__, "--worker", way, "--input", str(source)]
            cmd += ["--preset", args.preset, "--values", str(args.values)]
            cmd += ["--tmp", args.tmp] if args.tmp else []
            procs = [
                subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
                for _ in range(args.workers)
            ]
            outs = [json.loads(p.communicate()[0]) for p in procs]
            if any(p.returncode for p in procs):
                raise SystemExit(f"a {way} worker failed")
            runs[way].append(_together(outs))
    out: dict = {
        "benchmark": "measure_chunks",
        "input": str(source),
        "preset": args.preset,
        "repeats": args.repeats,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_average": os.getloadavg(),
    }
    out["workers"] = args.workers
    for way, (target, keep) in WAYS.items():
        best = min(runs[way], key=lambda x: x["wall_ns"])
        out[way] = {"task_values": target, "keeps_freed_memory": keep, **best}
    for k in ("wall_ns", "cpu_ns"):
        out[f"{k}_now_over_before"] = round(out["now"][k] / out["before"][k], 3)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
