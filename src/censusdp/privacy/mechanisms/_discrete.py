"""The release mechanisms: discrete Gaussian (zCDP) and two-sided geometric (pure DP).

Both add integer noise to integer counts, sampled by the exact-integer alias tables
of :mod:`censusdp.privacy.mechanisms._table` (read its docstring for the exactness argument:
the sampled distribution is within total variation ``eta <= 2**-100`` of the exact
one, and :mod:`censusdp.privacy.accounting` adds the resulting term to ``delta``).
Parameters are exact ``Fraction`` objects; tables are cached per parameter.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np

from censusdp.errors import CensusDPError
from censusdp.privacy.mechanisms._base import integer_values
from censusdp.privacy.mechanisms._table import (
    PRECISION,
    TAIL_BITS,
    AliasTable,
    build_symmetric_table,
    fixed_point,
    mpf_to_fraction,
)
from censusdp.privacy.parameters import check_sensitivity, positive_fraction
from censusdp.privacy.randomness import RandomSource

__all__ = ["DiscreteGaussian", "Geometric"]

_MP_BITS = PRECISION + 64


def _release_units(
    table: AliasTable,
    values: np.ndarray,
    source: RandomSource,
    key: tuple[str | int, ...],
    codes: Sequence[str] | np.ndarray,
    out: np.ndarray | None,
) -> np.ndarray:
    arr = integer_values(values)
    streams = source.unit_streams(*key, codes=codes)
    if arr.ndim != 2 or arr.shape[0] != streams.n_units:
        raise CensusDPError(
            f"release_units needs a (units x cells) array with one code per unit; got shape "
            f"{arr.shape} and {streams.n_units} codes"
        )
    if out is not None and (
        not isinstance(out, np.ndarray)
        or out.shape != arr.shape
        or out.dtype != np.int64
        or not out.flags.c_contiguous
        or not out.flags.writeable
    ):
        got = f"{out.shape} {out.dtype}" if isinstance(out, np.ndarray) else type(out).__name__
        raise CensusDPError(
            f"release_units: out must be a writeable C-contiguous int64 array of shape "
            f"{arr.shape}; got {got}"
        )
    # the counts are added to each piece of draws while it is in the cache
    return table.sample_units(arr.shape[1], streams, arr.shape[0], counts=arr, out=out)


# -- discrete Gaussian ------------------------------------------------------------------


def _mp(x: Fraction) -> mpmath.mpf:
    return mpmath.mpf(x.numerator) / mpmath.mpf(x.denominator)


@dataclass(frozen=True)
class _Profile:
    """High-precision facts about a symmetric pmf used by tables, pmf and variance."""

    table: AliasTable
    log_normalizer: float  # log Z over all integers (f(0) = 1)
    variance: float


def _gauss_tail(s: mpmath.mpf, T: int) -> mpmath.mpf:
    """Upper bound on ``sum_{k > T} exp(-k**2 / (2 s))`` (ratios decrease)."""
    first = mpmath.exp(-(mpmath.mpf(T + 1) ** 2) / (2 * s))
    ratio = mpmath.exp(-mpmath.mpf(2 * T + 3) / (2 * s))
    return first / (1 - ratio)


@functools.lru_cache(maxsize=128)
def _gauss_profile(sigma_squared: Fraction) -> _Profile:
    """Cached :func:`_build_gauss_profile` (a thin wrapper, so that the builder stays plain)."""
    return _build_gauss_profile(sigma_squared)


def _build_gauss_profile(sigma_squared: Fraction) -> _Profile:
    with mpmath.workprec(_MP_BITS):
        s = _mp(sigma_squared)
        limit = mpmath.ldexp(mpmath.mpf(1), -(TAIL_BITS + 1))
        lo = max(1, int(mpmath.floor(mpmath.sqrt(2 * s * (TAIL_BITS + 1) * mpmath.log(2)))))
        hi = 2 * lo
        while _gauss_tail(s, hi) > limit:
            lo, hi = hi, 2 * hi
        while lo < hi:  # smallest T in [lo, hi] whose tail bound is below the limit
            mid = (lo + hi) // 2
            if _gauss_tail(s, mid) > limit:
                lo = mid + 1
            else:
                hi = mid
        T = lo
        tail = _gauss_tail(s, T)
        r0 = fixed_point(mpmath.exp(-1 / (2 * s)))
        c = fixed_point(mpmath.exp(-1 / s))

    def weights(t: int) -> list[int]:
        # e_{k+1} = e_k r_k, r_{k+1} = r_k c with r_k = exp(-(2k+1)/(2s)) in fixed point
        out = [1 << PRECISION]
        e, r = out[0], r0
        for _ in range(t):
            e = (e * r) >> PRECISION
            r = (r * c) >> PRECISION
            out.append(e)
        return out

    table = build_symmetric_table(T, weights, tail)
    half = weights(T)
    z_t = half[0] + 2 * sum(half[1:])
    second = 2 * sum(k * k * e for k, e in enumerate(half))
    z = Fraction(z_t, 1 << PRECISION) + 2 * mpf_to_fraction(tail)
    with mpmath.workprec(128):
        log_z = float(mpmath.log(_mp(z)))
    if T <= 400:  # small scales: direct high-precision sum (no fixed-point underflow)
        with mpmath.workprec(_MP_BITS):
            s = _mp(sigma_squared)
            terms = [mpmath.exp(-mpmath.mpf(k * k) / (2 * s)) for k in range(T + 1)]
            variance = float(
                2
                * mpmath.fsum(k * k * t for k, t in enumerate(terms))
                / (2 * mpmath.fsum(terms) - 1)
            )
    else:
        variance = second / z_t
    return _Profile(table=table, log_normalizer=log_z, variance=variance)


class _TableMechanism:
    """What the discrete mechanisms share: a cached alias-table profile and sampling.

    A subclass defines ``_build_profile()`` and ``log_pmf``; the profile is cached on the
    instance (not a dataclass field: excluded from eq, repr and pickles).
    """

    def _build_profile(self) -> _Profile:
        raise NotImplementedError

    @property
    def _profile(self) -> _Profile:
        cached = self.__dict__.get("_cached_profile")
        if cached is None:
            cached = self._build_profile()
            self.__dict__["_cached_profile"] = cached
        return cached

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_cached_profile"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def log_pmf(self, k: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    @property
    def sampling_tv(self) -> Fraction:
        """Proven bound on TV(sampled, exact distribution); see ``_table``."""
        return self._profile.table.tv_bound

    def pmf(self, k: np.ndarray) -> np.ndarray:
        """``P[X = k]`` as floats, for an array of integers ``k``."""
        return np.exp(self.log_pmf(k))

    def sample(self, n: int, source: RandomSource) -> np.ndarray:
        """``n`` independent noise draws (``int64``), vectorized."""
        return self._profile.table.sample(n, source)

    def release(self, values: np.ndarray, source: RandomSource) -> np.ndarray:
        """``values + noise`` with independent noise per entry (same shape, ``int64``)."""
        arr = integer_values(values)
        return arr + self.sample(arr.size, source).reshape(arr.shape)

    def release_units(
        self,
        values: np.ndarray,
        source: RandomSource,
        key: tuple[str | int, ...],
        codes: Sequence[str] | np.ndarray,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """Release many units at once, each with noise from its own stream.

        Unit ``u``'s noise comes from its stream of ``source.unit_streams(*key,
        codes=codes)`` (AES windows keyed by its code, see
        :mod:`censusdp.privacy.randomness`), so row ``u`` depends on ``values[u]``,
        ``source``, ``key`` and ``codes[u]`` only: releasing any subset of the units, in
        any order or chunking, gives the same rows. No per-unit key, cipher or Python
        object is made; the table lookups are vectorized over all rows.

        Args:
            values: ``(units, cells)`` integer counts.
            source: the parent stream (its position is not used or advanced).
            key: the streams' key, e.g. ``(geolevel, query)``.
            codes: one code per unit (its geocode).
            out: where the noisy values go: a writeable C-contiguous ``int64`` array of
                ``values``' shape, which may be ``values`` itself (released in place, no
                new array); ``None`` for a new array.
        """
        return _release_units(self._profile.table, values, source, key, codes, out)


@dataclass(frozen=True)
class DiscreteGaussian(_TableMechanism):
    """Discrete Gaussian noise ``N_Z(0, sigma^2)`` (Canonne, Kamath & Steinke 2020).

    ``P[X = k] = exp(-k^2 / (2 sigma^2)) / sum_j exp(-j^2 / (2 sigma^2))`` for integer
    ``k`` (Kazan & Reiter (2022), eq. 8 with ``sigma^2 = 1 / (2 rho)``). Adding it to a query of L2
    sensitivity ``Delta`` satisfies ``rho``-zCDP with ``rho = Delta^2 / (2 sigma^2)``
    (CKS 2020, Theorem 4; Kazan & Reiter (2022) sec. 2.1).

    Attributes:
        sigma_squared: the scale parameter ``sigma^2`` as an exact Fraction (ints,
            strings like ``"1/3"`` and floats are converted on construction).
    """

    sigma_squared: Fraction
    name: str = field(default="discrete_gaussian", init=False, repr=False)
    privacy_measure: str = field(default="zCDP", init=False, repr=False)
    exact: bool = field(default=True, init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "sigma_squared", positive_fraction(self.sigma_squared, "sigma_squared")
        )

    @classmethod
    def from_rho(cls, rho: Fraction | int | str | float, sensitivity: int = 1) -> DiscreteGaussian:
        """The discrete Gaussian with ``sigma^2 = sensitivity^2 / (2 rho)``."""
        rho = positive_fraction(rho, "rho")
        sensitivity = check_sensitivity(sensitivity)
        return cls(Fraction(sensitivity**2) / (2 * rho))

    def rho(self, sensitivity: int = 1) -> Fraction:
        """zCDP cost ``rho = sensitivity^2 / (2 sigma^2)`` (CKS 2020, Theorem 4)."""
        sensitivity = check_sensitivity(sensitivity)
        return Fraction(sensitivity**2) / (2 * self.sigma_squared)

    def _build_profile(self) -> _Profile:
        return _gauss_profile(self.sigma_squared)

    @property
    def variance(self) -> float:
        """Exact variance ``sum_k k^2 P[X = k]`` (slightly below ``sigma^2``; CKS Prop. 19)."""
        return self._profile.variance

    def log_pmf(self, k: np.ndarray) -> np.ndarray:
        """``log P[X = k]`` as floats."""
        k = np.asarray(k, dtype=np.float64)
        return -(k * k) / (2 * float(self.sigma_squared)) - self._profile.log_normalizer

    def tail(self, t: int) -> float:
        """``P[|X| >= t]`` for an integer ``t >= 0`` (float, summed at the table support)."""
        T = self._profile.table.half_width
        if t <= 0:
            return 1.0
        if t > T:
            return float(self._profile.table.tail_bound)
        k = np.arange(t, T + 1)
        return float(min(1.0, 2 * math.fsum(self.pmf(k))))

    def describe(self) -> dict[str, Any]:
        """Parameters for manifests (exact strings and floats)."""
        return {
            "mechanism": self.name,
            "sigma_squared": str(self.sigma_squared),
            "sigma_squared_float": float(self.sigma_squared),
            "variance": self.variance,
            "sampling_tv_bound": float(self.sampling_tv),
        }


# -- two-sided geometric -------------------------------------------------------------------


@functools.lru_cache(maxsize=128)
def _geometric_profile(scale: Fraction) -> _Profile:
    """Cached :func:`_build_geometric_profile`."""
    return _build_geometric_profile(scale)


def _build_geometric_profile(scale: Fraction) -> _Profile:
    with mpmath.workprec(_MP_BITS):
        b = _mp(scale)
        alpha = mpmath.exp(-1 / b)
        limit = mpmath.ldexp(mpmath.mpf(1), -(TAIL_BITS + 1))
        # tail sum_{k>T} alpha^k = alpha^(T+1) / (1 - alpha) <= limit
        need = (mpmath.log(1 / limit) - mpmath.log(1 / (1 - alpha))) * b - 1
        T = max(1, int(mpmath.ceil(need)))

        def tail_of(t: int) -> mpmath.mpf:
            return alpha ** (t + 1) / (1 - alpha)

        while tail_of(T) > limit:
            T += 1
        tail = tail_of(T)
        a = fixed_point(alpha)
        # exact variance 2 alpha / (1 - alpha)^2
        variance = float(2 * alpha / (1 - alpha) ** 2)
        log_z = float(mpmath.log((1 + alpha) / (1 - alpha)))

    def weights(t: int) -> list[int]:
        out = [1 << PRECISION]
        e = out[0]
        for _ in range(t):
            e = (e * a) >> PRECISION
            out.append(e)
        return out

    table = build_symmetric_table(T, weights, tail)
    return _Profile(table=table, log_normalizer=log_z, variance=variance)


@dataclass(frozen=True)
class Geometric(_TableMechanism):
    """Two-sided geometric (discrete Laplace) noise, for pure ``epsilon``-DP.

    ``P[X = k] = (1 - a) / (1 + a) * a^|k|`` with ``a = exp(-1 / scale)``
    (Ghosh, Roughgarden & Sundararajan 2012; JASON (JSR-19-2F) sec. 5.2; Van Riper et al. (2020) sec. 2.2,
    eq. 1: ``scale = sensitivity / epsilon``). Adding it to an integer query of L1
    sensitivity ``Delta`` satisfies ``epsilon``-DP with ``epsilon = Delta / scale``,
    hence ``rho``-zCDP with ``rho = epsilon^2 / 2`` (Kazan & Reiter (2022), Theorem 2).

    Attributes:
        scale: the scale ``b`` (``1 / epsilon`` per unit of sensitivity), a Fraction.
    """

    scale: Fraction
    name: str = field(default="geometric", init=False, repr=False)
    privacy_measure: str = field(default="pure", init=False, repr=False)
    exact: bool = field(default=True, init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "scale", positive_fraction(self.scale, "scale"))

    @classmethod
    def from_epsilon(cls, epsilon: Fraction | int | str | float, sensitivity: int = 1) -> Geometric:
        """The geometric mechanism with ``scale = sensitivity / epsilon`` (Van Riper et al. (2020) eq. 1)."""
        epsilon = positive_fraction(epsilon, "epsilon")
        sensitivity = check_sensitivity(sensitivity)
        return cls(Fraction(sensitivity) / epsilon)

    def epsilon(self, sensitivity: int = 1) -> Fraction:
        """Pure DP cost ``epsilon = sensitivity / scale``."""
        sensitivity = check_sensitivity(sensitivity)
        return Fraction(sensitivity) / self.scale

    def rho(self, sensitivity: int = 1) -> Fraction:
        """zCDP cost ``rho = epsilon^2 / 2`` (Bun & Steinke 2016 Prop. 1.4; Kazan & Reiter (2022) Thm. 2)."""
        return self.epsilon(sensitivity) ** 2 / 2

    def _build_profile(self) -> _Profile:
        return _geometric_profile(self.scale)

    @property
    def alpha(self) -> float:
        """``a = exp(-1 / scale)``."""
        return math.exp(-1 / float(self.scale))

    @property
    def variance(self) -> float:
        """Exact variance ``2 a / (1 - a)^2``."""
        return self._profile.variance

    def log_pmf(self, k: np.ndarray) -> np.ndarray:
        """``log P[X = k]`` as floats."""
        k = np.asarray(k, dtype=np.float64)
        return -np.abs(k) / float(self.scale) - self._profile.log_normalizer

    def tail(self, t: int) -> float:
        """``P[|X| >= t] = 2 a^t / (1 + a)`` for ``t >= 1``."""
        if t <= 0:
            return 1.0
        a = self.alpha
        return min(1.0, 2 * a**t / (1 + a))

    def describe(self) -> dict[str, Any]:
        """Parameters for manifests (exact strings and floats)."""
        return {
            "mechanism": self.name,
            "scale": str(self.scale),
            "scale_float": float(self.scale),
            "variance": self.variance,
            "sampling_tv_bound": float(self.sampling_tv),
        }
