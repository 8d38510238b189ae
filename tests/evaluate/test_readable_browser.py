"""The readable report and the comparison page in headless Chromium.

Marked ``browser`` (run with ``pytest -m browser``); the ``chromium`` fixture of
``tests/conftest.py`` installs Debian's chromium package when missing (as root) or
skips. Each page must load without a console message or script error, its drill-down
must work from the URL, its CSV must match the data, and its plots must decode.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import tempfile

import pytest

from censusdp.evaluate import EvaluateOptions, evaluate
from censusdp.evaluate.compare import compare_releases


def _open(browser: str, url: str, shot=None) -> tuple[dict[str, str], str, str]:
    """Body attributes, the DOM and the console lines of ``url``."""
    with tempfile.TemporaryDirectory() as profile:
        args = [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=8000",
            f"--user-data-dir={profile}",
        ]
        args += [f"--screenshot={shot}", "--window-size=1200,1600"] if shot else ["--dump-dom"]
        proc = subprocess.run(args + [url], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    console = "\n".join(x for x in proc.stderr.splitlines() if ":CONSOLE" in x)
    tag = re.search(r"<body([^>]*)>", proc.stdout)
    attrs = {}
    if tag:
        attrs = {k: html.unescape(v) for k, v in re.findall(r'([\w-]+)="([^"]*)"', tag.group(1))}
    return attrs, proc.stdout, console


@pytest.fixture(scope="module")
def report(chromium, truth_release, tmp_path_factory):
    truth_dir, release_dir, _, _ = truth_release
    path = tmp_path_factory.mktemp("report") / "report.html"
    options = EvaluateOptions(district_targets=(100,), allow_invalid=True)
    evaluate(truth_dir, release_dir, options, html_path=path)
    return path


@pytest.mark.browser
def test_report_loads_clean_and_drills_down(chromium, report, tmp_path):
    body, dom, console = _open(chromium, report.as_uri())
    assert console == "" and "data-error" not in body
    assert body["data-ready"] == "1"
    assert int(body["data-csv-buttons"]) >= 8
    assert body["data-images-loaded"] == body["data-images-total"]
    assert int(body["data-images-total"]) >= 4
    # one state: the page opens on its counties
    assert (body["data-drill-place"], body["data-drill-level"]) == ("50", "County")
    assert body["data-drill-rows"] == "3"
    for key in ('id="summary"', "How far off are the counts?", 'class="county"', "Download CSV"):
        assert key in dom
    assert dom.index('id="summary"') < dom.index('id="places"')

    # a county from the URL lists its tracts; the CSV is the table's data
    body, dom, console = _open(chromium, report.as_uri() + "#place=50003&csv=1")
    assert console == "" and body["data-drill-level"] == "Tract"
    assert body["data-drill-rows"] == "3"
    payload = json.loads(
        re.search(r'id="places-data">(.*?)</script>', dom).group(1).replace("<\\/", "</")
    )
    tract = next(p for p in payload["places"] if p["c"] == "50003000100")
    lines = body["data-csv"].strip().split("\n")
    assert lines[0] == "Name,GEOID,true,published,difference,% difference"
    t, r = tract["t"][0], tract["r"][0][0]
    pct = f"{100 * (r - t) / t:.1f}"
    want = f'"Census Tract 1, Bennington County, Vermont",50003000100,{t},{r},{r - t},{pct}'
    assert want in lines

    shot = tmp_path / "summary.png"
    _open(chromium, report.as_uri(), shot=shot)
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000


@pytest.mark.browser
def test_comparison_page_loads_clean(chromium, truth_release, broken_release, tmp_path):
    truth_dir, run_a, _, _ = truth_release
    _, run_b, _, _ = broken_release
    page = tmp_path / "compare.html"
    out = compare_releases(
        run_a, run_b, truth_dir, names=["first", "second"], html_path=page, allow_invalid=True
    )
    assert [r["name"] for r in out["runs"]] == ["first", "second"]
    body, dom, console = _open(chromium, page.as_uri() + "#place=50001&csv=1")
    assert console == "" and "data-error" not in body and body["data-ready"] == "1"
    assert body["data-drill-level"] == "Tract" and body["data-drill-rows"] == "3"
    header = body["data-csv"].split("\n")[0]
    assert header == (
        "Name,GEOID,true,published (first),difference,% difference,"
        "published (second),difference,% difference"
    )
    assert dom.count('class="county"') == 2 * 14  # two Vermont maps
    assert body["data-images-loaded"] == body["data-images-total"] == "4"
