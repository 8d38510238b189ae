"""PIQP against Clarabel on the least-squares programs of a release's families, in the
same run (issue 32: California in production fidelity).

Re-estimates a ``pl94-2020`` release in this process with ``--fidelity production`` and
keeps every ``--every``-th task of the Block Group and Block levels as the task runner
receives it (``bench_production_families._capture``). Then, in this process, builds
each task's least-squares program as the chain hands it to a solver and solves it with
both (``clarabel_qp.solve_clarabel`` and ``piqp_qp.solve_piqp``, the same program, one
after the other, alternated ``--repeat`` times, the best of each), and whole tasks
(``run_task``: least squares, rounding, everything) with the chain as it is (PIQP first
on the families of at most ``chain.PIQP_MAX_VARIABLES`` variables) and with Clarabel
alone in PIQP's place (``PIQP_MAX_VARIABLES = 0``, the chain before PIQP).

``--wide LO HI`` keeps instead the families below the County level (California's
tract families) of more than ``LO`` and at most ``HI`` variables (children x kept cells),
all of them, and solves each whole task both ways (the families PIQP took on when its
threshold rose from 150,000 to 350,000 variables: ``--run <full California release>
--wide 150000 350000 --repeat 1``).

Per level: the CPU seconds (``time.process_time``) of each way, their ratio, the
largest relative difference of the two solvers' objectives on the same program, and
the share of the tasks whose released counts are the same both ways. Prints one JSON
object.

    nice -n 19 .venv/bin/python benchmarks/bench_piqp.py --state CA --scale 0.05 --every 20
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from _harness import add_release_arguments, release_of, say  # noqa: E402
from bench_production_families import _capture  # noqa: E402


def _programs(tasks: list) -> list:
    """Each task's least-squares subproblems as the chain hands them to Clarabel or PIQP
    (every pass of a task that reaches one), with their compressed queries."""
    from censusdp.release.topdown.solvers import piqp_qp
    from censusdp.release.topdown.tasks import run_task

    seen: list = []
    real = piqp_qp.solve_piqp

    def keep(sub, comp, **kw):
        seen.append((sub, comp))
        return real(sub, comp, **kw)

    piqp_qp.solve_piqp = keep
    try:
        for task in tasks:
            run_task(replace(task, production=True))
    finally:
        piqp_qp.solve_piqp = real
    return seen


def _solvers(programs: list, repeat: int) -> dict:
    """Both solvers on every program, alternated; the best CPU of each, the objectives."""
    from censusdp.release.topdown.solvers.clarabel_qp import solve_clarabel
    from censusdp.release.topdown.solvers.piqp_qp import solve_piqp

    best = {"clarabel": float("inf"), "piqp": float("inf")}
    worst_gap = 0.0
    failed = {"clarabel": 0, "piqp": 0}
    for r in range(repeat):
        ways = ("clarabel", "piqp") if r % 2 == 0 else ("piqp", "clarabel")
        cpu = dict.fromkeys(ways, 0.0)
        objective: dict[int, dict[str, float]] = {}
        for name in ways:
            solve = solve_clarabel if name == "clarabel" else solve_piqp
            for i, (sub, comp) in enumerate(programs):
                c0 = time.process_time()
                att = solve(sub, comp)
                cpu[name] += time.process_time() - c0
                if att.x is None:
                    failed[name] += r == 0
                    continue
                objective.setdefault(i, {})[name] = sub.objective(att.x)
        for name in ways:
            best[name] = min(best[name], cpu[name])
        for obj in objective.values():
            if len(obj) == 2:
                a, b = obj["clarabel"], obj["piqp"]
                worst_gap = max(worst_gap, abs(a - b) / max(1.0, abs(a)))
    return {
        "programs": len(programs),
        "clarabel_cpu": round(best["clarabel"], 3),
        "piqp_cpu": round(best["piqp"], 3),
        "clarabel_over_piqp": round(best["clarabel"] / max(best["piqp"], 1e-9), 3),
        "max_relative_objective_difference": worst_gap,
        "failed": failed,
    }


class _Enough(Exception):
    """The wide families are kept: stop the re-estimate."""


def _capture_wide(run: Path, lo: int, hi: int) -> list:
    """The tasks of the level below the County of ``run``'s person run, re-estimated in
    production fidelity, whose families have more than ``lo`` and at most ``hi``
    variables (built in this process, not solved)."""
    from censusdp.release.options import Execution, ReleaseOptions
    from censusdp.release.pipeline import reestimate
    from censusdp.release.topdown import driver

    names = [g for g, _ in json.loads((run / "manifest.json").read_text())["geolevels"]]
    county = names.index("County")
    kept: list = []
    real = driver.batched

    def batched(tasks):
        tasks = list(tasks)
        if tasks and tasks[0].level == county:
            sizes = [(t, t.subproblem().k * t.subproblem().c) for t in tasks]
            kept.extend(t for t, n in sizes if lo < n <= hi)
            raise _Enough
        return real(tasks)

    driver.batched = batched
    try:
        with tempfile.TemporaryDirectory() as out:
            reestimate(run, Path(out) / "re", ReleaseOptions(fidelity="production"), Execution())
    except _Enough:
        pass
    finally:
        driver.batched = real
    return kept


def _tasks(tasks: list, repeat: int) -> dict:
    """Whole tasks with the chain as it is and with Clarabel in PIQP's place."""
    from censusdp.release.topdown.solvers import chain
    from censusdp.release.topdown.tasks import run_task

    limit = chain.PIQP_MAX_VARIABLES
    best = {"chain": float("inf"), "clarabel_only": float("inf")}
    counts: dict[str, list] = {}
    try:
        for r in range(repeat):
            ways = ("clarabel_only", "chain") if r % 2 == 0 else ("chain", "clarabel_only")
            for name in ways:
                chain.PIQP_MAX_VARIABLES = limit if name == "chain" else 0
                c0 = time.process_time()
                out = [run_task(replace(t, production=True)).counts for t in tasks]
                best[name] = min(best[name], time.process_time() - c0)
                counts.setdefault(name, out)
    finally:
        chain.PIQP_MAX_VARIABLES = limit
    same = sum(
        a.shape == b.shape and bool((a == b).all())
        for a, b in zip(counts["chain"], counts["clarabel_only"], strict=True)
    )
    return {
        "tasks": len(tasks),
        "chain_cpu": round(best["chain"], 3),
        "clarabel_only_cpu": round(best["clarabel_only"], 3),
        "clarabel_only_over_chain": round(best["clarabel_only"] / max(best["chain"], 1e-9), 3),
        "same_counts_share": round(same / max(1, len(tasks)), 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_release_arguments(ap, state="CA", scale=0.05)
    ap.add_argument("--every", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--wide", type=int, nargs=2, metavar=("LO", "HI"), default=None)
    args = ap.parse_args()
    run = release_of(args, "censusdp_piqp_")
    say(f"capturing the families of {run}")
    if args.wide:
        kept = {"Tract (wide)": _capture_wide(Path(run), *args.wide)}
    else:
        kept = _capture(Path(run), args.every)
    out: dict = {
        "benchmark": "piqp",
        "run": str(run),
        "every": args.every,
        "repeat": args.repeat,
        "load_average": os.getloadavg(),
        "levels": {},
    }
    for name, tasks in kept.items():
        say(f"{name}: {len(tasks)} tasks")
        out["levels"][name] = {"tasks": _tasks(tasks, args.repeat)}
        if not args.wide:  # a wide family's program alone is most of its task
            out["levels"][name]["solvers"] = _solvers(_programs(tasks), args.repeat)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
