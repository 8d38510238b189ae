"""Checkpoints and resume: what they cost an uninterrupted run, and what a resume saves.

Generates a state, runs ``censusdp run`` uninterrupted (the peer), then the same command
killed with SIGKILL as soon as its checkpoint journal records ``--kill-after`` (a step
such as ``estimate/persons/3``), then ``--resume``. Prints JSON: the uninterrupted
wall time and its ``checkpoint`` seconds (checksumming, flushing and writing the
checkpoints; the overhead every run pays), the resumed run's wall time and its ratio to
the uninterrupted run, the steps it reused, and whether the two releases are
byte-identical (every file but the manifest). Seeded, so the comparison is exact.

    .venv/bin/python benchmarks/bench_resume.py --state VT --scale 0.3 \\
        --kill-after estimate/persons/4
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from _harness import add_input_arguments, generate, run_command, timed, workdir


def _files(run: Path) -> dict[str, str]:
    return {
        str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    }


def _kill_after(cmd: list[str], parent: Path, name: str, stage: str) -> float:
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while p.poll() is None:
        for journal in parent.glob(f".{name}.partial-*/checkpoint/journal.json"):
            try:
                if stage in json.loads(journal.read_text())["stages"]:
                    os.kill(p.pid, signal.SIGKILL)
            except (OSError, ValueError, KeyError):
                pass
        time.sleep(0.01)
    if p.returncode != -signal.SIGKILL:
        raise SystemExit(f"the run ended ({p.returncode}) before recording {stage}")
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    add_input_arguments(ap, scale=0.3, workers=1)
    ap.add_argument("--kill-after", default="estimate/persons/4")
    args = ap.parse_args()
    base = workdir(args, "censusdp-bench-resume-")
    cef = base / "cef"
    generate(args, cef)

    def run(out: Path) -> list[str]:
        return run_command(cef, out, args)

    full = timed(run(base / "uninterrupted"))[0]
    killed_at = _kill_after(run(base / "resumed"), base, "resumed", args.kill_after)
    resumed = timed([*run(base / "resumed"), "--resume"])[0]
    m_full = json.loads((base / "uninterrupted" / "manifest.json").read_text())
    m_res = json.loads((base / "resumed" / "manifest.json").read_text())
    result = {
        "state": args.state,
        "scale": args.scale,
        "persons": m_full.get("input_persons"),
        "workers": args.workers,
        "kill_after": args.kill_after,
        "uninterrupted_seconds": round(full, 2),
        "checkpoint_seconds": m_full["timings"].get("checkpoint"),
        "checkpoint_share": round(m_full["timings"].get("checkpoint", 0) / full, 4),
        "killed_after_seconds": round(killed_at, 2),
        "resumed_seconds": round(resumed, 2),
        "resumed_over_uninterrupted": round(resumed / full, 3),
        "reused": m_res["resumed"]["reused"],
        # the manifest's total stops before the run's self-check (validate_run) of its files
        "manifest_total_seconds": {
            "uninterrupted": m_full["timings"]["total"],
            "resumed": m_res["timings"]["total"],
        },
        "byte_identical": _files(base / "uninterrupted") == _files(base / "resumed"),
        "peak_memory_mb": {
            "uninterrupted": m_full["peak_memory_mb"],
            "resumed": m_res["peak_memory_mb"],
        },
        "load_average": os.getloadavg()[0],
        "note": "wall times on a shared machine; compare within one run of this script",
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
