"""Plots in the style of Kazan & Reiter (2022) Figs. 1-3 and 6 (matplotlib, Agg backend)."""

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


def _save(fig: plt.Figure, path: Path) -> None:
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=90, format="png")
    plt.close(fig)


def plot_fig1(path: Path, x: np.ndarray, post: dict[float, np.ndarray], rho1: float) -> None:
    """Posterior and ``R'(x*)`` against the released value (Fig. 1)."""
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.6))
    for c, (p, v) in zip(_COLORS, post.items(), strict=False):
        ax[0].plot(x, v, "o-", ms=3, color=c, label=f"p = {p:g}")
        ax[1].plot(x, v / p, "o-", ms=3, color=c, label=f"p = {p:g}")
    ax[0].set(xlabel="released count x*", ylabel="P[X = 1 | X* = x*]", title=f"rho_1 = {rho1:.4g}")
    ax[1].set(xlabel="released count x*", ylabel="R'(x*)", yscale="log")
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
        ax[0].plot(rhos, v, color=c, label=f"p = {p:g}")
        ax[1].plot(rhos, v / p, color=c, label=f"p = {p:g}")
    for a in ax:
        a.axvline(rho1, color="k", ls="--", lw=1)
        a.set_xscale("log")
        a.set_yscale("log")
        a.set_xlabel("rho_1")
    ax[0].set_ylabel("P[X = 1 | xi = 1]  (eq. 14)")
    ax[1].set_ylabel("R  (eq. 15)")
    ax[0].legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def plot_fig3(path: Path, rhos: np.ndarray, correct: dict[float, np.ndarray], rho1: float) -> None:
    """Probability of a correct 0-1 decision against ``rho_1`` (Fig. 3)."""
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for c, (p, v) in zip(_COLORS, correct.items(), strict=False):
        ax.plot(rhos, v, color=c, label=f"p = {p:g}")
    ax.axvline(rho1, color="k", ls="--", lw=1)
    ax.set(xscale="log", xlabel="rho_1", ylabel="P[correct decision]  (eq. 19)")
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
        ax.plot(rho2s, v, "o-", ms=3, color=c, label=f"xi_2 = {xi2}")
    ax.axhline(one_level, color="k", ls="--", lw=1, label="no hierarchy")
    ax.axvline(rho2, color="tab:purple", ls="--", lw=1)
    ax.set(xscale="log", xlabel="rho_2", ylabel="P[correct decision]", title=f"d = {d}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def plot_people(path: Path, columns: dict[str, np.ndarray], labels: Sequence[str]) -> None:
    """Histograms of per-person risk measures over people unique in their block."""
    fig, ax = plt.subplots(1, len(labels), figsize=(4 * len(labels), 3.4))
    ax = np.atleast_1d(ax)
    for a, name in zip(ax, labels, strict=True):
        a.hist(columns[name], bins=40, color="tab:blue")
        a.set(xlabel=name, ylabel="people")
    fig.tight_layout()
    _save(fig, path)
