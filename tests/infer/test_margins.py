"""``censusdp infer``'s margins of every published geounit and of a plan's districts, on a
release made on the default (optimized) spine of a small generated state.

Checks: the long form joins ``tables/`` by GEOID with no unmatched row and carries the
published values; a tabulation geounit that is one spine geounit has the spine
geounit's own sd (from the tree) and a block group that is not gets the sd of its
blocks' sum; the sds are right against the truth (z-scores of variance about 1 at the
block groups, blocks and districts; a variance off by 2x fails); a plan's mistakes are
one-line errors naming the row.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from censusdp.cli import main
from censusdp.infer.published import LONG_COLUMNS, published_variables
from censusdp.io.cef import read_cef
from censusdp.tables import tabulate
from censusdp.tables.geoids import geoids


@pytest.fixture(scope="module")
def spine_release(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Vermont at 3% of its tracts, released on the optimized spine with seed 2, with a
    plan of 6 districts (runs of blocks in geocode order)."""
    d = tmp_path_factory.mktemp("margins")
    cef, run, out = d / "cef", d / "run", d / "gls"
    gen = ["generate", "--state", "VT", "--scale", "0.03", "--seed", "2", "--out", str(cef)]
    assert main([*gen, "--quiet"]) == 0
    assert main(["run", "--input", str(cef), "--out", str(run), "--seed", "2", "--quiet"]) == 0
    assert json.loads((run / "manifest.json").read_text())["spine"]["kind"] == "optimized"
    blocks = pq.read_table(run / "tables" / "P1.parquet", filters=[("SUMLEV", "=", "750")])
    ids = np.asarray(blocks.column("GEOID").to_pylist())
    plan = d / "plan.csv"
    district = np.minimum(np.arange(ids.size) * 6 // ids.size, 5) + 1
    pd.DataFrame({"GEOID20": ids, "DISTRICT": district}).to_csv(plan, index=False)
    args = ["infer", str(run), "--out", str(out), "--geography", str(plan), "--quiet"]
    sims = ["--simulations", "2", "--seed", "4", "--amc-truth", "rough"]  # 4 re-releases
    assert main([*args, *sims]) == 0
    return {"cef": cef, "run": run, "out": out, "plan": plan, "dir": d}


def _truth(spine_release) -> pd.DataFrame:
    from censusdp.data.geography import GeoLevels, Hierarchy

    run = spine_release["run"]
    man = json.loads((run / "manifest.json").read_text())
    codes = np.sort(
        pq.read_table(run / "invariants.parquet").column("geocode").to_numpy(zero_copy_only=False)
    ).astype("U16")
    h = Hierarchy.from_blocks(codes, GeoLevels.from_pairs(man["geolevels"]))
    cef = read_cef(spine_release["cef"])
    t = tabulate(cef.persons, cef.units, h)
    frames = [
        t[name]
        .drop_columns(["geolevel", "geocode", "NAME"])
        .to_pandas()
        .melt(id_vars=["GEOID", "SUMLEV"], value_name="truth")
        for name in t
    ]
    return pd.concat(frames, ignore_index=True)


def test_margins_join_the_published_tables(spine_release) -> None:
    """Every published geounit and variable, no more: a plain join on GEOID and SUMLEV,
    in both directions. ``margins.*`` holds the hierarchy's levels and ``places.*`` the
    geographies off it (Vermont's county subdivisions, SUMLEV 060), which are rows of
    ``tables/`` too."""
    margins = pq.read_table(spine_release["out"] / "margins.parquet").to_pandas()
    places = pq.read_table(spine_release["out"] / "places.parquet").to_pandas()
    assert tuple(margins.columns) == LONG_COLUMNS
    assert set(places.SUMLEV) == {"060"} and not set(margins.SUMLEV) & {"060", "160"}
    m = pd.concat([margins, places], ignore_index=True)
    variables = published_variables()
    for name in ("P1", "P3", "H1"):
        pub = pq.read_table(spine_release["run"] / "tables" / f"{name}.parquet").to_pandas()
        assert (pub.SUMLEV == "060").sum() == places.GEOID.nunique()
        long = pub.melt(id_vars=["geolevel", "geocode", "GEOID", "SUMLEV", "NAME"])
        j = m[m.table == name].merge(
            long, on=["GEOID", "SUMLEV", "NAME", "variable"], how="outer", indicator=True
        )
        assert (j._merge == "both").all(), j[j._merge != "both"].head()
        assert (j.value_x == j.value_y).all()
        assert (j.geolevel_x == j.geolevel_y).all()
    assert len(m) == len(pub) * len(variables)
    csv = pd.read_csv(spine_release["out"] / "margins.csv", dtype={"GEOID": str, "SUMLEV": str})
    assert set(csv.SUMLEV) == {"010", "040", "050", "140", "150"}  # blocks: Parquet only
    above = margins[margins.SUMLEV != "750"].reset_index(drop=True)
    np.testing.assert_allclose(csv.gls_sd.to_numpy(), above.gls_sd.to_numpy(), rtol=1e-12)


def test_spine_units_keep_their_sd_and_block_groups_are_sums(spine_release) -> None:
    """A tract that is one spine tract has the tree's sd for it; every geounit's GLS
    estimate is the sum of its blocks'; the tabulation block groups (not spine units)
    have sds, and they are not the sum of the blocks' variances."""
    out = spine_release["out"]
    m = pq.read_table(out / "margins.parquet", filters=[("variable", "=", "P1_001N")]).to_pandas()
    e = pq.read_table(out / "estimates.parquet", filters=[("query", "=", "total")]).to_pandas()
    man = json.loads((out / "manifest.json").read_text())
    assert man["spine"] == "optimized" and man["margins"]["geounits"]["BlockGroup"] > 0
    # spine county and tract codes end with the tabulation code (state-part prefix before
    # it); a state without AIAN areas has one spine county per county, so a county's sd
    # is the tree's own, no covariance between spine geounits dropped (docs/inference.md)
    for level in ("County", "Tract"):
        spine_units, units = e[e.geolevel == level], m[m.geolevel == level]
        hits = 0
        for _, row in units.iterrows():
            hit = spine_units[spine_units.geocode.astype(str).str.endswith(row.GEOID[2:])]
            if len(hit) == 1:
                hits += 1
                assert abs(hit.sd.iloc[0] - row.gls_sd) < 1e-6 * max(1.0, row.gls_sd)
                assert abs(hit.estimate.iloc[0] - row.gls_estimate) < 1e-6 * abs(row.gls_estimate)
        assert hits == len(units) if level == "County" else hits > 0, (level, hits)
    blocks = m[m.geolevel == "Block"].copy()
    blocks["bg"] = blocks.GEOID.str[:12]
    bg = m[m.geolevel == "BlockGroup"].set_index("GEOID")
    sums = blocks.groupby("bg").gls_estimate.sum()
    np.testing.assert_allclose(bg.gls_estimate.loc[sums.index], sums, rtol=1e-9, atol=1e-6)
    indep = np.sqrt(blocks.groupby("bg").gls_sd.apply(lambda s: (s**2).sum()))
    assert (bg.gls_sd > 0).all()
    assert (np.abs(bg.gls_sd.loc[indep.index] / indep - 1) > 0.05).any()


def _z(frame: pd.DataFrame) -> np.ndarray:
    f = frame[frame.gls_sd > 0]
    return ((f.truth - f.gls_estimate) / f.gls_sd).to_numpy()


def test_sds_are_right_against_the_truth(spine_release) -> None:
    """z = (truth - estimate) / sd has variance about 1 at the block groups (sums of blocks
    across spine block groups), the blocks and the districts (a variance off by 2x gives
    0.5 or 2); the 90% intervals of the district and block group totals cover."""
    truth = _truth(spine_release)
    m = pq.read_table(spine_release["out"] / "margins.parquet").to_pandas()
    m = m.merge(truth, on=["GEOID", "SUMLEV", "variable"], how="left")
    assert m.truth.notna().all()
    exact = m[m.gls_sd == 0]
    assert (exact.gls_estimate == exact.truth).all()
    for level, lo, hi in (("BlockGroup", 0.7, 1.35), ("Block", 0.9, 1.1)):
        z = _z(m[m.geolevel == level])
        assert z.size > 200 and lo < z.var() < hi and abs(z.mean()) < 0.2, (level, z.var())
    d = pq.read_table(spine_release["out"] / "districts.parquet").to_pandas()
    plan = pd.read_csv(spine_release["plan"], dtype=str)
    blocks = truth[truth.SUMLEV == "750"].merge(plan, left_on="GEOID", right_on="GEOID20")
    dt = blocks.groupby(["DISTRICT", "variable"]).truth.sum().reset_index()
    d = d.merge(dt, left_on=["GEOID", "variable"], right_on=["DISTRICT", "variable"])
    assert len(d) == 6 * len(published_variables())
    z = _z(d)
    assert z.size > 500 and 0.7 < z.var() < 1.35, z.var()
    # published district totals are the sums of the published blocks
    pub = pq.read_table(spine_release["run"] / "tables" / "P1.parquet").to_pandas()
    pb = pub[pub.SUMLEV == "750"].merge(plan, left_on="GEOID", right_on="GEOID20")
    tot = pb.groupby("DISTRICT").P1_001N.sum()
    dd = d[d.variable == "P1_001N"].set_index("GEOID")
    assert (dd.value.loc[tot.index] == tot).all()


@pytest.mark.parametrize(
    "edit,words",
    [
        ("unknown", ["line 3", "'GEOID20'", "'509999999999999'", "not a block GEOID"]),
        ("twice", ["line 5", "assigned again", "first at line 2"]),
        ("missing", ["1 block(s)", "in no district", "GEOID"]),
        ("empty", ["line 4", "'DISTRICT'", "empty district"]),
    ],
)
def test_plan_mistakes_are_one_line(spine_release, tmp_path, capsys, edit, words) -> None:
    plan = pd.read_csv(spine_release["plan"], dtype=str)
    if edit == "unknown":
        plan.loc[1, "GEOID20"] = "509999999999999"
    elif edit == "twice":
        plan.loc[3, "GEOID20"] = plan.loc[0, "GEOID20"]
    elif edit == "missing":
        plan = plan.iloc[1:]
    else:
        plan.loc[2, "DISTRICT"] = ""
    path = tmp_path / "plan.csv"
    plan.to_csv(path, index=False)
    args = ["infer", str(spine_release["run"]), "--out", str(tmp_path / "o")]
    assert main([*args, "--geography", str(path), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(path) in err, err
    for w in words:
        assert w in err, (w, err)
    assert not (tmp_path / "o").exists()


def test_plan_as_parquet_and_pipe_delimited_file(spine_release, tmp_path) -> None:
    """A Parquet plan and a header-less pipe-delimited block-assignment file give the
    same districts as the CSV."""
    from censusdp.infer.plan import read_plan
    from censusdp.io.rundir import RunDir

    plan = pd.read_csv(spine_release["plan"], dtype=str)
    plan.to_parquet(tmp_path / "plan.parquet")
    (tmp_path / "baf.txt").write_text(
        "".join(f"{g}|{d}\n" for g, d in zip(plan.GEOID20, plan.DISTRICT, strict=True))
    )
    from censusdp.data.geography import GeoLevels

    man = json.loads((spine_release["run"] / "manifest.json").read_text())
    h, _ = RunDir(spine_release["run"]).invariants(GeoLevels.from_pairs(man["geolevels"]))
    ref = read_plan(spine_release["plan"], h)
    np.testing.assert_array_equal(read_plan(tmp_path / "plan.parquet", h), ref)
    np.testing.assert_array_equal(read_plan(tmp_path / "baf.txt", h), ref)
    order = dict(zip(geoids(h.geocodes[-1], 16).tolist(), ref.tolist(), strict=True))
    assert all(order[g] == d for g, d in zip(plan.GEOID20, plan.DISTRICT, strict=True))


def test_amc_margins_of_the_published_counts(spine_release) -> None:
    """The AMC margins (K = 2 re-releases of the MDF, then 2 of the rough truth drawn
    from them): 0 where the invariants fix the count, moe95 / moe90 = 1.96 / 1.645,
    recorded K, truth and seeds (the rough truth's after the first generation's, then
    the seed of its draw); and they predict the published block and district counts'
    actual error against the truth within a factor 1.6 (root mean square over every
    published variable), where the GLS sd of the same cells is several times larger
    (the published counts are the better numbers there)."""
    from censusdp.infer.amc import amc_seeds

    out = spine_release["out"]
    man = json.loads((out / "manifest.json").read_text())
    amc = man["margins"]["amc"]
    assert amc["simulations"] == 2 and amc["seed"] == 4 and len(amc["seeds"]) == 2
    assert amc["truth"] == "rough" and "deconvolved" in amc["plausible_truth"]
    assert amc["seeds"] + amc["rough_seeds"] == amc_seeds(4, 5)
    assert amc["calibration_simulations"] == 0
    factors = amc["calibration_factors"]
    levels = {"US", "State", "County", "Tract", "BlockGroup", "Block"}
    assert set(factors) == levels | {"CountySubdivision", "District"}
    assert all(f["P1_001N"] == 1.0 for f in factors.values())  # no calibration
    m = pq.read_table(out / "margins.parquet").to_pandas()
    assert m.moe90.notna().all()
    fixed = m[(m.variable == "H1_001N") | ((m.variable == "P1_001N") & (m.SUMLEV == "040"))]
    assert (fixed.moe90 == 0).all()
    pos = m[m.moe90 > 0]
    np.testing.assert_allclose(pos.moe95 / pos.moe90, 1.959963984540054 / 1.6448536269514722)
    truth = _truth(spine_release)
    m = m.merge(truth, on=["GEOID", "SUMLEV", "variable"])
    blocks = m[(m.geolevel == "Block") & m.table.isin(["P1", "P3"])]
    predicted = np.sqrt(((blocks.moe90 / 1.6448536269514722) ** 2).mean())
    actual = np.sqrt(((blocks.value - blocks.truth) ** 2).mean())
    assert 1 / 1.6 < predicted / actual < 1.6, (predicted, actual)
    gls = np.sqrt((blocks.gls_sd**2).mean())
    assert gls > 3 * actual
    assert (blocks[blocks.gls_sd > 0].preferred == "value").mean() > 0.9
    assert set(m.preferred.dropna()) <= {"value", "gls"} and m.preferred.notna().all()


def test_python_api_returns_the_long_forms(spine_release, tmp_path) -> None:
    """``censusdp.infer_margins`` returns the same tables the command writes (pyarrow;
    ``.to_pandas()``); a CSV-only output holds every row (blocks included) and reads
    back with GEOIDs as strings."""
    import censusdp

    got = censusdp.infer_margins(
        spine_release["run"], tmp_path / "o", geography=spine_release["plan"], formats=("csv",)
    )
    assert set(got) == {"margins", "places", "districts"}
    ref = pq.read_table(spine_release["out"] / "districts.parquet").to_pandas()
    d = got["districts"].to_pandas()
    assert list(d.columns) == list(LONG_COLUMNS) and len(d) == len(ref)
    np.testing.assert_allclose(d.gls_sd, ref.gls_sd, rtol=1e-9)
    assert (d.value.to_numpy() == ref.value.to_numpy()).all() and d.moe90.isna().all()
    assert d.preferred.isna().all()
    m = got["margins"].to_pandas()  # CSV only: the blocks too, GEOIDs as strings
    assert set(m.GEOID.str.len()) == {2, 5, 11, 12, 15} and "750" in set(m.SUMLEV)
    ref = pq.read_table(spine_release["out"] / "margins.parquet").to_pandas()
    assert len(m) == len(ref) and (m.GEOID.to_numpy() == ref.GEOID.to_numpy()).all()


def test_evaluate_release_reports_the_margins_sds(spine_release) -> None:
    """``censusdp evaluate --release`` (no truth) gives the GLS errors of the same
    published geounits as ``margins.parquet`` (the tabulation block groups, not the
    spine's), so a reader sees one GLS margin per count."""
    from censusdp.evaluate.errorbars import gls_expected_errors

    res = gls_expected_errors(spine_release["run"])["gls"]["by_level"]["total_population"]
    m = pq.read_table(
        spine_release["out"] / "margins.parquet", filters=[("variable", "=", "P1_001N")]
    ).to_pandas()
    for level in ("County", "Tract", "BlockGroup", "Block"):
        sd = m[m.geolevel == level].gls_sd
        assert res[level]["counts"] == len(sd)
        assert res[level]["mean_sd"] == pytest.approx(sd.mean(), rel=1e-9)
        assert res[level]["rmse"] == pytest.approx(float(np.sqrt((sd**2).mean())), rel=1e-9)


def test_amc_truth_is_the_published_tables(spine_release) -> None:
    """The AMC's plausible truth is what the release published: the tables it re-reads
    from the MDF equal the release's tables at every level (so each simulated error is
    measured against the truth it was simulated from), and the plan carries the
    release's own estimation choices."""
    from censusdp.infer.release import _amc_plan, _published_levels
    from censusdp.io.rundir import RunDir
    from censusdp.release.spine import geography_of_run
    from censusdp.tables import TABLE_NAMES

    run = RunDir(spine_release["run"])
    man = run.manifest()
    from censusdp.data.geography import GeoLevels

    h, _ = run.invariants(GeoLevels.from_pairs(man["geolevels"]))
    geo = geography_of_run(run.path, man, h)
    plan = _amc_plan(run, man, geo)
    published = _published_levels(run, geo.tabulation)
    for lv in range(geo.tabulation.n_levels):
        truth = np.concatenate([plan.truth[t][lv] for t in TABLE_NAMES], axis=1)
        np.testing.assert_array_equal(truth, published[lv])
    assert plan.options.estimator == man["estimator"]
    assert plan.options.fidelity == man["fidelity"]["mode"]
    assert plan.options.max_children == man["max_children"]


def test_calibration_of_the_release_truth(spine_release) -> None:
    """``truth="release"`` with a calibration: the first generation re-releases the MDF
    (the same seeds as the rough truth's first generation), the second the first
    replicate; its factors are 1 where the invariants fix the count; the rough truth
    refuses a calibration."""
    from censusdp.errors import InternalError
    from censusdp.infer.amc import amc_seeds, simulate_margins
    from censusdp.infer.options import MarginOptions
    from censusdp.infer.release import amc_plan

    plan = amc_plan(spine_release["run"])
    release = MarginOptions(simulations=1, seed=4, calibration=1, truth="release")
    res = simulate_margins(plan, [], release)
    assert res.truth == "release" and res.seeds == amc_seeds(4, 1) and not res.rough_seeds
    assert res.second_seeds == amc_seeds(4, 2)[1:]
    assert res.factors[1][0] == 1.0  # the state total: an invariant
    assert all((np.isfinite(f) & (f > 0)).all() for f in res.factors)
    assert res.levels[3][:, 0].sum() > 0 and res.raw_levels[3] is not res.levels[3]
    rough = SimpleNamespace(simulations=1, seed=4, truth="rough", calibration=1)
    with pytest.raises(InternalError):  # what the options refuse, past their check
        simulate_margins(plan, [], rough)  # type: ignore[arg-type]


def test_amc_truth_options() -> None:
    """``--amc-truth`` is one of the AMC's truths; a calibration needs the release's."""
    from censusdp.errors import ConfigError
    from censusdp.infer.amc import TRUTHS
    from censusdp.infer.options import AMC_TRUTHS, MarginOptions

    assert AMC_TRUTHS == TRUTHS and MarginOptions().truth == "rough"
    with pytest.raises(ConfigError, match="--amc-truth must be one of"):
        MarginOptions(truth="smooth")
    with pytest.raises(ConfigError, match="give --amc-truth release"):
        MarginOptions(simulations=2, calibration=2)
    assert MarginOptions(simulations=2, calibration=2, truth="release").calibration == 2


def test_calibration_factors() -> None:
    """``b / c`` per variable pooled over geounits: the root of the ratio of the summed
    mean squares; 1 where either generation has no error (an exact count)."""
    from censusdp.infer.amc import calibration_factors

    first = np.array([[4.0, 0.0, 1.0], [12.0, 0.0, 0.0]])
    second = np.array([[1.0, 3.0, 0.0], [3.0, 0.0, 0.0]])
    np.testing.assert_allclose(calibration_factors(first, second), [2.0, 1.0, 1.0])


def test_places_and_county_subdivisions(spine_release) -> None:
    """A spine release publishes its blocks' place codes (``spine.parquet``), and
    ``places.*`` holds Vermont's county subdivisions (SUMLEV 060: Vermont is a strong-MCD
    state, and the generated state has no AIAN area): GEOID state + county + code, each
    value and GLS estimate the sum of its published blocks', an AMC margin, and GLS sds
    right against the truth (z-scores of variance about 1; the blocks' variances summed
    without their covariances would give far less)."""
    run, out = spine_release["run"], spine_release["out"]
    spine = pq.read_table(run / "spine.parquet", columns=["geocode", "place"]).to_pandas()
    assert (spine.place != "").all()  # every Vermont block is in a town
    m = pq.read_table(out / "margins.parquet").to_pandas()
    places = pq.read_table(out / "places.parquet").to_pandas()
    assert tuple(places.columns) == LONG_COLUMNS
    assert set(places.SUMLEV) == {"060"}
    assert set(places.geolevel) == {"CountySubdivision"}
    assert places.NAME.str.startswith("County Subdivision ").all()
    spine["GEOID"] = spine.geocode.str[:5] + spine.place
    assert set(places.GEOID) == set(spine.GEOID)
    blocks = m[m.SUMLEV == "750"]
    blocks = blocks.assign(geocode=blocks.GEOID.str[:12] + blocks.GEOID.str[11:])
    merged = blocks.merge(spine, on="geocode", suffixes=("", "_cs"))
    assert len(merged) == len(blocks)
    sums = merged.groupby(["GEOID_cs", "variable"], observed=True)[["value", "gls_estimate"]]
    sums = sums.sum().sort_index()
    got = places.set_index(["GEOID", "variable"]).loc[sums.index]
    np.testing.assert_array_equal(got.value, sums.value)
    np.testing.assert_allclose(got.gls_estimate, sums.gls_estimate, atol=1e-6)
    assert places.moe90.notna().all() and (places.moe90 > 0).any()
    truth = _truth(spine_release)
    blk = truth[truth.SUMLEV == "750"].rename(columns={"GEOID": "bgeoid"})
    blk["geocode"] = blk.bgeoid.str[:12] + blk.bgeoid.str[11:]
    blk = blk.merge(spine, on="geocode").groupby(["GEOID", "variable"]).truth.sum()
    z = places.set_index(["GEOID", "variable"]).join(blk)
    z = z[z.gls_sd > 0]
    score = (z.truth - z.gls_estimate) / z.gls_sd
    assert len(score) > 500 and 0.6 < score.var() < 1.6, score.var()


@pytest.mark.slow
def test_places_and_aian_areas_of_a_state_with_both(tmp_path) -> None:
    """Oklahoma (not a strong-MCD state, with AIAN areas): ``places.*`` holds places
    (SUMLEV 160, GEOID state + code) and every AIAN area whole (250, the AIANNHCE) and as
    its state part (280, state + AIANNHCE), each value the sum of its published blocks,
    every AIAN block in exactly its area."""
    cef, run, out = tmp_path / "cef", tmp_path / "run", tmp_path / "gls"
    gen = ["generate", "--state", "OK", "--scale", "0.02", "--seed", "1", "--out", str(cef)]
    assert main([*gen, "--quiet"]) == 0
    assert main(["run", "--input", str(cef), "--out", str(run), "--seed", "1", "--quiet"]) == 0
    assert main(["infer", str(run), "--out", str(out), "--format", "parquet", "--quiet"]) == 0
    spine = pq.read_table(run / "spine.parquet", columns=["geocode", "aian_area", "place"])
    spine = spine.to_pandas()
    places = pq.read_table(out / "places.parquet", filters=[("variable", "=", "P1_001N")])
    places = places.to_pandas().set_index("GEOID")
    blocks = pq.read_table(out / "margins.parquet", filters=[("SUMLEV", "=", "750")])
    blocks = blocks.to_pandas()
    blocks = blocks[blocks.variable == "P1_001N"]
    blocks = blocks.assign(geocode=blocks.GEOID.str[:12] + blocks.GEOID.str[11:])
    blocks = blocks.merge(spine, on="geocode")
    aian = blocks[blocks.aian_area != ""]
    assert len(aian) > 0, "the generated state has no AIAN block"
    whole = aian.groupby("aian_area").value.sum()
    assert (places.loc[whole.index, "SUMLEV"] == "250").all()
    np.testing.assert_array_equal(places.loc[whole.index, "value"], whole)
    part = places.loc["40" + whole.index]
    assert (part.SUMLEV == "280").all() and part.NAME.str.endswith("(part), Oklahoma").all()
    np.testing.assert_array_equal(part.value, whole)
    named = blocks[blocks.place != ""]
    plc = named.groupby("place").value.sum()
    assert (places.loc["40" + plc.index, "SUMLEV"] == "160").all()
    np.testing.assert_array_equal(places.loc["40" + plc.index, "value"], plc)
    assert set(places.SUMLEV) == {"160", "250", "280"}
    assert (places.gls_sd > 0).all()
    # the release's tables have the same rows, and they join both ways
    pub = pq.read_table(run / "tables" / "P1.parquet", columns=["GEOID", "SUMLEV", "NAME"])
    pub = pub.to_pandas()
    pub = pub[pub.SUMLEV.isin(["160", "250", "280"])]
    j = places.reset_index().merge(pub, on=["GEOID", "SUMLEV", "NAME"], how="outer", indicator=True)
    assert (j._merge == "both").all() and len(j) == len(places)
