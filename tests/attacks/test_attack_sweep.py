"""``attack sweep``, ``attack reconstruct`` and ``attack reid`` end to end, with the rates
recomputed independently from the output files (JASON (JSR-19-2F) secs. 4.1 and 8.4.1)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from censusdp.attacks.dhc.sweep import SweepOptions, attack_sweep, marginals_reconstruction
from censusdp.cli import main
from censusdp.data.geography import Hierarchy
from censusdp.errors import ConfigError
from censusdp.generate import generate_state
from censusdp.io.cef import read_cef
from censusdp.privacy import accounting
from synth import write_record_release


@pytest.fixture(scope="module")
def truth_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("truth")
    generate_state("DC", 2, d, scale=0.01)
    return d


def fake_dp(input_dir, out_dir, *, budget, seed, workers, progress):
    """A stand-in for the TopDown engine: perturbs ages, races and blocks with a rate
    that falls with epsilon, and writes mdf_persons.parquet (the file the attack reads).
    """
    eps = float(accounting.epsilon_from_rho(budget.total, budget.delta))
    p = read_cef(input_dir).persons
    rng = np.random.default_rng(seed)
    n = p["age"].size
    q = min(1.0, 1.0 / eps)
    age = np.where(rng.random(n) < q, np.clip(p["age"] + rng.integers(-5, 6, n), 0, 115), p["age"])
    race = np.where(rng.random(n) < q, rng.integers(1, 7, n), p["cenrace"])
    geocode = np.asarray(p["geocode"]).astype("U16")
    persons = {"geocode": geocode, "hhgq": p["hhgq"], "sex": p["sex"], "age": age}
    persons.update(hispanic=p["hispanic"], cenrace=race)
    write_record_release(out_dir, persons, None, Hierarchy.from_blocks(geocode), "dhc-lite")
    return {}


def _truth_frame(truth_dir):
    t = pq.read_table(Path(truth_dir) / "persons.parquet").to_pylist()
    return {r["person_id"]: r for r in t}, t


def _independent_exact_rate(rec_path, truth_rows):
    """Exact one-to-one matches recomputed with Counters (no censusdp code)."""
    rec = pq.read_table(rec_path).to_pylist()
    key = lambda r: (r["geocode"], r["sex"], r["age"], r["hispanic"], r["cenrace"])  # noqa: E731
    a, b = Counter(map(key, rec)), Counter(map(key, truth_rows))
    return sum(min(v, b[k]) for k, v in a.items()) / len(rec)


@pytest.mark.slow
def test_sweep_with_stand_in_engine(truth_dir, tmp_path):
    out = tmp_path / "sweep"
    options = SweepOptions(
        epsilons=[0.5, 64], swap_dp_epsilons=[4], swap_dp_production=False, seed=3
    )
    r = attack_sweep(truth_dir, out, options, dp_runner=fake_dp)
    names = [row["name"] for row in r["rows"]]
    assert names == [
        "unprotected",
        "swap",
        "dp_eps0.5",
        "dp_eps64",
        "dp_production",
        "swap_dp_eps4",
        "marginals",
    ]
    for f in ("sweep.json", "sweep.csv", "sweep.png", "manifest.json"):
        assert (out / f).is_file()
    rows = {row["name"]: row for row in r["rows"]}
    # unprotected reconstruction is near perfect; swapping barely slows it
    assert rows["unprotected"]["exact_rate"] > 0.85
    assert rows["swap"]["exact_rate"] > rows["unprotected"]["exact_rate"] - 0.1
    # more noise, less reconstruction and re-identification, down toward the baseline
    assert rows["dp_eps0.5"]["exact_rate"] < rows["dp_eps64"]["exact_rate"]
    assert (
        rows["dp_eps0.5"]["nonmodal_confirmed_share"] < rows["dp_eps64"]["nonmodal_confirmed_share"]
    )
    assert (
        rows["marginals"]["nonmodal_confirmed_share"]
        < rows["unprotected"]["nonmodal_confirmed_share"]
    )
    assert rows["dp_production"]["epsilon"] == pytest.approx(17.14, abs=0.01)
    assert r["modal_guess_baseline"]["nonmodal_confirmed_share"] == 0.0
    # independent recomputation from the output files
    by_id, truth_rows = _truth_frame(truth_dir)
    for name in ("unprotected", "dp_eps0.5"):
        rec_path = out / "attacks" / name / "rec" / "reconstructed.parquet"
        assert _independent_exact_rate(rec_path, truth_rows) == pytest.approx(
            rows[name]["exact_rate"]
        )
        rec = {x["rec_id"]: x for x in pq.read_table(rec_path).to_pylist()}
        links = pq.read_table(out / "attacks" / name / "reid" / "links_exact.parquet").to_pylist()
        assert len({x["rec_id"] for x in links}) == len(links)
        assert len({x["person_id"] for x in links}) == len(links)
        confirmed = sum(
            rec[x["rec_id"]]["cenrace"] == by_id[x["person_id"]]["cenrace"]
            and rec[x["rec_id"]]["hispanic"] == by_id[x["person_id"]]["hispanic"]
            for x in links
        )
        assert confirmed / len(truth_rows) == pytest.approx(rows[name]["confirmed_share"])
        assert len(links) / len(rec) == pytest.approx(rows[name]["putative_rate"])
    csv_lines = (out / "sweep.csv").read_text().strip().splitlines()
    assert len(csv_lines) == 1 + len(names)
    assert json.loads((out / "sweep.json").read_text())["rows"][0]["name"] == "unprotected"


def test_sweep_rejects_bad_arguments(truth_dir, tmp_path):
    with pytest.raises(ConfigError, match="epsilons must be positive"):
        SweepOptions(epsilons=[0.0])
    with pytest.raises(ConfigError, match="swap rate must be in"):
        SweepOptions(swap_rate=1.5)
    with pytest.raises(ConfigError, match="without sex and age"):
        attack_sweep(truth_dir, tmp_path, SweepOptions(preset="pl94-2020"), dp_runner=fake_dp)


def test_marginals_reconstruction_keeps_block_sizes(truth_dir):
    p = read_cef(truth_dir).persons
    m = marginals_reconstruction({k: np.asarray(v) for k, v in p.items()}, seed=1)
    assert Counter(m["geocode"].tolist()) == Counter(np.asarray(p["geocode"]).tolist())


def test_cli_reconstruct_and_reid(truth_dir, tmp_path, capsys):
    rec = tmp_path / "rec"
    assert (
        main(
            [
                "attack",
                "reconstruct",
                "--release",
                str(truth_dir),
                "--out",
                str(rec),
                "--truth",
                str(truth_dir),
                "--quiet",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["source"] == "unprotected" and out["match"]["exact_rate"] > 0.85
    reid = tmp_path / "reid"
    assert (
        main(
            [
                "attack",
                "reid",
                "--reconstructed",
                str(rec),
                "--truth",
                str(truth_dir),
                "--out",
                str(reid),
                "--methods",
                "exact",
                "--quiet",
                "--json",
                "-",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    ex = out["methods"]["exact"]
    assert 0 < ex["confirmed_share"] <= ex["putative_rate"] <= 1
    for f in ("commercial.parquet", "links_exact.parquet", "summary.json", "manifest.json"):
        assert (reid / f).is_file()
    # a pl94-only release cannot be attacked: one clear line, exit code 1 (a data error)
    pl = tmp_path / "pl"
    geocode = np.asarray(["5000100010011000"])
    persons = {"geocode": geocode, "hhgq": [0], "votingage": [1], "hispanic": [0], "cenrace": [1]}
    write_record_release(
        pl, {k: np.asarray(v) for k, v in persons.items()}, None, Hierarchy.from_blocks(geocode)
    )
    assert (
        main(
            ["attack", "reconstruct", "--release", str(pl), "--out", str(tmp_path / "x"), "--quiet"]
        )
        == 1
    )
    assert "needs person columns" in capsys.readouterr().err
