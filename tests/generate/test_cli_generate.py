"""``censusdp generate`` on the command line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from censusdp.cli import main


def test_generate_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["generate", "--state", "WY", "--seed", "4", "--out", str(tmp_path), "--scale", "0.05"]
    rc = main([*argv, "-v"])
    assert rc == 0
    out, err = capsys.readouterr()
    assert "Synthetic 2010 census for Wyoming (WY, FIPS 56), seed 4, scale 0.05" in out
    assert "in group quarters" in out and "blocks" in out
    # progress on stderr: the county parts done (and, with -v, a debug line per county)
    assert re.search(r"^generating Wyoming: \d+ county parts in \d+:\d\d$", err, re.M)
    assert re.search(r"^debug: \[1/\d+\] county 56\d\d\d: ", err, re.M)
    assert (tmp_path / "persons.parquet").exists() and (tmp_path / "manifest.json").exists()


def test_generate_command_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["generate", "--state", "ZZ", "--seed", "1", "--out", str(tmp_path)]) == 2
    assert "state 'ZZ' is not a supported" in capsys.readouterr().err
    assert (
        main(["generate", "--state", "VT", "--seed", "1", "--out", str(tmp_path), "--scale", "2"])
        == 2
    )
    assert not (tmp_path / "persons.parquet").exists()
