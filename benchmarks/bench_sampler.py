"""CPU nanoseconds per noisy value of ``release_units``, previous and now, in one run.

Every noisy value of a release is drawn by
:meth:`censusdp.privacy.mechanisms._table.AliasTable.sample_units` from the unit's AES
window (:class:`censusdp.privacy.randomness.UnitStreams`), then added to the exact
count. This benchmark times ``release_units`` on the shapes of a block measuring task
and, in the same process, the method it replaced (``_previous_release_units`` below:
a benchmark-only copy of the words and the lookups as they were), alternating the two
``--repeats`` times and keeping the least CPU of each (``time.process_time``, user and
system: a new array's first writes are page faults; the machine may be shared). Now is
timed twice: ``now_new_array`` (``release_units(values, ...)``) and ``now_in_place``
(``out=values``, as :func:`censusdp.release.measure.run_measure_task` calls it, on
exact answers made as measuring makes them). All must give identical arrays
(``identical``: checked on every shape, the benchmark fails otherwise).

Shapes (``--units`` scales the long ones):

* ``ddp-2010 detailed``: a ``ddp-2010`` block's detailed query, 229,320 measured cells
  a unit, the geometric mechanism of its block level (scale 125/3);
* ``dhc-2020 detailed``: the DHC's person detailed query, 1,100,000 cells a unit, the
  discrete Gaussian at three block-level variances (the units split between them, as
  per-block budgets do);
* ``ddp-2010 marginals``: the short queries of the same block (504, 232 and 8 cells:
  many units per AES call).

Prints one JSON object. About half a minute with the defaults (17 s wall at load 8).

    python benchmarks/bench_sampler.py --units 24 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from fractions import Fraction
from typing import Any

import numpy as np

from censusdp.privacy.mechanisms import DiscreteGaussian, Geometric
from censusdp.privacy.mechanisms._base import integer_values
from censusdp.privacy.randomness import RandomSource, UnitStreams

_BLOCK = 16


class PreviousWords:
    """:meth:`UnitStreams.words` as it was: the block numbers written byte by byte into
    a ``(blocks, 16)`` array, then one AES-ECB call per window key (the same words)."""

    def __init__(self, streams: UnitStreams) -> None:
        self.streams = streams

    def words(self, rows: Any, start: int, count: int) -> np.ndarray:
        s = self.streams
        rows = np.asarray(rows, dtype=np.intp).reshape(-1)
        if not rows.size or not count:
            return np.empty((rows.size, count), dtype=np.uint64)
        first, stop = start // 2, (start + count + 1) // 2
        n_blocks = stop - first
        numbers = np.zeros((n_blocks, 16), dtype=np.uint8)
        numbers[:, 12:] = np.arange(first, stop, dtype=">u4").view(np.uint8).reshape(-1, 4)
        tail = numbers.view("<u8")[:, 1]
        skip = start - 2 * first
        groups = s._group[rows]
        lone = groups[0] if (groups == groups[0]).all() else None
        out = np.empty((rows.size, count), dtype=np.uint64) if lone is None else None
        for g in [int(lone)] if lone is not None else np.unique(groups).tolist():
            sel = slice(None) if lone is not None else np.flatnonzero(groups == g)
            ids = s._ids[rows[sel]]
            blocks = np.empty((ids.shape[0], n_blocks, 2), dtype="<u8")
            blocks[:, :, 0] = ids[:, 0:1]
            np.bitwise_or(ids[:, 1:2], tail[None, :], out=blocks[:, :, 1])
            data = blocks.reshape(-1).view(np.uint8)
            raw = np.empty(data.size + _BLOCK, dtype=np.uint8)
            s._cipher(g).update_into(data, raw)
            words = raw[: data.size].view("<u8").reshape(ids.shape[0], 2 * n_blocks)
            if out is None:
                return words[:, skip : skip + count]
            out[sel] = words[:, skip : skip + count]
        return out


def previous_sample_units(table: Any, n: int, streams: PreviousWords, units: int) -> np.ndarray:
    """:meth:`AliasTable.sample_units` as it was: 65,536-word steps, the column a view of
    the shifted words, the compare as two boolean arrays, ties row by row."""
    chunk = 1 << 16
    out = np.empty((units, n), dtype=np.int64)
    if not n or not units:
        return out
    shift = np.uint64(64 - table.column_bits)
    mask = np.uint64((1 << (64 - table.column_bits)) - 1)
    per_batch = max(1, chunk // n)
    step = min(n, chunk)
    for first in range(0, units, per_batch):
        rows = np.arange(first, min(units, first + per_batch))
        used = np.zeros(rows.size, dtype=np.int64)
        for c0 in range(0, n, step):
            c1 = min(n, c0 + step)
            words = streams.words(rows, c0, c1 - c0)
            col = np.right_shift(words, shift).view(np.intp)
            words &= mask
            t_hi = table.threshold_hi.take(col, mode="clip")
            primary = words < t_hi
            tied = words == t_hi
            tie_rows, tie_cols = np.nonzero(tied) if tied.any() else (tied[:0, 0], None)
            for i in np.unique(tie_rows).tolist():
                at = tie_cols[tie_rows == i]
                r_lo = streams.words(rows[i : i + 1], n + int(used[i]), at.size)[0]
                primary[i, at] = r_lo < table.threshold_lo[col[i, at]]
                used[i] += at.size
            col <<= 1
            col |= primary
            table.values.take(col, out=out[first : first + rows.size, c0:c1], mode="clip")
    return out


def _previous_release_units(mech: Any, values: np.ndarray, source: RandomSource, key, codes):
    """``release_units`` as it was (``_discrete._release_units`` on the copies above)."""
    arr = integer_values(values)
    streams = PreviousWords(source.unit_streams(*key, codes=codes))
    noise = previous_sample_units(mech._profile.table, arr.shape[1], streams, arr.shape[0])
    noise += arr
    return noise


def _shapes(units: int) -> list[tuple[str, int, list[tuple[Any, int]]]]:
    """(name, cells a unit, [(mechanism, units)]): the units of a shape, by mechanism."""
    dg = Fraction(10000, 11)
    per_variance = max(1, units // 6)
    return [
        ("ddp-2010 detailed", 229_320, [(Geometric(Fraction(125, 3)), units)]),
        (
            "dhc-2020 detailed",
            1_100_000,
            [
                (DiscreteGaussian(dg), per_variance),
                (DiscreteGaussian(2 * dg), per_variance),
                (DiscreteGaussian(dg / 2), per_variance),
            ],
        ),
        ("ddp-2010 marginal 504", 504, [(Geometric(Fraction(25, 3)), 50 * units)]),
        ("ddp-2010 marginal 232", 232, [(Geometric(Fraction(250, 3)), 50 * units)]),
        ("ddp-2010 marginal 8", 8, [(Geometric(Fraction(125, 6)), 50 * units)]),
    ]


def _counts(units: int, cells: int, seed: int) -> np.ndarray:
    """A query's exact answers as measuring makes them: zeros with a few counts added
    (``_exact_answers``: most pages of the array are never written before the noise)."""
    rng = np.random.default_rng(seed)
    out = np.zeros((units, cells), dtype=np.int64)
    nonzero = rng.choice(out.size, size=max(1, out.size // 2000), replace=False)
    out.reshape(-1)[nonzero] = rng.integers(1, 40, size=nonzero.size)
    return out


def _release(method: str, mech: Any, values: np.ndarray, source, codes) -> np.ndarray:
    key = ("Block", "detailed")
    if method == "previous":
        return _previous_release_units(mech, values, source, key, codes)
    if method == "now_new_array":
        return mech.release_units(values, source, key, codes)
    return mech.release_units(values, source, key, codes, out=values)  # as measuring calls it


METHODS = ("previous", "now_new_array", "now_in_place")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--units", type=int, default=24, help="units of the ddp-2010 detailed shape")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    source = RandomSource.seeded(args.seed)
    results = []
    for name, cells, groups in _shapes(args.units):
        parts, first = [], 0
        for mech, units in groups:
            mech.sample(1, source)  # builds the table outside the timing
            codes = np.array([f"50{u:013d}" for u in range(first, first + units)])
            parts.append((mech, units, codes, args.seed + first))
            first += units
        best = dict.fromkeys(METHODS, np.inf)
        identical = True
        for _ in range(args.repeats):
            got = {}
            for method in METHODS:
                cpu, got[method] = 0.0, []
                for mech, units, codes, seed in parts:
                    values = _counts(units, cells, seed)  # fresh, outside the timing
                    c = time.process_time()
                    got[method].append(_release(method, mech, values, source, codes))
                    cpu += time.process_time() - c
                best[method] = min(best[method], cpu)
            identical &= all(
                np.array_equal(a, b)
                for method in METHODS[1:]
                for a, b in zip(got["previous"], got[method], strict=True)
            )
            del got
        n = sum(units for _, units, _, _ in parts) * cells
        row: dict[str, Any] = {"shape": name, "cells_per_unit": cells, "values": n}
        for method in METHODS:
            row[f"{method}_ns_per_value"] = round(best[method] / n * 1e9, 2)
        row["speedup_in_place"] = round(best["previous"] / best["now_in_place"], 2)
        row["identical"] = identical
        results.append(row)
        if not identical:
            raise SystemExit(f"bench_sampler: {name}: the draws differ from the previous method")
    print(
        json.dumps(
            {
                "benchmark": "bench_sampler",
                "machine": platform.processor() or platform.machine(),
                "load_average": [round(x, 2) for x in os.getloadavg()],
                "repeats": args.repeats,
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
