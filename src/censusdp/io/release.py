"""Write and read the files of a release: NMF, MDF (Parquet and MDF2020 text), invariants.

File contract (DESIGN.md):

* ``noisy_measurements.parquet``: ``geolevel``, ``geocode``, ``query``, ``cell`` (row
  within the query), ``value``, ``variance`` (plus ``mechanism``), one row per noisy
  answer, written one row group per (geolevel, query).
* ``mdf_persons.parquet``: ``geocode``, ``hhgq``, ``votingage``, ``hispanic``,
  ``cenrace`` (and ``sex``, ``age`` when the schema has them), one row per person.
* ``mdf_units.parquet``: ``geocode``, ``gqtype``, ``occupied``, one row per unit.
* ``mdf_persons.txt``: the same persons in the pipe-delimited MDF2020 layout with the
  Census column names (TABBLKST ... CENRACE).
* ``invariants.parquet`` / ``invariant_totals.parquet``: the public exact counts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import scipy.sparse as sp

from censusdp.errors import InputError
from censusdp.geography import Hierarchy
from censusdp.io.atomic import atomic_path
from censusdp.measure import MeasuredQuery, MeasurementSet
from censusdp.queries import make_query
from censusdp.schema import Schema

__all__ = [
    "MDF2020_COLUMNS",
    "NMF_COLUMNS",
    "mdf_person_columns",
    "read_nmf",
    "write_mdf_persons",
    "write_mdf_text",
    "write_mdf_units",
    "write_nmf",
]

NMF_COLUMNS = ("geolevel", "geocode", "query", "cell", "value", "variance", "mechanism")
MDF2020_COLUMNS = (
    "TABBLKST",
    "TABBLKCOU",
    "TABTRACTCE",
    "TABBLKGRPCE",
    "TABBLK",
    "EPNUM",
    "RTYPE",
    "GQTYPE_PL",
    "VOTING_AGE",
    "CENHISP",
    "CENRACE",
)


def _dict_strings(indices: np.ndarray, dictionary: np.ndarray) -> pa.Array:
    return pa.DictionaryArray.from_arrays(
        pa.array(indices, pa.int32()), pa.array(dictionary.astype(object), pa.string())
    )


def _nmf_table(mq: MeasuredQuery, geocodes: np.ndarray) -> pa.Table:
    n_units, n_rows = mq.values.shape
    n = n_units * n_rows
    return pa.table(
        {
            "geolevel": _dict_strings(np.zeros(n, np.int32), np.array([mq.geolevel])),
            "geocode": _dict_strings(
                np.repeat(np.arange(n_units, dtype=np.int32), n_rows), geocodes
            ),
            "query": _dict_strings(np.zeros(n, np.int32), np.array([mq.query])),
            "cell": pa.array(np.tile(mq.rows.astype(np.int32), n_units), pa.int32()),
            "value": pa.array(mq.values.reshape(-1)),
            "variance": pa.array(np.full(n, mq.variance, dtype=np.float64)),
            "mechanism": _dict_strings(np.zeros(n, np.int32), np.array([mq.mechanism])),
        }
    )


def write_nmf(ms: MeasurementSet, path: str | Path) -> int:
    """Write the noisy measurement file atomically; returns the number of rows."""
    total = 0
    schema = None
    with atomic_path(path) as tmp:
        writer = None
        try:
            for mq in ms:
                li = ms.geolevels.index(mq.geolevel)
                table = _nmf_table(mq, ms.geocodes[li])
                if writer is None:
                    schema = table.schema
                    writer = pq.ParquetWriter(tmp, schema, compression="zstd")
                writer.write_table(table.cast(schema), row_group_size=1 << 20)
                total += table.num_rows
        finally:
            if writer is not None:
                writer.close()
        if writer is None:
            pq.write_table(pa.table({c: pa.array([], pa.string()) for c in NMF_COLUMNS}), tmp)
    return total


def read_nmf(path: str | Path, schema: Schema, hierarchy: Hierarchy) -> MeasurementSet:
    """Read a noisy measurement file back into a :class:`MeasurementSet`.

    Raises:
        InputError: if a column is missing, a geocode is not a unit of the hierarchy,
            or a (geolevel, query) does not cover every unit of its level.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: missing file")
    pf = pq.ParquetFile(path)
    missing = [c for c in NMF_COLUMNS[:6] if c not in pf.schema_arrow.names]
    if missing:
        raise InputError(f"{path}: missing columns {missing}")
    table = pq.read_table(path)
    out = MeasurementSet(schema, hierarchy.geolevels, hierarchy.geocodes)
    gl = table.column("geolevel").to_numpy(zero_copy_only=False).astype(str)
    qu = table.column("query").to_numpy(zero_copy_only=False).astype(str)
    keys = np.char.add(np.char.add(gl, "\x00"), qu)
    ukeys, first = np.unique(keys, return_index=True)
    for key in ukeys[np.argsort(first)]:
        level, qname = str(key).split("\x00")
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
        if rows.size * n_units != sel.size:
            raise InputError(
                f"{path}: ({level}, {qname}) has {sel.size} values, expected "
                f"{n_units} units x {rows.size} cells"
            )
        mat = np.zeros((n_units, rows.size), dtype=values.dtype)
        mat[unit, np.searchsorted(rows, cells)] = values
        mech = "unknown"
        if "mechanism" in table.column_names:
            mech = str(table.column("mechanism")[int(sel[0])].as_py())
        q = make_query(schema, qname)
        out.queries[(level, q.name)] = MeasuredQuery(
            level, q.name, rows, mat, float(variance[0]), mech
        )
    return out


def mdf_person_columns(
    block_hist: sp.csr_matrix, hierarchy: Hierarchy, schema: Schema
) -> dict[str, np.ndarray]:
    """Expand a (blocks x cells) integer histogram into MDF person columns (block order)."""
    h = sp.csr_matrix(block_hist)
    h.sum_duplicates()
    counts = h.data.astype(np.int64)
    block = np.repeat(np.arange(h.shape[0], dtype=np.int64), np.diff(h.indptr))
    block = np.repeat(block, counts)
    cells = np.repeat(h.indices.astype(np.int64), counts)
    cols: dict[str, np.ndarray] = {"block": block}
    cols.update(schema.mdf_columns(cells))
    return cols


def _person_table(cols: dict[str, np.ndarray], hierarchy: Hierarchy) -> pa.Table:
    geocode = _dict_strings(cols["block"].astype(np.int32), hierarchy.blocks).cast(pa.string())
    out = {"geocode": geocode}
    for name in ("hhgq", "votingage", "hispanic", "cenrace", "sex", "age"):
        if name in cols:
            out[name] = pa.array(cols[name].astype(np.int64), pa.int64())
    return pa.table(out)


def write_mdf_persons(cols: dict[str, np.ndarray], hierarchy: Hierarchy, path: str | Path) -> int:
    """Write ``mdf_persons.parquet`` atomically; returns the number of persons."""
    table = _person_table(cols, hierarchy)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd", row_group_size=1 << 20)
    return table.num_rows


def write_mdf_text(cols: dict[str, np.ndarray], hierarchy: Hierarchy, path: str | Path) -> None:
    """Write the persons in the pipe-delimited MDF2020 layout (Census column names).

    Codes follow the 2020 MDF: ``RTYPE`` 3 housing-unit person, 5 GQ person;
    ``GQTYPE_PL`` 0 (household) or the major GQ type 1-7; ``VOTING_AGE`` 1 under 18,
    2 18 and over; ``CENHISP`` 1 not Hispanic, 2 Hispanic; ``CENRACE`` 01-63.
    """
    blocks = hierarchy.blocks
    parts = {
        "TABBLKST": np.array([b[0:2] for b in blocks]),
        "TABBLKCOU": np.array([b[2:5] for b in blocks]),
        "TABTRACTCE": np.array([b[5:11] for b in blocks]),
        "TABBLKGRPCE": np.array([b[11:12] for b in blocks]),
        "TABBLK": np.array([b[12:16] for b in blocks]),
    }
    idx = pa.array(cols["block"].astype(np.int32))
    data: dict[str, pa.Array] = {
        k: pa.DictionaryArray.from_arrays(idx, pa.array(v.astype(object))).cast(pa.string())
        for k, v in parts.items()
    }
    n = cols["block"].size
    hhgq = cols["hhgq"]
    data["EPNUM"] = pa.array(np.arange(1, n + 1, dtype=np.int64))
    data["RTYPE"] = pa.array(np.where(hhgq == 0, 3, 5).astype(np.int64))
    data["GQTYPE_PL"] = pa.array(hhgq.astype(np.int64))
    data["VOTING_AGE"] = pa.array((cols["votingage"] + 1).astype(np.int64))
    data["CENHISP"] = pa.array((cols["hispanic"] + 1).astype(np.int64))
    cenrace = np.char.zfill(cols["cenrace"].astype("U2"), 2)
    data["CENRACE"] = pa.array(cenrace.astype(object), pa.string())
    table = pa.table({c: data[c] for c in MDF2020_COLUMNS})
    with atomic_path(path) as tmp:
        pacsv.write_csv(
            table,
            tmp,
            write_options=pacsv.WriteOptions(delimiter="|", quoting_style="none"),
        )


def write_mdf_units(
    hierarchy: Hierarchy,
    housing_units: np.ndarray,
    occupied: np.ndarray,
    gq_facilities: np.ndarray,
    path: str | Path,
) -> int:
    """Write ``mdf_units.parquet``: per block, its housing units (occupied first) and facilities.

    Args:
        housing_units: ``(blocks,)`` invariant housing-unit counts.
        occupied: ``(blocks,)`` released occupied housing units (<= housing units).
        gq_facilities: ``(blocks, 8)`` invariant occupied facilities by type.
    """
    nb = hierarchy.blocks.size
    hu = housing_units.astype(np.int64)
    occ = occupied.astype(np.int64)
    block_hu = np.repeat(np.arange(nb), hu)
    # occupied flag: the first ``occ[b]`` housing units of block b are occupied
    start = np.repeat(np.cumsum(hu) - hu, hu)
    rank = np.arange(block_hu.size) - start
    occ_flag = rank < np.repeat(occ, hu)
    gq_block, gq_type = np.nonzero(gq_facilities)
    reps = gq_facilities[gq_block, gq_type].astype(np.int64)
    gq_block = np.repeat(gq_block, reps)
    gq_type = np.repeat(gq_type, reps)
    block = np.concatenate([block_hu, gq_block])
    gqtype = np.concatenate([np.zeros(block_hu.size, np.int64), gq_type.astype(np.int64)])
    occupied_col = np.concatenate([occ_flag, np.ones(gq_block.size, dtype=bool)])
    order = np.argsort(block, kind="stable")
    table = pa.table(
        {
            "geocode": _dict_strings(block[order].astype(np.int32), hierarchy.blocks).cast(
                pa.string()
            ),
            "gqtype": pa.array(gqtype[order], pa.int64()),
            "occupied": pa.array(occupied_col[order], pa.bool_()),
        }
    )
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")
    return table.num_rows
