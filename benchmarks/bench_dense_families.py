"""Benchmark of the dense parent-with-children families of dhc-lite: the County family and
the largest Tract families of a generated state, solved by every least-squares backend
in the same run; optionally the whole release against pl94-2020 on the same input.

1. Capture: generate the state (``--state``, ``--scale``), run ``dhc-lite-demo`` in
   process until the Tract level is estimated, keeping the County family and the
   ``--tracts`` largest Tract families (their subproblems after ``make_feasible``).
   ``--save DIR`` pickles the captured families (after ``make_feasible``); ``--load DIR``
   reads them back instead of capturing (``--only`` keeps the families whose name
   contains one of the given strings, e.g. ``--only County 50007``).
2. Kernels: each family is solved by every ``--methods`` entry (default: ``auto``, the
   chain as it stands, ``clarabel``, the previous chain's first step for dense
   families, ``activeset``, its first step for thin ones, and ``interior``);
   ``interior-sparse`` is the interior point with its previous sparse (SuperLU)
   factorisation, ``interior-unfolded`` without folding nested queries (``_fold``); a
   method ending in ``-2threads`` runs with two BLAS threads (the release keeps one a
   task: the answer depends on the thread count; docs/estimation.md). CPU and wall seconds, the attempts and the objective of each, in the
   same process, one after another, and each objective minus Clarabel's.
3. ``--runs``: ``censusdp run`` of ``dhc-lite-demo`` and ``pl94-2020`` (``--workers``),
   wall and CPU seconds (children's user + system) and their ratio.

    .venv/bin/python benchmarks/bench_dense_families.py --state VT --scale 1 --tracts 2
    .venv/bin/python benchmarks/bench_dense_families.py --state VT --scale 1 --runs
    .venv/bin/python benchmarks/bench_dense_families.py --state VT --tracts 14 --save fam
    .venv/bin/python benchmarks/bench_dense_families.py --load fam --only County 50007

Prints one JSON document. The machine may be shared: CPU seconds are steadier than wall
seconds under load, and both are reported with the load average.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import pickle  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

METHODS = ("auto", "clarabel", "activeset", "interior")


class _Stop(Exception):
    """Raised inside the pipeline once the Tract level has been captured."""


def _capture(cef: Path, work: Path, seed: int, n_tracts: int) -> list:
    """The County family and the largest Tract families of a dhc-lite-demo run."""
    import censusdp.release.topdown.tasks as topdown_tasks
    from censusdp.io.budget_files import resolve_budget
    from censusdp.release.pipeline import run_release
    from censusdp.release.topdown.failsafe import make_feasible
    from censusdp.release.topdown.solvers.least_squares import solve_l2

    families: list[tuple[str, object]] = []
    orig = topdown_tasks.run_task

    def patched(task):
        sub = task.sub
        if task.level >= 3:
            raise _Stop
        if task.level in (1, 2) and sub.k > 1:
            name = ("County" if task.level == 1 else "Tract") + f" family of {task.parent_geocode}"
            families.append((name, make_feasible(sub)[0]))
            # continue the run cheaply: the captured family is solved in the kernels
            res = solve_l2(sub, method="interior")
            if res.method == "interior":
                return orig(topdown_tasks.Task(**{**task.__dict__, "method": "interior"}))
        return orig(task)

    topdown_tasks.run_task = patched
    try:
        run_release(
            cef,
            work,
            budget=resolve_budget(preset="dhc-lite-demo"),
            seed=seed,
            workers=1,
            executor="inprocess",
            overwrite=True,
        )
    except _Stop:
        pass
    finally:
        topdown_tasks.run_task = orig
    county = [f for f in families if f[0].startswith("County")]
    tracts = sorted(
        (f for f in families if f[0].startswith("Tract")),
        key=lambda f: -f[1].k * f[1].c,
    )
    return county + tracts[:n_tracts]


VARIANTS = {
    # the interior point with one of its parts as it was before (same run, same process)
    "interior-sparse": {"BLOCKED": False},  # the sparse (SuperLU) factorisation
    "interior-unfolded": {"FOLD": False},  # nested queries keep their own rows
}
"""Interior-point variants: module settings of ``interior`` changed for the one solve."""


def _solve(sub, method: str):
    from threadpoolctl import threadpool_limits

    from censusdp.release.topdown.solvers import interior
    from censusdp.release.topdown.solvers.least_squares import solve_l2

    if method.endswith("-2threads"):  # BLAS on two threads (releases keep one)
        with threadpool_limits(limits=2, user_api="blas"):
            return _solve(sub, method.removesuffix("-2threads"))
    if method not in VARIANTS:
        return solve_l2(sub, method=method)
    old = {k: getattr(interior, k) for k in VARIANTS[method]}
    for k, v in VARIANTS[method].items():
        setattr(interior, k, v)
    try:
        return solve_l2(sub, method="interior")
    finally:
        for k, v in old.items():
            setattr(interior, k, v)


def _kernels(families: list, methods: tuple[str, ...]) -> list[dict]:
    rows = []
    for name, sub in families:
        row: dict = {"family": name, "children": sub.k, "kept_cells": sub.c}
        for method in methods:
            c0, t0 = time.process_time(), time.perf_counter()
            res = _solve(sub, method)
            row[method] = {
                "cpu_seconds": round(time.process_time() - c0, 2),
                "wall_seconds": round(time.perf_counter() - t0, 2),
                "attempts": [list(a) for a in res.attempts],
                "iterations": res.iterations,
                "objective": round(res.objective, 4),
                "positive_cells": round(float((res.x > 1e-6).mean()), 3),
            }
            print(json.dumps({name: {method: row[method]}}), file=sys.stderr, flush=True)
        if "clarabel" in methods:
            ref = row["clarabel"]["objective"]
            for method in methods:
                row[method]["objective_minus_clarabel"] = round(row[method]["objective"] - ref, 4)
        rows.append(row)
    return rows


def _save(families: list, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, sub in families:
        (folder / (name.replace(" ", "_") + ".pkl")).write_bytes(pickle.dumps(sub))


def _load(folder: Path, only: list[str]) -> list:
    families = []
    for path in sorted(folder.glob("*.pkl")):
        name = path.stem.replace("_", " ")
        if not only or any(o in name for o in only):
            families.append((name, pickle.loads(path.read_bytes())))
    return families


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _release(exe: str, cef: Path, out: Path, preset: str, args) -> dict:
    c0, t0 = _cpu_children(), time.perf_counter()
    subprocess.run(
        [exe, "run", "--input", str(cef), "--out", str(out), "--preset", preset]
        + ["--seed", str(args.seed), "--workers", str(args.workers), "--overwrite", "--quiet"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    m = json.loads((out / "manifest.json").read_text())
    return {
        "wall_seconds": round(time.perf_counter() - t0, 2),
        "cpu_seconds": round(_cpu_children() - c0, 2),
        "levels": {
            lv["geolevel"]: {"task_cpu_seconds": lv["task_cpu_seconds"], "methods": lv["methods"]}
            for lv in m["estimation"]["persons"]
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--state", default="VT")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tracts", type=int, default=2, help="largest Tract families solved")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--runs", action="store_true", help="also time the whole releases")
    ap.add_argument("--skip-kernels", action="store_true")
    ap.add_argument("--dir", default=None, help="working directory (default: a temp dir)")
    ap.add_argument("--save", default=None, help="pickle the captured families here")
    ap.add_argument("--load", default=None, help="solve the families pickled here")
    ap.add_argument("--only", nargs="*", default=[], help="families whose name has one")
    ap.add_argument("--methods", nargs="*", default=list(METHODS))
    args = ap.parse_args()
    if args.load:
        fams = _load(Path(args.load), args.only)
        print(
            json.dumps(
                {
                    "families": _kernels(fams, tuple(args.methods)),
                    "load_average": os.getloadavg()[0],
                },
                indent=2,
            )
        )
        return
    exe = str(Path(sys.executable).with_name("censusdp"))
    base = Path(args.dir or tempfile.mkdtemp(prefix="censusdp-bench-dense-"))
    cef = base / "cef"
    subprocess.run(
        [exe, "generate", "--state", args.state, "--seed", str(args.seed), "--out", str(cef)]
        + ["--scale", str(args.scale), "--overwrite", "--quiet"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    result: dict = {
        "state": args.state,
        "scale": args.scale,
        "seed": args.seed,
        "load_average_at_start": os.getloadavg()[0],
    }
    if not args.skip_kernels:
        families = _capture(cef, base / "capture", args.seed, args.tracts)
        if args.save:
            _save(families, Path(args.save))
        result["families"] = _kernels(families, tuple(args.methods))
    if args.runs:
        dhc = _release(exe, cef, base / "dhc", "dhc-lite-demo", args)
        pl = _release(exe, cef, base / "pl94", "pl94-2020", args)
        result["runs"] = {"dhc-lite-demo": dhc, "pl94-2020": pl, "workers": args.workers}
        result["dhc_over_pl94_wall"] = round(dhc["wall_seconds"] / pl["wall_seconds"], 2)
        result["dhc_over_pl94_cpu"] = round(dhc["cpu_seconds"] / pl["cpu_seconds"], 2)
    result["load_average_at_end"] = os.getloadavg()[0]
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
