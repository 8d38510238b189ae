"""The microdata detail file (MDF): its record layouts and codes, as 2020 production writes them.

Four files, each layout in Parquet and in the pipe-delimited text the Census Bureau
published (header line unquoted, no quoting, one record a line), with the same column
names, order and codes in both (production's writers: ``programs/writer/mdf2020writer.py``
with the recoders of ``dhcp_to_mdf2020.py``, ``dhcp_hhgq_to_mdfpersons2020.py`` and
``hh2010_to_mdfunit2020.py``):

* ``mdf_persons.parquet`` / ``mdf_persons.txt``: one record per person, ``SCHEMA_TYPE_CODE``
  ``MPD``. A ``pl94`` release uses the P.L. 94-171 layout (:data:`PL94_PERSON_COLUMNS`); a
  schema with sex and age the full MDF2020 person layout (:data:`DHCP_PERSON_COLUMNS`),
  whose ``CITIZEN`` is 1 (citizen) or 2 (not) where the schema has citizenship
  (``dhcp-hhgq``, as production's ``citizen_recoder``) and 9 (not supported) elsewhere.
  ``EPNUM`` numbers the persons from 0 in block order. The 2020 DHC's ``dhcp-2020`` is
  written in production's DHC person layout (:data:`DHC_PERSON_COLUMNS`): ``GQTYPE``
  the detailed GQ type, ``RELSHIP`` (20-38) and ``LIVE_ALONE`` from ``relgq``.
* ``mdf_units.parquet`` / ``mdf_units.txt``: one record per housing unit (``RTYPE`` 2,
  ``HH_STATUS`` 1 occupied or 2 vacant) and per occupied group-quarters facility (``RTYPE``
  4, ``HH_STATUS`` 0), ``SCHEMA_TYPE_CODE`` ``MUD`` (:data:`UNIT_COLUMNS`).

Every code column is a string (production's Spark schema; dictionary-encoded in Parquet),
``EPNUM`` a 64-bit integer.

This module owns the layouts, the codes and the encoding of released persons and units
into Arrow record tables (:func:`person_records`, :func:`unit_records`). The text form
is :mod:`censusdp.io.mdf_text`; the writers of whole files :mod:`censusdp.io.mdf_write`;
the part files a run writes, one per run of blocks, :mod:`censusdp.io.mdf_parts`; the
readers, which decode the codes back to censusdp's columns, :mod:`censusdp.io.mdf_read`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import N_GQTYPES
from censusdp.data.schema import MAX_AGE, Schema
from censusdp.data.schema_dhc import GQ_CODES
from censusdp.errors import InputError, SchemaError

__all__ = [
    "CENRACE_CODES",
    "CITIZEN_CODES",
    "DHCP_PERSON_COLUMNS",
    "DHC_PERSON_COLUMNS",
    "GEO_COLUMNS",
    "GQTYPE_CODES",
    "GQTYPE_DHC_CODES",
    "LIVE_ALONE_CODES",
    "LIVE_ALONE_OF_RELGQ",
    "GQTYPE_PL_CODES",
    "HOUSEHOLD_UNIT_COLUMNS",
    "PL94_PERSON_COLUMNS",
    "QAGE_CODES",
    "RELSHIP_CODES",
    "RELSHIP_OF_RELGQ",
    "RTYPE_PERSON_CODES",
    "SCHEMA_BUILD_ID",
    "TWO_CODES",
    "UNIT_COLUMNS",
    "coded",
    "constant",
    "geo_columns",
    "geo_dictionaries",
    "iter_mdf_blocks",
    "mdf_person_columns",
    "person_layout",
    "person_records",
    "record_layouts",
    "unit_records",
]

SCHEMA_BUILD_ID = "1.1.0"
"""``MDF2020Recoder.schema_build_id_recoder`` (persons and units alike)."""

GEO_COLUMNS = ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLKGRPCE", "TABBLK")
_GEO_PARTS = {
    "TABBLKST": (0, 2),
    "TABBLKCOU": (2, 5),
    "TABTRACTCE": (5, 11),
    "TABBLKGRPCE": (11, 12),
    "TABBLK": (12, 16),
}

PL94_PERSON_COLUMNS = (
    "SCHEMA_TYPE_CODE",
    "SCHEMA_BUILD_ID",
    *GEO_COLUMNS,
    "EPNUM",
    "RTYPE",
    "GQTYPE_PL",
    "VOTING_AGE",
    "CENHISP",
    "CENRACE",
)
"""``MDF2020PersonPL94HistogramWriter.var_list``."""

DHCP_PERSON_COLUMNS = (
    "SCHEMA_TYPE_CODE",
    "SCHEMA_BUILD_ID",
    *GEO_COLUMNS,
    "EPNUM",
    "RTYPE",
    "GQTYPE",
    "RELSHIP",
    "QSEX",
    "QAGE",
    "CENHISP",
    "CENRACE",
    "CITIZEN",
    "LIVE_ALONE",
)
"""``MDF2020PersonWriter.var_list`` (the recodes of ``DHCPHHGQToMDFPersons2020Recoder``)."""

DHC_PERSON_COLUMNS = tuple(c for c in DHCP_PERSON_COLUMNS if c != "CITIZEN")
"""The 2020 DHC's person MDF (``mdf2020writerRevisedColumns.py``,
``DHCP_MDF2020_WriterRevisedColumnNames.var_list``, the recodes of
``dhcp_to_mdf2020.py``'s ``DHCPToMDF2020Recoder``): every variable from ``relgq``, sex,
age, Hispanic origin and race; no ``CITIZEN``."""

UNIT_COLUMNS = (
    "SCHEMA_TYPE_CODE",
    "SCHEMA_BUILD_ID",
    *GEO_COLUMNS,
    "RTYPE",
    "HH_STATUS",
)
"""``MDF2020H1HistogramWriter.var_list``."""

HOUSEHOLD_UNIT_COLUMNS = (
    "SCHEMA_TYPE_CODE",
    "SCHEMA_BUILD_ID",
    *GEO_COLUMNS,
    "RTYPE",
    "GQTYPE",
    "TEN",
    "VACS",
    "HHSIZE",
    "HHT",
    "HHT2",
    "CPLT",
    "UPART",
    "MULTG",
    "HHLDRAGE",
    "HHSPAN",
    "HHRACE",
    "PAOC",
    "P18",
    "P60",
    "P65",
    "P75",
    "PAC",
    "HHSEX",
)
"""``MDF2020HouseholdWriter.var_list``: the units of a release with a household run, each
occupied housing unit with its household's variables (:mod:`censusdp.io.mdf_households`)."""

# codes, indexed by censusdp's level (or value) of the attribute
RTYPE_PERSON_CODES = ("3", "5")  # housing-unit person, group-quarters person
GQTYPE_PL_CODES = tuple(str(g) for g in range(N_GQTYPES))  # "0" household, "1".."7" major type
GQTYPE_CODES = ("000", "101", "201", "301", "401", "501", "601", "701")  # major type's first code
TWO_CODES = ("1", "2")  # VOTING_AGE, CENHISP: level 0 -> "1", level 1 -> "2"
CENRACE_CODES = tuple(f"{c:02d}" for c in range(1, 64))
QAGE_CODES = tuple(str(a) for a in range(MAX_AGE + 1))  # no padding (production's int(age))
CITIZEN_CODES = ("2", "1", "9")  # citizen level 0 (not a citizen), 1 (citizen); 9 no schema
_NOT_SUPPORTED = {"RELSHIP": "99", "CITIZEN": "9", "LIVE_ALONE": "9"}
GQTYPE_DHC_CODES = ("000", *(f"{c:03d}" for c in GQ_CODES))  # relgq 18..41 -> index 1..24
RELSHIP_CODES = tuple(str(c) for c in range(20, 39))  # "20" householder .. "38" non-inst. GQ
RELSHIP_OF_RELGQ = np.asarray([0, 0, *range(1, 17)] + [17] * 15 + [18] * 9, dtype=np.int64)
"""Index into :data:`RELSHIP_CODES` of each ``relgq`` level (``relship_recoder``): both
householders 20, spouses and partners 21-24, ... other nonrelative 36, a person in an
institutional GQ (relgq 18-32) 37, in a noninstitutional one (33-41) 38."""
LIVE_ALONE_CODES = ("0", "1", "2")  # not in universe (GQ), living alone, not living alone
LIVE_ALONE_OF_RELGQ = np.asarray([1] + [2] * 17 + [0] * 24, dtype=np.int64)
"""``live_alone_recoder``: relgq 0 lives alone, 1-17 do not, a GQ person is not in universe."""
_STRING = pa.string()


def person_layout(schema: Schema) -> tuple[str, ...]:
    """The MDF person columns a schema is written with.

    Raises:
        SchemaError: for a schema that is neither ``pl94``-like nor carries sex and age.
    """
    names = {a.name for a in schema.attributes}
    if names <= {"hhgq", "votingage", "hispanic", "cenrace"}:
        return PL94_PERSON_COLUMNS
    if "relgq" in names and names <= {"relgq", "sex", "age", "hispanic", "cenrace"}:
        return DHC_PERSON_COLUMNS
    full = {"hhgq", "sex", "age", "hispanic", "cenrace", "citizen"}
    if {"sex", "age"} <= names <= full:
        return DHCP_PERSON_COLUMNS
    raise SchemaError(f"schema {schema.name!r} has no MDF2020 person layout (attributes {names})")


def record_layouts(schema: Schema, *, households: bool = False) -> dict[str, tuple[str, ...]]:
    """The columns of each MDF file of a release in ``schema``, by record type (the keys
    of :data:`censusdp.io.layout.MDF_FILES`); ``households``: the release has a household
    run, whose units carry their households (:data:`HOUSEHOLD_UNIT_COLUMNS`)."""
    units = HOUSEHOLD_UNIT_COLUMNS if households else UNIT_COLUMNS
    return {"persons": person_layout(schema), "units": units}


def mdf_person_columns(
    block_hist: sp.csr_matrix, hierarchy: Hierarchy, schema: Schema
) -> dict[str, np.ndarray]:
    """Expand a (blocks x cells) integer histogram into censusdp person columns (block order).

    ``block`` is each person's block index; the attribute columns are the schema's MDF
    columns (``hhgq``, ``votingage``, ...), encoded by :class:`~censusdp.io.mdf_write.MDFPersonWriter`.
    """
    h = sp.csr_matrix(block_hist)
    h.sum_duplicates()
    counts = h.data.astype(np.int64)
    block = np.repeat(np.arange(h.shape[0], dtype=np.int64), np.diff(h.indptr))
    block = np.repeat(block, counts)
    cells = np.repeat(h.indices.astype(np.int64), counts)
    cols: dict[str, np.ndarray] = {"block": block}
    cols.update(schema.mdf_columns(cells))
    return cols


def iter_mdf_blocks(
    block_hist: sp.csr_matrix, schema: Schema, persons_per_chunk: int = 1 << 22
) -> Iterator[dict[str, np.ndarray]]:
    """MDF person columns of consecutive runs of blocks, about ``persons_per_chunk`` each.

    Concatenating the chunks gives exactly :func:`mdf_person_columns` of the whole
    histogram; ``block`` holds each person's block index in the hierarchy.
    """
    h = sp.csr_matrix(block_hist)
    h.sum_duplicates()
    per_block = np.asarray(h.sum(axis=1)).ravel().astype(np.int64)
    cum = np.concatenate([[0], np.cumsum(per_block)])
    nb = h.shape[0]
    b0 = 0
    while b0 < nb:
        b1 = int(np.searchsorted(cum, cum[b0] + persons_per_chunk, side="right")) - 1
        b1 = min(max(b1, b0 + 1), nb)
        sub = h[b0:b1]
        cols = mdf_person_columns(sub, None, schema)  # type: ignore[arg-type]
        cols["block"] += b0
        yield cols
        b0 = b1


# -- encoding ---------------------------------------------------------------------------


def coded(indices: np.ndarray, codes: tuple[str, ...]) -> pa.Array:
    """``codes[indices]`` as a dictionary-encoded string column (Parquet: a string column)."""
    return pa.DictionaryArray.from_arrays(
        pa.array(np.asarray(indices, dtype=np.int32), pa.int32()), pa.array(codes, _STRING)
    )


def constant(value: str, n: int) -> pa.Array:
    """``value`` ``n`` times, dictionary-encoded."""
    return coded(np.zeros(n, dtype=np.int32), (value,))


def geo_dictionaries(
    blocks: Hierarchy | np.ndarray,
) -> dict[str, tuple[np.ndarray, tuple[str, ...]]]:
    """Per geography column: each block's index into the column's distinct codes, and them
    (``blocks``: a hierarchy's blocks, or the block geocodes of one part).

    Codes are ``X``-padded as production's ``format_geocode`` does for a short geocode.
    """
    codes = blocks.blocks if isinstance(blocks, Hierarchy) else np.asarray(blocks)
    out = {}
    for k, (a, z) in _GEO_PARTS.items():
        parts = np.asarray([b[a:z].ljust(z - a, "X") for b in codes], dtype=object)
        values, index = np.unique(parts.astype(str), return_inverse=True)
        out[k] = (index.ravel().astype(np.int32), tuple(str(v) for v in values))
    return out


def geo_columns(
    block: np.ndarray, geo: Mapping[str, tuple[np.ndarray, tuple[str, ...]]]
) -> dict[str, pa.Array]:
    """The five geography columns of records in blocks ``block`` (indices into ``geo``,
    :func:`geo_dictionaries`)."""
    return {k: coded(index[block], values) for k, (index, values) in geo.items()}


def person_records(
    cols: Mapping[str, np.ndarray],
    geo: Mapping[str, tuple[np.ndarray, tuple[str, ...]]],
    first: int,
    layout: tuple[str, ...],
) -> pa.Table:
    """The persons of one chunk in production's layout; ``EPNUM`` from ``first``."""
    block = np.asarray(cols["block"], dtype=np.int64)
    n = block.size
    hhgq = np.asarray(cols["hhgq"], dtype=np.int64)
    data: dict[str, pa.Array] = {
        "SCHEMA_TYPE_CODE": constant("MPD", n),
        "SCHEMA_BUILD_ID": constant(SCHEMA_BUILD_ID, n),
        **geo_columns(block, geo),
        "EPNUM": pa.array(np.arange(first, first + n, dtype=np.int64), pa.int64()),
        "RTYPE": coded((hhgq > 0).astype(np.int32), RTYPE_PERSON_CODES),
        "CENHISP": coded(cols["hispanic"], TWO_CODES),
        "CENRACE": coded(np.asarray(cols["cenrace"], dtype=np.int64) - 1, CENRACE_CODES),
    }
    if layout is PL94_PERSON_COLUMNS:
        data["GQTYPE_PL"] = coded(hhgq, GQTYPE_PL_CODES)
        data["VOTING_AGE"] = coded(cols["votingage"], TWO_CODES)
    elif layout is DHC_PERSON_COLUMNS:
        relgq = np.asarray(cols["relgq"], dtype=np.int64)
        data["GQTYPE"] = coded(np.maximum(relgq - 17, 0), GQTYPE_DHC_CODES)
        data["RELSHIP"] = coded(RELSHIP_OF_RELGQ[relgq], RELSHIP_CODES)
        data["LIVE_ALONE"] = coded(LIVE_ALONE_OF_RELGQ[relgq], LIVE_ALONE_CODES)
        data["QSEX"] = coded(np.asarray(cols["sex"], dtype=np.int64) - 1, TWO_CODES)
        data["QAGE"] = coded(np.asarray(cols["age"], dtype=np.int64), QAGE_CODES)
    else:
        age = np.asarray(cols["age"], dtype=np.int64)
        data["GQTYPE"] = coded(hhgq, GQTYPE_CODES)
        data["QSEX"] = coded(np.asarray(cols["sex"], dtype=np.int64) - 1, TWO_CODES)
        data["QAGE"] = coded(age, QAGE_CODES)
        for name, value in _NOT_SUPPORTED.items():
            data[name] = constant(value, n)
        if "citizen" in cols:  # dhcp-hhgq: production's citizen_recoder, 1 citizen, 2 not
            data["CITIZEN"] = coded(1 - np.asarray(cols["citizen"], dtype=np.int64), TWO_CODES)
    return pa.table({c: data[c] for c in layout})


def _unit_record_table(
    block: np.ndarray, status: np.ndarray, geo: Mapping[str, tuple[np.ndarray, tuple[str, ...]]]
) -> pa.Table:
    """Units in production's H1 layout; ``status`` 0 GQ facility, 1 occupied, 2 vacant."""
    n = block.size
    data = {
        "SCHEMA_TYPE_CODE": constant("MUD", n),
        "SCHEMA_BUILD_ID": constant(SCHEMA_BUILD_ID, n),
        **geo_columns(block, geo),
        "RTYPE": coded((status == 0).astype(np.int32), ("2", "4")),
        "HH_STATUS": coded(status, ("0", "1", "2")),
    }
    return pa.table({c: data[c] for c in UNIT_COLUMNS})


def unit_records(
    blocks: np.ndarray, housing_units: np.ndarray, occupied: np.ndarray, gq_facilities: np.ndarray
) -> pa.Table:
    """The unit records of ``blocks`` (geocodes): per block vacant, occupied, facilities."""
    hu = np.asarray(housing_units, dtype=np.int64)
    occ = np.asarray(occupied, dtype=np.int64)
    gq = np.asarray(gq_facilities, dtype=np.int64).sum(axis=1)
    if (occ > hu).any() or (occ < 0).any():
        b = int(np.flatnonzero((occ > hu) | (occ < 0))[0])
        raise InputError(f"block {blocks[b]}: {occ[b]} occupied of {hu[b]} housing units")
    per_block = np.stack([hu - occ, occ, gq], axis=1)  # vacant, occupied, facilities
    status_of = np.array([2, 1, 0], dtype=np.int64)
    block = np.repeat(np.repeat(np.arange(hu.size), 3), per_block.ravel())
    status = np.repeat(np.tile(status_of, hu.size), per_block.ravel())
    return _unit_record_table(block, status, geo_dictionaries(blocks))
