"""The DHC person run in production's passes against one pass, on the same measurements.

Given a ``dhc-2020`` person release (``censusdp run --preset dhc-2020 --units-preset
none``) and its input, it re-estimates the release's NMF twice
(:func:`censusdp.release.pipeline.reestimate`, the NMF read, never measured again):

* ``passes``: production's query ordering in its two outer passes (the nine marginals'
  least squares rounded in four nested crosses; then ``detailed``'s least squares and
  rounding, both holding the rounded crosses exactly), the default;
* ``flat``: the same ordering in one outer pass, censusdp's plan before outer passes
  (least squares: the marginals, then ``detailed`` holding ``relgq * age_40_groups *
  hispanic * cenrace * sex`` within ``v + 0.1`` of the first; then both roundings);
* ``single``: one least-squares pass over every query and cell-wise rounding (the
  ``dhcp-2020`` plan taken out of ``PRODUCTION_PASSES`` for the call).

It prints one JSON document: per mode the estimation's CPU seconds (the process's, the
re-estimate's reading, writing and self-check included, and the estimate's own from the
manifest's ``timings`` when recorded), the peak resident memory, and the errors against
the truth as docs/dhc-2020.md reports them: per person, the L1 error of each county's
sex x single year of age and of its ``relgq``, and of the block totals.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_dhc_passes.py \\
        --input /tmp/vt1 --run /tmp/vt1-dhc --out /tmp/vt1-dhc-passes
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import time
from pathlib import Path

import numpy as np

from censusdp.io.cef import read_cef
from censusdp.io.mdf_read import read_mdf_persons
from censusdp.release.pipeline import reestimate
from censusdp.release.topdown import passes as passes_module


def _l1(truth_keys: np.ndarray, released_keys: np.ndarray) -> float:
    """The L1 distance between the counts of two key arrays."""
    keys = np.unique(np.concatenate([truth_keys, released_keys]))
    a = np.bincount(np.searchsorted(keys, truth_keys), minlength=keys.size)
    b = np.bincount(np.searchsorted(keys, released_keys), minlength=keys.size)
    return float(np.abs(a - b).sum())


def _keys(geo: np.ndarray, width: int, *cols: np.ndarray) -> np.ndarray:
    out = np.char.add(np.asarray(geo).astype("U16").astype(f"U{width}"), "|")
    for c in cols:
        out = np.char.add(np.char.add(out, np.asarray(c).astype("U3")), "|")
    return out


def errors(truth: dict, mdf: dict) -> dict[str, float]:
    """Per person: county sex x age L1, county relgq L1, block totals L1."""
    n = truth["geocode"].size
    return {
        "county_sex_age_l1_per_person": _l1(
            _keys(truth["geocode"], 5, truth["sex"], truth["age"]),
            _keys(mdf["geocode"], 5, mdf["sex"], mdf["age"]),
        )
        / n,
        "county_relgq_l1_per_person": _l1(
            _keys(truth["geocode"], 5, truth["relgq"]), _keys(mdf["geocode"], 5, mdf["relgq"])
        )
        / n,
        "block_total_l1_per_person": _l1(_keys(truth["geocode"], 16), _keys(mdf["geocode"], 16))
        / n,
    }


def _estimate(run: Path, out: Path, mode: str) -> dict:
    table = passes_module.PRODUCTION_PASSES
    saved = table["dhcp-2020"]
    if mode == "single":
        del table["dhcp-2020"]
    elif mode == "flat":
        flat = {"l2_outer": (), "rounder_outer": (), "opt_tol_slack": passes_module.OPT_TOL_SLACK}
        table["dhcp-2020"] = {"*": dataclasses.replace(saved["*"], **flat)}
    c0, w0 = time.process_time(), time.perf_counter()
    try:
        manifest = reestimate(run, out)
    finally:
        table["dhcp-2020"] = saved
    levels = manifest.get("estimation", {}).get("persons", [])
    return {
        "cpu_seconds": time.process_time() - c0,
        "wall_seconds": time.perf_counter() - w0,
        "estimate_seconds": manifest.get("timings", {}).get("estimate_persons"),
        "levels": {
            lev["geolevel"]: {
                key: lev.get(key)
                for key in (
                    "tasks",
                    "task_cpu_seconds",
                    "max_task_cpu_seconds",
                    "l2_seconds",
                    "rounding_seconds",
                    "methods",
                    "max_l2_violation",
                )
            }
            for lev in levels
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", required=True, type=Path, help="the CEF the run read")
    ap.add_argument("--run", required=True, type=Path, help="a dhc-2020 person release")
    ap.add_argument("--out", required=True, type=Path, help="a new directory for both")
    ap.add_argument("--modes", default="single,flat,passes")
    args = ap.parse_args()
    truth = read_cef(args.input).persons
    report: dict = {"persons": int(truth["geocode"].size)}
    args.out.mkdir(parents=True, exist_ok=False)
    for mode in args.modes.split(","):
        dest = args.out / mode
        report[mode] = _estimate(args.run, dest, mode)
        report[mode].update(errors(truth, read_mdf_persons(dest / "mdf_persons.parquet")))
        report[mode]["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
