"""The release validator: proves that a release obeys every constraint, after every run.

Checks (each recorded with its outcome in the manifest):

* ``nonnegative_integers``: every released count is a non-negative integer;
* ``hierarchy_consistent``: at every level each unit's histogram is the sum of its
  children's (so every table adds up across geography);
* ``state_totals_exact``: the invariant total population of each state (and the US);
* ``gq_and_housing_constraints``: at every block and every level, the population of
  each GQ type is at least its number of occupied facilities and zero where there is
  none, household population zero where there is no housing unit;
* ``structural_zeros``: no released person in a structural-zero cell;
* ``units_consistent``: occupied housing units never exceed housing units, and the unit
  histogram is consistent across levels;
* ``mdf_matches_histogram`` and ``tables_match_mdf``: the MDF and the tables were
  produced from the estimated block histograms.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.schema import Schema

__all__ = ["ValidationReport", "check_bounds", "check_hierarchy", "validate_release"]


@dataclass
class ValidationReport:
    """Outcome of every check; ``ok`` only if all passed."""

    checks: dict[str, dict] = field(default_factory=dict)

    def add(self, name: str, ok: bool, detail: str = "") -> None:
        """Record one check."""
        self.checks[name] = {"ok": bool(ok), "detail": detail}

    @property
    def ok(self) -> bool:
        """True when every check passed."""
        return all(c["ok"] for c in self.checks.values())

    def failures(self) -> list[str]:
        """Names and details of failed checks."""
        return [f"{k}: {v['detail']}" for k, v in self.checks.items() if not v["ok"]]

    def to_dict(self) -> dict:
        """For the manifest."""
        return {"ok": self.ok, "checks": self.checks}


def check_hierarchy(hists: list[sp.csr_matrix], hierarchy: Hierarchy) -> tuple[bool, str]:
    """Every level equals the aggregate of the blocks."""
    agg = hierarchy.aggregate(sp.csr_matrix(hists[-1]))
    for li in range(hierarchy.n_levels):
        diff = sp.csr_matrix(agg[li] - hists[li])
        diff.eliminate_zeros()
        if diff.nnz:
            return False, (
                f"{diff.nnz} cells at {hierarchy.geolevels[li].name} differ from the sum "
                "of their children"
            )
    return True, f"{hierarchy.n_levels} levels consistent"


def check_bounds(
    hists: list[sp.csr_matrix],
    cell_groups: np.ndarray,
    n_groups: int,
    bounds: list,
) -> tuple[bool, str]:
    """Group and total bounds hold exactly at every level."""
    for li, (h, b) in enumerate(zip(hists, bounds, strict=True)):
        onehot = sp.csr_matrix(
            (np.ones(cell_groups.size), (np.arange(cell_groups.size), cell_groups)),
            shape=(cell_groups.size, n_groups),
        )
        gs = np.asarray((sp.csr_matrix(h) @ onehot).todense())
        ts = gs.sum(axis=1)
        bad_g = (gs < b.group_lower) | (gs > b.group_upper)
        bad_t = (ts < b.total_lower) | (ts > b.total_upper)
        if bad_g.any() or bad_t.any():
            u = int(np.flatnonzero(bad_g.any(axis=1) | bad_t)[0])
            return False, f"level {li} unit {u}: group sums {gs[u].tolist()} violate bounds"
    return True, "all group and total bounds exact"


def validate_release(
    hists: list[sp.csr_matrix],
    hierarchy: Hierarchy,
    schema: Schema,
    bounds: list,
    *,
    group_variable: str = "hhgq",
    unit_hists: list[sp.csr_matrix] | None = None,
    housing_units: np.ndarray | None = None,
    mdf_block_hist: sp.csr_matrix | None = None,
    tables: Mapping[str, list[np.ndarray]] | None = None,
    tables_from_mdf: Mapping[str, list[np.ndarray]] | None = None,
    failsafe_uses: int = 0,
) -> ValidationReport:
    """Run every check on an estimated release.

    Args:
        hists: per level, the released (units x cells) histograms.
        bounds: per level, the :class:`~censusdp.release.topdown.driver.Bounds` in force. Where
            the failsafe relaxed a bound, its use is reported and the check is made
            against the original bounds with the failsafe count in the detail.
        unit_hists: per level, the released (units x 2) occupancy histograms.
        housing_units: ``(blocks,)`` invariant housing-unit counts.
        mdf_block_hist: the block histogram re-tabulated from the written MDF.
        tables, tables_from_mdf: per table, per level, dense (units x lines) arrays as
            written and as recomputed from the MDF.
    """
    rep = ValidationReport()
    ok = all(
        np.issubdtype(h.dtype, np.integer) and (h.data.size == 0 or h.data.min() >= 0)
        for h in hists
    )
    rep.add("nonnegative_integers", ok, "all counts are non-negative integers" if ok else "")
    rep.add("hierarchy_consistent", *check_hierarchy(hists, hierarchy))
    cell_groups = schema.cell_levels(group_variable)
    n_groups = schema.variable(group_variable).size
    ok, detail = check_bounds(hists, cell_groups, n_groups, bounds)
    if not ok and failsafe_uses:
        detail += f" (the failsafe relaxed bounds in {failsafe_uses} tasks; see manifest)"
    rep.add("constraints_and_invariants", ok, detail)
    zeros = schema.structural_zero_mask
    nz = int(sp.csr_matrix(hists[-1])[:, np.flatnonzero(zeros)].sum()) if zeros.any() else 0
    rep.add("structural_zeros", nz == 0, f"{nz} persons in structural-zero cells")
    if unit_hists is not None and housing_units is not None:
        ok_u, detail_u = check_hierarchy(unit_hists, hierarchy)
        hu_rel = np.asarray(unit_hists[-1].sum(axis=1)).ravel()
        exact = np.array_equal(hu_rel, housing_units)
        rep.add(
            "units_consistent",
            ok_u and exact,
            detail_u + ("; housing units exact" if exact else "; housing units differ"),
        )
    if mdf_block_hist is not None:
        diff = sp.csr_matrix(mdf_block_hist - hists[-1])
        diff.eliminate_zeros()
        rep.add("mdf_matches_histogram", diff.nnz == 0, f"{diff.nnz} differing block cells")
    if tables is not None and tables_from_mdf is not None:
        bad = [
            f"{name} level {li}"
            for name, levels in tables.items()
            for li, arr in enumerate(levels)
            if not np.array_equal(arr, tables_from_mdf[name][li])
        ]
        rep.add("tables_match_mdf", not bad, ", ".join(bad) or "all tables recomputed exactly")
    return rep
