"""Generalised least squares (BLUE) estimates of every cell from the noisy measurements.

Model. Every geounit ``u`` has an unknown detailed histogram ``x_u`` (live cells only),
with ``x_u = sum_{c child of u} x_c``. Each measured query ``q`` of ``u``'s level gives
``y_{u,q} = A_q x_u + e``, with independent noise of the variance stated in the NMF.
Some linear facts are known exactly: the invariant totals (state population, housing
units per block) and the cells that the published invariants force to zero (no
household population in a block without housing units, no population of a group-quarters
type in a block without such a facility). The GLS estimate is the best linear unbiased
estimate of every cell under these equality constraints, with its exact covariance.

Algorithm (the two-pass tree GLS of Hay, Rastogi, Miklau & Suciu 2010, *Boosting the
accuracy of differentially private histograms through consistency*, generalised to
vector-valued nodes with arbitrary measurement covariances: an upward information
filter and a downward Rauch-Tung-Striebel-type smoother on the geography tree):

* upward, leaves first: a unit's own measurements give the estimate ``m_u = M h_u``
  with covariance ``M = (sum_q A_q' A_q / v_q)^-1``, where
  ``h_u = sum_q A_q' y_{u,q} / v_q``. Its children's subtree estimates add up to an
  independent estimate ``s_u = sum_c xhat_c`` with covariance ``S_u = sum_c P_c``.
  Combined: ``xhat_u = s_u + S_u (S_u + M)^-1 (m_u - s_u)``,
  ``P_u = S_u (S_u + M)^-1 M``. Exact constraints are then imposed by Gaussian
  conditioning: for an exact total ``1'x = T``,
  ``xhat <- xhat + P1 (T - 1'xhat) / (1'P1)``, ``P <- P - P11'P / (1'P1)``; for zero
  cells ``E x = 0``, ``xhat <- xhat - PE'(EPE')^-1 E xhat``, ``P <- P - PE'(EPE')^-1 EP``.
* downward, root first: the root's estimate is final. Given a parent's final
  ``(xtilde_u, Ptilde_u)``, each child is conditioned on its family summing to it:
  with the gain ``G_c = P_c S_u^+``,
  ``xtilde_c = xhat_c + G_c (xtilde_u - s_u)``,
  ``Ptilde_c = P_c - G_c P_c + G_c Ptilde_u G_c'``
  (``S_u^+`` a pseudo-inverse: exactly known directions have zero variance).
* sibling groups (:class:`~censusdp.infer._constraints.SiblingGroups`: a state's AIAN
  and non-AIAN parts, whose totals sum to the state's invariant): the group is a
  virtual node between the parent and its members, with no measurement of its own
  and an exact total. Upward, its members' sum ``s_g = sum_{c in g} xhat_c``,
  ``S_g = sum P_c`` is conditioned on ``1'x_g = T_g`` (``xhat_g``, ``P_g``), and the
  parent sees ``xhat_g``, ``P_g`` in place of its members; downward, the group gets
  its final estimate from the parent as a child does, and its members from the group
  (``G_c = P_c S_g^+``). This is exact: a node that is the sum of its children, with an
  exact fact of its own, is what the tree algorithm is made of; the members need not
  be next to each other.

Under a flat prior this is the exact posterior mean and covariance of the Gaussian model,
i.e. the constrained GLS estimate and its covariance; ``tests/infer`` checks it against a
dense direct GLS solve. Every covariance lives in the small block algebra of
:mod:`censusdp.infer._algebra` (four 15 x 15 blocks for ``pl94``), and the covariance of
a bottom unit depends only on its pattern of zero constraints, so the cost is a few
matrix-vector products per geounit.

Work is split into picklable tasks of whole families (:func:`run_up`, :func:`run_down`,
in :mod:`censusdp.infer._passes`), so an executor can run them like TopDown's.

The module is the GLS's public face and its driver (:func:`tree_gls`); the parts live
beside it: the lines and intervals (:mod:`censusdp.infer._lines`), a level's design
(:mod:`censusdp.infer._design`), the exact constraints and their conditioning
(:mod:`censusdp.infer._constraints`), the passes' tasks (:mod:`censusdp.infer._passes`),
the block algebra (:mod:`censusdp.infer._algebra`) and the covariances of sums of
blocks (:mod:`censusdp.infer.tree_cov`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from censusdp.data.geography import Hierarchy, family_chunks
from censusdp.data.measurements import MeasuredQuery, Measurements
from censusdp.errors import InputError, InternalError
from censusdp.infer._algebra import Layout, apply, op_pinv
from censusdp.infer._constraints import (
    Constraints,
    SiblingGroups,
    condition_total,
    condition_zero,
    single_child_totals,
)
from censusdp.infer._design import LevelDesign, direct_sd, level_design, variance_classes
from censusdp.infer._lines import Z90, Z95, LineSet, census_intervals, make_lines
from censusdp.infer._passes import DownTask, UpResult, UpTask, run_down, run_up
from censusdp.progress import Progress
from censusdp.progress import say as say_line

if TYPE_CHECKING:
    from censusdp.infer.tree_cov import TreeFactors

__all__ = [
    "Constraints",
    "LevelDesign",
    "LevelEstimates",
    "LineSet",
    "SiblingGroups",
    "TreeRun",
    "Z90",
    "Z95",
    "census_intervals",
    "condition_total",
    "condition_zero",
    "direct_sd",
    "level_design",
    "make_lines",
    "run_down",
    "run_up",
    "tree_gls",
]


@dataclass(frozen=True, eq=False)
class LevelEstimates:
    """Final estimates of units ``start:stop`` of one level (rows follow ``lines``)."""

    level: int
    start: int
    stop: int
    estimate: np.ndarray
    sd: np.ndarray


@dataclass(frozen=True, eq=False)
class TreeRun:
    """How :func:`tree_gls` runs its passes; the estimates do not depend on it.

    Attributes:
        executor: runs the bottom level's tasks (``None``: in this process).
        progress: receives one line per level and pass.
        chunk_values: about how many noisy values one bottom task reads.
    """

    executor: object | None = None
    progress: Progress = None
    chunk_values: int = 1 << 22


def tree_gls(
    measurements: Measurements,
    hierarchy: Hierarchy,
    layout: Layout,
    lines: LineSet,
    constraints: Constraints | None = None,
    *,
    run: TreeRun | None = None,
    factors: TreeFactors | None = None,
) -> Iterator[LevelEstimates]:
    """Two-pass tree GLS; yields the final estimates level by level (top first), chunk by chunk.

    Args:
        measurements: the noisy measurements (an in-memory set or an NMF reader).
        hierarchy: the geounits.
        layout: the factorisation of the measured schema.
        lines: the linear functions to report for every unit.
        constraints: exact zero cells at the bottom level and exact totals.
        run: where the bottom level's tasks run, where progress goes, and how big a
            bottom task is (:class:`TreeRun`; default: in this process, silent).
        factors: if given, a :class:`censusdp.infer.tree_cov.TreeFactors`, filled with
            what the covariance of any sum of bottom units needs (complete once the
            iterator is exhausted).

    Yields:
        :class:`LevelEstimates` in level order (top first), chunks in unit order.
    """
    tree = _Tree(measurements, hierarchy, layout, lines, constraints, run or TreeRun(), factors)
    tree.upward()
    yield from tree.downward()


def _map(executor: object | None, fn: Callable, tasks: Iterator) -> Iterator:
    if executor is None:
        return map(fn, tasks)
    return executor.map(fn, tasks)  # type: ignore[attr-defined]


class _Tree:
    """One tree GLS in progress (:func:`tree_gls`).

    It holds the designs met so far (one per level and class of equal variances) and,
    per level above the bottom, what the passes hand from one level to the next: the
    upward estimates, the sums of the children's, and the final estimates, each dropped
    once the level below is done. The bottom level's upward estimates are not kept: the
    downward pass reads the NMF again and recomputes them.
    """

    def __init__(
        self,
        measurements: Measurements,
        hierarchy: Hierarchy,
        layout: Layout,
        lines: LineSet,
        constraints: Constraints | None,
        run: TreeRun,
        factors: TreeFactors | None,
    ) -> None:
        cons = constraints or Constraints()
        self.measurements = measurements
        self.hierarchy = hierarchy
        self.layout = layout
        self.lines = lines
        self.run = run
        self.factors = factors
        self.bottom = hierarchy.n_levels - 1
        self.totals = single_child_totals(hierarchy, cons.totals or {})
        self.names = hierarchy.geolevels.names
        self.by_class: dict[tuple[int, tuple[float, ...]], LevelDesign | None] = {}
        self.ops_cache: dict[tuple[float, ...], tuple[np.ndarray, np.ndarray]] = {}
        self.width: int | None = None
        # zero patterns of the bottom units
        nb = hierarchy.n_units(self.bottom)
        zero = cons.zero if cons.zero is not None else np.zeros((nb, layout.d), dtype=bool)
        if zero.shape != (nb, layout.d):
            raise InternalError(
                f"zero constraints have shape {zero.shape}, expected {(nb, layout.d)}"
            )
        self.patterns, pattern_of = np.unique(zero, axis=0, return_inverse=True)
        self.pattern_of = pattern_of.reshape(-1)
        # per level above the bottom: upward results, children sums, final results
        self.up_mean: dict[int, np.ndarray] = {}
        self.up_cov: dict[int, np.ndarray] = {}
        self.up_informed: dict[int, np.ndarray] = {}
        self.child_sum: dict[int, np.ndarray] = {}
        self.child_cov: dict[int, np.ndarray] = {}
        self.child_informed: dict[int, np.ndarray] = {}
        self.fin_mean: dict[int, np.ndarray] = {}
        self.fin_cov: dict[int, np.ndarray] = {}
        self.pinv: dict[int, np.ndarray] = {}
        # sibling groups: their upward (s_g, S_g^+, xhat_g, P_g, parent) and final estimates
        self.groups = self._check_groups(cons.groups)
        self.group_up: tuple[np.ndarray, ...] | None = None
        self.group_fin: tuple[np.ndarray, np.ndarray] | None = None

    # -- the two passes -----------------------------------------------------------------

    def upward(self) -> None:
        """The upward pass, leaves first: every unit's upward estimate, and per parent the
        sums of its children's (kept for the levels above the bottom)."""
        for level in range(self.bottom, -1, -1):
            spans = self.chunks(level)
            if level > 0:
                self._open_sums(level - 1)
            keep_mean: list[np.ndarray] = []
            keep_cov: list[np.ndarray] = []
            keep_informed: list[np.ndarray] = []
            tasks = (self.up_task(level, a, b) for a, b in spans)
            for res in _map(self._runner(level), run_up, tasks):
                if level > 0:
                    self._collect_up_factors(level, res)
                    self._add_to_parents(level, res)
                if level != self.bottom:
                    keep_mean.append(res.mean)
                    keep_cov.append(res.cov[res.cov_index])
                    keep_informed.append(res.informed)  # type: ignore[arg-type]
            if level != self.bottom:
                self.up_mean[level] = np.concatenate(keep_mean)
                self.up_cov[level] = np.concatenate(keep_cov)
                self.up_informed[level] = np.concatenate(keep_informed)
            if self.groups is not None and level == self.groups.level:
                self._condition_groups(level)
            self._say(
                f"GLS upward   {self.names[level]:<10} {self.hierarchy.n_units(level):>8,} geounits"
            )

    def downward(self) -> Iterator[LevelEstimates]:
        """The downward pass, root first: every unit's final estimate given its parent's;
        yields each task's estimates as they come."""
        for level in range(0, self.bottom + 1):
            if level > 0:
                self.pinv[level - 1] = op_pinv(self.child_cov[level - 1])
                self._collect_pinv_factors(level - 1)
            if self.groups is not None and level == self.groups.level:
                self._finish_groups(level)
            spans = self.chunks(level)
            keep = level != self.bottom
            keep_mean: list[np.ndarray] = []
            keep_cov: list[np.ndarray] = []
            tasks = (self.down_task(level, a, b) for a, b in spans)
            for res, (a, b) in zip(_map(self._runner(level), run_down, tasks), spans, strict=True):
                if keep:
                    keep_mean.append(res.mean)  # type: ignore[arg-type]
                    keep_cov.append(res.cov[res.cov_index])  # type: ignore[index]
                yield LevelEstimates(level, a, b, res.estimate, res.sd)
            if keep:
                self.fin_mean[level] = np.concatenate(keep_mean)
                self.fin_cov[level] = np.concatenate(keep_cov)
                if level == 0:
                    self._collect_root_factors()
            if level > 0:  # the parents' arrays are no longer needed
                self._drop(level - 1)
            self._say(
                f"GLS downward {self.names[level]:<10} {self.hierarchy.n_units(level):>8,} geounits"
            )

    # -- sibling groups -----------------------------------------------------------------

    def _check_groups(self, groups: SiblingGroups | None) -> SiblingGroups | None:
        """The sibling groups, checked against the hierarchy (``None``: none)."""
        if groups is None or groups.n == 0:
            return None
        level = groups.level
        if not 0 < level < self.bottom:
            raise InputError(
                f"sibling groups are at level {level}; they must be below the root and "
                f"above the bottom level {self.bottom}"
            )
        g = np.asarray(groups.group, dtype=np.int64)
        if g.shape != (self.hierarchy.n_units(level),):
            raise InputError(
                f"sibling groups have {g.size} units; level {self.names[level]} has "
                f"{self.hierarchy.n_units(level)}"
            )
        par = self.hierarchy.parent[level]
        first = np.full(groups.n, -1, dtype=np.int64)
        inside = np.flatnonzero(g >= 0)
        first[g[inside[::-1]]] = par[inside[::-1]]
        if (par[inside] != first[g[inside]]).any():
            raise InputError(
                f"the units of a sibling group at {self.names[level]} must share a parent"
            )
        return groups

    def _condition_groups(self, level: int) -> None:
        """Upward: each group's members summed and conditioned on the group's total;
        their parents' children sums see the conditioned group instead."""
        assert self.groups is not None
        lay = self.layout
        g = np.asarray(self.groups.group, dtype=np.int64)
        inside = np.flatnonzero(g >= 0)
        if not self.up_informed[level][inside].all():
            raise InputError(
                f"a unit of a sibling group at {self.names[level]} was not measured (bypassed)"
            )
        n = self.groups.n
        s = np.zeros((n, *lay.shape))
        big = np.zeros((n, lay.n_blocks, lay.d, lay.d))
        np.add.at(s, g[inside], self.up_mean[level][inside])
        np.add.at(big, g[inside], self.up_cov[level][inside])
        x = s.copy()
        p = condition_total(
            lay, x, big, np.arange(n), np.asarray(self.groups.totals, dtype=np.float64)
        )
        parent = np.zeros(n, dtype=np.int64)
        parent[g[inside]] = self.hierarchy.parent[level][inside]
        np.add.at(self.child_sum[level - 1], parent, x - s)
        np.add.at(self.child_cov[level - 1], parent, p - big)
        self.group_up = (s, op_pinv(big), x, p, parent)
        if self.factors is not None:
            self.factors.add_groups(level, g, self.group_up[1], p, parent)

    def _finish_groups(self, level: int) -> None:
        """Downward: each group's final estimate, given its parent's (as a child's)."""
        assert self.group_up is not None
        s, _, x, p, parent = self.group_up
        fm, fc = self.fin_mean[level - 1][parent], self.fin_cov[level - 1][parent]
        gain = p @ self.pinv[level - 1][parent]
        cov = p - gain @ p + gain @ fc @ np.swapaxes(gain, -1, -2)
        mean = x + apply(self.layout, gain, fm - self.child_sum[level - 1][parent])
        self.group_fin = (mean, 0.5 * (cov + np.swapaxes(cov, -1, -2)))

    def _grouped_parents(
        self, level: int, start: int, stop: int, parents: tuple[np.ndarray, ...]
    ) -> tuple[np.ndarray | None, tuple[np.ndarray, ...]]:
        """Units ``start:stop``'s family index into their parents' arrays, a group's
        members pointing at the group's entries appended after the parents'."""
        if self.groups is None or level != self.groups.level:
            return None, parents
        assert self.group_up is not None and self.group_fin is not None
        s, s_pinv, _, _, _ = self.group_up
        par = self.hierarchy.parent[level][start:stop]
        g = np.asarray(self.groups.group, dtype=np.int64)[start:stop]
        n_par = parents[0].shape[0]
        family = np.where(g >= 0, n_par + g, par - par[0])
        extra = (self.group_fin[0], self.group_fin[1], s, s_pinv)
        return family, tuple(np.concatenate([a, b]) for a, b in zip(parents, extra, strict=True))

    # -- the collection of the tree factors (tree_cov) ----------------------------------

    def _collect_up_factors(self, level: int, res: UpResult) -> None:
        """A level's upward covariances (``P_c``), below the root."""
        if self.factors is not None:
            self.factors.add_up(level, res.cov, res.cov_index, res.informed)

    def _collect_pinv_factors(self, level: int) -> None:
        """The pseudo-inverses of a level's children's summed covariances (``S_u^+``)."""
        if self.factors is not None:
            self.factors.child_pinv[level] = self.pinv[level]

    def _collect_root_factors(self) -> None:
        """The root's final covariance."""
        if self.factors is not None:
            self.factors.root_cov = self.fin_cov[0]

    # -- the tasks ----------------------------------------------------------------------

    def up_task(self, level: int, start: int, stop: int) -> UpTask:
        """The upward task of units ``start:stop`` of ``level`` (reads their measurements)."""
        layout, bottom = self.layout, self.bottom
        measured = self.measurements.read(level, start, stop)
        design, unit_designs, unit_class, keys = self._design_of(level, measured)
        vals = tuple(m.values for m in measured) if design is not None else ()
        tot = self.totals.get(level)
        kids: tuple[np.ndarray | None, np.ndarray | None] = (None, None)
        pattern = None
        ops = None
        if level == bottom:
            if not measured:
                raise InputError(f"nothing is measured at the bottom level {self.names[level]}")
            ops = self._pattern_ops(keys, [self.by_class[(level, k)] for k in keys])
            if design is None:  # every unit of the run is a bypassed single child
                unit_class = np.full(stop - start, -1, dtype=np.int64)
            pattern = self.pattern_of[start:stop]
        else:
            kids = (self.child_sum[level][start:stop], self.child_cov[level][start:stop])
        return UpTask(
            layout,
            level,
            start,
            stop - start,
            design,
            vals,
            kids[0],
            kids[1],
            pattern,
            ops,
            None if tot is None else np.asarray(tot[start:stop], dtype=np.float64),
            self._bounds(level, start, stop),
            unit_designs,
            unit_class,
            None if level == bottom else self.child_informed[level][start:stop],
        )

    def down_task(self, level: int, start: int, stop: int) -> DownTask:
        """The downward task of units ``start:stop`` of ``level``, given their parents'
        final estimates."""
        family = None
        if level > 0:
            par = self.hierarchy.parent[level]
            p0, p1 = int(par[start]), int(par[stop - 1]) + 1
            pm, pc = self.fin_mean[level - 1][p0:p1], self.fin_cov[level - 1][p0:p1]
            ps, pp = self.child_sum[level - 1][p0:p1], self.pinv[level - 1][p0:p1]
            family, (pm, pc, ps, pp) = self._grouped_parents(level, start, stop, (pm, pc, ps, pp))
        else:
            pm = pc = ps = pp = None
        if level == self.bottom:  # recompute the upward estimates (not kept for the bottom)
            redo = replace(self.up_task(level, start, stop), parent_bounds=None)
            kept: tuple = (None, None, None)
        else:
            redo = None
            kept = (
                self.up_mean[level][start:stop],
                self.up_cov[level][start:stop],
                np.arange(stop - start),
            )
        return DownTask(
            self.layout,
            level,
            start,
            stop - start,
            redo,
            *kept,
            pm,
            pc,
            ps,
            pp,
            self._bounds(level, start, stop),
            self.lines,
            level != self.bottom,
            None if level == self.bottom else self.up_informed[level][start:stop],
            family,
        )

    # -- helpers ------------------------------------------------------------------------

    def _say(self, msg: str) -> None:
        say_line(self.run.progress, msg)

    def _runner(self, level: int) -> object | None:
        """The executor of a level's tasks: the bottom level's run on ``run.executor``."""
        return self.run.executor if level == self.bottom else None

    def _design_of(
        self, level: int, measured: list[MeasuredQuery]
    ) -> tuple[LevelDesign | None, tuple[LevelDesign, ...], np.ndarray | None, list]:
        """The level's design, or per-unit designs (classes of equal variances)."""
        if not measured:
            return None, (), None, []
        keys, cls = variance_classes(measured, self.names[level])
        ds = []
        for key in keys:
            if (level, key) not in self.by_class:
                uniform = [replace(m, variance=v) for m, v in zip(measured, key, strict=True)]
                self.by_class[(level, key)] = level_design(
                    self.layout, level, self.names[level], uniform
                )
            ds.append(self.by_class[(level, key)])
        if len(ds) == 1 and (cls == 0).all():
            return ds[0], (), None, keys
        return (ds[0] if ds else None), tuple(ds), cls, keys  # type: ignore[return-value]

    def _pattern_ops(self, keys: list, ds: list) -> tuple[np.ndarray, np.ndarray]:
        """Per (variance class, zero pattern): the operator of the own estimate
        conditioned on the zeros (``R_k M``) and its covariance."""
        layout = self.layout
        for key, des in zip(keys, ds, strict=True):
            if key not in self.ops_cache:
                ops = [condition_zero(layout, des.cov, pz) for pz in self.patterns]
                self.ops_cache[key] = (
                    np.stack([o[0] @ des.cov for o in ops]),
                    np.stack([o[1] for o in ops]),
                )
        if not keys:
            empty = np.zeros((0, layout.n_blocks, layout.d, layout.d))
            return empty, empty
        return (
            np.concatenate([self.ops_cache[k][0] for k in keys]),
            np.concatenate([self.ops_cache[k][1] for k in keys]),
        )

    def _values_per_unit(self) -> int:
        if self.width is None:
            probe = self.measurements.read(
                self.bottom, 0, min(1, self.hierarchy.n_units(self.bottom))
            )
            self.width = max(1, sum(int(m.values.shape[1]) for m in probe))
        return self.width

    def chunks(self, level: int) -> list[tuple[int, int]]:
        """The level's tasks (whole families): the bottom level's of about
        ``run.chunk_values`` noisy values each, one task above it."""
        if level == self.bottom:
            return family_chunks(
                self.hierarchy, level, self._values_per_unit(), self.run.chunk_values
            )
        return family_chunks(self.hierarchy, level, 1, 1 << 62)

    def _bounds(self, level: int, start: int, stop: int) -> np.ndarray | None:
        """Where units ``start:stop`` of ``level`` change parent (``None`` at the root)."""
        if level == 0:
            return None
        par = self.hierarchy.parent[level][start:stop]
        cut = np.flatnonzero(np.diff(par)) + 1
        return np.concatenate([[0], cut, [stop - start]]).astype(np.int64)

    def _open_sums(self, parent_level: int) -> None:
        """Zero sums of the children of every unit of ``parent_level``."""
        layout = self.layout
        n_par = self.hierarchy.n_units(parent_level)
        self.child_sum[parent_level] = np.zeros((n_par, *layout.shape))
        self.child_cov[parent_level] = np.zeros((n_par, layout.n_blocks, layout.d, layout.d))
        self.child_informed[parent_level] = np.ones(n_par, dtype=bool)

    def _add_to_parents(self, level: int, res: UpResult) -> None:
        """Add an upward task's sums by parent to its parents' children sums."""
        p0 = int(self.hierarchy.parent[level][res.start])
        k = res.parent_sum.shape[0]  # type: ignore[union-attr]
        self.child_sum[level - 1][p0 : p0 + k] += res.parent_sum
        self.child_cov[level - 1][p0 : p0 + k] += res.parent_cov
        self.child_informed[level - 1][p0 : p0 + k] &= res.parent_informed  # type: ignore[arg-type]

    def _drop(self, level: int) -> None:
        """Forget what the passes kept of ``level`` (its children are done)."""
        for store in (
            self.up_mean,
            self.up_cov,
            self.up_informed,
            self.fin_mean,
            self.fin_cov,
            self.child_sum,
            self.child_cov,
            self.child_informed,
            self.pinv,
        ):
            store.pop(level, None)
        if self.groups is not None and level == self.groups.level - 1:
            self.group_up = self.group_fin = None
