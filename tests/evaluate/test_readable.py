"""The readable report: plain-language numbers, the county map and the place drill-down."""

from __future__ import annotations

import html
import json
import math
import re

import numpy as np
import pytest

from censusdp.evaluate import evaluate_data, read_release, render_report
from censusdp.evaluate._html import fmt
from censusdp.evaluate._sections import difference_words, fmt_pct
from censusdp.evaluate.maps import (
    class_color,
    class_rule,
    county_map_svg,
    decode_counties,
    diverging_color,
)
from censusdp.evaluate.summary import budget_words, place_rows, typical_errors
from censusdp.io.cef import read_cef


def test_typical_errors_are_observed_quantiles_by_size():
    # ten places of 10-99 people with errors 0, +-1, +-2, +-3, +-4 and +10
    e = np.array([0, 1, -1, 2, -2, 3, -3, 4, -4, 10])
    t = np.full(10, 50)
    # two empty places, one released as 3
    t = np.concatenate([t, [0, 0], [5000]])
    r = np.concatenate([50 + e, [0, 3], [4990]])
    recs = {x["label"]: x for x in typical_errors(t, r)}
    assert list(recs) == ["no people", "10-99 people", "1,000-9,999 people"]
    mid = recs["10-99 people"]
    # |e| sorted: 0 1 1 2 2 3 3 4 4 10 -> the 5th value and the 9th value
    assert (mid["n"], mid["median_abs"], mid["q90_abs"]) == (10, 2, 4)
    assert mid["mean_error"] == pytest.approx(1.0)
    assert mid["median_abs_pct"] == pytest.approx(4.0)  # 2 of 50 people
    assert recs["no people"]["q90_abs"] == 3 and recs["no people"]["median_abs_pct"] is None
    big = recs["1,000-9,999 people"]
    assert (big["median_abs"], big["mean_error"], big["high"]) == (10, -10.0, 9999)


def test_budget_words_state_total_relation_and_randomness():
    manifest = {
        "epsilon": 17.416,
        "delta": 1e-10,
        "rho": 2.6262,
        "persons": {"epsilon": 17.14, "rho_float": 2.556},
        "units": {"epsilon": 2.39, "rho_float": 0.07},
        "randomness": {"mode": "seeded", "seed": 1},
        "seed": 1,
    }
    b = budget_words(manifest)
    text = " ".join(b["sentences"])
    assert b["epsilon"] == 17.416 and b["relation"] == "bounded" and b["secure"] is False
    assert "epsilon = 17.4 at delta = 1e-10" in text
    assert "people: epsilon 17.1; housing units: epsilon 2.39" in text
    assert "changing one person's record (bounded neighbours)" in text
    assert f"{math.exp(17.416):,.0f} times" in text
    assert "seeded generator (seed 1)" in text
    secure = budget_words({"epsilon": 1.0, "randomness": {"mode": "secure"}, "seed": None})
    assert secure["secure"] is True and "2.72 times" in " ".join(secure["sentences"])
    assert "unbounded" in " ".join(
        budget_words({"epsilon": 1, "neighbouring": "unbounded"})["sentences"]
    )
    assert "states no privacy-loss budget" in budget_words({})["sentences"][0]


def test_vermont_counties_decode_to_closed_rings():
    vt = decode_counties({"50"})
    assert len(vt) == 14 and all(f.startswith("50") for f in vt)
    area = {}
    for fips, rings in vt.items():
        for r in rings:
            assert np.allclose(r[0], r[-1])  # stitched arcs close the ring
        x, y = rings[0][:, 0], rings[0][:, 1]
        area[fips] = 0.5 * abs(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1)))
    # total areas (Census 2010 Gazetteer, sq. mi.): Windsor 976, Lamoille 464,
    # Grand Isle 195; an equal-area projection keeps their ratios
    assert area["50027"] / area["50013"] == pytest.approx(976 / 195, rel=0.1)
    assert area["50027"] / area["50015"] == pytest.approx(976 / 464, rel=0.1)


def test_choropleth_colours_and_tooltips():
    assert diverging_color(0.0, 1.0) == "#f7f7f7"
    assert diverging_color(1.0, 1.0) == "#b2182b" and diverging_color(-1.0, 1.0) == "#2166ac"
    assert diverging_color(math.nan, 1.0) == "#dddddd"
    svg = county_map_svg(
        {"50001": 6.0, "50003": -6.0},
        {"50001": "Addison County: +6%", "50003": "Bennington County: -6%"},
        title="t",
    )
    assert svg is not None and svg.count('class="county"') == 14
    # 5% or more: the darkest class of the fixed scale
    assert re.search(r'data-fips="50001"[^>]*fill="#b2182b"><title>Addison County: \+6%', svg)
    assert re.search(r'data-fips="50003"[^>]*fill="#2166ac"', svg)
    assert svg.count('fill="#dddddd"') >= 12  # the other counties: no data
    assert county_map_svg({"72001": 1.0}, {}, title="PR") is None  # not in the boundary file


def _fill(svg: str, fips: str) -> str:
    return re.search(rf'data-fips="{fips}"[^>]*fill="(#[0-9a-f]{{6}})"', svg).group(1)


def test_map_colours_are_fixed_classes_not_the_datas_maximum():
    # a tiny error alone on the map was saturated when the scale ran to the largest error
    small = county_map_svg({"50001": 0.01, "50003": -0.01}, {}, title="small")
    large = county_map_svg({"50001": 0.01, "50003": 30.0}, {}, title="large")
    assert _fill(small, "50001") == _fill(large, "50001") == class_color(0.01)
    assert _fill(small, "50001") not in ("#b2182b", "#f7f7f7")  # palest red, not dark
    assert _fill(large, "50003") == "#b2182b"
    # the legend is the same whatever the data, and states its rule
    legend = re.compile(r'<rect class="legend-class"[^>]*>')
    assert legend.findall(small) == legend.findall(large) and len(legend.findall(small)) == 11
    for svg in (small, large):
        assert 'data-scale="fixed"' in svg and 'data-classes="0.5,1,2,5"' in svg
        assert class_rule() in html.unescape(svg)
    # one class per band, darker with the size of the error
    shades = [class_color(v) for v in (0.0, 0.2, 0.7, 1.5, 3.0, 8.0)]
    assert len(set(shades)) == 6 and class_color(-0.2) != class_color(0.2)
    assert class_color(0.49) == class_color(0.2) and class_color(0.5) == class_color(0.7)


def test_tiny_differences_in_people_not_zero_percent():
    assert difference_words(2, 40_000) == "+2 people (under 0.1%)"
    assert difference_words(-1, 40_000) == "-1 person (under 0.1%)"
    assert difference_words(-41, 3_000) == "-41 people (-1.4%)"
    assert difference_words(0, 500) == "exact" and difference_words(3, 0) == "+3 people"
    assert fmt_pct(0.004) == "under 0.1%" and fmt_pct(-0.004) == "under 0.1%"
    assert fmt_pct(0.0) == "0%" and fmt_pct(1.26) == "+1.3%"


def test_numbers_never_in_exponent_form():
    assert fmt(5.19e-05) == "&lt;0.001" and fmt(-5.19e-05) == "-&lt;0.001"
    assert fmt(0.8) == "0.800" and fmt(0.98765) == "0.988" and fmt(0.0) == "0"
    assert fmt(123456.7) == "123,456.70" and fmt(12.345) == "12.35"
    assert fmt(float("nan")) == "&ndash;" and fmt(3) == "3"
    for v in (1e-9, 2.5e-4, 7e5, 3.2e7):
        assert "e" not in fmt(v).replace("&lt;", "")


@pytest.fixture(scope="module")
def readable(truth_release):
    truth_dir, release_dir, _, _ = truth_release
    cef = read_cef(truth_dir)
    result, detail = evaluate_data(
        cef.persons, cef.units, read_release(release_dir), district_targets=(100,)
    )
    return result, detail


def test_place_rows_have_names_parents_and_counts(readable, truth_release):
    result, detail = readable
    _, _, truth, release = truth_release
    rows = place_rows(detail["hierarchy"], detail["truth_tables"], detail["release_tables"])
    by = {r["geocode"]: r for r in rows}
    assert by["50"]["NAME"] == "Vermont" and by["50"]["parent"] is None
    assert by["50003"]["NAME"] == "Bennington County, Vermont" and by["50003"]["parent"] == "50"
    tract = by["50003000100"]
    assert tract["NAME"] == "Census Tract 1, Bennington County, Vermont"
    assert tract["parent"] == "50003" and by["500030001002"]["parent"] == "50003000100"
    codes = np.asarray(truth["persons"]["geocode"]).astype(str)
    assert tract["truth"]["population"] == int(np.char.startswith(codes, "50003000100").sum())
    rel = np.asarray(release["persons"]["geocode"]).astype(str)
    adults = np.asarray(release["persons"]["votingage"]) == 1
    in_tract = np.char.startswith(rel, "50003000100")
    assert tract["released"]["population"] == int(in_tract.sum())
    assert tract["released"]["adults"] == int((in_tract & adults).sum())
    assert {r["level"] for r in rows} == {"State", "County", "Tract", "BlockGroup"}


def test_rendered_report_reads_plainly(readable):
    result, detail = readable
    html = render_report(result, detail["scatter"], detail=detail)
    assert html.index('id="summary"') < html.index("Details for analysts")
    assert "What was released." in html and "How far off are the counts?" in html
    assert not re.search(r"seed 00\d|seed 0\d\d", html)  # no internal references
    payload = json.loads(
        re.search(r'id="places-data">(.*?)</script>', html).group(1).replace("<\\/", "</")
    )
    names = {p["c"]: p["n"] for p in payload["places"]}
    assert names["50005"] == "Caledonia County, Vermont"
    county = next(p for p in payload["places"] if p["c"] == "50005")
    i = payload["keys"].index("population")
    assert county["t"][i] == int(detail["truth_tables"]["P1"][2][2, 0])
    assert county["r"][0][i] == int(detail["release_tables"]["P1"][2][2, 0])
    assert html.count('class="county"') == 14  # the Vermont map
    assert html.count('<table class="csv"') >= 8


def test_the_reports_csv_downloads_hold_numbers(readable):
    """Each table downloads one number per column: the typical error, its 9-in-10 bound
    and the count apart (never ``1 (9 in 10 within 4; n = 2,123)``), no separators."""
    from report_csv import mixed_cells, table_csvs

    result, detail = readable
    page = render_report(result, detail["scatter"], detail=detail)
    assert mixed_cells(page) == []
    size = table_csvs(page)["typical_error_by_size"]
    assert size[0][1:4] == [
        "counties: typical error",
        "counties: 9 in 10 within",
        "counties: number of counties",
    ]
    assert all(c == "" or float(c) >= 0 for row in size[1:] for c in row[1:])
    assert any(c != "" for row in size[1:] for c in row[1:])
