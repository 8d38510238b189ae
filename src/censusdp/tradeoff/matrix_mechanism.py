"""The data-utility model of the matrix mechanism (Abowd & Schmutte, Online Appendices C and E).

The matrix mechanism answers a workload ``Q`` (``m x n``: ``m`` linear queries of an
``n``-cell histogram ``x``) by measuring a strategy ``A`` (``p x n``) with i.i.d. noise
and projecting: ``M(x, Q) = Q x + Q A^+ (Delta_A) e`` with ``E[e] = 0``,
``E[e e^T] = sigma_e^2 I`` (App. E; ``A^+`` is the Moore-Penrose pseudo-inverse and
``Delta_A`` the L1 sensitivity of ``A``, App. C Theorem 3: the largest column L1 norm).
For Laplace noise of scale ``1 / epsilon``, ``sigma_e^2 = 2 / epsilon^2``.

Person ``i`` turns the published answers into wealth ``W_i = Pi_i^T M(x, Q)`` and has a
twice-differentiable concave utility ``U_i``. A second-order expansion in ``e`` around
``e = 0`` (eqs. E-15 to E-26) gives

    E[U_i(W_i)] ~= E_x[U_i(w_i0)] + 1/2 E_x[U_i''(w_i0)] Delta_A^2 sigma_e^2 ||Pi_i^T Q A^+||_F^2

with ``w_i0 = Pi_i^T Q x``. The accuracy of the mechanism is (eq. E-27)

    I = -sigma_e^2 Delta_A^2 ||Q A^+||_F^2,

so the expected utility is linear in ``I`` (eq. E-28): ``v_i(I) = a_i + b_i I`` with

    b_i = -1/2 E_x[U_i''(w_i0)] ||Pi_i^T Q A^+||_F^2 / ||Q A^+||_F^2  (>= 0).

The printed (E-23) and (E-28) show ``Q A`` where ``Q A^+`` is meant (E-22 and E-27 carry
the ``+``); this module uses ``Q A^+`` throughout.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from censusdp.errors import BudgetError, ConfigError
from censusdp.privacy.parameters import as_fraction

__all__ = [
    "DataUtility",
    "MatrixMechanismFrontier",
    "data_utility",
    "expected_utility_loss",
    "l1_sensitivity",
    "laplace_noise_variance",
    "matrix_mechanism_accuracy",
]


def _matrix(a: Any, name: str) -> np.ndarray:
    m = np.asarray(a, dtype=np.float64)
    if m.ndim != 2 or m.size == 0:
        raise ConfigError(f"{name} must be a non-empty 2-D matrix, got shape {m.shape}")
    if not np.all(np.isfinite(m)):
        raise ConfigError(f"{name} has non-finite entries")
    return m


def l1_sensitivity(strategy: Any) -> float:
    """``Delta_A = max_k ||a_k||_1`` over the columns ``a_k`` of ``A`` (App. C, Theorem 3).

    The largest change of ``A x`` in L1 norm when one person is added or removed
    (``||x - y||_1 <= 1``), following Li et al. (2015, prop. 4).
    """
    a = _matrix(strategy, "strategy A")
    return float(np.abs(a).sum(axis=0).max())


def laplace_noise_variance(epsilon: Fraction | float | str) -> float:
    """``sigma_e^2 = 2 / epsilon^2``: the variance of Laplace noise of scale ``1/epsilon`` (App. E)."""
    e = as_fraction(epsilon, "epsilon")
    if e <= 0:
        raise BudgetError(f"epsilon is {e}; it must be positive")
    return float(2 / (e * e))


def _reconstruction(q: np.ndarray, a: np.ndarray) -> np.ndarray:
    if q.shape[1] != a.shape[1]:
        raise ConfigError(
            f"workload Q has {q.shape[1]} columns and strategy A has {a.shape[1]}; "
            "both must be over the same histogram cells"
        )
    a_plus = np.linalg.pinv(a)
    qa = q @ a_plus
    # Q x is estimable from A x only if Q lies in the row space of A (Q A^+ A = Q)
    err = np.abs(qa @ a - q).max()
    if err > 1e-8 * max(1.0, np.abs(q).max()):
        raise ConfigError(
            f"strategy A does not support workload Q: ||Q A^+ A - Q||_max = {err:.3g}; every "
            "workload query must be a linear combination of the strategy's queries"
        )
    return qa


def _noise_variance(value: float, name: str = "noise variance sigma_e^2") -> float:
    v = float(value)
    if not (v > 0 and np.isfinite(v)):
        raise ConfigError(f"{name} is {value!r}; it must be positive and finite")
    return v


def matrix_mechanism_accuracy(
    workload: Any, strategy: Any, noise_variance: float, *, sensitivity: float | None = None
) -> float:
    """Accuracy ``I = -sigma_e^2 Delta_A^2 ||Q A^+||_F^2`` of the matrix mechanism (eq. E-27).

    This is minus the total variance of the published answers ``Q x + Q A^+ Delta_A e``.

    Args:
        workload: ``Q``, ``m x n``.
        strategy: ``A``, ``p x n``; ``Q`` must lie in its row space.
        noise_variance: ``sigma_e^2``, the variance of each element of ``e``.
        sensitivity: ``Delta_A`` (default: :func:`l1_sensitivity` of ``A``).

    Raises:
        ConfigError: for malformed matrices, a strategy that does not support the
            workload, or a non-positive variance.
    """
    q, a = _matrix(workload, "workload Q"), _matrix(strategy, "strategy A")
    qa = _reconstruction(q, a)
    d = l1_sensitivity(a) if sensitivity is None else float(sensitivity)
    return -_noise_variance(noise_variance) * d * d * float(np.sum(qa * qa))


@dataclass(frozen=True, eq=False)
class DataUtility:
    """The App. E data-utility model for a set of persons.

    Attributes:
        accuracy: ``I`` (eq. E-27).
        sensitivity: ``Delta_A``.
        loss: expected utility loss per person,
            ``-1/2 E[U''] Delta_A^2 sigma_e^2 ||Pi_i^T Q A^+||_F^2`` (eq. E-26), ``>= 0``.
        weight: ``b_i`` of eq. E-28 per person, so that ``loss = -b_i I``.
        exposure: ``||Pi_i^T Q A^+||_F^2`` per person.
    """

    accuracy: float
    sensitivity: float
    loss: np.ndarray
    weight: np.ndarray
    exposure: np.ndarray


def data_utility(
    pi: Any,
    workload: Any,
    strategy: Any,
    noise_variance: float,
    utility_curvature: Any,
    *,
    sensitivity: float | None = None,
) -> DataUtility:
    """Expected utility loss and the linear data-utility weights of App. E.

    For each person ``i`` (a column of ``Pi``), with ``Delta_A`` the L1 sensitivity of
    ``A``:

    * loss (the second-order term of eq. E-26, negated):
      ``L_i = -1/2 E_x[U_i''(w_i0)] Delta_A^2 sigma_e^2 ||Pi_i^T Q A^+||_F^2``;
    * weight (eq. E-28): ``b_i = -1/2 E_x[U_i''] ||Pi_i^T Q A^+||_F^2 / ||Q A^+||_F^2``,
      so that ``E[U_i(W_i)] ~= E_x[U_i(w_i0)] + b_i I`` and ``L_i = -b_i I``.

    Args:
        pi: ``Pi``: a vector of length ``m`` (one person) or an ``m x k`` matrix (``k``
            persons), the weights turning the ``m`` published answers into wealth.
        workload: ``Q`` (``m x n``).
        strategy: ``A`` (``p x n``).
        noise_variance: ``sigma_e^2``.
        utility_curvature: ``E_x[U_i''(w_i0)]`` (negative for a concave utility), a
            scalar or one value per person.
        sensitivity: ``Delta_A`` (default: :func:`l1_sensitivity` of ``A``).

    Raises:
        ConfigError: for shapes that do not conform, a positive curvature (a
            risk-loving person, outside the model), or the errors of
            :func:`matrix_mechanism_accuracy`.
    """
    q, a = _matrix(workload, "workload Q"), _matrix(strategy, "strategy A")
    p = np.asarray(pi, dtype=np.float64)
    if p.ndim == 1:
        p = p[:, None]
    if p.ndim != 2 or p.shape[0] != q.shape[0]:
        raise ConfigError(
            f"Pi must have one row per workload query ({q.shape[0]}), got shape "
            f"{np.asarray(pi).shape}"
        )
    u2 = np.broadcast_to(np.asarray(utility_curvature, dtype=np.float64), (p.shape[1],))
    if np.any(u2 > 0) or not np.all(np.isfinite(u2)):
        raise ConfigError(
            "utility curvature E[U''] must be finite and <= 0 (concave utility); got "
            f"{np.asarray(utility_curvature).tolist()}"
        )
    qa = _reconstruction(q, a)
    d = l1_sensitivity(a) if sensitivity is None else float(sensitivity)
    s2 = _noise_variance(noise_variance)
    total = float(np.sum(qa * qa))
    exposure = np.sum((p.T @ qa) ** 2, axis=1)  # ||Pi_i^T Q A^+||^2 per person
    accuracy = -s2 * d * d * total
    loss = -0.5 * u2 * d * d * s2 * exposure
    weight = -0.5 * u2 * exposure / total
    return DataUtility(
        accuracy=accuracy, sensitivity=d, loss=loss, weight=weight, exposure=exposure
    )


def expected_utility_loss(
    pi: Any,
    workload: Any,
    strategy: Any,
    noise_variance: float,
    utility_curvature: Any,
    *,
    sensitivity: float | None = None,
) -> np.ndarray:
    """``-1/2 E[U_i''] Delta_A^2 sigma_e^2 ||Pi_i^T Q A^+||_F^2`` per person (eq. E-26).

    See :func:`data_utility` for the arguments.
    """
    return data_utility(
        pi, workload, strategy, noise_variance, utility_curvature, sensitivity=sensitivity
    ).loss


@dataclass(frozen=True, eq=False)
class MatrixMechanismFrontier:
    """``I(epsilon) = -(2 / epsilon^2) Delta_A^2 ||Q A^+||_F^2``: eq. E-27 with Laplace noise.

    Slope ``4 Delta_A^2 ||Q A^+||_F^2 / epsilon^3``, curvature
    ``-12 Delta_A^2 ||Q A^+||_F^2 / epsilon^4``: increasing and concave.

    Attributes:
        workload: ``Q``.
        strategy: ``A``.
    """

    workload: Any
    strategy: Any
    label: str = "matrix mechanism (Laplace): I = -(2/eps^2) Delta_A^2 ||Q A+||_F^2"

    def __post_init__(self) -> None:
        q = _matrix(self.workload, "workload Q")
        a = _matrix(self.strategy, "strategy A")
        qa = _reconstruction(q, a)
        d = l1_sensitivity(a)
        object.__setattr__(self, "_k", d * d * float(np.sum(qa * qa)))

    @property
    def scale(self) -> float:
        """``Delta_A^2 ||Q A^+||_F^2``."""
        return float(self._k)  # type: ignore[attr-defined]

    def quality(self, epsilon: float) -> float:
        """``I(epsilon)``."""
        return -2.0 * self.scale / epsilon**2

    def slope(self, epsilon: float) -> float:
        """``dI/depsilon``."""
        return 4.0 * self.scale / epsilon**3

    def curvature(self, epsilon: float) -> float:
        """``d2I/depsilon2``."""
        return -12.0 * self.scale / epsilon**4
