"""Reconstruct person records from published block tables by integer programming.

This is the database reconstruction attack the Census Bureau ran on the 2010 Census
(JASON (JSR-19-2F) sec. 4.1; Van Riper et al. (2020) sec. 1.2): every published count is an integer linear
equation over the unknown microdata (JASON (JSR-19-2F) eq. (4-1)), and sample zeros remove
most unknowns (Abowd & Schmutte (2019), App. A). Here the unknowns of block ``b`` are the counts
``x[s, a, e] >= 0`` of persons of sex ``s``, single-year age ``a`` and race-ethnicity
``e`` (63 races x Hispanic origin), and the equations are the block tables of
:mod:`censusdp.attacks.dhc.tables`:

* ``P12``:    ``sum_e x[s, a, e] = P12[s, a]``                 (sex by age)
* ``P9``:     ``sum_{s, a} x[s, a, e] = P9[e]``                 (Hispanic by race)
* ``P11``:    ``sum_{s, a >= 18} x[s, a, e] = P11[e]``          (the same, 18+)
* ``P12A-I``: ``sum_{a in band, e in g} x[s, a, e] = P12g[s, band]`` per iteration g
* ``P14`` is implied by the single-year ``P12`` (with ``age_detail="sf1"``, ``P12``
  has age bands and ``P14`` gives single years under 20).

**Pruning.** A variable exists only if every table cell it enters is non-zero
(``P12[s, a] > 0``, ``P9[e] > 0``, ``P11[e] > 0`` for adults or ``P9[e] - P11[e] > 0``
for minors, and ``P12g[s, band(a)] > 0`` for every iteration ``g`` containing ``e``).

**Solver.** Each block is an independent integer program, solved with HiGHS through
``scipy.optimize.milp`` (branch and bound; an open solver). Blocks whose answer is
forced (one race-ethnicity, or one sex-age cell) skip the solver. If the equations
have no non-negative integer solution (tables that were not tabulated from one
microdata file), the block is re-solved with L1 slacks on every equation, with the
consistency violation weighted above any tie-breaking term, and the deviation is
reported.

**Which solution among equally consistent ones.** The block tables often admit many
microdata sets (e.g. two men aged 30 and 31, one White and one Black: which is
which?). The solver is given the linear objective
``sum_v x_v * (-log p_tract(iter(e) | s, a))``, where ``p_tract`` is the share of the
race-ethnicity group ``iter(e)`` (Hispanic; or not Hispanic White, Black, AIAN, Asian,
NHPI, Some Other Race alone, or two or more races: PCT12H-O) among persons of sex
``s`` and single-year age ``a`` in the block's tract, from the published tract tables
(add-0.1 smoothed). So among all solutions consistent with the block tables the
attack returns one that is most plausible under the tract's published age-by-race
distribution; ties that remain are broken by HiGHS (deterministic for a given
problem; variables are ordered by sex, age, Hispanic origin, race). Census used Gurobi
and broke ties by Gurobi's choice (JASON (JSR-19-2F) sec. 4.1).

:func:`match_counts` scores a reconstruction against the truth with a one-to-one
matching (no record is counted twice): exactly on (block, sex, age, race, Hispanic)
and with age within one year.
"""

from __future__ import annotations

import math
import resource
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, milp

from censusdp.attacks.dhc.tables import (
    AGE_BANDS,
    BLOCK_ITERATIONS,
    ITERATIONS,
    N_AGES,
    N_ETH,
    P14_AGES,
    DhcTables,
    band_of_age,
    eth_of_iteration,
    key_histogram,
)
from censusdp.errors import ConfigError, InputError
from censusdp.progress import Progress, Task

__all__ = [
    "BlockStatus",
    "MatchCounts",
    "Reconstruction",
    "match_counts",
    "reconstruct_blocks",
]

N_BANDS = len(AGE_BANDS)
_ITER_MEMBER = np.stack([ITERATIONS[g] for g in BLOCK_ITERATIONS])  # (9, 126)
_FINE = eth_of_iteration()  # eth -> tract iteration index (7..14)
_FINE_LEVELS = np.arange(7, 15)
_BAND = band_of_age(np.arange(N_AGES))


@dataclass(frozen=True)
class BlockStatus:
    """Summary counts of how the blocks were solved.

    Attributes:
        blocks: populated blocks.
        forced: blocks whose solution the tables force (no solver call).
        milp: blocks solved by the integer program.
        slack: blocks whose tables were inconsistent and were solved with slacks.
        not_optimal: blocks where HiGHS stopped before proving optimality (time limit);
            their best integer solution is used.
        deviation: total L1 violation of the block equations over all blocks (0 when
            every block's tables were exactly reproduced).
        variables: total integer variables after pruning.
        refined_groups: (tract, sex, age band) groups re-paired to meet the tract tables.
        refine_infeasible: groups whose tract equations could not be met (kept as is).
    """

    blocks: int
    forced: int
    milp: int
    slack: int
    not_optimal: int
    deviation: int
    variables: int
    refined_groups: int = 0
    refine_infeasible: int = 0

    def to_dict(self) -> dict[str, int]:
        """As a plain dictionary."""
        return dict(self.__dict__)


@dataclass(frozen=True, eq=False)
class Reconstruction:
    """Reconstructed person records.

    Attributes:
        blocks: block geocodes (from the tables).
        block: block index of each record.
        keys: person key of each record (:func:`censusdp.attacks.dhc.tables.split_keys`).
        status: how the blocks were solved.
        seconds: wall-clock time of the reconstruction.
        extra: ``cpu_seconds``: CPU time of the reconstruction, worker processes
            included (on a loaded machine the wall time can be several times larger).
    """

    blocks: np.ndarray
    block: np.ndarray
    keys: np.ndarray
    status: BlockStatus
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n_records(self) -> int:
        """Number of reconstructed records."""
        return int(self.keys.size)

    def columns(self) -> dict[str, np.ndarray]:
        """MDF-coded columns: ``geocode``, ``sex`` (1/2), ``age``, ``hispanic``, ``cenrace`` (1..63)."""
        sa, eth = np.divmod(self.keys, N_ETH)
        sex, age = np.divmod(sa, N_AGES)
        hisp, race = np.divmod(eth, 63)
        return {
            "geocode": self.blocks[self.block],
            "sex": sex + 1,
            "age": age,
            "hispanic": hisp,
            "cenrace": race + 1,
        }


# -- per-block data -----------------------------------------------------------------------


def _row(m: sp.csr_matrix, i: int) -> tuple[np.ndarray, np.ndarray]:
    lo, hi = m.indptr[i], m.indptr[i + 1]
    return m.indices[lo:hi].astype(np.int64), m.data[lo:hi].astype(np.int64)


@dataclass(frozen=True)
class _TractTask:
    """The tables of one tract's blocks (picklable)."""

    first_block: int
    rows: tuple[dict[str, tuple[np.ndarray, np.ndarray]], ...]
    prior: np.ndarray  # (15, 2, N_AGES) tract PCT12A-O
    age_detail: str
    time_limit: float
    refine: bool = False


def _tasks(tables: DhcTables, time_limit: float, refine: bool = False) -> Iterator[_TractTask]:
    pct = tables.tract["PCT12A-O"]
    starts = np.flatnonzero(np.r_[True, np.diff(tables.block_tract) != 0])
    ends = np.r_[starts[1:], tables.blocks.size]
    for lo, hi in zip(starts, ends, strict=True):
        t = int(tables.block_tract[lo])
        prior = np.asarray(pct[t].toarray(), dtype=np.float64).reshape(15, 2, N_AGES)
        rows = tuple({name: _row(m, b) for name, m in tables.block.items()} for b in range(lo, hi))
        yield _TractTask(int(lo), rows, prior, tables.age_detail, time_limit, refine)


def _dense(row: tuple[np.ndarray, np.ndarray], n: int) -> np.ndarray:
    out = np.zeros(n, dtype=np.int64)
    out[row[0]] = row[1]
    return out


def _cost(prior: np.ndarray, sex: np.ndarray, age: np.ndarray, eth: np.ndarray) -> np.ndarray:
    """``-log p_tract(iter(e) | s, a)`` with add-0.1 smoothing over the 8 fine groups."""
    fine = prior[_FINE_LEVELS][:, sex, age]  # (8, n)
    num = prior[_FINE[eth], sex, age] + 0.1
    den = fine.sum(axis=0) + 0.1 * _FINE_LEVELS.size
    return -np.log(num / den)


@dataclass(frozen=True, eq=False)
class _BlockModel:
    """The integer program of one block: ``a x = b``, ``0 <= x <= ub``, minimise ``cost x``.

    ``forced`` is the solution when the tables force it (one race-ethnicity or one
    sex-age cell), checked against the equations by the caller.
    """

    keys: np.ndarray
    a: sp.csr_matrix
    b: np.ndarray
    cost: np.ndarray
    ub: np.ndarray
    n_pop: int
    forced: np.ndarray | None

    @property
    def n_var(self) -> int:
        return int(self.keys.size)

    def deviation(self, x: np.ndarray) -> int:
        return int(np.abs(self.a @ x - self.b).sum())


def _block_model(
    rows: dict[str, tuple[np.ndarray, np.ndarray]], prior: np.ndarray, age_detail: str
) -> _BlockModel | None:
    """Build one block's integer program from its table rows (``None`` if empty).

    Long because the candidate variables and the equation rows share index arrays
    (``i_sa``, ``i_e``, the row offsets): split apart, each piece would need them all.
    """
    h = _dense(rows["P9"], N_ETH)
    ha = _dense(rows["P11"], N_ETH)
    hm = h - ha
    it = _dense(rows["P12A-I"], len(BLOCK_ITERATIONS) * 2 * N_BANDS).reshape(
        len(BLOCK_ITERATIONS), 2, N_BANDS
    )
    if age_detail == "single":
        p12 = _dense(rows["P12"], 2 * N_AGES)
        sa = np.flatnonzero(p12)
    else:
        bands = _dense(rows["P12"], 2 * N_BANDS).reshape(2, N_BANDS)
        p14 = _dense(rows["P14"], 2 * P14_AGES).reshape(2, P14_AGES)
        age_ok = np.zeros((2, N_AGES), dtype=bool)
        age_ok[:, :P14_AGES] = p14 > 0
        age_ok[:, P14_AGES:] = bands[:, _BAND[P14_AGES:]] > 0
        sa = np.flatnonzero(age_ok.ravel())
    eths = np.flatnonzero(h)
    n_pop = int(h.sum())
    if n_pop == 0:
        return None
    sex_sa, age_sa = np.divmod(sa, N_AGES)
    adult = age_sa >= 18
    # candidate (sa, e) pairs: every table cell they enter is non-zero
    ok = np.where(adult[:, None], ha[eths][None, :] > 0, hm[eths][None, :] > 0)
    band_sa = _BAND[age_sa]
    member = _ITER_MEMBER[:, eths]  # (9, ne)
    cell = it[:, sex_sa, band_sa]  # (9, nsa)
    ok &= ~((member[:, None, :]) & (cell[:, :, None] == 0)).any(axis=0)
    i_sa, i_e = np.nonzero(ok)
    v_sex, v_age, v_eth = sex_sa[i_sa], age_sa[i_sa], eths[i_e]
    n_var = int(i_sa.size)
    keys = (v_sex * N_AGES + v_age) * N_ETH + v_eth

    # equations: rows (A, b) as sparse triplets
    eq_rows: list[np.ndarray] = []
    eq_b: list[np.ndarray] = []
    if age_detail == "single":
        eq_rows.append(i_sa)
        eq_b.append(p12[sa])
        off = sa.size
    else:
        # bands for ages >= 20 (and for <20 via P14)
        young = v_age < P14_AGES
        r_young = v_sex * P14_AGES + np.minimum(v_age, P14_AGES - 1)
        r_band = 2 * P14_AGES + v_sex * N_BANDS + _BAND[v_age]
        eq_rows.append(np.where(young, r_young, r_band))
        # bands below 20 are sums of P14 cells: only the bands from 20 up are equations
        band_lo = np.asarray([lo for lo, _ in AGE_BANDS])
        keep_band = np.tile(band_lo >= P14_AGES, 2)
        b = np.concatenate([p14.ravel(), np.where(keep_band, bands.ravel(), 0)])
        eq_b.append(b)
        off = b.size
    eq_rows.append(off + i_e)
    eq_b.append(h[eths])
    off += eths.size
    adult_v = v_age >= 18
    eq_rows.append(np.where(adult_v, off + i_e, -1))
    eq_b.append(ha[eths])
    off += eths.size
    it_cols, it_rows = [], []
    for g in range(len(BLOCK_ITERATIONS)):
        m = _ITER_MEMBER[g, v_eth]
        it_cols.append(np.flatnonzero(m))
        it_rows.append(off + (g * 2 + v_sex[m]) * N_BANDS + _BAND[v_age[m]])
    eq_b.append(it.ravel())
    n_rows = off + it.size
    cols = [np.arange(n_var)] * 3
    row_idx = np.concatenate([*eq_rows, *it_rows])
    col_idx = np.concatenate([*cols, *it_cols])
    keep = row_idx >= 0
    a = sp.csr_matrix(
        (np.ones(int(keep.sum())), (row_idx[keep], col_idx[keep])), shape=(n_rows, n_var)
    )
    b = np.concatenate(eq_b).astype(np.float64)

    forced = None
    if n_var and age_detail == "single" and (eths.size == 1 or sa.size == 1):
        forced = (p12[sa][i_sa] if eths.size == 1 else h[eths][i_e]).astype(np.float64)
    cost = _cost(prior, v_sex, v_age, v_eth) if n_var else np.zeros(0)
    ub = np.minimum(h[v_eth], n_pop).astype(np.float64)
    return _BlockModel(keys, a, b, cost, ub, n_pop, forced)


def _solve_block(
    rows: dict[str, tuple[np.ndarray, np.ndarray]],
    prior: np.ndarray,
    age_detail: str,
    time_limit: float,
) -> tuple[np.ndarray, np.ndarray, str, int, int]:
    """Solve one block; returns ``(keys, counts, how, deviation, n_variables)``."""
    model = _block_model(rows, prior, age_detail)
    if model is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), "empty", 0, 0
    keys, a, b, cost, ub = model.keys, model.a, model.b, model.cost, model.ub
    n_var, n_pop, n_rows = model.n_var, model.n_pop, model.a.shape[0]
    deviation = model.deviation
    # forced solutions: one race-ethnicity, or one sex-age cell
    if model.forced is not None and deviation(model.forced) == 0:
        x = model.forced
        sel = x > 0
        return keys[sel], x[sel].astype(np.int64), "forced", 0, n_var

    options = {"time_limit": time_limit, "presolve": True}
    if n_var:
        res = milp(
            cost,
            integrality=np.ones(n_var),
            bounds=Bounds(np.zeros(n_var), ub),
            constraints=LinearConstraint(a, b, b),
            options=options,
        )
        if res.x is not None:
            x = np.rint(res.x)
            if deviation(x) == 0:
                sel = x > 0
                how = "milp" if res.status == 0 else "not_optimal"
                return keys[sel], x[sel].astype(np.int64), how, 0, n_var
    # inconsistent tables: minimise the L1 violation, then the tie-break cost
    nr = n_rows
    big = 1.0 + (float(np.abs(cost).max()) * n_pop if n_var else 0.0)
    a_s = sp.hstack([a, sp.identity(nr), -sp.identity(nr)], format="csr")
    c_s = np.concatenate([cost, np.full(2 * nr, big)])
    lb = np.zeros(n_var + 2 * nr)
    ub_s = np.concatenate([ub, np.full(2 * nr, np.inf)])
    integ = np.concatenate([np.ones(n_var), np.zeros(2 * nr)])
    res = milp(
        c_s,
        integrality=integ,
        bounds=Bounds(lb, ub_s),
        constraints=LinearConstraint(a_s, b, b),
        options=options,
    )
    if res.x is None:  # pragma: no cover - x = 0 with slacks is always feasible
        return np.zeros(0, np.int64), np.zeros(0, np.int64), "slack", int(b.sum()), n_var
    x = np.rint(res.x[:n_var])
    sel = x > 0
    return keys[sel], x[sel].astype(np.int64), "slack", deviation(x), n_var


_R7 = np.minimum(np.arange(N_ETH) % 63, 6)  # race class: 6 single races, two or more
_CLASS = (np.arange(N_ETH) // 63) * 7 + _R7  # 14 classes: Hispanic origin x race class


def _tract_classes(prior: np.ndarray) -> np.ndarray:
    """Tract counts by (class, sex, age) for the 14 classes, from PCT12A-O.

    Not Hispanic: I (White alone), J-N (the other races alone), O (two or more races).
    Hispanic: iteration A-G minus its not-Hispanic part I-O.
    """
    nh = np.concatenate([prior[8:9], prior[9:14], prior[14:15]])  # (7, 2, ages)
    return np.concatenate([nh, prior[0:7] - nh])


def _refine_tract(
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
        y, (vb, va, vc) = _solve_band(b_i, a_i, c_i, t_ac, lo, single_age, time_limit)
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


def _solve_band(
    b_i: np.ndarray,
    a_i: np.ndarray,
    c_i: np.ndarray,
    t_ac: np.ndarray,
    lo: int,
    single_age: bool,
    time_limit: float,
) -> tuple[np.ndarray | None, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The integer program of :func:`_refine_tract` for one (sex, age band) of a tract.

    Args:
        b_i, a_i, c_i: block, age and class of each record of the group.
        t_ac: tract counts ``T[c, a]`` as an ``(ages in band, 14)`` array.
        lo: the band's lowest age.
        single_age: whether the block's single ages are published (and so fixed).
        time_limit: HiGHS seconds.

    Returns:
        ``y`` (``None`` when there are no variables or no solution) and the variables'
        ``(block, age, class)``.
    """
    ages_t = np.arange(lo, lo + t_ac.shape[0])
    # current counts by (block, age, class)
    cur_key, cur_cnt = np.unique((b_i * N_AGES + a_i) * 14 + c_i, return_counts=True)
    # classes of each block in this group, and its ages (if published)
    bc, bc_cnt = np.unique(b_i * 14 + c_i, return_counts=True)
    ba, ba_cnt = np.unique(b_i * N_AGES + a_i, return_counts=True)
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
    a_mat, b_vec = _band_constraints(vb, va, vc, bc, bc_cnt, ba, ba_cnt, t_ac, lo, single_age)
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
    vb: np.ndarray,
    va: np.ndarray,
    vc: np.ndarray,
    bc: np.ndarray,
    bc_cnt: np.ndarray,
    ba: np.ndarray,
    ba_cnt: np.ndarray,
    t_ac: np.ndarray,
    lo: int,
    single_age: bool,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Equality rows ``A y = b`` of :func:`_solve_band`: block classes, block ages, tract.

    Per (block, class) the records of the block; per (block, age), when single ages
    are published, the block's count; per (age, class) the tract count ``T[c, a]``.
    """
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


def _solve_tract(
    task: _TractTask,
) -> tuple[list[tuple[np.ndarray, np.ndarray, str, int, int]], tuple[int, int]]:
    results = [
        _solve_block(rows, task.prior, task.age_detail, task.time_limit) for rows in task.rows
    ]
    if not task.refine or all(r[0].size == 0 for r in results):
        return results, (0, 0)
    block = np.concatenate(
        [np.full(int(r[1].sum()), j, dtype=np.int64) for j, r in enumerate(results)]
    )
    keys = np.concatenate([np.repeat(r[0], r[1]) for r in results])
    new, solved, failed = _refine_tract(block, keys, task.prior, task.age_detail, task.time_limit)
    if solved == 0:
        return results, (0, failed)
    out = []
    for j, (_, _, how, d, nv) in enumerate(results):
        k, c = np.unique(new[block == j], return_counts=True)
        out.append((k, c, how, d, nv))
    return out, (solved, failed)


def reconstruct_blocks(
    tables: DhcTables,
    *,
    workers: int = 1,
    time_limit: float = 30.0,
    refine: bool = False,
    progress: Progress = None,
) -> Reconstruction:
    """Reconstruct every block's person records from its published tables.

    The integer program of each block and the choice among equally consistent
    solutions are described in the module docstring (JASON (JSR-19-2F) sec. 4.1, eq. (4-1)).

    Args:
        tables: the published tables (:func:`censusdp.attacks.dhc.tables.dhc_tables`).
        workers: worker processes (1 = in-process); tracts are the parallel tasks.
        time_limit: seconds HiGHS may spend on one block.
        refine: re-pair ages and race-ethnicities within (block, sex, age band) to
            meet the tract tables PCT12A-O (:func:`_refine_tract`). Off by default: on
            generated states it changed exact matches by -0.2 to +0.7 points and about
            doubled the time, because the block tables do not fix the Hispanic-by-race
            class of each age band, so many groups cannot meet the tract equations
            without also moving classes between bands.
        progress: ``None`` (silent) or a callable taking lines: tracts done / total.

    Returns:
        A :class:`Reconstruction`.
    """
    from censusdp.execution import make_executor

    if not (time_limit > 0 and math.isfinite(time_limit)):
        raise ConfigError(f"time_limit must be a positive number of seconds, got {time_limit}")
    t0 = time.perf_counter()
    cpu0 = _cpu_seconds()
    n_tracts = int(tables.tracts.size)
    executor = make_executor(workers)
    counts = {"forced": 0, "milp": 0, "slack": 0, "not_optimal": 0, "empty": 0}
    dev = nvar = refined = refine_failed = 0
    blk_parts: list[np.ndarray] = []
    key_parts: list[np.ndarray] = []
    bar = Task(progress, "reconstructing tracts", n_tracts, unit="tracts")
    try:
        tasks = list(_tasks(tables, time_limit, refine))
        for task, result in zip(tasks, executor.map(_solve_tract, tasks), strict=True):
            result, (n_ref, n_fail) = result
            refined += n_ref
            refine_failed += n_fail
            for j, (k, c, how, d, nv) in enumerate(result):
                counts[how] += 1
                dev += d
                nvar += nv
                if k.size:
                    blk_parts.append(np.full(int(c.sum()), task.first_block + j, dtype=np.int64))
                    key_parts.append(np.repeat(k, c))
            bar.advance()
        bar.close()
    finally:
        close = getattr(executor, "close", None)
        if close is not None:
            close()
    block = np.concatenate(blk_parts) if blk_parts else np.zeros(0, np.int64)
    keys = np.concatenate(key_parts) if key_parts else np.zeros(0, np.int64)
    status = BlockStatus(
        blocks=int(sum(v for k, v in counts.items() if k != "empty")),
        forced=counts["forced"],
        milp=counts["milp"],
        slack=counts["slack"],
        not_optimal=counts["not_optimal"],
        deviation=int(dev),
        variables=int(nvar),
        refined_groups=int(refined),
        refine_infeasible=int(refine_failed),
    )
    extra = {"cpu_seconds": round(_cpu_seconds() - cpu0, 3)}
    return Reconstruction(tables.blocks, block, keys, status, time.perf_counter() - t0, extra)


def _cpu_seconds() -> float:
    """CPU seconds of this process and its reaped children (worker processes)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
    return total


# -- scoring ------------------------------------------------------------------------------


@dataclass(frozen=True)
class MatchCounts:
    """One-to-one matches between reconstructed and true records.

    Attributes:
        reconstructed: number of reconstructed records.
        population: number of true records.
        exact: matches on block, sex, age, race and Hispanic origin.
        fuzzy_age: matches on block, sex, race and Hispanic origin with age within
            one year (includes the exact ones); a maximum one-to-one matching.
    """

    reconstructed: int
    population: int
    exact: int
    fuzzy_age: int

    @property
    def exact_rate(self) -> float:
        """Exact matches per reconstructed record (2010: 46%, JASON (JSR-19-2F) sec. 4.1)."""
        return self.exact / self.reconstructed if self.reconstructed else math.nan

    @property
    def fuzzy_rate(self) -> float:
        """Matches with age +-1 per reconstructed record (2010: 71%)."""
        return self.fuzzy_age / self.reconstructed if self.reconstructed else math.nan

    def to_dict(self) -> dict[str, float | int]:
        """Counts and rates (also per true person)."""
        pop = self.population
        return {
            "reconstructed": self.reconstructed,
            "population": pop,
            "exact": self.exact,
            "fuzzy_age": self.fuzzy_age,
            "exact_rate": self.exact_rate,
            "fuzzy_rate": self.fuzzy_rate,
            "exact_share_of_population": self.exact / pop if pop else math.nan,
            "fuzzy_share_of_population": self.fuzzy_age / pop if pop else math.nan,
        }


def _age_window_matching(r: np.ndarray, t: np.ndarray, width: int = 1) -> np.ndarray:
    """Maximum one-to-one matching with ``|age_r - age_t| <= width``, per row.

    ``r`` and ``t`` are (groups x ages) counts. Scanning ages upward and matching the
    oldest unmatched records first is optimal for window constraints on a line (an
    unmatched record of age ``a`` can only match ages ``<= a + width`` later, so
    serving it first never loses a match). Returns matches per group.
    """
    if width != 1:
        raise ConfigError(f"age window must be 1, got {width}")
    n = r.shape[0]
    carry_r = np.zeros(n, dtype=np.int64)
    carry_t = np.zeros(n, dtype=np.int64)
    total = np.zeros(n, dtype=np.int64)
    for a in range(r.shape[1]):
        ra = r[:, a].astype(np.int64)
        ta = t[:, a].astype(np.int64)
        m1 = np.minimum(carry_r, ta)
        ta = ta - m1
        m2 = np.minimum(carry_t, ra)
        ra = ra - m2
        m3 = np.minimum(ra, ta)
        total += m1 + m2 + m3
        carry_r, carry_t = ra - m3, ta - m3
    return total


def match_counts(
    rec_block_codes: np.ndarray,
    rec_keys: np.ndarray,
    true_block_codes: np.ndarray,
    true_keys: np.ndarray,
) -> MatchCounts:
    """Score reconstructed records against the truth by one-to-one matching.

    Exact: for each (block, key) the matches are ``min(reconstructed, true)``, which
    is a maximum one-to-one matching. Age +-1: within each (block, sex, race,
    Hispanic origin) a maximum one-to-one matching of ages within one year
    (:func:`_age_window_matching`). JASON (JSR-19-2F) sec. 4.1 reports 46% and 71%.

    Args:
        rec_block_codes, true_block_codes: block geocodes of each record.
        rec_keys, true_keys: person keys (:func:`censusdp.attacks.dhc.tables.keys_of`).
    """
    rb = np.asarray(rec_block_codes).astype("U16")
    tb = np.asarray(true_block_codes).astype("U16")
    if rb.size != np.asarray(rec_keys).size or tb.size != np.asarray(true_keys).size:
        raise InputError("block codes and keys must have the same length")
    blocks, inv = np.unique(np.concatenate([rb, tb]), return_inverse=True)
    ri, ti = inv[: rb.size], inv[rb.size :]
    R = key_histogram(ri, rec_keys, blocks.size)
    T = key_histogram(ti, true_keys, blocks.size)
    exact = int(R.minimum(T).sum())

    # fuzzy: groups (block, sex, eth) x age
    def group_age(bi: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sa, eth = np.divmod(np.asarray(keys, dtype=np.int64), N_ETH)
        sex, age = np.divmod(sa, N_AGES)
        return (bi * 2 + sex) * N_ETH + eth, age

    rg, ra = group_age(ri, rec_keys)
    tg, ta = group_age(ti, true_keys)
    groups, ginv = np.unique(np.concatenate([rg, tg]), return_inverse=True)
    fuzzy = 0
    chunk = 200_000
    gr, gt = ginv[: rg.size], ginv[rg.size :]
    for lo in range(0, groups.size, chunk):
        hi = min(groups.size, lo + chunk)
        selr = (gr >= lo) & (gr < hi)
        selt = (gt >= lo) & (gt < hi)
        rm = np.zeros((hi - lo, N_AGES), dtype=np.int32)
        tm = np.zeros((hi - lo, N_AGES), dtype=np.int32)
        np.add.at(rm, (gr[selr] - lo, ra[selr]), 1)
        np.add.at(tm, (gt[selt] - lo, ta[selt]), 1)
        fuzzy += int(_age_window_matching(rm, tm).sum())
    return MatchCounts(int(rb.size), int(tb.size), exact, fuzzy)
