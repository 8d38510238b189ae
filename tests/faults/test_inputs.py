"""Bad input, run as a user would: one reader for every command, one line for every error.

Each case runs ``censusdp`` in a subprocess on a small generated state and asserts the
exit code (2 for a usage or configuration mistake, 1 for data), that the error is one
line naming the argument, file, field or value (never a traceback, never a hang), and
that the input is byte-identical afterwards. ``run`` (the part reader) and the commands
that read the whole CEF (``protect``, ``evaluate``, ``validate --input``) must read the
same rows from the same directory, and refuse the same things in the same words.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from faults_cli import CLI, cli, digest, generated_release, one_line_error


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A generated state and its release (made from single files)."""
    return generated_release(tmp_path_factory.mktemp("inputs"))


@pytest.fixture()
def cef(base: Path):
    """The generated input, and a check that no case changed it."""
    before = digest(base / "cef")
    yield base / "cef"
    assert digest(base / "cef") == before


def _parts(cef: Path, d: Path) -> Path:
    """``cef`` with ``persons.parquet`` as a directory of two parts (and Spark's markers)."""
    d.mkdir()
    shutil.copyfile(cef / "units.parquet", d / "units.parquet")
    t = pq.read_table(cef / "persons.parquet")
    (d / "persons.parquet").mkdir()
    half = t.num_rows // 2
    pq.write_table(t.slice(0, half), d / "persons.parquet" / "part-00000.parquet")
    pq.write_table(t.slice(half), d / "persons.parquet" / "part-00001.parquet")
    (d / "persons.parquet" / "_SUCCESS").write_bytes(b"")
    (d / "persons.parquet" / ".part-00000.parquet.crc").write_bytes(b"crc")
    return d


def _second_part_moved(d: Path, where: str) -> Path:
    """The second part moved to ``where`` (relative to ``persons.parquet/``)."""
    parts = d / "persons.parquet"
    (parts / where).parent.mkdir(parents=True, exist_ok=True)
    os.replace(parts / "part-00001.parquet", parts / where)
    return parts / where


def _nothing_written(tmp_path: Path) -> bool:
    """Neither ``run`` nor ``protect`` wrote a file (``protect`` makes its --out
    directory before it reads; an empty one publishes nothing)."""
    return not (tmp_path / "r").exists() and not any(
        p.is_file() for p in (tmp_path / "ps").rglob("*")
    )


def _reads(d: Path, tmp_path: Path) -> dict[str, object]:
    """What ``run`` and ``protect swap`` (the whole-file reader) do with ``d``."""
    return {
        "run": cli("run", "--input", d, "--out", tmp_path / "r", "--seed", "1", "--quiet"),
        "protect": cli(
            "protect",
            "swap",
            "--input",
            d,
            "--out",
            tmp_path / "ps",
            "--rate",
            "0.1",
            "--seed",
            "1",
            "--quiet",
        ),  # fmt: skip
    }


# -- one reader: the same rows, the same refusals ---------------------------------------

SLOW = pytest.mark.slow  # the other cases of a parametrized check run with -m slow

LAYOUTS = {
    "subdirectory": "sub/part-00001.parquet",
    "hive folder": "year=2020/part-00001.parquet",
    "no .parquet suffix": "part-00001",
    "hidden file": ".part-00001.parquet",
    "underscore file": "_part-00001.parquet",
    "other suffix": "part-00001.parquet.bak",
}


@pytest.mark.parametrize(
    "layout",
    [lay if lay == "subdirectory" else pytest.param(lay, marks=SLOW) for lay in sorted(LAYOUTS)],
)
def test_every_command_refuses_a_part_directory_with_rows_it_would_skip(
    cef: Path, tmp_path: Path, layout: str
) -> None:
    d = _parts(cef, tmp_path / "in")
    moved = _second_part_moved(d, LAYOUTS[layout])
    named = moved.parent if moved.parent != d / "persons.parquet" else moved
    before = digest(d)
    for command, proc in _reads(d, tmp_path).items():
        one_line_error(proc, 1, str(named))
        assert "internal error" not in proc.stderr, (command, proc.stderr)
    assert _nothing_written(tmp_path)
    assert digest(d) == before


@pytest.mark.slow
def test_a_symlinked_part_is_refused(cef: Path, tmp_path: Path) -> None:
    d = _parts(cef, tmp_path / "in")
    part = d / "persons.parquet" / "part-00001.parquet"
    shutil.move(part, tmp_path / "elsewhere.parquet")
    part.symlink_to(tmp_path / "elsewhere.parquet")
    for proc in _reads(d, tmp_path).values():
        one_line_error(proc, 1, str(part), "symbolic link")


@pytest.mark.slow
def test_run_and_the_whole_file_reader_read_the_same_rows(cef: Path, tmp_path: Path) -> None:
    """A valid directory of parts (with Spark's _SUCCESS and .crc files) is read by both
    readers, row for row, and ``validate --input`` finds it is the input ``run`` read."""
    d = _parts(cef, tmp_path / "in")
    rel = tmp_path / "rel"
    proc = cli("run", "--input", d, "--out", rel, "--seed", "1", "--quiet")
    assert proc.returncode == 0, proc.stderr
    proc = cli("validate", rel, "--input", d)
    assert proc.returncode == 0 and "valid" in proc.stdout, proc.stdout + proc.stderr
    proc = cli("validate", rel, "--input", cef)  # the same rows, other files
    assert proc.returncode == 1 and "made_from_truth" in proc.stdout, proc.stdout


@pytest.mark.slow
def test_a_part_with_string_ages_is_refused_alike(cef: Path, tmp_path: Path) -> None:
    """``read_cef`` read a directory as one dataset, casting a later part's string ages
    to the first part's integers; both readers now name the part and the column."""
    d = _parts(cef, tmp_path / "in")
    part = d / "persons.parquet" / "part-00001.parquet"
    t = pq.read_table(part)
    ages = pa.array([str(a) for a in t.column("age").to_pylist()])
    pq.write_table(t.set_column(t.schema.get_field_index("age"), "age", ages), part)
    errors = set()
    for proc in _reads(d, tmp_path).values():
        one_line_error(proc, 1, str(part), "'age'", "string")
        errors.add(proc.stderr.split("error: ", 1)[1])
    assert len(errors) == 1, errors  # word for word


def test_string_ages_in_a_single_file_are_refused_alike(cef: Path, tmp_path: Path) -> None:
    d = tmp_path / "in"
    shutil.copytree(cef, d)
    t = pq.read_table(d / "persons.parquet")
    ages = pa.array([str(a) for a in t.column("age").to_pylist()])
    pq.write_table(
        t.set_column(t.schema.get_field_index("age"), "age", ages), d / "persons.parquet"
    )
    errors = set()
    for proc in _reads(d, tmp_path).values():
        one_line_error(proc, 1, "persons.parquet", "'age'", "not an integer type")
        errors.add(proc.stderr.split("error: ", 1)[1])
    assert len(errors) == 1, errors


# -- validate --input: the input hash, whatever the layout ------------------------------


def _races_changed(part: Path, n: int = 50) -> None:
    t = pq.read_table(part)
    race = t.column("cenrace").to_numpy().copy()
    race[:n] = race[:n] % 63 + 1
    pq.write_table(
        t.set_column(t.schema.get_field_index("cenrace"), "cenrace", pa.array(race)), part
    )


def test_validate_input_checks_the_hash_of_a_parts_directory(
    base: Path, cef: Path, tmp_path: Path
) -> None:
    """50 persons' race changed in a directory of parts, the release made from single
    files: the invariants still hold, but the bytes are not the release's input."""
    d = _parts(cef, tmp_path / "in")
    _races_changed(d / "persons.parquet" / "part-00001.parquet")
    proc = cli("validate", base / "rel", "--input", d)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "made_from_truth" in proc.stdout and "persons.parquet" in proc.stdout, proc.stdout


@pytest.mark.slow
def test_validate_input_names_a_changed_part(cef: Path, tmp_path: Path) -> None:
    d = _parts(cef, tmp_path / "in")
    rel = tmp_path / "rel"
    assert cli("run", "--input", d, "--out", rel, "--seed", "1", "--quiet").returncode == 0
    (d / "persons.parquet" / "part-00002.parquet").write_bytes(
        (d / "persons.parquet" / "part-00001.parquet").read_bytes()
    )  # an extra part: duplicate persons, refused by the reader itself
    proc = cli("validate", rel, "--input", d)
    assert proc.returncode == 1 and "made_from_truth" in proc.stdout, proc.stdout
    (d / "persons.parquet" / "part-00002.parquet").unlink()
    _races_changed(d / "persons.parquet" / "part-00001.parquet")
    proc = cli("validate", rel, "--input", d)
    assert proc.returncode == 1, proc.stdout
    assert "part-00001.parquet is not the file the release was made from" in proc.stdout


# -- item 14: no tracebacks, no hangs ---------------------------------------------------


def _rewrite(path: Path, column: str, change) -> None:
    t = pq.read_table(path)
    values = change(t.column(column))
    pq.write_table(t.set_column(t.schema.get_field_index(column), column, values), path)


def test_unicode_digits_in_a_geocode_are_refused(cef: Path, tmp_path: Path) -> None:
    """'\u0663' (Arabic-Indic three) passes ``str.isdigit``: ``run`` crashed on it and
    ``protect`` published it. One block renamed in both files, consistently."""
    d = tmp_path / "in"
    shutil.copytree(cef, d)
    block = pq.read_table(d / "persons.parquet").column("geocode")[5].as_py()
    renamed = block[:-1] + chr(0x0660 + int(block[-1]))

    def rename(col: pa.ChunkedArray) -> pa.Array:
        return pa.array([renamed if g == block else g for g in col.to_pylist()])

    _rewrite(d / "persons.parquet", "geocode", rename)
    _rewrite(d / "units.parquet", "geocode", rename)
    for proc in _reads(d, tmp_path).values():
        one_line_error(proc, 1, "persons.parquet", "'geocode'", repr(renamed), "16-digit")
    assert _nothing_written(tmp_path)


def test_a_uint64_age_above_2_63_is_reported_as_it_is(cef: Path, tmp_path: Path) -> None:
    d = tmp_path / "in"
    shutil.copytree(cef, d)

    def huge(col: pa.ChunkedArray) -> pa.Array:
        v = col.to_numpy().astype(np.uint64)
        v[3] = 2**63 + 5
        return pa.array(v, pa.uint64())

    _rewrite(d / "persons.parquet", "age", huge)
    for proc in _reads(d, tmp_path).values():
        one_line_error(proc, 1, "'age'", "row 3", str(2**63 + 5), "outside 0..115")
        assert "-92233720" not in proc.stderr


def test_a_uint64_id_above_2_63_is_refused(cef: Path, tmp_path: Path) -> None:
    """An id that does not fit int64 would wrap to a negative id (and could collide)."""
    d = tmp_path / "in"
    shutil.copytree(cef, d)

    def huge(col: pa.ChunkedArray) -> pa.Array:
        v = col.to_numpy().astype(np.uint64)
        v[0] = 2**64 - 1
        return pa.array(v, pa.uint64())

    _rewrite(d / "persons.parquet", "person_id", huge)
    for proc in _reads(d, tmp_path).values():
        one_line_error(proc, 1, "'person_id'", "row 0", str(2**64 - 1), "64-bit")


@pytest.mark.parametrize(
    "kind", ["fifo", pytest.param("/dev/zero", marks=SLOW), pytest.param("fifo part", marks=SLOW)]
)
def test_a_file_that_is_not_a_regular_file_is_refused_not_waited_on(
    cef: Path, tmp_path: Path, kind: str
) -> None:
    d = tmp_path / "in"
    d.mkdir()
    shutil.copyfile(cef / "units.parquet", d / "units.parquet")
    if kind == "fifo":
        bad = d / "persons.parquet"
        os.mkfifo(bad)
    elif kind == "/dev/zero":
        bad = d / "persons.parquet"
        bad.symlink_to("/dev/zero")
    else:
        (d / "persons.parquet").mkdir()
        shutil.copyfile(cef / "persons.parquet", d / "persons.parquet" / "part-00000.parquet")
        bad = d / "persons.parquet" / "part-00001.parquet"
        os.mkfifo(bad)
    for args in (
        ("run", "--input", d, "--out", tmp_path / "r", "--seed", "1", "--quiet"),
        ("protect", "swap", "--input", d, "--out", tmp_path / "ps", "--rate", "0.1", "--quiet"),
        ("validate", cef.parent / "rel", "--input", d, "--quiet"),
    ):
        proc = cli(*args, timeout=180)  # the old readers blocked on the FIFO forever
        if args[0] == "validate":
            assert proc.returncode == 1 and str(bad) in proc.stdout, proc.stdout + proc.stderr
            continue
        one_line_error(proc, 1, str(bad), "not a regular file")


def test_a_file_of_the_input_replaced_after_hashing_is_refused(
    cef: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run`` hashes its input, then reads it in tasks: a file replaced in between is
    refused, never read under the other file's hash (the swap made at that seam)."""
    from censusdp.errors import InputError
    from censusdp.io.budget_files import load_preset
    from censusdp.privacy.release_budget import ReleaseBudget
    from censusdp.release import pipeline
    from censusdp.release.options import ReleaseOptions

    d = tmp_path / "in"
    shutil.copytree(cef, d)
    other = tmp_path / "other.parquet"
    shutil.copyfile(d / "persons.parquet", other)
    _races_changed(other)  # valid rows, other bytes
    real = pipeline.hash_input

    def hash_then_swap(directory):
        got = real(directory)
        os.replace(other, d / "persons.parquet")
        return got

    monkeypatch.setattr(pipeline, "hash_input", hash_then_swap)
    with pytest.raises(InputError, match=r"persons\.parquet: changed while the input was read"):
        pipeline.run_release(
            d, tmp_path / "r", ReleaseBudget(load_preset("pl94-2020")), ReleaseOptions(seed=1)
        )
    assert not (tmp_path / "r").exists()


# -- arguments -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "1e309",
        "nan",
        *(pytest.param(v, marks=pytest.mark.slow) for v in ("-1e309", "1e-400", "inf")),
    ],
)
def test_a_rho_a_float_cannot_hold_is_refused(cef: Path, tmp_path: Path, value: str) -> None:
    proc = cli("run", "--input", cef, "--out", tmp_path / "r", f"--rho={value}", "--quiet")
    one_line_error(proc, 2, "rho", value)
    assert not (tmp_path / "r").exists()


def test_a_huge_epsilon_is_refused_not_converted_forever(cef: Path, tmp_path: Path) -> None:
    proc = cli("budget", "--epsilon", "1e30", timeout=60)
    one_line_error(proc, 2, "epsilon", "give rho instead")


@pytest.mark.parametrize("command", ["run", "budget"])
def test_a_binary_config_is_refused(cef: Path, tmp_path: Path, command: str) -> None:
    config = tmp_path / "budget.toml"
    config.write_bytes(bytes(range(256)) * 4)
    args = ("--input", cef, "--out", tmp_path / "r", "--seed", "1") if command == "run" else ()
    proc = cli(command, *args, "--config", config, "--quiet")
    one_line_error(proc, 2, str(config), "not UTF-8")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "master",
    [
        "bogus://x",
        "local[abc]",
        *(pytest.param(m, marks=pytest.mark.slow) for m in ("", "local[2] ")),
    ],
)
def test_a_bad_spark_master_is_refused(cef: Path, tmp_path: Path, master: str) -> None:
    proc = cli(
        "run", "--input", cef, "--out", tmp_path / "r", "--seed", "1", "--executor", "spark",
        "--spark-master", master, "--quiet",
    )  # fmt: skip
    one_line_error(proc, 2, "--spark-master", repr(master))
    assert not (tmp_path / "r").exists()
    assert [p.name for p in tmp_path.iterdir()] == []


@pytest.mark.parametrize("option", ["--input", "--out"])
def test_a_path_argument_that_is_not_utf8_is_refused(
    cef: Path, tmp_path: Path, option: str
) -> None:
    paths = {"--input": os.fsencode(cef), "--out": os.fsencode(tmp_path / "r")}
    paths[option] = os.fsencode(tmp_path) + b"/r\xff"  # argv of other bytes than UTF-8
    argv = [*CLI, "run", "--input", paths["--input"], "--out", paths["--out"], "--seed", "1"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    one_line_error(proc, 2, f"argument {option}", "not valid UTF-8")
    assert os.listdir(tmp_path) == []
