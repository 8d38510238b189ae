"""Continuous Laplace and Gaussian noise: for experiments only, never for releases.

**Unsafe for releases.** Floating-point implementations of continuous noise leak
the true value through the set of reachable floats (Mironov 2012, "On significance
of the least significant bits for differential privacy"): ``x + noise`` rounded to
a double does not have the distribution the proof assumes, and some outputs are
reachable from one input and not from its neighbour. Release runs use
:class:`~censusdp.privacy.mechanisms.DiscreteGaussian` or
:class:`~censusdp.privacy.mechanisms.Geometric`, whose samplers are exact. These classes
exist for the reconstruction experiments of JASON (JSR-19-2F) (sec. 4.3, Laplace noise in
the Dinur-Nissim attack, fig. 5-7) and for comparisons; their ``exact`` attribute is
``False`` and ``sampling_tv`` is ``None`` (no bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from censusdp.privacy.parameters import check_sensitivity, positive_fraction
from censusdp.privacy.randomness import RandomSource

__all__ = ["Gaussian", "Laplace"]


def _open_uniform(source: RandomSource, n: int) -> np.ndarray:
    """Floats uniform on ``(0, 1)``: ``(k + 0.5) / 2**53``."""
    return ((source.uint64(n) >> np.uint64(11)).astype(np.float64) + 0.5) * (2.0**-53)


@dataclass(frozen=True)
class Laplace:
    """Continuous Laplace noise with density ``exp(-|x| / scale) / (2 scale)``.

    ``epsilon = sensitivity / scale`` (Dwork et al. 2006; JASON (JSR-19-2F) sec. 5.1).
    Experiments only: see the module docstring.
    """

    scale: Fraction
    name: str = field(default="laplace", init=False, repr=False)
    privacy_measure: str = field(default="pure", init=False, repr=False)
    exact: bool = field(default=False, init=False, repr=False)
    sampling_tv: None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", positive_fraction(self.scale, "scale"))

    @classmethod
    def from_epsilon(cls, epsilon: Fraction | int | str | float, sensitivity: int = 1) -> Laplace:
        """``scale = sensitivity / epsilon``."""
        e = positive_fraction(epsilon, "epsilon")
        return cls(Fraction(check_sensitivity(sensitivity)) / e)

    def epsilon(self, sensitivity: int = 1) -> Fraction:
        """``epsilon = sensitivity / scale``."""
        return Fraction(check_sensitivity(sensitivity)) / self.scale

    def rho(self, sensitivity: int = 1) -> Fraction:
        """``rho = epsilon^2 / 2`` (Kazan & Reiter (2022) Thm. 2)."""
        return self.epsilon(sensitivity) ** 2 / 2

    @property
    def variance(self) -> float:
        """``2 scale^2``."""
        return 2 * float(self.scale) ** 2

    def pdf(self, x: np.ndarray) -> np.ndarray:
        """Density at ``x``."""
        b = float(self.scale)
        return np.exp(-np.abs(np.asarray(x, dtype=np.float64)) / b) / (2 * b)

    def sample(self, n: int, source: RandomSource) -> np.ndarray:
        """``n`` float draws by inversion of the CDF (not exact; experiments only)."""
        u = _open_uniform(source, n) - 0.5
        return -float(self.scale) * np.sign(u) * np.log1p(-2 * np.abs(u))

    def release(self, values: np.ndarray, source: RandomSource) -> np.ndarray:
        """``values + noise`` as floats (experiments only)."""
        arr = np.asarray(values, dtype=np.float64)
        return arr + self.sample(arr.size, source).reshape(arr.shape)

    def describe(self) -> dict[str, Any]:
        """Parameters for manifests."""
        return {"mechanism": self.name, "scale": str(self.scale), "variance": self.variance}


@dataclass(frozen=True)
class Gaussian:
    """Continuous Gaussian noise ``N(0, sigma^2)``.

    ``rho = sensitivity^2 / (2 sigma^2)`` (Bun & Steinke 2016, Prop. 1.6).
    Experiments only: see the module docstring.
    """

    sigma_squared: Fraction
    name: str = field(default="gaussian", init=False, repr=False)
    privacy_measure: str = field(default="zCDP", init=False, repr=False)
    exact: bool = field(default=False, init=False, repr=False)
    sampling_tv: None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "sigma_squared", positive_fraction(self.sigma_squared, "sigma_squared")
        )

    @classmethod
    def from_rho(cls, rho: Fraction | int | str | float, sensitivity: int = 1) -> Gaussian:
        """``sigma^2 = sensitivity^2 / (2 rho)``."""
        r = positive_fraction(rho, "rho")
        return cls(Fraction(check_sensitivity(sensitivity) ** 2) / (2 * r))

    def rho(self, sensitivity: int = 1) -> Fraction:
        """``rho = sensitivity^2 / (2 sigma^2)``."""
        return Fraction(check_sensitivity(sensitivity) ** 2) / (2 * self.sigma_squared)

    @property
    def variance(self) -> float:
        """``sigma^2``."""
        return float(self.sigma_squared)

    def pdf(self, x: np.ndarray) -> np.ndarray:
        """Density at ``x``."""
        s2 = float(self.sigma_squared)
        x = np.asarray(x, dtype=np.float64)
        return np.exp(-x * x / (2 * s2)) / math.sqrt(2 * math.pi * s2)

    def sample(self, n: int, source: RandomSource) -> np.ndarray:
        """``n`` float draws by the Box-Muller transform (not exact; experiments only)."""
        m = (n + 1) // 2
        u1 = _open_uniform(source, m)
        u2 = _open_uniform(source, m)
        radius = np.sqrt(-2.0 * np.log(u1)) * math.sqrt(float(self.sigma_squared))
        z = np.concatenate([radius * np.cos(2 * np.pi * u2), radius * np.sin(2 * np.pi * u2)])
        return z[:n]

    def release(self, values: np.ndarray, source: RandomSource) -> np.ndarray:
        """``values + noise`` as floats (experiments only)."""
        arr = np.asarray(values, dtype=np.float64)
        return arr + self.sample(arr.size, source).reshape(arr.shape)

    def describe(self) -> dict[str, Any]:
        """Parameters for manifests."""
        return {
            "mechanism": self.name,
            "sigma_squared": str(self.sigma_squared),
            "variance": self.variance,
        }
