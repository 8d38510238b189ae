"""A release directory as its own files describe it: what the checks of its files share."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from censusdp.data.geography import GeoLevels, Hierarchy
from censusdp.data.invariants import Invariants
from censusdp.data.spine import UnitShares
from censusdp.io.rundir import RunDir
from censusdp.privacy.budget import Budget
from censusdp.release.manifest import recorded_budgets
from censusdp.release.spine import ReleaseGeography, geography_of_run


@dataclass(frozen=True, eq=False)
class Release:
    """A release rebuilt from its manifest and published files (:func:`rebuild`).

    ``budgets``: the recorded budgets of the ``persons`` and ``units`` runs (``None``
    for a release without a unit run); ``hierarchy``: the tabulation geography;
    ``inv``: the published invariants; ``measured``: per run, the geounits measured
    (the run's spine, or the tabulation's); ``shares``: per run, each measured
    geounit's share of its budget (``None`` without a spine's per-geounit budgets);
    ``geography``: the persons run's geography (its spine, when it has one)."""

    run: Path
    manifest: dict[str, Any]
    budgets: dict[str, Budget | None]
    hierarchy: Hierarchy
    inv: Invariants
    measured: dict[str, Hierarchy]
    shares: dict[str, UnitShares | None]
    geography: ReleaseGeography | None = None


def rebuild(run: Path, manifest: dict[str, Any]) -> Release:
    """The release in ``run`` as its manifest, ``invariants.parquet``,
    ``invariant_totals.parquet`` and (for a spine release) each run's spine file describe it.

    Raises:
        CensusDPError, OSError, KeyError, TypeError, pyarrow.ArrowException: when they
            do not describe one (the caller reports the geography as not rebuilt).
    """
    budgets = dict(zip(("persons", "units"), recorded_budgets(manifest, str(run)), strict=True))
    geolevels = GeoLevels.from_pairs([tuple(g) for g in manifest["geolevels"]])
    hierarchy, inv = RunDir(run).invariants(geolevels)
    # the geounits measured: the spine's (spine.parquet) or the tabulation's
    geo = geography_of_run(run, manifest, hierarchy)
    shares = {k: None if b is None else geo.for_run(k).unit_shares(b) for k, b in budgets.items()}
    measured = {k: geo.for_run(k).estimation for k in budgets}
    return Release(run, manifest, budgets, hierarchy, inv, measured, shares, geo)
