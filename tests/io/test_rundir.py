"""The release directory as a type: RunDir's files and readers, the typed manifest."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from censusdp.data.geography import GeoLevels
from censusdp.errors import InputError, InternalError
from censusdp.io import layout
from censusdp.io.release_manifest import ReleaseManifest
from censusdp.io.rundir import RunDir
from faults.faults_cli import generated_release


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    return generated_release(tmp_path_factory.mktemp("rundir")) / "rel"


def test_every_file_of_a_release_is_where_rundir_says(run):
    files = RunDir(run)
    for path in (
        files.manifest_file,
        files.invariants_file,
        files.invariant_totals_file,
        files.tables_dir,
        files.nmf_file("persons"),
        files.nmf_file("units"),
        files.mdf_file("persons"),
        files.mdf_file("units"),
        files.mdf_file("persons", text=True),
        files.mdf_file("units", text=True),
    ):
        assert path.exists(), path
    # every top-level entry of the release is a name the layout spells
    assert {p.name for p in run.iterdir()} <= set(layout.RELEASE_FILE_NAMES)


def test_readers_agree_with_the_manifest(run):
    files = RunDir(run)
    m = files.manifest()
    hierarchy, inv = files.invariants(GeoLevels.from_pairs(m.geolevels))
    assert hierarchy.blocks.size == m.geounits["Block"]
    assert int(inv.population.sum()) == m.input_persons == m.persons_released
    assert inv.blocks.size == hierarchy.blocks.size
    assert files.mdf_table("persons").num_rows == m.persons_released
    assert files.mdf_table("units").num_rows == m.units_released
    assert files.nmf_table("persons").num_rows == m.noisy_measurements
    county = files.nmf_table("persons", "County")
    assert county.num_rows == m.noisy_values_by_level["persons"]["County"]
    p1 = files.table("P1")
    assert int(np.asarray(p1.column("P1_001N"))[p1.column("SUMLEV").to_pylist().index("040")]) == (
        m.persons_released
    )


def test_a_missing_file_is_named(run, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    (copy / layout.INVARIANT_TOTALS_FILE).unlink()
    files = RunDir(copy)
    with pytest.raises(InputError, match=r"invariant_totals\.parquet: missing file"):
        files.invariants(GeoLevels.from_pairs(files.manifest().geolevels))
    with pytest.raises(
        InputError, match=r"invariant_totals\.parquet: missing file \(needed by x\)"
    ):
        files.require(files.invariants_file, files.invariant_totals_file, needed_by="x")


# -- the typed manifest -------------------------------------------------------------------


def test_a_release_manifest_round_trips_exactly(run):
    raw = json.loads((run / layout.MANIFEST_FILE).read_text())
    m = ReleaseManifest.from_dict(raw)
    assert m.to_dict() == raw and list(m.to_dict()) == list(raw)  # entries and their order
    assert dict(m) == raw and m["seed"] == m.seed == 7
    assert m.persons["name"] == "pl94-2020" and m.units["name"] == "pl94-2020-units"


def test_an_unknown_entry_is_refused_naming_it(run):
    raw = json.loads((run / layout.MANIFEST_FILE).read_text())
    with pytest.raises(InputError, match=r"x/manifest\.json: unknown entry 'sede'"):
        ReleaseManifest.from_dict({**raw, "sede": 7}, "x/manifest.json")


def test_an_older_manifest_reads_with_its_missing_entries_none():
    old = {"schema": "pl94", "geolevels": [["US", 0], ["State", 2]], "seed": None}
    m = ReleaseManifest.from_dict(old)
    assert m.files is None and m.created_by is None and m.spine is None
    assert "files" not in m and m.get("files", "absent") == "absent"
    assert m.to_dict() == old  # an entry holding null stays, an absent one stays absent


def test_a_writer_cannot_record_an_unknown_entry(tmp_path):
    from censusdp.io.staging import Staging
    from censusdp.release.manifest import commit_run

    staging = Staging(tmp_path / "out", overwrite=False, inputs=[])
    (staging.path / "a.txt").write_text("a")
    with pytest.raises(InternalError, match="unknown entry 'nosie'"):
        commit_run({"schema": "pl94", "nosie": 1}, staging, {}, 0.0)
    staging.abort()
    assert not (tmp_path / "out").exists()
