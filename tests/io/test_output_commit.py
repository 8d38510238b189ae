"""The output guard's commit and sweep (censusdp.io.staging.Staging): atomic, and never
at the expense of what another process or the user put beside the output."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import censusdp.io.staging as staging
from censusdp.errors import ConfigError
from censusdp.io.command_inputs import guarded_command
from censusdp.io.output_files import output_file
from censusdp.io.output_rules import foreign_entries, write_output_manifest
from censusdp.io.staging import Staging, staged_output


def _finished(staging: Staging, text: str) -> None:
    (staging.path / "result.txt").write_text(text)
    write_output_manifest(staging.path, "test", ["result.txt"])


def test_new_output_appears_whole(tmp_path: Path) -> None:
    with staged_output(tmp_path / "out", False, command="test") as st:
        (st.path / "a.txt").write_text("a")
        (st.path / "sub").mkdir()
        (st.path / "sub" / "b.txt").write_text("b")
    man = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert man["created_by"] == "censusdp" and man["files"] == ["a.txt", "sub/b.txt"]
    assert foreign_entries(tmp_path / "out") == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_a_directory_that_appears_during_the_run_is_never_replaced(tmp_path: Path) -> None:
    st = Staging(tmp_path / "out", overwrite=False)
    _finished(st, "mine")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "theirs.txt").write_text("theirs")
    with pytest.raises(ConfigError, match="appeared during the run"):
        st.commit()
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["theirs.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging, no lock


def test_even_with_overwrite_a_foreign_directory_that_appeared_is_kept(tmp_path: Path) -> None:
    st = Staging(tmp_path / "out", overwrite=True)
    _finished(st, "mine")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "theirs.txt").write_text("theirs")
    with pytest.raises(ConfigError, match="not a censusdp output"):
        st.commit()
    assert (tmp_path / "out" / "theirs.txt").read_text() == "theirs"


def test_overwrite_is_one_exchange_and_checks_what_it_replaced(tmp_path: Path) -> None:
    with staged_output(tmp_path / "out", False, command="test") as st:
        (st.path / "result.txt").write_text("old")
    st = Staging(tmp_path / "out", overwrite=True)
    _finished(st, "new")
    # the user drops a file into the old output during the run: it must survive
    (tmp_path / "out" / "NOTES.txt").write_text("mine")
    with pytest.raises(ConfigError, match="NOTES.txt"):
        st.commit()
    assert (tmp_path / "out" / "NOTES.txt").read_text() == "mine"
    assert (tmp_path / "out" / "result.txt").read_text() == "old"
    (tmp_path / "out" / "NOTES.txt").unlink()
    st = Staging(tmp_path / "out", overwrite=True)
    _finished(st, "new")
    st.commit()
    assert (tmp_path / "out" / "result.txt").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_journal_fallback_is_completed_by_the_next_writer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without renameat2 an overwrite is two renames; a writer killed between them
    leaves a journal from which the next writer finishes the commit."""
    with staged_output(tmp_path / "out", False, command="test") as st:
        (st.path / "result.txt").write_text("old")
    monkeypatch.setattr(staging, "_renameat2", None)
    st = Staging(tmp_path / "out", overwrite=True)
    _finished(st, "new")
    real = os.rename
    calls = []

    def dies_after_first(src: object, dst: object) -> None:
        calls.append((src, dst))
        real(src, dst)
        if len(calls) == 1:
            raise KeyboardInterrupt("killed between the renames")

    monkeypatch.setattr(staging.os, "rename", dies_after_first)
    with pytest.raises(KeyboardInterrupt):
        st._commit()  # noqa: SLF001 - a process killed inside its commit
    monkeypatch.setattr(staging.os, "rename", real)
    assert not (tmp_path / "out").exists()  # neither output in place: the journal says why
    journal = next(tmp_path.glob(".out.commit-*"))
    record = json.loads(journal.read_text())
    record["pid"] = _exited_process()  # the writer is dead
    journal.write_text(json.dumps(record))
    st._unlock()  # noqa: SLF001 - its lock died with it
    # the next writer finishes the commit under the lock, then finds the output there
    with pytest.raises(ConfigError, match="exists and is not empty"):
        Staging(tmp_path / "out", overwrite=False)
    assert (tmp_path / "out" / "result.txt").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def _exited_process() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _owner(parent: Path, out: str, pid: int) -> None:
    (parent / f".{out}.owner-{pid}").write_text(
        json.dumps(
            {
                "created_by": "censusdp",
                "out": str((parent / out).resolve()),
                "pid": pid,
                "start": None,
                "host": socket.gethostname(),
            }
        )
    )


def test_sweep_needs_proof_of_ownership_and_death(tmp_path: Path) -> None:
    dead = _exited_process()
    # a user's directories whose names fit the staging patterns
    for name in (f".run.partial-{dead}", ".run.old-backup", ".run.partial-mine"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "work.txt").write_text("mine")
    # the staging of another output whose name starts like this one's pattern
    other = tmp_path / f".run.partial-1.partial-{dead}"
    other.mkdir()
    _owner(tmp_path, "run.partial-1", dead)
    # a live process's staging of this output, with a record naming it
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / f".run.partial-{live.pid}").mkdir()
        _owner(tmp_path, "run", live.pid)
        # a dead writer's staging with a record: the only one to go
        gone = _exited_process()
        (tmp_path / f".run.partial-{gone}").mkdir()
        _owner(tmp_path, "run", gone)
        st = Staging(tmp_path / "run", overwrite=False)
        st.abort()
        names = {p.name for p in tmp_path.iterdir()}
        assert f".run.partial-{gone}" not in names and f".run.owner-{gone}" not in names
        for kept in (
            f".run.partial-{dead}",
            ".run.old-backup",
            ".run.partial-mine",
            other.name,
            f".run.partial-{live.pid}",
        ):
            assert kept in names, kept
    finally:
        live.kill()
        live.wait()


def test_an_output_name_with_pattern_characters(tmp_path: Path) -> None:
    dead = _exited_process()
    (tmp_path / f".r[un].partial-{dead}").mkdir()
    (tmp_path / f".r[un].partial-{dead}" / "x").write_text("x")
    (tmp_path / f".ru.partial-{dead}").mkdir()
    _owner(tmp_path, "ru", dead)
    with staged_output(tmp_path / "r[un]", False, command="test") as st:
        (st.path / "a").write_text("a")
    assert (tmp_path / f".ru.partial-{dead}").is_dir()  # another output's: not ours to sweep
    assert (tmp_path / f".r[un].partial-{dead}" / "x").read_text() == "x"  # no record: kept


def test_output_file_never_replaces_without_overwrite(tmp_path: Path) -> None:
    target = tmp_path / "r.json"
    with pytest.raises(ConfigError, match="exists|appeared"):
        with output_file(target, overwrite=False) as tmp:
            tmp.write_text("mine")
            target.write_text("theirs")  # another process, while we write
    assert target.read_text() == "theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no temporary left


@pytest.mark.parametrize("special", ["fifo", "dir"])
def test_output_file_is_never_a_special_file(tmp_path: Path, special: str) -> None:
    target = tmp_path / "t"
    if special == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    with pytest.raises(ConfigError, match="not a regular file|is a directory"):
        with output_file(target, overwrite=True) as tmp:
            tmp.write_text("x")


def test_writes_inside_an_input_are_refused_everywhere(tmp_path: Path) -> None:
    from censusdp.io.atomic import write_text

    inp = tmp_path / "input"
    inp.mkdir()
    with guarded_command([inp]), pytest.raises(ConfigError, match="inside the input"):
        write_text("x", inp / "new.txt")
    assert list(inp.iterdir()) == []
