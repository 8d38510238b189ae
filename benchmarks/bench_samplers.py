"""Throughput of the exact noise samplers against OpenDP 0.16, in the same run.

Prints one JSON document to stdout: for each scale, samples per second of
censusdp's discrete Gaussian and geometric samplers (seeded and secure sources,
one core) and of OpenDP's exact samplers (``make_gaussian`` / ``make_laplace`` on an
integer vector domain, which use exact rejection samplers), and the ratio.

Usage: ``.venv/bin/python benchmarks/bench_samplers.py [--n 10000000] [--opendp-n 20000]``
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from fractions import Fraction

import numpy as np

from censusdp.privacy.mechanisms import DiscreteGaussian, Geometric
from censusdp.privacy.randomness import RandomSource


def _best_rate(fn, n: int, repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return n / best


def _opendp_rate(kind: str, scale: float, n: int) -> float:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    space = dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int)
    if kind == "gaussian":
        meas = dp.m.make_gaussian(*space, scale=scale)
    else:
        space = dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int)
        meas = dp.m.make_laplace(*space, scale=scale)
    data = [0] * n
    return _best_rate(lambda: meas(data), n, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000, help="censusdp samples per timing")
    parser.add_argument("--opendp-n", type=int, default=20_000, help="OpenDP samples per timing")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")

    results = []
    for sigma2 in (1, 10, 100, 1_000, 10_000):
        mech = DiscreteGaussian(Fraction(sigma2))
        t0 = time.perf_counter()
        mech.sample(1, RandomSource.seeded(0))  # builds and caches the table
        build = time.perf_counter() - t0
        seeded = RandomSource.seeded(1)
        secure = RandomSource.secure()
        ours = _best_rate(lambda m=mech, s=seeded: m.sample(args.n, s), args.n, args.repeats)
        ours_secure = _best_rate(lambda m=mech, s=secure: m.sample(args.n, s), args.n, args.repeats)
        theirs = _opendp_rate("gaussian", math.sqrt(sigma2), args.opendp_n)
        row = {
            "mechanism": "discrete_gaussian",
            "sigma_squared": sigma2,
            "table_build_seconds": build,
            "censusdp_per_second": ours,
            "censusdp_secure_per_second": ours_secure,
            "opendp_per_second": theirs,
            "ratio_vs_opendp": ours / theirs,
        }
        results.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    for scale in (1, 25, Fraction(250, 3)):
        mech = Geometric(Fraction(scale))
        mech.sample(1, RandomSource.seeded(0))
        src = RandomSource.seeded(2)
        ours = _best_rate(lambda m=mech, s=src: m.sample(args.n, s), args.n, args.repeats)
        theirs = _opendp_rate("laplace", float(scale), args.opendp_n)
        row = {
            "mechanism": "geometric",
            "scale": str(scale),
            "censusdp_per_second": ours,
            "opendp_per_second": theirs,
            "ratio_vs_opendp": ours / theirs,
        }
        results.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    from importlib.metadata import version

    out = {
        "benchmark": "exact noise samplers, one core",
        "n": args.n,
        "opendp_n": args.opendp_n,
        "opendp_version": version("opendp"),
        "numpy_version": np.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "results": results,
        "min_censusdp_discrete_gaussian_per_second": min(
            r["censusdp_per_second"] for r in results if r["mechanism"] == "discrete_gaussian"
        ),
        "min_ratio_vs_opendp": min(r["ratio_vs_opendp"] for r in results),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
