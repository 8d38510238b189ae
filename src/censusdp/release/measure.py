"""Noisy measurements: the only view of the confidential data that estimation ever gets.

:func:`measure` answers every query of the strategy at every geounit of its geolevel
(all cells, zeros included; only rows made entirely of structural-zero cells are
skipped) and adds noise from the mechanism the budget assigns to that (geolevel,
query). The result, a :class:`MeasurementSet`, is what the noisy measurement file
(NMF) stores: each value with its variance. Estimation (:mod:`censusdp.release.topdown`)
receives a :class:`MeasurementSet` and the public :class:`Invariants`, never the
input microdata, so a release can be re-estimated from its NMF alone.

Noise is keyed per (geolevel, query, geounit): the stream for a geounit is its window
of ``source.unit_streams(geolevel, query, codes=geocodes)`` (keyed by its own geocode),
so any executor that measures the same units with the same seed draws the same noise,
whatever the chunking, order, process or machine.

Large runs never hold every measurement at once. :func:`measure_tasks` cuts each level
into :class:`MeasureTask` chunks of about :data:`MEASURE_CHUNK_VALUES` noisy values
(:func:`~censusdp.data.geography.family_chunks`): whole families (the children of consecutive parents) where they fit, and a family too large for
one chunk cut at unit boundaries (a 540-block family of ``ddp-2010``, 229,320 values per
block, would otherwise be 124 million values in one task). Each task carries only its own
units' exact histogram rows; :func:`run_measure_task`
(a pure, picklable function an executor can run anywhere, including on Spark) returns a
:class:`MeasuredChunk`, which the pipeline appends to the NMF and drops. Estimation then
reads the measurements it needs chunk by chunk through the :class:`Measurements`
protocol, which both the in-memory :class:`MeasurementSet` and the NMF reader
(:class:`censusdp.io.nmf_read.NMFReader`) implement.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy, family_chunks
from censusdp.data.measurements import MeasuredChunk, MeasuredQuery, MeasurementSet, measured_rows
from censusdp.data.queries import Query, make_query, run_query
from censusdp.data.schema import Schema
from censusdp.data.spine import UnitShares
from censusdp.errors import InternalError
from censusdp.privacy.budget import scaled_mechanism

__all__ = [
    "MEASURE_CHUNK_VALUES",
    "MeasureTask",
    "measure",
    "measure_tasks",
    "plan_by_histogram",
    "run_measure_task",
    "unit_variances",
]


MEASURE_CHUNK_VALUES = 1 << 24
"""About how many noisy values one measuring task draws and writes as one NMF part (four
times the estimation's read chunk, :data:`~censusdp.data.geography.DEFAULT_CHUNK_VALUES`).

A part costs its writer a fixed amount per row group and per query whatever its rows
(a ``dhc-2020`` block's ten queries hold 4 to 905,184 rows each), so larger parts cost
less a value: a ``dhc-2020`` block task of generated Vermont x0.1 at 2^22 values, 2^23
and 2^24, 26.0, 21.0 and 19.1 CPU ns a value (noise and part file, in a process that
keeps freed pages, :func:`~censusdp.execution.base.keep_freed_memory`;
``benchmarks/bench_measure_chunks.py``). A task of 2^24 values held about 220 MB more
than the process's base, against about 100 MB at 2^22."""


@dataclass(frozen=True, eq=False)
class MeasureTask:
    """Measure every planned query at units ``start:start + len(geocodes)`` of one level.

    The task carries the exact (confidential) histogram rows of its units only, the
    mechanisms and the parent random source; it is picklable, and its result does not
    depend on where or in which order it runs (noise is keyed per unit).

    Attributes:
        geolevel: level name.
        start: index of the first unit in the level.
        geocodes: geocodes of the units.
        histogram: ``(units, cells)`` exact counts (sparse).
        schema: the schema of the histogram.
        queries: ``(query name, mechanism)`` pairs in plan order.
        source: the parent :class:`~censusdp.privacy.randomness.RandomSource`.
        unit_scale: ``None`` (every unit at its geolevel's share), or per-geounit
            budgets ``(numerators, level numerator)``: unit ``u`` spends
            ``numerators[u] / level numerator`` times each query's planned amount, and
            is not measured when its numerator is 0 (a bypassed spine geounit).
        structural_zeros: also measure the rows made only of structural-zero cells, as
            production does (fidelity ``production``); their answers are pure noise.
    """

    geolevel: str
    start: int
    geocodes: np.ndarray
    histogram: sp.csr_matrix
    schema: Schema
    queries: tuple[tuple[str, Any], ...]
    source: Any
    unit_scale: tuple[np.ndarray, int] | None = None
    structural_zeros: bool = False


_QUERY_CACHE: dict[tuple[str, int, str, bool], tuple[Query, np.ndarray]] = {}


def _query_and_rows(schema: Schema, name: str, zeros: bool = False) -> tuple[Query, np.ndarray]:
    key = (schema.name, schema.size, name, zeros)
    hit = _QUERY_CACHE.get(key)
    if hit is None:
        q = make_query(schema, name)
        hit = (q, measured_rows(schema, q, structural_zeros=zeros))
        _QUERY_CACHE[key] = hit
    return hit


_COLUMN_CACHE: dict[tuple[str, int, str, bool], np.ndarray] = {}


def _column_of_cell(schema: Schema, name: str, zeros: bool = False) -> np.ndarray:
    """Per cell, the column of its measured row in the answers (``-1``: not measured)."""
    key = (schema.name, schema.size, name, zeros)
    hit = _COLUMN_CACHE.get(key)
    if hit is None:
        query, rows = _query_and_rows(schema, name, zeros)
        column = np.full(query.n_rows, -1, dtype=np.int64)
        column[rows] = np.arange(rows.size)
        hit = _COLUMN_CACHE[key] = column[query.row_of_cell]
    return hit


def _exact_answers(
    hist: sp.csr_matrix, schema: Schema, name: str, zeros: bool = False
) -> np.ndarray:
    """``(units, measured rows)`` exact answers (int64) of query ``name``: each cell's
    count added to its row (a query's rows partition the cells), in one pass over the
    histogram's non-zeros."""
    n_rows = _query_and_rows(schema, name, zeros)[1].size
    units = hist.shape[0]
    column = _column_of_cell(schema, name, zeros)[hist.indices]
    unit = np.repeat(np.arange(units, dtype=np.int64), np.diff(hist.indptr))
    keep = column >= 0
    out = np.zeros(units * n_rows, dtype=np.int64)
    np.add.at(out, unit[keep] * n_rows + column[keep], hist.data[keep].astype(np.int64))
    return out.reshape(units, n_rows)


def run_measure_task(task: MeasureTask) -> MeasuredChunk:
    """Answer and noise every query of a :class:`MeasureTask`.

    For unit ``u`` and query ``q`` the released answers are ``q(x_u)`` plus noise drawn
    from the unit's own CSPRNG stream, its window of ``source.unit_streams(geolevel, q,
    codes=geocodes)`` (``mech.release_units``; Kazan & Reiter (2022) sec. 2.1 for the
    discrete Gaussian; :mod:`censusdp.privacy.randomness` for the stream construction).
    """
    c0 = time.process_time()
    hist = task.histogram
    if hist.shape[1] != task.schema.size:
        raise InternalError(
            f"histogram at {task.geolevel} has {hist.shape[1]} cells, schema {task.schema.size}"
        )
    out = []
    for qname, mech in task.queries:
        query, rows = _query_and_rows(task.schema, qname, task.structural_zeros)
        exact = _exact_answers(hist, task.schema, qname, task.structural_zeros)
        if task.unit_scale is None:
            values = _release_units(
                exact, task.geocodes, task.geolevel, query.name, mech, task.source
            )
            variance: float | np.ndarray = float(mech.variance)
        else:
            values, variance = _release_scaled(exact, task, query.name, mech)
        out.append(
            MeasuredQuery(
                geolevel=task.geolevel,
                query=query.name,
                rows=rows,
                values=values,
                variance=variance,
                mechanism=type(mech).__name__,
            )
        )
    n = int(task.geocodes.size)
    return MeasuredChunk(
        task.geolevel,
        task.start,
        task.start + n,
        task.geocodes,
        tuple(out),
        time.process_time() - c0,
    )


@lru_cache(maxsize=256)
def _unit_mechanism(mech: Any, numerator: int, level: int) -> Any:
    return scaled_mechanism(mech, Fraction(numerator, level))


def unit_variances(mech: Any, numerators: np.ndarray, level: int) -> np.ndarray:
    """``(units,)`` noise variance of each unit measured with ``mech`` scaled by its budget
    ``numerators[u] / level``; ``inf`` for a unit that is not measured (numerator 0).

    The measuring step's own rule for a unit's mechanism (the ``_unit_mechanism`` that
    :func:`run_measure_task` draws with), so that :mod:`censusdp.release.validate` checks
    a noisy measurement file's variances against what measuring gives, not against a
    second copy of the rule."""
    out = np.full(numerators.size, np.inf)
    for d in np.unique(numerators):
        if d > 0:
            out[numerators == d] = float(_unit_mechanism(mech, int(d), int(level)).variance)
    return out


def _release_scaled(
    exact: np.ndarray, task: MeasureTask, query: str, mech: Any
) -> tuple[np.ndarray, float | np.ndarray]:
    """Answers of every unit with its own budget (``task.unit_scale``); 0 and variance
    ``inf`` for a unit that is not measured. One float variance when all units share one."""
    assert task.unit_scale is not None
    num, level = task.unit_scale
    values = np.zeros(exact.shape, dtype=np.int64)
    variance = np.full(num.size, np.inf)
    shares = np.unique(num)
    if (
        num.size
        and shares[-1] > 0
        and shares.size - (shares[0] <= 0) == 1
        and 4 * (num <= 0).sum() <= num.size
    ):
        # one budget for every measured unit (the usual case): no row copies; the few
        # bypassed units get noise from their own streams too, dropped here (a unit's
        # noise never depends on the other units, so this changes nobody's)
        m = _unit_mechanism(mech, int(shares[-1]), int(level))
        values = _release_units(exact, task.geocodes, task.geolevel, query, m, task.source)
        values[num <= 0] = 0
        variance[num > 0] = float(m.variance)
        shares = shares[:0]
    for d in shares:
        if d <= 0:
            continue
        m = _unit_mechanism(mech, int(d), int(level))
        sel = np.flatnonzero(num == d)
        values[sel] = _release_units(
            exact[sel], task.geocodes[sel], task.geolevel, query, m, task.source
        )
        variance[sel] = float(m.variance)
    if variance.size and np.isfinite(variance).all() and (variance == variance[0]).all():
        return values, float(variance[0])
    return values, variance


def plan_by_histogram(
    schema: Schema, plan: list[tuple[str, str, Any]]
) -> dict[str, list[tuple[str, str, Any]]]:
    """A run's plan by the histogram each query reads, keyed by that histogram's schema
    name: the run's own schema's, and the unit histogram measured beside it
    (:func:`censusdp.data.queries.run_query`; production's DHC household run measures
    ``tenvacgq`` on its unit histogram), in plan order."""
    out: dict[str, list[tuple[str, str, Any]]] = {}
    for m in plan:
        out.setdefault(_histogram_of(schema.name, m[1]), []).append(m)
    return out


@lru_cache(maxsize=1024)
def _histogram_of(schema_name: str, query: str) -> str:
    """The schema of the histogram query ``query`` of a run on ``schema_name`` reads
    (building a query of a million-cell schema takes a few hundredths of a second, and
    each simulated re-release splits its plan again)."""
    return run_query(schema_name, query)[0].name


def measure_tasks(
    level_histograms: list[sp.csr_matrix],
    hierarchy: Hierarchy,
    schema: Schema,
    plan: list[tuple[str, str, object]],
    source: object,
    *,
    target: int = MEASURE_CHUNK_VALUES,
    unit_shares: UnitShares | None = None,
    structural_zeros: bool = False,
) -> Iterator[MeasureTask]:
    """The measurement tasks of a plan: per level (top first), chunks of whole families,
    a family of more than ``target`` values cut at unit boundaries
    (:func:`family_chunks` with ``split_families``).

    Args:
        level_histograms: per level, the exact ``(units x cells)`` histograms.
        hierarchy: the geounits.
        schema: the schema of the histograms.
        plan: ``(geolevel, query name, mechanism)`` triples.
        source: the parent random source (each unit's noise comes from its own child).
        target: about how many noisy values one task produces.
        unit_shares: per-geounit budgets (:func:`censusdp.data.spine.bypass_shares`):
            each unit spends its own share instead of its geolevel's; ``None``: every
            unit its geolevel's share.
        structural_zeros: measure structural-zero rows too (:class:`MeasureTask`).
    """
    by_level: dict[str, list[tuple[str, Any]]] = {}
    for geolevel, qname, mech in plan:
        by_level.setdefault(geolevel, []).append((qname, mech))
    for li, lv in enumerate(hierarchy.geolevels.levels):
        queries = by_level.get(lv.name)
        if not queries:
            continue
        width = sum(_query_and_rows(schema, q, structural_zeros)[1].size for q, _ in queries)
        hist = sp.csr_matrix(level_histograms[li])
        codes = hierarchy.geocodes[li]
        scale = None
        if unit_shares is not None:
            scale = (unit_shares.numerators[li], unit_shares.level_numerators[li])
        for start, stop in family_chunks(hierarchy, li, width, target, split_families=True):
            yield MeasureTask(
                lv.name,
                start,
                codes[start:stop],
                hist[start:stop],
                schema,
                tuple(queries),
                source,
                None if scale is None else (scale[0][start:stop], scale[1]),
                structural_zeros,
            )


def measure(
    level_histograms: list[sp.csr_matrix],
    hierarchy: Hierarchy,
    schema: Schema,
    plan: list[tuple[str, str, object]],
    source: object,
    *,
    progress: Callable[[str], None] | None = None,
    unit_shares: UnitShares | None = None,
) -> MeasurementSet:
    """Measure every planned (geolevel, query) at every geounit.

    Args:
        level_histograms: per level (top first), the ``(units x cells)`` true detailed
            histograms (sparse), as returned by :meth:`Hierarchy.aggregate`.
        hierarchy: the geounits.
        schema: the schema of the histograms.
        plan: ``(geolevel, query name, mechanism)`` triples; the mechanism has
            ``release(values, source)``, ``variance`` and a class name.
        source: a :class:`censusdp.privacy.randomness.RandomSource`.
        progress: optional callback receiving one line per geolevel.
        unit_shares: per-geounit budgets (see :func:`measure_tasks`).

    Returns:
        The noisy measurements. Nothing here keeps a reference to the histograms.
    """
    out = MeasurementSet(schema, hierarchy.geolevels, hierarchy.geocodes)
    chunks = []
    tasks = measure_tasks(
        level_histograms, hierarchy, schema, plan, source, unit_shares=unit_shares
    )
    for task in tasks:
        chunks.append(run_measure_task(task))
        if progress is not None:
            progress(f"measured {task.geolevel:<10} units {task.start}..{chunks[-1].stop}")
    # plan order within a level is kept by add_chunks (dict insertion order)
    return out.add_chunks(chunks)


def _release_units(
    exact: np.ndarray,
    geocodes: np.ndarray,
    geolevel: str,
    query: str,
    mech: object,
    source: object,
) -> np.ndarray:
    """Add noise to each unit's answers from that unit's own stream
    (``source.unit_streams(geolevel, query, codes=geocodes)``), in place: ``exact`` (the
    caller's own fresh array) becomes the noisy values, so that no second array of the
    query's size is allocated."""
    out = mech.release_units(exact, source, (geolevel, query), geocodes, out=exact)  # type: ignore[attr-defined]
    return np.asarray(out, dtype=np.int64)
