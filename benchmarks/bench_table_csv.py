"""The tables' CSV: written by the driver from the Parquet parts (old) or by the tasks
that write the parts, then put together by the driver (new). Prints JSON.

``csv_write`` times both paths on the tables of one release (a ``censusdp run`` made
here from a generated state, or ``--run DIR``), ``--repeats`` times each, alternating:
wall seconds, the driver's CPU seconds and the tasks' CPU seconds (the new path's rows
are written by ``--workers`` processes, one task per part, as in a run), and checks
that both give the same bytes.

``end_to_end`` (with ``--baseline-src``, the ``src/`` of a checkout before the change)
runs the whole release with that source and with this checkout's, alternating,
``--runs`` times each and per ``--fidelity``: wall, CPU of the process tree, peak
memory and the manifest's ``write_release`` and ``validate_files`` timings. The machine's
load average is recorded with each: under load compare CPU seconds, not wall.

    python benchmarks/bench_table_csv.py --state VT --scale 1 --repeats 3
    python benchmarks/bench_table_csv.py --run RUN --baseline-src /tmp/old/src --runs 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from _harness import add_input_arguments, generate, run_command, sampled, timed, workdir

SRC = Path(__file__).resolve().parents[1] / "src"


def _rows_task(job: tuple[str, int]) -> float:
    """One table task's CSV work: every table's rows of part ``index``; its CPU s."""
    from censusdp.io.table_csv import write_part_csvs
    from censusdp.tables import TABLE_NAMES

    c = time.process_time()
    directory, index = job
    for name in TABLE_NAMES:
        write_part_csvs(directory, name, index)
    return time.process_time() - c


def _copy_parquet(tables: Path, dest: Path) -> int:
    """The tables' Parquet parts (and indexes) of ``tables`` copied to ``dest``; the
    number of parts of each table."""
    from censusdp.io.parts import read_part_index
    from censusdp.tables import TABLE_NAMES

    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in TABLE_NAMES:
        shutil.copytree(tables / f"{name}.parquet", dest / f"{name}.parquet")
    return len(read_part_index(dest / f"{TABLE_NAMES[0]}.parquet", ".parquet")["parts"])


def _csv_bytes(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*.csv"))}


def csv_write(tables: Path, work: Path, repeats: int, workers: int) -> dict:
    """Both ways of writing the CSV of ``tables``, ``repeats`` times each."""
    from censusdp.execution import make_executor
    from censusdp.io.table_csv import write_table_csvs

    old, new, same = [], [], True
    ex = make_executor(workers, kind="pool")
    try:
        for _ in range(repeats):
            d = work / "old"
            _copy_parquet(tables, d)
            t, c = time.perf_counter(), time.process_time()
            write_table_csvs(d)
            old.append({"wall_s": time.perf_counter() - t, "driver_cpu_s": time.process_time() - c})
            want = _csv_bytes(d)
            d = work / "new"
            n = _copy_parquet(tables, d)
            t, c = time.perf_counter(), time.process_time()
            task_cpu = sum(ex.map(_rows_task, [(str(d), i) for i in range(n)]))
            write_table_csvs(d)
            new.append(
                {
                    "wall_s": time.perf_counter() - t,
                    "driver_cpu_s": time.process_time() - c,
                    "task_cpu_s": task_cpu,
                }
            )
            same = same and _csv_bytes(d) == want
    finally:
        ex.close()
    return {
        "parts": n,
        "csv_bytes": sum(len(b) for b in want.values()),
        "same_bytes": same,
        "old_driver": _summary(old),
        "new_tasks": _summary(new),
        "wall_ratio_new_over_old": _ratio(new, old, "wall_s"),
        "driver_cpu_ratio_new_over_old": _ratio(new, old, "driver_cpu_s"),
    }


def _summary(rows: list[dict]) -> dict:
    return {
        k: {"median": round(statistics.median(r[k] for r in rows), 3),
            "min": round(min(r[k] for r in rows), 3)}
        for k in rows[0]
    }  # fmt: skip


def _ratio(a: list[dict], b: list[dict], key: str) -> float:
    return round(statistics.median(r[key] for r in a) / statistics.median(r[key] for r in b), 3)


def end_to_end(cef: Path, work: Path, args: argparse.Namespace) -> dict:
    """The whole release with the baseline source and with this one, alternating."""
    out: dict = {}
    for fidelity in args.fidelity.split(","):
        rows: dict[str, list] = {"baseline": [], "this": []}
        for _ in range(args.runs):
            for label, src in (("baseline", args.baseline_src), ("this", str(SRC))):
                run = work / f"run-{label}"
                cmd = run_command(cef, run, args, "--fidelity", fidelity, "--overwrite")
                cmd[0:1] = [sys.executable, "-m", "censusdp"]
                os.environ["PYTHONPATH"] = src
                load = os.getloadavg()[0]
                wall, cpu, mem, _ = sampled(cmd)
                t = json.loads((run / "manifest.json").read_text())["timings"]
                rows[label].append(
                    {
                        "wall_s": round(wall, 2),
                        "cpu_s": round(cpu, 2),
                        "tree_mb": mem["tree_mb"],
                        "load_1min": round(load, 2),
                        **{k: t.get(k) for k in ("write_release", "validate_files", "total")},
                    }
                )
        out[fidelity] = {
            **rows,
            "cpu_ratio_this_over_baseline": _ratio(rows["this"], rows["baseline"], "cpu_s"),
            "wall_ratio_this_over_baseline": _ratio(rows["this"], rows["baseline"], "wall_s"),
        }
    os.environ["PYTHONPATH"] = str(SRC)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_input_arguments(ap)
    ap.add_argument("--run", default=None, help="an existing release (default: run one)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--baseline-src", default=None, help="src/ of the code before the change")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--fidelity", default="default", help="comma-separated: default,production")
    args = ap.parse_args()
    sys.path.insert(0, str(SRC))
    os.environ["PYTHONPATH"] = str(SRC)  # the pool's workers and the runs: this checkout
    work = workdir(args, "censusdp-bench-csv-")
    cef = work / "cef"
    result: dict = {
        "state": args.state,
        "scale": args.scale,
        "workers": args.workers,
        "cpus": os.cpu_count(),
        "load_1min_start": round(os.getloadavg()[0], 2),
    }
    if args.run is None or args.baseline_src:
        generate(args, cef)
    if args.baseline_src:
        result["end_to_end"] = end_to_end(cef, work, args)
    # the tables of --run, else of the last release just made with this source
    run = Path(args.run) if args.run else work / "run-this"
    if not (run / "tables").is_dir():
        timed(run_command(cef, run, args, "--overwrite"))
    result["csv_write"] = csv_write(run / "tables", work / "csv", args.repeats, args.workers)
    result["load_1min_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
