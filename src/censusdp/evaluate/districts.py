"""Off-spine geographies: random contiguous districts built from blocks.

Redistricting offices draw districts from whole blocks; those districts cut across
the block groups, tracts and counties that TopDown measured ("off-spine"), so their
error is the error of a sum of many block counts (JASON 2020, sec. 6.2, 8.3).

Without block shapes we use **geocode order as a proxy for contiguity**: blocks sorted
by their 16-digit geocode run block by block through a block group, block group by
block group through a tract and tract by tract through a county, and tract codes are
assigned roughly in spatial order. A district is a run of consecutive blocks in that
order, so it is contiguous under the proxy and generally straddles block-group, tract
and sometimes county boundaries. With real shapes one would grow districts over the
block adjacency graph instead; the error of a sum of ``m`` block counts does not
depend on how the blocks are arranged, only on which blocks are summed.

Construction for a target population ``P`` (one draw): boundaries on the cumulative
true population are placed at ``b_0 = U(0, 1) P`` (a random phase) and
``b_k = b_{k-1} + P U(1 - j, 1 + j)`` (jitter ``j``, default 0.2); the blocks whose
cumulative population falls between two boundaries form a district (empty blocks join
the district of the next populated block). The partial first and last districts are
dropped. Several independent draws are pooled.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp

from censusdp.errors import ConfigError
from censusdp.evaluate.metrics import Pairs, all_under18_share, error_stats, tvd
from censusdp.privacy.randomness import experiment_generator

__all__ = ["district_metrics", "random_districts"]


def random_districts(
    block_population: np.ndarray,
    target: int,
    rng: np.random.Generator,
    *,
    jitter: float = 0.2,
) -> np.ndarray:
    """Assign blocks (in geocode order) to random contiguous districts of about ``target`` people.

    Args:
        block_population: true population of each block, blocks sorted by geocode.
        target: target population per district (> 0).
        rng: the random generator (seeded by the caller).
        jitter: each district's target is ``target * U(1 - jitter, 1 + jitter)``.

    Returns:
        District id (0, 1, ...) of each block, ``-1`` for blocks in no kept district.

    Raises:
        ConfigError: for a non-positive target or a jitter outside ``[0, 1)``.
    """
    if target <= 0:
        raise ConfigError(f"district target population must be > 0, got {target}")
    if not 0 <= jitter < 1:
        raise ConfigError(f"district jitter must be in [0, 1), got {jitter}")
    pop = np.asarray(block_population, dtype=np.int64)
    cum = np.cumsum(pop)
    total = int(cum[-1]) if cum.size else 0
    out = np.full(pop.size, -1, dtype=np.int64)
    if total < target:
        return out
    n_max = int(total / (target * (1 - jitter))) + 2
    steps = target * rng.uniform(1 - jitter, 1 + jitter, n_max)
    bounds = rng.uniform(0, 1) * target + np.concatenate([[0.0], np.cumsum(steps)])
    bounds = bounds[bounds < total]
    # District k holds blocks with bounds[k-1] < cum <= bounds[k]; k = 0 and the
    # remainder after the last boundary are partial and dropped.
    k = np.searchsorted(bounds, cum, side="left")
    keep = (k >= 1) & (k <= bounds.size - 1)
    out[keep] = k[keep] - 1
    return out


def district_metrics(
    truth_blocks: dict[str, np.ndarray],
    released_blocks: dict[str, np.ndarray],
    targets: tuple[int, ...],
    *,
    seed: int | np.random.SeedSequence,
    draws: int = 5,
    leaves: dict[str, tuple[int, ...]] | None = None,
) -> dict[str, Any]:
    """Errors of released counts for random contiguous districts of several sizes.

    Args:
        truth_blocks, released_blocks: per table name, the ``(blocks x lines)`` true and
            released block-level table (blocks in geocode order). Must include ``P1``
            (line 0 is total population) and ``P3`` (line 0 is population 18+).
        targets: district target populations.
        seed: seed of the district draws.
        draws: independent district maps per target, pooled.
        leaves: per table, its leaf lines (for the TVD of that table over districts).

    Returns:
        Per target (as a string): the number of districts, their mean true population,
        total-population error statistics (:func:`error_stats`), the mean absolute
        percentage error of total population, TVD per table over its leaves, and the
        share of districts released and truly 100% under 18.
    """
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    pop = truth_blocks["P1"][:, 0]
    out: dict[str, Any] = {}
    for target, child in zip(targets, ss.spawn(len(targets)), strict=True):
        rng = experiment_generator(child)
        sums_t: dict[str, list[np.ndarray]] = {name: [] for name in truth_blocks}
        sums_r: dict[str, list[np.ndarray]] = {name: [] for name in truth_blocks}
        for _ in range(draws):
            d = random_districts(pop, int(target), rng)
            n_d = int(d.max()) + 1 if d.size else 0
            if n_d == 0:
                continue
            sel = np.flatnonzero(d >= 0)
            member = sp.csr_matrix(
                (np.ones(sel.size, dtype=np.int64), (d[sel], sel)), shape=(n_d, d.size)
            )
            for name in truth_blocks:
                for src, dst in ((truth_blocks, sums_t), (released_blocks, sums_r)):
                    dst[name].append(np.asarray(member @ src[name], dtype=np.int64))
        if not sums_t["P1"]:
            out[str(target)] = {"n_districts": 0}
            continue
        t = {n: np.concatenate(v) for n, v in sums_t.items()}
        r = {n: np.concatenate(v) for n, v in sums_r.items()}
        tp, rp = t["P1"][:, 0], r["P1"][:, 0]
        rec: dict[str, Any] = {
            "n_districts": int(tp.size),
            "draws": draws,
            "mean_true_population": float(tp.mean()),
            "total_population": error_stats(Pairs.dense(tp, rp)),
            "mean_abs_pct_error": float(np.mean(np.abs(rp - tp) / np.maximum(tp, 1)) * 100),
            "tvd": {},
            "all_under18": {
                "released": all_under18_share(rp, r["P3"][:, 0]),
                "truth": all_under18_share(tp, t["P3"][:, 0]),
            },
        }
        for name in t:
            cols = list(leaves[name]) if leaves and name in leaves else slice(None)
            rec["tvd"][name] = tvd(Pairs.dense(t[name][:, cols], r[name][:, cols]))["tvd"]
        out[str(target)] = rec
    return out
