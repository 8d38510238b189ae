"""``benchmarks/bench_generate.py`` runs each state in its own child process; several
states in one run must each give their row (its warm-up once collided with the state
before it: ``--states VT,DE`` crashed on DE)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # runs the benchmark script on two states (about 10 s under load)
def test_bench_generate_runs_two_states_in_one_run() -> None:
    path = [str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_generate.py")]
        + ["--states", "VT,DE", "--scale", "0.02"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert [r["state"] for r in result["results"]] == ["VT", "DE"]
    assert result["scale"] == 0.02
    assert all(r["persons"] > 0 for r in result["results"])
