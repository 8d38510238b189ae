"""The maximum-entropy point of one geounit (the root) by Newton's method on the dual.

:func:`~censusdp.release.topdown.maxent.maxent_point` runs entropic mirror descent, which
converges to the least-squares fit of the model's marginals closest in entropy to its
uniform start. When the noise is small (a large budget) the fit must be tight in
persons, and mirror descent, a first-order method, needs thousands of steps (the
dhc-lite root of Vermont x0.01 at the preset's budget stopped at its 3,000-step cap, 33
CPU seconds). For one geounit there is a faster road to the same point:

    minimise  L(z) + lam * KL(z || p)   over  z >= 0, sum(z) = mass,

with ``L`` the weighted least squares of the model's marginals and ``p`` the uniform
start, has a smooth concave dual in the marginal rows ``nu`` (a few hundred, never the
cells):

    D(nu) = -lam * mass * log sum_a q_a exp(-(A' nu)_a / lam) - nu' y - 1/2 sum nu^2 / w,

whose maximiser gives ``z(nu) = mass * softmax(log q - A' nu / lam)``. Its Hessian,
``-(A Cov(z) A' / lam + diag(1/w))``, is one dense ``M x M`` matrix built from bincounts
over the atoms, so each damped Newton step is one Cholesky factorisation. ``lam`` is
lowered tenfold at a time (Newton is affine invariant, so ``nu`` carries over between
stages) until the Frank-Wolfe gap of ``L`` alone is below the caller's tolerance: then
``z`` fits the marginals as well as mirror descent's stopping rule asks, and among such
fits it is the one of largest entropy up to ``lam``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import scipy.linalg as sla

__all__ = ["MAX_DUAL_ROWS", "root_newton"]

MAX_DUAL_ROWS = 4096
"""Newton is used when the model has at most this many rows (a dense ``M x M`` system)."""
_LAMBDA_START = 1.0
"""First ``lam`` in chi-square units per nat of entropy."""
_LAMBDA_FLOOR = 1e-14
_NEWTON_STEPS = 60
_GRAD_TOL = 1e-7
"""A value of ``lam`` is solved when every row's dual residual ``A z - y - nu / w`` is
below this many noise standard deviations (the Newton decrement is no test here: it
shrinks with ``lam``)."""
"""Damped Newton steps per value of ``lam`` at most."""


def _answers(z: np.ndarray, rows: Sequence[np.ndarray], sizes: Sequence[int]) -> np.ndarray:
    return np.concatenate(
        [np.bincount(r, weights=z, minlength=m) for r, m in zip(rows, sizes, strict=True)]
    )


def _hessian(
    z: np.ndarray, rows: Sequence[np.ndarray], sizes: Sequence[int], az: np.ndarray, mass: float
) -> np.ndarray:
    """``A Cov(z) A'`` with ``Cov(z) = diag(z) - z z' / mass``."""
    off = np.concatenate([[0], np.cumsum(sizes)])
    h = np.empty((off[-1], off[-1]))
    for i, (ri, mi) in enumerate(zip(rows, sizes, strict=True)):
        for j in range(i, len(rows)):
            rj, mj = rows[j], sizes[j]
            block = np.bincount(ri * mj + rj, weights=z, minlength=mi * mj).reshape(mi, mj)
            h[off[i] : off[i + 1], off[j] : off[j + 1]] = block
            h[off[j] : off[j + 1], off[i] : off[i + 1]] = block.T
    return h - np.outer(az, az) / mass


def root_newton(
    rows: Sequence[np.ndarray],
    y: Sequence[np.ndarray],
    w: Sequence[np.ndarray],
    prior: np.ndarray,
    mass: float,
    chi: float,
    gap_tol: float,
) -> tuple[np.ndarray | None, int]:
    """The maximum-entropy fit of one geounit's marginals (see the module docstring).

    Args:
        rows: per term, the ``(n,)`` row of every atom (``0..m_t-1``).
        y: per term, the ``(m_t,)`` noisy answers.
        w: per term, the ``(m_t,)`` weight of each row (``>= 0``; a zero row is left out).
        prior: ``(n,)`` positive start (the uniform point on the atoms), summing to ``mass``.
        mass: the geounit's total.
        chi: chi-square units per unit of ``L`` (one over the noise variance).
        gap_tol: stop when ``L``'s Frank-Wolfe gap is below this many chi-square units.

    Returns:
        ``(z, steps)``: ``(n,)`` non-negative atom totals summing to ``mass`` (``None``
        when the model is too large for a dense system or Newton did not reach the
        tolerance: the caller's mirror descent takes over) and the Newton steps taken.
    """
    sizes = [int(np.asarray(x).size) for x in y]
    if sum(sizes) > MAX_DUAL_ROWS or mass <= 0 or prior.size == 0:
        return None, 0
    yv = np.concatenate([np.asarray(x, dtype=np.float64).ravel() for x in y])
    wv = np.concatenate([np.asarray(x, dtype=np.float64).ravel() for x in w])
    live = wv > 0
    inv_w = np.where(live, 1.0 / np.where(live, wv, 1.0), 0.0)
    logq = np.log(prior / prior.sum())
    off = np.concatenate([[0], np.cumsum(sizes)])

    def spread(nu: np.ndarray) -> np.ndarray:  # A' nu
        s = np.zeros(prior.size)
        for i, r in enumerate(rows):
            s += nu[off[i] : off[i + 1]][r]
        return s

    def primal(nu: np.ndarray, lam: float) -> tuple[np.ndarray, float]:
        e = logq - spread(nu) / lam
        top = float(e.max())
        p = np.exp(e - top)
        tot = float(p.sum())
        return mass * p / tot, top + np.log(tot)

    def dual(nu: np.ndarray, lam: float) -> float:
        _, lse = primal(nu, lam)
        return -lam * mass * lse - float(nu @ yv) - 0.5 * float(np.sum(nu**2 * inv_w))

    def loss_gap(z: np.ndarray) -> float:
        r = np.where(live, _answers(z, rows, sizes) - yv, 0.0)
        g = spread(wv * r)
        return chi * float(z @ g - mass * g.min())

    nu = np.zeros(yv.size)
    lam = _LAMBDA_START / chi
    steps = 0
    while lam * chi >= _LAMBDA_FLOOR:
        for _ in range(_NEWTON_STEPS):
            z, _ = primal(nu, lam)
            az = _answers(z, rows, sizes)
            grad = np.where(live, az - yv - nu * inv_w, 0.0)
            if float(np.max(np.abs(grad) * np.sqrt(wv * chi), initial=0.0)) < _GRAD_TOL:
                break
            hess = _hessian(z, rows, sizes, az, mass) / lam + np.diag(np.where(live, inv_w, 1.0))
            hess[~live, :] = 0.0
            hess[:, ~live] = 0.0
            hess[~live, ~live] = 1.0
            try:
                with warnings.catch_warnings():  # near-singular at small lam: the
                    warnings.simplefilter("ignore", sla.LinAlgWarning)  # line search copes
                    step = sla.solve(hess, grad, assume_a="pos", check_finite=False)
            except (np.linalg.LinAlgError, ValueError):
                return None, steps
            steps += 1
            decrement = float(grad @ step)
            if not np.isfinite(decrement):
                return None, steps
            d0, t = dual(nu, lam), 1.0
            while dual(nu + t * step, lam) < d0 + 0.25 * t * decrement and t > 1e-12:
                t *= 0.5
            nu = nu + t * step
        z, _ = primal(nu, lam)
        gap = loss_gap(z)
        if gap <= gap_tol:
            return z, steps
        lam *= 0.1  # (larger cuts cost more damped steps than they save)
    return None, steps
