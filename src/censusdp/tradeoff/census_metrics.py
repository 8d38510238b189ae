"""What ``censusdp tradeoff census`` measures on each run: accuracy, re-identification
and Bayesian disclosure risk, with the library functions the separate tools use.

:data:`METRICS` defines every metric name; :func:`accuracy_metrics` (as ``censusdp
evaluate``), :func:`risk_metrics` (as ``censusdp risk``) and :func:`attack_metrics` (as
``censusdp attack reconstruct`` and ``attack reid``) compute them.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from censusdp.privacy.budget import Budget

__all__ = [
    "ACCURACY_MEASURES",
    "ACCURACY_STATS",
    "METRICS",
    "PRIORS",
    "REID_STATS",
    "accuracy_metrics",
    "attack_metrics",
    "risk_metrics",
]

PRIORS: tuple[float, ...] = (0.5, 0.2, 0.1, 0.02)
"""Kazan & Reiter's four intruders (sec. 4.2)."""

ACCURACY_MEASURES: tuple[str, ...] = ("total_population", "hispanic*cenrace", "detailed")
ACCURACY_STATS: tuple[str, ...] = ("mae", "rmse", "tvd", "sum_sq_error")
REID_STATS: tuple[str, ...] = (
    "exact_rate",
    "fuzzy_rate",
    "confirmed_share",
    "fs_confirmed_share",
    "uniques_confirmed_share",
    "baseline_confirmed_share",
)

METRICS: dict[str, str] = {
    "accuracy.<measure>.<geolevel>.mae": "mean |released - true| over the counts of the measure at every geounit of the level",
    "accuracy.<measure>.<geolevel>.rmse": "root mean squared error, same counts",
    "accuracy.<measure>.<geolevel>.tvd": "1 - L1 / (2 POP) (JASON sec. 6.1)",
    "accuracy.<measure>.<geolevel>.sum_sq_error": "sum of squared errors over the counts (minus the measured accuracy I)",
    "reid.exact_rate": "share of reconstructed records equal to a real person (block or block group, sex, age, race, ethnicity)",
    "reid.fuzzy_rate": "the same with age +-1",
    "reid.confirmed_share": "share of the population re-identified and confirmed (exact linkage on geography, sex, age)",
    "reid.fs_confirmed_share": "the same with Fellegi-Sunter linkage",
    "reid.uniques_confirmed_share": "confirmed share among persons unique in their unit",
    "reid.baseline_confirmed_share": "confirmed share of the modal-guess baseline (no release needed)",
    "risk.p<prior>.marginal_posterior": "Kazan-Reiter marginal posterior of the target's cell (eq. 14)",
    "risk.p<prior>.risk_ratio": "R = marginal posterior / prior (eq. 15)",
    "risk.p<prior>.correct_decision": "probability of a correct 0-1 decision (eqs. 18-19)",
}


def accuracy_metrics(cef: Any, release_dir: Path) -> dict[str, float]:
    """``accuracy.*`` of the release in ``release_dir`` against ``cef`` (as ``censusdp evaluate``)."""
    from censusdp.evaluate import evaluate_data, read_release

    result, _ = evaluate_data(
        cef.persons, cef.units, read_release(release_dir), district_draws=1, seed=0
    )
    out: dict[str, float] = {}
    for m in ACCURACY_MEASURES:
        for level, rec in result["metrics"][m].items():
            for s in ACCURACY_STATS:
                out[f"accuracy.{m}.{level}.{s}"] = float(rec[s])
    return out


def risk_metrics(budget: Budget, cef: Any, seed: int, two_level: bool) -> dict[str, float]:
    """``risk.*`` of ``budget`` at :data:`PRIORS` (as ``censusdp risk``); with ``two_level``
    also the hierarchical figures over the people of ``cef`` unique in their block
    (:func:`censusdp.risk.release.release_risk`, its simulated release seeded by ``seed``)."""
    from censusdp.risk import NoiseModel, one_level_risk
    from censusdp.risk.release import detailed_rhos, release_risk

    # rho_q of the detailed query as budgeted, and the noise the release really adds
    _low, _parent, rho1, rho2 = detailed_rhos(budget, noise_law="paper")
    out: dict[str, float] = {"risk.rho_finest": float(rho1), "risk.rho_parent": float(rho2)}
    noise = NoiseModel.discrete_gaussian(detailed_rhos(budget)[2])
    for p in PRIORS:
        r = one_level_risk(prior=p, noise=noise)
        out[f"risk.p{p:g}.marginal_posterior"] = r.marginal_posterior.value
        out[f"risk.p{p:g}.risk_ratio"] = r.marginal_risk.value
        out[f"risk.p{p:g}.correct_decision"] = r.correct_decision.value
    if two_level:
        rr = release_risk(cef.persons, budget, block_geocodes=cef.units["geocode"], seed=seed)
        s = rr.summary()
        out["risk.unique_in_finest_unit"] = float(s["counts"]["unique_in_block"])  # type: ignore[index]
        dist = s.get("distribution_over_unique_people") or {}
        for key in ("two_level_correct", "realised_risk_two_level"):
            if key in dist:
                out[f"risk.two_level.{key}.mean"] = float(dist[key]["mean"])
                out[f"risk.two_level.{key}.max"] = float(dist[key]["q100"])
    return out


def attack_metrics(
    release_dir: Path, truth_dir: Path, work: Path, *, seed: int, workers: int
) -> dict[str, float]:
    """``reid.*``: the reconstruction of ``release_dir`` linked and confirmed against
    ``truth_dir`` (as ``censusdp attack reconstruct`` and ``attack reid``), in ``work``."""
    from censusdp.attacks.dhc.runs import run_reconstruct, run_reid

    rec = run_reconstruct(
        release_dir, work / "rec", truth_dir=truth_dir, workers=workers, overwrite=True
    )
    reid = run_reid(work / "rec", truth_dir, work / "reid", seed=seed, overwrite=True)
    ex = reid["methods"]["exact"]
    fs = reid["methods"].get("fellegi-sunter", {})
    return {
        "reid.exact_rate": float(rec["match"]["exact_rate"]),
        "reid.fuzzy_rate": float(rec["match"]["fuzzy_rate"]),
        "reid.confirmed_share": float(ex["confirmed_share"]),
        "reid.fs_confirmed_share": float(fs.get("confirmed_share", math.nan)),
        "reid.uniques_confirmed_share": float(ex["uniques_confirmed_share"]),
        "reid.baseline_confirmed_share": float(ex["baseline_confirmed_share"]),
    }
