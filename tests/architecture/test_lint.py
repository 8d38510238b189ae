"""The code passes the project's own ruff rules (pyproject.toml's ``[tool.ruff]``): every
directory ruff is configured for, benchmarks and tools included, not only the package.
Skipped where ruff is not installed (it is a development dependency)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINTED = ("src", "tests", "benchmarks", "tools")


def _ruff() -> str | None:
    beside = Path(sys.executable).with_name("ruff")
    return str(beside) if beside.is_file() else shutil.which("ruff")


def test_ruff_check_passes_everywhere() -> None:
    ruff = _ruff()
    if ruff is None:
        pytest.skip("ruff is not installed")
    done = subprocess.run(
        [ruff, "check", "--no-cache", "--quiet", *LINTED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
