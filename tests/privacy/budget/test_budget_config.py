"""The TOML budget format: text or a parsed document made into a Budget, every mistake
one line naming the origin (file or preset), the key and the value."""

from __future__ import annotations

import tomllib
from fractions import Fraction

import pytest

from censusdp.errors import BudgetError, ConfigError
from censusdp.privacy.budget import BudgetConfigError
from censusdp.privacy.budget_config import budget_from_mapping, budget_from_toml

GOOD_TOML = """
name = "tiny"
schema = "pl94"
mechanism = "discrete_gaussian"
rho = "1/2"
delta = "1e-10"

[[geolevels]]
name = "US"
share = "1/2"
[geolevels.queries]
detailed = "1"

[[geolevels]]
name = "State"
share = "{state_share}"
[geolevels.queries]
total = "1/2"
cenrace = "1/2"
"""


def test_toml_text_round_trip() -> None:
    b = budget_from_toml(GOOD_TOML.format(state_share="1/2"), origin="budget.toml")
    assert b.name == "tiny" and b.geolevels == (("US", 0), ("State", 2))
    assert b.measurements()[0].rho == Fraction(1, 4)
    doc = tomllib.loads(GOOD_TOML.format(state_share="1/2"))
    assert budget_from_mapping(doc, origin="budget.toml") == b


def test_a_budget_without_a_name_takes_its_origin_stem() -> None:
    text = GOOD_TOML.format(state_share="1/2").replace('name = "tiny"\n', "", 1)
    assert budget_from_toml(text, origin="configs/state-heavy.toml").name == "state-heavy"


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (GOOD_TOML.format(state_share="abc"), r"key 'geolevels\[1\].share' = 'abc'"),
        (GOOD_TOML.format(state_share="1/3"), "shares sum to 5/6"),
        ("rhoo = 1\n" + GOOD_TOML.format(state_share="1/2"), "key 'rhoo' = 1: unknown key"),
        (
            GOOD_TOML.format(state_share="1/2").replace('rho = "1/2"', 'rho = "-1"'),
            "key 'rho' = '-1': must be positive",
        ),
        (
            GOOD_TOML.format(state_share="1/2").replace('"discrete_gaussian"', '"geometric"'),
            "needs a global 'epsilon'",
        ),
        (GOOD_TOML.format(state_share="1/2").replace("cenrace =", "citizen ="), "query 'citizen'"),
        ("schema = [", "invalid TOML"),
    ],
)
def test_bad_configs_name_origin_key_and_value(text: str, match: str) -> None:
    with pytest.raises(BudgetConfigError, match=match) as info:
        budget_from_toml(text, origin="conf/budget.toml")
    assert str(info.value).startswith("conf/budget.toml: ")
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ConfigError) and isinstance(info.value, BudgetError)
