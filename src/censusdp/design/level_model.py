"""The error of one geolevel's measurements (``censusdp design allocation``'s model).

:class:`LevelErrorModel` gives the weighted GLS error ``C_l(s) = tr(A_l (sum_q s_q
G_q)^{-1})`` of target tables answered from the queries measured at one geounit, for
query shares ``s``, and its gradient, without forming a ``cells x cells`` matrix: every
query is a product of partitions of each attribute's levels, so every ``G_q`` is block
diagonal over tensor components of atoms and their contrasts (the derivation is in
:mod:`censusdp.design.allocation`). :func:`solve_level` minimises it on the simplex
(SLSQP, then the multiplicative algorithm, with the general equivalence theorem's gap);
:func:`rationalize` turns shares into exact fractions of one denominator.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
from scipy.optimize import minimize

from censusdp.data.queries import make_query
from censusdp.data.schema import Recode, Schema
from censusdp.design._errors import DesignError

__all__ = ["LevelErrorModel", "query_partitions", "rationalize", "solve_level"]


def query_partitions(schema: Schema, name: str) -> tuple[np.ndarray, ...]:
    """For every attribute, the partition of its levels that query ``name`` induces.

    A query groups cells by attributes and recodes; on attribute ``i`` its partition is
    the common refinement of the attribute itself (identity) if used, the recodes of
    ``i`` it uses, and nothing (one group: summed out) otherwise. Returned as a group
    index per level, numbered from 0 in order of first appearance.
    """
    query = make_query(schema, name)
    out = []
    for attr in schema.attributes:
        labels = np.zeros(attr.size, dtype=np.int64)
        for v in query.variables:
            var = schema.variable(v)
            if isinstance(var, Recode):
                if var.source != attr.name:
                    continue
                mapping = np.asarray(var.mapping, dtype=np.int64)
            elif var.name == attr.name:
                mapping = np.arange(attr.size, dtype=np.int64)
            else:
                continue
            labels = labels * (int(mapping.max()) + 1) + mapping
        out.append(np.unique(labels, return_inverse=True)[1].astype(np.int64))
    return tuple(out)


def _indicator(labels: np.ndarray) -> np.ndarray:
    k = int(labels.max()) + 1
    m = np.zeros((k, labels.size))
    m[labels, np.arange(labels.size)] = 1.0
    return m


class LevelErrorModel:
    """The block decomposition of every query Gram matrix over one schema.

    Args:
        schema: the schema.
        queries: every query name that will be measured or targeted.
    """

    def __init__(self, schema: Schema, queries: Sequence[str]) -> None:
        self.schema = schema
        names = list(dict.fromkeys(queries))
        self._parts = {q: query_partitions(schema, q) for q in names}
        self._rows = {q: make_query(schema, q).n_rows for q in names}
        # per attribute: atoms (common refinement of non-identity partitions), the
        # orthonormal atom basis E (n x a), and the complement's dimension
        self._bases: list[np.ndarray] = []
        self._perp: list[int] = []
        for i, attr in enumerate(schema.attributes):
            labels = np.zeros(attr.size, dtype=np.int64)
            for parts in self._parts.values():
                p = parts[i]
                if int(p.max()) + 1 == attr.size:  # identity: not refined by
                    continue
                labels = labels * (int(p.max()) + 1) + p
            atoms = np.unique(labels, return_inverse=True)[1]
            ind = _indicator(atoms)
            self._bases.append((ind / np.sqrt(ind.sum(axis=1, keepdims=True))).T)
            self._perp.append(attr.size - ind.shape[0])
        comps = []
        for choice in itertools.product((0, 1), repeat=len(schema.attributes)):
            mult = 1
            for i, c in enumerate(choice):
                if c == 1:
                    mult *= self._perp[i]
            if mult > 0:
                comps.append((choice, mult))
        self.components: tuple[tuple[tuple[int, ...], int], ...] = tuple(comps)
        self._blocks: dict[str, list[np.ndarray]] = {}
        self._stacks: dict[tuple[str, ...], list[np.ndarray]] = {}

    def rows(self, query: str) -> int:
        """Number of cells (rows) of a query."""
        return self._rows[query]

    def blocks(self, query: str) -> list[np.ndarray]:
        """``G_q`` restricted to every component (same order as :attr:`components`)."""
        if query not in self._blocks:
            parts = self._parts[query]
            per_attr = []
            for i, p in enumerate(parts):
                ind = _indicator(p)
                on_u = (ind @ self._bases[i]).T @ (ind @ self._bases[i])
                identity = int(p.max()) + 1 == p.size
                per_attr.append((on_u, 1.0 if identity else 0.0))
            out = []
            for choice, _ in self.components:
                m = np.ones((1, 1))
                for i, c in enumerate(choice):
                    m = np.kron(m, per_attr[i][0] if c == 0 else np.array([[per_attr[i][1]]]))
                out.append(m)
            self._blocks[query] = out
        return self._blocks[query]

    def stacked(self, queries: Sequence[str]) -> list[np.ndarray]:
        """For every component, the blocks of ``queries`` stacked: ``(len(queries), d, d)``."""
        key = tuple(queries)
        if key not in self._stacks:
            per_query = [self.blocks(q) for q in queries]
            self._stacks[key] = [
                np.stack([b[k] for b in per_query]) for k in range(len(self.components))
            ]
        return self._stacks[key]

    def level_error(
        self, shares: Sequence[tuple[str, float]], targets: Sequence[tuple[str, float]]
    ) -> tuple[float, np.ndarray]:
        """``C(s) = tr(A M(s)^{-1})`` and ``d_q = tr(M^{-1} A M^{-1} G_q)`` for every query.

        Args:
            shares: ``(query, s_q)``; ``M(s) = sum_q s_q G_q``.
            targets: ``(query, w_T / r_T)``; ``A = sum_T (w_T / r_T) G_T``.

        Raises:
            DesignError: when a target is not estimable from the measured queries.
        """
        s = np.array([v for _, v in shares], dtype=float)
        c = np.array([v for _, v in targets], dtype=float)
        m_stack = self.stacked([q for q, _ in shares])
        a_stack = self.stacked([q for q, _ in targets])
        total = 0.0
        grads = np.zeros(len(shares))
        for (_, mult), gq, gt in zip(self.components, m_stack, a_stack, strict=True):
            a = np.tensordot(c, gt, axes=1)
            if not np.any(a):
                continue
            vals, vecs = np.linalg.eigh(np.tensordot(s, gq, axes=1))
            cut = 1e-12 * max(float(vals.max()), 1e-300)
            keep = vals > cut
            minv = (vecs[:, keep] / vals[keep]) @ vecs[:, keep].T
            proj = vecs[:, keep] @ vecs[:, keep].T
            if np.abs(a - proj @ a @ proj).max() > 1e-9 * max(float(np.abs(a).max()), 1.0):
                raise DesignError(
                    "a target table is not estimable from the queries measured at its "
                    "geolevel (some direction of the histogram it reads is never measured)"
                )
            total += mult * float(np.sum(a * minv))
            grads += mult * np.einsum("ij,qij->q", minv @ a @ minv, gq)
        return total, grads


def solve_level(
    model: LevelErrorModel,
    queries: list[str],
    start: np.ndarray,
    targets: list[tuple[str, float]],
    *,
    tol: float,
    max_iter: int,
) -> tuple[np.ndarray, float, float, int]:
    """Minimise ``C(s)`` on the simplex: SLSQP with the analytic gradient, then the
    multiplicative algorithm until the equivalence-theorem gap is below ``tol``.

    Returns ``(s, C(s), gap, iterations)`` with ``gap = max_q d_q / C - 1``.
    """

    def evaluate(s: np.ndarray) -> tuple[float, np.ndarray]:
        return model.level_error(list(zip(queries, s, strict=True)), targets)

    s = start / start.sum()
    value, d = evaluate(s)
    scale = value
    its = 0
    if len(queries) > 1:

        def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
            x = np.clip(x, 0.0, None)
            try:
                v, g = evaluate(x / x.sum())
            except DesignError:  # left the support: a needed query has share 0
                return 1e12, np.zeros_like(x)
            return v / scale, -g / scale

        res = minimize(
            fun,
            s,
            jac=True,
            method="SLSQP",
            bounds=[(0.0, 1.0)] * len(queries),
            constraints=[{"type": "eq", "fun": lambda x: x.sum() - 1.0, "jac": np.ones_like}],
            options={"maxiter": 500, "ftol": 1e-14},
        )
        its += int(res.nit)
        cand = np.clip(res.x, 0.0, None)
        cand = cand / cand.sum()
        try:
            cv, cd = evaluate(cand)
            if cv < value:
                s, value, d = cand, cv, cd
        except DesignError:
            pass
    gap = float(d.max() / value - 1.0) if value > 0 else 0.0
    # multiplicative polishing (Yu 2010): monotone, and lets near-zero shares recover
    s = np.maximum(s, 1e-12)
    s = s / s.sum()
    value, d = evaluate(s)
    gap = float(d.max() / value - 1.0) if value > 0 else 0.0
    while its < max_iter and gap > tol:
        step = s * np.sqrt(np.clip(d, 0.0, None))
        s = step / step.sum()
        value, d = evaluate(s)
        gap = float(d.max() / value - 1.0)
        its += 1
    return s, value, gap, its


def rationalize(values: Sequence[float], denominator: int) -> list[Fraction]:
    """Shares as fractions ``k / denominator`` summing to exactly 1 (largest remainder).

    Values that round to 0 stay 0 (the caller drops them).
    """
    v = np.asarray(values, dtype=float)
    v = v / v.sum()
    raw = v * denominator
    base = np.floor(raw).astype(np.int64)
    short = denominator - int(base.sum())
    order = np.argsort(-(raw - base), kind="stable")
    base[order[:short]] += 1
    return [Fraction(int(k), denominator) for k in base]
