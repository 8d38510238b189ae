"""Bounded least squares ``min ||Q x - b||^2, lo <= x <= hi`` for reconstruction attacks.

Three solvers for the reconstruction step of JASON (JSR-19-2F) eq. (4-4):

* :func:`gram_fista`: the specialised solver. It works on the normal equations only
  (the Gram matrix ``G = Q'Q`` and ``c = Q'b``, formed once per trial with BLAS), so its
  cost per iteration is one ``n x n`` by ``n x K`` product for ``K`` right-hand sides
  at once, independent of the number of queries ``m``. It is FISTA (Beck & Teboulle
  2009) with gradient-based adaptive restart (O'Donoghue & Candes 2015) in a
  *rank-one-corrected metric* ``M = a I + b u u'``: random 0/1 queries give ``G``
  one huge eigenvalue ``~ m n / 4`` along ``u ~ 1/sqrt(n)`` and a bulk of size
  ``~ m/4``, so a plain step ``1/lambda_max`` would crawl along the bulk (condition
  number ``~ n``). Taking ``u`` as the top eigenvector, ``a`` as (a safe bound on) the
  second eigenvalue and ``b = lambda_1 - a`` majorises ``G`` while removing the spike,
  and the proximal step (a box projection in the metric ``M``) reduces to a scalar
  monotone equation solved by safeguarded Newton. A backtracking test
  ``delta' G delta <= delta' M delta`` guards the majorisation. Stopping rule: the
  projected gradient scaled by ``diag(G)`` (the length of the best single-coordinate
  move of any bit) is at most ``tol`` for every right-hand side.
* :func:`lsq_linear_solve`: ``scipy.optimize.lsq_linear`` with its defaults (the
  peer, and what MATLAB's ``lsqlin`` does in Appendix B).
* :func:`lp_solve`: Dinur & Nissim's linear program (JASON (JSR-19-2F) sec. 4.2): find
  ``x in [0,1]^n`` with ``|Q x - b| <= E`` for the smallest ``E`` (Chebyshev / L-inf
  fit), or the L1 fit, with scipy's HiGHS.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog, lsq_linear

from censusdp.errors import CensusDPError, InternalError

__all__ = [
    "BoxLSResult",
    "FistaSettings",
    "gram_fista",
    "lp_solve",
    "lsq_linear_solve",
    "round_bits",
]


@dataclass(frozen=True)
class BoxLSResult:
    """Solutions of one or more box-constrained least-squares problems.

    Attributes:
        x: solutions, shape ``(n, K)`` (one column per right-hand side).
        iterations: iterations (or solver calls) used.
        converged: per column, whether the stopping rule was met.
        criterion: per column, the final value of the stopping criterion.
    """

    x: np.ndarray
    iterations: int
    converged: np.ndarray
    criterion: np.ndarray


@dataclass(frozen=True)
class FistaSettings:
    """How :func:`gram_fista` iterates and when it stops.

    Attributes:
        tol: stopping tolerance: ``max_i |P(g)_i| / G_ii <= tol`` (see :func:`gram_fista`).
        max_iter: iteration limit; columns not converged by then are reported.
        seed: seed of the random start of the second-eigenvalue estimate.
        vertex_check_every: every this many iterations, test whether the iterate
            rounded to the nearest bounds already meets the stopping rule (an exact
            minimiser at a vertex, typical of noiseless recovery) and stop there.
    """

    tol: float = 1e-7
    max_iter: int = 20_000
    seed: int = 0
    vertex_check_every: int = 10

    def __post_init__(self) -> None:
        if not self.tol > 0:
            raise CensusDPError(f"tol must be positive; got {self.tol}")


def round_bits(x: np.ndarray) -> np.ndarray:
    """Round a relaxed solution to bits: 1 where ``x >= 1/2``, else 0 (MATLAB ``round``)."""
    return (np.asarray(x) >= 0.5).astype(np.int8)


def _spectral_metric(G: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, float, float]:
    """Top eigenpair of ``G`` and an estimate of its second eigenvalue.

    Power iteration from the all-ones vector finds the dominant direction of a
    non-negative Gram matrix in a few steps (the gap is ~ n). The second eigenvalue is
    estimated by power iteration on the deflated matrix; the caller inflates it and
    backtracks if it was too small.
    """
    n = G.shape[0]
    u = np.ones(n) / np.sqrt(n)
    lam1 = 0.0
    for _ in range(200):
        w = G @ u
        lam_new = float(u @ w)
        norm = float(np.linalg.norm(w))
        if norm == 0.0:
            return u, 0.0, 0.0
        u_new = w / norm
        done = (
            abs(lam_new - lam1) <= 1e-13 * max(abs(lam_new), 1.0)
            and np.linalg.norm(u_new - u) < 1e-10
        )
        u, lam1 = u_new, lam_new
        if done:
            break
    v = rng.standard_normal(n)
    v -= (u @ v) * u
    v /= np.linalg.norm(v)
    lam2 = 0.0
    for _ in range(40):
        w = G @ v
        w -= (u @ w) * u
        lam2 = float(v @ w)
        norm = float(np.linalg.norm(w))
        if norm == 0.0:
            break
        v = w / norm
    return u, lam1, max(lam2, 0.0)


def _metric_prox(
    z: np.ndarray, u: np.ndarray, kappa: np.ndarray, lo: float, hi: float, s0: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Project columns of ``z`` onto the box in the metric ``a I + b u u'``.

    With ``kappa = b / a`` per column, the projection is ``x(s) = clip(z - kappa s u)``
    where the scalar ``s`` solves ``h(s) = s - u'(x(s) - z) = 0``; ``h`` is piecewise
    linear and strictly increasing (slope ``1 + kappa * sum_free u_i^2``), so a
    safeguarded Newton iteration finds the exact root in a handful of steps.
    """
    k = z.shape[1]
    uc = u[:, None]
    radius = np.abs(u).sum() * np.maximum(np.abs(z - lo), np.abs(z - hi)).max(axis=0) + 1.0
    left, right = -radius.copy(), radius.copy()
    s = np.clip(s0, left, right)
    u2 = uc * uc
    for _ in range(100):
        w = z - (kappa * s) * uc
        x = np.clip(w, lo, hi)
        h = s - (uc * (x - z)).sum(axis=0)
        scale = 1.0 + np.abs(s)
        if np.all(np.abs(h) <= 1e-12 * scale):
            return x, s
        neg = h < 0
        left = np.where(neg, s, left)
        right = np.where(neg, right, s)
        free = (w > lo) & (w < hi)
        slope = 1.0 + kappa * (u2 * free).sum(axis=0)
        s_new = s - h / slope
        outside = (s_new <= left) | (s_new >= right)
        s = np.where(outside, 0.5 * (left + right), s_new)
    if k and np.max(np.abs(right - left)) > 1e-9 * (1.0 + np.max(np.abs(s))):
        raise InternalError("metric projection did not converge in 100 safeguarded Newton steps")
    return np.clip(z - (kappa * s) * uc, lo, hi), s


def _projected_gradient(x: np.ndarray, g: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Projected gradient: ``g`` on free coordinates, its infeasible sign at the bounds."""
    return np.where(x <= lo, np.minimum(g, 0.0), np.where(x >= hi, np.maximum(g, 0.0), g))


def _rounding(delta: np.ndarray, gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
    """Per column, the rounding error of the curvature ``delta'(G x - G y)`` taken as a
    difference of two Gram products (``G y`` is carried by the momentum, not recomputed).

    Once the iterate has stagnated (a step of 1e-16) that difference is rounding alone
    and can exceed the step's model however large ``a`` grows; a step whose excess is
    within ``1e-12 * sum |delta| (|G x| + |G y|)`` (plus the smallest float) is no
    evidence that ``a`` is too small. A genuine excess is of order ``lambda |delta|^2``,
    above this floor for every step longer than about ``1e-12 sqrt(n) lambda_1 /
    lambda`` times the iterate's scale.
    """
    return 1e-12 * (np.abs(delta) * (np.abs(gx) + np.abs(gy))).sum(axis=0) + 1e-300


def gram_fista(
    gram: np.ndarray,
    rhs: np.ndarray,
    *,
    lower: float = 0.0,
    upper: float = 1.0,
    x0: np.ndarray | None = None,
    settings: FistaSettings | None = None,
) -> BoxLSResult:
    """Solve ``min_x 1/2 x'G x - c'x`` subject to ``lower <= x <= upper``, column-wise.

    This is the bounded least-squares problem ``min ||Q x - b||^2`` of JASON (JSR-19-2F)
    eq. (4-4) written on the normal equations (``G = Q'Q``, ``c = Q'b``). Algorithm:
    FISTA with adaptive restart in the metric ``M = a I + (lambda_1 - a) u u'`` (see
    the module docstring), with per-column backtracking on ``a``.

    Stopping rule: ``max_i |P(g)_i| / G_ii <= tol`` where ``g = G x - c`` and ``P`` is
    the projection of the gradient onto the tangent cone of the box (``g_i`` for free
    coordinates, ``min(g_i, 0)`` at the lower bound, ``max(g_i, 0)`` at the upper).
    The same test applied to the iterate rounded to the nearest bounds certifies a
    vertex minimiser early (see :attr:`FistaSettings.vertex_check_every`).

    Long because the iteration is one numerical kernel: the step, the per-column
    backtracking, the vertex certificate and the restart all update the same iterate,
    momentum and Gram products (``X``, ``Y``, ``GX``, ``GY``, ``a``, ``t``) in place,
    and keeping them in one loop avoids copying ``n x K`` arrays through helper calls
    on every iteration.

    Args:
        gram: symmetric positive semi-definite ``n x n`` matrix ``G``.
        rhs: ``c``, shape ``(n,)`` or ``(n, K)`` for ``K`` problems sharing ``G``.
        lower: lower bound of every coordinate.
        upper: upper bound of every coordinate.
        x0: starting point, default the box centre.
        settings: the tolerance, iteration limit, seed and vertex test
            (:class:`FistaSettings`; default ``FistaSettings()``).

    Returns:
        a :class:`BoxLSResult` with ``x`` of shape ``(n, K)``.
    """
    G = np.asarray(gram, dtype=np.float64)
    C = np.asarray(rhs, dtype=np.float64)
    if G.ndim != 2 or G.shape[0] != G.shape[1]:
        raise CensusDPError(f"gram must be a square matrix; got shape {G.shape}")
    n = G.shape[0]
    if C.ndim == 1:
        C = C[:, None]
    if C.shape[0] != n:
        raise CensusDPError(f"rhs must have {n} rows to match gram; got shape {C.shape}")
    if not upper > lower:
        raise CensusDPError(f"upper must exceed lower; got lower={lower}, upper={upper}")
    settings = settings or FistaSettings()
    tol, max_iter = settings.tol, settings.max_iter
    k = C.shape[1]
    lo, hi = float(lower), float(upper)
    if x0 is None:
        X = np.full((n, k), 0.5 * (lo + hi))
    else:
        X = np.clip(
            np.broadcast_to(np.asarray(x0, dtype=np.float64).reshape(n, -1), (n, k)), lo, hi
        ).copy()
    diag = np.maximum(np.diag(G).copy(), np.finfo(float).tiny)[:, None]
    u, lam1, lam2 = _spectral_metric(G, np.random.default_rng(settings.seed))
    if lam1 <= 0.0:
        # G == 0: nothing is measured; every point is optimal.
        return BoxLSResult(X, 0, np.ones(k, dtype=bool), np.zeros(k))
    a0 = max(1.05 * lam2, 1e-12 * lam1)
    a = np.full(k, a0)
    uc = u[:, None]

    mid = 0.5 * (lo + hi)
    vertex_ok = np.zeros(k, dtype=bool)
    vertex_x = np.zeros((n, k))
    vertex_crit = np.full(k, np.inf)
    GX = G @ X
    Y, GY = X.copy(), GX.copy()
    t = np.ones(k)
    s = np.zeros(k)
    crit = np.max(np.abs(_projected_gradient(X, GX - C, lo, hi)) / diag, axis=0)
    if np.all(crit <= tol):
        return BoxLSResult(X, 0, np.ones(k, dtype=bool), crit)
    for it in range(1, max_iter + 1):
        grad = GY - C
        # z = Y - M^{-1} grad with M^{-1} = (I - b/(a+b) u u') / a, b = lam1 - a.
        b = np.maximum(lam1 - a, 0.0)
        ug = uc.T @ grad
        z = Y - (grad - (b / (a + b)) * (uc * ug)) / a
        Xn, s = _metric_prox(z, u, b / a, lo, hi, s)
        GXn = G @ Xn
        delta = Xn - Y
        curv = (delta * (GXn - GY)).sum(axis=0)
        model = a * (delta * delta).sum(axis=0) + b * ((uc.T @ delta).ravel() ** 2)
        bad = curv > model * (1.0 + 1e-10) + _rounding(delta, GXn, GY)
        while np.any(bad):
            # Backtrack: the bulk bound ``a`` was too small for these columns.
            cols = np.flatnonzero(bad)
            a[cols] *= 2.0
            bb = np.maximum(lam1 - a[cols], 0.0)
            gc = grad[:, cols]
            zc = Y[:, cols] - (gc - (bb / (a[cols] + bb)) * (uc * (uc.T @ gc))) / a[cols]
            xc, s[cols] = _metric_prox(zc, u, bb / a[cols], lo, hi, s[cols])
            Xn[:, cols] = xc
            GXn[:, cols] = G @ xc
            dc = xc - Y[:, cols]
            curv_c = (dc * (GXn[:, cols] - GY[:, cols])).sum(axis=0)
            model_c = a[cols] * (dc * dc).sum(axis=0) + bb * ((uc.T @ dc).ravel() ** 2)
            bad = np.zeros(k, dtype=bool)
            bad[cols] = curv_c > model_c * (1.0 + 1e-10) + _rounding(dc, GXn[:, cols], GY[:, cols])
            if np.any(a > 4.0 * lam1):
                raise InternalError("backtracking exceeded the spectral bound of the Gram matrix")
        g = GXn - C
        crit = np.max(np.abs(_projected_gradient(Xn, g, lo, hi)) / diag, axis=0)
        if it % settings.vertex_check_every == 0:
            # Vertex certificate: if the point rounded to the nearest bounds satisfies
            # the same KKT test, it is an exact minimiser (e.g. noiseless recovery,
            # where the optimum is the secret itself); take it.
            todo = np.flatnonzero(~vertex_ok & (crit > tol))
            if todo.size:
                R = np.where(Xn[:, todo] >= mid, hi, lo)
                crit_r = np.max(
                    np.abs(_projected_gradient(R, G @ R - C[:, todo], lo, hi)) / diag, axis=0
                )
                hit = crit_r <= tol
                vertex_ok[todo[hit]] = True
                vertex_x[:, todo[hit]] = R[:, hit]
                vertex_crit[todo[hit]] = crit_r[hit]
        done = vertex_ok | (crit <= tol)
        if np.all(done):
            out = np.where(vertex_ok & (crit > tol), vertex_x, Xn)
            return BoxLSResult(out, it, done, np.where(vertex_ok & (crit > tol), vertex_crit, crit))
        # Gradient-mapping restart test in the metric M: (Y - Xn)' M (Xn - X) > 0.
        step = Y - Xn
        move = Xn - X
        b = np.maximum(lam1 - a, 0.0)
        restart = (
            a * (step * move).sum(axis=0) + b * (uc.T @ step).ravel() * (uc.T @ move).ravel()
        ) > 0
        tn = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        beta = np.where(restart, 0.0, (t - 1.0) / tn)
        tn = np.where(restart, 1.0, tn)
        Y = Xn + beta * move
        GY = GXn + beta * (GXn - GX)
        X, GX, t = Xn, GXn, tn
    out = np.where(vertex_ok & (crit > tol), vertex_x, X)
    return BoxLSResult(
        out,
        max_iter,
        vertex_ok | (crit <= tol),
        np.where(vertex_ok & (crit > tol), vertex_crit, crit),
    )


def lsq_linear_solve(
    matrix: np.ndarray, rhs: np.ndarray, *, lower: float = 0.0, upper: float = 1.0
) -> BoxLSResult:
    """Solve ``min ||Q x - b||^2, lower <= x <= upper`` with ``scipy.optimize.lsq_linear`` defaults.

    Args:
        matrix: the query matrix ``Q`` (``m x n``).
        rhs: ``b``, shape ``(m,)`` or ``(m, K)``.
        lower: lower bound of every coordinate.
        upper: upper bound of every coordinate.
    """
    Q = np.asarray(matrix, dtype=np.float64)
    B = np.asarray(rhs, dtype=np.float64)
    if B.ndim == 1:
        B = B[:, None]
    n = Q.shape[1]
    out = np.empty((n, B.shape[1]))
    status = np.empty(B.shape[1], dtype=bool)
    iters = 0
    for j in range(B.shape[1]):
        res = lsq_linear(Q, B[:, j], bounds=(lower, upper))
        out[:, j] = res.x
        status[j] = res.status > 0
        iters += int(res.nit)
    return BoxLSResult(out, iters, status, np.where(status, 0.0, np.inf))


def lp_solve(
    matrix: np.ndarray,
    rhs: np.ndarray,
    *,
    objective: Literal["linf", "l1"] = "linf",
    lower: float = 0.0,
    upper: float = 1.0,
) -> BoxLSResult:
    """Dinur & Nissim's linear program with scipy's HiGHS (JASON (JSR-19-2F) sec. 4.2).

    ``linf``: minimise ``E`` subject to ``-E <= Q x - b <= E`` and ``lower <= x <= upper``,
    i.e. the smallest perturbation bound ``E`` for which DN's feasibility LP ("find x
    in [0,1]^n with |q.x - A(q)| <= E for every query") is feasible. ``l1``: minimise
    ``sum_q |q.x - A(q)|`` (the maximum-likelihood fit under Laplace noise).

    Args:
        matrix: the query matrix ``Q`` (``m x n``).
        rhs: ``b``, shape ``(m,)`` or ``(m, K)``.
        objective: ``"linf"`` (Dinur-Nissim) or ``"l1"``.
        lower: lower bound of every coordinate.
        upper: upper bound of every coordinate.
    """
    if objective not in ("linf", "l1"):
        raise CensusDPError(f"objective must be 'linf' or 'l1'; got {objective!r}")
    Q = sp.csr_matrix(np.asarray(matrix, dtype=np.float64))
    B = np.asarray(rhs, dtype=np.float64)
    if B.ndim == 1:
        B = B[:, None]
    m, n = Q.shape
    nt = 1 if objective == "linf" else m
    ones_t = sp.csr_matrix(np.ones((m, 1))) if nt == 1 else sp.identity(m, format="csr")
    a_ub = sp.vstack([sp.hstack([Q, -ones_t]), sp.hstack([-Q, -ones_t])], format="csr")
    cost = np.concatenate([np.zeros(n), np.ones(nt)])
    bounds = [(lower, upper)] * n + [(0.0, None)] * nt
    out = np.empty((n, B.shape[1]))
    status = np.empty(B.shape[1], dtype=bool)
    iters = 0
    for j in range(B.shape[1]):
        res = linprog(
            cost, A_ub=a_ub, b_ub=np.concatenate([B[:, j], -B[:, j]]), bounds=bounds, method="highs"
        )
        if res.x is None:
            raise InternalError(f"HiGHS returned no solution for a feasible LP: {res.message}")
        out[:, j] = res.x[:n]
        status[j] = res.status == 0
        iters += int(getattr(res, "nit", 0) or 0)
    return BoxLSResult(np.clip(out, lower, upper), iters, status, np.where(status, 0.0, np.inf))
