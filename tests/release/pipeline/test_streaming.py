"""Memory-bounded runs: chunked measurement, the chunked NMF reader, chunked MDF output.

Noise is keyed per (geolevel, query, geounit) (``censusdp.privacy.randomness``), so how a level is
cut into tasks cannot change a single noisy value; the NMF reader hands the estimator the
same values as the in-memory measurement set; the chunked MDF writer produces the same
persons as the one-shot expansion.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from censusdp.data.geography import Hierarchy, family_chunks
from censusdp.data.histograms import person_histogram
from censusdp.data.measurements import MeasurementSet
from censusdp.data.schema import get_schema
from censusdp.errors import ConfigError, InputError
from censusdp.execution import InProcessExecutor, ProcessPoolExecutor, make_executor
from censusdp.io.budget_files import load_preset
from censusdp.io.mdf_records import iter_mdf_blocks, mdf_person_columns
from censusdp.io.nmf_files import read_nmf_table
from censusdp.io.nmf_read import NMFReader
from censusdp.io.nmf_write import NMFWriter, write_nmf
from censusdp.privacy.randomness import RandomSource
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.measure import (
    MeasureTask,
    measure,
    measure_tasks,
    run_measure_task,
)
from censusdp.release.options import Execution, ReleaseOptions
from censusdp.release.pipeline import reestimate, run_release
from censusdp.release.topdown.subproblems import family_runs
from synth import block_codes, make_cef, pl94_state, tree_bytes, write_cef

PL94 = get_schema("pl94")


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    base = tmp_path_factory.mktemp("stream")
    return base, *pl94_state(base, 21, block_codes(2, 3, 2, 4), gq_rate=0.3)


def test_family_chunks_cover_each_level_with_whole_families(measured):
    _, h, _, _ = measured
    for level in range(h.n_levels):
        for target in (1, 50, 10**9):
            chunks = family_chunks(h, level, 7, target)
            starts = [a for a, _ in chunks]
            stops = [b for _, b in chunks]
            assert starts[0] == 0 and stops[-1] == h.n_units(level)
            assert starts[1:] == stops[:-1]
            if level:
                boundaries = set(h.child_ptr[level - 1].tolist())
                assert set(starts) <= boundaries and set(stops) <= boundaries
            if target == 10**9:
                assert len(chunks) == 1


def test_noise_does_not_depend_on_chunking(measured):
    _, h, levels, plan = measured
    src = RandomSource.seeded(7)
    whole = list(measure_tasks(levels, h, PL94, plan, src, target=10**9))
    small = list(measure_tasks(levels, h, PL94, plan, src, target=100))
    assert len(small) > len(whole)
    a = MeasurementSet(PL94, h.geolevels, h.geocodes).add_chunks(map(run_measure_task, whole))
    b = MeasurementSet(PL94, h.geolevels, h.geocodes).add_chunks(map(run_measure_task, small))
    assert list(a.queries) == list(b.queries)
    for key, mq in a.queries.items():
        assert np.array_equal(mq.values, b.queries[key].values), key
    # the pool gives the same chunks as the loop
    with ProcessPoolExecutor(2) as pool:
        c = list(pool.map(run_measure_task, small[:6]))
    for x, y in zip(c, map(run_measure_task, small[:6]), strict=True):
        for qx, qy in zip(x.queries, y.queries, strict=True):
            assert np.array_equal(qx.values, qy.values)


def test_a_units_noise_does_not_depend_on_the_budget_shares_of_the_others(measured):
    """Per-geounit budgets (spine bypass): a unit measured at the same share gets the same
    noise whether few, many or no other units of its task are bypassed or at other shares
    (one release for all shares, or one per share); bypassed units are 0 at variance inf."""
    _, h, levels, plan = measured
    li = h.n_levels - 1
    name = h.geolevels.levels[li].name
    codes = h.geocodes[li]
    n = codes.size
    queries = tuple((q, m) for g, q, m in plan if g == name)
    src = RandomSource.seeded(7)

    def run(num):
        task = MeasureTask(name, 0, codes, sp.csr_matrix(levels[li]), PL94, queries, src, (num, 4))
        return run_measure_task(task).queries

    full = np.full(n, 4)
    few = full.copy()
    few[0] = 0  # one bypassed unit
    many = full.copy()
    many[: n // 2] = 0  # half of them bypassed
    mixed = full.copy()
    mixed[1] = 2  # another share
    base = run(full)
    for num in (few, many, mixed):
        for want, got in zip(base, run(num), strict=True):
            same = num == 4
            np.testing.assert_array_equal(got.values[same], want.values[same])
            variance = np.broadcast_to(got.variance, (n,))
            assert (variance[same] == want.variance).all()
            assert (got.values[num == 0] == 0).all() and np.isinf(variance[num == 0]).all()
            if num is mixed:
                assert variance[1] > want.variance
    assert n >= 8 and isinstance(base[0].variance, float)


def test_nmf_reader_reads_any_unit_range_like_the_in_memory_set(measured, tmp_path):
    _, h, levels, plan = measured
    ms = measure(levels, h, PL94, plan, RandomSource.seeded(3))
    write_nmf(ms, tmp_path / "nmf.parquet")
    reader = NMFReader(tmp_path / "nmf.parquet", PL94, h)
    rng = np.random.default_rng(0)
    for level in range(h.n_levels):
        n = h.n_units(level)
        for _ in range(4):
            a, b = sorted(rng.integers(0, n + 1, 2))
            got, want = reader.read(level, int(a), int(b)), ms.read(level, int(a), int(b))
            assert [m.query for m in got] == [m.query for m in want]
            for g, w in zip(got, want, strict=True):
                assert np.array_equal(g.rows, w.rows)
                assert np.array_equal(g.values, w.values)
                assert g.variance == w.variance and g.mechanism == w.mechanism
            # a subset of the queries: the same answers, in plan order, the others not read
            names = [m.query for m in want][::2]
            got = reader.read(level, int(a), int(b), queries=set(names))
            assert [m.query for m in got] == names
            assert [m.query for m in ms.read(level, int(a), int(b), queries=names)] == names
            for g, w in zip(got, want[::2], strict=True):
                assert np.array_equal(g.values, w.values)


@pytest.mark.slow  # the suite's time (CI skips slow tests); run with -m slow
def test_nmf_reader_falls_back_for_mixed_row_groups_and_rejects_gaps(measured, tmp_path):
    _, h, levels, plan = measured
    ms = measure(levels, h, PL94, plan, RandomSource.seeded(3))
    write_nmf(ms, tmp_path / "nmf.parquet")
    table = read_nmf_table(tmp_path / "nmf.parquet")  # all seven columns in rows
    pq.write_table(table, tmp_path / "one_group.parquet", row_group_size=table.num_rows)
    reader = NMFReader(tmp_path / "one_group.parquet", PL94, h)
    bl = h.n_levels - 1
    for g, w in zip(reader.read(bl, 3, 9), ms.read(bl, 3, 9), strict=True):
        assert np.array_equal(g.values, w.values)
    # write chunk by chunk, then drop the last block-level row group: the
    # (geolevel, query) no longer covers its level
    with NMFWriter(tmp_path / "chunked.parquet") as w:
        for task in measure_tasks(levels, h, PL94, plan, RandomSource.seeded(3), target=200):
            w.write_chunk(run_measure_task(task))
    pf = pq.ParquetFile(tmp_path / "chunked.parquet")
    n = pf.metadata.num_row_groups
    assert n > 2 * len(plan)
    keep = [
        read_nmf_table(tmp_path / "chunked.parquet", row_groups=[i]) for i in range(n) if i != n - 1
    ]
    with pq.ParquetWriter(tmp_path / "gap.parquet", keep[0].schema) as w:
        for t in keep:
            w.write_table(t)
    with pytest.raises(InputError, match="cover"):
        NMFReader(tmp_path / "gap.parquet", PL94, h)


def test_chunked_mdf_expansion_equals_the_one_shot_expansion(measured):
    _, h, levels, _ = measured
    block = sp.csr_matrix(levels[-1])
    whole = mdf_person_columns(block, h, PL94)
    parts = list(iter_mdf_blocks(block, PL94, persons_per_chunk=17))
    assert len(parts) > 3
    for k, v in whole.items():
        assert np.array_equal(np.concatenate([p[k] for p in parts]), v), k


@pytest.mark.slow  # the suite's time (CI skips slow tests); run with -m slow
def test_small_chunks_give_the_same_release(measured, tmp_path, monkeypatch):
    """A run with tiny measurement and estimation chunks is byte-identical to a default run."""
    import censusdp.release.measure as measure_mod

    base = measured[0]
    budget = load_preset("pl94-2020")
    run_release(base / "cef", tmp_path / "a", ReleaseBudget(budget), ReleaseOptions(seed=5))

    monkeypatch.setattr(family_chunks, "__defaults__", (64,))
    monkeypatch.setattr(family_runs, "__defaults__", (64,))
    monkeypatch.setattr(measure_mod.measure_tasks, "__kwdefaults__", {"target": 64})
    run_release(base / "cef", tmp_path / "b", ReleaseBudget(budget), ReleaseOptions(seed=5))

    def parts(run: str) -> list:
        return sorted((tmp_path / run / "noisy_measurements.parquet").glob("part-*.parquet"))

    assert len(parts("b")) > len(parts("a"))
    assert sum(pq.read_metadata(p).num_rows for p in parts("b")) == sum(
        pq.read_metadata(p).num_rows for p in parts("a")
    )
    for name in ("mdf_persons.parquet", "mdf_persons.txt", "tables/P2.parquet"):
        assert tree_bytes(tmp_path / "a" / name) == tree_bytes(tmp_path / "b" / name)
    # re-estimating from the many-row-group NMF gives the same release again
    reestimate(tmp_path / "b", tmp_path / "c", budget=ReleaseBudget(budget))
    assert tree_bytes(tmp_path / "a" / "mdf_persons.parquet") == tree_bytes(
        tmp_path / "c" / "mdf_persons.parquet"
    )


def test_pool_release_is_byte_identical_and_manifest_records_memory(measured, tmp_path):
    base = measured[0]
    budget = load_preset("pl94-2020")
    a = run_release(
        base / "cef",
        tmp_path / "a",
        ReleaseBudget(budget),
        ReleaseOptions(seed=8),
        Execution(executor="inprocess"),
    )
    b = run_release(
        base / "cef",
        tmp_path / "b",
        ReleaseBudget(budget),
        ReleaseOptions(seed=8),
        Execution(workers=2),
    )
    assert a["executor"]["name"] == "in-process" and b["executor"]["name"] == "process-pool"
    assert a["peak_memory_mb"] > 0
    assert [lv["tasks"] for lv in a["estimation"]["persons"]] == [
        lv["tasks"] for lv in b["estimation"]["persons"]
    ]
    for name in ("mdf_persons.parquet", "tables/P1.parquet"):
        assert tree_bytes(tmp_path / "a" / name) == tree_bytes(tmp_path / "b" / name)
    assert a["executor"]["nmf_parts_by_driver"] and a["executor"]["nmf_part_writers"] == 1
    assert not b["executor"]["nmf_parts_by_driver"] and b["executor"]["nmf_part_writers"] >= 1
    # the pool's tasks read the input too (io/cef_parts.py), in the same parts
    assert a["executor"]["input_parts_by_driver"] and not b["executor"]["input_parts_by_driver"]
    assert a["executor"]["input_parts"] == b["executor"]["input_parts"] >= 1
    # the pool's tasks wrote the NMF's parts themselves: the same parts, the same bytes
    nmf_a, nmf_b = (tmp_path / r / "noisy_measurements.parquet" for r in ("a", "b"))
    names = sorted(p.name for p in nmf_a.iterdir())
    assert len(names) > 2 and "_parts.json" in names
    assert names == sorted(p.name for p in nmf_b.iterdir())
    for name in names:
        assert (nmf_a / name).read_bytes() == (nmf_b / name).read_bytes(), name


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kind": "threads"}, "--executor must be one of"),
        ({"workers": 0}, "--workers must be >= 1"),
        ({"kind": "pool", "spark_master": "local[2]"}, "--spark-master needs --executor spark"),
    ],
)
def test_make_executor_rejects_bad_options(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        make_executor(**kwargs)


def test_make_executor_kinds():
    assert isinstance(make_executor(1), InProcessExecutor)
    assert isinstance(make_executor(4, kind="inprocess"), InProcessExecutor)
    pool = make_executor(1, kind="pool")
    try:
        assert isinstance(pool, ProcessPoolExecutor)
        assert list(pool.map(abs, [-1, 2, -3])) == [1, 2, 3]
    finally:
        pool.close()


def test_nmf_reader_rejects_a_foreign_geography(measured, tmp_path):
    _, h, levels, plan = measured
    ms = measure(levels, h, PL94, plan, RandomSource.seeded(3))
    write_nmf(ms, tmp_path / "nmf.parquet")
    other = Hierarchy.from_blocks(np.asarray(block_codes(1, 1, 1, 2)))
    with pytest.raises(InputError, match="geograph"):
        NMFReader(tmp_path / "nmf.parquet", PL94, other)
    with pytest.raises(InputError, match="missing file"):
        NMFReader(tmp_path / "nope.parquet", PL94, h)
    pq.write_table(pa.table({"geolevel": ["US"]}), tmp_path / "bad.parquet")
    with pytest.raises(InputError, match="missing columns"):
        NMFReader(tmp_path / "bad.parquet", PL94, h)


def test_pl94_view_of_a_richer_schema_matches_its_mdf_columns():
    """Tables of a dhc-lite release come from ``hist @ _pl94_map``: same as the MDF's cells."""
    from censusdp.data.histograms import pl94_map as _pl94_map

    dhc = get_schema("dhc-lite")
    live = np.flatnonzero(~dhc.structural_zero_mask)
    cells = np.random.default_rng(4).choice(live, 500)
    h = Hierarchy.from_blocks(np.asarray(block_codes(1, 1, 1, 2)))
    rows = np.arange(cells.size) % 2
    hist = sp.csr_matrix((np.ones(cells.size, np.int64), (rows, cells)), shape=(2, dhc.size))
    cols = dhc.mdf_columns(cells)
    cols["geocode"] = h.blocks[rows]
    view = {k: cols[k] for k in ("geocode", "hhgq", "votingage", "hispanic", "cenrace")}
    want = person_histogram(view, h, "pl94")
    got = sp.csr_matrix(hist @ _pl94_map(dhc))
    assert (got != want).nnz == 0


@pytest.mark.slow
def test_dhc_lite_release_tables_match_its_mdf(tmp_path):
    """A richer schema (sex, age): the tables come from the pl94 view of its histogram."""
    persons, units = make_cef(np.random.default_rng(2), block_codes(1, 1, 2, 2), gq_rate=0.3)
    write_cef(tmp_path / "cef", persons, units)
    m = run_release(
        tmp_path / "cef",
        tmp_path / "run",
        ReleaseBudget(load_preset("dhc-lite-demo").scaled(rho=10**6)),
        ReleaseOptions(seed=1),
    )
    checks = m["validation"]["checks"]
    assert checks["tables_match_mdf"]["ok"] and checks["mdf_matches_histogram"]["ok"]
    mdf = pq.read_table(tmp_path / "run" / "mdf_persons.parquet")
    assert {"QSEX", "QAGE"} <= set(mdf.column_names)  # the full MDF2020 person layout
    p1 = pq.read_table(tmp_path / "run" / "tables" / "P1.parquet").to_pydict()
    top = [t for lv, t in zip(p1["geolevel"], p1["P1_001N"], strict=True) if lv == "US"]
    assert top == [mdf.num_rows] == [persons["person_id"].size]
    # P3 (18+) counts the adults of the MDF
    p3 = pq.read_table(tmp_path / "run" / "tables" / "P3.parquet").to_pydict()
    adults = sum(int(a) >= 18 for a in mdf.column("QAGE").to_pylist())
    assert [t for lv, t in zip(p3["geolevel"], p3["P3_001N"], strict=True) if lv == "US"] == [
        adults
    ]


def _nap(seconds: float) -> float:
    time.sleep(seconds)
    return time.monotonic()


@pytest.mark.parametrize("ahead", [0, pytest.param(64, marks=pytest.mark.slow)])
def test_pool_keeps_working_past_a_straggler(ahead):
    """Results stay in order; with ``ahead`` later tasks finish while the head still runs."""
    with ProcessPoolExecutor(2, window=2, ahead=ahead) as pool:
        list(pool.map(abs, [1, 2]))  # start the workers
        done = list(pool.map(_nap, [1.5] + [0.05] * 20))
    before_head = sum(t < done[0] for t in done[1:])
    if ahead == 0:
        assert before_head <= 1  # the window (2) holds the head and one more task
    else:
        assert before_head >= 5


@pytest.mark.parametrize("target", [64, 700, 1 << 22])
def test_nmf_parts_read_like_the_in_memory_set(measured, tmp_path, target):
    """Parts written one per task (any chunking), read back through the directory: every
    unit range of every level as the in-memory set has it; the index lists the parts;
    one level reads only its own parts; a missing or extra part is named."""
    from censusdp.io.atomic import sha256_of
    from censusdp.io.nmf_files import nmf_files, part_name, read_part_index, write_part_index
    from censusdp.io.nmf_levels import nmf_geolevels, read_geolevel
    from censusdp.io.nmf_write import write_nmf_part

    _, h, levels, plan = measured
    source = RandomSource.seeded(3)
    ms = measure(levels, h, PL94, plan, source)
    d = tmp_path / "nmf"
    d.mkdir()
    tasks = list(measure_tasks(levels, h, PL94, plan, source, target=target))
    recs = [write_nmf_part(run_measure_task(t), d / part_name(i)) for i, t in enumerate(tasks)]
    write_part_index(d, recs)
    assert [f.name for f in nmf_files(d)] == [part_name(i) for i in range(len(tasks))]
    # the hash the writer took as it wrote is the finished file's
    assert [r["sha256"] for r in recs] == [sha256_of(d / part_name(i)) for i in range(len(tasks))]
    index = read_part_index(d)
    assert index["rows"] == sum(m.values.size for m in ms)
    assert [(p["geolevel"], p["start"], p["stop"]) for p in index["parts"]] == [
        (t.geolevel, t.start, t.start + t.geocodes.size) for t in tasks
    ]
    reader = NMFReader(d, PL94, h)
    rng = np.random.default_rng(target)
    for level in range(h.n_levels):
        n = h.n_units(level)
        for a, b in [(0, n), *(sorted(rng.integers(0, n + 1, 2)) for _ in range(3))]:
            got, want = reader.read(level, int(a), int(b)), ms.read(level, int(a), int(b))
            assert [m.query for m in got] == [m.query for m in want]
            for g, w in zip(got, want, strict=True):
                assert np.array_equal(g.values, w.values) and g.variance == w.variance
    assert nmf_geolevels(d) == [lv.name for lv in h.geolevels.levels]
    county = read_geolevel(d, "County", columns=["geocode", "value"])
    assert county.num_rows == sum(m.values.size for m in ms.at_level("County"))
    (d / part_name(0)).rename(d / "part-99999.parquet")
    with pytest.raises(InputError, match=r"_parts.json: lists other parts.*part-"):
        read_part_index(d)
    with pytest.raises(InputError, match="without noisy measurement parts"):
        nmf_files(tmp_path)


def test_the_total_time_counts_the_self_check(measured, tmp_path, monkeypatch):
    """The manifest's total (the run's summary line) is the run's whole time, its
    self-check included: it was not, and a full Vermont DHC said 2,276 s of its 2,697."""
    import censusdp.release.pipeline as pipeline

    real = pipeline.validate_run

    def slow_check(*args, **kwargs):
        time.sleep(3.0)  # a self-check longer than the whole rest of this small run
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "validate_run", slow_check)
    t0 = time.perf_counter()
    m = run_release(
        measured[0] / "cef",
        tmp_path / "a",
        ReleaseBudget(load_preset("pl94-2020")),
        ReleaseOptions(seed=8),
        Execution(executor="inprocess"),
    )
    elapsed = time.perf_counter() - t0
    t = m["timings"]
    assert t["validate_files"] >= 3.0
    assert elapsed - t["total"] < 2.0  # without the self-check it would miss 3 s
    assert json.loads((tmp_path / "a" / "manifest.json").read_text())["timings"] == t
