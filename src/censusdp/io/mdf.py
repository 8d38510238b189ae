"""The microdata detail file (MDF): released persons and units, Parquet and MDF2020 text.

* ``mdf_persons.parquet``: ``geocode``, ``hhgq``, ``votingage``, ``hispanic``,
  ``cenrace`` (and ``sex``, ``age`` when the schema has them), one row per person,
  written block chunk by block chunk (:class:`MDFPersonWriter`) so that a state of
  tens of millions of persons never has every person in memory.
* ``mdf_units.parquet``: ``geocode``, ``gqtype``, ``occupied``, one row per unit.
* ``mdf_persons.txt``: the same persons in the pipe-delimited MDF2020 layout with the
  Census column names (TABBLKST ... CENRACE).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import UNIT_CELLS, person_histogram, pl94_view, unit_histogram
from censusdp.data.schema import Schema, get_schema
from censusdp.io.atomic import StreamingWriter, atomic_path
from censusdp.io.columns import dictionary_strings

__all__ = [
    "MDF2020_COLUMNS",
    "MDFPersonWriter",
    "iter_mdf_blocks",
    "mdf_person_columns",
    "read_mdf_histograms",
    "write_mdf_persons",
    "write_mdf_text",
    "write_mdf_units",
]

MDF2020_COLUMNS = (
    "TABBLKST",
    "TABBLKCOU",
    "TABTRACTCE",
    "TABBLKGRPCE",
    "TABBLK",
    "EPNUM",
    "RTYPE",
    "GQTYPE_PL",
    "VOTING_AGE",
    "CENHISP",
    "CENRACE",
)


def mdf_person_columns(
    block_hist: sp.csr_matrix, hierarchy: Hierarchy, schema: Schema
) -> dict[str, np.ndarray]:
    """Expand a (blocks x cells) integer histogram into MDF person columns (block order)."""
    h = sp.csr_matrix(block_hist)
    h.sum_duplicates()
    counts = h.data.astype(np.int64)
    block = np.repeat(np.arange(h.shape[0], dtype=np.int64), np.diff(h.indptr))
    block = np.repeat(block, counts)
    cells = np.repeat(h.indices.astype(np.int64), counts)
    cols: dict[str, np.ndarray] = {"block": block}
    cols.update(schema.mdf_columns(cells))
    return cols


def _person_table(cols: dict[str, np.ndarray], hierarchy: Hierarchy) -> pa.Table:
    geocode = dictionary_strings(cols["block"].astype(np.int32), hierarchy.blocks).cast(pa.string())
    out = {"geocode": geocode}
    for name in ("hhgq", "votingage", "hispanic", "cenrace", "sex", "age"):
        if name in cols:
            out[name] = pa.array(cols[name].astype(np.int64), pa.int64())
    return pa.table(out)


def iter_mdf_blocks(
    block_hist: sp.csr_matrix, schema: Schema, persons_per_chunk: int = 1 << 22
) -> Iterator[dict[str, np.ndarray]]:
    """MDF person columns of consecutive runs of blocks, about ``persons_per_chunk`` each.

    Concatenating the chunks gives exactly :func:`mdf_person_columns` of the whole
    histogram; ``block`` holds each person's block index in the hierarchy.
    """
    h = sp.csr_matrix(block_hist)
    h.sum_duplicates()
    per_block = np.asarray(h.sum(axis=1)).ravel().astype(np.int64)
    cum = np.concatenate([[0], np.cumsum(per_block)])
    nb = h.shape[0]
    b0 = 0
    while b0 < nb:
        b1 = int(np.searchsorted(cum, cum[b0] + persons_per_chunk, side="right")) - 1
        b1 = min(max(b1, b0 + 1), nb)
        sub = h[b0:b1]
        cols = mdf_person_columns(sub, None, schema)  # type: ignore[arg-type]
        cols["block"] += b0
        yield cols
        b0 = b1


class MDFPersonWriter(StreamingWriter):
    """Write ``mdf_persons.parquet`` and the MDF2020 text file chunk by chunk.

    Each :meth:`write` call appends the persons of a run of blocks (columns as from
    :func:`iter_mdf_blocks`); ``EPNUM`` continues across chunks. Both files appear under
    their final names only when :meth:`close` succeeds.
    """

    def __init__(self, hierarchy: Hierarchy, parquet_path: str | Path, text_path: str | Path):
        self.hierarchy = hierarchy
        self.persons = 0
        self._stack = contextlib.ExitStack()
        self._pq_tmp = self._stack.enter_context(atomic_path(parquet_path))
        self._txt_tmp = self._stack.enter_context(atomic_path(text_path))
        self._writer: pq.ParquetWriter | None = None
        self._txt = open(self._txt_tmp, "wb")  # noqa: SIM115 - closed in close()/abort()
        self._header = True
        blocks = hierarchy.blocks
        self._geo = {
            k: pa.array(np.array([b[a:z] for b in blocks], dtype=object), pa.string())
            for k, (a, z) in _GEO_PARTS.items()
        }

    def write(self, cols: dict[str, np.ndarray]) -> None:
        """Append one chunk of persons."""
        table = _person_table(cols, self.hierarchy)
        if self._writer is None:
            self._writer = pq.ParquetWriter(self._pq_tmp, table.schema, compression="zstd")
        self._writer.write_table(table, row_group_size=1 << 20)
        text = _mdf_text_table(cols, self._geo, self.persons)
        pacsv.write_csv(
            text,
            self._txt,
            write_options=pacsv.WriteOptions(
                delimiter="|", quoting_style="none", include_header=self._header
            ),
        )
        self._header = False
        self.persons += table.num_rows

    def close(self) -> int:
        """Finish both files and move them into place; returns the number of persons."""
        if self._writer is None:
            empty = {"block": np.zeros(0, np.int64)}
            for c in ("hhgq", "votingage", "hispanic", "cenrace"):
                empty[c] = np.zeros(0, np.int64)
            self.write(empty)
        self._writer.close()  # type: ignore[union-attr]
        self._txt.close()
        self._stack.close()
        return self.persons

    def abort(self) -> None:
        """Discard both partial files."""
        with contextlib.suppress(Exception):
            if self._writer is not None:
                self._writer.close()
        self._txt.close()
        with contextlib.suppress(RuntimeError):
            self._stack.__exit__(RuntimeError, RuntimeError("aborted"), None)


def write_mdf_persons(cols: dict[str, np.ndarray], hierarchy: Hierarchy, path: str | Path) -> int:
    """Write ``mdf_persons.parquet`` atomically; returns the number of persons."""
    table = _person_table(cols, hierarchy)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", row_group_size=1 << 20)
    return table.num_rows


_GEO_PARTS = {
    "TABBLKST": (0, 2),
    "TABBLKCOU": (2, 5),
    "TABTRACTCE": (5, 11),
    "TABBLKGRPCE": (11, 12),
    "TABBLK": (12, 16),
}


def _mdf_text_table(cols: dict[str, np.ndarray], geo: dict[str, pa.Array], first: int) -> pa.Table:
    idx = pa.array(cols["block"].astype(np.int32))
    data: dict[str, pa.Array] = {
        k: pa.DictionaryArray.from_arrays(idx, v).cast(pa.string()) for k, v in geo.items()
    }
    n = cols["block"].size
    hhgq = cols["hhgq"]
    data["EPNUM"] = pa.array(np.arange(first + 1, first + n + 1, dtype=np.int64))
    data["RTYPE"] = pa.array(np.where(hhgq == 0, 3, 5).astype(np.int64))
    data["GQTYPE_PL"] = pa.array(hhgq.astype(np.int64))
    data["VOTING_AGE"] = pa.array((cols["votingage"] + 1).astype(np.int64))
    data["CENHISP"] = pa.array((cols["hispanic"] + 1).astype(np.int64))
    # two-digit code; pyarrow's pad is defined on an empty chunk too (np.char.zfill is not)
    cenrace = pa.array(cols["cenrace"].astype(np.int64)).cast(pa.string())
    data["CENRACE"] = pc.utf8_lpad(cenrace, width=2, padding="0")
    return pa.table({c: data[c] for c in MDF2020_COLUMNS})


def write_mdf_text(cols: dict[str, np.ndarray], hierarchy: Hierarchy, path: str | Path) -> None:
    """Write the persons in the pipe-delimited MDF2020 layout (Census column names).

    Codes follow the 2020 MDF: ``RTYPE`` 3 housing-unit person, 5 GQ person;
    ``GQTYPE_PL`` 0 (household) or the major GQ type 1-7; ``VOTING_AGE`` 1 under 18,
    2 18 and over; ``CENHISP`` 1 not Hispanic, 2 Hispanic; ``CENRACE`` 01-63.
    """
    blocks = hierarchy.blocks
    geo = {
        k: pa.array(np.array([b[a:z] for b in blocks], dtype=object), pa.string())
        for k, (a, z) in _GEO_PARTS.items()
    }
    table = _mdf_text_table(cols, geo, 0)
    with atomic_path(path) as tmp:
        pacsv.write_csv(
            table,
            tmp,
            write_options=pacsv.WriteOptions(delimiter="|", quoting_style="none"),
        )


def write_mdf_units(
    hierarchy: Hierarchy,
    housing_units: np.ndarray,
    occupied: np.ndarray,
    gq_facilities: np.ndarray,
    path: str | Path,
) -> int:
    """Write ``mdf_units.parquet``: per block, its housing units (occupied first) and facilities.

    Args:
        housing_units: ``(blocks,)`` invariant housing-unit counts.
        occupied: ``(blocks,)`` released occupied housing units (<= housing units).
        gq_facilities: ``(blocks, 8)`` invariant occupied facilities by type.
    """
    nb = hierarchy.blocks.size
    hu = housing_units.astype(np.int64)
    occ = occupied.astype(np.int64)
    block_hu = np.repeat(np.arange(nb), hu)
    # occupied flag: the first ``occ[b]`` housing units of block b are occupied
    start = np.repeat(np.cumsum(hu) - hu, hu)
    rank = np.arange(block_hu.size) - start
    occ_flag = rank < np.repeat(occ, hu)
    gq_block, gq_type = np.nonzero(gq_facilities)
    reps = gq_facilities[gq_block, gq_type].astype(np.int64)
    gq_block = np.repeat(gq_block, reps)
    gq_type = np.repeat(gq_type, reps)
    block = np.concatenate([block_hu, gq_block])
    gqtype = np.concatenate([np.zeros(block_hu.size, np.int64), gq_type.astype(np.int64)])
    occupied_col = np.concatenate([occ_flag, np.ones(gq_block.size, dtype=bool)])
    order = np.argsort(block, kind="stable")
    table = pa.table(
        {
            "geocode": dictionary_strings(block[order].astype(np.int32), hierarchy.blocks).cast(
                pa.string()
            ),
            "gqtype": pa.array(gqtype[order], pa.int64()),
            "occupied": pa.array(occupied_col[order], pa.bool_()),
        }
    )
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return table.num_rows


def read_mdf_histograms(
    run_dir: Path, hierarchy: Hierarchy, schema: Schema
) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
    """Read a release's MDF back in batches: (schema block histogram, ``pl94`` one, unit one).

    The files are read a batch at a time, so memory holds the sparse histograms, never
    every person.
    """
    pf = pq.ParquetFile(run_dir / "mdf_persons.parquet")
    hist = sp.csr_matrix((hierarchy.blocks.size, schema.size), dtype=np.int64)
    pl94 = sp.csr_matrix((hierarchy.blocks.size, get_schema("pl94").size), dtype=np.int64)
    same = schema.name == "pl94"
    for batch in pf.iter_batches(batch_size=1 << 22):
        cols = {c: batch.column(c).to_numpy(zero_copy_only=False) for c in batch.schema.names}
        h = person_histogram(cols, hierarchy, schema)
        hist = hist + h
        pl94 = pl94 + (h if same else person_histogram(pl94_view(cols), hierarchy, "pl94"))
    units = sp.csr_matrix((hierarchy.blocks.size, UNIT_CELLS), dtype=np.int64)
    for batch in pq.ParquetFile(run_dir / "mdf_units.parquet").iter_batches(batch_size=1 << 22):
        cols = {c: batch.column(c).to_numpy(zero_copy_only=False) for c in batch.schema.names}
        units = units + unit_histogram(cols, hierarchy)
    return sp.csr_matrix(hist), sp.csr_matrix(pl94), sp.csr_matrix(units)
