"""The AMC margins of the published counts against the truth: the rough plausible truth
(the default) beside the release's own (the previous method), in the same run.

For each seed: generate ``--state`` at ``--scale`` (that seed), release it on the default
spine, draw a random plan of about ``--districts`` contiguous districts (as
``bench_infer_margins.py`` does; an existing ``--dir`` of that benchmark is reused:
``cef{seed}``, ``run{seed}``, ``plan{seed}.csv``), then run
:func:`censusdp.infer.amc.simulate_margins` with ``truth="rough"``: its first generation
(``K`` re-releases of the MDF) is the plain AMC, ``raw_levels``; the rough truth's ``K``
re-releases give ``levels``. Per geolevel (County ... Block) and for the districts, the
ratio of the predicted root mean square error of the published total and voting-age
population (pooled over the geounits: the square root of the mean of the simulated mean
squares) to the actual one (published - truth), for both methods; pooled over the seeds
(sums of squares added before the root) and per seed. Also the block-size shape of the
truth, the MDF and the rough truth (share of empty blocks, sum of squared block sizes).

Usage::

    PYTHONPATH=src .venv/bin/python benchmarks/bench_amc_truth.py \\
        [--state VT] [--scale 0.3] [--seeds 1,2] [--districts 20] [--simulations 4] \\
        [--dir DIR]

Prints one JSON document to stdout; progress goes to stderr.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

LINES = ("P1_001N", "P3_001N")


def _cli(*args: str) -> None:
    cmd = [sys.executable, "-m", "censusdp", *args, "--quiet", "--overwrite"]
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")


def _inputs(args: argparse.Namespace, base: Path, seed: int) -> tuple[Path, Path, Path]:
    """The seed's generated input, release and plan (made unless present)."""
    cef, run, plan = base / f"cef{seed}", base / f"run{seed}", base / f"plan{seed}.csv"
    if not (cef / "persons.parquet").is_file():
        gen = ["--state", args.state, "--seed", str(seed), "--scale", str(args.scale)]
        _cli("generate", *gen, "--out", str(cef))
    if not (run / "manifest.json").is_file():
        _cli("run", "--input", str(cef), "--out", str(run), "--seed", str(seed))
    if not plan.is_file():
        from censusdp.evaluate.districts import random_districts

        blocks = pq.read_table(run / "tables" / "P1.parquet", filters=[("SUMLEV", "=", "750")])
        frame = blocks.select(["GEOID", "P1_001N"]).to_pandas()
        pop = frame.P1_001N.to_numpy()
        d = random_districts(
            pop, max(1, int(pop.sum() // args.districts)), np.random.default_rng(seed)
        )
        labels = np.where(d >= 0, d.astype(str), "rest")
        pd.DataFrame({"GEOID20": frame.GEOID, "DISTRICT": labels}).to_csv(plan, index=False)
    return cef, run, plan


def _columns() -> dict[str, int]:
    from censusdp.infer.published import published_variables

    names = list(published_variables())
    return {v: names.index(v) for v in LINES}


def _one_seed(args: argparse.Namespace, base: Path, seed: int) -> dict:
    """Sums of squares (predicted by each method, actual) per level and the districts."""
    from censusdp.data.histograms import person_histogram, unit_histogram
    from censusdp.infer.amc import _stack, simulate_margins
    from censusdp.infer.options import MarginOptions
    from censusdp.infer.release import amc_plan
    from censusdp.tables import table_arrays
    from censusdp.tables.geoids import geoids

    cef, run, plan_file = _inputs(args, base, seed)
    amc = amc_plan(run)
    tab = amc.geo.tabulation
    persons = {
        k: np.asarray(v) for k, v in pq.read_table(cef / "persons.parquet").to_pydict().items()
    }
    units = {k: np.asarray(v) for k, v in pq.read_table(cef / "units.parquet").to_pydict().items()}
    true_person = person_histogram(persons, tab, amc.schema)
    truth = table_arrays(true_person, unit_histogram(units, tab), tab)
    plan = pd.read_csv(plan_file, dtype=str)
    district_of = dict(zip(plan.GEOID20, plan.DISTRICT, strict=True))
    labels = np.array([district_of[g] for g in geoids(tab.blocks, 16)])
    _, district = np.unique(labels, return_inverse=True)
    t = time.perf_counter()
    res = simulate_margins(
        amc, [district], MarginOptions(simulations=args.simulations, seed=seed, truth="rough"),
        progress=lambda line: print(f"seed {seed}: {line}", file=sys.stderr, flush=True),
    )  # fmt: skip
    seconds = time.perf_counter() - t
    cols = _columns()
    out: dict = {"seconds": round(seconds, 1), "levels": {}}
    names = tab.geolevels.names
    for lv in range(2, tab.n_levels):
        err = _stack(amc.truth, lv) - _stack(truth, lv)
        out["levels"][names[lv]] = {
            v: {
                "units": int(err.shape[0]),
                "actual": float((err[:, j].astype(float) ** 2).sum()),
                "release": float(res.raw_levels[lv][:, j].sum()),
                "rough": float(res.levels[lv][:, j].sum()),
            }
            for v, j in cols.items()
        }
    err = _stack(amc.truth, tab.n_levels - 1) - _stack(truth, tab.n_levels - 1)
    n = int(district.max()) + 1
    out["levels"]["District"] = {
        v: {
            "units": n,
            "actual": float((np.bincount(district, weights=err[:, j], minlength=n) ** 2).sum()),
            "release": float(res.raw_districts[0][:, j].sum()),
            "rough": float(res.districts[0][:, j].sum()),
        }
        for v, j in cols.items()
    }
    # the block sizes' shape: the truth, the MDF, one rough truth (the same draw)
    sizes = {
        "truth": np.asarray(true_person.sum(axis=1)).ravel(),
        "release": np.asarray(amc.blocks.pl94.sum(axis=1)).ravel(),
        "rough": res.rough_sizes,
    }
    out["block_sizes"] = {
        k: {"empty": round(float((s == 0).mean()), 4), "sum_of_squares": float((s**2).sum())}
        for k, s in sizes.items()
    }
    out["rough_seeds"] = res.rough_seeds
    return out


def _ratios(per_seed: list[dict]) -> dict:
    """Pooled over the seeds: predicted / actual root mean square error per method."""
    out: dict = {}
    for level in per_seed[0]["levels"]:
        out[level] = {}
        for v in LINES:
            recs = [s["levels"][level][v] for s in per_seed]
            units = sum(r["units"] for r in recs)
            actual = sum(r["actual"] for r in recs)
            row = {"geounits": units, "actual_rmse": round((actual / units) ** 0.5, 3)}
            for method in ("release", "rough"):
                pred = sum(r[method] for r in recs)
                row[f"{method}_predicted_rmse"] = round((pred / units) ** 0.5, 3)
                row[f"{method}_ratio"] = round((pred / actual) ** 0.5, 3) if actual else None
            out[level][v] = row
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--state", default="VT")
    ap.add_argument("--scale", type=float, default=0.3)
    ap.add_argument("--seeds", default="1,2")
    ap.add_argument("--districts", type=int, default=20)
    ap.add_argument("--simulations", type=int, default=4)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    base = Path(args.dir or tempfile.mkdtemp(prefix="bench-amc-truth-"))
    load_before = os.getloadavg()
    per_seed = [_one_seed(args, base, int(s)) for s in args.seeds.split(",")]
    print(
        json.dumps(
            {
                "state": args.state,
                "scale": args.scale,
                "seeds": args.seeds,
                "simulations": args.simulations,
                "spine": "optimized (pl94-2020 default)",
                "ratio": _ratios(per_seed),
                "per_seed": {
                    s: {
                        "ratio": _ratios([r]),
                        "block_sizes": r["block_sizes"],
                        "seconds": r["seconds"],
                    }
                    for s, r in zip(args.seeds.split(","), per_seed, strict=True)
                },
                "load_average": {"before": load_before, "after": os.getloadavg()},
                "dir": str(base),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
