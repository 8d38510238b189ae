"""``censusdp sign`` and ``validate --public-key``, run as a user would.

Each case runs the ``censusdp`` command in a subprocess on a small generated state and
asserts the exit code, that an error is one line (never a traceback) naming the option
and value, and that every input (the release but its signature, the key files, the CEF)
is byte-identical afterwards; an existing key file is never overwritten.
"""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from faults_cli import cli, digest, one_line_error


@pytest.fixture(scope="module")
def state(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("signing-cli")
    gen = ["generate", "--state", "DC", "--seed", "3", "--scale", "0.02", "--out", base / "cef"]
    proc = cli(*gen, "--quiet")
    assert proc.returncode == 0, proc.stderr
    proc = cli("run", "--input", base / "cef", "--out", base / "run", "--seed", "1", "--quiet")
    assert proc.returncode == 0, proc.stderr
    proc = cli("sign", "--new-key", base / "pub.key", "--quiet")
    assert proc.returncode == 0, proc.stderr
    proc = cli("sign", "--new-key", base / "other.key", "--quiet")
    assert proc.returncode == 0, proc.stderr
    return base


@pytest.fixture()
def keys(state: Path):
    """The key files, and a check that no case changed them."""
    paths = [state / n for n in ("pub.key", "pub.key.pub", "other.key", "other.key.pub")]
    before = [digest(p) for p in paths]
    yield state
    assert [digest(p) for p in paths] == before


@pytest.fixture()
def run(state: Path, keys: Path, tmp_path: Path):
    """A fresh copy of the release; the CEF checked unchanged afterwards."""
    cef = digest(state / "cef")
    yield Path(shutil.copytree(state / "run", tmp_path / "run"))
    assert digest(state / "cef") == cef


def _unsigned(run: Path) -> dict[str, str]:
    return {k: v for k, v in digest(run).items() if k != "signature.json"}


# -- keys ------------------------------------------------------------------------------


def test_new_key_writes_a_private_and_a_public_key(tmp_path: Path) -> None:
    proc = cli("sign", "--new-key", tmp_path / "k")
    assert proc.returncode == 0, proc.stderr
    assert "fingerprint SHA256:" in proc.stdout
    assert stat.S_IMODE((tmp_path / "k").stat().st_mode) == 0o600
    assert b"BEGIN PRIVATE KEY" in (tmp_path / "k").read_bytes()
    assert b"BEGIN PUBLIC KEY" in (tmp_path / "k.pub").read_bytes()


@pytest.mark.parametrize("existing", ["k", "k.pub", "both"])
def test_new_key_never_overwrites_an_existing_key(tmp_path: Path, existing: str) -> None:
    for name in ("k", "k.pub") if existing == "both" else (existing,):
        (tmp_path / name).write_text(f"my {name}\n")
    before = digest(tmp_path)
    proc = cli("sign", "--new-key", tmp_path / "k")
    one_line_error(proc, 2, "--new-key", str(tmp_path / "k"), "never overwritten")
    assert digest(tmp_path) == before


@pytest.mark.slow
def test_new_key_encrypted_with_a_passphrase_from_the_environment(
    run: Path, tmp_path: Path
) -> None:
    env = {"SIGNING_PASS": "correct horse"}
    proc = cli("sign", "--new-key", tmp_path / "k", "--passphrase-env", "SIGNING_PASS", env=env)
    assert proc.returncode == 0, proc.stderr
    assert b"ENCRYPTED PRIVATE KEY" in (tmp_path / "k").read_bytes()
    assert "correct horse" not in proc.stdout + proc.stderr
    before = _unsigned(run)
    # without the passphrase, with a wrong one, with an unset variable: refused
    one_line_error(cli("sign", run, "--key", tmp_path / "k"), 2, "--key", "is encrypted")
    wrong = {"SIGNING_PASS": "battery staple"}
    proc = cli("sign", run, "--key", tmp_path / "k", "--passphrase-env", "SIGNING_PASS", env=wrong)
    one_line_error(proc, 2, f"--key {tmp_path / 'k'}: wrong passphrase")
    proc = cli("sign", run, "--key", tmp_path / "k", "--passphrase-env", "NO_SUCH_VAR_SIGNING")
    one_line_error(proc, 2, "--passphrase-env NO_SUCH_VAR_SIGNING", "not set")
    assert not (run / "signature.json").exists() and _unsigned(run) == before
    proc = cli("sign", run, "--key", tmp_path / "k", "--passphrase-env", "SIGNING_PASS", env=env)
    assert proc.returncode == 0, proc.stderr
    assert cli("validate", run, "--public-key", tmp_path / "k.pub", "--quiet").returncode == 0


def test_new_key_inside_a_release_or_the_input_is_refused(state: Path, run: Path) -> None:
    for where in (run / "k", state / "cef" / "k"):
        proc = cli("sign", "--new-key", where)
        one_line_error(proc, 2, "--new-key", str(where), "inside")
        assert not where.exists() and not Path(f"{where}.pub").exists()


# -- sign and validate -----------------------------------------------------------------


def test_sign_then_validate_with_the_public_key(keys: Path, run: Path) -> None:
    before = _unsigned(run)
    proc = cli("sign", run, "--key", keys / "pub.key", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert _unsigned(run) == before and (run / "signature.json").is_file()
    proc = cli("validate", run, "--public-key", keys / "pub.key.pub", "--json", "-", "--quiet")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] and report["checks"]["signature"]["ok"]
    assert report["checks"]["checksums"]["ok"]  # signature.json is not a foreign file
    assert "signed with key SHA256:" in report["checks"]["signature"]["detail"]
    assert digest(run) == {**before, "signature.json": digest(run)["signature.json"]}


@pytest.mark.slow
def test_validate_with_another_key_fails(keys: Path, run: Path) -> None:
    assert cli("sign", run, "--key", keys / "pub.key", "--quiet").returncode == 0
    before = digest(run)
    proc = cli("validate", run, "--public-key", keys / "other.key.pub", "--quiet")
    assert proc.returncode == 1, proc.stderr
    assert "INVALID: signature: signed with another key" in proc.stdout, proc.stdout
    assert digest(run) == before


def test_validate_an_unsigned_release_with_a_key_fails(keys: Path, run: Path) -> None:
    proc = cli("validate", run, "--public-key", keys / "pub.key.pub", "--quiet")
    assert proc.returncode == 1 and "signature: " in proc.stdout and "not signed" in proc.stdout


@pytest.mark.slow
def test_a_change_the_checksums_do_not_catch_the_signature_does(keys: Path, run: Path) -> None:
    """The manifest edited (a field no other check reads): validate alone passes, the
    signature fails."""
    assert cli("sign", run, "--key", keys / "pub.key", "--quiet").returncode == 0
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["platform"] = "a machine the publisher never used"
    (run / "manifest.json").write_text(json.dumps(manifest, indent=2))
    assert cli("validate", run, "--quiet").returncode == 0
    proc = cli("validate", run, "--public-key", keys / "pub.key.pub", "--quiet")
    assert proc.returncode == 1
    assert "signature: the release changed since it was signed: manifest.json" in proc.stdout


@pytest.mark.slow
def test_a_changed_file_fails_both_checks(keys: Path, run: Path) -> None:
    assert cli("sign", run, "--key", keys / "pub.key", "--quiet").returncode == 0
    with open(run / "tables" / "codebook.csv", "a") as f:
        f.write("X,injected\n")
    proc = cli("validate", run, "--public-key", keys / "pub.key.pub", "--quiet")
    assert proc.returncode == 1
    assert "signature: the release changed since it was signed: tables/codebook.csv" in proc.stdout


@pytest.mark.slow
def test_an_existing_signature_is_kept_without_overwrite(keys: Path, run: Path) -> None:
    assert cli("sign", run, "--key", keys / "pub.key", "--quiet").returncode == 0
    before = digest(run)
    proc = cli("sign", run, "--key", keys / "other.key", "--quiet")
    one_line_error(proc, 2, "signature.json exists", "--overwrite")
    assert digest(run) == before
    proc = cli("sign", run, "--key", keys / "other.key", "--overwrite", "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert cli("validate", run, "--public-key", keys / "other.key.pub", "-q").returncode == 0


def test_sign_refuses_a_release_that_does_not_validate(keys: Path, run: Path) -> None:
    with open(run / "tables" / "codebook.csv", "a") as f:
        f.write("X,injected\n")
    before = digest(run)
    proc = cli("sign", run, "--key", keys / "pub.key", "--quiet")
    one_line_error(proc, 1, "does not validate", "codebook.csv")
    assert digest(run) == before


def test_sign_refuses_the_input_directory(state: Path, keys: Path, run: Path) -> None:
    proc = cli("sign", state / "cef", "--key", keys / "pub.key", "--quiet")
    one_line_error(proc, 1, "records no file checksums")
    assert not (state / "cef" / "signature.json").exists()


def _rsa_key(path: Path) -> Path:
    proc = subprocess.run(
        ["openssl", "genpkey", "-algorithm", "RSA", "-out", str(path)],
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip("openssl cannot make an RSA key here")
    return path


@pytest.mark.parametrize(
    ("option", "make", "words"),
    [
        ("--key", lambda d, k: k / "pub.key.pub", "is a public key"),
        ("--key", lambda d, k: d / "absent", "does not exist"),
        ("--key", lambda d, k: _write(d / "junk", b"\x00\x01junk"), "is not a private key file"),
        ("--key", lambda d, k: _rsa_key(d / "rsa"), "is an RSA key"),
        pytest.param("--key", lambda d, k: d, "is not a file", marks=pytest.mark.slow),
        pytest.param(  # validates a signed release as public-junk does
            "--public-key", lambda d, k: k / "pub.key", "is a private key", marks=pytest.mark.slow
        ),
        pytest.param(  # the same check as key-absent's
            "--public-key", lambda d, k: d / "absent", "does not exist", marks=pytest.mark.slow
        ),
        ("--public-key", lambda d, k: _write(d / "junk", b"hello\n"), "is not a public key"),
    ],
    ids=[
        "key-public",
        "key-absent",
        "key-junk",
        "key-rsa",
        "key-directory",
        "public-private",
        "public-absent",
        "public-junk",
    ],
)
def test_wrong_key_files_are_one_line_errors(
    keys: Path, run: Path, tmp_path: Path, option: str, make, words: str
) -> None:
    path = make(tmp_path, keys)
    if option == "--public-key":
        assert cli("sign", run, "--key", keys / "pub.key", "--quiet").returncode == 0
    before = digest(run)
    argv = ("sign", run) if option == "--key" else ("validate", run)
    proc = cli(*argv, option, path, "--quiet")
    one_line_error(proc, 2, f"{option} {path}", words)
    assert digest(run) == before


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("sign",), "release directory is missing"),
        (("sign", "RUN"), "--key K is missing"),
        (("sign", "RUN", "--new-key", "NEW"), "--new-key makes a key pair and signs nothing"),
    ],
    ids=["nothing", "no-key", "new-key-and-run"],
)
def test_usage_mistakes(run: Path, tmp_path: Path, argv: tuple, words: str) -> None:
    argv = tuple(
        str(run) if a == "RUN" else str(tmp_path / "new") if a == "NEW" else a for a in argv
    )
    before = digest(run)
    one_line_error(cli(*argv), 2, words)
    assert digest(run) == before and not (tmp_path / "new").exists()
