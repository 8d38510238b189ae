"""Whether a release has a household run, and which of its tables that run makes.

A release's unit run is the housing units' occupancy (schema ``units``, 2020
production's P.L. 94) or households: the DDP's (schema ``household2010``,
docs/households.md) or the 2020 DHC's with their units (``dhch-2020``,
docs/dhc-2020.md). Its manifest records the unit run's budget, with its schema, under
``units``. Whatever reads the MDF and the tables reads a household release as any other
(its unit records say which are occupied). The error bars' simulation re-releases a
household run with the persons (:func:`household_run_tables` are the tables it makes);
``infer``'s GLS reads the person run alone and leaves out the counts the household run
makes, saying so with :data:`NO_GLS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from censusdp.tables import release_table_names

__all__ = [
    "HOUSEHOLD_SCHEMA",
    "HOUSEHOLD_SCHEMAS",
    "NO_GLS",
    "has_household_run",
    "household_run_tables",
    "household_schema",
]

HOUSEHOLD_SCHEMA = "household2010"
"""The schema of a household run's unit budget (the 2010 DDP's)."""

HOUSEHOLD_SCHEMAS = (HOUSEHOLD_SCHEMA, "dhch-2020")
"""The schemas of a household run: the DDP's and the 2020 DHC's (docs/dhc-2020.md)."""

NO_GLS = "infer has no GLS of a household run"
"""What ``infer`` says of the counts a household run makes."""


def _schema_of(units: Any) -> Any:
    return units.get("schema") if isinstance(units, Mapping) else getattr(units, "schema", None)


def has_household_run(units: Any) -> bool:
    """Whether a release's unit run is a household run (the DDP's or the DHC's): ``units``
    is its recorded unit budget (a :class:`~censusdp.privacy.budget.Budget`, or the
    manifest's ``units`` record; ``None``: no unit run)."""
    return _schema_of(units) in HOUSEHOLD_SCHEMAS


def household_schema(manifest: Mapping[str, Any]) -> str | None:
    """The schema of the household run of the release whose manifest is ``manifest``
    (``household2010`` or ``dhch-2020``), ``None`` when it has none."""
    units = manifest.get("units")
    return str(_schema_of(units)) if has_household_run(units) else None


def household_run_tables(manifest: Mapping[str, Any]) -> tuple[str, ...]:
    """The tables of a release whose counts its household run makes: H1 (its occupied
    and vacant lines are the households; H1_001N, the housing units, is invariant) and
    the household tables (the DDP's H13, P18, P22, P15 or the DHC's P16, H3-H7,
    H9-H12); empty for a release without a household run, whose unit run is re-estimated
    with its persons."""
    schema = household_schema(manifest)
    if schema is None:
        return ()
    person = str(manifest.get("schema") or "pl94")
    persons_only = release_table_names(person)
    return ("H1", *(t for t in release_table_names(person, schema) if t not in persons_only))
