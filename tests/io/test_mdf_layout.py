"""The MDF files in the 2020 production layout: text and Parquet agree, and read back exactly.

The column lists below are written out from production's writers
(``programs/writer/mdf2020writer.py``: ``MDF2020PersonPL94HistogramWriter``,
``MDF2020PersonWriter`` and ``MDF2020H1HistogramWriter``), not imported from censusdp,
so a change of censusdp's layout fails here.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import person_histogram, unit_histogram, unit_histogram_from_counts
from censusdp.data.invariants import N_HHGQ, Invariants
from censusdp.data.schema import get_schema
from censusdp.errors import InputError
from censusdp.io.mdf_read import read_mdf_persons, read_mdf_units
from censusdp.io.mdf_records import iter_mdf_blocks
from censusdp.io.mdf_write import write_mdf_persons, write_mdf_records, write_mdf_units
from synth import block_codes

PRODUCTION_PL94_PERSONS = (
    "SCHEMA_TYPE_CODE|SCHEMA_BUILD_ID|TABBLKST|TABBLKCOU|TABTRACTCE|TABBLKGRPCE|TABBLK|"
    "EPNUM|RTYPE|GQTYPE_PL|VOTING_AGE|CENHISP|CENRACE"
)
PRODUCTION_PERSONS = (
    "SCHEMA_TYPE_CODE|SCHEMA_BUILD_ID|TABBLKST|TABBLKCOU|TABTRACTCE|TABBLKGRPCE|TABBLK|"
    "EPNUM|RTYPE|GQTYPE|RELSHIP|QSEX|QAGE|CENHISP|CENRACE|CITIZEN|LIVE_ALONE"
)
PRODUCTION_UNITS = (
    "SCHEMA_TYPE_CODE|SCHEMA_BUILD_ID|TABBLKST|TABBLKCOU|TABTRACTCE|TABBLKGRPCE|TABBLK|"
    "RTYPE|HH_STATUS"
)
BLOCKS = block_codes(2, 2, 2, 3)
H = Hierarchy.from_blocks(np.asarray(BLOCKS))


def _parse(path, header: str) -> list[dict[str, str]]:
    """Parse a text MDF by hand with production's column list (no CSV library)."""
    lines = path.read_text(encoding="ascii").splitlines()
    assert lines[0] == header  # exact: unquoted names, production's order
    names = header.split("|")
    rows = [line.split("|") for line in lines[1:]]
    assert all(len(r) == len(names) for r in rows)
    return [dict(zip(names, r, strict=True)) for r in rows]


def _random_hist(rng: np.random.Generator, schema, n_blocks: int, persons: int) -> sp.csr_matrix:
    cols = {
        "geocode": rng.choice(np.asarray(BLOCKS[:n_blocks]), persons),
        "hhgq": rng.integers(0, 8, persons),
        "age": rng.integers(0, 116, persons),
        "sex": rng.integers(1, 3, persons),
        "hispanic": rng.integers(0, 2, persons),
        "cenrace": rng.integers(1, 64, persons),
    }
    return person_histogram(cols, H, schema)


def _write(tmp_path, hist, schema, per_chunk=1 << 22):
    from censusdp.io.mdf_write import MDFPersonWriter

    with MDFPersonWriter(H, tmp_path / "p.parquet", tmp_path / "p.txt", schema) as w:
        for cols in iter_mdf_blocks(hist, schema, persons_per_chunk=per_chunk):
            w.write(cols)
    return w.persons


@pytest.mark.parametrize(
    ("schema_name", "header"), [("pl94", PRODUCTION_PL94_PERSONS), ("dhc-lite", PRODUCTION_PERSONS)]
)
def test_person_text_and_parquet_carry_the_same_production_codes(tmp_path, schema_name, header):
    schema = get_schema(schema_name)
    hist = _random_hist(np.random.default_rng(1), schema, len(BLOCKS), 300)
    n = _write(tmp_path, hist, schema, per_chunk=37)
    rows = _parse(tmp_path / "p.txt", header)
    table = pq.read_table(tmp_path / "p.parquet")
    assert table.column_names == header.split("|") and len(rows) == n == table.num_rows == 300
    assert table.schema.field("EPNUM").type == pa.int64()
    for name in table.column_names:
        parquet = [str(v) for v in table.column(name).to_pylist()]
        assert parquet == [r[name] for r in rows], name
    assert [int(r["EPNUM"]) for r in rows] == list(range(300))  # from 0, across chunks
    assert {r["SCHEMA_TYPE_CODE"] for r in rows} == {"MPD"}
    assert {r["SCHEMA_BUILD_ID"] for r in rows} == {"1.1.0"}
    # every code in the domain production's validators accept
    assert {r["RTYPE"] for r in rows} == {"3", "5"}
    assert {r["CENHISP"] for r in rows} == {"1", "2"}
    assert {r["CENRACE"] for r in rows} <= {f"{c:02d}" for c in range(1, 64)}
    geocodes = ["".join(r[c] for c in header.split("|")[2:7]) for r in rows]
    assert geocodes == sorted(geocodes) and set(geocodes) <= set(BLOCKS)
    household = [r["RTYPE"] == "3" for r in rows]
    if schema_name == "pl94":
        assert [r["GQTYPE_PL"] == "0" for r in rows] == household
        assert {r["VOTING_AGE"] for r in rows} == {"1", "2"}
    else:
        assert [r["GQTYPE"] == "000" for r in rows] == household
        assert {r["GQTYPE"] for r in rows} <= {
            "000",
            "101",
            "201",
            "301",
            "401",
            "501",
            "601",
            "701",
        }
        assert {r["QSEX"] for r in rows} == {"1", "2"}
        assert all(0 <= int(r["QAGE"]) <= 115 and r["QAGE"] == str(int(r["QAGE"])) for r in rows)
        assert {(r["RELSHIP"], r["CITIZEN"], r["LIVE_ALONE"]) for r in rows} == {("99", "9", "9")}


def test_one_person_is_coded_as_production_codes_it(tmp_path):
    schema = get_schema("dhc-lite")
    cols = {"geocode": np.asarray([BLOCKS[4]]), "hhgq": np.asarray([3]), "sex": np.asarray([2])}
    cols.update(age=np.asarray([7]), hispanic=np.asarray([1]), cenrace=np.asarray([9]))
    write_mdf_records(tmp_path, cols, None, H, schema)
    (row,) = _parse(tmp_path / "mdf_persons.txt", PRODUCTION_PERSONS)
    assert row == {
        "SCHEMA_TYPE_CODE": "MPD",
        "SCHEMA_BUILD_ID": "1.1.0",
        "TABBLKST": BLOCKS[4][:2],
        "TABBLKCOU": BLOCKS[4][2:5],
        "TABTRACTCE": BLOCKS[4][5:11],
        "TABBLKGRPCE": BLOCKS[4][11],
        "TABBLK": BLOCKS[4][12:],
        "EPNUM": "0",
        "RTYPE": "5",
        "GQTYPE": "301",
        "RELSHIP": "99",
        "QSEX": "2",
        "QAGE": "7",
        "CENHISP": "2",
        "CENRACE": "09",
        "CITIZEN": "9",
        "LIVE_ALONE": "9",
    }
    pl = get_schema("pl94")
    write_mdf_records(tmp_path / "pl", {**cols, "age": np.asarray([40])}, None, H, pl)
    (row,) = _parse(tmp_path / "pl" / "mdf_persons.txt", PRODUCTION_PL94_PERSONS)
    assert (row["RTYPE"], row["GQTYPE_PL"], row["VOTING_AGE"], row["CENHISP"], row["CENRACE"]) == (
        "5",
        "3",
        "2",
        "2",
        "09",
    )


def _units(rng: np.random.Generator):
    nb = len(BLOCKS)
    hu = rng.integers(0, 5, nb)
    occ = rng.binomial(hu, 0.7)
    gq = np.zeros((nb, N_HHGQ), dtype=np.int64)
    gq[:, 1:] = rng.binomial(1, 0.15, (nb, N_HHGQ - 1)) * rng.integers(1, 3, (nb, N_HHGQ - 1))
    return hu, occ, gq


def _invariants(hu, gq) -> pa.Table:
    nb = len(BLOCKS)
    return Invariants(H.blocks, np.zeros(nb, np.int64), hu, gq).to_table()


def test_unit_text_and_parquet_carry_the_same_production_codes(tmp_path):
    hu, occ, gq = _units(np.random.default_rng(2))
    n = write_mdf_units(H, hu, occ, gq, tmp_path / "u.parquet", tmp_path / "u.txt")
    rows = _parse(tmp_path / "u.txt", PRODUCTION_UNITS)
    table = pq.read_table(tmp_path / "u.parquet")
    assert table.column_names == PRODUCTION_UNITS.split("|")
    assert n == len(rows) == table.num_rows == hu.sum() + gq.sum()
    for name in table.column_names:
        assert table.column(name).to_pylist() == [r[name] for r in rows], name
    assert {r["SCHEMA_TYPE_CODE"] for r in rows} == {"MUD"}
    pairs = [(r["RTYPE"], r["HH_STATUS"]) for r in rows]
    assert pairs.count(("2", "1")) == occ.sum() and pairs.count(("2", "2")) == (hu - occ).sum()
    assert pairs.count(("4", "0")) == gq.sum() and len(set(pairs)) == 3
    for b, code in enumerate(BLOCKS):  # per block: vacant, occupied, facilities (production)
        geo = ["".join(r[c] for c in PRODUCTION_UNITS.split("|")[2:7]) for r in rows]
        mine = [p for g, p in zip(geo, pairs, strict=True) if g == code]
        want = [("2", "2")] * (hu[b] - occ[b]) + [("2", "1")] * occ[b] + [("4", "0")] * gq[b].sum()
        assert mine == want


@settings(max_examples=25)
@given(seed=st.integers(0, 2**32 - 1), persons=st.integers(0, 120), dhc=st.booleans())
def test_persons_read_back_to_the_written_histogram(tmp_path_factory, seed, persons, dhc):
    schema = get_schema("dhc-lite" if dhc else "pl94")
    rng = np.random.default_rng(seed)
    hist = _random_hist(rng, schema, int(rng.integers(1, len(BLOCKS) + 1)), persons)
    d = tmp_path_factory.mktemp("p")
    _write(d, hist, schema, per_chunk=int(rng.integers(1, 50)))
    back = read_mdf_persons(d / "p.parquet")
    assert back["geocode"].size == persons
    assert (person_histogram(back, H, schema) != hist).nnz == 0


@settings(max_examples=25)
@given(seed=st.integers(0, 2**32 - 1))
def test_units_read_back_with_their_facility_types(tmp_path_factory, seed):
    hu, occ, gq = _units(np.random.default_rng(seed))
    d = tmp_path_factory.mktemp("u")
    write_mdf_units(H, hu, occ, gq, d / "mdf_units.parquet")
    pq.write_table(_invariants(hu, gq), d / "invariants.parquet")
    back = read_mdf_units(d / "mdf_units.parquet")
    assert (unit_histogram(back, H) != unit_histogram_from_counts(hu, occ, gq)).nnz == 0


def test_units_that_disagree_with_the_published_facilities_are_refused(tmp_path):
    hu, occ, gq = _units(np.random.default_rng(3))
    gq[5, 2] = 1
    write_mdf_units(H, hu, occ, gq, tmp_path / "mdf_units.parquet")
    with pytest.raises(InputError, match="facilities carry no type"):
        read_mdf_units(tmp_path / "mdf_units.parquet")
    fewer = gq.copy()
    fewer[5, 2] = 0
    with pytest.raises(InputError, match=f"block {BLOCKS[5]} has {gq[5].sum()} group-quarters"):
        read_mdf_units(tmp_path / "mdf_units.parquet", _invariants(hu, fewer))


def test_a_code_outside_the_layout_is_named(tmp_path):
    schema = get_schema("pl94")
    hist = _random_hist(np.random.default_rng(4), schema, 3, 10)
    cols = next(iter_mdf_blocks(hist, schema))
    write_mdf_persons(cols, H, tmp_path / "p.parquet")
    t = pq.read_table(tmp_path / "p.parquet")
    bad = t.column("CENRACE").to_pylist()
    bad[6] = "7"  # production writes "07"
    i = t.column_names.index("CENRACE")
    pq.write_table(t.set_column(i, "CENRACE", pa.array(bad)), tmp_path / "p.parquet")
    with pytest.raises(InputError, match="column 'CENRACE' row 6 has value '7'"):
        read_mdf_persons(tmp_path / "p.parquet")
    t = t.set_column(i, "CENRACE", t.column("CENRACE"))
    rtype = t.column("RTYPE").to_pylist()
    j = 3
    rtype[j] = {"3": "5", "5": "3"}[rtype[j]]
    t = t.set_column(t.column_names.index("RTYPE"), "RTYPE", pa.array(rtype))
    pq.write_table(t, tmp_path / "p.parquet")
    with pytest.raises(InputError, match=f"row {j} has RTYPE '{rtype[j]}'"):
        read_mdf_persons(tmp_path / "p.parquet")
