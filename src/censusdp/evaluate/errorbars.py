"""Expected errors of a release from what it publishes (``censusdp evaluate RUN``).

A user who holds only a release (no confidential data) can still say how far off its
counts are expected to be, because the noise law is public (Gong 2022, *Transparent
Privacy is Principled Privacy*): the NMF states every measurement's variance and the
manifest the whole measurement plan. :func:`expected_errors` reports, per geolevel and
per table (total population, P1-P5, H1, and a ``dhcp-2020`` release's DHC person tables;
every line of a table at every geounit, the definitions of ``censusdp evaluate``):

* **raw noisy measurements** (closed form): the error of the best single-query direct
  estimate of each line, ``sd = sqrt(r v)`` for a line made of ``r`` answer rows of a
  query of noise variance ``v`` (:func:`censusdp.infer.gls.direct_sd`);
* **GLS estimates** (closed form, :mod:`censusdp.infer`): the exact standard deviation of
  the best linear unbiased estimate of every line at every geounit; its expected RMSE
  is ``sqrt(mean sd^2)``, its expected MAE ``sqrt(2/pi) mean sd`` (the GLS error is a
  sum of many independent noises, so normal; for a single discrete Gaussian of variance
  above 1 the normal value of ``E|e|`` is exact to a fraction of a percent), and its
  intervals have half-width ``z sd``;
* **released counts** (simulation): TopDown is not linear (non-negativity, rounding), so
  its errors are simulated from the public noise law. A plausible truth is the release
  itself (an integer, non-negative histogram that satisfies every invariant): it is
  measured again with the release's own plan and mechanism (``K`` independent seeded
  draws), the measurements are post-processed again exactly as the release was
  (:func:`censusdp.release.estimation.estimate_tables`), and the re-estimated tables are
  compared with the plausible truth. Reported: mean over the ``K`` simulations of the
  MAE (and each simulation's), RMSE and bias, their Monte Carlo standard errors (sd over simulations /
  sqrt(K)), the sd of one release's MAE (how much a single release's realised MAE
  varies around its expectation), and pooled quantiles of the error (``interval90`` =
  ``[q05, q95]`` of the signed error; ``abs_q50``, ``abs_q90``, ``abs_q95`` of its size).

A release with a household run (``household2010``, ``dhch-2020``) has it re-released with
its person run: each re-release measures the released households (and a DHC release's
units by ``tenvacgq``) again with the household run's own plan and estimates them as the
release did, so H1 and the household tables get their errors too (:func:`release_measures`;
``household_run`` says how, :func:`household_run_record`).

The simulation answers "how wrong would this release be if the truth looked like it";
``docs/evaluation.md`` checks on generated states that it agrees with the errors
measured against the truth.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from censusdp.data.geography import GeoLevels, Hierarchy
from censusdp.errors import InputError, SchemaError
from censusdp.evaluate.summary import typical_errors
from censusdp.evaluate.trials import integer_quantiles
from censusdp.execution import make_executor
from censusdp.infer.amc import AMCPlan, AMCResult, simulate_margins
from censusdp.infer.gls import Z90, Z95
from censusdp.infer.options import MarginOptions
from censusdp.infer.published import published_variables
from censusdp.infer.release import amc_plan, tabulation_sds
from censusdp.io.atomic import strict_json
from censusdp.io.output_rules import MANIFEST_FILE
from censusdp.io.rundir import RunDir, read_manifest
from censusdp.progress import say
from censusdp.release.household_runs import (
    HOUSEHOLD_SCHEMA,
    household_run_tables,
    household_schema,
)
from censusdp.release.manifest import recorded_budgets
from censusdp.release.validate import require_valid
from censusdp.tables import TABLE_NAMES, release_table_names
from censusdp.version import __version__

__all__ = [
    "DEFAULT_SIMULATIONS",
    "MEASURES",
    "ErrorPool",
    "expected_errors",
    "gls_expected_errors",
    "household_run_record",
    "release_measures",
    "simulate_release_errors",
]

DEFAULT_SIMULATIONS = 10
"""Simulations of the release mechanism by default (each is one TopDown estimation)."""

MEASURES: tuple[str, ...] = ("total_population", *TABLE_NAMES)
"""What errors are reported for: total population and every P.L. table (all its lines);
a release's own are :func:`release_measures`."""

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
"""``E|Z| / sd`` for a normal error ``Z`` of mean 0."""


def _measure_arrays(
    tables: dict[str, list[np.ndarray]], measure_name: str, level: int
) -> np.ndarray:
    if measure_name == "total_population":
        return tables["P1"][level][:, :1]
    return tables[measure_name][level]


def release_measures(manifest: Mapping[str, Any]) -> tuple[str, ...]:
    """What the error bars of the release whose manifest is ``manifest`` cover: total
    population and every table its simulation re-releases, which is every table it
    publishes: P1-P5 and H1, the DHC person tables of a ``dhcp-2020`` person run, and
    the household tables of a household run."""
    person = str(manifest.get("schema") or "pl94")
    return ("total_population", *release_table_names(person, household_schema(manifest)))


def held_record(manifest: Mapping[str, Any], plan: AMCPlan) -> dict[str, Any] | None:
    """What the simulations hold fixed of a DHC release held to a P.L. 94 release
    (``--h1-from``; ``None`` for any other release): the re-releases hold the same
    counts, so the error bars of those lines are conditional on that release, zero
    given it; their error is the P.L. 94 release's own."""
    source = manifest.get("h1_source")
    if not isinstance(source, dict):
        return None
    lines = []
    if plan.inv.pl94_persons is not None:
        lines.append("P1-P5 and the total population (its persons' pl94 cross)")
    if plan.inv.h1_occupied is not None:
        lines.append("H1's occupied and vacant units")
    return {
        "release": source.get("release"),
        "held": lines,
        "note": "each re-release is held to the same P.L. 94 release, as the release was: "
        f"the error bars of {' and '.join(lines)} are conditional on it (zero given it); "
        "their error is that release's own (censusdp evaluate on it)",
    }


def household_run_record(manifest: Mapping[str, Any], plan: AMCPlan) -> dict[str, Any] | None:
    """How the simulation re-released the household run of a release (``None`` for a
    release without one): its ``schema`` and ``tables``, what was re-released
    (``re_released``), how its person run was estimated (``person_run``) and the
    plausible truth of its households (``households_truth``)."""
    schema = household_schema(manifest)
    if schema is None:
        return None
    held = ["housing units"]
    if plan.inv.gq_types is not None:
        held.append("facilities by GQ type (gq_vect)")
    if plan.inv.h1_occupied is not None:
        held.append("the P.L. 94 release's occupied units (h1_occupied)")
    tenure = plan.blocks is not None and plan.blocks.tenure is not None
    record: dict[str, Any] = {
        "schema": schema,
        "tables": list(household_run_tables(manifest)),
        "re_released": (
            "each re-release measures the plausible truth's households"
            + (" and units by tenvacgq" if tenure else "")
            + " again with the release's own household plan, budget, per-geounit shares "
            "and spine (fresh seeded noise) and estimates them as the release did, held "
            f"to the same invariants ({', '.join(held)}) and constraints"
        ),
        "households_truth": "the released households, decoded from the unit MDF",
    }
    if schema == HOUSEHOLD_SCHEMA and plan.options.unit_consistency == "consistent":
        record["person_run"] = (
            "held to the re-released households' sizes, as the release held its persons "
            "(units_estimation consistent)"
        )
    else:
        record["person_run"] = "estimated apart from the households, as the release was"
    if plan.rough:
        record["households_truth"] += f"; {plan.rough}"
    else:
        record["households_truth"] += (
            " (the rough truth moves persons between blocks, not households)"
        )
    return record


class ErrorPool:
    """Errors of ``K`` simulated releases against one plausible truth, per measure and level.

    For each ``(measure, level)`` it keeps the per-simulation MAE, MSE and bias (for the
    Monte Carlo error) and an exact integer histogram of the signed errors pooled over
    simulations (for quantiles); for total population also the pooled (truth, released)
    pairs of every level, for the typical error by size of place.
    """

    def __init__(self, levels: tuple[str, ...], measures: tuple[str, ...] = MEASURES) -> None:
        self.levels = levels
        self.measures = measures
        self._per_sim: dict[tuple[str, str], list[tuple[float, float, float, int]]] = {}
        self._hist: dict[tuple[str, str], dict[int, int]] = {}
        self._pairs: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {}

    def add(
        self, truth: dict[str, list[np.ndarray]], released: dict[str, list[np.ndarray]]
    ) -> None:
        """Add one simulated release (tables in :func:`censusdp.tables.table_arrays` layout)."""
        for mname in self.measures:
            for li, lname in enumerate(self.levels):
                t = _measure_arrays(truth, mname, li).astype(np.int64)
                r = _measure_arrays(released, mname, li).astype(np.int64)
                e = (r - t).ravel()
                n = e.size
                if n == 0:
                    continue
                self._per_sim.setdefault((mname, lname), []).append(
                    (
                        float(np.abs(e).mean()),
                        float((e.astype(np.float64) ** 2).mean()),
                        float(e.mean()),
                        n,
                    )
                )
                vals, cnts = np.unique(e, return_counts=True)
                slot = self._hist.setdefault((mname, lname), {})
                for v, c in zip(vals.tolist(), cnts.tolist(), strict=True):
                    slot[v] = slot.get(v, 0) + c
                if mname == "total_population":
                    tp, rp = self._pairs.setdefault(lname, ([], []))
                    tp.append(t.ravel())
                    rp.append(r.ravel())

    def summary(self) -> dict[str, dict[str, Any]]:
        """``{measure: {level: record}}`` (see the module docstring for the fields)."""
        out: dict[str, dict[str, Any]] = {}
        for (mname, lname), sims in self._per_sim.items():
            arr = np.asarray([s[:3] for s in sims], dtype=np.float64)
            k = arr.shape[0]
            mae, mse, bias = arr.mean(axis=0)
            sd = arr.std(axis=0, ddof=1) if k > 1 else np.full(3, math.nan)
            rmse = math.sqrt(mse)
            hist = self._hist[(mname, lname)]
            v = np.fromiter(hist.keys(), dtype=np.int64, count=len(hist))
            c = np.fromiter(hist.values(), dtype=np.int64, count=len(hist))
            q05, q50, q95 = integer_quantiles(v, c, (0.05, 0.5, 0.95))
            av, ainv = np.unique(np.abs(v), return_inverse=True)
            ac = np.bincount(ainv, weights=c).astype(np.int64)
            a50, a90, a95 = integer_quantiles(av, ac, (0.5, 0.9, 0.95))
            out.setdefault(mname, {})[lname] = {
                "counts_per_simulation": sims[0][3],
                "mae": float(mae),
                "mae_per_simulation": [float(x) for x in arr[:, 0]],
                "mae_mc_se": float(sd[0] / math.sqrt(k)),
                "mae_sd_one_release": float(sd[0]),
                "rmse": rmse,
                "rmse_mc_se": float(sd[1] / math.sqrt(k) / (2 * rmse)) if rmse > 0 else 0.0,
                "bias": float(bias),
                "bias_mc_se": float(sd[2] / math.sqrt(k)),
                "median_error": q50,
                "interval90": [q05, q95],
                "abs_q50": a50,
                "abs_q90": a90,
                "abs_q95": a95,
            }
        return out

    def by_size(self) -> dict[str, list[dict[str, Any]]]:
        """Typical error of total population by the plausible truth's size, per level.

        The quantiles pool every simulation; ``n`` is the number of places of the class
        (the plausible truth is the same in every simulation), and ``n_pooled`` the
        number of errors pooled (``n`` times the simulations).
        """
        out = {}
        for lname, (tp, rp) in self._pairs.items():
            recs = typical_errors(np.concatenate(tp), np.concatenate(rp))
            k = max(len(tp), 1)
            out[lname] = [{**r, "n": round(r["n"] / k), "n_pooled": r["n"]} for r in recs]
        return out


def _margin_record(
    amc: AMCResult, levels: tuple[str, ...], measures: tuple[str, ...]
) -> dict[str, dict[str, dict[str, float]]]:
    """Per measure and level, the margins of ``censusdp infer``'s ``margins.*`` pooled:
    ``moe90`` / ``moe95``, the root mean square of the calibrated margins of every count
    (every line at every geounit), ``moe90_plain`` the first generation's alone, and
    ``calibration`` their ratio."""
    variables = list(published_variables())
    columns: dict[str, list[int]] = {"total_population": [variables.index("P1_001N")]}
    for i, v in enumerate(variables):
        columns.setdefault(v.split("_", 1)[0], []).append(i)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for m in measures:  # the P.L. ones: infer's margins are of P1-P5 and H1
        cols = columns.get(m)
        if not cols:
            continue
        for li, lname in enumerate(levels):
            cal = float(np.mean(amc.levels[li][:, cols])) if amc.levels[li].size else 0.0
            plain = float(np.mean(amc.raw_levels[li][:, cols])) if amc.levels[li].size else 0.0
            out.setdefault(m, {})[lname] = {
                "moe90": Z90 * math.sqrt(cal),
                "moe95": Z95 * math.sqrt(cal),
                "moe90_plain": Z90 * math.sqrt(plain),
                "calibration": math.sqrt(cal / plain) if plain > 0 else 1.0,
            }
    return out


def simulate_release_errors(
    run_dir: str | Path,
    *,
    simulations: int = DEFAULT_SIMULATIONS,
    seed: int = 0,
    workers: int = 1,
    executor: str = "auto",
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Expected errors of the released (post-processed) counts, by simulation.

    The simulation is ``censusdp infer``'s AMC (:func:`censusdp.infer.release.amc_plan`,
    :func:`censusdp.infer.amc.simulate_margins`, the same seeds and its default truth):
    the plausible truth is the rough truth drawn from ``simulations`` re-releases of the
    release's MDF, re-released ``simulations`` times (``2 K`` in all; the error
    statistics are those of the rough truth's re-releases). ``margins`` holds,
    per measure and level, the root mean square of the margins ``infer`` writes for
    those counts with the same seed and ``K`` (one margin per count).

    Args:
        run_dir: a release directory.
        simulations: ``K``, the number of simulated releases (at least 2 for a Monte
            Carlo error).
        seed: master seed; simulation ``k`` uses the ``k``-th integer drawn from
            ``SeedSequence(seed)``.
        workers, executor: where TopDown's tasks run.
        progress: one line per simulation.

    Returns:
        ``{"method", "plausible_truth", "simulations", "seed", "seeds", "measures",
        "household_run" (:func:`household_run_record`), "held_to_pl94_release"
        (:func:`held_record`), "by_level": {measure: {level:
        record}}, "margins": {measure: {level: record}}, "by_size": {level: [...]}}``.

    Raises:
        InputError: for a release without a recorded budget or MDF.
    """
    if simulations < 1:
        raise InputError(f"--simulations must be at least 1, got {simulations}")
    run = Path(run_dir)
    manifest = read_manifest(run)
    recorded_budgets(manifest, str(run / MANIFEST_FILE))  # a one-line error if none
    postprocess = str(manifest.get("postprocess") or "topdown")
    if postprocess not in ("topdown", "bottomup"):
        raise InputError(
            f"{run / MANIFEST_FILE}: postprocess {postprocess!r} published no estimate to "
            "simulate (only noisy measurements)"
        )
    RunDir(run).require(
        RunDir(run).mdf_file("persons"),
        RunDir(run).mdf_file("units"),
        needed_by="the simulation of the release's counts",
    )
    plan = amc_plan(run)  # a household run re-released with the persons
    levels = tuple(plan.geo.tabulation.geolevels.names)
    measures = release_measures(manifest)
    pool = ErrorPool(levels, measures)
    ex = make_executor(workers, kind=executor)
    t0 = time.perf_counter()
    try:
        amc = simulate_margins(
            plan, [], MarginOptions(simulations=simulations, seed=seed), executor=ex,
            progress=progress, observe=pool.add,
        )  # fmt: skip
    finally:
        close = getattr(ex, "close", None)
        if close is not None:
            close()
    return {
        "method": (
            "simulation (censusdp infer's AMC): the release's own measurement plan and "
            "noise law applied to a plausible truth, then the release's post-processing "
            "re-run"
        ),
        "plausible_truth": (
            "the release's blocks deconvolved (censusdp infer's rough truth)"
            if amc.truth == "rough"
            else "the release itself (its MDF and tables)"
        ),
        "postprocess": postprocess,
        "simulations": simulations,
        "calibration_simulations": len(amc.second_seeds),
        "seed": seed,
        "seeds": amc.seeds,
        "seconds": round(time.perf_counter() - t0, 3),
        "measures": list(measures),
        "household_run": household_run_record(manifest, plan),
        "held_to_pl94_release": held_record(manifest, plan),
        "by_level": pool.summary(),
        "margins": _margin_record(amc, levels, measures),
        "by_size": pool.by_size(),
    }


def _table_of_line(line: str) -> str:
    return "total_population" if line == "total" else line.split("_", 1)[0]


def gls_expected_errors(
    run_dir: str | Path,
    *,
    workers: int = 1,
    executor: str = "auto",
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Closed-form expected errors of the GLS estimates and of the raw measurements.

    Per geolevel and measure (all lines of a table at every geounit): for GLS,
    ``rmse = sqrt(mean sd^2)``, ``mae = sqrt(2/pi) mean sd``, ``mean_sd``, and the mean
    half-widths ``z sd`` of the 90% and 95% intervals; for the raw measurements, the
    same from the best direct estimate of each line, over the lines some query
    resolves (``lines_measured`` of ``lines``).

    Returns:
        ``{"available": True, "gls": {...}, "raw": {...}}``, or ``{"available": False,
        "reason": ...}`` for a release GLS does not cover (dhc-lite).
    """
    ex = make_executor(workers, kind=executor)
    try:
        try:
            # on the published geounits (the tabulation hierarchy, whatever the spine):
            # the sds of censusdp infer's margins.parquet, one number per published count
            gls, sds = tabulation_sds(run_dir, executor=ex, progress=progress)
        except SchemaError as exc:
            return {"available": False, "reason": str(exc)}
        names = gls.hierarchy.geolevels.names
        groups: dict[str, np.ndarray] = {}
        for i, line in enumerate(gls.lines):
            groups.setdefault(_table_of_line(line), []).append(i)  # type: ignore[arg-type]
        idx = {m: np.asarray(v) for m, v in groups.items()}
        acc: dict[tuple[str, str], list[float]] = {}
        for lname, level_sd in sds.items():
            for m, cols in idx.items():
                sd = level_sd[:, cols]
                slot = acc.setdefault((m, lname), [0.0, 0.0, 0.0])
                slot[0] += float((sd * sd).sum())
                slot[1] += float(sd.sum())
                slot[2] += sd.size
    finally:
        close = getattr(ex, "close", None)
        if close is not None:
            close()
    out_gls: dict[str, dict[str, Any]] = {}
    for (m, lname), (ss, s, n) in acc.items():
        mean_sd = s / n
        out_gls.setdefault(m, {})[lname] = {
            "rmse": math.sqrt(ss / n),
            "mae": SQRT_2_OVER_PI * mean_sd,
            "mean_sd": mean_sd,
            "ci90_halfwidth": Z90 * mean_sd,
            "ci95_halfwidth": Z95 * mean_sd,
            "counts": int(n),
        }
    out_raw: dict[str, dict[str, Any]] = {}
    for level, dsd in gls.direct.items():
        lname = names[level]
        for m, cols in idx.items():
            d = dsd[cols]
            fin = d[np.isfinite(d)]
            rec: dict[str, Any] = {"lines": int(d.size), "lines_measured": int(fin.size)}
            if fin.size:
                rec.update(
                    rmse=float(np.sqrt((fin * fin).mean())),
                    mae=SQRT_2_OVER_PI * float(fin.mean()),
                    mean_sd=float(fin.mean()),
                )
            out_raw.setdefault(m, {})[lname] = rec
    return {
        "available": True,
        "gls": {
            "method": (
                "closed form: exact GLS standard deviations of every published geounit "
                "(censusdp infer's margins.parquet: the tabulation hierarchy, sums of blocks "
                "across spine geounits included); MAE = sqrt(2/pi) sd (normal error), "
                "interval half-width z sd"
            ),
            "by_level": out_gls,
        },
        "raw": {
            "method": (
                "closed form: sd of the best single noisy measurement of each line, "
                "sqrt(r v) from the NMF variances; lines no single query resolves are left out"
            ),
            "by_level": out_raw,
        },
    }


def expected_errors(
    run_dir: str | Path,
    *,
    simulations: int = DEFAULT_SIMULATIONS,
    seed: int = 0,
    workers: int = 1,
    executor: str = "auto",
    gls: bool = True,
    html_path: str | Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Expected errors of a release, from the release alone (no confidential data).

    The release is first checked as ``censusdp validate`` would (a tampered release is
    refused). Returns a JSON-ready dict: ``mode``, ``geolevels``, ``units`` (geounits
    per level), ``release_manifest`` (its privacy parameters), ``released`` (simulation,
    :func:`simulate_release_errors`), ``gls`` and ``raw`` (closed form,
    :func:`gls_expected_errors`; ``gls.available`` false with a reason where GLS does
    not apply) and ``seconds``. With ``html_path``, also the readable page
    (:mod:`censusdp.evaluate.errorbars_report`).
    """
    t0 = time.perf_counter()
    run = Path(run_dir)
    if not run.is_dir():
        raise InputError(f"release directory {str(run)!r} does not exist")
    require_valid(run, what="evaluate")
    manifest = read_manifest(run)
    geolevels = GeoLevels.from_pairs([tuple(g) for g in manifest.get("geolevels") or []])
    hierarchy: Hierarchy = RunDir(run).invariants(geolevels)[0]
    names = hierarchy.geolevels.names
    say(progress, f"expected errors of {run}: {simulations} simulated releases")
    released = simulate_release_errors(
        run,
        simulations=simulations,
        seed=seed,
        workers=workers,
        executor=executor,
        progress=progress,
    )
    result: dict[str, Any] = {
        "mode": "expected errors from the release alone (no confidential data)",
        "release": str(run.resolve()),
        "package_version": __version__,
        "geolevels": list(names),
        "units": {n: hierarchy.n_units(i) for i, n in enumerate(names)},
        "measures": released["measures"],
        "release_manifest": {
            k: manifest.get(k)
            for k in ("schema", "postprocess", "mechanism", "rho", "epsilon", "delta", "seed")
        },
        "released": released,
    }
    if gls:
        say(progress, "closed-form errors of the GLS estimates and raw measurements")
        closed = gls_expected_errors(run, workers=workers, executor=executor)
        if closed["available"]:
            result["gls"] = {"available": True, **closed["gls"]}
            result["raw"] = closed["raw"]
        else:
            result["gls"] = closed
    result["seconds"] = round(time.perf_counter() - t0, 3)
    result = strict_json(result)
    if html_path is not None:
        from censusdp.evaluate.errorbars_report import write_expected_report

        write_expected_report(result, html_path, manifest)
        say(progress, f"wrote {html_path}")
    return result
