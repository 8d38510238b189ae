"""GLS variances of any set of blocks (``censusdp.infer.tree_cov``) against the dense solve.

The dense KKT solve (``censusdp.infer._dense``) forms the full covariance of every cell
of every block; the variance of a sum over a set of blocks is then ``f' Cov f``. The
tree recursion must give the same number for every set: a random partition of the
blocks (sets straddling every level's units), single blocks (the tree's own sds), whole
units of a level, and with bypassed single children, zero constraints and exact totals.
"""

from __future__ import annotations

import numpy as np
import pytest
from _gls_gen import TOY_QUERIES, measure_gaussian, toy_schema, tree, truth
from test_gls import _bypassed, _cell_lines, _collect, _plan

from censusdp.infer._algebra import make_layout
from censusdp.infer._dense import dense_gls
from censusdp.infer.gls import Constraints, TreeRun, tree_gls
from censusdp.infer.tree_cov import TreeFactors, partition_variances

LEVELS = ("US", "State", "County", "Block")


def _setup(fanouts, seed, *, constrained=True, bypass=False, unmeasured=None):
    s = toy_schema(3)
    h = tree(fanouts)
    rng = np.random.default_rng(seed)
    x = truth(s, h, rng)
    plan = _plan(LEVELS, TOY_QUERIES, (2.0, 3.0, 5.0, 4.0, 7.0))
    if unmeasured:
        del plan[unmeasured]
    ms = measure_gaussian(s, h, x, plan, rng)
    if bypass:
        ms, _ = _bypassed(ms, h, plan)
    lay = make_layout(s, list(TOY_QUERIES), ("hhgq",))
    lines = _cell_lines(lay)
    cons = None
    if constrained:
        zero = rng.random((h.blocks.size, lay.d)) < 0.3
        totals = {1: np.asarray(h.aggregate(np.asarray(x.sum(axis=1)))[1], dtype=float).ravel()}
        cons = Constraints(zero, totals)
    return ms, h, lay, lines, cons, rng


def _tree_sets(ms, h, lay, lines, cons, target, n_targets, chunk_values=1 << 22):
    factors = TreeFactors()
    run = tree_gls(ms, h, lay, lines, cons, run=TreeRun(chunk_values=chunk_values), factors=factors)
    est, sd = _collect(run, h, len(lines))
    var = partition_variances(factors, h, lines, target, n_targets)
    return est, sd, var


@pytest.mark.parametrize(
    "fanouts,seed,kw",
    [
        ((2, 3, 3), 1, {}),
        ((1, 2, 4), 2, {"constrained": False}),
        ((2, 2, 3), 3, {"unmeasured": "County"}),
        ((1, 3, 2), 4, {"bypass": True, "constrained": False}),
        ((2, 1, 3), 5, {"bypass": True, "constrained": False}),
        ((2, 2, 3), 6, {"chunk_values": 1}),  # the bottom level in many tasks
    ],
)
def test_random_partition_equals_dense(fanouts, seed, kw) -> None:
    """A random partition of the blocks (sets across units of every level): every line's
    variance equals the dense solve's, to 1e-8."""
    chunk_values = kw.pop("chunk_values", 1 << 22)
    ms, h, lay, lines, cons, rng = _setup(fanouts, seed, **kw)
    nb = h.blocks.size
    n_targets = 4
    target = rng.integers(-1, n_targets, nb)  # -1: a block in no set
    sets = np.zeros((n_targets, nb))
    sets[target[target >= 0], np.flatnonzero(target >= 0)] = 1.0
    _, _, var = _tree_sets(ms, h, lay, lines, cons, target, n_targets, chunk_values)
    ref_est, ref_sd = dense_gls(ms, h, lay, lines, cons, sets=sets)[0]
    np.testing.assert_allclose(var, ref_sd**2, atol=1e-8, rtol=1e-8)
    # the recursion is not the sum of the blocks' own variances (they are correlated)
    est, sd, _ = _tree_sets(ms, h, lay, lines, cons, target, n_targets)
    indep = np.zeros_like(var)
    np.add.at(indep, target[target >= 0], sd[-1][target >= 0] ** 2)
    assert np.abs(indep - var).max() > 0.1 * var.max()
    np.testing.assert_allclose(sets @ est[-1], ref_est, atol=1e-8)


@pytest.mark.parametrize("bypass", [False, True])
def test_single_blocks_and_whole_units_equal_the_tree(bypass) -> None:
    """Each block alone, and the blocks of each unit of every level, give the tree's own
    variances (the sets of a level are that level's units)."""
    ms, h, lay, lines, cons, _ = _setup((1, 3, 2), 11, bypass=bypass, constrained=not bypass)
    nb = h.blocks.size
    factors = TreeFactors()
    est, sd = _collect(tree_gls(ms, h, lay, lines, cons, factors=factors), h, len(lines))
    for level in range(h.n_levels):
        target = h.ancestor_index(level) if level < h.n_levels - 1 else np.arange(nb)
        var = partition_variances(factors, h, lines, target, h.n_units(level))
        np.testing.assert_allclose(var, sd[level] ** 2, atol=1e-8, err_msg=f"level {level}")
