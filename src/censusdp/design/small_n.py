"""Mechanisms for one small count in ``{0..n}`` under epsilon-DP (``censusdp design small-n``).

JASON JSR-19-2F sec. 5.2.3 ("Common mechanisms can give strange results for small n"):
a mechanism for a count ``a`` in ``{0..n}`` (e.g. the number of 1s among ``n`` people) is
a column-stochastic ``(n + 1) x (n + 1)`` matrix ``P``, ``P[i, j] = Pr(output i | true
j)``, and it is epsilon-DP (neighbours ``j`` and ``j + 1``) exactly when

    P[i, j] >= alpha P[i, j + 1]  and  P[i, j + 1] >= alpha P[i, j],  alpha = exp(-epsilon),

for every ``i`` and ``j``. The set of DP mechanisms is a polytope, so the best mechanism
for a linear loss is a linear program. Following Cormode, Kulkarni & Srivastava (2018,
"Constrained private mechanisms for count data", ICDE; arXiv 1710.00608), cited by the
report, desirable properties are linear constraints too; the report names:

* ``weak_honesty``: ``P[j, j] >= 1 / (n + 1)``, never less often right than the uniform
  mechanism;
* ``symmetry``: ``P[i, j] = P[n - i, n - j]`` (swapping the roles of 0 and 1);
* ``column_honesty``: ``P[j, j] >= P[i, j]``, the truth is the most likely output;
* ``column_monotonicity``: in every column, probabilities do not increase with
  ``|i - j|`` on either side of the truth.

``fairness`` (the same ``P[j, j]`` for every ``j``) is also available. Mechanisms here,
named by how the geometric noise is kept in range (the report's "truncated" is ambiguous
between the two):

* ``uniform``;
* ``geometric_clamped``, the range-restricted geometric mechanism of the report,
  ``min(n, max(0, a + delta))`` with two-sided geometric ``delta``, ``Pr(delta = k) =
  (1 - alpha) / (1 + alpha) alpha^|k|``: clamping is post-processing, so it is
  epsilon-DP;
* ``geometric_conditioned``, the same noise conditioned on landing in ``{0..n}``
  (redrawn until it does): **not** epsilon-DP in general, up to ``2 epsilon``, its
  actual epsilon is reported;
* ``fair`` (the explicitly fair mechanism of Cormode et al. as the report prints it);
* LP-optimal mechanisms solved with HiGHS.

Every mechanism's JSON entry says whether it is epsilon-DP (``epsilon_dp``, its measured
epsilon within the request's).

Losses (with a uniform prior on the true count unless a prior is given): ``wrong``,
the wrong-answer rate ``1 - sum_j pi_j P[j, j]``; ``abs``, the expected absolute error
``sum_j pi_j sum_i |i - j| P[i, j]``; ``worst``, the worst case over true counts ``max_j
(1 - P[j, j])`` (an extra LP variable ``t`` with ``1 - P[j, j] <= t``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from scipy import sparse
from scipy.optimize import linprog

from censusdp.design._errors import DesignError
from censusdp.privacy.parameters import positive_fraction
from censusdp.version import __version__

__all__ = [
    "CONSTRAINTS",
    "LOSSES",
    "LP_VARIANTS",
    "MAX_SMALL_N",
    "MechanismSummary",
    "SmallNReport",
    "SmallNRequest",
    "actual_epsilon",
    "fair_mechanism",
    "geometric_clamped",
    "geometric_conditioned",
    "mechanism_properties",
    "optimal_mechanism",
    "small_n_report",
    "small_n_sweep",
    "uniform_mechanism",
]

MAX_SMALL_N = 200
"""Largest ``n`` (the LP has ``(n + 1)^2`` variables)."""

CONSTRAINTS: tuple[str, ...] = (
    "weak_honesty",
    "symmetry",
    "column_honesty",
    "column_monotonicity",
    "fairness",
)
"""Constraint names accepted by :func:`optimal_mechanism`."""

LOSSES: tuple[str, ...] = ("wrong", "abs", "worst")
"""``wrong``: wrong-answer rate; ``abs``: expected absolute error; ``worst``: the largest
wrong-answer rate over true counts (minimax)."""

LP_VARIANTS: dict[str, tuple[str, ...]] = {
    "lp": (),
    "lp_honest_symmetric": ("weak_honesty", "symmetry"),
    "lp_all": ("weak_honesty", "symmetry", "column_honesty", "column_monotonicity"),
}
"""The LP mechanisms reported: DP only; the report's honesty and symmetry; all four
properties the report lists."""

_TOL = 1e-9


def _alpha(epsilon: Fraction) -> float:
    return math.exp(-float(epsilon))


def _check_n(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or not 1 <= n <= MAX_SMALL_N:
        raise DesignError(f"n is {n!r}; it must be an integer in 1..{MAX_SMALL_N}")
    return int(n)


def _check_epsilon(epsilon: object) -> Fraction:
    try:
        return positive_fraction(epsilon, "epsilon")
    except DesignError:
        raise
    except ValueError as exc:
        raise DesignError(str(exc)) from None


def uniform_mechanism(n: int) -> np.ndarray:
    """``P[i, j] = 1 / (n + 1)``: every epsilon, never informative."""
    n = _check_n(n)
    return np.full((n + 1, n + 1), 1.0 / (n + 1))


def geometric_clamped(n: int, epsilon: Fraction | str | float) -> np.ndarray:
    """The range-restricted geometric mechanism ``min(n, max(0, a + delta))``.

    ``P[i, j] = (1 - alpha) / (1 + alpha) alpha^|i - j|`` for ``0 < i < n``; the ends
    collect the tails, ``P[0, j] = alpha^j / (1 + alpha)`` and ``P[n, j] = alpha^(n - j) /
    (1 + alpha)`` (JASON sec. 5.2.3; Ghosh, Roughgarden & Sundararajan 2012). Clamping is
    post-processing, so it is epsilon-DP.
    """
    n = _check_n(n)
    a = _alpha(_check_epsilon(epsilon))
    i = np.arange(n + 1)
    dist = np.abs(i[:, None] - i[None, :])
    p = (1 - a) / (1 + a) * a**dist
    p[0, :] = a ** i.astype(float) / (1 + a)
    p[n, :] = a ** (n - i).astype(float) / (1 + a)
    return p


def geometric_conditioned(n: int, epsilon: Fraction | str | float) -> np.ndarray:
    """Geometric noise conditioned on the output being in ``{0..n}``:
    ``P[i, j] = alpha^|i - j| / sum_k alpha^|k - j|``.

    This is the noise redrawn until the output lands in range. The normalisers differ
    between neighbouring columns, so this is not epsilon-DP in general (up to ``2
    epsilon``): :func:`actual_epsilon` measures it. Contrast :func:`geometric_clamped`.
    """
    n = _check_n(n)
    a = _alpha(_check_epsilon(epsilon))
    i = np.arange(n + 1)
    w = a ** np.abs(i[:, None] - i[None, :]).astype(float)
    return w / w.sum(axis=0, keepdims=True)


def fair_mechanism(n: int, epsilon: Fraction | str | float) -> np.ndarray:
    """The explicitly fair mechanism of Cormode, Kulkarni & Srivastava (JASON sec. 5.2.3).

    With ``d = |i - j|`` and ``m_j = min(j, n - j)`` (the distance from the truth to the
    nearer end of the range):

        P[i, j] = y alpha^d                      if d < m_j,
        P[i, j] = y alpha^ceil((d + m_j) / 2)    otherwise,

    so probabilities fall off geometrically up to the nearer end and at half the rate
    beyond it. For even ``n`` the report's normaliser ``y = (1 - alpha) / (1 + alpha - 2
    alpha^(n/2 + 1))`` makes every column sum to 1. For odd ``n`` that expression does not
    (it is the even-``n`` formula); every column has the same unnormalised sum
    ``(1 + alpha - 2 alpha^(k + 1)) / (1 - alpha) + alpha^(k + 1)`` with ``k = (n - 1) / 2``,
    and ``y`` is its inverse. Adjacent columns differ by at most one power of ``alpha`` in
    every row, so the mechanism is epsilon-DP; it is symmetric, fair (equal diagonal),
    honest and monotone.
    """
    n = _check_n(n)
    a = _alpha(_check_epsilon(epsilon))
    i = np.arange(n + 1)
    d = np.abs(i[:, None] - i[None, :])
    m = np.minimum(i, n - i)[None, :]
    expo = np.where(d < m, d, -((-(d + m)) // 2))  # ceil((d + m) / 2) in integers
    if n % 2 == 0:
        y = (1 - a) / (1 + a - 2 * a ** (n // 2 + 1))
    else:
        k = (n - 1) // 2
        y = 1.0 / ((1 + a - 2 * a ** (k + 1)) / (1 - a) + a ** (k + 1))
    return y * a ** expo.astype(float)


def _prior(n: int, prior: np.ndarray | None) -> np.ndarray:
    if prior is None:
        return np.full(n + 1, 1.0 / (n + 1))
    pi = np.asarray(prior, dtype=float)
    if pi.shape != (n + 1,) or np.any(pi < 0) or not math.isclose(pi.sum(), 1.0, rel_tol=1e-9):
        raise DesignError(
            f"prior must be {n + 1} non-negative probabilities summing to 1; got {prior!r}"
        )
    return pi


class _LinearProgram:
    """Sparse rows of a linear program, one dict ``{variable: coefficient}`` per row."""

    def __init__(self, nvars: int) -> None:
        self.nvars = nvars
        self.ub_rows: list[dict[int, float]] = []
        self.ub_rhs: list[float] = []
        self.eq_rows: list[dict[int, float]] = []
        self.eq_rhs: list[float] = []

    def le(self, row: dict[int, float], rhs: float) -> None:
        """Add ``row . x <= rhs``."""
        self.ub_rows.append(row)
        self.ub_rhs.append(rhs)

    def eq(self, row: dict[int, float], rhs: float) -> None:
        """Add ``row . x == rhs``."""
        self.eq_rows.append(row)
        self.eq_rhs.append(rhs)

    def matrix(self, rows: list[dict[int, float]]) -> sparse.csr_matrix:
        """``rows`` as a CSR matrix with one column per variable."""
        data, cols, ptr = [], [], [0]
        for r in rows:
            cols.extend(r.keys())
            data.extend(r.values())
            ptr.append(len(cols))
        return sparse.csr_matrix((data, cols, ptr), shape=(len(rows), self.nvars))


def _add_constraints(lp: _LinearProgram, n: int, a: float, cons: set[str], loss: str) -> None:
    """Columns sum to 1, the DP ratio constraints, the loss's and the named constraints."""
    size = n + 1
    t_var = size * size

    def var(i: int, j: int) -> int:
        return i * size + j

    for j in range(size):
        lp.eq({var(i, j): 1.0 for i in range(size)}, 1.0)
    for i in range(size):
        for j in range(n):
            lp.le({var(i, j + 1): a, var(i, j): -1.0}, 0.0)
            lp.le({var(i, j): a, var(i, j + 1): -1.0}, 0.0)
    if loss == "worst":
        for j in range(size):
            lp.le({var(j, j): -1.0, t_var: -1.0}, -1.0)
    if "weak_honesty" in cons:
        for j in range(size):
            lp.le({var(j, j): -1.0}, -1.0 / size)
    if "symmetry" in cons:
        for i in range(size):
            for j in range(size):
                k, ref = var(i, j), var(n - i, n - j)
                if k < ref:
                    lp.eq({k: 1.0, ref: -1.0}, 0.0)
    if "column_honesty" in cons:
        for j in range(size):
            for i in range(size):
                if i != j:
                    lp.le({var(i, j): 1.0, var(j, j): -1.0}, 0.0)
    if "column_monotonicity" in cons:
        for j in range(size):
            for i in range(j, n):  # below the truth: P[i+1, j] <= P[i, j]
                lp.le({var(i + 1, j): 1.0, var(i, j): -1.0}, 0.0)
            for i in range(1, j + 1):  # above the truth: P[i-1, j] <= P[i, j]
                lp.le({var(i - 1, j): 1.0, var(i, j): -1.0}, 0.0)
    if "fairness" in cons:
        for j in range(1, size):
            lp.eq({var(j, j): 1.0, var(0, 0): -1.0}, 0.0)


def _objective(loss: str, pi: np.ndarray, n: int, nvars: int) -> np.ndarray:
    """Cost vector of the expected loss (``worst``: the epigraph variable ``t``)."""
    size = n + 1
    c = np.zeros(nvars)
    if loss == "wrong":
        for j in range(size):
            c[j * size + j] = -pi[j]
    elif loss == "worst":
        c[size * size] = 1.0
    else:
        for i in range(size):
            for j in range(size):
                c[i * size + j] = pi[j] * abs(i - j)
    return c


def optimal_mechanism(
    n: int,
    epsilon: Fraction | str | float,
    constraints: tuple[str, ...] = (),
    *,
    loss: str = "wrong",
    prior: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """The epsilon-DP mechanism minimising the expected loss, by linear programming.

    Variables ``P[i, j]`` (index ``i (n + 1) + j``), ``0 <= P <= 1``; constraints: columns
    sum to 1; DP ``alpha P[i, j + 1] - P[i, j] <= 0`` and ``alpha P[i, j] - P[i, j + 1] <=
    0``; plus the named ``constraints`` (see the module docstring). Objective: ``-sum_j
    pi_j P[j, j]`` (``loss="wrong"``), ``sum_ij pi_j |i - j| P[i, j]`` (``"abs"``) or ``t``
    with ``1 - P[j, j] <= t`` for every ``j`` (``"worst"``).
    Solved with HiGHS (``scipy.optimize.linprog(method="highs")``).

    Returns:
        ``(P, info)``: the mechanism and ``{"status", "objective", "loss", "constraints"}``
        where ``objective`` is the expected loss.

    Raises:
        DesignError: unknown constraint or loss, or an infeasible constraint set.
    """
    n = _check_n(n)
    eps = _check_epsilon(epsilon)
    unknown = [c for c in constraints if c not in CONSTRAINTS]
    if unknown:
        raise DesignError(f"unknown constraint {unknown[0]!r}; constraints are {list(CONSTRAINTS)}")
    if loss not in LOSSES:
        raise DesignError(f"loss is {loss!r}; it must be one of {list(LOSSES)}")
    pi = _prior(n, prior)
    a = _alpha(eps)
    size = n + 1
    nvars = size * size + (1 if loss == "worst" else 0)
    lp = _LinearProgram(nvars)
    _add_constraints(lp, n, a, set(constraints), loss)
    c = _objective(loss, pi, n, nvars)
    res = linprog(
        c,
        A_ub=lp.matrix(lp.ub_rows),
        b_ub=np.array(lp.ub_rhs),
        A_eq=lp.matrix(lp.eq_rows),
        b_eq=np.array(lp.eq_rhs),
        bounds=(0.0, 1.0),
        method="highs",
    )
    if res.status != 0:
        raise DesignError(
            f"no epsilon-DP mechanism for n = {n}, epsilon = {eps} satisfies "
            f"{sorted(constraints) or 'the DP constraints'}: {res.message}"
        )
    p = np.clip(res.x[: size * size].reshape(size, size), 0.0, 1.0)
    p /= p.sum(axis=0, keepdims=True)
    objective = float(1.0 + res.fun) if loss == "wrong" else float(res.fun)
    return p, {
        "status": "optimal",
        "solver": "HiGHS (scipy.optimize.linprog)",
        "objective": objective,
        "loss": loss,
        "constraints": sorted(set(constraints)),
    }


def actual_epsilon(p: np.ndarray) -> float:
    """``max_ij |ln P[i, j] - ln P[i, j + 1]|`` (``inf`` when one is 0 and the other not)."""
    left, right = p[:, :-1], p[:, 1:]
    both_zero = (left <= 0) & (right <= 0)
    one_zero = (left <= 0) ^ (right <= 0)
    if np.any(one_zero):
        return math.inf
    with np.errstate(divide="ignore"):
        ratio = np.abs(
            np.log(np.where(both_zero, 1.0, left)) - np.log(np.where(both_zero, 1.0, right))
        )
    return float(ratio.max()) if ratio.size else 0.0


def mechanism_properties(p: np.ndarray, tol: float = _TOL) -> dict[str, bool]:
    """Which of the report's properties ``P`` has (to tolerance ``tol``)."""
    size = p.shape[0]
    diag = np.diag(p)
    mono = True
    for j in range(size):
        col = p[:, j]
        if np.any(np.diff(col[j:]) > tol) or np.any(np.diff(col[: j + 1]) < -tol):
            mono = False
            break
    return {
        "weak_honesty": bool(np.all(diag >= 1.0 / size - tol)),
        "symmetry": bool(np.allclose(p, p[::-1, ::-1], atol=tol, rtol=0)),
        "column_honesty": bool(np.all(p <= diag[None, :] + tol)),
        "column_monotonicity": mono,
        "fairness": bool(np.ptp(diag) <= tol),
    }


@dataclass(frozen=True)
class MechanismSummary:
    """One mechanism's full output distribution and error rates.

    Attributes:
        name: mechanism name.
        description: one line.
        matrix: ``P[i, j] = Pr(output i | true j)``.
        prior: the prior on the true count used for the averages.
        info: extra facts (LP status and constraints).
    """

    name: str
    description: str
    matrix: np.ndarray
    prior: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def correct_probability(self) -> np.ndarray:
        """``P[j, j]`` for every true count ``j``."""
        return np.diag(self.matrix).copy()

    @property
    def wrong_answer_rate(self) -> float:
        """``1 - sum_j pi_j P[j, j]``."""
        return float(1.0 - self.prior @ self.correct_probability)

    @property
    def expected_abs_error(self) -> float:
        """``sum_j pi_j sum_i |i - j| P[i, j]``."""
        i = np.arange(self.matrix.shape[0])
        dist = np.abs(i[:, None] - i[None, :])
        return float(((dist * self.matrix).sum(axis=0)) @ self.prior)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (``distribution[j][i] = Pr(output i | true j)``)."""
        eps = actual_epsilon(self.matrix)
        return {
            "description": self.description,
            "wrong_answer_rate": self.wrong_answer_rate,
            "worst_case_wrong_answer_rate": float(1.0 - self.correct_probability.min()),
            "expected_abs_error": self.expected_abs_error,
            "correct_probability": self.correct_probability.tolist(),
            "actual_epsilon": eps if math.isfinite(eps) else None,
            "properties": mechanism_properties(self.matrix),
            "distribution": self.matrix.T.tolist(),
            **self.info,
        }


@dataclass(frozen=True)
class SmallNRequest:
    """What ``censusdp design small-n`` computes (validated on construction).

    Attributes:
        n: the count lies in ``{0..n}``.
        epsilon: the pure-DP budget (exact rational).
        loss: what the LP mechanisms minimise (:data:`LOSSES`).
    """

    n: int
    epsilon: Fraction | str | float | int
    loss: str = "wrong"

    def __post_init__(self) -> None:
        _check_n(self.n)
        object.__setattr__(self, "epsilon", _check_epsilon(self.epsilon))
        if self.loss not in LOSSES:
            raise DesignError(f"loss is {self.loss!r}; it must be one of {list(LOSSES)}")


def _with_guarantee(entry: dict[str, Any], epsilon: Fraction) -> dict[str, Any]:
    """``entry`` with ``epsilon_dp``: its measured epsilon is within ``epsilon``."""
    eps = entry["actual_epsilon"]
    ok = eps is not None and eps <= float(epsilon) * (1 + 1e-9) + 1e-12
    return {**entry, "epsilon_dp": ok}


@dataclass(frozen=True)
class SmallNReport:
    """Every mechanism for one ``(n, epsilon)``."""

    request: SmallNRequest
    mechanisms: tuple[MechanismSummary, ...]

    def get(self, name: str) -> MechanismSummary:
        """The mechanism called ``name``."""
        for m in self.mechanisms:
            if m.name == name:
                return m
        raise DesignError(f"no mechanism {name!r}; have {[m.name for m in self.mechanisms]}")

    def to_dict(self) -> dict[str, Any]:
        """The JSON object printed by ``censusdp design small-n --json``."""
        r = self.request
        eps = Fraction(r.epsilon)
        return {
            "n": r.n,
            "epsilon": str(eps),
            "epsilon_float": float(eps),
            "alpha": _alpha(eps),
            "prior": "uniform",
            "loss": r.loss,
            "geometric_weak_honesty_threshold": 2 * _alpha(eps) / (1 - _alpha(eps)),
            "distribution_layout": "distribution[j][i] = Pr(output i | true count j)",
            "mechanisms": {m.name: _with_guarantee(m.to_dict(), eps) for m in self.mechanisms},
            "package_version": __version__,
        }

    def format(self) -> str:
        """A table of the error rates."""
        r = self.request
        lines = [
            f"count in 0..{r.n}, epsilon = {r.epsilon} (alpha = {_alpha(Fraction(r.epsilon)):.4f}), "
            "uniform prior",
            f"{'mechanism':<22} {'wrong rate':>10} {'worst':>7} {'E|err|':>7} {'eps':>7} "
            f"{'DP':>3}  properties",
        ]
        for m in self.mechanisms:
            d = _with_guarantee(m.to_dict(), Fraction(r.epsilon))
            props = ",".join(k for k, v in d["properties"].items() if v) or "-"
            eps = "inf" if d["actual_epsilon"] is None else f"{d['actual_epsilon']:.4f}"
            lines.append(
                f"{m.name:<22} {d['wrong_answer_rate']:>10.4f} "
                f"{d['worst_case_wrong_answer_rate']:>7.4f} {d['expected_abs_error']:>7.4f} "
                f"{eps:>7} {'yes' if d['epsilon_dp'] else 'no':>3}  {props}"
            )
        return "\n".join(lines)


def small_n_report(request: SmallNRequest) -> SmallNReport:
    """Uniform, geometric (clamped and conditioned), fair and LP-optimal mechanisms."""
    n, eps = request.n, Fraction(request.epsilon)
    prior = _prior(n, None)
    mechs = [
        MechanismSummary("uniform", "every output equally likely", uniform_mechanism(n), prior),
        MechanismSummary(
            "geometric_clamped",
            "range-restricted geometric: min(n, max(0, a + geometric noise)), epsilon-DP "
            "(clamping is post-processing)",
            geometric_clamped(n, eps),
            prior,
        ),
        MechanismSummary(
            "geometric_conditioned",
            "geometric noise conditioned on landing in 0..n (redrawn until it does): not "
            "epsilon-DP in general, up to 2 epsilon",
            geometric_conditioned(n, eps),
            prior,
        ),
        MechanismSummary(
            "fair", "explicitly fair mechanism (Cormode et al.)", fair_mechanism(n, eps), prior
        ),
    ]
    for name, cons in LP_VARIANTS.items():
        p, info = optimal_mechanism(n, eps, cons, loss=request.loss)
        desc = "LP-optimal epsilon-DP" + (f" with {', '.join(cons)}" if cons else "")
        mechs.append(MechanismSummary(name, desc, p, prior, {"lp": info}))
    return SmallNReport(request, tuple(mechs))


def small_n_sweep(
    ns: tuple[int, ...], epsilons: tuple[Fraction | str | float, ...], *, loss: str = "wrong"
) -> list[dict[str, Any]]:
    """Wrong-answer rate, worst case and expected |error| of every mechanism, for every
    ``(n, epsilon)``: one row per (n, epsilon, mechanism)."""
    rows = []
    for eps in epsilons:
        for n in ns:
            report = small_n_report(SmallNRequest(n, eps, loss=loss))
            for m in report.mechanisms:
                d = m.to_dict()
                rows.append(
                    {
                        "n": n,
                        "epsilon": str(Fraction(report.request.epsilon)),
                        "mechanism": m.name,
                        "wrong_answer_rate": d["wrong_answer_rate"],
                        "worst_case_wrong_answer_rate": d["worst_case_wrong_answer_rate"],
                        "expected_abs_error": d["expected_abs_error"],
                        "actual_epsilon": d["actual_epsilon"],
                    }
                )
    return rows
