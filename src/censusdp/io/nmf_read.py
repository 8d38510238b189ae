"""Reading the noisy measurement file (NMF) for the estimator, a run of units at a time.

:class:`NMFReader` is the :class:`~censusdp.data.measurements.Measurements` protocol
over a file or a directory of parts: the row-group keys say where each
(geolevel, query) and each run of units is, so a read opens only the row groups that
hold the units asked for (through the process's cache, :mod:`censusdp.io.nmf_cache`),
and :meth:`NMFReader.detach` hands a TopDown task an :class:`NMFSlice` it reads
where it runs. The reader accepts any split into row groups, even one that cuts a
geounit. :func:`read_nmf` reads a whole file into a
:class:`~censusdp.data.measurements.MeasurementSet`.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.data.geography import Hierarchy
from censusdp.data.measurements import MeasuredQuery, MeasurementSet, measured_rows
from censusdp.data.queries import make_query, run_query
from censusdp.data.schema import Schema
from censusdp.errors import InputError
from censusdp.io.nmf_cache import GroupSpan, read_values
from censusdp.io.nmf_files import (
    NMF_COLUMNS,
    missing_columns,
    nmf_files,
    read_nmf_table,
    row_group_keys,
    structural_zeros_measured,
)

__all__ = [
    "NMFReader",
    "NMFSlice",
    "read_nmf",
]


class NMFReader:
    """Chunked reads of a noisy measurement file: the
    :class:`~censusdp.data.measurements.Measurements` protocol for the estimator.

    The row-group keys of the file (:func:`~censusdp.io.nmf_files.row_group_keys`: its
    metadata, or the statistics of a file written before) say which (geolevel, query)
    and which geocode range each row group holds; the row counts in the footer, taken in geocode then
    file order, say which rows of the (units x measured cells) answers each holds, so
    any split is accepted, even one cutting a geounit. :meth:`read` reads only the row
    groups overlapping the requested units and checks each one (geocodes, cells and
    counts) before using it.
    A file whose row groups mix levels or queries (written by another tool) is read
    into memory whole instead.

    ``written``: the parts the reading run wrote itself in this run, each one's path
    and the SHA-256 the task that wrote it recorded (a release's
    :attr:`censusdp.release.options.Runtime.written`, kept in memory by
    :func:`censusdp.release.measure_runs.measure_runs`; never read from a file). The row groups of such a part are read for ``value`` alone once the part's
    bytes are proven to be that SHA-256's (:func:`censusdp.io.nmf_cache.read_values`):
    the writer laid out their geocodes and cells. Without it (the default: an NMF from
    elsewhere, ``--from-measurements``, ``infer``, a resumed run's earlier parts) every
    row group is checked.

    Raises:
        InputError: on a missing file or column, geocodes that are not units of the
            hierarchy, or a (geolevel, query) that does not cover every unit once.
    """

    def __init__(
        self,
        path: str | Path,
        schema: Schema,
        hierarchy: Hierarchy,
        run_schema: str | None = None,
        written: Mapping[str, str] | None = None,
    ) -> None:
        self.path = Path(path)
        # a run measuring a unit histogram beside its main one (run_schema): only the
        # row groups of this schema's histogram are read
        self._run_schema = run_schema
        self._files = nmf_files(self.path)
        mine = {str(Path(f).resolve()): digest for f, digest in (written or {}).items()}
        # each file's writer's SHA-256 where this run wrote it, else None (checked reads)
        self._written = [mine.get(str(f.resolve())) for f in self._files]
        self.schema = schema
        self.hierarchy = hierarchy
        self.geolevels = hierarchy.geolevels
        self.geocodes = hierarchy.geocodes
        # footers only: a partitioned NMF of thousands of parts keeps no file open
        self._meta = [pq.read_metadata(f) for f in self._files]
        for f, md in zip(self._files, self._meta, strict=True):
            missing = missing_columns(md)
            if missing:
                raise InputError(f"{f}: missing columns {missing}")
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
            if not self._index_file(fi, md, levels):
                return False
        for key, groups in self._groups.items():
            self._spans[key] = self._cover(key, sorted(groups))
        return True

    def _index_file(self, fi: int, md: Any, levels: dict[str, int]) -> bool:
        """Index the row groups of file ``fi`` from their keys (``False``: mixed)."""
        keys = row_group_keys(md, str(self._files[fi]))
        for rg, k in enumerate(keys):
            if md.row_group(rg).num_rows == 0:
                continue
            if k is None:
                return False
            level = levels.get(k.geolevel)
            if level is None:
                raise InputError(
                    f"{self.path}: geolevel {k.geolevel!r} is not a level of the "
                    f"release geography {list(self.geolevels.names)}"
                )
            codes = self.geocodes[level]
            lo, hi = k.first, k.last
            u0 = int(np.searchsorted(codes, lo))
            u1 = int(np.searchsorted(codes, hi)) + 1
            if u0 >= codes.size or codes[u0] != lo or u1 > codes.size or codes[u1 - 1] != hi:
                raise InputError(
                    f"{self.path}: geocodes {lo!r}..{hi!r} at {k.geolevel} do not "
                    "match the release geography"
                )
            if k.query not in self._queries:  # a ddp-2010 NMF has thousands of row groups
                self._queries[k.query] = self._query_of(k.query)
            q = self._queries[k.query]
            if q is None:  # a query of the other histogram of the run
                continue
            key = (level, q.name)
            if key not in self._info:
                zeros = structural_zeros_measured(md)
                rows = measured_rows(self.schema, q, structural_zeros=zeros)
                mech = k.mechanism if k.mechanism is not None else "unknown"
                self._info[key] = (rows, k.variance, mech)
                self._order.setdefault(level, []).append(q.name)
            self._groups.setdefault(key, []).append((u0, u1, (fi, rg), k.rows, k.variance))
        return True

    def _query_of(self, name: str) -> Any:
        """Query ``name`` of this reader's schema, ``None`` for one of the run's other
        histogram (:func:`censusdp.data.queries.run_query`)."""
        if self._run_schema is not None:
            schema, q = run_query(self._run_schema, name)
            return q if schema.name == self.schema.name else None
        return make_query(self.schema, name)

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
        checked = False  # whether a row group is read with its geocodes checked
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
                    mine.append(GroupSpan(off, str(self._files[fi]), rg, n, self._written[fi]))
                    lo, hi = min(lo, off // r), max(hi, (off + n - 1) // r + 1)
                    checked |= self._written[fi] is None
                i += 1
            unit_var = self._unit_var[(level, qname)][start:stop].copy()
            queries.append((qname, mech, variance, unit_var, tuple(mine), rows))
        # A row group a task of this run wrote is proven by its bytes and read for
        # `value` alone (`read_values`): the slice then needs no geocodes. Its row
        # groups may reach far past the units (a query of one row a unit holds 2^19
        # units in one row group), and the geocodes were most of a block task's bytes.
        codes = self.geocodes[level][lo:hi] if checked else self.geocodes[level][:0]
        return NMFSlice(
            str(self.path),
            self.schema,
            self.geolevels,
            level,
            start,
            stop,
            lo,
            codes.copy(),
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

    def read_rows(
        self, level: int, start: int, stop: int, wanted: Mapping[str, np.ndarray]
    ) -> list[MeasuredQuery]:
        """:meth:`read` with each query kept on the rows ``wanted[query]`` only
        (:meth:`NMFSlice.read_rows`)."""
        if self._fallback is not None:
            return [
                mq.restricted(wanted[mq.query]) for mq in self._fallback.read(level, start, stop)
            ]
        return self.detach(level, start, stop).read_rows(level, start, stop, wanted)


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
    values). It holds the row-group locations per query
    (:class:`~censusdp.io.nmf_cache.GroupSpan`: first flat row, file, group, rows, and
    the writer's SHA-256 of a part the run wrote itself), the units' variances and the
    geocodes the checks need; no values, no footer index. :meth:`NMFReader.read` itself reads through a slice of the units asked for,
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
        self._check_range(level, start, stop)
        name = self.geolevels[level].name
        out = []
        for qname, mech, variance, unit_var, spans, rows in self.queries:
            if queries is not None and qname not in queries:
                continue
            r = rows.size
            a, b = start * r, stop * r
            flat = np.zeros(b - a, dtype=np.int64)
            for off, n, vals in self._spans_read(spans, rows, (a, b), f"{name}, {qname}"):
                lo, hi = max(a, off), min(b, off + n)
                flat[lo - a : hi - a] = vals[lo - off : hi - off]
            uv = unit_var[start - self.start : stop - self.start]
            live, values = _live_rows(
                self.schema, qname, rows, flat.reshape(max(stop - start, 0), r)
            )
            out.append(MeasuredQuery(name, qname, live, values, _variance(uv, variance), mech))
        return out

    def _spans_read(
        self, spans: tuple[GroupSpan, ...], rows: np.ndarray, flat: tuple[int, int], what: str
    ) -> Iterator[tuple[int, int, np.ndarray]]:
        """The values of each row group of ``spans`` that holds some of the flat rows
        ``flat`` (``a:b`` of ``units x rows``), read and checked (or proven:
        :func:`~censusdp.io.nmf_cache.read_values`): ``(offset, rows, values)``.
        ``what``: the level and query, for a bad row group's message."""
        a, b = flat
        for span in spans:
            if span.off + span.n <= a or span.off >= b or a >= b:
                continue
            part = "" if span.file == self.path else f"{Path(span.file).name} "
            where = f"{self.path}: {part}row group {span.rg} ({what})"
            yield span.off, span.n, read_values(span, rows, self.codes, self.first, where)

    def read_rows(
        self, level: int, start: int, stop: int, wanted: Mapping[str, np.ndarray]
    ) -> list[MeasuredQuery]:
        """:meth:`read`, each query kept on the answer rows ``wanted[query]`` (sorted)
        only: what ``MeasuredQuery.restricted`` makes of :meth:`read`'s queries, without
        their whole rows.

        A block family's subproblem keeps of a ``ddp-2010`` block's 338,502 person values
        the few hundred on its parent's positive cells; this gathers those from the
        cached row groups instead of copying every value into a ``(units, rows)`` array
        first. The same row groups are read and checked."""
        self._check_range(level, start, stop)
        name = self.geolevels[level].name
        out = []
        for qname, mech, variance, unit_var, spans, rows in self.queries:
            r = rows.size
            want = np.asarray(wanted[qname], dtype=np.int64)
            pos = np.minimum(np.searchsorted(rows, want), max(r - 1, 0))
            hit = (rows[pos] == want) if r else np.zeros(want.size, dtype=bool)
            live = _measured(self.schema, qname)
            if r != live.size:  # rows of structural zeros only (an NMF of fidelity production)
                hit &= np.isin(want, live)
            pos = pos[hit]
            values = np.zeros((max(stop - start, 0), pos.size), dtype=np.int64)
            # flat (units x rows) index of every wanted value, ascending
            at = (np.arange(start, stop, dtype=np.int64)[:, None] * r + pos[None, :]).ravel()
            flat = values.reshape(-1)
            a, b = start * r, stop * r
            for off, n, vals in self._spans_read(spans, rows, (a, b), f"{name}, {qname}"):
                lo, hi = np.searchsorted(at, [off, off + n])
                flat[lo:hi] = vals[at[lo:hi] - off]
            uv = unit_var[start - self.start : stop - self.start]
            out.append(MeasuredQuery(name, qname, want[hit], values, _variance(uv, variance), mech))
        return out

    def _check_range(self, level: int, start: int, stop: int) -> None:
        if level != self.level or not self.start <= start <= stop <= self.stop:
            raise InputError(
                f"{self.path}: units {start}..{stop} of level {level} are outside the slice "
                f"({self.start}..{self.stop} of level {self.level})"
            )


def _live_rows(
    schema: Schema, query: str, rows: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` and their ``(units, rows)`` values without the rows made only of
    structural-zero cells (an NMF of fidelity ``production`` holds them; their answers
    are noise about a known zero, so estimation sees the live rows either way)."""
    live = _measured(schema, query)
    if rows.size == live.size:
        return rows, values
    keep = np.isin(rows, live)
    return rows[keep], values[:, keep]


def _variance(unit_var: np.ndarray, first: float) -> float | np.ndarray:
    """One float when every unit has the same finite variance, else the per-unit array."""
    if unit_var.size and np.isfinite(unit_var).all() and (unit_var == unit_var[0]).all():
        return float(unit_var[0])
    if unit_var.size == 0:
        return float(first)
    return unit_var


def read_nmf(path: str | Path, schema: Schema, hierarchy: Hierarchy) -> MeasurementSet:
    """Read a noisy measurement file back into a :class:`~censusdp.data.measurements.MeasurementSet`.

    Raises:
        InputError: if a column is missing, a geocode is not a unit of the hierarchy,
            or a (geolevel, query) does not cover every unit of its level.
    """
    path = Path(path)
    tables = []
    for f in nmf_files(path):
        t = read_nmf_table(f)
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
        rows, mat = _live_rows(schema, q.name, rows, mat)
        out.queries[(level, q.name)] = MeasuredQuery(
            level, q.name, rows, mat, _variance(unit_var, float(variance[0])), mech
        )
    return out
