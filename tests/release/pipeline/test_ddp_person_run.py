"""``--preset ddp-2010`` as the DDP ran it: a tiny release of generated Vermont (six
blocks) whose NMF carries, for every person measurement, the noise of Van Riper et al.
(2020) Appendix A Table 2, on the DDP's seven levels (the tract group included), and
whose manifest records epsilon 6.0 (persons 4.0 + the unit run 2.0)."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import censusdp
from censusdp.generate import generate_state
from censusdp.io.nmf_files import read_nmf_rows
from censusdp.release.topdown.maxent import default_estimator
from censusdp.release.topdown.passes import plans_for

#: Table 2, Scale_nation (nation and state) and Scale_county (county and below).
TABLE2 = {
    "detailed": (25.0, 125 / 3),
    "hhgq": (12.5, 125 / 6),
    "votingage*hispanic*cenrace*citizen": (5.0, 25 / 3),
    "age*sex": (50.0, 250 / 3),
    "agegroups4*sex": (50.0, 250 / 3),
    "agegroups16*sex": (50.0, 250 / 3),
    "agegroups64*sex": (50.0, 250 / 3),
}


def _geometric_variance(scale: float) -> float:
    """Variance of the two-sided geometric law ``P[k] ~ a^|k|``, ``a = exp(-1/scale)``."""
    a = math.exp(-1 / scale)
    return 2 * a / (1 - a) ** 2


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    base = tmp_path_factory.mktemp("ddp")
    generate_state("VT", 4, base / "vt", scale=0.01)
    units = pq.read_table(base / "vt" / "units.parquet")
    persons = pq.read_table(base / "vt" / "persons.parquet")
    keep = set(sorted(set(units.column("geocode").to_pylist()))[:6])
    small = base / "small"
    small.mkdir()
    for name, table in (("units", units), ("persons", persons)):
        mask = pa.array([g in keep for g in table.column("geocode").to_pylist()])
        pq.write_table(table.filter(mask), small / f"{name}.parquet")
    censusdp.run_release(small, base / "run", budget="ddp-2010", seed=7)
    return base / "run"


def test_the_ddp_schema_is_estimated_and_rounded_as_dhc_lite() -> None:
    """A cell-level query far wider than a block's persons: ``auto`` (maximum entropy
    where a query is below its noise) and the published tables' rounding passes."""
    levels = ("US", "State", "County", "Tract_Group", "Tract", "BlockGroup", "Block")
    assert default_estimator("dhcp-hhgq") == default_estimator("dhc-lite") == "auto"
    assert plans_for("dhcp-hhgq", levels) == plans_for("dhc-lite", levels)
    assert all(p is not None for p in plans_for("dhcp-hhgq", levels))


@pytest.mark.slow
def test_nmf_noise_is_table_2_and_the_release_is_epsilon_6(release):
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["epsilon"] == 6.0
    assert manifest["schema"] == "dhcp-hhgq" and manifest["estimator"] == "auto"
    nmf = read_nmf_rows(
        release / "noisy_measurements.parquet",
        columns=["geolevel", "query", "variance", "mechanism"],
    )
    keys = ["geolevel", "query", "variance", "mechanism"]
    plain = pa.table({k: nmf.column(k).cast(pa.float64() if k == "variance" else pa.string())
                      for k in keys})  # fmt: skip
    groups = plain.group_by(keys).aggregate([("geolevel", "count")]).to_pylist()
    rows = {tuple(r[k] for k in keys): r["geolevel_count"] for r in groups}
    levels = ("State", "County", "Tract_Group", "Tract", "BlockGroup", "Block")  # one state
    assert {(g, q) for g, q, _, _ in rows} == {(g, q) for g in levels for q in TABLE2}
    for (geolevel, query, variance, mechanism), n in rows.items():
        nation, county = TABLE2[query]
        scale = nation if geolevel == "State" else county
        assert mechanism == "Geometric"
        assert variance == pytest.approx(_geometric_variance(scale), rel=1e-9), (geolevel, query)
        assert n > 0
    # every block measured 337,680 detailed rows: 467,712 cells less the structural zeros
    detailed = sum(n for (g, q, _, _), n in rows.items() if g == "BlockGroup" and q == "detailed")
    assert detailed == 337_680


@pytest.mark.slow
def test_mdf_has_citizenship_and_tables_name_the_tract_group(release):
    mdf = pq.read_table(release / "mdf_persons.parquet", columns=["CITIZEN"])
    assert set(mdf.column("CITIZEN").cast(pa.string()).to_pylist()) <= {"1", "2"}
    p1 = (
        ds.dataset(release / "tables" / "P1.parquet")
        .to_table(columns=["geolevel", "SUMLEV", "NAME"])
        .to_pylist()
    )
    tract_groups = [r for r in p1 if r["geolevel"] == "Tract_Group"]
    assert tract_groups and all(r["SUMLEV"] is None for r in tract_groups)
    assert tract_groups[0]["NAME"].startswith("Tract_Group ")
