"""Synthetic truth / release pairs for the evaluation tests.

The truth is a small CEF that passes :func:`censusdp.io.cef.read_cef` validation; a
"release" is made from it by known perturbations, so tests can recompute every metric
independently from the raw columns.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from censusdp.data.geography import Hierarchy
from censusdp.io.tables import write_tables
from censusdp.tables import tabulate
from synth import write_record_release


def make_truth(directory: Path, seed: int = 0, n_counties: int = 3) -> dict[str, np.ndarray]:
    """Write persons.parquet / units.parquet of a valid synthetic state; return persons."""
    rng = np.random.default_rng(seed)
    blocks = [
        f"50{2 * c + 1:03d}{100 * (t + 1):06d}{bg + 1}{1000 + b:04d}"
        for c in range(n_counties)
        for t in range(3)
        for bg in range(2)
        for b in range(6)
    ]
    p_rows: dict[str, list] = {
        k: [] for k in ("unit_id", "geocode", "hhgq", "sex", "age", "hispanic", "cenrace")
    }
    u_rows: dict[str, list] = {k: [] for k in ("unit_id", "geocode", "gqtype", "occupied")}
    uid = 0

    def add_person(
        unit: int, block: str, hhgq: int, adult_only: bool = False, old: bool = False
    ) -> None:
        p_rows["unit_id"].append(unit)
        p_rows["geocode"].append(block)
        p_rows["hhgq"].append(hhgq)
        p_rows["sex"].append(int(rng.integers(1, 3)))
        lo = 65 if old else (18 if adult_only else 0)
        p_rows["age"].append(int(rng.integers(lo, 95)))
        p_rows["hispanic"].append(int(rng.random() < 0.15))
        p_rows["cenrace"].append(int(rng.choice([1, 1, 1, 1, 2, 2, 3, 4, 7, 12, 63])))

    for i, block in enumerate(blocks):
        n_hu = 0 if i % 7 == 3 else int(rng.integers(1, 14))
        for _ in range(n_hu):
            occ = bool(rng.random() < 0.8)
            u_rows["unit_id"].append(uid)
            u_rows["geocode"].append(block)
            u_rows["gqtype"].append(0)
            u_rows["occupied"].append(occ)
            if occ:
                for _ in range(int(rng.integers(1, 6))):
                    add_person(uid, block, 0)
            uid += 1
        if i % 9 == 4:
            g = int(rng.integers(1, 8))
            u_rows["unit_id"].append(uid)
            u_rows["geocode"].append(block)
            u_rows["gqtype"].append(g)
            u_rows["occupied"].append(True)
            for _ in range(int(rng.integers(3, 40))):
                add_person(uid, block, g, adult_only=g in (1, 5, 6), old=g == 3)
            uid += 1
    n = len(p_rows["unit_id"])
    persons = {"person_id": np.arange(n, dtype=np.int64)}
    persons.update({k: np.asarray(v, dtype=np.int64) for k, v in p_rows.items() if k != "geocode"})
    persons["geocode"] = np.asarray(p_rows["geocode"])
    units = {
        "unit_id": np.asarray(u_rows["unit_id"], dtype=np.int64),
        "geocode": np.asarray(u_rows["geocode"]),
        "gqtype": np.asarray(u_rows["gqtype"], dtype=np.int64),
        "occupied": np.asarray(u_rows["occupied"], dtype=bool),
    }
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(persons), directory / "persons.parquet")
    pq.write_table(pa.table(units), directory / "units.parquet")
    return {"persons": persons, "units": units}


def make_release(
    truth: dict, directory: Path, seed: int = 1, *, keep_invariants: bool = True, nmf: bool = True
) -> dict:
    """A release made by perturbing the truth; returns its MDF columns.

    With ``keep_invariants`` persons only move between blocks of one county and change
    attributes (state population exact, units unchanged except occupancy); otherwise
    some persons are dropped and one housing unit is removed.
    """
    rng = np.random.default_rng(seed)
    p, u = truth["persons"], truth["units"]
    n = p["geocode"].size
    geocode = p["geocode"].copy()
    hisp = p["hispanic"].copy()
    cenrace = p["cenrace"].copy()
    votingage = (p["age"] >= 18).astype(np.int64)
    hhgq = p["hhgq"].copy()
    hh = np.flatnonzero(hhgq == 0)
    move = rng.choice(hh, size=n // 5, replace=False)
    blocks_hu = np.unique(u["geocode"][u["gqtype"] == 0])
    for i in move:  # move to a random block of the same county that has housing units
        same = blocks_hu[np.char.startswith(blocks_hu.astype(str), geocode[i][:5])]
        geocode[i] = same[rng.integers(0, same.size)]
    flip = rng.random(n) < 0.1
    cenrace[flip] = rng.integers(1, 64, flip.sum())
    hisp[rng.random(n) < 0.05] ^= 1
    va_flip = (rng.random(n) < 0.05) & (hhgq == 0)
    votingage[va_flip] ^= 1
    keep = np.ones(n, dtype=bool)
    if not keep_invariants:
        keep[rng.choice(n, size=7, replace=False)] = False
    persons = {
        "geocode": geocode[keep],
        "hhgq": hhgq[keep],
        "votingage": votingage[keep],
        "hispanic": hisp[keep],
        "cenrace": cenrace[keep],
    }
    ukeep = np.ones(u["geocode"].size, dtype=bool)
    if not keep_invariants:
        ukeep[np.flatnonzero(u["gqtype"] == 0)[0]] = False
    occ = u["occupied"].copy()
    hu = u["gqtype"] == 0
    occ[hu] = rng.random(int(hu.sum())) < 0.85
    units = {"geocode": u["geocode"][ukeep], "gqtype": u["gqtype"][ukeep], "occupied": occ[ukeep]}
    directory.mkdir(parents=True, exist_ok=True)
    h = Hierarchy.from_blocks(np.concatenate([p["geocode"], u["geocode"]]))
    write_record_release(directory, persons, units, h)
    write_tables(tabulate(persons, units, h), directory / "tables")
    manifest = {
        "schema": "pl94",
        "postprocess": "topdown",
        "mechanism": "discrete_gaussian",
        "rho": 1.0,
        "epsilon": 10.0,
        "delta": 1e-10,
        "seed": seed,
        "geolevels": [[lv.name, lv.length] for lv in h.geolevels.levels],
        "package_version": "test",
        "timings": {},
    }
    (directory / "manifest.json").write_text(json.dumps(manifest))
    if nmf:
        write_nmf(truth, h, directory / "noisy_measurements.parquet", rng)
    return {"persons": persons, "units": units}


NMF_VARIANCE = {
    ("County", "total"): 4.0,
    ("Block", "detailed"): 2.25,
    ("State", "hispanic*cenrace"): 9.0,
}


def write_nmf(truth: dict, h: Hierarchy, path: Path, rng: np.random.Generator) -> None:
    """Noisy measurements of a few queries: truth + rounded Gaussian noise of known variance."""
    from censusdp.data.histograms import person_histogram
    from censusdp.data.queries import make_query
    from censusdp.data.schema import get_schema

    schema = get_schema("pl94")
    levels = h.aggregate(person_histogram(truth["persons"], h))
    frames = []
    for (level, qname), var in NMF_VARIANCE.items():
        li = h.geolevels.index(level)
        q = make_query(schema, qname)
        ans = np.asarray((levels[li] @ q.matrix.T).todense())
        units, cells = np.indices(ans.shape)
        true = ans.ravel()
        noisy = true + np.rint(rng.normal(0, np.sqrt(var), true.size))
        frames.append(
            pa.table(
                {
                    "geolevel": pa.array([level] * true.size),
                    "geocode": pa.array(h.geocodes[li][units.ravel()].astype(object)),
                    "query": pa.array([qname] * true.size),
                    "cell": pa.array(cells.ravel().astype(np.int32)),
                    "value": pa.array(noisy.astype(np.int64)),
                    # rounding adds 1/12 to the variance of a continuous Gaussian
                    "variance": pa.array(np.full(true.size, var + 1 / 12)),
                }
            )
        )
    pq.write_table(pa.concat_tables(frames), path)


@pytest.fixture(scope="session")
def truth_release(tmp_path_factory):
    base = tmp_path_factory.mktemp("eval")
    truth = make_truth(base / "truth", seed=0)
    release = make_release(truth, base / "release", seed=1)
    return base / "truth", base / "release", truth, release


@pytest.fixture(scope="session")
def broken_release(tmp_path_factory, truth_release):
    truth_dir, _, truth, _ = truth_release
    base = tmp_path_factory.mktemp("broken")
    release = make_release(truth, base / "release", seed=2, keep_invariants=False, nmf=False)
    return truth_dir, base / "release", truth, release


@pytest.fixture(scope="session")
def generated_households(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A generated one-tract state with households (VT seed 2 x0.002): its CEF, its
    geography and the truth's H1 at every level, for the household comparisons."""
    from censusdp.data.geography import DEFAULT_GEOLEVELS
    from censusdp.data.histograms import person_histogram, pl94_view, unit_histogram
    from censusdp.generate import generate_state
    from censusdp.io.cef import read_cef
    from censusdp.tables import table_arrays

    base = tmp_path_factory.mktemp("hh_eval")
    generate_state("VT", 2, base / "cef", scale=0.002)
    cef = read_cef(base / "cef")
    codes = np.concatenate([cef.persons["geocode"], cef.units["geocode"]]).astype("U16")
    h = Hierarchy.from_blocks(codes, DEFAULT_GEOLEVELS)
    t_ph = person_histogram(pl94_view(cef.persons), h)
    h1 = table_arrays(t_ph, unit_histogram(cef.units, h), h)["H1"]
    return {"base": base, "cef": cef, "h": h, "h1": h1}
