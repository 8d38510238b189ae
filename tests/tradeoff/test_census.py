"""``censusdp tradeoff census``: the measured frontier, its scenarios, cache and consistency
with the separate tools (``evaluate``, ``risk``, ``attack reconstruct``)."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pyarrow.parquet as pq
import pytest
from _fake_engine import FakeEngine

from censusdp.cli import main
from censusdp.errors import ConfigError, InputError
from censusdp.generate import generate_state
from censusdp.io.budget_files import load_preset
from censusdp.io.cef import read_cef
from censusdp.release.options import Execution
from censusdp.risk import NoiseModel, one_level_risk
from censusdp.tradeoff.census import CensusTradeoffOptions, census_tradeoff
from censusdp.tradeoff.census_results import frontier_from_results
from censusdp.tradeoff.census_scenarios import coarsen_to_block_groups, no_block_budget
from censusdp.tradeoff.report import ChooseOptions, choose_epsilon


@pytest.fixture(scope="module")
def truth_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("truth")
    generate_state("DC", 2, d, scale=0.01)
    return d


def test_no_block_budget_reallocates_the_block_share():
    """JASON sec. 8: drop the block level, scale the others by 1 / (1 - s_block)."""
    b = load_preset("pl94-2020")
    nb = no_block_budget(b)
    assert nb.geolevel_names == ("US", "State", "County", "Tract", "BlockGroup")
    assert dict(nb.geolevels)["BlockGroup"] == 16
    assert sum(nb.geolevel_shares.values()) == 1
    assert nb.geolevel_shares["BlockGroup"] == Fraction(1256, 4099) / (1 - Fraction(165, 4099))
    assert nb.total == b.total and nb.query_shares["BlockGroup"] == b.query_shares["BlockGroup"]
    with pytest.raises(ConfigError, match="at least three"):
        no_block_budget(no_block_budget(no_block_budget(no_block_budget(nb))))


def test_coarsen_keeps_block_groups_and_records(truth_dir, tmp_path):
    counts = coarsen_to_block_groups(truth_dir, tmp_path / "c")
    a, b = read_cef(truth_dir), read_cef(tmp_path / "c")
    assert b.n_persons == a.n_persons and b.n_units == a.n_units
    ga, gb = np.asarray(a.persons["geocode"]), np.asarray(b.persons["geocode"])
    assert (ga.astype("U12") == gb.astype("U12")).all()
    assert np.unique(gb).size == np.unique(ga.astype("U12")).size
    all_bg = np.unique(np.asarray(a.units["geocode"]).astype("U12"))
    assert counts["block_groups"] == all_bg.size == np.unique(b.units["geocode"]).size
    # the representative is a real block of the block group
    assert set(np.unique(gb)) <= set(np.asarray(a.units["geocode"]).tolist())


def test_coarsen_gives_each_block_group_one_place(tmp_path):
    # Regression: the no_block scenario's coarsened input failed read_cef ("place ...
    # differs from another unit's value in the same block") wherever a block group
    # spans two places, as in generated Vermont at 2%.
    truth = tmp_path / "vt"
    generate_state("VT", 2, truth, scale=0.02)
    coarsen_to_block_groups(truth, tmp_path / "c")
    a, b = read_cef(truth), read_cef(tmp_path / "c")
    place = dict(zip(a.units["geocode"].tolist(), a.units["place"].tolist(), strict=False))
    ga = np.asarray(a.units["geocode"]).astype("U12")
    split = [g for g in np.unique(ga) if len(set(np.asarray(a.units["place"])[ga == g])) > 1]
    assert split, "the input should have a block group across places"
    assert [place[g] for g in b.units["geocode"].tolist()] == b.units["place"].tolist()


@pytest.mark.slow
def test_sweep_with_stand_in_engine(truth_dir, tmp_path):
    engine = FakeEngine()
    out = tmp_path / "res"
    r = census_tradeoff(
        truth_dir,
        out,
        CensusTradeoffOptions(epsilons=[16, 0.5], seeds=[3, 4]),
        execution=Execution(progress=lambda _m: None),
        release_runner=engine,
    )
    assert r["epsilons"] == [0.5, 16.0] and r["seeds"] == [3, 4]
    # 2 scenarios x 2 epsilons x 2 seeds x (accuracy + attack release)
    assert len(engine.calls) == 16
    assert {c[0] for c in engine.calls} == {
        "pl94-2020",
        "dhc-lite-demo",
        "pl94-2020-no-block",
        "dhc-lite-demo-no-block",
    }
    # the releases are scaled to the grid's total epsilon at delta = 1e-10
    assert sorted({c[1] for c in engine.calls}) == pytest.approx([0.5, 16.0], abs=1e-6)
    for f in ("results.json", "runs.parquet", "frontier.png", "manifest.json"):
        assert (out / f).is_file()
    assert not (out / ".work").exists()
    saved = json.loads((out / "results.json").read_text())
    assert saved == json.loads(json.dumps(r))
    pts = {(p["scenario"], p["epsilon"]): p["metrics"] for p in r["points"]}

    def m(s, e, key):
        return pts[(s, e)][key]["mean"]

    for s, lv in (("standard", "Block"), ("no_block", "BlockGroup")):
        mae = [m(s, e, f"accuracy.total_population.{lv}.mae") for e in (0.5, 16.0)]
        assert mae[0] > 2 * mae[1] > 0
        conf = [m(s, e, "reid.confirmed_share") for e in (0.5, 16.0)]
        assert conf[0] < conf[1]
        kr = [m(s, e, "risk.p0.5.correct_decision") for e in (0.5, 16.0)]
        assert 0.5 < kr[0] < kr[1] < 1
    # the fake keeps tract totals: zero error there
    assert m("standard", 16.0, "accuracy.total_population.Tract.mae") == 0
    assert m("no_block", 16.0, "accuracy.total_population.Tract.mae") == 0
    # no block-level release: the attack can only place people in block groups
    assert r["scenarios"]["no_block"]["geolevels"][-1] == "BlockGroup"
    assert r["references"]["standard"]["reid.exact_rate"] > 0.85
    # the Kazan-Reiter risk recomputed from the budget, independently
    b = load_preset("pl94-2020").scaled(epsilon="16")
    mech = next(
        x.mechanism for x in b.measurements() if x.geolevel == "Block" and x.query == "detailed"
    )  # the noise the release adds (bounded neighbours: sigma^2 = 1 / rho_q)
    ind = one_level_risk(prior=0.5, noise=NoiseModel.from_mechanism(mech))
    assert m("standard", 16.0, "risk.p0.5.correct_decision") == ind.correct_decision.value
    nb = no_block_budget(load_preset("pl94-2020")).scaled(epsilon="16")
    rho1 = next(
        x.rho for x in nb.measurements() if x.geolevel == "BlockGroup" and x.query == "detailed"
    )
    assert m("no_block", 16.0, "risk.rho_finest") == pytest.approx(float(rho1))
    # seeds: two values per point, with a standard error; run seeds recorded
    p = pts[("standard", 16.0)]["accuracy.total_population.Block.mae"]
    assert len(p["values"]) == 2 and p["se"] is not None
    assert len({x["accuracy_seed"] for x in r["runs"]}) == 8
    t = pq.read_table(out / "runs.parquet").to_pylist()
    assert {row["seed"] for row in t} == {3, 4}
    row = next(
        x
        for x in t
        if x["metric"] == "accuracy.total_population.Block.mae"
        and x["epsilon"] == 16.0
        and x["seed"] == 3
    )
    run = next(
        x
        for x in r["runs"]
        if x["scenario"] == "standard" and x["epsilon"] == 16.0 and x["seed"] == 3
    )
    assert row["value"] == run["metrics"]["accuracy.total_population.Block.mae"]
    assert row["run_seed"] == run["accuracy_seed"]
    # the measured frontier for the social choice
    f, g = frontier_from_results(r, geolevel="Block")
    assert g == np.unique(np.asarray(read_cef(truth_dir).units["geocode"])).size
    assert f.alpha > 0
    with pytest.raises(ConfigError, match="zero error"):
        frontier_from_results(r, geolevel="Tract")
    with pytest.raises(ConfigError, match="no geolevel"):
        frontier_from_results(r, scenario="no_block", geolevel="Block")
    opt = choose_epsilon(
        ChooseOptions(
            frontier="census",
            privacy_cost=100.0,
            funds_per_person=50.0,
            results=out,
            geolevel="Block",
        )
    )
    assert opt["preferences"]["areas"] == g and opt["optimum"]["interior"]
    assert opt["optimum"]["mrt"] == pytest.approx(opt["optimum"]["mrs"], rel=1e-8)


def test_cache_resumes_and_outputs_are_protected(truth_dir, tmp_path):
    engine = FakeEngine()
    out = tmp_path / "res"
    kw = {"seeds": [1], "attack_preset": None, "scenarios": ["standard"]}

    def options(*epsilons):
        return CensusTradeoffOptions(epsilons=epsilons, **kw)

    census_tradeoff(truth_dir, out, options(1, 4), release_runner=engine)
    assert len(engine.calls) == 2
    with pytest.raises(ConfigError, match="exists and is not empty"):
        census_tradeoff(truth_dir, out, options(1, 4, 8), release_runner=engine)
    r = census_tradeoff(truth_dir, out, options(1, 4, 8), overwrite=True, release_runner=engine)
    assert len(engine.calls) == 3  # only epsilon 8 was run again
    assert [p["epsilon"] for p in r["points"]] == [1, 4, 8]
    assert all("reid.confirmed_share" not in p["metrics"] for p in r["points"])
    # a file we did not create is left alone, and refuses a fresh sweep
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not empty"):
        census_tradeoff(truth_dir, other, options(1), release_runner=engine)
    assert (other / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"epsilons": []}, "at least one"),
        ({"epsilons": [0]}, "positive and finite"),
        ({"epsilons": [1, 1]}, "distinct"),
        ({"seeds": [-1]}, "non-negative"),
        ({"scenarios": ["nope"]}, "scenarios must be"),
        ({"preset": "ddp-2010"}, "zCDP"),
        ({"attack_preset": "pl94-2020"}, "without sex and age"),
        ({"workers": 0}, "workers"),
    ],
)
def test_invalid_arguments(truth_dir, tmp_path, kwargs, match):
    workers = kwargs.get("workers", 1)
    given = {k: v for k, v in kwargs.items() if k != "workers"}
    with pytest.raises(ConfigError, match=match):
        options = CensusTradeoffOptions(**{"epsilons": [1], "seeds": [1], **given})
        census_tradeoff(
            truth_dir,
            tmp_path / "x",
            options,
            execution=Execution(workers=workers),
            release_runner=FakeEngine(),
        )


@pytest.mark.slow
def test_real_engine_accuracy_and_risk_match_evaluate_and_risk(truth_dir, tmp_path, capsys):
    """Real releases (no attack, standard allocation): accuracy improves with epsilon, and the
    recorded numbers equal those of 'censusdp evaluate' on the same release and of
    'censusdp risk' at the same budget."""
    out = tmp_path / "res"
    code = main(
        [
            "tradeoff", "census", "--input", str(truth_dir), "--out", str(out),
            "--epsilons", "1,16", "--seeds", "5", "--attack-preset", "none",
            "--scenarios", "standard", "--keep-runs", "--quiet",
        ]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "standard" in printed and "wrote" in printed
    r = json.loads((out / "results.json").read_text())
    pts = {p["epsilon"]: p["metrics"] for p in r["points"]}
    key = "accuracy.total_population.Block.mae"
    assert pts[1.0][key]["mean"] > 2 * pts[16.0][key]["mean"]
    assert (
        pts[1.0]["risk.p0.5.correct_decision"]["mean"]
        < pts[16.0]["risk.p0.5.correct_decision"]["mean"]
    )
    # 'censusdp evaluate' on the kept release gives the same accuracy
    ev = tmp_path / "ev.json"
    run_dir = out / "runs" / "standard_eps16_seed5" / "accuracy"
    assert main(["evaluate", "--truth", str(truth_dir), "--release", str(run_dir),
                 "--json", str(ev)]) == 0  # fmt: skip
    e = json.loads(ev.read_text())["metrics"]
    for lv in ("Tract", "BlockGroup", "Block"):
        for stat in ("mae", "tvd", "rmse"):
            got = pts[16.0][f"accuracy.total_population.{lv}.{stat}"]["mean"]
            assert got == pytest.approx(e["total_population"][lv][stat], rel=1e-12)
            got = pts[16.0][f"accuracy.hispanic*cenrace.{lv}.{stat}"]["mean"]
            assert got == pytest.approx(e["hispanic*cenrace"][lv][stat], rel=1e-12)
    man = json.loads((run_dir / "manifest.json").read_text())
    assert man["epsilon"] == pytest.approx(16.0, abs=1e-6)  # everything published: persons only
    # 'censusdp risk' at the same rho gives the same one-level risk
    rho = r["runs"][-1]["rho_exact"]
    risk_out = tmp_path / "risk"
    assert main(["risk", "--input", str(truth_dir), "--out", str(risk_out), "--rho", rho,
                 "--quiet"]) == 0  # fmt: skip
    risk = json.loads((risk_out / "risk.json").read_text())
    for row in risk["one_level"]:
        p = row["prior"]
        # 'risk' sums to within 1e-12 of the exact value, this module to 1e-15
        assert pts[16.0][f"risk.p{p:g}.correct_decision"]["mean"] == pytest.approx(
            row["correct_decision_probability"], abs=1e-10
        )
        assert pts[16.0][f"risk.p{p:g}.marginal_posterior"]["mean"] == pytest.approx(
            row["marginal_posterior"], abs=1e-10
        )


def test_choose_rejects_foreign_results(tmp_path):
    (tmp_path / "results.json").write_text(json.dumps({"command": "sweep"}))
    with pytest.raises(InputError, match="not a 'censusdp tradeoff census' result"):
        choose_epsilon(
            ChooseOptions(frontier="census", privacy_cost=1, accuracy_value=1, results=tmp_path)
        )
    with pytest.raises(InputError, match="missing"):
        choose_epsilon(
            ChooseOptions(
                frontier="census", privacy_cost=1, accuracy_value=1, results=tmp_path / "no"
            )
        )


@pytest.mark.slow
def test_real_engine_full_sweep_is_monotone_and_matches_the_attack_tools(truth_dir, tmp_path):
    """Both allocations with the attack on real releases (about 4 minutes): averaged over two
    seeds, errors fall and every disclosure measure rises from epsilon 1 to 16; the
    recorded reconstruction rate is what 'censusdp attack reconstruct' finds on the same
    release (JASON sec. 4.1 attack; sec. 8 no-block scenario)."""
    out = tmp_path / "res"
    r = census_tradeoff(
        truth_dir, out, CensusTradeoffOptions(epsilons=[1, 16], seeds=[1, 2]), keep_runs=True
    )
    pts = {(p["scenario"], p["epsilon"]): p["metrics"] for p in r["points"]}
    for s, lv in (("standard", "Block"), ("no_block", "BlockGroup")):
        lo, hi = pts[(s, 1.0)], pts[(s, 16.0)]
        key = f"accuracy.total_population.{lv}.mae"
        assert lo[key]["mean"] > hi[key]["mean"]
        for k in ("reid.exact_rate", "reid.confirmed_share", "risk.p0.5.correct_decision"):
            assert lo[k]["mean"] < hi[k]["mean"], (s, k)
    rec = tmp_path / "rec"
    release = out / "runs" / "standard_eps16_seed1" / "attack"
    code = main(
        ["attack", "reconstruct", "--release", str(release), "--out", str(rec),
         "--truth", str(truth_dir), "--quiet"]
    )  # fmt: skip
    assert code == 0
    summary = json.loads((rec / "summary.json").read_text())
    run = next(
        x
        for x in r["runs"]
        if x["scenario"] == "standard" and x["epsilon"] == 16 and x["seed"] == 1
    )
    assert run["metrics"]["reid.exact_rate"] == summary["match"]["exact_rate"]
    man = json.loads((release / "manifest.json").read_text())
    assert man["epsilon"] == pytest.approx(16.0, abs=1e-6)
