"""Every command of the README's worked example, as written, in a fresh venv.

The commands are read from README.md (the first code block under "A worked example"),
not copied here, so the README cannot drift from what works. They run in an empty
directory with a fresh `.venv/` made as the set-up makes it (the dependencies come from
the interpreter running the tests through a `.pth` file, so no network is needed for
them; censusdp itself is installed with `pip install --no-deps -e .`), activation
included, and the test fails on the first command that exits non-zero.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def worked_example(readme: str) -> list[str]:
    """The command lines of the first code block under the heading "A worked example"."""
    section = readme.split("## A worked example", 1)
    if len(section) < 2:
        raise AssertionError("README.md has no section 'A worked example'")
    block = re.search(r"```[^\n]*\n(.*?)```", section[1], re.S)
    if block is None:
        raise AssertionError("the worked example has no code block")
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_worked_example_is_read_from_the_readme() -> None:
    lines = worked_example((REPO / "README.md").read_text(encoding="utf-8"))
    assert lines[0].startswith(". .venv/bin/activate")  # activation included
    assert all(line.startswith("censusdp ") for line in lines[1:])
    commands = {line.split()[1] for line in lines[1:]}
    assert {"generate", "run", "validate", "evaluate", "infer"} <= commands
    assert worked_example("## A worked example\n\nText\n```\na\n\nb\n```\n```\nc\n```") == [
        "a",
        "b",
    ]


def fresh_venv(where: Path) -> None:
    """``where/.venv``: a new venv that sees this interpreter's packages and has censusdp
    installed from this checkout (editable, no dependencies fetched)."""
    venv = where / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "_parent_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
        + ["-e", str(REPO)],
        check=True,
        cwd=where,
    )


@pytest.mark.slow
def test_every_command_of_the_worked_example_works(tmp_path: Path) -> None:
    lines = worked_example((REPO / "README.md").read_text(encoding="utf-8"))
    fresh_venv(tmp_path)
    script = "\n".join(
        [
            "set -euo pipefail",
            "trap 'echo \"README command failed: $BASH_COMMAND\" >&2' ERR",
            *lines,
        ]
    )
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = "/usr/local/bin:/usr/bin:/bin"  # censusdp only from the activated venv
    proc = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    failed = [line for line in proc.stderr.splitlines() if "README command failed" in line]
    assert proc.returncode == 0, (failed, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "nothing to resume" in proc.stdout  # the --resume line on a finished release
    # every output is named as the README names it, never where it lies on this machine
    assert str(tmp_path) not in proc.stdout + proc.stderr
    assert (tmp_path / "vt-run" / "signature.json").is_file()
    assert (tmp_path / "report.html").is_file() and (tmp_path / "vt-again").is_dir()
