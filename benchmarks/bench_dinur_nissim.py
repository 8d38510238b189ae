"""Benchmark: Gram-matrix FISTA vs ``scipy.optimize.lsq_linear`` (default) on Dinur-Nissim problems.

Both solve ``min ||Q x - b||^2, 0 <= x <= 1`` (JASON (JSR-19-2F) eq. (4-4)) on the same random
0/1 query matrices and answers (noiseless and Laplace-noised). FISTA's time includes
building the Gram matrix ``Q'Q`` and ``Q'b``. For each problem the benchmark prints the
time of each solver, their ratio, the fraction of bits each recovers, the share of
bits on which their rounded solutions agree and the largest difference of the relaxed
solutions. For small problems Dinur and Nissim's LP (HiGHS) is timed too.

Run: ``.venv/bin/python benchmarks/bench_dinur_nissim.py [--quick]``; prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from censusdp import __version__
from censusdp.attacks.dinur_nissim._bounded_ls import (
    gram_fista,
    lp_solve,
    lsq_linear_solve,
    round_bits,
)
from censusdp.privacy.randomness import experiment_generator


def _problem(
    n: int, m: int, epsilon: float | None, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = experiment_generator(seed)
    d = rng.integers(0, 2, n).astype(np.float64)
    q = rng.integers(0, 2, (m, n)).astype(np.float32)
    b = q.astype(np.float64) @ d
    if epsilon is not None:
        b = b + rng.laplace(0.0, 1.0 / epsilon, m)
    return q, b, d


def _time(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small problems only")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    cases = [
        (300, 90, None),
        (300, 300, None),
        (300, 600, 0.5),
        (1000, 300, None),
        (1000, 700, None),
        (1000, 2000, 0.1),
        (1000, 2000, 1.0),
        (1000, 5000, 0.05),
    ]
    if not args.quick:
        cases += [(2000, 4000, 0.2), (4000, 4000, 0.5)]
    rows = []
    for i, (n, m, eps) in enumerate(cases):
        print(f"bench: n={n} m={m} epsilon={eps}", file=sys.stderr, flush=True)
        q, b, d = _problem(n, m, eps, args.seed + i)
        repeat = 3 if n * m <= 2e6 else 1

        def fista(q=q, b=b):
            g = (q.T @ q).astype(np.float64)
            c = q.T.astype(np.float64) @ b
            return gram_fista(g, c).x[:, 0]

        t_f, x_f = _time(fista, repeat)
        t_l, x_l = _time(lambda q=q, b=b: lsq_linear_solve(q, b).x[:, 0], repeat)
        row = {
            "n": n,
            "m": m,
            "noise": "none" if eps is None else f"laplace eps={eps}",
            "fista_seconds": t_f,
            "lsq_linear_seconds": t_l,
            "speedup_lsq_linear_over_fista": t_l / t_f,
            "fraction_recovered_fista": float((round_bits(x_f) == d).mean()),
            "fraction_recovered_lsq_linear": float((round_bits(x_l) == d).mean()),
            "rounded_agreement": float((round_bits(x_f) == round_bits(x_l)).mean()),
            "max_abs_difference": float(np.max(np.abs(x_f - x_l))),
            "objective_fista": float(np.sum((q @ x_f - b) ** 2)),
            "objective_lsq_linear": float(np.sum((q @ x_l - b) ** 2)),
        }
        if n <= 300:
            t_p, x_p = _time(lambda q=q, b=b: lp_solve(q, b).x[:, 0], 1)
            row["lp_seconds"] = t_p
            row["fraction_recovered_lp"] = float((round_bits(x_p) == d).mean())
        rows.append(row)
    speed = [r["speedup_lsq_linear_over_fista"] for r in rows]
    print(
        json.dumps(
            {
                "benchmark": "dinur_nissim_bounded_least_squares",
                "package_version": __version__,
                "numpy": np.__version__,
                "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS", "default"),
                "cases": rows,
                "geometric_mean_speedup": float(np.exp(np.mean(np.log(speed)))),
                "min_rounded_agreement": min(r["rounded_agreement"] for r in rows),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
