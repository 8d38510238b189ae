"""Least squares vs maximum entropy at low epsilon: sex x age TVD by geolevel.

For a generated state (``--input``, e.g. ``censusdp generate --state VT --seed 1
--scale 0.02``), each total epsilon and seed: ``censusdp run --preset dhc-lite-demo
--epsilon E --seed S --estimator ls``, then the same noisy measurements re-estimated with
each other estimator (``censusdp run --from-measurements RUN --estimator maxent|auto``).
It prints (and with ``--json`` writes, after every run, so a partial grid is kept) one
JSON document: per (epsilon, seed, estimator) the sex x age total variation distance
between the released persons and the truth at every geolevel (mean over the geounits
with persons, and the population-weighted mean), the state-level TVD, the number of
sex x age cells the state release uses, and the estimation's wall and task CPU seconds
(from the manifest; wall times on a shared machine depend on its load, CPU less so).

    .venv/bin/python benchmarks/bench_low_epsilon.py --input vt02 \\
        --epsilons 0.25,0.5,1,2,4 --seeds 1,2,3 --estimators ls,maxent,auto --json out.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

LEVELS = (("State", 2), ("County", 5), ("Tract", 11), ("BlockGroup", 12), ("Block", 16))
CLI = [sys.executable, "-m", "censusdp"]


MDF_GEO = ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLKGRPCE", "TABBLK")


def _column(t, name: str) -> np.ndarray:
    return np.asarray(t.column(name).cast("string").to_numpy(zero_copy_only=False)).astype(str)


def _sex_age(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Block geocodes and sex x age cells of a CEF ``persons.parquet`` or a released MDF."""
    names = pq.read_schema(path).names
    if "geocode" in names:
        t = pq.read_table(path, columns=["geocode", "sex", "age"])
        geo = _column(t, "geocode")
        sex, age = t.column("sex").to_numpy(), t.column("age").to_numpy()
    else:  # the MDF: geography in five columns, QSEX 1/2, QAGE 0..115 as text
        t = pq.read_table(path, columns=[*MDF_GEO, "QSEX", "QAGE"])
        parts = [_column(t, c) for c in MDF_GEO]
        geo = np.char.add(
            np.char.add(np.char.add(np.char.add(*parts[:2]), parts[2]), parts[3]), parts[4]
        )
        sex, age = _column(t, "QSEX").astype(np.int64), _column(t, "QAGE").astype(np.int64)
    cell = (np.asarray(sex, dtype=np.int64) - 1) * 116 + np.asarray(age, dtype=np.int64)
    return geo.astype("U16"), cell.astype(np.int64)


def _tvd_by_level(truth: tuple, release: tuple) -> dict:
    out = {}
    for name, n in LEVELS:
        tg, tc = truth
        rg, rc = release
        units, ti = np.unique(np.char.ljust(tg, 16).astype(f"U{n}"), return_inverse=True)
        ri = np.searchsorted(units, rg.astype(f"U{n}"))
        ok = (ri < units.size) & (units[np.minimum(ri, units.size - 1)] == rg.astype(f"U{n}"))
        t = np.zeros((units.size, 232))
        r = np.zeros((units.size, 232))
        np.add.at(t, (ti, tc), 1)
        np.add.at(r, (ri[ok], rc[ok]), 1)
        tp, rp = t.sum(axis=1), r.sum(axis=1)
        tv = 0.5 * np.abs(t / tp[:, None] - r / np.maximum(rp, 1)[:, None]).sum(axis=1)
        tv[rp == 0] = 1.0
        out[name] = {
            "units": int(units.size),
            "mean_tvd": round(float(tv.mean()), 4),
            "pop_weighted_tvd": round(float((tv * tp).sum() / tp.sum()), 4),
        }
        if name == "State":
            out[name]["release_cells"] = int((r > 0).sum())
            out[name]["truth_cells"] = int((t > 0).sum())
    return out


def _timing(run: Path) -> dict:
    m = json.loads((run / "manifest.json").read_text())
    levels = m["estimation"]["persons"]
    return {
        "estimate_wall_seconds": round(m["timings"]["estimate_persons"], 2),
        "task_cpu_seconds": round(sum(lv["task_cpu_seconds"] for lv in levels), 2),
        "root_cpu_seconds": round(levels[0]["task_cpu_seconds"], 2),
        "methods": {lv["geolevel"]: lv["methods"] for lv in levels},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--input", required=True, type=Path)
    ap.add_argument("--epsilons", default="0.25,0.5,1,2,4")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--estimators", default="ls,maxent,auto")
    ap.add_argument("--preset", default="dhc-lite-demo")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    truth = _sex_age(args.input / "persons.parquet")
    estimators = args.estimators.split(",")
    rows = []
    doc = {
        "input": str(args.input),
        "preset": args.preset,
        "persons": int(truth[0].size),
        "rows": rows,
        "note": "wall times under a shared machine's load; CPU seconds are task CPU",
    }
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        for eps in args.epsilons.split(","):
            for seed in args.seeds.split(","):
                first = None
                for est in estimators:
                    out = Path(tmp) / f"e{eps}_s{seed}_{est}"
                    if first is None:
                        src = ["--input", str(args.input), "--preset", args.preset]
                        src += ["--epsilon", eps, "--seed", seed]
                    else:
                        src = ["--from-measurements", str(first)]
                    t = time.perf_counter()
                    cmd = [*CLI, "run", *src, "--out", str(out), "--estimator", est, "--quiet"]
                    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                    wall = time.perf_counter() - t
                    first = first or out
                    rel = _sex_age(out / "mdf_persons.parquet")
                    row = {"epsilon": float(eps), "seed": int(seed), "estimator": est}
                    row["tvd"] = _tvd_by_level(truth, rel)
                    row["run_wall_seconds"] = round(wall, 1)
                    row.update(_timing(out))
                    rows.append(row)
                    print(
                        f"eps {eps} seed {seed} {est:<7} state TVD "
                        f"{row['tvd']['State']['mean_tvd']:.3f} "
                        f"block-group {row['tvd']['BlockGroup']['pop_weighted_tvd']:.3f} "
                        f"cpu {row['task_cpu_seconds']}s",
                        file=sys.stderr,
                    )
                    if args.json:
                        args.json.write_text(json.dumps(doc, indent=1))
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
