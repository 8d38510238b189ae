"""The rows of ``estimates.parquet`` (the estimated geounits) and its per-level summary."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from censusdp.infer.gls import Z90, Z95, census_intervals

__all__ = ["LevelStats", "chunk_table"]


def chunk_table(
    level: str, codes: np.ndarray, names: tuple[str, ...], est: np.ndarray, sd: np.ndarray
) -> pa.Table:
    n, k = est.shape
    e, s = est.reshape(-1), sd.reshape(-1)
    lo90, hi90 = census_intervals(e, s, Z90)
    lo95, hi95 = census_intervals(e, s, Z95)
    return pa.table(
        {
            "geolevel": pa.DictionaryArray.from_arrays(
                pa.array(np.zeros(n * k, np.int32)), pa.array([level], pa.string())
            ),
            "geocode": pa.DictionaryArray.from_arrays(
                pa.array(np.repeat(np.arange(n, dtype=np.int32), k)),
                pa.array(codes.astype(object), pa.string()),
            ),
            "query": pa.DictionaryArray.from_arrays(
                pa.array(np.tile(np.arange(k, dtype=np.int32), n)),
                pa.array(list(names), pa.string()),
            ),
            "estimate": pa.array(e, pa.float64()),
            "sd": pa.array(s, pa.float64()),
            "ci90_low": pa.array(lo90, pa.int64()),
            "ci90_high": pa.array(hi90, pa.int64()),
            "ci95_low": pa.array(lo95, pa.int64()),
            "ci95_high": pa.array(hi95, pa.int64()),
        }
    )


class LevelStats:
    """Per geolevel: rows, mean sd of ``total``, and the largest GLS sd / direct sd."""

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}
        self.total_sd: dict[str, list[float]] = {}
        self.ratio: dict[str, float] = {}
        self.exact: dict[str, int] = {}

    def add(self, level: str, names: tuple[str, ...], sd: np.ndarray, direct: np.ndarray) -> None:
        self.rows[level] = self.rows.get(level, 0) + sd.size
        self.exact[level] = self.exact.get(level, 0) + int((sd == 0).sum())
        if "total" in names:
            acc = self.total_sd.setdefault(level, [0.0, 0.0])
            acc[0] += float(sd[:, names.index("total")].sum())
            acc[1] += sd.shape[0]
        finite = np.isfinite(direct) & (direct > 0)
        if finite.any():
            r = float((sd[:, finite] / direct[finite]).max(initial=0.0))
            self.ratio[level] = max(self.ratio.get(level, 0.0), r)

    def to_dict(self, direct: dict[str, dict[str, float]]) -> dict[str, Any]:
        out = {}
        for level, rows in self.rows.items():
            tot = self.total_sd.get(level)
            out[level] = {
                "rows": rows,
                "rows_known_exactly": self.exact.get(level, 0),
                "mean_sd_total": tot[0] / tot[1] if tot and tot[1] else None,
                "direct_sd_total": direct.get(level, {}).get("total"),
                "max_sd_over_direct_sd": self.ratio.get(level),
            }
        return out
