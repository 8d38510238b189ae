"""Re-identification: commercial file, exact and Fellegi-Sunter linkage, 2010 rates."""

from __future__ import annotations

import numpy as np
import pytest

from censusdp.attacks.dhc.reid import (
    CommercialSpec,
    _fit_em,
    baseline_guess,
    commercial_file,
    link_exact,
    link_fellegi_sunter,
    reid_rates,
    unique_in_block,
)
from censusdp.errors import ConfigError, InputError
from censusdp.generate import generate_state
from censusdp.io.cef import read_cef

B1 = "5000100010011000"
B2 = "5000100010011001"
B3 = "5000100010021000"


@pytest.fixture(scope="module")
def truth(tmp_path_factory):
    d = tmp_path_factory.mktemp("dc")
    generate_state("DC", 4, d, scale=0.02)
    p = read_cef(d).persons
    return {k: np.asarray(v) for k, v in p.items()}


def _one_to_one(links):
    assert np.unique(links.rec).size == links.rec.size
    assert np.unique(links.comm).size == links.comm.size


def test_commercial_file_rates(truth):
    spec = CommercialSpec(
        coverage_adult=0.8,
        coverage_minor=0.3,
        age_off_by_one=0.2,
        age_off_more=0.0,
        wrong_block=0.1,
    )
    comm = commercial_file(truth, spec, seed=1)
    assert set(comm) == {"person_id", "geocode", "sex", "age"}  # no race or ethnicity
    idx = np.searchsorted(truth["person_id"], comm["person_id"])
    adult = truth["age"] >= 18
    cov_adult = np.isin(truth["person_id"][adult], comm["person_id"]).mean()
    cov_minor = np.isin(truth["person_id"][~adult], comm["person_id"]).mean()
    assert abs(cov_adult - 0.8) < 0.03 and abs(cov_minor - 0.3) < 0.05
    off = np.abs(comm["age"] - truth["age"][idx])
    assert off.max() <= 1 and abs((off == 1).mean() - 0.2) < 0.03
    moved = comm["geocode"] != truth["geocode"][idx]
    assert abs(moved.mean() - 0.1) < 0.03
    # wrong blocks stay in the person's tract
    assert (
        comm["geocode"][moved].astype("U11") == truth["geocode"][idx][moved].astype("U11")
    ).all()
    with pytest.raises(ConfigError, match="coverage_adult must be in"):
        CommercialSpec(coverage_adult=1.2)


def test_exact_linkage_on_a_perfect_file(truth):
    """Truth as its own reconstruction and an error-free, complete commercial file."""
    perfect = CommercialSpec(1.0, 1.0, 0.0, 0.0, 0.0)
    comm = commercial_file(truth, perfect, seed=2)
    links = link_exact(truth, comm, seed=3)
    _one_to_one(links)
    assert links.n == truth["age"].size and (links.kind == 0).all()
    r = reid_rates(truth, truth, comm, links)
    assert r["putative_rate"] == 1.0
    # block uniques on (sex, age, race, Hispanic) are unique on (sex, age) too only
    # sometimes; confirmed (race-ethnicity right) is at least the share unique on
    # (block, sex, age), where the link is forced
    geo = truth["geocode"]
    key = np.char.add(np.char.add(geo, truth["sex"].astype(str)), truth["age"].astype("U3"))
    _, inv, cnt = np.unique(key, return_inverse=True, return_counts=True)
    assert r["confirmed_share"] >= (cnt[inv] == 1).mean()
    assert r["confirmed_rate"] <= 1.0


def test_exact_linkage_rules():
    rec = {
        "geocode": np.array([B1, B1, B1, B2]),
        "sex": np.array([1, 1, 2, 1]),
        "age": np.array([30, 40, 50, 60]),
    }
    comm = {
        "geocode": np.array([B1, B1, B2, B1]),
        "sex": np.array([1, 1, 1, 2]),
        "age": np.array([31, 40, 60, 52]),
    }
    links = link_exact(rec, comm, seed=0)
    got = {
        (int(r), int(c), int(k)) for r, c, k in zip(links.rec, links.comm, links.kind, strict=True)
    }
    # 40-40 exact, 60-60 exact, 30-31 by age +-1; the woman (50 vs 52) is not linked
    assert got == {(1, 1, 0), (3, 2, 0), (0, 0, 1)}
    strict = link_exact(rec, comm, age_window=0, seed=0)
    assert strict.n == 2
    with pytest.raises(ConfigError, match="age_window"):
        link_exact(rec, comm, age_window=2)


def test_reid_rates_hand_example():
    truth = {
        "person_id": np.array([10, 11, 12, 13]),
        "geocode": np.array([B1, B1, B1, B2]),
        "sex": np.array([1, 1, 2, 2]),
        "age": np.array([30, 40, 50, 60]),
        "hispanic": np.array([0, 1, 0, 0]),
        "cenrace": np.array([1, 1, 2, 1]),
    }
    rec = {k: truth[k].copy() for k in ("geocode", "sex", "age", "hispanic", "cenrace")}
    rec["cenrace"][2] = 1  # the woman aged 50 is reconstructed with the wrong race
    comm = {
        "person_id": np.array([10, 12, 13]),
        "geocode": np.array([B1, B1, B3]),
        "sex": np.array([1, 2, 2]),
        "age": np.array([30, 50, 60]),
    }
    links = link_exact(rec, comm, seed=0)
    r = reid_rates(rec, truth, comm, links)
    # links: persons 10 and 12 (13 is listed in another block); 10 confirmed, 12 not
    assert r["links"] == 2 and r["confirmed"] == 1
    assert r["putative_rate"] == pytest.approx(2 / 4)
    assert r["confirmed_rate"] == pytest.approx(1 / 2)
    assert r["confirmed_share"] == pytest.approx(1 / 4)
    assert r["unique_share"] == 1.0 and r["uniques_confirmed_share"] == pytest.approx(1 / 4)
    bad = dict(comm, person_id=np.array([10, 12, 99]))
    with pytest.raises(InputError, match="not in the truth"):
        reid_rates(rec, truth, bad, link_exact(rec, bad, seed=0))


def test_unique_in_block():
    t = {
        "geocode": np.array([B1, B1, B1, B2]),
        "sex": np.array([1, 1, 2, 1]),
        "age": np.array([5, 5, 5, 5]),
        "hispanic": np.array([0, 0, 0, 0]),
        "cenrace": np.array([1, 1, 1, 1]),
    }
    assert unique_in_block(t).tolist() == [False, False, True, True]


def test_baseline_guess_is_county_mode(truth):
    guess = baseline_guess(truth, truth)
    eth = truth["hispanic"] * 63 + truth["cenrace"] - 1
    # the modal guess is right at least as often as the most common category overall
    counts = np.bincount(eth, minlength=126)
    assert (guess == eth).mean() >= counts.max() / eth.size - 1e-12
    assert (guess >= 0).all()


def test_em_recovers_m_and_u():
    """EM on counts drawn from a known two-class model recovers its parameters."""
    rng = np.random.default_rng(0)
    p, m_b, m_a = 0.05, np.array([0.9, 0.1]), np.array([0.7, 0.2, 0.1])
    u_b, u_a = np.array([0.2, 0.8]), np.array([0.2, 0.4, 0.4])
    n = 400_000
    match = rng.random(n) < p
    b = np.where(match, rng.random(n) > m_b[0], rng.random(n) > u_b[0]).astype(int)
    a = np.where(match, rng.choice(3, n, p=m_a), rng.choice(3, n, p=u_a))
    counts = np.bincount(b * 3 + a, minlength=6)
    model = _fit_em(counts, 2, 3, int(p * n), n)
    assert model["p"] == pytest.approx(p, abs=0.01)
    np.testing.assert_allclose(model["m_block"], m_b, atol=0.03)
    np.testing.assert_allclose(model["u_age"], u_a, atol=0.02)


def test_fellegi_sunter_links_across_blocks(truth):
    """When reconstructed blocks are distorted within block groups, FS still links."""
    rng = np.random.default_rng(5)
    rec = {k: truth[k].copy() for k in ("geocode", "sex", "age", "hispanic", "cenrace")}
    blocks = np.unique(truth["geocode"])
    move = rng.random(rec["geocode"].size) < 0.3
    # move 30% of records to another block of the same block group
    for i in np.flatnonzero(move):
        same_bg = blocks[blocks.astype("U12") == rec["geocode"][i][:12]]
        rec["geocode"][i] = same_bg[rng.integers(same_bg.size)]
    comm = commercial_file(truth, CommercialSpec(0.9, 0.9, 0.1, 0.0, 0.0), seed=6)
    ex = link_exact(rec, comm, seed=7)
    fs = link_fellegi_sunter(rec, comm, seed=7)
    _one_to_one(fs)
    assert fs.model["iterations"] > 0 and len(fs.model["weight"]) == 2
    r_ex = reid_rates(rec, truth, comm, ex)
    r_fs = reid_rates(rec, truth, comm, fs)
    assert r_fs["links"] > 0
    assert r_fs["confirmed"] >= 0.9 * r_ex["confirmed"]
    with pytest.raises(ConfigError, match="max_age_diff"):
        link_fellegi_sunter(rec, comm, max_age_diff=9)
