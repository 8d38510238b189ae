"""The printed summary of ``censusdp risk`` in plain words.

The JSON (``risk.json``) keeps the notation of Kazan & Reiter (2022): ``rho_1``, the
risk ratio ``R``, ``xi2``, the noisy counts ``x1*``, ``x2*``, ``y1*``. This page of text
says the same for a reader who has not read the paper: how much of the budget protects
a block's counts, how far an intruder's belief can move, and which people (by the
Census NAME and GEOID of their block) are most exposed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from censusdp.tables.geoids import geo_identifiers

__all__ = ["risk_words"]


def _pct(x: float) -> str:
    """A probability in percent: ``"56.3%"``, ``"0.042%"``, ``"< 0.01%"`` for a tiny one."""
    if x == 0:
        return "0%"
    if x < 1e-4:
        return "< 0.01%"
    return f"{100 * x:.2g}%" if x < 1e-3 else f"{100 * x:.1f}%"


def _block(code: str) -> str:
    """``NAME (GEOID ...)`` of a block geocode (``no GEOID`` when it has none)."""
    ids = geo_identifiers(np.asarray([code]), len(code), "Block")
    geoid = ids["GEOID"][0]
    return f"{ids['NAME'][0]} (GEOID {geoid if geoid is not None else 'none'})"


def _header(s: Mapping[str, Any]) -> list[str]:
    c = s["counts"]
    unique = c["unique_in_block"]
    return [
        f"disclosure risk under budget {s['budget']}: epsilon {s['epsilon']:.4g} at delta "
        f"{s['delta']:.3g} for the people's tables (zCDP rho {s['global_rho']:.4g})",
        f"  a block's counts of people by their exact characteristics (race, Hispanic "
        f"origin, 18 or over, group quarters) get {s['rho1_block_detailed'] / s['global_rho']:.1%} "
        f"of it; the block group's, {s['rho2_block_group_detailed'] / s['global_rho']:.1%}",
        f"{c['persons']:,} people in {c['blocks']:,} blocks ({c['block_groups']:,} block groups); "
        f"{unique:,} ({100 * unique / max(c['persons'], 1):.1f}%) are the only person in their "
        "block with their exact characteristics",
        "an intruder knows everyone else in the block and guesses whether the target has "
        "those characteristics; from the block's published count alone:",
        "  belief before   belief after   times the belief before   chance the guess is right",
    ]


def _worst(s: Mapping[str, Any]) -> list[str]:
    p = s["primary_prior"]
    lines = [f"people most exposed by one simulated release (belief before {_pct(p)}):"]
    for w in s["worst_realised"][:5]:
        lines.append(
            f"  person {w['person_id']} in {_block(w['geocode'])}: belief after "
            f"{_pct(w['realised_posterior_two_level'])} "
            f"({w['realised_risk_two_level']:.2f} times); {w['xi2']:,} "
            + (
                "person in the block group has these characteristics (the person alone)"
                if w["xi2"] == 1
                else "people in the block group have these characteristics (the person included)"
            )
        )
    return lines


def _sweep(s: Mapping[str, Any]) -> list[str]:
    lines = []
    for row in s.get("sweep", []):
        one = next(r for r in row["one_level"] if r["prior"] == s["primary_prior"])
        extra = (
            f"; with the block group's counts, right {_pct(row['two_level_mean_correct'])} "
            f"of the time on average (+- {_pct(row['two_level_mean_correct_se'])}, "
            f"{s['sweep_sampled_people']} people)"
            if "two_level_mean_correct" in row
            else ""
        )
        lines.append(
            f"  at epsilon {row['epsilon']:.3g} (zCDP rho {row['global_rho']:g}): belief after "
            f"{_pct(one['marginal_posterior'])} ({one['marginal_risk']:.3f} times), guess right "
            f"{_pct(one['correct_decision_probability'])}{extra}"
        )
    return (
        ["other budgets (belief before " + _pct(s["primary_prior"]) + "):"] + lines if lines else []
    )


def risk_words(summary: Mapping[str, Any], out_dir: str, seconds: float) -> str:
    """The summary of :class:`censusdp.risk.report.RiskRun` as lines of plain text."""
    s = summary
    lines = _header(s)
    for r in s["one_level"]:
        lines.append(
            f"  {_pct(r['prior']):<16} {_pct(r['marginal_posterior']):<14} "
            f"{r['marginal_risk']:<25.3f} {_pct(r['correct_decision_probability'])}"
        )
    dist = s.get("distribution_over_unique_people")
    if dist:
        p = _pct(s["primary_prior"])
        right = dist["two_level_correct"]
        moved = dist["realised_risk_two_level"]
        lines += [
            f"with the block group's counts too (belief before {p}), over the people unique in "
            f"their block: the guess is right {_pct(right['q50'])} of the time for half of "
            f"them, {_pct(right['q100'])} at most",
            f"after one simulated release their belief is {moved['q50']:.2f} times the belief "
            f"before for half of them, {moved['q100']:.2f} times at most",
        ]
        lines += _worst(s)
    lines += _sweep(s)
    lines.append(f"wrote {out_dir} in {seconds:.1f} s (numbers in the paper's notation: risk.json)")
    return "\n".join(lines)
