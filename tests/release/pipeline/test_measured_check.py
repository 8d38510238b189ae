"""A run's NMF checked as soon as it is measured, beside the estimation
(``censusdp.release.validate.measured``), and the self-check taking that verdict.

The pool is stood in for by an in-process executor that declares itself thread-safe
(tests/conftest.py's ``threaded``: its ``map`` runs in the calling thread, so the check runs in
its own thread beside the estimation, as on a pool): the same code paths, without
starting processes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from censusdp.errors import InternalError
from censusdp.io.budget_files import load_preset
from censusdp.io.parts import indexed_checksums
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release import pipeline
from censusdp.release.manifest import file_checksums
from censusdp.release.options import Execution, ReleaseOptions
from censusdp.release.pipeline import run_release
from censusdp.release.validate import _entries, measured, validate_run

NMF = "noisy_measurements.parquet"
NMF_UNITS = "noisy_measurements_units.parquet"


@pytest.fixture
def self_check(monkeypatch) -> list:
    """The reports of every self-check (``validate_run`` as the pipeline calls it)."""
    reports: list = []
    real = pipeline.validate_run

    def spy(*args, **kwargs):
        reports.append(real(*args, **kwargs))
        return reports[-1]

    monkeypatch.setattr(pipeline, "validate_run", spy)
    return reports


def _release(cef: Path, out: Path) -> dict:
    return run_release(
        cef,
        out,
        ReleaseBudget(load_preset("pl94-2020"), load_preset("pl94-2020-units")),
        ReleaseOptions(seed=4),
        Execution(),
    )


def test_the_self_check_takes_the_verdict_and_digests(
    small_cef: Path, tmp_path: Path, threaded, self_check: list, monkeypatch
) -> None:
    """Checked beside the estimation, neither NMF is counted nor its parts hashed again."""
    driver_hashed: list[str] = []
    real_sha = _entries.sha256_of

    def sha(path):
        driver_hashed.append(str(path))
        return real_sha(path)

    monkeypatch.setattr(_entries, "sha256_of", sha)
    m = _release(small_cef, tmp_path / "run")
    (report,) = self_check
    assert report.ok
    for run in ("persons", "units"):
        assert report.checks[f"nmf_{run}"]["detail"].endswith(measured.CHECKED_WHEN_MEASURED)
    parts = [p for p in driver_hashed if (NMF in p or NMF_UNITS in p) and p.endswith(".parquet")]
    assert not parts  # read by the check's tasks: only the small indexes hashed here
    assert m["timings"]["check_measurements_task_cpu"] > 0
    # the same verdict as a check of the finished files from scratch
    fresh = validate_run(tmp_path / "run")
    assert fresh.ok
    assert report.checks["nmf_persons"]["detail"].startswith(fresh.checks["nmf_persons"]["detail"])


def test_a_failed_early_check_hands_over_nothing(
    small_cef: Path, tmp_path: Path, threaded, self_check: list, monkeypatch
) -> None:
    """An NMF the early check did not pass is checked by the self-check itself."""
    monkeypatch.setattr(measured, "check_nmf", lambda *a, **k: (False, "damaged"))
    _release(small_cef, tmp_path / "run")
    (report,) = self_check
    assert report.ok
    detail = report.checks["nmf_persons"]["detail"]
    assert "damaged" not in detail and not detail.endswith(measured.CHECKED_WHEN_MEASURED)


def test_a_failing_check_stops_the_run(
    small_cef: Path, tmp_path: Path, threaded, monkeypatch
) -> None:
    def boom(*a, **k):
        raise RuntimeError("reader exploded")

    monkeypatch.setattr(measured, "check_nmf", boom)
    with pytest.raises(InternalError, match="check of the noisy measurements failed.*exploded"):
        _release(small_cef, tmp_path / "run")


def test_without_a_thread_safe_executor_the_self_check_counts(
    small_cef: Path, tmp_path: Path, self_check: list
) -> None:
    m = _release(small_cef, tmp_path / "run")
    assert "check_measurements" not in m["timings"]
    (report,) = self_check
    assert not report.checks["nmf_persons"]["detail"].endswith(measured.CHECKED_WHEN_MEASURED)


def test_checksums_under_one_entry(small_cef: Path, tmp_path: Path) -> None:
    """``file_checksums(under=...)`` lists what the whole directory's checksums list there."""
    _release(small_cef, tmp_path / "run")
    run = tmp_path / "run"
    known = indexed_checksums(run)
    whole = file_checksums(run, known)
    for name in (NMF, NMF_UNITS, "manifest.json", "invariants.parquet", "no-such-entry"):
        want = {k: v for k, v in whole.items() if k == name or k.startswith(name + "/")}
        assert file_checksums(run, known, under=name) == want
    assert len(file_checksums(run, known, under=NMF)) > 5


def test_a_reestimate_does_not_hash_its_linked_parts_again(
    small_cef: Path, tmp_path: Path, self_check: list, monkeypatch
) -> None:
    """``run --from-measurements``: the NMF parts hard-linked from the measured run were
    read by its check (as tasks on the run's executor); the self-check's checksums take
    those digests."""
    from censusdp.release.validate import run as run_mod

    _release(small_cef, tmp_path / "run")
    driver_hashed: list[str] = []
    real_sha = _entries.sha256_of
    monkeypatch.setattr(
        _entries, "sha256_of", lambda p: driver_hashed.append(str(p)) or real_sha(p)
    )
    pipeline.reestimate(tmp_path / "run", tmp_path / "again", ReleaseOptions(), Execution())
    report = self_check[-1]
    assert report.ok and report.checks["checksums"]["ok"]
    assert report.checks["nmf_persons"]["detail"].endswith(run_mod.CHECKED_IN_SOURCE)
    assert not [p for p in driver_hashed if "again" in p and NMF in p and p.endswith(".parquet")]
    # a part that is a copy, not a link, is read again
    driver_hashed.clear()
    monkeypatch.setattr(pipeline, "link_or_copy", lambda a, b: shutil.copy2(a, b))
    pipeline.reestimate(tmp_path / "run", tmp_path / "copied", ReleaseOptions(), Execution())
    assert self_check[-1].ok
    assert [p for p in driver_hashed if "copied" in p and NMF in p and p.endswith(".parquet")]
