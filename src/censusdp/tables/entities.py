"""Table rows of the published geographies off the hierarchy: county subdivisions,
places and AIAN areas.

The P.L. 94-171 tables are published for county subdivisions (summary level ``060``),
places (``160``), American Indian areas (``250``) and their state parts (``280``) as
well as for the levels of the hierarchy. None of these is nested in the hierarchy:
each is a set of blocks named by the input's block attributes
(:func:`censusdp.tables.geoids.entity_geographies`), so its row of a table is the sum
of its blocks' rows, one sparse product of the block histogram.

A release writes these rows in its tables' part 0, after the levels of the hierarchy
above the block, with ``geolevel`` the entity's kind (``CountySubdivision``, ``Place``,
``AIANArea``, ``AIANAreaState``: the keys of
:data:`~censusdp.tables.geoids.ENTITY_LEVELS`) and ``geocode`` its GEOID (an entity has
no hierarchical geocode). A release whose geography records no such attribute (the
tabulation hierarchy, or an input without ``place`` and ``aian_area``) has none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from censusdp.tables.geoids import ENTITY_LEVELS, IDENTIFIER_COLUMNS, entity_geographies

__all__ = ["ENTITY_GEOLEVELS", "EntityRows", "concat_identifiers", "entity_rows"]

ENTITY_GEOLEVELS: tuple[str, ...] = tuple(ENTITY_LEVELS)
"""The ``geolevel`` of the tables' rows off the hierarchy, in the order written."""

_ID_COLUMNS = ("geolevel", "geocode", *IDENTIFIER_COLUMNS)


@dataclass(frozen=True, eq=False)
class EntityRows:
    """The geounits off the hierarchy of some blocks, as table rows.

    Attributes:
        ids: ``geolevel``, ``geocode`` (the GEOID), ``GEOID``, ``SUMLEV``, ``NAME`` of
            each geounit (string arrays), geography after geography.
        operator: ``(geounits x blocks)`` 0/1 matrix: a geounit's row of a table is the
            sum of its blocks' (``operator @ block_rows``).
    """

    ids: dict[str, pa.Array]
    operator: sp.csr_matrix

    @property
    def n(self) -> int:
        """Number of geounits."""
        return int(self.operator.shape[0])

    def rows(self, block_rows: sp.spmatrix) -> sp.csr_matrix:
        """The geounits' histograms from the blocks' (``blocks x cells``), int64."""
        return sp.csr_matrix(self.operator @ sp.csr_matrix(block_rows), dtype=np.int64)


def entity_rows(blocks: np.ndarray, entities: Mapping[str, np.ndarray] | None) -> EntityRows:
    """The county subdivisions, places and AIAN areas of ``blocks`` (16-digit geocodes,
    sorted) as table rows, from the blocks' ``aian_area`` and ``place`` attributes
    (``entities``; either may be missing, then its geographies are not there; ``None``
    or empty: no rows)."""
    codes = np.asarray(blocks)
    ent = dict(entities or {})
    found = entity_geographies(codes, ent.get("aian_area"), ent.get("place")) if ent else []
    ops, levels = [], []
    for g in found:
        keep = np.flatnonzero(g.unit >= 0)
        n = int(g.ids["GEOID"].size)
        ops.append(
            sp.csr_matrix(
                (np.ones(keep.size, np.int64), (g.unit[keep], keep)), shape=(n, codes.size)
            )
        )
        levels.append(np.full(n, g.geolevel, dtype=object))
    ids = {
        "geolevel": _strings([*levels]),
        "geocode": _strings([g.ids["GEOID"] for g in found]),
        **{c: _strings([g.ids[c] for g in found]) for c in IDENTIFIER_COLUMNS},
    }
    operator = (
        sp.csr_matrix(sp.vstack(ops, format="csr"), dtype=np.int64)
        if ops
        else sp.csr_matrix((0, codes.size), dtype=np.int64)
    )
    return EntityRows(ids, operator)


def concat_identifiers(*parts: Mapping[str, pa.Array]) -> dict[str, pa.Array]:
    """Identifier columns (``geolevel``, ``geocode``, ``GEOID``, ``SUMLEV``, ``NAME``) of
    some geounits, one after another."""
    return {c: pa.concat_arrays([pa.array(p[c], pa.string()) for p in parts]) for c in _ID_COLUMNS}


def _strings(arrays: list[np.ndarray]) -> pa.Array:
    if not arrays:
        return pa.array([], pa.string())
    return pa.array(np.concatenate(arrays).astype(object), pa.string())
