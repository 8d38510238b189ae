"""``--h1-from``: a P.L. 94 release's H1 read for a DHC household run (production's ``h1``).

Production's DHC unit run read its earlier P.L. 94 release's unit MDF (``HHSTATUS`` per
block; ``configs/production/dhc/unit_US.ini``: ``h1.histogram = HHSTATUS``) and held its
households and vacant units to it. :func:`censusdp.release.h1_source.read_h1_source` reads
a censusdp P.L. 94 release's ``mdf_units`` the same way, and refuses, in one line naming
the file and the field, a release that is not of the run's input: another input, another
geography, other housing units, a unit MDF that is not the one its manifest hashed, or a
release that is not a P.L. 94 release with a housing-unit run. A real P.L. 94 release of
thirteen generated blocks is made once for the module (a few seconds).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_dhc_person_run import _small_vermont

from censusdp.data.geography import GeoLevels, Hierarchy
from censusdp.data.invariants import Invariants
from censusdp.data.schema import get_schema
from censusdp.errors import ConfigError, InputError
from censusdp.io.atomic import sha256_of
from censusdp.io.budget_files import load_preset
from censusdp.io.cef_files import hash_input
from censusdp.io.rundir import RunDir
from censusdp.io.tables import read_table
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.h1_source import H1_PRIVACY, read_h1_source, read_pl94_persons
from censusdp.release.options import ReleaseOptions
from censusdp.release.pipeline import reestimate, run_release


@pytest.fixture(scope="module")
def pl94(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Hierarchy, Invariants]:
    d = tmp_path_factory.mktemp("h1-source")
    cef = _small_vermont(d / "cef", d / "generated")
    budget = ReleaseBudget(load_preset("pl94-2020"), load_preset("pl94-2020-units"))
    run_release(cef, d / "pl94", budget.scaled(epsilon=4), ReleaseOptions(seed=2))
    manifest = json.loads((d / "pl94" / "manifest.json").read_text())
    levels = GeoLevels.from_pairs([tuple(g) for g in manifest["geolevels"]])
    hierarchy, inv = RunDir(d / "pl94").invariants(levels)
    return cef, d / "pl94", hierarchy, inv


def _one_line(exc: pytest.ExceptionInfo[BaseException], *words: str) -> None:
    text = str(exc.value)
    assert "\n" not in text, text
    for w in words:
        assert w in text, (w, text)


def test_the_occupied_units_are_the_pl94_releases_h1(pl94) -> None:
    cef, run, hierarchy, inv = pl94
    h1 = read_h1_source(run, hierarchy, inv, hash_input(cef).sha256)
    # the P.L. release's own H1 table at its blocks: occupied (H1_002N), vacant (H1_003N)
    table = read_table(run / "tables", "H1", sumlev="750")
    geoid = np.asarray(table.column("GEOID").to_pylist())
    order = np.argsort(geoid)
    occupied = np.asarray(table.column("H1_002N").to_pylist())[order]
    vacant = np.asarray(table.column("H1_003N").to_pylist())[order]
    assert np.array_equal(h1.occupied, occupied) and occupied.sum() > 0
    assert np.array_equal(h1.occupied + vacant, inv.housing_units)
    record = h1.record(inv.housing_units)
    assert record["manifest_sha256"] == sha256_of(run / "manifest.json")
    assert (record["occupied"], record["vacant"]) == (int(occupied.sum()), int(vacant.sum()))
    spent = json.loads((run / "manifest.json").read_text())["epsilon"]
    assert record["privacy"] == {
        "note": H1_PRIVACY,
        "spent_by_that_release": {
            k: json.loads((run / "manifest.json").read_text())[k]
            for k in ("rho", "epsilon", "delta")
        },
    }
    assert record["privacy"]["spent_by_that_release"]["epsilon"] == spent


def test_another_input_is_refused(pl94) -> None:
    cef, run, hierarchy, inv = pl94
    sha = dict(hash_input(cef).sha256)
    sha["units.parquet"] = "0" * 64
    with pytest.raises(ConfigError) as e:
        read_h1_source(run, hierarchy, inv, sha)
    _one_line(e, "manifest.json", "input_sha256", "units.parquet")


@pytest.mark.parametrize("change", ["missing", "extra", "housing_units"])
def test_another_geography_or_housing_units_are_refused(pl94, change: str) -> None:
    cef, run, hierarchy, inv = pl94
    blocks, hu = hierarchy.blocks, inv.housing_units.copy()
    if change == "missing":  # this input has a block the P.L. release lacks
        blocks = np.append(blocks, blocks[-1][:-1] + "9")
        hu = np.append(hu, 1)
    elif change == "extra":  # the P.L. release has a block this input lacks
        blocks, hu = blocks[1:], hu[1:]
    else:
        hu[3] += 1
    other = Hierarchy.from_blocks(blocks, hierarchy.geolevels)
    order = np.argsort(blocks)
    n = blocks.size
    inv2 = Invariants(other.blocks, np.zeros(n, np.int64), hu[order], np.zeros((n, 8), np.int64))
    with pytest.raises(InputError) as e:
        read_h1_source(run, other, inv2, hash_input(cef).sha256)
    field = "housing_units" if change == "housing_units" else "geocode"
    _one_line(e, "invariants.parquet", field, "block")


def test_a_unit_mdf_other_than_the_one_hashed_is_refused(pl94, tmp_path: Path) -> None:
    cef, run, hierarchy, inv = pl94
    bad = tmp_path / "pl94"
    shutil.copytree(run, bad)
    part = bad / "mdf_units.parquet" / "part-00000.parquet"
    table = pq.read_table(part)
    status = table.column("HH_STATUS").to_pylist()
    row = next(i for i, s in enumerate(status) if s in ("1", "2"))
    status[row] = "2" if status[row] == "1" else "1"  # an occupied unit made vacant
    col = table.column_names.index("HH_STATUS")
    pq.write_table(
        table.set_column(col, "HH_STATUS", pa.array(status, table.schema.field(col).type)), part
    )
    with pytest.raises(InputError) as e:
        read_h1_source(bad, hierarchy, inv, hash_input(cef).sha256)
    _one_line(e, "part-00000.parquet", "SHA-256", "files.mdf_units.parquet/part-00000.parquet")


@pytest.mark.parametrize(
    ("entry", "value", "words"),
    [
        ("schema", "dhcp-2020", ("schema is 'dhcp-2020'", "P.L. 94")),
        ("units", None, ("units is None", "housing-unit run")),
        ("postprocess", "none", ("postprocess 'none'",)),
        ("release", "swap", ("release is 'swap'",)),
    ],
)
def test_what_is_not_a_pl94_release_with_units_is_refused(
    pl94, tmp_path: Path, entry: str, value: object, words: tuple[str, ...]
) -> None:
    cef, run, hierarchy, inv = pl94
    bad = tmp_path / "pl94"
    shutil.copytree(run, bad)
    manifest = json.loads((bad / "manifest.json").read_text())
    manifest[entry] = value
    (bad / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError) as e:
        read_h1_source(bad, hierarchy, inv, hash_input(cef).sha256)
    _one_line(e, "manifest.json", *words)


def test_h1_from_is_refused_without_a_dhc_household_run_and_in_a_reestimate(
    pl94, tmp_path: Path
) -> None:
    cef, run, _, _ = pl94
    with pytest.raises(ConfigError) as e:
        run_release(
            cef,
            tmp_path / "out",
            ReleaseBudget(load_preset("pl94-2020"), load_preset("pl94-2020-units")),
            ReleaseOptions(seed=1, h1_from=str(run)),
        )
    _one_line(e, "--h1-from", "dhc-2020")
    with pytest.raises(ConfigError) as e:
        reestimate(run, tmp_path / "again", ReleaseOptions(h1_from=str(run)))
    _one_line(e, "--h1-from", "re-estimate")
    assert not (tmp_path / "out").exists() and not (tmp_path / "again").exists()


def test_a_dhc_run_never_writes_into_its_h1_release(pl94) -> None:
    """The P.L. release is an input of the run: an output inside it is refused before
    anything is read."""
    from censusdp.errors import CensusDPError

    cef, run, _, _ = pl94
    budget = ReleaseBudget(load_preset("dhc-2020"), load_preset("dhc-2020-units"))
    with pytest.raises(CensusDPError) as e:
        run_release(cef, run / "dhc", budget, ReleaseOptions(seed=1, h1_from=str(run)))
    assert "\n" not in str(e.value) and str(run) in str(e.value)
    assert not (run / "dhc").exists()


def test_the_cli_refuses_h1_from_in_one_line(pl94, tmp_path: Path, capsys, monkeypatch) -> None:
    """``censusdp run --h1-from`` reaches the library: without a DHC household run, or
    with a directory that is no release, a usage mistake (exit 2) found before the input
    is read; one line each."""
    from censusdp.cli import main
    from censusdp.release import pipeline

    def never(*args, **kwargs):
        raise AssertionError("the input was read before --h1-from was checked")

    monkeypatch.setattr(pipeline, "read_and_aggregate", never)
    cef, run, _, _ = pl94
    common = ["run", "--input", str(cef), "--seed", "1", "-q"]
    argv = [*common, "--out", str(tmp_path / "a"), "--preset", "pl94-2020", "--h1-from", str(run)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--h1-from" in err and "dhc-2020" in err
    bad = tmp_path / "not-a-release"
    bad.mkdir()
    argv = [*common, "--out", str(tmp_path / "b"), "--preset", "dhc-2020", "--h1-from", str(bad)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "manifest.json" in err and str(bad) in err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_resume_tells_a_replaced_h1_release_from_the_one_it_was_held_to(
    pl94, tmp_path: Path
) -> None:
    """The resume fingerprint holds the ``--h1-from`` release's manifest digest, not only
    its path: another release put at that path between the interruption and the resume
    changes it, so the resumed run is refused rather than held to another H1."""
    from censusdp.release.checkpoint import run_fingerprint

    cef, run, _, _ = pl94
    here = tmp_path / "pl94"
    shutil.copytree(run, here)
    budget = ReleaseBudget(load_preset("dhc-2020"), load_preset("dhc-2020-units"))
    options = ReleaseOptions(seed=3, h1_from=str(here))
    sha = hash_input(cef).sha256
    before = run_fingerprint(sha, budget, options, "optimized")
    assert before["h1_manifest_sha256"] == sha256_of(here / "manifest.json")
    assert run_fingerprint(sha, budget, options, "optimized") == before
    manifest = json.loads((here / "manifest.json").read_text())
    manifest["seed"] = 99  # another release of the same input at the same path
    (here / "manifest.json").write_text(json.dumps(manifest))
    after = run_fingerprint(sha, budget, options, "optimized")
    assert after["h1_from"] == before["h1_from"] and after != before
    assert "h1_from" not in run_fingerprint(sha, budget, ReleaseOptions(seed=3), "optimized")


def _block_column(run: Path, table_name: str, column: str) -> np.ndarray:
    """A P.L. release table's column at its blocks, in geocode order."""
    table = read_table(run / "tables", table_name, sumlev="750")
    order = np.argsort(np.asarray(table.column("GEOID").to_pylist()))
    return np.asarray(table.column(column).to_pylist())[order]


def test_the_persons_are_the_pl94_releases_p1_to_p4(pl94) -> None:
    """The persons' ``pl94`` cross per block (production's ``pl94`` invariant of the DHC
    person run) is the P.L. release's own: its P1, P2 (Hispanic), P3 (adults) and P5
    (group quarters) block cells, and the invariant state total."""
    cef, run, hierarchy, inv = pl94
    hist = read_pl94_persons(run, hierarchy, inv, hash_input(cef).sha256)
    pl94 = get_schema("pl94")
    assert hist.shape == (hierarchy.blocks.size, pl94.size) and hist.dtype == np.int64
    dense = hist.toarray()
    total = dense.sum(axis=1)
    hispanic = dense[:, pl94.cell_levels("hispanic") == 1].sum(axis=1)
    adults = dense[:, pl94.cell_levels("votingage") == 1].sum(axis=1)
    in_gq = dense[:, pl94.cell_levels("hhgq") > 0].sum(axis=1)
    assert total.sum() == inv.population.sum() > 0
    assert np.array_equal(total, _block_column(run, "P1", "P1_001N"))
    assert np.array_equal(hispanic, _block_column(run, "P2", "P2_002N"))
    assert np.array_equal(adults, _block_column(run, "P3", "P3_001N"))
    assert np.array_equal(in_gq, _block_column(run, "P5", "P5_001N"))
    assert not np.array_equal(total, inv.population)  # released, not the confidential blocks


def test_a_person_mdf_other_than_the_one_hashed_is_refused(pl94, tmp_path: Path) -> None:
    cef, run, hierarchy, inv = pl94
    bad = tmp_path / "pl94"
    shutil.copytree(run, bad)
    part = bad / "mdf_persons.parquet" / "part-00000.parquet"
    table = pq.read_table(part)
    pq.write_table(table.slice(1), part)  # one released person dropped
    with pytest.raises(InputError) as e:
        read_pl94_persons(bad, hierarchy, inv, hash_input(cef).sha256)
    _one_line(e, "part-00000.parquet", "SHA-256", "files.mdf_persons.parquet/part-00000.parquet")


def test_persons_this_inputs_invariants_cannot_hold_are_refused(pl94) -> None:
    """Persons of a GQ type in a block without such a facility, or a state total that is
    not the invariant one: the P.L. release is not of these invariants."""
    cef, run, hierarchy, inv = pl94
    sha = hash_input(cef).sha256
    hist = read_pl94_persons(run, hierarchy, inv, sha).toarray()
    groups = np.stack(
        [hist[:, get_schema("pl94").cell_levels("hhgq") == g].sum(axis=1) for g in range(8)], 1
    )
    b, g = (int(v) for v in np.argwhere(groups[:, 1:] > 0)[0])
    facilities = inv.gq_facilities.copy()
    facilities[b, g + 1] = 0
    no_facility = Invariants(inv.blocks, inv.population, inv.housing_units, facilities)
    with pytest.raises(InputError) as e:
        read_pl94_persons(run, hierarchy, no_facility, sha)
    _one_line(e, "mdf_persons.parquet", "HHGQ", str(hierarchy.blocks[b]), "no such unit")
    population = inv.population.copy()
    population[0] += 1
    other_total = Invariants(inv.blocks, population, inv.housing_units, inv.gq_facilities)
    with pytest.raises(InputError) as e:
        read_pl94_persons(run, hierarchy, other_total, sha)
    _one_line(e, "mdf_persons.parquet", "invariant total population")
