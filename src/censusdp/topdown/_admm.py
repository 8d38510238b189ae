"""The structure-exploiting least-squares backend: ADMM with one shared factorisation.

The objective separates over children, and every child has the same Hessian
``H = sum_q w_q B_q'B_q`` (its marginals read the same kept cells). The constraints split
into two sets with cheap exact Euclidean projections:

* ``C1`` (per cell ``j``): ``X[:, j] >= 0`` and ``sum_i X[i, j] = p_j`` - a scaled simplex
  (just ``X >= 0`` at the root);
* ``C2`` (per child ``i``): ``L_ig <= sum_{j in g} X[i, j] <= U_ig`` and
  ``T_lo_i <= sum_j X[i, j] <= T_hi_i`` - a laminar family; the projection shifts every cell
  of group ``g`` by the same amount and reduces to one scalar multiplier per child, found
  exactly from the piecewise-linear breakpoints.

Consensus ADMM (Boyd et al. 2011, sec. 7.2; over-relaxation alpha = 1.6; the step-size
adaptation of OSQP, Stellato et al. 2020, sec. 5.2) on ``X = Z1 in C1, X = Z2 in C2``:

    (H + rho I) X[i] = b_i + rho/2 (Z1 - U1 + Z2 - U2)[i]     (one factorisation, k RHS)
    Zm = Proj_Cm(alpha X + (1 - alpha) Zm + Um),  Um += alpha X + (1 - alpha) Zm_old - Zm

``b_i = sum_q w_q B_q' y_qi``. The answer is ``Z1`` (exactly non-negative with exact
column sums); it is accepted once the residuals and its violation of ``C2`` are below
tolerance. Small problems factor ``H + rho I`` densely; large ones (``c > DENSE_MAX``,
e.g. the 233,856-cell dhc-lite schema) factor the sparse quasi-definite system
``[[rho I, B'], [B, -W^-1]]`` with SuperLU, so nothing of size ``c^2`` is ever formed.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as la
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from censusdp.topdown._common import Compressed, start_point
from censusdp.topdown.problem import Subproblem

__all__: list[str] = []

DENSE_MAX = 1024
"""Largest number of kept cells for which ``H + rho I`` is factored as a dense matrix."""

_ALPHA = 1.6


class _Factor:
    """Solves ``(H + rho I) x = r`` for many right-hand sides (columns of r)."""

    def __init__(self, comp: Compressed, c: int, rho: float, dense: bool) -> None:
        self.c = c
        qs = [q for q in range(len(comp.sizes)) if comp.w[q] > 0 and comp.sizes[q] > 0]
        if dense:
            h = np.zeros((c, c))
            for q in qs:
                r = comp.rows[q]
                # B_q'B_q[j, l] = 1 when cells j and l share a row
                h += comp.w[q] * (r[:, None] == r[None, :])
            h[np.diag_indices(c)] += rho
            self._cho = la.cho_factor(h, lower=True, check_finite=False)
            self._lu = None
        else:
            blocks = [comp.matrix(q, c) for q in qs]
            b = sp.vstack(blocks, format="csc") if blocks else sp.csc_matrix((0, c))
            winv = np.concatenate([np.full(comp.sizes[q], 1.0 / comp.w[q]) for q in qs] or [[]])
            kkt = sp.bmat(
                [[sp.identity(c) * rho, b.T], [b, -sp.diags(winv)]],
                format="csc",
            )
            self._lu = spla.splu(kkt, permc_spec="COLAMD")
            self._m = b.shape[0]
            self._cho = None

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """``rhs`` is ``(c, n)``; returns ``(c, n)``."""
        if self._cho is not None:
            return la.cho_solve(self._cho, rhs, check_finite=False)
        full = np.zeros((self.c + self._m, rhs.shape[1]))
        full[: self.c] = rhs
        return self._lu.solve(full)[: self.c]


def _project_simplex_columns(v: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Project each column of ``v`` (k, c) onto ``{z >= 0, sum z = p_j}``."""
    k = v.shape[0]
    u = -np.sort(-v, axis=0)
    css = np.cumsum(u, axis=0) - p[None, :]
    ind = np.arange(1, k + 1, dtype=np.float64)[:, None]
    cond = u - css / ind > 0
    # the last index where cond holds (cond is true for a prefix)
    rho_idx = k - 1 - np.argmax(cond[::-1], axis=0)
    theta = css[rho_idx, np.arange(v.shape[1])] / (rho_idx + 1.0)
    return np.maximum(v - theta[None, :], 0.0)


class _LaminarProjector:
    """Euclidean projection of each row of ``v`` onto the group/total bounds."""

    def __init__(self, sub: Subproblem) -> None:
        self.groups = sub.groups
        self.n = np.bincount(sub.groups, minlength=sub.G).astype(np.float64)  # (G,)
        self.has = self.n > 0
        self.lo = np.where(self.has[None, :], sub.group_lower, 0.0)
        self.hi = np.where(self.has[None, :], sub.group_upper, 0.0)
        self.tlo = sub.total_lower
        self.thi = sub.total_upper
        self.inf_slope = (self.n[None, :] * (np.isinf(self.hi) & self.has[None, :])).sum(axis=1)
        nsafe = np.where(self.has, self.n, 1.0)
        self.nsafe = nsafe
        self.trivial = (
            not np.isfinite(self.hi[:, self.has]).any()
            and not (self.lo > 0).any()
            and not np.isfinite(self.thi).any()
            and not (self.tlo > 0).any()
        )

    def _sums(self, s0: np.ndarray, lam: np.ndarray) -> np.ndarray:
        """Clipped group sums for multipliers ``lam`` of shape (k, m) -> (k, m, G)."""
        s = s0[:, None, :] + self.n[None, None, :] * lam[:, :, None]
        s = np.clip(s, self.lo[:, None, :], self.hi[:, None, :])
        return np.where(self.has[None, None, :], s, 0.0)

    def __call__(self, v: np.ndarray) -> np.ndarray:
        if self.trivial:
            return v
        k, n_groups = self.lo.shape
        s0 = np.zeros((k, n_groups))
        np.add.at(s0.T, self.groups, v.T)
        nsafe = self.nsafe[None, :]
        bl = (self.lo - s0) / nsafe
        bu = np.where(np.isfinite(self.hi), (self.hi - s0) / nsafe, 0.0)
        bl = np.where(self.has[None, :], bl, 0.0)
        bu = np.where(self.has[None, :], bu, 0.0)
        cand = np.sort(np.concatenate([bl, bu, np.zeros((k, 1))], axis=1), axis=1)  # (k, m)
        tv = self._sums(s0, cand).sum(axis=2)  # (k, m), non-decreasing in lam
        t_at0 = self._sums(s0, np.zeros((k, 1))).sum(axis=2)[:, 0]
        target = np.where(t_at0 < self.tlo, self.tlo, np.where(t_at0 > self.thi, self.thi, t_at0))
        m = cand.shape[1]
        idx = (tv < target[:, None]).sum(axis=1)  # first candidate with T >= target
        rows = np.arange(k)
        lam = np.zeros(k)
        # target below every candidate value: T is constant (all groups at L) below cand[0]
        low = idx == 0
        lam[low] = cand[low, 0]
        high = idx == m
        if high.any():
            slope = self.inf_slope[high]
            extra = np.where(
                slope > 0, (target[high] - tv[high, -1]) / np.where(slope > 0, slope, 1.0), 0.0
            )
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
        # keep lam = 0 when the total is already within its bounds
        inside = (t_at0 >= self.tlo) & (t_at0 <= self.thi)
        lam[inside] = 0.0
        s = self._sums(s0, lam[:, None])[:, 0, :]
        shift = (s - s0) / nsafe
        return v + shift[:, self.groups]


def solve_admm(
    sub: Subproblem,
    comp: Compressed,
    *,
    tol: float = 1e-9,
    feas_tol: float = 1e-8,
    max_iter: int = 20000,
    dense_max: int = DENSE_MAX,
) -> tuple[np.ndarray | None, str, int]:
    """Run ADMM; returns ``(x or None, status, iterations)``.

    Args:
        sub: the subproblem.
        comp: its compressed queries.
        tol: relative tolerance on the primal and dual residuals.
        feas_tol: absolute tolerance (persons) on the answer's constraint violation.
        max_iter: iteration cap.
        dense_max: largest ``c`` factored densely.
    """
    k, c = sub.k, sub.c
    if c == 0:
        return np.zeros((k, 0)), "converged", 0
    wsum = float(comp.w.sum())
    if wsum <= 0:
        return None, "no_weight", 0
    scale = max(1.0, sub.scale())
    # b (c, k): b_i = sum_q w_q B_q' y_qi, normalised with H by wsum (diag(H) = sum_q w_q)
    b = np.zeros((c, k))
    for q in range(len(comp.sizes)):
        if comp.w[q] > 0 and comp.sizes[q] > 0:
            b += comp.w[q] * comp.y[q][:, comp.rows[q]].T
    b /= wsum
    comp_n = Compressed(comp.rows, comp.sizes, comp.y, comp.w / wsum, 0.0)
    dense = c <= dense_max
    rho = 0.1
    fac = _Factor(comp_n, c, rho, dense)
    proj2 = _LaminarProjector(sub)
    parent = None if sub.parent is None else sub.parent.astype(np.float64)

    def proj1(v: np.ndarray) -> np.ndarray:
        return np.maximum(v, 0.0) if parent is None else _project_simplex_columns(v, parent)

    x0 = start_point(sub)
    z1 = proj1(x0)
    z2 = proj2(x0)
    u1 = np.zeros_like(x0)
    u2 = np.zeros_like(x0)
    eps_p = tol * scale
    check_every = 10
    status = "max_iter"
    it = 0
    for it in range(1, max_iter + 1):
        rhs = b + 0.5 * rho * (z1 - u1 + z2 - u2).T
        x = fac.solve(rhs).T
        xh1 = _ALPHA * x + (1 - _ALPHA) * z1
        xh2 = _ALPHA * x + (1 - _ALPHA) * z2
        z1_old, z2_old = z1, z2
        z1 = proj1(xh1 + u1)
        z2 = proj2(xh2 + u2)
        u1 += xh1 - z1
        u2 += xh2 - z2
        if it % check_every:
            continue
        r_prim = max(np.abs(x - z1).max(), np.abs(x - z2).max())
        r_dual = rho * np.abs((z1 - z1_old) + (z2 - z2_old)).max()
        y_norm = rho * np.abs(u1 + u2).max()
        eps_d = tol * max(1.0, y_norm, np.abs(b).max())
        if r_prim <= eps_p and r_dual <= eps_d:
            if sub.max_violation(z1) <= feas_tol:
                status = "converged"
                break
        # step-size adaptation (OSQP): balance the normalised residuals
        if it % 50 == 0:
            pn = r_prim / max(np.abs(x).max(), np.abs(z1).max(), 1e-12)
            dn = r_dual / max(y_norm, np.abs(b).max(), 1e-12)
            if pn > 0 and dn > 0:
                new_rho = float(np.clip(rho * np.sqrt(pn / dn), 1e-6, 1e6))
                if new_rho > 5 * rho or new_rho < rho / 5:
                    u1 *= rho / new_rho
                    u2 *= rho / new_rho
                    rho = new_rho
                    fac = _Factor(comp_n, c, rho, dense)
    if status != "converged":
        return None, status, it
    return z1, status, it
