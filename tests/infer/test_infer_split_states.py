"""``censusdp infer`` on a release of several states, one of them split in AIAN and
non-AIAN parts (the production spine): the GLS holds each state's invariant total on
the union of its parts, not on either part (production's
``addGroupedChildTotalConstraint``, on the US's children). A state of one part, and
every state on the tabulation hierarchy, has its own total exact.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from censusdp.cli import main
from censusdp.infer.release import release_gls
from synth import block_codes, make_cef, write_cef

FIPS = ("50", "40", "04")


def _cef(directory: Path, aian: tuple[bool, ...], seed: int) -> Path:
    """Small states ``FIPS[:len(aian)]`` of four tracts; state ``s``'s first tract is in
    an AIAN area when ``aian[s]``."""
    rng = np.random.default_rng(seed)
    ps, us = [], []
    pid = uid = 0
    for s, split in enumerate(aian):
        codes = [FIPS[s] + c[2:] for c in block_codes(2, 2, 1, 3)]
        p, u = make_cef(rng, codes, gq_rate=0.3)
        tract = np.char.ljust(u["geocode"].astype("U11"), 11)
        inside = split & (tract == np.sort(tract)[0])
        u["aian_area"] = np.where(inside, "0012", "").astype("U4")
        u["place"] = np.full(u["geocode"].size, "", dtype="U5")
        p["person_id"] = p["person_id"] + pid
        p["unit_id"] = p["unit_id"] + uid
        u["unit_id"] = u["unit_id"] + uid
        pid, uid = pid + p["person_id"].size, uid + u["unit_id"].size
        ps.append(p)
        us.append(u)
    persons = {k: np.concatenate([d[k] for d in ps]) for k in ps[0]}
    units = {k: np.concatenate([d[k] for d in us]) for k in us[0]}
    return write_cef(directory, persons, units)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Three small states (the second split in AIAN and non-AIAN parts), released on the
    production spine and on the tabulation hierarchy."""
    d = tmp_path_factory.mktemp("split_infer")
    cef = _cef(d / "cef", (False, True, False), seed=11)
    persons = pq.read_table(cef / "persons.parquet", columns=["geocode"]).column(0).to_pylist()
    states, counts = np.unique([g[:2] for g in persons], return_counts=True)
    out = {"truth": dict(zip(states.tolist(), counts.tolist(), strict=True))}
    for spine in ("optimized", "tabulation"):
        run = d / f"run_{spine}"
        args = ["run", "--input", str(cef), "--out", str(run), "--preset", "pl94-2020"]
        assert main([*args, "--spine", spine, "--seed", "5", "--quiet"]) == 0
        out[spine] = run
    return out


def _state_rows(run: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, object]:
    gls = release_gls(run)
    state = gls.hierarchy.geolevels.index("State")
    est = sd = None
    for res in gls.chunks:
        if res.level == state:
            est, sd = res.estimate[:, 0], res.sd[:, 0]  # the line ``total``
    codes = gls.hierarchy.geocodes[state]
    return codes, est, sd, gls


def test_spine_state_totals_hold_on_their_parts(runs) -> None:
    """On the spine: a split state's parts sum to its invariant total exactly (before:
    only the US total was exact, so they did not), each part's own sd is positive; a
    state of one part has its total exact (sd 0)."""
    codes, est, sd, gls = _state_rows(runs["optimized"])
    fips = np.asarray([c[1:3] for c in codes.tolist()])
    assert sorted(np.unique(fips, return_counts=True)[1].tolist()) == [1, 1, 2]
    for f, n in runs["truth"].items():
        parts = fips == f
        assert est[parts].sum() == pytest.approx(n, abs=1e-6)
        if parts.sum() == 1:
            assert est[parts][0] == n and sd[parts][0] == 0.0
        else:
            assert (sd[parts] > 0.5).all()
            # the two parts' sds are equal: their totals' errors cancel exactly
            assert sd[parts][0] == pytest.approx(sd[parts][1], rel=1e-6)
    assert gls.split_states == 1


def test_tabulation_states_exact(runs) -> None:
    codes, est, sd, gls = _state_rows(runs["tabulation"])
    assert gls.split_states == 0
    for code, e, s in zip(codes.tolist(), est, sd, strict=True):
        assert e == runs["truth"][code] and s == 0.0


def test_margins_of_the_published_states_are_exact(runs, tmp_path) -> None:
    """``margins.parquet``: every published State's total has sd 0 (its blocks' sum over
    both parts, from the tree factors), on the spine release too."""
    out = tmp_path / "inf"
    assert main(["infer", str(runs["optimized"]), "--out", str(out), "--quiet"]) == 0
    t = pq.read_table(out / "margins.parquet").to_pydict()
    rows = [
        i
        for i, (lv, q) in enumerate(zip(t["geolevel"], t["variable"], strict=True))
        if lv == "State" and q == "P1_001N"
    ]
    assert sorted(t["GEOID"][i] for i in rows) == sorted(runs["truth"])
    for i in rows:
        assert t["gls_sd"][i] == pytest.approx(0.0, abs=1e-6)
        assert t["gls_estimate"][i] == runs["truth"][t["GEOID"][i]]


@pytest.mark.slow
@pytest.mark.parametrize("spine", ["optimized", "tabulation"])
def test_generated_oklahoma(tmp_path, spine) -> None:
    """Generated Oklahoma (its OTSAs split it) released alone: on the spine its parts
    sum to its invariant total (their union is the root), on the tabulation hierarchy
    the state's own total is exact; ``margins.parquet``'s state total has sd 0."""
    cef, run, out = tmp_path / "cef", tmp_path / "run", tmp_path / "inf"
    args = ["generate", "--state", "OK", "--seed", "2", "--scale", "0.01", "--quiet"]
    assert main([*args, "--out", str(cef)]) == 0
    n = pq.read_metadata(cef / "persons.parquet").num_rows
    args = ["run", "--input", str(cef), "--out", str(run), "--spine", spine, "--seed", "5"]
    assert main([*args, "--quiet"]) == 0
    codes, est, sd, _ = _state_rows(run)
    assert len(codes) == (2 if spine == "optimized" else 1)
    assert est.sum() == pytest.approx(n, abs=1e-6)
    assert (sd > 0.5).all() if spine == "optimized" else sd[0] == 0.0
    assert main(["infer", str(run), "--out", str(out), "--quiet"]) == 0
    t = pq.read_table(out / "margins.parquet").to_pydict()
    rows = [
        i
        for i, (lv, q) in enumerate(zip(t["geolevel"], t["variable"], strict=True))
        if lv == "State" and q == "P1_001N"
    ]
    assert [t["gls_estimate"][i] for i in rows] == [n]
    assert t["gls_sd"][rows[0]] == pytest.approx(0.0, abs=1e-6)
