"""The lines reported by the GLS (linear functions of a histogram, such as the published
cells) and their integer confidence intervals.

A line is an indicator of a product set over the layout's factors
(:mod:`censusdp.infer._algebra`), so its variance under any block-algebra covariance is
a handful of quadratic forms (:func:`line_variances`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from censusdp.errors import SchemaError
from censusdp.infer._algebra import Layout, quad_forms

__all__ = [
    "EXACT_RTOL",
    "INTERVAL_ROUNDOFF",
    "Z90",
    "Z95",
    "LineSet",
    "census_intervals",
    "line_variances",
    "make_lines",
]


Z90 = 1.6448536269514722
"""Standard normal 0.95 quantile (two-sided 90% interval)."""
Z95 = 1.959963984540054
"""Standard normal 0.975 quantile (two-sided 95% interval)."""


@dataclass(frozen=True, eq=False)
class LineSet:
    """Linear functions of the histogram to report, each an indicator of a product set.

    Attributes:
        names: the line names (``"total"``, ``"P1_001N"``, ...).
        matrix: ``(size, lines)`` 0/1 indicator over the live cells (natural layout).
        general: ``(K, d)`` distinct general-attribute indicators.
        line_general: ``(lines,)`` index of each line's general indicator.
        coef: ``(lines, B)``: ``prod_j t_j' Pi^{a_j} t_j`` per block, so that
            ``Var(t'x) = sum_a (t_L' P_a t_L) coef[line, a]``.
    """

    names: tuple[str, ...]
    matrix: np.ndarray
    general: np.ndarray
    line_general: np.ndarray
    coef: np.ndarray

    def __len__(self) -> int:
        return len(self.names)


def make_lines(
    layout: Layout, names: list[str] | tuple[str, ...], indicator: np.ndarray
) -> LineSet:
    """Lines from a ``(schema cells, lines)`` 0/1 matrix (structural-zero cells ignored).

    Raises:
        SchemaError: if a line is not a product set over the layout's factors.
    """
    ind = np.asarray(indicator)
    if ind.shape != (layout.schema.size, len(names)):
        raise SchemaError(
            f"line indicator has shape {ind.shape}, expected ({layout.schema.size}, {len(names)})"
        )
    live = ind[layout.cells.reshape(-1)].astype(bool)
    gen_rows: dict[bytes, int] = {}
    general: list[np.ndarray] = []
    line_general = np.zeros(len(names), dtype=np.int64)
    a = np.arange(layout.n_blocks)
    coef = np.ones((len(names), layout.n_blocks))
    for li, name in enumerate(names):
        t = live[:, li].reshape(layout.shape)
        axes = tuple(range(t.ndim))
        t_l = t.any(axis=axes[1:])
        parts = [t.any(axis=tuple(x for x in axes if x != 1 + j)) for j in range(layout.m)]
        outer = t_l
        for p in parts:
            outer = np.multiply.outer(outer, p)
        if t.any() and not np.array_equal(outer, t):
            raise SchemaError(f"line {name!r} is not a product set of the layout's attributes")
        key = t_l.tobytes()
        if key not in gen_rows:
            gen_rows[key] = len(general)
            general.append(t_l.astype(np.float64))
        line_general[li] = gen_rows[key]
        for j, (p, n) in enumerate(zip(parts, layout.sizes, strict=True)):
            s = float(p.sum())
            coef[li] *= np.where(((a >> j) & 1) == 0, s * s / n, s - s * s / n)
    return LineSet(tuple(names), live.astype(np.float64), np.array(general), line_general, coef)


EXACT_RTOL = 1e-9
"""A line whose variance is below this fraction of its scale (the same quadratic form
with every covariance replaced by its diagonal magnitude) is known exactly: the
constraints determine it, and what is left is rounding (about 1e-13 of the scale)."""


def line_variances(lines: LineSet, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(n, lines)`` variances ``t' P t`` of every line under operators ``(n, B, d, d)``,
    and a mask of the lines known exactly (variance 0 up to rounding, :data:`EXACT_RTOL`)."""
    q = quad_forms(ops, lines.general)  # (n, B, K)
    var = np.einsum("nbl,lb->nl", q[:, :, lines.line_general], lines.coef)
    diag = np.abs(np.diagonal(ops, axis1=-2, axis2=-1))  # (n, B, d)
    mag = np.einsum("nbd,kd->nbk", diag, lines.general) * lines.general.sum(axis=1)
    scale = np.einsum("nbl,lb->nl", mag[:, :, lines.line_general], np.abs(lines.coef))
    exact = var <= EXACT_RTOL * scale
    return np.where(exact, 0.0, np.maximum(var, 0.0)), exact


INTERVAL_ROUNDOFF = 1e-9
"""Relative slack of :func:`census_intervals` for floating-point round-off (persons for
estimates below 1): far below any sd the noise gives, far above the solves' errors."""


def census_intervals(
    estimate: np.ndarray, sd: np.ndarray, z: float
) -> tuple[np.ndarray, np.ndarray]:
    """Integer confidence limits ``max(ceil(est - z sd - t), 0)`` and
    ``max(floor(est + z sd + t), 0)``, ``t = INTERVAL_ROUNDOFF * max(1, |est|)``.

    For an integer truth ``k``, ``est - z sd <= k <= est + z sd`` holds exactly when
    ``ceil(est - z sd) <= k <= floor(est + z sd)``, and a count is never negative, so
    the integer interval covers the truth exactly when the real one does: its coverage
    is the nominal ``P(|N(0,1)| <= z)`` of the GLS estimate. ``t`` only absorbs
    floating-point round-off: a line that is zero by structure comes out of the
    solves as, say, ``1.05e-13`` with sd ``2.1e-14``, whose real interval holds no
    integer (``[1, 0]`` without ``t``, ``[0, 0]`` with it).
    """
    est = np.asarray(estimate, dtype=np.float64)
    half = z * np.asarray(sd, dtype=np.float64)
    slack = INTERVAL_ROUNDOFF * np.maximum(1.0, np.abs(est))
    low = np.maximum(np.ceil(est - half - slack), 0.0).astype(np.int64)
    high = np.maximum(np.floor(est + half + slack), 0.0).astype(np.int64)
    return low, high
