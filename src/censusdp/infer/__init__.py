"""Inference from the noisy measurements.

* :mod:`censusdp.infer.posterior`: mechanism-aware Bayesian posterior of a proportion
  from one or a few noisy counts (Gong 2022): exact Beta mixture, ABC and Gibbs samplers.
"""

from __future__ import annotations

from censusdp.infer._noise import NOISE_LAWS, NoiseLaw
from censusdp.infer.posterior import (
    POSTERIOR_METHODS,
    BetaMixture,
    BetaPrior,
    NoisyCount,
    abc_draws,
    exact_posterior,
    gibbs_draws,
    infer_proportion,
    naive_posterior,
)

__all__ = [
    "NOISE_LAWS",
    "POSTERIOR_METHODS",
    "BetaMixture",
    "BetaPrior",
    "NoiseLaw",
    "NoisyCount",
    "abc_draws",
    "exact_posterior",
    "gibbs_draws",
    "infer_proportion",
    "naive_posterior",
]
