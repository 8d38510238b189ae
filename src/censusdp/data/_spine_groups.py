"""The spine's levels between the county and the tract: Prims and tract (subset) groups.

Part of :mod:`censusdp.data.spine` (its module docstring describes the spine): the tract
groups of the paper's Algorithm 2 (Abowd et al. 2021, "Geographic spines in the 2020
Census Disclosure Avoidance System TopDown algorithm", sec. 5; production's
``programs/geographic_spines/optimize_spine.py``), which the 2020 DHC's prim spine
forms within each Prim as its tract-subset groups, and the Prims themselves (production's
``create_prims``: a county part cut by place). Nothing here reads files; ``numpy`` only.
"""

from __future__ import annotations

import numpy as np

__all__ = ["assign_tract_groups", "dense_rank", "isqrt", "prim_parents"]

# Puerto Rico's state FIPS code: its only Prims are its municipios.
_PUERTO_RICO = "72"
# The Prim code of a block in no place (production's "9" * 10, cut to a place code's width).
_NO_PLACE = "99999"


def prim_parents(county_part: np.ndarray, place: np.ndarray, geo: np.ndarray) -> np.ndarray:
    """The Prim of each block: its county part's code followed by a 5-character place code.

    A block in no place, and every block of Puerto Rico (whose only Prims are its
    municipios, production's ``create_prims``: the county and ``"9" * 10``), gets
    ``99999``.

    Args:
        county_part: each block's county-part code (AIAN digit + 5-digit county).
        place: each block's place code, ``""`` for none.
        geo: each block's 16-digit geocode.
    """
    none = (place == "") | (geo.astype("U2") == _PUERTO_RICO)
    prim = np.where(none, _NO_PLACE, place).astype("U5")
    return np.char.add(county_part, prim)


def isqrt(n: np.ndarray) -> np.ndarray:
    """Exact integer square roots of non-negative integers."""
    r = np.floor(np.sqrt(n.astype(np.float64))).astype(np.int64)
    r -= (r * r > n).astype(np.int64)
    r += ((r + 1) * (r + 1) <= n).astype(np.int64)
    return r


def dense_rank(keys: np.ndarray) -> np.ndarray:
    """Integer id of each key, in sorted key order."""
    return np.unique(keys, return_inverse=True)[1].astype(np.int64).ravel()


# -- tract groups ---------------------------------------------------------------------


def _osed_step(in_k: np.ndarray, not_k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One level of the OSED recursion (the paper's eqs. 7-8): sums of the children's
    distances for the entity and its complement, to the unit's pair of distances."""
    return np.minimum(in_k, not_k + 1), np.minimum(in_k + 1, not_k)


def _county_osed(sk: np.ndarray, sn: np.ndarray) -> np.ndarray:
    """County-level OSED of each entity from its per-tract-group sums ``(E, G)``."""
    tk, tn = _osed_step(sk, sn)
    return _osed_step(tk.sum(axis=1), tn.sum(axis=1))[0]


def _tract_groups_of_county(
    tract_of_block: np.ndarray,
    bg_of_block: np.ndarray,
    entity_codes: list[np.ndarray],
    limits: tuple[int, int],
) -> np.ndarray:
    """Tract-group number (1-based) of each tract of one county part (the paper's Alg. 2).

    Args:
        tract_of_block: 0-based tract index of each block of the county part.
        bg_of_block: 0-based block-group index (unique in the county part) of each block.
        entity_codes: per OSE type, each block's code (``""`` = in no entity of the type).
        limits: the spine rules' ``(fanout_cutoff, entity_threshold)``.

    Long because it is one greedy algorithm: the grouping of tracts with identical
    entity sets, the threshold filter, and the pair-merging loop share its state.
    """
    fanout_cutoff, entity_threshold = limits
    n_tracts = int(tract_of_block.max()) + 1
    cutoff = int(isqrt(np.asarray([n_tracts]))[0]) + fanout_cutoff
    # Entity sets per tract (every code of every type, "none" included) and the
    # entities themselves (non-empty codes).
    sets: list[set[str]] = [set() for _ in range(n_tracts)]
    members: list[np.ndarray] = []
    for t_i, codes in enumerate(entity_codes):
        tagged = np.char.add(f"{t_i}:", codes.astype("U"))
        for tr, code in set(zip(tract_of_block.tolist(), tagged.tolist(), strict=True)):
            sets[tr].add(code)
        for code in np.unique(codes[codes != ""]):
            members.append(codes == code)
    # 1. Tracts with identical entity sets form groups of at most `cutoff` tracts.
    groups: list[list[int]] = []
    by_set: dict[frozenset[str], list[int]] = {}
    for tr in range(n_tracts):
        by_set.setdefault(frozenset(sets[tr]), []).append(tr)
    first_of: dict[int, list[list[int]]] = {}
    for trs in by_set.values():
        chunks = [trs[i : i + cutoff] for i in range(0, len(trs), cutoff)]
        for ch in chunks:
            first_of.setdefault(ch[0], []).append(ch)
    for tr in range(n_tracts):
        groups.extend(first_of.get(tr, []))
    # 2. Entity distances at the tract level, and the entities worth targeting.
    n_bg = int(bg_of_block.max()) + 1
    tract_of_bg = np.zeros(n_bg, dtype=np.int64)
    tract_of_bg[bg_of_block] = tract_of_block
    bg_size = np.bincount(bg_of_block, minlength=n_bg)
    ck_rows, cn_rows = [], []
    for inside in members:
        in_bg = np.bincount(bg_of_block[inside], minlength=n_bg)
        bk, bn = _osed_step(in_bg, bg_size - in_bg)
        tk, tn = _osed_step(
            np.bincount(tract_of_bg, weights=bk, minlength=n_tracts).astype(np.int64),
            np.bincount(tract_of_bg, weights=bn, minlength=n_tracts).astype(np.int64),
        )
        bound = _osed_step(tk.sum(), tn.sum())[0]
        if bound > entity_threshold:
            ck_rows.append(tk)
            cn_rows.append(tn)
    if not ck_rows:
        merged = [sum(groups[i : i + cutoff], []) for i in range(0, len(groups), cutoff)]
        return _numbering(merged, n_tracts)
    ck = np.asarray(ck_rows, dtype=np.int64)
    cn = np.asarray(cn_rows, dtype=np.int64)

    def sums(g: list[int]) -> tuple[np.ndarray, np.ndarray]:
        return ck[:, g].sum(axis=1), cn[:, g].sum(axis=1)

    sk = np.column_stack([sums(g)[0] for g in groups])
    sn = np.column_stack([sums(g)[1] for g in groups])
    ids = list(range(len(groups)))
    objective = sorted(_county_osed(sk, sn).tolist(), reverse=True)
    finalized: set[int] = set()
    # 3. Merge pairs of sibling groups while the sorted distances do not get worse.
    while len(groups) > 1:
        merged_pair = False
        active = [i for i in range(len(groups)) if ids[i] not in finalized]
        for pos, a in enumerate(active[:-1]):
            for b in active[pos + 1 :]:
                if len(groups[a]) + len(groups[b]) > cutoff:
                    continue
                keep = np.ones(len(groups), dtype=bool)
                keep[[a, b]] = False
                tk, tn = _osed_step(sk[:, keep], sn[:, keep])
                mk, mn = _osed_step(sk[:, a] + sk[:, b], sn[:, a] + sn[:, b])
                county = _osed_step(tk.sum(axis=1) + mk, tn.sum(axis=1) + mn)[0]
                test = sorted(county.tolist(), reverse=True)
                if test <= objective:
                    groups[a] = groups[a] + groups[b]
                    sk[:, a] += sk[:, b]
                    sn[:, a] += sn[:, b]
                    del groups[b], ids[b]
                    sk = np.delete(sk, b, axis=1)
                    sn = np.delete(sn, b, axis=1)
                    objective = test
                    merged_pair = True
                    break
            if merged_pair:
                break
            finalized.add(ids[a])
        if not merged_pair:
            break
    return _numbering(groups, n_tracts)


def _numbering(groups: list[list[int]], n_tracts: int) -> np.ndarray:
    out = np.zeros(n_tracts, dtype=np.int64)
    for i, g in enumerate(groups):
        out[g] = i + 1
    return out


def assign_tract_groups(
    county_part: np.ndarray,
    tract_part_id: np.ndarray,
    bg: np.ndarray,
    ose: list[np.ndarray],
    limits: tuple[int, int],
) -> np.ndarray:
    """Tract-group number of each block (1-based within its county part or Prim).

    A county part (AIAN flag + county) is not contiguous in geocode order when a county
    has blocks in both parts, so its blocks are selected by id.

    Args:
        county_part: each block's parent code (county part, or Prim).
        tract_part_id: each block's tract-part id.
        bg: each block's block-group number within its tract part.
        ose: per OSE type, each block's code (``""`` = in no entity of the type).
        limits: the spine rules' ``(fanout_cutoff, entity_threshold)``.
    """
    out = np.zeros(county_part.size, dtype=np.int64)
    cp_id = dense_rank(county_part)
    by_part = np.argsort(cp_id, kind="stable")
    cuts = np.flatnonzero(np.diff(cp_id[by_part])) + 1
    for sel in np.split(by_part, cuts):
        tract_local = dense_rank(tract_part_id[sel])
        bg_local = dense_rank(tract_part_id[sel] * (int(bg.max()) + 1) + bg[sel])
        tg = _tract_groups_of_county(tract_local, bg_local, [c[sel] for c in ose], limits)
        out[sel] = tg[tract_local]
    return out
