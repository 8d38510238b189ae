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

With ``refine=True`` the records of each tract are then re-paired to meet the tract
tables (:mod:`censusdp.attacks.dhc._refine`). :mod:`censusdp.attacks.dhc.scoring`
scores a reconstruction against the truth.
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

from censusdp.attacks.dhc._refine import refine_tract
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
)
from censusdp.errors import ConfigError
from censusdp.progress import Progress, Task

__all__ = [
    "BlockStatus",
    "Reconstruction",
    "check_time_limit",
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
    new, solved, failed = refine_tract(block, keys, task.prior, task.age_detail, task.time_limit)
    if solved == 0:
        return results, (0, failed)
    out = []
    for j, (_, _, how, d, nv) in enumerate(results):
        k, c = np.unique(new[block == j], return_counts=True)
        out.append((k, c, how, d, nv))
    return out, (solved, failed)


def check_time_limit(time_limit: float) -> None:
    """Check HiGHS's time limit per block (seconds).

    Raises:
        ConfigError: unless it is a positive finite number.
    """
    if not (time_limit > 0 and math.isfinite(time_limit)):
        raise ConfigError(f"time_limit must be a positive number of seconds, got {time_limit}")


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
            meet the tract tables PCT12A-O (:func:`censusdp.attacks.dhc._refine.refine_tract`). Off by default: on
            generated states it changed exact matches by -0.2 to +0.7 points and about
            doubled the time, because the block tables do not fix the Hispanic-by-race
            class of each age band, so many groups cannot meet the tract equations
            without also moving classes between bands.
        progress: ``None`` (silent) or a callable taking lines: tracts done / total.

    Returns:
        A :class:`Reconstruction`.
    """
    from censusdp.execution import make_executor

    check_time_limit(time_limit)
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
