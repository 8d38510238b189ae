"""Benchmark of the TopDown estimation kernels (least squares, rounding, failsafe).

Peers in the same run: ADMM (structure-exploiting, one shared factorisation) vs Clarabel
(generic interior point, qdldl) for the least-squares step, and OR-Tools min-cost flow vs
SciPy HiGHS dual simplex (the same transportation LP) for the rounding step. Reports time
ratios and the objective gap. Cases (synthetic people, production-like noise):

* ``block_group``: a pl94 block group, 30 blocks, ~1,500 people, the 11 pl94-2020 queries
  (block-level rho ~ 0.103);
* ``county``: a pl94 county, 20 tracts, ~50,000 people (tract-level rho ~ 0.43);
* ``root``: the US on pl94, one child, every non-structural-zero cell, exact total;
* ``dhc_lite_block_group``: the 233,856-cell dhc-lite schema, 30 blocks, ~1,500 people,
  marginals sex*age, hispanic*cenrace, votingage*hispanic*cenrace, hhgq, total.

Usage::

    .venv/bin/python benchmarks/bench_topdown_kernels.py [--repeats 3] [--quick]

Prints one JSON document to stdout; progress goes to stderr. BLAS is limited to one thread
(``OPENBLAS_NUM_THREADS=1`` unless set): both peers are single-threaded and an
oversubscribed BLAS makes small dense products 10-100x slower on a busy 2-core machine.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "release" / "topdown"))

from _topdown_gen import (  # noqa: E402
    DHC_LITE_QUERIES,
    census_subproblem,
    root_subproblem,
)

import censusdp  # noqa: E402
from censusdp.release.topdown import make_feasible, round_to_integers, solve_l2  # noqa: E402

CASES = {
    "block_group": dict(n_children=30, n_people=1500, rho=0.103),
    "county": dict(n_children=20, n_people=50_000, rho=0.43),
    "dhc_lite_block_group": dict(
        schema_name="dhc-lite", queries=DHC_LITE_QUERIES, n_children=30, n_people=1500, rho=0.103
    ),
    "root": None,
}


def _timed(fn, *args, **kw):
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t0


def run_case(name: str, seed: int, clarabel: bool) -> dict:
    """One subproblem: failsafe, both least-squares peers, both rounding peers."""
    rng = np.random.default_rng(seed)
    if name == "root":
        sub, truth = root_subproblem(rng)
    else:
        sub, truth = census_subproblem(rng, **CASES[name])
    sub, report = make_feasible(sub)
    out: dict = {
        "case": name,
        "seed": seed,
        "k": sub.k,
        "c": sub.c,
        "people": int(truth.sum()),
        "failsafe_seconds": report.seconds,
        "failsafe_used": report.used,
    }
    admm, t_admm = _timed(solve_l2, sub, method="admm")
    out.update(
        admm_seconds=t_admm,
        admm_iterations=admm.iterations,
        admm_status=admm.solver_status,
        admm_max_violation=admm.max_violation,
        admm_objective=admm.objective,
    )
    x = admm.x
    if clarabel:
        cl, t_cl = _timed(solve_l2, sub, method="clarabel")
        out.update(
            clarabel_seconds=t_cl,
            clarabel_iterations=cl.iterations,
            clarabel_status=cl.solver_status,
            clarabel_max_violation=cl.max_violation,
            clarabel_objective=cl.objective,
            clarabel_over_admm_time=t_cl / t_admm,
            objective_rel_gap=(admm.objective - cl.objective) / max(1.0, abs(cl.objective)),
        )
    xf, t_flow = _timed(round_to_integers, sub, x, method="ortools")
    xl, t_lp = _timed(round_to_integers, sub, x, method="linprog")
    out.update(
        round_flow_seconds=t_flow,
        round_lp_seconds=t_lp,
        lp_over_flow_time=t_lp / t_flow,
        round_l1_flow=float(np.abs(xf - x).sum()),
        round_l1_lp=float(np.abs(xl - x).sum()),
        round_max_cell_change=float(np.abs(xf - x).max(initial=0.0)),
        l1_error_vs_truth=int(np.abs(xf - truth).sum()),
    )
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print JSON."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="seeds per block-group case")
    ap.add_argument("--seed", type=int, default=2020)
    ap.add_argument("--quick", action="store_true", help="skip Clarabel on the county case")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    args = ap.parse_args(argv)
    results = []
    t0 = time.perf_counter()
    for name in args.cases.split(","):
        reps = args.repeats if "block_group" in name else 1
        for r in range(reps):
            print(f"[bench_topdown_kernels] {name} seed {args.seed + r} ...", file=sys.stderr)
            clar = not (args.quick and name == "county")
            res = run_case(name, args.seed + r, clar)
            print(
                f"[bench_topdown_kernels]   admm {res['admm_seconds']:.3f}s "
                f"clarabel {res.get('clarabel_seconds', float('nan')):.3f}s "
                f"flow {res['round_flow_seconds']:.4f}s lp {res['round_lp_seconds']:.4f}s",
                file=sys.stderr,
            )
            results.append(res)
    summary = {}
    for name in args.cases.split(","):
        rows = [r for r in results if r["case"] == name]
        s = {
            "k": rows[0]["k"],
            "c_median": statistics.median(r["c"] for r in rows),
            "admm_seconds_median": statistics.median(r["admm_seconds"] for r in rows),
            "lp_over_flow_time_median": statistics.median(r["lp_over_flow_time"] for r in rows),
        }
        if "clarabel_seconds" in rows[0]:
            s["clarabel_seconds_median"] = statistics.median(r["clarabel_seconds"] for r in rows)
            s["clarabel_over_admm_time_median"] = statistics.median(
                r["clarabel_over_admm_time"] for r in rows
            )
            s["objective_rel_gap_max"] = max(abs(r["objective_rel_gap"]) for r in rows)
        summary[name] = s
    doc = {
        "benchmark": "topdown_kernels",
        "package_version": censusdp.__version__,
        "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
        "cpu_count": os.cpu_count(),
        "seconds_total": time.perf_counter() - t0,
        "summary": summary,
        "runs": results,
    }
    json.dump(doc, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
