"""``censusdp tradeoff rr`` and ``censusdp tradeoff choose`` from the command line."""

from __future__ import annotations

import json
import math

import pytest

from censusdp.cli import main


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("eps", ["0.5", "1", "3", "10"])
def test_rr_json_contract(capsys, eps):
    """I_times_N, dI_deps_times_N, d2I_deps2_times_N: Abowd & Schmutte eqs. B-8 to B-12."""
    d = _json(capsys, ["tradeoff", "rr", "--epsilon", eps, "--json"])
    x = float(eps) / 2
    s, c = math.sinh(x), math.cosh(x)
    assert d["I_times_N"] == pytest.approx(-1 / (4 * s * s), rel=1e-12)
    assert d["dI_deps_times_N"] == pytest.approx(c / (4 * s**3), rel=1e-12)
    assert d["d2I_deps2_times_N"] == pytest.approx(-(1 + 2 * c * c) / (8 * s**4), rel=1e-12)
    assert d["n"] == 1 and d["pi"] == 0.5


def test_rr_n_and_pi_options(capsys):
    d1 = _json(capsys, ["tradeoff", "rr", "--epsilon", "2", "--json"])
    d2 = _json(capsys, ["tradeoff", "rr", "--epsilon", "2", "--n", "250", "--pi", "0.1", "--json"])
    assert d2["n"] == 250 and d2["pi"] == 0.1
    assert d2["I_times_N"] == pytest.approx(d1["I_times_N"], rel=1e-12)
    assert d2["I"] == pytest.approx(d1["I"] / 250, rel=1e-12)
    assert d2["variance_no_privacy"] == pytest.approx(0.09 / 250)


def test_rr_readable_summary(capsys):
    assert main(["tradeoff", "rr", "--epsilon", "1"]) == 0
    out = capsys.readouterr().out
    assert "randomized response at epsilon = 1" in out
    assert "eq. B-9" in out and "-0.92067359" in out and "1.9922948" in out
    assert "{" not in out
    # the probability of answering the true question is q, never zCDP's name rho
    assert "rho" not in out and "q(eps): P[sensitive question asked]" in out
    assert "0.46211716" in out  # q(1) = tanh(1/2), eq. B-10 with mu = 1/2
    d = _json(capsys, ["tradeoff", "rr", "--epsilon", "1", "--json"])
    assert d["rho"] == pytest.approx(math.tanh(0.5), rel=1e-12)  # the JSON keeps the appendix's key
    assert (
        main(
            [
                "tradeoff",
                "choose",
                "--frontier",
                "rr",
                "--privacy-cost",
                "1",
                "--accuracy-value",
                "1",
            ]
        )
        == 0
    )
    assert "rho" not in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv,match",
    [
        (["--epsilon", "0"], "epsilon is 0"),
        (["--epsilon", "abc"], "epsilon must be a number"),
        (["--epsilon", "1", "--pi", "1.5"], "pi is 3/2"),
        (["--epsilon", "1", "--n", "0"], "population size N is 0"),
    ],
)
def test_rr_errors_are_one_line(capsys, argv, match):
    assert main(["tradeoff", "rr", *argv, "--json"]) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_choose_json_and_plot(capsys, tmp_path):
    png = tmp_path / "opt.png"
    d = _json(
        capsys,
        [
            "tradeoff",
            "choose",
            "--privacy-cost",
            "1",
            "--accuracy-value",
            "10",
            "--plot",
            str(png),
            "--json",
        ],
    )
    assert d["optimum"]["mrt"] == pytest.approx(0.1, rel=1e-9)
    assert d["preferences"]["mrs"] == pytest.approx(0.1)
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert (
        main(
            [
                "tradeoff",
                "choose",
                "--privacy-cost",
                "1",
                "--accuracy-value",
                "10",
                "--plot",
                str(png),
            ]
        )
        == 2
    )
    assert "exists" in capsys.readouterr().err


def test_choose_needs_a_preference(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["tradeoff", "choose", "--privacy-cost", "1"])
    assert exc.value.code == 2
