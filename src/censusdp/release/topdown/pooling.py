"""The root's marginals estimated from every measurement that bears on them.

TopDown estimates the root (the nation, or the one state of a state run) from the root's
own measurements and then only distributes its counts down the tree. But every geolevel
measures marginals of the same persons: the sum of a query's noisy answers over the
counties of a state is an unbiased measurement of the state's answer, with the variance
of one county's answer times the number of counties. Production discards that
information at the root; at a small budget it is most of what there is (a one-state run
of dhc-lite-demo spends 2.5% of the budget at the US, 35% at the State and 62% below it).

:func:`pooled_root` combines them, bottom up, by generalised least squares on the tree
(the upward pass of Hay et al. (2010)): at each unit, the unit's
own noisy answer ``y`` (variance ``v``) and the sum ``s`` of its children's pooled
answers (variance ``V``, the sum of theirs) are two independent unbiased measurements of
the same answers, combined by inverse-variance weighting into one with variance
``1 / (1/v + 1/V)``. At the root this is the best linear unbiased estimate of the root's
answers from all the measurements of that query. Each query is pooled separately (its
variance is the same for every row of a unit), so the result is one measured query per
query name, which the root's estimation fits like any other measurement.

Queries with more than :data:`POOL_MAX_ROWS` rows (the cell-level ``detailed``) are pooled
only down the chain of one-unit levels below the root (the US and the lone State of a
one-state run measure the same persons): their answers at every unit would not fit in
memory at state scale, and below the State they are noise.

The other queries are pooled down to the shallowest level that gives the root's pooled
answers a variance within :data:`POOL_VARIANCE_TOLERANCE` of pooling every level's
(:func:`_deepest_worth_reading`, from the variances alone, before any value is read): a
level of many small units adds almost nothing at the root (a ``dhc-2020`` block's sum
over a state's 32,591 blocks has some 3 million times the State's variance), and its
answers are spread over thousands of part files, whose reading was most of the pooling
(10.8 of its 11.9 CPU s at a tenth of Vermont, for 672,069 block values).

A deliberate difference from 2020 production (docs/production-fidelity.md), whose code
has the idea as an option that its configurations leave off (``pool_measurements``):
the root's estimate uses the measurements of every level. Every measurement is still
used only through its public noisy answers and variance.
"""

from __future__ import annotations

import numpy as np

from censusdp.data.geography import Hierarchy
from censusdp.data.measurements import MeasuredQuery, Measurements

__all__ = ["POOL_MAX_ROWS", "POOL_MAX_VALUES", "POOL_VARIANCE_TOLERANCE", "pooled_root"]

POOL_MAX_ROWS = 4096
"""Queries with more rows are pooled only over the one-unit levels at the top."""
POOL_MAX_VALUES = 20_000_000
"""Levels whose pooled answers (units x rows of the small queries) would need more values
than this (160 MB) are left out of the root's estimate, with the levels below them (the
blocks of a large state; their noise makes them worth little at the root anyway)."""
POOL_VARIANCE_TOLERANCE = 1e-3
"""How much larger (relatively) the root's pooled variance may be for leaving out the
deepest levels (:func:`_deepest_worth_reading`): a thousandth of the variance, a
two-thousandth of the standard deviation."""
_CHUNK_VALUES = 2_000_000


class _Pool:
    """The pooled answers of one query at the units of one level: sums and variances."""

    def __init__(self, n_units: int, rows: np.ndarray) -> None:
        self.rows = rows
        self.value = np.zeros((n_units, rows.size))
        self.var = np.full(n_units, np.inf)

    def combine(self, start: int, y: np.ndarray, v: float | np.ndarray) -> None:
        """Pool the units ``start:start+len(y)``'s own answers ``y`` (variance ``v``: one
        for all, or one per unit with ``inf`` for a unit not measured)."""
        stop = start + y.shape[0]
        old_v = self.var[start:stop]
        v = np.broadcast_to(np.asarray(v, dtype=np.float64), old_v.shape)
        with np.errstate(divide="ignore"):
            w_old = 1.0 / old_v  # 0 where nothing is pooled yet (variance inf)
            w_new = 1.0 / v  # 0 for a unit not measured
            tot = w_old + w_new
            mine = np.where(w_new[:, None] > 0, y * w_new[:, None], 0.0)  # NaN-safe
            pooled = (self.value[start:stop] * w_old[:, None] + mine) / np.where(tot > 0, tot, 1.0)[
                :, None
            ]
            self.var[start:stop] = 1.0 / tot
        self.value[start:stop] = np.where((tot > 0)[:, None], pooled, self.value[start:stop])


def _one_unit_levels(hierarchy: Hierarchy) -> int:
    """How many levels from the top have exactly one unit."""
    n = 0
    while n < hierarchy.n_levels and hierarchy.n_units(n) == 1:
        n += 1
    return n


def pooled_root(
    ms: Measurements, hierarchy: Hierarchy, *, variance_floor: float = 1e-6
) -> list[MeasuredQuery]:
    """One measured query per query name: the root's answers pooled from every level.

    Args:
        ms: the noisy measurements.
        hierarchy: the geounits they refer to.
        variance_floor: added to every measurement's variance (the driver's floor; it
            keeps exact measurements' weights finite).

    Returns:
        per query name (in the order first met, top level first), a
        :class:`~censusdp.data.measurements.MeasuredQuery` of the root with one unit,
        its pooled answers and their variance (``mechanism = "pooled"``).
    """
    n_levels = hierarchy.n_levels
    top = _one_unit_levels(hierarchy)
    names: dict[str, tuple[np.ndarray, str]] = {}
    for level in range(n_levels):
        for mq in ms.read(level, 0, 0):
            names.setdefault(mq.query, (mq.rows, mq.geolevel))
    # per query: the deepest level it is pooled from (the small queries: the deepest
    # level whose pooled answers fit in POOL_MAX_VALUES)
    small = sum(rows.size for rows, _ in names.values() if rows.size <= POOL_MAX_ROWS)
    lo = n_levels - 1
    while lo > 0 and hierarchy.n_units(lo) * small > POOL_MAX_VALUES:
        lo -= 1
    variances = [_level_variances(ms, level) for level in range(lo + 1)]
    deepest = {
        name: max(top - 1, 0)
        if rows.size > POOL_MAX_ROWS
        else _deepest_worth_reading(name, variances, hierarchy, max(top - 1, 0), lo, variance_floor)
        for name, (rows, _) in names.items()
    }
    pools: dict[str, _Pool] = {}  # the pooled answers of the level being built
    for level in range(n_levels - 1, -1, -1):
        n = hierarchy.n_units(level)
        active = [q for q in names if deepest[q] >= level]
        if not active:
            continue
        here = {q: pools.get(q) for q in active}
        for q in active:
            if here[q] is None:
                here[q] = _Pool(n, names[q][0])
        width = sum(names[q][0].size for q in active)
        step = max(1, _CHUNK_VALUES // max(width, 1))
        for c0 in range(0, n, step):
            c1 = min(n, c0 + step)
            # only the queries pooled at this level: below the top, the wide ``detailed``
            # query's values (229,320 a ddp-2010 block) are never read here
            for mq in ms.read(level, c0, c1, queries=here):
                if mq.query in here:
                    p = here[mq.query]
                    y = np.zeros((c1 - c0, p.rows.size))
                    pos = np.searchsorted(p.rows, mq.rows)
                    y[:, pos] = mq.values
                    p.combine(c0, y, mq.unit_variances() + variance_floor)
        if level == 0:
            pools = here
            break
        parent = hierarchy.parent[level]
        n_up = hierarchy.n_units(level - 1)
        pools = {}
        for q, p in here.items():
            if deepest[q] < level or n == 0 or not np.isfinite(p.var).all():
                continue  # not pooled from this level (no units, or one has no answer)
            up = _Pool(n_up, p.rows)
            np.add.at(up.value, parent, p.value)
            up.var = np.bincount(parent, weights=p.var, minlength=n_up)
            pools[q] = up
    out = []
    root = hierarchy.geolevels[0].name
    for q, p in pools.items():
        if np.isfinite(p.var[0]):
            out.append(MeasuredQuery(root, q, p.rows, p.value[:1], float(p.var[0]), "pooled"))
    return out


def _level_variances(ms: Measurements, level: int) -> dict[str, np.ndarray]:
    """Each query's ``(units,)`` variances at ``level`` (``inf``: a unit not measured),
    without reading a value (an NMF's from its footer)."""
    return {q: ms.unit_variances(level, q) for q in ms.queries_at(level)}


def _root_variance(
    query: str,
    variances: list[dict[str, np.ndarray]],
    hierarchy: Hierarchy,
    deepest: int,
    floor: float,
) -> float:
    """The variance of the root's pooled answers to ``query`` when pooled from the levels
    ``0..deepest``: :func:`pooled_root`'s upward pass on the variances alone."""
    from_below: np.ndarray | None = None
    for level in range(deepest, -1, -1):
        n = hierarchy.n_units(level)
        own = variances[level].get(query)
        with np.errstate(divide="ignore"):
            w = np.zeros(n) if own is None else 1.0 / (own + floor)
            if from_below is not None:
                w = w + 1.0 / from_below
            var = 1.0 / w
        if level == 0:
            return float(var[0]) if n else float("inf")
        if n == 0 or not np.isfinite(var).all():
            from_below = None  # not pooled up from this level (as pooled_root)
            continue
        from_below = np.bincount(
            hierarchy.parent[level], weights=var, minlength=hierarchy.n_units(level - 1)
        )
    return float("inf")


def _deepest_worth_reading(
    query: str,
    variances: list[dict[str, np.ndarray]],
    hierarchy: Hierarchy,
    top: int,
    lo: int,
    floor: float,
) -> int:
    """The shallowest level (from ``top`` down to ``lo``) whose pooling gives the root's
    answers to ``query`` a variance within :data:`POOL_VARIANCE_TOLERANCE` of pooling
    down to ``lo``."""
    best = _root_variance(query, variances, hierarchy, lo, floor)
    for deepest in range(top, lo):
        if _root_variance(query, variances, hierarchy, deepest, floor) <= best * (
            1.0 + POOL_VARIANCE_TOLERANCE
        ):
            return deepest
    return lo
