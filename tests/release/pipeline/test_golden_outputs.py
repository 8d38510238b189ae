"""Seeded releases are byte-identical to the recorded ones: a refactoring that changes
what a release publishes (a file's bytes, or a deterministic manifest entry) fails here.

The record, ``golden_outputs.json``, holds for each case the SHA-256 of every file of the
release except ``manifest.json``, and the manifest with what legitimately varies from
run to run removed (times, memory, paths, versions, the platform). When a change is
*meant* to alter a release, regenerate the record and say why in the commit:

    python tests/release/pipeline/test_golden_outputs.py --regenerate

The cases are small generated states (seed 3) released with seed 7; ``pl94-2020`` runs
in the default suite, the two larger schemas are slow.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

import censusdp

RECORD = Path(__file__).with_name("golden_outputs.json")

#: (case name, state, scale, preset); the state and scale keep every case small.
CASES = (
    ("pl94-2020", "WY", 0.02, "pl94-2020"),
    ("dhc-lite-demo", "WY", 0.005, "dhc-lite-demo"),
    ("ddp-2010", "WY", 0.005, "ddp-2010"),
)
SLOW = {"dhc-lite-demo", "ddp-2010"}

#: Manifest entries that vary between two runs of the same seeded release (and the
#: solvers' floating-point residuals, which the number of BLAS threads changes).
VOLATILE = {
    "versions",
    "platform",
    "argv",
    "input",
    "timings",
    "peak_memory_mb",
    "max_l2_violation",
}


def _stable(value):
    """``value`` without the entries that vary between runs (times, at any depth)."""
    if isinstance(value, dict):
        return {
            k: _stable(v)
            for k, v in value.items()
            if k not in VOLATILE and not k.endswith("_seconds")
        }
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def release_record(run: Path) -> dict:
    """The SHA-256 of every file under ``run`` but the manifest, and the stable manifest."""
    files = {
        str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    }
    manifest = json.loads((run / "manifest.json").read_text())
    return {"files": files, "manifest": _stable(manifest)}


def make_release(base: Path, case: str) -> Path:
    """The seeded release of ``case`` under ``base``."""
    _, state, scale, preset = next(c for c in CASES if c[0] == case)
    cef = base / f"cef-{state}-{scale}"
    if not cef.exists():
        censusdp.generate_state(state, seed=3, out=cef, scale=scale)
    run = base / case
    censusdp.run_release(cef, run, budget=preset, seed=7)
    return run


@pytest.mark.parametrize(
    "case",
    [pytest.param(c[0], marks=[pytest.mark.slow] if c[0] in SLOW else []) for c in CASES],
)
def test_seeded_release_is_unchanged(tmp_path, case):
    got = release_record(make_release(tmp_path, case))
    want = json.loads(RECORD.read_text())[case]
    changed = sorted(
        name
        for name in set(got["files"]) | set(want["files"])
        if got["files"].get(name) != want["files"].get(name)
    )
    assert not changed, f"files that differ from the record: {changed}"
    for key in sorted(set(got["manifest"]) | set(want["manifest"])):
        assert got["manifest"].get(key) == want["manifest"].get(key), f"manifest key {key!r}"


def test_volatile_entries_are_removed_and_nothing_else():
    """The filter keeps what a release publishes; it drops only times and run context."""
    m = {
        "seed": 7,
        "timings": {"read": 1.0},
        "estimation": {"persons": [{"geolevel": "US", "tasks": 1, "wall_seconds": 0.3}]},
        "input": "/tmp/x",
        "rho": 2.5,
    }
    assert _stable(m) == {
        "seed": 7,
        "estimation": {"persons": [{"geolevel": "US", "tasks": 1}]},
        "rho": 2.5,
    }


def _regenerate() -> None:
    import tempfile

    record = {}
    with tempfile.TemporaryDirectory() as tmp:
        for case, *_ in CASES:
            record[case] = release_record(make_release(Path(tmp), case))
            print(f"recorded {case}: {len(record[case]['files'])} files")
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] != ["--regenerate"]:
        sys.exit("usage: python tests/release/pipeline/test_golden_outputs.py --regenerate")
    _regenerate()
