"""What every fault case shares: the command run as a user runs it, and the proof that
nothing changed (a digest of every entry) or that it failed in one line."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "censusdp"]


def cli(
    *args: object, timeout: float = 300, cwd: Path | None = None, env: dict | None = None
) -> subprocess.CompletedProcess:
    """``censusdp ARGS`` in a subprocess (``env`` added to this process's environment)."""
    return subprocess.run(
        [*CLI, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=cwd,
        env=None if env is None else {**os.environ, **env},
    )


def digest(path: Path) -> dict[str, str]:
    """Every entry under ``path`` (or the file ``path``) by relative name: a file's
    SHA-256, a link's target, ``special`` for a FIFO or device."""
    if not path.is_dir() or path.is_symlink():
        return {path.name: hashlib.sha256(path.read_bytes()).hexdigest()}
    out = {}
    for p in sorted(path.rglob("*")):
        rel = str(p.relative_to(path))
        if p.is_symlink():
            out[rel] = f"-> {os.readlink(p)}"
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
        elif not p.is_dir():
            out[rel] = "special"
    return out


def one_line_error(proc: subprocess.CompletedProcess, code: int, *words: str) -> None:
    """The command failed with exit ``code`` and one line on stderr holding ``words``."""
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    err = proc.stderr.strip()
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(err.splitlines()) == 1, err
    for w in words:
        assert w in err, (w, err)


def generated_release(base: Path, cef: str = "cef", release: str = "rel") -> Path:
    """``base/cef``: the small state every fault case starts from (2% of Wyoming's
    tracts, seed 3, the issue's reproduction), and ``base/release``: its seeded release
    (seed 7). Returns ``base``."""
    proc = cli(
        "generate", "--state", "WY", "--seed", "3", "--scale", "0.02", "--out", base / cef, "-q"
    )
    assert proc.returncode == 0, proc.stderr
    proc = cli("run", "--input", base / cef, "--out", base / release, "--seed", "7", "-q")
    assert proc.returncode == 0, proc.stderr
    return base
