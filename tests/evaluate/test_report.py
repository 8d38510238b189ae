"""Tests of the HTML report (rendering without a browser)."""

from __future__ import annotations

import base64
import re

import numpy as np

from censusdp.evaluate import render_report
from censusdp.evaluate.report import sweep_figure


def test_report_sections_and_labels(truth_release):
    from censusdp.evaluate import EvaluateOptions, evaluate

    truth_dir, release_dir, _, _ = truth_release
    result = evaluate(
        truth_dir,
        release_dir,
        EvaluateOptions(district_targets=(100,), allow_invalid=True),
    )
    scatter = {
        "County": (np.array([10, 20]), np.array([11, 19])),
        "Block": (np.array([0, 3]), np.array([1, 2])),
    }
    html = render_report(result, scatter)
    for heading in (
        "Accuracy by geolevel",
        "Published vs true population",
        "How far off are the counts?",
        "Bias by size",
        "Pathologies",
        "Error bars",
        "Noisy measurements (persons)",
        "Invariants and constraints, re-checked",
    ):
        assert heading in html
    assert "No reruns in this evaluation" in html  # trials absent: said so, not hidden
    assert len(re.findall(r"data:image/png;base64,", html)) == 5
    # A trials block adds its figure and table.
    result["trials"] = {
        "trials": 2,
        "seeds": [1, 2],
        "errors": {
            "total_population": {
                "Block": {
                    "tvd": {"trials": 2, "mean": 0.9, "min": 0.8, "max": 1.0},
                    "by_bin": {
                        "1-9": {
                            "n": 4,
                            "mean": 0.5,
                            "sd": 1.0,
                            "quantiles": {"q05": -2, "q25": 0, "q50": 1, "q75": 1, "q95": 3},
                            "interval90": [-2, 3],
                            "abs_q50": 1,
                            "abs_q90": 3,
                            "abs_q95": 3,
                        }
                    },
                }
            }
        },
    }
    html2 = render_report(result, scatter)
    assert "From 2 reruns of the mechanism" in html2 and "[-2, 3]" in html2


def test_sweep_figure_is_png():
    pts = []
    for eps, v in ((0.5, 0.6), (2.0, 0.9)):
        tv = {
            m: {lv: {"mean": v, "min": v - 0.05, "max": v + 0.05} for lv in ("County", "Block")}
            for m in ("total_population", "hispanic*cenrace")
        }
        pts.append({"epsilon": eps, "tvd": tv})
    png = sweep_figure(
        {"points": pts, "geolevels": ["County", "Block"], "trials": 2, "epsilon_meaning": "rho"}
    )
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert base64.b64encode(png)
