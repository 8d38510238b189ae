"""The block-group and block families of a release in both fidelities, and the code
now against a base revision, in the same run (issue 32: California in production
fidelity).

Re-estimates a pl94-2020 release in this process with ``--fidelity production`` and
keeps every ``--every``-th task of the Block Group and Block levels (the families whose
children are block groups, and blocks) as the task is handed to ``run_task``; then, in
fresh processes, solves every kept task

* as the default fidelity solves it (``production=False``: the failsafe, censusdp's
  rounder) and as production fidelity does (``production=True``: no failsafe,
  production's rounder), task by task in turn, so both see the same load;
* as the default fidelity with the plans' slack at 0.1 (the P.L. 94 configuration's,
  which the default's 17 min 42 s California run held with) instead of 0.01;
* with the code of this checkout (``now``) and of ``--base`` (``before``, a git
  revision extracted to a temporary directory), the two processes alternated
  ``--repeat`` times.

Per way and level: the tasks' CPU seconds (``time.process_time``, the process only),
split into least squares and rounding as each task reports them (wall seconds of the
task, so under load they add up to more than its CPU), the median of the repeats; and
whether ``now`` and ``before`` released the same counts for every task and fidelity
(``same_counts``). Families of more than 100 children are none at this scale (the
default would split them), so the two fidelities solve the same problems. Prints one
JSON object.

    nice -n 19 .venv/bin/python benchmarks/bench_production_families.py \\
        --state CA --scale 0.05 --every 4 --base main
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import add_release_arguments, release_of, say  # noqa: E402

LEVELS = {"BlockGroup": "block-group families (children: block groups)", "Block": "blocks"}
MODES = ("default", "production", "default_slack_0.1")
"""How each task is solved: as the default fidelity, as production fidelity, and as the
default fidelity with the plans' slack at the P.L. 94 configuration's 0.1 instead of
production's 0.01 (``passes.OPT_TOL_SLACK``; a Block task has one least-squares pass
and holds nothing, so there it is the default's solve again)."""


class _Enough(Exception):
    """Raised by the capturing task runner once the person run's levels are done."""


def _capture(run: Path, every: int) -> dict[str, list]:
    """Every ``every``-th task of the Block Group and Block levels of ``run``'s person
    run, re-estimated in production fidelity, as the task runner receives them."""
    from censusdp.release.options import Execution, ReleaseOptions
    from censusdp.release.pipeline import reestimate
    from censusdp.release.topdown import tasks as topdown_tasks

    names = [g for g, _ in json.loads((run / "manifest.json").read_text())["geolevels"]]
    # a task's level is its parent's: the Block Group level's tasks are the tracts'
    level_of = {names.index(n) - 1: n for n in LEVELS}
    kept: dict[str, list] = {n: [] for n in LEVELS}
    seen = [0, -1]
    real = topdown_tasks.run_task

    def capture(task):
        if task.level < seen[1]:  # the housing units' run begins: persons are done
            raise _Enough
        seen[1] = task.level
        name = level_of.get(task.level)
        if name is not None:
            seen[0] += 1
            if seen[0] % every == 0:
                kept[name].append(task)
        return real(task)

    topdown_tasks.run_task = capture
    try:
        with tempfile.TemporaryDirectory() as out:
            reestimate(
                run,
                Path(out) / "re",
                ReleaseOptions(fidelity="production"),
                Execution(workers=1),
            )
    except _Enough:
        pass
    finally:
        topdown_tasks.run_task = real
    return kept


def _worker(tasks_file: str) -> None:
    """Solve the pickled tasks in both fidelities, task by task; print JSON per level."""
    from dataclasses import replace

    from censusdp.release.topdown.tasks import run_task

    kept = pickle.loads(Path(tasks_file).read_bytes())
    out: dict = {}
    for name, tasks in kept.items():
        acc = {m: {"cpu": 0.0, "l2": 0.0, "rounding": 0.0} for m in MODES}
        digest = {m: hashlib.sha256() for m in acc}
        for task in tasks:
            for mode in acc:
                t = replace(task, production=mode == "production")
                if mode == "default_slack_0.1" and t.l2_passes is not None:
                    t = replace(t, l2_passes=replace(t.l2_passes, slack=0.1))
                c0 = time.process_time()
                r = run_task(t)
                acc[mode]["cpu"] += time.process_time() - c0
                acc[mode]["l2"] += r.solve_seconds
                acc[mode]["rounding"] += r.rounding_seconds
                digest[mode].update(r.counts.tobytes())
        out[name] = {m: {**acc[m], "counts_sha256": digest[m].hexdigest()} for m in acc}
    print(json.dumps(out))


def _source_of(rev: str, into: Path) -> Path:
    """The ``src`` directory of git revision ``rev`` of this checkout, extracted."""
    root = Path(__file__).resolve().parent.parent
    archive = subprocess.run(
        ["git", "-C", str(root), "archive", rev, "src"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def _run_worker(src: Path, tasks_file: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    done = subprocess.run(
        [sys.executable, __file__, "--worker", str(tasks_file)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return json.loads(done.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_release_arguments(ap, state="CA", scale=0.05)
    ap.add_argument("--every", type=int, default=4)
    ap.add_argument("--base", default="main", help="git revision of the 'before' code")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(args.worker)
        return
    run = release_of(args, "censusdp_prodfam_")
    say(f"capturing the families of {run}")
    kept = _capture(run, args.every)
    now_src = Path(__file__).resolve().parent.parent / "src"
    results: dict[str, list[dict]] = {"now": [], "before": []}
    with tempfile.TemporaryDirectory() as tmp:
        tasks_file = Path(tmp) / "tasks.pkl"
        tasks_file.write_bytes(pickle.dumps(kept))
        sources = {"now": now_src, "before": _source_of(args.base, Path(tmp))}
        for r in range(args.repeat):
            for way in ("before", "now") if r % 2 == 0 else ("now", "before"):
                say(f"repeat {r + 1}: {way}")
                results[way].append(_run_worker(sources[way], tasks_file))
    out: dict = {
        "benchmark": "production_families",
        "run": str(run),
        "every": args.every,
        "base": args.base,
        "repeat": args.repeat,
        "load_average": os.getloadavg(),
        "levels": {},
    }
    for name in LEVELS:
        level: dict = {"tasks": len(kept[name]), "what": LEVELS[name]}
        for way, reps in results.items():
            for mode in MODES:
                level[f"{way}_{mode}"] = {
                    part: round(statistics.median(rep[name][mode][part] for rep in reps), 3)
                    for part in ("cpu", "l2", "rounding")
                }
        level["same_counts"] = all(
            results["now"][0][name][m]["counts_sha256"]
            == results["before"][0][name][m]["counts_sha256"]
            for m in MODES
        )
        now_p, before_p = level["now_production"]["cpu"], level["before_production"]["cpu"]
        level["production_cpu_now_over_before"] = round(now_p / max(before_p, 1e-9), 3)
        level["production_over_default_now"] = round(
            now_p / max(level["now_default"]["cpu"], 1e-9), 3
        )
        level["default_slack_0.01_over_0.1_now"] = round(
            level["now_default"]["cpu"] / max(level["now_default_slack_0.1"]["cpu"], 1e-9), 3
        )
        out["levels"][name] = level
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
