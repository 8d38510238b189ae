"""Benchmark and reproduction of Kazan & Reiter (2022) sec. 4.3 (Figs. 5-6): exact sums vs the Gibbs sampler.

Prints JSON: for d = 27, rho_1 ~= 0.099, rho_2 ~= 0.247, p = 1/2 and several xi_2,

* the exact probability of a correct decision (exact posterior, strict > 1/2);
* the exact probability under the paper's procedure (1,000 posterior draws, ties to X_1 = 1);
* a Monte Carlo estimate with the vectorized Gibbs sampler (N data sets x 1,000 sweeps),
  with its standard error, for the sampler of eqs. 26-35 and for the variant whose X_1
  update ignores x_1 <= x_2;
* timings, and the speed ratio exact / Monte Carlo.

Run: ``.venv/bin/python benchmarks/bench_risk.py [--n 20000] [--xi2 1,4,10]``
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from fractions import Fraction

import numpy as np

from censusdp.risk import (
    DecisionRule,
    HierarchicalModel,
    approximation_error,
    gibbs_sampler,
    simulate_data,
    two_level_risk,
)

RHO1 = Fraction(256, 100) * Fraction(165, 4099) * Fraction(3945, 4097)
RHO2 = Fraction(256, 100) * Fraction(1256, 4099) * Fraction(1288, 4099)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000, help="data sets per Monte Carlo run")
    ap.add_argument("--xi2", default="1,4,10", help="block-group counts")
    ap.add_argument("--sweeps", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=2022)
    args = ap.parse_args()
    model = HierarchicalModel.two_level(RHO1, RHO2, 27, 0.5)
    paper_rule = DecisionRule(draws=args.sweeps, ties_to_target=True)
    rows = []
    for xi2 in [int(x) for x in args.xi2.split(",")]:
        t = time.perf_counter()
        exact = two_level_risk(model, xi2 - 1)
        exact_paper = two_level_risk(model, xi2 - 1, rule=paper_rule)
        t_exact = time.perf_counter() - t
        row = {
            "xi2": xi2,
            "exact_correct": exact.correct_decision,
            "exact_correct_paper_rule": exact_paper.correct_decision,
            "one_level_correct": exact.one_level_correct,
            "gain_mass": exact.gain,
            "loss_mass": exact.loss,
            "seconds_exact": t_exact,
        }
        xs, ys = simulate_data(model, [xi2 - 1], args.n, seed=args.seed + xi2)
        for name, enforce in (("gibbs", True), ("gibbs_unconstrained_x1", False)):
            print(f"xi2={xi2} {name}: {args.n} chains x {args.sweeps} sweeps", file=sys.stderr)
            g = gibbs_sampler(
                model,
                xs,
                ys,
                iterations=args.sweeps,
                burn_in=100,
                seed=args.seed,
                enforce_order_in_x1_update=enforce,
            )
            hit = float(np.mean(g.posterior >= 0.5))
            row[f"{name}_correct_paper_rule"] = hit
            row[f"{name}_se"] = math.sqrt(hit * (1 - hit) / args.n)
            row[f"{name}_seconds"] = g.seconds
            row[f"{name}_chain_sweeps_per_second"] = args.n * (args.sweeps + 100) / g.seconds
        row["speed_ratio_exact_vs_gibbs"] = row["gibbs_seconds"] / max(t_exact, 1e-9)
        rows.append(row)
    out = {
        "rho1": float(RHO1),
        "rho2": float(RHO2),
        "d": 27,
        "prior": 0.5,
        "paper": {"one_level": 0.5889, "xi2_gt_3": 0.5905, "xi2_1": "above 0.5905"},
        "approximation_eq21": approximation_error(RHO1, 27),
        "rows": rows,
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
