"""The row-group cache of NMF reads: each process keeps the checked values it read last.

:func:`read_values` reads one row group of a noisy measurement file, checks it (row
count, cells in order, the geocode of every unit starting in it) and keeps its values
in the process's :class:`_GroupCache`, so that the families of a level read by
consecutive TopDown tasks in one worker read each row group about once
(:class:`censusdp.io.nmf_read.NMFSlice` reads through it).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.errors import InputError

__all__ = [
    "GROUP_CACHE_BYTES",
    "GROUP_CACHE_FILES",
    "read_values",
]

GROUP_CACHE_BYTES = 64 << 20
"""Most bytes of row-group values one process keeps (:class:`_GroupCache`): twice the
largest row group's values (:data:`~censusdp.io.nmf_write.ROW_GROUP_ROWS` int64), so
a family's row groups of every query stay while the next family is read (full
Wyoming's block level: 48 MB was enough, 32 MB read 2.5 times as many row groups)."""

GROUP_CACHE_FILES = 8
"""Most Parquet files one process keeps open (footers parsed) for reading values."""


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


def read_values(
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
