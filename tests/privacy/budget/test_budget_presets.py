"""Shipped presets reproduce the published allocations (Kazan & Reiter (2022) Table 1, Van Riper et al. (2020) Table 2)."""

from __future__ import annotations

import importlib.resources
import re
from fractions import Fraction

import pytest

from censusdp.data.queries import make_query, run_query
from censusdp.data.schema import get_schema
from censusdp.io.budget_files import (
    load_preset,
    preset_names,
    resolve_release_budget,
    units_preset_for,
)
from censusdp.privacy.budget import DEFAULT_GEOLEVELS
from censusdp.privacy.mechanisms import DiscreteGaussian, Geometric

RHO_2020 = Fraction(542, 339) ** 2


def test_presets_ship_with_the_package() -> None:
    names = preset_names()
    for name in ("pl94-2020", "ddp-2010", "dhc-lite-demo"):
        assert name in names
    for name in names:
        b = load_preset(name)
        for query in {m.query for m in b.measurements()}:
            run_query(b.schema, query)  # every query is valid (dhc-2020-units: tenvacgq too)


def test_presets_name_no_files_of_the_repository() -> None:
    # a preset file is what a user reads and copies: its notes and comments point to no
    # docs/ page or censusdp source file, which an installed package does not have
    presets = importlib.resources.files("censusdp.privacy") / "presets"
    texts = {
        p.name: p.read_text(encoding="utf-8") for p in presets.iterdir() if p.name.endswith(".toml")
    }
    assert len(texts) >= 8
    leaks = {
        n: re.findall(r"docs/\S+|src/censusdp\S*|censusdp/\S+\.py", t) for n, t in texts.items()
    }
    assert {n: v for n, v in leaks.items() if v} == {}
    for name in preset_names():
        # the notes, printed by ``censusdp budget``, also name no production setting
        assert not any("docs/" in n or "opt_spine" in n for n in load_preset(name).notes)


def test_pl94_2020_matches_kazan_reiter_table1() -> None:
    b = load_preset("pl94-2020")
    assert b.total == RHO_2020 and b.delta == Fraction(1, 10**10)
    assert b.mechanism == "discrete_gaussian" and b.schema == "pl94"
    assert b.geolevels == DEFAULT_GEOLEVELS
    assert [b.geolevel_shares[g] for g, _ in DEFAULT_GEOLEVELS] == [
        Fraction(n, 4099) for n in (104, 1440, 447, 687, 1256, 165)
    ]
    assert "total" not in b.query_shares["US"]  # Table 1: no TOTAL query at the US level
    assert len(b.query_shares["US"]) == 10
    assert all(
        len(b.query_shares[g]) == 11 for g in ("State", "County", "Tract", "BlockGroup", "Block")
    )
    assert b.query_shares["Block"]["detailed"] == Fraction(3945, 4097)
    assert b.query_shares["US"]["detailed"] == Fraction(189, 241)
    assert b.query_shares["Tract"]["hispanic*cenrace"] == Fraction(1933, 4102)
    assert b.query_shares["BlockGroup"]["total"] == Fraction(1705, 4099)
    # Kazan & Reiter (2022) sec. 2.3: block rho 2.56 x 165/4099 ~= 0.103, detailed 0.103 x 3945/4097 ~= 0.099
    assert round(float(b.geolevel_amount("Block")), 3) == 0.103
    detailed = next(m for m in b.measurements() if m.geolevel == "Block" and m.query == "detailed")
    assert round(float(detailed.rho), 3) == 0.099
    assert detailed.mechanism == DiscreteGaussian(1 / detailed.rho)  # bounded: sigma^2 = 1/rho
    assert sum(m.rho for m in b.measurements()) == RHO_2020  # composition is exact
    assert round(b.epsilon(), 2) == 17.14


def test_ddp_2010_reproduces_van_riper_noise_scales() -> None:
    """Van Riper et al. (2020) Appendix A Table 2: Scale_nation (nation and state) and
    Scale_county (every level below, the tract group included) of the seven person
    queries, exactly; the DDP's dhcpDemoProductConfig_fixedTotals.ini on DHCP_HHGQ."""
    b = load_preset("ddp-2010")
    assert b.schema == "dhcp-hhgq" and get_schema(b.schema).size == 467_712
    assert b.mechanism == "geometric" and b.sensitivity == 2
    assert list(b.geolevels) == [
        ("US", 0), ("State", 2), ("County", 5), ("Tract_Group", 9), ("Tract", 11),
        ("BlockGroup", 12), ("Block", 16),
    ]  # fmt: skip
    scales = {(m.geolevel, m.query): m.mechanism.scale for m in b.measurements()}
    table2 = {
        "detailed": (Fraction(25), Fraction(125, 3)),  # 25.0 / 41.67
        "hhgq": (Fraction(25, 2), Fraction(125, 6)),  # 12.5 / 20.83
        "votingage*hispanic*cenrace*citizen": (Fraction(5), Fraction(25, 3)),  # 5.0 / 8.33
        "age*sex": (Fraction(50), Fraction(250, 3)),  # 50.0 / 83.33
        "agegroups4*sex": (Fraction(50), Fraction(250, 3)),
        "agegroups16*sex": (Fraction(50), Fraction(250, 3)),
        "agegroups64*sex": (Fraction(50), Fraction(250, 3)),
    }
    assert set(scales) == {(g, q) for g, _ in b.geolevels for q in table2}
    for q, (nation, county) in table2.items():
        for g in ("US", "State"):
            assert scales[(g, q)] == nation
        for g in ("County", "Tract_Group", "Tract", "BlockGroup", "Block"):
            assert scales[(g, q)] == county
    # per-measurement epsilon = 4 x geolevel share x query share of the DDP
    us_detailed = next(m for m in b.measurements() if m.geolevel == "US" and m.query == "detailed")
    assert us_detailed.epsilon == Fraction(4) * Fraction(20, 100) * Fraction(10, 100)
    assert isinstance(us_detailed.mechanism, Geometric)
    assert sum(m.epsilon for m in b.measurements()) == 4  # the whole person budget
    assert b.epsilon() == 4


def test_ddp_2010_units_spends_the_ddp_household_budget() -> None:
    """The DDP's households: epsilon 2.0, geometric, the persons' geolevel shares (20% nation
    and state, 12% each below), on the units schema's occupied / vacant query."""
    b = load_preset("ddp-2010-units")
    assert b.schema == "units" and b.mechanism == "geometric" and b.sensitivity == 2
    eps = {m.geolevel: m.epsilon for m in b.measurements()}
    assert {m.query for m in b.measurements()} == {"detailed"}
    below = ("County", "Tract_Group", "Tract", "BlockGroup", "Block")
    assert eps == {
        "US": Fraction(2) * Fraction(20, 100),
        "State": Fraction(2) * Fraction(20, 100),
        **{g: Fraction(2) * Fraction(12, 100) for g in below},
    }
    assert b.epsilon() == 2
    assert b.geolevels == load_preset("ddp-2010").geolevels
    # the named stand-in: chosen with --units-preset, and pure DP composes by adding epsilon
    release = resolve_release_budget(preset="ddp-2010", units="ddp-2010-units")
    assert release.units is not None and release.units.name == "ddp-2010-units"
    assert release.to_dict()["epsilon"] == pytest.approx(6.0)  # the DDP's 4.0 + 2.0


def test_ddp_2010_pairs_with_its_household_run() -> None:
    """``--preset ddp-2010`` runs the DDP's household run as its unit run by default."""
    assert units_preset_for("ddp-2010") == "ddp-2010-households"
    release = resolve_release_budget(preset="ddp-2010")
    assert release.units is not None and release.units.schema == "household2010"
    assert release.persons.epsilon() == 4 and release.units.epsilon() == 2
    assert release.to_dict()["epsilon"] == pytest.approx(6.0)  # the DDP's, pure DP


def test_ddp_2010_households_reproduces_van_riper_noise_scales() -> None:
    """Van Riper et al. (2020) Appendix A Table 2, the household queries: Scale_nation (nation
    and state) and Scale_county (every level below), exactly; the queries and shares of the
    DDP's DHCH_DemonstrationProduct.ini on its Household2010 schema."""
    b = load_preset("ddp-2010-households")
    assert b.schema == "household2010" and b.mechanism == "geometric" and b.sensitivity == 2
    assert get_schema(b.schema).size == 2 * 9 * 2 * 7 * 8 * 24 * 4 * 2
    scales = {(m.geolevel, m.query): m.mechanism.scale for m in b.measurements()}
    table2 = {
        "detailed": (Fraction(25), Fraction(125, 3)),  # 25.0 / 41.67
        "hhhisp*hhrace*hhsize*hhtype": (Fraction(20), Fraction(100, 3)),  # 20.0 / 33.33
        "hhsex*hhhisp*hhrace*hhtype": (Fraction(20), Fraction(100, 3)),
        "hhhisp*hhrace*hhmulti": (Fraction(50), Fraction(250, 3)),  # 50.0 / 83.33
        "hhsex*hhtype*hhelderly": (Fraction(50), Fraction(250, 3)),
        "hhsex*hhage*hhtype": (Fraction(50), Fraction(250, 3)),
    }
    assert set(scales) == {(g, q) for g, _ in b.geolevels for q in table2}
    for q, (nation, county) in table2.items():
        for g in ("US", "State"):
            assert scales[(g, q)] == nation
        for g in ("County", "Tract_Group", "Tract", "BlockGroup", "Block"):
            assert scales[(g, q)] == county
        assert round(float(county), 2) == {25: 41.67, 20: 33.33, 50: 83.33}[int(nation)]
    # the cells of each query (Table 2's Hist_size where the DDP's code agrees with it)
    rows = {q: make_query(get_schema(b.schema), q).n_rows for q in table2}
    assert rows["hhhisp*hhrace*hhsize*hhtype"] == 2688
    assert rows["hhsex*hhhisp*hhrace*hhtype"] == 672
    assert rows["hhhisp*hhrace*hhmulti"] == 28
    assert rows["hhsex*hhage*hhtype"] == 432
    assert b.epsilon() == 2  # the DDP's household budget, all seven levels
    assert b.geolevels == load_preset("ddp-2010").geolevels
    assert units_preset_for("ddp-2010-households") is None
