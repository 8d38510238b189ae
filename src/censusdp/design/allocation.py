"""Budget allocation for TopDown measurements (``censusdp design allocation``).

Given a budget (global ``rho``, geolevels, and the queries measured at each) and a
*target workload* of tables at geolevels with weights, choose the geolevel shares and
the query shares within each geolevel that minimise the expected weighted error of the
tables, answered from the noisy measurements of one geounit by generalised least
squares; then compare with the budget's own allocation and emit a preset TOML.

Model (per geounit at geolevel ``l``; ``x`` its detailed histogram). Query ``q`` with
0/1 matrix ``Q_q`` is measured with noise of variance ``sigma_q^2 = 1 / (kappa rho_q)``,
``rho_q = rho g_l s_lq``: ``kappa = 1`` for bounded neighbours (the 2020 production
convention, ``sigma^2 = 1 / rho_q``) and ``kappa = 2`` for unbounded (``sigma^2 = 1 /
(2 rho_q)``). The GLS estimate has covariance ``M_l^{-1}`` with precision
``M_l = kappa rho g_l sum_q s_lq Q_q^T Q_q``, so a target table ``T`` (``r_T`` cells)
has mean squared error per cell ``tr(T^T T M_l^{-1}) / r_T`` and the objective is

    E = sum_l sum_{T at l} w_T tr(T^T T M_l^{-1}) / r_T = sum_l C_l(s_l) / (kappa rho g_l),

with ``C_l(s) = tr(A_l (sum_q s_q G_q)^{-1})``, ``A_l = sum_T (w_T / r_T) T^T T``,
``G_q = Q_q^T Q_q``.

* Query shares: ``C_l`` is convex in ``s`` on the simplex; minimising it is an
  L-optimal design problem. It is solved by SLSQP with the analytic gradient ``dC/ds_q
  = -d_q``, ``d_q = tr(M^{-1} A M^{-1} G_q)``, then polished by the multiplicative
  algorithm ``s_q <- s_q d_q^{1/2} / sum_r s_r d_r^{1/2}``, which decreases ``C``
  monotonically (Yu 2010, "Monotonic convergence of a general algorithm for computing
  optimal designs", Ann. Statist. 38(3)). The general equivalence theorem (Kiefer &
  Wolfowitz 1960; for linear criteria, Fedorov 1972) certifies the optimum: ``max_q d_q
  <= C`` with equality on the support, so ``max_q d_q / C - 1`` is reported as the
  optimality gap.
* Geolevel shares: minimising ``sum_l a_l / g_l`` with ``sum_l g_l = 1`` gives ``g_l =
  sqrt(a_l) / sum_k sqrt(a_k)`` and ``E = (sum_l sqrt(a_l))^2 / (kappa rho)``.

Computation never forms the ``cells x cells`` matrices. Every query here is a product
of partitions of each attribute's levels (identity, total or a recode). For attribute
``i`` let the *atoms* be the common refinement of all non-identity partitions in play;
``R^{n_i}`` splits into ``U_i`` (vectors constant on atoms, dimension ``a_i``) and its
complement (within-atom contrasts), which every non-identity partition annihilates and
the identity fixes. So every ``G_q`` is block diagonal over the ``2^d`` tensor
components ``(x)_i (U_i or U_i^perp)``, with at most ``prod a_i`` rows per block (3 for
PL94, whose only non-trivial attribute partition is HHINSTLEVELS on HHGQ):
``tr(A M^{-1}) = sum_c mult(c) tr(A_c M_c^{-1})``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from censusdp.data.queries import make_query
from censusdp.data.schema import Schema, get_schema
from censusdp.design._errors import DesignError
from censusdp.design.level_model import LevelErrorModel, rationalize, solve_level
from censusdp.privacy.budget import Budget
from censusdp.privacy.mechanisms import DiscreteGaussian
from censusdp.privacy.randomness import RandomSource
from censusdp.progress import Progress, say
from censusdp.version import __version__

__all__ = [
    "NEIGHBOURS",
    "AllocationReport",
    "AllocationRequest",
    "SharePlan",
    "TargetTable",
    "budget_to_toml",
    "optimize_allocation",
    "own_target_workload",
    "plan_schema",
    "revealed_target_workload",
    "simulate_errors",
]

NEIGHBOURS: dict[str, int] = {"bounded": 1, "unbounded": 2}
"""``kappa``: noise precision per unit of rho (``sigma^2 = 1 / (kappa rho_q)``)."""


@dataclass(frozen=True)
class TargetTable:
    """One table of the target workload.

    Attributes:
        geolevel: geolevel name.
        query: query name (valid for the schema, e.g. ``"votingage*hispanic*cenrace"``).
        weight: importance of the table's mean squared error per cell (> 0).
    """

    geolevel: str
    query: str
    weight: float = 1.0

    def __post_init__(self) -> None:
        w = self.weight
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w <= 0:
            raise DesignError(
                f"weight of table {self.query!r} at {self.geolevel!r} is {w!r}; it must be a "
                "positive number"
            )


@dataclass(frozen=True)
class SharePlan:
    """Budget shares over a schema of the user's own (a workload file), not a preset.

    It has the parts of a :class:`~censusdp.privacy.budget.Budget` the allocation reads
    (a ``Budget`` needs a built-in schema that a release can run on). Shares are exact
    and validated like a budget's: positive, each set summing to 1.

    Attributes:
        name: the workload's name.
        schema_def: the schema (attributes and sizes).
        total: the global rho.
        geolevel_shares: share of ``total`` per geolevel, in order.
        query_shares: per geolevel, the share of each measured query.
        neighbours: ``"bounded"`` or ``"unbounded"``.
        description: one line.
    """

    name: str
    schema_def: Schema
    total: Fraction
    geolevel_shares: dict[str, Fraction]
    query_shares: dict[str, dict[str, Fraction]]
    neighbours: str = "bounded"
    description: str = ""

    def __post_init__(self) -> None:
        if self.total <= 0:
            raise DesignError(f"rho is {self.total}; it must be positive")
        if self.neighbours not in NEIGHBOURS:
            raise DesignError(
                f"neighbours is {self.neighbours!r}; it must be one of {list(NEIGHBOURS)}"
            )
        sets = [("geolevel shares", self.geolevel_shares)] + [
            (f"query shares at {lv!r}", self.query_shares.get(lv, {}))
            for lv in self.geolevel_shares
        ]
        for what, shares in sets:
            if not shares or any(v <= 0 for v in shares.values()) or sum(shares.values()) != 1:
                raise DesignError(f"{what} must be positive and sum to 1; got {shares}")

    @property
    def schema(self) -> str:
        """The schema's name."""
        return self.schema_def.name

    @property
    def privacy_measure(self) -> str:
        """Always ``"zCDP"`` (discrete Gaussian noise)."""
        return "zCDP"

    @property
    def geolevel_names(self) -> tuple[str, ...]:
        """Geolevels, in order."""
        return tuple(self.geolevel_shares)

    @classmethod
    def uniform(
        cls,
        name: str,
        schema: Schema,
        total: Fraction,
        candidates: dict[str, tuple[str, ...]],
        neighbours: str = "bounded",
    ) -> SharePlan:
        """Equal shares: every geolevel ``1/L``, every candidate query ``1/Q`` of its level."""
        return cls(
            name=name,
            schema_def=schema,
            total=total,
            geolevel_shares={lv: Fraction(1, len(candidates)) for lv in candidates},
            query_shares={
                lv: {q: Fraction(1, len(qs)) for q in qs} for lv, qs in candidates.items()
            },
            neighbours=neighbours,
            description="equal shares of every geolevel and query",
        )


def plan_schema(budget: Budget | SharePlan) -> Schema:
    """The schema of a budget (built-in, by name) or of a share plan (its own)."""
    return budget.schema_def if isinstance(budget, SharePlan) else get_schema(budget.schema)


def own_target_workload(budget: Budget) -> tuple[TargetTable, ...]:
    """The budget's own measured queries at every geolevel, each with weight 1."""
    return tuple(
        TargetTable(level, q, 1.0)
        for level in budget.geolevel_names
        for q in budget.query_shares[level]
    )


def revealed_target_workload(budget: Budget) -> tuple[TargetTable, ...]:
    """The budget's measured queries weighted by ``(g_l s_lq)^2`` (mean 1).

    If every table were estimated from its own measurement alone, its MSE per cell would
    be ``1 / (kappa rho g_l s_lq)``, and minimising ``sum w / (g s)`` subject to ``sum g s =
    1`` gives ``g s`` proportional to ``sqrt(w)``: these are the weights for which the
    budget's own shares are optimal without least-squares pooling (its revealed
    preferences). The optimiser's gain on this workload is what pooling the
    measurements of one geounit buys.
    """
    raw = [
        (level, q, float(budget.geolevel_shares[level] * share) ** 2)
        for level in budget.geolevel_names
        for q, share in budget.query_shares[level].items()
    ]
    mean = sum(w for _, _, w in raw) / len(raw)
    return tuple(TargetTable(level, q, w / mean) for level, q, w in raw)


@dataclass(frozen=True)
class AllocationRequest:
    """What ``censusdp design allocation`` optimises (validated on construction).

    Attributes:
        budget: the allocation to start from and compare with; its global budget,
            geolevels and measured queries are kept.
        targets: the target workload (default: the budget's own measured queries,
            weight 1 each).
        neighbours: ``"bounded"`` (``sigma^2 = 1 / rho_q``) or ``"unbounded"``
            (``sigma^2 = 1 / (2 rho_q)``); ``None`` (default) takes the budget's own
            ``neighbours``, so the errors match the preset that is written.
        denominator: shares are written as ``k / denominator``.
        tol: optimality gap at which the multiplicative algorithm stops.
        max_iter: iterations (SLSQP plus multiplicative polishing) per geolevel.
        min_share: query shares below this (before rounding) are dropped.
        name: name of the emitted preset.
    """

    budget: Budget | SharePlan
    targets: tuple[TargetTable, ...] | None = None
    neighbours: str | None = None
    denominator: int = 10_000
    tol: float = 1e-7
    max_iter: int = 2_000
    min_share: float = 1e-4
    name: str = ""

    def __post_init__(self) -> None:
        if self.budget.privacy_measure != "zCDP":
            raise DesignError(
                f"budget {self.budget.name!r} is pure DP; the allocation optimiser needs a "
                "zCDP (discrete Gaussian) budget"
            )
        if self.neighbours is None:
            object.__setattr__(self, "neighbours", self.budget.neighbours)
        if self.neighbours not in NEIGHBOURS:
            raise DesignError(
                f"neighbours is {self.neighbours!r}; it must be one of {list(NEIGHBOURS)}"
            )
        d = self.denominator
        if isinstance(d, bool) or not isinstance(d, int) or d < 10:
            raise DesignError(f"denominator is {d!r}; it must be an integer >= 10")
        if not 0 < self.tol < 1:
            raise DesignError(f"tol is {self.tol!r}; it must be in (0, 1)")
        if not 0 <= self.min_share < 0.5:
            raise DesignError(f"min_share is {self.min_share!r}; it must be in [0, 0.5)")
        targets = own_target_workload(self.budget) if self.targets is None else self.targets
        if not targets:
            raise DesignError("the target workload is empty")
        levels = set(self.budget.geolevel_names)
        schema = plan_schema(self.budget)
        for t in targets:
            if t.geolevel not in levels:
                raise DesignError(
                    f"target table {t.query!r} is at unknown geolevel {t.geolevel!r}; "
                    f"geolevels are {list(self.budget.geolevel_names)}"
                )
            try:
                make_query(schema, t.query)
            except ValueError as exc:
                raise DesignError(f"target table {t.query!r}: {exc}") from None
        missing = [
            lv for lv in self.budget.geolevel_names if lv not in {t.geolevel for t in targets}
        ]
        if missing:
            raise DesignError(
                f"geolevel {missing[0]!r} has no target table; give every geolevel at least "
                "one (its share would be 0)"
            )
        object.__setattr__(self, "targets", tuple(targets))


@dataclass(frozen=True)
class AllocationReport:
    """The optimised allocation, the original's error on the same workload, and why.

    Attributes:
        request: what was optimised.
        budget: the optimised allocation (a validated :class:`~censusdp.privacy.budget.Budget`).
        levels: per geolevel: shares (original and optimised), error terms, gap.
        tables: per target table: original and optimised MSE per cell.
        original_error: ``E`` of the request's budget.
        optimized_error: ``E`` of :attr:`budget` (exact rational shares).
        continuous_error: ``E`` at the unrounded optimum (a lower bound for any
            allocation of the same queries).
    """

    request: AllocationRequest
    budget: Budget | SharePlan
    levels: tuple[dict[str, Any], ...]
    tables: tuple[dict[str, Any], ...]
    original_error: float
    optimized_error: float
    continuous_error: float
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready report."""
        r = self.request
        own = isinstance(r.budget, SharePlan)
        return {
            "budget": r.budget.name,
            "schema": r.budget.schema,
            **({"attributes": _attribute_sizes(r.budget)} if own else {}),
            "start": "equal shares (a workload file)" if own else "the budget's own shares",
            "rho": str(r.budget.total),
            "neighbours": r.neighbours,
            "noise_variance": "1/rho_q" if r.neighbours == "bounded" else "1/(2 rho_q)",
            "objective": "sum over target tables of weight x mean squared error per cell "
            "(GLS within one geounit)",
            "original_error": self.original_error,
            "optimized_error": self.optimized_error,
            "continuous_optimum_error": self.continuous_error,
            "improvement": 1.0 - self.optimized_error / self.original_error,
            "levels": list(self.levels),
            "tables": list(self.tables),
            "preset_name": self.budget.name,
            **self.extra,
            "package_version": __version__,
        }

    def format(self) -> str:
        """A human-readable summary."""
        own = isinstance(self.request.budget, SharePlan)
        what = "workload" if own else "budget"
        lines = [
            f"allocation for {what} {self.request.budget.name} ({self.request.neighbours} "
            f"neighbours), {len(self.tables)} target tables"
            + (", starting from equal shares" if own else ""),
            f"  weighted MSE per cell: original {self.original_error:.6g}, optimised "
            f"{self.optimized_error:.6g} ({100 * (1 - self.optimized_error / self.original_error):.1f}% "
            "lower)",
            f"{'geolevel':<11} {'share':>8} {'-> new':>8} {'error':>10} {'-> new':>10} {'gap':>8}",
        ]
        for lv in self.levels:
            lines.append(
                f"{lv['geolevel']:<11} {lv['original_share_float']:>8.4f} "
                f"{lv['optimized_share_float']:>8.4f} {lv['original_error']:>10.4g} "
                f"{lv['optimized_error']:>10.4g} {lv['optimality_gap']:>8.1e}"
            )
        sim = self.extra.get("simulation")
        if sim:
            o, n = sim["original"], sim["optimized"]
            lines.append(
                f"simulated ({o['trials']} trials, seed {o['seed']}): original "
                f"{o['error']:.6g} +- {o['standard_error']:.2g}, optimised {n['error']:.6g} "
                f"+- {n['standard_error']:.2g}"
            )
        return "\n".join(lines)


def _attribute_sizes(plan: SharePlan) -> dict[str, int]:
    return {a.name: a.size for a in plan.schema_def.attributes}


def _level_terms(
    model: LevelErrorModel, targets: Sequence[TargetTable], level: str
) -> list[tuple[str, float]]:
    return [(t.query, t.weight / model.rows(t.query)) for t in targets if t.geolevel == level]


def _allocation_error(
    model: LevelErrorModel,
    budget: Budget | SharePlan,
    targets: Sequence[TargetTable],
    kappa: int,
) -> tuple[float, dict[str, float], dict[tuple[str, str], float]]:
    """``E`` of a budget, per level, and per table (MSE per cell, unweighted)."""
    rho = float(budget.total)
    per_level: dict[str, float] = {}
    per_table: dict[tuple[str, str], float] = {}
    for level in budget.geolevel_names:
        g = float(budget.geolevel_shares[level])
        shares = [(q, float(s)) for q, s in budget.query_shares[level].items()]
        scale = kappa * rho * g
        terms = _level_terms(model, targets, level)
        value, _ = model.level_error(shares, terms)
        per_level[level] = value / scale
        for t in targets:
            if t.geolevel == level:
                v, _ = model.level_error(shares, [(t.query, 1.0 / model.rows(t.query))])
                per_table[(level, t.query)] = v / scale
    return sum(per_level.values()), per_level, per_table


def optimize_allocation(
    request: AllocationRequest,
    progress: Progress = None,
    *,
    simulate_trials: int = 0,
    seed: int = 0,
) -> AllocationReport:
    """Optimise query and geolevel shares for the request's target workload.

    Candidate queries at each geolevel are the budget's measured queries there; the
    optimiser may drop some (share below ``min_share``). See the module docstring for the
    objective and the algorithm. With ``simulate_trials > 0`` both allocations are also
    checked by Monte Carlo (:func:`simulate_errors`, seeded by ``seed``), stored under
    ``extra["simulation"]``.
    """
    if (
        isinstance(simulate_trials, bool)
        or not isinstance(simulate_trials, int)
        or simulate_trials < 0
    ):
        raise DesignError(f"simulate_trials is {simulate_trials!r}; it must be an integer >= 0")
    if simulate_trials == 1:
        raise DesignError("simulate_trials is 1; a standard error needs at least 2 trials")
    budget = request.budget
    targets = request.targets or ()
    kappa = NEIGHBOURS[str(request.neighbours)]
    schema = plan_schema(budget)
    all_queries = [q for lv in budget.geolevel_names for q in budget.query_shares[lv]]
    model = LevelErrorModel(schema, all_queries + [t.query for t in targets])
    rho = float(budget.total)

    level_opt = {
        level: _optimize_level(model, budget, targets, level, request, progress)
        for level in budget.geolevel_names
    }
    new_budget = _optimized_budget(budget, level_opt, request, len(targets))
    sqrt_cont = sum(math.sqrt(level_opt[lv]["continuous"]) for lv in budget.geolevel_names)
    orig_total, orig_level, orig_table = _allocation_error(model, budget, targets, kappa)
    new_total, new_level, new_table = _allocation_error(model, new_budget, targets, kappa)
    levels = [
        _level_row(level, budget, new_budget, orig_level, new_level, level_opt[level])
        for level in budget.geolevel_names
    ]
    tables = [
        {
            "geolevel": t.geolevel,
            "query": t.query,
            "weight": t.weight,
            "cells": model.rows(t.query),
            "original_mse_per_cell": orig_table[(t.geolevel, t.query)],
            "optimized_mse_per_cell": new_table[(t.geolevel, t.query)],
        }
        for t in targets
    ]
    extra: dict[str, Any] = {}
    if simulate_trials:
        extra["simulation"] = {
            label: simulate_errors(
                b,
                targets,
                neighbours=str(request.neighbours),
                trials=simulate_trials,
                seed=seed,
                progress=progress,
            )
            for label, b in (("original", budget), ("optimized", new_budget))
        }
    return AllocationReport(
        request=request,
        budget=new_budget,
        levels=tuple(levels),
        tables=tuple(tables),
        original_error=orig_total,
        optimized_error=new_total,
        continuous_error=sqrt_cont**2 / (kappa * rho),
        extra=extra,
    )


def _optimize_level(
    model: LevelErrorModel,
    budget: Budget | SharePlan,
    targets: Sequence[TargetTable],
    level: str,
    request: AllocationRequest,
    progress: Progress,
) -> dict[str, Any]:
    """Optimal query shares at one geolevel (queries below ``min_share`` dropped)."""
    queries = list(budget.query_shares[level])
    terms = _level_terms(model, targets, level)
    start = np.array([float(budget.query_shares[level][q]) for q in queries])
    s, value, gap, its = solve_level(
        model, queries, start, terms, tol=request.tol, max_iter=request.max_iter
    )
    keep = [k for k in range(len(queries)) if s[k] >= request.min_share]
    if len(keep) < len(queries):  # re-optimise on the kept queries
        queries = [queries[k] for k in keep]
        s, value, gap, more = solve_level(
            model, queries, s[keep], terms, tol=request.tol, max_iter=request.max_iter
        )
        its += more
    fracs = rationalize(s, request.denominator)
    kept = {q: f for q, f in zip(queries, fracs, strict=True) if f > 0}
    exact, _ = model.level_error([(q, float(f)) for q, f in kept.items()], terms)
    say(
        progress,
        f"design: allocation {level}: C = {value:.6g}, {len(kept)} queries, "
        f"gap {gap:.1e} after {its} iterations",
    )
    return {
        "continuous": value,
        "exact": exact,
        "shares": kept,
        "float_shares": dict(zip(queries, s.tolist(), strict=True)),
        "gap": gap,
        "iterations": its,
    }


def _optimized_budget(
    budget: Budget | SharePlan,
    level_opt: dict[str, dict[str, Any]],
    request: AllocationRequest,
    n_targets: int,
) -> Budget | SharePlan:
    """``budget`` with the optimised query shares and geolevel shares ``∝ sqrt(error)``."""
    sqrt_exact = np.array([math.sqrt(level_opt[lv]["exact"]) for lv in budget.geolevel_names])
    gshares = rationalize(sqrt_exact, request.denominator)
    if any(g == 0 for g in gshares):
        raise DesignError(
            f"a geolevel's optimal share rounds to 0 at denominator {request.denominator}; "
            "raise the denominator"
        )
    if isinstance(budget, SharePlan):
        return SharePlan(
            name=request.name or f"{budget.name}-optimized",
            schema_def=budget.schema_def,
            total=budget.total,
            geolevel_shares=dict(zip(budget.geolevel_names, gshares, strict=True)),
            query_shares={lv: level_opt[lv]["shares"] for lv in budget.geolevel_names},
            neighbours=str(request.neighbours),
            description=f"allocation optimised for a target workload of {n_targets} tables",
        )
    return Budget(
        schema=budget.schema,
        mechanism=budget.mechanism,
        total=budget.total,
        delta=budget.delta,
        geolevels=budget.geolevels,
        geolevel_shares=dict(zip(budget.geolevel_names, gshares, strict=True)),
        query_shares={lv: level_opt[lv]["shares"] for lv in budget.geolevel_names},
        neighbours=str(request.neighbours),
        name=request.name or f"{budget.name}-optimized",
        description=f"allocation optimised for a target workload of {n_targets} tables "
        f"(from {budget.name}, same global rho)",
        notes=(
            f"Optimised by censusdp design allocation from {budget.name} ({request.neighbours} "
            "neighbours): geolevel and query shares minimise the weighted mean squared error "
            "per cell of the target tables, each answered by least squares from its own "
            "geounit's measurements.",
        ),
    )


def _level_row(
    level: str,
    budget: Budget | SharePlan,
    new_budget: Budget | SharePlan,
    orig_level: dict[str, float],
    new_level: dict[str, float],
    opt: dict[str, Any],
) -> dict[str, Any]:
    """One geolevel of the report: shares and errors before and after."""
    og = budget.geolevel_shares[level]
    ng = new_budget.geolevel_shares[level]
    return {
        "geolevel": level,
        "original_share": str(og),
        "original_share_float": float(og),
        "optimized_share": str(ng),
        "optimized_share_float": float(ng),
        "original_error": orig_level[level],
        "optimized_error": new_level[level],
        "optimality_gap": opt["gap"],
        "iterations": opt["iterations"],
        "original_query_shares": {q: float(v) for q, v in budget.query_shares[level].items()},
        "optimized_query_shares": {q: float(v) for q, v in new_budget.query_shares[level].items()},
    }


def budget_to_toml(budget: Budget, header: Sequence[str] = ()) -> str:
    """A preset TOML in the format of ``censusdp/presets/*.toml`` (exact fractions)."""

    def q(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

    unit = "rho" if budget.privacy_measure == "zCDP" else "epsilon"
    lines = [f"# {h}".rstrip() for h in header]
    if lines:
        lines.append("")
    lines += [
        f"name = {q(budget.name)}",
        f"description = {q(budget.description)}",
        f"schema = {q(budget.schema)}",
        f"mechanism = {q(budget.mechanism)}",
        f"{unit} = {q(str(budget.total))}",
        f"delta = {q(_delta_text(budget.delta))}",
        f"neighbours = {q(budget.neighbours)}",
    ]
    if budget.notes:
        lines.append("notes = [")
        lines += [f"  {q(n)}," for n in budget.notes]
        lines.append("]")
    for name, length in budget.geolevels:
        lines += [
            "",
            "[[geolevels]]",
            f"name = {q(name)}",
            f"length = {length}",
            f"share = {q(str(budget.geolevel_shares[name]))}",
            "",
            "[geolevels.queries]",
        ]
        for query, share in budget.query_shares[name].items():
            key = query if query.replace("_", "").isalnum() else q(query)
            lines.append(f"{key} = {q(str(share))}")
    return "\n".join(lines) + "\n"


def _delta_text(delta: Fraction) -> str:
    """``1e-10`` for powers of ten, else the exact fraction."""
    if delta.numerator == 1:
        k = round(math.log10(delta.denominator))
        if 10**k == delta.denominator:
            return f"1e-{k}"
    return str(delta)


def simulate_errors(
    budget: Budget | SharePlan,
    targets: Sequence[TargetTable],
    *,
    neighbours: str = "bounded",
    trials: int = 200,
    seed: int = 0,
    progress: Progress = None,
) -> dict[str, Any]:
    """Monte Carlo check of the closed form: discrete Gaussian noise, dense GLS.

    For each geolevel, draws ``trials`` sets of noisy measurements of every query with
    censusdp's exact discrete Gaussian sampler (``sigma^2 = 1 / (kappa rho_q)``, a seeded
    :class:`~censusdp.privacy.randomness.RandomSource`), solves the GLS normal equations with the
    dense ``cells x cells`` precision matrix (no block decomposition), and averages the
    weighted squared error of the target tables. Errors do not depend on the true
    histogram (the estimator is linear and unbiased), so the truth is 0.

    Returns:
        ``{"error", "standard_error", "per_level", "trials", "seed"}``.

    Raises:
        DesignError: if the schema has more than 5,000 cells.
    """
    schema = plan_schema(budget)
    if schema.size > 5000:
        raise DesignError(
            f"simulation forms the {schema.size} x {schema.size} precision matrix; schemas "
            "up to 5,000 cells are supported"
        )
    kappa = NEIGHBOURS[neighbours]
    source = RandomSource.seeded(seed)
    totals = np.zeros(trials)
    per_level = {}
    for level in budget.geolevel_names:
        level_rho = budget.total * budget.geolevel_shares[level]
        mats, variances, mechs = [], [], []
        for qname, share in budget.query_shares[level].items():
            mech = DiscreteGaussian(1 / (kappa * level_rho * share))
            mats.append(make_query(schema, qname).matrix)
            variances.append(mech.variance)
            mechs.append((qname, mech))
        prec = np.zeros((schema.size, schema.size))
        for m, v in zip(mats, variances, strict=True):
            prec += (m.T @ m).toarray() / v
        rhs = np.zeros((schema.size, trials))
        for (qname, mech), m, v in zip(mechs, mats, variances, strict=True):
            noise = mech.sample(m.shape[0] * trials, source.child(level, qname)).astype(float)
            rhs += m.T @ (noise.reshape(m.shape[0], trials) / v)
        try:
            chol = np.linalg.cholesky(prec)
            err = np.linalg.solve(chol.T, np.linalg.solve(chol, rhs))
        except np.linalg.LinAlgError:  # some cells never measured alone (a workload file):
            # any generalised inverse gives the same error on the estimable targets
            err = np.linalg.pinv(prec, hermitian=True) @ rhs
        level_err = np.zeros(trials)
        for t in targets:
            if t.geolevel != level:
                continue
            tm = make_query(schema, t.query).matrix
            level_err += t.weight * np.square(tm @ err).sum(axis=0) / tm.shape[0]
        totals += level_err
        per_level[level] = float(level_err.mean())
        if progress is not None:
            progress(f"design: simulated {level}: {per_level[level]:.6g}")
    return {
        "error": float(totals.mean()),
        "standard_error": float(totals.std(ddof=1) / math.sqrt(trials)),
        "per_level": per_level,
        "trials": trials,
        "seed": seed,
    }
