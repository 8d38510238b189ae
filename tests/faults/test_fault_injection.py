"""Fault injection: every way a user can lose data or forge a release, run as a user would.

Each case runs the ``censusdp`` command in a subprocess on a small generated state and
asserts the exit code, that the error is one line (never a traceback), and that every
input file is byte-identical afterwards. The kill and race cases assert that exactly
one valid release survives and no debris is left.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from faults_cli import CLI, cli, digest, one_line_error

from censusdp.cli import main
from censusdp.io.nmf_files import read_nmf_table


def debris(parent: Path) -> list[str]:
    return sorted(
        p.name for p in parent.iterdir() if ".partial-" in p.name or p.name.endswith(".lock")
    )


@pytest.fixture(scope="module")
def state(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("faults")
    proc = cli(
        "generate",
        "--state",
        "DC",
        "--seed",
        "3",
        "--scale",
        "0.02",
        "--out",
        base / "cef",
        "--quiet",
    )
    assert proc.returncode == 0, proc.stderr
    return base


@pytest.fixture(scope="module")
def good_release(state: Path) -> Path:
    proc = cli("run", "--input", state / "cef", "--out", state / "run", "--seed", "1", "--quiet")
    assert proc.returncode == 0, proc.stderr
    return state / "run"


@pytest.fixture()
def cef(state: Path):
    """The input, and a check that no case changed it."""
    before = digest(state / "cef")
    yield state / "cef"
    assert digest(state / "cef") == before


# -- outputs that would lose data ----------------------------------------------------


@pytest.mark.parametrize("where", ["same", "inside", "parent"])
def test_out_may_not_overlap_the_input(cef: Path, where: str) -> None:
    out = {"same": cef, "inside": cef / "run", "parent": cef.parent}[where]
    proc = cli("run", "--input", cef, "--out", out, "--overwrite", "--quiet")
    one_line_error(proc, 2, "overlaps the input")
    assert not (cef / "run").exists()


def test_overwrite_replaces_only_censusdp_outputs(cef: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("my notes")
    proc = cli("run", "--input", cef, "--out", mine, "--overwrite", "--seed", "1", "--quiet")
    one_line_error(proc, 2, "not a censusdp output")
    assert (mine / "keep.txt").read_text() == "my notes" and len(list(mine.iterdir())) == 1


def test_out_that_is_a_file(cef: Path, tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    one_line_error(cli("run", "--input", cef, "--out", f, "--quiet"), 2, "is a file")
    assert f.read_text() == "x"


def test_unwritable_output_parent(cef: Path) -> None:
    # /proc refuses new directories even to root; an operating-system refusal is exit 1
    proc = cli("run", "--input", cef, "--out", "/proc/censusdp-run", "--quiet")
    one_line_error(proc, 1, "/proc")


@pytest.mark.slow
def test_two_runs_at_once_one_wins_and_no_debris(cef: Path, tmp_path: Path) -> None:
    out = tmp_path / "race"
    argv = [*CLI, "run", "--input", str(cef), "--out", str(out), "--seed", "2", "--quiet"]
    a = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)
    b = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    results = [(p.communicate(timeout=300)[1], p.returncode) for p in (a, b)]
    results = [(code, err) for err, code in results]
    codes = sorted(c for c, _ in results)
    assert codes == [0, 2], results
    err = next(e for c, e in results if c == 2)
    assert (
        "being written by another censusdp process (PID" in err
        and len(err.strip().splitlines()) == 1
    )
    assert cli("validate", out, "--quiet").returncode == 0
    assert debris(tmp_path) == []


def _start_and_kill(
    argv: list[str], staging_parent: Path, sig: int, *, children: int = 0
) -> subprocess.Popen:
    """Start a run, wait until it is writing (and has ``children`` worker processes), kill it."""
    p = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (
        [x for x in staging_parent.iterdir() if ".partial-" in x.name]
        and len(_workers_of(p.pid)) >= children
    ):
        time.sleep(0.05)
    time.sleep(0.3)
    p.workers = _workers_of(p.pid)
    os.kill(p.pid, sig)
    p.stderr_text = p.communicate(timeout=60)[1]
    return p


def _workers_of(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True, check=False)
    return [int(x) for x in out.stdout.split()]


@pytest.mark.slow
def test_sigkill_leaves_debris_that_the_next_run_sweeps(cef: Path, tmp_path: Path) -> None:
    out = tmp_path / "killed"
    argv = [
        *CLI,
        "run",
        "--input",
        str(cef),
        "--out",
        str(out),
        "--seed",
        "3",
        "--workers",
        "2",
        "--quiet",
    ]
    p = _start_and_kill(argv, tmp_path, signal.SIGKILL)
    assert p.returncode == -signal.SIGKILL
    assert not out.exists()
    time.sleep(1.0)
    alive = subprocess.run(
        ["pgrep", "-f", f"--out {out}"], capture_output=True, text=True, check=False
    )
    assert alive.stdout.strip() == "", "orphaned workers after SIGKILL"
    proc = cli("run", "--input", cef, "--out", out, "--seed", "3", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert cli("validate", out, "--quiet").returncode == 0
    assert debris(tmp_path) == []


def test_sigterm_cleans_up(cef: Path, tmp_path: Path) -> None:
    out = tmp_path / "terminated"
    argv = [*CLI, "run", "--input", str(cef), "--out", str(out), "--seed", "4", "--quiet"]
    p = _start_and_kill(argv, tmp_path, signal.SIGTERM)
    assert p.returncode == 130, p.stderr_text
    assert len(p.stderr_text.strip().splitlines()) == 1 and "Traceback" not in p.stderr_text
    assert not out.exists() and not (tmp_path / ".terminated.lock").exists()
    kept = debris(tmp_path)
    if kept:  # it had recorded finished steps (part files): kept for --resume, nothing else
        assert "terminated; its finished steps are kept" in p.stderr_text
        assert "--resume" in p.stderr_text and len(kept) == 1
        assert (tmp_path / kept[0] / ".resumable").is_file()
        proc = cli(*argv[3:], "--overwrite")  # discards them
        assert proc.returncode == 0, proc.stderr
    else:
        assert "terminated; unfinished output removed" in p.stderr_text
    assert debris(tmp_path) == []


def test_full_disk_is_one_line_and_leaves_nothing(
    cef: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    """ENOSPC from the writer (a fake writer: mounting a small tmpfs needs privileges)."""
    import censusdp.io.atomic as atomic

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(atomic.pq, "write_table", full)
    out = tmp_path / "full"
    assert main(["run", "--input", str(cef), "--out", str(out), "--seed", "1", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "No space left on device" in err and len(err.strip().splitlines()) == 1
    assert not out.exists() and debris(tmp_path) == []


# -- releases that were changed after the fact -----------------------------------------


def _copy(release: Path, tmp_path: Path, name: str) -> Path:
    d = tmp_path / name
    shutil.copytree(release, d)
    return d


def _forged_checksums(run: Path) -> dict[str, str]:
    """What a forger writes into the manifest: every file's real SHA-256, after the
    part indexes' own digests are made to agree with the parts too."""
    for index in run.glob("*/_parts.json"):
        data = json.loads(index.read_text())
        for p in data["parts"]:
            if (index.parent / p["file"]).is_file():
                p["sha256"] = hashlib.sha256((index.parent / p["file"]).read_bytes()).hexdigest()
        index.write_text(json.dumps(data))
    return {k: v for k, v in digest(run).items() if k != "manifest.json"}


def _rewrite(path: Path, change) -> None:
    # an NMF part with all seven columns in its rows (its one-value columns otherwise sit
    # in its metadata, which pq.write_table would not carry over)
    t = read_nmf_table(path) if "noisy_measurements" in str(path) else pq.read_table(path)
    assert t.num_rows > 3, f"{path} has too few rows to tamper with"
    pq.write_table(change(t), path)


def _set(t: pa.Table, col: str, i: int, value) -> pa.Table:
    v = t.column(col).to_numpy().copy()
    v[i] = value
    return t.set_column(t.column_names.index(col), col, pa.array(v))


def _drop_facility(t: pa.Table) -> pa.Table:
    """The units MDF without its first group-quarters facility record (RTYPE 4)."""
    rtype = t.column("RTYPE").to_pylist()
    i = rtype.index("4")
    return pa.concat_tables([t.slice(0, i), t.slice(i + 1)])


NMF_PART = "noisy_measurements.parquet/part-00003.parquet"
"""A part file of the persons NMF (a run writes the NMF as a directory of parts): the
first of the Tract level (on DC's default spine the State and its one County are
bypassed single children, so their parts have no rows)."""

MDF_PART = "mdf_persons.parquet/part-00000.parquet"
"""A part file of the persons MDF (a run writes the MDF as directories of parts)."""

TAMPER = {
    "nmf variance set to 0": (NMF_PART, lambda t: _set(t, "variance", 3, 0.0)),
    "nmf value changed": (NMF_PART, lambda t: _set(t, "value", 3, 999)),
    "nmf row dropped": (NMF_PART, lambda t: t.slice(1)),
    "mdf row dropped": (MDF_PART, lambda t: t.slice(1)),
    "mdf facility dropped": ("mdf_units.parquet/part-00000.parquet", _drop_facility),
    "mdf person recoded": (MDF_PART, lambda t: _set(t, "VOTING_AGE", 0, "3")),
    "table cell changed": (
        "tables/P1.parquet/part-00001.parquet",
        lambda t: _set(t, "P1_001N", 0, 1),
    ),
    "table total changed": (
        "tables/P1.parquet/part-00000.parquet",
        lambda t: _set(t, "P1_001N", 0, 1),
    ),
}


TAMPER_SLOW = ("nmf row dropped", "mdf row dropped", "table cell changed")


def test_validate_accepts_an_intact_release(good_release: Path, cef: Path) -> None:
    proc = cli("validate", good_release, "--truth", cef)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "valid" in proc.stdout


@pytest.mark.slow
def test_release_named_either_way(good_release: Path, tmp_path: Path) -> None:
    """RUN and --release RUN are one argument: both spellings work, neither or two
    different directories are one-line errors naming what was given."""
    assert cli("validate", "--release", good_release, "--quiet").returncode == 0
    same = cli("validate", good_release, "--release", good_release, "--quiet")
    assert same.returncode == 0, same.stderr
    other = tmp_path / "elsewhere"
    proc = cli("validate", good_release, "--release", other)
    one_line_error(proc, 2, "two release directories", str(other))
    one_line_error(cli("validate"), 2, "release directory is missing", "--release RUN")
    proc = cli("evaluate", good_release, "--json", tmp_path / "e.json", "--simulations", "1")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("rehash", "case"),
    [
        # without rehashing, the checksums catch any change; one case shows it by default;
        # a dropped row or a changed block cell is also caught by the tests of validate's
        # own checks (tests/release/validate), so those forgeries run with -m slow
        pytest.param(
            r,
            c,
            marks=()
            if (r and c not in TAMPER_SLOW) or c == "nmf value changed"
            else pytest.mark.slow,
        )
        for r in (False, True)
        for c in sorted(TAMPER)
    ],
)
def test_validate_rejects_tampering(
    good_release: Path, tmp_path: Path, case: str, rehash: bool
) -> None:
    name, change = TAMPER[case]
    d = _copy(good_release, tmp_path, "t")
    _rewrite(d / name, change)
    if rehash:  # a forger who also rewrites the checksums (index entries included)
        m = json.loads((d / "manifest.json").read_text())
        m["files"] = _forged_checksums(d)
        (d / "manifest.json").write_text(json.dumps(m))
    proc = cli("validate", d, "--quiet")
    if rehash and case == "nmf value changed":
        # a changed noisy value with recomputed checksums is indistinguishable from noise
        assert proc.returncode == 0
        return
    assert proc.returncode == 1, proc.stdout
    assert "INVALID" in proc.stdout and "Traceback" not in proc.stderr


@pytest.mark.parametrize("rehash", [False, True])
def test_validate_rejects_a_missing_nmf_part(good_release: Path, tmp_path: Path, rehash) -> None:
    """A part file removed from the NMF directory (even with the checksums rewritten to
    match) leaves geounits unmeasured and the part index wrong: the release is invalid."""
    d = _copy(good_release, tmp_path, "p")
    (d / NMF_PART).unlink()
    if rehash:
        m = json.loads((d / "manifest.json").read_text())
        m["files"] = _forged_checksums(d)
        (d / "manifest.json").write_text(json.dumps(m))
    proc = cli("validate", d, "--quiet")
    assert proc.returncode == 1, proc.stdout
    assert "INVALID" in proc.stdout and Path(NMF_PART).name in proc.stdout


@pytest.mark.slow
def test_evaluate_and_reestimate_refuse_a_tampered_release(
    good_release: Path, cef: Path, tmp_path: Path
) -> None:
    d = _copy(good_release, tmp_path, "bad")
    _rewrite(d / NMF_PART, lambda t: _set(t, "variance", 0, 0.0))
    one_line_error(
        cli("evaluate", "--truth", cef, "--release", d, "--json", tmp_path / "e.json", "--quiet"),
        1,
        "does not validate",
    )
    one_line_error(
        cli("run", "--from-measurements", d, "--out", tmp_path / "again", "--quiet"),
        1,
        "does not validate",
    )
    assert not (tmp_path / "e.json").exists() and not (tmp_path / "again").exists()


def test_truncated_nmf_given_to_from_measurements(good_release: Path, tmp_path: Path) -> None:
    d = _copy(good_release, tmp_path, "trunc")
    nmf = d / NMF_PART
    nmf.write_bytes(nmf.read_bytes()[: nmf.stat().st_size // 2])
    proc = cli("run", "--from-measurements", d, "--out", tmp_path / "x", "--quiet")
    one_line_error(proc, 1, "does not validate")


@pytest.mark.slow
def test_from_measurements_takes_the_measurements_budget(
    good_release: Path, tmp_path: Path
) -> None:
    proc = cli("run", "--from-measurements", good_release, "--out", tmp_path / "x", "--rho", "1")
    one_line_error(proc, 2, "differs from the one")
    proc = cli("run", "--from-measurements", good_release, "--out", tmp_path / "y", "--quiet")
    assert proc.returncode == 0, proc.stderr
    a = json.loads((good_release / "manifest.json").read_text())
    b = json.loads((tmp_path / "y" / "manifest.json").read_text())
    assert (a["rho_exact"], a["epsilon"]) == (b["rho_exact"], b["epsilon"])


# -- bad numbers and bad input ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "code", "words"),
    [
        (["--rho", "1e-300"], 2, "use a larger rho"),
        (["--rho", "nan"], 2, "rho"),
        (["--epsilon", "-1"], 2, "epsilon"),
        (["--workers", "0"], 2, "--workers"),
    ],
)
def test_bad_numbers(cef: Path, tmp_path: Path, args: list[str], code: int, words: str) -> None:
    one_line_error(
        cli("run", "--input", cef, "--out", tmp_path / "x", *args, "--quiet"), code, words
    )
    assert not (tmp_path / "x").exists()


def test_evaluate_negative_trials(good_release: Path, cef: Path, tmp_path: Path) -> None:
    proc = cli(
        "evaluate",
        "--truth",
        cef,
        "--release",
        good_release,
        "--json",
        tmp_path / "e.json",
        "--trials",
        "-1",
    )
    one_line_error(proc, 2, "--trials")


@pytest.mark.slow
def test_huge_epsilon_writes_strict_json(cef: Path, tmp_path: Path) -> None:
    proc = cli(
        "run",
        "--input",
        cef,
        "--out",
        tmp_path / "big",
        "--epsilon",
        "1e6",
        "--seed",
        "1",
        "--quiet",
    )
    assert proc.returncode == 0, proc.stderr

    def refuse(token: str) -> None:
        raise ValueError(token)

    m = json.loads((tmp_path / "big" / "manifest.json").read_text(), parse_constant=refuse)
    assert m["delta"] <= 1 and m["epsilon"] <= 1e6


def _broken_input(state: Path, tmp_path: Path, change) -> Path:
    d = tmp_path / "in"
    shutil.copytree(state / "cef", d)
    change(d)
    return d


BAD_INPUT = {
    "non-ASCII digits in a geocode": lambda d: _rewrite(
        d / "persons.parquet",
        lambda t: t.set_column(
            t.column_names.index("geocode"),
            "geocode",
            pa.array(["١" * 16] + t.column("geocode").to_pylist()[1:]),
        ),
    ),
    "duplicate person ids": lambda d: _rewrite(
        d / "persons.parquet", lambda t: _set(t, "person_id", 1, t.column("person_id")[0].as_py())
    ),
    "corrupt parquet": lambda d: (d / "units.parquet").write_bytes(b"PAR1 not really"),
    "missing persons file": lambda d: (d / "persons.parquet").unlink(),
    "input is a file": lambda d: (shutil.rmtree(d), d.write_text("x")),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_is_one_line(state: Path, tmp_path: Path, case: str) -> None:
    d = _broken_input(state, tmp_path, BAD_INPUT[case])
    before = digest(d) if d.is_dir() else d.read_bytes()
    proc = cli("run", "--input", d, "--out", tmp_path / "out", "--seed", "1", "--quiet")
    one_line_error(proc, 1)
    assert not (tmp_path / "out").exists() and debris(tmp_path) == []
    assert (digest(d) if d.is_dir() else d.read_bytes()) == before


def test_generate_into_the_users_directory(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("mine")
    one_line_error(
        cli("generate", "--state", "DC", "--seed", "1", "--scale", "0.02", "--out", mine),
        2,
        "not empty",
    )
    one_line_error(
        cli(
            "generate",
            "--state",
            "DC",
            "--seed",
            "1",
            "--scale",
            "0.02",
            "--out",
            mine,
            "--overwrite",
        ),
        2,
        "not a censusdp output",
    )
    assert [p.name for p in mine.iterdir()] == ["keep.txt"]


@pytest.mark.slow
def test_empty_input_is_an_empty_valid_release(state: Path, tmp_path: Path) -> None:
    """No persons and no units: nothing to protect, and no traceback (it once crashed)."""

    def empty(d: Path) -> None:
        _rewrite(d / "persons.parquet", lambda t: t.slice(0, 0))
        _rewrite(d / "units.parquet", lambda t: t.slice(0, 0))

    d = _broken_input(state, tmp_path, empty)
    proc = cli("run", "--input", d, "--out", tmp_path / "out", "--seed", "1", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "0 persons" in proc.stdout
    assert cli("validate", tmp_path / "out", "--quiet").returncode == 0
