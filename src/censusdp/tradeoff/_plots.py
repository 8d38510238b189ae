"""Figures of the tradeoff package (matplotlib, Agg backend; returns PNG bytes)."""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np

__all__ = ["census_frontier_figure", "social_choice_figure"]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, dpi=110, format="png")
    _pyplot().close(fig)
    return buf.getvalue()


def social_choice_figure(
    frontier: Any, preferences: Any, optimum: Any, *, title: str | None = None
) -> bytes:
    """Two panels: the frontier ``I(eps)`` with the indifference curve through the optimum;
    MRT and MRS against epsilon, crossing at the optimum."""
    plt = _pyplot()
    lo, hi = optimum.search_range
    e_star = optimum.epsilon
    a = max(lo, e_star / 8)
    b = min(hi, e_star * 8)
    if b <= a * 1.01:
        a, b = lo, hi
    xs = np.geomspace(a, b, 300)
    ys = np.array([frontier.quality(float(x)) for x in xs])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    ax1.plot(xs, ys, color="C0", lw=2, label="frontier I(eps) (production possibilities)")
    ind = np.array([preferences.quality_at_welfare(optimum.welfare, float(x)) for x in xs])
    ok = np.isfinite(ind)
    ax1.plot(xs[ok], ind[ok], color="C3", ls="--", label="indifference curve through optimum")
    ax1.plot([e_star], [optimum.quality], "o", color="k", ms=8, zorder=5)
    ax1.annotate(
        f"optimum eps* = {e_star:.3g}",
        (e_star, optimum.quality),
        textcoords="offset points",
        xytext=(10, -18),
    )
    ymin, ymax = float(np.min(ys)), float(np.max(ys))
    pad = 0.08 * (ymax - ymin if ymax > ymin else abs(ymin) + 1e-12)
    ax1.set_ylim(ymin - pad, min(0.0, ymax) + pad)
    ax1.set_xscale("log")
    ax1.set_xlabel("privacy loss epsilon")
    ax1.set_ylabel("accuracy I (minus added variance)")
    ax1.set_title("Privacy-accuracy frontier and the social optimum", fontsize=10)
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8, loc="lower right")

    mrt = np.array([frontier.slope(float(x)) for x in xs])
    mrs = np.array(
        [
            preferences.marginal_privacy_cost(float(x))
            / preferences.marginal_data_value(frontier.quality(float(x)))
            for x in xs
        ]
    )
    ax2.plot(xs, mrt, color="C0", lw=2, label="MRT = dI/deps (what one more unit buys)")
    ax2.plot(xs, mrs, color="C3", lw=2, ls="--", label="MRS = P'(eps)/D'(I) (what it costs)")
    ax2.axvline(e_star, color="k", lw=1, ls=":")
    ax2.plot([e_star], [optimum.mrt], "o", color="k", ms=7)
    ax2.set_xscale("log")
    if np.all(mrt > 0) and np.all(mrs > 0):
        ax2.set_yscale("log")
    ax2.set_xlabel("privacy loss epsilon")
    ax2.set_ylabel("accuracy per unit of epsilon")
    state = "MRT = MRS" if optimum.interior else "corner: MRT and MRS do not cross"
    ax2.set_title(f"Marginal rates ({state})", fontsize=10)
    ax2.grid(alpha=0.3, which="both")
    ax2.legend(fontsize=8, loc="upper right")
    fig.suptitle(title or getattr(frontier, "label", "frontier"), fontsize=10)
    fig.tight_layout()
    return _png(fig)


def census_frontier_figure(summary: dict[str, Any]) -> bytes:
    """Accuracy, re-identification and Bayesian risk against epsilon, both scenarios."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8))
    panels = (
        ("mae_total_population", "MAE of total population", "mean |error| (persons)"),
        ("reid_confirmed_share", "Re-identification (confirmed share)", "share of population"),
        ("kr_correct_decision", "Bayesian risk: P[correct 0-1 decision]", "probability"),
    )
    for ax, (key, title, ylabel) in zip(axes, panels, strict=True):
        for scen, style in (("standard", "o-"), ("no_block", "s--")):
            pts = [p for p in summary["points"] if p["scenario"] == scen]
            x = [p["epsilon"] for p in pts if p.get(key) is not None]
            y = [p[key] for p in pts if p.get(key) is not None]
            if x:
                lab = "all levels published" if scen == "standard" else "no block-level release"
                ax.plot(x, y, style, label=lab)
        ref = summary.get("references", {}).get(key)
        if ref is not None and math.isfinite(ref):
            ax.axhline(ref, color="grey", ls=":", lw=1, label="unprotected tables")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("total epsilon ((eps, delta)-DP, delta = 1e-10)")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    return _png(fig)
