"""Inference from the noisy measurements (docs/inference.md).

* :mod:`censusdp.infer.gls`: best linear unbiased (GLS) estimates and exact standard
  deviations of every cell at every geolevel by the two-pass tree algorithm, with the
  invariants entered exactly; :func:`censusdp.infer.release.infer_release` runs it on a
  release directory (``censusdp infer RUN --out DIR``, its options
  :class:`censusdp.infer.options.InferOptions`).
* :mod:`censusdp.infer.posterior`: mechanism-aware Bayesian posterior of a proportion
  from one or a few noisy counts (Gong 2022): exact Beta mixture, ABC and Gibbs samplers
  (``censusdp infer posterior``).
"""

from __future__ import annotations

from censusdp.infer._algebra import Layout, make_layout
from censusdp.infer._noise import NOISE_LAWS, NoiseLaw
from censusdp.infer.gls import (
    Constraints,
    LevelEstimates,
    LineSet,
    TreeRun,
    census_intervals,
    make_lines,
    tree_gls,
)
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
    "Constraints",
    "Layout",
    "LevelEstimates",
    "LineSet",
    "NoiseLaw",
    "NoisyCount",
    "TreeRun",
    "abc_draws",
    "census_intervals",
    "exact_posterior",
    "gibbs_draws",
    "infer_proportion",
    "make_layout",
    "make_lines",
    "naive_posterior",
    "tree_gls",
]
