"""What persons-units consistency costs in H1 accuracy. Prints JSON.

Generates a synthetic state (or reads ``--input``), releases its persons once with
``pl94-2020`` (seeded), then for each unit seed measures the housing units with
production's unit allocation (``pl94-2020-units``, rho = (3379/12343)^2) and estimates
them twice from the *same* noisy measurements:

* ``independent``: as 2020 production (housing units exact, nothing else);
* ``consistent``: held per block to the released household persons
  (``censusdp.release.consistency``).

Reported per geolevel: mean absolute error of the released occupied housing units
against the truth (H1 line 2), for both, their ratio, the raw noisy measurement's error
of the same count (the baseline that no estimate should be much worse than), the share of
geounits where the independent estimate lies outside the consistent bounds, blocks that
break consistency (by rule), failsafe uses, and the seconds each unit estimate took (with
their ratio).

Run: ``python benchmarks/bench_consistency.py [--state VT] [--scale 1] [--seed 1]
[--unit-seeds 1,2,3] [--json OUT.json]``
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from fractions import Fraction  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from censusdp.data.geography import Hierarchy  # noqa: E402
from censusdp.data.histograms import housing_unit_histogram  # noqa: E402
from censusdp.data.schema import get_schema  # noqa: E402
from censusdp.generate import generate_state  # noqa: E402
from censusdp.io.atomic import write_json  # noqa: E402
from censusdp.io.budget_files import load_preset  # noqa: E402
from censusdp.io.cef import read_cef  # noqa: E402
from censusdp.io.mdf_read import read_mdf_histograms  # noqa: E402
from censusdp.privacy.randomness import RandomSource  # noqa: E402
from censusdp.release.consistency import (  # noqa: E402
    UNIT_GROUP_VARIABLE,
    consistency_violations,
    consistent_unit_bounds,
    household_persons,
    independent_unit_bounds,
)
from censusdp.release.measure import measure  # noqa: E402
from censusdp.release.pipeline import run_release  # noqa: E402
from censusdp.release.topdown.driver import TopDownOptions, run_topdown  # noqa: E402


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _occupied(hists: list) -> list[np.ndarray]:
    return [np.asarray(hh[:, 1].todense()).ravel().astype(np.int64) for hh in hists]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--state", default="VT")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1, help="generator and person-noise seed")
    ap.add_argument("--unit-seeds", default="1,2,3", help="comma-separated unit-noise seeds")
    ap.add_argument("--input", default=None, help="an existing CEF directory instead")
    ap.add_argument("--json", default=None, help="also write the JSON here")
    ap.add_argument("--figure", default=None, help="write the MAE-by-level PNG here")
    args = ap.parse_args(argv)
    unit_seeds = [int(s) for s in args.unit_seeds.split(",") if s]

    with tempfile.TemporaryDirectory() as tmp:
        cef_dir = Path(args.input) if args.input else Path(tmp) / "cef"
        if not args.input:
            _say(f"generating {args.state} at scale {args.scale} (seed {args.seed})")
            generate_state(args.state, args.seed, cef_dir, scale=args.scale)
        t = time.perf_counter()
        _say("releasing persons (pl94-2020)")
        run_release(cef_dir, Path(tmp) / "run", budget=load_preset("pl94-2020"), seed=args.seed)
        t_persons = time.perf_counter() - t
        cef = read_cef(cef_dir)
        h = Hierarchy.from_blocks(cef.units["geocode"])
        person_hist, _, _ = read_mdf_histograms(Path(tmp) / "run", h, get_schema("pl94"))
        household = household_persons(person_hist, get_schema("pl94"))
    truth = housing_unit_histogram(cef.units, h)
    hu = np.asarray(truth.sum(axis=1)).ravel().astype(np.int64)
    true_levels = _occupied([lvl.tocsr() for lvl in h.aggregate(truth)])
    # production's unit run, rho = (3379/12343)^2 ~= 0.074944, whatever the preset says
    budget = load_preset("pl94-2020-units").scaled(rho=Fraction(3379, 12343) ** 2)
    plan = [(m.geolevel, m.query, m.mechanism) for m in budget.measurements()]
    units = get_schema("units")
    modes = {
        "independent": (independent_unit_bounds(hu, h), None),
        "consistent": (consistent_unit_bounds(household, hu, h), UNIT_GROUP_VARIABLE),
    }
    names = list(h.geolevels.names)
    mae = {m: np.zeros((len(unit_seeds), h.n_levels)) for m in (*modes, "noisy")}
    # share of units whose independent estimate lies outside the consistent bounds
    outside = np.zeros((len(unit_seeds), h.n_levels))
    lo = [b.group_lower[:, 1] for b in modes["consistent"][0]]
    hi = [b.group_upper[:, 1] for b in modes["consistent"][0]]
    seconds = {m: 0.0 for m in modes}
    broken = {m: [] for m in modes}
    failsafe = dict.fromkeys(modes, 0)
    for i, seed in enumerate(unit_seeds):
        ms = measure(h.aggregate(truth), h, units, plan, RandomSource.seeded(seed))
        for li in range(h.n_levels):
            noisy = ms.read(li, 0, h.n_units(li))[0].values[:, 1]
            mae["noisy"][i, li] = np.abs(noisy - true_levels[li]).mean()
        for mode, (bounds, group) in modes.items():
            t = time.perf_counter()
            est = run_topdown(ms, h, bounds, TopDownOptions(group_variable=group))
            seconds[mode] += time.perf_counter() - t
            failsafe[mode] += len(est.failsafe)
            occ = _occupied(est.histograms)
            for li in range(h.n_levels):
                mae[mode][i, li] = np.abs(occ[li] - true_levels[li]).mean()
                if mode == "independent":
                    outside[i, li] = ((occ[li] < lo[li]) | (occ[li] > hi[li])).mean()
            broken[mode].append(consistency_violations(household, occ[-1], hu))
            _say(f"unit seed {seed}: {mode} block MAE {mae[mode][i, -1]:.4f}")
    mean = {
        m: dict(zip(names, v.mean(axis=0).round(5).tolist(), strict=True)) for m, v in mae.items()
    }
    out = {
        "benchmark": "persons-units consistency: H1 occupied-unit MAE by geolevel",
        "state": args.state if not args.input else str(args.input),
        "scale": args.scale,
        "seed": args.seed,
        "unit_seeds": unit_seeds,
        "units_rho": str(budget.rho),
        "blocks": int(h.blocks.size),
        "blocks_with_household_persons": int((household > 0).sum()),
        # where the person release put household persons in a block whose housing units
        # are all vacant, consistency must release an occupied unit the truth lacks
        "blocks_with_released_household_persons_and_no_true_occupied_unit": int(
            ((household > 0) & (true_levels[-1] == 0)).sum()
        ),
        "blocks_with_true_occupied_units_and_no_released_household_persons": int(
            ((household == 0) & (true_levels[-1] > 0)).sum()
        ),
        "occupied_unit_mae": mean,
        "independent_share_outside_consistent_bounds": dict(
            zip(names, outside.mean(axis=0).round(5).tolist(), strict=True)
        ),
        "mae_ratio_consistent_over_independent": {
            n: round(mean["consistent"][n] / mean["independent"][n], 4)
            if mean["independent"][n] > 0
            else None
            for n in names
        },
        "blocks_breaking_consistency": {
            m: {k: int(np.mean([b[k] for b in v])) for k in v[0]} for m, v in broken.items()
        },
        "failsafe_uses": failsafe,
        "unit_estimate_seconds": {m: round(s / len(unit_seeds), 3) for m, s in seconds.items()},
        "time_ratio_consistent_over_independent": round(
            seconds["consistent"] / max(seconds["independent"], 1e-9), 3
        ),
        "person_release_seconds": round(t_persons, 2),
    }
    print(json.dumps(out, indent=2, allow_nan=False))
    if args.json:
        write_json(out, Path(args.json))
    if args.figure:
        _figure(Path(args.figure), out)
    return 0


def _figure(path: Path, out: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mae = out["occupied_unit_mae"]
    names = list(mae["independent"])
    x = np.arange(len(names))
    fig, ax = plt.subplots(figsize=(7.0, 3.6))
    for k, (mode, color) in enumerate(
        (("noisy", "#bbbbbb"), ("independent", "#ff7f0e"), ("consistent", "#1f77b4"))
    ):
        ax.bar(x + (k - 1) * 0.27, [mae[mode][n] for n in names], 0.27, color=color, label=mode)
    ax.set_xticks(x, names)
    ax.set_yscale("log")
    ax.set_ylabel("MAE, occupied housing units")
    ax.set_title(
        f"{out['state']}: H1 occupied units, unit rho {float(Fraction(out['units_rho'])):.4f}, "
        f"{len(out['unit_seeds'])} seeds"
    )
    ax.legend(frameon=False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
