"""Benchmark: block reconstruction (HiGHS MILP via scipy) on a generated state, vs a peer.

1. Generates a state (``--state``, ``--scale``), tabulates its DHC-style block tables
   and reconstructs every block (:func:`censusdp.attacks.dhc.reconstruct.reconstruct_blocks`),
   timing each phase and scoring against the truth (exact and age +-1).
2. Peer comparison on the same block integer programs: the first ``--peer-blocks``
   blocks that need the solver are solved by HiGHS (``scipy.optimize.milp``, what the
   attack uses) and by OR-Tools CP-SAT (costs scaled by 1000 and rounded, as CP-SAT
   needs integers); prints both times, their ratio, and whether both found solutions
   reproducing the tables exactly.

Run: ``.venv/bin/python benchmarks/bench_reconstruct.py [--state DE --scale 1.0]``;
prints JSON to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from censusdp import __version__
from censusdp.attacks.dhc.reconstruct import _block_model, _tasks, reconstruct_blocks
from censusdp.attacks.dhc.scoring import match_counts
from censusdp.attacks.dhc.tables import dhc_tables, keys_of
from censusdp.generate import generate_state
from censusdp.io.cef import read_cef


def _highs(model, time_limit: float) -> tuple[float, bool]:
    t = time.perf_counter()
    res = milp(
        model.cost,
        integrality=np.ones(model.n_var),
        bounds=Bounds(np.zeros(model.n_var), model.ub),
        constraints=LinearConstraint(model.a, model.b, model.b),
        options={"time_limit": time_limit},
    )
    dt = time.perf_counter() - t
    return dt, res.x is not None and model.deviation(np.rint(res.x)) == 0


def _cpsat(model, time_limit: float) -> tuple[float, bool]:
    from ortools.sat.python import cp_model

    t = time.perf_counter()
    m = cp_model.CpModel()
    x = [m.NewIntVar(0, int(u), f"x{i}") for i, u in enumerate(model.ub)]
    a = model.a.tocsr()
    for r in range(a.shape[0]):
        lo, hi = a.indptr[r], a.indptr[r + 1]
        if lo == hi:
            continue
        m.Add(sum(x[j] for j in a.indices[lo:hi]) == int(model.b[r]))
    m.Minimize(sum(int(round(1000 * c)) * v for c, v in zip(model.cost, x, strict=True)))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = 1
    status = solver.Solve(m)
    dt = time.perf_counter() - t
    ok = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    if ok:
        sol = np.array([solver.Value(v) for v in x], dtype=np.float64)
        ok = model.deviation(sol) == 0
    return dt, ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state", default="DE")
    ap.add_argument("--scale", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--peer-blocks", type=int, default=200)
    ap.add_argument("--time-limit", type=float, default=30.0)
    args = ap.parse_args()
    out: dict = {"package_version": __version__, "args": vars(args)}
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        g = generate_state(args.state, args.seed, tmp, scale=args.scale)
        out["generate_seconds"] = round(time.perf_counter() - t, 3)
        persons = read_cef(tmp).persons
    out["persons"] = g.persons
    t = time.perf_counter()
    tables = dhc_tables(persons)
    out["tabulate_seconds"] = round(time.perf_counter() - t, 3)
    out["populated_blocks"] = int(tables.blocks.size)
    print(f"reconstructing {g.persons:,} persons ...", file=sys.stderr)
    rec = reconstruct_blocks(tables, workers=args.workers, time_limit=args.time_limit)
    out["reconstruct_seconds"] = round(rec.seconds, 3)
    out["reconstruct_cpu_seconds"] = rec.extra["cpu_seconds"]
    out["persons_per_second"] = round(g.persons / rec.seconds, 1)
    out["status"] = rec.status.to_dict()
    m = match_counts(
        rec.columns()["geocode"],
        rec.keys,
        persons["geocode"],
        keys_of(persons["sex"], persons["age"], persons["hispanic"], persons["cenrace"]),
    )
    out["match"] = m.to_dict()

    # peer: the same integer programs in HiGHS (scipy) and OR-Tools CP-SAT
    models = []
    for task in _tasks(tables, args.time_limit):
        for rows in task.rows:
            model = _block_model(rows, task.prior, task.age_detail)
            if model is None or model.n_var == 0:
                continue
            if model.forced is not None and model.deviation(model.forced) == 0:
                continue
            models.append(model)
            if len(models) >= args.peer_blocks:
                break
        if len(models) >= args.peer_blocks:
            break
    th = tc = 0.0
    ok_h = ok_c = 0
    for model in models:
        dt, ok = _highs(model, args.time_limit)
        th += dt
        ok_h += ok
        dt, ok = _cpsat(model, args.time_limit)
        tc += dt
        ok_c += ok
    out["peer"] = {
        "blocks": len(models),
        "mean_variables": float(np.mean([mm.n_var for mm in models])) if models else 0.0,
        "highs_seconds": round(th, 3),
        "cpsat_seconds": round(tc, 3),
        "cpsat_over_highs": round(tc / th, 3) if th else None,
        "highs_exact_solutions": int(ok_h),
        "cpsat_exact_solutions": int(ok_c),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
