"""``censusdp risk``: read a synthetic census, compute its disclosure risk, write the results.

Writes into ``out``:

* ``risk.json`` -- configuration, one-level risk per prior, the distribution over
  people unique in their block of the two-level and realised measures, the worst
  cases, the exact two-level table per ``(xi2, d)``, the sweep over the global rho;
* ``risk_persons.parquet`` -- one row per person unique in their block;
* ``fig1_posterior.png``, ``fig2_marginal.png``, ``fig3_decision.png``,
  ``fig6_two_level.png``, ``people.png`` -- plots in the style of Kazan & Reiter (2022) Figs. 1-3, 6;
* ``manifest.json`` -- config, seed, package version, timings.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa

from censusdp.errors import ConfigError
from censusdp.io.atomic import write_json, write_parquet
from censusdp.io.budget_files import resolve_budget
from censusdp.io.cef import read_cef
from censusdp.io.output_rules import MANIFEST_FILE
from censusdp.io.staging import staged_output
from censusdp.privacy.budget import Budget
from censusdp.privacy.randomness import experiment_generator
from censusdp.progress import say
from censusdp.risk import _plots
from censusdp.risk._noise import NoiseModel
from censusdp.risk._words import risk_words
from censusdp.risk.hierarchical import DecisionRule, HierarchicalModel, two_level_risk
from censusdp.risk.one_level import one_level_risk, posterior
from censusdp.risk.release import (
    DEFAULT_PRIORS,
    Intruder,
    ReleaseRisk,
    check_noise_law,
    release_risk,
    sweep_risk,
)
from censusdp.version import __version__

__all__ = ["RiskOptions", "RiskRun", "run_risk"]


@dataclass(frozen=True)
class RiskRun:
    """What :func:`run_risk` wrote and a printable summary."""

    out_dir: Path
    summary: dict[str, object]
    seconds: dict[str, float]

    def format(self) -> str:
        """A short summary in plain words (:func:`censusdp.risk._words.risk_words`); the
        paper's notation stays in ``risk.json``."""
        return risk_words(self.summary, self.out_dir.name, self.seconds["total"])


@dataclass(frozen=True)
class RiskOptions:
    """What ``censusdp risk`` computes, checked once.

    Attributes:
        preset: budget preset name (``pl94-2020``), or ``None`` with ``config``.
        config: a budget TOML file instead of a preset.
        rho: rescale the budget to this global rho (shares kept).
        sweep: global rho values for the sweep.
        priors: one-level intruder priors.
        primary_prior: prior of the two-level and per-person results.
        draws: ``None`` for exact-posterior decisions; ``n`` for decisions from ``n``
            posterior draws (ties to the target), as in the paper's figures.
        seed: seed of the simulated release.
        fig6_xi2: block-group counts drawn in the Fig. 6 plot.
        sweep_people: the sweep's two-level average is over a seeded random sample of
            this many people unique in their block (its standard error is reported).
        noise_law: ``"release"`` (default: the noise the release adds, which under
            bounded neighbours is ``sigma^2 = 1/rho_q``) or ``"paper"`` (Kazan & Reiter's
            ``sigma^2 = 1/(2 rho)``, to reproduce their tables).

    Raises:
        ConfigError: on construction, unless exactly one of ``preset`` and ``config``
            is given, or for an unknown ``noise_law``; CensusDPError for a prior outside
            ``(0, 1)`` or ``draws < 1``.
    """

    preset: str | None = "pl94-2020"
    config: str | Path | None = None
    rho: float | Fraction | str | None = None
    sweep: Sequence[float | Fraction | str] = ()
    priors: Sequence[float] = DEFAULT_PRIORS
    primary_prior: float = 0.5
    draws: int | None = None
    seed: int = 0
    fig6_xi2: Sequence[int] = (1, 10, 100)
    sweep_people: int = 200
    noise_law: str = "release"

    def __post_init__(self) -> None:
        if (self.preset is None) == (self.config is None):
            raise ConfigError("give exactly one of preset or config")
        check_noise_law(self.noise_law)
        intruder = self.intruder  # checks the priors and the draws now, not mid-run
        object.__setattr__(self, "priors", intruder.priors)
        object.__setattr__(self, "primary_prior", intruder.primary_prior)

    @property
    def intruder(self) -> Intruder:
        """The intruder of the two-level results: the priors and the decision rule."""
        rule = DecisionRule(self.draws, ties_to_target=self.draws is not None)
        return Intruder(self.priors, self.primary_prior, rule)


def run_risk(
    input_dir: str | Path,
    out_dir: str | Path,
    options: RiskOptions | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    overwrite: bool = False,
) -> RiskRun:
    """Disclosure risk of a release configuration on a synthetic census, written to ``out_dir``.

    Args:
        input_dir: directory with ``persons.parquet`` and ``units.parquet``.
        out_dir: output directory.
        options: the budget, the priors, the sweep and the seed (default
            :class:`RiskOptions`).
        progress: called with a line per step.
        overwrite: replace an earlier output of censusdp at ``out_dir`` (see
            :class:`censusdp.io.staging.Staging`).
    """
    options = options or RiskOptions()
    config, sweep, seed, noise_law = options.config, options.sweep, options.seed, options.noise_law
    t0 = time.perf_counter()
    with staged_output(out_dir, overwrite, [input_dir, config], command="risk") as staging:
        out = staging.path
        budget = resolve_budget(preset=options.preset, config=config)
        if options.rho is not None:
            budget = budget.scaled(rho=options.rho)
        intruder = options.intruder
        rule = intruder.rule
        say(progress, f"reading {input_dir}")
        cef = read_cef(input_dir, progress=progress)
        t_read = time.perf_counter() - t0
        res = release_risk(
            cef.persons,
            budget,
            block_geocodes=cef.units["geocode"],
            intruder=intruder,
            seed=seed,
            tol=1e-10,
            progress=progress,
            noise_law=noise_law,
        )
        summary = {
            "noise_law": noise_law,
            "budget": getattr(budget, "name", "?"),
            "global_rho": float(Fraction(budget.rho)),
            "epsilon": budget.epsilon(),
            "delta": float(budget.delta),
            "decision_rule": rule.describe(),
            **res.summary(),
            "two_level_table": res.two_level_table,
        }
        t1 = time.perf_counter()
        if sweep:
            say(progress, f"sweep over global rho {list(sweep)}")
            kept = _sweep_sample(res.persons, seed, options.sweep_people)
            summary["sweep_sampled_people"] = int(sum(c for *_, c in kept))
            summary["sweep"] = sweep_risk(
                budget, sweep, pairs=kept, intruder=intruder, tol=1e-8, noise_law=noise_law
            )
        t_sweep = time.perf_counter() - t1

        t2 = time.perf_counter()
        say(progress, "plots")
        _plot_one_level(out, res)
        summary["fig6"] = _plot_two_level(out, res, rule, options.fig6_xi2)
        t_plots = time.perf_counter() - t2

        cols = {k: pa.array(np.asarray(v)) for k, v in res.persons.items()}
        write_parquet(pa.table(cols), out / "risk_persons.parquet")
        write_json(summary, out / "risk.json")
        seconds = {
            "read": t_read,
            **{f"risk_{k}": v for k, v in res.seconds.items()},
            "sweep": t_sweep,
            "plots": t_plots,
            "total": time.perf_counter() - t0,
        }
        manifest = _risk_manifest(input_dir, budget, res, rule, sweep, seed)
        write_json({**manifest, "timings": seconds}, out / MANIFEST_FILE)
        return RiskRun(out_dir=staging.out_dir, summary=summary, seconds=seconds)


def _risk_manifest(
    input_dir: str | Path,
    budget: Budget,
    res: ReleaseRisk,
    rule: DecisionRule,
    sweep: Sequence[float | Fraction | str],
    seed: int,
) -> dict[str, object]:
    """The run record of ``manifest.json`` (its ``timings`` are added by the caller)."""
    return {
        "command": "risk",
        "input": str(input_dir),
        "budget": getattr(budget, "name", "?"),
        "rho": float(Fraction(budget.rho)),
        "rho1": float(res.rho1),
        "rho2": float(res.rho2),
        "priors": list(res.priors),
        "primary_prior": res.primary_prior,
        "decision_rule": rule.describe(),
        "sweep": [str(s) for s in sweep],
        "seed": seed,
        "package_version": __version__,
    }


def _sweep_sample(
    pp: dict[str, np.ndarray], seed: int, sweep_people: int
) -> list[tuple[int, int, int]]:
    """A seeded random sample of the unique people as ``(others, d, count)`` triples.

    The sweep's two-level mean over the sample is an unbiased estimate of the mean
    over all unique people (its standard error is reported). The sample is drawn from
    ``experiment_generator(seed + 1)``.
    """
    n_u = int(pp["person_id"].size)
    if not n_u:
        return []
    rng = experiment_generator(seed + 1)
    pick = rng.choice(n_u, size=min(sweep_people, n_u), replace=False)
    pairs, counts = np.unique(
        np.stack([pp["xi2"][pick] - 1, pp["d"][pick]], axis=1), axis=0, return_counts=True
    )
    return [(int(o), int(d), int(c)) for (o, d), c in zip(pairs, counts, strict=True)]


def _plot_one_level(out: Path, res: ReleaseRisk) -> None:
    """Figs. 1-3 of Kazan & Reiter (2022): posterior, marginal posterior and P[correct]."""
    r1 = float(res.rho1)
    noise = NoiseModel.discrete_gaussian(res.rho1)
    x = np.arange(-10, 11)
    _plots.plot_fig1(
        out / "fig1_posterior.png",
        x,
        {p: posterior(x, prior=p, noise=noise) for p in res.priors},
        r1,
    )
    grid = np.geomspace(1e-3, 1e2, 121)
    curves = {
        p: [
            one_level_risk(prior=p, noise=NoiseModel.discrete_gaussian(float(g)), tol=1e-12)
            for g in grid
        ]
        for p in res.priors
    }
    _plots.plot_fig2(
        out / "fig2_marginal.png",
        grid,
        {p: np.array([c.marginal_posterior.value for c in v]) for p, v in curves.items()},
        r1,
    )
    _plots.plot_fig3(
        out / "fig3_decision.png",
        grid,
        {p: np.array([c.correct_decision.value for c in v]) for p, v in curves.items()},
        r1,
    )


def _plot_two_level(
    out: Path, res: ReleaseRisk, rule: DecisionRule, fig6_xi2: Sequence[int]
) -> dict[str, object]:
    """Fig. 6 of Kazan & Reiter (2022) at the median ``d``, and the per-person plot.

    Returns:
        The ``fig6`` record of ``risk.json``.
    """
    du = res.persons["d"]
    d_typ = int(np.median(du)) if du.size else 27
    rho2s = np.geomspace(0.01, 100, 9)
    fig6 = {}
    for xi2 in fig6_xi2:
        fig6[int(xi2)] = np.array(
            [
                two_level_risk(
                    HierarchicalModel.two_level(
                        res.rho1, float(g), max(d_typ, 1), res.primary_prior
                    ),
                    int(xi2) - 1,
                    rule=rule,
                    tol=1e-8,
                ).correct_decision
                for g in rho2s
            ]
        )
    one_p = next(r for r in res.one_level if r.prior == res.primary_prior)
    _plots.plot_fig6(
        out / "fig6_two_level.png",
        rho2s,
        fig6,
        one_p.correct_decision.value,
        float(res.rho2),
        max(d_typ, 1),
    )
    if res.persons["person_id"].size:
        _plots.plot_people(
            out / "people.png",
            res.persons,
            ["two_level_correct", "realised_posterior_one_level", "realised_posterior_two_level"],
        )
    return {
        "d": max(d_typ, 1),
        "rho2": rho2s.tolist(),
        **{str(k): v.tolist() for k, v in fig6.items()},
    }
