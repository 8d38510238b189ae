"""Choosing epsilon: privacy-accuracy frontiers, the social choice, and the census tradeoff.

* :mod:`~censusdp.tradeoff.randomized_response`: the closed-form frontier of randomized
  response (Abowd & Schmutte 2019, Online Appendix B): ``I(eps)``, its slope and
  curvature.
* :mod:`~censusdp.tradeoff.matrix_mechanism`: the matrix mechanism's data-utility
  model (their Appendix E): expected utility loss of a person-specific linear function
  of the published answers.
* :mod:`~censusdp.tradeoff.social_choice`: the welfare-maximising epsilon, where the
  marginal rate of transformation equals the marginal rate of substitution.
* :mod:`~censusdp.tradeoff.census`: accuracy, re-identification and Bayesian risk of
  real releases over a grid of budgets (``censusdp tradeoff census``; its scenarios in
  :mod:`~censusdp.tradeoff.census_scenarios`, its metrics in
  :mod:`~censusdp.tradeoff.census_metrics`, its results in
  :mod:`~censusdp.tradeoff.census_results`), and
  :mod:`~censusdp.tradeoff.explore`, the interactive page built from them
  (``censusdp explore``). Both are imported lazily (they read and write files).
"""

from __future__ import annotations

from typing import Any

from censusdp.tradeoff.matrix_mechanism import (
    DataUtility,
    MatrixMechanismFrontier,
    data_utility,
    expected_utility_loss,
    l1_sensitivity,
    laplace_noise_variance,
    matrix_mechanism_accuracy,
)
from censusdp.tradeoff.randomized_response import (
    RandomizedResponseFrontier,
    RRFrontierPoint,
    data_quality,
    data_quality_curvature,
    data_quality_slope,
    epsilon_of_truth_probability,
    estimator_variance,
    rr_frontier,
    truth_probability,
)
from censusdp.tradeoff.social_choice import (
    Frontier,
    LinearPreferences,
    MeasuredFrontier,
    MisallocationPreferences,
    Preferences,
    SocialOptimum,
    optimal_epsilon,
)

__all__ = [
    "ChooseOptions",
    "DataUtility",
    "Frontier",
    "LinearPreferences",
    "MatrixMechanismFrontier",
    "MeasuredFrontier",
    "MisallocationPreferences",
    "Preferences",
    "RRFrontierPoint",
    "RandomizedResponseFrontier",
    "SocialOptimum",
    "choose_epsilon",
    "data_quality",
    "data_quality_curvature",
    "data_quality_slope",
    "data_utility",
    "epsilon_of_truth_probability",
    "estimator_variance",
    "expected_utility_loss",
    "l1_sensitivity",
    "laplace_noise_variance",
    "matrix_mechanism_accuracy",
    "optimal_epsilon",
    "rr_frontier",
    "truth_probability",
]


def __getattr__(name: str) -> Any:
    # file-writing entry points load matplotlib and the engine: import on first use
    if name in ("ChooseOptions", "choose_epsilon"):
        from censusdp.tradeoff import report

        return getattr(report, name)
    raise AttributeError(f"module 'censusdp.tradeoff' has no attribute {name!r}")
