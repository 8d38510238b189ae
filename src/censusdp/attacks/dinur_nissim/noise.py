"""Experiment noise of the Dinur-Nissim laboratory (JASON (JSR-19-2F) secs. 4.4, 5.1).

:class:`NoiseSpec` is the noise added to every query answer of an experiment: none,
Gaussian, Laplace ``Lap(1/epsilon)`` or two-sided geometric; :func:`jason_gaussian_variance`
is the Gaussian variance of JASON's fig. 4-4. This is **experiment noise**, drawn with
NumPy from ``censusdp.privacy.randomness.experiment_generator`` by the trial engine; it
reproduces the report's experiments and must never be used to publish data (use
``censusdp.privacy.mechanisms`` for that).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from censusdp.errors import CensusDPError

__all__ = ["NoiseSpec", "jason_gaussian_variance"]


@dataclass(frozen=True)
class NoiseSpec:
    """Experiment noise added to every query answer (never release noise).

    Attributes:
        kind: ``"none"``, ``"gaussian"`` (given ``variance``), ``"laplace"`` or
            ``"geometric"`` (given ``epsilon``; each query has sensitivity 1).
        variance: variance of the Gaussian noise.
        epsilon: privacy-loss parameter of the Laplace ``Lap(1/epsilon)`` (JASON (JSR-19-2F)
            sec. 5.1.1) or two-sided geometric, ``P(k) = (alpha-1)/(alpha+1) alpha^-|k|``
            with ``alpha = exp(epsilon)`` (sec. 5.1.2), noise.
    """

    kind: Literal["none", "gaussian", "laplace", "geometric"] = "none"
    variance: float | None = None
    epsilon: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("none", "gaussian", "laplace", "geometric"):
            raise CensusDPError(
                f"noise kind must be none, gaussian, laplace or geometric; got {self.kind!r}"
            )
        if self.kind == "gaussian":
            if self.variance is None or not math.isfinite(self.variance) or self.variance < 0:
                raise CensusDPError(
                    f"gaussian noise needs a finite variance >= 0; got variance={self.variance}"
                )
        elif self.variance is not None:
            raise CensusDPError(
                f"variance applies only to gaussian noise; got variance={self.variance} for {self.kind}"
            )
        if self.kind in ("laplace", "geometric"):
            if self.epsilon is None or not math.isfinite(self.epsilon) or self.epsilon <= 0:
                raise CensusDPError(
                    f"{self.kind} noise needs a finite epsilon > 0; got epsilon={self.epsilon}"
                )
        elif self.epsilon is not None:
            raise CensusDPError(
                f"epsilon applies only to laplace or geometric noise; got epsilon={self.epsilon} for {self.kind}"
            )

    @classmethod
    def none(cls) -> NoiseSpec:
        """Exact answers."""
        return cls("none")

    @classmethod
    def gaussian(cls, variance: float) -> NoiseSpec:
        """Normal noise with mean 0 and the given variance."""
        return cls("gaussian", variance=float(variance))

    @classmethod
    def laplace(cls, epsilon: float) -> NoiseSpec:
        """Laplace noise ``Lap(1/epsilon)``, variance ``2/epsilon^2`` (JASON (JSR-19-2F) sec. 5.1.1)."""
        return cls("laplace", epsilon=float(epsilon))

    @classmethod
    def geometric(cls, epsilon: float) -> NoiseSpec:
        """Two-sided geometric noise with ``alpha = exp(epsilon)`` (JASON (JSR-19-2F) sec. 5.1.2)."""
        return cls("geometric", epsilon=float(epsilon))

    @property
    def noise_variance(self) -> float:
        """Per-query noise variance: 0, ``variance``, ``2/eps^2`` or ``2q/(1-q)^2`` with ``q = e^-eps``."""
        if self.kind == "none":
            return 0.0
        if self.kind == "gaussian":
            return float(self.variance)  # type: ignore[arg-type]
        eps = float(self.epsilon)  # type: ignore[arg-type]
        if self.kind == "laplace":
            return 2.0 / eps**2
        q = math.exp(-eps)
        return 2.0 * q / (1.0 - q) ** 2

    def label(self) -> str:
        """Short human-readable description."""
        if self.kind == "none":
            return "no noise"
        if self.kind == "gaussian":
            return f"Gaussian, variance {self.variance:g}"
        return f"{self.kind.capitalize()}, epsilon {self.epsilon:g}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description, with the implied per-query variance."""
        return {
            "kind": self.kind,
            "variance": self.variance,
            "epsilon": self.epsilon,
            "per_query_variance": self.noise_variance,
        }


def jason_gaussian_variance(n: int, convention: Literal["text", "matlab"] = "text") -> float:
    """Gaussian noise variance of JASON's fig. 4-4 for an ``n``-bit database.

    ``text``: ``sqrt(n) ln(n) / 2``, as JASON (JSR-19-2F) sec. 4.4 states. ``matlab``: the code of
    Appendix B, Listings 1 and 3, passes ``eta = sqrt(n) / 2 * log(n)`` to ``normrnd``,
    whose second argument is the *standard deviation*, so the variance there is
    ``(sqrt(n) ln(n) / 2)^2``. The two differ (23.0 vs 530 at n = 100).
    """
    if n < 2:
        raise CensusDPError(f"n must be >= 2 for JASON's noise variance; got n={n}")
    eta = math.sqrt(n) * math.log(n) / 2.0
    if convention == "text":
        return eta
    if convention == "matlab":
        return eta * eta
    raise CensusDPError(f"convention must be 'text' or 'matlab'; got {convention!r}")
