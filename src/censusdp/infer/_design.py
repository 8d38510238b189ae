"""The measurement design of a level: which queries measure it, with what variances, and
the information matrix they give (in the block algebra of :mod:`censusdp.infer._algebra`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from censusdp.data.measurements import MeasuredQuery
from censusdp.errors import InputError
from censusdp.infer._algebra import Layout, op_inv, query_gram
from censusdp.infer._lines import LineSet

__all__ = ["LevelDesign", "direct_sd", "level_design", "variance_classes"]


@dataclass(frozen=True, eq=False)
class LevelDesign:
    """The measurement design shared by every unit of one level.

    Attributes:
        level: level index.
        queries: the measured query names, in the order values are passed.
        positions: per query, the index of the answer row (among the query's measured
            rows) of every live cell, on the reduced shape ``(d, s_1, ..., s_m)`` with
            ``s_j = n_j`` where the query groups by simple attribute ``j`` and 1 where
            its answer is constant along it (so ``A_q' y`` is a broadcast).
        variances: per query, the stated noise variance (from the NMF).
        info: ``J = sum_q A_q' A_q / v_q`` in block form.
        cov: ``M = J^-1``.
    """

    level: int
    queries: tuple[str, ...]
    positions: tuple[np.ndarray, ...]
    variances: tuple[float, ...]
    info: np.ndarray
    cov: np.ndarray

    def information_vector(
        self, values: tuple[np.ndarray, ...], shape: tuple[int, ...]
    ) -> np.ndarray:
        """``h = sum_q A_q' y_q / v_q`` for ``n`` units (values ``(n, rows)`` per query)."""
        n = values[0].shape[0] if values else 0
        parts: dict[tuple[int, ...], np.ndarray] = {}
        for pos, var, vals in zip(self.positions, self.variances, values, strict=True):
            scaled = np.asarray(vals, dtype=np.float64) * (1.0 / var)
            g = np.take(scaled, pos.reshape(-1), axis=1).reshape((n, *pos.shape))
            acc = parts.get(pos.shape)
            if acc is None:
                parts[pos.shape] = g
            else:
                acc += g
        h = np.zeros((n, *shape))
        for g in parts.values():
            h += g
        return h


_GRAMS: dict[tuple[int, str], tuple[Layout, np.ndarray, np.ndarray]] = {}


def _gram(layout: Layout, query: str) -> tuple[np.ndarray, np.ndarray]:
    """``query_gram`` cached per layout object. The entry keeps its layout: a layout
    freed and another allocated at the same ``id`` must not get the first one's Gram
    (it did, between test modules: "lacks answer rows of live cells")."""
    key = (id(layout), query)
    hit = _GRAMS.get(key)
    if hit is None or hit[0] is not layout:
        gram, rows = query_gram(layout, query)
        if len(_GRAMS) > 256:
            _GRAMS.clear()
        hit = (layout, gram, rows)
        _GRAMS[key] = hit
    return hit[1], hit[2]


def level_design(
    layout: Layout, level: int, level_name: str, measured: list[MeasuredQuery]
) -> LevelDesign | None:
    """The design of a level from its measured queries (``None`` if nothing is measured).

    Raises:
        InputError: for a non-positive or non-finite variance, a live cell whose
            answer row was not measured, or a query set that does not determine every
            cell (the information matrix is singular).
    """
    if not measured:
        return None
    info = np.zeros((layout.n_blocks, layout.d, layout.d))
    positions, variances, names = [], [], []
    for mq in measured:
        if not mq.uniform:
            raise InputError(
                f"({level_name}, {mq.query}) has per-geounit variances (a spine release whose "
                "single children were bypassed); censusdp's GLS needs one variance per "
                "(geolevel, query) and cannot infer from this release yet"
            )
        v = float(mq.variance)
        if not np.isfinite(v) or v <= 0:
            raise InputError(
                f"NMF variance of ({level_name}, {mq.query}) is {mq.variance!r}; it must be a "
                "finite number > 0"
            )
        gram, rows = _gram(layout, mq.query)
        flat = rows.reshape(-1)
        pos = np.searchsorted(mq.rows, flat)
        pos = np.minimum(pos, max(mq.rows.size - 1, 0))
        if mq.rows.size == 0 or not np.array_equal(mq.rows[pos], flat):
            raise InputError(
                f"NMF query ({level_name}, {mq.query}) lacks answer rows of live cells"
            )
        info += gram / v
        pos = pos.reshape(rows.shape)
        for j in range(layout.m):  # keep one slice along the axes the answer is constant on
            first = np.take(pos, [0], axis=1 + j)
            if np.array_equal(np.broadcast_to(first, pos.shape), pos):
                pos = first
        positions.append(pos.astype(np.int64))
        variances.append(v)
        names.append(mq.query)
    active = layout.active_blocks()
    info[~active] = np.eye(layout.d)
    w = np.linalg.eigvalsh(info)
    if (w[active].min(axis=-1) <= 1e-12 * w[active].max()).any():
        raise InputError(
            f"the queries measured at {level_name} ({names}) do not determine every cell; "
            "GLS needs a full-rank query set at each measured level (e.g. the detailed query)"
        )
    return LevelDesign(level, tuple(names), tuple(positions), tuple(variances), info, op_inv(info))


def direct_sd(layout: Layout, design: LevelDesign, lines: LineSet) -> np.ndarray:
    """For each line, the standard deviation of the best single-query direct estimate.

    A line is estimated directly from query ``q`` when it is a union of ``r`` of ``q``'s
    answer rows (on the live cells): the sum of those noisy answers has variance
    ``r v_q``. Returns the smallest such standard deviation over the level's queries
    (``inf`` where no query resolves the line). GLS is never worse: it is the best
    linear unbiased estimate and every direct estimate is linear and unbiased.
    """
    out = np.full(len(lines), np.inf)
    for qname, var in zip(design.queries, design.variances, strict=True):
        rows = _gram(layout, qname)[1].reshape(-1)
        nrow = int(rows.max()) + 1
        total = np.bincount(rows, minlength=nrow).astype(np.float64)
        for li in range(len(lines)):
            inside = np.bincount(rows, weights=lines.matrix[:, li], minlength=nrow)
            full = (inside == total) & (total > 0)
            if np.all(full | (inside == 0)):
                r = int(full.sum())
                out[li] = min(out[li], float(np.sqrt(r * var)))
    return out


def variance_classes(
    measured: list[MeasuredQuery], level_name: str
) -> tuple[list[tuple[float, ...]], np.ndarray]:
    """The distinct per-unit variance vectors (one per query) of a run of units, and each
    unit's class (``-1``: not measured; a spine release's bypassed single child).

    Raises:
        InputError: for a unit measured for some queries of its level and not others.
    """
    n = measured[0].values.shape[0]
    per = np.stack([m.unit_variances() for m in measured], axis=1).reshape(n, len(measured))
    fin = np.isfinite(per)
    some = fin.any(axis=1)
    if (some & ~fin.all(axis=1)).any():
        u = int(np.flatnonzero(some & ~fin.all(axis=1))[0])
        raise InputError(
            f"{level_name} unit {u} is measured for some queries of its level and not others"
        )
    cls = np.full(n, -1, dtype=np.int64)
    if not some.any():
        return [], cls
    keys, inv = np.unique(per[some], axis=0, return_inverse=True)
    cls[some] = inv.reshape(-1)
    return [tuple(float(v) for v in k) for k in keys], cls
