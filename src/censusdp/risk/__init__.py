"""Bayesian disclosure risk of released noisy counts (Kazan & Reiter 2022).

An intruder who knows everyone in a census block except the target updates a prior
``p`` that the target has characteristics ``c`` to a posterior, from the released
noisy count of ``c`` in the block (:mod:`censusdp.risk.one_level`, sec. 3.1) and,
optionally, from the counts of the block group and of the other blocks
(:mod:`censusdp.risk.hierarchical`, sec. 3.2). :mod:`censusdp.risk.release` applies
both to every person of a synthetic census under a release configuration.
"""

from censusdp.risk._noise import NoiseModel, sum_of_discrete_gaussians
from censusdp.risk.hierarchical import (
    DecisionRule,
    GibbsResult,
    HierarchicalModel,
    TwoLevelRisk,
    approximation_error,
    decision_probability,
    exact_posterior,
    gibbs_sampler,
    saturation_others,
    simulate_data,
    two_level_log_odds,
    two_level_risk,
)
from censusdp.risk.one_level import (
    ATTACKS,
    ExactValue,
    OneLevelRisk,
    UnknownAttributeRisk,
    attack_risk,
    correct_decision_probability,
    decision_threshold,
    marginal_posterior,
    marginal_risk,
    one_level_risk,
    posterior,
    probability_mass,
    risk_ratio,
    unknown_attribute_posterior,
    unknown_attribute_risk,
    upper_tail,
)

__all__ = [
    "ATTACKS",
    "DecisionRule",
    "ExactValue",
    "GibbsResult",
    "HierarchicalModel",
    "NoiseModel",
    "OneLevelRisk",
    "TwoLevelRisk",
    "UnknownAttributeRisk",
    "approximation_error",
    "attack_risk",
    "correct_decision_probability",
    "decision_probability",
    "decision_threshold",
    "exact_posterior",
    "gibbs_sampler",
    "marginal_posterior",
    "marginal_risk",
    "one_level_risk",
    "posterior",
    "probability_mass",
    "risk_ratio",
    "saturation_others",
    "simulate_data",
    "sum_of_discrete_gaussians",
    "two_level_log_odds",
    "two_level_risk",
    "unknown_attribute_posterior",
    "unknown_attribute_risk",
    "upper_tail",
]
