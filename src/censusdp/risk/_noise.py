"""Noise models seen by the intruder: one definition of each pmf.

The pmfs themselves come from :mod:`censusdp.privacy.mechanisms` (the release mechanisms);
this module adds what the risk computations need on top of them: a likelihood
ratio, a support that holds all but a stated tail mass, and the pmf of a sum of
``d`` independent discrete Gaussians (Kazan & Reiter (2022) eq. 20), computed by convolution.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import fft as sp_fft

from censusdp.errors import BudgetError, CensusDPError
from censusdp.privacy.mechanisms import DiscreteGaussian, Geometric

__all__ = ["NoiseModel", "check_probability", "check_tolerance", "sum_of_discrete_gaussians"]

# Summands of the convolution are cut where their pmf is below exp(-_SUMMAND_CUT) of the
# peak; convolution values below _RELIABLE of the peak have no relative precision.
_SUMMAND_CUT = 50.0
_RELIABLE = 1e-13


def check_probability(value: float, name: str) -> float:
    """A prior probability strictly between 0 and 1."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise CensusDPError(f"{name} must be a number in (0, 1), got {value!r}") from None
    if not 0.0 < x < 1.0 or math.isnan(x):
        raise CensusDPError(f"{name} is {value!r}; it must satisfy 0 < {name} < 1")
    return x


def check_tolerance(tol: float) -> float:
    """A truncation tolerance in [1e-30, 1e-3]."""
    x = float(tol)
    if not 1e-30 <= x <= 1e-3:
        raise CensusDPError(f"tol is {tol!r}; it must satisfy 1e-30 <= tol <= 1e-3")
    return x


@dataclass(frozen=True)
class NoiseModel:
    """The additive noise of one released count, as the intruder models it.

    Build it with :meth:`discrete_gaussian` (rho-zCDP, Kazan & Reiter (2022) eq. 8) or
    :meth:`geometric` (pure epsilon-DP, the mechanism of eq. 12), or wrap a
    :mod:`censusdp.privacy.mechanisms` object with :meth:`from_mechanism`.

    Attributes:
        mechanism: the release mechanism whose pmf is used.
    """

    mechanism: DiscreteGaussian | Geometric

    @classmethod
    def discrete_gaussian(cls, rho: float | Fraction | str) -> NoiseModel:
        """Discrete Gaussian noise with ``P[eta = k] ∝ exp(-rho k^2)`` (Kazan & Reiter (2022) eq. 8)."""
        return cls(DiscreteGaussian.from_rho(rho))

    @classmethod
    def geometric(cls, epsilon: float | Fraction | str) -> NoiseModel:
        """Two-sided geometric noise with ``P[eta = k] ∝ exp(-epsilon |k|)`` (Kazan & Reiter (2022) eq. 12)."""
        return cls(Geometric.from_epsilon(epsilon))

    @classmethod
    def from_mechanism(cls, mechanism: object) -> NoiseModel:
        """Wrap a :class:`~censusdp.privacy.mechanisms.DiscreteGaussian` or ``Geometric``."""
        if not isinstance(mechanism, DiscreteGaussian | Geometric):
            raise CensusDPError(
                f"mechanism must be a DiscreteGaussian or Geometric, got {type(mechanism).__name__}"
            )
        return cls(mechanism)

    @property
    def kind(self) -> str:
        """``"discrete_gaussian"`` or ``"geometric"``."""
        return self.mechanism.name

    @property
    def rho(self) -> float:
        """zCDP cost of one sensitivity-1 count (``epsilon^2 / 2`` for the geometric)."""
        return float(self.mechanism.rho())

    @property
    def epsilon(self) -> float | None:
        """Pure-DP cost for the geometric mechanism; ``None`` for the discrete Gaussian."""
        if isinstance(self.mechanism, Geometric):
            return float(self.mechanism.epsilon())
        return None

    def describe(self) -> dict[str, object]:
        """Parameters for JSON output."""
        out: dict[str, object] = {"mechanism": self.kind, "rho": self.rho}
        if self.epsilon is not None:
            out["epsilon"] = self.epsilon
        return out

    def log_pmf(self, k: np.ndarray) -> np.ndarray:
        """``log P[eta = k]`` (from the mechanism)."""
        return self.mechanism.log_pmf(np.asarray(k))

    def pmf(self, k: np.ndarray) -> np.ndarray:
        """``P[eta = k]`` (from the mechanism)."""
        return self.mechanism.pmf(np.asarray(k))

    def log_likelihood_ratio(self, z: np.ndarray) -> np.ndarray:
        """``log P[eta = z - 1] - log P[eta = z]``.

        With ``z = x* - k`` this is the log of the ratio of the likelihoods of the
        released count ``x*`` under ``X = k + 1`` and under ``X = k``: ``rho (2 z - 1)``
        for the discrete Gaussian (eq. 11), ``epsilon (|z| - |z - 1|)`` for the
        geometric (eq. 12).
        """
        z = np.asarray(z, dtype=np.float64)
        return self.log_pmf(z - 1.0) - self.log_pmf(z)

    def tail(self, t: int) -> float:
        """``P[|eta| >= t]``."""
        return float(self.mechanism.tail(int(t)))

    def half_width(self, tol: float) -> int:
        """The smallest ``K >= 1`` with ``P[|eta| > K] <= tol``."""
        tol = check_tolerance(tol)
        lo, hi = 0, 1
        while self.tail(hi + 1) > tol:
            lo, hi = hi, hi * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.tail(mid + 1) > tol:
                lo = mid
            else:
                hi = mid
        return max(hi, 1)

    def support(self, tol: float) -> tuple[np.ndarray, np.ndarray, float]:
        """``(k, pmf(k), bound)`` for ``k`` in ``[-K, K]`` with ``P[|eta| > K] = bound <= tol``."""
        K = self.half_width(tol)
        k = np.arange(-K, K + 1, dtype=np.int64)
        return k, self.pmf(k), self.tail(K + 1)


def _rho_fraction(rho: float | Fraction | str) -> Fraction:
    from censusdp.privacy.parameters import as_fraction

    r = as_fraction(rho, "rho")
    if r <= 0:
        raise BudgetError(f"rho is {r}; it must be positive")
    return r


@functools.lru_cache(maxsize=256)
def _sum_log_pmf(rho: Fraction, d: int) -> tuple[int, np.ndarray]:
    dg = DiscreteGaussian.from_rho(rho)
    K = max(1, math.ceil(math.sqrt(_SUMMAND_CUT / float(rho))))
    k = np.arange(-K, K + 1)
    one = dg.pmf(k)
    length = d * 2 * K + 1
    nfft = sp_fft.next_fast_len(length, real=True)
    dens = sp_fft.irfft(sp_fft.rfft(one, nfft) ** d, nfft)[:length]
    z = np.arange(-d * K, d * K + 1)
    approx = DiscreteGaussian.from_rho(rho / d).log_pmf(z)
    reliable = dens > _RELIABLE * dens.max()
    with np.errstate(divide="ignore", invalid="ignore"):
        lp = np.where(reliable, np.log(np.where(reliable, dens, 1.0)), approx)
    return d * K, lp


def sum_of_discrete_gaussians(rho: float | Fraction | str, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Log pmf of ``eta_1 + ... + eta_d`` with ``eta_i`` iid discrete Gaussian(rho), by convolution.

    This is the noise of ``Y_1^*`` in Kazan & Reiter (2022) eq. 20, which eq. 21 approximates by
    one discrete Gaussian with ``sigma^2 = d / (2 rho)``. The d-fold convolution of the
    pmf (each summand cut where its tail is below ``exp(-50)``) is computed by FFT in
    double precision, so every value is exact to an absolute error of about ``1e-15``
    of the peak. Where the result is below ``1e-13`` of the peak (far tails, where
    the FFT has no relative precision) the log pmf of eq. 21's approximation is
    returned instead; :func:`censusdp.risk.approximation_error` shows that the two
    agree there to far better than that at the census parameters.

    Args:
        rho: the zCDP parameter of each summand.
        d: number of summands (``d >= 1``).

    Returns:
        ``(k, log_pmf)``: the support ``-d K .. d K`` and the log pmf on it.
    """
    if isinstance(d, bool) or int(d) != d or int(d) < 1:
        raise CensusDPError(f"d (number of summed counts) is {d!r}; it must be an integer >= 1")
    half, lp = _sum_log_pmf(_rho_fraction(rho), int(d))
    return np.arange(-half, half + 1, dtype=np.int64), lp
