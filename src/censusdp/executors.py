"""Executors run independent, picklable tasks and return their results in order.

The TopDown driver hands an executor the tasks of one geolevel (one per parent with its
children) and a pure function; the executor decides where they run. Implementations:

* :class:`InProcessExecutor`: a plain loop (the default, and the reference).
* :class:`ProcessPoolExecutor`: a pool of worker processes (``--workers K``); tasks are
  sent in chunks and results come back in submission order, so the output is identical
  to the in-process run.

* :class:`censusdp.executors_spark.SparkExecutor`: the tasks of a level as Spark jobs
  (``--executor spark``; needs the ``spark`` extra, ``pip install censusdp[spark]``).

Executors hold no global state that tasks rely on, and tasks never rely on shared
memory. Tasks are consumed lazily, a window at a time, so a level with hundreds of
thousands of tasks is never materialised in memory at once; results come back in task
order, so every executor produces byte-identical releases (noise is keyed per geounit,
not drawn in execution order).
"""

from __future__ import annotations

import collections
import concurrent.futures as cf
import multiprocessing
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from censusdp.errors import ConfigError

__all__ = [
    "EXECUTOR_CHOICES",
    "SINGLE_THREAD_ENV",
    "Executor",
    "InProcessExecutor",
    "ProcessPoolExecutor",
    "make_executor",
    "single_thread_env",
]

EXECUTOR_CHOICES = ("auto", "inprocess", "pool", "spark")

SINGLE_THREAD_ENV = {
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
"""Worker environment: one BLAS thread per worker. Several workers each running a
multi-threaded BLAS oversubscribe the cores (docs/estimation.md measured a 98-cell
``cho_solve`` at 38 ms instead of 0.1 ms on a busy 2-core machine)."""


def single_thread_env() -> dict[str, str]:
    """:data:`SINGLE_THREAD_ENV`, except where the user already set a variable."""
    return {k: os.environ.get(k, v) for k, v in SINGLE_THREAD_ENV.items()}


class Executor(Protocol):
    """Anything that maps a function over tasks and yields results in task order."""

    name: str

    def map(
        self, fn: Callable[[Any], Any], tasks: Iterable[Any], *, ahead: int | None = None
    ) -> Iterator[Any]:
        """Apply ``fn`` to each task; yield results in the order of ``tasks``.

        ``ahead`` bounds how many finished results may wait behind an unfinished
        earlier task (an executor may ignore it; 0 for large results).
        """
        ...


_END = object()


class InProcessExecutor:
    """Run every task in the calling process, one after another."""

    name = "in-process"

    def map(
        self, fn: Callable[[Any], Any], tasks: Iterable[Any], *, ahead: int | None = None
    ) -> Iterator[Any]:
        """Apply ``fn`` to each task in order (``ahead`` is accepted and ignored)."""
        return map(fn, tasks)

    def close(self) -> None:
        """Nothing to release."""

    def describe(self) -> dict:
        """For the manifest."""
        return {"name": self.name, "workers": 1}


class ProcessPoolExecutor:
    """Run tasks on ``workers`` processes (``spawn`` start method: no inherited state).

    At most ``window`` tasks run at once. Results are handed back in task order, but a
    slow task at the head does not stall the pool: up to ``ahead`` later tasks may
    finish and wait (buffered) behind it while new ones keep being submitted. So the
    workers stay busy past a straggler (a block group with hundreds of blocks), and
    neither the pending tasks nor the results of a level with hundreds of thousands of
    tasks ever pile up in memory: at most ``window + ahead`` tasks are in flight.
    """

    name = "process-pool"

    def __init__(self, workers: int, *, window: int | None = None, ahead: int = 256) -> None:
        if workers < 1:
            raise ConfigError(f"workers must be >= 1, got {workers}")
        self.workers = workers
        self.window = int(window) if window else 4 * workers + 2
        if self.window < 1:
            raise ConfigError(f"window must be >= 1, got {window}")
        if ahead < 0:
            raise ConfigError(f"ahead must be >= 0, got {ahead}")
        self.ahead = int(ahead)
        # spawned workers inherit the environment: one BLAS thread each (the
        # variables only matter to processes that have not loaded BLAS yet)
        os.environ.update(single_thread_env())
        self._pool = cf.ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn")
        )

    def map(
        self, fn: Callable[[Any], Any], tasks: Iterable[Any], *, ahead: int | None = None
    ) -> Iterator[Any]:
        """Apply ``fn`` to each task on the pool; results in task order.

        Args:
            fn: a module-level (picklable) function.
            tasks: the tasks, consumed lazily.
            ahead: how many finished results may wait behind an unfinished head task
                (default: the executor's ``ahead``; use 0 for large results).
        """
        limit = self.window + (self.ahead if ahead is None else max(0, int(ahead)))
        it = iter(tasks)
        order: collections.deque[cf.Future] = collections.deque()
        running: set[cf.Future] = set()
        exhausted = False
        while True:
            running = {f for f in running if not f.done()}
            while not exhausted and len(running) < self.window and len(order) < limit:
                nxt = next(it, _END)
                if nxt is _END:
                    exhausted = True
                    break
                fut = self._pool.submit(fn, nxt)
                order.append(fut)
                running.add(fut)
            if not order:
                return
            if order[0].done():
                yield order.popleft().result()
                continue
            cf.wait(running, return_when=cf.FIRST_COMPLETED)

    def describe(self) -> dict:
        """For the manifest."""
        return {"name": self.name, "workers": self.workers}

    def close(self) -> None:
        """Shut the worker processes down."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ProcessPoolExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
        from censusdp.executors_spark import SparkExecutor

        return SparkExecutor(spark_master)
    if spark_master is not None:
        raise ConfigError(f"--spark-master needs --executor spark, got --executor {kind}")
    if kind == "inprocess" or (kind == "auto" and workers == 1):
        return InProcessExecutor()
    return ProcessPoolExecutor(workers)
