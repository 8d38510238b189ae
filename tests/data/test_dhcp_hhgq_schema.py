"""The 2010 DDP's person schema (``Schema_DHCP_HHGQ``): its cells, its age recodes, its
structural zeros of age by group-quarters type, citizenship read from the input and
written to the MDF as production's writer does, and its P.L. 94-171 view."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from censusdp.data.geography import DEFAULT_GEOLEVELS
from censusdp.data.histograms import person_histogram, pl94_map
from censusdp.data.queries import make_query
from censusdp.data.schema import get_schema
from censusdp.errors import InputError
from censusdp.generate import generate_state
from censusdp.io.cef import read_cef
from censusdp.io.cef_stream import read_cef_blocks
from censusdp.io.mdf_read import decode_persons
from censusdp.io.mdf_records import (
    DHCP_PERSON_COLUMNS,
    geo_dictionaries,
    iter_mdf_blocks,
    person_layout,
    person_records,
)

SCHEMA = get_schema("dhcp-hhgq")


@pytest.fixture(scope="module")
def vt(tmp_path_factory):
    d = tmp_path_factory.mktemp("vt")
    generate_state("VT", 7, d, scale=0.01)
    return d


def test_shape_is_the_ddp_person_histogram() -> None:
    assert SCHEMA.attribute_names == ("hhgq", "sex", "age", "hispanic", "cenrace", "citizen")
    assert SCHEMA.shape == (8, 2, 116, 2, 63, 2) and SCHEMA.size == 467_712
    # Appendix A, Table 2: the sizes of the person queries
    rows = {
        "detailed": 467_712,
        "hhgq": 8,
        "votingage*hispanic*cenrace*citizen": 504,
        "age*sex": 232,
        "agegroups4*sex": 58,
        "agegroups16*sex": 16,
        "agegroups64*sex": 4,
    }
    for name, n in rows.items():
        assert make_query(SCHEMA, name).n_rows == n, name


@pytest.mark.parametrize(
    ("recode", "bins"),
    [
        # Schema_DHCP_HHGQ.ageGroups4/16/64: bins of 4, 16, 64 years from 0, the last to 115
        ("agegroups4", [(4 * k, min(4 * k + 3, 115)) for k in range(29)]),
        ("agegroups16", [(16 * k, min(16 * k + 15, 115)) for k in range(8)]),
        ("agegroups64", [(0, 63), (64, 115)]),
    ],
)
def test_age_groups_are_the_ddps(recode: str, bins: list[tuple[int, int]]) -> None:
    r = SCHEMA.variable(recode)
    assert r.size == len(bins)
    for level, (lo, hi) in enumerate(bins):
        assert [a for a in range(116) if r.mapping[a] == level] == list(range(lo, hi + 1))
    assert r.levels[0].startswith("Under ") and r.levels[-1].endswith(f"{bins[-1][1]} years")


def _cell(hhgq: int, age: int) -> int:
    return int(np.ravel_multi_index((hhgq, 1, age, 0, 0, 1), SCHEMA.shape))


@pytest.mark.parametrize(
    ("hhgq", "zero_ages"),
    [
        (0, set()),  # households: no bound
        (1, set(range(15))),  # hhgq1_lessthan15
        (2, set(range(26, 116))),  # hhgq2_greaterthan25
        (3, set(range(20))),  # hhgq3_lessthan20
        (4, set()),  # other institutional: no bound
        (5, set(range(16)) | set(range(66, 116))),  # hhgq5_lt16gt65
        (6, set(range(17)) | set(range(66, 116))),  # hhgq6_lt17gt65
        (7, set()),  # other noninstitutional: no bound
    ],
)
def test_structural_zeros_are_the_ddps_age_constraints(hhgq: int, zero_ages: set[int]) -> None:
    z = SCHEMA.structural_zero_mask
    got = {a for a in range(116) if z[_cell(hhgq, a)]}
    assert got == zero_ages


def test_input_histogram_reads_citizen(vt) -> None:
    cef = read_cef(vt)
    assert set(np.unique(cef.persons["citizen"])) == {0, 1}
    got = read_cef_blocks(vt, DEFAULT_GEOLEVELS, SCHEMA)
    want = person_histogram(cef.persons, got.hierarchy, SCHEMA)
    assert (got.persons != want).nnz == 0
    per_citizen = np.asarray(got.persons.sum(axis=0)).ravel().reshape(SCHEMA.shape)
    counts = np.bincount(cef.persons["citizen"], minlength=2)
    np.testing.assert_array_equal(per_citizen.sum(axis=(0, 1, 2, 3, 4)), counts)
    # the DDP's view of the P.L. 94-171 histogram is the same persons
    pl94 = read_cef_blocks(vt, DEFAULT_GEOLEVELS, get_schema("pl94")).persons
    assert (got.persons @ pl94_map(SCHEMA) != pl94).nnz == 0


def test_input_without_citizen_is_one_line_naming_file_and_column(vt, tmp_path) -> None:
    d = tmp_path / "cef"
    d.mkdir()
    pq.write_table(pq.read_table(vt / "persons.parquet").drop(["citizen"]), d / "persons.parquet")
    pq.write_table(pq.read_table(vt / "units.parquet"), d / "units.parquet")
    read_cef_blocks(d, DEFAULT_GEOLEVELS, get_schema("dhc-lite"))  # other schemas: fine
    with pytest.raises(InputError) as err:
        read_cef_blocks(d, DEFAULT_GEOLEVELS, SCHEMA)
    msg = str(err.value)
    assert "\n" not in msg
    assert str(d / "persons.parquet") in msg and "'citizen'" in msg and "dhcp-hhgq" in msg


def test_mdf_writes_citizen_as_production_and_reads_it_back(vt) -> None:
    cef = read_cef(vt)
    blocks = read_cef_blocks(vt, DEFAULT_GEOLEVELS, SCHEMA)
    assert person_layout(SCHEMA) == DHCP_PERSON_COLUMNS
    (cols,) = list(iter_mdf_blocks(blocks.persons, SCHEMA))
    table = person_records(cols, geo_dictionaries(blocks.hierarchy), 0, DHCP_PERSON_COLUMNS)
    # dhcp_hhgq_to_mdfpersons2020.citizen_recoder: "1" citizen, "2" not a citizen
    written = np.asarray(table.column("CITIZEN").cast("string").to_pylist())
    np.testing.assert_array_equal(written == "1", cols["citizen"] == 1)
    np.testing.assert_array_equal(written == "2", cols["citizen"] == 0)
    assert (written == "2").sum() == (cef.persons["citizen"] == 0).sum() > 0
    back = decode_persons(table, "mdf")
    np.testing.assert_array_equal(back["citizen"], cols["citizen"])
    again = person_histogram(back, blocks.hierarchy, SCHEMA)
    assert (again != blocks.persons).nnz == 0
    # a schema without citizenship still writes 9 (not supported) and decodes no column
    lite = person_records(
        {k: v for k, v in cols.items() if k != "citizen"},
        geo_dictionaries(blocks.hierarchy),
        0,
        DHCP_PERSON_COLUMNS,
    )
    assert set(lite.column("CITIZEN").cast("string").to_pylist()) == {"9"}
    assert "citizen" not in decode_persons(lite, "mdf")
