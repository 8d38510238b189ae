"""Workload and strategy matrices for the matrix mechanism (numerics only, no I/O).

A *workload* is a union of weighted Kronecker products of one-attribute query
matrices, ``W = [w_1 (F_11 (x) ... (x) F_1d); ...; w_T (F_T1 (x) ... (x) F_Td)]``, over a
histogram of ``n = n_1 ... n_d`` cells (McKenna et al. 2018, "Optimizing error of
high-dimensional statistical queries under differential privacy", sec. 4). A
one-attribute workload is the case ``d = 1, T = 1``; a set of marginals is the case
where every factor is the identity ``I`` (attribute kept) or the total ``1^T``
(attribute summed out). Only Gram matrices ``F^T F`` and column norms are ever needed,
so a factor stores those, never its (possibly huge) rows: all-range on ``n = 1024`` has
524,800 rows but a 1024 x 1024 Gram matrix.

A *strategy* is either a Kronecker product ``A_1 (x) ... (x) A_d`` of explicit (sparse
or dense) matrices, or a weighted set of marginals (:class:`MarginalsStrategy`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse

from censusdp.design._errors import DesignError

__all__ = [
    "MAX_DENSE_N",
    "EigenStrategy",
    "Factor",
    "KronStrategy",
    "MarginalsStrategy",
    "Workload",
    "all_range_factor",
    "haar_matrix",
    "hierarchical_matrix",
    "identity_factor",
    "marginal_keys_with_ways",
    "marginals_workload",
    "matrix_factor",
    "prefix_factor",
    "total_factor",
]

MAX_DENSE_N = 4096
"""Largest attribute size whose n x n Gram matrix is formed (128 MiB in float64)."""


@dataclass(frozen=True, eq=False)
class Factor:
    """One attribute's query matrix, held as its Gram matrix and column norms.

    Attributes:
        kind: ``"all-range"``, ``"prefix"``, ``"identity"``, ``"total"`` or ``"matrix"``.
        n: number of columns (attribute size).
        rows: number of queries (rows).
        gram: the n x n matrix ``F^T F``.
        col_l1: the L1 norm of every column (``sum_i |F_ij|``).
        rank: rank of ``F``.
    """

    kind: str
    n: int
    rows: int
    gram: np.ndarray
    col_l1: np.ndarray
    rank: int

    @property
    def col_l2_sq(self) -> np.ndarray:
        """Squared L2 norm of every column: the diagonal of the Gram matrix."""
        return np.diag(self.gram).copy()


def _check_n(n: int, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise DesignError(f"{what}: size is {n!r}; it must be a positive integer")
    if n > MAX_DENSE_N:
        raise DesignError(
            f"{what}: size is {n}; at most {MAX_DENSE_N} is supported (its {n} x {n} Gram "
            "matrix is formed)"
        )
    return int(n)


def all_range_factor(n: int) -> Factor:
    """All ``n (n + 1) / 2`` interval queries ``[i, j]``, ``0 <= i <= j < n``.

    Gram: ``(W^T W)_{ij} = (min(i, j) + 1) (n - max(i, j))``, the number of intervals
    holding both cells; column ``j`` lies in ``(j + 1)(n - j)`` intervals.
    """
    n = _check_n(n, "all-range")
    i = np.arange(n)
    gram = ((np.minimum.outer(i, i) + 1) * (n - np.maximum.outer(i, i))).astype(float)
    return Factor("all-range", n, n * (n + 1) // 2, gram, np.diag(gram).copy(), n)


def prefix_factor(n: int) -> Factor:
    """The ``n`` prefix queries ``[0, j]`` (an empirical CDF).

    Gram: ``(W^T W)_{ij} = n - max(i, j)``.
    """
    n = _check_n(n, "prefix")
    i = np.arange(n)
    gram = (n - np.maximum.outer(i, i)).astype(float)
    return Factor("prefix", n, n, gram, np.diag(gram).copy(), n)


def identity_factor(n: int) -> Factor:
    """Every cell on its own (``I_n``)."""
    n = _check_n(n, "identity")
    return Factor("identity", n, n, np.eye(n), np.ones(n), n)


def total_factor(n: int) -> Factor:
    """The single query summing all cells (``1^T``); its Gram matrix is all ones."""
    n = _check_n(n, "total")
    return Factor("total", n, 1, np.ones((n, n)), np.ones(n), 1)


def matrix_factor(matrix: np.ndarray | sparse.spmatrix) -> Factor:
    """A factor from an explicit query matrix."""
    a = sparse.csr_matrix(matrix, dtype=float)
    n = _check_n(a.shape[1], "matrix")
    gram = (a.T @ a).toarray()
    col_l1 = np.asarray(abs(a).sum(axis=0)).ravel()
    rank = int(np.linalg.matrix_rank(gram, hermitian=True)) if a.nnz else 0
    return Factor("matrix", n, a.shape[0], gram, col_l1, rank)


@dataclass(frozen=True, eq=False)
class Workload:
    """A union of weighted Kronecker products of factors.

    Attributes:
        name: the workload's name as given by the user.
        domain: attribute sizes ``(n_1, ..., n_d)``.
        terms: ``(weight, (F_1, ..., F_d))`` pairs.
        marginal_keys: for a marginals workload, the kept-attribute set of each term
            (as a bit mask: bit ``i`` set when attribute ``i`` is kept), else ``None``.
    """

    name: str
    domain: tuple[int, ...]
    terms: tuple[tuple[float, tuple[Factor, ...]], ...]
    marginal_keys: tuple[int, ...] | None = field(default=None)

    def __post_init__(self) -> None:
        if not self.terms:
            raise DesignError("workload has no queries")
        for weight, factors in self.terms:
            if len(factors) != len(self.domain):
                raise DesignError(
                    f"workload term has {len(factors)} factors for a {len(self.domain)}-"
                    "attribute domain"
                )
            if tuple(f.n for f in factors) != self.domain:
                raise DesignError(
                    f"workload term sizes {tuple(f.n for f in factors)} differ from the "
                    f"domain {self.domain}"
                )
            if not weight > 0:
                raise DesignError(f"workload weight is {weight}; weights must be positive")

    @property
    def n(self) -> int:
        """Number of histogram cells."""
        return math.prod(self.domain)

    @property
    def m(self) -> int:
        """Number of queries (rows of ``W``)."""
        return sum(math.prod(f.rows for f in factors) for _, factors in self.terms)

    @property
    def is_marginals(self) -> bool:
        """True when every factor is an identity or a total."""
        return self.marginal_keys is not None


def marginals_workload(
    name: str, domain: tuple[int, ...], keys: list[int], weights: list[float] | None = None
) -> Workload:
    """Marginals over ``domain``; key bit ``i`` set means attribute ``i`` is kept."""
    d = len(domain)
    if not keys:
        raise DesignError("a marginals workload needs at least one marginal")
    weights = [1.0] * len(keys) if weights is None else list(weights)
    terms = []
    for key in keys:
        if not 0 <= key < 2**d:
            raise DesignError(f"marginal key {key} is outside 0..{2**d - 1}")
        factors = tuple(
            identity_factor(n) if key >> i & 1 else total_factor(n) for i, n in enumerate(domain)
        )
        terms.append(factors)
    return Workload(
        name, tuple(domain), tuple(zip(weights, terms, strict=True)), marginal_keys=tuple(keys)
    )


# -- strategies ------------------------------------------------------------------------


def _interval_rows(n: int, intervals: list[tuple[int, int]]) -> sparse.csr_matrix:
    """0/1 matrix with one row per half-open interval ``[lo, hi)``."""
    indptr = [0]
    indices: list[int] = []
    for lo, hi in intervals:
        indices.extend(range(lo, hi))
        indptr.append(len(indices))
    data = np.ones(len(indices))
    return sparse.csr_matrix((data, indices, indptr), shape=(len(intervals), n))


def hierarchical_matrix(n: int, branching: int = 2) -> sparse.csr_matrix:
    """The hierarchical (tree) strategy ``H_b`` on ``n`` cells, root included.

    The root counts every cell; each node of size ``s > 1`` has ``min(b, s)`` children
    of contiguous sizes as equal as possible, larger ones first (``s = q b + r``: ``r``
    children of ``q + 1`` cells, then ``b - r`` of ``q``); leaves are single cells. Each
    node is one unweighted query (Hay et al. 2010, "Boosting the accuracy of
    differentially private histograms through consistency"; Qardaji, Yang & Li 2013,
    "Understanding hierarchical methods for differentially private histograms"). For
    ``n = b^k`` there are ``k + 1`` levels, so every column has L1 norm ``k + 1`` and L2
    norm ``sqrt(k + 1)``.
    """
    if isinstance(branching, bool) or not isinstance(branching, int) or branching < 2:
        raise DesignError(f"branching is {branching!r}; it must be an integer >= 2")
    intervals: list[tuple[int, int]] = []
    stack = [(0, n)]
    while stack:
        lo, hi = stack.pop()
        intervals.append((lo, hi))
        size = hi - lo
        if size == 1:
            continue
        k = min(branching, size)
        q, r = divmod(size, k)
        start = lo
        children = []
        for c in range(k):
            width = q + 1 if c < r else q
            children.append((start, start + width))
            start += width
        stack.extend(reversed(children))
    intervals.sort(key=lambda iv: (-(iv[1] - iv[0]), iv[0]))
    return _interval_rows(n, intervals)


def haar_matrix(n: int) -> sparse.csr_matrix:
    """The (unnormalised) Haar wavelet strategy on ``n`` cells.

    For ``n = 2^k``: the total ``1^T``, then for every dyadic interval of length
    ``L >= 2`` the row with ``+1`` on its left half and ``-1`` on its right half:
    ``n`` rows, entries in ``{0, +1, -1}``, every column with ``k + 1`` non-zeros (L1
    norm ``k + 1``, L2 norm ``sqrt(k + 1)``). This is the Privelet strategy of Xiao, Wang
    & Gehrke (2010), "Differential privacy via wavelet transforms", before its per-level
    weights. It is built recursively as ``Y_n = [Y_{n/2} (x) (1, 1); I_{n/2} (x) (1, -1)]``.

    For other ``n`` the matrix for the next power of two is cut to its first ``n``
    columns and rows that became zero or repeat an earlier row are dropped.
    """
    size = 1 << max(0, (n - 1).bit_length())
    y = sparse.csr_matrix(np.ones((1, 1)))
    width = 1
    while width < size:
        y = sparse.vstack(
            [
                sparse.kron(y, np.array([[1.0, 1.0]])),
                sparse.kron(sparse.identity(width), np.array([[1.0, -1.0]])),
            ],
            format="csr",
        )
        width *= 2
    if size == n:
        return y
    cut = y[:, :n].toarray()
    keep: list[int] = []
    seen: set[bytes] = set()
    for i, row in enumerate(cut):
        if not row.any():
            continue
        key = row.tobytes()
        if key in seen:
            continue
        seen.add(key)
        keep.append(i)
    return sparse.csr_matrix(cut[keep])


@dataclass(frozen=True, eq=False)
class KronStrategy:
    """The strategy ``A_1 (x) ... (x) A_d`` (one explicit matrix per attribute).

    Attributes:
        factors: one matrix per attribute (dense or scipy sparse), ``A_i`` with
            ``n_i`` columns.
        name: a label for reports.
    """

    factors: tuple[np.ndarray | sparse.spmatrix, ...]
    name: str = "kron"

    @property
    def rows(self) -> int:
        """Number of strategy queries."""
        return math.prod(a.shape[0] for a in self.factors)

    def grams(self) -> list[np.ndarray]:
        """``A_i^T A_i`` for every attribute, dense."""
        out = []
        for a in self.factors:
            g = a.T @ a
            out.append(g.toarray() if sparse.issparse(g) else np.asarray(g, dtype=float))
        return out

    def column_norm(self, p: int) -> float:
        """Largest column Lp norm (p = 1 or 2) of the Kronecker product.

        Columns of ``A (x) B`` are Kronecker products of columns, whose L1 and L2 norms
        multiply, so the largest is the product of the factors' largest.
        """
        out = 1.0
        for a in self.factors:
            if p == 1:
                col = np.asarray(abs(a).sum(axis=0)).ravel()
            else:
                sq = a.multiply(a) if sparse.issparse(a) else np.square(a)
                col = np.sqrt(np.asarray(sq.sum(axis=0)).ravel())
            out *= float(col.max())
        return out


@dataclass(frozen=True, eq=False)
class MarginalsStrategy:
    """A weighted set of marginals: rows ``theta_K M_K`` for every key ``K``.

    Attributes:
        domain: attribute sizes.
        theta: ``2^d`` non-negative weights, indexed by kept-attribute bit mask.
        name: a label for reports.
    """

    domain: tuple[int, ...]
    theta: np.ndarray
    name: str = "marginals"

    @property
    def rows(self) -> int:
        """Number of strategy queries (marginals with non-zero weight)."""
        return sum(
            math.prod(n for i, n in enumerate(self.domain) if key >> i & 1)
            for key in range(2 ** len(self.domain))
            if self.theta[key] != 0
        )

    def column_norm(self, p: int) -> float:
        """Largest column Lp norm: every marginal has one 1 per column, so a column's
        L1 norm is ``sum_K theta_K`` and its L2 norm ``sqrt(sum_K theta_K^2)``."""
        t = np.abs(self.theta)
        return float(t.sum()) if p == 1 else float(np.sqrt(np.square(t).sum()))


@dataclass(frozen=True, eq=False)
class EigenStrategy:
    """A strategy with Gram ``sum_S mu_S P_S`` over the common eigenspaces of marginal
    Gram matrices (see :func:`censusdp.design._accuracy.marginal_eigen`).

    ``P_S = (x)_i Q_i`` projects onto eigenspace ``S``: ``Q_i = J / n_i`` (the constant
    vector) for attributes in ``S``, ``I - J / n_i`` (its complement) for the others. The
    strategy measures the rows of ``sqrt(mu_S) P_S`` for every ``S`` with ``mu_S > 0``:
    contrasts, not counts, which reach the L2 optimum of a marginals workload where no
    set of weighted marginals does.

    Attributes:
        domain: attribute sizes.
        mu: ``2^d`` non-negative eigenvalues, indexed by eigenspace bit mask.
        name: a label for reports.
    """

    domain: tuple[int, ...]
    mu: np.ndarray
    name: str = "eigen"

    @property
    def rows(self) -> int:
        """Number of strategy queries (``n`` rows of every measured projector)."""
        return math.prod(self.domain) * int(np.count_nonzero(self.mu))

    def column_norm(self, p: int) -> float:
        """Largest column Lp norm. Every column of ``P_S`` has squared L2 norm ``dim(S) /
        n`` and L1 norm ``prod_{i not in S} 2 (n_i - 1) / n_i`` (a column of ``I - J / n``
        has ``1 - 1/n`` once and ``-1/n`` ``n - 1`` times), the same for every column."""
        out = 0.0
        for key, mu in enumerate(self.mu):
            if mu == 0:
                continue
            free = [n for i, n in enumerate(self.domain) if not key >> i & 1]
            if p == 1:
                out += math.sqrt(mu) * math.prod(2.0 * (n - 1) / n for n in free)
            else:
                out += mu * math.prod(n - 1 for n in free) / math.prod(self.domain)
        return out if p == 1 else math.sqrt(out)


def marginal_keys_with_ways(d: int, ways: list[int] | None) -> list[int]:
    """Bit masks of every marginal whose number of kept attributes is in ``ways``
    (``None``: all ``2^d`` marginals), ordered by size then mask."""
    keys = [
        k for k in range(2**d) if ways is None or bin(k).count("1") in ways
    ]  # bit i = attribute i kept
    keys.sort(key=lambda k: (bin(k).count("1"), k))
    return keys
