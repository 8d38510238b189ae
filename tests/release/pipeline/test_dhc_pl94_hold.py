"""The DHC person run held to a P.L. 94 release's persons (production's ``pl94``).

Production's DHC person run (``configs/production/dhc/person_US.ini``: ``theconstraints.*
= pl94, ...``; ``Constraints_DHCP.py``, ``pl94``) held every geounit's persons exactly to
its P.L. 94 release's HHGQ x voting age x Hispanic x CENRACE counts, so its P1-P5 are the
P.L. release's (``censusdp run --preset dhc-2020 --h1-from``: test_dhc_household_run.py).
Here, the estimator alone: the small DHC person release is re-estimated from its own NMF
on its spine, its group
bounds the 2,016-cell cross
(:func:`censusdp.data.invariants.held_cross_bounds` of
:func:`censusdp.release.h1_source.read_pl94_persons`), with production's DHCP passes;
every geounit of every level must answer the cross with the P.L. release's counts, which
the same run without the hold does not.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_dhc_person_run import _small_vermont

from censusdp.data.histograms import pl94_map
from censusdp.data.invariants import held_cross_bounds
from censusdp.data.schema import get_schema
from censusdp.io.budget_files import load_preset
from censusdp.io.cef_files import hash_input
from censusdp.io.rundir import RunDir
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.h1_source import read_pl94_persons
from censusdp.release.options import ReleaseOptions
from censusdp.release.pipeline import run_release
from censusdp.release.spine import geography_of_run, tabulation_levels
from censusdp.release.topdown.driver import TopDownOptions, run_topdown

pytestmark = pytest.mark.slow  # a 1.2-million-cell person run estimated twice

PL94_CROSS = "hhgq * votingage * hispanic * cenrace"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A P.L. 94 release of the small input and a DHC person release of it."""
    d = tmp_path_factory.mktemp("dhc-pl94")
    cef = _small_vermont(d / "cef", d / "generated")
    pl94 = ReleaseBudget(load_preset("pl94-2020"), load_preset("pl94-2020-units"))
    run_release(cef, d / "pl94", pl94.scaled(epsilon=2), ReleaseOptions(seed=5))
    run_release(cef, d / "dhc", ReleaseBudget(load_preset("dhc-2020")), ReleaseOptions(seed=3))
    return cef, d / "pl94", d / "dhc"


def test_every_geounit_holds_the_pl94_releases_cross(runs) -> None:
    cef, pl94, dhc = runs
    run = RunDir(dhc)
    hierarchy, inv = run.invariants(tabulation_levels(load_preset("dhc-2020")))
    geo = geography_of_run(dhc, json.loads(run.manifest_file.read_text()), hierarchy)
    held = read_pl94_persons(pl94, hierarchy, inv, hash_input(cef).sha256)
    spine = geo.estimation
    order = np.arange(hierarchy.blocks.size) if geo.spine is None else geo.spine.order
    held_spine = held[order]  # blocks in estimation order, as geo.invariants orders them
    schema = get_schema("dhcp-2020")
    ms = run.nmf_reader("persons", schema, spine)
    to_pl94 = pl94_map(schema)
    want = spine.aggregate(held_spine)
    est = run_topdown(
        ms, spine, held_cross_bounds(held_spine, spine), TopDownOptions(group_variable=PL94_CROSS)
    )
    for li, level in enumerate(want):
        np.testing.assert_array_equal(
            (est.histograms[li] @ to_pl94).toarray(), level.toarray(), err_msg=str(li)
        )
    assert int(held.sum()) > 0 and held.nnz > 1
    # the same measurements without the hold: the DHC release's own P1-P5 are not these
    free = run_topdown(ms, spine, geo.person_bounds(inv), TopDownOptions(group_variable="hhgq"))
    assert (free.histograms[-1] @ to_pl94 != held_spine).nnz > 0


def test_the_person_run_alone_held_publishes_the_pl94_releases_tables(runs, tmp_path) -> None:
    """``run --preset dhc-2020 --units-preset none --h1-from PL``: production's person run
    (``person_US.ini``, a DAS run of its own) held by its ``pl94`` alone. Its P1-P5 are
    the P.L. release's at every geounit, its manifest records the persons and no H1, and
    the run's own self-check passed (``run_release`` raises otherwise)."""
    from censusdp.io.tables import read_table
    from censusdp.release.validate import validate_run

    cef, pl94, _ = runs
    out = tmp_path / "held"
    m = run_release(
        cef,
        out,
        ReleaseBudget(load_preset("dhc-2020")),
        ReleaseOptions(seed=3, h1_from=str(pl94)),
    )
    source = m["h1_source"]
    assert source["persons"] > 0 and "occupied" not in source and "vacant" not in source
    report = validate_run(out)  # validate, from the files
    assert report.ok, report.failures()
    assert "no households held" in report.checks["h1_source"]["detail"]
    assert report.checks["pl94_held"]["ok"]
    for name in ("P1", "P2", "P3", "P4", "P5"):
        got, want = read_table(out / "tables", name), read_table(pl94 / "tables", name)
        assert got.equals(want), name
