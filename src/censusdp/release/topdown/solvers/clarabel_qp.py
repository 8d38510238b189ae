"""The generic least-squares backend: Clarabel's interior-point solver (internal).

The program below is built once (:func:`build_program`, a :class:`Program`) and solved
here, in Clarabel's conic form (:meth:`Program.conic`), or by PIQP
(:mod:`~censusdp.release.topdown.solvers.piqp_qp`), which the chain tries first on
small families.

Formulation (docs/estimation.md): variables are the
deviation ``d = x - x0`` from a proportional allocation ``x0`` with exact column sums (so
large counts do not meet the solver's absolute tolerances). In families of more than
:data:`DIRECT_MAX_CELLS` kept cells, every answer row of more than
:data:`DIRECT_MAX_ANSWER` kept cells (of any size where no query sees every kept cell
alone) gets one auxiliary residual
``z_qia = (B_q x_i)_a - y_qia`` per child (so the total query adds one variable a
child instead of a dense ``c x c`` block to the Hessian); the smaller answers (a
detailed query's single cells above all) stay in the objective as they are:

    minimise   sum_{q,i} w_qi (||z_qi||^2 + ||S_q d_i + S_q x0_i - y_qi||^2)
    subject to z_qi - L_q d_i = L_q x0_i - y_qi          (zero cone)
               sum_i d_ij = p_j - sum_i x0_ij             (zero cone, not at the root)
               T_lo_i - 1'x0_i = 1'd_i                    (zero cone, exact totals)
               sum_{i in m} 1'd_i = S_m - sum_{i in m} 1'x0_i   (zero cone, child groups)
               -d <= x0,  +-(group / total sums of d) <= bound - sums of x0   (nonneg cone)

with ``L_q`` the large answer rows of ``B_q`` and ``S_q`` the small ones. Families of at
most :data:`DIRECT_MAX_CELLS` kept cells (most block groups' blocks) keep only ``d``:
every answer is small there, each child's Hessian ``H_i = sum_q w_qi B_q'B_q`` a dense
``c x c`` block. There the residuals outnumber the cells five to six times, and the
smaller program solved 1.7-2.6x faster with the same objective (relative differences
below 5e-8 on 245 block families of full generated Wyoming); with more cells the dense
blocks made QDLDL's factorisations 3-20x dearer than the residual form's (25-48
cells). Keeping answers of at most three cells out of the residuals made California's
block families of more than 24 cells 1.6x faster than residuals for every answer
(``benchmarks/bench_block_families.py``); in singular families (dhc-lite below the
State, no query sees every cell alone) it made Clarabel take 1.7x the iterations (a
Vermont tract family: 19 -> 33) at a higher cost each, so there every answer keeps its
residual.

Factored by QDLDL (3-4x faster than the default on small families), or by faer's
supernodal Cholesky when ``P`` and ``A`` hold more than :data:`FAER_MIN_NNZ` non-zeros:
on California's County family (58 counties on 1,011 cells) 68.5 -> 16.8 s, on Los
Angeles County's tracts 99.9 -> 7.6 s, the same iterations and objectives to 1e-9; on
block families of 10,000-20,000 non-zeros the two are even. With faer, Clarabel solved
full Vermont's dense dhc-lite County and Tract families 1.5-6x faster than the
marginal-space interior point (``_interior``; 73 -> 18 s on the County family). Both
run on one thread: a factorisation's result must not depend on the machine's load.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from censusdp.release.topdown.problem import Subproblem, _row_sums
from censusdp.release.topdown.solvers.base import Attempt, Compressed, Tolerances
from censusdp.release.topdown.solvers.common import fixed_zeros, start_point

__all__ = ["ClarabelBackend", "Program", "build_program", "solve_clarabel"]

_VERBOSE = False

DIRECT_MAX_CELLS = 24
"""Families of at most this many kept cells are solved without residual variables."""

DIRECT_MAX_ANSWER = 3
"""In larger families with a query that sees every kept cell alone, answers of at most
this many kept cells get no residual variable."""

FAER_MIN_NNZ = 20_000
"""Programs with more non-zeros in ``P`` and ``A`` are factored by faer, smaller by QDLDL."""


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

    def matrix(self, n_var: int) -> tuple[sp.csc_matrix, np.ndarray]:
        """The rows so far as one CSC matrix over ``n_var`` variables, and their
        right-hand sides."""
        if not self.r:
            return sp.csc_matrix((0, n_var)), np.zeros(0)
        a = sp.csc_matrix(
            (np.concatenate(self.v), (np.concatenate(self.r), np.concatenate(self.c))),
            shape=(self.n, n_var),
        )
        a.sum_duplicates()
        return a, np.concatenate(self.rhs)

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
    resid0: list[np.ndarray],
    wscale: float,
    small: list[np.ndarray],
) -> np.ndarray:
    """The residual equalities ``z_qi - B_q d_i = B_q x0_i - y_qi`` (``resid0``: the
    right-hand sides of every answer) of the answers not in ``small`` into ``eq``; the
    weight ``2 w_qi`` of each residual."""
    diag = []
    z_off = fi.size
    for q in range(len(comp.sizes)):
        large = ~small[q]
        n_large = int(large.sum())
        if n_large == 0:
            continue
        renum = np.cumsum(large) - 1  # the residual of each large answer, per child
        rhs = resid0[q][:, large].ravel()
        n = k * n_large
        a = comp.rows[q][fj]
        hit = large[a]  # free cells in a large answer
        rows = np.concatenate([np.arange(n), fi[hit] * n_large + renum[a[hit]]])
        cols = np.concatenate([z_off + np.arange(n), np.flatnonzero(hit)])
        vals = np.concatenate([np.ones(n), -np.ones(int(hit.sum()))])
        eq.add(rows, cols, vals, rhs)
        w = np.broadcast_to(2.0 * np.asarray(comp.child_w(q), dtype=np.float64) / wscale, (k, 1))
        diag.append(np.broadcast_to(w, (k, n_large)).ravel())
        z_off += n
    return np.concatenate(diag) if diag else np.zeros(0)


def _direct_objective(
    comp: Compressed,
    free: np.ndarray,
    fidx: np.ndarray,
    resid0: list[np.ndarray],
    wscale: float,
    small: list[np.ndarray],
    dense: bool,
) -> tuple[sp.csc_matrix, np.ndarray]:
    """``P = 2 H`` (upper triangle, free cells ``fidx`` of the mask ``free``) and ``2 g``
    for ``d' H d + 2 g'd``, the answers in ``small``: ``H_i = sum_q w_qi B_q'B_q`` per
    child, ``g_i = sum_q w_qi B_q'(B_q x0_i - y_qi)`` over those answers' rows ``B_q``
    (``resid0``: ``B_q x0_i - y_qi`` of every answer).

    ``dense`` (every answer small: families of a few cells): ``H`` is summed as dense
    ``c x c`` blocks; otherwise it is built from the pairs of cells that share a small
    answer (:func:`_pairs`), so a query whose answers are single cells adds only a
    diagonal and no ``c x c`` array is made."""
    k, c = free.shape
    g = np.zeros((k, c))
    h = np.zeros((k, c, c)) if dense else None
    lo, hi, weight = [], [], []
    for q, m in enumerate(comp.sizes):
        if m == 0 or not small[q].any():
            continue
        r = comp.rows[q]
        w = np.broadcast_to(np.asarray(comp.child_w(q), dtype=np.float64) / wscale, (k, 1))
        cells = np.arange(c) if dense else np.flatnonzero(small[q][r])
        g[:, cells] += w * resid0[q][:, r[cells]]
        if h is not None:
            h += w[:, :, None] * (r[:, None] == r[None, :])[None, :, :]
            continue
        ja, jb = _pairs(cells, r[cells])
        lo.append(np.minimum(ja, jb))
        hi.append(np.maximum(ja, jb))
        weight.append(np.broadcast_to(w, (k, ja.size)))
    pos = np.full(k * c, -1, dtype=np.int64)
    pos[fidx] = np.arange(fidx.size)
    if h is not None:
        upper = np.triu(np.ones((c, c), dtype=bool))[None] & free[:, :, None] & free[:, None, :]
        i, j, jj = np.nonzero(upper & (h != 0))
        ri, ci, val = pos[i * c + j], pos[i * c + jj], h[i, j, jj]
    elif lo:
        base = np.arange(k)[:, None] * c
        ri = pos[base + np.concatenate(lo)[None, :]].ravel()
        ci = pos[base + np.concatenate(hi)[None, :]].ravel()
        val = np.concatenate(weight, axis=1).ravel()
        ok = (ri >= 0) & (ci >= 0)
        ri, ci, val = ri[ok], ci[ok], val[ok]
    else:
        ri = ci = np.zeros(0, dtype=np.int64)
        val = np.zeros(0)
    n = fidx.size
    p_mat = sp.csc_matrix((2.0 * val, (ri, ci)), shape=(n, n))
    p_mat.sum_duplicates()
    return p_mat, 2.0 * g.ravel()[fidx]


def _pairs(cells: np.ndarray, answer: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every pair ``(j, j')`` of ``cells`` with the same ``answer``, each unordered pair
    once and every cell with itself."""
    order = np.argsort(answer, kind="stable")
    run = answer[order]
    n = order.size
    starts = np.flatnonzero(np.r_[True, run[1:] != run[:-1]])
    ends = np.repeat(np.r_[starts[1:], n], np.diff(np.r_[starts, n]))
    count = ends - np.arange(n)  # each position pairs with itself and the rest of its run
    first = np.repeat(np.arange(n), count)
    second = first + np.arange(first.size) - np.repeat(np.cumsum(count) - count, count)
    return cells[order[first]], cells[order[second]]


@dataclass(frozen=True, eq=False)
class Program:
    """The least-squares program of one subproblem (the module docstring's formulation),
    in the variables ``v = (d, z) / scale``, for any interior-point solver to take.

    Attributes:
        p: ``P`` (upper triangle, CSC) of the objective ``v'P v / 2 + q'v``.
        q: the linear term.
        a_eq, b_eq: the equality rows ``a_eq v = b_eq``.
        a_in, b_in: the inequality rows ``a_in v <= b_in`` (group and total bounds).
        lower: each variable's lower bound (``-x0 / scale`` for a cell, ``-inf`` for a
            residual): the cells' non-negativity.
        scale: the largest right-hand side (see :func:`build_program`).
        x0: ``(k, c)`` the start point the deviations ``d`` are taken from.
        fidx: the free cells (flat indices into ``(k, c)``), one ``d`` each.
    """

    p: sp.csc_matrix
    q: np.ndarray
    a_eq: sp.csc_matrix
    b_eq: np.ndarray
    a_in: sp.csc_matrix
    b_in: np.ndarray
    lower: np.ndarray
    scale: float
    x0: np.ndarray
    fidx: np.ndarray

    @property
    def nnz(self) -> int:
        """Non-zeros of ``P`` and of every constraint row (the cells' bounds as rows)."""
        return self.p.nnz + self.a_eq.nnz + self.a_in.nnz + self.fidx.size

    def point(self, v: np.ndarray) -> np.ndarray:
        """The ``(k, c)`` counts of a solution ``v``."""
        x = self.x0.ravel().copy()
        x[self.fidx] += self.scale * np.asarray(v[: self.fidx.size])
        return x.reshape(self.x0.shape)

    def conic(self) -> tuple[sp.csc_matrix, np.ndarray, int, int]:
        """``(A, b, zero rows, non-negative rows)`` of the conic form ``A v + s = b``: the
        equalities (zero cone), then the cells' bounds and the inequality rows
        (non-negative cone)."""
        n_d, n_var = self.fidx.size, self.p.shape[0]
        bound = sp.csc_matrix((-np.ones(n_d), (np.arange(n_d), np.arange(n_d))), shape=(n_d, n_var))
        a = sp.vstack([self.a_eq, bound, self.a_in], format="csc")
        b = np.concatenate([self.b_eq, -self.lower[:n_d], self.b_in])
        return a, b, self.b_eq.size, n_d + self.b_in.size


def build_program(sub: Subproblem, comp: Compressed) -> Program | np.ndarray:
    """The program of ``sub`` (its queries compressed to ``comp``), or the ``(k, c)``
    answer itself when every cell is forced to 0 (nothing to solve).

    Long because it assembles one program (objective, the equality and inequality
    blocks of every constraint) whose pieces share index arithmetic; the assembly reads
    best top to bottom in the order of the formulation in the module docstring.
    """
    k, c, n_groups = sub.k, sub.c, sub.G
    # cells forced to 0 (their group's upper bound is 0 for that child) get no variable:
    # they are most of the cells at a dhc-lite root with few group-quarters types, and
    # their implied equalities made the interior-point method report false infeasibility
    free = ~fixed_zeros(sub)
    fidx = np.flatnonzero(free.ravel())
    x0 = np.where(free, start_point(sub), 0.0)
    n_d = fidx.size
    if n_d == 0:  # every cell is forced to 0: nothing to solve (validation judges x0)
        return x0
    fi, fj = np.divmod(fidx, c)  # child and cell of each free variable
    # objective scaling: the argmin does not change, the solver sees O(1) weights
    wmax = float(comp.w.max(initial=0.0))
    if comp.cw is not None and comp.cw.size:
        wmax = float((comp.w[:, None] * comp.cw).max(initial=0.0))
    wscale = wmax if wmax > 0 else 1.0
    small = 1e-9 * max(1.0, sub.scale())

    eq, ineq = _Rows(), _Rows()
    # small answers stay in the objective where a query sees every kept cell alone
    # (the Hessian is definite); in a singular family (dhc-lite below the State) they
    # made Clarabel take 1.7x the iterations, each dearer
    dense = c <= DIRECT_MAX_CELLS
    most = c if dense else DIRECT_MAX_ANSWER if comp.sees_every_cell() else 0
    few = [np.bincount(r, minlength=m) <= most for r, m in zip(comp.rows, comp.sizes, strict=True)]
    resid0 = [
        _row_sums(x0, r, m) - y for r, m, y in zip(comp.rows, comp.sizes, comp.y, strict=True)
    ]
    p_d, g_d = _direct_objective(comp, free, fidx, resid0, wscale, few, dense)
    p_z = np.zeros(0) if dense else _residual_rows(eq, comp, k, fi, fj, resid0, wscale, few)
    n_var = n_d + p_z.size
    p_mat = sp.block_diag((p_d, sp.diags(p_z)), format="csc") if p_z.size else p_d
    grad = np.concatenate([g_d, np.zeros(p_z.size)])

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
    if sub.child_group is not None:  # each child group's totals sum to its invariant
        m = sub.n_child_groups
        cg = sub.child_group
        key = np.where(cg >= 0, cg, m)[fi]
        inside = cg >= 0
        base = np.bincount(cg[inside], weights=t0[inside], minlength=m)
        eq.add_sums(key, np.arange(m), 1.0, sub.group_totals - base, True, small)
    gl = sub.group_lower.ravel()
    gu = sub.group_upper.ravel()
    # an exact group (a DHC person run held to a P.L. 94 release's cross: every group of
    # every block) is one equality row, not two opposite inequalities whose slacks are
    # both 0 at every feasible point (no interior point): the held block families of
    # Vermont x0.1 in 238 s instead of 287; neutral on pl94-2020 (docs/estimation.md)
    held = np.isfinite(gu) & (gu == gl)
    sel = np.flatnonzero(held)
    if sel.size:
        eq.add_sums(gkey, sel, 1.0, gl[sel] - g0[sel], True, small)
    sel = np.flatnonzero(np.isfinite(gu) & ~held)
    if sel.size:
        ineq.add_sums(gkey, sel, 1.0, gu[sel] - g0[sel], False, small)
    sel = np.flatnonzero((gl > 0) & ~held)
    if sel.size:
        ineq.add_sums(gkey, sel, -1.0, g0[sel] - gl[sel], False, small)
    sel = np.flatnonzero(np.isfinite(sub.total_upper) & ~exact)
    if sel.size:
        ineq.add_sums(fi, sel, 1.0, sub.total_upper[sel] - t0[sel], False, small)
    sel = np.flatnonzero((sub.total_lower > 0) & ~exact)
    if sel.size:
        ineq.add_sums(fi, sel, -1.0, t0[sel] - sub.total_lower[sel], False, small)

    a_eq, b_eq = eq.matrix(n_var)
    a_in, b_in = ineq.matrix(n_var)
    # Solve for (d, z) / scale: the constraints in units of their largest right-hand
    # side. Unscaled, the noisy answers of a low-budget coarse problem (sums over chunks
    # of children, |y| ~ 1e4) made Clarabel declare PrimalInfeasible after two
    # iterations on problems with obvious feasible points (its infeasibility test has
    # absolute tolerances); scaled, the same problems solve in 12-13 iterations.
    bounds = x0.ravel()[fidx]
    scale = max(
        1.0,
        float(np.abs(b_eq).max(initial=0.0)),
        float(np.abs(b_in).max(initial=0.0)),
        float(np.abs(bounds).max(initial=0.0)),
    )
    lower = np.concatenate([-bounds, np.full(p_z.size, -np.inf)]) / scale
    return Program(
        p_mat, grad / scale, a_eq, b_eq / scale, a_in, b_in / scale, lower, scale, x0, fidx
    )


def solve_clarabel(
    sub: Subproblem, comp: Compressed, *, tol: float = 1e-9, max_iter: int = 200
) -> Attempt:
    """Solve with Clarabel; returns ``(x or None, status, iterations)``."""
    import clarabel

    prog = build_program(sub, comp)
    if not isinstance(prog, Program):
        return Attempt(prog, "Solved", 0)
    a_mat, b_vec, n_eq, n_ineq = prog.conic()
    cones = []
    if n_eq:
        cones.append(clarabel.ZeroConeT(n_eq))
    if n_ineq:
        cones.append(clarabel.NonnegativeConeT(n_ineq))
    settings = clarabel.DefaultSettings()
    settings.verbose = _VERBOSE
    settings.direct_solve_method = "faer" if prog.nnz > FAER_MIN_NNZ else "qdldl"
    settings.max_iter = max_iter
    settings.tol_gap_abs = tol
    settings.tol_gap_rel = tol
    settings.tol_feas = tol
    settings.max_threads = 1
    solver = clarabel.DefaultSolver(prog.p, prog.q, a_mat, b_vec, cones, settings)
    sol = solver.solve()
    status = str(sol.status)
    if sol.status not in (clarabel.SolverStatus.Solved, clarabel.SolverStatus.AlmostSolved):
        return Attempt(None, status, int(sol.iterations))
    return Attempt(prog.point(np.asarray(sol.x)), status, int(sol.iterations))


class ClarabelBackend:
    """Clarabel's interior-point method (:func:`solve_clarabel`) as a backend, the generic
    one: its gap and feasibility tolerances are ``min(tols.relative, 1e-9)``."""

    name = "clarabel"

    def solve(
        self, sub: Subproblem, comp: Compressed, tols: Tolerances, max_iter: int | None
    ) -> Attempt:
        cap: dict = {} if max_iter is None else {"max_iter": max_iter}
        return solve_clarabel(sub, comp, tol=min(tols.relative, 1e-9), **cap)
