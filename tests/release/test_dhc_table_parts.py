"""The tables' part 0 of a release with the DHC's household run, written by its task as
a run writes it: the DHC household and unit tables (P16, H9, H3, H4, H5) of the
geounits above the block, read back and checked by the task."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import scipy.sparse as sp

from censusdp.data.histograms import UNIT_CELLS
from censusdp.data.schema import get_schema
from censusdp.data.schema_dhc import DHC_UNITS_2020
from censusdp.io.layout import TABLES_DIR
from censusdp.io.parts import part_name
from censusdp.io.tables import table_part_mismatch
from censusdp.release.parts import TablesTask, run_tables_task
from censusdp.tables import level_identifiers
from censusdp.tables.dhc import DHC_HOUSEHOLD_CELLS, DHC_HOUSEHOLD_TABLE_NAMES

LEVELS = [("State", 2, np.asarray(["50"])), ("County", 5, np.asarray(["50001", "50003"]))]


def _job(run: Path) -> TablesTask:
    n = 3
    hh = np.zeros((n, DHC_HOUSEHOLD_CELLS), dtype=np.int64)
    # the household tables' cells: tenure, hhage, hisp, race, sex, family, size - 1
    shape = (3, 9, 2, 7, 2, 3, 7)
    man = np.ravel_multi_index((0, 2, 0, 0, 0, 2, 0), shape)  # owner, 35-44, alone
    woman = np.ravel_multi_index((2, 4, 1, 6, 1, 2, 0), shape)  # renter, Hispanic, 2+ races
    hh[1, man], hh[2, woman] = 2, 3  # two men and three women living alone
    hh[0] = hh[1] + hh[2]
    units = np.zeros((n, DHC_UNITS_2020.size), dtype=np.int64)
    units[1, [0, 4]], units[2, [2, 10]] = (2, 1), (3, 4)  # owned, for rent; rented, other
    units[0] = units[1] + units[2]
    return TablesTask(
        LEVELS,
        sp.csr_matrix((n, get_schema("pl94").size), dtype=np.int64),
        sp.csr_matrix((n, UNIT_CELLS), dtype=np.int64),
        str(run),
        dhc_households=(sp.csr_matrix(hh), sp.csr_matrix(units)),
    )


def test_the_dhc_household_tables_of_part_0_are_written_and_checked(tmp_path: Path) -> None:
    job = _job(tmp_path)
    res = run_tables_task(job)
    assert res["table_problem"] is None
    assert set(DHC_HOUSEHOLD_TABLE_NAMES) <= set(res["tables"])
    tables = tmp_path / TABLES_DIR
    got = {n: pq.read_table(tables / f"{n}.parquet" / part_name(0)).to_pydict()
           for n in DHC_HOUSEHOLD_TABLE_NAMES}  # fmt: skip
    assert got["P16"]["GEOID"] == ["50", "50001", "50003"]
    assert got["P16"]["P16_008N"] == [5, 2, 3]  # householders living alone
    assert got["P16"]["P16_001N"] == got["H9"]["H9_002N"] == got["H4"]["H4_001N"] == [5, 2, 3]
    assert got["H4"]["H4_002N"] == [2, 2, 0] and got["H4"]["H4_004N"] == [3, 0, 3]
    assert got["H3"]["H3_001N"] == [10, 3, 7] and got["H3"]["H3_003N"] == [5, 1, 4]
    assert got["H5"]["H5_002N"] == [1, 1, 0] and got["H5"]["H5_008N"] == [4, 0, 4]
    assert got["H10"]["H10_002N"] == [2, 2, 0] and got["H10"]["H10_017N"] == [3, 0, 3]
    assert got["H7"]["H7_017N"] == [3, 0, 3] and got["H12"]["H12_011N"] == [3, 0, 3]
    # the check the task ran: another household histogram is another P16
    other = sp.csr_matrix(job.dhc_households[0].toarray()[[0, 2, 1]])  # counties swapped
    bad = table_part_mismatch(
        tables / "P16.parquet" / part_name(0), "P16", level_identifiers(LEVELS),
        job.persons, job.units, dhc_rows={"dhc_households": other},
    )  # fmt: skip
    assert bad is not None and "rows differ from the tabulation, first 50001" in bad
