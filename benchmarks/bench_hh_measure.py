"""Where a ``ddp-2010`` block's noisy values spend their CPU, and what the last changes saved.

A ``ddp-2010`` release measures 338,502 person values (``dhcp-hhgq``) and 150,984
household values (``household2010``) at every block, all but a few of them noise about
zero: a 10% Vermont is 1.9 billion noisy values, a full Vermont about 16 billion, so
the measuring tasks' CPU per value decides whether a full state fits on two cores.
This benchmark takes the first ``--tasks`` block measurement tasks of each run of a
generated state (the pipeline's own tasks: ``measure_tasks``) and times, in this
process, in CPU nanoseconds per noisy value (``time.process_time``; the machine may be
shared, so each phase is repeated ``--repeats`` times, the methods alternating, and
the least CPU of each kept):

* ``answers``: the exact answers of every query (``_exact_answers``);
* ``noise``: the noise, ``previous`` (the words and the alias lookups as they were
  before the pieces: ``benchmarks/bench_sampler.py``'s copy) and ``now``
  (:meth:`censusdp.privacy.mechanisms._table.AliasTable.sample_units`, the counts
  added in place); the two must draw the same noise (checked);
* ``columns``: building the Arrow columns of every row group (``_QueryColumns``),
  ``previous`` with the four one-value columns in every row (``geolevel``, ``query``,
  ``variance``, ``mechanism``) and ``now`` the stored ``geocode``, ``cell``, ``value``
  and each row group's key;
* ``parquet``: encoding and compressing them, ``previous`` (all seven columns in rows,
  statistics on all but ``cell``: the writer before the row-group keys) and ``now``
  (:data:`~censusdp.io.nmf_write.NMF_FILE_SCHEMA` with
  :data:`~censusdp.io.nmf_write.WRITE_OPTIONS` and the keys in the file's metadata),
  with the bytes of each;
* ``sha256``: the part's checksum;
* ``read``: the estimator's read of every row group back (``nmf_cache._read_group``:
  decoding ``geocode``, ``cell`` and ``value`` and checking the cells);
* ``check``: the self-check's count of the part (``_nmf_rows.count_files``),
  ``previous`` row by row on the previous layout, ``now`` by whole units on the new.

``total`` adds the measuring task's phases (answers, noise, columns, Parquet,
checksum), each ``previous`` or ``now``. Prints one JSON object. A minute or two for the default input on an idle machine.

    python benchmarks/bench_hh_measure.py --input /tmp/vt10 --tasks 3
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import hashlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from unittest import mock  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from _harness import cached_input, say  # noqa: E402
from bench_sampler import PreviousWords, previous_sample_units  # noqa: E402
from censusdp.data.geography import GeoLevels  # noqa: E402
from censusdp.data.schema import get_schema  # noqa: E402
from censusdp.io import nmf_cache  # noqa: E402
from censusdp.io import nmf_write as nw  # noqa: E402
from censusdp.io.budget_files import load_preset  # noqa: E402
from censusdp.io.cef_stream import read_cef_blocks  # noqa: E402
from censusdp.io.nmf_files import (  # noqa: E402
    NMF_COLUMNS,
    ONE_VALUE_COLUMNS,
    ROW_GROUPS_KEY,
    encode_row_group_keys,
    with_one_value_columns,
)
from censusdp.privacy.mechanisms import _table  # noqa: E402
from censusdp.privacy.randomness import RandomSource  # noqa: E402
from censusdp.release import measure as measure_mod  # noqa: E402
from censusdp.release.measure import measure_tasks, run_measure_task  # noqa: E402
from censusdp.release.validate import _nmf_rows  # noqa: E402
from censusdp.release.validate._nmf_rows import Tally  # noqa: E402


def _previous_sample_units(
    self: _table.AliasTable, n: int, streams, units: int, *, counts=None, out=None
) -> np.ndarray:
    """:meth:`AliasTable.sample_units` as it was before the pieces (``bench_sampler``'s
    copy: the words by AES-ECB, the lookups in 65,536-word steps), the counts added after
    into the new array of draws, as ``release_units`` then did (``out`` is not written:
    the measuring task uses the array returned); the same draws."""
    draws = previous_sample_units(self, n, PreviousWords(streams), units)
    if counts is not None:
        draws += counts
    return draws


def _least(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    best, result = np.inf, None
    for _ in range(repeats):
        c = time.process_time()
        result = fn()
        best = min(best, time.process_time() - c)
    return best, result


def _noise(tasks: list, repeats: int) -> tuple[dict, list]:
    """The answers' and the noise's CPU, previous and now, alternating; the chunks."""
    best = {"answers": np.inf, "previous": np.inf, "now": np.inf}
    chunks: list = []
    for _ in range(repeats):
        c = time.process_time()
        for t in tasks:
            for q, _ in t.queries:
                measure_mod._exact_answers(t.histogram, t.schema, q, t.structural_zeros)
        best["answers"] = min(best["answers"], time.process_time() - c)
        with mock.patch.object(_table.AliasTable, "sample_units", _previous_sample_units):
            c = time.process_time()
            before = [run_measure_task(t) for t in tasks]
            best["previous"] = min(best["previous"], time.process_time() - c)
        c = time.process_time()
        chunks = [run_measure_task(t) for t in tasks]
        best["now"] = min(best["now"], time.process_time() - c)
    same = all(
        np.array_equal(a.values, b.values)
        for x, y in zip(before, chunks, strict=True)
        for a, b in zip(x.queries, y.queries, strict=True)
    )
    # the tasks' CPU includes the answers; the noise is the rest
    out = {k: best[k] - best["answers"] for k in ("previous", "now")}
    out["answers"] = best["answers"]
    out["same_noise"] = same
    return out, chunks


def _tables(chunks: list) -> tuple[list[pa.Table], list]:
    """Every row group's stored columns and key, as the writer builds them."""
    tables, keys = [], []
    for ch in chunks:
        for mq in ch.queries:
            groups = nw.row_group_bounds(mq.values.shape[0], mq.rows.size, nw.ROW_GROUP_ROWS)
            cols = nw._QueryColumns(mq, ch.geocodes, max(b - a for a, b in groups))
            tables += [cols.table(a, b) for a, b in groups]
            keys += [cols.key(a, b) for a, b in groups]
    return tables, keys


def _tables_previous(tables: list[pa.Table], keys: list) -> list[pa.Table]:
    """The previous row groups: the one-value columns in every row (a one-entry
    dictionary's zero indices and a filled variance column, as the writer's cache of
    constant columns built them)."""
    return [with_one_value_columns(t, [k]) for t, k in zip(tables, keys, strict=True)]


_PREVIOUS_OPTIONS = {
    "compression": {
        c: "none" if c in ONE_VALUE_COLUMNS + ("value",) else "zstd" for c in NMF_COLUMNS
    },
    "use_dictionary": ["geolevel", "geocode", "query", "variance", "mechanism"],
    "column_encoding": {"cell": "DELTA_BINARY_PACKED", "value": "DELTA_BINARY_PACKED"},
    "write_statistics": [c for c in NMF_COLUMNS if c != "cell"],
    "write_batch_size": 1 << 16,
}
"""The previous :data:`~censusdp.io.nmf_write.WRITE_OPTIONS`: all seven columns in rows,
statistics on all but ``cell`` (the readers found a row group's level, query, variance
and geocodes there)."""


def _write_keyed(tables: list[pa.Table], keys: list) -> bytes:
    buf = io.BytesIO()
    w = pq.ParquetWriter(buf, nw.NMF_FILE_SCHEMA, **nw.WRITE_OPTIONS)
    for t in tables:
        w.write_table(t, row_group_size=max(t.num_rows, 1))
    w.add_key_value_metadata({ROW_GROUPS_KEY: encode_row_group_keys(keys)})
    w.close()
    return buf.getvalue()


@contextlib.contextmanager
def _same() -> Iterator[None]:
    yield


def block_tally(chunks: list, h) -> Tally:
    """An empty tally of the chunks' (level, query) pairs over their level's units."""
    level = chunks[0].geolevel
    li = h.geolevels.index(level)
    n = h.n_units(li)
    pairs = {(mq.geolevel, mq.query): float(mq.variance) for mq in chunks[0].queries}
    return Tally(
        {k: np.full(n, v) for k, v in pairs.items()},
        {k: np.zeros(n, dtype=np.int64) for k in pairs},
        {k: np.zeros(n, dtype=np.uint64) for k in pairs},
        {li: h.geocodes[li]},
        {level: li},
    )


def _check(path: Path, chunks: list, h) -> None:
    """The self-check's count of every row group of a part (``_nmf_rows.count_files``)."""
    problem = _nmf_rows.count_files(path, [path], block_tally(chunks, h))
    if problem:
        raise RuntimeError(problem)


_SCHEMA = pa.schema([pa.field(c, nw.NMF_SCHEMA.field(c).type, False) for c in NMF_COLUMNS])


def _write(tables: list[pa.Table], schema: pa.Schema, options: dict) -> bytes:
    buf = io.BytesIO()
    w = pq.ParquetWriter(buf, schema, **options)
    for t in tables:
        w.write_table(t, row_group_size=max(t.num_rows, 1))
    w.close()
    return buf.getvalue()


def _read(data: bytes, cells: list[np.ndarray]) -> None:
    """Every row group read back as the estimator reads it (values, cells checked)."""
    pf = pq.ParquetFile(io.BytesIO(data))
    for rg, rows in enumerate(cells):
        span = nmf_cache.GroupSpan(0, "bench", rg, pf.metadata.row_group(rg).num_rows)
        nmf_cache._read_group(pf, span, rows, "bench")


def _cells_of(data: bytes) -> list[np.ndarray]:
    """Per row group, the measured cells of its query (its first unit's cells)."""
    pf = pq.ParquetFile(io.BytesIO(data))
    out = []
    for rg in range(pf.metadata.num_row_groups):
        t = pf.read_row_group(rg, columns=["geocode", "cell"])
        codes = t.column("geocode").combine_chunks().indices.to_numpy()
        out.append(t.column("cell").to_numpy()[codes == codes[0]])
    return out


def _measure_run(label: str, budget, hist, h, args) -> dict:
    """One run's block tasks: every phase in CPU ns per noisy value."""
    bl = h.n_levels - 1
    schema = get_schema(budget.schema)
    plan = [
        (m.geolevel, m.query, m.mechanism)
        for m in budget.measurements()
        if m.geolevel == h.geolevels[bl].name
    ]
    tasks = list(measure_tasks(h.aggregate(hist), h, schema, plan, RandomSource.seeded(1)))
    tasks = tasks[: args.tasks]
    run_measure_task(tasks[0])  # the alias tables and query caches, built once
    noise, chunks = _noise(tasks, args.repeats)
    n = sum(ch.n_values for ch in chunks)
    say(f"{label}: {len(tasks)} block tasks, {n:,} noisy values")
    columns, (tables, keys) = _least(lambda: _tables(chunks), args.repeats)
    columns_prev, previous = _least(lambda: _tables_previous(tables, keys), args.repeats)
    cpu = {"previous": np.inf, "now": np.inf}
    data = {}
    for _ in range(args.repeats):
        c = time.process_time()
        data["previous"] = _write(previous, _SCHEMA, _PREVIOUS_OPTIONS)
        cpu["previous"] = min(cpu["previous"], time.process_time() - c)
        c = time.process_time()
        data["now"] = _write_keyed(tables, keys)
        cpu["now"] = min(cpu["now"], time.process_time() - c)
    sha = {
        k: _least(lambda d=d: hashlib.sha256(d).digest(), args.repeats)[0] for k, d in data.items()
    }
    cells = _cells_of(data["now"])
    read = {k: _least(lambda d=d: _read(d, cells), args.repeats)[0] for k, d in data.items()}
    check = {}
    with tempfile.TemporaryDirectory(prefix="bench_hh_check_") as d:
        for k, b in data.items():
            f = Path(d) / f"{k}.parquet"
            f.write_bytes(b)
            # previous: every row counted one by one; now: whole units counted by units
            rows = k == "previous"
            with mock.patch.object(_nmf_rows, "_tiles", lambda c, x: None) if rows else _same():
                check[k] = _least(lambda f=f: _check(f, chunks, h), args.repeats)[0]

    def ns(sec: float) -> float:
        return round(sec / n * 1e9, 1)

    out = {
        "block_tasks": len(tasks),
        "noisy_values": n,
        "ns_per_value": {
            "answers": ns(noise["answers"]),
            "noise": {"previous": ns(noise["previous"]), "now": ns(noise["now"])},
            "columns": {"previous": ns(columns + columns_prev), "now": ns(columns)},
            "parquet": {"previous": ns(cpu["previous"]), "now": ns(cpu["now"])},
            "sha256": {"previous": ns(sha["previous"]), "now": ns(sha["now"])},
            "read": {"previous": ns(read["previous"]), "now": ns(read["now"])},
            "check": {"previous": ns(check["previous"]), "now": ns(check["now"])},
        },
        "same_noise": noise["same_noise"],
        "bytes_per_value": {k: round(len(d) / n, 3) for k, d in data.items()},
    }
    p = out["ns_per_value"]
    phases = ("noise", "columns", "parquet", "sha256")
    for key in (*phases, "read", "check"):
        p[key]["speedup"] = round(p[key]["previous"] / max(p[key]["now"], 1e-9), 2)
    p["total"] = {
        k: round(p["answers"] + sum(p[x][k] for x in phases), 1) for k in ("previous", "now")
    }
    p["total"]["speedup"] = round(p["total"]["previous"] / max(p["total"]["now"], 1e-9), 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", type=Path, help="a generated state (default: VT x0.1, seed 1)")
    ap.add_argument("--work", type=Path, help="where the default input is generated (cached)")
    ap.add_argument("--tasks", type=int, default=2, help="block tasks of each run")
    ap.add_argument("--repeats", type=int, default=3, help="repeats (least CPU kept)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_hh_measure_") as tmp:
        work = args.work or Path(tmp)
        input_dir = args.input or cached_input(work, "VT", 0.1, seed=1)
        persons, households = load_preset("ddp-2010"), load_preset("ddp-2010-households")
        cef = read_cef_blocks(
            input_dir,
            GeoLevels.from_pairs(list(persons.geolevels)),
            get_schema(persons.schema),
            with_units="households",
        )
        h = cef.hierarchy
        out = {
            "benchmark": "bench_hh_measure",
            "machine": platform.platform(),
            "cpus": os.cpu_count(),
            "load_average": [round(v, 2) for v in os.getloadavg()],
            "input": str(args.input or "generated VT x0.1 seed 1"),
            "repeats": args.repeats,
            "persons": _measure_run("persons", persons, cef.persons, h, args),
            "households": _measure_run("households", households, cef.households, h, args),
        }
        out["load_average_after"] = [round(v, 2) for v in os.getloadavg()]
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
