"""A release's MDF and tables with a household run, written by the part tasks as a run
writes them: each task's read-back check, the household tables and their CSV."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from censusdp.errors import InputError
from censusdp.io.layout import TABLES_DIR
from censusdp.io.mdf_parts import mdf_part_households
from censusdp.io.parts import read_parts
from censusdp.io.table_csv import published_tables, table_csv_mismatch
from censusdp.io.tables import codebook_mismatch, read_codebook
from censusdp.release.parts import mdf_part_tasks, run_mdf_part_task
from censusdp.tables import TABLE_NAMES
from censusdp.tables.households import HOUSEHOLD_TABLE_NAMES
from household_counts import household_counts, write_household_parts


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("hh-parts")
    counts, hierarchy, inv = household_counts(d / "cef")
    parts, top = write_household_parts(d / "run", counts, hierarchy)
    return d / "run", counts, hierarchy, inv, parts, top


def test_every_part_reads_back_to_its_households(release) -> None:
    run, counts, hierarchy, _, parts, top = release
    assert len(parts) > 1
    assert all(p["problem"] is None and p["table_problem"] is None for p in parts)
    assert top["table_problem"] is None
    got = sp.vstack(
        [mdf_part_households(f, counts.blocks[p["records"]["units"][0]["start"]:
                                             p["records"]["units"][0]["stop"]])
         for f, p in zip(sorted((run / "mdf_units.parquet").glob("part-*.parquet")), parts,
                         strict=True)]
    )  # fmt: skip
    assert (got != counts.households).nnz == 0


def test_household_tables_are_published_at_every_level(release) -> None:
    run, counts, hierarchy, _, _, _ = release
    tables = run / TABLES_DIR
    assert published_tables(tables) == TABLE_NAMES + HOUSEHOLD_TABLE_NAMES
    p18 = read_parts(tables / "P18.parquet", what="table part")
    h13 = read_parts(tables / "H13.parquet", what="table part")
    levels = p18.column("geolevel").to_pylist()
    assert set(levels) == set(hierarchy.geolevels.names)
    state = levels.index("State")
    n = counts.households.sum()
    assert p18.column("P18_001N")[state].as_py() == n == h13.column("H13_001N")[state].as_py()
    # families plus nonfamily households; sizes sum to the households
    row = {c: p18.column(c)[state].as_py() for c in p18.column_names[5:]}
    assert row["P18_002N"] + row["P18_007N"] == n
    assert sum(h13.column(f"H13_{i:03d}N")[state].as_py() for i in range(2, 9)) == n
    # the block rows are the blocks', one per block
    blocks = [i for i, lv in enumerate(levels) if lv == "Block"]
    assert len(blocks) == counts.blocks.size
    want = np.asarray(counts.households.sum(axis=1)).ravel()
    assert np.array_equal(np.asarray(p18.column("P18_001N").to_numpy())[blocks], want)
    for name in HOUSEHOLD_TABLE_NAMES:
        for form in ("wide", "long"):
            assert table_csv_mismatch(tables, name, form) is None
    assert codebook_mismatch(tables) is None
    book = read_codebook(tables)
    assert "H13_008N" in book.column("variable").to_pylist()


def test_a_part_whose_households_differ_is_caught_by_its_task(release, tmp_path) -> None:
    _, counts, hierarchy, _, _, _ = release
    (job, *_) = list(mdf_part_tasks(counts, tmp_path, max_blocks=10_000))
    # the task is handed counts whose households do not add up to the occupied units
    h = sp.lil_matrix(job.counts.households)
    b = int(np.flatnonzero(job.counts.occupied)[0])
    cell = int(sp.csr_matrix(h)[b].indices[0])
    h[b, cell] += 1
    bad = type(job.counts)(**{**job.counts.__dict__, "households": sp.csr_matrix(h)})
    with pytest.raises(InputError, match=f"block {counts.blocks[b]}: .* households but"):
        run_mdf_part_task(type(job)(**{**job.__dict__, "counts": bad}))


def test_without_households_the_units_keep_the_h1_layout(release, tmp_path) -> None:
    _, counts, hierarchy, _, _, _ = release
    plain = type(counts)(**{**counts.__dict__, "households": None})
    (job,) = list(mdf_part_tasks(plain, tmp_path, max_blocks=10_000, tables=False))
    res = run_mdf_part_task(job)
    assert res["problem"] is None
    names = pq.read_schema(next((tmp_path / "mdf_units.parquet").glob("part-*"))).names
    assert "HH_STATUS" in names and "HHT" not in names


def test_evaluate_reads_a_household_release_as_any(release) -> None:
    """``evaluate``, ``compare`` and the attacks read the MDF and the P.L. tables: the
    household layout's units read as occupied, vacant and facilities."""
    import shutil

    from censusdp.evaluate.core import read_release
    from censusdp.io.atomic import write_parquet
    from censusdp.io.layout import INVARIANTS_FILE

    run, counts, _, inv, _, _ = release
    copy = run.parent / "with-invariants"
    shutil.copytree(run, copy)
    write_parquet(inv.to_table(), copy / INVARIANTS_FILE)
    got = read_release(copy)
    housing = got.units["gqtype"] == 0
    assert int((got.units["occupied"] & housing).sum()) == int(counts.occupied.sum())
    assert int(housing.sum()) == int(counts.housing_units.sum())
    assert np.array_equal(
        np.bincount(got.units["gqtype"], minlength=8)[1:], counts.gq_facilities.sum(axis=0)[1:]
    )
    assert got.persons["geocode"].size == int(counts.persons.sum())
    assert set(got.tables) == set(TABLE_NAMES)
