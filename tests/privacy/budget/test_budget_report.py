"""The allocation report of ``censusdp budget``: per measurement, geolevel, query and
attribute, and the whole release's composed loss."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from censusdp.errors import BudgetError
from censusdp.io.budget_files import resolve_release_budget
from censusdp.privacy.budget import DEFAULT_GEOLEVELS
from censusdp.privacy.budget_report import budget_report

RHO_2020 = Fraction(542, 339) ** 2


def test_budget_report_json_and_text() -> None:
    rep = budget_report(resolve_release_budget(preset="pl94-2020"))
    d = json.loads(json.dumps(rep.to_dict()))
    assert round(d["totals"]["epsilon_at_delta"], 2) == 17.14
    assert round(d["totals"]["implied_epsilon"], 2) == 2.26
    assert d["totals"]["sampling_delta"] < 1e-20
    assert len(d["measurements"]) == 65
    row = next(
        r for r in d["measurements"] if r["geolevel"] == "Block" and r["query"] == "detailed"
    )
    assert row["share"] == "3945/4097" and row["cells"] == 2016
    # bounded neighbours, as production: variance 1 / rho_q (not 1 / (2 rho_q))
    assert row["variance"] == pytest.approx(1 / row["rho_float"], rel=1e-6)
    assert {g["geolevel"] for g in d["geolevels"]} == {g for g, _ in DEFAULT_GEOLEVELS}
    assert sum(Fraction(g["rho"]) for g in d["geolevels"]) == RHO_2020
    attrs = {a["attribute"]: a for a in d["attributes"]}
    assert set(attrs) == {"hhgq", "votingage", "hispanic", "cenrace"}
    text = rep.to_text()
    assert "17.14" in text and "3945/4097" in text and "per attribute" in text


def test_report_rescaled_by_epsilon_and_rho() -> None:
    # --epsilon is the total of the whole release: persons and housing units together
    rep = budget_report(resolve_release_budget(preset="pl94-2020", epsilon=10))
    release = rep.to_dict()["release"]
    assert 9.999 < release["epsilon"] <= 10
    assert rep.totals["epsilon_at_delta"] < release["epsilon"]
    assert release["rho"] == pytest.approx(release["persons_rho"] + release["units_rho"])
    # the split between the runs is the presets' one
    assert release["units_rho"] / release["persons_rho"] == pytest.approx(
        float(Fraction(11417641, 152349649) / Fraction(293764, 114921))
    )
    alone = budget_report(resolve_release_budget(preset="pl94-2020", epsilon=10, units=None))
    assert 9.999 < alone.totals["epsilon_at_delta"] <= 10 and alone.to_dict()["release"] is None
    pure = budget_report(resolve_release_budget(preset="ddp-2010", rho="1/2"))
    assert Fraction(pure.totals["total"]) == 1  # epsilon = sqrt(2 rho)


def test_report_at_another_delta() -> None:
    whole = resolve_release_budget(preset="pl94-2020")
    looser = budget_report(whole, delta="1e-5")
    assert looser.totals["delta"] == "1/100000"
    assert looser.totals["epsilon_at_delta"] < budget_report(whole).totals["epsilon_at_delta"]
    assert looser.budget == whole.persons and looser.release == whole
    with pytest.raises(BudgetError, match="delta is 1; it must satisfy 0 < delta < 1"):
        budget_report(whole, delta=1)


def test_headline_epsilon_is_the_whole_release() -> None:
    # the first epsilon a reader sees is the release's (17.4351, as its manifest records),
    # not the people's run alone (17.1436), and the two are told apart
    whole = resolve_release_budget(preset="pl94-2020")
    lines = budget_report(whole).to_text().splitlines()
    first = next(line for line in lines if "epsilon" in line)
    assert first.startswith("privacy-loss budget of the whole release: epsilon 17.4351 ")
    assert f"{whole.to_dict()['epsilon']:.6g}" == "17.4351"
    persons = next(i for i, line in enumerate(lines) if "17.1436" in line)
    assert lines.index("people's run:") < persons
    assert "people's run alone" in "\n".join(lines[: lines.index("people's run:")])
    # the preset's note is printed as written (the presets name no docs/ pages)
    text = "\n".join(lines)
    assert "sampler TV" not in text and "CKS" not in text  # words and a full citation
    assert "distance from the exact noise laws (total variation) adds delta" in text
    assert "docs/" not in "\n".join(lines) and "(--spine tabulation asks for it)." in lines[-2]
    # a budget without a unit run has no release headline
    alone = budget_report(resolve_release_budget(preset="pl94-2020", units=None)).to_text()
    assert "whole release" not in alone and "people's run:" not in alone
