"""The 2020 DHC person MDF (production's ``DHCP_MDF2020_WriterRevisedColumnNames`` with
``DHCPToMDF2020Recoder``, ``programs/writer/dhcp_to_mdf2020.py``): every ``relgq`` level
written with production's GQTYPE, RELSHIP and LIVE_ALONE codes and read back; a
combination no person has is an error naming its row."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from censusdp.data.schema import get_schema
from censusdp.errors import InputError
from censusdp.io.mdf_read import decode_persons
from censusdp.io.mdf_records import (
    DHC_PERSON_COLUMNS,
    geo_dictionaries,
    person_layout,
    person_records,
)

DHCP = get_schema("dhcp-2020")


def _records(relgq: np.ndarray) -> pa.Table:
    n = relgq.size
    cells = np.ravel_multi_index(
        (relgq, np.arange(n) % 2, (7 * np.arange(n)) % 116, np.arange(n) % 2, np.arange(n) % 63),
        DHCP.shape,
    )
    cols = DHCP.mdf_columns(cells)
    cols["block"] = np.zeros(n, dtype=np.int64)
    return person_records(
        cols, geo_dictionaries(np.array(["5000109000011000"])), 0, person_layout(DHCP)
    )


def test_the_dhc_person_layout_is_productions() -> None:
    assert person_layout(DHCP) is DHC_PERSON_COLUMNS
    assert DHC_PERSON_COLUMNS[7:] == (
        "EPNUM", "RTYPE", "GQTYPE", "RELSHIP", "QSEX", "QAGE", "CENHISP", "CENRACE", "LIVE_ALONE",
    )  # fmt: skip
    rows = _records(np.array([0, 1, 2, 5, 17, 18, 27, 32, 33, 41])).to_pydict()
    # relship_recoder, gqtype_recoder, live_alone_recoder, rtype_recoder
    assert rows["RELSHIP"] == ["20", "20", "21", "24", "36", "37", "37", "37", "38", "38"]
    assert rows["GQTYPE"] == ["000"] * 5 + ["101", "301", "405", "501", "997"]
    assert rows["LIVE_ALONE"] == ["1", "2", "2", "2", "2", "0", "0", "0", "0", "0"]
    assert rows["RTYPE"] == ["3"] * 5 + ["5"] * 5


def test_every_relgq_level_reads_back() -> None:
    relgq = np.repeat(np.arange(42), 3)
    table = _records(relgq)
    back = decode_persons(table, "mdf_persons.parquet")
    np.testing.assert_array_equal(back["relgq"], relgq)
    np.testing.assert_array_equal(back["hhgq"], DHCP.cell_levels("hhgq8lev")[DHCP.cells_of(back)])


def test_a_combination_no_person_has_names_its_row() -> None:
    table = _records(np.array([1, 6, 20]))
    rel = table.column("RELSHIP").to_pylist()
    rel[1] = "37"  # an institutional GQ person in a housing unit (GQTYPE 000)
    table = table.set_column(table.column_names.index("RELSHIP"), "RELSHIP", pa.array(rel))
    with pytest.raises(InputError, match=r"row 1 has GQTYPE '000', RELSHIP '37'"):
        decode_persons(table, "mdf_persons.parquet")
