"""TopDown held exactly to a cross of another release's counts (production's ``pl94``).

Production's DHC person run held every geounit's persons to its P.L. 94 release's
HHGQ x voting age x Hispanic x CENRACE counts (``Constraints_DHCP.py``, ``pl94``). Here
the group bounds take a cross as their group variable
(:func:`censusdp.release.topdown.subproblems.group_of_cells`) and
:func:`censusdp.data.invariants.held_cross_bounds` holds each group exactly; a ``pl94``
release re-estimated from its own noisy measurements, held to counts that are not its
own estimate's, must then answer that cross with those counts at every geounit of every
level, with production's passes (held least-squares layers, nested rounding) and one pass.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from censusdp.data.geography import GeoLevels, Hierarchy
from censusdp.data.invariants import held_cross_bounds
from censusdp.data.queries import make_query
from censusdp.data.schema import get_schema
from censusdp.io.budget_files import load_preset
from censusdp.io.mdf_read import read_mdf_histograms
from censusdp.io.nmf_read import NMFReader
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.options import ReleaseOptions
from censusdp.release.pipeline import run_release
from censusdp.release.topdown.driver import TopDownOptions, run_topdown
from censusdp.release.topdown.subproblems import group_of_cells
from synth import block_codes, make_cef, write_cef

PL94 = get_schema("pl94")
CROSS = "hhgq * hispanic * cenrace"  # nests with the pl94 rounder chain, as pl94 with DHCP's


def _release(base, seed: int):
    run_release(
        base / "cef",
        base / f"run{seed}",
        ReleaseBudget(load_preset("pl94-2020").scaled(rho="1/4")),
        ReleaseOptions(seed=seed),
    )
    return base / f"run{seed}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two releases of one input: the second's released persons are the held counts."""
    base = tmp_path_factory.mktemp("held-cross")
    persons, units = make_cef(
        np.random.default_rng(11), block_codes(4, 3, 2, 4), mean_hh=4.0, gq_rate=0.2
    )
    write_cef(base / "cef", persons, units)
    return _release(base, 3), _release(base, 4)


def _hierarchy(run_dir):
    manifest = json.loads((run_dir / "manifest.json").read_text())
    levels = GeoLevels.from_pairs([tuple(g) for g in manifest["geolevels"]])
    blocks = pq.read_table(run_dir / "invariants.parquet")
    codes = np.asarray(blocks.column("geocode").to_numpy(zero_copy_only=False)).astype("U16")
    return Hierarchy.from_blocks(codes, levels)


def test_group_of_cells_of_a_cross_is_its_querys_rows() -> None:
    class _Ms:
        schema = PL94

    groups, n = group_of_cells(_Ms(), CROSS)
    query = make_query(PL94, CROSS)
    assert n == 8 * 2 * 63 == query.n_rows
    assert np.array_equal(groups, query.row_of_cell)
    one, n_one = group_of_cells(_Ms(), "hhgq")
    assert n_one == 8 and np.array_equal(one, PL94.cell_levels("hhgq"))


@pytest.mark.parametrize(
    ("passes", "method"),
    [
        ("production", "auto"),
        ("single", "auto"),
        pytest.param("single", "admm", marks=pytest.mark.slow),  # ~8 CPU s: 1,008 groups
    ],
)
def test_every_geounit_answers_the_held_cross_exactly(runs, passes: str, method: str) -> None:
    run, other = runs
    hierarchy = _hierarchy(run)
    cross = make_query(PL94, CROSS)
    held_blocks = read_mdf_histograms(other, hierarchy, PL94)[0] @ cross.matrix.T
    bounds = held_cross_bounds(held_blocks, hierarchy)
    ms = NMFReader(run / "noisy_measurements.parquet", PL94, hierarchy)
    est = run_topdown(
        ms, hierarchy, bounds, TopDownOptions(group_variable=CROSS, passes=passes, method=method)
    )
    own = read_mdf_histograms(run, hierarchy, PL94)[0] @ cross.matrix.T
    assert (own != held_blocks).nnz > 0  # its own estimate differs: the hold does the work
    for li, level in enumerate(hierarchy.aggregate(held_blocks)):
        got = est.histograms[li] @ cross.matrix.T
        np.testing.assert_array_equal(got.toarray(), level.toarray(), err_msg=str(li))
