"""Per-block MILP reconstruction from DHC-style tables (JASON (JSR-19-2F) sec. 4.1, eq. (4-1))."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import maximum_bipartite_matching

from censusdp.attacks.dhc.reconstruct import reconstruct_blocks
from censusdp.attacks.dhc.scoring import _age_window_matching, match_counts
from censusdp.attacks.dhc.tables import (
    AGE_BANDS,
    BLOCK_TABLES,
    N_KEYS,
    band_of_age,
    dhc_tables,
    keys_of,
    split_keys,
)
from censusdp.errors import ConfigError, InputError
from censusdp.generate import generate_state
from censusdp.io.cef import read_cef
from profiles import examples

B1 = "5000100010011000"
B2 = "5000100010011001"


def _persons(rows):
    """rows: (geocode, sex, age, hispanic, cenrace)."""
    cols = list(zip(*rows, strict=True))
    return {
        "geocode": np.array(cols[0]),
        "sex": np.array(cols[1]),
        "age": np.array(cols[2]),
        "hispanic": np.array(cols[3]),
        "cenrace": np.array(cols[4]),
    }


def _rec_persons(rec):
    c = rec.columns()
    return c


def _same_tables(a, b):
    assert np.array_equal(a.blocks, b.blocks)
    for name in BLOCK_TABLES:
        assert (a.block[name] != b.block[name]).nnz == 0, name


@pytest.fixture(scope="module")
def vt(tmp_path_factory):
    d = tmp_path_factory.mktemp("vt")
    generate_state("VT", 5, d, scale=0.02)
    return read_cef(d).persons


def test_band_layout_is_2010_p12():
    assert len(AGE_BANDS) == 23
    assert AGE_BANDS[0] == (0, 4) and AGE_BANDS[3] == (15, 17) and AGE_BANDS[-1] == (85, 115)
    ages = np.arange(116)
    b = band_of_age(ages)
    for i, (lo, hi) in enumerate(AGE_BANDS):
        assert set(ages[b == i]) == set(range(lo, hi + 1))


def test_keys_round_trip_and_validation():
    k = keys_of(np.array([1, 2]), np.array([0, 115]), np.array([0, 1]), np.array([1, 63]))
    s, a, e = split_keys(k)
    assert s.tolist() == [0, 1] and a.tolist() == [0, 115] and e.tolist() == [0, 125]
    assert k.max() < N_KEYS
    with pytest.raises(InputError, match="cenrace 1..63"):
        keys_of(np.array([1]), np.array([3]), np.array([0]), np.array([64]))


def test_tables_are_consistent_marginals(vt):
    t = dhc_tables(vt)
    pop = t.population
    for name in ("P9", "P12"):
        np.testing.assert_array_equal(np.asarray(t.block[name].sum(axis=1)).ravel(), pop)
    adults = np.asarray(t.block["P11"].sum(axis=1)).ravel()
    assert (adults <= pop).all() and adults.sum() == int((vt["age"] >= 18).sum())
    # P12A-I iteration A (White alone) over sexes and bands counts cenrace 1
    a = np.asarray(t.block["P12A-I"][:, : 2 * 23].sum(axis=1)).ravel()
    assert a.sum() == int((vt["cenrace"] == 1).sum())
    with pytest.raises(InputError, match="needs person columns"):
        dhc_tables({k: v for k, v in vt.items() if k != "age"})
    with pytest.raises(ConfigError, match="age_detail"):
        dhc_tables(vt, age_detail="bands")


def test_unique_solution_is_recovered_exactly():
    rows = [
        (B1, 1, 30, 0, 1),
        (B1, 2, 31, 0, 1),
        (B1, 2, 5, 1, 6),
        (B2, 1, 70, 0, 2),
        (B2, 1, 70, 0, 2),
        (B2, 2, 44, 0, 4),
    ]
    truth = _persons(rows)
    rec = reconstruct_blocks(dhc_tables(truth))
    c = rec.columns()
    m = match_counts(
        c["geocode"],
        rec.keys,
        truth["geocode"],
        keys_of(truth["sex"], truth["age"], truth["hispanic"], truth["cenrace"]),
    )
    assert m.exact == m.fuzzy_age == 6 and m.exact_rate == 1.0
    assert rec.status.deviation == 0 and rec.status.blocks == 2


def test_ambiguous_block_follows_the_tract_prior():
    """Two men aged 30 and 31, one White and one Black: the block tables cannot tell.

    The documented rule picks the assignment most plausible under the tract's
    PCT12-style table: here the tract has many Black men aged 31 and White men aged 30
    in another block, so the solver must put the White man at 30.
    """
    other = "5000100010011002"
    block = [(B1, 1, 30, 0, 1), (B1, 1, 31, 0, 2)]
    # make the ages differ in P12 band (30-34 is one band, so P12A-I cannot resolve it)
    tract = [(other, 1, 30, 0, 1)] * 20 + [(other, 1, 31, 0, 2)] * 20
    truth = _persons(block + tract)
    rec = reconstruct_blocks(dhc_tables(truth))
    c = rec.columns()
    sel = c["geocode"] == B1
    got = sorted(zip(c["age"][sel].tolist(), c["cenrace"][sel].tolist(), strict=True))
    assert got == [(30, 1), (31, 2)]
    # flip the tract: now the opposite assignment is more plausible
    tract = [(other, 1, 31, 0, 1)] * 20 + [(other, 1, 30, 0, 2)] * 20
    rec = reconstruct_blocks(dhc_tables(_persons(block + tract)))
    c = rec.columns()
    sel = c["geocode"] == B1
    got = sorted(zip(c["age"][sel].tolist(), c["cenrace"][sel].tolist(), strict=True))
    assert got == [(30, 2), (31, 1)]
    assert rec.status.milp >= 1


def test_inconsistent_tables_use_slacks():
    truth = _persons([(B1, 1, 30, 0, 1), (B1, 2, 40, 0, 2), (B1, 2, 41, 1, 1)])
    t = dhc_tables(truth)
    # tamper: P9 says two White non-Hispanic persons and no Black person
    p9 = t.block["P9"].tolil()
    p9[0, 0] = 2
    p9[0, 1] = 0
    tampered = type(t)(
        t.blocks,
        t.tracts,
        t.block_tract,
        t.age_detail,
        {**t.block, "P9": sp.csr_matrix(p9)},
        t.tract,
    )
    rec = reconstruct_blocks(tampered)
    assert rec.status.slack == 1 and rec.status.deviation > 0
    assert rec.n_records >= 1


def test_unprotected_state_is_reconstructed_almost_perfectly(vt):
    """Unprotected single-year block tables: nearly every record matches exactly."""
    tables = dhc_tables(vt)
    rec = reconstruct_blocks(tables)
    assert rec.status.deviation == 0 and rec.status.slack == 0
    assert rec.n_records == vt["age"].size
    # the reconstruction is consistent: it reproduces every published block table
    _same_tables(dhc_tables(rec.columns()), tables)
    m = match_counts(
        rec.columns()["geocode"],
        rec.keys,
        vt["geocode"],
        keys_of(vt["sex"], vt["age"], vt["hispanic"], vt["cenrace"]),
    )
    assert m.exact_rate > 0.95
    assert m.fuzzy_rate >= m.exact_rate


def test_sf1_age_bands_reconstruct_less(vt):
    """With 2010's banded block P12 (single years only under 20), fewer records match."""
    vt = {k: v[:4000] for k, v in vt.items()}
    single = reconstruct_blocks(dhc_tables(vt))
    sf1 = reconstruct_blocks(dhc_tables(vt, age_detail="sf1"))
    tk = keys_of(vt["sex"], vt["age"], vt["hispanic"], vt["cenrace"])
    ms = match_counts(single.columns()["geocode"], single.keys, vt["geocode"], tk)
    mb = match_counts(sf1.columns()["geocode"], sf1.keys, vt["geocode"], tk)
    assert sf1.status.deviation == 0
    assert mb.exact < ms.exact
    assert mb.fuzzy_rate > mb.exact_rate
    # sf1 reproduces its own (banded) tables
    _same_tables(dhc_tables(sf1.columns(), age_detail="sf1"), dhc_tables(vt, age_detail="sf1"))


def test_match_counts_hand_example():
    rec = _persons([(B1, 1, 30, 0, 1), (B1, 1, 31, 0, 1), (B1, 2, 50, 0, 1)])
    tru = _persons([(B1, 1, 31, 0, 1), (B1, 1, 32, 0, 1), (B2, 2, 50, 0, 1)])
    k = lambda p: keys_of(p["sex"], p["age"], p["hispanic"], p["cenrace"])  # noqa: E731
    m = match_counts(rec["geocode"], k(rec), tru["geocode"], k(tru))
    # exact: (31) only; +-1: 30-31 and 31-32 (one to one), the woman is in another block
    assert (m.exact, m.fuzzy_age) == (1, 2)
    assert m.exact_rate == pytest.approx(1 / 3)


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(st.integers(0, 12), min_size=0, max_size=14),
    st.lists(st.integers(0, 12), min_size=0, max_size=14),
)
def test_age_window_matching_is_maximum(r_ages, t_ages):
    """The greedy window matching equals a maximum bipartite matching (Hopcroft-Karp)."""
    r = np.zeros((1, 116), np.int64)
    t = np.zeros((1, 116), np.int64)
    np.add.at(r, (0, np.asarray(r_ages, dtype=np.int64)), 1)
    np.add.at(t, (0, np.asarray(t_ages, dtype=np.int64)), 1)
    got = int(_age_window_matching(r, t)[0])
    if not r_ages or not t_ages:
        assert got == 0
        return
    adj = np.abs(np.subtract.outer(np.asarray(r_ages), np.asarray(t_ages))) <= 1
    match = maximum_bipartite_matching(sp.csr_matrix(adj.astype(np.int8)), perm_type="column")
    assert got == int((match >= 0).sum())


def test_parallel_workers_give_the_same_records(vt):
    tables = dhc_tables({k: v[:3000] for k, v in vt.items()})
    a = reconstruct_blocks(tables)
    b = reconstruct_blocks(tables, workers=2)
    np.testing.assert_array_equal(a.keys, b.keys)
    np.testing.assert_array_equal(a.block, b.block)
    with pytest.raises(ConfigError, match="time_limit"):
        reconstruct_blocks(tables, time_limit=0)


def test_tract_refinement_keeps_block_tables(vt):
    """Re-pairing within (block, sex, band) leaves every block table unchanged."""
    sub = {k: v[:6000] for k, v in vt.items()}
    tables = dhc_tables(sub)
    rec = reconstruct_blocks(tables, refine=True)
    # the refinement re-paired persons in some groups and every group's MILP was feasible
    assert rec.status.refined_groups > 0
    assert rec.status.refine_infeasible == 0
    _same_tables(dhc_tables(rec.columns()), tables)
    again = dhc_tables(rec.columns())
    assert (again.tract["PCT12A-O"] != tables.tract["PCT12A-O"]).nnz == 0


def test_reconstruct_options_reject_bad_values():
    from censusdp.attacks.dhc.runs import ReconstructOptions

    with pytest.raises(ConfigError, match="time_limit must be a positive number"):
        ReconstructOptions(time_limit=0)
    with pytest.raises(ConfigError, match="age_detail must be one of"):
        ReconstructOptions(age_detail="bands")
