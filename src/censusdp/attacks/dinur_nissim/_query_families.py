"""Families of subset-sum queries on an n-bit Dinur-Nissim database.

A *query family* makes, for one trial, a stream of 0/1 query rows (each row ``w_q``
selects the bits that query ``q`` sums, JASON (JSR-19-2F) eq. (A-1)). Rows are produced in
order, block by block, so an ``80,000 x 4,000`` experiment never holds the whole
matrix. Families:

* ``random``: i.i.d. Bernoulli(1/2) entries, JASON's choice (JSR-19-2F sec. 4.3,
  Appendix B ``Q = randi([0,1], m, n)``).
* ``pairs``: disjoint pairs of bits (JASON (JSR-19-2F) App. A.1); each round of ``n // 2``
  queries is a fresh random perfect matching of the bits.
* ``msequence``: distinct circular shifts of a maximum-length LFSR sequence, for
  ``n = 2^k - 1`` (JASON (JSR-19-2F) App. A.5, autocorrelation eq. (A-9)).
* ``hadamard``: rows of the Sylvester Hadamard matrix of order ``n`` (a power of two)
  with -1 replaced by 0, excluding the all-ones row (JASON (JSR-19-2F) App. A.5, eq. (A-10)).
* ``matrix``: a user-supplied 0/1 (or any real) matrix, rows taken in order.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.linalg

from censusdp.errors import CensusDPError

__all__ = [
    "QUERY_FAMILIES",
    "QuerySource",
    "hadamard_rows",
    "make_source",
    "max_queries",
    "msequence",
]

_CHUNK = 256

QUERY_FAMILIES: tuple[str, ...] = ("random", "pairs", "msequence", "hadamard", "matrix")

# Feedback taps (exponents of a primitive polynomial over GF(2)) of maximum-length
# Fibonacci LFSRs, one per register length k; the period 2^k - 1 of each is checked
# by the test suite.
_LFSR_TAPS: dict[int, tuple[int, ...]] = {
    2: (2, 1),
    3: (3, 2),
    4: (4, 3),
    5: (5, 3),
    6: (6, 5),
    7: (7, 6),
    8: (8, 6, 5, 4),
    9: (9, 5),
    10: (10, 7),
    11: (11, 9),
    12: (12, 11, 10, 4),
    13: (13, 12, 11, 8),
    14: (14, 13, 12, 2),
    15: (15, 14),
    16: (16, 15, 13, 4),
    17: (17, 14),
    18: (18, 11),
    19: (19, 18, 17, 14),
    20: (20, 17),
}


def msequence(k: int) -> np.ndarray:
    """One period of a maximum-length LFSR sequence of register length ``k``.

    The sequence has period ``n = 2^k - 1``, ``(n + 1) / 2`` ones and the two-valued
    autocorrelation of JASON (JSR-19-2F) eq. (A-9): ``sum_i b_i b_{i+j}`` is ``(n + 1) / 2`` for
    ``j = 0 mod n`` and ``(n + 1) / 4`` otherwise.

    Args:
        k: register length, 2 to 20.

    Returns:
        int8 array of length ``2^k - 1``.
    """
    if k not in _LFSR_TAPS:
        raise CensusDPError(f"m-sequence register length k must be in 2..20; got {k}")
    taps = _LFSR_TAPS[k]
    n = (1 << k) - 1
    state = [1] + [0] * (k - 1)
    out = np.empty(n, dtype=np.int8)
    for i in range(n):
        out[i] = state[-1]
        fb = 0
        for t in taps:
            fb ^= state[t - 1]
        state = [fb] + state[:-1]
    return out


def hadamard_rows(n: int) -> np.ndarray:
    """The 0/1 query matrix of JASON (JSR-19-2F) App. A.5: ``W = (H + 1) / 2`` without the all-ones row.

    ``H`` is the Sylvester Hadamard matrix of order ``n`` (a power of two, >= 2). Any
    two distinct rows share ``n / 4`` ones and each has ``n / 2`` (eq. (A-10)).

    Returns:
        int8 array of shape ``(n - 1, n)``.
    """
    if n < 2 or n & (n - 1):
        raise CensusDPError(f"hadamard queries need n a power of two (>= 2); got n={n}")
    h = scipy.linalg.hadamard(n, dtype=np.int8)
    return ((h[1:] + 1) // 2).astype(np.int8)


def max_queries(family: str, n: int, matrix: np.ndarray | None = None) -> int | None:
    """Largest number of distinct queries a family can make on ``n`` bits (None: unbounded)."""
    if family in ("random", "pairs"):
        return None
    if family == "msequence":
        return n
    if family == "hadamard":
        return n - 1
    if family == "matrix":
        if matrix is None:
            raise CensusDPError("query family 'matrix' needs a matrix")
        return int(matrix.shape[0])
    raise CensusDPError(f"query family must be one of {QUERY_FAMILIES}; got {family!r}")


class QuerySource:
    """A stream of query rows for one trial; call :meth:`rows` with consecutive ranges.

    Args:
        family: one of :data:`QUERY_FAMILIES`.
        n: number of bits.
        rng: the trial's generator (used for random rows, matchings, shift orders).
        matrix: the query matrix for family ``matrix``.
    """

    def __init__(
        self, family: str, n: int, rng: np.random.Generator, matrix: np.ndarray | None = None
    ) -> None:
        self.family = family
        self.n = n
        self._rng = rng
        self._next = 0
        self._limit = max_queries(family, n, matrix)
        self._fixed: np.ndarray | None = None
        self._order: np.ndarray | None = None
        self._buf = np.zeros((0, n), dtype=np.float32)
        self._buf_pos = 0
        self._perm: np.ndarray | None = None
        if family == "msequence":
            k = int(round(np.log2(n + 1)))
            if (1 << k) - 1 != n:
                raise CensusDPError(f"msequence queries need n = 2^k - 1; got n={n}")
            seq = msequence(k)
            self._fixed = seq
            self._order = rng.permutation(n)
        elif family == "hadamard":
            self._fixed = hadamard_rows(n)
            self._order = rng.permutation(n - 1)
        elif family == "matrix":
            if matrix is None or matrix.ndim != 2 or matrix.shape[1] != n:
                raise CensusDPError(
                    f"query family 'matrix' needs a 2-D matrix with n={n} columns; got "
                    f"{None if matrix is None else matrix.shape}"
                )
            self._fixed = matrix
        self._build: dict[str, Callable[[int, int], np.ndarray]] = {
            "random": self._random,
            "pairs": self._pairs,
            "msequence": self._msequence,
            "hadamard": self._hadamard,
            "matrix": self._matrix,
        }

    def rows(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start .. stop-1`` as float32 (exact for 0/1 entries); ranges must be consecutive."""
        if start != self._next:
            raise CensusDPError(
                f"query rows must be requested in order: expected start {self._next}, got {start}"
            )
        if self._limit is not None and stop > self._limit:
            raise CensusDPError(
                f"query family {self.family!r} has at most {self._limit} distinct queries on "
                f"n={self.n} bits; {stop} were requested"
            )
        self._next = stop
        return self._build[self.family](start, stop)

    def _random(self, start: int, stop: int) -> np.ndarray:
        # Draw whole chunks of _CHUNK rows so the stream does not depend on how the
        # caller splits its requests.
        nbytes = (self.n + 7) // 8
        parts = []
        need = stop - start
        while need > 0:
            if self._buf_pos >= self._buf.shape[0]:
                raw = self._rng.integers(0, 256, size=(_CHUNK, nbytes), dtype=np.uint8)
                self._buf = np.unpackbits(raw, axis=1, count=self.n).astype(np.float32)
                self._buf_pos = 0
            k = min(need, self._buf.shape[0] - self._buf_pos)
            parts.append(self._buf[self._buf_pos : self._buf_pos + k])
            self._buf_pos += k
            need -= k
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _pairs(self, start: int, stop: int) -> np.ndarray:
        half = self.n // 2
        if half == 0:
            raise CensusDPError(f"pairs queries need n >= 2; got n={self.n}")
        out = np.zeros((stop - start, self.n), dtype=np.float32)
        perm = self._perm
        for r, q in enumerate(range(start, stop)):
            i = q % half
            if i == 0 or perm is None:
                perm = self._rng.permutation(self.n)
                self._perm = perm
            out[r, perm[2 * i]] = 1.0
            out[r, perm[2 * i + 1]] = 1.0
        return out

    def _msequence(self, start: int, stop: int) -> np.ndarray:
        assert self._fixed is not None and self._order is not None
        idx = (self._order[start:stop, None] + np.arange(self.n)[None, :]) % self.n
        return self._fixed[idx].astype(np.float32)

    def _hadamard(self, start: int, stop: int) -> np.ndarray:
        assert self._fixed is not None and self._order is not None
        return self._fixed[self._order[start:stop]].astype(np.float32)

    def _matrix(self, start: int, stop: int) -> np.ndarray:
        assert self._fixed is not None
        return np.asarray(self._fixed[start:stop], dtype=np.float64)


def make_source(
    family: str, n: int, rng: np.random.Generator, matrix: np.ndarray | None = None
) -> QuerySource:
    """Create the query stream of one trial (see :class:`QuerySource`)."""
    if family not in QUERY_FAMILIES:
        raise CensusDPError(f"query family must be one of {QUERY_FAMILIES}; got {family!r}")
    return QuerySource(family, n, rng, matrix)
