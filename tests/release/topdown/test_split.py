"""Splitting wide families: a coarse solve over chunks of children, then one task per chunk."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import numpy as np
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from _topdown_gen import random_subproblem
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.data.geography import GeoLevels, Hierarchy
from censusdp.data.invariants import Bounds, Invariants, level_bounds
from censusdp.data.schema import get_schema
from censusdp.errors import ConfigError
from censusdp.io.budget_files import load_preset
from censusdp.io.nmf_read import NMFReader
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.options import Execution, ReleaseOptions
from censusdp.release.pipeline import run_release
from censusdp.release.topdown import make_feasible, round_to_integers, solve_l2
from censusdp.release.topdown.driver import TopDownOptions, run_topdown
from censusdp.release.topdown.level_results import LevelResults
from censusdp.release.topdown.levels import LevelTasks, TaskContext, level_plans
from censusdp.release.topdown.split import (
    chunk_starts,
    chunk_subproblems,
    coarse_subproblem,
    splittable,
)
from censusdp.release.topdown.subproblems import QueryCache, group_of_cells
from censusdp.release.topdown.tasks import TaskResult, run_task
from synth import block_codes, make_cef, tree_bytes, write_cef

PL94 = get_schema("pl94")


@given(k=st.integers(1, 60), m=st.integers(1, 70))
def test_chunks_cover_the_children_in_near_equal_runs(k, m):
    starts = chunk_starts(k, m)
    sizes = np.diff(np.r_[starts, k])
    assert starts[0] == 0 and (sizes >= 1).all() and sizes.sum() == k
    assert sizes.max() <= m and sizes.max() - sizes.min() <= 1
    assert starts.size == -(-k // m)


def _solve(sub):
    feasible, _ = make_feasible(sub)
    return np.asarray(round_to_integers(feasible, solve_l2(feasible).x), dtype=np.int64)


@settings(max_examples=25)
@given(seed=st.integers(0, 2**31 - 1), k=st.integers(3, 12), m=st.integers(1, 5))
def test_split_solution_is_exact_to_the_parent_and_every_bound(seed, k, m):
    rng = np.random.default_rng(seed)
    sub, _ = random_subproblem(rng, k=k, c=10, n_groups=3, n_queries=3)
    # below the invariant level totals are free (the only families that are split)
    sub = replace(sub, total_lower=np.zeros(k), total_upper=np.full(k, np.inf))
    assert splittable(sub, m) == (k > m)
    starts = chunk_starts(k, m)
    coarse = coarse_subproblem(sub, starts)
    # the coarse problem is the chunk sums of the children's problem
    ends = np.r_[starts, k]
    for q in range(sub.n_queries):
        for i, (a, b) in enumerate(zip(ends[:-1], ends[1:], strict=True)):
            np.testing.assert_allclose(coarse.noisy[q][i], sub.noisy[q][a:b].sum(axis=0))
    np.testing.assert_array_equal(coarse.group_upper[0], sub.group_upper[: ends[1]].sum(axis=0))
    counts = _solve(coarse)
    np.testing.assert_array_equal(counts.sum(axis=0), sub.parent)
    x = np.zeros((k, sub.c), dtype=np.int64)
    for ch in chunk_subproblems(sub, starts, counts):
        x[ch.offset : ch.offset + ch.sub.k][:, ch.kept] = _solve(ch.sub)
    assert (x >= 0).all()
    np.testing.assert_array_equal(x.sum(axis=0), sub.parent)  # exact, every cell
    gs = sub.group_sums(x)
    assert (gs >= sub.group_lower).all() and (gs <= sub.group_upper).all()


def test_families_with_bounded_totals_are_never_split():
    sub, _ = random_subproblem(np.random.default_rng(1), k=8, c=6)
    free = replace(sub, total_lower=np.zeros(8), total_upper=np.full(8, np.inf))
    assert splittable(free, 3) and not splittable(free, 8) and not splittable(free, None)
    exact = replace(free, total_lower=np.ones(8), total_upper=np.ones(8) * 50)
    assert not splittable(exact, 3)
    assert not splittable(replace(free, total_upper=np.r_[np.full(7, np.inf), 9.0]), 3)
    assert not splittable(replace(free, parent=None), 3)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("split")
    persons, units = make_cef(
        np.random.default_rng(8), block_codes(3, 3, 2, 4), mean_hh=4.0, gq_rate=0.2
    )
    write_cef(base / "cef", persons, units)
    budget = load_preset("pl94-2020").scaled(rho="1/2")
    run_release(base / "cef", base / "run", ReleaseBudget(budget), ReleaseOptions(seed=4))
    manifest = json.loads((base / "run" / "manifest.json").read_text())
    levels = GeoLevels.from_pairs([tuple(g) for g in manifest["geolevels"]])
    blocks = pq.read_table(base / "run" / "invariants.parquet")
    codes = np.asarray(blocks.column("geocode").to_numpy(zero_copy_only=False)).astype("U16")
    hierarchy = Hierarchy.from_blocks(codes, levels)
    inv = Invariants.from_tables(
        blocks, pq.read_table(base / "run" / "invariant_totals.parquet"), hierarchy
    )
    bounds = [Bounds(*b) for b in level_bounds(inv, hierarchy)]
    ms = NMFReader(base / "run" / "noisy_measurements.parquet", PL94, hierarchy)
    return hierarchy, bounds, ms


def _hhgq_member():
    levels = PL94.cell_levels("hhgq")
    return sp.csr_matrix(
        (np.ones(levels.size), (np.arange(levels.size), levels)), shape=(levels.size, 8)
    )


def test_split_estimate_keeps_every_constraint_and_records_the_critical_path(run):
    hierarchy, bounds, ms = run
    est = run_topdown(ms, hierarchy, bounds, TopDownOptions(max_children=2))
    agg = hierarchy.aggregate(est.histograms[-1])
    for li, (hist, b) in enumerate(zip(est.histograms, bounds, strict=True)):
        assert (hist.data >= 0).all()
        assert (hist != agg[li]).nnz == 0  # children sum to parents, every cell
        tot = np.asarray(hist.sum(axis=1)).ravel()
        exact = b.total_lower == b.total_upper
        np.testing.assert_array_equal(tot[exact], b.total_lower[exact])
        gs = np.asarray((hist @ _hhgq_member()).todense())
        assert (gs >= b.group_lower).all() and (gs <= b.group_upper).all()
    by_level = {s["geolevel"]: s for s in est.levels}
    for li, name in enumerate(hierarchy.geolevels.names[1:], start=1):
        s = by_level[name]
        kids = np.diff(hierarchy.child_ptr[li - 1])
        live = np.asarray(est.histograms[li - 1].sum(axis=1)).ravel() > 0
        codes = hierarchy.geocodes[li - 1]
        wide = {str(codes[i]): int(kids[i]) for i in np.flatnonzero((kids > 2) & live)}
        if name == "State":  # the US family: exact state totals, never split
            wide = {}
        got = {f["parent"]: f["chunks"] for f in s["split_families"]}
        assert got == {p: -(-k // 2) for p, k in wide.items()}, name
        assert s["max_children"] <= (kids.max() if name == "State" else 2)
        paths = [f["coarse_seconds"] + f["longest_chunk_seconds"] for f in s["split_families"]]
        assert s["critical_path_seconds"] >= max([*paths, s["max_task_seconds"]]) - 1e-3
    # 3 counties of 3 tracts: every level below the state has wide families here
    assert all(by_level[n]["split_families"] for n in ("County", "Tract", "Block"))


def test_a_limit_above_every_family_changes_nothing(run):
    hierarchy, bounds, ms = run
    plain = run_topdown(ms, hierarchy, bounds, TopDownOptions(max_children=None))
    wide = run_topdown(ms, hierarchy, bounds, TopDownOptions(max_children=6))
    for a, b in zip(plain.histograms, wide.histograms, strict=True):
        assert (a != b).nnz == 0
    assert all(s["split_families"] == [] for s in wide.levels)
    with pytest.raises(ConfigError, match="max_children"):
        run_topdown(ms, hierarchy, bounds, TopDownOptions(max_children=0))


@pytest.mark.slow
def test_split_release_is_byte_identical_on_the_pool_and_recorded(tmp_path):
    persons, units = make_cef(np.random.default_rng(9), block_codes(3, 3, 1, 3), mean_hh=3.0)
    write_cef(tmp_path / "cef", persons, units)
    budget = load_preset("pl94-2020").scaled(rho="1/4")
    options = ReleaseOptions(seed=5, max_children=2)
    a = run_release(
        tmp_path / "cef", tmp_path / "a", ReleaseBudget(budget), options, Execution("inprocess")
    )
    b = run_release(
        tmp_path / "cef", tmp_path / "b", ReleaseBudget(budget), options, Execution("pool", 2)
    )
    for name in ("mdf_persons.parquet", "noisy_measurements.parquet"):
        assert tree_bytes(tmp_path / "a" / name) == tree_bytes(tmp_path / "b" / name)
    assert a["max_children"] == b["max_children"] == 2
    levels = {s["geolevel"]: s for s in a["estimation"]["persons"]}
    assert levels["County"]["split_families"] and levels["Tract"]["split_families"]
    assert a["validation"]["ok"]


def test_cli_max_children_option(tmp_path, capsys):
    from censusdp.cli import main

    persons, units = make_cef(np.random.default_rng(2), block_codes(1, 1, 1, 2))
    write_cef(tmp_path / "cef", persons, units)
    args = ["run", "--input", str(tmp_path / "cef"), "--seed", "1", "--quiet"]
    with pytest.raises(SystemExit) as bad:
        main([*args, "--out", str(tmp_path / "bad"), "--max-children", "0"])
    assert bad.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--max-children must be at least 1, got 0" in err[0]
    assert main([*args, "--out", str(tmp_path / "none"), "--max-children", "none"]) == 0
    manifest = json.loads((tmp_path / "none" / "manifest.json").read_text())
    assert manifest["max_children"] is None


def _result(parent, child_start, seconds):
    return TaskResult(
        level=2,
        parent_geocode=parent,
        child_start=child_start,
        kept=np.array([0]),
        counts=np.ones((1, 1), dtype=np.int64),
        status="optimal",
        method="admm",
        seconds=seconds,
        solve_seconds=0.0,
        rounding_seconds=0.0,
        max_violation=0.0,
        cpu_seconds=seconds / 2,
    )


def test_level_summary_counts_coarse_solves_in_the_critical_path():
    acc = LevelResults("Tract", 10, 1)
    for start, secs in ((0, 2.0), (3, 5.0)):  # the chunks of family "a"
        acc.add(_result("a", start, secs))
    acc.add(_result("b", 6, 6.0))  # an unsplit family, the longest single task
    acc.add_splits([(_result("a", 0, 1.5), 2)])
    s = acc.summary(wall=1.0)
    assert s["max_task_seconds"] == 6.0
    assert s["critical_path_seconds"] == 6.5  # coarse 1.5 + longest chunk 5.0
    assert s["critical_path_cpu_seconds"] == 3.25
    assert s["task_cpu_seconds"] == (2.0 + 5.0 + 6.0 + 1.5) / 2  # the coarse CPU counts
    assert s["split_families"] == [
        {
            "parent": "a",
            "chunks": 2,
            "coarse_seconds": 1.5,
            "coarse_cpu_seconds": 0.75,
            "longest_chunk_seconds": 5.0,
            "longest_chunk_cpu_seconds": 2.5,
        }
    ]


class _Mixed:
    """An in-process executor of two habits, by the level of the tasks it is given.

    Even parent levels (the counties' tracts): it takes every task before it returns any
    result (a slow cluster), so every coarse result comes back after the last task was
    handed out. Odd ones (the states' counties): one task at a time, so each coarse
    result is back before the next task is asked for."""

    name = "mixed"

    def map(self, fn, tasks, *, ahead=None):
        it = iter(tasks)
        first = next(it, None)
        if first is None:
            return iter(())
        rest = itertools.chain([first], it)
        if first[0].level % 2 == 0:
            with _in_executor():
                out = [fn(t) for t in list(rest)]
            return iter(out)
        return self._stepwise(fn, rest)

    @staticmethod
    def _stepwise(fn, tasks):
        for t in tasks:
            with _in_executor():
                r = fn(t)
            yield r


_INSIDE = [False]


class _in_executor:
    def __enter__(self):
        _INSIDE[0] = True

    def __exit__(self, *exc):
        _INSIDE[0] = False


def _old_split_level(ms, hierarchy, bounds, level, parent_hist, max_children):
    """The level as the driver estimated it before the coarse solves became tasks: each
    split family's coarse problem solved in place, its chunks after it."""

    cell_groups, _ = group_of_cells(ms, "hhgq")
    plan = level_plans(ms, hierarchy, "hhgq", "production")[level + 1]
    ctx = TaskContext(ms, QueryCache(ms), hierarchy, cell_groups, "auto", max_children=None)
    whole = LevelTasks(ctx, level, parent_hist, bounds[level + 1], plan)
    acc = LevelResults("old", hierarchy.n_units(level + 1), PL94.size)
    for t in whole:
        if not splittable(t.sub, max_children):
            acc.add(run_task(t))
            continue
        starts = chunk_starts(t.sub.k, max_children)
        coarse = run_task(replace(t, sub=coarse_subproblem(t.sub, starts)))
        for ch in chunk_subproblems(t.sub, starts, coarse.counts):
            kept = t.kept[ch.kept]
            l2p, rounding = plan.bind(kept)
            chunk = replace(
                t, child_start=t.child_start + ch.offset, kept=kept, sub=ch.sub,
                l2_passes=l2p, rounding=rounding,
            )  # fmt: skip
            acc.add(run_task(chunk))
    return acc.histogram()


def test_coarse_solves_are_executor_tasks_with_the_old_results(run, monkeypatch):
    from censusdp.release.topdown import tasks as topdown_tasks

    hierarchy, bounds, ms = run
    real = run_task

    def only_in_executor(task):
        assert _INSIDE[0], f"the driver solved {task.parent_geocode!r} itself"
        return real(task)

    monkeypatch.setattr(topdown_tasks, "run_task", only_in_executor)
    est = run_topdown(ms, hierarchy, bounds, TopDownOptions(max_children=2), executor=_Mixed())
    monkeypatch.setattr(topdown_tasks, "run_task", real)
    # the same histograms, level by level, as solving each coarse problem on the driver
    for level in range(hierarchy.n_levels - 1):
        old = _old_split_level(ms, hierarchy, bounds, level, est.histograms[level], 2)
        assert (old != est.histograms[level + 1]).nnz == 0, hierarchy.geolevels[level + 1].name
    by_level = {s["geolevel"]: s for s in est.levels}
    tract = by_level["Tract"]
    assert [f["parent"] for f in tract["split_families"]] == sorted(
        f["parent"] for f in tract["split_families"]
    )
    for f in tract["split_families"]:  # each chunk's time is in the critical path
        assert f["longest_chunk_seconds"] > 0
        path = f["coarse_seconds"] + f["longest_chunk_seconds"]
        assert tract["critical_path_seconds"] >= path - 1e-3  # both rounded to 1e-4 s
    split = tract["split_families"]
    counties = hierarchy.n_units(hierarchy.geolevels.names.index("County"))
    assert tract["tasks"] == counties - len(split) + sum(f["chunks"] for f in split)


def test_split_families_are_read_once_when_kept_and_give_the_same_release(run, monkeypatch):
    """The driver keeps a split family's whole subproblem from its coarse task for its
    chunks (``SPLIT_KEEP_BYTES``): one read a family instead of two, the same histograms
    as reading it again (a keep of 0 bytes), and a family beyond the keep read again."""
    from censusdp.release.topdown import levels as levels_mod

    hierarchy, bounds, ms = run
    reads: list[int] = []
    real = LevelTasks._alone

    def counted(self, i):
        reads.append(i)
        return real(self, i)

    monkeypatch.setattr(LevelTasks, "_alone", counted)
    kept = run_topdown(ms, hierarchy, bounds, TopDownOptions(max_children=2))
    n_split = sum(len(s["split_families"]) for s in kept.levels)
    assert n_split > 0 and len(reads) == n_split  # each split family read once
    reads.clear()
    monkeypatch.setattr(levels_mod, "SPLIT_KEEP_BYTES", 0)
    again = run_topdown(ms, hierarchy, bounds, TopDownOptions(max_children=2))
    assert len(reads) == 2 * n_split  # coarse, then chunks: each read twice
    for a, b in zip(kept.histograms, again.histograms, strict=True):
        assert (a != b).nnz == 0
