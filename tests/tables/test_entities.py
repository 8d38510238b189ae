"""Table rows of the geographies off the hierarchy (``censusdp.tables.entities``): each
county subdivision, place and AIAN area is the sum of its blocks, with the Census's
GEOID, SUMLEV and NAME; the readers of the hierarchy's levels leave those rows out."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.errors import InputError
from censusdp.tables import identifier_columns, tables_to_arrays, tabulate_rows
from censusdp.tables.entities import ENTITY_GEOLEVELS, concat_identifiers, entity_rows
from censusdp.tables.geoids import ENTITY_LEVELS, summary_level

BLOCKS = np.array(
    [
        "0400100000010001",  # Arizona: place 12345, inside AIAN area 1234
        "0400100000010002",  # Arizona: place 12345, outside
        "0400100000010003",  # Arizona: in nothing
        "3500100000010001",  # New Mexico: inside AIAN area 1234
        "5000100000010001",  # Vermont: town 00375 of Addison County
        "5000100000010002",  # Vermont: town 00375 too
    ]
)
AIAN = np.array(["1234", "", "", "1234", "", ""])
PLACE = np.array(["12345", "12345", "", "", "00375", "00375"])


def test_each_entity_row_is_the_sum_of_its_blocks() -> None:
    ent = entity_rows(BLOCKS, {"aian_area": AIAN, "place": PLACE})
    assert ent.ids["geolevel"].to_pylist() == [
        "CountySubdivision",
        "Place",
        "AIANArea",
        "AIANAreaState",
        "AIANAreaState",
    ]
    assert ent.ids["GEOID"].to_pylist() == ["5000100375", "0412345", "1234", "041234", "351234"]
    assert ent.ids["geocode"].to_pylist() == ent.ids["GEOID"].to_pylist()
    assert ent.ids["SUMLEV"].to_pylist() == ["060", "160", "250", "280", "280"]
    assert ent.ids["NAME"].to_pylist()[0] == "County Subdivision 00375, Addison County, Vermont"
    counts = sp.csr_matrix(np.arange(1, 13, dtype=np.int64).reshape(6, 2))
    got = ent.rows(counts).toarray()
    want = [
        [9 + 11, 10 + 12],  # blocks 4 and 5
        [1 + 3, 2 + 4],  # blocks 0 and 1
        [1 + 7, 2 + 8],  # blocks 0 and 3, both states
        [1, 2],  # Arizona's part
        [7, 8],  # New Mexico's
    ]
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.int64


@pytest.mark.parametrize("entities", [None, {}, {"place": np.full(6, "")}])
def test_no_attribute_or_no_entity_is_no_row(entities) -> None:
    ent = entity_rows(BLOCKS, entities)
    assert ent.n == 0 and ent.operator.shape == (0, BLOCKS.size)
    assert all(len(v) == 0 for v in ent.ids.values())
    assert ent.rows(sp.csr_matrix((6, 3))).shape == (0, 3)


def test_readers_of_the_levels_leave_the_entity_rows_out() -> None:
    """A table holding the levels and the entities reads back as the levels' arrays."""
    h = Hierarchy.from_blocks(BLOCKS)
    ent = entity_rows(BLOCKS, {"aian_area": AIAN, "place": PLACE})
    persons = sp.csr_matrix((np.ones(6, np.int64), (np.arange(6), np.full(6, 5))), shape=(6, 2016))
    units = sp.csr_matrix((6, 16), dtype=np.int64)
    levels_p = sp.vstack(h.aggregate(persons), format="csr")
    levels_u = sp.vstack(h.aggregate(units), format="csr")
    ids = concat_identifiers(identifier_columns(h), ent.ids)
    both = tabulate_rows(
        sp.vstack([levels_p, ent.rows(persons)]), sp.vstack([levels_u, ent.rows(units)]), ids
    )
    plain = tabulate_rows(levels_p, levels_u, identifier_columns(h))
    got, want = tables_to_arrays(both, h), tables_to_arrays(plain, h)
    for name in want:
        for a, b in zip(got[name], want[name], strict=True):
            np.testing.assert_array_equal(a, b)
    p1 = both["P1"]
    assert p1.num_rows == plain["P1"].num_rows + ent.n
    assert set(p1.column("geolevel").to_pylist()) >= set(ENTITY_GEOLEVELS)
    # an unknown geolevel is still refused
    bad = plain["P1"].set_column(0, "geolevel", pa.array(["Nowhere"] * plain["P1"].num_rows))
    with pytest.raises(InputError, match="geolevel 'Nowhere'"):
        tables_to_arrays({"P1": bad}, h)


@pytest.mark.parametrize(
    "name, code",
    [("place", "160"), ("county subdivision", "060"), ("AIANArea", "250"), ("280", "280")],
)
def test_summary_levels_of_the_entities_by_name(name: str, code: str) -> None:
    assert summary_level(name) == code
    assert code in ENTITY_LEVELS.values()
