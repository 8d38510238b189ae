"""Exact-integer alias tables: the sampler behind the discrete mechanisms.

A symmetric integer distribution ``p`` (discrete Gaussian or two-sided geometric)
is sampled in three steps.

1. **Truncate** to ``{-T, ..., T}`` with ``T`` chosen so that the tail mass
   ``tau = P_p(|X| > T)`` is at most ``2**-130`` (bounded analytically, below).
2. **Quantize**: with ``K = 2T + 1`` outcomes and ``N = 2**b >= K`` alias columns,
   integer weights ``w_k >= 0`` with ``sum_k w_k = 2**128`` *exactly* are computed
   from the truncated pmf by exact integer arithmetic: unnormalized weights
   ``e_k ~ 2**P f(k)`` (``P = 320`` bits, from a multiplicative recurrence on Python
   integers whose start values come from mpmath), then
   ``w_k = floor(2**128 e_k / E)`` with ``E = sum e_k`` and the deficit
   (``< K``) given one unit each to ``deficit`` distinct outcomes with a non-zero
   remainder, nearest the centre first. Each ``|w_k / 2**128 - e_k / E| < 2**-128``.
3. **Alias table** (Walker 1977, Vose 1991) built with integers only: every column
   holds capacity ``C = 2**128 / N = 2**(128-b)``; column ``j`` returns outcome ``j``
   with probability ``t_j / C`` and outcome ``alias_j`` otherwise, with
   ``sum_j [t_j + (C - t'_j)] / 2**128 = w_k / 2**128`` for every outcome (exact,
   checked after construction).

Sampling reads one 64-bit word ``A`` per sample: its top ``b`` bits are the column
(``N`` is a power of two, so the column is uniform with no rejection), its low
``64 - b`` bits are the high part of a ``(128 - b)``-bit uniform ``r``; only when
they tie with the high part of ``t_j`` (probability ``< 2**-(64-b)``, about one in
``10**13`` samples) are 64 further bits read to decide ``r < t_j`` exactly. So the
sampled distribution ``q`` is *exactly* ``q_k = w_k / 2**128`` for the stream bits
being uniform. :meth:`AliasTable.sample_units` (many geounits, each with its own
addressable stream) draws the same way: every draw reads its own word of its unit's
stream, and a tie reads a word past the unit's ``n`` draws that no other draw reads, so
the draws are independent with the same law ``q``.

**Bound.** ``TV(q, p) <= TV(q, p_T) + TV(p_T, p)`` where ``p_T`` is ``p`` truncated
and renormalized. ``TV(p_T, p) = tau``; ``TV(q, p_T) <= K / 2 * 2**-128 + eps_num``
where ``eps_num <= 2**-200`` bounds the fixed-point error of ``e_k / E`` (each
``e_k`` carries at most ``k**2 + 2`` units of ``2**-P``, ``E >= 2**P``). Hence

    eta = TV(q, p) <= K * 2**-129 + tau + 2**-200,

computed for each table and stored as :attr:`AliasTable.tv_bound`; we require
``eta <= 2**-100`` (``K <= 2**20``). :mod:`censusdp.privacy.accounting` turns ``eta`` into an
additive ``delta``: a mechanism within TV ``eta`` of an ``(epsilon, delta)``-DP one,
for each of the ``m`` measurements one person can change, is
``(epsilon, delta + (1 + e**epsilon) m eta)``-DP (measurements the person does not
change have identical distributions under both neighbours and cost nothing).

Tail bounds: for ``f(k) = exp(-k**2 / (2 s))`` the ratio ``f(k+1)/f(k)`` decreases,
so ``sum_{k>T} f(k) <= f(T+1) / (1 - f(T+2)/f(T+1))``; for ``f(k) = a**k`` the tail
is exactly ``a**(T+1) / (1 - a)``. Both are evaluated with mpmath at 256 bits and
inflated by ``2**-60`` relative slack; ``tau <= 2 * tail / Z_T`` with ``Z_T >= 1``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

import mpmath
import numpy as np

from censusdp.errors import BudgetError, InternalError
from censusdp.privacy.randomness import RandomSource

__all__ = [
    "CHUNK",
    "AliasTable",
    "UnitWords",
    "build_symmetric_table",
    "fixed_point",
    "mpf_to_fraction",
]

PRECISION = 320  # fixed-point bits of the unnormalized weights
TOTAL_BITS = 128  # sum of quantized weights is exactly 2**TOTAL_BITS
TAIL_BITS = 130  # truncation tail mass at most 2**-TAIL_BITS
MAX_COLUMN_BITS = 20  # tables with more than 2**20 outcomes are refused
TV_LIMIT = Fraction(1, 2**100)
CHUNK = 1 << 16  # words per chunk: part of the stream format (tie words follow each chunk)


class UnitWords(Protocol):
    """Addressable per-unit streams (:class:`~censusdp.privacy.randomness.UnitStreams`)."""

    def words(self, rows: Any, start: int, count: int) -> np.ndarray: ...


@dataclass(frozen=True, eq=False)
class AliasTable:
    """An alias table over ``{-T, ..., T}`` with exact integer thresholds.

    Attributes:
        half_width: ``T``; outcomes are ``-T..T``.
        column_bits: ``b``; the table has ``2**b`` columns.
        weights: quantized weights ``w_k`` (Python ints summing to ``2**128``),
            ``weights[k + T]`` for outcome ``k``.
        tv_bound: rigorous upper bound on the total-variation distance between the
            sampled and the exact distribution (a ``Fraction``).
        tail_bound: upper bound on the exact distribution's mass outside ``-T..T``.
    """

    half_width: int
    column_bits: int
    weights: tuple[int, ...]
    tv_bound: Fraction
    tail_bound: Fraction
    threshold_hi: np.ndarray  # uint64, per column
    threshold_lo: np.ndarray  # uint64, per column
    values: np.ndarray  # int64, values[2 j] = alias outcome, values[2 j + 1] = primary

    def sample(self, n: int, source: RandomSource) -> np.ndarray:
        """``n`` i.i.d. draws with probabilities exactly ``weights / 2**128``.

        Words are read from ``source`` in chunks of :data:`CHUNK`; the rare tie-break
        words of a chunk are read right after it, so the output is a deterministic
        function of the stream and ``n`` only.
        """
        n = int(n)
        if n < 0:
            raise BudgetError(f"number of samples must be >= 0, got {n}")
        shift = np.uint64(64 - self.column_bits)
        mask = np.uint64((1 << (64 - self.column_bits)) - 1)
        thi, tlo, values = self.threshold_hi, self.threshold_lo, self.values
        if n <= CHUNK:  # one chunk: the same stream use, less overhead
            words = source.uint64(n)
            col = (words >> shift).astype(np.intp)
            r_hi = words & mask
            t_hi = thi[col]
            primary = r_hi < t_hi
            ties = np.flatnonzero(r_hi == t_hi)
            if ties.size:
                primary[ties] = source.uint64(ties.size) < tlo[col[ties]]
            return values[(col << 1) | primary]
        out = np.empty(n, dtype=np.int64)
        for start in range(0, n, CHUNK):
            stop = min(n, start + CHUNK)
            words = source.uint64(stop - start)
            col = (words >> shift).astype(np.intp)
            r_hi = words & mask
            t_hi = thi[col]
            primary = r_hi < t_hi
            ties = np.flatnonzero(r_hi == t_hi)
            if ties.size:
                r_lo = source.uint64(ties.size)
                primary[ties] = r_lo < tlo[col[ties]]
            col <<= 1
            col |= primary
            out[start:stop] = values[col]
        return out

    def sample_units(self, n: int, streams: UnitWords, units: int) -> np.ndarray:
        """``n`` draws for each of ``units`` units, each from its own addressable stream.

        Row ``u`` reads words ``0 .. n-1`` of unit ``u``'s stream (``streams.words``),
        one per draw, and, for the rare draws whose low bits tie with the threshold, the
        words ``n, n+1, ...`` in the order of those draws: so row ``u`` is a function of
        unit ``u``'s stream and ``n`` only, whichever units are sampled with it. Each
        draw uses the same exact comparison as :meth:`sample` (probabilities exactly
        ``weights / 2**128`` for uniform words). Units are taken in batches of about
        :data:`CHUNK` words, a unit with more than :data:`CHUNK` draws in column chunks.

        Args:
            n: draws per unit.
            streams: has ``words(rows, start, count)``, a ``(len(rows), count)`` uint64
                array of words ``start..`` of those units' streams
                (:class:`~censusdp.privacy.randomness.UnitStreams`).
            units: the number of units (rows ``0 .. units-1`` of ``streams``).
        """
        n, units = int(n), int(units)
        if n < 0:
            raise BudgetError(f"number of samples must be >= 0, got {n}")
        out = np.empty((units, n), dtype=np.int64)
        if not n or not units:
            return out
        shift = np.uint64(64 - self.column_bits)
        mask = np.uint64((1 << (64 - self.column_bits)) - 1)
        per_batch = max(1, CHUNK // n)
        step = min(n, CHUNK)
        for first in range(0, units, per_batch):
            rows = np.arange(first, min(units, first + per_batch))
            used = np.zeros(rows.size, dtype=np.int64)  # tie words read per row
            for c0 in range(0, n, step):
                c1 = min(n, c0 + step)
                words = streams.words(rows, c0, c1 - c0)
                # the column: the top b bits (< 2**20, so the uint64 bits are the intp)
                col = np.right_shift(words, shift).view(np.intp)
                words &= mask  # the high part r_hi of each uniform
                t_hi = self.threshold_hi.take(col, mode="clip")  # col < 2**b: no clipping
                primary = words < t_hi
                tied = words == t_hi
                tie_rows, tie_cols = np.nonzero(tied) if tied.any() else (tied[:0, 0], None)
                for i in np.unique(tie_rows).tolist():  # row-major: in stream order
                    at = tie_cols[tie_rows == i]
                    r_lo = streams.words(rows[i : i + 1], n + int(used[i]), at.size)[0]
                    primary[i, at] = r_lo < self.threshold_lo[col[i, at]]
                    used[i] += at.size
                col <<= 1
                col |= primary
                # whole rows (per_batch > 1 only when step == n) or one row's columns:
                # a contiguous block of ``out``, filled without a temporary
                self.values.take(col, out=out[first : first + rows.size, c0:c1], mode="clip")
        return out

    def sample_streams(self, n: int, streams: list[RandomSource]) -> np.ndarray:
        """``n`` draws from each stream: row ``i`` equals ``self.sample(n, streams[i])``.

        Byte-identical to sampling each stream separately, but the table lookups are
        vectorized over all streams at once (one pass instead of one per stream). The
        measurements used it with one ``RandomSource.child`` per unit before
        :meth:`sample_units` (``benchmarks/bench_measure.py`` still times that way).
        """
        n = int(n)
        if n < 0:
            raise BudgetError(f"number of samples must be >= 0, got {n}")
        if not streams:
            return np.zeros((0, n), dtype=np.int64)
        if n > CHUNK:
            return np.stack([self.sample(n, s) for s in streams])
        out = np.empty((len(streams), n), dtype=np.int64)
        per_batch = max(1, CHUNK // max(n, 1))  # keep the working set in cache
        for first in range(0, len(streams), per_batch):
            batch = streams[first : first + per_batch]
            out[first : first + len(batch)] = self._sample_batch(n, batch)
        return out

    def _sample_batch(self, n: int, streams: list[RandomSource]) -> np.ndarray:
        words = np.empty(len(streams) * n, dtype=np.uint64)
        for i, s in enumerate(streams):
            words[i * n : (i + 1) * n] = s.uint64(n)
        shift = np.uint64(64 - self.column_bits)
        mask = np.uint64((1 << (64 - self.column_bits)) - 1)
        col = (words >> shift).astype(np.intp)
        words &= mask  # now the high part r_hi of each uniform
        t_hi = self.threshold_hi[col]
        primary = words < t_hi
        ties = np.flatnonzero(words == t_hi)  # ascending: grouped by stream, in order
        if ties.size:
            rows = ties // n
            for row in np.unique(rows):
                at = ties[rows == row]
                r_lo = streams[int(row)].uint64(at.size)
                primary[at] = r_lo < self.threshold_lo[col[at]]
        col <<= 1
        col |= primary
        return self.values[col].reshape(len(streams), n)


def fixed_point(x: mpmath.mpf) -> int:
    """``floor(x * 2**PRECISION)`` for ``0 <= x`` (exact given the mpf ``x``)."""
    return int(mpmath.floor(mpmath.ldexp(x, PRECISION)))


def mpf_to_fraction(x: mpmath.mpf) -> Fraction:
    """The exact rational value of a finite mpmath float.

    Values below ``2**-1000`` in magnitude are returned as 0: their exact rationals
    (e.g. ``exp(-1e11)``) cannot be built in reasonable time. Callers that need an upper
    bound clamp to a larger value first (see :func:`build_symmetric_table`).
    """
    x = mpmath.mpf(x)
    if x != 0 and abs(x) < mpmath.ldexp(1, -1000):
        return Fraction(0)
    man, exp = x.man_exp  # man is the magnitude: the sign is separate
    out = Fraction(int(man)) * Fraction(2) ** int(exp)
    return -out if x < 0 else out


def build_symmetric_table(
    half_width: int,
    first_weights: Callable[[int], list[int]],
    tail_sum: mpmath.mpf,
) -> AliasTable:
    """Build an :class:`AliasTable` for a symmetric pmf ``f(k) = f(-k)``, ``f(0) = 1``.

    Long because it is one exact construction whose steps check each other: the weights
    are quantized to sum to exactly ``2**128``, Vose's method fills the columns, the
    columns are verified to reproduce the weights, and the TV bound is computed from the
    same quantities. It is kept whole so that its mutation-testing record (tools/
    mutation.toml, keyed by function and mutant number) stays valid.

    Args:
        half_width: ``T``.
        first_weights: returns ``[e_0, ..., e_T]``, ``e_k`` the fixed-point value of
            ``f(k) * 2**PRECISION`` with absolute error at most ``(k + 1)**2`` units.
        tail_sum: an upper bound on ``sum_{k > T} f(k)``.

    Raises:
        BudgetError: if the table would need more than ``2**22`` outcomes.
        InternalError: if the construction violates its own invariants.
    """
    T = int(half_width)
    K = 2 * T + 1
    b = max(1, (K - 1).bit_length())
    if b > MAX_COLUMN_BITS:
        raise BudgetError(
            f"noise scale too large for the exact table sampler: {K} outcomes needed, "
            f"at most {2**MAX_COLUMN_BITS} supported (sigma^2 up to about 1.4e9, geometric "
            f"scale up to about 5,000); raise the budget share or rho"
        )
    N = 1 << b
    half = first_weights(T)
    if len(half) != T + 1 or half[0] <= 0:
        raise InternalError("first_weights returned a malformed list")
    e = half[:0:-1] + half  # e_{-T} .. e_T
    E = sum(e)
    total = 1 << TOTAL_BITS
    w = []
    rem = []
    for ek in e:
        q, r = divmod(ek << TOTAL_BITS, E)
        w.append(q)
        rem.append(r)
    deficit = total - sum(w)
    if not 0 <= deficit < K:
        raise InternalError(f"alias quantization deficit {deficit} outside [0, {K})")
    if deficit:
        # centre-out order: 0, -1, +1, -2, +2, ... (indices T, T-1, T+1, ...)
        order = [T + (i + 1) // 2 * (1 if i % 2 == 0 else -1) for i in range(K)]
        given = 0
        for idx in order:
            if given == deficit:
                break
            if rem[idx]:
                w[idx] += 1
                given += 1
    if sum(w) != total:
        raise InternalError("quantized weights do not sum to 2**128")

    # Vose's alias method with integer capacities.
    cap = total >> b
    scaled = w + [0] * (N - K)
    thresh = [cap] * N
    alias = list(range(N))
    small = [j for j in range(N) if scaled[j] < cap]
    large = [j for j in range(N) if scaled[j] >= cap]
    work = list(scaled)
    while small and large:
        s = small.pop()
        g = large.pop()
        thresh[s] = work[s]
        alias[s] = g
        work[g] -= cap - work[s]
        (small if work[g] < cap else large).append(g)
    for j in small + large:
        if work[j] != cap:
            raise InternalError(f"alias column {j} left with {work[j]} != capacity {cap}")
        thresh[j] = cap
        alias[j] = j
    # verify exactly: mass of each outcome equals its weight
    mass = [0] * N
    for j in range(N):
        mass[j] += thresh[j]
        mass[alias[j]] += cap - thresh[j]
    if mass != scaled:
        raise InternalError("alias table does not reproduce the quantized weights")

    t_hi = np.array([t >> 64 for t in thresh], dtype=np.uint64)
    t_lo = np.array([t & ((1 << 64) - 1) for t in thresh], dtype=np.uint64)
    outcome = np.arange(N, dtype=np.int64) - T
    outcome[K:] = 0  # padding columns have threshold 0; they always take the alias
    values = np.empty(2 * N, dtype=np.int64)
    values[0::2] = outcome[np.asarray(alias, dtype=np.int64)]
    values[1::2] = outcome

    z_t = Fraction(E, 1 << PRECISION)  # >= 1 because f(0) = 1
    # A tail bound below 2**-400 is replaced by 2**-400 (still an upper bound): for
    # tiny scales the exact bound (e.g. exp(-1e11)) has an exponent too large to
    # turn into a Fraction in reasonable time.
    tail_sum = max(mpmath.mpf(tail_sum), mpmath.ldexp(1, -400))
    tail = mpf_to_fraction(tail_sum) * (1 + Fraction(1, 2**60))
    tail = min(Fraction(1), 2 * tail / max(z_t, Fraction(1)))
    tv = K * Fraction(1, 2 ** (TOTAL_BITS + 1)) + tail + Fraction(1, 2**200)
    if tv > TV_LIMIT:
        raise InternalError(f"alias table TV bound {float(tv):.3g} exceeds 2**-100")
    return AliasTable(
        half_width=T,
        column_bits=b,
        weights=tuple(w),
        tv_bound=tv,
        tail_bound=tail,
        threshold_hi=t_hi,
        threshold_lo=t_lo,
        values=values,
    )
