"""What the NMF writer's encoding costs per noisy value: a ``ddp-2010`` and a ``dhc-2020`` block.

A ``ddp-2010`` block measures 338,502 person and 150,984 household values and a
``dhc-2020`` block about 1.36 million person values, nearly all noise about zero, so
the CPU the writer spends per value written decides how long a state takes to measure.
This benchmark takes the first ``--tasks`` block measurement tasks of each run (the
pipeline's own tasks on a generated state: ``measure_tasks``, ``run_measure_task``),
and times, in CPU nanoseconds per noisy value (``time.process_time``; the machine may be
shared, so the methods alternate ``--repeats`` times and the least CPU of each is kept):

* ``write``: the measuring task's whole writing of its part (``write_nmf_part``: the
  columns, Parquet, flushing, SHA-256) by the writer before, ``pyarrow`` (pyarrow's
  Parquet writer, every column encoded row by row with
  :data:`censusdp.io.nmf_write.WRITE_OPTIONS`) and now, ``censusdp`` (the part
  assembled from column chunks, :mod:`censusdp.io.parquet_chunks`: pyarrow encodes
  ``value`` and, once a row-group shape, ``cell``; the one-value columns and ``geocode``
  are dictionary runs of a few bytes), with the bytes per value of each; the two files
  must read back to the same seven columns (``same_rows``);
* ``check``: the self-check's count of the parts of each (``_nmf_rows.count_files``);
* ``columns``: each stored column alone, written by pyarrow's writer as the ``pyarrow``
  engine writes it (its row groups, its options), where that engine's nanoseconds go.

Prints one JSON object. About two minutes for the default input on an idle machine.

    python benchmarks/bench_nmf_encoding.py --input /tmp/VT_0.1 --tasks 1
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from _harness import cached_input, say  # noqa: E402
from bench_hh_measure import block_tally  # noqa: E402
from censusdp.data.geography import GeoLevels  # noqa: E402
from censusdp.data.schema import get_schema  # noqa: E402
from censusdp.io import nmf_write as nw  # noqa: E402
from censusdp.io.budget_files import load_preset  # noqa: E402
from censusdp.io.cef_stream import read_cef_blocks  # noqa: E402
from censusdp.io.nmf_files import STORED_COLUMNS, read_nmf_table  # noqa: E402
from censusdp.privacy.randomness import RandomSource  # noqa: E402
from censusdp.release.measure import measure_tasks, run_measure_task  # noqa: E402
from censusdp.release.validate import _nmf_rows  # noqa: E402

ENGINES = ("pyarrow", "censusdp")
"""The writer before (pyarrow's Parquet writer) and now (the part assembled from chunks)."""

RUNS = (
    ("ddp-2010 persons", "ddp-2010", "ddp-2010", "persons"),
    ("ddp-2010 households", "ddp-2010-households", "ddp-2010", "households"),
    ("dhc-2020 persons", "dhc-2020", "dhc-2020", "persons"),
)
"""(label, the run's preset, the person preset the input is read with, the histogram
measured: ``persons`` or the ``households`` derived from them)."""


def _least(fn, repeats: int) -> float:
    best = np.inf
    for _ in range(repeats):
        c = time.process_time()
        fn()
        best = min(best, time.process_time() - c)
    return best


def _write(chunks: list, directory: Path, engine: str) -> int:
    """Every chunk written as its part by ``engine``; the bytes written."""
    recs = [
        nw.write_nmf_part(ch, directory / f"part-{i:05d}.parquet", engine=engine)
        for i, ch in enumerate(chunks)
    ]
    return sum((directory / r["file"]).stat().st_size for r in recs)


def _decoded(table: pa.Table) -> pa.Table:
    """``table`` with its dictionary columns decoded (the engines cut row groups at
    different sizes, so each row group's dictionary differs while the rows are the same)."""
    return pa.table(
        {
            name: col.cast(col.type.value_type) if pa.types.is_dictionary(col.type) else col
            for name, col in zip(table.column_names, table.columns, strict=True)
        }
    )


def _check(directory: Path, chunks: list, h) -> None:
    files = sorted(directory.glob("part-*.parquet"))
    problem = _nmf_rows.count_files(directory, files, block_tally(chunks, h))
    if problem:
        raise RuntimeError(problem)


def _column_costs(chunks: list, repeats: int) -> dict[str, float]:
    """CPU seconds of each stored column written alone, as the writer writes it."""
    tables = []
    for ch in chunks:
        for mq in ch.queries:
            groups = nw.row_group_bounds(mq.values.shape[0], mq.rows.size, nw.ROW_GROUP_ROWS)
            cols = nw._QueryColumns(mq, ch.geocodes, max(b - a for a, b in groups))
            tables += [cols.table(a, b) for a, b in groups]

    def options(name: str) -> dict:
        out = {}
        for k, v in nw.WRITE_OPTIONS.items():
            if isinstance(v, dict):
                v = {c: x for c, x in v.items() if c == name}
            elif isinstance(v, list):
                v = [c for c in v if c == name]
            out[k] = v
        return out

    def write(name: str) -> None:
        schema = pa.schema([nw.NMF_FILE_SCHEMA.field(name)])
        w = pq.ParquetWriter(io.BytesIO(), schema, **options(name))
        for t in tables:
            w.write_table(t.select([name]), row_group_size=max(t.num_rows, 1))
        w.close()

    return {name: _least(lambda name=name: write(name), repeats) for name in STORED_COLUMNS}


def _measure_run(
    label: str, preset: str, person_preset: str, histogram: str, input_dir: Path, args
) -> dict:
    """One run's first block tasks: writing and checking their parts, in CPU ns a value."""
    budget, persons = load_preset(preset), load_preset(person_preset)
    schema = get_schema(budget.schema)
    cef = read_cef_blocks(
        input_dir,
        GeoLevels.from_pairs(list(persons.geolevels)),
        get_schema(persons.schema),
        with_units="households" if histogram == "households" else True,
    )
    h = cef.hierarchy
    hist = cef.households if histogram == "households" else cef.persons
    bl = h.n_levels - 1
    plan = [
        (m.geolevel, m.query, m.mechanism)
        for m in budget.measurements()
        if m.geolevel == h.geolevels[bl].name
    ]
    tasks = list(measure_tasks(h.aggregate(hist), h, schema, plan, RandomSource.seeded(1)))
    chunks = [run_measure_task(t) for t in tasks[: args.tasks]]
    n = sum(ch.n_values for ch in chunks)
    units = sum(ch.stop - ch.start for ch in chunks)
    say(f"{label}: {len(chunks)} block tasks, {units} blocks, {n:,} noisy values")
    cpu = dict.fromkeys(ENGINES, np.inf)
    size: dict[str, int] = {}
    check = dict.fromkeys(ENGINES, np.inf)
    with tempfile.TemporaryDirectory(prefix="bench_nmf_encoding_") as tmp:
        dirs = {k: Path(tmp) / k for k in cpu}
        for _ in range(args.repeats):
            for k in ENGINES:
                for f in dirs[k].glob("*"):
                    f.unlink()
                dirs[k].mkdir(exist_ok=True)
                c = time.process_time()
                size[k] = _write(chunks, dirs[k], k)
                cpu[k] = min(cpu[k], time.process_time() - c)
        same = all(
            _decoded(read_nmf_table(a)).equals(_decoded(read_nmf_table(b)))
            for a, b in zip(
                *(sorted(dirs[k].glob("*.parquet")) for k in ENGINES),
                strict=True,
            )
        )
        for k, d in dirs.items():
            check[k] = _least(lambda d=d: _check(d, chunks, h), args.repeats)
    columns = _column_costs(chunks, args.repeats)

    def ns(sec: float) -> float:
        return round(sec / n * 1e9, 1)

    out = {
        "block_tasks": len(chunks),
        "blocks": units,
        "noisy_values": n,
        "write_ns_per_value": {k: ns(v) for k, v in cpu.items()},
        "bytes_per_value": {k: round(v / n, 4) for k, v in size.items()},
        "same_rows": same,
        "check_ns_per_value": {k: ns(v) for k, v in check.items()},
        "columns_alone_ns_per_value": {k: ns(v) for k, v in columns.items()},
    }
    w = out["write_ns_per_value"]
    w["speedup"] = round(w["pyarrow"] / max(w["censusdp"], 1e-9), 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", type=Path, help="a generated state (default: VT x0.1, seed 1)")
    ap.add_argument("--work", type=Path, help="where the default input is generated (cached)")
    ap.add_argument("--tasks", type=int, default=1, help="block tasks of each run")
    ap.add_argument("--repeats", type=int, default=3, help="repeats (least CPU kept)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_nmf_encoding_") as tmp:
        input_dir = args.input or cached_input(args.work or Path(tmp), "VT", 0.1, seed=1)
        out = {
            "benchmark": "bench_nmf_encoding",
            "machine": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average": [round(v, 2) for v in os.getloadavg()],
            "input": str(args.input or "generated VT x0.1 seed 1"),
            "repeats": args.repeats,
        }
        for label, preset, person_preset, histogram in RUNS:
            out[label] = _measure_run(label, preset, person_preset, histogram, input_dir, args)
        out["load_average_after"] = [round(v, 2) for v in os.getloadavg()]
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
