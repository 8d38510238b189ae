"""The rough plausible truth of the AMC (censusdp.infer._rough): the kernel of released
block sizes, its deconvolution, and the blocks moved to the deconvolved sizes."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from censusdp.infer._rough import deconvolve_sizes, roughen_blocks, size_kernel


def _lift(sizes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A TopDown-like law: an empty block gains Poisson(2) persons, a block of 30 or
    more loses 3, others get +-1 noise (never below 0)."""
    noise = rng.integers(-1, 2, sizes.size)
    out = np.where(sizes == 0, rng.poisson(2.0, sizes.size), sizes + noise)
    return np.maximum(np.where(sizes >= 30, out - 3, out), 0)


def test_size_kernel_of_known_laws() -> None:
    sizes = np.repeat(np.arange(50), 40)
    # released as they are: the identity
    kern = size_kernel(sizes, np.stack([sizes, sizes]), 49)
    np.testing.assert_allclose(kern[:, :50], np.eye(50))
    # released one more: the kernel is shifted by one column
    kern = size_kernel(sizes, np.stack([sizes + 1] * 3), 49)
    np.testing.assert_allclose(kern[np.arange(50), np.arange(50) + 1], 1.0)
    assert np.allclose(kern.sum(axis=1), 1.0)


def test_size_kernel_pools_a_window_only_where_sizes_are_rare() -> None:
    rng = np.random.default_rng(0)
    sizes = np.concatenate([np.zeros(400, dtype=np.int64), np.array([100, 101, 103])])
    released = np.stack([_lift(sizes, rng) for _ in range(2)])
    kern = size_kernel(sizes, released, 110)
    # size 0 has 800 pairs of its own: its row is the empirical lift of empty blocks
    assert abs(kern[0] @ np.arange(kern.shape[1]) - 2.0) < 0.2
    # size 102 has no block: its row borrows the errors of 100-103, shifted
    assert abs(kern[102] @ np.arange(kern.shape[1]) - (102 - 3)) < 1.5


def test_deconvolution_recovers_the_empty_blocks() -> None:
    rng = np.random.default_rng(1)
    truth = np.where(rng.random(6000) < 0.5, 0, rng.poisson(20, 6000))
    released = _lift(truth, rng)
    assert (released == 0).mean() < 0.1  # the release hides most empty blocks
    # the kernel from re-releases of another state with the same law
    source = rng.poisson(12, 6000)
    source[:2000] = 0
    kern = size_kernel(source, np.stack([_lift(source, rng) for _ in range(3)]), 80)
    prior = deconvolve_sizes(released, kern)
    assert abs(prior[0] - 0.5) < 0.04
    assert abs(prior @ np.arange(prior.size) - truth.mean()) < 0.5


def _blocks(rng: np.random.Generator) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """40 blocks in 4 groups over 6 cells (cells 0-3 household, 4-5 group quarters);
    blocks 0-4 have no housing units (only group quarters)."""
    truth = np.where(rng.random(40) < 0.5, 0, rng.poisson(25, 40))
    released = _lift(truth, rng)
    dense = np.zeros((40, 6), dtype=np.int64)
    for b, n in enumerate(released):
        dense[b, :4] = rng.multinomial(n, [0.4, 0.3, 0.2, 0.1])
    dense[:5, :4] = 0
    dense[:8, 4] = 2  # group quarters in the first blocks
    hu = np.where(np.arange(40) < 5, 0, 10)
    return sp.csr_matrix(dense), hu, np.repeat(np.arange(4), 10)


def test_roughen_keeps_group_totals_and_invariant_parts() -> None:
    rng = np.random.default_rng(2)
    person, hu, group = _blocks(rng)
    sizes = np.asarray(person.sum(axis=1)).ravel()
    released = np.stack([_lift(sizes, rng) for _ in range(4)])
    households = np.array([True] * 4 + [False] * 2)
    rough, hh = roughen_blocks(person, households, hu, group, released, seed=3)
    dense, before = rough.toarray(), person.toarray()
    assert (dense >= 0).all() and rough.dtype == np.int64
    np.testing.assert_array_equal(  # every group's total, cell by cell summed
        np.bincount(group, weights=dense.sum(axis=1)),
        np.bincount(group, weights=before.sum(axis=1)),
    )
    np.testing.assert_array_equal(dense[:, 4:], before[:, 4:])  # group quarters as released
    np.testing.assert_array_equal(dense[:5], before[:5])  # no housing units: untouched
    np.testing.assert_array_equal(hh, dense[:, :4].sum(axis=1))
    # rougher: more empty blocks (the law lifts them) and a larger sum of squares
    assert (dense.sum(axis=1) == 0).sum() > (before.sum(axis=1) == 0).sum()
    assert (dense.sum(axis=1) ** 2).sum() > (before.sum(axis=1) ** 2).sum()


def test_roughen_is_identity_when_the_release_does_not_move_blocks() -> None:
    rng = np.random.default_rng(4)
    person, hu, group = _blocks(rng)
    sizes = np.asarray(person.sum(axis=1)).ravel()
    households = np.array([True] * 4 + [False] * 2)
    rough, _ = roughen_blocks(person, households, hu, group, np.stack([sizes] * 2), seed=5)
    np.testing.assert_array_equal(rough.toarray(), person.toarray())


def _kill_singletons(cells: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A TopDown-like law inside blocks: a cell of 1 comes out 0 with probability 0.7,
    its person going to the block's largest cell."""
    out = cells.copy()
    for row in out:
        dead = (row == 1) & (rng.random(row.size) < 0.7)
        row[np.argmax(row)] += int(dead.sum())
        row[dead] = 0
    return out


def test_roughen_cells_puts_back_the_small_cells() -> None:
    """With the re-releases' cells, the household cells are deconvolved too: the small
    cells a release removes come back (more non-zero cells per block), every block's
    total is the block step's (here the block sizes do not move) and group quarters
    stay as released."""
    rng = np.random.default_rng(6)
    n, c = 300, 12
    truth = np.zeros((n, c), dtype=np.int64)
    truth[:, 0] = rng.integers(40, 80, n)
    truth[:, 1:8] = rng.random((n, 7)) < 0.5  # singletons of other cells
    released = _kill_singletons(truth, rng)
    released[:, 10] = 3  # group quarters
    households = np.arange(c) < 10
    person = sp.csr_matrix(released)
    reruns = [sp.csr_matrix(_kill_singletons(released, rng)) for _ in range(3)]
    totals = np.stack([np.asarray(r.sum(axis=1)).ravel() for r in reruns])
    sizes = np.asarray(person.sum(axis=1)).ravel()
    rough, hh = roughen_blocks(
        person, households, np.full(n, 9), np.arange(n) // 10, np.stack([sizes] * 3), 7, reruns
    )
    dense = rough.toarray()
    assert totals.shape == (3, n)
    np.testing.assert_array_equal(dense.sum(axis=1), sizes)
    np.testing.assert_array_equal(dense[:, 10:], released[:, 10:])
    np.testing.assert_array_equal(hh, dense[:, :10].sum(axis=1))
    nnz = (dense[:, :10] > 0).sum(axis=1).mean()
    assert nnz > (released[:, :10] > 0).sum(axis=1).mean() + 1.0
    assert abs(nnz - (truth > 0).sum(axis=1).mean()) < 1.0
