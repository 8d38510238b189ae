"""What ``censusdp run --preset dhc-2020`` refuses, each in one line before any noise is
drawn: an input without ``relgq``, the DHC's household and unit run on an input without
its columns (the first missing one is named), and the tabulation hierarchy (the DHC's
levels are the prim spine's)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from censusdp.cli import main
from synth import block_codes, make_cef, write_cef


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    persons, units = make_cef(np.random.default_rng(2), block_codes(1, 1, 1, 3))
    return write_cef(tmp_path_factory.mktemp("dhc-refusals") / "cef", persons, units)


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["run", "-q", "--seed", "1", *args])
    return code, capsys.readouterr().err.strip()


def test_an_input_without_relgq_is_one_line_naming_the_column(
    plain: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    code, err = _run(
        [
            "--input",
            str(plain),
            "--out",
            str(out),
            "--preset",
            "dhc-2020",
            "--units-preset",
            "none",
        ],
        capsys,
    )
    assert code == 1 and "\n" not in err  # input that fails a check (censusdp.errors)
    assert "persons.parquet" in err and "missing column 'relgq'" in err and "dhcp-2020" in err
    assert not out.exists()


def test_the_household_run_and_the_tabulation_hierarchy_are_refused(
    plain: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    code, err = _run(["--input", str(plain), "--out", str(out), "--preset", "dhc-2020"], capsys)
    # this input lacks the household run's columns: the first is named (with them, the
    # household run is released: tests/release/pipeline/test_dhc_household_run.py)
    assert code == 1 and "\n" not in err
    assert "persons.parquet: missing column 'rel'" in err and "DHC's household run" in err
    code, err = _run(
        ["--input", str(plain), "--out", str(out), "--preset", "dhc-2020", "--units-preset",
         "none", "--spine", "tabulation"],
        capsys,
    )  # fmt: skip
    assert code == 2 and "\n" not in err and "geolevels" in err, err
    assert not out.exists()
