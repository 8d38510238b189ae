"""The DHC accuracy study: ``dhc-2020`` against ``dhc-lite-demo`` and ``ddp-2010`` and the truth.

For each state and seed it generates the input (``censusdp generate``; kept when
``WORKDIR/<STATE>-<scale>-s<seed>/input`` exists), releases it with each preset
(``censusdp run --preset P --seed <seed>``, each with its default companion unit run:
``dhc-2020`` its household and unit run, ``ddp-2010`` its household run,
``dhc-lite-demo`` none; ``dhc-2020+held`` is ``dhc-2020`` held to a ``pl94-2020``
release of the same input and seed, ``--h1-from``, as production ran it; a release
already in the work directory is kept) and evaluates
each release against the truth with :func:`censusdp.evaluate.evaluate` (its JSON is
written beside the release, and read again by a later call on a kept release). Every error comes from evaluate's JSON; nothing is
tabulated here. Per geolevel (State, County, Tract, Block Group, Block) it reports:

* ``total_population``: MAE and RMSE of the geounits' totals, and the MAE relative to
  the mean true total (``mae_relative``);
* ``P12`` (sex by age, 5-year groups) and ``PCT12`` (sex by single year of age): MAE
  and RMSE of their lines, and accuracy (1 - TVD);
* ``households``: MAE and RMSE of the households per geounit; ``household_type``
  (``dhc-2020``'s P16, ``ddp-2010``'s P18) and ``household_size`` (H9, H13): accuracy,
  MAE and RMSE of their lines; ``"not released"`` for a preset without households;
* ``race_hispanic``: accuracy of ``hispanic * cenrace`` (126 counts) of the MDF.

The summary gives, per state, preset, measure and level, the mean over the seeds and
the seeds' range. A release this script made has its noisy measurement files removed
once evaluated (``--keep-nmf`` keeps them; a ``dhc-2020`` release at 1% writes some
4 GB of them); a release whose NMF is absent is evaluated without the NMF's own
re-check (evaluate's ``allow_invalid``: ``censusdp run`` validated it when it wrote
it), and its ``validation`` record says so.

    PYTHONPATH=src python benchmarks/bench_dhc_accuracy.py --state VT,DE --scale 0.01 \\
        --seeds 1,2,3 --workdir /tmp/dhcacc
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np

from _harness import timed
from censusdp.evaluate import EvaluateOptions, evaluate
from censusdp.evaluate.households import size_and_type_tables
from censusdp.io.layout import NMF_FILES

LEVELS = ("State", "County", "Tract", "BlockGroup", "Block")
HELD = "+held"
"""A preset named ``dhc-2020+held``: the input released with ``pl94-2020`` first (its
release kept in the work directory), then with ``dhc-2020 --h1-from`` that release, as
production held its DHC to its P.L. 94 release."""
NOT_RELEASED = "not released"


def _pick(rec: dict[str, Any] | None, keys: tuple[str, ...]) -> dict[str, Any]:
    if rec is None:
        return {"value": NOT_RELEASED}
    return {k: rec[k] for k in keys}


def release_errors(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The study's measures per geolevel, read from one evaluate JSON result."""
    metrics, hh = result["metrics"], result.get("households") or {}
    out: dict[str, dict[str, Any]] = {}
    for lv in LEVELS:
        tot = metrics["total_population"][lv]
        row: dict[str, Any] = {
            "total_population": {
                "mae": tot["mae"],
                "rmse": tot["rmse"],
                "mae_relative": tot["mae"] * tot["n"] / tot["pop"] if tot["pop"] else None,
            },
            "race_hispanic": {"accuracy": metrics["hispanic*cenrace"][lv]["tvd"]},
        }
        for table in ("P12", "PCT12"):
            rec = metrics.get(table, {}).get(lv)
            row[table] = _pick(rec and {**rec, "accuracy": rec["tvd"]}, ("mae", "rmse", "accuracy"))
        tables = hh.get("tables", {}) if hh.get("available") else {}
        row["households"] = _pick(hh["totals"][lv] if tables else None, ("mae", "rmse"))
        sizes_types = size_and_type_tables(hh["schema"]) if tables else (None, None)
        for measure, name in zip(("household_size", "household_type"), sizes_types, strict=True):
            rec = tables[name]["levels"][lv] if name else None
            row[measure] = _pick(rec and {**rec, "accuracy": rec["tvd"], "table": name},
                                 ("table", "mae", "rmse", "accuracy"))  # fmt: skip
        out[lv] = row
    return out


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per state, preset, measure, level and statistic: mean, min and max over seeds."""
    out: dict[str, Any] = {}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for run in runs:
        groups.setdefault((run["state"], run["preset"]), []).append(run["errors"])
    for (state, preset), errs in groups.items():
        dest = out.setdefault(state, {}).setdefault(preset, {})
        for lv in LEVELS:
            for measure, rec in errs[0][lv].items():
                stats = {}
                for key, value in rec.items():
                    if not isinstance(value, float | int) or isinstance(value, bool):
                        stats[key] = value
                        continue
                    vals = np.array([e[lv][measure][key] for e in errs], dtype=float)
                    stats[key] = {"mean": vals.mean(), "min": vals.min(), "max": vals.max()}
                dest.setdefault(measure, {})[lv] = stats
        dest["seeds"] = len(errs)
    return out


def run_one(args: argparse.Namespace, state: str, seed: int, preset: str) -> dict[str, Any]:
    """Generate (if needed), release (if needed), evaluate; the run's record."""
    base = args.workdir / f"{state}-{args.scale:g}-s{seed}"
    cli = [sys.executable, "-m", "censusdp"]
    if not (base / "input" / "manifest.json").exists():
        timed([*cli, "generate", "--state", state, "--seed", str(seed),
               "--scale", str(args.scale), "--out", str(base / "input")])  # fmt: skip
    release = base / preset
    record: dict[str, Any] = {"state": state, "seed": seed, "preset": preset}
    made = not (release / "manifest.json").exists()

    def run(out: Path, name: str, *extra: str) -> tuple[float, float]:
        return timed([*cli, "run", "--input", str(base / "input"), "--out", str(out),
                      "--preset", name, "--seed", str(seed),
                      "--workers", str(args.workers), *extra])  # fmt: skip

    if made:
        extra: list[str] = []
        if preset.endswith(HELD):  # production's way: the P.L. 94 release first, held to it
            pl = base / "pl94-2020"
            if not (pl / "manifest.json").exists():
                run(pl, "pl94-2020")
            extra = ["--h1-from", str(pl)]
        wall, cpu = run(release, preset.removesuffix(HELD), *extra)
        record.update(run_wall_seconds=wall, run_cpu_seconds=cpu)
    nmf_present = (release / NMF_FILES["persons"]).exists()
    evaluated = base / f"{preset}.evaluate.json"
    if made or not evaluated.exists():
        if made:  # this script's evaluation of a release no longer there
            evaluated.unlink(missing_ok=True)
        options = EvaluateOptions(allow_invalid=not nmf_present)
        result = evaluate(base / "input", release, options, json_path=evaluated)
    else:  # this release evaluated by an earlier call: its JSON is read, not written again
        result = json.loads(evaluated.read_text())
    if made and not args.keep_nmf:
        for name in NMF_FILES.values():
            if (release / name).exists():
                shutil.rmtree(release / name)
    record["validated_here"] = nmf_present
    record["persons"] = result["metrics"]["total_population"]["State"]["pop"]
    record["errors"] = release_errors(result)
    return record


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state", default="VT,DE", help="states, comma-separated (default VT,DE)")
    ap.add_argument("--scale", type=float, default=0.01, help="fraction of tracts (0.01)")
    ap.add_argument("--seeds", default="1,2,3", help="seeds, comma-separated (1,2,3)")
    ap.add_argument(
        "--presets",
        default="dhc-2020+held,dhc-2020,dhc-lite-demo,ddp-2010",
        help="presets, comma-separated; dhc-2020+held holds dhc-2020 to a pl94-2020 release",
    )
    ap.add_argument("--workdir", type=Path, required=True, help="inputs and releases")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--keep-nmf", action="store_true", help="keep the releases' NMFs")
    args = ap.parse_args()
    runs = [
        run_one(args, state, int(seed), preset)
        for state in args.state.split(",")
        for seed in args.seeds.split(",")
        for preset in args.presets.split(",")
    ]
    report = {
        "scale": args.scale,
        "seeds": args.seeds,
        "presets": args.presets.split(","),
        "runs": runs,
        "summary": summarise(runs),
    }
    print(json.dumps(report, indent=1, default=float))


if __name__ == "__main__":
    main()
