"""Accuracy metrics of a released table against the truth (pure NumPy, no I/O).

A comparison is a set of *pairs* ``(t, r)``: the true and the released value of one
published count (a table line, a histogram cell, a total) of one geounit. Sparse
comparisons keep only the pairs where either value is non-zero and count the rest
(``t = r = 0``, error 0, true-count bin ``0``) in :attr:`Pairs.n_zero`.

Definitions (every number in the evaluation JSON is one of these):

* error ``e = r - t`` (released minus true).
* MAE ``= sum |e| / n``, RMSE ``= sqrt(sum e^2 / n)``, bias (mean signed error)
  ``= sum e / n``, over the ``n`` counts compared.
* TVD (JASON 2020, sec. 6.1): ``TVD = 1 - L1 / (2 POP)`` with ``L1 = sum |e|`` over the
  counts of a *partition* of the universe (total population: one count per geounit;
  a table: its leaf lines; a histogram: its cells) at every geounit of the level, and
  ``POP = sum t`` over the same counts (the true universe total of the level).
* true-count bins: ``0``, ``1-9``, ``10-99``, ``100-999``, ``1000+`` of ``t``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from censusdp.errors import InternalError
from censusdp.tables.geoids import geo_identifiers

__all__ = [
    "COUNT_BINS",
    "Pairs",
    "all_under18_share",
    "bin_index",
    "error_stats",
    "largest_errors",
    "occupancy_full_share",
    "table_record",
    "tvd",
]

COUNT_BINS: tuple[tuple[str, int, float], ...] = (
    ("0", 0, 0),
    ("1-9", 1, 9),
    ("10-99", 10, 99),
    ("100-999", 100, 999),
    ("1000+", 1000, math.inf),
)
"""True-count bins ``(label, lowest, highest)`` (inclusive)."""

_EDGES = np.asarray([1, 10, 100, 1000], dtype=np.int64)


def bin_index(true_counts: np.ndarray) -> np.ndarray:
    """Index into :data:`COUNT_BINS` of each true count (negative counts go to bin 0)."""
    return np.searchsorted(_EDGES, np.asarray(true_counts, dtype=np.int64), side="right")


@dataclass(frozen=True)
class Pairs:
    """True and released values of compared counts.

    Attributes:
        t: true values of the stored pairs (int64).
        r: released values of the stored pairs (int64), same shape as ``t``.
        n_zero: number of further pairs with ``t = r = 0`` that are not stored.
    """

    t: np.ndarray
    r: np.ndarray
    n_zero: int = 0

    def __post_init__(self) -> None:
        if self.t.shape != self.r.shape:
            raise InternalError(f"pairs have shapes {self.t.shape} and {self.r.shape}")
        if self.n_zero < 0:
            raise InternalError(f"pairs have n_zero {self.n_zero} < 0")

    @property
    def n(self) -> int:
        """Number of counts compared."""
        return int(self.t.size + self.n_zero)

    @classmethod
    def dense(cls, truth: np.ndarray, released: np.ndarray) -> Pairs:
        """All entries of two same-shape dense arrays."""
        t = np.asarray(truth, dtype=np.int64).ravel()
        r = np.asarray(released, dtype=np.int64).ravel()
        return cls(t, r, 0)

    @classmethod
    def sparse(cls, truth: sp.spmatrix, released: sp.spmatrix, n_total: int | None = None) -> Pairs:
        """The union of the non-zero patterns of two same-shape sparse matrices.

        Args:
            truth, released: ``(units x cells)`` sparse matrices.
            n_total: number of counts compared (default: every entry of the shape;
                pass fewer to leave out structural-zero cells, which must be zero in
                both).
        """
        if truth.shape != released.shape:
            raise InternalError(f"sparse shapes differ: {truth.shape} vs {released.shape}")
        tc = sp.coo_matrix(truth)
        rc = sp.coo_matrix(released)
        ncol = truth.shape[1]
        keys = np.concatenate(
            [tc.row.astype(np.int64) * ncol + tc.col, rc.row.astype(np.int64) * ncol + rc.col]
        )
        vals_t = np.concatenate([tc.data.astype(np.int64), np.zeros(rc.nnz, dtype=np.int64)])
        vals_r = np.concatenate([np.zeros(tc.nnz, dtype=np.int64), rc.data.astype(np.int64)])
        uniq, inv = np.unique(keys, return_inverse=True)
        t = np.bincount(inv, weights=vals_t, minlength=uniq.size).astype(np.int64)
        r = np.bincount(inv, weights=vals_r, minlength=uniq.size).astype(np.int64)
        keep = (t != 0) | (r != 0)
        total = truth.shape[0] * ncol if n_total is None else int(n_total)
        return cls(t[keep], r[keep], total - int(keep.sum()))

    def concat(self, other: Pairs) -> Pairs:
        """Both sets of pairs."""
        return Pairs(
            np.concatenate([self.t, other.t]),
            np.concatenate([self.r, other.r]),
            self.n_zero + other.n_zero,
        )


def tvd(pairs: Pairs) -> dict[str, float]:
    """``TVD = 1 - L1 / (2 POP)`` over a partition (JASON 2020, sec. 6.1).

    Args:
        pairs: the counts of a partition of the universe at every geounit of a level.

    Returns:
        ``{"tvd", "l1", "pop"}``; ``tvd`` is NaN when ``POP = 0``.
    """
    l1 = int(np.abs(pairs.r - pairs.t).sum())
    pop = int(pairs.t.sum())
    value = 1.0 - l1 / (2.0 * pop) if pop > 0 else math.nan
    return {"tvd": value, "l1": l1, "pop": pop}


def table_record(truth: np.ndarray, released: np.ndarray, leaves: Sequence[int]) -> dict[str, Any]:
    """Accuracy of one table at one level from dense ``(units x lines)`` arrays: the L1
    and TVD of its leaf lines (:func:`tvd`), and the MAE, RMSE and bias of every line,
    by true-count bin too (:func:`error_stats`)."""
    cols = list(leaves)
    rec: dict[str, Any] = dict(tvd(Pairs.dense(truth[:, cols], released[:, cols])))
    rec.update(error_stats(Pairs.dense(truth, released)))
    return rec


def _summary(e: np.ndarray, n_zero: int) -> dict[str, Any]:
    n = int(e.size + n_zero)
    if n == 0:
        return {
            "n": 0,
            "sum_abs_error": 0,
            "sum_error": 0,
            "sum_sq_error": 0,
            "mae": math.nan,
            "rmse": math.nan,
            "bias": math.nan,
            "max_abs_error": 0,
        }
    abs_e = np.abs(e)
    s_abs = int(abs_e.sum())
    s = int(e.sum())
    s_sq = float(np.dot(e.astype(np.float64), e.astype(np.float64)))
    return {
        "n": n,
        "sum_abs_error": s_abs,
        "sum_error": s,
        "sum_sq_error": s_sq,
        "mae": s_abs / n,
        "rmse": math.sqrt(s_sq / n),
        "bias": s / n,
        "max_abs_error": int(abs_e.max()) if abs_e.size else 0,
    }


def error_stats(pairs: Pairs) -> dict[str, Any]:
    """MAE, RMSE, bias (mean signed error) and max |error|, overall and by true-count bin.

    Unstored pairs (``t = r = 0``) count as errors of 0 in bin ``0``.

    Returns:
        ``{"n", "sum_abs_error", "sum_error", "sum_sq_error", "mae", "rmse", "bias",
        "max_abs_error", "by_bin": {label: same keys}}``.
    """
    e = pairs.r - pairs.t
    out = _summary(e, pairs.n_zero)
    bins = bin_index(pairs.t)
    out["by_bin"] = {
        label: _summary(e[bins == i], pairs.n_zero if i == 0 else 0)
        for i, (label, _, _) in enumerate(COUNT_BINS)
    }
    return out


def largest_errors(
    truth: np.ndarray,
    released: np.ndarray,
    geocodes: np.ndarray,
    k: int = 10,
    columns: tuple[str, ...] | None = None,
) -> list[dict[str, Any]]:
    """The ``k`` largest absolute errors of a dense ``(units x columns)`` comparison.

    Ties are broken by geounit order then column order, so the list is deterministic.
    Each row names its geounit by ``geocode`` and by the Census ``GEOID`` and ``NAME``
    (:func:`censusdp.tables.geoids.geo_identifiers`; ``GEOID`` null where undefined).
    """
    t = np.asarray(truth, dtype=np.int64)
    r = np.asarray(released, dtype=np.int64)
    if t.ndim == 1:
        t, r = t[:, None], r[:, None]
    err = (r - t).ravel()
    if err.size == 0:
        return []
    k = min(k, err.size)
    order = np.lexsort((np.arange(err.size), -np.abs(err)))[:k]
    out = []
    ncol = t.shape[1]
    for flat in order:
        unit, col = divmod(int(flat), ncol)
        row: dict[str, Any] = {"geocode": str(geocodes[unit])}
        if columns is not None:
            row["variable"] = columns[col]
        row.update(true=int(t.ravel()[flat]), released=int(r.ravel()[flat]), error=int(err[flat]))
        out.append(row)
    codes = np.asarray([row["geocode"] for row in out])
    ids = geo_identifiers(codes, len(out[0]["geocode"]))
    for i, row in enumerate(out):
        row["GEOID"], row["NAME"] = ids["GEOID"][i], ids["NAME"][i]
    return out


def occupancy_full_share(housing_units: np.ndarray, occupied: np.ndarray) -> dict[str, Any]:
    """Share of geounits with housing units whose occupancy rate is 100% (no vacant unit).

    The 2010 Demonstration Data Product showed 310 of 3,221 counties at 100% occupancy
    against none in SF1 (Van Riper, Kugler & Ruggles 2020, sec. 3).

    Returns:
        ``{"n_units", "n_full", "share"}`` over geounits with ``housing_units > 0``.
    """
    hu = np.asarray(housing_units, dtype=np.int64)
    occ = np.asarray(occupied, dtype=np.int64)
    has = hu > 0
    n = int(has.sum())
    full = int((has & (occ >= hu)).sum())
    return {"n_units": n, "n_full": full, "share": full / n if n else math.nan}


def all_under18_share(
    population: np.ndarray, adults: np.ndarray, min_population: int = 1
) -> dict[str, Any]:
    """Share of geounits with at least ``min_population`` people and no adult (all under 18).

    JASON (JSR-19-2F) sec. 6.2 (Figure 6-8 discussion): enumeration districts with 50 or more
    people released as 100% under 18.

    Returns:
        ``{"min_population", "n_units", "n_all_under18", "share"}``.
    """
    pop = np.asarray(population, dtype=np.int64)
    ad = np.asarray(adults, dtype=np.int64)
    big = pop >= max(min_population, 1)
    n = int(big.sum())
    hit = int((big & (ad == 0)).sum())
    return {
        "min_population": int(min_population),
        "n_units": n,
        "n_all_under18": hit,
        "share": hit / n if n else math.nan,
    }
