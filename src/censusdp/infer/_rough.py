"""A rougher plausible truth for the AMC: the released blocks' sizes deconvolved.

TopDown spreads people: non-negativity lifts nearly empty blocks, the exact totals take
it back from populous ones, so the release (the MDF) has far fewer empty blocks than the
truth (generated Vermont at 30%: 48.7% of the true blocks are empty, 21.0% of the
released ones), and re-releasing that smoother state disturbs small areas less than
releasing the truth did. The law that maps a block's size to its released size is seen
by the re-releases themselves: re-released from the MDF, a block of ``s`` persons comes
out with ``s'`` persons with a distribution ``p(s' | s)`` that is close to the one the
truth went through (an empty block: 1.64 persons on average from the MDF, 1.95 from the
truth). What differs is the distribution of the sizes it is applied to.

So the first generation of re-releases (the plain AMC) measures the kernel
``p(s' | s)``, and the released sizes ``m_b`` are deconvolved by it (empirical Bayes,
Robbins 1956; the nonparametric maximum likelihood prior of Kiefer & Wolfowitz 1956 by
EM, Laird 1978): the prior ``pi`` of true block sizes maximises
``sum_b log sum_s pi(s) p(m_b | s)``, and each block's plausible true size is drawn
from its posterior ``pi(s) p(m_b | s) / sum_s' ...``. The rough truth is the MDF with
each block's household persons moved to that size (removed at random, or added in the
block's own mix of cells), block groups' totals kept exactly (the balance spread over
the block group's blocks in proportion to their size), so every invariant and every
total above the block group is the MDF's. Blocks without housing units (no household
population can be placed there) and the group-quarters population are left as
released. :mod:`censusdp.infer.amc` re-releases this truth for the margins.

**The cells too.** The block sizes are not what the block errors mostly depend on: a
populous true block has twice the non-zero cells of its released self (generated
Vermont, blocks of 201 or more persons: 9.0 against 4.7, 3.8 of them single persons
against 1.1), because TopDown removes the small cells of populous blocks, and it is
losing them that gives those blocks most of their error. Given the re-releases' block
histograms, each household cell is deconvolved the same way (per class of block size,
:data:`_CLASSES`: the kernel of a cell's count from the re-releases, its prior by the
plain EM, one posterior draw per cell; no smoothing step, a cell's counts being a spike
at 0 and 1 and a few large counts), and the block's cells are then held to its
deconvolved household persons (persons added in proportion to the drawn cells, or
removed at random). The cells a zero may turn into are the block's household cells,
all alike: the kernel cannot tell which race a lost single person had.

This module reads and writes nothing.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["deconvolve_sizes", "roughen_blocks", "size_kernel"]

_MIN_POOL = 200
"""Fewest (block, replicate) pairs a size's kernel is estimated from (the window widens)."""


def size_kernel(sizes: np.ndarray, released: np.ndarray, support: int) -> np.ndarray:
    """``p[s, m]``: the probability that a block of ``s`` persons is released with ``m``.

    Args:
        sizes: ``(blocks,)`` each block's size in the re-released truth.
        released: ``(K, blocks)`` its sizes in ``K`` re-releases.
        support: the largest size ``s`` (rows ``0..support``).

    A size's row pools the errors ``released - size`` of the blocks whose size is within
    a window of it, shifted to ``s`` (a shifted mass below 0 is put at 0): ``s`` alone
    while at least :data:`_MIN_POOL` (block, replicate) pairs have it, else the window
    widens, up to a quarter of ``s`` (errors scale with the size; a wider window would
    mix in the lift of empty blocks) and beyond only while it holds no block at all.
    Columns run to ``support`` plus the largest error.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    released = np.atleast_2d(np.asarray(released, dtype=np.int64))
    k = released.shape[0]
    err = (released - sizes[None, :]).T  # (blocks, K)
    order = np.argsort(sizes, kind="stable")
    ss, ee = sizes[order], err[order]
    width = support + int(max(err.max(initial=0), 0)) + 1
    kern = np.zeros((support + 1, width))
    for s in range(support + 1):
        w = 0
        while True:
            lo, hi = np.searchsorted(ss, s - w, "left"), np.searchsorted(ss, s + w, "right")
            full = (hi - lo) * k >= _MIN_POOL or (lo == 0 and hi == ss.size)
            if full or (hi > lo and 2 * w > max(1, s // 4)):
                break
            w = max(1, 2 * w)
        m = np.clip(s + ee[lo:hi].ravel(), 0, width - 1)
        if m.size == 0:
            kern[s, s] = 1.0
            continue
        kern[s] = np.bincount(m, minlength=width) / m.size
    return kern


def _smooth_tail(prior: np.ndarray, half: int) -> np.ndarray:
    """``prior`` with sizes 1 and up averaged over ``2 half + 1`` neighbours (reflected
    at the ends); the mass at 0, the empty blocks, kept apart."""
    if half == 0 or prior.size < 2 * half + 2:
        return prior
    tail = prior[1:]
    padded = np.concatenate([tail[half - 1 :: -1], tail, tail[: -half - 1 : -1]])
    window = np.full(2 * half + 1, 1.0 / (2 * half + 1))
    return np.concatenate([prior[:1], np.convolve(padded, window, "valid")])


def deconvolve_sizes(
    observed: np.ndarray, kernel: np.ndarray, iterations: int = 500, smooth: int = 2
) -> np.ndarray:
    """The prior ``pi`` over sizes ``0..len(kernel) - 1`` of blocks released with
    ``observed`` persons under ``kernel`` (:func:`size_kernel`), by EMS (Silverman,
    Jones, Wilson & Nychka 1990: EM with a smoothing step) from the uniform prior:
    ``pi(s) <- mean_b pi(s) p(m_b | s) / sum_t pi(t) p(m_b | t)``, then sizes 1 and up
    averaged over ``2 smooth + 1`` neighbours (``smooth=0``: the plain EM, the maximum
    likelihood prior).

    The smoothing step is what makes the empty blocks identifiable: a block of 0 and
    one of 1 person are released alike (on generated Vermont an empty block gets 1.6
    persons, a block of 1 gets 2.2), so the plain EM splits the empty blocks between
    sizes 0 and 1 (30% and 19% of the blocks, where the truth has 49% and 2%); the
    smoothed prior puts 42% at 0 and spreads the rest as the truth does.
    """
    values, counts = np.unique(np.asarray(observed, dtype=np.int64), return_counts=True)
    values = np.minimum(values, kernel.shape[1] - 1)
    lik = kernel[:, values].T  # (distinct observed, sizes)
    weights = counts / counts.sum()
    prior = np.full(kernel.shape[0], 1.0 / kernel.shape[0])
    for _ in range(iterations):
        mix = lik @ prior
        mix[mix <= 0] = np.inf  # a size no prior size reaches: no information
        prior = _smooth_tail(prior * (lik.T @ (weights / mix)), smooth)
        prior /= prior.sum()
    return prior


def _posterior_draws(
    observed: np.ndarray, kernel: np.ndarray, prior: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """One draw of each block's size from ``prior(s) p(m_b | s)`` (the block's own size
    where no prior size can produce it)."""
    observed = np.asarray(observed, dtype=np.int64)
    out = observed.copy()
    clipped = np.minimum(observed, kernel.shape[1] - 1)
    order = np.argsort(clipped, kind="stable")
    values, starts = np.unique(clipped[order], return_index=True)
    ends = np.append(starts[1:], order.size)
    for v, lo, hi in zip(values.tolist(), starts.tolist(), ends.tolist(), strict=True):
        post = prior * kernel[:, v]
        total = post.sum()
        if total <= 0:
            continue
        who = order[lo:hi]
        cdf = np.cumsum(post / total)
        out[who] = np.minimum(np.searchsorted(cdf, rng.random(who.size), "right"), prior.size - 1)
    return out


_CLASSES = (0, 11, 51, 201)
"""Block-size classes (lower bounds) whose cells share a kernel and a prior."""


def _rough_cells(
    cells: np.ndarray, released: list[np.ndarray], sizes: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """``(blocks, cells)`` household cell counts deconvolved cell by cell: per class of
    block size (:data:`_CLASSES`), the kernel of a cell's count (:func:`size_kernel`
    over the class's cells and their ``released`` counts), its prior (EMS) and one
    posterior draw per cell."""
    out = cells.copy()
    cls = np.searchsorted(np.asarray(_CLASSES), sizes, "right") - 1
    for c in range(len(_CLASSES)):
        rows = np.flatnonzero(cls == c)
        if rows.size == 0:
            continue
        obs = cells[rows].ravel()
        rel = np.stack([r[rows].ravel() for r in released])
        kern = size_kernel(obs, rel, int(obs.max(initial=0)) + 10)
        prior = deconvolve_sizes(obs, kern, iterations=300, smooth=0)
        out[rows] = _posterior_draws(obs, kern, prior, rng).reshape(rows.size, -1)
    return out


def _to_total(row: np.ndarray, total: int, rng: np.random.Generator) -> np.ndarray:
    """``row`` with persons added in proportion to it, or removed at random, to sum to
    ``total`` (``None``-free: an empty row stays empty)."""
    diff = total - int(row.sum())
    if diff > 0 and row.sum() > 0:
        return row + rng.multinomial(diff, row / row.sum())
    if diff < 0:
        return row - rng.multivariate_hypergeometric(row, -diff)
    return row


def _move(counts: np.ndarray, change: int, rng: np.random.Generator) -> np.ndarray:
    """``counts`` (cells of one block) with ``change`` persons added (in proportion to
    the cells) or removed (at random, without replacement)."""
    if change > 0:
        return counts + rng.multinomial(change, counts / counts.sum())
    if change < 0:
        return counts - rng.multivariate_hypergeometric(counts, -change)
    return counts


def _balanced_targets(
    hh: np.ndarray, target: np.ndarray, free: np.ndarray, group: np.ndarray, rng
) -> np.ndarray:
    """Household persons per block: ``target`` on the free blocks, each group's total
    kept (its balance spread over the group's free blocks in proportion to their new
    size; a group without a free block, or with no persons to spread, unchanged)."""
    new = np.where(free, np.maximum(target, 0), hh).astype(np.int64)
    n_groups = int(group.max()) + 1 if group.size else 0
    diff = np.bincount(group, weights=hh - new, minlength=n_groups).astype(np.int64)
    for g in np.flatnonzero(diff):
        who = np.flatnonzero((group == g) & free)
        weight = new[who].astype(np.float64)
        if who.size == 0 or weight.sum() <= 0:
            new[group == g] = hh[group == g]
            continue
        if diff[g] > 0:
            new[who] += rng.multinomial(int(diff[g]), weight / weight.sum())
        else:
            new[who] -= rng.multivariate_hypergeometric(new[who], int(-diff[g]))
    return new


def roughen_blocks(
    person: sp.csr_matrix,
    households: np.ndarray,
    housing_units: np.ndarray,
    group: np.ndarray,
    released: np.ndarray,
    seed: int,
    released_cells: list[sp.csr_matrix] | None = None,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """The rough plausible truth (module docstring): ``person`` with its blocks' household
    persons deconvolved.

    Args:
        person: ``(blocks x cells)`` the MDF's person histogram (the AMC's first truth).
        households: ``(cells,)`` which cells are household (not group-quarters) persons.
        housing_units: ``(blocks,)`` housing units per block (an invariant).
        group: ``(blocks,)`` each block's block group (index); its totals are kept.
        released: ``(K, blocks)`` the block totals of ``K`` re-releases of ``person``.
        seed: of the posterior draws and the persons moved.
        released_cells: the ``K`` re-releases' ``(blocks x cells)`` histograms: given,
            the household cells are deconvolved too (cell by cell, per class of block
            size), then held to the block's deconvolved household persons.

    Returns:
        The rough ``(blocks x cells)`` histogram and each block's household persons.
    """
    rng = np.random.default_rng(seed)
    person = sp.csr_matrix(person, dtype=np.int64)
    sizes = np.asarray(person.sum(axis=1)).ravel()
    hh = np.asarray(person[:, households].sum(axis=1)).ravel()
    free = np.asarray(housing_units) > 0
    kern = size_kernel(sizes[free], np.asarray(released)[:, free], int(sizes.max(initial=0)) + 20)
    prior = deconvolve_sizes(sizes[free], kern)
    target = np.zeros_like(sizes)
    target[free] = _posterior_draws(sizes[free], kern, prior, rng)
    # the group-quarters persons stay: the household persons take the change
    new_hh = _balanced_targets(hh, hh + target - sizes, free, np.asarray(group), rng)
    hh_cells = np.flatnonzero(households)
    if released_cells is not None:
        return _cells_to_targets(person, hh_cells, (new_hh, free, group), released_cells, rng)
    lil = person.tolil()
    for b in np.flatnonzero(new_hh != hh):
        row = person[b, hh_cells].toarray().ravel()
        if row.sum() == 0:  # nothing to copy the mix from: the block group's
            row = np.asarray(person[group == group[b]][:, hh_cells].sum(axis=0)).ravel()
            if row.sum() == 0:
                continue
            lil[b, hh_cells] = _move(np.zeros_like(row), 0, rng) + rng.multinomial(
                int(new_hh[b]), row / row.sum()
            )
            continue
        lil[b, hh_cells] = _move(row, int(new_hh[b] - hh[b]), rng)
    out = sp.csr_matrix(lil, dtype=np.int64)
    return out, np.asarray(out[:, hh_cells].sum(axis=1)).ravel()


def _place_new(
    cells: np.ndarray, drawn: np.ndarray, mix: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """``drawn`` with the persons it put in cells the release left empty moved, as
    single persons, to empty cells drawn without replacement in proportion to ``mix``
    (the block group's household cells: which cell a lost person was in, the kernel
    cannot tell; its neighbours' mix can)."""
    out = drawn.copy()
    for i in np.flatnonzero((drawn * (cells == 0)).sum(axis=1)):
        empty = cells[i] == 0
        n = int(drawn[i][empty].sum())
        out[i][empty] = 0
        weight = np.where(empty, mix[i] + 1e-3, 0.0)
        n = min(n, int(empty.sum()))
        out[i][rng.choice(weight.size, n, replace=False, p=weight / weight.sum())] += 1
    return out


def _cells_to_targets(
    person: sp.csr_matrix,
    hh_cells: np.ndarray,
    blocks: tuple[np.ndarray, np.ndarray, np.ndarray],
    released_cells: list[sp.csr_matrix],
    rng: np.random.Generator,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """The free blocks' household cells deconvolved (:func:`_rough_cells`, classes by
    the block's deconvolved size; new cells placed by :func:`_place_new`) and held to
    the household persons ``blocks[0]`` (``blocks``: those, which blocks are free, each
    block's group); the other cells as released."""
    new_hh, free, group = blocks
    rows = np.flatnonzero(free)
    cells = person[rows][:, hh_cells].toarray()
    released = [sp.csr_matrix(r)[rows][:, hh_cells].toarray() for r in released_cells]
    groups = np.asarray(group)[rows]
    by_group = np.zeros((int(groups.max(initial=0)) + 1, cells.shape[1]))
    np.add.at(by_group, groups, cells)
    drawn = _place_new(
        cells, _rough_cells(cells, released, new_hh[rows], rng), by_group[groups], rng
    )
    mix = cells.sum(axis=0)  # a block with nothing to copy from takes the state's mix
    for i in range(rows.size):
        base = next((r for r in (drawn[i], cells[i]) if r.sum() > 0), None)
        if base is None:
            base = rng.multinomial(1, mix / mix.sum()) if mix.sum() else drawn[i]
        drawn[i] = _to_total(base, int(new_hh[rows[i]]), rng)
    lil = person.tolil()
    for i in np.flatnonzero((drawn != cells).any(axis=1)):
        lil[rows[i], hh_cells] = drawn[i]
    out = sp.csr_matrix(lil, dtype=np.int64)
    return out, np.asarray(out[:, hh_cells].sum(axis=1)).ravel()
