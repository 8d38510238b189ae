"""Generalised least squares (BLUE) estimates of every cell from the noisy measurements.

Model. Every geounit ``u`` has an unknown detailed histogram ``x_u`` (live cells only),
with ``x_u = sum_{c child of u} x_c``. Each measured query ``q`` of ``u``'s level gives
``y_{u,q} = A_q x_u + e``, with independent noise of the variance stated in the NMF.
Some linear facts are known exactly: the invariant totals (state population, housing
units per block) and the cells that the published invariants force to zero (no
household population in a block without housing units, no population of a group-quarters
type in a block without such a facility). The GLS estimate is the best linear unbiased
estimate of every cell under these equality constraints, with its exact covariance.

Algorithm (the two-pass tree GLS of Hay, Rastogi, Miklau & Suciu 2010, *Boosting the
accuracy of differentially private histograms through consistency*, generalised to
vector-valued nodes with arbitrary measurement covariances: an upward information
filter and a downward Rauch-Tung-Striebel-type smoother on the geography tree):

* upward, leaves first: a unit's own measurements give the estimate ``m_u = M h_u``
  with covariance ``M = (sum_q A_q' A_q / v_q)^-1``, where
  ``h_u = sum_q A_q' y_{u,q} / v_q``. Its children's subtree estimates add up to an
  independent estimate ``s_u = sum_c xhat_c`` with covariance ``S_u = sum_c P_c``.
  Combined: ``xhat_u = s_u + S_u (S_u + M)^-1 (m_u - s_u)``,
  ``P_u = S_u (S_u + M)^-1 M``. Exact constraints are then imposed by Gaussian
  conditioning: for an exact total ``1'x = T``,
  ``xhat <- xhat + P1 (T - 1'xhat) / (1'P1)``, ``P <- P - P11'P / (1'P1)``; for zero
  cells ``E x = 0``, ``xhat <- xhat - PE'(EPE')^-1 E xhat``, ``P <- P - PE'(EPE')^-1 EP``.
* downward, root first: the root's estimate is final. Given a parent's final
  ``(xtilde_u, Ptilde_u)``, each child is conditioned on its family summing to it:
  with the gain ``G_c = P_c S_u^+``,
  ``xtilde_c = xhat_c + G_c (xtilde_u - s_u)``,
  ``Ptilde_c = P_c - G_c P_c + G_c Ptilde_u G_c'``
  (``S_u^+`` a pseudo-inverse: exactly known directions have zero variance).

Under a flat prior this is the exact posterior mean and covariance of the Gaussian model,
i.e. the constrained GLS estimate and its covariance; ``tests/infer`` checks it against a
dense direct GLS solve. Every covariance lives in the small block algebra of
:mod:`censusdp.infer._algebra` (four 15 x 15 blocks for ``pl94``), and the covariance of
a bottom unit depends only on its pattern of zero constraints, so the cost is a few
matrix-vector products per geounit.

Work is split into picklable tasks of whole families (:func:`run_up`, :func:`run_down`),
so an executor can run them like TopDown's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from censusdp.data.geography import Hierarchy, family_chunks
from censusdp.data.measurements import MeasuredQuery, Measurements
from censusdp.errors import InputError, InternalError, SchemaError
from censusdp.infer._algebra import Layout, apply, op_inv, op_pinv, quad_forms, query_gram
from censusdp.progress import Progress
from censusdp.progress import say as say_line

__all__ = [
    "Constraints",
    "LevelDesign",
    "LevelEstimates",
    "LineSet",
    "Z90",
    "Z95",
    "census_intervals",
    "condition_total",
    "condition_zero",
    "direct_sd",
    "level_design",
    "make_lines",
    "tree_gls",
]

Z90 = 1.6448536269514722
"""Standard normal 0.95 quantile (two-sided 90% interval)."""
Z95 = 1.959963984540054
"""Standard normal 0.975 quantile (two-sided 95% interval)."""


# -- lines (the published cells) ------------------------------------------------------------


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


def _line_variances(lines: LineSet, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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


# -- the design of one level ----------------------------------------------------------------


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


def _single_child_totals(
    hierarchy: Hierarchy, totals: dict[int, np.ndarray]
) -> dict[int, np.ndarray]:
    """``totals`` with every exact total also given to the parent of a single child.

    A unit with one child holds the same people, so it has the child's exact total
    (``nan`` where a level's total is unknown). This keeps an invariant exact when the
    child was not measured (a bypassed spine geounit), whose estimate is its parent's.
    """
    out = {lv: np.asarray(t, dtype=np.float64) for lv, t in totals.items()}
    for level in range(hierarchy.n_levels - 1, 0, -1):
        if level not in out:
            continue
        ptr = hierarchy.child_ptr[level - 1]
        single = np.flatnonzero(np.diff(ptr) == 1)
        child = out[level][ptr[single]]
        single, child = single[np.isfinite(child)], child[np.isfinite(child)]
        if single.size == 0:
            continue
        parent = out.get(level - 1)
        if parent is None:
            parent = np.full(hierarchy.n_units(level - 1), np.nan)
        else:
            parent = parent.copy()
        parent[single] = np.where(np.isfinite(parent[single]), parent[single], child)
        out[level - 1] = parent
    return out


def _variance_classes(
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


# -- exact constraints ------------------------------------------------------------------------


def condition_total(
    layout: Layout, x: np.ndarray, table: np.ndarray, index: np.ndarray, totals: np.ndarray
) -> np.ndarray:
    """Condition on ``1'x = T`` exactly; returns the new table (``x`` is updated in place).

    ``P 1 = (P_0 1_d) (x) 1``, so only block 0 changes:
    ``P_0 <- P_0 - P_0 1 1' P_0 / (1' P_0 1)``, and
    ``x <- x + (P_0 1_d) (T - 1'x) / (1' P_0 1_d prod_j n_j)``.
    Entries whose total is already exact (``1'P_0 1 = 0``) are left unchanged.
    """
    ones = np.ones(layout.d)
    p1 = table[:, 0] @ ones  # (K, d)
    q = p1 @ ones  # (K,)
    scale = np.maximum(np.abs(table[:, 0]).max(axis=(1, 2)), 1e-300)
    ok = q > 1e-13 * scale * layout.d
    new = table.copy()
    new[ok, 0] -= np.einsum("ki,kj->kij", p1[ok], p1[ok]) / q[ok, None, None]
    new[:, 0] = 0.5 * (new[:, 0] + np.swapaxes(new[:, 0], -1, -2))
    nsimple = float(np.prod(layout.sizes)) if layout.m else 1.0
    resid = totals - x.reshape(x.shape[0], -1).sum(axis=1)
    gain = np.where(ok[index], 1.0 / np.where(ok[index], q[index], 1.0), 0.0) / nsimple
    shift = p1[index] * (resid * gain)[:, None]
    x += shift.reshape((x.shape[0], layout.d) + (1,) * layout.m)
    return new


def condition_zero(
    layout: Layout, cov: np.ndarray, zero: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Condition a covariance on the general coordinates ``zero`` being exactly 0.

    Returns ``(R, P)``: the operator that maps an unconditioned mean to the conditioned
    one (``x <- x - P E'(E P E')^-1 E x`` in every block) and the conditioned covariance.
    """
    d = layout.d
    z = np.flatnonzero(zero)
    eye = np.broadcast_to(np.eye(d), cov.shape).copy()
    if z.size == 0:
        return eye, cov.copy()
    keep = np.flatnonzero(~zero)
    r = np.zeros_like(cov)
    p = np.zeros_like(cov)
    if keep.size:
        pzz = cov[:, z][:, :, z]
        pkz = cov[:, keep][:, :, z]
        gain = np.swapaxes(np.linalg.solve(pzz, np.swapaxes(pkz, -1, -2)), -1, -2)  # (B, k, z)
        pk = cov[:, keep][:, :, keep] - gain @ np.swapaxes(pkz, -1, -2)
        p[np.ix_(np.arange(cov.shape[0]), keep, keep)] = 0.5 * (pk + np.swapaxes(pk, -1, -2))
        r[np.ix_(np.arange(cov.shape[0]), keep, keep)] = np.eye(keep.size)
        r[np.ix_(np.arange(cov.shape[0]), keep, z)] = -gain
    return r, p


# -- tasks ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Constraints:
    """Exact linear facts entered into the GLS.

    Attributes:
        zero: ``(bottom units, d)``: general coordinates known to be zero at each
            bottom unit (all simple cells of that combination), or ``None``.
        totals: ``level -> (units,)`` exact total of every unit of that level.
    """

    zero: np.ndarray | None = None
    totals: dict[int, np.ndarray] | None = None

    def __post_init__(self) -> None:
        if self.zero is not None:
            z = np.asarray(self.zero)
            if z.ndim != 2 or z.dtype != bool:
                raise InputError(
                    f"zero constraints must be a 2-D boolean array (units x d), got "
                    f"{z.dtype} of shape {z.shape}"
                )
        for level, tot in (self.totals or {}).items():
            t = np.asarray(tot, dtype=np.float64)
            if t.ndim != 1 or not np.isfinite(t).all():
                raise InputError(
                    f"exact totals of level {level} must be a 1-D array of finite numbers"
                )


@dataclass(frozen=True, eq=False)
class UpTask:
    """The upward step for units ``start:start + n`` of one level (whole families)."""

    layout: Layout
    level: int
    start: int
    n: int
    design: LevelDesign | None
    values: tuple[np.ndarray, ...]
    child_sum: np.ndarray | None
    child_cov: np.ndarray | None
    pattern: np.ndarray | None
    pattern_ops: tuple[np.ndarray, np.ndarray] | None
    totals: np.ndarray | None
    parent_bounds: np.ndarray | None
    unit_designs: tuple[LevelDesign, ...] = ()
    unit_class: np.ndarray | None = None
    child_informed: np.ndarray | None = None


def _unit_classes(task: UpTask) -> tuple[tuple[LevelDesign, ...], np.ndarray]:
    """The designs of a task's units and each unit's design (``-1``: not measured).

    Without ``unit_class`` every unit has ``design`` (one variance per query of the
    level); a spine release's bypass gives units their own variances (classes)."""
    if task.unit_class is not None:
        return task.unit_designs, task.unit_class
    if task.design is None:
        return (), np.full(task.n, -1, dtype=np.int64)
    return (task.design,), np.zeros(task.n, dtype=np.int64)


def _information(task: UpTask, design: LevelDesign, sel: np.ndarray) -> np.ndarray:
    """``h = sum_q A_q' y_q / v_q`` of the units ``sel`` of a task, with ``design``."""
    return design.information_vector(tuple(v[sel] for v in task.values), task.layout.shape)


@dataclass(frozen=True, eq=False)
class UpResult:
    """Upward estimates of a task's units and their sums by parent.

    ``cov`` is a table of operators and ``cov_index`` says which entry each unit uses
    (bottom units share the entry of their zero pattern).
    """

    level: int
    start: int
    mean: np.ndarray
    cov: np.ndarray
    cov_index: np.ndarray
    parent_sum: np.ndarray | None
    parent_cov: np.ndarray | None
    informed: np.ndarray | None = None
    parent_informed: np.ndarray | None = None


def _sum_by_parent(
    values: np.ndarray, table: np.ndarray, index: np.ndarray, bounds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    starts = bounds[:-1]
    n_par = starts.size
    s = np.add.reduceat(values.reshape(values.shape[0], -1), starts, axis=0)
    s = s.reshape((n_par, *values.shape[1:]))
    if table.shape[0] <= 256:
        parent = np.repeat(np.arange(n_par), np.diff(bounds))
        counts = np.zeros((n_par, table.shape[0]))
        np.add.at(counts, (parent, index), 1.0)
        big = np.tensordot(counts, table, axes=1)
    else:
        big = np.add.reduceat(table[index], starts, axis=0)
    return s, big


def run_up(task: UpTask) -> UpResult:
    """One upward step (module docstring); pure and picklable.

    A unit that was not measured (a bypassed spine geounit: its single parent took its
    budget) has no information of its own: above the bottom its estimate is its
    children's sum; at the bottom it is ``informed = False`` and its parent uses its own
    measurements alone (the downward step then gives it the parent's estimate).
    """
    lay = task.layout
    designs, cls = _unit_classes(task)
    informed = cls >= 0
    if task.child_sum is None:  # bottom level: own measurements and zero patterns
        if task.pattern is None or task.pattern_ops is None:
            raise InternalError("a bottom-level GLS task needs measurements and zero patterns")
        rm_table, table = task.pattern_ops  # R_k M: own estimate conditioned on the zeros
        n_pat = rm_table.shape[0] // max(len(designs), 1)
        # one table entry per (design, zero pattern); unmeasured units: a zero entry
        index = np.where(informed, np.maximum(cls, 0) * n_pat + task.pattern, table.shape[0])
        table = np.concatenate([table, np.zeros((1, *table.shape[1:]))])
        mean = np.zeros((task.n, *lay.shape))
        for g in range(len(designs)):
            sel = cls == g
            if not sel.any():
                continue
            h = _information(task, designs[g], sel)
            idx = index[sel]
            part = np.empty_like(h)
            for k in np.unique(idx):
                at = idx == k
                part[at] = apply(lay, rm_table[k], h[at])
            mean[sel] = part
    else:
        s, big_s = task.child_sum, task.child_cov
        kids = np.ones(task.n, dtype=bool) if task.child_informed is None else task.child_informed
        mean, table = s.copy(), big_s.copy()
        for g in range(len(designs)):
            sel = cls == g
            if not sel.any():
                continue
            m = designs[g].cov
            own = apply(lay, m, _information(task, designs[g], sel))
            both = kids[sel]
            at = np.flatnonzero(sel)[both]
            if at.size:
                gain = np.swapaxes(
                    np.linalg.solve(big_s[at] + m, big_s[at]), -1, -2
                )  # S (S + M)^-1
                tab = gain @ m
                table[at] = 0.5 * (tab + np.swapaxes(tab, -1, -2))
                mean[at] = s[at] + apply(lay, gain, own[both] - s[at])
            alone = np.flatnonzero(sel)[~both]
            if alone.size:  # the children carry no information (a bypassed single child)
                table[alone] = m
                mean[alone] = own[~both]
        informed = informed | kids
        index = np.arange(task.n)
    if task.totals is not None:
        known = informed & np.isfinite(task.totals)
        if known.all():
            table = condition_total(lay, mean, table, index, task.totals)
        elif known.any():
            sub = mean[known]
            table = condition_total(lay, sub, table, index[known], task.totals[known])
            mean[known] = sub
    ps = pc = pi = None
    if task.parent_bounds is not None:
        ps, pc = _sum_by_parent(mean, table, index, task.parent_bounds)
        pi = np.logical_and.reduceat(informed, task.parent_bounds[:-1])
        sizes = np.diff(task.parent_bounds)
        if (~pi & (sizes > 1)).any():
            raise InputError(
                "a geounit that was not measured has siblings; only a single child may be "
                "bypassed (its parent takes its budget)"
            )
    return UpResult(task.level, task.start, mean, table, index, ps, pc, informed, pi)


@dataclass(frozen=True, eq=False)
class DownTask:
    """The downward step for units ``start:start + n`` of one level.

    ``up`` is the upward task to recompute the units' upward estimates (bottom level)
    or ``None`` with ``up_mean``/``up_cov``/``up_index`` given (levels kept in memory).
    Parent arrays hold the parents of these units, in order; ``parent_bounds`` cuts
    the units into families.
    """

    layout: Layout
    level: int
    start: int
    n: int
    up: UpTask | None
    up_mean: np.ndarray | None
    up_cov: np.ndarray | None
    up_index: np.ndarray | None
    parent_mean: np.ndarray | None
    parent_cov: np.ndarray | None
    parent_child_sum: np.ndarray | None
    parent_child_pinv: np.ndarray | None
    parent_bounds: np.ndarray | None
    lines: LineSet
    keep: bool
    up_informed: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class DownResult:
    """Final estimates and standard deviations of every line for a task's units."""

    level: int
    start: int
    estimate: np.ndarray
    sd: np.ndarray
    mean: np.ndarray | None
    cov: np.ndarray | None
    cov_index: np.ndarray | None


def run_down(task: DownTask) -> DownResult:
    """One downward step (module docstring); pure and picklable."""
    lay = task.layout
    informed = task.up_informed
    if task.up is not None:
        up = run_up(task.up)
        mean, table, index, informed = up.mean, up.cov, up.cov_index, up.informed
    else:
        mean, table, index = task.up_mean, task.up_cov, task.up_index
    if mean is None or table is None or index is None:
        raise InternalError("a downward GLS task needs the units' upward estimates")
    if task.parent_bounds is None:  # the root: upward estimate is final
        final, ftable, findex = mean, table, index
    else:
        parent = np.repeat(np.arange(task.parent_bounds.size - 1), np.diff(task.parent_bounds))
        keys = parent * (table.shape[0] + 1) + index
        ukeys, findex = np.unique(keys, return_inverse=True)
        p_of, k_of = ukeys // (table.shape[0] + 1), ukeys % (table.shape[0] + 1)
        pk = table[k_of]
        gain = pk @ task.parent_child_pinv[p_of]  # type: ignore[index]
        ftable = pk - gain @ pk + gain @ task.parent_cov[p_of] @ np.swapaxes(gain, -1, -2)  # type: ignore[index]
        ftable = 0.5 * (ftable + np.swapaxes(ftable, -1, -2))
        resid = task.parent_mean - task.parent_child_sum  # type: ignore[operator]
        shift = apply(lay, gain, resid[p_of])
        final = mean + shift[findex]
        if informed is not None and not informed.all():
            # a bypassed single child holds its parent's people: the parent's estimate
            bad = np.flatnonzero(~informed)
            final[bad] = task.parent_mean[parent[bad]]  # type: ignore[index]
            findex = findex.copy()
            findex[bad] = ftable.shape[0] + np.arange(bad.size)
            ftable = np.concatenate([ftable, task.parent_cov[parent[bad]]])  # type: ignore[index]
    est = final.reshape(task.n, -1) @ task.lines.matrix
    var_pairs, exact_pairs = _line_variances(task.lines, ftable)
    sd = np.sqrt(var_pairs[findex])
    exact = exact_pairs[findex]
    est[exact] = np.rint(est[exact])  # exactly determined lines are integers (invariants, zeros)
    if task.keep:
        return DownResult(task.level, task.start, est, sd, final, ftable, findex)
    return DownResult(task.level, task.start, est, sd, None, None, None)


# -- the driver ---------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class LevelEstimates:
    """Final estimates of units ``start:stop`` of one level (rows follow ``lines``)."""

    level: int
    start: int
    stop: int
    estimate: np.ndarray
    sd: np.ndarray


def _map(executor: object | None, fn: Callable, tasks: Iterator) -> Iterator:
    if executor is None:
        return map(fn, tasks)
    return executor.map(fn, tasks)  # type: ignore[attr-defined]


def tree_gls(
    measurements: Measurements,
    hierarchy: Hierarchy,
    layout: Layout,
    lines: LineSet,
    constraints: Constraints | None = None,
    *,
    executor: object | None = None,
    progress: Progress = None,
    chunk_values: int = 1 << 22,
    factors: Any = None,
) -> Iterator[LevelEstimates]:
    """Two-pass tree GLS; yields the final estimates level by level (top first), chunk by chunk.

    Args:
        measurements: the noisy measurements (an in-memory set or an NMF reader).
        hierarchy: the geounits.
        layout: the factorisation of the measured schema.
        lines: the linear functions to report for every unit.
        constraints: exact zero cells at the bottom level and exact totals.
        executor: runs the bottom level's tasks (``None``: in this process).
        progress: receives one line per level and pass.
        chunk_values: about how many noisy values one bottom task reads.
        factors: if given, a :class:`censusdp.infer.tree_cov.TreeFactors`, filled with
            what the covariance of any sum of bottom units needs (complete once the
            iterator is exhausted).

    Yields:
        :class:`LevelEstimates` in level order (top first), chunks in unit order.
    """
    cons = constraints or Constraints()
    bottom = hierarchy.n_levels - 1
    totals = _single_child_totals(hierarchy, cons.totals or {})
    names = hierarchy.geolevels.names

    def say(msg: str) -> None:
        say_line(progress, msg)

    by_class: dict[tuple[int, tuple[float, ...]], LevelDesign | None] = {}
    ops_cache: dict[tuple[float, ...], tuple[np.ndarray, np.ndarray]] = {}

    def design_of(
        level: int, measured: list[MeasuredQuery]
    ) -> tuple[LevelDesign | None, tuple[LevelDesign, ...], np.ndarray | None, list]:
        """The level's design, or per-unit designs (classes of equal variances)."""
        if not measured:
            return None, (), None, []
        keys, cls = _variance_classes(measured, names[level])
        ds = []
        for key in keys:
            if (level, key) not in by_class:
                uniform = [replace(m, variance=v) for m, v in zip(measured, key, strict=True)]
                by_class[(level, key)] = level_design(layout, level, names[level], uniform)
            ds.append(by_class[(level, key)])
        if len(ds) == 1 and (cls == 0).all():
            return ds[0], (), None, keys
        return (ds[0] if ds else None), tuple(ds), cls, keys

    def pattern_ops_of(keys: list, ds: list) -> tuple[np.ndarray, np.ndarray]:
        for key, des in zip(keys, ds, strict=True):
            if key not in ops_cache:
                ops = [condition_zero(layout, des.cov, pz) for pz in patterns]
                ops_cache[key] = (
                    np.stack([o[0] @ des.cov for o in ops]),
                    np.stack([o[1] for o in ops]),
                )
        if not keys:
            empty = np.zeros((0, layout.n_blocks, layout.d, layout.d))
            return empty, empty
        return (
            np.concatenate([ops_cache[k][0] for k in keys]),
            np.concatenate([ops_cache[k][1] for k in keys]),
        )

    # zero patterns of the bottom units
    nb = hierarchy.n_units(bottom)
    zero = cons.zero if cons.zero is not None else np.zeros((nb, layout.d), dtype=bool)
    if zero.shape != (nb, layout.d):
        raise InternalError(f"zero constraints have shape {zero.shape}, expected {(nb, layout.d)}")
    patterns, pattern_of = np.unique(zero, axis=0, return_inverse=True)
    pattern_of = pattern_of.reshape(-1)

    width = None

    def values_per_unit(level: int) -> int:
        nonlocal width
        if width is None:
            probe = measurements.read(level, 0, min(1, hierarchy.n_units(level)))
            width = max(1, sum(int(m.values.shape[1]) for m in probe))
        return width

    def chunks(level: int) -> list[tuple[int, int]]:
        if level == bottom:
            return family_chunks(hierarchy, level, values_per_unit(level), chunk_values)
        return family_chunks(hierarchy, level, 1, 1 << 62)

    def bounds_of(level: int, start: int, stop: int) -> np.ndarray | None:
        if level == 0:
            return None
        par = hierarchy.parent[level][start:stop]
        cut = np.flatnonzero(np.diff(par)) + 1
        return np.concatenate([[0], cut, [stop - start]]).astype(np.int64)

    # per level above the bottom: upward results and children sums
    up_mean: dict[int, np.ndarray] = {}
    up_cov: dict[int, np.ndarray] = {}
    up_informed: dict[int, np.ndarray] = {}
    child_sum: dict[int, np.ndarray] = {}
    child_cov: dict[int, np.ndarray] = {}
    child_informed: dict[int, np.ndarray] = {}

    def up_task(level: int, start: int, stop: int) -> UpTask:
        measured = measurements.read(level, start, stop)
        design, unit_designs, unit_class, keys = design_of(level, measured)
        vals = tuple(m.values for m in measured) if design is not None else ()
        tot = totals.get(level)
        kids: tuple[np.ndarray | None, np.ndarray | None] = (None, None)
        pattern = None
        ops = None
        if level == bottom:
            if not measured:
                raise InputError(f"nothing is measured at the bottom level {names[level]}")
            ops = pattern_ops_of(keys, [by_class[(level, k)] for k in keys])
            if design is None:  # every unit of the run is a bypassed single child
                unit_class = np.full(stop - start, -1, dtype=np.int64)
            pattern = pattern_of[start:stop]
        else:
            kids = (child_sum[level][start:stop], child_cov[level][start:stop])
        return UpTask(
            layout,
            level,
            start,
            stop - start,
            design,
            vals,
            kids[0],
            kids[1],
            pattern,
            ops,
            None if tot is None else np.asarray(tot[start:stop], dtype=np.float64),
            bounds_of(level, start, stop),
            unit_designs,
            unit_class,
            None if level == bottom else child_informed[level][start:stop],
        )

    # -- upward ---------------------------------------------------------------------------
    for level in range(bottom, -1, -1):
        spans = chunks(level)
        if level > 0:
            n_par = hierarchy.n_units(level - 1)
            child_sum[level - 1] = np.zeros((n_par, *layout.shape))
            child_cov[level - 1] = np.zeros((n_par, layout.n_blocks, layout.d, layout.d))
            child_informed[level - 1] = np.ones(n_par, dtype=bool)
        keep_mean: list[np.ndarray] = []
        keep_cov: list[np.ndarray] = []
        keep_informed: list[np.ndarray] = []
        tasks = (up_task(level, a, b) for a, b in spans)
        runner = executor if level == bottom else None
        for res in _map(runner, run_up, tasks):
            if factors is not None and level > 0:
                factors.add_up(level, res.cov, res.cov_index, res.informed)
            if level > 0:
                p0 = int(hierarchy.parent[level][res.start])
                k = res.parent_sum.shape[0]  # type: ignore[union-attr]
                child_sum[level - 1][p0 : p0 + k] += res.parent_sum
                child_cov[level - 1][p0 : p0 + k] += res.parent_cov
                child_informed[level - 1][p0 : p0 + k] &= res.parent_informed  # type: ignore[arg-type]
            if level != bottom:
                keep_mean.append(res.mean)
                keep_cov.append(res.cov[res.cov_index])
                keep_informed.append(res.informed)  # type: ignore[arg-type]
        if level != bottom:
            up_mean[level] = np.concatenate(keep_mean)
            up_cov[level] = np.concatenate(keep_cov)
            up_informed[level] = np.concatenate(keep_informed)
        say(f"GLS upward   {names[level]:<10} {hierarchy.n_units(level):>8,} units")

    # -- downward -------------------------------------------------------------------------
    fin_mean: dict[int, np.ndarray] = {}
    fin_cov: dict[int, np.ndarray] = {}
    pinv: dict[int, np.ndarray] = {}
    for level in range(0, bottom + 1):
        if level > 0:
            pinv[level - 1] = op_pinv(child_cov[level - 1])
            if factors is not None:
                factors.child_pinv[level - 1] = pinv[level - 1]
        spans = chunks(level)
        keep = level != bottom

        def down_task(start: int, stop: int, level: int = level, keep: bool = keep) -> DownTask:
            if level > 0:
                par = hierarchy.parent[level]
                p0, p1 = int(par[start]), int(par[stop - 1]) + 1
                pm, pc = fin_mean[level - 1][p0:p1], fin_cov[level - 1][p0:p1]
                ps, pp = child_sum[level - 1][p0:p1], pinv[level - 1][p0:p1]
            else:
                pm = pc = ps = pp = None
            if level == bottom:  # recompute the upward estimates (not kept for the bottom)
                redo = replace(up_task(level, start, stop), parent_bounds=None)
                kept: tuple = (None, None, None)
            else:
                redo = None
                kept = (
                    up_mean[level][start:stop],
                    up_cov[level][start:stop],
                    np.arange(stop - start),
                )
            return DownTask(
                layout,
                level,
                start,
                stop - start,
                redo,
                *kept,
                pm,
                pc,
                ps,
                pp,
                bounds_of(level, start, stop),
                lines,
                keep,
                None if level == bottom else up_informed[level][start:stop],
            )

        keep_mean = []
        keep_cov = []
        runner = executor if level == bottom else None
        tasks = (down_task(a, b) for a, b in spans)
        for res, (a, b) in zip(_map(runner, run_down, tasks), spans, strict=True):
            if keep:
                keep_mean.append(res.mean)
                keep_cov.append(res.cov[res.cov_index])
            yield LevelEstimates(level, a, b, res.estimate, res.sd)
        if keep:
            fin_mean[level] = np.concatenate(keep_mean)
            fin_cov[level] = np.concatenate(keep_cov)
            if factors is not None and level == 0:
                factors.root_cov = fin_cov[0]
        if level > 0:  # the parents' arrays are no longer needed
            for store in (
                up_mean,
                up_cov,
                up_informed,
                fin_mean,
                fin_cov,
                child_sum,
                child_cov,
                child_informed,
                pinv,
            ):
                store.pop(level - 1, None)
        say(f"GLS downward {names[level]:<10} {hierarchy.n_units(level):>8,} units")
