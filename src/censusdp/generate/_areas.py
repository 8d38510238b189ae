"""Off-spine entities of a synthetic state: AIAN areas, and places or minor civil divisions.

The 2020 production spine (:mod:`censusdp.data.spine`) is shaped by two block
attributes the Census Bureau reads from its geographic reference files: the AIAN area
(AIANNHCE) and the place or minor civil division (MCD) of each block. The generator
assigns them plausibly, with no Python loop per block:

* **AIAN areas** (:func:`plan_aian_areas`, state-wide, before tracts are sampled): tracts
  whose population is at least ``AIAN_CORE_SHARE`` American Indian and Alaska Native are
  cores; a maximal run of consecutive tracts (geocode order, across county lines, as
  reservations cross them) with at least ``AIAN_FRINGE_SHARE`` that holds a core is one
  area. Each area has an AIANNHCE category: a Legal Federally Recognized American
  Indian Area (0001, 0002, ...) by default; where real 2010 geography has other kinds
  the state's rule (``AIAN_AREA_RULES``) gives them, with its own shares: Oklahoma
  tribal statistical areas and joint-use OTSAs, Alaska Native village statistical
  areas, Hawaiian home lands (from the Asian or Pacific Islander group), state
  recognized reservations (New York), joint-use areas (New Mexico) and state designated
  tribal statistical areas (North Carolina; not AIAN areas in production's spine). A
  core tract is wholly inside; a fringe tract has its first (or, before a core, its
  last) blocks inside, a share ``share / core share`` of them.
* **Places / MCDs** (:func:`block_entities`, per county part): the blocks of a county in
  geocode order are cut into runs of geometric length. In a strong-MCD state every run
  outside AIAN areas is an MCD; elsewhere, and inside AIAN areas, a run is an
  incorporated place with probability ``d / (d + PLACE_DENSITY_HALF * D)`` (``d`` its
  persons per block, ``D`` the state's) and unincorporated (``""``) otherwise. This is
  production's place-or-MCD entity: the MCD in strong-MCD states outside AIAN areas,
  the place elsewhere. Codes are 5 digits, numbered through the state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from censusdp.data.spine import AIANNHCE_CATEGORIES
from censusdp.generate import _model as m
from censusdp.generate._tracts import TractTable

__all__ = ["AianPlan", "block_entities", "plan_aian_areas"]


@dataclass(frozen=True, eq=False)
class AianPlan:
    """The AIAN area of every tract of a state (tract table order).

    Attributes:
        geoid: 11-character tract codes (``S11``), sorted.
        code: 4-character AIAN area code, ``""`` outside every area.
        fraction: share of the tract's blocks inside its area (1 for a core tract).
        at_end: the tract's inside blocks are its last ones (a core follows it).
    """

    geoid: np.ndarray
    code: np.ndarray
    fraction: np.ndarray
    at_end: np.ndarray

    @property
    def n_areas(self) -> int:
        """Number of distinct AIAN areas."""
        return int(np.unique(self.code[self.code != ""]).size)


def _area_codes(number: np.ndarray, categories: tuple[str, ...]) -> np.ndarray:
    """The AIANNHCE code of areas numbered 1, 2, ... (0: none) under a state's rule."""
    codes = np.full(number.size, "", dtype="U4")
    n_areas = int(number.max()) if number.size else 0
    taken: dict[str, int] = {}
    for area in range(1, n_areas + 1):
        name = categories[min(area - 1, len(categories) - 1)]
        lo, hi = AIANNHCE_CATEGORIES[name]
        k = taken.get(name, 0)
        taken[name] = k + 1
        codes[number == area] = f"{lo + k % (hi - lo + 1):04d}"
    return codes


def plan_aian_areas(tracts: TractTable) -> AianPlan:
    """Plan the AIAN areas of a state's tracts (see the module docstring).

    The state's rule (``_model.AIAN_AREA_RULES``, else ``AIAN_AREA_DEFAULT_RULE``) gives
    the group whose share makes cores and fringes, the two shares, and each area's
    AIANNHCE category.
    """
    n = len(tracts)
    fips = tracts.geoid[0].decode()[:2] if n else ""
    group, core_share, fringe_share, categories = m.AIAN_AREA_RULES.get(
        fips, m.AIAN_AREA_DEFAULT_RULE
    )
    counts = tracts.groups[:, m.GROUPS.index(group)]
    share = np.divide(counts, tracts.pop, out=np.zeros(n), where=tracts.pop > 0)
    core = share >= core_share
    member = share >= fringe_share
    start = member & ~np.r_[False, member[:-1]]
    run = np.cumsum(start) * member  # 1-based run id of members, 0 elsewhere
    has_core = np.bincount(run[core], minlength=int(run.max(initial=0)) + 1) > 0
    has_core[0] = False
    kept = has_core[run]
    number = np.cumsum(np.r_[False, has_core[1:]])  # areas numbered in geocode order
    codes = np.where(kept, _area_codes(np.where(kept, number[run], 0), categories), "")
    codes = codes.astype("U4")
    fraction = np.where(kept, np.minimum(1.0, share / core_share), 0.0)
    next_core = np.r_[core[1:], False]
    prev_member = np.r_[False, member[:-1]]
    at_end = kept & ~core & next_core & ~prev_member
    return AianPlan(tracts.geoid.copy(), codes, fraction, at_end)


def _runs(mean: np.ndarray, new: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """0-based run id of each item: a new run starts before item ``i > 0`` with
    probability ``1 / mean[i]`` (geometric run lengths), and always where ``new``."""
    cut = rng.random(mean.size) < 1.0 / mean
    cut[0] = True
    return np.cumsum(cut | new) - 1


def block_entities(
    block_geocode: np.ndarray,
    block_pop: np.ndarray,
    plan: AianPlan,
    *,
    fips: str,
    state_density: float,
    first_code: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, int]:
    """The AIAN area and place-or-MCD code of each block of one county part.

    Args:
        block_geocode: ``(blocks, 16)`` uint8 ASCII geocodes, sorted.
        block_pop: persons per block.
        plan: the state's :func:`plan_aian_areas`.
        fips: the state's FIPS code (strong-MCD states get MCDs).
        state_density: the state's persons per block.
        first_code: number of the first place / MCD code to hand out.
        rng: the county part's own stream.

    Returns:
        ``(aian_area, place, next_code)``: ``U4`` and ``U5`` codes (``""`` for none) and
        the first code not used.
    """
    n = block_geocode.shape[0]
    if n == 0:
        return np.zeros(0, "U4"), np.zeros(0, "U5"), first_code
    tract = np.ascontiguousarray(block_geocode[:, :11]).view("S11").ravel()
    t_idx = np.searchsorted(plan.geoid, tract)
    new_tract = np.r_[True, tract[1:] != tract[:-1]]
    starts = np.flatnonzero(new_tract)
    t_of = np.cumsum(new_tract) - 1
    size = np.diff(np.r_[starts, n])
    rank = np.arange(n) - starts[t_of]
    inside_n = np.ceil(plan.fraction[t_idx] * size[t_of] - 1e-9).astype(np.int64)
    from_end = plan.at_end[t_idx]
    inside = np.where(from_end, rank >= size[t_of] - inside_n, rank < inside_n)
    inside &= plan.code[t_idx] != ""
    aian = np.where(inside, plan.code[t_idx], "").astype("U4")

    # runs never straddle the AIAN boundary
    edge = np.r_[False, inside[1:] != inside[:-1]]
    strong = fips in m.STRONG_MCD_STATES
    mean = np.where(strong & ~inside, m.MCD_RUN_BLOCKS, m.PLACE_RUN_BLOCKS)
    run = _runs(mean, edge, rng)
    n_runs = int(run[-1]) + 1
    pop = np.bincount(run, weights=block_pop, minlength=n_runs)
    length = np.bincount(run, minlength=n_runs)
    density = pop / np.maximum(length, 1)
    p_place = density / (density + m.PLACE_DENSITY_HALF * max(state_density, 1e-9))
    run_inside = np.zeros(n_runs, dtype=bool)
    run_inside[run] = inside
    named = np.where(strong & ~run_inside, True, rng.random(n_runs) < p_place)
    number = first_code + np.cumsum(named) - 1
    codes = np.where(named, np.char.zfill(number.astype("U"), 5), "").astype("U5")
    return aian, codes[run], first_code + int(named.sum())
