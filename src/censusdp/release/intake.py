"""Reading a release's input: the confidential CEF turned into block histograms on the
geography the release is measured on (the tabulation hierarchy or the spine).

The input is read in parts by executor tasks (:mod:`censusdp.io.cef_stream`); only block
histograms come back to the driver, and the microdata are gone when
:func:`read_and_aggregate` returns.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from typing import Any

import scipy.sparse as sp

from censusdp.data.invariants import Invariants
from censusdp.data.schema import get_schema
from censusdp.data.schema_dhc import DHC_UNITS_2020, DHCH_2020
from censusdp.data.units_dhc import FIRST_GQ_TENVACGQ
from censusdp.io.cef_files import CEFInput
from censusdp.io.cef_stream import read_cef_blocks
from censusdp.privacy.budget import Budget
from censusdp.progress import say
from censusdp.release.measure_runs import histogram_key
from censusdp.release.options import Runtime
from censusdp.release.spine import ReleaseGeography, geography_for_input, tabulation_levels

__all__ = ["read_and_aggregate"]


def read_and_aggregate(
    cef_input: CEFInput,
    budget: Budget,
    rt: Runtime,
    *,
    with_units: bool,
    spine: tuple[str, bool] = ("tabulation", False),
    record: dict[str, Any] | None = None,
    households: bool | str = False,
) -> tuple[ReleaseGeography, Invariants, dict[str, sp.csr_matrix], int]:
    """Read and validate the CEF (its files as hashed: each read checks it is still the
    file hashed); return the geography, the invariants, the block
    histograms each run measures (``persons``, ``units``; blocks in the order of that
    run's estimation hierarchy, :meth:`ReleaseGeography.for_run`) and the number of
    persons.

    The input is read in parts by ``executor``'s tasks (:mod:`censusdp.io.cef_stream`),
    each part's records in its own process, only block histograms coming back;
    ``record`` (the manifest's) receives the parts and the processes that read them.

    ``spine`` is the spine requested and whether the user asked for it explicitly
    (:func:`censusdp.release.spine.geography_for_input`). The microdata are dropped when
    this returns: from here on only block histograms, then noisy measurements and
    invariants, exist.

    ``households``: the unit run is a household run: its histogram (``units``) is the
    ``(blocks x 387,072)`` household histogram, each household derived from its persons
    by the part that reads them (:func:`censusdp.io.cef_stream.read_cef_blocks`);
    ``"dhch"``: the 2020 DHC's household run, whose ``units`` are the ``(blocks x
    1,578,528)`` ``dhch-2020`` households and whose ``units+dhc-units-2020`` the
    ``(blocks x 35)`` units by ``tenvacgq`` measured beside them; the invariants then
    carry each block's facilities by detailed GQ type (``gq_types``, production's
    ``gqhh_vect`` with the housing units).
    """
    progress, timings = rt.progress, rt.timings
    t, c = time.perf_counter(), time.process_time()
    # read in parts (geocode ranges) by the executor's tasks, into block histograms
    # (io/cef_stream.py): the records never come to the driver
    cef = read_cef_blocks(
        cef_input,
        tabulation_levels(budget),
        get_schema(budget.schema),
        with_units=("households" if households is True else households) or with_units,
        executor=rt.executor,
        progress=progress,
    )
    timings["read"] = time.perf_counter() - t
    timings["read_cpu"] = time.process_time() - c
    if record is not None:
        record["input_parts"] = cef.parts
        record["input_part_readers"] = len(cef.readers)
        record["input_parts_by_driver"] = f"{socket.gethostname()}/{os.getpid()}" in cef.readers
    say(
        progress,
        f"read {cef.n_persons:,} persons and {cef.n_units:,} units from {cef_input.directory}",
    )
    hists = {"persons": cef.persons}
    hierarchy, inv = cef.hierarchy, cef.invariants
    if with_units and households == "dhch":
        assert cef.tenvacgq is not None and cef.dhc_households is not None
        hists["units"] = cef.dhc_households
        hists[histogram_key("units", DHC_UNITS_2020.name, DHCH_2020.name)] = sp.csr_matrix(
            cef.tenvacgq
        )
        inv = dataclasses.replace(inv, gq_types=cef.tenvacgq[:, FIRST_GQ_TENVACGQ:].copy())
    elif with_units:
        hists["units"] = cef.households if households else cef.housing_units
    timings["aggregate"] = time.perf_counter() - t
    say(progress, f"built block histograms of {hierarchy.blocks.size:,} blocks")
    t = time.perf_counter()
    # one row per block: the geography needs the blocks' attributes, not the units'
    per_block = {"geocode": hierarchy.blocks, **cef.block_attributes}
    geo = geography_for_input(
        spine[0], budget, hierarchy, per_block, inv, explicit=spine[1], progress=progress
    )
    # each run's blocks in the order of its own estimation hierarchy (the unit run's
    # spine is its own: ReleaseGeography.units)
    hists = {k: geo.for_run(k.split("+")[0]).to_estimation(v) for k, v in hists.items()}
    if geo.spine is not None:
        timings["spine"] = time.perf_counter() - t
    return geo, inv, hists, cef.n_persons
