"""Expected errors without the truth (``censusdp evaluate --release RUN``).

A small synthetic state (tests/synth.py) is released for real (pl94-2020 budget, seed
1); its expected errors are predicted from the release alone and checked against the errors the release
and the GLS estimates have against the truth we hold. The pooling arithmetic and the
closed forms are checked independently of the library.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from censusdp.cli import main
from censusdp.data.geography import GeoLevels
from censusdp.data.histograms import person_histogram, pl94_view, unit_histogram
from censusdp.evaluate._html import fmt
from censusdp.evaluate.core import evaluate_data, read_release
from censusdp.evaluate.errorbars import (
    MEASURES,
    SQRT_2_OVER_PI,
    ErrorPool,
    expected_errors,
    gls_expected_errors,
)
from censusdp.evaluate.errorbars_report import predicted_section, render_expected_report
from censusdp.infer.gls import Z90
from censusdp.infer.release import release_gls
from censusdp.io.cef import read_cef
from censusdp.io.nmf_files import read_nmf_rows
from censusdp.io.rundir import RunDir, read_manifest
from censusdp.tables import table_arrays
from synth import block_codes, make_cef, write_cef

SIMS = 3


@pytest.fixture(scope="module")
def predicted(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A 96-block state released for real, and its expected errors from the release alone."""
    d = tmp_path_factory.mktemp("errorbars")
    blocks = block_codes(n_counties=2, tracts=3, bgs=2, blocks=8)
    write_cef(d / "cef", *make_cef(np.random.default_rng(0), blocks, mean_hh=3.0))
    run = d / "run"
    assert (
        main(["run", "--input", str(d / "cef"), "--out", str(run), "--seed", "1", "--quiet"]) == 0
    )
    result = expected_errors(run, simulations=SIMS, seed=3, html_path=d / "e.html")
    c = read_cef(d / "cef")
    actual, _ = evaluate_data(c.persons, c.units, read_release(run), district_draws=1)
    return {"dir": d, "run": run, "cef": d / "cef", "result": result, "actual": actual}


def test_error_pool_arithmetic() -> None:
    """MAE, RMSE, bias, their Monte Carlo errors and the pooled quantiles, by hand."""
    levels = ("US", "Block")
    pool = ErrorPool(levels)

    def tables(p1_block: list[int]) -> dict[str, list[np.ndarray]]:
        out = {m: [np.zeros((1, 2), np.int64), np.zeros((2, 2), np.int64)] for m in MEASURES}
        out["P1"] = [np.zeros((1, 2), np.int64), np.array(p1_block, np.int64).reshape(2, 2)]
        return out

    truth = tables([10, 0, 5, 5])
    sims = [[12, 0, 5, 1], [10, 3, 5, 5], [9, 0, 8, 5]]
    for s in sims:
        pool.add(truth, tables(s))
    rec = pool.summary()["P1"]["Block"]
    errs = [np.array(s) - np.array([10, 0, 5, 5]) for s in sims]
    maes = [np.abs(e).mean() for e in errs]
    mses = [(e**2).mean() for e in errs]
    assert rec["counts_per_simulation"] == 4
    assert rec["mae"] == pytest.approx(np.mean(maes))
    assert rec["mae_mc_se"] == pytest.approx(np.std(maes, ddof=1) / math.sqrt(3))
    assert rec["mae_sd_one_release"] == pytest.approx(np.std(maes, ddof=1))
    assert rec["rmse"] == pytest.approx(math.sqrt(np.mean(mses)))
    assert rec["bias"] == pytest.approx(np.mean([e.mean() for e in errs]))
    pooled = np.sort(np.concatenate(errs))  # [-4, -1, 0, 0, 0, 0, 0, 0, 0, 2, 3, 3]
    assert rec["interval90"] == [int(pooled[0]), int(pooled[-1])]
    assert rec["abs_q50"] == 0 and rec["abs_q90"] == 3 and rec["abs_q95"] == 4
    # total population is P1's first column: block errors (2, 0), (0, 0), (-1, 3)
    tp = pool.summary()["total_population"]["Block"]
    assert tp["mae"] == pytest.approx(np.mean([1.0, 0.0, 2.0]))
    assert tp["bias"] == pytest.approx(np.mean([1.0, 0.0, 1.0]))
    assert pool.summary()["P2"]["Block"]["mae"] == 0.0
    by_size = pool.by_size()["Block"]
    # n counts places (2 blocks), not errors pooled over the 3 simulations
    assert sum(r["n"] for r in by_size) == 2
    assert sum(r["n_pooled"] for r in by_size) == 6


def test_predicted_errors_agree_with_the_truth(predicted) -> None:
    """Released counts: the MAE predicted from the release alone is the MAE measured
    against the truth, within a factor 1.6 or 3.5 sd of one release's MAE for every
    (measure, level) with 30 or more counts, and within 0.8-1.25 at the median."""
    res, actual = predicted["result"], predicted["actual"]["metrics"]
    ratios = []
    for m in MEASURES:
        for lv in res["geolevels"]:
            p = res["released"]["by_level"][m][lv]
            a = actual[m][lv]["mae"]
            if p["counts_per_simulation"] < 30 or p["mae"] == 0:
                continue
            spread = math.hypot(p["mae_sd_one_release"], p["mae_mc_se"])
            ratio = a / p["mae"]
            ratios.append(ratio)
            assert 1 / 1.6 <= ratio <= 1.6 or abs(a - p["mae"]) <= 3.5 * spread, (m, lv, a, p)
    assert len(ratios) >= 20
    assert 0.8 <= float(np.median(ratios)) <= 1.25, ratios


def test_gls_closed_form_matches_the_truth_and_the_estimates(predicted) -> None:
    """GLS: the predicted RMSE is the mean sd of ``censusdp infer``'s rows and agrees with
    the RMSE measured against the truth at the block level (thousands of counts)."""
    run, res = predicted["run"], predicted["result"]
    gls = res["gls"]["by_level"]
    est = release_gls(run)
    h = est.hierarchy
    c = read_cef(predicted["cef"])
    truth = table_arrays(person_histogram(pl94_view(c.persons), h), unit_histogram(c.units, h), h)
    names = h.geolevels.names
    sq: dict[str, list[float]] = {}
    for chunk in est.chunks:
        li = chunk.level
        t = np.concatenate(
            [truth["P1"][li][:, :1]] + [truth[n][li] for n in ("P1", "P2", "P3", "P4", "P5", "H1")],
            axis=1,
        )[chunk.start : chunk.stop]
        cols = [j for j, n in enumerate(est.lines) if n.startswith("P1_")]
        rec = gls["P1"][names[li]]
        assert rec["mean_sd"] == pytest.approx(chunk.sd[:, cols].mean(), rel=1e-9)
        assert rec["mae"] == pytest.approx(SQRT_2_OVER_PI * rec["mean_sd"])
        assert rec["ci90_halfwidth"] == pytest.approx(Z90 * rec["mean_sd"])
        e = chunk.estimate - t
        acc = sq.setdefault(names[li], [0.0, 0])
        acc[0] += float((e[:, cols] ** 2).sum())
        acc[1] += e[:, cols].size
    ss, n = sq["Block"]
    assert 0.85 <= math.sqrt(ss / n) / gls["P1"]["Block"]["rmse"] <= 1.15


def test_raw_measurement_errors_from_the_nmf(predicted) -> None:
    """Raw total population: min over the level's queries of sqrt(rows x variance), read
    from the NMF directly (every query partitions the persons)."""
    run, res = predicted["run"], predicted["result"]
    t = read_nmf_rows(
        run / "noisy_measurements.parquet", columns=["geolevel", "geocode", "query", "variance"]
    )
    h, _ = RunDir(run).invariants(GeoLevels.from_pairs(read_manifest(run)["geolevels"]))
    for li, lv in enumerate(h.geolevels.names):
        first = h.geocodes[li][0]
        sub = t.filter(pc.and_(pc.equal(t["geolevel"], lv), pc.equal(t["geocode"], first)))
        q = np.asarray(sub["query"].to_pylist())
        v = np.asarray(sub["variance"].to_numpy())
        if not q.size:  # the US of a one-state input: the nation's, not measured
            assert lv == "US"
            assert "mean_sd" not in res["raw"]["by_level"]["total_population"].get(lv, {})
            continue
        best = min(math.sqrt((q == name).sum() * v[q == name][0]) for name in set(q.tolist()))
        assert res["raw"]["by_level"]["total_population"][lv]["mean_sd"] == pytest.approx(best)
        gls_sd = res["gls"]["by_level"]["total_population"][lv]["mean_sd"]
        assert gls_sd <= best * (1 + 1e-9)


def test_report_and_cli_without_truth(predicted, capsys) -> None:
    """The page says how far off tract counts typically are; the CLI needs no --truth."""
    html = (predicted["dir"] / "e.html").read_text()
    tract = predicted["result"]["released"]["by_level"]["total_population"]["Tract"]
    assert "census tracts are typically off by about" in html
    assert f"<b>{tract['mae']:,.1f}</b>" in html
    assert "No confidential data was used" in html
    page = render_expected_report(predicted["result"])
    assert "Expected errors by geolevel and table" in page
    # the CSV downloads hold numbers: the MAE and its Monte Carlo error in two columns
    from report_csv import mixed_cells, table_csvs

    assert mixed_cells(page) == []
    table = table_csvs(page)["expected_total_population"]
    assert table[0][2] == "published: margin of error (90%)"
    assert table[0][3:5] == ["released: MAE", "released: MAE MC se"]
    assert all(float(row[3]) >= 0 for row in table[1:] if row[3])
    margin = predicted["result"]["released"]["margins"]["total_population"]["Tract"]
    assert f"<b>&plusmn;{margin['moe90']:,.1f}</b>" in html
    # the release by its directory name, never where it lies on this machine
    assert f"<code>{predicted['run'].name}</code>" in html
    assert str(predicted["run"].resolve()) not in html and "docs/" not in html
    out = predicted["dir"] / "cli.json"
    rc = main(
        ["evaluate", "--release", str(predicted["run"]), "--json", str(out), "--simulations", "1",
         "--seed", "3", "--quiet"]
    )  # fmt: skip
    assert rc == 0
    written = json.loads(out.read_text())
    assert written["released"]["simulations"] == 1 and written["gls"]["available"] is True
    # seeded: simulation k uses the k-th seed of SeedSequence(--seed), so --seed 3 with one
    # simulation re-releases the MDF with the fixture's first seed; the rough truth drawn
    # from one re-release is not the one drawn from three, but the same command again
    # repeats its numbers exactly
    first = predicted["result"]["released"]
    assert written["released"]["seeds"] == first["seeds"][:1] and first["seed"] == 3
    assert len(first["seeds"]) == SIMS == len(set(first["seeds"]))
    rc = main(
        ["evaluate", "--release", str(predicted["run"]), "--json", str(out) + "1",
         "--simulations", "1", "--seed", "3", "--quiet"]
    )  # fmt: skip
    twice = json.loads(Path(str(out) + "1").read_text())
    for m in MEASURES:
        for lv in written["geolevels"]:
            again = twice["released"]["by_level"][m][lv]["mae_per_simulation"]
            assert again == written["released"]["by_level"][m][lv]["mae_per_simulation"], (m, lv)
    assert "no Monte Carlo error" in render_expected_report(written)
    printed = capsys.readouterr().out
    assert "released MAE" in printed and "MC se: its Monte Carlo standard error" in printed
    assert re.search(r"^geolevel +places +released MAE", printed, re.M)  # places, not units
    rc = main(["evaluate", "--release", str(predicted["run"]), "--json", str(out) + "2",
               "--trials", "2", "--quiet"])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2 and "needs --input DIR" in err and err.count("\n") == 1


def test_dhc_lite_gls_refused_in_one_line(predicted, tmp_path: Path) -> None:
    """GLS covers pl94 releases only; on dhc-lite the closed-form part says why, in one line."""
    import shutil

    run = tmp_path / "run"
    run.mkdir()
    for name in ("manifest.json", "noisy_measurements.parquet", "invariants.parquet",
                 "invariant_totals.parquet"):  # fmt: skip
        src = predicted["run"] / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, run / name)
    m = json.loads((run / "manifest.json").read_text())
    m["schema"] = "dhc-lite"
    (run / "manifest.json").write_text(json.dumps(m))
    out = gls_expected_errors(run)
    assert out["available"] is False
    assert "pl94" in out["reason"] and "dhc-lite" in out["reason"] and "\n" not in out["reason"]


def test_predicted_next_to_measured_section(predicted) -> None:
    """With the truth, the report can show the prediction next to the measured MAE."""
    res, actual = predicted["result"], predicted["actual"]
    assert predicted_section({"metrics": actual["metrics"]}) == []
    html = "\n".join(predicted_section({"metrics": actual["metrics"], "expected": res}))
    assert html.count("<tr>") == 1 + len(MEASURES) * len(res["geolevels"])
    p = res["released"]["by_level"]["P1"]["Block"]["mae"]
    a = actual["metrics"]["P1"]["Block"]["mae"]
    # shown rounded; downloaded whole (data-csv)
    assert (
        f'<td>P1</td><td>Block</td><td data-csv="[{float(f"{a:.10g}")!r}]">{fmt(a, 3)}</td>' in html
    )
    ratio = float(f"{a / p:.10g}")
    assert f'<td data-csv="[{ratio!r}]">{fmt(a / p, 3)}</td></tr>' in html


def test_the_margins_are_infer_margins(predicted, tmp_path: Path) -> None:
    """One margin per count: ``evaluate --release`` reports, per level and measure, the
    root mean square of the very ``moe90`` that ``censusdp infer --simulations K`` writes
    in ``margins.parquet`` with the same seed (the same simulations, from the same rough
    truth), and the plain AMC's beside it."""
    out = tmp_path / "gls"
    args = ["infer", str(predicted["run"]), "--out", str(out), "--quiet"]
    assert main([*args, "--simulations", str(SIMS), "--seed", "3", "--format", "parquet"]) == 0
    m = pq.read_table(out / "margins.parquet").to_pandas()
    margins = predicted["result"]["released"]["margins"]
    assert predicted["result"]["released"]["calibration_simulations"] == 0
    for lv in ("County", "Tract", "BlockGroup", "Block"):
        rows = m[(m.geolevel == lv) & (m.variable == "P1_001N")]
        want = float(np.sqrt((rows.moe90**2).mean()))
        assert margins["total_population"][lv]["moe90"] == pytest.approx(want, rel=1e-9)
        rows = m[(m.geolevel == lv) & (m.table == "P3")]
        want = float(np.sqrt((rows.moe90**2).mean()))
        assert margins["P3"][lv]["moe90"] == pytest.approx(want, rel=1e-9)
        rec = margins["total_population"][lv]  # the rough truth's over the plain AMC's
        assert rec["calibration"] == pytest.approx(rec["moe90"] / rec["moe90_plain"], rel=1e-9)
