"""MDF and table part files written and checked by tasks, against the previous method: the
driver writing the MDF and the tables as single files and reading them back twice.

Reads a generated state (``censusdp generate``, cached in ``--work``) into its block
histograms and releases them as they are (the MDF writer does not care whether counts
are estimated: the cost is per person and per unit). Then, on the same histograms:

* ``single_file`` (the previous method, all on the driver): ``MDFPersonWriter`` block
  chunk by block chunk and ``write_mdf_units`` (Parquet and MDF2020 text) and
  ``write_tables``, the run's check (``read_mdf_histograms`` compared with the released
  histogram, the tables read back against the tabulation of the MDF, one at a time),
  the manifest's SHA-256 of the files, and the self-check's second reading
  (``mdf_unit_counts``, ``read_mdf_histograms``, the tables again) with its SHA-256 of
  the files again;
* ``parts`` on a process pool of ``--workers`` and in-process: the tables' part 0 task
  and the MDF tasks (``run_mdf_part_task``: write the MDF part and its tables' block
  rows, flush, hash, read them back and check them), the driver writing the indexes,
  and the self-check's part reading as tasks (``release.validate._mdf_parts.mdf_from_parts``)
  with part 0 of the tables checked on the driver; the driver's CPU is the driver
  process's own.

The parts' bytes are compared between the executors, and the text parts concatenated
with the single text file. CPU seconds are the process's (``time.process_time``) and do
not depend on other load; wall seconds do. Prints one JSON object.

    .venv/bin/python benchmarks/bench_mdf_parts.py --state WY --scale 0.25 --workers 2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from _harness import cached_input, clock, say, since  # noqa: E402
from censusdp.data.geography import GeoLevels
from censusdp.data.histograms import unit_histogram_from_counts
from censusdp.data.schema import get_schema
from censusdp.execution import InProcessExecutor, ProcessPoolExecutor
from censusdp.io.atomic import write_parquet
from censusdp.io.budget_files import load_preset
from censusdp.io.cef_stream import read_cef_blocks
from censusdp.io.layout import MDF_FILES
from censusdp.io.mdf_parts import BlockCounts
from censusdp.io.mdf_read import mdf_unit_counts, read_mdf_histograms
from censusdp.io.mdf_records import iter_mdf_blocks
from censusdp.io.mdf_text import read_mdf_text
from censusdp.io.mdf_write import MDFPersonWriter, write_mdf_units
from censusdp.io.tables import read_table_arrays, write_table_index, write_tables
from censusdp.release.manifest import file_checksums
from censusdp.release.parts import (
    TablesTask,
    mdf_part_tasks,
    run_mdf_part_task,
    run_tables_task,
    write_mdf_index,
)
from censusdp.release.validate._entries import Hashed
from censusdp.release.validate._mdf import _check_tables
from censusdp.release.validate._mdf_parts import mdf_from_parts
from censusdp.tables import TABLE_NAMES, tables_to_arrays, tabulate_histograms


def _tree_sha(path: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in path.rglob("*") if p.is_file()):
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()


def _single_file(out: Path, blocks, occupied, schema) -> dict:
    """The previous method, every step on the driver; returns its CPU by step."""
    h, inv = blocks.hierarchy, blocks.invariants
    out.mkdir(parents=True, exist_ok=True)
    write_parquet(inv.to_table(), out / "invariants.parquet")  # facility types (not timed)
    steps = {}
    t = clock()
    with MDFPersonWriter(h, out / "mdf_persons.parquet", out / "mdf_persons.txt", schema) as w:
        for cols in iter_mdf_blocks(blocks.persons, schema):
            w.write(cols)
    write_mdf_units(
        h,
        inv.housing_units,
        occupied,
        inv.gq_facilities,
        out / "mdf_units.parquet",
        out / "mdf_units.txt",
    )
    units = unit_histogram_from_counts(inv.housing_units, occupied, inv.gq_facilities)
    write_tables(tabulate_histograms(blocks.persons, units, h), out / "tables")
    steps["write"] = since(t)
    t = clock()
    hist, pl94, mdf_units = read_mdf_histograms(out, h, schema)  # the run's check
    diff = sp.csr_matrix(hist - blocks.persons)
    diff.eliminate_zeros()
    assert diff.nnz == 0 and _tables_equal(out, h, pl94, mdf_units)
    steps["run_check_read_back"] = since(t)
    t = clock()
    file_checksums(out)  # the manifest's checksums (the invariants' too: a few ms)
    steps["manifest_sha256"] = since(t)
    t = clock()
    mdf_unit_counts(out / "mdf_units.parquet", h)  # the self-check's second reading
    _, pl94, mdf_units = read_mdf_histograms(out, h, schema)
    assert _tables_equal(out, h, pl94, mdf_units)
    file_checksums(out)
    steps["self_check_read_and_sha256"] = since(t)
    total = {
        "cpu_s": round(sum(s["cpu_s"] for s in steps.values()), 3),
        "wall_s": round(sum(s["wall_s"] for s in steps.values()), 3),
    }
    return {"driver": total, "steps": steps, "persons": w.persons}


def _tables_equal(out: Path, h, pl94, units) -> bool:
    """The written tables equal the tabulation of the MDF read back, one at a time (the
    previous run check and self-check)."""
    for name in TABLE_NAMES:
        written = read_table_arrays(out / "tables", h, (name,))[name]
        mine = tables_to_arrays(tabulate_histograms(pl94, units, h, (name,)), h)[name]
        if not all(np.array_equal(a, b) for a, b in zip(written, mine, strict=True)):
            return False
    return True


def _parts(out: Path, blocks, occupied, schema, ex) -> dict:
    """Part files on ``ex``: the driver's own CPU and the tasks' CPU (MDF and tables)."""
    h, inv = blocks.hierarchy, blocks.invariants
    out.mkdir(parents=True, exist_ok=True)
    write_parquet(inv.to_table(), out / "invariants.parquet")
    t = clock()
    units = unit_histogram_from_counts(inv.housing_units, occupied, inv.gq_facilities)
    p_levels, u_levels = h.aggregate(blocks.persons), h.aggregate(units)
    top_job = TablesTask(
        [
            (lv.name, lv.length, c)
            for lv, c in zip(h.geolevels.levels[:-1], h.geocodes[:-1], strict=True)
        ],
        sp.vstack(p_levels[:-1], format="csr"),
        sp.vstack(u_levels[:-1], format="csr"),
        str(out),
    )
    (top,) = list(ex.map(run_tables_task, [top_job]))
    released = BlockCounts(
        h.blocks, blocks.persons, schema.name, inv.housing_units, occupied, inv.gq_facilities
    )
    jobs = mdf_part_tasks(released, out)
    got = list(ex.map(run_mdf_part_task, jobs))
    write_mdf_index(out, got)
    write_table_index(out / "tables", [top["tables"]] + [g["tables"] for g in got])
    write_step = since(t)
    assert not [g["problem"] or g["table_problem"] for g in got if g["problem"]]
    assert not top["table_problem"] and not any(g["table_problem"] for g in got)
    t = clock()
    file_checksums(out)  # indexes and nothing else: the parts' digests are the tasks'
    manifest = since(t)
    t = clock()
    hashed = Hashed()
    hist, pl94, counts, bad, _ = mdf_from_parts(out, h, inv, schema, ex, hashed)
    mdf_units = unit_histogram_from_counts(
        counts[:, 0] + counts[:, 1], counts[:, 1], inv.gq_facilities
    )
    bad += _check_tables(out, h, pl94, mdf_units, in_parts=True)
    self_check = since(t)
    assert not bad, bad
    diff = sp.csr_matrix(hist - blocks.persons)
    diff.eliminate_zeros()
    assert diff.nnz == 0 and counts[:, 2].sum() == inv.gq_facilities.sum()
    task_cpu = sum(g["write_cpu_seconds"] + g["check_cpu_seconds"] for g in got)
    task_cpu += top["cpu_seconds"]
    return {
        "driver_write_and_run_check": write_step,
        "driver_manifest_sha256": {"cpu_s": manifest["cpu_s"], "wall_s": manifest["wall_s"]},
        "driver_self_check": self_check,
        "tasks_write_and_check_cpu_s": round(task_cpu, 3),
        "tasks_write_cpu_s": round(sum(g["write_cpu_seconds"] for g in got), 3),
        "parts": len(got),
        "writers": len({g["writer"] for g in got}),
        "self_check_hashed_by_tasks": len(hashed),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state", default="WY")
    ap.add_argument("--scale", type=float, default=0.25)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--work", default=None, help="work directory (default: a temp dir)")
    ap.add_argument("--input", default=None, help="a generated CEF directory to use instead")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="censusdp_mdfparts_"))
    work.mkdir(parents=True, exist_ok=True)
    cef = Path(args.input) if args.input else cached_input(work, args.state, args.scale)
    budget = load_preset("pl94-2020")
    schema = get_schema(budget.schema)
    blocks = read_cef_blocks(cef, GeoLevels.from_pairs(list(budget.geolevels)), schema)
    occupied = np.asarray(blocks.housing_units[:, 1].todense()).ravel().astype(np.int64)
    n_persons = int(blocks.persons.sum())
    say(f"{n_persons:,} persons, {blocks.hierarchy.blocks.size:,} blocks")

    say("previous method: single files written and read back twice on the driver")
    single = _single_file(work / "single", blocks, occupied, schema)

    runs = {}
    for name, ex in (
        ("inprocess", InProcessExecutor()),
        (f"pool{args.workers}", ProcessPoolExecutor(args.workers)),
    ):
        say(f"part files on {name}")
        runs[name] = _parts(work / name, blocks, occupied, schema, ex)
        close = getattr(ex, "close", None)
        if close is not None:
            close()
    pool = runs[f"pool{args.workers}"]
    pool_driver = sum(
        pool[k]["cpu_s"]
        for k in ("driver_write_and_run_check", "driver_manifest_sha256", "driver_self_check")
    )
    names = [n for pair in MDF_FILES.values() for n in pair]
    same = all(
        _tree_sha(work / "inprocess" / n) == _tree_sha(work / f"pool{args.workers}" / n)
        for n in names
    )
    text_same = all(
        read_mdf_text(work / "inprocess" / txt) == (work / "single" / txt).read_bytes()
        for _, txt in MDF_FILES.values()
    )
    tables_same = all(
        _tree_sha(work / "inprocess" / "tables" / f"{n}.parquet")
        == _tree_sha(work / f"pool{args.workers}" / "tables" / f"{n}.parquet")
        for n in TABLE_NAMES
    )
    result = {
        "benchmark": "mdf_parts",
        "config": f"{args.state}:{args.scale}",
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "load_average": os.getloadavg(),
        "persons": n_persons,
        "blocks": int(blocks.hierarchy.blocks.size),
        "single_file": single,
        "parts": runs,
        "driver_cpu_s": {
            "single_file": single["driver"]["cpu_s"],
            f"parts_pool{args.workers}": round(pool_driver, 3),
            "ratio": round(pool_driver / max(single["driver"]["cpu_s"], 1e-9), 4),
        },
        "driver_cpu_us_per_person": {
            "single_file": round(single["driver"]["cpu_s"] / max(n_persons, 1) * 1e6, 2),
            f"parts_pool{args.workers}": round(pool_driver / max(n_persons, 1) * 1e6, 2),
        },
        "parts_byte_identical_across_executors": same,
        "text_parts_concatenated_equal_single_file": text_same,
        "table_parts_byte_identical_across_executors": tables_same,
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
