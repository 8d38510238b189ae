"""The checks of a release with a household run, from its files: its unit MDF's
households against the invariants and against its person MDF.

* ``household_records``: every unit record is a housing unit, vacant or holding one
  household whose variables are those of a ``household2010`` cell that is not a
  structural zero, or a facility (:func:`censusdp.io.mdf_households.decode_households`
  reads every household an input can have; the DDP's zeros that only rule out the
  implausible, :data:`~censusdp.data.schema.HOUSEHOLD2010_CONSTRAINT_ZEROS`, are checked
  here);
* ``households_within_housing_units``: per block, households at most the housing units
  of ``invariants.parquet``, none where there are none;
* ``persons_households_consistent``: per block, from the two MDFs, the persons of the
  households (their ``HHSIZE``, 7 for 7 or more) at most the household persons
  (``GQTYPE`` 000), equal where no household has 7 or more, households where and only
  where there are household persons.

The household tables are checked with the others (``tables_match_mdf``).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.invariants import H1_OCCUPIED, Invariants
from censusdp.data.schema import Schema, get_schema
from censusdp.data.units_dhc import h1_of_occupied, h1_of_units, unit_constraint_violations
from censusdp.io.layout import HELD_PL94_FILE, INVARIANTS_FILE
from censusdp.release.consistency import household_persons
from censusdp.release.household_runs import HOUSEHOLD_SCHEMA
from censusdp.release.validate.report import ValidationReport

__all__ = ["check_dhc_households", "check_h1_source", "check_households"]


def _blocks(hierarchy: Hierarchy, rows: np.ndarray) -> str:
    return ", ".join(str(b) for b in hierarchy.blocks[rows[:3]])


def check_households(
    rep: ValidationReport,
    hierarchy: Hierarchy,
    inv: Invariants,
    persons: tuple[sp.csr_matrix, Schema],
    households: sp.csr_matrix | None,
    problems: list[str],
    consistent: bool = True,
) -> None:
    """Add the household checks to ``rep``: ``persons`` is the person MDF's block
    histogram and its schema, ``households`` the unit MDF's ``(blocks x 387,072)``
    households (``None`` when a record is not one: ``problems`` say which);
    ``persons_households_consistent`` only for a release whose persons were held to
    its households (``consistent``; ``--units independent`` runs them apart)."""
    if households is not None and not problems:
        # the MDF reads back every household an input can have; a release has none in
        # a structural zero, those the DDP ruled out though possible included
        mask = get_schema(HOUSEHOLD_SCHEMA).structural_zero_mask
        zeros = sp.csr_matrix(households)[:, np.flatnonzero(mask)]
        rows = np.flatnonzero(np.asarray(zeros.sum(axis=1)).ravel())
        if rows.size:
            problems = [
                f"{int(zeros.sum())} households in structural-zero cells (blocks "
                f"{_blocks(hierarchy, rows)})"
            ]
    rep.add(
        "household_records",
        households is not None and not problems,
        "; ".join(problems[:3])
        or "every occupied housing unit's record is one household, none in a structural zero",
    )
    if households is None:
        return
    hu = np.asarray(inv.housing_units, dtype=np.int64)
    n = np.asarray(households.sum(axis=1)).ravel().astype(np.int64)
    over = np.flatnonzero(n > hu)
    rep.add(
        "households_within_housing_units",
        over.size == 0,
        "every block's households are at most its housing units, none where there are none"
        if over.size == 0
        else f"{over.size} blocks have more households than housing units (first "
        f"{hierarchy.blocks[over[0]]}: {n[over[0]]} of {hu[over[0]]})",
    )
    if not consistent:
        return
    sch = get_schema(HOUSEHOLD_SCHEMA)
    size = sch.cell_levels("hhsize")
    sizes = np.asarray(households @ size.reshape(-1, 1)).ravel().astype(np.int64)
    large = np.asarray(households @ (size == 7).reshape(-1, 1)).ravel() > 0
    in_households = household_persons(*persons)
    too_many = np.flatnonzero(sizes > in_households)
    unequal = np.flatnonzero(~large & (sizes != in_households))
    without = np.flatnonzero((n == 0) & (in_households > 0))
    empty = np.flatnonzero((n > 0) & (in_households == 0))
    bad = [
        (too_many, "households larger than their persons"),
        (unequal, "household sizes that differ from the household persons"),
        (without, "household persons but no household"),
        (empty, "households but no household persons"),
    ]
    found = [f"{rows.size} blocks with {what} (first {_blocks(hierarchy, rows)})"
             for rows, what in bad if rows.size]  # fmt: skip
    rep.add(
        "persons_households_consistent",
        not found,
        "; ".join(found)
        or "every block's household persons are its households' sizes (at least, with a "
        "household of 7 or more), households where and only where there are household persons",
    )


def check_dhc_households(
    rep: ValidationReport,
    hierarchy: Hierarchy,
    inv: Invariants,
    dhc: tuple[sp.csr_matrix, np.ndarray] | None,
    problems: list[str],
) -> None:
    """Add the checks of a release with the 2020 DHC's household run, from its unit MDF
    read back (``dhc``: its ``dhch-2020`` households and ``(blocks x 35)`` units by
    ``tenvacgq``; ``None`` when a record is not a household, a vacant unit or a facility
    of the DHC's unit layout: ``problems`` say which):

    * ``dhc_unit_records``: every record decodes to one of them, no household in a
      structural zero (:func:`~censusdp.io.mdf_households_dhc.decode_dhch_units`);
    * ``unit_constraints``: per block production's unit constraints
      (:func:`~censusdp.data.units_dhc.unit_constraint_violations`): ``h1``, households
      = occupied units and the vacant units, those ``invariants.parquet`` publishes as
      ``h1_occupied`` for a release held to a P.L. 94 release (``--h1-from``), else
      within the release (the released units' own),
      ``gq_vect`` against ``invariants.parquet`` (housing units and facilities by GQ
      type exact), ``owned`` and the structural zeros; upper levels are the blocks' sums.
    """
    rep.add(
        "dhc_unit_records",
        dhc is not None and not problems,
        "; ".join(problems[:3])
        or "every unit record is a household (none in a structural zero), a vacant unit or "
        "a facility of the DHC's unit layout",
    )
    if dhc is None:
        return
    households, units = dhc
    if inv.gq_types is None:
        rep.add("unit_constraints", False, "invariants.parquet has no facilities by GQ type")
        return
    held = inv.h1_occupied is not None
    h1 = h1_of_occupied(inv.housing_units, inv.h1_occupied) if held else h1_of_units(units)
    gqhh = np.column_stack([inv.housing_units, inv.gq_types])
    broken = {k: m for k, m in unit_constraint_violations(households, units, h1, gqhh).items()
              if m.any()}  # fmt: skip
    rep.add(
        "unit_constraints",
        not broken,
        "; ".join(
            f"{int(m.sum())} blocks break {k} (first {_blocks(hierarchy, np.flatnonzero(m))})"
            for k, m in broken.items()
        )
        or "per block: households = occupied units"
        + (f" = {H1_OCCUPIED} of {INVARIANTS_FILE} (the P.L. 94 release's H1)" if held else "")
        + ", housing units and facilities by GQ type = the invariants, households by tenure "
        "= the units', no structural zero",
    )


def check_h1_source(
    rep: ValidationReport, hierarchy: Hierarchy, inv: Invariants, record: object
) -> None:
    """``h1_source``, for a release whose manifest records one or whose invariants
    publish what it was held to (a DHC release held to a P.L. 94 release,
    ``--h1-from``): ``h1_occupied`` of ``invariants.parquet`` and the manifest's record
    both or neither, the occupied units 0..housing units per block, and the manifest's
    occupied and vacant totals those of ``h1_occupied``; the persons' held ``pl94``
    counts (``invariants_pl94.parquet``) and the record's ``persons`` both or neither,
    the same total. (The households = ``h1_occupied`` per block is ``unit_constraints``,
    the persons' cross at every geounit ``pl94_held``.)"""
    if record is None and inv.h1_occupied is None and inv.pl94_persons is None:
        return
    problems = []
    source = record if isinstance(record, dict) else {}
    if not isinstance(record, dict):
        problems.append(
            f"{INVARIANTS_FILE} publishes what a P.L. 94 release held (h1_occupied or "
            f"{HELD_PL94_FILE}) but the manifest records no h1_source"
        )
    elif inv.h1_occupied is None and "occupied" in source:
        problems.append(
            f"the manifest records an h1_source but {INVARIANTS_FILE} has no {H1_OCCUPIED}"
        )
    else:
        totals: dict[str, object] = {}
        occ = inv.h1_occupied
        if occ is not None:
            bad = np.flatnonzero((occ < 0) | (occ > inv.housing_units))
            if bad.size:
                problems.append(
                    f"{bad.size} blocks with {H1_OCCUPIED} outside 0..housing_units (first "
                    f"{_blocks(hierarchy, bad)})"
                )
            totals = {"occupied": int(occ.sum()), "vacant": int((inv.housing_units - occ).sum())}
        # held persons, or a person run alone (which holds nothing else)
        if occ is None or inv.pl94_persons is not None or "persons" in source:
            held = None if inv.pl94_persons is None else int(inv.pl94_persons.sum())
            totals["persons"] = held if held is not None else f"no {HELD_PL94_FILE}"
        problems += [
            f"h1_source.{key} is {source.get(key)!r}, the published invariants give {value}"
            for key, value in totals.items()
            if source.get(key) != value
        ]
    persons = (
        ""
        if inv.pl94_persons is None
        else f", the persons' pl94 counts of {HELD_PL94_FILE} its {source.get('persons')!r}"
    )
    units = (
        f"{H1_OCCUPIED} of {INVARIANTS_FILE} within the housing units, its totals the manifest's"
        if inv.h1_occupied is not None
        else "no households held"
    )
    rep.add(
        "h1_source",
        not problems,
        "; ".join(problems)
        or f"held to the P.L. 94 release {source.get('release')} (manifest SHA-256 "
        f"{source.get('manifest_sha256')}): {units}{persons}",
    )
