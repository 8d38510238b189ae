"""The ADMM's projection onto the group and total bounds (``admm._LaminarProjector``).

The projection finds the one multiplier ``lam`` of the total bounds where the clipped
group sums add up to the target total. It used to evaluate that total at each of the
``2G + 1`` breakpoints from scratch, ``O(G^2)`` a child (a family held to a P.L. 94
release's 2,016 exact ``pl94`` groups spent minutes there); it now sweeps the sorted
breakpoints. :class:`FormerProjector` is the former evaluation, kept here whole (and
timed against the sweep by ``benchmarks/bench_admm_projector.py``): the sweep must give
its answers on random rows with exact groups, groups without a free cell, infinite upper
bounds, and total bounds active or not.
"""

from __future__ import annotations

import numpy as np
import pytest

from censusdp.release.topdown import Subproblem
from censusdp.release.topdown.problem import _row_sums
from censusdp.release.topdown.solvers.admm import _LaminarProjector

TOTALS_CHUNK = 1 << 21
"""Elements of the ``(k, candidates, G)`` sums the former projection held at once."""


class FormerProjector:
    """The projection as it was: the total at every breakpoint by a ``(k, 2G+1, G)``
    evaluation, :data:`TOTALS_CHUNK` elements at a time, then the same interpolation."""

    def __init__(self, sub: Subproblem, free: np.ndarray) -> None:
        self.groups, self.n_groups, self.free = sub.groups, sub.G, free
        self.n = _row_sums(free.astype(np.float64), sub.groups, sub.G)
        self.has = self.n > 0
        self.lo = np.where(self.has, sub.group_lower, 0.0)
        self.hi = np.where(self.has, sub.group_upper, 0.0)
        self.tlo, self.thi = sub.total_lower, sub.total_upper
        self.inf_slope = (self.n * (np.isinf(self.hi) & self.has)).sum(axis=1)
        self.nsafe = np.where(self.has, self.n, 1.0)

    def _sums(self, s0: np.ndarray, lam: np.ndarray) -> np.ndarray:
        s = s0[:, None, :] + self.n[:, None, :] * lam[:, :, None]
        s = np.clip(s, self.lo[:, None, :], self.hi[:, None, :])
        return np.where(self.has[:, None, :], s, 0.0)

    def __call__(self, v: np.ndarray) -> np.ndarray:
        v = np.where(self.free, v, 0.0)
        k = v.shape[0]
        s0 = _row_sums(v, self.groups, self.n_groups)
        bl = np.where(self.has, (self.lo - s0) / self.nsafe, 0.0)
        bu = np.where(self.has & np.isfinite(self.hi), (self.hi - s0) / self.nsafe, 0.0)
        cand = np.sort(np.concatenate([bl, bu, np.zeros((k, 1))], axis=1), axis=1)
        m = cand.shape[1]
        step = max(1, TOTALS_CHUNK // max(1, k * self.n_groups))
        tv = np.concatenate(
            [self._sums(s0, cand[:, a : a + step]).sum(axis=2) for a in range(0, m, step)], axis=1
        )
        t_at0 = self._sums(s0, np.zeros((k, 1))).sum(axis=2)[:, 0]
        target = np.clip(t_at0, self.tlo, self.thi)
        idx = (tv < target[:, None]).sum(axis=1)
        rows = np.arange(k)
        lam = np.zeros(k)
        low = idx == 0
        lam[low] = cand[low, 0]
        high = idx == m
        slope = self.inf_slope[high]
        extra = np.where(
            slope > 0, (target[high] - tv[high, -1]) / np.where(slope > 0, slope, 1.0), 0.0
        )
        lam[high] = cand[high, -1] + extra
        mid = ~low & ~high
        a, b = idx[mid] - 1, idx[mid]
        la_, lb_ = cand[rows[mid], a], cand[rows[mid], b]
        ta, tb = tv[rows[mid], a], tv[rows[mid], b]
        dt = tb - ta
        frac = np.where(dt > 0, (target[mid] - ta) / np.where(dt > 0, dt, 1.0), 1.0)
        lam[mid] = la_ + frac * (lb_ - la_)
        lam[(t_at0 >= self.tlo) & (t_at0 <= self.thi)] = 0.0
        s = self._sums(s0, lam[:, None])[:, 0, :]
        shift = (s - s0) / self.nsafe
        return v + np.where(self.free, shift[:, self.groups], 0.0)


def random_case(rng: np.random.Generator, k: int, n_groups: int) -> tuple[Subproblem, np.ndarray]:
    """A random subproblem of ``k`` children on ``n_groups`` groups (some without a kept
    cell) and its free cells (some groups without one in some children), with exact,
    bounded and unbounded groups and total bounds that bind below, above, exactly or not
    at all."""
    per = rng.integers(0, 4, size=n_groups)  # cells per group, 0: a group without cells
    per[rng.integers(n_groups)] += 1
    groups = np.repeat(np.arange(n_groups), per)
    c = groups.size
    lo = rng.integers(0, 6, size=(k, n_groups)).astype(np.float64)
    kind = rng.integers(0, 3, size=(k, n_groups))  # 0 exact, 1 a band, 2 no upper bound
    hi = np.where(
        kind == 0, lo, np.where(kind == 1, lo + rng.integers(1, 8, (k, n_groups)), np.inf)
    )
    free = rng.random((k, c)) < 0.8
    free[(rng.random(k) < 0.2)[:, None] & (groups == 0)[None, :]] = False
    floor, ceil = lo.sum(axis=1), hi.sum(axis=1)
    t = rng.integers(0, 5, size=k)  # 0 none, 1 a binding floor, 2 a binding cap, 3 exact, 4 band
    cap = np.where(np.isfinite(ceil), ceil, floor + 40.0)
    mid = np.floor(floor + rng.random(k) * (cap - floor))
    tlo = np.select([t == 1, t == 3, t == 4], [cap, mid, np.maximum(mid - 3, 0)], 0.0)
    thi = np.select([t == 2, t == 3, t == 4], [floor, mid, mid + 3], np.inf)
    sub = Subproblem(
        parent=None,
        query_rows=(np.arange(c),),
        query_sizes=(c,),
        noisy=(np.zeros((k, c)),),
        weights=np.ones(1),
        groups=groups,
        group_lower=lo,
        group_upper=hi,
        total_lower=tlo,
        total_upper=thi,
    )
    return sub, free


@pytest.mark.parametrize("n_groups", [1, 2, 8, 63])
def test_the_sweep_gives_the_former_evaluations_answers(n_groups) -> None:
    rng = np.random.default_rng(34 + n_groups)
    for _ in range(60):
        sub, free = random_case(rng, int(rng.integers(1, 9)), n_groups)
        v = rng.normal(0.0, 4.0, size=(sub.k, sub.c)) + rng.random((sub.k, 1)) * 3.0
        got = _LaminarProjector(sub, free)(v)
        want = FormerProjector(sub, free)(v)
        np.testing.assert_allclose(got, want, rtol=0.0, atol=1e-9)


def test_the_projection_meets_every_bound_it_can() -> None:
    """Each child's group sums end within their bounds and its total at the nearest
    point of its total bounds that the clipped group sums can reach."""
    rng = np.random.default_rng(7)
    for _ in range(40):
        sub, free = random_case(rng, 6, 20)
        v = rng.normal(0.0, 5.0, size=(sub.k, sub.c))
        x = _LaminarProjector(sub, free)(v)
        assert (x[~free] == 0).all()
        n = _row_sums(free.astype(np.float64), sub.groups, sub.G)
        has = n > 0
        s = sub.group_sums(x)
        lo, hi = np.where(has, sub.group_lower, 0.0), np.where(has, sub.group_upper, 0.0)
        assert (s >= lo - 1e-9).all() and (s <= hi + 1e-9).all()
        reach_lo, reach_hi = lo.sum(axis=1), hi.sum(axis=1)
        want_lo = np.minimum(np.maximum(sub.total_lower, reach_lo), reach_hi)
        want_hi = np.maximum(np.minimum(sub.total_upper, reach_hi), reach_lo)
        t = x.sum(axis=1)
        assert (t >= want_lo - 1e-9).all() and (t <= want_hi + 1e-9).all()


def test_the_sweep_holds_2016_exact_groups_in_linear_memory() -> None:
    """The ``pl94`` cross of a held DHC person run: 2,016 groups, most exact; the sweep's
    answer equals the former evaluation's on a few children (the former held a
    ``(k, 4033, 2016)`` array)."""
    rng = np.random.default_rng(2016)
    sub, free = random_case(rng, 3, 2016)
    v = rng.normal(0.0, 3.0, size=(sub.k, sub.c))
    np.testing.assert_allclose(
        _LaminarProjector(sub, free)(v), FormerProjector(sub, free)(v), rtol=0.0, atol=1e-8
    )
