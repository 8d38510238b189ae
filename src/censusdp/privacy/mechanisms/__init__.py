"""Noise mechanisms that know their own privacy cost.

Release mechanisms (exact samplers; the argument is in
:mod:`censusdp.privacy.mechanisms._table`):

* :class:`DiscreteGaussian` -- zCDP, the 2020 Census production mechanism
  (Canonne, Kamath & Steinke 2020; Kazan & Reiter (2022) Def. 5);
* :class:`Geometric` -- two-sided geometric / discrete Laplace, pure DP (the 2010
  Demonstration Data Product; Van Riper et al. (2020) sec. 2.2).

Experiment-only mechanisms (floating point, documented unsafe for releases):
:class:`Laplace`, :class:`Gaussian`. Local DP for surveys:
:class:`RandomizedResponse` (Abowd & Schmutte (2019), App. B).

All noise is drawn from a :class:`censusdp.privacy.randomness.RandomSource`. Every mechanism has
``rho(sensitivity)`` (and the pure-DP ones ``epsilon(sensitivity)``), ``variance``,
``sample(n, source)``, ``release(values, source)`` and ``describe()``.
"""

from __future__ import annotations

from censusdp.privacy.mechanisms._continuous import Gaussian, Laplace
from censusdp.privacy.mechanisms._discrete import DiscreteGaussian, Geometric
from censusdp.privacy.mechanisms._randomized_response import RandomizedResponse

__all__ = [
    "DiscreteGaussian",
    "Gaussian",
    "Geometric",
    "Laplace",
    "RandomizedResponse",
]
