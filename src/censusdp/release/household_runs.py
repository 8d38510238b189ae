"""Whether a release has a household run, and the one-line refusal of the analyses that
do not read one yet.

A release's unit run is the housing units' occupancy (schema ``units``, 2020
production's P.L. 94) or households: the DDP's (schema ``household2010``,
docs/households.md) or the 2020 DHC's with their units (``dhch-2020``, docs/dhc-2020.md). Its manifest records the unit run's budget, with its schema, under
``units``. Whatever reads the MDF and the P.L. tables reads a household release as any
other (its unit records say which are occupied); what re-measures or re-estimates the
unit run from its NMF (error bars, inference) refuses it with :func:`refuse_household_run`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from censusdp.errors import ConfigError
from censusdp.io.rundir import RunDir

__all__ = [
    "HOUSEHOLD_SCHEMA",
    "HOUSEHOLD_SCHEMAS",
    "has_household_run",
    "refuse_household_release",
    "refuse_household_run",
]

HOUSEHOLD_SCHEMA = "household2010"
"""The schema of a household run's unit budget (the 2010 DDP's)."""

HOUSEHOLD_SCHEMAS = (HOUSEHOLD_SCHEMA, "dhch-2020")
"""The schemas of a household run: the DDP's and the 2020 DHC's (docs/dhc-2020.md)."""


def _schema_of(units: Any) -> Any:
    return units.get("schema") if isinstance(units, Mapping) else getattr(units, "schema", None)


def has_household_run(units: Any) -> bool:
    """Whether a release's unit run is a household run (the DDP's or the DHC's): ``units``
    is its recorded unit budget (a :class:`~censusdp.privacy.budget.Budget`, or the
    manifest's ``units`` record; ``None``: no unit run)."""
    return _schema_of(units) in HOUSEHOLD_SCHEMAS


def refuse_household_run(manifest: Mapping[str, Any], where: object, what: str) -> None:
    """Raise a one-line :class:`~censusdp.errors.ConfigError` (a usage mistake: exit 2)
    when the release whose manifest is ``manifest`` (at ``where``) has a household run,
    which ``what`` does not support yet. Callers refuse before any long work (reading
    the truth, validating the release).

    Raises:
        ConfigError: ``RUN/manifest.json: its unit run is a household run
            (household2010); <what> does not support household runs yet``.
    """
    if has_household_run(manifest.get("units")):
        raise ConfigError(
            f"{where}: its unit run is a household run ({_schema_of(manifest['units'])}); "
            f"{what} does not support household runs yet"
        )


def refuse_household_release(run_dir: str | Path, what: str) -> None:
    """:func:`refuse_household_run` of the release in ``run_dir``, from its manifest alone
    (a directory without one is left to the caller's own reading and checks).

    Raises:
        ConfigError: as :func:`refuse_household_run`.
    """
    run = RunDir(run_dir)
    if run.manifest_file.is_file():
        refuse_household_run(run.manifest().to_dict(), run.manifest_file, what)
