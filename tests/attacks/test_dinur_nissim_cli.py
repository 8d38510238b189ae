"""``censusdp attack dn``: arguments, outputs (JSON with predictions and manifest, PNG)."""

from __future__ import annotations

import argparse
import json

import pytest

from censusdp.cli import main
from censusdp.cli.attack import _multiples


def test_attack_dn_writes_json_and_plot(tmp_path, capsys) -> None:
    out, png = tmp_path / "dn.json", tmp_path / "dn.png"
    code = main(
        ["attack", "dn", "--n", "60", "--multiples", "0.2:1.0:0.4", "--noise", "laplace",
         "--epsilon", "1", "--trials", "3", "--seed", "4", "--json", str(out), "--plot", str(png), "--quiet"]
    )  # fmt: skip
    assert code == 0
    data = json.loads(out.read_text())
    assert data["query_counts"] == [12, 36, 60]
    assert data["noise"]["per_query_variance"] == pytest.approx(2.0)
    assert data["predictions"]["small_noise_threshold_variance_n_over_48"] == pytest.approx(60 / 48)
    assert data["manifest"]["seed"] == 4 and "package_version" in data["manifest"]
    assert len(data["fraction_recovered"]["mean"]) == 3
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert "n = 60, 3 trials" in printed and printed.count("\n") == 6  # header, 3 rows, summary
    assert "{" not in printed  # with --json PATH, stdout is for people, not JSON


def test_attack_dn_gaussian_default_is_jason_variance(tmp_path) -> None:
    out = tmp_path / "g.json"
    assert (
        main(
            [
                "attack",
                "dn",
                "--n",
                "40",
                "--multiples",
                "1,2",
                "--noise",
                "gaussian",
                "--trials",
                "2",
                "--json",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    data = json.loads(out.read_text())
    assert data["noise"]["variance"] == pytest.approx(40**0.5 * 3.6888794541139363 / 2)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--noise", "laplace"], "--noise laplace needs --epsilon"),
        (["--noise", "none", "--epsilon", "1"], "takes neither --epsilon nor --variance"),
        (["--noise", "gaussian", "--variance", "big"], "--variance must be a number"),
        (["--solver", "cvx"], None),
    ],
)
def test_attack_dn_errors(argv: list[str], message: str | None, capsys) -> None:
    base = ["attack", "dn", "--n", "20", "--multiples", "1", "--trials", "1", "--quiet"]
    if message is None:
        with pytest.raises(SystemExit):
            main(base + argv)
        return
    assert main(base + argv) == 2
    assert message in capsys.readouterr().err


def test_multiples_parser() -> None:
    assert _multiples("0.1:1.0:0.05")[0] == 0.1 and len(_multiples("0.1:1.0:0.05")) == 19
    assert _multiples("1,5,10,20") == [1.0, 5.0, 10.0, 20.0]
    for bad in ("1:0.5:0.1", "0.1:1", "a,b", "0:1:0.1", "-1"):
        with pytest.raises(argparse.ArgumentTypeError, match="--multiples"):
            _multiples(bad)


def test_attack_group_without_subcommand_prints_help(capsys) -> None:
    assert main(["attack"]) == 2
    assert "dn" in capsys.readouterr().err
