"""The process pool gives a lone task the idle workers' cores as BLAS threads."""

from __future__ import annotations

import numpy as np  # noqa: F401  (loads the BLAS the workers count)
import pytest
from threadpoolctl import threadpool_info

from censusdp.execution import ProcessPoolExecutor, local


def blas_threads(_task: int) -> int:
    """The largest thread count of the BLAS libraries loaded in this worker."""
    return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")


def test_a_lone_task_uses_every_worker_and_a_busy_level_one_thread_each(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.setattr(local, "_idle_cores", lambda: 1.6)
    with ProcessPoolExecutor(2) as pool:
        assert list(pool.map(blas_threads, [0])) == [2]
        # every task but the last is submitted with more behind it: one thread each
        many = list(pool.map(blas_threads, range(7)))
        assert many[:-1] == [1] * 6
        assert many[-1] in (1, 2)
        # the thread count is restored after the lone task
        assert list(pool.map(blas_threads, range(3)))[:2] == [1, 1]
    with ProcessPoolExecutor(1) as pool:
        assert list(pool.map(blas_threads, [0])) == [1]


def test_a_lone_task_on_a_busy_machine_keeps_one_thread(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(local, "_idle_cores", lambda: -6.0)
    with ProcessPoolExecutor(2) as pool:
        assert list(pool.map(blas_threads, [0])) == [1]
    monkeypatch.setattr(local, "_idle_cores", lambda: 1.0)  # one idle core: one more
    with ProcessPoolExecutor(3) as pool:
        assert list(pool.map(blas_threads, [0])) == [2]
