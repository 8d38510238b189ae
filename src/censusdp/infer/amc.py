"""Margins of error of the *published* counts, by Approximate Monte Carlo (AMC).

A published count is TopDown's output: non-negative, integer, consistent, and not a
linear function of the measurements, so its error has no closed form. It is simulated
from the public noise law, as the Census Bureau's 2024 AMC release does for the 2020
production run (50 replicate microdata files, each the production system re-run on the
published microdata as if it were the truth; Ashmead et al. 2025, arXiv:2503.19714): the
release's microdata (its MDF, a plausible truth that satisfies every invariant) is
measured again ``K`` times with the release's own plan, mechanism and per-geounit shares
on its own spine, each set of measurements is post-processed exactly as the release was
(:func:`censusdp.release.estimation.estimate_histograms`), and every published cell's
error ``re-released - MDF`` is recorded. Its mean square over the ``K`` draws is an
unbiased estimate of the cell's mean squared error *if the truth were the MDF* (the
error is measured against a known truth, so no ``K - 1`` correction applies; the bias
that non-negativity gives small counts is included).

**The MDF is not the truth, and it is smoother.** TopDown moves people out of populous
blocks into nearly empty ones (non-negativity pushes the small cells up, the exact
totals take it back from the large ones), so its output has fewer empty and fewer large
blocks than the truth, and re-releasing it disturbs small areas less than releasing the
truth did: measured on generated states (docs/inference.md), the plain AMC margin is
15-25% short at block groups and blocks and right at counties and tracts.
``truth="rough"`` (the default) re-releases a rougher plausible truth instead
(:func:`rough_truth`, :mod:`censusdp.infer._rough`): the first generation, ``K``
re-releases of the MDF, shows the law that maps a block's size, and a cell's count, to
its released one; the MDF's block sizes and then its household cells, deconvolved by
it, are drawn as the plausible truth's (block groups' totals and the invariants kept:
the empty blocks come back, and the small cells TopDown removes from populous blocks),
and that truth is re-released ``K`` more times for the margins (the first generation
is kept as ``raw_levels``: the plain AMC). On generated Vermont (30%, two seeds) it
moves the predicted / actual RMSE of the total population from 0.80 to 0.84 at block
groups and 0.78 to 0.89 at blocks, voting-age 0.83 to 0.91 and 0.85 to 0.94.
``truth="release"`` is the plain AMC alone, at half the cost.

``calibration > 0`` (with ``truth="release"``) tests the iterated bootstrap's remedy
(Hall 1986; Beran 1987): the first replicate,
taken as the truth, is re-released ``K2`` times, and with ``b`` the AMC's root mean
square error and ``c`` the second generation's, the model "each generation shrinks the
error by the same factor" (``b = lambda a``, ``c = lambda b``) gives the release's
``a = b (b / c)``. The factor ``b / c`` is estimated per tabulation level (and per place
level and district geography) and per variable, pooled over the geounits
(``sqrt(sum mse_b / sum mse_c)``; 1 where either is 0: exact counts stay exact), and the
margins are multiplied by it; the raw mean squares and the factors are kept
(:class:`AMCResult`). On generated Vermont ``b / c`` is about 1 (0.96-1.02 at block
groups and blocks): one pass of TopDown smooths the truth and a second pass does not
smooth it further, so the model does not hold and the calibration is off by default.

Per-cell root mean squares from ``K`` draws have relative error about ``1/sqrt(2K)``
(22% at ``K = 10``); averaged over the cells of a geolevel they are much more precise,
which is what ``benchmarks/bench_infer_margins.py`` checks against the truth.

This module reads and writes nothing: :mod:`censusdp.infer.release` reads the MDF and
the budgets into an :class:`AMCPlan` (:func:`amc_plan`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from censusdp.data.histograms import pl94_map
from censusdp.data.invariants import Invariants
from censusdp.data.measurements import measured_rows
from censusdp.data.queries import make_query
from censusdp.data.schema import Schema, get_schema, unit_schema_of
from censusdp.errors import ConfigError, InternalError
from censusdp.infer._rough import roughen_blocks
from censusdp.infer.options import AMC_TRUTHS, MarginOptions
from censusdp.privacy.randomness import RandomSource
from censusdp.progress import Progress, say
from censusdp.release.estimation import ReleasedBlocks, estimate_histograms
from censusdp.release.measure import measure, plan_by_histogram
from censusdp.release.options import ReleaseOptions
from censusdp.release.spine import ReleaseGeography
from censusdp.tables import (
    TABLE_NAMES,
    household_table_arrays,
    release_table_names,
    table_arrays,
)
from censusdp.tables.dhc import dhc_person_table_arrays

__all__ = [
    "HELD_TO_HOUSEHOLDS",
    "AMCPlan",
    "AMCResult",
    "Observer",
    "amc_seeds",
    "calibration_factors",
    "TRUTHS",
    "plausible_truth",
    "released_tables",
    "require_affordable",
    "rerelease_measurements",
    "rerelease_values",
    "rough_truth",
    "simulate_margins",
    "simulation_memory",
]

HELD_TO_HOUSEHOLDS = (
    "the release held its persons to its households' sizes, and so does each re-release: "
    "the rough truth, which moves persons between blocks, would no longer fit the "
    "households, so the release itself (its MDF) is re-released"
)
"""Why a DDP household release held consistent is re-released from its MDF alone
(:attr:`AMCPlan.rough`)."""

BYTES_PER_VALUE = 24
"""Bytes a noisy value takes while it is measured: its exact answer, its noise, itself."""


@dataclass(frozen=True, eq=False)
class AMCPlan:
    """What re-releasing a release needs (:func:`censusdp.infer.release` reads it).

    Attributes:
        schema: the person schema measured.
        person_levels: the plausible truth's person histograms, per estimation level.
        unit_levels: its unit run's histograms per estimation level of the unit run's
            hierarchy, by the schema of each histogram the run measures (``units``: the
            (vacant, occupied) units; a household run's ``household2010`` or
            ``dhch-2020`` households, and beside the latter the ``dhc-units-2020`` units
            by ``tenvacgq``), or ``None`` when the release did not measure units.
        inv: the invariants (tabulation order).
        geo: the release's geography (tabulation and spine).
        plans: the person and unit measurement plans ``(geolevel, query, mechanism)``.
        shares: the person and unit per-geounit shares (spine bypass) or ``None``.
        options: the release's estimation options for
            :func:`~censusdp.release.estimation.estimate_histograms` (its
            ``postprocess``, unit consistency, ``estimator``, ``max_children`` and
            ``fidelity``).
        truth: the plausible truth's tables (:func:`censusdp.tables.table_arrays` layout,
            and a household run's tables: :func:`released_tables`).
        blocks: its block histograms, what :func:`rough_truth` moves; ``None``: not kept.
        unit_schema: the schema of the unit run (``units``, ``household2010``,
            ``dhch-2020``).
        rough: why the rough truth is not drawn for this release (``""``: it is, when
            asked): a release that held its persons to its households' sizes is
            re-released from its own MDF, whose persons fit its households.
    """

    schema: Schema
    person_levels: list[Any]
    unit_levels: dict[str, list[Any]] | None
    inv: Invariants
    geo: ReleaseGeography
    plans: tuple[list[tuple[str, str, object]], list[tuple[str, str, object]] | None]
    shares: tuple[Any, Any]
    options: ReleaseOptions
    truth: dict[str, list[np.ndarray]]
    blocks: ReleasedBlocks | None = None
    unit_schema: str = "units"
    rough: str = ""


def released_tables(
    schema: Schema, blocks: ReleasedBlocks, geo: ReleaseGeography
) -> dict[str, list[np.ndarray]]:
    """The tables of released block histograms on the tabulation's blocks: P1-P5 and H1,
    the DHC person tables of a ``dhcp-2020`` person run (``schema``), and a household
    run's household tables (:func:`censusdp.tables.household_table_arrays`), in
    :func:`censusdp.tables.table_arrays` layout."""
    out = table_arrays(blocks.pl94, blocks.units, geo.tabulation)
    person_tables = tuple(t for t in release_table_names(schema.name) if t not in TABLE_NAMES)
    if person_tables:
        out.update(dhc_person_table_arrays(blocks.persons, geo.tabulation, person_tables))
    if blocks.households is not None:
        out.update(household_table_arrays(blocks.households, blocks.tenure, geo.tabulation))
    return out


def _unit_histograms(amc: AMCPlan, blocks: ReleasedBlocks) -> dict[str, Any]:
    """The block histograms the unit run of ``amc`` measures, by schema, on the
    tabulation's blocks."""
    if blocks.households is None:
        return {"units": sp.csr_matrix(blocks.units)[:, :2]}  # vacant, occupied
    out = {amc.unit_schema: blocks.households}
    if blocks.tenure is not None:
        beside = unit_schema_of(amc.unit_schema)
        assert beside is not None  # a run with a unit histogram has its schema
        out[beside.name] = blocks.tenure
    return out


def plausible_truth(amc: AMCPlan, blocks: ReleasedBlocks) -> AMCPlan:
    """``amc`` with another plausible truth: released block histograms on the
    tabulation's blocks, as :func:`censusdp.release.estimation.estimate_histograms`
    returns them and a release's MDF is read back."""
    geo = amc.geo
    mh = geo.estimation
    unit_levels = None
    if amc.plans[1] is not None:  # the unit run on its own spine
        uh = geo.units.estimation
        unit_levels = {
            name: uh.aggregate(geo.units.to_estimation(sp.csr_matrix(h, dtype=np.int64)))
            for name, h in _unit_histograms(amc, blocks).items()
        }
    return dataclasses.replace(
        amc,
        person_levels=mh.aggregate(geo.to_estimation(sp.csr_matrix(blocks.persons))),
        unit_levels=unit_levels,
        truth=released_tables(amc.schema, blocks, geo),
        blocks=blocks,
    )


def rough_truth(
    amc: AMCPlan, released: np.ndarray, seed: int, released_cells: list[Any] | None = None
) -> AMCPlan:
    """``amc`` with the rough plausible truth (:mod:`censusdp.infer._rough`): its blocks'
    household persons moved to sizes deconvolved by the law that ``released``, the block
    totals of re-releases of ``amc``'s truth, show, and (with ``released_cells``, those
    re-releases' block histograms in the measured schema) their household cells
    deconvolved cell by cell; block groups' totals, group quarters and invariants kept.
    A block's occupied housing units are held to its new household persons (at most one
    per person, at least one when it has persons and housing units), its housing units
    kept; a household run's households (and so its occupied units) are kept as they
    are: its run is estimated apart from the persons (``amc.rough`` is empty).

    Raises:
        InternalError: for a plan without block histograms or schema without ``hhgq``
            (an attribute, or a recode: ``dhcp-2020``'s of ``relgq``).
    """
    variables = {*amc.schema.attribute_names, *(r.name for r in amc.schema.recodes)}
    if amc.blocks is None or "hhgq" not in variables:
        raise InternalError("rough_truth needs the truth's block histograms and an hhgq schema")
    blocks = amc.blocks
    person, units = (sp.csr_matrix(m, dtype=np.int64) for m in (blocks.persons, blocks.units))
    tab = amc.geo.tabulation
    households = amc.schema.cell_levels("hhgq") == 0
    housing = np.asarray(units[:, :2].sum(axis=1)).ravel()
    group = tab.ancestor_index(max(tab.n_levels - 2, 0))
    rough, hh = roughen_blocks(person, households, housing, group, released, seed, released_cells)
    if amc.schema.name == "pl94":
        rough_pl94 = rough
    else:  # a richer schema: its pl94 view from the same persons
        rough_pl94 = sp.csr_matrix(rough @ pl94_map(amc.schema), dtype=np.int64)
    if blocks.households is None:
        occupied = np.asarray(units[:, 1].toarray()).ravel()
        occupied = np.minimum(occupied, hh)
        occupied = np.where((hh > 0) & (occupied == 0) & (housing > 0), 1, occupied)
        dense = units.toarray()
        dense[:, 0], dense[:, 1] = housing - occupied, occupied
        units = sp.csr_matrix(dense)
    return plausible_truth(
        amc, dataclasses.replace(blocks, persons=rough, pl94=rough_pl94, units=units)
    )


@dataclass(frozen=True, eq=False)
class AMCResult:
    """Mean squared errors of the published cells over the simulations, calibrated.

    Attributes:
        levels: per tabulation level, ``(units, variables)`` (P1-P5 then H1): the
            mean squared error of the margins (the rough truth's re-releases; with the
            release's own truth, ``raw_levels`` times ``factors`` squared).
        districts: per district geography given, ``(districts, variables)``, likewise.
        seeds: the first generation's seeds (re-releases of the MDF).
        second_seeds: the second generation's (re-releases of the first replicate);
            empty: no calibration (every factor 1).
        raw_levels, raw_districts: the plain AMC mean squares (first generation).
        factors, district_factors: per level (per district geography), ``(variables,)``
            calibration factors ``b / c`` of the root mean square error.
        truth: the plausible truth of ``levels`` (:data:`TRUTHS`).
        rough_seeds: the rough truth's re-releases' seeds, then the seed of its draw
            (``truth == "rough"``; else empty).
        rough_sizes: the rough truth's block sizes (persons; ``None`` without it).
    """

    levels: list[np.ndarray]
    districts: list[np.ndarray]
    seeds: list[int]
    second_seeds: list[int] = dataclasses.field(default_factory=list)
    raw_levels: list[np.ndarray] = dataclasses.field(default_factory=list)
    raw_districts: list[np.ndarray] = dataclasses.field(default_factory=list)
    factors: list[np.ndarray] = dataclasses.field(default_factory=list)
    district_factors: list[np.ndarray] = dataclasses.field(default_factory=list)
    truth: str = "release"
    rough_seeds: list[int] = dataclasses.field(default_factory=list)
    rough_sizes: np.ndarray | None = None


TRUTHS = AMC_TRUTHS
"""The AMC's plausible truths: ``rough``, the release's block sizes and cells deconvolved
by the law its own re-releases show (:func:`rough_truth`; the default), and ``release``,
the MDF as published (the Census Bureau's AMC; the margins run short at small areas)."""


def _values(schema: Schema, hierarchy: Any, plan: list[tuple[str, str, object]]) -> int:
    """The noisy values ``plan`` measures on ``schema``'s histogram: every query's
    measured rows at every geounit of its level of ``hierarchy``."""
    names = list(hierarchy.geolevels.names)
    rows = {q: measured_rows(schema, make_query(schema, q)).size for q in {q for _, q, _ in plan}}
    return sum(hierarchy.n_units(names.index(level)) * rows[q] for level, q, _ in plan)


def rerelease_values(amc: AMCPlan) -> dict[str, int]:
    """The noisy values one re-release of ``amc`` holds at once, by run: ``persons``,
    and ``units`` (its unit run's, a household run's households and units included)
    when it measured units."""
    out = {"persons": _values(amc.schema, amc.geo.estimation, amc.plans[0])}
    if amc.plans[1] is not None:
        run = get_schema(amc.unit_schema)
        out["units"] = sum(
            _values(get_schema(name), amc.geo.units.estimation, plan)
            for name, plan in plan_by_histogram(run, amc.plans[1]).items()
        )
    return out


def simulation_memory() -> int:
    """The most memory one re-release's measurements may take (bytes): half this
    machine's. They are held at once (:func:`censusdp.release.measure.measure`), so a
    ``dhcp-2020`` person run's 905,184 live ``detailed`` rows at every geounit, and a
    ``dhch-2020`` household run's, are what limit its simulation."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (AttributeError, OSError, ValueError):  # not a POSIX system: a laptop's half
        return 8 * 1024**3


def require_affordable(amc: AMCPlan, where: object, limit: int | None = None) -> None:
    """Refuse, before any re-release, a simulation whose measurements (the person run's
    and the unit run's, a household run's included) would take more than ``limit``
    bytes (default :func:`simulation_memory`).

    Raises:
        ConfigError: ``RUN: one re-release of its dhcp-2020 person run and dhch-2020
            household run holds 2,500,000,000 noisy values (56 GB) ...``, saying what
            reduces it.
    """
    limit = simulation_memory() if limit is None else limit
    by_run = rerelease_values(amc)
    values = sum(by_run.values())
    need = values * BYTES_PER_VALUE
    if need > limit:
        runs = f"{amc.schema.name} person run"
        if "units" in by_run:
            kind = "unit" if amc.unit_schema == "units" else "household"
            runs += (
                f" ({by_run['persons']:,}) and {amc.unit_schema} {kind} run ({by_run['units']:,})"
            )
        raise ConfigError(
            f"{where}: one re-release of its {runs} holds {values:,} "
            f"noisy values ({need / 1024**3:.1f} GB) at once, more than half this "
            f"machine's memory ({limit / 1024**3:.1f} GB): no simulated error bars at this "
            "size (--simulations sets how many re-releases, not their size; a release of "
            "fewer blocks, or on a schema of fewer cells, fits)"
        )


def amc_seeds(seed: int, simulations: int) -> list[int]:
    """Simulation ``k``'s seed: the ``k``-th integer of ``SeedSequence(seed)`` (the
    second generation's follow the first's: ``amc_seeds(seed, K + K2)[K:]``, and so do
    the rough truth's re-releases and its draw: ``amc_seeds(seed, 2 K + 1)[K:]``)."""
    state = np.random.SeedSequence(seed).generate_state(simulations, dtype=np.uint32)
    return [int(s) for s in state]


def _stack(tables: dict[str, list[np.ndarray]], level: int) -> np.ndarray:
    return np.concatenate(
        [np.asarray(tables[t][level], dtype=np.int64) for t in TABLE_NAMES], axis=1
    )


def rerelease_measurements(amc: AMCPlan, seed: int) -> tuple[Any, dict[str, Any]]:
    """The noisy measurements of one re-release of the plausible truth: the person
    run's, and the unit run's by the schema of each histogram it measures (a household
    run's households, and beside a DHC run's its units by ``tenvacgq``), each with the
    release's own plan and per-geounit shares. Each run draws from its own child of
    ``RandomSource.seeded(seed)``, and a histogram measured beside a run's main one from
    ``run+schema``'s, as a release's measuring does."""
    source = RandomSource.seeded(seed)
    persons = measure(
        amc.person_levels,
        amc.geo.estimation,
        amc.schema,
        amc.plans[0],
        source.child("persons"),
        unit_shares=amc.shares[0],
    )
    units: dict[str, Any] = {}
    if amc.unit_levels is not None and amc.plans[1] is not None:
        run = get_schema(amc.unit_schema)
        for name, plan in plan_by_histogram(run, amc.plans[1]).items():
            units[name] = measure(
                amc.unit_levels[name],
                amc.geo.units.estimation,  # the unit run's own spine
                get_schema(name),
                plan,
                source.child("units" if name == run.name else f"units+{name}"),
                unit_shares=amc.shares[1],
            )
    return persons, units


def _rerelease(amc: AMCPlan, seed: int, executor: object | None) -> ReleasedBlocks:
    """One re-release of the plausible truth: its released block histograms."""
    persons, units = rerelease_measurements(amc, seed)
    main = units.pop(amc.unit_schema, None)
    beside = next(iter(units.values()), None)  # a DHC household run's tenvacgq
    return estimate_histograms(
        persons,
        main,
        amc.inv,
        amc.geo,
        amc.options,
        executor,
        beside,  # type: ignore[arg-type]
    )


@dataclass(eq=False)
class _SquaredErrors:
    """Sums of squared errors of one generation: per level and per district geography."""

    levels: list[np.ndarray]
    districts: list[np.ndarray]
    draws: int = 0
    block_totals: list[np.ndarray] = dataclasses.field(default_factory=list)
    block_hists: list[Any] = dataclasses.field(default_factory=list)

    @classmethod
    def zeros(cls, truth: list[np.ndarray], districts: Sequence[np.ndarray]) -> _SquaredErrors:
        width = truth[-1].shape[1]
        sizes = [int(d.max()) + 1 if d.size else 0 for d in districts]
        return cls([np.zeros(t.shape) for t in truth], [np.zeros((n, width)) for n in sizes])

    def add(
        self,
        tables: dict[str, list[np.ndarray]],
        truth: list[np.ndarray],
        districts: Sequence[np.ndarray],
    ) -> None:
        for lv, t in enumerate(truth):
            err = (_stack(tables, lv) - t).astype(np.float64)
            self.levels[lv] += err**2
            if lv == len(truth) - 1:
                for d, acc in zip(districts, self.districts, strict=True):
                    e = np.zeros(acc.shape)
                    keep = d >= 0  # a place-level entity need not hold every block
                    np.add.at(e, d[keep], err[keep])
                    acc += e**2
        self.draws += 1

    def mean(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        n = float(max(self.draws, 1))
        return [a / n for a in self.levels], [a / n for a in self.districts]


def calibration_factors(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Per variable (column), ``b / c = sqrt(sum first / sum second)`` over the geounits
    (rows) of two generations' mean squared errors; 1 where either sum is 0."""
    b, c = np.asarray(first).sum(axis=0), np.asarray(second).sum(axis=0)
    ok = (b > 0) & (c > 0)
    return np.where(ok, np.sqrt(np.where(ok, b, 1.0) / np.where(ok, c, 1.0)), 1.0)


Observer = Callable[[dict[str, list[np.ndarray]], dict[str, list[np.ndarray]]], None]
"""Called with (plausible truth, re-released) tables of each first-generation replicate."""


def _generation(
    amc: AMCPlan,
    districts: Sequence[np.ndarray],
    seeds: Sequence[int],
    run: tuple[object | None, Progress, Observer | None],
    label: str,
) -> tuple[_SquaredErrors, ReleasedBlocks | None]:
    """Re-release ``amc``'s truth once per seed (``run``: the executor, progress and an
    observer of each replicate's tables); the squared errors and the first replicate's
    block histograms (the next generation's truth)."""
    executor, progress, observe = run
    n_levels = amc.geo.tabulation.n_levels
    truth = [_stack(amc.truth, lv) for lv in range(n_levels)]
    acc = _SquaredErrors.zeros(truth, districts)
    first = None
    for k, s in enumerate(seeds):
        hists = _rerelease(amc, s, executor)
        if first is None:
            first = hists
        acc.block_totals.append(np.asarray(hists.pl94.sum(axis=1)).ravel())
        acc.block_hists.append(hists.persons)
        tables = released_tables(amc.schema, hists, amc.geo)
        acc.add(tables, truth, districts)
        if observe is not None:
            observe(amc.truth, tables)
        say(progress, f"AMC {label} re-release {k + 1}/{len(seeds)} (seed {s})")
    return acc, first


def simulate_margins(
    amc: AMCPlan,
    districts: Sequence[np.ndarray],
    margins: MarginOptions,
    *,
    executor: object | None = None,
    progress: Progress = None,
    observe: Observer | None = None,
) -> AMCResult:
    """Mean squared error of every published cell, and of every district's sums.

    Args:
        amc: the release to re-release (:class:`AMCPlan`).
        districts: per district geography (a plan's, or places, county subdivisions,
            AIAN areas), each tabulation block's district index (blocks in geocode
            order; ``-1``: in none).
        margins: the simulation (:class:`~censusdp.infer.options.MarginOptions`, its
            other fields unused): ``simulations``, ``K``, the first generation
            (re-releases of the MDF); ``seed``, the master seed (:func:`amc_seeds`);
            ``truth``, the plausible truth of the margins (:data:`TRUTHS`): ``rough``
            re-releases the rough truth (:func:`rough_truth`, drawn from the first
            generation) ``K`` more times, ``2 K`` re-releases in all (unless
            ``amc.rough`` says why not: then the MDF alone), ``release`` the MDF alone; ``calibration``, ``K2``, with ``truth="release"``, the second
            generation (re-releases of the first replicate) that calibrates the first
            (module docstring), 0: none.
        executor: where TopDown's tasks run.
        progress: one line per simulation.
        observe: called with (plausible truth, re-released) tables of each replicate the
            margins come from (``censusdp evaluate``'s error statistics).

    Raises:
        InternalError: for an unknown ``truth``, or a calibration of the rough truth.
    """
    simulations, seed, truth = margins.simulations, margins.seed, margins.truth
    if truth not in TRUTHS or (truth == "rough" and margins.calibration):
        raise InternalError(f"AMC truth {truth!r} with calibration {margins.calibration}")
    if truth == "rough" and simulations > 0 and not amc.rough:
        return _rough_margins(amc, districts, simulations, seed, (executor, progress, observe))
    k2 = margins.calibration
    seeds = amc_seeds(seed, simulations + k2)
    first, replicate = _generation(
        amc, districts, seeds[:simulations], (executor, progress, observe), "first-generation"
    )
    raw_levels, raw_districts = first.mean()
    if k2 == 0 or replicate is None:
        ones = [np.ones(a.shape[1]) for a in raw_levels]
        dones = [np.ones(a.shape[1]) for a in raw_districts]
        return AMCResult(
            raw_levels, raw_districts, seeds, [], raw_levels, raw_districts, ones, dones
        )
    second, _ = _generation(
        plausible_truth(amc, replicate),
        districts,
        seeds[simulations:],
        (executor, progress, None),
        "second-generation",
    )
    sec_levels, sec_districts = second.mean()
    factors = [calibration_factors(a, b) for a, b in zip(raw_levels, sec_levels, strict=True)]
    dfactors = [
        calibration_factors(a, b) for a, b in zip(raw_districts, sec_districts, strict=True)
    ]
    return AMCResult(
        [a * f**2 for a, f in zip(raw_levels, factors, strict=True)],
        [a * f**2 for a, f in zip(raw_districts, dfactors, strict=True)],
        seeds[:simulations],
        seeds[simulations:],
        raw_levels,
        raw_districts,
        factors,
        dfactors,
    )


def _rough_margins(
    amc: AMCPlan,
    districts: Sequence[np.ndarray],
    simulations: int,
    seed: int,
    run: tuple[object | None, Progress, Observer | None],
) -> AMCResult:
    """The rough truth's margins: the MDF re-released ``K`` times (the plain AMC, and
    the law of block sizes), the rough truth drawn, and it re-released ``K`` times."""
    executor, progress, observe = run
    seeds = amc_seeds(seed, 2 * simulations + 1)
    first, _ = _generation(
        amc, districts, seeds[:simulations], (executor, progress, None), "first-generation"
    )
    rough = rough_truth(amc, np.stack(first.block_totals), seeds[-1], first.block_hists)
    say(progress, "AMC rough truth drawn (the release's block sizes and cells deconvolved)")
    second, _ = _generation(
        rough, districts, seeds[simulations:-1], (executor, progress, observe), "rough-truth"
    )
    raw_levels, raw_districts = first.mean()
    levels, dists = second.mean()
    return AMCResult(
        levels,
        dists,
        seeds[:simulations],
        [],
        raw_levels,
        raw_districts,
        [np.ones(a.shape[1]) for a in levels],
        [np.ones(a.shape[1]) for a in dists],
        "rough",
        seeds[simulations:],
        np.asarray(rough.blocks.pl94.sum(axis=1)).ravel() if rough.blocks else None,
    )
