"""Re-check a release's invariants and constraints from its files (pure NumPy, no I/O).

The release's own validator runs inside the pipeline; these checks are the evaluator's
independent second look, computed from the published tables and the MDF alone
(invariants and constraints: Van Riper, Kugler & Ruggles 2020, sec. 2.2):

* ``state_population``: total population (P1_001N) exact at the top two levels.
* ``block_housing_units``: housing units (H1_001N) exact at every block.
* ``block_gq_facilities``: occupied group-quarters facilities of each type exact at
  every block (from ``mdf_units``; the 2020 invariant counts occupied facilities).
* ``nonnegative``: every released table count is >= 0.
* ``children_sum_to_parents``: every table line of every geounit equals the sum over
  its children.
* ``tables_match_mdf``: the released tables equal a fresh tabulation of the MDF.
* ``structural_zeros``: no person under 18 in a nursing facility.
* ``gq_population_bounds``: a block has persons of GQ type ``g`` only if it has a
  (occupied) facility of type ``g``, and every facility type present holds at least
  one person.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.schema import get_schema

__all__ = ["check_release"]


def _result(bad: np.ndarray, checked: int, describe: Any = None) -> dict[str, Any]:
    bad = np.asarray(bad, dtype=bool)
    n_bad = int(bad.sum())
    out: dict[str, Any] = {"ok": n_bad == 0, "violations": n_bad, "checked": int(checked)}
    if n_bad and describe is not None:
        out["example"] = describe(int(np.flatnonzero(bad)[0]))
    return out


def check_release(
    hierarchy: Hierarchy,
    truth_tables: dict[str, list[np.ndarray]],
    released_tables: dict[str, list[np.ndarray]],
    mdf_tables: dict[str, list[np.ndarray]] | None,
    truth_units: sp.spmatrix,
    mdf_units: sp.spmatrix,
    mdf_persons: sp.spmatrix,
) -> dict[str, dict[str, Any]]:
    """Run every check listed in the module docstring.

    Args:
        hierarchy: the geography the arrays are aligned to.
        truth_tables, released_tables, mdf_tables: per table, per level, ``(units x
            lines)`` arrays (``mdf_tables`` is the tabulation of the MDF, or ``None``).
        truth_units, mdf_units: ``(blocks x 16)`` unit histograms (cell
            ``2 * gqtype + occupied``), see :func:`censusdp.data.histograms.unit_histogram`.
        mdf_persons: ``(blocks x 2016)`` ``pl94`` histogram of the MDF persons.

    Returns:
        ``{check name: {"ok", "violations", "checked", "example"?}}``.
    """
    names = hierarchy.geolevels.names
    out: dict[str, dict[str, Any]] = {}

    top = [0, 1] if hierarchy.n_levels > 2 else [0]
    bad_pop = np.concatenate(
        [released_tables["P1"][li][:, 0] != truth_tables["P1"][li][:, 0] for li in top]
    )
    codes = np.concatenate([hierarchy.geocodes[li] for li in top])
    t_pop = np.concatenate([truth_tables["P1"][li][:, 0] for li in top])
    r_pop = np.concatenate([released_tables["P1"][li][:, 0] for li in top])
    out["state_population"] = _result(
        bad_pop,
        bad_pop.size,
        lambda i: f"geounit {codes[i]!r}: released {r_pop[i]}, true {t_pop[i]}",
    )

    blocks = hierarchy.blocks
    hu_t, hu_r = truth_tables["H1"][-1][:, 0], released_tables["H1"][-1][:, 0]
    out["block_housing_units"] = _result(
        hu_t != hu_r,
        hu_t.size,
        lambda i: f"block {blocks[i]!r}: released {hu_r[i]} housing units, true {hu_t[i]}",
    )

    gq_t = _facilities(truth_units)
    gq_r = _facilities(mdf_units)
    bad_gq = gq_t != gq_r
    out["block_gq_facilities"] = _result(
        bad_gq.ravel(),
        bad_gq.size,
        lambda i: (
            f"block {blocks[i // 7]!r} GQ type {i % 7 + 1}: released "
            f"{gq_r.ravel()[i]} facilities, true {gq_t.ravel()[i]}"
        ),
    )

    neg = np.concatenate([a.ravel() < 0 for per in released_tables.values() for a in per])
    out["nonnegative"] = _result(
        neg, neg.size, lambda i: f"a negative table count at flat index {i}"
    )

    out["children_sum_to_parents"] = _row_check(_children_sum_diffs(hierarchy, released_tables))
    if mdf_tables is not None:
        out["tables_match_mdf"] = _row_check(
            (
                (np.any(arr != mdf_tables[tname][li], axis=1), f"{tname} at {names[li]}", codes)
                for tname, per in released_tables.items()
                for li, (arr, codes) in enumerate(zip(per, hierarchy.geocodes, strict=False))
            )
        )

    schema = get_schema("pl94")
    zero_cells = np.flatnonzero(schema.structural_zero_mask)
    mp = sp.csr_matrix(mdf_persons)
    in_zero = np.asarray(mp[:, zero_cells].sum(axis=1)).ravel()
    out["structural_zeros"] = _result(
        in_zero > 0,
        in_zero.size,
        lambda i: f"block {blocks[i]!r} has {in_zero[i]} persons under 18 in nursing facilities",
    )

    out["gq_population_bounds"] = _gq_population_bounds(mp, gq_r, blocks)
    return out


def _gq_population_bounds(
    mp: sp.csr_matrix, gq_r: np.ndarray, blocks: np.ndarray
) -> dict[str, Any]:
    """Blocks with GQ persons of a type but no facility of it, or a facility with nobody."""
    schema = get_schema("pl94")
    hhgq = schema.cell_levels("hhgq")
    by_type = sp.csr_matrix(
        (np.ones(hhgq.size, dtype=np.int64), (np.arange(hhgq.size), hhgq)), shape=(hhgq.size, 8)
    )
    gq_pop = np.asarray((mp @ by_type).todense())[:, 1:]
    no_facility = (gq_pop > 0) & (gq_r == 0)
    empty_facility = (gq_r > 0) & (gq_pop == 0)
    bad_b = no_facility | empty_facility
    return _result(
        bad_b.ravel(),
        bad_b.size,
        lambda i: (
            f"block {blocks[i // 7]!r} GQ type {i % 7 + 1}: {gq_pop.ravel()[i]} persons, "
            f"{gq_r.ravel()[i]} facilities"
        ),
    )


def _children_sum_diffs(
    hierarchy: Hierarchy, released_tables: dict[str, list[np.ndarray]]
) -> Iterator[tuple[np.ndarray, str, np.ndarray]]:
    """Per table and parent level: which parents differ from the sum of their children."""
    names = hierarchy.geolevels.names
    for tname, per in released_tables.items():
        for li in range(1, hierarchy.n_levels):
            agg = np.zeros_like(per[li - 1])
            np.add.at(agg, hierarchy.parent[li], per[li])
            diff = np.any(agg != per[li - 1], axis=1)
            yield diff, f"{tname} at {names[li - 1]}", hierarchy.geocodes[li - 1]


def _row_check(diffs: Iterable[tuple[np.ndarray, str, np.ndarray]]) -> dict[str, Any]:
    """A check record from ``(bad rows, "table at level", geocodes)`` triples.

    The example names the first bad geounit of the first triple that has one.
    """
    bad = 0
    checked = 0
    example = None
    for diff, where, codes in diffs:
        checked += diff.size
        if diff.any() and example is None:
            u = int(np.flatnonzero(diff)[0])
            example = f"{where} {codes[u]!r}"
        bad += int(diff.sum())
    rec: dict[str, Any] = {"ok": bad == 0, "violations": bad, "checked": checked}
    if example:
        rec["example"] = example
    return rec


def _facilities(unit_hist: sp.spmatrix) -> np.ndarray:
    """(blocks x 7) occupied GQ facilities of types 1..7 from a (blocks x 16) unit histogram."""
    u = np.asarray(sp.csr_matrix(unit_hist).todense())
    return u[:, 3::2]
