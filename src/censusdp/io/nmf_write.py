"""Writing the noisy measurement file (NMF) as it is measured.

It is written as it is measured (:class:`NMFWriter`), one (geolevel, query) of a chunk
of whole families at a time, rows ordered by geocode then cell, in row groups of at
most :data:`ROW_GROUP_ROWS` rows cut at geounit boundaries (Parquet writers cap a row
group at 2^26 rows and would otherwise cut a geounit in two), so
:class:`censusdp.io.nmf_read.NMFReader` can hand the estimator the measurements of
any run of units by reading only the row groups that hold them (found from the
row-group keys in the file's metadata, :func:`censusdp.io.nmf_files.row_group_keys`). A run's measurement tasks each write their own part
(:func:`write_nmf_part`; the part layout is :mod:`censusdp.io.nmf_files`).

A file is written by one of two engines (:data:`ENGINES`) that give every reader the
same columns, encodings, row groups and values. ``censusdp`` (the default) assembles
each row group from column chunks (:mod:`censusdp.io.parquet_chunks`): only ``value``
is encoded row by row (by pyarrow, in memory); ``cell`` once a row-group shape; the
five dictionary columns are a few bytes of runs. ``pyarrow`` hands pyarrow's writer
all seven columns (:data:`WRITE_OPTIONS`), which costs about four times the CPU a
value (``benchmarks/bench_nmf_encoding.py``) and is kept as the reference the tests
hold the other to.
"""

from __future__ import annotations

import contextlib
import functools
import struct
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.data.measurements import MeasuredChunk, MeasuredQuery, MeasurementSet
from censusdp.io.atomic import HashingSink, StreamingWriter, atomic_path, fsync_file, sha256_of
from censusdp.io.nmf_files import (
    ROW_GROUPS_KEY,
    STORED_COLUMNS,
    STRUCTURAL_ZEROS_KEY,
    STRUCTURAL_ZEROS_MEASURED,
    RowGroupKey,
    encode_row_group_keys,
)
from censusdp.io.parquet_chunks import (
    Chunk,
    ChunkFileWriter,
    dictionary_chunk,
    double_statistics,
    plain_strings,
    pyarrow_chunks,
)
from censusdp.version import __version__

__all__ = [
    "NMF_FILE_SCHEMA",
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

WRITE_OPTIONS: dict[str, Any] = {
    "compression": {
        "geolevel": "none",
        "geocode": "zstd",
        "query": "none",
        "cell": "zstd",
        "value": "none",
        "variance": "none",
        "mechanism": "none",
    },
    "use_dictionary": ["geolevel", "geocode", "query", "variance", "mechanism"],
    "column_encoding": {"cell": "DELTA_BINARY_PACKED", "value": "DELTA_BINARY_PACKED"},
    "write_statistics": ["variance"],
    "write_batch_size": 1 << 16,
}
"""How :class:`NMFWriter` encodes the stored columns (:data:`NMF_FILE_SCHEMA`): pyarrow's
writer takes these options (engine ``pyarrow``); the ``censusdp`` engine writes the same
encodings (``value`` and ``cell`` with pyarrow and these options, the dictionary
columns itself, :class:`_QueryColumns.chunks`).

A ``ddp-2010`` block has 338,502 person and 150,984 household values, nearly all noise
about zero, so the writer's CPU per value decides how long a state takes to measure
(``benchmarks/bench_hh_measure.py``, which compares these options with the previous
ones). Parquet's CPU is paid per column and row, and the most of it went to what is
the same on every row of a row group: ``geolevel``, ``query``, ``variance`` and
``mechanism`` each cost 6 to 10 ns a row (a one-entry dictionary's indices encoded
one by one, and statistics computed through a ``unique`` of them), and the
statistics of ``geocode`` another 8. They stay in the rows, so that any Parquet reader
sees the NMF's documented seven columns, at the least cost: dictionary-encoded and
uncompressed (a run of one index). Statistics are written for ``variance`` alone (a
float's min and max, which settle its check in the footer): those of a
dictionary-encoded string column (``geolevel``, ``query``) cost more than its encoding,
and those of ``value`` a comparison a row that its ``REQUIRED`` integer column makes
needless (no null, every value an integer); together they were a third of the writer's
CPU (``benchmarks/bench_nmf_encoding.py``). The self-check reads ``geolevel`` and
``query`` instead (a run of one dictionary index, about a nanosecond a row each). Each
row group's rows, level, query, variance, mechanism and first and last geocode are
also in the file's key-value metadata (:data:`~censusdp.io.nmf_files.ROW_GROUPS_KEY`),
the index the readers find row groups by
(:func:`~censusdp.io.nmf_files.row_group_keys`); the self-check holds the rows to it.

``cell`` ascends within each geounit (the query's measured rows in order), so delta
encoding stores it in a few bits a row, where a dictionary of a ``ddp-2010`` query's
229,320 cells overflows and falls back to plain int32 (2.9x smaller, 1.6x faster,
``benchmarks/bench_nmf_write.py``). ``value`` is delta-encoded and not compressed: a
dictionary of the noisy values (about a thousand at a block) cost a hash lookup per
value, and zstd then won 6% of the bytes (zstd at level 1 after delta: 3.6x the CPU
for 1% of the bytes; plain values with lz4, 2x the CPU and 2.5x the bytes); delta
encoding bit-packs the differences (about 10 bits a value). Every Parquet reader
(pyarrow, Spark, DuckDB) reads the standard ``DELTA_BINARY_PACKED`` encoding. The
writer encodes in batches of 2^16 rows instead of pyarrow's 1,024, each batch's fixed
costs paid 64 times less often. With the columns declared non-null
(:data:`NMF_FILE_SCHEMA`) the writer writes no definition levels and the readers
decode none."""


def write_nmf_part(
    chunk: MeasuredChunk,
    path: str | Path,
    *,
    structural_zeros: bool = False,
    engine: str = "censusdp",
) -> dict[str, Any]:
    """Write one measurement task's chunk as a part file; return its small record.

    ``structural_zeros``: the chunk's queries hold their structural-zero rows too
    (marked in the file's metadata, :data:`censusdp.io.nmf_files.STRUCTURAL_ZEROS_KEY`);
    ``engine``: one of :data:`ENGINES`.

    Run by the task itself (on whichever executor): the part appears under its name
    only when complete, is flushed to disk, and the record (``file``, ``geolevel``,
    ``start``, ``stop``, ``rows``, ``sha256``, ``write_seconds``, ``write_cpu_seconds``)
    is all that goes back to the driver.
    """
    t, c = time.perf_counter(), time.process_time()
    path = Path(path)
    with NMFWriter(path, structural_zeros=structural_zeros, engine=engine) as w:
        w.write_chunk(chunk)
    fsync_file(path)
    return {
        "file": path.name,
        "geolevel": chunk.geolevel,
        "start": int(chunk.start),
        "stop": int(chunk.stop),
        "rows": int(w.rows),
        "sha256": w.sha256 or sha256_of(path),
        "write_seconds": time.perf_counter() - t,
        "write_cpu_seconds": time.process_time() - c,
    }


class _QueryColumns:
    """The stored columns of one query's answers, built once; :meth:`table` slices out
    the rows of one row group (unit-major, then measured cell) and :meth:`key` gives
    what the row group holds once (its level, query, variance, mechanism, geocodes).

    Slicing Arrow arrays copies nothing, so a row group costs a few array views instead
    of rebuilding its columns: a spine's block groups change budget share every few
    units, each change starts a row group, and a California block-group part has about
    5,000 of them (the file's bytes are the same either way).
    """

    def __init__(self, mq: MeasuredQuery, geocodes: np.ndarray, longest: int) -> None:
        self.mq = mq
        self.r = max(mq.rows.size, 1)
        units = mq.values.shape[0]
        self.units = units
        self.values = pa.array(mq.values.reshape(-1))
        self.geocodes = np.asarray(geocodes)[:units]
        self.unit_var = None if mq.uniform else mq.unit_variances()
        self.longest = longest
        self.level = pa.array([mq.geolevel], pa.string())
        self.query = pa.array([mq.query], pa.string())
        self.mechanism = pa.array([mq.mechanism], pa.string())
        self._cell_chunks: dict[tuple[int, int], Chunk] = {}
        self._one_chunks: dict[tuple[int, float], tuple[Chunk, ...]] = {}

    @functools.cached_property
    def cells(self) -> pa.Array:
        """``cell`` of every row (the measured rows, once a unit)."""
        rows = self.mq.rows.astype(np.int32)
        return pa.array(np.tile(rows, self.units) if rows.size else np.zeros(0), pa.int32())

    @functools.cached_property
    def codes(self) -> pa.Array:
        return pa.array(self.geocodes, pa.string())

    @functools.cached_property
    def zeros(self) -> pa.Array:
        return pa.array(np.zeros(self.longest, dtype=np.int32), pa.int32())

    @functools.cached_property
    def variances(self) -> pa.Array | None:
        if self.unit_var is not None:
            return None
        return pa.array(np.full(self.longest, float(self.mq.variance)))

    def key(self, a: int, b: int) -> RowGroupKey:
        """Rows ``a:b``'s :class:`~censusdp.io.nmf_files.RowGroupKey` (one variance: the
        writer cuts row groups where a unit's variance changes)."""
        first, last = a // self.r, (b - 1) // self.r
        v = float(self.mq.variance) if self.unit_var is None else float(self.unit_var[first])
        if self.unit_var is not None and (self.unit_var[first : last + 1] != v).any():
            raise ValueError(f"row group of units {first}..{last} mixes variances")
        return RowGroupKey(
            b - a,
            self.mq.geolevel,
            self.mq.query,
            v,
            self.mq.mechanism,
            str(self.geocodes[first]),
            str(self.geocodes[last]),
        )

    def table(self, a: int, b: int) -> pa.Table:
        """Rows ``a:b`` of the query's answers flattened, the seven columns."""
        n = b - a
        if n > self.longest:
            raise ValueError(f"row group of {n} rows, longer than {self.longest}")
        first = a // self.r
        last = (b - 1) // self.r + 1 if n else first
        skip = a - first * self.r  # rows of the first unit in an earlier row group
        unit = np.repeat(np.arange(last - first, dtype=np.int32), self.r)[skip : skip + n]
        zeros = self.zeros.slice(0, n)  # the one-value columns: index 0 of a 1-entry dictionary
        if self.variances is not None:
            variance = self.variances.slice(0, n)
        else:
            variance = pa.array(np.full(n, self.key(a, b).variance if n else 0.0))

        def one(dictionary: pa.Array) -> pa.DictionaryArray:
            return pa.DictionaryArray.from_arrays(zeros, dictionary, safe=False)

        return pa.Table.from_arrays(
            [
                one(self.level),
                pa.DictionaryArray.from_arrays(
                    pa.array(unit, pa.int32()), self.codes.slice(first, last - first)
                ),
                one(self.query),
                self.cells.slice(a, n),
                self.values.slice(a, n),
                variance,
                one(self.mechanism),
            ],
            schema=NMF_FILE_SCHEMA,
        )

    def unit_runs(self, a: int, b: int) -> tuple[int, np.ndarray]:
        """Rows ``a:b``'s first unit (index into the query's units) and how many of the
        rows each unit from it on holds."""
        first, last = a // self.r, (b - 1) // self.r
        edges = np.arange(first, last + 2, dtype=np.int64) * self.r
        edges[0], edges[-1] = a, b
        return first, np.diff(edges)

    def chunks(self, a: int, b: int, value: Chunk, key: RowGroupKey) -> list[Chunk]:
        """Rows ``a:b`` (whose :meth:`key` is ``key``) as the seven column chunks of a row
        group (``value``'s chunk encoded by pyarrow with the query's other row groups), in
        the columns' order.

        Every column but ``value`` is encoded here: the one-value columns and
        ``geocode`` are dictionaries whose indices are one run a row group or a geounit
        (:func:`~censusdp.io.parquet_chunks.dictionary_chunk`), and ``cell`` repeats
        the query's measured rows, so a row group of whole geounits has the same
        ``cell`` chunk as every other of its size (encoded once, by pyarrow).
        """
        n = b - a
        first, lengths = self.unit_runs(a, b)
        skip = a - first * self.r
        cell = self._cell_chunks.get((skip, n))
        if cell is None:
            reps = -(-(skip + n) // self.r)
            cells = np.tile(self.mq.rows.astype(np.int32), reps)[skip : skip + n]
            cell = pyarrow_chunks(
                [pa.table([pa.array(cells, pa.int32())], schema=_CELL_SCHEMA)], **_CELL_OPTIONS
            )[0]
            self._cell_chunks[(skip, n)] = cell
        codes = self.geocodes[first : first + lengths.size].tolist()
        level, query, variance, mechanism = self._one_value_chunks(n, key.variance)
        return [
            level,
            dictionary_chunk(
                "BYTE_ARRAY", plain_strings(codes), len(codes), lengths, compression="zstd"
            ),
            query,
            cell,
            value,
            variance,
            mechanism,
        ]

    def _one_value_chunks(self, n: int, variance: float) -> tuple[Chunk, ...]:
        """The chunks of ``geolevel``, ``query``, ``variance`` and ``mechanism`` for a
        row group of ``n`` rows (the same for every row group of that size and variance)."""
        got = self._one_chunks.get((n, variance))
        if got is None:
            one = np.array([n], dtype=np.int64)
            got = (
                dictionary_chunk("BYTE_ARRAY", plain_strings([self.mq.geolevel]), 1, one),
                dictionary_chunk("BYTE_ARRAY", plain_strings([self.mq.query]), 1, one),
                dictionary_chunk(
                    "DOUBLE",
                    struct.pack("<d", variance),
                    1,
                    one,
                    statistics=double_statistics(variance, variance),
                ),
                dictionary_chunk("BYTE_ARRAY", plain_strings([self.mq.mechanism]), 1, one),
            )
            self._one_chunks[(n, variance)] = got
        return got


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


def row_group_bounds(
    n_units: int, n_rows: int, cap: int, target: int | None = None
) -> list[tuple[int, int]]:
    """Flat row ranges ``[(a, b), ...]`` of the row groups for ``n_units`` x ``n_rows`` answers.

    Whole geounits, as many as fit in ``target`` rows (``cap`` when not given; at least
    one geounit a row group); a geounit with more than ``cap`` rows alone is cut into
    pieces of ``cap`` rows (the reader accepts that too).
    """
    if cap < 1:
        raise ValueError(f"row-group cap must be at least 1 row, got {cap}")
    total = n_units * n_rows
    if n_rows <= cap:
        fit = max(min(cap, target or cap) // max(n_rows, 1), 1)
        step = fit * max(n_rows, 1)
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
"""The columns of an NMF, every one non-null: what
:func:`~censusdp.io.nmf_files.read_nmf_table` gives of any NMF file. Files written
before the row-group keys held them all in their rows (before that, nullable and
without nulls); every reader reads each layout."""

NMF_FILE_SCHEMA = pa.schema([NMF_SCHEMA.field(c) for c in STORED_COLUMNS])
"""The columns :class:`NMFWriter` stores row by row, every one non-null (``REQUIRED`` in
Parquet: no definition levels to write or read); the others are in the file's
row-group keys (:data:`~censusdp.io.nmf_files.ROW_GROUPS_KEY`)."""


ENGINES = ("censusdp", "pyarrow")
"""The encoders :class:`NMFWriter` writes a file with; both write the same columns,
encodings and values (``geocode`` is zstd-compressed by ``pyarrow`` only)."""

CHUNK_ROW_GROUP_ROWS = 1 << 19
"""Rows the ``censusdp`` engine aims a row group at (whole geounits; one geounit when it
has more): its row groups of one query are then mostly of one size, whose ``cell``
chunk is encoded once, and a row group's fixed cost (its seven chunks' headers and
footer entries, about a third of a millisecond) stays under a nanosecond a row."""

VALUE_BATCH_ROWS = 1 << 25
"""Rows of ``value`` the ``censusdp`` engine has pyarrow encode at once (a batch of row
groups: about 33 MB of encoded noise held before it is written)."""

_VALUE_SCHEMA = pa.schema([NMF_SCHEMA.field("value")])
_VALUE_OPTIONS: dict[str, Any] = {
    "compression": "none",
    "use_dictionary": False,
    "column_encoding": {"value": "DELTA_BINARY_PACKED"},
    "write_statistics": False,
    "write_batch_size": WRITE_OPTIONS["write_batch_size"],
}
_CELL_SCHEMA = pa.schema([NMF_SCHEMA.field("cell")])
_CELL_OPTIONS: dict[str, Any] = {**_VALUE_OPTIONS, "compression": "zstd"}
_CELL_OPTIONS["column_encoding"] = {"cell": "DELTA_BINARY_PACKED"}
_CREATED_BY = (
    f"censusdp version {__version__} (NMF part writer; value and cell by pyarrow {pa.__version__})"
)


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
        engine: str = "censusdp",
    ) -> None:
        if row_group_rows < 1:
            raise ValueError(f"row_group_rows must be at least 1, got {row_group_rows}")
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
        self.path = Path(path)
        self.rows = 0
        self.row_group_rows = row_group_rows
        self.engine = engine
        self._ctx = atomic_path(self.path)
        self._tmp = self._ctx.__enter__()
        self._writer: pq.ParquetWriter | None = None
        self._file: HashingSink | None = None
        self.sha256: str | None = None
        """The finished file's SHA-256 where the writer hashed it as it wrote it (the
        ``censusdp`` engine), else ``None``."""
        self._chunks: ChunkFileWriter | None = None
        self._keys: list[RowGroupKey] = []
        self._metadata = (
            {STRUCTURAL_ZEROS_KEY: STRUCTURAL_ZEROS_MEASURED} if structural_zeros else {}
        )

    def write_query(self, mq: MeasuredQuery, geocodes: np.ndarray) -> None:
        """Append one query's answers for ``geocodes`` (rows of ``mq.values``).

        Written in row groups of whole geounits of at most ``row_group_rows`` rows each
        (:func:`row_group_bounds`), built one row group at a time, each one's key
        (level, query, variance, mechanism, geocodes) kept for the file's metadata.
        """
        r = mq.rows.size
        target = CHUNK_ROW_GROUP_ROWS if self.engine == "censusdp" else None
        groups = [
            (u0 * r + a, u0 * r + b)
            for u0, u1 in _measured_runs(mq)
            for a, b in row_group_bounds(u1 - u0, r, self.row_group_rows, target)
        ]
        if not groups:
            return
        columns = _QueryColumns(mq, geocodes, max(b - a for a, b in groups))
        if self.engine == "censusdp":
            self._write_chunks(columns, groups)
            return
        for a, b in groups:
            table = columns.table(a, b)
            if self._writer is None:
                schema = NMF_FILE_SCHEMA.with_metadata(self._metadata)
                self._writer = pq.ParquetWriter(self._tmp, schema, **WRITE_OPTIONS)
            self._writer.write_table(table, row_group_size=max(b - a, 1))
            self._keys.append(columns.key(a, b))
            self.rows += table.num_rows

    def _write_chunks(self, columns: _QueryColumns, groups: list[tuple[int, int]]) -> None:
        """The ``censusdp`` engine: each row group from its column chunks, ``value``
        encoded by pyarrow a batch of row groups at a time (:data:`VALUE_BATCH_ROWS`)."""
        if self._chunks is None:
            self._file = HashingSink(open(self._tmp, "wb"))  # noqa: SIM115 (closed by close/abort)
            schema = NMF_FILE_SCHEMA.with_metadata(self._metadata)
            self._chunks = ChunkFileWriter(self._file, schema, _CREATED_BY)
        batch: list[tuple[int, int]] = []
        rows = 0
        for i, (a, b) in enumerate(groups):
            batch.append((a, b))
            rows += b - a
            if i + 1 < len(groups) and rows < VALUE_BATCH_ROWS:
                continue
            values = pyarrow_chunks(
                [
                    pa.table([columns.values.slice(x, y - x)], schema=_VALUE_SCHEMA)
                    for x, y in batch
                ],
                **_VALUE_OPTIONS,
            )
            for (x, y), value in zip(batch, values, strict=True):
                key = columns.key(x, y)
                self._chunks.write_row_group(columns.chunks(x, y, value, key), y - x)
                self._keys.append(key)
                self.rows += y - x
            batch, rows = [], 0

    def write_chunk(self, chunk: MeasuredChunk) -> None:
        """Append every query of a chunk."""
        for mq in chunk.queries:
            self.write_query(mq, chunk.geocodes)

    def close(self) -> int:
        """Finish the file (its row-group keys in its metadata) and move it into place;
        returns the number of rows."""
        keys = {ROW_GROUPS_KEY: encode_row_group_keys(self._keys)}
        if self._chunks is not None:
            self._chunks.close({**self._metadata, **keys})
            self._file.close()
            self.sha256 = self._file.hexdigest()
        elif self._writer is not None:
            self._writer.add_key_value_metadata(keys)
            self._writer.close()
        else:
            # no measured unit (the US of an input of some states): the columns' own types,
            # so that a reader of the whole directory sees one schema
            schema = NMF_FILE_SCHEMA.with_metadata({**self._metadata, **keys})
            pq.write_table(schema.empty_table(), self._tmp)
        self._ctx.__exit__(None, None, None)
        return self.rows

    def abort(self) -> None:
        """Discard the partial file."""
        if self._file is not None:
            with contextlib.suppress(Exception):
                self._file.close()
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
