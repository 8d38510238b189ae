"""What ``censusdp infer`` computes that is neither reading nor writing: the lines it
reports, the zeros the invariants imply, which tabulation geounits are spine geounits,
and the records of its manifest (:mod:`censusdp.infer.release` reads and writes)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from censusdp.data.invariants import N_HHGQ, Invariants
from censusdp.errors import SchemaError
from censusdp.infer._algebra import Layout
from censusdp.infer._estimates import LevelStats
from censusdp.infer.amc import AMCResult
from censusdp.infer.gls import Z90, Z95, LineSet, make_lines
from censusdp.infer.published import PREFERRED_NOTE, published_variables
from censusdp.privacy.release_budget import release_privacy
from censusdp.release.household_runs import NO_GLS, household_schema
from censusdp.release.manifest import recorded_budgets
from censusdp.release.spine import ReleaseGeography
from censusdp.tables import PERSON_TABLES, table_definition
from censusdp.version import __version__

__all__ = [
    "ESTIMATE_COLUMNS",
    "HOUSING_UNITS",
    "MARGINS_NOTE",
    "TABULATION_NOTE",
    "amc_record",
    "household_lines",
    "output_manifest",
    "person_lines",
    "tabulation_match",
    "unit_lines",
    "zero_persons",
]

ESTIMATE_COLUMNS = (
    "geolevel",
    "geocode",
    "query",
    "estimate",
    "sd",
    "ci90_low",
    "ci90_high",
    "ci95_low",
    "ci95_high",
)


def person_lines(layout: Layout) -> LineSet:
    """``total`` and every line of P1-P5 (the ``pl94`` schema's cells)."""
    if layout.schema.name != "pl94":
        raise SchemaError(
            f"infer tabulates P1-P5 from the pl94 schema; this release measured "
            f"{layout.schema.name!r}"
        )
    names = ["total"]
    mats = [np.ones((layout.schema.size, 1))]
    for t in PERSON_TABLES:
        d = table_definition(t)
        names.extend(d.variables)
        mats.append(d.matrix.toarray())
    return make_lines(layout, names, np.concatenate(mats, axis=1))


def unit_lines(layout: Layout) -> LineSet:
    """H1 on the ``units`` schema (cell 0 vacant, 1 occupied housing units)."""
    d = table_definition("H1")
    hu = d.matrix.toarray()[[0, 1]]  # unit-histogram cells 2*0+0 (vacant), 2*0+1 (occupied)
    return make_lines(layout, list(d.variables), hu)


def zero_persons(layout: Layout, inv: Invariants) -> np.ndarray:
    """``(blocks, d)``: general combinations whose HHGQ group cannot occur in each block."""
    has = np.zeros((inv.blocks.size, N_HHGQ), dtype=bool)
    has[:, 0] = inv.housing_units > 0
    has[:, 1:] = inv.gq_facilities[:, 1:] > 0
    group = layout.general_of("hhgq")
    return ~has[:, group]


TABULATION_NOTE = (
    "estimates.parquet is of the spine's geounits (spine.parquet maps blocks to them); "
    "every tabulation geounit is in margins.parquet, keyed as tables/: one that is not "
    "one spine geounit (e.g. a block group, or a county split into AIAN and non-AIAN "
    "parts) is the sum of its blocks, its sd from the GLS covariance between spine "
    "geounits (censusdp.infer.tree_cov)"
)


def tabulation_match(geo: ReleaseGeography) -> dict[str, Any] | None:
    """Per tabulation level, how many of its geounits are exactly one spine geounit of
    the same name (the same blocks), whose estimate is then the tabulation geounit's."""
    if geo.spine is None:
        return None
    tab, h = geo.tabulation, geo.estimation
    out: dict[str, Any] = {"note": TABULATION_NOTE, "levels": {}}
    for ti, lv in enumerate(tab.geolevels.levels):
        if lv.name not in h.geolevels.names or ti == 0:
            continue
        si = h.geolevels.index(lv.name)
        # per block (spine order): its spine unit and its tabulation unit
        spine_unit = h.ancestor_index(si)
        tab_unit = geo.to_estimation(tab.ancestor_index(ti))
        pairs = np.unique(np.stack([spine_unit, tab_unit]), axis=1)
        spine_parts = np.bincount(pairs[0], minlength=h.n_units(si))
        tab_parts = np.bincount(pairs[1], minlength=tab.n_units(ti))
        same = (spine_parts[pairs[0]] == 1) & (tab_parts[pairs[1]] == 1)
        out["levels"][lv.name] = {
            "tabulation_geounits": int(tab.n_units(ti)),
            "estimated_as_one_spine_geounit": int(same.sum()),
        }
    return out


MARGINS_NOTE = (
    "margins.* holds every published geounit (US, State, County, Tract, BlockGroup, Block "
    "of the tabulation hierarchy, keyed by GEOID/SUMLEV/NAME exactly as tables/) and every "
    "published variable: value (the published count), gls_estimate with gls_sd, "
    "gls_moe90/95 (z sd) and integer intervals; sums of blocks across spine geounits take "
    "their sd from the GLS covariances between blocks (censusdp.infer.tree_cov); places.* "
    "the same for the county subdivisions (SUMLEV 060), places (160) and AIAN areas (250, "
    "280) whose blocks the release records (spine.parquet), value the sum of their "
    "published blocks, as the rows tables/ has for them"
)


ROUGH_NOTE = (
    "rough (the default): the release's MDF re-released K times (seeds) shows how the "
    "release maps a block's size, and a cell's count, to its released one; the released "
    "block sizes deconvolved by that law (EM with a smoothing step) give each block a "
    "plausible true size and its household cells deconvolved the same way (the small "
    "cells TopDown removes from populous blocks put back, in the block group's mix), "
    "block groups' totals, group quarters and invariants kept, and that rough truth is "
    "re-released K more times (rough_seeds; the last seed drew the sizes) gives the "
    "margins: the MDF is smoother than the truth (fewer empty blocks, fewer small cells "
    "in populous blocks), so re-releasing it alone under-states small areas' errors"
)
RELEASE_NOTE = (
    "release (--amc-truth release): the MDF as published (the Census Bureau's AMC construction); "
    "its margins run about 20% short at block groups and blocks (docs/inference.md)"
)


def amc_record(
    amc: AMCResult | None, seed: int, levels: tuple[str, ...] = (), groups: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The manifest's account of the published counts' margins (moe90, moe95);
    ``levels``: the tabulation levels' names, ``groups`` those of the place levels and
    districts (``amc.districts``' order)."""
    if amc is None:
        return {
            "simulations": 0,
            "note": "moe90/moe95 of the published values are null: run with --simulations K "
            "(K AMC re-releases) to compute them; gls_* columns are exact",
        }
    return {
        "simulations": len(amc.seeds),
        "seed": seed,
        "seeds": amc.seeds,
        "calibration_simulations": len(amc.second_seeds),
        "calibration_seeds": amc.second_seeds,
        "truth": amc.truth,
        "rough_seeds": amc.rough_seeds,
        "plausible_truth": ROUGH_NOTE if amc.truth == "rough" else RELEASE_NOTE,
        "method": "Approximate Monte Carlo: the plausible truth re-released K times with the "
        "release's own plan, mechanism, shares, spine, estimator and fidelity; a cell's "
        "margin is z * the root mean square of its K errors (re-released - plausible "
        "truth). With K2 > 0 "
        "(--calibration-simulations), the first replicate re-released K2 times gives per "
        "geolevel and variable the factor b / c (the first generation's root mean square "
        "error over the second's, pooled over the geounits) that moe90 and moe95 are "
        "multiplied by (an iterated bootstrap; 1 without)",
        "calibration_factors": _factor_summary(amc, levels, groups),
        "randomness": "seeded (numpy SeedSequence of the seed)",
        "preferred": PREFERRED_NOTE,
    }


def _factor_summary(
    amc: AMCResult, levels: tuple[str, ...], groups: tuple[str, ...]
) -> dict[str, dict[str, float]]:
    """Per geolevel (and place level, ``District`` for a plan), the calibration factor of
    the total and voting-age population and the range over every variable."""
    variables = list(published_variables())
    out = {}
    named = [(levels[i] if i < len(levels) else f"level {i}", f) for i, f in enumerate(amc.factors)]
    named += [
        (groups[i] if i < len(groups) else f"group {i}", f)
        for i, f in enumerate(amc.district_factors)
    ]
    for name, f in named:
        out[name] = {
            "P1_001N": round(float(f[variables.index("P1_001N")]), 4),
            "P3_001N": round(float(f[variables.index("P3_001N")]), 4),
            "min": round(float(f.min()), 4),
            "max": round(float(f.max()), 4),
        }
    return out


HOUSING_UNITS = "H1_001N"
"""The housing units, invariant at every block: exact at every level."""


def household_lines(manifest: Mapping[str, Any]) -> dict[str, str]:
    """The lines infer does not estimate for a release with a household run, each with
    why: the occupied and vacant housing units (H1_002N, H1_003N), which its household
    run makes (their margins of error are simulated: ``--simulations`` re-releases the
    household run too); empty for any other release (H1_001N, the housing units, is
    invariant)."""
    schema = household_schema(manifest)
    if schema is None:
        return {}
    why = f"{NO_GLS} ({schema}); their moe90 and moe95 come from --simulations"
    return {v: why for v in table_definition("H1").variables if v != HOUSING_UNITS}


def output_manifest(
    gls: Any,
    run_dir: Path,
    manifest_file: Path,
    command: list[str] | None,
    zero_constraints: bool,
    rows: int,
    stats: LevelStats,
) -> dict[str, Any]:
    """What ``infer``'s manifest says about the release (at ``run_dir``, its manifest
    ``manifest_file``), the method and the estimates (``gls`` a
    :class:`censusdp.infer.release.ReleaseGLS`)."""
    hierarchy = gls.hierarchy
    names = hierarchy.geolevels.names
    direct_named = {
        names[lv]: {"total": float(v[0])} for lv, v in gls.direct.items() if np.isfinite(v[0])
    }
    manifest_in = gls.manifest
    # the privacy loss its budgets compose to (what validation held the manifest to),
    # recomputed, never the manifest's own words
    spent = release_privacy(*recorded_budgets(manifest_in, str(manifest_file)))
    bottom = hierarchy.n_levels - 1
    return {
        "package_version": __version__,
        "command": command,
        "release": str(run_dir.resolve()),
        "release_rho": spent["rho"],
        "release_epsilon": spent["epsilon"],
        "release_delta": spent["delta"],
        "release_mechanism": spent["mechanism"],
        "method": "two-pass tree GLS (BLUE) from the noisy measurements; variances read from the NMF",
        "seed": None,
        "randomness": "none (deterministic computation)",
        "schema": gls.schema_name,
        "geolevels": [[lv.name, lv.length] for lv in hierarchy.geolevels.levels],
        "geounits": {
            lv.name: hierarchy.n_units(i) for i, lv in enumerate(hierarchy.geolevels.levels)
        },
        "spine": (manifest_in.get("spine") or {}).get("kind", "tabulation"),
        **({"tabulation_geounits": gls.tabulation} if gls.tabulation is not None else {}),
        "constraints": {
            "total_population_exact_at": names[gls.total_level],
            "housing_units_exact_at": names[bottom],
            "zeros_from_block_invariants": bool(zero_constraints),
            **(
                {"state_total_on_parts": gls.split_states}
                if getattr(gls, "split_states", 0)
                else {}
            ),
        },
        "housing_units": gls.occupancy,
        "interval_rule": (
            "low = max(ceil(estimate - z sd - t), 0), high = max(floor(estimate + z sd + t), 0), "
            "t = 1e-9 max(1, |estimate|) (round-off)"
        ),
        "z": {"ci90": Z90, "ci95": Z95},
        "columns": list(ESTIMATE_COLUMNS),
        "lines": list(gls.lines),
        "rows": rows,
        "levels": stats.to_dict(direct_named),
        "noise_variances": gls.noise_variances,
    }
