"""``censusdp demo``: the whole pipeline into one directory, made whole or not at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from censusdp.demo import run_demo
from censusdp.errors import ConfigError
from censusdp.io.output_rules import foreign_entries


def test_demo_is_one_output_that_names_only_its_final_places(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    summary = run_demo(out, state="DC", scale=0.01, seed=3)
    assert summary.out_dir == out.resolve() and summary.report == out.resolve() / "report.html"
    assert foreign_entries(out) == []  # its manifest lists every file, the release's too
    evaluation = json.loads((out / "evaluation.json").read_text())["evaluation"]
    assert (evaluation["truth"], evaluation["release"]) == ("cef/", "run/")
    for name in ("report.html", "evaluation.json"):
        assert ".partial-" not in (out / name).read_text(), name  # no staging path leaks
    with pytest.raises(ConfigError, match="exists and is not empty"):
        run_demo(out, state="DC", scale=0.01, seed=3)
    run_demo(out, state="DC", scale=0.01, seed=4, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]


@pytest.mark.slow  # three demo runs in subprocesses (15 s); tests/cli/test_output_roles.py has the rule
def test_the_set_up_command_can_be_run_again(tmp_path: Path) -> None:
    """``censusdp demo`` replaces its own earlier output (built-in data only) without
    ``--overwrite``, and still never a directory holding anything else."""
    import subprocess
    import sys

    def demo() -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "censusdp", "demo", "--state", "DC", "--scale", "0.01", "-q"]
        return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, check=False)

    assert demo().returncode == 0
    assert demo().returncode == 0, "a second set-up run must not fail"
    (tmp_path / "censusdp-demo" / "NOTES.txt").write_text("mine")
    proc = demo()
    assert proc.returncode == 2 and "NOTES.txt" in proc.stderr
    assert (tmp_path / "censusdp-demo" / "NOTES.txt").read_text() == "mine"
