"""Predicted errors (``censusdp evaluate --release RUN``, no truth) against measured errors.

On a generated state we hold the truth, so the errors that ``expected_errors`` predicts
from the release alone can be compared with the errors the release and the GLS estimates
actually have:

* released counts: the predicted MAE (mean over ``K`` simulations around the release
  itself, with its Monte Carlo standard error and the sd of one release's MAE) against
  the MAE of the release against the truth (``censusdp evaluate --truth``'s number), per
  geolevel and measure; ``z = (actual - predicted) / sqrt(sd_one^2 + mc_se^2)`` and the
  ratio ``actual / predicted``;
* GLS estimates: the closed-form RMSE ``sqrt(mean sd^2)`` against the RMSE of the GLS
  estimates against the truth.

The reference in the same run is the truth itself. Timings are wall-clock seconds of the
prediction (simulations + GLS) and of the release's own TopDown estimation.

Usage::

    .venv/bin/python benchmarks/bench_errorbars.py [--state VT] [--scale 0.05]
        [--simulations 5] [--seed 1] [--workers 1]

Prints one JSON document to stdout; progress goes to stderr.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from censusdp.cli import main  # noqa: E402
from censusdp.data.geography import GeoLevels  # noqa: E402
from censusdp.data.histograms import person_histogram, pl94_view, unit_histogram  # noqa: E402
from censusdp.evaluate.core import evaluate_data, read_release  # noqa: E402
from censusdp.evaluate.errorbars import MEASURES, expected_errors  # noqa: E402
from censusdp.evaluate.errorbars_report import expected_sentences  # noqa: E402
from censusdp.infer.release import release_gls  # noqa: E402
from censusdp.io.cef import read_cef  # noqa: E402
from censusdp.io.rundir import RunDir, read_manifest  # noqa: E402
from censusdp.tables import table_arrays  # noqa: E402


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def gls_actual(cef_dir: Path, run: Path) -> dict[str, dict[str, float]]:
    """RMSE of the GLS estimates against the truth, per measure and level."""
    manifest = read_manifest(run)
    h, _ = RunDir(run).invariants(GeoLevels.from_pairs(manifest["geolevels"]))
    cef = read_cef(cef_dir)
    truth = table_arrays(
        person_histogram(pl94_view(cef.persons), h), unit_histogram(cef.units, h), h
    )
    gls = release_gls(run)
    names = h.geolevels.names
    acc: dict[tuple[str, str], list[float]] = {}
    for res in gls.chunks:
        li = res.level
        t = np.concatenate(
            [truth["P1"][li][:, :1]] + [truth[n][li] for n in ("P1", "P2", "P3", "P4", "P5", "H1")],
            axis=1,
        )[res.start : res.stop]
        e = res.estimate - t
        for j, line in enumerate(gls.lines):
            m = "total_population" if line == "total" else line.split("_")[0]
            slot = acc.setdefault((m, names[li]), [0.0, 0.0])
            slot[0] += float((e[:, j] ** 2).sum())
            slot[1] += e.shape[0]
    out: dict[str, dict[str, float]] = {}
    for (m, lv), (ss, n) in acc.items():
        out.setdefault(m, {})[lv] = math.sqrt(ss / n)
    return out


def main_bench() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state", default="VT")
    ap.add_argument("--scale", type=float, default=0.05)
    ap.add_argument("--simulations", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--keep", default=None, help="directory to keep the state and release in")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-errorbars-") as tmp:
        d = Path(args.keep or tmp)
        cef, run = d / "cef", d / "run"
        if not (run / "manifest.json").exists():
            gen = ["generate", "--state", args.state, "--seed", str(args.seed), "--out", str(cef)]
            if args.scale < 1:
                gen += ["--scale", str(args.scale)]
            assert main([*gen, "--quiet"]) == 0
            assert main(["run", "--input", str(cef), "--out", str(run),
                         "--seed", str(args.seed), "--quiet"]) == 0  # fmt: skip
        release_timings = read_manifest(run).get("timings", {})
        t = time.perf_counter()
        pred = expected_errors(
            run, simulations=args.simulations, seed=args.seed, workers=args.workers, progress=_say
        )
        pred_seconds = time.perf_counter() - t
        _say("measuring the actual errors against the truth")
        c = read_cef(cef)
        actual, _ = evaluate_data(c.persons, c.units, read_release(run), district_draws=1)
        g_actual = gls_actual(cef, run)
    rows = []
    for m in MEASURES:
        for lv in pred["geolevels"]:
            p = pred["released"]["by_level"][m][lv]
            a = actual["metrics"][m][lv]["mae"]
            spread = math.hypot(p["mae_sd_one_release"] or 0.0, p["mae_mc_se"] or 0.0)
            g = pred["gls"]["by_level"][m][lv]["rmse"]
            ga = g_actual[m][lv]
            rows.append(
                {
                    "measure": m,
                    "geolevel": lv,
                    "units": pred["units"][lv],
                    "released_mae_actual": a,
                    "released_mae_predicted": p["mae"],
                    "released_mae_mc_se": p["mae_mc_se"],
                    "released_mae_sd_one_release": p["mae_sd_one_release"],
                    "z": (a - p["mae"]) / spread if spread > 0 else None,
                    "ratio": a / p["mae"] if p["mae"] > 0 else None,
                    "gls_rmse_predicted": g,
                    "gls_rmse_actual": ga,
                    "gls_ratio": ga / g if g > 0 else None,
                }
            )
    print(
        json.dumps(
            {
                "state": args.state,
                "scale": args.scale,
                "seed": args.seed,
                "simulations": args.simulations,
                "units": pred["units"],
                "prediction_seconds": round(pred_seconds, 1),
                "release_estimation_seconds": release_timings.get("estimate_persons"),
                "note": "wall-clock on a shared 2-core machine (under load)",
                "sentences": [re.sub(r"<[^>]+>", "", x) for x in expected_sentences(pred)],
                "rows": rows,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main_bench()
