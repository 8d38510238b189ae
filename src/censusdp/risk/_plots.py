"""Plots in the style of Kazan & Reiter (2022) Figs. 1-3 and 6 (matplotlib, Agg backend).

Axes are labelled in words (the intruder's belief before and after, the chance a guess is
right, the share of the budget), with the paper's symbol and equation in parentheses.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from censusdp.io.atomic import atomic_path  # noqa: E402

__all__ = ["plot_fig1", "plot_fig2", "plot_fig3", "plot_fig6", "plot_people"]

_COLORS = ("tab:red", "tab:green", "tab:blue", "tab:purple", "tab:orange", "tab:brown")

_BLOCK_BUDGET = "zCDP rho of a block's detailed counts (rho_1)"

_PERSON_MEASURES = {
    "two_level_correct": "chance the guess is right (block and block group)",
    "realised_posterior_one_level": "belief after one release (block counts)",
    "realised_posterior_two_level": "belief after one release (block and block group)",
}


def _before(p: float) -> str:
    return f"belief before {100 * p:g}%"


def _save(fig: plt.Figure, path: Path) -> None:
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=90, format="png")
    plt.close(fig)


def plot_fig1(path: Path, x: np.ndarray, post: dict[float, np.ndarray], rho1: float) -> None:
    """Posterior and ``R'(x*)`` against the released value (Fig. 1)."""
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.6))
    for c, (p, v) in zip(_COLORS, post.items(), strict=False):
        ax[0].plot(x, v, "o-", ms=3, color=c, label=_before(p))
        ax[1].plot(x, v / p, "o-", ms=3, color=c, label=_before(p))
    ax[0].set(
        xlabel="published block count (x*)",
        ylabel="belief after",
        title=f"block counts measured with zCDP rho {rho1:.4g}",
    )
    ax[1].set(
        xlabel="published block count (x*)", ylabel="times the belief before (R')", yscale="log"
    )
    ax[0].legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def plot_fig2(
    path: Path,
    rhos: np.ndarray,
    mpost: dict[float, np.ndarray],
    rho1: float,
) -> None:
    """Marginal posterior and ``R`` against ``rho_1`` (Fig. 2)."""
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.6))
    for c, (p, v) in zip(_COLORS, mpost.items(), strict=False):
        ax[0].plot(rhos, v, color=c, label=_before(p))
        ax[1].plot(rhos, v / p, color=c, label=_before(p))
    for a in ax:
        a.axvline(rho1, color="k", ls="--", lw=1)
        a.set_xscale("log")
        a.set_yscale("log")
        a.set_xlabel(_BLOCK_BUDGET)
    ax[0].set_ylabel("belief after, on average  (eq. 14)")
    ax[1].set_ylabel("times the belief before, R  (eq. 15)")
    ax[0].legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def plot_fig3(path: Path, rhos: np.ndarray, correct: dict[float, np.ndarray], rho1: float) -> None:
    """Probability of a correct 0-1 decision against ``rho_1`` (Fig. 3)."""
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for c, (p, v) in zip(_COLORS, correct.items(), strict=False):
        ax.plot(rhos, v, color=c, label=_before(p))
    ax.axvline(rho1, color="k", ls="--", lw=1)
    ax.set(xscale="log", xlabel=_BLOCK_BUDGET, ylabel="chance the guess is right  (eq. 19)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def plot_fig6(
    path: Path,
    rho2s: np.ndarray,
    correct: dict[int, np.ndarray],
    one_level: float,
    rho2: float,
    d: int,
) -> None:
    """Two-level probability of a correct decision against ``rho_2`` (Fig. 6)."""
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for c, (xi2, v) in zip(_COLORS, correct.items(), strict=False):
        ax.plot(rho2s, v, "o-", ms=3, color=c, label=f"{xi2} in the block group with them")
    ax.axhline(one_level, color="k", ls="--", lw=1, label="block counts only")
    ax.axvline(rho2, color="tab:purple", ls="--", lw=1)
    ax.set(
        xscale="log",
        xlabel="zCDP rho of the block group's detailed counts (rho_2)",
        ylabel="chance the guess is right",
        title=f"{d} other blocks in the block group",
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def plot_people(path: Path, columns: dict[str, np.ndarray], labels: Sequence[str]) -> None:
    """Histograms of per-person risk measures over people unique in their block."""
    fig, ax = plt.subplots(1, len(labels), figsize=(4 * len(labels), 3.4))
    ax = np.atleast_1d(ax)
    for a, name in zip(ax, labels, strict=True):
        a.hist(columns[name], bins=40, color="tab:blue")
        a.set(xlabel=_PERSON_MEASURES.get(name, name), ylabel="people")
    fig.tight_layout()
    _save(fig, path)
