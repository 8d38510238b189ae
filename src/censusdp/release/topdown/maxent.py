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

1. **Which marginals enter the model, and at what resolution.** A one-row query (the
   children's totals) always enters. For every other query, :func:`select_model`
   estimates from the noisy answers and the public noise variance the squared error of
   its answers under each candidate resolution: left out, every row fitted, or -- for a
   query over an ordered attribute (:data:`ORDINAL_WIDTHS`: ``age``) -- its rows merged
   into bins of consecutive levels (``sex`` x ten-year age groups). The resolution of
   least estimated error is kept, if significant; a query left out still measures each
   child's total, so its sum joins the one-row query's in the totals term. Between
   "left out" and "every row" this is the rule: fitting a marginal passes about ``dof`` units of noise into the
   estimate and leaving it out costs about ``stat - dof`` units of signal. The
   ``detailed`` query at low epsilon stays out; the ``sex*age`` marginal of a state of
   10,000 persons at total epsilon 0.5 (noise 50 per cell after pooling, signal about
   43) enters in 20- or 40-year age groups; the same marginal of a real state enters
   in single years.
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

:func:`choose_estimator` (``auto``) picks, per subproblem, from the public noise law and
no extra solve: least squares when every measured query enters the model at full
resolution (both then fit the same marginals), maximum entropy otherwise (its estimated
error is then the smaller). :func:`default_estimator` makes ``auto`` the default of the
``dhc-lite`` schema.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from censusdp.errors import InternalError
from censusdp.release.topdown._maxent_newton import root_newton
from censusdp.release.topdown.problem import Subproblem, _row_sums
from censusdp.release.topdown.solvers.base import Compressed, RealSolution, compress
from censusdp.release.topdown.solvers.common import child_total_estimates, fixed_zeros, start_point

__all__ = [
    "DEFAULT_ESTIMATORS",
    "ESTIMATORS",
    "GAP_TOL",
    "MAX_COARSENED_ROWS",
    "ORDINAL_WIDTHS",
    "SIGNIFICANCE_Z",
    "Choice",
    "Coarsenings",
    "MaxentResult",
    "Selection",
    "Term",
    "choose_estimator",
    "coarsenings_for",
    "default_estimator",
    "maxent_point",
    "merge_repeats",
    "model_queries",
    "select_model",
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
_ATOMS = True
"""Run the root's descent on atoms (see :func:`maxent_point`); off only in tests."""
_NEWTON = True
"""Solve a single geounit by Newton's method on the dual first (:mod:`._maxent_newton`);
off only in tests and benchmarks (mirror descent alone)."""


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
        terms: the names of the model's terms (``"q1"``; ``"q1/age/10"`` a coarsening).
    """

    x: np.ndarray
    queries: tuple[int, ...]
    iterations: int
    gap: float
    status: str
    terms: tuple[str, ...] = ()


def _variances(sub: Subproblem) -> np.ndarray:
    """``(n_queries, k)`` noise variance of each child's answers to each query in
    persons^2 (the driver scales weights to max 1; children measured with their own
    budgets have their own variances; ``inf`` where a child was not measured)."""
    unit = sub.noise_scale**2 if sub.noise_scale is not None else 1.0
    w = np.asarray([sub.child_weights(q) for q in range(sub.n_queries)]).reshape(
        sub.n_queries, sub.k
    )
    return np.where(w > 0, unit / np.where(w > 0, w, 1.0), np.inf)


def _repeat_groups(sub: Subproblem) -> list[list[int]]:
    groups: dict[tuple[bytes, int], list[int]] = {}
    for q in range(sub.n_queries):
        if sub.weights[q] > 0:
            key = (sub.query_rows[q].tobytes(), sub.query_sizes[q])
            groups.setdefault(key, []).append(q)
    return list(groups.values())


def merge_repeats(sub: Subproblem, coarse: Coarsenings | None = None):
    """``sub`` with the queries that measure the same marginal combined into one.

    Two Gaussian measurements ``y1, y2`` of one marginal with weights ``w1, w2`` carry
    the information of one, ``(w1 y1 + w2 y2) / (w1 + w2)`` with weight ``w1 + w2``: the
    objective changes by a constant only (same minimisers), and the work halves (the
    root pools the US and State measurements of a one-state run). With ``coarse`` (the
    queries' candidate coarsenings) it returns ``(merged, their coarsenings)``.
    """
    groups = _repeat_groups(sub)
    if coarse is not None:
        coarse = tuple(coarse[g[0]] if g[0] < len(coarse) else () for g in groups)
    if all(len(g) == 1 for g in groups) and len(groups) == sub.n_queries:
        return sub if coarse is None else (sub, coarse)
    rows, sizes, noisy, weights, unit = [], [], [], [], []
    for g in groups:
        w = float(sum(sub.weights[q] for q in g))
        wi = sum(sub.child_weights(q) for q in g)  # (k,) per child
        rows.append(sub.query_rows[g[0]])
        sizes.append(sub.query_sizes[g[0]])
        safe = np.where(wi > 0, wi, 1.0)
        noisy.append(sum(sub.child_weights(q)[:, None] * sub.noisy[q] for q in g) / safe[:, None])
        weights.append(w)
        unit.append(wi / w)
    merged = replace(
        sub,
        query_rows=tuple(rows),
        query_sizes=tuple(sizes),
        noisy=tuple(noisy),
        weights=np.asarray(weights, dtype=np.float64),
        unit_weights=None if sub.unit_weights is None else np.asarray(unit),
    )
    return merged if coarse is None else (merged, coarse)


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


@dataclass(frozen=True)
class Term:
    """One marginal in the model: a measured query, or a coarsening of one (its rows
    merged into bins, e.g. single years of age into five-year groups).

    Attributes:
        query: the measured query it comes from.
        name: ``"q<query>"`` or ``"q<query>/<coarsening>"``.
        rows: ``(c,)`` row of every kept cell (``0..m-1``).
        y: ``(k, m)`` noisy answers (a bin's: the sum of its measured rows).
        w: ``(1, m)`` weight of each row (a bin of ``n`` measured rows: ``w_q / n``), or
            ``(k, m)`` when the children were measured with their own budgets.
        left_out: for the children's totals (:func:`_pooled_total`), the queries left
            out of the model whose sums are pooled into it (then ``query`` is the totals
            query, or the first of them when there is none).
    """

    query: int
    name: str
    rows: np.ndarray
    y: np.ndarray
    w: np.ndarray
    left_out: tuple[int, ...] = ()

    @property
    def m(self) -> int:
        return int(self.w.shape[-1])


Coarsenings = tuple[tuple[tuple[str, np.ndarray], ...], ...]
"""Per query of a subproblem, its candidate coarsenings: ``(name, bin of every row of the
query)``; the driver builds them from the schema (:data:`ORDINAL_WIDTHS`)."""


def _full_term(comp: Compressed, q: int) -> Term:
    m = comp.sizes[q]
    return Term(q, f"q{q}", comp.rows[q], comp.y[q], np.ones((1, m)) * comp.child_w(q))


def _coarse_term(
    sub: Subproblem, comp: Compressed, q: int, name: str, row_bins: np.ndarray
) -> Term:
    """Query ``q`` with its present rows merged by ``row_bins`` (bins of the full rows)."""
    present = np.unique(sub.query_rows[q])  # compress's order of the present rows
    bins, local = np.unique(np.asarray(row_bins)[present], return_inverse=True)
    nb = int(bins.size)
    n = np.bincount(local, minlength=nb).astype(np.float64)
    y = np.zeros((sub.k, nb))
    np.add.at(y.T, local, comp.y[q].T)
    return Term(q, f"q{q}/{name}", local[comp.rows[q]], y, comp.child_w(q) / n[None, :])


@dataclass(frozen=True)
class Selection:
    """The model of one subproblem and the risks that chose it.

    Attributes:
        terms: the marginals in the model.
        risk: per measured query (and ``"total"``), the estimated squared error, in
            noise-variance units, of its answers under ``"maxent"`` (the chosen
            resolution) and ``"ls"`` (every row fitted: its full noise).
        full: ``True`` when every measured query entered at full resolution (then least
            squares fits exactly the same marginals).
    """

    terms: tuple[Term, ...]
    risk: dict[str, float]
    full: bool

    @property
    def queries(self) -> tuple[int, ...]:
        return _fitted_queries(self.terms)


def _fitted_queries(terms: tuple[Term, ...]) -> tuple[int, ...]:
    """The measured queries in a model (a query left out but pooled into the totals is
    not: the model fits its sum only)."""
    return tuple(dict.fromkeys(t.query for t in terms if t.query not in t.left_out))


def select_model(
    sub: Subproblem, comp: Compressed | None = None, coarse: Coarsenings = ()
) -> Selection:
    """The marginals worth fitting, each at the resolution of least estimated risk.

    For a query ``q`` with ``m`` present rows and noise variance ``v`` per row, and each
    candidate resolution -- left out, every row, or a coarsening into ``b`` bins -- the
    squared error of the fitted answers over the ``k`` children is estimated without
    the truth (an unbiased risk estimate, Stein (1981)): with residuals
    ``r = y - A X0`` and ``S`` their sum of squares left after subtracting each bin's
    mean, the estimated squared bias is ``S - k (m - b) v`` and the noise passed into
    the fit ``k b v``. Left out is ``b = 1``: the query's sum over its present rows, a
    noisy measurement of each child's total, is still fitted (:func:`_pooled_total`);
    every row is ``b = m``, ``S = 0``. The candidate of least risk is kept; a fitted one
    must also be significant (its bins' chi-square statistic above its ``k (b - 1)``
    degrees of freedom by :data:`SIGNIFICANCE_Z` standard deviations). Between left out
    and every row this is the rule "signal beyond the noise a fit would add".
    """
    comp = compress(sub) if comp is None else comp
    if sub.c == 0:
        return Selection((), {}, True)
    x0 = _initial(sub, ~fixed_zeros(sub))
    var = _variances(sub)
    terms: list[Term] = []
    totals: list[int] = []  # queries fitted by their sum: the totals query, the left out
    risk = {"maxent": 0.0, "ls": 0.0}
    full = True
    for q in range(len(comp.sizes)):
        m = comp.sizes[q]
        if comp.w[q] <= 0 or m == 0:
            continue
        if m == 1:  # the children's totals: always in the model (no test has dof here)
            totals.append(q)
            risk["maxent"] += sub.k
            risk["ls"] += sub.k
            continue
        # per child: 1 / variance (0 for a child not measured), k the measured children
        inv = np.where(np.isfinite(var[q]), 1.0 / var[q], 0.0)[:, None]
        k = int(np.count_nonzero(inv))
        resid = comp.y[q] - _row_sums(x0, comp.rows[q], m)
        stat = float(np.sum(inv * resid**2))
        # (name, bins b, estimated risk, term factory)
        best = ("out", 1, stat - k * (m - 1) + k, None)
        candidates = [("full", m, float(k * m), lambda q=q: _full_term(comp, q))]
        present = np.unique(sub.query_rows[q])
        for name, row_bins in coarse[q] if q < len(coarse) else ():
            bins, local = np.unique(np.asarray(row_bins)[present], return_inverse=True)
            b = int(bins.size)
            if b <= 1 or b >= m:
                continue
            n = np.bincount(local, minlength=b).astype(np.float64)
            sums = np.zeros((k, b))
            np.add.at(sums.T, local, resid.T)
            chi = float(np.sum(inv * sums**2 / n[None, :]))
            r = stat - chi - k * (m - b) + k * b
            dof = k * (b - 1)
            if chi - dof > SIGNIFICANCE_Z * np.sqrt(2.0 * dof):
                candidates.append(
                    (
                        name,
                        b,
                        r,
                        lambda q=q, nm=name, rb=row_bins: _coarse_term(sub, comp, q, nm, rb),
                    )
                )
        dof = k * (m - 1)
        if not stat - dof > SIGNIFICANCE_Z * np.sqrt(2.0 * dof):
            candidates.pop(0)  # every row fitted: not significant
        for cand in candidates:
            if cand[2] < best[2]:
                best = cand
        if best[3] is not None:
            terms.append(best[3]())
        else:
            totals.append(q)
        full = full and best[0] == "full"
        risk["maxent"] += best[2]
        risk["ls"] += float(k * m)
    if totals:
        terms.insert(0, _pooled_total(comp, totals, sub.c))
    return Selection(tuple(terms), risk, full)


def _pooled_total(comp: Compressed, queries: list[int], c: int) -> Term:
    """One term fitting each child's total to the inverse-variance mean of the sums of
    ``queries``' present rows (each a noisy measurement of the total; a sum of ``n`` rows
    of weight ``w`` has weight ``w / n``). Fitting the sums one by one is the same loss
    up to a constant. Without it a schema with no totals query (``ddp-2010`` below the
    state) would leave the children's totals to drift wherever the fitted marginals
    pull them: the left-out queries are the only measurements of the totals there.
    """
    queries = sorted(queries, key=lambda q: comp.sizes[q] > 1)  # the totals query first
    left_out = tuple(q for q in queries if comp.sizes[q] > 1)
    if not left_out:
        return _full_term(comp, queries[0])
    k = comp.y[queries[0]].shape[0]
    num, den = np.zeros((k, 1)), np.zeros((k, 1))
    for q in queries:
        w = np.broadcast_to(comp.child_w(q), (k, 1)) / comp.sizes[q]
        num += w * comp.y[q].sum(axis=1, keepdims=True)
        den += w
    y = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    name = "total(" + "+".join(f"q{q}" for q in queries) + ")"
    return Term(queries[0], name, np.zeros(c, dtype=np.int64), y, den, left_out)


def model_queries(
    sub: Subproblem, comp: Compressed | None = None, coarse: Coarsenings = ()
) -> tuple[int, ...]:
    """The queries worth fitting (at some resolution): see :func:`select_model`."""
    return select_model(sub, comp, coarse).queries


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
    terms: tuple[Term, ...] | None = None,
    coarse: Coarsenings = (),
    max_iter: int = MAX_ITER,
    gap_tol: float = GAP_TOL,
) -> MaxentResult:
    """The maximum-entropy point among the best Gaussian fits of the model's marginals.

    Args:
        sub: the subproblem (feasible; run ``make_feasible`` first).
        comp: its compressed queries (computed if ``None``).
        queries: fit these queries at full resolution (default: :func:`select_model`).
        terms: fit these terms (overrides ``queries``).
        coarse: the queries' candidate coarsenings, for :func:`select_model`.
        max_iter: cap on mirror-descent steps.
        gap_tol: stop when the Frank-Wolfe gap is below this many chi-square units.
    """
    comp = compress(sub) if comp is None else comp
    k, c = sub.k, sub.c
    free = ~fixed_zeros(sub)
    x = _initial(sub, free)
    if terms is None and queries is None:
        terms = select_model(sub, comp, coarse).terms
    elif terms is None:
        terms = tuple(_full_term(comp, q) for q in queries)
    terms = tuple(t for t in terms if comp.w[t.query] > 0 and t.m > 0)
    names = tuple(t.name for t in terms)
    qs = _fitted_queries(terms)
    if c == 0 or not terms or (sub.parent is not None and k == 1):
        return MaxentResult(x, qs, 0, 0.0, "converged", names)
    root = sub.parent is None
    axis = 1 if root else 0
    mass = x.sum(axis=1) if root else sub.parent.astype(np.float64)
    # the first step's size, from the cells' terms (the same on atoms)
    eta = 1.0 / max(_row_max(terms) * float(mass.max(initial=1.0)), 1e-12)
    expand = None
    if root and _ATOMS:
        x, terms, expand = _on_atoms(terms, sub.groups, free, x)
    chi = 1.0 / (sub.noise_scale**2 if sub.noise_scale is not None else 1.0)
    status = "max_iter"
    if root and k == 1 and _NEWTON and max_iter > 0:
        # one geounit: the same point by Newton's method on the dual (_maxent_newton)
        on = x[0] > 0
        rows, y, w = [t.rows[on] for t in terms], [t.y[0] for t in terms], [t.w[0] for t in terms]
        z, it = root_newton(rows, y, w, x[0, on], float(mass[0]), chi, gap_tol)
        if z is not None:
            support = x > 0
            x = np.zeros_like(x)
            x[0, on] = z
            gp = _fw_gap(terms, x, support, mass, axis)
            status = "converged"
    if status != "converged":
        x, it, gp = _mirror_descent(terms, x, mass, axis, eta, chi, max_iter, gap_tol)
        status = "converged" if gp * chi <= gap_tol else "max_iter"
    if expand is not None:
        x = expand(x)
    return MaxentResult(x, qs, it, gp * chi, status, names)


def _on_atoms(terms: tuple[Term, ...], groups: np.ndarray, free: np.ndarray, x: np.ndarray):
    """``(atom totals, terms on atoms, expand)``: the root's cells grouped into atoms.

    Cells in the same row of every term, the same group and the same support ("atoms")
    get the same gradient, and X0 is uniform on them: the iterates stay uniform on each
    atom, so the fit runs on atom totals (12,000 atoms for the 229,320 cells of a
    dhc-lite root fitted in age groups) and ``expand`` spreads them at the end.
    """
    keys = np.stack([t.rows for t in terms] + [groups] + list(free), axis=1)
    _, first, atom = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    atom = atom.ravel()
    n_atoms = first.size
    size = np.bincount(atom, minlength=n_atoms).astype(np.float64)
    xa = np.stack([np.bincount(atom, weights=row, minlength=n_atoms) for row in x])

    def expand(z: np.ndarray) -> np.ndarray:
        return np.where(free, (z / size[None, :])[:, atom], 0.0)

    return xa, tuple(replace(t, rows=t.rows[first]) for t in terms), expand


def _loss_grad(terms: tuple[Term, ...], z: np.ndarray) -> tuple[float, np.ndarray]:
    """The weighted least-squares loss of the terms at ``z`` and its gradient."""
    total, g = 0.0, np.zeros_like(z)
    for t in terms:
        r = _row_sums(z, t.rows, t.m) - t.y
        total += 0.5 * float(np.sum(t.w * r**2))
        g += (t.w * r)[:, t.rows]
    return total, g


def _fw_gap(terms, z, support, mass, axis, g=None) -> float:
    """The Frank-Wolfe gap of the loss at ``z`` over the support (loss units)."""
    g = _loss_grad(terms, z)[1] if g is None else g
    lo = np.min(np.where(support, g, np.inf), axis=axis)
    lo = np.where(np.isfinite(lo), lo, 0.0)
    return float(np.sum(z * g) - np.sum(mass * lo))


def _row_max(terms: tuple[Term, ...]) -> float:
    """The largest weighted row count of the terms (a bound on the loss's curvature)."""
    return max(float(np.max(np.bincount(t.rows, minlength=t.m)[None, :] * t.w)) for t in terms)


def _mirror_descent(terms, x, mass, axis, eta, chi, max_iter, gap_tol):
    """Entropic mirror descent from ``x``, first step ``eta``: ``(x, steps, gap)``.

    Each step multiplies ``x`` by ``exp(-eta G)`` and renormalises each child's total
    (``axis`` 1, the root) or each cell's column to the parent (``axis`` 0); a step that
    raises the loss is halved, an accepted one lengthened by a quarter.
    """
    support = x > 0
    with np.errstate(divide="ignore"):
        logx = np.where(support, np.log(np.where(support, x, 1.0)), -np.inf)
    loss, g = _loss_grad(terms, x)
    it, gp = 0, _fw_gap(terms, x, support, mass, axis, g)
    while gp * chi > gap_tol and it < max_iter:
        it += 1
        while True:
            cand = logx - eta * g
            cand = cand - np.expand_dims(_logsumexp(cand, axis), axis)
            with np.errstate(divide="ignore"):
                cand = cand + np.expand_dims(np.log(mass), axis)
            xn = np.where(support, np.exp(cand), 0.0)
            ln, gn = _loss_grad(terms, xn)
            if ln <= loss or eta < 1e-300:
                break
            eta *= 0.5
        logx, x, loss, g = cand, xn, ln, gn
        eta *= 1.25
        gp = _fw_gap(terms, x, support, mass, axis, g)
    return x, it, gp


@dataclass(frozen=True)
class Choice:
    """What ``auto`` chose for one subproblem, and why.

    Attributes:
        estimator: ``"ls"`` or ``"maxent"``.
        errors: per estimator, its estimated squared error of the measured answers in
            noise-variance units (:class:`Selection` ``risk``); ``{}`` when every query
            entered the model at full resolution (both fit the same marginals).
        selection: the maximum-entropy model behind the choice.
    """

    estimator: str
    errors: dict[str, float]
    selection: Selection | None = None


def choose_estimator(sub: Subproblem, *, coarse: Coarsenings = ()) -> Choice:
    """``auto``: least squares or maximum entropy for this subproblem, from the noise law.

    Least squares fits every measured row, so it passes each query's whole noise into
    its estimate; maximum entropy fits each query at the resolution whose estimated risk
    (:func:`select_model`, computed from the noisy answers and the public variances) is
    least. When every query enters at full resolution both fit the same marginals and
    least squares (the production method) is kept; otherwise the estimated risk of
    maximum entropy is below that of least squares by construction, and it is chosen.
    No solve is needed to decide: one pass over the answers.
    """
    sub = merge_repeats(sub)
    if sub.c == 0 or (sub.parent is not None and sub.k == 1):
        return Choice("ls", {})
    sel = select_model(sub, compress(sub), coarse)
    if sel.full:
        return Choice("ls", {}, sel)
    return Choice("maxent", dict(sel.risk), sel)


DEFAULT_ESTIMATORS: dict[str, str] = {"dhc-lite": "auto", "dhcp-hhgq": "auto"}
"""The estimator of a release that names none, by schema (least squares otherwise).

``dhc-lite``'s cell-level query has 233,856 rows (``dhcp-hhgq``'s, the 2010 DDP's,
467,712), far more than the persons of most units, so at every budget some of its
queries are below their noise somewhere and ``auto`` (maximum entropy there, least
squares where every query is informative) is the default. ``pl94`` keeps least squares,
as production does."""


def default_estimator(schema_name: str) -> str:
    """The estimator of a release of ``schema_name`` that names none."""
    return DEFAULT_ESTIMATORS.get(schema_name, "ls")


def check_estimator(name: str) -> str:
    """``name`` if it is one of :data:`ESTIMATORS` (a bug in the caller otherwise)."""
    if name not in ESTIMATORS:
        raise InternalError(f"estimator must be one of {ESTIMATORS}, got {name!r}")
    return name


def solve_maxent(
    sub: Subproblem, estimator: str, *, method: str = "auto", coarse: Coarsenings = ()
) -> RealSolution | None:
    """The real-valued estimate of ``sub`` for ``estimator`` ``"maxent"`` or ``"auto"``.

    Returns an :class:`~censusdp.release.topdown.solvers.base.RealSolution` with ``method =
    "maxent"`` (``status`` ``"optimal"`` when converged, else ``"max_iter"``), or
    ``None`` when ``auto`` chose least squares (the caller runs its chain). ``coarse``:
    the queries' candidate coarsenings (:data:`Coarsenings`). ``method`` is unused (the
    least-squares method of the caller's chain).
    """
    del method
    t0 = time.perf_counter()
    check_estimator(estimator)
    if sub.parent is not None and sub.k == 1:
        if estimator == "auto":
            return None
        x = sub.parent.astype(np.float64)[None, :]
        res = MaxentResult(x, (), 0, 0.0, "exact")
    else:
        merged, mc = merge_repeats(sub, coarse)
        comp = compress(merged)
        if estimator == "auto":
            choice = choose_estimator(merged, coarse=mc)
            if choice.estimator == "ls":
                return None
            res = maxent_point(merged, comp, terms=choice.selection.terms)
        else:
            res = maxent_point(merged, comp, coarse=mc)
    return RealSolution(
        x=res.x,
        status="optimal" if res.status != "max_iter" else "max_iter",
        method="maxent" if res.status != "exact" else "parent",
        iterations=res.iterations,
        seconds=time.perf_counter() - t0,
        max_violation=sub.max_violation(res.x),
        objective=sub.objective(res.x),
        solver_status=f"{res.status}; model {list(res.terms)}; gap {res.gap:.3g}",
        attempts=(("maxent", res.status),),
    )


ORDINAL_WIDTHS: dict[str, tuple[int, ...]] = {"age": (2, 5, 10, 20, 40)}
"""Ordered attributes whose levels a query may be fitted in bins of these widths, when
single levels are too noisy to fit (:func:`select_model` picks by estimated risk)."""
MAX_COARSENED_ROWS = 4096
"""Queries with more rows (the cell-level ``detailed``) get no coarsenings."""


def coarsenings_for(schema, names: list[str] | tuple[str, ...]) -> Coarsenings:
    """The candidate coarsenings of the queries ``names`` of ``schema``.

    A query over an attribute of :data:`ORDINAL_WIDTHS` (``sex*age``) gets one candidate
    per width: its rows merged into bins of that many consecutive levels, the other
    attributes kept (``sex`` x ten-year age groups).
    """
    from censusdp.data.queries import make_query

    out = []
    for name in names:
        q = make_query(schema, name)
        cands: list[tuple[str, np.ndarray]] = []
        ordinal = [v for v in q.variables if v in ORDINAL_WIDTHS]
        if ordinal and q.n_rows <= MAX_COARSENED_ROWS:
            var = ordinal[0]
            rest = [v for v in q.variables if v != var]
            other = make_query(schema, "*".join(rest)) if rest else make_query(schema, "total")
            level = schema.cell_levels(var)
            size = schema.variable(var).size
            for width in ORDINAL_WIDTHS[var]:
                nb = -(-size // width)
                row_bins = np.zeros(q.n_rows, dtype=np.int64)
                row_bins[q.row_of_cell] = other.row_of_cell * nb + level // width
                cands.append((f"{var}/{width}", row_bins))
        out.append(tuple(cands))
    return tuple(out)
