"""Closed-form error of the noisy measurements, and a check of it against the truth.

Every noisy measurement ``y = q(x) + noise`` in the NMF carries the variance of its
noise (Gong 2022: a transparent release publishes the mechanism, so a user knows
``sd = sqrt(variance)`` without seeing the data; for the discrete Gaussian with
``rho_q`` allotted to a query, ``variance ~= 1 / rho_q`` under bounded neighbours,
production's convention, and ``1 / (2 rho_q)`` under unbounded ones). The stated
variance is read from the NMF, never recomputed. This module summarises those
closed-form standard deviations per (geolevel, query) and, when the truth is known, compares them with the realised noise
``e = y - q(x)``: the empirical variance of ``e`` should match the stated variance,
and about 90% of measurements should lie within ``1.645 sd`` of the truth.

The NMF is consumed as a stream of Arrow record batches, so files with tens of
millions of rows are summarised in bounded memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy

__all__ = ["Z90", "nmf_summary"]

Z90 = 1.6448536269514722
"""Standard normal 95% quantile: ``value +- Z90 * sd`` is a 90% interval for Gaussian noise."""

TruthLookup = Callable[[str, str], sp.csr_matrix | None]


@dataclass
class _Acc:
    n: int = 0
    var_min: float = math.inf
    var_max: float = -math.inf
    var_sum: float = 0.0
    variances: set[float] = field(default_factory=set)
    mechanism: str = ""
    n_truth: int = 0
    e_sum: float = 0.0
    e_sq: float = 0.0
    z_sq: float = 0.0
    inside90: int = 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n": self.n,
            "mechanism": self.mechanism,
            "variance_min": self.var_min,
            "variance_max": self.var_max,
            "sd_min": math.sqrt(max(self.var_min, 0.0)),
            "sd_max": math.sqrt(max(self.var_max, 0.0)),
            "sd_mean_variance": math.sqrt(self.var_sum / self.n) if self.n else math.nan,
            "distinct_variances": sorted(self.variances)[:8],
            "interval90_halfwidth": Z90 * math.sqrt(self.var_sum / self.n) if self.n else math.nan,
        }
        if self.n_truth:
            m = self.n_truth
            out["empirical"] = {
                "n": m,
                "mean_error": self.e_sum / m,
                "error_variance": self.e_sq / m,
                "variance_ratio": (self.e_sq / m) / (self.var_sum / self.n)
                if self.var_sum
                else math.nan,
                "mean_z_squared": self.z_sq / m,
                "coverage90": self.inside90 / m,
            }
        return out


def _as_strings(col: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(dictionary values, index per row) for a string or dictionary column."""
    if pa.types.is_dictionary(col.type):
        d = np.asarray(col.dictionary.to_numpy(zero_copy_only=False)).astype(str)
        return d, np.asarray(col.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    values = np.asarray(col.to_numpy(zero_copy_only=False)).astype(str)
    d, idx = np.unique(values, return_inverse=True)
    return d, idx.astype(np.int64)


class _Truth:
    """True answers of one (geolevel, query): a sorted CSR matrix with fast lookups."""

    def __init__(self, answers: sp.spmatrix) -> None:
        self.m = sp.csr_matrix(answers)
        self.m.sort_indices()
        self.ncol = int(self.m.shape[1])
        self._keys: np.ndarray | None = None

    def values(self, units: np.ndarray, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """True answers at (unit, cell); returns (values, ok) where ok marks in-range pairs."""
        ok = (cells >= 0) & (cells < self.ncol) & (units >= 0)
        if not ok.all():
            units, cells = np.where(ok, units, 0), np.where(ok, cells, 0)
        if units.size == 0:
            return np.zeros(0), ok
        lo, hi = int(units.min()), int(units.max())
        if (hi - lo + 1) * self.ncol <= 4 * units.size + 4096:
            # NMF rows come unit by unit: a dense slice of the few units in the batch.
            dense = self.m[lo : hi + 1].toarray()
            return dense[units - lo, cells].astype(np.float64), ok
        if self._keys is None:
            rows = np.repeat(np.arange(self.m.shape[0], dtype=np.int64), np.diff(self.m.indptr))
            self._keys = rows * self.ncol + self.m.indices.astype(np.int64)
        keys = self._keys
        want = units * self.ncol + cells
        vals = np.zeros(want.size, dtype=np.float64)
        if keys.size:
            pos = np.minimum(np.searchsorted(keys, want), keys.size - 1)
            hit = keys[pos] == want
            vals[hit] = self.m.data[pos[hit]]
        return vals, ok


def nmf_summary(
    batches: Iterable[pa.RecordBatch],
    hierarchy: Hierarchy,
    truth: TruthLookup | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """Summarise the stated noise of every (geolevel, query), and check it against the truth.

    Args:
        batches: record batches with columns ``geolevel``, ``geocode``, ``query``,
            ``cell``, ``value``, ``variance`` (and optionally ``mechanism``).
        hierarchy: the release geography (to place geocodes).
        truth: ``truth(geolevel, query)`` returns the true ``(units x rows)`` answers
            of that query at that level, or ``None`` when unknown.

    Returns:
        ``{geolevel: {query: stats}}``; ``stats`` has the count, the range of stated
        variances and standard deviations, the 90% interval half-width
        ``1.645 sd`` and, with the truth, an ``empirical`` block: mean error, error
        variance, its ratio to the stated variance (about 1 if the NMF is honest),
        the mean squared z-score and the coverage of ``value +- 1.645 sd``.
    """
    acc: dict[tuple[str, str], _Acc] = {}
    cache: dict[tuple[str, str], _Truth | None] = {}
    names = hierarchy.geolevels.names
    for batch in batches:
        if batch.num_rows == 0:
            continue
        gl_d, gl_i = _as_strings(batch.column("geolevel"))
        q_d, q_i = _as_strings(batch.column("query"))
        gc_d, gc_i = _as_strings(batch.column("geocode"))
        mech = batch.column("mechanism") if "mechanism" in batch.schema.names else None
        cells = np.asarray(batch.column("cell").to_numpy(zero_copy_only=False), dtype=np.int64)
        values = np.asarray(batch.column("value").to_numpy(zero_copy_only=False), dtype=np.float64)
        var = np.asarray(batch.column("variance").to_numpy(zero_copy_only=False), dtype=np.float64)
        key = gl_i * q_d.size + q_i
        single = key.size > 0 and key.min() == key.max()
        for k in key[:1] if single else np.unique(key):
            # The NMF writer puts one (geolevel, query) per row group: skip the masks then.
            sel = slice(None) if single else key == k
            level, query = str(gl_d[k // q_d.size]), str(q_d[k % q_d.size])
            a = acc.setdefault((level, query), _Acc())
            v = var[sel]
            v_lo, v_hi = float(v.min()), float(v.max())
            a.n += int(v.size)
            a.var_min = min(a.var_min, v_lo)
            a.var_max = max(a.var_max, v_hi)
            a.var_sum += float(v.sum())
            if len(a.variances) < 8:
                a.variances.update(
                    {v_lo, v_hi} if v_lo == v_hi else (float(x) for x in np.unique(v)[:8])
                )
            if mech is not None and not a.mechanism:
                first = 0 if single else int(np.flatnonzero(sel)[0])
                a.mechanism = str(mech[first].as_py())
            if truth is None or level not in names:
                continue
            if (level, query) not in cache:
                answers = truth(level, query)
                cache[(level, query)] = None if answers is None else _Truth(answers)
            t = cache[(level, query)]
            if t is None:
                continue
            li = names.index(level)
            ref = hierarchy.geocodes[li]
            dict_units = np.minimum(np.searchsorted(ref, gc_d), max(ref.size - 1, 0))
            dict_units = np.where(ref[dict_units] == gc_d, dict_units, -1)
            units = dict_units[gc_i[sel]]
            tv, ok = t.values(units, cells[sel])
            e = values[sel] - tv
            if not ok.all():
                e, v = e[ok], v[ok]
            a.n_truth += int(e.size)
            a.e_sum += float(e.sum())
            e_sq = e * e
            a.e_sq += float(e_sq.sum())
            if v_lo == v_hi:  # one variance for the whole batch: scalar arithmetic
                if v_lo > 0:
                    a.z_sq += float(e_sq.sum()) / v_lo
                a.inside90 += int(np.count_nonzero(e_sq <= Z90 * Z90 * v_lo))
            else:
                pos = v > 0
                a.z_sq += float(np.sum(e_sq[pos] / v[pos]))
                a.inside90 += int(np.count_nonzero(e_sq <= Z90 * Z90 * v))
    out: dict[str, dict[str, dict[str, Any]]] = {}
    order = {n: i for i, n in enumerate(names)}
    for (level, query), a in sorted(
        acc.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0][1])
    ):
        out.setdefault(level, {})[query] = a.to_dict()
    return out
