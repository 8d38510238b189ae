"""The allocation report of ``censusdp budget``: every measurement's share, rho, noise
variance and epsilon, summed per geolevel, per query and per attribute."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from censusdp.data.queries import run_query
from censusdp.data.schema import get_schema
from censusdp.errors import BudgetError
from censusdp.privacy import accounting
from censusdp.privacy.budget import Budget
from censusdp.privacy.parameters import as_fraction
from censusdp.privacy.release_budget import ReleaseBudget

__all__ = ["BudgetReport", "budget_report"]


@functools.lru_cache(maxsize=512)
def _query_rows(schema_name: str, query: str) -> int:
    return run_query(schema_name, query)[1].n_rows


@functools.lru_cache(maxsize=512)
def _attributes_of(schema_name: str, query: str) -> tuple[str, ...]:
    """Schema attributes a query reads (recodes count as their source attribute)."""
    schema, q = run_query(schema_name, query)
    out = []
    for v in q.variables:
        var = schema.variable(v)
        out.append(getattr(var, "source", var.name))
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class BudgetReport:
    """The allocation table of a budget, as printed by ``censusdp budget``.

    Attributes:
        budget: the budget reported on.
        rows: one dict per (geolevel, query): shares, rho, epsilon, noise variance.
        geolevels: one dict per geolevel: share, rho and epsilon at delta.
        queries: one dict per query name: rho summed over geolevels, epsilon.
        attributes: one dict per schema attribute: rho of the queries that read it.
        totals: global rho, epsilon (CKS Cor. 13), implied and simple-bound epsilon.
    """

    budget: Budget
    rows: tuple[dict[str, Any], ...]
    geolevels: tuple[dict[str, Any], ...]
    queries: tuple[dict[str, Any], ...]
    attributes: tuple[dict[str, Any], ...]
    totals: dict[str, Any]
    release: ReleaseBudget | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready report (``censusdp budget --json``)."""
        return {
            "budget": {
                "name": self.budget.name,
                "description": self.budget.description,
                "schema": self.budget.schema,
                "mechanism": self.budget.mechanism,
                "privacy_measure": self.budget.privacy_measure,
                "neighbours": self.budget.neighbours,
                "sensitivity": self.budget.sensitivity,
            },
            "release": self._release_summary(),
            "totals": self.totals,
            "measurements": list(self.rows),
            "geolevels": list(self.geolevels),
            "queries": list(self.queries),
            "attributes": list(self.attributes),
            "notes": list(self.budget.notes),
        }

    def to_text(self) -> str:
        """A human-readable allocation table."""
        b, t = self.budget, self.totals
        pure = b.privacy_measure == "pure"
        lines = [f"budget {b.name}: {b.description}".rstrip(": ")]
        whole = self._release_summary()
        if whole is not None:
            runs = (
                f"people (tables P1-P5) and housing units (H1, {whole['units_budget']})"
                if self.release is not None
                and self.release.units is not None
                and self.release.units.schema == "units"
                else f"people and households with their units ({whole['units_budget']})"
            )
            lines += [
                f"privacy-loss budget of the whole release: epsilon {whole['epsilon']:.6g} at "
                f"delta {whole['delta']:.3g} (rho {whole['rho']:.6g}), the epsilon its manifest records:",
                f"  {runs} are two "
                "separate runs and their losses add up (zCDP: rho "
                f"{whole['persons_rho']:.6g} + {whole['units_rho']:.6g}); the epsilons below are of the "
                "people's run alone, so they are smaller",
                "",
                "people's run:",
            ]
        lines.append(
            f"schema {b.schema}, mechanism {b.mechanism} ({b.privacy_measure}), "
            f"{b.neighbours} neighbours (sensitivity {b.sensitivity}), {len(self.rows)} measurements"
        )
        if pure:
            lines.append(f"global epsilon = {t['total']} = {t['epsilon']:.6g} (pure DP)")
            lines.append(
                f"  as zCDP: rho = sum of epsilon_i^2/2 = {t['rho_float']:.6g} "
                f"(<= epsilon^2/2 = {float(b.total) ** 2 / 2:.6g})"
            )
        else:
            lines.append(f"global rho = {t['rho']} = {t['rho_float']:.6g}")
        lines.append(
            f"  epsilon at delta={t['delta_float']:g}: {t['epsilon_at_delta']:.6g} "
            f"({'min of pure epsilon and ' if pure else ''}Canonne, Kamath & Steinke 2020, "
            "Cor. 13; "
            f"simple bound {t['epsilon_simple']:.6g}); "
            f"implied epsilon sqrt(2 rho) = {t['implied_epsilon']:.6g}"
        )
        lines.append(
            f"  the samplers' distance from the exact noise laws (total variation) adds "
            f"delta {t['sampling_delta']:.3g}, negligible (total delta {t['delta_total']:.6g})"
        )
        lines.append("")
        head = (
            f"{'geolevel':<11} {'query':<28} {'cells':>6} {'share':>11} {'of total':>9} "
            f"{'rho':>10} {'eps@delta':>9} {'variance':>11} {'std':>8}"
        )
        if pure:
            head += f" {'epsilon':>8}"
        lines += [head, "-" * len(head)]
        for r in self.rows:
            line = (
                f"{r['geolevel']:<11} {r['query']:<28} {r['cells']:>6} {r['share']:>11} "
                f"{r['share_of_total_float']:>9.5f} {r['rho_float']:>10.4g} "
                f"{r['epsilon_at_delta']:>9.4g} {r['variance']:>11.5g} {r['std']:>8.4g}"
            )
            if pure:
                line += f" {r['epsilon_float']:>8.4g}"
            lines.append(line)
        lines += ["", f"{'per geolevel':<28} {'share':>11} {'rho':>10} {'eps@delta':>9}"]
        for g in self.geolevels:
            lines.append(
                f"{g['geolevel']:<28} {g['share']:>11} {g['rho_float']:>10.4g} "
                f"{g['epsilon_at_delta']:>9.4g}"
            )
        lines += ["", f"{'per query (all geolevels)':<28} {'rho':>10} {'eps@delta':>9}"]
        for q in self.queries:
            lines.append(f"{q['query']:<28} {q['rho_float']:>10.4g} {q['epsilon_at_delta']:>9.4g}")
        lines += ["", f"{'per attribute':<28} {'rho':>10} {'eps@delta':>9}  (queries reading it)"]
        for a in self.attributes:
            lines.append(
                f"{a['attribute']:<28} {a['rho_float']:>10.4g} {a['epsilon_at_delta']:>9.4g}"
            )
        if whole is not None:
            r = whole
            lines += [
                "",
                f"the whole release (persons + housing units, {r['units_budget']}): "
                f"rho {r['rho']:.6g} = persons {r['persons_rho']:.6g} + units "
                f"{r['units_rho']:.6g}; epsilon {r['epsilon']:.6g} at delta {r['delta']:.3g} "
                f"({b.neighbours} neighbours)",
                "  --rho / --epsilon of 'censusdp run' set this total; the split is kept",
            ]
        if b.notes:
            lines += ["", "notes:"] + [f"  - {n}" for n in b.notes]
        return "\n".join(lines)

    def _release_summary(self) -> dict[str, Any] | None:
        if self.release is None or self.release.units is None:
            return None
        d = self.release.to_dict()
        return {
            "rho": d["rho"],
            "rho_exact": d["rho_exact"],
            "epsilon": d["epsilon"],
            "delta": d["delta"],
            "persons_rho": float(self.release.persons.rho),
            "units_rho": float(self.release.units.rho),
            "units_budget": self.release.units.name,
        }


def _loss_entry(
    loss: tuple[Fraction, Fraction], eps_at: Callable[..., float], pure: bool
) -> dict[str, Any]:
    """``rho`` of a sum of measurements and its epsilon at the report's delta."""
    r, e = loss
    return {
        "rho": str(r),
        "rho_float": float(r),
        "epsilon_at_delta": (eps_at(r, e if pure else None) if r > 0 else 0.0),
    }


def _measurement_rows(
    budget: Budget, eps_at: Callable[..., float]
) -> tuple[list[dict[str, Any]], dict[str, dict[str, tuple[Fraction, Fraction]]]]:
    """One report row per measurement, and the (rho, pure epsilon) summed per geolevel,
    query and attribute (an attribute's sum covers the queries that read it)."""
    schema = get_schema(budget.schema)
    zero = (Fraction(0), Fraction(0))
    sums: dict[str, dict[str, tuple[Fraction, Fraction]]] = {
        "geolevel": {},
        "query": {},
        "attribute": {a: zero for a in schema.attribute_names},
    }
    rows = []
    for m in budget.measurements():
        e_i = m.epsilon if m.epsilon is not None else Fraction(0)
        qshare = budget.query_shares[m.geolevel][m.query]
        of_total = budget.geolevel_shares[m.geolevel] * qshare
        rows.append(
            {
                "geolevel": m.geolevel,
                "query": m.query,
                "cells": _query_rows(budget.schema, m.query),
                "share": str(qshare),
                "share_float": float(qshare),
                "share_of_total": str(of_total),
                "share_of_total_float": float(of_total),
                "rho": str(m.rho),
                "rho_float": float(m.rho),
                "epsilon": None if m.epsilon is None else str(m.epsilon),
                "epsilon_float": None if m.epsilon is None else float(m.epsilon),
                "epsilon_at_delta": eps_at(m.rho, m.epsilon),
                "variance": m.variance,
                "std": math.sqrt(m.variance),
                "mechanism": m.mechanism.describe(),
            }
        )
        keys = [("geolevel", m.geolevel), ("query", m.query)]
        keys += [("attribute", a) for a in _attributes_of(budget.schema, m.query)]
        for kind, key in keys:
            r0, e0 = sums[kind].get(key, zero)
            sums[kind][key] = (r0 + m.rho, e0 + e_i)
    return rows, sums


def budget_report(
    release: ReleaseBudget, *, delta: Fraction | str | float | None = None
) -> BudgetReport:
    """Report a release's budget: its person run's allocation, and the whole release.

    Per measurement: query share, share of the global budget, ``rho``, the
    ``epsilon`` of that measurement alone at ``delta`` (CKS Cor. 13), noise variance
    and standard deviation. Per geolevel, per query and per attribute: the summed
    ``rho`` (zCDP composes additively) and its epsilon at ``delta``. An attribute's
    row sums the queries that read it (recodes count for their source), the privacy
    loss about that attribute alone for an add/remove change. With a housing-unit run,
    the report ends with the whole release's composed loss.

    Args:
        release: the budget to report, as chosen (and rescaled: ``--rho``/``--epsilon``
            are the totals of both runs together) by
            :func:`censusdp.io.budget_files.resolve_release_budget`.
        delta: report epsilons at this delta instead of the budget's.
    """
    budget = release.persons
    if delta is not None:
        d = as_fraction(delta, "delta")
        if not 0 < d < 1:
            raise BudgetError(f"delta is {d}; it must satisfy 0 < delta < 1")
    else:
        d = budget.delta

    pure = budget.privacy_measure == "pure"

    @functools.cache
    def cks(r: Fraction) -> float:
        return accounting.epsilon_from_rho(r, d)

    def eps_at(r: Fraction, pure_eps: Fraction | None = None) -> float:
        # pure DP: the pure epsilon holds at any delta; report the smaller bound
        e = cks(r)
        return min(e, float(pure_eps)) if pure_eps is not None else e

    rows, sums = _measurement_rows(budget, eps_at)
    levels = tuple(
        {
            "geolevel": g,
            "share": str(budget.geolevel_shares[g]),
            "share_float": float(budget.geolevel_shares[g]),
            **_loss_entry(sums["geolevel"][g], eps_at, pure),
            **({"epsilon": str(budget.geolevel_amount(g))} if pure else {}),
        }
        for g in budget.geolevel_names
    )
    queries = tuple({"query": q, **_loss_entry(v, eps_at, pure)} for q, v in sums["query"].items())
    attributes = tuple(
        {"attribute": a, **_loss_entry(v, eps_at, pure)} for a, v in sums["attribute"].items()
    )
    eps_d = eps_at(budget.rho, budget.total if pure else None)
    sdelta = budget.sampling_delta()
    totals = {
        "total": str(budget.total),
        "total_float": float(budget.total),
        "rho": str(budget.rho),
        "rho_float": float(budget.rho),
        "epsilon": float(budget.total) if budget.privacy_measure == "pure" else eps_d,
        "epsilon_at_delta": eps_d,
        "epsilon_simple": accounting.epsilon_from_rho_simple(budget.rho, d),
        "implied_epsilon": accounting.implied_epsilon(budget.rho),
        "delta": str(d),
        "delta_float": float(d),
        "sampling_delta": sdelta,
        "delta_total": float(d) + sdelta,
    }
    return BudgetReport(budget, tuple(rows), levels, queries, attributes, totals, release)
