"""Puerto Rico with its own presets, and one state as production's national run sees it.

Production ran Puerto Rico apart from the nation (the run certificates
``docs/certificates/DAS-PL94171-PRODUCTION-RUN1A-202106241420-PR-{Persons,Units}`` of
uscensusbureau/DAS_2020_Redistricting_Production_Code print ``person_PR.ini``):
geolevels State..Block with no US level, ``spine = opt_spine``, persons geolevel shares
689, 695, 772, 1778, 165 (/4099) at ``global_scale = 339/542``, units shares
5047/876580, 18746/219145, 94451/262974, 281911/657435, 99/820 at
``global_scale = 12343/3379``, query ordering
``Strategy1b_CTY_TR_BG_isoTot_Ordering_PR_dsepJune3`` and, at the State,
``theInvariants.State = tot``, ``theConstraints.State = total, hhgq_total_lb,
hhgq_total_ub``. The numbers are written out here; the query shares are read from the
preset file as data. Each geounit spends its own share after single-child bypass
(``define_spines.py`` ``bypass_above_county``, ``optimize_spine.py``), recomputed here
from ``spine.parquet`` alone.
"""

from __future__ import annotations

import functools
import json
import tomllib
from fractions import Fraction
from importlib import resources

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from censusdp.generate import generate_state
from censusdp.io.budget_files import load_preset
from censusdp.io.nmf_files import NMF_COLUMNS, read_nmf_rows, read_nmf_table
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.options import ReleaseOptions
from censusdp.release.pipeline import reestimate, run_release
from censusdp.release.topdown.passes import plans_for

LEVELS = ("State", "County", "Tract", "BlockGroup", "Block")
PERSON_RHO = 1 / Fraction(339, 542) ** 2
PERSON_SHARES = dict(
    zip(LEVELS, (Fraction(n, 4099) for n in (689, 695, 772, 1778, 165)), strict=True)
)
UNIT_RHO = 1 / Fraction(12343, 3379) ** 2
UNIT_SHARES = dict(
    zip(
        LEVELS,
        (
            Fraction(5047, 876580),
            Fraction(18746, 219145),
            Fraction(94451, 262974),
            Fraction(281911, 657435),
            Fraction(99, 820),
        ),
        strict=True,
    )
)


def _query_shares(preset: str) -> dict[tuple[str, str], Fraction]:
    text = resources.files("censusdp.privacy.presets").joinpath(f"{preset}.toml").read_text()
    doc = tomllib.loads(text)
    return {
        (g["name"], q): Fraction(share)
        for g in doc["geolevels"]
        for q, share in g["queries"].items()
    }


@functools.cache
def _discrete_gaussian_variance(sigma2: float) -> float:
    half = int(40 * np.sqrt(sigma2)) + 10
    k = np.arange(-half, half + 1, dtype=np.float64)
    w = np.exp(-(k * k) / (2 * sigma2))
    return float(np.sum(k * k * w) / np.sum(w))


def _bypassed_shares(
    spine_file, levels: dict[str, Fraction], top: int = 0
) -> dict[tuple[str, str], Fraction]:
    """Production's per-geounit shares: bottom-up, a unit with one child takes its share;
    the levels above ``top`` are the nation's (spent outside the input, never measured)."""
    names = list(levels)
    cols = pq.read_table(spine_file).to_pydict()
    cols |= {lv: [""] * len(cols["geocode"]) for lv in names[:top]}
    units = {lv: sorted(set(cols[lv])) for lv in names}
    share = {
        (lv, u): levels[lv] if i >= top else Fraction(0)
        for i, lv in enumerate(names)
        for u in units[lv]
    }
    for i in range(len(names) - 2, top - 1, -1):
        above, below = names[i], names[i + 1]
        children: dict[str, set[str]] = {}
        for a, b in zip(cols[above], cols[below], strict=True):
            children.setdefault(a, set()).add(b)
        for parent, kids in children.items():
            if len(kids) == 1:
                (kid,) = kids
                share[(above, parent)] += share[(below, kid)]
                share[(below, kid)] = Fraction(0)
    return share


def _measured(tmp_path_factory, state: str, scale: float, preset: str):
    """``d/cef``: a generated ``state`` (seed 4); ``d/nmf``: its measurements alone with
    ``preset`` and its unit preset (seed 3, no post-processing). Returns ``d``."""
    d = tmp_path_factory.mktemp(state.lower())
    generate_state(state, 4, d / "cef", scale=scale)
    budget = ReleaseBudget(load_preset(preset), load_preset(f"{preset}-units"))
    run_release(d / "cef", d / "nmf", budget, ReleaseOptions(seed=3, postprocess="none"))
    return d


@pytest.fixture(scope="module")
def pr_release(tmp_path_factory):
    return _measured(tmp_path_factory, "PR", 0.01, "pl94-2020-pr")


def _check_variances(nmf, spine_file, rho, level_shares, preset, top=0) -> int:
    shares = _bypassed_shares(spine_file, level_shares, top)
    queries = _query_shares(preset)
    t = read_nmf_rows(nmf, columns=["geolevel", "geocode", "query", "variance"])
    strings = [(f.name, pa.string() if f.name != "variance" else pa.float64()) for f in t.schema]
    t = t.cast(pa.schema(strings))
    groups = t.group_by(["geolevel", "geocode", "query"]).aggregate(
        [("variance", "min"), ("variance", "max")]
    )
    g = groups.to_pydict()
    keys = list(zip(g["geolevel"], g["geocode"], g["query"], strict=True))
    want = [
        _discrete_gaussian_variance(float(1 / (rho * shares[(lv, code)] * queries[(lv, q)])))
        for lv, code, q in keys
    ]
    np.testing.assert_allclose(g["variance_min"], want, rtol=1e-7)
    np.testing.assert_allclose(g["variance_max"], want, rtol=1e-7)
    seen = {(lv, code) for lv, code, _ in keys}
    measured = {k for k, s in shares.items() if s > 0}
    assert seen == measured  # every unit with a share is measured, no bypassed one is
    return t.num_rows


@pytest.mark.slow
def test_every_person_and_unit_variance_is_production_puerto_ricos(pr_release):
    run = pr_release / "nmf"
    m = json.loads((run / "manifest.json").read_text())
    assert m["spine"]["kind"] == "optimized"
    assert [lv for lv, _ in m["spine"]["geolevels"]] == list(LEVELS)
    spine_file = run / "spine.parquet"
    assert set(pq.read_table(spine_file).column("State").to_pylist()) == {"072"}
    persons = _check_variances(
        run / "noisy_measurements.parquet",
        spine_file,
        PERSON_RHO,
        PERSON_SHARES,
        "pl94-2020-pr",
    )
    units = _check_variances(
        run / "noisy_measurements_units.parquet",
        run / m["spine"]["units"]["file"],  # the unit run's own spine
        UNIT_RHO,
        UNIT_SHARES,
        "pl94-2020-pr-units",
    )
    assert persons > 1000 and units > 100
    # the State measures no total ("PR has no AIAN areas ... State now has no 'total' query")
    t = read_nmf_rows(run / "noisy_measurements.parquet", columns=["geolevel", "query"])
    state = {q for lv, q in zip(*t.to_pydict().values(), strict=True) if lv == "State"}
    assert state and "total" not in state


@pytest.mark.slow
def test_puerto_rico_releases_on_its_own_root_with_its_constraints(pr_release):
    out = pr_release / "release"
    budget = ReleaseBudget(load_preset("pl94-2020-pr"), load_preset("pl94-2020-pr-units"))
    manifest = run_release(pr_release / "cef", out, budget, ReleaseOptions(seed=5))
    assert manifest["validation"]["ok"] is True
    persons = pq.read_table(pr_release / "cef" / "persons.parquet", columns=["geocode"])
    mdf = pq.read_table(out / "mdf_persons.parquet", columns=["TABBLKST"])
    assert mdf.num_rows == persons.num_rows  # theConstraints.State = total
    assert set(mdf.column("TABBLKST").to_pylist()) == {"72"}


def test_the_root_is_solved_with_production_puerto_ricos_state_ordering():
    """``Strategy1b_CTY_TR_BG_isoTot_Ordering_PR_dsepJune3``: the State in one pass
    without ``total``, County, Tract and Block_Group with ``total`` isolated first."""
    pr = plans_for("pl94", list(LEVELS))
    assert pr[0].l2 == (
        (
            "cenrace",
            "hispanic",
            "votingage",
            "hhinstlevels",
            "hhgq",
            "votingage*hispanic",
            "hispanic*cenrace",
            "votingage*cenrace",
            "votingage*hispanic*cenrace",
            "detailed",
        ),
    )
    assert [p.l2[0] for p in pr[1:4]] == [("total",)] * 3
    assert len(pr[4].l2) == 1 and pr[4].l2[0][0] == "total"
    us = plans_for("pl94", ["US", *LEVELS])
    assert us[0] == pr[0] and us[1].l2[0] == ("total",)  # the national run's State isolates it


def test_a_state_root_holds_one_state_and_its_total_is_the_invariant():
    from censusdp.data.geography import GeoLevels, Hierarchy
    from censusdp.errors import GeographyError

    levels = GeoLevels.from_pairs(list(zip(LEVELS, (2, 5, 11, 12, 16), strict=True)))
    assert levels.state_level == 0  # theInvariants.State = tot, at the root
    h = Hierarchy.from_blocks(np.array(["7200100000010001", "7200300000010002"]), levels)
    assert h.geocodes[0].tolist() == ["72"] and h.n_units(1) == 2
    with pytest.raises(GeographyError, match="must hold one geounit"):
        Hierarchy.from_blocks(np.array(["7200100000010001", "5000100000010001"]), levels)


# production's national run: person_US.ini geolevel_budget_prop (US..Block), and the unit
# run's shares printed in its certificate
NATION = ("US", *LEVELS)
US_PERSON_SHARES = dict(
    zip(NATION, (Fraction(n, 4099) for n in (104, 1440, 447, 687, 1256, 165)), strict=True)
)
US_UNIT_SHARES = dict(
    zip(
        NATION,
        (Fraction(1, 205), Fraction(1, 205), Fraction(7, 82), Fraction(364, 1025))
        + (Fraction(1759, 4100), Fraction(99, 820)),
        strict=True,
    )
)


@pytest.fixture(scope="module")
def one_state(tmp_path_factory):
    return _measured(tmp_path_factory, "VT", 0.05, "pl94-2020")


def test_one_state_measures_its_state_with_the_state_allocation(one_state):
    """The State node of a one-state input: production's State share (1440/4099) and
    State query shares (persons ``detailed`` rho 0.0504, not 0.755 at an artificial US
    root), the US level's share spent on the nation, stated in the manifest."""
    run = one_state / "nmf"
    m = json.loads((run / "manifest.json").read_text())
    assert m["spine"]["nation"]["measured"] is False
    assert m["spine"]["nation"]["share"] == "104/4099"
    t = read_nmf_rows(run / "noisy_measurements.parquet", columns=["geolevel", "query", "variance"])
    rows = t.cast(
        pa.schema([("geolevel", pa.string()), ("query", pa.string()), ("variance", pa.float64())])
    )
    d = rows.to_pydict()
    assert "US" not in set(d["geolevel"])
    state = {
        q: v
        for lv, q, v in zip(d["geolevel"], d["query"], d["variance"], strict=True)
        if lv == "State"
    }
    detailed_rho = (
        PERSON_RHO * US_PERSON_SHARES["State"] * _query_shares("pl94-2020")[("State", "detailed")]
    )
    assert float(detailed_rho) == pytest.approx(0.0504, abs=5e-5)
    assert state["detailed"] == pytest.approx(
        _discrete_gaussian_variance(float(1 / detailed_rho)), rel=1e-7
    )
    assert "total" in state  # the State query shares, which the US level's lack
    counties = set(pq.read_table(run / "spine.parquet").column("County").to_pylist())
    assert len(counties) > 1  # so the State keeps its own share (no bypass from below)


@pytest.mark.slow
def test_one_state_nmf_variances_are_production_national_runs(one_state):
    run = one_state / "nmf"
    spine_file = run / "spine.parquet"
    n = _check_variances(
        run / "noisy_measurements.parquet",
        spine_file,
        PERSON_RHO,
        US_PERSON_SHARES,
        "pl94-2020",
        top=1,
    )
    assert n > 1000


def test_one_state_unit_variances_are_production_national_runs_on_the_unit_spine(one_state):
    """The unit run on its own spine (its certificate's ``ignore_gqs_in_block_groups =
    True``): every unit NMF variance is production's for its geounit of that spine, after
    bypass, and the unit spine's block groups are not the persons'."""
    run = one_state / "nmf"
    m = json.loads((run / "manifest.json").read_text())
    assert m["spine"]["rules"]["gq_entities"] is True
    assert m["spine"]["units"]["rules"]["gq_entities"] is False
    unit_spine = run / m["spine"]["units"]["file"]
    u = _check_variances(
        run / "noisy_measurements_units.parquet",
        unit_spine,
        1 / Fraction(12343, 3379) ** 2,
        US_UNIT_SHARES,
        "pl94-2020-units",
        top=1,
    )
    assert u > 100
    persons_bgs = set(pq.read_table(run / "spine.parquet").column("BlockGroup").to_pylist())
    units_bgs = set(pq.read_table(unit_spine).column("BlockGroup").to_pylist())
    assert persons_bgs != units_bgs and len(units_bgs) < len(persons_bgs)
    # the state parts, counties and tracts are the persons'
    for level in ("State", "County", "Tract"):
        assert (
            pq.read_table(unit_spine)
            .column(level)
            .equals(pq.read_table(run / "spine.parquet").column(level))
        )


@pytest.mark.slow
def test_one_state_releases_with_the_us_unmeasured(one_state):
    out = one_state / "release"
    budget = ReleaseBudget(load_preset("pl94-2020"), load_preset("pl94-2020-units"))
    manifest = run_release(one_state / "cef", out, budget, ReleaseOptions(seed=5))
    assert manifest["validation"]["ok"] is True
    persons = pq.read_table(one_state / "cef" / "persons.parquet", columns=["geocode"])
    assert (
        pq.read_table(out / "mdf_persons.parquet", columns=["EPNUM"]).num_rows == persons.num_rows
    )


@pytest.fixture(scope="module")
def one_state_tabulation(tmp_path_factory):
    d = tmp_path_factory.mktemp("vt_tab")
    generate_state("VT", 4, d / "cef", scale=0.05)
    budget = ReleaseBudget(load_preset("pl94-2020"), load_preset("pl94-2020-units"))
    options = ReleaseOptions(seed=3, spine="tabulation", postprocess="none")
    run_release(d / "cef", d / "run", budget, options)
    return d


def _nmf_rows(path) -> dict[str, list]:
    """The NMF's distinct (geolevel, query, variance) rows."""
    t = read_nmf_rows(path, columns=["geolevel", "query", "variance"])
    t = t.cast(
        pa.schema([("geolevel", pa.string()), ("query", pa.string()), ("variance", pa.float64())])
    )
    return t.group_by(["geolevel", "query", "variance"]).aggregate([]).to_pydict()


def test_one_state_on_the_tabulation_hierarchy_leaves_the_us_to_the_nation(one_state_tabulation):
    """``--spine tabulation`` (or an input without block attributes): the US of a
    one-state input is the nation's, as on the spine: no US rows in either NMF, the State
    measured with production's State share and State query shares (persons ``detailed``
    rho 0.0504), every other geounit at its geolevel's share (no bypass on the tabulation
    hierarchy), stated in the manifest."""
    run = one_state_tabulation / "run"
    m = json.loads((run / "manifest.json").read_text())
    assert m["spine"]["kind"] == "tabulation"
    assert m["spine"]["nation"]["measured"] is False
    assert m["spine"]["nation"]["share"] == "104/4099"
    qs = _query_shares("pl94-2020")
    for nmf, rho, shares, preset in (
        ("noisy_measurements.parquet", PERSON_RHO, US_PERSON_SHARES, "pl94-2020"),
        ("noisy_measurements_units.parquet", UNIT_RHO, US_UNIT_SHARES, "pl94-2020-units"),
    ):
        # the US task's part has no rows, and the columns' own types (one schema)
        us = read_nmf_table(run / nmf / "part-00000.parquet")
        assert us.num_rows == 0 and us.schema.field("variance").type == "double"
        assert pq.read_schema(run / nmf / "part-00000.parquet").names == list(NMF_COLUMNS)
        assert read_nmf_rows(run / nmf, columns=["variance"]).column(0).type == pa.float64()
        d = _nmf_rows(run / nmf)
        assert "US" not in set(d["geolevel"])
        q_shares = _query_shares(preset)
        for lv, q, v in zip(d["geolevel"], d["query"], d["variance"], strict=True):
            want = _discrete_gaussian_variance(float(1 / (rho * shares[lv] * q_shares[(lv, q)])))
            assert v == pytest.approx(want, rel=1e-7), (nmf, lv, q)
    d = _nmf_rows(run / "noisy_measurements.parquet")
    state = {q for lv, q in zip(d["geolevel"], d["query"], strict=True) if lv == "State"}
    assert {"total", "detailed"} <= state
    detailed_rho = PERSON_RHO * US_PERSON_SHARES["State"] * qs[("State", "detailed")]
    assert float(detailed_rho) == pytest.approx(0.0504, abs=5e-5)


@pytest.mark.slow
def test_one_state_on_the_tabulation_hierarchy_releases_validates_and_reestimates(
    one_state_tabulation,
):
    d = one_state_tabulation
    budget = ReleaseBudget(load_preset("pl94-2020"), load_preset("pl94-2020-units"))
    out = d / "release"
    m = run_release(d / "cef", out, budget, ReleaseOptions(seed=5, spine="tabulation"))
    assert m["validation"]["ok"] is True
    assert m["spine"]["nation"]["measured"] is False
    persons = pq.read_table(d / "cef" / "persons.parquet", columns=["geocode"]).num_rows
    assert pq.read_table(out / "mdf_persons.parquet", columns=["EPNUM"]).num_rows == persons
    again = reestimate(out, d / "again")
    assert again["validation"]["ok"] is True
    assert again["spine"]["nation"]["measured"] is False  # read back from the manifest
