"""Error bars for users: rerun the release mechanism on known data and pool the errors.

A published count is one draw of the release mechanism. Rerunning the whole mechanism
(measurement, TopDown, rounding) ``K`` times with independent seeds on data whose truth
is known gives, for every geolevel and every size of true count, the distribution of
``error = released - true`` that a count of that size suffers (JASON 2020, sec. 6.1 used
25 such trials per configuration). Its quantiles are the error bars: "a block-group
count near 100 is within +-q90 of the truth in 90% of releases". Unlike the closed-form
standard deviation of a noisy measurement (:mod:`censusdp.evaluate.nmf`), these include
everything post-processing does (non-negativity bias, consistency, rounding).

Errors are integers, so they are pooled exactly as integer histograms (value -> count),
and quantiles are exact (inverse of the empirical CDF, the smallest ``v`` with
``F(v) >= q``).
"""

from __future__ import annotations

import logging
import math
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from censusdp.evaluate.metrics import COUNT_BINS, Pairs, bin_index, tvd
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.progress import say, task
from censusdp.release.options import Execution

__all__ = [
    "ErrorAccumulator",
    "QUANTILES",
    "budget_from_manifest",
    "integer_quantiles",
    "run_trials",
]

QUANTILES: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95)
"""Quantiles of the signed error reported per (measure, geolevel, bin); 0.05-0.95 is the 90% interval."""


def integer_quantiles(values: np.ndarray, counts: np.ndarray, qs: tuple[float, ...]) -> list[int]:
    """Exact quantiles of a histogram of integers: the smallest ``v`` with ``F(v) >= q``."""
    order = np.argsort(values)
    v = np.asarray(values)[order]
    c = np.cumsum(np.asarray(counts)[order])
    n = c[-1]
    return [int(v[np.searchsorted(c, q * n - 1e-9 * n, side="left")]) for q in qs]


class ErrorAccumulator:
    """Pools integer errors per (measure, geolevel, true-count bin) over many trials."""

    def __init__(self) -> None:
        self._hist: dict[tuple[str, str, int], dict[str, list[np.ndarray]]] = {}
        self._tvd: dict[tuple[str, str], list[float]] = {}

    def add(self, measure: str, level: str, pairs: Pairs, tvd_pairs: Pairs | None = None) -> None:
        """Add one trial's comparison of ``measure`` at ``level``."""
        e = pairs.r - pairs.t
        bins = bin_index(pairs.t)
        for b in range(len(COUNT_BINS)):
            sel = bins == b
            vals, cnts = np.unique(e[sel], return_counts=True)
            if b == 0 and pairs.n_zero:
                vals = np.concatenate([vals, [0]])
                cnts = np.concatenate([cnts, [pairs.n_zero]])
            if vals.size:
                slot = self._hist.setdefault((measure, level, b), {"v": [], "c": []})
                slot["v"].append(vals.astype(np.int64))
                slot["c"].append(cnts.astype(np.int64))
        self._tvd.setdefault((measure, level), []).append(
            tvd(tvd_pairs if tvd_pairs is not None else pairs)["tvd"]
        )

    def summary(self) -> dict[str, dict[str, Any]]:
        """``{measure: {level: {"tvd": {...}, "by_bin": {label: {...}}}}}``.

        Per bin: ``n`` (counts pooled over trials), ``quantiles`` of the signed error at
        :data:`QUANTILES`, ``interval90`` (``[q05, q95]``), ``abs_q50``/``abs_q90``/
        ``abs_q95`` of the absolute error, ``mean`` and ``sd`` of the error.
        """
        out: dict[str, dict[str, Any]] = {}
        for (measure, level), tvds in self._tvd.items():
            arr = np.asarray(tvds, dtype=np.float64)
            known = arr[~np.isnan(arr)]  # a table whose truth is empty (no GQ) has no TVD
            rec: dict[str, Any] = {
                "tvd": {
                    "trials": int(arr.size),
                    "mean": float(known.mean()) if known.size else math.nan,
                    "min": float(known.min()) if known.size else math.nan,
                    "max": float(known.max()) if known.size else math.nan,
                },
                "by_bin": {},
            }
            for b, (label, _, _) in enumerate(COUNT_BINS):
                slot = self._hist.get((measure, level, b))
                if slot is None:
                    continue
                v = np.concatenate(slot["v"])
                c = np.concatenate(slot["c"])
                uv, inv = np.unique(v, return_inverse=True)
                uc = np.bincount(inv, weights=c).astype(np.int64)
                n = int(uc.sum())
                mean = float(np.dot(uv, uc) / n)
                var = float(np.dot((uv - mean) ** 2, uc) / n)
                av, ainv = np.unique(np.abs(uv), return_inverse=True)
                ac = np.bincount(ainv, weights=uc).astype(np.int64)
                q = integer_quantiles(uv, uc, QUANTILES)
                aq = integer_quantiles(av, ac, (0.5, 0.9, 0.95))
                rec["by_bin"][label] = {
                    "n": n,
                    "mean": mean,
                    "sd": math.sqrt(var),
                    "quantiles": dict(
                        zip((f"q{int(x * 100):02d}" for x in QUANTILES), q, strict=True)
                    ),
                    "interval90": [q[0], q[-1]],
                    "abs_q50": aq[0],
                    "abs_q90": aq[1],
                    "abs_q95": aq[2],
                }
            out.setdefault(measure, {})[level] = rec
        return out


def budget_from_manifest(entry: dict[str, Any]) -> Any:
    """Rebuild a :class:`censusdp.privacy.budget.Budget` from its manifest description (``to_dict``)."""
    from censusdp.privacy.budget_config import budget_from_mapping

    mapping: dict[str, Any] = {
        "name": entry.get("name") or "from-manifest",
        "description": entry.get("description") or "",
        "schema": entry["schema"],
        "mechanism": entry["mechanism"],
        "sensitivity": entry.get("sensitivity", 1),
        "geolevels": [
            {
                "name": lv["name"],
                "length": lv["length"],
                "share": lv["share"],
                "queries": {q["query"]: q["share"] for q in lv["queries"]},
            }
            for lv in entry["geolevels"]
        ],
    }
    if entry.get("privacy_measure") == "zCDP" or entry["mechanism"] == "discrete_gaussian":
        mapping["rho"] = entry["total"]
        mapping["delta"] = entry["delta"]
    else:
        mapping["epsilon"] = entry["total"]
    return budget_from_mapping(mapping, origin="release manifest")


def run_trials(
    input_dir: str | Path,
    budget: ReleaseBudget,
    *,
    trials: int,
    seed: int,
    compare: Callable[[Path, ErrorAccumulator], None],
    postprocess: str = "topdown",
    execution: Execution | None = None,
    unit_consistency: str = "consistent",
) -> dict[str, Any]:
    """Rerun the release ``trials`` times with independent seeds and pool the errors.

    A release with a household run (unit budget on ``household2010``) is rerun as it was
    made: households first, then persons held to them unless ``unit_consistency`` is
    ``"independent"`` (its manifest's ``units_estimation``).

    Args:
        input_dir: the CEF directory (truth known).
        budget: the budgets of the release being evaluated (person and unit runs).
        trials: number of reruns ``K``.
        seed: master seed; trial ``k`` uses the ``k``-th integer drawn from
            ``SeedSequence(seed)``.
        compare: called with each trial's run directory and the accumulator; it adds
            that trial's errors.
        postprocess: passed to :func:`censusdp.release.pipeline.run_release`.
        execution: where each rerun's tasks run (passed to
            :func:`~censusdp.release.pipeline.run_release`, silent) and where the lines
            of trials done go (default: in process, silent).
        unit_consistency: how the unit run is held to the persons (``--units``).

    Returns:
        ``{"trials", "seeds", "errors": ErrorAccumulator.summary()}``.
    """
    # the engine, imported only when rerun
    from censusdp.release.options import ReleaseOptions
    from censusdp.release.pipeline import run_release

    execution = execution or Execution()
    progress = execution.progress
    quiet = replace(execution, progress=None)
    seeds = [int(s) for s in np.random.SeedSequence(seed).generate_state(trials, dtype=np.uint32)]
    acc = ErrorAccumulator()
    with (
        tempfile.TemporaryDirectory(prefix="censusdp-trials-") as tmp,
        task(progress, "evaluation trials", trials, unit="trials") as bar,
    ):
        for k, s in enumerate(seeds):
            run = Path(tmp) / f"trial{k:03d}"
            run_release(
                input_dir,
                run,
                budget,
                ReleaseOptions(seed=s, postprocess=postprocess, unit_consistency=unit_consistency),
                quiet,
            )
            compare(run, acc)
            shutil.rmtree(run, ignore_errors=True)
            say(progress, f"trial {k + 1}/{trials} (seed {s}) done", level=logging.DEBUG)
            bar.advance()
    return {"trials": trials, "seeds": seeds, "errors": acc.summary()}
