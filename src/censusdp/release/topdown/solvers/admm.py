"""The structure-exploiting least-squares backend: ADMM with one shared factorisation.

Every child has the same Hessian ``H = sum_q w_q B_q'B_q`` (its marginals read the same kept
cells), and the same constraint matrix ``A = [I; M; 1']`` (cells, group sums through the
membership matrix ``M``, total); only the bounds ``l_i <= A x_i <= u_i`` differ. We run the
OSQP iteration (Stellato et al. 2020, "OSQP: an operator splitting solver for quadratic
programs", Algorithm 1, with over-relaxation ``alpha = 1.6`` and the step-size rule of its
sec. 5.2) on

    minimise   sum_i x_i'H x_i - 2 b_i'x_i      (b_i = sum_q w_q B_q' y_qi)
    subject to l_i <= A x_i <= u_i,   sum_i x_i = p,

keeping the column-sum equality inside the linear step, where it costs nothing extra: with
``K = 2H + sigma I + A'RA`` (the same for all children), the step is

    x_i = K^-1 r_i - (1/k) sum_m K^-1 r_m + p / k,

the exact minimiser of ``sum_i (x_i'K x_i / 2 - r_i'x_i)`` under ``sum_i x_i = p``. So one
factorisation of ``K`` serves all children and all iterations (until the step size changes),
and the other step is a clip of ``A x_i`` to ``[l_i, u_i]``. ``A'RA = rho_c I + rho_g M'M +
rho_t 11'`` has the structure of two more marginals, so ``K`` is factored like ``H``: densely
for small ``c``; for ``c > DENSE_MAX`` with few marginal rows (a wide pl94 family: Los
Angeles County's tracts keep about 1,400 cells, their marginals about 600 rows) by
Woodbury's identity, ``K^-1 = D^-1 - D^-1 B' (W^-1 + B D^-1 B')^-1 B D^-1`` with ``D`` the
diagonal (``d`` plus the queries that see every cell alone) and an ``m x m`` dense inverse;
and otherwise (e.g. the 233,856-cell dhc-lite schema) through the sparse quasi-definite
system ``[[d I, B'], [B, -W^-1]]`` with SuperLU, never forming a ``c x c`` matrix.

The answer ``X`` has exact column sums; its bound violations are the primal residual. It is
accepted when both residuals are below tolerance and, after clipping tiny negatives and
rescaling columns, every constraint holds to the feasibility tolerance.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from censusdp.release.topdown.problem import Subproblem, _row_sums
from censusdp.release.topdown.solvers.base import Attempt, Compressed, Tolerances
from censusdp.release.topdown.solvers.common import clean, fixed_zeros, start_point

__all__ = ["AdmmBackend", "child_scale", "repair", "solve_admm"]

DENSE_MAX = 1024
"""Largest number of kept cells for which the linear system is factored as a dense matrix."""
WOODBURY_MAX_ROWS = 1024
"""Above :data:`DENSE_MAX` cells, the linear system is solved by Woodbury's identity when
the marginals (the queries that do not see every cell alone) have at most this many rows
on the kept cells: at 1,428 cells and 596 rows (a 10-million-person county family), one
solve for 2,346 children takes 0.12 CPU s instead of SuperLU's 2.35 (the same answer to
1e-13)."""

_ALPHA = 1.6
_TOL_UNITS = 10.0
"""Residual tolerance = ``_TOL_UNITS * tol * sigma_ref`` persons (gradient units for the dual)."""
_SIGMA = 1e-6
_RHO_ADAPT = 2.0
"""The step size ``rho`` is refactored when the residual balance asks for one more than
this factor away (OSQP's default, 5, left a 100-tract family at a ``rho`` three times too
small: 2,870 iterations; 2: 1,020, the same point)."""
_DUAL_UNITS = 0.1
"""The dual residual's tolerance in residual tolerances (gradient units, the weights
normalised to sum 1). It was 2: a household family (noise 47 persons, tolerance 0.047)
then stopped 0.071 persons from the optimum; at 0.1, 0.044, and the 100-tract family in
740 iterations instead of 1,020 (the step size settles differently)."""
_CELL_RHO = 10.0
"""The cells' bound rows (``x >= 0``, the fixed zeros) take this many times the step size
``rho`` of the group and total rows. The acceptance (:data:`_MOVE_UNITS`) asks that the
zero cells' residuals below 0, added up over a child's hundreds of zero cells, move no
total more than ten tolerances; with one step size for every row the ADMM reached that
only at a residual ten times smaller than asked (a 150-tract family's second pass: 1,470
iterations; 460 at 10, the same point). A diagonal penalty, so one factorisation still
serves every child (OSQP gives its equality rows a larger one the same way)."""
_SUPPORT_ROUNDS = 20
"""Rounds of :func:`repair` on the positive cells before the rounds on every cell."""
_MOVE_UNITS = 10.0
"""A repaired point is accepted when it moves no child's total by more than this many
residual tolerances; otherwise the ADMM goes on to a tolerance ten times smaller."""


class _Factor:
    """Solves ``(d I + sum_t v_t B_t'B_t) x = r`` for many right-hand sides (columns of r).

    ``B_t`` are 0/1 marginal operators given by a row index per cell.
    """

    def __init__(
        self, c: int, diag: float, rows: list[np.ndarray], sizes: list[int], vals: list[float]
    ) -> None:
        self.c = c
        self._sinv: np.ndarray | None = None
        terms = [(r, s, v) for r, s, v in zip(rows, sizes, vals, strict=True) if v > 0 and s > 0]
        if c <= DENSE_MAX:
            h = np.zeros((c, c))
            for r, _, v in terms:
                h += v * (r[:, None] == r[None, :])
            h[np.diag_indices(c)] += diag
            # An explicit inverse: K is well conditioned (K >= d I with d >= rho), and a
            # matrix product is far faster than LAPACK's triangular solves at these sizes.
            cho = la.cho_factor(h, lower=True, check_finite=False)
            self._inv = la.cho_solve(cho, np.eye(c), check_finite=False)
            return
        self._inv = None
        if self._woodbury(diag, terms):
            return
        blocks = [sp.csr_matrix((np.ones(c), (r, np.arange(c))), shape=(s, c)) for r, s, _ in terms]
        b = sp.vstack(blocks, format="csc") if blocks else sp.csc_matrix((0, c))
        winv = np.concatenate([np.full(s, 1.0 / v) for _, s, v in terms] or [np.zeros(0)])
        kkt = sp.bmat([[sp.identity(c) * diag, b.T], [b, -sp.diags(winv)]], format="csc")
        self._lu = spla.splu(kkt, permc_spec="COLAMD")
        self._m = b.shape[0]

    def _woodbury(self, diag: float, terms: list) -> bool:
        """Set up Woodbury's identity (module docstring) when the marginals have at most
        :data:`WOODBURY_MAX_ROWS` rows; a query whose rows each hold one cell is diagonal."""
        c = self.c
        d = np.full(c, float(diag))
        blocks, weights = [], []
        for r, _, v in terms:
            used, local, count = np.unique(r, return_inverse=True, return_counts=True)
            if (count == 1).all():
                d += v
                continue
            blocks.append(sp.csr_matrix((np.ones(c), (local.reshape(-1), np.arange(c)))))
            weights.append(np.full(used.size, v))
        m = sum(b.shape[0] for b in blocks)
        if m > WOODBURY_MAX_ROWS:
            return False
        b = sp.vstack(blocks, format="csr") if blocks else sp.csr_matrix((0, c))
        inner = np.asarray((b @ sp.diags(1.0 / d) @ b.T).todense()).reshape(m, m)
        inner[np.diag_indices(m)] += 1.0 / np.concatenate(weights or [np.zeros(0)])
        cho = la.cho_factor(inner, lower=True, check_finite=False)
        self._sinv = la.cho_solve(cho, np.eye(m), check_finite=False)
        self._d = d[:, None]
        self._b, self._bt = b, sp.csr_matrix(b.T)
        return True

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """``rhs`` is ``(c, n)``; returns ``(c, n)``."""
        if self._inv is not None:
            return self._inv @ rhs
        if self._sinv is not None:
            u = rhs / self._d
            return u - (self._bt @ (self._sinv @ (self._b @ u))) / self._d
        full = np.zeros((self.c + self._m, rhs.shape[1]))
        full[: self.c] = rhs
        return self._lu.solve(full)[: self.c]


def _project_simplex_columns(
    v: np.ndarray, p: np.ndarray, free: np.ndarray | None = None
) -> np.ndarray:
    """Project each column of ``v`` (k, c) onto ``{z >= 0, z[~free] = 0, sum z = p_j}``."""
    k, c = v.shape
    if free is None:
        u = -np.sort(-v, axis=0)
        nfree = np.full(c, k)
    else:
        # fixed entries sort last and are excluded from the active prefix
        fill = float(v.min(initial=0.0)) - 1.0
        u = -np.sort(-np.where(free, v, fill), axis=0)
        nfree = free.sum(axis=0)
    css = np.cumsum(u, axis=0) - p[None, :]
    ind = np.arange(1, k + 1, dtype=np.float64)[:, None]
    cond = (u - css / ind > 0) & (ind <= nfree[None, :])
    cond[0] |= nfree > 0  # the largest free entry is always in the support
    # the last index where cond holds (cond is true for a prefix)
    rho_idx = k - 1 - np.argmax(cond[::-1], axis=0)
    theta = css[rho_idx, np.arange(c)] / (rho_idx + 1.0)
    out = np.maximum(v - theta[None, :], 0.0)
    if free is not None:
        out[~free] = 0.0
    return out


class _LaminarProjector:
    """Euclidean projection of each row onto ``{x[~free] = 0, group and total bounds}``.

    Within a child, the projection moves every free cell of group ``g`` by the same amount
    ``mu_g``; with the group sums ``s_g = s0_g + n_g mu_g`` clipped to ``[L_g, U_g]`` and
    ``mu_g = lam`` for the unclipped groups, the total

        T(lam) = sum_g clip(s0_g + n_g lam, L_g, U_g)

    is non-decreasing and piecewise linear in the one multiplier ``lam`` of the total
    bounds: ``sum_g L_g`` below every breakpoint, its slope rising by ``n_g`` where group
    ``g`` leaves its lower bound (``lam = (L_g - s0_g) / n_g``) and falling by ``n_g``
    where it reaches a finite upper bound. The breakpoints are sorted once a row and ``T``
    is found at all of them by a cumulative sum of slope times step: ``O(G log G)`` time
    and ``O(G)`` memory a child. (Evaluating ``T`` at each of the ``2G + 1`` breakpoints
    from scratch cost ``O(G^2)``: a block group held to a P.L. 94 release's 2,016 exact
    ``pl94`` groups ran its ADMM for more than 6 CPU minutes.) ``lam`` is then exact by
    linear interpolation between the two breakpoints around the target total.
    """

    def __init__(self, sub: Subproblem, free: np.ndarray) -> None:
        self.groups, self.n_groups = sub.groups, sub.G
        self.free = free
        # (k, G) free cells per group; group sums by bincount, never a dense (c x G)
        # membership matrix (2,016 groups of a run held to a P.L. 94 release's pl94 cross)
        self.n = _row_sums(free.astype(np.float64), sub.groups, sub.G)
        self.has = self.n > 0
        self.lo = np.where(self.has, sub.group_lower, 0.0)
        self.hi = np.where(self.has, sub.group_upper, 0.0)
        self.capped = self.has & np.isfinite(self.hi)
        self.tlo = sub.total_lower
        self.thi = sub.total_upper
        self.nsafe = np.where(self.has, self.n, 1.0)
        # the slope's changes at the breakpoints (lower bounds, upper bounds, then 0),
        # in the order the breakpoints are concatenated in __call__
        self.rise = np.concatenate(
            [
                np.where(self.has, self.n, 0.0),
                np.where(self.capped, -self.n, 0.0),
                np.zeros((sub.k, 1)),
            ],
            axis=1,
        )
        self.floor = self.lo.sum(axis=1)  # T below every breakpoint
        self.trivial = (
            not np.isfinite(self.hi[self.has]).any()
            and not (self.lo > 0).any()
            and not np.isfinite(self.thi).any()
            and not (self.tlo > 0).any()
        )

    def _sums(self, s0: np.ndarray, lam: np.ndarray) -> np.ndarray:
        """The clipped group sums ``(k, G)`` at one multiplier a child (``lam``: ``(k,)``)."""
        s = np.clip(s0 + self.n * lam[:, None], self.lo, self.hi)
        return np.where(self.has, s, 0.0)

    def __call__(self, v: np.ndarray) -> np.ndarray:
        v = np.where(self.free, v, 0.0)
        if self.trivial:
            return v
        k = v.shape[0]
        s0 = _row_sums(v, self.groups, self.n_groups)
        bl = np.where(self.has, (self.lo - s0) / self.nsafe, 0.0)
        bu = np.where(self.capped, (self.hi - s0) / self.nsafe, 0.0)
        # stable: at a tie a lower bound's rise comes before an upper bound's fall (an
        # exact group's two breakpoints coincide), so the running slope is never negative
        points = np.concatenate([bl, bu, np.zeros((k, 1))], axis=1)
        order = np.argsort(points, axis=1, kind="stable")
        cand = np.take_along_axis(points, order, axis=1)  # (k, m) sorted breakpoints
        slope = np.cumsum(np.take_along_axis(self.rise, order, axis=1), axis=1)
        tv = np.empty_like(cand)  # (k, m): T at each breakpoint, non-decreasing
        tv[:, 0] = self.floor
        np.cumsum(slope[:, :-1] * np.diff(cand, axis=1), axis=1, out=tv[:, 1:])
        tv[:, 1:] += self.floor[:, None]
        t_at0 = self._sums(s0, np.zeros(k)).sum(axis=1)
        target = np.clip(t_at0, self.tlo, self.thi)
        m = cand.shape[1]
        idx = (tv < target[:, None]).sum(axis=1)  # first candidate with T >= target
        rows = np.arange(k)
        lam = np.zeros(k)
        # below the first candidate every group sits at its lower bound: T is constant
        low = idx == 0
        lam[low] = cand[low, 0]
        high = idx == m
        if high.any():
            # past the last breakpoint only the groups without an upper bound still rise
            rest = slope[high, -1]
            gap = target[high] - tv[high, -1]
            extra = np.where(rest > 0, gap / np.where(rest > 0, rest, 1.0), 0.0)
            lam[high] = cand[high, -1] + extra
        mid = ~low & ~high
        if mid.any():
            b = idx[mid]
            a = b - 1
            la_, lb_ = cand[rows[mid], a], cand[rows[mid], b]
            ta, tb = tv[rows[mid], a], tv[rows[mid], b]
            dt = tb - ta
            frac = np.where(dt > 0, (target[mid] - ta) / np.where(dt > 0, dt, 1.0), 1.0)
            lam[mid] = la_ + frac * (lb_ - la_)
        inside = (t_at0 >= self.tlo) & (t_at0 <= self.thi)
        lam[inside] = 0.0
        shift = (self._sums(s0, lam) - s0) / self.nsafe
        return v + np.where(self.free, shift[:, self.groups], 0.0)


def repair(sub: Subproblem, x: np.ndarray, tol: float, rounds: int = 500) -> np.ndarray:
    """Alternating exact projections onto ``C2`` (group/total bounds) and ``C1`` (non-negative
    with exact column sums) until ``C2`` holds to ``tol``.

    Starting from a point that is already within the ADMM residual of both sets, this
    converges linearly (both sets are polyhedra) to a point of their intersection that
    moves ``x`` by about that residual, so the objective changes negligibly. (The chain
    runner repairs any backend's point below a root this way when it misses its bounds
    by floating-point error, at most
    :data:`~censusdp.release.topdown.solvers.least_squares.ROUNDING_MISS` tolerances.) First
    (:data:`_SUPPORT_ROUNDS` rounds) both projections move only the positive cells: the
    ADMM leaves its zero cells a residual below 0, and a projection that lifted them back
    into every child's total shifted hundreds of cells a child at once, undone by the
    next column projection (a 100-tract family still 0.06 persons off its totals after
    500 rounds); on the positive cells the two sets meet almost as two affine spaces.
    """
    free = ~fixed_zeros(sub)
    parent = None if sub.parent is None else sub.parent.astype(np.float64)
    x = np.where(free, x, 0.0)
    if parent is not None:
        x = _project_simplex_columns(x, parent, free)
    for _ in range(_SUPPORT_ROUNDS):
        if sub.max_violation(x) <= tol:
            return x
        support = free & (x > 0)
        x = _LaminarProjector(sub, support)(x)
        x = np.maximum(x, 0.0) if parent is None else _project_simplex_columns(x, parent, support)
    proj2 = _LaminarProjector(sub, free)
    for _ in range(rounds):
        if sub.max_violation(x) <= tol:
            break
        x = proj2(x)
        if parent is None:
            x = np.maximum(x, 0.0)
        else:
            x = _project_simplex_columns(x, parent, free)
    return x


def solve_admm(
    sub: Subproblem,
    comp: Compressed,
    *,
    tol: float = 1e-9,
    feas_tol: float = 1e-8,
    max_iter: int = 20000,
    check_every: int = 10,
    abs_tol: float | None = None,
) -> Attempt:
    """Run ADMM; returns ``(x or None, status, iterations)``.

    Long because the iteration is one loop whose state (primal, dual and auxiliary
    blocks, the factorisation, the adaptive penalty) is shared by every step; split
    into functions it would pass a dozen arrays around on the hottest path.

    Args:
        sub: the subproblem.
        comp: its compressed queries.
        tol: relative tolerance on the primal and dual residuals.
        feas_tol: absolute tolerance (persons) on the answer's constraint violation.
        max_iter: iteration cap.
        check_every: iterations between convergence checks.
        abs_tol: if given, the residual tolerance in persons (e.g. a fraction of the
            noise standard deviation), replacing ``tol``.
    """
    scale = child_scale(comp)
    if scale is None:
        # one factorisation serves every child only when their Hessians are multiples
        return Attempt(None, "children with their own weights per query (per-geounit budgets)", 0)
    k, c, n_groups = sub.k, sub.c, sub.G
    if c == 0:
        return Attempt(np.zeros((k, 0)), "converged", 0)
    wsum = float(comp.w.sum())
    if wsum <= 0:
        return Attempt(None, "no_weight", 0)
    # Residuals are measured in units of the most precise measurement's noise (persons):
    # relative-to-count tolerances would be far too loose at the root (counts ~ 1e8).
    sigma_ref = max(1.0, 1.0 / np.sqrt(float(comp.w.max())))
    eps_p = _TOL_UNITS * tol * sigma_ref if abs_tol is None else float(abs_tol)
    eps_0 = eps_p
    groups = sub.groups
    # gradient data, normalised so that diag(H) = 1
    w = comp.w / wsum
    b = np.zeros((k, c))
    for q in range(len(comp.sizes)):
        if w[q] > 0 and comp.sizes[q] > 0:
            b += w[q] * comp.y[q][:, comp.rows[q]]
    root = sub.parent is None
    hess = _hessian(comp, w, c)

    # Work with the deviation d = x - x0 from the proportional start (exact column sums):
    # with counts near 1e8 the iterates then stay of the size of the noise.
    x0 = start_point(sub)
    b = b - hess(x0)
    g0 = _row_sums(x0, groups, n_groups)
    t0 = x0.sum(axis=1)
    p = None if root else sub.parent.astype(np.float64) - x0.sum(axis=0)

    # constraint rows per child: c cells, G groups, 1 total (bounds on the deviation)
    lo_c, hi_c = -x0, np.where(fixed_zeros(sub), -x0, np.inf)
    lo_g, hi_g = sub.group_lower - g0, sub.group_upper - g0
    lo_t, hi_t = sub.total_lower - t0, sub.total_upper - t0
    exact_t = bool(np.all(sub.total_lower == sub.total_upper))

    def a_times(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        gs = _row_sums(x, groups, n_groups)
        return x, gs, gs.sum(axis=1)

    rho = 0.1
    rho_t_mult = 1e3 if exact_t else 1.0

    def factor(rho: float) -> _Factor:
        # K = 2H + sigma I + rho_c I + rho M'M + rho_t 11'
        rows = [*comp.rows, groups, np.zeros(c, dtype=np.int64)]
        sizes = [*comp.sizes, n_groups, 1]
        vals = [*(2.0 * w), rho, rho * rho_t_mult]
        return _Factor(c, _SIGMA + _CELL_RHO * rho, rows, sizes, vals)

    fac = factor(rho)
    # how the column-sum correction is shared: 1/k each, or inversely to the children's
    # weights (child i's Hessian u_i K: see child_scale)
    share = np.full((k, 1), 1.0 / k) if not np.any(scale != 1.0) else (1.0 / scale)[:, None]
    share = share / share.sum()
    x = np.zeros((k, c))
    zc, zg, zt = a_times(x)
    zc = np.clip(zc, lo_c, hi_c)
    zg = np.clip(zg, lo_g, hi_g)
    zt = np.clip(zt, lo_t, hi_t)
    yc, yg, yt = np.zeros((k, c)), np.zeros((k, n_groups)), np.zeros(k)
    status = "max_iter"
    it = 0
    for it in range(1, max_iter + 1):
        rt = rho * rho_t_mult
        rc = rho * _CELL_RHO
        # r_i = sigma x + 2 b - A'(y - R z)
        r = _SIGMA * x + 2.0 * b + (rc * zc - yc)
        r += (rho * zg - yg)[:, groups]
        r += (rt * zt - yt)[:, None]
        sol = fac.solve(r.T).T
        if root:
            xt = sol
        else:
            xt = sol + share * (p - sol.sum(axis=0))[None, :]
        ac, ag, at = a_times(xt)
        x = _ALPHA * xt + (1 - _ALPHA) * x
        vc = _ALPHA * ac + (1 - _ALPHA) * zc
        vg = _ALPHA * ag + (1 - _ALPHA) * zg
        vt = _ALPHA * at + (1 - _ALPHA) * zt
        zc_new = np.clip(vc + yc / rc, lo_c, hi_c)
        zg_new = np.clip(vg + yg / rho, lo_g, hi_g)
        zt_new = np.clip(vt + yt / rt, lo_t, hi_t)
        yc += rc * (vc - zc_new)
        yg += rho * (vg - zg_new)
        yt += rt * (vt - zt_new)
        zc, zg, zt = zc_new, zg_new, zt_new
        if it % check_every:
            continue
        ac, ag, at = a_times(x)
        r_prim = max(np.abs(ac - zc).max(), np.abs(ag - zg).max(initial=0.0), np.abs(at - zt).max())
        # dual residual: gradient of the Lagrangian, minus the best column-sum multiplier
        hx = hess(x)
        g = (2.0 * (hx - b) + yc + yg[:, groups] + yt[:, None]) * scale[:, None]
        if not root:
            g = g - g.mean(axis=0)[None, :]
        r_dual = np.abs(g).max()
        if r_prim <= eps_p and r_dual <= _DUAL_UNITS * eps_p:
            xc = repair(sub, clean(sub, x0 + x, feas_tol), 0.01 * feas_tol)
            # the zero cells' residuals add up in a child's total (hundreds of cells a
            # child): a repair that moves a total further than the tolerance allows
            # means the point is not yet as accurate as asked
            moved = float(np.abs(xc.sum(axis=1) - (x0 + x).sum(axis=1)).max(initial=0.0))
            if sub.max_violation(xc) <= feas_tol and moved <= _MOVE_UNITS * eps_0:
                return Attempt(xc, "converged", it)
            eps_p *= 0.1  # not repairable yet: ask for a more accurate point
        if it % (5 * check_every) == 0:
            pn = r_prim / max(np.abs(x).max(), np.abs(zc).max(), 1e-12)
            dn = r_dual / max(np.abs(2.0 * hx).max(), np.abs(yc).max(), np.abs(2 * b).max(), 1e-12)
            if pn > 0 and dn > 0:
                new_rho = float(np.clip(rho * np.sqrt(pn / dn), 1e-6, 1e6))
                if new_rho > _RHO_ADAPT * rho or new_rho < rho / _RHO_ADAPT:
                    rho = new_rho
                    fac = factor(rho)
    return Attempt(None, status, it)


def child_scale(comp: Compressed) -> np.ndarray | None:
    """``(k,)`` multipliers ``u_i`` with child ``i``'s weights ``u_i w_q`` for every query,
    or ``None`` when some child's multipliers differ between queries (or one is 0).

    A spine release's per-geounit budgets give this form: a geounit that took its only
    child's share has every query's variance divided by the same factor. The ADMM then
    runs child ``i`` with the penalties ``u_i rho`` (a diagonal penalty is still ADMM),
    so its linear system is ``u_i K`` and one factorisation still serves every child:
    with the duals scaled by ``1 / u_i`` the only change to the iteration is that the
    column-sum correction ``p - sum_m K^-1 r_m`` is shared in proportion to ``1 / u_i``
    instead of equally.
    """
    k = comp.y[0].shape[0] if comp.y else 0
    if comp.cw is None:
        return np.ones(k)
    live = comp.w > 0
    if not live.any():
        return np.ones(k)
    cw = comp.cw[live]
    u = cw[0]
    if np.any(u <= 0) or not np.allclose(cw, u[None, :], rtol=1e-12, atol=0.0):
        return None
    return u.astype(np.float64)


def _hessian(comp: Compressed, w: np.ndarray, c: int):
    """A function computing ``H x_i`` for every child (rows of ``x``), ``H = sum_q w_q B_q'B_q``."""
    if c <= DENSE_MAX:
        h = np.zeros((c, c))
        for q in range(len(comp.sizes)):
            if w[q] > 0 and comp.sizes[q] > 0:
                r = comp.rows[q]
                h += w[q] * (r[:, None] == r[None, :])
        return lambda x: x @ h
    blocks, weights = [], []
    for q in range(len(comp.sizes)):
        if w[q] > 0 and comp.sizes[q] > 0:
            blocks.append(comp.matrix(q, c))
            weights.append(np.full(comp.sizes[q], w[q]))
    if not blocks:
        return lambda x: np.zeros_like(x)
    b = sp.vstack(blocks, format="csr")
    bt = sp.csr_matrix(b.T)
    wv = np.concatenate(weights)
    return lambda x: np.asarray(bt @ (wv[:, None] * (b @ x.T))).T


class AdmmBackend:
    """The ADMM (:func:`solve_admm`) as a backend: its residuals stop at ``tols.optimality``
    persons when the subproblem has a noise scale, else at ``tols.relative``; it aims at
    ``tols.feasibility``."""

    name = "admm"

    def solve(
        self, sub: Subproblem, comp: Compressed, tols: Tolerances, max_iter: int | None
    ) -> Attempt:
        cap: dict = {} if max_iter is None else {"max_iter": max_iter}
        if sub.noise_scale is not None:
            cap["abs_tol"] = tols.optimality
        return solve_admm(sub, comp, tol=tols.relative, feas_tol=tols.feasibility, **cap)
