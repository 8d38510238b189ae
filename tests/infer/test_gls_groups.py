"""Sibling groups in the tree GLS: a state's parts whose totals sum to its invariant.

On the production spine a state with AIAN and non-AIAN parts has an invariant total on
the union of its parts, not on either (production's ``addGroupedChildTotalConstraint``).
The tree GLS enters ``sum_{c in g} 1'x_c = T_g`` as a virtual node between the parts and
their parent (``censusdp.infer.gls``); these tests hold it to the dense KKT solve with the
same equality row, estimates and covariances of every level and of any set of blocks,
and check the coverage of the parts' intervals by simulation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _gls_gen import TOY_QUERIES, measure_gaussian, toy_schema, tree, truth
from test_gls import _cell_lines, _collect, _plan

from censusdp.errors import InputError
from censusdp.infer._algebra import make_layout
from censusdp.infer._dense import dense_gls
from censusdp.infer.gls import Z90, Constraints, SiblingGroups, census_intervals, tree_gls
from censusdp.infer.tree_cov import TreeFactors, partition_variances

LEVELS = ("US", "State", "County", "Block")
VARIANCES = (2.0, 3.0, 5.0, 4.0, 7.0)


def _case(fanouts, group, seed, *, zero_rate=0.3, unmeasured=None):
    """A toy tree whose State units are grouped as ``group`` (-1: alone, with its own
    exact total); the groups' totals, the alone units' totals and the root's are exact."""
    s = toy_schema(3)
    h = tree(fanouts)
    rng = np.random.default_rng(seed)
    x = truth(s, h, rng)
    plan = _plan(LEVELS, TOY_QUERIES, VARIANCES)
    if unmeasured:
        del plan[unmeasured]
    ms = measure_gaussian(s, h, x, plan, rng)
    lay = make_layout(s, list(TOY_QUERIES), ("hhgq",))
    lines = _cell_lines(lay)
    pops = [np.asarray(t.sum(axis=1), dtype=float).ravel() for t in h.aggregate(x)]
    group = np.asarray(group, dtype=np.int64)
    n_groups = int(group.max()) + 1
    state = np.where(group < 0, pops[1], np.nan)
    groups = SiblingGroups(1, group, np.bincount(group[group >= 0], pops[1][group >= 0], n_groups))
    zero = rng.random((h.blocks.size, lay.d)) < zero_rate
    cons = Constraints(zero, {0: pops[0], 1: state}, groups)
    return ms, h, lay, lines, cons, pops, rng


@pytest.mark.parametrize(
    "fanouts,group,seed,unmeasured",
    [
        ((4, 2, 2), [0, -1, 0, -1], 1, None),  # a group of two parts apart, two alone
        ((4, 1, 3), [0, 1, 1, 0], 2, None),  # two groups, interleaved
        ((3, 2, 2), [0, 0, 0], 3, "State"),  # one group of three, the parts unmeasured
        ((5, 2, 1), [-1, 1, 0, 1, 0], 4, "US"),  # the root unmeasured (a nation outside)
    ],
)
def test_groups_equal_dense_gls(fanouts, group, seed, unmeasured) -> None:
    """Every estimate and sd at every level equals the dense KKT solve with the group row
    (1e-8), the parts of a group sum to its total, and any set of blocks' variance from
    the tree factors equals the dense one."""
    ms, h, lay, lines, cons, pops, rng = _case(fanouts, group, seed, unmeasured=unmeasured)
    factors = TreeFactors()
    est, sd = _collect(tree_gls(ms, h, lay, lines, cons, factors=factors), h, len(lines))
    ref = dense_gls(ms, h, lay, lines, cons)
    for level in range(h.n_levels):
        np.testing.assert_allclose(est[level], ref[level][0], atol=1e-8, err_msg=f"level {level}")
        np.testing.assert_allclose(sd[level] ** 2, ref[level][1] ** 2, atol=1e-8)
    g = np.asarray(group)
    for gi in range(int(g.max()) + 1):
        members = np.flatnonzero(g == gi)
        assert est[1][members, 0].sum() == pytest.approx(pops[1][members].sum(), abs=1e-8)
        assert (sd[1][members, 0] > 0.5).all()  # a part's own total stays uncertain
    alone = np.flatnonzero(g < 0)
    np.testing.assert_array_equal(est[1][alone, 0], pops[1][alone])
    np.testing.assert_array_equal(sd[1][alone, 0], 0.0)
    # sets of blocks: a random partition, and each group's blocks (sd of the total 0)
    nb = h.blocks.size
    target = rng.integers(-1, 3, nb)
    var = partition_variances(factors, h, lines, target, 3)
    sets = np.zeros((3, nb))
    sets[target[target >= 0], np.flatnonzero(target >= 0)] = 1.0
    np.testing.assert_allclose(
        var, dense_gls(ms, h, lay, lines, cons, sets=sets)[0][1] ** 2, atol=1e-8
    )
    of_state = g[h.ancestor_index(1)]
    var = partition_variances(factors, h, lines, of_state, int(g.max()) + 1)
    assert np.abs(var[:, 0]).max() < 1e-8
    for level in range(h.n_levels):  # each unit's blocks: the tree's own variances
        target = h.ancestor_index(level) if level < h.n_levels - 1 else np.arange(nb)
        var = partition_variances(factors, h, lines, target, h.n_units(level))
        np.testing.assert_allclose(var, sd[level] ** 2, atol=1e-8, err_msg=f"level {level}")


def test_without_the_group_the_parts_do_not_sum() -> None:
    """What ``infer`` entered before, with a state of two parts in the input: the root's
    total alone. Each state's parts then miss its invariant total."""
    ms, h, lay, lines, cons, pops, _ = _case((4, 1, 3), [0, 1, 1, 0], 2)
    before = Constraints(cons.zero, {0: pops[0]})
    est, _ = _collect(tree_gls(ms, h, lay, lines, before), h, len(lines))
    for members in ([0, 3], [1, 2]):
        assert abs(est[1][members, 0].sum() - pops[1][members].sum()) > 0.1
    est, _ = _collect(tree_gls(ms, h, lay, lines, cons), h, len(lines))
    for members in ([0, 3], [1, 2]):
        assert est[1][members, 0].sum() == pytest.approx(pops[1][members].sum(), abs=1e-8)


def test_group_members_must_be_siblings() -> None:
    ms, h, lay, lines, cons, pops, _ = _case((2, 2, 2), [0, -1], 1)
    bad = Constraints(
        cons.zero, {0: pops[0]}, SiblingGroups(2, np.array([0, -1, 0, -1]), np.ones(1))
    )
    with pytest.raises(InputError, match="share a parent"):
        _collect(tree_gls(ms, h, lay, lines, bad), h, len(lines))
    with pytest.raises(InputError, match="numbered -1 to 0"):
        SiblingGroups(1, np.array([0, 1]), np.ones(1))
    with pytest.raises(InputError, match="needs a member"):
        SiblingGroups(1, np.array([0, 0]), np.ones(2))


@pytest.mark.slow
def test_parts_coverage_by_simulation() -> None:
    """90% intervals of the parts' totals (a state of two parts, a state of three, one
    alone) cover the truth at 86-94% over 400 independent releases (Gaussian noise:
    the error is exactly normal with the computed sd). Seeded: a fixed outcome."""
    s = toy_schema(3)
    h = tree((6, 2, 2))
    lay = make_layout(s, list(TOY_QUERIES), ("hhgq",))
    lines = _cell_lines(lay)
    plan = _plan(LEVELS, TOY_QUERIES, VARIANCES)
    rng = np.random.default_rng(2026)
    x = truth(s, h, rng)
    pops = [np.asarray(t.sum(axis=1), dtype=float).ravel() for t in h.aggregate(x)]
    group = np.array([0, 1, 0, 1, -1, 1])
    totals = np.bincount(group[group >= 0], pops[1][group >= 0], 2)
    cons = Constraints(
        None, {0: pops[0], 1: np.where(group < 0, pops[1], np.nan)}, SiblingGroups(1, group, totals)
    )
    parts = np.flatnonzero(group >= 0)
    hits = []
    for _ in range(400):
        ms = measure_gaussian(s, h, x, plan, rng)
        est, sd = _collect(tree_gls(ms, h, lay, lines, cons), h, len(lines))
        lo, hi = census_intervals(est[1][parts, 0], sd[1][parts, 0], Z90)
        t = pops[1][parts]
        hits.append(((t >= lo) & (t <= hi)).mean())
        np.testing.assert_allclose(np.bincount(group[parts], est[1][parts, 0]), totals, atol=1e-8)
    rate = float(np.mean(hits))
    se = float(np.std(hits, ddof=1) / math.sqrt(len(hits)))
    print(f"parts' totals, 90% intervals: {rate:.4f} (se {se:.4f}, {len(hits)} releases)")
    assert 0.86 <= rate <= 0.94
