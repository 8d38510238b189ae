"""``spine.parquet``: every block's geounit at every level of the spine a release estimated on.

A release made on the production spine (``censusdp run --spine optimized``,
:mod:`censusdp.release.spine`) measures and estimates geounits that are not tabulation
geounits (AIAN / non-AIAN state parts, optimized block groups). This file lets anyone
recompute the noisy measurement file's geounits from block geocodes:

* ``geocode``: the block's 16-digit tabulation geocode (the MDF's and the tables'),
  sorted;
* one column per spine level with a non-empty code, named after the level (``State``,
  ``County``, ``Tract``, ``BlockGroup``, ``Block``): the code of the block's geounit at
  that level, as it appears in the NMF's ``geocode`` column for that level. Each code is
  a prefix of the block's ``Block`` code, of the level's length (the manifest's
  ``spine.geolevels``), and the ``Block`` code ends with the block's geocode.

Optional columns ``aian_area`` (4-digit AIANNHCE) and ``place`` (5-digit place or minor
civil division code), ``""`` for none, are the input's block attributes the spine was
built from: the published geographies off the hierarchy (places, county subdivisions,
AIAN areas: :func:`censusdp.tables.geoids.entity_geographies`).

The nation (``US``) has the empty code and no column; a spine rooted at a State
(Puerto Rico's, ``pl94-2020-pr``) has a ``State`` column with its one code.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from censusdp.data.geography import BLOCK_GEOCODE_LENGTH, DEFAULT_GEOLEVELS, GeoLevels
from censusdp.errors import InputError
from censusdp.io.atomic import write_parquet
from censusdp.tables.geoids import geoids

__all__ = ["read_spine", "read_spine_entities", "spine_geoids", "write_spine"]


def write_spine(columns: dict[str, np.ndarray], path: str | Path) -> None:
    """Write ``spine.parquet`` from ``geocode`` and one code column per level (in order)."""
    table = pa.table(
        {
            name: pa.array(np.asarray(col).astype(object), pa.string())
            for name, col in columns.items()
        }
    )
    write_parquet(table, path)


def read_spine(path: str | Path, geolevels: GeoLevels) -> tuple[np.ndarray, np.ndarray]:
    """The block geocodes and their spine block codes, checked against ``geolevels``.

    Returns:
        ``(geocodes, codes)``: sorted 16-digit geocodes and, aligned, each block's code
        at the bottom level of ``geolevels``.

    Raises:
        InputError: naming the file, column and value when the file is missing, lacks a
            level's column, or a code is not the prefix of its block's code of the
            level's length, or a block code does not end with its geocode.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: missing file (a spine release publishes its spine)")
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"{path}: not a readable Parquet file ({exc})") from None
    names = [lv.name for lv in geolevels.levels if lv.length > 0]
    missing = [c for c in ("geocode", *names) if c not in table.column_names]
    if missing:
        raise InputError(f"{path}: missing columns {missing}")

    def strings(name: str, width: int) -> np.ndarray:
        col = table.column(name)
        if pa.types.is_dictionary(col.type):
            col = col.cast(col.type.value_type)
        if col.null_count:
            raise InputError(f"{path}: column {name!r} has nulls")
        return np.asarray(col.to_numpy(zero_copy_only=False)).astype(f"U{max(width, 1)}")

    bottom = geolevels.levels[-1]
    geocodes = strings("geocode", BLOCK_GEOCODE_LENGTH + 1)
    codes = strings(bottom.name, bottom.length + 1)
    bad = np.char.str_len(codes) != bottom.length
    if bad.any():
        raise InputError(
            f"{path}: column {bottom.name!r} value {str(codes[bad][0])!r} is not "
            f"{bottom.length} characters"
        )
    tails = np.asarray([c[-BLOCK_GEOCODE_LENGTH:] for c in codes.tolist()], dtype="U16")
    off = tails != geocodes
    if off.any():
        i = int(np.flatnonzero(off)[0])
        raise InputError(
            f"{path}: row {i}: {bottom.name} code {str(codes[i])!r} does not end with its "
            f"geocode {str(geocodes[i])!r}"
        )
    if geocodes.size > 1 and not (geocodes[1:] > geocodes[:-1]).all():
        raise InputError(f"{path}: column 'geocode' is not sorted and unique")
    for lv in (lv for lv in geolevels.levels[:-1] if lv.length > 0):
        col = strings(lv.name, lv.length + 1)
        off = col != codes.astype(f"U{lv.length}")
        if off.any():
            i = int(np.flatnonzero(off)[0])
            raise InputError(
                f"{path}: row {i}: {lv.name} code {str(col[i])!r} is not the first "
                f"{lv.length} characters of the block's code {str(codes[i])!r}"
            )
    return geocodes.astype("U16"), codes.astype(f"U{bottom.length}")


def read_spine_entities(path: str | Path, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The columns ``names`` that ``spine.parquet`` has (block attributes, geocode order;
    ``""`` for none), as strings; those it lacks are left out.

    Raises:
        InputError: naming the file and column for a column with nulls.
    """
    path = Path(path)
    have = pq.read_schema(path).names
    cols = [n for n in names if n in have]
    if not cols:
        return {}
    table = pq.read_table(path, columns=cols)
    out = {}
    for name in cols:
        col = table.column(name)
        if col.null_count:
            raise InputError(f"{path}: column {name!r} has nulls")
        out[name] = np.asarray(col.to_numpy(zero_copy_only=False)).astype(str)
    return out


_TABULATION_LENGTHS = {lv.name: lv.length for lv in DEFAULT_GEOLEVELS.levels}
"""The code length of each tabulation geolevel, by the name a spine level shares with it."""


def spine_geoids(path: str | Path | None, geolevel: str, codes: np.ndarray) -> np.ndarray:
    """The Census GEOID of each NMF geounit of ``geolevel`` (``codes``, as the NMF's
    ``geocode`` column gives them), as the published tables write it; ``None`` where
    the geounit is not a tabulation geounit.

    A release on the tabulation geography (``path`` ``None``) measures tabulation
    geounits: the GEOID is :func:`censusdp.tables.geoids.geoids` of the code. On a spine
    (``path`` its ``spine.parquet``) a geounit of a level named as a tabulation level
    (``State``, ``County``, ``Tract``, ``BlockGroup``, ``Block``) has that level's GEOID
    when it holds exactly the blocks of one tabulation geounit (the non-AIAN part of a
    state without AIAN blocks, its counties and tracts; every block); an AIAN or
    non-AIAN part of a split unit, an optimized block group and a tract group have none.
    The root (``US``) is ``"US"``, as in the tables.
    """
    codes = np.asarray(codes).astype(str)
    length = _TABULATION_LENGTHS.get(geolevel)
    if length == 0:
        return np.full(codes.size, "US", dtype=object)
    if path is None:
        lengths = np.char.str_len(codes) if codes.size else np.zeros(0, int)
        if length is None or (lengths != length).any():
            return np.full(codes.size, None, dtype=object)
        return geoids(codes, length)
    out = np.full(codes.size, None, dtype=object)
    if length is None:
        return out
    table = pq.read_table(path, columns=["geocode", geolevel])
    units = np.asarray(table.column(geolevel).to_numpy(zero_copy_only=False)).astype(str)
    tab = np.asarray(table.column("geocode").to_numpy(zero_copy_only=False)).astype(f"U{length}")
    pairs = np.unique(np.stack([units, tab.astype(units.dtype)]), axis=1)
    u_vals, u_counts = np.unique(pairs[0], return_counts=True)
    t_vals, t_counts = np.unique(pairs[1], return_counts=True)
    one_tab = set(u_vals[u_counts == 1].tolist())
    one_unit = set(t_vals[t_counts == 1].tolist())
    same = {u: t for u, t in pairs.T.tolist() if u in one_tab and t in one_unit}
    hits = [same.get(c) for c in codes.tolist()]
    found = np.flatnonzero([h is not None for h in hits])
    if found.size:
        tab_codes = np.asarray([hits[i] for i in found], dtype=f"U{length}")
        out[found] = geoids(tab_codes, length)
    return out
