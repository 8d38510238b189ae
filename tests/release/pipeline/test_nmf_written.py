"""Estimation reads the NMF parts its own run wrote for their values alone; every other
NMF is checked as it is read.

A fresh run's measurement tasks write the parts and return each one's SHA-256; the run
keeps those in memory (``Runtime.written``), and the reader proves a part's bytes are
that SHA-256's before it reads its ``value`` column without the geocodes and cells. A
re-estimate reads another run's NMF: there every row group's layout is checked, so a
part whose cells were reordered (which the self-check's per-geounit counts and cell
fingerprints cannot see) is refused even when the release's checksums were rewritten to
match it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from censusdp.errors import InputError
from censusdp.io import nmf_cache
from censusdp.io.budget_files import load_preset
from censusdp.io.nmf_files import row_group_keys
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release.options import ReleaseOptions
from censusdp.release.pipeline import reestimate, run_release
from synth import block_codes, make_cef, tree_bytes, write_cef

NMF = "noisy_measurements.parquet"


def _spy(monkeypatch) -> list[str | None]:
    """The writer's SHA-256 (or ``None``: checked) of every row group read from now on."""
    seen: list[str | None] = []
    real = nmf_cache._read_group
    monkeypatch.setattr(nmf_cache, "_CACHE", nmf_cache._GroupCache(64 << 20, 8))
    monkeypatch.setattr(
        nmf_cache,
        "_read_group",
        lambda pf, span, *a: seen.append(span.sha256) or real(pf, span, *a),
    )
    return seen


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("written")
    persons, units = make_cef(np.random.default_rng(7), block_codes(1, 2, 2, 3), gq_rate=0.2)
    write_cef(d / "cef", persons, units)
    return d


def test_a_fresh_run_reads_its_own_parts_proven_and_a_reestimate_checks_them(
    release: Path, monkeypatch
) -> None:
    budget = ReleaseBudget(load_preset("pl94-2020").scaled(rho="1/10"))
    seen = _spy(monkeypatch)
    run_release(release / "cef", release / "run", budget, ReleaseOptions(seed=3))
    index = json.loads((release / "run" / NMF / "_parts.json").read_text())
    digests = {p["sha256"] for p in index["parts"]}
    assert seen and set(seen) <= digests  # every read proven by its part's own SHA-256
    seen.clear()
    reestimate(release / "run", release / "again")
    assert seen and set(seen) == {None}  # another run's NMF: every row group checked
    for name in ("mdf_persons.parquet", "mdf_units.parquet"):
        assert tree_bytes(release / "run" / name) == tree_bytes(release / "again" / name)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _swap_two_cells(part: Path) -> bool:
    """Swap the cells of the first two rows of the part's first row group whose first
    unit has two distinct cells there, keeping its row groups and metadata: each
    geounit keeps its set of cells; ``False`` if no row group has such rows."""
    pf = pq.ParquetFile(part)
    groups = [pf.read_row_group(i) for i in range(pf.num_row_groups)]
    for t in groups:
        cells = t.column("cell").to_numpy().copy()
        codes = t.column("geocode").to_pylist()
        if cells.size > 1 and cells[0] != cells[1] and codes[0] == codes[1]:
            cells[[0, 1]] = cells[[1, 0]]
            i = t.schema.get_field_index("cell")
            field = t.schema.field(i)
            groups[groups.index(t)] = t.set_column(i, field, pa.array(cells, field.type))
            break
    else:
        return False
    with pq.ParquetWriter(part, pf.schema_arrow) as w:
        for t in groups:
            w.write_table(t, row_group_size=max(t.num_rows, 1))
    return True


def test_a_reestimate_refuses_a_part_reordered_behind_rewritten_checksums(
    release: Path, tmp_path: Path
) -> None:
    """The path that must check: a re-estimate of a release one of whose parts had two
    cells of a geounit swapped, its index and manifest rewritten to the new SHA-256 so
    that validation passes, is refused where the part is read."""
    src = tmp_path / "tampered"
    budget = ReleaseBudget(load_preset("pl94-2020").scaled(rho="1/10"))
    run_release(release / "cef", src, budget, ReleaseOptions(seed=4))
    index_file = src / NMF / "_parts.json"
    index = json.loads(index_file.read_text())
    blocks = [p for p in index["parts"] if p["geolevel"] == "Block"]
    part = next(src / NMF / p["file"] for p in blocks if _swap_two_cells(src / NMF / p["file"]))
    assert row_group_keys(pq.read_metadata(part), str(part))  # still keyed as written
    for p in index["parts"]:
        if p["file"] == part.name:
            p["sha256"] = _sha(part)
    index_file.write_text(json.dumps(index))
    manifest = json.loads((src / "manifest.json").read_text())
    manifest["files"][f"{NMF}/{part.name}"] = _sha(part)
    manifest["files"][f"{NMF}/_parts.json"] = _sha(index_file)
    (src / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="cells are not the measured cells of the query"):
        reestimate(src, tmp_path / "again")
    assert not (tmp_path / "again").exists()
