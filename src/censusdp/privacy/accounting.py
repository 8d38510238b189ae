"""Privacy accounting: exact budgets, composition and conversions.

Privacy parameters stay exact ``Fraction`` objects until a conversion needs a real
function (``exp``, ``log``, ``sqrt``); those are evaluated with mpmath at 200 bits
and rounded in the conservative direction (an ``epsilon`` or ``delta`` is rounded
*up*, a ``rho`` derived from an ``epsilon`` target is rounded *down*).

Conversions (sources):

* ``rho -> (epsilon, delta)``: Canonne, Kamath & Steinke (2020), Corollary 13,
  equivalently Kazan & Reiter (2022) eq. (7) (Kazan & Reiter, Theorem 3)::

      epsilon(rho, delta) = inf_{alpha > 1} [ alpha rho + log(1 - 1/alpha)
                                              - log(alpha delta) / (alpha - 1) ]

  Any ``alpha > 1`` gives a valid ``epsilon``; we minimise over ``alpha`` and report
  the value at the minimiser, rounded up.
* the simpler bound ``epsilon = rho + 2 sqrt(rho log(1/delta))`` (Bun & Steinke
  2016, Prop. 1.3), for comparison;
* ``epsilon -> rho = epsilon^2 / 2`` (Bun & Steinke 2016, Prop. 1.4; Kazan & Reiter (2022),
  Theorem 2), and the *implied* ``epsilon = sqrt(2 rho)`` (Kazan & Reiter (2022) sec. 2.1);
* zCDP and pure DP compose additively (Bun & Steinke 2016, Lemma 2.3; Dwork et al.).

Sampling error: the release samplers are within total variation ``eta`` of the exact
distributions (see :mod:`censusdp.privacy.mechanisms._table`). If one person can change at
most ``m`` measurements, the ideal mechanism is ``(epsilon, delta)``-DP and each
changed measurement is sampled within TV ``eta_i``, the real mechanism is
``(epsilon, delta + (1 + e^epsilon) sum_i eta_i)``-DP: unchanged measurements have the
same distribution under both neighbours, and for any event ``S``,
``Q(S) <= P(S) + H <= e^eps P'(S) + delta + H <= e^eps (Q'(S) + H) + delta + H``
with ``H = sum_i eta_i`` (a coupling of the changed coordinates).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import mpmath

from censusdp.errors import BudgetError
from censusdp.privacy.parameters import as_fraction, positive_fraction

__all__ = [
    "MAX_EPSILON",
    "compose",
    "delta_for_epsilon",
    "epsilon_from_rho",
    "epsilon_from_rho_simple",
    "implied_epsilon",
    "rho_from_epsilon",
    "rho_from_pure_epsilon",
    "sampling_delta",
]

_PREC = 200

MAX_EPSILON = 10**9
"""The largest epsilon :func:`rho_from_epsilon` converts (in about 3 s; the bisection
grows with log(epsilon), and such an epsilon protects nobody)."""


def _check_delta(delta: object) -> Fraction:
    d = as_fraction(delta, "delta")
    if not 0 < d < 1:
        raise BudgetError(f"delta is {d}; it must satisfy 0 < delta < 1")
    return d


def _mp(x: Fraction) -> mpmath.mpf:
    return mpmath.mpf(x.numerator) / x.denominator


def _round_up(x: mpmath.mpf) -> float:
    """The smallest float >= x (x computed at 200 bits, so nextafter covers the error)."""
    f = float(x)
    return math.nextafter(f, math.inf) if f < x else f


def _eps_at_alpha(alpha: mpmath.mpf, rho: mpmath.mpf, log_delta: mpmath.mpf) -> mpmath.mpf:
    return alpha * rho + mpmath.log1p(-1 / alpha) - (mpmath.log(alpha) + log_delta) / (alpha - 1)


def _minimise_alpha(rho: mpmath.mpf, log_delta: mpmath.mpf) -> mpmath.mpf:
    """Golden-section search of the (unimodal) objective over ``log(alpha - 1)``; its minimum."""

    def f(u: mpmath.mpf) -> mpmath.mpf:
        return _eps_at_alpha(1 + mpmath.exp(u), rho, log_delta)

    # bracket: the minimiser is near alpha ~ 1 + sqrt(log(1/delta) / rho)
    guess = mpmath.log(mpmath.sqrt(-log_delta / rho) + 1)
    lo, hi = guess - 12, guess + 12
    invphi = (mpmath.sqrt(5) - 1) / 2
    a, b = lo, hi
    c = b - invphi * (b - a)
    d = a + invphi * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(130):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - invphi * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + invphi * (b - a)
            fd = f(d)
    return f((a + b) / 2)


def epsilon_from_rho(rho: object, delta: object) -> float:
    """``epsilon`` such that ``rho``-zCDP implies ``(epsilon, delta)``-DP.

    Formula: CKS 2020 Corollary 13 / Kazan & Reiter (2022) eq. (7),
    ``inf_{alpha>1} [alpha rho + log(1 - 1/alpha) - log(alpha delta) / (alpha - 1)]``,
    clipped below at 0 and rounded up.

    Examples (Kazan & Reiter (2022) sec. 2.1): ``rho = (542/339)^2`` gives 17.14 and ``rho = 2.56``
    gives 17.158 at ``delta = 1e-10``; ``rho = 1/2`` gives 6.839.
    """
    return _epsilon_from_rho(positive_fraction(rho, "rho"), _check_delta(delta))


@functools.lru_cache(maxsize=4096)
def _epsilon_from_rho(r: Fraction, d: Fraction) -> float:
    """:func:`epsilon_from_rho` of exact values, remembered: a release's manifest states
    it and ``censusdp validate`` recomputes it (the run's self-check: in the same process)."""
    with mpmath.workprec(_PREC):
        eps = _minimise_alpha(_mp(r), mpmath.log(_mp(d)))
        return max(0.0, _round_up(eps))


def delta_for_epsilon(rho: object, epsilon: object) -> float:
    """Smallest ``delta`` with ``rho``-zCDP => ``(epsilon, delta)``-DP (CKS Corollary 13).

    ``delta = inf_{alpha>1} exp((alpha-1)(alpha rho - epsilon)) / alpha * (1 - 1/alpha)^(alpha-1)``,
    rounded up and capped at 1.
    """
    r = positive_fraction(rho, "rho")
    e = as_fraction(epsilon, "epsilon")
    if e < 0:
        raise BudgetError(f"epsilon is {e}; it must be >= 0")
    with mpmath.workprec(_PREC):
        rr, ee = _mp(r), _mp(e)

        def log_delta(u: mpmath.mpf) -> mpmath.mpf:
            a = 1 + mpmath.exp(u)
            return (a - 1) * (a * rr - ee) - mpmath.log(a) + (a - 1) * mpmath.log1p(-1 / a)

        lo, hi = mpmath.mpf(-30), mpmath.mpf(30)
        invphi = (mpmath.sqrt(5) - 1) / 2
        for _ in range(130):
            c = hi - invphi * (hi - lo)
            dd = lo + invphi * (hi - lo)
            if log_delta(c) < log_delta(dd):
                hi = dd
            else:
                lo = c
        best = log_delta((lo + hi) / 2)
        return min(1.0, _round_up(mpmath.exp(best)))


def epsilon_from_rho_simple(rho: object, delta: object) -> float:
    """The simple bound ``rho + 2 sqrt(rho log(1/delta))`` (Bun & Steinke 2016, Prop. 1.3)."""
    r = positive_fraction(rho, "rho")
    d = _check_delta(delta)
    with mpmath.workprec(_PREC):
        rr = _mp(r)
        return _round_up(rr + 2 * mpmath.sqrt(rr * mpmath.log(1 / _mp(d))))


def rho_from_pure_epsilon(epsilon: object) -> Fraction:
    """``rho = epsilon^2 / 2``: pure ``epsilon``-DP implies ``rho``-zCDP (Kazan & Reiter (2022) Thm. 2)."""
    e = positive_fraction(epsilon, "epsilon")
    return e * e / 2


def implied_epsilon(rho: object) -> float:
    """The *implied* epsilon ``sqrt(2 rho)`` (Kazan & Reiter (2022) sec. 2.1; 2.26 for rho = 2.56)."""
    r = positive_fraction(rho, "rho")
    with mpmath.workprec(_PREC):
        return _round_up(mpmath.sqrt(2 * _mp(r)))


def rho_from_epsilon(epsilon: object, delta: object, *, max_denominator: int = 10**12) -> Fraction:
    """The largest multiple of ``1/max_denominator`` with ``epsilon_from_rho <= epsilon``.

    Used to turn a target ``(epsilon, delta)`` into a zCDP budget; the result is
    rounded down so the guarantee is never weaker than asked for. A bisection brackets
    the boundary to ``1/(4 max_denominator)``; the grid point below it is then moved up
    while the next one still meets the target, and down while it does not.
    """
    e = positive_fraction(epsilon, "epsilon")
    if e > MAX_EPSILON:
        raise BudgetError(
            f"epsilon {float(e):g} is above {MAX_EPSILON:g}, where zCDP's conversion is not "
            "computed (such an epsilon protects nobody): give rho instead"
        )
    d = _check_delta(delta)
    lo, hi = Fraction(0), e * e  # epsilon_from_rho(e^2) > e for any delta < 1
    # halvings until the bracket is 1/(4 max_denominator) wide (the step loops below
    # rely on it: a wider bracket leaves them stepping 1/max_denominator at a time)
    for _ in range(max(200, math.ceil(math.log2(hi * 4 * max_denominator)) + 2)):
        mid = (lo + hi) / 2
        if epsilon_from_rho(mid, d) <= e:
            lo = mid
        else:
            hi = mid
        if hi - lo < Fraction(1, 4 * max_denominator):
            break
    step = Fraction(1, max_denominator)
    out = Fraction(math.floor(lo * max_denominator), max_denominator)
    while epsilon_from_rho(out + step, d) <= e:
        out += step
    while out > 0 and epsilon_from_rho(out, d) > e:
        out -= Fraction(1, max_denominator)
    if out <= 0:
        raise BudgetError(f"epsilon {e} is too small to reach at delta {d}")
    return out


def compose(amounts: list[Fraction] | tuple[Fraction, ...]) -> Fraction:
    """Sequential composition: rho (zCDP) and epsilon (pure DP) both add up exactly."""
    total = Fraction(0)
    for i, a in enumerate(amounts):
        x = as_fraction(a, f"amounts[{i}]")
        if x < 0:
            raise BudgetError(f"amounts[{i}] is {x}; privacy losses must be >= 0")
        total += x
    return total


def sampling_delta(epsilon: float, tv_bounds: list[Fraction] | tuple[Fraction, ...]) -> float:
    """Extra ``delta`` from inexact sampling: ``(1 + e^epsilon) * sum(tv_bounds)``.

    Args:
        epsilon: the ideal mechanism's epsilon (at the reported delta).
        tv_bounds: the TV bound of each measurement one person can change (a
            sensitivity-2 query counts twice).
    """
    h = sum((Fraction(t) for t in tv_bounds), Fraction(0))
    with mpmath.workprec(_PREC):
        # a probability: a bound above 1 says nothing more than 1 does
        return min(1.0, _round_up((1 + mpmath.exp(mpmath.mpf(epsilon))) * _mp(h)))
