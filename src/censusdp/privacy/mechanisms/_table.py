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

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, NamedTuple, Protocol

import mpmath
import numpy as np

from censusdp.errors import BudgetError, InternalError
from censusdp.privacy.randomness import RandomSource

__all__ = [
    "BATCH",
    "CHUNK",
    "PIECE",
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
# sample_units: a unit with at least PIECE draws is read from its own keystream in pieces
# of PIECE words, shorter units in batches of about BATCH words (by AES-ECB, whose calls
# cost more to set up); the lookups' work arrays hold one piece or batch
PIECE = 1 << 15
BATCH = 1 << 16


class UnitWords(Protocol):
    """Addressable per-unit streams (:class:`~censusdp.privacy.randomness.UnitStreams`)."""

    def words(self, rows: Any, start: int, count: int) -> np.ndarray: ...

    def pieces(self, row: int, start: int, count: int, step: int) -> Iterator[np.ndarray]: ...


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
        threshold_hi: the high 64 bits ``t_hi`` of each column's threshold (``uint64``).
        threshold_lo: the low 64 bits of each column's threshold (``uint64``).
        threshold_words: column ``j``'s ``(j << (64 - b)) + t_hi`` modulo ``2**64``
            (``uint64``): what a word of column ``j`` is compared with
            (:meth:`_lookup`).
        values: ``int64``, ``values[2 j]`` column ``j``'s alias outcome,
            ``values[2 j + 1]`` its own (primary) outcome.
    """

    half_width: int
    column_bits: int
    weights: tuple[int, ...]
    tv_bound: Fraction
    tail_bound: Fraction
    threshold_hi: np.ndarray
    threshold_lo: np.ndarray
    threshold_words: np.ndarray
    values: np.ndarray

    def _lookup(
        self, words: np.ndarray, out: np.ndarray, col: np.ndarray, diff: np.ndarray
    ) -> np.ndarray:
        """Each word's draw into ``out``; the flat indices of the draws left to a tie.

        A word ``A = (j << s) | r_hi`` (``s = 64 - b``: column ``j``, then the high part
        ``r_hi`` of the uniform) is compared with column ``j``'s threshold by one
        subtraction: ``A - threshold_words[j] = r_hi - t_hi`` modulo ``2**64``, and as
        ``0 <= r_hi < 2**s`` and ``0 <= t_hi <= 2**s <= 2**63`` the difference's top bit
        is set exactly when ``r_hi < t_hi`` (the primary outcome) and it is zero exactly
        on a tie. A tied draw is left with its alias outcome, and ``col`` holds ``2 j``
        there, for :meth:`_break_ties`; every other draw is final.

        Args:
            words: the uniform words (any shape).
            out: ``int64``, the shape of ``words``: receives the draws.
            col, diff: contiguous ``uint64`` work arrays of that shape; ``col`` ends
                holding the index ``2 j + primary`` of each draw into :attr:`values`.
        """
        np.right_shift(words, np.uint64(64 - self.column_bits), out=col)
        index = col.view(np.intp)  # j < 2**b <= 2**20: the same bits
        self.threshold_words.take(index, out=diff, mode="clip")  # nothing is clipped
        np.subtract(words, diff, out=diff)
        if np.count_nonzero(diff) == diff.size:
            ties = _NO_TIES
        else:
            ties = np.flatnonzero(diff == 0)
        np.right_shift(diff, _TOP_BIT, out=diff)
        np.left_shift(col, _ONE, out=col)
        np.bitwise_or(col, diff, out=col)
        self.values.take(index, out=out, mode="clip")  # 2 j + 1 < 2**(b+1): no clipping
        return ties

    def _break_ties(
        self,
        out: np.ndarray,
        ties: np.ndarray,
        doubled: np.ndarray,
        n: int,
        low_words: Callable[[int, int], np.ndarray],
    ) -> None:
        """Decide the tied draws that :meth:`_lookup` left, exactly.

        The draws are rows of ``n`` (``out`` flat, row-major; ``ties`` ascending, with
        ``doubled`` the ``2 j`` that :meth:`_lookup` left in ``col`` there). Row ``i``'s
        tied draws, in order, read the words ``low_words(i, count)``; each takes the
        primary outcome when its word (the low 64 bits ``r_lo`` of the uniform) is below
        the column's ``t_lo``. ``out`` holds the alias outcome there, perhaps plus a
        count: the difference to the primary outcome is added.
        """
        rows = ties // n
        for i in np.unique(rows).tolist():
            at = rows == i
            primary = low_words(i, int(at.sum())) < self.threshold_lo[doubled[at] >> _ONE]
            alias = self.values[doubled[at]]
            out[ties[at]] += self.values[doubled[at] | primary] - alias

    def sample(self, n: int, source: RandomSource) -> np.ndarray:
        """``n`` i.i.d. draws with probabilities exactly ``weights / 2**128``.

        Words are read from ``source`` in chunks of :data:`CHUNK`; the rare tie-break
        words of a chunk are read right after it, so the output is a deterministic
        function of the stream and ``n`` only.
        """
        n = int(n)
        if n < 0:
            raise BudgetError(f"number of samples must be >= 0, got {n}")
        out = np.empty(n, dtype=np.int64)
        col = np.empty(min(n, CHUNK), dtype=np.uint64)
        diff = np.empty_like(col)
        for start in range(0, n, CHUNK):
            k = min(n - start, CHUNK)
            ties = self._lookup(source.uint64(k), out[start : start + k], col[:k], diff[:k])
            if ties.size:
                self._break_ties(out[start:], ties, col[ties], k, lambda _, c: source.uint64(c))
        return out

    def sample_units(
        self,
        n: int,
        streams: UnitWords,
        units: int,
        *,
        counts: np.ndarray | None = None,
        out: np.ndarray | None = None,
    ) -> np.ndarray:
        """``n`` draws for each of ``units`` units, each from its own addressable stream.

        Row ``u`` reads words ``0 .. n-1`` of unit ``u``'s stream, one per draw, and, for
        the rare draws whose low bits tie with the threshold, the words ``n, n+1, ...``
        in the order of those draws: so row ``u`` is a function of unit ``u``'s stream
        and ``n`` only, whichever units are sampled with it and however they are read.
        Each draw uses the same exact comparison as :meth:`sample` (probabilities exactly
        ``weights / 2**128`` for uniform words). A row of at least :data:`PIECE` draws
        is read piece by piece from its own keystream (``streams.pieces``), shorter rows
        in batches of about :data:`BATCH` words (``streams.words``); either way the
        lookups run on work arrays of one piece or batch, reused, and ``counts`` are
        added to each piece while it is in the cache.

        Args:
            n: draws per unit.
            streams: has ``words(rows, start, count)``, a ``(len(rows), count)`` uint64
                array of words ``start..`` of those units' streams, and
                ``pieces(row, start, count, step)``, the same words of one unit in
                pieces (:class:`~censusdp.privacy.randomness.UnitStreams`).
            units: the number of units (rows ``0 .. units-1`` of ``streams``).
            counts: ``(units, n)`` ``int64`` added to the draws, or ``None``.
            out: a C-contiguous ``(units, n)`` ``int64`` array for the result (it may be
                ``counts`` itself), or ``None`` for a new one.
        """
        n, units = int(n), int(units)
        if n < 0:
            raise BudgetError(f"number of samples must be >= 0, got {n}")
        if out is None:
            out = np.empty((units, n), dtype=np.int64)
        for name, arr in (("counts", counts), ("out", out)):
            if arr is not None and (
                arr.shape != (units, n)
                or arr.dtype != np.int64
                or (arr is out and not arr.flags.c_contiguous)
            ):
                raise InternalError(
                    f"sample_units: {name} must be a ({units}, {n}) int64 array (out "
                    f"C-contiguous), got {arr.shape} {arr.dtype}"
                )
        if not n or not units:
            return out
        per_batch = 1 if n >= PIECE else min(units, BATCH // n)
        size = min(n, PIECE) * per_batch
        work = _Work(
            np.empty(size, dtype=np.uint64),
            np.empty(size, dtype=np.uint64),
            None if counts is None else np.empty(size, dtype=np.int64),
        )
        if n >= PIECE:
            for u in range(units):
                self._sample_row(out[u], None if counts is None else counts[u], streams, u, work)
            return out
        for first in range(0, units, per_batch):
            rows = np.arange(first, min(units, first + per_batch))
            block = slice(first, first + rows.size)
            ties = self._lookup_into(
                streams.words(rows, 0, n),
                out[block],
                None if counts is None else counts[block],
                work,
            )
            if ties.size:
                self._break_ties(
                    out[block].reshape(-1),
                    ties,
                    work.col[ties],
                    n,
                    lambda i, c, rows=rows: streams.words(rows[i : i + 1], n, c)[0],
                )
        return out

    def _lookup_into(
        self, words: np.ndarray, out: np.ndarray, counts: np.ndarray | None, work: _Work
    ) -> np.ndarray:
        """:meth:`_lookup` of ``words`` on the work arrays, into ``out`` (plus ``counts``)."""
        m = words.size
        col, diff = work.col[:m].reshape(words.shape), work.diff[:m].reshape(words.shape)
        if counts is None:
            return self._lookup(words, out, col, diff)
        assert work.draws is not None
        draws = work.draws[:m].reshape(words.shape)
        ties = self._lookup(words, draws, col, diff)
        np.add(counts, draws, out=out)
        return ties

    def _sample_row(
        self,
        row: np.ndarray,
        counts: np.ndarray | None,
        streams: UnitWords,
        u: int,
        work: _Work,
    ) -> None:
        """Unit ``u``'s draws (plus ``counts``) into ``row``: its words in pieces of
        :data:`PIECE`, then its tie words after them."""
        n = row.size
        tied, doubled, at = [], [], 0
        for words in streams.pieces(u, 0, n, PIECE):
            k = words.size
            piece = slice(at, at + k)
            ties = self._lookup_into(
                words, row[piece], None if counts is None else counts[piece], work
            )
            if ties.size:
                tied.append(ties + at)
                doubled.append(work.col[ties])
            at += k
        if tied:
            ties = np.concatenate(tied)
            self._break_ties(
                row, ties, np.concatenate(doubled), n, lambda _, c: streams.words([u], n, c)[0]
            )

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
        out = np.empty(words.size, dtype=np.int64)
        col = np.empty_like(words)
        ties = self._lookup(words, out, col, np.empty_like(words))
        if ties.size:  # ascending: grouped by stream, in order
            self._break_ties(out, ties, col[ties], n, lambda i, c: streams[i].uint64(c))
        return out.reshape(len(streams), n)


class _Work(NamedTuple):
    """The work arrays of :meth:`AliasTable.sample_units`, a piece or a batch of short
    rows each: the column index, the threshold difference and, when counts are added,
    the draws."""

    col: np.ndarray
    diff: np.ndarray
    draws: np.ndarray | None


_NO_TIES = np.zeros(0, dtype=np.intp)
_ONE = np.uint64(1)
_TOP_BIT = np.uint64(63)


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
    # (j << (64 - b)) + t_hi wraps to 0 only for the last column at full capacity
    t_words = (np.arange(N, dtype=np.uint64) << np.uint64(64 - b)) + t_hi
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
        threshold_words=t_words,
        values=values,
    )
