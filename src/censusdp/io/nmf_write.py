"""Writing the noisy measurement file (NMF) as it is measured.

It is written as it is measured (:class:`NMFWriter`), one (geolevel, query) of a chunk
of whole families at a time, rows ordered by geocode then cell, in row groups of at
most :data:`ROW_GROUP_ROWS` rows cut at geounit boundaries (Parquet writers cap a row
group at 2^26 rows and would otherwise cut a geounit in two), so
:class:`censusdp.io.nmf_read.NMFReader` can hand the estimator the measurements of
any run of units by reading only the row groups that hold them (found from the
row-group statistics). A run's measurement tasks each write their own part
(:func:`write_nmf_part`; the part layout is :mod:`censusdp.io.nmf_files`).
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.data.measurements import MeasuredChunk, MeasuredQuery, MeasurementSet
from censusdp.io.atomic import StreamingWriter, atomic_path, fsync_file, sha256_of
from censusdp.io.nmf_files import NMF_COLUMNS, STRUCTURAL_ZEROS_KEY, STRUCTURAL_ZEROS_MEASURED

__all__ = [
    "NMF_SCHEMA",
    "ROW_GROUP_ROWS",
    "WRITE_OPTIONS",
    "NMFWriter",
    "row_group_bounds",
    "write_nmf",
    "write_nmf_part",
]

ROW_GROUP_ROWS = 1 << 22
"""Most rows :class:`NMFWriter` puts in one row group (pyarrow's own cap is 2^26)."""

_ONE_VALUE_COLUMNS = ("geolevel", "query", "variance", "mechanism")

_UNCOMPRESSED = (*_ONE_VALUE_COLUMNS, "value")

WRITE_OPTIONS: dict[str, Any] = {
    "compression": {c: "none" if c in _UNCOMPRESSED else "zstd" for c in NMF_COLUMNS},
    "use_dictionary": ["geolevel", "geocode", "query", "variance", "mechanism"],
    "column_encoding": {"cell": "DELTA_BINARY_PACKED", "value": "DELTA_BINARY_PACKED"},
    "write_statistics": [c for c in NMF_COLUMNS if c != "cell"],
    "write_batch_size": 1 << 16,
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
Parquet, so every reader reads it.

A ``ddp-2010`` block has 337,680 person and 150,984 household values, nearly all noise
about zero, so the writer's CPU per value decides how long a state takes to measure
(``benchmarks/bench_hh_measure.py``, which compares these options with the previous
ones). ``value`` is delta-encoded and not compressed: a dictionary of the noisy values
(about a thousand at a block) cost a hash lookup per value, and zstd then won 6% of
the bytes; delta encoding bit-packs the differences (about 10 bits a value) for 2% more
bytes than before. The writer encodes in batches of 2^16 rows instead of pyarrow's
1,024, each batch's fixed costs (levels, statistics, page checks) paid 64 times less
often. Every column but ``cell`` has statistics: the readers find a row group's level,
query, geocodes, variance and mechanism in its footer
(:class:`censusdp.io.nmf_read.NMFReader`), the self-check settles ``value`` and the
one-value columns there, and nothing reads the statistics of ``cell``. With the columns
declared non-null (:data:`NMF_SCHEMA`) the writer writes no definition levels and the
readers decode none."""


def write_nmf_part(
    chunk: MeasuredChunk, path: str | Path, *, structural_zeros: bool = False
) -> dict[str, Any]:
    """Write one measurement task's chunk as a part file; return its small record.

    ``structural_zeros``: the chunk's queries hold their structural-zero rows too
    (marked in the file's metadata, :data:`censusdp.io.nmf_files.STRUCTURAL_ZEROS_KEY`).

    Run by the task itself (on whichever executor): the part appears under its name
    only when complete, is flushed to disk, and the record (``file``, ``geolevel``,
    ``start``, ``stop``, ``rows``, ``sha256``, ``write_seconds``, ``write_cpu_seconds``)
    is all that goes back to the driver.
    """
    t, c = time.perf_counter(), time.process_time()
    path = Path(path)
    with NMFWriter(path, structural_zeros=structural_zeros) as w:
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


_CONSTANTS: dict[Any, pa.Array] = {}
"""This process's constant columns, grown as needed and sliced (:func:`_constant`)."""

_CONSTANT_ROWS = 3 * ROW_GROUP_ROWS
"""Most rows :data:`_CONSTANTS` holds in all: the zero indices and two levels' longest
variance columns (96 MB at most; about 50 MB while a level's blocks are written)."""


def _constant(key: Any, n: int, make: Any) -> pa.Array:
    """The first ``n`` rows of the constant column ``key`` (``make(length)`` builds it).

    A ``ddp-2010`` block task writes a 4M-row ``detailed`` query in every chunk; filling
    its all-zero dictionary indices and its variance afresh for each cost more CPU a
    value than the rest of the columns together (new pages, zeroed or filled). The tasks
    of a level share their queries' variances, so the cache is emptied when it would
    pass :data:`_CONSTANT_ROWS` rows."""
    col = _CONSTANTS.get(key)
    if n > _CONSTANT_ROWS:  # longer than the cache holds (a writer's own row-group cap)
        return make(n)
    if col is None or len(col) < n:
        held = sum(len(c) for k, c in _CONSTANTS.items() if k != key)
        if held + n > _CONSTANT_ROWS:
            _CONSTANTS.clear()
        col = _CONSTANTS[key] = make(max(n, 1))
    return col.slice(0, n)


def _zeros(n: int) -> pa.Array:
    return _constant("zeros", n, lambda k: pa.array(np.zeros(k, np.int32), pa.int32()))


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
        tiled = np.tile(mq.rows.astype(np.int32), units) if mq.rows.size else np.zeros(0)
        self.cells = pa.array(tiled, pa.int32())
        self.values = pa.array(mq.values.reshape(-1))
        self.codes = pa.array(np.asarray(geocodes)[:units], pa.string())
        self.constants = {
            name: pa.array([text], pa.string())
            for name, text in (
                ("geolevel", mq.geolevel),
                ("query", mq.query),
                ("mechanism", mq.mechanism),
            )
        }
        self.longest = longest

    def _text(self, name: str, n: int) -> pa.Array:
        """``n`` rows of the one-value column ``name``: shared zero indices, its string."""
        return pa.DictionaryArray.from_arrays(_zeros(n), self.constants[name])

    def _variance(self, unit: np.ndarray, first: int, n: int) -> pa.Array:
        """The ``variance`` column: a slice of one constant column when the rows' units
        share one variance (always, as the writer cuts row groups), else built."""
        unit_var = None if self.mq.uniform else self.mq.unit_variances()
        v = float(self.mq.variance) if unit_var is None else float(unit_var[first])
        if n and (unit_var is None or (unit_var[first : first + int(unit[-1]) + 1] == v).all()):
            return _constant(
                ("variance", v), n, lambda k: pa.array(np.full(k, v, dtype=np.float64))
            )
        return pa.array(_row_variances(self.mq, unit, first))

    def table(self, a: int, b: int) -> pa.Table:
        """Rows ``a:b`` of the query's answers flattened."""
        n = b - a
        if n > self.longest:
            raise ValueError(f"row group of {n} rows, longer than {self.longest}")
        first = a // self.r
        last = (b - 1) // self.r + 1 if n else first
        skip = a - first * self.r  # rows of the first unit in an earlier row group
        unit = np.repeat(np.arange(last - first, dtype=np.int32), self.r)[skip : skip + n]
        return pa.Table.from_arrays(
            [
                self._text("geolevel", n),
                pa.DictionaryArray.from_arrays(
                    pa.array(unit, pa.int32()), self.codes.slice(first, last - first)
                ),
                self._text("query", n),
                self.cells.slice(a, n),
                self.values.slice(a, n),
                self._variance(unit, first, n),
                self._text("mechanism", n),
            ],
            schema=NMF_SCHEMA,
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


_TEXT = pa.dictionary(pa.int32(), pa.string())
NMF_SCHEMA = pa.schema(
    [
        pa.field("geolevel", _TEXT, nullable=False),
        pa.field("geocode", _TEXT, nullable=False),
        pa.field("query", _TEXT, nullable=False),
        pa.field("cell", pa.int32(), nullable=False),
        pa.field("value", pa.int64(), nullable=False),
        pa.field("variance", pa.float64(), nullable=False),
        pa.field("mechanism", _TEXT, nullable=False),
    ]
)
"""The columns :class:`NMFWriter` writes, every one non-null (``REQUIRED`` in Parquet: no
definition levels to write or read). Files written before had the same columns,
nullable and without nulls; every reader reads both."""


class NMFWriter(StreamingWriter):
    """Append :class:`~censusdp.data.measurements.MeasuredChunk` s to a noisy measurement file.

    The file appears under its final name only when :meth:`close` succeeds (it is
    written to a temporary file next to it); use it as a context manager so that an
    error removes the temporary file.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        row_group_rows: int = ROW_GROUP_ROWS,
        structural_zeros: bool = False,
    ) -> None:
        if row_group_rows < 1:
            raise ValueError(f"row_group_rows must be at least 1, got {row_group_rows}")
        self.path = Path(path)
        self.rows = 0
        self.row_group_rows = row_group_rows
        self._ctx = atomic_path(self.path)
        self._tmp = self._ctx.__enter__()
        self._writer: pq.ParquetWriter | None = None
        self._schema: pa.Schema | None = None
        self._metadata = (
            {STRUCTURAL_ZEROS_KEY: STRUCTURAL_ZEROS_MEASURED} if structural_zeros else None
        )

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
                self._schema = (
                    table.schema
                    if self._metadata is None
                    else table.schema.with_metadata(self._metadata)
                )
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
            # no measured unit (the US of an input of some states): the columns' own types,
            # so that a reader of the whole directory sees one schema
            schema = NMF_SCHEMA
            if self._metadata is not None:
                schema = schema.with_metadata(self._metadata)
            pq.write_table(schema.empty_table(), self._tmp)
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
