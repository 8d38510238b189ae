"""The first least-squares backend: a primal-dual active-set method on the support (internal).

At the solution of a TopDown subproblem almost every cell is zero: a dhc-lite root has
229,320 free cells and about a thousand positive ones; a block family of 538 blocks on
215 kept cells has 115,670 variables and about a thousand positive ones (2 per block).
An interior-point method pays for every variable in every iteration. This method pays
only for the cells it lets be positive, the *free set* ``I``; every other cell is held
at 0 (the *active set* ``A``).

Given ``I``, the cells of ``I`` minimise the objective subject to the equalities that
are active (the parent's column sums; group and total bounds that bind), by one sparse
solve of the quasi-definite system on the marginal answers (Van Riper et al. (2020)
sec. 2.2's least squares, written in its answer space)::

    [ delta I    B'         C'        ] [x_I]   [ delta x_prev          ]
    [ B         -(2W)^-1    0         ] [ u ] = [ y                     ]
    [ C          0         -eps I     ] [ nu]   [ d - eps nu_prev       ]

``B`` stacks the marginal operators restricted to ``I`` (one row per answer that a free
cell touches, never a children x cells matrix), ``u = 2W(Bx - y)`` are the weighted
residuals and ``nu`` the multipliers of the active equalities. ``delta`` and ``eps`` keep
the system non-singular when the Hessian is (below the State no query sees every cell
alone, so many cell-level solutions share one set of marginals); the right-hand sides
make the solve a proximal step, and repeating it with the same factorisation removes
their bias. The system's size is the free cells plus the answers they touch plus the
active constraints.

The gradient of every cell, free or not, is one pass over the answers, and gives the
multiplier of each held cell, ``lambda = grad f + C' nu``. The active set is then updated
as in the primal-dual active-set method (Hintermueller, Ito & Kunisch 2003, "The
primal-dual active set strategy as a semismooth Newton method", SIAM J. Optim. 13(3)):
a free cell that came out negative is held at 0, a held cell whose multiplier is
negative is freed; group and total bounds enter and leave the same way. The method
stops when every free cell is non-negative, every held cell's multiplier would move it
by less than ``tol`` persons, and every bound holds. A revisited active set (a cycle,
possible when the Hessian is not an M-matrix) halves how many held cells may be freed
per step; the iteration cap then hands the subproblem to the next backend of the chain.

The first free set comes from the measurements alone: cell ``j`` of child ``i`` is
free when every measured answer containing it is above one noise standard deviation,
plus, in each column, the child whose answers are largest (so every column sum can be
met).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla
from scipy.linalg import LinAlgError, cho_factor, cho_solve

from censusdp.release.topdown.problem import Subproblem, _row_sums
from censusdp.release.topdown.solvers.base import Attempt, Compressed, Tolerances
from censusdp.release.topdown.solvers.common import fixed_zeros, measured_queries

__all__ = ["ActiveSetBackend", "solve_active_set"]

MAX_ITER = 30
"""Active-set updates before the method gives up (the chain then runs the next backend)."""
REFINE = 3
REFINE_MAX = 40
"""More re-solves (cheap: one factorisation) until the active equalities hold."""
"""Proximal re-solves with one factorisation per active set (removes delta/eps bias)."""
DENSE_MAX = 400
"""Reduced systems with at most this many rows are factored densely (Cholesky)."""
DENSE_FILL = 0.2
"""Reduced systems filled more than this are factored densely too."""
BORDER_MAX = 32
"""Larger reduced systems with at most this many active equalities factor the answers'
block alone and the equalities' dense Schur complement (:meth:`_System._factor_bordered`)."""
STALL = 3
"""Updates without fewer violated conditions before the changes per update are halved."""
GROW = 200
"""Besides doubling, how many held cells one update may free."""
SCREEN = 1.0
"""A cell starts free when all its answers are above this many noise standard deviations."""


class _Bounds:
    """The group and total bounds of every child as one list of rows (laminar sums).

    Row ``r`` sums the cells of child ``child[r]`` whose group is ``group[r]`` (``-1``: all
    cells, the total) and must lie in ``[lo[r], hi[r]]``.
    """

    def __init__(self, sub: Subproblem) -> None:
        n_groups = sub.G
        present = np.bincount(sub.groups, minlength=n_groups) > 0
        lo = sub.group_lower.copy()
        hi = sub.group_upper.copy()
        # groups without a kept cell sum to 0 (the failsafe has made that feasible); a
        # group with upper bound 0 is handled by fixing its cells at 0
        open_ = present[None, :] & (hi > 0)
        keep = open_ & ((lo > 0) | np.isfinite(hi))
        t_lo = sub.total_lower.copy()
        t_hi = sub.total_upper.copy()
        # a child with one open group: that group's row is its total; merge the two, or
        # the system would hold two copies of one sum with different targets
        single = open_.sum(axis=1) == 1
        for i in np.flatnonzero(single):
            g = int(np.flatnonzero(open_[i])[0])
            t_lo[i] = max(t_lo[i], lo[i, g])
            t_hi[i] = min(t_hi[i], hi[i, g])
            keep[i, g] = False
        ci, gi = np.nonzero(keep)
        tk = (t_lo > 0) | np.isfinite(t_hi)
        self.child = np.concatenate([ci, np.flatnonzero(tk)])
        self.group = np.concatenate([gi, np.full(int(tk.sum()), -1)])
        self.lo = np.concatenate([lo[ci, gi], t_lo[tk]])
        self.hi = np.concatenate([hi[ci, gi], t_hi[tk]])
        self.n = self.child.size
        # state: 0 inactive, +1 at the upper bound, -1 at the lower bound, 2 equality
        self.state = np.where(self.lo == self.hi, 2, 0).astype(np.int64)
        self.target = np.where(self.state == 2, self.lo, 0.0)

    def sums(self, sub: Subproblem, x: np.ndarray) -> np.ndarray:
        gs = sub.group_sums(x)
        ts = x.sum(axis=1)
        return np.where(self.group >= 0, gs[self.child, np.maximum(self.group, 0)], ts[self.child])

    def members(self, sub: Subproblem, r: int) -> np.ndarray:
        """Flat ``(i, j)`` indices of the cells of row ``r``."""
        cells = (
            np.arange(sub.c) if self.group[r] < 0 else np.flatnonzero(sub.groups == self.group[r])
        )
        return self.child[r] * sub.c + cells


def _initial_free(sub: Subproblem, comp: Compressed, free_ok: np.ndarray, sigma: np.ndarray):
    """Cells whose every answer is above ``SCREEN`` standard deviations, and per column the
    child with the largest answers; ``(k, c)`` bool."""
    k, c = sub.k, sub.c
    score = np.full((k, c), np.inf)
    for q in range(len(comp.sizes)):
        if comp.w[q] <= 0 or comp.sizes[q] == 0:
            continue
        score = np.minimum(score, comp.y[q][:, comp.rows[q]] / sigma[q])
    score = np.where(free_ok, score, -np.inf)
    free = free_ok & (score > SCREEN)
    if sub.parent is not None:
        best = np.argmax(score, axis=0)
        free[best, np.arange(c)] |= free_ok[best, np.arange(c)]
    return free, score


class _System:
    """The system of one free set, reduced to the answers and the equalities, factored once.

    With ``Delta = delta + 2 sum_{cell queries} w_q`` (a scalar: a query that sees every
    kept cell alone adds the same diagonal to every cell, so it stays out of ``B``) and
    ``G = [B; C]``, ``E = diag((2W)^-1, eps I)``, the system
    ``[[Delta I, G'], [G, -E]] [x; z] = [r1; r2]`` is solved by the symmetric positive
    definite Schur complement ``S = E + G G' / Delta`` (Woodbury): ``S z = G r1 / Delta - r2``,
    then ``x = (r1 - G' z) / Delta``. ``S`` has one row per touched answer and per active
    equality, never one per cell: at a dhc-lite root it is 622 x 622 whatever the free set.
    """

    def __init__(self, sub, comp, fidx, eq_rows, delta, eps, cell_qs):
        c = sub.c
        n = fidx.size
        child, cell = np.divmod(fidx, c)
        blocks_r, y_parts, d_parts = [], [], []
        n_ans = 0
        # children with their own weights (a spine release's per-geounit budgets): the
        # diagonal is one value per free cell, Woodbury on a diagonal matrix
        cw = comp.cw
        self.diag = delta if cw is None else np.full(n, float(delta))
        self.lin = np.zeros(n)
        for q in range(len(comp.sizes)):
            w = float(comp.w[q])
            if w <= 0 or comp.sizes[q] == 0:
                continue
            wc = w if cw is None else w * cw[q][child]
            if q in cell_qs:
                self.diag += 2.0 * wc
                self.lin += 2.0 * wc * comp.y[q][child, comp.rows[q][cell]]
                continue
            key = child * comp.sizes[q] + comp.rows[q][cell]
            present, local = np.unique(key, return_inverse=True)
            blocks_r.append(n_ans + local)
            y_parts.append(comp.y[q].ravel()[present])
            if cw is None:
                d_parts.append(np.full(present.size, 1.0 / (2.0 * w)))
            else:
                d_parts.append(1.0 / (2.0 * w * cw[q][present // comp.sizes[q]]))
            n_ans += present.size
        self.n, self.n_ans = n, n_ans
        self.n_eq = len(eq_rows)
        lens = [len(cols) for _, cols, _ in eq_rows]
        crow = n_ans + (
            np.repeat(np.arange(self.n_eq), lens) if lens else np.zeros(0, dtype=np.int64)
        )
        ccol = (
            np.concatenate([cols for _, cols, _ in eq_rows])
            if lens
            else np.zeros(0, dtype=np.int64)
        )
        br = np.concatenate(blocks_r + [crow])
        bc = np.concatenate([np.tile(np.arange(n), len(blocks_r)), ccol]).astype(np.int64)
        m = n_ans + self.n_eq
        self.g = sp.csr_matrix((np.ones(br.size), (br, bc)), shape=(m, n))
        self.d = np.array([v for _, _, v in eq_rows], dtype=np.float64)
        self.y = np.concatenate(y_parts) if y_parts else np.zeros(0)
        self.delta, self.eps = delta, eps / float(np.max(self.diag, initial=0.0) or 1.0)
        e = np.concatenate([*d_parts, np.full(self.n_eq, self.eps)]) if m else np.zeros(0)
        if np.ndim(self.diag):
            s_mat = self.g @ sp.diags(1.0 / self.diag) @ self.g.T + sp.diags(e)
        else:
            s_mat = (self.g @ self.g.T) / self.diag + sp.diags(e)
        self.dense = m <= DENSE_MAX or s_mat.nnz > DENSE_FILL * m * m
        self.border: tuple[np.ndarray, np.ndarray, sp.csr_matrix] | None = None
        if self.dense:
            self.factor = cho_factor(s_mat.toarray(), lower=True, check_finite=False)
        elif 0 < self.n_eq <= BORDER_MAX:
            self._factor_bordered(sp.csr_matrix(s_mat))
        else:
            self.factor = spla.splu(sp.csc_matrix(s_mat), permc_spec="MMD_AT_PLUS_A")

    def _factor_bordered(self, s_mat: sp.csr_matrix) -> None:
        """Factor ``S`` by its answer block ``A`` alone (sparse) and the dense Schur
        complement of a few equalities, ``K = C - B' A^-1 B`` with ``S = [[A, B], [B', C]]``:
        an equality that touches a whole group of cells (the DHC households' tenure, each
        a third of the cells) is a dense row and column of ``S``, which a sparse LU fills
        in; ``K`` is ``n_eq x n_eq`` and positive definite as ``S`` is."""
        a = self.n_ans
        self.factor = spla.splu(sp.csc_matrix(s_mat[:a, :a]), permc_spec="MMD_AT_PLUS_A")
        b = sp.csr_matrix(s_mat[:a, a:])
        a_inv_b = self.factor.solve(np.asarray(b.todense()))
        k = np.asarray(s_mat[a:, a:].todense()) - np.asarray(b.T @ a_inv_b)
        self.border = (a_inv_b.reshape(a, self.n_eq), cho_factor(k, lower=True), b)

    def _solve_s(self, rhs: np.ndarray) -> np.ndarray:
        """``S^-1 rhs`` with the factors of :meth:`__init__`."""
        if self.dense:
            return cho_solve(self.factor, rhs, check_finite=False)
        if self.border is None:
            return self.factor.solve(rhs)
        a_inv_b, k, b = self.border
        a = self.n_ans
        z_a = self.factor.solve(rhs[:a])
        z_e = cho_solve(k, rhs[a:] - b.T @ z_a)
        return np.concatenate([z_a - a_inv_b @ z_e, z_e])

    def residual(self, x: np.ndarray) -> float:
        """Largest miss of the active equalities ``C x = d``."""
        if not self.n_eq:
            return 0.0
        return float(np.abs(self.g[self.n_ans :] @ x - self.d).max())

    def solve(self, x_prev: np.ndarray, nu_prev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r1 = self.delta * x_prev + self.lin
        r2 = np.concatenate([self.y, self.d - self.eps * nu_prev])
        rhs = (self.g @ (r1 / self.diag) if np.ndim(self.diag) else self.g @ r1 / self.diag) - r2
        z = self._solve_s(rhs)
        x = (r1 - self.g.T @ z) / self.diag
        return x, z[self.n_ans :]


def solve_active_set(
    sub: Subproblem,
    comp: Compressed,
    *,
    tol: float = 1e-3,
    feas_tol: float | None = None,
    max_iter: int = MAX_ITER,
) -> Attempt:
    """Solve by the primal-dual active-set method; returns ``(x or None, status, updates)``.

    Args:
        sub, comp: the subproblem and its compressed queries.
        tol: persons: a held cell whose multiplier would move it by less than this is
            optimal (the driver passes a thousandth of the noise standard deviation).
        feas_tol: persons: how far a bound or column sum may be missed (default
            ``5e-9 * scale``, half of what :func:`~censusdp.release.topdown.solvers.least_squares.solve_l2`
            accepts).
        max_iter: active-set updates before giving up.

    Long because the update loop keeps the free set, the bound states, the multipliers
    and the cycle guard together; each block is commented in the order of the module
    docstring.
    """
    if comp.cw is not None and not (comp.cw > 0).all():
        return Attempt(None, "a child without measurements (weight 0)", 0)
    k, c = sub.k, sub.c
    early, feas_tol, qs = measured_queries(sub, comp, feas_tol)
    if early is not None:
        return early
    free_ok = ~fixed_zeros(sub)
    wmax = float(max(comp.w[q] for q in qs))
    s0 = sub.noise_scale if sub.noise_scale is not None else 1.0 / np.sqrt(wmax)
    sigma = np.array(
        [
            s0 * np.sqrt(wmax / comp.w[q]) if comp.w[q] > 0 else np.inf
            for q in range(len(comp.sizes))
        ]
    )
    # the Hessian's diagonal (every cell; its largest with per-child weights)
    h = 2.0 * float(sum(float(np.max(comp.child_w(q))) for q in qs))
    lam_tol = tol * h
    delta = 1e-5 * h
    eps = 1e-6  # relative to 1 / Delta, the scale of C C' / Delta in the reduced system
    bounds = _Bounds(sub)
    # queries that see every kept cell alone (detailed): a scalar on the diagonal
    cell_qs = {q for q in qs if comp.sizes[q] == c}
    free, score = _initial_free(sub, comp, free_ok, sigma)
    x = np.zeros((k, c))
    nu_bound = np.zeros(bounds.n)
    seen: set[bytes] = set()
    limit, best, stall = k * c, k * c + 2 * bounds.n + 1, 0
    p = None if sub.parent is None else sub.parent.astype(np.float64)
    for it in range(1, max_iter + 1):
        # -- every active equality needs a free cell ------------------------------------
        if p is not None:
            empty = ~free.any(axis=0)
            if empty.any():
                cols = np.flatnonzero(empty)
                top = np.argmax(score[:, cols], axis=0)  # not ``best``: the stall counter's
                free[top, cols] = True
        for r in np.flatnonzero(bounds.state != 0):
            target = bounds.hi[r] if bounds.state[r] == 1 else bounds.lo[r]
            mem = bounds.members(sub, r)
            if target > 0 and not free.ravel()[mem].any():
                fr = free.ravel()
                fr[mem] = free_ok.ravel()[mem]
                free = fr.reshape(k, c)
        if p is not None:
            # with the column sums, the totals of all k children are dependent: their
            # targets must add up to the parent. When every child's total is active,
            # one that is not exact is released (otherwise the equalities contradict)
            tot = bounds.group < 0
            if np.unique(bounds.child[tot & (bounds.state != 0)]).size == k:
                loose = np.flatnonzero(tot & (np.abs(bounds.state) == 1))
                if loose.size:
                    bounds.state[loose[-1]] = 0
        fidx = np.flatnonzero(free.ravel())
        pos = np.full(k * c, -1, dtype=np.int64)
        pos[fidx] = np.arange(fidx.size)
        # -- the equality rows: column sums, then active bounds -------------------------
        eq_rows = []
        child_f, cell_f = np.divmod(fidx, c)
        if p is not None:
            order = np.argsort(cell_f, kind="stable")
            splits = np.searchsorted(cell_f[order], np.arange(1, c))
            for j, cols in enumerate(np.split(order, splits)):
                eq_rows.append((j, cols, p[j]))
        active = np.flatnonzero(bounds.state != 0)
        for r in active:
            target = bounds.hi[r] if bounds.state[r] in (1, 2) else bounds.lo[r]
            mem = pos[bounds.members(sub, r)]
            eq_rows.append((len(eq_rows), mem[mem >= 0], target))
        if any(len(cols) == 0 and v != 0 for _, cols, v in eq_rows):
            return Attempt(None, "no free cell for an active equality", it)
        try:
            system = _System(sub, comp, fidx, eq_rows, delta, eps, cell_qs)
        except (RuntimeError, LinAlgError) as exc:  # singular factor
            return Attempt(None, f"singular system ({exc})", it)
        xf = x.ravel()[fidx]
        nu = np.zeros(len(eq_rows))
        for n_solve in range(REFINE_MAX):
            xf, nu = system.solve(xf, nu)
            if n_solve + 1 >= REFINE and system.residual(xf) <= 0.1 * feas_tol:
                break
        if not np.isfinite(xf).all():
            return Attempt(None, "non-finite solve", it)
        x = np.zeros(k * c)
        x[fidx] = xf
        x = x.reshape(k, c)
        # -- multipliers of every held cell -------------------------------------------
        grad = np.zeros((k, c))
        for q in qs:
            res = 2.0 * comp.child_w(q) * (_row_sums(x, comp.rows[q], comp.sizes[q]) - comp.y[q])
            grad += res[:, comp.rows[q]]
        lam = grad
        n_col = c if p is not None else 0
        if n_col:
            lam = lam + nu[None, :n_col]
        nu_bound[:] = 0.0
        nu_bound[active] = nu[n_col:]
        for r in active:
            fl = lam.ravel()
            fl[bounds.members(sub, r)] += nu_bound[r]
        # -- optimality ---------------------------------------------------------------
        sums = bounds.sums(sub, x)
        neg = free & (x < 0)
        want = ~free & free_ok & (lam < -lam_tol)
        over = (bounds.state == 0) & (sums > bounds.hi + feas_tol)
        # a lower bound of 0 is implied by x >= 0: it never becomes an equality
        under = (bounds.state == 0) & (bounds.lo > 0) & (sums < bounds.lo - feas_tol)
        # an upper bound holds with nu >= 0, a lower bound with nu <= 0
        slack_up = (bounds.state == 1) & (nu_bound < -lam_tol)
        slack_lo = (bounds.state == -1) & (nu_bound > lam_tol)
        if not (
            neg.any() or want.any() or over.any() or under.any() or slack_up.any() or slack_lo.any()
        ):
            # the active equalities must hold; when they contradict each other (every
            # child's total against the column sums) the regularised solve only
            # balances them, and the method reports failure
            target = np.where(bounds.state == -1, bounds.lo, bounds.hi)
            act = bounds.state != 0
            miss = float(np.abs(sums - target)[act].max(initial=0.0))
            # column sums within ``tol`` persons: the caller rescales columns exactly,
            # then validates every bound
            col = float(np.abs(x.sum(axis=0) - p).max()) if p is not None else 0.0
            if miss > feas_tol or col > tol:
                miss = max(miss, col)
                return Attempt(None, f"inconsistent active bounds (residual {miss:.3g})", it)
            x[~free] = 0.0
            return Attempt(np.maximum(x, 0.0), "converged", it)
        # -- update -------------------------------------------------------------------
        # Damping: when the number of violated conditions has not fallen for STALL
        # updates, or an active set comes back, at most ``limit`` cells change each way
        # (the most violating first), halving each time; at 1 this is single pivoting.
        n_viol = int(neg.sum() + want.sum() + over.sum() + under.sum())
        n_viol += int(slack_up.sum() + slack_lo.sum())
        stall = stall + 1 if n_viol >= best else 0
        best = min(best, n_viol)
        if stall >= STALL:
            limit, stall = max(1, min(limit, n_viol) // 2), 0
        if neg.any():
            cand = np.flatnonzero(neg.ravel())
            if cand.size > limit:
                cand = cand[np.argpartition(x.ravel()[cand], limit - 1)[:limit]]
            fr = free.ravel()
            fr[cand] = False
            free = fr.reshape(k, c)
        if want.any():
            cand = np.flatnonzero(want.ravel())
            # free at most as many cells as are free now (plus GROW), most negative first:
            # a free set grown tenfold costs more to factor than the steps it saves
            n_rel = min(limit, int(free.sum()) + GROW)
            if cand.size > n_rel:
                cand = cand[np.argpartition(lam.ravel()[cand], n_rel - 1)[:n_rel]]
            fr = free.ravel()
            fr[cand] = True
            free = fr.reshape(k, c)
        x[~free] = 0.0
        bounds.state[over] = 1
        bounds.state[under] = -1
        bounds.state[slack_up | slack_lo] = 0
        key = free.tobytes() + bounds.state.tobytes()
        if key in seen:
            limit, stall = max(1, min(limit, n_viol) // 2), 0
        seen.add(key)
    return Attempt(None, "max_iter", max_iter)


class ActiveSetBackend:
    """The primal-dual active-set method (:func:`solve_active_set`) as a backend: it stops at
    ``tols.optimality`` persons and aims at half of ``tols.feasibility``."""

    name = "activeset"

    def solve(
        self, sub: Subproblem, comp: Compressed, tols: Tolerances, max_iter: int | None
    ) -> Attempt:
        return solve_active_set(sub, comp, **tols.marginal_space(max_iter))
