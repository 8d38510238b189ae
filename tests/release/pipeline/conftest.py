"""Fixtures shared by the release pipeline's tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from censusdp.execution import InProcessExecutor
from censusdp.release import pipeline
from synth import block_codes, make_cef, write_cef


class ThreadSafeInProcess(InProcessExecutor):
    """An in-process executor that declares itself thread-safe: what runs beside the
    estimation on a pool (the NMF check, an independent unit run) then runs in a thread
    of its own, as on a pool, without starting processes (its ``map`` runs in the
    calling thread)."""

    thread_safe = True


@pytest.fixture
def thread_safe() -> ThreadSafeInProcess:
    """A :class:`ThreadSafeInProcess` executor."""
    return ThreadSafeInProcess()


@pytest.fixture
def threaded(monkeypatch, thread_safe) -> None:
    """Every release of the test on a :class:`ThreadSafeInProcess` executor."""
    monkeypatch.setattr(pipeline, "make_executor", lambda *a, **k: thread_safe)


@pytest.fixture(scope="module")
def small_cef(tmp_path_factory) -> Path:
    """A CEF of 24 blocks (2 counties x 2 tracts x 2 block groups x 3 blocks) with
    group quarters: a release of it runs every level in seconds."""
    base = tmp_path_factory.mktemp("smallcef")
    persons, units = make_cef(np.random.default_rng(5), block_codes(2, 2, 2, 3), gq_rate=0.3)
    write_cef(base / "cef", persons, units)
    return base / "cef"
