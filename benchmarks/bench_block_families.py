"""The least squares of a release's block families (a block group's blocks), by backend
and by Clarabel program, in the same run.

Re-estimates a pl94-2020 release in this process and keeps every ``--every``-th family
of the block level as the task sees it (after the failsafe), at most ``--families``;
then solves each with

* ``clarabel_residual``: Clarabel on the program with one residual variable per child
  and answer, factored by QDLDL (what every family got two versions ago;
  ``DIRECT_MAX_CELLS = DIRECT_MAX_ANSWER = 0``);
* ``clarabel_previous``: families of at most ``DIRECT_MAX_CELLS`` kept cells without
  residual variables, larger ones with a residual for every answer, QDLDL (the
  previous version; ``DIRECT_MAX_ANSWER = 0``);
* ``clarabel_qdldl``: as now but always QDLDL (``FAER_MIN_NNZ`` unbounded);
* ``clarabel``: Clarabel as it runs now (families of at most ``DIRECT_MAX_CELLS`` kept
  cells without residual variables, larger ones with residuals for the answers of more
  than ``DIRECT_MAX_ANSWER`` kept cells; faer above ``FAER_MIN_NNZ`` non-zeros);
* ``activeset``: the active set alone (which ``auto`` put first on sparse families of
  any size before);
* ``auto``: the chain as it runs now.

Per way: CPU milliseconds per family (``time.process_time``: this process only) and the
largest objective difference from ``clarabel_residual`` relative to the objective.
Reads a release directory (``--run``) or makes one (``--state``, ``--scale``);
``--min-cells N`` keeps the families of more than ``N`` kept cells only. Prints one JSON
object.

    .venv/bin/python benchmarks/bench_block_families.py --state WY --scale 0.25
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from _harness import add_release_arguments, release_of  # noqa: E402
from censusdp.release.pipeline import reestimate
from censusdp.release.topdown import tasks as topdown_tasks
from censusdp.release.topdown.failsafe import make_feasible
from censusdp.release.topdown.solvers import clarabel_qp
from censusdp.release.topdown.solvers.least_squares import solve_l2


class _Enough(Exception):
    """Raised by the capturing task runner once it holds enough families."""


def _capture(run: Path, every: int, most: int, min_cells: int = 0) -> list:
    """Block families of ``run`` as its tasks solve them (every ``every``-th)."""
    kept, seen = [], [0]
    real = topdown_tasks.run_task
    bottom = len(json.loads((run / "manifest.json").read_text())["geolevels"]) - 2

    def capture(task):
        if kept and task.level < bottom:  # the housing units' levels: persons are done
            raise _Enough
        if task.level == bottom and task.l2_passes is None and task.subproblem().c > min_cells:
            seen[0] += 1
            if seen[0] % every == 0:
                kept.append(make_feasible(task.subproblem())[0])
                if len(kept) >= most:
                    raise _Enough
        return real(task)

    topdown_tasks.run_task = capture
    try:
        with tempfile.TemporaryDirectory() as out:
            reestimate(run, Path(out) / "re", workers=1)
    except _Enough:
        pass
    finally:
        topdown_tasks.run_task = real
    return [s for s in kept if not (s.parent is not None and s.k == 1)]


def _solve_all(subs: list, method: str, settings: dict) -> tuple[float, list[float]]:
    saved = {name: getattr(clarabel_qp, name) for name in settings}
    for name, value in settings.items():
        setattr(clarabel_qp, name, value)
    try:
        c0 = time.process_time()
        objectives = [solve_l2(s, method=method).objective for s in subs]
        return time.process_time() - c0, objectives
    finally:
        for name, value in saved.items():
            setattr(clarabel_qp, name, value)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_release_arguments(ap)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--families", type=int, default=200)
    ap.add_argument("--min-cells", type=int, default=0, help="keep families of more kept cells")
    args = ap.parse_args()
    run = release_of(args, "censusdp_blockfam_")
    subs = _capture(run, args.every, args.families, args.min_cells)
    out: dict = {
        "benchmark": "block_families",
        "run": str(run),
        "families": len(subs),
        "median_children": float(np.median([s.k for s in subs])),
        "median_kept_cells": float(np.median([s.c for s in subs])),
        "min_cells": args.min_cells,
        "direct_max_cells": clarabel_qp.DIRECT_MAX_CELLS,
        "direct_max_answer": clarabel_qp.DIRECT_MAX_ANSWER,
        "faer_min_nnz": clarabel_qp.FAER_MIN_NNZ,
        "python": platform.python_version(),
    }
    qdldl = {"FAER_MIN_NNZ": 1 << 62}
    ways = (
        ("clarabel_residual", "clarabel", {"DIRECT_MAX_CELLS": 0, "DIRECT_MAX_ANSWER": 0, **qdldl}),
        ("clarabel_previous", "clarabel", {"DIRECT_MAX_ANSWER": 0, **qdldl}),
        ("clarabel_qdldl", "clarabel", qdldl),
        ("clarabel", "clarabel", {}),
        ("activeset", "activeset", {}),
        ("auto", "auto", {}),
    )
    ref = None
    for name, method, settings in ways:
        cpu, obj = _solve_all(subs, method, settings)
        obj = np.asarray(obj)
        ref = obj if ref is None else ref
        gap = np.abs(obj - ref) / np.maximum(1.0, np.abs(ref))
        out[name] = {
            "cpu_ms_per_family": round(1000 * cpu / max(len(subs), 1), 2),
            "max_relative_objective_gap": float(gap.max(initial=0.0)),
        }
    base = out["clarabel_residual"]["cpu_ms_per_family"]
    out["speedup_auto_vs_residual"] = round(base / max(out["auto"]["cpu_ms_per_family"], 1e-9), 2)
    prev = out["clarabel_previous"]["cpu_ms_per_family"]
    out["speedup_clarabel_vs_previous"] = round(
        prev / max(out["clarabel"]["cpu_ms_per_family"], 1e-9), 2
    )
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
