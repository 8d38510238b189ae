"""The guards of exact invariants in TopDown, fed solutions that violate them.

Rounding (``check_integer_solution``, ``round_to_integers``) and the driver
(``_check_counts``, ``run_task``, ``_make_subproblem``, ``estimate``) must keep every
child summing to its parent and every group and total bound exact; these tests give them
violating inputs and check the exact outcome, and check the L1 optimality of the
fallback rounding network against a direct integer program.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp
from _topdown_gen import l1_rounding_optimum, random_subproblem, small_subproblem

from censusdp.data.geography import family_chunks
from censusdp.data.invariants import Bounds
from censusdp.data.measurements import MeasuredQuery
from censusdp.data.queries import make_query
from censusdp.data.schema import get_schema
from censusdp.errors import CensusDPError, InfeasibleError, InternalError
from censusdp.privacy.randomness import RandomSource
from censusdp.release.measure import measure
from censusdp.release.topdown import (
    _flow,
    check_integer_solution,
    round_to_integers,
    rounding,
    solve_l2,
)
from censusdp.release.topdown.driver import TopDownOptions, run_topdown
from censusdp.release.topdown.level_results import LevelResults
from censusdp.release.topdown.subproblems import Family, QueryCache, family_runs, make_subproblem
from censusdp.release.topdown.tasks import Task, TaskResult, check_counts, run_task
from synth import block_codes, pl94_state

PL94 = get_schema("pl94")


# two children, three cells in two groups {0, 1} and {2}; parent (3, 2, 4)
GUARDED = dict(
    parent=[3, 2, 4],
    groups=[0, 0, 1],
    gl=[[1, 0], [2, 1]],
    gu=[[4, np.inf], [5, 3]],
    tl=[2, 3],
    tu=[7, 6],
)
GOOD = np.array([[1, 1, 3], [2, 1, 1]])  # group sums (2, 3), (3, 1); totals 5, 4


def test_a_valid_solution_passes_every_check() -> None:
    sub = small_subproblem(**GUARDED)
    assert check_integer_solution(sub, GOOD) == []
    check_counts(sub, GOOD, "here")  # no exception
    # exactly at every bound still passes
    tight = small_subproblem(
        parent=[3, 2, 4],
        groups=[0, 0, 1],
        gl=[[2, 3], [3, 1]],
        gu=[[2, 3], [3, 1]],
        tl=[5, 4],
        tu=[5, 4],
    )
    assert check_integer_solution(tight, GOOD) == []
    check_counts(tight, GOOD, "here")


@pytest.mark.parametrize(
    ("x", "problems", "message"),
    [
        (GOOD[:1], ["shape (1, 3) != (2, 3)"], r"here: rounded shape \(1, 3\) != \(2, 3\)"),
        (
            np.array([[2, 1, 3], [1, 1, 1]]),  # totals 6, 3; group sums (3,3), (2,1)
            [],
            None,
        ),
        (
            np.array([[-1, 3, 3], [4, -1, 1]]),
            ["negative count -1"],
            "here: negative count after rounding",
        ),
        (
            np.array([[1, 2, 3], [2, 1, 1]]),
            ["1 cells do not sum to the parent (first: cell 1)"],
            "here: children do not sum to the parent",
        ),
        (
            np.array([[1, 1, 3], [2, 1, 2]]),
            ["1 cells do not sum to the parent (first: cell 2)"],
            "here: children do not sum to the parent",
        ),
        (
            np.array([[0, 0, 3], [3, 2, 1]]),  # child 0 group 0 sum 0 < 1
            ["group bounds violated"],
            "here: group bounds violated after rounding",
        ),
        (
            np.array([[1, 2, 0], [2, 0, 4]]),  # child 1 group 1 sum 4 > 3
            ["group bounds violated"],
            "here: group bounds violated after rounding",
        ),
        (
            np.array([[0, 1, 1], [3, 1, 3]]),  # child 0 total 2, child 1 total 7 > 6
            ["total bounds violated"],
            "here: total bounds violated after rounding",
        ),
    ],
)
def test_violations_are_reported(x, problems, message) -> None:
    sub = small_subproblem(**GUARDED)
    assert check_integer_solution(sub, x) == problems
    if message is None:
        check_counts(sub, x, "here")
    else:
        with pytest.raises(InternalError, match=message):
            check_counts(sub, x, "here")


def test_total_below_its_lower_bound() -> None:
    sub = small_subproblem(
        parent=[3], groups=[0], gl=[[0], [0]], gu=[[9], [9]], tl=[2, 0], tu=[9, 9]
    )
    assert check_integer_solution(sub, np.array([[2], [1]])) == []
    assert check_integer_solution(sub, np.array([[1], [2]])) == ["total bounds violated"]
    with pytest.raises(InternalError, match="here: total bounds violated after rounding"):
        check_counts(sub, np.array([[1], [2]]), "here")


def test_several_violations_are_all_listed() -> None:
    sub = small_subproblem(**GUARDED)
    x = np.array([[5, 0, 0], [0, 0, 0]])  # column sums wrong, child 1 group bounds, totals
    assert check_integer_solution(sub, x) == [
        "3 cells do not sum to the parent (first: cell 0)",
        "group bounds violated",
        "total bounds violated",
    ]


def test_non_integer_solutions_are_refused() -> None:
    sub = small_subproblem(**GUARDED)
    assert check_integer_solution(sub, GOOD.astype(float)) == ["dtype float64 is not integer"]


def test_root_has_no_parent_check() -> None:
    sub = small_subproblem(None, [0, 0, 1], [[0, 0]], [[np.inf, np.inf]], [7], [7], k=1)
    assert check_integer_solution(sub, np.array([[3, 0, 4]])) == []
    assert check_integer_solution(sub, np.array([[3, 0, 5]])) == ["total bounds violated"]
    check_counts(sub, np.array([[3, 0, 4]]), "root")


def test_fractional_bounds_are_met_as_integers() -> None:
    """Real bounds act through ceil(lower) and floor(upper), up to 1e-9."""
    sub = small_subproblem(
        parent=[3, 2, 4],
        groups=[0, 0, 1],
        gl=[[1.5, 0], [2, 1]],
        gu=[[4, np.inf], [5, 3.0000000001]],
        tl=[2, 3],
        tu=[7, 6],
    )
    assert check_integer_solution(sub, GOOD) == []  # child 0 group 0 sum 2 >= ceil(1.5)
    x = np.array([[1, 0, 3], [2, 2, 1]])  # child 0 group 0 sum 1 < 1.5
    assert check_integer_solution(sub, x) == ["group bounds violated"]


# -- rounding --------------------------------------------------------------------------------


FAR_CASES = [
    # x integral but a child's total is 2 below its lower bound: the box network (floor/ceil
    # of x) cannot move anything, the fallback moves 2 units (L1 cost 4)
    (
        dict(parent=[3], groups=[0], gl=[[0], [0]], gu=[[np.inf], [np.inf]], tl=[0, 2], tu=[9, 9]),
        np.array([[3.0], [0.0]]),
        np.array([[1], [2]]),
    ),
    # columns of x sum above the parent: the box network is skipped (negative supply)
    (
        dict(parent=[2, 1], groups=[0, 1], gl=[[0, 0]] * 2, gu=[[9, 9]] * 2, tl=[0, 0], tu=[9, 9]),
        np.array([[4.0, 0.2], [3.0, 0.1]]),
        None,
    ),
    # a group bound far from x
    (
        dict(
            parent=[4, 4],
            groups=[0, 1],
            gl=[[0, 3], [0, 0]],
            gu=[[9, 9], [9, 9]],
            tl=[0, 0],
            tu=[9, 9],
        ),
        np.array([[2.0, 0.0], [2.0, 4.0]]),
        np.array([[2, 3], [2, 1]]),
    ),
]


@pytest.mark.parametrize(("spec", "x", "want"), FAR_CASES)
@pytest.mark.parametrize("method", ["ortools", "linprog"])
def test_fallback_network_is_l1_optimal(spec, x, want, method) -> None:
    sub = small_subproblem(**spec)
    got = round_to_integers(sub, x, method=method)
    assert check_integer_solution(sub, got) == []
    assert np.abs(got - x).sum() == pytest.approx(l1_rounding_optimum(sub, x), abs=1e-6)
    if want is not None:
        np.testing.assert_array_equal(got, want)


def _network_solution(sub, x, *, box: bool) -> np.ndarray | None:
    """Solve one of the two rounding networks alone (no fallback), as X."""
    net, parts, base = rounding._network(sub, rounding._snap(np.asarray(x, float)), box=box)
    flow = _flow.solve(net, "ortools")
    if flow is None:
        return None
    out = base.ravel().copy()
    for s, idx, sign in parts:
        out[idx] += sign * flow[s]
    return out.reshape(sub.k, sub.c)


@pytest.mark.parametrize("root", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_each_network_alone_is_l1_optimal(seed: int, root: bool) -> None:
    """The box network (X in floor(x)..ceil(x)) is optimal over the box; the fallback
    network over all integers; with x feasible both optima are equal."""
    rng = np.random.default_rng(seed)
    sub, _ = random_subproblem(rng, k=3, c=5, n_groups=2, bound_slack=1, root=root)
    x = solve_l2(sub).x
    boxed = _network_solution(sub, x, box=True)
    assert boxed is not None
    assert check_integer_solution(sub, boxed) == []
    assert (np.abs(boxed - x) < 1).all()
    best_box = l1_rounding_optimum(sub, x, box=True)
    assert np.abs(boxed - x).sum() == pytest.approx(best_box, abs=1e-5)
    free = _network_solution(sub, x, box=False)
    assert check_integer_solution(sub, free) == []
    assert np.abs(free - x).sum() == pytest.approx(l1_rounding_optimum(sub, x), abs=1e-5)
    np.testing.assert_array_equal(round_to_integers(sub, x), boxed)


@pytest.mark.parametrize(("spec", "x", "want"), FAR_CASES)
def test_fallback_network_alone_on_far_points(spec, x, want) -> None:
    sub = small_subproblem(**spec)
    got = _network_solution(sub, x, box=False)
    assert check_integer_solution(sub, got) == []
    assert np.abs(got - x).sum() == pytest.approx(l1_rounding_optimum(sub, x), abs=1e-6)


def test_box_network_has_no_arc_for_an_integral_cell() -> None:
    """x integral and one unit short of a lower bound: no rounding within the box exists."""
    spec = dict(parent=[3], groups=[0], gl=[[0], [0]], gu=[[9], [9]], tl=[0, 1], tu=[9, 9])
    sub = small_subproblem(**spec)
    x = np.array([[3.0], [0.0]])
    assert _network_solution(sub, x, box=True) is None
    np.testing.assert_array_equal(round_to_integers(sub, x), [[2], [1]])


def test_snapping() -> None:
    """Within 1e-9 + 1e-12 |x| of an integer a value snaps to it; negatives clip to 0."""
    x = np.array([2.9999999999, 1e-12, -1e-12, 0.5, 1e6 + 1e-7, 1e6 + 1e-5, 7.0, -3.0])
    np.testing.assert_array_equal(
        rounding._snap(x), [3.0, 0.0, 0.0, 0.5, 1e6, 1e6 + 1e-5, 7.0, 0.0]
    )


def test_linprog_method_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []
    real = _flow.solve
    monkeypatch.setattr(
        _flow, "solve", lambda net, method: seen.append(method) or real(net, method)
    )
    sub = small_subproblem(**GUARDED)
    round_to_integers(sub, GOOD + 0.25, method="linprog")
    round_to_integers(sub, GOOD + 0.25)
    assert seen == ["linprog", "ortools"]


def test_root_fallback_keeps_large_counts() -> None:
    """At the root (no parent) the fallback meets a total far above x at L1 cost 5."""
    sub = small_subproblem(None, [0, 1], [[0, 0]], [[np.inf, np.inf]], [10], [10], k=1)
    x = np.array([[3.0, 2.0]])
    got = round_to_integers(sub, x)
    assert got.sum() == 10 and (got >= np.array([[3, 2]])).all()
    assert np.abs(got - x).sum() == pytest.approx(5.0)


def test_rounding_refuses_infeasible_and_malformed_input() -> None:
    sub = small_subproblem(
        parent=[1], groups=[0], gl=[[1], [1]], gu=[[9], [9]], tl=[0, 0], tu=[9, 9]
    )
    with pytest.raises(
        InfeasibleError,
        match=r"^subproblem 'test': no non-negative integer solution satisfies the parent "
        r"counts and the group/total bounds; run make_feasible first$",
    ):
        round_to_integers(sub, np.array([[0.5], [0.5]]))
    ok = small_subproblem(**GUARDED)
    with pytest.raises(
        InternalError, match=r"rounding input has shape \(2, 2\), expected \(2, 3\)"
    ):
        round_to_integers(ok, np.zeros((2, 2)))
    with pytest.raises(
        InternalError, match=r"censusdp\): rounding input contains NaN or infinity$"
    ):
        round_to_integers(ok, np.full((2, 3), np.nan))
    with pytest.raises(InternalError, match=r"censusdp\): unknown rounding method 'gurobi'$"):
        round_to_integers(ok, GOOD.astype(float), method="gurobi")


# -- the driver ------------------------------------------------------------------------------


def test_run_task_reports_a_relaxation_with_its_parent() -> None:
    # child 0 has a facility of group 1 (>= 1 person) but the parent has nobody there
    sub = small_subproblem(
        parent=[3, 2],
        groups=[0, 0],
        gl=[[0, 1], [0, 0]],
        gu=[[9, 9], [9, 9]],
        tl=[0, 0],
        tu=[9, 9],
        noisy=[[2, 1], [1, 1]],
    )
    res = run_task(Task(2, "50001", 7, np.array([4, 9]), sub))
    assert res.failsafe is not None and res.failsafe["parent_geocode"] == "50001"
    assert res.level == 2 and res.parent_geocode == "50001" and res.child_start == 7
    assert res.kept.tolist() == [4, 9]
    assert res.counts.sum(axis=0).tolist() == [3, 2]
    ok = run_task(Task(0, "", 0, np.array([0, 1, 2]), small_subproblem(**GUARDED)))
    assert ok.failsafe is None
    assert check_integer_solution(small_subproblem(**GUARDED), ok.counts) == []


def test_subproblem_takes_the_childrens_rows_bounds_and_relative_weights() -> None:
    q_detail = make_query(PL94, "detailed")
    q_total = make_query(PL94, "total")
    kept = np.array([5, 17, 40])
    units = 6
    vals = np.arange(units * 3, dtype=np.int64).reshape(units, 3)
    mqs = [
        MeasuredQuery("Block", "detailed", kept, vals, 4.0, "dg"),
        MeasuredQuery("Block", "total", np.array([0]), np.arange(units).reshape(-1, 1), 0.5, "dg"),
    ]
    cache = QueryCache.__new__(QueryCache)
    cache._q = {"detailed": q_detail, "total": q_total}
    n = 10
    bounds = Bounds(
        np.arange(n * 8, dtype=float).reshape(n, 8),
        np.arange(n * 8, dtype=float).reshape(n, 8) + 100,
        np.arange(n, dtype=float),
        np.arange(n, dtype=float) + 50,
    )
    cell_groups = PL94.cell_levels("hhgq")
    family = Family(
        6, 3, kept, np.array([3, 1, 2]), cell_groups[kept], bounds.units(slice(6, 9)), "x"
    )
    sub = make_subproblem(mqs, cache, slice(2, 5), family)
    assert sub.k == 3 and sub.c == 3 and sub.label == "x"
    np.testing.assert_array_equal(sub.group_lower, bounds.group_lower[6:9])
    np.testing.assert_array_equal(sub.group_upper, bounds.group_upper[6:9])
    np.testing.assert_array_equal(sub.total_lower, [6, 7, 8])
    np.testing.assert_array_equal(sub.total_upper, [56, 57, 58])
    np.testing.assert_array_equal(sub.groups, cell_groups[kept])
    np.testing.assert_array_equal(sub.parent, [3, 1, 2])
    # weights 1 / (variance + 1e-6), scaled so that the largest is 1
    w = np.array([1 / (4.0 + 1e-6), 1 / (0.5 + 1e-6)])
    np.testing.assert_allclose(sub.weights, w / w.max(), rtol=1e-15)
    assert sub.weights.max() == 1.0
    np.testing.assert_array_equal(sub.noisy[1][:, 0], [2, 3, 4])
    # only the answer rows holding a kept cell: here the three kept detailed cells
    assert sub.query_sizes == (3, 1)
    np.testing.assert_array_equal(sub.query_rows[0], [0, 1, 2])
    np.testing.assert_array_equal(sub.noisy[0], vals[2:5])


def test_variance_floor_keeps_near_exact_measurements_comparable() -> None:
    """Variances of 1e-21 and 1e-20 weigh alike (both below the 1e-6 floor)."""
    q = make_query(PL94, "total")
    cache = QueryCache.__new__(QueryCache)
    cache._q = {"total": q}
    mqs = [
        MeasuredQuery("Block", "total", np.array([0]), np.zeros((1, 1), np.int64), v, "dg")
        for v in (1e-21, 1e-20, 1e-6)
    ]
    b = Bounds(np.zeros((1, 8)), np.full((1, 8), np.inf), np.zeros(1), np.full(1, np.inf))
    kept = np.array([0])
    family = Family(0, 1, kept, None, PL94.cell_levels("hhgq")[kept], b, "r")
    sub = make_subproblem(mqs, cache, slice(0, 1), family)
    np.testing.assert_allclose(sub.weights, [1.0, 1.0, 0.5], rtol=1e-9)


@pytest.fixture(scope="module")
def small_release(tmp_path_factory):
    base = tmp_path_factory.mktemp("guards")
    h, levels, plan = pl94_state(base, 3, block_codes(1, 1, 2, 2), gq_rate=0.5)
    ms = measure(levels, h, PL94, plan, RandomSource.seeded(4))
    return h, levels, ms


def _exact_bounds(levels) -> list[Bounds]:
    """Every group sum and every total of the truth pinned exactly, at every level."""
    cell_groups = PL94.cell_levels("hhgq")
    onehot = sp.csr_matrix(
        (np.ones(cell_groups.size), (np.arange(cell_groups.size), cell_groups)),
        shape=(PL94.size, 8),
    )
    out = []
    for lv in levels:
        gs = np.asarray((sp.csr_matrix(lv) @ onehot).todense(), dtype=float)
        ts = gs.sum(axis=1)
        out.append(Bounds(gs, gs.copy(), ts, ts.copy()))
    return out


def test_estimate_meets_invariants_pinned_at_every_level(small_release) -> None:
    """Exact bounds on every unit's group sums hold in the estimate, with no failsafe."""
    h, levels, ms = small_release
    bounds = _exact_bounds(levels)
    lines: list[str] = []
    est = run_topdown(ms, h, bounds, TopDownOptions(method="clarabel"), progress=lines.append)
    assert est.failsafe == []
    # one task per parent unit (one for the root), one child per unit of the level below
    names = [lv.name for lv in h.geolevels]
    tasks = [1] + [h.n_units(li) for li in range(h.n_levels - 1)]
    assert [s["geolevel"] for s in est.levels] == names
    assert [s["tasks"] for s in est.levels] == tasks
    assert [s["children"] for s in est.levels] == [h.n_units(li) for li in range(h.n_levels)]
    assert all(
        s["failsafe_uses"] == 0 and s["statuses"] == {"optimal": s["tasks"]} for s in est.levels
    )
    # a slow level may also report tasks done so far ("estimating Tract: 3/8 tasks ...")
    ticks = [x for x in lines if x.startswith("estimating ")]
    assert all(re.match(r"estimating \w+: \d+/\d+ tasks \(\d+%\), ", x) for x in ticks)
    lines = [x for x in lines if not x.startswith("estimating ")]
    assert len(lines) == h.n_levels
    for line, name, n in zip(lines, names, tasks, strict=True):
        assert re.fullmatch(
            rf"estimated {name:<10} {n:>6} tasks? in \d+\.\d\ds \(failsafe used 0 times\)", line
        ), line
    cell_groups = PL94.cell_levels("hhgq")
    for li, (hist, b) in enumerate(zip(est.histograms, bounds, strict=True)):
        dense = hist.toarray()
        gs = np.zeros((dense.shape[0], 8))
        np.add.at(gs.T, cell_groups, dense.T)
        np.testing.assert_array_equal(gs, b.group_lower, err_msg=f"level {li}")
        assert (dense >= 0).all()
    for li in range(1, h.n_levels):
        agg = h.aggregate(est.histograms[-1])[li]
        assert (sp.csr_matrix(agg) != est.histograms[li]).nnz == 0
    # bottom-up honours the block bounds too
    bu = run_topdown(ms, h, bounds, TopDownOptions(postprocess="bottomup", method="clarabel"))
    bg = np.zeros((h.n_units(h.n_levels - 1), 8))
    np.add.at(bg.T, cell_groups, bu.histograms[-1].toarray().T)
    np.testing.assert_array_equal(bg, bounds[-1].group_lower)


def test_estimate_rejects_bad_arguments(small_release) -> None:
    h, levels, ms = small_release
    bounds = _exact_bounds(levels)
    with pytest.raises(CensusDPError, match="postprocess must be 'topdown' or 'bottomup', got 'x'"):
        run_topdown(ms, h, bounds, TopDownOptions(postprocess="x"))
    wrong = [
        Bounds(b.group_lower[:, :3], b.group_upper[:, :3], b.total_lower, b.total_upper)
        for b in bounds
    ]
    with pytest.raises(InternalError, match="bounds have 3 groups, hhgq has 8"):
        run_topdown(ms, h, wrong)


def test_estimate_by_single_families_is_identical(small_release, monkeypatch) -> None:
    """Reading the measurements one family at a time gives the same histograms, top-down
    and bottom-up (task boundaries, child offsets and parents survive the chunking)."""
    h, levels, ms = small_release
    bounds = _exact_bounds(levels)
    whole = {
        pp: run_topdown(ms, h, bounds, TopDownOptions(method="clarabel", postprocess=pp))
        for pp in POSTPROCESS
    }
    monkeypatch.setattr(family_chunks, "__defaults__", (1,))
    monkeypatch.setattr(family_runs, "__defaults__", (1,))  # the driver's reads
    assert len(family_chunks(h, h.n_levels - 1, 10)) == h.n_units(h.n_levels - 2)
    for pp in POSTPROCESS:
        chunked = run_topdown(ms, h, bounds, TopDownOptions(method="clarabel", postprocess=pp))
        for a, b in zip(whole[pp].histograms, chunked.histograms, strict=True):
            assert (a != b).nnz == 0


POSTPROCESS = ("topdown", "bottomup")


def test_estimate_with_one_group(small_release) -> None:
    """``group_variable=None`` (the housing-unit run): one group, totals pinned per unit."""
    h, levels, ms = small_release
    bounds = []
    for lv in levels:
        ts = np.asarray(lv.sum(axis=1), dtype=float).ravel()
        n = ts.size
        bounds.append(Bounds(np.zeros((n, 1)), np.full((n, 1), np.inf), ts, ts.copy()))
    est = run_topdown(ms, h, bounds, TopDownOptions(group_variable=None, method="clarabel"))
    assert est.failsafe == []
    for hist, b in zip(est.histograms, bounds, strict=True):
        np.testing.assert_array_equal(np.asarray(hist.sum(axis=1)).ravel(), b.total_lower)


def test_failsafe_records_name_the_parent(small_release) -> None:
    """An impossible facility bound in one block: relaxed, and the record names its parent."""
    h, levels, ms = small_release
    bounds = _exact_bounds(levels)
    last = bounds[-1]
    gl = last.group_lower.copy()
    gu = last.group_upper.copy()
    gl[0, 7] = gu[0, 7] = gl[0, 7] + 1000  # block 0: 1000 more persons of type 7 than exist
    bounds[-1] = Bounds(gl, gu, last.total_lower, last.total_upper)
    parent = h.geocodes[h.n_levels - 2][h.parent[h.n_levels - 1][0]]
    level_name = h.geolevels[h.n_levels - 2].name
    labels = {"topdown": f"{level_name} {parent}", "bottomup": f"bottom-up blocks of {parent}"}
    for pp in POSTPROCESS:
        est = run_topdown(ms, h, bounds, TopDownOptions(method="clarabel", postprocess=pp))
        assert [f["parent_geocode"] for f in est.failsafe] == [str(parent)]
        assert [f["label"] for f in est.failsafe] == [labels[pp]]
        assert est.levels[-1]["failsafe_uses"] == 1


def test_task_result_bookkeeping() -> None:
    """Timings add up (l2 + rounding <= total, all positive), the solver is recorded."""
    sub = small_subproblem(**GUARDED)
    res = run_task(Task(3, "500010000011", 5, np.array([2, 7, 9]), sub, method="clarabel"))
    assert res.status == "optimal" and res.method == "clarabel"
    assert 0 < res.solve_seconds and 0 < res.rounding_seconds
    assert res.solve_seconds + res.rounding_seconds <= res.seconds < 60
    assert 0 < res.cpu_seconds < 60
    assert 0 <= res.max_violation < 1e-6
    assert res.kept.tolist() == [2, 7, 9] and res.child_start == 5 and res.level == 3


def _result(child_start, kept, counts, seconds, status="optimal", method="admm", fs=None):
    return TaskResult(
        level=4,
        parent_geocode="p",
        child_start=child_start,
        kept=np.array(kept),
        counts=np.array(counts, dtype=np.int64),
        status=status,
        method=method,
        seconds=seconds,
        solve_seconds=seconds / 4,
        rounding_seconds=seconds / 8,
        max_violation=seconds / 1000,
        failsafe=fs,
        cpu_seconds=seconds / 2,
    )


def test_level_results_fold_counts_and_timings() -> None:
    acc = LevelResults("Block", 5, 10)
    acc.add(_result(0, [1, 4], [[2, 0], [0, 3]], 1.0))
    acc.add(
        _result(2, [4, 8, 9], [[1, 0, 5], [0, 0, 0], [7, 1, 0]], 3.0, "x", "clarabel", {"a": 1})
    )
    acc.add(_result(5, [], np.zeros((0, 0)), 0.5))  # a task with no kept cell
    hist = acc.histogram().toarray()
    want = np.zeros((5, 10), dtype=np.int64)
    want[0, 1], want[1, 4] = 2, 3
    want[2, 4], want[2, 9], want[4, 4], want[4, 8] = 1, 5, 7, 1
    np.testing.assert_array_equal(hist, want)
    s = acc.summary(wall=9.0)
    assert s == {
        "geolevel": "Block",
        "tasks": 3,
        "wall_seconds": 9.0,
        "task_seconds": 4.5,
        "task_cpu_seconds": 2.25,
        "l2_seconds": 1.125,
        "rounding_seconds": 0.5625,
        "max_task_seconds": 3.0,
        "median_task_seconds": 1.0,
        "children": 5,
        "max_children": 3,
        "max_l2_violation": 0.003,
        "statuses": {"optimal": 2, "x": 1},
        "methods": {"admm": 2, "clarabel": 1},
        "fallbacks": {},  # no task needed the solver chain's fallbacks
        "failsafe_uses": 1,
        "max_task_cpu_seconds": 1.5,
        "critical_path_seconds": 3.0,  # no split family: the longest task
        "critical_path_cpu_seconds": 1.5,
        "split_families": [],
    }
    assert acc.failsafe == [{"a": 1}]
    empty = LevelResults("US", 1, 4)
    none = empty.histogram()
    assert none.shape == (1, 4) and none.nnz == 0
    assert none.dtype == np.int64  # the validator requires integer histograms
    assert acc.histogram().dtype == np.int64
    assert empty.summary(0.0)["median_task_seconds"] == 0.0
