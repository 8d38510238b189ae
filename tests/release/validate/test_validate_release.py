"""The release validator on releases that break one constraint at a time.

A correct release (the truth itself: every constraint holds) passes every check; each
test then breaks exactly one property and checks that exactly the matching check fails,
with its detail.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy
from censusdp.data.invariants import Bounds
from censusdp.data.schema import get_schema
from censusdp.release.validate import (
    UnitRun,
    ValidationReport,
    Written,
    check_bounds,
    check_hierarchy,
    validate_release,
)

PL94 = get_schema("pl94")
# state 50: county 001 (tract 000001 with block groups 1 and 2, tract 000002), county 003
BLOCKS = np.array(
    [
        "5000100000110001",
        "5000100000110002",
        "5000100000120001",
        "5000100000210001",
        "5000300000110001",
    ]
)


def _cell(hhgq: int, adult: int, hispanic: int, cenrace: int) -> int:
    age = 30 if adult else 5
    return int(
        PL94.cells_of({"hhgq": [hhgq], "age": [age], "hispanic": [hispanic], "cenrace": [cenrace]})[
            0
        ]
    )


@pytest.fixture(scope="module")
def release():
    h = Hierarchy.from_blocks(BLOCKS)
    nb = h.n_units(h.n_levels - 1)
    block = sp.lil_matrix((nb, PL94.size), dtype=np.int64)
    block[0, _cell(0, 1, 0, 1)] = 3
    block[0, _cell(0, 0, 1, 7)] = 1
    block[1, _cell(3, 1, 0, 1)] = 2  # nursing facility, adults only
    block[2, _cell(0, 1, 0, 2)] = 4
    block[4, _cell(5, 0, 0, 1)] = 1
    hists = [sp.csr_matrix(a, dtype=np.int64) for a in h.aggregate(block.tocsr())]
    groups = PL94.cell_levels("hhgq")
    onehot = sp.csr_matrix((np.ones(groups.size), (np.arange(groups.size), groups)))
    bounds = []
    for hist in hists:
        gs = np.asarray((hist @ onehot).todense(), dtype=float)
        ts = gs.sum(axis=1)
        bounds.append(Bounds(gs, gs + 2, ts, ts))  # totals exact, groups within [s, s + 2]
    units = [
        sp.csr_matrix(a, dtype=np.int64)
        for a in h.aggregate(np.array([[1, 1], [0, 0], [2, 1], [0, 3], [0, 0]]))
    ]
    housing = np.array([2, 0, 3, 3, 0])
    tables = {"P1": [np.asarray(x.sum(axis=1)).reshape(-1, 1) for x in hists]}
    return h, hists, bounds, units, housing, block.tocsr(), tables


def _validate(release, **change):
    h, hists, bounds, units, housing, block, tables = release
    args = dict(
        hists=hists,
        hierarchy=h,
        schema=PL94,
        bounds=bounds,
        unit_hists=units,
        housing_units=housing,
        mdf_block_hist=block,
        tables=tables,
        tables_from_mdf={k: [a.copy() for a in v] for k, v in tables.items()},
    )
    args.update(change)
    unit = {
        k: args.pop(k) for k in ("unit_hists", "housing_units", "household_persons") if k in args
    }
    if unit.get("unit_hists") is not None and unit.get("housing_units") is not None:
        args["units"] = UnitRun(
            unit["unit_hists"], unit["housing_units"], unit.get("household_persons")
        )
    args["written"] = Written(
        *(args.pop(k, None) for k in ("mdf_block_hist", "tables", "tables_from_mdf"))
    )
    return validate_release(**args)


def _with_block(release, fn):
    """Per-level histograms of a modified block histogram (hierarchy stays consistent)."""
    h = release[0]
    block = release[5].tolil(copy=True)
    fn(block)
    return [sp.csr_matrix(a, dtype=np.int64) for a in h.aggregate(block.tocsr())]


def test_a_correct_release_passes_every_check(release) -> None:
    rep = _validate(release)
    assert rep.ok, rep.failures()
    assert rep.failures() == []
    assert list(rep.checks) == [
        "nonnegative_integers",
        "hierarchy_consistent",
        "constraints_and_invariants",
        "structural_zeros",
        "units_consistent",
        "mdf_matches_histogram",
        "tables_match_mdf",
    ]
    assert rep.checks["nonnegative_integers"] == {
        "ok": True,
        "detail": "all counts are non-negative integers",
    }
    assert rep.checks["hierarchy_consistent"]["detail"] == "6 levels consistent"
    assert rep.checks["constraints_and_invariants"]["detail"] == "all group and total bounds exact"
    assert rep.checks["structural_zeros"]["detail"] == "0 persons in structural-zero cells"
    assert rep.checks["units_consistent"]["detail"] == "6 levels consistent; housing units exact"
    assert rep.checks["mdf_matches_histogram"]["detail"] == "0 differing block cells"
    assert rep.checks["tables_match_mdf"]["detail"] == "all tables recomputed exactly"
    assert rep.to_dict() == {"ok": True, "checks": rep.checks}


def test_failsafe_note_only_on_failure(release) -> None:
    rep = _validate(release, failsafe_uses=2)
    assert rep.checks["constraints_and_invariants"] == {
        "ok": True,
        "detail": "all group and total bounds exact",
    }


def test_explicit_zeros_and_a_lone_table_argument(release) -> None:
    hists = [x.copy() for x in release[1]]
    block = hists[-1].tocoo()
    # an explicitly stored 0 is a non-negative count
    hists[-1] = sp.csr_matrix(
        (np.append(block.data, 0), (np.append(block.row, 3), np.append(block.col, 0))),
        shape=block.shape,
    )
    assert hists[-1].data.min() == 0
    assert _validate(release, hists=hists).checks["nonnegative_integers"]["ok"]
    # tables without their recomputation from the MDF: no table check
    rep = _validate(release, tables_from_mdf=None)
    assert "tables_match_mdf" not in rep.checks and rep.ok


def test_bounds_need_one_entry_per_level_and_may_have_empty_groups(release) -> None:
    hists, bounds = release[1], release[2]
    groups = PL94.cell_levels("hhgq")
    with pytest.raises(ValueError, match="zip"):
        check_bounds(hists, groups, 8, bounds[:-1])
    # tight bounds (lower == upper == the group sums) hold
    tight = [Bounds(b.group_lower, b.group_lower, b.total_lower, b.total_upper) for b in bounds]
    assert check_bounds(hists, groups, 8, tight) == (True, "all group and total bounds exact")
    # a ninth group that no cell belongs to: its sum is 0, within bounds [0, 0]
    nine = [
        Bounds(
            np.hstack([b.group_lower, np.zeros((len(b.total_lower), 1))]),
            np.hstack([b.group_upper, np.zeros((len(b.total_lower), 1))]),
            b.total_lower,
            b.total_upper,
        )
        for b in bounds
    ]
    assert check_bounds(hists, groups, 9, nine)[0]


def test_optional_checks_are_skipped_without_their_inputs(release) -> None:
    rep = _validate(
        release, unit_hists=None, mdf_block_hist=None, tables=None, tables_from_mdf=None
    )
    assert list(rep.checks) == [
        "nonnegative_integers",
        "hierarchy_consistent",
        "constraints_and_invariants",
        "structural_zeros",
    ]
    assert rep.ok
    assert "units_consistent" not in _validate(release, housing_units=None).checks


def _failed(rep: ValidationReport) -> list[str]:
    return [k for k, v in rep.checks.items() if not v["ok"]]


def test_negative_or_fractional_counts(release) -> None:
    hists = release[1]
    neg = [x.copy() for x in hists]
    neg[3] = neg[3].tolil()
    neg[3][0, 0] = -1
    neg[3] = neg[3].tocsr()
    rep = _validate(release, hists=neg)
    assert "nonnegative_integers" in _failed(rep)
    assert rep.checks["nonnegative_integers"]["detail"] == ""
    frac = [x.astype(np.float64) for x in hists]
    assert "nonnegative_integers" in _failed(_validate(release, hists=frac))
    empty = [sp.csr_matrix(x.shape, dtype=np.int64) for x in hists]
    rep = _validate(release, hists=empty)
    assert rep.checks["nonnegative_integers"]["ok"]


def test_a_level_that_is_not_the_sum_of_its_children(release) -> None:
    hists = release[1]
    bad = [x.copy() for x in hists]
    bad[2] = (bad[2] + sp.csr_matrix(([1, 1], ([0, 0], [5, 9])), shape=bad[2].shape)).tocsr()
    ok, detail = check_hierarchy(bad, release[0])
    assert not ok
    assert detail == "2 cells at County differ from the sum of their children"
    assert _failed(_validate(release, hists=bad)) == [
        "hierarchy_consistent",
        "constraints_and_invariants",
    ]


@pytest.mark.parametrize(
    ("field", "unit", "delta", "level"),
    [
        ("group_lower", (0, 0), 1, 5),  # block 0 household pop 4 < 5
        ("group_upper", (1, 3), -3, 5),  # block 1 nursing pop 2 > 1
        ("total_lower", 2, 1, 4),  # block group 2 (no persons): 0 < 1
        ("total_upper", 0, -1, 1),  # state total above its invariant
    ],
)
def test_each_bound_is_checked_exactly(release, field, unit, delta, level) -> None:
    hists, bounds = release[1], release[2]
    changed = []
    for li, b in enumerate(bounds):
        arrays = {
            k: getattr(b, k).copy()
            for k in ("group_lower", "group_upper", "total_lower", "total_upper")
        }
        if li == level:
            arrays[field][unit] += delta
        changed.append(Bounds(**arrays))
    groups = PL94.cell_levels("hhgq")
    ok, detail = check_bounds(hists, groups, 8, changed)
    assert not ok
    u = unit[0] if isinstance(unit, tuple) else unit
    assert detail.startswith(f"level {level} unit {u}: group sums ")
    rep = _validate(release, bounds=changed)
    assert _failed(rep) == ["constraints_and_invariants"]
    assert rep.checks["constraints_and_invariants"]["detail"] == detail  # no failsafe note
    rep = _validate(release, bounds=changed, failsafe_uses=3)
    assert rep.checks["constraints_and_invariants"]["detail"] == (
        detail + " (the failsafe relaxed bounds in 3 tasks; see manifest)"
    )
    # exactly at the bound (delta undone) passes
    assert check_bounds(hists, groups, 8, bounds) == (True, "all group and total bounds exact")


def test_group_sums_in_the_detail(release) -> None:
    hists, bounds = release[1], release[2]
    b = bounds[-1]
    gl = b.group_lower.copy()
    gl[2, 0] = 5
    changed = [*bounds[:-1], Bounds(gl, b.group_upper, b.total_lower, b.total_upper)]
    ok, detail = check_bounds(hists, PL94.cell_levels("hhgq"), 8, changed)
    assert (ok, detail) == (
        False,
        "level 5 unit 2: group sums [4.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0] violate bounds",
    )


def test_persons_in_structural_zero_cells(release) -> None:
    minors_in_nursing = _cell(3, 0, 0, 1)
    assert PL94.structural_zero_mask[minors_in_nursing]
    hists = _with_block(release, lambda b: b.__setitem__((1, minors_in_nursing), 2))
    rep = _validate(release, hists=hists, mdf_block_hist=hists[-1])
    assert "structural_zeros" in _failed(rep)
    assert rep.checks["structural_zeros"]["detail"] == "2 persons in structural-zero cells"
    # counted in the released blocks (here the only level that has them)
    blocks_only = [*release[1][:-1], hists[-1]]
    rep = _validate(release, hists=blocks_only, mdf_block_hist=hists[-1])
    assert rep.checks["structural_zeros"]["detail"] == "2 persons in structural-zero cells"


def test_unit_histograms(release) -> None:
    units, housing = release[3], release[4]
    rep = _validate(release, housing_units=housing + np.array([0, 0, 0, 1, 0]))
    assert _failed(rep) == ["units_consistent"]
    assert rep.checks["units_consistent"]["detail"] == "6 levels consistent; housing units differ"
    bad = [u.copy() for u in units]
    bad[0] = sp.csr_matrix(bad[0].toarray() + 1)
    rep = _validate(release, unit_hists=bad)
    assert _failed(rep) == ["units_consistent"]
    assert rep.checks["units_consistent"]["detail"].endswith("; housing units exact")


def test_mdf_that_differs_from_the_histogram(release) -> None:
    block = release[5].tolil(copy=True)
    block[4, 0] = 1
    block[0, 0] = 2
    rep = _validate(release, mdf_block_hist=block.tocsr())
    assert _failed(rep) == ["mdf_matches_histogram"]
    assert rep.checks["mdf_matches_histogram"]["detail"] == "2 differing block cells"


def test_tables_that_differ_from_the_mdf(release) -> None:
    tables = release[6]
    other = {"P1": [a.copy() for a in tables["P1"]]}
    other["P1"][3][0, 0] += 1
    other["P1"][5][1, 0] += 1
    rep = _validate(release, tables_from_mdf=other)
    assert _failed(rep) == ["tables_match_mdf"]
    assert rep.checks["tables_match_mdf"]["detail"] == "P1 level 3, P1 level 5"


def test_report_bookkeeping() -> None:
    rep = ValidationReport()
    assert rep.ok and rep.failures() == [] and rep.to_dict() == {"ok": True, "checks": {}}
    rep.add("a", True, "fine")
    rep.add("b", 0, "broken")
    rep.add("c", False)
    assert not rep.ok
    assert rep.failures() == ["b: broken", "c: "]
    assert rep.checks["b"] == {"ok": False, "detail": "broken"}
    assert rep.to_dict()["ok"] is False
