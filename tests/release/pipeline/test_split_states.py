"""Several states in one input on the production spine, split states included.

Production's national run solves the US's children, every state's AIAN and non-AIAN
parts, in one problem, with each split state's parts held to the state's invariant
total (DAS_2020_Redistricting_Production_Code, ``programs/engine/topdown_engine.py``
``areAIANSumConstraintsOn``, ``programs/optimization/optimizer.py``
``addGroupedChildTotalConstraint``). Random inputs of two or three small states with
random AIAN areas are estimated on their spine and checked independently of the
library's validator; a generated Vermont + Oklahoma (Oklahoma has AIAN areas) is
released, validated, re-estimated and inferred.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import person_histogram
from censusdp.data.invariants import compute_invariants
from censusdp.data.schema import get_schema
from censusdp.errors import InfeasibleError
from censusdp.io.budget_files import load_preset
from censusdp.privacy.budget import Budget
from censusdp.privacy.randomness import RandomSource
from censusdp.release.measure import measure
from censusdp.release.spine import geography_for_input
from censusdp.release.topdown.driver import TopDownOptions, run_topdown
from profiles import examples
from synth import block_codes, make_cef

PL94 = get_schema("pl94")
BUDGET = Budget.from_dict({**load_preset("pl94-2020").to_dict(), "spine": "optimized"})
FIPS = ("50", "40", "04")


def _states(rng: np.random.Generator, n_states: int, aian: list[float]) -> tuple[dict, dict]:
    """Persons and units of ``n_states`` small states; state ``s``'s blocks are in an
    AIAN area with probability ``aian[s]`` (a whole tract, or single blocks)."""
    ps, us = [], []
    pid = uid = 0
    for s in range(n_states):
        codes = [FIPS[s] + c[2:] for c in block_codes(2, 2, 1, int(rng.integers(2, 5)))]
        p, u = make_cef(rng, codes, gq_rate=0.3)
        tract = np.char.ljust(u["geocode"].astype("U11"), 11)
        aian_tract = rng.random(np.unique(tract).size) < aian[s]
        inside = aian_tract[np.unique(tract, return_inverse=True)[1]]
        block = np.unique(u["geocode"], return_inverse=True)[1]
        inside |= (rng.random(block.max() + 1) < aian[s] / 4)[block]
        u["aian_area"] = np.where(inside, "0012", "").astype("U4")
        u["place"] = np.full(u["geocode"].size, "", dtype="U5")
        p["person_id"] = p["person_id"] + pid
        p["unit_id"] = p["unit_id"] + uid
        u["unit_id"] = u["unit_id"] + uid
        pid, uid = pid + p["person_id"].size, uid + u["unit_id"].size
        ps.append(p)
        us.append(u)
    cat = {k: np.concatenate([d[k] for d in ps]) for k in ps[0]}
    return cat, {k: np.concatenate([d[k] for d in us]) for k in us[0]}


@settings(max_examples=examples(6), deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    n_states=st.integers(2, 3),
    aian=st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=3, max_size=3),
    production=st.booleans(),
)
@example(seed=7, n_states=2, aian=[0.0, 0.5, 0.0], production=True)  # VT-like and a split state
def test_each_state_total_holds_on_its_parts_in_one_us_solve(seed, n_states, aian, production):
    """Also with fidelity ``production`` (production's rounder, no failsafe, the root's
    own measurements, no splitting)."""
    rng = np.random.default_rng(seed)
    persons, units = _states(rng, n_states, aian)
    tab = Hierarchy.from_blocks(units["geocode"])
    inv = compute_invariants(persons, units, tab)
    geo = geography_for_input("optimized", BUDGET, tab, units, inv)  # no refusal
    h = geo.estimation
    block_hist = geo.to_estimation(person_histogram(persons, tab, PL94))
    plan = [(m.geolevel, m.query, m.mechanism) for m in BUDGET.measurements()]
    ms = measure(
        h.aggregate(block_hist),
        h,
        PL94,
        plan,
        RandomSource.seeded(seed),
        unit_shares=geo.unit_shares(BUDGET),
    )
    bounds = geo.person_bounds(inv)
    groups = geo.spine.state_groups()
    split = np.bincount(groups)[groups] > 1
    # grouped exactly where a state has two parts; each group's total the state's
    assert (bounds[1].unit_group is not None) == bool(split.any())
    options = TopDownOptions(group_variable="hhgq")
    if production:
        options = TopDownOptions(
            group_variable="hhgq", production=True, pool_root=False, max_children=None
        )
    try:
        est = run_topdown(ms, h, bounds, options)
    except InfeasibleError:
        # production's rounder has no fallback (a box with no point raises, as in 2020)
        assert production
        return
    hists = [x.toarray() for x in est.histograms]
    assert all(x.dtype.kind == "i" and (x >= 0).all() for x in hists)
    up = h.aggregate(est.histograms[-1])
    for li in range(h.n_levels - 1):
        assert np.array_equal(np.asarray(up[li].todense()), hists[li]), h.geolevels[li].name
    # every state's parts sum to its true total; the US total is exact
    states, truth = np.unique(persons["geocode"].astype("U2"), return_counts=True)
    fips = np.asarray([c[1:3] for c in h.geocodes[1].tolist()])
    on_parts = {f: int(hists[1][fips == f].sum()) for f in np.unique(fips)}
    assert on_parts == {str(f): int(n) for f, n in zip(states, truth, strict=True)}
    assert hists[0].sum() == persons["geocode"].size
    # a state with one part holds its total on it; a split state's parts are free alone
    assert (bounds[1].total_lower[~split] == bounds[1].total_upper[~split]).all()
    if split.any():  # the US-children solve: the program's solvers, the only ones with group rows
        program = {"clarabel", "piqp"}
        assert set(est.levels[1]["methods"]) <= program | {f"groups+{m}" for m in program}


def _join(dirs: list[Path], out: Path) -> Path:
    """The CEFs in ``dirs`` as one input (ids shifted so they stay unique)."""
    out.mkdir()
    ps, us = [], []
    p_off = u_off = 0
    for d in dirs:
        p, u = pq.read_table(d / "persons.parquet"), pq.read_table(d / "units.parquet")

        def shift(t: pa.Table, col: str, off: int) -> pa.Table:
            i = t.schema.get_field_index(col)
            return t.set_column(i, col, pc.add(t[col], pa.scalar(off, t[col].type)))

        ps.append(shift(shift(p, "person_id", p_off), "unit_id", u_off))
        us.append(shift(u, "unit_id", u_off))
        p_off += int(pc.max(p["person_id"]).as_py()) + 1
        u_off += int(pc.max(u["unit_id"]).as_py()) + 1
    pq.write_table(pa.concat_tables(ps), out / "persons.parquet")
    pq.write_table(pa.concat_tables(us), out / "units.parquet")
    return out


@pytest.mark.slow
def test_generated_vermont_and_oklahoma_release_with_oklahoma_split(tmp_path):
    from censusdp.cli import main
    from censusdp.release.pipeline import reestimate
    from censusdp.release.validate import validate_run

    dirs = []
    for state, scale in (("VT", "0.02"), ("OK", "0.01")):
        d = tmp_path / state
        args = ["generate", "--state", state, "--seed", "2", "--scale", scale]
        assert main([*args, "--out", str(d), "--quiet"]) == 0
        dirs.append(d)
    cef = _join(dirs, tmp_path / "cef")
    aian = pq.read_table(cef / "units.parquet", columns=["geocode", "aian_area"]).to_pydict()
    in_aian = {g[:2] for g, a in zip(aian["geocode"], aian["aian_area"], strict=True) if a}
    assert in_aian == {"40"}  # Oklahoma has AIAN areas here, Vermont none
    run = tmp_path / "run"
    args = ["run", "--input", str(cef), "--out", str(run), "--preset", "pl94-2020"]
    assert main([*args, "--spine", "optimized", "--seed", "5", "--quiet"]) == 0
    manifest = json.loads((run / "manifest.json").read_text())
    parts = manifest["spine"]["state_part_population"]
    assert set(parts) == {"040", "140", "050"}
    report = validate_run(run)
    assert report.ok
    assert report.checks["state_totals_on_parts"]["ok"]
    assert "1 with AIAN and non-AIAN parts" in report.checks["state_totals_on_parts"]["detail"]
    # the released MDF: each state's total is its invariant
    mdf = pq.read_table(run / "mdf_persons.parquet", columns=["TABBLKST"]).column(0)
    states, counts = np.unique(np.asarray(mdf.to_pylist()), return_counts=True)
    assert {str(k): int(v) for k, v in zip(states, counts, strict=True)} == {
        "40": parts["040"] + parts["140"],
        "50": parts["050"],
    }
    # the US-children solve held Oklahoma's parts together (Clarabel with its group row)
    state_level = next(lv for lv in manifest["estimation"]["persons"] if lv["geolevel"] == "State")
    assert set(state_level["methods"]) <= {"groups+clarabel", "clarabel"}
    again = reestimate(run, tmp_path / "again")
    assert again["validation"]["ok"]
    assert main(["infer", str(run), "--out", str(tmp_path / "inf"), "--quiet"]) == 0
    # infer: each state's total exact, Oklahoma's on the union of its parts only
    inferred = json.loads((tmp_path / "inf" / "manifest.json").read_text())
    assert inferred["constraints"]["state_total_on_parts"] == 1
    est = pq.read_table(tmp_path / "inf" / "estimates.parquet").to_pydict()
    at_state = {
        g: (e, s)
        for lv, g, q, e, s in zip(
            est["geolevel"], est["geocode"], est["query"], est["estimate"], est["sd"], strict=True
        )
        if lv == "State" and q == "total"
    }
    assert at_state["040"][0] + at_state["140"][0] == pytest.approx(
        parts["040"] + parts["140"], abs=1e-6
    )
    assert at_state["040"][1] > 0 and at_state["140"][1] > 0
    assert at_state["050"] == (parts["050"], 0.0)
