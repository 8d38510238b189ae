"""Noise mechanisms that know their own privacy cost.

Release mechanisms (exact samplers, see :mod:`censusdp.mechanisms._table`):

* :class:`DiscreteGaussian` -- zCDP, the 2020 Census production mechanism;
* :class:`Geometric` -- two-sided geometric / discrete Laplace, pure DP (2010 DDP).

Experiment-only mechanisms (floating point, documented unsafe for releases):
:class:`Laplace`, :class:`Gaussian`. Survey-style local DP:
:class:`RandomizedResponse` (seed 003, App. B).

All noise is drawn from a :class:`censusdp._random.RandomSource`.
"""

from __future__ import annotations

from censusdp.mechanisms._base import as_fraction
from censusdp.mechanisms._discrete import DiscreteGaussian, Geometric

__all__ = ["DiscreteGaussian", "Geometric", "as_fraction"]
