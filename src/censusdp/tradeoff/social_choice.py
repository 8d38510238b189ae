"""Choosing epsilon as a social choice: where the frontier's slope meets society's price.

The model (Abowd & Schmutte 2019, the social planner's problem of the main text, with
the linear data utility derived in their Online Appendix E, eq. E-28):

* A **frontier** ``I(epsilon)`` gives the best attainable accuracy at each privacy loss
  (``I <= 0``: minus the variance the protection adds). It is increasing and concave.
  Its slope ``dI/deps`` is the **marginal rate of transformation** (MRT): how much
  accuracy one more unit of privacy loss buys.
* Person ``i`` values the published statistics as ``v_i = a_i + b_i I`` (eq. E-28) and
  dislikes privacy loss at a constant rate: ``-c_i epsilon``. Summing (a utilitarian
  social welfare function), ``SW(eps, I) = sum a_i - C eps + B I`` with
  ``C = sum c_i``, ``B = sum b_i``: :class:`LinearPreferences`.
* More generally ``SW = D(I) - P(eps)`` with an increasing data value ``D`` and an
  increasing privacy cost ``P``. The **marginal rate of substitution** (MRS) is the
  accuracy society needs in exchange for one more unit of privacy loss:
  ``MRS = P'(eps) / D'(I)`` (``C / B`` in the linear case).
* The planner maximises ``SW(eps, I(eps))``; at an interior optimum
  ``dSW/deps = D'(I) I'(eps) - P'(eps) = 0``, that is **MRT = MRS**. With a concave
  frontier and linear preferences the optimum is unique.

:class:`MisallocationPreferences` is a data value in dollars: funds are distributed to
``G`` areas at ``r`` dollars per counted person, so a count error ``e_j`` misallocates
``r |e_j|`` dollars. If the errors are unbiased, Gaussian and of equal variance
``-I / G`` (``I`` = minus the total error variance over the areas), the expected
misallocation is ``r sqrt(2 G (-I) / pi)``, and ``D(I) = -r sqrt(2 G (-I) / pi)``.

Assumptions that matter: preferences are known and add up across people (no
distributional weights); the privacy cost is linear in epsilon (Abowd & Schmutte's
choice; a convex cost would move the optimum down); the frontier is the efficient one
(a mechanism off the frontier wastes budget); only the error the protection adds is
counted (sampling and coverage error are the same at every epsilon).

:class:`MeasuredFrontier` fits ``I(eps) = -k eps^-alpha`` to measured accuracies (e.g.
minus the summed squared error of county populations over a grid of budgets): with
Gaussian or Laplace noise the variance scales as ``eps^-2`` and post-processing keeps
the shape close to a power law.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
from scipy.optimize import brentq

from censusdp.errors import ConfigError

__all__ = [
    "Frontier",
    "LinearPreferences",
    "MeasuredFrontier",
    "MisallocationPreferences",
    "Preferences",
    "SocialOptimum",
    "optimal_epsilon",
]


class Frontier(Protocol):
    """An accuracy-privacy frontier ``I(epsilon)`` with its first two derivatives."""

    label: str

    def quality(self, epsilon: float) -> float:
        """``I(epsilon)``."""
        ...

    def slope(self, epsilon: float) -> float:
        """``dI/depsilon`` (the MRT)."""
        ...

    def curvature(self, epsilon: float) -> float:
        """``d2I/depsilon2``."""
        ...


class Preferences(Protocol):
    """Social welfare ``D(I) - P(eps)``: data value minus privacy cost."""

    label: str

    def data_value(self, quality: float) -> float:
        """``D(I)``."""
        ...

    def marginal_data_value(self, quality: float) -> float:
        """``D'(I) > 0``."""
        ...

    def privacy_cost_at(self, epsilon: float) -> float:
        """``P(eps)``."""
        ...

    def marginal_privacy_cost(self, epsilon: float) -> float:
        """``P'(eps) > 0``."""
        ...

    def quality_at_welfare(self, welfare: float, epsilon: float) -> float:
        """The ``I`` with ``D(I) - P(eps) = welfare`` (an indifference curve)."""
        ...


def _positive(value: float, name: str) -> float:
    v = float(value)
    if not (v > 0 and math.isfinite(v)):
        raise ConfigError(f"{name} is {value!r}; it must be positive and finite")
    return v


@dataclass(frozen=True)
class LinearPreferences:
    """``SW = B I - C eps``: Abowd & Schmutte's linear data utility (eq. E-28) and privacy cost.

    Attributes:
        privacy_cost: ``C = sum_i c_i``, welfare lost per unit of epsilon.
        accuracy_value: ``B = sum_i b_i``, welfare per unit of ``I``.
    """

    privacy_cost: float
    accuracy_value: float
    label: str = field(default="linear: SW = B I - C eps", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "privacy_cost", _positive(self.privacy_cost, "privacy cost C"))
        object.__setattr__(
            self, "accuracy_value", _positive(self.accuracy_value, "accuracy value B")
        )

    @property
    def mrs(self) -> float:
        """``C / B``: accuracy needed per unit of privacy loss."""
        return self.privacy_cost / self.accuracy_value

    def data_value(self, quality: float) -> float:
        """``B I``."""
        return self.accuracy_value * quality

    def marginal_data_value(self, quality: float) -> float:
        """``B``."""
        return self.accuracy_value

    def privacy_cost_at(self, epsilon: float) -> float:
        """``C eps``."""
        return self.privacy_cost * epsilon

    def marginal_privacy_cost(self, epsilon: float) -> float:
        """``C``."""
        return self.privacy_cost

    def quality_at_welfare(self, welfare: float, epsilon: float) -> float:
        """``I = (SW + C eps) / B``: a straight indifference line."""
        return (welfare + self.privacy_cost * epsilon) / self.accuracy_value


@dataclass(frozen=True)
class MisallocationPreferences:
    """Expected misallocation of funds distributed by population counts, plus a privacy cost.

    ``SW = -r sqrt(2 G (-I) / pi) - C eps``: ``G`` areas receive ``r`` dollars per
    counted person; errors are unbiased Gaussian with equal variance ``-I / G``, so the
    expected absolute misallocation is ``r G E|e_j| = r G sqrt(2 (-I / G) / pi)``.

    Attributes:
        privacy_cost: ``C``, dollars of welfare per unit of epsilon.
        funds_per_person: ``r``, dollars allocated per counted person.
        areas: ``G``, the number of areas funded (e.g. the counties of a state).
    """

    privacy_cost: float
    funds_per_person: float
    areas: int
    label: str = field(default="misallocation: SW = -r E sum|e_j| - C eps", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "privacy_cost", _positive(self.privacy_cost, "privacy cost C"))
        object.__setattr__(
            self, "funds_per_person", _positive(self.funds_per_person, "funds per person r")
        )
        if isinstance(self.areas, bool) or not isinstance(self.areas, int) or self.areas < 1:
            raise ConfigError(f"areas G is {self.areas!r}; it must be a positive integer")

    @property
    def _k(self) -> float:
        return self.funds_per_person * math.sqrt(2.0 * self.areas / math.pi)

    def expected_misallocation(self, quality: float) -> float:
        """``r sqrt(2 G (-I) / pi)`` dollars."""
        return self._k * math.sqrt(max(-quality, 0.0))

    def data_value(self, quality: float) -> float:
        """``-r sqrt(2 G (-I) / pi)``."""
        return -self.expected_misallocation(quality)

    def marginal_data_value(self, quality: float) -> float:
        """``r sqrt(2 G / pi) / (2 sqrt(-I))``."""
        return self._k / (2.0 * math.sqrt(max(-quality, 1e-300)))

    def marginal_privacy_cost(self, epsilon: float) -> float:
        """``C``."""
        return self.privacy_cost

    def privacy_cost_at(self, epsilon: float) -> float:
        """``C eps``."""
        return self.privacy_cost * epsilon

    def quality_at_welfare(self, welfare: float, epsilon: float) -> float:
        """``I = -((-SW - C eps) / k)^2`` with ``k = r sqrt(2 G / pi)`` (where defined)."""
        m = -welfare - self.privacy_cost * epsilon
        return -((m / self._k) ** 2) if m >= 0 else math.nan


def _welfare(frontier: Frontier, preferences: Any, epsilon: float) -> float:
    q = frontier.quality(epsilon)
    return float(preferences.data_value(q)) - float(preferences.privacy_cost_at(epsilon))


@dataclass(frozen=True, eq=False)
class MeasuredFrontier:
    """``I(eps) = -k eps^-alpha`` fitted to measured accuracies (least squares in logs).

    ``slope = alpha k eps^-(alpha+1)``, ``curvature = -alpha (alpha+1) k eps^-(alpha+2)``:
    increasing and concave whenever ``alpha > 0``.

    Attributes:
        epsilons: the measured budgets.
        qualities: the measured ``I`` (negative), e.g. minus the summed squared error.
        k, alpha: the fitted constants.
        r_squared: the fit's R^2 in logs.
    """

    epsilons: tuple[float, ...]
    qualities: tuple[float, ...]
    label: str = "measured: I = -k eps^-alpha (fit)"
    k: float = field(init=False)
    alpha: float = field(init=False)
    r_squared: float = field(init=False)

    def __post_init__(self) -> None:
        e = np.asarray(self.epsilons, dtype=float)
        q = np.asarray(self.qualities, dtype=float)
        if e.ndim != 1 or e.size != q.size or e.size < 2:
            raise ConfigError(
                f"a measured frontier needs at least two (epsilon, I) pairs, got "
                f"{e.size} epsilons and {q.size} values"
            )
        if np.unique(e).size < 2 or np.any(e <= 0) or not np.all(np.isfinite(e)):
            raise ConfigError(
                f"measured epsilons must be positive, finite, with two distinct: {e.tolist()}"
            )
        if np.any(q >= 0) or not np.all(np.isfinite(q)):
            raise ConfigError(
                f"measured accuracies I must be negative and finite (minus an error), got {q.tolist()}"
            )
        x, y = np.log(e), np.log(-q)
        slope, intercept = np.polyfit(x, y, 1)
        resid = y - (intercept + slope * x)
        ss = float(np.sum((y - y.mean()) ** 2))
        object.__setattr__(self, "epsilons", tuple(float(v) for v in e))
        object.__setattr__(self, "qualities", tuple(float(v) for v in q))
        object.__setattr__(self, "k", float(np.exp(intercept)))
        object.__setattr__(self, "alpha", float(-slope))
        object.__setattr__(self, "r_squared", 1.0 - float(np.sum(resid**2)) / ss if ss > 0 else 1.0)
        if self.alpha <= 0:
            raise ConfigError(
                f"the measured error does not fall with epsilon (fitted exponent alpha = "
                f"{self.alpha:.3g}); no increasing frontier fits these points"
            )

    def quality(self, epsilon: float) -> float:
        """``-k eps^-alpha``."""
        return -self.k * epsilon ** (-self.alpha)

    def slope(self, epsilon: float) -> float:
        """``alpha k eps^-(alpha+1)``."""
        return self.alpha * self.k * epsilon ** (-self.alpha - 1)

    def curvature(self, epsilon: float) -> float:
        """``-alpha (alpha+1) k eps^-(alpha+2)``."""
        return -self.alpha * (self.alpha + 1) * self.k * epsilon ** (-self.alpha - 2)


@dataclass(frozen=True)
class SocialOptimum:
    """The welfare-maximising epsilon on a frontier.

    Attributes:
        epsilon: the optimum.
        quality: ``I`` there.
        mrt: ``dI/deps`` there.
        mrs: ``P'(eps) / D'(I)`` there (equal to ``mrt`` at an interior optimum).
        welfare: ``D(I) - P(eps)`` there.
        interior: ``False`` if the optimum is at an end of the search range (MRT and MRS
            do not cross inside it).
        search_range: the range searched.
    """

    epsilon: float
    quality: float
    mrt: float
    mrs: float
    welfare: float
    interior: bool
    search_range: tuple[float, float]

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "epsilon": self.epsilon,
            "I": self.quality,
            "mrt": self.mrt,
            "mrs": self.mrs,
            "welfare": self.welfare,
            "interior": self.interior,
            "search_range": list(self.search_range),
        }


def _gap(frontier: Frontier, preferences: Any, epsilon: float) -> float:
    """``dSW/deps = D'(I) I'(eps) - P'(eps)`` (its sign is that of MRT - MRS)."""
    q = frontier.quality(epsilon)
    return float(
        preferences.marginal_data_value(q) * frontier.slope(epsilon)
        - preferences.marginal_privacy_cost(epsilon)
    )


def optimal_epsilon(
    frontier: Frontier,
    preferences: Any,
    *,
    search_range: Sequence[float] = (0.01, 100.0),
    grid: int = 400,
) -> SocialOptimum:
    """The epsilon that maximises ``SW = D(I(eps)) - P(eps)``: where MRT = MRS.

    Solves ``D'(I(eps)) dI/deps = P'(eps)`` (Abowd & Schmutte's first-order condition
    ``MRT = MRS``) by bracketing every sign change of ``dSW/deps`` on a log-spaced grid
    over ``search_range`` and refining with Brent's method; returns the candidate
    (roots and both ends) with the highest welfare.

    Args:
        frontier: a :class:`Frontier`.
        preferences: a :class:`LinearPreferences`, :class:`MisallocationPreferences` or
            any object with the :class:`Preferences` methods.
        search_range: ``(lo, hi)``, ``0 < lo < hi``.
        grid: grid points used for bracketing.

    Raises:
        ConfigError: for an invalid range or grid.
    """
    lo, hi = (float(v) for v in search_range)
    if not (0 < lo < hi and math.isfinite(hi)):
        raise ConfigError(f"search range must satisfy 0 < lo < hi < inf, got {lo}, {hi}")
    if grid < 3:
        raise ConfigError(f"grid must be at least 3 points, got {grid}")
    xs = np.geomspace(lo, hi, grid)
    g = np.array([_gap(frontier, preferences, float(x)) for x in xs])
    candidates = [(lo, False), (hi, False)]
    for j in np.flatnonzero(np.sign(g[:-1]) * np.sign(g[1:]) <= 0):
        a, b = float(xs[j]), float(xs[j + 1])
        if g[j] == 0:
            root = a
        elif g[j + 1] == 0:
            root = b
        else:
            root = brentq(lambda x: _gap(frontier, preferences, x), a, b, xtol=1e-14, rtol=1e-13)
        candidates.append((float(root), True))
    best_eps, interior = max(candidates, key=lambda c: _welfare(frontier, preferences, c[0]))
    q = frontier.quality(best_eps)
    mrs = preferences.marginal_privacy_cost(best_eps) / preferences.marginal_data_value(q)
    return SocialOptimum(
        epsilon=best_eps,
        quality=float(q),
        mrt=float(frontier.slope(best_eps)),
        mrs=float(mrs),
        welfare=_welfare(frontier, preferences, best_eps),
        interior=bool(interior),
        search_range=(lo, hi),
    )
