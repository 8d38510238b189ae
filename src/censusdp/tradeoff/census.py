"""The measured privacy-accuracy-risk frontier of a census release (``censusdp tradeoff census``).

For every total budget ``epsilon`` in a grid, every seed and two publication scenarios,
this runs real releases on the engine and records, with the library functions the
separate tools use:

* **accuracy** (:func:`censusdp.evaluate.evaluate_data`, as ``censusdp evaluate`` and
  ``censusdp sweep``): MAE, RMSE, TVD and the summed squared error by geolevel, for total
  population, for race x Hispanic origin (``hispanic*cenrace``: 126 mostly small
  groups per geounit) and for the detailed PL94 histogram, of a release made with the
  accuracy preset (default ``pl94-2020``, the redistricting allocation);
* **re-identification** (:func:`censusdp.attacks.dhc.runs.run_reconstruct` and
  ``run_reid``, as ``censusdp attack sweep``): the reconstruction attack on the block
  tables of a release made with the attack preset (default ``dhc-lite-demo``, which has
  sex and single-year age), linked to a synthetic commercial file and confirmed
  (JASON JSR-19-2F sec. 4.1): exact and age +-1 match rates, confirmed share of the
  population (exact and Fellegi-Sunter linkage), confirmed share among block uniques;
* **Bayesian disclosure risk** (:func:`censusdp.risk.one_level_risk`, as ``censusdp
  risk``; Kazan & Reiter 2022 eqs. 9-19): for an intruder who knows everyone in the
  target's finest published unit but the target, the marginal posterior, the risk ratio
  ``R`` and the probability of a correct 0-1 decision about the target's detailed cell,
  at priors 1/2, 1/5, 1/10, 1/50, from the zCDP ``rho`` of the detailed query at the
  finest level of the accuracy preset. With ``two_level_risk=True`` also the
  hierarchical (block + block group) figures of :func:`censusdp.risk.release.release_risk`
  for every person unique in their block (exact sums; slow below epsilon 4).

**One budget vocabulary.** ``epsilon`` is the (epsilon, delta)-DP guarantee, at the
preset's delta (1e-10), of everything the release publishes: each preset's global rho
is the largest whose epsilon is at most the grid value
(:meth:`censusdp.privacy.budget.Budget.scaled`, Canonne-Kamath-Steinke 2020 Cor. 13), as in
``censusdp attack sweep`` and ``censusdp sweep --epsilon-meaning cks``. Housing-unit
occupancy is not released (no separate unit run), so nothing else is published.

**Scenarios.** ``standard``: every geolevel down to the block is measured and
published. ``no_block``: JASON's recommendation (sec. 8, "forgo any public release of
block-level data and reallocate that part of the privacy-loss budget to higher
geographic levels"): the block level's share is removed and the other geolevels'
shares are scaled up proportionally; the finest published geography is the block
group. The engine's bottom level must be 16 characters, so the input is coarsened
first: every person and unit gets the geocode of the first block of its block group
(one pseudo-block per block group), and accuracy, the attack (reconstruction and
linkage on block group, sex and age) and the risk are all computed at that resolution.

The scenarios are made in :mod:`censusdp.tradeoff.census_scenarios`, each run is
measured in :mod:`censusdp.tradeoff.census_metrics` and the results are aggregated and
written in :mod:`censusdp.tradeoff.census_results`.

Outputs in ``out_dir``: ``results.json`` (configuration, seeds, per-point means and
standard errors over seeds, the unprotected references, frontier fits), ``runs.parquet``
(one row per scenario, epsilon, seed and metric), ``frontier.png`` and
``manifest.json``; ``cache/`` keeps every finished run so an interrupted or extended
sweep resumes without redoing them. ``censusdp explore`` reads ``results.json``.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from censusdp.errors import ConfigError
from censusdp.io.atomic import write_json
from censusdp.io.staging import staged_output
from censusdp.privacy.budget import Budget
from censusdp.progress import Progress, say, task
from censusdp.release.options import Execution
from censusdp.tradeoff.census_metrics import accuracy_metrics, attack_metrics, risk_metrics
from censusdp.tradeoff.census_results import result_document, write_results
from censusdp.tradeoff.census_scenarios import (
    SCENARIOS,
    Scenario,
    build_scenarios,
    check_presets,
)
from censusdp.version import __version__

__all__ = ["DEFAULT_EPSILONS", "CensusTradeoffOptions", "census_tradeoff"]

DEFAULT_EPSILONS: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
"""The default grid of total epsilons ((epsilon, delta)-DP at delta = 1e-10)."""


ReleaseRunner = Callable[..., Any]


# -- one run --------------------------------------------------------------------------------


def _run_seed(seed: int, scenario: str, epsilon: float, product: str) -> int:
    key = zlib.crc32(f"{scenario}/{epsilon!r}/{product}".encode())
    return int(np.random.SeedSequence([int(seed), key]).generate_state(1)[0])


def _default_runner(
    input_dir: Path, out_dir: Path, *, budget: Budget, seed: int, workers: int
) -> Any:
    from censusdp.privacy.release_budget import ReleaseBudget
    from censusdp.release.options import ReleaseOptions
    from censusdp.release.pipeline import run_release

    return run_release(
        input_dir,
        out_dir,
        ReleaseBudget(budget),
        ReleaseOptions(seed=seed),
        Execution(workers=workers),
    )


# -- the sweep ------------------------------------------------------------------------------


def _fingerprint(input_dir: Path) -> str:
    h = hashlib.sha256()
    for name in ("persons.parquet", "units.parquet"):
        h.update((input_dir / name).read_bytes())
    return h.hexdigest()[:16]


def _check_epsilons(epsilons: Sequence[float]) -> list[float]:
    eps = [float(e) for e in epsilons]
    if not eps:
        raise ConfigError("--epsilons needs at least one value")
    bad = [e for e in eps if not (e > 0 and math.isfinite(e))]
    if bad:
        raise ConfigError(f"epsilons must be positive and finite, got {bad}")
    if len(set(eps)) != len(eps):
        raise ConfigError(f"epsilons must be distinct, got {eps}")
    return sorted(eps)


def _check_seeds(seeds: Sequence[int]) -> list[int]:
    s = [int(x) for x in seeds]
    if not s:
        raise ConfigError("--seeds needs at least one value")
    if any(x < 0 for x in s) or len(set(s)) != len(s):
        raise ConfigError(f"seeds must be distinct non-negative integers, got {s}")
    return s


@dataclass(frozen=True)
class CensusTradeoffOptions:
    """What a census tradeoff sweep measures, checked once.

    Attributes:
        epsilons: total (epsilon, delta)-DP budgets at the preset's delta (kept sorted).
        seeds: master seeds; every (scenario, epsilon, seed, product) run gets its own
            seed derived from them (recorded in ``results.json``).
        preset: zCDP budget preset of the accuracy release and of the risk.
        attack_preset: budget preset of the attacked release (needs sex and age), or
            ``None`` to skip the attack.
        scenarios: any of ``"standard"`` and ``"no_block"``.
        two_level_risk: also the hierarchical Kazan-Reiter risk (slow at small epsilon).

    Raises:
        ConfigError: on construction, for an empty, non-positive or repeated epsilon or
            seed, or an unknown or repeated scenario.
    """

    epsilons: Sequence[float] = DEFAULT_EPSILONS
    seeds: Sequence[int] = (1,)
    preset: str = "pl94-2020"
    attack_preset: str | None = "dhc-lite-demo"
    scenarios: Sequence[str] = SCENARIOS
    two_level_risk: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilons", tuple(_check_epsilons(self.epsilons)))
        object.__setattr__(self, "seeds", tuple(_check_seeds(self.seeds)))
        scen = [str(s) for s in self.scenarios]
        if not scen or any(s not in SCENARIOS for s in scen) or len(set(scen)) != len(scen):
            raise ConfigError(f"scenarios must be distinct values among {SCENARIOS}, got {scen}")
        object.__setattr__(self, "scenarios", tuple(scen))


def census_tradeoff(
    input_dir: str | Path,
    out_dir: str | Path,
    options: CensusTradeoffOptions | None = None,
    *,
    execution: Execution | None = None,
    keep_runs: bool = False,
    overwrite: bool = False,
    release_runner: ReleaseRunner | None = None,
) -> dict[str, Any]:
    """Accuracy, re-identification and Bayesian risk of real releases over a grid of budgets.

    Args:
        input_dir: CEF directory (``persons.parquet``, ``units.parquet``).
        out_dir: results directory (layout in the module docstring). A directory
            holding an earlier sweep's cache is resumed: finished runs with the same
            input, presets and seeds are reused.
        options: the grid, the seeds, the presets and the scenarios (default
            :class:`CensusTradeoffOptions`).
        execution: its workers run the releases and the attack's block solves; its
            progress receives the lines (default: one worker, silent).
        keep_runs: keep the release directories under ``out_dir/runs``.
        overwrite: replace this command's earlier outputs in ``out_dir`` (never other
            files).
        release_runner: the release function (default
            :func:`censusdp.release.pipeline.run_release` without a unit run); tests pass a
            stand-in with the keyword arguments ``budget``, ``seed`` and ``workers``.

    Returns:
        The result written to ``results.json``.

    Raises:
        ConfigError: for a preset that cannot serve its role, fewer than one worker, or
            an ``out_dir`` holding other outputs without ``overwrite``.
    """
    options = options or CensusTradeoffOptions()
    execution = execution or Execution()
    workers, progress = execution.workers, execution.progress
    preset, attack_preset = options.preset, options.attack_preset
    two_level_risk = options.two_level_risk
    t0 = time.perf_counter()
    eps_list, seed_list = list(options.epsilons), list(options.seeds)
    scen = list(options.scenarios)
    if workers < 1:
        raise ConfigError(f"workers must be >= 1, got {workers}")
    base, attack_base = check_presets(preset, attack_preset)
    inp = Path(input_dir)
    # an interrupted sweep (its staging directory holds cache/) resumes by itself; an
    # --overwrite starts from the finished runs of the output it replaces
    with staged_output(
        out_dir,
        overwrite,
        [inp],
        command="tradeoff census",
        resume=True,
        carry=("cache",),
        resumable=True,
    ) as staging:
        out = staging.path
        runner = release_runner or _default_runner
        runner_name = (
            "run_release" if release_runner is None else getattr(runner, "__name__", "custom")
        )

        work = out / ".work"
        scenes = build_scenarios(scen, inp, work, base, attack_base, progress)
        config = {
            "input_fingerprint": _fingerprint(inp),
            "preset": preset,
            "attack_preset": attack_preset,
            "two_level_risk": bool(two_level_risk),
            "runner": runner_name,
            "package_version": __version__,
        }
        grid = _RunGrid(
            out=out,
            work=work,
            config=config,
            keep_runs=keep_runs,
            workers=workers,
            runner=runner,
            two_level_risk=two_level_risk,
        )
        runs: list[dict[str, Any]] = []
        keys = [(s, e, seed) for s in scen for e in eps_list for seed in seed_list]
        with task(progress, "tradeoff census", len(keys), unit="runs", summary=False) as bar:
            for done, (s, e, seed) in enumerate(keys, start=1):
                run, cached = grid.run(scenes[s], s, e, seed)
                runs.append(run)
                say(progress, f"[{done}/{len(keys)}] {_run_line(run, scenes[s], cached)}")
                bar.advance()
        references = _references(
            {s: scenes[s] for s in scen}, work, seed_list[0], workers, progress
        )

        settings = {
            "input": str(inp.resolve()),
            "epsilons": eps_list,
            "seeds": seed_list,
            "preset": preset,
            "attack_preset": attack_preset,
            "scenarios": scen,
            "two_level_risk": bool(two_level_risk),
            "workers": workers,
            "keep_runs": keep_runs,
        }
        result = result_document(settings, config, scenes, runs, references, base.delta)
        result["seconds"] = round(time.perf_counter() - t0, 2)
        write_results(result, runs, settings, out)
        shutil.rmtree(work, ignore_errors=True)
        say(progress, f"wrote {staging.out_dir / 'results.json'}, runs.parquet and frontier.png")
        return result


@dataclass(frozen=True)
class _RunGrid:
    """How one (scenario, epsilon, seed) run is made, cached and measured."""

    out: Path
    work: Path
    config: dict[str, Any]
    keep_runs: bool
    workers: int
    runner: ReleaseRunner
    two_level_risk: bool

    def run(self, scene: Scenario, s: str, e: float, seed: int) -> tuple[dict[str, Any], bool]:
        """The run's record and whether it came from the cache."""
        from censusdp.evaluate import json_ready

        key = f"{s}_eps{e:g}_seed{seed}"
        cfile = self.out / "cache" / f"{key}.json"
        cached = _read_cache(cfile, self.config)
        if cached is not None:
            return cached, True
        t_run = time.perf_counter()
        b = scene.budget.scaled(epsilon=str(e))
        ab = scene.attack_budget.scaled(epsilon=str(e)) if scene.attack_budget else None
        acc_seed = _run_seed(seed, s, e, "accuracy")
        att_seed = _run_seed(seed, s, e, "attack")
        rdir = (self.out / "runs" if self.keep_runs else self.work / "runs") / key
        if rdir.exists():
            shutil.rmtree(rdir)
        self.runner(scene.input, rdir / "accuracy", budget=b, seed=acc_seed, workers=self.workers)
        metrics = accuracy_metrics(scene.cef, rdir / "accuracy")
        metrics.update(risk_metrics(b, scene.cef, acc_seed, self.two_level_risk))
        if ab is not None:
            self.runner(
                scene.input, rdir / "attack", budget=ab, seed=att_seed, workers=self.workers
            )
            metrics.update(
                attack_metrics(
                    rdir / "attack",
                    scene.input,
                    rdir / "attack_out",
                    seed=seed,
                    workers=self.workers,
                )
            )
        if not self.keep_runs:
            shutil.rmtree(rdir, ignore_errors=True)
        run = {
            "scenario": s,
            "epsilon": e,
            "seed": seed,
            "accuracy_seed": acc_seed,
            "attack_seed": att_seed if ab is not None else None,
            "rho": float(b.rho),
            "rho_exact": str(b.rho),
            "attack_rho": float(ab.rho) if ab is not None else None,
            "seconds": round(time.perf_counter() - t_run, 3),
            "metrics": metrics,
        }
        cfile.parent.mkdir(exist_ok=True)
        write_json(json_ready({"config": self.config, "run": run}), cfile)
        return json_ready(run), False


def _read_cache(cfile: Path, config: dict[str, Any]) -> dict[str, Any] | None:
    """The cached run in ``cfile`` if it was made with the same ``config``."""
    if not cfile.exists():
        return None
    try:
        cached = json.loads(cfile.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return cached["run"] if cached and cached.get("config") == config else None


def _run_line(run: dict[str, Any], scene: Scenario, cached: bool) -> str:
    """One progress line for a finished run."""
    key = f"{run['scenario']}_eps{run['epsilon']:g}_seed{run['seed']}"
    if cached:
        return f"{key}: cached"
    metrics = run["metrics"]
    bottom = scene.budget.geolevel_names[-1]
    mae = metrics.get(f"accuracy.total_population.{bottom}.mae", math.nan)
    conf = metrics.get("reid.confirmed_share")
    reid = f"re-identified {conf:.1%}, " if conf is not None else ""
    return (
        f"{key}: MAE total population at {bottom} {mae:.2f}, {reid}P[correct] (p=1/2) "
        f"{metrics['risk.p0.5.correct_decision']:.3f} ({run['seconds']:.1f}s)"
    )


def _references(
    scenes: dict[str, Scenario], work: Path, seed: int, workers: int, progress: Progress
) -> dict[str, dict[str, float]]:
    """The attack on each scenario's unprotected tables (the reference every run is beside)."""
    references: dict[str, dict[str, float]] = {}
    for s, scene in scenes.items():
        if scene.attack_budget is None:
            continue
        ref_dir = work / f"unprotected_{s}"
        m = attack_metrics(scene.input, scene.input, ref_dir, seed=seed, workers=workers)
        references[s] = m
        shutil.rmtree(ref_dir, ignore_errors=True)
        say(progress, f"unprotected {s} tables: re-identified {m['reid.confirmed_share']:.1%}")
    return references
