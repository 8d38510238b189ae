"""The Python API as a user calls it (:mod:`censusdp.api`): summary levels by code or
name, the NMF's GEOIDs, ``evaluate_release``'s order, options and typed result."""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd
import pytest

import censusdp
import censusdp.evaluate
from censusdp.errors import ConfigError, SchemaError
from censusdp.evaluate import EvaluateOptions


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Vermont at 3% of its tracts, released (production spine, seed 3)."""
    d = tmp_path_factory.mktemp("api")
    censusdp.generate_state("VT", seed=3, out=d / "cef", scale=0.03)
    budget = censusdp.load_budget("pl94-2020", epsilon=10)
    censusdp.run_release(d / "cef", d / "run", budget=budget, seed=3)
    return {"cef": d / "cef", "run": d / "run"}


def test_table_takes_a_summary_level_by_code_or_name(made) -> None:
    rel = censusdp.Release.open(made["run"])
    counties = rel.table("P1", "050")
    assert counties.num_rows >= 1
    assert set(counties.column("SUMLEV").to_pylist()) == {"050"}
    for level in ("county", "County", "50", 50):
        assert rel.table("P1", level).equals(counties), level
    assert rel.table("p1", "state").num_rows == 1
    blocks = rel.table("H1", "block")
    assert set(blocks.column("SUMLEV").to_pylist()) == {"750"}


def test_county_subdivisions_are_a_summary_level_of_the_tables(made) -> None:
    """Vermont's towns (county subdivisions, SUMLEV 060) are rows of the tables, each the
    sum of its blocks; a generated Vermont has no place (160) or AIAN area (250)."""
    rel = censusdp.Release.open(made["run"])
    towns = rel.table("P1", "county subdivision")
    assert towns.num_rows >= 1 and rel.table("P1", "060").equals(towns)
    assert set(towns.column("geolevel").to_pylist()) == {"CountySubdivision"}
    state = rel.table("P1", "state").column("P1_001N").to_pylist()
    assert sum(towns.column("P1_001N").to_pylist()) == sum(state)  # every block in a town
    assert rel.table("P1", "place").num_rows == 0
    # and in the CSV export, wide and long, as the Parquet has them
    wide = pd.read_csv(rel.csv("P1"), skiprows=[1], dtype={"GEOID": str, "SUMLEV": str})
    got = wide[wide.SUMLEV == "060"]
    assert got.GEOID.tolist() == towns.column("GEOID").to_pylist()
    assert got.P1_001N.tolist() == towns.column("P1_001N").to_pylist()
    long = pd.read_csv(rel.csv("P1", "long"), dtype={"GEOID": str, "SUMLEV": str})
    assert (long.SUMLEV == "060").sum() == towns.num_rows * 71


@pytest.mark.parametrize("level", ["070", "counties", "5"])
def test_an_unknown_summary_level_is_one_line_never_zero_rows(made, level) -> None:
    rel = censusdp.Release.open(made["run"])
    with pytest.raises(SchemaError, match=r"unknown summary level .* 050 \(county\)") as err:
        rel.table("P1", level)
    assert "\n" not in str(err.value)


def test_nmf_carries_the_tables_geoid_beside_its_own_code(made) -> None:
    rel = censusdp.Release.open(made["run"])
    county_ids = set(rel.table("P1", "county").column("GEOID").to_pylist())
    nmf = rel.nmf("County")
    names = nmf.column_names
    assert names[names.index("geocode") + 1] == "GEOID"
    codes = set(nmf.column("geocode").to_pylist())
    ids = set(nmf.column("GEOID").to_pylist())
    # Vermont has no AIAN area: every spine county is its tabulation county
    assert ids == county_ids and None not in ids
    assert {c[1:] for c in codes} == ids and not (codes & ids)
    # the production spine's block groups are not the tabulation's
    bgs = rel.nmf("BlockGroup").column("GEOID")
    assert bgs.null_count == len(bgs)


def test_evaluate_release_takes_the_release_first_and_typed_options(made, monkeypatch) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ev = censusdp.evaluate_release(
            made["run"], made["cef"], EvaluateOptions(district_draws=1, top_k=2)
        )
    assert isinstance(ev, censusdp.Evaluation)
    assert ev.invariants_ok is True
    assert ev.metrics["total_population"]["State"]["mae"] == 0  # the state total is exact
    assert ev.result["evaluation"]["district_draws"] == 1
    assert ev.to_dict() is ev.result and "tvd" in ev.definitions

    # the old order and options by name: the same call, with a DeprecationWarning each
    calls = []

    def spy(truth, run, options, **kwargs):
        calls.append((truth, run, options))
        return ev.result

    monkeypatch.setattr(censusdp.evaluate, "evaluate", spy)
    with pytest.warns(DeprecationWarning) as caught:
        old = censusdp.evaluate_release(made["cef"], made["run"], district_draws=1, top_k=2)
    assert len(caught) == 2
    assert calls == [(made["cef"], made["run"], EvaluateOptions(district_draws=1, top_k=2))]
    assert old.metrics == ev.metrics
    censusdp.evaluate_release(made["run"], made["cef"])  # no warning: the order is right
    assert calls[-1] == (made["cef"], made["run"], EvaluateOptions())
    with pytest.raises(ConfigError, match="not both"), pytest.warns(DeprecationWarning):
        censusdp.evaluate_release(made["cef"], made["run"], EvaluateOptions(), top_k=2)


def test_every_table_is_also_csv_wide_and_long(made) -> None:
    import pandas as pd

    rel = censusdp.Release.open(made["run"])
    text = {"GEOID": str, "SUMLEV": str}
    wide = pd.read_csv(rel.csv("P1"), skiprows=[1], dtype=text)
    parquet = rel.table("P1").to_pandas()
    assert wide["GEOID"].tolist() == parquet["GEOID"].tolist()
    assert (wide["P1_001N"] == parquet["P1_001N"]).all()
    long = pd.read_csv(rel.csv("h1", "long"), dtype=text)
    counties = rel.table("H1", "county").to_pandas()
    got = long[(long.SUMLEV == "050") & (long.variable == "H1_001N")]
    assert got["GEOID"].tolist() == counties["GEOID"].tolist()
    assert got["value"].tolist() == counties["H1_001N"].tolist()
    assert set(long["label"]) == {"Total:", "Total:!!Occupied", "Total:!!Vacant"}
    with pytest.raises(SchemaError, match="unknown table 'P9'"):
        rel.csv("P9")
