"""Render the HTML report in headless Chromium and check that every plot decodes.

Marked ``browser``: the default suite skips it. Run with ``pytest -m browser``; it uses
``tools/render_report.sh``, which installs Debian's chromium package if needed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from censusdp.evaluate import evaluate

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "render_report.sh"


@pytest.mark.browser
def test_report_renders_with_plots_in_chromium(truth_release, tmp_path, request):
    if "browser" not in (request.config.getoption("-m") or ""):
        pytest.skip("browser check runs only when selected: pytest -m browser")
    have = any(shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome"))
    if not have and os.geteuid() != 0:
        pytest.skip("no Chromium and not root to install it")
    truth_dir, release_dir, _, _ = truth_release
    html = tmp_path / "report.html"
    evaluate(
        truth_dir,
        release_dir,
        html_path=html,
        district_targets=(100,),
        progress=lambda _m: None,
        allow_invalid=True,
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
