"""A geounit's own share of the budget (spine bypass): the planned mechanism scaled."""

from __future__ import annotations

from fractions import Fraction

import pytest

from censusdp.errors import BudgetError
from censusdp.io.budget_files import load_preset
from censusdp.privacy.budget import scaled_mechanism
from censusdp.privacy.mechanisms import DiscreteGaussian, Geometric


def test_a_unit_with_more_budget_spends_exactly_its_share() -> None:
    """rho (zCDP) and epsilon (pure DP) scale by the factor; the factor 1 is the plan."""
    b = load_preset("pl94-2020")
    m = next(x for x in b.measurements() if x.geolevel == "BlockGroup" and x.query == "total")
    f = (b.geolevel_shares["BlockGroup"] + b.geolevel_shares["Block"]) / b.geolevel_shares[
        "BlockGroup"
    ]
    scaled = scaled_mechanism(m.mechanism, f)
    assert isinstance(scaled, DiscreteGaussian)
    assert scaled.rho(b.sensitivity) == m.mechanism.rho(b.sensitivity) * f
    assert scaled.variance < m.mechanism.variance
    assert scaled_mechanism(m.mechanism, Fraction(1)) is m.mechanism
    geo = Geometric(Fraction(3))
    assert scaled_mechanism(geo, Fraction(3, 2)).epsilon() == geo.epsilon() * Fraction(3, 2)
    with pytest.raises(BudgetError, match="positive budget factor"):
        scaled_mechanism(m.mechanism, Fraction(0))
