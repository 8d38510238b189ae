"""End-to-end releases on small random inputs: every constraint, checked independently.

The checks here do not use the library's validator: they re-read the files a run wrote
and recompute everything from them (JASON, *Formal Privacy Methods for the 2020 Census*,
JSR-19-2F, sec. 5.7; Van Riper, Kugler & Ruggles 2020, sec. 2.2).
"""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from censusdp.cli import main
from censusdp.data.schema import get_schema
from censusdp.errors import ConfigError
from censusdp.io.budget_files import load_preset
from censusdp.io.cef import read_cef
from censusdp.io.mdf_text import read_mdf_text
from censusdp.io.nmf_files import read_nmf_rows
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.options import ReleaseOptions
from censusdp.release.pipeline import reestimate, run_release
from profiles import examples
from synth import block_codes, make_cef, tree_bytes, write_cef

PL94 = get_schema("pl94")


def _truth_counts(cef):
    return {
        "state_pop": cef.n_persons,
        "gq": {
            g: int(((cef.units["gqtype"] == g) & cef.units["occupied"]).sum()) for g in range(1, 8)
        },
    }


# production's headers (programs/writer/mdf2020writer.py), written out, not imported
PERSON_HEADER = (
    "SCHEMA_TYPE_CODE|SCHEMA_BUILD_ID|TABBLKST|TABBLKCOU|TABTRACTCE|TABBLKGRPCE|TABBLK|"
    "EPNUM|RTYPE|GQTYPE_PL|VOTING_AGE|CENHISP|CENRACE"
)
UNIT_HEADER = (
    "SCHEMA_TYPE_CODE|SCHEMA_BUILD_ID|TABBLKST|TABBLKCOU|TABTRACTCE|TABBLKGRPCE|TABBLK|"
    "RTYPE|HH_STATUS"
)


def _released(run_dir):
    """Persons and units decoded by hand from the text MDF, once the Parquet files are
    checked to hold the same records with the same codes."""
    out = []
    for name, header in (("mdf_persons", PERSON_HEADER), ("mdf_units", UNIT_HEADER)):
        lines = read_mdf_text(run_dir / f"{name}.txt").decode("ascii").splitlines()
        assert lines[0] == header  # unquoted, production's order
        names = header.split("|")
        rows = [line.split("|") for line in lines[1:]]
        cols = {c: [r[i] for r in rows] for i, c in enumerate(names)}
        table = pq.read_table(run_dir / f"{name}.parquet").to_pydict()
        assert list(table) == names
        assert {c: [str(v) for v in vals] for c, vals in table.items()} == cols
        geo = ["".join(g) for g in zip(*(cols[c] for c in names[2:7]), strict=True)]
        out.append((cols, np.asarray(geo, dtype="U16")))
    (p, p_geo), (u, u_geo) = out
    assert p["EPNUM"] == [str(i) for i in range(len(p_geo))]
    assert set(p["SCHEMA_TYPE_CODE"]) <= {"MPD"} and set(u["SCHEMA_TYPE_CODE"]) <= {"MUD"}
    mdf = {
        "geocode": p_geo,
        "hhgq": np.asarray([int(v) for v in p["GQTYPE_PL"]], dtype=np.int64),
        "votingage": np.asarray([int(v) - 1 for v in p["VOTING_AGE"]], dtype=np.int64),
        "hispanic": np.asarray([int(v) - 1 for v in p["CENHISP"]], dtype=np.int64),
        "cenrace": np.asarray([int(v) for v in p["CENRACE"]], dtype=np.int64),
    }
    assert np.array_equal(np.asarray(p["RTYPE"]) == "5", mdf["hhgq"] > 0)
    rtype, status = np.asarray(u["RTYPE"]), np.asarray(u["HH_STATUS"])
    assert np.array_equal(rtype == "4", status == "0")
    units = {"geocode": u_geo, "housing": rtype == "2", "occupied": status == "1"}
    return mdf, units


def _check_release(cef_dir, run_dir, postprocess="topdown"):
    cef = read_cef(cef_dir)
    mdf, units = _released(run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["validation"]["ok"], manifest["validation"]
    geocode = np.asarray(mdf["geocode"])
    hhgq = np.asarray(mdf["hhgq"])
    va = np.asarray(mdf["votingage"])
    # invariant: state total population exact (top-down only; bottom-up sums noisy blocks)
    if postprocess == "topdown":
        assert len(geocode) == cef.n_persons
    # no minors in nursing facilities (structural zero)
    assert not np.any((hhgq == 3) & (va == 0))
    # per block: GQ persons of type g >= facilities of type g, 0 where none; no household
    # population without housing units
    blocks = np.unique(np.concatenate([cef.units["geocode"], cef.persons["geocode"]]))
    for b in blocks:
        in_b = geocode == b
        ub = cef.units["geocode"] == b
        for g in range(1, 8):
            fac = int(np.sum(ub & (cef.units["gqtype"] == g) & cef.units["occupied"]))
            n = int(np.sum(in_b & (hhgq == g)))
            assert n >= fac, (b, g, n, fac)
            if fac == 0:
                assert n == 0, (b, g, n)
        hu = int(np.sum(ub & (cef.units["gqtype"] == 0)))
        if hu == 0:
            assert int(np.sum(in_b & (hhgq == 0))) == 0
        # housing units and facilities invariant in the MDF units
        ug = np.asarray(units["geocode"]) == b
        assert int(np.sum(ug & units["housing"])) == hu
        occupied_facilities = int(np.sum(ub & (cef.units["gqtype"] > 0) & cef.units["occupied"]))
        assert int(np.sum(ug & ~units["housing"])) == occupied_facilities
    # tables add up across the hierarchy: P1 total of the state = sum over blocks
    p1 = pq.read_table(run_dir / "tables" / "P1.parquet").to_pydict()
    levels = np.asarray(p1["geolevel"])
    tot = np.asarray(p1["P1_001N"])
    for lv in ("US", "State", "County", "Tract", "BlockGroup", "Block"):
        assert tot[levels == lv].sum() == len(geocode)
    return manifest


@settings(
    max_examples=examples(6),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 10_000),
    fan=st.tuples(st.integers(1, 2), st.integers(1, 2), st.integers(1, 3), st.integers(1, 4)),
    gq_rate=st.sampled_from([0.0, 0.3, 1.0]),
    postprocess=st.sampled_from(["topdown", "bottomup"]),
    rho=st.sampled_from(["1/100", "1", "293764/114921"]),
)
# a single block with housing units and no persons once crashed the MDF text writer
@example(seed=1, fan=(1, 1, 1, 1), gq_rate=0.0, postprocess="topdown", rho="1/100")
def test_release_obeys_every_constraint(tmp_path_factory, seed, fan, gq_rate, postprocess, rho):
    _release_and_check(tmp_path_factory, seed, fan, gq_rate, postprocess, rho)


def _release_and_check(tmp_path_factory, seed, fan, gq_rate, postprocess, rho):
    rng = np.random.default_rng(seed)
    persons, units = make_cef(rng, block_codes(*fan), gq_rate=gq_rate)
    base = tmp_path_factory.mktemp("rel")
    write_cef(base / "cef", persons, units)
    run_release(
        base / "cef",
        base / "run",
        ReleaseBudget(load_preset("pl94-2020").scaled(rho=rho), load_preset("pl94-2020-units")),
        ReleaseOptions(seed=seed, postprocess=postprocess),
    )
    return _check_release(base / "cef", base / "run", postprocess)


@pytest.mark.parametrize("seed", range(1, 41))
def test_one_block_without_group_quarters_releases_for_every_seed(tmp_path_factory, seed):
    """The shape on which 10 of these 40 seeds drew housing units but no persons."""
    manifest = _release_and_check(tmp_path_factory, seed, (1, 1, 1, 1), 0.0, "topdown", "1/100")
    assert manifest["validation"]["ok"]


@pytest.mark.parametrize("postprocess", ["topdown", "bottomup"])
def test_units_without_persons_release_and_reestimate(tmp_path, postprocess):
    """A state with housing units and no persons is a valid input: a release of 0 persons."""
    persons, units = make_cef(np.random.default_rng(5), block_codes(1, 1, 2, 2), gq_rate=0.0)
    assert units["unit_id"].size > 0
    persons = {k: v[:0] for k, v in persons.items()}
    units["occupied"][:] = False
    write_cef(tmp_path / "cef", persons, units)
    budget = load_preset("pl94-2020").scaled(rho="1/100")
    units_budget = load_preset("pl94-2020-units")
    manifest = run_release(
        tmp_path / "cef",
        tmp_path / "run",
        ReleaseBudget(budget, units_budget),
        ReleaseOptions(seed=3, postprocess=postprocess),
    )
    _check_release(tmp_path / "cef", tmp_path / "run", postprocess)
    text = read_mdf_text(tmp_path / "run" / "mdf_persons.txt").decode().splitlines()
    n = pq.read_table(tmp_path / "run" / "mdf_persons.parquet").num_rows
    assert len(text) == n + 1
    if postprocess == "topdown":
        assert n == 0 and manifest["persons_released"] == 0 == manifest["input_persons"]
    units_out = pq.read_table(tmp_path / "run" / "mdf_units.parquet")
    assert units_out.num_rows == units["unit_id"].size
    reestimate(
        tmp_path / "run",
        tmp_path / "again",
        ReleaseOptions(postprocess=postprocess),
        budget=ReleaseBudget(budget, units_budget),
    )
    for name in ("mdf_persons.parquet", "mdf_persons.txt", "mdf_units.parquet", "mdf_units.txt"):
        assert tree_bytes(tmp_path / "run" / name) == tree_bytes(tmp_path / "again" / name)


@pytest.fixture(scope="module")
def small_state(tmp_path_factory):
    base = tmp_path_factory.mktemp("state")
    persons, units = make_cef(np.random.default_rng(11), block_codes(2, 2, 2, 3), gq_rate=0.4)
    write_cef(base / "cef", persons, units)
    return base


def test_huge_rho_reproduces_the_truth(small_state):
    run = small_state / "exact"
    run_release(
        small_state / "cef",
        run,
        ReleaseBudget(
            load_preset("pl94-2020").scaled(rho=10**9),
            load_preset("pl94-2020-units").scaled(rho=10**9),
        ),
        ReleaseOptions(seed=1),
    )
    cef = read_cef(small_state / "cef")
    mdf, units = _released(run)
    got = PL94.cells_of(
        {
            "hhgq": np.asarray(mdf["hhgq"]),
            "age": np.where(np.asarray(mdf["votingage"]) == 1, 30, 5),
            "hispanic": np.asarray(mdf["hispanic"]),
            "cenrace": np.asarray(mdf["cenrace"]),
        }
    )
    want = PL94.cells_of(cef.persons)
    key_got = sorted(zip(mdf["geocode"], got.tolist(), strict=True))
    key_want = sorted(zip(cef.persons["geocode"].tolist(), want.tolist(), strict=True))
    assert key_got == key_want
    occ = units["occupied"] & units["housing"]
    assert occ.sum() == int(((cef.units["gqtype"] == 0) & cef.units["occupied"]).sum())


def test_seeded_runs_repeat_and_secure_runs_differ(small_state):
    budget = load_preset("pl94-2020")
    a = run_release(
        small_state / "cef", small_state / "a", ReleaseBudget(budget), ReleaseOptions(seed=9)
    )
    run_release(
        small_state / "cef", small_state / "b", ReleaseBudget(budget), ReleaseOptions(seed=9)
    )
    assert a["seed"] == 9 and a["randomness"]["mode"] == "seeded"
    for name in ("noisy_measurements.parquet", "mdf_persons.parquet"):
        assert pq.read_table(small_state / "a" / name).equals(
            pq.read_table(small_state / "b" / name)
        )
    s = run_release(
        small_state / "cef", small_state / "s", ReleaseBudget(budget), ReleaseOptions(seed=None)
    )
    assert s["seed"] is None and s["randomness"]["mode"] == "secure"
    va = pq.read_table(small_state / "a" / "noisy_measurements.parquet").column("value")
    vs = pq.read_table(small_state / "s" / "noisy_measurements.parquet").column("value")
    assert not va.equals(vs)


def test_reestimate_from_measurements_alone(small_state):
    budget = load_preset("pl94-2020")
    run_release(
        small_state / "cef",
        small_state / "orig",
        ReleaseBudget(budget, load_preset("pl94-2020-units")),
        ReleaseOptions(seed=4),
    )
    reestimate(
        small_state / "orig",
        small_state / "again",
        budget=ReleaseBudget(budget, load_preset("pl94-2020-units")),
    )
    for name in ("mdf_persons.parquet", "mdf_units.parquet"):
        assert pq.read_table(small_state / "orig" / name).equals(
            pq.read_table(small_state / "again" / name)
        )
    # the NMF's part files are the measured run's, hard-linked (one file system): no copy
    nmf = small_state / "orig" / "noisy_measurements.parquet"
    parts = sorted(p for p in nmf.iterdir() if p.is_file())
    assert parts
    for p in parts:
        linked = small_state / "again" / nmf.name / p.name
        assert linked.stat().st_ino == p.stat().st_ino and p.stat().st_nlink >= 2
    # without a budget, the one the measurements spent is used and stated
    m = reestimate(small_state / "orig", small_state / "again2")
    orig = json.loads((small_state / "orig" / "manifest.json").read_text())
    assert (m["rho_exact"], m["epsilon"]) == (orig["rho_exact"], orig["epsilon"])
    assert pq.read_table(small_state / "orig" / "mdf_units.parquet").equals(
        pq.read_table(small_state / "again2" / "mdf_units.parquet")
    )
    # a different budget is refused: the noise was drawn for the budget that was spent
    with pytest.raises(ConfigError, match="differs from the one"):
        reestimate(
            small_state / "orig", small_state / "again3", budget=ReleaseBudget(budget.scaled(rho=1))
        )
    assert not (small_state / "again3").exists()


def test_cli_from_measurements_refuses_a_conflicting_budget(small_state, capsys):
    run_release(
        small_state / "cef",
        small_state / "o",
        ReleaseBudget(load_preset("pl94-2020")),
        ReleaseOptions(seed=4),
    )
    argv = ["run", "--from-measurements", str(small_state / "o"), "--out", str(small_state / "p")]
    assert main(argv + ["--rho", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "differs from the one" in err
    assert main(argv + ["--quiet"]) == 0
    m = json.loads((small_state / "p" / "manifest.json").read_text())
    assert (
        m["rho_exact"] == json.loads((small_state / "o" / "manifest.json").read_text())["rho_exact"]
    )


def test_postprocess_none_writes_measurements_only(small_state):
    m = run_release(
        small_state / "cef",
        small_state / "nm",
        ReleaseBudget(load_preset("pl94-2020")),
        ReleaseOptions(seed=2, postprocess="none"),
    )
    assert (small_state / "nm" / "noisy_measurements.parquet").exists()
    assert not (small_state / "nm" / "mdf_persons.parquet").exists()
    assert m["noisy_measurements"] > 0


def test_failed_run_leaves_nothing(tmp_path, small_state):
    persons, units = make_cef(np.random.default_rng(1), block_codes(1, 1, 1, 2))
    persons["age"][0] = 999
    write_cef(tmp_path / "bad", persons, units)
    with pytest.raises(Exception, match="outside 0..115"):
        run_release(
            tmp_path / "bad",
            tmp_path / "out",
            ReleaseBudget(load_preset("pl94-2020")),
            ReleaseOptions(seed=1),
        )
    assert not (tmp_path / "out").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_nmf_noise_is_unbiased_with_stated_variance(small_state):
    """Empirical mean and variance of NMF noise over seeds match the stated variance."""
    cef = read_cef(small_state / "cef")
    budget = load_preset("pl94-2020").scaled(rho="1/10")
    diffs = []
    var = None
    from censusdp.data.geography import Hierarchy
    from censusdp.data.histograms import person_histogram
    from censusdp.data.queries import make_query

    h = Hierarchy.from_blocks(np.concatenate([cef.units["geocode"], cef.persons["geocode"]]))
    exact = make_query(PL94, "detailed").answer_many(person_histogram(cef.persons, h)).toarray()
    live = ~PL94.structural_zero_mask
    for seed in range(6):
        m = run_release(
            small_state / "cef",
            small_state / f"nb{seed}",
            ReleaseBudget(budget),
            ReleaseOptions(seed=100 + seed, postprocess="none"),
        )
        t = read_nmf_rows(small_state / f"nb{seed}" / "noisy_measurements.parquet").to_pydict()
        sel = (np.asarray(t["geolevel"]) == "Block") & (np.asarray(t["query"]) == "detailed")
        geo = np.asarray(t["geocode"])[sel]
        cell = np.asarray(t["cell"])[sel]
        val = np.asarray(t["value"])[sel]
        var = np.asarray(t["variance"])[sel][0]
        bi = h.block_index(geo)
        assert live[cell].all()
        diffs.append(val - exact[bi, cell])
        assert m["noisy_measurements"] > 0
    d = np.concatenate(diffs).astype(float)
    se = np.sqrt(var / d.size)
    assert abs(d.mean()) < 5 * se
    assert abs(d.var() / var - 1) < 5 * np.sqrt(2 / d.size) + 0.01


@pytest.mark.parametrize(("flag", "value"), [("--epsilon", "3"), ("--rho", "1/2")])
def test_cli_budget_is_the_total_of_the_whole_release(small_state, flag, value, capsys):
    """``run --epsilon E`` publishes total epsilon in [0.99 E, E]; ``--rho R`` total rho R
    (persons and housing units together, split as the presets split them)."""
    out = small_state / f"total{flag}"
    argv = ["run", "--input", str(small_state / "cef"), "--out", str(out), flag, value]
    assert main(argv + ["--seed", "3", "--quiet"]) == 0
    m = json.loads((out / "manifest.json").read_text())
    assert "units" in m and m["persons"]["neighbours"] == "bounded"
    composed = Fraction(m["persons"]["total"]) + Fraction(m["units"]["total"])
    assert Fraction(m["rho_exact"]) == composed
    if flag == "--epsilon":
        assert 0.99 * 3 <= m["epsilon"] <= 3
    else:
        assert composed == Fraction(1, 2)
    assert "SEEDED (not secure)" in capsys.readouterr().out
