"""One county's tract family as production fidelity solves it, cut from a real input: its
second least-squares pass by the chain's backend and by the ADMM, in the same run (issue
32: Los Angeles County's 2,334 tracts whole).

1. ``--input CEF --county 037``: the county's persons and units are cut out of the input
   into ``--dir`` (a state of one county: its tracts are the spine's Tract family under
   it, with their real sizes and the optimized spine's per-geounit budgets);
2. a production-fidelity release of the cut is started in this process and stopped
   when the widest task arrives (the tract family), which is pickled;
3. its first pass (``total``) is solved, and its second pass, the totals held, is solved
   by each of ``--ways``, each in a fresh process so that its CPU seconds
   (``resource.getrusage``) and peak memory are its own: ``chain`` (``auto``, what a
   release runs) and ``admm-one-multiplier`` (the ADMM on the same family with each
   child's weights replaced by one multiplier, its detailed query's: the ADMM cannot
   weigh a child's queries on their own, and the optimized spine's tracts differ from
   one multiplier by the discrete Gaussian's exact variances, 4.2e-7 relatively in Los
   Angeles; not the same problem, so a bound on what the ADMM would cost). Reported:
   CPU s, iterations, objective (of the real weights), violation, peak memory, the
   largest cell difference between the ways and how many cells production's rounder
   then rounds differently.

    nice -n 19 python benchmarks/bench_county_family.py --input CA_1 --county 037 \\
        --dir /tmp/la

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from _harness import say  # noqa: E402


class _Captured(Exception):
    """Raised by the capturing task runner once the widest family is pickled."""


def _cut(cef: Path, county: str, out: Path) -> None:
    """The persons and units of county ``county`` of ``cef`` into ``out``."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    for name in ("persons", "units"):
        if (out / f"{name}.parquet").exists():
            continue
        source = pq.ParquetFile(cef / f"{name}.parquet")
        writer = None
        prefix = None
        for i in range(source.metadata.num_row_groups):
            t = source.read_row_group(i)
            prefix = prefix or t["geocode"][0].as_py()[:2] + county
            t = t.filter(pc.starts_with(t["geocode"], prefix))
            if t.num_rows:
                writer = writer or pq.ParquetWriter(out / f"{name}.parquet", t.schema)
                writer.write_table(t)
        if writer is None:
            raise SystemExit(f"--county {county}: no {name} in {cef}")
        writer.close()


def _capture(cut: Path, task_file: Path, min_children: int) -> None:
    """Start a production-fidelity release of ``cut`` and pickle its first task of at
    least ``min_children`` children, its subproblem built."""
    from dataclasses import replace

    from censusdp.cli import main as cli
    from censusdp.release.topdown import tasks

    real = tasks.run_task

    def capture(task):
        k = task.sub.k if task.sub is not None else task.source.family.k
        if k < min_children:
            return real(task)
        task_file.write_bytes(pickle.dumps(replace(task, sub=task.subproblem(), source=None)))
        raise _Captured

    tasks.run_task = capture
    try:
        with tempfile.TemporaryDirectory(dir=cut.parent) as tmp:
            run = Path(tmp) / "run"
            argv = ["run", "--input", str(cut), "--out", str(run), "--seed", "1"]
            # the command stops with an internal error when the family is captured
            cli([*argv, "--workers", "1", "--fidelity", "production", "--quiet"])
    finally:
        tasks.run_task = real
    if not task_file.exists():
        raise SystemExit(f"no family of {min_children} children or more in {cut}")


def _second_pass(task_file: Path):
    """The task's second least-squares pass, its totals held as production holds them."""
    from censusdp.release.topdown import multipass
    from censusdp.release.topdown.solvers.least_squares import solve_l2

    task = pickle.loads(task_file.read_bytes())
    sub, passes = task.sub, task.l2_passes
    first = solve_l2(multipass._restrict(sub, passes.queries[0]))
    tol = float(first.max_violation) + passes.slack
    held = multipass._hold(sub, first.x, passes.hold_total[0], passes.hold_groups[0], tol)
    return task, multipass._restrict(held, passes.queries[1])


def _worker(task_file: Path, way: str, out: Path) -> None:
    """Solve the second pass one way; its point to ``out``, a JSON line to stdout."""
    from dataclasses import replace

    import numpy as np

    from censusdp.release.topdown.solvers.base import compress
    from censusdp.release.topdown.solvers.chain import backend_order
    from censusdp.release.topdown.solvers.least_squares import solve_l2

    _, sub = _second_pass(task_file)
    solved, method = sub, "auto"
    if way == "admm-one-multiplier":
        if sub.unit_weights is not None:
            one = sub.unit_weights[int(np.argmax(sub.weights))]
            solved = replace(sub, unit_weights=np.broadcast_to(one, sub.unit_weights.shape).copy())
        method = "admm"
    elif way != "chain":
        raise SystemExit(f"--ways: unknown way {way!r} (chain, admm-one-multiplier)")
    c0 = resource.getrusage(resource.RUSAGE_SELF)
    r = solve_l2(solved, method=method)
    c1 = resource.getrusage(resource.RUSAGE_SELF)
    np.save(out, r.x)
    print(
        json.dumps(
            {
                "chain": list(backend_order(sub, compress(sub), "auto")),
                "method": r.method,
                "status": r.status,
                "iterations": r.iterations,
                "cpu_s": round(c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime, 2),
                "peak_mb": round(c1.ru_maxrss / 1024.0, 1),
                "objective": sub.objective(r.x),
                "max_violation": sub.max_violation(r.x),
            }
        )
    )


def _compare(task_file: Path, points: dict[str, Path]) -> dict:
    """The ways' points against each other, and production's rounder on each."""
    import numpy as np

    from censusdp.release.topdown.multipass import round_in_passes

    task, sub = _second_pass(task_file)
    xs = {w: np.load(p) for w, p in points.items()}
    counts = {
        w: round_in_passes(task.sub, x, task.rounding, production=True) for w, x in xs.items()
    }
    ways = list(xs)
    out: dict = {"k": sub.k, "c": sub.c, "tolerance_persons": 1e-3 * float(sub.noise_scale)}
    if len(ways) == 2:
        a, b = ways
        out["max_cell_difference"] = float(np.abs(xs[a] - xs[b]).max())
        out["rounded_cells_differing"] = int((counts[a] != counts[b]).sum())
        out["rounded_cells"] = int(counts[a].size)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", help="a CEF directory (a whole state)")
    ap.add_argument("--county", default="037", help="three-digit county code")
    ap.add_argument("--dir", required=True, help="working directory (the cut, the task)")
    ap.add_argument("--min-children", type=int, default=1000)
    ap.add_argument("--ways", default="chain,admm-one-multiplier")
    ap.add_argument("--worker", nargs=3, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(Path(args.worker[0]), args.worker[1], Path(args.worker[2]))
        return
    work = Path(args.dir)
    task_file = work / f"county_{args.county}_task.pkl"
    if not task_file.exists():
        if not args.input:
            raise SystemExit(f"--input is needed to make {task_file}")
        cut = work / f"county_{args.county}"
        say(f"cutting county {args.county} out of {args.input}")
        _cut(Path(args.input), args.county, cut)
        say("capturing its widest family")
        _capture(cut, task_file, args.min_children)
    results: dict = {}
    points: dict[str, Path] = {}
    for way in args.ways.split(","):
        say(f"second pass: {way}")
        points[way] = work / f"x_{way}.npy"
        done = subprocess.run(
            [sys.executable, __file__, "--dir", str(work), "--worker", str(task_file), way,
             str(points[way])],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        results[way] = json.loads(done.stdout.strip().splitlines()[-1])
    out = {
        "benchmark": "county_family",
        "county": args.county,
        "load_average": os.getloadavg(),
        "second_pass": results,
        **_compare(task_file, points),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
