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
    # left panel: a linear epsilon axis around the optimum, so the tangency is visible
    xl = np.linspace(max(lo, e_star / 5), min(hi, 3 * e_star), 300)
    yl = np.array([frontier.quality(float(x)) for x in xl])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    ax1.plot(xl, yl, color="C0", lw=2, label="frontier I(eps) (production possibilities)")
    ind = np.array([preferences.quality_at_welfare(optimum.welfare, float(x)) for x in xl])
    ok = np.isfinite(ind)
    ax1.plot(xl[ok], ind[ok], color="C3", ls="--", label="indifference curve through optimum")
    ax1.plot([e_star], [optimum.quality], "o", color="k", ms=8, zorder=5)
    ax1.annotate(
        f"optimum eps* = {e_star:.3g}",
        (e_star, optimum.quality),
        textcoords="offset points",
        xytext=(10, -18),
    )
    ymin, ymax = float(np.min(yl)), float(np.max(yl))
    pad = 0.08 * (ymax - ymin if ymax > ymin else abs(ymin) + 1e-12)
    ax1.set_ylim(ymin - pad, ymax + pad)
    ax1.set_xlabel("privacy loss epsilon")
    ax1.set_ylabel("accuracy I (minus added variance)")
    ax1.set_title("Privacy-accuracy frontier and the social optimum", fontsize=10)
    ax1.grid(alpha=0.3)
    ax1.legend(fontsize=8, loc="lower right")

    a, b = max(lo, e_star / 8), min(hi, e_star * 8)
    if b <= a * 1.01:
        a, b = lo, hi
    xs = np.geomspace(a, b, 300)
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


def census_frontier_figure(results: dict[str, Any]) -> bytes:
    """Accuracy, re-identification and Bayesian risk against epsilon, per scenario."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8))
    panels = (
        (
            ("accuracy.total_population.BlockGroup.mae", "block groups"),
            ("accuracy.total_population.Block.mae", "blocks"),
        ),
        (
            ("reid.confirmed_share", "confirmed"),
            ("reid.uniques_confirmed_share", "confirmed, uniques"),
        ),
        (
            ("risk.p0.5.correct_decision", "P[correct], p = 1/2"),
            ("risk.p0.5.marginal_posterior", "marginal posterior, p = 1/2"),
        ),
    )
    titles = (
        ("MAE of total population", "mean |error| (persons)"),
        ("Reconstruction and re-identification", "share of the population"),
        ("Bayesian risk (Kazan-Reiter)", "probability"),
    )
    names = {"standard": "all levels", "no_block": "no block level"}
    styles = {"standard": "-", "no_block": "--"}
    for ax, series, (title, ylabel) in zip(axes, panels, titles, strict=True):
        for j, (key, label) in enumerate(series):
            for scen in results.get("scenarios", {}):
                pts = [
                    p for p in results["points"] if p["scenario"] == scen and key in p["metrics"]
                ]
                if not pts:
                    continue
                x = [p["epsilon"] for p in pts]
                y = [p["metrics"][key]["mean"] for p in pts]
                ax.plot(
                    x,
                    y,
                    styles[scen],
                    marker="os"[j],
                    color=f"C{j}",
                    label=f"{label}, {names[scen]}",
                )
                ref = results.get("references", {}).get(scen, {}).get(key)
                if ref is not None and math.isfinite(ref):
                    ax.axhline(ref, color=f"C{j}", ls=":", lw=1, alpha=0.7)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("total epsilon ((eps, delta)-DP, delta = 1e-10)")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
    fig.text(0.5, 0.01, "dotted: the same attack on unprotected tables", ha="center", fontsize=8)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return _png(fig)
