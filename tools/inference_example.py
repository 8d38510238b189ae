"""The worked example of docs/inference.md: one tract through release, GLS and posterior.

Given a generated CEF (``censusdp generate``), its release (``censusdp run``) and the GLS
estimates (``censusdp infer``), prints for one tract and its block groups the released
(TopDown) count, the GLS estimate with its 90%/95% intervals and the truth for a table
line, then the posterior of the line's proportion of the tract population from (a) the
single raw NMF count of the tract (its exact discrete Gaussian law) and (b) the GLS
estimate treated as a Gaussian noisy count, each with the naive analysis; and draws the
figure.

Usage::

    PYTHONPATH=src .venv/bin/python tools/inference_example.py --cef CEF --run RUN \\
        --gls GLS --tract 50027965300 --figure docs/figures/inference_tract.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from censusdp.data.geography import GeoLevels, Hierarchy
from censusdp.infer import BetaPrior, NoiseLaw, NoisyCount, infer_proportion
from censusdp.infer._plots import PosteriorCurve, TractPanel, plot_tract_example
from censusdp.infer.posterior import exact_posterior
from censusdp.io.cef import read_cef
from censusdp.io.nmf_files import read_nmf_rows
from censusdp.tables import tables_to_arrays, tabulate


def _strings(table, col: str) -> np.ndarray:
    return np.asarray(table.column(col).to_numpy(zero_copy_only=False)).astype(str)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cef", required=True)
    ap.add_argument("--run", required=True)
    ap.add_argument("--gls", required=True)
    ap.add_argument("--tract", required=True)
    ap.add_argument("--line", default="P2_002N", help="table line (default: Hispanic or Latino)")
    ap.add_argument("--query", default="hispanic", help="tract-level NMF query holding the line")
    ap.add_argument("--cell", type=int, default=1, help="row of that query")
    ap.add_argument("--figure", required=True)
    args = ap.parse_args()
    run = Path(args.run)
    m = json.loads((run / "manifest.json").read_text())
    blocks = pq.read_table(run / "invariants.parquet")
    h = Hierarchy.from_blocks(
        _strings(blocks, "geocode").astype("U16"), GeoLevels.from_pairs(m["geolevels"])
    )
    names = h.geolevels.names
    lt, lb = names.index("Tract"), names.index("BlockGroup")
    tract = args.tract
    units = [(lt, tract)] + [(lb, c) for c in h.geocodes[lb] if c.startswith(tract)]
    table = args.line.split("_")[0]
    col = int(args.line.split("_")[1][:3]) - 1
    cef = read_cef(args.cef)
    truth_arr = tables_to_arrays(tabulate(cef.persons, cef.units, h), h)
    released = pq.read_table(run / "tables" / f"{table}.parquet")
    rel = {
        (g, c): v
        for g, c, v in zip(
            _strings(released, "geolevel"),
            _strings(released, "geocode"),
            released.column(args.line).to_numpy(),
            strict=True,
        )
    }
    est = pq.read_table(Path(args.gls) / "estimates.parquet")
    key = list(
        zip(
            _strings(est, "geolevel"), _strings(est, "geocode"), _strings(est, "query"), strict=True
        )
    )
    idx = {k: i for i, k in enumerate(key)}
    cols = {
        c: est.column(c).to_numpy()
        for c in ("estimate", "sd", "ci90_low", "ci90_high", "ci95_low", "ci95_high")
    }
    rows = []
    for level, code in units:
        i = idx[(names[level], code, args.line)]
        u = int(np.searchsorted(h.geocodes[level], code))
        rows.append(
            {
                "geolevel": names[level],
                "geocode": code,
                "truth": int(truth_arr[table][level][u, col]),
                "released_topdown": int(rel[(names[level], code)]),
                "gls_estimate": float(cols["estimate"][i]),
                "gls_sd": float(cols["sd"][i]),
                "ci90": [int(cols["ci90_low"][i]), int(cols["ci90_high"][i])],
                "ci95": [int(cols["ci95_low"][i]), int(cols["ci95_high"][i])],
            }
        )
    it = idx[("Tract", tract, "total")]
    n = int(round(float(cols["estimate"][it])))
    u = int(np.searchsorted(h.geocodes[lt], tract))
    true_total = int(truth_arr["P1"][lt][u, 0])
    nmf = read_nmf_rows(run / "noisy_measurements.parquet")
    nmf = nmf.filter(
        pc.and_(
            pc.and_(
                pc.equal(nmf.column("geocode").cast(pa.string()), tract),
                pc.equal(nmf.column("query").cast(pa.string()), args.query),
            ),
            pc.equal(nmf.column("cell"), args.cell),
        )
    )
    raw, raw_var = float(nmf.column("value")[0].as_py()), float(nmf.column("variance")[0].as_py())
    prior = BetaPrior()
    law_raw = NoiseLaw.from_args("discrete-gaussian", scale=str(np.sqrt(raw_var)))
    post_raw = infer_proportion(NoisyCount(n, raw), law_raw, prior)
    g = rows[0]
    law_gls = NoiseLaw.from_args("gaussian", scale=repr(g["gls_sd"]))
    post_gls = infer_proportion(NoisyCount(n, g["gls_estimate"]), law_gls, prior)
    theta_truth = g["truth"] / true_total
    out = {
        "tract": tract,
        "line": args.line,
        "rows": rows,
        "n_used": n,
        "tract_total_truth": true_total,
        "tract_total_gls": [float(cols["estimate"][it]), float(cols["sd"][it])],
        "theta_truth": theta_truth,
        "raw_nmf_count": {
            "query": args.query,
            "cell": args.cell,
            "value": raw,
            "variance": raw_var,
        },
        "posterior_from_raw_count": {
            k: post_raw[k] for k in ("mean", "ci95", "naive", "true_count")
        },
        "posterior_from_gls": {k: post_gls[k] for k in ("mean", "ci95", "naive", "true_count")},
    }
    lo = min(post_raw["ci95"][0], post_gls["ci95"][0])
    hi = max(post_raw["ci95"][1], post_gls["ci95"][1], post_raw["naive"]["ci95"][1])
    grid = np.linspace(max(lo - 0.02, 0.0), min(hi + 0.03, 1.0), 800)
    mix_raw = exact_posterior(NoisyCount(n, raw), law_raw, prior)
    mix_gls = exact_posterior(NoisyCount(n, g["gls_estimate"]), law_gls, prior)
    xr = min(max(raw, 0.0), n)
    curves = [
        PosteriorCurve(
            f"from the raw NMF count {raw:g} (sd {np.sqrt(raw_var):.1f})",
            grid,
            mix_raw.pdf(grid),
            post_raw["ci95"],
        ),
        PosteriorCurve.beta("  same count, naive", 1 + xr, 1 + n - xr, grid),
        PosteriorCurve(
            f"from the GLS estimate {g['gls_estimate']:.1f} (sd {g['gls_sd']:.1f})",
            grid,
            mix_gls.pdf(grid),
            post_gls["ci95"],
        ),
    ]
    panel = TractPanel(
        [
            f"{r['geolevel']}\n{r['geocode'][-7:] if r['geolevel'] != 'Tract' else r['geocode']}"
            for r in rows
        ],
        np.array([r["truth"] for r in rows], float),
        np.array([r["released_topdown"] for r in rows], float),
        np.array([r["gls_estimate"] for r in rows]),
        (np.array([r["ci90"][0] for r in rows]), np.array([r["ci90"][1] for r in rows])),
        (np.array([r["ci95"][0] for r in rows]), np.array([r["ci95"][1] for r in rows])),
        what=f"{args.line} (count)",
    )
    plot_tract_example(
        args.figure,
        panel,
        curves,
        theta_truth=theta_truth,
        title=f"Tract {tract}: {args.line} released, GLS with intervals, and the posterior of its proportion",
    )
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
