"""The noisy measurement file (NMF): written as it is measured, read by the estimators.

``noisy_measurements.parquet``: ``geolevel``, ``geocode``, ``query``, ``cell`` (row
within the query), ``value``, ``variance`` (plus ``mechanism``), one row per noisy
answer. It is written as it is measured (:class:`NMFWriter`), one (geolevel, query)
of a chunk of whole families at a time, rows ordered by geocode then cell, in row
groups of at most :data:`ROW_GROUP_ROWS` rows cut at geounit boundaries (Parquet
writers cap a row group at 2^26 rows and would otherwise cut a geounit in two), so
:class:`NMFReader` can hand the estimator the measurements of any run of units by
reading only the row groups that hold them (found from the row-group statistics).
The reader accepts any split into row groups, even one that cuts a geounit.

A run writes the NMF as *part files*: ``noisy_measurements.parquet/`` is a directory
of ``part-00000.parquet``, ``part-00001.parquet``, ... (one per measurement task, each
written by the task itself with :func:`write_nmf_part`, so the driver never handles
the values) and a small index ``_parts.json`` (:func:`write_part_index`: every part's
level, unit range, rows and SHA-256). Every part has the layout of a single-file NMF,
and the parts together are one Parquet dataset (``pyarrow.dataset``, Spark and DuckDB
read the directory as one table; files starting with ``_`` or ``.`` are not data).
Every reader here takes either form (:func:`nmf_files`), so single-file releases
written before stay readable.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import time
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.data.geography import Hierarchy
from censusdp.data.measurements import MeasuredChunk, MeasuredQuery, MeasurementSet, measured_rows
from censusdp.data.queries import make_query
from censusdp.data.schema import Schema
from censusdp.errors import InputError
from censusdp.io import parts as _parts
from censusdp.io.atomic import StreamingWriter, atomic_path, fsync_file, sha256_of
from censusdp.io.columns import dictionary_strings
from censusdp.io.parts import PART_INDEX

__all__ = [
    "NMF_COLUMNS",
    "PART_INDEX",
    "ROW_GROUP_ROWS",
    "NMFReader",
    "NMFSlice",
    "NMFWriter",
    "decode_cells",
    "nmf_files",
    "nmf_geolevels",
    "part_name",
    "read_part_index",
    "read_geolevel",
    "read_nmf",
    "row_group_bounds",
    "write_nmf",
    "write_nmf_part",
    "write_part_index",
]

NMF_COLUMNS = ("geolevel", "geocode", "query", "cell", "value", "variance", "mechanism")

"""The noisy measurement file of each run of a release (the person run and the
housing-unit run), by its name in the run directory."""


ROW_GROUP_ROWS = 1 << 22
"""Most rows :class:`NMFWriter` puts in one row group (pyarrow's own cap is 2^26)."""

_ONE_VALUE_COLUMNS = ("geolevel", "query", "variance", "mechanism")

WRITE_OPTIONS: dict[str, Any] = {
    "compression": {c: "none" if c in _ONE_VALUE_COLUMNS else "zstd" for c in NMF_COLUMNS},
    "use_dictionary": ["geolevel", "geocode", "query", "value", "variance", "mechanism"],
    "column_encoding": {"cell": "DELTA_BINARY_PACKED"},
}
"""How :class:`NMFWriter` encodes the columns. ``cell`` ascends within each geounit (the
query's measured rows in order), so delta encoding stores it in a few bits a row, where
a dictionary of a ``ddp-2010`` query's 229,320 cells overflows and falls back to plain
int32: on a Delaware ``ddp-2010`` part this made the file 2.9x smaller (14.2 to 4.9
MB) and its writing 1.6x faster (``benchmarks/bench_nmf_write.py``). Every Parquet
reader (pyarrow, Spark, DuckDB) reads the standard ``DELTA_BINARY_PACKED`` encoding.

The columns with one value per row group (``geolevel``, ``query``, ``variance``,
``mechanism``: a one-entry dictionary and one run of its index) are not compressed:
zstd adds a frame and a compression context per page for nothing, which costs when
row groups are small (a spine's block groups change budget share every few units,
and each change starts a row group): a Wyoming block-group part with California's mix
of shares writes about 15% faster and 4% smaller, a block part the same
(``benchmarks/bench_measure.py``). Compression is chosen per column chunk in
Parquet, so every reader reads it."""


def part_name(index: int) -> str:
    """File name of the ``index``-th part (the measurement task's place in the plan)."""
    return _parts.part_name(index, ".parquet")


def nmf_files(path: str | Path) -> list[Path]:
    """The Parquet files of a noisy measurement file: itself, or the parts a directory's
    index lists (:func:`censusdp.io.parts.part_files`).

    Raises:
        InputError: for a missing path, a directory without an index or parts, or a
            listed part that is missing.
    """
    return _parts.part_files(path, ".parquet", "noisy measurement part")


def write_nmf_part(chunk: MeasuredChunk, path: str | Path) -> dict[str, Any]:
    """Write one measurement task's chunk as a part file; return its small record.

    Run by the task itself (on whichever executor): the part appears under its name
    only when complete, is flushed to disk, and the record (``file``, ``geolevel``,
    ``start``, ``stop``, ``rows``, ``sha256``, ``write_seconds``, ``write_cpu_seconds``)
    is all that goes back to the driver.
    """
    t, c = time.perf_counter(), time.process_time()
    path = Path(path)
    with NMFWriter(path) as w:
        w.write_chunk(chunk)
    fsync_file(path)
    return {
        "file": path.name,
        "geolevel": chunk.geolevel,
        "start": int(chunk.start),
        "stop": int(chunk.stop),
        "rows": int(w.rows),
        "sha256": sha256_of(path),
        "write_seconds": time.perf_counter() - t,
        "write_cpu_seconds": time.process_time() - c,
    }


_PART_FIELDS = ("file", "geolevel", "start", "stop", "rows", "sha256")


def write_part_index(directory: str | Path, parts: list[dict[str, Any]]) -> Path:
    """Write ``directory/_parts.json``: every part's record, in file order; return its path."""
    return _parts.write_part_index(directory, parts, _PART_FIELDS)


def read_part_index(directory: str | Path) -> dict[str, Any]:
    """The index of a partitioned NMF directory (:func:`censusdp.io.parts.read_part_index`).

    Raises:
        InputError: when it is missing, not JSON, or does not list the directory's parts.
    """
    return _parts.read_part_index(directory, ".parquet")


class _QueryColumns:
    """The columns of one query's answers, built once; :meth:`table` slices out the rows
    of one row group (unit-major, then measured cell).

    Slicing Arrow arrays copies nothing, so a row group costs a few array views instead
    of rebuilding its columns: a spine's block groups change budget share every few
    units, each change starts a row group, and a California block-group part has about
    5,000 of them (the file's bytes are the same either way).
    """

    def __init__(self, mq: MeasuredQuery, geocodes: np.ndarray, longest: int) -> None:
        self.mq = mq
        self.r = max(mq.rows.size, 1)
        units = mq.values.shape[0]
        self.unit = np.repeat(np.arange(units, dtype=np.int32), self.r)
        tiled = np.tile(mq.rows.astype(np.int32), units) if mq.rows.size else np.zeros(0)
        self.cells = pa.array(tiled, pa.int32())
        self.values = pa.array(mq.values.reshape(-1))
        self.codes = pa.array(np.asarray(geocodes)[:units], pa.string())
        zeros = np.zeros(longest, np.int32)
        self.constants = {
            name: dictionary_strings(zeros, np.array([text]))
            for name, text in (
                ("geolevel", mq.geolevel),
                ("query", mq.query),
                ("mechanism", mq.mechanism),
            )
        }
        self.longest = longest
        self._variances: dict[float, pa.Array] = {}

    def _variance(self, unit: np.ndarray, first: int, n: int) -> pa.Array:
        """The ``variance`` column: a slice of one constant column when the rows' units
        share one variance (always, as the writer cuts row groups), else built."""
        unit_var = None if self.mq.uniform else self.mq.unit_variances()
        v = float(self.mq.variance) if unit_var is None else float(unit_var[first])
        if n and (unit_var is None or (unit_var[first : first + int(unit[-1]) + 1] == v).all()):
            col = self._variances.get(v)
            if col is None:
                col = self._variances[v] = pa.array(np.full(self.longest, v, dtype=np.float64))
            return col.slice(0, n)
        return pa.array(_row_variances(self.mq, unit, first))

    def table(self, a: int, b: int) -> pa.Table:
        """Rows ``a:b`` of the query's answers flattened."""
        n = b - a
        if n > self.longest:
            raise ValueError(f"row group of {n} rows, longer than {self.longest}")
        first = a // self.r
        last = (b - 1) // self.r + 1 if n else first
        unit = self.unit[a:b] - np.int32(first)
        const = self.constants
        return pa.table(
            {
                "geolevel": const["geolevel"].slice(0, n),
                "geocode": pa.DictionaryArray.from_arrays(
                    pa.array(unit, pa.int32()), self.codes.slice(first, last - first)
                ),
                "query": const["query"].slice(0, n),
                "cell": self.cells.slice(a, n),
                "value": self.values.slice(a, n),
                "variance": self._variance(unit, first, n),
                "mechanism": const["mechanism"].slice(0, n),
            }
        )


def _row_variances(mq: MeasuredQuery, unit: np.ndarray, first: int = 0) -> np.ndarray:
    """The ``variance`` column of rows of units ``first + unit``: each unit's own variance."""
    if mq.uniform:
        return np.full(unit.size, float(mq.variance), dtype=np.float64)
    return mq.unit_variances()[unit.astype(np.int64) + first]


def _measured_runs(mq: MeasuredQuery) -> list[tuple[int, int]]:
    """``[start, stop)`` runs of consecutive measured units with one variance each.

    Units that were not measured (variance ``inf``: bypassed) get no rows; a row group
    never mixes variances, so the reader finds each unit's variance in the footer.
    """
    n = mq.values.shape[0]
    if mq.uniform:
        return [(0, n)] if n else []
    var = mq.unit_variances()
    cut = np.flatnonzero(var[1:] != var[:-1]) + 1
    starts = np.r_[0, cut]
    stops = np.r_[cut, n]
    return [(int(a), int(b)) for a, b in zip(starts, stops, strict=True) if np.isfinite(var[a])]


def row_group_bounds(n_units: int, n_rows: int, cap: int) -> list[tuple[int, int]]:
    """Flat row ranges ``[(a, b), ...]`` of the row groups for ``n_units`` x ``n_rows`` answers.

    Whole geounits, as many as fit in ``cap`` rows; a geounit with more than ``cap`` rows
    alone is cut into pieces of ``cap`` rows (the reader accepts that too).
    """
    if cap < 1:
        raise ValueError(f"row-group cap must be at least 1 row, got {cap}")
    total = n_units * n_rows
    if n_rows <= cap:
        step = (cap // max(n_rows, 1)) * max(n_rows, 1)
        return [(a, min(a + step, total)) for a in range(0, total, step)]
    out = []
    for u in range(n_units):
        base = u * n_rows
        out.extend((base + a, base + min(a + cap, n_rows)) for a in range(0, n_rows, cap))
    return out


class NMFWriter(StreamingWriter):
    """Append :class:`~censusdp.data.measurements.MeasuredChunk` s to a noisy measurement file.

    The file appears under its final name only when :meth:`close` succeeds (it is
    written to a temporary file next to it); use it as a context manager so that an
    error removes the temporary file.
    """

    def __init__(self, path: str | Path, *, row_group_rows: int = ROW_GROUP_ROWS) -> None:
        if row_group_rows < 1:
            raise ValueError(f"row_group_rows must be at least 1, got {row_group_rows}")
        self.path = Path(path)
        self.rows = 0
        self.row_group_rows = row_group_rows
        self._ctx = atomic_path(self.path)
        self._tmp = self._ctx.__enter__()
        self._writer: pq.ParquetWriter | None = None
        self._schema: pa.Schema | None = None

    def write_query(self, mq: MeasuredQuery, geocodes: np.ndarray) -> None:
        """Append one query's answers for ``geocodes`` (rows of ``mq.values``).

        Written in row groups of whole geounits of at most ``row_group_rows`` rows each
        (:func:`row_group_bounds`), built one row group at a time.
        """
        r = mq.rows.size
        groups = [
            (u0 * r + a, u0 * r + b)
            for u0, u1 in _measured_runs(mq)
            for a, b in row_group_bounds(u1 - u0, r, self.row_group_rows)
        ]
        if not groups:
            return
        columns = _QueryColumns(mq, geocodes, max(b - a for a, b in groups))
        for a, b in groups:
            table = columns.table(a, b)
            if self._writer is None:
                self._schema = table.schema
                self._writer = pq.ParquetWriter(self._tmp, self._schema, **WRITE_OPTIONS)
            if not table.schema.equals(self._schema):
                table = table.cast(self._schema)
            self._writer.write_table(table, row_group_size=max(b - a, 1))
            self.rows += table.num_rows

    def write_chunk(self, chunk: MeasuredChunk) -> None:
        """Append every query of a chunk."""
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


def write_nmf(ms: MeasurementSet, path: str | Path) -> int:
    """Write an in-memory measurement set as a noisy measurement file; returns the row count."""
    with NMFWriter(path) as w:
        for mq in ms:
            li = ms.geolevels.index(mq.geolevel)
            w.write_query(mq, ms.geocodes[li])
    return w.rows


class NMFReader:
    """Chunked reads of a noisy measurement file: the :class:`~censusdp.data.measurements.Measurements`
    protocol for the estimator.

    The row-group statistics of the file say which (geolevel, query) and which geocode
    range each row group holds; the row counts in the footer, taken in geocode then
    file order, say which rows of the (units x measured cells) answers each holds, so
    any split is accepted, even one cutting a geounit. :meth:`read` reads only the row
    groups overlapping the requested units and checks each one (geocodes, cells and
    counts) before using it.
    A file whose row groups mix levels or queries (written by another tool) is read
    into memory whole instead.

    Raises:
        InputError: on a missing file or column, geocodes that are not units of the
            hierarchy, or a (geolevel, query) that does not cover every unit once.
    """

    def __init__(self, path: str | Path, schema: Schema, hierarchy: Hierarchy) -> None:
        self.path = Path(path)
        self._files = nmf_files(self.path)
        self.schema = schema
        self.hierarchy = hierarchy
        self.geolevels = hierarchy.geolevels
        self.geocodes = hierarchy.geocodes
        # footers only: a partitioned NMF of thousands of parts keeps no file open
        self._meta = [pq.read_metadata(f) for f in self._files]
        has_mech = True
        for f, md in zip(self._files, self._meta, strict=True):
            names = md.schema.to_arrow_schema().names
            missing = [c for c in NMF_COLUMNS[:6] if c not in names]
            if missing:
                raise InputError(f"{f}: missing columns {missing}")
            has_mech = has_mech and "mechanism" in names
        self._has_mech = has_mech
        self._fallback: MeasurementSet | None = None
        # (level, query) -> [(u0, u1, (file, row group), rows)] sorted,
        # then -> [(first row, (file, row group), rows)]
        Loc = tuple[int, int]
        self._groups: dict[tuple[int, str], list[tuple[int, int, Loc, int, float]]] = {}
        self._spans: dict[tuple[int, str], list[tuple[int, Loc, int]]] = {}
        self._info: dict[tuple[int, str], tuple[np.ndarray, float, str]] = {}
        self._unit_var: dict[tuple[int, str], np.ndarray] = {}
        self._order: dict[int, list[str]] = {}
        self._queries: dict[str, Any] = {}
        if not self._index():
            self._fallback = read_nmf(self.path, schema, hierarchy)

    def _where(self, loc: tuple[int, int]) -> str:
        """``row group N`` (one file) or ``part-00003.parquet row group N``."""
        fi, rg = loc
        return (
            f"row group {rg}" if len(self._files) == 1 else f"{self._files[fi].name} row group {rg}"
        )

    def _index(self) -> bool:
        levels = {name: i for i, name in enumerate(self.geolevels.names)}
        for fi, md in enumerate(self._meta):
            names = md.schema.to_arrow_schema().names
            col = {names[i]: i for i in range(len(names))}
            if not self._index_file(fi, md, col, levels):
                return False
        for key, groups in self._groups.items():
            self._spans[key] = self._cover(key, sorted(groups))
        return True

    def _index_file(self, fi: int, md: Any, col: dict[str, int], levels: dict[str, int]) -> bool:
        """Index the row groups of file ``fi`` from their statistics (``False``: mixed)."""
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
            qname = str(stats["query"][0])
            q = self._queries.get(qname)
            if q is None:  # one per query: a ddp-2010 NMF has thousands of row groups
                q = self._queries[qname] = make_query(self.schema, qname)
            key = (level, q.name)
            if key not in self._info:
                rows = measured_rows(self.schema, q)
                mech = str(stats["mechanism"][0]) if "mechanism" in stats else "unknown"
                self._info[key] = (rows, float(stats["variance"][0]), mech)
                self._order.setdefault(level, []).append(q.name)
            var = float(stats["variance"][0])
            self._groups.setdefault(key, []).append((u0, u1, (fi, rg), meta.num_rows, var))
        return True

    def _cover(
        self, key: tuple[int, str], groups: list[tuple[int, int, tuple[int, int], int, float]]
    ) -> list[tuple[int, tuple[int, int], int]]:
        """Row offsets of the row groups of ``key``; checks they tile every measured unit
        once, and records each unit's variance (``inf`` for a unit with no rows: not
        measured, a bypassed spine geounit; :meth:`read` gives it zeros). Only a single
        child may have no rows."""
        level, qname = key
        r = self._info[key][0].size
        where = f"{self.path}: ({self.geolevels[level].name}, {qname})"
        n_units = self.hierarchy.n_units(level)
        unit_var = np.full(n_units, np.inf)
        single = self._single_children(level)
        spans, off = [], 0
        for u0, u1, rg, n, var in groups:
            if off % max(r, 1) == 0 and u0 * r > off and single[off // r : u0].all():
                off = u0 * r  # units before u0 have no rows: bypassed single children
            first, last = off // r, (off + n - 1) // r
            if first != u0 or last != u1 - 1:
                lo, hi = (off // r, u0 - 1) if u0 > first else (u0, u1 - 1)
                raise InputError(
                    f"{where} does not cover units {lo}..{hi} exactly once "
                    f"({self._where(rg)} holds units {u0}..{u1 - 1} at row {off} of {r} per unit)"
                )
            if (
                np.isfinite(unit_var[u0:u1]).any()
                and (unit_var[u0:u1][np.isfinite(unit_var[u0:u1])] != var).any()
            ):
                raise InputError(f"{where} unit {u0} has rows with different variances")
            unit_var[u0:u1] = var
            spans.append((off, rg, n))
            off += n
        if off % max(r, 1) == 0 and off < n_units * r and single[off // r :].all():
            off = n_units * r  # the last units are bypassed single children
        if off != n_units * r:
            raise InputError(
                f"{where} covers {off // r if r else 0} of {n_units} units "
                f"({off} of {n_units * r} values)"
            )
        self._unit_var[key] = unit_var
        return spans

    def _single_children(self, level: int) -> np.ndarray:
        """Units of ``level`` that are their parent's only child: the only units a spine
        release may leave without rows (bypassed; ``censusdp validate`` checks which)."""
        if level == 0:
            return np.zeros(self.hierarchy.n_units(0), dtype=bool)
        ptr = self.hierarchy.child_ptr[level - 1]
        return (np.diff(ptr) == 1)[self.hierarchy.parent[level]]

    def unit_variances(self, level: int, query: str) -> np.ndarray:
        """``(units,)`` noise variance of each unit's answers to ``query`` at ``level``
        (``inf``: not measured, a bypassed spine geounit), from the file's footer."""
        if self._fallback is not None:
            name = self.geolevels[level].name
            for m in self._fallback.at_level(name):
                if m.query == query:
                    return m.unit_variances()
            raise InputError(f"{self.path}: no query {query!r} at {name}")
        key = (level, make_query(self.schema, query).name)
        if key not in self._unit_var:
            raise InputError(f"{self.path}: no query {query!r} at {self.geolevels[level].name}")
        return self._unit_var[key].copy()

    def queries_at(self, level: int) -> list[str]:
        """Names of the queries measured at ``level``, in the file's (plan) order."""
        if self._fallback is not None:
            return [m.query for m in self._fallback.at_level(self.geolevels[level].name)]
        return list(self._order.get(level, []))

    def detach(self, level: int, start: int, stop: int) -> NMFSlice:
        """Units ``start:stop`` of ``level`` as an :class:`NMFSlice`: the row groups that
        hold them, read where the slice is sent (a TopDown task reads its own family)."""
        if self._fallback is not None:
            raise InputError(f"{self.path}: row groups mix levels or queries; read it whole")
        queries = []
        lo, hi = start, stop
        for qname in self._order.get(level, []):
            spans = self._spans[(level, qname)]
            rows, variance, mech = self._info[(level, qname)]
            r = max(rows.size, 1)
            a, b = start * r, stop * r
            i = max(0, bisect.bisect_right(spans, (a, (np.inf, 0), 0)) - 1)
            mine = []
            while i < len(spans) and spans[i][0] < b:
                off, (fi, rg), n = spans[i]
                if off + n > a:
                    mine.append((off, str(self._files[fi]), rg, n))
                    lo, hi = min(lo, off // r), max(hi, (off + n - 1) // r + 1)
                i += 1
            unit_var = self._unit_var[(level, qname)][start:stop].copy()
            queries.append((qname, mech, variance, unit_var, tuple(mine)))
        return NMFSlice(
            str(self.path),
            self.schema,
            self.geolevels,
            level,
            start,
            stop,
            lo,
            self.geocodes[level][lo:hi].copy(),
            tuple(queries),
        )

    def read(
        self, level: int, start: int, stop: int, queries: Collection[str] | None = None
    ) -> list[MeasuredQuery]:
        """Measured queries of ``level`` (file order) with the values of units ``start:stop``;
        only those named in ``queries`` when given (the others' row groups are not read).
        The units' :meth:`detach` slice, read here."""
        if self._fallback is not None:
            return self._fallback.read(level, start, stop, queries)
        return self.detach(level, start, stop).read(level, start, stop, queries)


GROUP_CACHE_BYTES = 64 << 20
"""Most bytes of row-group values one process keeps (:class:`_GroupCache`): twice the
largest row group's values (:data:`ROW_GROUP_ROWS` int64), so a family's row groups of
every query stay while the next family is read (full Wyoming's block level: 48 MB was
enough, 32 MB read 2.5 times as many row groups)."""

GROUP_CACHE_FILES = 8
"""Most Parquet files one process keeps open (footers parsed) for reading values."""


class _GroupCache:
    """The checked values of the row groups this process read last, and its open files.

    A TopDown task reads its own family (:class:`NMFSlice`), and the families of a level
    are small next to a row group (a ``pl94`` block-group family of 30 blocks is 60,000
    of a row group's up to 4 million values), so without a cache every family re-read
    and re-checked the whole row groups it touches: on full Wyoming the block level read
    each row group about 50 times. Consecutive tasks of a level run in the same worker
    often enough (batches, pool order) that keeping the last row groups' values (at
    most :data:`GROUP_CACHE_BYTES`) turns that into about one read per worker.

    An entry is keyed by the file's identity on disk (path, inode, size, modification
    time: a file rewritten in place is a new entry), the row group and the layout the
    check assumed (first flat row, rows, the query's measured rows). What the geocode
    check needs is kept with the values, so a hit is checked against the caller's
    geocodes as a read is.
    """

    def __init__(self, max_bytes: int, max_files: int) -> None:
        self.max_bytes, self.max_files = max_bytes, max_files
        self._groups: OrderedDict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = OrderedDict()
        self._files: OrderedDict[tuple, pq.ParquetFile] = OrderedDict()
        self._bytes = 0
        self.hits = self.misses = 0

    @staticmethod
    def identity(path: str | Path) -> tuple:
        st = os.stat(path)
        return (str(path), st.st_ino, st.st_size, st.st_mtime_ns)

    def file(self, ident: tuple) -> pq.ParquetFile:
        pf = self._files.get(ident)
        if pf is None:
            pf = self._files[ident] = pq.ParquetFile(ident[0])
            while len(self._files) > self.max_files:
                self._files.popitem(last=False)
        else:
            self._files.move_to_end(ident)
        return pf

    def get(self, key: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        hit = self._groups.get(key)
        if hit is None:
            self.misses += 1
            return None
        self.hits += 1
        self._groups.move_to_end(key)
        return hit

    def put(self, key: tuple, entry: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
        size = sum(a.nbytes for a in entry)
        if size > self.max_bytes:
            return
        self._groups[key] = entry
        self._bytes += size
        while self._bytes > self.max_bytes:
            _, old = self._groups.popitem(last=False)
            self._bytes -= sum(a.nbytes for a in old)

    def clear(self) -> None:
        self._groups.clear()
        self._files.clear()
        self._bytes = 0


_CACHE = _GroupCache(GROUP_CACHE_BYTES, GROUP_CACHE_FILES)


def _read_values(
    path: str | Path,
    rg: int,
    rows: np.ndarray,
    off: int,
    n: int,
    codes: np.ndarray,
    first: int,
    where: str,
) -> np.ndarray:
    """Values of row group ``rg`` of the file at ``path``: flat rows ``off:off+n`` of a
    query's (units x ``rows``) answers, checked (row count, cells in order, the geocode
    of every unit starting in it: ``codes[unit - first]``); through the process's
    :class:`_GroupCache`. The values are shared with the cache: do not write to them."""
    r = rows.size
    ident = _CACHE.identity(path)
    key = (*ident, rg, off, n, r, int(rows[0]) if r else -1, int(rows.sum()))
    entry = _CACHE.get(key)
    if entry is None:
        entry = _read_group(_CACHE.file(ident), rg, rows, off, n, where)
        _CACHE.put(key, entry)
    values, at, got = entry
    if not np.array_equal(got, codes[(off + at) // r - first]):
        raise InputError(f"{where} geocodes are not in geography order")
    return values


def _read_group(
    pf: pq.ParquetFile, rg: int, rows: np.ndarray, off: int, n: int, where: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row group ``rg`` read and its cells checked: its values, the offsets of the rows
    that name a unit (the group's first and every unit starting in it) and their geocodes."""
    r = rows.size
    t = pf.read_row_group(rg, columns=["geocode", "cell", "value"])
    if t.num_rows != n:
        raise InputError(f"{where} has {t.num_rows} values, its footer says {n}")
    cells = t.column("cell").to_numpy()
    if not _cells_in_order(cells, rows, off):
        raise InputError(f"{where} cells are not the measured cells of the query in order")
    at = np.unique(np.r_[0, np.arange((-off) % r, n, r)]) if n else np.zeros(0, np.int64)
    gc = t.column("geocode").combine_chunks()
    firsts = gc.take(pa.array(at))
    got = np.asarray(firsts.cast(pa.string()).to_numpy(zero_copy_only=False)).astype(str)
    values = t.column("value").to_numpy()
    values.flags.writeable = False
    return values, at, got


_ROWS: dict[tuple[str, int, str], np.ndarray] = {}


def _measured(schema: Schema, query: str) -> np.ndarray:
    """The measured rows of ``query`` (cached per process: a slice carries names only)."""
    key = (schema.name, schema.size, query)
    if key not in _ROWS:
        _ROWS[key] = measured_rows(schema, make_query(schema, query))
    return _ROWS[key]


@dataclass(frozen=True, eq=False)
class NMFSlice:
    """Units ``start:stop`` of one level of an NMF, readable wherever its files are.

    What :meth:`NMFReader.detach` hands a TopDown task so that the task reads its own
    family in the worker that solves it, instead of the driver reading every family
    one after another (the ``ddp-2010`` block level of full Delaware is 5.5 billion
    values). It holds the row-group locations (file, group, first flat row, rows) per
    query, the units' variances and the geocodes the checks need; no values, no footer
    index. :meth:`NMFReader.read` itself reads through a slice of the units asked for,
    so the driver and the tasks read with the same code and the same checks.
    """

    path: str
    schema: Schema
    geolevels: Any
    level: int
    start: int
    stop: int
    first: int
    codes: np.ndarray
    queries: tuple

    def read(
        self, level: int, start: int, stop: int, queries: Collection[str] | None = None
    ) -> list[MeasuredQuery]:
        """Measured queries of the slice's level with the values of units ``start:stop``."""
        if level != self.level or not self.start <= start <= stop <= self.stop:
            raise InputError(
                f"{self.path}: units {start}..{stop} of level {level} are outside the slice "
                f"({self.start}..{self.stop} of level {self.level})"
            )
        name = self.geolevels[level].name
        out = []
        for qname, mech, variance, unit_var, spans in self.queries:
            if queries is not None and qname not in queries:
                continue
            rows = _measured(self.schema, qname)
            r = rows.size
            a, b = start * r, stop * r
            flat = np.zeros(b - a, dtype=np.int64)
            for off, file, rg, n in spans:
                if off + n <= a or off >= b or a >= b:
                    continue
                part = "" if file == self.path else f"{Path(file).name} "
                where = f"{self.path}: {part}row group {rg} ({name}, {qname})"
                vals = _read_values(file, rg, rows, off, n, self.codes, self.first, where)
                lo, hi = max(a, off), min(b, off + n)
                flat[lo - a : hi - a] = vals[lo - off : hi - off]
            uv = unit_var[start - self.start : stop - self.start]
            values = flat.reshape(max(stop - start, 0), r)
            out.append(MeasuredQuery(name, qname, rows, values, _variance(uv, variance), mech))
        return out


def _cells_in_order(cells: np.ndarray, rows: np.ndarray, off: int) -> bool:
    """Whether ``cells`` are flat rows ``off:off + cells.size`` of the (units x ``rows``)
    answers' cells: ``rows`` repeated unit after unit, starting ``off % rows.size`` in."""
    r, n = rows.size, cells.size
    if r == 0:
        return n == 0
    skip = off % r
    head = min(n, (r - skip) % r)  # the rest of a unit begun in an earlier row group
    if head and not np.array_equal(cells[:head], rows[skip : skip + head]):
        return False
    whole = (n - head) // r * r
    body = cells[head : head + whole].reshape(-1, r)
    if body.size and not (body == rows).all():
        return False
    tail = cells[head + whole :]
    return bool(np.array_equal(tail, rows[: tail.size]))


def _variance(unit_var: np.ndarray, first: float) -> float | np.ndarray:
    """One float when every unit has the same finite variance, else the per-unit array."""
    if unit_var.size and np.isfinite(unit_var).all() and (unit_var == unit_var[0]).all():
        return float(unit_var[0])
    if unit_var.size == 0:
        return float(first)
    return unit_var


def read_nmf(path: str | Path, schema: Schema, hierarchy: Hierarchy) -> MeasurementSet:
    """Read a noisy measurement file back into a :class:`MeasurementSet`.

    Raises:
        InputError: if a column is missing, a geocode is not a unit of the hierarchy,
            or a (geolevel, query) does not cover every unit of its level.
    """
    path = Path(path)
    tables = []
    for f in nmf_files(path):
        t = pq.read_table(f)
        missing = [c for c in NMF_COLUMNS[:6] if c not in t.column_names]
        if missing:
            raise InputError(f"{f}: missing columns {missing}")
        tables.append(t)
    table = (
        tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="permissive")
    )
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
        per_unit = np.bincount(unit, minlength=n_units)
        lone = np.zeros(n_units, dtype=bool)
        if li > 0:  # only a single child may be left unmeasured (bypassed)
            lone = (np.diff(hierarchy.child_ptr[li - 1]) == 1)[hierarchy.parent[li]]
        if ((per_unit != 0) & (per_unit != rows.size)).any() or ((per_unit == 0) & ~lone).any():
            raise InputError(
                f"{path}: ({level}, {qname}) has {sel.size} values, expected "
                f"{rows.size} cells at each of its measured units"
            )
        mat = np.zeros((n_units, rows.size), dtype=values.dtype)
        mat[unit, np.searchsorted(rows, cells)] = values
        unit_var = np.full(n_units, np.inf)
        unit_var[unit] = variance
        mech = "unknown"
        if "mechanism" in table.column_names:
            mech = str(table.column("mechanism")[int(sel[0])].as_py())
        q = make_query(schema, qname)
        out.queries[(level, q.name)] = MeasuredQuery(
            level, q.name, rows, mat, _variance(unit_var, float(variance[0])), mech
        )
    return out


# -- reading for people: one geolevel, decoded cells -------------------------------------


def _level_row_groups(pf: pq.ParquetFile) -> dict[str, list[int]] | None:
    """Row groups of each geolevel from the statistics; ``None`` if a group mixes levels."""
    names = pf.schema_arrow.names
    md, col = pf.metadata, names.index("geolevel")
    groups: dict[str, list[int]] = {}
    for rg in range(md.num_row_groups):
        if md.row_group(rg).num_rows == 0:
            continue
        st = md.row_group(rg).column(col).statistics
        if st is None or not st.has_min_max or st.min != st.max:
            return None
        groups.setdefault(str(st.min), []).append(rg)
    return groups


def _open_levels(
    path: str | Path,
) -> tuple[Path, pq.ParquetFile | None, dict[str, list[int]] | None]:
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: missing file")
    if not p.is_file():
        return p, None, None
    pf = pq.ParquetFile(p)
    if "geolevel" not in pf.schema_arrow.names:
        raise InputError(f"{p}: missing column 'geolevel'")
    return p, pf, _level_row_groups(pf)


def _parts_by_level(p: Path) -> dict[str, list[Path]] | None:
    """A part directory's files by geolevel, from its index (``None``: no usable index)."""
    if not p.is_dir() or not (p / PART_INDEX).is_file():
        return None
    try:
        index = read_part_index(p)
    except InputError:
        return None
    out: dict[str, list[Path]] = {}
    for rec in index["parts"]:
        if "geolevel" not in rec:  # an index that does not say: the parts are filtered
            return None
        out.setdefault(str(rec["geolevel"]), []).append(p / str(rec["file"]))
    return out


def nmf_geolevels(path: str | Path) -> list[str]:
    """The geolevels present in a noisy measurement file (or partitioned directory).

    Read from the row-group statistics when every row group holds one geolevel (files
    written by :class:`NMFWriter`), so no data page is read; otherwise from the
    ``geolevel`` column.

    Raises:
        InputError: if the path is missing or has no ``geolevel`` column.
    """
    import pyarrow.compute as pc

    p, _, groups = _open_levels(path)
    if groups is not None:
        return list(groups)
    by_level = _parts_by_level(p)
    if by_level is not None:
        return list(by_level)
    table = _parts.read_parts(p, what="noisy measurement part", columns=["geolevel"])
    return [str(v) for v in pc.unique(table.column("geolevel").cast(pa.string())).to_pylist()]


_BYPASSED = (
    " (on a spine release a geolevel whose every geounit is a single child, bypassed, has no rows)"
)


def read_geolevel(path: str | Path, geolevel: str, *, columns: list[str] | None = None) -> pa.Table:
    """The noisy measurements of one geolevel, reading only the row groups that hold it.

    The file is written one row group per (geolevel, chunk, query) with min/max
    statistics, so the row groups of a level are found from the file footer and only
    they are read; in a directory of parts, only the level's parts (found from its
    ``_parts.json``; never a file it does not list). A file whose row groups mix
    levels, or a directory whose index does not give each part's level, is read with a
    ``geolevel`` filter instead; a directory without an index is not read at all.
    Strings come back dictionary-encoded, as stored. With pandas::

        from censusdp.io.nmf import decode_cells, read_geolevel
        counties = decode_cells(read_geolevel("RUN/noisy_measurements.parquet", "County"))
        df = counties.to_pandas()

    Args:
        path: ``noisy_measurements.parquet`` (file or dataset directory).
        geolevel: a geolevel name of the release (``"County"``).
        columns: columns to read (default: all).

    Raises:
        InputError: if the path is missing or ``geolevel`` is not in it.
    """
    p, pf, groups = _open_levels(path)
    if pf is not None and groups is not None:
        if geolevel not in groups:
            raise InputError(
                f"{p}: no geolevel {geolevel!r}; its geolevels are {list(groups)}{_BYPASSED}"
            )
        return pf.read_row_groups(groups[geolevel], columns=columns)
    by_level = _parts_by_level(p)
    if by_level is not None:  # a part directory: only the level's parts are opened
        if geolevel not in by_level:
            raise InputError(f"{p}: no geolevel {geolevel!r}; its geolevels are {list(by_level)}")
        return pa.concat_tables([pq.read_table(f, columns=columns) for f in by_level[geolevel]])
    table = _parts.read_parts(
        p, what="noisy measurement part", columns=columns, filters=[("geolevel", "=", geolevel)]
    )
    if table.num_rows == 0:
        raise InputError(
            f"{p}: no geolevel {geolevel!r}; its geolevels are {nmf_geolevels(p)}{_BYPASSED}"
        )
    return table


def decode_cells(table: pa.Table, schema: Schema | str = "pl94") -> pa.Table:
    """``table`` with one column per attribute a query groups by, holding its level label.

    A noisy measurement's ``cell`` is its row in its query's answer: the row-major index
    over the levels of the query's variables (:class:`censusdp.data.queries.Query`).
    For ``votingage*hispanic*cenrace`` cell 65 is (18 years and over, Not Hispanic or
    Latino, ...). This adds a dictionary-encoded string column per variable of any query
    in the table (``hhgq``, ``votingage``, ``hispanic``, ``cenrace``, recodes such as
    ``hhinstlevels``) with the level of each row, null where the row's query sums over
    that variable (``total`` is null in every one).

    Args:
        table: noisy measurements with ``query`` and ``cell`` columns.
        schema: the schema of the measurements (``"pl94"`` for persons, ``"units"``
            for the unit file, or a :class:`~censusdp.data.schema.Schema`).

    Raises:
        InputError: if ``query`` or ``cell`` is missing or a cell is out of range.
        SchemaError: for a query name the schema does not know.
    """
    from censusdp.data.schema import get_schema

    sch = get_schema(schema) if isinstance(schema, str) else schema
    missing = [c for c in ("query", "cell") if c not in table.column_names]
    if missing:
        raise InputError(f"noisy measurements lack columns {missing}")
    import pyarrow.compute as pc

    encoded = pc.dictionary_encode(table.column("query").cast(pa.string())).combine_chunks()
    inverse = encoded.indices.to_numpy(zero_copy_only=False)
    cells = table.column("cell").to_numpy().astype(np.int64)
    index: dict[str, np.ndarray] = {}
    order = np.argsort(inverse, kind="stable")
    bounds = np.concatenate(
        [[0], np.cumsum(np.bincount(inverse, minlength=len(encoded.dictionary)))]
    )
    for qi, qname in enumerate(encoded.dictionary.to_pylist()):
        q = make_query(sch, qname)
        sel = order[bounds[qi] : bounds[qi + 1]]
        c = cells[sel]
        if c.size and (c.min() < 0 or c.max() >= q.n_rows):
            raise InputError(
                f"query {q.name!r} has cells 0..{q.n_rows - 1}; the table has cell "
                f"{int(c.max()) if c.max() >= q.n_rows else int(c.min())}"
            )
        levels = np.unravel_index(c, q.shape) if q.variables else ()
        for var, lv in zip(q.variables, levels, strict=True):
            idx = index.setdefault(var, np.full(table.num_rows, -1, dtype=np.int32))
            idx[sel] = lv
    order = [v for v in (*sch.attribute_names, *sorted(index)) if v in index]
    out = table
    for var in dict.fromkeys(order):
        if var in out.column_names:
            raise InputError(f"noisy measurements already have a column {var!r}")
        idx = index[var]
        arr = pa.DictionaryArray.from_arrays(
            pa.array(idx, mask=idx < 0), pa.array(list(sch.variable_levels(var)), pa.string())
        )
        out = out.append_column(var, arr)
    return out
