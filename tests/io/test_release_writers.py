"""The MDF person writers on chunks with no persons (blocks with units only, empty states)."""

from __future__ import annotations

import numpy as np
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.schema import get_schema
from censusdp.io.mdf_records import PL94_PERSON_COLUMNS, iter_mdf_blocks, mdf_person_columns
from censusdp.io.mdf_write import MDFPersonWriter, write_mdf_persons
from synth import block_codes

PL94 = get_schema("pl94")


def _histogram(counts_by_block: dict[int, dict[int, int]], n_blocks: int) -> sp.csr_matrix:
    h = sp.lil_matrix((n_blocks, PL94.size), dtype=np.int64)
    for b, cells in counts_by_block.items():
        for c, n in cells.items():
            h[b, c] = n
    return h.tocsr()


def _read_text(path) -> dict[str, list]:
    opts = pacsv.ParseOptions(delimiter="|")
    conv = pacsv.ConvertOptions(column_types={c: "string" for c in PL94_PERSON_COLUMNS})
    return pacsv.read_csv(path, parse_options=opts, convert_options=conv).to_pydict()


def test_text_mdf_of_no_persons_is_a_header_only(tmp_path):
    h = Hierarchy.from_blocks(np.asarray(block_codes(1, 1, 1, 2)))
    cols = mdf_person_columns(_histogram({}, 2), h, PL94)
    assert cols["block"].size == 0
    assert write_mdf_persons(cols, h, tmp_path / "p.parquet", tmp_path / "p.txt") == 0
    text = _read_text(tmp_path / "p.txt")
    assert list(text) == list(PL94_PERSON_COLUMNS)
    assert all(v == [] for v in text.values())
    assert len((tmp_path / "p.txt").read_text().splitlines()) == 1
    assert pq.read_table(tmp_path / "p.parquet").num_rows == 0


@pytest.mark.parametrize("per_chunk", [1, 2, 5, 1 << 20])
def test_chunked_writer_with_empty_blocks_equals_the_one_shot_files(tmp_path, per_chunk):
    """Blocks 0, 2, 3 and 5 have no persons: with small chunks some chunks are empty."""
    blocks = block_codes(1, 1, 2, 3)
    h = Hierarchy.from_blocks(np.asarray(blocks))
    cell_a = int(PL94.cells_of({"hhgq": [0], "age": [30], "hispanic": [1], "cenrace": [7]})[0])
    cell_b = int(PL94.cells_of({"hhgq": [5], "age": [5], "hispanic": [0], "cenrace": [63]})[0])
    hist = _histogram({1: {cell_a: 2}, 4: {cell_a: 1, cell_b: 3}}, len(blocks))
    chunks = list(iter_mdf_blocks(hist, PL94, persons_per_chunk=per_chunk))
    if per_chunk == 1:
        assert any(c["block"].size == 0 for c in chunks)
    with MDFPersonWriter(h, tmp_path / "c.parquet", tmp_path / "c.txt") as w:
        for c in chunks:
            w.write(c)
    assert w.persons == 6
    whole = mdf_person_columns(hist, h, PL94)
    write_mdf_persons(whole, h, tmp_path / "w.parquet", tmp_path / "w.txt")
    assert (tmp_path / "c.txt").read_bytes() == (tmp_path / "w.txt").read_bytes()
    assert (
        pq.read_table(tmp_path / "c.parquet").to_pydict()
        == pq.read_table(tmp_path / "w.parquet").to_pydict()
    )
    text = _read_text(tmp_path / "c.txt")
    assert text["EPNUM"] == [str(i) for i in range(6)]
    assert text["CENRACE"] == ["07", "07", "07", "63", "63", "63"]
    assert text["TABBLK"] == ["0002", "0002", "0002", "0002", "0002", "0002"]
    assert set(text["SCHEMA_TYPE_CODE"]) == {"MPD"} and set(text["SCHEMA_BUILD_ID"]) == {"1.1.0"}
    assert text["TABBLKGRPCE"] == ["1", "1", "2", "2", "2", "2"]
    assert text["RTYPE"] == ["3", "3", "3", "5", "5", "5"]
    assert text["VOTING_AGE"] == ["2", "2", "2", "1", "1", "1"]
    assert text["CENHISP"] == ["2", "2", "2", "1", "1", "1"]


def test_writer_of_no_chunks_writes_empty_files(tmp_path):
    h = Hierarchy.from_blocks(np.asarray(block_codes(1, 1, 1, 1)))
    with MDFPersonWriter(h, tmp_path / "e.parquet", tmp_path / "e.txt") as w:
        pass
    assert w.persons == 0
    text = _read_text(tmp_path / "e.txt")
    assert list(text) == list(PL94_PERSON_COLUMNS)
    assert len((tmp_path / "e.txt").read_text().splitlines()) == 1
    assert pq.read_table(tmp_path / "e.parquet").num_rows == 0
