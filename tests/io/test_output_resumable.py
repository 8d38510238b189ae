"""The output guard keeps resumable work: never swept, adopted by a resume, discarded
only by --overwrite (censusdp.io.staging.Staging)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from censusdp.errors import ConfigError
from censusdp.io.staging import RESUMABLE_MARKER, Staging


def _exited_process() -> int:
    """The PID of a process that has exited (as a killed writer's has)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _interrupted(parent: Path, name: str, *, resumable: bool, age: float = 0) -> Path:
    """A staging directory as a killed writer leaves it: the directory, and beside it
    the owner record that names the output and the (now dead) process."""
    pid = _exited_process()
    d = parent / f".{name}.partial-{pid}"
    (parent / f".{name}.owner-{pid}").write_text(
        json.dumps(
            {
                "created_by": "censusdp",
                "out": str((parent / name).resolve()),
                "pid": pid,
                "start": None,
                "host": socket.gethostname(),
            }
        )
    )
    d.mkdir()
    (d / "noisy_measurements.parquet").write_bytes(b"measured once " + str(pid).encode())
    if resumable:
        marker = d / RESUMABLE_MARKER
        marker.write_text(f"{pid}\n")
        t = time.time() - age
        os.utime(marker, (t, t))
    return d


def test_plain_debris_is_swept_but_resumable_work_refuses(tmp_path: Path) -> None:
    dead = _interrupted(tmp_path, "run", resumable=False)
    kept = _interrupted(tmp_path, "run", resumable=True)
    with pytest.raises(ConfigError) as err:
        Staging(tmp_path / "run", overwrite=False)
    msg = str(err.value)
    assert "--resume" in msg and "--overwrite" in msg and kept.name in msg
    assert "\n" not in msg
    assert not dead.exists()  # unmarked debris of a dead writer is still swept
    pid = kept.name.rsplit("-", 1)[1]
    assert (kept / "noisy_measurements.parquet").read_bytes() == f"measured once {pid}".encode()
    assert not (tmp_path / ".run.lock").exists()  # the refusal released the lock
    # and a second refusal finds it again
    with pytest.raises(ConfigError):
        Staging(tmp_path / "run", overwrite=False)
    assert kept.exists()


def test_resume_adopts_the_newest_without_rewriting_it(tmp_path: Path) -> None:
    older = _interrupted(tmp_path, "run", resumable=True, age=100)
    newer = _interrupted(tmp_path, "run", resumable=True, age=1)
    stat = (newer / "noisy_measurements.parquet").stat()
    st = Staging(tmp_path / "run", overwrite=False, resume=True)
    try:
        assert st.resumed and st.resumed_from == newer.name
        assert st.path.name == f".run.partial-{os.getpid()}"
        moved = st.path / "noisy_measurements.parquet"
        assert moved.read_bytes() == f"measured once {newer.name.rsplit('-', 1)[1]}".encode()
        again = moved.stat()
        assert (again.st_ino, again.st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)
        assert not older.exists() and not newer.exists()
    finally:
        st.abort()
    assert not st.path.exists()


def test_resume_with_nothing_to_resume_starts_afresh(tmp_path: Path) -> None:
    dead = _interrupted(tmp_path, "run", resumable=False)
    st = Staging(tmp_path / "run", overwrite=False, resume=True)
    assert not st.resumed and st.resumed_from is None
    assert st.path.is_dir() and not any(st.path.iterdir())
    assert not dead.exists()
    st.commit()
    assert (tmp_path / "run").is_dir()


def test_overwrite_discards_resumable_work(tmp_path: Path) -> None:
    kept = _interrupted(tmp_path, "run", resumable=True)
    st = Staging(tmp_path / "run", overwrite=True)
    assert not st.resumed and not kept.exists()
    st.abort()


def test_abort_keeps_marked_work_only_when_asked(tmp_path: Path) -> None:
    st = Staging(tmp_path / "run", overwrite=False)
    st.abort(keep_resumable=True)  # not marked: removed anyway
    assert not st.path.exists()
    st = Staging(tmp_path / "run", overwrite=False)
    st.mark_resumable()
    st.abort(keep_resumable=True)
    assert (st.path / RESUMABLE_MARKER).is_file()
    st2 = Staging(tmp_path / "run", overwrite=False, resume=True)
    assert st2.resumed
    st2.unmark_resumable()
    assert not (st2.path / RESUMABLE_MARKER).exists()
    st2.commit()
    assert not (tmp_path / "run" / RESUMABLE_MARKER).exists()
    assert [p.name for p in tmp_path.iterdir()] == ["run"]
