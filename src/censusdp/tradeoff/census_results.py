"""The results of ``censusdp tradeoff census``: points aggregated over seeds, frontier
fits, ``results.json``, ``runs.parquet``, ``frontier.png`` and the manifest; and
:func:`frontier_from_results`, the measured frontier read back from them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from censusdp.errors import ConfigError
from censusdp.io.atomic import atomic_path, write_json, write_parquet
from censusdp.io.output_rules import MANIFEST_FILE
from censusdp.tradeoff.census_metrics import METRICS, PRIORS
from censusdp.tradeoff.census_scenarios import Scenario
from censusdp.version import __version__

__all__ = ["frontier_from_results", "result_document", "write_results"]


def result_document(
    settings: dict[str, Any],
    config: dict[str, Any],
    scenes: dict[str, Scenario],
    runs: list[dict[str, Any]],
    references: dict[str, dict[str, float]],
    delta: Fraction,
) -> dict[str, Any]:
    """``results.json``: the grid, the scenarios, points aggregated over seeds and fits."""
    from censusdp.evaluate import json_ready

    scen, eps_list = settings["scenarios"], settings["epsilons"]
    points = _aggregate(runs, scen, eps_list)
    return json_ready(
        {
            "command": "tradeoff census",
            "input": settings["input"],
            "input_fingerprint": config["input_fingerprint"],
            "population": int(scenes["standard"].cef.n_persons),
            "epsilons": eps_list,
            "seeds": settings["seeds"],
            "epsilon_meaning": (
                f"(epsilon, delta)-DP of everything published, delta = {float(delta):g} "
                "(Canonne, Kamath & Steinke 2020, Cor. 13; each preset rescaled to it, its "
                "split kept)"
            ),
            "delta": float(delta),
            "presets": {
                "accuracy_and_risk": settings["preset"],
                "attack": settings["attack_preset"],
            },
            "scenarios": {s: scenes[s].describe(s) for s in scen},
            "priors": list(PRIORS),
            "metrics_definitions": METRICS,
            "points": points,
            "references": references,
            "frontier_fits": _fits(
                points, scen, {s: list(scenes[s].budget.geolevel_names) for s in scen}
            ),
            "runs": runs,
            "package_version": __version__,
        }
    )


def write_results(
    result: dict[str, Any], runs: list[dict[str, Any]], settings: dict[str, Any], out: Path
) -> None:
    """``results.json``, ``runs.parquet``, ``frontier.png`` and the manifest."""
    from censusdp.evaluate import json_ready
    from censusdp.tradeoff import _plots

    write_json(result, out / "results.json")
    write_parquet(_runs_table(runs), out / "runs.parquet")
    png = _plots.census_frontier_figure(result)
    with atomic_path(out / "frontier.png") as tmp:
        tmp.write_bytes(png)
    write_json(
        json_ready(
            {
                "command": "tradeoff census",
                "config": settings,
                "seeds": settings["seeds"],
                "package_version": __version__,
                "timings": {"total": result["seconds"]},
                "outputs": ["results.json", "runs.parquet", "frontier.png", "cache/"],
            }
        ),
        out / MANIFEST_FILE,
    )


def _aggregate(
    runs: list[dict[str, Any]], scenarios: list[str], epsilons: list[float]
) -> list[dict[str, Any]]:
    points = []
    for s in scenarios:
        for e in epsilons:
            rs = [r for r in runs if r["scenario"] == s and r["epsilon"] == e]
            if not rs:
                continue
            names = sorted({k for r in rs for k in r["metrics"]})
            stats: dict[str, dict[str, Any]] = {}
            for k in names:
                vals = np.asarray(
                    [r["metrics"].get(k) for r in rs if r["metrics"].get(k) is not None],
                    dtype=float,
                )
                vals = vals[np.isfinite(vals)]
                if vals.size == 0:
                    continue
                se = float(np.std(vals, ddof=1) / math.sqrt(vals.size)) if vals.size > 1 else None
                stats[k] = {"mean": float(vals.mean()), "se": se, "values": vals.tolist()}
            points.append(
                {
                    "scenario": s,
                    "epsilon": e,
                    "rho": rs[0]["rho"],
                    "attack_rho": rs[0]["attack_rho"],
                    "seeds": [r["seed"] for r in rs],
                    "metrics": stats,
                }
            )
    return points


def _fits(
    points: list[dict[str, Any]], scenarios: list[str], geo: Mapping[str, list[str]]
) -> dict[str, dict[str, Any]]:
    """``I(eps) = -k eps^-alpha`` fitted to minus the summed squared error of total population."""
    from censusdp.tradeoff.social_choice import MeasuredFrontier

    fits: dict[str, dict[str, Any]] = {}
    for s in scenarios:
        fits[s] = {}
        for lv in geo[s]:
            key = f"accuracy.total_population.{lv}.sum_sq_error"
            pts = [
                (p["epsilon"], -p["metrics"][key]["mean"])
                for p in points
                if p["scenario"] == s and key in p["metrics"] and p["metrics"][key]["mean"] > 0
            ]
            if len(pts) < 2:
                continue
            try:
                f = MeasuredFrontier(tuple(e for e, _ in pts), tuple(q for _, q in pts))
            except ConfigError:
                continue
            fits[s][lv] = {"k": f.k, "alpha": f.alpha, "r_squared": f.r_squared, "points": len(pts)}
    return fits


def _runs_table(runs: list[dict[str, Any]]) -> pa.Table:
    cols: dict[str, list[Any]] = {
        k: [] for k in ("scenario", "epsilon", "seed", "run_seed", "rho", "metric", "value")
    }
    for r in runs:
        for k, v in sorted(r["metrics"].items()):
            cols["scenario"].append(r["scenario"])
            cols["epsilon"].append(float(r["epsilon"]))
            cols["seed"].append(int(r["seed"]))
            product_seed = r["attack_seed"] if k.startswith("reid.") else r["accuracy_seed"]
            cols["run_seed"].append(None if product_seed is None else int(product_seed))
            cols["rho"].append(float(r["attack_rho"] if k.startswith("reid.") else r["rho"]))
            cols["metric"].append(k)
            cols["value"].append(None if v is None else float(v))
    return pa.table(
        {
            "scenario": pa.array(cols["scenario"], pa.string()),
            "epsilon": pa.array(cols["epsilon"], pa.float64()),
            "seed": pa.array(cols["seed"], pa.int64()),
            "run_seed": pa.array(cols["run_seed"], pa.int64()),
            "rho": pa.array(cols["rho"], pa.float64()),
            "metric": pa.array(cols["metric"], pa.string()),
            "value": pa.array(cols["value"], pa.float64()),
        }
    )


def frontier_from_results(
    results: Mapping[str, Any],
    *,
    scenario: str = "standard",
    geolevel: str = "County",
    measure: str = "total_population",
) -> tuple[Any, int]:
    """The :class:`~censusdp.tradeoff.social_choice.MeasuredFrontier` of a census sweep.

    ``I(eps)`` is minus the summed squared error of ``measure`` over the geounits of
    ``geolevel`` (mean over seeds), fitted by ``-k eps^-alpha``.

    Returns:
        ``(frontier, number of geounits at the level)``.

    Raises:
        ConfigError: if the results lack the scenario, level or measure.
    """
    from censusdp.tradeoff.social_choice import MeasuredFrontier

    scen = results.get("scenarios", {})
    if scenario not in scen:
        raise ConfigError(f"results have no scenario {scenario!r}; present: {sorted(scen)}")
    if geolevel not in scen[scenario]["geolevels"]:
        raise ConfigError(
            f"scenario {scenario!r} has no geolevel {geolevel!r}; present: "
            f"{scen[scenario]['geolevels']}"
        )
    key = f"accuracy.{measure}.{geolevel}.sum_sq_error"
    pts = [
        (p["epsilon"], -p["metrics"][key]["mean"])
        for p in results["points"]
        if p["scenario"] == scenario and key in p["metrics"]
    ]
    if not pts:
        raise ConfigError(f"results have no metric {key!r} for scenario {scenario!r}")
    if any(q >= 0 for _, q in pts):
        raise ConfigError(
            f"{measure} at {geolevel} has zero error at some epsilon (an exact invariant?); "
            "choose a lower geolevel"
        )
    frontier = MeasuredFrontier(tuple(e for e, _ in pts), tuple(q for _, q in pts))
    return frontier, int(scen[scenario]["units"][geolevel])
