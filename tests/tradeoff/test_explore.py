"""``censusdp explore``: the page is self-contained, carries the results, and its optimum
is the Python one. The browser checks are in ``test_explore_browser.py``."""

from __future__ import annotations

import json
import re

import pytest
from _fake_engine import build_results

from censusdp.cli import main
from censusdp.errors import ConfigError
from censusdp.generate import generate_state
from censusdp.tradeoff import MisallocationPreferences, optimal_epsilon
from censusdp.tradeoff.census_results import frontier_from_results
from censusdp.tradeoff.explore import (
    DEFAULT_FUNDS_PER_PERSON,
    DEFAULT_PRIVACY_PRICE,
    render_explorer,
)


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory):
    truth = tmp_path_factory.mktemp("truth")
    generate_state("DC", 2, truth, scale=0.01)
    out = tmp_path_factory.mktemp("results")
    build_results(truth, out, attack=False)
    return out


def _embedded(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="tradeoff-data">(.*?)</script>', page, re.S)
    assert m is not None
    return json.loads(m.group(1))


def test_page_is_self_contained_and_carries_the_results(results_dir):
    results = json.loads((results_dir / "results.json").read_text())
    page = render_explorer(results)
    assert page.startswith("<!DOCTYPE html>")
    # no network: no external scripts, styles, images or fonts
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", page)
    urls = set(re.findall(r"https?://[^\s\"'<>]+", page))
    assert urls <= {"http://www.w3.org/2000/svg"}
    data = _embedded(page)
    assert data["results"]["points"] == results["points"]
    assert data["results"]["epsilons"] == [0.5, 2.0, 8.0]
    assert all(f'id="plot-{n}"' in page for n in ("accuracy", "risk", "frontier", "welfare"))
    for control in ('id="eps"', 'name="scenario"', 'id="level"', 'id="price"', 'id="funds"'):
        assert control in page


def test_embedded_optimum_is_the_python_optimum(results_dir):
    results = json.loads((results_dir / "results.json").read_text())
    data = _embedded(render_explorer(results))
    level = data["defaults"]["level"]
    assert level == "BlockGroup"  # the fake keeps tract totals exact: first level with error
    f, g = frontier_from_results(results, geolevel=level)
    prefs = MisallocationPreferences(
        privacy_cost=DEFAULT_PRIVACY_PRICE * results["population"],
        funds_per_person=DEFAULT_FUNDS_PER_PERSON,
        areas=g,
    )
    opt = optimal_epsilon(f, prefs, search_range=(0.5 / 4, 8 * 4))
    assert data["python_optimum"]["epsilon"] == pytest.approx(opt.epsilon, rel=1e-12)
    # the closed form the page evaluates in JavaScript
    kk = prefs.funds_per_person * (2 * g / 3.141592653589793) ** 0.5
    closed = (kk * f.k**0.5 * f.alpha / (2 * prefs.privacy_cost)) ** (1 / (f.alpha / 2 + 1))
    if opt.interior:
        assert opt.epsilon == pytest.approx(closed, rel=1e-9)
    page = render_explorer(results)
    assert f'data-python-optimum="{opt.epsilon:.10g}"' in page


def test_script_cannot_be_closed_by_the_data(results_dir):
    results = json.loads((results_dir / "results.json").read_text())
    results["epsilon_meaning"] = "/tmp/</script><script>alert(1)</script>"
    page = render_explorer(results)
    assert page.count("</script>") == 2  # the data block and the code block only
    assert _embedded(page)["results"]["epsilon_meaning"] == results["epsilon_meaning"]


def test_page_names_the_input_directory_only(results_dir):
    results = json.loads((results_dir / "results.json").read_text())
    results["input"] = "/home/someone/census/vt-input"
    page = render_explorer(results)
    assert _embedded(page)["results"]["input"] == "vt-input"
    assert "/home/someone" not in page


def test_cli_writes_and_refuses_to_overwrite(results_dir, tmp_path, capsys):
    out = tmp_path / "explore.html"
    assert main(["explore", str(results_dir), "--html", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "wrote" in printed and "optimum at the default prices" in printed
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert main(["explore", str(results_dir), "--html", str(out)]) == 2
    err = capsys.readouterr().err
    assert "exists" in err and "Traceback" not in err
    assert (
        main(["explore", str(tmp_path / "none"), "--html", str(tmp_path / "x.html")]) == 1
    )  # a missing input is a data error
    assert "missing" in capsys.readouterr().err


def test_no_points_is_an_error():
    with pytest.raises(ConfigError, match="no measured points"):
        render_explorer({"points": []})
