"""The two passes' picklable tasks: one upward step (:func:`run_up`) and one downward
step (:func:`run_down`) for a run of whole families of one level (the algebra is in
:mod:`censusdp.infer.gls`'s docstring); an executor runs them like TopDown's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from censusdp.errors import InputError, InternalError
from censusdp.infer._algebra import Layout, apply
from censusdp.infer._constraints import condition_total
from censusdp.infer._design import LevelDesign
from censusdp.infer._lines import LineSet, line_variances

__all__ = ["DownResult", "DownTask", "UpResult", "UpTask", "run_down", "run_up"]


@dataclass(frozen=True, eq=False)
class UpTask:
    """The upward step for units ``start:start + n`` of one level (whole families)."""

    layout: Layout
    level: int
    start: int
    n: int
    design: LevelDesign | None
    values: tuple[np.ndarray, ...]
    child_sum: np.ndarray | None
    child_cov: np.ndarray | None
    pattern: np.ndarray | None
    pattern_ops: tuple[np.ndarray, np.ndarray] | None
    totals: np.ndarray | None
    parent_bounds: np.ndarray | None
    unit_designs: tuple[LevelDesign, ...] = ()
    unit_class: np.ndarray | None = None
    child_informed: np.ndarray | None = None


def _unit_classes(task: UpTask) -> tuple[tuple[LevelDesign, ...], np.ndarray]:
    """The designs of a task's units and each unit's design (``-1``: not measured).

    Without ``unit_class`` every unit has ``design`` (one variance per query of the
    level); a spine release's bypass gives units their own variances (classes)."""
    if task.unit_class is not None:
        return task.unit_designs, task.unit_class
    if task.design is None:
        return (), np.full(task.n, -1, dtype=np.int64)
    return (task.design,), np.zeros(task.n, dtype=np.int64)


def _information(task: UpTask, design: LevelDesign, sel: np.ndarray) -> np.ndarray:
    """``h = sum_q A_q' y_q / v_q`` of the units ``sel`` of a task, with ``design``."""
    return design.information_vector(tuple(v[sel] for v in task.values), task.layout.shape)


@dataclass(frozen=True, eq=False)
class UpResult:
    """Upward estimates of a task's units and their sums by parent.

    ``cov`` is a table of operators and ``cov_index`` says which entry each unit uses
    (bottom units share the entry of their zero pattern).
    """

    level: int
    start: int
    mean: np.ndarray
    cov: np.ndarray
    cov_index: np.ndarray
    parent_sum: np.ndarray | None
    parent_cov: np.ndarray | None
    informed: np.ndarray | None = None
    parent_informed: np.ndarray | None = None


def _sum_by_parent(
    values: np.ndarray, table: np.ndarray, index: np.ndarray, bounds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    starts = bounds[:-1]
    n_par = starts.size
    s = np.add.reduceat(values.reshape(values.shape[0], -1), starts, axis=0)
    s = s.reshape((n_par, *values.shape[1:]))
    if table.shape[0] <= 256:
        parent = np.repeat(np.arange(n_par), np.diff(bounds))
        counts = np.zeros((n_par, table.shape[0]))
        np.add.at(counts, (parent, index), 1.0)
        big = np.tensordot(counts, table, axes=1)
    else:
        big = np.add.reduceat(table[index], starts, axis=0)
    return s, big


def run_up(task: UpTask) -> UpResult:
    """One upward step (:mod:`censusdp.infer.gls`, upward); pure and picklable.

    A unit that was not measured (a bypassed spine geounit: its single parent took its
    budget) has no information of its own: above the bottom its estimate is its
    children's sum; at the bottom it is ``informed = False`` and its parent uses its own
    measurements alone (the downward step then gives it the parent's estimate).
    """
    lay = task.layout
    designs, cls = _unit_classes(task)
    informed = cls >= 0
    if task.child_sum is None:  # bottom level: own measurements and zero patterns
        if task.pattern is None or task.pattern_ops is None:
            raise InternalError("a bottom-level GLS task needs measurements and zero patterns")
        rm_table, table = task.pattern_ops  # R_k M: own estimate conditioned on the zeros
        n_pat = rm_table.shape[0] // max(len(designs), 1)
        # one table entry per (design, zero pattern); unmeasured units: a zero entry
        index = np.where(informed, np.maximum(cls, 0) * n_pat + task.pattern, table.shape[0])
        table = np.concatenate([table, np.zeros((1, *table.shape[1:]))])
        mean = np.zeros((task.n, *lay.shape))
        for g in range(len(designs)):
            sel = cls == g
            if not sel.any():
                continue
            h = _information(task, designs[g], sel)
            idx = index[sel]
            part = np.empty_like(h)
            for k in np.unique(idx):
                at = idx == k
                part[at] = apply(lay, rm_table[k], h[at])
            mean[sel] = part
    else:
        s, big_s = task.child_sum, task.child_cov
        kids = np.ones(task.n, dtype=bool) if task.child_informed is None else task.child_informed
        mean, table = s.copy(), big_s.copy()
        for g in range(len(designs)):
            sel = cls == g
            if not sel.any():
                continue
            m = designs[g].cov
            own = apply(lay, m, _information(task, designs[g], sel))
            both = kids[sel]
            at = np.flatnonzero(sel)[both]
            if at.size:
                gain = np.swapaxes(
                    np.linalg.solve(big_s[at] + m, big_s[at]), -1, -2
                )  # S (S + M)^-1
                tab = gain @ m
                table[at] = 0.5 * (tab + np.swapaxes(tab, -1, -2))
                mean[at] = s[at] + apply(lay, gain, own[both] - s[at])
            alone = np.flatnonzero(sel)[~both]
            if alone.size:  # the children carry no information (a bypassed single child)
                table[alone] = m
                mean[alone] = own[~both]
        informed = informed | kids
        index = np.arange(task.n)
    if task.totals is not None:
        known = informed & np.isfinite(task.totals)
        if known.all():
            table = condition_total(lay, mean, table, index, task.totals)
        elif known.any():  # conditioned entries of their own for the units whose total is known
            sub = mean[known]
            used, inv = np.unique(index[known], return_inverse=True)
            cond = condition_total(lay, sub, table[used], inv.reshape(-1), task.totals[known])
            mean[known] = sub
            index = index.copy()
            index[known] = table.shape[0] + inv.reshape(-1)
            table = np.concatenate([table, cond])
    ps = pc = pi = None
    if task.parent_bounds is not None:
        ps, pc = _sum_by_parent(mean, table, index, task.parent_bounds)
        pi = np.logical_and.reduceat(informed, task.parent_bounds[:-1])
        sizes = np.diff(task.parent_bounds)
        if (~pi & (sizes > 1)).any():
            raise InputError(
                "a geounit that was not measured has siblings; only a single child may be "
                "bypassed (its parent takes its budget)"
            )
    return UpResult(task.level, task.start, mean, table, index, ps, pc, informed, pi)


@dataclass(frozen=True, eq=False)
class DownTask:
    """The downward step for units ``start:start + n`` of one level.

    ``up`` is the upward task to recompute the units' upward estimates (bottom level)
    or ``None`` with ``up_mean``/``up_cov``/``up_index`` given (levels kept in memory).
    Parent arrays hold the parents of these units, in order; ``parent_bounds`` cuts
    the units into families.
    """

    layout: Layout
    level: int
    start: int
    n: int
    up: UpTask | None
    up_mean: np.ndarray | None
    up_cov: np.ndarray | None
    up_index: np.ndarray | None
    parent_mean: np.ndarray | None
    parent_cov: np.ndarray | None
    parent_child_sum: np.ndarray | None
    parent_child_pinv: np.ndarray | None
    parent_bounds: np.ndarray | None
    lines: LineSet
    keep: bool
    up_informed: np.ndarray | None = None
    family: np.ndarray | None = None
    """Each unit's entry in the parent arrays (``None``: its run of ``parent_bounds``);
    a sibling group's members point at the group's entry (:mod:`censusdp.infer.gls`)."""


@dataclass(frozen=True, eq=False)
class DownResult:
    """Final estimates and standard deviations of every line for a task's units."""

    level: int
    start: int
    estimate: np.ndarray
    sd: np.ndarray
    mean: np.ndarray | None
    cov: np.ndarray | None
    cov_index: np.ndarray | None


def run_down(task: DownTask) -> DownResult:
    """One downward step (:mod:`censusdp.infer.gls`, downward); pure and picklable."""
    lay = task.layout
    informed = task.up_informed
    if task.up is not None:
        up = run_up(task.up)
        mean, table, index, informed = up.mean, up.cov, up.cov_index, up.informed
    else:
        mean, table, index = task.up_mean, task.up_cov, task.up_index
    if mean is None or table is None or index is None:
        raise InternalError("a downward GLS task needs the units' upward estimates")
    if task.parent_bounds is None:  # the root: upward estimate is final
        final, ftable, findex = mean, table, index
    else:
        parent = (
            np.repeat(np.arange(task.parent_bounds.size - 1), np.diff(task.parent_bounds))
            if task.family is None
            else np.asarray(task.family, dtype=np.int64)
        )
        keys = parent * (table.shape[0] + 1) + index
        ukeys, findex = np.unique(keys, return_inverse=True)
        p_of, k_of = ukeys // (table.shape[0] + 1), ukeys % (table.shape[0] + 1)
        pk = table[k_of]
        gain = pk @ task.parent_child_pinv[p_of]  # type: ignore[index]
        ftable = pk - gain @ pk + gain @ task.parent_cov[p_of] @ np.swapaxes(gain, -1, -2)  # type: ignore[index]
        ftable = 0.5 * (ftable + np.swapaxes(ftable, -1, -2))
        resid = task.parent_mean - task.parent_child_sum  # type: ignore[operator]
        shift = apply(lay, gain, resid[p_of])
        final = mean + shift[findex]
        if informed is not None and not informed.all():
            # a bypassed single child holds its parent's people: the parent's estimate
            bad = np.flatnonzero(~informed)
            final[bad] = task.parent_mean[parent[bad]]  # type: ignore[index]
            findex = findex.copy()
            findex[bad] = ftable.shape[0] + np.arange(bad.size)
            ftable = np.concatenate([ftable, task.parent_cov[parent[bad]]])  # type: ignore[index]
    est = final.reshape(task.n, -1) @ task.lines.matrix
    var_pairs, exact_pairs = line_variances(task.lines, ftable)
    sd = np.sqrt(var_pairs[findex])
    exact = exact_pairs[findex]
    est[exact] = np.rint(est[exact])  # exactly determined lines are integers (invariants, zeros)
    if task.keep:
        return DownResult(task.level, task.start, est, sd, final, ftable, findex)
    return DownResult(task.level, task.start, est, sd, None, None, None)
