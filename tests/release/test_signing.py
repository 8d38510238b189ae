"""Signed releases (censusdp.release.signing): a signature verifies on the release as
signed, and fails on every change to it: a file, the manifest, the key, the signature.

One small seeded release is made per module; each test signs or tampers with a copy.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import censusdp
from censusdp.errors import ConfigError, InputError, ValidationError
from censusdp.io.rundir import read_manifest
from censusdp.release import signing
from censusdp.release.validate import validate_run


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("signing")
    censusdp.generate_state("DC", seed=3, out=base / "cef", scale=0.02)
    censusdp.run_release(base / "cef", base / "run", seed=7)
    signing.generate_key(base / "a.key")
    signing.generate_key(base / "b.key")
    return base


@pytest.fixture()
def run(made: Path, tmp_path: Path) -> Path:
    """A fresh copy of the release."""
    return Path(shutil.copytree(made / "run", tmp_path / "run"))


@pytest.fixture()
def signed(made: Path, run: Path) -> Path:
    signing.sign_release(run, made / "a.key")
    return run


def _tree(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def _rewrite_manifest(run: Path, **fields) -> None:
    path = run / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest.update(fields)
    path.write_text(json.dumps(manifest, indent=2))


# -- the round trip --------------------------------------------------------------------


def test_a_signed_release_verifies_and_still_validates(made: Path, run: Path) -> None:
    before = _tree(run)
    path = signing.sign_release(run, made / "a.key")
    assert path == run / "signature.json"
    # signing adds signature.json and changes nothing else
    after = _tree(run)
    assert set(after) - set(before) == {"signature.json"}
    assert all(after[k] == v for k, v in before.items())
    ok, detail = signing.verify_release(run, made / "a.key.pub")
    assert ok, detail
    key = signing.load_public_key(made / "a.key.pub")
    assert f"SHA256:{signing.fingerprint(key)[:16]}" in detail
    # the signature is outside the manifest's list (it signs the manifest) ...
    assert "signature.json" not in read_manifest(run)["files"]
    # ... and the validator does not count it as a foreign file
    report = validate_run(run)
    assert report.ok, report.failures()


def test_signature_file_records_what_a_verifier_needs(made: Path, signed: Path) -> None:
    record = json.loads((signed / "signature.json").read_text())
    key = signing.load_public_key(made / "a.key.pub")
    assert record["format"] == signing.SIGNATURE_FORMAT and record["algorithm"] == "Ed25519"
    assert record["public_key_sha256"] == signing.fingerprint(key)
    embedded = serialization.load_pem_public_key(record["public_key"].encode())
    assert signing.fingerprint(embedded) == signing.fingerprint(key)
    statement = record["statement"].encode()
    assert statement == signing.signed_statement(signed)
    key.verify(base64.b64decode(record["signature"]), statement)  # raises if wrong
    assert record["signed_at"].endswith("Z") and record["signed_with"].startswith("censusdp ")


def test_the_statement_covers_files_manifest_budget_randomness_and_input(run: Path) -> None:
    manifest = read_manifest(run)
    statement = json.loads(signing.signed_statement(run))
    assert statement["format"] == signing.STATEMENT_FORMAT
    assert statement["files"] == manifest["files"]
    assert statement["manifest_sha256"] == signing.sha256_of(run / "manifest.json")
    for key in ("rho", "epsilon", "delta", "persons", "units", "mechanism"):
        assert statement["budget"][key] == manifest[key], key
    assert statement["randomness"] == manifest["randomness"]
    assert statement["randomness"]["mode"] == "seeded" and statement["seed"] == 7
    assert statement["input_sha256"] == manifest["input_sha256"] and statement["input_sha256"]


def test_the_statement_is_canonical(run: Path) -> None:
    text = signing.signed_statement(run)
    # sorted keys, no whitespace, ASCII: parsing and writing again gives the same bytes
    assert signing.canonical_json(json.loads(text)) == text
    assert text.isascii() and b"\n" not in text and b'", "' not in text

    # the order of the manifest's keys (and of its nested ones) does not matter
    def reverse(obj):
        if isinstance(obj, dict):
            return {k: reverse(obj[k]) for k in reversed(list(obj))}
        if isinstance(obj, list):
            return [reverse(v) for v in obj]
        return obj

    manifest = read_manifest(run)
    again = signing._statement(run, reverse(manifest))
    assert list(reverse(manifest)) != list(manifest)
    assert signing.canonical_json(again) == text
    assert signing.canonical_json({"b": 1, "a": {"d": [2, 1], "c": "é"}}) == (
        b'{"a":{"c":"\\u00e9","d":[2,1]},"b":1}'
    )


# -- every change fails ----------------------------------------------------------------


def test_a_changed_file_fails(made: Path, signed: Path) -> None:
    part = signed / "mdf_persons.txt" / "part-00000.txt"
    data = bytearray(part.read_bytes())
    data[-2] = ord("9") if data[-2] != ord("9") else ord("8")
    part.write_bytes(bytes(data))
    ok, detail = signing.verify_release(signed, made / "a.key.pub")
    assert not ok and "mdf_persons.txt/part-00000.txt changed" in detail, detail


def test_a_changed_file_with_its_checksum_rewritten_fails(made: Path, signed: Path) -> None:
    """The forger who updates the manifest's checksums: the validator's checksums hold,
    the signature does not."""
    codebook = signed / "tables" / "codebook.csv"
    codebook.write_text(codebook.read_text().replace("Total", "Totl", 1))
    files = read_manifest(signed)["files"]
    files["tables/codebook.csv"] = signing.sha256_of(codebook)
    _rewrite_manifest(signed, files=files)
    assert validate_run(signed).checks["checksums"]["ok"]
    ok, detail = signing.verify_release(signed, made / "a.key.pub")
    assert not ok and "tables/codebook.csv changed" in detail, detail


@pytest.mark.parametrize(
    "field",
    [
        {"epsilon": 1.0},
        {"rho": 0.01},
        {"randomness": {"mode": "secure", "seed": None, "generator": "os"}},
        {"seed": None},
        {"input_sha256": {"persons.parquet": "0" * 64, "units.parquet": "0" * 64}},
        {"platform": "elsewhere"},  # a field the statement does not repeat
    ],
    ids=lambda f: next(iter(f)),
)
def test_a_changed_manifest_field_fails(made: Path, signed: Path, field: dict) -> None:
    _rewrite_manifest(signed, **field)
    ok, detail = signing.verify_release(signed, made / "a.key.pub")
    assert not ok and "manifest.json changed" in detail, detail


def test_a_missing_file_fails(made: Path, signed: Path) -> None:
    (signed / "spine.parquet").unlink()
    ok, detail = signing.verify_release(signed, made / "a.key.pub")
    assert not ok and "spine.parquet is missing" in detail, detail


def test_an_added_file_fails(made: Path, signed: Path) -> None:
    extra = signed / "mdf_persons.parquet" / "part-00099.parquet"
    shutil.copy(signed / "mdf_persons.parquet" / "part-00000.parquet", extra)
    ok, detail = signing.verify_release(signed, made / "a.key.pub")
    assert not ok and "part-00099.parquet is not part of the signed release" in detail, detail


def test_another_key_fails_and_says_whose(made: Path, signed: Path) -> None:
    ok, detail = signing.verify_release(signed, made / "b.key.pub")
    a = signing.fingerprint(signing.load_public_key(made / "a.key.pub"))
    b = signing.fingerprint(signing.load_public_key(made / "b.key.pub"))
    assert not ok and "signed with another key" in detail
    assert f"SHA256:{a[:16]}" in detail and f"SHA256:{b[:16]}" in detail, detail


def test_a_forged_signature_fails(made: Path, signed: Path) -> None:
    path = signed / "signature.json"
    record = json.loads(path.read_text())
    record["signature"] = base64.b64encode(os.urandom(64)).decode()
    path.write_text(json.dumps(record))
    ok, detail = signing.verify_release(signed, made / "a.key.pub")
    assert not ok and "does not verify" in detail, detail


def test_a_signature_by_another_key_claiming_the_publishers_fails(made: Path, signed: Path) -> None:
    """A forger changes a file, signs the new statement with their own key, and writes
    the publisher's fingerprint and public key into signature.json."""
    (signed / "tables" / "codebook.csv").write_text("forged\n")
    files = read_manifest(signed)["files"]
    files["tables/codebook.csv"] = signing.sha256_of(signed / "tables" / "codebook.csv")
    _rewrite_manifest(signed, files=files)
    path = signed / "signature.json"
    record = json.loads(path.read_text())
    statement = signing.signed_statement(signed)
    forger = signing.load_private_key(made / "b.key")
    record.update(
        statement=statement.decode(),
        statement_sha256=signing.hashlib.sha256(statement).hexdigest(),
        signature=base64.b64encode(forger.sign(statement)).decode(),
    )
    path.write_text(json.dumps(record))
    ok, detail = signing.verify_release(signed, made / "a.key.pub")
    assert not ok and "does not verify" in detail, detail


def test_an_edited_statement_in_the_signature_file_fails(made: Path, signed: Path) -> None:
    path = signed / "signature.json"
    record = json.loads(path.read_text())
    record["statement"] = record["statement"].replace('"seed":7', '"seed":8')
    path.write_text(json.dumps(record))
    ok, detail = signing.verify_release(signed, made / "a.key.pub")
    assert not ok and "signature.json was changed" in detail, detail


@pytest.mark.parametrize(
    "content",
    [None, "not json", "[]", '{"format": "other"}', "TRUNCATE"],
    ids=["absent", "not-json", "not-object", "other-format", "truncated"],
)
def test_no_or_a_broken_signature_fails(made: Path, signed: Path, content) -> None:
    path = signed / "signature.json"
    if content is None:
        path.unlink()
    elif content == "TRUNCATE":
        path.write_text(path.read_text()[:200])
    else:
        path.write_text(content)
    ok, detail = signing.verify_release(signed, made / "a.key.pub")
    assert not ok and "signature.json" in detail, detail


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"signature": "not base64!"}, "not base64"),
        ({"signature": base64.b64encode(b"short").decode()}, "does not verify"),
        ({"statement": "\udc80", "statement_sha256": "0"}, "signature.json was changed"),
        ({"statement": "[1]"}, "signature.json was changed"),
        ({"statement_sha256": None}, "has no statement_sha256"),
        ({"algorithm": "RSA"}, "not Ed25519"),
    ],
    ids=["not-base64", "short", "surrogate", "not-object", "no-digest", "algorithm"],
)
def test_malformed_fields_of_the_signature_file_fail(
    made: Path, signed: Path, change: dict, words: str
) -> None:
    path = signed / "signature.json"
    record = json.loads(path.read_text())
    record.update(change)
    path.write_text(json.dumps(record))
    ok, detail = signing.verify_release(signed, made / "a.key.pub")
    assert not ok and words in detail, detail


def test_a_fifo_in_the_release_fails_without_being_read(made: Path, signed: Path) -> None:
    os.mkfifo(signed / "tables" / "P9.parquet")
    ok, detail = signing.verify_release(signed, made / "a.key.pub")
    assert not ok and "tables/P9.parquet is not a regular file" in detail, detail


# -- signing refuses -------------------------------------------------------------------


def test_signing_refuses_a_release_that_does_not_validate(made: Path, run: Path) -> None:
    (run / "tables" / "codebook.csv").write_text("changed\n")
    with pytest.raises(ValidationError, match="does not validate.*codebook"):
        signing.sign_release(run, made / "a.key")
    assert not (run / "signature.json").exists()


def test_signing_refuses_a_release_whose_checksums_hold_but_checks_fail(
    made: Path, run: Path
) -> None:
    """A part of the NMF removed, and its checksum with it: every file is the manifest's,
    but the NMF no longer measures what the budget says (the whole validator runs)."""
    gone = "noisy_measurements.parquet/part-00005.parquet"
    (run / gone).unlink()
    files = read_manifest(run)["files"]
    del files[gone]
    _rewrite_manifest(run, files=files)
    with pytest.raises(ValidationError, match="does not validate, so sign refuses it: nmf"):
        signing.sign_release(run, made / "a.key")
    assert not (run / "signature.json").exists()


def test_signing_refuses_a_directory_that_is_not_a_release(made: Path) -> None:
    before = _tree(made / "cef")
    with pytest.raises(InputError, match="records no file checksums"):
        signing.sign_release(made / "cef", made / "a.key")
    assert _tree(made / "cef") == before


def test_an_existing_signature_is_replaced_only_with_overwrite(made: Path, signed: Path) -> None:
    before = (signed / "signature.json").read_bytes()
    with pytest.raises(ConfigError, match="signature.json exists"):
        signing.sign_release(signed, made / "b.key")
    assert (signed / "signature.json").read_bytes() == before
    signing.sign_release(signed, made / "b.key", overwrite=True)
    assert signing.verify_release(signed, made / "b.key.pub")[0]
    assert not signing.verify_release(signed, made / "a.key.pub")[0]


# -- keys ------------------------------------------------------------------------------


def test_a_new_key_pair_is_private_and_never_overwrites(tmp_path: Path) -> None:
    public, fp = signing.generate_key(tmp_path / "k")
    assert public == tmp_path / "k.pub"
    assert stat.S_IMODE((tmp_path / "k").stat().st_mode) == 0o600
    assert b"PRIVATE KEY" in (tmp_path / "k").read_bytes()
    assert b"BEGIN PUBLIC KEY" in public.read_bytes()
    assert signing.fingerprint(signing.load_private_key(tmp_path / "k")) == fp
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(ConfigError, match="never overwritten"):
        signing.generate_key(tmp_path / "k")
    (tmp_path / "j.pub").write_text("mine")  # only the public half exists: still refused
    with pytest.raises(ConfigError, match="j.pub exists"):
        signing.generate_key(tmp_path / "j")
    assert not (tmp_path / "j").exists() and (tmp_path / "j.pub").read_text() == "mine"
    # a (dangling) symlink is not followed: its target is not created
    (tmp_path / "link").symlink_to(tmp_path / "target")
    with pytest.raises(ConfigError, match="never overwritten"):
        signing.generate_key(tmp_path / "link")
    assert not (tmp_path / "target").exists()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name in before} == before


def test_key_files_are_created_exclusively(tmp_path: Path) -> None:
    """The last line of defence against a file appearing between the check and the
    write (a race): O_EXCL, no symlink followed."""
    (tmp_path / "taken").write_text("mine")
    with pytest.raises(FileExistsError):
        signing._create_exclusive(tmp_path / "taken", b"key", 0o600)
    (tmp_path / "link").symlink_to(tmp_path / "target")
    with pytest.raises(FileExistsError):
        signing._create_exclusive(tmp_path / "link", b"key", 0o600)
    assert (tmp_path / "taken").read_text() == "mine" and not (tmp_path / "target").exists()


def test_a_new_key_is_refused_inside_a_release(signed: Path) -> None:
    with pytest.raises(ConfigError, match="inside"):
        signing.generate_key(signed / "tables" / "k")
    assert not (signed / "tables" / "k").exists()


def test_an_encrypted_key_needs_its_passphrase(made: Path, run: Path, tmp_path: Path) -> None:
    signing.generate_key(tmp_path / "k", passphrase=b"correct horse")
    assert b"ENCRYPTED" in (tmp_path / "k").read_bytes()
    with pytest.raises(ConfigError, match="--key .* is encrypted"):
        signing.load_private_key(tmp_path / "k")
    with pytest.raises(ConfigError, match="wrong passphrase"):
        signing.load_private_key(tmp_path / "k", b"battery staple")
    with pytest.raises(ConfigError, match="is not encrypted"):
        signing.load_private_key(made / "a.key", b"correct horse")
    signing.sign_release(run, tmp_path / "k", passphrase=b"correct horse")
    assert signing.verify_release(run, tmp_path / "k.pub")[0]


# An Ed25519 key encrypted with "correct horse" (PKCS8, PBES2, AES-256-CBC) and a wrong
# passphrase that decrypts it to bytes whose padding checks but that are not a key: the
# one-in-256 case that once made a wrong passphrase read as "not a private key file".
_PADDED_KEY = b"""-----BEGIN ENCRYPTED PRIVATE KEY-----
MIGjMF8GCSqGSIb3DQEFDTBSMDEGCSqGSIb3DQEFDDAkBBBegp0zVwEtmtHtfGhp
zNBuAgIIADAMBggqhkiG9w0CCQUAMB0GCWCGSAFlAwQBKgQQG5JQiPmrB91PFQbC
R2wndQRASisqOYaYwufHLLaEsEE2yZ0MKsIyTIzmfY3+opmHmVMuv3e9VeQooOBu
BlTvINas7qiwJM5b3iKQt6btm0n6IA==
-----END ENCRYPTED PRIVATE KEY-----
"""


def test_a_wrong_passphrase_that_decrypts_to_garbage_is_still_a_wrong_passphrase(
    tmp_path: Path,
) -> None:
    (tmp_path / "k").write_bytes(_PADDED_KEY)
    with pytest.raises(ValueError, match="deserialize"):  # the case this test is about
        serialization.load_pem_private_key(_PADDED_KEY, b"wrong139")
    with pytest.raises(ConfigError, match="wrong passphrase"):
        signing.load_private_key(tmp_path / "k", b"wrong139")
    assert isinstance(signing.load_private_key(tmp_path / "k", b"correct horse"), Ed25519PrivateKey)
    (tmp_path / "junk").write_bytes(
        b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
    )
    with pytest.raises(ConfigError, match="not a private key file"):
        signing.load_private_key(tmp_path / "junk", b"anything")


def test_passphrase_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("CENSUSDP_TEST_PASS", "s3cret")
    assert signing.passphrase_from_env("CENSUSDP_TEST_PASS") == b"s3cret"
    assert signing.passphrase_from_env(None) is None
    monkeypatch.delenv("CENSUSDP_TEST_PASS")
    with pytest.raises(ConfigError, match="CENSUSDP_TEST_PASS is not set"):
        signing.passphrase_from_env("CENSUSDP_TEST_PASS")
    monkeypatch.setenv("CENSUSDP_TEST_PASS", "")
    with pytest.raises(ConfigError, match="is empty"):
        signing.passphrase_from_env("CENSUSDP_TEST_PASS")


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_wrong_key_files_are_named(made: Path, tmp_path: Path) -> None:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    rsa_pem = _write(
        tmp_path / "rsa",
        rsa_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    rsa_pub = _write(
        tmp_path / "rsa.pub",
        rsa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )
    garbage = _write(tmp_path / "garbage", b"hello\n")
    cases = [
        (signing.load_private_key, rsa_pem, "is an RSA key"),
        (signing.load_private_key, made / "a.key.pub", "is a public key"),
        (signing.load_private_key, garbage, "is not a private key file"),
        (signing.load_private_key, tmp_path / "absent", "does not exist"),
        (signing.load_private_key, tmp_path, "is not a file"),
        (signing.load_public_key, rsa_pub, "is an RSA key"),
        (signing.load_public_key, made / "a.key", "is a private key"),
        (signing.load_public_key, garbage, "is not a public key file"),
        (signing.load_public_key, tmp_path / "absent", "does not exist"),
    ]
    for load, path, words in cases:
        with pytest.raises(ConfigError) as info:
            load(path)
        message = str(info.value)
        assert words in message and str(path) in message and "\n" not in message, message
        option = "--key" if load is signing.load_private_key else "--public-key"
        assert message.startswith(option), message


def test_der_and_openssh_keys_are_read(made: Path, run: Path, tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    der = _write(
        tmp_path / "k.der",
        key.private_bytes(
            serialization.Encoding.DER,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    ssh_pub = _write(
        tmp_path / "k.ssh.pub",
        key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        ),
    )
    signing.sign_release(run, der)
    assert signing.verify_release(run, ssh_pub)[0]
    ssh = _write(
        tmp_path / "k.ssh",
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        ),
    )
    assert signing.fingerprint(signing.load_private_key(ssh)) == signing.fingerprint(key)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="no openssl")
def test_openssl_verifies_the_signature_as_documented(made: Path, signed: Path) -> None:
    """docs/file-formats.md: the statement and signature out of signature.json, checked by
    openssl with the public key alone, then the files against the statement."""
    record = json.loads((signed / "signature.json").read_text())
    statement = _write(signed.parent / "statement.json", record["statement"].encode())
    sig = _write(signed.parent / "sig.bin", base64.b64decode(record["signature"]))
    ok = subprocess.run(
        ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", str(made / "a.key.pub"),
         "-rawin", "-in", str(statement), "-sigfile", str(sig)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert ok.returncode == 0 and "Verified Successfully" in ok.stdout, ok.stdout + ok.stderr
    der = subprocess.run(
        ["openssl", "pkey", "-pubin", "-in", str(made / "a.key.pub"), "-outform", "DER"],
        capture_output=True, check=True,
    )  # fmt: skip
    assert signing.hashlib.sha256(der.stdout[-32:]).hexdigest() == record["public_key_sha256"]
    # a statement changed by one byte does not verify
    statement.write_bytes(statement.read_bytes().replace(b'"seed":7', b'"seed":8'))
    bad = subprocess.run(
        ["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", str(made / "a.key.pub"),
         "-rawin", "-in", str(statement), "-sigfile", str(sig)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert bad.returncode != 0


def test_api_signs_and_validates_with_a_public_key(made: Path, run: Path) -> None:
    censusdp.sign_release(run, made / "a.key")
    report = censusdp.validate(run, public_key=made / "a.key.pub")
    assert report.ok and report.checks["signature"]["ok"], report.failures()
    assert censusdp.verify_release(run, made / "a.key.pub")[0]
    report = censusdp.Release.open(run).validate(public_key=made / "b.key.pub")
    assert not report.ok and not report.checks["signature"]["ok"]
    assert report.failures() == [f"signature: {report.checks['signature']['detail']}"]
    assert "signature" not in censusdp.validate(run).checks


def test_api_makes_a_key_pair(tmp_path: Path) -> None:
    public = censusdp.make_signing_key(tmp_path / "k")
    assert public == tmp_path / "k.pub" and (tmp_path / "k").is_file()
    with pytest.raises(ConfigError, match="never overwritten"):
        censusdp.make_signing_key(tmp_path / "k")
