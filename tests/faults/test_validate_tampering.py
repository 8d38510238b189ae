"""Wrong releases that ``censusdp validate`` must refuse, run as a user would.

Each case copies a good release (a small generated Wyoming, seeded), damages the copy
the way a forger or a careless hand would, and runs ``censusdp validate`` (and the
commands that read releases) in a subprocess. Most cases also rewrite every checksum
(the manifest's and the part indexes', :func:`rehash`), so only the check the case is
about can catch it. Every command must leave what it was given byte for byte as it
was (:func:`unchanged`), and the good release is hashed before and after the module.

Each case was accepted before validate accounted for every entry of a release, held
the stated privacy loss to the recorded budgets, compared the text MDF with the
Parquet MDF, the tables' identifiers with the geography, and the randomness record
with the release's history.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from faults_cli import cli, digest


def unchanged(directory: Path, run: Callable[[], subprocess.CompletedProcess]):
    """``run()``, asserting it leaves ``directory`` as it was (nothing written into it)."""
    before = digest(directory)
    proc = run()
    assert digest(directory) == before, f"{directory} changed"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def rehash(run: Path) -> None:
    """What a forger writes after tampering: every part index's SHA-256 of its parts and
    the manifest's of every regular file (but the manifest itself)."""
    for index in run.rglob("_parts.json"):
        data = json.loads(index.read_text())
        for p in data["parts"]:
            f = index.parent / p["file"]
            if f.is_file() and not f.is_symlink():
                p["sha256"] = hashlib.sha256(f.read_bytes()).hexdigest()
        index.write_text(json.dumps(data))
    m = json.loads((run / "manifest.json").read_text())
    m["files"] = {
        k: v
        for k, v in digest(run).items()
        if k != "manifest.json" and not v.startswith("-> ") and v != "special"
    }
    (run / "manifest.json").write_text(json.dumps(m))


def edit_manifest(run: Path, change: Callable[[dict], None]) -> None:
    m = json.loads((run / "manifest.json").read_text())
    change(m)
    (run / "manifest.json").write_text(json.dumps(m))


def invalid(run: Path, check: str, *words: str) -> str:
    """``censusdp validate run`` fails (exit 1) on ``check``, its line naming ``words``."""
    proc = unchanged(run, lambda: cli("validate", run, "--quiet", timeout=120))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = next((x for x in proc.stdout.splitlines() if f"INVALID: {check}:" in x), None)
    assert line is not None, proc.stdout
    for w in words:
        assert w in line, (w, line)
    return line


@pytest.fixture(scope="module")
def state(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("tampering")
    proc = cli("generate", "--state", "WY", "--seed", "3", "--scale", "0.02", "--out", base / "cef")
    assert proc.returncode == 0, proc.stderr
    return base


@pytest.fixture(scope="module")
def good_release(state: Path):
    """A seeded release; hashed before the cases and after them (none may change it)."""
    proc = cli("run", "--input", state / "cef", "--out", state / "run", "--seed", "7", "--quiet")
    assert proc.returncode == 0, proc.stderr
    before = digest(state / "run")
    yield state / "run"
    assert digest(state / "run") == before


@pytest.fixture(scope="module")
def reestimated(good_release: Path, state: Path) -> Path:
    out = state / "again"
    proc = unchanged(
        good_release, lambda: cli("run", "--from-measurements", good_release, "--out", out)
    )
    assert proc.returncode == 0, proc.stderr
    return out


def copy(release: Path, tmp_path: Path, name: str = "t") -> Path:
    d = tmp_path / name
    shutil.copytree(release, d, symlinks=True)
    return d


def test_the_good_release_and_its_reestimate_validate(
    good_release: Path, reestimated: Path
) -> None:
    for run in (good_release, reestimated):
        proc = unchanged(run, lambda run=run: cli("validate", run))
        assert proc.returncode == 0, proc.stdout
        assert "valid" in proc.stdout


# -- item 10: every entry of a release accounted for -----------------------------------

MDF_PART = "mdf_persons.parquet/part-00000.parquet"
TABLE_TOP = "tables/P1.parquet/part-00000.parquet"


def _fifo(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)


ENTRIES: dict[str, tuple[Callable[[Path], None], bool, str]] = {
    # name: (damage, rehash, what the checksums line names)
    "a Parquet part named manifest.json": (
        lambda d: shutil.copy(d / MDF_PART, d / "mdf_persons.parquet/manifest.json"),
        False,
        "mdf_persons.parquet/manifest.json is not part of the release",
    ),
    "a table part named manifest.json": (
        lambda d: shutil.copy(d / TABLE_TOP, d / "tables/P1.parquet/manifest.json"),
        False,
        "tables/P1.parquet/manifest.json is not part of the release",
    ),
    "a hidden part, listed by a forger": (
        lambda d: shutil.copy(d / MDF_PART, d / "mdf_persons.parquet/.extra.parquet"),
        True,
        "mdf_persons.parquet/.extra.parquet is not one of the parts its _parts.json lists",
    ),
    "a part under another name, listed by a forger": (
        lambda d: shutil.copy(d / MDF_PART, d / "mdf_persons.parquet/part-00099.parquet"),
        True,
        "part-00099.parquet is not one of the parts its _parts.json lists",
    ),
    "a subdirectory of parts, listed by a forger": (
        lambda d: (
            (d / "tables/P1.parquet/more").mkdir(),
            shutil.copy(d / TABLE_TOP, d / "tables/P1.parquet/more/part-00000.parquet"),
        ),
        True,
        "tables/P1.parquet/more is not one of the parts",
    ),
    "a symbolic link to a directory": (
        lambda d: os.symlink(d / "tables/P2.parquet", d / "tables/P1.parquet/linked"),
        False,
        "tables/P1.parquet/linked is a symbolic link",
    ),
    "an empty directory": (
        lambda d: (d / "tables/empty").mkdir(),
        False,
        "tables/empty/ is a directory the release has not",
    ),
    "a FIFO": (
        lambda d: _fifo(d / "noisy_measurements.parquet/pipe"),
        False,
        "noisy_measurements.parquet/pipe is a special file",
    ),
    "a FIFO in place of a listed part": (
        lambda d: (
            (d / "mdf_units.parquet/part-00000.parquet").unlink(),
            _fifo(d / "mdf_units.parquet/part-00000.parquet"),
        ),
        False,
        "mdf_units.parquet/part-00000.parquet is a special file",
    ),
    "a directory of parts replaced by a link to a copy": (
        lambda d: (
            shutil.move(d / "tables/P1.parquet", d.parent / "P1.parquet"),
            os.symlink(d.parent / "P1.parquet", d / "tables/P1.parquet"),
        ),
        False,
        "tables/P1.parquet is a symbolic link, not a directory of the release",
    ),
    "a directory holding a FIFO in place of a listed file": (
        lambda d: (
            shutil.move(d / "invariants.parquet", d.parent / "invariants.parquet"),
            (d / "invariants.parquet").mkdir(),
            shutil.copy(d.parent / "invariants.parquet", d / "invariants.parquet/a.parquet"),
            _fifo(d / "invariants.parquet/b.parquet"),
        ),
        False,
        "invariants.parquet is a directory, not a regular file of the release",
    ),
    "a listed part replaced by a link to a copy": (
        lambda d: (
            shutil.move(d / MDF_PART, d.parent / "elsewhere.parquet"),
            os.symlink(d.parent / "elsewhere.parquet", d / MDF_PART),
        ),
        False,
        f"{MDF_PART} is a symbolic link",
    ),
}


ENTRIES_DEFAULT = (
    "a hidden part, listed by a forger",
    "a listed part replaced by a link to a copy",
)
"""The cases of the default suite (the others, each a variant of one of these checks, run
with ``-m slow``)."""


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, marks=() if c in ENTRIES_DEFAULT else pytest.mark.slow)
        for c in sorted(ENTRIES)
    ],
)
def test_every_entry_is_accounted_for(good_release: Path, tmp_path: Path, case: str) -> None:
    damage, forge, words = ENTRIES[case]
    d = copy(good_release, tmp_path)
    damage(d)
    if forge:
        rehash(d)
    invalid(d, "checksums", words)


@pytest.mark.slow
def test_injected_rows_are_never_read(good_release: Path, state: Path, tmp_path: Path) -> None:
    """Rows injected under a name validate skipped were read by evaluate (the US total
    off by the state's population): evaluate refuses the release, and with
    --allow-invalid the readers still read only the parts each index lists."""
    d = copy(good_release, tmp_path)
    shutil.copy(d / TABLE_TOP, d / "tables/P1.parquet/manifest.json")
    shutil.copy(d / MDF_PART, d / "mdf_persons.parquet/manifest.json")
    shutil.copy(
        d / "noisy_measurements.parquet/part-00000.parquet",
        d / "noisy_measurements.parquet/manifest.json",
    )
    report = tmp_path / "e.json"
    proc = unchanged(
        d, lambda: cli("evaluate", "--truth", state / "cef", "--release", d, "--json", report)
    )
    assert proc.returncode == 1 and "does not validate" in proc.stderr, proc.stderr
    assert not report.exists()
    proc = unchanged(
        d,
        lambda: cli(
            "evaluate", "--truth", state / "cef", "--release", d, "--json", report,
            "--allow-invalid", "--quiet",
        ),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(report.read_text())
    assert result["metrics"]["total_population"]["US"]["sum_error"] == 0
    assert result["invariants_ok"], result["invariants"]


# -- item 11: the stated privacy loss ----------------------------------------------------

CLAIMS: dict[str, Callable[[dict], None]] = {
    "epsilon": lambda m: m.update(epsilon=1.0),
    "rho": lambda m: m.update(rho=0.5),
    "rho_exact": lambda m: m.update(rho_exact="1/2"),
    "delta": lambda m: m.update(delta=1e-12),
    "mechanism": lambda m: m.update(mechanism="geometric"),
    "persons.epsilon": lambda m: m["persons"].update(epsilon=1.0),
    "units.rho_float": lambda m: m["units"].update(rho_float=0.01),
    "persons.geolevels[0].queries[0].variance": lambda m: m["persons"]["geolevels"][0]["queries"][
        0
    ].update(variance=1.0),
    "units": lambda m: m.pop("units"),
}


CLAIMS_DEFAULT = ("epsilon", "persons.geolevels[0].queries[0].variance", "units")


@pytest.mark.parametrize(
    "key",
    [
        pytest.param(k, marks=() if k in CLAIMS_DEFAULT else pytest.mark.slow)
        for k in sorted(CLAIMS)
    ],
)
def test_a_stated_privacy_loss_that_the_budgets_do_not_give(
    good_release: Path, tmp_path: Path, key: str
) -> None:
    d = copy(good_release, tmp_path)
    edit_manifest(d, CLAIMS[key])
    # without its unit budget, the release's rho is not the persons' alone
    line = invalid(d, "privacy_loss", "rho:" if key == "units" else f"{key}:")
    assert "recorded budgets" in line


@pytest.mark.slow
def test_infer_refuses_a_release_whose_claim_validation_rejects(
    good_release: Path, tmp_path: Path
) -> None:
    d = copy(good_release, tmp_path)
    edit_manifest(d, lambda m: m.update(epsilon=1.0))
    proc = unchanged(d, lambda: cli("infer", d, "--out", tmp_path / "gls", "--quiet"))
    assert proc.returncode == 1 and "does not validate" in proc.stderr, proc.stderr
    assert not (tmp_path / "gls" / "estimates.parquet").exists()
    proc = unchanged(
        good_release,
        lambda: cli("infer", good_release, "--out", tmp_path / "ok", "--quiet"),
    )
    assert proc.returncode == 0, proc.stderr
    stated = json.loads((tmp_path / "ok" / "manifest.json").read_text())
    release = json.loads((good_release / "manifest.json").read_text())
    assert stated["release_epsilon"] == release["epsilon"] != 1.0


# -- item 11: the text MDF is the Parquet MDF -----------------------------------------


def _lines(path: Path, change: Callable[[list[bytes]], None]) -> None:
    lines = path.read_bytes().split(b"\n")
    change(lines)
    path.write_bytes(b"\n".join(lines))


def _swap(lines: list[bytes]) -> None:
    lines[3], lines[4] = lines[4], lines[3]


def _set(lines: list[bytes], i: int, value: bytes) -> None:
    lines[i] = value


TEXT = {
    "a line replaced by hello world": (
        "mdf_persons.txt/part-00000.txt",
        lambda ls: _set(ls, 5, b"hello world"),
        "line 6 reads 'hello world'",
    ),
    "a person recoded in the text only": (
        "mdf_persons.txt/part-00000.txt",
        lambda ls: _set(ls, 2, ls[2][:-2] + (b"02" if ls[2][-2:] != b"02" else b"03")),
        "line 3 reads",
    ),
    "two records swapped": ("mdf_persons.txt/part-00000.txt", _swap, "line 4"),
    "the header changed": (
        "mdf_units.txt/part-00000.txt",
        lambda ls: _set(ls, 0, ls[0].lower()),
        "the header",
    ),
    "a unit's status changed": (
        "mdf_units.txt/part-00000.txt",
        lambda ls: _set(ls, 1, ls[1][:-1] + (b"1" if ls[1][-1:] != b"1" else b"2")),
        "line 2 reads",
    ),
    "CRLF line ends": (
        "mdf_persons.txt/part-00000.txt",
        lambda ls: ls.__setitem__(slice(None), [x + b"\r" if x else x for x in ls]),
        "line 1",
    ),
}


TEXT_DEFAULT = ("a line replaced by hello world", "two records swapped", "the header changed")
"""The text cases of the default suite (each other case makes the same check)."""


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=() if c in TEXT_DEFAULT else pytest.mark.slow) for c in sorted(TEXT)],
)
def test_the_text_mdf_is_the_parquet_mdf(good_release: Path, tmp_path: Path, case: str) -> None:
    name, change, words = TEXT[case]
    d = copy(good_release, tmp_path)
    _lines(d / name, change)
    rehash(d)
    invalid(d, "mdf_text_matches_parquet", name, words)


# -- item 11: GEOIDs, NAMEs and the codebook -------------------------------------------


def _set_cell(path: Path, column: str, row: int, value: str | None) -> None:
    t = pq.read_table(path)
    values = t.column(column).to_pylist()
    values[row] = value
    i = t.column_names.index(column)
    pq.write_table(t.set_column(i, column, pa.array(values, pa.string())), path)


IDENTIFIERS = {
    "a block's GEOID": ("tables/P1.parquet/part-00001.parquet", "GEOID", 3, "560019999999999"),
    "the state's NAME": (TABLE_TOP, "NAME", 1, "Montana"),
    "a county's NAME": ("tables/H1.parquet/part-00000.parquet", "NAME", 2, "Elsewhere County"),
    "a tract's SUMLEV": ("tables/P3.parquet/part-00000.parquet", "SUMLEV", 4, "150"),
    "a block's GEOID dropped": ("tables/P5.parquet/part-00001.parquet", "GEOID", 0, None),
}


@pytest.mark.parametrize(
    "case",
    [
        # a GEOID and a SUMLEV by default; the NAMEs and a dropped GEOID make the same check
        pytest.param(
            c, marks=() if c in ("a block's GEOID", "a tract's SUMLEV") else pytest.mark.slow
        )
        for c in sorted(IDENTIFIERS)
    ],
)
def test_tables_carry_the_geographys_identifiers(
    good_release: Path, tmp_path: Path, case: str
) -> None:
    name, column, row, value = IDENTIFIERS[case]
    d = copy(good_release, tmp_path)
    _set_cell(d / name, column, row, value)
    rehash(d)
    invalid(d, "tables_match_mdf", name, column, "its geography gives")


def test_a_place_row_is_the_sum_of_its_blocks(good_release: Path, tmp_path: Path) -> None:
    """The tables' rows off the hierarchy (places, county subdivisions, AIAN areas) are
    checked from the files like the levels: a count edited in one is named."""
    d = copy(good_release, tmp_path)
    path = d / "tables" / "P3.parquet" / "part-00000.parquet"
    t = pq.read_table(path)
    levels = t.column("geolevel").to_pylist()
    off = [i for i, g in enumerate(levels) if g in ("CountySubdivision", "Place", "AIANArea")]
    assert off, f"the release has no place row: {sorted(set(levels))}"
    row = off[-1]
    values = t.column("P3_001N").to_pylist()
    values[row] += 1
    i = t.column_names.index("P3_001N")
    pq.write_table(t.set_column(i, "P3_001N", pa.array(values, pa.int64())), path)
    rehash(d)
    invalid(d, "tables_match_mdf", "P3.parquet", "1 rows differ", t.column("geocode")[row].as_py())


def test_a_release_written_before_the_place_rows_still_validates(
    good_release: Path, tmp_path: Path
) -> None:
    """A release written before the tables had rows off the hierarchy (its part 0 and
    its index list none) is checked without them: it validates as it did."""
    from censusdp.io.table_csv import write_table_csvs

    d = copy(good_release, tmp_path)
    entities = {"CountySubdivision", "Place", "AIANArea", "AIANAreaState"}
    for index in (d / "tables").glob("*.parquet/_parts.json"):
        path = index.parent / "part-00000.parquet"
        t = pq.read_table(path)
        keep = [g not in entities for g in t.column("geolevel").to_pylist()]
        assert not all(keep), f"{path}: no place row"
        t = t.filter(pa.array(keep))
        pq.write_table(t, path)
        data = json.loads(index.read_text())
        top = data["parts"][0]
        data["rows"] -= top["rows"] - t.num_rows
        top["rows"] = top["stop"] = t.num_rows
        top["geolevel"] = ",".join(g for g in top["geolevel"].split(",") if g not in entities)
        index.write_text(json.dumps(data))
    write_table_csvs(d / "tables")
    rehash(d)
    proc = unchanged(d, lambda: cli("validate", d, "--quiet"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(
    "case",
    [
        "edited",
        pytest.param("missing", marks=pytest.mark.slow),
        pytest.param("a link to a copy", marks=pytest.mark.slow),
    ],
)
def test_the_codebook_is_censusdps(good_release: Path, tmp_path: Path, case: str) -> None:
    d = copy(good_release, tmp_path)
    book = d / "tables" / "codebook.csv"
    if case == "edited":
        book.write_text(book.read_text().replace("Total:", "Everyone:", 1))
    elif case == "missing":
        book.unlink()
    else:
        shutil.move(book, tmp_path / "codebook.csv")
        os.symlink(tmp_path / "codebook.csv", book)
    rehash(d)
    invalid(d, "codebook", "codebook.csv")


def test_the_tables_csv_hold_their_parquet(good_release: Path, tmp_path: Path) -> None:
    """A count edited in a wide CSV and a long CSV removed, both named (one validate run;
    the other cases are tests/io/test_table_csv.py's)."""
    d = copy(good_release, tmp_path)
    wide = d / "tables" / "P1.csv"
    lines = wide.read_text().splitlines(keepends=True)
    cells = lines[3].split(",")
    cells[-1] = str(int(cells[-1]) + 1) + "\n"
    lines[3] = ",".join(cells)
    wide.write_text("".join(lines))
    (d / "tables" / "H1_long.csv").unlink()
    rehash(d)
    invalid(d, "tables_csv", "P1.csv: line 4 ", "H1_long.csv: missing")


# -- item 12: the randomness claim ---------------------------------------------------------


@pytest.mark.slow
def test_a_reestimate_of_a_seeded_release_is_seeded(
    good_release: Path, reestimated: Path, tmp_path: Path
) -> None:
    m = json.loads((reestimated / "manifest.json").read_text())
    assert m["seed"] == 7
    assert m["randomness"]["mode"] == "seeded" and m["randomness"]["seed"] == 7
    assert m["randomness"]["measured_by"]["run"] == str(good_release.resolve())
    parent = json.loads((good_release / "manifest.json").read_text())
    assert m["randomness"]["measured_by"]["randomness"] == parent["randomness"]
    # and says so: on its summary line, and a re-estimate of it too
    out = tmp_path / "twice"
    proc = unchanged(
        reestimated, lambda: cli("run", "--from-measurements", reestimated, "--out", out)
    )
    assert proc.returncode == 0, proc.stderr
    assert "SEEDED (not secure)" in proc.stdout and "secure randomness" not in proc.stdout
    twice = json.loads((out / "manifest.json").read_text())
    assert (
        twice["seed"] == 7 and twice["randomness"]["measured_by"]["randomness"] == m["randomness"]
    )
    assert unchanged(out, lambda: cli("validate", out, "--quiet")).returncode == 0


def _claim_secure(m: dict) -> None:
    m["seed"] = None
    m["randomness"].update(mode="secure", seed=None)


def _claim_secure_throughout(m: dict) -> None:
    _claim_secure(m)
    m["randomness"]["measured_by"]["randomness"].update(mode="secure", seed=None)


RANDOMNESS = {
    "claims secure": (_claim_secure, "were made with mode 'seeded'"),
    "claims secure, its record of the measured run too": (
        _claim_secure_throughout,
        "records 'seeded'",
    ),
    "another seed": (
        lambda m: (m.update(seed=8), m["randomness"].update(seed=8)),
        "were made with seed 7",
    ),
    "no record of what it re-estimated": (
        lambda m: m["randomness"].pop("measured_by"),
        "records neither an input it measured",
    ),
    "the old string record": (
        lambda m: m.update(seed=None, randomness="none (re-estimated from elsewhere)"),
        "not a record of the mode",
    ),
}


RANDOMNESS_DEFAULT = ("claims secure", "another seed")


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, marks=() if c in RANDOMNESS_DEFAULT else pytest.mark.slow)
        for c in sorted(RANDOMNESS)
    ],
)
def test_a_reestimate_claims_the_randomness_of_its_measurements(
    reestimated: Path, tmp_path: Path, case: str
) -> None:
    change, words = RANDOMNESS[case]
    d = copy(reestimated, tmp_path)
    edit_manifest(d, change)
    invalid(d, "randomness", words)


def test_a_seeded_release_whose_seed_and_record_disagree(
    good_release: Path, tmp_path: Path
) -> None:
    d = copy(good_release, tmp_path)
    edit_manifest(d, lambda m: m.update(seed=None))
    invalid(d, "randomness", "the manifest's seed is None")
