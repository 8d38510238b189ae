"""A unit run that does not depend on the persons, estimated beside them
(``censusdp.release.estimation``, ``censusdp.execution.base.Beside``).

The pool is stood in for by an in-process executor that declares itself thread-safe
(tests/conftest.py's ``threaded``): the unit run then runs in a thread of its own beside the
person run, as on a pool, without starting processes.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from censusdp.errors import InfeasibleError
from censusdp.execution import InProcessExecutor
from censusdp.execution.base import Beside
from censusdp.io.budget_files import load_preset
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.progress import Reporter, prefixed
from censusdp.release import estimation, pipeline
from censusdp.release.options import Execution, ReleaseOptions
from censusdp.release.pipeline import run_release
from synth import tree_bytes


@pytest.fixture
def runs(monkeypatch) -> list:
    """``(thread name, schema)`` of every TopDown run the estimation starts."""
    seen: list = []
    real = estimation.run_topdown

    def spy(ms, hierarchy, *args, **kwargs):
        seen.append((threading.current_thread().name, ms.schema.name))
        return real(ms, hierarchy, *args, **kwargs)

    monkeypatch.setattr(estimation, "run_topdown", spy)
    return seen


def _release(cef: Path, out: Path, lines: list | None = None, **options) -> dict:
    return run_release(
        cef,
        out,
        ReleaseBudget(load_preset("pl94-2020"), load_preset("pl94-2020-units")),
        ReleaseOptions(seed=6, **options),
        Execution(progress=None if lines is None else lines.append),
    )


def test_independent_units_run_beside_the_persons_and_give_the_same_release(
    small_cef: Path, tmp_path: Path, runs: list, monkeypatch, thread_safe
) -> None:
    plain = _release(small_cef, tmp_path / "plain", fidelity="production")
    assert [t for t, _ in runs] == ["MainThread", "MainThread"]
    assert "estimation_beside" not in plain
    runs.clear()
    monkeypatch.setattr(pipeline, "make_executor", lambda *a, **k: thread_safe)
    lines: list[str] = []
    beside = _release(small_cef, tmp_path / "beside", lines, fidelity="production")
    assert sorted(runs) == [("MainThread", "pl94"), ("censusdp-unit-run", "units")]
    assert beside["estimation_beside"] == estimation.ESTIMATED_BESIDE
    for name in ("mdf_units.parquet", "mdf_persons.parquet", "tables/H1.parquet"):
        assert tree_bytes(tmp_path / "plain" / name) == tree_bytes(tmp_path / "beside" / name)
    # the manifest's order does not depend on which run finished first
    assert list(beside["estimation"]) == list(plain["estimation"]) == ["persons", "units"]
    assert list(beside["failsafe"]) == ["persons", "units"]
    assert all(len(beside["estimation"][r]) == 6 for r in ("persons", "units"))
    # every line of the unit run says whose it is
    estimating = lines[lines.index("estimating the persons (top-down, level by level):") :]
    assert "units: estimating the housing units (their own run, top-down):" in lines
    assert not [ln for ln in estimating if "housing units" in ln and ln[:7] != "units: "]
    assert any(ln.startswith("units: estimated Block") for ln in lines)
    assert beside["timings"]["estimate_units"] > 0 and beside["timings"]["estimate_persons"] > 0


def test_units_held_to_the_persons_wait_for_them(
    small_cef: Path, tmp_path: Path, threaded, runs: list
) -> None:
    """By default the unit run is held to the persons' households: it cannot go beside."""
    m = _release(small_cef, tmp_path / "run")
    assert [t for t, _ in runs] == ["MainThread", "MainThread"]
    assert [s for _, s in runs] == ["pl94", "units"]
    assert "estimation_beside" not in m


def test_a_failing_unit_run_fails_the_release_with_its_own_error(
    small_cef: Path, tmp_path: Path, threaded, monkeypatch
) -> None:
    real = estimation.run_topdown

    def infeasible(ms, *args, **kwargs):
        if ms.schema.name == "units":
            raise InfeasibleError("units: no integer point in the block's bounds")
        return real(ms, *args, **kwargs)

    monkeypatch.setattr(estimation, "run_topdown", infeasible)
    with pytest.raises(InfeasibleError, match="no integer point"):
        _release(small_cef, tmp_path / "run", fidelity="production")
    assert not (tmp_path / "run").exists()


def test_a_failing_person_run_waits_for_the_unit_run(
    small_cef: Path, tmp_path: Path, threaded, monkeypatch
) -> None:
    """Nothing is written into the run after its failure has been handled."""
    real = estimation.run_topdown
    finished: list[str] = []

    def run(ms, *args, **kwargs):
        if ms.schema.name == "pl94":
            raise InfeasibleError("persons: infeasible")
        out = real(ms, *args, **kwargs)
        finished.append(ms.schema.name)
        return out

    monkeypatch.setattr(estimation, "run_topdown", run)
    with pytest.raises(InfeasibleError, match="persons: infeasible"):
        _release(small_cef, tmp_path / "run", fidelity="production")
    assert finished == ["units"]  # joined before the error left the estimation


def test_beside_runs_in_a_thread_only_on_a_thread_safe_executor(thread_safe) -> None:
    calls: list[str] = []

    def fn() -> int:
        calls.append(threading.current_thread().name)
        return 7

    later = Beside(fn, InProcessExecutor(), "t-beside")
    assert not later.concurrent and calls == []  # not run before its result is asked
    assert later.result() == 7 and later.result() == 7 and calls == ["MainThread"]
    now = Beside(fn, thread_safe, "t-beside")
    assert now.concurrent and now.result() == 7 and calls[-1] == "t-beside"

    def boom() -> int:
        raise KeyError("lost")

    with pytest.raises(KeyError, match="lost"):
        Beside(boom, thread_safe, "t-boom").result()


def test_prefixed_progress_labels_lines_and_bars() -> None:
    got: list[str] = []
    prefixed(got.append, "units")("estimated Block")
    assert got == ["units: estimated Block"]
    assert prefixed(None, "units") is None
    opened: list[str] = []

    class _Fake(Reporter):
        def open_bar(self, label, total, unit, *, keep=True):
            opened.append(label)
            return None

    view = prefixed(_Fake(bars=True), "units")
    assert isinstance(view, Reporter)
    view.open_bar("estimating Block", 3, "tasks")
    assert opened == ["units: estimating Block"]
