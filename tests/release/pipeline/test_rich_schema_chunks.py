"""Rich schemas at state scale: measuring below a family, estimating a wide family in pieces.

A ``dhc-lite`` block has 229,320 measured detailed cells (a ``ddp-2010`` one 337,680), so
one block group of 540 blocks is 124 million noisy values. Measurement cuts such a family at unit boundaries (noise is
keyed per geounit, so the cut cannot change a value: the NMF is the same whatever the
chunk size), and estimation reads it in pieces, keeping only the answer rows the
family's problem uses (the release is the same whatever the piece size).
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from censusdp.data.geography import family_chunks
from censusdp.data.invariants import Bounds
from censusdp.data.measurements import MeasuredQuery, measured_rows
from censusdp.data.schema import get_schema
from censusdp.errors import InputError
from censusdp.io.budget_files import load_preset
from censusdp.io.nmf_read import NMFReader, read_nmf
from censusdp.io.nmf_write import NMFWriter
from censusdp.privacy.randomness import RandomSource
from censusdp.release.measure import measure_tasks, run_measure_task
from censusdp.release.topdown.levels import LevelPlan, LevelTasks, TaskContext
from censusdp.release.topdown.subproblems import (
    Family,
    QueryCache,
    family_runs,
    group_of_cells,
    make_subproblem,
)
from censusdp.release.topdown.tasks import Task
from synth import block_codes, pl94_state, tree_bytes

PL94 = get_schema("pl94")


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """A state whose block groups have up to 9 blocks (families wider than the tiny targets)."""
    base = tmp_path_factory.mktemp("wide")
    return base, *pl94_state(base, 5, block_codes(1, 1, 2, 9), gq_rate=0.3)


def _width(plan, level_name):
    from censusdp.release.measure import _query_and_rows

    return sum(_query_and_rows(PL94, q)[1].size for lv, q, _ in plan if lv == level_name)


def test_split_families_cut_a_wide_family_at_unit_boundaries(wide):
    _, h, _, plan = wide
    bl = h.n_levels - 1
    width = _width(plan, h.geolevels[bl].name)
    ptr = h.child_ptr[bl - 1]
    widest = int(np.diff(ptr).max())
    assert widest >= 5
    for per in (1, 2, 4, widest, widest + 1, 30):
        target = per * width
        cut = family_chunks(h, bl, width, target, split_families=True)
        whole = family_chunks(h, bl, width, target)
        for chunks in (cut, whole):
            assert chunks[0][0] == 0 and chunks[-1][1] == h.n_units(bl)
            assert [a for a, _ in chunks[1:]] == [b for _, b in chunks[:-1]]
        # measurement: never more than ``per`` units; estimation: whole families
        assert max(b - a for a, b in cut) <= per
        assert {a for a, _ in whole} <= set(ptr.tolist())
        if per < widest:
            assert max(b - a for a, b in whole) >= widest > max(b - a for a, b in cut)
        else:  # every family fits: the two agree
            assert cut == whole
    root = family_chunks(h, 0, width, 1, split_families=True)
    assert root == [(0, 1)]


def _nmf(path, h, levels, plan, target):
    with NMFWriter(path) as w:
        for task in measure_tasks(levels, h, PL94, plan, RandomSource.seeded(11), target=target):
            w.write_chunk(run_measure_task(task))
    return pq.ParquetFile(path).metadata.num_row_groups


def _sorted(table):
    for c in ("geolevel", "geocode", "query"):
        i = table.column_names.index(c)
        table = table.set_column(i, c, table.column(c).cast("string"))
    return table.sort_by([(c, "ascending") for c in ("geolevel", "query", "geocode", "cell")])


def test_same_seed_gives_the_same_nmf_whatever_the_chunk_size(wide, tmp_path):
    _, h, levels, plan = wide
    width = _width(plan, h.geolevels[-1].name)
    groups = {t: _nmf(tmp_path / f"{t}.parquet", h, levels, plan, t) for t in (10**9, 3 * width, 1)}
    assert groups[1] > groups[3 * width] > groups[10**9]
    ref = read_nmf(tmp_path / f"{10**9}.parquet", PL94, h)
    cols = ["geolevel", "geocode", "query", "cell", "value", "variance"]
    ref_table = _sorted(pq.read_table(tmp_path / f"{10**9}.parquet", columns=cols))
    for t in (3 * width, 1):
        other = read_nmf(tmp_path / f"{t}.parquet", PL94, h)
        assert list(other.queries) == list(ref.queries)
        for key, mq in ref.queries.items():
            assert np.array_equal(mq.values, other.queries[key].values), (t, key)
        # row for row (the chunks order the queries of a level differently: sort)
        table = _sorted(pq.read_table(tmp_path / f"{t}.parquet", columns=cols))
        assert table.num_rows == ref_table.num_rows
        for c in cols:
            a, b = ref_table.column(c).to_numpy(), table.column(c).to_numpy()
            assert np.array_equal(a, b), (t, c)
    # and a different seed does change it (the comparison can fail)
    with NMFWriter(tmp_path / "other.parquet") as w:
        for task in measure_tasks(levels, h, PL94, plan, RandomSource.seeded(12), target=10**9):
            w.write_chunk(run_measure_task(task))
    other = read_nmf(tmp_path / "other.parquet", PL94, h)
    key = next(iter(ref.queries))
    assert not np.array_equal(ref.queries[key].values, other.queries[key].values)


@settings(max_examples=60)
@given(
    n_rows=st.integers(1, 40),
    data=st.data(),
)
def test_columns_and_restricted_are_the_dense_answers_on_the_wanted_rows(n_rows, data):
    measured = np.asarray(
        sorted(data.draw(st.sets(st.integers(0, n_rows - 1), max_size=n_rows))), dtype=np.int64
    )
    units = data.draw(st.integers(0, 6))
    values = np.asarray(
        data.draw(
            st.lists(
                st.integers(-50, 50),
                min_size=units * measured.size,
                max_size=units * measured.size,
            )
        ),
        dtype=np.int64,
    ).reshape(units, measured.size)
    mq = MeasuredQuery("Block", "q", measured, values, 2.0, "dg")
    wanted = np.asarray(
        sorted(data.draw(st.sets(st.integers(0, n_rows - 1), max_size=n_rows))), dtype=np.int64
    )
    a = data.draw(st.integers(0, units))
    b = data.draw(st.integers(a, units))
    dense = mq.dense(slice(a, b), n_rows)
    np.testing.assert_array_equal(mq.columns(slice(a, b), wanted), dense[:, wanted])
    r = mq.restricted(wanted)
    assert set(r.rows.tolist()) == set(wanted.tolist()) & set(measured.tolist())
    np.testing.assert_array_equal(r.columns(slice(a, b), wanted), dense[:, wanted])
    assert r.variance == mq.variance and r.query == mq.query


def _tasks(ms, h, level, hist, target, monkeypatch):
    monkeypatch.setattr(family_runs, "__defaults__", (target,))
    cell_groups, n_groups = group_of_cells(ms, "hhgq")
    n = h.n_units(level + 1)
    bounds = Bounds(
        np.zeros((n, n_groups)), np.full((n, n_groups), np.inf), np.zeros(n), np.full(n, np.inf)
    )
    ctx = TaskContext(ms, QueryCache(ms), h, cell_groups, "auto", max_children=None)
    return list(LevelTasks(ctx, level, hist, bounds, LevelPlan()))


def test_a_wide_family_read_in_pieces_gives_the_same_subproblems(wide, tmp_path, monkeypatch):
    _, h, levels, plan = wide
    _nmf(tmp_path / "nmf.parquet", h, levels, plan, 1)
    reader = NMFReader(tmp_path / "nmf.parquet", PL94, h)
    level = h.n_levels - 2  # block groups with their blocks
    hist = levels[level].tocsr()
    whole = _tasks(reader, h, level, hist, 10**9, monkeypatch)
    calls = []
    real_read = reader.read
    real_rows = reader.read_rows
    monkeypatch.setattr(reader, "read", lambda lv, a, b: calls.append(b - a) or real_read(lv, a, b))
    monkeypatch.setattr(
        reader, "read_rows", lambda lv, a, b, w: calls.append(b - a) or real_rows(lv, a, b, w)
    )
    pieces = _tasks(reader, h, level, hist, 1, monkeypatch)
    assert max(calls) == 1  # one block at a time, never a whole family
    assert len(whole) == len(pieces) == h.n_units(level)
    for x, y in zip(whole, pieces, strict=True):
        assert np.array_equal(x.kept, y.kept)
        assert x.sub.query_sizes == y.sub.query_sizes
        for a, b in zip(x.sub.noisy, y.sub.noisy, strict=True):
            np.testing.assert_array_equal(a, b)
        for a, b in zip(x.sub.query_rows, y.sub.query_rows, strict=True):
            np.testing.assert_array_equal(a, b)
        # only the rows holding a kept cell: far fewer than the detailed query's rows
        assert max(x.sub.query_sizes) <= x.kept.size < PL94.size
    # the kept rows are the noisy answers of the right children (from the file)
    t = whole[1]
    mq = [m for m in reader.read(level + 1, 0, h.n_units(level + 1)) if m.query == "detailed"][0]
    qi = [i for i, s in enumerate(t.sub.query_sizes) if s == t.kept.size][-1]
    k = t.sub.k
    np.testing.assert_array_equal(
        t.sub.noisy[qi], mq.columns(slice(t.child_start, t.child_start + k), t.kept)
    )


def test_a_release_estimated_in_pieces_is_byte_identical(wide, tmp_path, monkeypatch):
    from censusdp.privacy.release_budget import ReleaseBudget
    from censusdp.release.options import ReleaseOptions
    from censusdp.release.pipeline import reestimate, run_release

    base = wide[0]
    budget = load_preset("pl94-2020")
    run_release(base / "cef", tmp_path / "a", ReleaseBudget(budget), ReleaseOptions(seed=5))
    monkeypatch.setattr(family_runs, "__defaults__", (1,))
    reestimate(tmp_path / "a", tmp_path / "b", budget=ReleaseBudget(budget))
    for name in ("mdf_persons.parquet", "tables/P1.parquet"):
        assert tree_bytes(tmp_path / "a" / name) == tree_bytes(tmp_path / "b" / name)


@pytest.mark.slow
def test_ddp_2010_end_to_end_on_a_small_generated_state(tmp_path):
    """``ddp-2010`` (``dhcp-hhgq``, 467,712 cells) on 40 blocks of generated Vermont,
    validated."""
    import pyarrow as pa

    from censusdp.cli import main
    from censusdp.generate import generate_state

    gen = tmp_path / "vt"
    generate_state("VT", 4, gen, scale=0.02)
    units = pq.read_table(gen / "units.parquet")
    persons = pq.read_table(gen / "persons.parquet")
    blocks = np.unique(np.asarray(units.column("geocode").to_pylist()))
    # two block groups' worth of blocks: each a family of many children
    bgs = np.unique([b[:12] for b in blocks])[:2]
    keep = set(b for b in blocks if b[:12] in set(bgs.tolist()))
    keep = set(sorted(keep)[:40])
    small = tmp_path / "small"
    small.mkdir()
    mask_u = pa.array([g in keep for g in units.column("geocode").to_pylist()])
    mask_p = pa.array([g in keep for g in persons.column("geocode").to_pylist()])
    pq.write_table(units.filter(mask_u), small / "units.parquet")
    pq.write_table(persons.filter(mask_p), small / "persons.parquet")
    out = tmp_path / "run"
    rc = main(
        ["run", "-q", "--input", str(small), "--out", str(out), "--preset", "ddp-2010"]
        + ["--units-preset", "none", "--seed", "1"]
    )
    assert rc == 0
    assert main(["validate", "-q", str(out), "--truth", str(small)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    by_level = manifest["noisy_values_by_level"]["persons"]
    # every block measured once, each with the same queries as the one State unit
    # (337,680 detailed cells, the 467,712 less the structural zeros, and the
    # marginals); the US of one state is the nation's
    assert not by_level.get("US")
    assert by_level["State"] == 337_680 + 8 + 504 + 232 + 58 + 16 + 4
    assert by_level["Block"] == len(keep) * by_level["State"]
    assert manifest["validation"]["ok"] is True


_QUERIES = ("detailed", "total", "hhgq", "votingage*hispanic*cenrace", "cenrace")


@settings(max_examples=40)
@given(data=st.data())
def test_keeping_the_rows_with_a_kept_cell_changes_the_objective_by_a_constant(data):
    """The driver's problem (rows holding a kept cell) and the full one (every row of
    every query) differ by a constant: same minimisers, same least-squares solution."""
    from censusdp.data.queries import make_query
    from censusdp.release.topdown.problem import Subproblem
    from censusdp.release.topdown.solvers.least_squares import solve_l2

    live = np.flatnonzero(~PL94.structural_zero_mask)
    kept = np.asarray(
        sorted(data.draw(st.sets(st.sampled_from(live.tolist()), min_size=1, max_size=12))),
        dtype=np.int64,
    )
    k = data.draw(st.integers(1, 4))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    cache = QueryCache.__new__(QueryCache)
    cache._q = {q: make_query(PL94, q) for q in _QUERIES}
    mqs = []
    for i, name in enumerate(_QUERIES):
        rows = measured_rows(PL94, cache._q[name])
        values = rng.integers(-3, 6, (k, rows.size))
        mqs.append(MeasuredQuery("Block", name, rows, values, 1.0 + i, "dg"))
    parent = rng.integers(1, 6, kept.size)
    cell_groups, n_groups = PL94.cell_levels("hhgq"), PL94.variable("hhgq").size
    bounds = Bounds(
        np.zeros((k, n_groups)), np.full((k, n_groups), np.inf), np.zeros(k), np.full(k, np.inf)
    )
    sub = make_subproblem(
        mqs, cache, slice(0, k), Family(0, k, kept, parent, cell_groups[kept], bounds, "x")
    )
    full = Subproblem(
        parent=parent,
        query_rows=tuple(cache._q[m.query].row_of_cell[kept] for m in mqs),
        query_sizes=tuple(cache._q[m.query].n_rows for m in mqs),
        noisy=tuple(m.dense(slice(0, k), cache._q[m.query].n_rows) for m in mqs),
        weights=sub.weights,
        groups=sub.groups,
        group_lower=sub.group_lower,
        group_upper=sub.group_upper,
        total_lower=sub.total_lower,
        total_upper=sub.total_upper,
    )
    assert all(s <= kept.size for s in sub.query_sizes)
    diffs = []
    for _ in range(3):
        x = rng.random((k, kept.size)) * 5
        diffs.append(full.objective(x) - sub.objective(x))
    assert diffs[0] >= -1e-9
    np.testing.assert_allclose(diffs, diffs[0], rtol=1e-9, atol=1e-7)
    a, b = solve_l2(sub), solve_l2(full)
    assert abs(a.objective + diffs[0] - b.objective) <= 1e-3 * max(1.0, b.objective)


class _Pickling:
    """An executor that sends every task through pickle, as a process pool does, and
    counts the tasks that travel without their subproblem (read where they run)."""

    name = "pickling"

    def __init__(self) -> None:
        self.detached = self.tasks = self.largest = 0

    def map(self, fn, items):
        import pickle

        for item in items:
            blob = pickle.dumps(item)
            batch = pickle.loads(blob)
            if isinstance(batch, tuple) and batch and isinstance(batch[0], Task):
                self.tasks += len(batch)
                self.detached += sum(t.sub is None for t in batch)
                self.largest = max(self.largest, len(blob))
            yield fn(batch)

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def test_tasks_that_read_their_own_family_give_the_same_release(wide, tmp_path, monkeypatch):
    """Off the driver's process, a family that is not split is read by its own task
    from an NMF slice (``NMFReader.detach``): the release is byte-identical, and a
    task carries row-group locations, not the family's noisy values."""
    from censusdp.privacy.release_budget import ReleaseBudget
    from censusdp.release import pipeline
    from censusdp.release.options import ReleaseOptions

    base = wide[0]
    budget = load_preset("pl94-2020")
    pipeline.run_release(
        base / "cef", tmp_path / "a", ReleaseBudget(budget), ReleaseOptions(seed=5)
    )
    ex = _Pickling()
    monkeypatch.setattr(pipeline, "make_executor", lambda *a, **k: ex)
    pipeline.reestimate(tmp_path / "a", tmp_path / "b", budget=ReleaseBudget(budget))
    assert ex.detached > 0 and ex.detached < ex.tasks  # the root's task is built here
    for name in ("mdf_persons.parquet", "tables/P1.parquet"):
        assert tree_bytes(tmp_path / "a" / name) == tree_bytes(tmp_path / "b" / name)


def test_an_nmf_slice_reads_like_the_reader_and_only_inside_itself(wide, tmp_path):
    _, h, levels, plan = wide
    _nmf(tmp_path / "nmf.parquet", h, levels, plan, 3)
    reader = NMFReader(tmp_path / "nmf.parquet", PL94, h)
    bl = h.n_levels - 1
    n = h.n_units(bl)
    piece = reader.detach(bl, 5, n - 4)
    for a, b in ((5, n - 4), (6, 9), (7, 7)):
        got, want = piece.read(bl, a, b), reader.read(bl, a, b)
        assert [m.query for m in got] == [m.query for m in want]
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g.values, w.values)
            assert g.variance == w.variance
    with pytest.raises(InputError, match="outside the slice"):
        piece.read(bl, 4, 9)


def test_the_heaviest_families_go_out_first_and_every_family_once(tmp_path, monkeypatch):
    """Families of at least ``HEAVY_VARIABLES`` variables that their tasks read go out
    first, the widest first (Los Angeles' tract family began 30 s into California's
    Tract level and ended it alone); the others follow in order, each family once, the
    same tasks as in order. A family read on the driver keeps its place."""
    from censusdp.release.topdown import levels as levels_module

    fan_out = [2, 7, 3, 9, 4, 6, 1]  # blocks of each block group of one tract
    codes = [f"50001000001{g + 1}{b + 1:04d}" for g, n in enumerate(fan_out) for b in range(n)]
    h, levels, plan = pl94_state(tmp_path, 7, codes, gq_rate=0.3)
    _nmf(tmp_path / "nmf.parquet", h, levels, plan, 1)
    reader = NMFReader(tmp_path / "nmf.parquet", PL94, h)
    level = h.n_levels - 2  # block groups with their blocks
    hist = levels[level].tocsr()
    cell_groups, n_groups = group_of_cells(reader, "hhgq")
    n = h.n_units(level + 1)
    bounds = Bounds(
        np.zeros((n, n_groups)), np.full((n, n_groups), np.inf), np.zeros(n), np.full(n, np.inf)
    )
    kids = np.diff(h.child_ptr[level])
    size = kids * np.diff(hist.indptr)  # the fixture's parents hold positive counts only
    assert (hist.data > 0).all() and len(set(size.tolist())) > 4
    cut = int(np.sort(size)[-3])  # three heavy families at least, not the first ones
    assert size[0] < cut

    def order(detach: bool) -> list[Task]:
        ctx = TaskContext(
            reader, QueryCache(reader), h, cell_groups, "auto", max_children=None, detach=detach
        )
        return list(LevelTasks(ctx, level, hist, bounds, LevelPlan()))

    in_order = order(True)
    monkeypatch.setattr(levels_module, "HEAVY_VARIABLES", cut)
    heavy_first = order(True)
    starts = [t.child_start for t in heavy_first]
    heavy = [int(i) for i in np.flatnonzero(size >= cut)]
    first = heavy_first[: len(heavy)]
    assert [size[h.geocodes[level].tolist().index(t.parent_geocode)] for t in first] == sorted(
        (int(size[i]) for i in heavy), reverse=True
    )
    assert sorted(starts) == [t.child_start for t in in_order]  # each family once
    rest = [t.child_start for t in heavy_first[len(heavy) :]]
    assert rest == sorted(rest)
    by_start = {t.child_start: t for t in in_order}
    for t in heavy_first:
        u = by_start[t.child_start]
        assert t.parent_geocode == u.parent_geocode and np.array_equal(t.kept, u.kept)
        assert t.source.family.k == u.source.family.k
    assert [t.child_start for t in order(False)] == [t.child_start for t in in_order]
