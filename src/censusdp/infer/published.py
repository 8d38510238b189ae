"""GLS estimates and margins keyed as the published tables: any geography made of blocks.

A release publishes its tables on the tabulation geography (``tables/``: ``GEOID``,
``SUMLEV``, ``NAME``), whatever spine it measured on. Each published geounit, and each
district of a user's plan, is a set of blocks; its GLS estimate is the sum of its
blocks' estimates and its variance comes from the tree passes
(:func:`censusdp.infer.tree_cov.partition_variances`). This module defines those
target geographies, accumulates the block estimates as the GLS streams them, and lays
the result out in the long form users' tools read (one row per geounit and table
variable, ACS-style margins of error). It reads and writes nothing: the release
directory and the outputs are :mod:`censusdp.infer.release`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.infer.gls import Z90, Z95, census_intervals
from censusdp.infer.tree_cov import partition_variances
from censusdp.tables import TABLE_NAMES, table_definition
from censusdp.tables.geoids import entity_geographies, geo_identifiers

if TYPE_CHECKING:
    from censusdp.release.spine import ReleaseGeography

__all__ = [
    "LONG_COLUMNS",
    "PREFERRED_NOTE",
    "MarginAccumulator",
    "TargetGeography",
    "district_geography",
    "entity_target_geographies",
    "exact_zero",
    "long_table",
    "published_variables",
    "tabulation_geographies",
]

LONG_COLUMNS: tuple[str, ...] = (
    "GEOID",
    "SUMLEV",
    "NAME",
    "geolevel",
    "table",
    "variable",
    "value",
    "moe90",
    "moe95",
    "gls_estimate",
    "gls_sd",
    "gls_moe90",
    "gls_moe95",
    "gls_ci90_low",
    "gls_ci90_high",
    "gls_ci95_low",
    "gls_ci95_high",
    "preferred",
)
"""Columns of the long form (``margins`` and ``districts`` outputs)."""

PREFERRED_NOTE = (
    "preferred: 'value' where the published count's AMC margin (moe90) is at most the GLS "
    "estimate's (gls_moe90), else 'gls'; null without --simulations. The published counts "
    "are usually the more accurate (blocks, block groups, districts built from them: "
    "several times; most lines of tracts and counties), thanks to TopDown's "
    "non-negativity and exact block invariants; the GLS is unbiased with an exact "
    "interval, as good for the totals of geounits the spine measures, and the number for "
    "small subgroups whose published counts non-negativity biases (docs/inference.md)"
)
"""What ``preferred`` means (the manifest and docs/inference.md say it too)."""


def published_variables() -> tuple[str, ...]:
    """Every variable of P1-P5 and H1, in publication order."""
    return tuple(v for t in TABLE_NAMES for v in table_definition(t).variables)


@dataclass(frozen=True, eq=False)
class TargetGeography:
    """A geography of sets of blocks.

    Attributes:
        geolevel: its name (``County`` ..., or ``District``).
        target: per block of the estimation hierarchy (its order), the index of the
            geounit holding it (``-1``: none).
        ids: ``GEOID``, ``SUMLEV``, ``NAME`` of each geounit (object arrays).
        tabulation_level: the level of the tabulation hierarchy it is (``None`` for a
            place-level entity or a user's districts), whose published rows it joins.
        kind: ``tabulation`` (a level of the hierarchy), ``entity`` (places, county
            subdivisions, AIAN areas: published, off the hierarchy; their published
            values are the sums of their published blocks, as tabulating the MDF gives
            them) or ``district`` (a user's plan).
    """

    geolevel: str
    target: np.ndarray
    ids: dict[str, np.ndarray]
    tabulation_level: int | None = None
    kind: str = "district"

    @property
    def n(self) -> int:
        """Number of geounits."""
        return int(self.ids["GEOID"].size)


def tabulation_geographies(geo: ReleaseGeography) -> list[TargetGeography]:
    """Every level of the tabulation hierarchy above the blocks, as sets of blocks."""
    tab = geo.tabulation
    out = []
    for ti, lv in enumerate(tab.geolevels.levels[:-1]):
        target = np.asarray(geo.to_estimation(tab.ancestor_index(ti)), dtype=np.int64)
        out.append(
            TargetGeography(
                lv.name,
                target,
                geo_identifiers(tab.geocodes[ti], lv.length, lv.name),
                ti,
                "tabulation",
            )
        )
    return out


def entity_target_geographies(geo: ReleaseGeography) -> list[TargetGeography]:
    """The published geographies off the hierarchy (county subdivisions, places, AIAN
    areas: :func:`censusdp.tables.geoids.entity_geographies`) of a release whose
    geography records its blocks' attributes (a spine release's ``spine.parquet``);
    none otherwise."""
    ent = geo.entities
    if not ent:
        return []
    found = entity_geographies(geo.tabulation.blocks, ent.get("aian_area"), ent.get("place"))
    return [
        TargetGeography(
            g.geolevel, np.asarray(geo.to_estimation(g.unit), dtype=np.int64), g.ids, None, "entity"
        )
        for g in found
    ]


def district_geography(district_of_block: np.ndarray, geo: ReleaseGeography) -> TargetGeography:
    """The districts of a plan: ``district_of_block`` is each tabulation block's district
    id (a string; blocks in geocode order, every block assigned)."""
    ids, index = np.unique(np.asarray(district_of_block).astype(str), return_inverse=True)
    target = np.asarray(geo.to_estimation(index.reshape(-1)), dtype=np.int64)
    return TargetGeography(
        "District",
        target,
        {
            "GEOID": ids.astype(object),
            "SUMLEV": np.full(ids.size, None, dtype=object),
            "NAME": np.asarray([f"District {d}" for d in ids.tolist()], dtype=object),
        },
    )


@dataclass(eq=False)
class MarginAccumulator:
    """Sums of the block estimates of every target geography, and the blocks' own rows.

    Feed it the GLS's bottom-level chunks (:meth:`add_blocks`); :meth:`finish` adds the
    variances from the tree factors.
    """

    geographies: Sequence[TargetGeography]
    n_blocks: int
    n_lines: int
    keep_blocks: bool = True
    sums: list[np.ndarray] = field(default_factory=list)
    block_estimate: np.ndarray | None = None
    block_sd: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.sums = [np.zeros((g.n, self.n_lines)) for g in self.geographies]
        if self.keep_blocks:
            self.block_estimate = np.zeros((self.n_blocks, self.n_lines))
            self.block_sd = np.zeros((self.n_blocks, self.n_lines))

    def add_blocks(self, start: int, stop: int, estimate: np.ndarray, sd: np.ndarray) -> None:
        """Bottom units ``start:stop`` (estimation order) with their estimates and sds."""
        for g, acc in zip(self.geographies, self.sums, strict=True):
            t = g.target[start:stop]
            keep = np.flatnonzero(t >= 0)
            op = sp.csr_matrix((np.ones(keep.size), (t[keep], keep)), shape=(g.n, stop - start))
            acc += op @ estimate
        if self.block_estimate is not None and self.block_sd is not None:
            self.block_estimate[start:stop] = estimate
            self.block_sd[start:stop] = sd

    def variances(
        self,
        hierarchy: Hierarchy,
        parts: Sequence[tuple[Any, ...]],
    ) -> list[np.ndarray]:
        """Per geography, ``(units, lines)`` variances: each part is a tree's factors,
        its lines and the columns they fill (``None`` factors: lines known exactly),
        and optionally the tree's own hierarchy when it is not ``hierarchy`` (the unit
        run's spine, a :class:`censusdp.infer._unit_spine.UnitSpine`: the targets are
        moved to its block order)."""
        out = []
        for g in self.geographies:
            var = np.zeros((g.n, self.n_lines))
            for factors, lines, cols, *own in parts:
                if factors is not None and lines is not None:
                    tree, target = hierarchy, g.target
                    if own and own[0] is not None:
                        tree, target = own[0].hierarchy, own[0].target(g.target)
                    var[:, cols] = partition_variances(factors, tree, lines, target, g.n)
            out.append(np.maximum(var, 0.0))
        return out


def exact_zero(var: np.ndarray, estimate: np.ndarray) -> np.ndarray:
    """Variances that are rounding (below ``1e-9`` of a person squared per unit of scale)."""
    return np.where(var <= 1e-9 * np.maximum(1.0, np.abs(estimate)), 0.0, var)


def long_table(
    geography: TargetGeography,
    line_names: Sequence[str],
    estimate: np.ndarray,
    variance: np.ndarray,
    published: np.ndarray | None = None,
    released_mse: np.ndarray | None = None,
) -> pa.Table:
    """The long form of one geography: a row per geounit and published variable.

    Args:
        geography: the geounits.
        line_names: the GLS lines (columns of ``estimate``); a published variable that
            is not among them gets null GLS columns, ``total`` is P1_001N's and dropped.
        estimate, variance: ``(units, lines)`` GLS estimates and variances.
        published: ``(units, variables)`` published values (:func:`published_variables`
            order), or ``None``.
        released_mse: ``(units, variables)`` expected squared error of each published
            value (simulation), or ``None``: ``moe90 = 1.645 sqrt(mse)`` (null where it
            is NaN: a count the simulation did not re-release).
    """
    variables = published_variables()
    col = {name: i for i, name in enumerate(line_names)}
    k = len(variables)
    n = geography.n
    pick = np.asarray([col.get(v, -1) for v in variables])
    have = pick >= 0
    est = np.full((n, k), np.nan)
    var = np.full((n, k), np.nan)
    est[:, have] = estimate[:, pick[have]]
    var[:, have] = exact_zero(variance[:, pick[have]], estimate[:, pick[have]])
    rounded = have[None, :] & (var == 0)
    est = np.where(rounded, np.rint(est), est)
    sd = np.sqrt(var)
    e, s = est.reshape(-1), sd.reshape(-1)
    valid = np.isfinite(e)
    lo90, hi90 = census_intervals(np.nan_to_num(e), np.nan_to_num(s), Z90)
    lo95, hi95 = census_intervals(np.nan_to_num(e), np.nan_to_num(s), Z95)
    unit = np.repeat(np.arange(n, dtype=np.int32), k)
    var_idx = np.tile(np.arange(k, dtype=np.int32), n)
    tables = np.asarray([v.split("_", 1)[0] for v in variables], dtype=object)

    def ident(name: str) -> pa.Array:
        values = pa.array(geography.ids[name], pa.string())
        if values.null_count:  # a dictionary may not hold a null value: nulls as indices
            return values.take(pa.array(unit)).dictionary_encode()
        return pa.DictionaryArray.from_arrays(pa.array(unit), values)

    def opt(values: np.ndarray, typ: pa.DataType) -> pa.Array:
        return pa.array(values, typ, mask=~valid)

    if published is None:
        value = pa.nulls(n * k, pa.int64())
    else:
        value = pa.array(np.asarray(published, dtype=np.int64).reshape(-1), pa.int64())
    if released_mse is None:
        moe90 = moe95 = pa.nulls(n * k, pa.float64())
        preferred = pa.nulls(n * k, pa.string())
    else:
        rmse = np.sqrt(np.maximum(np.asarray(released_mse, dtype=np.float64), 0.0)).reshape(-1)
        unknown = np.isnan(rmse)
        moe90, moe95 = (pa.array(z * rmse, mask=unknown) for z in (Z90, Z95))
        gls_better = valid & (Z90 * np.nan_to_num(s) < Z90 * rmse)
        preferred = pa.DictionaryArray.from_arrays(
            pa.array(gls_better.astype(np.int32)), pa.array(["value", "gls"])
        )
    columns = {
        "GEOID": ident("GEOID"),
        "SUMLEV": ident("SUMLEV"),
        "NAME": ident("NAME"),
        "geolevel": pa.DictionaryArray.from_arrays(
            pa.array(np.zeros(n * k, np.int32)), pa.array([geography.geolevel], pa.string())
        ),
        "table": pa.DictionaryArray.from_arrays(
            pa.array(np.tile(np.asarray([TABLE_NAMES.index(t) for t in tables], np.int32), n)),
            pa.array(list(TABLE_NAMES), pa.string()),
        ),
        "variable": pa.DictionaryArray.from_arrays(
            pa.array(var_idx), pa.array(list(variables), pa.string())
        ),
        "value": value,
        "moe90": moe90,
        "moe95": moe95,
        "gls_estimate": opt(e, pa.float64()),
        "gls_sd": opt(s, pa.float64()),
        "gls_moe90": opt(Z90 * s, pa.float64()),
        "gls_moe95": opt(Z95 * s, pa.float64()),
        "gls_ci90_low": opt(lo90, pa.int64()),
        "gls_ci90_high": opt(hi90, pa.int64()),
        "gls_ci95_low": opt(lo95, pa.int64()),
        "gls_ci95_high": opt(hi95, pa.int64()),
        "preferred": preferred,
    }
    return pa.table(columns)
