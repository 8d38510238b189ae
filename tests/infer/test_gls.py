"""Tree GLS: closed forms, the dense direct solve, never worse than direct, coverage.

Closed forms used below (derived in the docstrings): a root with ``k`` children, every
level measuring only the detailed histogram (variance ``v_p`` at the root, ``v_c`` at the
children), makes each cell an independent two-level tree. Pooling the children,
``sum_c y_c`` estimates the root cell with variance ``k v_c``; with the root's own
measurement the root's variance is ``s2 = v_p k v_c / (v_p + k v_c)``. A child given its
family sum is ``y_c - (sum y - x_root) / k`` with variance ``v_c (1 - 1/k)`` plus
``Var(root) / k^2``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _gls_gen import TOY_QUERIES, measure_gaussian, toy_schema, tree, truth
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.data.geography import GeoLevels
from censusdp.data.schema import get_schema
from censusdp.errors import InputError, SchemaError
from censusdp.infer._algebra import apply, make_layout, op_inv, op_pinv, quad_forms, query_gram
from censusdp.infer._dense import dense_gls
from censusdp.infer.gls import (
    Constraints,
    census_intervals,
    condition_total,
    condition_zero,
    direct_sd,
    level_design,
    make_lines,
    tree_gls,
)

LEVELS2 = GeoLevels.from_pairs([("US", 0), ("Block", 16)])
LEVELS3 = GeoLevels.from_pairs([("US", 0), ("County", 5), ("Block", 16)])


def _dense_op(layout, op):
    out = 0
    for a in range(layout.n_blocks):
        m = op[a]
        for j, n in enumerate(layout.sizes):
            jn = np.ones((n, n)) / n
            m = np.kron(m, jn if ((a >> j) & 1) == 0 else np.eye(n) - jn)
        out = out + m
    return out


def _cell_lines(layout):
    """``total`` then every live cell (indicator over the schema's cells)."""
    s = layout.schema
    ind = np.concatenate(
        [np.ones((s.size, 1)), np.eye(s.size)[:, layout.cells.reshape(-1)]], axis=1
    )
    return make_lines(layout, ["total"] + [f"c{i}" for i in range(layout.size)], ind)


def _collect(results, hierarchy, n_lines):
    est = [np.zeros((hierarchy.n_units(lv), n_lines)) for lv in range(hierarchy.n_levels)]
    sd = [np.zeros((hierarchy.n_units(lv), n_lines)) for lv in range(hierarchy.n_levels)]
    for r in results:
        est[r.level][r.start : r.stop] = r.estimate
        sd[r.level][r.start : r.stop] = r.sd
    return est, sd


# -- the block algebra -----------------------------------------------------------------------


def test_algebra_matches_dense_matrices() -> None:
    """apply, inverse, pseudo-inverse, quadratic forms and Grams agree with dense algebra."""
    rng = np.random.default_rng(0)
    s = toy_schema(4)
    lay = make_layout(s, list(TOY_QUERIES), ("hhgq",))
    assert (lay.general, lay.simple, lay.d, lay.sizes) == (
        ("hhgq", "votingage"),
        ("hispanic", "cenrace"),
        5,
        (2, 4),
    )
    grams = {q: query_gram(lay, q) for q in TOY_QUERIES}
    for q, (g, rows) in grams.items():
        f = rows.reshape(-1)
        np.testing.assert_array_equal(
            _dense_op(lay, g), (f[:, None] == f[None, :]).astype(float), err_msg=q
        )
    j = sum(rng.uniform(0.2, 2.0) * g for g, _ in grams.values())
    dj = _dense_op(lay, j)
    x = rng.normal(size=(3, *lay.shape))
    got = apply(lay, j, x).reshape(3, -1)
    np.testing.assert_allclose(got, x.reshape(3, -1) @ dj.T, atol=1e-12)
    np.testing.assert_allclose(_dense_op(lay, op_inv(j)), np.linalg.inv(dj), atol=1e-10)
    # a singular PSD operator: the pseudo-inverse is the dense one
    u = rng.normal(size=(lay.n_blocks, lay.d, 2))
    p = u @ np.swapaxes(u, -1, -2)
    np.testing.assert_allclose(
        _dense_op(lay, op_pinv(p)), np.linalg.pinv(_dense_op(lay, p)), atol=1e-9
    )
    t = rng.integers(0, 2, (3, lay.d)).astype(float)
    qf = quad_forms(j, t)
    for k in range(3):
        for a in range(lay.n_blocks):
            assert qf[a, k] == pytest.approx(t[k] @ j[a] @ t[k])


def test_conditioning_matches_dense_gaussian_conditioning() -> None:
    """condition_total / condition_zero are Gaussian conditioning on 1'x = T and E x = 0."""
    rng = np.random.default_rng(1)
    lay = make_layout(toy_schema(3), list(TOY_QUERIES), ("hhgq",))
    u = rng.normal(size=(lay.n_blocks, lay.d, lay.d))
    p = u @ np.swapaxes(u, -1, -2) + np.eye(lay.d)
    dp = _dense_op(lay, p)
    x = rng.normal(size=(1, *lay.shape))
    xd = x.reshape(-1).copy()
    one = np.ones(lay.size)
    new = condition_total(lay, x, p[None], np.zeros(1, dtype=np.int64), np.array([7.0]))
    k = dp @ one / (one @ dp @ one)
    np.testing.assert_allclose(x.reshape(-1), xd + k * (7.0 - one @ xd), atol=1e-10)
    np.testing.assert_allclose(
        _dense_op(lay, new[0]), dp - np.outer(dp @ one, one @ dp) / (one @ dp @ one), atol=1e-10
    )
    assert x.sum() == pytest.approx(7.0, abs=1e-10)
    zero = np.zeros(lay.d, dtype=bool)
    zero[[1, 3]] = True
    r, pz = condition_zero(lay, p, zero)
    e = np.repeat(zero, lay.size // lay.d)  # general index is the slowest axis
    ed = np.eye(lay.size)[e]
    kz = dp @ ed.T @ np.linalg.inv(ed @ dp @ ed.T)
    np.testing.assert_allclose(_dense_op(lay, pz), dp - kz @ ed @ dp, atol=1e-10)
    np.testing.assert_allclose(
        apply(lay, r, x).reshape(-1), x.reshape(-1) - kz @ (ed @ x.reshape(-1)), atol=1e-10
    )


def test_pl94_layout_and_unsupported_queries() -> None:
    """pl94: 15 live HHGQ x VOTINGAGE combinations x HISPANIC x CENRACE = 1,890 cells."""
    pl94 = get_schema("pl94")
    lay = make_layout(
        pl94, ["detailed", "hhinstlevels", "hispanic*cenrace", "votingage*cenrace"], ("hhgq",)
    )
    assert (lay.d, lay.size, lay.sizes) == (15, 1890, (2, 63))
    assert lay.multiplicity().tolist() == [1, 1, 62, 62]
    # a recode of CENRACE makes CENRACE general: 15 x 63 = 945 combinations is too many
    with pytest.raises(SchemaError, match="at most 256"):
        make_layout(pl94, ["detailed", "numraces"], ("hhgq",))


# -- closed forms -------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 7])
def test_two_level_closed_form(k: int) -> None:
    """Root + k children, detailed query only: the variances of the module docstring."""
    vp, vc = 3.0, 2.0
    s = toy_schema(2)
    h = tree((k,), LEVELS2)
    rng = np.random.default_rng(k)
    ms = measure_gaussian(
        s, h, truth(s, h, rng), {"US": {"detailed": vp}, "Block": {"detailed": vc}}, rng
    )
    lay = make_layout(s, ["detailed"], ("hhgq",))
    lines = _cell_lines(lay)
    est, sd = _collect(tree_gls(ms, h, lay, lines), h, len(lines))
    s2 = vp * k * vc / (vp + k * vc)
    np.testing.assert_allclose(sd[0][:, 1:] ** 2, s2, rtol=1e-10)
    np.testing.assert_allclose(sd[0][:, 0] ** 2, lay.size * s2, rtol=1e-10)
    child = vc * (1 - 1 / k) + s2 / k**2
    np.testing.assert_allclose(sd[1][:, 1:] ** 2, child, rtol=1e-10)
    # the estimates are the closed-form ones too
    yp = ms.queries[("US", "detailed")].dense(slice(None), s.size)[:, lay.cells.reshape(-1)]
    yc = ms.queries[("Block", "detailed")].dense(slice(None), s.size)[:, lay.cells.reshape(-1)]
    root = (yp[0] / vp + yc.sum(axis=0) / (k * vc)) / (1 / vp + 1 / (k * vc))
    np.testing.assert_allclose(est[0][0, 1:], root, atol=1e-9)
    np.testing.assert_allclose(est[1][:, 1:], yc - (yc.sum(axis=0) - root) / k, atol=1e-9)


@pytest.mark.parametrize("k", [2, 5])
def test_exact_parent_total_closed_form(k: int) -> None:
    """With the root's total invariant: root cells ``s2 (1 - 1/c)``, child totals ``c v_c (1 - 1/k)``.

    Conditioning ``c`` independent cells of variance ``s2`` on their exact sum leaves
    ``s2 (1 - 1/c)`` each; a child's total is its measured total less ``1/k`` of the
    family's (known) discrepancy, so only the children's own noise remains.
    """
    vp, vc = 4.0, 1.5
    s = toy_schema(2)
    h = tree((k,), LEVELS2)
    rng = np.random.default_rng(10 + k)
    x = truth(s, h, rng)
    ms = measure_gaussian(s, h, x, {"US": {"detailed": vp}, "Block": {"detailed": vc}}, rng)
    lay = make_layout(s, ["detailed"], ("hhgq",))
    lines = _cell_lines(lay)
    total = float(x.sum())
    cons = Constraints(None, {0: np.array([total])})
    est, sd = _collect(tree_gls(ms, h, lay, lines, cons), h, len(lines))
    c = lay.size
    s2 = vp * k * vc / (vp + k * vc)
    assert est[0][0, 0] == total and sd[0][0, 0] == 0.0
    np.testing.assert_allclose(sd[0][0, 1:] ** 2, s2 * (1 - 1 / c), rtol=1e-9)
    np.testing.assert_allclose(sd[1][:, 0] ** 2, c * vc * (1 - 1 / k), rtol=1e-9)
    np.testing.assert_allclose(est[1][:, 0].sum(), total, atol=1e-8)


# -- the dense direct solve -----------------------------------------------------------------------


def _plan(levels, queries, variances):
    return {lv: dict(zip(queries, variances, strict=True)) for lv in levels}


@pytest.mark.parametrize(
    "fanouts,constrained,unmeasured,discrete",
    [
        ((1, 2, 3), True, None, False),
        ((2, 2, 2), False, None, True),
        ((1, 3, 2), True, "County", False),
        ((2, 1, 4), True, "US", True),
    ],
)
def test_tree_gls_equals_dense_gls(fanouts, constrained, unmeasured, discrete) -> None:
    """Every estimate and standard deviation at every level equals the dense KKT solve."""
    s = toy_schema(3)
    h = tree(fanouts)
    rng = np.random.default_rng(sum(fanouts) + 7 * constrained)
    x = truth(s, h, rng)
    plan = _plan(("US", "State", "County", "Block"), TOY_QUERIES, (2.0, 3.0, 5.0, 4.0, 7.0))
    if unmeasured:
        del plan[unmeasured]
    ms = measure_gaussian(s, h, x, plan, rng, discrete=discrete)
    lay = make_layout(s, list(TOY_QUERIES), ("hhgq",))
    lines = _cell_lines(lay)
    cons = None
    if constrained:
        zero = rng.random((h.blocks.size, lay.d)) < 0.3
        zero[0] = True  # an empty block (the constrained GLS need not match the truth here)
        totals = {1: np.asarray(h.aggregate(np.asarray(x.sum(axis=1)))[1], dtype=float).ravel()}
        cons = Constraints(zero, totals)
    est, sd = _collect(tree_gls(ms, h, lay, lines, cons), h, len(lines))
    ref = dense_gls(ms, h, lay, lines, cons)
    for level in range(h.n_levels):
        e, d = ref[level]
        np.testing.assert_allclose(est[level], e, atol=1e-8, err_msg=f"level {level}")
        np.testing.assert_allclose(sd[level] ** 2, d**2, atol=1e-9, err_msg=f"level {level}")


def test_consistency_and_never_worse_than_direct() -> None:
    """Children's estimates add up to the parent's; GLS sd <= best direct sd for every line."""
    s = toy_schema(3)
    h = tree((1, 3, 4))
    rng = np.random.default_rng(3)
    queries = TOY_QUERIES
    plan = _plan(("US", "State", "County", "Block"), queries, (2.0, 3.0, 5.0, 4.0, 7.0))
    ms = measure_gaussian(s, h, truth(s, h, rng), plan, rng)
    lay = make_layout(s, list(queries), ("hhgq",))
    lines = _cell_lines(lay)
    est, sd = _collect(tree_gls(ms, h, lay, lines), h, len(lines))
    for level in range(1, h.n_levels):
        sums = np.zeros_like(est[level - 1])
        np.add.at(sums, h.parent[level], est[level])
        np.testing.assert_allclose(sums, est[level - 1], atol=1e-8)
    for level, name in enumerate(h.geolevels.names):
        design = level_design(lay, level, name, ms.read(level, 0, h.n_units(level)))
        direct = direct_sd(lay, design, lines)
        # independent: the total from the total query, each cell from the detailed query
        assert direct[0] == pytest.approx(math.sqrt(2.0))
        np.testing.assert_allclose(direct[1:], math.sqrt(7.0))
        assert (sd[level] <= direct[None, :] * (1 + 1e-12)).all()
        assert (sd[level] < 0.999 * direct[None, :]).mean() > 0.9


def test_coverage_by_simulation() -> None:
    """90% and 95% intervals cover the truth at their nominal rates (300 releases, fixed seed).

    Gaussian noise makes the GLS error exactly normal with the computed sd, so the rate is
    nominal; the tolerance is 4 standard errors estimated from the spread of per-release
    coverage (releases are independent; lines within one release are not).
    """
    s = toy_schema(3)
    h = tree((1, 2, 3))
    lay = make_layout(s, list(TOY_QUERIES), ("hhgq",))
    lines = _cell_lines(lay)
    plan = _plan(("US", "State", "County", "Block"), TOY_QUERIES, (2.0, 3.0, 5.0, 4.0, 7.0))
    rng = np.random.default_rng(2024)
    x = truth(s, h, rng)
    zero = np.zeros((h.blocks.size, lay.d), dtype=bool)
    xd = x.toarray()
    for b in range(h.blocks.size):  # make some groups empty in the truth, and say so
        g = rng.integers(0, 3)
        zero[b] = lay.general_of("hhgq") == g
        xd[b, lay.cells[zero[b]].reshape(-1)] = 0
    import scipy.sparse as sp

    x = sp.csr_matrix(xd)
    levels_truth = h.aggregate(x)
    true_lines = [
        np.asarray(lv.toarray(), dtype=float)[:, lay.cells.reshape(-1)] @ lines.matrix
        for lv in levels_truth
    ]
    totals = {1: np.asarray(h.aggregate(np.asarray(x.sum(axis=1)))[1], dtype=float).ravel()}
    cons = Constraints(zero, totals)
    rates = {90: [], 95: []}
    from censusdp.infer.gls import Z90, Z95

    for _ in range(300):
        ms = measure_gaussian(s, h, x, plan, rng)
        est, sd = _collect(tree_gls(ms, h, lay, lines, cons), h, len(lines))
        for level_pct, z in ((90, Z90), (95, Z95)):
            hit = n = 0
            for level in range(h.n_levels):
                lo, hi = census_intervals(est[level], sd[level], z)
                ok = sd[level] > 0
                t = true_lines[level]
                hit += int(((t >= lo) & (t <= hi))[ok].sum())
                n += int(ok.sum())
            rates[level_pct].append(hit / n)
    for pct, nominal in ((90, 0.90), (95, 0.95)):
        r = np.array(rates[pct])
        se = r.std(ddof=1) / math.sqrt(r.size)
        print(f"coverage {pct}%: {r.mean():.4f} (se {se:.4f}, {r.size} releases)")
        assert abs(r.mean() - nominal) < 4 * se + 1e-3, (pct, r.mean(), se)
        assert se < 0.004


# -- rules and validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "est,sd,z,lo,hi",
    [
        (10.2, 1.0, 1.0, 10, 11),
        (10.0, 0.0, 1.645, 10, 10),
        (-3.0, 1.0, 1.0, 0, 0),
        (0.5, 1.0, 1.0, 0, 1),
        (2.999, 0.5, 2.0, 2, 3),
        (7.0, 2.0, 1.5, 4, 10),
        # round-off: a structural zero computed in floating point, a count a hair off
        (1.050186e-13, 2.085173e-14, 1.6448536, 0, 0),
        (12.000000000001, 1e-15, 1.96, 12, 12),
        (11.999999999999, 0.0, 1.96, 12, 12),
        (3.5, 1e-15, 1.96, 4, 3),  # not round-off: no integer within the interval
    ],
)
def test_census_interval_rule(est, sd, z, lo, hi) -> None:
    """low = max(ceil(est - z sd - t), 0), high = max(floor(est + z sd + t), 0), with
    t = 1e-9 max(1, |est|) for round-off."""
    a, b = census_intervals(np.array([est]), np.array([sd]), z)
    assert (int(a[0]), int(b[0])) == (lo, hi)


def test_rank_deficient_or_bad_variance_is_rejected() -> None:
    s = toy_schema(2)
    h = tree((2,), LEVELS2)
    rng = np.random.default_rng(0)
    lay = make_layout(s, list(TOY_QUERIES), ("hhgq",))
    ms = measure_gaussian(s, h, truth(s, h, rng), {"Block": {"total": 1.0, "hhinst": 1.0}}, rng)
    with pytest.raises(InputError, match="do not determine every cell"):
        level_design(lay, 1, "Block", ms.read(1, 0, 2))
    ms = measure_gaussian(s, h, truth(s, h, rng), {"Block": {"detailed": 1.0}}, rng)
    bad = [
        m.__class__(m.geolevel, m.query, m.rows, m.values, 0.0, m.mechanism)
        for m in ms.read(1, 0, 2)
    ]
    with pytest.raises(InputError, match="variance of \\(Block, detailed\\) is 0.0"):
        level_design(lay, 1, "Block", bad)


def test_non_product_line_is_rejected() -> None:
    lay = make_layout(toy_schema(2), list(TOY_QUERIES), ("hhgq",))
    ind = np.zeros((lay.schema.size, 1))
    cells = lay.cells.reshape(lay.d, 2, 2)
    ind[cells[0, 0, 0], 0] = 1
    ind[cells[1, 1, 1], 0] = 1  # two cells differing in every factor: not a product
    with pytest.raises(SchemaError, match="not a product set"):
        make_lines(lay, ["odd"], ind)


@settings(derandomize=True, max_examples=15, deadline=None)
@given(
    fanouts=st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 3)),
    variances=st.lists(st.sampled_from([0.5, 1.0, 3.0, 20.0]), min_size=5, max_size=5),
    seed=st.integers(0, 2**16),
    zero_rate=st.sampled_from([0.0, 0.3]),
)
def test_tree_equals_dense_property(fanouts, variances, seed, zero_rate) -> None:
    """Random trees, variances and zero patterns: tree GLS == dense GLS, and consistent."""
    s = toy_schema(2)
    h = tree(fanouts)
    rng = np.random.default_rng(seed)
    plan = _plan(("US", "State", "County", "Block"), TOY_QUERIES, tuple(variances))
    x = truth(s, h, rng)
    ms = measure_gaussian(s, h, x, plan, rng)
    lay = make_layout(s, list(TOY_QUERIES), ("hhgq",))
    lines = _cell_lines(lay)
    zero = rng.random((h.blocks.size, lay.d)) < zero_rate
    totals = {1: np.asarray(h.aggregate(np.asarray(x.sum(axis=1)))[1], dtype=float).ravel()}
    cons = Constraints(zero, totals)
    est, sd = _collect(tree_gls(ms, h, lay, lines, cons), h, len(lines))
    ref = dense_gls(ms, h, lay, lines, cons)
    for level in range(h.n_levels):
        np.testing.assert_allclose(est[level], ref[level][0], atol=1e-7)
        np.testing.assert_allclose(sd[level] ** 2, ref[level][1] ** 2, atol=1e-8)
        if level:
            sums = np.zeros_like(est[level - 1])
            np.add.at(sums, h.parent[level], est[level])
            np.testing.assert_allclose(sums, est[level - 1], atol=1e-7)


def _bypassed(ms, h, plan):
    """``ms`` re-measured as a spine release's bypass would: every unit's variance is its
    level's divided by its budget multiple (bypass_shares of equal level shares), and a
    bypassed single child (share 0) is not measured (variance inf, values 0)."""
    from dataclasses import replace
    from fractions import Fraction

    from censusdp.data.spine import bypass_shares

    shares = bypass_shares(h, [Fraction(1, h.n_levels)] * h.n_levels)
    assert shares.bypassed
    out = {}
    for key, mq in ms.queries.items():
        li = h.geolevels.index(key[0])
        factor = shares.numerators[li] / shares.level_numerators[li]
        var = np.where(factor > 0, plan[key[0]][key[1]] / np.where(factor > 0, factor, 1), np.inf)
        vals = np.where(np.isfinite(var)[:, None], mq.values, 0.0)
        out[key] = replace(mq, values=vals, variance=var)
    ms.queries.update(out)
    return ms, shares


@pytest.mark.parametrize("fanouts", [(1, 2, 3), (2, 1, 1), (1, 3, 1)])
def test_tree_gls_with_per_unit_variances_equals_dense_gls(fanouts) -> None:
    """Bypass: units measured with their own variances, single children not at all; the
    tree GLS equals the dense solve, and the block totals stay exact (a bypassed block's
    total reaches its parent)."""
    s = toy_schema(2)
    h = tree(fanouts)
    rng = np.random.default_rng(sum(fanouts))
    x = truth(s, h, rng)
    plan = _plan(("US", "State", "County", "Block"), TOY_QUERIES, (2.0, 3.0, 5.0, 4.0, 7.0))
    ms, shares = _bypassed(measure_gaussian(s, h, x, plan, rng), h, plan)
    unmeasured = [lv for lv in range(h.n_levels) if not shares.measured(lv).all()]
    assert unmeasured and (fanouts[-1] > 1 or h.n_levels - 1 in unmeasured)
    lay = make_layout(s, list(TOY_QUERIES), ("hhgq",))
    lines = _cell_lines(lay)
    block_totals = np.asarray(x.sum(axis=1), dtype=float).ravel()
    cons = Constraints(None, {h.n_levels - 1: block_totals})
    est, sd = _collect(tree_gls(ms, h, lay, lines, cons), h, len(lines))
    ref = dense_gls(ms, h, lay, lines, cons)
    for level in range(h.n_levels):
        e, d = ref[level]
        np.testing.assert_allclose(est[level], e, atol=1e-8, err_msg=f"level {level}")
        np.testing.assert_allclose(sd[level] ** 2, d**2, atol=1e-9, err_msg=f"level {level}")
    np.testing.assert_allclose(est[-1][:, 0], block_totals, atol=1e-8)
    # a bypassed single child's estimate is its parent's
    for level in range(1, h.n_levels):
        off = np.flatnonzero(~shares.measured(level))
        np.testing.assert_allclose(est[level][off], est[level - 1][h.parent[level][off]])
