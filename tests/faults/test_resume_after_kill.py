"""A ``censusdp run`` killed with SIGKILL after a geolevel finished, then resumed.

The resumed release is byte-identical to an uninterrupted one with the same seed, its
noisy measurement files are the very files the killed run wrote (same inode, same
modification time: never rewritten, never measured again), and a rerun without
``--resume`` or with another budget is refused in one line without losing the work.
Runs the command as a user would, in subprocesses (a few runs: ``slow``; the same
logic is covered in-process by tests/release/pipeline/test_checkpoint.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-m", "censusdp"]
NMF = ("noisy_measurements.parquet", "noisy_measurements_units.parquet")


def _cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *map(str, args)], capture_output=True, text=True, timeout=600, check=False
    )


def _files(run: Path) -> dict[str, str]:
    return {
        str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    }


def _kill_after(argv: list[str], parent: Path, name: str, stage: str) -> Path:
    """Start ``argv``, SIGKILL it as soon as its journal records ``stage``; return the
    staging directory it left."""
    p = subprocess.Popen(argv, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    try:
        while time.time() < deadline and p.poll() is None:
            for journal in parent.glob(f".{name}.partial-*/checkpoint/journal.json"):
                try:
                    stages = json.loads(journal.read_text())["stages"]
                except (OSError, ValueError, KeyError):
                    continue  # being replaced at this moment
                if stage in stages:
                    os.kill(p.pid, signal.SIGKILL)
                    p.wait(timeout=60)
                    return journal.parent.parent
            time.sleep(0.005)
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=60)
    raise AssertionError(f"the run ended ({p.returncode}) before recording {stage}")


def test_a_killed_run_resumes_to_the_same_release(tmp_path: Path) -> None:
    gen = _cli(
        "generate", "--state", "DC", "--seed", "4", "--scale", "0.02", "--out", tmp_path / "cef"
    )
    assert gen.returncode == 0, gen.stderr
    cef, runs = tmp_path / "cef", tmp_path / "runs"
    runs.mkdir()
    ref = _cli("run", "--input", cef, "--out", tmp_path / "reference", "--seed", "5", "--quiet")
    assert ref.returncode == 0, ref.stderr
    out = runs / "release"
    argv = [*CLI, "run", "--input", str(cef), "--out", str(out), "--seed", "5", "--quiet"]
    partial = _kill_after(argv, runs, "release", "estimate/persons/3")
    assert not out.exists()
    # every part file of both NMFs (directories of parts)
    written = {str(p.relative_to(partial)): p.stat() for n in NMF for p in (partial / n).rglob("*")}
    assert len(written) > 4

    plain = _cli(*argv[3:])
    assert plain.returncode == 2 and "--resume" in plain.stderr, plain.stderr
    assert len(plain.stderr.strip().splitlines()) == 1 and "Traceback" not in plain.stderr
    other = _cli(*argv[3:], "--resume", "--epsilon", "3")
    assert other.returncode == 2 and "person budget" in other.stderr, other.stderr
    assert len(other.stderr.strip().splitlines()) == 1

    resumed = _cli(*argv[3:], "--resume")
    assert resumed.returncode == 0, resumed.stderr
    assert _files(out) == _files(tmp_path / "reference")
    for name, before in written.items():
        after = (out / name).stat()
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns), name
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["resumed"]["reused"][:3] == [
        "measure/persons",
        "measure/units",
        "estimate/persons/0",
    ]
    assert "estimate/persons/3" in manifest["resumed"]["reused"]
    assert sorted(p.name for p in runs.iterdir()) == ["release"]  # no debris, no lock
    assert _cli("validate", out, "--quiet").returncode == 0


def _parts_recorded(staging: Path) -> list[str]:
    log = staging / "checkpoint" / "parts.jsonl"
    try:
        lines = log.read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line)["path"])
        except (ValueError, KeyError):
            continue  # being appended at this moment
    return out


@pytest.mark.parametrize("workers", [1, 2])
def test_sigterm_between_parts_resumes_to_the_same_bytes(tmp_path: Path, workers: int) -> None:
    """SIGTERM once a few NMF part files are recorded: exit 130 with one line naming
    --resume, the finished parts kept; the resume (on the other executor) measures only
    the missing parts and writes the bytes of an uninterrupted run."""
    gen = _cli(
        "generate", "--state", "DC", "--seed", "4", "--scale", "0.05", "--out", tmp_path / "cef"
    )
    assert gen.returncode == 0, gen.stderr
    cef, runs = tmp_path / "cef", tmp_path / "runs"
    runs.mkdir()
    ref = _cli("run", "--input", cef, "--out", tmp_path / "reference", "--seed", "6", "--quiet")
    assert ref.returncode == 0, ref.stderr
    out = runs / "release"
    argv = [*CLI, "run", "--input", str(cef), "--out", str(out), "--seed", "6", "--quiet"]
    p = subprocess.Popen(
        [*argv, "--workers", str(workers)],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline, recorded = time.time() + 300, []
    while time.time() < deadline and p.poll() is None:
        stagings = list(runs.glob(".release.partial-*"))
        recorded = _parts_recorded(stagings[0]) if stagings else []
        if len(recorded) >= 3:
            os.kill(p.pid, signal.SIGTERM)
            break
        time.sleep(0.005)
    err = p.communicate(timeout=120)[1]
    assert len(recorded) >= 3, f"the run ended ({p.returncode}) before recording 3 parts"
    assert p.returncode == 130, err
    assert len(err.strip().splitlines()) == 1 and "--resume" in err, err
    (partial,) = runs.glob(".release.partial-*")
    kept = _parts_recorded(partial)
    assert kept[: len(recorded)] == recorded
    stats = {rel: (partial / rel).stat() for rel in kept}

    other = "2" if workers == 1 else "1"
    resumed = _cli(*argv[3:], "--resume", "--workers", other)
    assert resumed.returncode == 0, resumed.stderr
    assert _files(out) == _files(tmp_path / "reference")
    for rel, before in stats.items():
        after = (out / rel).stat()
        assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns), rel
    manifest = json.loads((out / "manifest.json").read_text())
    reused = manifest["resumed"]["parts_reused"]
    assert sum(reused.values()) == len(kept)
    assert sorted(p.name for p in runs.iterdir()) == ["release"]
