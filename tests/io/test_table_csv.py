"""Each published table as CSV beside its Parquet (:mod:`censusdp.io.table_csv`):
wide (one row per geounit, names then labels) and long (one row per geounit and line,
no blocks), checked byte for byte by ``table_csv_mismatch``."""

from __future__ import annotations

import csv
import hashlib

import numpy as np
import pandas as pd
import pytest

from censusdp.data.geography import Hierarchy
from censusdp.io.layout import TABLE_CSV_FORMS, TABLE_CSV_PARTS_DIR, table_csv_file
from censusdp.io.table_csv import LONG_CSV_COLUMNS, table_csv_check, table_csv_mismatch
from censusdp.io.tables import read_table, write_table_index, write_table_part, write_tables
from censusdp.tables import TABLE_NAMES, table_definition, tabulate

# Blocks of two Vermont counties; block numbers start with their block-group digit.
BLOCKS = np.array(
    [
        "5000196010011001",
        "5000196010011002",
        "5000196010022001",
        "5000196020011001",
        "5002796760011005",
        "5002700030233001",
    ]
)


@pytest.fixture
def tables(tmp_path):
    rng = np.random.default_rng(5)
    n = 40
    persons = {
        "geocode": BLOCKS[rng.integers(0, BLOCKS.size, n)],
        "hhgq": np.zeros(n, np.int64),
        "age": rng.integers(0, 90, n),
        "hispanic": rng.integers(0, 2, n),
        "cenrace": rng.integers(0, 63, n),
    }
    units = {"geocode": BLOCKS, "gqtype": np.zeros(6, np.int64), "occupied": np.ones(6, bool)}
    write_tables(tabulate(persons, units, Hierarchy.from_blocks(BLOCKS)), tmp_path)
    return tmp_path


def _wide(directory, name):
    return pd.read_csv(
        directory / table_csv_file(name), skiprows=[1], dtype={"GEOID": str, "SUMLEV": str}
    )


def test_every_table_has_a_wide_and_a_long_csv(tables) -> None:
    for name in TABLE_NAMES:
        for form in ("wide", "long"):
            assert (tables / table_csv_file(name, form)).is_file()
            assert table_csv_mismatch(tables, name, form) is None


def test_wide_csv_is_the_parquet_with_names_then_labels(tables) -> None:
    d = table_definition("P1")
    with open(tables / "P1.csv", newline="") as f:
        names, labels = next(csv.reader(f)), next(csv.reader(f))
    assert names == ["GEOID", "SUMLEV", "NAME", *d.variables]
    assert labels[3:] == list(d.labels) and labels[3] == "Total:"
    wide = _wide(tables, "P1")
    parquet = read_table(tables, "P1").to_pandas()
    assert wide["GEOID"].tolist() == parquet["GEOID"].tolist()
    assert wide["NAME"].tolist() == parquet["NAME"].tolist()
    for v in d.variables:
        assert wide[v].dtype.kind == "i" and (wide[v] == parquet[v]).all(), v
    county = wide[wide.SUMLEV == "050"]
    assert county["NAME"].tolist() == ["Addison County, Vermont", "Windsor County, Vermont"]
    assert "750" in set(wide.SUMLEV)


def test_long_csv_is_one_row_per_geounit_and_line_without_blocks(tables) -> None:
    d = table_definition("P2")
    long = pd.read_csv(tables / "P2_long.csv", dtype={"GEOID": str, "SUMLEV": str})
    assert tuple(long.columns) == LONG_CSV_COLUMNS
    parquet = read_table(tables, "P2").to_pandas()
    above = parquet[parquet.SUMLEV != "750"]
    assert len(long) == len(above) * len(d.variables)
    assert "750" not in set(long.SUMLEV)
    county = long[(long.GEOID == "50027") & (long.variable == "P2_002N")]
    assert county["label"].tolist() == ["Total:!!Hispanic or Latino"]
    assert county["value"].tolist() == above.loc[above.GEOID == "50027", "P2_002N"].tolist()
    # pivoted back, the long form is the wide one
    back = long.pivot(index="GEOID", columns="variable", values="value")
    want = above.set_index("GEOID")[list(d.variables)]
    assert (back.loc[want.index, list(d.variables)].to_numpy() == want.to_numpy()).all()


@pytest.mark.parametrize(
    ("form", "edit", "line"),
    [
        ("wide", lambda b: b.replace(b"Vermont", b"Vermomt", 1), None),
        ("wide", lambda b: b + b'"x"\n', None),
        ("long", lambda b: b[: len(b) // 2], None),
        ("long", lambda b: b.replace(b'"P1_001N","Total:",', b'"P1_001N","Total:",1', 1), 2),
    ],
)
def test_a_changed_csv_is_named_with_its_line(tables, form, edit, line) -> None:
    path = tables / table_csv_file("P1", form)
    path.write_bytes(edit(path.read_bytes()))
    problem = table_csv_mismatch(tables, "P1", form)
    assert problem is not None and str(path) in problem
    if line is not None:
        assert f"line {line} " in problem
    (tables / table_csv_file("H1")).unlink()
    assert "missing" in table_csv_mismatch(tables, "H1", "wide")


def _written_in_parts(directory, tables, cut):
    """``tables`` written as part 0 (rows before ``cut``) and part 1, as a run's tasks
    write them (each part's CSV rows beside it), then indexed: the CSV put together."""
    records = [
        write_table_part({n: t.slice(0, cut) for n, t in tables.items()}, directory, 0),
        write_table_part({n: t.slice(cut) for n, t in tables.items()}, directory, 1),
    ]
    for recs in records:
        for rec in recs.values():
            rec.update(geolevel="x", start=0, stop=1)
    return records


def test_parts_csv_rows_written_by_their_tasks_make_the_whole_tables_csv(tables, tmp_path):
    whole = {n: read_table(tables, n) for n in TABLE_NAMES}
    parts = tmp_path / "parts"
    records = _written_in_parts(parts, whole, cut=7)
    for name in TABLE_NAMES:
        for form in TABLE_CSV_FORMS:
            rows = parts / TABLE_CSV_PARTS_DIR / table_csv_file(name, form)
            assert sorted(p.name for p in rows.iterdir()) == ["part-00000.csv", "part-00001.csv"]
    write_table_index(parts, records)
    assert not (parts / TABLE_CSV_PARTS_DIR).exists()  # removed once put together
    for name in TABLE_NAMES:
        for form in TABLE_CSV_FORMS:
            want = (tables / table_csv_file(name, form)).read_bytes()
            assert (parts / table_csv_file(name, form)).read_bytes() == want, (name, form)
            assert table_csv_mismatch(parts, name, form) is None


def test_the_csv_is_put_together_from_the_tasks_rows(tables, tmp_path):
    # the driver copies each part's rows as its task wrote them (it does not convert the
    # part again): rows changed after their task are in the CSV, and its check sees it
    whole = {n: read_table(tables, n) for n in TABLE_NAMES}
    parts = tmp_path / "parts"
    records = _written_in_parts(parts, whole, cut=3)
    rows = parts / TABLE_CSV_PARTS_DIR / table_csv_file("P3") / "part-00001.csv"
    assert b"Vermont" in rows.read_bytes()
    rows.write_bytes(rows.read_bytes().replace(b"Vermont", b"Vermomt", 1))
    write_table_index(parts, records)
    assert b"Vermomt" in (parts / "P3.csv").read_bytes()
    assert "differs from its table's Parquet" in table_csv_mismatch(parts, "P3", "wide")
    assert table_csv_mismatch(parts, "P3", "long") is None


def test_the_check_hashes_a_csv_it_read_whole_and_only_then(tables) -> None:
    # the validation records this SHA-256 instead of reading the file a second time
    for form in TABLE_CSV_FORMS:
        path = tables / table_csv_file("P4", form)
        assert table_csv_check(tables, "P4", form) == (
            None,
            hashlib.sha256(path.read_bytes()).hexdigest(),
        )
        path.write_bytes(path.read_bytes() + b"\n")
        problem, digest = table_csv_check(tables, "P4", form)
        assert "has more than" in problem and digest is None
