"""Expected error of the matrix mechanism and the SVD lower bound (numerics only).

The matrix mechanism (Li, Miklau, Hay, McGregor & Rastogi 2015, "The matrix
mechanism: optimizing linear counting queries under differential privacy", VLDB J.
24(6), Prop. 4) measures ``y = A x + sens(A) z`` with i.i.d. noise ``z`` of variance
``sigma^2`` and answers the workload by least squares, ``W A^+ y``. Its expected total
squared error is

    TSE(W, A) = sigma^2 sens(A)^2 ||W A^+||_F^2 = sigma^2 sens(A)^2 tr(W^T W (A^T A)^+),

(Abowd & Schmutte, appendix E eq. E-27, give the same accuracy with ``sigma_e^2`` and
``Delta A``), valid when ``A`` supports ``W`` (every workload query is a linear
combination of strategy queries: ``W A^+ A = W``). ``sens(A)`` is the largest column
L2 norm under zCDP / Gaussian noise and the largest column L1 norm under pure DP /
Laplace or geometric noise (Abowd & Schmutte, appendix C, Thm. 3; Li et al. 2015,
Prop. 4). Everything here is in units of ``sigma^2 = 1`` with the
strategy rescaled to sensitivity 1 (``TSE`` does not change when ``A`` is scaled).

The SVD bound (Li & Miklau 2013, "Optimal error of query sets under the
differentially-private matrix mechanism", ICDT, Thm. 3): for every ``A`` supporting
``W``, ``||A||_{1->2}^2 ||W A^+||_F^2 >= (sum_i lambda_i)^2 / n`` where ``lambda_i`` are
the singular values of ``W`` and ``n`` its number of columns.

Structured evaluation, never forming ``W``:

* Kronecker strategy, union-of-Kronecker workload: ``(A_1 (x) ... (x) A_d)^+`` is the
  Kronecker product of the ``A_i^+``, so ``||W A^+||_F^2 = sum_t w_t^2 prod_i
  tr(F_ti^T F_ti (A_i^T A_i)^+)`` (McKenna et al. 2018, Thm. 6).
* Marginals: the Gram matrix of marginal ``K`` (kept attributes ``K``) is
  ``(x)_i (I if i in K else J)``. ``I`` and the all-ones ``J`` share eigenvectors (the
  constant vector, eigenvalue ``n_i`` for ``J``; its ``n_i - 1``-dimensional complement,
  eigenvalue 0), so every marginal Gram is diagonal in the same basis: on the
  eigenspace ``S`` (attributes whose factor is the constant vector), of dimension
  ``prod_{i not in S} (n_i - 1)``, the Gram of marginal ``K`` has eigenvalue
  ``prod_{i not in K} n_i`` if every summed-out attribute is in ``S``, else 0. Errors
  and singular values of weighted marginals are then sums over the ``2^d`` eigenspaces
  (the structure McKenna et al. 2018 sec. 6 exploit with their marginals algebra).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg

from censusdp.design._errors import DesignError
from censusdp.design._matrices import (
    MAX_DENSE_N,
    EigenStrategy,
    Factor,
    KronStrategy,
    MarginalsStrategy,
    Workload,
)
from censusdp.errors import InternalError

__all__ = [
    "gram_pinv",
    "marginal_eigen",
    "sensitivity",
    "squared_error",
    "svd_singular_sum",
    "workload_rank",
    "workload_sensitivity",
]

_SUPPORT_TOL = 1e-8


def gram_pinv(gram: np.ndarray) -> tuple[np.ndarray, bool]:
    """``(A^T A)^+`` and whether ``A^T A`` is invertible.

    Cholesky when the Gram matrix is positive definite; otherwise an eigenvalue
    pseudo-inverse, cutting eigenvalues below ``n * eps * max eigenvalue``.
    """
    n = gram.shape[0]
    try:
        factor = scipy.linalg.cho_factor(gram, lower=True, check_finite=False)
        inv = scipy.linalg.cho_solve(factor, np.eye(n), check_finite=False)
        if np.all(np.isfinite(inv)):
            return (inv + inv.T) / 2, True
    except np.linalg.LinAlgError:
        pass
    vals, vecs = np.linalg.eigh(gram)
    cut = n * np.finfo(float).eps * max(float(vals.max()), 0.0)
    keep = vals > cut
    inv = (vecs[:, keep] / vals[keep]) @ vecs[:, keep].T
    return inv, bool(keep.all())


def sensitivity(strategy: KronStrategy | MarginalsStrategy | EigenStrategy, norm: int) -> float:
    """Largest column L1 (``norm=1``) or L2 (``norm=2``) norm of the strategy."""
    return strategy.column_norm(norm)


def marginal_eigen(domain: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The common eigen-decomposition of all marginal Gram matrices on ``domain``.

    Returns:
        ``(table, dims)``: ``table[K, S]`` is the eigenvalue of marginal ``K``'s Gram
        matrix on eigenspace ``S`` (both bit masks over attributes), ``dims[S]`` the
        dimension of eigenspace ``S``, ``prod_{i not in S} (n_i - 1)``.
    """
    d = len(domain)
    if d > 12:
        raise DesignError(f"marginals on {d} attributes: at most 12 are supported")
    size = 2**d
    full = size - 1
    keys = np.arange(size)
    summed = full & ~keys  # attributes summed out by marginal K
    scale = np.array(
        [math.prod(n for i, n in enumerate(domain) if s >> i & 1) for s in summed], dtype=float
    )
    # eigenvalue is scale[K] when summed[K] is a subset of S
    table = np.where((summed[:, None] & ~keys[None, :]) == 0, scale[:, None], 0.0)
    dims = np.array(
        [math.prod(n - 1 for i, n in enumerate(domain) if not s >> i & 1) for s in keys],
        dtype=float,
    )
    return table, dims


def _marginal_workload_eigs(workload: Workload) -> tuple[np.ndarray, np.ndarray]:
    table, dims = marginal_eigen(workload.domain)
    if workload.marginal_keys is None:
        raise InternalError("marginal eigenvalues of a workload that is not marginals")
    weights = np.array([w for w, _ in workload.terms]) ** 2
    lam = weights @ table[list(workload.marginal_keys)]
    return lam, dims


def _factor_trace(factor: Factor, pinv: np.ndarray, proj: np.ndarray | None, what: str) -> float:
    """``tr(F^T F P)``, after checking that the strategy supports ``F``."""
    g = factor.gram
    if proj is not None:
        resid = g - g @ proj
        scale = max(float(np.abs(g).max()), 1.0)
        if float(np.abs(resid).max()) > _SUPPORT_TOL * scale * g.shape[0]:
            raise DesignError(
                f"strategy {what} does not support the workload: some workload query is "
                "not a linear combination of strategy queries"
            )
    return float(np.sum(g * pinv))


def _eigen_error(workload: Workload, strategy: EigenStrategy) -> float:
    if not workload.is_marginals or tuple(strategy.domain) != workload.domain:
        raise DesignError(
            f"an eigenspace strategy answers marginals of its own domain {strategy.domain}; "
            f"{workload.name!r} is not one"
        )
    lam_w, dims = _marginal_workload_eigs(workload)
    need = (dims > 0) & (lam_w > 0)
    if np.any(strategy.mu[need] <= _SUPPORT_TOL * max(float(strategy.mu.max()), 1e-300)):
        raise DesignError(f"strategy {strategy.name} does not support the workload")
    return float(np.sum(dims[need] * lam_w[need] / strategy.mu[need]))


def squared_error(
    workload: Workload, strategy: KronStrategy | MarginalsStrategy | EigenStrategy
) -> float:
    """``||W A^+||_F^2``: total squared error with unit-variance noise, before sensitivity.

    Raises:
        DesignError: when the strategy does not support the workload.
    """
    if isinstance(strategy, EigenStrategy):
        return _eigen_error(workload, strategy)
    if isinstance(strategy, MarginalsStrategy):
        if not workload.is_marginals:
            raise DesignError(
                "a marginals strategy can only answer a marginals workload; "
                f"{workload.name!r} is not one"
            )
        if tuple(strategy.domain) != workload.domain:
            raise DesignError(
                f"strategy domain {strategy.domain} differs from workload domain {workload.domain}"
            )
        lam_w, dims = _marginal_workload_eigs(workload)
        table, _ = marginal_eigen(workload.domain)
        lam_a = np.square(strategy.theta) @ table
        need = (dims > 0) & (lam_w > 0)
        tol = _SUPPORT_TOL * max(float(lam_a.max()), 1e-300)
        if np.any(lam_a[need] <= tol):
            raise DesignError(
                f"strategy {strategy.name} does not support the workload: some workload "
                "marginal is not a linear combination of strategy marginals"
            )
        return float(np.sum(dims[need] * lam_w[need] / lam_a[need]))
    if len(strategy.factors) != len(workload.domain):
        raise DesignError(
            f"strategy has {len(strategy.factors)} factors for a {len(workload.domain)}-"
            "attribute workload"
        )
    pinvs = []
    for i, (a, g) in enumerate(zip(strategy.factors, strategy.grams(), strict=True)):
        if a.shape[1] != workload.domain[i]:
            raise DesignError(
                f"strategy factor {i} has {a.shape[1]} columns; attribute {i} has "
                f"{workload.domain[i]} cells"
            )
        pinv, invertible = gram_pinv(g)
        pinvs.append((pinv, None if invertible else pinv @ g))
    total = 0.0
    cache: dict[tuple[int, int], float] = {}
    for weight, factors in workload.terms:
        prod = weight**2
        for i, f in enumerate(factors):
            key = (i, id(f))
            if key not in cache:
                cache[key] = _factor_trace(f, pinvs[i][0], pinvs[i][1], strategy.name)
            prod *= cache[key]
        total += prod
    return total


def _kron_vectors(vectors: list[np.ndarray]) -> np.ndarray:
    out = np.ones(1)
    for v in vectors:
        out = np.multiply.outer(out, v).ravel()
    return out


def workload_sensitivity(workload: Workload, norm: int) -> float:
    """Largest column L1 / L2 norm of ``W`` itself (the "workload" strategy).

    A column of ``w (x)_i F_i`` is the Kronecker product of the factors' columns, so a
    column's L1 norm is ``sum_t w_t prod_i ||F_ti[:, j_i]||_1`` (entries of our factors
    are non-negative, so terms add without cancellation) and its squared L2 norm
    ``sum_t w_t^2 prod_i ||F_ti[:, j_i]||_2^2``.
    """
    if workload.n > 50_000_000:
        raise DesignError(f"domain of {workload.n} cells is too large for this computation")
    acc = np.zeros(workload.n)
    for weight, factors in workload.terms:
        if norm == 1:
            acc += weight * _kron_vectors([f.col_l1 for f in factors])
        else:
            acc += weight**2 * _kron_vectors([f.col_l2_sq for f in factors])
    top = float(acc.max())
    return top if norm == 1 else math.sqrt(top)


def _dense_gram(workload: Workload) -> np.ndarray:
    if workload.n > MAX_DENSE_N:
        raise DesignError(
            f"workload {workload.name!r} is a union of Kronecker products on {workload.n} "
            f"cells; its singular values need the dense Gram matrix (at most {MAX_DENSE_N} "
            "cells)"
        )
    g = np.zeros((workload.n, workload.n))
    for weight, factors in workload.terms:
        k = np.ones((1, 1))
        for f in factors:
            k = np.kron(k, f.gram)
        g += weight**2 * k
    return g


def svd_singular_sum(workload: Workload) -> float:
    """Sum of the singular values of ``W``: ``sum_i sqrt(eig_i(W^T W))``."""
    if workload.is_marginals:
        lam, dims = _marginal_workload_eigs(workload)
        return float(np.sum(dims * np.sqrt(np.clip(lam, 0.0, None))))
    if len(workload.terms) == 1:
        weight, factors = workload.terms[0]
        out = abs(weight)
        for f in factors:
            out *= float(np.sqrt(np.clip(np.linalg.eigvalsh(f.gram), 0.0, None)).sum())
        return out
    eig = np.linalg.eigvalsh(_dense_gram(workload))
    return float(np.sqrt(np.clip(eig, 0.0, None)).sum())


def workload_rank(workload: Workload) -> int:
    """``rank(W)``, which is ``||W W^+||_F^2``."""
    if workload.is_marginals:
        lam, dims = _marginal_workload_eigs(workload)
        tol = 1e-9 * max(float(lam.max()), 1e-300)
        return int(round(float(dims[lam > tol].sum())))
    if len(workload.terms) == 1:
        return math.prod(f.rank for f in workload.terms[0][1])
    return int(np.linalg.matrix_rank(_dense_gram(workload), hermitian=True))
