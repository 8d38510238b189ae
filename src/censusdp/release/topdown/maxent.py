"""A maximum-entropy (graphical-model) estimate of a subproblem: the low-budget alternative
to least squares.

Least squares fits every measured cell, noise included. When the budget is small and a
query has far more rows than persons (the 233,856-row ``detailed`` query of a state of
10,000 persons at total epsilon 0.5: noise standard deviation 64 against a mean count of
0.04 per row), the non-negative least-squares point spreads the population over the
cells where that query's noise happened to be positive, and every marginal of the
estimate drifts towards uniform (state sex x age TVD 0.6 on generated Vermont x0.02).

This module estimates instead, per subproblem, the distribution of maximum entropy among
those that best fit the *informative* measured marginals (the idea of private-pgm:
McKenna, Sheldon & Miklau, "Graphical-model based estimation and inference for
differential privacy", ICML 2019; written here from the method, for our subproblems):

1. **Which marginals enter the model.** A one-row query (the children's totals) always
   enters. Another enters when fitting it is expected to help: with the chi-square
   statistic ``stat = sum_i sum_r (y_q[i, r] - A_q X0[i])_r^2 / var_q`` over its
   ``dof = k (m_q - 1)`` degrees of freedom, fitting passes about ``dof`` units of noise
   into the estimate and leaving it out costs about ``stat - dof`` units of signal, so it
   enters when ``stat - dof`` exceeds both ``dof`` and :data:`SIGNIFICANCE_Z` standard
   deviations ``sqrt(2 dof)`` (one-sided p = 0.001). ``X0`` is the starting point
   (uniform within each child at the root; the parent's cells split by the children's
   estimated totals below it). The ``detailed`` query at low epsilon stays out; the
   ``sex*age`` marginal of a state of 10,000 persons at total epsilon 0.5 (noise 64 per
   cell, signal about 43) stays out; the same marginal of a real state enters.
2. **The fit.** Entropic mirror descent (exponentiated gradient) on the Gaussian
   log-likelihood of the chosen queries, ``1/2 sum_q w_q ||A_q X_i - y_q[i]||^2``, from
   ``X0``. Each step multiplies ``X`` by ``exp(-eta G)`` and renormalises -- each child's
   total at the root (its total held within its bounds), each cell's column to the
   parent count below it -- so the estimate is non-negative by construction, keeps the
   parent's cells exactly, and (the gradient ``G`` being a sum of functions of the
   chosen marginals' rows) stays in the log-linear family of those marginals: the
   maximum-entropy point among the best fits. Steps adapt (grown by 1.25 while the loss
   falls, halved when it does not); it stops when the Frank-Wolfe gap (an upper bound on
   the loss above its minimum) is below :data:`GAP_TOL` chi-square units.

Group bounds (invariants such as group-quarters facilities) are left to the integer
rounding, which finds the closest integer point meeting every constraint exactly, as it
does for the least-squares point; children still sum to the parent exactly.

:func:`choose_estimator` (``auto``) picks, per subproblem, by measured accuracy without
the truth: it draws synthetic measurements from the public noise law (Gaussian with
each query's variance) around two plausible truths -- the maximum-entropy point and the
least-squares point of the real measurements -- estimates both ways, and keeps the
estimator whose error, averaged over the two truths, is smaller (the error: the mean
over the measured marginals of the L1 distance of the answers over the population; the
cell-level ``detailed`` query is not a published table and is left out). The draw is
seeded by a hash of the subproblem's noisy answers, so a run is reproducible and the
same on any executor. When every measured query rises above its noise, both estimators
fit the same marginals and ``auto`` keeps least squares without simulating.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, replace

import numpy as np

from censusdp.errors import InternalError
from censusdp.release.topdown._common import (
    Compressed,
    child_total_estimates,
    compress,
    fixed_zeros,
    start_point,
)
from censusdp.release.topdown.l2 import L2Result
from censusdp.release.topdown.problem import Subproblem

__all__ = [
    "ESTIMATORS",
    "GAP_TOL",
    "SIGNIFICANCE_Z",
    "Choice",
    "MaxentResult",
    "choose_estimator",
    "maxent_point",
    "merge_repeats",
    "model_queries",
    "solve_maxent",
]

ESTIMATORS = ("ls", "maxent", "auto")
"""Estimators of a subproblem: least squares, maximum entropy, or picked per subproblem."""
SIGNIFICANCE_Z = 3.09
"""A query enters the model only when its chi-square statistic exceeds its degrees of
freedom by at least this many standard deviations (one-sided p = 0.001), and by at least
the degrees of freedom themselves (its signal outweighs the noise a fit would add)."""
GAP_TOL = 1.0
"""Mirror descent stops when the Frank-Wolfe gap is below this many chi-square units
(the loss itself varies by ``sqrt(2 dof)`` units from one noise draw to the next; on the
pooled root of Vermont x0.02 at epsilon 0.5 stopping at 0.01 instead changed the state
sex x age TVD by less than 1e-4 and took 4x as long)."""
MAX_ITER = 3000


@dataclass(frozen=True)
class MaxentResult:
    """The maximum-entropy estimate of one subproblem.

    Attributes:
        x: ``(k, c)`` non-negative point; columns sum to the parent (or each child's
            total lies within its bounds at the root).
        queries: indices of the queries in the model (the chosen marginals).
        iterations: mirror-descent steps taken.
        gap: the final Frank-Wolfe gap in chi-square units.
        status: ``"converged"`` or ``"max_iter"``.
    """

    x: np.ndarray
    queries: tuple[int, ...]
    iterations: int
    gap: float
    status: str


def _variances(sub: Subproblem) -> np.ndarray:
    """``(n_queries, k)`` noise variance of each child's answers to each query in
    persons^2 (the driver scales weights to max 1; children measured with their own
    budgets have their own variances)."""
    unit = sub.noise_scale**2 if sub.noise_scale is not None else 1.0
    w = np.asarray([sub.child_weights(q) for q in range(sub.n_queries)]).reshape(
        sub.n_queries, sub.k
    )
    return np.where(w > 0, unit / np.where(w > 0, w, 1.0), np.inf)


def _finite(sd: np.ndarray) -> np.ndarray:
    """``(k, 1)`` standard deviations with ``inf`` (unmeasured) as 0."""
    return np.where(np.isfinite(sd), sd, 0.0)[:, None]


def _answers(x: np.ndarray, rows: np.ndarray, m: int) -> np.ndarray:
    """``(k, m)`` answers of ``x`` for a query with cell rows ``rows``: one bincount."""
    k = x.shape[0]
    flat = (rows[None, :] + m * np.arange(k)[:, None]).ravel()
    return np.bincount(flat, weights=x.ravel(), minlength=k * m).reshape(k, m)


def merge_repeats(sub: Subproblem) -> Subproblem:
    """``sub`` with the queries that measure the same marginal combined into one.

    Two Gaussian measurements ``y1, y2`` of one marginal with weights ``w1, w2`` carry
    the information of one, ``(w1 y1 + w2 y2) / (w1 + w2)`` with weight ``w1 + w2``: the
    objective changes by a constant only (same minimisers), and the work halves (the
    root pools the US and State measurements of a one-state run).
    """
    groups: dict[tuple[bytes, int], list[int]] = {}
    for q in range(sub.n_queries):
        if sub.weights[q] > 0:
            key = (sub.query_rows[q].tobytes(), sub.query_sizes[q])
            groups.setdefault(key, []).append(q)
    if all(len(g) == 1 for g in groups.values()) and len(groups) == sub.n_queries:
        return sub
    rows, sizes, noisy, weights, unit = [], [], [], [], []
    for g in groups.values():
        w = float(sum(sub.weights[q] for q in g))
        wi = sum(sub.child_weights(q) for q in g)  # (k,) per child
        rows.append(sub.query_rows[g[0]])
        sizes.append(sub.query_sizes[g[0]])
        safe = np.where(wi > 0, wi, 1.0)
        noisy.append(sum(sub.child_weights(q)[:, None] * sub.noisy[q] for q in g) / safe[:, None])
        weights.append(w)
        unit.append(wi / w)
    return replace(
        sub,
        query_rows=tuple(rows),
        query_sizes=tuple(sizes),
        noisy=tuple(noisy),
        weights=np.asarray(weights, dtype=np.float64),
        unit_weights=None if sub.unit_weights is None else np.asarray(unit),
    )


def _initial(sub: Subproblem, free: np.ndarray) -> np.ndarray:
    """``X0``: uniform over each child's free cells at the root (its estimated total held
    in its bounds), the parent's cells split by the children's estimated totals below."""
    k = sub.k
    if sub.parent is not None:
        x = start_point(sub) * free
        col = x.sum(axis=0)
        p = sub.parent.astype(np.float64)
        empty = col <= 0
        x[:, empty] = p[empty][None, :] / k  # no free child: the flow repairs the bounds
        col[empty] = p[empty]
        return x * (p / col)[None, :]
    t = np.clip(child_total_estimates(sub), sub.total_lower, sub.total_upper)
    t = np.where(np.isfinite(t), np.maximum(t, 0.0), 0.0)
    n = free.sum(axis=1)
    return np.where(free, (t / np.maximum(n, 1))[:, None], 0.0) * (n > 0)[:, None]


def model_queries(sub: Subproblem, comp: Compressed | None = None) -> tuple[int, ...]:
    """The queries worth fitting: the one-row totals, and those whose answers vary around
    ``X0`` by more signal than noise (the chi-square rule of the module docstring)."""
    comp = compress(sub) if comp is None else comp
    if sub.c == 0:
        return ()
    x0 = _initial(sub, ~fixed_zeros(sub))
    var = _variances(sub)
    out = []
    for q in range(len(comp.sizes)):
        m = comp.sizes[q]
        if comp.w[q] <= 0 or m == 0:
            continue
        if m == 1:  # the children's totals: always in the model (no test has dof here)
            out.append(q)
            continue
        resid = comp.y[q] - _answers(x0, comp.rows[q], m)
        stat = float(np.sum(resid**2 / var[q][:, None]))
        dof = sub.k * (m - 1)
        # fitting a marginal passes its noise (about dof * var) into the estimate; leaving
        # it out costs its signal (about stat - dof in var units): fit it only when the
        # signal is the larger, and significantly there at all
        if stat - dof > max(dof, SIGNIFICANCE_Z * np.sqrt(2.0 * dof)):
            out.append(q)
    return tuple(out)


def _logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    top = np.max(a, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return np.squeeze(top, axis=axis) + np.log(np.sum(np.exp(a - top), axis=axis))


def maxent_point(
    sub: Subproblem,
    comp: Compressed | None = None,
    *,
    queries: tuple[int, ...] | None = None,
    max_iter: int = MAX_ITER,
    gap_tol: float = GAP_TOL,
) -> MaxentResult:
    """The maximum-entropy point among the best Gaussian fits of the model queries.

    Args:
        sub: the subproblem (feasible; run ``make_feasible`` first).
        comp: its compressed queries (computed if ``None``).
        queries: the model's queries (default :func:`model_queries`).
        max_iter: cap on mirror-descent steps.
        gap_tol: stop when the Frank-Wolfe gap is below this many chi-square units.
    """
    comp = compress(sub) if comp is None else comp
    k, c = sub.k, sub.c
    free = ~fixed_zeros(sub)
    x = _initial(sub, free)
    queries = model_queries(sub, comp) if queries is None else tuple(queries)
    queries = tuple(q for q in queries if comp.w[q] > 0 and comp.sizes[q] > 0)
    if c == 0 or not queries or (sub.parent is not None and k == 1):
        return MaxentResult(x, queries, 0, 0.0, "converged")
    root = sub.parent is None
    axis = 1 if root else 0
    mass = x.sum(axis=1) if root else sub.parent.astype(np.float64)
    support = x > 0
    chi = 1.0 / (sub.noise_scale**2 if sub.noise_scale is not None else 1.0)

    def loss_grad(z: np.ndarray) -> tuple[float, np.ndarray]:
        total, g = 0.0, np.zeros_like(z)
        for q in queries:
            r = _answers(z, comp.rows[q], comp.sizes[q]) - comp.y[q]
            wq = comp.child_w(q)
            total += 0.5 * float(np.sum(wq * r**2))
            g += wq * r[:, comp.rows[q]]
        return total, g

    def gap(z: np.ndarray, g: np.ndarray) -> float:
        gm = np.where(support, g, np.inf)
        lo = np.min(gm, axis=axis)
        lo = np.where(np.isfinite(lo), lo, 0.0)
        return float(np.sum(z * g) - np.sum(mass * lo))

    with np.errstate(divide="ignore"):
        logx = np.where(support, np.log(np.where(support, x, 1.0)), -np.inf)
    loss, g = loss_grad(x)
    rowmax = max(
        float(np.bincount(comp.rows[q]).max()) * float(np.max(comp.child_w(q))) for q in queries
    )
    eta = 1.0 / max(rowmax * float(mass.max(initial=1.0)), 1e-12)
    status, it, gp = "max_iter", 0, gap(x, g)
    while gp * chi > gap_tol and it < max_iter:
        it += 1
        while True:
            cand = logx - eta * g
            cand = cand - np.expand_dims(_logsumexp(cand, axis), axis)
            with np.errstate(divide="ignore"):
                cand = cand + np.expand_dims(np.log(mass), axis)
            xn = np.where(support, np.exp(cand), 0.0)
            ln, gn = loss_grad(xn)
            if ln <= loss or eta < 1e-300:
                break
            eta *= 0.5
        logx, x, loss, g = cand, xn, ln, gn
        eta *= 1.25
        gp = gap(x, g)
    if gp * chi <= gap_tol:
        status = "converged"
    return MaxentResult(x, queries, it, gp * chi, status)


@dataclass(frozen=True)
class Choice:
    """What ``auto`` chose for one subproblem, and why.

    Attributes:
        estimator: ``"ls"`` or ``"maxent"``.
        errors: per estimator, its mean simulated error (``{}`` when no simulation
            was needed: every query entered the model, so both fit the same marginals).
        ls: the least-squares result on the real measurements, when it was computed.
    """

    estimator: str
    errors: dict[str, float]
    ls: L2Result | None = None


def _seed(sub: Subproblem) -> int:
    h = hashlib.blake2b(digest_size=8)
    for y in sub.noisy:
        h.update(np.ascontiguousarray(y).tobytes())
    return int.from_bytes(h.digest(), "little")


def _error(sub: Subproblem, est: np.ndarray, truth: np.ndarray) -> float:
    """Mean over the measured marginals of ``sum |A_q est - A_q truth| / population``.

    A query with one kept cell per row (``detailed``) is not a marginal of the cells and
    is left out: what is published (and judged) are marginal tables.
    """
    n = max(float(truth.sum()), 1.0)
    errs = [
        float(np.abs(a - b).sum()) / n
        for a, b, w, rows in zip(
            sub.answers(est), sub.answers(truth), sub.weights, sub.query_rows, strict=True
        )
        if w > 0 and np.unique(rows).size < sub.c
    ]
    return float(np.mean(errs)) if errs else 0.0


def choose_estimator(sub: Subproblem, *, method: str = "auto") -> Choice:
    """``auto``: least squares or maximum entropy for this subproblem, by simulated accuracy.

    When every measured query enters the model (:func:`model_queries`), both estimators
    fit the same marginals and least squares (the production method) is kept without
    simulating. Otherwise: two plausible truths -- the maximum-entropy point and the
    least-squares point of the real measurements -- each get one synthetic draw of
    every measured query from the public noise law (Gaussian, each query's variance);
    both estimators run on each draw (least squares by :func:`solve_l2` with ``method``),
    and the estimator with the smaller mean error over the two wins (least squares on a
    tie). It costs three least-squares and three maximum-entropy solves.
    """
    from censusdp.release.topdown.l2 import solve_l2

    sub = merge_repeats(sub)
    comp = compress(sub)
    measured = [q for q in range(len(comp.sizes)) if comp.w[q] > 0 and comp.sizes[q] > 0]
    chosen = model_queries(sub, comp)
    if sub.c == 0 or set(measured) <= set(chosen) or (sub.parent is not None and sub.k == 1):
        return Choice("ls", {})
    rng = np.random.default_rng(_seed(sub))
    sd = np.sqrt(_variances(sub))
    ls = solve_l2(sub, method=method)
    truths = (maxent_point(sub, comp, queries=chosen).x, ls.x)
    mean = {"ls": 0.0, "maxent": 0.0}
    for truth in truths:
        noisy = tuple(
            np.where(np.isfinite(s)[:, None], a + rng.normal(0.0, 1.0, a.shape) * _finite(s), y)
            if np.isfinite(s).any()
            else y
            for a, s, y in zip(sub.answers(truth), sd, sub.noisy, strict=True)
        )
        sim = replace(sub, noisy=noisy)
        mean["maxent"] += _error(sim, maxent_point(sim).x, truth) / len(truths)
        mean["ls"] += _error(sim, solve_l2(sim, method=method).x, truth) / len(truths)
    return Choice("maxent" if mean["maxent"] < mean["ls"] else "ls", mean, ls)


def check_estimator(name: str) -> str:
    """``name`` if it is one of :data:`ESTIMATORS` (a bug in the caller otherwise)."""
    if name not in ESTIMATORS:
        raise InternalError(f"estimator must be one of {ESTIMATORS}, got {name!r}")
    return name


def solve_maxent(sub: Subproblem, estimator: str, *, method: str = "auto") -> L2Result | None:
    """The real-valued estimate of ``sub`` for ``estimator`` ``"maxent"`` or ``"auto"``.

    Returns an :class:`~censusdp.release.topdown.l2.L2Result`: with ``method =
    "maxent"`` (``status`` ``"optimal"`` when converged, else ``"max_iter"``), the
    least-squares result when ``auto`` chose least squares after computing it, or
    ``None`` when ``auto`` chose least squares without (the caller runs its chain).
    """
    t0 = time.perf_counter()
    if check_estimator(estimator) == "auto":
        choice = choose_estimator(sub, method=method)
        if choice.estimator == "ls":
            return choice.ls
    if sub.parent is not None and sub.k == 1:
        x = sub.parent.astype(np.float64)[None, :]
        res = MaxentResult(x, (), 0, 0.0, "exact")
    else:
        res = maxent_point(merge_repeats(sub))
    return L2Result(
        x=res.x,
        status="optimal" if res.status != "max_iter" else "max_iter",
        method="maxent" if res.status != "exact" else "parent",
        iterations=res.iterations,
        seconds=time.perf_counter() - t0,
        max_violation=sub.max_violation(res.x),
        objective=sub.objective(res.x),
        solver_status=f"{res.status}; model queries {list(res.queries)}; gap {res.gap:.3g}",
        attempts=(("maxent", res.status),),
    )
