"""Coverage of ``censusdp infer``'s margins against the truth, and its speed.

For each seed: generate ``--state`` at ``--scale`` (that seed), release it on the
default spine (the pl94-2020 preset: the optimized spine), draw a random plan of about
``--districts`` contiguous districts (runs of blocks in geocode order,
:func:`censusdp.evaluate.districts.random_districts`, on the true block populations;
the blocks left over form one more district), run ``censusdp infer RUN --geography
PLAN``, and compare ``margins.parquet`` / ``districts.parquet`` with the true tables
of the generated input: the share of published geounits whose GLS 90% (95%) interval
covers the true total population (``P1_001N``) and voting-age population
(``P3_001N``), per geolevel and for the districts (rows with sd > 0), with the mean and
variance of ``z = (truth - estimate) / sd``. With ``--simulations K``, also the AMC
margins of the published counts (``moe90`` / 1.645 = predicted RMSE) against their
actual RMSE (published - truth), per geolevel: calibrated (``amc_ratio``, the margins
``infer`` writes) and plain (``amc_raw_ratio``: the first generation alone, ``moe90``
divided by the manifest's calibration factor of the geolevel and variable).

Usage::

    PYTHONPATH=src .venv/bin/python benchmarks/bench_infer_margins.py \
        [--state VT] [--scale 0.3] [--seeds 1,2,3] [--districts 20] [--workers 1] \
        [--simulations 0] [--calibration K2] [--dir DIR]

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

LINES = {"P1_001N": "total population", "P3_001N": "voting-age population"}


def _cli(*args: str) -> float:
    t = time.perf_counter()
    cmd = [sys.executable, "-m", "censusdp", *args, "--quiet"]
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    return time.perf_counter() - t


def _truth(cef: Path, run: Path) -> pd.DataFrame:
    """True P1_001N and P3_001N of every geounit of the release's tabulation hierarchy."""
    from censusdp.data.geography import GeoLevels, Hierarchy
    from censusdp.tables import tabulate

    man = json.loads((run / "manifest.json").read_text())
    blocks = pq.read_table(run / "tables" / "P1.parquet", filters=[("geolevel", "=", "Block")])
    codes = np.sort(np.asarray(blocks.column("geocode").to_pylist()))
    h = Hierarchy.from_blocks(codes, GeoLevels.from_pairs(man["geolevels"]))
    persons = pq.read_table(cef / "persons.parquet").to_pydict()
    units = pq.read_table(cef / "units.parquet").to_pydict()
    persons = {k: np.asarray(v) for k, v in persons.items()}
    units = {k: np.asarray(v) for k, v in units.items()}
    t = tabulate(persons, units, h)
    p1 = t["P1"].select(["GEOID", "SUMLEV", "P1_001N"]).to_pandas()
    p3 = t["P3"].select(["P3_001N"]).to_pandas()
    return pd.concat([p1, p3], axis=1)


def _plan(truth: pd.DataFrame, districts: int, seed: int, path: Path) -> np.ndarray:
    from censusdp.evaluate.districts import random_districts

    blocks = truth[truth.SUMLEV == "750"]
    pop = blocks.P1_001N.to_numpy()
    rng = np.random.default_rng(seed)
    d = random_districts(pop, max(1, int(pop.sum() // districts)), rng)
    labels = np.where(d >= 0, d.astype(str), "rest")
    pd.DataFrame({"GEOID20": blocks.GEOID.to_numpy(), "DISTRICT": labels}).to_csv(path, index=False)
    return labels


def _coverage(frame: pd.DataFrame) -> dict:
    out = {}
    for (level, var), g in frame.groupby(["geolevel", "variable"], observed=True):
        g = g[g.gls_sd > 0]
        if g.empty:
            continue
        z = (g.truth - g.gls_estimate) / g.gls_sd
        rec = {
            "rows": int(len(g)),
            "cover90": float(((g.truth >= g.gls_ci90_low) & (g.truth <= g.gls_ci90_high)).mean()),
            "cover95": float(((g.truth >= g.gls_ci95_low) & (g.truth <= g.gls_ci95_high)).mean()),
            "mean_z": float(z.mean()),
            "var_z": float(z.var()),
            "mean_sd": float(g.gls_sd.mean()),
        }
        if g.moe90.notna().any():
            actual = float(np.sqrt(((g.value - g.truth) ** 2).mean()))
            predicted = float(np.sqrt(((g.moe90 / 1.6448536269514722) ** 2).mean()))
            raw = float(np.sqrt(((g.moe90 / g.factor / 1.6448536269514722) ** 2).mean()))
            rec["amc_predicted_rmse"] = predicted
            rec["amc_raw_predicted_rmse"] = raw
            rec["published_actual_rmse"] = actual
            rec["amc_ratio"] = predicted / actual if actual > 0 else None
            rec["amc_raw_ratio"] = raw / actual if actual > 0 else None
            rec["calibration_factor_mean"] = float(g.factor.mean())
        out.setdefault(str(level), {})[str(var)] = rec
    return out


def _pooled(per_seed: list[pd.DataFrame]) -> dict:
    return _coverage(pd.concat(per_seed, ignore_index=True))


def speed(run: Path, plan: Path, workers: int) -> dict:
    """The whole ``censusdp infer RUN --geography PLAN`` (wall and CPU seconds, the load
    average before and after: the machine is shared), then, in this process, the cost
    of a plan once the release's GLS has run (reading the plan, accumulating its
    districts' block estimates, their variances from the tree factors, and their long
    form), of every tabulation geography's, and of the places' (county subdivisions,
    places, AIAN areas)."""
    from censusdp.execution import make_executor
    from censusdp.infer.plan import read_plan
    from censusdp.infer.published import (
        MarginAccumulator,
        district_geography,
        entity_target_geographies,
        long_table,
        tabulation_geographies,
    )
    from censusdp.infer.release import _variance_parts, release_gls

    out: dict = {"load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory() as tmp:
        c0 = _children_cpu()
        out["command_s"] = _cli(
            "infer", str(run), "--out", str(Path(tmp) / "gls"), "--geography", str(plan),
            "--workers", str(workers), "--format", "parquet",
        )  # fmt: skip
        out["command_cpu_s"] = _children_cpu() - c0
        man = json.loads((Path(tmp) / "gls" / "manifest.json").read_text())
        out["command_timings"] = man["timings"]
        out["geounits"] = man["margins"]["geounits"]
    out["load_after_command"] = os.getloadavg()
    ex = make_executor(workers)
    t = time.perf_counter()
    c0 = time.process_time()
    gls = release_gls(run, executor=ex)
    chunks = [c for c in gls.chunks if c.level == gls.hierarchy.n_levels - 1]
    out.update(gls_s=time.perf_counter() - t, gls_cpu_s=time.process_time() - c0)
    geo = gls.geography
    parts = _variance_parts(gls)  # infer's own: the unit run on its own spine

    def timed_geographies(make) -> tuple[float, list]:
        t = time.perf_counter()
        targets = make()
        acc = MarginAccumulator(targets, gls.hierarchy.blocks.size, len(gls.lines), False)
        for c in chunks:
            acc.add_blocks(c.start, c.stop, c.estimate, c.sd)
        var = acc.variances(gls.hierarchy, parts)
        tables = [
            long_table(g, gls.lines, e, v) for g, e, v in zip(targets, acc.sums, var, strict=True)
        ]
        return time.perf_counter() - t, tables

    out["plan_s"], tables = timed_geographies(
        lambda: [district_geography(read_plan(plan, geo.tabulation), geo)]
    )
    out["district_rows"] = tables[0].num_rows
    out["tabulation_levels_s"], _ = timed_geographies(lambda: tabulation_geographies(geo))
    out["places_s"], tables = timed_geographies(lambda: entity_target_geographies(geo))
    out["place_rows"] = sum(t.num_rows for t in tables)
    out["load_after"] = os.getloadavg()
    getattr(ex, "close", lambda: None)()
    return {k: (round(v, 2) if isinstance(v, float) else v) for k, v in out.items()}


def _children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _one_seed(args: argparse.Namespace, base: Path, seed: int) -> tuple[pd.DataFrame, dict]:
    """Generate, release and infer one seed; its rows with the truth, and its timings."""
    cef, run, out = base / f"cef{seed}", base / f"run{seed}", base / f"gls{seed}"
    if args.reuse and (out / "manifest.json").is_file():
        return _compare(args, base, seed, {"seed": seed, "reused": True})
    _cli(
        "generate",
        "--state",
        args.state,
        "--seed",
        str(seed),
        "--scale",
        str(args.scale),
        "--out",
        str(cef),
        "--overwrite",
    )
    t_run = _cli(
        "run",
        "--input",
        str(cef),
        "--out",
        str(run),
        "--seed",
        str(seed),
        "--workers",
        str(args.workers),
        "--overwrite",
    )
    _plan(_truth(cef, run), args.districts, seed, base / f"plan{seed}.csv")
    extra = ["--simulations", str(args.simulations)] if args.simulations else []
    if args.simulations and args.calibration is not None:
        extra += ["--calibration-simulations", str(args.calibration)]
    t_inf = _cli(
        "infer",
        str(run),
        "--out",
        str(out),
        "--geography",
        str(base / f"plan{seed}.csv"),
        "--workers",
        str(args.workers),
        "--format",
        "parquet",
        "--overwrite",
        *extra,
    )
    print(f"seed {seed}: run {t_run:.1f}s, infer {t_inf:.1f}s", file=sys.stderr)
    return _compare(
        args, base, seed, {"seed": seed, "run_s": round(t_run, 2), "infer_s": round(t_inf, 2)}
    )


def _compare(
    args: argparse.Namespace, base: Path, seed: int, timing: dict
) -> tuple[pd.DataFrame, dict]:
    """One seed's margins and districts beside the truth (generated, released and
    inferred under ``base``)."""
    cef, run, out = base / f"cef{seed}", base / f"run{seed}", base / f"gls{seed}"
    truth = _truth(cef, run)
    man = json.loads((out / "manifest.json").read_text())
    timing["infer_timings"] = man["timings"]
    m = pq.read_table(out / "margins.parquet", filters=[("variable", "in", list(LINES))])
    m = m.to_pandas()
    m = m.merge(
        truth.melt(id_vars=["GEOID", "SUMLEV"], value_name="truth"),
        on=["GEOID", "SUMLEV", "variable"],
        how="left",
    )
    assert m.truth.notna().all(), "a published geounit without a true row"
    d = pq.read_table(out / "districts.parquet", filters=[("variable", "in", list(LINES))])
    d = d.to_pandas()
    plan = pd.read_csv(base / f"plan{seed}.csv", dtype=str)
    blk = truth[truth.SUMLEV == "750"].merge(plan, left_on="GEOID", right_on="GEOID20")
    dt = blk.groupby("DISTRICT")[list(LINES)].sum().reset_index()
    dt = dt.melt(id_vars=["DISTRICT"], value_name="truth").rename(columns={"DISTRICT": "GEOID"})
    d = d.merge(dt, on=["GEOID", "variable"], how="left")
    frame = pd.concat([m, d], ignore_index=True)
    factors = (man["margins"].get("amc") or {}).get("calibration_factors") or {}
    frame["factor"] = [
        factors.get(str(lv), {}).get(str(v), 1.0)
        for lv, v in zip(frame.geolevel, frame.variable, strict=True)
    ]
    frame["seed"] = seed
    return frame, timing


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--state", default="VT")
    ap.add_argument("--scale", type=float, default=0.3)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--districts", type=int, default=20)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--simulations", type=int, default=0)
    ap.add_argument("--calibration", type=int, default=None, help="K2 (default: K)")
    ap.add_argument("--dir", default=None)
    ap.add_argument(
        "--reuse", action="store_true", help="compare a seed's earlier outputs in --dir again"
    )
    ap.add_argument("--speed-run", default=None, help="only time a plan on this release")
    ap.add_argument("--plan", default=None, help="the plan of --speed-run")
    args = ap.parse_args()
    if args.speed_run:
        print(json.dumps(speed(Path(args.speed_run), Path(args.plan), args.workers), indent=2))
        return
    base = Path(args.dir or tempfile.mkdtemp(prefix="bench-infer-margins-"))
    rows: list[pd.DataFrame] = []
    timings = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        frame, t = _one_seed(args, base, seed)
        rows.append(frame)
        timings.append(t)
    print(
        json.dumps(
            {
                "state": args.state,
                "scale": args.scale,
                "seeds": args.seeds,
                "districts": args.districts,
                "simulations": args.simulations,
                "calibration_simulations": args.calibration,
                "spine": "optimized (pl94-2020 default)",
                "coverage": _pooled(rows),
                "per_seed": {str(f.seed.iloc[0]): _coverage(f) for f in rows},
                "timings": timings,
                "dir": str(base),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
