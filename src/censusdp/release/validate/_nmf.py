"""The NMF check: a noisy measurement file measures its recorded budget's plan.

:func:`check_nmf` checks the files' columns and (for part files) their index, has the
rows counted (:mod:`~censusdp.release.validate._nmf_rows`; the parts of a partitioned
NMF as tasks on an executor, :func:`_count_part`) and compares the counts with the
plan: every geounit of each measured level once with each of the query's cells.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.data.geography import Hierarchy
from censusdp.data.measurements import measured_rows
from censusdp.data.queries import run_query
from censusdp.data.spine import UnitShares
from censusdp.errors import InputError
from censusdp.io.nmf_files import (
    has_row_group_keys,
    missing_columns,
    nmf_files,
    row_group_keys,
    structural_zeros_measured,
)
from censusdp.io.parts import read_part_index
from censusdp.privacy.budget import Budget
from censusdp.release.manifest import sha256_of
from censusdp.release.measure import unit_variances
from censusdp.release.validate._entries import Hashed
from censusdp.release.validate._nmf_rows import Tally, cell_mix, count_files, shown


def check_nmf(
    path: Path,
    budget: Budget,
    hierarchy: Hierarchy,
    unit_shares: UnitShares | None = None,
    executor: Any = None,
    hashed: Hashed | None = None,
    newest_first: bool = False,
) -> tuple[bool, str]:
    """The NMF measures the budget's plan, completely, with the stated noise.

    Streamed a row group at a time, part by part for a partitioned NMF (whose index must
    list exactly its parts), whatever the row groups hold: per (geolevel,
    query) and geounit it counts the rows and sums a fingerprint of their cells, and
    compares both with the query's measured cells at the end. With per-geounit budgets
    (``unit_shares``, a spine release's bypass) every row's variance must be its unit's
    own (its share of the budget, exactly as recorded) and a bypassed unit has no rows.
    With an ``executor``, the parts of a partitioned NMF are counted by its tasks
    (:func:`_count_part`), each returning its unit range's counts, and only those are
    added up here, and each task's SHA-256 of its part goes to ``hashed`` (by the
    part's path in the run) for the checksum check. ``newest_first``: the tasks read the
    parts in the reverse of the index's order (the last written first: a run's check
    right after measuring finds them in the page cache, and leaves the first ones, the
    estimation's first reads, there).
    """
    try:
        files = nmf_files(path)
        index = read_part_index(path) if path.is_dir() else None
        metas = [pq.read_metadata(f) for f in files]
    except InputError as exc:
        return False, str(exc)
    except (OSError, pa.ArrowException) as exc:
        return False, f"{path.name}: not readable Parquet ({exc})"
    for f, md in zip(files, metas, strict=True):
        missing = missing_columns(md)
        if missing:
            return False, f"{shown(path, f)}: missing columns {missing}"
    levels = {name: i for i, name in enumerate(hierarchy.geolevels.names)}
    plan = {(m.geolevel, m.query): m for m in budget.measurements()}
    # a release of fidelity production measures structural-zero rows too (marked per file)
    zeros = any(structural_zeros_measured(md) for md in metas)
    # a query of the unit histogram a run measures beside its main one is of that schema
    rows_of = {
        q: measured_rows(*run_query(budget.schema, q), structural_zeros=zeros)
        for q in {q for _, q in plan}
    }  # one per query, not per (level, query): a query of 1.6 million cells takes a while
    want = {k: rows_of[k[1]] for k in plan}
    unit_var = {
        k: (
            np.full(hierarchy.n_units(levels[k[0]]), float(m.variance))
            if unit_shares is None
            else unit_variances(
                m.mechanism,
                unit_shares.numerators[levels[k[0]]],
                unit_shares.level_numerators[levels[k[0]]],
            )
        )
        for k, m in plan.items()
    }
    tally = Tally(
        unit_var,
        {k: np.zeros(hierarchy.n_units(levels[k[0]]), dtype=np.int64) for k in plan},
        {k: np.zeros(hierarchy.n_units(levels[k[0]]), dtype=np.uint64) for k in plan},
        hierarchy.geocodes,
        levels,
    )
    if index is not None:
        problem = _check_index(path, index, metas, hierarchy, levels)
        if problem:
            return False, problem
    if executor is not None and index is not None:
        problem = _count_parts(executor, path, index, hierarchy, tally, hashed, newest_first)
    else:
        problem = count_files(path, files, tally)
    problem = problem or _miscounted(tally, want, hierarchy)
    if problem:
        return False, problem
    if unit_shares is None:
        return True, f"{len(plan)} level-queries, every geounit once, variances as recorded"
    skipped = sum(int((~np.isfinite(v)).sum()) for v in unit_var.values())
    return True, (
        f"{len(plan)} level-queries, every measured geounit once with its own share's "
        f"variance; {skipped:,} bypassed (geounit, query) pairs without rows"
    )


def _miscounted(tally: Tally, want: dict, hierarchy: Hierarchy) -> str | None:
    """The first (geolevel, query) and geounit whose rows are not each of the query's
    measured cells (``want``) once (none at a bypassed geounit), or ``None``."""
    for key, count in tally.rows.items():
        full = cell_mix(want[key]).sum(dtype=np.uint64)
        measured = np.isfinite(tally.plan[key])
        bad = np.where(measured, (count != want[key].size) | (tally.mix[key] != full), count != 0)
        if bad.any():
            u = int(np.flatnonzero(bad)[0])
            code = hierarchy.geocodes[tally.levels[key[0]]][u] or "(the whole)"
            if not measured[u]:
                return (
                    f"({key[0]}, {key[1]}) at geounit {code} has {int(count[u])} rows; it is "
                    "a bypassed single child (budget share 0) and must have none"
                )
            return (
                f"({key[0]}, {key[1]}) at geounit {code} has {int(count[u])} rows; every "
                f"geounit must have each of the query's {want[key].size} measured cells once"
            )
    return None


def _key_range(md: Any, where: str) -> tuple[tuple[str, str] | None, tuple[str, str] | None]:
    """The min and max geolevel and geocode over a file's row groups (footer only: its
    row-group keys, or the columns' statistics in a file written before them)."""
    if not has_row_group_keys(md):
        return _stat_range(md, "geolevel"), _stat_range(md, "geocode")
    levels: list[str] = []
    codes: list[str] = []
    for key in row_group_keys(md, where):
        if key is not None:  # None: an empty file's row group
            levels.append(key.geolevel)
            codes += [key.first, key.last]
    if not levels:
        return None, None
    return (min(levels), max(levels)), (min(codes), max(codes))


def _stat_range(md: Any, column: str) -> tuple[str, str] | None:
    """The min and max of a string column over a file's row groups (footer only)."""
    i = md.schema.to_arrow_schema().names.index(column)
    lo = hi = None
    for rg in range(md.num_row_groups):
        if md.row_group(rg).num_rows == 0:
            continue
        st = md.row_group(rg).column(i).statistics
        if st is None or not st.has_min_max:
            return None
        lo = str(st.min) if lo is None else min(lo, str(st.min))
        hi = str(st.max) if hi is None else max(hi, str(st.max))
    return None if lo is None else (lo, hi)


def _check_index(
    path: Path, index: dict, metas: list, hierarchy: Hierarchy, levels: dict
) -> str | None:
    """The part index (``_parts.json``) agrees with each part's footer: its rows, its one
    geolevel and its geocodes (within the unit range ``start:stop``)."""
    for rec, md in zip(index["parts"], metas, strict=True):
        where = f"{path.name}/{rec['file']}"
        if int(rec["rows"]) != md.num_rows:
            return f"{where} has {md.num_rows} rows; its index entry says {rec['rows']}"
        level = str(rec["geolevel"])
        li = levels.get(level)
        a, b = int(rec["start"]), int(rec["stop"])
        if li is None or not 0 <= a < b <= hierarchy.n_units(li):
            return f"{where}: index entry {level} units {a}..{b - 1} is not in the release"
        if md.num_rows == 0:
            continue
        try:
            lv, codes = _key_range(md, where)
        except InputError as exc:
            return str(exc)
        want = (str(hierarchy.geocodes[li][a]), str(hierarchy.geocodes[li][b - 1]))
        # within the range, not equal to it: bypassed units at either end have no rows
        # (which units must have rows is checked when the rows are counted)
        outside = codes is not None and (codes[0] < want[0] or codes[1] > want[1])
        if lv is not None and lv != (level, level) or outside:
            return (
                f"{where} holds {lv} geocodes {codes}; its index entry says {level} "
                f"units {a}..{b - 1} ({want[0]}..{want[1]})"
            )
    return None


@dataclass(frozen=True, eq=False)
class _PartCount:
    """Count one NMF part (``file``) said to hold units ``start:start + len(codes)`` of
    ``level`` (index ``li``) against the level's planned queries ``plan`` (each one's
    variance at each of those units; ``inf`` where a bypassed unit must have no rows)."""

    file: str
    shown: str
    level: str
    li: int
    start: int
    codes: np.ndarray
    plan: dict


def _count_part(job: _PartCount) -> tuple[str | None, dict, str, float]:
    """A task: the part's per-unit row counts and cell fingerprints, or its problem, and
    the part's SHA-256 and the task's CPU seconds."""
    c = time.process_time()
    n = job.codes.size
    tally = Tally(
        job.plan,
        {k: np.zeros(n, dtype=np.int64) for k in job.plan},
        {k: np.zeros(n, dtype=np.uint64) for k in job.plan},
        {job.li: job.codes},
        {job.level: job.li},
    )
    problem = count_files(Path(job.shown).parent, [Path(job.file)], tally)
    digest = sha256_of(job.file)
    if problem:
        return (
            f"{problem} (a part of {job.level} units {job.start}..{job.start + n - 1})",
            {},
            digest,
            time.process_time() - c,
        )
    counts = {k: (tally.rows[k], tally.mix[k]) for k in job.plan}
    return None, counts, digest, time.process_time() - c


def _count_parts(
    executor: Any,
    path: Path,
    index: dict,
    hierarchy: Hierarchy,
    tally: Tally,
    hashed: Hashed | None = None,
    newest_first: bool = False,
) -> str | None:
    """Count a partitioned NMF's parts on ``executor``; add their counts up here (into
    ``tally``, and their SHA-256 to ``hashed``). The index's entries are the release's
    levels and units (:func:`_check_index`); ``newest_first``: the last entry first."""
    jobs = []
    for rec in index["parts"]:  # each entry's level and units checked by _check_index
        level = str(rec["geolevel"])
        li, a, b = tally.levels[level], int(rec["start"]), int(rec["stop"])
        jobs.append(
            _PartCount(
                str(path / rec["file"]),
                f"{path.name}/{rec['file']}",
                level,
                li,
                a,
                hierarchy.geocodes[li][a:b],
                {k: v[a:b] for k, v in tally.plan.items() if k[0] == level},
            )
        )
    if newest_first:
        jobs.reverse()
    for job, (problem, counts, digest, cpu) in zip(
        jobs, executor.map(_count_part, jobs), strict=True
    ):
        if hashed is not None:
            hashed.record({job.shown: digest}, cpu)
        if problem:
            return problem
        span = slice(job.start, job.start + job.codes.size)
        for key, (r, m) in counts.items():
            tally.rows[key][span] += r
            tally.mix[key][span] += m
    return None
