"""Multipass vs single-pass TopDown on a generated state: total-population error by geolevel.

For each seed: generate the state (``censusdp generate``), run the ``pl94-2020`` release
(``censusdp run --seed N --workers W``, production passes by default), then estimate the
same noisy measurement file again with ``passes="single"`` (censusdp's one-pass TopDown)
and with ``passes="production"`` through :func:`censusdp.release.topdown.driver.run_topdown`.
It prints one JSON document: per seed and geolevel, the mean absolute error of the total
population of every geounit for

* ``noisy``: the raw noisy ``total`` measurement of the geounit (none at the US level),
* ``single`` and ``production``: the released (integer) totals of each estimate,

and their ratios to the noisy error (the target of the multipass work is a ratio of at
most 1.10 at County and Tract), the estimation times of both modes (their ratio), the
release's wall time, and a check that the release equals the production re-estimate.
These runs use the tabulation hierarchy (``--spine tabulation``).

``--spines tabulation,optimized`` also releases the same input on the production spine
(``censusdp run --spine optimized``) and compares, per tabulation geolevel, the released
total population of both spines with the truth, and with the raw noisy totals: on the
spine a tabulation county or tract is the union of its AIAN and non-AIAN parts, each
measured, so its noisy total is the sum of its parts' (one part outside AIAN areas);
block groups are not spine geounits, so they have no noisy total there. It also reports
each release's wall time (``release_wall_seconds`` under ``spines``).

    .venv/bin/python benchmarks/bench_multipass.py --state VT --seeds 1,2,3 --workers 2
    .venv/bin/python benchmarks/bench_multipass.py --state VT --seeds 1,2,3 \
        --spines tabulation,optimized --no-passes
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

CPU_SECONDS: list[float] = []
"""CPU seconds (user + system) of every command :func:`_run` ran, in order: on a shared
machine the wall time depends on the load, the CPU time much less."""


def _run(cmd: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_SECONDS.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall


def _truth_totals(cef: Path, hierarchy) -> list[np.ndarray]:
    """True population of every geounit of every level (from the CEF persons)."""
    codes = pq.read_table(cef / "persons.parquet", columns=["geocode"]).column("geocode")
    blocks = np.asarray(codes.to_numpy(zero_copy_only=False)).astype("U16")
    idx = np.searchsorted(hierarchy.blocks, blocks)
    block_pop = np.bincount(idx, minlength=hierarchy.blocks.size).reshape(-1, 1)
    return [
        np.asarray(a.todense() if hasattr(a, "todense") else a).ravel()
        for a in hierarchy.aggregate(block_pop)
    ]


def _noisy_totals(nmf: Path, hierarchy) -> dict[int, np.ndarray]:
    """The raw noisy ``total`` measurement of every geounit, per level that measured it."""
    from censusdp.io.nmf_files import read_nmf_rows

    t = read_nmf_rows(nmf, columns=["geolevel", "geocode", "query", "value"])
    t = t.filter(pc.equal(t.column("query").cast("string"), "total"))
    levels = np.asarray(t.column("geolevel").cast("string").to_numpy(zero_copy_only=False))
    geocodes = np.asarray(t.column("geocode").cast("string").to_numpy(zero_copy_only=False))
    values = t.column("value").to_numpy().astype(np.float64)
    out = {}
    for li, lev in enumerate(hierarchy.geolevels):
        sel = levels == lev.name
        if not sel.any():
            continue
        v = np.full(hierarchy.n_units(li), np.nan)
        v[np.searchsorted(hierarchy.geocodes[li], geocodes[sel].astype(str))] = values[sel]
        gap = np.isnan(v)
        if gap.any() and li - 1 in out:
            # a bypassed single child (spine release) was not measured: its parent's
            # noisy total is a noisy total of the same people
            v[gap] = out[li - 1][hierarchy.parent[li][gap]]
        out[li] = v
    return out


def _reestimate(run: Path, passes: str, workers: int):
    """Estimate persons from the run's NMF and published invariants, with ``passes``."""
    from censusdp.data.geography import GeoLevels, Hierarchy
    from censusdp.data.invariants import Bounds, Invariants, level_bounds
    from censusdp.data.schema import get_schema
    from censusdp.execution import make_executor
    from censusdp.io.nmf_read import NMFReader
    from censusdp.release.topdown.driver import TopDownOptions, run_topdown

    manifest = json.loads((run / "manifest.json").read_text())
    levels = GeoLevels.from_pairs([(name, length) for name, length in manifest["geolevels"]])
    blocks = pq.read_table(run / "invariants.parquet")
    codes = np.asarray(blocks.column("geocode").to_numpy(zero_copy_only=False)).astype("U16")
    hierarchy = Hierarchy.from_blocks(codes, levels)
    inv = Invariants.from_tables(blocks, pq.read_table(run / "invariant_totals.parquet"), hierarchy)
    schema = get_schema(manifest["schema"])
    ms = NMFReader(run / "noisy_measurements.parquet", schema, hierarchy)
    bounds = [Bounds(*b) for b in level_bounds(inv, hierarchy)]
    ex = make_executor(workers)
    try:
        t = time.perf_counter()
        est = run_topdown(
            ms, hierarchy, bounds, TopDownOptions(group_variable="hhgq", passes=passes), executor=ex
        )
        seconds = time.perf_counter() - t
    finally:
        close = getattr(ex, "close", None)
        if close is not None:
            close()
    cpu = sum(s["task_cpu_seconds"] for s in est.levels)
    return hierarchy, est, seconds, cpu


def _mae(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.mean(np.abs(a - b)))


def _release_run(
    exe: list[str], cef: Path, run: Path, seed: int, workers: int, spine: str
) -> float:
    return _run(
        [
            *exe,
            "run",
            "--input",
            str(cef),
            "--out",
            str(run),
            "--seed",
            str(seed),
            "--workers",
            str(workers),
            "--spine",
            spine,
            "--overwrite",
            "--quiet",
        ]
    )


def _tabulation_noisy(run: Path, tab) -> dict[int, np.ndarray]:
    """Noisy totals of tabulation geounits: direct (tabulation run) or summed over the
    spine geounits nested in them (County / Tract parts of a spine run)."""
    from censusdp.release.spine import geography_of_run

    manifest = json.loads((run / "manifest.json").read_text())
    geo = geography_of_run(run, manifest, tab)
    h = geo.estimation
    noisy = _noisy_totals(run / "noisy_measurements.parquet", h)
    if geo.spine is None:
        return noisy
    out = {}
    for li, lev in enumerate(tab.geolevels):
        if lev.name not in ("County", "Tract") or h.geolevels.index(lev.name) not in noisy:
            continue
        sl = h.geolevels.index(lev.name)
        # tabulation unit of each spine unit of the level: through any of its blocks
        first_block = np.searchsorted(h.ancestor_index(sl), np.arange(h.n_units(sl)))
        tab_unit = tab.ancestor_index(li)[geo.spine.order[first_block]]
        out[li] = np.bincount(tab_unit, weights=noisy[sl], minlength=tab.n_units(li))
    return out


def bench_spines(
    exe: list[str], cef: Path, base: Path, seed: int, workers: int, spines: list[str], reuse: bool
) -> dict:
    """Release ``cef`` on each spine; MAE of released and noisy totals by tabulation level."""
    from censusdp.data.geography import DEFAULT_GEOLEVELS, Hierarchy

    units = pq.read_table(cef / "units.parquet", columns=["geocode"]).column("geocode")
    tab = Hierarchy.from_blocks(
        np.asarray(units.to_numpy(zero_copy_only=False)).astype("U16"), DEFAULT_GEOLEVELS
    )
    truth = _truth_totals(cef, tab)
    out = {}
    for spine in spines:
        run = base / f"run-{seed}-{spine}"
        wall = None
        cpu = None
        if not (reuse and (run / "manifest.json").exists()):
            wall = _release_run(exe, cef, run, seed, workers, spine)
            cpu = CPU_SECONDS[-1]
        manifest = json.loads((run / "manifest.json").read_text())
        from censusdp.io.mdf_read import read_mdf_persons

        rel_blocks = read_mdf_persons(run / "mdf_persons.parquet")["geocode"].astype("U16")
        rel_pop = np.bincount(np.searchsorted(tab.blocks, rel_blocks), minlength=tab.blocks.size)
        rel = [np.asarray(a).ravel() for a in tab.aggregate(rel_pop.reshape(-1, 1))]
        noisy = _tabulation_noisy(run, tab)
        rec: dict = {
            "release_wall_seconds": None if wall is None else round(wall, 2),
            "release_cpu_seconds": None if cpu is None else round(cpu, 2),
            "release_timings": manifest.get("timings", {}),
            "spine_geounits": manifest.get("spine", {}).get("geounits"),
            "bypass": manifest.get("spine", {}).get("bypass"),
            "levels": {},
        }
        for li, lev in enumerate(tab.geolevels):
            row = {
                "units": int(tab.n_units(li)),
                "mae_released": round(_mae(rel[li], truth[li]), 4),
            }
            if li in noisy:
                row["mae_noisy"] = round(_mae(noisy[li], truth[li]), 4)
                row["ratio"] = (
                    round(row["mae_released"] / row["mae_noisy"], 3) if row["mae_noisy"] else None
                )
            rec["levels"][lev.name] = row
        out[spine] = rec
    return out


def bench_seed(
    exe: list[str],
    state: str,
    scale: float,
    seed: int,
    workers: int,
    base: Path,
    reuse: bool,
    passes: bool = True,
) -> dict:
    cef = base / f"cef-{seed}"
    run = base / f"run-{seed}"
    wall = None
    if not passes and reuse and (cef / "units.parquet").exists():
        return {"seed": seed}
    if not (reuse and (run / "manifest.json").exists()):
        gen = [*exe, "generate", "--state", state, "--seed", str(seed), "--out", str(cef)]
        if scale != 1.0:
            gen += ["--scale", str(scale)]
        _run(gen + ["--overwrite"])
        if not passes:
            return {"seed": seed}
        wall = _release_run(exe, cef, run, seed, workers, "tabulation")
    if not passes:
        return {"seed": seed}
    manifest = json.loads((run / "manifest.json").read_text())
    out: dict = {
        "seed": seed,
        "release_wall_seconds": None if wall is None else round(wall, 2),
        "release_timings": manifest.get("timings", {}),
        "levels": {},
    }
    estimates = {}
    for passes in ("single", "production"):
        hierarchy, est, seconds, cpu = _reestimate(run, passes, workers)
        estimates[passes] = est
        out[f"estimate_seconds_{passes}"] = round(seconds, 2)
        out[f"estimate_task_cpu_seconds_{passes}"] = round(cpu, 2)
    out["estimate_time_ratio_production_over_single"] = round(
        out["estimate_seconds_production"] / out["estimate_seconds_single"], 3
    )
    from censusdp.io.mdf_read import read_mdf_persons

    rel_blocks = read_mdf_persons(run / "mdf_persons.parquet")["geocode"]
    rel_pop = np.bincount(
        np.searchsorted(hierarchy.blocks, rel_blocks), minlength=hierarchy.blocks.size
    )
    prod_blocks = np.asarray(estimates["production"].histograms[-1].sum(axis=1)).ravel()
    out["release_equals_production_estimate"] = bool(np.array_equal(rel_pop, prod_blocks))
    truth = _truth_totals(cef, hierarchy)
    noisy = _noisy_totals(run / "noisy_measurements.parquet", hierarchy)
    for li, lev in enumerate(hierarchy.geolevels):
        rec: dict = {"units": int(hierarchy.n_units(li))}
        for passes, est in estimates.items():
            tot = np.asarray(est.histograms[li].sum(axis=1)).ravel()
            rec[f"mae_{passes}"] = round(_mae(tot, truth[li]), 4)
        if li in noisy:
            rec["mae_noisy"] = round(_mae(noisy[li], truth[li]), 4)
            for passes in estimates:
                rec[f"ratio_{passes}"] = (
                    round(rec[f"mae_{passes}"] / rec["mae_noisy"], 3) if rec["mae_noisy"] else None
                )
        out["levels"][lev.name] = rec
    return out


def _spine_summary(runs: list[dict], spines: list[str]) -> dict:
    out: dict = {}
    for spine in spines:
        recs = [r["spines"][spine] for r in runs]
        levels = {}
        for name in recs[0]["levels"]:
            rows = [r["levels"][name] for r in recs]
            row = {"mae_released": round(float(np.mean([x["mae_released"] for x in rows])), 4)}
            if all("mae_noisy" in x for x in rows):
                row["mae_noisy"] = round(float(np.mean([x["mae_noisy"] for x in rows])), 4)
                row["ratio"] = (
                    round(row["mae_released"] / row["mae_noisy"], 3) if row["mae_noisy"] else None
                )
            levels[name] = row
        walls = [r["release_wall_seconds"] for r in recs if r["release_wall_seconds"] is not None]
        cpus = [r["release_cpu_seconds"] for r in recs if r.get("release_cpu_seconds") is not None]
        out[spine] = {
            "levels": levels,
            "release_wall_seconds": walls,
            "mean_release_wall_seconds": round(float(np.mean(walls)), 2) if walls else None,
            "release_cpu_seconds": cpus,
            "mean_release_cpu_seconds": round(float(np.mean(cpus)), 2) if cpus else None,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--state", default="VT")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dir", default=None, help="working directory (default: a temp dir)")
    ap.add_argument("--reuse", action="store_true", help="reuse runs already in --dir")
    ap.add_argument(
        "--spines",
        default="",
        help="also release on these spines and compare them (e.g. tabulation,optimized)",
    )
    ap.add_argument(
        "--no-passes", action="store_true", help="skip the single vs production re-estimates"
    )
    args = ap.parse_args()
    exe = [sys.executable, "-m", "censusdp"]
    base = Path(args.dir or tempfile.mkdtemp(prefix="censusdp-multipass-"))
    seeds = [int(s) for s in args.seeds.split(",")]
    spines = [s for s in args.spines.split(",") if s]
    runs = []
    for seed in seeds:
        print(f"seed {seed} ...", file=sys.stderr, flush=True)
        runs.append(
            bench_seed(
                exe,
                args.state,
                args.scale,
                seed,
                args.workers,
                base,
                args.reuse,
                not args.no_passes,
            )
        )
        if spines:
            runs[-1]["spines"] = bench_spines(
                exe, base / f"cef-{seed}", base, seed, args.workers, spines, args.reuse
            )
    summary = {}
    for name in runs[0].get("levels", {}):
        recs = [r["levels"][name] for r in runs]
        row = {
            k: round(float(np.mean([r[k] for r in recs])), 4)
            for k in ("mae_single", "mae_production")
        }
        if "mae_noisy" in recs[0]:
            row["mae_noisy"] = round(float(np.mean([r["mae_noisy"] for r in recs])), 4)
            for p in ("single", "production"):
                row[f"ratio_{p}"] = (
                    round(row[f"mae_{p}"] / row["mae_noisy"], 3) if row["mae_noisy"] else None
                )
        summary[name] = row
    print(
        json.dumps(
            {
                "state": args.state,
                "scale": args.scale,
                "workers": args.workers,
                "seeds": seeds,
                "mean_over_seeds": summary,
                "spines_mean_over_seeds": _spine_summary(runs, spines),
                "runs": runs,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
