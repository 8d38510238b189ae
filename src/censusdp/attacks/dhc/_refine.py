"""Re-pairing a tract's reconstructed records to meet its tract tables (``refine=True``).

Exchanging the ages of two records of one block with the same sex and P12 age band
leaves every block table unchanged (bands do not straddle 18), so the tract tables
PCT12A-O can pick the pairing: :func:`refine_tract` solves one small integer program
per (sex, age band) group of a tract with HiGHS (``scipy.optimize.milp``) and deals
each block's race-ethnicities to the chosen ages. Used by
:func:`censusdp.attacks.dhc.reconstruct.reconstruct_blocks`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, milp

from censusdp.attacks.dhc.tables import AGE_BANDS, N_AGES, N_ETH, P14_AGES, band_of_age

__all__ = ["refine_tract"]

N_BANDS = len(AGE_BANDS)
_BAND = band_of_age(np.arange(N_AGES))
_R7 = np.minimum(np.arange(N_ETH) % 63, 6)  # race class: 6 single races, two or more
_CLASS = (np.arange(N_ETH) // 63) * 7 + _R7  # 14 classes: Hispanic origin x race class


def _tract_classes(prior: np.ndarray) -> np.ndarray:
    """Tract counts by (class, sex, age) for the 14 classes, from PCT12A-O.

    Not Hispanic: I (White alone), J-N (the other races alone), O (two or more races).
    Hispanic: iteration A-G minus its not-Hispanic part I-O.
    """
    nh = np.concatenate([prior[8:9], prior[9:14], prior[14:15]])  # (7, 2, ages)
    return np.concatenate([nh, prior[0:7] - nh])


def refine_tract(
    block: np.ndarray, keys: np.ndarray, prior: np.ndarray, age_detail: str, time_limit: float
) -> tuple[np.ndarray, int, int]:
    """Re-pair ages and race-ethnicities within (block, sex, age band) to fit the tract tables.

    Exchanging the ages of two records of one block with the same sex and P12 age band
    leaves every block table unchanged (bands do not straddle 18), so the tract tables
    PCT12A-O can pick the pairing. Per (sex, band) of the tract, an integer program
    chooses ``y[b, a, c]`` (records of block ``b``, age ``a``, class ``c`` = Hispanic
    origin x race class) with the block's ages (where single years are published) and
    classes fixed, and the tract counts ``T[c, s, a]`` met exactly, staying as close to
    the per-block solution as possible (maximum overlap). Then the block's
    race-ethnicities of each class are dealt to those ages. Groups whose tract equations
    cannot be met (inconsistent tables) keep the per-block solution.

    Returns:
        The new keys (same order as ``block``), groups re-solved, groups infeasible.
    """
    tc = _tract_classes(prior)
    sa, eth = np.divmod(keys, N_ETH)
    sex, age = np.divmod(sa, N_AGES)
    cls = _CLASS[eth]
    band = _BAND[age]
    out = keys.copy()
    solved = failed = 0
    group = sex * N_BANDS + band
    for g in np.unique(group):
        idx = np.flatnonzero(group == g)
        s_, bd = divmod(int(g), N_BANDS)
        lo, hi = AGE_BANDS[bd]
        t_ac = tc[:, s_, lo : hi + 1].T  # (ages in band, 14)
        b_i, a_i, c_i = block[idx], age[idx], cls[idx]
        have = np.zeros_like(t_ac)
        np.add.at(have, (a_i - lo, c_i), 1)
        single_age = age_detail == "single" or hi < P14_AGES
        if np.array_equal(have, t_ac):
            continue  # already consistent with the tract
        if np.unique(c_i).size == 1 and single_age:
            continue
        band_group = _BandGroup(b_i, a_i, c_i, t_ac, lo, single_age)
        y, (vb, va, vc) = _solve_band(band_group, time_limit)
        if y is None:
            failed += 1
            continue
        solved += 1
        # deal each block's race-ethnicities of class c to the chosen ages
        for key_bc in np.unique(b_i * 14 + c_i).tolist():
            b, c = divmod(key_bc, 14)
            rec = idx[(b_i == b) & (c_i == c)]
            sel = (vb == b) & (vc == c) & (y > 0)
            new_ages = np.repeat(va[sel], y[sel])
            if new_ages.size != rec.size:  # pragma: no cover - guaranteed by the rows
                continue
            free_ages, moved = _moves(rec, age[rec], new_ages, lo, hi)
            out[moved] = (sex[moved] * N_AGES + free_ages) * N_ETH + eth[moved]
    return out, solved, failed


@dataclass(frozen=True)
class _BandGroup:
    """The records of one (sex, age band) group of a tract, and the tract's counts for it.

    Attributes:
        block, age, cls: block, age and class of each record of the group.
        tract: tract counts ``T[c, a]`` as an ``(ages in band, 14)`` array.
        lo: the band's lowest age.
        single_age: whether the block's single ages are published (and so fixed).
    """

    block: np.ndarray
    age: np.ndarray
    cls: np.ndarray
    tract: np.ndarray
    lo: int
    single_age: bool

    def block_classes(self) -> tuple[np.ndarray, np.ndarray]:
        """The (block, class) keys ``block * 14 + class`` present, and their record counts."""
        return np.unique(self.block * 14 + self.cls, return_counts=True)

    def block_ages(self) -> tuple[np.ndarray, np.ndarray]:
        """The (block, age) keys ``block * N_AGES + age`` present, and their record counts."""
        return np.unique(self.block * N_AGES + self.age, return_counts=True)


def _solve_band(
    group: _BandGroup, time_limit: float
) -> tuple[np.ndarray | None, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The integer program of :func:`refine_tract` for one (sex, age band) of a tract.

    Args:
        group: the group's records and the tract's counts.
        time_limit: HiGHS seconds.

    Returns:
        ``y`` (``None`` when there are no variables or no solution) and the variables'
        ``(block, age, class)``.
    """
    b_i, a_i, c_i = group.block, group.age, group.cls
    t_ac, lo, single_age = group.tract, group.lo, group.single_age
    ages_t = np.arange(lo, lo + t_ac.shape[0])
    # current counts by (block, age, class)
    cur_key, cur_cnt = np.unique((b_i * N_AGES + a_i) * 14 + c_i, return_counts=True)
    # classes of each block in this group, and its ages (if published)
    bc, _ = group.block_classes()
    ba, _ = group.block_ages()
    # variables: (b, a, c) with class c present in block b and T[c, a] > 0 (and, for
    # published single ages, age a present in block b)
    var_b, var_a, var_c = [], [], []
    for key_bc in bc.tolist():
        b, c = divmod(key_bc, 14)
        ok_a = ages_t[t_ac[:, c] > 0]
        if single_age:
            present = ba[(ba // N_AGES) == b] % N_AGES
            ok_a = np.intersect1d(ok_a, present)
        var_b.extend([b] * ok_a.size)
        var_a.extend(ok_a.tolist())
        var_c.extend([c] * ok_a.size)
    vb, va, vc = np.asarray(var_b), np.asarray(var_a), np.asarray(var_c)
    nv = vb.size
    if nv == 0:
        return None, (vb, va, vc)
    a_mat, b_vec = _band_constraints(group, vb, va, vc)
    pos = np.searchsorted(cur_key, (vb * N_AGES + va) * 14 + vc)
    pos = np.minimum(pos, cur_key.size - 1)
    overlap = np.where(cur_key[pos] == (vb * N_AGES + va) * 14 + vc, cur_cnt[pos], 0)
    res = milp(
        -overlap.astype(np.float64),
        integrality=np.ones(nv),
        bounds=Bounds(np.zeros(nv), np.full(nv, float(b_i.size))),
        constraints=LinearConstraint(a_mat, b_vec, b_vec),
        options={"time_limit": time_limit},
    )
    if res.x is None:
        return None, (vb, va, vc)
    return np.rint(res.x).astype(np.int64), (vb, va, vc)


def _band_constraints(
    group: _BandGroup, vb: np.ndarray, va: np.ndarray, vc: np.ndarray
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Equality rows ``A y = b`` of :func:`_solve_band`: block classes, block ages, tract.

    Per (block, class) the records of the block; per (block, age), when single ages
    are published, the block's count; per (age, class) the tract count ``T[c, a]``.
    ``vb``, ``va``, ``vc`` are the block, age and class of each variable.
    """
    bc, bc_cnt = group.block_classes()
    ba, ba_cnt = group.block_ages()
    t_ac, lo, single_age = group.tract, group.lo, group.single_age
    nv = vb.size
    rows_i, rows_j, rhs = [], [], []
    r = 0
    # per (b, c): sum_a y = m[b, c]
    pos = np.searchsorted(bc, vb * 14 + vc)
    rows_i.append(r + pos)
    rows_j.append(np.arange(nv))
    rhs.append(bc_cnt)
    r += bc.size
    if single_age:
        pos = np.searchsorted(ba, vb * N_AGES + va)
        rows_i.append(r + pos)
        rows_j.append(np.arange(nv))
        rhs.append(ba_cnt)
        r += ba.size
    # per (a, c): sum_b y = T[c, a]
    ac = (va - lo) * 14 + vc
    rows_i.append(r + ac)
    rows_j.append(np.arange(nv))
    rhs.append(t_ac.ravel())
    r += t_ac.size
    a_mat = sp.csr_matrix(
        (np.ones(nv * len(rows_i)), (np.concatenate(rows_i), np.concatenate(rows_j))),
        shape=(r, nv),
    )
    b_vec = np.concatenate(rhs).astype(np.float64)
    return a_mat, b_vec


def _moves(
    rec: np.ndarray, old_ages: np.ndarray, new_ages: np.ndarray, lo: int, hi: int
) -> tuple[np.ndarray, np.ndarray]:
    """Which records of ``rec`` change age to reach ``new_ages``, and their new ages.

    Records whose age is still needed keep it (youngest first, ties in record order);
    the others take the remaining ages in increasing order.
    """
    need = np.bincount(new_ages - lo, minlength=hi - lo + 1)
    keep = np.zeros(rec.size, bool)
    for k_ in np.argsort(old_ages, kind="stable"):
        o = old_ages[k_] - lo
        if need[o] > 0:
            need[o] -= 1
            keep[k_] = True
    free_ages = np.repeat(np.arange(lo, hi + 1), need)
    return free_ages, rec[~keep]
