"""A wide family solved whole as ``--fidelity production`` solves it, per backend, against split.

``--fidelity production`` never splits a family (production solves every parent with all
its children in one problem), so California's tract level holds one task of Los Angeles
County's 2,334 tracts. This benchmark builds a synthetic county family of ``k`` tracts
(about 4,300 people a tract as in Los Angeles, the pl94 tract-level queries with
rho 0.43: ``bench_split.py``'s families) and solves it

* whole, as production fidelity's task does (:class:`censusdp.release.topdown.tasks.Task`
  with ``production=True``, production's least-squares passes and rounder at the tract
  level), once per least-squares backend (``--methods``: Clarabel with faer, the interior
  point, the active set, and ``auto``'s chain), each in a fresh forked process, so that
  its CPU seconds (``time.process_time``) and its peak resident memory
  (``ru_maxrss`` of that process less the memory it started with) are its own;
* split in chunks of ``--max-children`` (the default fidelity), in the same run, so the
  ratio of the two does not depend on the machine's load.

It also reports where the whole solve's time goes (least squares, rounding; production's
rounder's own CPU seconds and each pass's objective, and with ``--rounder before`` the
rounder's networks as they were, on the same least-squares point) and the error against
the truth (L1 over cells), fits ``cpu ~ a k^b`` to the whole solves of
``--fit-method`` over the sizes run, and projects California's tract level in production
fidelity on ``--cores`` cores: every county family of the generator's 2010 tracts
(``censusdp/generate/tracts2010.parquet``; Los Angeles 2,346) solved whole at the fitted
cost relative to the split one (:func:`project_california`), scheduled longest first on
the least loaded core, in place of the default run's measured tract level
(docs/scaling.md).
Prints JSON.

    python benchmarks/bench_whole_family.py --k 2334
    python benchmarks/bench_whole_family.py --k 2334 --admm-iterations 40   # per iteration only
    python benchmarks/bench_whole_family.py --k 200,400 --methods clarabel,activeset
    python benchmarks/bench_whole_family.py --k 100,200,400 --methods auto --rounder before
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "release" / "topdown"))

from _topdown_gen import PL94_QUERIES, census_subproblem  # noqa: E402

from censusdp.data.schema import get_schema  # noqa: E402
from censusdp.release.topdown.multipass import bind_l2, bind_rounding  # noqa: E402
from censusdp.release.topdown.passes import plans_for  # noqa: E402
from censusdp.release.topdown.split import (  # noqa: E402
    chunk_starts,
    chunk_subproblems,
    coarse_subproblem,
)
from censusdp.release.topdown.tasks import Task, run_task  # noqa: E402

PEOPLE_PER_TRACT = 4_300
TRACT_RHO = 0.43
LEVELS = ("US", "State", "County", "Tract", "Block_Group", "Block")


def _say(msg: str) -> None:
    print(f"[bench_whole_family] {msg}", file=sys.stderr, flush=True)


def as_driver_builds(sub):  # noqa: ANN001, ANN201
    """The family as the driver builds it (``subproblems.make_subproblem``): weights
    scaled to a largest of 1 and ``noise_scale`` the standard deviation of the most
    precise query, so the backends stop at a thousandth of that noise
    (``solvers.least_squares.NOISE_TOL``). Without it (``--tolerance tight``) they stop
    at ``1e-7`` relative to the weights, a thousand times tighter than a release."""
    import dataclasses

    least = float((1.0 / sub.weights).min())
    return dataclasses.replace(
        sub, weights=sub.weights / sub.weights.max(), noise_scale=float(np.sqrt(least))
    )


def _kept_cells(sub) -> np.ndarray:  # noqa: ANN001
    """The schema cells of a family's kept columns (read off its ``detailed`` rows)."""
    from censusdp.data.queries import make_query

    schema = get_schema("pl94")
    q = make_query(schema, "detailed")
    cell_of_row = np.full(q.n_rows, -1, dtype=np.int64)
    cells = np.arange(schema.size)
    cell_of_row[q.row_of_cell[cells]] = cells
    kept = cell_of_row[sub.query_rows[PL94_QUERIES.index("detailed")]]
    if (kept < 0).any() or not np.array_equal(q.row_of_cell[kept], sub.query_rows[-1]):
        raise AssertionError("kept cells not recovered")
    return kept


def _tract_plan(kept: np.ndarray) -> tuple:
    """Production's least-squares passes and rounder of a tract family (pl94)."""
    plan = plans_for("pl94", LEVELS, "production")[LEVELS.index("Tract")]
    schema = get_schema("pl94")
    return bind_l2(plan, schema, PL94_QUERIES, "hhgq"), bind_rounding(plan, schema).on(kept)


def _task(sub, kept: np.ndarray, method: str, offset: int = 0) -> Task:
    l2p, rounding = _tract_plan(kept)
    return Task(3, "bench", offset, kept, sub, method, l2p, rounding, production=True)


ADMM_BEFORE = {
    "_CELL_RHO": 1.0,
    "_RHO_ADAPT": 5.0,
    "_DUAL_UNITS": 2.0,
    "_SUPPORT_ROUNDS": 0,
    "_MOVE_UNITS": float("inf"),
}
"""The ADMM as it was before its step-size and repair changes (``--admm before``): the
step size refactored only five times away, the dual residual at twice the tolerance, the
repair's rounds on every cell, any repaired point accepted (docs/scaling.md)."""


ADMM_VARIANTS = {"now": {}, "one-rho": {"_CELL_RHO": 1.0}, "before": ADMM_BEFORE}
"""``--admm``: the ADMM as shipped, with one step size for every constraint row (as it
was before the cells' bound rows took ten times the step size: ``one-rho``), and as it
was before its step-size and repair changes (``before``)."""


def _admm_variant(variant: str) -> None:
    """Set the ADMM's knobs in this (forked) process: ``now`` leaves them as shipped."""
    from censusdp.release.topdown.solvers import admm

    for name, value in ADMM_VARIANTS[variant].items():
        setattr(admm, name, value)


ROUNDER_VARIANTS = {
    "now": {},
    "before": {("_pass_network", "_EVERY_LAYER"): True, ("_flow", "_COST_GCD"): False},
}
"""``--rounder``: production's rounder as shipped, and its flow networks as they were
built before (every layer with nodes in every pass, every weighted row with a middle
node, the costs not divided by their greatest common divisor)."""


def _set_rounder(values: dict) -> dict:
    """Set the rounder's knobs ``{(module, name): value}`` in this process (a variant of
    :data:`ROUNDER_VARIANTS`); returns the values replaced, to set back."""
    from censusdp.release.topdown import _flow, _pass_network

    modules = {"_flow": _flow, "_pass_network": _pass_network}
    old = {(module, name): getattr(modules[module], name) for module, name in values}
    for (module, name), value in values.items():
        setattr(modules[module], name, value)
    return old


def _pass_objectives(x: np.ndarray, out: np.ndarray, passes) -> list[int]:  # noqa: ANN001
    """Production's objective of each rounding pass: ``sum |A_q b - round(A_q frac(x))|``
    over its queries, ``b = out - floor(x)`` (x snapped as the rounder snaps it)."""
    import scipy.sparse as sp

    from censusdp.release.topdown.rounding import _snap

    xs = _snap(x)
    f = np.floor(xs)
    got = []
    for qs in passes.passes:
        total = 0.0
        for q in qs:
            rows = passes.rows[q]
            c = rows.size
            m = sp.csr_matrix((np.ones(c), (np.arange(c), rows)), shape=(c, int(rows.max()) + 1))
            total += float(np.abs((out - f) @ m - np.rint((xs - f) @ m)).sum())
        got.append(int(round(total)))
    return got


def _count_rounder() -> list[dict]:
    """Record production's rounder in this (forked) process: its CPU seconds on the
    task's least-squares point, and that point (``"call"``, for :func:`_rerun_rounder`)."""
    from censusdp.release.topdown import tasks

    calls: list[dict] = []
    inner = tasks.round_in_passes

    def counted(sub, x, passes, **kw):  # noqa: ANN001, ANN003, ANN202
        c0 = time.process_time()
        out = inner(sub, x, passes, **kw)
        calls.append(
            {
                "rounder": "now",
                "cpu_s": round(time.process_time() - c0, 2),
                "call": (inner, sub, x, passes, kw, out),
            }
        )
        return out

    tasks.round_in_passes = counted
    return calls


def _rerun_rounder(calls: list[dict], variants: list[str]) -> list[dict]:
    """Each call's pass objectives, then each rounder variant on its point (after the
    task, so that the task's CPU seconds are its own): CPU seconds, pass objectives,
    whether the counts are the same."""
    out = []
    for call in calls:
        inner, sub, x, passes, kw, now = call.pop("call")
        out.append({**call, "pass_objectives": _pass_objectives(x, now, passes)})
        for variant in variants:
            old = _set_rounder(ROUNDER_VARIANTS[variant])
            c0 = time.process_time()
            got = inner(sub, x, passes, **kw)
            cpu = time.process_time() - c0
            _set_rounder(old)
            out.append(
                {
                    "rounder": variant,
                    "cpu_s": round(cpu, 2),
                    "pass_objectives": _pass_objectives(x, got, passes),
                    "same_counts": bool(np.array_equal(got, now)),
                }
            )
    return out


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _whole_child(conn, sub, kept, truth, method: str, variant: str, rounders: list) -> None:  # noqa: ANN001
    start = _rss_mb()
    try:
        _admm_variant(variant)
        calls = _count_admm()
        rounded = _count_rounder()
        r = run_task(_task(sub, kept, method))
        peak = _rss_mb()
        got = {
            "method": method,
            "admm": variant,
            "admm_solves": calls,
            "solved_by": r.method,
            "status": r.status,
            "attempts": [list(a) for a in r.attempts],
            "cpu_s": round(r.cpu_seconds, 3),
            "wall_s": round(r.seconds, 3),
            "least_squares_wall_s": round(r.solve_seconds, 3),
            "rounding_wall_s": round(r.rounding_seconds, 3),
            "max_violation": r.max_violation,
            "peak_rss_mb": round(peak, 1),
            "rss_before_mb": round(start, 1),
            "peak_rss_added_mb": round(peak - start, 1),
            "l1_cells": int(np.abs(r.counts - truth).sum()),
            "counts_sha": int(np.asarray(r.counts, dtype=np.int64).sum()),
        }
        if rounders:  # the task's figures first: the rounders' reruns may be long
            _say(
                f"task: {json.dumps({**got, 'rounder': [{n: v for n, v in c.items() if n != 'call'} for c in rounded]})}"
            )
        conn.send({**got, "rounder": _rerun_rounder(rounded, rounders)})
    except Exception as exc:  # noqa: BLE001 - reported, not hidden
        conn.send({"method": method, "error": f"{type(exc).__name__}: {exc}"})
    conn.close()


def _count_admm() -> list[dict]:
    """Record every ADMM solve of this (forked) process: its iterations, status, CPU s."""
    from censusdp.release.topdown.solvers import admm

    calls: list[dict] = []
    inner = admm.solve_admm

    def counted(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        c0 = time.process_time()
        out = inner(*args, **kw)
        calls.append(
            {
                "cells": args[0].c,
                "objective": None if out.x is None else float(args[0].objective(out.x)),
                "iterations": out.iterations,
                "status": out.status,
                "cpu_s": round(time.process_time() - c0, 2),
            }
        )
        return out

    admm.solve_admm = counted
    return calls


def whole(sub, kept, truth, method: str, variant: str = "now", rounders: tuple = ()) -> dict:  # noqa: ANN001
    """One whole solve in a forked process (its own CPU and peak memory); ``rounders``:
    the rounder's variants also run on its least-squares point (after the task: the
    task's CPU seconds are its own)."""
    ctx = mp.get_context("fork")
    here, there = ctx.Pipe(duplex=False)
    p = ctx.Process(
        target=_whole_child, args=(there, sub, kept, truth, method, variant, list(rounders))
    )
    p.start()
    there.close()
    out = here.recv()
    p.join()
    return out


def _split_child(conn, variant: str, args: tuple) -> None:  # noqa: ANN001
    _admm_variant(variant)
    conn.send({"admm": variant, **split(*args)})
    conn.close()


def split_in_fork(variant: str, *args) -> dict:  # noqa: ANN002
    """:func:`split` with the ADMM ``variant`` (``now``, ``before``) in a forked process."""
    ctx = mp.get_context("fork")
    here, there = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_split_child, args=(there, variant, args))
    p.start()
    there.close()
    out = here.recv()
    p.join()
    return out


def split(sub, kept, truth, max_children: int, method: str) -> dict:  # noqa: ANN001
    """The default fidelity's split: coarse solve over chunks, then one task per chunk."""
    starts = chunk_starts(sub.k, max_children)
    c0 = time.process_time()
    coarse = run_task(_task(coarse_subproblem(sub, starts), kept, method))
    x = np.zeros((sub.k, sub.c), dtype=np.int64)
    chunk_cpu = []
    for ch in chunk_subproblems(sub, starts, coarse.counts):
        r = run_task(_task(ch.sub, kept[ch.kept], method, ch.offset))
        x[ch.offset : ch.offset + ch.sub.k][:, ch.kept] = r.counts
        chunk_cpu.append(r.cpu_seconds)
    if not np.array_equal(x.sum(axis=0), sub.parent):
        raise AssertionError("split solution does not sum to the parent")
    return {
        "max_children": max_children,
        "chunks": int(starts.size),
        "cpu_s": round(time.process_time() - c0, 3),
        "critical_path_cpu_s": round(coarse.cpu_seconds + max(chunk_cpu), 3),
        "l1_cells": int(np.abs(x - truth).sum()),
    }


CA_DEFAULT_SECONDS = 1_062.0
"""California on 2 cores, default fidelity (docs/scaling.md, "Measured: current figures")."""
CA_DEFAULT_TRACT_SECONDS = 115.0
"""... of which the tract level's wall seconds (families of more than 100 tracts split) ..."""
CA_DEFAULT_TRACT_CPU = 222.0
"""... and its tasks' CPU seconds."""
PRODUCTION_OVERHEAD = 0.05
"""Production fidelity's extra work elsewhere (structural zeros in the NMF, every kept
cell in the rounder's box): +5% CPU on Vermont (CHANGELOG.md, ``--fidelity production``)."""


def california_families() -> np.ndarray:
    """Tracts per county of California in the generator's 2010 tracts, largest first."""
    import pyarrow.parquet as pq

    import censusdp.generate

    path = Path(censusdp.generate.__file__).parent / "tracts2010.parquet"
    t = pq.read_table(path, columns=["state", "county"]).to_pydict()
    county = np.asarray(t["county"])[np.asarray(t["state"]) == "06"]
    return np.sort(np.unique(county, return_counts=True)[1])[::-1]


def _loglog(logk: np.ndarray, pts: list[tuple[int, float]]) -> np.ndarray:
    """Log cost at ``logk``: piecewise linear in log-log through the measured points,
    the end segments extended beyond them."""
    lk = np.log([p[0] for p in pts])
    lc = np.log([max(p[1], 1e-6) for p in pts])
    seg = np.clip(np.searchsorted(lk, logk) - 1, 0, lk.size - 2)
    slope = (lc[seg + 1] - lc[seg]) / (lk[seg + 1] - lk[seg])
    return lc[seg] + slope * (logk - lk[seg])


def _schedule(cost: np.ndarray, cores: int) -> float:
    """Longest first, each on the least loaded core: the makespan."""
    load = np.zeros(cores)
    for c in np.sort(cost)[::-1]:
        load[np.argmin(load)] += c
    return float(load.max())


def _split_as_measured(row: dict) -> dict:
    """The split solve with the ADMM the default run was measured with (``before``)."""
    return next((r for r in row.get("split_by_admm", []) if r["admm"] == "before"), row["split"])


def project_california(
    rows: list[dict], method: str, cores: int, limit: int, variant: str = "now"
) -> dict | None:
    """California's tract level in production fidelity (every family whole).

    The synthetic families cost more a tract than California's real ones (the default
    run's tract level: 222 CPU s for 8,057 tracts), so the projection is a ratio: each
    real family's cost in the default run (its share of the 222 s, by tracts) times
    whole / split of a synthetic family of its size (whole: piecewise log-log through
    the measured sizes; split: linear in ``k`` through the measured split solves);
    families of at most ``limit`` tracts are whole in both. The default run was measured
    with the ADMM as it was, so the split cost is the ``before`` variant's where one was
    run (the new ADMM makes the split cheaper too, 2.5x at 200 tracts: the projection
    keeps the measured default costs, an upper bound). The uncalibrated figure (the
    synthetic costs themselves) is reported beside it. Needs two sizes.
    """
    whole = sorted(
        (r["k"], w["cpu_s"])
        for r in rows
        for w in r["whole"]
        if w.get("method") == method and w.get("admm", "now") == variant and "cpu_s" in w
    )
    split = [(r["k"], _split_as_measured(r)["cpu_s"]) for r in rows if "split" in r]
    if len(whole) < 2 or not split:
        return None
    fam = california_families()
    synth_whole = np.exp(_loglog(np.log(fam), whole))
    per_tract = float(np.mean([c / k for k, c in split]))
    ratio = np.where(fam > limit, synth_whole / (per_tract * fam), 1.0)
    real = CA_DEFAULT_TRACT_CPU * fam / fam.sum() * ratio
    tract = _schedule(real, cores)
    total = (CA_DEFAULT_SECONDS - CA_DEFAULT_TRACT_SECONDS) * (1 + PRODUCTION_OVERHEAD) + tract
    return {
        "method": method,
        "admm": variant,
        "whole_measured": [list(p) for p in whole],
        "split_cpu_s_per_tract": round(per_tract, 4),
        "families": int(fam.size),
        "largest": int(fam[0]),
        "largest_whole_over_split": round(float(ratio[0]), 3),
        "largest_cpu_s": round(float(real[0]), 1),
        "tract_level_cpu_s": round(float(real.sum()), 1),
        "tract_level_seconds": round(tract, 1),
        "cores": cores,
        "california_seconds": round(total, 1),
        "california_minutes": round(total / 60, 2),
        "target_met": total <= 20 * 60,
        "uncalibrated": {
            "largest_cpu_s": round(float(synth_whole[0]), 1),
            "tract_level_cpu_s": round(float(synth_whole.sum()), 1),
            "tract_level_seconds": round(_schedule(synth_whole, cores), 1),
        },
    }


def admm_iterations(sub, iterations: int) -> list[dict]:  # noqa: ANN001
    """CPU seconds of ``iterations`` ADMM iterations on the whole family (one pass over
    every query), with the linear solve by Woodbury's identity and by SuperLU (a tenth
    as many iterations: it is the slow one)."""
    from censusdp.release.topdown.solvers import admm
    from censusdp.release.topdown.solvers.base import compress

    comp = compress(sub)
    keep = admm.WOODBURY_MAX_ROWS
    out = []
    for path, rows, n in (("woodbury", keep, iterations), ("superlu", 0, max(iterations // 4, 1))):
        admm.WOODBURY_MAX_ROWS = rows
        c0 = time.process_time()
        admm.solve_admm(sub, comp, max_iter=n, check_every=10)
        cpu = time.process_time() - c0
        out.append(
            {
                "path": "dense" if sub.c <= admm.DENSE_MAX else path,
                "iterations": n,
                "cpu_s": round(cpu, 2),
                "per_iteration": round(cpu / n, 4),
            }
        )
        _say(json.dumps(out[-1]))
    admm.WOODBURY_MAX_ROWS = keep
    return out


def _families(path: str) -> list[dict]:
    """The measured families of an earlier output of this benchmark."""
    return json.loads(Path(path).read_text())["families"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--k", default="2334", help="tracts per family, comma-separated")
    ap.add_argument("--methods", default="auto,clarabel,activeset,interior")
    ap.add_argument("--max-children", type=int, default=100, help="chunks of the split (0: none)")
    ap.add_argument("--split-method", default="auto")
    ap.add_argument("--seed", type=int, default=2020)
    ap.add_argument("--fit-method", default="auto", help="the backend of the projection")
    ap.add_argument(
        "--admm",
        default="now",
        help="the ADMM as shipped ('now'), with one step size for every row ('one-rho') "
        "and/or as it was ('before'), comma-separated; the projection fits the first",
    )
    ap.add_argument(
        "--split-admm",
        default="",
        help="the ADMM variants of the split solves, comma-separated (default: --admm's); "
        "the projection calibrates on 'before', the ADMM the default run was measured with",
    )
    ap.add_argument(
        "--rounder",
        default="",
        help="production's rounder as it was ('before') too, on the least-squares point "
        "of each whole solve with --admm's first variant, after its task (comma-separated)",
    )
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument(
        "--from-json",
        default="",
        help="project only, from the families of earlier outputs (comma-separated files)",
    )
    ap.add_argument(
        "--tolerance",
        choices=("driver", "tight"),
        default="driver",
        help="stop where a release's backends stop (driver) or at 1e-7 (tight, as before)",
    )
    ap.add_argument(
        "--admm-iterations", type=int, default=0, help="time this many ADMM iterations only"
    )
    args = ap.parse_args(argv)
    for flag, value, known in (
        ("--admm", args.admm, ADMM_VARIANTS),
        ("--split-admm", args.split_admm, ADMM_VARIANTS),
        ("--rounder", args.rounder, ROUNDER_VARIANTS),
    ):
        bad = [v for v in filter(None, value.split(",")) if v not in known]
        if bad:
            ap.error(f"{flag}: one of {', '.join(known)}, got {bad[0]!r}")
    rounders = tuple(filter(None, args.rounder.split(",")))
    rows = [f for path in filter(None, args.from_json.split(",")) for f in _families(path)]
    t0 = time.perf_counter()
    for k in [] if rows else [int(v) for v in args.k.split(",")]:
        sub, truth = census_subproblem(
            np.random.default_rng(args.seed + k),
            n_children=k,
            n_people=PEOPLE_PER_TRACT * k,
            rho=TRACT_RHO,
        )
        if args.tolerance == "driver":
            sub = as_driver_builds(sub)
        kept = _kept_cells(sub)
        row: dict = {"k": k, "people": int(truth.sum()), "cells": sub.c, "whole": []}
        if args.admm_iterations:
            row["admm_iterations"] = admm_iterations(sub, args.admm_iterations)
            rows.append(row)
            continue
        if 0 < args.max_children < k:  # first: it is the cheap one
            _say(f"k={k}: split in chunks of <= {args.max_children} ...")
            for variant in (args.split_admm or args.admm).split(","):
                got = split_in_fork(variant, sub, kept, truth, args.max_children, args.split_method)
                row.setdefault("split_by_admm", []).append(got)
                _say(json.dumps(got))
            row["split"] = row["split_by_admm"][0]
        for method, variant in (
            (m, v)
            for m in args.methods.split(",")
            for v in (args.admm.split(",") if m in ("auto", "admm") else ["now"])
        ):
            _say(f"k={k}: whole with {method} (ADMM {variant}) ...")
            first = variant == args.admm.split(",")[0]
            row["whole"].append(whole(sub, kept, truth, method, variant, rounders if first else ()))
            w = row["whole"][-1]
            if "split" in row and "cpu_s" in w:
                w["cpu_ratio_to_split"] = round(w["cpu_s"] / row["split"]["cpu_s"], 3)
            _say(json.dumps(w))
        rows.append(row)
    doc = {
        "benchmark": "whole_family",
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "load_average": os.getloadavg(),
        "people_per_tract": PEOPLE_PER_TRACT,
        "rho": TRACT_RHO,
        "seed": args.seed,
        "tolerance": args.tolerance,
        "seconds_total": round(time.perf_counter() - t0, 1),
        "families": rows,
        "california_production": project_california(
            rows, args.fit_method, args.cores, args.max_children, args.admm.split(",")[0]
        ),
    }
    json.dump(doc, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
