"""``evaluate`` and ``compare`` of a release with a household run: its household tables
(H13, P18, P22, P15) and occupancy against the truth's households, per geolevel.

The releases here are hand-made from a generated state's own households (written as a
household run writes its tables), so every error is known: the truth itself, then the
truth with one household resized and one added.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.schema import HOUSEHOLD2010
from censusdp.evaluate.households import (
    HOUSEHOLD_MEASURES,
    household_comparison,
    household_evaluation,
    household_section,
    truth_household_tables,
    truth_households,
)
from censusdp.tables import HOUSEHOLD_TABLE_NAMES, identifier_columns
from censusdp.tables.households import tabulate_household_rows

MANIFEST = {"units": {"schema": "household2010"}}


@pytest.fixture(scope="module")
def state(generated_households: dict) -> dict:
    cef, h = generated_households["cef"], generated_households["h"]
    hh = truth_households(cef.persons, cef.units, h)
    tables = truth_household_tables(cef.persons, cef.units, h)
    return {**generated_households, "households": hh, "tables": tables}


def _release(run: Path, households: sp.csr_matrix, h: Hierarchy) -> Path:
    """A release directory holding only the household tables of ``households``."""
    (run / "tables").mkdir(parents=True)
    rows = sp.vstack(h.aggregate(households), format="csr")
    for name, t in tabulate_household_rows(rows, identifier_columns(h)).items():
        pq.write_table(t, run / "tables" / f"{name}.parquet")
    return run


def _evaluate(state: dict, run: Path | None, manifest=MANIFEST, h1=None) -> dict | None:
    occupancy = (state["h1"], state["h1"] if h1 is None else h1)
    return household_evaluation(state["tables"], run, manifest, state["h"], occupancy)


def test_the_truth_released_as_is_is_exact(state: dict, tmp_path: Path) -> None:
    run = _release(tmp_path / "run", state["households"], state["h"])
    out = _evaluate(state, run)
    assert out is not None and out["available"] and list(out["tables"]) == list(HOUSEHOLD_MEASURES)
    n = int(state["households"].sum())
    assert n > 500
    for lv in state["h"].geolevels.names:
        assert out["totals"][lv]["truth"] == out["totals"][lv]["released"] == n
        assert out["totals"][lv]["mae"] == 0 and out["totals"][lv]["rmse"] == 0
        for name in HOUSEHOLD_MEASURES:
            rec = out["tables"][name]["levels"][lv]
            assert rec["l1"] == 0 and rec["tvd"] == 1.0 and rec["mae"] == 0, (name, lv)
        occ = out["occupancy_100"][lv]
        assert occ["released"] == occ["truth"]


def test_one_household_resized_and_one_added_are_counted_where_they_are(
    state: dict, tmp_path: Path
) -> None:
    """In one block a true household of 2 persons is released as 3 (its other attributes
    kept: H13 off by 2, P18 not at all) and a one-person household is added (H13, P18
    and the households' count up by one: MAE 1/geounits); H1 as given (one more
    occupied unit)."""
    h, truth = state["h"], state["households"]
    size = HOUSEHOLD2010.cell_levels("hhsize")
    stride = int(np.prod(HOUSEHOLD2010.shape[HOUSEHOLD2010.attribute_names.index("hhsize") + 1 :]))
    coo = truth.tocoo()
    k = int(np.flatnonzero(size[coo.col] == 2)[0])
    b, cell = int(coo.row[k]), int(coo.col[k])
    alone = int(np.flatnonzero((size == 1) & (HOUSEHOLD2010.cell_levels("hhtype") == 18))[0])
    released = truth.tolil(copy=True)
    released[b, cell] -= 1
    released[b, cell + stride] += 1  # the same household, one size up
    released[b, alone] += 1
    released = released.tocsr()
    assert size[cell + stride] == 3
    h1 = [a.copy() for a in state["h1"]]
    for li in range(h.n_levels):  # the occupied line follows the households
        code = h.geocodes[-1][b][: h.geolevels.levels[li].length]
        h1[li][np.searchsorted(h.geocodes[li], code), 1] += 1
    out = _evaluate(state, _release(tmp_path / "run", released, h), h1=h1)
    assert out is not None
    for li, lv in enumerate(h.geolevels.names):
        assert out["tables"]["H13"]["levels"][lv]["l1"] == 3, lv  # -1 at 2, +1 at 3 and 1
        assert out["tables"]["P18"]["levels"][lv]["l1"] == 1, lv  # +1 living alone
        assert out["tables"]["H1"]["levels"][lv]["l1"] == 1, lv
        tot = out["totals"][lv]
        assert tot["released"] - tot["truth"] == 1
        assert tot["mae"] == pytest.approx(1 / h.n_units(li))
        assert tot["bias"] == pytest.approx(1 / h.n_units(li))


def test_what_is_not_compared_says_why(state: dict, tmp_path: Path) -> None:
    run = _release(tmp_path / "run", state["households"], state["h"])
    assert _evaluate(state, run, manifest={"units": {"schema": "units"}}) is None
    assert _evaluate(state, run, manifest={}) is None
    cef = state["cef"]
    persons = {k: v for k, v in cef.persons.items() if k != "rel"}
    truth = truth_household_tables(persons, cef.units, state["h"])
    assert truth is None
    out = household_evaluation(truth, run, MANIFEST, state["h"], (state["h1"], state["h1"]))
    assert out == {
        "schema": "household2010",
        "available": False,
        "reason": "the truth has no 'rel' column: no households to compare with",
    }
    (run / "tables" / f"{HOUSEHOLD_TABLE_NAMES[0]}.parquet").unlink()
    out = _evaluate(state, run)
    assert out is not None and not out["available"] and "no household tables" in out["reason"]
    assert "Not compared" in "".join(household_section({"households": out}))


def test_the_report_and_compare_show_the_households(state: dict, tmp_path: Path) -> None:
    run = _release(tmp_path / "run", state["households"], state["h"])
    out = _evaluate(state, run)
    names = list(state["h"].geolevels.names)
    html = "".join(household_section({"households": out, "geolevels": names}))
    assert "<h2>Households</h2>" in html and "accuracy H13 (households by size)" in html
    assert html.count("<tr>") == 1 + len(names)
    assert household_section({"geolevels": names}) == []
    # a household release beside a release without households (pl94): None in its place
    a = json.loads(json.dumps({"households": out, "geolevels": names}))
    rows = household_comparison([a, {"geolevels": names}])
    assert [r["geolevel"] for r in rows] == names
    block = rows[-1]
    assert block["households"] == [int(state["households"].sum()), None]
    assert block["tvd"]["H13"] == [1.0, None] and block["mae"] == [0, None]
    assert household_comparison([{"geolevels": names}, {"geolevels": names}]) == []
