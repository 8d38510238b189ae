"""``censusdp infer RUN --out DIR``: GLS estimates of every published cell from a release.

Reads only what a release publishes: ``RUN/manifest.json`` (geolevels, schema),
``RUN/noisy_measurements.parquet`` (and ``noisy_measurements_units.parquet`` when the
housing-unit run was measured), ``RUN/invariants.parquet`` and
``RUN/invariant_totals.parquet``. The noise variance of every measurement is read from
the NMF's ``variance`` column, never recomputed from the budget.

Writes ``DIR/estimates.parquet``, one row per geolevel x geounit x line:
``geolevel``, ``geocode``, ``query`` (``total``, ``P1_001N`` ... ``P5_010N``,
``H1_001N`` ... ``H1_003N``), ``estimate`` (the real-valued GLS estimate), ``sd``, and
the integer 90% and 95% intervals ``ci90_low`` ... ``ci95_high``
(:func:`censusdp.infer.gls.census_intervals`); and ``DIR/manifest.json``.

Exact facts entered: the state total population (and so the US total), the housing
units of every block (H1_001N exact at every level), and, unless
``zero_constraints=False``, the zeros the block invariants imply (no household
population without housing units; no population of a group-quarters type without a
facility of that type; no housing units of either occupancy where there are none).
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.data.geography import GeoLevels, Hierarchy
from censusdp.data.invariants import N_HHGQ, Invariants
from censusdp.data.schema import get_schema
from censusdp.errors import InputError, SchemaError
from censusdp.execution import make_executor
from censusdp.infer._algebra import Layout, make_layout
from censusdp.infer.gls import (
    Z90,
    Z95,
    Constraints,
    LevelDesign,
    LevelEstimates,
    LineSet,
    census_intervals,
    direct_sd,
    level_design,
    make_lines,
    tree_gls,
)
from censusdp.io.atomic import atomic_path, write_text
from censusdp.io.nmf_read import NMFReader
from censusdp.io.rundir import RunDir
from censusdp.io.staging import staged_output
from censusdp.privacy.release_budget import release_privacy
from censusdp.progress import Progress, say, task
from censusdp.release.manifest import MANIFEST_FILE, peak_rss_mb, recorded_budgets
from censusdp.release.spine import ReleaseGeography, geography_of_run
from censusdp.release.validate import require_valid
from censusdp.tables import PERSON_TABLES, table_definition
from censusdp.version import __version__

__all__ = ["ESTIMATE_COLUMNS", "ReleaseGLS", "infer_release", "release_gls"]

ESTIMATE_COLUMNS = (
    "geolevel",
    "geocode",
    "query",
    "estimate",
    "sd",
    "ci90_low",
    "ci90_high",
    "ci95_low",
    "ci95_high",
)


def _person_lines(layout: Layout) -> LineSet:
    """``total`` and every line of P1-P5 (the ``pl94`` schema's cells)."""
    if layout.schema.name != "pl94":
        raise SchemaError(
            f"infer tabulates P1-P5 from the pl94 schema; this release measured "
            f"{layout.schema.name!r}"
        )
    names = ["total"]
    mats = [np.ones((layout.schema.size, 1))]
    for t in PERSON_TABLES:
        d = table_definition(t)
        names.extend(d.variables)
        mats.append(d.matrix.toarray())
    return make_lines(layout, names, np.concatenate(mats, axis=1))


def _unit_lines(layout: Layout) -> LineSet:
    """H1 on the ``units`` schema (cell 0 vacant, 1 occupied housing units)."""
    d = table_definition("H1")
    hu = d.matrix.toarray()[[0, 1]]  # unit-histogram cells 2*0+0 (vacant), 2*0+1 (occupied)
    return make_lines(layout, list(d.variables), hu)


def _zero_persons(layout: Layout, inv: Invariants) -> np.ndarray:
    """``(blocks, d)``: general combinations whose HHGQ group cannot occur in each block."""
    has = np.zeros((inv.blocks.size, N_HHGQ), dtype=bool)
    has[:, 0] = inv.housing_units > 0
    has[:, 1:] = inv.gq_facilities[:, 1:] > 0
    group = layout.general_of("hhgq")
    return ~has[:, group]


def _read_release(run_dir: Path) -> tuple[dict, ReleaseGeography, Invariants]:
    """The manifest, the geography measured on, and the invariants in its block order."""
    for name in (
        "manifest.json",
        "noisy_measurements.parquet",
        "invariants.parquet",
        "invariant_totals.parquet",
    ):
        if not (run_dir / name).exists():  # the NMF may be a directory of part files
            raise InputError(f"{run_dir / name}: missing file (infer needs a release directory)")
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"{run_dir / 'manifest.json'}: not valid JSON ({exc})") from None
    if "geolevels" not in manifest:
        raise InputError(f"{run_dir / 'manifest.json'}: no 'geolevels'")
    hierarchy, inv = RunDir(run_dir).invariants(GeoLevels.from_pairs(manifest["geolevels"]))
    # a spine release measured the spine's geounits (spine.parquet): infer estimates them
    geo = geography_of_run(run_dir, manifest, hierarchy)
    return manifest, geo, geo.invariants(inv)


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


def _chunk_table(
    level: str, codes: np.ndarray, names: tuple[str, ...], est: np.ndarray, sd: np.ndarray
) -> pa.Table:
    n, k = est.shape
    e, s = est.reshape(-1), sd.reshape(-1)
    lo90, hi90 = census_intervals(e, s, Z90)
    lo95, hi95 = census_intervals(e, s, Z95)
    return pa.table(
        {
            "geolevel": pa.DictionaryArray.from_arrays(
                pa.array(np.zeros(n * k, np.int32)), pa.array([level], pa.string())
            ),
            "geocode": pa.DictionaryArray.from_arrays(
                pa.array(np.repeat(np.arange(n, dtype=np.int32), k)),
                pa.array(codes.astype(object), pa.string()),
            ),
            "query": pa.DictionaryArray.from_arrays(
                pa.array(np.tile(np.arange(k, dtype=np.int32), n)),
                pa.array(list(names), pa.string()),
            ),
            "estimate": pa.array(e, pa.float64()),
            "sd": pa.array(s, pa.float64()),
            "ci90_low": pa.array(lo90, pa.int64()),
            "ci90_high": pa.array(hi90, pa.int64()),
            "ci95_low": pa.array(lo95, pa.int64()),
            "ci95_high": pa.array(hi95, pa.int64()),
        }
    )


class _LevelStats:
    """Per geolevel: rows, mean sd of ``total``, and the largest GLS sd / direct sd."""

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}
        self.total_sd: dict[str, list[float]] = {}
        self.ratio: dict[str, float] = {}
        self.exact: dict[str, int] = {}

    def add(self, level: str, names: tuple[str, ...], sd: np.ndarray, direct: np.ndarray) -> None:
        self.rows[level] = self.rows.get(level, 0) + sd.size
        self.exact[level] = self.exact.get(level, 0) + int((sd == 0).sum())
        if "total" in names:
            acc = self.total_sd.setdefault(level, [0.0, 0.0])
            acc[0] += float(sd[:, names.index("total")].sum())
            acc[1] += sd.shape[0]
        finite = np.isfinite(direct) & (direct > 0)
        if finite.any():
            r = float((sd[:, finite] / direct[finite]).max(initial=0.0))
            self.ratio[level] = max(self.ratio.get(level, 0.0), r)

    def to_dict(self, direct: dict[str, dict[str, float]]) -> dict[str, Any]:
        out = {}
        for level, rows in self.rows.items():
            tot = self.total_sd.get(level)
            out[level] = {
                "rows": rows,
                "rows_known_exactly": self.exact.get(level, 0),
                "mean_sd_total": tot[0] / tot[1] if tot and tot[1] else None,
                "direct_sd_total": direct.get(level, {}).get("total"),
                "max_sd_over_direct_sd": self.ratio.get(level),
            }
        return out


@dataclass(frozen=True, eq=False)
class ReleaseGLS:
    """The GLS of a whole release, ready to stream (:func:`release_gls`).

    Attributes:
        hierarchy: the release's geounits.
        manifest: the release manifest.
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
    """

    hierarchy: Hierarchy
    manifest: dict[str, Any]
    schema_name: str
    total_level: int
    lines: tuple[str, ...]
    direct: dict[int, np.ndarray]
    occupancy: str
    noise_variances: dict[str, dict[str, float]]
    chunks: Iterator[LevelEstimates]
    tabulation: dict[str, Any] | None = None


TABULATION_NOTE = (
    "estimates are of the spine's geounits (spine.parquet maps blocks to them); a "
    "tabulation geounit that is not one spine geounit (e.g. a block group, or a county "
    "split into AIAN and non-AIAN parts) is not estimated: its sd would need the GLS "
    "covariance between spine geounits, which the two-pass tree algorithm does not form"
)


def tabulation_match(geo: ReleaseGeography) -> dict[str, Any] | None:
    """Per tabulation level, how many of its geounits are exactly one spine geounit of
    the same name (the same blocks), whose estimate is then the tabulation geounit's."""
    if geo.spine is None:
        return None
    tab, h = geo.tabulation, geo.estimation
    out: dict[str, Any] = {"note": TABULATION_NOTE, "levels": {}}
    for ti, lv in enumerate(tab.geolevels.levels):
        if lv.name not in h.geolevels.names or ti == 0:
            continue
        si = h.geolevels.index(lv.name)
        # per block (spine order): its spine unit and its tabulation unit
        spine_unit = h.ancestor_index(si)
        tab_unit = geo.to_estimation(tab.ancestor_index(ti))
        pairs = np.unique(np.stack([spine_unit, tab_unit]), axis=1)
        spine_parts = np.bincount(pairs[0], minlength=h.n_units(si))
        tab_parts = np.bincount(pairs[1], minlength=tab.n_units(ti))
        same = (spine_parts[pairs[0]] == 1) & (tab_parts[pairs[1]] == 1)
        out["levels"][lv.name] = {
            "tabulation_geounits": int(tab.n_units(ti)),
            "estimated_as_one_spine_geounit": int(same.sum()),
        }
    return out


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
    run_dir = Path(run_dir)
    t = time.perf_counter()
    manifest_in, geo, inv = _read_release(run_dir)
    hierarchy = geo.estimation
    schema = get_schema(str(manifest_in.get("schema", "pl94")))
    if schema.name != "pl94":
        raise SchemaError(
            f"GLS is implemented for releases on the pl94 schema only; {run_dir} was measured "
            f"on {schema.name!r} (its AGE attribute needs another factor in the block algebra; "
            "see docs/inference.md, Limits)"
        )
    persons = NMFReader(run_dir / "noisy_measurements.parquet", schema, hierarchy)
    layout = _layout_for(persons, hierarchy, ("hhgq",))
    lines = _person_lines(layout)
    bottom = hierarchy.n_levels - 1
    totals_persons = geo.exact_totals(inv)
    pcons = Constraints(_zero_persons(layout, inv) if zero_constraints else None, totals_persons)
    timings["read"] = time.perf_counter() - t
    say(progress, f"read release {run_dir}: {hierarchy.blocks.size:,} blocks, schema {schema.name}")

    # -- housing units (small: kept in memory, merged into the person rows) ----------------
    t = time.perf_counter()
    unit_rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    hu_levels = [
        np.asarray(a, dtype=np.float64).ravel()
        for a in hierarchy.aggregate(inv.housing_units.reshape(-1, 1))
    ]
    units_path = run_dir / "noisy_measurements_units.parquet"
    unit_direct: dict[int, np.ndarray] = {}
    if units_path.exists():
        ureader = NMFReader(units_path, get_schema("units"), hierarchy)
        ulayout = _layout_for(ureader, hierarchy, ("occupancy",))
        ulines = _unit_lines(ulayout)
        zero_hu = np.repeat((inv.housing_units == 0)[:, None], ulayout.d, axis=1)
        ucons = Constraints(zero_hu if zero_constraints else None, {bottom: hu_levels[bottom]})
        parts: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
        for res in tree_gls(ureader, hierarchy, ulayout, ulines, ucons):
            parts.setdefault(res.level, []).append((res.estimate, res.sd))
        for level, chunks in parts.items():
            unit_rows[level] = (
                np.concatenate([c[0] for c in chunks]),
                np.concatenate([c[1] for c in chunks]),
            )
        for level, des in _designs(ureader, ulayout, hierarchy).items():
            unit_direct[level] = direct_sd(ulayout, des, ulines)
        unit_names = ulines.names
        occupancy = "GLS from noisy_measurements_units.parquet"
    else:
        unit_names = ("H1_001N",)
        for level in range(hierarchy.n_levels):
            unit_rows[level] = (hu_levels[level][:, None], np.zeros((hu_levels[level].size, 1)))
        occupancy = "not measured in this release: only H1_001N (housing units, invariant)"
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

    def merged() -> Iterator[LevelEstimates]:
        for res in tree_gls(
            persons, hierarchy, layout, lines, pcons, executor=executor, progress=progress
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
    )


def infer_release(
    run_dir: str | Path,
    out_dir: str | Path,
    *,
    overwrite: bool = False,
    workers: int = 1,
    executor: str = "auto",
    spark_master: str | None = None,
    zero_constraints: bool = True,
    progress: Progress = None,
    command: list[str] | None = None,
) -> dict[str, Any]:
    """GLS estimates, standard deviations and intervals of every published cell.

    Args:
        run_dir: a release directory written by ``censusdp run``.
        out_dir: the directory to write ``estimates.parquet`` and ``manifest.json`` to.
        overwrite: replace an earlier output of censusdp at ``out_dir`` (one that holds
            nothing but what its manifest lists; see :class:`censusdp.io.staging.Staging`).
        workers, executor, spark_master: where the bottom level's family tasks run
            (:func:`censusdp.execution.local.make_executor`); the output does not depend on it.
        zero_constraints: enter the zeros implied by the block invariants.
        progress: receives log lines.
        command: recorded in the manifest.

    Returns:
        The manifest written to ``out_dir/manifest.json``.

    Raises:
        InputError: for a missing or malformed release file.
        ConfigError: for an existing non-empty ``out_dir`` without ``overwrite``.
    """
    t0 = time.perf_counter()
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    with staged_output(out_dir, overwrite, [run_dir], command="infer") as staging:
        out_dir = staging.path
        require_valid(run_dir, what="infer", mdf=False, progress=progress)
        timings: dict[str, float] = {}
        ex = make_executor(workers, kind=executor, spark_master=spark_master)
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
            hierarchy = gls.hierarchy
            if gls.tabulation is not None:
                say(progress, f"note: {gls.tabulation['note']}")
            names = hierarchy.geolevels.names
            nlines = len(gls.lines)
            stats = _LevelStats()
            rows = 0
            t = time.perf_counter()
            with atomic_path(out_dir / "estimates.parquet") as tmp:
                writer: pq.ParquetWriter | None = None
                n_units = sum(hierarchy.n_units(i) for i in range(hierarchy.n_levels))
                bar = task(progress, "GLS estimates", n_units, unit="geounits", summary=False)
                try:
                    for res in gls.chunks:
                        bar.advance(res.stop - res.start)
                        dsd = gls.direct.get(res.level, np.full(nlines, np.inf))
                        stats.add(names[res.level], gls.lines, res.sd, dsd)
                        table = _chunk_table(
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
            timings["persons"] = time.perf_counter() - t
        finally:
            close = getattr(ex, "close", None)
            if close is not None:
                close()
        say(progress, f"wrote {rows:,} estimates to {staging.out_dir / 'estimates.parquet'}")

        timings["total"] = time.perf_counter() - t0
        direct_named = {
            names[lv]: {"total": float(v[0])} for lv, v in gls.direct.items() if np.isfinite(v[0])
        }
        manifest_in = gls.manifest
        # the privacy loss its budgets compose to (what validation held the manifest to),
        # recomputed, never the manifest's own words
        spent = release_privacy(*recorded_budgets(manifest_in, str(run_dir / MANIFEST_FILE)))
        bottom = hierarchy.n_levels - 1
        manifest: dict[str, Any] = {
            "package_version": __version__,
            "command": command,
            "release": str(run_dir.resolve()),
            "release_rho": spent["rho"],
            "release_epsilon": spent["epsilon"],
            "release_delta": spent["delta"],
            "release_mechanism": spent["mechanism"],
            "method": "two-pass tree GLS (BLUE) from the noisy measurements; variances read from the NMF",
            "seed": None,
            "randomness": "none (deterministic computation)",
            "schema": gls.schema_name,
            "geolevels": [[lv.name, lv.length] for lv in hierarchy.geolevels.levels],
            "geounits": {
                lv.name: hierarchy.n_units(i) for i, lv in enumerate(hierarchy.geolevels.levels)
            },
            "spine": (manifest_in.get("spine") or {}).get("kind", "tabulation"),
            **({"tabulation_geounits": gls.tabulation} if gls.tabulation is not None else {}),
            "constraints": {
                "total_population_exact_at": names[gls.total_level],
                "housing_units_exact_at": names[bottom],
                "zeros_from_block_invariants": bool(zero_constraints),
            },
            "housing_units": gls.occupancy,
            "interval_rule": (
                "low = max(ceil(estimate - z sd - t), 0), high = max(floor(estimate + z sd + t), 0), "
                "t = 1e-9 max(1, |estimate|) (round-off)"
            ),
            "z": {"ci90": Z90, "ci95": Z95},
            "columns": list(ESTIMATE_COLUMNS),
            "lines": list(gls.lines),
            "rows": rows,
            "levels": stats.to_dict(direct_named),
            "noise_variances": gls.noise_variances,
            "executor": ex_record,
            "platform": platform.platform(),
            "timings": {k: round(v, 4) for k, v in timings.items()},
            "peak_memory_mb": peak_rss_mb(),
            "outputs": ["estimates.parquet", "manifest.json"],
        }
        write_text(
            json.dumps(manifest, indent=2, allow_nan=False) + "\n", out_dir / "manifest.json"
        )
        return manifest
