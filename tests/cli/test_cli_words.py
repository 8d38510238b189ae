"""What a person reads: --scale stated where it matters, run's lines in plain words,
a directory that is not a release named as what it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from censusdp.io.cef_files import sampled_fraction
from censusdp.io.rundir import not_a_release
from censusdp.release.measure_runs import _measured_line


def _manifest(where: Path, record: dict) -> Path:
    where.mkdir(exist_ok=True)
    (where / "manifest.json").write_text(json.dumps(record))
    return where


@pytest.mark.parametrize(
    ("record", "fraction"),
    [
        ({"kind": "censusdp synthetic CEF", "scale": 0.05}, 0.05),
        ({"kind": "censusdp synthetic CEF", "scale": 1.0}, None),  # the whole state
        ({"kind": "censusdp synthetic CEF", "scale": True}, None),
        ({"kind": "release", "scale": 0.05}, None),  # not a generated input
        ({"scale": 0.5}, None),
    ],
)
def test_a_sampled_input_is_known_by_its_manifest(tmp_path, record, fraction) -> None:
    assert sampled_fraction(_manifest(tmp_path / "cef", record)) == fraction


def test_an_input_without_a_manifest_is_not_sampled(tmp_path) -> None:
    assert sampled_fraction(tmp_path) is None
    (tmp_path / "manifest.json").write_text("{not json")
    assert sampled_fraction(tmp_path) is None


@pytest.mark.parametrize(
    ("record", "words"),
    [
        ({"created_by": "censusdp", "kind": "release"}, None),
        ({"created_by": "censusdp", "release": "swap", "command": "protect swap"}, None),
        ({"created_by": "censusdp", "command": ["censusdp", "run"]}, None),  # argv: a run
        ({"persons": {}}, None),  # hand-made: its own checks say what it lacks
        ({"kind": "censusdp synthetic CEF"}, "is not a release but a censusdp synthetic CEF"),
        ({"created_by": "censusdp", "command": "demo"}, "the output of 'censusdp demo'"),
    ],
)
def test_not_a_release_names_what_the_directory_is(tmp_path, record, words) -> None:
    got = not_a_release(_manifest(tmp_path / "d", record))
    assert got is None if words is None else words in got


def test_measured_lines_in_plain_words() -> None:
    line = _measured_line("persons", "County", 6, 14_862)
    assert line.startswith("measured persons:") and "6 geounits" in line
    assert "14,862 noisy values" in line and " units," not in line
    assert "1 geounit," in _measured_line("housing units", "US", 1, 2)
    none = _measured_line("persons", "State", 1, 0)
    assert "no noisy values (each is the only child of its parent" in none
    assert " 0 noisy values" not in none


def test_a_re_estimate_names_its_measurements_by_directory_not_path() -> None:
    from censusdp.cli.run import _randomness_words

    record = {"mode": "secure", "measured_by": {"run": "/home/someone/work/vt-run"}}
    words = _randomness_words({"randomness": record})
    assert words == "secure randomness (of the measurements of vt-run)"


def test_generate_says_where_it_wrote_as_the_user_named_it(tmp_path, monkeypatch, capsys):
    from censusdp.cli import main

    monkeypatch.chdir(tmp_path)
    argv = ["generate", "--state", "WY", "--seed", "4", "--out", "wy/", "--scale", "0.02", "-q"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "written to         wy" in out and str(tmp_path) not in out


def test_demo_prints_its_outputs_as_the_user_named_them(tmp_path, monkeypatch, capsys):
    from censusdp.cli import main

    monkeypatch.chdir(tmp_path)
    argv = ["demo", "--state", "DC", "--scale", "0.01", "--out", "demo"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert str(tmp_path) not in out + err
    # progress names the demo's directory, not the staging directory it was built in
    assert ".partial-" not in err and "reading the CEF in demo/cef" in err
    assert "  input   demo/cef: " in out and "  release demo/run: " in out
    assert "  report: demo/report.html" in out
    assert "  geolevel     places" in out  # places, not units (housing units are units)
