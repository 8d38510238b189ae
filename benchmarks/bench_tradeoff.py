"""Benchmark of the closed-form tradeoff tools against brute-force baselines, in one run.

Prints JSON with, for the randomized-response frontier of Abowd & Schmutte (2019),
Online Appendix B:

* ``frontier``: the closed forms of :func:`censusdp.tradeoff.rr_frontier` (``I``,
  ``dI/deps``, ``d2I/deps2``) against the baseline of numerically differentiating eqs.
  B-8/B-9 with ``mpmath.diff`` at the same precision: time per point for both, the
  speed ratio, and the largest relative difference;
* ``optimum``: :func:`censusdp.tradeoff.optimal_epsilon` (grid bracketing + Brent on
  ``MRT - MRS``) against a brute-force search of the welfare over a fine log grid: times,
  ratio, and the two epsilons;
* ``misallocation``: the same for the misallocation loss on a power-law frontier, with
  the closed-form optimum as the reference.

Run: ``.venv/bin/python benchmarks/bench_tradeoff.py [--points 200] [--grid 100000]``
"""

from __future__ import annotations

import argparse
import json
import math
import time

import mpmath
import numpy as np

from censusdp.tradeoff import (
    LinearPreferences,
    MisallocationPreferences,
    RandomizedResponseFrontier,
    optimal_epsilon,
    rr_frontier,
)


def _numeric(eps: float, pi: float, n: int) -> tuple[float, float, float]:
    """I, I', I'' of eqs. B-8/B-9 at mu = 1/2 by mpmath numerical differentiation."""

    def quality(e):
        rho = mpmath.tanh(e / 2)

        def var(r):
            beta = r * (pi - 0.5) + 0.5
            return beta * (1 - beta) / (r**2 * n)

        return var(mpmath.mpf(1)) - var(rho)

    with mpmath.workdps(50):
        e = mpmath.mpf(eps)
        return (
            float(quality(e)),
            float(mpmath.diff(quality, e, 1)),
            float(mpmath.diff(quality, e, 2)),
        )


class _Power:
    label = "power"

    def __init__(self, k: float, alpha: float) -> None:
        self.k, self.alpha = k, alpha

    def quality(self, e: float) -> float:
        return -self.k * e ** (-self.alpha)

    def slope(self, e: float) -> float:
        return self.alpha * self.k * e ** (-self.alpha - 1)

    def curvature(self, e: float) -> float:
        return -self.alpha * (self.alpha + 1) * self.k * e ** (-self.alpha - 2)


def _brute(frontier, prefs, lo: float, hi: float, grid: int) -> float:
    xs = np.geomspace(lo, hi, grid)
    w = [prefs.data_value(frontier.quality(float(x))) - prefs.privacy_cost_at(float(x)) for x in xs]
    return float(xs[int(np.argmax(w))])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=200, help="epsilons on the frontier")
    ap.add_argument("--grid", type=int, default=100_000, help="brute-force grid points")
    args = ap.parse_args()

    eps = np.geomspace(0.05, 20, args.points)
    t = time.perf_counter()
    closed = [rr_frontier(float(e), pi="0.3", n=100) for e in eps]
    t_closed = time.perf_counter() - t
    t = time.perf_counter()
    numeric = [_numeric(float(e), 0.3, 100) for e in eps]
    t_numeric = time.perf_counter() - t
    worst = 0.0
    for c, (q, d1, d2) in zip(closed, numeric, strict=True):
        for a, b in ((c.quality, q), (c.slope, d1), (c.curvature, d2)):
            worst = max(worst, abs(a - b) / abs(b))

    f = RandomizedResponseFrontier(n=1)
    prefs = LinearPreferences(privacy_cost=1.0, accuracy_value=10.0)
    t = time.perf_counter()
    opt = optimal_epsilon(f, prefs, search_range=(0.05, 20))
    t_opt = time.perf_counter() - t
    grid = min(args.grid, 20_000)  # each grid point is an mpmath evaluation
    t = time.perf_counter()
    brute = _brute(f, prefs, 0.05, 20, grid)
    t_brute = time.perf_counter() - t

    pf = _Power(k=700.0, alpha=2.0)
    mp = MisallocationPreferences(privacy_cost=550.0, funds_per_person=100.0, areas=2)
    t = time.perf_counter()
    opt2 = optimal_epsilon(pf, mp, search_range=(0.05, 100))
    t_opt2 = time.perf_counter() - t
    t = time.perf_counter()
    brute2 = _brute(pf, mp, 0.05, 100, args.grid)
    t_brute2 = time.perf_counter() - t
    kk = 100.0 * math.sqrt(2 * 2 / math.pi)
    exact2 = math.sqrt(kk * math.sqrt(700.0) / 550.0)

    print(
        json.dumps(
            {
                "frontier": {
                    "points": int(args.points),
                    "closed_form_ms_per_point": 1e3 * t_closed / args.points,
                    "numeric_diff_ms_per_point": 1e3 * t_numeric / args.points,
                    "speedup": t_numeric / t_closed,
                    "max_relative_difference": worst,
                },
                "optimum_rr_linear": {
                    "brent_seconds": t_opt,
                    "brute_force_seconds": t_brute,
                    "brute_force_grid": grid,
                    "speedup": t_brute / t_opt,
                    "epsilon_brent": opt.epsilon,
                    "epsilon_brute_force": brute,
                    "mrt_minus_mrs_at_brent": opt.mrt - opt.mrs,
                },
                "optimum_misallocation_power_law": {
                    "brent_seconds": t_opt2,
                    "brute_force_seconds": t_brute2,
                    "brute_force_grid": int(args.grid),
                    "speedup": t_brute2 / t_opt2,
                    "epsilon_brent": opt2.epsilon,
                    "epsilon_brute_force": brute2,
                    "epsilon_closed_form": exact2,
                    "relative_error_brent": abs(opt2.epsilon - exact2) / exact2,
                    "relative_error_brute_force": abs(brute2 - exact2) / exact2,
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
