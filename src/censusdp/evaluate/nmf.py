"""Closed-form error of the noisy measurements, and a check of it against the truth.

Every noisy measurement ``y = q(x) + noise`` in the NMF carries the variance of its
noise (seed 004: a transparent release publishes the mechanism, so a user knows
``sd = sqrt(variance)`` without seeing the data; for the discrete Gaussian with
``rho`` allotted to a sensitivity-1 query, ``variance ~= 1 / (2 rho)``, seed 001
sec. 2.3). This module summarises those closed-form standard deviations per
(geolevel, query) and, when the truth is known, compares them with the realised noise
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

from censusdp.geography import Hierarchy

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


def _prepare(truth: sp.spmatrix) -> tuple[np.ndarray, np.ndarray, int]:
    """Sorted flat keys ``unit * ncol + cell`` and values of a sparse truth matrix."""
    t = sp.csr_matrix(truth)
    t.sort_indices()
    ncol = int(t.shape[1])
    rows = np.repeat(np.arange(t.shape[0], dtype=np.int64), np.diff(t.indptr))
    return rows * ncol + t.indices.astype(np.int64), np.asarray(t.data, np.float64), ncol


def _truth_values(
    prepared: tuple[np.ndarray, np.ndarray, int], units: np.ndarray, cells: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """True answers at (unit, cell); returns (values, ok) where ok marks in-range pairs."""
    keys, data, ncol = prepared
    ok = (cells >= 0) & (cells < ncol) & (units >= 0)
    want = units * ncol + cells
    vals = np.zeros(want.size, dtype=np.float64)
    if keys.size:
        pos = np.minimum(np.searchsorted(keys, want), keys.size - 1)
        hit = keys[pos] == want
        vals[hit] = data[pos[hit]]
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
    cache: dict[tuple[str, str], tuple[np.ndarray, np.ndarray, int] | None] = {}
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
        for k in np.unique(key):
            sel = key == k
            level, query = str(gl_d[k // q_d.size]), str(q_d[k % q_d.size])
            a = acc.setdefault((level, query), _Acc())
            v = var[sel]
            a.n += int(sel.sum())
            a.var_min = min(a.var_min, float(v.min()))
            a.var_max = max(a.var_max, float(v.max()))
            a.var_sum += float(v.sum())
            if len(a.variances) < 8:
                a.variances.update(float(x) for x in np.unique(v)[:8])
            if mech is not None and not a.mechanism:
                a.mechanism = str(mech[int(np.flatnonzero(sel)[0])].as_py())
            if truth is None or level not in names:
                continue
            if (level, query) not in cache:
                answers = truth(level, query)
                cache[(level, query)] = None if answers is None else _prepare(answers)
            t = cache[(level, query)]
            if t is None:
                continue
            li = names.index(level)
            ref = hierarchy.geocodes[li]
            dict_units = np.minimum(np.searchsorted(ref, gc_d), max(ref.size - 1, 0))
            dict_units = np.where(ref[dict_units] == gc_d, dict_units, -1)
            units = dict_units[gc_i[sel]]
            tv, ok = _truth_values(t, units, cells[sel])
            e = (values[sel] - tv)[ok]
            vv = v[ok]
            a.n_truth += int(ok.sum())
            a.e_sum += float(e.sum())
            a.e_sq += float(np.dot(e, e))
            pos = vv > 0
            a.z_sq += float(np.sum(e[pos] ** 2 / vv[pos]))
            a.inside90 += int(np.sum(np.abs(e) <= Z90 * np.sqrt(vv)))
    out: dict[str, dict[str, dict[str, Any]]] = {}
    order = {n: i for i, n in enumerate(names)}
    for (level, query), a in sorted(
        acc.items(), key=lambda kv: (order.get(kv[0][0], 99), kv[0][1])
    ):
        out.setdefault(level, {})[query] = a.to_dict()
    return out
