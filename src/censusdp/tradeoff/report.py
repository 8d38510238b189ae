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

from censusdp.errors import ConfigError, InputError
from censusdp.io.output_files import output_file
from censusdp.io.output_rules import check_output_file
from censusdp.tradeoff.randomized_response import RandomizedResponseFrontier
from censusdp.tradeoff.social_choice import (
    LinearPreferences,
    MisallocationPreferences,
    optimal_epsilon,
)

__all__ = ["FRONTIERS", "ChooseOptions", "choose_epsilon", "read_results"]

FRONTIERS = ("rr", "census")


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
        frontier: ``"rr"`` (randomized response, Abowd & Schmutte App. B) or
            ``"census"`` (the measured frontier of a ``tradeoff census`` run).
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

    def __post_init__(self) -> None:
        if self.frontier not in FRONTIERS:
            raise ConfigError(f"frontier must be one of {FRONTIERS}, got {self.frontier!r}")
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
    results, scenario, geolevel, measure = o.results, o.scenario, o.geolevel, o.measure
    info: dict[str, Any]
    if o.frontier == "rr":
        f: Any = RandomizedResponseFrontier(pi=o.pi, n=o.n, mu=o.mu)
        n_areas = 1
        info = {"kind": "rr", "pi": float(f.pi), "n": f.n, "mu": float(f.mu), "label": f.label}
    else:
        assert results is not None  # checked by ChooseOptions
        from censusdp.tradeoff.census_results import frontier_from_results

        f, n_areas = frontier_from_results(
            read_results(results), scenario=scenario, geolevel=geolevel, measure=measure
        )
        info = {
            "kind": "census",
            "results": str(Path(results).resolve()),
            "scenario": scenario,
            "geolevel": geolevel,
            "measure": measure,
            "definition": "I = -(sum of squared errors over the geounits), mean over seeds",
            "fit": {"k": f.k, "alpha": f.alpha, "r_squared": f.r_squared},
            "measured": [
                {"epsilon": e, "I": q} for e, q in zip(f.epsilons, f.qualities, strict=True)
            ],
            "label": f.label,
        }
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
