"""NMF part files written by the tasks against the previous method: the driver appending
every measured chunk to one file.

Reads a generated state (``censusdp generate``, cached in ``--work``), cuts its
measurement plan (pl94-2020) into the pipeline's tasks and measures each once; then, on
the same chunks:

* ``single_file`` (the previous method): the driver appends every chunk to one
  ``noisy_measurements.parquet`` (``NMFWriter``): its CPU seconds are serial driver work;
* ``parts``: each chunk written as its own part (``write_nmf_part``, what a task does:
  write, flush, checksum); the driver's share is recording the part's small record
  (one appended, flushed line of ``checkpoint/parts.jsonl``), timed separately;
* ``parts_pool``: the whole tasks (measure + write the part) on a process pool of
  ``--workers`` against in-process, wall seconds, and the parts compared byte for byte.

Also the read-back through ``NMFReader`` (every level, whole) from both layouts. CPU
seconds are the process's (``time.process_time``) and do not depend on other load;
wall seconds do. Prints one JSON object.

    .venv/bin/python benchmarks/bench_nmf_parts.py --state WY --scale 0.25 --workers 2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import tempfile
from pathlib import Path

from _harness import cached_input, clock, say, since  # noqa: E402
from censusdp.data.geography import GeoLevels
from censusdp.data.schema import get_schema
from censusdp.execution import InProcessExecutor, ProcessPoolExecutor
from censusdp.io.budget_files import load_preset
from censusdp.io.cef_stream import read_cef_blocks
from censusdp.io.nmf_files import part_name, write_part_index
from censusdp.io.nmf_read import NMFReader
from censusdp.io.nmf_write import NMFWriter, write_nmf_part
from censusdp.privacy.randomness import RandomSource
from censusdp.release.measure import measure_tasks, run_measure_task
from censusdp.release.parts import PartTask, run_part_task


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state", default="WY")
    ap.add_argument("--scale", type=float, default=0.25)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work", default=None, help="work directory (default: a temp dir)")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="censusdp_nmfparts_"))
    work.mkdir(parents=True, exist_ok=True)
    cef = cached_input(work, args.state, args.scale)
    budget = load_preset("pl94-2020")
    schema = get_schema(budget.schema)
    blocks = read_cef_blocks(cef, GeoLevels.from_pairs(list(budget.geolevels)), schema)
    h = blocks.hierarchy
    levels = h.aggregate(blocks.persons)
    plan = [(m.geolevel, m.query, m.mechanism) for m in budget.measurements()]
    source = RandomSource.seeded(args.seed).child("persons")
    tasks = list(measure_tasks(levels, h, schema, plan, source))
    say(f"measure {len(tasks)} tasks")
    t = clock()
    chunks = [run_measure_task(task) for task in tasks]
    measure = since(t)
    values = sum(c.n_values for c in chunks)

    say("previous method: the driver appends every chunk to one file")
    single = work / "single" / "noisy_measurements.parquet"
    single.parent.mkdir(exist_ok=True)
    t = clock()
    with NMFWriter(single) as w:
        for c in chunks:
            w.write_chunk(c)
    single_file = {**since(t), "bytes": single.stat().st_size}

    say("parts: each chunk written as a task writes it; the driver records each")
    d = work / "parts" / "noisy_measurements.parquet"
    d.mkdir(parents=True, exist_ok=True)
    log = work / "parts" / "parts.jsonl"
    t = clock()
    recs = [write_nmf_part(c, d / part_name(i)) for i, c in enumerate(chunks)]
    task_side = since(t)
    t = clock()
    with open(log, "w", encoding="utf-8") as f:
        for rec in recs:  # what the driver does per part (Checkpoint.finish_part)
            f.write(json.dumps(rec) + "\n")
            f.flush()
            os.fsync(f.fileno())
    write_part_index(d, recs)
    driver_side = since(t)
    parts = {
        "tasks_write_parts": task_side,
        "driver_records_parts": driver_side,
        "parts": len(recs),
        "bytes": sum((d / r["file"]).stat().st_size for r in recs),
    }

    say(f"whole tasks (measure + write the part): in-process vs a pool of {args.workers}")
    jobs = {}
    for name, ex in (
        ("inprocess", InProcessExecutor()),
        (f"pool{args.workers}", ProcessPoolExecutor(args.workers)),
    ):
        out = work / name / "noisy_measurements.parquet"
        out.mkdir(parents=True, exist_ok=True)
        t = clock()
        got = list(
            ex.map(
                run_part_task, (PartTask(x, str(out / part_name(i))) for i, x in enumerate(tasks))
            )
        )
        jobs[name] = {**since(t), "writers": len({r["writer"] for r in got}), "dir": out}
        close = getattr(ex, "close", None)
        if close is not None:
            close()
    a, b = (jobs[k].pop("dir") for k in list(jobs))
    same = all(_sha(a / part_name(i)) == _sha(b / part_name(i)) for i in range(len(tasks)))
    same = same and all(_sha(a / part_name(i)) == _sha(d / part_name(i)) for i in range(len(tasks)))

    say("read back every level through NMFReader, from both layouts")
    reads = {}
    for name, path in (("single_file", single), ("parts", d)):
        t = clock()
        reader = NMFReader(path, schema, h)
        n = 0
        for li in range(h.n_levels):
            n += sum(m.values.size for m in reader.read(li, 0, h.n_units(li)))
        reads[name] = {**since(t), "values": n}

    result = {
        "benchmark": "nmf_parts",
        "config": f"{args.state}:{args.scale}",
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "load_average": os.getloadavg(),
        "noisy_values": values,
        "tasks": len(tasks),
        "measure_tasks": measure,
        "single_file": single_file,
        "parts": parts,
        "driver_cpu_ratio_parts_to_single_file": round(
            driver_side["cpu_s"] / max(single_file["cpu_s"], 1e-9), 4
        ),
        "task_cpu_per_million_values_s": round(task_side["cpu_s"] / values * 1e6, 4),
        "single_file_cpu_per_million_values_s": round(single_file["cpu_s"] / values * 1e6, 4),
        "whole_tasks": jobs,
        "pool_wall_ratio_to_inprocess": round(
            jobs[f"pool{args.workers}"]["wall_s"] / max(jobs["inprocess"]["wall_s"], 1e-9), 3
        ),
        "parts_byte_identical_across_executors": same,
        "read_back": reads,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
