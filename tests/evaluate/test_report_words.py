"""What a reader sees in the report pages: no local paths, no internal names or codes,
places by NAME and GEOID, accuracy explained, and plots that can be compared and read.

Each test fails on the pages as they were before issue 36's second pass: the report
printed the release's absolute path, ``docs/evaluation.md``, "Off-spine districts",
16-digit internal geocodes in "Largest errors", an unexplained "TVD", a bias column that
is 0 by construction, counts summed over reruns, scatter labels on top of each other,
and the comparison's scatters on different axes.
"""

from __future__ import annotations

import html
import re

import numpy as np
import pytest
from matplotlib.figure import Figure

from censusdp.evaluate import EvaluateOptions, evaluate, render_report
from censusdp.evaluate import _scatter as scatter_module
from censusdp.evaluate import compare as compare_module
from censusdp.evaluate.compare import compare_releases
from censusdp.evaluate.errorbars_report import predicted_section, render_expected_report


def _text(page: str) -> str:
    """The page without its inline images (their base64 could contain anything)."""
    return re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page)


@pytest.fixture(scope="module")
def page(truth_release, tmp_path_factory):
    truth_dir, release_dir, _, _ = truth_release
    path = tmp_path_factory.mktemp("words") / "report.html"
    result = evaluate(
        truth_dir,
        release_dir,
        EvaluateOptions(district_targets=(100,), allow_invalid=True),
        html_path=path,
    )
    return result, _text(path.read_text("utf-8"))


def test_report_names_directories_not_where_they_are(page, truth_release):
    _, text = page
    truth_dir, release_dir, _, _ = truth_release
    for p in (truth_dir, release_dir):
        assert str(p.resolve()) not in text and str(p) not in text
    assert f"<code>{release_dir.name}</code>" in text
    assert "docs/" not in text and "Off-spine" not in text and "off-spine" not in text
    assert "school or voting districts" in text
    # the production figure beside this release's epsilon is the composed one, as here
    assert "17.44 for the whole release" in text


def _visible(text: str) -> str:
    """The words a reader sees: no scripts, styles or tags."""
    text = re.sub(r"<(script|style).*?</\1>", "", text, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", text))


def test_report_speaks_words_not_python_names(page):
    _, text = page
    words = _visible(text)
    # invariant checks, definitions and the mechanism by name, not by their JSON keys
    assert not re.findall(r"\b[a-z0-9]+_[a-z0-9_]+\b", words)
    assert "places add up to the places that contain them" in words
    assert "MAE (mean absolute error)" in words and "discrete gaussian" in words
    assert not re.search(r"\bNMF\b(?! *\))", words)  # spelled out where it is said
    assert not re.search(r"\d\.\d+e[-+]\d", words)  # no exponent notation but delta's


def _table_after(text: str, heading: str) -> list[list[str]]:
    start = text.index(heading)
    body = text[start : text.index("</table>", start)]
    rows = re.findall(r"<tr>(.*?)</tr>", body)
    return [
        [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r)]
        for r in rows
    ]


def test_largest_errors_show_name_and_geoid_never_internal_geocodes(page):
    result, text = page
    rows = _table_after(text, "Largest errors (total population)")
    assert rows[0] == ["geolevel", "NAME", "GEOID", "true", "published", "difference"]
    by_level = {}
    for level, name, geoid, *_ in rows[1:]:
        by_level.setdefault(level, []).append((name, geoid))
        assert name and geoid and not re.fullmatch(r"\d{16}", geoid)
    assert by_level["US"] == [("United States", "US")]
    assert by_level["State"] == [("Vermont", "50")]
    assert by_level["County"][0][1] in ("50001", "50003", "50005")
    worst = [e["geocode"] for e in result["largest_errors"]["total_population"]["Block"][:5]]
    for code, (name, geoid) in zip(worst, by_level["Block"], strict=True):
        assert name.startswith(f"Block {code[12:]}, Block Group {code[11]}, Census Tract ")
        assert name.endswith(", Vermont")
        if code[11] == code[12]:
            assert geoid == code[:11] + code[12:]  # the block group digit dropped
        else:  # no Census block is numbered so: said, not made up
            assert geoid == "none (block number not in its block group)"
    # no 16-digit code anywhere a reader looks (the drill-down data carries GEOIDs)
    visible = re.sub(r"<script.*?</script>", "", text, flags=re.S)
    assert not re.search(r"\b\d{16}\b", visible)


def test_accuracy_explained_and_no_bias_column_that_is_zero_by_construction(page):
    _, text = page
    assert "Accuracy = 1 - TVD, where TVD = L1 / (2 POP)" in text
    assert "0.98 means 2% of the people" in text
    header = _table_after(text, "<caption>Total population</caption>")[0]
    assert header == ["geolevel", "places", "MAE", "RMSE", "max |error|", "accuracy (1 - TVD)"]
    assert "their mean is 0 by construction" in text
    assert not re.search(r"<th>TVD</th>", text)


def test_rerun_counts_are_per_rerun_not_summed(page):
    result = dict(page[0])
    result["trials"] = {
        "trials": 5,
        "seeds": [1, 2, 3, 4, 5],
        "errors": {
            "total_population": {
                "Block": {
                    "by_bin": {
                        "1-9": {
                            "n": 105,
                            "mean": 0.5,
                            "sd": 1.0,
                            "quantiles": {"q05": -2, "q25": 0, "q50": 1, "q75": 1, "q95": 3},
                            "interval90": [-2, 3],
                            "abs_q90": 3,
                        }
                    },
                }
            }
        },
    }
    rows = _table_after(_text(render_report(result)), "From 5 reruns")
    assert "counts (per rerun)" in rows[0]
    assert rows[1][:4] == ["Total population", "Block", "1-9", "21"]


def test_scatter_labels_never_overlap():
    fig = Figure(figsize=(6.2, 4.4))
    ax = fig.add_subplot()
    x = np.full(14, 600.0) + np.arange(14)
    y = np.array([0, 1, -1, 2, 0, 1, 0, -2, 1, 0, 3, 0, -1, 0], dtype=float)
    ax.scatter(x, y)
    ax.set_xscale("log")
    ax.set_xlim(0.35, 2000)
    ax.set_ylim(-10, 10)
    names = [f"County number {i}" for i in range(14)]
    kept = scatter_module._label_without_overlap(fig, ax, x, y, names)
    assert 1 <= kept < 14  # 14 names at one spot cannot all be shown
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in ax.texts]
    assert len(boxes) == kept
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])
    assert "County number 10" in [t.get_text() for t in ax.texts]  # the largest error first


def test_compare_draws_both_scatters_on_shared_axes(
    truth_release, broken_release, monkeypatch, tmp_path
):
    truth_dir, run_a, _, _ = truth_release
    _, run_b, _, _ = broken_release
    calls = []
    real = compare_module._scatter_figure

    def spy(t, r, level, names=None, **kw):
        calls.append((level, kw.get("limits"), np.abs(np.asarray(r) - np.asarray(t)).max()))
        return real(t, r, level, names, **kw)

    monkeypatch.setattr(compare_module, "_scatter_figure", spy)
    compare_releases(
        run_a, run_b, truth_dir, names=["a", "b"], allow_invalid=True,
        html_path=tmp_path / "compare.html",
    )  # fmt: skip
    by_level: dict[str, set] = {}
    for level, limits, _ in calls:
        assert limits is not None
        by_level.setdefault(level, set()).add(limits)
    assert set(by_level) == {"County", "Block"} and len(calls) == 4  # two plots per level
    assert all(len(v) == 1 for v in by_level.values())  # one pair of axes per level
    for level, ((_, ymax),) in by_level.items():
        assert ymax == max(e for lv, _, e in calls if lv == level)  # the larger of the two


def _expected_result() -> dict:
    """What ``expected_errors`` returns, for two levels and one measure."""
    rec = {
        "mae": 1.5,
        "mae_mc_se": 0.05,
        "rmse": 2.1,
        "bias": 0.0,
        "interval90": [-3, 3],
        "abs_q90": 3,
    }
    return {
        "release": "/somewhere/on/this/machine/vt-run",
        "geolevels": ["County", "Tract"],
        "units": {"County": 14, "Tract": 193},
        "measures": ["total_population"],
        "released": {
            "simulations": 2, "seed": 3, "postprocess": "topdown",
            "by_level": {"total_population": {"County": rec, "Tract": {**rec, "mae": 4.2}}},
        },
        "gls": {"available": False, "reason": "no noisy measurements"},
    }  # fmt: skip


def test_expected_errors_page_without_a_column_zero_by_construction():
    result = _expected_result()
    text = _text(render_expected_report(result))
    header = _table_after(text, "Total population: expected errors per count")[0]
    assert header[:5] == [
        "geolevel",
        "places",
        "published: margin of error (90%)",
        "released: MAE ± MC se",
        "released: RMSE",
    ]
    assert not any("bias" in h for h in header)
    assert "divided by its number of places" in text  # why there is none, in words
    assert "On average the published counts" not in text  # 0 for the total population
    # P1's mean signed error is not 0: said once, at the top level, in words
    rec = result["released"]["by_level"]["total_population"]["County"]
    p1 = {"County": {**rec, "bias": 0.13}, "Tract": {**rec, "bias": 0.0067}}
    result["measures"] = ["P1"]
    result["released"]["by_level"]["P1"] = {"US": {**rec, "bias": 0.52}, **p1}
    result["geolevels"] = ["US", "County", "Tract"]
    result["units"]["US"] = 1
    text = _text(render_expected_report(result))
    assert "published counts are 0.520 above the true ones at the US level" in text
    assert "/somewhere" not in text and "<code>vt-run</code>" in text  # a name, not a place
    # with the truth, the prediction is named by the command as the CLI spells it now
    # (the release is the positional RUN)
    exp = {**result, "measures": ["total_population"]}
    section = "".join(predicted_section({"expected": exp, "metrics": {}}))
    assert "censusdp evaluate RUN</code> without the truth" in section
    assert "--release" not in section and "--release" not in text


def test_compare_sentences_say_as_close_when_the_errors_are_equal():
    labels = ["A (vt-run)", "B (vt-again)"]
    same = compare_module._closer_sentence("County", 1.0, 1.0, labels)
    assert same == (
        "Counties: populations are off by 1 person on average in A (vt-run) and 1 person "
        "in B (vt-again) (as close)."
    )
    assert "(A (vt-run) is closer)" in compare_module._closer_sentence("Block", 2.1, 2.4, labels)
    assert "5.4 people" in compare_module._closer_sentence("BlockGroup", 5.4, 5.41, labels)
