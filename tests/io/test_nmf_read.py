"""Reading the noisy measurement file as a person would: one geolevel, decoded cells."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from censusdp.data.measurements import MeasuredQuery, measured_rows
from censusdp.data.queries import make_query
from censusdp.data.schema import get_schema
from censusdp.errors import InputError, SchemaError
from censusdp.io.nmf_files import read_nmf_rows
from censusdp.io.nmf_levels import decode_cells, nmf_geolevels, read_geolevel
from censusdp.io.nmf_write import NMFWriter
from censusdp.io.parts import write_part_index

SCHEMA = get_schema("pl94")
LEVELS = {"State": ["50"], "County": ["50001", "50003", "50005"], "Tract": ["50001960100"]}
QUERIES = ("total", "votingage*hispanic*cenrace", "hhgq", "detailed")


def _write(path, rng):
    """An NMF of every (level, query) above, one row group each; returns the full table."""
    with NMFWriter(path) as w:
        for level, codes in LEVELS.items():
            for qname in QUERIES:
                q = make_query(SCHEMA, qname)
                rows = measured_rows(SCHEMA, q)
                values = rng.integers(-5, 50, (len(codes), rows.size))
                mq = MeasuredQuery(level, q.name, rows, values, 2.5, "DiscreteGaussian")
                w.write_query(mq, np.asarray(codes))
    return read_nmf_rows(path)


@pytest.fixture(scope="module")
def nmf(tmp_path_factory):
    path = tmp_path_factory.mktemp("nmf") / "noisy_measurements.parquet"
    return path, _write(path, np.random.default_rng(7))


def _strings(col):
    return col.cast(pa.string()).to_pylist()


def test_levels_from_footer_and_one_level_read(nmf):
    path, full = nmf
    assert nmf_geolevels(path) == ["State", "County", "Tract"]
    county = read_geolevel(path, "County")
    want = full.filter(pc.equal(full.column("geolevel").cast(pa.string()), "County"))
    assert county.num_rows == want.num_rows > 0
    assert set(_strings(county.column("geolevel"))) == {"County"}
    assert county.column("value").to_pylist() == want.column("value").to_pylist()
    assert _strings(county.column("geocode")) == _strings(want.column("geocode"))
    only = read_geolevel(path, "Tract", columns=["geocode", "value"])
    assert only.column_names == ["geocode", "value"]
    with pytest.raises(InputError, match=r"no geolevel 'Block'.*\['State', 'County', 'Tract'\]"):
        read_geolevel(path, "Block")
    with pytest.raises(InputError, match="missing file"):
        read_geolevel(path.parent / "absent.parquet", "County")


def test_mixed_row_groups_and_directories_are_filtered(nmf, tmp_path):
    path, full = nmf
    plain = full.cast(
        pa.schema(
            [
                pa.field(f.name, pa.string())
                if f.name in ("geolevel", "geocode", "query", "mechanism")
                else f
                for f in full.schema
            ]
        )
    )
    mixed = tmp_path / "mixed.parquet"
    pq.write_table(plain, mixed, row_group_size=plain.num_rows)  # one group, all levels
    got = read_geolevel(mixed, "County")
    assert (
        got.column("value").to_pylist() == read_geolevel(path, "County").column("value").to_pylist()
    )
    d = tmp_path / "dataset"
    d.mkdir()
    half = plain.num_rows // 2
    pq.write_table(plain.slice(0, half), d / "part-0.parquet")
    pq.write_table(plain.slice(half), d / "part-1.parquet")
    # a directory is read through its index only, never by listing it
    with pytest.raises(InputError, match="no _parts.json"):
        nmf_geolevels(d)
    with pytest.raises(InputError, match="no _parts.json"):
        read_geolevel(d, "Tract")
    # an index that does not give the parts' levels: its parts are filtered
    recs = [
        {"file": f.name, "rows": pq.read_metadata(f).num_rows, "sha256": "-"}
        for f in sorted(d.glob("part-*.parquet"))
    ]
    write_part_index(d, recs, ("file", "rows", "sha256"))
    pq.write_table(plain, d / "part-2.parquet")  # not listed: never read
    assert sorted(nmf_geolevels(d)) == ["County", "State", "Tract"]
    assert read_geolevel(d, "Tract").num_rows == read_geolevel(path, "Tract").num_rows
    with pytest.raises(InputError, match="no geolevel 'Block'"):
        read_geolevel(d, "Block")


def test_decoded_levels_match_the_cells_they_sum(nmf):
    path, _ = nmf
    t = decode_cells(read_geolevel(path, "County"))
    for var in ("hhgq", "votingage", "hispanic", "cenrace"):
        assert var in t.column_names
    q = make_query(SCHEMA, "votingage*hispanic*cenrace")
    rows = t.filter(pc.equal(t.column("query").cast(pa.string()), q.name))
    cells = rows.column("cell").to_numpy()
    # independent check: each schema cell's own levels, through the query's row map
    for var in q.variables:
        labels = SCHEMA.variable_levels(var)
        per_cell = SCHEMA.cell_levels(var)
        want = {}
        for detailed_cell, row in enumerate(q.row_of_cell):
            want.setdefault(int(row), labels[per_cell[detailed_cell]])
        assert _strings(rows.column(var)) == [want[int(c)] for c in cells]
    assert set(_strings(rows.column("hhgq"))) == {None}
    adult = _strings(rows.column("votingage"))
    assert adult[0] == SCHEMA.variable_levels("votingage")[0]
    assert len(set(adult)) == 2
    total = t.filter(pc.equal(t.column("query").cast(pa.string()), "total"))
    for var in ("hhgq", "votingage", "hispanic", "cenrace"):
        assert total.column(var).null_count == total.num_rows


def test_decode_rejects_bad_cells_and_queries():
    bad = pa.table({"query": ["hhgq"], "cell": pa.array([8], pa.int32())})
    with pytest.raises(InputError, match=r"'hhgq' has cells 0..7; the table has cell 8"):
        decode_cells(bad)
    with pytest.raises(SchemaError):
        decode_cells(pa.table({"query": ["sex"], "cell": pa.array([0], pa.int32())}))
    with pytest.raises(InputError, match="lack columns"):
        decode_cells(pa.table({"cell": [0]}))
    units = decode_cells(pa.table({"query": ["detailed"] * 2, "cell": [0, 1]}), "units")
    assert units.column_names[-1] == "occupancy"
    assert _strings(units.column("occupancy")) == list(
        get_schema("units").variable_levels("occupancy")
    )
