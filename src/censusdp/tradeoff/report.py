"""File-level entry points of the social choice: build a frontier, solve, draw, write.

:func:`choose_epsilon` is what ``censusdp tradeoff choose`` calls.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from censusdp.errors import ConfigError, InputError
from censusdp.io.output_files import output_file
from censusdp.io.output_rules import check_output_file
from censusdp.tradeoff.matrix_mechanism import MatrixMechanismFrontier, l1_sensitivity
from censusdp.tradeoff.randomized_response import RandomizedResponseFrontier
from censusdp.tradeoff.social_choice import (
    LinearPreferences,
    MisallocationPreferences,
    optimal_epsilon,
)

__all__ = [
    "FRONTIERS",
    "MATRIX_STRATEGIES",
    "ChooseOptions",
    "choose_epsilon",
    "read_matrices",
    "read_results",
    "title_i_matrices",
]

FRONTIERS = ("rr", "census", "matrix")

MATRIX_STRATEGIES = ("identity", "hierarchical")
"""Strategies of the Title I example: measure every area's count (``identity``), or the
areas and their total (``hierarchical``, a two-level hierarchy as in TopDown)."""

TITLE_I_AREAS = 10
"""Areas of the Title I example when ``--areas`` is not given."""


def title_i_matrices(areas: int, strategy: str) -> tuple[np.ndarray, np.ndarray]:
    """``(Q, A)`` of the Title I example: funds allocated by the counts of ``areas``
    school districts, so the workload ``Q`` is the identity on the districts' counts;
    the strategy ``A`` measures them (``identity``, L1 sensitivity 1) or them and their
    total (``hierarchical``, sensitivity 2).

    Raises:
        ConfigError: for fewer than 1 area or an unknown strategy.
    """
    if isinstance(areas, bool) or not isinstance(areas, int) or not 1 <= areas <= 5000:
        raise ConfigError(f"--areas is {areas!r}; the matrix frontier takes 1..5000 areas")
    if strategy not in MATRIX_STRATEGIES:
        raise ConfigError(f"--strategy is {strategy!r}; it must be one of {MATRIX_STRATEGIES}")
    q = np.eye(areas)
    a = q if strategy == "identity" else np.vstack([np.ones((1, areas)), q])
    return q, a


def read_matrices(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """``{"workload": Q, "strategy": A}`` from a JSON file (lists of rows of numbers).

    Raises:
        InputError: naming the file and the field, for anything else.
    """
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{p}: cannot read matrices: {exc.strerror}") from None
    except ValueError as exc:
        raise InputError(f"{p}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f'{p}: expected an object {{"workload": Q, "strategy": A}}')
    out = []
    for key in ("workload", "strategy"):
        rows = data.get(key)
        ok = isinstance(rows, list) and rows and all(isinstance(r, list) for r in rows)
        try:
            m = np.asarray(rows, dtype=np.float64) if ok else None
        except (TypeError, ValueError):
            m = None
        if m is None or m.ndim != 2 or m.size == 0 or not np.all(np.isfinite(m)):
            raise InputError(f"{p}: field {key!r} must be a non-empty list of rows of numbers")
        out.append(m)
    unknown = sorted(set(data) - {"workload", "strategy"})
    if unknown:
        raise InputError(f"{p}: unknown field {unknown[0]!r} (fields: workload, strategy)")
    return out[0], out[1]


def read_results(results_dir: str | Path) -> dict[str, Any]:
    """``results.json`` of a ``censusdp tradeoff census`` run.

    Raises:
        InputError: if it is missing or not the output of that command.
    """
    path = Path(results_dir) / "results.json"
    if not path.is_file():
        raise InputError(
            f"{path}: missing; RESULTS must be the output directory of 'censusdp tradeoff census'"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("command") != "tradeoff census":
        raise InputError(f"{path}: not a 'censusdp tradeoff census' result")
    return data


@dataclass(frozen=True)
class ChooseOptions:
    """The frontier and the preferences of ``censusdp tradeoff choose``, checked once.

    Attributes:
        frontier: ``"rr"`` (randomized response, Abowd & Schmutte App. B),
            ``"census"`` (the measured frontier of a ``tradeoff census`` run) or
            ``"matrix"`` (the matrix mechanism with Laplace noise, App. E eq. E-27:
            the Title I example of :func:`title_i_matrices`, or ``matrices``).
        privacy_cost: ``C``, welfare lost per unit of epsilon.
        accuracy_value: ``B``, welfare per unit of accuracy ``I`` (linear preferences,
            eq. E-28). Exactly one of this and ``funds_per_person``.
        funds_per_person: ``r``, dollars distributed per counted person (misallocation
            loss, see :class:`~censusdp.tradeoff.social_choice.MisallocationPreferences`).
        areas: ``G``, areas funded (default: the geounits of ``geolevel`` for a census
            frontier, 1 for randomized response).
        pi, n, mu: the randomized-response population.
        results: the ``tradeoff census`` output directory (census frontier).
        scenario, geolevel, measure: which measured accuracy forms the frontier.
        search_range: epsilons searched.
        strategy: matrix frontier: the Title I example's strategy
            (:data:`MATRIX_STRATEGIES`, default ``identity``).
        matrices: matrix frontier: a JSON file ``{"workload": Q, "strategy": A}``
            instead of the Title I example.

    Raises:
        ConfigError: on construction, for an unknown frontier, not exactly one of the
            two preferences, or ``results`` given with the wrong frontier or missing.
    """

    privacy_cost: float
    frontier: str = "rr"
    accuracy_value: float | None = None
    funds_per_person: float | None = None
    areas: int | None = None
    pi: Fraction | float | str = Fraction(1, 2)
    n: int = 1
    mu: Fraction | float | str = Fraction(1, 2)
    results: str | Path | None = None
    scenario: str = "standard"
    geolevel: str = "County"
    measure: str = "total_population"
    search_range: Sequence[float] = (0.01, 100.0)
    strategy: str | None = None
    matrices: str | Path | None = None

    def __post_init__(self) -> None:
        if self.frontier not in FRONTIERS:
            raise ConfigError(f"frontier must be one of {FRONTIERS}, got {self.frontier!r}")
        if self.frontier != "matrix" and (self.strategy, self.matrices) != (None, None):
            raise ConfigError("--strategy and --matrices are for --frontier matrix")
        if self.strategy is not None and self.matrices is not None:
            raise ConfigError("give --strategy (the Title I example) or --matrices, not both")
        if self.frontier == "matrix" and self.matrices is None:
            areas = TITLE_I_AREAS if self.areas is None else self.areas
            title_i_matrices(areas, self.strategy or "identity")
        if (self.accuracy_value is None) == (self.funds_per_person is None):
            raise ConfigError(
                "give exactly one of --accuracy-value (linear welfare) and --funds-per-person "
                "(misallocation of funds)"
            )
        if self.frontier == "rr" and self.results is not None:
            raise ConfigError("--results is for --frontier census")
        if self.frontier == "census" and self.results is None:
            raise ConfigError("--frontier census needs --results RESULTS")


def choose_epsilon(
    options: ChooseOptions,
    *,
    plot: str | Path | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """The welfare-maximising epsilon on a frontier (MRT = MRS), optionally drawn.

    Args:
        options: the frontier and the preferences.
        plot: PNG path for the frontier and marginal-rate figure.
        overwrite: replace an existing ``plot``.

    Returns:
        JSON-ready: the frontier, the preferences and the optimum.

    Raises:
        ConfigError: for an existing plot without ``overwrite``.
    """
    if plot is not None:
        check_output_file(plot, overwrite, option="--plot")
    o = options
    accuracy_value, funds_per_person, areas = o.accuracy_value, o.funds_per_person, o.areas
    f, n_areas, info = _frontier(o)
    prefs: Any
    if accuracy_value is not None:
        prefs = LinearPreferences(privacy_cost=o.privacy_cost, accuracy_value=accuracy_value)
        pinfo: dict[str, Any] = {
            "kind": "linear",
            "privacy_cost": prefs.privacy_cost,
            "accuracy_value": prefs.accuracy_value,
            "mrs": prefs.mrs,
        }
    else:
        g = n_areas if areas is None else areas
        prefs = MisallocationPreferences(
            privacy_cost=o.privacy_cost, funds_per_person=float(funds_per_person), areas=g
        )
        pinfo = {
            "kind": "misallocation",
            "privacy_cost": prefs.privacy_cost,
            "funds_per_person": prefs.funds_per_person,
            "areas": prefs.areas,
        }
    opt = optimal_epsilon(f, prefs, search_range=o.search_range)
    out: dict[str, Any] = {"frontier": info, "preferences": pinfo, "optimum": opt.as_dict()}
    if pinfo["kind"] == "misallocation":
        out["optimum"]["expected_misallocation"] = prefs.expected_misallocation(opt.quality)
    if plot is not None:
        from censusdp.tradeoff._plots import social_choice_figure

        png = social_choice_figure(f, prefs, opt)
        with output_file(plot, overwrite=overwrite, suffix=".png", option="--plot") as tmp:
            tmp.write_bytes(png)
        out["plot"] = str(plot)
    return out


def _frontier(o: ChooseOptions) -> tuple[Any, int, dict[str, Any]]:
    """The frontier of ``o``, the areas it covers, and its JSON description."""
    if o.frontier == "rr":
        f: Any = RandomizedResponseFrontier(pi=o.pi, n=o.n, mu=o.mu)
        info = {"kind": "rr", "pi": float(f.pi), "n": f.n, "mu": float(f.mu), "label": f.label}
        return f, 1, info
    if o.frontier == "matrix":
        return _matrix_frontier(o)
    assert o.results is not None  # checked by ChooseOptions
    from censusdp.tradeoff.census_results import frontier_from_results

    f, n_areas = frontier_from_results(
        read_results(o.results), scenario=o.scenario, geolevel=o.geolevel, measure=o.measure
    )
    info = {
        "kind": "census",
        "results": str(Path(o.results).resolve()),
        "scenario": o.scenario,
        "geolevel": o.geolevel,
        "measure": o.measure,
        "definition": "I = -(sum of squared errors over the geounits), mean over seeds",
        "fit": {"k": f.k, "alpha": f.alpha, "r_squared": f.r_squared},
        "measured": [{"epsilon": e, "I": q} for e, q in zip(f.epsilons, f.qualities, strict=True)],
        "label": f.label,
    }
    return f, n_areas, info


def _matrix_frontier(o: ChooseOptions) -> tuple[Any, int, dict[str, Any]]:
    """Abowd & Schmutte App. E (eq. E-27) with Laplace noise: the Title I example or
    the matrices of ``o.matrices``; the areas funded are the workload's rows."""
    if o.matrices is not None:
        q, a = read_matrices(o.matrices)
        source: dict[str, Any] = {"example": None, "matrices": str(o.matrices)}
    else:
        strategy = o.strategy or "identity"
        q, a = title_i_matrices(TITLE_I_AREAS if o.areas is None else o.areas, strategy)
        source = {
            "example": "Title I: funds allocated by the counts of school districts; the "
            "workload is every district's count",
            "strategy": strategy,
        }
    try:
        f = MatrixMechanismFrontier(q, a)
    except ConfigError as exc:
        where = f"{o.matrices}: " if o.matrices is not None else ""
        raise ConfigError(f"{where}{exc}") from None
    info = {
        "kind": "matrix",
        **source,
        "workload_shape": list(q.shape),
        "strategy_shape": list(a.shape),
        "sensitivity_l1": l1_sensitivity(a),
        "scale": f.scale,
        "definition": "I = -(2/eps^2) Delta_A^2 ||Q A^+||_F^2 (Abowd & Schmutte eq. E-27, "
        "Laplace noise): minus the total variance of the published answers",
        "label": f.label,
    }
    return f, int(q.shape[0]), info
