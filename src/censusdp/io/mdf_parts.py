"""The MDF's part files: one part of each MDF file per run of blocks, written by its task.

A run writes each of the four MDF files (:data:`censusdp.io.layout.MDF_FILES`) as a
directory of part files, one per run of blocks (:func:`write_mdf_part`, called by the
executor tasks of :mod:`censusdp.release.parts`; layout: :mod:`censusdp.io.parts`):
``EPNUM`` continues across the parts and only the first text part has the header, so
the parts in name order are the single file. :func:`mdf_part_counts` reads one part
back, for the task that wrote it and for the self-check of ``censusdp validate``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from censusdp.data.histograms import person_cells, pl94_view
from censusdp.data.schema import Schema, get_schema
from censusdp.data.schema_dhc import DHC_UNITS_2020, DHCH_2020
from censusdp.errors import InputError
from censusdp.io.atomic import fsync_file, sha256_of
from censusdp.io.mdf_households import decode_households, household_unit_records
from censusdp.io.mdf_households_dhc import decode_dhch_units, dhch_unit_records
from censusdp.io.mdf_read import (
    check_constant,
    decode_geocodes,
    decode_persons,
    decode_unit_status,
    iter_mdf_persons,
    read_mdf_records,
)
from censusdp.io.mdf_records import (
    geo_dictionaries,
    mdf_person_columns,
    person_layout,
    person_records,
    unit_records,
)
from censusdp.io.mdf_write import write_records

__all__ = [
    "MDF_PART_FIELDS",
    "BlockCounts",
    "mdf_part_counts",
    "mdf_part_dhc_units",
    "mdf_part_households",
    "write_mdf_part",
]

MDF_PART_FIELDS = ("file", "start", "stop", "rows", "sha256")
"""A part's record in ``_parts.json``: its file, its blocks ``start:stop`` (indices in
the release's blocks, geocode order), its records and its SHA-256."""


@dataclass(frozen=True, eq=False)
class BlockCounts:
    """The released counts of a run of blocks: what one MDF part is written from.

    ``blocks`` are their geocodes (in release order), ``persons`` their released
    ``(blocks x cells)`` person histogram in the schema named ``schema``;
    ``housing_units`` (``(blocks,)``, invariant),
    ``occupied`` (``(blocks,)``, released, at most the housing units) and
    ``gq_facilities`` (``(blocks, 8)``, invariant occupied facilities by type) their
    units. Every array has one row per block, in the same order.

    ``households``: a release with a household run (``household2010``) gives its
    released ``(blocks x 387,072)`` households; each block's occupied units are then its
    row sum, and the units are written in the household layout
    (:mod:`censusdp.io.mdf_households`).

    ``dhc_units``: a release with the 2020 DHC's household run gives its released
    ``(blocks x 35)`` units by ``tenvacgq``, and ``households`` are then its
    ``(blocks x 1,578,528)`` ``dhch-2020`` households; the units are written in the DHC's
    unit layout (:mod:`censusdp.io.mdf_households_dhc`).
    """

    blocks: np.ndarray
    persons: sp.csr_matrix
    schema: str
    housing_units: np.ndarray
    occupied: np.ndarray
    gq_facilities: np.ndarray
    households: sp.csr_matrix | None = None
    dhc_units: np.ndarray | None = None

    def rows(self, start: int, stop: int) -> BlockCounts:
        """Blocks ``start:stop`` of these (each array sliced, the histograms as CSR)."""
        return BlockCounts(
            np.asarray(self.blocks[start:stop]),
            sp.csr_matrix(self.persons[start:stop]),
            self.schema,
            np.asarray(self.housing_units[start:stop]),
            np.asarray(self.occupied[start:stop]),
            np.asarray(self.gq_facilities[start:stop]),
            None if self.households is None else sp.csr_matrix(self.households[start:stop]),
            None if self.dhc_units is None else np.asarray(self.dhc_units[start:stop]),
        )


def _part_record(path: Path, rows: int) -> dict[str, object]:
    fsync_file(path)
    return {"file": path.name, "rows": int(rows), "sha256": sha256_of(path)}


def write_mdf_part(
    counts: BlockCounts,
    paths: Mapping[str, tuple[Path, Path | None]],
    *,
    first_person: int,
    header: bool,
) -> dict[str, list[dict[str, object]]]:
    """Write the persons and units of a run of blocks as one part of each MDF file.

    Run by an executor task: ``counts`` are the released counts of these blocks;
    ``paths`` maps ``persons`` and ``units`` to the part's Parquet and text paths;
    ``first_person`` is the ``EPNUM`` of the part's first person (the persons of the
    parts before it). The first part (``header``) carries the text files' header line,
    so the text parts concatenated in order are the single MDF2020 file, byte for byte.
    Every file appears under its name only when complete and is flushed to disk.

    Returns:
        ``{"persons": [parquet record, text record], "units": [...]}``, each record the
        file's name, records and SHA-256 (the text record absent without a text path).
    """
    sch = get_schema(counts.schema)
    geo = geo_dictionaries(counts.blocks)
    cols = mdf_person_columns(counts.persons, None, sch)  # type: ignore[arg-type]
    persons = person_records(cols, geo, first_person, person_layout(sch))
    if counts.households is None:
        units = unit_records(
            counts.blocks, counts.housing_units, counts.occupied, counts.gq_facilities
        )
    else:
        occupied = np.asarray(counts.households.sum(axis=1)).ravel()
        bad = np.flatnonzero(occupied != np.asarray(counts.occupied))
        if bad.size:
            b = int(bad[0])
            raise InputError(
                f"block {counts.blocks[b]}: {occupied[b]} households but "
                f"{counts.occupied[b]} occupied housing units"
            )
        units = (
            household_unit_records(
                counts.blocks, counts.housing_units, counts.households, counts.gq_facilities
            )
            if counts.dhc_units is None
            else dhch_unit_records(counts.blocks, counts.households, counts.dhc_units)
        )
    out: dict[str, list[dict[str, object]]] = {}
    for kind, table in (("persons", persons), ("units", units)):
        pq_path, txt_path = paths[kind]
        write_records(table, pq_path, txt_path, header=header)
        out[kind] = [_part_record(Path(pq_path), table.num_rows)]
        if txt_path is not None:
            out[kind].append(_part_record(Path(txt_path), table.num_rows))
    return out


def mdf_part_counts(
    persons_path: str | Path,
    units_path: str | Path,
    blocks: np.ndarray,
    schema: Schema,
    *,
    records: tuple[pa.Table, pa.Table] | None = None,
) -> tuple[sp.csr_matrix, sp.csr_matrix, np.ndarray]:
    """Read one MDF part back: its ``(blocks x cells)`` person histogram in ``schema``,
    its ``pl94`` one (from the decoded ``pl94`` columns, as
    :func:`~censusdp.io.mdf_read.read_mdf_histograms` does) and its ``(blocks x 3)``
    vacant units, occupied units and facilities.

    ``blocks`` are the part's blocks (geocodes, sorted): a record in any other block is
    an error. Used by the task that wrote the part (to check it) and by the self-check.
    ``records``: the persons' and the units' records already read
    (:func:`~censusdp.io.mdf_read.read_mdf_records` of the two paths), not read again.

    Raises:
        InputError: for an unreadable part, an unknown code, or a record outside
            ``blocks`` (naming the file, row and value).
    """
    blocks = np.asarray(blocks)
    nb = blocks.size
    pl94 = get_schema("pl94")
    hist = sp.csr_matrix((nb, schema.size), dtype=np.int64)
    pl94_hist = sp.csr_matrix((nb, pl94.size), dtype=np.int64)
    persons = (
        iter_mdf_persons(persons_path)
        if records is None
        else [decode_persons(records[0], persons_path)]
    )
    for cols in persons:
        rows = _local_blocks(cols["geocode"], blocks, persons_path, "persons")
        n = rows.size
        ones = np.ones(n, dtype=np.int64)
        cells = person_cells(cols, schema, n)
        hist = hist + sp.csr_matrix((ones, (rows, cells)), shape=(nb, schema.size))
        p_cells = cells if schema.name == "pl94" else person_cells(pl94_view(cols), pl94, n)
        pl94_hist = pl94_hist + sp.csr_matrix((ones, (rows, p_cells)), shape=(nb, pl94.size))
    table = read_mdf_records(units_path) if records is None else records[1]
    check_constant(table, "SCHEMA_TYPE_CODE", "MUD", units_path, 0)
    rows = _local_blocks(decode_geocodes(table, units_path), blocks, units_path, "units")
    status = decode_unit_status(table, units_path)
    counts = np.zeros((nb, 3), dtype=np.int64)
    np.add.at(counts, (rows, np.array([2, 1, 0])[status]), 1)
    return sp.csr_matrix(hist), sp.csr_matrix(pl94_hist), counts


def _local_blocks(geocode: np.ndarray, blocks: np.ndarray, path: object, what: str) -> np.ndarray:
    """Each record's index in ``blocks``; a record in another block is an error."""
    if not geocode.size:
        return np.zeros(0, dtype=np.int64)
    if not blocks.size:
        raise InputError(f"{path}: row 0 is in block {geocode[0]}, a part of no blocks")
    codes = geocode.astype(blocks.dtype)
    idx = np.minimum(np.searchsorted(blocks, codes), blocks.size - 1)
    bad = blocks[idx] != codes
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{path}: {what} row {row} is in block {geocode[row]}, not one of the part's "
            f"blocks {blocks[0]}..{blocks[-1]}"
        )
    return idx.astype(np.int64)


def mdf_part_dhc_units(
    units_path: str | Path, blocks: np.ndarray, *, records: pa.Table | None = None
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Read one MDF part's units in the DHC's unit layout back: its ``(blocks x
    1,578,528)`` ``dhch-2020`` households and ``(blocks x 35)`` units by ``tenvacgq``,
    every record decoded and checked
    (:func:`~censusdp.io.mdf_households_dhc.decode_dhch_units`); ``records``: the units'
    records already read, not read again.

    Raises:
        InputError: for an unreadable part, a record outside ``blocks``, or a record that
            is not a household, a vacant unit or a facility (naming file, row and values).
    """
    blocks = np.asarray(blocks)
    table = read_mdf_records(units_path) if records is None else records
    cell, level = decode_dhch_units(table, units_path)
    local = _local_blocks(decode_geocodes(table, units_path), blocks, units_path, "units")
    units = np.zeros((blocks.size, DHC_UNITS_2020.size), dtype=np.int64)
    np.add.at(units, (local, level), 1)
    hh = cell >= 0
    ones = np.ones(int(hh.sum()), dtype=np.int64)
    households = sp.csr_matrix(
        (ones, (local[hh], cell[hh])), shape=(blocks.size, DHCH_2020.size), dtype=np.int64
    )
    return households, units


def mdf_part_households(
    units_path: str | Path,
    blocks: np.ndarray,
    *,
    records: pa.Table | None = None,
    gq_facilities: np.ndarray | None = None,
) -> sp.csr_matrix:
    """Read the households of one MDF part in the household layout back: its
    ``(blocks x 387,072)`` household histogram (``household2010``), each record's
    variables decoded and checked (:func:`~censusdp.io.mdf_households.decode_households`).

    ``records``: the units' records already read, not read again; ``gq_facilities``: the
    blocks' ``(blocks, 8)`` published facilities by type, which the facility records'
    ``GQTYPE`` must give block by block.

    Raises:
        InputError: for an unreadable part, a record outside ``blocks``, a record that
            is not one household or unit (naming the file, row and values), or a block
            whose facilities by type differ from ``gq_facilities``.
    """
    blocks = np.asarray(blocks)
    table = read_mdf_records(units_path) if records is None else records
    rows, cells, gqtype = decode_households(table, units_path)
    local = _local_blocks(decode_geocodes(table, units_path), blocks, units_path, "units")
    if gq_facilities is not None:
        want = np.asarray(gq_facilities, dtype=np.int64)
        got = np.zeros_like(want)
        np.add.at(got, (local, gqtype), gqtype > 0)
        bad = np.flatnonzero((got[:, 1:] != want[:, 1:]).any(axis=1))
        if bad.size:
            b = int(bad[0])
            raise InputError(
                f"{units_path}: block {blocks[b]} has facilities of types "
                f"{got[b, 1:].tolist()} (GQTYPE 101..701), the invariants publish "
                f"{want[b, 1:].tolist()}"
            )
    size = get_schema("household2010").size
    ones = np.ones(rows.size, dtype=np.int64)
    return sp.csr_matrix((ones, (local[rows], cells)), shape=(blocks.size, size))
