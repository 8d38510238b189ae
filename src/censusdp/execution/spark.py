"""A Spark executor: the measurement and estimation tasks of each level as Spark jobs.

``censusdp run --executor spark [--spark-master URL]`` hands every level's tasks to
Apache Spark (pyspark, the ``spark`` extra: ``pip install censusdp[spark]``; Java 17).
The work units are the same picklable tasks the other executors run:

* measurement: one :class:`~censusdp.release.measure.MeasureTask` per chunk of whole families
  (the exact histogram rows of those units, the mechanisms and the parent random
  source); each unit's noise comes from its own stream, its window of
  ``source.unit_streams(geolevel, query, codes=geocodes)``, a CSPRNG stream in secure mode
  (:mod:`censusdp.privacy.randomness`), so where and in which order a task runs does not matter;
* estimation: one :class:`~censusdp.release.topdown.tasks.Task` per parent with its children
  (the tasks of a level are grouped by parent geocode, top level first; level ``l + 1``
  starts when level ``l`` is complete, because its parents' counts come from it).

Tasks are taken from the driver's lazy task stream a window at a time, distributed with
``SparkContext.parallelize`` (a partition holds a few consecutive parents), and the
results are collected in task order. Two jobs run at once, and finished jobs may wait
behind a straggling one, so the cluster keeps working while the driver folds results
into the level histogram and reads the next chunk of measurements. Because results come back in task
order and noise is keyed per geounit, a Spark run is byte-identical to an in-process run
with the same seed (tested in ``tests/execution/spark``).

The executors write the NMF's part files themselves (:mod:`censusdp.release.parts`) and
check them in the run's self-check; the driver still reads the input, writes the MDF
(Parquet) and holds one level's sparse histogram. On a cluster, ship the package to the
executors (a wheel or a packed virtual environment; see ``docs/scaling.md``), and put
the run's output directory on a file system they all mount.

Logs: when this executor starts Spark's JVM itself, the JVM's output (Spark's log4j
lines, its start-up notices, the Python workers' stderr) is read line by line into the
``censusdp.spark`` logger (:func:`censusdp.progress.log_lines`) instead of the terminal:
Spark's ERROR and FATAL lines at WARNING, everything else at DEBUG (``censusdp -v``
shows it). py4j logs through :mod:`logging` already (logger ``py4j``). PySpark 4.3 warns
(FutureWarning) that it does not fully support pandas >= 3 whenever its py4j converters
load; censusdp's tasks use no pandas on Spark, so that one warning is silenced while the
context starts.
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import itertools
import logging
import os
import re
import secrets
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from censusdp.errors import ConfigError
from censusdp.execution.base import single_thread_env
from censusdp.progress import log_lines

__all__ = ["SparkExecutor", "spark_available", "spark_log_level"]

_LOG4J = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ")
_TROUBLE = re.compile(r"(Error|Exception)\b|\berror:|^Traceback ")

_MASTER = re.compile(
    r"(local(\[(\*|[1-9][0-9]*)(,[1-9][0-9]*)?\])?"
    r"|local-cluster\[[1-9][0-9]*,[1-9][0-9]*,[1-9][0-9]*\]"
    r"|yarn|(spark|mesos|k8s)://[^\s]+)"
)
"""The master URLs Spark accepts (its "Master URLs" documentation), checked before a JVM
is started for one."""


def spark_log_level(line: str) -> int:
    """The :mod:`logging` level of one line of Spark's JVM output.

    log4j lines keep their meaning for a censusdp user: ERROR and FATAL become WARNING
    (a task that fails also fails the run, with its own message), WARN and below DEBUG
    (on a local run they are about the machine: loopback address, native Hadoop
    libraries). Other lines are DEBUG unless they look like an error or a traceback.
    """
    m = _LOG4J.match(line)
    if m:
        return logging.WARNING if m.group(1) in ("ERROR", "FATAL") else logging.DEBUG
    return logging.WARNING if _TROUBLE.search(line) else logging.DEBUG


def _start_context(sconf: Any) -> Any:
    """A new SparkContext whose JVM output goes to the ``censusdp.spark`` logger."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    with warnings.catch_warnings():
        # PySpark's one warning about pandas >= 3 (raised when its py4j converters load)
        warnings.filterwarnings(
            "ignore",
            message=r"PySpark does not yet fully support pandas >= 3",
            category=FutureWarning,
        )
        if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:  # noqa: SLF001
            return SparkContext.getOrCreate(sconf)  # a JVM we did not start: its output is its own
        gateway = launch_gateway(
            sconf, popen_kwargs={"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}
        )
        log_lines(gateway.proc.stdout, "censusdp.spark", spark_log_level)
        return SparkContext(conf=sconf, gateway=gateway)


def spark_available() -> bool:
    """True when pyspark can be imported (Java is checked only when a context starts)."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return False
    return True


class SparkExecutor:
    """Run tasks as Spark jobs, a window of tasks per job, results in task order.

    Args:
        master: Spark master URL (``local[*]``, ``local[2]``, ``spark://host:7077``,
            ``yarn``, ``k8s://...``). ``None``: the master ``spark-submit`` configured,
            else ``local[*]``. Ignored when a SparkContext is already running: that
            context is used and left running.
        app_name: the Spark application name.
        window: tasks per Spark job; default ``8 x defaultParallelism`` (at least 16).
        tasks_per_partition: consecutive tasks grouped in one Spark task.
        ahead: finished tasks that may wait behind an unfinished earlier job.
        conf: extra Spark configuration pairs.

    Raises:
        ConfigError: if pyspark is not installed.
    """

    name = "spark"

    def __init__(
        self,
        master: str | None = None,
        *,
        app_name: str = "censusdp",
        window: int | None = None,
        tasks_per_partition: int = 2,
        ahead: int = 256,
        conf: dict[str, str] | None = None,
    ) -> None:
        if master is not None and not _MASTER.fullmatch(master):
            raise ConfigError(
                f"--spark-master must be a Spark master URL (local, local[N], local[*], "
                f"spark://HOST:PORT, yarn, k8s://URL, ...), got {master!r}"
            )
        try:
            from pyspark import SparkConf, SparkContext
        except ImportError as exc:
            raise ConfigError(
                "--executor spark needs pyspark: pip install 'censusdp[spark]' "
                f"(and Java 17); import failed: {exc}"
            ) from None
        if tasks_per_partition < 1:
            raise ConfigError(f"tasks_per_partition must be >= 1, got {tasks_per_partition}")
        active = SparkContext._active_spark_context  # noqa: SLF001 - the documented way to probe
        self._owns = active is None
        if active is None:
            sconf = SparkConf().setAppName(app_name)
            # Under spark-submit the JVM already holds spark.master; keep it unless a
            # master was given explicitly.
            submitted = "PYSPARK_GATEWAY_PORT" in os.environ
            if master is not None or not submitted:
                sconf.setMaster(master or "local[*]")
            master = master or ("" if submitted else "local[*]")
            defaults = {
                # Task data and broadcasts (which hold the secret noise keys of a
                # secure release) never touch disk unencrypted: PySpark sends them
                # through an encrypted socket instead of a temporary file, and Spark
                # encrypts its local blocks with a per-application key held in memory.
                "spark.io.encryption.enabled": "true",
                "spark.io.encryption.keySizeBits": "256",
                "spark.ui.enabled": "false",
                "spark.ui.showConsoleProgress": "false",
                "spark.python.worker.reuse": "true",
                "spark.task.maxFailures": "1" if master.startswith("local") else "4",
            }
            for k, v in single_thread_env().items():
                defaults[f"spark.executorEnv.{k}"] = v
            if master.startswith("local"):
                # both ends are ours: authenticate and encrypt RPC with a fresh secret
                # too (on a cluster, configure spark.authenticate and
                # spark.network.crypto.enabled for it: docs/scaling.md)
                defaults["spark.authenticate"] = "true"
                defaults["spark.authenticate.secret"] = secrets.token_hex(32)
                defaults["spark.network.crypto.enabled"] = "true"
                # workers run the driver's interpreter, so they import this censusdp,
                # and inherit the driver's environment (one BLAS thread each)
                defaults["spark.pyspark.python"] = sys.executable
                defaults["spark.pyspark.driver.python"] = sys.executable
                os.environ.update(single_thread_env())
            for k, v in {**defaults, **(conf or {})}.items():
                sconf.set(k, v)
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            try:
                self.sc = _start_context(sconf)
            except Exception as exc:  # the JVM's refusal (a py4j or PySpark error)
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise ConfigError(
                    f"Spark did not start with --spark-master {master!r}: {first}"
                ) from None
            verbose = logging.getLogger("censusdp.spark").isEnabledFor(logging.DEBUG)
            self.sc.setLogLevel("WARN" if verbose else "ERROR")
        else:
            self.sc = active
        self.encrypted = bool(getattr(self.sc, "_encryption_enabled", False))
        self.parallelism = max(1, int(self.sc.defaultParallelism))
        self.window = int(window) if window else max(16, 8 * self.parallelism)
        self.tasks_per_partition = tasks_per_partition
        self.ahead = max(0, int(ahead))
        self._threads = cf.ThreadPoolExecutor(max_workers=2, thread_name_prefix="censusdp-spark")
        self.jobs = 0

    def _run(self, fn: Callable[[Any], Any], batch: list[Any]) -> list[Any]:
        slices = max(1, min(len(batch), -(-len(batch) // self.tasks_per_partition)))
        self.jobs += 1
        return self.sc.parallelize(batch, slices).map(fn).collect()

    def map(
        self, fn: Callable[[Any], Any], tasks: Iterable[Any], *, ahead: int | None = None
    ) -> Iterator[Any]:
        """Apply ``fn`` to each task on the cluster; yield results in task order.

        Two Spark jobs (windows of tasks) run at once; up to ``ahead`` tasks' worth of
        finished jobs may wait behind an unfinished earlier one (so a straggling task
        does not idle the cluster). ``fn`` must be a module-level function (it is
        pickled to the executors) and the tasks picklable.
        """
        extra = (self.ahead if ahead is None else max(0, int(ahead))) // self.window
        it = iter(tasks)
        order: collections.deque[cf.Future] = collections.deque()
        exhausted = False
        while True:
            running = [f for f in order if not f.done()]
            while not exhausted and len(running) < 2 and len(order) < 2 + extra:
                batch = list(itertools.islice(it, self.window))
                if not batch:
                    exhausted = True
                    break
                fut = self._threads.submit(self._run, fn, batch)
                order.append(fut)
                running.append(fut)
            if not order:
                return
            if order[0].done():
                yield from order.popleft().result()
                continue
            cf.wait(running, return_when=cf.FIRST_COMPLETED)

    def describe(self) -> dict:
        """For the manifest: master, parallelism and window."""
        return {
            "name": self.name,
            "master": self.sc.master,
            "default_parallelism": self.parallelism,
            "window": self.window,
            "tasks_per_partition": self.tasks_per_partition,
            "spark_version": self.sc.version,
            "io_encryption": self.encrypted,
        }

    def close(self) -> None:
        """Stop the SparkContext if this executor started it."""
        self._threads.shutdown(wait=True, cancel_futures=True)
        if self._owns:
            self.sc.stop()

    def __enter__(self) -> SparkExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
