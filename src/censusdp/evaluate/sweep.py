"""TVD against the privacy-loss budget: the shape of JASON 2020, Figures 6-1 and 6-2.

:func:`sweep` reruns the release mechanism on one input for each budget in a list and
records, per geolevel, the TVD (``1 - L1 / (2 POP)``, JASON 2020, sec. 6.1) of

* total population (one count per geounit; Fig. 6-1), and
* race x Hispanic origin (the ``hispanic*cenrace`` marginal of the MDF, 126 counts
  per geounit; Fig. 6-2).

**What "epsilon" means here.** As everywhere in censusdp, a sweep value ``epsilon`` is
the total privacy loss of what each release publishes: for a zCDP preset (discrete
Gaussian, e.g. ``pl94-2020``) the largest rho whose (epsilon, delta) guarantee at the
preset's delta is at most ``epsilon`` (Canonne, Kamath & Steinke 2020, Cor. 13); for a
pure-DP preset (``ddp-2010``) epsilon itself. The sweep's releases measure persons only.
The JASON figures come from pure-DP (geometric) runs; to compare noise scales with
them, ``epsilon_meaning="rho"`` reads a value as ``rho = epsilon^2 / 2`` instead (the
zCDP guarantee an epsilon-DP mechanism satisfies, Bun & Steinke 2016, Prop. 1.4),
which gives far larger rho (less noise). Every point records the rho and the
(epsilon, delta) it implies.

Outputs in ``out_dir``: ``sweep.json`` (everything), ``sweep.csv`` (one row per
epsilon, trial, measure and geolevel), ``sweep.png`` (the two panels) and
``manifest.json``.
"""

from __future__ import annotations

import csv
import io
import math
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from censusdp.data.geography import GeoLevels, Hierarchy
from censusdp.data.histograms import person_histogram
from censusdp.data.queries import make_query
from censusdp.data.schema import get_schema
from censusdp.errors import ConfigError
from censusdp.evaluate.metrics import Pairs, tvd
from censusdp.io.atomic import atomic_path, write_json, write_text
from censusdp.io.cef import read_cef
from censusdp.io.mdf_read import read_mdf_persons
from censusdp.io.output_rules import MANIFEST_FILE
from censusdp.io.rundir import RunDir
from censusdp.io.staging import staged_output
from censusdp.privacy.budget import Budget
from censusdp.progress import Progress, say, task
from censusdp.release.options import Execution
from censusdp.version import __version__

__all__ = ["EPSILON_MEANINGS", "SweepOptions", "budget_for_epsilon", "sweep"]

EPSILON_MEANINGS = ("rho", "cks")
"""``rho``: rho = epsilon^2 / 2 (default); ``cks``: (epsilon, delta)-DP via CKS 2020."""

SWEEP_MEASURES = ("total_population", "hispanic*cenrace")


def _check_epsilon(epsilon: float, meaning: str) -> None:
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ConfigError(f"sweep epsilon must be positive and finite, got {epsilon}")
    if meaning not in EPSILON_MEANINGS:
        raise ConfigError(f"epsilon meaning must be one of {EPSILON_MEANINGS}, got {meaning!r}")


def budget_for_epsilon(base: Budget, epsilon: float, meaning: str = "cks") -> Budget:
    """The budget ``base`` rescaled to a sweep value ``epsilon`` (see module docstring).

    Raises:
        ConfigError: for a non-positive epsilon or an unknown ``meaning``.
    """
    _check_epsilon(epsilon, meaning)
    if base.privacy_measure != "zCDP":
        return base.scaled(epsilon=str(epsilon))
    if meaning == "rho":
        from fractions import Fraction

        e = Fraction(str(epsilon))
        return base.scaled(rho=e * e / 2)
    return base.scaled(epsilon=str(epsilon))


def _tvd_by_level(
    truth_levels: list[Any], mdf_hist: Any, h: Hierarchy, q: Any
) -> dict[str, dict[str, float]]:
    r_levels = h.aggregate(mdf_hist)
    out: dict[str, dict[str, float]] = {m: {} for m in SWEEP_MEASURES}
    for li, lname in enumerate(h.geolevels.names):
        t, r = truth_levels[li], r_levels[li]
        tp = np.asarray(t.sum(axis=1)).ravel()
        rp = np.asarray(r.sum(axis=1)).ravel()
        out["total_population"][lname] = tvd(Pairs.dense(tp, rp))["tvd"]
        out["hispanic*cenrace"][lname] = tvd(Pairs.sparse(t @ q, r @ q))["tvd"]
    return out


@dataclass(frozen=True)
class SweepOptions:
    """What a sweep runs, checked once.

    Attributes:
        epsilons: the sweep values (see the module docstring for their meaning).
        preset: budget preset whose shares are rescaled.
        config: a budget TOML file to rescale instead of the preset.
        budget: a :class:`censusdp.privacy.budget.Budget` to rescale (overrides both).
        trials: reruns per epsilon (independent seeds); the TVD mean, min and max
            are reported.
        seed: master seed; run seeds are drawn from ``SeedSequence(seed)``.
        postprocess: passed to :func:`censusdp.release.pipeline.run_release`.
        epsilon_meaning: ``"cks"`` (default) or ``"rho"`` (:data:`EPSILON_MEANINGS`).

    Raises:
        ConfigError: on construction, for an empty epsilon list, an epsilon that is not
            positive and finite, an unknown ``epsilon_meaning`` or ``trials < 1``.
    """

    epsilons: Sequence[float]
    preset: str = "pl94-2020"
    config: str | Path | None = None
    budget: Budget | None = None
    trials: int = 1
    seed: int = 0
    postprocess: str = "topdown"
    epsilon_meaning: str = "cks"

    def __post_init__(self) -> None:
        eps = tuple(float(e) for e in self.epsilons)
        if not eps:
            raise ConfigError("--epsilons needs at least one value")
        if self.trials < 1:
            raise ConfigError(f"--trials must be >= 1, got {self.trials}")
        for e in eps:
            _check_epsilon(e, self.epsilon_meaning)
        object.__setattr__(self, "epsilons", eps)


def sweep(
    input_dir: str | Path,
    options: SweepOptions,
    *,
    out_dir: str | Path,
    execution: Execution | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Run the release for each epsilon (``options.trials`` times) and record TVD by geolevel.

    Args:
        input_dir: CEF directory (``persons.parquet``, ``units.parquet``).
        options: the epsilons, the budget they rescale, the trials and their seed.
        out_dir: where ``sweep.json``, ``sweep.csv``, ``sweep.png`` and
            ``manifest.json`` go.
        execution: where each release's tasks run (its workers) and where progress
            lines go (default: in process, silent).
        overwrite: replace an earlier output of this command at ``out_dir``.

    Returns:
        The sweep result (also written to ``out_dir/sweep.json``).
    """
    from censusdp.evaluate.core import json_ready
    from censusdp.io.budget_files import resolve_budget

    execution = execution or Execution()
    progress = execution.progress
    eps_list = list(options.epsilons)
    trials, seed, postprocess = options.trials, options.seed, options.postprocess
    epsilon_meaning, config = options.epsilon_meaning, options.config
    budget = options.budget
    base = budget if budget is not None else resolve_budget(preset=options.preset, config=config)
    budgets = [budget_for_epsilon(base, e, epsilon_meaning) for e in eps_list]
    t0 = time.perf_counter()
    with staged_output(out_dir, overwrite, [input_dir, config], command="sweep") as staging:
        out = staging.path

        geolevels = GeoLevels.from_pairs(list(base.geolevels))
        truth = _SweepTruth.read(input_dir, geolevels)
        seeds = np.random.SeedSequence(seed).generate_state(len(eps_list) * trials, dtype=np.uint32)
        seeds = seeds.reshape(len(eps_list), trials)

        runner = _TrialRunner(input_dir, truth, postprocess, replace(execution, progress=None))
        points, csv_rows = _sweep_points(out, eps_list, budgets, seeds, runner, progress)

        meaning = (
            "rho = epsilon^2/2"
            if base.privacy_measure == "zCDP" and epsilon_meaning == "rho"
            else ("(epsilon, delta)-DP via CKS" if base.privacy_measure == "zCDP" else "pure DP")
        )
        result: dict[str, Any] = json_ready(
            {
                "preset": base.name,
                "schema": base.schema,
                "mechanism": base.mechanism,
                "epsilon_meaning": meaning,
                "trials": trials,
                "seed": seed,
                "postprocess": postprocess,
                "geolevels": list(geolevels.names),
                "measures": list(SWEEP_MEASURES),
                "points": points,
            }
        )
        config_record = {
            "input": str(Path(input_dir).resolve()),
            "epsilons": eps_list,
            "preset": base.name,
            "trials": trials,
            "postprocess": postprocess,
            "workers": execution.workers,
            "epsilon_meaning": epsilon_meaning,
        }
        _write_sweep(out, result, csv_rows, config_record, t0)
        say(progress, f"wrote {staging.out_dir / 'sweep.json'}, sweep.csv and sweep.png")
        return result


@dataclass(frozen=True)
class _SweepTruth:
    """The true PL94 histograms every trial is compared with, and what comparing needs.

    Attributes:
        h: the hierarchy of the CEF's blocks.
        q: the hispanic*cenrace query as a (cells x 126) integer matrix.
        levels: the true detailed histograms, one per geolevel.
    """

    h: Hierarchy
    q: Any
    levels: list[Any]

    @classmethod
    def read(cls, input_dir: str | Path, geolevels: GeoLevels) -> _SweepTruth:
        """Read the CEF; its hierarchy, the hispanic*cenrace query and the true histograms."""
        cef = read_cef(input_dir)
        h = Hierarchy.from_blocks(
            np.concatenate([cef.persons["geocode"], cef.units["geocode"]]), geolevels
        )
        schema = get_schema("pl94")
        q = make_query(schema, "hispanic*cenrace").matrix.T.tocsr().astype(np.int64)
        cols = {c: cef.persons[c] for c in ("geocode", "hhgq", "age", "hispanic", "cenrace")}
        return cls(h, q, h.aggregate(person_histogram(cols, h)))


@dataclass(frozen=True)
class _TrialRunner:
    """How each trial of a sweep is run and scored: its input, truth, post-processing
    and where the release's tasks run (silent)."""

    input_dir: str | Path
    truth: _SweepTruth
    postprocess: str
    execution: Execution

    def tvd(self, run_prefix: Path, k: int, b: Budget, seed: int) -> dict[str, dict[str, float]]:
        """Run one release into a scratch directory, score its MDF by TVD, remove the run."""
        from censusdp.privacy.release_budget import ReleaseBudget
        from censusdp.release.options import ReleaseOptions
        from censusdp.release.pipeline import run_release

        truth = self.truth
        run = run_prefix.parent / f"{run_prefix.name}_trial{k:03d}"
        run_release(
            self.input_dir,
            run,
            ReleaseBudget(b),
            ReleaseOptions(seed=seed, postprocess=self.postprocess),
            self.execution,
        )
        mdf = read_mdf_persons(RunDir(run).mdf_file("persons"))
        mcols = {c: mdf[c] for c in ("geocode", "hhgq", "votingage", "hispanic", "cenrace")}
        tv = _tvd_by_level(truth.levels, person_histogram(mcols, truth.h), truth.h, truth.q)
        shutil.rmtree(run, ignore_errors=True)
        return tv


def _sweep_points(
    out: Path,
    eps_list: list[float],
    budgets: list[Budget],
    seeds: np.ndarray,
    runner: _TrialRunner,
    progress: Progress,
) -> tuple[list[dict[str, Any]], list[list[Any]]]:
    """Run every trial of every epsilon in a scratch directory under ``out``.

    Returns:
        The sweep's points and the rows of ``sweep.csv``.
    """
    level_names = runner.truth.h.geolevels.names
    points = []
    csv_rows: list[list[Any]] = []
    with (
        tempfile.TemporaryDirectory(prefix=".sweep-", dir=out) as tmp,
        task(progress, "sweep", int(seeds.size), unit="releases", summary=False) as bar,
    ):
        for i, (eps, b) in enumerate(zip(eps_list, budgets, strict=True)):
            t_point = time.perf_counter()
            run_prefix = Path(tmp) / f"eps{i:02d}"
            per_trial = []
            for k, s in enumerate(seeds[i]):
                per_trial.append(runner.tvd(run_prefix, k, b, int(s)))
                bar.advance()
            for k, tv in enumerate(per_trial):
                for m in SWEEP_MEASURES:
                    for lname, v in tv[m].items():
                        csv_rows.append([eps, float(b.rho), k, int(seeds[i, k]), m, lname, v])
            summary = _summarise_trials(per_trial, level_names)
            points.append(_sweep_point(eps, b, seeds[i], time.perf_counter() - t_point, summary))
            tp = summary["total_population"]
            say(
                progress,
                f"epsilon {eps:g} (rho {float(b.rho):.4g}): accuracy (1 - TVD) of total population "
                + ", ".join(f"{lv} {tp[lv]['mean']:.4f}" for lv in level_names[1:]),
            )
    return points, csv_rows


def _summarise_trials(
    per_trial: list[dict[str, dict[str, float]]], level_names: Sequence[str]
) -> dict[str, dict[str, dict[str, Any]]]:
    """Mean, min, max and all values of each measure's TVD per geolevel over the trials."""
    summary: dict[str, dict[str, dict[str, Any]]] = {}
    for m in SWEEP_MEASURES:
        summary[m] = {}
        for lname in level_names:
            vals = np.asarray([t[m][lname] for t in per_trial], dtype=float)
            summary[m][lname] = {
                "mean": float(np.mean(vals)),
                "min": float(np.min(vals)),
                "max": float(np.max(vals)),
                "values": vals.tolist(),
            }
    return summary


def _sweep_point(
    eps: float,
    b: Budget,
    seeds: np.ndarray,
    seconds: float,
    summary: dict[str, dict[str, dict[str, Any]]],
) -> dict[str, Any]:
    """One point of the sweep: its privacy parameters, seeds, time and TVD summary."""
    eps_dp = b.epsilon() if b.privacy_measure == "zCDP" else float(b.total)
    return {
        "epsilon": eps,
        "rho": float(b.rho),
        "rho_exact": str(b.rho),
        "epsilon_dp": float(eps_dp),
        "delta": float(b.delta) if b.privacy_measure == "zCDP" else 0.0,
        "seeds": [int(s) for s in seeds],
        "seconds": round(seconds, 3),
        "tvd": summary,
    }


def _write_sweep(
    out: Path,
    result: dict[str, Any],
    csv_rows: list[list[Any]],
    config_record: dict[str, Any],
    t0: float,
) -> None:
    """Write ``sweep.json``, ``sweep.csv``, ``sweep.png`` and ``manifest.json``."""
    from censusdp.evaluate.report import sweep_figure

    write_json(result, out / "sweep.json")
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["epsilon", "rho", "trial", "seed", "measure", "geolevel", "tvd"])
    w.writerows(csv_rows)
    write_text(buf.getvalue(), out / "sweep.csv")
    png = sweep_figure(result)
    with atomic_path(out / "sweep.png") as tmp_png:
        tmp_png.write_bytes(png)
    write_json(
        {
            "command": "sweep",
            "config": config_record,
            "seed": result["seed"],
            "package_version": __version__,
            "timings": {"total": round(time.perf_counter() - t0, 3)},
            "outputs": ["sweep.json", "sweep.csv", "sweep.png"],
        },
        out / MANIFEST_FILE,
    )
