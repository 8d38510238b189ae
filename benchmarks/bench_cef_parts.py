"""Reading the CEF in parts (executor tasks) against the previous method, the driver
streaming both files batch by batch.

For each input directory (generated states: ``censusdp generate --state WY --seed 1``),
three readers, each in a fresh subprocess so that its memory is its own:

* ``driver`` (the previous method): ``read_cef_blocks`` as it was at ``--old-ref``
  (loaded from git), which reads every row group on the driver and holds a key and an
  id per person until the end;
* ``parts_inprocess``: :func:`censusdp.io.cef_stream.read_cef_blocks` with the
  in-process executor (the parts one after another in the one process);
* ``parts_pool``: the same on a pool of ``--workers`` processes.

Per reader: wall seconds, CPU seconds of the whole process tree, peak RSS of the
driver (its own high-water mark, exact) and of the process tree (sampled twice a
second), the number of parts and the persons of the largest; and whether the three
readers built the same histograms and invariants (SHA-256 of their arrays). Prints one
JSON object. Timings depend on the load of the machine; the CPU seconds much less.

    .venv/bin/python benchmarks/bench_cef_parts.py /tmp/scaleio/WY_1 /tmp/scaleio/CA_1
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import sampled  # noqa: E402
from censusdp.data.geography import DEFAULT_GEOLEVELS  # noqa: E402
from censusdp.data.schema import get_schema  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OLD_REF = "f35e883"
"""The last commit whose ``read_cef_blocks`` read the CEF on the driver."""


def _run(cmd: list[str]) -> tuple[float, float, dict, dict]:
    """Run a child; return (wall s, CPU s of its process tree, peak RSS MB of the tree
    sampled twice a second, the child's JSON line)."""
    wall, cpu, mem, out = sampled(cmd)
    return wall, cpu, {"tree_peak_rss_mb": mem["tree_mb"]}, json.loads(out.strip().splitlines()[-1])


def _old_reader(ref: str):
    src = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{ref}:src/censusdp/io/cef_stream.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "old_cef_stream.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("old_cef_stream", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["old_cef_stream"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod.read_cef_blocks


def _digest(cef) -> str:
    h = hashlib.sha256()
    for a in (
        cef.hierarchy.blocks.astype("U16"),
        cef.persons.indptr.astype("i8"),
        cef.persons.indices.astype("i8"),
        cef.persons.data.astype("i8"),
        cef.housing_units.toarray().astype("i8"),
        cef.invariants.population.astype("i8"),
        cef.invariants.housing_units.astype("i8"),
        cef.invariants.gq_facilities.astype("i8"),
        *(v.astype("U8") for _, v in sorted(cef.block_attributes.items())),
    ):
        h.update(a.tobytes())
    return h.hexdigest()


def child(mode: str, directory: str, old_ref: str, workers: int) -> None:
    """Read ``directory`` one way; print the result's JSON line."""
    schema = get_schema("pl94")
    t, c = time.perf_counter(), time.process_time()
    if mode == "driver":
        cef = _old_reader(old_ref)(directory, DEFAULT_GEOLEVELS, schema)
        extra = {"parts": 1, "largest_part_persons": cef.n_persons}
    else:
        from censusdp.execution import InProcessExecutor, ProcessPoolExecutor

        ex = ProcessPoolExecutor(workers) if mode == "parts_pool" else InProcessExecutor()
        try:
            cef = __import__("censusdp.io.cef_stream", fromlist=["x"]).read_cef_blocks(
                directory, DEFAULT_GEOLEVELS, schema, executor=ex
            )
        finally:
            ex.close()
        extra = {
            "parts": cef.parts,
            "largest_part_persons": max(p[0] for p in cef.part_costs),
            "readers": len(cef.readers),
        }
    out = {
        "seconds_in_reader": round(time.perf_counter() - t, 2),
        "driver_cpu_s": round(time.process_time() - c, 2),
        "driver_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "n_persons": cef.n_persons,
        "n_blocks": int(cef.hierarchy.blocks.size),
        "histogram_nnz": int(cef.persons.nnz),
        "histogram_mb": round(
            sum(a.nbytes for a in (cef.persons.data, cef.persons.indices, cef.persons.indptr))
            / 2**20,
            1,
        ),
        "digest": _digest(cef),
        **extra,
    }
    print(json.dumps(out))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("inputs", nargs="+", help="CEF directories")
    p.add_argument("--old-ref", default=OLD_REF, help="git ref of the previous reader")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--modes", default="driver,parts_inprocess,parts_pool")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child, args.inputs[0], args.old_ref, args.workers)
        return
    report = {
        "benchmark": "cef_parts",
        "old_ref": args.old_ref,
        "workers": args.workers,
        "cpus": os.cpu_count(),
        "load_avg_at_start": os.getloadavg()[0],
        "python": platform.python_version(),
        "inputs": {},
    }
    for d in args.inputs:
        rows = {}
        for mode in args.modes.split(","):
            cmd = [sys.executable, __file__, d, "--child", mode, "--old-ref", args.old_ref,
                   "--workers", str(args.workers)]  # fmt: skip
            print(f"{d}: {mode} ...", file=sys.stderr, flush=True)
            wall, cpu, mem, got = _run(cmd)
            rows[mode] = {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2), **mem, **got}
        digests = {r.pop("digest") for r in rows.values()}
        base = rows.get("driver")
        for r in rows.values():
            if base:
                r["cpu_ratio_to_driver"] = round(r["cpu_s"] / max(base["cpu_s"], 1e-9), 3)
                r["peak_ratio_to_driver"] = round(
                    r["driver_peak_rss_mb"] / max(base["driver_peak_rss_mb"], 1e-9), 3
                )
        report["inputs"][d] = {"readers": rows, "same_histograms": len(digests) == 1}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
