"""``censusdp infer RUN --out DIR``: GLS estimates of every published cell from a release.

Reads only what a release publishes, opened through :class:`censusdp.io.rundir.RunDir`:
its manifest (geolevels, schema), the person NMF (and the unit NMF when the occupancy
run was measured), the invariants and the invariant totals; with ``--simulations``, the
MDF; with a plan, the published tables. The noise variance of every measurement is read
from the NMF's ``variance`` column, never recomputed from the budget. This is the one
module of :mod:`censusdp.infer` that reads a release or writes an output (with its
long forms' writer, :mod:`censusdp.infer._long`, and the figures of
:mod:`censusdp.infer._plots`); the estimation modules see arrays only.

Writes ``DIR/estimates.parquet``, one row per geolevel x geounit x line:
``geolevel``, ``geocode``, ``query`` (``total``, ``P1_001N`` ... ``P5_010N``,
``H1_001N`` ... ``H1_003N``), ``estimate`` (the real-valued GLS estimate), ``sd``, and
the integer 90% and 95% intervals ``ci90_low`` ... ``ci95_high``
(:func:`censusdp.infer.gls.census_intervals`); and ``DIR/manifest.json``.

Exact facts entered: the state total population (and so the US total), the housing
units of every block (H1_001N exact at every level), and, unless
``InferOptions(zero_constraints=False)``, the zeros the block invariants imply (no household
population without housing units; no population of a group-quarters type without a
facility of that type; no housing units of either occupancy where there are none).
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from censusdp.data.geography import GeoLevels, Hierarchy
from censusdp.data.invariants import Invariants
from censusdp.data.schema import Schema, get_schema
from censusdp.errors import InputError, SchemaError
from censusdp.execution import make_executor
from censusdp.infer._algebra import Layout, make_layout
from censusdp.infer._estimates import LevelStats, chunk_table
from censusdp.infer._long import LongWriter
from censusdp.infer._records import (
    ESTIMATE_COLUMNS,
    HOUSING_UNITS,
    MARGINS_NOTE,
    amc_record,
    household_lines,
    output_manifest,
    person_lines,
    tabulation_match,
    unit_lines,
    zero_persons,
)
from censusdp.infer._unit_spine import UnitSpine, rows_on_persons
from censusdp.infer.amc import (
    HELD_TO_HOUSEHOLDS,
    AMCPlan,
    AMCResult,
    plausible_truth,
    require_affordable,
    simulate_margins,
)
from censusdp.infer.gls import (
    Constraints,
    LevelDesign,
    LevelEstimates,
    LineSet,
    SiblingGroups,
    TreeRun,
    direct_sd,
    level_design,
    tree_gls,
)
from censusdp.infer.options import MARGIN_FORMATS, InferOptions, MarginOptions
from censusdp.infer.plan import read_plan
from censusdp.infer.published import (
    MarginAccumulator,
    TargetGeography,
    district_geography,
    entity_target_geographies,
    exact_zero,
    long_table,
    tabulation_geographies,
)
from censusdp.infer.tree_cov import TreeFactors
from censusdp.io.atomic import atomic_path, write_text
from censusdp.io.mdf_read import read_mdf_histograms
from censusdp.io.nmf_read import NMFReader
from censusdp.io.output_rules import MANIFEST_FILE
from censusdp.io.release_manifest import ReleaseManifest
from censusdp.io.rundir import RunDir
from censusdp.io.staging import staged_output
from censusdp.io.tables import read_table_arrays
from censusdp.progress import Progress, say, task
from censusdp.release.estimation import ReleasedBlocks
from censusdp.release.household_runs import HOUSEHOLD_SCHEMA, household_schema
from censusdp.release.manifest import peak_rss_mb, recorded_budgets
from censusdp.release.options import UNIT_CONSISTENCY_CHOICES, Execution, ReleaseOptions
from censusdp.release.spine import ReleaseGeography, geography_of_run
from censusdp.release.validate import require_valid
from censusdp.tables import TABLE_NAMES
from censusdp.tables.geoids import geo_identifiers

__all__ = [
    "ESTIMATE_COLUMNS",
    "MARGIN_FORMATS",
    "InferOptions",
    "MarginOptions",
    "ReleaseGLS",
    "amc_plan",
    "household_lines",
    "infer_release",
    "read_margins",
    "release_gls",
    "tabulation_sds",
]


def _read_release(run: RunDir) -> tuple[ReleaseManifest, ReleaseGeography, Invariants]:
    """The manifest, the geography measured on, and the invariants in its block order."""
    for f in (
        run.manifest_file,
        run.nmf_file("persons"),
        run.invariants_file,
        run.invariant_totals_file,
    ):
        if not f.exists():  # the NMF may be a directory of part files
            raise InputError(f"{f}: missing file (infer needs a release directory)")
    manifest = run.manifest()
    if "geolevels" not in manifest:
        raise InputError(f"{run.manifest_file}: no 'geolevels'")
    hierarchy, inv = run.invariants(GeoLevels.from_pairs(manifest["geolevels"]))
    # a spine release measured the spine's geounits (spine.parquet): infer estimates them
    geo = geography_of_run(run.path, manifest, hierarchy)
    return manifest, geo, geo.invariants(inv)


def _gls_schema(manifest: Mapping[str, Any], run_dir: Path) -> Schema:
    """The release's schema, which the GLS must be able to read.

    Raises:
        SchemaError: for a release not measured on the ``pl94`` schema.
    """
    schema = get_schema(str(manifest.get("schema", "pl94")))
    if schema.name != "pl94":
        raise SchemaError(
            f"GLS is implemented for releases on the pl94 schema only; {run_dir} was measured "
            f"on {schema.name!r} (its AGE attribute needs another factor in the block algebra; "
            "see docs/inference.md, Limits)"
        )
    return schema


def _refuse_unreadable(run: RunDir) -> None:
    """Refuse, before validating the release, what infer cannot read: a schema other
    than ``pl94`` (a missing manifest is left to the reading)."""
    if run.manifest_file.is_file():
        _gls_schema(run.manifest(), run.path)


def _layout_for(reader: NMFReader, hierarchy: Hierarchy, group: tuple[str, ...]) -> Layout:
    queries: list[str] = []
    for level in range(hierarchy.n_levels):
        for q in reader.queries_at(level):
            if q not in queries:
                queries.append(q)
    if not queries:
        raise InputError(f"{reader.path}: no measurements")
    return make_layout(reader.schema, queries, group)


def _designs(reader: NMFReader, layout: Layout, hierarchy: Hierarchy) -> dict[int, LevelDesign]:
    """The measurement design of every measured level (from one unit's read).

    The unit read is one measured at the level's most common variance: its geolevel's
    own share (a spine release's bypass gives some units more, and none to the
    bypassed single children)."""
    out = {}
    for level, name in enumerate(hierarchy.geolevels.names):
        queries = reader.queries_at(level)
        unit = 0
        if queries and hierarchy.n_units(level):
            var = reader.unit_variances(level, queries[0])
            finite = var[np.isfinite(var)]
            if finite.size == 0:
                continue
            values, counts = np.unique(finite, return_counts=True)
            unit = int(np.flatnonzero(var == values[np.argmax(counts)])[0])
        des = level_design(layout, level, name, reader.read(level, unit, unit + 1))
        if des is not None:
            out[level] = des
    return out


@dataclass(frozen=True, eq=False)
class ReleaseGLS:
    """The GLS of a whole release, ready to stream (:func:`release_gls`).

    Attributes:
        hierarchy: the release's geounits.
        manifest: the release manifest (typed; also a read-only mapping).
        schema_name: the person schema (``pl94``).
        total_level: the level whose total population is invariant (the state).
        lines: every line reported: ``total``, P1-P5, then H1.
        direct: per measured level, the sd of the best single-query direct estimate of
            every line (``inf`` where no query resolves it): the error of the raw
            noisy measurements.
        occupancy: how H1 was estimated (a sentence).
        noise_variances: per level, the NMF variance of every measured query.
        chunks: the final estimates, level by level (top first), chunk by chunk; each
            :class:`~censusdp.infer.gls.LevelEstimates` has one column per line.
        tabulation: for a spine release, which estimated geounits are tabulation
            geounits (:func:`tabulation_match`); ``None`` for a tabulation release.
        geography: the release's geography (tabulation and spine).
        line_sets: the person lines (``total``, P1-P5) and the H1 lines of the unit
            GLS (``None`` when the units were not measured: H1_001N is invariant).
        factors: the person and unit trees' :class:`~censusdp.infer.tree_cov.TreeFactors`
            (the person tree's complete once ``chunks`` is exhausted), for the variance
            of any set of blocks (:mod:`censusdp.infer.tree_cov`).
        split_states: the states of two parts (AIAN and non-AIAN) whose total the GLS
            holds exact on the union of their parts (:class:`~censusdp.infer.gls.SiblingGroups`).
    """

    hierarchy: Hierarchy
    manifest: ReleaseManifest
    schema_name: str
    total_level: int
    lines: tuple[str, ...]
    direct: dict[int, np.ndarray]
    occupancy: str
    noise_variances: dict[str, dict[str, float]]
    chunks: Iterator[LevelEstimates]
    tabulation: dict[str, Any] | None = None
    geography: ReleaseGeography | None = None
    line_sets: tuple[LineSet, LineSet | None] | None = None
    factors: tuple[TreeFactors, TreeFactors | None] | None = None
    split_states: int = 0


def _unit_gls(
    run: RunDir,
    hierarchy: Hierarchy,
    inv: Invariants,
    zero_constraints: bool,
    household: Mapping[str, str],
) -> tuple[
    dict[int, tuple[np.ndarray, np.ndarray]],
    dict[int, np.ndarray],
    tuple[str, ...],
    str,
    LineSet | None,
    TreeFactors | None,
]:
    """The housing-unit GLS (H1), in memory: per level its rows (estimates, sds), direct
    sds, line names, a sentence on how H1 was estimated, its lines and tree factors
    (``None`` without a unit NMF or with a household run's, whose lines ``household``
    are not estimated: only H1_001N, the invariant)."""
    bottom = hierarchy.n_levels - 1
    unit_rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    hu_levels = [
        np.asarray(a, dtype=np.float64).ravel()
        for a in hierarchy.aggregate(inv.housing_units.reshape(-1, 1))
    ]
    unit_direct: dict[int, np.ndarray] = {}
    if household or not run.has_nmf("units"):
        for level in range(hierarchy.n_levels):
            unit_rows[level] = (hu_levels[level][:, None], np.zeros((hu_levels[level].size, 1)))
        occupancy = "not measured in this release: only H1_001N (housing units, invariant)"
        if household:
            occupancy = (
                f"only H1_001N (housing units, invariant); {', '.join(household)} (the "
                f"households released) not estimated: {next(iter(household.values()))}"
            )
        return unit_rows, unit_direct, (HOUSING_UNITS,), occupancy, None, None
    ureader = run.nmf_reader("units", get_schema("units"), hierarchy)
    ulayout = _layout_for(ureader, hierarchy, ("occupancy",))
    ulines = unit_lines(ulayout)
    zero_hu = np.repeat((inv.housing_units == 0)[:, None], ulayout.d, axis=1)
    ucons = Constraints(zero_hu if zero_constraints else None, {bottom: hu_levels[bottom]})
    parts: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    ufactors = TreeFactors()
    for res in tree_gls(ureader, hierarchy, ulayout, ulines, ucons, factors=ufactors):
        parts.setdefault(res.level, []).append((res.estimate, res.sd))
    for level, chunks in parts.items():
        unit_rows[level] = (
            np.concatenate([c[0] for c in chunks]),
            np.concatenate([c[1] for c in chunks]),
        )
    for level, des in _designs(ureader, ulayout, hierarchy).items():
        unit_direct[level] = direct_sd(ulayout, des, ulines)
    occupancy = f"GLS from {run.nmf_file('units').name}"
    return unit_rows, unit_direct, ulines.names, occupancy, ulines, ufactors


def release_gls(
    run_dir: str | Path,
    *,
    zero_constraints: bool = True,
    executor: object | None = None,
    progress: Progress = None,
    timings: dict[str, float] | None = None,
) -> ReleaseGLS:
    """Set up the GLS of every published line of a release (nothing is validated here).

    Reads the manifest, the invariants and the housing-unit NMF (small) at once; the
    person NMF is streamed when ``chunks`` is iterated.

    Raises:
        InputError: for a missing or malformed release file.
        SchemaError: for a release not measured on the ``pl94`` schema (dhc-lite's AGE
            makes the block algebra too large; docs/inference.md, Limits).
    """
    timings = timings if timings is not None else {}
    run = RunDir(run_dir)
    run_dir = run.path
    t = time.perf_counter()
    manifest_in, geo, inv = _read_release(run)
    hierarchy = geo.estimation
    schema = _gls_schema(manifest_in, run_dir)
    persons = run.nmf_reader("persons", schema, hierarchy)
    layout = _layout_for(persons, hierarchy, ("hhgq",))
    lines = person_lines(layout)
    totals_persons = geo.exact_totals(inv)
    split = geo.state_part_groups(inv)  # a state's parts: their sum is its invariant
    pcons = Constraints(
        zero_persons(layout, inv) if zero_constraints else None,
        totals_persons,
        None if split is None else SiblingGroups(*split),
    )
    timings["read"] = time.perf_counter() - t
    say(progress, f"read release {run_dir}: {hierarchy.blocks.size:,} blocks, schema {schema.name}")

    # -- housing units (small: kept in memory, merged into the person rows) ----------------
    t = time.perf_counter()
    uspine = _unit_spine(geo)
    household = household_lines(manifest_in)
    if uspine is None:
        units = _unit_gls(run, hierarchy, inv, zero_constraints, household)
    else:  # the unit run on its own spine, then seen on the persons' geounits
        o = uspine.order
        uinv = Invariants(
            uspine.hierarchy.blocks,
            inv.population[o],
            inv.housing_units[o],
            inv.gq_facilities[o],
            total_level=inv.total_level,
        )
        units = _unit_gls(run, uspine.hierarchy, uinv, zero_constraints, household)
    unit_rows, unit_direct, unit_names, occupancy, ulines, ufactors = units
    if uspine is not None:
        unit_rows = rows_on_persons(unit_rows, hierarchy, uspine, ufactors, ulines)
    timings["units"] = time.perf_counter() - t
    say(progress, f"housing units: {occupancy}")

    designs = _designs(persons, layout, hierarchy)
    direct: dict[int, np.ndarray] = {}
    for level in range(hierarchy.n_levels):
        if level in designs or level in unit_direct:
            direct[level] = np.concatenate(
                [
                    direct_sd(layout, designs[level], lines)
                    if level in designs
                    else np.full(len(lines), np.inf),
                    unit_direct.get(level, np.full(len(unit_names), np.inf)),
                ]
            )

    pfactors = TreeFactors()

    def merged() -> Iterator[LevelEstimates]:
        for res in tree_gls(
            persons,
            hierarchy,
            layout,
            lines,
            pcons,
            run=TreeRun(executor=executor, progress=progress),
            factors=pfactors,
        ):
            ue, us = unit_rows[res.level]
            yield LevelEstimates(
                res.level,
                res.start,
                res.stop,
                np.concatenate([res.estimate, ue[res.start : res.stop]], axis=1),
                np.concatenate([res.sd, us[res.start : res.stop]], axis=1),
            )

    names = hierarchy.geolevels.names
    return ReleaseGLS(
        hierarchy,
        manifest_in,
        schema.name,
        int(max(totals_persons)),
        lines.names + tuple(unit_names),
        direct,
        occupancy,
        {names[lv]: dict(zip(d.queries, d.variances, strict=True)) for lv, d in designs.items()},
        merged(),
        tabulation_match(geo),
        geo,
        (lines, ulines),
        (pfactors, ufactors),
        0 if split is None else split[2].size,
    )


def _published_levels(run: RunDir, tab: Hierarchy) -> list[np.ndarray | None]:
    """Per tabulation level, ``(units, variables)`` published values (P1-P5, H1); ``None``
    for a release directory without its tables (the GLS needs only the NMF)."""
    if not run.tables_dir.is_dir():
        return [None] * tab.n_levels
    arrs = read_table_arrays(run.tables_dir, tab)
    return [
        np.concatenate([arrs[t][lv] for t in TABLE_NAMES], axis=1) for lv in range(tab.n_levels)
    ]


def tabulation_sds(
    run_dir: str | Path,
    *,
    executor: object | None = None,
    progress: Progress = None,
) -> tuple[ReleaseGLS, dict[str, np.ndarray]]:
    """The GLS sd of every line at every published geounit (the tabulation hierarchy,
    whatever spine the release used: the numbers of ``margins.parquet``), without
    writing anything; for ``censusdp evaluate RUN`` without the truth.

    Returns:
        The release's GLS (its ``direct`` sds, ``lines``) and, per tabulation level,
        ``(units, lines)`` standard deviations.
    """
    gls = release_gls(run_dir, executor=executor, progress=progress)
    geo = gls.geography
    assert geo is not None and gls.line_sets is not None and gls.factors is not None
    targets = tabulation_geographies(geo)
    acc = MarginAccumulator(targets, gls.hierarchy.blocks.size, len(gls.lines))
    bottom = gls.hierarchy.n_levels - 1
    for res in gls.chunks:
        if res.level == bottom:
            acc.add_blocks(res.start, res.stop, res.estimate, res.sd)
    parts = _variance_parts(gls)
    out = {
        g.geolevel: np.sqrt(exact_zero(v, s))
        for g, v, s in zip(targets, acc.variances(gls.hierarchy, parts), acc.sums, strict=True)
    }
    tab = geo.tabulation
    out[tab.geolevels.names[-1]] = geo.to_tabulation(acc.block_sd)
    return gls, out


def _unit_spine(geo: ReleaseGeography) -> UnitSpine | None:
    """The unit run's own spine (``None`` when it was measured on the persons')."""
    order = geo.unit_order()
    return None if order is None else UnitSpine(geo.units.estimation, order)


def _variance_parts(gls: ReleaseGLS) -> list[tuple[Any, ...]]:
    """The person and unit trees' factors, lines, columns (and the unit run's own spine)."""
    assert gls.line_sets is not None and gls.factors is not None and gls.geography is not None
    n_person = len(gls.line_sets[0])
    return [
        (gls.factors[0], gls.line_sets[0], slice(0, n_person)),
        (
            gls.factors[1],
            gls.line_sets[1],
            slice(n_person, len(gls.lines)),
            _unit_spine(gls.geography),
        ),
    ]


def amc_plan(run_dir: str | Path) -> AMCPlan:
    """What re-releasing the release at ``run_dir`` needs (its MDF as the plausible
    truth, its budgets, shares, spine and estimation options): the AMC of ``infer``'s
    margins and of ``censusdp evaluate RUN`` (:func:`censusdp.infer.amc.simulate_margins`).

    Raises:
        InputError: for a release without a recorded budget, MDF or published counts.
    """
    run = RunDir(run_dir)
    manifest, geo, _ = _read_release(run)
    return _amc_plan(run, manifest, geo)


def _amc_plan(run: RunDir, manifest: ReleaseManifest, geo: ReleaseGeography) -> AMCPlan:
    """What re-releasing ``run`` needs: its MDF (the plausible truth: its persons, units
    and a household run's households), budgets, shares and estimation options
    (:mod:`censusdp.infer.amc`); refuses, before reading the MDF, a re-release that
    would not fit in memory (:func:`~censusdp.infer.amc.require_affordable`)."""
    budget, units_budget = recorded_budgets(manifest, str(run.manifest_file))  # type: ignore[arg-type]
    postprocess = str(manifest.get("postprocess") or "topdown")
    if postprocess not in ("topdown", "bottomup"):
        raise InputError(
            f"{run.manifest_file}: postprocess {postprocess!r} published no counts to "
            "simulate (--simulations needs a release with tables)"
        )
    for f in (run.mdf_file("persons"), run.mdf_file("units")):
        if not f.exists():
            raise InputError(f"{f}: missing file (--simulations re-releases the MDF)")
    tab, inv = run.invariants(GeoLevels.from_pairs(list(budget.geolevels)))
    schema = get_schema(budget.schema)
    plans = (
        [(m.geolevel, m.query, m.mechanism) for m in budget.measurements()],
        None
        if units_budget is None
        else [(m.geolevel, m.query, m.mechanism) for m in units_budget.measurements()],
    )
    shares = (
        geo.unit_shares(budget),
        None if units_budget is None else geo.units.unit_shares(units_budget),
    )
    # the release's own estimation choices (older manifests: the defaults then; a DHC
    # household run records a sentence, its fidelity decides)
    consistency = str(manifest.get("units_estimation") or "consistent")
    options = ReleaseOptions(
        postprocess=postprocess,
        unit_consistency=consistency if consistency in UNIT_CONSISTENCY_CHOICES else "consistent",
        estimator=str(manifest.get("estimator") or "ls"),
        max_children=manifest.get("max_children"),
        fidelity=str((manifest.get("fidelity") or {}).get("mode") or "default"),
    )
    household = household_schema(manifest)
    rough = ""
    if household == HOUSEHOLD_SCHEMA and options.unit_consistency == "consistent":
        rough = HELD_TO_HOUSEHOLDS
    unit_schema = "units" if units_budget is None else units_budget.schema
    empty = AMCPlan(
        schema, [], None, inv, geo, plans, shares, options, {}, None, unit_schema, rough
    )
    require_affordable(empty, run.path)
    person, pl94, units = read_mdf_histograms(run.path, tab, schema)
    households, tenure = (
        (None, None) if household is None else run.mdf_households(tab, household, inv.gq_facilities)
    )
    return plausible_truth(empty, ReleasedBlocks(person, pl94, units, households, tenure))


def _write_margins(
    out_dir: Path,
    gls: ReleaseGLS,
    acc: MarginAccumulator,
    published: list[np.ndarray | None],
    formats: tuple[str, ...],
    amc: AMCResult | None = None,
) -> dict[str, Any]:
    """``margins.*`` (every tabulation geography), ``places.*`` (county subdivisions,
    places, AIAN areas) and ``districts.*`` (a plan's), long form."""
    hierarchy, geo = gls.hierarchy, gls.geography
    assert gls.line_sets is not None and gls.factors is not None and geo is not None
    variances = acc.variances(hierarchy, _variance_parts(gls))
    tab = geo.tabulation
    counts: dict[str, int] = {}
    with ExitStack() as stack:
        margins = LongWriter(stack, out_dir, "margins", formats)
        # a plan's districts, and the places, county subdivisions and AIAN areas (not
        # rows of tables/: their published values are sums of published blocks)
        groups = {
            kind: LongWriter(stack, out_dir, name, formats)
            for kind, name in (("district", "districts"), ("entity", "places"))
            if any(g.kind == kind for g in acc.geographies)
        }
        n_group = 0  # entities and districts: their AMC errors in this order
        for g, est, var in zip(acc.geographies, acc.sums, variances, strict=True):
            if g.tabulation_level is None:  # published block sums
                mse = None if amc is None else amc.districts[n_group]
                n_group += 1
                pub = None
                if published[-1] is not None:
                    pub = np.zeros((g.n, published[-1].shape[1]), dtype=np.int64)
                    unit = geo.to_tabulation(g.target)
                    keep = unit >= 0
                    np.add.at(pub, unit[keep], published[-1][keep])
                groups[g.kind].write(long_table(g, gls.lines, est, var, pub, mse))
            else:
                lv = g.tabulation_level
                mse = None if amc is None else amc.levels[lv]
                margins.write(long_table(g, gls.lines, est, var, published[lv], mse))
            counts[g.geolevel] = g.n
        # blocks: the tree's own estimates (each spine block is a tabulation block)
        bl = tab.n_levels - 1
        ids = geo_identifiers(tab.geocodes[bl], tab.geolevels.levels[bl].length, "Block")
        est = geo.to_tabulation(acc.block_estimate)
        var = geo.to_tabulation(acc.block_sd) ** 2
        step = 2048
        for a in range(0, tab.n_units(bl), step):
            sl = slice(a, min(a + step, tab.n_units(bl)))
            g = TargetGeography("Block", np.zeros(0), {k: v[sl] for k, v in ids.items()}, bl)
            pub = published[bl]
            mse = None if amc is None else amc.levels[bl][sl]
            table = long_table(
                g, gls.lines, est[sl], var[sl], None if pub is None else pub[sl], mse
            )
            margins.write(table, csv="parquet" not in formats)  # blocks: CSV only if alone
        counts["Block"] = tab.n_units(bl)
    districts, places = groups.get("district"), groups.get("entity")
    return {
        "files": [p.name for w in (margins, districts, places) if w is not None for p in w.paths],
        "rows": margins.rows,
        "district_rows": districts.rows if districts else 0,
        "place_rows": places.rows if places else 0,
        "geounits": counts,
    }


def _stream_estimates(
    out_dir: Path, gls: ReleaseGLS, acc: MarginAccumulator | None, progress: Progress
) -> tuple[int, LevelStats]:
    """Write ``estimates.parquet`` (the estimated geounits) as the GLS streams; feed the
    bottom level's chunks to ``acc``."""
    hierarchy = gls.hierarchy
    names = hierarchy.geolevels.names
    nlines = len(gls.lines)
    bottom = hierarchy.n_levels - 1
    stats = LevelStats()
    rows = 0
    with atomic_path(out_dir / "estimates.parquet") as tmp:
        writer: pq.ParquetWriter | None = None
        n_units = sum(hierarchy.n_units(i) for i in range(hierarchy.n_levels))
        bar = task(progress, "GLS estimates", n_units, unit="geounits", summary=False)
        try:
            for res in gls.chunks:
                bar.advance(res.stop - res.start)
                dsd = gls.direct.get(res.level, np.full(nlines, np.inf))
                stats.add(names[res.level], gls.lines, res.sd, dsd)
                if acc is not None and res.level == bottom:
                    acc.add_blocks(res.start, res.stop, res.estimate, res.sd)
                table = chunk_table(
                    names[res.level],
                    hierarchy.geocodes[res.level][res.start : res.stop],
                    gls.lines,
                    res.estimate,
                    res.sd,
                )
                if writer is None:
                    writer = pq.ParquetWriter(tmp, table.schema, compression="zstd")
                writer.write_table(table, row_group_size=max(table.num_rows, 1))
                rows += table.num_rows
            bar.close()
        finally:
            if writer is not None:
                writer.close()
    return rows, stats


def infer_release(
    run_dir: str | Path,
    out_dir: str | Path,
    options: InferOptions | None = None,
    execution: Execution | None = None,
    *,
    overwrite: bool = False,
    command: list[str] | None = None,
) -> dict[str, Any]:
    """GLS estimates, standard deviations and intervals of every published cell.

    Args:
        run_dir: a release directory written by ``censusdp run``.
        out_dir: the directory to write ``estimates.parquet`` (the estimated geounits),
            ``margins.parquet``/``.csv`` (every published geounit and variable, long form,
            keyed as ``tables/``), ``districts.*`` (with a plan) and ``manifest.json`` to.
        options: the exact facts entered and the long forms' plan, formats and AMC
            simulations (:class:`~censusdp.infer.options.InferOptions`; default: the
            zeros entered, no plan, Parquet and CSV, no simulation).
        execution: where the bottom level's family tasks (and the AMC's) run
            (``executor``, ``workers``, ``spark_master``:
            :func:`censusdp.execution.make_executor`) and where progress lines go; the
            output does not depend on it.
        overwrite: replace an earlier output of censusdp at ``out_dir`` (one that holds
            nothing but what its manifest lists; see :class:`censusdp.io.staging.Staging`).
        command: recorded in the manifest.

    Returns:
        The manifest written to ``out_dir/manifest.json``.

    Raises:
        InputError: for a missing or malformed release file or plan.
        ConfigError: for an existing non-empty ``out_dir`` without ``overwrite``.
    """
    t0 = time.perf_counter()
    run, out_dir = RunDir(run_dir), Path(out_dir)
    run_dir = run.path
    options = options or InferOptions()
    execution = execution or Execution()
    zero_constraints, progress = options.zero_constraints, execution.progress
    geography, formats = options.margins.geography, options.margins.formats
    simulations, seed = options.margins.simulations, options.margins.seed
    inputs = [run_dir] + ([Path(geography)] if geography is not None else [])
    _refuse_unreadable(RunDir(run_dir))
    with staged_output(out_dir, overwrite, inputs, command="infer") as staging:
        out_dir = staging.path
        require_valid(run_dir, what="infer", mdf=False, progress=progress)
        timings: dict[str, float] = {}
        ex = make_executor(
            execution.workers, kind=execution.executor, spark_master=execution.spark_master
        )
        describe = getattr(ex, "describe", None)
        ex_record = describe() if describe is not None else {"name": getattr(ex, "name", "")}
        try:
            gls = release_gls(
                run_dir,
                zero_constraints=zero_constraints,
                executor=ex,
                progress=progress,
                timings=timings,
            )
            geo = gls.geography
            assert geo is not None
            targets = tabulation_geographies(geo) + entity_target_geographies(geo)
            if geography is not None:
                plan = read_plan(geography, geo.tabulation)
                targets.append(district_geography(plan, geo))
                say(progress, f"plan {geography}: {targets[-1].n:,} districts")
            published = _published_levels(run, geo.tabulation)
            acc = MarginAccumulator(targets, gls.hierarchy.blocks.size, len(gls.lines))
            t = time.perf_counter()
            rows, stats = _stream_estimates(out_dir, gls, acc, progress)
            timings["persons"] = time.perf_counter() - t
            amc = None
            if simulations > 0:
                t = time.perf_counter()
                amc = simulate_margins(
                    _amc_plan(run, gls.manifest, geo),
                    [geo.to_tabulation(g.target) for g in targets if g.tabulation_level is None],
                    options.margins,
                    executor=ex,
                    progress=progress,
                )
                timings["amc"] = time.perf_counter() - t
        finally:
            close = getattr(ex, "close", None)
            if close is not None:
                close()
        say(progress, f"wrote {rows:,} estimates (estimates.parquet)")
        t = time.perf_counter()
        written = _write_margins(out_dir, gls, acc, published, formats, amc)
        timings["margins"] = time.perf_counter() - t
        say(
            progress,
            f"wrote {written['rows']:,} margins of published geounits ({', '.join(written['files'])})",
        )
        timings["total"] = time.perf_counter() - t0
        manifest = output_manifest(
            gls, run_dir, run.manifest_file, command, zero_constraints, rows, stats
        )
        manifest["margins"] = {
            "note": MARGINS_NOTE,
            **written,
            "amc": amc_record(
                amc,
                seed,
                tuple(geo.tabulation.geolevels.names),
                tuple(g.geolevel for g in acc.geographies if g.tabulation_level is None),
            ),
        }
        if household_lines(gls.manifest):  # the household run's lines, each with why
            manifest["not_estimated"] = household_lines(gls.manifest)
        if geography is not None:
            manifest["plan"] = str(Path(geography).resolve())
        manifest.update(
            {
                "executor": ex_record,
                "platform": platform.platform(),
                "timings": {k: round(v, 4) for k, v in timings.items()},
                "peak_memory_mb": peak_rss_mb(),
                "outputs": ["estimates.parquet", *written["files"], MANIFEST_FILE],
            }
        )
        write_text(json.dumps(manifest, indent=2, allow_nan=False) + "\n", out_dir / MANIFEST_FILE)
        return manifest


def read_margins(out_dir: str | Path) -> dict[str, pa.Table]:
    """The long forms an ``infer`` output holds: ``{"margins": ..., "places": ...,
    "districts": ...}`` (``places`` only for a release that records its blocks' places
    or AIAN areas, ``districts`` only when a plan was given)."""
    out = {}
    for name in ("margins", "places", "districts"):
        path = Path(out_dir) / f"{name}.parquet"
        if path.exists():
            out[name] = pq.read_table(path)
        elif (Path(out_dir) / f"{name}.csv").exists():
            convert = pcsv.ConvertOptions(
                column_types={"GEOID": pa.string(), "SUMLEV": pa.string()}
            )
            out[name] = pcsv.read_csv(Path(out_dir) / f"{name}.csv", convert_options=convert)
    return out
