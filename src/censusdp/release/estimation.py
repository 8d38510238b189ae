"""Estimating a release's runs from noisy measurements and public invariants alone.

The person run is estimated first (:func:`censusdp.release.topdown.driver.run_topdown`,
TopDown or bottom-up), then the housing-unit run, held to the released persons per block
when ``unit_consistency`` is ``consistent`` (:mod:`censusdp.release.consistency`). A
household run (unit schema ``household2010``) goes the other way: households first, then
persons held to them (:mod:`censusdp.release.household_consistency`). The
same code serves a fresh run, a re-estimate (``run --from-measurements``) and the
simulated re-releases of ``evaluate`` and ``infer`` (:func:`estimate_histograms`, both
runs, a household run's households included; nothing written).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import PL94_CROSS, pl94_map, unit_histogram_from_counts
from censusdp.data.invariants import Bounds, Invariants, held_cross_bounds, level_bounds
from censusdp.data.measurements import Measurements
from censusdp.data.schema import Schema
from censusdp.errors import ConfigError, InternalError
from censusdp.execution.base import Beside, Executor
from censusdp.progress import prefixed, say
from censusdp.release.consistency import (
    UNIT_GROUP_VARIABLE,
    consistent_unit_bounds,
    household_persons,
    independent_unit_bounds,
)
from censusdp.release.dhc_units import (
    DHCH_SCHEMA,
    UNIT_HISTOGRAM_RUN,
    HeldUnits,
    estimate_dhch_run,
    gqhh_vector_of,
)
from censusdp.release.household_consistency import (
    HOUSEHOLD_SCHEMA,
    hold_persons_to_households,
    household_bounds,
    household_level_caps,
    household_root_cap,
    household_size_bounds,
)
from censusdp.release.options import ReleaseOptions, Runtime
from censusdp.release.spine import ReleaseGeography
from censusdp.release.topdown.driver import TopDownOptions, TopDownResult, run_topdown
from censusdp.release.validate import UnitRun, validate_release
from censusdp.tables import table_arrays

__all__ = [
    "EstimationInputs",
    "ReleaseEstimate",
    "ReleasedBlocks",
    "UnitHierarchy",
    "estimate_histograms",
    "estimate_runs",
    "estimate_tables",
    "occupied_units",
    "on_tabulation",
    "person_bounds",
    "released_histograms",
    "unit_run",
]


class EstimatedLevels(Protocol):
    """Where a run's estimated levels are kept as they finish (a run's checkpoint,
    :class:`censusdp.release.checkpoint.Checkpoint`), so an interrupted run resumes
    after them."""

    def levels(self, run: str) -> Any:
        """The store of ``run``'s levels the TopDown driver reads and records."""


def person_bounds(inv: Invariants, hierarchy: Hierarchy) -> list[Bounds]:
    """The person run's bounds at every level, from the invariants."""
    return [Bounds(*b) for b in level_bounds(inv, hierarchy)]


@dataclass(frozen=True, eq=False)
class UnitHierarchy:
    """The unit run's own hierarchy (its spine), when it is not the persons'.

    Attributes:
        hierarchy: the hierarchy the unit run was measured on.
        invariants: the invariants with blocks in its order.
        order: block rows in the persons' order -> its order (the persons' released
            household persons per block, which bound a consistent unit run, are carried
            over block by block).
    """

    hierarchy: Hierarchy
    invariants: Invariants
    order: np.ndarray

    @classmethod
    def of(cls, geo: ReleaseGeography, inv: Invariants) -> UnitHierarchy | None:
        """The unit run's hierarchy of ``geo`` (``None`` when it is the persons');
        ``inv`` in tabulation order."""
        order = geo.unit_order()
        if order is None:
            return None
        return cls(geo.units.estimation, geo.units.invariants(inv), order)


@dataclass(frozen=True, eq=False)
class EstimationInputs:
    """What estimation sees: each run's measurements and the public invariants, on the
    hierarchy they were measured on (the spine's, blocks in spine order, for a spine
    release); ``bounds`` replaces the person bounds the invariants give (a spine's
    state parts); ``unit_hierarchy`` is the unit run's own (its spine), when it has one.
    """

    persons: Measurements
    units: Measurements | None
    invariants: Invariants
    hierarchy: Hierarchy
    bounds: list[Bounds] | None = None
    unit_hierarchy: UnitHierarchy | None = None
    unit_histogram: Measurements | None = None
    """The unit histogram a DHC household run measures beside its households."""

    @classmethod
    def on(
        cls,
        geo: ReleaseGeography,
        inv: Invariants,
        persons: Measurements,
        units: Measurements | None,
        unit_histogram: Measurements | None = None,
    ) -> EstimationInputs:
        """The inputs of each run on its own hierarchy of ``geo`` (``inv`` in tabulation
        order; ``persons`` and ``units`` measured on ``geo.for_run(run)``, and the unit
        histogram a DHC household run measures beside its households)."""
        return cls(
            persons,
            units,
            geo.invariants(inv),
            geo.estimation,
            None if geo.spine is None else geo.person_bounds(inv),
            UnitHierarchy.of(geo, inv),
            unit_histogram,
        )

    def units_on(self) -> tuple[Hierarchy, Invariants, np.ndarray | None]:
        """The unit run's hierarchy, invariants and the persons' block order -> its own
        (``None``: the same)."""
        u = self.unit_hierarchy
        if u is None:
            return self.hierarchy, self.invariants, None
        return u.hierarchy, u.invariants, u.order


@dataclass
class ReleaseEstimate:
    """The estimate of both runs, the person bounds it was held to, and (for a
    consistent unit run) the household persons per block it was held to (or, for a
    household run, that it released; in the unit run's block order);
    ``unit_schema`` is the unit run's schema."""

    persons: TopDownResult
    units: TopDownResult | None
    bounds: list[Bounds]
    household: np.ndarray | None = None
    unit_schema: str = "units"
    unit_histogram: TopDownResult | None = None
    """A DHC household run's estimated units by ``tenvacgq`` (its households are
    ``units``)."""

    @property
    def households(self) -> bool:
        """Whether the unit run is a household run."""
        return self.units is not None and self.unit_schema == HOUSEHOLD_SCHEMA

    @property
    def dhc_households(self) -> bool:
        """Whether the unit run is the 2020 DHC's household run."""
        return self.units is not None and self.unit_schema == DHCH_SCHEMA


def _bottomup_bounds(bounds: list[Bounds], manifest: dict[str, Any]) -> list[Bounds]:
    """Bottom-up estimates blocks alone: totals above the block level are sums of noisy
    blocks and cannot be held to the state invariant (said in ``manifest``)."""
    manifest["invariants_not_enforced"] = ["state total population (bottom-up)"]
    return [
        Bounds(
            b.group_lower,
            b.group_upper,
            np.zeros_like(b.total_lower),
            np.full_like(b.total_upper, np.inf),
        )
        for b in bounds
    ]


def _topdown_options(options: ReleaseOptions, schema_name: str) -> TopDownOptions:
    """How the person run's TopDown estimates (the unit runs' start from it)."""
    return TopDownOptions(
        group_variable="hhgq",
        postprocess=options.postprocess,
        method=options.method,
        estimator=options.estimator_for(schema_name),
        max_children=options.max_children,
        pool_root=options.pool_root,
        production=options.production_mode,
        passes=options.passes,
    )


def estimate_runs(
    inputs: EstimationInputs,
    options: ReleaseOptions,
    rt: Runtime,
    manifest: dict[str, Any],
    checkpoint: EstimatedLevels | None = None,
) -> ReleaseEstimate:
    """Estimate persons (and units, when measured) from measurements and invariants
    (continuing after the levels ``checkpoint`` holds, recording each finished level);
    records the estimation's statuses, estimator, failsafe uses and order in ``manifest``.

    A household run is estimated first and the person run held to its households
    (``unit_consistency`` ``consistent``); otherwise persons go first and a unit run is
    held to their household persons. A unit run that does not depend on the persons (a
    DHC household run; a unit run not held to them: fidelity ``production``) is
    estimated beside them on an executor that takes two maps at once (a pool of
    processes: :class:`~censusdp.execution.base.Beside`), its lines prefixed ``units:``;
    its result is the same either way."""

    ms, hierarchy, inv = inputs.persons, inputs.hierarchy, inputs.invariants
    schema = ms.schema
    bounds = person_bounds(inv, hierarchy) if inputs.bounds is None else inputs.bounds
    if options.postprocess == "bottomup" and inv.pl94_persons is None:
        # (held to a P.L. 94 release's persons, every block's total is held, and so the
        # state's: its invariant)
        bounds = _bottomup_bounds(bounds, manifest)
    run = {"executor": rt.executor, "progress": rt.progress}
    topdown = _topdown_options(options, schema.name)
    manifest["estimation"] = {}
    manifest["estimator"] = topdown.estimator
    manifest["failsafe"] = {}
    units_ms = inputs.units
    unit_topdown = None
    if units_ms is not None:
        unit_topdown = replace(topdown, estimator=options.estimator_for(units_ms.schema.name))
    units, household = None, None
    if units_ms is not None and units_ms.schema.name == HOUSEHOLD_SCHEMA:
        assert unit_topdown is not None
        units, bounds = _households_first(
            inputs, options, unit_topdown, rt, manifest, bounds, checkpoint
        )
    # a unit run that does not depend on the persons (a DHC household run; a unit run
    # not held to their households) is estimated beside them on a pool of processes
    beside = None
    if units_ms is not None and units is None and _independent_units(options, units_ms):
        # the persons' entries first, whichever run finishes first (a manifest's order
        # does not depend on the machine's load)
        manifest["estimation"]["persons"] = manifest["failsafe"]["persons"] = None
        unit_rt = rt
        if Beside.together(rt.executor):  # its lines would mix with the persons'
            unit_rt = replace(rt, progress=prefixed(rt.progress, "units"))
        beside = Beside(
            _unit_run(inputs, unit_rt, manifest, unit_topdown, checkpoint),
            rt.executor,
            "censusdp-unit-run",
        )
        if beside.concurrent:
            manifest["estimation_beside"] = ESTIMATED_BESIDE
    t = _clock()
    held, person_topdown = bounds, topdown
    if inv.pl94_persons is not None:  # production's pl94: the P.L. 94 release's persons
        held = held_cross_bounds(inv.pl94_persons, hierarchy)
        person_topdown = replace(topdown, group_variable=PL94_CROSS)
        manifest["persons_estimation"] = PERSONS_HELD_PL94
    say(rt.progress, "estimating the persons (top-down, level by level):")
    try:
        persons = run_topdown(
            ms, hierarchy, held, person_topdown, checkpoint=_levels(checkpoint, "persons"), **run
        )
    except BaseException:
        if beside is not None and beside.concurrent:  # nothing writes once the run is gone
            with contextlib.suppress(BaseException):
                beside.result()
        raise
    _record_run(manifest, "persons", persons, rt, _since(t))
    if units_ms is not None and options.unit_consistency == "consistent":
        household = household_persons(persons.histograms[-1], schema)
        order = inputs.units_on()[2]
        household = household if order is None else household[order]
    unit_hist = None
    if beside is not None:
        units, unit_hist = beside.result()
    elif units_ms is not None and units is None:  # held to the persons' households
        units, unit_hist = _unit_run(inputs, rt, manifest, unit_topdown, checkpoint, household)()
    if units_ms is not None:  # a DHC household run's is its own (_estimate_dhch)
        manifest.setdefault("units_estimation", options.unit_consistency)
    unit_schema = units_ms.schema.name if units_ms is not None else "units"
    return ReleaseEstimate(persons, units, bounds, household, unit_schema, unit_hist)


def _levels(checkpoint: EstimatedLevels | None, run: str) -> Any:
    """``run``'s store of estimated levels in ``checkpoint`` (``None`` without one)."""
    return checkpoint.levels(run) if checkpoint is not None else None


def _households_first(
    inputs: EstimationInputs,
    options: ReleaseOptions,
    topdown: TopDownOptions,
    rt: Runtime,
    manifest: dict[str, Any],
    bounds: list[Bounds],
    checkpoint: EstimatedLevels | None = None,
) -> tuple[TopDownResult, list[Bounds]]:
    """A household run (the DDP's, ``household2010``), estimated before the persons;
    returns it and the person bounds, held to its households when ``unit_consistency``
    is ``consistent``."""
    units_ms, hierarchy, inv = inputs.units, inputs.hierarchy, inputs.invariants
    if units_ms is None:
        raise InternalError("a household run needs its measurements")
    if inputs.unit_hierarchy is not None:
        raise ConfigError(
            "a household run is estimated on the persons' hierarchy; this release's "
            "unit run has its own spine (use --spine tabulation)"
        )
    t = _clock()
    say(rt.progress, "estimating the households (their own run, top-down):")
    consistent = options.unit_consistency == "consistent"
    cap = household_root_cap(bounds) if consistent else None
    caps = household_level_caps(bounds) if consistent else {}
    units = run_topdown(
        units_ms,
        hierarchy,
        household_bounds(inv.housing_units, hierarchy),
        replace(topdown, group_variable=None, root_cap=cap, level_caps=caps),
        executor=rt.executor,
        progress=rt.progress,
        checkpoint=_levels(checkpoint, "units"),
    )
    if cap is not None:  # the persons the root's households need, and what it has
        need = float(household_size_bounds(units.histograms[0])[0].sum())
        manifest["estimation"]["household_persons_at_root"] = {
            "available": int(cap.upper),
            "needed": int(need),
        }
    for li, c in caps.items():  # several states: each one's own row, and its needs
        need = household_size_bounds(units.histograms[li])[0]
        manifest["estimation"].setdefault("household_persons_by_level", {})[
            hierarchy.geolevels[li].name
        ] = {
            str(code): {"least": int(lo), "available": int(hi), "needed": int(n)}
            for code, lo, hi, n in zip(hierarchy.geocodes[li], c.lower, c.upper, need, strict=True)
        }
    if consistent:
        bounds = hold_persons_to_households(bounds, units.histograms[-1], hierarchy)
    _record_run(manifest, "units", units, rt, _since(t))
    manifest["estimation_order"] = ["units", "persons"]
    return units, bounds


ESTIMATED_BESIDE = (
    "units beside persons: the unit run does not depend on the persons, and its tasks "
    "shared the pool with theirs (each run's lines are prefixed with its name)"
)
"""The manifest's ``estimation_beside`` when the unit run was estimated beside the
persons' (:class:`~censusdp.execution.base.Beside`)."""


def _independent_units(options: ReleaseOptions, units_ms: Measurements) -> bool:
    """Whether the unit run is estimated without the persons' estimate: a DHC household
    run always (production's), a housing-unit run unless held to the persons'
    household persons (``unit_consistency`` ``consistent``)."""
    name = units_ms.schema.name
    if name == DHCH_SCHEMA:
        return True
    return name != HOUSEHOLD_SCHEMA and options.unit_consistency != "consistent"


def _unit_run(
    inputs: EstimationInputs,
    rt: Runtime,
    manifest: dict[str, Any],
    topdown: TopDownOptions | None,
    checkpoint: EstimatedLevels | None,
    household: np.ndarray | None = None,
) -> Callable[[], tuple[TopDownResult, TopDownResult | None]]:
    """The unit run, to be called: ``(units, units by tenvacgq)`` of a DHC household run
    (:func:`_estimate_dhch`), or ``(housing units, None)`` on their own hierarchy, held to
    the persons' ``household`` persons per block when given (in its block order)."""

    def run() -> tuple[TopDownResult, TopDownResult | None]:
        units_ms = inputs.units
        if topdown is None or units_ms is None:
            raise InternalError("a unit run needs its measurements and options")
        if units_ms.schema.name == DHCH_SCHEMA:
            return _estimate_dhch(inputs, topdown, rt, manifest, checkpoint)
        t = _clock()
        uh, uinv, _ = inputs.units_on()
        ubounds, group = independent_unit_bounds(uinv.housing_units, uh), None
        if household is not None:
            ubounds = consistent_unit_bounds(household, uinv.housing_units, uh)
            group = UNIT_GROUP_VARIABLE
        say(rt.progress, "estimating the housing units (their own run, top-down):")
        units = run_topdown(
            units_ms,
            uh,
            ubounds,
            replace(topdown, group_variable=group),
            executor=rt.executor,
            progress=rt.progress,
            checkpoint=_levels(checkpoint, "units"),
        )
        _record_run(manifest, "units", units, rt, _since(t))
        return units, None

    return run


PERSONS_HELD_PL94 = (
    "held to the P.L. 94 release's persons: every geounit's HHGQ x voting age x Hispanic x "
    "CENRACE counts exact (production's pl94; the TopDown's groups are those 2,016 cells)"
)
"""The manifest's ``persons_estimation`` of a DHC person run held to a P.L. 94 release."""

DHCH_ESTIMATION = (
    "dhc: the units by tenvacgq first (housing units and each GQ type's facilities "
    "exact), then the households held to the units' tenure at every geounit"
)
"""The manifest's ``units_estimation`` of a DHC household run."""

DHCH_ESTIMATION_H1 = (
    "dhc: the units by tenvacgq first (housing units, each GQ type's facilities and the "
    "P.L. 94 release's occupied and vacant units exact), then the households held to the "
    "units' tenure at every geounit"
)
"""The manifest's ``units_estimation`` of a DHC household run held to a P.L. 94 release."""


def _estimate_dhch(
    inputs: EstimationInputs,
    topdown: TopDownOptions | None,
    rt: Runtime,
    manifest: dict[str, Any],
    checkpoint: EstimatedLevels | None,
) -> tuple[TopDownResult, TopDownResult]:
    """A DHC household run (:mod:`censusdp.release.dhc_units`), independent of the
    persons as in production; returns ``(households, units by tenvacgq)``."""
    uh, uinv, _ = inputs.units_on()
    if (
        topdown is None
        or inputs.units is None
        or inputs.unit_histogram is None
        or uinv.gq_types is None
    ):
        raise InternalError(
            "a DHC household run needs its unit histogram's measurements and the "
            "invariant facilities by GQ type"
        )
    seconds: dict[str, tuple[float, float]] = {}
    unit_hist, units = estimate_dhch_run(
        inputs.units,
        inputs.unit_histogram,
        uh,
        HeldUnits(gqhh_vector_of(uinv), uinv.h1_occupied),
        topdown,
        rt=rt,
        checkpoint=checkpoint,
        seconds=seconds,
    )
    _record_run(manifest, UNIT_HISTOGRAM_RUN, unit_hist, rt, seconds[UNIT_HISTOGRAM_RUN])
    _record_run(manifest, "units", units, rt, seconds["units"])
    manifest["units_estimation"] = (
        DHCH_ESTIMATION if uinv.h1_occupied is None else DHCH_ESTIMATION_H1
    )
    return units, unit_hist


def _clock() -> tuple[float, float]:
    """Now, as (wall, this thread's CPU) seconds, for :func:`_since` (a unit run beside
    the persons' runs in a thread of its own)."""
    return time.perf_counter(), time.thread_time()


def _since(t: tuple[float, float]) -> tuple[float, float]:
    """Wall and CPU seconds since ``t`` (from :func:`_clock`)."""
    return time.perf_counter() - t[0], time.thread_time() - t[1]


def _record_run(
    manifest: dict[str, Any],
    run: str,
    result: TopDownResult,
    rt: Runtime,
    seconds: tuple[float, float],
) -> None:
    """A finished run's level statuses, failsafe uses and time (``seconds``: wall and
    its driver thread's CPU; in process the CPU holds the tasks', which a projection of the
    driver's own work subtracts), into the manifest."""
    rt.timings[f"estimate_{run}"] = seconds[0]
    rt.timings[f"estimate_{run}_cpu"] = seconds[1]
    manifest["estimation"][run] = result.levels
    manifest["failsafe"][run] = result.failsafe


def occupied_units(est: ReleaseEstimate, inv: Invariants, manifest: dict[str, Any]) -> np.ndarray:
    """Released occupied housing units per block: the occupied column of a unit run, the
    households of a household run (one per occupied unit: the household histogram's
    row sums), zero when the unit run was skipped."""
    if est.households or est.dhc_households:
        assert est.units is not None
        return np.asarray(est.units.histograms[-1].sum(axis=1)).ravel().astype(np.int64)
    if est.units is not None:
        return np.asarray(est.units.histograms[-1][:, 1].todense()).ravel().astype(np.int64)
    manifest["occupancy"] = "not released (no housing-unit budget): all units marked vacant"
    return np.zeros(inv.blocks.size, dtype=np.int64)


def released_histograms(
    est: ReleaseEstimate, inv: Invariants, schema: Schema, manifest: dict[str, Any]
) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """The released block histograms the tables are tabulated from: ``pl94`` and units."""
    block_hist = est.persons.histograms[-1]
    pl94_hist = (
        block_hist if schema.name == "pl94" else sp.csr_matrix(block_hist @ pl94_map(schema))
    )
    occupied = occupied_units(est, inv, manifest)
    return pl94_hist, unit_histogram_from_counts(inv.housing_units, occupied, inv.gq_facilities)


def estimate_tables(
    persons: Measurements,
    units: Measurements | None,
    inv: Invariants,
    geo: ReleaseGeography,
    options: ReleaseOptions,
    executor: Executor | None = None,
) -> dict[str, list[np.ndarray]]:
    """The published P.L. tables a release would hold, estimated from these measurements.

    The same estimation as a release (person run, then the housing-unit run held to it),
    without writing anything: for re-running the post-processing on simulated
    measurements (``censusdp evaluate`` without truth). ``inv`` are the tabulation's
    invariants and ``geo.tabulation`` its hierarchy; with a spine, the measurements are
    of the spine's geounits and are estimated there (as the release was; the unit run
    on its own spine), then tabulated by geocode.

    Returns:
        Per table (P1-P5, H1), per level, the ``(units x lines)`` integer arrays
        (:func:`censusdp.tables.table_arrays` layout).
    """
    blocks = estimate_histograms(persons, units, inv, geo, options, executor)
    return table_arrays(blocks.pl94, blocks.units, geo.tabulation)


@dataclass(frozen=True, eq=False)
class ReleasedBlocks:
    """A release's released block histograms on the tabulation's blocks (geocode order),
    as :func:`censusdp.io.mdf_read.read_mdf_histograms` and
    :meth:`censusdp.io.rundir.RunDir.mdf_households` read a release's MDF back.

    Attributes:
        persons: the persons in the measured schema.
        pl94: the persons in ``pl94``.
        units: the units (:func:`censusdp.data.histograms.unit_histogram` layout: vacant,
            occupied, then facilities by type).
        households: a household run's households (``household2010`` or ``dhch-2020``
            cells; their row sums are the occupied units), ``None`` without one.
        tenure: a DHC household run's ``(blocks x 35)`` units by ``tenvacgq``.
    """

    persons: sp.csr_matrix
    pl94: sp.csr_matrix
    units: sp.csr_matrix
    households: sp.csr_matrix | None = None
    tenure: sp.csr_matrix | None = None


def estimate_histograms(
    persons: Measurements,
    units: Measurements | None,
    inv: Invariants,
    geo: ReleaseGeography,
    options: ReleaseOptions,
    executor: Executor | None = None,
    unit_histogram: Measurements | None = None,
) -> ReleasedBlocks:
    """The released block histograms :func:`estimate_tables` tabulates (a simulated
    release can itself be re-released: :mod:`censusdp.infer.amc`); ``units`` a household
    run's measurements too, and ``unit_histogram`` the unit histogram a DHC household
    run measures beside its households (its ``tenvacgq``)."""
    if options.postprocess not in ("topdown", "bottomup"):
        raise ConfigError(
            f"postprocess must be 'topdown' or 'bottomup', got {options.postprocess!r}"
        )
    manifest: dict[str, Any] = {}
    inputs = EstimationInputs.on(geo, inv, persons, units, unit_histogram)
    est = estimate_runs(inputs, options, Runtime(executor), manifest)
    if geo.spine is not None:
        est = on_tabulation(est, geo, inv, persons.schema, manifest)
    pl94_hist, units_hist = released_histograms(est, inv, persons.schema, manifest)
    households = None
    if (est.households or est.dhc_households) and est.units is not None:
        households = sp.csr_matrix(est.units.histograms[-1], dtype=np.int64)
    tenure = None
    if est.unit_histogram is not None:
        tenure = sp.csr_matrix(est.unit_histogram.histograms[-1], dtype=np.int64)
    return ReleasedBlocks(
        sp.csr_matrix(est.persons.histograms[-1]), pl94_hist, units_hist, households, tenure
    )


def on_tabulation(
    est: ReleaseEstimate,
    geo: ReleaseGeography,
    inv: Invariants,
    schema: Schema,
    manifest: dict[str, Any],
) -> ReleaseEstimate:
    """A spine estimate checked on the spine, then seen on the tabulation geography.

    The spine's own checks (every spine geounit the sum of its blocks, every bound on
    the spine; the unit run on its own spine) go to the manifest as
    ``spine_validation``; the MDF, the tables and the release's validation then use the
    same blocks in geocode order, aggregated by tabulation geocode.
    """
    ugeo = geo.units
    report = validate_release(
        est.persons.histograms,
        geo.estimation,
        schema,
        est.bounds,
        units=unit_run(est, ugeo.invariants(inv), ugeo.estimation if ugeo is not geo else None),
        failsafe_uses=len(est.persons.failsafe),
        held_pl94=geo.invariants(inv).pl94_persons,
    )
    manifest["spine_validation"] = report.to_dict()
    if not report.ok and not est.persons.failsafe:
        raise InternalError("the spine estimate fails validation: " + "; ".join(report.failures()))

    def view(e: TopDownResult | None, g: ReleaseGeography) -> TopDownResult | None:
        if e is None:
            return None
        return TopDownResult(g.tabulation_histograms(e.histograms), e.levels, e.failsafe)

    persons = view(est.persons, geo)
    assert persons is not None
    return ReleaseEstimate(
        persons,
        view(est.units, ugeo),
        person_bounds(inv, geo.tabulation),
        None if est.household is None else ugeo.to_tabulation(est.household),
        est.unit_schema,
        view(est.unit_histogram, ugeo),
    )


def unit_run(
    est: ReleaseEstimate, inv: Invariants, hierarchy: Hierarchy | None = None
) -> UnitRun | None:
    """The unit run of ``est`` for its checks (``inv`` in its block order; ``hierarchy``
    its own when it is not the persons'), ``None`` without one."""
    if est.units is None:
        return None
    return UnitRun(
        est.units.histograms,
        inv.housing_units,
        est.household,
        hierarchy,
        est.unit_schema,
        None if est.unit_histogram is None else est.unit_histogram.histograms,
        None if est.unit_histogram is None else gqhh_vector_of(inv),
        inv.h1_occupied,
    )
