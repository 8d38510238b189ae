"""The four public noise laws a released count may carry, as the data user models them.

A noise law here is a location family: the released value is ``X = k + Z`` for the
true count ``k`` and noise ``Z`` with a known law, so the likelihood of ``k`` given
``X`` is ``f(X - k)``. Only the shape of ``f`` matters for inference: its normalising
constant does not depend on ``k`` and cancels in every posterior. Each law is stored
by one canonical parameter, as an exact rational where the user's input allows it.

How ``--scale``, ``--rho`` and ``--epsilon`` map to each law (sensitivity-1 counts):

========================  ===================================  ===========================
law                       density / pmf of ``Z``               parameters
========================  ===================================  ===========================
``laplace``               ``exp(-|z| / b) / (2 b)``, real z    ``--scale`` = ``b``;
                                                               ``--epsilon E``: ``b = 1/E``;
                                                               ``--rho R``: ``b = 1/sqrt(2R)``
``geometric``             ``prop. to exp(-eps |z|)``,          ``--scale`` = ``b = 1/eps``;
                          integer z (two-sided geometric)      ``--epsilon E``: ``eps = E``;
                                                               ``--rho R``: ``eps = sqrt(2R)``
``discrete-gaussian``     ``prop. to exp(-z^2 / (2 sigma^2))``, ``--scale`` = ``sigma``;
                          integer z                            ``--rho R``: ``sigma^2 = 1/R``;
                                                               ``--epsilon E``: ``R`` = the
                                                               largest rho with CKS
                                                               epsilon(rho, delta) <= E
``gaussian``              ``N(0, sigma^2)``, real z            as ``discrete-gaussian``
========================  ===================================  ===========================

``sigma^2 = 1/rho`` is the 2020 production convention: a histogram query has squared
L2 sensitivity ``Delta^2 = 2`` under bounded neighbours (one record changed), and a
Gaussian with ``sigma^2`` costs ``rho = Delta^2 / (2 sigma^2)`` (Canonne, Kamath &
Steinke 2020, Thm. 4; Kazan & Reiter 2022 sec. 2.1). For the pure-DP laws, ``--rho R``
means the law whose zCDP cost ``eps^2 / 2`` equals ``R`` (Bun & Steinke 2016, Prop. 1.4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from censusdp.errors import BudgetError, CensusDPError
from censusdp.privacy.parameters import as_fraction

__all__ = ["NOISE_LAWS", "NoiseLaw"]

NOISE_LAWS: tuple[str, ...] = ("laplace", "geometric", "discrete-gaussian", "gaussian")
"""Names accepted by :meth:`NoiseLaw.from_args` (and ``censusdp infer posterior --noise``)."""

_PURE = ("laplace", "geometric")
_GAUSS = ("discrete-gaussian", "gaussian")
_DISCRETE = ("geometric", "discrete-gaussian")


def _positive(value: object, name: str) -> Fraction:
    x = as_fraction(value, name)
    if x <= 0:
        raise BudgetError(f"{name} is {x}; it must be positive")
    return x


@dataclass(frozen=True)
class NoiseLaw:
    """Additive noise of one released count.

    Attributes:
        law: one of :data:`NOISE_LAWS`.
        parameter: the canonical parameter: the scale ``b`` for ``laplace`` and
            ``geometric`` (``eps = 1/b``), ``sigma^2`` for the two Gaussians.
        given: how the user specified it, e.g. ``{"rho": "1/2"}``, for the record.
        delta: the ``delta`` used to turn ``--epsilon`` into ``rho`` (Gaussians only).
    """

    law: str
    parameter: Fraction
    given: tuple[tuple[str, str], ...] = ()
    delta: Fraction | None = None

    def __post_init__(self) -> None:
        if self.law not in NOISE_LAWS:
            raise CensusDPError(f"noise law is {self.law!r}; it must be one of {list(NOISE_LAWS)}")
        p = self.parameter
        if not isinstance(p, Fraction) or p <= 0:
            raise BudgetError(
                f"noise parameter of {self.law!r} is {p!r}; it must be a positive Fraction"
            )

    # -- construction -------------------------------------------------------------------

    @classmethod
    def from_args(
        cls,
        law: str,
        *,
        scale: object = None,
        rho: object = None,
        epsilon: object = None,
        delta: object = "1e-10",
    ) -> NoiseLaw:
        """The law from exactly one of ``scale``, ``rho``, ``epsilon`` (module table).

        Raises:
            CensusDPError: for an unknown law or not exactly one parameter given.
            BudgetError: for a non-positive or non-numeric parameter.
        """
        law = str(law).strip().lower().replace("_", "-")
        if law not in NOISE_LAWS:
            raise CensusDPError(f"--noise is {law!r}; it must be one of {list(NOISE_LAWS)}")
        given = [
            (k, v)
            for k, v in (("scale", scale), ("rho", rho), ("epsilon", epsilon))
            if v is not None
        ]
        if len(given) != 1:
            raise CensusDPError(
                f"give exactly one of --scale, --rho, --epsilon for --noise {law}; "
                f"got {[k for k, _ in given] or 'none'}"
            )
        key, raw = given[0]
        value = _positive(raw, key)
        record = ((key, str(value)),)
        d: Fraction | None = None
        if law in _PURE:
            if key == "scale":
                b = value
            elif key == "epsilon":
                b = 1 / value
            else:  # eps = sqrt(2 rho): irrational in general, kept as the nearest double
                b = Fraction(1.0 / math.sqrt(2.0 * float(value)))
            return cls(law, b, record)
        if key == "scale":
            s2 = value * value
        elif key == "rho":
            s2 = 1 / value
        else:
            from censusdp.privacy.accounting import rho_from_epsilon

            d = as_fraction(delta, "delta")
            if not 0 < d < 1:
                raise BudgetError(f"delta is {d}; it must satisfy 0 < delta < 1")
            s2 = 1 / rho_from_epsilon(value, d)
        return cls(law, s2, record, d)

    # -- properties ---------------------------------------------------------------------

    @property
    def discrete(self) -> bool:
        """True for the integer-valued laws (the released value must be an integer)."""
        return self.law in _DISCRETE

    @property
    def epsilon(self) -> float | None:
        """``1 / b`` for the pure-DP laws, else ``None``."""
        return float(1 / self.parameter) if self.law in _PURE else None

    @property
    def sigma_squared(self) -> float | None:
        """``sigma^2`` for the Gaussian laws, else ``None``."""
        return float(self.parameter) if self.law in _GAUSS else None

    @property
    def rho(self) -> float:
        """zCDP cost: ``1 / sigma^2`` (bounded neighbours, ``Delta^2 = 2``) or ``eps^2 / 2``."""
        if self.law in _GAUSS:
            return float(1 / self.parameter)
        return float(1 / self.parameter) ** 2 / 2.0

    @property
    def variance(self) -> float:
        """``Var Z``: ``2 b^2`` (Laplace), ``2 a / (1 - a)^2`` with ``a = e^-eps``
        (geometric), ``sigma^2`` (Gaussian), ``sum z^2 P(z)`` (discrete Gaussian)."""
        p = float(self.parameter)
        if self.law == "laplace":
            return 2.0 * p * p
        if self.law == "geometric":
            a = math.exp(-1.0 / p)
            return 2.0 * a / (1.0 - a) ** 2
        if self.law == "gaussian":
            return p
        z, w = self._dg_table()
        return float(np.sum(z * z * w))

    # -- likelihood -----------------------------------------------------------------------

    def log_kernel(self, z: np.ndarray | float) -> np.ndarray:
        """``log f(z) - log f(0)``: the log likelihood of a noise value up to a constant.

        ``-|z|/b`` (Laplace, geometric) or ``-z^2 / (2 sigma^2)`` (Gaussians); its
        maximum, 0, is at ``z = 0``. The constant ``log f(0)`` is the same for every
        true count and cancels in posteriors.
        """
        z = np.asarray(z, dtype=np.float64)
        p = float(self.parameter)
        if self.law in _PURE:
            return -np.abs(z) / p
        return -(z * z) / (2.0 * p)

    def log_density(self, z: np.ndarray | float) -> np.ndarray:
        """``log f(z)`` with the normalising constant (pmf for discrete laws)."""
        p = float(self.parameter)
        k = self.log_kernel(z)
        if self.law == "laplace":
            return k - math.log(2.0 * p)
        if self.law == "geometric":
            a = math.exp(-1.0 / p)
            return k + math.log((1.0 - a) / (1.0 + a))
        if self.law == "gaussian":
            return k - 0.5 * math.log(2.0 * math.pi * p)
        zz, w = self._dg_table()
        return k - math.log(float(np.sum(np.exp(-(zz * zz) / (2.0 * p)))))

    def _dg_table(self) -> tuple[np.ndarray, np.ndarray]:
        """Support ``|z| <= K`` and pmf of the discrete Gaussian, ``P(|Z| > K) < 1e-300``."""
        s = math.sqrt(float(self.parameter))
        half = int(math.ceil(40.0 * s)) + 2
        z = np.arange(-half, half + 1, dtype=np.float64)
        w = np.exp(-(z * z) / (2.0 * float(self.parameter)))
        return z, w / w.sum()

    def sample(self, size: int, rng: np.random.Generator) -> np.ndarray:
        """``size`` noise draws (experiments only: float arithmetic, not a release sampler).

        The geometric law is the difference of two iid geometric variables with
        success probability ``1 - exp(-eps)``; the discrete Gaussian is drawn by
        inversion of its pmf on ``|z| <= K`` (tail mass below ``1e-300``).
        """
        p = float(self.parameter)
        if self.law == "laplace":
            return rng.laplace(0.0, p, size)
        if self.law == "gaussian":
            return rng.normal(0.0, math.sqrt(p), size)
        if self.law == "geometric":
            q = -math.expm1(-1.0 / p)
            return (rng.geometric(q, size) - rng.geometric(q, size)).astype(np.int64)
        z, w = self._dg_table()
        cdf = np.cumsum(w)
        idx = np.searchsorted(cdf, rng.random(size) * cdf[-1], side="right")
        return z[np.minimum(idx, z.size - 1)].astype(np.int64)

    def describe(self) -> dict[str, Any]:
        """Every parameter of the law, for JSON output (all finite floats or strings)."""
        out: dict[str, Any] = {"law": self.law, "given": dict(self.given)}
        if self.law in _PURE:
            b = float(self.parameter)
            out.update(
                {
                    "scale_b": b,
                    "epsilon": 1.0 / b,
                    "rho": self.rho,
                    "definition": (
                        "Laplace density exp(-|z|/b)/(2b)"
                        if self.law == "laplace"
                        else "two-sided geometric pmf prop. to exp(-epsilon |z|), epsilon = 1/b"
                    ),
                }
            )
        else:
            s2 = float(self.parameter)
            out.update(
                {
                    "sigma_squared": s2,
                    "sigma_squared_exact": str(self.parameter),
                    "scale_sigma": math.sqrt(s2),
                    "rho": self.rho,
                    "definition": (
                        "pmf prop. to exp(-z^2/(2 sigma^2)) on the integers"
                        if self.law == "discrete-gaussian"
                        else "normal density N(0, sigma^2)"
                    ),
                    "convention": "sigma^2 = 1/rho (bounded neighbours, Delta^2 = 2; 2020 production)",
                }
            )
            if self.delta is not None:
                out["delta"] = float(self.delta)
        out["variance"] = self.variance
        return out
