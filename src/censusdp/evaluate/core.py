"""Evaluate a release against the truth it was made from.

:func:`evaluate` is what ``censusdp evaluate`` calls. It reads the truth (a CEF
directory) and a release (a run directory), puts both on one geography, and computes,
per geolevel:

* for total population, for each PL94 table (P1-P5, H1; tables as published in
  ``RUN/tables``) and for the detailed (``pl94``) and race x Hispanic
  (``hispanic*cenrace``) histograms of the MDF: TVD, MAE, RMSE, bias (mean signed
  error) and max |error|, overall and by true-count bin (definitions in
  :mod:`censusdp.evaluate.metrics`);
* for sex by age (the DHC's P12 and PCT12) of a release whose MDF has age, the same
  (:mod:`censusdp.evaluate.dhc`); for a household run's tables, the households
  (:mod:`censusdp.evaluate.households`);
* the largest errors with their geounits;
* the pathology shares: geounits released at 100% occupancy and geounits released as
  100% under 18, against the truth (Van Riper, Kugler & Ruggles 2020, sec. 3; JASON 2020, sec. 6.2);
* errors for off-spine random contiguous districts (:mod:`censusdp.evaluate.districts`);
* the invariants and constraints, re-checked (:mod:`censusdp.evaluate.checks`);
* the closed-form standard deviations of the noisy measurements and the realised noise
  (:mod:`censusdp.evaluate.nmf`);
* with ``trials=K``, empirical error bars from ``K`` reruns of the mechanism
  (:mod:`censusdp.evaluate.trials`).

The result is a JSON-ready dict (NaN written as ``null``); :func:`evaluate` can also
write it and a self-contained HTML report (:mod:`censusdp.evaluate.report`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from censusdp.data.geography import DEFAULT_GEOLEVELS, GeoLevels, Hierarchy
from censusdp.data.histograms import (
    person_histogram,
    pl94_view,
    unit_histogram,
)
from censusdp.data.queries import make_query
from censusdp.data.schema import get_schema
from censusdp.data.schema_dhc import DHCH_2020
from censusdp.errors import ConfigError, InputError, SchemaError
from censusdp.evaluate.checks import check_release
from censusdp.evaluate.dhc import sex_by_age_metrics
from censusdp.evaluate.districts import district_metrics
from censusdp.evaluate.households import (
    household_evaluation,
    released_household_tables,
    truth_household_tables,
    truth_households,
)
from censusdp.evaluate.metrics import (
    COUNT_BINS,
    Pairs,
    all_under18_share,
    error_stats,
    largest_errors,
    occupancy_full_share,
    tvd,
)
from censusdp.evaluate.nmf import nmf_summary
from censusdp.evaluate.trials import ErrorAccumulator, budget_from_manifest, run_trials
from censusdp.io.cef import read_cef
from censusdp.io.layout import RUNS
from censusdp.io.mdf_read import read_mdf_persons, read_mdf_units
from censusdp.io.nmf_files import (
    NMF_COLUMNS,
    has_row_group_keys,
    iter_nmf_tables,
    missing_columns,
    nmf_files,
)
from censusdp.io.output_files import write_output_json
from censusdp.io.rundir import RunDir
from censusdp.privacy.budget import Budget
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.progress import say, task
from censusdp.release.household_runs import has_household_run
from censusdp.release.options import Execution
from censusdp.release.spine import geography_of_run
from censusdp.release.validate import require_valid, validate_run
from censusdp.tables import TABLE_NAMES, table_arrays, table_definition, tables_to_arrays
from censusdp.version import __version__

__all__ = [
    "DEFAULT_DISTRICT_TARGETS",
    "check_dp_release",
    "DEFINITIONS",
    "EvaluateOptions",
    "ReleaseFiles",
    "evaluate",
    "evaluate_data",
    "json_ready",
    "read_release",
]

DEFAULT_DISTRICT_TARGETS: tuple[int, ...] = (500, 2_000, 10_000, 50_000)
"""Target populations of the random districts (city wards to state legislative districts)."""

HIST_MEASURES: tuple[str, ...] = ("detailed", "hispanic*cenrace")

DEFINITIONS: dict[str, str] = {
    "error": "released - true, for one count of one geounit",
    "mae": "sum |error| / n over the n counts compared (all lines of a table, or all cells of a histogram, at every geounit of the level)",
    "rmse": "sqrt(sum error^2 / n)",
    "bias": "mean signed error: sum error / n",
    "tvd": "1 - L1 / (2 POP) (total variation distance; JASON, Formal Privacy Methods for the 2020 Census, 2020, sec. 6.1); L1 = sum |error| over a partition of the universe at every geounit of the level (total population: one count per geounit; a table: its leaf lines; a histogram: all its cells); POP = sum of the true counts of the same partition (the level's true universe total)",
    "bins": "true-count bins 0, 1-9, 10-99, 100-999, 1000+ (of the true value of each count)",
    "histogram_n": "for 'detailed', n excludes structural-zero cells (minors in nursing facilities), which are zero in truth and release",
    "tables_source": "P1-P5 and H1 metrics use the release's published tables (RUN/tables); histogram metrics use the microdata (MDF)",
    "occupancy_100": "among geounits with at least one housing unit, the share with no vacant housing unit (H1_003N = 0)",
    "all_under18": "among geounits with at least the evaluation's minimum population, the share with no one 18 or over (P3_001N = 0)",
    "nmf_sd": "closed-form: sd = sqrt(variance) stated in the noisy measurement file (NMF) for each noisy measurement; 'empirical' compares it with value - truth",
    "trials": "empirical: errors pooled over K reruns of the whole mechanism (measure + estimate + round) with independent seeds; quantiles are exact over the pooled integer errors",
}


@dataclass(frozen=True, eq=False)
class ReleaseFiles:
    """The files of a release run directory, read.

    Attributes:
        persons: MDF person columns (NumPy).
        units: MDF unit columns (NumPy).
        tables: the published tables, or ``None`` if ``RUN/tables`` is absent.
        manifest: ``manifest.json`` (empty if absent).
        nmf: paths of the noisy measurement files present, keyed ``persons`` /
            ``units``.
        directory: the run directory.
    """

    persons: Mapping[str, np.ndarray]
    units: Mapping[str, np.ndarray]
    tables: dict[str, pa.Table] | None
    manifest: dict[str, Any]
    nmf: dict[str, Path] = field(default_factory=dict)
    directory: Path | None = None


def read_release(release_dir: str | Path) -> ReleaseFiles:
    """Read a release run directory (MDF, tables, manifest; NMF paths only).

    Raises:
        InputError: if the directory or an MDF file is missing or unreadable.
    """
    d = Path(release_dir)
    if not d.is_dir():
        raise InputError(f"release directory {str(d)!r} does not exist")
    files = RunDir(d)
    mdf = [files.mdf_file("persons"), files.mdf_file("units")]
    missing = [p.name for p in mdf if not p.exists()]
    if missing:
        raise InputError(f"release directory {str(d)!r} lacks {', '.join(missing)}")
    persons = read_mdf_persons(mdf[0])
    units = read_mdf_units(mdf[1])
    tables = files.tables() if files.tables_dir.is_dir() else None
    manifest: dict[str, Any] = {}
    if files.manifest_file.exists():
        manifest = files.manifest().to_dict()
    nmf = {run: files.nmf_file(run) for run in RUNS if files.has_nmf(run)}
    return ReleaseFiles(persons, units, tables, manifest, nmf, d)


def _geolevels(manifest: Mapping[str, Any]) -> GeoLevels:
    raw = manifest.get("geolevels")
    if not raw:
        return DEFAULT_GEOLEVELS
    pairs = []
    for item in raw:
        if isinstance(item, Mapping):
            pairs.append((item["name"], int(item["length"])))
        else:
            pairs.append((item[0], int(item[1])))
    return GeoLevels.from_pairs(pairs)


def json_ready(obj: Any) -> Any:
    """Replace NaN/inf floats by ``None`` and NumPy scalars by Python ones, recursively."""
    if isinstance(obj, dict):
        return {str(k): json_ready(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_ready(v) for v in obj]
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        x = float(obj)
        return x if math.isfinite(x) else None
    if isinstance(obj, np.ndarray):
        return json_ready(obj.tolist())
    return obj


def _level_record(pairs: Pairs, tvd_pairs: Pairs) -> dict[str, Any]:
    rec = tvd(tvd_pairs)
    rec.update(error_stats(pairs))
    return rec


_MANIFEST_KEYS = (
    "schema",
    "postprocess",
    "mechanism",
    "rho",
    "epsilon",
    "delta",
    "seed",
    "package_version",
)
"""The release manifest's entries copied into the evaluation result."""


def _evaluation_hierarchy(
    truth_persons: Mapping[str, np.ndarray],
    truth_units: Mapping[str, np.ndarray],
    release: ReleaseFiles,
) -> Hierarchy:
    """The hierarchy of every block in the truth, the MDF and the release's P1 table."""
    geolevels = _geolevels(release.manifest)
    block_codes = [
        np.asarray(truth_persons["geocode"]).astype("U16"),
        np.asarray(truth_units["geocode"]).astype("U16"),
        np.asarray(release.persons["geocode"]).astype("U16"),
        np.asarray(release.units["geocode"]).astype("U16"),
    ]
    if release.tables is not None:
        t1 = release.tables["P1"]
        lv = np.asarray(t1.column("geolevel").to_numpy(zero_copy_only=False)).astype(str)
        codes = np.asarray(t1.column("geocode").to_numpy(zero_copy_only=False)).astype(str)
        block_codes.append(codes[lv == geolevels.names[-1]].astype("U16"))
    h = Hierarchy.from_blocks(np.concatenate(block_codes), geolevels)
    return h


def _table_metrics(
    truth_t: dict[str, list[np.ndarray]],
    rel_t: dict[str, list[np.ndarray]],
    h: Hierarchy,
    top_k: int,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Error metrics and largest errors of total population and each table, per geolevel."""
    names = h.geolevels.names
    metrics: dict[str, dict[str, Any]] = {"total_population": {}}
    largest: dict[str, dict[str, Any]] = {"total_population": {}}
    for li, lname in enumerate(names):
        t, r = truth_t["P1"][li][:, 0], rel_t["P1"][li][:, 0]
        p = Pairs.dense(t, r)
        metrics["total_population"][lname] = _level_record(p, p)
        largest["total_population"][lname] = largest_errors(t, r, h.geocodes[li], top_k)
    for tname in TABLE_NAMES:
        d = table_definition(tname)
        leaves = list(d.leaves)
        metrics[tname] = {}
        largest[tname] = {}
        for li, lname in enumerate(names):
            t, r = truth_t[tname][li], rel_t[tname][li]
            metrics[tname][lname] = _level_record(
                Pairs.dense(t, r), Pairs.dense(t[:, leaves], r[:, leaves])
            )
            largest[tname][lname] = largest_errors(t, r, h.geocodes[li], top_k, d.variables)
    return metrics, largest


def _histogram_metrics(t_ph: sp.csr_matrix, r_ph: sp.csr_matrix, h: Hierarchy) -> dict[str, Any]:
    """Metrics of the detailed and hispanic*cenrace histograms per geolevel.

    ``detailed`` counts every cell that is not a structural zero (``n_total``).
    """
    names = h.geolevels.names
    metrics: dict[str, dict[str, Any]] = {}
    schema = get_schema("pl94")
    live = int((~schema.structural_zero_mask).sum())
    t_lv = h.aggregate(t_ph)
    r_lv = h.aggregate(r_ph)
    q = make_query(schema, "hispanic*cenrace").matrix.T.tocsr().astype(np.int64)
    for mname in HIST_MEASURES:
        metrics[mname] = {}
        for li, lname in enumerate(names):
            if mname == "detailed":
                p = Pairs.sparse(t_lv[li], r_lv[li], n_total=h.n_units(li) * live)
            else:
                p = Pairs.sparse(t_lv[li] @ q, r_lv[li] @ q)
            metrics[mname][lname] = _level_record(p, p)
    return metrics


def _pathologies(
    truth_t: dict[str, list[np.ndarray]], rel_t: dict[str, list[np.ndarray]], names: tuple[str, ...]
) -> dict[str, Any]:
    """Shares of units at 100% occupancy and at 100% under 18 (all, and population 50+)."""
    pathologies: dict[str, Any] = {"occupancy_100": {}, "all_under18": {}}
    for li, lname in enumerate(names):
        pathologies["occupancy_100"][lname] = {
            "released": occupancy_full_share(rel_t["H1"][li][:, 0], rel_t["H1"][li][:, 1]),
            "truth": occupancy_full_share(truth_t["H1"][li][:, 0], truth_t["H1"][li][:, 1]),
        }
        pathologies["all_under18"][lname] = {
            str(m): {
                "released": all_under18_share(rel_t["P1"][li][:, 0], rel_t["P3"][li][:, 0], m),
                "truth": all_under18_share(truth_t["P1"][li][:, 0], truth_t["P3"][li][:, 0], m),
            }
            for m in (1, 50)
        }
    return pathologies


@dataclass(frozen=True)
class _Tabulated:
    """Block histograms and per-level tables of the truth and of the release."""

    truth_persons: Any
    truth_units: np.ndarray
    persons: Any
    units: np.ndarray
    truth_tables: dict[str, list[np.ndarray]]
    mdf_tables: dict[str, list[np.ndarray]]
    tables: dict[str, list[np.ndarray]]
    tables_source: str

    @classmethod
    def of(
        cls,
        truth_persons: Mapping[str, np.ndarray],
        truth_units: Mapping[str, np.ndarray],
        release: ReleaseFiles,
        h: Hierarchy,
    ) -> _Tabulated:
        """Tabulate both; the release's tables are its own files when it has them."""
        t_ph = person_histogram(pl94_view(truth_persons), h)
        t_uh = unit_histogram(truth_units, h)
        r_ph = person_histogram(pl94_view(release.persons), h)
        r_uh = unit_histogram(release.units, h)
        mdf_t = table_arrays(r_ph, r_uh, h)
        if release.tables is not None:
            rel_t, source = tables_to_arrays(release.tables, h), "release tables"
        else:
            rel_t, source = mdf_t, "tabulated from the MDF (RUN/tables absent)"
        return cls(t_ph, t_uh, r_ph, r_uh, table_arrays(t_ph, t_uh, h), mdf_t, rel_t, source)


def _districts(
    truth_t: dict[str, list[np.ndarray]],
    rel_t: dict[str, list[np.ndarray]],
    targets: tuple[int, ...],
    seed: int,
    draws: int,
) -> dict[str, Any]:
    """District metrics of P1-P4 over random districts made of blocks."""
    tables = ("P1", "P2", "P3", "P4")
    return district_metrics(
        {n: truth_t[n][-1] for n in tables},
        {n: rel_t[n][-1] for n in tables},
        tuple(int(x) for x in targets),
        seed=seed,
        draws=draws,
        leaves={n: table_definition(n).leaves for n in tables},
    )


def evaluate_data(
    truth_persons: Mapping[str, np.ndarray],
    truth_units: Mapping[str, np.ndarray],
    release: ReleaseFiles,
    *,
    district_targets: tuple[int, ...] = DEFAULT_DISTRICT_TARGETS,
    district_draws: int = 5,
    seed: int = 0,
    top_k: int = 10,
    progress: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Every metric of :func:`evaluate` except trials, from data in memory.

    Returns:
        ``(result, plot_data)``: the JSON-ready result, and the report's data:
        ``scatter`` (``{level: (true, released)}`` total population), ``hierarchy``,
        ``truth_tables`` and ``release_tables`` (per table, per level arrays) and the
        release ``manifest``.
    """

    h = _evaluation_hierarchy(truth_persons, truth_units, release)
    names = h.geolevels.names
    say(progress, f"geography: {', '.join(f'{n} {h.n_units(i):,}' for i, n in enumerate(names))}")
    # steps: tabulate, table metrics, histogram metrics, districts, invariants, NMF
    bar = task(progress, "evaluating", 6, unit="steps")

    tab = _Tabulated.of(truth_persons, truth_units, release, h)
    t_ph, t_uh, r_ph, r_uh = tab.truth_persons, tab.truth_units, tab.persons, tab.units
    truth_t, mdf_t, rel_t = tab.truth_tables, tab.mdf_tables, tab.tables
    say(progress, "tabulated truth and release")
    bar.advance()

    metrics, largest = _table_metrics(truth_t, rel_t, h, top_k)
    say(progress, "table metrics done")
    bar.advance()

    metrics.update(_histogram_metrics(t_ph, r_ph, h))
    metrics.update(sex_by_age_metrics(truth_persons, release.persons, h))
    say(progress, "histogram metrics done")
    bar.advance()

    pathologies = _pathologies(truth_t, rel_t, names)
    hh_run = has_household_run(release.manifest.get("units"))
    truth_hh = (
        truth_household_tables(truth_persons, truth_units, h, release.manifest["units"]["schema"])
        if hh_run
        else None
    )
    households = household_evaluation(
        truth_hh, release.directory, release.manifest, h, (truth_t["H1"], rel_t["H1"])
    )

    districts = _districts(truth_t, rel_t, district_targets, seed, district_draws)
    say(progress, "districts done")
    bar.advance()

    checks = check_release(
        h,
        truth_t,
        rel_t,
        mdf_t if release.tables is not None else None,
        t_uh,
        r_uh,
        r_ph,
    )
    say(
        progress,
        "invariants re-checked: "
        + ", ".join(f"{k} {'ok' if v['ok'] else 'FAILED'}" for k, v in checks.items()),
    )
    bar.advance()

    nmf = {
        key: _nmf_for(
            key, path, release.manifest, h, (truth_persons, truth_units), t_uh, release.directory
        )
        for key, path in release.nmf.items()
    }
    say(progress, f"noisy measurements ({', '.join(nmf) or 'none'}) summarised")
    bar.advance()
    bar.close()

    result: dict[str, Any] = {
        "definitions": DEFINITIONS,
        "bins": [b[0] for b in COUNT_BINS],
        "geolevels": list(names),
        "units": {n: h.n_units(i) for i, n in enumerate(names)},
        "tables_source": tab.tables_source,
        "release_manifest": {k: release.manifest.get(k) for k in _MANIFEST_KEYS},
        "metrics": metrics,
        "largest_errors": largest,
        "pathologies": pathologies,
        "districts": districts,
        "invariants": checks,
        "invariants_ok": all(v["ok"] for v in checks.values()),
        "noisy_measurements": nmf,
    }
    if households is not None:  # a household run: its tables against the truth's
        result["households"] = households
    scatter = {
        lname: (truth_t["P1"][li][:, 0].copy(), rel_t["P1"][li][:, 0].copy())
        for li, lname in enumerate(names)
    }
    return result, {
        "scatter": scatter,
        "hierarchy": h,
        "truth_tables": truth_t,
        "release_tables": rel_t,
        "manifest": release.manifest,
        "truth_household_tables": truth_hh,
    }


def _nmf_for(
    key: str,
    path: Path,
    manifest: Mapping[str, Any],
    h: Hierarchy,
    truth: tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]],
    truth_unit_hist: sp.csr_matrix,
    run_dir: Path | None = None,
) -> dict[str, Any]:
    """Summarise one NMF, with the truth answers of its queries when the schema is known.

    ``truth`` is the truth's persons and units columns. A release measured on the
    production spine (its manifest's ``spine``) is summarised on the spine's geounits,
    read from its ``spine.parquet``. A household run's truth is the truth's households,
    derived from its persons as the release's reader derives them (none without
    ``rel``: the NMF is then summarised without the truth).
    """
    truth_persons, truth_units = truth
    # each run on its own geography (the unit run on its own spine)
    geo = geography_of_run(run_dir or path.parent, manifest, h).for_run(
        "units" if key == "units" else "persons"
    )
    h = geo.estimation
    units = manifest.get("units") if isinstance(manifest.get("units"), Mapping) else {}
    schema_name = (
        str(units.get("schema") or "units")
        if key == "units"
        else str(manifest.get("schema") or "pl94")
    )
    try:
        schema = get_schema(schema_name)
    except SchemaError:  # an unknown schema only disables the truth check
        schema = None
    if schema_name == "household2010" and "rel" not in truth_persons:
        schema = None  # a truth without relationships has no households
    if schema_name == DHCH_2020.name:
        # the DHC household run's NMF holds two histograms (households in dhch-2020 and
        # the units' tenvacgq); their truth is not derived here yet: summarised without
        schema = None
    levels: list[sp.csr_matrix] | None = None
    if schema is not None:
        if schema_name == "household2010":
            block = truth_households(truth_persons, truth_units, geo.tabulation)
            levels = h.aggregate(geo.to_estimation(block))
        elif key == "units":
            levels = h.aggregate(geo.to_estimation(sp.csr_matrix(truth_unit_hist[:, :2])))
        else:
            cols = {
                c: truth_persons[c]
                for c in ("geocode", *schema.input_columns)
                if c in truth_persons
            }
            block = person_histogram(cols, geo.tabulation, schema)
            levels = h.aggregate(geo.to_estimation(block))

    def truth(level: str, query: str) -> sp.csr_matrix | None:
        if schema is None or levels is None:
            return None
        try:
            qm = make_query(schema, query).matrix
        except SchemaError:  # a query we cannot parse is summarised without truth
            return None
        return sp.csr_matrix(levels[h.geolevels.index(level)] @ qm.T.astype(np.int64))

    # the parts the index lists (a dataset of the directory would read any file in it),
    # the one-value columns from each file's row-group keys when its rows lack them
    metas = {f.name: pq.read_metadata(f) for f in nmf_files(path)}
    for name, md in metas.items():
        missing = missing_columns(md)
        if missing:
            raise InputError(f"{path}: noisy measurements need columns {missing} ({name})")
    with_mech = all(
        "mechanism" in md.schema.to_arrow_schema().names or has_row_group_keys(md)
        for md in metas.values()
    )
    cols = [c for c in NMF_COLUMNS if c != "mechanism" or with_mech]
    return {
        "file": path.name,
        "schema": schema_name,
        "by_level": nmf_summary(
            (b for t in iter_nmf_tables(path, cols) for b in t.to_batches()), h, truth
        ),
    }


def _trial_compare(
    h: Hierarchy,
    truth_t: dict[str, list[np.ndarray]],
    truth_hh: dict[str, list[np.ndarray]] | None = None,
) -> Callable[[Path, ErrorAccumulator], None]:
    """Each trial's P.L. tables (and, with ``truth_hh``, household tables) against the
    truth's."""
    names = h.geolevels.names

    def compare(run: Path, acc: ErrorAccumulator) -> None:
        rel = tables_to_arrays(RunDir(run).tables(), h)
        hh = released_household_tables(run, h, tuple(truth_hh)) if truth_hh is not None else None
        for tname, per_level in (hh or {}).items():  # a household run's tables
            leaves = list(table_definition(tname).leaves)
            for li, lname in enumerate(names):
                t, r = truth_hh[tname][li], per_level[li]  # type: ignore[index]
                acc.add(tname, lname, Pairs.dense(t, r), Pairs.dense(t[:, leaves], r[:, leaves]))
        for li, lname in enumerate(names):
            p = Pairs.dense(truth_t["P1"][li][:, 0], rel["P1"][li][:, 0])
            acc.add("total_population", lname, p)
            for tname in TABLE_NAMES:
                leaves = list(table_definition(tname).leaves)
                t, r = truth_t[tname][li], rel[tname][li]
                acc.add(tname, lname, Pairs.dense(t, r), Pairs.dense(t[:, leaves], r[:, leaves]))

    return compare


def check_dp_release(
    release: ReleaseFiles,
    allow_invalid: bool,
    what: str,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any] | None:
    """Validate a DP release before it is evaluated (``censusdp validate``'s checks).

    A release whose manifest names a DP mechanism is used only if it is whole and
    untampered. With ``allow_invalid`` the checks are run and returned instead of
    enforced; a release without a DP mechanism (a swapped or hand-made one) is not
    checked (``None``).

    Raises:
        ValidationError: if a DP release fails and not ``allow_invalid``.
    """
    if release.manifest.get("mechanism") not in ("discrete_gaussian", "geometric"):
        return None
    run = release.directory
    say(progress, f"validating {run}")
    if allow_invalid:
        return validate_run(run, progress=progress).to_dict()
    require_valid(run, what=what, progress=progress)
    return None


@dataclass(frozen=True)
class EvaluateOptions:
    """What an evaluation computes beside the measured errors, checked once.

    Attributes:
        trials: if given, rerun the release mechanism this many times on the truth for
            empirical error bars (:mod:`censusdp.evaluate.trials`).
        trial_seed: master seed of the trials.
        budget, units_budget: the budgets of the trials (default: rebuilt from the
            release manifest).
        district_targets, district_draws, seed: the random districts
            (:mod:`censusdp.evaluate.districts`).
        top_k: how many largest errors to list per measure and level.
        simulations: if given, also the errors predicted from the release alone with
            this many simulations (:func:`censusdp.evaluate.errorbars.expected_errors`,
            under ``expected``; ``seed`` seeds them), next to the measured ones.
        allow_invalid: evaluate a DP release that fails ``censusdp validate`` (broken or
            hand-made releases): the result records the failed checks under
            ``validation``.

    Raises:
        ConfigError: on construction, naming the option and the value.
    """

    trials: int | None = None
    trial_seed: int = 0
    budget: Budget | None = None
    units_budget: Budget | None = None
    district_targets: tuple[int, ...] = DEFAULT_DISTRICT_TARGETS
    district_draws: int = 5
    seed: int = 0
    top_k: int = 10
    simulations: int | None = None
    allow_invalid: bool = False

    def __post_init__(self) -> None:
        for option, value in (
            ("--trials", self.trials),
            ("--simulations", self.simulations),
            ("--district-draws", self.district_draws),
        ):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise ConfigError(f"{option} must be at least 1, got {value}")
        object.__setattr__(self, "district_targets", tuple(self.district_targets))


def evaluate(
    truth_dir: str | Path,
    release_dir: str | Path,
    options: EvaluateOptions | None = None,
    *,
    execution: Execution | None = None,
    json_path: str | Path | None = None,
    html_path: str | Path | None = None,
    shown_as: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """Evaluate the release in ``release_dir`` against the CEF in ``truth_dir``.

    A DP release is first checked as ``censusdp validate`` would
    (:func:`censusdp.release.validate.validate_run`); one that fails is refused, unless
    ``options.allow_invalid`` (the result then records the failed checks under
    ``validation``).

    Args:
        truth_dir: directory with ``persons.parquet`` and ``units.parquet``.
        release_dir: a run directory (``mdf_*.parquet``, ``tables/``, NMF, manifest).
        options: what to compute (default :class:`EvaluateOptions`).
        execution: where the reruns and simulations run (its executor and workers) and
            where progress lines go (default: in process, silent).
        json_path, html_path: where to write the result and the report (optional).
        shown_as: how the result names the truth and the release (default: their
            absolute paths); a caller that evaluates inside a staging directory names
            them as they will be found.

    Returns:
        The JSON-ready result (see :data:`DEFINITIONS`).
    """
    options = options or EvaluateOptions()
    execution = execution or Execution()
    progress = execution.progress

    t0 = time.perf_counter()
    cef = read_cef(truth_dir, progress=progress)
    release = read_release(release_dir)
    validation = check_dp_release(release, options.allow_invalid, "evaluate", progress)
    say(progress, f"read truth ({cef.n_persons:,} persons) and release {release_dir}")
    result, plot_data = evaluate_data(
        cef.persons,
        cef.units,
        release,
        district_targets=options.district_targets,
        district_draws=options.district_draws,
        seed=options.seed,
        top_k=options.top_k,
        progress=progress,
    )
    if options.trials:
        result["trials"] = run_trials(
            truth_dir,
            _trial_budget(options, release.manifest, release_dir),
            trials=options.trials,
            seed=options.trial_seed,
            compare=_trial_compare(
                plot_data["hierarchy"],
                plot_data["truth_tables"],
                plot_data["truth_household_tables"],
            ),
            postprocess=str(release.manifest.get("postprocess") or "topdown"),
            unit_consistency=str(release.manifest.get("units_estimation") or "consistent"),
            execution=execution,
        )
    if options.simulations:
        from censusdp.evaluate.errorbars import expected_errors

        result["expected"] = expected_errors(
            release_dir,
            simulations=options.simulations,
            seed=options.seed,
            workers=execution.workers,
            executor=execution.executor,
            progress=progress,
        )
    if validation is not None:
        result["validation"] = validation
    result["evaluation"] = {
        "truth": shown_as[0] if shown_as else str(Path(truth_dir).resolve()),
        "release": shown_as[1] if shown_as else str(Path(release_dir).resolve()),
        "package_version": __version__,
        "seed": options.seed,
        "trial_seed": options.trial_seed if options.trials else None,
        "district_targets": list(options.district_targets),
        "district_draws": options.district_draws,
        "seconds": round(time.perf_counter() - t0, 3),
    }
    result = json_ready(result)
    if json_path is not None:
        write_output_json(result, json_path, option="--json")
        say(progress, f"wrote {json_path}")
    if html_path is not None:
        from censusdp.evaluate.report import write_report

        write_report(result, html_path, scatter=plot_data["scatter"], detail=plot_data)
        say(progress, f"wrote {html_path}")
    return result


def _trial_budget(
    options: EvaluateOptions, manifest: dict[str, Any], release_dir: str | Path
) -> ReleaseBudget:
    """The budgets of the trials: the options' person budget, else the release manifest's
    (its person run and its unit run, the occupancy or the households).

    Raises:
        InputError: if neither the options nor the manifest give a person budget.
    """
    budget, units_budget = options.budget, options.units_budget
    if budget is None:
        if "persons" not in manifest or not isinstance(manifest["persons"], dict):
            raise InputError(
                f"--trials needs the release budget: {release_dir}/manifest.json has no "
                "'persons' budget entry; pass a budget explicitly"
            )
        budget = budget_from_manifest(manifest["persons"])
        u = manifest.get("units")
        if units_budget is None and isinstance(u, dict) and "geolevels" in u and "mechanism" in u:
            units_budget = budget_from_manifest(u)
    return ReleaseBudget(budget, units_budget)
