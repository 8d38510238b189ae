"""The per-value costs of a ``ddp-2010`` block level: measuring, writing, reading, checking.

A ``ddp-2010`` block had 229,320 measured cells on ``dhc-lite`` (337,680 on the preset's
``dhcp-hhgq`` schema now), so full Delaware was 5.5 billion noisy values and everything done per value decides whether a full-state run finishes. This
benchmark takes one block group of a generated state and measures, in one process, in
CPU seconds (``time.process_time``: the machine is shared, wall time is not comparable
between runs) and as values per CPU second:

* ``noise``: the measurement tasks' answers and noise (``run_measure_task``);
* ``write``: writing those chunks as NMF part files, ``before`` (every column
  zstd with dictionaries, the ``cell`` column falling back to plain int32, and the
  table built with a per-row division and modulo) and ``now``
  (:data:`censusdp.io.nmf_write.WRITE_OPTIONS`, ``cell`` delta-encoded), with the bytes of each;
* ``read``: the estimator reading the family back (``NMFReader.read``) from each;
* ``check``: the self-check's count of the parts (``release.validate._nmf_rows.count_files``),
  ``before`` reading every checked column, ``now`` leaving the columns the footer
  settles unread (``_footer_constants``);
* ``pool``: the root's pooling reading the level (``pooled_root``), ``before`` every
  query (the 229,320-cell ``detailed`` too), ``now`` only the pooled ones, as values read;
* ``driver``: the driver's CPU for the family's task, ``before`` reading the family,
  ``now`` handing out an NMF slice (``NMFReader.detach``) that the worker reads;
* ``solve``: the family's TopDown task (failsafe, least squares, rounding).

Prints JSON. About a minute on an idle machine for the default family.

    python benchmarks/bench_nmf_write.py --input de02 --blocks 60
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import pickle  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from dataclasses import replace  # noqa: E402
from pathlib import Path  # noqa: E402
from unittest import mock  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from _harness import cached_input  # noqa: E402
from censusdp.data.geography import GeoLevels  # noqa: E402
from censusdp.data.invariants import Bounds  # noqa: E402
from censusdp.data.measurements import MeasuredQuery  # noqa: E402
from censusdp.data.schema import get_schema  # noqa: E402
from censusdp.io import nmf_write as nmf_mod  # noqa: E402
from censusdp.io.budget_files import load_preset  # noqa: E402
from censusdp.io.cef_stream import read_cef_blocks  # noqa: E402
from censusdp.io.columns import dictionary_strings  # noqa: E402
from censusdp.io.nmf_files import write_part_index  # noqa: E402
from censusdp.io.nmf_read import NMFReader  # noqa: E402
from censusdp.io.nmf_write import write_nmf_part  # noqa: E402
from censusdp.privacy.randomness import RandomSource  # noqa: E402
from censusdp.release.measure import measure_tasks, run_measure_task  # noqa: E402
from censusdp.release.topdown.levels import LevelPlan, LevelTasks, TaskContext  # noqa: E402
from censusdp.release.topdown.pooling import pooled_root  # noqa: E402
from censusdp.release.topdown.subproblems import QueryCache, group_of_cells  # noqa: E402
from censusdp.release.topdown.tasks import run_task  # noqa: E402
from censusdp.release.validate import _nmf_rows  # noqa: E402


def _say(msg: str) -> None:
    print(f"[bench_nmf_write] {msg}", file=sys.stderr, flush=True)


@contextmanager
def _cpu(out: dict, key: str, values: int | None = None):
    c = time.process_time()
    yield
    sec = time.process_time() - c
    out[key] = {"cpu_seconds": round(sec, 3)}
    if values:
        out[key]["million_values_per_cpu_second"] = round(values / max(sec, 1e-9) / 1e6, 2)


_BEFORE_OPTIONS = {"compression": "zstd"}


def _table_before(mq: MeasuredQuery, geocodes: np.ndarray, a: int, b: int) -> pa.Table:
    """The previous way to build a row group: a division and a modulo per row."""
    r = max(mq.rows.size, 1)
    flat = np.arange(a, b, dtype=np.int64)
    unit = flat // r
    first = int(unit[0]) if unit.size else 0
    last = int(unit[-1]) + 1 if unit.size else 0
    n = b - a
    return pa.table(
        {
            "geolevel": dictionary_strings(np.zeros(n, np.int32), np.array([mq.geolevel])),
            "geocode": dictionary_strings((unit - first).astype(np.int32), geocodes[first:last]),
            "query": dictionary_strings(np.zeros(n, np.int32), np.array([mq.query])),
            "cell": pa.array(mq.rows.astype(np.int32)[flat % r], pa.int32()),
            "value": pa.array(mq.values.reshape(-1)[a:b]),
            "variance": pa.array(np.full(n, float(mq.variance))),
            "mechanism": dictionary_strings(np.zeros(n, np.int32), np.array([mq.mechanism])),
        }
    )


_BEFORE_SCHEMA = pa.schema([pa.field(f.name, f.type, nullable=True) for f in nmf_mod.NMF_SCHEMA])
"""The columns written before (all seven in rows, nullable)."""


def _columns_table_before(self: nmf_mod._QueryColumns, a: int, b: int) -> pa.Table:
    """:func:`_table_before` in place of the writer's per-query column slicer."""
    codes = self.__dict__.get("_codes_before")
    if codes is None:
        codes = self.__dict__["_codes_before"] = np.asarray(self.codes.to_pylist(), dtype=str)
    return _table_before(self.mq, codes, a, b)


def _family(input_dir: Path, out_dir: Path, blocks: int) -> int:
    """Write the records of the block group whose block count is nearest ``blocks``."""
    units = pq.read_table(input_dir / "units.parquet")
    persons = pq.read_table(input_dir / "persons.parquet")
    codes = np.unique(np.asarray(units.column("geocode").to_pylist()))
    bgs, counts = np.unique([c[:12] for c in codes], return_counts=True)
    bg = bgs[int(np.argmin(np.abs(counts - blocks)))]
    keep = {c for c in codes if c[:12] == bg}
    out_dir.mkdir(parents=True)
    for name, table in (("units", units), ("persons", persons)):
        mask = pa.array([g in keep for g in table.column("geocode").to_pylist()])
        pq.write_table(table.filter(mask), out_dir / f"{name}.parquet")
    return len(keep)


def _write_parts(chunks: list, directory: Path) -> int:
    directory.mkdir()
    recs = [write_nmf_part(ch, directory / f"part-{i:05d}.parquet") for i, ch in enumerate(chunks)]
    write_part_index(directory, recs)
    return sum((directory / r["file"]).stat().st_size for r in recs)


def _check(directory: Path, budget, h) -> None:
    plan = {(m.geolevel, m.query): m for m in budget.measurements()}
    level = h.geolevels[h.n_levels - 1].name
    bl = h.n_levels - 1
    unit_var = {
        k: np.full(h.n_units(bl), float(m.variance)) for k, m in plan.items() if k[0] == level
    }
    rows = {k: np.zeros(h.n_units(bl), np.int64) for k in unit_var}
    mix = {k: np.zeros(h.n_units(bl), np.uint64) for k in unit_var}
    files = sorted(directory.glob("part-*.parquet"))
    tally = _nmf_rows.Tally(unit_var, rows, mix, h.geocodes, {level: bl})
    problem = _nmf_rows.count_files(directory, files, tally)
    if problem:
        raise SystemExit(f"self-check failed: {problem}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", type=Path, help="a generated state (default: DE x0.02, seed 1)")
    ap.add_argument("--blocks", type=int, default=60, help="blocks of the family (nearest)")
    ap.add_argument("--seed", type=int, default=1, help="noise seed")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_nmf_write_") as tmp:
        tmp_path = Path(tmp)
        input_dir = args.input or cached_input(tmp_path, "DE", 0.02, seed=1)
        k = _family(input_dir, tmp_path / "family", args.blocks)
        budget = load_preset("ddp-2010")
        schema = get_schema(budget.schema)
        cef = read_cef_blocks(
            tmp_path / "family", GeoLevels.from_pairs(list(budget.geolevels)), schema
        )
        h = cef.hierarchy
        levels = h.aggregate(cef.persons)
        bl = h.n_levels - 1
        plan = [
            (m.geolevel, m.query, m.mechanism)
            for m in budget.measurements()
            if m.geolevel == h.geolevels[bl].name
        ]
        _say(f"block group {h.geocodes[bl - 1][0]}: {k} blocks, {cef.n_persons} persons")
        out: dict = {
            "benchmark": "bench_nmf_write",
            "machine": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average": [round(v, 2) for v in os.getloadavg()],
            "input": str(args.input or "generated DE x0.02 seed 1"),
            "family_blocks": k,
            "persons": int(cef.n_persons),
        }
        tasks = list(measure_tasks(levels, h, schema, plan, RandomSource.seeded(args.seed)))
        with _cpu(out, "noise"):
            chunks = [run_measure_task(t) for t in tasks]
        n = sum(ch.n_values for ch in chunks)
        out["noisy_values"] = n
        out["noise"]["million_values_per_cpu_second"] = round(
            n / out["noise"]["cpu_seconds"] / 1e6, 2
        )
        dirs = {"before": tmp_path / "before", "now": tmp_path / "now"}
        out["write"], out["read"], out["check"] = {}, {}, {}
        with (
            mock.patch.object(nmf_mod, "WRITE_OPTIONS", _BEFORE_OPTIONS),
            mock.patch.object(nmf_mod._QueryColumns, "table", _columns_table_before),
            mock.patch.object(nmf_mod, "NMF_FILE_SCHEMA", _BEFORE_SCHEMA),
            _cpu(out["write"], "before", n),
        ):
            size = _write_parts(chunks, dirs["before"])
        out["write"]["before"]["megabytes"] = round(size / 1e6, 1)
        with _cpu(out["write"], "now", n):
            size = _write_parts(chunks, dirs["now"])
        out["write"]["now"]["megabytes"] = round(size / 1e6, 1)
        del chunks
        for label, d in dirs.items():
            reader = NMFReader(d, schema, h)
            with _cpu(out["read"], label, n):
                mqs = reader.read(bl, 0, k)
            del mqs
        with (
            mock.patch.object(_nmf_rows, "_footer_constants", lambda *a: {}),
            mock.patch.object(_nmf_rows, "has_row_group_keys", lambda md: False),
            _cpu(out["check"], "before_all_columns", n),
        ):
            _check(dirs["before"], budget, h)  # every column read from the rows
        with _cpu(out["check"], "now", n):
            _check(dirs["now"], budget, h)
        reader = NMFReader(dirs["now"], schema, h)
        counted = {"values": 0}
        real_read = NMFReader.read

        def counting_read(self, level, start, stop, queries=None):
            got = real_read(self, level, start, stop, queries)
            counted["values"] += sum(m.values.size for m in got)
            return got

        out["pool"] = {}
        with mock.patch.object(NMFReader, "read", counting_read):
            with _cpu(out["pool"], "now"):
                pooled_root(reader, h)
            out["pool"]["now"]["values_read"] = counted["values"]
            counted["values"] = 0

            def all_queries(self, level, start, stop, queries=None):
                return counting_read(self, level, start, stop, None)

            with mock.patch.object(NMFReader, "read", all_queries), _cpu(out["pool"], "before"):
                pooled_root(reader, h)
            out["pool"]["before"]["values_read"] = counted["values"]
        parent = levels[bl - 1].tocsr()
        cell_groups, n_groups = group_of_cells(reader, "hhgq")
        bounds = Bounds(
            np.zeros((k, n_groups)), np.full((k, n_groups), np.inf), np.zeros(k), np.full(k, np.inf)
        )
        ctx = TaskContext(reader, QueryCache(reader), h, cell_groups, "auto", max_children=None)
        out["solve"] = {}
        with _cpu(out["solve"], "build_task", n):
            (task,) = LevelTasks(ctx, bl - 1, parent, bounds, LevelPlan())
        # the driver's share of a family's task: reading it (before) or handing out an
        # NMF slice that the worker reads (now: ``read_in_tasks``)
        out["driver"] = {"before_reads_the_family": out["solve"]["build_task"]}
        with _cpu(out["driver"], "now_hands_out_a_slice"):
            (lazy,) = LevelTasks(replace(ctx, detach=True), bl - 1, parent, bounds, LevelPlan())
        with _cpu(out["driver"], "worker_builds_it"):
            built = pickle.loads(pickle.dumps(lazy)).subproblem()
        out["driver"]["task_pickle_bytes"] = len(pickle.dumps(lazy))
        out["driver"]["same_subproblem"] = all(
            np.array_equal(a, b) for a, b in zip(built.noisy, task.sub.noisy, strict=True)
        )
        with _cpu(out["solve"], "run_task"):
            r = run_task(task)
        out["solve"]["kept_cells"] = int(task.kept.size)
        out["solve"]["method"] = r.method
        out["solve"]["attempts"] = [list(a) for a in r.attempts]
    w = out["write"]
    w["speedup"] = round(w["before"]["cpu_seconds"] / max(w["now"]["cpu_seconds"], 1e-9), 2)
    w["size_ratio"] = round(w["before"]["megabytes"] / max(w["now"]["megabytes"], 1e-9), 2)
    c = out["check"]
    c["speedup"] = round(
        c["before_all_columns"]["cpu_seconds"] / max(c["now"]["cpu_seconds"], 1e-9), 2
    )
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
