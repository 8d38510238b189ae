"""The rounding network of a nested chain of marginal queries (internal).

The single-pass rounding network (:mod:`censusdp.release.topdown._flow`) has one layer of
group nodes between the cells and the child. When the rounding also weighs marginal
queries (production's multipass rounder), and those queries are *nested* -- every one
refines the next coarser, as ``detailed`` refines ``hhgq*hispanic*cenrace`` refines
``hhgq*hispanic`` refines ``hhgq`` refines ``total`` -- their answers are the flows of a
tree of layers:

    cell j --X[i,j]--> (i, finest row) --> ... --> (i, hhgq row) --[L, U]--> ... --> child i --[T]--> sink

so the rounding of every pass is still a min-cost flow on a network whose incidence
matrix is totally unimodular (integral optimum). On the arc that carries the answer
``a`` of row ``r`` of a query in the current pass, the cost ``|a - target|`` is two
parallel arcs (slopes ``-1`` up to the target, ``+1`` beyond); an arc that also has bounds
(group bounds, total bounds, an answer held by an earlier pass) is split by a middle
node so that the bounds apply to the sum.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from censusdp.errors import ConfigError
from censusdp.release.topdown import _flow
from censusdp.release.topdown.problem import Subproblem

__all__: list[str] = []

_EVERY_LAYER = False
"""``True``: every layer gets nodes in every pass and every weighted row a middle node,
as the network was built before :func:`network` left them out (for
``benchmarks/bench_whole_family.py --rounder before``; the same optimum)."""


def _compress(labels: np.ndarray) -> tuple[np.ndarray, int]:
    present, inverse = np.unique(labels, return_inverse=True)
    return inverse.astype(np.int64), int(present.size)


def _refines(a: np.ndarray, b: np.ndarray) -> bool:
    """True when partition ``a`` refines ``b``: cells with one ``a`` label share a ``b`` label."""
    if a.size == 0:
        return True
    # one pass over the cells: each a label's b label (the last written) must be every
    # one of its cells' (a sort of (a, b) pairs took 0.1 s on a 905,184-cell DHC root,
    # several times per rounding)
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    seen = np.empty(int(a.max()) + 1, dtype=np.int64)
    seen[a] = b
    return bool((seen[a] == b).all())


@dataclass
class Level:
    """One layer of the chain: a partition of the kept cells into rows.

    Attributes:
        labels: ``(c,)`` row of every kept cell.
        n_rows: number of rows (the group layer keeps every group, even without cells).
        kind: ``"query"``, ``"group"`` or ``"total"``.
        members: the rounding queries (indices) whose answers this layer carries.
    """

    labels: np.ndarray
    n_rows: int
    kind: str
    members: list[int]


@dataclass
class Chain:
    """The nested layers of a subproblem's rounding queries, finest first, total last.

    Attributes:
        levels: the layers above the cells.
        cell_members: queries that are the cells themselves (``detailed``).
    """

    levels: list[Level]
    cell_members: list[int]


def build_chain(sub: Subproblem, rows: tuple[np.ndarray, ...], names: tuple[str, ...]) -> Chain:
    """Order the rounding queries, the group attribute and the total into one chain.

    Raises:
        ConfigError: when two of them are not nested on the kept cells (no network).
    """
    c = sub.c
    group = Level(sub.groups.copy(), sub.G, "group", [])
    total = Level(np.zeros(c, dtype=np.int64), 1, "total", [])
    levels = [group, total]
    cell_members: list[int] = []
    for q, r in enumerate(rows):
        labels, n = _compress(r)
        if n == c and c > 0:
            cell_members.append(q)
            continue
        for lev in levels:
            if _refines(labels, lev.labels) and _refines(lev.labels, labels):
                lev.members.append(q)
                break
        else:
            levels.append(Level(labels, n, "query", [q]))
    # the group layer keeps absent groups (their bounds still apply); order by present rows
    levels.sort(key=lambda lev: (-np.unique(lev.labels).size, lev.kind == "total"))
    for fine, coarse in zip(levels[:-1], levels[1:], strict=True):
        if not _refines(fine.labels, coarse.labels):

            def name(lev: Level) -> str:
                if lev.members:
                    return repr(names[lev.members[0]])
                return "the group attribute" if lev.kind == "group" else "'total'"

            raise ConfigError(
                f"subproblem {sub.label!r}: rounding queries {name(fine)} and {name(coarse)} "
                "are not nested (neither refines the other), so the rounding passes are not "
                "a network flow; use nested queries or passes='single'"
            )
    return Chain(levels, cell_members)


@dataclass
class PassCosts:
    """What one rounding pass weighs and holds.

    Attributes:
        cellwise: add the cell-wise cost ``|X - x|`` (``detailed`` is in the pass).
        weight: per query, its multiplicity in this pass's objective (0 if absent).
        held: per query, the integer answers ``(k, rows)`` fixed by an earlier pass, or
            ``None``; for a cell query the ``(k, c)`` cells.
        every_cell: in the box, every kept cell may move up by one (production's binary
            variable on every cell where the parent is positive), not only the
            fractional cells.
    """

    cellwise: bool
    weight: np.ndarray
    held: list[np.ndarray | None]
    every_cell: bool = False


def _row_sum(x: np.ndarray, labels: np.ndarray, n: int) -> np.ndarray:
    k = x.shape[0]
    out = np.zeros((k, n), dtype=x.dtype)
    if x.size:
        np.add.at(out.T, labels, x.T)
    return out


def _layer_bounds(
    sub: Subproblem, lev: Level, costs: PassCosts, base: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(k, rows)`` lower and upper bounds of a layer's answers less ``base``'s: the group
    or total bounds, and the answers an earlier pass holds (``INF_CAP``: none)."""
    k, n, inf = sub.k, lev.n_rows, _flow.INF_CAP
    lo = np.zeros((k, n), dtype=np.int64)
    hi = np.full((k, n), inf, dtype=np.int64)
    if lev.kind == "group":
        lo, hi = _flow.int_bounds(sub.group_lower, sub.group_upper)
    elif lev.kind == "total":
        tl, tu = _flow.int_bounds(sub.total_lower, sub.total_upper)
        lo, hi = tl.reshape(k, 1), tu.reshape(k, 1)
    for q in lev.members:
        if costs.held[q] is not None:
            v = costs.held[q].astype(np.int64)
            lo = np.maximum(lo, v)
            hi = np.minimum(hi, v)
    base_ans = _row_sum(base, lev.labels, n)
    return np.maximum(lo - base_ans, 0), np.where(hi >= inf, inf, hi - base_ans)


def network(
    sub: Subproblem,
    chain: Chain,
    costs: PassCosts,
    x: np.ndarray,
    *,
    box: bool,
    scale: int,
) -> tuple[_flow.Network, slice, np.ndarray, np.ndarray] | None:
    """The min-cost flow network of one rounding pass.

    Only the layers the pass weighs or bounds get nodes: a layer with neither (a query of
    a later pass, not yet held) only passes its rows' flows on, so the cells' flows go
    to the next layer that does (the same flows, the same costs; on the 400-tract family
    the total's pass has 4,545 nodes instead of 258,945). A weighted row gets a middle
    node only where it also has bounds.

    Long because the network is one numbering of nodes and arcs (the cell arcs, then each
    layer's arcs with their middle nodes, then the supplies) whose offsets every block
    reads; split into functions, each would take and return the node numbering and the
    five arc lists.

    Returns:
        ``(network, cell arc slice, cell arc variable indices, base)`` where
        ``X = base + flows on the cell arcs`` (scattered to the variable indices), or
        ``None`` when the pass's fixed bounds leave no flow (the box is too tight).
    """
    k, c = sub.k, sub.c
    root = sub.parent is None
    inf = _flow.INF_CAP
    f = np.floor(x)
    phi = x - f
    fi = f.astype(np.int64)
    base = fi if box else np.zeros_like(fi)
    # the layers of this pass: weighted or bounded somewhere (the last always), with bounds
    layers = []
    for li, lev in enumerate(chain.levels):
        lo_off, hi_off = _layer_bounds(sub, lev, costs, base)
        if (hi_off < lo_off).any():
            return None
        w = int(sum(costs.weight[q] for q in lev.members))
        bounded = (lo_off > 0) | (hi_off < inf)
        if _EVERY_LAYER:
            bounded = np.ones_like(bounded)
        if w or bounded.any() or li + 1 == len(chain.levels):
            layers.append((lev, lo_off, hi_off, bounded, w))
    # node numbering: [cells or source] [per layer: k * rows in-nodes] [mid nodes] [sink]
    first = 1 if root else c
    starts = []
    n_nodes = first
    for lev, *_ in layers:
        starts.append(n_nodes)
        n_nodes += k * lev.n_rows
    tails: list[np.ndarray] = []
    heads: list[np.ndarray] = []
    lows: list[np.ndarray] = []
    ups: list[np.ndarray] = []
    arc_costs: list[np.ndarray] = []

    def add(t, h, lo, hi, cost) -> slice:
        t = np.asarray(t, dtype=np.int64).ravel()
        n = t.size
        s = sum(a.size for a in tails)
        tails.append(t)
        heads.append(_flow.column(h, n))
        lows.append(_flow.column(lo, n))
        ups.append(_flow.column(hi, n))
        arc_costs.append(_flow.column(cost, n))
        return slice(s, s + n)

    # -- cell arcs ------------------------------------------------------------------------
    w_cell = int(sum(costs.weight[q] for q in chain.cell_members))
    target_cell = np.rint(phi) if box else np.rint(x)  # production: round(frac) per cell
    child = np.repeat(np.arange(k, dtype=np.int64), c)
    cell = np.tile(np.arange(c, dtype=np.int64), k)
    lev0 = layers[0][0]
    cell_tail = np.zeros(k * c, dtype=np.int64) if root else cell
    cell_head = starts[0] + child * lev0.n_rows + lev0.labels[cell]
    held_cells = None
    for q in chain.cell_members:
        if costs.held[q] is not None:
            held_cells = costs.held[q].ravel().astype(np.int64)
    # Without the cell-wise cost, the pass's L1 objective has ties (which child's total
    # gives way when the rounded totals overshoot the parent); production leaves them to
    # Gurobi. We break them by the cell-wise cost at a weight whose sum over all cells is
    # below half a unit of the query objective, so the pass's optimum is unchanged.
    cw = 1.0 if costs.cellwise else min(0.5, 0.5 / max(1, k * c))
    phir = phi.ravel()
    if box:
        # X = floor(x) + b, b in {0, 1} on fractional cells
        every = held_cells is not None or costs.every_cell
        sel = np.ones(k * c, dtype=bool) if every else phir > 0
        pen = np.where(target_cell.ravel() > 0, -1.0, 1.0)  # |b - round(frac)| slope
        unit = np.rint((cw * (1.0 - 2.0 * phir) + w_cell * pen) * scale).astype(np.int64)
        if held_cells is not None:
            fixed = held_cells - fi.ravel()
            if (fixed < 0).any():
                return None
            s = add(cell_tail[sel], cell_head[sel], fixed[sel], fixed[sel], 0)
        else:
            s = add(cell_tail[sel], cell_head[sel], 0, 1, unit[sel])
        idx = np.flatnonzero(sel)
    else:
        if held_cells is not None:
            s = add(cell_tail, cell_head, held_cells, held_cells, 0)
            idx = np.arange(k * c)
        else:
            # convex piecewise-linear cost of X per cell: slopes for units 1..floor,
            # unit floor+1, and beyond (the cell-wise |X - x| plus w_cell |X - round(x)|)
            r = target_cell.ravel()
            flo = fi.ravel()
            below = -(cw + w_cell) * scale
            mid = (cw * (1.0 - 2.0 * phir) + w_cell * np.where(r > flo, -1.0, 1.0)) * scale
            above = (cw + w_cell) * scale
            s0 = add(cell_tail, cell_head, 0, flo, int(round(below)))
            add(cell_tail, cell_head, 0, 1, np.rint(mid).astype(np.int64))
            s2 = add(cell_tail, cell_head, 0, inf, int(round(above)))
            s = slice(s0.start, s2.stop)
            idx = np.concatenate([np.arange(k * c)] * 3)
    # -- layer arcs -----------------------------------------------------------------------
    n_mid = n_nodes
    for li, (lev, lo_off, hi_off, bounded, w) in enumerate(layers):
        n = lev.n_rows
        src = starts[li] + np.arange(k * n, dtype=np.int64)
        if li + 1 < len(layers):
            nxt = layers[li + 1][0]
            up = np.zeros(n, dtype=np.int64)
            up[lev.labels] = nxt.labels  # nested: each row feeds one row of the next layer
            dst = starts[li + 1] + np.repeat(np.arange(k) * nxt.n_rows, n) + np.tile(up, k)
        else:
            # the sink, numbered below (-1), or the child's group node (-2 - m)
            dst = np.repeat(_flow.child_heads(sub.child_group, k, -1, 0), n)
            dst = np.where(dst >= 0, -2 - dst, dst)
        if w == 0:
            add(src, dst, lo_off.ravel(), hi_off.ravel(), 0)
            continue
        ans_frac = _row_sum(phi, lev.labels, n) if box else _row_sum(x, lev.labels, n)
        target = np.rint(ans_frac).astype(np.int64).ravel()
        # the cost arcs leave a middle node where the row is bounded, else the row's node
        b = bounded.ravel()
        mid = src.copy()
        mid[b] = n_mid + np.arange(int(b.sum()), dtype=np.int64)
        n_mid += int(b.sum())
        add(src[b], mid[b], lo_off.ravel()[b], hi_off.ravel()[b], 0)
        add(mid, dst, 0, np.maximum(target, 0), -w * scale)
        add(mid, dst, 0, inf, w * scale)
    sink = n_mid
    rhs = _flow.child_group_rhs(sub.child_group, sub.group_totals, base.sum(axis=1))
    if (rhs < 0).any():
        return None  # the floors alone exceed a child group's total
    n_total = sink + 1 + rhs.size
    heads = [np.where(h == -1, sink, np.where(h < -1, sink - 1 - h, h)) for h in heads]
    supply = np.zeros(n_total, dtype=np.int64)
    if root:
        gl, _ = _flow.int_bounds(sub.group_lower, sub.group_upper)
        tl, _ = _flow.int_bounds(sub.total_lower, sub.total_upper)
        big = int(np.ceil(x.sum())) + k * c + int(np.maximum(tl, gl.sum(axis=1)).sum()) + 1
        big += int(rhs.sum())
        if held_cells is not None:
            big += int(held_cells.sum())
        supply[0] = big
        supply[sink] = -big
    else:
        supply[:c] = sub.parent - base.sum(axis=0)
        supply[sink] = -int(supply[:c].sum())
        if (supply[:c] < 0).any():
            return None
    net = _flow.Network(n_total, supply, tails, heads, lows, ups, arc_costs)
    _flow.add_child_group_arcs(net, sink + 1, sink, rhs)
    if root:
        net.add([0], [sink], 0, inf, 0)
    return net, s, idx, base
