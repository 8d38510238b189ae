"""The optimal L2 (zCDP) strategy for one Gram matrix, through its concave dual.

Under L2 sensitivity the best strategy ``A`` for a workload Gram ``G = W^T W`` is one
whose Gram ``X = A^T A`` solves

    min tr(G X^{-1})  subject to  X_jj <= 1,  X positive definite,

a convex problem in ``X`` (Yuan, Yang, Zhang & Hao 2016, "Convex optimization for linear
query processing under approximate differential privacy", KDD). Rather than searching
over the ``n^2`` entries of ``A`` (or of ``X``), censusdp solves its Lagrange dual, which
has one variable per cell. For multipliers ``lambda > 0`` and ``Y = diag(sqrt(lambda))``
the Lagrangian ``tr(G X^{-1}) + sum_j lambda_j (X_jj - 1)`` is minimised over ``X`` at

    X(lambda) = Y^{-1} (Y G Y)^{1/2} Y^{-1},

(set its derivative ``-X^{-1} G X^{-1} + diag(lambda)`` to zero), with value

    g(lambda) = 2 tr((Y G Y)^{1/2}) - sum_j lambda_j.

``g`` is concave (a minimum of functions linear in ``lambda``), every ``g(lambda)`` is a
lower bound on the error of every L2-sensitivity-1 strategy (weak duality), and because
``X = I / 2`` is strictly feasible (Slater) the maximum equals the optimal error. Its
gradient is ``dg / dlambda_j = X(lambda)_jj - 1``: with ``Y G Y = V S V^T``,
``lambda_j X_jj = (V S^{1/2} V^T)_jj``, so in ``u = log lambda``

    dg / du_j = (V S^{1/2} V^T)_jj - lambda_j,

one symmetric eigendecomposition per evaluation (``O(n^3)``) and no other ``n x n``
product but the primal check below. L-BFGS maximises ``g`` over ``u``.

The strategy at ``lambda`` is ``A = S^{1/4} V^T Y^{-1}`` (``A^T A = X(lambda)``; rows with
``S_kk = 0`` dropped, which keeps ``A``'s row space that of ``W``), columns rescaled to
L2 norm 1. Its error, ``sum_k S_kk^{-1/2} (Z^T G Z)_kk`` with ``Z = Y D^{1/2} V`` and ``D =
diag(X(lambda))``, is computed at every evaluation with one more ``n^3`` product; the
search stops when it is within ``gap`` (relative) of the best ``g`` seen: a certificate
that no L2 strategy does better by more than that. At uniform ``lambda`` the strategy is
the eigen-design and ``max_c g(c 1)`` the square of the SVD bound times ``m`` (Li &
Miklau 2013, Thm. 3): the search starts where the SVD bound is proved and climbs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

__all__ = ["L2Optimum", "dual_value", "eigen_strategy", "l2_optimum"]


@dataclass(frozen=True)
class L2Optimum:
    """The best strategy found for one Gram matrix and its dual certificate.

    Attributes:
        strategy: ``A`` (rows x n), every column of L2 norm 1.
        error: ``tr(G (A^T A)^+)`` as computed from the eigendecomposition.
        lower_bound: the best dual value ``g(lambda)``: no L2-sensitivity-1 strategy
            has a smaller ``tr(G (A^T A)^+)``.
        log_multipliers: ``u = log lambda`` of the strategy (a warm start for a
            neighbouring problem), in the units of ``G``.
        evaluations: dual evaluations (eigendecompositions).
    """

    strategy: np.ndarray
    error: float
    lower_bound: float
    log_multipliers: np.ndarray
    evaluations: int


class _Converged(Exception):
    """Raised inside the objective to stop L-BFGS once the gap is closed."""


def dual_value(gram: np.ndarray, u: np.ndarray) -> tuple[float, np.ndarray]:
    """``g(exp(u))`` and its gradient in ``u`` (see the module docstring)."""
    g, grad, _ = _dual(gram, u)
    return g, grad


def _zero_cut(s: np.ndarray) -> float:
    return s.size * np.finfo(float).eps * max(float(np.abs(s).max()), 1e-300)


def _dual(gram: np.ndarray, u: np.ndarray) -> tuple[float, np.ndarray, tuple]:
    lam = np.exp(u)
    y = np.sqrt(lam)
    s, v = np.linalg.eigh(y[:, None] * gram * y[None, :])
    # eigenvalues at rounding level are zeros: their square roots (1e-8 for 1e-16) would
    # otherwise lift g above the optimum of a singular G
    s = np.where(s > _zero_cut(s), s, 0.0)
    r = np.sqrt(s)
    diag_sqrt = np.square(v) @ r  # diag(V S^{1/2} V^T) = lambda_j X_jj
    g = 2.0 * float(r.sum()) - float(lam.sum())
    return g, diag_sqrt - lam, (s, v, y, diag_sqrt / lam)


def _primal(gram: np.ndarray, parts: tuple) -> tuple[float, np.ndarray]:
    """Error and unit-norm strategy ``A = S^{1/4} V^T Y^{-1} D^{-1/2}`` at one ``lambda``."""
    s, v, y, x_diag = parts
    keep = s > 0.0
    vk, sk = v[:, keep], s[keep]
    q = y * np.sqrt(x_diag)
    gz = (q[:, None] * gram * q[None, :]) @ vk
    error = float(np.sum(np.sum(vk * gz, axis=0) / np.sqrt(sk)))
    # a cell in no query has X_jj = 0: its column is left at zero (nothing to measure)
    a = (np.sqrt(np.sqrt(sk))[:, None] * vk.T) / np.where(q > 0, q, np.inf)[None, :]
    return error, a


def eigen_strategy(gram: np.ndarray) -> np.ndarray:
    """The strategy at uniform multipliers, columns of norm 1: the eigen-design
    ``Sigma^{1/2} V^T`` of Li & Miklau (2013) for ``G = V Sigma^2 V^T``."""
    scale = max(float(np.trace(gram)) / gram.shape[0], 1e-300)
    g_unit = gram / scale
    _, _, parts = _dual(g_unit, np.zeros(gram.shape[0]))
    return _primal(g_unit, parts)[1]


def l2_optimum(
    gram: np.ndarray,
    u0: np.ndarray | None = None,
    *,
    gap: float = 1e-9,
    maxiter: int = 1000,
) -> L2Optimum:
    """Maximise the dual ``g`` from ``u0`` (default: uniform multipliers, where ``g``
    is the SVD bound) until the strategy's error is within ``gap`` (relative) of the
    dual, L-BFGS stops, or ``maxiter`` iterations.

    ``G`` is rescaled to mean diagonal 1 inside (``lambda`` scales with ``G``), so
    the tolerances mean the same at every size; everything returned is in ``G``'s units.
    """
    n = gram.shape[0]
    scale = max(float(np.trace(gram)) / n, 1e-300)
    g_unit = gram / scale
    u_start = np.zeros(n) if u0 is None else np.asarray(u0, dtype=float) - np.log(scale)
    best: dict = {"dual": -np.inf, "error": np.inf, "a": None, "u": u_start, "evals": 0}

    def fun(u: np.ndarray) -> tuple[float, np.ndarray]:
        g, grad, parts = _dual(g_unit, u)
        best["evals"] += 1
        best["dual"] = max(best["dual"], g)
        error, a = _primal(g_unit, parts)
        if error < best["error"]:
            best.update(error=error, a=a, u=u.copy())
        if best["error"] - best["dual"] <= gap * best["error"]:
            raise _Converged
        return -g / n, -grad / n

    try:
        minimize(
            fun,
            u_start,
            jac=True,
            method="L-BFGS-B",
            options={"maxiter": maxiter, "maxcor": 20, "ftol": 1e-15, "gtol": 1e-12},
        )
    except _Converged:
        pass
    return L2Optimum(
        strategy=best["a"],
        error=best["error"] * scale,
        lower_bound=best["dual"] * scale,
        log_multipliers=best["u"] + np.log(scale),
        evaluations=best["evals"],
    )
