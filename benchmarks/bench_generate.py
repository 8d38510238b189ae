"""Benchmark ``censusdp generate``: persons per second and peak memory per state.

Each state runs in a fresh subprocess (so its peak resident memory is its own). Prints
one JSON object: per state the persons, wall and CPU seconds, persons per second (wall
and per CPU second, the latter independent of other load on the machine), peak RSS,
and the ratio of CPU throughput to the 1M persons/s target of issue 2.

    python benchmarks/bench_generate.py                 # VT and TX
    python benchmarks/bench_generate.py --states VT,CA  # California: 37M persons
    python benchmarks/bench_generate.py --states VT,DE --scale 0.05  # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile

TARGET_PERSONS_PER_SECOND = 1_000_000


def _child(state: str, seed: int, scale: float, out: str) -> None:
    from censusdp.generate import generate_state

    # imports and caches; a directory of this state's own (DE's warm-up is not DE's run)
    generate_state("DE", seed, os.path.join(out, f"warmup-{state}"), scale=0.02)
    s = generate_state(state, seed, os.path.join(out, state), scale=scale)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sizes = {
        name: os.path.getsize(os.path.join(out, state, name))
        for name in ("persons.parquet", "units.parquet")
    }
    print(
        json.dumps(
            {
                "state": s.state,
                "persons": s.persons,
                "units": s.units,
                "blocks": s.blocks,
                "wall_s": s.timings["total"],
                "cpu_s": s.timings["cpu"],
                "synthesize_s": s.timings["synthesize"],
                "write_s": s.timings["write"],
                "persons_per_s_wall": round(s.persons_per_second),
                "persons_per_cpu_s": round(s.persons_per_cpu_second),
                "ratio_to_1M_per_s_target": round(
                    s.persons_per_cpu_second / TARGET_PERSONS_PER_SECOND, 2
                ),
                "peak_rss_mib": round(peak_kib / 1024, 1),
                "file_bytes": sizes,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", default="VT,TX", help="comma-separated postal codes")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of tracts kept")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.seed, args.scale, args.out)
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for state in args.states.split(","):
            print(f"bench_generate: {state} ...", file=sys.stderr, flush=True)
            proc = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child",
                    state,
                    "--seed",
                    str(args.seed),
                    "--scale",
                    str(args.scale),
                    "--out",
                    tmp,
                ],
                check=True,
                capture_output=True,
                text=True,
            )
            results.append(json.loads(proc.stdout.strip().splitlines()[-1]))
            for done in (state, f"warmup-{state}"):
                shutil.rmtree(os.path.join(tmp, done))
    print(
        json.dumps(
            {
                "benchmark": "censusdp generate",
                "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
                "load_average_1min": round(os.getloadavg()[0], 2),
                "scale": args.scale,
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
