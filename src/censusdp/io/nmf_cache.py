"""The row-group cache of NMF reads: each process keeps the checked values it read last.

:func:`read_values` reads one row group of a noisy measurement file, checks it (row
count, cells in order, the geocode of every unit starting in it) and keeps its values
in the process's :class:`_GroupCache`, so that the families of a level read by
consecutive TopDown tasks in one worker read each row group about once
(:class:`censusdp.io.nmf_read.NMFSlice` reads through it).

A row group of a part that the reading run wrote itself (its :class:`GroupSpan` carries
the SHA-256 the writing task recorded) is read for its ``value`` column alone, once
the file's bytes are proven to be that SHA-256's (:meth:`_GroupCache.prove`): the
writer laid out its geocodes and cells, and those very bytes are what is read.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.errors import InputError
from censusdp.io.atomic import sha256_of

__all__ = [
    "GROUP_CACHE_BYTES",
    "GROUP_CACHE_FILES",
    "PROVEN_FILES",
    "GroupSpan",
    "read_values",
]

GROUP_CACHE_BYTES = 64 << 20
"""Most bytes of row-group values one process keeps (:class:`_GroupCache`): twice the
largest row group's values (:data:`~censusdp.io.nmf_write.ROW_GROUP_ROWS` int64), so
a family's row groups of every query stay while the next family is read (full
Wyoming's block level: 48 MB was enough, 32 MB read 2.5 times as many row groups)."""

GROUP_CACHE_FILES = 8
"""Most Parquet files one process keeps open (footers parsed) for reading values."""

PROVEN_FILES = 1 << 14
"""Most files whose SHA-256 one process remembers having proven (:meth:`_GroupCache.prove`)."""


class GroupSpan(NamedTuple):
    """Where one row group of a query's ``(units x rows)`` answers is: its first flat
    row ``off``, the ``file``, its index ``rg`` in the file and its ``n`` rows.

    ``sha256``: the SHA-256 the task that wrote ``file`` recorded, given only where the
    reading run wrote that part itself (:class:`censusdp.io.nmf_read.NMFReader`'s
    ``written``); ``None`` for every NMF from elsewhere, whose geocodes and cells are
    checked as they are read."""

    off: int
    file: str
    rg: int
    n: int
    sha256: str | None = None


class _GroupCache:
    """The checked values of the row groups this process read last, and its open files.

    A TopDown task reads its own family (:class:`~censusdp.io.nmf_read.NMFSlice`), and the families of a level
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
        self._proven: OrderedDict[tuple, str] = OrderedDict()
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

    def prove(self, ident: tuple, sha256: str, where: str) -> None:
        """Check that the file of ``ident`` is the one whose SHA-256 its writer recorded,
        hashing it once per identity on disk (a file rewritten is a new identity).

        Raises:
            InputError: naming the row group being read, when the bytes differ."""
        if self._proven.get(ident) == sha256:
            self._proven.move_to_end(ident)
            return
        got = sha256_of(ident[0])
        if got != sha256:
            raise InputError(
                f"{where}: the file's SHA-256 is {got[:16]}..., not the {sha256[:16]}... "
                "its writer recorded: it changed after this run wrote it"
            )
        self._proven[ident] = sha256
        while len(self._proven) > PROVEN_FILES:  # a file forgotten is hashed again
            self._proven.popitem(last=False)

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
        self._proven.clear()
        self._bytes = 0


_CACHE = _GroupCache(GROUP_CACHE_BYTES, GROUP_CACHE_FILES)


def read_values(
    span: GroupSpan, rows: np.ndarray, codes: np.ndarray, first: int, where: str
) -> np.ndarray:
    """Values of the row group ``span``: flat rows ``span.off:span.off + span.n`` of a
    query's (units x ``rows``) answers, through the process's :class:`_GroupCache`.

    Checked (row count, cells in order, the geocode of every unit starting in it:
    ``codes[unit - first]``), unless the span carries its writer's SHA-256: then the
    file's bytes are proven to be those (:meth:`_GroupCache.prove`) and ``value`` alone
    is read, its row count checked. The values are shared with the cache: do not write
    to them."""
    r = rows.size
    ident = _CACHE.identity(span.file)
    if span.sha256 is not None:
        _CACHE.prove(ident, span.sha256, where)
    key = (*ident, span.rg, span.off, span.n, r, int(rows[0]) if r else -1, int(rows.sum()))
    key += (span.sha256,)  # a proven read's entry never answers a read that checks
    entry = _CACHE.get(key)
    if entry is None:
        entry = _read_group(_CACHE.file(ident), span, rows, where)
        _CACHE.put(key, entry)
    values, at, got = entry
    if span.sha256 is None and not np.array_equal(got, codes[(span.off + at) // r - first]):
        raise InputError(f"{where} geocodes are not in geography order")
    return values


_NOTHING = np.zeros(0, dtype=np.int64)


def _read_group(
    pf: pq.ParquetFile, span: GroupSpan, rows: np.ndarray, where: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row group ``span.rg`` read and its cells checked: its values, the offsets of the
    rows that name a unit (the group's first and every unit starting in it) and their
    geocodes. A proven span (its writer's SHA-256) reads ``value`` alone: no offsets,
    no geocodes."""
    r, off, n = rows.size, span.off, span.n
    if span.sha256 is not None:
        t = pf.read_row_group(span.rg, columns=["value"])
    else:
        t = pf.read_row_group(span.rg, columns=["geocode", "cell", "value"])
    if t.num_rows != n:
        raise InputError(f"{where} has {t.num_rows} values, its footer says {n}")
    values = t.column("value").to_numpy()
    values.flags.writeable = False
    if span.sha256 is not None:
        return values, _NOTHING, _NOTHING
    cells = t.column("cell").to_numpy()
    if not _cells_in_order(cells, rows, off):
        raise InputError(f"{where} cells are not the measured cells of the query in order")
    at = np.unique(np.r_[0, np.arange((-off) % r, n, r)]) if n else np.zeros(0, np.int64)
    gc = t.column("geocode").combine_chunks()
    firsts = gc.take(pa.array(at))
    got = np.asarray(firsts.cast(pa.string()).to_numpy(zero_copy_only=False)).astype(str)
    return values, at, got


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
