"""The privacy loss of a whole release: person and unit runs composed, samplers included."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import pytest

from censusdp.io.budget_files import load_preset
from censusdp.privacy import accounting
from censusdp.privacy.release_budget import release_privacy


def test_zcdp_runs_add_and_epsilon_is_cks_of_the_sum() -> None:
    persons, units = load_preset("pl94-2020"), load_preset("pl94-2020-units")
    out = release_privacy(persons, units)
    total = persons.total + units.total
    assert Fraction(out["rho_exact"]) == total
    assert out["epsilon"] == accounting.epsilon_from_rho(total, persons.delta)
    assert out["epsilon"] > release_privacy(persons)["epsilon"]
    assert out["delta_target"] == float(persons.delta)


def test_sampling_term_is_in_the_reported_delta() -> None:
    persons = load_preset("pl94-2020")
    out = release_privacy(persons)
    tv = sum(Fraction(m.mechanism.sampling_tv) for m in persons.measurements())
    with mpmath.workprec(200):
        want = (
            (1 + mpmath.exp(mpmath.mpf(out["epsilon"]))) * mpmath.mpf(tv.numerator) / tv.denominator
        )
    assert out["sampling_delta"] >= float(want) > 0
    assert out["delta"] == out["delta_target"] + out["sampling_delta"]


def test_pure_dp_release_reports_the_samplers_delta_not_zero() -> None:
    ddp = load_preset("ddp-2010")
    out = release_privacy(ddp)
    assert out["epsilon"] == float(ddp.total)
    assert out["delta_target"] == 0.0
    assert 0 < out["delta"] == out["sampling_delta"] < 1e-20
    # rho of a pure-DP release is the zCDP composition of its measurements, not eps^2/2
    assert Fraction(out["rho_exact"]) == sum(m.rho for m in ddp.measurements())
    assert out["rho"] < float(ddp.total) ** 2 / 2


def test_mixed_privacy_measures_are_refused() -> None:
    with pytest.raises(ValueError, match="different privacy measures"):
        release_privacy(load_preset("ddp-2010"), load_preset("pl94-2020-units"))
