"""Every conversion against an independent 400-bit reference, and every error path.

The reference minimisers below do not share code with :mod:`censusdp.privacy.accounting`: they
find the optimal Renyi order by bisection on the *derivative* of the objective (the
library uses a golden-section search on the objective), at twice the library's precision.

Conversions are checked for the documented conservative direction and for tightness:
an ``epsilon`` or ``delta`` returned as the float ``r`` must satisfy
``nextafter(r, -inf) < exact <= r`` (the smallest float that is not below the exact
value), which fails both when rounding stops going up and when it overshoots.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import mpmath
import pytest

from censusdp.errors import BudgetError
from censusdp.privacy import accounting
from censusdp.privacy.parameters import as_fraction

RHO_2020 = Fraction(542, 339) ** 2
REF_BITS = 400


def _mp(x: object) -> mpmath.mpf:
    f = as_fraction(x, "x")
    return mpmath.mpf(f.numerator) / f.denominator


def _bisect(increasing, lo: float = -40.0, hi: float = 40.0, steps: int = 300) -> mpmath.mpf:
    """The root of an increasing function of ``u = log(alpha - 1)``."""
    lo, hi = mpmath.mpf(lo), mpmath.mpf(hi)
    for _ in range(steps):
        mid = (lo + hi) / 2
        if increasing(mid) < 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@functools.cache
def exact_epsilon(rho: object, delta: object) -> tuple[mpmath.mpf, mpmath.mpf]:
    """CKS 2020 Cor. 13 at its optimal order: ``(epsilon, alpha)``.

    ``g(a) = a rho + log(1 - 1/a) - (log a + log delta) / (a - 1)`` has
    ``g'(a) = rho + 1 / (a (a - 1)) - ((a - 1)/a - log a - log delta) / (a - 1)^2``.
    """
    with mpmath.workprec(REF_BITS):
        r, ld = _mp(rho), mpmath.log(_mp(delta))

        def slope(u):
            a = 1 + mpmath.exp(u)
            return r + 1 / (a * (a - 1)) - ((a - 1) / a - mpmath.log(a) - ld) / (a - 1) ** 2

        a = 1 + mpmath.exp(_bisect(slope))
        return a * r + mpmath.log(1 - 1 / a) - (mpmath.log(a) + ld) / (a - 1), a


@functools.cache
def exact_delta(rho: object, epsilon: object) -> tuple[mpmath.mpf, mpmath.mpf]:
    """CKS 2020 Cor. 13 solved for delta: ``(delta, alpha)``.

    ``log delta(a) = (a - 1)(a rho - eps) - log a + (a - 1) log(1 - 1/a)`` has derivative
    ``(2a - 1) rho - eps + log(1 - 1/a)``, increasing in ``a``.
    """
    with mpmath.workprec(REF_BITS):
        r, e = _mp(rho), _mp(epsilon)

        def slope(u):
            a = 1 + mpmath.exp(u)
            return (2 * a - 1) * r - e + mpmath.log(1 - 1 / a)

        a = 1 + mpmath.exp(_bisect(slope))
        log_d = (a - 1) * (a * r - e) - mpmath.log(a) + (a - 1) * mpmath.log(1 - 1 / a)
        return mpmath.exp(log_d), a


def assert_rounded_up(got: float, exact: mpmath.mpf) -> None:
    """``got`` is the smallest float >= ``exact``."""
    with mpmath.workprec(REF_BITS):
        assert mpmath.mpf(got) >= exact, (got, mpmath.nstr(exact, 30))
        assert mpmath.mpf(math.nextafter(got, -math.inf)) < exact, (got, mpmath.nstr(exact, 30))


def rounds_down_to_nearest(exact: mpmath.mpf) -> bool:
    """True when round-to-nearest would give a float below ``exact`` (rounding matters)."""
    with mpmath.workprec(REF_BITS):
        return mpmath.mpf(float(exact)) < exact


# (rho, delta): the published 2020 values, tiny and huge rho (the search bracket's ends),
# and large deltas where the optimal order is close to 1
EPSILON_CASES = [
    (RHO_2020, "1e-10"),
    ("2.56", "1e-10"),
    ("1/2", "1e-10"),
    ("1e-12", "1e-10"),
    ("1e-4", "1e-10"),
    ("0.0991", "1e-5"),
    ("40", "1e-15"),
    ("3e11", "1e-10"),
    ("10", "1e-3"),
]


@pytest.mark.parametrize(("rho", "delta"), EPSILON_CASES, ids=str)
def test_epsilon_from_rho_is_the_exact_optimum_rounded_up(rho, delta) -> None:
    exact, _ = exact_epsilon(rho, delta)
    assert_rounded_up(accounting.epsilon_from_rho(rho, delta), exact)


def test_epsilon_cases_include_values_that_round_to_nearest_downwards() -> None:
    """Without such cases, a conversion that stopped rounding up would still pass."""
    down = [c for c in EPSILON_CASES if rounds_down_to_nearest(exact_epsilon(*c)[0])]
    up = [c for c in EPSILON_CASES if not rounds_down_to_nearest(exact_epsilon(*c)[0])]
    assert len(down) >= 3 and len(up) >= 3


def test_optimal_order_spans_the_search_bracket() -> None:
    """Cases near both ends of the library's bracket: alpha - 1 from ~1e-5 to ~3e6."""
    alphas = [exact_epsilon(*c)[1] for c in EPSILON_CASES]
    assert min(alphas) - 1 < 1e-5
    assert max(alphas) > 1e6


def test_negative_epsilon_is_clipped_to_zero() -> None:
    """For a tiny rho at a large delta the CKS bound is negative: (0, delta)-DP."""
    exact, _ = exact_epsilon("1e-9", "0.99")
    assert exact < -4
    assert accounting.epsilon_from_rho("1e-9", "0.99") == 0.0


# (rho, epsilon): optimal orders below 2 (alpha >= 2 would be a loose bound), at
# epsilon = 0, at the 2020 production point
DELTA_CASES = [
    (1, 1),
    ("1/2", 0),
    (10, 0),
    (RHO_2020, "17.14"),
    ("0.01", "1/2"),
    ("2.56", 3),
]


@pytest.mark.parametrize(("rho", "epsilon"), DELTA_CASES, ids=str)
def test_delta_for_epsilon_is_the_exact_optimum_rounded_up(rho, epsilon) -> None:
    exact, _ = exact_delta(rho, epsilon)
    assert 0 < exact < 1
    assert_rounded_up(accounting.delta_for_epsilon(rho, epsilon), exact)


def test_delta_cases_need_orders_below_two_and_round_both_ways() -> None:
    res = [exact_delta(*c) for c in DELTA_CASES]
    assert sum(a < 2 for _, a in res) >= 3
    assert sum(rounds_down_to_nearest(d) for d, _ in res) >= 2
    assert sum(not rounds_down_to_nearest(d) for d, _ in res) >= 2


def test_delta_is_capped_at_one() -> None:
    """rho = 100 at epsilon 0: the bound exceeds 1 over the whole search range (the
    infimum, 1 - O(e^-99), needs alpha - 1 < e^-99): delta is 1, not more."""
    assert accounting.delta_for_epsilon(100, 0) == 1.0


def test_delta_at_epsilon_zero_is_below_one() -> None:
    """At epsilon 0 the optimum is strictly inside (0, 1): 0.5588... for rho = 1/2."""
    got = accounting.delta_for_epsilon("1/2", 0)
    assert got == pytest.approx(0.5588356393474346, rel=1e-15)


@pytest.mark.parametrize("rho", ["1/2", "2", "1e-6", RHO_2020, "98"], ids=str)
def test_implied_epsilon_is_sqrt_two_rho_rounded_up(rho) -> None:
    with mpmath.workprec(REF_BITS):
        exact = mpmath.sqrt(2 * _mp(rho))
    assert_rounded_up(accounting.implied_epsilon(rho), exact)


def test_implied_epsilon_of_exact_squares_is_exact() -> None:
    """sqrt(2 rho) representable: the float itself, not the next one up."""
    assert accounting.implied_epsilon(2) == 2.0
    assert accounting.implied_epsilon("9/8") == 1.5
    assert accounting.implied_epsilon(50) == 10.0


@pytest.mark.parametrize(("rho", "delta"), [("0.5", "1e-10"), (RHO_2020, "1e-6"), (3, "0.25")])
def test_simple_bound_is_rounded_up(rho, delta) -> None:
    """Bun & Steinke 2016, Prop. 1.3: ``rho + 2 sqrt(rho log(1/delta))``."""
    with mpmath.workprec(REF_BITS):
        r = _mp(rho)
        exact = r + 2 * mpmath.sqrt(r * mpmath.log(1 / _mp(delta)))
    assert_rounded_up(accounting.epsilon_from_rho_simple(rho, delta), exact)


@pytest.mark.parametrize("epsilon", [0.0, 1.0, 2.0, 17.14])
def test_sampling_delta_is_exact_and_rounded_up(epsilon: float) -> None:
    """``(1 + e^epsilon) * sum(eta_i)`` with the bounds summed as exact rationals."""
    tvs = [Fraction(1, 2**100), Fraction(3, 2**101), Fraction(1, 2**100)]
    with mpmath.workprec(REF_BITS):
        exact = (1 + mpmath.exp(mpmath.mpf(epsilon))) * mpmath.mpf(7) / mpmath.mpf(2) ** 101
    assert_rounded_up(accounting.sampling_delta(epsilon, tvs), exact)


def test_sampling_delta_of_nothing_is_zero() -> None:
    assert accounting.sampling_delta(3.0, []) == 0.0


def test_round_up_direction() -> None:
    """The private rounding helper: up when the float is below, unchanged when equal."""
    with mpmath.workprec(200):
        third = mpmath.mpf(1) / 3
        assert float(third) < third  # round-to-nearest goes down here
        assert accounting._round_up(third) == math.nextafter(float(third), math.inf)
        tenth = mpmath.mpf(1) / 10
        assert float(tenth) > tenth  # and up here: already the answer
        assert accounting._round_up(tenth) == 0.1
        assert accounting._round_up(mpmath.mpf("0.5")) == 0.5


# -- rho_from_epsilon ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("epsilon", "delta", "m"),
    [("1", "1e-10", 10**12), ("1/2", "1e-6", 10**6), ("17.14", "1e-10", 10**6)],
)
def test_rho_from_epsilon_is_the_largest_grid_point_within_the_target(epsilon, delta, m) -> None:
    r = accounting.rho_from_epsilon(epsilon, delta, max_denominator=m)
    assert r.denominator <= m and (r * m).denominator == 1
    assert accounting.epsilon_from_rho(r, delta) <= float(Fraction(epsilon))
    # the next grid point is over the target, by the independent reference too
    assert accounting.epsilon_from_rho(r + Fraction(1, m), delta) > float(Fraction(epsilon))
    exact, _ = exact_epsilon(r + Fraction(1, m), delta)
    assert exact > _mp(epsilon)


def test_rho_from_epsilon_steps_up_to_the_largest_grid_point(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A boundary just above a grid point: the bisection's bracket (1/4000 wide) may end
    below it; the result is still the largest k/1000 that meets the target (the 1/3 +
    1/5000 boundary makes that 333/1000)."""
    target = Fraction(2)
    edge = Fraction(1, 3) + Fraction(1, 5000)
    monkeypatch.setattr(
        accounting,
        "epsilon_from_rho",
        lambda r, d: float(target) if r <= edge else float(target + 1),
    )
    assert accounting.rho_from_epsilon(target, "1e-10", max_denominator=1000) == Fraction(333, 1000)
    edge = Fraction(334, 1000) + Fraction(1, 10**7)
    assert accounting.rho_from_epsilon(target, "1e-10", max_denominator=1000) == Fraction(334, 1000)


def test_rho_from_epsilon_bisects_a_step_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """With a (fake) conversion that reaches the target exactly up to rho = 1/3, the
    result is the largest k/1000 <= 1/3; ties (epsilon equal to the target) are accepted."""
    target = Fraction(2)
    monkeypatch.setattr(
        accounting,
        "epsilon_from_rho",
        lambda r, d: float(target) if r <= Fraction(1, 3) else float(target + 1),
    )
    assert accounting.rho_from_epsilon(target, "1e-10", max_denominator=1000) == Fraction(333, 1000)


def test_safety_loop_steps_down_past_candidates_over_the_target(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """If the conversion reports a candidate over the target, the next grid point down is
    tried, one step of 1/max_denominator at a time."""
    m = 10**6
    r0 = accounting.rho_from_epsilon(1, "1e-10", max_denominator=m)
    real = accounting.epsilon_from_rho
    over = {r0, r0 - Fraction(1, m)}
    monkeypatch.setattr(
        accounting, "epsilon_from_rho", lambda r, d: 5.0 if r in over else real(r, d)
    )
    assert accounting.rho_from_epsilon(1, "1e-10", max_denominator=m) == r0 - Fraction(2, m)
    monkeypatch.setattr(accounting, "epsilon_from_rho", lambda r, d: 5.0 if r == r0 else real(r, d))
    assert accounting.rho_from_epsilon(1, "1e-10", max_denominator=m) == r0 - Fraction(1, m)
    # a candidate exactly at the target is kept
    monkeypatch.setattr(accounting, "epsilon_from_rho", lambda r, d: 1.0 if r == r0 else real(r, d))
    assert accounting.rho_from_epsilon(1, "1e-10", max_denominator=m) == r0


def test_safety_loop_stops_at_zero_with_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = accounting.epsilon_from_rho
    r0 = accounting.rho_from_epsilon(1, "1e-10", max_denominator=100)
    assert r0 == Fraction(1, 100)
    monkeypatch.setattr(accounting, "epsilon_from_rho", lambda r, d: 5.0 if r == r0 else real(r, d))
    with pytest.raises(
        BudgetError, match=r"^epsilon 1 is too small to reach at delta 1/10000000000$"
    ):
        accounting.rho_from_epsilon(1, "1e-10", max_denominator=100)


@pytest.mark.parametrize(
    ("epsilon", "max_denominator", "message"),
    [
        # the needed rho (~1e-14) is below the grid's resolution
        ("1e-6", 10**12, "epsilon 1/1000000 is too small to reach at delta 1/10000000000"),
        # the bisection finds rho ~ 0.05 > 1/40, but the largest grid point below is 0
        ("2", 10, "epsilon 2 is too small to reach at delta 1/10000000000"),
        ("1", 10, "epsilon 1 is too small to reach at delta 1/10000000000"),
    ],
)
def test_epsilon_too_small(epsilon, max_denominator, message) -> None:
    with pytest.raises(BudgetError, match=f"^{message}$"):
        accounting.rho_from_epsilon(epsilon, "1e-10", max_denominator=max_denominator)


# -- composition and error messages -------------------------------------------------------


def test_compose_is_exact_and_accepts_zero() -> None:
    assert accounting.compose([0, "1/3", Fraction(1, 6), 0.5]) == 1
    assert accounting.compose([]) == 0
    assert accounting.compose([Fraction(0)]) == 0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: accounting.epsilon_from_rho(1, "x"), "delta must be a number"),
        (lambda: accounting.epsilon_from_rho_simple("x", "1e-10"), "rho must be a number"),
        (lambda: accounting.epsilon_from_rho_simple(1, 2), "delta is 2; it must satisfy"),
        (lambda: accounting.implied_epsilon("x"), "rho must be a number"),
        (lambda: accounting.implied_epsilon(0), "rho is 0; it must be positive"),
        (lambda: accounting.delta_for_epsilon("x", 1), "rho must be a number"),
        (lambda: accounting.delta_for_epsilon(0, 1), "rho is 0; it must be positive"),
        (lambda: accounting.delta_for_epsilon(1, "x"), "epsilon must be a number"),
        (lambda: accounting.rho_from_epsilon("x", "1e-10"), "epsilon must be a number"),
        (lambda: accounting.rho_from_epsilon(0, "1e-10"), "epsilon is 0; it must be positive"),
        (lambda: accounting.rho_from_epsilon(1, 0), "delta is 0; it must satisfy 0 < delta < 1"),
        (lambda: accounting.compose([1, "x"]), r"amounts\[1\] must be a number"),
        (lambda: accounting.compose([1, "-1/2"]), r"amounts\[1\] is -1/2; privacy losses"),
        (lambda: accounting.rho_from_pure_epsilon("x"), "epsilon must be a number"),
        # a value a float cannot hold (the CLI's --rho 1e309 was an OverflowError)
        (lambda: accounting.implied_epsilon("1e309"), r"rho must be finite \(at most"),
        (lambda: accounting.implied_epsilon(10**400), r"rho must be finite \(at most"),
        (lambda: accounting.implied_epsilon("1e-400"), "rho is too close to 0"),
        (lambda: accounting.rho_from_epsilon("-1e309", "1e-10"), "epsilon must be finite"),
        # the bisection's bracket grows with epsilon: above MAX_EPSILON it was endless
        (lambda: accounting.rho_from_epsilon("1e30", "1e-10"), r"epsilon 1e\+30 is above 1e\+09"),
    ],
)
def test_errors_name_the_parameter(call, message: str) -> None:
    with pytest.raises(BudgetError, match=f"^{message}"):
        call()
