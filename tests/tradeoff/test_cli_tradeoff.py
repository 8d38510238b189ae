"""``censusdp tradeoff rr`` and ``censusdp tradeoff choose`` from the command line."""

from __future__ import annotations

import json
import math

import numpy as np
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


def test_choose_matrix_frontier_title_i(capsys):
    """The App. E frontier (eq. E-27) from the CLI: G districts funded by their counts,
    measured directly (K = Delta_A^2 ||Q A^+||_F^2 = G) or with their total (Delta_A = 2,
    K from a dense pseudo-inverse), and the closed-form optimum of linear welfare,
    4 K B / eps^3 = C  =>  eps* = (4 K B / C)^(1/3)."""
    base = ["tradeoff", "choose", "--frontier", "matrix", "--privacy-cost", "2"]
    d = _json(capsys, [*base, "--accuracy-value", "5", "--areas", "12", "--json"])
    assert d["frontier"]["kind"] == "matrix" and d["frontier"]["strategy"] == "identity"
    assert d["frontier"]["scale"] == pytest.approx(12.0)
    assert d["optimum"]["epsilon"] == pytest.approx((4 * 12 * 5 / 2) ** (1 / 3), rel=1e-8)
    h = _json(capsys, [*base, "--accuracy-value", "5", "--strategy", "hierarchical", "--json"])
    q, a = np.eye(10), np.vstack([np.ones((1, 10)), np.eye(10)])
    k = 4 * float(np.sum((q @ np.linalg.pinv(a)) ** 2))
    assert h["frontier"]["sensitivity_l1"] == 2 and h["frontier"]["scale"] == pytest.approx(k)
    assert h["optimum"]["epsilon"] == pytest.approx((4 * k * 5 / 2) ** (1 / 3), rel=1e-8)
    # misallocation of funds over the 10 districts: eps* = sqrt(r sqrt(2 G / pi) sqrt(2 K) / C)
    m = _json(capsys, [*base, "--funds-per-person", "3", "--json"])
    assert m["preferences"]["areas"] == 10
    expect = math.sqrt(3 * math.sqrt(2 * 10 / math.pi) * math.sqrt(2 * 10) / 2)
    assert m["optimum"]["epsilon"] == pytest.approx(expect, rel=1e-6)
    assert main([*base, "--accuracy-value", "5"]) == 0
    assert "Title I example, identity strategy: 10 workload queries" in capsys.readouterr().out


def test_choose_matrix_frontier_from_a_file(capsys, tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"workload": [[1, 1]], "strategy": [[1, 0], [0, 1], [1, 1]]}))
    base = ["tradeoff", "choose", "--frontier", "matrix", "--privacy-cost", "1"]
    d = _json(capsys, [*base, "--accuracy-value", "1", "--matrices", str(path), "--json"])
    assert d["frontier"]["scale"] == pytest.approx(4 * 2 / 3)  # Delta 2, ||Q A^+||^2 = 2/3
    path.write_text(json.dumps({"workload": [[1, 1]], "strategy": "tree"}))
    assert main([*base, "--accuracy-value", "1", "--matrices", str(path)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "field 'strategy' must be a non-empty list of rows" in err[0]
    path.write_text(json.dumps({"workload": [[1, 0, 0]], "strategy": [[1, 0]]}))
    assert main([*base, "--accuracy-value", "1", "--matrices", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0] and "same histogram cells" in err[0]


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--strategy", "identity"], "--strategy and --matrices are for --frontier matrix"),
        (["--frontier", "matrix", "--areas", "0"], "areas"),
    ],
)
def test_choose_matrix_errors(capsys, argv, match):
    base = ["tradeoff", "choose", "--privacy-cost", "1", "--accuracy-value", "1"]
    assert main([*base, *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and match in err[0]
