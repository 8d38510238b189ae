"""The design lab's figures and their numbers (``censusdp design figures``).

Computes the sweeps with the library (:func:`~censusdp.design.strategy.strategy_sweep`,
:func:`~censusdp.design.small_n.small_n_sweep` and
:func:`~censusdp.design.allocation.optimize_allocation` for ``pl94-2020`` on its own
target workload), then writes PNG figures and one strict JSON file
with every plotted number and the seed. Plots use matplotlib's object API (``Figure``
and an Agg canvas), never ``pyplot``.
"""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from censusdp.design.allocation import AllocationRequest, optimize_allocation
from censusdp.design.small_n import (
    fair_mechanism,
    geometric_clamped,
    optimal_mechanism,
    small_n_sweep,
)
from censusdp.design.strategy import StrategyRequest, evaluate_strategy, strategy_sweep
from censusdp.io.atomic import atomic_path, write_json
from censusdp.io.budget_files import load_preset
from censusdp.io.staging import staged_output
from censusdp.progress import Progress
from censusdp.version import __version__

__all__ = [
    "FIGURE_FILES",
    "make_figures",
    "plot_allocation_heat",
    "plot_error_vs_n",
    "plot_small_n",
    "plot_strategy_comparison",
]

FIGURE_FILES: dict[str, str] = {
    "error_vs_n": "design_error_vs_n.png",
    "strategy_comparison": "design_strategy_comparison.png",
    "small_n": "design_small_n.png",
    "allocation_heat": "design_allocation_heat.png",
}


_STYLE = {
    "identity": ("tab:gray", "o"),
    "hierarchical": ("tab:blue", "s"),
    "wavelet": ("tab:green", "^"),
    "workload": ("tab:purple", "v"),
    "optimized": ("tab:red", "D"),
}


def _save(fig: Figure, path: Path) -> None:
    FigureCanvasAgg(fig)
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=100, format="png")


def plot_error_vs_n(rows: list[dict[str, Any]], path: Path) -> None:
    """rootmse against n for every strategy, one panel per (workload, privacy)."""
    panels = sorted({(r["workload"], r["privacy"]) for r in rows})
    cols = 2 if len(panels) > 1 else 1
    nrows = -(-len(panels) // cols)
    fig = Figure(figsize=(5.0 * cols, 3.8 * nrows))
    for k, (workload, privacy) in enumerate(panels):
        ax = fig.add_subplot(nrows, cols, k + 1)
        sub = [r for r in rows if r["workload"] == workload and r["privacy"] == privacy]
        for name in dict.fromkeys(r["strategy"] for r in sub):
            pts = sorted((r["n"], r["rootmse"]) for r in sub if r["strategy"] == name)
            color, marker = _STYLE.get(name, ("k", "x"))
            ax.plot(*zip(*pts, strict=True), marker=marker, color=color, ms=4, label=name)
        bound = sorted({(r["n"], r["svd_bound"]) for r in sub})
        ax.plot(*zip(*bound, strict=True), "k--", lw=1, label="SVD bound")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("n (cells)")
        ax.set_title(f"{workload}, {privacy}", fontsize=10)
        ax.set_ylabel("rootmse (unit-variance noise, sens 1)", fontsize=8)
        if k == 0:
            ax.legend(fontsize=7)
    fig.tight_layout()
    _save(fig, path)


def plot_strategy_comparison(rows: list[dict[str, Any]], path: Path) -> None:
    """rootmse / SVD bound for every strategy on each workload (grouped bars)."""
    groups = list(dict.fromkeys((r["workload"], r["n"], r["privacy"]) for r in rows))
    names = list(dict.fromkeys(r["strategy"] for r in rows))
    fig = Figure(figsize=(max(6.0, 1.1 * len(groups)), 4.0))
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / len(names)
    for s, name in enumerate(names):
        vals = []
        for g in groups:
            hit = [
                r["ratio"]
                for r in rows
                if (r["workload"], r["n"], r["privacy"]) == g and r["strategy"] == name
            ]
            vals.append(hit[0] if hit else np.nan)
        color, _ = _STYLE.get(name, ("k", "x"))
        ax.bar(
            np.arange(len(groups)) + (s - (len(names) - 1) / 2) * width,
            vals,
            width,
            color=color,
            label=name,
        )
    ax.axhline(1.0, color="k", ls="--", lw=1)
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(groups)))
    ax.set_xticklabels([f"{w}\nn={n}\n{p}" for w, n, p in groups], fontsize=7)
    ax.set_ylabel("rootmse / SVD bound")
    ax.legend(fontsize=7, ncol=len(names))
    fig.tight_layout()
    _save(fig, path)


def plot_small_n(
    rows: list[dict[str, Any]], matrices: dict[str, np.ndarray], epsilon: str, path: Path
) -> None:
    """Average and worst-case wrong-answer rates against n, and output distributions."""
    fig = Figure(figsize=(12.0, 7.6))
    cols = 2 * len(matrices) if len(matrices) % 2 else len(matrices)
    grid = fig.add_gridspec(2, max(cols, 2))
    half = max(cols, 2) // 2
    width = max(cols, 2) // max(len(matrices), 1)
    sub = [r for r in rows if r["epsilon"] == epsilon]
    names = list(dict.fromkeys(r["mechanism"] for r in sub))
    eps = float(Fraction(epsilon))
    threshold = 2 * np.exp(-eps) / (1 - np.exp(-eps))
    for k, (key, label) in enumerate(
        (
            ("wrong_answer_rate", "wrong-answer rate (uniform prior)"),
            ("worst_case_wrong_answer_rate", "worst-case wrong-answer rate"),
        )
    ):
        ax = fig.add_subplot(grid[0, k * half : (k + 1) * half])
        for name in names:
            pts = sorted((r["n"], r[key]) for r in sub if r["mechanism"] == name)
            ax.plot(*zip(*pts, strict=True), marker="o", ms=2.5, lw=1, label=name)
        ns = [r["n"] for r in sub]
        ax.plot(ns, [1 - 1 / (n + 1) for n in ns], color="k", lw=0.5, ls=":")
        ax.axvline(threshold, color="k", ls="--", lw=0.8)
        ax.set_xlabel("n (count in 0..n)")
        ax.set_ylabel(label)
        ax.set_title(
            f"epsilon = {epsilon}; dashed: n = 2 alpha / (1 - alpha) = {threshold:.2f}",
            fontsize=9,
        )
        if k == 0:
            ax.legend(fontsize=7)
    for k, (name, p) in enumerate(matrices.items()):
        axm = fig.add_subplot(grid[1, k * width : (k + 1) * width])
        im = axm.imshow(p, origin="upper", cmap="viridis", vmin=0.0, vmax=float(p.max()))
        axm.set_title(f"{name}: P[i, j], n = {p.shape[0] - 1}", fontsize=9)
        axm.set_xlabel("true count j")
        axm.set_ylabel("output i")
        fig.colorbar(im, ax=axm, fraction=0.046)
    fig.tight_layout()
    _save(fig, path)


def plot_allocation_heat(report: Any, path: Path) -> None:
    """Heat tables of the share of the global budget per (geolevel, query), original
    and optimised, annotated in percent, and the error of each geolevel."""
    original = report.request.budget
    new = report.budget
    levels = list(original.geolevel_names)
    queries = list(
        dict.fromkeys(q for b in (original, new) for lv in levels for q in b.query_shares[lv])
    )

    def table(b: Any) -> np.ndarray:
        out = np.full((len(levels), len(queries)), np.nan)
        for i, lv in enumerate(levels):
            for q, s in b.query_shares[lv].items():
                out[i, queries.index(q)] = 100 * float(b.geolevel_shares[lv] * s)
        return out

    tables = {"original: " + original.name: table(original), "optimised: " + new.name: table(new)}
    vmax = max(float(np.nanmax(t)) for t in tables.values())
    fig = Figure(figsize=(14.0, 8.6))
    grid = fig.add_gridspec(3, 1, height_ratios=(1, 1, 0.8))
    for k, (title, t) in enumerate(tables.items()):
        ax = fig.add_subplot(grid[k, 0])
        im = ax.imshow(t, cmap="magma_r", vmin=0.0, vmax=vmax, aspect="auto")
        for (i, j), v in np.ndenumerate(t):
            if np.isfinite(v):
                ax.text(
                    j,
                    i,
                    f"{v:.2f}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if v > 0.6 * vmax else "black",
                )
        ax.set_yticks(range(len(levels)))
        ax.set_yticklabels(levels, fontsize=8)
        ax.set_xticks(range(len(queries)))
        ax.set_xticklabels(queries if k == 1 else [], rotation=25, ha="right", fontsize=7)
        ax.set_title(f"{title}: % of global rho per (geolevel, query)", fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.02)
    ax = fig.add_subplot(grid[2, 0])
    x = np.arange(len(levels))
    ax.bar(x - 0.2, [lv["original_error"] for lv in report.levels], 0.4, label="original")
    ax.bar(x + 0.2, [lv["optimized_error"] for lv in report.levels], 0.4, label="optimised")
    ax.set_xticks(x)
    ax.set_xticklabels(levels, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("weighted MSE per cell", fontsize=8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def make_figures(
    out_dir: str | Path,
    *,
    seed: int = 0,
    ns: tuple[int, ...] = (16, 32, 64, 128, 256),
    small_ns: tuple[int, ...] = tuple(range(1, 31)),
    small_epsilons: tuple[str, ...] = ("1/2", "1"),
    restarts: int = 4,
    overwrite: bool = False,
    progress: Progress = None,
) -> dict[str, Any]:
    """Run the sweeps, write the PNGs and ``design_figures.json`` into ``out_dir``.

    Args:
        out_dir: output directory (refused if it exists and is not empty, unless
            ``overwrite``).
        seed: seed of the optimiser's random starts (written to the JSON).
        ns: domain sizes of the error-vs-n sweep.
        small_ns: counts of the small-n sweep.
        small_epsilons: epsilons of the small-n sweep (the first is plotted).
        restarts: optimiser random starts.
        overwrite: replace files in a non-empty ``out_dir``.
        progress: callback for log lines.

    Returns:
        Everything written to ``design_figures.json``.
    """
    with staged_output(out_dir, overwrite, command="design figures") as staging:
        return _figures_into(staging.path, seed, ns, small_ns, small_epsilons, restarts, progress)


def _figures_into(
    out: Path,
    seed: int,
    ns: tuple[int, ...],
    small_ns: tuple[int, ...],
    small_epsilons: tuple[str, ...],
    restarts: int,
    progress: Progress,
) -> dict[str, Any]:
    start = time.perf_counter()
    sweep = strategy_sweep(
        ("all-range", "prefix"), ns, seed=seed, restarts=restarts, progress=progress
    )
    plot_error_vs_n(sweep, out / FIGURE_FILES["error_vs_n"])
    comparison = [r for r in sweep if r["n"] == max(ns)]
    for privacy in ("zcdp", "pure"):
        for name in ("identity", "workload", "hierarchical", "wavelet", "optimized"):
            r = evaluate_strategy(
                StrategyRequest("pl94", None, name, privacy=privacy, seed=seed, restarts=restarts)
            )
            comparison.append(r.row())
    plot_strategy_comparison(comparison, out / FIGURE_FILES["strategy_comparison"])
    if progress is not None:
        progress("design: small-n sweep")
    small = small_n_sweep(small_ns, small_epsilons)
    eps0 = str(Fraction(small_epsilons[0]))
    n_show = 10
    matrices = {
        "geometric_clamped": geometric_clamped(n_show, eps0),
        "fair": fair_mechanism(n_show, eps0),
        "lp_all": optimal_mechanism(
            n_show, eps0, ("weak_honesty", "symmetry", "column_honesty", "column_monotonicity")
        )[0],
    }
    plot_small_n(small, matrices, eps0, out / FIGURE_FILES["small_n"])
    if progress is not None:
        progress("design: allocation for pl94-2020 on its own target workload")
    alloc = optimize_allocation(AllocationRequest(load_preset("pl94-2020")))
    plot_allocation_heat(alloc, out / FIGURE_FILES["allocation_heat"])
    numbers: dict[str, Any] = {
        "seed": seed,
        "restarts": restarts,
        "strategy_sweep": sweep,
        "strategy_comparison": comparison,
        "small_n_sweep": small,
        "small_n_matrices": {k: v.tolist() for k, v in matrices.items()},
        "allocation": alloc.to_dict(),
        "figures": dict(FIGURE_FILES),
    }
    numbers["seconds"] = round(time.perf_counter() - start, 2)
    numbers["package_version"] = __version__
    write_json(numbers, out / "design_figures.json")
    return numbers
