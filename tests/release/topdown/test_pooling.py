"""The root's marginals pooled from every level: the best linear unbiased estimate."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from censusdp.data.geography import GeoLevels, Hierarchy
from censusdp.data.measurements import MeasuredQuery, MeasurementSet, measured_rows
from censusdp.data.queries import make_query
from censusdp.data.schema import get_schema
from censusdp.release.topdown import pooling
from censusdp.release.topdown.pooling import pooled_root
from profiles import examples

LEVELS = GeoLevels.from_pairs([("US", 0), ("State", 2), ("County", 5), ("Block", 16)])
PL94 = get_schema("pl94")


def _tree(fanouts: tuple[int, ...]) -> Hierarchy:
    codes = [""]
    for li, f in enumerate(fanouts):
        width = LEVELS[li + 1].length - LEVELS[li].length
        codes = [c + str(k + 1).zfill(width) for c in codes for k in range(f)]
    return Hierarchy.from_blocks(np.array(codes), LEVELS)


def _measure(h: Hierarchy, plan: dict[str, dict[str, float]], rng) -> tuple[MeasurementSet, dict]:
    """Noisy answers of random block histograms; also the exact root answers."""
    nb = h.n_units(h.n_levels - 1)
    import scipy.sparse as sp

    x = rng.poisson(0.05, (nb, PL94.size)).astype(np.int64)
    x[:, PL94.structural_zero_mask] = 0
    levels = h.aggregate(sp.csr_matrix(x))
    ms = MeasurementSet(PL94, h.geolevels, h.geocodes)
    exact_root = {}
    for li, lv in enumerate(h.geolevels.levels):
        for name, v in plan.get(lv.name, {}).items():
            q = make_query(PL94, name)
            rows = measured_rows(PL94, q)
            exact = np.asarray(q.answer_many(levels[li]).todense())[:, rows].astype(float)
            vals = exact + rng.normal(0.0, np.sqrt(v), exact.shape)
            ms.queries[(lv.name, q.name)] = MeasuredQuery(lv.name, q.name, rows, vals, v, "G")
            exact_root[q.name] = np.asarray(q.answer_many(levels[0]).todense())[0, rows]
    return ms, exact_root


def _brute_force(ms: MeasurementSet, h: Hierarchy, name: str) -> tuple[np.ndarray, float]:
    """Generalised least squares over the block answers, by dense linear algebra: the
    estimate of the root's answers (the sum over blocks) and its variance."""
    bl = h.n_levels - 1
    nb = h.n_units(bl)
    design, prec, ys = [], [], []
    for li, lv in enumerate(h.geolevels.levels):
        mq = ms.queries.get((lv.name, name))
        if mq is None:
            continue
        # which level-li unit each block lies in
        up = np.arange(nb)
        for lj in range(bl, li, -1):
            up = h.parent[lj][up]
        d = np.zeros((h.n_units(li), nb))
        d[up, np.arange(nb)] = 1.0
        design.append(d)
        prec.append(np.full(h.n_units(li), 1.0 / mq.variance))
        ys.append(mq.values)
    d = np.vstack(design)
    w = np.concatenate(prec)
    y = np.vstack(ys)
    info = d.T @ (w[:, None] * d)
    cov = np.linalg.pinv(info)
    ones = np.ones(nb)
    est = ones @ cov @ (d.T @ (w[:, None] * y))
    return est, float(ones @ cov @ ones)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fanouts=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3)),
    variances=st.lists(st.sampled_from([None, 0.5, 4.0, 30.0]), min_size=4, max_size=4),
    seed=st.integers(0, 2**16),
)
def test_pooled_root_is_the_generalised_least_squares_estimate(fanouts, variances, seed):
    if all(v is None for v in variances):
        variances[0] = 1.0
    h = _tree(fanouts)
    plan = {
        lv.name: {"votingage": v, "hhgq": 2 * v}
        for lv, v in zip(h.geolevels.levels, variances, strict=True)
        if v is not None
    }
    ms, _ = _measure(h, plan, np.random.default_rng(seed))
    with pytest.MonkeyPatch.context() as mp:  # every level, however little it adds
        mp.setattr(pooling, "POOL_VARIANCE_TOLERANCE", 0.0)
        out = {m.query: m for m in pooled_root(ms, h, variance_floor=0.0)}
    assert set(out) == {"votingage", "hhgq"}
    for name, mq in out.items():
        est, var = _brute_force(ms, h, name)
        assert mq.values.shape == (1, mq.rows.size) and mq.geolevel == "US"
        assert np.allclose(mq.values[0], est, atol=1e-8 * max(1.0, np.abs(est).max()))
        assert np.isclose(mq.variance, var, rtol=1e-9)
        # never worse than the root's own measurement
        own = ms.queries.get(("US", name))
        if own is not None:
            assert mq.variance <= own.variance * (1 + 1e-12)


def test_pooling_is_unbiased_and_as_precise_as_promised():
    """Over many draws the pooled answers centre on the truth with the stated variance."""
    h = _tree((1, 3, 4))
    plan = {"US": {"votingage": 400.0}, "State": {"votingage": 50.0}, "County": {"votingage": 90.0}}
    plan["Block"] = {"votingage": 200.0}
    errs, var = [], None
    rng = np.random.default_rng(3)
    for _ in range(150):
        ms, exact = _measure(h, plan, rng)
        (mq,) = pooled_root(ms, h)
        errs.append(mq.values[0] - exact["votingage"])
        var = mq.variance
    errs = np.asarray(errs)
    county = 1 / (1 / 90 + 1 / (4 * 200))  # its own and its 4 blocks'
    state = 1 / (1 / 50 + 1 / (3 * county))
    assert np.isclose(var, 1 / (1 / 400 + 1 / state), rtol=1e-5)  # 37.6: the floor adds 1e-6
    assert np.abs(errs.mean(axis=0)).max() < 4 * np.sqrt(var / len(errs))
    assert 0.7 < errs.var(axis=0).mean() / var < 1.3  # 3 sd of the estimate: 0.25


def test_cell_level_queries_are_pooled_only_down_the_one_unit_chain(monkeypatch):
    monkeypatch.setattr(pooling, "POOL_MAX_ROWS", 3)  # votingage (2 rows) stays small
    h = _tree((1, 2, 2))
    plan = {lv: {"votingage": 10.0, "hhgq": 10.0} for lv in ("US", "State", "County", "Block")}
    ms, _ = _measure(h, plan, np.random.default_rng(1))
    out = {m.query: m for m in pooled_root(ms, h, variance_floor=0.0)}
    # hhgq (8 rows): the US and the lone State only -> variance 5; votingage: every level
    assert np.isclose(out["hhgq"].variance, 5.0)
    us, st_ = ms.queries[("US", "hhgq")], ms.queries[("State", "hhgq")]
    assert np.allclose(out["hhgq"].values[0], (us.values[0] + st_.values[0]) / 2)
    assert out["votingage"].variance < 5.0


class _CountingReads:
    """A measurement set that records the values of every query it hands out."""

    def __init__(self, ms: MeasurementSet) -> None:
        self.ms, self.schema, self.geolevels = ms, ms.schema, ms.geolevels
        self.values: dict[tuple[int, str], int] = {}

    def queries_at(self, level):
        return self.ms.queries_at(level)

    def unit_variances(self, level, query):
        return self.ms.unit_variances(level, query)

    def read(self, level, start, stop, queries=None):
        out = self.ms.read(level, start, stop, queries)
        for m in (m for m in out if m.values.size):  # (reads of 0 units name the queries)
            key = (level, m.query)
            self.values[key] = self.values.get(key, 0) + m.values.size
        return out


def test_wide_queries_are_not_read_below_the_one_unit_chain(monkeypatch):
    """Pooling reads only the queries it pools at a level: a ddp-2010 block's 229,320
    detailed values, read for every block of a state at once, were the full-state run's
    memory peak (a chunk of 9,500 blocks is 2.2 billion values)."""
    monkeypatch.setattr(pooling, "POOL_MAX_ROWS", 3)
    h = _tree((1, 2, 2))
    plan = {lv: {"votingage": 10.0, "hhgq": 10.0} for lv in ("US", "State", "County", "Block")}
    ms, _ = _measure(h, plan, np.random.default_rng(2))
    reads = _CountingReads(ms)
    pooled = {m.query: m for m in pooled_root(reads, h, variance_floor=0.0)}
    direct = {m.query: m for m in pooled_root(ms, h, variance_floor=0.0)}
    for name, m in direct.items():
        assert np.array_equal(pooled[name].values, m.values) and pooled[name].variance == m.variance
    hhgq = make_query(PL94, "hhgq").name
    assert {lv for lv, q in reads.values if q == hhgq} == {0, 1}  # the US and the State
    assert reads.values[(3, make_query(PL94, "votingage").name)] == 4 * 2  # every block


@pytest.mark.parametrize(
    ("block_variance", "read"), [(1000.0, False), (30.0, False), (3.0, True), (0.01, True)]
)
def test_a_level_that_barely_moves_the_root_is_not_read(block_variance, read):
    """The blocks are left out when pooling them would change the root's variance by
    less than POOL_VARIANCE_TOLERANCE (100 blocks of variance 1000 against a root of
    about 0.3: 3e-6), and read when they matter; the root's variance is then within the
    tolerance of the generalised least squares of every level."""
    h = _tree((1, 2, 50))
    plan = {lv: {"votingage": 1.0} for lv in ("US", "State")}
    plan["County"] = {"votingage": 1000.0}
    plan["Block"] = {"votingage": block_variance}
    ms, _ = _measure(h, plan, np.random.default_rng(4))
    reads = _CountingReads(ms)
    (mq,) = pooled_root(reads, h, variance_floor=0.0)
    assert any(lv == 3 for lv, _ in reads.values) == read
    est, var = _brute_force(ms, h, "votingage")
    assert var * (1 - 1e-9) <= mq.variance <= var * (1 + pooling.POOL_VARIANCE_TOLERANCE)
    assert (mq.variance == pytest.approx(var, rel=1e-9)) == read
    # the estimate moves by far less than its standard deviation
    assert np.abs(mq.values[0] - est).max() < 0.05 * np.sqrt(var)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fanouts=st.tuples(st.integers(1, 3), st.integers(1, 4), st.integers(1, 6)),
    variances=st.lists(st.sampled_from([None, 0.5, 4.0, 300.0]), min_size=4, max_size=4),
)
def test_the_variance_alone_pass_is_the_pooling_pass(fanouts, variances):
    """What decides how deep to read (the upward pass on the variances) gives the
    variance pooled_root then reports, whatever levels are measured."""
    if all(v is None for v in variances):
        variances[0] = 1.0
    h = _tree(fanouts)
    plan = {
        lv.name: {"votingage": v}
        for lv, v in zip(h.geolevels.levels, variances, strict=True)
        if v is not None
    }
    ms, _ = _measure(h, plan, np.random.default_rng(0))
    levels = [pooling._level_variances(ms, li) for li in range(h.n_levels)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(pooling, "POOL_VARIANCE_TOLERANCE", 0.0)
        (mq,) = pooled_root(ms, h, variance_floor=0.0)
    deepest = h.n_levels - 1
    assert pooling._root_variance("votingage", levels, h, deepest, 0.0) == pytest.approx(
        mq.variance, rel=1e-12
    )
