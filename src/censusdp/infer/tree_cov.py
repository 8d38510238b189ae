"""GLS variances of sums of bottom units: any geography made of blocks, without a dense matrix.

A tabulation block group on the optimized spine, a county split into AIAN and non-AIAN
parts, a place or a redistricting district is a set ``D`` of blocks. Its GLS estimate is
the sum of the blocks' estimates (the GLS is linear and consistent), and its variance
needs the covariances between the blocks' estimates, which the two-pass tree algorithm
(:mod:`censusdp.infer.gls`) never forms. They follow from the same passes.

**The recursion.** The downward pass says that, given the true histogram ``x_u`` of a
unit, its children are

    x_c = xhat_c + G_c (x_u - s_u) + eps_c,   G_c = P_c S_u^+,
    Cov(eps_c, eps_c') = delta_cc' P_c - P_c S_u^+ P_c',

independent of ``x_u`` and of everything outside ``u``'s subtree (``xhat_c``, ``P_c``
the upward estimate and covariance of ``c``; ``s_u``, ``S_u`` their sums over ``u``'s
children). So for a line ``t``, the sum over the blocks of ``D`` below ``u`` is
``a_u' x_u + const + noise`` with noise of variance ``V_u`` independent of ``x_u``:
at a block ``a = t`` (in ``D``) or 0, ``V = 0``; and going up,

    w_u = sum_c P_c a_c,   a_u = S_u^+ w_u,   V_u = sum_c (V_c + a_c' P_c a_c) - w_u' a_u.

A child that carries no information of its own (a spine release's bypassed single
child) is its parent: ``a_u += a_c``, ``V_u += V_c``. A sibling group (a state's AIAN
and non-AIAN parts, their total exact: :class:`~censusdp.infer._constraints.SiblingGroups`)
is a node between its members and their parent, as in the passes: its members go up
into it (``S_g^+``), and it goes up into the parent with its conditioned covariance
``P_g``. At the root, ``Var = a' Ptilde a + V``. For a single unit this reproduces the tree's own variance;
``tests/infer/test_tree_cov.py`` checks any set against the dense solve.

**Cost.** Every operator is in the block algebra of :mod:`censusdp.infer._algebra`
(``B`` blocks of ``d x d``), and a line ``t = t_L (x) s`` keeps its simple part: only
``t_L`` is transformed, one ``d``-vector per block, and
``t' P t = sum_a (t_L' P_a t_L) coef[line, a]`` as in
:class:`~censusdp.infer.gls.LineSet`. So the state of a pair (unit, target) is a
``(K, B, d)`` array for the ``K`` distinct general indicators of the lines (a few),
whatever the number of lines. The work is one small matrix product per (unit, target)
pair: the blocks once, then the units above them, for every target geography at once
(a partition of the blocks: each block in at most one target).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.errors import InternalError
from censusdp.infer._lines import LineSet

__all__ = ["TreeFactors", "partition_variances"]


@dataclass(eq=False)
class TreeFactors:
    """What the GLS covariance of a sum of bottom units needs (:func:`partition_variances`).

    Filled by :func:`censusdp.infer.gls.tree_gls` (``factors=``): per level below the root, every unit's
    upward covariance ``P_c`` (a table of operators and each unit's entry) and whether it
    carries information (a bypassed single child does not: it is its parent); per level
    above the bottom, the pseudo-inverse of its children's summed covariance ``S_u^+``;
    and the root's final covariance; with sibling groups, their members' group, each
    group's ``S_g^+``, conditioned covariance ``P_g`` and parent (:meth:`add_groups`).
    """

    tables: dict[int, list[np.ndarray]] = field(default_factory=dict)
    index: dict[int, list[np.ndarray]] = field(default_factory=dict)
    informed: dict[int, list[np.ndarray]] = field(default_factory=dict)
    child_pinv: dict[int, np.ndarray] = field(default_factory=dict)
    root_cov: np.ndarray | None = None
    groups: tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None

    def add_groups(
        self,
        level: int,
        group: np.ndarray,
        pinv: np.ndarray,
        cov: np.ndarray,
        parent: np.ndarray,
    ) -> None:
        """Record the sibling groups of ``level``: each unit's group (``-1``: none), and
        per group ``S_g^+``, the conditioned covariance ``P_g`` and the parent."""
        self.groups = (level, np.asarray(group, dtype=np.int64), pinv, cov, parent)

    def add_up(
        self, level: int, table: np.ndarray, index: np.ndarray, informed: np.ndarray | None
    ) -> None:
        """Record one upward task's covariances (units in order)."""
        offset = sum(t.shape[0] for t in self.tables.get(level, []))
        self.tables.setdefault(level, []).append(table)
        self.index.setdefault(level, []).append(np.asarray(index, dtype=np.int64) + offset)
        inf = np.ones(index.size, dtype=bool) if informed is None else np.asarray(informed, bool)
        self.informed.setdefault(level, []).append(inf)

    def level(self, level: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(table, index, informed)`` of a level below the root (units in order)."""
        return (
            np.concatenate(self.tables[level]),
            np.concatenate(self.index[level]),
            np.concatenate(self.informed[level]),
        )


def _scatter(keys: np.ndarray, n_keys: int, weights: np.ndarray | None = None) -> sp.csr_matrix:
    """``(n_keys, rows)`` sparse sum operator: row ``i`` goes to ``keys[i]``."""
    n = keys.size
    w = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)
    return sp.csr_matrix((w, (keys, np.arange(n))), shape=(n_keys, n))


def _sum(op: sp.csr_matrix, values: np.ndarray) -> np.ndarray:
    """``op @ values`` over the first axis of any-shaped ``values``."""
    flat = values.reshape(values.shape[0], -1)
    return np.asarray(op @ flat).reshape((op.shape[0], *values.shape[1:]))


def _bmv(ops: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Block matrix-vector products: ``ops (n, B, d, d)`` on ``v (n, K, B, d)``."""
    return np.einsum("nbij,nkbj->nkbi", ops, v, optimize=True)


def _pairs(node: np.ndarray, target: np.ndarray, n_targets: int) -> tuple[np.ndarray, np.ndarray]:
    """Unique (node, target) keys and each row's key index."""
    key = node.astype(np.int64) * (n_targets + 1) + target
    uniq, inverse = np.unique(key, return_inverse=True)
    return uniq, inverse.reshape(-1)


def partition_variances(
    factors: TreeFactors,
    hierarchy: Hierarchy,
    lines: LineSet,
    target: np.ndarray,
    n_targets: int,
) -> np.ndarray:
    """GLS variance of every line summed over the bottom units of each target.

    Args:
        factors: filled by :func:`censusdp.infer.gls.tree_gls` (``factors=``).
        hierarchy: the hierarchy the GLS ran on.
        lines: the lines reported (the ``lines`` given to the GLS).
        target: ``(bottom units,)`` target of each bottom unit (``-1``: in none).
        n_targets: number of targets.

    Returns:
        ``(n_targets, lines)`` variances (0 for a target with no unit, and for lines the
        constraints determine exactly, up to rounding).
    """
    bottom = hierarchy.n_levels - 1
    target = np.asarray(target, dtype=np.int64)
    if target.shape != (hierarchy.n_units(bottom),):
        raise InternalError(f"target has shape {target.shape}, expected one per bottom unit")
    if factors.root_cov is None:
        raise InternalError("the GLS factors are incomplete (exhaust tree_gls first)")
    g = lines.general  # (K, d)
    n_blocks = factors.root_cov.shape[1]
    out_shape = (n_targets, g.shape[0], n_blocks)
    if bottom == 0:
        v = np.broadcast_to(g[None, :, None, :], (target.size, g.shape[0], n_blocks, g.shape[1]))
        q = np.einsum("nkbi,nkbi->nkb", v, _bmv(factors.root_cov, np.ascontiguousarray(v)))
        keep = target >= 0
        qsum = _sum(_scatter(target[keep], n_targets), q[keep])
        return _lines_of(qsum, lines)
    if target.size == 0 or (target < 0).all():
        return np.zeros((n_targets, len(lines)))

    # -- the bottom: every block of a target starts from the same vector t_L ------------------
    table, index, informed = factors.level(bottom)
    sel = np.flatnonzero(target >= 0)
    pv_t = np.einsum("tbij,kj->tkbi", table, g, optimize=True)  # (T, K, B, d)
    quad_t = np.einsum("tkbi,ki->tkb", pv_t, g)  # (T, K, B)
    uniq, inv = _pairs(hierarchy.parent[bottom][sel], target[sel], n_targets)
    node, tgt = uniq // (n_targets + 1), uniq % (n_targets + 1)
    inf = informed[sel]
    # (pairs x table entries) counts of informed blocks; uninformed blocks pass through
    counts = sp.csr_matrix(
        (np.ones(int(inf.sum())), (inv[inf], index[sel][inf])), shape=(uniq.size, table.shape[0])
    )
    w = _sum(counts, pv_t)
    var = _sum(counts, quad_t)
    passed = np.bincount(inv[~inf], minlength=uniq.size).astype(np.float64)
    a = _bmv(factors.child_pinv[bottom - 1][node], w)
    var = var - np.einsum("nkbi,nkbi->nkb", w, a)
    a = a + passed[:, None, None, None] * g[None, :, None, :]

    # -- up the levels --------------------------------------------------------------------------
    for level in range(bottom - 1, 0, -1):
        table, index, informed = factors.level(level)
        parent = hierarchy.parent[level]
        if factors.groups is not None and factors.groups[0] == level:
            # members into their groups: entries n_units + g stand for the groups
            node, tgt, a, var = _into_groups(
                factors.groups, table, index, node, tgt, a, var, n_targets
            )
            table, index, informed, parent = _with_groups(
                factors.groups, table, index, informed, parent
            )
        p = table[index[node]]
        pv = _bmv(p, a)
        quad = np.einsum("nkbi,nkbi->nkb", a, pv)
        uniq, inv = _pairs(parent[node], tgt, n_targets)
        inf = informed[node]
        with_info = _scatter(inv, uniq.size, inf)
        without = _scatter(inv, uniq.size, ~inf)
        w = _sum(with_info, pv)
        new_var = _sum(with_info, var + quad) + _sum(without, var)
        node, tgt = uniq // (n_targets + 1), uniq % (n_targets + 1)
        new_a = _bmv(factors.child_pinv[level - 1][node], w)
        var = new_var - np.einsum("nkbi,nkbi->nkb", w, new_a)
        a = new_a + _sum(without, a)

    # -- the root ---------------------------------------------------------------------------------
    q = var + np.einsum("nkbi,nkbi->nkb", a, _bmv(factors.root_cov[node], a))
    total = np.zeros(out_shape)
    np.add.at(total, tgt, q)
    return _lines_of(total, lines)


def _into_groups(
    groups: tuple,
    table: np.ndarray,
    index: np.ndarray,
    node: np.ndarray,
    tgt: np.ndarray,
    a: np.ndarray,
    var: np.ndarray,
    n_targets: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One step of the recursion from the members of sibling groups into their groups
    (``w_g = sum P_c a_c``, ``a_g = S_g^+ w_g``,
    ``V_g = sum (V_c + a_c' P_c a_c) - w_g' a_g``); other units pass unchanged. A group
    is then node ``n_units + g`` of the level."""
    _, group, pinv, _, _ = groups
    n_units = group.size
    g = group[node]
    inside = g >= 0
    if not inside.any():
        return node, tgt, a, var
    pv = _bmv(table[index[node[inside]]], a[inside])
    quad = np.einsum("nkbi,nkbi->nkb", a[inside], pv)
    uniq, inv = _pairs(g[inside], tgt[inside], n_targets)
    gather = _scatter(inv, uniq.size)
    w = _sum(gather, pv)
    gnode, gtgt = uniq // (n_targets + 1), uniq % (n_targets + 1)
    ga = _bmv(pinv[gnode], w)
    gvar = _sum(gather, var[inside] + quad) - np.einsum("nkbi,nkbi->nkb", w, ga)
    out = ~inside
    return (
        np.concatenate([node[out], n_units + gnode]),
        np.concatenate([tgt[out], gtgt]),
        np.concatenate([a[out], ga]),
        np.concatenate([var[out], gvar]),
    )


def _with_groups(
    groups: tuple, table: np.ndarray, index: np.ndarray, informed: np.ndarray, parent: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A level's ``(table, index, informed, parent)`` with the groups appended as units."""
    _, group, _, cov, gparent = groups
    n = cov.shape[0]
    return (
        np.concatenate([table, cov]),
        np.concatenate([index, table.shape[0] + np.arange(n)]),
        np.concatenate([informed, np.ones(n, dtype=bool)]),
        np.concatenate([parent, gparent]),
    )


def _lines_of(q: np.ndarray, lines: LineSet) -> np.ndarray:
    """``(targets, K, B)`` quadratic forms -> ``(targets, lines)`` variances."""
    return np.einsum("nlb,lb->nl", q[:, lines.line_general, :], lines.coef)
