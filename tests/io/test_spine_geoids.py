"""The tables' GEOID of a noisy measurement's geounit (:func:`censusdp.io.spine.spine_geoids`)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.io.spine import spine_geoids

# Two counties of state 50: 50001 wholly outside AIAN areas, 50003 split into an AIAN
# part (State code 150) and the rest (050). Blocks: 16 digits, block number starting
# with the block-group digit.
GEOCODES = [
    "5000196010011000",
    "5000196010011001",
    "5000396020022000",
    "5000396020022001",
]
STATE = ["050", "050", "050", "150"]
COUNTY = ["050001", "050001", "050003", "150003"]
TRACT = ["050001960100", "050001960100", "050003960200", "150003960200"]
BLOCK_GROUP = ["05000196010001", "05000196010001", "05000396020001", "15000396020001"]


def _spine(tmp_path):
    block = [bg + g for bg, g in zip(BLOCK_GROUP, GEOCODES, strict=True)]
    cols = {
        "geocode": GEOCODES,
        "State": STATE,
        "County": COUNTY,
        "Tract": TRACT,
        "BlockGroup": BLOCK_GROUP,
        "Block": block,
    }
    path = tmp_path / "spine.parquet"
    pq.write_table(pa.table(cols), path)
    return path, block


def test_a_whole_tabulation_unit_gets_its_geoid_a_part_gets_none(tmp_path) -> None:
    path, block = _spine(tmp_path)
    counties = spine_geoids(path, "County", np.array(["050001", "050003", "150003"]))
    assert counties.tolist() == ["50001", None, None]
    tracts = spine_geoids(path, "Tract", np.array(["050001960100", "150003960200"]))
    assert tracts.tolist() == ["50001960100", None]
    # the state has two parts: neither is the state
    assert spine_geoids(path, "State", np.array(["050", "150"])).tolist() == [None, None]
    # every block is a tabulation block: its 15-character GEOID
    assert spine_geoids(path, "Block", np.array(block[2:])).tolist() == [
        "500039602002000",
        "500039602002001",
    ]
    # a block group of the spine holding exactly one tabulation block group
    assert spine_geoids(path, "BlockGroup", np.array(["05000196010001"])).tolist() == [
        "500019601001"
    ]
    assert spine_geoids(path, "US", np.array([""])).tolist() == ["US"]
    assert spine_geoids(path, "TractGroup", np.array(["0500011"])).tolist() == [None]


def test_on_the_tabulation_geography_the_code_is_the_geoid() -> None:
    counties = spine_geoids(None, "County", np.array(["50001", "50003"]))
    assert counties.tolist() == ["50001", "50003"]
    blocks = spine_geoids(None, "Block", np.array(GEOCODES[:1]))
    assert blocks.tolist() == ["500019601001000"]
    assert spine_geoids(None, "State", np.array(["050"])).tolist() == [None]
