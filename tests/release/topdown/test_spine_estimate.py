"""TopDown on the production spine: the spine's Hierarchy is measured, written to and read
back from a noisy measurement file, and estimated like the geocode hierarchy.

The spine has no AIAN split here (no AIAN areas), so the state total is invariant on the
state unit itself; places and GQ types reshape the block groups.
"""

from __future__ import annotations

import numpy as np

from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import person_histogram
from censusdp.data.invariants import Bounds, compute_invariants, level_bounds
from censusdp.data.schema import get_schema
from censusdp.data.spine import BlockAttributes, SpineRules, build_spine
from censusdp.io.budget_files import load_preset
from censusdp.io.nmf_read import NMFReader
from censusdp.io.nmf_write import write_nmf
from censusdp.privacy.randomness import RandomSource
from censusdp.release.measure import measure
from censusdp.release.topdown.driver import TopDownOptions, run_topdown
from synth import block_codes, make_cef

PL94 = get_schema("pl94")


def test_topdown_on_the_spine_keeps_every_invariant_and_maps_back_to_blocks(tmp_path):
    rng = np.random.default_rng(5)
    blocks = np.asarray(block_codes(2, 3, 2, 6))
    persons, units = make_cef(rng, list(blocks), gq_rate=0.3)
    std = Hierarchy.from_blocks(units["geocode"])
    place = np.where(rng.random(std.blocks.size) < 0.5, "00100", "")
    inv_std = compute_invariants(persons, units, std)
    spine = build_spine(
        std.blocks,
        BlockAttributes(place=place, gq_types=inv_std.gq_facilities),
        SpineRules(fanout_cutoff=0),
    )
    h = spine.hierarchy
    # the spine differs from the geocode hierarchy below the tract
    bg = h.geolevels.index("BlockGroup")
    assert h.n_units(bg) != std.n_units(std.geolevels.index("BlockGroup"))
    on_spine = lambda cols: {**cols, "geocode": spine.codes_of(cols["geocode"])}  # noqa: E731
    p_sp, u_sp = on_spine(persons), on_spine(units)
    inv = compute_invariants(p_sp, u_sp, h)
    levels = h.aggregate(person_histogram(p_sp, h, PL94))
    plan = [(m.geolevel, m.query, m.mechanism) for m in load_preset("pl94-2020").measurements()]
    ms = measure(levels, h, PL94, plan, RandomSource.seeded(11))
    write_nmf(ms, tmp_path / "nmf.parquet")
    reader = NMFReader(tmp_path / "nmf.parquet", PL94, h)
    bounds = [Bounds(*b) for b in level_bounds(inv, h)]
    est = run_topdown(reader, h, bounds, TopDownOptions(group_variable="hhgq"))
    block = est.histograms[-1].toarray()
    # back to geocode order: same persons, state total exact, GQ and household bounds
    in_geocode_order = block[np.argsort(spine.order)]
    assert int(in_geocode_order.sum()) == persons["geocode"].size
    groups = PL94.cell_levels("hhgq")
    gq_pop = np.zeros((std.blocks.size, 8), dtype=np.int64)
    for g in range(8):
        gq_pop[:, g] = in_geocode_order[:, groups == g].sum(axis=1)
    assert (gq_pop[:, 1:] >= inv_std.gq_facilities[:, 1:]).all()
    assert (gq_pop[:, 1:][inv_std.gq_facilities[:, 1:] == 0] == 0).all()
    assert (gq_pop[inv_std.housing_units == 0, 0] == 0).all()
    # every level is the sum of its blocks on the spine
    up = h.aggregate(est.histograms[-1])
    for li in range(h.n_levels - 1):
        assert np.array_equal(up[li].toarray(), est.histograms[li].toarray())
