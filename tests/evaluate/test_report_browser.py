"""Render the HTML report in headless Chromium and check that every plot decodes.

Marked ``browser``; Chromium comes from the ``chromium`` fixture (tests/conftest.py),
which installs Debian's package when it is missing.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from censusdp.evaluate import EvaluateOptions, evaluate

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "render_report.sh"


@pytest.mark.browser
def test_report_renders_with_plots_in_chromium(truth_release, tmp_path, chromium):
    truth_dir, release_dir, _, _ = truth_release
    html = tmp_path / "report.html"
    evaluate(
        truth_dir,
        release_dir,
        EvaluateOptions(district_targets=(100,), allow_invalid=True),
        html_path=html,
    )
    shot = tmp_path / "report.png"
    proc = subprocess.run(
        ["bash", str(SCRIPT), str(html), str(shot)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    loaded, total = proc.stdout.split("images loaded: ")[1].split(";")[0].split("/")
    assert int(total) >= 5 and loaded == total
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000
