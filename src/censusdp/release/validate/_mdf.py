"""The MDF and tables of a release on disk: read back, checked as an estimate, and
compared with their text files, their tables and the codebook.

An MDF of single files is read here; one of part files by tasks
(:mod:`~censusdp.release.validate._mdf_parts`), whose per-block counts are put
together here.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import unit_histogram_from_counts
from censusdp.data.invariants import Bounds, Invariants, level_bounds
from censusdp.data.schema import Schema, get_schema
from censusdp.data.schema_dhc import DHCH_2020
from censusdp.errors import CensusDPError, InputError
from censusdp.io.layout import MDF_FILES, TABLE_CSV_FORMS, TABLES_DIR, table_csv_file
from censusdp.io.mdf_parts import mdf_part_dhc_units, mdf_part_households
from censusdp.io.mdf_read import mdf_unit_counts, read_mdf_histograms
from censusdp.io.mdf_records import record_layouts
from censusdp.io.mdf_text import text_mismatch
from censusdp.io.parts import part_name, read_part_index, regular_file
from censusdp.io.table_csv import published_tables, table_csv_check
from censusdp.io.tables import codebook_mismatch, table_part_mismatch
from censusdp.release.consistency import household_persons
from censusdp.release.household_runs import has_household_run
from censusdp.release.validate._entries import Hashed
from censusdp.release.validate._households import (
    check_dhc_households,
    check_h1_source,
    check_households,
)
from censusdp.release.validate._mdf_parts import DHCH, mdf_from_parts
from censusdp.release.validate._release import Release
from censusdp.release.validate.estimate import UnitRun, validate_release
from censusdp.release.validate.report import ValidationReport
from censusdp.tables import TABLE_NAMES, level_identifiers, release_table_names
from censusdp.tables.dhc import DHC_HOUSEHOLD_TABLE_NAMES, dhc_household_rows, dhc_person_rows
from censusdp.tables.entities import (
    ENTITY_GEOLEVELS,
    EntityRows,
    concat_identifiers,
    entity_rows,
)


def check_mdf(
    release: Release, rep: ValidationReport, executor: Any = None, hashed: Hashed | None = None
) -> None:
    """The MDF obeys every invariant and constraint, its text files are its Parquet
    files, and the tables are its tabulation with the geography's identifiers.

    A bottom-up release estimates blocks alone and says so in its manifest: its state
    totals are sums of noisy blocks, so only they are not held exact.

    An MDF of part files is read by tasks on ``executor`` (in this process without
    one), one part each (:func:`~censusdp.release.validate._mdf_parts._count_mdf_part`):
    each returns its blocks' histograms and unit counts, its text parts' and table
    parts' problems, and its files' SHA-256 (into ``hashed``), and only those sparse
    per-block counts are put together here.
    """
    run, hierarchy, inv = release.run, release.hierarchy, release.inv
    schema = get_schema(release.budgets["persons"].schema)
    partitioned = (run / MDF_FILES["persons"][0]).is_dir()
    unit_budget = release.budgets.get("units")
    dhc = unit_budget is not None and unit_budget.schema == DHCH_2020.name
    with_households: bool | str = DHCH if dhc else has_household_run(unit_budget)
    table_problems: list[str] | None = None
    households, household_problems, dhc_units = None, [], None
    try:
        if partitioned:
            got = mdf_from_parts(
                run, hierarchy, inv, schema, executor, hashed, with_households=with_households
            )
            hist, pl94, counts = got.hist, got.pl94, got.counts
            table_problems, text_problems = got.table_problems, got.text_problems
            households, household_problems = got.households, got.household_problems
            dhc_units = got.dhc_units
        else:
            counts = mdf_unit_counts(run / MDF_FILES["units"][0], hierarchy)
            text_problems = _check_text_files(run, schema, hashed, bool(with_households))
            if dhc:
                dhc_units, household_problems = _read_dhc_units(run, hierarchy)
            elif with_households:
                households, household_problems = _read_households(run, hierarchy, inv)
    except (CensusDPError, OSError, KeyError, pa.ArrowException) as exc:
        rep.add("mdf_readable", False, f"cannot read the MDF: {exc}")
        return
    facilities = inv.gq_facilities.sum(axis=1)
    wrong = np.flatnonzero(counts[:, 2] != facilities)
    rep.add(
        "gq_facilities_exact",
        wrong.size == 0,
        "occupied facility records per block equal the invariants"
        if wrong.size == 0
        else f"{wrong.size} blocks, e.g. {hierarchy.blocks[wrong[0]]}: {counts[wrong[0], 2]} "
        f"facility records, {facilities[wrong[0]]} published",
    )
    try:
        if partitioned:
            # the facilities' types are the invariants' (their number was checked above)
            units = unit_histogram_from_counts(
                counts[:, 0] + counts[:, 1], counts[:, 1], inv.gq_facilities
            )
        else:
            hist, pl94, units = read_mdf_histograms(run, hierarchy, schema)
        tables_in_parts = (run / "tables" / f"{TABLE_NAMES[0]}.parquet").is_dir()
        if tables_in_parts and table_problems is None:
            # tables in parts, the MDF not: not a release's
            raise InputError("the tables are part files but the MDF is not")
        geo = release.geography
        written = tables_in_parts and _part0_has_entities(run)
        ent = entity_rows(hierarchy.blocks, geo.entities if geo is not None and written else None)
        table_problems = (table_problems or []) + _check_tables(
            run, hierarchy, (pl94, units, households), in_parts=tables_in_parts, entities=ent,
            dhc_persons=dhc_person_rows(hist) if schema.name == "dhcp-2020" else None,
            dhc_units=(True if dhc_units is None else dhc_units) if dhc else None,
        )  # fmt: skip
    except (CensusDPError, OSError, KeyError, pa.ArrowException) as exc:
        rep.add("mdf_readable", False, f"cannot read the MDF or tables: {exc}")
        return
    _check_as_estimate(release, rep, hist, units, schema)
    _check_state_parts(release, rep, hist)
    check_h1_source(rep, hierarchy, inv, release.manifest.get("h1_source"))
    if dhc:
        check_dhc_households(rep, hierarchy, inv, dhc_units, household_problems)
    elif with_households:
        # --units independent (the DDP's way) does not hold persons to the households
        consistent = release.manifest.get("units_estimation", "consistent") == "consistent"
        check_households(
            rep, hierarchy, inv, (hist, schema), households, household_problems, consistent
        )
    rep.add(
        "mdf_text_matches_parquet",
        not text_problems,
        "; ".join(text_problems[:3])
        or "every text MDF file is its Parquet records, header and line by line",
    )
    rep.add(
        "tables_match_mdf",
        not table_problems,
        "; ".join(table_problems[:3])
        or "every table equals the tabulation of the MDF, with the geography's GEOID, "
        "SUMLEV and NAME",
    )
    problem = codebook_mismatch(run / "tables")
    rep.add("codebook", problem is None, problem or "tables/codebook.csv is censusdp's")
    _check_table_csvs(run / TABLES_DIR, rep, executor, hashed)


def _check_table_csvs(
    tables: Path, rep: ValidationReport, executor: Any = None, hashed: Hashed | None = None
) -> None:
    """``tables_csv``: every table's wide and long CSV holds exactly its Parquet's rows
    (:func:`censusdp.io.table_csv.table_csv_check`), one task per file on ``executor``
    (in this process without one), largest first; each file's SHA-256, taken as it was
    read, goes to ``hashed``. A release written before censusdp wrote CSV has none (a
    CSV removed since is a file its manifest lists)."""
    files = [(n, f) for n in published_tables(tables) for f in TABLE_CSV_FORMS]
    if not any((tables / table_csv_file(n, f)).exists() for n, f in files):
        rep.add("tables_csv", True, "no CSV (a release written before the tables' CSV)")
        return
    jobs = sorted(((str(tables), n, f) for n, f in files), key=_csv_size, reverse=True)
    if executor is None:
        results = map(_csv_task, jobs)
    else:
        results = executor.map(_csv_task, jobs)
    found: dict[tuple[str, str], str] = {}
    for (_, name, form), (problem, digest, cpu) in zip(jobs, results, strict=True):
        if problem:
            found[name, form] = problem
        if hashed is not None:
            rel = f"{TABLES_DIR}/{table_csv_file(name, form)}"
            # CPU seconds of tasks only: without an executor the check ran here
            hashed.record({rel: digest} if digest else {}, cpu if executor is not None else 0.0)
    problems = [found[k] for k in files if k in found]
    rep.add(
        "tables_csv",
        not problems,
        "; ".join(problems[:3]) or "every table's wide and long CSV holds its Parquet's rows",
    )


def _csv_size(job: tuple[str, str, str]) -> int:
    path = Path(job[0]) / table_csv_file(job[1], job[2])
    return path.stat().st_size if regular_file(path) else 0


def _csv_task(job: tuple[str, str, str]) -> tuple[str | None, str | None, float]:
    """A task: one table CSV's ``(problem, SHA-256, CPU seconds)``
    (:func:`censusdp.io.table_csv.table_csv_check` of ``(tables directory, table, form)``)."""
    c = time.process_time()
    try:
        problem, digest = table_csv_check(*job)
    except (CensusDPError, OSError, pa.ArrowException) as exc:
        problem, digest = f"cannot read the tables to check their CSV: {exc}", None
    return problem, digest, time.process_time() - c


def _check_as_estimate(
    release: Release,
    rep: ValidationReport,
    hist: sp.csr_matrix,
    units: sp.csr_matrix,
    schema: Schema,
) -> None:
    """The checks of :func:`~censusdp.release.validate.estimate.validate_release` on the
    MDF's block histograms read back (``hist`` of persons, ``units`` of housing units),
    against the bounds of the published invariants (the state totals not held exact for
    a bottom-up release, the household persons held to the units for a release whose
    unit run was)."""
    hierarchy, inv, manifest = release.hierarchy, release.inv, release.manifest
    bounds = [Bounds(*b) for b in level_bounds(inv, hierarchy)]
    if manifest.get("postprocess") == "bottomup":
        bounds = [
            Bounds(b.group_lower, b.group_upper, 0 * b.total_lower, b.total_upper + np.inf)
            for b in bounds
        ]
    occupancy = [sp.csr_matrix(h[:, :2]) for h in hierarchy.aggregate(units)]
    consistent = manifest.get("units_estimation") == "consistent"
    sub = validate_release(
        hierarchy.aggregate(hist),
        hierarchy,
        schema,
        bounds,
        units=UnitRun(
            occupancy,
            inv.housing_units,
            household_persons(hist, schema) if consistent else None,
        ),
        held_pl94=inv.pl94_persons,
    )
    rep.checks.update(sub.checks)


def _check_state_parts(release: Release, rep: ValidationReport, hist: sp.csr_matrix) -> None:
    """``state_totals_on_parts`` (a spine release): every state's parts (its AIAN and
    non-AIAN State geounits of ``spine.parquet``) hold persons of that state only, and
    their released totals (the MDF read back) sum to the state's invariant total
    (``invariants.parquet``), as production's grouped child total constraint holds them."""
    geo = release.geography
    if geo is None or geo.spine is None or "State" not in geo.estimation.geolevels.names:
        return
    h, tab = geo.estimation, release.hierarchy
    state = h.geolevels.index("State")
    n_parts = h.n_units(state)
    part = np.asarray(geo.to_tabulation(h.ancestor_index(state)), dtype=np.int64)
    fips = np.asarray([g[:2] for g in tab.blocks.tolist()], dtype="U2")
    states, of_block = np.unique(fips, return_inverse=True)
    part_state = np.full(n_parts, -1, dtype=np.int64)
    part_state[part] = of_block
    mixed = np.flatnonzero(part_state[part] != of_block)
    released = np.bincount(part, weights=np.asarray(hist.sum(axis=1)).ravel(), minlength=n_parts)
    on_parts = np.bincount(part_state[part_state >= 0], weights=released[part_state >= 0])
    on_parts = np.rint(np.pad(on_parts, (0, states.size - on_parts.size))).astype(np.int64)
    invariant = np.bincount(of_block, weights=release.inv.population, minlength=states.size)
    bad = np.flatnonzero(on_parts != np.rint(invariant).astype(np.int64))
    split = int((np.bincount(part_state[part_state >= 0], minlength=states.size) > 1).sum())
    if mixed.size:
        detail = f"the spine puts a block of state {fips[mixed[0]]} in a part of another state"
    elif bad.size:
        s = int(bad[0])
        detail = (
            f"state {states[s]}: its parts hold {on_parts[s]:,} persons, its invariant total "
            f"is {int(invariant[s]):,}"
        )
    else:
        detail = (
            f"{states.size} state(s), {split} with AIAN and non-AIAN parts: each state's parts "
            "sum to its invariant total"
        )
    rep.add("state_totals_on_parts", not mixed.size and not bad.size, detail)


def _read_dhc_units(
    run: Path, hierarchy: Hierarchy
) -> tuple[tuple[sp.csr_matrix, np.ndarray] | None, list[str]]:
    """An MDF of single files: a DHC household run's households and units read back, or
    ``None`` and the problem of the first record that is not one
    (:func:`~censusdp.io.mdf_parts.mdf_part_dhc_units`)."""
    try:
        return mdf_part_dhc_units(run / MDF_FILES["units"][0], hierarchy.blocks), []
    except CensusDPError as exc:
        return None, [str(exc)]


def _read_households(
    run: Path, hierarchy: Hierarchy, inv: Invariants
) -> tuple[sp.csr_matrix | None, list[str]]:
    """An MDF of single files: its households, or ``None`` and the problem of the first
    record that is not one (:func:`~censusdp.io.mdf_parts.mdf_part_households`)."""
    try:
        path = run / MDF_FILES["units"][0]
        return mdf_part_households(path, hierarchy.blocks, gq_facilities=inv.gq_facilities), []
    except CensusDPError as exc:
        return None, [str(exc)]


def _check_text_files(
    run: Path, schema: Schema, hashed: Hashed | None, households: bool = False
) -> list[str]:
    """An MDF of single files: each text file present is its Parquet file's records
    (:func:`~censusdp.io.mdf_text.text_mismatch`); its SHA-256 goes to ``hashed``."""
    problems = []
    layouts = record_layouts(schema, households=households)
    for kind, (pq_name, txt_name) in MDF_FILES.items():
        if not regular_file(run / txt_name):
            continue  # a release without its text MDF: checksums says whether it should
        problem, digest = text_mismatch(run / pq_name, run / txt_name, layouts[kind], header=True)
        if hashed is not None:
            hashed.record({txt_name: digest})
        if problem:
            problems.append(problem)
    return problems


def _part0_has_entities(run: Path) -> bool:
    """Whether the tables' part 0 lists geographies off the hierarchy (its index's
    ``geolevel``): a release written before those rows has none, and is checked without
    them; one written since lists them whenever its geography records them."""
    parts = read_part_index(run / TABLES_DIR / f"{TABLE_NAMES[0]}.parquet")["parts"]
    levels = str(parts[0].get("geolevel", "")).split(",") if parts else []
    return bool(set(levels) & set(ENTITY_GEOLEVELS))


def _check_tables(
    run: Path,
    hierarchy: Hierarchy,
    blocks: tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix | None],
    *,
    in_parts: bool,
    entities: EntityRows | None = None,
    dhc_persons: sp.csr_matrix | None = None,
    dhc_units: tuple[sp.csr_matrix, np.ndarray] | bool | None = None,
) -> list[str]:
    """The tables' geounits that the MDF's tasks do not check, each with the geography's
    identifiers and the tabulation of the MDF's block histograms aggregated (``blocks``:
    ``pl94``, units, and a household run's households, whose tables are checked too).

    Tables written as single files: each holds every geounit of every level in table
    order. Tables written as part files (``in_parts``): part 0 of each holds the levels
    above the block (a few hundred thousand geounits for the US); the tasks that read
    the MDF's parts check the blocks' parts
    (:func:`~censusdp.release.validate._mdf_parts._count_mdf_part`). Part 0 also holds
    the geounits off the hierarchy (``entities``: county subdivisions, places, AIAN
    areas, :mod:`censusdp.tables.entities`), each the sum of its blocks. ``dhc_persons``:
    the blocks' ``relgq x sex x age x hispanic x race`` histograms of a ``dhcp-2020`` release, whose DHC
    person tables (:mod:`censusdp.tables.dhc`) are checked too; ``dhc_units``: the
    blocks' ``dhch-2020`` households and ``tenvacgq`` units of a release with the DHC's
    household run read back from its unit MDF, whose DHC household and unit tables are
    checked too (``True``: the release has one, but its unit records do not read back, so
    they cannot be)."""
    n = hierarchy.n_levels - 1 if in_parts else hierarchy.n_levels
    ids = level_identifiers(
        [
            (lv.name, lv.length, codes)
            for lv, codes in zip(
                hierarchy.geolevels.levels[:n], hierarchy.geocodes[:n], strict=True
            )
        ]
    )
    pl94, units, households = blocks
    off = [entities] if in_parts and entities is not None and entities.n else []
    if off:
        ids = concat_identifiers(ids, off[0].ids)

    def rows(block_rows: sp.csr_matrix) -> sp.csr_matrix:
        extra = [e.rows(block_rows) for e in off]
        return sp.vstack([*hierarchy.aggregate(block_rows)[:n], *extra], format="csr")

    p_rows, u_rows = rows(pl94), rows(units)
    h_rows = None if households is None else rows(households)
    dhc_rows = {"dhc_persons": None if dhc_persons is None else rows(dhc_persons)}
    if isinstance(dhc_units, tuple):
        dhc_rows.update(
            dhc_households=rows(dhc_household_rows(dhc_units[0])),
            dhc_units=rows(sp.csr_matrix(dhc_units[1], dtype=np.int64)),
        )
    names = release_table_names(
        "dhcp-2020" if dhc_persons is not None else "",
        "dhch-2020"
        if dhc_units is not None
        else "household2010"
        if households is not None
        else None,
    )
    out = []
    for name in names:
        path = run / "tables" / f"{name}.parquet"
        if in_parts:
            path = path / part_name(0)
        elif not regular_file(path):
            out.append(f"{path}: missing file")
            continue
        if dhc_units is True and name in DHC_HOUSEHOLD_TABLE_NAMES:
            out.append(f"{path}: not checked, the unit MDF's records do not read back")
            continue
        bad = table_part_mismatch(path, name, ids, p_rows, u_rows, h_rows, dhc_rows=dhc_rows)
        if bad:
            out.append(bad)
    return out
