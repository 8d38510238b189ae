"""Every long command reports its counted steps on stderr (tiny inputs, off a terminal).

Off a terminal a counted step prints plain lines; its summary ("STEP: N UNIT in M:SS") is
at INFO, or at DEBUG when the command prints its own summary of the step, so these
tests run with ``-v`` and look for the summary of every long step of each command.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from censusdp.cli import main
from synth import block_codes, make_cef, write_cef

DONE = r"(debug: )?{}: [\d,]+ {} in \d+:\d\d$"


@pytest.fixture(scope="module")
def cef(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("cli_progress")
    persons, units = make_cef(np.random.default_rng(3), block_codes(2, 1, 2, 3), gq_rate=0.3)
    write_cef(base / "cef", persons, units)
    return base / "cef"


@pytest.fixture(scope="module")
def release(cef: Path) -> Path:
    out = cef.parent / "run"
    assert main(["run", "--input", str(cef), "--out", str(out), "--seed", "1", "-q"]) == 0
    return out


def _stderr(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main([*argv, "-v"]) == 0
    return capsys.readouterr().err


def _expect(err: str, steps: list[tuple[str, str]]) -> None:
    for label, unit in steps:
        pattern = DONE.format(re.escape(label), re.escape(unit))
        assert re.search(pattern, err, re.M), f"no line {pattern!r} in:\n{err}"


def test_run_reports_every_step(cef: Path, tmp_path: Path, capsys) -> None:
    err = _stderr(capsys, ["run", "--input", str(cef), "--out", str(tmp_path / "r"), "--seed", "2"])
    _expect(
        err,
        [
            (f"reading the CEF in {cef}", "parts"),
            ("measuring persons (pl94)", "geounits"),
            ("measuring housing units (units)", "geounits"),
            ("estimating County", "tasks"),
            ("estimating Block", "tasks"),
            ("writing the MDF", "persons"),
            ("validating the release", "steps"),
        ],
    )
    assert "\nnoise: SEEDED with --seed 2: reproducible and NOT secure" in "\n" + err
    # the TopDown levels: one task per parent, all of them
    assert re.search(r"estimating Block: 4 tasks in", err)


def test_quiet_prints_only_warnings(cef: Path, tmp_path: Path, capsys) -> None:
    argv = ["run", "--input", str(cef), "--out", str(tmp_path / "r"), "--seed", "2", "-q"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.startswith("release written to ") and "SEEDED (not secure)" in out
    # a mistake stays one line under --quiet
    assert main([*argv[:4], str(tmp_path / "r"), "--seed", "2", "-q"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "exists" in err


def test_secure_run_says_so(cef: Path, tmp_path: Path, capsys) -> None:
    assert main(["run", "--input", str(cef), "--out", str(tmp_path / "r")]) == 0
    out, err = capsys.readouterr()
    assert "noise: secure randomness (operating-system entropy; not reproducible)" in err
    assert "secure randomness, validation passed" in out
    assert "debug:" not in err  # no -v: no debug lines
    assert "estimated Block" in err  # the default level shows the step summaries


def test_validate(release: Path, cef: Path, capsys) -> None:
    err = _stderr(capsys, ["validate", str(release), "--input", str(cef)])
    _expect(err, [("validating the release", "steps")])
    assert re.search(r"validating the release: 5 steps in", err)


def test_generate(tmp_path: Path, capsys) -> None:
    argv = ["generate", "--state", "VT", "--seed", "1", "--scale", "0.01", "--out", str(tmp_path)]
    _expect(_stderr(capsys, argv), [("generating Vermont", "county parts")])


def test_attack_dn(capsys) -> None:
    err = _stderr(capsys, ["attack", "dn", "--n", "20", "--trials", "3", "--multiples", "1"])
    _expect(err, [("attack trials", "trials")])
    assert "attack trials: seeded with --seed 0 (a reproducible experiment, not a release)" in err


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "argv", "steps"),
    [
        (
            "evaluate",
            lambda c, r, o: ["evaluate", "--input", c, "--release", r, "--json", f"{o}/e.json",
                             "--trials", "1"],
            [("evaluation trials", "trials"), ("evaluating", "steps")],
        ),
        (
            "sweep",
            lambda c, r, o: ["sweep", "--input", c, "--epsilons", "1", "--trials", "1",
                             "--out", f"{o}/s"],
            [("sweep", "releases")],
        ),
        (
            "infer",
            lambda c, r, o: ["infer", r, "--out", f"{o}/i"],
            [("GLS estimates", "geounits")],
        ),
        (
            "risk",
            lambda c, r, o: ["risk", "--input", c, "--out", f"{o}/k", "--draws", "100"],
            [("two-level exact risk", "(xi2, d) pairs")],
        ),
    ],
)  # fmt: skip
def test_long_commands(name, argv, steps, cef: Path, release: Path, tmp_path: Path, capsys):
    err = _stderr(capsys, argv(str(cef), str(release), str(tmp_path)))
    _expect(err, steps)
