"""Released counts with a household run, built from generated truth: what the tests of
the household MDF, its tables and its validation write and read back."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import household_histogram, person_histogram
from censusdp.data.invariants import Invariants, compute_invariants
from censusdp.generate import generate_state
from censusdp.io.cef import read_cef, read_households
from censusdp.io.mdf_parts import BlockCounts


def household_counts(out: Path, scale: float = 0.02) -> tuple[BlockCounts, Hierarchy, Invariants]:
    """A small generated Wyoming's true persons (``dhc-lite``) and households as the
    released counts of one MDF part, its hierarchy and its invariants."""
    generate_state("WY", 4, out, scale=scale)
    cef = read_cef(out)
    hierarchy = Hierarchy.from_blocks(np.unique(np.concatenate(
        [cef.units["geocode"], cef.persons["geocode"]])))  # fmt: skip
    inv = compute_invariants(cef.persons, cef.units, hierarchy)
    households = household_histogram(read_households(cef), cef.units["geocode"], hierarchy)
    persons = person_histogram(cef.persons, hierarchy, "dhc-lite")
    occupied = np.asarray(households.sum(axis=1)).ravel().astype(np.int64)
    counts = BlockCounts(
        hierarchy.blocks, persons, "dhc-lite", inv.housing_units, occupied,
        inv.gq_facilities, households,
    )  # fmt: skip
    return counts, hierarchy, inv


def write_household_parts(
    out: Path, counts: BlockCounts, hierarchy: Hierarchy, max_blocks: int = 200
) -> tuple[list[dict], dict]:
    """The MDF and tables of ``counts`` written as a run writes them (part 0 of the
    tables for the levels above the block, then one task per run of blocks), in ``out``;
    returns the parts' results and part 0's."""
    import scipy.sparse as sp

    from censusdp.data.histograms import pl94_map, unit_histogram_from_counts
    from censusdp.data.schema import get_schema
    from censusdp.io.layout import TABLES_DIR
    from censusdp.io.tables import write_table_index
    from censusdp.release.parts import (
        TablesTask,
        mdf_part_tasks,
        run_mdf_part_task,
        run_tables_task,
        write_mdf_index,
    )

    out.mkdir(parents=True, exist_ok=True)
    pl94 = counts.persons @ pl94_map(get_schema(counts.schema))
    units = unit_histogram_from_counts(counts.housing_units, counts.occupied, counts.gq_facilities)
    upper = list(zip(hierarchy.geolevels.levels[:-1], hierarchy.geocodes[:-1], strict=True))

    def stacked(h):
        return sp.csr_matrix(sp.vstack(hierarchy.aggregate(sp.csr_matrix(h))[:-1]), dtype=np.int64)

    top = run_tables_task(TablesTask(
        [(lv.name, lv.length, codes) for lv, codes in upper],
        stacked(pl94), stacked(units), str(out.resolve()), stacked(counts.households),
    ))  # fmt: skip
    block = hierarchy.geolevels.levels[-1]
    jobs = mdf_part_tasks(
        counts, out.resolve(), geolevel=(block.name, block.length), max_blocks=max_blocks
    )
    parts = [run_mdf_part_task(job) for job in jobs]
    write_mdf_index(out, parts)
    write_table_index(out / TABLES_DIR, [top["tables"]] + [p["tables"] for p in parts])
    return parts, top
