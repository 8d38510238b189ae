"""An earlier P.L. 94 release's H1 and persons, which a DHC release is held to (``h1``, ``pl94``).

Production's DHC unit run (``configs/production/dhc/unit_US.ini``: ``constraint_tables =
h1``, ``h1.path = $H1_Working_US``, ``h1.histogram = HHSTATUS``; ``theconstraints.* = h1,
...``) read each block's occupied and vacant housing units from the unit MDF of its earlier
P.L. 94 release (``programs/reader/from_mdf_recoder.py``, ``DHCRecoder``) and held the
households' total to the occupied units and the vacant units to the vacant ones, at every
geounit (``programs/constraints/Constraints_DHCH.py``, ``h1``). ``censusdp run --preset
dhc-2020 --h1-from RELEASE`` does the same with a censusdp P.L. 94 release of the same input
(:func:`read_h1_source`): its ``mdf_units`` (``HH_STATUS``) counted per block, after checking
that it is that input's release: the same input files (``input_sha256``), the same blocks
and housing units (``invariants.parquet``), and the very unit MDF its manifest hashed.

Production's DHC person run took its ``pl94`` invariant from the same P.L. 94 release
(``configs/production/dhc/person_US.ini``: ``constraint_tables = pl94``, read from the
person MDF by ``PL94Recoder``; ``Constraints_DHCP.py``, ``pl94``): every geounit's persons
by HHGQ x voting age x Hispanic x CENRACE, exact. :func:`read_pl94_persons` reads that
cross per block from the release's ``mdf_persons``, under the same checks.

The P.L. release's H1 is a constraint, not a measurement: the DHC release spends its own
budget only, and the P.L. release's, spent by that release, is recorded beside it
(:data:`H1_PRIVACY`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import person_histogram, pl94_view
from censusdp.data.invariants import N_HHGQ, Invariants
from censusdp.data.schema import get_schema
from censusdp.errors import ConfigError, InputError
from censusdp.io.atomic import sha256_of
from censusdp.io.mdf_read import iter_mdf_persons, mdf_files, mdf_unit_counts
from censusdp.io.rundir import RunDir, not_a_release

__all__ = [
    "H1_PRIVACY",
    "H1Source",
    "check_h1_release",
    "read_h1_source",
    "read_pl94_persons",
]

H1_PRIVACY = (
    "the P.L. 94 release's H1 is read as a constraint, not measured again: this release's "
    "privacy loss (rho, epsilon) is its own budget's alone; the P.L. 94 release's loss "
    "(spent_by_that_release) was spent by that release and is not composed here again"
)
"""What the manifest's ``h1_source.privacy`` says of the accounting."""


@dataclass(frozen=True, eq=False)
class H1Source:
    """A P.L. 94 release's H1 read for a DHC household run.

    Attributes:
        path: the P.L. 94 release directory.
        occupied: ``(blocks,)`` its occupied housing units per block of the run's
            tabulation hierarchy (the vacant ones are the rest of the housing units).
        manifest_sha256: the SHA-256 of its ``manifest.json``, which hashes its unit MDF.
        spent: the privacy loss its manifest records (``rho``, ``epsilon``, ``delta``).
        persons: ``(blocks, 2016)`` its persons per block in the ``pl94`` cells, read
            for a DHC person run held to them (:func:`read_pl94_persons`), or ``None``.
    """

    path: Path
    occupied: np.ndarray
    manifest_sha256: str
    spent: dict[str, Any]
    persons: sp.csr_matrix | None = None

    def record(self, housing_units: np.ndarray, *, households: bool = True) -> dict[str, Any]:
        """The manifest's ``h1_source`` entry (``housing_units`` per block, the same
        blocks, give the vacant units); without ``households`` (a person run alone,
        nothing held to the H1) no ``occupied`` and ``vacant``."""
        record: dict[str, Any] = {
            "release": str(self.path),
            "manifest_sha256": self.manifest_sha256,
        }
        if households:
            occupied = int(self.occupied.sum())
            record["occupied"] = occupied
            record["vacant"] = int(np.asarray(housing_units).sum()) - occupied
        if self.persons is not None:
            record["persons"] = int(self.persons.sum())
        record["privacy"] = {"note": H1_PRIVACY, "spent_by_that_release": self.spent}
        return record


def check_h1_release(release_dir: str | Path, input_sha256: dict[str, str]) -> Path:
    """The P.L. 94 release in ``release_dir``, checked from its manifest alone to be one
    ``--h1-from`` can read for this run's input; its resolved path.

    What the manifest settles is a usage mistake, found before the run reads its input:
    a directory that is no release, a release that is not a P.L. 94 release with its
    housing-unit run, or one of another input (``input_sha256``).

    Raises:
        ConfigError: in one line naming the file, the field and the value.
    """
    path = Path(release_dir).resolve()
    try:  # no manifest, or none a release writes: the reader's one line, a usage error
        problem = not_a_release(path)
        m = RunDir(path).manifest() if problem is None else None
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    if m is None:
        raise ConfigError(f"--h1-from: {problem}")
    where = RunDir(path).manifest_file
    if m.release is not None:
        raise ConfigError(
            f"{where}: release is {m.release!r}; --h1-from reads a differentially private "
            "P.L. 94 release of censusdp run"
        )
    if m.schema != "pl94":
        raise ConfigError(
            f"{where}: schema is {m.schema!r}; --h1-from reads a P.L. 94 release ('pl94')"
        )
    unit_schema = None if m.units is None else m.units.get("schema")
    if unit_schema != "units" or m.postprocess == "none":
        raise ConfigError(
            f"{where}: units is {unit_schema!r} with postprocess {m.postprocess!r}; --h1-from "
            "needs a P.L. 94 release that released its housing-unit run (schema 'units')"
        )
    if m.input_sha256 is not None and dict(m.input_sha256) != dict(input_sha256):
        differ = sorted(set(m.input_sha256.items()) ^ set(input_sha256.items()))[0][0]
        raise ConfigError(
            f"{where}: input_sha256 of {differ!r} is not this run's input file's: the H1 "
            "must be released from the same input"
        )
    return path


def read_h1_source(
    release_dir: str | Path,
    hierarchy: Hierarchy,
    inv: Invariants,
    input_sha256: dict[str, str],
    *,
    persons: bool = False,
) -> H1Source:
    """The occupied units per block of the P.L. 94 release in ``release_dir`` (and with
    ``persons`` its persons in the ``pl94`` cells, :func:`read_pl94_persons`), checked to
    be a release of this run's input (:func:`check_h1_release`, then its data).

    Args:
        release_dir: a censusdp P.L. 94 release with its housing-unit run.
        hierarchy: this run's tabulation hierarchy (its blocks, geocode order).
        inv: this run's invariants on ``hierarchy`` (housing units, facilities).
        input_sha256: this run's input files' SHA-256 (``manifest.json``'s ``input_sha256``).

    Raises:
        ConfigError: what :func:`check_h1_release` refuses (a usage mistake).
        InputError: in one line naming the file, the field and the value: a block
            missing or extra, housing units or facilities that are not this input's,
            or a unit MDF that is not the one its manifest hashed.
    """
    path = check_h1_release(release_dir, input_sha256)
    run = RunDir(path)
    m = run.manifest()
    _check_blocks(run, hierarchy, inv)
    units = _hashed_mdf(run, "units")
    counts = mdf_unit_counts(units, hierarchy)  # vacant, occupied, facilities per block
    for got, want, what in (
        (counts[:, 0] + counts[:, 1], inv.housing_units, "housing-unit records"),
        (counts[:, 2], inv.gq_facilities.sum(axis=1), "facility records"),
    ):
        bad = np.flatnonzero(got != want)
        if bad.size:
            b = int(bad[0])
            raise InputError(
                f"{units}: HH_STATUS: block {hierarchy.blocks[b]} has {got[b]} {what}, this "
                f"input's invariants {want[b]}"
            )
    spent = {k: m.get(k) for k in ("rho", "epsilon", "delta")}
    held = _pl94_persons(run, hierarchy, inv) if persons else None
    return H1Source(path, counts[:, 1].copy(), sha256_of(run.manifest_file), spent, held)


def read_pl94_persons(
    release_dir: str | Path, hierarchy: Hierarchy, inv: Invariants, input_sha256: dict[str, str]
) -> sp.csr_matrix:
    """The released persons of the P.L. 94 release in ``release_dir`` per block, in its
    2,016 ``pl94`` cells (HHGQ x voting age x Hispanic x CENRACE): the cross production's
    DHC person run held every geounit to (``Constraints_DHCP.py``, ``pl94``; read by
    ``PL94Recoder`` from the P.L. 94 person MDF).

    The release is checked as :func:`read_h1_source` checks it (this run's input, blocks
    and housing units), its person MDF is the one its manifest hashed, and its persons
    are possible under this run's invariants: the total population at the invariant
    level (``inv.total_level``) and above, and no person of an HHGQ group in a block
    without a unit of that type (the DHC person run could hold no such count).

    Args:
        release_dir: a censusdp P.L. 94 release with its housing-unit run.
        hierarchy: this run's tabulation hierarchy (its blocks, geocode order).
        inv: this run's invariants on ``hierarchy``.
        input_sha256: this run's input files' SHA-256 (``manifest.json``'s ``input_sha256``).

    Returns:
        ``(blocks, 2016)`` int64 counts, rows in ``hierarchy.blocks`` order.

    Raises:
        ConfigError: what :func:`check_h1_release` refuses (a usage mistake).
        InputError: in one line naming the file, the field and the value.
    """
    run = RunDir(check_h1_release(release_dir, input_sha256))
    _check_blocks(run, hierarchy, inv)
    return _pl94_persons(run, hierarchy, inv)


def _pl94_persons(run: RunDir, hierarchy: Hierarchy, inv: Invariants) -> sp.csr_matrix:
    """:func:`read_pl94_persons` of a release already checked to be of this input."""
    persons = _hashed_mdf(run, "persons")
    pl94 = get_schema("pl94")
    hist = sp.csr_matrix((hierarchy.blocks.size, pl94.size), dtype=np.int64)
    for cols in iter_mdf_persons(persons):
        hist = hist + person_histogram(pl94_view(cols), hierarchy, pl94)
    hhgq = pl94.cell_levels("hhgq")  # each pl94 cell's HHGQ group
    to_group = sp.csr_matrix(
        (np.ones(pl94.size, dtype=np.int64), (np.arange(pl94.size), hhgq)),
        shape=(pl94.size, N_HHGQ),
    )
    groups = np.asarray((hist @ to_group).toarray())
    has = np.concatenate([(inv.housing_units > 0)[:, None], inv.gq_facilities[:, 1:] > 0], axis=1)
    bad = np.argwhere((groups > 0) & ~has)
    if bad.size:
        b, g = (int(v) for v in bad[0])
        raise InputError(
            f"{persons}: HHGQ: block {hierarchy.blocks[b]} has {groups[b, g]} persons of "
            f"group {g} ({pl94.variable_levels('hhgq')[g]}) and no such unit in this input"
        )
    total = hierarchy.aggregate(groups.sum(axis=1, keepdims=True))
    want = hierarchy.aggregate(np.asarray(inv.population).reshape(-1, 1))
    for li in range(inv.total_level + 1):
        got, exp = np.asarray(total[li]).ravel(), np.asarray(want[li]).ravel()
        off = np.flatnonzero(got != exp)
        if off.size:
            u = int(off[0])
            raise InputError(
                f"{persons}: {hierarchy.geolevels[li].name} {hierarchy.geocodes[li][u]} has "
                f"{int(got[u])} persons, this input's invariant total population {int(exp[u])}"
            )
    return sp.csr_matrix(hist)


def _hashed_mdf(run: RunDir, which: str) -> Path:
    """The release's MDF of run ``which``, each of its files checked to be the one its
    manifest hashed (``files``)."""
    mdf = run.mdf_file(which)
    files = dict(run.manifest().files or {})
    for f in mdf_files(mdf):
        rel = f.relative_to(run.path).as_posix()
        if files.get(rel) != sha256_of(f):
            raise InputError(
                f"{f}: its SHA-256 is not the one {run.manifest_file} records (files.{rel})"
            )
    return mdf


def _check_blocks(run: RunDir, hierarchy: Hierarchy, inv: Invariants) -> None:
    """The P.L. release's ``invariants.parquet`` lists this run's blocks with their
    housing units."""
    table = pq.read_table(run.invariants_file, columns=["geocode", "housing_units"])
    codes = np.asarray(table.column("geocode").to_numpy(zero_copy_only=False)).astype("U16")
    hu = table.column("housing_units").to_numpy().astype(np.int64)
    missing = np.setdiff1d(hierarchy.blocks, codes)
    if missing.size:
        raise InputError(
            f"{run.invariants_file}: geocode: block {missing[0]} of this input is missing "
            f"({missing.size} blocks): the P.L. 94 release is of another geography"
        )
    extra = np.setdiff1d(codes, hierarchy.blocks)
    if extra.size:
        raise InputError(
            f"{run.invariants_file}: geocode: block {extra[0]} is not a block of this input "
            f"({extra.size} blocks): the P.L. 94 release is of another geography"
        )
    theirs = hu[np.argsort(codes, kind="stable")]
    bad = np.flatnonzero(theirs != inv.housing_units)
    if bad.size:
        b = int(bad[0])
        raise InputError(
            f"{run.invariants_file}: housing_units of block {hierarchy.blocks[b]} is "
            f"{theirs[b]}, this input's {inv.housing_units[b]}"
        )
