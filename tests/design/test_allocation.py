"""Budget allocation for TopDown measurements (censusdp.design.allocation)."""

from __future__ import annotations

import dataclasses
import json
import tomllib
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from censusdp.cli import main
from censusdp.data.queries import make_query
from censusdp.data.schema import get_schema
from censusdp.design import DesignError
from censusdp.design.allocation import (
    AllocationRequest,
    TargetTable,
    budget_to_toml,
    optimize_allocation,
    revealed_target_workload,
    simulate_errors,
)
from censusdp.design.level_model import LevelErrorModel, rationalize
from censusdp.design.report import load_targets
from censusdp.io.budget_files import load_config, load_preset
from censusdp.privacy.budget_config import budget_from_mapping

PL94 = get_schema("pl94")
MEASURED = [
    "total",
    "cenrace",
    "hhinstlevels",
    "hhgq",
    "votingage*hispanic",
    "hispanic*cenrace",
    "detailed",
]
TARGETS = [
    ("total", 2.0),
    ("numraces", 1.0),
    ("gqlevels*votingage", 0.5),
    ("hhinstlevels*gqlevels", 1.0),
    ("hispanic*cenrace", 3.0),
]


def dense_level_error(shares: dict[str, float], targets: list[tuple[str, float]]) -> float:
    """tr(A M^{-1}) with explicit 2016 x 2016 matrices."""
    m = np.zeros((PL94.size, PL94.size))
    for q, s in shares.items():
        mat = make_query(PL94, q).matrix
        m += s * (mat.T @ mat).toarray()
    a = np.zeros_like(m)
    for q, c in targets:
        mat = make_query(PL94, q).matrix
        a += c * (mat.T @ mat).toarray()
    return float(np.trace(np.linalg.solve(m, a)))


@pytest.mark.slow  # the suite's time (CI skips slow tests); run with -m slow
def test_block_decomposition_matches_dense_matrices() -> None:
    model = LevelErrorModel(PL94, MEASURED + [q for q, _ in TARGETS])
    # HHGQ has 3 atoms (household / institutional / non-institutional, from hhinstlevels
    # and gqlevels); cenrace has 6 (numraces); the others 1
    assert max(b.shape[0] for b in model.blocks("detailed")) == 3 * 6
    rng = np.random.default_rng(12)
    for _ in range(3):
        s = rng.dirichlet(np.ones(len(MEASURED)))
        shares = dict(zip(MEASURED, s, strict=True))
        value, grad = model.level_error(list(shares.items()), TARGETS)
        assert value == pytest.approx(dense_level_error(shares, TARGETS), rel=1e-9)
        # the gradient: d_q = -dC/ds_q
        for j in (0, 3, 6):
            h = 1e-6
            up = dict(shares)
            up[MEASURED[j]] += h
            dn = dict(shares)
            dn[MEASURED[j]] -= h
            fd = (
                model.level_error(list(up.items()), TARGETS)[0]
                - model.level_error(list(dn.items()), TARGETS)[0]
            ) / (2 * h)
            assert -fd == pytest.approx(grad[j], rel=1e-5)


def test_unestimable_target_is_refused() -> None:
    model = LevelErrorModel(PL94, ["total", "hhgq", "cenrace"])
    with pytest.raises(DesignError, match="not estimable"):
        model.level_error([("total", 0.5), ("hhgq", 0.5)], [("cenrace", 1.0)])


def test_rationalize() -> None:
    fr = rationalize([0.5, 0.3333333, 0.1666667, 1e-9], 4099)
    assert sum(fr) == 1 and all(f.denominator in (1, 4099) or 4099 % f.denominator == 0 for f in fr)
    assert fr[-1] == 0 and abs(float(fr[0]) - 0.5) < 1 / 4099


@pytest.fixture(scope="module")
def pl94_own():
    budget = load_preset("pl94-2020")
    return budget, optimize_allocation(AllocationRequest(budget))


def test_optimum_is_certified_and_beats_production(pl94_own) -> None:
    budget, report = pl94_own
    assert report.optimized_error < 0.1 * report.original_error
    assert report.continuous_error <= report.optimized_error <= report.continuous_error * 1.001
    for lv in report.levels:
        assert lv["optimality_gap"] <= 1e-7
    # no random allocation of the same queries does better (convexity + the certificate)
    rng = np.random.default_rng(3)
    model = LevelErrorModel(
        PL94, [q for lv in budget.geolevel_names for q in budget.query_shares[lv]]
    )
    targets = [
        (t.query, 1.0 / make_query(PL94, t.query).n_rows)
        for t in report.request.targets
        if t.geolevel == "Tract"
    ]
    queries = list(budget.query_shares["Tract"])
    chosen = [(q, float(v)) for q, v in report.budget.query_shares["Tract"].items()]
    best = model.level_error(chosen, targets)[0]
    for _ in range(200):
        s = rng.dirichlet(np.ones(len(queries)) * 0.7)
        assert model.level_error(list(zip(queries, s, strict=True)), targets)[0] >= best * (
            1 - 1e-4
        )
    # geolevel shares are the closed form g ~ sqrt(a_l): moving budget between levels hurts
    rho = float(budget.total)
    a = np.array(
        [
            lv["optimized_error"] * float(report.budget.geolevel_shares[lv["geolevel"]]) * rho
            for lv in report.levels
        ]
    )
    g = np.array([float(report.budget.geolevel_shares[lv]) for lv in budget.geolevel_names])
    for _ in range(50):
        h = rng.dirichlet(np.ones(len(g)) * 50)
        assert np.sum(a / h) >= np.sum(a / g) * (1 - 1e-3)


def test_revealed_workload_production_is_nearly_optimal(pl94_own) -> None:
    budget, _ = pl94_own
    report = optimize_allocation(
        AllocationRequest(budget, targets=revealed_target_workload(budget))
    )
    # production's shares are what independent estimation would choose for these weights;
    # least-squares pooling still helps, a little
    assert 0.0 < 1 - report.optimized_error / report.original_error < 0.05


@pytest.mark.slow  # the suite's time (CI skips slow tests); run with -m slow
def test_simulation_agrees_with_closed_form(pl94_own) -> None:
    budget, report = pl94_own
    targets = [t for t in report.request.targets if t.geolevel in ("US", "Block")]
    small = budget_from_mapping(
        {
            "schema": "pl94",
            "mechanism": "discrete_gaussian",
            "rho": "1",
            "geolevels": [
                {
                    "name": lv,
                    "length": ln,
                    "share": "1/2",
                    "queries": {q: str(s) for q, s in budget.query_shares[lv].items()},
                }
                for lv, ln in (("US", 0), ("Block", 16))
            ],
        }
    )
    req = AllocationRequest(small, targets=tuple(targets))
    closed = optimize_allocation(req).original_error
    sim = simulate_errors(small, targets, trials=60, seed=9)
    assert abs(sim["error"] - closed) < 4 * sim["standard_error"]
    assert sim["standard_error"] < 0.2 * closed
    # an allocation twice as noisy is detected
    half = small.scaled(rho="1/2")
    sim_half = simulate_errors(half, targets, trials=60, seed=9)
    assert abs(sim_half["error"] - closed) > 4 * sim_half["standard_error"]


def test_preset_toml_round_trip(pl94_own, tmp_path) -> None:
    _, report = pl94_own
    text = budget_to_toml(report.budget, ["header line"])
    again = budget_from_mapping(tomllib.loads(text), origin="round-trip")
    assert again.total == report.budget.total and again.delta == Fraction(1, 10**10)
    assert again.geolevels == report.budget.geolevels
    assert again.geolevel_shares == report.budget.geolevel_shares
    assert again.query_shares == report.budget.query_shares
    assert sum(again.geolevel_shares.values()) == 1
    path = tmp_path / "p.toml"
    path.write_text(text)
    assert load_config(path).name == report.budget.name


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"budget": "ddp-2010"}, "pure DP"),
        ({"neighbours": "add-remove"}, "neighbours is 'add-remove'"),
        ({"denominator": 5}, "denominator is 5"),
        ({"targets": (TargetTable("Nation", "total"),)}, "unknown geolevel 'Nation'"),
        ({"targets": (TargetTable("US", "race"),)}, "target table 'race'"),
        ({"targets": (TargetTable("US", "total"),)}, "geolevel 'State' has no target table"),
    ],
)
def test_invalid_requests(kwargs: dict, match: str) -> None:
    args = {"budget": "pl94-2020", **kwargs}
    args["budget"] = load_preset(args["budget"])
    with pytest.raises(DesignError, match=match):
        AllocationRequest(**args)


def test_bad_weight() -> None:
    with pytest.raises(DesignError, match="weight of table 'total' at 'US' is -1"):
        TargetTable("US", "total", -1)


def test_load_targets(tmp_path) -> None:
    p = tmp_path / "t.toml"
    p.write_text('[[tables]]\ngeolevel = "US"\nquery = "total"\nweight = 2\n')
    assert load_targets(p) == (TargetTable("US", "total", 2),)
    p.write_text('[[tables]]\ngeolevel = "US"\nqueries = "total"\n')
    with pytest.raises(DesignError, match=r"tables\[0\] needs keys"):
        load_targets(p)


def test_cli_writes_preset_json_and_heat_table(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "alloc"
    targets = tmp_path / "targets.toml"
    lines = []
    for level in ("US", "State", "County", "Tract", "BlockGroup", "Block"):
        lines += [
            "[[tables]]",
            f'geolevel = "{level}"',
            'query = "votingage*hispanic*cenrace"',
            "weight = 1",
            "",
        ]
    targets.write_text("\n".join(lines))
    argv = [
        "design",
        "allocation",
        "--targets",
        str(targets),
        "--out",
        str(out),
        "--json",
        "--quiet",
        "--name",
        "vhc-opt",
    ]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["optimized_error"] < data["original_error"]
    assert (out / "design_allocation_heat.png").read_bytes()[:4] == b"\x89PNG"
    preset = load_config(out / "vhc-opt.toml")
    assert preset.total == load_preset("pl94-2020").total
    assert main(argv) == 2  # refuses to overwrite
    assert "pass --overwrite" in capsys.readouterr().err


def test_simulate_trials_validated() -> None:
    req = AllocationRequest(load_preset("pl94-2020"))
    for bad in (1, -2, True):
        with pytest.raises(DesignError, match="simulate_trials is"):
            optimize_allocation(req, simulate_trials=bad)


def _unbounded_config(tmp_path) -> str:
    """pl94-2020 as a user's budget file stating ``neighbours = "unbounded"``."""
    import censusdp.privacy

    text = (Path(censusdp.privacy.__file__).parent / "presets" / "pl94-2020.toml").read_text()
    assert 'neighbours = "bounded"' in text
    path = tmp_path / "unbounded.toml"
    path.write_text(text.replace('neighbours = "bounded"', 'neighbours = "unbounded"'))
    return str(path)


def test_allocation_honours_the_budget_files_neighbours(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A budget stating unbounded neighbours has noise variance 1/(2 rho_q): every error is
    half the bounded one, and the preset written says unbounded beside those numbers."""
    config = _unbounded_config(tmp_path)
    out = tmp_path / "alloc"
    argv = ["design", "allocation", "--config", config, "--json", "--quiet"]
    assert main([*argv, "--out", str(out), "--name", "mine"]) == 0
    unbounded = json.loads(capsys.readouterr().out)
    assert main([*argv, "--neighbours", "bounded"]) == 0
    bounded = json.loads(capsys.readouterr().out)
    assert unbounded["neighbours"] == "unbounded"
    assert unbounded["noise_variance"] == "1/(2 rho_q)"
    for key in ("original_error", "optimized_error"):
        assert unbounded[key] == pytest.approx(bounded[key] / 2, rel=1e-9)
    assert load_config(out / "mine.toml").neighbours == "unbounded"


def test_request_neighbours_default_to_the_budgets() -> None:
    budget = load_preset("pl94-2020")
    assert AllocationRequest(budget).neighbours == "bounded"
    unbounded = dataclasses.replace(budget, neighbours="unbounded")
    assert AllocationRequest(unbounded).neighbours == "unbounded"
    assert AllocationRequest(unbounded, neighbours="bounded").neighbours == "bounded"
