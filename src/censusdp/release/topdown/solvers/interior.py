"""A primal-dual interior-point method in marginal space, for dense families (internal).

Below the State a dhc-lite query never sees every cell alone, so the least-squares
Hessian ``2 B'WB`` is singular and the optimum is a large face, not a point. Where most
cells are positive (a state's counties: 14 children on 4,049 kept cells of generated
Vermont, 79% of them positive in Clarabel's answer) the active-set method
(:mod:`censusdp.release.topdown.solvers.active_set`) jumps between vertices of that face: each
free set of about 12,000 cells is as large as its active equalities, so thousands of
cells change sign every update and the method does not settle in 30 updates. An
interior-point method walks through the face instead; this one solves every Newton
system in the space of the marginal answers, as the active-set method does.

Variables: the cells ``x`` (those not forced to 0), the duals ``z >= 0`` of ``x >= 0``,
the multipliers ``mu`` of the equalities (column sums ``C x = p``, exact group and
total sums) and, for every bound row ``l <= R x <= u`` (group and total bounds that are
not exact), a slack ``s = R x`` with duals ``zl``, ``zu``. With ``D = X^-1 Z`` (plus
``2 w`` of a query that sees every cell alone), ``Sigma = zl / (s - l) + zu / (u - s)``
and ``G = [B; C; R]`` (one row per touched answer, per equality, per bound row) each
Newton step solves the quasi-definite system::

    [ D    G' ] [ dx ]   [ r1 ]        E = diag((2W)^-1, eps, Sigma^-1)
    [ G   -E  ] [ w  ] = [ r2 ]

by the symmetric positive definite Schur complement ``S = E + G D^-1 G'`` (one row per
answer and constraint, never one per cell: 12,700 rows for the County family above,
against 56,686 cells), then ``dx = D^-1 (r1 - G' w)``. In a family every row but the
column sums touches one child, so ``S`` is factored child by child with dense BLAS
(:class:`_Blocks`): one Cholesky per child's block, then one of the dense ``c x c``
Schur complement on the column sums. Cells whose ``1 / D`` has fallen
below ``DROP`` of the largest (cells going to 0) leave ``S``; their step still uses
``G'``. Mehrotra's predictor-corrector (Mehrotra 1992, "On the implementation of a
primal-dual interior point method", SIAM J. Optim. 2(4)) reuses one factorisation for
both solves.

Tolerances follow the noise: it stops when no cell's stationarity residual would move
it by more than ``tol`` persons (``tol = 1e-3`` of the noise standard deviation by
default), the equalities and bound rows are within ``feas_tol`` persons, and the
duality gap is below ``GAP`` of the objective (plus ``tol`` per cell at the Hessian's
scale).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.linalg import LinAlgError, cho_factor, cho_solve, solve_triangular
from scipy.linalg.blas import dsyrk, ssyrk

from censusdp.release.topdown.problem import Subproblem
from censusdp.release.topdown.solvers.base import Attempt, Compressed, Tolerances
from censusdp.release.topdown.solvers.common import fixed_zeros, measured_queries, start_point

__all__ = ["InteriorBackend", "solve_interior"]

MAX_ITER = 80
"""Newton steps before the method gives up (the chain then runs the next backend)."""
DENSE_MAX = 1500
"""Schur complements with at most this many rows are factored densely (Cholesky)."""
DROP = 1e-12
"""Cells whose ``1 / D`` is below this fraction of the largest leave the Schur complement."""
GAP = 1e-9
"""Duality gap accepted, relative to the objective."""
GAP_CELL = 0.1
"""Duality gap accepted per cell, in units of ``tol`` persons at the Hessian's scale."""
STEP = 0.995
"""Fraction of the way to the boundary taken by each step."""
REFINE = 5
"""Iterative-refinement solves per Newton direction (one factorisation)."""
LOOSE = 5.0
"""An iterate whose duality gap is below ``LOOSE * tol`` persons per cell at the Hessian's
scale is kept, and returned if later steps stall in rounding error."""
BLOCKED = True
"""Factor the Newton systems of families child by child (:class:`_Blocks`)."""
BLOCK_MAX_COUPLING = 12_000
"""Above this many coupling rows (column sums) the dense ``T`` of :class:`_Blocks` would
take more than 1.2 GB; such families keep the sparse factorisation."""
SINGLE_GAP = 1e3
"""While the duality gap is above this many times the accepted one, :class:`_Blocks`
builds and factors its dense ``T`` in single precision (the refinement against the exact
system recovers the accuracy an early Newton step needs)."""
RESYNC = True
"""After each step, bound-row slacks take the value of ``R x`` where it is strictly
inside the bounds (rounding error in the directions otherwise accumulates there)."""
EQ_REG = 1e-9
"""Regularisation of the equality rows, relative to their diagonal in the Schur complement."""
FOLD = True
"""In families, fold a query whose answers are sums of another query's answers into that
query's rows (:func:`_fold`): fewer rows in every Newton system, the same objective."""
FOLD_MAX_ROWS = 1000
"""A query is folded into another only if no child has more than this many of the
other's answers (each child's folded weight block is dense and inverted once)."""


def _rows(sub: Subproblem, comp: Compressed, fidx: np.ndarray, cell_qs: set[int]):
    """``B`` on the free cells (one row per touched answer), its targets and ``(2W)^-1``."""
    c = sub.c
    child, cell = np.divmod(fidx, c)
    r_parts, y_parts, e_parts = [], [], []
    n_rows = 0
    for q in range(len(comp.sizes)):
        w = float(comp.w[q])
        if w <= 0 or comp.sizes[q] == 0 or q in cell_qs:
            continue
        key = child * comp.sizes[q] + comp.rows[q][cell]
        present, local = np.unique(key, return_inverse=True)
        r_parts.append(n_rows + local)
        y_parts.append(comp.y[q].ravel()[present])
        e_parts.append(np.full(present.size, 1.0 / (2.0 * w)))
        n_rows += present.size
    n = fidx.size
    if not r_parts:
        return sp.csr_matrix((0, n)), np.zeros(0), np.zeros(0)
    rr = np.concatenate(r_parts)
    cc = np.tile(np.arange(n), len(r_parts))
    b = sp.csr_matrix((np.ones(rr.size), (rr, cc)), shape=(n_rows, n))
    return b, np.concatenate(y_parts), np.concatenate(e_parts)


def _fold(sub: Subproblem, comp: Compressed, fidx: np.ndarray, cell_qs: set[int]):
    """The answer rows of the Newton systems with nested queries folded: ``(B_f, E_f)``.

    A query ``s`` whose answer on every free cell is a function of another query ``t``'s
    answer (``total`` and ``hispanic*cenrace`` of ``votingage*hispanic*cenrace``) has
    ``B_s = M B_t`` for a 0/1 aggregation ``M``, so its term of the Hessian
    ``2 B_s' w_s B_s = 2 B_t' (w_s M'M) B_t``: the two queries together weigh ``t``'s rows
    by ``W_t = w_t I + sum_s w_s M_s' M_s``, block diagonal by child. The Newton system
    then has ``t``'s rows only, with ``E_f = (2 W_t)^-1`` (a dense block per child)
    where the unfolded one had ``(2 w)^-1`` on each row of both: an exact reformulation
    of the same Newton step with fewer rows (full generated Vermont's counties: 547 answer rows per
    county to 431). The objective and gradient keep the unfolded rows.

    Queries are taken largest first; each is folded into the first larger kept query it
    nests in on this family's free cells, or kept; the kept queries' rows are in query
    order.
    """
    c = sub.c
    child, cell = np.divmod(fidx, c)
    qs = [
        q
        for q in range(len(comp.sizes))
        if comp.w[q] > 0 and comp.sizes[q] > 0 and q not in cell_qs
    ]
    keys = {q: child * comp.sizes[q] + comp.rows[q][cell] for q in qs}
    present = {q: np.unique(keys[q], return_inverse=True) for q in qs}
    kept: list[int] = []
    into: dict[int, list[int]] = {}
    for q in sorted(qs, key=lambda q: -comp.sizes[q]):
        for t in kept:
            pt, inv_t = present[t]
            # q nests in t: each of t's answers falls in one answer of q
            pair = np.unique(inv_t * (present[q][0].size + 1) + present[q][1])
            per_child = np.bincount(pt // comp.sizes[t], minlength=sub.k)
            if pair.size == pt.size and per_child.max(initial=0) <= FOLD_MAX_ROWS:
                into[t].append(q)
                break
        else:
            kept.append(q)
            into[q] = []
    n = fidx.size
    g_parts, e_blocks, n_rows = [], [], 0
    for t in sorted(kept):  # in query order, as :func:`_rows`
        pt, inv_t = present[t]
        m = pt.size
        g_parts.append(n_rows + inv_t)
        wt = float(comp.w[t])
        if not into[t]:
            e_blocks.append(sp.diags(np.full(m, 1.0 / (2.0 * wt))))
            n_rows += m
            continue
        first = np.zeros(m, dtype=np.int64)
        first[inv_t] = np.arange(n)  # any free cell of each of t's answers
        ch_t = pt // comp.sizes[t]  # ascending: each child's rows are consecutive
        cut = np.flatnonzero(np.diff(ch_t)) + 1
        blocks = []
        for r in np.split(np.arange(m), cut):
            w_mat = np.diag(np.full(r.size, wt))
            for q in into[t]:
                sk = present[q][1][first[r]]
                w_mat += float(comp.w[q]) * (sk[:, None] == sk[None, :])
            blocks.append(0.5 * np.linalg.inv(w_mat))
        e_blocks.append(sp.block_diag(blocks, format="csr"))
        n_rows += m
    if not g_parts:
        return sp.csr_matrix((0, n)), sp.csr_matrix((0, 0))
    rr = np.concatenate(g_parts)
    cc = np.tile(np.arange(n), len(g_parts))
    g_b = sp.csr_matrix((np.ones(rr.size), (rr, cc)), shape=(n_rows, n))
    return g_b, sp.block_diag(e_blocks, format="csr")


def _constraints(sub: Subproblem, fidx: np.ndarray):
    """Equality rows ``(C, d)`` and bound rows ``(R, l, u)`` on the free cells.

    Equalities: column sums (with a parent), and group or total sums whose bounds are
    equal. Bound rows: group sums with a positive lower or a finite upper bound (an
    upper bound of 0 fixes the group's cells, which are not free), totals likewise.
    """
    k, c = sub.k, sub.c
    n = fidx.size
    child, cell = np.divmod(fidx, c)
    rows_eq, rhs_eq, rows_b, lo_b, hi_b = [], [], [], [], []
    if sub.parent is not None:
        rows_eq.append(sp.csr_matrix((np.ones(n), (cell, np.arange(n))), shape=(c, n)))
        rhs_eq.append(sub.parent.astype(np.float64))
    g_of = sub.groups[cell]
    present = np.zeros((k, sub.G), dtype=bool)
    present[child, g_of] = True
    gmat = sp.csr_matrix((np.ones(n), (child * sub.G + g_of, np.arange(n))), shape=(k * sub.G, n))
    tmat = sp.csr_matrix((np.ones(n), (child, np.arange(n))), shape=(k, n))
    for mat, lo, hi, has in (
        (gmat, sub.group_lower.ravel(), sub.group_upper.ravel(), present.ravel()),
        (tmat, sub.total_lower, sub.total_upper, np.ones(k, dtype=bool)),
    ):
        exact = has & (lo == hi)
        if exact.any():
            sel = np.flatnonzero(exact)
            rows_eq.append(mat[sel])
            rhs_eq.append(lo[sel])
        bound = has & ~exact & ((lo > 0) | np.isfinite(hi))
        if bound.any():
            sel = np.flatnonzero(bound)
            rows_b.append(mat[sel])
            lo_b.append(lo[sel])
            hi_b.append(hi[sel])
    empty = sp.csr_matrix((0, n))
    c_mat = sp.vstack(rows_eq, format="csr") if rows_eq else empty
    r_mat = sp.vstack(rows_b, format="csr") if rows_b else empty
    d = np.concatenate(rhs_eq) if rhs_eq else np.zeros(0)
    lo = np.concatenate(lo_b) if lo_b else np.zeros(0)
    hi = np.concatenate(hi_b) if hi_b else np.zeros(0)
    return c_mat, d, r_mat, lo, hi


def _factor(s_mat: sp.spmatrix):
    m = s_mat.shape[0]
    if m <= DENSE_MAX or s_mat.nnz > 0.2 * m * m:
        f = cho_factor(s_mat.toarray(), lower=True, check_finite=False)
        return lambda v: cho_solve(f, v, check_finite=False)
    lu = spla.splu(
        sp.csc_matrix(s_mat),
        permc_spec="MMD_AT_PLUS_A",
        diag_pivot_thresh=0.0,
        options={"SymmetricMode": True},
    )
    return lu.solve


def _owners(g_mat: sp.csr_matrix, col_child: np.ndarray) -> np.ndarray:
    """The child whose cells each row of ``g_mat`` touches, or ``-1`` for a row that
    touches several children (a column sum) or none."""
    m = g_mat.shape[0]
    coo = g_mat.tocoo()
    ch = col_child[coo.col]
    lo = np.full(m, np.iinfo(np.int64).max)
    hi = np.full(m, -1)
    np.minimum.at(lo, coo.row, ch)
    np.maximum.at(hi, coo.row, ch)
    return np.where(lo == hi, hi, -1)


class _Blocks:
    """``S`` eliminated child by child with dense BLAS: the rows that touch one child
    (its answers and bound rows) form dense blocks ``P_i`` on the diagonal, the column
    sums couple them (``F``, ``Q``)::

        S = [[P, F], [F', Q]],   T = Q - sum_i F_i' P_i^-1 F_i   (dense, c x c)

    so a family of ``k`` children on ``c`` cells with ``m`` answers each costs
    ``k (m^2 c + m c^2 / 2) + c^3 / 3`` flops (BLAS-3) per factorisation, where a general
    sparse factorisation of ``S`` fills in towards the same dense blocks one pivot at a
    time (the 14 counties of full generated Vermont: 4.4 CPU seconds a step against 5.6).
    """

    def __init__(
        self,
        gk: sp.csr_matrix,
        dinv: np.ndarray,
        e: np.ndarray,
        owner,
        rows_of,
        single=False,
        e_off: sp.csr_matrix | None = None,
    ):
        self.cpl = np.flatnonzero(owner < 0)
        dmat = sp.diags(dinv)
        gc = gk[self.cpl]
        gcd = sp.csr_matrix(dmat @ gc.T)
        # syrk updates it in place; in single precision (early steps) at twice the speed.
        # Built in Fortran order (no copy for BLAS); the column sums are disjoint, so
        # ``Q`` is diagonal and never goes through a sparse-to-dense conversion
        dt = np.float32 if single else np.float64
        q_s = (gc @ gcd).tocoo()
        if (q_s.row == q_s.col).all():
            q = np.zeros((self.cpl.size,) * 2, dtype=dt, order="F")
            q[np.diag_indices_from(q)] = q_s.diagonal() + e[self.cpl]
        else:
            q = q_s.toarray()
            q[np.diag_indices_from(q)] += e[self.cpl]
            q = np.asfortranarray(q, dtype=dt)
        syrk = ssyrk if single else dsyrk
        self.blocks = []
        for rows in rows_of:
            gi = gk[rows]
            p_i = (gi @ dmat @ gi.T).toarray()
            p_i[np.diag_indices_from(p_i)] += e[rows]
            if e_off is not None:  # folded queries' weight blocks (one child's rows)
                p_i += e_off[rows][:, rows].toarray()
            f_i = sp.csr_matrix(gi @ gcd)
            fac = cho_factor(p_i, lower=True, check_finite=False)
            if self.cpl.size:
                # W = L^-1 F in double (a single-precision solve stalled the method on
                # small dense families), Fortran order; then T -= W'W in T's precision
                w = solve_triangular(
                    fac[0],
                    f_i.toarray(order="F"),
                    lower=True,
                    check_finite=False,
                    overwrite_b=True,
                )
                if single:
                    w = w.astype(dt, order="F")
                q = syrk(-1.0, w, beta=1.0, c=q, trans=1, lower=1, overwrite_c=1)
            self.blocks.append((rows, fac, f_i))
        self.t = None
        if self.cpl.size:
            low, lower = cho_factor(q, lower=True, check_finite=False, overwrite_a=True)
            self.t = (np.asarray(low, dtype=np.float64), lower)

    def solve(self, v: np.ndarray) -> np.ndarray:
        out = np.empty_like(v)
        rb = v[self.cpl].copy()
        parts = []
        for rows, fac, f_i in self.blocks:
            a = cho_solve(fac, v[rows], check_finite=False)
            if self.t is not None:
                rb -= f_i.T @ a
            parts.append(a)
        if self.t is None:
            for (rows, _, _), a in zip(self.blocks, parts, strict=True):
                out[rows] = a
            return out
        b = cho_solve(self.t, rb, check_finite=False)
        out[self.cpl] = b
        for rows, fac, f_i in self.blocks:
            out[rows] = cho_solve(fac, v[rows] - f_i @ b, check_finite=False)
        return out


def _to_boundary(v: np.ndarray, dv: np.ndarray) -> float:
    """The largest step in ``[0, 1]`` that keeps ``v + a dv >= 0``."""
    neg = dv < 0
    if not neg.any():
        return 1.0
    return float(min(1.0, (-v[neg] / dv[neg]).min()))


class _Newton:
    """One Newton step's factorisation and state: directions for any centring target."""

    def __init__(self, **state) -> None:
        self.__dict__.update(state)

    def direction(self, r_c, r_cl, r_cu):
        """The step for complementarity residuals ``r_c`` (cells), ``r_cl``, ``r_cu`` (bounds)."""
        has_lo, has_hi, n_b, n_eq = self.has_lo, self.has_hi, self.n_b, self.n_eq
        rho_x = -self.r_d + r_c / self.x
        rho_s = (
            -self.r_s
            + np.where(has_lo, r_cl / self.sl, 0.0)
            - np.where(has_hi, r_cu / self.su, 0.0)
        )
        sig = np.maximum(self.sigma, 1e-300)
        r2 = np.concatenate(
            [np.zeros(n_b), -self.r_p1, np.where(self.sigma > 0, rho_s / sig, 0.0) - self.r_p2]
        )
        wv = self.solve(self.g_mat @ (self.dinv * rho_x) - r2)
        dx = self.dinv * (rho_x - self.g_t @ wv)
        # iterative refinement against the unregularised system (the equalities' ``eps``
        # and the dropped cells are only in the factorisation)
        for _ in range(REFINE):
            res2 = r2 - (self.g_mat @ dx - self.e_true * wv)
            if self.e_off is not None:
                res2 += self.e_off @ wv
            if float(np.abs(res2[n_b:]).max(initial=0.0)) <= self.accuracy:
                break
            dw = self.solve(-res2)
            wv = wv + dw
            dx = dx - self.dinv * (self.g_t @ dw)
        dnu = -wv[n_b + n_eq :]
        dmu = -wv[n_b : n_b + n_eq]
        ds = (self.r_mat @ dx + self.r_p2) if self.r_mat.shape[0] else np.zeros(0)
        dz = (r_c - self.z * dx) / self.x
        dzl = np.where(has_lo, (r_cl - self.zl * ds) / self.sl, 0.0)
        dzu = np.where(has_hi, (r_cu + self.zu * ds) / self.su, 0.0)
        return dx, dz, ds, dzl, dzu, dmu, dnu

    def max_step(self, dx, dz, ds, dzl, dzu) -> float:
        """The largest step in ``[0, 1]`` that keeps every barrier term positive."""
        lo, hi = self.has_lo, self.has_hi
        return min(
            _to_boundary(self.x, dx),
            _to_boundary(self.z, dz),
            _to_boundary(self.sl[lo], ds[lo]),
            _to_boundary(self.su[hi], -ds[hi]),
            _to_boundary(self.zl[lo], dzl[lo]),
            _to_boundary(self.zu[hi], dzu[hi]),
        )


def solve_interior(
    sub: Subproblem,
    comp: Compressed,
    *,
    tol: float = 1e-3,
    feas_tol: float | None = None,
    max_iter: int = MAX_ITER,
) -> Attempt:
    """Solve by the marginal-space interior-point method; ``(x or None, status, steps)``.

    Near a bound the barrier terms overflow in the last steps; every step is checked
    for finiteness (a non-finite step ends the method), so the floating-point warnings
    are silenced here. See :func:`_solve` for the arguments.
    """
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return _solve(sub, comp, tol=tol, feas_tol=feas_tol, max_iter=max_iter)


def _solve(
    sub: Subproblem,
    comp: Compressed,
    *,
    tol: float,
    feas_tol: float | None,
    max_iter: int,
) -> Attempt:
    """The interior-point iteration behind :func:`solve_interior`.

    Args:
        sub, comp: the subproblem and its compressed queries.
        tol: persons: stop when no cell's stationarity residual would move it by more
            than this (the driver passes a thousandth of the noise standard deviation).
        feas_tol: persons: how far an equality or bound row may be missed (default
            ``5e-9 * scale``).
        max_iter: Newton steps before giving up.

    Long because one Newton step keeps the primal, dual and slack blocks, the
    residuals and the predictor-corrector together; split into functions it would pass
    a dozen arrays around. Each block follows the module docstring in order.
    """
    k, c = sub.k, sub.c
    early, feas_tol, qs = measured_queries(sub, comp, feas_tol)
    if early is not None:
        return early
    free_ok = ~fixed_zeros(sub)
    fidx = np.flatnonzero(free_ok.ravel())
    n = fidx.size
    if n == 0:
        return Attempt(np.zeros((k, c)), "converged", 0)
    child, cell = np.divmod(fidx, c)
    cell_qs = {q for q in qs if comp.sizes[q] == c}
    h_diag = 2.0 * float(sum(comp.w[q] for q in cell_qs))
    h = 2.0 * float(sum(comp.w[q] for q in qs))  # the Hessian's diagonal (every cell)
    lin = np.zeros(n)
    for q in cell_qs:
        lin += 2.0 * float(comp.w[q]) * comp.y[q][child, comp.rows[q][cell]]
    b_mat, y_b, e_b = _rows(sub, comp, fidx, cell_qs)
    c_mat, d_eq, r_mat, lo, hi = _constraints(sub, fidx)
    w_b = 1.0 / (2.0 * e_b)  # the weights of B's rows
    has_lo = lo > 0
    has_hi = np.isfinite(hi)
    n_eq, n_bd = c_mat.shape[0], r_mat.shape[0]
    # the Newton systems' answer rows: nested queries folded in families (``_fold``)
    e_off = None
    g_b, e_g = b_mat, e_b
    if FOLD and sub.k > 1 and b_mat.shape[0]:
        g_b, e_fold = _fold(sub, comp, fidx, cell_qs)
        e_g = e_fold.diagonal()
        off = sp.csr_matrix(e_fold - sp.diags(e_g))
        off.eliminate_zeros()
        if off.nnz:
            m_all = g_b.shape[0] + n_eq + n_bd
            e_off = sp.block_diag([off, sp.csr_matrix((m_all - off.shape[0],) * 2)], "csr")
    g_mat = sp.vstack([g_b, c_mat, r_mat], format="csr")
    g_t = sp.csr_matrix(g_mat.T)
    n_b = g_b.shape[0]
    eps = 1e-10 / max(h, 1e-300)
    # families (several children on many rows): S in dense blocks per child (_Blocks)
    blocked = sub.k > 1 and g_mat.shape[0] > DENSE_MAX and BLOCKED
    if blocked:
        owner = _owners(g_mat, child)
        # the coupling block is dense: at most BLOCK_MAX_COUPLING rows (1.2 GB)
        blocked = int((owner < 0).sum()) <= BLOCK_MAX_COUPLING
    if blocked:
        order = np.argsort(owner, kind="stable")
        bounds_ = np.searchsorted(owner[order], np.arange(-1, k + 1))
        rows_of = [order[bounds_[i + 1] : bounds_[i + 2]] for i in range(k)]
        rows_of = [r for r in rows_of if r.size]

    def grad(xv: np.ndarray) -> np.ndarray:
        g = h_diag * xv - lin
        if b_mat.shape[0]:
            g = g + b_mat.T @ (2.0 * w_b * (b_mat @ xv - y_b))
        return g

    def objective(xv: np.ndarray) -> float:
        out = 0.5 * h_diag * float(xv @ xv) - float(lin @ xv)
        if b_mat.shape[0]:
            res = b_mat @ xv - y_b
            out += float(w_b @ (res * res))
        return out

    # -- a strictly interior start: the proportional split, its bound rows inside -------
    x = np.maximum(start_point(sub).ravel()[fidx], 0.0)
    x = np.maximum(x, 1e-2 * max(1.0, float(x.mean())) if x.size else 1.0)
    if sub.parent is not None:  # restore exact column sums after the floor
        col = np.bincount(cell, weights=x, minlength=c)
        x *= (sub.parent / np.where(col > 0, col, 1.0))[cell]
    s = r_mat @ x if n_bd else np.zeros(0)
    lo_f = np.where(has_lo, lo, -np.inf)
    span = np.where(has_lo & has_hi, hi - lo, np.inf)
    margin = np.minimum(1.0, 0.1 * span)
    s = np.clip(s, lo_f + np.where(has_lo, margin, 0), np.where(has_hi, hi - margin, np.inf))
    g0 = grad(x)
    z0 = max(1.0, float(np.abs(g0).mean()))
    z = np.full(n, z0)
    zl = np.where(has_lo, z0, 0.0)
    zu = np.where(has_hi, z0, 0.0)
    mu_eq = np.zeros(n_eq)
    nu = np.zeros(n_bd)
    lam_tol = tol * max(h, 1e-300)
    const = float(comp.const) + sum(
        float(comp.w[q]) * float(np.sum(comp.y[q] ** 2)) for q in cell_qs
    )
    n_comp = n + int(has_lo.sum() + has_hi.sum())
    best, best_gap = None, np.inf

    def _scatter(xv: np.ndarray) -> np.ndarray:
        out = np.zeros(k * c)
        out[fidx] = xv
        return out.reshape(k, c)

    def _give_up(status: str, it: int) -> Attempt:
        if best is not None:
            return Attempt(_scatter(best), f"converged ({status} at the noise tolerance)", it)
        return Attempt(None, status, it)

    for it in range(1, max_iter + 1):
        # -- residuals ------------------------------------------------------------------
        gx = grad(x)
        r_d = gx - z
        if n_eq:
            r_d -= c_mat.T @ mu_eq
        if n_bd:
            r_d -= r_mat.T @ nu
        r_p1 = (c_mat @ x - d_eq) if n_eq else np.zeros(0)
        r_p2 = (r_mat @ x - s) if n_bd else np.zeros(0)
        r_s = nu - zl + zu
        sl = np.where(has_lo, np.maximum(s - lo, 1e-300), 1.0)
        su = np.where(has_hi, np.maximum(hi - s, 1e-300), 1.0)
        gap = float(x @ z) + float((sl * zl)[has_lo].sum() + (su * zu)[has_hi].sum())
        f = objective(x)
        prim = max(float(np.abs(r_p1).max(initial=0.0)), float(np.abs(r_p2).max(initial=0.0)))
        dual = max(float(np.abs(r_d).max(initial=0.0)), float(np.abs(r_s).max(initial=0.0)))
        scale_f = GAP * max(1.0, f + const)
        # the gap bounds the objective's distance to the optimum: a tenth of ``tol``
        # persons per cell at the Hessian's scale (the steps beyond it are where rounding
        # error takes over: on full generated Vermont's Tract families they stalled there)
        gap_ok = gap <= scale_f + GAP_CELL * lam_tol * tol * n
        if prim <= 0.1 * feas_tol and dual <= lam_tol and gap_ok:
            return Attempt(_scatter(x), "converged", it)
        # within ``LOOSE * tol`` persons per cell of the optimum: kept in case the last
        # steps stall in rounding error (the caller rescales columns and validates)
        if (
            prim <= feas_tol
            and dual <= LOOSE * lam_tol
            and gap <= scale_f + LOOSE * lam_tol * tol * n
            and gap < best_gap
        ):
            best, best_gap = x.copy(), gap
        mu = gap / max(n_comp, 1)
        # -- the Schur complement of this step ------------------------------------------
        d = z / x + h_diag
        dinv = 1.0 / d
        sigma = np.where(has_lo, zl / sl, 0.0) + np.where(has_hi, zu / su, 0.0)
        # the equalities may be dependent (every child's total exact, and the column
        # sums): a regularisation relative to each row's diagonal keeps S definite,
        # and iterative refinement against the exact system removes it
        eq_diag = (abs(c_mat) @ dinv) if n_eq else np.zeros(0)
        e = np.concatenate(
            [e_g, np.maximum(EQ_REG * eq_diag, eps), 1.0 / np.maximum(sigma, 1e-300)]
        )
        e_true = e.copy()
        e_true[n_b : n_b + n_eq] = 0.0
        keep = dinv >= DROP * float(dinv.max())
        gk = g_mat[:, keep] if not keep.all() else g_mat
        if blocked:
            try:
                single = gap > SINGLE_GAP * (scale_f + GAP_CELL * lam_tol * tol * n)
                solve = _Blocks(gk, dinv[keep], e, owner, rows_of, single=single, e_off=e_off).solve
            except (RuntimeError, LinAlgError, ValueError):
                blocked = False  # rounding made a block indefinite: the sparse path
        if not blocked:
            s_mat = sp.csr_matrix(gk @ sp.diags(dinv[keep]) @ gk.T) + sp.diags(e)
            if e_off is not None:
                s_mat = s_mat + e_off
        try:
            if not blocked:
                solve = _factor(s_mat)
        except (RuntimeError, LinAlgError):
            try:  # rounding made S indefinite: once more with a larger regularisation
                solve = _factor(s_mat + sp.diags(1e3 * EQ_REG * s_mat.diagonal()))
            except (RuntimeError, LinAlgError) as exc:
                return _give_up(f"singular system ({exc})", it)
        sl_safe = np.where(has_lo, sl, 1.0)
        su_safe = np.where(has_hi, su, 1.0)

        nt = _Newton(
            solve=solve,
            g_mat=g_mat,
            g_t=g_t,
            r_mat=r_mat,
            dinv=dinv,
            e_true=e_true,
            e_off=e_off,
            sigma=sigma,
            has_lo=has_lo,
            has_hi=has_hi,
            sl=sl_safe,
            su=su_safe,
            x=x,
            z=z,
            zl=zl,
            zu=zu,
            r_d=r_d,
            r_s=r_s,
            r_p1=r_p1,
            r_p2=r_p2,
            n_b=n_b,
            n_eq=n_eq,
            accuracy=1e-3 * feas_tol,
        )
        direction, max_step = nt.direction, nt.max_step

        # -- predictor (affine) then corrector ------------------------------------------
        aff = direction(-x * z, -sl * zl * has_lo, -su * zu * has_hi)
        a_aff = max_step(*aff[:5])
        dx_a, dz_a, ds_a, dzl_a, dzu_a = aff[:5]
        gap_aff = float((x + a_aff * dx_a) @ (z + a_aff * dz_a))
        if n_bd:
            gap_aff += float(
                ((sl + a_aff * ds_a) * (zl + a_aff * dzl_a))[has_lo].sum()
                + ((su - a_aff * ds_a) * (zu + a_aff * dzu_a))[has_hi].sum()
            )
        cent = min(1.0, (max(gap_aff, 0.0) / max(gap, 1e-300)) ** 3)
        tgt = cent * mu
        dx, dz, ds, dzl, dzu, dmu, dnu = direction(
            tgt - x * z - dx_a * dz_a,
            (tgt - sl * zl - ds_a * dzl_a) * has_lo,
            (tgt - su * zu + ds_a * dzu_a) * has_hi,
        )
        a = STEP * max_step(dx, dz, ds, dzl, dzu)
        if not np.isfinite(a) or a <= 1e-12:
            return _give_up("stalled", it)
        x = x + a * dx
        z = z + a * dz
        s = s + a * ds
        zl = zl + a * dzl
        zu = zu + a * dzu
        mu_eq = mu_eq + a * dmu
        nu = nu + a * dnu
        if sub.parent is not None:
            # rounding error in the directions drifts the column sums late in the
            # method; rescaling each column to its parent count keeps them exact
            col = np.bincount(cell, weights=x, minlength=c)
            x *= (sub.parent / np.where(col > 0, col, 1.0))[cell]
        if n_bd and RESYNC:
            # likewise the bound rows' slacks: where ``R x`` is strictly inside its
            # bounds, the slack takes its value (the row's residual becomes 0)
            rx = r_mat @ x
            inside = (~has_lo | (rx > lo)) & (~has_hi | (rx < hi))
            s = np.where(inside, rx, s)
        if not (np.isfinite(x).all() and np.isfinite(z).all() and np.isfinite(s).all()):
            return _give_up("non-finite step", it)
    return _give_up("max_iter", max_iter)


class InteriorBackend:
    """The marginal-space interior point (:func:`solve_interior`) as a backend: it stops at
    ``tols.optimality`` persons and aims at half of ``tols.feasibility``."""

    name = "interior"

    def solve(
        self, sub: Subproblem, comp: Compressed, tols: Tolerances, max_iter: int | None
    ) -> Attempt:
        return solve_interior(sub, comp, **tols.marginal_space(max_iter))
