"""The NMF's rows counted: the kernel of the NMF check, a row group at a time.

:func:`count_files` reads the row groups of NMF files (a few at a time, skipping the
columns their footers settle) and counts, per (geolevel, query) and geounit, the rows
and a fingerprint of their cells into a :class:`Tally`, checking each row's value and
variance on the way; :mod:`~censusdp.release.validate._nmf` compares the tally with the
recorded budget's plan.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from censusdp.errors import InputError
from censusdp.io.nmf_files import NMF_COLUMNS, RowGroupKey, has_row_group_keys, row_group_keys
from censusdp.io.parquet_pages import chunk_bytes, dictionary_runs, one_value

READ_BATCH_ROWS = 1 << 22
"""Most rows :func:`count_files` reads in one call."""

PAGE_PROOF_ROWS = 1 << 16
"""Fewest rows of a row group whose ``geolevel`` and ``query`` :func:`count_files`
proves from their pages (:func:`censusdp.io.parquet_pages.one_value`, tens to hundreds
of microseconds a column) instead of decoding them (about 1.3 ns a row each), and whose
``geocode`` and ``cell`` it counts from their pages (:func:`_proven_runs`)."""

CELL_CHUNKS_KEPT = 32
"""``cell`` chunks whose fingerprints a process keeps (:func:`_cell_sums`): a query's row
groups have a few shapes, and the NMF writer encodes each shape's chunk once."""

_CELL_SUMS: OrderedDict[tuple, np.ndarray] = OrderedDict()
"""Per stored ``cell`` chunk (its bytes, type, codec and rows), the running sums of its
rows' fingerprints (:func:`cell_mix`), most recently used last."""


@dataclass(frozen=True, eq=False)
class Tally:
    """Where the rows of an NMF are counted, and what they are checked against.

    ``plan``: per (geolevel, query), each geounit's variance (``inf`` where a bypassed
    geounit must have no rows); ``rows`` and ``mix``: per (geolevel, query), each
    geounit's row count and the sum of its cells' fingerprints (:func:`cell_mix`),
    added to; ``geocodes``: each level's geocodes (sorted) by level index, ``levels``:
    level indexes by name."""

    plan: Mapping[tuple[str, str], np.ndarray]
    rows: Mapping[tuple[str, str], np.ndarray]
    mix: Mapping[tuple[str, str], np.ndarray]
    geocodes: Sequence[np.ndarray] | Mapping[int, np.ndarray]
    levels: Mapping[str, int]


@dataclass(frozen=True, eq=False)
class _Columns:
    """The columns of a row group that :func:`_check_pair` reads: its distinct geocodes
    (``code_names``) and each row's index into them (``code_i``), each row's cell,
    value and variance."""

    code_names: np.ndarray
    code_i: np.ndarray
    cells: np.ndarray
    values: np.ndarray
    variances: np.ndarray


def cell_mix(cells: np.ndarray) -> np.ndarray:
    """A per-cell fingerprint whose sums identify a set of cells (multiplicative hash)."""
    return (cells.astype(np.uint64) * np.uint64(2654435761) + np.uint64(97)) % np.uint64(1 << 31)


_UNIT_MIX: dict[tuple[str, int], tuple[np.ndarray, np.uint64]] = {}
"""Per query (and number of cells), the cells of the last whole unit this process
counted and the sum of their fingerprints (:func:`unit_fingerprint`)."""


def unit_fingerprint(query: str, cells: np.ndarray) -> np.uint64:
    """The sum of :func:`cell_mix` over one unit's ``cells`` of ``query``.

    Every unit of a query has the same cells, the query's measured cells
    (:class:`~censusdp.io.nmf_write.NMFWriter`'s layout), so the last sum of each query
    is kept (one per process, like the NMF reader's caches) and reused when the cells
    are equal: comparing them is one pass over the cells, the fingerprint five, and the
    self-check counts each part of an NMF in its own task (a ``dhcp-2020`` block's
    ``detailed`` is 905,184 cells in every part)."""
    key = (query, int(cells.size))
    last = _UNIT_MIX.get(key)
    if last is not None and np.array_equal(last[0], cells):
        return last[1]
    total = cell_mix(cells).sum(dtype=np.uint64)
    _UNIT_MIX[key] = (np.array(cells, copy=True), total)
    return total


def shown(path: Path, file: Path) -> str:
    """``noisy_measurements.parquet`` or ``noisy_measurements.parquet/part-00003.parquet``."""
    return path.name if file == path else f"{path.name}/{file.name}"


def count_files(path: Path, files: list[Path], tally: Tally) -> str | None:
    """Count every row group of ``files`` into ``tally``; a problem or ``None``.

    Consecutive row groups whose footers settle the same columns are read in one call
    (:data:`READ_BATCH_ROWS` rows at most) and then checked one by one: a spine's
    per-geounit budget shares cut the NMF into row groups of a few thousand rows, and
    one read call per row group was a third of reading them."""
    for f in files:
        try:
            pf = pq.ParquetFile(f)
        except (OSError, pa.ArrowException) as exc:
            return f"{shown(path, f)}: not readable Parquet ({exc})"
        md = pf.metadata
        names = pf.schema_arrow.names
        required = {
            names[i] for i in range(len(pf.schema)) if pf.schema.column(i).max_definition_level == 0
        }
        try:
            keys = row_group_keys(md, shown(path, f)) if has_row_group_keys(md) else None
            constants = [
                _footer_constants(
                    md.row_group(rg), names, None if keys is None else keys[rg], required
                )
                for rg in range(md.num_row_groups)
            ]
            if keys is not None:
                _page_constants(f, md, names, keys, required, constants)
        except InputError as exc:
            where = shown(path, f)
            return str(exc) if str(exc).startswith(where) else f"{where}: {exc}"
        proven = _proven_runs(f, md, names, keys, required, constants)
        for rg, runs in proven.items():
            problem = _count_runs(pf, rg, runs, constants[rg], tally)
            if problem:
                return f"{shown(path, f)}: {problem}"
        for batch in _read_batches(md, constants, proven):
            columns = [c for c in NMF_COLUMNS[:6] if c not in constants[batch[0]]]
            try:
                t = pf.read_row_groups(batch, columns=columns, use_threads=False)
            except (OSError, pa.ArrowException) as exc:
                return f"{shown(path, f)} row groups {batch[0]}..{batch[-1]}: unreadable ({exc})"
            at = 0
            for rg in batch:
                n = md.row_group(rg).num_rows
                part = t.slice(at, n)
                at += n
                key = None if keys is None else keys[rg]
                problem = _check_nmf_rows(part, tally, constants[rg], key)
                if problem:
                    return f"{shown(path, f)}: {problem}"
            if at != t.num_rows:
                return (
                    f"{shown(path, f)}: row groups {batch[0]}..{batch[-1]} hold "
                    f"{t.num_rows} rows, their footers {at}"
                )
    return None


def _page_constants(
    f: Path,
    md: Any,
    names: list[str],
    keys: list[RowGroupKey | None],
    required: set[str],
    constants: list[dict[str, Any]],
) -> None:
    """Add to ``constants`` the ``geolevel`` and ``query`` of each row group of at least
    :data:`PAGE_PROOF_ROWS` rows that its pages prove one string
    (:func:`~censusdp.io.parquet_pages.one_value`: a one-entry dictionary, every index
    0), held to its row-group key; a column they do not prove is read and checked row
    by row as before. The NMF writer's row groups hold one level and one query, so on
    a ``dhc-2020`` NMF this leaves ``geocode`` and ``cell`` to decode.

    Raises:
        InputError: when a proven string is not the row group's key's.
    """
    size = f.stat().st_size
    with open(f, "rb") as fh:
        for rg, key in enumerate(keys):
            n = md.row_group(rg).num_rows
            if key is None or n < PAGE_PROOF_ROWS:
                continue
            for name, want in (("geolevel", key.geolevel), ("query", key.query)):
                if name in constants[rg] or name not in required:
                    continue
                column = md.row_group(rg).column(names.index(name))
                got = one_value(fh, column, n, True, size=size)
                if got is None:
                    continue
                if got != want:
                    raise InputError(
                        f"a row group's {name} is {got!r} in its rows, {want!r} in the "
                        "file's row-group keys"
                    )
                constants[rg][name] = got


@dataclass(frozen=True, eq=False)
class _Runs:
    """A row group's ``geocode`` as its pages store it (dictionary ``entries``, each
    run's ``index`` into them and rows, ``length``) and its ``cell`` chunk's identity
    (:func:`_cell_sums`)."""

    entries: list[str]
    index: np.ndarray
    length: np.ndarray
    cell: tuple


def _proven_runs(
    f: Path,
    md: Any,
    names: list[str],
    keys: list[RowGroupKey | None] | None,
    required: set[str],
    constants: list[dict[str, Any]],
) -> dict[int, _Runs]:
    """The row groups (of at least :data:`PAGE_PROOF_ROWS` rows, their level, query,
    variance and value settled without reading rows) whose ``geocode`` pages are a
    dictionary and RLE runs (:func:`~censusdp.io.parquet_pages.dictionary_runs`), with
    those runs and their ``cell`` chunk's identity: counted by :func:`_count_runs`
    without decoding a row, where decoding ``geocode`` and ``cell`` and comparing each
    unit's cells was most of the self-check's CPU (about 8 ns a row).

    What this proves is what decoding proves: the runs are the geocode of every row
    and a chunk of the same bytes, type, codec and rows as one decoded before holds
    the same cells.
    """
    if keys is None or not {"geocode", "cell"} <= required:
        return {}
    settled = {"geolevel", "query", "variance", "value"}
    cell_at = names.index("cell")
    out: dict[int, _Runs] = {}
    size = f.stat().st_size
    with open(f, "rb") as fh:
        for rg, key in enumerate(keys):
            meta = md.row_group(rg)
            n = meta.num_rows
            if key is None or n < PAGE_PROOF_ROWS or not settled <= constants[rg].keys():
                continue
            runs = dictionary_runs(fh, meta.column(names.index("geocode")), n, True, size=size)
            column = meta.column(cell_at)
            stored = None if runs is None else chunk_bytes(fh, column, size=size)
            if runs is None or stored is None:
                continue
            cell = (stored, column.physical_type, str(column.compression), n)
            out[rg] = _Runs(*runs, cell)
    return out


def _cell_sums(pf: pq.ParquetFile, rg: int, cell: tuple) -> np.ndarray:
    """The running sums (``uint64``, a leading 0) of the fingerprints of row group
    ``rg``'s cells, whose stored chunk is ``cell``: kept per chunk
    (:data:`CELL_CHUNKS_KEPT`), so a chunk the NMF writer repeats is decoded once a
    process."""
    sums = _CELL_SUMS.get(cell)
    if sums is not None:
        _CELL_SUMS.move_to_end(cell)
        return sums
    cells = pf.read_row_group(rg, columns=["cell"], use_threads=False).column(0)
    mix = cell_mix(cells.to_numpy(zero_copy_only=False))
    sums = np.zeros(mix.size + 1, dtype=np.uint64)
    np.cumsum(mix, out=sums[1:])
    _CELL_SUMS[cell] = sums
    while len(_CELL_SUMS) > CELL_CHUNKS_KEPT:
        _CELL_SUMS.popitem(last=False)
    return sums


def _count_runs(
    pf: pq.ParquetFile, rg: int, runs: _Runs, constant: dict[str, Any], tally: Tally
) -> str | None:
    """Count a row group :func:`_proven_runs` proved: each run's rows, and the
    fingerprints of its cells from the chunk's running sums, to its geocode."""
    try:
        sums = _cell_sums(pf, rg, runs.cell)
    except (OSError, pa.ArrowException) as exc:
        return f"row group {rg}: unreadable ({exc})"
    key = (str(constant["geolevel"]), str(constant["query"]))
    if key not in tally.plan:
        return f"({key[0]}, {key[1]}) is not a measurement of the recorded budget"
    ends = np.cumsum(runs.length)
    mix = sums[ends] - sums[ends - runs.length]
    k = len(runs.entries)
    per_code = np.zeros(k, dtype=np.int64)
    np.add.at(per_code, runs.index, runs.length)
    mix_code = np.zeros(k, dtype=np.uint64)
    np.add.at(mix_code, runs.index, mix)
    return _add_codes(
        key,
        tally,
        np.asarray(runs.entries, dtype=str),
        per_code,
        float(constant["variance"]),
        lambda used: mix_code[used],
    )


def _read_batches(
    md: Any, constants: list[dict[str, Any]], skip: Container[int] = ()
) -> list[list[int]]:
    """Runs of consecutive row groups with the same footer-settled columns, each at most
    :data:`READ_BATCH_ROWS` rows (or one row group); the row groups in ``skip`` (counted
    from their pages) are in none."""
    out: list[list[int]] = []
    rows = 0
    for rg, const in enumerate(constants):
        n = md.row_group(rg).num_rows
        if n == 0 or rg in skip:  # nothing to count (an empty file's one row group)
            continue
        if out and constants[out[-1][0]].keys() == const.keys() and rows + n <= READ_BATCH_ROWS:
            out[-1].append(rg)
            rows += n
        else:
            out.append([rg])
            rows = n
    return out


def _footer_constants(
    meta: Any,
    names: list[str],
    key: RowGroupKey | None,
    required: frozenset[str] | set[str] = frozenset(),
) -> dict[str, Any]:
    """Columns of a row group whose check its footer already settles, so they are not
    read: ``value`` stored as integers without nulls (every value a finite integer: a
    ``REQUIRED`` integer column, one of the ``required`` columns, or statistics that
    count no null); ``variance``, ``geolevel`` and ``query`` from the row group's
    ``key`` (a file that holds them once per row group) or from statistics without
    nulls and one value (its min equals its max). A column the footer does not settle
    is read, and held to the key by :func:`_check_nmf_rows`.

    Reading them was about 70% of reading a ``ddp-2010`` part's checked columns. The
    footer is part of the file the manifest's SHA-256 covers."""
    out: dict[str, Any] = {}
    if key is not None:  # from the key what the rows do not store (an earlier round's file)
        keyed = {"variance": np.float64(key.variance), "geolevel": key.geolevel, "query": key.query}
        out.update({c: v for c, v in keyed.items() if c not in names})
    kinds = {
        "value": ("INT32", "INT64"),
        "variance": ("DOUBLE",),
        "geolevel": ("BYTE_ARRAY",),
        "query": ("BYTE_ARRAY",),
    }
    for name, physical in kinds.items():
        if name not in names or name in out:
            continue
        col = meta.column(names.index(name))
        if col.physical_type not in physical:
            continue
        if name == "value" and name in required:
            out[name] = np.int64(0)
            continue
        st = col.statistics
        if st is None or not st.has_null_count:
            continue
        if st.null_count != 0 or st.num_values != meta.num_rows:
            continue
        if name == "value":
            out[name] = np.int64(0)
        elif st.has_min_max and st.min == st.max:
            out[name] = np.float64(st.min) if name == "variance" else str(st.min)
            if key is not None and out[name] != keyed[name]:
                raise InputError(
                    f"a row group's {name} is {out[name]!r} in its rows, "
                    f"{keyed[name]!r} in the file's row-group keys"
                )
    return out


def _encoded(col: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(distinct strings, index of each row into them)`` of a string column, plain or
    dictionary-encoded, without a Python string per row; ``None`` if it has nulls."""
    if col.null_count:
        return None
    dicts, idxs = [], []
    for ch in col.chunks:
        if not pa.types.is_dictionary(ch.type):
            ch = pc.dictionary_encode(ch)
        dicts.append(np.asarray(ch.dictionary.cast(pa.string()).to_pylist(), dtype=str))
        idxs.append(np.asarray(ch.indices))  # int32 as stored: no copy per row
    if not dicts:
        return np.zeros(0, dtype="U1"), np.zeros(0, dtype=np.int64)
    if len(dicts) == 1 and (dicts[0].size < 2 or (dicts[0][1:] > dicts[0][:-1]).all()):
        return dicts[0], idxs[0]  # one sorted dictionary of distinct strings (NMFWriter's)
    distinct, inverse = np.unique(np.concatenate(dicts), return_inverse=True)
    offsets = np.cumsum([0] + [d.size for d in dicts[:-1]])
    return distinct, np.concatenate(
        [inverse[o + i] for o, i in zip(offsets, idxs, strict=True)]
    ).astype(np.int64)


def _column(t: pa.Table, name: str, constant: dict[str, Any] | None) -> np.ndarray:
    """Column ``name`` of ``t`` as NumPy, or a row group's footer constant for it (a
    read-only view, no copy)."""
    if constant and name in constant:
        return np.broadcast_to(constant[name], (t.num_rows,))
    return t.column(name).to_numpy(zero_copy_only=False)


_STRING_COLUMNS = ("geolevel", "query", "geocode")


def _check_nmf_rows(
    t: pa.Table,
    tally: Tally,
    constant: dict[str, Any] | None = None,
    key: RowGroupKey | None = None,
) -> str | None:
    """One row group: known (geolevel, query) pairs, known geocodes, stated variance.

    Strings are handled through their dictionaries (a row group of 4M values has one
    level, one query and a few thousand geocodes), never as one Python string per row
    unless a string column has nulls (:func:`_plain`).
    ``constant``: columns not read, settled by the footer (:func:`_footer_constants`);
    ``key``: the row group's entry in the file's row-group keys, which the level and
    query (and variance) read from its rows must be (the readers find row groups by the
    keys).
    """
    one = np.broadcast_to(np.int64(0), (t.num_rows,))
    enc = [
        (np.array([constant[c]]), one) if constant and c in constant else _encoded(t.column(c))
        for c in _STRING_COLUMNS
    ]
    if any(e is None for e in enc):
        enc = [_plain(t, c, constant) for c in _STRING_COLUMNS]
    (level_names, level_i), (query_names, query_i), (code_names, code_i) = enc
    if key is not None and t.num_rows:
        for name, names, index, want in (
            ("geolevel", level_names, level_i, key.geolevel),
            ("query", query_names, query_i, key.query),
        ):
            # one distinct string: every row is it (a dictionary's indices are in bounds)
            lo, hi = (0, 0) if names.size == 1 else (int(index.min()), int(index.max()))
            if lo != hi or str(names[lo]) != want:
                got = str(names[lo]) if lo == hi else f"{names[lo]!s} .. {names[hi]!s}"
                return (
                    f"a row group's {name} is {got!r} in its rows, {want!r} in the file's "
                    "row-group keys"
                )
    cols = _Columns(
        code_names,
        code_i,
        t.column("cell").to_numpy(zero_copy_only=False),
        _column(t, "value", constant),
        _column(t, "variance", constant),
    )
    if key is not None and t.num_rows and not (constant and "variance" in constant):
        lo, hi = float(cols.variances.min()), float(cols.variances.max())
        if lo != hi or lo != key.variance:
            got = lo if lo == hi else f"{lo} .. {hi}"
            return (
                f"a row group's variance is {got!r} in its rows, {key.variance!r} in the "
                "file's row-group keys"
            )
    if level_names.size == 1 and query_names.size == 1:  # what NMFWriter writes
        return _check_pair((str(level_names[0]), str(query_names[0])), slice(None), tally, cols)
    pair = level_i * max(query_names.size, 1) + query_i
    pairs, inverse = np.unique(pair, return_inverse=True)
    # the same order as sorting (level, query) strings: level names and query names
    # are each sorted, so their pair ids sort like the pairs
    for j, pid in enumerate(pairs):
        key = (str(level_names[pid // query_names.size]), str(query_names[pid % query_names.size]))
        problem = _check_pair(key, np.flatnonzero(inverse.ravel() == j), tally, cols)
        if problem:
            return problem
    return None


def _plain(
    t: pa.Table, name: str, constant: dict[str, Any] | None
) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct strings, index of each row into them)`` of a string column with
    nulls, through one string per row (a null is ``"None"``); the distinct strings
    sorted, as :func:`_encoded` gives them."""
    if constant and name in constant:
        column = np.full(t.num_rows, constant[name])
    else:
        column = np.asarray(t.column(name).to_numpy(zero_copy_only=False)).astype(str)
    names, index = np.unique(column, return_inverse=True)
    return names, index.ravel()


def _check_pair(
    key: tuple[str, str], sel: np.ndarray | slice, tally: Tally, cols: _Columns
) -> str | None:
    """The rows ``sel`` of one (geolevel, query): count them per geounit.

    Counted per geocode (the row group's dictionary entries, a few thousand), not per
    row: one pass for the row counts, one for the cell fingerprints, and the variance
    compared per geocode when the rows share one (what :class:`NMFWriter` writes; a
    row group never mixes variances), else row by row. On ``ddp-2010`` parts this
    made the self-check of the NMF about 2x cheaper (``benchmarks/bench_nmf_write.py``).
    """
    if key not in tally.plan:
        return f"({key[0]}, {key[1]}) is not a measurement of the recorded budget"
    values = cols.values[sel]
    if values.dtype.kind == "f" and not np.all(np.isfinite(values) & (values == np.round(values))):
        return f"({key[0]}, {key[1]}) has a value that is not a finite integer"
    row_codes = cols.code_i[sel]
    if row_codes.size == 0:
        return None
    tiles = _tiles(row_codes, np.asarray(cols.cells[sel]))
    if tiles is None:
        per_code = np.bincount(row_codes, minlength=cols.code_names.size)
    else:  # whole units with the same cells: count the units, not the rows
        per_unit = np.bincount(tiles[0], minlength=cols.code_names.size)
        per_code = per_unit * tiles[1].size
    var = cols.variances[sel]
    lo, hi = float(var.min()), float(var.max())
    if lo != hi:  # rows of several variances: each row's against its geounit's
        problem = _row_variances(key, tally, cols.code_names, row_codes, var)
        if problem:
            return problem

    def mix(used: np.ndarray) -> np.ndarray:
        # the fingerprints are < 2^31, so their float64 sums per geocode are exact
        # (fewer than 2^22 rows a geounit)
        if tiles is not None:  # each unit's fingerprint is the first unit's, summed once
            return per_unit[used].astype(np.uint64) * unit_fingerprint(key[1], tiles[1])
        cells = np.asarray(cols.cells[sel])
        if cells.size and 0 <= cells.min() and cells.max() < 1 << 20:
            weights = cell_mix(np.arange(int(cells.max()) + 1)).astype(np.float64)[cells]
        else:
            weights = cell_mix(cells).astype(np.float64)
        sums = np.bincount(row_codes, weights=weights, minlength=cols.code_names.size)
        return sums[used].astype(np.uint64)

    return _add_codes(key, tally, cols.code_names, per_code, lo if lo == hi else None, mix)


def _units(
    key: tuple[str, str], tally: Tally, code_names: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The level's geocodes and, per entry of ``code_names``, its unit's index and whether
    it is a geocode of the level at all."""
    codes = tally.geocodes[tally.levels[key[0]]]
    unit_of = np.minimum(np.searchsorted(codes, code_names.astype(codes.dtype)), codes.size - 1)
    return codes, unit_of, codes[unit_of] == code_names


def _variance_problem(
    key: tuple[str, str], codes: np.ndarray, unit: int, got: float, want: float
) -> str:
    code = codes[unit] or "(the whole)"
    if not np.isfinite(want):
        return f"({key[0]}, {key[1]}) has rows at {code}, a bypassed geounit (share 0)"
    return f"({key[0]}, {key[1]}) at {code} has variance {got}; its share's mechanism's is {want}"


def _row_variances(
    key: tuple[str, str],
    tally: Tally,
    code_names: np.ndarray,
    row_codes: np.ndarray,
    var: np.ndarray,
) -> str | None:
    """Each row's variance against its geounit's planned one (rows of several)."""
    codes, unit_of, known = _units(key, tally, code_names)
    want = tally.plan[key][unit_of[row_codes]]
    # a row of a geocode not of the level is reported as such (:func:`_add_codes`)
    off = (~np.isfinite(var) | (np.abs(var - want) > 1e-9 * want)) & known[row_codes]
    if not off.any():
        return None
    i = int(np.argmax(off))
    return _variance_problem(key, codes, int(unit_of[row_codes[i]]), float(var[i]), want[i])


def _add_codes(
    key: tuple[str, str],
    tally: Tally,
    code_names: np.ndarray,
    per_code: np.ndarray,
    variance: float | None,
    mix: Callable[[np.ndarray], np.ndarray],
) -> str | None:
    """Add one (geolevel, query)'s counts to ``tally``: ``per_code`` rows for each entry of
    ``code_names`` and ``mix(used)`` their fingerprints (``used``: the entries with
    rows), after checking that each used entry is a geocode of the level and, given the
    row group's one ``variance``, that it is each geounit's planned one (``None``: the
    rows were checked one by one)."""
    codes, unit_of, known = _units(key, tally, code_names)
    used = np.flatnonzero(per_code)
    wrong = ~known[used]
    if wrong.any():
        return f"geocode {code_names[used[np.argmax(wrong)]]} is not a {key[0]} of the release"
    units = unit_of[used]
    if variance is not None:
        want = tally.plan[key][units]
        off = ~np.isfinite(want) | (np.abs(variance - want) > 1e-9 * want) | ~np.isfinite(variance)
        if off.any():
            i = int(np.argmax(off))
            return _variance_problem(key, codes, int(units[i]), variance, want[i])
    np.add.at(tally.rows[key], units, per_code[used])
    np.add.at(tally.mix[key], units, mix(used))
    return None


def _tiles(codes: np.ndarray, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(each unit's geocode index, the cells of one unit)`` when the rows are whole
    units one after another, each with the same cells in the same order (what
    :class:`~censusdp.io.nmf_write.NMFWriter` writes), else ``None``.

    Then a unit's row count and cell fingerprint are the first unit's, so the rows are
    counted by comparing them with the first unit's (two passes of comparisons instead
    of a gather and two weighted counts a row); the tally is the same either way."""
    n = codes.size
    r = int(np.argmax(codes != codes[0])) or n  # rows of the first unit (all: one unit)
    if n % r:
        return None
    k = n // r
    by_unit = codes.reshape(k, r)
    cell_rows = cells.reshape(k, r)
    if not (by_unit == by_unit[:, :1]).all() or not (cell_rows == cell_rows[:1]).all():
        return None
    return by_unit[:, 0], cell_rows[0]
    return None
