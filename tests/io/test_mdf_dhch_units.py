"""The 2020 DHC's unit MDF (production's DHCH_MDF2020_WriterRevisedColumnNamesTen3Lev):
each household's variables recoded as dhch_to_mdf2020_recoders.py recodes them, TEN by
production's greedy tenure recode, vacant units and facilities from tenvacgq, and the
exact inverse that names a record that is none of them."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from censusdp.data.geography import DEFAULT_GEOLEVELS
from censusdp.data.schema import get_schema
from censusdp.data.schema_dhc import DHCH_2020, HHTYPE_DHCH_TYPES
from censusdp.errors import InputError
from censusdp.generate import generate_state
from censusdp.io.cef_stream import read_cef_blocks
from censusdp.io.mdf_households_dhc import (
    DHCH_UNIT_COLUMNS,
    decode_dhch_units,
    dhch_unit_records,
)


@pytest.fixture(scope="module")
def truth(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("vt-dhch-mdf") / "vt"
    generate_state("VT", 3, out, scale=0.01)
    return read_cef_blocks(out, DEFAULT_GEOLEVELS, get_schema("dhcp-2020"), with_units="dhch")


def _row(table, r: int) -> dict[str, str]:
    return {c: table.column(c)[r].as_py() for c in table.column_names}


def test_a_household_is_recoded_as_production_recodes_it() -> None:
    # a woman 75+ living alone, Hispanic, Black alone, owning with a mortgage:
    # hht_recode 6, hht2_recode 05, cplt/upart/multg 0 (one person), paoc/pac 4 (none)
    alone = next(k for k, t in enumerate(HHTYPE_DHCH_TYPES) if t.size == 1)
    cell = int(np.ravel_multi_index((1, 8, 1, 1, 3, 0, alone), DHCH_2020.shape))
    households = sp.csr_matrix(([1], ([0], [cell])), shape=(1, DHCH_2020.size))
    units = np.zeros((1, 35), dtype=np.int64)
    units[0, 0] = 1
    table = dhch_unit_records(np.array(["5000195000001000"]), households, units)
    assert table.column_names == list(DHCH_UNIT_COLUMNS)
    want = {"RTYPE": "2", "GQTYPE": "000", "TEN": "1", "VACS": "0", "HHSIZE": "1", "HHT": "6",
            "HHT2": "05", "CPLT": "0", "UPART": "0", "MULTG": "0", "HHLDRAGE": "9",
            "HHSPAN": "2", "HHRACE": "02", "PAOC": "4", "P18": "0", "P60": "1", "P65": "1",
            "P75": "1", "PAC": "4", "HHSEX": "2", "TABBLKST": "50", "TABBLK": "1000"}  # fmt: skip
    got = _row(table, 0)
    assert {k: got[k] for k in want} == want


def test_records_decode_to_the_histograms_they_were_written_from(truth) -> None:
    blocks = truth.hierarchy.blocks
    table = dhch_unit_records(blocks, truth.dhc_households, truth.tenvacgq)
    assert table.num_rows == int(truth.tenvacgq.sum())
    cell, level = decode_dhch_units(table, "mdf_units.parquet")
    geo = np.char.add(
        np.char.add(
            np.asarray(table.column("TABBLKST").to_pylist(), dtype="U2"),
            np.asarray(table.column("TABBLKCOU").to_pylist(), dtype="U3"),
        ),
        np.char.add(
            np.char.add(
                np.asarray(table.column("TABTRACTCE").to_pylist(), dtype="U6"),
                np.asarray(table.column("TABBLKGRPCE").to_pylist(), dtype="U1"),
            ),
            np.asarray(table.column("TABBLK").to_pylist(), dtype="U4"),
        ),
    )
    block = np.searchsorted(blocks, geo)
    units = np.zeros_like(truth.tenvacgq)
    np.add.at(units, (block, level), 1)
    assert np.array_equal(units, truth.tenvacgq)
    hh = cell >= 0
    households = sp.csr_matrix(
        (np.ones(int(hh.sum()), dtype=np.int64), (block[hh], cell[hh])),
        shape=truth.dhc_households.shape,
    )
    assert (households != truth.dhc_households).nnz == 0
    # the greedy tenure: of each block's households not owned, TEN 3 as many as rented
    ten = np.asarray(table.column("TEN").to_pylist())
    for t, k in (("3", 2), ("4", 3)):
        assert np.array_equal(np.bincount(block[ten == t], minlength=blocks.size),
                              truth.tenvacgq[:, k])  # fmt: skip


def test_a_record_that_is_no_household_nor_unit_is_named(truth) -> None:
    table = dhch_unit_records(truth.hierarchy.blocks, truth.dhc_households, truth.tenvacgq)
    ten = np.asarray(table.column("TEN").to_pylist())
    r = int(np.flatnonzero(ten == "0")[0])  # a vacant unit or a facility
    names = table.column_names
    bad = table.set_column(names.index("HHSIZE"), "HHSIZE",
                           [["3" if i == r else v for i, v in
                             enumerate(table.column("HHSIZE").to_pylist())]])  # fmt: skip
    with pytest.raises(InputError, match=rf"mdf_units.parquet: row {r} \(RTYPE"):
        decode_dhch_units(bad, "mdf_units.parquet")


def test_households_that_disagree_with_the_units_are_refused(truth) -> None:
    units = truth.tenvacgq.copy()
    b = int(np.flatnonzero(units[:, 0])[0])
    units[b, 0] -= 1
    units[b, 2] += 1  # a mortgage become a rental in the units only
    with pytest.raises(InputError, match="households by tenure"):
        dhch_unit_records(truth.hierarchy.blocks, truth.dhc_households, units)


def test_the_columns_are_production_dhch_layout() -> None:
    assert DHCH_UNIT_COLUMNS[:2] == ("SCHEMA_TYPE_CODE", "SCHEMA_BUILD_ID")
    assert DHCH_UNIT_COLUMNS[7:] == (
        "RTYPE", "GQTYPE", "TEN", "VACS", "HHSIZE", "HHT", "HHT2", "CPLT", "UPART", "MULTG",
        "HHLDRAGE", "HHSPAN", "HHRACE", "PAOC", "P18", "P60", "P65", "P75", "PAC", "HHSEX",
    )  # fmt: skip
