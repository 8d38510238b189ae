"""Margins of error of the *published* counts, by Approximate Monte Carlo (AMC).

A published count is TopDown's output: non-negative, integer, consistent, and not a
linear function of the measurements, so its error has no closed form. It is simulated
from the public noise law, as the Census Bureau's 2024 AMC release does for the 2020
production run (50 replicate microdata files, each the production system re-run on the
published microdata as if it were the truth): the release's microdata (its MDF, a
plausible truth that satisfies every invariant) is measured again ``K`` times with the
release's own plan, mechanism and per-geounit shares on its own spine, each set of
measurements is post-processed exactly as the release was
(:func:`censusdp.release.estimation.estimate_tables`), and every published cell's
error ``re-released - MDF`` is recorded. A cell's margin is ACS-style:
``moe90 = 1.645 rmse``, ``moe95 = 1.960 rmse``, with ``rmse`` the root mean square of
its ``K`` errors (the bias included: TopDown's non-negativity biases small counts).

Per-cell root mean squares from ``K`` draws have relative error about ``1/sqrt(2K)``
(22% at ``K = 10``); averaged over the cells of a geolevel they are much more precise,
which is what ``benchmarks/bench_infer_margins.py`` checks against the truth.

This module reads and writes nothing: :mod:`censusdp.infer.release` reads the MDF and
the budgets into an :class:`AMCPlan`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from censusdp.data.geography import Hierarchy
from censusdp.data.invariants import Invariants
from censusdp.data.schema import Schema, get_schema
from censusdp.privacy.randomness import RandomSource
from censusdp.progress import Progress, say
from censusdp.release.estimation import estimate_tables
from censusdp.release.measure import measure
from censusdp.release.options import ReleaseOptions
from censusdp.release.spine import ReleaseGeography
from censusdp.tables import TABLE_NAMES

__all__ = ["AMCPlan", "AMCResult", "amc_seeds", "simulate_margins"]


@dataclass(frozen=True, eq=False)
class AMCPlan:
    """What re-releasing a release needs (:func:`censusdp.infer.release` reads it).

    Attributes:
        schema: the person schema measured.
        person_levels: the plausible truth's person histograms, per estimation level.
        unit_levels: its housing-unit (vacant, occupied) histograms, or ``None`` when the
            release did not measure units.
        inv: the invariants (tabulation order).
        geo: the release's geography (tabulation and spine).
        plans: the person and unit measurement plans ``(geolevel, query, mechanism)``.
        shares: the person and unit per-geounit shares (spine bypass) or ``None``.
        options: the release's estimation options for
            :func:`~censusdp.release.estimation.estimate_tables` (its ``postprocess``,
            unit consistency, ``estimator`` and ``max_children``).
        truth: the plausible truth's tables (:func:`censusdp.tables.table_arrays` layout).
    """

    schema: Schema
    person_levels: list[Any]
    unit_levels: list[Any] | None
    inv: Invariants
    geo: ReleaseGeography
    plans: tuple[list[tuple[str, str, object]], list[tuple[str, str, object]] | None]
    shares: tuple[Any, Any]
    options: ReleaseOptions
    truth: dict[str, list[np.ndarray]]


@dataclass(frozen=True, eq=False)
class AMCResult:
    """Mean squared errors of the published cells over the simulations.

    Attributes:
        levels: per tabulation level, ``(units, variables)`` (P1-P5 then H1).
        districts: per district geography given, ``(districts, variables)``.
        seeds: the simulations' seeds.
    """

    levels: list[np.ndarray]
    districts: list[np.ndarray]
    seeds: list[int]


def amc_seeds(seed: int, simulations: int) -> list[int]:
    """Simulation ``k``'s seed: the ``k``-th integer of ``SeedSequence(seed)``."""
    state = np.random.SeedSequence(seed).generate_state(simulations, dtype=np.uint32)
    return [int(s) for s in state]


def _stack(tables: dict[str, list[np.ndarray]], level: int) -> np.ndarray:
    return np.concatenate(
        [np.asarray(tables[t][level], dtype=np.int64) for t in TABLE_NAMES], axis=1
    )


def _rerelease(amc: AMCPlan, seed: int, executor: object | None) -> dict[str, list[np.ndarray]]:
    """One re-release of the plausible truth (its published tables)."""
    source = RandomSource.seeded(seed)
    mh = amc.geo.estimation
    ms = measure(
        amc.person_levels,
        mh,
        amc.schema,
        amc.plans[0],
        source.child("persons"),
        unit_shares=amc.shares[0],
    )
    ums = None
    if amc.unit_levels is not None and amc.plans[1] is not None:
        ums = measure(
            amc.unit_levels,
            amc.geo.units.estimation,  # the unit run's own spine
            get_schema("units"),
            amc.plans[1],
            source.child("units"),
            unit_shares=amc.shares[1],
        )
    return estimate_tables(ms, ums, amc.inv, amc.geo, amc.options, executor)  # type: ignore[arg-type]


def simulate_margins(
    amc: AMCPlan,
    districts: Sequence[np.ndarray],
    *,
    simulations: int,
    seed: int,
    executor: object | None = None,
    progress: Progress = None,
) -> AMCResult:
    """Mean squared error of every published cell, and of every district's sums.

    Args:
        amc: the release to re-release (:class:`AMCPlan`).
        districts: per district geography, each tabulation block's district index
            (blocks in geocode order).
        simulations: ``K``.
        seed: master seed (:func:`amc_seeds`).
        executor: where TopDown's tasks run.
        progress: one line per simulation.
    """
    tab: Hierarchy = amc.geo.tabulation
    truth = [_stack(amc.truth, lv) for lv in range(tab.n_levels)]
    sq = [np.zeros(t.shape) for t in truth]
    dsq = [np.zeros((int(d.max()) + 1 if d.size else 0, truth[-1].shape[1])) for d in districts]
    seeds = amc_seeds(seed, simulations)
    for k, s in enumerate(seeds):
        tables = _rerelease(amc, s, executor)
        for lv in range(tab.n_levels):
            err = (_stack(tables, lv) - truth[lv]).astype(np.float64)
            sq[lv] += err**2
            if lv == tab.n_levels - 1:
                for d, acc in zip(districts, dsq, strict=True):
                    e = np.zeros(acc.shape)
                    np.add.at(e, d, err)
                    acc += e**2
        say(progress, f"AMC re-release {k + 1}/{simulations} (seed {s})")
    n = float(max(simulations, 1))
    return AMCResult([a / n for a in sq], [a / n for a in dsq], seeds)
