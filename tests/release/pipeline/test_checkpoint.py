"""Checkpoints and resume (censusdp.release.checkpoint), in-process.

An interruption is simulated as a SIGKILL leaves a run: the step after a chosen
checkpoint raises, and nothing is cleaned up (the staging directory stays, the lock is
released as a dead process releases it). tests/faults/test_resume_after_kill.py kills a
real ``censusdp run`` subprocess.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import person_histogram
from censusdp.data.invariants import Bounds, compute_invariants, level_bounds
from censusdp.data.schema import get_schema
from censusdp.errors import InputError, InternalError, OutputError, ResumeError
from censusdp.io import nmf_cache
from censusdp.io.budget_files import load_preset
from censusdp.io.staging import RESUMABLE_MARKER, Staging
from censusdp.privacy.randomness import GENERATOR, RandomSource
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release import measure_runs, pipeline
from censusdp.release.checkpoint import JOURNAL, Checkpoint
from censusdp.release.measure import measure
from censusdp.release.options import Execution, ReleaseOptions
from censusdp.release.topdown.driver import run_topdown
from synth import block_codes, make_cef, write_cef

PERSONS, UNITS = load_preset("pl94-2020"), load_preset("pl94-2020-units")
NMF = ("noisy_measurements.parquet", "noisy_measurements_units.parquet")


class _Killed(BaseException):
    """The simulated SIGKILL (not an Exception: nothing may catch it on the way out)."""


@pytest.fixture(scope="module")
def state(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("checkpoint")
    persons, units = make_cef(np.random.default_rng(8), block_codes(2, 2, 2, 3), gq_rate=0.4)
    write_cef(base / "cef", persons, units)
    other_p, other_u = make_cef(np.random.default_rng(9), block_codes(2, 2, 2, 3), gq_rate=0.4)
    write_cef(base / "other_cef", other_p, other_u)
    _run(base / "cef", base / "reference", seed=7)
    return base


def _run(
    cef: Path,
    out: Path,
    *,
    budget=PERSONS,
    units_budget=UNITS,
    resume=False,
    overwrite=False,
    executor="auto",
    workers=1,
    **options,
):
    return pipeline.run_release(
        cef,
        out,
        ReleaseBudget(budget, units_budget),
        ReleaseOptions.from_mapping(options),
        Execution(executor, workers),
        resume=resume,
        overwrite=overwrite,
    )


def _files(run: Path) -> dict[str, str]:
    return {
        str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    }


def _tree(run: Path, name: str, what=lambda p: hashlib.sha256(p.read_bytes()).hexdigest()):
    """``what`` of every file of the NMF ``name`` (a directory of parts), by relative path."""
    return {str(p.relative_to(run)): what(p) for p in sorted((run / name).rglob("*"))}


def _stat(p: Path) -> tuple[int, int]:
    st = p.stat()
    return st.st_ino, st.st_mtime_ns


def _interrupt_after(monkeypatch, stage: str) -> None:
    """Make the next run die right after it records ``stage``, leaving its directory."""
    real = Checkpoint.record

    def record(self, name, rec):
        real(self, name, rec)
        if name == stage:
            raise _Killed(stage)

    monkeypatch.setattr(Checkpoint, "record", record)
    monkeypatch.setattr(Staging, "abort", lambda self, **kw: self._unlock())


def _interrupted(monkeypatch, cef: Path, out: Path, stage: str, **kw) -> Path:
    with monkeypatch.context() as m:
        _interrupt_after(m, stage)
        with pytest.raises(_Killed):
            _run(cef, out, **kw)
    (partial,) = out.parent.glob(f".{out.name}.partial-*")
    assert (partial / RESUMABLE_MARKER).is_file() and not out.exists()
    return partial


def _count_measurements(monkeypatch) -> list[str]:
    measured: list[str] = []
    real = measure_runs._measure_to_parts

    def spy(job, *args, **kwargs):
        measured.append(job.directory.name)
        return real(job, *args, **kwargs)

    monkeypatch.setattr(measure_runs, "_measure_to_parts", spy)
    return measured


@pytest.mark.parametrize(
    "stage",
    [
        "measure/persons",
        pytest.param("measure/units", marks=pytest.mark.slow),
        "estimate/persons/2",
        pytest.param("estimate/units/5", marks=pytest.mark.slow),
    ],
)
def test_resumed_release_is_byte_identical_and_measures_nothing_twice(
    state: Path, tmp_path: Path, monkeypatch, stage: str
) -> None:
    out = tmp_path / "run"
    partial = _interrupted(monkeypatch, state / "cef", out, stage, seed=7)
    journal = json.loads((partial / JOURNAL).read_text())
    done = list(journal["stages"])
    assert done[-1] == stage
    kept = {
        name: _tree(partial, name, _stat)
        for run, name in zip(("persons", "units"), NMF, strict=True)
        if f"measure/{run}" in done
    }
    measured = _count_measurements(monkeypatch)
    manifest = _run(state / "cef", out, seed=7, resume=True)
    assert _files(out) == _files(state / "reference")
    assert manifest["resumed"]["reused"] == done
    # the recorded measurement files were neither measured again nor rewritten
    assert sorted(measured) == sorted(set(NMF) - set(kept))
    for name, before in kept.items():
        assert _tree(out, name, _stat) == before, name
    assert not (out / "checkpoint").exists() and not (out / RESUMABLE_MARKER).exists()
    assert "checkpoint/journal.json" not in manifest["files"]
    assert list(tmp_path.iterdir()) == [out]
    reference = json.loads((state / "reference" / "manifest.json").read_text())
    assert manifest["files"] == reference["files"]


@pytest.mark.parametrize("recorded", [1, 4])
def test_a_run_interrupted_between_parts_reuses_every_recorded_part(
    state: Path, tmp_path: Path, monkeypatch, recorded: int
) -> None:
    """Killed after ``recorded`` part files of the person NMF were recorded (the task of
    the next one may have written it unrecorded): the resume measures only the parts not
    recorded, leaves the recorded ones untouched, and gives the reference's bytes."""
    out = tmp_path / "run"
    real = Checkpoint.finish_part
    calls: list[str] = []

    def finish_part(self, run, rec):
        real(self, run, rec)
        calls.append(rec["path"])
        if len(calls) == recorded:
            raise _Killed(rec["path"])

    with monkeypatch.context() as m:
        m.setattr(Checkpoint, "finish_part", finish_part)
        m.setattr(Staging, "abort", lambda self, **kw: self._unlock())
        with pytest.raises(_Killed):
            _run(state / "cef", out, seed=7)
    (partial,) = tmp_path.glob(".run.partial-*")
    assert (partial / RESUMABLE_MARKER).is_file()
    before = {c: _stat(partial / c) for c in calls}
    ran: list[str] = []
    real_task = measure_runs.run_part_task

    def spy(part):
        ran.append(Path(part.path).name)
        return real_task(part)

    monkeypatch.setattr(measure_runs, "run_part_task", spy)
    # how estimation reads each part: checked (None), or proven by the SHA-256 its task
    # recorded in this process (the parts written after the resume only)
    read: dict[str, set] = {}
    real_read = nmf_cache._read_group

    def read_group(pf, span, *a):
        read.setdefault(f"{Path(span.file).parent.name}/{Path(span.file).name}", set()).add(
            span.sha256
        )
        return real_read(pf, span, *a)

    monkeypatch.setattr(nmf_cache, "_CACHE", nmf_cache._GroupCache(64 << 20, 8))
    monkeypatch.setattr(nmf_cache, "_read_group", read_group)
    manifest = _run(state / "cef", out, seed=7, resume=True)
    reused = set(calls) & set(read)  # part 0, the nation's, is not read by row group here
    assert len(reused) == recorded - 1 and all(read[c] == {None} for c in reused)
    assert all(None not in how for c, how in read.items() if c not in calls)
    assert _files(out) == _files(state / "reference")
    assert {c: _stat(out / c) for c in calls} == before
    persons = sorted(p.name for p in (out / NMF[0]).glob("part-*.parquet"))
    assert len(persons) > recorded
    assert not {Path(c).name for c in calls} & set(ran[: len(persons) - recorded])
    assert len(ran) == len(persons) - recorded + len(list((out / NMF[1]).glob("part-*")))
    assert manifest["resumed"]["parts_reused"] == {"persons": recorded}


def test_a_tampered_recorded_part_is_refused(state: Path, tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "run"
    real = Checkpoint.finish_part
    calls: list[str] = []

    def finish_part(self, run, rec):
        real(self, run, rec)
        calls.append(rec["path"])
        if len(calls) == 2:
            raise _Killed(rec["path"])

    with monkeypatch.context() as m:
        m.setattr(Checkpoint, "finish_part", finish_part)
        m.setattr(Staging, "abort", lambda self, **kw: self._unlock())
        with pytest.raises(_Killed):
            _run(state / "cef", out, seed=7)
    (partial,) = tmp_path.glob(".run.partial-*")
    part = partial / calls[1]
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF
    part.write_bytes(bytes(data))
    with pytest.raises(ResumeError, match=r"part-00001.parquet \(a recorded measurement part\)"):
        _run(state / "cef", out, seed=7, resume=True)
    assert list(tmp_path.glob(".run.partial-*"))  # the work is kept, not swept


def test_secure_resume_draws_no_new_noise_for_written_measurements(
    state: Path, tmp_path: Path, monkeypatch
) -> None:
    out = tmp_path / "secure"
    partial = _interrupted(monkeypatch, state / "cef", out, "estimate/persons/1", seed=None)
    before = {n: _tree(partial, n) for n in NMF}

    def no_noise(*args, **kwargs):
        raise AssertionError("a resumed run drew noise")

    monkeypatch.setattr(RandomSource, "secure", no_noise)
    monkeypatch.setattr(measure_runs, "_measure_to_parts", no_noise)
    manifest = _run(state / "cef", out, seed=None, resume=True)
    assert manifest["validation"]["ok"] and manifest["randomness"]["mode"] == "secure"
    assert {n: _tree(out, n) for n in NMF} == before
    # the secure noise differs from the seeded reference: the key was not re-derived
    assert _tree(out, NMF[0]) != _tree(state / "reference", NMF[0])


CHANGES = [
    ({"seed": 8}, "seed"),
    ({"seed": None}, "randomness"),
    ({"budget": PERSONS.scaled(epsilon=PERSONS.epsilon() / 2)}, "person budget"),
    ({"units_budget": None}, "housing-unit budget"),
    ({"postprocess": "bottomup"}, "--postprocess"),
    ({"units": "independent"}, "--units"),
    ({"method": "admm"}, "--method"),
    ({"cef": "other_cef"}, "input files"),
]


@pytest.mark.slow
def test_a_different_resume_is_refused_and_the_work_kept(
    state: Path, tmp_path: Path, monkeypatch
) -> None:
    out = tmp_path / "run"
    partial = _interrupted(monkeypatch, state / "cef", out, "estimate/persons/3", seed=7)
    nmf = _tree(partial, NMF[0])
    for change, words in CHANGES:
        kw = {"seed": 7, **change}
        cef = state / kw.pop("cef", "cef")
        with pytest.raises(ResumeError) as err:
            _run(cef, out, resume=True, **kw)
        assert words in str(err.value) and "\n" not in str(err.value), (change, err.value)
        (kept,) = tmp_path.glob(".run.partial-*")
        assert (kept / RESUMABLE_MARKER).is_file()
        assert _tree(kept, NMF[0]) == nmf
        assert not (tmp_path / ".run.lock").exists()
    # the matching command still resumes it (the executor may differ)
    _run(state / "cef", out, seed=7, resume=True, executor="pool", workers=2)
    assert _files(out) == _files(state / "reference")


def _failing_after(monkeypatch, stage: str, error: Exception) -> None:
    """Make the next run raise ``error`` right after it records ``stage`` (the run's own
    clean-up runs, unlike :func:`_interrupt_after`)."""
    real = Checkpoint.record

    def record(self, name, rec):
        real(self, name, rec)
        if name == stage:
            raise error

    monkeypatch.setattr(Checkpoint, "record", record)


@pytest.mark.parametrize(
    "error",
    [
        InternalError("OR-Tools min-cost flow returned status BAD_CAPACITY_RANGE"),
        pytest.param(OutputError("no space left on device"), marks=pytest.mark.slow),
        pytest.param(MemoryError(), marks=pytest.mark.slow),
    ],
    ids=["internal", "disk", "memory"],
)
def test_a_failure_not_of_the_input_keeps_the_measurements_for_resume(
    state: Path, tmp_path: Path, monkeypatch, error: Exception
) -> None:
    """A bug fixed or disk freed after a run failed does not cost its measurements
    again: the checkpointed steps are kept, the error says so, and ``--resume`` gives
    the release an uninterrupted run gives."""
    out = tmp_path / "run"
    with monkeypatch.context() as m:
        _failing_after(m, "estimate/persons/2", error)
        with pytest.raises(type(error)) as raised:
            _run(state / "cef", out, seed=7)
    (partial,) = tmp_path.glob(".run.partial-*")
    assert (partial / RESUMABLE_MARKER).is_file() and not out.exists()
    assert not (tmp_path / ".run.lock").exists()
    (note,) = raised.value.__notes__
    assert partial.name in note and "--resume" in note and "--overwrite" in note
    measured = _count_measurements(monkeypatch)
    _run(state / "cef", out, seed=7, resume=True)
    assert measured == [] and _files(out) == _files(state / "reference")


def test_a_failure_of_the_input_removes_the_unfinished_run(
    state: Path, tmp_path: Path, monkeypatch
) -> None:
    out = tmp_path / "run"
    with monkeypatch.context() as m:
        _failing_after(m, "measure/persons", InputError("persons.parquet: age -1"))
        with pytest.raises(InputError) as raised:
            _run(state / "cef", out, seed=7)
    assert list(tmp_path.iterdir()) == [] and not getattr(raised.value, "__notes__", [])


def test_a_run_measured_with_other_noise_streams_is_not_resumed(
    state: Path, tmp_path: Path, monkeypatch
) -> None:
    """Measurements written by a version with another stream construction (the same seed
    would give other noise now) are not mixed with new ones: the resume is refused."""
    out = tmp_path / "run"
    partial = _interrupted(monkeypatch, state / "cef", out, "measure/persons", seed=7)
    journal = json.loads((partial / JOURNAL).read_text())
    assert journal["fingerprint"]["generator"] == GENERATOR
    journal["fingerprint"]["generator"] = "AES-256-CTR keystream; child keys by HMAC-SHA256"
    (partial / JOURNAL).write_text(json.dumps(journal))
    with pytest.raises(ResumeError, match="differs from this command in its noise generator"):
        _run(state / "cef", out, seed=7, resume=True)


def test_a_tampered_checkpoint_is_refused(state: Path, tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "run"
    partial = _interrupted(monkeypatch, state / "cef", out, "estimate/persons/2", seed=7)
    level = partial / "checkpoint" / "estimate-persons-2.npz"
    data = bytearray(level.read_bytes())
    data[-1] ^= 0xFF
    level.write_bytes(bytes(data))
    with pytest.raises(ResumeError, match="estimate/persons/2.*checksum"):
        _run(state / "cef", out, seed=7, resume=True)
    assert partial.parent.glob(".run.partial-*")


def test_a_plain_rerun_refuses_and_overwrite_discards(
    state: Path, tmp_path: Path, monkeypatch
) -> None:
    out = tmp_path / "run"
    _interrupted(monkeypatch, state / "cef", out, "measure/units", seed=7)
    with pytest.raises(Exception, match="--resume"):
        _run(state / "cef", out, seed=7)
    measured = _count_measurements(monkeypatch)
    manifest = _run(state / "cef", out, seed=7, overwrite=True)
    assert "resumed" not in manifest and sorted(measured) == sorted(NMF)
    assert _files(out) == _files(state / "reference")


# -- the driver hook, on many random states ---------------------------------------------


class _Store:
    """An in-memory level store with the driver's checkpoint protocol."""

    def __init__(self, levels: dict[int, tuple] | None = None) -> None:
        self.levels = dict(levels or {})
        self.loaded: list[int] = []

    def load(self, level):
        if level in self.levels:
            self.loaded.append(level)
            hist, summary, failsafe = self.levels[level]
            return hist, {**summary, "resumed": True}, failsafe
        return None

    def save(self, level, hist, summary, failsafe):
        assert level not in self.levels
        self.levels[level] = (hist.copy(), dict(summary), list(failsafe))


class _CountingExecutor:
    name = "counting"

    def __init__(self) -> None:
        self.levels: list[int] = []

    def map(self, fn, tasks, *, ahead=None):
        for batch in tasks:  # TopDown sends its tasks in batches
            self.levels.extend(t.level for t in batch)
            yield fn(batch)


@settings(max_examples=6)
@given(
    seed=st.integers(0, 2**31 - 1),
    fanout=st.tuples(*[st.integers(1, 2)] * 3),
    last=st.integers(0, 5),
)
def test_estimation_resumed_from_any_level_is_the_same(seed: int, fanout, last: int) -> None:
    rng = np.random.default_rng(seed)
    persons, units = make_cef(rng, block_codes(*fanout, blocks=3), gq_rate=0.3)
    h = Hierarchy.from_blocks(np.asarray(units["geocode"]))
    schema = get_schema("pl94")
    levels = h.aggregate(person_histogram(persons, h, schema))
    plan = [(m.geolevel, m.query, m.mechanism) for m in PERSONS.measurements()]
    ms = measure(levels, h, schema, plan, RandomSource.seeded(seed))
    inv = compute_invariants(persons, units, h)
    bounds = [Bounds(*b) for b in level_bounds(inv, h)]
    full = _Store()
    ref = run_topdown(ms, h, bounds, checkpoint=full)
    assert sorted(full.levels) == list(range(h.n_levels))
    for i, hist in enumerate(ref.histograms):
        assert (full.levels[i][0] != hist).nnz == 0
    k = last
    store = _Store({i: full.levels[i] for i in range(k + 1)})
    ex = _CountingExecutor()
    got = run_topdown(ms, h, bounds, checkpoint=store, executor=ex)
    assert store.loaded == list(range(k + 1))
    # no task of a loaded level ran (tasks of level l carry l - 1; the root -1)
    assert min(ex.levels, default=h.n_levels) >= k
    for a, b in zip(got.histograms, ref.histograms, strict=True):
        assert isinstance(a, sp.csr_matrix) and (a != b).nnz == 0
    assert [s.get("resumed", False) for s in got.levels] == [i <= k for i in range(h.n_levels)]


def test_resume_needs_input_not_from_measurements(state: Path, tmp_path: Path, capsys) -> None:
    from censusdp.cli import main

    code = main(
        ["run", "--from-measurements", str(state / "reference"), "--out", str(tmp_path / "x")]
        + ["--resume", "--quiet"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--resume" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "x").exists()
