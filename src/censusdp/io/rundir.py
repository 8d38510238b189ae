"""A release directory, opened: its files by role, its manifest, invariants, NMF, MDF
and tables.

Every reader of a release (``censusdp.api.Release``, ``validate``, ``run
--from-measurements``, ``infer``, ``evaluate``, the attacks) opens it through
:class:`RunDir`; the names of its files are those of :mod:`censusdp.io.layout`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import scipy.sparse as sp

from censusdp.data.geography import GeoLevels, Hierarchy
from censusdp.data.invariants import Invariants, held_pl94_from_table
from censusdp.data.schema import Schema, get_schema
from censusdp.data.schema_dhc import DHCH_2020
from censusdp.errors import InputError
from censusdp.io import layout
from censusdp.io.mdf_parts import mdf_part_dhc_units, mdf_part_households
from censusdp.io.nmf_files import read_nmf_rows
from censusdp.io.nmf_levels import read_geolevel
from censusdp.io.nmf_read import NMFReader
from censusdp.io.parts import read_parts
from censusdp.io.release_manifest import ReleaseManifest
from censusdp.io.spine import spine_geoids
from censusdp.io.tables import read_table, read_tables

__all__ = ["RunDir", "not_a_release", "read_manifest"]


def read_manifest(run_dir: str | Path) -> dict[str, Any]:
    """The manifest of a run directory (any censusdp output's ``manifest.json``).

    Raises:
        InputError: naming the file when it is missing or not a JSON object.
    """
    path = Path(run_dir) / layout.MANIFEST_FILE
    if not path.is_file():
        raise InputError(f"{path}: missing file (not a censusdp run directory?)")

    def refuse(token: str) -> None:
        raise ValueError(f"{token} is not JSON")

    try:
        manifest = json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise InputError(f"{path}: not a manifest (a JSON object)")
    return manifest


def not_a_release(run_dir: str | Path) -> str | None:
    """Why ``run_dir`` is not a release directory, in words; ``None`` when it is one.

    A release's manifest says ``"kind": "release"`` (a swapped one: ``"release":
    "swap"``); the other outputs of censusdp name their command or their own kind (a
    synthetic CEF's is ``"censusdp synthetic CEF"``). A manifest that says neither (an
    older or hand-made release) counts as a release: validating it says what it lacks.

    Raises:
        InputError: as :func:`read_manifest`, when there is no readable manifest.
    """
    manifest = read_manifest(run_dir)
    kind = manifest.get("kind")
    command = manifest.get("command")
    if kind == "release" or manifest.get("release") == "swap":
        return None
    if isinstance(kind, str):
        what = f"a {kind}" if " " in kind else f"a {kind!r} output"
    elif isinstance(command, str) and command != "run":
        what = f"the output of 'censusdp {command}'"
    else:  # an older or hand-made release: its own checks say what it lacks
        return None
    return f"{run_dir} is not a release but {what}"


@dataclass(frozen=True)
class RunDir:
    """A release directory: where each of its files is, and readers for them.

    Opening reads nothing; each reader reads its file when called and names the file
    in its :class:`~censusdp.errors.InputError` when it is missing or malformed.
    """

    path: Path

    def __init__(self, path: str | Path) -> None:
        object.__setattr__(self, "path", Path(path))

    # -- where each file is -------------------------------------------------------------

    @property
    def manifest_file(self) -> Path:
        return self.path / layout.MANIFEST_FILE

    @property
    def signature_file(self) -> Path:
        return self.path / layout.SIGNATURE_FILE

    @property
    def invariants_file(self) -> Path:
        return self.path / layout.INVARIANTS_FILE

    @property
    def invariant_totals_file(self) -> Path:
        return self.path / layout.INVARIANT_TOTALS_FILE

    @property
    def held_pl94_file(self) -> Path:
        return self.path / layout.HELD_PL94_FILE

    @property
    def spine_file(self) -> Path:
        return self.path / layout.SPINE_FILE

    def run_spine_file(self, run: str = "persons") -> Path:
        """The spine ``run`` was measured on: the unit run's own (``spine_units.parquet``)
        when the release has it, else ``spine.parquet`` (a release made before the unit
        run had its own spine)."""
        own = self.path / layout.SPINE_FILES[run]
        return own if own.is_file() else self.spine_file

    @property
    def tables_dir(self) -> Path:
        return self.path / layout.TABLES_DIR

    def nmf_file(self, run: str = "persons") -> Path:
        """The NMF of ``run`` (``persons`` or ``units``): a directory of parts."""
        return self.path / layout.NMF_FILES[run]

    def mdf_file(self, run: str = "persons", *, text: bool = False) -> Path:
        """The MDF of ``run``: Parquet, or MDF2020 text with ``text``."""
        return self.path / layout.MDF_FILES[run][1 if text else 0]

    def has_nmf(self, run: str = "persons") -> bool:
        return self.nmf_file(run).exists()

    def require(self, *files: Path, needed_by: str) -> None:
        """Raise :class:`InputError` naming the first of ``files`` that is missing."""
        for f in files:
            if not f.exists():
                raise InputError(f"{f}: missing file (needed by {needed_by})")

    # -- readers ------------------------------------------------------------------------

    def manifest(self) -> ReleaseManifest:
        """The release's ``manifest.json``, typed.

        Raises:
            InputError: naming the file when it is missing, not JSON, or holds an entry
                no release records.
        """
        return ReleaseManifest.from_dict(read_manifest(self.path), str(self.manifest_file))

    def invariants(self, geolevels: GeoLevels) -> tuple[Hierarchy, Invariants]:
        """The hierarchy of the release's blocks (on ``geolevels``) and its published
        invariants; the blocks of ``invariants.parquet`` are every block of the release.

        Raises:
            InputError: naming the file that is missing.
        """
        for f in (self.invariants_file, self.invariant_totals_file):
            if not f.is_file():
                raise InputError(f"{f}: missing file (not a release directory?)")
        blocks = pq.read_table(self.invariants_file)
        codes = np.asarray(blocks.column("geocode").to_numpy(zero_copy_only=False)).astype("U16")
        hierarchy = Hierarchy.from_blocks(codes, geolevels)
        totals = pq.read_table(self.invariant_totals_file)
        held = None
        if self.held_pl94_file.is_file():  # a DHC release held to a P.L. 94 release
            held = held_pl94_from_table(
                pq.read_table(self.held_pl94_file),
                hierarchy.blocks,
                get_schema("pl94").size,
                str(self.held_pl94_file),
            )
        return hierarchy, Invariants.from_tables(blocks, totals, hierarchy, held)

    def nmf_reader(
        self,
        run: str,
        schema: Schema,
        hierarchy: Hierarchy,
        run_schema: str | None = None,
        *,
        written: Mapping[str, str] | None = None,
    ) -> NMFReader:
        """The NMF of ``run`` read chunk by chunk, as the estimator reads it; with
        ``run_schema`` (a run that measures a unit histogram beside its main one, on
        ``run_schema``) only the measurements of ``schema``'s histogram. ``written``:
        the parts the reading run wrote itself and their writers' SHA-256
        (:class:`~censusdp.io.nmf_read.NMFReader`); without it every row group is
        checked as it is read."""
        return NMFReader(self.nmf_file(run), schema, hierarchy, run_schema, written)

    def nmf_table(self, run: str = "persons", geolevel: str | None = None) -> pa.Table:
        """The noisy measurements of ``run`` (of one geolevel: only its row groups), the
        parts its ``_parts.json`` lists."""
        if geolevel is None:
            return read_nmf_rows(self.nmf_file(run))
        return read_geolevel(self.nmf_file(run), geolevel)

    def nmf_with_geoids(self, run: str = "persons", geolevel: str | None = None) -> pa.Table:
        """:meth:`nmf_table` with a ``GEOID`` column after ``geocode``: each geounit's
        Census GEOID as the tables write it (``50001`` for the county whose NMF code is
        ``050001`` on the production spine), null where the geounit is not a tabulation
        geounit (:func:`censusdp.io.spine.spine_geoids`)."""
        table = self.nmf_table(run, geolevel)
        spine_file = self.run_spine_file(run)
        spine = spine_file if spine_file.is_file() else None
        pairs = pa.table(
            {
                "geolevel": _plain(table.column("geolevel")),
                "geocode": _plain(table.column("geocode")),
            }
        )
        # the distinct (geolevel, geocode) pairs, and each row's pair
        keys = pc.binary_join_element_wise(pairs["geolevel"], pairs["geocode"], "|")
        encoded = pc.dictionary_encode(keys).combine_chunks()
        uniq = np.asarray(encoded.dictionary.to_pylist(), dtype=object)
        levels = np.asarray([k.split("|", 1)[0] for k in uniq], dtype=object)
        codes = np.asarray([k.split("|", 1)[1] for k in uniq], dtype=object)
        ids = np.full(uniq.size, None, dtype=object)
        for name in sorted(set(levels.tolist())):
            at = np.flatnonzero(levels == name)
            ids[at] = spine_geoids(spine, name, codes[at].astype(str))
        geoid = pa.array(ids.tolist(), pa.string()).take(encoded.indices)
        where = table.column_names.index("geocode") + 1
        return table.add_column(where, "GEOID", geoid)

    def mdf_table(self, run: str = "persons") -> pa.Table:
        """The released records of ``run`` in production's layout (MDF2020 persons,
        ``MUD`` units): the parts ``_parts.json`` lists, in order."""
        return read_parts(self.mdf_file(run), what="MDF part")

    def mdf_households(
        self, hierarchy: Hierarchy, schema: str, gq_facilities: np.ndarray | None = None
    ) -> tuple[sp.csr_matrix, sp.csr_matrix | None]:
        """The households of a household run's unit MDF, decoded on ``hierarchy``'s blocks
        (every record checked, :mod:`censusdp.io.mdf_parts`): a ``household2010`` run's
        ``(blocks x 387,072)`` households and ``None``; a ``dhch-2020`` run's ``(blocks x
        1,578,528)`` households and ``(blocks x 35)`` units by ``tenvacgq``.
        ``gq_facilities``: the published facilities by type, which a ``household2010``
        MDF's facility records must give block by block.

        Raises:
            InputError: naming file, row and values of a record that is not one household,
                vacant unit or facility, or a record outside ``hierarchy``'s blocks.
        """
        path = self.mdf_file("units")
        if schema == DHCH_2020.name:
            households, tenure = mdf_part_dhc_units(path, hierarchy.blocks)
            return households, sp.csr_matrix(tenure)
        return mdf_part_households(path, hierarchy.blocks, gq_facilities=gq_facilities), None

    def table(self, name: str, sumlev: str | None = None) -> pa.Table:
        """One published table with GEOID, SUMLEV and NAME (optionally one summary level)."""
        return read_table(self.tables_dir, name, sumlev=sumlev)

    def tables(self) -> dict[str, pa.Table]:
        """Every published table, by name."""
        return read_tables(self.tables_dir)


def _plain(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A string column, dictionary-decoded if it was encoded."""
    if pa.types.is_dictionary(column.type):
        return column.cast(column.type.value_type)
    return column
