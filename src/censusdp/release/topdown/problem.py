"""The TopDown estimation subproblem: one parent with its children, on the kept cells.

A :class:`Subproblem` is the complete input of one estimation task (JASON (JSR-19-2F) sec. 5.7;
Van Riper et al. (2020) sec. 2.1-2.2): the parent's integer histogram, the children's noisy marginal
answers with their weights, and the per-child bounds that encode invariants and
constraints. It holds no confidential data, only noisy measurements and published
invariants, so an estimation task can run anywhere (a process pool, a Spark worker).

The least-squares problem it defines is

    minimise   sum_q w_q sum_i || A_q X[i] - y_q[i] ||^2
    subject to X >= 0,
               sum_i X[i, j] = p_j                         (every kept cell j; not at the root)
               L[i, g] <= sum_{j in group g} X[i, j] <= U[i, g]
               T_lo[i] <= sum_j X[i, j] <= T_hi[i]
               sum_{i: h(i) = m} sum_j X[i, j] = S_m           (every child group m)

where ``A_q`` is the 0/1 marginal operator of query ``q`` restricted to the kept cells
(``(A_q x)_r = sum_{j: row_q(j) = r} x_j``), ``w_q = 1 / variance`` and ``y_q[i]`` the
noisy answers of child ``i`` (Van Riper et al. (2020) sec. 2.1, eq. for the "L2" stage). The groups
partition the cells and the total is the sum of all groups, so the constraint family is
laminar and the integer rounding problem is a network flow with an integral optimum.

The child groups ``h`` (optional) are production's grouped child totals
(``optimizer.py``, ``addGroupedChildTotalConstraint``; on in the national run's
US-children solve by ``topdown_engine.py``, ``areAIANSumConstraintsOn``): the AIAN and
non-AIAN parts of a state are two children whose totals sum to the state's invariant
``S_m``, while neither part's total is invariant. They partition some of the children,
so the family stays laminar (a child's total feeds at most one group's) and the
rounding network gains one node per group between its children and the sink.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from censusdp.errors import CensusDPError

__all__ = ["Subproblem", "SubproblemError"]


class SubproblemError(CensusDPError):
    """A :class:`Subproblem` was built with inconsistent arrays (a bug in its caller)."""


def _as_float(name: str, a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    arr = np.ascontiguousarray(a, dtype=np.float64)
    if arr.shape != shape:
        raise SubproblemError(f"{name} must have shape {shape}, got {arr.shape}")
    if np.isnan(arr).any():
        raise SubproblemError(f"{name} contains NaN")
    return arr


def _row_sums(x: np.ndarray, rows: np.ndarray, size: int) -> np.ndarray:
    """``out[i, r] = sum_{j: rows[j] = r} x[i, j]`` for a ``(k, c)`` array ``x``."""
    k, c = x.shape
    if c == 0 or size == 0:
        return np.zeros((k, size), dtype=x.dtype if x.dtype.kind in "iu" else np.float64)
    # one bincount over (child, row) keys: for each output the cells are added in the
    # order of j, as a sparse product would, and without building a matrix per call
    key = (np.arange(k, dtype=np.int64)[:, None] * size + rows[None, :]).ravel()
    out = np.bincount(key, weights=x.ravel(), minlength=k * size).reshape(k, size)
    return np.rint(out).astype(x.dtype) if x.dtype.kind in "iu" else out


@dataclass(frozen=True, eq=False)
class Subproblem:
    """One parent with its k children, on the c kept cells.

    Cells that are zero in the parent and structural zeros are already dropped by the
    driver. All arrays are copied into contiguous arrays of the stated dtype and checked
    in ``__post_init__``.

    Attributes:
        parent: ``(c,)`` int64 > 0, parent counts on the kept cells; ``None`` at the root
            (no column-sum constraint).
        query_rows: per measured query ``q``, a ``(c,)`` int64 array giving the answer row
            of each kept cell (a marginal: each cell is in exactly one row).
        query_sizes: per query, the number of answer rows ``r_q`` (some rows may have no
            kept cell).
        noisy: per query, a ``(k, r_q)`` float64 array of the children's noisy answers.
        weights: ``(n_queries,)`` float64, ``1 / variance`` of each query's measurements.
        groups: ``(c,)`` int64 in ``0..G-1`` (e.g. the HHGQ level of each kept cell).
        group_lower: ``(k, G)`` float64 >= 0, integers.
        group_upper: ``(k, G)`` float64, integers or ``np.inf``.
        total_lower: ``(k,)`` float64 (0 if none).
        total_upper: ``(k,)`` float64 (``np.inf`` if none); equal to ``total_lower`` for
            an exact invariant (state population).
        n_groups: number of groups ``G``; defaults to ``group_lower.shape[1]``.
        label: free text naming the parent geounit, used in messages.
        child_labels: optional names of the children (e.g. their geocodes), used in
            messages; ``()`` names them by index.
        noise_scale: optional standard deviation (persons) of the subproblem's most
            precise measurement; solvers stop when their residuals are a small fraction
            of it (``None``: tolerances relative to the weights only).
        unit_weights: optional ``(n_queries, k)`` float64 >= 0 multipliers of
            ``weights`` per child: child ``i``'s answers to query ``q`` have weight
            ``weights[q] * unit_weights[q, i]`` (children measured with their own
            budgets, a spine release's bypass; 0 for a child that was not measured).
            ``None``: every child has the query's weight.
        child_group: optional ``(k,)`` int64 group of each child in ``-1..m-1``
            (``-1``: in no group): the children whose totals sum to one invariant, the
            AIAN and non-AIAN parts of a state under the US.
        group_totals: ``(m,)`` the invariant total ``S_m`` of each child group
            (non-negative integers); given exactly when ``child_group`` is.
    """

    parent: np.ndarray | None
    query_rows: tuple[np.ndarray, ...]
    query_sizes: tuple[int, ...]
    noisy: tuple[np.ndarray, ...]
    weights: np.ndarray
    groups: np.ndarray
    group_lower: np.ndarray
    group_upper: np.ndarray
    total_lower: np.ndarray
    total_upper: np.ndarray
    label: str = ""
    child_labels: tuple[str, ...] = ()
    noise_scale: float | None = None
    unit_weights: np.ndarray | None = None
    child_group: np.ndarray | None = None
    group_totals: np.ndarray | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        groups = np.ascontiguousarray(self.groups, dtype=np.int64)
        if groups.ndim != 1:
            raise SubproblemError(f"groups must be 1-D, got shape {groups.shape}")
        c = groups.size
        gl = np.ascontiguousarray(self.group_lower, dtype=np.float64)
        if gl.ndim != 2:
            raise SubproblemError(f"group_lower must be (k, G), got shape {gl.shape}")
        k, n_groups = gl.shape
        if k < 1:
            raise SubproblemError("a subproblem needs at least one child (k >= 1)")
        if c and (groups.min() < 0 or groups.max() >= n_groups):
            raise SubproblemError(
                f"groups must lie in 0..{n_groups - 1}, got range {groups.min()}..{groups.max()}"
            )
        set_(self, "groups", groups)
        set_(self, "group_lower", _as_float("group_lower", gl, (k, n_groups)))
        set_(self, "group_upper", _as_float("group_upper", self.group_upper, (k, n_groups)))
        set_(self, "total_lower", _as_float("total_lower", self.total_lower, (k,)))
        set_(self, "total_upper", _as_float("total_upper", self.total_upper, (k,)))
        for name in ("group_lower", "total_lower"):
            lo = getattr(self, name)
            if (lo < 0).any() or np.isinf(lo).any():
                raise SubproblemError(f"{name} must be finite and >= 0, got min {lo.min()}")
        if self.parent is not None:
            parent = np.ascontiguousarray(self.parent, dtype=np.int64)
            if parent.shape != (c,):
                raise SubproblemError(f"parent must have shape ({c},), got {parent.shape}")
            if c and parent.min() <= 0:
                raise SubproblemError(
                    f"parent counts on kept cells must be > 0, got min {parent.min()}"
                )
            set_(self, "parent", parent)
        nq = len(self.query_rows)
        if len(self.query_sizes) != nq or len(self.noisy) != nq:
            raise SubproblemError(
                f"query_rows, query_sizes and noisy must have one entry per query; got "
                f"{nq}, {len(self.query_sizes)}, {len(self.noisy)}"
            )
        rows_out, noisy_out = [], []
        for q in range(nq):
            r = np.ascontiguousarray(self.query_rows[q], dtype=np.int64)
            size = int(self.query_sizes[q])
            if r.shape != (c,):
                raise SubproblemError(f"query_rows[{q}] must have shape ({c},), got {r.shape}")
            if c and (r.min() < 0 or r.max() >= size):
                raise SubproblemError(
                    f"query_rows[{q}] must lie in 0..{size - 1}, got {r.min()}..{r.max()}"
                )
            rows_out.append(r)
            noisy_out.append(_as_float(f"noisy[{q}]", self.noisy[q], (k, size)))
        set_(self, "query_rows", tuple(rows_out))
        set_(self, "query_sizes", tuple(int(s) for s in self.query_sizes))
        set_(self, "noisy", tuple(noisy_out))
        labels = tuple(str(v) for v in self.child_labels)
        if labels and len(labels) != k:
            raise SubproblemError(f"child_labels must name {k} children, got {len(labels)}")
        set_(self, "child_labels", labels)
        if self.noise_scale is not None:
            ns = float(self.noise_scale)
            if not np.isfinite(ns) or ns <= 0:
                raise SubproblemError(f"noise_scale must be finite and > 0, got {ns}")
            set_(self, "noise_scale", ns)
        w = _as_float("weights", self.weights, (nq,))
        if (w < 0).any() or not np.isfinite(w).all():
            raise SubproblemError(f"weights must be finite and >= 0, got {w}")
        set_(self, "weights", w)
        if self.unit_weights is not None:
            uw = _as_float("unit_weights", self.unit_weights, (nq, k))
            if (uw < 0).any() or not np.isfinite(uw).all():
                raise SubproblemError("unit_weights must be finite and >= 0")
            set_(self, "unit_weights", uw)
        self._check_child_groups()

    def _check_child_groups(self) -> None:
        """Check :attr:`child_group` / :attr:`group_totals` (both or neither; every group
        has a child; totals non-negative integers that fit the parent's total)."""
        if (self.child_group is None) != (self.group_totals is None):
            raise SubproblemError("child_group and group_totals must be given together")
        if self.child_group is None:
            return
        set_ = object.__setattr__
        cg = np.ascontiguousarray(self.child_group, dtype=np.int64)
        tot = np.ascontiguousarray(self.group_totals, dtype=np.float64)
        if cg.shape != (self.k,):
            raise SubproblemError(f"child_group must have shape ({self.k},), got {cg.shape}")
        if tot.ndim != 1 or tot.size == 0:
            raise SubproblemError(f"group_totals must be 1-D and non-empty, got {tot.shape}")
        m = tot.size
        if cg.min() < -1 or cg.max() >= m or np.bincount(cg[cg >= 0], minlength=m).min() == 0:
            raise SubproblemError(
                f"child_group must lie in -1..{m - 1} and give every one of the {m} groups a "
                f"child, got {cg.tolist()}"
            )
        if not np.isfinite(tot).all() or (tot < 0).any() or (tot != np.rint(tot)).any():
            raise SubproblemError(f"group_totals must be non-negative integers, got {tot.tolist()}")
        if self.parent is not None:
            have = int(self.parent.sum())
            free = cg < 0
            exact = free & np.isfinite(self.total_upper) & (self.total_upper == self.total_lower)
            need = int(tot.sum() + self.total_lower[exact].sum())
            covered = bool(exact[free].all())
            if need > have or (covered and need != have):
                raise SubproblemError(
                    f"subproblem {self.label!r}: the group totals and exact child totals sum "
                    f"to {need}, the parent holds {have} persons"
                )
        set_(self, "child_group", cg)
        set_(self, "group_totals", tot)

    @property
    def n_child_groups(self) -> int:
        """The number of child groups (0 without)."""
        return 0 if self.group_totals is None else int(self.group_totals.size)

    def child_group_sums(self, x: np.ndarray) -> np.ndarray:
        """``(m,)`` the sum of each child group's totals in ``x`` (``(k, c)``)."""
        if self.child_group is None:
            return np.zeros(0)
        t = np.asarray(x, dtype=np.float64).sum(axis=1)
        inside = self.child_group >= 0
        return np.bincount(
            self.child_group[inside], weights=t[inside], minlength=self.n_child_groups
        )

    def child_weights(self, q: int) -> np.ndarray:
        """``(k,)`` weight of each child's answers to query ``q``."""
        if self.unit_weights is None:
            return np.full(self.k, float(self.weights[q]))
        return float(self.weights[q]) * self.unit_weights[q]

    # -- sizes ---------------------------------------------------------------------------

    @property
    def k(self) -> int:
        """Number of children."""
        return int(self.group_lower.shape[0])

    @property
    def c(self) -> int:
        """Number of kept cells."""
        return int(self.groups.size)

    @property
    def G(self) -> int:  # noqa: N802 - the name used in the method description
        """Number of groups."""
        return int(self.group_lower.shape[1])

    def child_name(self, i: int) -> str:
        """A readable name of child ``i`` (its label, or ``child i``)."""
        return f"child {i} ({self.child_labels[i]})" if self.child_labels else f"child {i}"

    @property
    def n_queries(self) -> int:
        """Number of measured queries."""
        return len(self.query_rows)

    @property
    def is_root(self) -> bool:
        """True when there is no parent (the top geounit)."""
        return self.parent is None

    # -- derived quantities -------------------------------------------------------------

    def scale(self) -> float:
        """A magnitude for relative tolerances: the largest count the solution can hold."""
        if self.parent is not None and self.c:
            return float(max(1.0, self.parent.max()))
        finite = [1.0]
        for arr in (self.total_upper, self.total_lower, self.group_upper, self.group_lower):
            f = arr[np.isfinite(arr)]
            if f.size:
                finite.append(float(f.max()))
        for y in self.noisy:
            if y.size:
                finite.append(float(np.abs(y).max()))
        return max(finite)

    def group_sums(self, x: np.ndarray) -> np.ndarray:
        """``(k, G)`` sums of ``x`` over the cells of each group."""
        x = np.asarray(x, dtype=np.float64)
        return _row_sums(x, self.groups, self.G)

    def answers(self, x: np.ndarray) -> tuple[np.ndarray, ...]:
        """Per query, the ``(k, r_q)`` answers ``A_q X[i]`` of a candidate solution."""
        x = np.asarray(x, dtype=np.float64)
        return tuple(
            _row_sums(x, rows, size)
            for rows, size in zip(self.query_rows, self.query_sizes, strict=True)
        )

    def objective(self, x: np.ndarray) -> float:
        """The weighted least-squares objective ``sum_q sum_i w_qi ||A_q X[i] - y_q[i]||^2``
        (``w_qi = weights[q] * unit_weights[q, i]``)."""
        total = 0.0
        for q, (a, y) in enumerate(zip(self.answers(x), self.noisy, strict=True)):
            total += float(np.sum(self.child_weights(q) * np.sum((a - y) ** 2, axis=1)))
        return total

    def violations(self, x: np.ndarray) -> dict[str, float]:
        """The largest violation of each constraint family by ``x`` (0 when satisfied).

        Returns:
            a dict with keys ``nonneg``, ``parent``, ``group``, ``total`` and, with child
            groups, ``child_group``; values are absolute amounts in persons.
        """
        x = np.asarray(x, dtype=np.float64)
        if x.shape != (self.k, self.c):
            raise SubproblemError(f"solution must have shape {(self.k, self.c)}, got {x.shape}")
        out = {"nonneg": 0.0, "parent": 0.0, "group": 0.0, "total": 0.0}
        if x.size:
            out["nonneg"] = float(max(0.0, -x.min()))
        if self.parent is not None and self.c:
            out["parent"] = float(np.abs(x.sum(axis=0) - self.parent).max())
        gs = self.group_sums(x)
        if gs.size:
            out["group"] = float(
                max(0.0, (self.group_lower - gs).max(), (gs - self.group_upper).max())
            )
        ts = x.sum(axis=1)
        out["total"] = float(max(0.0, (self.total_lower - ts).max(), (ts - self.total_upper).max()))
        if self.group_totals is not None:
            out["child_group"] = float(np.abs(self.child_group_sums(x) - self.group_totals).max())
        return out

    def max_violation(self, x: np.ndarray) -> float:
        """The largest violation over all constraint families (see :meth:`violations`)."""
        return max(self.violations(x).values())

    def with_bounds(
        self,
        *,
        group_lower: np.ndarray | None = None,
        group_upper: np.ndarray | None = None,
        total_lower: np.ndarray | None = None,
        total_upper: np.ndarray | None = None,
    ) -> Subproblem:
        """A copy with some bounds replaced (used by the failsafe)."""
        return replace(
            self,
            group_lower=self.group_lower if group_lower is None else group_lower,
            group_upper=self.group_upper if group_upper is None else group_upper,
            total_lower=self.total_lower if total_lower is None else total_lower,
            total_upper=self.total_upper if total_upper is None else total_upper,
        )
