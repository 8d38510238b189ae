"""The fast paths of ``AliasTable.sample_units`` against the sampling rule, written plainly.

A release's noise is a fixed map from each unit's stream words to draws (the module
docstring of ``censusdp.privacy.mechanisms._table``): word ``i`` of unit ``u`` gives draw
``i``, its top ``b`` bits the column ``j``, and the draw is column ``j``'s own outcome
when the 128-bit uniform ``r`` (the word's low ``64 - b`` bits, then the unit's next
tie word when they equal the threshold's high part) is below the column's 128-bit
threshold, its alias otherwise. ``_reference`` applies that rule one draw at a time on
Python integers; every way of reading the words (rows of at least ``PIECE`` draws piece
by piece from one keystream, shorter rows in batches, counts added or not, in place or
not) must give exactly its draws, on random tables, words and forced ties.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.errors import CensusDPError
from censusdp.privacy.mechanisms import DiscreteGaussian, Geometric
from censusdp.privacy.mechanisms._table import PIECE, AliasTable
from censusdp.privacy.randomness import RandomSource
from profiles import examples


def _reference(table: AliasTable, words: list[int], n: int) -> list[int]:
    """The draws of one unit whose stream is ``words`` (its ``n`` draws, then tie words)."""
    b = table.column_bits
    draws, next_tie = [], n
    for w in words[:n]:
        j = w >> (64 - b)
        r_hi = w & ((1 << (64 - b)) - 1)
        threshold = (int(table.threshold_hi[j]) << 64) | int(table.threshold_lo[j])
        if r_hi == threshold >> 64:  # a tie: the uniform's low 64 bits are the next tie word
            r = (r_hi << 64) | words[next_tie]
            next_tie += 1
        else:
            r = r_hi << 64  # the low bits cannot change the comparison
        primary = r < threshold
        draws.append(int(table.values[2 * j + 1] if primary else table.values[2 * j]))
    return draws


class _Streams:
    """Scripted unit streams with both readers of ``UnitStreams``: ``words`` (a window of
    many units) and ``pieces`` (one unit's window, piece by piece, into one buffer)."""

    def __init__(self, per_unit: list[list[int]]) -> None:
        self.per_unit = [np.array(w, dtype=np.uint64) for w in per_unit]

    def words(self, rows, start: int, count: int) -> np.ndarray:
        rows = np.asarray(rows).reshape(-1)
        out = np.empty((rows.size, count), dtype=np.uint64)
        for i, r in enumerate(rows.tolist()):
            got = self.per_unit[r][start : start + count]
            assert got.size == count, "read past the scripted words"
            out[i] = got
        return out

    def pieces(self, row: int, start: int, count: int, step: int):
        buffer = np.empty(step, dtype=np.uint64)  # reused, as UnitStreams does
        for at in range(start, start + count, step):
            k = min(step, start + count - at)
            buffer[:k] = self.words([row], at, k)[0]
            yield buffer[:k]


def _tie_word(table: AliasTable, j: int) -> int:
    """A word of column ``j`` whose high part ties with the column's threshold."""
    return (j << (64 - table.column_bits)) | int(table.threshold_hi[j])


def _scripted(table: AliasTable, rng: np.random.Generator, units: int, n: int, ties: int):
    """Random words for ``units`` units of ``n`` draws, ``ties`` tied draws forced among
    them (columns with a threshold strictly inside the column; the first and the last
    draw always, so that a long row has ties in its first and its last piece), and the
    tie words."""
    b = table.column_bits
    inside = [
        j
        for j in range(1 << b)
        if 0 < int(table.threshold_hi[j]) < 1 << (64 - b) and int(table.threshold_lo[j]) > 0
    ]
    streams = []
    for _ in range(units):
        words = rng.integers(0, 2**64, size=n, dtype=np.uint64, endpoint=False).tolist()
        k = 0
        forced = {0, n - 1, *rng.choice(n, size=min(ties, n), replace=False).tolist()}
        for at in sorted(forced):
            j = inside[int(rng.integers(len(inside)))]
            words[at] = _tie_word(table, j)
            k += 1
        lows = []
        for _ in range(k):  # each tie word below, at or above the column's low threshold
            lo = int(table.threshold_lo[int(rng.choice(inside))])
            lows.append([0, lo - 1, lo, 2**64 - 1][int(rng.integers(4))])
        streams.append([int(w) for w in words] + lows)
    return streams


TABLES = [
    DiscreteGaussian(Fraction(3)),
    DiscreteGaussian(Fraction(10000, 11)),
    Geometric(Fraction(125, 3)),
    Geometric(Fraction(1, 2)),  # a tiny scale: few columns, most of them padding
]


@pytest.mark.parametrize("mech", TABLES, ids=repr)
@pytest.mark.parametrize(
    ("units", "n"), [(3, PIECE + 1), (1, 2 * PIECE + 37), (40, 5), (7, PIECE - 1), (300, 1)]
)
def test_sample_units_is_the_sampling_rule(mech, units: int, n: int) -> None:
    """Long rows (pieces) and short rows (batches), with ties in every row."""
    table = mech._profile.table
    rng = np.random.default_rng(units * 1000 + n)
    per_unit = _scripted(table, rng, units, n, ties=3)
    want = [_reference(table, w, n) for w in per_unit]
    got = table.sample_units(n, _Streams(per_unit), units)
    assert got.tolist() == want
    counts = rng.integers(-5, 1000, size=(units, n))
    added = table.sample_units(n, _Streams(per_unit), units, counts=counts)
    np.testing.assert_array_equal(added, counts + np.array(want))
    in_place = counts.copy()
    assert table.sample_units(n, _Streams(per_unit), units, counts=in_place, out=in_place) is (
        in_place
    )
    np.testing.assert_array_equal(in_place, added)


@settings(max_examples=examples(30), deadline=None)
@given(
    scale=st.fractions(Fraction(1, 4), Fraction(400)),
    gaussian=st.booleans(),
    units=st.integers(1, 4),
    n=st.sampled_from([1, 2, 33, 511, PIECE - 1, PIECE, PIECE + 5]),
    seed=st.integers(0, 2**32 - 1),
)
def test_release_units_is_the_sampling_rule_on_real_streams(scale, gaussian, units, n, seed):
    """``release_units`` on AES unit streams: each row is the reference rule applied to
    that unit's words as :meth:`UnitStreams.words` reads them, plus its counts."""
    mech = DiscreteGaussian(scale) if gaussian else Geometric(scale)
    table = mech._profile.table
    source = RandomSource.seeded(seed)
    codes = [f"50{u:013d}" for u in range(units)]
    counts = np.random.default_rng(seed).integers(0, 50, size=(units, n))
    got = mech.release_units(counts, source, ("Block", "q"), codes)
    words = source.unit_streams("Block", "q", codes=codes).words(np.arange(units), 0, n + 4)
    for u in range(units):  # a tie is rarer than 2**-43 here: n + 4 words are enough
        want = np.array(_reference(table, [int(w) for w in words[u]], n))
        np.testing.assert_array_equal(got[u], counts[u] + want)


def test_release_units_in_place_is_the_same_release() -> None:
    """``out=values`` (how measuring calls it) writes the same noisy values into the
    counts' own array; an unusable ``out`` is refused in one line naming it."""
    mech = Geometric(Fraction(125, 3))
    source = RandomSource.seeded(5)
    codes = ["5000000000000001", "5000000000000002"]
    values = np.arange(2 * (PIECE + 3), dtype=np.int64).reshape(2, -1)
    fresh = mech.release_units(values, source, ("Block", "q"), codes)
    assert not np.array_equal(fresh, values)
    same = values.copy()
    assert mech.release_units(same, source, ("Block", "q"), codes, out=same) is same
    np.testing.assert_array_equal(same, fresh)
    frozen = values.copy()
    frozen.flags.writeable = False
    strided = np.zeros((4, values.shape[1]), dtype=np.int64)[::2]
    for bad in (values.astype(np.int32), strided, frozen, values[:1], [[0]]):
        with pytest.raises(CensusDPError, match="^release_units: out must be a writeable C-cont"):
            mech.release_units(values, source, ("Block", "q"), codes, out=bad)
