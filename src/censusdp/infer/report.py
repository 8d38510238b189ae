"""Posterior summaries with an optional figure (the figure side of
:mod:`censusdp.infer.posterior`; the file itself is checked and written by
:mod:`censusdp.infer._plots`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from censusdp.infer._noise import NoiseLaw
from censusdp.infer.posterior import (
    BetaPrior,
    NoisyCount,
    abc_draws,
    exact_posterior,
    gibbs_draws,
    infer_proportion,
)

__all__ = ["PosteriorFigure", "posterior_curves", "posterior_report"]


@dataclass(frozen=True)
class PosteriorFigure:
    """The figure :func:`posterior_report` draws beside its numbers.

    Attributes:
        path: the PNG file (``--plot``).
        overwrite: replace an existing ``path`` (refused otherwise).
        truth: the true proportion, drawn as a vertical line (``None``: not drawn).
    """

    path: str | Path
    overwrite: bool = False
    truth: float | None = None


def posterior_curves(
    counts: Sequence[NoisyCount], law: NoiseLaw, prior: BetaPrior, result: dict[str, Any]
) -> list:
    """The mechanism-aware posterior (exact density, or a histogram of the draws) and the
    naive Beta, on a common grid, for :func:`censusdp.infer._plots.plot_posteriors`."""
    from censusdp.infer._plots import PosteriorCurve

    naive = result["naive"]
    lo = min(result["ci95"][0], naive["ci95"][0])
    hi = max(result["ci95"][1], naive["ci95"][1])
    pad = 0.35 * (hi - lo) + 1e-6
    grid = np.linspace(max(lo - pad, 0.0), min(hi + pad, 1.0), 600)
    method = result["method"]
    if method == "exact":
        mix = exact_posterior(counts, law, prior)
        aware = PosteriorCurve("mechanism-aware (exact)", grid, mix.pdf(grid), result["ci95"], "-")
    else:
        seed = result["seed"]
        draws = int(result["sampler"]["draws"])
        if method == "abc":
            sample, _ = abc_draws(counts, law, prior, draws=draws, seed=seed)
        else:
            sample, _ = gibbs_draws(counts, law, prior, draws=draws, seed=seed)
        dens, edges = np.histogram(sample, bins=60, range=(grid[0], grid[-1]), density=True)
        mids = 0.5 * (edges[1:] + edges[:-1])
        aware = PosteriorCurve(f"mechanism-aware ({method} draws)", mids, dens, result["ci95"], "-")
    n_total = sum(int(c.n) for c in counts)
    x = min(max(sum(float(c.noisy) for c in counts), 0.0), float(n_total))
    naive_curve = PosteriorCurve.beta(
        "naive (noise ignored)", prior.a + x, prior.b + n_total - x, grid, "--"
    )
    return [aware, naive_curve]


def posterior_report(
    counts: Sequence[NoisyCount],
    law: NoiseLaw,
    prior: BetaPrior | None = None,
    *,
    method: str = "exact",
    draws: int = 20_000,
    seed: int | None = 0,
    figure: PosteriorFigure | None = None,
) -> dict[str, Any]:
    """:func:`~censusdp.infer.posterior.infer_proportion`, and the figure (``figure``).

    Raises:
        ConfigError: if the figure's file exists and its ``overwrite`` is false.
    """
    prior = prior or BetaPrior()
    counts = list(counts)
    if figure is not None:
        from censusdp.infer._plots import check_plot_file

        check_plot_file(figure.path, figure.overwrite)
    result = infer_proportion(counts, law, prior, method=method, draws=draws, seed=seed)
    if figure is not None:
        from censusdp.infer._plots import plot_posteriors

        curves = posterior_curves(counts, law, prior, result)
        n = sum(int(c.n) for c in counts)
        title = f"theta from noisy count(s) of {n:,} people, {law.law} noise (variance {law.variance:,.2f})"
        plot_posteriors(
            figure.path, curves, title=title, truth=figure.truth, overwrite=figure.overwrite
        )
        result["plot"] = str(figure.path)
    return result
