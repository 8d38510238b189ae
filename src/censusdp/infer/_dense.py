"""Dense direct GLS on a small tree: the reference that the tree algorithm must reproduce.

The unknowns are the live cells of every bottom unit, ``x = vec(X)``. Each measurement
of unit ``u`` at level ``l`` is ``y = (a_u' (x) A_q) x + e`` with ``a_u`` the 0/1 vector of
the bottom units below ``u``, weighted by the inverse of that unit's own variance (a unit
not measured, variance ``inf``, has weight 0); exact constraints are rows of ``C x = c``. The constrained
GLS estimate solves the KKT system

    [ H  C' ] [ x      ]   [ D' W y ]
    [ C  0  ] [ lambda ] = [ c      ],     H = D' W D,  W = diag(1 / v),

and its covariance is ``H^-1 - H^-1 C' (C H^-1 C')^+ C H^-1``. Everything is formed
densely, so this is only for trees with a few thousand unknowns (tests, benchmarks).
"""

from __future__ import annotations

import numpy as np

from censusdp.data.geography import Hierarchy
from censusdp.data.measurements import MeasurementSet
from censusdp.data.queries import make_query
from censusdp.infer._algebra import Layout
from censusdp.infer.gls import Constraints, LineSet

__all__ = ["dense_gls"]


def dense_gls(
    measurements: MeasurementSet,
    hierarchy: Hierarchy,
    layout: Layout,
    lines: LineSet,
    constraints: Constraints | None = None,
    sets: np.ndarray | None = None,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Estimates and standard deviations of every line at every unit, by one dense solve.

    ``sets``, a ``(sets, bottom units)`` 0/1 matrix, asks for the lines summed over each
    set of bottom units instead of the levels.

    Returns:
        Per level (top first), ``(estimates (units, lines), sd (units, lines))``; with
        ``sets``, one entry for the sets.
    """
    cons = constraints or Constraints()
    bottom = hierarchy.n_levels - 1
    nb = hierarchy.n_units(bottom)
    size = layout.size
    n = nb * size
    cells = layout.cells.reshape(-1)
    member = [
        hierarchy.membership(level).toarray().astype(np.float64)
        for level in range(hierarchy.n_levels)
    ]
    member[bottom] = np.eye(nb)
    h = np.zeros((n, n))
    g = np.zeros(n)
    for mq in measurements:
        level = hierarchy.geolevels.index(mq.geolevel)
        q = make_query(layout.schema, mq.query)
        row = q.row_of_cell[cells]
        a_q = (mq.rows[:, None] == row[None, :]).astype(np.float64)  # (rows, size)
        design = np.kron(member[level], a_q)  # (units x rows, n)
        var = mq.unit_variances()  # per unit (inf: not measured)
        w = np.repeat(np.where(np.isfinite(var), 1.0 / var, 0.0), mq.rows.size)
        h += design.T @ (w[:, None] * design)
        g += design.T @ (w * np.asarray(mq.values, dtype=np.float64).reshape(-1))
    crow: list[np.ndarray] = []
    cval: list[float] = []
    if cons.zero is not None:
        gen = np.repeat(np.arange(layout.d), size // layout.d)
        for b in range(nb):
            for i in np.flatnonzero(cons.zero[b]):
                for c in np.flatnonzero(gen == i):
                    r = np.zeros(n)
                    r[b * size + c] = 1.0
                    crow.append(r)
                    cval.append(0.0)
    for level, tot in (cons.totals or {}).items():
        for u in range(hierarchy.n_units(level)):
            if np.isfinite(tot[u]):
                crow.append(np.kron(member[level][u], np.ones(size)))
                cval.append(float(tot[u]))
    if cons.groups is not None:  # a group's members' totals sum to its total
        gr = cons.groups
        for gi in range(gr.n):
            units = np.flatnonzero(np.asarray(gr.group) == gi)
            crow.append(np.kron(member[gr.level][units].sum(axis=0), np.ones(size)))
            cval.append(float(gr.totals[gi]))
    return _solve(h, g, crow, cval, member, lines, sets)


def _solve(h, g, crow, cval, member, lines, sets):  # noqa: ANN001, ANN202
    """The KKT solve and the lines of every level (or of ``sets``)."""
    hinv = np.linalg.inv(h)
    x = hinv @ g
    cov = hinv
    if crow:
        c = np.array(crow)
        chc = c @ hinv @ c.T
        k = hinv @ c.T @ np.linalg.pinv(chc, rcond=1e-12, hermitian=True)
        x = x + k @ (np.array(cval) - c @ x)
        cov = hinv - k @ c @ hinv
    if sets is not None:
        member = [np.asarray(sets, dtype=np.float64)]
    out = []
    for level in range(len(member)):
        funcs = np.kron(member[level], lines.matrix.T)  # (units x lines, n)
        est = (funcs @ x).reshape(member[level].shape[0], len(lines))
        var = np.sum((funcs @ cov) * funcs, axis=1)
        sd = np.sqrt(np.maximum(var, 0.0)).reshape(member[level].shape[0], len(lines))
        out.append((est, sd))
    return out
