"""Small valid synthetic CEFs for tests (independent of the generator package)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def block_codes(n_counties: int = 2, tracts: int = 2, bgs: int = 2, blocks: int = 3) -> list[str]:
    """Block geocodes of a small state '50' with the given fan-out."""
    out = []
    for c in range(n_counties):
        for t in range(tracts):
            for g in range(bgs):
                for b in range(blocks):
                    out.append(f"50{c + 1:03d}{t + 1:06d}{g + 1}{b + 1:04d}")
    return out


def make_cef(
    rng: np.random.Generator, blocks: list[str], *, mean_hh: float = 3.0, gq_rate: float = 0.3
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Random valid persons and units columns over ``blocks``."""
    unit_geo, unit_type, unit_occ = [], [], []
    p_unit, p_geo, p_hhgq = [], [], []
    uid = 0
    for b in blocks:
        n_hu = int(rng.integers(0, 4))
        for _ in range(n_hu):
            occ = bool(rng.random() < 0.8)
            unit_geo.append(b)
            unit_type.append(0)
            unit_occ.append(occ)
            if occ:
                for _ in range(1 + int(rng.poisson(mean_hh - 1))):
                    p_unit.append(uid)
                    p_geo.append(b)
                    p_hhgq.append(0)
            uid += 1
        if rng.random() < gq_rate:
            g = int(rng.integers(1, 8))
            unit_geo.append(b)
            unit_type.append(g)
            unit_occ.append(True)
            for _ in range(1 + int(rng.poisson(4))):
                p_unit.append(uid)
                p_geo.append(b)
                p_hhgq.append(g)
            uid += 1
    n = len(p_unit)
    hhgq = np.asarray(p_hhgq, dtype=np.int64)
    age = rng.integers(0, 90, n)
    age[hhgq == 3] = rng.integers(65, 100, int((hhgq == 3).sum()))
    persons = {
        "person_id": np.arange(n, dtype=np.int64),
        "unit_id": np.asarray(p_unit, dtype=np.int64),
        "geocode": np.asarray(p_geo, dtype="U16"),
        "hhgq": hhgq,
        "sex": rng.integers(1, 3, n),
        "age": age.astype(np.int64),
        "hispanic": (rng.random(n) < 0.2).astype(np.int64),
        "cenrace": np.where(rng.random(n) < 0.7, 1, rng.integers(1, 64, n)).astype(np.int64),
    }
    units = {
        "unit_id": np.arange(uid, dtype=np.int64),
        "geocode": np.asarray(unit_geo, dtype="U16"),
        "gqtype": np.asarray(unit_type, dtype=np.int64),
        "occupied": np.asarray(unit_occ, dtype=bool),
    }
    return persons, units


def write_cef(directory: Path, persons: dict, units: dict) -> Path:
    """Write columns as persons.parquet / units.parquet (geocode as string)."""
    directory.mkdir(parents=True, exist_ok=True)

    def table(cols: dict) -> pa.Table:
        return pa.table(
            {
                k: pa.array(v.astype(object), pa.string()) if k == "geocode" else pa.array(v)
                for k, v in cols.items()
            }
        )

    pq.write_table(table(persons), directory / "persons.parquet")
    pq.write_table(table(units), directory / "units.parquet")
    return directory


def write_record_release(directory, persons, units, hierarchy, schema="pl94") -> None:
    """Write records as a release's MDF files (production layout) and its invariants.

    For tests that fake a release from perturbed records: ``persons`` carry ``geocode``
    and the schema's columns (``age`` or ``votingage``, ...), ``units`` ``geocode``,
    ``gqtype`` and ``occupied`` (or ``None``: no units files).
    """
    from censusdp.data.invariants import compute_invariants
    from censusdp.io.mdf_write import write_mdf_records

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    write_mdf_records(d, persons, units, hierarchy, schema)
    if units is not None:
        inv = compute_invariants(persons, units, hierarchy)
        pq.write_table(inv.to_table(), d / "invariants.parquet")


def pl94_state(directory: Path, seed: int, codes: list[str], gq_rate: float):
    """A CEF written to ``directory / "cef"`` and what measuring it needs: ``(hierarchy,
    pl94 person histograms of every level, the pl94-2020 plan of (geolevel, query,
    mechanism))``."""
    from censusdp.data.geography import Hierarchy
    from censusdp.data.histograms import person_histogram
    from censusdp.data.schema import get_schema
    from censusdp.io.budget_files import load_preset
    from censusdp.io.cef import read_cef

    persons, units = make_cef(np.random.default_rng(seed), codes, gq_rate=gq_rate)
    write_cef(directory / "cef", persons, units)
    cef = read_cef(directory / "cef")
    h = Hierarchy.from_blocks(cef.units["geocode"])
    levels = h.aggregate(person_histogram(cef.persons, h, get_schema("pl94")))
    plan = [(m.geolevel, m.query, m.mechanism) for m in load_preset("pl94-2020").measurements()]
    return h, levels, plan


def tree_bytes(path: Path) -> dict[str, bytes]:
    """The bytes of a file (key ``""``) or of every file under a directory (a partitioned
    file: its parts and index), by relative path: two outputs are byte-identical when
    these are equal."""
    p = Path(path)
    if p.is_file():
        return {"": p.read_bytes()}
    return {str(f.relative_to(p)): f.read_bytes() for f in sorted(p.rglob("*")) if f.is_file()}


def cef_aggregates(cef):
    """What reading a CEF must give, computed from the records: its hierarchy, the
    invariants, the pl94 person histogram and the housing-unit histogram."""
    from censusdp.data.geography import DEFAULT_GEOLEVELS, Hierarchy
    from censusdp.data.histograms import housing_unit_histogram, person_histogram
    from censusdp.data.invariants import compute_invariants
    from censusdp.data.schema import get_schema

    hierarchy = Hierarchy.from_blocks(cef.units["geocode"], DEFAULT_GEOLEVELS)
    return (
        hierarchy,
        compute_invariants(cef.persons, cef.units, hierarchy),
        person_histogram(cef.persons, hierarchy, get_schema("pl94")),
        housing_unit_histogram(cef.units, hierarchy),
    )
