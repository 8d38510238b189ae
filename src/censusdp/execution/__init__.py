"""Where tasks run. Executors run independent, picklable tasks and return their results in order.

The TopDown driver hands an executor the tasks of one geolevel (one per parent with its
children) and a pure function; the executor decides where they run. Implementations:

* :class:`InProcessExecutor`: a plain loop (the default, and the reference).
* :class:`ProcessPoolExecutor`: a pool of worker processes (``--workers K``); tasks are
  sent in chunks and results come back in submission order, so the output is identical
  to the in-process run.

* :class:`censusdp.execution.spark.SparkExecutor`: the tasks of a level as Spark jobs
  (``--executor spark``; needs the ``spark`` extra, ``pip install censusdp[spark]``).

Executors hold no global state that tasks rely on, and tasks never rely on shared
memory. Tasks are consumed lazily, a window at a time, so a level with hundreds of
thousands of tasks is never materialised in memory at once; results come back in task
order, so every executor produces byte-identical releases (noise is keyed per geounit,
not drawn in execution order).
"""

from __future__ import annotations

from typing import Any

from censusdp.errors import ConfigError
from censusdp.execution.base import EXECUTOR_CHOICES, SINGLE_THREAD_ENV, Executor, single_thread_env
from censusdp.execution.local import InProcessExecutor, ProcessPoolExecutor

__all__ = [
    "EXECUTOR_CHOICES",
    "SINGLE_THREAD_ENV",
    "Executor",
    "InProcessExecutor",
    "ProcessPoolExecutor",
    "make_executor",
    "single_thread_env",
]


def make_executor(workers: int = 1, *, kind: str = "auto", spark_master: str | None = None) -> Any:
    """An executor by kind.

    Args:
        workers: worker processes for ``"pool"`` (and for ``"auto"``: in-process when
            1, a pool otherwise); for ``"spark"``, the number of partitions per core
            is chosen by Spark and ``workers`` is ignored.
        kind: one of :data:`EXECUTOR_CHOICES`.
        spark_master: Spark master URL; ``None``: the one ``spark-submit`` set, else
            ``local[*]``.

    Raises:
        ConfigError: for an unknown kind or ``workers < 1``; for ``"spark"`` when
            pyspark is not installed.
    """
    if kind not in EXECUTOR_CHOICES:
        raise ConfigError(f"--executor must be one of {EXECUTOR_CHOICES}, got {kind!r}")
    if workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")
    if kind == "spark":
        from censusdp.execution.spark import SparkExecutor

        return SparkExecutor(spark_master)
    if spark_master is not None:
        raise ConfigError(f"--spark-master needs --executor spark, got --executor {kind}")
    if kind == "inprocess" or (kind == "auto" and workers == 1):
        return InProcessExecutor()
    return ProcessPoolExecutor(workers)
