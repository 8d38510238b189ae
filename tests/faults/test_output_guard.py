"""Nothing lost, second pass: every output path of every command goes through one guard.

Each case is a way a command used to destroy or replace what it did not create
(`censusdp.io.output_rules`, `censusdp.io.staging`): run as a user would, in a subprocess, on a small generated
state, with every input hashed before and after.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from faults_cli import CLI, cli, digest, generated_release, one_line_error


def refused(proc: subprocess.CompletedProcess, *words: str, code: int = 2) -> None:
    one_line_error(proc, code, *words)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return generated_release(tmp_path_factory.mktemp("guard"), cef="wy")


@pytest.fixture()
def cef(base: Path):
    before = digest(base / "wy")
    yield base / "wy"
    assert digest(base / "wy") == before, "the CEF changed"


@pytest.fixture()
def rel(base: Path):
    before = digest(base / "rel")
    yield base / "rel"
    assert digest(base / "rel") == before, "the release changed"


# -- 1, 2: an output that is an input ---------------------------------------------------


def test_swap_cef_out_may_not_be_the_input(cef: Path, tmp_path: Path) -> None:
    proc = cli(
        "protect", "swap", "--input", cef, "--out", tmp_path / "ps", "--rate", "0.1",
        "--seed", "1", "--cef-out", cef, "-q",
    )  # fmt: skip
    refused(proc, "--cef-out", "overlaps the input")
    assert not (tmp_path / "ps").exists()


def test_swap_cef_out_over_the_input_even_with_overwrite(cef: Path, tmp_path: Path) -> None:
    proc = cli(
        "protect", "swap", "--input", cef, "--out", tmp_path / "ps", "--rate", "0.1",
        "--seed", "1", "--cef-out", cef, "--overwrite", "-q",
    )  # fmt: skip
    refused(proc, "--cef-out", "overlaps the input")


@pytest.mark.parametrize(
    "case",
    ["release manifest", "cef file", "config", "swap json on input", "new file in release"],
)
def test_json_never_lands_on_or_in_an_input(
    case: str, cef: Path, rel: Path, tmp_path: Path
) -> None:
    if case == "release manifest":
        proc = cli("validate", rel, "--json", rel / "manifest.json", "--overwrite", "-q")
    elif case == "cef file":
        proc = cli(
            "validate", rel, "--input", cef, "--json", cef / "persons.parquet", "--overwrite", "-q"
        )
    elif case == "config":
        cfg = tmp_path / "my.toml"
        cfg.write_text(
            (Path(__file__).parents[2] / "src/censusdp/privacy/presets/pl94-2020.toml").read_text()
        )
        before = cfg.read_bytes()
        proc = cli("budget", "--config", cfg, "--json", cfg, "--overwrite", "-q")
        assert cfg.read_bytes() == before
    elif case == "swap json on input":
        proc = cli(
            "protect", "swap", "--input", cef, "--out", tmp_path / "ps", "--rate", "0.1",
            "--seed", "1", "--json", cef / "units.parquet", "--overwrite", "-q",
        )  # fmt: skip
        assert not (tmp_path / "ps").exists()
    else:  # a new file inside an input directory makes the release fail validation
        proc = cli("validate", rel, "--json", rel / "report.json", "-q")
        assert not (rel / "report.json").exists()
    refused(proc, "--json", "overlaps the input")


def test_html_and_explore_pages_stay_out_of_their_inputs(cef: Path, rel: Path) -> None:
    proc = cli(
        "evaluate", "--input", cef, "--release", rel, "--json", "-", "--html", rel / "r.html", "-q"
    )
    refused(proc, "--html", "overlaps the input")
    assert not (rel / "r.html").exists()


# -- 3: --overwrite replaces only what censusdp wrote -----------------------------------


def _copy_release(rel: Path, tmp_path: Path) -> Path:
    out = tmp_path / "old"
    subprocess.run(["cp", "-a", str(rel), str(out)], check=True)
    return out


@pytest.mark.parametrize("extra", ["NOTES.txt", "analysis/table.csv", "tables/mine.csv"])
def test_overwrite_refuses_a_release_holding_a_users_file(
    extra: str, cef: Path, rel: Path, tmp_path: Path
) -> None:
    old = _copy_release(rel, tmp_path)
    (old / extra).parent.mkdir(parents=True, exist_ok=True)
    (old / extra).write_text("mine")
    before = digest(old)
    proc = cli("run", "--input", cef, "--out", old, "--seed", "1", "--overwrite", "-q")
    refused(proc, "--overwrite replaces only what censusdp wrote", extra.split("/")[0])
    assert digest(old) == before


def test_overwrite_refuses_a_manifest_that_only_claims_a_version(cef: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "manifest.json").write_text(json.dumps({"package_version": "0.1.0"}))
    (mine / "thesis.tex").write_text("years of work")
    before = digest(mine)
    proc = cli("run", "--input", cef, "--out", mine, "--seed", "1", "--overwrite", "-q")
    refused(proc, "not a censusdp output")
    assert digest(mine) == before


def test_overwrite_refuses_an_output_that_input_links_point_into(cef: Path, tmp_path: Path) -> None:
    gen = tmp_path / "gen"
    assert (
        cli(
            "generate", "--state", "WY", "--seed", "4", "--scale", "0.01", "--out", gen, "-q"
        ).returncode
        == 0
    )
    linked = tmp_path / "linked"
    linked.mkdir()
    for name in ("persons.parquet", "units.parquet"):
        (linked / name).symlink_to(gen / name)
    before = digest(gen)
    proc = cli("run", "--input", linked, "--out", gen, "--seed", "1", "--overwrite", "-q")
    refused(proc, "overlaps the input")
    assert digest(gen) == before


def test_overwrite_refuses_a_config_inside_the_output(cef: Path, rel: Path, tmp_path: Path) -> None:
    old = _copy_release(rel, tmp_path)
    cfg = old / "my.toml"
    cfg.write_text(
        (Path(__file__).parents[2] / "src/censusdp/privacy/presets/pl94-2020.toml").read_text()
    )
    before = digest(old)
    proc = cli("run", "--input", cef, "--config", cfg, "--out", old, "--overwrite", "-q")
    refused(proc, "overlaps the input")
    assert digest(old) == before


@pytest.mark.slow
def test_overwrite_replaces_rather_than_merges(rel: Path, tmp_path: Path) -> None:
    out = tmp_path / "gls"
    assert cli("infer", rel, "--out", out, "-q").returncode == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["created_by"] == "censusdp" and "estimates.parquet" in manifest["files"]
    # a file an older version of the command wrote (listed in the manifest) is not kept
    (out / "stale.parquet").write_text("old")
    manifest["files"].append("stale.parquet")
    (out / "manifest.json").write_text(json.dumps(manifest))
    proc = cli("infer", rel, "--out", out, "--overwrite", "-q")
    assert proc.returncode == 0, proc.stderr
    assert not (out / "stale.parquet").exists()
    assert sorted(p.name for p in out.iterdir()) == [
        "estimates.parquet",
        "manifest.json",
        "margins.csv",
        "margins.parquet",
    ]


# -- 6, 7: lock files and plots ---------------------------------------------------------


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_lock_file_is_never_a_users_file(kind: str, cef: Path, tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("do not truncate me")
    lock = tmp_path / ".out.lock"
    if kind == "symlink":
        lock.symlink_to(precious)
    else:
        os.link(precious, lock)
    proc = cli("run", "--input", cef, "--out", tmp_path / "out", "--seed", "1", "-q")
    refused(proc, "not a censusdp lock file")
    assert precious.read_text() == "do not truncate me"
    assert not (tmp_path / "out").exists()


def test_dn_plot_never_replaces_a_file(tmp_path: Path) -> None:
    plot = tmp_path / "figure.png"
    plot.write_bytes(b"my figure")
    proc = cli(
        "attack", "dn", "--n", "20", "--trials", "2", "--multiples", "0.5,1", "--plot", plot, "-q"
    )
    refused(proc, "--plot", "exists")
    assert plot.read_bytes() == b"my figure"
    proc = cli(
        "attack", "dn", "--n", "20", "--trials", "2", "--multiples", "0.5,1",
        "--plot", plot, "--overwrite", "-q",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert plot.read_bytes()[:4] == b"\x89PNG"


def test_dn_figures_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    d = tmp_path / "figs"
    d.mkdir()
    (d / "notes.txt").write_text("mine")
    proc = cli("attack", "dn-figures", "--out", d, "--quick", "--figures", "4-1", "-q")
    refused(proc, "exists and is not empty")
    proc = cli(
        "attack", "dn-figures", "--out", d, "--quick", "--figures", "4-1", "--overwrite", "-q"
    )
    refused(proc, "not a censusdp output")
    assert [p.name for p in d.iterdir()] == ["notes.txt"]


# -- 8: locks and staging for every directory writer -----------------------------------


def _hold_lock(out: Path) -> subprocess.Popen:
    """A process that holds the output guard's lock on ``out`` until killed."""
    code = (
        "import sys, time\n"
        "from censusdp.io.staging import Staging\n"
        f"s = Staging({str(out)!r}, False)\n"
        "print('locked', flush=True)\n"
        "time.sleep(600)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "locked"
    return p


@pytest.mark.parametrize("command", ["infer", "risk", "sweep", "swap", "tradeoff", "dn-figures"])
def test_every_directory_writer_takes_the_lock(
    command: str, cef: Path, rel: Path, tmp_path: Path
) -> None:
    out = tmp_path / "busy"
    argv = {
        "infer": ["infer", rel, "--out", out],
        "risk": ["risk", "--input", cef, "--out", out],
        "sweep": ["sweep", "--input", cef, "--out", out, "--epsilons", "1"],
        "swap": ["protect", "swap", "--input", cef, "--out", out],
        "tradeoff": ["tradeoff", "census", "--input", cef, "--out", out, "--epsilons", "1"],
        "dn-figures": ["attack", "dn-figures", "--out", out, "--quick"],
    }[command]
    holder = _hold_lock(out)
    try:
        proc = cli(*argv, "-q")
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    refused(proc, "being written by another censusdp process", f"PID {holder.pid}")
    assert not out.exists()


@pytest.mark.slow
def test_a_killed_infer_leaves_nothing_that_blocks_the_next(rel: Path, tmp_path: Path) -> None:
    out = tmp_path / "gls"
    p = subprocess.Popen([*CLI, "infer", str(rel), "--out", str(out), "-q"], start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and not list(tmp_path.glob(".gls.partial-*")):
        time.sleep(0.02)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert not out.exists()
    proc = cli("infer", rel, "--out", out, "-q")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gls"], "debris left"


# -- 9: paths that would take the working tree with them --------------------------------


@pytest.mark.parametrize("out", ["", ".", "..", "/"])
def test_root_like_outputs_are_refused(out: str, cef: Path, rel: Path, tmp_path: Path) -> None:
    """``--out ""`` (an unset variable) or ``.`` from inside an earlier release would
    replace the working directory itself."""
    work = _copy_release(rel, tmp_path)  # the user works inside a release of theirs
    before = digest(work)
    proc = cli("run", "--input", cef, "--out", out, "--seed", "1", "--overwrite", "-q", cwd=work)
    refused(proc, "--out")
    assert "current directory" in proc.stderr or "empty" in proc.stderr or "root" in proc.stderr
    assert digest(work) == before


def test_home_is_refused(cef: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "keep.txt").write_text("mine")
    proc = subprocess.run(
        [*CLI, "infer", "x", "--out", "~", "--overwrite", "-q"],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home)},
        check=False,
    )
    refused(proc, "home directory")
    assert (home / "keep.txt").read_text() == "mine"


def test_resume_of_a_finished_release_says_so(cef: Path, rel: Path, tmp_path: Path) -> None:
    """Nothing to resume is not a mistake: exit 0, the release untouched (the fixture
    checks), and no hint at --overwrite, which would replace it."""
    proc = cli("run", "--input", cef, "--out", rel, "--seed", "7", "--resume")
    assert proc.returncode == 0, proc.stderr
    assert "is a finished release" in proc.stdout and "nothing to resume" in proc.stdout
    assert "--overwrite" not in proc.stdout + proc.stderr
    # with --json -, standard output holds the JSON alone: the release's manifest
    proc = cli("run", "--input", cef, "--out", rel, "--seed", "7", "--resume", "--json", "-")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == json.loads((rel / "manifest.json").read_text())
    other = tmp_path / "other"  # a finished output that is not a release: refused
    other.mkdir()
    (other / "manifest.json").write_text('{"created_by": "censusdp", "command": "infer"}')
    proc = cli("run", "--input", cef, "--out", other, "--seed", "7", "--resume", "-q")
    refused(proc, "is a finished output, not an interrupted one; there is nothing to resume")
    assert "--overwrite" not in proc.stderr
