"""The truth check: a release was made from the confidential files given."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from censusdp.data.geography import Hierarchy
from censusdp.data.invariants import compute_invariants
from censusdp.errors import CensusDPError
from censusdp.io.cef import read_cef
from censusdp.release.validate._release import Release


def check_truth(release: Release, truth: Path) -> tuple[bool, str]:
    """The release's invariants are the truth's, and its input was these very files."""
    manifest, inv, hierarchy = release.manifest, release.inv, release.hierarchy
    try:
        cef = read_cef(truth)
    except CensusDPError as exc:
        return False, f"cannot read the truth: {exc}"
    # the bytes read are the bytes the release was made from: every file, none more (a
    # re-estimate records no input: its invariants alone are compared)
    made_from = manifest.get("input_sha256", cef.input_sha256)
    if not isinstance(made_from, dict):
        made_from = {}
    for name in sorted(set(made_from) | set(cef.input_sha256)):
        if name not in cef.input_sha256:
            return False, f"{truth / name}: the release was made from it, but the truth has none"
        if name not in made_from:
            return False, f"{truth / name} is not among the files the release was made from"
        if cef.input_sha256[name] != made_from[name]:
            return False, f"{truth / name} is not the file the release was made from"
    try:
        h = Hierarchy.from_blocks(cef.units["geocode"], hierarchy.geolevels)
    except CensusDPError as exc:
        return False, f"the truth's geography does not fit the release's: {exc}"
    if not np.array_equal(h.blocks, hierarchy.blocks):
        return False, "the truth's blocks differ from the release's"
    true_inv = compute_invariants(cef.persons, cef.units, h)
    same = np.array_equal(true_inv.housing_units, inv.housing_units) and np.array_equal(
        true_inv.gq_facilities, inv.gq_facilities
    )
    totals = hierarchy.aggregate(true_inv.population.reshape(-1, 1))[inv.total_level]
    released = hierarchy.aggregate(inv.population.reshape(-1, 1))[inv.total_level]
    same = same and np.array_equal(np.asarray(totals), np.asarray(released))
    return same, (
        "invariants equal the truth's" if same else "the release's invariants are not the truth's"
    )
