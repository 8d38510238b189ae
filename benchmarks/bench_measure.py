"""The measuring phase's CPU: per-unit AES windows (``RandomSource.unit_streams``) against
the previous method (one HMAC child key and one AES-CTR cipher per unit and query), in
the same run, on the same tasks.

Reads a state's input (``--input``, or ``censusdp generate`` cached in ``--work``),
builds the geography a release measures on (the pl94-2020 preset's optimized spine,
per-geounit budgets with bypass, as ``censusdp run``), cuts the plan into the pipeline's
measurement tasks and runs every task in this process with each method, alternating
them ``--repeats`` times (the best CPU of each is reported). ``previous`` is the
measuring loop as it was before the unit streams: dense answers of every query row,
row copies per budget share, and ``AliasTable.sample_streams`` over one
``RandomSource.child(geolevel, query, geocode)`` per unit. Both draw exact noise from
the same tables; their noise differs (another stream construction), their shapes and
variances do not (checked). Then each task's chunk is written as its NMF part with
the previous write options (every column zstd) and the current ones, alternately on
the same chunk (``write_parts``). CPU seconds are this process's (``time.process_time``) and
do not depend much on other load; wall seconds do. Prints one JSON object.

    .venv/bin/python benchmarks/bench_measure.py --input /tmp/scaleio/WY_1
    .venv/bin/python benchmarks/bench_measure.py --state WY --scale 1 --work /tmp/bench
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from _harness import cached_input, say  # noqa: E402
from censusdp.data.geography import GeoLevels
from censusdp.data.measurements import MeasuredChunk, MeasuredQuery, measured_rows
from censusdp.data.queries import make_query
from censusdp.data.schema import get_schema
from censusdp.io.budget_files import load_preset
from censusdp.io.cef_stream import read_cef_blocks
from censusdp.io.nmf_files import part_name
from censusdp.io.nmf_write import WRITE_OPTIONS, write_nmf_part
from censusdp.privacy.budget import scaled_mechanism
from censusdp.privacy.randomness import RandomSource
from censusdp.release.measure import MeasureTask, measure_tasks, run_measure_task
from censusdp.release.spine import geography_for_input


def _previous_release_units(mech: Any, exact: np.ndarray, task: MeasureTask, query: str):
    """One child stream per unit, as before (``child(geolevel, query, geocode)``)."""
    streams = [task.source.child(task.geolevel, query, str(g)) for g in task.geocodes]
    return exact + mech._profile.table.sample_streams(exact.shape[1], streams)


def previous_measure_task(task: MeasureTask) -> MeasuredChunk:
    """The measuring loop before the unit streams (kept here, for this benchmark only)."""
    c0 = time.process_time()
    out = []
    for qname, mech in task.queries:
        query = _query(task.schema, qname)
        rows = _rows(task.schema, qname)
        exact = np.asarray(query.answer_many(task.histogram).todense())[:, rows]
        exact = exact.astype(np.int64)
        num, level = task.unit_scale
        values = np.zeros(exact.shape, dtype=np.int64)
        variance = np.full(num.size, np.inf)
        for d in np.unique(num):
            if d <= 0:
                continue
            sel = np.flatnonzero(num == d)
            m = scaled_mechanism(mech, Fraction(int(d), int(level)))
            sub = MeasureTask(
                task.geolevel, task.start, task.geocodes[sel], None, task.schema, (), task.source
            )
            values[sel] = _previous_release_units(m, exact[sel], sub, query.name)
            variance[sel] = float(m.variance)
        if variance.size and np.isfinite(variance).all() and (variance == variance[0]).all():
            variance = float(variance[0])
        out.append(MeasuredQuery(task.geolevel, query.name, rows, values, variance, "x"))
    n = int(task.geocodes.size)
    return MeasuredChunk(
        task.geolevel, task.start, task.start + n, task.geocodes, tuple(out),
        time.process_time() - c0,
    )  # fmt: skip


_QUERIES: dict[str, Any] = {}


def _query(schema, name):
    if name not in _QUERIES:
        _QUERIES[name] = make_query(schema, name)
    return _QUERIES[name]


def _rows(schema, name):
    return measured_rows(schema, _query(schema, name))


def _run(tasks: list[MeasureTask], fn) -> dict[str, Any]:
    c, t = time.process_time(), time.perf_counter()
    chunks = [fn(task) for task in tasks]
    cpu, wall = time.process_time() - c, time.perf_counter() - t
    values = sum(ch.n_values for ch in chunks)
    shapes = [
        (m.values.shape, np.asarray(m.variance).tolist()) for ch in chunks for m in ch.queries
    ]
    return {"cpu_s": cpu, "wall_s": wall, "values": values, "_shapes": shapes}


PREVIOUS_WRITE_OPTIONS = {**WRITE_OPTIONS, "compression": "zstd"}


def _write_parts(tasks: list[MeasureTask], work: Path) -> dict[str, Any]:
    """Each task's chunk written as its NMF part with the previous options (every column
    zstd) and the current ones (the one-value columns uncompressed), alternately on the
    same chunk: the writing CPU (``write_cpu_seconds``) and bytes of each."""
    out = {"previous_all_zstd": [0.0, 0], "now": [0.0, 0]}
    for i, task in enumerate(tasks):
        chunk = run_measure_task(task)
        for name, options in (("previous_all_zstd", PREVIOUS_WRITE_OPTIONS), ("now", None)):
            path = work / f"{name}-{part_name(i)}"
            saved = dict(WRITE_OPTIONS)
            if options is not None:
                WRITE_OPTIONS.clear()
                WRITE_OPTIONS.update(options)
            try:
                rec = write_nmf_part(chunk, path)
            finally:
                WRITE_OPTIONS.clear()
                WRITE_OPTIONS.update(saved)
            out[name][0] += rec["write_cpu_seconds"]
            out[name][1] += path.stat().st_size
            path.unlink()
    return {k: {"cpu_s": round(c, 3), "bytes": b} for k, (c, b) in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", default=None, help="a CEF directory (default: generate one)")
    ap.add_argument("--state", default="WY")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--work", default=None, help="work directory (default: a temp dir)")
    ap.add_argument("--no-write", action="store_true", help="skip timing the NMF part writes")
    args = ap.parse_args()
    if args.input:
        cef = Path(args.input)
    else:
        work = Path(args.work or tempfile.mkdtemp(prefix="censusdp_measure_"))
        work.mkdir(parents=True, exist_ok=True)
        cef = cached_input(work, args.state, args.scale)
    budget = load_preset("pl94-2020")
    schema = get_schema(budget.schema)
    say(f"read {cef} and build the spine")
    blocks = read_cef_blocks(
        cef, GeoLevels.from_pairs(list(budget.geolevels)), schema, with_units=False
    )
    per_block = {"geocode": blocks.hierarchy.blocks, **blocks.block_attributes}
    geo = geography_for_input(
        "optimized", budget, blocks.hierarchy, per_block, blocks.invariants, explicit=True
    )
    h = geo.estimation
    levels = h.aggregate(geo.to_estimation(blocks.persons))
    plan = [(m.geolevel, m.query, m.mechanism) for m in budget.measurements()]
    source = RandomSource.seeded(args.seed).child("persons")
    tasks = list(
        measure_tasks(levels, h, schema, plan, source, unit_shares=geo.unit_shares(budget))
    )
    say(f"{len(tasks)} tasks, {h.n_units(h.n_levels - 1):,} blocks")
    runs: dict[str, list[dict[str, Any]]] = {"previous": [], "unit_streams": []}
    for r in range(args.repeats):
        for name, fn in (("previous", previous_measure_task), ("unit_streams", run_measure_task)):
            runs[name].append(_run(tasks, fn))
            say(f"{name} #{r + 1}: {runs[name][-1]['cpu_s']:.2f} CPU s")
    written = None
    if not args.no_write:
        say("writing each chunk's NMF part: previous options and current")
        work = Path(tempfile.mkdtemp(prefix="censusdp_measure_parts_"))
        written = _write_parts(tasks, work)
        work.rmdir()
    best = {k: min(v, key=lambda x: x["cpu_s"]) for k, v in runs.items()}
    same_layout = best["previous"].pop("_shapes") == best["unit_streams"].pop("_shapes")
    values = best["unit_streams"]["values"]
    result = {
        "benchmark": "measure",
        "input": str(cef),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "load_average": os.getloadavg(),
        "tasks": len(tasks),
        "blocks": h.n_units(h.n_levels - 1),
        "noisy_values": values,
        "repeats": args.repeats,
        "cpu_s_all_repeats": {k: [round(x["cpu_s"], 3) for x in v] for k, v in runs.items()},
        **{
            k: {
                "cpu_s": round(v["cpu_s"], 3),
                "wall_s": round(v["wall_s"], 3),
                "values_per_cpu_s": round(values / v["cpu_s"]),
            }
            for k, v in best.items()
        },
        "cpu_speedup": round(best["previous"]["cpu_s"] / best["unit_streams"]["cpu_s"], 2),
        "same_shapes_and_variances": same_layout,
        "write_parts": written,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
