"""The 2020 DHC's unit MDF: households, vacant units and facilities in production's
``DHCH_MDF2020_WriterRevisedColumnNamesTen3Lev`` layout.

Production writes the household and unit run's output
(``programs/writer/cef_2020/dhch_to_mdf2020_writer_revised_columns.py``, its recodes in
``dhch_to_mdf2020_recoders.py``) as one record per household (``RTYPE`` 2, each
variable recoded from its ``dhch-2020`` cell: ``DHCHToMDF2020HouseholdRecoderTen3Lev``),
one per vacant unit (``RTYPE`` 2, ``VACS`` its status) and one per occupied facility
(``RTYPE`` 4, ``GQTYPE`` its detailed type), the last two from the unit histogram
``tenvacgq`` (``DHCHToMDF2020UnitRecoder``). The columns are those of the DDP's household
layout (:data:`censusdp.io.mdf_records.HOUSEHOLD_UNIT_COLUMNS`); the codes differ: ``TEN``
1..4, ``VACS`` 1..7, ``GQTYPE`` the 24 detailed types, ``P18`` and ``PAC`` filled.

``TEN`` is production's greedy recode (``greedyTenureRecode`` with ``is_ten_3lev``): a
household owned with a mortgage is 1, free and clear 2, and of a block's households not
owned (``hhtenshort_3lev`` 2), the first as many as the block's units rented
(``tenvacgq`` 2) are 3 and the rest, as many as its units occupied without rent
(``tenvacgq`` 3), 4; production asserts that the counts agree (the ``owned``
constraint), and so does :func:`dhch_unit_records`.

:func:`decode_dhch_units` is the exact inverse: every record's codes are checked and a
household's variables must be those of one ``dhch-2020`` cell that is not a structural
zero.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from censusdp.data.schema_dhc import DHC_UNITS_2020, DHCH_2020, HHTYPE_DHCH_TYPES
from censusdp.data.units_dhc import FIRST_GQ_TENVACGQ, FIRST_VACANT_TENVACGQ
from censusdp.errors import InputError, InternalError
from censusdp.io.mdf_households import HOUSEHOLD_FIELDS
from censusdp.io.mdf_read import decode_codes
from censusdp.io.mdf_records import (
    GQTYPE_DHC_CODES,
    HOUSEHOLD_UNIT_COLUMNS,
    SCHEMA_BUILD_ID,
    coded,
    constant,
    geo_columns,
    geo_dictionaries,
)

__all__ = [
    "DHCH_FIELDS",
    "DHCH_UNIT_COLUMNS",
    "decode_dhch_units",
    "dhch_household_codes",
    "dhch_unit_records",
]

DHCH_UNIT_COLUMNS = HOUSEHOLD_UNIT_COLUMNS
"""``DHCH_MDF2020_WriterRevisedColumnNamesTen3Lev``'s columns: those of the DDP's
household layout."""


def _dhch_fields() -> dict[str, tuple[str, ...]]:
    """The DDP layout's household variables with the DHC's changes: ``CPLT`` has a fifth
    couple type, and ``P18`` (before ``P60``) and ``PAC`` (before ``HHSEX``) are
    supported."""
    out: dict[str, tuple[str, ...]] = {}
    for name, codes in HOUSEHOLD_FIELDS.items():
        if name == "P60":
            out["P18"] = ("0", "1")
        if name == "HHSEX":
            out["PAC"] = tuple(str(p) for p in range(5))
        out[name] = codes
    out["CPLT"] = tuple(str(c) for c in range(6))
    return out


DHCH_FIELDS: dict[str, tuple[str, ...]] = _dhch_fields()
"""The household variables a record carries, each with its MDF2020 codes; code 0 of each
is "not in universe", what vacant units and facilities carry."""

TEN_CODES = ("0", "1", "2", "3", "4")
VACS_CODES = tuple(str(v) for v in range(8))
RTYPE_CODES = ("2", "4")


def _facts() -> dict[str, np.ndarray]:
    """Each household type's facts, by ``hhtype_dhch`` level."""
    types = HHTYPE_DHCH_TYPES
    return {f: np.asarray([getattr(t, f) for t in types], dtype=np.int64) for f in types[0]._fields}


@cache
def dhch_household_codes() -> np.ndarray:
    """``(1,578,528 x 16)`` int8: each ``dhch-2020`` cell's index into the codes of each of
    :data:`DHCH_FIELDS` (in that order), production's ``DHCHToMDF2020HouseholdRecoderTen3Lev``
    recode of the cell (``hht_recode``, ``hht2_recode``, ``cplt_recode``, ...)."""
    lv = {a: DHCH_2020.cell_levels(a) for a in DHCH_2020.attribute_names}
    f = {k: v[lv["hhtype_dhch"]] for k, v in _facts().items()}
    female, alone = lv["sex"] == 1, f["size"] == 1
    married, cohabiting = np.isin(f["couple"], (1, 2)), np.isin(f["couple"], (3, 4))
    own = f["own_children"] > 0
    hht = np.select(
        [married, f["relatives"] == 1], [1, 2 + female], default=4 + 2 * female + ~alone
    )
    no_partner = (
        np.where(alone, 5, np.where(f["relatives"] == 1, np.where(own, 6, 7), 8)) + 4 * ~female
    )
    hht2 = np.select([married, cohabiting], [2 - own, 4 - own], default=no_partner)
    cplt = np.where(alone, 0, np.where(f["couple"] > 0, f["couple"], 5))
    upart = np.select(
        [alone, f["couple"] == 4, f["couple"] == 3], [0, 1 + 2 * female, 2 + 2 * female], default=5
    )
    columns = (
        f["size"],
        hht,
        hht2,
        cplt,
        upart,
        np.where(f["size"] <= 2, 0, f["multig"] + 1),
        lv["hhage"] + 1,
        lv["hisp"] + 1,
        lv["race"] + 1,
        np.where(f["own_children"] > 0, f["own_children"], 4),
        f["any_child"],
        lv["elderly"] >= 1,
        lv["elderly"] >= 2,
        lv["elderly"] >= 3,
        np.where(f["children"] > 0, f["children"], 4),
        lv["sex"] + 1,
    )
    return np.stack([np.asarray(c, dtype=np.int8) for c in columns], axis=1)


_RADIX = np.array([len(c) for c in DHCH_FIELDS.values()] + [3], dtype=np.int64)


def _keys(codes: np.ndarray, tenure: np.ndarray) -> np.ndarray:
    """One integer per household of its code indices and its 3-level tenure."""
    key = np.zeros(codes.shape[0], dtype=np.int64)
    for j, r in enumerate(_RADIX[:-1]):
        key = key * r + codes[:, j]
    return key * 3 + tenure


@cache
def _lookup() -> tuple[np.ndarray, np.ndarray]:
    """The keys of the cells that are not structural zeros (sorted) and their cells."""
    cells = np.flatnonzero(~DHCH_2020.structural_zero_mask)
    tenure = DHCH_2020.cell_levels("hhtenshort_3lev")[cells]
    keys = _keys(dhch_household_codes()[cells], tenure)
    order = np.argsort(keys)
    if np.any(np.diff(keys[order]) == 0):  # pragma: no cover - the recode's contract
        raise InternalError("two dhch-2020 cells share their MDF2020 codes")
    return keys[order], cells[order]


def dhch_unit_records(blocks: np.ndarray, households: sp.csr_matrix, units: np.ndarray) -> pa.Table:
    """The unit records of ``blocks`` (geocodes) in the DHC's unit layout: per block its
    households (in cell order), its vacant units (by status), its facilities (by type).

    Args:
        households: ``(blocks x 1,578,528)`` released households (``dhch-2020``).
        units: ``(blocks x 35)`` released units (``tenvacgq``).

    Raises:
        InputError: for a block whose households and units disagree (households = the
            units' four tenures, by ``hhtenshort_3lev``: production's assertion).
    """
    h = sp.csr_matrix(households, dtype=np.int64)
    h.sum_duplicates()
    u = np.asarray(units, dtype=np.int64)
    nb = u.shape[0]
    per_hh = np.repeat(np.arange(nb), np.diff(h.indptr))
    if (h.nnz and h.data.min() < 0) or (u < 0).any():
        raise InputError("a negative number of households or units")
    tenure = DHCH_2020.cell_levels("hhtenshort_3lev", h.indices.astype(np.int64))
    by_tenure = np.zeros((nb, 3), dtype=np.int64)
    np.add.at(by_tenure, (per_hh, tenure), h.data)
    want = np.column_stack([u[:, 0], u[:, 1], u[:, 2] + u[:, 3]])
    if (by_tenure != want).any():
        b = int(np.flatnonzero((by_tenure != want).any(axis=1))[0])
        raise InputError(
            f"block {blocks[b]}: households by tenure {by_tenure[b].tolist()} but units "
            f"{want[b].tolist()} (owned with a mortgage, free and clear, not owned)"
        )
    cell = np.repeat(h.indices.astype(np.int64), h.data)
    hh_block = np.repeat(per_hh, h.data)
    ten = np.repeat(tenure, h.data) + 1
    # greedy: the block's first not-owned households rented, the rest without rent
    rented = ten == 3
    start = np.searchsorted(hh_block[rented], np.arange(nb))
    rank = np.arange(int(rented.sum())) - start[hh_block[rented]]
    ten[np.flatnonzero(rented)[rank >= u[hh_block[rented], 2]]] = 4
    n_other = u[:, FIRST_VACANT_TENVACGQ:].ravel()
    level = np.tile(np.arange(FIRST_VACANT_TENVACGQ, DHC_UNITS_2020.size), nb)
    other_block = np.repeat(np.arange(nb), DHC_UNITS_2020.size - FIRST_VACANT_TENVACGQ)
    level, other_block = np.repeat(level, n_other), np.repeat(other_block, n_other)
    order = np.argsort(np.concatenate([hh_block, other_block]), kind="stable")
    block = np.concatenate([hh_block, other_block])[order]
    cell = np.concatenate([cell, np.full(level.size, -1)])[order]
    ten = np.concatenate([ten, np.zeros(level.size, dtype=np.int64)])[order]
    tv = np.concatenate([np.full(hh_block.size, -1), level])[order]
    return _table(block, cell, ten, tv, geo_dictionaries(blocks))


def _table(block: np.ndarray, cell: np.ndarray, ten: np.ndarray, tv: np.ndarray, geo) -> pa.Table:
    """Records from each one's block, household cell (-1: none), TEN and ``tenvacgq``
    level (-1: a household)."""
    n = block.size
    household = cell >= 0
    vacant = (tv >= FIRST_VACANT_TENVACGQ) & (tv < FIRST_GQ_TENVACGQ)
    facility = tv >= FIRST_GQ_TENVACGQ
    codes = np.zeros((n, len(DHCH_FIELDS)), dtype=np.int8)
    codes[household] = dhch_household_codes()[cell[household]]
    data = {
        "SCHEMA_TYPE_CODE": constant("MUD", n),
        "SCHEMA_BUILD_ID": constant(SCHEMA_BUILD_ID, n),
        **geo_columns(block, geo),
        "RTYPE": coded(facility.astype(np.int32), RTYPE_CODES),
        "GQTYPE": coded(np.where(facility, tv - FIRST_GQ_TENVACGQ + 1, 0), GQTYPE_DHC_CODES),
        "TEN": coded(ten, TEN_CODES),
        "VACS": coded(np.where(vacant, tv - FIRST_VACANT_TENVACGQ + 1, 0), VACS_CODES),
    }
    for j, (name, values) in enumerate(DHCH_FIELDS.items()):
        data[name] = coded(codes[:, j], values)
    return pa.table({c: data[c] for c in DHCH_UNIT_COLUMNS})


def decode_dhch_units(table: pa.Table, path: object) -> tuple[np.ndarray, np.ndarray]:
    """Each record of a DHC unit MDF decoded: its ``dhch-2020`` cell (-1 for a vacant unit
    or a facility) and its ``tenvacgq`` level.

    Every record is checked: a household is ``RTYPE`` 2, ``GQTYPE`` 000, ``TEN`` 1..4,
    ``VACS`` 0 and its variables those of one cell that is not a structural zero; a
    vacant unit ``RTYPE`` 2, ``GQTYPE`` 000, ``TEN`` 0, ``VACS`` 1..7; a facility
    ``RTYPE`` 4, ``TEN`` and ``VACS`` 0; neither carries a household variable.

    Raises:
        InputError: naming file, row and values of the first record that is none of them.
    """
    rtype = decode_codes(table, "RTYPE", RTYPE_CODES, path)
    gq = decode_codes(table, "GQTYPE", GQTYPE_DHC_CODES, path).astype(np.int64)
    ten = decode_codes(table, "TEN", TEN_CODES, path).astype(np.int64)
    vacs = decode_codes(table, "VACS", VACS_CODES, path).astype(np.int64)
    codes = np.stack(
        [decode_codes(table, n, v, path) for n, v in DHCH_FIELDS.items()], axis=1
    ).astype(np.int64)
    household = ten > 0
    ok = np.where(
        household,
        (rtype == 0) & (gq == 0) & (vacs == 0),
        (ten == 0)
        & ~codes.any(axis=1)
        & np.where(rtype == 1, (gq > 0) & (vacs == 0), (gq == 0) & (vacs > 0)),
    )
    rows = np.flatnonzero(household)
    keys, cells = _lookup()
    key = _keys(codes[rows], np.minimum(ten[rows] - 1, 2))
    pos = np.minimum(np.searchsorted(keys, key), keys.size - 1)
    ok[rows[keys[pos] != key]] = False
    if not ok.all():
        r = int(np.flatnonzero(~ok)[0])
        shown = ", ".join(f"{n} {v[codes[r, j]]}" for j, (n, v) in enumerate(DHCH_FIELDS.items()))
        raise InputError(
            f"{path}: row {r} (RTYPE {RTYPE_CODES[rtype[r]]}, GQTYPE {GQTYPE_DHC_CODES[gq[r]]}, "
            f"TEN {TEN_CODES[ten[r]]}, VACS {VACS_CODES[vacs[r]]}, {shown}) is not a household, "
            "a vacant unit or a facility of the DHC unit layout"
        )
    cell = np.full(ten.size, -1, dtype=np.int64)
    cell[rows] = cells[pos]
    level = np.where(
        household,
        ten - 1,
        np.where(vacs > 0, vacs + FIRST_VACANT_TENVACGQ - 1, gq + FIRST_GQ_TENVACGQ - 1),
    )
    return cell, level
