"""Reading the MDF back: its records, decoded to censusdp's columns and checked.

Every reader here takes either a directory of parts (:mod:`censusdp.io.mdf_parts`) or
a single file (releases made before part files, and ``censusdp protect``'s). The
readers (:func:`read_mdf_persons`, :func:`iter_mdf_persons`, :func:`read_mdf_units`)
decode the codes of :mod:`censusdp.io.mdf_records` back to censusdp's columns
(``geocode``, ``hhgq``, ``votingage``, ...), checking each one and naming file,
column, row and value of the first bad one. The units file carries no facility type
(production's H1 layout has none); :func:`read_mdf_units` types the facilities of
each block from the published invariants.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import (
    N_GQTYPES,
    UNIT_CELLS,
    person_histogram,
    pl94_view,
    unit_histogram,
)
from censusdp.data.schema import Schema, get_schema
from censusdp.errors import InputError
from censusdp.io.cef_households import RELGQ_MAJOR
from censusdp.io.layout import INVARIANTS_FILE, MDF_FILES
from censusdp.io.mdf_records import (
    CENRACE_CODES,
    CITIZEN_CODES,
    GEO_COLUMNS,
    GQTYPE_CODES,
    GQTYPE_DHC_CODES,
    GQTYPE_PL_CODES,
    LIVE_ALONE_CODES,
    LIVE_ALONE_OF_RELGQ,
    QAGE_CODES,
    RELSHIP_CODES,
    RELSHIP_OF_RELGQ,
    RTYPE_PERSON_CODES,
    TWO_CODES,
)
from censusdp.io.parts import part_files

__all__ = [
    "check_constant",
    "decode_codes",
    "decode_geocodes",
    "decode_persons",
    "decode_unit_status",
    "iter_mdf_persons",
    "mdf_files",
    "mdf_unit_counts",
    "open_parquet",
    "read_mdf_histograms",
    "read_mdf_persons",
    "read_mdf_records",
    "read_mdf_units",
]

_STRING = pa.string()


def mdf_files(path: str | Path) -> list[Path]:
    """The data files of an MDF file (Parquet or text by its suffix): itself, or the parts
    of its directory in order (:func:`censusdp.io.parts.part_files`)."""
    return part_files(path, Path(path).suffix, "MDF part")


def _column(table: pa.Table, name: str, path: object) -> pa.ChunkedArray:
    if name not in table.column_names:
        raise InputError(f"{path}: column {name!r} is missing (columns {table.column_names})")
    return table.column(name)


def _dictionary_chunks(col: pa.ChunkedArray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Each chunk as (its distinct values as strings, every row's index into them; -1 null).

    The files are written dictionary-encoded, so this reads only each chunk's small
    dictionary as strings; a plain column is dictionary-encoded first.
    """
    for chunk in col.chunks:
        if not pa.types.is_dictionary(chunk.type):
            if not pa.types.is_string(chunk.type) and not pa.types.is_large_string(chunk.type):
                chunk = pc.cast(chunk, _STRING)
            chunk = pc.dictionary_encode(chunk)
        values = chunk.dictionary
        if not pa.types.is_string(values.type) and not pa.types.is_large_string(values.type):
            values = pc.cast(values, _STRING)
        idx = chunk.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
        yield np.asarray(values.to_pylist(), dtype=object), idx


def decode_codes(
    table: pa.Table, name: str, codes: tuple[str, ...], path: object, first_row: int = 0
) -> np.ndarray:
    """The index in ``codes`` of every value of column ``name``; an unknown code is an error."""
    lookup = {c: i for i, c in enumerate(codes)}
    parts = []
    start = first_row
    for values, idx in _dictionary_chunks(_column(table, name, path)):
        mapped = np.asarray([lookup.get(v, -1) for v in values], dtype=np.int64)
        out = np.append(mapped, -1)[idx]  # index -1 (a null) maps to -1 too
        if out.size and out.min() < 0:
            row = int(np.flatnonzero(out < 0)[0])
            value = values[idx[row]] if idx[row] >= 0 else None
            raise InputError(
                f"{path}: column {name!r} row {start + row} has value {value!r}, "
                "not an MDF2020 code"
            )
        parts.append(out)
        start += idx.size
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def decode_geocodes(table: pa.Table, path: object) -> np.ndarray:
    """The 16-character block geocode of every row, from the five geography columns.

    Per chunk the rows' dictionary indices are packed into one integer key; only the
    distinct keys (one per block) are joined into strings.
    """
    cols = [_column(table, c, path) for c in GEO_COLUMNS]
    if len({tuple(len(k) for k in c.chunks) for c in cols}) > 1:  # chunks not aligned
        cols = [pa.chunked_array([pc.cast(c, _STRING).combine_chunks()]) for c in cols]
    parts = []
    per_column = [list(_dictionary_chunks(c)) for c in cols]
    for chunk in zip(*per_column, strict=True):
        key = np.zeros(chunk[0][1].size, dtype=np.int64)
        for values, idx in chunk:
            if idx.size and idx.min() < 0:
                raise InputError(f"{path}: a geography column has an empty value")
            key = key * (values.size + 1) + idx
        uniq, inverse = np.unique(key, return_inverse=True)
        pieces = []
        rest = uniq.copy()
        for values, _ in reversed(chunk):
            pieces.append(values[rest % (values.size + 1)])
            rest //= values.size + 1
        codes = ["".join(p).replace("X", "") for p in zip(*reversed(pieces), strict=True)]
        parts.append(
            np.asarray(codes, dtype="U16")[inverse.ravel()] if codes else np.zeros(0, "U16")
        )
    return np.concatenate(parts) if parts else np.zeros(0, dtype="U16")


def check_constant(table: pa.Table, name: str, value: str, path: object, first_row: int) -> None:
    """Check that every value of column ``name`` is ``value`` (:func:`decode_codes`)."""
    decode_codes(table, name, (value,), path, first_row)


def decode_persons(table: pa.Table, path: object, first_row: int = 0) -> dict[str, np.ndarray]:
    """Person records decoded to censusdp's columns (those of :func:`iter_mdf_persons`);
    ``first_row``: the file row of the table's first record, for messages."""
    check_constant(table, "SCHEMA_TYPE_CODE", "MPD", path, first_row)
    out = {"geocode": decode_geocodes(table, path)}
    rtype = decode_codes(table, "RTYPE", RTYPE_PERSON_CODES, path, first_row)
    if "GQTYPE_PL" in table.column_names:
        out["hhgq"] = decode_codes(table, "GQTYPE_PL", GQTYPE_PL_CODES, path, first_row)
        out["votingage"] = decode_codes(table, "VOTING_AGE", TWO_CODES, path, first_row)
    elif "CITIZEN" not in table.column_names and "RELSHIP" in table.column_names:
        out.update(_decode_dhc(table, path, first_row))
    else:
        out["hhgq"] = decode_codes(table, "GQTYPE", GQTYPE_CODES, path, first_row)
        out["sex"] = decode_codes(table, "QSEX", TWO_CODES, path, first_row) + 1
        out["age"] = decode_codes(table, "QAGE", QAGE_CODES, path, first_row)
        out["votingage"] = (out["age"] >= 18).astype(np.int64)
        citizen = decode_codes(table, "CITIZEN", CITIZEN_CODES, path, first_row)
        if citizen.size and citizen.max() < 2:  # written by a schema with citizenship
            out["citizen"] = citizen
        elif (citizen < 2).any():
            row = int(np.flatnonzero(citizen < 2)[0])
            raise InputError(
                f"{path}: row {first_row + row} has CITIZEN {CITIZEN_CODES[citizen[row]]!r} "
                "where other rows have 9 (not supported): every person or none has a citizenship"
            )
    out["hispanic"] = decode_codes(table, "CENHISP", TWO_CODES, path, first_row)
    out["cenrace"] = decode_codes(table, "CENRACE", CENRACE_CODES, path, first_row) + 1
    bad = rtype != (out["hhgq"] > 0)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{path}: row {first_row + row} has RTYPE {RTYPE_PERSON_CODES[rtype[row]]!r} but "
            f"group-quarters type {int(out['hhgq'][row])} (RTYPE 3 is a household person, 5 "
            "a group-quarters person)"
        )
    return out


def _decode_dhc(table: pa.Table, path: object, first_row: int) -> dict[str, np.ndarray]:
    """The 2020 DHC person layout's ``relgq`` (from ``GQTYPE``, ``RELSHIP`` and
    ``LIVE_ALONE``), ``hhgq`` (its major type), sex, age and voting age; a record whose
    three codes are not those of one ``relgq`` is an error naming its row."""
    gq = decode_codes(table, "GQTYPE", GQTYPE_DHC_CODES, path, first_row)
    relship = decode_codes(table, "RELSHIP", RELSHIP_CODES, path, first_row)
    alone = decode_codes(table, "LIVE_ALONE", LIVE_ALONE_CODES, path, first_row)
    # RELSHIP index k in 1..16 is relgq k + 1; a householder (index 0) is relgq 0 when
    # living alone (LIVE_ALONE index 1), 1 when not (index 2)
    relgq = np.where(gq > 0, gq + 17, np.where(relship == 0, alone - 1, relship + 1))
    relgq = np.clip(relgq, 0, len(LIVE_ALONE_OF_RELGQ) - 1)
    bad = (RELSHIP_OF_RELGQ[relgq] != relship) | (LIVE_ALONE_OF_RELGQ[relgq] != alone)
    bad |= (gq == 0) & (relship >= 17)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{path}: row {first_row + row} has GQTYPE {GQTYPE_DHC_CODES[gq[row]]!r}, "
            f"RELSHIP {RELSHIP_CODES[relship[row]]!r} and LIVE_ALONE "
            f"{LIVE_ALONE_CODES[alone[row]]!r}, which no person of the DHC has"
        )
    age = decode_codes(table, "QAGE", QAGE_CODES, path, first_row)
    return {
        "relgq": relgq,
        "hhgq": RELGQ_MAJOR[relgq],
        "sex": decode_codes(table, "QSEX", TWO_CODES, path, first_row) + 1,
        "age": age,
        "votingage": (age >= 18).astype(np.int64),
    }


def decode_unit_status(table: pa.Table, path: object) -> np.ndarray:
    """Each unit record's status: 0 an occupied facility, 1 an occupied housing unit, 2
    a vacant one. From ``HH_STATUS`` (the H1 layout), or in the household layout
    (:mod:`censusdp.io.mdf_households`, which has none) from ``RTYPE`` and ``VACS``
    (a vacant unit's ``VACS`` is 9 in the DDP's layout, its vacancy status 1..7 in the
    DHC's, :mod:`censusdp.io.mdf_households_dhc`; each layout's decoder checks which)."""
    if "HH_STATUS" in table.column_names or "VACS" not in table.column_names:
        return decode_codes(table, "HH_STATUS", ("0", "1", "2"), path)
    is_gq = decode_codes(table, "RTYPE", ("2", "4"), path) == 1
    vacant = decode_codes(table, "VACS", tuple(str(k) for k in range(10)), path) > 0
    return np.where(is_gq, 0, np.where(vacant, 2, 1)).astype(np.int64)


def open_parquet(path: str | Path) -> pq.ParquetFile:
    """A Parquet file opened for reading; an unreadable one is an :class:`InputError`."""
    try:
        return pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from None


def iter_mdf_persons(
    path: str | Path, batch_size: int = 1 << 22
) -> Iterator[dict[str, np.ndarray]]:
    """The persons of an ``mdf_persons.parquet`` a batch at a time, decoded.

    Each batch has ``geocode`` (16 characters), ``hhgq`` (0..7), ``votingage`` (0, 1),
    ``hispanic`` (0, 1), ``cenrace`` (1..63) and, for the full layout, ``sex`` (1, 2)
    and ``age``.

    Raises:
        InputError: naming file, column, row and value of the first code that is not
            one of the layout's.
    """
    for f in mdf_files(path):
        shown = _shown(path, f)
        first = 0
        for batch in open_parquet(f).iter_batches(batch_size=batch_size):
            table = pa.Table.from_batches([batch])
            yield decode_persons(table, shown, first)
            first += table.num_rows


def _shown(path: str | Path, file: Path) -> str:
    """How a message names a file: the path itself, or ``DIR/part-00003.parquet``."""
    return str(path) if Path(path) == file else f"{path}/{file.name}"


def read_mdf_records(path: str | Path) -> pa.Table:
    """Every record of a Parquet MDF file, its parts in order (one chunk or more each),
    as stored (production's codes, not decoded).

    A bad part is named in the message; rows in later messages count from the first
    part's first row.

    Raises:
        InputError: for a missing or unreadable file or part, or parts whose columns
            differ.
    """
    tables = []
    for f in mdf_files(path):
        try:
            tables.append(open_parquet(f).read())
        except pa.ArrowException as exc:
            raise InputError(f"{_shown(path, f)}: not a readable Parquet file ({exc})") from None
    if len(tables) == 1:
        return tables[0]
    try:
        return pa.concat_tables(tables)
    except pa.ArrowException as exc:
        raise InputError(f"{path}: its parts have different columns ({exc})") from None


def read_mdf_persons(path: str | Path) -> dict[str, np.ndarray]:
    """Every person of an ``mdf_persons.parquet``, decoded (columns of :func:`iter_mdf_persons`)."""
    parts = list(iter_mdf_persons(path))
    if not parts:
        pf = open_parquet(mdf_files(path)[0])
        return decode_persons(pf.schema_arrow.empty_table(), path)
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _facility_types(invariants: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Sorted block geocodes of ``invariants.parquet`` and their ``(blocks, 7)`` facilities."""
    codes = np.asarray(invariants.column("geocode").to_numpy(zero_copy_only=False)).astype("U16")
    counts = np.stack(
        [
            invariants.column(f"gq_facilities_{g}").to_numpy().astype(np.int64)
            for g in range(1, N_GQTYPES)
        ],
        axis=1,
    )
    order = np.argsort(codes, kind="stable")
    return codes[order], counts[order]


def read_mdf_units(
    path: str | Path, invariants: str | Path | pa.Table | None = None
) -> dict[str, np.ndarray]:
    """The units of an ``mdf_units.parquet`` as censusdp unit columns.

    Returns ``geocode``, ``gqtype`` (0 housing unit, 1..7 facility type) and ``occupied``.
    The MDF carries no facility type: each block's facilities (``RTYPE`` 4) are typed in
    order from the published facility counts of ``invariants`` (a table, or its path;
    by default ``invariants.parquet`` beside the units file).

    Raises:
        InputError: for an unknown code, a facility that is not ``HH_STATUS`` 0, or a
            block whose facility records differ in number from the published counts.
    """
    table = read_mdf_records(path)
    check_constant(table, "SCHEMA_TYPE_CODE", "MUD", path, 0)
    geocode = decode_geocodes(table, path)
    is_gq = decode_codes(table, "RTYPE", ("2", "4"), path) == 1
    status = decode_unit_status(table, path)
    bad = is_gq != (status == 0)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise InputError(
            f"{path}: row {row} has RTYPE {'4' if is_gq[row] else '2'} with HH_STATUS "
            f"{status[row]} (a facility, RTYPE 4, has HH_STATUS 0; a housing unit 1 or 2)"
        )
    gqtype = np.zeros(geocode.size, dtype=np.int64)
    gq_rows = np.flatnonzero(is_gq)
    if invariants is None:
        invariants = Path(path).parent / INVARIANTS_FILE  # beside the file or directory
    if not isinstance(invariants, pa.Table):
        if not Path(invariants).exists():
            if gq_rows.size:
                raise InputError(
                    f"{path}: its group-quarters facilities carry no type, and "
                    f"{invariants} (which publishes them by type) is missing"
                )
            return {"geocode": geocode, "gqtype": gqtype, "occupied": status == 1}
        invariants = pq.read_table(invariants)
    inv_codes, inv_counts = _facility_types(invariants)
    # facilities per invariant block, from the MDF
    gq_codes = geocode[gq_rows]
    pos = np.searchsorted(inv_codes, gq_codes)
    known = pos < inv_codes.size
    known[known] = inv_codes[pos[known]] == gq_codes[known]
    if not known.all():
        row = int(gq_rows[np.flatnonzero(~known)[0]])
        raise InputError(
            f"{path}: row {row} is a facility of block {geocode[row]}, which "
            f"{INVARIANTS_FILE} does not list"
        )
    got = np.bincount(pos, minlength=inv_codes.size)
    want = inv_counts.sum(axis=1)
    if not np.array_equal(got, want):
        b = int(np.flatnonzero(got != want)[0])
        raise InputError(
            f"{path}: block {inv_codes[b]} has {got[b]} group-quarters facility records "
            f"(RTYPE 4), {INVARIANTS_FILE} publishes {want[b]}"
        )
    # the facility records of a block, in row order, take the block's types in order
    order = gq_rows[np.argsort(pos, kind="stable")]
    types = np.repeat(np.tile(np.arange(1, N_GQTYPES), inv_codes.size), inv_counts.ravel())
    gqtype[order] = types
    return {"geocode": geocode, "gqtype": gqtype, "occupied": is_gq | (status == 1)}


def mdf_unit_counts(path: str | Path, hierarchy: Hierarchy) -> np.ndarray:
    """Per block of ``hierarchy``: ``(blocks, 3)`` vacant units, occupied units, facilities.

    Read from the units MDF alone (no facility types needed).

    Raises:
        InputError: for an unknown code or a record in a block not in ``hierarchy``.
    """
    table = read_mdf_records(path)
    check_constant(table, "SCHEMA_TYPE_CODE", "MUD", path, 0)
    geocode = decode_geocodes(table, path)
    rows = hierarchy.block_index(geocode)
    if rows.size and rows.min() < 0:
        bad = int(np.flatnonzero(rows < 0)[0])
        raise InputError(
            f"{path}: row {bad} is in block {geocode[bad]}, not a block of the release"
        )
    status = decode_unit_status(table, path)
    kind = np.array([2, 1, 0])[status]  # columns: vacant, occupied, facility
    out = np.zeros((hierarchy.blocks.size, 3), dtype=np.int64)
    np.add.at(out, (rows, kind), 1)
    return out


def read_mdf_histograms(
    run_dir: Path, hierarchy: Hierarchy, schema: Schema
) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
    """Read a release's MDF back in batches: (schema block histogram, ``pl94`` one, unit one).

    The persons file is read a batch at a time, so memory holds the sparse histograms,
    never every person; the units are typed from ``run_dir/invariants.parquet``.
    """
    run_dir = Path(run_dir)
    hist = sp.csr_matrix((hierarchy.blocks.size, schema.size), dtype=np.int64)
    pl94 = sp.csr_matrix((hierarchy.blocks.size, get_schema("pl94").size), dtype=np.int64)
    same = schema.name == "pl94"
    for cols in iter_mdf_persons(run_dir / MDF_FILES["persons"][0]):
        h = person_histogram(cols, hierarchy, schema)
        hist = hist + h
        pl94 = pl94 + (h if same else person_histogram(pl94_view(cols), hierarchy, "pl94"))
    units = unit_histogram(read_mdf_units(run_dir / MDF_FILES["units"][0]), hierarchy)
    if units.shape[1] != UNIT_CELLS:  # pragma: no cover - unit_histogram's contract
        raise InputError(f"{run_dir}: unit histogram has {units.shape[1]} cells")
    return sp.csr_matrix(hist), sp.csr_matrix(pl94), sp.csr_matrix(units)
