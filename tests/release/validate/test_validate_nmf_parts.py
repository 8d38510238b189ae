"""The NMF check of ``validate_run`` on part files, serially and as executor tasks.

A run's self-check counts the parts of a partitioned NMF on the run's executor
(``release.validate._nmf._count_parts``); ``censusdp validate`` reads them one after another.
Both must reach the same verdict on an intact NMF and on every kind of damage.
"""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from censusdp.execution import InProcessExecutor
from censusdp.io.budget_files import load_preset
from censusdp.io.nmf_files import ROW_GROUPS_KEY, read_nmf_table
from censusdp.io.nmf_write import WRITE_OPTIONS
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.options import ReleaseOptions
from censusdp.release.pipeline import run_release
from censusdp.release.validate import validate_run
from synth import block_codes, make_cef, write_cef

NMF = "noisy_measurements.parquet"


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("nmfparts")
    persons, units = make_cef(np.random.default_rng(3), block_codes(2, 2, 2, 3), gq_rate=0.3)
    write_cef(base / "cef", persons, units)
    run_release(
        base / "cef",
        base / "run",
        ReleaseBudget(load_preset("pl94-2020")),
        ReleaseOptions(seed=2, postprocess="none"),
    )
    return base / "run"


def _verdicts(run: Path) -> tuple[dict, dict]:
    serial = validate_run(run, mdf=False).checks["nmf_persons"]
    tasks = validate_run(run, mdf=False, executor=InProcessExecutor()).checks["nmf_persons"]
    return serial, tasks


def _newest_first(run: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The verdict of tasks reading the parts last first (a run's check right after
    measuring: ``validate.measured``)."""
    from censusdp.release.validate import _nmf
    from censusdp.release.validate import run as run_mod

    monkeypatch.setattr(run_mod, "check_nmf", functools.partial(_nmf.check_nmf, newest_first=True))
    return validate_run(run, mdf=False, executor=InProcessExecutor()).checks["nmf_persons"]


def test_intact_parts_pass_both_ways(measured: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parts = sorted((measured / NMF).glob("part-*.parquet"))
    assert len(parts) >= 6  # one per level at least
    serial, tasks = _verdicts(measured)
    assert serial["ok"] and tasks["ok"] and serial["detail"] == tasks["detail"]
    assert _newest_first(measured, monkeypatch) == tasks


@pytest.mark.slow  # starts a process pool
def test_workers_check_parts_on_a_pool(measured: Path, tmp_path: Path) -> None:
    """``censusdp validate --workers 2``: the same verdicts, intact and damaged."""
    serial, _ = _verdicts(measured)
    pool = validate_run(measured, mdf=False, workers=2)
    assert pool.checks["nmf_persons"] == serial and pool.ok
    run = tmp_path / "run"
    shutil.copytree(measured, run)
    DAMAGE["row dropped"](run)
    assert not validate_run(run, mdf=False, workers=2).checks["nmf_persons"]["ok"]


def _drop_row(p: Path) -> None:
    t = read_nmf_table(p)
    pq.write_table(t.slice(1), p)


def _move_geocode(p: Path) -> None:
    t = read_nmf_table(p)
    codes = t.column("geocode").cast(pa.string()).to_pylist()
    codes[-1] = codes[0]
    t = t.set_column(t.column_names.index("geocode"), "geocode", pa.array(codes))
    pq.write_table(t, p)


def _lie_in_index(run: Path) -> None:
    path = run / NMF / "_parts.json"
    index = json.loads(path.read_text())
    index["parts"][-1]["start"] += 1
    path.write_text(json.dumps(index))


def _set_column(p: Path, name: str, values: pa.Array) -> None:
    t = read_nmf_table(p)
    pq.write_table(t.set_column(t.column_names.index(name), name, values), p)


def _scale_variance(p: Path) -> None:
    """Every row of the part claims another variance (one value: the footer path)."""
    var = read_nmf_table(p, columns=["variance"]).column("variance").to_numpy()
    _set_column(p, "variance", pa.array(var * 1.5))


def _null_value(p: Path) -> None:
    """One value missing (an integer column with a null: the footer must not vouch)."""
    vals = read_nmf_table(p, columns=["value"]).column("value").to_pylist()
    vals[len(vals) // 2] = None
    _set_column(p, "value", pa.array(vals, pa.int64()))


def _null_geocode(p: Path) -> None:
    """One geocode missing (a string column with a null: read one string per row)."""
    codes = read_nmf_table(p, columns=["geocode"]).column("geocode").cast(pa.string()).to_pylist()
    codes[len(codes) // 2] = None
    _set_column(p, "geocode", pa.array(codes, pa.string()))


def _fractional_value(p: Path) -> None:
    vals = read_nmf_table(p, columns=["value"]).column("value").to_numpy().astype(np.float64)
    vals[0] += 0.5
    _set_column(p, "value", pa.array(vals))


def _rename_query(p: Path) -> None:
    """Every row of the part claims another query (one value: the footer path)."""
    t = read_nmf_table(p, columns=["query"])
    _set_column(p, "query", pa.array(["not_" + str(t.column("query")[0])] * t.num_rows))


def _other_level(p: Path) -> None:
    """The last row of the part (in its own row group) claims the part's other level."""
    t = read_nmf_table(p)
    levels = t.column("geolevel").cast(pa.string()).to_pylist()
    levels[-1] = "Block" if levels[-1] != "Block" else "Tract"
    t = t.set_column(t.column_names.index("geolevel"), "geolevel", pa.array(levels))
    pq.write_table(t, p, row_group_size=max(1, t.num_rows - 1))


def _rekey(p: Path, field: str, change) -> None:
    """The part rewritten with its rows and row groups as they are and one field of
    every row-group key changed (the layout that holds them once per row group)."""
    pf = pq.ParquetFile(p)
    keys = json.loads(pf.metadata.metadata[ROW_GROUPS_KEY])
    at = keys["fields"].index(field)
    for row in keys["row_groups"]:
        row[at] = change(row[at])
    kv = {**pf.metadata.metadata, ROW_GROUPS_KEY: json.dumps(keys).encode()}
    groups = [pf.read_row_group(i) for i in range(pf.metadata.num_row_groups)]
    with pq.ParquetWriter(p, pf.schema_arrow.with_metadata(kv)) as w:
        for t in groups:
            w.write_table(t, row_group_size=max(t.num_rows, 1))


def _rows_unlike_keys(p: Path, name: str, change, statistics: list[str]) -> None:
    """The part rewritten as the writer writes it (its encodings, ``statistics`` on the
    columns listed, its row-group keys kept) with column ``name`` of every row changed:
    a column the footer does not settle is read, and must be what the keys say."""
    pf = pq.ParquetFile(p)
    schema = pf.schema_arrow.with_metadata(pf.metadata.metadata)  # the keys kept
    options = {**WRITE_OPTIONS, "write_statistics": statistics}
    with pq.ParquetWriter(p.with_suffix(".tmp"), schema, **options) as w:
        for i in range(pf.metadata.num_row_groups):
            t = pf.read_row_group(i)
            at = t.column_names.index(name)
            t = t.set_column(at, schema.field(name), change(t.column(name)))
            w.write_table(t, row_group_size=max(t.num_rows, 1))
    p.with_suffix(".tmp").replace(p)


def _renamed(col: pa.ChunkedArray) -> pa.Array:
    names = ["not_" + str(v) for v in col.to_pylist()]
    return pa.array(names).dictionary_encode()


def _scaled(col: pa.ChunkedArray) -> pa.Array:
    return pa.array(col.to_numpy() * 1.5)


DAMAGE = {
    "rows: query renamed, no statistics": lambda run: _rows_unlike_keys(
        run / NMF / "part-00004.parquet", "query", _renamed, ["variance"]
    ),
    "rows: variance changed, no statistics": lambda run: _rows_unlike_keys(
        run / NMF / "part-00005.parquet", "variance", _scaled, []
    ),
    "key: query renamed": lambda run: _rekey(
        run / NMF / "part-00004.parquet", "query", lambda q: "not_" + q
    ),
    "key: variance changed": lambda run: _rekey(
        run / NMF / "part-00005.parquet", "variance", lambda v: v * 1.5
    ),
    "key: level changed": lambda run: _rekey(
        run / NMF / "part-00003.parquet", "geolevel", lambda v: "Tract" if v != "Tract" else "Block"
    ),
    "key: rows changed": lambda run: _rekey(
        run / NMF / "part-00003.parquet", "rows", lambda n: n + 1
    ),
    "query renamed": lambda run: _rename_query(run / NMF / "part-00004.parquet"),
    "last row at another level": lambda run: _other_level(run / NMF / "part-00003.parquet"),
    "variance of a part changed": lambda run: _scale_variance(run / NMF / "part-00005.parquet"),
    "null value": lambda run: _null_value(run / NMF / "part-00005.parquet"),
    "null geocode": lambda run: _null_geocode(run / NMF / "part-00005.parquet"),
    "fractional value": lambda run: _fractional_value(run / NMF / "part-00004.parquet"),
    "row dropped": lambda run: _drop_row(run / NMF / "part-00003.parquet"),
    "geocode moved": lambda run: _move_geocode(run / NMF / "part-00004.parquet"),
    "part removed": lambda run: (run / NMF / "part-00002.parquet").unlink(),
    "index lies": _lie_in_index,
}


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damage_fails_both_ways(
    measured: Path, tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    shutil.copytree(measured, run)
    DAMAGE[case](run)
    serial, tasks = _verdicts(run)
    assert not serial["ok"] and not tasks["ok"], (serial, tasks)
    assert not _newest_first(run, monkeypatch)["ok"]
    assert "\n" not in serial["detail"] and "\n" not in tasks["detail"]
    assert tasks["detail"].startswith(serial["detail"])
    want = {
        "key: query renamed": "'not_total' in the file's row-group keys",
        "rows: query renamed, no statistics": "in its rows, 'total' in the file's row-group keys",
        "rows: variance changed, no statistics": "variance is",
        "key: variance changed": "variance",
        "key: rows changed": "row-group keys",
        "variance of a part changed": "variance",
        "fractional value": "finite integer",
        "null geocode": "geocode None is not a",
    }
    if case in want:
        assert want[case] in serial["detail"], serial["detail"]


@pytest.mark.parametrize("name", ["part-99999.parquet", ".part-00001.parquet", "manifest.json"])
def test_an_unlisted_part_is_never_read_and_not_part_of_the_release(
    measured: Path, tmp_path: Path, name: str
) -> None:
    """A copy of a part under a name the index does not list: the NMF's readers read
    only what the index lists (so the NMF check sees the intact NMF), and the release
    fails because its directory holds a file its manifest does not list."""
    from censusdp.io.nmf_files import nmf_files

    run = tmp_path / "run"
    shutil.copytree(measured, run)
    shutil.copy(run / NMF / "part-00001.parquet", run / NMF / name)
    assert [f.name for f in nmf_files(run / NMF)] == [f.name for f in nmf_files(measured / NMF)]
    for report in (
        validate_run(run, mdf=False),
        validate_run(run, mdf=False, executor=InProcessExecutor()),
    ):
        assert report.checks["nmf_persons"]["ok"], report.checks["nmf_persons"]
        assert not report.checks["checksums"]["ok"]
        assert f"{NMF}/{name} is not part of the release" in report.checks["checksums"]["detail"]


@pytest.mark.parametrize("batch", [1, 7, 1 << 22])
def test_row_groups_read_in_batches(
    measured: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int
) -> None:
    """Row groups read a few at a time or all at once: one verdict, and damage in the
    last of many row groups is found whatever the batch."""
    from censusdp.release.validate import _nmf_rows

    monkeypatch.setattr(_nmf_rows, "READ_BATCH_ROWS", batch)
    run = tmp_path / "run"
    shutil.copytree(measured, run)
    part = max((run / NMF).glob("part-*.parquet"), key=lambda p: pq.read_metadata(p).num_rows)
    t = read_nmf_table(part)
    pq.write_table(t, part, row_group_size=max(1, t.num_rows // 9))
    assert pq.read_metadata(part).num_row_groups >= 9
    (run / NMF / "_parts.json").write_text((measured / NMF / "_parts.json").read_text())
    serial, tasks = _verdicts(run)
    assert serial["ok"] and tasks["ok"], (serial, tasks)
    cells = t.column("cell").to_numpy().copy()
    cells[-1] = cells[-1] + 1
    t = t.set_column(t.column_names.index("cell"), "cell", pa.array(cells))
    pq.write_table(t, part, row_group_size=max(1, t.num_rows // 9))
    serial, tasks = _verdicts(run)
    assert not serial["ok"] and not tasks["ok"], (serial, tasks)


def test_an_nmf_checked_before_is_not_counted_again(
    measured: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A re-estimate copies its source's NMF byte for byte after checking it: its
    self-check takes that verdict (same recorded SHA-256, budget and geounits) instead
    of counting the rows again, and a changed byte still fails the release (checksums)."""
    from censusdp.release.validate import run as run_mod

    first = validate_run(measured, mdf=False)
    assert first.ok and set(first.nmf_proofs) == {"persons"}
    counted: list[Path] = []
    real = run_mod.check_nmf
    monkeypatch.setattr(run_mod, "check_nmf", lambda p, *a: counted.append(p) or real(p, *a))
    again = validate_run(measured, mdf=False, checked_nmf=first.nmf_proofs)
    assert again.ok and not counted
    assert again.checks["nmf_persons"]["detail"] == first.nmf_proofs["persons"][1]  # as given
    run = tmp_path / "run"
    shutil.copytree(measured, run)
    DAMAGE["row dropped"](run)
    damaged = validate_run(run, mdf=False, checked_nmf=first.nmf_proofs)
    assert not damaged.ok and not damaged.checks["checksums"]["ok"]
    other = validate_run(measured, mdf=False, checked_nmf={"persons": ("0" * 64, "other")})
    assert other.ok and counted  # another proof: counted


def test_a_reestimate_checks_the_copied_nmf_once(
    measured: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run --from-measurements``: the source's NMF is counted before estimating, and the
    release's self-check does not count its copy again (it was counted twice)."""
    from censusdp.release.pipeline import reestimate
    from censusdp.release.validate import run as run_mod

    counted: list[Path] = []
    real = run_mod.check_nmf
    monkeypatch.setattr(run_mod, "check_nmf", lambda p, *a: counted.append(p) or real(p, *a))
    reestimate(measured, tmp_path / "again", ReleaseOptions(postprocess="none"))
    assert counted == [measured / NMF]
    monkeypatch.undo()
    assert validate_run(tmp_path / "again", mdf=False).checks["nmf_persons"]["ok"]
