"""The checks of what a manifest states: its privacy loss and its randomness record."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from censusdp.errors import CensusDPError, InputError
from censusdp.io.layout import NMF_FILES
from censusdp.io.parts import PART_INDEX
from censusdp.io.rundir import read_manifest
from censusdp.privacy.release_budget import release_privacy
from censusdp.release.manifest import (
    MANIFEST_FILE,
    randomness_problem,
    recorded_budgets,
)


def check_privacy_loss(manifest: Mapping[str, Any]) -> tuple[bool, str]:
    """The manifest's statement of the privacy loss is what its recorded budgets compose
    to (:func:`~censusdp.privacy.release_budget.release_privacy`, recomputed here): the
    headline ``rho``, ``epsilon`` and ``delta``, the mechanism, and each run's record."""
    try:
        persons, units = recorded_budgets(dict(manifest), MANIFEST_FILE)
        want = release_privacy(persons, units)
    except CensusDPError as exc:
        return False, f"cannot recompute the privacy loss: {exc}"
    for key, value in want.items():
        problem = _differs(key, manifest.get(key, _MISSING), value)
        if problem:
            return False, f"{problem}, recomputed from the recorded budgets"
    runs = "persons + units" if units is not None else "persons"
    return True, (
        f"rho {want['rho']:.6g}, epsilon {want['epsilon']:.6g}, delta {want['delta']:.3g}: "
        f"the composition of the recorded budgets ({runs})"
    )


_MISSING = object()


def _differs(where: str, got: Any, want: Any) -> str | None:
    """Where a manifest's value ``got`` differs from the recomputed ``want`` (the first
    key path), or ``None``: objects key by key, lists item by item, floats to 1e-9
    relative (the same computation; a library may round its last digit otherwise),
    everything else exactly and of the same JSON type."""
    if got is _MISSING:
        return f"{where}: missing, should be {want!r}"
    if isinstance(want, Mapping):
        if not isinstance(got, Mapping):
            return f"{where}: {got!r} is not a record"
        extra = sorted(set(got) - set(want), key=str)
        if extra:
            return f"{where}.{extra[0]}: not part of the recorded budget's statement"
        return next(
            (
                p
                for k, v in want.items()
                if (p := _differs(f"{where}.{k}", got.get(k, _MISSING), v))
            ),
            None,
        )
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return f"{where}: {got!r}, should be {len(want)} items"
        return next(
            (
                p
                for i, (g, w) in enumerate(zip(got, want, strict=True))
                if (p := _differs(f"{where}[{i}]", g, w))
            ),
            None,
        )
    if isinstance(want, float):
        ok = type(got) in (int, float) and math.isclose(got, want, rel_tol=1e-9, abs_tol=0.0)
    else:
        ok = type(got) is type(want) and got == want
    return None if ok else f"{where}: the manifest says {got!r}, the budgets give {want!r}"


def check_randomness(manifest: Mapping[str, Any]) -> tuple[bool, str]:
    """The randomness record is consistent (:func:`~censusdp.release.manifest.randomness_problem`)
    and, for a re-estimate whose measured run is still where it records it, with
    that run: when its noisy measurement files are the very files this release copied
    (the same SHA-256), its own randomness record must be the one this release
    inherited."""
    problem = randomness_problem(manifest)
    if problem:
        return False, problem
    record = manifest["randomness"]
    what = "seeded (not secure)" if record["mode"] == "seeded" else "secure"
    parent = record.get("measured_by")
    if parent is None:
        return True, what
    try:
        theirs = read_manifest(parent["run"])
    except (InputError, OSError):
        return True, (
            f"{what}, as recorded of the measurements it re-estimated ({parent['run']}, "
            "not there to compare)"
        )
    ours_files, their_files = manifest.get("files") or {}, theirs.get("files") or {}
    nmf = {  # the measurements themselves (their parts' index is how they are listed)
        k: v
        for k, v in ours_files.items()
        if k.split("/")[0] in NMF_FILES.values() and not k.endswith(f"/{PART_INDEX}")
    }
    if not nmf or any(their_files.get(k) != v for k, v in nmf.items()):
        return True, (
            f"{what}, as recorded of the measurements it re-estimated ({parent['run']} now "
            "holds other measurements)"
        )
    if theirs.get("randomness") != parent["randomness"]:
        mode = (theirs.get("randomness") or {}).get("mode")
        return False, (
            f"randomness: records the measurements of {parent['run']} as "
            f"{parent['randomness']['mode']}; that run, whose measurements these are, "
            f"records {mode!r}"
        )
    return True, f"{what}, as the measurements it re-estimated ({parent['run']})"
