"""``--estimator``: the maximum-entropy estimate goes through the whole release (exact
invariants, children summing to parents, validation) and the manifest says which ran."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from censusdp.io.budget_files import load_preset
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.options import ReleaseOptions
from censusdp.release.pipeline import reestimate, run_release
from censusdp.release.topdown.tasks import run_task
from synth import block_codes, make_cef, write_cef


@pytest.fixture(scope="module")
def cef(tmp_path_factory):
    base = tmp_path_factory.mktemp("est")
    persons, units = make_cef(np.random.default_rng(8), block_codes(1, 2, 2, 3), gq_rate=0.2)
    write_cef(base / "cef", persons, units)
    return base


def test_maxent_release_is_valid_and_recorded(cef):
    budget = load_preset("pl94-2020").scaled(rho="1/400")  # a small budget
    m = run_release(
        cef / "cef", cef / "me", ReleaseBudget(budget), ReleaseOptions(seed=2, estimator="maxent")
    )
    assert m["estimator"] == "maxent"
    assert m["validation"]["ok"] is True
    methods = {k for lv in m["estimation"]["persons"] for k in lv["methods"]}
    assert "maxent" in methods and not methods & {"clarabel", "admm"}
    # re-estimating the same measurements by least squares is another, valid release
    ls = reestimate(cef / "me", cef / "ls", ReleaseOptions(estimator="ls"))
    assert ls["estimator"] == "ls" and ls["persons_released"] == m["persons_released"]
    methods = {k for lv in ls["estimation"]["persons"] for k in lv["methods"]}
    assert "maxent" not in methods


def test_cli_rejects_an_unknown_estimator_in_one_line(cef, tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "censusdp",
            "run",
            "--input",
            str(cef / "cef"),
            "--out",
            str(tmp_path / "x"),
            "--estimator",
            "pgm",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2
    assert "--estimator" in r.stderr and "invalid choice: 'pgm'" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("estimator", ["maxent", "auto"])
def test_every_estimator_rounds_in_passes(cef, tmp_path, monkeypatch, estimator):
    """The rounding passes (the totals first) are not a least-squares matter: a
    maximum-entropy point rounded cell by cell gives its largest children what the small
    ones lose (tests/release/topdown/test_published_rounding.py)."""
    from censusdp.release.topdown import tasks as topdown_tasks

    seen = []
    real = run_task

    def spy(task):
        seen.append((task.level, task.rounding is not None))
        return real(task)

    monkeypatch.setattr(topdown_tasks, "run_task", spy)
    budget = load_preset("pl94-2020").scaled(rho="1/400")
    m = run_release(
        cef / "cef",
        tmp_path / "run",
        ReleaseBudget(budget),
        ReleaseOptions(seed=2, estimator=estimator),
    )
    assert m["validation"]["ok"] is True
    below_root = [rounded for level, rounded in seen if level > 0]
    assert below_root and all(below_root)
