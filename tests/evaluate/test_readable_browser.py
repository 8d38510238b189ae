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
from censusdp.evaluate.maps import class_color


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


@pytest.fixture(scope="module")
def comparison(chromium, truth_release, broken_release, tmp_path_factory):
    truth_dir, run_a, _, _ = truth_release
    _, run_b, _, _ = broken_release
    page = tmp_path_factory.mktemp("compare") / "compare.html"
    compare_releases(
        run_a, run_b, truth_dir, names=["first", "second"], html_path=page, allow_invalid=True
    )
    return page


def _visible(dom: str) -> str:
    """The rendered DOM without inline images and scripts (their text is not shown)."""
    dom = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", dom)
    return re.sub(r"<script.*?</script>", "", dom, flags=re.S)


def _geounit_rows(dom: str) -> list[list[str]]:
    """Every body row of every table whose header has a NAME or Name column."""
    out = []
    for tab in re.findall(r"<table.*?</table>", dom, flags=re.S):
        head = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th>(.*?)</th>", tab)]
        if not {"NAME", "Name", "GEOID"} & set(head):
            continue
        assert "GEOID" in head and ("NAME" in head or "Name" in head), head
        i, j = head.index("GEOID"), head.index("NAME" if "NAME" in head else "Name")
        for row in re.findall(r"<tr>(.*?)</tr>", re.sub(r"<thead>.*?</thead>", "", tab)):
            cells = [
                html.unescape(re.sub(r"<[^>]+>", "", c))
                for c in re.findall(r"<td[^>]*>(.*?)</td>", row)
            ]
            out.append([cells[j], cells[i]])
    return out


@pytest.fixture(scope="module")
def doms(chromium, report, comparison) -> dict[str, str]:
    """The rendered DOM of the report, of one county's drill-down and of the comparison."""
    pages = {
        "report": report.as_uri(),
        "county": report.as_uri() + "#place=50003",
        "compare": comparison.as_uri(),
    }
    out = {}
    for label, url in pages.items():
        _, dom, console = _open(chromium, url)
        assert console == "", label
        out[label] = dom
    return out


@pytest.mark.browser
def test_pages_show_no_local_path_and_places_by_name_and_geoid(
    doms, report, comparison, truth_release, broken_release
):
    truth_dir, run_a, _, _ = truth_release
    _, run_b, _, _ = broken_release
    for label, dom in doms.items():
        text = _visible(dom)
        for p in (truth_dir, run_a, run_b, report.parent, comparison.parent):
            assert str(p.resolve()) not in text, (label, p)
        assert "docs/" not in text and "/tmp/" not in text, label
        rows = _geounit_rows(text)
        assert rows, label
        for name, geoid in rows:
            assert name and geoid, (label, name, geoid)
            assert not re.fullmatch(r"\d{16}", geoid), (label, geoid)  # never the internal code
        if label == "report":  # the largest errors name their places too
            assert ["Addison County, Vermont", "50001"] in rows


@pytest.mark.browser
def test_map_colour_scale_is_fixed_by_a_stated_rule(doms):
    legends = []
    for dom in (doms["report"], doms["compare"]):
        for svg in re.findall(r'<svg class="map".*?</svg>', dom, flags=re.S):
            assert 'data-scale="fixed"' in svg and 'data-classes="0.5,1,2,5"' in svg
            assert "not scaled to the largest difference" in html.unescape(svg)
            legends.append(re.findall(r'<rect class="legend-class"[^>]*>', svg))
            # each county's colour is the class of its own error, whatever the others'
            for fips, fill, tip in re.findall(
                r'data-fips="(\d{5})"[^>]*fill="(#[0-9a-f]{6})"><title>([^<]*)</title>', svg
            ):
                if "not in this release" in tip:
                    assert fill == "#dddddd"
                    continue
                m = re.search(r"published ([\d,]+), true ([\d,]+)", html.unescape(tip))
                published, true = (int(g.replace(",", "")) for g in m.groups())
                assert fill == class_color(100 * (published - true) / true), (fips, tip)
        assert "not scaled to the largest difference" in html.unescape(_visible(dom))
    assert len(legends) == 3 and legends[0] == legends[1] == legends[2] and len(legends[0]) == 11
