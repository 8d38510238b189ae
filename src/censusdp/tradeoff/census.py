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
  hierarchical (block + block group) figures of :func:`censusdp.risk.release_risk`
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from censusdp.errors import ConfigError
from censusdp.io.atomic import atomic_path, write_json, write_parquet
from censusdp.io.output_rules import MANIFEST_FILE
from censusdp.io.staging import staged_output
from censusdp.privacy.budget import Budget
from censusdp.progress import Progress, say, task
from censusdp.version import __version__

__all__ = [
    "DEFAULT_EPSILONS",
    "METRICS",
    "PRIORS",
    "SCENARIOS",
    "census_tradeoff",
    "coarsen_to_block_groups",
    "frontier_from_results",
    "no_block_budget",
]

DEFAULT_EPSILONS: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
"""The default grid of total epsilons ((epsilon, delta)-DP at delta = 1e-10)."""

SCENARIOS: tuple[str, ...] = ("standard", "no_block")

PRIORS: tuple[float, ...] = (0.5, 0.2, 0.1, 0.02)
"""Kazan & Reiter's four intruders (sec. 4.2)."""

ACCURACY_MEASURES: tuple[str, ...] = ("total_population", "hispanic*cenrace", "detailed")
ACCURACY_STATS: tuple[str, ...] = ("mae", "rmse", "tvd", "sum_sq_error")
REID_STATS: tuple[str, ...] = (
    "exact_rate",
    "fuzzy_rate",
    "confirmed_share",
    "fs_confirmed_share",
    "uniques_confirmed_share",
    "baseline_confirmed_share",
)

METRICS: dict[str, str] = {
    "accuracy.<measure>.<geolevel>.mae": "mean |released - true| over the counts of the measure at every geounit of the level",
    "accuracy.<measure>.<geolevel>.rmse": "root mean squared error, same counts",
    "accuracy.<measure>.<geolevel>.tvd": "1 - L1 / (2 POP) (JASON sec. 6.1)",
    "accuracy.<measure>.<geolevel>.sum_sq_error": "sum of squared errors over the counts (minus the measured accuracy I)",
    "reid.exact_rate": "share of reconstructed records equal to a real person (block or block group, sex, age, race, ethnicity)",
    "reid.fuzzy_rate": "the same with age +-1",
    "reid.confirmed_share": "share of the population re-identified and confirmed (exact linkage on geography, sex, age)",
    "reid.fs_confirmed_share": "the same with Fellegi-Sunter linkage",
    "reid.uniques_confirmed_share": "confirmed share among persons unique in their unit",
    "reid.baseline_confirmed_share": "confirmed share of the modal-guess baseline (no release needed)",
    "risk.p<prior>.marginal_posterior": "Kazan-Reiter marginal posterior of the target's cell (eq. 14)",
    "risk.p<prior>.risk_ratio": "R = marginal posterior / prior (eq. 15)",
    "risk.p<prior>.correct_decision": "probability of a correct 0-1 decision (eqs. 18-19)",
}

ReleaseRunner = Callable[..., Any]


# -- budgets and geography of the scenarios --------------------------------------------------


def no_block_budget(budget: Budget) -> Budget:
    """``budget`` without its bottom (block) geolevel; the others' shares scaled up to sum to 1.

    JASON JSR-19-2F sec. 8: "forgo any public release of block-level data and reallocate
    that part of the privacy-loss budget to higher geographic levels". Each remaining
    share ``s_l`` becomes ``s_l / (1 - s_block)``. The new bottom level keeps the
    block group's name and queries and gets geocode length 16 (the input is coarsened
    by :func:`coarsen_to_block_groups`).

    Raises:
        ConfigError: if the budget has fewer than three geolevels.
    """
    from censusdp.privacy.budget import Budget

    levels = list(budget.geolevels)
    if len(levels) < 3:
        raise ConfigError(
            f"budget {budget.name!r} has {len(levels)} geolevels; dropping the block level "
            "needs at least three"
        )
    bottom = levels[-1][0]
    keep = levels[:-1]
    rest = 1 - Fraction(budget.geolevel_shares[bottom])
    new_levels = [*keep[:-1], (keep[-1][0], 16)]
    return Budget(
        schema=budget.schema,
        mechanism=budget.mechanism,
        total=budget.total,
        delta=budget.delta,
        geolevels=tuple(new_levels),
        geolevel_shares={n: Fraction(budget.geolevel_shares[n]) / rest for n, _ in keep},
        query_shares={n: dict(budget.query_shares[n]) for n, _ in keep},
        neighbours=budget.neighbours,
        name=f"{budget.name}-no-block",
        description=f"{budget.description} (no block-level release; block share reallocated)",
        notes=budget.notes,
    )


def coarsen_to_block_groups(
    input_dir: str | Path, out_dir: str | Path, *, block_group_length: int = 12
) -> dict[str, int]:
    """Copy a CEF with every geocode replaced by the first block code of its block group.

    Persons and units keep every other column. The result is a valid CEF whose
    "blocks" are whole block groups.

    Returns:
        ``{"persons", "units", "block_groups"}`` counts.
    """
    from censusdp.io.cef import read_cef_tables

    src, dst = Path(input_dir), Path(out_dir)
    dst.mkdir(parents=True, exist_ok=True)
    # the files read_cef reads (a directory of parts by its rule), every column kept
    tables = {n.removesuffix(".parquet"): t for n, t in read_cef_tables(src).items()}
    codes = np.concatenate(
        [
            np.asarray(t.column("geocode").to_numpy(zero_copy_only=False)).astype("U16")
            for t in tables.values()
        ]
    )
    prefix = codes.astype(f"U{block_group_length}")
    order = np.lexsort((codes, prefix))
    first = np.ones(order.size, dtype=bool)
    first[1:] = prefix[order][1:] != prefix[order][:-1]
    bg_names = prefix[order][first]
    bg_first = codes[order][first]
    for name, t in tables.items():
        g = np.asarray(t.column("geocode").to_numpy(zero_copy_only=False)).astype("U16")
        rep = bg_first[np.searchsorted(bg_names, g.astype(f"U{block_group_length}"))]
        i = t.column_names.index("geocode")
        t = t.set_column(i, "geocode", pa.array(rep.astype(object), pa.string()))
        write_parquet(t, dst / f"{name}.parquet")
    return {
        "persons": tables["persons"].num_rows,
        "units": tables["units"].num_rows,
        "block_groups": int(bg_names.size),
    }


# -- one run --------------------------------------------------------------------------------


def _run_seed(seed: int, scenario: str, epsilon: float, product: str) -> int:
    key = zlib.crc32(f"{scenario}/{epsilon!r}/{product}".encode())
    return int(np.random.SeedSequence([int(seed), key]).generate_state(1)[0])


def _default_runner(
    input_dir: Path, out_dir: Path, *, budget: Budget, seed: int, workers: int
) -> Any:
    from censusdp.privacy.release_budget import ReleaseBudget
    from censusdp.release.options import Execution, ReleaseOptions
    from censusdp.release.pipeline import run_release

    return run_release(
        input_dir,
        out_dir,
        ReleaseBudget(budget),
        ReleaseOptions(seed=seed),
        Execution(workers=workers),
    )


def _accuracy(cef: Any, release_dir: Path) -> dict[str, float]:
    from censusdp.evaluate import evaluate_data, read_release

    result, _ = evaluate_data(
        cef.persons, cef.units, read_release(release_dir), district_draws=1, seed=0
    )
    out: dict[str, float] = {}
    for m in ACCURACY_MEASURES:
        for level, rec in result["metrics"][m].items():
            for s in ACCURACY_STATS:
                out[f"accuracy.{m}.{level}.{s}"] = float(rec[s])
    return out


def _risk(budget: Budget, cef: Any, seed: int, two_level: bool) -> dict[str, float]:
    from censusdp.risk import NoiseModel, one_level_risk
    from censusdp.risk.release import detailed_rhos, release_risk

    # rho_q of the detailed query as budgeted, and the noise the release really adds
    _low, _parent, rho1, rho2 = detailed_rhos(budget, noise_law="paper")
    out: dict[str, float] = {"risk.rho_finest": float(rho1), "risk.rho_parent": float(rho2)}
    noise = NoiseModel.discrete_gaussian(detailed_rhos(budget)[2])
    for p in PRIORS:
        r = one_level_risk(prior=p, noise=noise)
        out[f"risk.p{p:g}.marginal_posterior"] = r.marginal_posterior.value
        out[f"risk.p{p:g}.risk_ratio"] = r.marginal_risk.value
        out[f"risk.p{p:g}.correct_decision"] = r.correct_decision.value
    if two_level:
        rr = release_risk(cef.persons, budget, block_geocodes=cef.units["geocode"], seed=seed)
        s = rr.summary()
        out["risk.unique_in_finest_unit"] = float(s["counts"]["unique_in_block"])  # type: ignore[index]
        dist = s.get("distribution_over_unique_people") or {}
        for key in ("two_level_correct", "realised_risk_two_level"):
            if key in dist:
                out[f"risk.two_level.{key}.mean"] = float(dist[key]["mean"])
                out[f"risk.two_level.{key}.max"] = float(dist[key]["q100"])
    return out


def _attack(
    release_dir: Path, truth_dir: Path, work: Path, *, seed: int, workers: int
) -> dict[str, float]:
    from censusdp.attacks.dhc.runs import run_reconstruct, run_reid

    rec = run_reconstruct(
        release_dir, work / "rec", truth_dir=truth_dir, workers=workers, overwrite=True
    )
    reid = run_reid(work / "rec", truth_dir, work / "reid", seed=seed, overwrite=True)
    ex = reid["methods"]["exact"]
    fs = reid["methods"].get("fellegi-sunter", {})
    return {
        "reid.exact_rate": float(rec["match"]["exact_rate"]),
        "reid.fuzzy_rate": float(rec["match"]["fuzzy_rate"]),
        "reid.confirmed_share": float(ex["confirmed_share"]),
        "reid.fs_confirmed_share": float(fs.get("confirmed_share", math.nan)),
        "reid.uniques_confirmed_share": float(ex["uniques_confirmed_share"]),
        "reid.baseline_confirmed_share": float(ex["baseline_confirmed_share"]),
    }


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


def census_tradeoff(
    input_dir: str | Path,
    out_dir: str | Path,
    *,
    epsilons: Sequence[float] = DEFAULT_EPSILONS,
    seeds: Sequence[int] = (1,),
    preset: str = "pl94-2020",
    attack_preset: str | None = "dhc-lite-demo",
    scenarios: Sequence[str] = SCENARIOS,
    two_level_risk: bool = False,
    workers: int = 1,
    keep_runs: bool = False,
    overwrite: bool = False,
    release_runner: ReleaseRunner | None = None,
    progress: Progress = None,
) -> dict[str, Any]:
    """Accuracy, re-identification and Bayesian risk of real releases over a grid of budgets.

    Args:
        input_dir: CEF directory (``persons.parquet``, ``units.parquet``).
        out_dir: results directory (layout in the module docstring). A directory
            holding an earlier sweep's cache is resumed: finished runs with the same
            input, presets and seeds are reused.
        epsilons: total (epsilon, delta)-DP budgets at the preset's delta.
        seeds: master seeds; every (scenario, epsilon, seed, product) run gets its own
            seed derived from them (recorded in ``results.json``).
        preset: zCDP budget preset of the accuracy release and of the risk.
        attack_preset: budget preset of the attacked release (needs sex and age), or
            ``None`` to skip the attack.
        scenarios: any of ``"standard"`` and ``"no_block"``.
        two_level_risk: also the hierarchical Kazan-Reiter risk (slow at small epsilon).
        workers: worker processes of the releases and of the attack's block solves.
        keep_runs: keep the release directories under ``out_dir/runs``.
        overwrite: replace this command's earlier outputs in ``out_dir`` (never other
            files).
        release_runner: the release function (default
            :func:`censusdp.release.pipeline.run_release` without a unit run); tests pass a
            stand-in with the same keyword arguments.
        progress: progress callback (``None``: silent).

    Returns:
        The result written to ``results.json``.

    Raises:
        ConfigError: for invalid arguments, a preset that cannot serve its role, or an
            ``out_dir`` holding other outputs without ``overwrite``.
    """

    t0 = time.perf_counter()
    eps_list = _check_epsilons(epsilons)
    seed_list = _check_seeds(seeds)
    scen = [str(s) for s in scenarios]
    if not scen or any(s not in SCENARIOS for s in scen) or len(set(scen)) != len(scen):
        raise ConfigError(f"scenarios must be distinct values among {SCENARIOS}, got {scen}")
    if workers < 1:
        raise ConfigError(f"workers must be >= 1, got {workers}")
    base, attack_base = _check_presets(preset, attack_preset)
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
        scenes = _scenarios(scen, inp, work, base, attack_base, progress)
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
        result = _result_document(settings, config, scenes, runs, references, base.delta)
        result["seconds"] = round(time.perf_counter() - t0, 2)
        _write_results(result, runs, settings, out)
        shutil.rmtree(work, ignore_errors=True)
        say(progress, f"wrote {staging.out_dir / 'results.json'}, runs.parquet and frontier.png")
        return result


def _check_presets(preset: str, attack_preset: str | None) -> tuple[Budget, Budget | None]:
    """The accuracy/risk preset (zCDP, measures ``detailed``) and the attack preset."""
    from censusdp.data.schema import get_schema
    from censusdp.io.budget_files import load_preset
    from censusdp.risk.release import detailed_rhos

    base = load_preset(preset)
    if base.privacy_measure != "zCDP":
        raise ConfigError(
            f"preset {preset!r} is {base.privacy_measure}; the Bayesian risk needs a zCDP "
            "(discrete Gaussian) preset such as pl94-2020"
        )
    detailed_rhos(base)  # raises ConfigError if the preset does not measure 'detailed' low
    if attack_preset is None:
        return base, None
    attack_base = load_preset(attack_preset)
    attrs = get_schema(attack_base.schema).attribute_names
    if "sex" not in attrs or "age" not in attrs:
        raise ConfigError(
            f"attack preset {attack_preset!r} has schema {attack_base.schema!r} without "
            "sex and age; the reconstruction needs both (e.g. dhc-lite-demo)"
        )
    return base, attack_base


@dataclass(frozen=True)
class _Scenario:
    """One publication scenario: its input, the CEF read from it and its two budgets."""

    input: Path
    cef: Any
    budget: Budget
    attack_budget: Budget | None

    def describe(self, name: str) -> dict[str, Any]:
        """The scenario's entry in ``results.json``: geolevels, unit counts, shares."""
        geocodes = np.asarray(self.cef.units["geocode"])
        return {
            "geolevels": list(self.budget.geolevel_names),
            "units": {
                lv: int(np.unique(geocodes.astype(f"U{length}")).size) if length > 0 else 1
                for lv, length in self.budget.geolevels
            },
            "geolevel_shares": {k: float(v) for k, v in self.budget.geolevel_shares.items()},
            "description": (
                "every geolevel down to the block published"
                if name == "standard"
                else "no block-level release; the block share reallocated to the "
                "higher levels in proportion (JASON sec. 8)"
            ),
        }


def _scenarios(
    names: list[str],
    inp: Path,
    work: Path,
    base: Budget,
    attack_base: Budget | None,
    progress: Progress,
) -> dict[str, _Scenario]:
    """The scenarios' inputs and budgets (``no_block`` coarsens the CEF to block groups)."""
    from censusdp.io.cef import read_cef

    scenes = {"standard": _Scenario(inp, read_cef(inp), base, attack_base)}
    if "no_block" in names:
        coarse = work / "cef_no_block"
        counts = coarsen_to_block_groups(inp, coarse)
        scenes["no_block"] = _Scenario(
            coarse,
            read_cef(coarse),
            no_block_budget(base),
            no_block_budget(attack_base) if attack_base is not None else None,
        )
        say(
            progress, f"no-block scenario: {counts['block_groups']} block groups as the finest unit"
        )
    return scenes


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

    def run(self, scene: _Scenario, s: str, e: float, seed: int) -> tuple[dict[str, Any], bool]:
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
        metrics = _accuracy(scene.cef, rdir / "accuracy")
        metrics.update(_risk(b, scene.cef, acc_seed, self.two_level_risk))
        if ab is not None:
            self.runner(
                scene.input, rdir / "attack", budget=ab, seed=att_seed, workers=self.workers
            )
            metrics.update(
                _attack(
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


def _run_line(run: dict[str, Any], scene: _Scenario, cached: bool) -> str:
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
    scenes: dict[str, _Scenario], work: Path, seed: int, workers: int, progress: Progress
) -> dict[str, dict[str, float]]:
    """The attack on each scenario's unprotected tables (the reference every run is beside)."""
    references: dict[str, dict[str, float]] = {}
    for s, scene in scenes.items():
        if scene.attack_budget is None:
            continue
        ref_dir = work / f"unprotected_{s}"
        m = _attack(scene.input, scene.input, ref_dir, seed=seed, workers=workers)
        references[s] = m
        shutil.rmtree(ref_dir, ignore_errors=True)
        say(progress, f"unprotected {s} tables: re-identified {m['reid.confirmed_share']:.1%}")
    return references


def _result_document(
    settings: dict[str, Any],
    config: dict[str, Any],
    scenes: dict[str, _Scenario],
    runs: list[dict[str, Any]],
    references: dict[str, dict[str, float]],
    delta: Fraction,
) -> dict[str, Any]:
    """``results.json``: the grid, the scenarios, points aggregated over seeds and fits."""
    from censusdp.evaluate import json_ready

    scen, eps_list = settings["scenarios"], settings["epsilons"]
    points = _aggregate(runs, scen, eps_list)
    return json_ready(
        {
            "command": "tradeoff census",
            "input": settings["input"],
            "input_fingerprint": config["input_fingerprint"],
            "population": int(scenes["standard"].cef.n_persons),
            "epsilons": eps_list,
            "seeds": settings["seeds"],
            "epsilon_meaning": (
                f"(epsilon, delta)-DP of everything published, delta = {float(delta):g} "
                "(CKS 2020 Cor. 13 via Budget.scaled)"
            ),
            "delta": float(delta),
            "presets": {
                "accuracy_and_risk": settings["preset"],
                "attack": settings["attack_preset"],
            },
            "scenarios": {s: scenes[s].describe(s) for s in scen},
            "priors": list(PRIORS),
            "metrics_definitions": METRICS,
            "points": points,
            "references": references,
            "frontier_fits": _fits(
                points, scen, {s: list(scenes[s].budget.geolevel_names) for s in scen}
            ),
            "runs": runs,
            "package_version": __version__,
        }
    )


def _write_results(
    result: dict[str, Any], runs: list[dict[str, Any]], settings: dict[str, Any], out: Path
) -> None:
    """``results.json``, ``runs.parquet``, ``frontier.png`` and the manifest."""
    from censusdp.evaluate import json_ready
    from censusdp.tradeoff import _plots

    write_json(result, out / "results.json")
    write_parquet(_runs_table(runs), out / "runs.parquet")
    png = _plots.census_frontier_figure(result)
    with atomic_path(out / "frontier.png") as tmp:
        tmp.write_bytes(png)
    write_json(
        json_ready(
            {
                "command": "tradeoff census",
                "config": settings,
                "seeds": settings["seeds"],
                "package_version": __version__,
                "timings": {"total": result["seconds"]},
                "outputs": ["results.json", "runs.parquet", "frontier.png", "cache/"],
            }
        ),
        out / MANIFEST_FILE,
    )


def _aggregate(
    runs: list[dict[str, Any]], scenarios: list[str], epsilons: list[float]
) -> list[dict[str, Any]]:
    points = []
    for s in scenarios:
        for e in epsilons:
            rs = [r for r in runs if r["scenario"] == s and r["epsilon"] == e]
            if not rs:
                continue
            names = sorted({k for r in rs for k in r["metrics"]})
            stats: dict[str, dict[str, Any]] = {}
            for k in names:
                vals = np.asarray(
                    [r["metrics"].get(k) for r in rs if r["metrics"].get(k) is not None],
                    dtype=float,
                )
                vals = vals[np.isfinite(vals)]
                if vals.size == 0:
                    continue
                se = float(np.std(vals, ddof=1) / math.sqrt(vals.size)) if vals.size > 1 else None
                stats[k] = {"mean": float(vals.mean()), "se": se, "values": vals.tolist()}
            points.append(
                {
                    "scenario": s,
                    "epsilon": e,
                    "rho": rs[0]["rho"],
                    "attack_rho": rs[0]["attack_rho"],
                    "seeds": [r["seed"] for r in rs],
                    "metrics": stats,
                }
            )
    return points


def _fits(
    points: list[dict[str, Any]], scenarios: list[str], geo: Mapping[str, list[str]]
) -> dict[str, dict[str, Any]]:
    """``I(eps) = -k eps^-alpha`` fitted to minus the summed squared error of total population."""
    from censusdp.tradeoff.social_choice import MeasuredFrontier

    fits: dict[str, dict[str, Any]] = {}
    for s in scenarios:
        fits[s] = {}
        for lv in geo[s]:
            key = f"accuracy.total_population.{lv}.sum_sq_error"
            pts = [
                (p["epsilon"], -p["metrics"][key]["mean"])
                for p in points
                if p["scenario"] == s and key in p["metrics"] and p["metrics"][key]["mean"] > 0
            ]
            if len(pts) < 2:
                continue
            try:
                f = MeasuredFrontier(tuple(e for e, _ in pts), tuple(q for _, q in pts))
            except ConfigError:
                continue
            fits[s][lv] = {"k": f.k, "alpha": f.alpha, "r_squared": f.r_squared, "points": len(pts)}
    return fits


def _runs_table(runs: list[dict[str, Any]]) -> pa.Table:
    cols: dict[str, list[Any]] = {
        k: [] for k in ("scenario", "epsilon", "seed", "run_seed", "rho", "metric", "value")
    }
    for r in runs:
        for k, v in sorted(r["metrics"].items()):
            cols["scenario"].append(r["scenario"])
            cols["epsilon"].append(float(r["epsilon"]))
            cols["seed"].append(int(r["seed"]))
            product_seed = r["attack_seed"] if k.startswith("reid.") else r["accuracy_seed"]
            cols["run_seed"].append(None if product_seed is None else int(product_seed))
            cols["rho"].append(float(r["attack_rho"] if k.startswith("reid.") else r["rho"]))
            cols["metric"].append(k)
            cols["value"].append(None if v is None else float(v))
    return pa.table(
        {
            "scenario": pa.array(cols["scenario"], pa.string()),
            "epsilon": pa.array(cols["epsilon"], pa.float64()),
            "seed": pa.array(cols["seed"], pa.int64()),
            "run_seed": pa.array(cols["run_seed"], pa.int64()),
            "rho": pa.array(cols["rho"], pa.float64()),
            "metric": pa.array(cols["metric"], pa.string()),
            "value": pa.array(cols["value"], pa.float64()),
        }
    )


def frontier_from_results(
    results: Mapping[str, Any],
    *,
    scenario: str = "standard",
    geolevel: str = "County",
    measure: str = "total_population",
) -> tuple[Any, int]:
    """The :class:`~censusdp.tradeoff.social_choice.MeasuredFrontier` of a census sweep.

    ``I(eps)`` is minus the summed squared error of ``measure`` over the geounits of
    ``geolevel`` (mean over seeds), fitted by ``-k eps^-alpha``.

    Returns:
        ``(frontier, number of geounits at the level)``.

    Raises:
        ConfigError: if the results lack the scenario, level or measure.
    """
    from censusdp.tradeoff.social_choice import MeasuredFrontier

    scen = results.get("scenarios", {})
    if scenario not in scen:
        raise ConfigError(f"results have no scenario {scenario!r}; present: {sorted(scen)}")
    if geolevel not in scen[scenario]["geolevels"]:
        raise ConfigError(
            f"scenario {scenario!r} has no geolevel {geolevel!r}; present: "
            f"{scen[scenario]['geolevels']}"
        )
    key = f"accuracy.{measure}.{geolevel}.sum_sq_error"
    pts = [
        (p["epsilon"], -p["metrics"][key]["mean"])
        for p in results["points"]
        if p["scenario"] == scenario and key in p["metrics"]
    ]
    if not pts:
        raise ConfigError(f"results have no metric {key!r} for scenario {scenario!r}")
    if any(q >= 0 for _, q in pts):
        raise ConfigError(
            f"{measure} at {geolevel} has zero error at some epsilon (an exact invariant?); "
            "choose a lower geolevel"
        )
    frontier = MeasuredFrontier(tuple(e for e, _ in pts), tuple(q for _, q in pts))
    return frontier, int(scen[scenario]["units"][geolevel])
