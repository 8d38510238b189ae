"""Writing the MDF's files whole: the released persons and units, in Parquet and MDF2020 text.

:class:`MDFPersonWriter` streams persons a run of blocks at a time, :func:`write_mdf_units`
writes the units (in the H1 layout, or the household layout when given households),
:func:`write_mdf_records` a release made from records (the swapping release). A run
writes the MDF as part files instead (:mod:`censusdp.io.mdf_parts`), through the same
:func:`write_records`. Every file appears under its name only when complete
(:func:`censusdp.io.atomic.atomic_path`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import person_histogram, unit_histogram
from censusdp.data.schema import Schema, get_schema
from censusdp.errors import InputError
from censusdp.io.atomic import StreamingWriter, atomic_path
from censusdp.io.layout import MDF_FILES
from censusdp.io.mdf_households import household_unit_records
from censusdp.io.mdf_records import (
    geo_dictionaries,
    iter_mdf_blocks,
    person_layout,
    person_records,
    unit_records,
)
from censusdp.io.mdf_text import write_text_chunk

__all__ = [
    "MDFPersonWriter",
    "write_mdf_persons",
    "write_mdf_records",
    "write_mdf_units",
    "write_records",
]


class MDFPersonWriter(StreamingWriter):
    """Write ``mdf_persons.parquet`` (and the text file) chunk by chunk.

    Each :meth:`write` call appends the persons of a run of blocks (columns as from
    :func:`iter_mdf_blocks`); ``EPNUM`` continues across chunks from 0. The files appear
    under their final names only when :meth:`close` succeeds.
    """

    def __init__(
        self,
        hierarchy: Hierarchy,
        parquet_path: str | Path,
        text_path: str | Path | None = None,
        schema: Schema | str = "pl94",
    ):
        self.hierarchy = hierarchy
        self.layout = person_layout(get_schema(schema) if isinstance(schema, str) else schema)
        self.persons = 0
        self._stack = contextlib.ExitStack()
        self._pq_tmp = self._stack.enter_context(atomic_path(parquet_path))
        self._writer: pq.ParquetWriter | None = None
        self._txt = None
        if text_path is not None:
            self._txt_tmp = self._stack.enter_context(atomic_path(text_path))
            self._txt = open(self._txt_tmp, "wb")  # noqa: SIM115 - closed in close()/abort()
        self._geo = geo_dictionaries(hierarchy)
        self._header = True

    def write(self, cols: Mapping[str, np.ndarray]) -> None:
        """Append one chunk of persons."""
        table = person_records(cols, self._geo, self.persons, self.layout)
        if self._writer is None:
            self._writer = pq.ParquetWriter(self._pq_tmp, table.schema, compression="zstd")
        if table.num_rows:  # an empty dictionary chunk would write undefined statistics bytes
            self._writer.write_table(table, row_group_size=1 << 20)
        if self._txt is not None:
            write_text_chunk(table, self._txt, header=self._header)
        self._header = False
        self.persons += table.num_rows

    def close(self) -> int:
        """Finish the files and move them into place; returns the number of persons."""
        if self._writer is None:
            empty = {c: np.zeros(0, np.int64) for c in ("block", "hhgq", "votingage")}
            empty.update({c: np.zeros(0, np.int64) for c in ("hispanic", "sex", "age")})
            empty["cenrace"] = np.ones(0, np.int64)
            self.write(empty)
        self._writer.close()  # type: ignore[union-attr]
        if self._txt is not None:
            self._txt.close()
        self._stack.close()
        return self.persons

    def abort(self) -> None:
        """Discard the partial files."""
        with contextlib.suppress(Exception):
            if self._writer is not None:
                self._writer.close()
        if self._txt is not None:
            self._txt.close()
        with contextlib.suppress(RuntimeError):
            self._stack.__exit__(RuntimeError, RuntimeError("aborted"), None)


def write_mdf_persons(
    cols: Mapping[str, np.ndarray],
    hierarchy: Hierarchy,
    path: str | Path,
    text_path: str | Path | None = None,
    schema: Schema | str = "pl94",
) -> int:
    """Write persons (columns of :func:`~censusdp.io.mdf_records.mdf_person_columns`) at
    once; returns their number."""
    with MDFPersonWriter(hierarchy, path, text_path, schema) as w:
        w.write(cols)
    return w.persons


def write_mdf_units(
    hierarchy: Hierarchy,
    housing_units: np.ndarray,
    occupied: np.ndarray,
    gq_facilities: np.ndarray,
    path: str | Path,
    text_path: str | Path | None = None,
    *,
    households: sp.spmatrix | None = None,
) -> int:
    """Write the units MDF: per block its vacant units, occupied units, then facilities.

    The order within a block is production's (the H1 histogram's cells, vacant first,
    then the group quarters ``addGroupQuarters`` appends). With ``households``, in
    production's household layout (:func:`~censusdp.io.mdf_households.household_unit_records`):
    each occupied housing unit is one household carrying its variables.

    Args:
        housing_units: ``(blocks,)`` invariant housing-unit counts.
        occupied: ``(blocks,)`` released occupied housing units (<= housing units).
        gq_facilities: ``(blocks, 8)`` invariant occupied facilities by type.
        path, text_path: the Parquet file and (optionally) the pipe-delimited text file.
        households: ``(blocks x 387,072)`` households (``household2010``), one per
            occupied housing unit: each block's row sum is its ``occupied``.

    Returns:
        The number of records.

    Raises:
        InputError: for a block whose households are not its occupied housing units.
    """
    if households is None:
        table = unit_records(hierarchy.blocks, housing_units, occupied, gq_facilities)
    else:
        n = np.asarray(households.sum(axis=1)).ravel()
        bad = np.flatnonzero(n != np.asarray(occupied))
        if bad.size:
            b = int(bad[0])
            raise InputError(
                f"block {hierarchy.blocks[b]}: {int(n[b])} households but "
                f"{int(np.asarray(occupied)[b])} occupied housing units"
            )
        table = household_unit_records(hierarchy.blocks, housing_units, households, gq_facilities)
    write_records(table, path, text_path, header=True)
    return table.num_rows


def write_records(
    table: pa.Table, path: str | Path, text_path: str | Path | None, header: bool
) -> None:
    """Write records to a Parquet file (and the text file), atomically, in one go."""
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(atomic_path(path))
        with pq.ParquetWriter(tmp, table.schema, compression="zstd") as writer:
            if table.num_rows:  # no row group at all for no units (deterministic bytes)
                writer.write_table(table, row_group_size=1 << 20)
        if text_path is not None:
            txt = stack.enter_context(atomic_path(text_path))
            with open(txt, "wb") as f:
                write_text_chunk(table, f, header=header)


def write_mdf_records(
    out_dir: str | Path,
    persons: Mapping[str, np.ndarray],
    units: Mapping[str, np.ndarray] | None,
    hierarchy: Hierarchy,
    schema: Schema | str = "pl94",
    households: sp.spmatrix | None = None,
) -> int:
    """Write person (and unit) records as the four MDF files of ``out_dir``.

    For releases made from records rather than histograms (the swapping release): the
    persons are tabulated into ``schema`` (from their CEF or MDF columns) and written in
    block order; the units (``geocode``, ``gqtype``, ``occupied``) as housing units and
    occupied facilities per block, in the household layout with ``households`` (the
    units' ``(blocks x 387,072)`` households, :func:`write_mdf_units`). Returns the
    number of persons.
    """
    out = Path(out_dir)
    sch = get_schema(schema) if isinstance(schema, str) else schema
    hist = person_histogram(persons, hierarchy, sch)
    with MDFPersonWriter(hierarchy, *(out / name for name in MDF_FILES["persons"]), sch) as w:
        for cols in iter_mdf_blocks(hist, sch):
            w.write(cols)
    if units is not None:
        uh = np.asarray(unit_histogram(units, hierarchy).todense())
        write_mdf_units(
            hierarchy,
            uh[:, 0] + uh[:, 1],
            uh[:, 1],
            np.concatenate([np.zeros((uh.shape[0], 1), np.int64), uh[:, 3::2]], axis=1),
            *(out / name for name in MDF_FILES["units"]),
            households=households,
        )
    return w.persons
