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
