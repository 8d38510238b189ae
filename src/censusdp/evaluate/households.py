"""The households of a release with a household run, against the truth's.

A release whose unit run is the DDP's household run (``household2010``,
docs/households.md) publishes four household tables beside P1-P5 and H1: H13 (households
by size), P18 (by type), P22 (type by the householder's age) and P15 (the householder's
Hispanic origin by race). :func:`household_evaluation` compares each, and H1 (occupancy:
its occupied line is the households released), with the same tables of the truth's
households, derived from the truth's persons as the release's reader derives them
(:func:`truth_households`), at every geolevel; a ``dhc-2020`` release's household and
unit run (``dhch-2020``, docs/dhc-2020.md) is compared the same way on P16 (households by
type), H9 (by size), H3 (occupancy), H4 (tenure), H5 (vacancy status) and the tables by
the householder (H6, H7, H10, H11, H12: race, Hispanic origin, tenure, size), the truth's
tabulated by :func:`censusdp.evaluate.dhc.truth_dhc_household_tables`: the L1 error and ``accuracy = 1 - TVD``
of the table's leaf lines (JASON, *Formal Privacy Methods for the 2020 Census*, 2020,
sec. 6.1), and the MAE, RMSE and bias of its lines (:mod:`censusdp.evaluate.metrics`);
the households released and true; and the share of geounits at 100% occupancy, released
and true (Van Riper, Kugler & Ruggles 2020, sec. 3: the DDP's household run drove blocks
and counties to 100% occupancy). :func:`household_section` is its part of the HTML
report, :func:`household_comparison` the rows ``censusdp compare`` shows side by side.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import household_histogram
from censusdp.data.schema_dhc import DHCH_2020
from censusdp.evaluate._html import esc, table
from censusdp.evaluate.dhc import truth_dhc_household_tables
from censusdp.evaluate.metrics import Pairs, error_stats, occupancy_full_share, table_record
from censusdp.io.cef import unit_rows_of
from censusdp.io.cef_households import households_of
from censusdp.io.rundir import RunDir
from censusdp.release.household_runs import HOUSEHOLD_SCHEMA, has_household_run
from censusdp.tables import (
    HOUSEHOLD_TABLE_NAMES,
    household_table_arrays,
    table_definition,
    tables_to_arrays,
)
from censusdp.tables.dhc import DHC_HOUSEHOLD_TABLE_NAMES

__all__ = [
    "DHC_HOUSEHOLD_MEASURES",
    "size_and_type_tables",
    "HOUSEHOLD_MEASURES",
    "household_comparison",
    "household_evaluation",
    "household_section",
    "released_household_tables",
    "truth_household_tables",
    "truth_households",
]

HOUSEHOLD_MEASURES: dict[str, str] = {
    "H13": "households by size",
    "P18": "households by type",
    "P22": "households by type and age of householder",
    "P15": "households by Hispanic origin and race of householder",
    "H1": "housing units by occupancy",
}
"""The tables of a ``household2010`` run compared, in the order shown, and what each
counts."""

DHC_HOUSEHOLD_MEASURES: dict[str, str] = {
    "P16": "households by type",
    "H9": "households by size",
    "H3": "housing units by occupancy",
    "H4": "occupied housing units by tenure",
    "H5": "vacant housing units by vacancy status",
    "H6": "households by race of householder",
    "H7": "households by Hispanic origin and race of householder",
    "H10": "households by tenure and race of householder",
    "H11": "households by tenure and Hispanic origin of householder",
    "H12": "households by tenure and size",
}
"""The tables of a ``dhch-2020`` run (the 2020 DHC's) compared, in the order shown."""

_MEASURES = {HOUSEHOLD_SCHEMA: HOUSEHOLD_MEASURES, DHCH_2020.name: DHC_HOUSEHOLD_MEASURES}
_SIZE_AND_TYPE = {HOUSEHOLD_SCHEMA: ("H13", "P18"), DHCH_2020.name: ("H9", "P16")}
_TABLES = {HOUSEHOLD_SCHEMA: HOUSEHOLD_TABLE_NAMES, DHCH_2020.name: DHC_HOUSEHOLD_TABLE_NAMES}
_NO_TRUTH = {
    HOUSEHOLD_SCHEMA: "the truth has no 'rel' column: no households to compare with",
    DHCH_2020.name: "the truth lacks a column of rel, relgq (persons) or ten, vacs, qgqtyp "
    "(units): no households to compare with",
}


def truth_households(
    persons: Mapping[str, np.ndarray], units: Mapping[str, np.ndarray], hierarchy: Hierarchy
) -> sp.csr_matrix:
    """The truth's ``(blocks x 387,072)`` households (``household2010``) on ``hierarchy``,
    derived from its persons (their ``rel``) as the release's reader derives them."""
    unit_row = unit_rows_of(np.asarray(units["unit_id"]), np.asarray(persons["unit_id"]))
    households = households_of(persons, units, unit_row)
    return household_histogram(households, np.asarray(units["geocode"]).astype("U16"), hierarchy)


def truth_household_tables(
    persons: Mapping[str, np.ndarray],
    units: Mapping[str, np.ndarray],
    hierarchy: Hierarchy,
    schema: str = HOUSEHOLD_SCHEMA,
) -> dict[str, list[np.ndarray]] | None:
    """Per household table of a ``schema`` run (``household2010``:
    :data:`~censusdp.tables.HOUSEHOLD_TABLE_NAMES`; ``dhch-2020``: the DHC's
    :data:`~censusdp.tables.dhc.DHC_HOUSEHOLD_TABLE_NAMES`), the truth's dense ``(units x lines)`` arrays of every level (top first);
    ``None`` when the truth lacks the columns its households need (no households)."""
    if schema == DHCH_2020.name:
        return truth_dhc_household_tables(persons, units, hierarchy)
    if "rel" not in persons:
        return None
    return household_table_arrays(truth_households(persons, units, hierarchy), None, hierarchy)


def released_household_tables(
    run_dir: Path | None, hierarchy: Hierarchy, names: Sequence[str] = HOUSEHOLD_TABLE_NAMES
) -> dict[str, list[np.ndarray]] | None:
    """Per household table of ``names``, the release's arrays of every level, from its
    published tables; ``None`` when it lacks one."""
    if run_dir is None:
        return None
    run = RunDir(run_dir)
    if not all((run.tables_dir / f"{n}.parquet").exists() for n in names):
        return None
    return tables_to_arrays({n: run.table(n) for n in names}, hierarchy)


def household_evaluation(
    truth: Mapping[str, list[np.ndarray]] | None,
    run_dir: Path | None,
    manifest: Mapping[str, Any],
    hierarchy: Hierarchy,
    occupancy: tuple[list[np.ndarray], list[np.ndarray]],
) -> dict[str, Any] | None:
    """The households of a release with a household run against the truth's, per level.

    Args:
        truth: the truth's household tables (:func:`truth_household_tables`; ``None``:
            the truth has no households).
        run_dir: the release directory (its household tables are read from it).
        manifest: the release's manifest.
        hierarchy: the evaluation's geography.
        occupancy: per level, the truth's and the release's H1 arrays
            (``(units x 3)``: housing units, occupied, vacant).

    Returns:
        ``None`` for a release without a household run; else ``{"schema", "available",
        "tables_source", "totals": {level: {"truth", "released", ...}}, "tables":
        {table: {"title", "what", "levels": {level: record}}}, "occupancy_100": {level:
        {"released", "truth"}}}``, the tables those of :data:`HOUSEHOLD_MEASURES` or
        :data:`DHC_HOUSEHOLD_MEASURES` by the run's schema; ``available`` false with a
        ``reason`` when the truth lacks the columns of its households (no households to
        compare with) or the release its household tables.
    """
    if not has_household_run(manifest.get("units")):
        return None
    schema = str(manifest["units"]["schema"])
    out: dict[str, Any] = {"schema": schema, "available": False}
    names = hierarchy.geolevels.names
    if truth is None:
        out["reason"] = _NO_TRUTH[schema]
        return out
    released = released_household_tables(run_dir, hierarchy, _TABLES[schema])
    if released is None:
        out["reason"] = f"the release has no household tables ({', '.join(_TABLES[schema])})"
        return out
    truth = {**truth, "H1": occupancy[0]}
    released["H1"] = occupancy[1]
    out.update(available=True, tables_source="release tables (RUN/tables)")
    out["tables"] = {}
    for name, what in _MEASURES[schema].items():
        d = table_definition(name)
        per_level = {
            lv: table_record(truth[name][li], released[name][li], d.leaves)
            for li, lv in enumerate(names)
        }
        out["tables"][name] = {"title": d.title, "what": what, "levels": per_level}
    out["totals"] = {}
    out["occupancy_100"] = {}
    for li, lv in enumerate(names):
        t, r = truth["H1"][li][:, 1], released["H1"][li][:, 1]  # occupied units: households
        rec = error_stats(Pairs.dense(t, r))
        out["totals"][lv] = {"truth": int(t.sum()), "released": int(r.sum()), **rec}
        out["occupancy_100"][lv] = {
            "released": occupancy_full_share(released["H1"][li][:, 0], r),
            "truth": occupancy_full_share(truth["H1"][li][:, 0], t),
        }
    return out


_INTRO = {
    HOUSEHOLD_SCHEMA: (
        "<p>The release's household run (the 2010 Demonstration Data Product's household "
        "histogram) against the households of the confidential data, derived from its "
        "persons. Accuracy = 1 - TVD of each table's lines (1: every household in the right "
        "line); the DDP released 310 of 3,221 counties at 100% occupancy against none in "
        "SF1 (Van Riper, Kugler &amp; Ruggles 2020, sec. 3).</p>"
    ),
    DHCH_2020.name: (
        "<p>The release's household and unit run (the 2020 DHC's households and housing "
        "units) against those of the confidential data, its households derived from its "
        "persons and its units' tenure and vacancy status. Accuracy = 1 - TVD of each "
        "table's lines (1: every household or unit in the right line).</p>"
    ),
}


def size_and_type_tables(schema: str) -> tuple[str, str]:
    """The tables of households by size and by type of a ``schema`` household run
    (``household2010``: H13, P18; ``dhch-2020``: H9, P16)."""
    return _SIZE_AND_TYPE[schema]


def household_section(result: Mapping[str, Any]) -> list[str]:
    """The report's "Households" section (nothing for a release without a household run)."""
    hh = result.get("households")
    if not hh:
        return []
    parts = ["<h2>Households</h2>"]
    if not hh.get("available"):
        return parts + [f"<p>Not compared: {esc(hh.get('reason', ''))}.</p>"]
    measures = {n: rec["what"] for n, rec in hh["tables"].items()}
    parts.append(_INTRO[hh["schema"]])
    rows = []
    for lv in result["geolevels"]:
        tot, occ = hh["totals"][lv], hh["occupancy_100"][lv]
        rows.append(
            [lv, tot["truth"], tot["released"], tot["mae"], tot["rmse"], tot["bias"]]
            + [hh["tables"][n]["levels"][lv]["tvd"] for n in measures]
            + [f"{occ['released']['n_full']:,}/{occ['released']['n_units']:,}"]
            + [f"{occ['truth']['n_full']:,}/{occ['truth']['n_units']:,}"]
        )
    head = ["geolevel", "households, true", "released", "MAE", "RMSE", "bias"]
    head += [f"accuracy {n} ({w})" for n, w in measures.items()]
    head += ["100% occupied, released", "100% occupied, true"]
    parts.append(
        table(
            head,
            rows,
            "Households per geounit (MAE, RMSE, bias of the count), accuracy of each "
            "household table, and geounits at 100% occupancy / geounits with housing units",
            name="households",
        )
    )
    return parts


def _level_of(h: Mapping[str, Any], lv: str) -> dict[str, Any] | None:
    """One release's household accuracy at level ``lv`` (``None``: not compared)."""
    if not h.get("available") or lv not in h["totals"]:
        return None
    tables = h["tables"]
    return {
        "households": h["totals"][lv]["released"],
        "households_true": h["totals"][lv]["truth"],
        "mae": h["totals"][lv]["mae"],
        "rmse": h["totals"][lv]["rmse"],
        "l1": {n: tables[n]["levels"][lv]["l1"] for n in tables},
        "tvd": {n: tables[n]["levels"][lv]["tvd"] for n in tables},
        "occupancy_100": h["occupancy_100"][lv]["released"]["share"],
        "occupancy_100_true": h["occupancy_100"][lv]["truth"]["share"],
    }


def household_comparison(results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per geolevel of the first release, each release's household accuracy side by side
    (``[]`` when neither has a household run compared with the truth): households
    released (and true), their MAE and RMSE per geounit, each table's L1 and TVD, and the
    share of geounits at 100% occupancy (released, and true); ``None`` in a release's
    place when it has no household run (a ``pl94`` release) or was not compared, or when
    its run does not publish that table (a DDP release beside a DHC one: each publishes
    its own tables; ``measures`` the union, the first release's first)."""
    hh = [r.get("households") or {} for r in results]
    if not any(h.get("available") for h in hh):
        return []
    measures: dict[str, str] = {}
    for h in hh:
        if h.get("available"):
            measures.update({n: rec["what"] for n, rec in h["tables"].items() if n not in measures})
    rows = []
    for lv in results[0]["geolevels"]:
        recs = [_level_of(h, lv) for h in hh]
        some = next((r for r in recs if r is not None), None)
        if some is None:
            continue
        row: dict[str, Any] = {
            "geolevel": lv,
            "households_true": some["households_true"],
            "occupancy_100_true": some["occupancy_100_true"],
            "measures": measures,
        }
        for key in ("households", "mae", "rmse", "occupancy_100"):
            row[key] = [None if r is None else r[key] for r in recs]
        for key in ("l1", "tvd"):
            row[key] = {n: [None if r is None else r[key].get(n) for r in recs] for n in measures}
        rows.append(row)
    return rows
