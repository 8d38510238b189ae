"""The numbers behind the exact samplers, each against an independent mpmath computation.

Tail bounds, truncation points, normalisers, variances, the quantised weights and the
total-variation bound of the alias tables are recomputed here from their definitions
(docstring of ``censusdp.privacy.mechanisms._table``; Canonne, Kamath & Steinke 2020 for the
discrete Gaussian; Ghosh, Roughgarden & Sundararajan 2012 for the two-sided geometric),
at 400 bits, and compared exactly or to within float rounding.
"""

from __future__ import annotations

import math
import numbers
import pickle
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from censusdp.errors import BudgetError, CensusDPError, InternalError
from censusdp.privacy.mechanisms import DiscreteGaussian, Geometric, _discrete, _table
from censusdp.privacy.mechanisms._base import integer_values
from censusdp.privacy.mechanisms._table import (
    CHUNK,
    TV_LIMIT,
    build_symmetric_table,
    mpf_to_fraction,
)
from censusdp.privacy.parameters import as_fraction
from censusdp.privacy.randomness import RandomSource

BITS = 400
TAIL_LIMIT = mpmath.mpf(2) ** -131  # the truncation target 2**-(TAIL_BITS + 1)


def _mp(x: Fraction) -> mpmath.mpf:
    return mpmath.mpf(x.numerator) / x.denominator


def _frac(x: Fraction) -> mpmath.mpf:
    with mpmath.workprec(BITS):
        return mpmath.mpf(x.numerator) / x.denominator


def dg_terms(sigma2: Fraction, lo: int, hi: int) -> mpmath.mpf:
    """``sum_{lo <= k <= hi} exp(-k^2 / (2 sigma^2))`` term by term."""
    s = _mp(sigma2)
    return mpmath.fsum(mpmath.exp(-mpmath.mpf(k * k) / (2 * s)) for k in range(lo, hi + 1))


def dg_tail(sigma2: Fraction, t: int) -> mpmath.mpf:
    """Exact ``sum_{k > t} exp(-k^2 / (2 sigma^2))`` (terms until they vanish at 400 bits)."""
    s = _mp(sigma2)
    out, k = mpmath.mpf(0), t + 1
    while True:
        term = mpmath.exp(-mpmath.mpf(k * k) / (2 * s))
        out += term
        if term < out * mpmath.mpf(2) ** -(BITS + 10):
            return out
        k += 1


def dg_normaliser(sigma2: Fraction) -> mpmath.mpf:
    """``Z = sum_k exp(-k^2 / (2 sigma^2))`` via the Jacobi theta function."""
    return mpmath.jtheta(3, 0, mpmath.exp(-1 / (2 * _mp(sigma2))))


# -- discrete Gaussian ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sigma2", "t"),
    [(Fraction(1), 5), (Fraction(7, 3), 12), (Fraction(400), 150), (Fraction(50), 60)],
)
def test_gauss_tail_bound_is_an_upper_bound_and_tight(sigma2: Fraction, t: int) -> None:
    """``f(T+1) / (1 - f(T+2)/f(T+1))`` bounds the exact tail from above, within 10%."""
    with mpmath.workprec(BITS):
        exact = dg_tail(sigma2, t)
        bound = _discrete._gauss_tail(_mp(sigma2), t)
        assert exact <= bound <= exact * mpmath.mpf("1.1")
        s = _mp(sigma2)
        f1 = mpmath.exp(-mpmath.mpf((t + 1) ** 2) / (2 * s))
        f2 = mpmath.exp(-mpmath.mpf((t + 2) ** 2) / (2 * s))
        assert abs(bound - f1 / (1 - f2 / f1)) <= bound * mpmath.mpf(2) ** -(BITS - 10)
        # and it is more than the first term alone
        assert bound > mpmath.exp(-mpmath.mpf((t + 1) ** 2) / (2 * _mp(sigma2)))


def test_tiny_scales_truncate_at_one() -> None:
    """T >= 1 always, and T = 1 when the tail beyond 1 is already below the limit."""
    assert DiscreteGaussian(Fraction(1, 1000))._profile.table.half_width == 1
    assert Geometric(Fraction(1, 100))._profile.table.half_width == 1
    assert DiscreteGaussian(Fraction(1, 30))._profile.table.half_width == 2


@pytest.mark.parametrize("sigma2", [Fraction(1, 3), Fraction(1), Fraction(9, 2), Fraction(400)])
def test_gauss_truncation_is_the_smallest_with_tail_bound_below_two_to_minus_131(
    sigma2: Fraction,
) -> None:
    table = DiscreteGaussian(sigma2)._profile.table
    T = table.half_width
    with mpmath.workprec(BITS):
        s = _mp(sigma2)
        assert _discrete._gauss_tail(s, T) <= TAIL_LIMIT < _discrete._gauss_tail(s, T - 1)
        # the exact tail is below the limit too, and not absurdly far below it
        assert dg_tail(sigma2, T) <= TAIL_LIMIT
        assert dg_tail(sigma2, T - 1) > TAIL_LIMIT / 4


@pytest.mark.parametrize("sigma2", [Fraction(1, 3), Fraction(1), Fraction(9, 2), Fraction(400)])
def test_gauss_tv_bound_includes_the_tail_term(sigma2: Fraction) -> None:
    """``eta = K 2^-129 + tau + 2^-200`` with ``tau`` at least the exact mass beyond T."""
    mech = DiscreteGaussian(sigma2)
    table = mech._profile.table
    T = table.half_width
    K = 2 * T + 1
    assert mech.sampling_tv == table.tv_bound
    assert table.tv_bound == K * Fraction(1, 2**129) + table.tail_bound + Fraction(1, 2**200)
    assert table.tv_bound <= TV_LIMIT
    with mpmath.workprec(BITS):
        exact_tail_mass = 2 * dg_tail(sigma2, T) / dg_normaliser(sigma2)
        tau = _frac(table.tail_bound)
        assert exact_tail_mass <= tau <= 3 * exact_tail_mass
        # the tail term is not negligible next to the quantisation term: dropping it changes eta
        assert tau > mpmath.mpf(2) ** -200


@pytest.mark.parametrize(
    "sigma2", [Fraction(1, 4), Fraction(1), Fraction(7, 3), Fraction(37), Fraction(900)]
)
def test_gauss_normaliser_and_variance(sigma2: Fraction) -> None:
    mech = DiscreteGaussian(sigma2)
    with mpmath.workprec(BITS):
        z = dg_normaliser(sigma2)
        n = int(40 * math.sqrt(float(sigma2))) + 40
        s = _mp(sigma2)
        second = 2 * mpmath.fsum(
            k * k * mpmath.exp(-mpmath.mpf(k * k) / (2 * s)) for k in range(1, n)
        )
        variance = second / z
        log_z = mpmath.log(z)
    assert mech._profile.log_normalizer == pytest.approx(float(log_z), rel=1e-14, abs=1e-15)
    assert mech.variance == pytest.approx(float(variance), rel=1e-12)
    ks = np.array([0, 1, 2, 5, -3])
    with mpmath.workprec(BITS):
        want = [float(-mpmath.mpf(int(k) ** 2) / (2 * s) - log_z) for k in ks]
    np.testing.assert_allclose(mech.log_pmf(ks), want, rtol=1e-13, atol=1e-13)


def test_gauss_variance_uses_the_fixed_point_sum_for_wide_tables() -> None:
    """Above T = 400 the variance comes from the fixed-point weights: same value."""
    mech = DiscreteGaussian(Fraction(5000))
    assert mech._profile.table.half_width > 400
    with mpmath.workprec(BITS):
        s = _mp(Fraction(5000))
        n = 3000
        terms = [mpmath.exp(-mpmath.mpf(k * k) / (2 * s)) for k in range(n)]
        var = 2 * mpmath.fsum(k * k * t for k, t in enumerate(terms)) / (2 * mpmath.fsum(terms) - 1)
    assert mech.variance == pytest.approx(float(var), rel=1e-12)


def test_gauss_log_pmf_of_huge_integers_does_not_overflow() -> None:
    mech = DiscreteGaussian(Fraction(1))
    k = np.array([2**33], dtype=np.int64)
    assert mech.log_pmf(k)[0] == pytest.approx(-(2.0**66) / 2 - mech._profile.log_normalizer)


def test_gauss_tail_probabilities() -> None:
    sigma2 = Fraction(5)
    mech = DiscreteGaussian(sigma2)
    T = mech._profile.table.half_width
    with mpmath.workprec(BITS):
        z = dg_normaliser(sigma2)
        for t in (1, 2, 4, T - 1, T):
            # summed over the table's support -T..T (the mass beyond is below 2^-130)
            exact = 2 * dg_terms(sigma2, t, T) / z
            assert mech.tail(t) == pytest.approx(float(exact), rel=1e-12, abs=0)
            beyond = 2 * dg_tail(sigma2, T) / z
            assert beyond <= _frac(mech._profile.table.tail_bound)
    assert mech.tail(0) == 1.0
    assert mech.tail(-3) == 1.0
    assert mech.tail(T + 1) == float(mech._profile.table.tail_bound)
    assert mech.tail(T + 1) < 2.0**-120


def test_privacy_costs_with_default_sensitivity() -> None:
    """The default sensitivity is 1: rho = 1 / (2 sigma^2); epsilon = 1 / scale."""
    assert DiscreteGaussian(4).rho() == Fraction(1, 8)
    assert DiscreteGaussian(4).rho(3) == Fraction(9, 8)
    assert DiscreteGaussian.from_rho("1/8").sigma_squared == 4
    assert DiscreteGaussian.from_rho("1/8", sensitivity=2).sigma_squared == 16
    assert Geometric(2).epsilon() == Fraction(1, 2)
    assert Geometric(2).rho() == Fraction(1, 8)
    assert Geometric(2).epsilon(3) == Fraction(3, 2)
    assert Geometric(2).rho(3) == Fraction(9, 8)
    assert Geometric.from_epsilon("1/2").scale == 2


def test_describe_is_exact() -> None:
    dg = DiscreteGaussian("1/3")
    assert dg.describe() == {
        "mechanism": "discrete_gaussian",
        "sigma_squared": "1/3",
        "sigma_squared_float": 1 / 3,
        "variance": dg.variance,
        "sampling_tv_bound": float(dg._profile.table.tv_bound),
    }
    geo = Geometric("5/2")
    assert geo.describe() == {
        "mechanism": "geometric",
        "scale": "5/2",
        "scale_float": 2.5,
        "variance": geo.variance,
        "sampling_tv_bound": float(geo._profile.table.tv_bound),
    }
    assert 0 < dg.describe()["sampling_tv_bound"] <= 2.0**-100


def test_pickles_leave_the_table_behind() -> None:
    for mech in (DiscreteGaussian(Fraction(400)), Geometric(Fraction(30))):
        assert mech._profile.table.half_width > 50  # built and cached
        assert "_cached_profile" not in mech.__getstate__()
        blob = pickle.dumps(mech)
        assert len(blob) < 400
        again = pickle.loads(blob)
        assert again == mech
        assert "_cached_profile" not in again.__dict__


# -- geometric -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scale", [Fraction(1, 2), Fraction(1), Fraction(3, 2), Fraction(25), Fraction(250, 3)]
)
def test_geometric_truncation_normaliser_variance_and_pmf(scale: Fraction) -> None:
    mech = Geometric(scale)
    table = mech._profile.table
    T = table.half_width
    with mpmath.workprec(BITS):
        a = mpmath.exp(-1 / _mp(scale))

        def tail(t: int) -> mpmath.mpf:  # sum_{k > t} a^k
            return a ** (t + 1) / (1 - a)

        assert tail(T) <= TAIL_LIMIT < tail(T - 1)
        log_z = mpmath.log((1 + a) / (1 - a))
        variance = 2 * a / (1 - a) ** 2
        assert _frac(table.tail_bound) >= 2 * tail(T) * (1 - a) / (1 + a)
        ks = [0, 1, -2, 7]
        want = [float(abs(k) * mpmath.log(a) - log_z) for k in ks]
    assert mech._profile.log_normalizer == pytest.approx(float(log_z), rel=1e-14, abs=1e-15)
    assert mech.variance == pytest.approx(float(variance), rel=1e-13)
    np.testing.assert_allclose(mech.log_pmf(np.array(ks)), want, rtol=1e-13, atol=1e-14)
    assert mech.pmf(np.arange(-T, T + 1)).sum() == pytest.approx(1.0, abs=1e-12)
    assert table.tv_bound == (2 * T + 1) * Fraction(1, 2**129) + table.tail_bound + Fraction(
        1, 2**200
    )
    assert mech.sampling_tv <= TV_LIMIT


def test_geometric_log_pmf_of_extreme_integers() -> None:
    mech = Geometric(Fraction(1))
    k = np.array([-(2**63)], dtype=np.int64)
    assert mech.log_pmf(k)[0] == pytest.approx(-(2.0**63) - mech._profile.log_normalizer)


def test_geometric_tail_probabilities() -> None:
    mech = Geometric(Fraction(3, 2))
    a = math.exp(-2 / 3)
    assert mech.alpha == a
    assert mech.tail(0) == 1.0
    assert mech.tail(-1) == 1.0
    assert mech.tail(1) == pytest.approx(2 * a / (1 + a), rel=1e-15)
    assert mech.tail(4) == pytest.approx(2 * a**4 / (1 + a), rel=1e-15)


def test_geometric_parameter_is_named_and_converted() -> None:
    assert Geometric("1/2").scale == Fraction(1, 2)
    assert isinstance(Geometric(0.25).scale, Fraction)
    with pytest.raises(BudgetError, match="^scale must be a number"):
        Geometric("x")
    with pytest.raises(BudgetError, match="^scale is 0; it must be positive"):
        Geometric(0)


# -- the alias table builder ---------------------------------------------------------------


def _geometric_half(a_num: int, a_den: int):
    """Exact fixed-point weights of ``f(k) = (a_num / a_den)^k``."""

    def weights(t: int) -> list[int]:
        return [((1 << _table.PRECISION) * a_num**k) // a_den**k for k in range(t + 1)]

    return weights


def _expected_weights(e: list[int]) -> list[int]:
    """The documented quantisation: floors, then the deficit centre-out to non-zero remainders."""
    total = 1 << _table.TOTAL_BITS
    E = sum(e)
    w = [(ek << _table.TOTAL_BITS) // E for ek in e]
    rem = [(ek << _table.TOTAL_BITS) % E for ek in e]
    deficit = total - sum(w)
    T = (len(e) - 1) // 2
    order = [T]
    for d in range(1, T + 1):
        order += [T - d, T + d]
    for idx in order:
        if deficit == 0:
            break
        if rem[idx]:
            w[idx] += 1
            deficit -= 1
    return w


@pytest.mark.parametrize(
    ("T", "num", "den"), [(1, 1, 3), (3, 2, 3), (6, 5, 7), (11, 9, 10), (20, 1, 2)]
)
def test_quantised_weights_follow_the_documented_rule(T: int, num: int, den: int) -> None:
    half = _geometric_half(num, den)(T)
    e = half[:0:-1] + half
    table = build_symmetric_table(T, _geometric_half(num, den), mpmath.mpf(0))
    assert table.half_width == T
    assert table.column_bits == max(1, (2 * T).bit_length())
    assert list(table.weights) == _expected_weights(e)
    assert sum(table.weights) == 2**128
    E = sum(e)
    for w, ek in zip(table.weights, e, strict=True):
        assert abs(Fraction(w, 2**128) - Fraction(ek, E)) < Fraction(1, 2**128)


def test_deficit_reaches_outcomes_on_both_sides_of_the_centre() -> None:
    """A case where the deficit exceeds 1: units go to 0, -1, +1, ... in that order."""
    for T, num, den in [(3, 2, 3), (6, 5, 7), (11, 9, 10)]:
        half = _geometric_half(num, den)(T)
        e = half[:0:-1] + half
        floors = [(ek << 128) // sum(e) for ek in e]
        if 2**128 - sum(floors) >= 3:
            break
    else:
        pytest.fail("no case with a deficit of at least 3")
    table = build_symmetric_table(T, _geometric_half(num, den), mpmath.mpf(0))
    rem = [(ek << 128) % sum(e) for ek in e]
    bumped = {i - T for i in range(2 * T + 1) if table.weights[i] != floors[i]}
    assert {-1, 1} <= bumped
    # centre-out: an outcome gets a unit only if every nearer one (with a remainder) did
    for k in bumped:
        nearer = [j for j in range(-abs(k) + 1, abs(k)) if rem[j + T]]
        assert set(nearer) <= bumped, (k, nearer, bumped)
        if k > 0 and rem[T - k]:
            assert -k in bumped  # -k comes before +k


@pytest.mark.parametrize(("T", "num", "den"), [(1, 1, 3), (2, 1, 2), (6, 5, 7), (13, 9, 10)])
def test_alias_table_samples_each_outcome_with_its_weight(T: int, num: int, den: int) -> None:
    table = build_symmetric_table(T, _geometric_half(num, den), mpmath.mpf(0))
    b = table.column_bits
    cap = 2 ** (128 - b)
    mass = [0] * (2 * T + 1)
    for j in range(2**b):
        t = (int(table.threshold_hi[j]) << 64) | int(table.threshold_lo[j])
        assert 0 <= t <= cap
        primary, alias = int(table.values[2 * j + 1]), int(table.values[2 * j])
        assert -T <= alias <= T
        if j >= 2 * T + 1:
            assert t == 0  # padding columns always take their alias
        else:
            assert primary == j - T
        mass[primary + T] += t
        mass[alias + T] += cap - t
    assert mass == list(table.weights)


def test_tail_term_of_the_tv_bound() -> None:
    """``tau = min(1, 2 (1 + 2^-60) max(tail, 2^-400) / Z_T)`` and ``eta = K 2^-129 + tau + 2^-200``."""
    T = 5
    half = _geometric_half(1, 2)(T)
    z_t = Fraction(sum(half[:0:-1] + half), 1 << _table.PRECISION)
    for tail_sum in (mpmath.mpf(2) ** -140, mpmath.mpf(0), mpmath.mpf(2) ** -450):
        table = build_symmetric_table(T, _geometric_half(1, 2), tail_sum)
        clamped = max(mpf_to_fraction(tail_sum), Fraction(1, 2**400))
        tau = 2 * clamped * (1 + Fraction(1, 2**60)) / z_t
        assert table.tail_bound == tau
        assert table.tv_bound == 11 * Fraction(1, 2**129) + tau + Fraction(1, 2**200)


def test_tv_over_the_limit_is_an_internal_error() -> None:
    with pytest.raises(
        InternalError, match=r"\): alias table TV bound 1\.\d+e-30 exceeds 2\*\*-100$"
    ):
        build_symmetric_table(2, _geometric_half(1, 2), mpmath.mpf(2) ** -99)
    # just below the limit is accepted
    build_symmetric_table(2, _geometric_half(1, 2), mpmath.mpf(2) ** -104)


def test_malformed_weights_are_an_internal_error() -> None:
    good = _geometric_half(1, 2)
    with pytest.raises(
        InternalError, match=r"bug in censusdp\): first_weights returned a malformed list$"
    ):
        build_symmetric_table(3, lambda t: good(t)[:-1], mpmath.mpf(0))
    with pytest.raises(
        InternalError, match=r"bug in censusdp\): first_weights returned a malformed list$"
    ):
        build_symmetric_table(3, lambda t: good(t) + [1], mpmath.mpf(0))
    with pytest.raises(
        InternalError, match=r"bug in censusdp\): first_weights returned a malformed list$"
    ):
        build_symmetric_table(3, lambda t: [0] + good(t)[1:], mpmath.mpf(0))
    # f(0) may be any positive integer (the weights are normalised)
    table = build_symmetric_table(1, lambda t: [1, 1][: t + 1], mpmath.mpf(0))
    assert table.weights == (2**128 // 3, 2**128 - 2 * (2**128 // 3), 2**128 // 3)


def test_column_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """At most ``2**MAX_COLUMN_BITS`` columns: with 3 bits, T = 3 (7 outcomes) but not T = 4."""
    monkeypatch.setattr(_table, "MAX_COLUMN_BITS", 3)
    assert build_symmetric_table(3, _geometric_half(1, 2), mpmath.mpf(0)).column_bits == 3
    with pytest.raises(
        BudgetError, match=r"^noise scale too large .*: 9 outcomes needed, at most 8 supported"
    ):
        build_symmetric_table(4, _geometric_half(1, 2), mpmath.mpf(0))


@pytest.mark.parametrize(
    ("x", "want"),
    [
        (mpmath.mpf(0), Fraction(0)),
        (mpmath.mpf(1), Fraction(1)),
        (mpmath.mpf("0.375"), Fraction(3, 8)),
        (-mpmath.mpf(5) / 8, Fraction(-5, 8)),
        (mpmath.mpf(3) * 2**40, Fraction(3 * 2**40)),
        (mpmath.ldexp(1, -1000), Fraction(1, 2**1000)),
        (mpmath.ldexp(3, -1001), Fraction(3, 2**1001)),
        (mpmath.ldexp(1, -1001), Fraction(0)),
        (-mpmath.ldexp(1, -1100), Fraction(0)),
    ],
)
def test_mpf_to_fraction(x, want: Fraction) -> None:
    assert mpf_to_fraction(x) == want


# -- sampling ------------------------------------------------------------------------------


class _Words:
    """A fake source that replays chosen 64-bit words and counts what was read."""

    def __init__(self, words) -> None:
        self.words = [int(w) for w in words]
        self.read = 0

    def uint64(self, n: int) -> np.ndarray:
        out = self.words[self.read : self.read + n]
        assert len(out) == n, "read past the scripted words"
        self.read += n
        return np.array(out, dtype=np.uint64)


def _split_column(table) -> tuple[int, int, int]:
    """A column whose threshold has odd high part and non-zero low part."""
    cap = 2 ** (128 - table.column_bits)
    for j in range(2**table.column_bits):
        hi, lo = int(table.threshold_hi[j]), int(table.threshold_lo[j])
        if 0 < (hi << 64 | lo) < cap and lo > 0 and hi % 2 == 1:
            return j, hi, lo
    raise AssertionError("no suitable column")


def _scripted_case(table):
    """Words and expected outcomes: below, at (tie broken both ways) and above a threshold."""
    b = table.column_bits
    j, hi, lo = _split_column(table)
    primary, alias = int(table.values[2 * j + 1]), int(table.values[2 * j])
    top = j << (64 - b)
    main = [top | (hi - 1), top | hi, top | hi, top | (hi + 1)]
    ties = [lo - 1, lo]  # r_lo < t_lo: primary; r_lo == t_lo: alias
    return main, ties, [primary, primary, alias, alias]


def test_thresholds_compare_exactly_in_one_chunk_and_across_chunks() -> None:
    table = DiscreteGaussian(Fraction(3))._profile.table
    main, ties, want = _scripted_case(table)
    src = _Words(main + ties)
    assert table.sample(4, src).tolist() == want
    assert src.read == 6
    # more than one chunk: the tie words of a chunk follow it
    n = CHUNK + 4
    filler = [main[0]] * CHUNK  # strictly below the threshold: no tie words
    src = _Words(filler + main + ties)
    out = table.sample(n, src)
    assert (out[:CHUNK] == want[0]).all()
    assert out[CHUNK:].tolist() == want
    assert src.read == n + 2


def test_thresholds_compare_exactly_across_streams() -> None:
    table = DiscreteGaussian(Fraction(3))._profile.table
    main, ties, want = _scripted_case(table)
    streams = [_Words(main + ties), _Words(main[::-1] + ties), _Words(main + ties)]
    out = table.sample_streams(4, streams)
    assert out.dtype == np.int64
    assert out.tolist() == [want, [want[3], want[1], want[2], want[0]], want]
    assert [s.read for s in streams] == [6, 6, 6]


class _UnitWords:
    """Fake per-unit streams: scripted words per unit, and a log of what was read."""

    def __init__(self, per_unit) -> None:
        self.per_unit = [[int(w) for w in words] for words in per_unit]
        self.reads: list[tuple[int, int, int]] = []

    def words(self, rows, start: int, count: int) -> np.ndarray:
        out = []
        for r in np.asarray(rows).tolist():
            got = self.per_unit[r][start : start + count]
            assert len(got) == count, "read past the scripted words"
            self.reads.append((r, start, count))
            out.append(got)
        return np.array(out, dtype=np.uint64).reshape(len(out), count)

    def pieces(self, row: int, start: int, count: int, step: int):
        for at in range(start, start + count, step):
            yield self.words([row], at, min(step, start + count - at))[0]


def test_sample_units_breaks_ties_from_words_after_the_units_draws() -> None:
    table = DiscreteGaussian(Fraction(3))._profile.table
    main, ties, want = _scripted_case(table)
    below = main[0]  # no tie
    streams = _UnitWords(
        [main + ties, [below] * 4, main[::-1] + ties, [below, main[1], below, below, ties[0]]]
    )
    out = table.sample_units(4, streams, 4)
    assert out.dtype == np.int64
    assert out.tolist() == [
        want,
        [want[0]] * 4,
        [want[3], want[1], want[2], want[0]],
        [want[0], want[1], want[0], want[0]],
    ]
    # the tie words of a unit are read at positions 4, 5, ... (after its 4 draws)
    assert sorted(r for r in streams.reads if r[1] >= 4) == [(0, 4, 2), (2, 4, 2), (3, 4, 1)]


def test_sample_units_across_column_chunks_keeps_the_tie_order() -> None:
    """A unit with more than CHUNK draws (read in pieces): the tie words still follow
    its n draws, in the order of the tied draws, across the pieces."""
    table = DiscreteGaussian(Fraction(3))._profile.table
    main, ties, want = _scripted_case(table)
    n = CHUNK + 4
    words = [main[1]] + [main[0]] * (CHUNK - 1) + main  # a tie in each chunk (3 in all)
    tie_words = [ties[0], ties[1], ties[0]]  # primary, then alias, then primary
    streams = _UnitWords([words + tie_words])
    out = table.sample_units(n, streams, 1)[0]
    assert out[0] == want[0]  # the first chunk's tie read word n: r_lo < t_lo, primary
    assert (out[1:CHUNK] == want[0]).all()
    assert out[CHUNK:].tolist() == [want[0], want[2], want[1], want[3]]
    assert [r for r in streams.reads if r[1] + r[2] > n] == [(0, n, 3)]


def test_sample_units_sizes() -> None:
    table = DiscreteGaussian(Fraction(2))._profile.table
    streams = RandomSource.seeded(3).unit_streams("B", "q", codes=["1", "2"])
    assert table.sample_units(0, streams, 2).shape == (2, 0)
    assert table.sample_units(5, streams, 0).shape == (0, 5)
    with pytest.raises(BudgetError, match="^number of samples must be >= 0, got -1$"):
        table.sample_units(-1, streams, 2)


def test_noise_for_a_fixed_seed_is_pinned() -> None:
    """The table layout and the stream format are part of reproducibility: a seeded run
    must give the same noise in every version (values recorded from this version)."""
    assert DiscreteGaussian(3).sample(24, RandomSource.seeded(7)).tolist() == [
        -3, -4, 1, 1, 1, 1, 0, 1, 2, 4, 2, -3, -1, -1, 0, 3, -1, 0, 0, -1, 0, 3, 2, 0,
    ]  # fmt: skip
    assert Geometric(2).sample(24, RandomSource.seeded(7)).tolist() == [
        -8, -1, 1, 1, 1, 1, 0, 1, -1, 6, 3, -6, -2, -2, 0, 6, -2, 1, 0, -1, 1, 0, 3, 0,
    ]  # fmt: skip


def test_sample_sizes_and_types() -> None:
    table = DiscreteGaussian(Fraction(2))._profile.table
    src = RandomSource.seeded(1)
    empty = table.sample(0, src)
    assert empty.shape == (0,) and empty.dtype == np.int64
    none = table.sample_streams(3, [])
    assert none.shape == (0, 3) and none.dtype == np.int64
    zero = table.sample_streams(0, [RandomSource.seeded(1), RandomSource.seeded(2)])
    assert zero.shape == (2, 0) and zero.dtype == np.int64
    big = table.sample_streams(CHUNK + 1, [RandomSource.seeded(4)])
    assert big.dtype == np.int64
    np.testing.assert_array_equal(big[0], table.sample(CHUNK + 1, RandomSource.seeded(4)))
    for call in (lambda: table.sample(-1, src), lambda: table.sample_streams(-1, [src])):
        with pytest.raises(BudgetError, match="^number of samples must be >= 0, got -1$"):
            call()


# -- parameters and counts -----------------------------------------------------------------


class _Ratio:
    """A rational number that is neither an int nor a Fraction (like gmpy2's mpq)."""

    def __init__(self, p: int, q: int) -> None:
        self.numerator, self.denominator = p, q


numbers.Rational.register(_Ratio)


def test_as_fraction_conversions() -> None:
    assert as_fraction(_Ratio(6, 4), "x") == Fraction(3, 2)
    assert as_fraction("1_000/3", "x") == Fraction(1000, 3)
    assert as_fraction(" 2.5 ", "x") == Fraction(5, 2)
    assert as_fraction(np.float64(0.1), "x") == Fraction(1, 10)
    assert as_fraction(np.int64(7), "x") == 7
    with pytest.raises(BudgetError, match=r"^rho must be a number, got list \[1\]$"):
        as_fraction([1], "rho")


def test_integer_values() -> None:
    a = np.arange(5, dtype=np.int64)
    assert integer_values(a) is a  # no copy of an int64 table
    u = integer_values(np.array([1, 2], dtype=np.uint8))
    assert u.dtype == np.int64 and u.tolist() == [1, 2]
    b = integer_values(np.array([True, False]))
    assert b.dtype == np.int64 and b.tolist() == [1, 0]
    f = integer_values(np.array([1000.0, -(2.0**61)]))
    assert f.dtype == np.int64 and f.tolist() == [1000, -(2**61)]
    with pytest.raises(CensusDPError, match="^counts are too large for int64 noise addition$"):
        integer_values(np.array([2.0**62]), "counts")
    with pytest.raises(CensusDPError, match="^values must be integer counts; got non-integral"):
        integer_values(np.array([np.inf]))
