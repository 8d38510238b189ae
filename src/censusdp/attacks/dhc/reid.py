"""Re-identification: link reconstructed records to a commercial file, then confirm.

The 2010 attack (JASON (JSR-19-2F) sec. 4.1; Van Riper et al. (2020) sec. 1.2) linked the reconstructed
records (block, sex, age, race, Hispanic origin) to commercial data (names,
addresses, sex, birth date; no race or ethnicity) on block, sex and age (exact, then
age +-1): 45% of the reconstructed records linked ("putative re-identifications"),
38% of those were confirmed against the confidential data, i.e. 17% of the
population (52 million of 309 million) re-identified with their race and ethnicity.

This module has the same steps, with a synthetic commercial file:

* :func:`commercial_file` draws it from the truth: each person is covered with a
  probability (lower for minors), some ages are off by one year (or more), some people
  are listed at another block of their tract; it carries the person's identifier (the
  stand-in for a name), block, sex and age, never race or ethnicity.
* :func:`link_exact`: one-to-one links on (block, sex, age), then (block, sex,
  age +-1) among the records left; equal candidates are paired in a seeded random
  order (the attacker has nothing else to choose by).
* :func:`link_fellegi_sunter`: probabilistic record linkage (Fellegi & Sunter 1969)
  for releases whose geography is distorted (DP moves people between blocks):
  candidate pairs share block group and sex with ages within two years; agreement
  levels on block (same block / same block group) and age (difference 0, 1, 2);
  ``m`` and ``u`` probabilities fitted by EM under conditional independence; pairs
  whose weight ``log(m/u)`` is at least ``min_weight`` (default 0: agreement more
  likely for a match than for a non-match) are assigned one to one by mutual-best
  rounds in decreasing weight.
* :func:`reid_rates`: the four 2010 rates and the headline share, a public-marginals
  baseline, and the uniques analysis.

Definitions (also in ``docs/attacks.md``): a *link* is a putative re-identification:
the attacker asserts that commercial person ``p`` has the linked record's race and
Hispanic origin. A link is *confirmed* when that is right for ``p`` (the brief's
definition); it is *confirmed on all attributes* when ``p``'s confidential record
also has the record's block and sex and an age within one year (the 2010 check
against the confidential data, Van Riper et al. (2020) sec. 1.2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from censusdp.attacks.dhc.tables import AGE_BANDS, band_of_age
from censusdp.errors import ConfigError, InputError
from censusdp.privacy.randomness import experiment_generator

__all__ = [
    "CommercialSpec",
    "Links",
    "baseline_guess",
    "commercial_file",
    "link_exact",
    "link_fellegi_sunter",
    "reid_rates",
    "unique_in_block",
]

N_BANDS = len(AGE_BANDS)


@dataclass(frozen=True)
class CommercialSpec:
    """How the synthetic commercial file departs from the truth.

    Attributes:
        coverage_adult: probability that a person 18 or over is in the file.
        coverage_minor: the same for a person under 18 (marketing files list few
            children).
        age_off_by_one: probability that the listed age is off by one year (birth
            date vs census day, stale records).
        age_off_more: probability that it is off by 2 to 5 years.
        wrong_block: probability that the person is listed at another block of the
            same tract (moves, geocoding errors).
    """

    coverage_adult: float = 0.85
    coverage_minor: float = 0.40
    age_off_by_one: float = 0.15
    age_off_more: float = 0.03
    wrong_block: float = 0.10

    def __post_init__(self) -> None:
        for name in (
            "coverage_adult",
            "coverage_minor",
            "age_off_by_one",
            "age_off_more",
            "wrong_block",
        ):
            v = getattr(self, name)
            if not (0.0 <= v <= 1.0):
                raise ConfigError(f"commercial file {name} must be in [0, 1], got {v}")
        if self.age_off_by_one + self.age_off_more > 1.0:
            raise ConfigError(
                "commercial file age_off_by_one + age_off_more must be at most 1, got "
                f"{self.age_off_by_one + self.age_off_more}"
            )


def _col(cols: Mapping[str, np.ndarray], name: str, what: str) -> np.ndarray:
    if name not in cols:
        raise InputError(f"{what} needs column {name!r}; got {sorted(cols)}")
    return np.asarray(cols[name])


def commercial_file(
    truth: Mapping[str, np.ndarray], spec: CommercialSpec | None = None, *, seed: int = 0
) -> dict[str, np.ndarray]:
    """Draw a synthetic commercial file from the confidential persons.

    Args:
        truth: columns ``person_id``, ``geocode``, ``sex``, ``age`` (CEF).
        spec: coverage and error rates (defaults: :class:`CommercialSpec`).
        seed: seed of the draw.

    Returns:
        Columns ``person_id``, ``geocode``, ``sex``, ``age`` of the covered persons.
    """
    spec = spec or CommercialSpec()
    rng = experiment_generator(seed)
    pid = _col(truth, "person_id", "truth").astype(np.int64)
    geo = _col(truth, "geocode", "truth").astype("U16")
    sex = _col(truth, "sex", "truth").astype(np.int64)
    age = _col(truth, "age", "truth").astype(np.int64)
    n = pid.size
    cover = rng.random(n) < np.where(age >= 18, spec.coverage_adult, spec.coverage_minor)
    u = rng.random(n)
    off1 = u < spec.age_off_by_one
    off2 = (u >= spec.age_off_by_one) & (u < spec.age_off_by_one + spec.age_off_more)
    sign = np.where(rng.random(n) < 0.5, -1, 1)
    listed_age = age + sign * np.where(off1, 1, np.where(off2, rng.integers(2, 6, n), 0))
    listed_age = np.clip(listed_age, 0, 115)
    listed = geo.copy()
    move = rng.random(n) < spec.wrong_block
    if move.any():
        blocks = np.unique(geo)
        tract_of_block = blocks.astype("U11")
        tracts, t_start = np.unique(tract_of_block, return_index=True)
        t_count = np.diff(np.r_[t_start, blocks.size])
        mi = np.flatnonzero(move)
        t = np.searchsorted(tracts, geo[mi].astype("U11"))
        k = t_count[t]
        own = np.searchsorted(blocks, geo[mi]) - t_start[t]
        # another block of the same tract (uniform), if the tract has another block
        draw = np.floor(rng.random(mi.size) * np.maximum(k - 1, 1)).astype(np.int64)
        draw = np.where(draw >= own, draw + 1, draw)
        ok = k > 1
        listed[mi[ok]] = blocks[t_start[t[ok]] + draw[ok]]
    keep = np.flatnonzero(cover)
    return {
        "person_id": pid[keep],
        "geocode": listed[keep],
        "sex": sex[keep],
        "age": listed_age[keep],
    }


@dataclass(frozen=True, eq=False)
class Links:
    """One-to-one links between reconstructed records and commercial records.

    Attributes:
        rec: index of the reconstructed record of each link.
        comm: index of the commercial record of each link.
        kind: ``0`` exact (block, sex, age), ``1`` age +-1, ``2`` probabilistic.
        weight: the Fellegi-Sunter weight (``nan`` for deterministic links).
        method: ``"exact"`` or ``"fellegi-sunter"``.
        model: fitted parameters of the probabilistic model (empty for exact links).
    """

    rec: np.ndarray
    comm: np.ndarray
    kind: np.ndarray
    weight: np.ndarray
    method: str
    model: dict

    @property
    def n(self) -> int:
        """Number of links."""
        return int(self.rec.size)


def _codes(geocode: np.ndarray, sex: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Integer block codes shared by two files, and (block, sex) group codes."""
    blocks, inv = np.unique(np.asarray(geocode).astype("U16"), return_inverse=True)
    return blocks, inv.astype(np.int64), inv.astype(np.int64) * 2 + (np.asarray(sex) - 1)


def _pair_by_key(
    key_r: np.ndarray,
    key_c: np.ndarray,
    free_r: np.ndarray,
    free_c: np.ndarray,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """Pair free records with equal keys one to one, in random order within a key."""
    ir = np.flatnonzero(free_r)
    ic = np.flatnonzero(free_c)
    if ir.size == 0 or ic.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)

    def ranked(idx: np.ndarray, key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        order = np.lexsort((rng.random(idx.size), key[idx]))
        idx, k = idx[order], key[idx][order]
        start = np.r_[0, np.flatnonzero(np.diff(k)) + 1]
        first = np.repeat(start, np.diff(np.r_[start, k.size]))
        return idx, k, np.arange(k.size) - first

    r_idx, r_key, r_rank = ranked(ir, key_r)
    c_idx, c_key, c_rank = ranked(ic, key_c)
    # join on (key, rank)
    both = np.concatenate([r_key, c_key])
    kmin = both.min()
    width = int(max(r_rank.max(initial=0), c_rank.max(initial=0))) + 1
    code_r = (r_key - kmin) * width + r_rank
    code_c = (c_key - kmin) * width + c_rank
    order = np.argsort(code_c)
    pos = np.searchsorted(code_c[order], code_r)
    pos = np.minimum(pos, code_c.size - 1)
    hit = code_c[order][pos] == code_r
    return r_idx[hit], c_idx[order][pos[hit]]


def link_exact(
    rec: Mapping[str, np.ndarray],
    comm: Mapping[str, np.ndarray],
    *,
    age_window: int = 1,
    seed: int = 0,
) -> Links:
    """Deterministic one-to-one linkage on block, sex and age, then age +-1 (2010).

    Args:
        rec: reconstructed records: ``geocode``, ``sex``, ``age``.
        comm: commercial records: ``geocode``, ``sex``, ``age``.
        age_window: 0 (exact age only) or 1 (then age +-1 among the records left).
        seed: seed of the random order among equal candidates.
    """
    if age_window not in (0, 1):
        raise ConfigError(f"age_window must be 0 or 1, got {age_window}")
    rng = experiment_generator(seed)
    nr = _col(rec, "geocode", "reconstructed records").size
    geo = np.concatenate(
        [_col(rec, "geocode", "rec").astype("U16"), _col(comm, "geocode", "comm").astype("U16")]
    )
    sex = np.concatenate([_col(rec, "sex", "rec"), _col(comm, "sex", "comm")]).astype(np.int64)
    age = np.concatenate([_col(rec, "age", "rec"), _col(comm, "age", "comm")]).astype(np.int64)
    _, _, group = _codes(geo, sex)
    key = group * 128 + age + 1  # ages -1..116 fit in 0..117
    kr, kc = key[:nr], key[nr:]
    free_r = np.ones(nr, dtype=bool)
    free_c = np.ones(kc.size, dtype=bool)
    parts_r, parts_c, parts_k = [], [], []
    r, c = _pair_by_key(kr, kc, free_r, free_c, rng)
    free_r[r] = False
    free_c[c] = False
    parts_r.append(r)
    parts_c.append(c)
    parts_k.append(np.zeros(r.size, np.int8))
    if age_window == 1:
        for delta in (-1, 1):
            r, c = _pair_by_key(kr, kc + delta, free_r, free_c, rng)
            free_r[r] = False
            free_c[c] = False
            parts_r.append(r)
            parts_c.append(c)
            parts_k.append(np.ones(r.size, np.int8))
    r = np.concatenate(parts_r)
    return Links(
        rec=r,
        comm=np.concatenate(parts_c),
        kind=np.concatenate(parts_k),
        weight=np.full(r.size, np.nan),
        method="exact",
        model={},
    )


# -- Fellegi-Sunter -------------------------------------------------------------------------

_BLOCK_LEVELS = ("same block", "same block group")
_AGE_LEVELS = ("same age", "age +-1", "age +-2")


def _candidate_pairs(
    rec: Mapping[str, np.ndarray], comm: Mapping[str, np.ndarray], max_age_diff: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pairs in the same block group and sex with ``|age difference| <= max_age_diff``.

    Returns ``(rec index, comm index, block level 0/1, age level 0..max)``.
    """
    rg = _col(rec, "geocode", "rec").astype("U16")
    cg = _col(comm, "geocode", "comm").astype("U16")
    nr = rg.size
    geo = np.concatenate([rg, cg])
    bg, bg_inv = np.unique(geo.astype("U12"), return_inverse=True)
    blk, blk_inv = np.unique(geo, return_inverse=True)
    sex = np.concatenate([_col(rec, "sex", "rec"), _col(comm, "sex", "comm")]).astype(np.int64) - 1
    age = np.concatenate([_col(rec, "age", "rec"), _col(comm, "age", "comm")]).astype(np.int64)
    grp = bg_inv.astype(np.int64) * 2 + sex
    key = grp * 128 + age
    kc = key[nr:]
    order_c = np.argsort(kc, kind="stable")
    kc_sorted = kc[order_c]
    out_r, out_c, out_b, out_a = [], [], [], []
    kr = key[:nr]
    for d in range(-max_age_diff, max_age_diff + 1):
        target = kr + d
        lo = np.searchsorted(kc_sorted, target, side="left")
        hi = np.searchsorted(kc_sorted, target, side="right")
        cnt = hi - lo
        ri = np.repeat(np.arange(nr), cnt)
        if ri.size == 0:
            continue
        start = np.repeat(lo, cnt)
        within = np.arange(ri.size) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        ci = order_c[start + within]
        out_r.append(ri)
        out_c.append(ci)
        out_b.append((blk_inv[ri] != blk_inv[nr + ci]).astype(np.int8))
        out_a.append(np.full(ri.size, abs(d), np.int8))
    if not out_r:
        z = np.zeros(0, np.int64)
        return z, z, z.astype(np.int8), z.astype(np.int8)
    return (
        np.concatenate(out_r),
        np.concatenate(out_c),
        np.concatenate(out_b),
        np.concatenate(out_a),
    )


def _fit_em(
    pattern_counts: np.ndarray,
    n_block: int,
    n_age: int,
    n_rec: int,
    n_comm: int,
    iterations: int = 1000,
) -> dict:
    """EM for the two-class Fellegi-Sunter model on agreement-pattern counts.

    Model (Fellegi & Sunter 1969; EM as in Winkler 1988): a pair is a match with
    probability ``p``; given the class, the block level and the age level are
    independent with probabilities ``m_block, m_age`` (matches) and ``u_block, u_age``
    (non-matches). Pattern ``(j, k)`` has posterior match probability
    ``p m_b[j] m_a[k] / (p m_b[j] m_a[k] + (1-p) u_b[j] u_a[k])`` and weight
    ``log(m_b[j] m_a[k] / (u_b[j] u_a[k]))``.
    """
    counts = pattern_counts.reshape(n_block, n_age).astype(np.float64)
    total = counts.sum()
    if total == 0:
        return {"p": 0.0, "m_block": [], "u_block": [], "m_age": [], "u_age": [], "iterations": 0}
    p = min(0.5, min(n_rec, n_comm) / total)
    m_b = np.linspace(0.9, 0.1, n_block)
    m_b /= m_b.sum()
    m_a = np.linspace(0.8, 0.05, n_age)
    m_a /= m_a.sum()
    u_b = counts.sum(axis=1) / total
    u_a = counts.sum(axis=0) / total
    it = 0  # iterations run
    for it in range(1, iterations + 1):  # noqa: B007 (reported below)
        pm = p * m_b[:, None] * m_a[None, :]
        pu = (1 - p) * u_b[:, None] * u_a[None, :]
        g = pm / np.maximum(pm + pu, 1e-300)
        wm = counts * g
        wu = counts * (1 - g)
        p_new = wm.sum() / total
        m_b_new = (wm.sum(axis=1) + 1e-9) / (wm.sum() + 1e-9 * n_block)
        m_a_new = (wm.sum(axis=0) + 1e-9) / (wm.sum() + 1e-9 * n_age)
        u_b_new = (wu.sum(axis=1) + 1e-9) / (wu.sum() + 1e-9 * n_block)
        u_a_new = (wu.sum(axis=0) + 1e-9) / (wu.sum() + 1e-9 * n_age)
        change = max(
            abs(p_new - p),
            float(np.abs(m_b_new - m_b).max()),
            float(np.abs(m_a_new - m_a).max()),
        )
        p, m_b, m_a, u_b, u_a = p_new, m_b_new, m_a_new, u_b_new, u_a_new
        if change < 1e-9:
            break
    weight = np.log(m_b[:, None] * m_a[None, :]) - np.log(u_b[:, None] * u_a[None, :])
    pm = p * m_b[:, None] * m_a[None, :]
    posterior = pm / (pm + (1 - p) * u_b[:, None] * u_a[None, :])
    return {
        "p": float(p),
        "m_block": m_b.tolist(),
        "u_block": u_b.tolist(),
        "m_age": m_a.tolist(),
        "u_age": u_a.tolist(),
        "weight": weight.tolist(),
        "posterior": posterior.tolist(),
        "iterations": it,
        "block_levels": list(_BLOCK_LEVELS[:n_block]),
        "age_levels": list(_AGE_LEVELS[:n_age]),
    }


def _one_to_one(
    r: np.ndarray, c: np.ndarray, w: np.ndarray, rng: np.random.Generator, max_rounds: int = 100
) -> np.ndarray:
    """Indices of accepted pairs: repeated mutual-best selection by decreasing weight.

    In each round every remaining record proposes its best remaining pair (ties broken
    by a random jitter); pairs that are the best for both of their records are
    accepted, and every other pair touching an accepted record is removed.
    """
    jitter = w + rng.random(w.size) * 1e-6
    alive = np.arange(w.size)
    accepted = []
    for _ in range(max_rounds):
        if alive.size == 0:
            break
        rr, cc, ww = r[alive], c[alive], jitter[alive]
        o = np.lexsort((-ww, rr))
        best_r = np.zeros(alive.size, bool)
        first = np.r_[True, rr[o][1:] != rr[o][:-1]]
        best_r[o[first]] = True
        o = np.lexsort((-ww, cc))
        best_c = np.zeros(alive.size, bool)
        first = np.r_[True, cc[o][1:] != cc[o][:-1]]
        best_c[o[first]] = True
        win = best_r & best_c
        if not win.any():  # pragma: no cover - the global maximum is always mutual-best
            break
        accepted.append(alive[win])
        used_r = np.zeros(int(r.max()) + 1, bool)
        used_c = np.zeros(int(c.max()) + 1, bool)
        used_r[rr[win]] = True
        used_c[cc[win]] = True
        alive = alive[~(used_r[rr] | used_c[cc])]
    return np.concatenate(accepted) if accepted else np.zeros(0, np.int64)


def link_fellegi_sunter(
    rec: Mapping[str, np.ndarray],
    comm: Mapping[str, np.ndarray],
    *,
    max_age_diff: int = 2,
    min_weight: float = 0.0,
    seed: int = 0,
    chunk_pairs: int = 20_000_000,
) -> Links:
    """Probabilistic one-to-one linkage (Fellegi-Sunter with EM-fitted m and u).

    Candidate pairs share block group and sex and differ in age by at most
    ``max_age_diff``; comparison levels are block (same / other block of the block
    group) and the absolute age difference. Pairs with weight ``>= min_weight`` are
    assigned one to one (:func:`_one_to_one`), higher weights first. JASON recommends
    probabilistic record linkage to assess re-identification risk as a function of
    epsilon (JASON (JSR-19-2F) sec. 8.4.1).

    Args:
        rec: reconstructed records: ``geocode``, ``sex``, ``age``.
        comm: commercial records: ``geocode``, ``sex``, ``age``.
        max_age_diff: widest age difference compared (0..5).
        min_weight: minimum Fellegi-Sunter weight ``log(m / u)`` of a link.
        seed: seed of the tie-breaking jitter.
        chunk_pairs: candidate pairs processed at once (memory bound).
    """
    if not 0 <= max_age_diff <= 5:
        raise ConfigError(f"max_age_diff must be in 0..5, got {max_age_diff}")
    if not math.isfinite(min_weight):
        raise ConfigError(f"min_weight must be a finite number, got {min_weight}")
    rng = experiment_generator(seed)
    n_age = max_age_diff + 1
    # process by county so the candidate pairs of one chunk fit in memory
    rg = _col(rec, "geocode", "rec").astype("U16")
    cg = _col(comm, "geocode", "comm").astype("U16")
    counties = np.unique(np.concatenate([rg.astype("U5"), cg.astype("U5")]))
    r_cty = np.searchsorted(counties, rg.astype("U5"))
    c_cty = np.searchsorted(counties, cg.astype("U5"))
    r_order = np.argsort(r_cty, kind="stable")
    c_order = np.argsort(c_cty, kind="stable")
    r_bounds = np.searchsorted(r_cty[r_order], np.arange(counties.size + 1))
    c_bounds = np.searchsorted(c_cty[c_order], np.arange(counties.size + 1))

    def chunk(i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        ri = r_order[r_bounds[i] : r_bounds[i + 1]]
        ci = c_order[c_bounds[i] : c_bounds[i + 1]]
        sub_r = {k: np.asarray(rec[k])[ri] for k in ("geocode", "sex", "age")}
        sub_c = {k: np.asarray(comm[k])[ci] for k in ("geocode", "sex", "age")}
        pr, pc, lb, la = _candidate_pairs(sub_r, sub_c, max_age_diff)
        return ri[pr], ci[pc], lb, la

    counts = np.zeros(2 * n_age, dtype=np.int64)
    for i in range(counties.size):
        _, _, lb, la = chunk(i)
        counts += np.bincount(lb.astype(np.int64) * n_age + la, minlength=2 * n_age)
    model = _fit_em(counts, 2, n_age, rg.size, cg.size)
    if not model.get("posterior"):
        z = np.zeros(0, np.int64)
        return Links(z, z, z.astype(np.int8), np.zeros(0), "fellegi-sunter", model)
    weight = np.asarray(model["weight"]).ravel()
    out_r, out_c, out_w = [], [], []
    for i in range(counties.size):
        pr, pc, lb, la = chunk(i)
        pat = lb.astype(np.int64) * n_age + la
        keep = weight[pat] >= min_weight
        pr, pc, w = pr[keep], pc[keep], weight[pat[keep]]
        if pr.size == 0:
            continue
        acc = _one_to_one(pr, pc, w, rng)
        out_r.append(pr[acc])
        out_c.append(pc[acc])
        out_w.append(w[acc])
    r = np.concatenate(out_r) if out_r else np.zeros(0, np.int64)
    model["pattern_counts"] = counts.tolist()
    model["min_weight"] = min_weight
    return Links(
        rec=r,
        comm=np.concatenate(out_c) if out_c else np.zeros(0, np.int64),
        kind=np.full(r.size, 2, np.int8),
        weight=np.concatenate(out_w) if out_w else np.zeros(0),
        method="fellegi-sunter",
        model=model,
    )


# -- scoring -------------------------------------------------------------------------------


def unique_in_block(truth: Mapping[str, np.ndarray]) -> np.ndarray:
    """Boolean per true person: unique in the block on (sex, age, race, Hispanic origin)."""
    geo = _col(truth, "geocode", "truth").astype("U16")
    _, b = np.unique(geo, return_inverse=True)
    key = (
        (
            (
                (b.astype(np.int64) * 2 + _col(truth, "sex", "truth") - 1) * 116
                + _col(truth, "age", "truth")
            )
            * 2
            + _col(truth, "hispanic", "truth")
        )
        * 63
        + _col(truth, "cenrace", "truth")
        - 1
    )
    _, inv, cnt = np.unique(key, return_inverse=True, return_counts=True)
    return cnt[inv] == 1


def baseline_guess(truth: Mapping[str, np.ndarray], comm: Mapping[str, np.ndarray]) -> np.ndarray:
    """Race-ethnicity guessed for each commercial record from public marginals only.

    The guess is the most common race-ethnicity (63 races x Hispanic origin) among
    persons of the same sex and P12 age band in the record's county: the Bayes-optimal
    guess of an attacker who has the commercial file and the county tables (sex by
    age by race, published at county level in 2010 and accurate under DP at that
    level), but no block tables. Returns ``hispanic * 63 + (cenrace - 1)`` per record.
    """
    geo = _col(truth, "geocode", "truth").astype("U16")
    cty, ci = np.unique(geo.astype("U5"), return_inverse=True)
    band = band_of_age(_col(truth, "age", "truth"))
    eth = _col(truth, "hispanic", "truth") * 63 + _col(truth, "cenrace", "truth") - 1
    cell = (ci * 2 + _col(truth, "sex", "truth") - 1) * N_BANDS + band
    n_cells = cty.size * 2 * N_BANDS
    counts = np.zeros((n_cells, 126), dtype=np.int64)
    np.add.at(counts, (cell, eth), 1)
    # fall back to the county's overall mode for empty cells
    county_counts = counts.reshape(cty.size, 2 * N_BANDS, 126).sum(axis=1)
    mode = counts.argmax(axis=1)
    empty = counts.sum(axis=1) == 0
    mode[empty] = county_counts.argmax(axis=1)[np.arange(n_cells)[empty] // (2 * N_BANDS)]
    cg = _col(comm, "geocode", "comm").astype("U16").astype("U5")
    c_ci = np.minimum(np.searchsorted(cty, cg), cty.size - 1)
    known = cty[c_ci] == cg
    c_cell = (c_ci * 2 + _col(comm, "sex", "comm") - 1) * N_BANDS + band_of_age(
        np.clip(_col(comm, "age", "comm"), 0, 115)
    )
    guess = mode[c_cell]
    guess[~known] = -1
    return guess


def _truth_rows(truth_ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    order = np.argsort(truth_ids)
    pos = np.searchsorted(truth_ids[order], wanted)
    pos = np.minimum(pos, truth_ids.size - 1)
    if not np.array_equal(truth_ids[order][pos], wanted):
        raise InputError("a commercial record names a person_id that is not in the truth")
    return order[pos]


def _ratio(a: float, b: float) -> float:
    """``a / b``, or NaN when ``b`` is 0."""
    return a / b if b else math.nan


def _baseline_rates(
    truth: Mapping[str, np.ndarray],
    comm: Mapping[str, np.ndarray],
    baseline: np.ndarray,
    all_rows: np.ndarray,
    t_eth: np.ndarray,
    t_geo: np.ndarray,
    uniq: np.ndarray,
    nonmodal: np.ndarray,
) -> dict[str, float]:
    """The ``baseline_*`` rates of :func:`reid_rates`.

    Every commercial record is a putative link with the guessed race-ethnicity
    ``baseline``; ``all_rows`` is each commercial record's row in ``truth``.
    """
    n_pop = t_eth.size
    all_pid = _col(comm, "person_id", "comm").astype(np.int64)
    brow = all_rows
    b_right = (baseline >= 0) & (t_eth[brow] == baseline)
    b_all = (
        b_right
        & (t_geo[brow] == _col(comm, "geocode", "comm").astype("U16"))
        & (np.abs(_col(truth, "age", "truth")[brow] - _col(comm, "age", "comm")) <= 1)
        & (_col(truth, "sex", "truth")[brow] == _col(comm, "sex", "comm"))
    )
    b_person = np.zeros(n_pop, bool)
    b_person[brow[b_right]] = True
    return {
        "baseline_confirmed": int(b_right.sum()),
        "baseline_confirmed_share": _ratio(int(b_right.sum()), n_pop),
        "baseline_confirmed_rate": _ratio(int(b_right.sum()), all_pid.size),
        "baseline_confirmed_share_all_attributes": _ratio(int(b_all.sum()), n_pop),
        "baseline_uniques_confirmed_share": _ratio(int((uniq & b_person).sum()), int(uniq.sum())),
        "baseline_nonmodal_confirmed_share": _ratio(
            int((nonmodal & b_person).sum()), int(nonmodal.sum())
        ),
    }


def reid_rates(
    rec: Mapping[str, np.ndarray],
    truth: Mapping[str, np.ndarray],
    comm: Mapping[str, np.ndarray],
    links: Links,
    *,
    baseline: np.ndarray | None = None,
) -> dict:
    """The 2010 re-identification rates for one set of links (JASON (JSR-19-2F) sec. 4.1).

    Rates (2010 values in brackets):

    * ``putative_rate`` = links / reconstructed records [45%];
    * ``confirmed_rate`` = confirmed links / links [38%];
    * ``confirmed_share`` = confirmed links / population [17%] (the headline);
    * the same with ``_all_attributes`` for the stricter 2010 confirmation.

    Uniques: ``unique_share`` of the population is unique in its block on (sex, age,
    race, Hispanic origin); ``uniques_confirmed_share`` of them are confirmed.
    Non-modal persons: ``nonmodal_share`` of the population has a race-ethnicity other
    than the most common one for their county, sex and age band (what the marginals
    baseline guesses); ``nonmodal_confirmed_share`` of them are confirmed, which a
    marginals-only attacker cannot do.
    Baseline (if ``baseline`` guesses are given, :func:`baseline_guess`): every
    commercial record is a putative link with the guessed race-ethnicity, confirmed
    when right; ``baseline_confirmed_share`` is the chance level of the headline.

    Args:
        rec: reconstructed records (``geocode``, ``sex``, ``age``, ``hispanic``, ``cenrace``).
        truth: confidential persons (``person_id`` and the same columns).
        comm: the commercial file (``person_id``, ``geocode``, ``sex``, ``age``).
        links: the links.
        baseline: optional baseline guess per commercial record.
    """
    t_id = _col(truth, "person_id", "truth").astype(np.int64)
    n_pop = t_id.size
    n_rec = _col(rec, "geocode", "rec").size
    all_rows = _truth_rows(t_id, _col(comm, "person_id", "comm").astype(np.int64))
    trow = all_rows[links.comm]
    t_eth = _col(truth, "hispanic", "truth") * 63 + _col(truth, "cenrace", "truth") - 1
    r_eth = _col(rec, "hispanic", "rec") * 63 + _col(rec, "cenrace", "rec") - 1
    right = t_eth[trow] == r_eth[links.rec]
    t_geo = _col(truth, "geocode", "truth").astype("U16")
    r_geo = _col(rec, "geocode", "rec").astype("U16")
    all_attr = (
        right
        & (t_geo[trow] == r_geo[links.rec])
        & (_col(truth, "sex", "truth")[trow] == _col(rec, "sex", "rec")[links.rec])
        & (np.abs(_col(truth, "age", "truth")[trow] - _col(rec, "age", "rec")[links.rec]) <= 1)
    )
    uniq = unique_in_block(truth)
    nonmodal = baseline_guess(truth, truth) != t_eth
    conf_person = np.zeros(n_pop, bool)
    conf_person[trow[right]] = True
    n_links = links.n
    out = {
        "method": links.method,
        "population": int(n_pop),
        "reconstructed": int(n_rec),
        "commercial": int(_col(comm, "person_id", "comm").size),
        "links": n_links,
        "links_exact_age": int((links.kind == 0).sum()),
        "links_age_pm1": int((links.kind == 1).sum()),
        "confirmed": int(right.sum()),
        "confirmed_all_attributes": int(all_attr.sum()),
        "putative_rate": _ratio(n_links, n_rec),
        "confirmed_rate": _ratio(int(right.sum()), n_links),
        "confirmed_share": _ratio(int(right.sum()), n_pop),
        "confirmed_rate_all_attributes": _ratio(int(all_attr.sum()), n_links),
        "confirmed_share_all_attributes": _ratio(int(all_attr.sum()), n_pop),
        "uniques": int(uniq.sum()),
        "unique_share": _ratio(int(uniq.sum()), n_pop),
        "uniques_confirmed": int((uniq & conf_person).sum()),
        "uniques_confirmed_share": _ratio(int((uniq & conf_person).sum()), int(uniq.sum())),
        "nonmodal": int(nonmodal.sum()),
        "nonmodal_share": _ratio(int(nonmodal.sum()), n_pop),
        "nonmodal_confirmed_share": _ratio(
            int((nonmodal & conf_person).sum()), int(nonmodal.sum())
        ),
    }
    if baseline is not None:
        out.update(_baseline_rates(truth, comm, baseline, all_rows, t_eth, t_geo, uniq, nonmodal))
    return out
