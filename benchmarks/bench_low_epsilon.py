"""Least squares vs maximum entropy at low epsilon: sex x age TVD by geolevel.

For a generated state (``--input``, e.g. ``censusdp generate --state VT --seed 1
--scale 0.02``), each total epsilon and seed: ``censusdp run --preset dhc-lite-demo
--epsilon E --seed S`` with the first of ``--estimators`` (``default``: no
``--estimator``, the schema's default), then the same noisy measurements re-estimated
with each other estimator (``censusdp run --from-measurements RUN --estimator ...``).
It prints (and with ``--json`` writes, after every run, so a partial grid is kept) one
JSON document: per (epsilon, seed, estimator) the sex x age total variation distance
between the released persons and the truth at every geolevel (mean over the geounits
with persons, and the population-weighted mean), the number of sex x age cells the
state release uses, and the estimation's wall and task CPU seconds (from the manifest;
wall times on a shared machine depend on its load, CPU less so); and per (epsilon,
seed) the noise floor: the TVD of the raw noisy sex x age marginal (negatives clipped)
at every level that measured it, and of the State's marginal pooled from every level.

    .venv/bin/python benchmarks/bench_low_epsilon.py --input vt02 \\
        --epsilons 0.25,0.5,1,2,4 --seeds 1,2,3,4,5 --estimators default,ls,maxent,auto \\
        --json out.json
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

from censusdp.io.mdf_read import iter_mdf_persons
from censusdp.io.nmf_files import read_nmf_rows

LEVELS = (("State", 2), ("County", 5), ("Tract", 11), ("BlockGroup", 12), ("Block", 16))
CLI = [sys.executable, "-m", "censusdp"]


def _column(t, name: str) -> np.ndarray:
    return np.asarray(t.column(name).cast("string").to_numpy(zero_copy_only=False)).astype(str)


def _sex_age(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Block geocodes and sex x age cells of a CEF ``persons.parquet`` or a released MDF
    (part files or one file, decoded by ``censusdp.io.mdf_read``; sex 1/2 in both)."""
    if path.is_file() and "geocode" in pq.read_schema(path).names:
        t = pq.read_table(path, columns=["geocode", "sex", "age"])
        geo = np.asarray(t.column("geocode").cast("string").to_numpy(zero_copy_only=False))
        sex, age = t.column("sex").to_numpy(), t.column("age").to_numpy()
    else:
        batches = list(iter_mdf_persons(path))
        geo = np.concatenate([b["geocode"] for b in batches]) if batches else np.zeros(0, "U16")
        sex = np.concatenate([b["sex"] for b in batches]) if batches else np.zeros(0, int)
        age = np.concatenate([b["age"] for b in batches]) if batches else np.zeros(0, int)
    cell = (np.asarray(sex, dtype=np.int64) - 1) * 116 + np.asarray(age, dtype=np.int64)
    return geo.astype("U16"), cell.astype(np.int64)


def _unit_index(geo: np.ndarray, n: int, units: np.ndarray | None = None):
    """Each row's unit (its geocode's first ``n`` characters) among ``units``."""
    codes = geo.astype(f"U{n}")
    if units is None:
        units = np.unique(codes)
    idx = np.searchsorted(units, codes)
    ok = (idx < units.size) & (units[np.minimum(idx, units.size - 1)] == codes)
    return units, idx, ok


def _matrix(idx: np.ndarray, cell: np.ndarray, n_units: int, weights=None) -> np.ndarray:
    out = np.zeros((n_units, 232))
    np.add.at(out, (idx, cell), 1 if weights is None else weights)
    return out


def _tvd_rows(t: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Per unit, the TVD between the sex x age distributions of ``t`` and ``r`` (1 when
    ``r`` is empty)."""
    tp, rp = t.sum(axis=1), r.sum(axis=1)
    tv = 0.5 * np.abs(t / tp[:, None] - r / np.maximum(rp, 1e-12)[:, None]).sum(axis=1)
    return np.where(rp > 0, tv, 1.0)


def _summary(tv: np.ndarray, t: np.ndarray) -> dict:
    tp = t.sum(axis=1)
    return {
        "units": int(tv.size),
        "mean_tvd": round(float(tv.mean()), 4),
        "pop_weighted_tvd": round(float((tv * tp).sum() / tp.sum()), 4),
    }


def _tvd_by_level(truth: tuple, release: tuple) -> dict:
    out = {}
    for name, n in LEVELS:
        units, ti, _ = _unit_index(truth[0], n)
        _, ri, ok = _unit_index(release[0], n, units)
        t = _matrix(ti, truth[1], units.size)
        r = _matrix(ri[ok], release[1][ok], units.size)
        out[name] = _summary(_tvd_rows(t, r), t)
        if name == "State":
            out[name]["release_cells"] = int((r > 0).sum())
            out[name]["truth_cells"] = int((t > 0).sum())
    return out


def _noise_floor(truth: tuple, run: Path) -> dict:
    """The TVD of the raw noisy sex x age marginal (negatives clipped to 0) at every
    level that measured it, over the units with persons; and at the State, that of the
    marginal pooled from every level (censusdp's root estimate of it)."""
    nmf = read_nmf_rows(run / "noisy_measurements.parquet")
    lv = _column(nmf, "geolevel")
    query = _column(nmf, "query")
    geo = _column(nmf, "geocode")
    cell = nmf.column("cell").to_numpy().astype(np.int64)
    value = nmf.column("value").to_numpy().astype(np.float64)
    out = {}
    for name, n in LEVELS:
        sel = (lv == name) & (query == "sex*age")
        if not sel.any():
            continue
        units, ti, _ = _unit_index(truth[0], n)
        _, mi, ok = _unit_index(geo[sel], n, units)
        t = _matrix(ti, truth[1], units.size)
        y = _matrix(mi[ok], cell[sel][ok], units.size, value[sel][ok])
        out[name] = _summary(_tvd_rows(t, np.maximum(y, 0.0)), t)
    blocks = np.unique(geo[lv == "Block"])
    if blocks.size:
        from censusdp.data.geography import Hierarchy
        from censusdp.data.schema import get_schema
        from censusdp.io.nmf_read import read_nmf
        from censusdp.release.topdown.pooling import pooled_root

        h = Hierarchy.from_blocks(blocks)
        (pooled,) = [
            m
            for m in pooled_root(
                read_nmf(run / "noisy_measurements.parquet", get_schema("dhc-lite"), h), h
            )
            if m.query == "sex*age"
        ]
        y = np.zeros((1, 232))
        y[0, pooled.rows] = pooled.values[0]
        units, ti, _ = _unit_index(truth[0], 2)
        t = _matrix(ti, truth[1], units.size).sum(axis=0, keepdims=True)
        out["State pooled"] = _summary(_tvd_rows(t, np.maximum(y, 0.0)), t)
        out["State pooled"]["variance"] = round(pooled.variance, 1)
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
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--estimators", default="default,ls,maxent,auto")
    ap.add_argument("--preset", default="dhc-lite-demo")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    truth = _sex_age(args.input / "persons.parquet")
    estimators = args.estimators.split(",")
    rows: list[dict] = []
    floors: list[dict] = []
    doc = {
        "input": str(args.input),
        "preset": args.preset,
        "persons": int(truth[0].size),
        "rows": rows,
        "noise_floor": floors,
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
                    choice = [] if est == "default" else ["--estimator", est]
                    cmd = [*CLI, "run", *src, "--out", str(out), *choice, "--quiet"]
                    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                    wall = time.perf_counter() - t
                    if first is None:
                        first = out
                        floor = {"epsilon": float(eps), "seed": int(seed)}
                        floor["tvd"] = _noise_floor(truth, out)
                        floors.append(floor)
                    rel = _sex_age(out / "mdf_persons.parquet")
                    row = {"epsilon": float(eps), "seed": int(seed), "estimator": est}
                    if est == "default":
                        row["resolved"] = json.loads((out / "manifest.json").read_text())[
                            "estimator"
                        ]
                    row["tvd"] = _tvd_by_level(truth, rel)
                    row["run_wall_seconds"] = round(wall, 1)
                    row.update(_timing(out))
                    rows.append(row)
                    print(
                        f"eps {eps} seed {seed} {est:<7} state TVD "
                        f"{row['tvd']['State']['mean_tvd']:.3f} "
                        f"county {row['tvd']['County']['mean_tvd']:.3f} "
                        f"tract {row['tvd']['Tract']['mean_tvd']:.3f} "
                        f"cpu {row['task_cpu_seconds']}s",
                        file=sys.stderr,
                    )
                    if args.json:
                        args.json.write_text(json.dumps(doc, indent=1))
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
