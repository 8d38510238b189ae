"""The persons a DHC release is held to, published and read back
(``invariants_pl94.parquet``), and the check that every geounit answers with them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.data.geography import GeoLevels, Hierarchy
from censusdp.data.histograms import pl94_map
from censusdp.data.invariants import HELD_PL94_COLUMNS, Invariants, held_pl94_from_table
from censusdp.data.schema import get_schema
from censusdp.errors import InputError
from censusdp.release.validate.estimate import check_held_pl94

N = get_schema("pl94").size
BLOCKS = np.asarray(["5000100010010000", "5000100010010001", "5000100020010000"], dtype="U16")


def _invariants(held: sp.csr_matrix) -> Invariants:
    n = BLOCKS.size
    zeros = np.zeros(n, dtype=np.int64)
    return Invariants(BLOCKS, zeros, zeros, np.zeros((n, 8), np.int64), pl94_persons=held)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, N - 1), st.integers(1, 50)), max_size=30)
)
def test_the_long_form_reads_back_to_the_same_counts(entries) -> None:
    rows = [e[0] for e in entries]
    cells = [e[1] for e in entries]
    held = sp.csr_matrix(
        ([e[2] for e in entries], (rows, cells)), shape=(BLOCKS.size, N), dtype=np.int64
    )  # a block and cell given twice is summed here, once in the table
    table = _invariants(held).held_pl94_table()
    assert table is not None and tuple(table.column_names) == HELD_PL94_COLUMNS
    assert min(table.column("count").to_pylist(), default=1) > 0
    back = held_pl94_from_table(table, BLOCKS, N, "f")
    assert (back != held).nnz == 0
    assert (
        _invariants(held)
        .reordered(np.arange(3)[::-1], BLOCKS[::-1], 1)
        .pl94_persons[0]
        .toarray()
        .tolist()
        == held[2].toarray().tolist()
    )


def _table(geocode, cell, count) -> pa.Table:
    return pa.table(
        {"geocode": pa.array(geocode), "cell": pa.array(cell, pa.int32()), "count": count}
    )


@pytest.mark.parametrize(
    ("table", "message"),
    [
        (_table([BLOCKS[0], "9999900010010000"], [1, 2], [1, 1]), "geocode '9999900010010000'"),
        (_table([BLOCKS[0]], [N], [1]), f"cell {N} in row 0 is not within 0..{N - 1}"),
        (_table([BLOCKS[0]], [-1], [1]), "cell -1"),
        (_table([BLOCKS[1]], [3], [0]), "count 0 in row 0 is not positive"),
        (_table([BLOCKS[1], BLOCKS[1]], [3, 3], [2, 1]), "cell 3 given twice (row 1)"),
        (pa.table({"geocode": [BLOCKS[0]], "count": [1]}), "missing column 'cell'"),
    ],
)
def test_a_bad_row_is_refused_in_one_line_naming_it(table, message) -> None:
    with pytest.raises(InputError) as err:
        held_pl94_from_table(table, BLOCKS, N, "run/invariants_pl94.parquet")
    text = str(err.value)
    assert text.startswith("run/invariants_pl94.parquet: ") and message in text, text
    assert "\n" not in text


def test_every_geounit_is_checked_against_the_held_counts() -> None:
    schema = get_schema("dhcp-2020")
    hierarchy = Hierarchy.from_blocks(
        BLOCKS, GeoLevels.from_pairs([("State", 2), ("County", 5), ("Block", 16)])
    )
    rng = np.random.default_rng(3)
    cells = rng.choice(np.flatnonzero(~schema.structural_zero_mask), size=40)
    blocks = rng.integers(0, BLOCKS.size, size=40)
    hist = sp.csr_matrix(
        (np.ones(40, dtype=np.int64), (blocks, cells)), shape=(BLOCKS.size, schema.size)
    )
    hists = [sp.csr_matrix(h) for h in hierarchy.aggregate(hist)]
    held = sp.csr_matrix(hist @ pl94_map(schema))
    ok, detail = check_held_pl94(hists, hierarchy, schema, held)
    assert ok and "40 persons" in detail, detail
    # a person moved to another block of the county: the county and state still answer
    # with the held counts, the blocks do not
    moved = hist.tolil()
    b = int(blocks[0])
    moved[b, cells[0]] -= 1
    moved[(b + 1) % BLOCKS.size, cells[0]] += 1
    levels = [sp.csr_matrix(h) for h in hierarchy.aggregate(sp.csr_matrix(moved))]
    ok, detail = check_held_pl94(levels, hierarchy, schema, held)
    assert not ok and "2 cells at Block differ" in detail, detail
    # one person's Hispanic origin turned at the state: caught at the first level
    top = hists[0].tolil()
    c = int(cells[0])
    idx = np.unravel_index(c, schema.shape)
    hisp = schema.attribute_names.index("hispanic")
    turned = list(idx)
    turned[hisp] = 1 - turned[hisp]
    c2 = int(np.ravel_multi_index(tuple(turned), schema.shape))
    top[0, c] -= 1
    top[0, c2] += 1
    ok, detail = check_held_pl94([sp.csr_matrix(top), *hists[1:]], hierarchy, schema, held)
    assert not ok and "at State differ" in detail, detail
