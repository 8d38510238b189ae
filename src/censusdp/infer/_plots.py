"""Figures for inference (matplotlib, Agg backend): posteriors and GLS intervals."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from censusdp.io.output_files import output_file  # noqa: E402
from censusdp.io.output_rules import check_output_file  # noqa: E402

__all__ = [
    "PosteriorCurve",
    "TractPanel",
    "check_plot_file",
    "plot_posteriors",
    "plot_tract_example",
]


class PosteriorCurve:
    """One posterior of ``theta`` to draw: a density on a grid and its 95% interval."""

    def __init__(
        self,
        label: str,
        grid: np.ndarray,
        density: np.ndarray,
        ci95: Sequence[float],
        style: str = "-",
    ) -> None:
        self.label = label
        self.grid = np.asarray(grid, dtype=np.float64)
        self.density = np.asarray(density, dtype=np.float64)
        self.ci95 = (float(ci95[0]), float(ci95[1]))
        self.style = style

    @classmethod
    def beta(
        cls, label: str, a: float, b: float, grid: np.ndarray, style: str = "--"
    ) -> PosteriorCurve:
        """A ``Beta(a, b)`` curve (the naive analysis)."""
        lo, hi = stats.beta(a, b).ppf([0.025, 0.975])
        return cls(label, grid, stats.beta(a, b).pdf(grid), (lo, hi), style)


def check_plot_file(path: str | Path, overwrite: bool) -> None:
    """Refuse to draw over an existing ``path`` unless ``overwrite`` (``--plot``), before
    any work is done.

    Raises:
        ConfigError: naming ``--plot`` and the file.
    """
    check_output_file(path, overwrite, option="--plot")


def _save(fig: plt.Figure, path: Path, overwrite: bool | None = None) -> None:
    try:
        with output_file(path, overwrite=overwrite, suffix=".png", option="--plot") as tmp:
            fig.savefig(tmp, dpi=100, format="png")
    finally:
        plt.close(fig)


def _draw_posteriors(ax: plt.Axes, curves: Sequence[PosteriorCurve], truth: float | None) -> None:
    colors = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple")
    for c, curve in zip(colors, curves, strict=False):
        ax.plot(curve.grid, curve.density, curve.style, color=c, label=curve.label)
        inside = (curve.grid >= curve.ci95[0]) & (curve.grid <= curve.ci95[1])
        ax.fill_between(curve.grid[inside], curve.density[inside], color=c, alpha=0.15)
    if truth is not None:
        ax.axvline(truth, color="black", lw=1, label=f"truth {truth:.4f}")
    ax.set(xlabel="theta (proportion)", ylabel="posterior density")
    ax.legend(fontsize=8)


def plot_posteriors(
    path: str | Path,
    curves: Sequence[PosteriorCurve],
    *,
    title: str = "",
    truth: float | None = None,
    overwrite: bool | None = None,
) -> None:
    """Posterior densities of ``theta`` with their 95% intervals shaded."""
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    _draw_posteriors(ax, curves, truth)
    if title:
        ax.set_title(title, fontsize=10)
    fig.tight_layout()
    _save(fig, Path(path), overwrite)


@dataclass(frozen=True, eq=False)
class TractPanel:
    """The left panel of :func:`plot_tract_example`: a few geounits' truth, released
    (TopDown) counts and GLS estimates with their integer 90% and 95% intervals.

    Attributes:
        labels: one tick label per geounit.
        truth, released, estimate: per geounit.
        ci90, ci95: ``(low, high)`` arrays per interval.
        what: the y axis label (the line counted).
    """

    labels: Sequence[str]
    truth: np.ndarray
    released: np.ndarray
    estimate: np.ndarray
    ci90: tuple[np.ndarray, np.ndarray]
    ci95: tuple[np.ndarray, np.ndarray]
    what: str


def plot_tract_example(
    path: str | Path,
    panel: TractPanel,
    curves: Sequence[PosteriorCurve],
    *,
    theta_truth: float | None,
    title: str,
) -> None:
    """Left: released (TopDown) and GLS estimates with 90%/95% intervals and the truth for
    a few geounits (``panel``); right: posteriors of a proportion."""
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1.2, 1]})
    x = np.arange(len(panel.labels))
    ci90, ci95 = panel.ci90, panel.ci95
    ax[0].vlines(x, ci95[0], ci95[1], color="tab:blue", lw=2, alpha=0.35, label="GLS 95% interval")
    ax[0].vlines(x, ci90[0], ci90[1], color="tab:blue", lw=5, alpha=0.6, label="GLS 90% interval")
    ax[0].plot(x, panel.estimate, "o", color="tab:blue", label="GLS estimate")
    ax[0].plot(x + 0.15, panel.released, "s", color="tab:orange", label="released (TopDown)")
    ax[0].plot(x - 0.15, panel.truth, "k_", ms=14, mew=2, label="truth")
    ax[0].set_xticks(x, panel.labels, rotation=20, fontsize=8)
    ax[0].set(ylabel=panel.what)
    ax[0].legend(fontsize=8)
    _draw_posteriors(ax[1], curves, theta_truth)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    _save(fig, Path(path))
