"""Strategy optimisation in the style of HDMM (numerics only, no I/O).

Written for censusdp from the method of McKenna, Miklau, Hay & Machanavajjhala (2018),
"Optimizing error of high-dimensional statistical queries under differential
privacy", PVLDB 11(10):

* ``p``-identity strategies (sec. 5.1): ``A(Theta) = [I; Theta] D``, ``Theta >= 0`` of
  size ``p x n``, ``D`` the diagonal that gives every column norm 1 (L1 for pure DP,
  ``D_jj = 1 / (1 + sum_i Theta_ij)``; L2 for zCDP, ``D_jj = 1 / sqrt(1 + sum_i
  Theta_ij^2)``). The objective is ``f(Theta) = ||W A^+||_F^2 = tr(G' M^{-1})`` with
  ``G = W^T W``, ``s = 1 / diag(D)``, ``G' = diag(s) G diag(s)`` and ``M = I + Theta^T
  Theta``. With ``K = I_p + Theta Theta^T`` (Woodbury) ``M^{-1} = I - Theta^T K^{-1}
  Theta`` and ``Theta M^{-1} = K^{-1} Theta``, so

      f = tr(G') - <K^{-1} Theta, Theta G'>,
      grad f = -2 K^{-1} Theta G' M^{-1} + 2 (d s / d Theta) . v,
      v_j = (G' M^{-1})_jj / s_j,

  with ``d s_j / d Theta_ij = 1`` (L1) or ``Theta_ij / s_j`` (L2). ``G'`` is never
  formed: one ``n x 2p`` product ``G [(s Theta)^T, (s K^{-1} Theta)^T]`` gives ``G'
  Theta^T`` and ``K^{-1} Theta G'``, and ``K^{-1} Theta G' M^{-1} = K^{-1} Theta G' -
  (K^{-1} Theta G' Theta^T) K^{-1} Theta``: ``4 n^2 p`` flops per evaluation.
  Minimised with L-BFGS-B (bounds ``Theta >= 0``) from several random starts drawn
  from the caller's seeded generator.
* The L2 optimum for zCDP: under L2 sensitivity the error is convex in ``A^T A`` (Yuan
  et al. 2016); :mod:`censusdp.design._l2dual` solves its Lagrange dual (one variable per
  cell, one eigendecomposition per evaluation) and returns the strategy with a
  certificate (a lower bound within ``1e-9`` of its error for one-term workloads).
* Kronecker strategies for unions of Kronecker products (sec. 6.2, OPT_x): ``A = A_1
  (x) ... (x) A_d`` with each ``A_i`` p-identity (or L2-optimal); the error ``sum_t w_t^2 prod_i e_ti``
  is linear in each attribute's ``tr(G_ti (A_i^T A_i)^{-1})``, so block coordinate
  descent solves, for one attribute at a time, a p-identity (or L2) problem on the
  weighted Gram ``sum_t c_t G_ti``, ``c_t = w_t^2 prod_{l != i} e_tl``.
* The L2 optimum of a marginals workload (:func:`marginals_l2_optimum`): every cell is
  alike, so the SVD bound is optimal, reached by the eigenspace strategy
  ``sum_S sqrt(lambda_W(S)) P_S`` (:class:`~censusdp.design._matrices.EigenStrategy`).
* Marginals strategies (sec. 6.3, OPT_M): weights ``theta_K`` on all ``2^d``
  marginals; in the common eigenbasis of marginal Gram matrices the error is
  ``sum_S dim(S) lambda_W(S) / sum_K theta_K^2 c_K(S)`` times ``(sum theta)^2`` (L1) or
  ``sum theta^2`` (L2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from censusdp.design._accuracy import gram_pinv, marginal_eigen
from censusdp.design._l2dual import eigen_strategy, l2_optimum
from censusdp.design._matrices import EigenStrategy, KronStrategy, MarginalsStrategy, Workload
from censusdp.errors import InternalError
from censusdp.progress import Progress

__all__ = [
    "OptimizerResult",
    "default_p",
    "marginals_l2_optimum",
    "optimize_kron",
    "optimize_marginals",
    "pidentity_matrix",
    "pidentity_objective",
]


@dataclass(frozen=True)
class OptimizerResult:
    """An optimised strategy and how it was found.

    Attributes:
        strategy: the strategy (columns normalised to sensitivity 1).
        objective: its ``sens(A)^2 ||W A^+||_F^2`` as the optimiser computed it.
        method: ``"kron-pidentity"``, ``"kron-l2"``, ``"marginals"`` or
            ``"marginals-eigen"``.
        restarts: number of starts run.
        evaluations: objective evaluations over all starts.
        restart_objectives: the final objective of every start.
        lower_bound: a proved lower bound on the objective of every strategy (the L2
            dual value, one-term workloads under zCDP), else ``None``.
    """

    strategy: KronStrategy | MarginalsStrategy | EigenStrategy
    objective: float
    method: str
    restarts: int
    evaluations: int
    restart_objectives: tuple[float, ...]
    lower_bound: float | None = None


def default_p(n: int, norm: int) -> int:
    """Rows of ``Theta`` by default: ``n / 16`` for pure DP (the HDMM default for 1-D
    range workloads) but at least 2 (all-range, n = 32: p = 1 gives rootmse 3.196, p = 2
    3.181), and ``n / 4`` for zCDP, where p-identity needs more rows to get close to the
    SVD bound (all-range, n = 256: p = 16 / 32 / 64 give 3.27 / 3.04 / 2.93 against a
    bound of 2.88); at most 64 (an evaluation costs ``O(n^2 p)``) and ``n``, at least 1."""
    p = max(2, n // 16) if norm == 1 else n // 4
    return max(1, min(n, 64, p))


def _scales(theta: np.ndarray, norm: int) -> np.ndarray:
    if norm == 1:
        return 1.0 + theta.sum(axis=0)
    return np.sqrt(1.0 + np.square(theta).sum(axis=0))


def pidentity_objective(
    x: np.ndarray, gram: np.ndarray, p: int, norm: int
) -> tuple[float, np.ndarray]:
    """``f(Theta) = ||W A(Theta)^+||_F^2`` and its gradient (see the module docstring).

    Args:
        x: ``Theta`` flattened (``p * n`` values).
        gram: ``W^T W`` (n x n).
        p: rows of ``Theta``.
        norm: 1 (L1 column normalisation) or 2 (L2).
    """
    n = gram.shape[0]
    theta = x.reshape(p, n)
    s = _scales(theta, norm)
    k = np.eye(p) + theta @ theta.T
    k_theta = np.linalg.solve(k, theta)  # K^{-1} Theta = Theta M^{-1}
    # one n x 2p product with G gives G' Theta^T and G' (K^{-1} Theta)^T; G' is never formed
    prod = gram @ np.vstack([theta * s, k_theta * s]).T
    g_theta = s[:, None] * prod[:, :p]  # G' Theta^T, n x p
    kg = (s[:, None] * prod[:, p:]).T  # K^{-1} Theta G', p x n
    f = float(np.square(s) @ np.diag(gram) - np.sum(k_theta * g_theta.T))
    grad = -2.0 * (kg - (kg @ theta.T) @ k_theta)  # -2 K^{-1} Theta G' M^{-1}
    v = (np.square(s) * np.diag(gram) - np.sum(g_theta * k_theta.T, axis=1)) / s
    if norm == 1:
        grad += 2.0 * v[None, :]
    else:
        grad += 2.0 * v[None, :] * theta / s[None, :]
    return f, grad.ravel()


def pidentity_matrix(theta: np.ndarray, norm: int) -> np.ndarray:
    """``[I; Theta] D`` with every column of norm 1 (L1 or L2)."""
    n = theta.shape[1]
    a = np.vstack([np.eye(n), theta])
    return a / _scales(theta, norm)[None, :]


def _minimise_pidentity(
    gram: np.ndarray, theta0: np.ndarray, norm: int, maxiter: int, tight: bool
) -> tuple[np.ndarray, float, int]:
    """L-BFGS-B on ``f(Theta)``, ``Theta >= 0``.

    Loose (``tight=False``): ``f / tr(G)`` with scipy's default tolerances, which stop
    on a relative decrease of ``2.2e-9`` or a projected gradient of ``1e-5``. Tight:
    ``f / f(Theta_0)`` with tolerances near machine precision, which runs several times
    longer and ends in other (often better) local minima of this non-convex problem:
    prefix, n = 128, pure DP: 4.44841 against 4.47637 from the same starts.
    """
    p, n = theta0.shape
    if tight:
        scale = pidentity_objective(theta0.ravel(), gram, p, norm)[0]
        options = {"maxiter": maxiter, "ftol": 1e-13, "gtol": 1e-12}
    else:
        scale = float(np.trace(gram))
        options = {"maxiter": maxiter}
    scale = max(scale, 1e-300)

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        f, g = pidentity_objective(x, gram, p, norm)
        return f / scale, g / scale

    res = minimize(
        fun,
        theta0.ravel(),
        jac=True,
        method="L-BFGS-B",
        bounds=[(0.0, None)] * (p * n),
        options=options,
    )
    theta = np.clip(res.x, 0.0, None).reshape(p, n)
    return theta, pidentity_objective(theta.ravel(), gram, p, norm)[0], int(res.nfev)


class _PIdentity:
    """Block parametrisation ``[I; Theta] D`` (rows of Theta ``p``)."""

    def __init__(self, p: int | None, norm: int) -> None:
        self.p, self.norm = p, norm
        self.tight = False

    def rows(self, n: int) -> int:
        """Rows of Theta for an attribute of ``n`` cells (at most ``n``)."""
        p = self.p if self.p is not None else default_p(n, self.norm)
        return max(1, min(p, n))

    def start(self, n: int, gram: np.ndarray, rng: np.random.Generator, first: bool) -> np.ndarray:
        p = self.rows(n)
        return np.zeros((p, n)) if first else rng.uniform(0.0, 1.0, size=(p, n))

    def matrix(self, theta: np.ndarray) -> np.ndarray:
        return pidentity_matrix(theta, self.norm)

    def solve(self, gram: np.ndarray, theta: np.ndarray, maxiter: int) -> tuple[np.ndarray, int]:
        theta, _, nfev = _minimise_pidentity(gram, theta, self.norm, maxiter, self.tight)
        return theta, nfev


class _L2Dual:
    """Block ``(A, u, c)``: the L2-optimal strategy of the block's Gram found by the dual
    search of :mod:`censusdp.design._l2dual`, its log multipliers ``u`` (the warm start
    of the next solve) and ``c``, its dual bound over its error (at most 1). L2 only."""

    def __init__(self, gap: float) -> None:
        self.gap = gap

    def start(self, n: int, gram: np.ndarray, rng: np.random.Generator, first: bool) -> tuple:
        return (eigen_strategy(gram), None, 0.0)

    def matrix(self, block: tuple) -> np.ndarray:
        return block[0]

    def solve(self, gram: np.ndarray, block: tuple, maxiter: int) -> tuple[tuple, int]:
        opt = l2_optimum(gram, block[1], gap=self.gap, maxiter=maxiter)
        ratio = opt.lower_bound / opt.error if opt.error > 0 else 0.0
        return (opt.strategy, opt.log_multipliers, ratio), opt.evaluations


def _kron_lower_bound(workload: Workload, value: float, blocks: list) -> float | None:
    """A proved lower bound on the L2 error of every strategy for a one-term workload
    ``w^2 (x)_i G_i``: ``value * prod_i c_i`` (``c_i`` the dual bound over the error of
    block ``i``). At multipliers ``lambda_1 (x) ... (x) lambda_d`` the dual of the whole
    problem factorises (``(Y G Y)^{1/2}`` is the Kronecker product of the factors'), and
    its best rescaling is ``prod_i tr((Y_i G_i Y_i)^{1/2})^2 / sum lambda_i``, at least
    ``w^2`` times the product of the factors' dual values: so the Kronecker product of
    the factors' L2 optima is the L2 optimum (2-D all-range, 16 x 16: the dual over all
    256 cells agrees to 1e-10)."""
    if len(workload.terms) != 1:
        return None
    return value * math.prod(b[2] for b in blocks)


def _block_descent(
    workload: Workload,
    param: _PIdentity | _L2Dual,
    blocks: list,
    maxiter: int,
    rounds: int,
) -> tuple[float, list[np.ndarray], int]:
    """Block coordinate descent over attributes from ``blocks``; returns the error
    ``sum_t w_t^2 prod_i tr(G_ti (A_i^T A_i)^{-1})``, the blocks and evaluations."""
    weights2 = np.array([w**2 for w, _ in workload.terms])
    d = len(workload.domain)

    def traces(i: int, block: np.ndarray) -> np.ndarray:
        a = param.matrix(block)
        inv = gram_pinv(a.T @ a)[0]
        return np.array([float(np.sum(f[i].gram * inv)) for _, f in workload.terms])

    e = np.column_stack([traces(i, blk) for i, blk in enumerate(blocks)])
    value = float(weights2 @ np.prod(e, axis=1))
    evaluations = 0
    for _ in range(rounds if d > 1 else 1):
        before = value
        for i in range(d):
            coef = weights2 * np.prod(np.delete(e, i, axis=1), axis=1)
            gram = sum(c * f[i].gram for c, (_, f) in zip(coef, workload.terms, strict=True))
            blocks[i], nfev = param.solve(gram, blocks[i], maxiter)
            evaluations += nfev
            e[:, i] = traces(i, blocks[i])
            value = float(weights2 @ np.prod(e, axis=1))
        if before - value <= 1e-7 * abs(before):
            break
    return value, blocks, evaluations


def _attribute_grams(workload: Workload) -> list[np.ndarray]:
    """Per attribute, ``sum_t w_t^2 G_ti`` (the Gram the first sweep starts from)."""
    out = []
    for i in range(len(workload.domain)):
        out.append(sum(w**2 * f[i].gram for w, f in workload.terms))
    return out


ROUNDS = 10
"""Most block-coordinate sweeps of one Kronecker start."""

L2_GAP = 1e-9
"""Relative duality gap at which the L2 dual search stops (its certificate)."""

_RUNS: tuple[tuple[str, str, bool], ...] = (
    ("loose", "drawn", False),
    ("polish", "loose", True),
    ("tight", "drawn", True),
)
"""How a random p-identity start is run under L1: ``(label, from, tight)``. Loose from the
draw; tight from where loose ended (never worse than loose); tight from the draw, which
often ends in another, better, local minimum (prefix, n = 128: 4.44841 against 4.47637;
see :func:`_minimise_pidentity`)."""


def optimize_kron(
    workload: Workload,
    norm: int,
    rng: np.random.Generator,
    *,
    restarts: int = 4,
    p: int | None = None,
    maxiter: int = 1000,
    parametrization: str = "pidentity",
    progress: Progress = None,
) -> OptimizerResult:
    """OPT_x: a Kronecker product of one optimised strategy per attribute.

    ``parametrization="pidentity"``: each factor is p-identity. The first start is the
    identity strategy (``Theta_i = 0``), so the result is never worse than identity;
    each of the ``restarts`` others draws every ``Theta_i`` uniformly from ``[0, 1)``
    and, under L1, is solved three ways from that draw (:data:`_RUNS`), keeping the best.
    ``parametrization="l2"`` (L2 only): each factor is the L2-optimal strategy for its
    weighted Gram (:func:`~censusdp.design._l2dual.l2_optimum`, the dual search closed to
    :data:`L2_GAP`), one start from the eigen-design; for one attribute this is the L2 optimum
    and ``lower_bound`` certifies it.

    A start runs block coordinate descent (each block a solve warm-started at the
    current factor) for at most :data:`ROUNDS` sweeps, stopping when a sweep improves the
    error by less than ``1e-7`` relative. One sweep is exact for one attribute.
    """
    param: _PIdentity | _L2Dual
    if parametrization == "pidentity":
        param = _PIdentity(p, norm)
        starts = restarts + 1
    elif parametrization == "l2":
        if norm != 2:
            raise ValueError("the l2 parametrisation is for L2 (zCDP) only")
        param = _L2Dual(L2_GAP)
        starts = 1
    else:
        raise ValueError(f"unknown parametrization {parametrization!r}")
    grams = _attribute_grams(workload)
    best: tuple[float, list] | None = None
    finals = []
    evaluations = 0
    for start in range(starts):
        drawn = [
            param.start(n, g, rng, first=start == 0)
            for n, g in zip(workload.domain, grams, strict=True)
        ]
        # under L1 p-identity runs every random start three ways (see _RUNS); the
        # identity start stays where it is (its projected gradient is zero under L1).
        # Under L2 the kron-l2 candidate is the better one
        several = isinstance(param, _PIdentity) and start > 0 and norm == 1
        ends: dict[str, list] = {}
        for label, origin, tight in _RUNS if several else _RUNS[:1]:
            if isinstance(param, _PIdentity):
                param.tight = tight
            blocks = [b.copy() if isinstance(b, np.ndarray) else b for b in ends.get(origin, drawn)]
            value, blocks, nfev = _block_descent(workload, param, blocks, maxiter, ROUNDS)
            ends[label] = blocks
            evaluations += nfev
            finals.append(value)
            if progress is not None:
                progress(
                    f"design: kron-{parametrization} start {start + 1}/{starts} ({label}): "
                    f"||W A+||_F^2 = {value:.6g}"
                )
            if best is None or value < best[0]:
                best = (value, blocks)
    if best is None:
        raise InternalError("optimize_kron ran no start")
    strategy = KronStrategy(
        tuple(param.matrix(b) for b in best[1]), name=f"optimized ({parametrization})"
    )
    bound = _kron_lower_bound(workload, *best) if isinstance(param, _L2Dual) else None
    return OptimizerResult(
        strategy,
        best[0],
        f"kron-{parametrization}",
        starts,
        evaluations,
        tuple(finals),
        bound,
    )


def optimize_marginals(
    workload: Workload,
    norm: int,
    rng: np.random.Generator,
    *,
    restarts: int = 4,
    maxiter: int = 1000,
    progress: Progress = None,
) -> OptimizerResult:
    """OPT_M: non-negative weights on all ``2^d`` marginals.

    The first start is the workload's own marginals (their weights), the second the
    identity (the full table alone); each of the ``restarts`` others (``16 * restarts``
    under L1) draws every weight uniformly from ``[0, 1)``. Under L1 the problem is
    small (``2^d`` weights, a start costs milliseconds) but has many local minima: on
    ``pl94`` the first 16 random starts of seed 0 end at 2.518 or above, the 17th at
    2.470 (the best of 300). Under L2, on ``sum theta^2 = 1``, it is convex in ``theta^2``.
    """
    if not workload.is_marginals or workload.marginal_keys is None:
        raise ValueError("optimize_marginals needs a marginals workload")
    table, dims = marginal_eigen(workload.domain)
    size = table.shape[0]
    w2 = np.zeros(size)
    for (w, _), key in zip(workload.terms, workload.marginal_keys, strict=True):
        w2[key] += w**2
    lam_w = w2 @ table
    need = (dims > 0) & (lam_w > 0)
    c = dims[need] * lam_w[need]
    tab = table[:, need]
    # a ridge proportional to ||theta||^2 keeps the objective finite where a needed
    # eigenvalue vanishes, without breaking its invariance to rescaling theta
    ridge = 1e-12 * float(tab.max())

    def fun(theta: np.ndarray) -> tuple[float, np.ndarray]:
        lam_a = np.square(theta) @ tab + ridge * float(np.square(theta).sum())
        err = float(np.sum(c / lam_a))
        q = c / np.square(lam_a)
        d_err = -2.0 * theta * (tab @ q + ridge * float(q.sum()))
        if norm == 1:
            sens = float(theta.sum())
            return sens**2 * err, 2.0 * sens * err + sens**2 * d_err
        sens2 = float(np.square(theta).sum())
        return sens2 * err, 2.0 * theta * err + sens2 * d_err

    best: tuple[float, np.ndarray] | None = None
    finals = []
    evaluations = 0
    identity = np.zeros(size)
    identity[-1] = 1.0
    starts = (16 if norm == 1 else 1) * restarts + 2
    for start in range(starts):
        if start == 0:
            x0 = np.sqrt(w2)
        elif start == 1:
            x0 = identity
        else:
            x0 = rng.uniform(0.0, 1.0, size=size)
        x0 = x0 / float(np.sqrt(np.square(x0).sum()))
        scale = max(fun(x0)[0], 1e-300)

        def pinned(x: np.ndarray, scale: float = scale) -> tuple[float, np.ndarray]:
            # the error is invariant to rescaling theta; the penalty (||theta||^2 - 1)^2
            # pins the scale so the search cannot drift to theta = 0
            f, g = fun(x)
            gap = float(np.square(x).sum()) - 1.0
            return f / scale + gap**2, g / scale + 4.0 * gap * x

        res = minimize(
            pinned,
            x0,
            jac=True,
            method="L-BFGS-B",
            bounds=[(0.0, None)] * size,
            options={"maxiter": maxiter},
        )
        evaluations += int(res.nfev)
        theta = np.clip(res.x, 0.0, None)
        theta = theta / max(float(theta.max()), 1e-300)
        value = fun(theta)[0]
        finals.append(value)
        if progress is not None:
            progress(f"design: marginals start {start + 1}/{starts}: {value:.6g}")
        if math.isfinite(value) and (best is None or value < best[0]):
            best = (value, theta)
    if best is None:
        raise InternalError("optimize_marginals found no finite start")
    strategy = MarginalsStrategy(workload.domain, best[1], name="optimized (marginals)")
    return OptimizerResult(strategy, best[0], "marginals", starts, evaluations, tuple(finals))


def _marginal_workload_eigenvalues(workload: Workload) -> tuple[np.ndarray, np.ndarray]:
    """``lambda_W(S)`` (eigenvalues of ``W^T W``) and ``dim(S)`` per eigenspace."""
    if not workload.is_marginals or workload.marginal_keys is None:
        raise ValueError("needs a marginals workload")
    table, dims = marginal_eigen(workload.domain)
    w2 = np.zeros(table.shape[0])
    for (w, _), key in zip(workload.terms, workload.marginal_keys, strict=True):
        w2[key] += w**2
    return w2 @ table, dims


def marginals_l2_optimum(workload: Workload) -> OptimizerResult:
    """The L2 optimum of a marginals workload, exactly.

    Permuting the values of any attribute leaves a marginals workload unchanged and moves
    every cell to every other, so the concave dual of :mod:`censusdp.design._l2dual` has
    a maximiser with equal multipliers: the SVD bound is the optimal L2 error, reached by
    ``A^T A = (W^T W)^{1/2}``, i.e. ``mu_S = sqrt(lambda_W(S))`` on every eigenspace
    (:class:`~censusdp.design._matrices.EigenStrategy`). Its error is ``(sum_S dim(S)
    sqrt(lambda_W(S)))^2 / n``, the bound itself, which is also the certificate.
    """
    lam_w, dims = _marginal_workload_eigenvalues(workload)
    mu = np.where(dims > 0, np.sqrt(np.clip(lam_w, 0.0, None)), 0.0)
    value = float(np.sum(dims * mu)) ** 2 / workload.n
    strategy = EigenStrategy(workload.domain, mu, name="optimized (marginal eigenspaces)")
    return OptimizerResult(strategy, value, "marginals-eigen", 1, 0, (value,), value)
