"""Census identifiers on the published tables: GEOID, SUMLEV, NAME and the codebook.

GEOID and SUMLEV follow the 2020 Census P.L. 94-171 Redistricting Data Summary File
technical documentation (summary levels 010, 040, 050, 140, 150, 750; a block's GEOID20
is state + county + tract + 4-digit block number, 15 characters); names follow
data.census.gov ("Census Tract 9601, Addison County, Vermont").
"""

from __future__ import annotations

from importlib import resources

import numpy as np
import pyarrow.parquet as pq
import pytest

from censusdp.data.geography import GeoLevels, Hierarchy
from censusdp.errors import SchemaError
from censusdp.io.tables import read_table, write_tables
from censusdp.tables import TABLE_NAMES, codebook, table_definition, tabulate
from censusdp.tables.geoids import (
    county_name,
    geo_identifiers,
    geoids,
    place_names,
    state_name,
    sumlevel,
    summary_level,
    tract_name,
)

# Blocks of two Vermont counties; block numbers start with their block-group digit.
BLOCKS = np.array(
    [
        "5000196010011001",
        "5000196010011002",
        "5000196010022001",
        "5000196020011001",
        "5002796760011005",
        "5002700030233001",
    ]
)


@pytest.mark.parametrize(
    ("code", "name"),
    [("960100", "9601"), ("000302", "3.02"), ("001500", "15"), ("980000", "9800"), ("000100", "1")],
)
def test_tract_names(code, name):
    assert tract_name(code) == name


def test_state_and_county_names_including_2020_recodes():
    assert state_name("50") == "Vermont"
    assert state_name("72") == "Puerto Rico"
    assert county_name("50001") == "Addison County"
    assert county_name("22071") == "Orleans Parish"
    assert county_name("51510") == "Alexandria city"
    assert county_name("72001") == "Adjuntas Municipio"
    assert county_name("46113") == "Shannon County"  # 2010 code
    assert county_name("46102") == "Oglala Lakota County"  # its 2020 code
    assert county_name("50999") == "County 999"  # not a county: named by its code
    assert state_name("99") == "State 99"


def test_every_county_of_the_generator_tract_table_is_named():
    path = resources.files("censusdp.generate").joinpath("tracts2010.parquet")
    t = pq.read_table(str(path), columns=["state", "county"])
    fips = np.unique(
        np.char.add(
            np.asarray(t.column("state").to_pylist(), dtype="U2"),
            np.asarray(t.column("county").to_pylist(), dtype="U3"),
        )
    )
    assert fips.size > 3000
    unnamed = [f for f in fips if county_name(str(f)).startswith("County ")]
    assert unnamed == []
    assert all(not state_name(s).startswith("State ") for s in {f[:2] for f in fips})


def test_block_geoid_drops_the_block_group_digit():
    ids = geoids(BLOCKS, 16)
    assert ids.tolist() == [
        "500019601001001",
        "500019601001002",
        "500019601002001",
        "500019602001001",
        "500279676001005",
        "500270003023001",
    ]
    assert all(len(g) == 15 for g in ids)
    # the GEOID keeps the tract (11) and the block number (4), which starts with the BG
    for code, g in zip(BLOCKS, ids, strict=True):
        assert g[:11] == code[:11] and g[11:] == code[12:] and g[11] == code[11]


def test_nonconformant_block_has_no_geoid():
    # block group 2 but block number 1001: dropping the digit would collide with BG 1's
    codes = np.array(["5000196010011001", "5000196010021001"])
    assert geoids(codes, 16).tolist() == ["500019601001001", None]


def test_other_levels_keep_their_geocode():
    assert geoids(np.array(["50001"]), 5).tolist() == ["50001"]
    assert geoids(np.array(["500019601001"]), 12).tolist() == ["500019601001"]
    assert geoids(np.array([""]), 0).tolist() == ["US"]
    assert [sumlevel(k) for k in (0, 2, 5, 11, 12, 16, 8)] == [
        "010",
        "040",
        "050",
        "140",
        "150",
        "750",
        None,
    ]


def test_place_names_at_every_level():
    assert place_names(np.array(["50001"]), 5).tolist() == ["Addison County, Vermont"]
    assert place_names(np.array(["50001960100"]), 11).tolist() == [
        "Census Tract 9601, Addison County, Vermont"
    ]
    assert place_names(np.array(["500019601001"]), 12).tolist() == [
        "Block Group 1, Census Tract 9601, Addison County, Vermont"
    ]
    assert place_names(BLOCKS[[0, 5]], 16).tolist() == [
        "Block 1001, Block Group 1, Census Tract 9601, Addison County, Vermont",
        "Block 3001, Block Group 3, Census Tract 3.02, Windsor County, Vermont",
    ]
    assert place_names(np.array([""]), 0).tolist() == ["United States"]
    # a non-standard level is named by its level and code within its enclosing unit
    assert place_names(np.array(["500019601"]), 9, "TractGroup").tolist() == [
        "TractGroup 9601, Addison County, Vermont"
    ]


def test_tabulated_tables_carry_identifiers_that_join():
    persons = {
        "geocode": BLOCKS[[0, 0, 1, 2, 3, 4, 5, 5]],
        "hhgq": np.zeros(8, np.int64),
        "age": np.array([30, 5, 40, 50, 60, 70, 20, 10]),
        "hispanic": np.zeros(8, np.int64),
        "cenrace": np.ones(8, np.int64),
    }
    units = {"geocode": BLOCKS, "gqtype": np.zeros(6, np.int64), "occupied": np.ones(6, bool)}
    h = Hierarchy.from_blocks(BLOCKS)
    tables = tabulate(persons, units, h)
    for name, t in tables.items():
        assert t.column_names[:5] == ["geolevel", "geocode", "GEOID", "SUMLEV", "NAME"]
        assert t.column_names[5:] == list(table_definition(name).variables)
    p1 = tables["P1"].to_pydict()
    rows = {(lv, g): i for i, (lv, g) in enumerate(zip(p1["geolevel"], p1["GEOID"], strict=True))}
    assert p1["SUMLEV"][rows[("State", "50")]] == "040"
    assert p1["NAME"][rows[("County", "50027")]] == "Windsor County, Vermont"
    assert p1["P1_001N"][rows[("Block", "500019601001001")]] == 2
    assert p1["P1_001N"][rows[("Tract", "50001960100")]] == 4
    # every block's GEOID joins to its tract's GEOID and block group's GEOID
    tract_pop: dict[str, int] = {}
    for lv, g, sl, n in zip(p1["geolevel"], p1["GEOID"], p1["SUMLEV"], p1["P1_001N"], strict=True):
        if lv == "Block":
            assert sl == "750" and len(g) == 15
            tract_pop[g[:11]] = tract_pop.get(g[:11], 0) + n
            assert ("BlockGroup", g[:12]) in rows
    for g, n in tract_pop.items():
        assert p1["P1_001N"][rows[("Tract", g)]] == n
    assert sorted(set(p1["SUMLEV"])) == ["010", "040", "050", "140", "150", "750"]


def test_custom_geolevels_get_identifiers_by_code_length():
    levels = GeoLevels.from_pairs([("Top", 0), ("County", 5), ("Block", 16)])
    ids = geo_identifiers(np.array(["50001"]), 5, "County")
    assert ids["SUMLEV"].tolist() == ["050"]
    h = Hierarchy.from_blocks(BLOCKS, levels)
    units = {"geocode": BLOCKS, "gqtype": np.zeros(6, np.int64), "occupied": np.ones(6, bool)}
    empty = {c: np.zeros(0, np.int64) for c in ("hhgq", "age", "hispanic", "cenrace")}
    empty["geocode"] = np.zeros(0, "U16")
    h1 = tabulate(empty, units, h)["H1"].to_pydict()
    assert h1["NAME"][:2] == ["United States", "Addison County, Vermont"]
    assert h1["H1_001N"][:3] == [6, 4, 2]


def test_codebook_labels_every_column():
    cb = codebook().to_pydict()
    variables = cb["variable"]
    assert len(variables) == len(set(variables))
    for name in TABLE_NAMES:
        d = table_definition(name)
        got = [v for v, t in zip(variables, cb["table"], strict=True) if t == name]
        assert got == list(d.variables)
    i = variables.index("P1_001N")
    assert (cb["label"][i], cb["concept"][i], cb["universe"][i]) == (
        "Total:",
        "RACE",
        "Total population",
    )
    i = variables.index("P2_002N")
    assert cb["label"][i] == "Total:!!Hispanic or Latino"
    i = variables.index("H1_003N")
    assert cb["label"][i] == "Total:!!Vacant" and cb["universe"][i] == "Housing units"
    assert {"GEOID", "SUMLEV", "NAME"} <= set(variables)


def test_read_one_summary_level(tmp_path):
    units = {"geocode": BLOCKS, "gqtype": np.zeros(6, np.int64), "occupied": np.ones(6, bool)}
    empty = {c: np.zeros(0, np.int64) for c in ("hhgq", "age", "hispanic", "cenrace")}
    empty["geocode"] = np.zeros(0, "U16")
    write_tables(tabulate(empty, units, Hierarchy.from_blocks(BLOCKS)), tmp_path)
    counties = read_table(tmp_path, "H1", sumlev="050").to_pydict()
    assert counties["GEOID"] == ["50001", "50027"]
    assert counties["H1_001N"] == [4, 2]
    assert read_table(tmp_path, "H1").num_rows == 1 + 1 + 2 + 4 + 5 + 6


@pytest.mark.parametrize(
    ("given", "code"),
    [
        ("050", "050"),
        ("50", "050"),
        (50, "050"),
        ("county", "050"),
        ("County", "050"),
        (" COUNTY ", "050"),
        ("40", "040"),
        ("state", "040"),
        ("10", "010"),
        ("US", "010"),
        ("nation", "010"),
        ("140", "140"),
        ("tract", "140"),
        ("Census Tract", "140"),
        ("block group", "150"),
        ("BlockGroup", "150"),
        ("750", "750"),
        ("Block", "750"),
    ],
)
def test_summary_level_takes_codes_and_names(given, code) -> None:
    assert summary_level(given) == code


@pytest.mark.parametrize("given", ["070", "5", "0050", "counties", "", "places", "155"])
def test_summary_level_refuses_others_listing_the_levels(given) -> None:
    with pytest.raises(SchemaError, match=r"unknown summary level .*010 \(nation\).*750 \(block\)"):
        summary_level(given)


def test_the_geoid_label_names_no_vintage_the_input_may_not_have() -> None:
    """The synthetic inputs are on 2010 tracts: the codebook may not call their GEOIDs
    GEOID20."""
    from censusdp.tables.geoids import IDENTIFIER_LABELS

    label = IDENTIFIER_LABELS["GEOID"]
    assert "GEOID20" not in label and "2010" in label


def test_entity_geographies_follow_the_census_summary_levels():
    """Places, county subdivisions and AIAN areas of some blocks: in a strong-MCD state
    (Vermont) a ``place`` code outside AIAN areas is a county subdivision (060, GEOID
    state + county + code), elsewhere a place (160, state + code); an AIAN area is
    published whole (250, its AIANNHCE) and by state part (280, state + AIANNHCE);
    blocks in none get -1."""
    from censusdp.tables.geoids import ENTITY_LEVELS, entity_geographies

    blocks = np.array(
        [
            "5000100000010001",  # Vermont, town 00375 of Addison County
            "5000100000010002",  # Vermont, no town
            "5000300000010001",  # Vermont, town 00375 of Bennington County: another MCD
            "0400100000010001",  # Arizona: a place, inside AIAN area 1234
            "0400100000010002",  # Arizona: the same place, outside
            "3500100000010001",  # New Mexico, inside AIAN area 1234
        ]
    )
    aian = np.array(["", "", "", "1234", "", "1234"])
    place = np.array(["00375", "", "00375", "12345", "12345", ""])
    got = {g.geolevel: g for g in entity_geographies(blocks, aian, place)}
    assert list(got) == list(ENTITY_LEVELS)
    cs = got["CountySubdivision"]
    assert cs.ids["GEOID"].tolist() == ["5000100375", "5000300375"]
    assert cs.unit.tolist() == [0, -1, 1, -1, -1, -1]
    assert cs.ids["NAME"][0] == "County Subdivision 00375, Addison County, Vermont"
    pl = got["Place"]
    assert pl.ids["GEOID"].tolist() == ["0412345"] and pl.unit.tolist() == [-1, -1, -1, 0, 0, -1]
    assert pl.ids["NAME"].tolist() == ["Place 12345, Arizona"]
    assert got["AIANArea"].ids["GEOID"].tolist() == ["1234"]
    assert got["AIANArea"].unit.tolist() == [-1, -1, -1, 0, -1, 0]
    part = got["AIANAreaState"]
    assert part.ids["GEOID"].tolist() == ["041234", "351234"]
    assert part.unit.tolist() == [-1, -1, -1, 0, -1, 1]
    assert part.ids["NAME"].tolist() == [
        "AIAN Area 1234 (part), Arizona",
        "AIAN Area 1234 (part), New Mexico",
    ]
    for g in got.values():
        assert set(g.ids["SUMLEV"]) == {ENTITY_LEVELS[g.geolevel]}
    assert entity_geographies(blocks) == []
    only_aian = entity_geographies(blocks, aian_area=aian)
    assert [g.geolevel for g in only_aian] == ["AIANArea", "AIANAreaState"]
