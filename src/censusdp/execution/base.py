"""The executor protocol and the worker environment every executor shares."""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, Protocol, TypeVar

__all__ = [
    "EXECUTOR_CHOICES",
    "KEPT_FREE_BYTES",
    "SINGLE_THREAD_ENV",
    "Beside",
    "Executor",
    "keep_freed_memory",
    "prefer_single_thread_blas",
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


def prefer_single_thread_blas() -> None:
    """Put :data:`SINGLE_THREAD_ENV` into this process's environment where the user set
    nothing; effective only before NumPy loads its BLAS (the CLI's and the test suite's
    first step: the engine parallelises over tasks, not inside small solves)."""
    for k, v in SINGLE_THREAD_ENV.items():
        os.environ.setdefault(k, v)


KEPT_FREE_BYTES = 1 << 30
"""Blocks of up to this size that a task process frees stay in its heap for the next
task (:func:`keep_freed_memory`)."""

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_kept: list[bool] = []


def keep_freed_memory() -> None:
    """In this process, let glibc keep freed blocks of up to :data:`KEPT_FREE_BYTES` for
    reuse instead of returning them to the system (``mallopt``; once per process, a no-op
    elsewhere than on Linux with glibc).

    By default glibc maps every allocation of more than 32 MB afresh and unmaps it when
    freed, so a task that fills arrays of 128 MB pays the kernel's page faults and
    zeroing on every one of them: one process measuring ``dhc-2020`` blocks of Vermont
    x0.1 in tasks of 2^24 noisy values spent 24.0 CPU ns a value, 4.8 of them in the
    kernel, and 19.1 and 1.0 keeping its pages (``benchmarks/bench_measure_chunks.py``
    compares the tasks of before and now as a pool runs them). A process that runs such
    tasks one after another reuses the same pages instead; its resident memory stays at
    the largest task's.
    """
    if _kept or not sys.platform.startswith("linux"):
        return
    _kept.append(True)
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, KEPT_FREE_BYTES)
        libc.mallopt(_M_TRIM_THRESHOLD, KEPT_FREE_BYTES)
    except (OSError, AttributeError):  # pragma: no cover - a libc without mallopt
        return


def single_thread_env() -> dict[str, str]:
    """:data:`SINGLE_THREAD_ENV`, except where the user already set a variable."""
    return {k: os.environ.get(k, v) for k, v in SINGLE_THREAD_ENV.items()}


class Executor(Protocol):
    """Anything that maps a function over tasks and yields results in task order.

    An executor whose ``thread_safe`` attribute is true lets :meth:`map` run in two
    threads at once (their tasks share its workers); without it, one map at a time.
    """

    name: str

    def map(
        self, fn: Callable[[Any], Any], tasks: Iterable[Any], *, ahead: int | None = None
    ) -> Iterator[Any]:
        """Apply ``fn`` to each task; yield results in the order of ``tasks``.

        ``ahead`` bounds how many finished results may wait behind an unfinished
        earlier task (an executor may ignore it; 0 for large results).
        """
        ...


T = TypeVar("T")


class Beside(Generic[T]):
    """``fn()`` run in a thread of the driver while the caller goes on with its own work,
    when ``executor`` takes maps from two threads at once (``thread_safe``): both
    streams of tasks then share its workers, and each fills the cores the other leaves
    idle. On any other executor ``fn`` runs when :meth:`result` is first asked, after
    the caller's work, as if the two were called one after the other.

    ``fn``'s exception is raised by :meth:`result`, unchanged.
    """

    def __init__(self, fn: Callable[[], T], executor: Any, name: str) -> None:
        self._fn = fn
        self._out: list[T] = []
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if self.together(executor):
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()

    @staticmethod
    def together(executor: Any) -> bool:
        """Whether work handed to :class:`Beside` with ``executor`` runs beside the
        caller's (the executor is ``thread_safe``)."""
        return bool(getattr(executor, "thread_safe", False))

    @property
    def concurrent(self) -> bool:
        """Whether ``fn`` runs beside the caller (a thread of its own)."""
        return self._thread is not None

    def _run(self) -> None:
        try:
            self._out.append(self._fn())
        except BaseException as exc:  # noqa: BLE001 - raised again by result()
            self._error = exc

    def result(self) -> T:
        """``fn()``'s result (waiting for its thread; or calling it now)."""
        if self._thread is None:
            if not self._out:
                self._out.append(self._fn())
            return self._out[0]
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._out[0]
