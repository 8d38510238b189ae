"""Persons-units consistency: the unit run held to the released household persons.

Production estimated persons and housing units independently (its weakness); censusdp
holds each block's occupied units in ``[1 if p_b > 0, min(p_b, H_b)]`` while keeping the
housing units exact, and never needs the failsafe (the argument is in
``censusdp.release.consistency``).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.cli import main
from censusdp.data.geography import Hierarchy
from censusdp.data.schema import get_schema
from censusdp.errors import ValidationError
from censusdp.io.budget_files import load_preset
from censusdp.privacy.randomness import RandomSource
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.consistency import (
    UNIT_GROUP_VARIABLE,
    consistency_violations,
    consistent_unit_bounds,
    household_persons,
    independent_unit_bounds,
)
from censusdp.release.measure import measure
from censusdp.release.options import ReleaseOptions
from censusdp.release.pipeline import run_release
from censusdp.release.topdown.driver import TopDownOptions, run_topdown
from censusdp.release.validate import validate_run
from synth import block_codes, make_cef, write_cef

UNITS = get_schema("units")
PL94 = get_schema("pl94")


def _unit_release(h, hu, occupied, household, rho, seed, *, consistent=True):
    """Measure true occupancy with the production unit allocation at ``rho`` and
    estimate it, held to ``household`` (or not)."""
    budget = load_preset("pl94-2020-units").scaled(rho=rho)
    plan = [(m.geolevel, m.query, m.mechanism) for m in budget.measurements()]
    block = np.column_stack([hu - occupied, occupied])
    ms = measure(h.aggregate(block), h, UNITS, plan, RandomSource.seeded(seed))
    if consistent:
        bounds = consistent_unit_bounds(household, hu, h)
        est = run_topdown(ms, h, bounds, TopDownOptions(group_variable=UNIT_GROUP_VARIABLE))
    else:  # production: housing units exact, occupancy free
        est = run_topdown(
            ms, h, independent_unit_bounds(hu, h), TopDownOptions(group_variable=None)
        )
    return est


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**31 - 1),
    rho=st.sampled_from(["1/1000", "11417641/152349649", "10"]),  # production: (3379/12343)^2
    shape=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(1, 8)),
    mismatch=st.sampled_from([0.0, 0.3, 0.8]),
)
def test_released_units_are_consistent_per_block_and_keep_every_invariant(
    seed, rho, shape, mismatch
):
    rng = np.random.default_rng(seed)
    h = Hierarchy.from_blocks(np.asarray(block_codes(*shape)))
    nb = h.blocks.size
    hu = rng.integers(0, 5, nb) * (rng.random(nb) < 0.7)
    occupied = rng.binomial(hu, 0.8)
    # released household persons: near the truth, or (mismatch) unrelated to it, always
    # zero where there is no housing unit (the person run's own constraint)
    p = np.where(occupied > 0, occupied + rng.poisson(1.5, nb), 0)
    scramble = rng.random(nb) < mismatch
    p[scramble] = rng.integers(0, 4, int(scramble.sum()))
    p[hu == 0] = 0
    est = _unit_release(h, hu, occupied, p, rho, seed)
    assert est.failsafe == []  # never infeasible
    block = est.histograms[-1].toarray()
    assert np.array_equal(block.sum(axis=1), hu)  # housing units exact at every block
    broken = consistency_violations(p, block[:, 1], hu)
    assert broken == dict.fromkeys(broken, 0), broken
    for li, lvl in enumerate(h.aggregate(block)):  # and at every level, summing up
        assert np.array_equal(np.asarray(lvl), est.histograms[li].toarray())


def test_bounds_are_the_block_rules_summed_up_the_hierarchy():
    h = Hierarchy.from_blocks(np.asarray(block_codes(1, 1, 2, 2)))
    p = np.array([0, 3, 1, 7])
    hu = np.array([2, 2, 1, 5])
    b = consistent_unit_bounds(p, hu, h)
    assert np.array_equal(b[-1].group_lower[:, 1], [0, 1, 1, 1])  # occupied >= [p > 0]
    assert np.array_equal(b[-1].group_upper[:, 1], [0, 2, 1, 5])  # occupied <= min(p, H)
    assert np.isinf(b[-1].group_upper[:, 0]).all() and (b[-1].group_lower[:, 0] == 0).all()
    assert np.array_equal(b[-1].total_lower, hu) and np.array_equal(b[-1].total_upper, hu)
    bg = h.geolevels.index("BlockGroup")
    assert np.array_equal(b[bg].group_lower[:, 1], [1, 2])
    assert np.array_equal(b[bg].group_upper[:, 1], [2, 6])
    assert b[0].group_lower[0, 1] == 3 and b[0].group_upper[0, 1] == 8 and b[0].total_lower[0] == 10


def test_household_persons_without_housing_units_are_refused_by_name():
    h = Hierarchy.from_blocks(np.asarray(block_codes(1, 1, 1, 3)))
    with pytest.raises(ValidationError, match=r"block 5000100000110002 has 2 household persons"):
        consistent_unit_bounds(np.array([0, 2, 1]), np.array([1, 0, 1]), h)
    with pytest.raises(ValidationError, match=r"must both be \(3,\)"):
        consistent_unit_bounds(np.array([0, 2]), np.array([1, 0, 1]), h)


def test_violations_are_counted_by_rule():
    p = np.array([0, 2, 3, 0, 4])
    occ = np.array([1, 0, 4, 0, 2])
    hu = np.array([1, 1, 4, 0, 1])
    assert consistency_violations(p, occ, hu) == {
        "occupied_above_household_persons": 2,
        "household_persons_without_occupied_unit": 1,
        "household_persons_without_housing_unit": 0,
        "occupied_above_housing_units": 1,
    }


def test_independent_estimation_breaks_consistency_that_consistent_keeps():
    """At production's unit budget the independent run leaves blocks inconsistent (as the
    2020 release did); the consistent one on the same measurements leaves none."""
    rng = np.random.default_rng(2)
    h = Hierarchy.from_blocks(np.asarray(block_codes(2, 3, 3, 8)))
    nb = h.blocks.size
    hu = rng.integers(0, 4, nb)
    occupied = rng.binomial(hu, 0.85)
    p = occupied * 2 + (occupied > 0)
    rho = "11417641/152349649"
    ind = _unit_release(h, hu, occupied, p, rho, 9, consistent=False).histograms[-1].toarray()
    con = _unit_release(h, hu, occupied, p, rho, 9).histograms[-1].toarray()
    assert sum(consistency_violations(p, ind[:, 1], hu).values()) > 0
    assert sum(consistency_violations(p, con[:, 1], hu).values()) == 0


@pytest.fixture(scope="module")
def cef_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("cef")
    persons, units = make_cef(np.random.default_rng(17), block_codes(2, 2, 2, 5), gq_rate=0.3)
    return write_cef(d / "cef", persons, units)


def test_a_default_release_is_consistent_and_says_so(cef_dir, tmp_path):
    manifest = run_release(
        cef_dir,
        tmp_path / "run",
        ReleaseBudget(load_preset("pl94-2020"), load_preset("pl94-2020-units")),
        ReleaseOptions(seed=4),
    )
    assert manifest["units_estimation"] == "consistent"
    assert manifest["validation"]["checks"]["persons_units_consistent"]["ok"]
    report = validate_run(tmp_path / "run")
    assert report.ok and report.checks["persons_units_consistent"]["ok"]
    # the files agree: household persons of the MDF vs occupied units of the unit MDF
    import pyarrow.parquet as pq

    geo = ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLKGRPCE", "TABBLK")
    mp = pq.read_table(tmp_path / "run" / "mdf_persons.parquet").to_pydict()
    mu = pq.read_table(tmp_path / "run" / "mdf_units.parquet").to_pydict()
    p_geo = ["".join(g) for g in zip(*(mp[c] for c in geo), strict=True)]
    u_geo = ["".join(g) for g in zip(*(mu[c] for c in geo), strict=True)]
    blocks = sorted(set(u_geo))
    hh = {b: 0 for b in blocks}
    for g, rtype in zip(p_geo, mp["RTYPE"], strict=True):
        hh[g] += rtype == "3"  # a household person
    occ = {b: 0 for b in blocks}
    hu = {b: 0 for b in blocks}
    for g, rtype, status in zip(u_geo, mu["RTYPE"], mu["HH_STATUS"], strict=True):
        if rtype == "2":  # a housing unit; HH_STATUS 1 occupied
            hu[g] += 1
            occ[g] += status == "1"
    for b in blocks:
        assert occ[b] <= hh[b] and (hh[b] == 0 or occ[b] >= 1) and (hu[b] > 0 or hh[b] == 0)


def test_units_independent_reproduces_production_and_is_not_checked(cef_dir, tmp_path):
    rc = main(
        ["run", "--input", str(cef_dir), "--out", str(tmp_path / "run"), "--seed", "4",
         "--units", "independent", "--quiet"]
    )  # fmt: skip
    assert rc == 0
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["units_estimation"] == "independent"
    assert "persons_units_consistent" not in manifest["validation"]["checks"]
    assert validate_run(tmp_path / "run").ok


def test_units_choice_is_checked(cef_dir, tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        main(["run", "--input", str(cef_dir), "--out", str(tmp_path / "r"), "--units", "joint"])
    assert info.value.code == 2
    assert "invalid choice: 'joint'" in capsys.readouterr().err
    from censusdp.errors import ConfigError

    with pytest.raises(ConfigError, match=r"--units must be one of"):
        run_release(
            cef_dir,
            tmp_path / "r",
            ReleaseBudget(load_preset("pl94-2020")),
            ReleaseOptions(unit_consistency="joint"),
        )


def test_household_persons_reads_the_household_cells():
    hist = np.zeros((2, PL94.size), dtype=np.int64)
    groups = PL94.cell_levels("hhgq")
    hist[0, np.flatnonzero(groups == 0)[:3]] = [1, 2, 3]
    hist[1, np.flatnonzero(groups == 3)[0]] = 5  # nursing facility residents
    assert list(household_persons(hist, PL94)) == [6, 0]
