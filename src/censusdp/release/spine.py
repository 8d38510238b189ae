"""The geography a release measures and estimates on: the tabulation hierarchy or the spine.

``censusdp run --spine optimized`` (the default of the ``pl94-2020`` preset, which says
``spine = "optimized"``, as production's ``prod_default.ini`` says ``spine = opt_spine``)
measures and estimates on the production spine of :mod:`censusdp.data.spine`: each
state split into its AIAN and non-AIAN parts, block groups re-drawn around places /
MCDs, AIAN areas and GQ-type combinations, and every geounit measured with its own
share of the budget (:meth:`ReleaseGeography.unit_shares`: a single child is bypassed,
its parent takes its share). The MDF and the tables stay on the tabulation geography:
blocks are the same, only their order and the geounits above them differ.

A :class:`ReleaseGeography` carries both hierarchies and moves block rows between them
(the spine orders blocks by their spine code, the tabulation by geocode). It gives the
estimator the invariants and bounds on the spine:

* the total population is exact at the root (the US, the sum of the state totals);
* a State geounit (a state part) has an exact total when it is its state's only part;
  when a state has two parts, only their union is invariant: in a one-state input that
  union is the root, so the root-children solve holds it exactly through the parent
  constraint; in an input of several states the two parts are children of the US in
  one solve, grouped (``Bounds.unit_group``, ``Subproblem.child_group``) so that their
  totals sum to the state's invariant in the least squares, the rounding and the
  failsafe, as production's ``addGroupedChildTotalConstraint`` in its US-children
  solve (``areAIANSumConstraintsOn``);
* every state part's group-quarters bounds come from the part's own true total, as
  production's State-level ``hhgq_total_lb`` / ``hhgq_total_ub`` with the part's ``tot``
  invariant (:func:`censusdp.data.invariants.hhgq_bounds_from_total`): a part whose
  units are all of one type (housing units and no facility) gets its total exactly.
  The parts' totals are recorded in the manifest (``spine.state_part_population``), so
  a re-estimate holds the same bounds.

An input of fewer than the nation's states (:data:`NATION_STATES`) leaves the US
geounit to the nation on either hierarchy (:attr:`ReleaseGeography.nation_outside`).

The unit run has its own spine, as production's: its certificates set
``ignore_gqs_in_block_groups = True`` (the persons' ``False``), so its block groups are
drawn around places / MCDs and AIAN areas only (:func:`unit_rules`). The state parts,
counties and tracts are the persons'; the block groups, the order of the blocks and the
bypassed geounits may differ. :attr:`ReleaseGeography.units` is the unit run's
geography (:meth:`ReleaseGeography.for_run`), and each spine is published in its own
file (``SPINE_FILES``).

Nothing here reads the input; :func:`geography_for_input` is given the validated unit
columns, :func:`geography_of_run` the run directory's ``spine.parquet``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from fractions import Fraction
from functools import cached_property
from math import lcm
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from censusdp.data.geography import DEFAULT_GEOLEVELS, GeoLevels, Hierarchy
from censusdp.data.invariants import (
    N_HHGQ,
    Bounds,
    Invariants,
    hhgq_bounds_from_total,
    level_bounds,
)
from censusdp.data.spine import (
    BlockAttributes,
    Spine,
    SpineRules,
    UnitShares,
    build_spine,
    bypass_shares,
)
from censusdp.errors import ConfigError, InputError
from censusdp.io.layout import MANIFEST_FILE, SPINE_FILE, SPINE_FILES
from censusdp.io.spine import read_spine, read_spine_entities, write_spine
from censusdp.privacy.budget import SPINES, Budget
from censusdp.progress import Progress, say

__all__ = [
    "ENTITY_COLUMNS",
    "NATION_STATES",
    "SPINE_CHOICES",
    "ReleaseGeography",
    "block_attributes",
    "geography_for_input",
    "geography_of_run",
    "requested_spine",
    "spine_rules_for",
    "tabulation_levels",
    "unit_rules",
]

NATION_STATES = 51
"""The states of production's national run (the 50 states and DC; Puerto Rico is its own
run): an input with fewer is some of the nation."""

SPINE_CHOICES = SPINES
"""``tabulation``: state > county > tract > block group > block by geocode;
``optimized``: the 2020 production spine."""


def unit_rules(rules: SpineRules) -> SpineRules:
    """The unit run's spine rules from the persons': the same, but GQ types are not
    block-group entities (production's unit run, ``ignore_gqs_in_block_groups = True``
    in the US and PR units certificates; ``define_spines.py``, ``gq_off_spine_entities``)."""
    return replace(rules, gq_entities=False)


def spine_rules_for(budget: Budget) -> SpineRules:
    """Production's spine rules for ``budget``: rooted at the State when it has no US
    level (Puerto Rico); the DHC's prim spine when it has a ``Prim`` level, with the
    tabulation block groups among the block-group entities (``person_US.ini``:
    ``prim_spine = True``, ``target_orig_block_groups = 1``)."""
    prim = "Prim" in budget.geolevel_names
    return SpineRules(
        nation="US" in budget.geolevel_names, prim=prim, target_original_block_groups=prim
    )


def tabulation_levels(budget: Budget) -> GeoLevels:
    """The tabulation hierarchy of a release in ``budget``: the budget's own geolevels,
    or for a prim-spine budget (the DHC's, whose Prim and tract-subset levels are not
    prefixes of the block geocode) the standard US > State > County > Tract >
    BlockGroup > Block (:data:`censusdp.data.geography.DEFAULT_GEOLEVELS`)."""
    if "Prim" in budget.geolevel_names:
        return DEFAULT_GEOLEVELS
    return GeoLevels.from_pairs(list(budget.geolevels))


def requested_spine(spine: str | None, budget: Budget) -> str:
    """The spine asked for: ``spine`` if given, else the budget's, else ``tabulation``.

    Raises:
        ConfigError: for a name that is not one of :data:`SPINE_CHOICES`.
    """
    choice = spine if spine is not None else (budget.spine or "tabulation")
    if choice not in SPINE_CHOICES:
        raise ConfigError(f"--spine must be one of {list(SPINE_CHOICES)}, got {choice!r}")
    return choice


ENTITY_COLUMNS = ("aian_area", "place")
"""The block attributes that name published geographies off the hierarchy."""


def block_attributes(
    units: Mapping[str, np.ndarray], hierarchy: Hierarchy, inv: Invariants
) -> tuple[BlockAttributes, list[str]]:
    """The spine's block attributes from validated unit columns, aligned with the blocks.

    ``aian_area`` and ``place`` are per-unit columns, the same for every unit of a block
    (checked by :func:`censusdp.io.cef.read_cef`); the GQ types present come from the
    public facility invariants. Returns the attributes and the names of the optional
    columns the input has.
    """
    present = [c for c in ENTITY_COLUMNS if c in units]
    first = np.full(hierarchy.blocks.size, -1, dtype=np.int64)
    if present:
        idx = hierarchy.block_index(units["geocode"])
        rows = np.arange(idx.size, dtype=np.int64)
        first[idx[::-1]] = rows[::-1]  # any unit of the block (all agree)

    def per_block(name: str) -> np.ndarray | None:
        if name not in units:
            return None
        return np.asarray(units[name]).astype(str)[first]

    attrs = BlockAttributes(
        aian_area=per_block("aian_area"),
        place=per_block("place"),
        gq_types=inv.gq_facilities,
    )
    return attrs, present


@dataclass(frozen=True, eq=False)
class ReleaseGeography:
    """The tabulation hierarchy and, for a spine release, the spine estimated on.

    Attributes:
        tabulation: the geocode hierarchy (MDF, tables, invariants files).
        spine: the spine, or ``None`` to estimate on the tabulation hierarchy.
        note: a one-line note on how the spine was chosen (for the log and manifest).
        bypass: a spine geounit spends its own share (:func:`~censusdp.data.spine.bypass_shares`:
            a single child is not measured, its parent gets its share); ``False`` only
            for releases made before bypass (every unit at its geolevel's share).
        part_population: the true total population of each State geounit of the spine
            (hierarchy order), which bounds its groups (:meth:`person_bounds`);
            ``None`` for a release that did not record it (its parts' groups are
            bounded by the facilities alone).
        nation_outside: the input is some states of the nation, not all of it: the
            ``US`` level's share is spent on the nation as in production's national run
            (accounted, not simulated), so the US geounit is not measured, and every
            State part keeps its State share and query shares (it is never bypassed
            into the US). ``False`` for releases made before this (a one-state input's
            State then gave its share to an artificial US root, measured with the US
            query shares).
        unit_spine: the unit run's own spine (:func:`unit_rules`), or ``None`` when the
            unit run is measured on :attr:`spine` (the tabulation hierarchy, or a release
            made before the unit run had its own spine).
        entities: the input's block attributes that name published geographies off the
            hierarchy (``aian_area``, ``place``: :func:`censusdp.tables.geoids.entity_geographies`),
            per block in tabulation order; a spine release publishes them in
            ``spine.parquet`` beside the spine's codes. Empty: none (the tabulation
            hierarchy, or releases made before this).
    """

    tabulation: Hierarchy
    spine: Spine | None = None
    note: str | None = None
    bypass: bool = True
    part_population: np.ndarray | None = None
    nation_outside: bool = False
    unit_spine: Spine | None = None

    @cached_property
    def units(self) -> ReleaseGeography:
        """The unit run's geography: on its own spine (:attr:`unit_spine`) when it has
        one, else this one. Its state parts are the persons' (same part totals)."""
        if self.unit_spine is None:
            return self
        return replace(self, spine=self.unit_spine, unit_spine=None)

    def for_run(self, run: str) -> ReleaseGeography:
        """The geography run ``run`` (``persons``, ``units``) is measured and estimated on."""
        return self.units if run == "units" else self

    def unit_order(self) -> np.ndarray | None:
        """Block rows of the persons' estimation order -> the unit run's (``None`` when
        the runs share one order): ``units.to_estimation(to_tabulation(rows))``."""
        if self.unit_spine is None:
            return None
        assert self.spine is not None
        return np.argsort(self.spine.order)[self.unit_spine.order]

    entities: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """``"optimized"`` or ``"tabulation"``."""
        return "tabulation" if self.spine is None else "optimized"

    @property
    def estimation(self) -> Hierarchy:
        """The hierarchy measured and estimated on."""
        return self.tabulation if self.spine is None else self.spine.hierarchy

    @cached_property
    def _inverse(self) -> np.ndarray:
        assert self.spine is not None
        return np.argsort(self.spine.order)

    def to_estimation(self, rows: Any) -> Any:
        """Block rows in tabulation (geocode) order -> estimation order."""
        return rows if self.spine is None else rows[self.spine.order]

    def to_tabulation(self, rows: Any) -> Any:
        """Block rows in estimation order -> tabulation (geocode) order."""
        return rows if self.spine is None else rows[self._inverse]

    def invariants(self, inv: Invariants) -> Invariants:
        """The invariants with blocks in estimation order (codes of the estimation blocks).

        On the spine only the root's total is exact through ``total_level`` (0); the
        state parts' totals are set by :meth:`person_bounds`.
        """
        if self.spine is None:
            return inv
        return inv.reordered(self.spine.order, self.estimation.blocks, total_level=0)

    def exact_totals(self, inv: Invariants) -> dict[int, np.ndarray]:
        """Exact total populations by estimation level (``nan`` where a unit's is not).

        ``inv`` is in estimation order (:meth:`invariants`). Tabulation: the invariant
        level (the states); spine: the root, and at the State level each state part that
        is its state's only part (a part of a state of two: ``nan``; their union's total
        is exact, :meth:`state_part_groups`).
        """
        h = self.estimation
        pops = h.aggregate(inv.population.reshape(-1, 1))
        out = {inv.total_level: np.asarray(pops[inv.total_level], dtype=np.float64).ravel()}
        if self.spine is not None:
            groups = self.spine.state_groups()
            single = np.bincount(groups)[groups] == 1
            if single.any():
                state = h.geolevels.index("State")
                total = np.asarray(pops[state], dtype=np.float64).ravel()
                out[state] = np.where(single, total, np.nan)
        return out

    def state_part_groups(self, inv: Invariants) -> tuple[int, np.ndarray, np.ndarray] | None:
        """The states of two parts whose union's total is exact but not the root's:
        ``(State level, each State geounit's group or -1, each group's total)``, the
        groups numbered from 0; ``None`` when there is none (a one-state input's union
        is the root).

        ``inv`` is in estimation order (:meth:`invariants`).
        """
        if self.spine is None:
            return None
        groups = self.spine.state_groups()
        single = np.bincount(groups)[groups] == 1
        if int(groups.max()) == 0 or single.all():
            return None
        h = self.estimation
        state = h.geolevels.index("State")
        total = np.asarray(h.aggregate(inv.population.reshape(-1, 1))[state], dtype=np.float64)
        split, group = np.unique(groups[~single], return_inverse=True)
        unit_group = np.full(groups.size, -1, dtype=np.int64)
        unit_group[~single] = group.reshape(-1)
        sums = np.bincount(groups, weights=total.ravel())[split]
        return state, unit_group, np.rint(sums)

    def person_bounds(self, inv: Invariants) -> list[Bounds]:
        """Per estimation level, the person bounds implied by the invariants.

        ``inv`` is in tabulation order (as read or computed). On the spine: the root
        total is exact, and a state part's total is exact when it is its state's only
        part (its total is then the state's invariant); two parts' sum is held by the
        root's (one state per input; see the module docstring). With
        :attr:`part_population`, each part's groups are bounded by its own total as
        production bounds them (:func:`~censusdp.data.invariants.hhgq_bounds_from_total`,
        the stricter of those and the facilities' bounds), and its total by the sums of
        its group bounds.
        """
        if self.spine is None:
            return [Bounds(*b) for b in level_bounds(inv, self.tabulation)]
        h = self.estimation
        spine_inv = self.invariants(inv)
        out = [Bounds(*b) for b in level_bounds(spine_inv, h)]
        state = h.geolevels.index("State")
        groups = self.spine.state_groups()
        single = np.bincount(groups)[groups] == 1
        pops = np.asarray(h.aggregate(inv.population[self.spine.order].reshape(-1, 1))[state])
        b = out[state]
        lo, hi = b.total_lower.copy(), b.total_upper.copy()
        lo[single] = pops.ravel()[single]
        hi[single] = pops.ravel()[single]
        g_lo, g_hi = b.group_lower, b.group_upper
        if self.part_population is not None and g_lo.shape[1] == N_HHGQ:
            units = spine_inv.gq_facilities.astype(np.int64)
            units[:, 0] = spine_inv.housing_units
            by_part = np.asarray(h.aggregate(units)[state])
            p_lo, p_hi = hhgq_bounds_from_total(by_part, self.part_population)
            g_lo, g_hi = np.maximum(g_lo, p_lo), np.minimum(g_hi, p_hi)
            lo, hi = np.maximum(lo, g_lo.sum(axis=1)), np.minimum(hi, g_hi.sum(axis=1))
        out[state] = Bounds(g_lo, g_hi, lo, hi, *self._state_groups(groups, single, pops))
        return out

    @staticmethod
    def _state_groups(
        groups: np.ndarray, single: np.ndarray, pops: np.ndarray
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Each State geounit's child group (its state, for a state of two parts; ``-1``
        otherwise) and every state's invariant total, for an input of several states
        (one state's union is the root: its parent constraint holds it)."""
        if int(groups.max()) == 0 or single.all():
            return None, None
        totals = np.bincount(groups, weights=pops.ravel()).astype(np.float64)
        return np.where(single, -1, groups).astype(np.int64), np.rint(totals)

    def tabulation_histograms(self, hists: list[sp.csr_matrix]) -> list[sp.csr_matrix]:
        """Estimated histograms of every estimation level -> every tabulation level."""
        if self.spine is None:
            return hists
        block = sp.csr_matrix(self.to_tabulation(sp.csr_matrix(hists[-1])), dtype=np.int64)
        return [sp.csr_matrix(a, dtype=np.int64) for a in self.tabulation.aggregate(block)]

    def unit_shares(self, budget: Budget) -> UnitShares | None:
        """The per-geounit shares of ``budget`` on the spine; ``None`` without bypass.

        ``None`` for the tabulation hierarchy, a release made before bypass, or when no
        spine geounit has a single child (every unit at its geolevel's share).

        Raises:
            ConfigError: when the budget's geolevels are not the spine's, or a single
                child's share would move to a parent geolevel the budget measures no
                query at (it would be lost).
        """
        if self.spine is None and self.nation_outside:
            return self._nation_shares(budget)
        if self.spine is None or not self.bypass:
            return None
        h = self.estimation
        names = self._check_geolevels(budget)
        shares = bypass_shares(h, [budget.geolevel_shares[n] for n in names], top=self._top)
        if not shares.bypassed:
            return None
        for li, name in enumerate(names):
            moved = shares.numerators[li] != shares.level_numerators[li]
            if moved.any() and not budget.query_shares.get(name):
                raise ConfigError(
                    f"budget {budget.name!r} measures no query at {name}, so the budget of "
                    f"its {int(moved.sum())} single-child geounits' children cannot move "
                    "there (bypass); give the level queries or use --spine tabulation"
                )
        return shares

    def _check_geolevels(self, budget: Budget) -> list[str]:
        names = list(self.estimation.geolevels.names)
        if list(budget.geolevel_names) != names:
            where = "spine" if self.spine is not None else "tabulation hierarchy"
            raise ConfigError(
                f"budget {budget.name!r} has geolevels {list(budget.geolevel_names)}; "
                f"the {where}'s are {names}"
            )
        return names

    def _nation_shares(self, budget: Budget) -> UnitShares:
        """The tabulation hierarchy's shares when the US is the nation outside the input:
        every geounit at its geolevel's share (no bypass on the tabulation hierarchy),
        the US geounit at none (its budget is the nation's)."""
        h = self.estimation
        shares = [Fraction(budget.geolevel_shares[n]) for n in self._check_geolevels(budget)]
        den = lcm(*(s.denominator for s in shares))
        level_num = tuple(int(s.numerator * (den // s.denominator)) for s in shares)
        num = tuple(
            np.full(h.n_units(li), level_num[li] if li >= self._top else 0, dtype=np.int64)
            for li in range(h.n_levels)
        )
        return UnitShares(num, den, level_num)

    def _n_states(self) -> int:
        """The input's states (not state parts)."""
        if self.spine is not None:
            return int(self.spine.state_groups().max()) + 1
        h = self.tabulation
        return h.n_units(h.geolevels.index("State")) if "State" in h.geolevels.names else 0

    @property
    def _top(self) -> int:
        """The first level measured: 1 when the US is the nation outside the input."""
        return 1 if self.nation_outside else 0

    def write(self, out_dir: Path, *, with_units: bool = True) -> None:
        """Write each run's spine into ``out_dir`` (``SPINE_FILES``: the persons' and,
        when it has its own and ``with_units`` (the release has a unit run), the unit
        run's; nothing for the tabulation hierarchy)."""
        if self.spine is not None:
            columns = {**self.spine.block_columns(), **self.entities}
            write_spine(columns, Path(out_dir) / SPINE_FILES["persons"])
        if self.unit_spine is not None and with_units:
            write_spine(self.unit_spine.block_columns(), Path(out_dir) / SPINE_FILES["units"])

    def record(
        self, budget: Budget | None = None, units_budget: Budget | None = None
    ) -> dict[str, Any]:
        """The manifest's ``spine`` entry: the choice, the rules, the geounits, the file;
        its ``units`` entry the same for the unit run's own spine (with its bypass under
        ``units_budget``; none without a unit run)."""
        out = self._record(budget)
        if self.unit_spine is not None and units_budget is not None:
            units = self.units._record(units_budget)
            keep = ("file", "geolevels", "geounits", "rules", "bypass")
            out["units"] = {k: units[k] for k in keep if k in units}
            out["units"]["file"] = SPINE_FILES["units"]
            out["units"]["detail"] = (
                "the unit run's own spine, as production's unit run "
                "(ignore_gqs_in_block_groups = True): GQ types are not block-group entities"
            )
        return out

    def _record(self, budget: Budget | None) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.note:
            out["note"] = self.note
        if self.spine is None:
            if self.nation_outside:
                out["nation"] = self._nation_record(budget)
            return out
        h = self.estimation
        rules = asdict(self.spine.rules)
        rules["aian_ranges"] = [list(r) for r in self.spine.rules.aian_ranges]
        groups = self.spine.state_groups()
        out.update(
            {
                "file": SPINE_FILE,
                "geolevels": [[lv.name, lv.length] for lv in h.geolevels.levels],
                "geounits": {lv.name: h.n_units(i) for i, lv in enumerate(h.geolevels.levels)},
                "rules": rules,
                "states": int(groups.max()) + 1,
                "state_parts": int(groups.size),
                "state_total": "exact at the root; at a state part when it is its state's only "
                "part; a two-part state's total holds on the union of its parts",
            }
        )
        if self.part_population is not None:
            codes = h.geocodes[h.geolevels.index("State")].tolist()
            out["state_part_population"] = {
                str(c): int(v) for c, v in zip(codes, self.part_population.tolist(), strict=True)
            }
            out["state_part_bounds"] = (
                "each state part's group-quarters bounds from its own total "
                "(production's hhgq_total_lb / hhgq_total_ub with the part's tot): at least "
                "one person per facility of each type, at most the total less one person per "
                "facility of the other types; a part with units of one type only holds its "
                "total exactly"
            )
        if budget is not None and list(budget.geolevel_names) == list(h.geolevels.names):
            shares = bypass_shares(
                h, [budget.geolevel_shares[n] for n in h.geolevels.names], top=self._top
            )
            unmeasured = {
                lv.name: int((~shares.measured(i)).sum())
                for i, lv in enumerate(h.geolevels.levels)
                if i >= self._top
                and budget.geolevel_shares[lv.name] > 0
                and (~shares.measured(i)).any()
            }
            raised = {
                lv.name: int((shares.numerators[i] > shares.level_numerators[i]).sum())
                for i, lv in enumerate(h.geolevels.levels)
                if (shares.numerators[i] > shares.level_numerators[i]).any()
            }
            out["bypass"] = {
                "applied": bool(self.bypass),
                "single_children": unmeasured,
                "parents_with_moved_share": raised,
                "detail": (
                    "a geounit with a single child takes that child's share of the budget "
                    "and the child is not measured (no NMF rows); along every block's path "
                    "the shares sum to the geolevel shares (same privacy loss)"
                    if self.bypass
                    else "made before bypass: every spine geounit measured at its geolevel's share"
                ),
            }
        if self.nation_outside:
            out["nation"] = self._nation_record(budget)
        return out

    def _nation_record(self, budget: Budget | None) -> dict[str, Any]:
        top = self.estimation.geolevels[0].name
        rec: dict[str, Any] = {
            "measured": False,
            "level": top,
            "detail": (
                f"the input is {self._n_states()} state(s), not the nation: the {top} level's share of each run is spent on "
                "the nation as in production's national run (accounted in the privacy loss, "
                "not simulated on these states), so the US geounit has no NMF rows; every "
                "State part is measured with the State share and query shares, and the "
                "root is estimated from the measurements of the levels below it"
            ),
        }
        if budget is not None and top in budget.geolevel_shares:
            rec["share"] = str(budget.geolevel_shares[top])
        return rec


def _rules_from_record(d: Mapping[str, Any]) -> SpineRules:
    kw = dict(d)
    if "aian_ranges" in kw:
        kw["aian_ranges"] = tuple(tuple(int(x) for x in r) for r in kw["aian_ranges"])
    try:
        return SpineRules(**kw)
    except TypeError as exc:
        raise InputError(f"manifest spine.rules: {exc}") from None


def _check_levels(budget: Budget, rules: SpineRules) -> None:
    want = list(rules.level_names)
    if list(budget.geolevel_names) != want:
        raise ConfigError(
            f"--spine optimized needs the budget's geolevels to be {want}; "
            f"budget {budget.name!r} has {list(budget.geolevel_names)}"
        )


def _check_states(spine: Spine) -> None:
    if not spine.rules.nation:
        parts = np.unique(spine.unit_codes("State"))
        if parts.size > 1:
            raise ConfigError(
                f"--spine optimized: a budget rooted at the State (no US level) needs the "
                f"input in one state part; its blocks are in {parts.size} "
                f"({', '.join(str(p) for p in parts[:3])}): AIAN and non-AIAN parts or "
                "several states need a budget with a US level"
            )


def geography_for_input(
    requested: str,
    budget: Budget,
    hierarchy: Hierarchy,
    units: Mapping[str, np.ndarray],
    inv: Invariants,
    *,
    rules: SpineRules | None = None,
    explicit: bool = False,
    progress: Progress = None,
) -> ReleaseGeography:
    """The geography of a fresh run: the tabulation hierarchy or the spine built from the input.

    Args:
        requested: ``"tabulation"`` or ``"optimized"`` (:func:`requested_spine`).
        budget: the person budget (its geolevels must be the spine's levels).
        hierarchy: the tabulation hierarchy of the input's blocks.
        units: the validated unit columns (``aian_area`` / ``place`` when present).
        inv: the invariants (GQ facility types shape block groups).
        rules: the spine rules (production's by default, rooted at the State when the
            budget has no ``US`` level, as ``pl94-2020-pr``).
        explicit: the user asked for the spine (``--spine``), so it is built even when
            the input has no block attributes; otherwise such an input falls back to the
            tabulation hierarchy with a note.

    Raises:
        ConfigError: for a budget whose geolevels are not the spine's, or, rooted at the
            State (no US level), an input of more than one state part.
    """
    if requested == "tabulation":
        return _tabulation(budget, hierarchy)
    if rules is None:  # production's; rooted at the State when the budget has no US level
        rules = spine_rules_for(budget)
    _check_levels(budget, rules)
    if hierarchy.blocks.size == 0:
        note = "the input has no blocks: nothing to build a spine from (tabulation hierarchy)"
        say(progress, f"note: {note}")
        return _tabulation(budget, hierarchy, note)
    attrs, present = block_attributes(units, hierarchy, inv)
    note = None
    if not present:
        if not explicit:
            note = (
                "the input has no block attributes (aian_area, place in units.parquet): "
                "estimating on the tabulation hierarchy, not the optimized spine"
            )
            say(progress, f"note: {note}")
            return _tabulation(budget, hierarchy, note)
        note = "the input has no block attributes: spine built from GQ types alone"
        say(progress, f"note: {note}")
    spine = build_spine(hierarchy.blocks, attrs, rules)
    _check_states(spine)
    # production's national run has the 50 states and DC under the US; an input of fewer
    # is some of them, and the US level's budget is the nation's (not these states')
    outside = rules.nation and int(spine.state_groups().max()) + 1 < NATION_STATES
    h = spine.hierarchy
    say(
        progress,
        "built the optimized spine: "
        + ", ".join(f"{h.n_units(i):,} {lv.name}" for i, lv in enumerate(h.geolevels.levels)),
    )
    state = h.geolevels.index("State")
    parts = h.aggregate(np.asarray(inv.population)[spine.order].reshape(-1, 1))[state]
    urules = unit_rules(rules)
    uspine = spine if urules == rules else build_spine(hierarchy.blocks, attrs, urules)
    entities = {c: getattr(attrs, c) for c in present}
    return ReleaseGeography(
        hierarchy,
        spine,
        note,
        part_population=np.asarray(parts, dtype=np.int64).ravel(),
        nation_outside=outside,
        unit_spine=uspine,
        entities={c: np.asarray(v).astype(str) for c, v in entities.items() if v is not None},
    )


def _tabulation(budget: Budget, hierarchy: Hierarchy, note: str | None = None) -> ReleaseGeography:
    """The tabulation hierarchy; its US is the nation outside an input of fewer than
    :data:`NATION_STATES` states (as on the spine)."""
    levels = hierarchy.geolevels
    outside = (
        hierarchy.blocks.size > 0
        and "US" in budget.geolevel_names
        and levels[0].length == 0
        and "State" in levels.names
        and hierarchy.n_units(levels.index("State")) < NATION_STATES
    )
    return ReleaseGeography(hierarchy, None, note, nation_outside=outside)


def geography_of_run(
    run_dir: str | Path, manifest: Mapping[str, Any], tabulation: Hierarchy
) -> ReleaseGeography:
    """The geography a run's measurements were made on, from its manifest and ``spine.parquet``.

    Raises:
        InputError: naming the file when the spine file is missing or malformed, or its
            blocks are not the release's.
    """
    rec = manifest.get("spine")
    if not isinstance(rec, Mapping):
        return ReleaseGeography(tabulation)
    nation = rec.get("nation")
    outside = isinstance(nation, Mapping) and nation.get("measured") is False
    if rec.get("kind", "tabulation") == "tabulation":
        return ReleaseGeography(tabulation, nation_outside=outside)
    where = Path(run_dir) / str(rec.get("file", SPINE_FILE))
    try:
        geolevels = GeoLevels.from_pairs([tuple(g) for g in rec["geolevels"]])
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{Path(run_dir) / MANIFEST_FILE}: spine.geolevels: {exc}") from None
    geocodes, codes = read_spine(where, geolevels)
    if not np.array_equal(geocodes, tabulation.blocks):
        raise InputError(f"{where}: its blocks are not the release's blocks (invariants.parquet)")
    rules = _rules_from_record(rec.get("rules", {}))
    bypass = rec.get("bypass")
    applied = isinstance(bypass, Mapping) and bypass.get("applied") is True
    spine = Spine(geolevels, geocodes, codes, rules)
    parts = _part_population(rec.get("state_part_population"), spine, Path(run_dir))
    uspine = _unit_spine_of_run(Path(run_dir), rec.get("units"), geolevels, tabulation)
    entities = read_spine_entities(where, ENTITY_COLUMNS)
    return ReleaseGeography(
        tabulation, spine, rec.get("note"), applied, parts, outside, uspine, entities
    )


def _unit_spine_of_run(
    run_dir: Path, rec: Any, geolevels: GeoLevels, tabulation: Hierarchy
) -> Spine | None:
    """The unit run's own spine from the manifest's ``spine.units`` and its file; ``None``
    for a release whose unit run was measured on the persons' spine (none recorded).

    Raises:
        InputError: naming the manifest entry or the file when either is malformed.
    """
    if rec is None:
        return None
    where = f"{run_dir / MANIFEST_FILE}: spine.units"
    if not isinstance(rec, Mapping):
        raise InputError(f"{where} must be an object, got {rec!r}")
    try:
        levels = GeoLevels.from_pairs([tuple(g) for g in rec["geolevels"]])
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{where}.geolevels: {exc}") from None
    if levels.names != geolevels.names:
        raise InputError(f"{where}.geolevels {list(levels.names)} are not the spine's")
    path = run_dir / str(rec.get("file", SPINE_FILES["units"]))
    geocodes, codes = read_spine(path, levels)
    if not np.array_equal(geocodes, tabulation.blocks):
        raise InputError(f"{path}: its blocks are not the release's blocks (invariants.parquet)")
    return Spine(levels, geocodes, codes, _rules_from_record(rec.get("rules", {})))


def _part_population(recorded: Any, spine: Spine, run_dir: Path) -> np.ndarray | None:
    """The recorded state parts' totals in hierarchy order (``None`` when not recorded).

    Raises:
        InputError: naming the manifest entry when it is not one count per state part.
    """
    if recorded is None:
        return None
    where = f"{run_dir / MANIFEST_FILE}: spine.state_part_population"
    h = spine.hierarchy
    parts = h.geocodes[h.geolevels.index("State")].tolist()
    if not isinstance(recorded, Mapping) or sorted(map(str, recorded)) != sorted(parts):
        raise InputError(f"{where} must give one total per state part {parts}")
    values = [recorded[p] for p in parts]
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int) or v < 0]
    if bad:
        raise InputError(f"{where} has {bad[0]!r}; totals are integers >= 0")
    return np.asarray(values, dtype=np.int64)
