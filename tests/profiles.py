"""Hypothesis profiles: reproducible in CI, wider for developers.

``ci`` (the default, and always when the ``CI`` environment variable is set) derandomizes:
every run draws the same examples, so CI never passes or fails by luck, and a failure
prints the blob that reproduces it (``@reproduce_failure``). No example database is read
or written, so what ran on one machine runs on every other. The time-based health check
is off because on a shared machine it depends on the load, not on the code.

``dev`` (``HYPOTHESIS_PROFILE=dev``) draws fresh random examples every run, ten times as
many: run it before pushing a change to code under property tests; when it finds a
failure, add the printed example as an ``@example`` so the ci profile keeps it.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

#: how many times more examples than a test's ci count each profile draws
FACTORS = {"ci": 1, "dev": 10}

settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    print_blob=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev",
    max_examples=100 * FACTORS["dev"],
    derandomize=False,
    print_blob=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def profile_name() -> str:
    """The profile to load: ``ci`` under CI or by default, else ``$HYPOTHESIS_PROFILE``."""
    if os.environ.get("CI"):
        return "ci"
    name = os.environ.get("HYPOTHESIS_PROFILE", "ci")
    if name not in FACTORS:
        raise ValueError(f"HYPOTHESIS_PROFILE must be one of {sorted(FACTORS)}, got {name!r}")
    return name


def examples(n: int) -> int:
    """``n`` examples under the ci profile, scaled up under the wider dev profile."""
    return n * FACTORS.get(settings.get_current_profile_name(), 1)
