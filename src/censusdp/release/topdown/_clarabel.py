"""The generic least-squares backend: Clarabel's interior-point solver (internal).

Formulation (docs/estimation.md): variables are the
deviation ``d = x - x0`` from a proportional allocation ``x0`` with exact column sums (so
large counts do not meet the solver's absolute tolerances). Families of more than
:data:`DIRECT_MAX_CELLS` kept cells get one auxiliary residual ``z_qi = B_q x_i - y_qi``
per child and query on the present answer rows (so the Hessian is diagonal instead of
the dense ``A'WA`` that the total query would create):

    minimise   sum_{q,i} w_q ||z_qi||^2
    subject to z_qi - B_q d_i = B_q x0_i - y_qi          (zero cone)
               sum_i d_ij = p_j - sum_i x0_ij             (zero cone, not at the root)
               T_lo_i - 1'x0_i = 1'd_i                    (zero cone, exact totals)
               -d <= x0,  +-(group / total sums of d) <= bound - sums of x0   (nonneg cone)

Families of at most :data:`DIRECT_MAX_CELLS` kept cells (most block groups' blocks)
keep only ``d``, with the dense ``c x c`` Hessian ``H_i = sum_q w_qi B_q'B_q`` of each
child and the gradient at ``x0``: ``minimise sum_i d_i'H_i d_i + 2 g_i'd_i`` under the
same constraints. There the residuals outnumber the cells five to six times, and the
smaller program solved 1.7-2.6x faster with the same objective (relative differences
below 5e-8 on 245 block families of full generated Wyoming); with more cells its
iterations grew dearer than the residual form's (3x at 25-32 cells, 20x at 33-48).

Solved with ``direct_solve_method='qdldl'`` (3-4x faster than the default here).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from censusdp.release.topdown._common import Compressed, fixed_zeros, start_point
from censusdp.release.topdown.problem import Subproblem, _row_sums

__all__: list[str] = []

_VERBOSE = False

DIRECT_MAX_CELLS = 24
"""Families of at most this many kept cells are solved without residual variables."""


class _Rows:
    """The rows of a conic program built as coordinate triplets, block after block.

    Every constraint here is a 0/+-1 pattern over the free cells (plus the identity on
    the residuals), so its rows are found by index arithmetic over the free cells
    instead of sparse Kronecker products and slices: on the small families that make up
    most of a state's tasks (a block group of 33 blocks on 10 kept cells) the sparse
    assembly took three times as long as Clarabel's solve.
    """

    def __init__(self) -> None:
        self.r: list[np.ndarray] = []
        self.c: list[np.ndarray] = []
        self.v: list[np.ndarray] = []
        self.rhs: list[np.ndarray] = []
        self.n = 0

    def add(self, rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, b: np.ndarray) -> None:
        """Rows ``0..b.size-1`` of a block (``rows`` local to it) after the ones so far."""
        self.r.append(rows + self.n)
        self.c.append(cols)
        self.v.append(vals)
        self.rhs.append(b)
        self.n += b.size

    def add_sums(
        self, key: np.ndarray, sel: np.ndarray, sign: float, b: np.ndarray, eq: bool, small: float
    ) -> None:
        """Rows ``sign * sum of the free cells with key == s`` for each ``s`` in ``sel``,
        right-hand sides ``b``; a row without a free cell that holds trivially (``|b| <=
        small`` for an equality, ``b >= 0`` for an inequality) is dropped."""
        where = np.full(int(max(key.max(initial=-1), sel.max(initial=-1))) + 1, -1, np.int64)
        where[sel] = np.arange(sel.size)
        local = where[key] if key.size else key
        hit = np.flatnonzero(local >= 0)
        local = local[hit]
        empty = np.bincount(local, minlength=sel.size) == 0
        trivial = empty & ((np.abs(b) <= small) if eq else (b >= 0))
        keep = np.flatnonzero(~trivial)
        if keep.size < sel.size:
            renum = np.full(sel.size, -1, np.int64)
            renum[keep] = np.arange(keep.size)
            local = renum[local]
            ok = local >= 0
            local, hit = local[ok], hit[ok]
        self.add(local, hit, np.full(local.size, sign), b[keep])


def _residual_rows(
    eq: _Rows,
    comp: Compressed,
    k: int,
    fi: np.ndarray,
    fj: np.ndarray,
    x0: np.ndarray,
    wscale: float,
) -> np.ndarray:
    """The residual equalities ``z_qi - B_q d_i = B_q x0_i - y_qi`` into ``eq``; the
    diagonal of the Hessian over ``(d, z)`` (zero on ``d``)."""
    n_d = fi.size
    diag = [np.zeros(n_d)]
    z_off = n_d
    for q, m in enumerate(comp.sizes):
        if m == 0:
            continue
        n = k * m
        # the residuals' identity, then -B_q on the free cells
        rhs = _row_sums(x0, comp.rows[q], m).ravel() - comp.y[q].ravel()
        rows = np.concatenate([np.arange(n), fi * m + comp.rows[q][fj]])
        cols = np.concatenate([z_off + np.arange(n), np.arange(n_d)])
        vals = np.concatenate([np.ones(n), -np.ones(n_d)])
        eq.add(rows, cols, vals, rhs)
        diag.append(np.broadcast_to(2.0 * comp.child_w(q) / wscale, (k, m)).ravel().copy())
        z_off += n
    return np.concatenate(diag)


def _dense_objective(
    comp: Compressed, free: np.ndarray, fidx: np.ndarray, x0: np.ndarray, wscale: float
) -> tuple[sp.csc_matrix, np.ndarray]:
    """``P = 2 H`` (upper triangle, free cells ``fidx`` of the mask ``free``) and ``2 g``
    for ``d' H d + 2 g'd``: ``H_i = sum_q w_qi B_q'B_q`` per child,
    ``g_i = sum_q w_qi B_q'(B_q x0_i - y_qi)``."""
    k, c = x0.shape
    h = np.zeros((k, c, c))
    g = np.zeros((k, c))
    for q, m in enumerate(comp.sizes):
        if m == 0:
            continue
        w = np.broadcast_to(np.asarray(comp.child_w(q), dtype=np.float64) / wscale, (k, 1))
        r = comp.rows[q]
        h += w[:, :, None] * (r[:, None] == r[None, :])[None, :, :]
        answers = _row_sums(x0, r, m)
        g += w * (answers - comp.y[q])[:, r]
    pos = np.full(k * c, -1, dtype=np.int64)
    pos[fidx] = np.arange(fidx.size)
    upper = np.triu(np.ones((c, c), dtype=bool))[None] & free[:, :, None] & free[:, None, :]
    i, j, jj = np.nonzero(upper & (h != 0))
    p_mat = sp.csc_matrix(
        (2.0 * h[i, j, jj], (pos[i * c + j], pos[i * c + jj])), shape=(fidx.size, fidx.size)
    )
    return p_mat, 2.0 * g.ravel()[fidx]


def solve_clarabel(
    sub: Subproblem, comp: Compressed, *, tol: float = 1e-9, max_iter: int = 200
) -> tuple[np.ndarray | None, str, int]:
    """Solve with Clarabel; returns ``(x or None, status, iterations)``.

    Long because it assembles one conic program (objective, the equality and cone
    blocks of every constraint) whose pieces share index arithmetic; the assembly reads
    best top to bottom in the order of the formulation in the module docstring.
    """
    import clarabel

    k, c, n_groups = sub.k, sub.c, sub.G
    # cells forced to 0 (their group's upper bound is 0 for that child) get no variable:
    # they are most of the cells at a dhc-lite root with few group-quarters types, and
    # their implied equalities made the interior-point method report false infeasibility
    free = ~fixed_zeros(sub)
    fidx = np.flatnonzero(free.ravel())
    x0 = np.where(free, start_point(sub), 0.0)
    n_d = fidx.size
    if n_d == 0:  # every cell is forced to 0: nothing to solve (validation judges x0)
        return x0, "Solved", 0
    fi, fj = np.divmod(fidx, c)  # child and cell of each free variable
    # objective scaling: the argmin does not change, the solver sees O(1) weights
    wmax = float(comp.w.max(initial=0.0))
    if comp.cw is not None and comp.cw.size:
        wmax = float((comp.w[:, None] * comp.cw).max(initial=0.0))
    wscale = wmax if wmax > 0 else 1.0
    small = 1e-9 * max(1.0, sub.scale())

    eq, ineq = _Rows(), _Rows()
    if c <= DIRECT_MAX_CELLS:
        n_var = n_d
        p_mat, grad = _dense_objective(comp, free, fidx, x0, wscale)
    else:
        p_diag = _residual_rows(eq, comp, k, fi, fj, x0, wscale)
        n_var = p_diag.size
        p_mat, grad = sp.diags(p_diag, format="csc"), np.zeros(n_var)

    ineq.add(np.arange(n_d), np.arange(n_d), -np.ones(n_d), x0.ravel()[fidx])
    if sub.parent is not None and c:
        b = sub.parent.astype(np.float64) - x0.sum(axis=0)
        eq.add_sums(fj, np.arange(c), 1.0, b, True, small)
    gkey = fi * n_groups + sub.groups[fj]  # the (child, group) row of each free cell
    g0 = _row_sums(x0, sub.groups, n_groups).ravel()
    t0 = x0.sum(axis=1)
    exact = np.isfinite(sub.total_upper) & (sub.total_upper == sub.total_lower)
    if exact.any():
        sel = np.flatnonzero(exact)
        eq.add_sums(fi, sel, 1.0, sub.total_lower[sel] - t0[sel], True, small)
    gl = sub.group_lower.ravel()
    gu = sub.group_upper.ravel()
    sel = np.flatnonzero(np.isfinite(gu))
    if sel.size:
        ineq.add_sums(gkey, sel, 1.0, gu[sel] - g0[sel], False, small)
    sel = np.flatnonzero(gl > 0)
    if sel.size:
        ineq.add_sums(gkey, sel, -1.0, g0[sel] - gl[sel], False, small)
    sel = np.flatnonzero(np.isfinite(sub.total_upper) & ~exact)
    if sel.size:
        ineq.add_sums(fi, sel, 1.0, sub.total_upper[sel] - t0[sel], False, small)
    sel = np.flatnonzero((sub.total_lower > 0) & ~exact)
    if sel.size:
        ineq.add_sums(fi, sel, -1.0, t0[sel] - sub.total_lower[sel], False, small)

    n_eq, n_ineq = eq.n, ineq.n
    a_mat = sp.csc_matrix(
        (
            np.concatenate(eq.v + ineq.v),
            (np.concatenate([*eq.r, *(r + n_eq for r in ineq.r)]), np.concatenate(eq.c + ineq.c)),
        ),
        shape=(n_eq + n_ineq, n_var),
    )
    a_mat.sum_duplicates()
    b_vec = np.concatenate(eq.rhs + ineq.rhs)
    cones = []
    if n_eq:
        cones.append(clarabel.ZeroConeT(n_eq))
    if n_ineq:
        cones.append(clarabel.NonnegativeConeT(n_ineq))

    settings = clarabel.DefaultSettings()
    settings.verbose = _VERBOSE
    settings.direct_solve_method = "qdldl"
    settings.max_iter = max_iter
    settings.tol_gap_abs = tol
    settings.tol_gap_rel = tol
    settings.tol_feas = tol
    settings.max_threads = 1
    # Solve for (d, z) / s: the constraints in units of their largest right-hand side.
    # Unscaled, the noisy answers of a low-budget coarse problem (sums over chunks of
    # children, |y| ~ 1e4) made Clarabel declare PrimalInfeasible after two iterations
    # on problems with obvious feasible points (its infeasibility test has absolute
    # tolerances); scaled, the same problems solve in 12-13 iterations.
    rhs_scale = max(1.0, float(np.abs(b_vec).max(initial=0.0)))
    q_vec = grad / rhs_scale  # the linear term of the objective in units of d / rhs_scale
    solver = clarabel.DefaultSolver(p_mat, q_vec, a_mat, b_vec / rhs_scale, cones, settings)
    sol = solver.solve()
    status = str(sol.status)
    if sol.status not in (clarabel.SolverStatus.Solved, clarabel.SolverStatus.AlmostSolved):
        return None, status, int(sol.iterations)
    x = x0.ravel().copy()
    x[fidx] += rhs_scale * np.asarray(sol.x[:n_d])
    return x.reshape(k, c), status, int(sol.iterations)
