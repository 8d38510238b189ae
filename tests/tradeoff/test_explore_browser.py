"""Open the explorer in headless Chromium: it renders, its controls drive every plot, and the
optimum it computes in JavaScript is the Python one.

Marked ``browser``: Chromium comes from the session fixture in tests/conftest.py, /usr/bin/chromium
(or another Chromium on PATH) exists. The page records its state on ``<body>``
(``data-ready``, ``data-plots``, ``data-optimum``, ``data-selected-epsilon``, ...), read
back with ``--dump-dom``; the initial state is set through the URL hash.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import tempfile

import pytest
from _fake_engine import build_results

from censusdp.generate import generate_state
from censusdp.tradeoff import MisallocationPreferences, optimal_epsilon
from censusdp.tradeoff.census_results import frontier_from_results
from censusdp.tradeoff.explore import DEFAULT_FUNDS_PER_PERSON, write_explorer


@pytest.fixture(scope="module")
def browser(chromium):
    """The Chromium binary (the session fixture installs Debian's package if missing)."""
    return chromium


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):
    truth = tmp_path_factory.mktemp("truth")
    generate_state("DC", 2, truth, scale=0.01)
    out = tmp_path_factory.mktemp("results")
    build_results(truth, out, attack=True)
    target = tmp_path_factory.mktemp("page") / "explore.html"  # never inside RESULTS
    write_explorer(out, target)
    return out, target


def _body(browser: str, url: str) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--virtual-time-budget=5000",
                f"--user-data-dir={profile}",
                "--dump-dom",
                url,
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert proc.returncode == 0, proc.stderr[-2000:]
    tag = re.search(r"<body([^>]*)>", proc.stdout)
    assert tag is not None, proc.stdout[:500]
    return {k: html.unescape(v) for k, v in re.findall(r'([\w-]+)="([^"]*)"', tag.group(1))}


@pytest.mark.browser
def test_explorer_renders_and_links_its_plots(browser, page, tmp_path):
    out, target = page
    results = json.loads((out / "results.json").read_text())

    # the page names the input, never where it lies on this machine
    text = target.read_text("utf-8")
    assert str(out.parent) not in text and str(target.parent) not in text
    assert "/tmp/" not in text and "docs/" not in text
    body = _body(browser, target.as_uri())
    assert "data-error" not in body, body.get("data-error")
    assert body["data-ready"] == "1"
    assert body["data-plots"] == "4"
    assert body["data-scenario"] == "standard" and body["data-selected-epsilon"] == "2"
    # the JavaScript optimum equals the Python one at the default prices
    assert float(body["data-optimum"]) == pytest.approx(
        float(body["data-python-optimum"]), rel=1e-9
    )
    assert body["data-frontier-points"] == "3"
    # readable: no tick, axis or line label on another (the welfare axis's "-1.00e+5"
    # ticks ran into its title, the optimum's label into the legend)
    assert body["data-label-overlaps"] == "0"

    # linked state from the URL: another budget, allocation, geography and price
    url = target.as_uri() + "#eps=8&scenario=no_block&level=BlockGroup&price=0.5&funds=40"
    body = _body(browser, url)
    assert body["data-ready"] == "1"
    assert body["data-selected-epsilon"] == "8"
    assert body["data-scenario"] == "no_block" and body["data-level"] == "BlockGroup"
    assert body["data-label-overlaps"] == "0"
    f, g = frontier_from_results(results, scenario="no_block", geolevel="BlockGroup")
    prefs = MisallocationPreferences(
        privacy_cost=0.5 * results["population"], funds_per_person=40.0, areas=g
    )
    opt = optimal_epsilon(f, prefs, search_range=(0.5 / 4, 8 * 4))
    assert float(body["data-optimum"]) == pytest.approx(opt.epsilon, rel=1e-9)
    point = next(p for p in results["points"] if p["scenario"] == "no_block" and p["epsilon"] == 8)
    mae = point["metrics"]["accuracy.total_population.BlockGroup.mae"]["mean"]
    readout = body["data-readout"]
    assert "no block level published" in readout
    assert f"off by {float(f'{mae:.3g}'):g} people" in readout
    conf = point["metrics"]["reid.confirmed_share"]["mean"]
    assert f"{100 * conf:.1f}%" in readout
    assert DEFAULT_FUNDS_PER_PERSON != 40.0  # the hash really changed the price

    shot = tmp_path / "explore.png"
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--virtual-time-budget=5000",
                f"--user-data-dir={profile}",
                "--window-size=1300,1500",
                f"--screenshot={shot}",
                target.as_uri(),
            ],
            capture_output=True,
            timeout=180,
            check=True,
        )
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000


@pytest.mark.browser
def test_explorer_numbers_have_no_exponents(browser, page):
    _, target = page
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
             f"--user-data-dir={profile}", "--dump-dom", target.as_uri()],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    labels = re.findall(r'<text[^>]*class="tick-label"[^>]*>([^<]*)</text>', proc.stdout)
    assert len(labels) >= 20
    assert not [t for t in labels if re.search(r"\de[+-]?\d", t)], labels
    assert any(t.endswith("k") for t in labels)  # the welfare axis in thousands of dollars
    note = re.search(r'id="note"[^>]*>([^<]*)<', proc.stdout).group(1)
    assert "k = " in note and not re.search(r"\de[+-]\d", note)  # k = 96,300, not 9.63e+04
