"""Measuring tasks' size and their process's allocator (censusdp.release.measure,
censusdp.execution.base.keep_freed_memory)."""

from __future__ import annotations

import inspect
import sys

import pytest

from censusdp.data.geography import DEFAULT_CHUNK_VALUES
from censusdp.execution import base
from censusdp.release import measure, parts


class _Libc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1


@pytest.fixture
def libc(monkeypatch):
    fake = _Libc()
    monkeypatch.setattr(base.ctypes, "CDLL", lambda name: fake)
    monkeypatch.setattr(base, "_kept", [])
    monkeypatch.setattr(base.sys, "platform", "linux")
    return fake


def test_freed_blocks_are_kept_once_per_process(libc):
    base.keep_freed_memory()
    base.keep_freed_memory()
    # M_MMAP_THRESHOLD (-3) and M_TRIM_THRESHOLD (-1), each once, at the kept size: a
    # 128 MB array is then served from the heap and its pages stay for the next task
    assert sorted(libc.calls) == [(-3, base.KEPT_FREE_BYTES), (-1, base.KEPT_FREE_BYTES)]
    assert base.KEPT_FREE_BYTES >= 8 * measure.MEASURE_CHUNK_VALUES


def test_nothing_is_changed_off_linux(libc, monkeypatch):
    monkeypatch.setattr(base.sys, "platform", "darwin")
    base.keep_freed_memory()
    assert libc.calls == []


def test_a_part_task_keeps_its_process_pages(monkeypatch):
    seen = []
    monkeypatch.setattr(parts, "keep_freed_memory", lambda: seen.append(True))

    class Stop(Exception):
        pass

    def stop(task):
        raise Stop

    monkeypatch.setattr(parts, "run_measure_task", stop)
    with pytest.raises(Stop):
        parts.run_part_task(parts.PartTask(task=None, path="unused"))
    assert seen == [True]  # before the task's arrays are made


def test_measuring_tasks_are_larger_than_estimation_reads():
    default = inspect.signature(measure.measure_tasks).parameters["target"].default
    assert default == measure.MEASURE_CHUNK_VALUES == 4 * DEFAULT_CHUNK_VALUES


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_the_real_libc_takes_the_settings(monkeypatch):
    monkeypatch.setattr(base, "_kept", [])
    base.keep_freed_memory()  # in this test process: harmless, and must not raise
    assert base._kept == [True]
