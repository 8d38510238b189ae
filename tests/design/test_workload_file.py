"""``censusdp design allocation --workload FILE``: a histogram and targets of the user's own.

The errors are checked against a dense computation written here with explicit
Kronecker matrices (not the library's query builder or its block decomposition).
"""

from __future__ import annotations

import json
from fractions import Fraction
from functools import reduce

import numpy as np
import pytest

from censusdp.cli import main
from censusdp.design import DesignError
from censusdp.design.allocation import AllocationRequest, optimize_allocation
from censusdp.design.report import load_workload
from censusdp.design.workload import workload_from_mapping

SIZES = {"sex": 2, "age": 3, "income": 2}
TARGETS = [([], 4.0), (["sex", "age"], 1.0), (["age", "income"], 2.0)]

TOML = """
name = "survey"
rho = "1/2"

[[attributes]]
name = "sex"
size = 2

[[attributes]]
name = "age"
size = 3

[[attributes]]
name = "income"
size = 2

[[queries]]
attributes = []
weight = 4

[[queries]]
attributes = ["sex", "age"]

[[queries]]
attributes = ["age", "income"]
weight = 2
"""


def marginal(kept: list[str]) -> np.ndarray:
    """The 0/1 matrix of a marginal: identity on kept attributes, a row of ones elsewhere."""
    parts = [np.eye(n) if a in kept else np.ones((1, n)) for a, n in SIZES.items()]
    return reduce(np.kron, parts)


def dense_error(shares: dict[str, float], scale: float) -> float:
    """sum_T w_T tr(T M^+ T^T) / r_T with M = scale * sum_q s_q Q_q^T Q_q."""
    by_name = {"total": [], "sex*age": ["sex", "age"], "age*income": ["age", "income"]}
    m = sum(s * marginal(by_name[q]).T @ marginal(by_name[q]) for q, s in shares.items())
    m_inv = np.linalg.pinv(scale * m, hermitian=True)
    total = 0.0
    for kept, w in TARGETS:
        t = marginal(kept)
        total += w * np.trace(t @ m_inv @ t.T) / t.shape[0]
    return float(total)


@pytest.mark.parametrize(("suffix", "neighbours"), [(".toml", None), (".json", "unbounded")])
def test_allocation_of_a_workload_file_matches_dense_gls(
    tmp_path, capsys: pytest.CaptureFixture[str], suffix: str, neighbours: str | None
) -> None:
    import tomllib

    path = tmp_path / f"w{suffix}"
    data = tomllib.loads(TOML)
    path.write_text(TOML if suffix == ".toml" else json.dumps(data))
    argv = ["design", "allocation", "--workload", str(path), "--json", "--quiet"]
    argv += ["--neighbours", neighbours] if neighbours else []
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["attributes"] == SIZES and out["rho"] == "1/2"
    kappa = 2 if neighbours == "unbounded" else 1
    (level,) = out["levels"]
    assert level["original_query_shares"] == pytest.approx(
        {"total": 1 / 3, "sex*age": 1 / 3, "age*income": 1 / 3}
    )
    for key in ("original", "optimized"):
        shares = level[f"{key}_query_shares"]
        expect = dense_error(shares, kappa * 0.5 * level[f"{key}_share_float"])
        assert out[f"{key}_error"] == pytest.approx(expect, rel=1e-9)
    assert out["optimized_error"] < out["original_error"]
    assert level["optimality_gap"] < 1e-6
    # no share vector on the simplex does better than the continuous optimum
    rng = np.random.default_rng(0)
    for s in rng.dirichlet(np.ones(3), size=100):
        shares = dict(zip(("total", "sex*age", "age*income"), s, strict=True))
        assert dense_error(shares, kappa * 0.5) >= out["continuous_optimum_error"] * (1 - 1e-9)


def test_simulation_of_a_workload_without_detailed_cells(tmp_path) -> None:
    """No query measures single cells, so the dense precision matrix is singular; the
    Monte Carlo check still agrees with the closed form on the estimable targets."""
    path = tmp_path / "w.toml"
    path.write_text(TOML)
    w = load_workload(path)
    report = optimize_allocation(
        AllocationRequest(w.plan, targets=w.targets), simulate_trials=400, seed=3
    )
    sim = report.extra["simulation"]["optimized"]
    assert abs(sim["error"] - report.optimized_error) < 4 * sim["standard_error"]


def test_geolevels_measure_and_rho_override() -> None:
    data = {
        "attributes": [{"name": "a", "size": 4}, {"name": "b", "size": 2}],
        "geolevels": ["Nation", "Region"],
        "queries": [
            {"attributes": ["a"], "geolevel": "Nation"},
            {"attributes": ["a", "b"], "weight": 3},
        ],
        "measure": [["a", "b"], ["b"], ["a"]],
    }
    w = workload_from_mapping(data, "w.toml", rho="2")
    assert w.plan.total == Fraction(2)
    assert [(t.geolevel, t.query, t.weight) for t in w.targets] == [
        ("Nation", "a", 1.0),
        ("Nation", "a*b", 3.0),
        ("Region", "a*b", 3.0),
    ]
    assert w.plan.query_shares["Region"] == {q: Fraction(1, 3) for q in ("a*b", "b", "a")}
    assert w.plan.geolevel_shares == {"Nation": Fraction(1, 2), "Region": Fraction(1, 2)}


BAD = [
    ("[[attributes]]\nname = 'sex'\nsize = 0\n", "attributes[0].size is 0"),
    ("[[attributes]]\nname = 'Sex'\nsize = 2\n", "attributes[0].name is 'Sex'"),
    (
        "[[attributes]]\nname = 'sex'\nsize = 2\n[[queries]]\nattributes = ['age']\n",
        "queries[0].attributes is 'age'; attributes are ['sex']",
    ),
    (
        "[[attributes]]\nname = 'sex'\nsize = 2\n[[queries]]\nattributes = []\nweight = -1\n",
        "weight of table 'total' at 'Unit' is -1",
    ),
    ("colour = 'red'\n", "key is 'colour'"),
    ("[[attributes]\n", "invalid TOML"),
    ("[[attributes]]\nname = 'sex'\nsize = 2\n", "queries is None"),
]


@pytest.mark.parametrize(("text", "match"), BAD)
def test_bad_workload_file_is_one_line(
    tmp_path, capsys: pytest.CaptureFixture[str], text: str, match: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    assert main(["design", "allocation", "--workload", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert str(path) in err[0] and match in err[0]
    with pytest.raises(DesignError, match="bad.toml"):
        load_workload(path)


def test_workload_excludes_a_budget(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "w.toml"
    path.write_text(TOML)
    argv = ["design", "allocation", "--workload", str(path), "--preset", "pl94-2020"]
    assert main(argv) == 2
    assert "--preset does not go with --workload" in capsys.readouterr().err
    assert main(["design", "allocation", "--workload", str(tmp_path / "none.toml")]) == 2
    assert "cannot read workload" in capsys.readouterr().err


def test_workload_out_dir_has_no_preset(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    """A workload file's schema cannot be released: allocation.json and the heat table
    only, no preset TOML."""
    path = tmp_path / "w.toml"
    path.write_text(TOML)
    out = tmp_path / "alloc"
    assert main(["design", "allocation", "--workload", str(path), "--out", str(out), "-q"]) == 0
    names = {p.name for p in out.iterdir()}
    assert {"allocation.json", "design_allocation_heat.png"} <= names
    assert not any(n.endswith(".toml") for n in names)
