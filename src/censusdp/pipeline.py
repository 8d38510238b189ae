"""The release pipeline: read -> aggregate -> measure -> estimate -> write -> validate.

:func:`run_release` is what ``censusdp run`` calls. Data flows one way (DESIGN.md):
the confidential input is read and validated, aggregated and measured; from then on
only the :class:`~censusdp.measure.MeasurementSet` and the public
:class:`~censusdp.invariants.Invariants` are passed on, so :func:`reestimate` can rebuild
a release from a run directory's noisy measurement file alone.

Two runs compose, as in 2020 production: the person run (the preset's schema) and the
housing-unit run (schema ``units``: occupied vs vacant housing units, total housing
units invariant at every block), each with its own budget; the manifest reports both
and their total.

Every output is written into a staging directory next to ``out_dir`` and renamed into
place only when the whole release has been written and validated, so a failed run
leaves nothing half-written.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import sys
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import scipy.sparse as sp

from censusdp import __version__
from censusdp._random import RandomSource
from censusdp.errors import ConfigError, InputError, InternalError
from censusdp.executors import make_executor
from censusdp.geography import GeoLevels, Hierarchy
from censusdp.invariants import Invariants, compute_invariants, level_bounds
from censusdp.io.atomic import write_json, write_parquet
from censusdp.io.cef import CEF, read_cef
from censusdp.io.release import (
    mdf_person_columns,
    read_nmf,
    write_mdf_persons,
    write_mdf_text,
    write_mdf_units,
    write_nmf,
)
from censusdp.measure import MeasurementSet, measure
from censusdp.schema import get_schema
from censusdp.tables import person_histogram, tables_to_arrays, tabulate, write_tables
from censusdp.topdown.driver import Bounds, Estimate, estimate
from censusdp.validate import validate_release

__all__ = ["POSTPROCESS_CHOICES", "reestimate", "run_release"]

POSTPROCESS_CHOICES = ("topdown", "bottomup", "none")

Progress = Callable[[str], None] | None


def _say(progress: Progress, msg: str) -> None:
    if progress is not None:
        progress(msg)


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for pkg in ("numpy", "scipy", "pyarrow", "clarabel", "ortools", "cryptography", "mpmath"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[pkg] = metadata.version(pkg)
    return out


def _geolevels(budget: Any) -> GeoLevels:
    return GeoLevels.from_pairs(list(budget.geolevels))


def _plan(budget: Any) -> list[tuple[str, str, Any]]:
    return [(m.geolevel, m.query, m.mechanism) for m in budget.measurements()]


class _Staging:
    """A staging directory renamed onto ``out_dir`` on success, removed on failure."""

    def __init__(self, out_dir: Path, overwrite: bool) -> None:
        self.out_dir = out_dir
        if out_dir.exists() and any(out_dir.iterdir()) and not overwrite:
            raise ConfigError(
                f"output directory {out_dir} exists and is not empty; "
                "choose another --out or pass --overwrite"
            )
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        self.path = out_dir.parent / f".{out_dir.name}.partial-{os.getpid()}"
        if self.path.exists():
            shutil.rmtree(self.path)
        self.path.mkdir()

    def commit(self) -> None:
        if self.out_dir.exists():
            old = self.out_dir.parent / f".{self.out_dir.name}.old-{os.getpid()}"
            os.replace(self.out_dir, old)
            shutil.rmtree(old, ignore_errors=True)
        os.replace(self.path, self.out_dir)

    def abort(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _person_bounds(inv: Invariants, hierarchy: Hierarchy) -> list[Bounds]:
    return [Bounds(*b) for b in level_bounds(inv, hierarchy)]


def _unit_bounds(inv: Invariants, hierarchy: Hierarchy) -> list[Bounds]:
    """Housing units: one group, total exact at every level (the block invariant)."""
    agg = hierarchy.aggregate(inv.housing_units.reshape(-1, 1))
    out = []
    for li in range(hierarchy.n_levels):
        tot = np.asarray(agg[li], dtype=np.float64).ravel()
        n = tot.size
        out.append(Bounds(np.zeros((n, 1)), np.full((n, 1), np.inf), tot.copy(), tot.copy()))
    return out


def _unit_histogram(cef: CEF, hierarchy: Hierarchy) -> sp.csr_matrix:
    hu = cef.units["gqtype"] == 0
    rows = hierarchy.block_index(cef.units["geocode"][hu])
    occ = cef.units["occupied"][hu].astype(np.int64)
    return sp.csr_matrix(
        (np.ones(rows.size, dtype=np.int64), (rows, occ)),
        shape=(hierarchy.blocks.size, 2),
    )


def _measure_all(
    cef: CEF,
    hierarchy: Hierarchy,
    budget: Any,
    units_budget: Any | None,
    source: RandomSource,
    progress: Progress,
) -> tuple[MeasurementSet, MeasurementSet | None]:
    """The only function that reads confidential histograms."""
    schema = get_schema(budget.schema)
    block_hist = person_histogram(cef.persons, hierarchy, schema)
    ms = measure(
        hierarchy.aggregate(block_hist),
        hierarchy,
        schema,
        _plan(budget),
        source.child("persons"),
        progress=progress,
    )
    ums = None
    if units_budget is not None:
        ums = measure(
            hierarchy.aggregate(_unit_histogram(cef, hierarchy)),
            hierarchy,
            get_schema("units"),
            _plan(units_budget),
            source.child("units"),
            progress=progress,
        )
    return ms, ums


def _budget_summary(budget: Any, units_budget: Any | None) -> dict:
    from censusdp import accounting

    out: dict[str, Any] = {"persons": budget.to_dict()}
    rho_total = None
    if budget.mechanism == "discrete_gaussian":
        rho_total = budget.total
        if units_budget is not None:
            out["units"] = units_budget.to_dict()
            rho_total = rho_total + units_budget.total
        delta = float(budget.delta)
        out["rho"] = float(rho_total)
        out["rho_exact"] = str(rho_total)
        out["epsilon"] = accounting.epsilon_from_rho(rho_total, budget.delta)
        out["delta"] = delta
        out["mechanism"] = "discrete_gaussian"
    else:
        eps = budget.total + (units_budget.total if units_budget is not None else 0)
        if units_budget is not None:
            out["units"] = units_budget.to_dict()
        out["epsilon"] = float(eps)
        out["rho"] = float(eps) ** 2 / 2
        out["delta"] = 0.0
        out["mechanism"] = "geometric"
    return out


def run_release(
    input_dir: str | Path,
    out_dir: str | Path,
    *,
    budget: Any,
    units_budget: Any | None = None,
    seed: int | None = None,
    postprocess: str = "topdown",
    workers: int = 1,
    method: str = "auto",
    overwrite: bool = False,
    progress: Progress = None,
    command: list[str] | None = None,
) -> dict:
    """Produce a release from a CEF directory; returns the manifest.

    Args:
        input_dir: directory with ``persons.parquet`` and ``units.parquet``.
        out_dir: the run directory to create (see DESIGN.md for its files).
        budget: the person-run :class:`~censusdp.budget.Budget`.
        units_budget: the housing-unit run's budget (schema ``units``), or ``None`` to
            skip the unit run (then ``mdf_units`` and H1 carry housing units with the
            occupancy left unreleased: all marked vacant, and the manifest says so).
        seed: ``None`` for a release (secure randomness); an integer for a reproducible,
            non-secure run.
        postprocess: ``"topdown"``, ``"bottomup"`` or ``"none"`` (measurements only).
        workers: 1 for in-process, more for a process pool.
        method: least-squares method (``"auto"``, ``"admm"``, ``"clarabel"``).
        overwrite: replace an existing non-empty ``out_dir``.
    """
    if postprocess not in POSTPROCESS_CHOICES:
        raise ConfigError(
            f"--postprocess must be one of {POSTPROCESS_CHOICES}, got {postprocess!r}"
        )
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    out_dir = Path(out_dir)
    staging = _Staging(out_dir, overwrite)
    try:
        t = time.perf_counter()
        cef = read_cef(input_dir)
        timings["read"] = time.perf_counter() - t
        _say(progress, f"read {cef.n_persons:,} persons and {cef.n_units:,} units from {input_dir}")
        hierarchy = Hierarchy.from_blocks(
            np.concatenate([cef.units["geocode"], cef.persons["geocode"]]), _geolevels(budget)
        )
        inv = compute_invariants(cef.persons, cef.units, hierarchy)
        source = RandomSource.seeded(seed) if seed is not None else RandomSource.secure()
        t = time.perf_counter()
        ms, ums = _measure_all(cef, hierarchy, budget, units_budget, source, progress)
        timings["measure"] = time.perf_counter() - t
        del cef  # from here on, only noisy measurements and public invariants
        manifest = _estimate_and_write(
            staging.path,
            ms,
            ums,
            inv,
            hierarchy,
            budget=budget,
            units_budget=units_budget,
            postprocess=postprocess,
            workers=workers,
            method=method,
            progress=progress,
            timings=timings,
            write_measurements=True,
        )
        manifest.update(
            {
                "seed": seed,
                "randomness": source.describe() if hasattr(source, "describe") else source.mode,
                "input": str(Path(input_dir).resolve()),
                "command": command,
            }
        )
        timings["total"] = time.perf_counter() - t_start
        manifest["timings"] = {k: round(v, 4) for k, v in timings.items()}
        write_json(manifest, staging.path / "manifest.json")
        staging.commit()
    except BaseException:
        staging.abort()
        raise
    _say(progress, f"wrote release to {out_dir} in {timings['total']:.1f}s")
    return manifest


def reestimate(
    run_dir: str | Path,
    out_dir: str | Path,
    *,
    budget: Any,
    units_budget: Any | None = None,
    postprocess: str = "topdown",
    workers: int = 1,
    method: str = "auto",
    overwrite: bool = False,
    progress: Progress = None,
    command: list[str] | None = None,
) -> dict:
    """Re-estimate a release from another run's NMF and published invariants alone."""
    run_dir = Path(run_dir)
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    for name in ("noisy_measurements.parquet", "invariants.parquet", "invariant_totals.parquet"):
        if not (run_dir / name).exists():
            raise InputError(f"{run_dir / name}: missing file (needed by --from-measurements)")
    blocks_table = pq.read_table(run_dir / "invariants.parquet")
    hierarchy = Hierarchy.from_blocks(
        np.asarray(blocks_table.column("geocode").to_numpy(zero_copy_only=False)).astype("U16"),
        _geolevels(budget),
    )
    inv = Invariants.from_tables(
        blocks_table, pq.read_table(run_dir / "invariant_totals.parquet"), hierarchy
    )
    t = time.perf_counter()
    ms = read_nmf(run_dir / "noisy_measurements.parquet", get_schema(budget.schema), hierarchy)
    ums = None
    if units_budget is not None and (run_dir / "noisy_measurements_units.parquet").exists():
        ums = read_nmf(run_dir / "noisy_measurements_units.parquet", get_schema("units"), hierarchy)
    timings["read_measurements"] = time.perf_counter() - t
    staging = _Staging(Path(out_dir), overwrite)
    try:
        manifest = _estimate_and_write(
            staging.path,
            ms,
            ums,
            inv,
            hierarchy,
            budget=budget,
            units_budget=units_budget if ums is not None else None,
            postprocess=postprocess,
            workers=workers,
            method=method,
            progress=progress,
            timings=timings,
            write_measurements=True,
        )
        manifest.update(
            {"seed": None, "randomness": f"none (re-estimated from {run_dir})", "command": command}
        )
        timings["total"] = time.perf_counter() - t_start
        manifest["timings"] = {k: round(v, 4) for k, v in timings.items()}
        write_json(manifest, staging.path / "manifest.json")
        staging.commit()
    except BaseException:
        staging.abort()
        raise
    return manifest


def _estimate_and_write(
    out: Path,
    ms: MeasurementSet,
    ums: MeasurementSet | None,
    inv: Invariants,
    hierarchy: Hierarchy,
    *,
    budget: Any,
    units_budget: Any | None,
    postprocess: str,
    workers: int,
    method: str,
    progress: Progress,
    timings: dict[str, float],
    write_measurements: bool,
) -> dict:
    """Everything after measurement: it sees no confidential data."""
    schema = ms.schema
    manifest: dict[str, Any] = {
        "package_version": __version__,
        "schema": schema.name,
        "postprocess": postprocess,
        "geolevels": [[lv.name, lv.length] for lv in hierarchy.geolevels.levels],
        "geounits": {
            lv.name: hierarchy.n_units(i) for i, lv in enumerate(hierarchy.geolevels.levels)
        },
        "versions": _versions(),
        "platform": platform.platform(),
        "argv": sys.argv,
    }
    manifest.update(_budget_summary(budget, units_budget))
    if write_measurements:
        t = time.perf_counter()
        manifest["noisy_measurements"] = write_nmf(ms, out / "noisy_measurements.parquet")
        if ums is not None:
            manifest["noisy_measurements_units"] = write_nmf(
                ums, out / "noisy_measurements_units.parquet"
            )
        write_parquet(inv.to_table(), out / "invariants.parquet")
        write_parquet(inv.state_table(hierarchy), out / "invariant_totals.parquet")
        timings["write_measurements"] = time.perf_counter() - t
    if postprocess == "none":
        manifest["outputs"] = ["noisy_measurements.parquet", "invariants.parquet"]
        return manifest

    executor = make_executor(workers)
    manifest["executor"] = {"name": executor.name, "workers": workers}
    try:
        t = time.perf_counter()
        bounds = _person_bounds(inv, hierarchy)
        if postprocess == "bottomup":
            # Bottom-up estimates blocks alone: totals above the block level are sums of
            # noisy blocks and cannot be held to the state invariant.
            bounds = [
                Bounds(
                    b.group_lower,
                    b.group_upper,
                    np.zeros_like(b.total_lower),
                    np.full_like(b.total_upper, np.inf),
                )
                for b in bounds
            ]
            manifest["invariants_not_enforced"] = ["state total population (bottom-up)"]
        est = estimate(
            ms,
            hierarchy,
            bounds,
            group_variable="hhgq",
            postprocess=postprocess,
            method=method,
            executor=executor,
            progress=progress,
        )
        timings["estimate_persons"] = time.perf_counter() - t
        unit_est: Estimate | None = None
        if ums is not None:
            t = time.perf_counter()
            unit_est = estimate(
                ums,
                hierarchy,
                _unit_bounds(inv, hierarchy),
                group_variable=None,
                postprocess=postprocess,
                method=method,
                executor=executor,
                progress=progress,
            )
            timings["estimate_units"] = time.perf_counter() - t
    finally:
        close = getattr(executor, "close", None)
        if close is not None:
            close()
    manifest["estimation"] = {"persons": est.levels}
    manifest["failsafe"] = {"persons": est.failsafe}
    if unit_est is not None:
        manifest["estimation"]["units"] = unit_est.levels
        manifest["failsafe"]["units"] = unit_est.failsafe

    # -- outputs ------------------------------------------------------------------------
    t = time.perf_counter()
    cols = mdf_person_columns(est.histograms[-1], hierarchy, schema)
    manifest["persons_released"] = write_mdf_persons(cols, hierarchy, out / "mdf_persons.parquet")
    write_mdf_text(cols, hierarchy, out / "mdf_persons.txt")
    if unit_est is not None:
        occupied = np.asarray(unit_est.histograms[-1][:, 1].todense()).ravel()
    else:
        occupied = np.zeros(inv.blocks.size, dtype=np.int64)
        manifest["occupancy"] = "not released (no housing-unit budget): all units marked vacant"
    manifest["units_released"] = write_mdf_units(
        hierarchy, inv.housing_units, occupied, inv.gq_facilities, out / "mdf_units.parquet"
    )
    unit_cols = _table_columns(pq.read_table(out / "mdf_units.parquet"))
    est_cols = mdf_person_columns_dict(est.histograms[-1], hierarchy, schema)
    tables = tabulate(_pl94_view(est_cols, schema.name), unit_cols, hierarchy)
    write_tables(tables, out / "tables")
    timings["write_release"] = time.perf_counter() - t

    # -- validation: re-read what was written and recompute it independently -----------
    t = time.perf_counter()
    person_cols = _table_columns(pq.read_table(out / "mdf_persons.parquet"))
    mdf_hist = person_histogram(person_cols, hierarchy, schema)
    written = tables_to_arrays(
        {n: pq.read_table(out / "tables" / f"{n}.parquet") for n in tables}, hierarchy
    )
    from_mdf = tables_to_arrays(
        tabulate(_pl94_view(person_cols, schema.name), unit_cols, hierarchy), hierarchy
    )
    report = validate_release(
        est.histograms,
        hierarchy,
        schema,
        bounds,
        unit_hists=unit_est.histograms if unit_est is not None else None,
        housing_units=inv.housing_units if unit_est is not None else None,
        mdf_block_hist=mdf_hist,
        tables=written,
        tables_from_mdf=from_mdf,
        failsafe_uses=len(est.failsafe),
    )
    timings["validate"] = time.perf_counter() - t
    manifest["validation"] = report.to_dict()
    if not report.ok and not est.failsafe:
        raise InternalError("release failed validation: " + "; ".join(report.failures()))
    manifest["outputs"] = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) + [
        "manifest.json"
    ]
    return manifest


def _table_columns(table: Any) -> dict[str, np.ndarray]:
    return {c: table.column(c).to_numpy(zero_copy_only=False) for c in table.column_names}


def mdf_person_columns_dict(
    block_hist: sp.csr_matrix, hierarchy: Hierarchy, schema: Any
) -> dict[str, np.ndarray]:
    """MDF person columns with ``geocode`` strings, straight from a block histogram."""
    cols = mdf_person_columns(block_hist, hierarchy, schema)
    cols["geocode"] = hierarchy.blocks[cols.pop("block")]
    return cols


def _pl94_view(cols: dict[str, np.ndarray], schema_name: str) -> dict[str, np.ndarray]:
    """The columns the PL94 tables read (``dhc-lite`` persons carry them too)."""
    keep = ("geocode", "hhgq", "votingage", "hispanic", "cenrace")
    return {k: cols[k] for k in keep if k in cols}


def read_manifest(run_dir: str | Path) -> dict:
    """The manifest of a run directory."""
    path = Path(run_dir) / "manifest.json"
    if not path.exists():
        raise InputError(f"{path}: missing file")
    return json.loads(path.read_text())
