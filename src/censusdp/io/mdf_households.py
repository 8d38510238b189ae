"""The household unit MDF: housing units carrying their households' variables.

A release whose unit run is on the ``household2010`` schema (the DDP's household run)
writes its units in production's household layout, ``MDF2020HouseholdWriter.var_list``
(:data:`HOUSEHOLD_UNIT_COLUMNS`; production's recodes: ``hh2010_to_mdfunit2020.py``):
each occupied housing unit carries its household's variables, recoded from its
``household2010`` cell (householder's sex, age, Hispanic origin and race, size, type,
elderly, multi-generational) to the MDF2020 codes; a vacant unit and an occupied
group-quarters facility carry the "not in universe" codes, as production's
``addEmptyAndGQ`` writes them. The table of fields and codes is in docs/file-formats.md.

The recode of every one of the 387,072 cells is computed once (:func:`household_codes`);
reading records back is its exact inverse, by a lookup of each record's codes among
those of the cells a household can be in (:func:`decode_households`), so a record whose
variables contradict each other or fall in a structural zero the derivation implies is
named, never silently recoded.
"""

from __future__ import annotations

import dataclasses
from functools import cache

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from censusdp.data.schema import HOUSEHOLD2010_CONSTRAINT_ZEROS, get_schema
from censusdp.errors import InputError, InternalError
from censusdp.io.mdf_read import decode_codes
from censusdp.io.mdf_records import (
    GQTYPE_CODES,
    HOUSEHOLD_UNIT_COLUMNS,
    SCHEMA_BUILD_ID,
    coded,
    constant,
    geo_columns,
    geo_dictionaries,
)

__all__ = [
    "HOUSEHOLD_FIELDS",
    "HOUSEHOLD_UNIT_COLUMNS",
    "decode_households",
    "household_codes",
    "household_unit_records",
]

HOUSEHOLD_FIELDS: dict[str, tuple[str, ...]] = {
    "HHSIZE": tuple(str(s) for s in range(8)),
    "HHT": tuple(str(t) for t in range(8)),
    "HHT2": tuple(f"{t:02d}" for t in range(13)),
    "CPLT": tuple(str(c) for c in range(5)),
    "UPART": tuple(str(u) for u in range(6)),
    "MULTG": ("0", "1", "2"),
    "HHLDRAGE": tuple(str(a) for a in range(10)),
    "HHSPAN": ("0", "1", "2"),
    "HHRACE": tuple(f"{r:02d}" for r in range(8)),
    "PAOC": tuple(str(p) for p in range(5)),
    "P60": ("0", "1"),
    "P65": ("0", "1"),
    "P75": ("0", "1"),
    "HHSEX": ("0", "1", "2"),
}
"""The household variables a record carries, each with its MDF2020 codes; code 0 of
each (``"0"``, ``"00"``) is "not in universe", what vacant units and facilities carry."""

_NOT_SUPPORTED = {"P18": "9", "PAC": "9"}
"""Variables ``household2010`` cannot fill: production's "not reported" code, on every
record (``p18_recoder``, ``pac_recoder``)."""

_MARRIED = np.arange(8)
_NONFAMILY = np.array([12, 17, 18, 23])
# household type (24 levels) -> HHT2 (1..12 with the householder female; the male codes
# of the no-spouse types are these + 4), CPLT, UPART (male householder; female + 2), PAOC
_HHT2 = np.array([1, 1, 1, 2, 1, 1, 1, 2, 3, 3, 3, 4, 4, 3, 3, 3, 4, 4, 5, 6, 6, 6, 7, 8])
_CPLT = np.array([1] * 4 + [2] * 4 + [3] * 5 + [4] * 5 + [0] * 6)
_UPART = np.array([5] * 8 + [2] * 5 + [1] * 5 + [5] * 6)
_PAOC = np.array([1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 4, 1, 2, 3, 4, 4, 4, 1, 2, 3, 4, 4])


@cache
def household_codes() -> np.ndarray:
    """``(387,072 x 14)`` int8: each ``household2010`` cell's index into the codes of
    each of :data:`HOUSEHOLD_FIELDS` (in that order), production's recode of the cell."""
    sch = get_schema("household2010")
    lv = {a: sch.cell_levels(a) for a in sch.attribute_names}
    sex, size, hhtype, elderly = lv["hhsex"], lv["hhsize"], lv["hhtype"], lv["hhelderly"]
    female = sex == 1
    hht = np.where(
        np.isin(hhtype, _MARRIED),
        1,
        np.where(
            np.isin(hhtype, _NONFAMILY),
            4 + 2 * female + (size != 1),  # alone 4 (male) / 6 (female), else 5 / 7
            2 + female,
        ),
    )
    hht2 = _HHT2[hhtype] + 4 * ((hhtype >= 18) & ~female)
    upart = np.where(_UPART[hhtype] < 5, _UPART[hhtype] + 2 * female, 5)
    multg = np.where(size < 3, 0, lv["hhmulti"] + 1)
    columns = (
        size,
        hht,
        hht2,
        _CPLT[hhtype],
        upart,
        multg,
        lv["hhage"] + 1,
        lv["hhhisp"] + 1,
        lv["hhrace"] + 1,
        _PAOC[hhtype],
        elderly >= 1,
        elderly >= 2,
        elderly >= 3,
        sex + 1,
    )
    return np.stack([np.asarray(c, dtype=np.int8) for c in columns], axis=1)


_RADIX = np.array([len(c) for c in HOUSEHOLD_FIELDS.values()], dtype=np.int64)


def _keys(codes: np.ndarray) -> np.ndarray:
    """One integer per row of code indices (mixed radix over the fields)."""
    key = np.zeros(codes.shape[0], dtype=np.int64)
    for j, r in enumerate(_RADIX):
        key = key * r + codes[:, j]
    return key


@cache
def _lookup() -> tuple[np.ndarray, np.ndarray]:
    """The keys of the cells a household can be in (sorted) and their cells: every cell
    but the structural zeros its derivation implies (the DDP's
    :data:`~censusdp.data.schema.HOUSEHOLD2010_CONSTRAINT_ZEROS` are households a truth,
    or a swapped file, can have; a DP release never has one, which ``validate`` checks).

    Their recodes are distinct: ``MULTG`` forgets ``hhmulti`` only below three persons,
    where a multi-generational household is a structural zero."""
    sch = get_schema("household2010")
    implied = tuple(z for z in sch.structural_zeros if z.name not in HOUSEHOLD2010_CONSTRAINT_ZEROS)
    cells = np.flatnonzero(~dataclasses.replace(sch, structural_zeros=implied).structural_zero_mask)
    keys = _keys(household_codes()[cells])
    order = np.argsort(keys)
    if np.any(np.diff(keys[order]) == 0):  # pragma: no cover - the recode's contract
        raise InternalError("two household cells share their MDF2020 codes")
    return keys[order], cells[order]


def household_unit_records(
    blocks: np.ndarray,
    housing_units: np.ndarray,
    households: sp.csr_matrix,
    gq_facilities: np.ndarray,
) -> pa.Table:
    """The unit records of ``blocks`` (geocodes) in the household layout: per block its
    vacant units, its households (one occupied unit each, in cell order), then its
    occupied facilities by type.

    Args:
        housing_units: ``(blocks,)`` invariant housing units.
        households: ``(blocks x 387,072)`` released households (``household2010``).
        gq_facilities: ``(blocks, 8)`` invariant occupied facilities by type.

    Raises:
        InputError: for a block with more households than housing units.
    """
    h = sp.csr_matrix(households, dtype=np.int64)
    h.sum_duplicates()
    hu = np.asarray(housing_units, dtype=np.int64)
    occ = np.asarray(h.sum(axis=1)).ravel()
    gq = np.asarray(gq_facilities, dtype=np.int64)
    nb = hu.size
    per_hh = np.repeat(np.arange(nb), np.diff(h.indptr))  # each stored cell's block
    if h.nnz and h.data.min() < 0:
        b = int(per_hh[np.argmax(h.data < 0)])
        raise InputError(f"block {blocks[b]}: a negative number of households")
    if (occ > hu).any():
        b = int(np.flatnonzero(occ > hu)[0])
        raise InputError(f"block {blocks[b]}: {occ[b]} households of {hu[b]} housing units")
    # runs of identical records: per block its vacant units (rank 0), each household cell
    # (rank 1 + cell), each facility type g (rank after every cell); sorted by block, rank
    n_types = gq.shape[1] - 1
    types = np.tile(np.arange(1, n_types + 1), nb)
    counts = [hu - occ, h.data, gq[:, 1:].ravel()]
    block_of = [np.arange(nb), per_hh, np.repeat(np.arange(nb), n_types)]
    rank = [np.zeros(nb, np.int64), 1 + h.indices.astype(np.int64), h.shape[1] + types]
    cell_of = [np.full(nb, -1), h.indices.astype(np.int64), np.full(types.size, -1)]
    gq_of = [np.zeros(nb, np.int64), np.zeros(h.nnz, np.int64), types]
    block_r, rank_r, cell_r, gq_r, n_r = (
        np.concatenate(x) for x in (block_of, rank, cell_of, gq_of, counts)
    )
    order = np.lexsort((rank_r, block_r))
    n_r = n_r[order].astype(np.int64)
    block = np.repeat(block_r[order], n_r).astype(np.int64)
    cell = np.repeat(cell_r[order], n_r).astype(np.int64)
    gqtype = np.repeat(gq_r[order], n_r).astype(np.int64)
    return _household_table(block, cell, gqtype, geo_dictionaries(blocks))


def _household_table(block: np.ndarray, cell: np.ndarray, gqtype: np.ndarray, geo) -> pa.Table:
    """Records from each record's block, cell (-1: not a household) and facility type."""
    n = block.size
    occupied = cell >= 0
    vacant = ~occupied & (gqtype == 0)
    codes = np.zeros((n, _RADIX.size), dtype=np.int8)
    codes[occupied] = household_codes()[cell[occupied]]
    data = {
        "SCHEMA_TYPE_CODE": constant("MUD", n),
        "SCHEMA_BUILD_ID": constant(SCHEMA_BUILD_ID, n),
        **geo_columns(block, geo),
        "RTYPE": coded((gqtype > 0).astype(np.int32), ("2", "4")),
        "GQTYPE": coded(gqtype, GQTYPE_CODES),
        "TEN": coded(occupied.astype(np.int32), ("0", "9")),
        "VACS": coded(vacant.astype(np.int32), ("0", "9")),
    }
    for j, (name, values) in enumerate(HOUSEHOLD_FIELDS.items()):
        data[name] = coded(codes[:, j], values)
    for name, value in _NOT_SUPPORTED.items():
        data[name] = constant(value, n)
    return pa.table({c: data[c] for c in HOUSEHOLD_UNIT_COLUMNS})


def decode_households(table: pa.Table, path: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The household records of unit records in the household layout, decoded: the row
    of each occupied housing unit and its ``household2010`` cell, and every record's
    facility type (``GQTYPE``: 0 a housing unit, 1..7 a facility's major type).

    Every record's codes are checked: ``RTYPE``, ``GQTYPE``, ``TEN`` and ``VACS`` must
    agree (a housing unit has ``GQTYPE`` 000; an occupied one ``TEN`` 9 and ``VACS`` 0, a
    vacant one ``TEN`` 0 and ``VACS`` 9; a facility ``TEN`` and ``VACS`` 0), a vacant unit
    and a facility carry every household variable "not in universe", and an occupied
    unit's variables are those of one cell that is not a structural zero.

    Raises:
        InputError: naming file, row and values of the first record that is not one.
    """
    rtype = decode_codes(table, "RTYPE", ("2", "4"), path)
    gqtype = decode_codes(table, "GQTYPE", GQTYPE_CODES, path)
    ten = decode_codes(table, "TEN", ("0", "9"), path)
    vacs = decode_codes(table, "VACS", ("0", "9"), path)
    for name, value in _NOT_SUPPORTED.items():
        decode_codes(table, name, (value,), path)
    codes = np.stack(
        [decode_codes(table, n, v, path) for n, v in HOUSEHOLD_FIELDS.items()], axis=1
    ).astype(np.int64)
    occupied = ten == 1
    bad = (
        ((rtype == 1) != (gqtype > 0))
        | (occupied & ((rtype == 1) | (vacs == 1)))
        | (~occupied & (vacs == (rtype == 1)))
    )
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{path}: row {r} has RTYPE {('2', '4')[rtype[r]]}, GQTYPE {GQTYPE_CODES[gqtype[r]]}, "
            f"TEN {('0', '9')[ten[r]]} and VACS {('0', '9')[vacs[r]]}, not a housing unit "
            "(occupied: TEN 9 VACS 0; vacant: TEN 0 VACS 9) nor a facility (TEN 0 VACS 0)"
        )
    niu = ~occupied & codes.any(axis=1)
    rows = np.flatnonzero(occupied)
    keys, cells = _lookup()
    key = _keys(codes[rows])
    pos = np.minimum(np.searchsorted(keys, key), keys.size - 1)
    wrong = keys[pos] != key
    if niu.any() or wrong.any():
        r = int(np.flatnonzero(niu)[0]) if niu.any() else int(rows[np.flatnonzero(wrong)[0]])
        shown = ", ".join(
            f"{n} {v[codes[r, j]]}" for j, (n, v) in enumerate(HOUSEHOLD_FIELDS.items())
        )
        what = (
            "a vacant unit or facility with household variables (all must be 0)"
            if niu[r]
            else "not one household (its variables disagree, or are a structural zero)"
        )
        raise InputError(f"{path}: row {r} ({shown}) is {what}")
    return rows, cells[pos], gqtype
