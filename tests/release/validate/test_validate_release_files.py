"""What only a release's files can show, checked piece by piece.

``validate_run`` accounts for every entry of the run directory, holds the stated
privacy loss to the recorded budgets, the text MDF to the Parquet MDF, the tables'
identifiers to the geography, the codebook to censusdp's, and the randomness record to
the release's history; the readers of part directories read only the parts an index
lists. Here each piece on its own, on a small synthetic release.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from censusdp.api import Release
from censusdp.data.schema import get_schema
from censusdp.errors import InputError
from censusdp.io.atomic import sha256_of
from censusdp.io.budget_files import load_preset
from censusdp.io.mdf_read import read_mdf_persons
from censusdp.io.mdf_records import UNIT_COLUMNS, person_layout
from censusdp.io.mdf_text import text_mismatch, write_text_chunk
from censusdp.io.nmf_files import nmf_files
from censusdp.io.parts import part_files, read_parts
from censusdp.io.tables import codebook_mismatch, read_tables, table_part_mismatch
from censusdp.privacy.release_budget import ReleaseBudget, release_privacy
from censusdp.release.manifest import (
    file_checksums,
    inherited_randomness,
    randomness_problem,
    run_entries,
)
from censusdp.release.options import ReleaseOptions
from censusdp.release.pipeline import reestimate, run_release
from censusdp.release.validate import validate_run
from censusdp.release.validate._manifest import check_privacy_loss as _check_privacy_loss
from censusdp.tables import level_identifiers
from synth import block_codes, make_cef, write_cef

PERSONS_PQ = "mdf_persons.parquet/part-00000.parquet"
PERSONS_TXT = "mdf_persons.txt/part-00000.txt"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A seeded release, a secure one, and a re-estimate of each."""
    base = tmp_path_factory.mktemp("releasefiles")
    persons, units = make_cef(np.random.default_rng(11), block_codes(2, 2, 2, 3), gq_rate=0.3)
    write_cef(base / "cef", persons, units)
    budget = ReleaseBudget(load_preset("pl94-2020"), load_preset("pl94-2020-units"))
    run_release(base / "cef", base / "seeded", budget, ReleaseOptions(seed=5))
    run_release(base / "cef", base / "secure", budget, ReleaseOptions(seed=None))
    reestimate(base / "seeded", base / "seeded_again")
    reestimate(base / "secure", base / "secure_again")
    return {p.name: p for p in base.iterdir() if p.name != "cef"}


def _copy(run: Path, tmp_path: Path) -> Path:
    d = tmp_path / "copy"
    shutil.copytree(run, d, symlinks=True)
    return d


def _checksums(report) -> dict:
    return report.checks["checksums"]


# -- the text MDF ----------------------------------------------------------------------


def _records(rng: np.random.Generator, n: int) -> pa.Table:
    """Records in the MDF's column kinds: dictionary codes in runs, an integer column
    between them, a few distinct values each."""
    block = np.sort(rng.integers(0, 7, n))

    def coded(values: list[str], idx: np.ndarray) -> pa.Array:
        return pa.DictionaryArray.from_arrays(pa.array(idx.astype(np.int32)), pa.array(values))

    return pa.table(
        {
            "A": coded(["MPD"], np.zeros(n, np.int64)),
            "B": coded([f"{i:03d}" for i in range(7)], block),
            "C": coded(["1", "22", "333"], block % 3),
            "N": pa.array(np.arange(n, dtype=np.int64) * 37 - 5),
            "D": coded(["0", "1", "7"], rng.integers(0, 3, n)),
            "E": coded([f"{i:02d}" for i in range(1, 64)], rng.integers(0, 63, n)),
        }
    )


@pytest.mark.parametrize("n", [0, 1, 2, 500])
def test_the_text_writer_writes_what_arrows_csv_writer_writes(n: int) -> None:
    """The MDF2020 text encoder (built per run of equal codes) writes the bytes the CSV
    writer of the releases before it wrote: unquoted, ``|``, one line a record."""
    for table in (_records(np.random.default_rng(n), n), pa.table({"N": pa.array(range(n))})):
        got = io.BytesIO()
        write_text_chunk(table, got, header=True)
        want = pa.BufferOutputStream()
        want.write(("|".join(table.column_names) + "\n").encode())
        pacsv.write_csv(
            table,
            want,
            write_options=pacsv.WriteOptions(
                delimiter="|", quoting_style="none", include_header=False
            ),
        )
        assert got.getvalue() == want.getvalue().to_pybytes()


def _lines(path: Path, change) -> None:
    lines = path.read_bytes().split(b"\n")
    change(lines)
    path.write_bytes(b"\n".join(lines))


TEXT_DAMAGE = {
    "a record more": (lambda ls: ls.insert(-1, ls[-2]), "follows the last of the"),
    "the last newline gone": (lambda ls: ls.pop(), "has more records"),
    "a quoted code": (
        lambda ls: ls.__setitem__(2, ls[2][:-2] + b'"' + ls[2][-2:-1] + b'"'),
        "line 3",
    ),
    "a space in the header": (lambda ls: ls.__setitem__(0, ls[0] + b" "), "the header"),
    "an empty line": (lambda ls: ls.insert(1, b""), "line 2 reads ''"),
}


@pytest.mark.parametrize("case", sorted(TEXT_DAMAGE))
def test_text_mismatch_names_the_first_differing_line(
    runs: dict[str, Path], tmp_path: Path, case: str
) -> None:
    d = _copy(runs["seeded"], tmp_path)
    layout = person_layout(get_schema("pl94"))
    intact = text_mismatch(d / PERSONS_PQ, d / PERSONS_TXT, layout, header=True)
    assert intact == (None, sha256_of(d / PERSONS_TXT))
    change, words = TEXT_DAMAGE[case]
    _lines(d / PERSONS_TXT, change)
    problem, digest = text_mismatch(d / PERSONS_PQ, d / PERSONS_TXT, layout, header=True)
    assert problem is not None and words in problem, problem
    assert digest == sha256_of(d / PERSONS_TXT)  # hashed whole, even past the difference


def test_text_mismatch_wants_the_layouts_columns(runs: dict[str, Path], tmp_path: Path) -> None:
    d = _copy(runs["seeded"], tmp_path)
    unit_pq, unit_txt = (
        d / "mdf_units.parquet/part-00000.parquet",
        d / "mdf_units.txt/part-00000.txt",
    )
    assert text_mismatch(unit_pq, unit_txt, UNIT_COLUMNS, header=True)[0] is None
    t = pq.read_table(unit_pq)
    pq.write_table(t.select(list(reversed(t.column_names))), unit_pq)
    problem, _ = text_mismatch(unit_pq, unit_txt, UNIT_COLUMNS, header=True)
    assert "are not the MDF2020 layout" in problem


# -- the tables' identifiers and codebook ------------------------------------------------


def test_codebook_is_byte_for_byte_censusdps(runs: dict[str, Path], tmp_path: Path) -> None:
    d = _copy(runs["seeded"], tmp_path)
    book = d / "tables" / "codebook.csv"
    assert codebook_mismatch(d / "tables") is None
    text = book.read_bytes()
    book.write_bytes(text + b'"P9","P9_001N","Total:","X","Y"\n')
    assert "line" in codebook_mismatch(d / "tables")
    book.write_bytes(text.replace(b"RACE", b"ETHNICITY", 1))
    problem = codebook_mismatch(d / "tables")
    line = text.split(b"\n").index(next(x for x in text.split(b"\n") if b"RACE" in x)) + 1
    assert f"line {line} differs" in problem
    book.unlink()
    assert "missing" in codebook_mismatch(d / "tables")


def test_table_parts_carry_their_columns_and_identifiers(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """A table part whose columns are reordered, or whose geolevel is renamed, is not
    the tabulation of its geounits (whatever its counts)."""
    d = _copy(runs["seeded"], tmp_path)
    path = d / "tables" / "H1.parquet" / "part-00001.parquet"
    t = pq.read_table(path)
    blocks = np.asarray(t.column("geocode").to_pylist())
    ids = level_identifiers([("Block", 16, blocks)])
    rows = np.zeros((blocks.size, 0))
    names = t.column_names
    pq.write_table(t.select([names[1], names[0], *names[2:]]), path)
    assert "its columns are not table H1's" in table_part_mismatch(path, "H1", ids, rows, rows)
    levels = t.column("geolevel").to_pylist()
    levels[0] = "Blocks"
    pq.write_table(t.set_column(0, "geolevel", pa.array(levels)), path)
    bad = table_part_mismatch(path, "H1", ids, rows, rows)
    assert "has geolevel 'Blocks'; its geography gives 'Block'" in bad


# -- the privacy loss -------------------------------------------------------------------


def test_privacy_loss_is_the_composition_of_the_recorded_budgets() -> None:
    stated = release_privacy(load_preset("pl94-2020"), load_preset("pl94-2020-units"))
    stated = json.loads(json.dumps(stated))  # as a manifest holds it
    assert _check_privacy_loss(stated)[0]
    close = dict(stated, epsilon=stated["epsilon"] * (1 + 1e-12))  # a last digit rounded
    assert _check_privacy_loss(close)[0]
    for key, value in (("epsilon", 1.0), ("delta", 0.0), ("rho_exact", "1"), ("rho", "2.6")):
        ok, detail = _check_privacy_loss(dict(stated, **{key: value}))
        assert not ok and detail.startswith(f"{key}: the manifest says"), detail
    extra = json.loads(json.dumps(stated))
    extra["persons"]["epsilon_note"] = "a smaller epsilon"
    ok, detail = _check_privacy_loss(extra)
    assert not ok and "persons.epsilon_note" in detail
    ok, detail = _check_privacy_loss({k: v for k, v in stated.items() if k != "persons"})
    assert not ok and "records no person budget" in detail


# -- the randomness record ---------------------------------------------------------------


def test_reestimates_inherit_the_randomness_of_their_measurements(
    runs: dict[str, Path],
) -> None:
    for name, mode, seed in (("seeded", "seeded", 5), ("secure", "secure", None)):
        parent = json.loads((runs[name] / "manifest.json").read_text())
        child = json.loads((runs[f"{name}_again"] / "manifest.json").read_text())
        assert parent["randomness"]["mode"] == child["randomness"]["mode"] == mode
        assert parent["seed"] == child["seed"] == seed
        assert child["randomness"]["measured_by"] == {
            "run": str(runs[name].resolve()),
            "randomness": parent["randomness"],
        }
        assert randomness_problem(parent) is None and randomness_problem(child) is None
        report = validate_run(runs[f"{name}_again"])
        assert report.ok, report.failures()
        assert report.checks["randomness"]["detail"].endswith(f"({runs[name].resolve()})")


def _fresh(mode: str = "seeded", seed: int | None = 5) -> dict:
    return {
        "seed": seed,
        "input_sha256": {},
        "randomness": {"mode": mode, "seed": seed, "generator": "g"},
    }


def _child(parent: dict) -> dict:
    return {
        "seed": parent["seed"],
        "randomness": inherited_randomness(parent, "/elsewhere/parent"),
    }


RANDOMNESS = {
    "seeded without a seed": (
        lambda: {**_fresh(), "randomness": {"mode": "seeded", "seed": None, "generator": "g"}},
        "not an integer",
    ),
    "a seed of True": (lambda: _fresh(seed=True), "not an integer"),
    "a seed of 5.0": (
        lambda: {**_fresh(), "randomness": {"mode": "seeded", "seed": 5.0, "generator": "g"}},
        "not an integer",
    ),
    "secure with a seed": (
        lambda: {
            **_fresh(seed=None),
            "randomness": {"mode": "secure", "seed": 3, "generator": "g"},
        },
        "a secure run has none",
    ),
    "another mode": (lambda: _fresh(mode="pseudo"), "is not one of"),
    "no generator": (
        lambda: {**_fresh(), "randomness": {"mode": "seeded", "seed": 5}},
        "names no generator",
    ),
    "the manifest's seed differs": (lambda: {**_fresh(), "seed": 6}, "the manifest's seed is 6"),
    "a fresh run with a parent": (
        lambda: {**_child(_fresh()), "input_sha256": {}},
        "cannot record measured_by",
    ),
    "a grandchild that forgot": (
        lambda: _grandchild(lambda c: c["randomness"]["measured_by"]["randomness"].update(seed=9)),
        "were made with seed 9",
    ),
    "a grandparent record forged": (
        lambda: _grandchild(
            lambda c: c["randomness"]["measured_by"]["randomness"]["measured_by"][
                "randomness"
            ].update(mode="secure", seed=None)
        ),
        "randomness.measured_by.randomness: mode is 'seeded'",
    ),
}


def _grandchild(change) -> dict:
    child = _child(_child(_fresh()))
    change(child)
    return child


@pytest.mark.parametrize("case", sorted(RANDOMNESS))
def test_randomness_records_that_contradict_themselves(case: str) -> None:
    make, words = RANDOMNESS[case]
    problem = randomness_problem(make())
    assert problem is not None and words in problem, problem


def test_randomness_records_that_hold() -> None:
    for m in (_fresh(), _fresh("secure", None), _child(_fresh()), _child(_child(_fresh()))):
        assert randomness_problem(m) is None, m
    with pytest.raises(InputError, match="not a record of the mode"):
        inherited_randomness({"seed": None, "randomness": "none"}, "/x")


# -- every entry accounted for, and readers that read what an index lists ---------------


def test_run_entries_never_follow_links(tmp_path: Path) -> None:
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "f").write_text("x")
    (tmp_path / "manifest.json").write_text("{}")
    (tmp_path / "d" / "manifest.json").write_text("{}")
    (tmp_path / "signature.json").write_text("{}")
    os.symlink(tmp_path / "d", tmp_path / "link")
    os.mkfifo(tmp_path / "d" / "pipe")
    assert list(run_entries(tmp_path)) == [
        ("d", "directory"),
        ("d/e", "directory"),
        ("d/f", "file"),
        ("d/manifest.json", "file"),
        ("d/pipe", "special file"),
        ("link", "symbolic link"),
        ("manifest.json", "file"),
        ("signature.json", "file"),
    ]
    # only the manifest and the signature at the top are not checksummed
    assert sorted(file_checksums(tmp_path)) == ["d/f", "d/manifest.json"]


def test_a_signature_at_the_top_is_the_one_unlisted_file(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    d = _copy(runs["seeded"], tmp_path)
    (d / "signature.json").write_text("{}")
    assert _checksums(validate_run(d, mdf=False))["ok"]
    (d / "tables" / "signature.json").write_text("{}")
    detail = _checksums(validate_run(d, mdf=False))["detail"]
    assert detail == "tables/signature.json is not part of the release"


def test_a_listed_path_outside_the_release_is_never_read(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """A manifest listing ``../pipe`` (a FIFO: reading it would block): named, not read."""
    d = _copy(runs["seeded"], tmp_path)
    os.mkfifo(tmp_path / "pipe")
    m = json.loads((d / "manifest.json").read_text())
    m["files"]["../pipe"] = "0" * 64
    m["files"]["/etc/passwd"] = "0" * 64
    (d / "manifest.json").write_text(json.dumps(m))
    detail = _checksums(validate_run(d))["detail"]
    assert "the manifest lists ../pipe, not a path inside the release" in detail
    assert "the manifest lists /etc/passwd, not a path inside the release" in detail


def test_readers_read_only_the_parts_an_index_lists(runs: dict[str, Path], tmp_path: Path) -> None:
    run = runs["seeded"]
    d = _copy(run, tmp_path)
    for directory in ("mdf_persons.parquet", "mdf_units.parquet", "noisy_measurements.parquet"):
        part = sorted((d / directory).glob("part-*.parquet"))[0]
        for name in ("part-99999.parquet", ".hidden.parquet", "manifest.json", "x"):
            shutil.copy(part, d / directory / name)
    for name in ("P1", "H1"):
        part = d / "tables" / f"{name}.parquet" / "part-00000.parquet"
        shutil.copy(part, d / "tables" / f"{name}.parquet" / "part-00099.parquet")
        shutil.copy(part, d / "tables" / f"{name}.parquet" / "manifest.json")
    rel, good = Release.open(d), Release.open(run)
    assert rel.mdf_persons().equals(good.mdf_persons())
    assert rel.mdf_units().equals(good.mdf_units())
    assert rel.nmf().num_rows == good.nmf().num_rows
    assert rel.nmf("County").equals(good.nmf("County"))
    assert rel.table("P1").equals(good.table("P1"))
    assert rel.table("H1", sumlev="040").num_rows == 1
    assert all(t.equals(read_tables(run / "tables")[n]) for n, t in rel.tables().items())
    assert read_mdf_persons(d / "mdf_persons.parquet")["geocode"].size == (
        good.mdf_persons().num_rows
    )
    assert [f.name for f in nmf_files(d / "noisy_measurements.parquet")] == [
        f.name for f in nmf_files(run / "noisy_measurements.parquet")
    ]
    assert not validate_run(d).ok


def test_an_index_names_only_its_own_regular_part_files(tmp_path: Path) -> None:
    d = tmp_path / "x.parquet"
    d.mkdir()
    pq.write_table(pa.table({"a": [1, 2]}), d / "part-00000.parquet")
    pq.write_table(pa.table({"a": [3]}), tmp_path / "outside.parquet")

    def index(*files: str) -> None:
        parts = [{"file": f, "rows": 0} for f in files]
        (d / "_parts.json").write_text(json.dumps({"format": 1, "parts": parts}))

    with pytest.raises(InputError, match="no _parts.json"):
        part_files(d)
    index("part-00000.parquet")
    assert read_parts(d).column("a").to_pylist() == [1, 2]
    for bad in ("../outside.parquet", ".part.parquet", "_x.parquet", "part-0.txt"):
        index(bad)
        with pytest.raises(InputError, match="not a part file name"):
            part_files(d)
    index("part-00000.parquet", "part-00000.parquet")
    with pytest.raises(InputError, match="lists a part twice"):
        part_files(d)
    os.symlink(tmp_path / "outside.parquet", d / "part-00001.parquet")
    index("part-00000.parquet", "part-00001.parquet")
    with pytest.raises(InputError, match="not regular files"):
        part_files(d)
    index()
    with pytest.raises(InputError, match="lists none"):
        part_files(d)


def test_single_file_mdf_and_tables_are_checked_alike(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """Releases made before part files hold one file each: their text MDF and tables are
    checked as the parts are (text against Parquet, identifiers against the geography)."""
    from censusdp.io.mdf_text import read_mdf_text
    from censusdp.io.parts import read_parts

    d = _copy(runs["seeded"], tmp_path)
    for name in ("mdf_persons", "mdf_units"):
        records, text = read_parts(d / f"{name}.parquet"), read_mdf_text(d / f"{name}.txt")
        shutil.rmtree(d / f"{name}.parquet")
        shutil.rmtree(d / f"{name}.txt")
        pq.write_table(records, d / f"{name}.parquet")
        (d / f"{name}.txt").write_bytes(text)
    for name in ("P1", "P2", "P3", "P4", "P5", "H1"):
        table = read_parts(d / "tables" / f"{name}.parquet")
        shutil.rmtree(d / "tables" / f"{name}.parquet")
        pq.write_table(table, d / "tables" / f"{name}.parquet")
    m = json.loads((d / "manifest.json").read_text())
    m["files"] = {
        str(p.relative_to(d)): sha256_of(p)
        for p in sorted(d.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    }
    (d / "manifest.json").write_text(json.dumps(m))
    report = validate_run(d)
    assert report.ok, report.failures()
    _lines(d / "mdf_units.txt", lambda ls: ls.__setitem__(3, b"hello world"))
    t = pq.read_table(d / "tables" / "P2.parquet")
    names = t.column("NAME").to_pylist()
    names[2] = "Elsewhere County, Wyoming"
    pq.write_table(
        t.set_column(t.column_names.index("NAME"), "NAME", pa.array(names)),
        d / "tables" / "P2.parquet",
    )
    report = validate_run(d)
    text, tables = report.checks["mdf_text_matches_parquet"], report.checks["tables_match_mdf"]
    assert not text["ok"] and "mdf_units.txt: line 4 reads 'hello world'" in text["detail"]
    assert not tables["ok"] and "P2.parquet: row 2" in tables["detail"]
    assert "has NAME 'Elsewhere County, Wyoming'" in tables["detail"]
