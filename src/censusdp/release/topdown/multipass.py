"""Least squares and rounding in passes (production's multipass TopDown, on our solvers).

:mod:`censusdp.release.topdown.passes` says which queries each pass targets and cites
the production code; this module runs the passes on one
:class:`~censusdp.release.topdown.problem.Subproblem`:

* :func:`solve_l2_passes`: pass ``p`` is :func:`~censusdp.release.topdown.solvers.least_squares.solve_l2` on
  the subproblem restricted to pass ``p``'s queries, with every answer held by an
  earlier pass ``r`` kept within ``tol_r = v_r + opt_tol_slack`` of pass ``r``'s answer,
  where ``v_r`` is the validated constraint violation of pass ``r``'s solution (the
  held constraints are feasible at tolerance ``v_r``: pass ``r``'s solution meets them,
  so this is the ``opt_tol`` that production's ``findOptimalTol`` solves for, up to the
  solver's residual). The ``total`` query is held as child total bounds and the group
  attribute as group bounds; any other measured query, a partition of the cells, is held
  row by row (:mod:`censusdp.release.topdown._held`; the DHC person run's second outer
  pass holds ``relgq * age_40_groups * hispanic * cenrace * sex``, 423,360 rows, so, at
  tolerance 0).

* :func:`round_in_passes`: pass ``p`` is one min-cost flow on the chain network of
  :mod:`censusdp.release.topdown._pass_network`, minimising the L1 distance of pass ``p``'s query
  answers from the rounded least-squares answers (and the cell-wise cost when
  ``detailed`` is in the pass), with every earlier pass's integer answers held exactly.
  Like the single-pass rounding it first confines ``X`` to ``floor(x) + {0, 1}``
  (production's binary rounder variables) and falls back to unbounded moves only when
  that box holds no feasible point.

* :func:`solve_interleaved`: outer passes (production's ``L2PlusRounder_interleaved``,
  the 2020 DHC runs'): each outer pass is the two above on its own passes,
  and the rounded answers of its last rounding pass's queries are held exactly by every
  later outer pass, in least squares (a hold of tolerance 0) and in rounding.

Every pass keeps every constraint of the subproblem (parent counts, group and total
bounds), so the result is as exact as a single pass.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from censusdp.data.queries import make_query
from censusdp.data.schema import Schema
from censusdp.errors import ConfigError, InfeasibleError, InternalError
from censusdp.release.topdown import _flow, _held, _pass_network
from censusdp.release.topdown.passes import PassPlan
from censusdp.release.topdown.problem import Subproblem
from censusdp.release.topdown.rounding import COST_SCALE, _snap, accept, no_integer_solution
from censusdp.release.topdown.solvers.base import RealSolution
from censusdp.release.topdown.solvers.least_squares import solve_l2

__all__ = [
    "L2Passes",
    "RoundingPasses",
    "RoundingTemplate",
    "bind_l2",
    "bind_rounding",
    "round_in_passes",
    "solve_interleaved",
    "solve_l2_passes",
]


@dataclass(frozen=True, eq=False)
class L2Passes:
    """A plan's least-squares passes bound to a subproblem's measured queries.

    Attributes:
        queries: per pass, the indices of the subproblem's queries in its objective.
        hold_total: per pass, whether later passes hold the child totals it found.
        hold_groups: per pass, whether later passes hold its group sums.
        slack: persons added to the optimal tolerance of held answers.
        hold_queries: per pass, the indices of the subproblem's queries (other than the
            total and the group attribute) whose answers later passes hold row by row;
            ``()``: none in any pass.
        outer: per pass, its outer pass (``()``: all in outer pass 0). A pass holds its
            answers for the later passes of its own outer pass only; outer passes are
            joined by their rounding (:func:`solve_interleaved`).
    """

    queries: tuple[tuple[int, ...], ...]
    hold_total: tuple[bool, ...]
    hold_groups: tuple[bool, ...]
    slack: float
    hold_queries: tuple[tuple[int, ...], ...] = ()
    outer: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        n = len(self.queries)
        if n == 0 or any(not q for q in self.queries):
            raise InternalError(f"L2Passes needs non-empty passes, got {self.queries}")
        if len(self.hold_total) != n or len(self.hold_groups) != n:
            raise InternalError("L2Passes hold flags must have one entry per pass")
        if not self.hold_queries:
            object.__setattr__(self, "hold_queries", ((),) * n)
        if len(self.hold_queries) != n:
            raise InternalError("L2Passes hold_queries must have one entry per pass")
        if not self.outer:
            object.__setattr__(self, "outer", (0,) * n)
        if len(self.outer) != n:
            raise InternalError("L2Passes outer must have one entry per pass")


def _key(schema: Schema, name: str) -> frozenset[str]:
    """A query's identity: the set of its variables (``detailed`` = every attribute).

    Read from the name, each variable checked by the schema, without building the
    query's rows (on the 1,227,744 DHC cells that took 0.1 s a name, 20 names a level).
    """
    key = name.strip().lower()
    if key == "total":
        return frozenset()
    if key == "detailed":
        return frozenset(schema.attribute_names)
    variables = [v.strip() for v in key.split("*")]
    if any(not v for v in variables) or len(set(variables)) != len(variables):
        return frozenset(make_query(schema, name).variables)  # its SchemaError
    for v in variables:
        schema.variable(v)  # raises SchemaError for an unknown name
    return frozenset(variables)


def bind_l2(
    plan: PassPlan, schema: Schema, measured: Sequence[str], group_variable: str | None
) -> L2Passes | None:
    """Map a plan's least-squares passes onto the measured queries of a level.

    Queries the plan names but the level did not measure are skipped (production
    filters its orderings by the measured queries too); passes left empty are dropped;
    a measured query the plan does not name joins the last pass, so no measurement is
    ever ignored. A held query is held as the child totals (``total``), the group sums
    (the group attribute) or row by row (any other measured query); ``detailed`` is
    never held (production skips it), nor is a query the level did not measure, nor
    anything the last pass of an outer pass names (no later pass of its outer pass
    reads it: production's ``if pass_num != self.pass_nums[-1]``).
    Each pass keeps its outer pass (:class:`~censusdp.release.topdown.passes.PassPlan`
    ``l2_outer``).

    Returns:
        the bound passes, or ``None`` when one pass remains (then :func:`solve_l2` on
        the whole subproblem is the same thing).

    Raises:
        ConfigError: when two passes or more remain but every least-squares pass of an
            outer pass names only queries the level did not measure (that outer pass
            would have nothing to round).
    """
    keys = [_key(schema, m) for m in measured]
    group_key = None if group_variable is None else _key(schema, group_variable)
    special = {frozenset(), group_key, _key(schema, "detailed")}
    passes: list[tuple[list[int], bool, bool, tuple[int, ...], int]] = []
    used: set[int] = set()
    for names, held, outer in zip(plan.l2, plan.hold, plan.l2_outer, strict=True):
        wanted = {_key(schema, n) for n in names}
        idx = [i for i, k in enumerate(keys) if k in wanted and i not in used]
        if not idx:
            continue
        used.update(idx)
        held_keys = {_key(schema, n) for n in held} & set(keys)
        rows = tuple(i for i, k in enumerate(keys) if k in held_keys and k not in special)
        passes.append((idx, frozenset() in held_keys, group_key in held_keys, rows, outer))
    if len(passes) <= 1:
        return None
    missing = sorted(set(plan.l2_outer) - {p[4] for p in passes})
    if missing:
        raise ConfigError(
            f"pass plan outer pass {missing[0]} has no measured query among the level's "
            f"{', '.join(measured)}"
        )
    passes[-1][0].extend(i for i in range(len(keys)) if i not in used)
    # the last pass of an outer pass holds for none
    holds = [n + 1 < len(passes) and passes[n + 1][4] == p[4] for n, p in enumerate(passes)]
    return L2Passes(
        queries=tuple(tuple(sorted(p[0])) for p in passes),
        hold_total=tuple(p[1] and h for p, h in zip(passes, holds, strict=True)),
        hold_groups=tuple(p[2] and h for p, h in zip(passes, holds, strict=True)),
        slack=plan.opt_tol_slack,
        hold_queries=tuple(p[3] if h else () for p, h in zip(passes, holds, strict=True)),
        outer=tuple(p[4] for p in passes),
    )


def _restrict(sub: Subproblem, queries: tuple[int, ...]) -> Subproblem:
    w = sub.weights[list(queries)]
    if w.size and w.max() > 0:
        w = w / w.max()
    return replace(
        sub,
        query_rows=tuple(sub.query_rows[q] for q in queries),
        query_sizes=tuple(sub.query_sizes[q] for q in queries),
        noisy=tuple(sub.noisy[q] for q in queries),
        weights=w,
        unit_weights=None
        if sub.unit_weights is None
        else sub.unit_weights[list(queries)].reshape(len(queries), sub.k),
    )


def _hold(sub: Subproblem, x: np.ndarray, total: bool, groups: bool, tol: float) -> Subproblem:
    """``sub`` with the totals and/or group sums of ``x`` held within ``tol``."""
    kw = {}
    if total:
        t = x.sum(axis=1)
        lo = np.maximum(sub.total_lower, t - tol)
        hi = np.minimum(sub.total_upper, t + tol)
        kw["total_lower"] = np.minimum(lo, hi)
        kw["total_upper"] = hi
    if groups:
        s = sub.group_sums(x)
        lo = np.maximum(sub.group_lower, s - tol)
        hi = np.minimum(sub.group_upper, s + tol)
        kw["group_lower"] = np.maximum(np.minimum(lo, hi), 0.0)
        kw["group_upper"] = hi
    return sub.with_bounds(**kw)


def _run_l2(
    sub: Subproblem,
    passes: L2Passes,
    indices: Sequence[int],
    exact: Sequence[_held.Held],
    anchor: np.ndarray | None,
    opts: dict,
) -> tuple[list[RealSolution], list[_held.Held]]:
    """The least-squares passes ``indices`` of ``passes``, each holding ``exact`` (with
    ``anchor``, a point meeting them and ``sub``) and the answers the earlier of these
    passes hold; their solutions and every hold."""
    current = sub
    results: list[RealSolution] = []
    holds = list(exact)
    for n, p in enumerate(indices):
        target = _restrict(current, passes.queries[p])
        if holds:
            start = results[-1].x if results else anchor
            res, _ = _held.solve_held(target, holds, start, **opts)
        else:
            res = solve_l2(target, **opts)
        results.append(res)
        if n + 1 < len(indices):
            held_tol = float(res.max_violation) + passes.slack
            current = _hold(current, res.x, passes.hold_total[p], passes.hold_groups[p], held_tol)
            holds.extend(
                _held.Held.around(sub.query_rows[q], res.x, held_tol, str(q))
                for q in passes.hold_queries[p]
            )
    return results, holds


def _joined(
    sub: Subproblem, results: list[RealSolution], holds: list[_held.Held], t0: float
) -> RealSolution:
    """The passes' solutions as one: the last one's ``x``, measured on ``sub``."""
    x = results[-1].x
    bad = [r.status for r in results if r.status != "optimal"]
    return RealSolution(
        x=x,
        status=bad[0] if bad else "optimal",
        method="+".join(r.method for r in results),
        iterations=sum(r.iterations for r in results),
        seconds=time.perf_counter() - t0,
        max_violation=max([sub.max_violation(x), *(h.violation(x) for h in holds)]),
        objective=sub.objective(x),
        solver_status="; ".join(f"pass {p}: {r.solver_status}" for p, r in enumerate(results)),
        attempts=tuple((f"pass {p}: {m}", s) for p, r in enumerate(results) for m, s in r.attempts),
    )


def solve_l2_passes(
    sub: Subproblem,
    passes: L2Passes,
    *,
    method: str = "auto",
    tol: float = 1e-7,
    feas_tol: float = 1e-8,
) -> RealSolution:
    """Least squares in passes (see the module docstring; production's ``DataIndQueriesL2NPass``).

    Args:
        sub: the (feasible) subproblem with every measured query.
        passes: the passes bound to ``sub``'s queries (:func:`bind_l2`), in one outer
            pass (:func:`solve_interleaved` runs several).
        method, tol, feas_tol: as for :func:`~censusdp.release.topdown.solvers.least_squares.solve_l2`, for
            every pass.

    Returns:
        the last pass's solution, with ``method`` the ``+``-joined backends of the passes,
        ``iterations`` their sum, ``attempts`` every backend tried (prefixed by its pass),
        and ``objective`` / ``max_violation`` measured on the whole original ``sub``.
    """
    if len(set(passes.outer)) > 1:
        raise InternalError("passes in several outer passes are solved by solve_interleaved")
    t0 = time.perf_counter()
    opts = {"method": method, "tol": tol, "feas_tol": feas_tol}
    results, holds = _run_l2(sub, passes, range(len(passes.queries)), (), None, opts)
    return _joined(sub, results, holds, t0)


def solve_interleaved(
    sub: Subproblem,
    passes: L2Passes,
    rounding: RoundingPasses,
    *,
    method: str = "auto",
    production: bool = False,
) -> tuple[RealSolution, np.ndarray]:
    """Least squares and rounding in outer passes (production's ``L2PlusRounder_interleaved``).

    Each outer pass ``o`` is :func:`solve_l2_passes` on its own least-squares passes, then
    :func:`round_in_passes` on its own rounding passes; the answers of every query of its
    last rounding pass are then held exactly, at their rounded values, by every later
    outer pass, in its least squares (a :class:`~censusdp.release.topdown._held.Held`
    of tolerance 0, anchored at the rounded counts) and in its rounding. Production
    (``programs/optimization/sequential_optimizers.py``, ``interleave_optimizations``)
    appends them to the subproblem's constraints as equalities.

    Args:
        sub: the (feasible) subproblem with every measured query.
        passes: the least-squares passes with their outer passes (:func:`bind_l2`).
        rounding: the rounding passes, with the same outer passes.
        method: the least-squares backend of every pass.
        production: production's rounder (:func:`round_in_passes`).

    Returns:
        the last outer pass's least-squares solution (as :func:`solve_l2_passes` reports
        it, over every pass) and the final integer counts.
    """
    outers = sorted(set(passes.outer))
    if outers != sorted(set(rounding.outer)):
        raise InternalError(
            f"least squares in outer passes {outers}, rounding in {sorted(set(rounding.outer))}"
        )
    t0 = time.perf_counter()
    opts = {"method": method, "tol": 1e-7, "feas_tol": 1e-8}
    results: list[RealSolution] = []
    holds: list[_held.Held] = []
    exact: list[_held.Held] = []
    counts: np.ndarray | None = None
    held_queries: list[int] = []
    for o in outers:
        l2 = [p for p, po in enumerate(passes.outer) if po == o]
        res, held = _run_l2(sub, passes, l2, exact, counts, opts)
        results += res
        holds += held
        runs = [p for p, po in enumerate(rounding.outer) if po == o]
        counts = round_in_passes(
            sub, res[-1].x, rounding, production=production, run=runs,
            held_counts=counts, held_queries=held_queries,
        )  # fmt: skip
        last = rounding.passes[runs[-1]]
        held_queries += last
        exact += [_held.Held.around(rounding.rows[q], counts, 0.0, rounding.names[q]) for q in last]
    return _joined(sub, results, holds, t0), counts


@dataclass(frozen=True, eq=False)
class RoundingPasses:
    """A plan's rounding passes on one subproblem's kept cells.

    Attributes:
        names: the rounding queries.
        rows: per query, ``(c,)`` answer row of every kept cell.
        passes: per pass, indices into ``names``.
        cellwise: per pass, whether ``detailed`` is in it (the cell-wise cost applies).
        outer: per pass, its outer pass (``()``: all in outer pass 0).
    """

    names: tuple[str, ...]
    rows: tuple[np.ndarray, ...]
    passes: tuple[tuple[int, ...], ...]
    cellwise: tuple[bool, ...]
    outer: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not self.outer:
            object.__setattr__(self, "outer", (0,) * len(self.passes))


@dataclass(frozen=True, eq=False)
class RoundingTemplate:
    """A plan's rounding passes on every schema cell; :meth:`on` cuts them to a task's cells."""

    names: tuple[str, ...]
    rows: tuple[np.ndarray, ...]
    passes: tuple[tuple[int, ...], ...]
    cellwise: tuple[bool, ...]
    outer: tuple[int, ...] = ()

    def on(self, kept: np.ndarray) -> RoundingPasses:
        """The passes on the kept cells ``kept`` (schema cell indices)."""
        return RoundingPasses(
            self.names, tuple(r[kept] for r in self.rows), self.passes, self.cellwise, self.outer
        )


def bind_rounding(plan: PassPlan, schema: Schema) -> RoundingTemplate:
    """The rounding passes of ``plan`` as row maps of ``schema`` (queries need not be measured).

    Raises:
        SchemaError: for a query name the schema cannot build.
    """
    names: list[str] = []
    rows: list[np.ndarray] = []
    passes: list[tuple[int, ...]] = []
    cellwise: list[bool] = []
    detailed = _key(schema, "detailed")
    for group in plan.rounder:
        idx = []
        for name in group:
            q = make_query(schema, name)
            names.append(q.name)
            rows.append(q.row_of_cell)
            idx.append(len(names) - 1)
        passes.append(tuple(idx))
        cellwise.append(any(_key(schema, n) == detailed for n in group))
    return RoundingTemplate(
        tuple(names), tuple(rows), tuple(passes), tuple(cellwise), plan.rounder_outer
    )


def round_in_passes(
    sub: Subproblem,
    x: np.ndarray,
    passes: RoundingPasses,
    *,
    method: str = "ortools",
    production: bool = False,
    run: Sequence[int] | None = None,
    held_counts: np.ndarray | None = None,
    held_queries: Sequence[int] = (),
) -> np.ndarray:
    """Integer rounding in passes (production's ``MultipassRounder``, as min-cost flows).

    Pass ``p`` minimises ``sum_{q in pass p} sum_rows |A_q X - round(A_q x)|`` (in the box
    ``floor(x) + {0, 1}``, ``round(A_q frac(x))`` as production writes it), plus
    ``sum |X - x|`` when ``detailed`` is in the pass, subject to every constraint of
    ``sub`` and to the integer answers of every earlier pass.

    ``production=True`` is production's rounder exactly
    (``programs/optimization/multipass_rounder.py``, ``simple_rounder.py``): no
    cell-wise term (``buildL1PenaltyObjFxn`` tests ``rev_dpq_order[DETAILED] ==
    pass_num``, a set against a number, which is never true), a binary variable on
    every kept cell (``findDesiredIndices``: every cell where the parent is positive, so
    an integer cell may move up by one), and no way out of the box: a pass with no
    feasible point raises, as production's failed pass does. Ties of a pass's objective
    are broken by the cell-wise cost at a weight too small to change its optimum.

    Args:
        sub: the subproblem (after the failsafe).
        x: ``(k, c)`` least-squares solution.
        passes: the rounding passes on ``sub``'s kept cells.
        method: min-cost flow solver, ``"ortools"`` or ``"linprog"``.
        production: production's rounder (above) instead of censusdp's.
        run: the passes to run, in order (``None``: every pass).
        held_counts: ``(k, c)`` integer counts of an earlier outer pass
            (:func:`solve_interleaved`) whose answers to ``held_queries`` every pass
            holds exactly.
        held_queries: indices into ``passes.names``.

    Returns:
        ``(k, c)`` int64, every constraint of ``sub`` exact.

    Raises:
        ConfigError: when the rounding queries are not nested.
        InfeasibleError: when no integer point satisfies ``sub`` (``production``: when
            a pass has no feasible point in the box).
    """
    x = np.asarray(x, dtype=np.float64)
    if x.shape != (sub.k, sub.c):
        raise InternalError(f"rounding input has shape {x.shape}, expected {(sub.k, sub.c)}")
    if not np.isfinite(x).all():
        raise InternalError("rounding input contains NaN or infinity")
    xs = _snap(x)
    chain = _pass_network.build_chain(sub, passes.rows, passes.names)
    layer_of = {q: lev for lev in chain.levels for q in lev.members}

    def answers(counts: np.ndarray, q: int) -> np.ndarray:
        lev = layer_of.get(q)
        if lev is None:  # a cell query: the cells themselves
            return counts.copy()
        return _pass_network._row_sum(counts, lev.labels, lev.n_rows)

    nq = len(passes.names)
    order = range(len(passes.passes)) if run is None else run
    for box in (True,) if production else (True, False):
        held: list[np.ndarray | None] = [None] * nq
        for q in held_queries:
            held[q] = answers(np.asarray(held_counts, dtype=np.int64), q)
        result = None
        for p in order:
            qs = passes.passes[p]
            weight = np.zeros(nq, dtype=np.int64)
            weight[list(qs)] += 1
            cellwise = passes.cellwise[p] and not production
            costs = _pass_network.PassCosts(cellwise, weight, held, every_cell=production)
            built = _pass_network.network(sub, chain, costs, xs, box=box, scale=COST_SCALE)
            flow = None if built is None else _flow.solve(built[0], method)
            if flow is None and production:
                raise InfeasibleError(
                    f"subproblem {sub.label!r}: rounding pass {p} "
                    f"({', '.join(passes.names[q] for q in qs)}) has no feasible point with "
                    "each cell at floor(x) or floor(x) + 1; production's rounder stops "
                    "here (fidelity 'production' has no fallback)"
                )
            if flow is None:
                result = None
                break
            net, arcs, idx, base = built
            out = base.ravel().copy()
            np.add.at(out, idx, flow[arcs])
            result = out.reshape(sub.k, sub.c)
            for q in qs:
                held[q] = answers(result, q)
        if result is not None:
            return accept(sub, result)
    raise no_integer_solution(sub)
