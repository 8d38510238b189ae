"""The NMF check's count of whole units (``_nmf_rows._tiles``) against the row-by-row count.

A row group of whole units with the same cells (what the writer writes) is counted by
units; any other row group row by row. Both must leave the same tally, so that a
unit with a missing, extra or moved cell is found either way.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.release.validate import _nmf_rows
from censusdp.release.validate._nmf_rows import (
    Tally,
    _check_pair,
    _Columns,
    _tiles,
    cell_mix,
    unit_fingerprint,
)

CODES = np.array(["a", "b", "c", "d", "e"])
KEY = ("Block", "q")


def _tally() -> Tally:
    n = CODES.size
    return Tally(
        {KEY: np.full(n, 2.0)},
        {KEY: np.zeros(n, dtype=np.int64)},
        {KEY: np.zeros(n, dtype=np.uint64)},
        {0: CODES},
        {"Block": 0},
    )


def _count(code_i: np.ndarray, cells: np.ndarray) -> Tally:
    tally = _tally()
    cols = _Columns(
        CODES,
        code_i,
        cells,
        np.broadcast_to(np.int64(0), code_i.shape),
        np.broadcast_to(np.float64(2.0), code_i.shape),
    )
    assert _check_pair(KEY, slice(None), tally, cols) is None
    return tally


@st.composite
def _rows(draw) -> tuple[np.ndarray, np.ndarray]:
    """Units of one query's cells; sometimes one cell changed, dropped or a unit cut."""
    r = draw(st.integers(1, 6))
    cells = np.array(sorted(draw(st.sets(st.integers(0, 40), min_size=r, max_size=r))))
    units = draw(st.lists(st.integers(0, CODES.size - 1), min_size=1, max_size=6))
    code_i = np.repeat(np.array(units), r)
    all_cells = np.tile(cells, len(units))
    damage = draw(st.sampled_from(["none", "cell", "drop", "cut"]))
    if damage == "cell":
        at = draw(st.integers(0, all_cells.size - 1))
        all_cells[at] += 1
    elif damage == "drop" and all_cells.size > 1:
        at = draw(st.integers(0, all_cells.size - 1))
        code_i, all_cells = np.delete(code_i, at), np.delete(all_cells, at)
    elif damage == "cut":
        n = draw(st.integers(1, all_cells.size))
        code_i, all_cells = code_i[:n], all_cells[:n]
    return code_i, all_cells.astype(np.int32)


@settings(max_examples=200, deadline=None)
@given(rows=_rows())
def test_counting_units_leaves_the_tally_of_counting_rows(rows):
    code_i, cells = rows
    fast = _count(code_i, cells)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_nmf_rows, "_tiles", lambda codes, cells: None)
        slow = _count(code_i, cells)
    assert np.array_equal(fast.rows[KEY], slow.rows[KEY])
    assert np.array_equal(fast.mix[KEY], slow.mix[KEY])


def test_whole_units_are_tiles_and_others_are_not():
    cells = np.array([1, 4, 9] * 3, dtype=np.int32)
    codes = np.repeat([0, 1, 3], 3)
    units, first = _tiles(codes, cells)
    assert units.tolist() == [0, 1, 3] and first.tolist() == [1, 4, 9]
    moved = cells.copy()
    moved[4] = 5  # the second unit's middle cell
    assert _tiles(codes, moved) is None
    assert _tiles(codes[:-1], cells[:-1]) is None  # the last unit cut short
    assert _tiles(np.array([0, 0, 1, 1, 1, 2]), np.arange(6)) is None  # units of other sizes


def _sum(cells: np.ndarray) -> np.uint64:
    return cell_mix(cells).sum(dtype=np.uint64)


def test_a_units_fingerprint_is_always_of_the_cells_given() -> None:
    cells = np.arange(0, 20_000, 3, dtype=np.int32)
    assert unit_fingerprint("test-query", cells) == _sum(cells)
    assert unit_fingerprint("test-query", cells.copy()) == _sum(cells)  # reused
    moved = cells.copy()
    moved[11] += 1  # the same number of cells, one of them another cell
    assert _sum(moved) != _sum(cells)
    assert unit_fingerprint("test-query", moved) == _sum(moved)
    # the kept cells are a copy: the caller's array changed in place is counted anew
    moved[12] += 1
    assert unit_fingerprint("test-query", moved) == _sum(moved)
    # another query with the same number of cells keeps its own
    assert unit_fingerprint("other-query", cells) == _sum(cells)
    assert unit_fingerprint("test-query", moved) == _sum(moved)
