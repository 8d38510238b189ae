"""The Spark executor: a local Spark run is byte-identical to an in-process run.

Skipped unless pyspark (the ``spark`` extra) and a Java runtime are available. The whole
module shares one ``local[2]`` SparkContext; each release started here finds it active
and uses it. Noise is keyed per (geolevel, query, geounit) (``censusdp.privacy.randomness``;
Kazan & Reiter (2022) sec. 2.1 for the mechanism), so the executor cannot change the release.
"""

from __future__ import annotations

import operator
import shutil

import numpy as np
import pyarrow.parquet as pq
import pytest

pytest.importorskip("pyspark")
if shutil.which("java") is None:  # pragma: no cover - depends on the machine
    pytest.skip("Spark needs a Java runtime (java not on PATH)", allow_module_level=True)

from censusdp.data.geography import Hierarchy  # noqa: E402
from censusdp.data.histograms import person_histogram  # noqa: E402
from censusdp.data.schema import get_schema  # noqa: E402
from censusdp.execution import InProcessExecutor, make_executor  # noqa: E402
from censusdp.execution.spark import SparkExecutor  # noqa: E402
from censusdp.io.budget_files import load_preset  # noqa: E402
from censusdp.io.cef import read_cef  # noqa: E402
from censusdp.privacy.randomness import RandomSource  # noqa: E402
from censusdp.privacy.release_budget import ReleaseBudget  # noqa: E402
from censusdp.release.measure import measure_tasks, run_measure_task  # noqa: E402
from censusdp.release.options import Execution, ReleaseOptions  # noqa: E402
from censusdp.release.pipeline import reestimate, run_release  # noqa: E402
from synth import block_codes, make_cef, tree_bytes, write_cef  # noqa: E402

pytestmark = [
    pytest.mark.spark,
    # PySpark's encrypted transfer path leaves sockets for the garbage collector
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

RELEASE_FILES = (
    "noisy_measurements.parquet",
    "noisy_measurements_units.parquet",
    "invariants.parquet",
    "invariant_totals.parquet",
    "mdf_persons.parquet",
    "mdf_units.parquet",
    "mdf_persons.txt",
    "mdf_units.txt",
    "tables/P1.parquet",
    "tables/P2.parquet",
    "tables/P3.parquet",
    "tables/P4.parquet",
    "tables/P5.parquet",
    "tables/H1.parquet",
)


@pytest.fixture(scope="module")
def spark():
    ex = SparkExecutor("local[2]", window=4)
    yield ex
    ex.close()


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    base = tmp_path_factory.mktemp("spark_state")
    persons, units = make_cef(np.random.default_rng(5), block_codes(2, 2, 2, 4), gq_rate=0.4)
    write_cef(base / "cef", persons, units)
    return base


def _same_bytes(a, b):
    for name in RELEASE_FILES:
        pa_, pb = a / name, b / name
        if pa_.is_dir():  # an NMF or MDF file written as part files by the tasks
            names = sorted(p.name for p in pa_.iterdir())
            assert "_parts.json" in names and len(names) >= 2, name
            assert names == sorted(p.name for p in pb.iterdir()), name
            for part in names:
                assert (pa_ / part).read_bytes() == (pb / part).read_bytes(), f"{name}/{part}"
        else:
            assert pa_.read_bytes() == pb.read_bytes(), name


def _budget():
    return ReleaseBudget(load_preset("pl94-2020"), load_preset("pl94-2020-units"))


def _release(state, out, *, seed, executor):
    return run_release(
        state / "cef", out, _budget(), ReleaseOptions(seed=seed), Execution(executor)
    )


def test_map_keeps_task_order_across_windows(spark):
    # a function the Python workers can import (test modules are not on their path)
    jobs = spark.jobs
    got = list(spark.map(str, range(37)))
    assert got == [str(i) for i in range(37)]
    assert spark.jobs - jobs >= 10  # 37 tasks in windows of 4: really several Spark jobs


def test_spark_release_is_byte_identical_to_in_process(state, spark):
    local = _release(state, state / "local", seed=3, executor="inprocess")
    on_spark = _release(state, state / "spark", seed=3, executor="spark")
    assert on_spark["executor"]["name"] == "spark"
    assert on_spark["executor"]["master"] == "local[2]"
    assert local["executor"]["name"] == "in-process"
    assert on_spark["validation"]["ok"]
    # Spark's Python workers wrote the NMF's and the MDF's parts, not the driver
    assert not on_spark["executor"]["nmf_parts_by_driver"]
    assert not on_spark["executor"]["mdf_parts_by_driver"]
    _same_bytes(state / "local", state / "spark")


def test_spark_reestimate_matches_in_process(state, spark):
    if not (state / "local").exists():
        _release(state, state / "local", seed=3, executor="inprocess")
    reestimate(
        state / "local", state / "again_spark", execution=Execution("spark"), budget=_budget()
    )
    for name in (
        "mdf_persons.parquet",
        "mdf_units.parquet",
        "mdf_persons.txt",
        "tables/P2.parquet",
    ):
        assert tree_bytes(state / "local" / name) == tree_bytes(state / "again_spark" / name)


def test_secure_mode_noise_comes_from_each_units_own_stream(state, spark):
    """A secure source's tasks give the same noise on Spark as in-process: it is keyed by
    (geolevel, query, geocode) under the secret key, not drawn in execution order."""
    cef = read_cef(state / "cef")
    h = Hierarchy.from_blocks(cef.units["geocode"])
    schema = get_schema("pl94")
    levels = h.aggregate(person_histogram(cef.persons, h, schema))
    plan = [(m.geolevel, m.query, m.mechanism) for m in load_preset("pl94-2020").measurements()]
    source = RandomSource.secure()
    tasks = list(measure_tasks(levels, h, schema, plan, source, target=500))
    assert len(tasks) > 4
    a = list(InProcessExecutor().map(run_measure_task, tasks))
    b = list(spark.map(run_measure_task, tasks))
    for ca, cb in zip(a, b, strict=True):
        assert (ca.geolevel, ca.start, ca.stop) == (cb.geolevel, cb.start, cb.stop)
        for qa, qb in zip(ca.queries, cb.queries, strict=True):
            assert np.array_equal(qa.values, qb.values)
    # and a second secure source gives different noise
    other = list(measure_tasks(levels, h, schema, plan, RandomSource.secure(), target=500))
    c = run_measure_task(other[-1])
    assert not np.array_equal(c.queries[-1].values, a[-1].queries[-1].values)


def test_secure_task_data_is_never_written_to_disk_unencrypted(spark, monkeypatch):
    """Tasks carry a secure source's secret key. Without Spark IO encryption PySpark
    pickles a parallelized batch into a temporary file in the Spark local directory;
    the executor turns encryption on, so it goes through an encrypted socket instead."""
    import pyspark.core.context as ctx

    assert spark.encrypted and spark.describe()["io_encryption"] is True
    made = []
    real = ctx.NamedTemporaryFile

    def spy(*args, **kwargs):
        made.append(kwargs.get("dir"))
        return real(*args, **kwargs)

    monkeypatch.setattr(ctx, "NamedTemporaryFile", spy)
    source = RandomSource.secure()
    keys = [source.child("t", i) for i in range(6)]
    draw = operator.methodcaller("uint64", 2)  # importable on the workers
    out = [a.tolist() for a in spark.map(draw, keys)]
    assert out == [draw(k).tolist() for k in keys] and not made


def test_secure_spark_release_is_valid(state, spark):
    m = _release(state, state / "secure", seed=None, executor="spark")
    assert m["seed"] is None and m["randomness"]["mode"] == "secure"
    assert m["validation"]["ok"]
    a = pq.read_table(state / "secure" / "noisy_measurements.parquet").column("value")
    if (state / "local").exists():
        b = pq.read_table(state / "local" / "noisy_measurements.parquet").column("value")
        assert not a.equals(b)


def test_make_executor_spark_uses_the_active_context(spark):
    ex = make_executor(kind="spark", spark_master="local[2]")
    assert ex.sc is spark.sc
    ex.close()  # does not stop a context it did not start
    assert list(spark.map(abs, [-3])) == [3]
