"""Least squares on the group sums when no query sees inside a group (pl94's total pass)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from _topdown_gen import random_subproblem
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.release.topdown import make_feasible, solve_l2
from censusdp.release.topdown.solvers import groups


def _group_level(sub, rng, with_group_query):
    """``sub`` measured by the total alone (and, optionally, the group sums)."""
    rows = [np.zeros(sub.c, dtype=np.int64)]
    sizes = [1]
    truth_t = sub.noisy[1] if len(sub.noisy) > 1 else rng.normal(20, 5, (sub.k, 1))
    noisy = [truth_t]
    if with_group_query:
        g = int(sub.groups.max()) + 1
        rows.append(sub.groups.copy())
        sizes.append(g)
        noisy.append(rng.normal(10.0, 4.0, size=(sub.k, g)))
    return replace(
        sub,
        query_rows=tuple(rows),
        query_sizes=tuple(sizes),
        noisy=tuple(noisy),
        weights=rng.uniform(0.5, 2.0, size=len(rows)),
        unit_weights=None,
    )


@settings(max_examples=40)
@given(
    seed=st.integers(0, 10_000),
    k=st.integers(2, 9),
    c=st.integers(4, 30),
    n_groups=st.integers(1, 4),
    with_group_query=st.booleans(),
)
def test_group_sums_give_an_optimum_of_the_whole_problem(seed, k, c, n_groups, with_group_query):
    rng = np.random.default_rng(seed)
    sub, _ = random_subproblem(rng, k=k, c=c, n_groups=n_groups, n_queries=2)
    sub, _ = make_feasible(_group_level(sub, rng, with_group_query))
    if np.unique(sub.groups).size >= sub.c:
        return
    got = solve_l2(sub)
    assert [m for m, _ in got.attempts] == ["groups"] and got.status == "optimal"
    ref = solve_l2(sub, method="clarabel")
    tol = 1e-8 * max(1.0, float(sub.parent.max()))
    x = got.x
    assert (x >= -tol).all()
    np.testing.assert_allclose(x.sum(axis=0), sub.parent, atol=1e4 * tol)
    gs = sub.group_sums(x)
    assert (gs >= sub.group_lower - 1e-6).all() and (gs <= sub.group_upper + 1e-6).all()
    ts = x.sum(axis=1)
    assert (ts >= sub.total_lower - 1e-6).all() and (ts <= sub.total_upper + 1e-6).all()
    # the same optimal value as the cell-level solve (the optimum is a face: the cells may
    # differ, the objective may not), and never below it
    scale = max(1.0, abs(ref.objective))
    assert got.objective <= ref.objective + 1e-5 * scale
    assert got.objective >= ref.objective - 1e-5 * scale


def test_a_query_inside_a_group_is_not_reduced():
    rng = np.random.default_rng(3)
    sub, _ = random_subproblem(rng, k=4, c=12, n_groups=2, n_queries=2)  # detailed + total
    assert groups.group_reduction(sub) is None
    total_only = _group_level(sub, rng, False)
    reduced, cell_group = groups.group_reduction(total_only)
    assert reduced.c == np.unique(sub.groups).size and reduced.k == sub.k
    np.testing.assert_array_equal(
        reduced.parent, np.bincount(cell_group, weights=sub.parent).astype(np.int64)
    )
    assert groups.group_reduction(replace(total_only, parent=None)) is None
    assert groups.group_reduction(reduced) is None  # one cell a group: nothing to gain


def test_a_failed_group_solve_falls_back_to_the_cells(monkeypatch):
    rng = np.random.default_rng(5)
    sub, _ = random_subproblem(rng, k=5, c=16, n_groups=3, n_queries=2)
    sub, _ = make_feasible(_group_level(sub, rng, False))
    ok = solve_l2(sub)
    assert [m for m, _ in ok.attempts] == ["groups"]

    def broken(s, cell_group, g):  # a spread that gives no usable point
        return np.full((s.k, s.c), np.nan)

    monkeypatch.setattr(groups, "spread", broken)
    res = solve_l2(sub)
    assert res.attempts[0][0] == "groups" and "violation" in res.attempts[0][1]
    assert res.status == "optimal" and res.method != "groups" and len(res.attempts) >= 2
    scale = max(1.0, abs(ok.objective))
    assert abs(res.objective - ok.objective) <= 1e-5 * scale


def test_large_counts_reach_the_optimum_of_the_cells():
    # a County-like family: large counts, noise of a few persons on the totals (where
    # Clarabel on the group sums once stopped at 8x the optimal objective)
    rng = np.random.default_rng(11)
    sub, truth = random_subproblem(rng, k=30, c=60, n_groups=8, n_queries=2, mean=20_000.0)
    t = truth.sum(axis=1, keepdims=True).astype(float)
    sub = replace(
        _group_level(sub, rng, False), noisy=(t + rng.normal(0, 2.0, t.shape),), noise_scale=2.0
    )
    sub, _ = make_feasible(sub)
    got = solve_l2(sub)
    assert [m for m, _ in got.attempts] == ["groups"]
    ref = min(solve_l2(sub, method=m).objective for m in ("activeset", "clarabel"))
    assert got.objective <= ref * (1 + 1e-4) + 1e-9
