"""Shared test set-up: one BLAS thread per process, ``tests/`` on the import path,
headless Chromium for browser tests, and releases on an in-process executor that runs
what goes beside the estimation in threads as on a pool (``threaded``)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from censusdp.execution.base import prefer_single_thread_blas

# before NumPy loads: two xdist workers each running a multi-threaded BLAS on a 2-core
# machine made the interior-point tests 10x slower (272 s instead of 27 s)
prefer_single_thread_blas()

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))

import numpy as np  # noqa: E402

import profiles  # noqa: E402  (needs the tests directory on the path)
from censusdp.execution import InProcessExecutor  # noqa: E402
from synth import block_codes, make_cef, write_cef  # noqa: E402

settings.load_profile(profiles.profile_name())


def _find_chromium() -> str | None:
    for name in ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


@pytest.fixture(scope="session")
def chromium(request) -> str:
    """Headless Chromium for ``@pytest.mark.browser`` tests, installed when missing.

    Browser tests run in the default suite (``-m "not browser"`` deselects them;
    ``CENSUSDP_SKIP_BROWSER=1`` skips them). Without a Chromium on the machine, this
    installs Debian's ``chromium`` package when running as root with apt-get
    (``apt-get install -y chromium``, after ``apt-get update`` if the first try fails);
    otherwise it skips, saying why.
    """
    if os.environ.get("CENSUSDP_SKIP_BROWSER"):
        pytest.skip("CENSUSDP_SKIP_BROWSER is set")
    path = _find_chromium()
    if path is not None:
        return path
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip(
            "no Chromium, and cannot install it (needs root and apt-get): apt-get install chromium"
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
    proc = subprocess.run(install, capture_output=True, text=True, env=env, timeout=1200)
    if proc.returncode != 0:
        subprocess.run(["apt-get", "update"], capture_output=True, env=env, timeout=600)
        proc = subprocess.run(install, capture_output=True, text=True, env=env, timeout=1200)
    path = _find_chromium()
    if path is None:
        pytest.skip(f"installing Debian's chromium failed: {(proc.stderr or proc.stdout)[-300:]}")
    return path


@pytest.fixture(autouse=True)
def _cold_profile_caches_under_mutation_testing():
    """Under mutmut (``MUTANT_UNDER_TEST`` set), start every test with empty noise and
    accounting caches.

    mutmut runs each mutant in a process forked after a full test run, so tables cached
    there would hide mutants of the code that builds them. Ordinary runs keep the caches.
    """
    if "MUTANT_UNDER_TEST" in os.environ:
        import gc

        from censusdp.privacy import accounting
        from censusdp.privacy.mechanisms import _discrete

        _discrete._gauss_profile.cache_clear()
        _discrete._geometric_profile.cache_clear()
        accounting._epsilon_from_rho.cache_clear()
        for obj in gc.get_objects():
            if isinstance(obj, _discrete._TableMechanism):
                obj.__dict__.pop("_cached_profile", None)
    yield


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
    from censusdp.release import pipeline

    monkeypatch.setattr(pipeline, "make_executor", lambda *a, **k: thread_safe)


@pytest.fixture(scope="module")
def small_cef(tmp_path_factory) -> Path:
    """A CEF of 24 blocks (2 counties x 2 tracts x 2 block groups x 3 blocks) with
    group quarters: a release of it runs every level in seconds."""
    base = tmp_path_factory.mktemp("smallcef")
    persons, units = make_cef(np.random.default_rng(5), block_codes(2, 2, 2, 3), gq_rate=0.3)
    write_cef(base / "cef", persons, units)
    return base / "cef"
