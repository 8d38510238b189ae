"""The production geographic spine: AIAN split, optimized block groups, tract groups, bypass.

The 2020 production TopDown does not estimate on the geocode hierarchy
(state > county > tract > block group > block). It estimates on a *spine* built from it
(Abowd, Ashmead, Cumings-Menon, Kifer, Leclerc, Ocker & Ratcliffe 2021, "Geographic
spines in the 2020 Census Disclosure Avoidance System TopDown algorithm", secs. 1, 4-5;
implemented in the Census Bureau's public DAS_2020_Redistricting_Production_Code,
``programs/geographic_spines/define_spines.py`` and ``optimize_spine.py``):

1. **AIAN split.** Every geounit from the state down is intersected with the union of
   the state's American Indian / Alaska Native areas or with its complement: each state
   has an AIAN part and a non-AIAN part. The AIAN areas are those of production's
   ``aian_areas``: seven of the nine AIANNHCE categories of its
   ``source/etc/AIANNHCE_ranges.csv`` (:data:`PRODUCTION_AIAN_AREAS`; tribal designated
   and state designated tribal statistical areas are not AIAN areas). The state total
   stays invariant on the union of the two parts, not on each part.
2. **Optimized block groups.** Within each tract (part), blocks are grouped by the
   intersection of their off-spine entities (OSEs: place or minor civil division, the
   AIAN area, and the combination of group-quarters types present in the block), and
   each such intersection is cut, in geocode order, into block groups of at most
   ``isqrt(n) + fanout_cutoff + 1`` blocks, ``n`` the blocks of the tract part
   (``call_optimize_spine``: a new block group starts once one holds more than
   ``int(sqrt(n) + fanout_cutoff)`` blocks).
3. **Tract groups** (optional; the 2020 redistricting run had no tract-group level):
   tracts with the same set of OSEs are grouped (at most ``isqrt(T) + fanout_cutoff``
   per group), then sibling groups are merged greedily while the off-spine entity
   distances (OSEDs, the paper's eqs. 5-8 and Algorithm 1) of the entities whose
   distance bound exceeds ``entity_threshold`` do not get worse in lexicographic
   (largest first) order (the paper's Algorithm 2). If no entity exceeds the threshold,
   consecutive groups are merged into groups of ``isqrt(T) + fanout_cutoff``.
4. **Bypass.** With zCDP primitives (the discrete Gaussian of production), the decision
   rule of the paper's Algorithm 3 bypasses exactly the geounits with a single child:
   the child's share of the privacy-loss budget moves to its parent (which holds the same
   people) and the child is not measured. :func:`bypass_shares` computes the per-geounit
   shares; along every block's path they still add up to the sum of the geolevel shares
   (the paper's Theorem 3, production's ``check_total_plb``). The pure-DP rule of
   Theorem 2 (and its ``bypass_cutoff``) applies only to Laplace or geometric primitives,
   which production never combined with this spine, and is not implemented.

5. **Prims** (the 2020 DHC's prim spine, :attr:`SpineRules.prim`): each county part is
   cut into Prims by place / MCD, tract groups become groups of tract subsets within a
   Prim, and tracts tract subsets (a tract within a Prim).

A spine is written in the form :class:`~censusdp.data.geography.Hierarchy` consumes:
every block gets a code that is the path of its geounits followed by its 16-digit
geocode (production's "DAS geoid"), and each level's units are the distinct prefixes of
one length. The code of a unit is

* State: AIAN digit (``1`` for the AIAN part) + state FIPS (3 characters);
* County: + county FIPS (6);
* TractGroup (when present): + group number, zero-padded to the widest;
* Tract: + the 6-digit tract code;
* BlockGroup: + the block group's number within its tract part, zero-padded;
* Block: + the block's 16-digit geocode.

Nothing here reads files; ``numpy`` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cached_property
from math import lcm

import numpy as np

from censusdp.data._spine_groups import assign_tract_groups, dense_rank, isqrt, prim_parents
from censusdp.data.geography import BLOCK_GEOCODE_LENGTH, GeoLevels, Hierarchy, validate_geocodes
from censusdp.errors import GeographyError

__all__ = [
    "AIANNHCE_CATEGORIES",
    "AIAN_AREA_WIDTH",
    "LEGAL_FEDERALLY_RECOGNIZED",
    "N_GQ_TYPES",
    "PRODUCTION_AIAN_AREAS",
    "PRODUCTION_AIAN_RANGES",
    "BlockAttributes",
    "Spine",
    "SpineRules",
    "UnitShares",
    "aian_category",
    "aian_ranges_of",
    "build_spine",
    "bypass_shares",
]

AIANNHCE_CATEGORIES: dict[str, tuple[int, int]] = {
    "Legal_Federally_Recognized_American_Indian_Area": (1, 4799),
    "American_Indian_Joint_Use_Area": (4800, 4989),
    "Hawaiian_Home_Land": (5000, 5499),
    "Oklahoma_Tribal_Statistical_Area": (5500, 5899),
    "Joint_Use_Oklahoma_Tribal_Statistical_Area": (5900, 5999),
    "Alaska_Native_Village_Statistical_Area": (6000, 7999),
    "Tribal_Designated_Statistical_Area": (8000, 8999),
    "State_Recognized_Legal_American_Indian_Area": (9000, 9499),
    "State_Designated_Tribal_Statistical_Area": (9500, 9998),
}
"""The nine AIANNHCE categories and their inclusive code ranges (production's
``source/etc/AIANNHCE_ranges.csv``); ``9999`` (or no code) is a block in none of them."""

PRODUCTION_AIAN_AREAS = (
    "Legal_Federally_Recognized_American_Indian_Area",
    "American_Indian_Joint_Use_Area",
    "Hawaiian_Home_Land",
    "Alaska_Native_Village_Statistical_Area",
    "State_Recognized_Legal_American_Indian_Area",
    "Oklahoma_Tribal_Statistical_Area",
    "Joint_Use_Oklahoma_Tribal_Statistical_Area",
)
"""The categories that are AIAN areas in the 2020 runs (``aian_areas`` of
``configs/production/prod_default.ini``, printed in the four run certificates)."""

LEGAL_FEDERALLY_RECOGNIZED = AIANNHCE_CATEGORIES["Legal_Federally_Recognized_American_Indian_Area"]
"""AIANNHCE codes of Legal Federally Recognized American Indian Areas (0001-4799)."""


def aian_ranges_of(categories: Sequence[str]) -> tuple[tuple[int, int], ...]:
    """The AIANNHCE ranges of category names (:data:`AIANNHCE_CATEGORIES`), sorted.

    Raises:
        GeographyError: for a name that is not an AIANNHCE category.
    """
    for name in categories:
        if name not in AIANNHCE_CATEGORIES:
            raise GeographyError(
                f"AIAN area category {name!r} is not one of {list(AIANNHCE_CATEGORIES)}"
            )
    return tuple(sorted(AIANNHCE_CATEGORIES[name] for name in categories))


def aian_category(code: str) -> str | None:
    """The AIANNHCE category of a 4-digit code, ``None`` for ``9999``, ``""`` or 4990-4999."""
    if len(code) != AIAN_AREA_WIDTH or not code.isdigit():
        return None
    value = int(code)
    for name, (lo, hi) in AIANNHCE_CATEGORIES.items():
        if lo <= value <= hi:
            return name
    return None


PRODUCTION_AIAN_RANGES = aian_ranges_of(PRODUCTION_AIAN_AREAS)
"""The AIANNHCE ranges of :data:`PRODUCTION_AIAN_AREAS`: 0001-4989 (legal federally
recognized and joint use), 5000-5999 (Hawaiian home lands, OTSAs, joint-use OTSAs),
6000-7999 (ANVSAs) and 9000-9499 (state recognized), as seven ranges."""

AIAN_AREA_WIDTH = 4
"""Digits of an AIAN area code (AIANNHCE)."""

_UNUSED_AIANNHCE = (4990, 4999)
"""Codes outside every category, which production's ``geocode_mapping`` refuses."""

N_GQ_TYPES = 7
"""Major group-quarters types (1..7); the combination present in a block is an OSE."""

_STATE_PART = 3
_COUNTY_PART = 6
_TRACT = 6


@dataclass(frozen=True)
class SpineRules:
    """The parameters of the spine (production's ``[geodict]`` options and defaults).

    Attributes:
        fanout_cutoff: added to ``isqrt(n)`` to cap block-group (and tract-group)
            fan-out; production 12.
        entity_threshold: entities whose distance bound is at most this are ignored
            when forming tract groups; production 9.
        aian_split: split every state into its AIAN and non-AIAN parts (production's
            AIAN spine, always on with ``spine = opt_spine``).
        aian_ranges: inclusive AIANNHCE ranges that count as AIAN areas; production's
            seven categories (:data:`PRODUCTION_AIAN_RANGES`) by default.
        optimize_block_groups: form block groups from OSE intersections (``False``:
            the tabulation block groups, intersected with the AIAN parts).
        tract_groups: insert a TractGroup level (production's 2020 redistricting
            configuration had none).
        target_aian_areas: the AIAN area is an OSE (``target_das_aian_areas = True``).
        target_original_block_groups: the tabulation block group is an OSE
            (``target_orig_block_groups``, production default ``False``).
        gq_entities: the combination of GQ types in a block is an OSE for block
            groups (production's ``ignore_gqs_in_block_groups = False``).
        nation: the spine's root is the nation (``US``) above the state parts;
            ``False`` roots it at the State, as production's Puerto Rico run
            (``person_PR.ini``: geolevels State..Block, no US level), which needs every
            block in one state part.
        prim: production's DHC prim spine (``prim_spine = True``): below each county
            part its Prims (``create_prims``: the county cut by place and county
            subdivision; here by the block's ``place`` code, ``99999`` for none), then
            groups of tract subsets (TractSubsetGroup, formed as tract groups are, within
            the Prim), tract subsets (a tract within a Prim), block groups, blocks.
    """

    fanout_cutoff: int = 12
    entity_threshold: int = 9
    aian_split: bool = True
    aian_ranges: tuple[tuple[int, int], ...] = PRODUCTION_AIAN_RANGES
    optimize_block_groups: bool = True
    tract_groups: bool = False
    target_aian_areas: bool = True
    target_original_block_groups: bool = False
    gq_entities: bool = True
    nation: bool = True
    prim: bool = False

    def __post_init__(self) -> None:
        for name in ("fanout_cutoff", "entity_threshold"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 0:
                raise GeographyError(f"spine rule {name} is {v!r}; it must be an integer >= 0")
        for name in (
            "aian_split",
            "optimize_block_groups",
            "tract_groups",
            "target_aian_areas",
            "target_original_block_groups",
            "gq_entities",
            "nation",
            "prim",
        ):
            if not isinstance(getattr(self, name), bool):
                raise GeographyError(
                    f"spine rule {name} is {getattr(self, name)!r}; it must be true or false"
                )
        for r in self.aian_ranges:
            ok = (
                isinstance(r, tuple)
                and len(r) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in r)
                and 1 <= r[0] <= r[1] <= 9998
            )
            if not ok:
                raise GeographyError(
                    f"spine rule aian_ranges has {r!r}; each range must be (low, high) "
                    "integers with 1 <= low <= high <= 9998"
                )

    @property
    def level_names(self) -> tuple[str, ...]:
        """The spine's geolevels, top first."""
        middle = ("TractGroup", "Tract") if self.tract_groups else ("Tract",)
        if self.prim:
            middle = ("Prim", "TractSubsetGroup", "TractSubset")
        top = ("US",) if self.nation else ()
        return (*top, "State", "County", *middle, "BlockGroup", "Block")


@dataclass(frozen=True, eq=False)
class BlockAttributes:
    """Optional per-block attributes that shape the spine (aligned with the blocks given).

    Attributes:
        aian_area: AIAN area code (4-digit AIANNHCE) of each block, ``""`` (or
            ``None``) outside every area; ``None`` for no AIAN areas at all.
        place: place or minor-civil-division code of each block (production uses the
            MCD in strong-MCD states outside AIAN areas, the place elsewhere), ``""``
            where the block is in none; ``None`` for no places.
        gq_types: ``(blocks, 7)`` (or ``(blocks, 8)``, column 0 ignored) counts of
            group-quarters facilities by type 1..7; ``None`` for none.
    """

    aian_area: np.ndarray | None = None
    place: np.ndarray | None = None
    gq_types: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class UnitShares:
    """Exact per-geounit shares of the budget after bypass: ``numerators / denominator``.

    Attributes:
        numerators: per level (top first), ``(units,)`` int64 numerators, in the order of
            the hierarchy's units; ``0`` for a bypassed (unmeasured) unit.
        denominator: the common denominator of every share.
        level_numerators: per level, the numerator of the geolevel's own share (what a
            unit gets without bypass); ``numerators[l] / level_numerators[l]`` is each
            unit's multiple of its geolevel's budget.
    """

    numerators: tuple[np.ndarray, ...]
    denominator: int
    level_numerators: tuple[int, ...] = ()

    def share(self, level: int, unit: int) -> Fraction:
        """The share of unit ``unit`` of ``level`` as an exact fraction."""
        return Fraction(int(self.numerators[level][unit]), self.denominator)

    def measured(self, level: int) -> np.ndarray:
        """Boolean mask of the units of ``level`` that are measured (share > 0)."""
        return self.numerators[level] > 0

    @property
    def bypassed(self) -> bool:
        """Whether any unit's share differs from its geolevel's (some unit was bypassed)."""
        return any(
            bool((num != lv).any())
            for num, lv in zip(self.numerators, self.level_numerators, strict=True)
        )


@dataclass(frozen=True, eq=False)
class Spine:
    """The spine: every block's code (unit path + geocode) and the levels.

    Attributes:
        geolevels: the spine's levels; each length is the length of that level's unit
            codes (a prefix of every block code below it).
        blocks: the block geocodes, sorted (the geocode hierarchy's block order).
        codes: each block's spine code, aligned with :attr:`blocks`.
        rules: the rules it was built with.
    """

    geolevels: GeoLevels
    blocks: np.ndarray
    codes: np.ndarray
    rules: SpineRules = field(default_factory=SpineRules)

    @cached_property
    def hierarchy(self) -> Hierarchy:
        """The spine as a :class:`~censusdp.data.geography.Hierarchy` (blocks in spine order)."""
        return Hierarchy.from_blocks(self.codes, self.geolevels)

    @cached_property
    def order(self) -> np.ndarray:
        """``order[i]`` is the index in :attr:`blocks` of the spine hierarchy's block ``i``.

        A block histogram in geocode order ``h`` becomes ``h[order]`` in spine order, and
        a spine-order one ``s`` goes back with ``s[np.argsort(order)]``.
        """
        return np.argsort(self.codes, kind="stable")

    def codes_of(self, geocodes: np.ndarray | Sequence[str]) -> np.ndarray:
        """The spine codes of (possibly repeated) block geocodes, e.g. of person records.

        Raises:
            GeographyError: for a geocode that is not a block of the spine.
        """
        want = np.asarray(geocodes).astype("U16")
        idx = np.minimum(np.searchsorted(self.blocks, want), self.blocks.size - 1)
        missing = self.blocks[idx] != want
        if missing.any():
            raise GeographyError(
                f"block geocode {str(want[missing][0])!r} is not a block of the spine"
            )
        return self.codes[idx]

    def unit_codes(self, level: int | str) -> np.ndarray:
        """Each block's unit code at ``level`` (index or name), aligned with :attr:`blocks`."""
        li = self.geolevels.index(level) if isinstance(level, str) else int(level)
        length = self.geolevels[li].length
        if length == 0:
            return np.full(self.blocks.size, "", dtype="U1")
        return self.codes.astype(f"U{length}")

    def block_columns(self) -> dict[str, np.ndarray]:
        """``geocode`` and one column per level below the nation: the block's unit code there.

        The table a release publishes so that anyone can recompute its noisy-measurement
        geounits from block geocodes.
        """
        out = {"geocode": self.blocks}
        for li, lv in enumerate(self.geolevels.levels):
            if lv.length > 0:  # the nation's code is empty; a State root's is written
                out[lv.name] = self.unit_codes(li)
        return out

    def state_groups(self) -> np.ndarray:
        """For each unit of the State level (hierarchy order), the index of its state.

        The AIAN and non-AIAN parts of a state share an index: the state's invariant
        total population holds on the union of the units of one group.
        """
        parts = self.hierarchy.geocodes[self.geolevels.index("State")]
        return dense_rank(np.asarray([code[1:3] for code in parts.tolist()], dtype="U2"))


# -- attributes -----------------------------------------------------------------------


def _string_attribute(values: np.ndarray | None, n: int, name: str) -> np.ndarray | None:
    if values is None:
        return None
    arr = np.asarray(values, dtype=object)
    if arr.shape != (n,):
        raise GeographyError(f"block attribute {name} has shape {arr.shape}; expected ({n},)")
    out = np.array(["" if v is None else str(v) for v in arr], dtype=object)
    return out.astype("U") if out.size else np.zeros(0, dtype="U1")


def _aian_codes(values: np.ndarray | None, n: int, rules: SpineRules) -> np.ndarray:
    """Each block's AIAN area code if it is in one of ``rules.aian_ranges``, else ``""``."""
    codes = _string_attribute(values, n, "aian_area")
    if codes is None:
        return np.full(n, "", dtype="U4")
    given = codes != ""
    ok = validate_geocodes(codes[given], AIAN_AREA_WIDTH) if given.any() else np.ones(0, bool)
    if not ok.all():
        i = int(np.flatnonzero(given)[np.flatnonzero(~ok)[0]])
        raise GeographyError(
            f"block attribute aian_area of block {i} is {str(codes[i])!r}; it must be "
            f"{AIAN_AREA_WIDTH} digits (AIANNHCE) or empty"
        )
    num = np.zeros(n, dtype=np.int64)
    num[given] = codes[given].astype(np.int64)
    unused = given & (num >= _UNUSED_AIANNHCE[0]) & (num <= _UNUSED_AIANNHCE[1])
    if unused.any():
        i = int(np.flatnonzero(unused)[0])
        raise GeographyError(
            f"block attribute aian_area of block {i} is {str(codes[i])!r}; AIANNHCE codes "
            f"{_UNUSED_AIANNHCE[0]}-{_UNUSED_AIANNHCE[1]} are in no category (9999 or empty: in no area)"
        )
    inside = np.zeros(n, dtype=bool)
    for lo, hi in rules.aian_ranges:
        inside |= given & (num >= lo) & (num <= hi)
    return np.where(inside, codes, "").astype("U4")


def _gq_combination(values: np.ndarray | None, n: int) -> np.ndarray:
    """``(blocks,)`` 7-character strings, ``"1"`` where a GQ type is present."""
    if values is None:
        return np.full(n, "0" * N_GQ_TYPES, dtype=f"U{N_GQ_TYPES}")
    arr = np.asarray(values)
    if arr.ndim != 2 or arr.shape[0] != n or arr.shape[1] not in (N_GQ_TYPES, N_GQ_TYPES + 1):
        raise GeographyError(
            f"block attribute gq_types has shape {arr.shape}; expected ({n}, {N_GQ_TYPES}) "
            f"or ({n}, {N_GQ_TYPES + 1})"
        )
    present = arr[:, -N_GQ_TYPES:] > 0
    digits = np.where(present, "1", "0")
    out = digits[:, 0].astype(f"U{N_GQ_TYPES}")
    for j in range(1, N_GQ_TYPES):
        out = np.char.add(out, digits[:, j])
    return out


def _digits(n: int) -> int:
    return len(str(max(int(n), 1)))


# -- block groups ---------------------------------------------------------------------


def _optimized_block_groups(
    tract_part: np.ndarray, entity: np.ndarray, fanout_cutoff: int
) -> np.ndarray:
    """1-based block-group number of each block within its tract part.

    ``tract_part`` and ``entity`` are integer ids; blocks are in geocode order. Blocks of
    one (tract part, entity) are cut in geocode order into runs of
    ``isqrt(n) + fanout_cutoff + 1``; groups are numbered by entity, then run.
    """
    n_blocks = tract_part.size
    order = np.lexsort((np.arange(n_blocks), entity, tract_part))
    tp, en = tract_part[order], entity[order]
    per_tract = np.bincount(tract_part)
    size = isqrt(per_tract) + fanout_cutoff + 1
    new_group = np.r_[True, (tp[1:] != tp[:-1]) | (en[1:] != en[:-1])]
    group_start = np.flatnonzero(new_group)
    group_of = np.cumsum(new_group) - 1
    rank = np.arange(n_blocks) - group_start[group_of]
    run = rank // size[tp]
    new_bg = np.r_[True, (tp[1:] != tp[:-1]) | (en[1:] != en[:-1]) | (run[1:] != run[:-1])]
    new_tract = np.r_[True, tp[1:] != tp[:-1]]
    bg_seq = np.cumsum(new_bg)
    first_in_tract = bg_seq[np.flatnonzero(new_tract)]
    tract_of = np.cumsum(new_tract) - 1
    number = bg_seq - first_in_tract[tract_of] + 1
    out = np.empty(n_blocks, dtype=np.int64)
    out[order] = number
    return out


def _tabulation_block_groups(tract_part: np.ndarray, bg_digit: np.ndarray) -> np.ndarray:
    """1-based number of each block's tabulation block group within its tract part."""
    ids = dense_rank(tract_part * 10 + bg_digit)
    lowest = np.full(int(tract_part.max()) + 1, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(lowest, tract_part, ids)
    return ids - lowest[tract_part] + 1


# -- the spine ------------------------------------------------------------------------


def build_spine(
    blocks: np.ndarray | Sequence[str],
    attributes: BlockAttributes | None = None,
    rules: SpineRules | None = None,
) -> Spine:
    """Build the production-style spine of ``blocks`` (see the module docstring).

    Args:
        blocks: unique 16-digit block geocodes (any order).
        attributes: optional AIAN areas, places/MCDs and GQ types, aligned with
            ``blocks``; ``None`` for none (then the spine differs from the geocode
            hierarchy only by its block groups).
        rules: the spine parameters; production's by default.

    Returns:
        the :class:`Spine`; ``spine.hierarchy`` is what the estimator consumes.

    Raises:
        GeographyError: for a malformed or repeated geocode, or a malformed attribute.
    """
    rules = SpineRules() if rules is None else rules
    attributes = BlockAttributes() if attributes is None else attributes
    given = np.asarray(blocks).astype("U16") if len(blocks) else np.zeros(0, dtype="U16")
    n = given.size
    if n == 0:
        raise GeographyError("a spine needs at least one block")
    bad = ~validate_geocodes(given)
    if bad.any():
        raise GeographyError(
            f"block geocode {str(given[bad][0])!r} is not {BLOCK_GEOCODE_LENGTH} digits"
        )
    order = np.argsort(given, kind="stable")
    geo = given[order]
    if (geo[1:] == geo[:-1]).any():
        dup = geo[1:][geo[1:] == geo[:-1]][0]
        raise GeographyError(f"block geocode {str(dup)!r} is given more than once")
    aian = _aian_codes(attributes.aian_area, n, rules)[order]
    place = _string_attribute(attributes.place, n, "place")
    place = np.full(n, "", dtype="U1") if place is None else place[order]
    gq = _gq_combination(attributes.gq_types, n)[order]

    in_aian = (aian != "") & rules.aian_split
    county_part = np.char.add(np.where(in_aian, "1", "0"), geo.astype("U5"))
    parent = prim_parents(county_part, place, geo) if rules.prim else county_part
    tract = np.char.replace(geo.astype("U11"), geo.astype("U5"), "", count=1)
    tract_part_id = dense_rank(np.char.add(parent, tract))

    # The OSE codes of each block, one array per type ("" = in no entity of the type).
    ose = [place]
    if rules.target_original_block_groups:
        ose.append(geo.astype("U12"))
    if rules.target_aian_areas:
        ose.append(aian)
    if rules.optimize_block_groups:
        key = ose[0]
        for comp in ose[1:]:
            key = np.char.add(np.char.add(key, "|"), comp)
        if rules.gq_entities:
            key = np.char.add(np.char.add(key, "|"), gq)
        bg = _optimized_block_groups(tract_part_id, dense_rank(key), rules.fanout_cutoff)
    else:
        digit = np.frombuffer(geo.astype("S16").tobytes(), dtype=np.uint8).reshape(n, 16)[:, 11]
        bg = _tabulation_block_groups(tract_part_id, digit.astype(np.int64) - ord("0"))

    pieces = [parent]
    tg_width = 0
    if rules.tract_groups or rules.prim:
        tg = assign_tract_groups(
            parent, tract_part_id, bg, ose, (rules.fanout_cutoff, rules.entity_threshold)
        )
        width = _digits(tg.max())
        pieces.append(np.char.zfill(tg.astype("U"), width))
        tg_width = width
    pieces.append(tract)
    bg_width = _digits(bg.max())
    pieces.append(np.char.zfill(bg.astype("U"), bg_width))
    pieces.append(geo)
    codes = pieces[0]
    for p in pieces[1:]:
        codes = np.char.add(codes, p)

    lengths = [0, _STATE_PART, _COUNTY_PART] if rules.nation else [_STATE_PART, _COUNTY_PART]
    if rules.prim:
        lengths.append(_COUNTY_PART + 5)
    if rules.tract_groups or rules.prim:
        lengths.append(lengths[-1] + tg_width)
    lengths.append(lengths[-1] + _TRACT)
    lengths.append(lengths[-1] + bg_width)
    lengths.append(lengths[-1] + BLOCK_GEOCODE_LENGTH)
    geolevels = GeoLevels.from_pairs(list(zip(rules.level_names, lengths, strict=True)))
    return Spine(geolevels, geo, codes.astype(f"U{lengths[-1]}"), rules)


def bypass_shares(
    hierarchy: Hierarchy, level_shares: Sequence[Fraction], *, top: int = 0
) -> UnitShares:
    """Per-geounit budget shares after bypassing every geounit that has a single child.

    Bottom-up (the paper's Algorithm 3 with zCDP primitives; production's
    ``move_to_pareto_frontier`` and ``bypass_above_county``): every unit starts with its
    geolevel's share ``beta[l]``; a unit ``u`` with exactly one child ``c`` takes the
    child's share, ``gamma[u] += gamma[c]``, and ``gamma[c] = 0`` (``c`` holds the same
    people as ``u``; top-down consistency makes its estimate equal its parent's, so its
    measurement would be unused). Along every path from the root to a block the shares
    still sum to ``sum(beta)``, so the privacy loss is unchanged (Theorem 3).

    Args:
        hierarchy: the spine (or any hierarchy).
        level_shares: ``beta``, one non-negative share per level, top first.
        top: the first level measured here. The units of the levels above it get no
            share and take none from a child: their budget is spent outside the input
            (the nation of production's national run, when the input is some of its
            states; production bypasses above the county only among the nation's
            units, ``bypass_above_county``, and the US has 51 children there).

    Raises:
        GeographyError: when the number of shares is not the number of levels or a share
            is negative.
    """
    if len(level_shares) != hierarchy.n_levels:
        raise GeographyError(
            f"bypass needs one share per geolevel ({hierarchy.n_levels}), got {len(level_shares)}"
        )
    if isinstance(top, bool) or not isinstance(top, int) or not 0 <= top < hierarchy.n_levels:
        raise GeographyError(
            f"bypass top is {top!r}; it must be a level index in [0, {hierarchy.n_levels})"
        )
    shares = [Fraction(s) for s in level_shares]
    for name, s in zip(hierarchy.geolevels.names, shares, strict=True):
        if s < 0:
            raise GeographyError(f"geolevel share of {name!r} is {s}; shares must be >= 0")
    den = lcm(*(s.denominator for s in shares))
    num = [
        np.full(hierarchy.n_units(li), s.numerator * (den // s.denominator), dtype=np.int64)
        for li, s in enumerate(shares)
    ]
    for li in range(top):
        num[li][:] = 0
    for li in range(hierarchy.n_levels - 2, top - 1, -1):
        ptr = hierarchy.child_ptr[li]
        single = np.flatnonzero(np.diff(ptr) == 1)
        child = ptr[single]
        num[li][single] += num[li + 1][child]
        num[li + 1][child] = 0
    level_num = tuple(int(s.numerator * (den // s.denominator)) for s in shares)
    return UnitShares(tuple(num), den, level_num)
