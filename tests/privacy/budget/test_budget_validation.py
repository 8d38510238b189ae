"""A Budget is validated once, with messages naming the parameter, rule and value."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.errors import BudgetError, SchemaError
from censusdp.privacy.budget import Budget
from profiles import examples

LEVELS = (("US", 0), ("State", 2), ("County", 5))


def make(**kw) -> Budget:
    args = dict(
        schema="pl94",
        mechanism="discrete_gaussian",
        total=Fraction(1),
        delta=Fraction(1, 10**10),
        geolevels=LEVELS,
        geolevel_shares={"US": Fraction(1, 2), "State": Fraction(1, 4), "County": Fraction(1, 4)},
        query_shares={
            "US": {"detailed": Fraction(1)},
            "State": {"total": Fraction(1, 2), "cenrace": Fraction(1, 2)},
            "County": {"total": "1/3", "HISPANIC*CENRACE": "2/3"},
        },
    )
    args.update(kw)
    return Budget(**args)


def test_valid_budget_and_measurements() -> None:
    b = make()
    ms = b.measurements()
    assert [(m.geolevel, m.query) for m in ms] == [
        ("US", "detailed"),
        ("State", "total"),
        ("State", "cenrace"),
        ("County", "total"),
        ("County", "hispanic*cenrace"),  # canonical (lower-case) name
    ]
    assert ms[4].rho_or_epsilon == Fraction(1, 4) * Fraction(2, 3)
    assert sum(m.rho for m in ms) == 1
    g, q, amount, mech = ms[0]  # a 4-tuple for unpacking
    # bounded neighbours (the default): sigma^2 = 1 / rho, the cost of a squared L2
    # sensitivity of 2 (production's convention)
    assert b.neighbours == "bounded" and b.sensitivity == 2
    assert mech.sigma_squared == 1 / amount and amount == Fraction(1, 2)
    assert mech.rho() * 2 == amount  # rho(1) is the cost for sensitivity 1: half
    un = make(neighbours="unbounded").measurements()[0].mechanism
    assert un.sigma_squared == 1 / (2 * amount) and un.rho() == amount
    assert b.scaled(rho="2").measurements()[0].rho_or_epsilon == 1
    d = b.to_dict()
    assert d["geolevels"][2]["queries"][1]["share"] == "2/3"


@pytest.mark.parametrize(
    ("kw", "exc", "match"),
    [
        ({"total": Fraction(0)}, BudgetError, "global rho is 0; it must be positive"),
        ({"mechanism": "laplace"}, BudgetError, "mechanism is 'laplace'"),
        ({"schema": "nope"}, SchemaError, "unknown schema 'nope'"),
        ({"delta": Fraction(1)}, BudgetError, "delta is 1; it must satisfy 0 < delta < 1"),
        ({"neighbours": "replace"}, BudgetError, "neighbours is 'replace'"),
        (
            {
                "geolevel_shares": {
                    "US": Fraction(1, 2),
                    "State": Fraction(-1, 4),
                    "County": Fraction(3, 4),
                }
            },
            BudgetError,
            "budget share for geolevel 'State' is -1/4; shares must be positive",
        ),
        (
            {
                "geolevel_shares": {
                    "US": Fraction(1, 2),
                    "State": Fraction(1, 4),
                    "County": Fraction(1, 5),
                }
            },
            BudgetError,
            "shares sum to 19/20",
        ),
        (
            {"geolevel_shares": {"US": Fraction(1, 2), "State": Fraction(1, 2)}},
            BudgetError,
            "no budget share given for geolevel 'County'",
        ),
        (
            {"geolevel_shares": {"US": 1, "State": 0, "County": 0, "Tract": 0}},
            BudgetError,
            "unknown geolevel 'Tract'",
        ),
        (
            {"geolevels": (("US", 0), ("State", 2), ("County", 2))},
            BudgetError,
            "lengths must increase",
        ),
        ({"geolevels": (("US", 0), ("US", 2), ("County", 5))}, BudgetError, "must be unique"),
        ({"geolevels": (("US", 0), ("State", 2), ("County", 17))}, BudgetError, "must be in 0..16"),
        (
            {"query_shares": {"US": {"detailed": 1}, "State": {"total": 1}, "County": {"sex": 1}}},
            BudgetError,
            "query 'sex' at geolevel 'County' is not valid for schema 'pl94'",
        ),
        (
            {"query_shares": {"US": {"detailed": 1}, "State": {"total": 1}}},
            BudgetError,
            "geolevel 'County' has no query shares",
        ),
        (
            {
                "query_shares": {
                    "US": {"detailed": 1},
                    "State": {"hispanic*cenrace": "1/2", "cenrace*hispanic": "1/2"},
                    "County": {"total": 1},
                }
            },
            BudgetError,
            "lists the same query twice",
        ),
        (
            {
                "query_shares": {
                    "US": {"detailed": 1},
                    "State": {"total": "1/2"},
                    "County": {"total": 1},
                }
            },
            BudgetError,
            "State: shares sum to 1/2",
        ),
        (
            {
                "query_shares": {
                    "US": {"detailed": 1},
                    "State": {"total": 1},
                    "County": {"total": "x"},
                }
            },
            BudgetError,
            "budget share for query 'total' at geolevel 'County' must be a number",
        ),
        (
            {
                "query_shares": {
                    "US": {"detailed": 1},
                    "State": {"total": 0},
                    "County": {"total": 1},
                }
            },
            BudgetError,
            "budget share for query at geolevel 'State' 'total' is 0",
        ),
    ],
)
def test_invalid_budgets_are_rejected(kw, exc, match: str) -> None:
    with pytest.raises(exc, match=match):
        make(**kw)


def test_scaled_requires_exactly_one_amount() -> None:
    with pytest.raises(BudgetError, match="exactly one of rho or epsilon"):
        make().scaled()
    with pytest.raises(BudgetError, match="exactly one of rho or epsilon"):
        make().scaled(rho=1, epsilon=1)


@settings(max_examples=examples(25), deadline=None)
@given(
    weights=st.lists(st.integers(1, 1000), min_size=3, max_size=3),
    qweights=st.lists(st.integers(1, 50), min_size=1, max_size=4),
    total=st.fractions(min_value=Fraction(1, 1000), max_value=Fraction(20)),
)
def test_any_valid_allocation_composes_exactly(weights, qweights, total) -> None:
    s = sum(weights)
    shares = {g: Fraction(w, s) for (g, _), w in zip(LEVELS, weights, strict=True)}
    names = ["total", "cenrace", "votingage*hispanic", "detailed"][: len(qweights)]
    qs = {n: Fraction(w, sum(qweights)) for n, w in zip(names, qweights, strict=True)}
    b = make(total=total, geolevel_shares=shares, query_shares={g: qs for g, _ in LEVELS})
    ms = b.measurements()
    assert sum(m.rho_or_epsilon for m in ms) == total
    for m in ms:  # bounded: sigma^2 = 1 / rho_q; the cost at squared sensitivity 2 is rho_q
        assert m.mechanism.sigma_squared * m.rho_or_epsilon == 1
        assert 2 * m.mechanism.rho() == m.rho_or_epsilon
