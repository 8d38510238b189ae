"""The MDF as part files: checked by the task that wrote each part, and by the self-check.

A run writes ``mdf_persons.parquet/``, ``mdf_units.parquet/`` and their MDF2020 text
directories as parts, one per run of blocks (``release.parts.run_mdf_part_task``), and
each task reads its part back against the estimate; ``validate_run`` reads the parts as
tasks (``release.validate._mdf_parts._count_mdf_part``) and puts their per-block counts together.
Every kind of damage must still be caught: a changed person, a dropped part, a bad
checksum, a part from another run, each with and without a forger who rewrites the
checksums (the manifest's and the part indexes').
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

import censusdp.release.parts as release_parts
from censusdp.data.schema import get_schema
from censusdp.errors import InternalError
from censusdp.execution import InProcessExecutor
from censusdp.io.budget_files import load_preset
from censusdp.io.mdf_parts import BlockCounts, mdf_part_counts
from censusdp.io.mdf_read import read_mdf_persons, read_mdf_units
from censusdp.io.mdf_text import read_mdf_text
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.options import Execution, ReleaseOptions
from censusdp.release.parts import MDFPartTask, mdf_part_ranges, run_mdf_part_task
from censusdp.release.pipeline import run_release
from censusdp.release.validate import validate_run
from synth import block_codes, make_cef, tree_bytes, write_cef

DIRS = ("mdf_persons.parquet", "mdf_units.parquet", "mdf_persons.txt", "mdf_units.txt")
TABLES = ("P1", "P2", "P3", "P4", "P5", "H1")
BLOCKS_PER_PART = 5


def _release(base: Path, name: str, seed: int) -> Path:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(release_parts, "MDF_PART_BLOCKS", BLOCKS_PER_PART)
        run_release(
            base / "cef",
            base / name,
            ReleaseBudget(load_preset("pl94-2020"), load_preset("pl94-2020-units")),
            ReleaseOptions(seed=seed),
        )
    return base / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    """A release, and a scratch directory."""
    base = tmp_path_factory.mktemp("mdfparts")
    persons, units = make_cef(np.random.default_rng(5), block_codes(2, 2, 2, 3), gq_rate=0.3)
    write_cef(base / "cef", persons, units)
    return _release(base, "a", seed=1), base


def test_parts_cover_the_blocks_and_read_as_one_file(runs) -> None:
    run = runs[0]
    manifest = json.loads((run / "manifest.json").read_text())
    nb = pq.read_metadata(run / "invariants.parquet").num_rows
    n_parts = -(-nb // BLOCKS_PER_PART)
    index = json.loads((run / "tables" / "P3.parquet" / "_parts.json").read_text())
    assert [p["file"] for p in index["parts"]] == [
        f"part-{i:05d}.parquet" for i in range(n_parts + 1)
    ]
    assert index["parts"][0]["geolevel"] == "US,State,County,Tract,BlockGroup"
    assert {p["geolevel"] for p in index["parts"][1:]} == {"Block"}
    table = pq.read_table(run / "tables" / "P3.parquet")  # the parts: one table, in order
    assert table.column("geolevel").to_pylist()[0] == "US" and table.num_rows == index["rows"]
    assert table.column("geocode").to_pylist()[-nb:] == sorted(
        table.column("geocode").to_pylist()[-nb:]
    )
    for d in DIRS:
        index = json.loads((run / d / "_parts.json").read_text())
        assert [p["file"][:10] for p in index["parts"]] == [f"part-{i:05d}" for i in range(n_parts)]
        assert [(p["start"], p["stop"]) for p in index["parts"]] == [
            (a, min(a + BLOCKS_PER_PART, nb)) for a in range(0, nb, BLOCKS_PER_PART)
        ]
        for p in index["parts"]:  # the index's digests are the files'
            digest = hashlib.sha256((run / d / p["file"]).read_bytes()).hexdigest()
            assert p["sha256"] == digest == manifest["files"][f"{d}/{p['file']}"]
    assert manifest["executor"]["mdf_parts"] == n_parts
    persons = read_mdf_persons(run / "mdf_persons.parquet")
    assert persons["geocode"].size == manifest["persons_released"] > 0
    assert list(persons["geocode"]) == sorted(persons["geocode"])  # block order across parts
    units = read_mdf_units(run / "mdf_units.parquet")
    assert units["geocode"].size == manifest["units_released"]
    # the text parts concatenated are one MDF2020 file: one header, EPNUM 0..n-1 in order
    lines = read_mdf_text(run / "mdf_persons.txt").decode("ascii").splitlines()
    assert lines[0].startswith("SCHEMA_TYPE_CODE|") and lines.count(lines[0]) == 1
    epnum = lines[0].split("|").index("EPNUM")
    assert [int(x.split("|")[epnum]) for x in lines[1:]] == list(range(len(lines) - 1))
    table = pq.read_table(run / "mdf_persons.parquet")  # a Parquet dataset (Spark, DuckDB)
    assert table.num_rows == len(lines) - 1
    assert table.column("EPNUM").to_pylist() == list(range(table.num_rows))


def test_part_ranges_depend_on_counts_only() -> None:
    per = np.array([0, 3, 9, 0, 0, 1, 20, 2, 2, 0])
    ranges = mdf_part_ranges(per, max_persons=10, max_blocks=3)
    assert ranges[0] == (0, 2) and ranges[-1][1] == per.size
    assert all(b - a <= 3 for a, b in ranges)
    assert [a for a, _ in ranges[1:]] == [b for _, b in ranges[:-1]]
    for a, b in ranges:  # within the person cap unless one block alone exceeds it
        assert per[a:b].sum() <= 10 or b - a == 1
    assert (6, 7) in ranges  # the block of 20 persons alone
    assert mdf_part_ranges(np.zeros(0, np.int64)) == [(0, 0)]


def test_intact_parts_validate_serially_and_as_tasks(runs) -> None:
    run = runs[0]
    serial, tasks = validate_run(run), validate_run(run, executor=InProcessExecutor())
    assert serial.ok and tasks.ok, serial.failures()
    assert serial.checks == tasks.checks
    assert tasks.task_cpu_seconds > 0  # the parts were read by tasks


def _forge(run: Path) -> None:
    """Rewrite every index digest and the manifest's checksums to the files' own."""
    for index in run.glob("*/_parts.json"):
        data = json.loads(index.read_text())
        for p in data["parts"]:
            f = index.parent / p["file"]
            if f.is_file():
                p["sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()
        index.write_text(json.dumps(data))
    m = json.loads((run / "manifest.json").read_text())
    m["files"] = {
        str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    }
    (run / "manifest.json").write_text(json.dumps(m))


def _change_person(run: Path, other: Path) -> None:
    p = run / "mdf_persons.parquet" / "part-00001.parquet"
    t = pq.read_table(p)
    race = t.column("CENRACE").cast(pa.string()).to_pylist()
    race[0] = "02" if race[0] != "02" else "03"
    t = t.set_column(t.column_names.index("CENRACE"), "CENRACE", pa.array(race))
    pq.write_table(t, p)


def _drop_part(run: Path, other: Path) -> None:
    for d in DIRS:
        f = next((run / d).glob("part-00002.*"))
        f.unlink()
        index = json.loads((run / d / "_parts.json").read_text())
        index["parts"] = [p for p in index["parts"] if p["file"] != f.name]
        (run / d / "_parts.json").write_text(json.dumps(index))


def _flip_byte(run: Path, other: Path) -> None:
    p = run / "mdf_persons.txt" / "part-00001.txt"
    data = bytearray(p.read_bytes())
    data[-2] = ord("1") if data[-2] != ord("1") else ord("2")
    p.write_bytes(bytes(data))


def _foreign_part(run: Path, tmp: Path) -> None:
    """Part 1 of every MDF directory (and its tables' rows) as another run writes it: an
    estimate that differs in one person's race, written by the same task, its index
    entries taken along."""
    index = json.loads((run / "mdf_persons.parquet" / "_parts.json").read_text())
    first = index["parts"][0]["rows"]
    a, b = index["parts"][1]["start"], index["parts"][1]["stop"]
    inv = pq.read_table(run / "invariants.parquet")
    blocks = np.asarray(inv.column("geocode").to_pylist())[a:b]
    gq = np.stack(
        [np.zeros(b - a, np.int64)]
        + [inv.column(f"gq_facilities_{g}").to_numpy()[a:b] for g in range(1, 8)],
        axis=1,
    )
    hist, _, counts = mdf_part_counts(
        run / "mdf_persons.parquet" / "part-00001.parquet",
        run / "mdf_units.parquet" / "part-00001.parquet",
        blocks,
        get_schema("pl94"),
    )
    dense = hist.toarray()
    row, cell = np.argwhere(dense > 0)[0]
    dense[row, cell] -= 1
    dense[row, (cell + 63) % dense.shape[1]] += 1  # another race, the same block
    other = tmp / "other"
    other.mkdir()
    res = run_mdf_part_task(
        MDFPartTask(
            1, a, b,
            BlockCounts(
                blocks, sp.csr_matrix(dense), "pl94", counts[:, 0] + counts[:, 1], counts[:, 1], gq
            ),
            first, str(other),
        )
    )  # fmt: skip
    assert res["problem"] is None
    for d in (*DIRS, *(f"tables/{t}.parquet" for t in TABLES)):
        f = next((other / d).glob("part-*"))
        shutil.copyfile(f, run / d / f.name)
        mine = json.loads((run / d / "_parts.json").read_text())
        entry = next(p for p in mine["parts"] if p["file"] == f.name)
        entry["sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()
        (run / d / "_parts.json").write_text(json.dumps(mine))


def _table_cell(part: str):
    def change(run: Path, other: Path) -> None:
        p = run / "tables" / "P1.parquet" / part
        t = pq.read_table(p)
        v = t.column("P1_001N").to_numpy().copy()
        v[-1] += 1
        pq.write_table(t.set_column(t.column_names.index("P1_001N"), "P1_001N", pa.array(v)), p)

    return change


DAMAGE = {
    "changed person": _change_person,
    "table block part changed": _table_cell("part-00002.parquet"),
    "table part 0 changed": _table_cell("part-00000.parquet"),
    "dropped part": _drop_part,
    "bad checksum": _flip_byte,
    "part from another run": _foreign_part,
}


CASES = [(c, False) for c in sorted(DAMAGE)] + [
    (c, True)
    for c in sorted(DAMAGE)
    if c != "bad checksum"  # forged: a different file
]


@pytest.mark.parametrize(("case", "forged"), CASES)
def test_each_damage_is_caught(runs, tmp_path: Path, case: str, forged: bool) -> None:
    run = tmp_path / "run"
    shutil.copytree(runs[0], run)
    DAMAGE[case](run, tmp_path)
    if forged:
        _forge(run)
    report = validate_run(run, executor=InProcessExecutor())
    assert not report.ok, case
    failed = {k for k, v in report.checks.items() if not v["ok"]}
    if not forged:
        assert "checksums" in failed
    else:
        # the content checks alone: the MDF no longer is the release the tables describe
        assert failed & {"tables_match_mdf", "mdf_readable", "constraints_and_invariants"}, failed
        if case.startswith("table"):
            # and the table's CSV no longer holds its Parquet's rows
            assert failed == {"tables_match_mdf", "tables_csv"}, failed
    assert validate_run(run).checks == report.checks  # the same verdict without an executor


def test_a_text_part_that_disagrees_with_its_index_is_caught(runs, tmp_path: Path) -> None:
    """A text line dropped, with the manifest's checksums (not the index's) rewritten."""
    run = tmp_path / "run"
    shutil.copytree(runs[0], run)
    p = run / "mdf_units.txt" / "part-00002.txt"
    p.write_bytes(b"".join(p.read_bytes().splitlines(keepends=True)[1:]))
    m = json.loads((run / "manifest.json").read_text())
    m["files"]["mdf_units.txt/part-00002.txt"] = hashlib.sha256(p.read_bytes()).hexdigest()
    (run / "manifest.json").write_text(json.dumps(m))
    report = validate_run(run)
    assert not report.checks["mdf_readable"]["ok"]
    assert "mdf_units.txt/part-00002.txt" in report.checks["mdf_readable"]["detail"]


@pytest.mark.slow  # a release of its own
def test_the_writing_task_catches_a_part_that_is_not_the_estimate(runs, tmp_path) -> None:
    """The run's own check is in the task: a part written wrong stops the release."""
    real = release_parts.write_mdf_part

    def lossy(*args, **kwargs):
        out = real(*args, **kwargs)
        path = args[1]["persons"][0]
        t = pq.read_table(path)
        if t.num_rows:
            pq.write_table(t.slice(1), path)
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(release_parts, "write_mdf_part", lossy)
        with pytest.raises(InternalError, match="mdf_matches_histogram"):
            run_release(
                runs[0].parent / "cef",
                tmp_path / "bad",
                ReleaseBudget(load_preset("pl94-2020"), load_preset("pl94-2020-units")),
                ReleaseOptions(seed=1),
            )
    assert not (tmp_path / "bad").exists()


@pytest.mark.slow  # starts a process pool
def test_pool_writes_the_same_parts(runs, tmp_path: Path) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(release_parts, "MDF_PART_BLOCKS", BLOCKS_PER_PART)
        m = run_release(
            runs[0].parent / "cef",
            tmp_path / "pool",
            ReleaseBudget(load_preset("pl94-2020"), load_preset("pl94-2020-units")),
            ReleaseOptions(seed=1),
            Execution(workers=2),
        )
    assert m["executor"]["mdf_parts_by_driver"] is False
    for d in (*DIRS, "tables"):
        assert tree_bytes(tmp_path / "pool" / d) == tree_bytes(runs[0] / d), d
    # censusdp validate --workers 2: the parts read on a pool, the same verdicts
    pooled = validate_run(runs[0], workers=2)
    assert pooled.checks == validate_run(runs[0]).checks and pooled.task_cpu_seconds > 0


def test_a_single_file_release_still_reads_and_validates(runs, tmp_path: Path) -> None:
    """Releases made before part files have one file each: the same records, read and
    validated by the same readers (the parts concatenated are that file)."""
    run = tmp_path / "single"
    shutil.copytree(runs[0], run)
    for name in (*DIRS, *(f"tables/{t}.parquet" for t in TABLES)):
        d = run / name
        if name.endswith(".txt"):
            data = read_mdf_text(d)
            shutil.rmtree(d)
            d.write_bytes(data)
        else:
            table = pq.read_table(d)
            shutil.rmtree(d)
            pq.write_table(table, d)
    _forge(run)
    report = validate_run(run)
    assert report.ok, report.failures()
    assert report.task_cpu_seconds == 0  # no MDF part was read by a task
    for read in (read_mdf_persons, read_mdf_units):
        a = read(runs[0] / f"mdf_{read.__name__.split('_')[-1]}.parquet")
        b = read(run / f"mdf_{read.__name__.split('_')[-1]}.parquet")
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    # and damage is still caught there
    p = run / "mdf_persons.parquet"
    pq.write_table(pq.read_table(p).slice(1), p)
    _forge(run)
    assert not validate_run(run).checks["tables_match_mdf"]["ok"]
