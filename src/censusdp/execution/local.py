"""Executors on this machine: in the calling process, or on a pool of worker processes."""

from __future__ import annotations

import collections
import concurrent.futures as cf
import ctypes
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from censusdp.errors import ConfigError
from censusdp.execution.base import single_thread_env

__all__ = ["InProcessExecutor", "ProcessPoolExecutor"]


_END = object()


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Pool worker start-up: on Linux, ask the kernel to kill this worker when the parent
    dies (even by SIGKILL), so no worker outlives an interrupted run."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - exotic libc
        return
    if os.getppid() == 1:  # the parent died before the request took effect
        os._exit(1)


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
    thread_safe = True
    """:meth:`map` may run in two threads at once: each call's tasks queue beside the
    other's on the same workers (a run's NMF check beside its estimation)."""

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
            max_workers=workers,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_die_with_parent,
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
