"""``censusdp infer posterior``: the JSON contract, the readable summary, errors, help."""

from __future__ import annotations

import json
import re

import pytest

from censusdp.cli import main
from censusdp.infer import NoiseLaw, NoisyCount, exact_posterior


def _strict(text: str) -> dict:
    def bad(c: str) -> None:
        raise ValueError(f"non-strict JSON constant {c}")

    return json.loads(text, parse_constant=bad)


@pytest.mark.parametrize(
    "noise,param,value,key,expected",
    [
        ("discrete-gaussian", "--rho", "0.5", "sigma_squared", 2.0),
        ("gaussian", "--scale", "3", "sigma_squared", 9.0),
        ("geometric", "--epsilon", "0.25", "scale_b", 4.0),
        ("laplace", "--scale", "2", "epsilon", 0.5),
    ],
)
def test_posterior_json_contract(capsys, noise, param, value, key, expected) -> None:
    """mean and ci95 as in the library, the noise parameters and the naive analysis."""
    assert (
        main(
            [
                "infer",
                "posterior",
                "--n",
                "40",
                "--noisy",
                "6",
                "--noise",
                noise,
                param,
                value,
                "--json",
            ]
        )
        == 0
    )
    out = _strict(capsys.readouterr().out)
    law = NoiseLaw.from_args(noise, **{param[2:]: value})
    mix = exact_posterior(NoisyCount(40, 6), law)
    assert out["mean"] == pytest.approx(mix.mean(), rel=1e-12)
    assert out["ci95"] == pytest.approx(list(mix.interval()), rel=1e-12)
    assert out["model"]["noise"][key] == pytest.approx(expected)
    assert out["model"]["noise"]["given"] == {param[2:]: str(law.given[0][1])}
    assert out["naive"]["mean"] == pytest.approx(7 / 42)
    assert out["n"] == 40 and out["method"] == "exact"


def test_posterior_prior_several_counts_and_sampler(capsys) -> None:
    args = [
        "infer",
        "posterior",
        "--n",
        "30,20",
        "--noisy",
        "4,-1",
        "--noise",
        "discrete-gaussian",
        "--rho",
        "1/4",
    ]
    assert main([*args, "--prior-a", "2", "--prior-b", "8", "--json"]) == 0
    exact = _strict(capsys.readouterr().out)
    assert exact["model"]["prior"] == {"a": 2.0, "b": 8.0} and len(exact["model"]["counts"]) == 2
    assert (
        main(
            [*args, "--prior-a", "2", "--prior-b", "8", "--method", "abc", "--seed", "4", "--json"]
        )
        == 0
    )
    abc = _strict(capsys.readouterr().out)
    assert abc["seed"] == 4 and abc["sampler"]["acceptance_rate"] > 0
    assert abc["mean"] == pytest.approx(exact["mean"], abs=5 * abc["mc_standard_error_of_mean"])


def test_posterior_summary_and_errors(capsys) -> None:
    assert (
        main(
            [
                "infer",
                "posterior",
                "--n",
                "50",
                "--noisy",
                "-2",
                "--noise",
                "gaussian",
                "--rho",
                "0.1",
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "posterior mean" in text and "naive" in text and "clipped" in text
    # the noise variance at rho 0.1 (1/rho = 10), in plain notation
    assert "variance 10.00," in text and not re.search(r"\de[+-]\d", text)
    assert (
        main(
            [
                "infer",
                "posterior",
                "--n",
                "5",
                "--noisy",
                "2.5",
                "--noise",
                "geometric",
                "--epsilon",
                "1",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "releases integers" in err and err.count("\n") == 1
    assert (
        main(
            [
                "infer",
                "posterior",
                "--n",
                "5,6",
                "--noisy",
                "2",
                "--noise",
                "gaussian",
                "--rho",
                "1",
            ]
        )
        == 2
    )
    assert "--n has 2 values" in capsys.readouterr().err
    post = ["infer", "posterior", "--n", "5", "--noisy", "2", "--noise", "gaussian"]
    assert main([*post, "--rho", "1", "--scale", "2"]) == 2
    assert "exactly one of" in capsys.readouterr().err
    assert main(post) == 2
    assert "exactly one of" in capsys.readouterr().err
    assert main(["infer", "posterior", "--noisy", "2", "--noise", "gaussian", "--rho", "1"]) == 2
    assert "needs --n" in capsys.readouterr().err
    assert main([*post, "--rho", "1", "--out", "x"]) == 2
    assert "--out does not apply" in capsys.readouterr().err
    assert main(["infer", "--out", "somewhere", "RUN", "--rho", "1"]) == 2
    assert "--rho does not apply" in capsys.readouterr().err
    assert main(["infer", "RUN"]) == 2
    assert "needs --out" in capsys.readouterr().err


def test_help_lists_both_forms(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["infer", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    assert "censusdp infer posterior" in text and "--out DIR" in text and "default: exact" in text
