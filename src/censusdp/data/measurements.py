"""The noisy measurement record: what crosses from measuring to estimating.

A :class:`MeasuredQuery` holds the noisy answers of one query at every geounit of one
geolevel, with the variance of their noise. It is the only thing estimation
(:mod:`censusdp.release.topdown`, :mod:`censusdp.infer`) learns about the confidential
data, and what the noisy measurement file stores (:mod:`censusdp.io.nmf_write`). Measuring
produces these records (:mod:`censusdp.release.measure`); estimators consume them
through the :class:`Measurements` protocol, which the in-memory :class:`MeasurementSet`
and the file reader :class:`censusdp.io.nmf_read.NMFReader` both implement.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from censusdp.data.geography import GeoLevels
from censusdp.data.queries import Query
from censusdp.data.schema import Schema
from censusdp.errors import InternalError

__all__ = [
    "MeasuredChunk",
    "MeasuredQuery",
    "MeasurementSet",
    "Measurements",
    "concat_units",
    "measured_rows",
]


@dataclass(frozen=True, eq=False)
class MeasuredQuery:
    """The noisy answers of one query at every geounit of one geolevel.

    Attributes:
        geolevel: level name.
        query: canonical query name.
        rows: the answer rows that were measured (rows made only of structural zeros
            are not).
        values: ``(units, len(rows))`` noisy answers (int64 for discrete mechanisms).
        variance: the variance of each noisy answer: one float when every unit was
            measured with the same mechanism, else a ``(units,)`` float64 array, one
            variance per unit (a spine release with per-geounit budgets); ``inf`` marks a
            unit that was not measured (bypassed: its value row is 0 and carries no
            information).
        mechanism: a short mechanism name for the NMF and manifest.
    """

    geolevel: str
    query: str
    rows: np.ndarray
    values: np.ndarray
    variance: float | np.ndarray
    mechanism: str

    @property
    def uniform(self) -> bool:
        """Whether every unit has the same (finite) variance."""
        return np.ndim(self.variance) == 0

    def unit_variances(self) -> np.ndarray:
        """``(units,)`` float64 variance of each unit's answers (``inf``: not measured)."""
        if self.uniform:
            return np.full(self.values.shape[0], float(self.variance), dtype=np.float64)
        return np.asarray(self.variance, dtype=np.float64)

    def measured_units(self) -> np.ndarray:
        """``(units,)`` boolean mask of the units that were measured."""
        return np.isfinite(self.unit_variances())

    def dense(self, units: slice | np.ndarray, n_rows: int) -> np.ndarray:
        """Noisy answers of ``units`` as a ``(n, n_rows)`` float array; unmeasured rows 0."""
        vals = self.values[units]
        out = np.zeros((vals.shape[0], n_rows), dtype=np.float64)
        out[:, self.rows] = vals
        return out

    def _positions(self, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For sorted answer rows ``wanted``: which were measured, and their columns."""
        wanted = np.asarray(wanted, dtype=np.int64)
        if self.rows.size == 0:
            return np.zeros(wanted.size, dtype=bool), np.zeros(0, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.rows, wanted), self.rows.size - 1)
        hit = self.rows[pos] == wanted
        return hit, pos[hit]

    def columns(self, units: slice | np.ndarray, wanted: np.ndarray) -> np.ndarray:
        """Noisy answers of ``units`` on the answer rows ``wanted`` (sorted), as a
        ``(n, len(wanted))`` float array; unmeasured rows 0.

        What :meth:`dense` gives restricted to ``wanted``, without building the dense
        ``(n, n_rows)`` array (233,856 columns per unit for ``detailed`` of ``dhc-lite``).
        """
        vals = self.values[units]
        hit, cols = self._positions(wanted)
        out = np.zeros((vals.shape[0], hit.size), dtype=np.float64)
        out[:, hit] = vals[:, cols]
        return out

    def restricted(self, wanted: np.ndarray) -> MeasuredQuery:
        """The same query keeping only the measured rows among ``wanted`` (sorted)."""
        hit, cols = self._positions(wanted)
        return MeasuredQuery(
            self.geolevel,
            self.query,
            np.asarray(wanted, dtype=np.int64)[hit],
            np.ascontiguousarray(self.values[:, cols]),
            self.variance,
            self.mechanism,
        )

    def sliced(self, start: int, stop: int) -> MeasuredQuery:
        """The same query restricted to units ``start:stop`` of its level."""
        return MeasuredQuery(
            self.geolevel,
            self.query,
            self.rows,
            self.values[start:stop],
            self.variance if self.uniform else self.unit_variances()[start:stop],
            self.mechanism,
        )


class Measurements(Protocol):
    """What estimation reads: the noisy measurements of units ``start:stop`` of a level.

    Implemented by :class:`MeasurementSet` (in memory) and by
    :class:`censusdp.io.nmf_read.NMFReader` (chunked reads of a noisy measurement file),
    so the estimator never needs every measurement in memory at once.
    """

    schema: Schema
    geolevels: GeoLevels

    def read(
        self, level: int, start: int, stop: int, queries: Collection[str] | None = None
    ) -> list[MeasuredQuery]:
        """Measured queries of ``level`` (plan order), values of units ``start:stop``;
        only those named in ``queries`` when given (the others are not read at all)."""
        ...

    def queries_at(self, level: int) -> list[str]:
        """Names of the queries measured at ``level``, in plan order (no value read)."""
        ...

    def unit_variances(self, level: int, query: str) -> np.ndarray:
        """``(units,)`` noise variance of each unit's answers to ``query`` at ``level``
        (``inf``: a unit not measured), without reading a value."""
        ...


@dataclass(frozen=True, eq=False)
class MeasurementSet:
    """All noisy measurements of a run, with the geography they refer to.

    Attributes:
        schema: the schema whose histograms were measured.
        geolevels: the levels.
        geocodes: per level, the geocodes of the measured units (sorted).
        queries: ``(geolevel, query) -> MeasuredQuery``.
    """

    schema: Schema
    geolevels: GeoLevels
    geocodes: tuple[np.ndarray, ...]
    queries: dict[tuple[str, str], MeasuredQuery] = field(default_factory=dict)

    def at_level(self, geolevel: str) -> list[MeasuredQuery]:
        """The measured queries of one level, in the order they were planned."""
        return [m for (lv, _), m in self.queries.items() if lv == geolevel]

    def __iter__(self) -> Iterator[MeasuredQuery]:
        return iter(self.queries.values())

    @property
    def n_values(self) -> int:
        """Total number of noisy answers."""
        return int(sum(m.values.size for m in self.queries.values()))

    def read(
        self, level: int, start: int, stop: int, queries: Collection[str] | None = None
    ) -> list[MeasuredQuery]:
        """Measured queries of ``level`` restricted to units ``start:stop`` (only those
        named in ``queries`` when given)."""
        name = self.geolevels[level].name
        return [
            m.sliced(start, stop)
            for m in self.at_level(name)
            if queries is None or m.query in queries
        ]

    def queries_at(self, level: int) -> list[str]:
        """Names of the queries measured at ``level``, in plan order."""
        return [m.query for m in self.at_level(self.geolevels[level].name)]

    def unit_variances(self, level: int, query: str) -> np.ndarray:
        """``(units,)`` noise variance of each unit's answers to ``query`` at ``level``."""
        name = self.geolevels[level].name
        m = self.queries.get((name, query))
        if m is None:
            raise InternalError(f"no query {query!r} measured at {name}")
        return m.unit_variances()

    def add_chunks(self, chunks: Iterable[MeasuredChunk]) -> MeasurementSet:
        """Fill ``queries`` from chunks that cover every unit of their level in order."""
        parts: dict[tuple[str, str], list[MeasuredQuery]] = {}
        for ch in chunks:
            for mq in ch.queries:
                parts.setdefault((mq.geolevel, mq.query), []).append(mq)
        for key, mqs in parts.items():
            joined = concat_units(mqs)
            n = self.geocodes[self.geolevels.index(key[0])].size
            if joined.values.shape[0] != n:
                raise InternalError(f"chunks of {key} cover {joined.values.shape[0]} of {n} units")
            self.queries[key] = joined
        return self


def concat_units(mqs: list[MeasuredQuery]) -> MeasuredQuery:
    """One query's answers for consecutive runs of units (same rows), joined in order;
    one variance when every part has the same, else one per unit."""
    first = mqs[0]
    values = np.concatenate([m.values for m in mqs], axis=0)
    variance = (
        first.variance
        if all(m.uniform and m.variance == first.variance for m in mqs)
        else np.concatenate([m.unit_variances() for m in mqs])
    )
    return MeasuredQuery(first.geolevel, first.query, first.rows, values, variance, first.mechanism)


@dataclass(frozen=True, eq=False)
class MeasuredChunk:
    """The noisy answers of one :class:`MeasureTask` (units ``start:stop`` of a level)."""

    geolevel: str
    start: int
    stop: int
    geocodes: np.ndarray
    queries: tuple[MeasuredQuery, ...]
    cpu_seconds: float = 0.0

    @property
    def n_values(self) -> int:
        """Number of noisy answers in the chunk."""
        return int(sum(m.values.size for m in self.queries))


def measured_rows(schema: Schema, query: Query, *, structural_zeros: bool = False) -> np.ndarray:
    """Rows of ``query`` that contain at least one cell that is not a structural zero
    (``structural_zeros``: every row, as production measures them: ``detailed`` of
    ``pl94`` over its 2,016 cells, 126 of them minors in nursing facilities)."""
    if structural_zeros:
        return np.arange(query.n_rows, dtype=np.int64)
    live = ~schema.structural_zero_mask
    has_live = np.bincount(query.row_of_cell[live], minlength=query.n_rows) > 0
    return np.flatnonzero(has_live).astype(np.int64)
