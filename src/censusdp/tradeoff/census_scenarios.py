"""The publication scenarios of ``censusdp tradeoff census``: their budgets and geography.

``standard`` publishes every geolevel down to the block; ``no_block`` (JASON JSR-19-2F
sec. 8) drops the block level's share into the higher levels
(:func:`no_block_budget`) and coarsens the input to one pseudo-block per block group
(:func:`coarsen_to_block_groups`). :func:`check_presets` checks that the presets can
serve their roles; :func:`build_scenarios` makes each scenario's input and budgets.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from censusdp.errors import ConfigError
from censusdp.io.atomic import write_parquet
from censusdp.privacy.budget import Budget
from censusdp.progress import Progress, say

__all__ = [
    "SCENARIOS",
    "Scenario",
    "build_scenarios",
    "check_presets",
    "coarsen_to_block_groups",
    "no_block_budget",
]

SCENARIOS: tuple[str, ...] = ("standard", "no_block")


def no_block_budget(budget: Budget) -> Budget:
    """``budget`` without its bottom (block) geolevel; the others' shares scaled up to sum to 1.

    JASON JSR-19-2F sec. 8: "forgo any public release of block-level data and reallocate
    that part of the privacy-loss budget to higher geographic levels". Each remaining
    share ``s_l`` becomes ``s_l / (1 - s_block)``. The new bottom level keeps the
    block group's name and queries and gets geocode length 16 (the input is coarsened
    by :func:`coarsen_to_block_groups`).

    Raises:
        ConfigError: if the budget has fewer than three geolevels.
    """
    from censusdp.privacy.budget import Budget

    levels = list(budget.geolevels)
    if len(levels) < 3:
        raise ConfigError(
            f"budget {budget.name!r} has {len(levels)} geolevels; dropping the block level "
            "needs at least three"
        )
    bottom = levels[-1][0]
    keep = levels[:-1]
    rest = 1 - Fraction(budget.geolevel_shares[bottom])
    new_levels = [*keep[:-1], (keep[-1][0], 16)]
    return Budget(
        schema=budget.schema,
        mechanism=budget.mechanism,
        total=budget.total,
        delta=budget.delta,
        geolevels=tuple(new_levels),
        geolevel_shares={n: Fraction(budget.geolevel_shares[n]) / rest for n, _ in keep},
        query_shares={n: dict(budget.query_shares[n]) for n, _ in keep},
        neighbours=budget.neighbours,
        name=f"{budget.name}-no-block",
        description=f"{budget.description} (no block-level release; block share reallocated)",
        notes=budget.notes,
    )


def coarsen_to_block_groups(
    input_dir: str | Path, out_dir: str | Path, *, block_group_length: int = 12
) -> dict[str, int]:
    """Copy a CEF with every geocode replaced by the first block code of its block group.

    Persons and units keep every other column, but for the block attributes of the
    units (``aian_area``, ``place``: :data:`censusdp.io.cef.OPTIONAL_UNIT_COLUMNS`),
    which a block has once: every unit of a block group takes those of the block whose
    code it now has (a block group across two places lies in the first block's). The
    result is a valid CEF whose "blocks" are whole block groups.

    Returns:
        ``{"persons", "units", "block_groups"}`` counts.
    """
    from censusdp.io.cef import OPTIONAL_UNIT_COLUMNS, read_cef_tables

    src, dst = Path(input_dir), Path(out_dir)
    dst.mkdir(parents=True, exist_ok=True)
    # the files read_cef reads (a directory of parts by its rule), every column kept
    tables = {n.removesuffix(".parquet"): t for n, t in read_cef_tables(src).items()}
    codes = np.concatenate(
        [
            np.asarray(t.column("geocode").to_numpy(zero_copy_only=False)).astype("U16")
            for t in tables.values()
        ]
    )
    prefix = codes.astype(f"U{block_group_length}")
    order = np.lexsort((codes, prefix))
    first = np.ones(order.size, dtype=bool)
    first[1:] = prefix[order][1:] != prefix[order][:-1]
    bg_names = prefix[order][first]
    bg_first = codes[order][first]
    for name, t in tables.items():
        g = np.asarray(t.column("geocode").to_numpy(zero_copy_only=False)).astype("U16")
        rep = bg_first[np.searchsorted(bg_names, g.astype(f"U{block_group_length}"))]
        i = t.column_names.index("geocode")
        t = t.set_column(i, "geocode", pa.array(rep.astype(object), pa.string()))
        if name == "units":
            t = _representative_attributes(t, g, OPTIONAL_UNIT_COLUMNS)
        write_parquet(t, dst / f"{name}.parquet")
    return {
        "persons": tables["persons"].num_rows,
        "units": tables["units"].num_rows,
        "block_groups": int(bg_names.size),
    }


def _representative_attributes(
    units: pa.Table, blocks: np.ndarray, attributes: Iterable[str]
) -> pa.Table:
    """``units`` (geocodes already coarsened; ``blocks`` their original blocks) with each
    block attribute column set, on every unit, to its value on the units of the block
    now named by the unit's geocode (that block has units: it was its group's first)."""
    rep = np.asarray(units.column("geocode").to_numpy(zero_copy_only=False)).astype("U16")
    order = np.argsort(blocks, kind="stable")
    source = order[np.searchsorted(blocks, rep, sorter=order)]
    for name in attributes:
        if name in units.column_names:
            i = units.column_names.index(name)
            units = units.set_column(i, name, units.column(name).take(pa.array(source)))
    return units


def check_presets(preset: str, attack_preset: str | None) -> tuple[Budget, Budget | None]:
    """The accuracy/risk preset (zCDP, measures ``detailed``) and the attack preset."""
    from censusdp.data.schema import get_schema
    from censusdp.io.budget_files import load_preset
    from censusdp.risk.release import detailed_rhos

    base = load_preset(preset)
    if base.privacy_measure != "zCDP":
        raise ConfigError(
            f"preset {preset!r} is {base.privacy_measure}; the Bayesian risk needs a zCDP "
            "(discrete Gaussian) preset such as pl94-2020"
        )
    detailed_rhos(base)  # raises ConfigError if the preset does not measure 'detailed' low
    if attack_preset is None:
        return base, None
    attack_base = load_preset(attack_preset)
    attrs = get_schema(attack_base.schema).attribute_names
    if "sex" not in attrs or "age" not in attrs:
        raise ConfigError(
            f"attack preset {attack_preset!r} has schema {attack_base.schema!r} without "
            "sex and age; the reconstruction needs both (e.g. dhc-lite-demo)"
        )
    return base, attack_base


@dataclass(frozen=True)
class Scenario:
    """One publication scenario: its input, the CEF read from it and its two budgets."""

    input: Path
    cef: Any
    budget: Budget
    attack_budget: Budget | None

    def describe(self, name: str) -> dict[str, Any]:
        """The scenario's entry in ``results.json``: geolevels, unit counts, shares."""
        geocodes = np.asarray(self.cef.units["geocode"])
        return {
            "geolevels": list(self.budget.geolevel_names),
            "units": {
                lv: int(np.unique(geocodes.astype(f"U{length}")).size) if length > 0 else 1
                for lv, length in self.budget.geolevels
            },
            "geolevel_shares": {k: float(v) for k, v in self.budget.geolevel_shares.items()},
            "description": (
                "every geolevel down to the block published"
                if name == "standard"
                else "no block-level release; the block share reallocated to the "
                "higher levels in proportion (JASON sec. 8)"
            ),
        }


def build_scenarios(
    names: list[str],
    inp: Path,
    work: Path,
    base: Budget,
    attack_base: Budget | None,
    progress: Progress,
) -> dict[str, Scenario]:
    """The scenarios' inputs and budgets (``no_block`` coarsens the CEF to block groups)."""
    from censusdp.io.cef import read_cef

    scenes = {"standard": Scenario(inp, read_cef(inp), base, attack_base)}
    if "no_block" in names:
        coarse = work / "cef_no_block"
        counts = coarsen_to_block_groups(inp, coarse)
        scenes["no_block"] = Scenario(
            coarse,
            read_cef(coarse),
            no_block_budget(base),
            no_block_budget(attack_base) if attack_base is not None else None,
        )
        say(
            progress, f"no-block scenario: {counts['block_groups']} block groups as the finest unit"
        )
    return scenes
