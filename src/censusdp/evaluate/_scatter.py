"""Plots of a report page drawn with matplotlib's object API: PNG bytes of a figure and
the error-vs-size scatter of the population, with names that never overlap and axes
that two releases can share (:mod:`censusdp.evaluate.report`,
:mod:`censusdp.evaluate.compare`)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from censusdp.evaluate import _sections as sec

__all__ = ["figure_png", "scatter_limits"]


def figure_png(fig: Figure) -> bytes:
    """PNG bytes of a matplotlib figure (Agg canvas, no pyplot)."""
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


def scatter_limits(
    pairs: Sequence[tuple[np.ndarray, np.ndarray]],
) -> tuple[float, float]:
    """Shared axes of error-vs-size plots: the largest true count and the largest |error|.

    Two releases drawn with the same limits (:func:`_scatter_figure`'s ``limits``) can be
    compared by eye: the same error sits at the same height in both.
    """
    xmax, ymax = 1.0, 1.0
    for truth, released in pairs:
        t = np.asarray(truth, dtype=float)
        e = np.asarray(released, dtype=float) - t
        xmax = max(xmax, float(t.max(initial=1)))
        ymax = max(ymax, float(np.abs(e).max(initial=1)))
    return xmax, ymax


def _label_without_overlap(
    fig: Figure, ax: Any, x: np.ndarray, y: np.ndarray, names: Sequence[str]
) -> int:
    """Label points by name, largest |y| first: right of the point, or left of it where
    the right runs out of the axes; a label that would overlap one already placed (or
    fit neither side) is left out. Returns how many labels were kept."""
    renderer = FigureCanvasAgg(fig).get_renderer()
    frame = ax.get_window_extent(renderer)
    placed: list[Any] = []
    for i in np.argsort(-np.abs(y), kind="stable"):
        for dx, ha in ((4, "left"), (-4, "right")):
            ann = ax.annotate(
                names[i],
                (x[i], y[i]),
                fontsize=7,
                xytext=(dx, 3),
                textcoords="offset points",
                ha=ha,
            )
            box = ann.get_window_extent(renderer)
            inside = frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 <= frame.y1
            if inside and not any(box.overlaps(b) for b in placed):
                placed.append(box)
                break
            ann.remove()
    return len(placed)


def _scatter_figure(
    truth: np.ndarray,
    released: np.ndarray,
    level: str,
    names: Sequence[str] | None = None,
    *,
    limits: tuple[float, float] | None = None,
) -> bytes:
    """Published minus true population against the true population, every place shown.

    The x axis is logarithmic (places with no one at the left edge, marked 0) and the y
    axis symmetric-logarithmic, so small and large places and small and large errors
    are all visible; with many places, points are translucent and jittered by a fixed
    amount (seeded) so that ties of integer counts do not stack into one dot. With few
    places, points are labelled with their names where the labels do not overlap
    (the largest errors first). ``limits`` (:func:`scatter_limits`) fixes the axes, so
    that plots of two releases share them.
    """
    t = np.asarray(truth, dtype=float)
    e = np.asarray(released, dtype=float) - t
    n = t.size
    x = np.where(t > 0, t, 0.5)
    y = e
    many = n > 200
    if many:
        rng = np.random.default_rng(0)
        x = x * np.exp(rng.uniform(-0.12, 0.12, n))
        y = e + rng.uniform(-0.3, 0.3, n)
    fig = Figure(figsize=(6.2, 4.4))
    ax = fig.add_subplot()
    ax.scatter(
        x,
        y,
        s=6 if many else 30,
        alpha=max(0.08, min(0.6, 400 / n)) if many else 0.85,
        color="tab:blue",
        edgecolors="none" if many else "white",
        linewidths=0.5,
        rasterized=many,
    )
    ax.axhline(0, color="tab:red", lw=1, label="published = true")
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1)
    xmax, top = limits or (float(x.max(initial=1)), float(np.abs(y).max(initial=1)))
    top = max(top, 1.0)
    ticks = [0.0] + [s * 10.0**k for k in range(int(np.log10(top)) + 2) for s in (1, -1)]
    ax.set_yticks(sorted(ticks), [f"{t:+,.0f}" if t else "0" for t in sorted(ticks)])
    if limits is not None:
        ax.set_ylim(-top * 1.6, top * 1.6)
    ax.set_xlim(0.35, max(xmax * 1.6, 2))
    if names is not None and n <= 25:
        _label_without_overlap(fig, ax, x, y, names)
    ax.set_xlabel(f"true population of the {sec.plural(level)} (log scale; 0 at the left edge)")
    ax.set_ylabel("published - true (symmetric log scale)")
    shown = f"all {n:,} shown" + (", jittered, translucent" if many else "")
    ax.set_title(
        f"{sec.plural(level).capitalize()}: error of the population ({shown})", fontsize=10
    )
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(alpha=0.3)
    return figure_png(fig)
