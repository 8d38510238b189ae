"""Reading the noisy measurement file (NMF) for people: one geolevel, decoded cells.

:func:`read_geolevel` reads the measurements of one geolevel, only the row groups (or
parts) that hold it; :func:`decode_cells` labels each row's cell with the levels of
its query's variables; :func:`nmf_geolevels` lists the levels present.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from censusdp.data.queries import make_query
from censusdp.data.schema import Schema
from censusdp.errors import InputError
from censusdp.io.nmf_files import (
    missing_columns,
    read_nmf_rows,
    read_nmf_table,
    read_part_index,
    row_group_keys,
)
from censusdp.io.parts import PART_INDEX

__all__ = [
    "decode_cells",
    "nmf_geolevels",
    "read_geolevel",
]


def _level_row_groups(pf: pq.ParquetFile, where: str) -> dict[str, list[int]] | None:
    """Row groups of each geolevel from the row-group keys; ``None`` if a group mixes levels."""
    md = pf.metadata
    groups: dict[str, list[int]] = {}
    for rg, key in enumerate(row_group_keys(md, where)):
        if md.row_group(rg).num_rows == 0:
            continue
        if key is None:
            return None
        groups.setdefault(key.geolevel, []).append(rg)
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
    if "geolevel" in missing_columns(pf.metadata):
        raise InputError(f"{p}: missing column 'geolevel'")
    return p, pf, _level_row_groups(pf, str(p))


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

    Read from the row-group keys when every row group holds one geolevel (files
    written by :class:`~censusdp.io.nmf_write.NMFWriter`), so no data page is read;
    otherwise from the ``geolevel`` column.

    Raises:
        InputError: if the path is missing or has no ``geolevel`` column.
    """
    p, _, groups = _open_levels(path)
    if groups is not None:
        return list(groups)
    by_level = _parts_by_level(p)
    if by_level is not None:
        return list(by_level)
    table = read_nmf_rows(p, ["geolevel"])
    return [str(v) for v in pc.unique(table.column("geolevel").cast(pa.string())).to_pylist()]


_BYPASSED = (
    " (on a spine release a geolevel whose every geounit is a single child, bypassed, has no rows)"
)


def read_geolevel(path: str | Path, geolevel: str, *, columns: list[str] | None = None) -> pa.Table:
    """The noisy measurements of one geolevel, reading only the row groups that hold it.

    The file is written one row group per (geolevel, chunk, query), each one's level
    in the file's row-group keys, so the row groups of a level are found from the file
    footer and only
    they are read; in a directory of parts, only the level's parts (found from its
    ``_parts.json``; never a file it does not list). A file whose row groups mix
    levels, or a directory whose index does not give each part's level, is read with a
    ``geolevel`` filter instead; a directory without an index is not read at all.
    Strings come back dictionary-encoded, as stored. With pandas::

        from censusdp.io.nmf_levels import decode_cells, read_geolevel
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
        return read_nmf_table(p, row_groups=groups[geolevel], columns=columns)
    by_level = _parts_by_level(p)
    if by_level is not None:  # a part directory: only the level's parts are opened
        if geolevel not in by_level:
            raise InputError(f"{p}: no geolevel {geolevel!r}; its geolevels are {list(by_level)}")
        return pa.concat_tables([read_nmf_table(f, columns=columns) for f in by_level[geolevel]])
    table = read_nmf_rows(p)
    table = table.filter(pc.equal(table.column("geolevel").cast(pa.string()), geolevel))
    if columns is not None:
        table = table.select(columns)
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
