"""``censusdp risk``'s printed summary: plain words, places by NAME and GEOID, the
paper's notation (rho_1, R, xi2, x1*) left to risk.json."""

from __future__ import annotations

import re

from censusdp.risk._words import risk_words


def _summary() -> dict:
    one = {"prior": 0.5, "marginal_posterior": 0.5121, "marginal_risk": 1.0242}
    worst = {
        "person_id": 566,
        "geocode": "5000100030031005",
        "cell": 191,
        "xi2": 2,
        "d": 5,
        "x1_star": 11,
        "x2_star": 3,
        "y1_star": 1,
        "realised_posterior_two_level": 0.7311,
        "realised_risk_two_level": 1.4622,
    }
    quantiles = {"q00": 0.28, "q50": 0.44, "q99": 0.57, "q100": 0.5692, "mean": 0.42}
    return {
        "budget": "pl94-2020",
        "global_rho": 2.556,
        "epsilon": 17.1436,
        "delta": 1e-10,
        "rho1_block_detailed": 0.04954,
        "rho2_block_group_detailed": 0.1231,
        "counts": {"persons": 1853, "unique_in_block": 540, "blocks": 95, "block_groups": 18},
        "one_level": [
            {**one, "correct_decision_probability": 0.5628},
            {"prior": 0.02, "marginal_posterior": 0.022, "marginal_risk": 1.0994,
             "correct_decision_probability": 2.4e-34},
        ],
        "primary_prior": 0.5,
        "distribution_over_unique_people": {
            "two_level_correct": quantiles,
            "realised_risk_two_level": {**quantiles, "q50": 0.9823, "q100": 1.4622},
        },
        "worst_realised": [worst, {**worst, "geocode": "5000100030021005"}],
        "sweep_sampled_people": 200,
        "sweep": [
            {"global_rho": 1.0, "epsilon": 10.03, "rho1": 0.019,
             "one_level": [{**one, "correct_decision_probability": 0.5393}],
             "two_level_mean_correct": 0.3559, "two_level_mean_correct_se": 0.007}
        ],
    }  # fmt: skip


def test_risk_summary_in_plain_words():
    text = risk_words(_summary(), "risk-out", 30.7)
    for jargon in ("rho_1", "rho_2", "xi2", "x1*", "x2*", "y1*", "R'", "P[correct"):
        assert jargon not in text
    assert not re.search(r"\b\d{16}\b", text)  # never the internal block code
    assert "epsilon 17.14 at delta 1e-10" in text
    assert "get 1.9% of it" in text  # 0.04954 / 2.556 of the budget protects a block's counts
    assert "540 (29.1%) are the only person in their block" in text
    assert "50.0%            51.2%          1.024                     56.3%" in text
    assert "2.0%" in text and "< 0.01%" in text  # a tiny chance is not printed as 2.4e-34
    # people by the Census NAME and GEOID of their block (15 digits: no block group digit)
    assert (
        "person 566 in Block 1005, Block Group 3, Census Tract 3, Addison County, Vermont "
        "(GEOID none)" in text
    )
    assert "Block 1005, Block Group 2, Census Tract 3, Addison County, Vermont" in text
    assert "belief after 73.1% (1.46 times)" in text
    assert "at epsilon 10 (zCDP rho 1)" in text
    assert text.splitlines()[-1].startswith("wrote risk-out in 30.7 s")


def test_one_person_in_the_block_group_is_said_in_the_singular():
    s = _summary()
    s["worst_realised"][0]["xi2"] = 1
    text = risk_words(s, "out", 1.0)
    assert "1 person in the block group has these characteristics (the person alone)" in text
    assert "1 person in the block group have" not in text
    assert "2 people in the block group have these characteristics" in text


def test_block_geoid_drops_the_block_group_digit():
    s = _summary()
    s["worst_realised"][0]["geocode"] = "5000100030011005"
    text = risk_words(s, "out", 1.0)
    assert "(GEOID 500010003001005)" in text
