"""Write and read the files of a release: NMF, MDF (Parquet and MDF2020 text), invariants.

File contract (DESIGN.md):

* ``noisy_measurements.parquet``: ``geolevel``, ``geocode``, ``query``, ``cell`` (row
  within the query), ``value``, ``variance`` (plus ``mechanism``), one row per noisy
  answer. It is written as it is measured (:class:`NMFWriter`), one row group per
  (geolevel, chunk of whole families, query), rows ordered by geocode then cell, so
  :class:`NMFReader` can hand the estimator the measurements of any run of units by
  reading only the row groups that hold them (found from the row-group statistics).
* ``mdf_persons.parquet``: ``geocode``, ``hhgq``, ``votingage``, ``hispanic``,
  ``cenrace`` (and ``sex``, ``age`` when the schema has them), one row per person,
  written block chunk by block chunk (:class:`MDFPersonWriter`) so that a state of
  tens of millions of persons never has every person in memory.
* ``mdf_units.parquet``: ``geocode``, ``gqtype``, ``occupied``, one row per unit.
* ``mdf_persons.txt``: the same persons in the pipe-delimited MDF2020 layout with the
  Census column names (TABBLKST ... CENRACE).
* ``invariants.parquet`` / ``invariant_totals.parquet``: the public exact counts.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import scipy.sparse as sp

from censusdp.errors import InputError
from censusdp.geography import Hierarchy
from censusdp.io.atomic import atomic_path
from censusdp.measure import MeasuredChunk, MeasuredQuery, MeasurementSet, measured_rows
from censusdp.queries import make_query
from censusdp.schema import Schema

__all__ = [
    "MDF2020_COLUMNS",
    "NMF_COLUMNS",
    "MDFPersonWriter",
    "NMFReader",
    "NMFWriter",
    "iter_mdf_blocks",
    "mdf_person_columns",
    "read_nmf",
    "write_mdf_persons",
    "write_mdf_text",
    "write_mdf_units",
    "write_nmf",
]

NMF_COLUMNS = ("geolevel", "geocode", "query", "cell", "value", "variance", "mechanism")
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


def _dict_strings(indices: np.ndarray, dictionary: np.ndarray) -> pa.Array:
    return pa.DictionaryArray.from_arrays(
        pa.array(indices, pa.int32()), pa.array(dictionary.astype(object), pa.string())
    )


def _nmf_table(mq: MeasuredQuery, geocodes: np.ndarray) -> pa.Table:
    n_units, n_rows = mq.values.shape
    n = n_units * n_rows
    return pa.table(
        {
            "geolevel": _dict_strings(np.zeros(n, np.int32), np.array([mq.geolevel])),
            "geocode": _dict_strings(
                np.repeat(np.arange(n_units, dtype=np.int32), n_rows), geocodes
            ),
            "query": _dict_strings(np.zeros(n, np.int32), np.array([mq.query])),
            "cell": pa.array(np.tile(mq.rows.astype(np.int32), n_units), pa.int32()),
            "value": pa.array(mq.values.reshape(-1)),
            "variance": pa.array(np.full(n, mq.variance, dtype=np.float64)),
            "mechanism": _dict_strings(np.zeros(n, np.int32), np.array([mq.mechanism])),
        }
    )


class NMFWriter:
    """Append :class:`~censusdp.measure.MeasuredChunk` s to a noisy measurement file.

    The file appears under its final name only when :meth:`close` succeeds (it is
    written to a temporary file next to it); use it as a context manager so that an
    error removes the temporary file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.rows = 0
        self._ctx = atomic_path(self.path)
        self._tmp = self._ctx.__enter__()
        self._writer: pq.ParquetWriter | None = None
        self._schema: pa.Schema | None = None

    def write_query(self, mq: MeasuredQuery, geocodes: np.ndarray) -> None:
        """Append one query's answers for ``geocodes`` (rows of ``mq.values``) as a row group."""
        table = _nmf_table(mq, geocodes)
        if self._writer is None:
            self._schema = table.schema
            self._writer = pq.ParquetWriter(self._tmp, self._schema, compression="zstd")
        self._writer.write_table(table.cast(self._schema), row_group_size=max(table.num_rows, 1))
        self.rows += table.num_rows

    def write_chunk(self, chunk: MeasuredChunk) -> None:
        """Append every query of a chunk (one row group each)."""
        for mq in chunk.queries:
            self.write_query(mq, chunk.geocodes)

    def close(self) -> int:
        """Finish the file and move it into place; returns the number of rows."""
        if self._writer is not None:
            self._writer.close()
        else:
            pq.write_table(pa.table({c: pa.array([], pa.string()) for c in NMF_COLUMNS}), self._tmp)
        self._ctx.__exit__(None, None, None)
        return self.rows

    def abort(self) -> None:
        """Discard the partial file."""
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        with contextlib.suppress(RuntimeError, StopIteration):
            self._ctx.__exit__(RuntimeError, RuntimeError("aborted"), None)

    def __enter__(self) -> NMFWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def write_nmf(ms: MeasurementSet, path: str | Path) -> int:
    """Write an in-memory measurement set as a noisy measurement file; returns the row count."""
    with NMFWriter(path) as w:
        for mq in ms:
            li = ms.geolevels.index(mq.geolevel)
            w.write_query(mq, ms.geocodes[li])
    return w.rows


class NMFReader:
    """Chunked reads of a noisy measurement file: the :class:`~censusdp.measure.Measurements`
    protocol for the estimator.

    The row-group statistics of the file say which (geolevel, query) and which geocode
    range each row group holds; :meth:`read` reads only the row groups overlapping the
    requested units and checks each one (geocodes, cells and counts) before using it.
    A file whose row groups mix levels or queries (written by another tool) is read
    into memory whole instead.

    Raises:
        InputError: on a missing file or column, geocodes that are not units of the
            hierarchy, or a (geolevel, query) that does not cover every unit once.
    """

    def __init__(self, path: str | Path, schema: Schema, hierarchy: Hierarchy) -> None:
        self.path = Path(path)
        if not self.path.exists():
            raise InputError(f"{self.path}: missing file")
        self.schema = schema
        self.hierarchy = hierarchy
        self.geolevels = hierarchy.geolevels
        self.geocodes = hierarchy.geocodes
        self._pf = pq.ParquetFile(self.path)
        names = self._pf.schema_arrow.names
        missing = [c for c in NMF_COLUMNS[:6] if c not in names]
        if missing:
            raise InputError(f"{self.path}: missing columns {missing}")
        self._has_mech = "mechanism" in names
        self._fallback: MeasurementSet | None = None
        # (level, query) -> sorted [(u0, u1, row group)], plus query info
        self._groups: dict[tuple[int, str], list[tuple[int, int, int]]] = {}
        self._info: dict[tuple[int, str], tuple[np.ndarray, float, str]] = {}
        self._order: dict[int, list[str]] = {}
        if not self._index():
            self._fallback = read_nmf(self.path, schema, hierarchy)

    def _index(self) -> bool:
        md = self._pf.metadata
        col = {self._pf.schema_arrow.names[i]: i for i in range(len(self._pf.schema_arrow.names))}
        levels = {name: i for i, name in enumerate(self.geolevels.names)}
        for rg in range(md.num_row_groups):
            meta = md.row_group(rg)
            if meta.num_rows == 0:
                continue
            stats = {}
            for c in ("geolevel", "query", "geocode", "variance", "mechanism"):
                if c not in col:
                    continue
                st = meta.column(col[c]).statistics
                if st is None or not st.has_min_max:
                    return False
                stats[c] = (st.min, st.max)
            for c in ("geolevel", "query", "variance", "mechanism"):
                if c in stats and stats[c][0] != stats[c][1]:
                    return False
            level = levels.get(str(stats["geolevel"][0]))
            if level is None:
                raise InputError(
                    f"{self.path}: geolevel {stats['geolevel'][0]!r} is not a level of the "
                    f"release geography {list(self.geolevels.names)}"
                )
            codes = self.geocodes[level]
            lo, hi = str(stats["geocode"][0]), str(stats["geocode"][1])
            u0 = int(np.searchsorted(codes, lo))
            u1 = int(np.searchsorted(codes, hi)) + 1
            if u0 >= codes.size or codes[u0] != lo or u1 > codes.size or codes[u1 - 1] != hi:
                raise InputError(
                    f"{self.path}: geocodes {lo!r}..{hi!r} at {stats['geolevel'][0]} do not "
                    "match the release geography"
                )
            q = make_query(self.schema, str(stats["query"][0]))
            key = (level, q.name)
            if key not in self._info:
                rows = measured_rows(self.schema, q)
                mech = str(stats["mechanism"][0]) if "mechanism" in stats else "unknown"
                self._info[key] = (rows, float(stats["variance"][0]), mech)
                self._order.setdefault(level, []).append(q.name)
            elif self._info[key][1] != float(stats["variance"][0]):
                return False
            self._groups.setdefault(key, []).append((u0, u1, rg))
        for (level, qname), groups in self._groups.items():
            groups.sort()
            expect = 0
            for u0, u1, _ in groups:
                if u0 != expect:
                    raise InputError(
                        f"{self.path}: ({self.geolevels[level].name}, {qname}) does not cover "
                        f"units {expect}..{u0 - 1} exactly once"
                    )
                expect = u1
            if expect != self.hierarchy.n_units(level):
                raise InputError(
                    f"{self.path}: ({self.geolevels[level].name}, {qname}) covers {expect} of "
                    f"{self.hierarchy.n_units(level)} units"
                )
        return True

    def queries_at(self, level: int) -> list[str]:
        """Names of the queries measured at ``level``, in the file's (plan) order."""
        if self._fallback is not None:
            return [m.query for m in self._fallback.at_level(self.geolevels[level].name)]
        return list(self._order.get(level, []))

    def _read_group(self, level: int, qname: str, u0: int, u1: int, rg: int) -> np.ndarray:
        rows = self._info[(level, qname)][0]
        r = rows.size
        t = self._pf.read_row_group(rg, columns=["geocode", "cell", "value"])
        n = u1 - u0
        name = self.geolevels[level].name
        if t.num_rows != n * r:
            raise InputError(
                f"{self.path}: row group {rg} ({name}, {qname}) has {t.num_rows} values, "
                f"expected {n} units x {r} cells"
            )
        cells = t.column("cell").to_numpy().reshape(n, r)
        if not (cells == rows[None, :]).all():
            raise InputError(
                f"{self.path}: row group {rg} ({name}, {qname}) cells are not the measured "
                "cells of the query in order"
            )
        gc = t.column("geocode").combine_chunks()
        firsts = gc.take(pa.array(np.arange(0, n * r, max(r, 1), dtype=np.int64)))
        got = np.asarray(firsts.cast(pa.string()).to_numpy(zero_copy_only=False)).astype(str)
        if not np.array_equal(got, self.geocodes[level][u0:u1]):
            raise InputError(
                f"{self.path}: row group {rg} ({name}, {qname}) geocodes are not in geography order"
            )
        return t.column("value").to_numpy().reshape(n, r)

    def read(self, level: int, start: int, stop: int) -> list[MeasuredQuery]:
        """Measured queries of ``level`` (file order) with the values of units ``start:stop``."""
        if self._fallback is not None:
            return self._fallback.read(level, start, stop)
        out = []
        name = self.geolevels[level].name
        for qname in self._order.get(level, []):
            groups = self._groups[(level, qname)]
            rows, variance, mech = self._info[(level, qname)]
            i = max(0, bisect.bisect_right(groups, (start, np.inf, 0)) - 1)
            parts = []
            while i < len(groups) and groups[i][0] < stop:
                u0, u1, rg = groups[i]
                if u1 > start:
                    vals = self._read_group(level, qname, u0, u1, rg)
                    parts.append(vals[max(start, u0) - u0 : min(stop, u1) - u0])
                i += 1
            values = np.concatenate(parts, axis=0) if parts else np.zeros((0, rows.size), np.int64)
            out.append(MeasuredQuery(name, qname, rows, values, variance, mech))
        return out


def read_nmf(path: str | Path, schema: Schema, hierarchy: Hierarchy) -> MeasurementSet:
    """Read a noisy measurement file back into a :class:`MeasurementSet`.

    Raises:
        InputError: if a column is missing, a geocode is not a unit of the hierarchy,
            or a (geolevel, query) does not cover every unit of its level.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: missing file")
    pf = pq.ParquetFile(path)
    missing = [c for c in NMF_COLUMNS[:6] if c not in pf.schema_arrow.names]
    if missing:
        raise InputError(f"{path}: missing columns {missing}")
    table = pq.read_table(path)
    out = MeasurementSet(schema, hierarchy.geolevels, hierarchy.geocodes)
    gl = table.column("geolevel").to_numpy(zero_copy_only=False).astype(str)
    qu = table.column("query").to_numpy(zero_copy_only=False).astype(str)
    keys = np.char.add(np.char.add(gl, "\x1f"), qu)
    ukeys, first = np.unique(keys, return_index=True)
    for key in ukeys[np.argsort(first)]:
        level, qname = str(key).split("\x1f")
        li = hierarchy.geolevels.index(level)
        sel = np.flatnonzero(keys == key)
        codes = table.column("geocode").take(pa.array(sel)).to_numpy(zero_copy_only=False)
        codes = np.asarray(codes).astype(str)
        unit = np.searchsorted(hierarchy.geocodes[li], codes)
        unit = np.minimum(unit, hierarchy.n_units(li) - 1)
        if not np.array_equal(hierarchy.geocodes[li][unit], codes):
            raise InputError(f"{path}: geocodes at {level} do not match the release geography")
        cells = table.column("cell").take(pa.array(sel)).to_numpy().astype(np.int64)
        values = table.column("value").take(pa.array(sel)).to_numpy()
        variance = table.column("variance").take(pa.array(sel)).to_numpy()
        rows = np.unique(cells)
        n_units = hierarchy.n_units(li)
        if rows.size * n_units != sel.size:
            raise InputError(
                f"{path}: ({level}, {qname}) has {sel.size} values, expected "
                f"{n_units} units x {rows.size} cells"
            )
        mat = np.zeros((n_units, rows.size), dtype=values.dtype)
        mat[unit, np.searchsorted(rows, cells)] = values
        mech = "unknown"
        if "mechanism" in table.column_names:
            mech = str(table.column("mechanism")[int(sel[0])].as_py())
        q = make_query(schema, qname)
        out.queries[(level, q.name)] = MeasuredQuery(
            level, q.name, rows, mat, float(variance[0]), mech
        )
    return out


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
    geocode = _dict_strings(cols["block"].astype(np.int32), hierarchy.blocks).cast(pa.string())
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


class MDFPersonWriter:
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

    def __enter__(self) -> MDFPersonWriter:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


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
            "geocode": _dict_strings(block[order].astype(np.int32), hierarchy.blocks).cast(
                pa.string()
            ),
            "gqtype": pa.array(gqtype[order], pa.int64()),
            "occupied": pa.array(occupied_col[order], pa.bool_()),
        }
    )
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return table.num_rows
