"""Tests of the PL 94-171 table definitions and tabulation (censusdp.tables).

Line layouts are checked against the 2020 Census P.L. 94-171 Redistricting Data
Summary File (tables P1-P5, H1); tabulation against an independent per-record Python
recomputation.
"""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from censusdp.data.geography import Hierarchy
from censusdp.errors import GeographyError, InputError, SchemaError
from censusdp.io.tables import read_codebook, read_table_arrays, read_tables, write_tables
from censusdp.tables import (
    TABLE_NAMES,
    codebook,
    table_definition,
    table_lines,
    tables_to_arrays,
    tabulate,
)

RACES = (
    "White",
    "Black or African American",
    "American Indian and Alaska Native",
    "Asian",
    "Native Hawaiian and Other Pacific Islander",
    "Some Other Race",
)


def _random_cef(seed: int, n_persons: int = 3000, n_units: int = 1200):
    rng = np.random.default_rng(seed)
    blocks = np.array(
        sorted(
            {
                f"50{c:03d}{t:06d}{bg}{b:04d}"
                for c, t, bg, b in zip(
                    rng.choice([1, 3, 5], 60),
                    rng.choice([100, 200, 300], 60),
                    rng.integers(1, 3, 60),
                    rng.integers(1000, 1010, 60),
                    strict=True,
                )
            }
        )
    )
    persons = {
        "geocode": blocks[rng.integers(0, blocks.size, n_persons)],
        "hhgq": rng.choice(8, n_persons, p=[0.65] + [0.05] * 7),
        "age": rng.integers(0, 100, n_persons),
        "hispanic": rng.integers(0, 2, n_persons),
        # Every code 1..63 appears when n_persons >= 63.
        "cenrace": np.concatenate([np.arange(1, 64), rng.integers(1, 64, n_persons)])[:n_persons],
    }
    units = {
        "geocode": blocks[rng.integers(0, blocks.size, n_units)],
        "gqtype": rng.choice(8, n_units, p=[0.86] + [0.02] * 7),
        "occupied": rng.random(n_units) < 0.7,
    }
    return persons, units


def _expected_person_lines(hisp: int, adult: bool, hhgq: int, cenrace: int) -> dict[str, int]:
    """P1-P5 lines one person adds to, derived from the published layout (not the package)."""
    combos = [c for k in range(1, 7) for c in itertools.combinations(range(6), k)]
    races = combos[cenrace - 1]
    k = len(races)
    # P1 line numbers: 1 total; 2 one race; 3..8 alone; 9 two or more; then per size
    # a header followed by its combinations.
    size_header = {2: 10, 3: 26, 4: 47, 5: 63, 6: 70}
    if k == 1:
        race_lines = [1, 2, 3 + races[0]]
    else:
        same_size = [c for c in combos if len(c) == k]
        race_lines = [1, 9, size_header[k], size_header[k] + 1 + same_size.index(races)]
    out: Counter[str] = Counter()
    for line in race_lines:
        out[f"P1_{line:03d}N"] += 1
        if adult:
            out[f"P3_{line:03d}N"] += 1
    for t, include in (("P2", True), ("P4", adult)):
        if not include:
            continue
        out[f"{t}_001N"] += 1
        if hisp:
            out[f"{t}_002N"] += 1
        else:
            for line in race_lines:
                out[f"{t}_{line + 2:03d}N"] += 1
    if hhgq >= 1:
        out["P5_001N"] += 1
        out["P5_002N" if hhgq <= 4 else "P5_007N"] += 1
        out[f"P5_{hhgq + 2 if hhgq <= 4 else hhgq + 3:03d}N"] += 1
    return out


def test_line_counts_match_2020_pl94_layout():
    # 2020 P.L. 94-171 Summary File: P1 71, P2 73, P3 71, P4 73, P5 10, H1 3 lines.
    assert [len(table_lines(n)) for n in TABLE_NAMES] == [71, 73, 71, 73, 10, 3]
    assert [len(table_definition(n).leaves) for n in TABLE_NAMES] == [63, 64, 63, 64, 7, 2]


@pytest.mark.parametrize(
    ("variable", "label_end"),
    [
        ("P1_001N", "Total:"),
        ("P1_002N", "Population of one race:"),
        ("P1_003N", "White alone"),
        ("P1_008N", "Some Other Race alone"),
        ("P1_009N", "Population of two or more races:"),
        ("P1_010N", "Population of two races:"),
        ("P1_011N", "White; Black or African American"),
        ("P1_025N", "Native Hawaiian and Other Pacific Islander; Some Other Race"),
        ("P1_026N", "Population of three races:"),
        ("P1_027N", "White; Black or African American; American Indian and Alaska Native"),
        ("P1_047N", "Population of four races:"),
        ("P1_063N", "Population of five races:"),
        ("P1_070N", "Population of six races:"),
        ("P1_071N", "; ".join(RACES)),
        ("P2_002N", "Hispanic or Latino"),
        ("P2_003N", "Not Hispanic or Latino:"),
        ("P2_005N", "White alone"),
        ("P2_073N", "; ".join(RACES)),
        ("P4_002N", "Hispanic or Latino"),
        ("P5_002N", "Institutionalized population:"),
        ("P5_005N", "Nursing facilities/Skilled-nursing facilities"),
        ("P5_007N", "Noninstitutionalized population:"),
        ("P5_010N", "Other noninstitutional facilities"),
        ("H1_002N", "Occupied"),
        ("H1_003N", "Vacant"),
    ],
)
def test_line_labels(variable, label_end):
    lines = dict(table_lines(variable[:2]))
    assert lines[variable].split("!!")[-1] == label_end


@pytest.mark.parametrize("name", TABLE_NAMES)
def test_leaves_partition_the_universe(name):
    d = table_definition(name)
    m = d.matrix.toarray()
    # Every cell counted by the Total line is in exactly one leaf line, and no other.
    np.testing.assert_array_equal(m[:, list(d.leaves)].sum(axis=1), m[:, 0])
    assert set(np.unique(m)) <= {0, 1}


def test_tabulate_matches_independent_recomputation():
    persons, units = _random_cef(1)
    h = Hierarchy.from_blocks(np.concatenate([persons["geocode"], units["geocode"]]))
    tables = tabulate(persons, units, h)
    expected: dict[tuple[str, str], Counter[str]] = {}
    lengths = [(lv.name, lv.length) for lv in h.geolevels.levels]
    for i in range(persons["geocode"].size):
        lines = _expected_person_lines(
            int(persons["hispanic"][i]),
            bool(persons["age"][i] >= 18),
            int(persons["hhgq"][i]),
            int(persons["cenrace"][i]),
        )
        for lname, length in lengths:
            expected.setdefault((lname, persons["geocode"][i][:length]), Counter()).update(lines)
    for i in range(units["geocode"].size):
        if units["gqtype"][i] != 0:
            continue
        add = Counter({"H1_001N": 1, "H1_002N" if units["occupied"][i] else "H1_003N": 1})
        for lname, length in lengths:
            expected.setdefault((lname, units["geocode"][i][:length]), Counter()).update(add)
    n_rows = sum(h.n_units(i) for i in range(h.n_levels))
    for name, table in tables.items():
        assert table.num_rows == n_rows
        assert table.column_names[:2] == ["geolevel", "geocode"]
        rows = table.to_pylist()
        for row in rows:
            exp = expected.get((row["geolevel"], row["geocode"]), Counter())
            for var, _ in table_lines(name):
                assert row[var] == exp[var], (name, row["geolevel"], row["geocode"], var)


def test_mdf_votingage_column_gives_same_tables():
    persons, units = _random_cef(2)
    h = Hierarchy.from_blocks(np.concatenate([persons["geocode"], units["geocode"]]))
    mdf = {k: v for k, v in persons.items() if k != "age"}
    mdf["votingage"] = (persons["age"] >= 18).astype(np.int64)
    a, b = tabulate(persons, units, h), tabulate(mdf, units, h)
    for name in TABLE_NAMES:
        assert a[name].equals(b[name])


def test_children_sum_to_parents_and_tables_agree():
    persons, units = _random_cef(3)
    h = Hierarchy.from_blocks(np.concatenate([persons["geocode"], units["geocode"]]))
    arrays = tables_to_arrays(tabulate(persons, units, h), h)
    for name, per_level in arrays.items():
        for li in range(1, h.n_levels):
            agg = np.zeros_like(per_level[li - 1])
            np.add.at(agg, h.parent[li], per_level[li])
            np.testing.assert_array_equal(agg, per_level[li - 1], err_msg=name)
    top = {n: a[0][0] for n, a in arrays.items()}
    n = persons["geocode"].size
    assert top["P1"][0] == top["P2"][0] == n
    assert top["P3"][0] == top["P4"][0] == int((persons["age"] >= 18).sum())
    assert top["P5"][0] == int((persons["hhgq"] > 0).sum())
    assert top["H1"][0] == top["H1"][1] + top["H1"][2] == int((units["gqtype"] == 0).sum())


def test_write_read_roundtrip(tmp_path):
    persons, units = _random_cef(4, 500, 200)
    h = Hierarchy.from_blocks(np.concatenate([persons["geocode"], units["geocode"]]))
    tables = tabulate(persons, units, h)
    write_tables(tables, tmp_path / "tables")
    assert sorted(p.name for p in (tmp_path / "tables").iterdir()) == sorted(
        [f"{n}.parquet" for n in TABLE_NAMES]
        + [f"{n}{end}" for n in TABLE_NAMES for end in (".csv", "_long.csv")]
        + ["codebook.csv"]
    )
    back = read_tables(tmp_path / "tables")
    for name in TABLE_NAMES:
        assert back[name].equals(tables[name])
    assert read_codebook(tmp_path / "tables").equals(codebook())
    # the validator's reader: one table at a time, count columns only, same arrays
    arrays = read_table_arrays(tmp_path / "tables", h)
    want = tables_to_arrays(tables, h)
    assert sorted(arrays) == sorted(want)
    for name in TABLE_NAMES:
        for got, expected in zip(arrays[name], want[name], strict=True):
            np.testing.assert_array_equal(got, expected)
    (tmp_path / "tables" / "H1.parquet").unlink()
    with pytest.raises(InputError, match=r"lacks H1\.parquet"):
        read_table_arrays(tmp_path / "tables", h)


def test_empty_persons():
    h = Hierarchy.from_blocks(np.array(["5000100010010001"]))
    empty = {c: np.zeros(0, dtype=np.int64) for c in ("hhgq", "age", "hispanic", "cenrace")}
    empty["geocode"] = np.zeros(0, dtype="U16")
    units = {
        "geocode": np.array(["5000100010010001"]),
        "gqtype": np.array([0]),
        "occupied": np.array([False]),
    }
    tables = tabulate(empty, units, h)
    assert tables["P1"].column("P1_001N").to_pylist() == [0] * 6
    assert tables["H1"].column("H1_003N").to_pylist() == [1] * 6


@pytest.mark.parametrize(
    ("column", "value", "error", "match"),
    [
        ("cenrace", 64, InputError, "column 'cenrace' row 0 has value 64"),
        ("cenrace", 0, InputError, "column 'cenrace' row 0 has value 0"),
        ("hhgq", 8, InputError, "column 'hhgq' row 0 has value 8"),
        ("hispanic", 2, InputError, "column 'hispanic'"),
        ("age", -1, InputError, "column 'age'"),
        ("geocode", "5000100010019999", GeographyError, "not a block of the hierarchy"),
    ],
)
def test_bad_person_values(column, value, error, match):
    persons, units = _random_cef(5, 50, 20)
    h = Hierarchy.from_blocks(np.concatenate([persons["geocode"], units["geocode"]]))
    persons[column] = persons[column].copy().astype(object if column == "geocode" else np.int64)
    persons[column][0] = value
    with pytest.raises(error, match=match):
        tabulate(persons, units, h)


def test_missing_columns_and_unknown_table(tmp_path):
    persons, units = _random_cef(6, 50, 20)
    h = Hierarchy.from_blocks(np.concatenate([persons["geocode"], units["geocode"]]))
    del persons["age"]
    with pytest.raises(InputError, match="'age' or 'votingage'"):
        tabulate(persons, units, h)
    with pytest.raises(SchemaError, match="unknown table 'P9'"):
        table_lines("P9")
    with pytest.raises(InputError, match="lacks P1.parquet"):
        read_tables(tmp_path)
    bad = dict(units, gqtype=np.full(units["gqtype"].size, 9))
    with pytest.raises(InputError, match="'gqtype' row 0 has value 9"):
        tabulate({**persons, "votingage": np.ones(50, dtype=int)}, bad, h)
