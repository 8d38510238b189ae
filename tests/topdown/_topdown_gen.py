"""Random subproblems that are feasible by construction (test helpers)."""

from __future__ import annotations

import numpy as np

from censusdp.topdown import Subproblem


def random_subproblem(
    rng: np.random.Generator,
    *,
    k: int = 4,
    c: int = 12,
    n_groups: int = 3,
    n_queries: int = 3,
    mean: float = 5.0,
    noise: float = 1.0,
    root: bool = False,
    bound_slack: int = 2,
    tight: bool = False,
    weight_scale: float = 1.0,
) -> tuple[Subproblem, np.ndarray]:
    """A subproblem built around an integer truth ``X`` (returned too).

    Bounds bracket the truth's group sums and totals (exactly when ``tight``), so the
    truth is feasible. Query 0 is the detailed query, query 1 (if any) the total.
    """
    truth = rng.poisson(mean, size=(k, c)).astype(np.int64)
    if not root:
        # every kept cell must be positive in the parent
        empty = truth.sum(axis=0) == 0
        truth[rng.integers(0, k, size=int(empty.sum())), np.flatnonzero(empty)] = 1
    groups = rng.integers(0, n_groups, size=c)
    groups[: min(c, n_groups)] = np.arange(min(c, n_groups))
    gs = np.zeros((k, n_groups), dtype=np.int64)
    np.add.at(gs.T, groups, truth.T)
    ts = truth.sum(axis=1)
    if tight:
        gl, gu = gs.astype(float), gs.astype(float)
        tl, tu = ts.astype(float), ts.astype(float)
    else:
        gl = np.maximum(gs - rng.integers(0, bound_slack + 1, size=gs.shape), 0).astype(float)
        gu = (gs + rng.integers(0, bound_slack + 1, size=gs.shape)).astype(float)
        gu[rng.random(gs.shape) < 0.3] = np.inf
        gl[rng.random(gs.shape) < 0.3] = 0.0
        tl = np.maximum(ts - rng.integers(0, 2 * bound_slack + 1, size=k), 0).astype(float)
        tu = (ts + rng.integers(0, 2 * bound_slack + 1, size=k)).astype(float)
        tu[rng.random(k) < 0.5] = np.inf
        tl[rng.random(k) < 0.5] = 0.0
    rows, sizes, noisy = [], [], []
    for q in range(n_queries):
        if q == 0:
            r = np.arange(c)
            size = c + int(rng.integers(0, 3))
        elif q == 1:
            r = np.zeros(c, dtype=np.int64)
            size = 1
        else:
            size = int(rng.integers(1, max(2, c // 2) + 1))
            r = rng.integers(0, size, size=c)
        ans = np.zeros((k, size))
        np.add.at(ans.T, r, truth.T)
        rows.append(r)
        sizes.append(size)
        noisy.append(ans + rng.normal(0.0, noise, size=ans.shape))
    weights = weight_scale * rng.uniform(0.5, 2.0, size=n_queries)
    sub = Subproblem(
        parent=None if root else truth.sum(axis=0),
        query_rows=tuple(rows),
        query_sizes=tuple(sizes),
        noisy=tuple(noisy),
        weights=weights,
        groups=groups,
        group_lower=gl,
        group_upper=gu,
        total_lower=tl,
        total_upper=tu,
    )
    return sub, truth
