"""Executors run independent, picklable tasks and return their results in order.

The TopDown driver hands an executor the tasks of one geolevel (one per parent with its
children) and a pure function; the executor decides where they run. Implementations:

* :class:`InProcessExecutor`: a plain loop (the default, and the reference).
* :class:`ProcessPoolExecutor`: a pool of worker processes (``--workers K``); tasks are
  sent in chunks and results come back in submission order, so the output is identical
  to the in-process run.

A distributed executor (Spark) implements the same ``map`` contract. Executors hold no
global state that tasks rely on, and tasks never rely on shared memory.
"""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import multiprocessing
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from censusdp.errors import ConfigError

__all__ = ["Executor", "InProcessExecutor", "ProcessPoolExecutor", "make_executor"]


class Executor(Protocol):
    """Anything that maps a function over tasks and yields results in task order."""

    name: str

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Any]:
        """Apply ``fn`` to each task; yield results in the order of ``tasks``."""
        ...


class InProcessExecutor:
    """Run every task in the calling process, one after another."""

    name = "in-process"

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Any]:
        """Apply ``fn`` to each task in order."""
        return map(fn, tasks)

    def close(self) -> None:
        """Nothing to release."""


class ProcessPoolExecutor:
    """Run tasks on ``workers`` processes (``spawn`` start method: no inherited state).

    Tasks are submitted in batches of ``window`` so that a level with many tasks is
    never materialised in memory all at once.
    """

    name = "process-pool"

    def __init__(self, workers: int, *, window: int = 256) -> None:
        if workers < 1:
            raise ConfigError(f"workers must be >= 1, got {workers}")
        self.workers = workers
        self.window = window
        self._pool = cf.ProcessPoolExecutor(
            max_workers=workers, mp_context=multiprocessing.get_context("spawn")
        )

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any]) -> Iterator[Any]:
        """Apply ``fn`` to each task on the pool; results in task order."""
        it = iter(tasks)
        while True:
            batch = list(itertools.islice(it, self.window))
            if not batch:
                return
            chunk = max(1, len(batch) // (4 * self.workers))
            yield from self._pool.map(fn, batch, chunksize=chunk)

    def close(self) -> None:
        """Shut the worker processes down."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> ProcessPoolExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def make_executor(workers: int = 1) -> InProcessExecutor | ProcessPoolExecutor:
    """In-process for ``workers == 1``, otherwise a process pool of that size."""
    if workers < 1:
        raise ConfigError(f"--workers must be >= 1, got {workers}")
    return InProcessExecutor() if workers == 1 else ProcessPoolExecutor(workers)
