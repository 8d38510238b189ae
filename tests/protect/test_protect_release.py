"""A swapped release has the run layout of a DP release, readable by every downstream tool."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from censusdp.cli import main
from censusdp.data.geography import DEFAULT_GEOLEVELS, Hierarchy
from censusdp.data.histograms import household_histogram
from censusdp.data.invariants import compute_invariants
from censusdp.errors import ConfigError
from censusdp.evaluate.core import read_release
from censusdp.generate import generate_state
from censusdp.io.cef import read_cef, read_households
from censusdp.io.mdf_households import HOUSEHOLD_UNIT_COLUMNS
from censusdp.io.mdf_parts import mdf_part_households
from censusdp.io.mdf_records import DHCP_PERSON_COLUMNS
from censusdp.io.mdf_text import text_mismatch
from censusdp.io.tables import read_tables
from censusdp.protect import SwapOptions, protect_swap
from censusdp.tables import tables_to_arrays, tabulate


@pytest.fixture(scope="module")
def truth(tmp_path_factory):
    d = tmp_path_factory.mktemp("truth")
    generate_state("VT", 3, d, scale=0.02)
    return d


def test_swap_release_layout_and_tables(truth, tmp_path):
    run = tmp_path / "run"
    m = protect_swap(
        truth, run, SwapOptions(rate=0.1, seed=5, topcode=90), cef_out=tmp_path / "cef"
    )
    for f in ("mdf_persons.parquet", "mdf_units.parquet", "manifest.json", "mdf_units.txt"):
        assert (run / f).is_file()
    mdf = pq.read_table(run / "mdf_persons.parquet")
    assert mdf.column_names == list(DHCP_PERSON_COLUMNS)  # the full MDF2020 person layout
    assert max(int(a) for a in mdf.column("QAGE").to_pylist()) == 90  # top-coded
    assert mdf.num_rows == m["persons_released"]
    man = json.loads((run / "manifest.json").read_text())
    assert man["mechanism"] == "swap" and man["epsilon"] is None and man["seed"] == 5
    assert man["swap"]["swapped"] == m["swap"]["swapped"] > 0
    # tables are the PL94 tables of the MDF, and block totals equal the truth's
    rel = read_release(run)
    cef = read_cef(truth)
    h = Hierarchy.from_blocks(
        np.concatenate([cef.units["geocode"], cef.persons["geocode"]]), DEFAULT_GEOLEVELS
    )
    written = tables_to_arrays(read_tables(run / "tables"), h)
    again = tables_to_arrays(tabulate(rel.persons, rel.units, h), h)
    for name in written:
        for a, b in zip(written[name], again[name], strict=True):
            np.testing.assert_array_equal(a, b)
    true_tab = tables_to_arrays(tabulate(cef.persons, cef.units, h), h)
    np.testing.assert_array_equal(written["P1"][-1][:, 0], true_tab["P1"][-1][:, 0])
    np.testing.assert_array_equal(written["P3"][-1][:, 0], true_tab["P3"][-1][:, 0])
    np.testing.assert_array_equal(written["H1"][-1], true_tab["H1"][-1])
    # the swapped CEF is a valid CEF (DP can run on top of it)
    swapped = read_cef(tmp_path / "cef")
    assert swapped.n_persons == cef.n_persons
    # it keeps each person's relationship and citizenship (households move whole, so
    # the reader's household rules hold: one householder per occupied housing unit)
    for column in ("rel", "citizen"):
        assert column in cef.persons and column in swapped.persons
        np.testing.assert_array_equal(
            _by_person(swapped.persons, column), _by_person(cef.persons, column)
        )
    moved = _by_person(swapped.persons, "unit_id") != _by_person(cef.persons, "unit_id")
    assert moved.any()
    assert read_households(swapped).unit.size == read_households(cef).unit.size


def test_swap_release_units_carry_the_swapped_households(truth, tmp_path):
    """An input with ``rel``: the units MDF is in production's household layout, each
    occupied housing unit the household swapped into it (read back from the file, as
    the swapped CEF's households derive), and its text file its Parquet's records."""
    run = tmp_path / "run"
    protect_swap(truth, run, SwapOptions(rate=0.2, seed=4, topcode=90), cef_out=tmp_path / "cef")
    units_path = run / "mdf_units.parquet"
    assert tuple(pq.read_table(units_path).column_names) == HOUSEHOLD_UNIT_COLUMNS
    swapped = read_cef(tmp_path / "cef")
    h = Hierarchy.from_blocks(
        np.concatenate([swapped.units["geocode"], swapped.persons["geocode"]]), DEFAULT_GEOLEVELS
    )
    inv = compute_invariants(swapped.persons, swapped.units, h)
    got = mdf_part_households(units_path, h.blocks, gq_facilities=inv.gq_facilities)
    want = household_histogram(read_households(swapped), swapped.units["geocode"], h)
    assert got.sum() > 100 and (got != want).nnz == 0
    # the households moved: the swapped file's differ from the input's, block by block
    cef = read_cef(truth)
    before = household_histogram(read_households(cef), cef.units["geocode"], h)
    assert (before != want).nnz > 0 and before.sum() == want.sum()
    assert (
        text_mismatch(units_path, run / "mdf_units.txt", HOUSEHOLD_UNIT_COLUMNS, header=True)[0]
        is None
    )
    # every reader of the units MDF reads it: H1 as the input's
    rel = read_release(run)
    housing = np.asarray(rel.units["gqtype"]) == 0
    assert int((rel.units["occupied"] & housing).sum()) == int(want.sum())


def _by_person(persons, column):
    return np.asarray(persons[column])[np.argsort(persons["person_id"], kind="stable")]


def test_swap_release_refuses_non_empty_output(truth, tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "x").write_text("x")
    with pytest.raises(ConfigError, match="exists and is not empty"):
        protect_swap(truth, tmp_path / "run", SwapOptions(rate=0.1, seed=1))


def test_cli_protect_swap(truth, tmp_path, capsys):
    rc = main(
        [
            "protect",
            "swap",
            "--input",
            str(truth),
            "--out",
            str(tmp_path / "r"),
            "--rate",
            "0.05",
            "--seed",
            "2",
            "--topcode",
            "none",
            "--quiet",
            "--json",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["swap"]["rate"] == 0.05
    assert (tmp_path / "r" / "tables" / "P1.parquet").is_file()
    assert (
        main(
            [
                "protect",
                "swap",
                "--input",
                str(truth),
                "--out",
                str(tmp_path / "r"),
                "--rate",
                "2",
                "--quiet",
                "--overwrite",
            ]
        )
        == 2
    )
