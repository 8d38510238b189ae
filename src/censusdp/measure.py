"""Noisy measurements: the only view of the confidential data that estimation ever gets.

:func:`measure` answers every query of the strategy at every geounit of its geolevel
(all cells, zeros included; only rows made entirely of structural-zero cells are
skipped) and adds noise from the mechanism the budget assigns to that (geolevel,
query). The result, a :class:`MeasurementSet`, is what the noisy measurement file
(NMF) stores: each value with its variance. Estimation (:mod:`censusdp.topdown`)
receives a :class:`MeasurementSet` and the public :class:`Invariants`, never the
input microdata, so a release can be re-estimated from its NMF alone.

Noise is keyed per (geolevel, query, geounit): the stream for a geounit is
``source.child(geolevel, query, geocode)`` in the order of :attr:`Hierarchy.geocodes`,
so any executor that measures the same units with the same seed draws the same noise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from censusdp.errors import InternalError
from censusdp.geography import GeoLevels, Hierarchy
from censusdp.queries import Query, make_query
from censusdp.schema import Schema

__all__ = [
    "MeasuredQuery",
    "MeasurementSet",
    "measure",
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
        variance: the variance of each noisy answer.
        mechanism: a short mechanism name for the NMF and manifest.
    """

    geolevel: str
    query: str
    rows: np.ndarray
    values: np.ndarray
    variance: float
    mechanism: str

    def dense(self, units: slice | np.ndarray, n_rows: int) -> np.ndarray:
        """Noisy answers of ``units`` as a ``(n, n_rows)`` float array; unmeasured rows 0."""
        vals = self.values[units]
        out = np.zeros((vals.shape[0], n_rows), dtype=np.float64)
        out[:, self.rows] = vals
        return out


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


def measured_rows(schema: Schema, query: Query) -> np.ndarray:
    """Rows of ``query`` that contain at least one cell that is not a structural zero."""
    live = ~schema.structural_zero_mask
    has_live = np.bincount(query.row_of_cell[live], minlength=query.n_rows) > 0
    return np.flatnonzero(has_live).astype(np.int64)


def measure(
    level_histograms: list[sp.csr_matrix],
    hierarchy: Hierarchy,
    schema: Schema,
    plan: list[tuple[str, str, object]],
    source: object,
    *,
    progress: Callable[[str], None] | None = None,
) -> MeasurementSet:
    """Measure every planned (geolevel, query) at every geounit.

    Args:
        level_histograms: per level (top first), the ``(units x cells)`` true detailed
            histograms (sparse), as returned by :meth:`Hierarchy.aggregate`.
        hierarchy: the geounits.
        schema: the schema of the histograms.
        plan: ``(geolevel, query name, mechanism)`` triples; the mechanism has
            ``release(values, source)``, ``variance`` and a class name.
        source: a :class:`censusdp._random.RandomSource`.
        progress: optional callback receiving one line per geolevel.

    Returns:
        The noisy measurements. Nothing here keeps a reference to the histograms.
    """
    out = MeasurementSet(schema, hierarchy.geolevels, hierarchy.geocodes)
    for geolevel, qname, mech in plan:
        li = hierarchy.geolevels.index(geolevel)
        hist = level_histograms[li]
        if hist.shape[1] != schema.size:
            raise InternalError(
                f"histogram at {geolevel} has {hist.shape[1]} cells, schema {schema.size}"
            )
        query = make_query(schema, qname)
        rows = measured_rows(schema, query)
        exact = np.asarray(query.answer_many(hist).todense())[:, rows]
        exact = exact.astype(np.int64)
        values = _release_units(exact, hierarchy.geocodes[li], geolevel, query.name, mech, source)
        out.queries[(geolevel, query.name)] = MeasuredQuery(
            geolevel=geolevel,
            query=query.name,
            rows=rows,
            values=values,
            variance=float(mech.variance),
            mechanism=type(mech).__name__,
        )
        if progress is not None:
            progress(
                f"measured {geolevel:<10} {query.name:<32} {exact.shape[0]:>7} units x "
                f"{exact.shape[1]:>5} cells"
            )
    return out


def _release_units(
    exact: np.ndarray,
    geocodes: np.ndarray,
    geolevel: str,
    query: str,
    mech: object,
    source: object,
) -> np.ndarray:
    """Add noise to each unit's answers from that unit's own keyed stream."""
    keys = [(geolevel, query, str(g)) for g in geocodes]
    return np.asarray(mech.release_units(exact, source, keys), dtype=np.int64)  # type: ignore[attr-defined]
