"""Signed releases: an Ed25519 signature over a canonical statement of a release.

A publisher makes a key pair once (:func:`generate_key`), signs each release it
publishes (:func:`sign_release`, which writes ``RUN/signature.json``), and publishes the
public key; anyone holding the public key checks that a copy of the release is, byte for
byte, the one the key's holder signed (:func:`verify_release`).

What is signed is the *statement* (:func:`signed_statement`): a canonical JSON document
(keys sorted, no whitespace, ASCII, so UTF-8) tagged :data:`STATEMENT_FORMAT`, holding

* ``files``: the SHA-256 of every file in the release directory but ``manifest.json``
  and ``signature.json``, by relative path, computed from the bytes on disk; at signing
  these are exactly the manifest's ``files``;
* ``manifest_sha256``: the SHA-256 of ``manifest.json``, so every manifest field is
  covered, the file list included;
* ``budget``: the manifest's privacy loss as recorded (``rho``, ``rho_exact``,
  ``epsilon``, ``delta``, ``delta_target``, ``sampling_delta``, ``mechanism`` and the
  ``persons`` / ``units`` budgets);
* ``randomness`` and ``seed``: the randomness the manifest records (seeded or secure);
* ``input_sha256``: the hashes of the confidential input the manifest records.

The budget, randomness and input hash are covered by ``manifest_sha256`` already; they
are repeated so that the statement says, in itself, what the signer vouched for.

What a signature proves, and what it does not (``docs/file-formats.md``): it proves that
the holder of the private key published these bytes; not that the noise was drawn
correctly or from secure randomness, nor that the input hash is honest (only someone
holding the CEF can check that). Key custody is the publisher's; there is no revocation
and no trusted timestamp (``signed_at`` is the signer's clock, not signed).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime
import hashlib
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from censusdp.errors import ConfigError, InputError, ValidationError
from censusdp.io.atomic import sha256_of, write_json
from censusdp.io.output_rules import MANIFEST_FILE, is_censusdp_output
from censusdp.io.rundir import read_manifest
from censusdp.progress import Progress, say
from censusdp.release.manifest import SIGNATURE_FILE, UNLISTED_FILES
from censusdp.version import __version__

__all__ = [
    "ALGORITHM",
    "BUDGET_KEYS",
    "SIGNATURE_FILE",
    "SIGNATURE_FORMAT",
    "STATEMENT_FORMAT",
    "canonical_json",
    "fingerprint",
    "generate_key",
    "load_private_key",
    "load_public_key",
    "passphrase_from_env",
    "release_files",
    "sign_release",
    "signed_statement",
    "verify_release",
]

SIGNATURE_FORMAT = "censusdp-release-signature/1"
"""The ``format`` of ``signature.json``."""

STATEMENT_FORMAT = "censusdp-release-statement/1"
"""The ``format`` of the signed statement."""

ALGORITHM = "Ed25519"

BUDGET_KEYS = (
    "mechanism",
    "rho",
    "rho_exact",
    "epsilon",
    "delta",
    "delta_target",
    "sampling_delta",
    "persons",
    "units",
)
"""The manifest fields that state a release's privacy loss (copied into the statement)."""


# -- keys ------------------------------------------------------------------------------


def fingerprint(key: Ed25519PublicKey | Ed25519PrivateKey) -> str:
    """SHA-256 (hex) of the raw 32-byte public key."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def _short(fp: str) -> str:
    return f"SHA256:{fp[:16]}"


def passphrase_from_env(var: str | None, *, option: str = "--passphrase-env") -> bytes | None:
    """The passphrase held in the environment variable ``var`` (``None``: no passphrase).

    A passphrase is never taken on the command line, where other users see it (``ps``).

    Raises:
        ConfigError: naming ``option`` and ``var`` when it is unset or empty.
    """
    if var is None:
        return None
    value = os.environ.get(var)
    if value is None:
        raise ConfigError(f"{option} {var}: the environment variable {var} is not set")
    if not value:
        raise ConfigError(f"{option} {var}: the environment variable {var} is empty")
    return os.fsencode(value)


def _read_key_file(path: str | os.PathLike[str], option: str) -> bytes:
    p = Path(path)
    if str(path) == "":
        raise ConfigError(f"{option}: empty path")
    try:
        if not p.is_file():
            what = "does not exist" if not p.exists() else "is not a file"
            raise ConfigError(f"{option} {path}: {what}")
        if p.stat().st_size > 1 << 16:
            raise ConfigError(f"{option} {path}: not a key file (larger than 64 KiB)")
        return p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{option} {path}: cannot read it ({exc.strerror or exc})") from None


def _kind(key: Any) -> str:
    name = type(key).__name__.removeprefix("_")
    for word, shown in (("RSA", "an RSA"), ("EllipticCurve", "an ECDSA"), ("DSA", "a DSA")):
        if name.startswith(word):
            return f"{shown} key"
    if name.startswith("Ed448"):
        return "an Ed448 key"
    if name.startswith("X25519") or name.startswith("X448"):
        return f"an {name[:6]} key"
    return f"a {name} key"


def _try_public(data: bytes) -> Any:
    """The public key in ``data`` (PEM, DER or OpenSSH), or ``None``."""
    for load in (
        serialization.load_pem_public_key,
        serialization.load_der_public_key,
        serialization.load_ssh_public_key,
    ):
        with contextlib.suppress(ValueError, TypeError, UnsupportedAlgorithm):
            return load(data)
    return None


def _try_private(data: bytes, passphrase: bytes | None) -> tuple[Any, str | None]:
    """``(key, None)``, or ``(None, why)``: ``"encrypted"`` (no passphrase given),
    ``"not-encrypted"`` (one given to a plain key), ``"bad-passphrase"``, ``"unknown"``
    (not a private key), or another line saying why the key cannot be read."""
    if b"-----BEGIN OPENSSH PRIVATE KEY-----" in data:
        load = serialization.load_ssh_private_key
    elif b"-----BEGIN" in data:
        load = serialization.load_pem_private_key
    else:
        load = serialization.load_der_private_key
    try:
        return load(data, passphrase), None
    except TypeError as exc:  # a passphrase missing, or given to a plain key
        return None, "not-encrypted" if "not encrypted" in str(exc) else "encrypted"
    except UnsupportedAlgorithm as exc:
        if "bcrypt" in str(exc):
            return None, (
                "is an encrypted OpenSSH key, which needs the bcrypt module (pip install "
                "bcrypt); or use a key made by censusdp sign --new-key K --passphrase-env VAR"
            )
        return None, f"cannot be read here ({exc})"
    except ValueError as exc:
        low = str(exc).lower()
        # a wrong passphrase can also decrypt to bytes whose padding happens to check
        # (about one in 256 for CBC), which then fail to parse as a key
        wrong = "password" in low or "decrypt" in low
        if wrong or (passphrase is not None and _is_encrypted(load, data)):
            return None, "bad-passphrase"
        return None, "unknown"


def _is_encrypted(load: Any, data: bytes) -> bool:
    """Whether ``load`` reads ``data`` as an encrypted private key (it asks for a
    passphrase)."""
    try:
        load(data, None)
    except TypeError:
        return True
    except (ValueError, UnsupportedAlgorithm):
        return False
    return False


def load_private_key(
    path: str | os.PathLike[str],
    passphrase: bytes | None = None,
    *,
    option: str = "--key",
    passphrase_option: str = "--passphrase-env",
) -> Ed25519PrivateKey:
    """The Ed25519 private key in ``path`` (PEM PKCS8, DER or OpenSSH; encrypted ones
    with ``passphrase``).

    Raises:
        ConfigError: one line naming ``option`` and ``path``: unreadable, not a key, a
            public key, another algorithm, encrypted without a passphrase, a wrong
            passphrase, or a passphrase for a key that has none.
    """
    data = _read_key_file(path, option)
    key, why = _try_private(data, passphrase)
    if key is None:
        if why == "encrypted":
            raise ConfigError(
                f"{option} {path} is encrypted: give its passphrase with "
                f"{passphrase_option} VAR (the name of an environment variable holding it)"
            )
        if why == "not-encrypted":
            raise ConfigError(
                f"{option} {path} is not encrypted, but {passphrase_option} gave a passphrase"
            )
        if why == "bad-passphrase":
            raise ConfigError(f"{option} {path}: wrong passphrase (cannot decrypt the key)")
        if why != "unknown":
            raise ConfigError(f"{option} {path} {why}")
        public = _try_public(data)
        if public is not None:
            raise ConfigError(
                f"{option} {path} is a public key; signing needs the private key "
                "(the public key goes to --public-key)"
            )
        raise ConfigError(
            f"{option} {path} is not a private key file (PEM, DER or OpenSSH); "
            "make one with censusdp sign --new-key FILE"
        )
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(
            f"{option} {path} is {_kind(key)}; censusdp signs with Ed25519 keys "
            "(make one with censusdp sign --new-key FILE)"
        )
    return key


def load_public_key(
    path: str | os.PathLike[str], *, option: str = "--public-key"
) -> Ed25519PublicKey:
    """The Ed25519 public key in ``path`` (PEM SubjectPublicKeyInfo, DER or OpenSSH).

    Raises:
        ConfigError: one line naming ``option`` and ``path``: unreadable, not a key, a
            private key (never handed to a verifier), another algorithm.
    """
    data = _read_key_file(path, option)
    key = _try_public(data)
    if key is None:
        private, why = _try_private(data, None)
        if private is not None or why != "unknown":
            raise ConfigError(
                f"{option} {path} is a private key; give the public key (the .pub file "
                "censusdp sign --new-key wrote), and keep the private key to yourself"
            )
        raise ConfigError(f"{option} {path} is not a public key file (PEM, DER or OpenSSH)")
    if not isinstance(key, Ed25519PublicKey):
        raise ConfigError(f"{option} {path} is {_kind(key)}; censusdp signatures are Ed25519")
    return key


def _inside_censusdp_output(path: Path) -> Path | None:
    for parent in path.parents:
        if is_censusdp_output(parent):
            return parent
    return None


def _create_exclusive(path: Path, data: bytes, mode: int) -> None:
    """Create ``path`` holding ``data``; fail if anything exists there (a symlink too)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    os.close(fd)


def generate_key(
    private_path: str | os.PathLike[str],
    public_path: str | os.PathLike[str] | None = None,
    *,
    passphrase: bytes | None = None,
    option: str = "--new-key",
) -> tuple[Path, str]:
    """Make a new Ed25519 key pair: the private key (PEM PKCS8; encrypted with
    ``passphrase`` if given, else unencrypted) with mode 0600, and the public key
    (PEM SubjectPublicKeyInfo) at ``public_path`` (default: the private path + ``.pub``).

    Neither file is ever overwritten: both are created exclusively (``O_EXCL``, no
    symlink followed), and if the second cannot be created the first is removed.

    Returns:
        The public key's path and the key's fingerprint.

    Raises:
        ConfigError: naming ``option`` and the path, if either file exists, its
            directory does not, or it lies inside a censusdp output or input directory.
    """
    if str(private_path) == "":
        raise ConfigError(f"{option}: empty path")
    private = Path(private_path)
    public = Path(public_path) if public_path is not None else Path(f"{private}.pub")
    if private.resolve() == public.resolve():
        raise ConfigError(f"{option} {private_path}: the private and public key paths are one")
    for p in (private, public):
        if os.path.lexists(p):
            raise ConfigError(
                f"{option} {private_path}: {p} exists; a key file is never overwritten "
                "(choose another path)"
            )
        parent = p.absolute().parent
        if not parent.is_dir():
            raise ConfigError(f"{option} {private_path}: directory {parent} does not exist")
        inside = _inside_censusdp_output(p.absolute())
        if inside is not None:
            raise ConfigError(
                f"{option} {private_path} lies inside {inside}, a censusdp directory; keep "
                "keys out of releases and inputs"
            )
    key = Ed25519PrivateKey.generate()
    encryption = (
        serialization.BestAvailableEncryption(passphrase)
        if passphrase
        else serialization.NoEncryption()
    )
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )
    pub = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    umask = os.umask(0)
    os.umask(umask)
    try:
        _create_exclusive(private, pem, 0o600)
    except OSError as exc:
        raise _not_created(option, private_path, private, exc) from None
    try:
        _create_exclusive(public, pub, 0o644 & ~umask)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            private.unlink()  # ours: created exclusively just now
        if isinstance(exc, OSError):
            raise _not_created(option, private_path, public, exc) from None
        raise
    return public, fingerprint(key)


def _not_created(option: str, given: Any, path: Path, exc: OSError) -> ConfigError:
    if isinstance(exc, FileExistsError):
        return ConfigError(f"{option} {given}: {path} exists; a key file is never overwritten")
    return ConfigError(f"{option} {given}: cannot create {path} ({exc.strerror or exc})")


# -- the statement ---------------------------------------------------------------------


def canonical_json(obj: Any) -> bytes:
    """The canonical bytes of a JSON value: keys sorted, no whitespace, ASCII (``\\u``
    escapes), floats as Python writes them (shortest round-trip), no NaN."""
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode("ascii")


def release_files(run_dir: str | os.PathLike[str]) -> dict[str, str]:
    """The SHA-256 of every file in a release directory but ``manifest.json`` and
    ``signature.json`` (at its top), by relative path (``/``-separated), from the bytes
    on disk.

    Raises:
        InputError: naming an entry that is neither a directory nor a regular file (a
            FIFO, a device, a dangling symlink, a symlink to a directory), which is never
            read.
    """
    run = Path(run_dir)
    out: dict[str, str] = {}

    def unreadable(exc: OSError) -> None:
        raise InputError(f"{run}: cannot read {exc.filename} ({exc.strerror or exc})")

    for root, dirs, files in os.walk(run, onerror=unreadable, followlinks=False):
        base = Path(root)
        for name in sorted(dirs):
            if (base / name).is_symlink():
                rel = (base / name).relative_to(run).as_posix()
                raise InputError(f"{run}: {rel} is a symlink to a directory, not a release file")
        for name in files:
            path = base / name
            rel = path.relative_to(run).as_posix()
            if rel in UNLISTED_FILES:
                continue
            try:
                st = path.stat()  # through a symlink: what a reader of the file reads
            except OSError:
                raise InputError(f"{run}: {rel} is a dangling symlink") from None
            if not stat.S_ISREG(st.st_mode):
                raise InputError(f"{run}: {rel} is not a regular file")
            try:
                out[rel] = sha256_of(path)
            except OSError as exc:
                raise InputError(f"{run}: cannot read {rel} ({exc.strerror or exc})") from None
    return dict(sorted(out.items()))


def _statement(run: Path, manifest: Mapping[str, Any] | None = None) -> dict[str, Any]:
    manifest_path = run / MANIFEST_FILE
    if manifest is None:
        manifest = read_manifest(run)
    return {
        "format": STATEMENT_FORMAT,
        "files": release_files(run),
        "manifest_sha256": sha256_of(manifest_path),
        "budget": {k: manifest[k] for k in BUDGET_KEYS if k in manifest},
        "randomness": manifest.get("randomness"),
        "seed": manifest.get("seed"),
        "input_sha256": manifest.get("input_sha256"),
    }


def signed_statement(run_dir: str | os.PathLike[str]) -> bytes:
    """The canonical bytes a signature of ``run_dir`` signs (see the module's docstring),
    recomputed from the files on disk.

    Raises:
        InputError: if ``run_dir`` has no readable manifest, or holds an entry that is
            not a regular file (see :func:`release_files`).
    """
    return canonical_json(_statement(Path(run_dir)))


# -- signing ---------------------------------------------------------------------------


def _recorded_files(run: Path, manifest: Mapping[str, Any]) -> dict[str, str]:
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        raise InputError(
            f"{run}: its manifest records no file checksums; only a release written by "
            "censusdp run can be signed"
        )
    return files


def _first_difference(signed: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    out = []
    for rel in sorted(set(signed) | set(now)):
        if rel not in now:
            out.append(f"{rel} is missing")
        elif rel not in signed:
            out.append(f"{rel} is not part of the signed release")
        elif signed[rel] != now[rel]:
            out.append(f"{rel} changed")
    return out


def sign_release(
    run_dir: str | os.PathLike[str],
    private_key: str | os.PathLike[str] | Ed25519PrivateKey,
    *,
    passphrase: bytes | None = None,
    overwrite: bool = False,
    progress: Progress = None,
    option: str = "--key",
) -> Path:
    """Sign a release: check it validates (:func:`censusdp.release.validate.require_valid`,
    so every file's SHA-256 is the manifest's and nothing is missing or extra), then
    write ``RUN/signature.json`` atomically.

    Args:
        private_key: an Ed25519 private key, or the path of its file
            (:func:`load_private_key`, decrypted with ``passphrase``).
        overwrite: replace an existing ``signature.json`` (refused without).

    Returns:
        The path of ``signature.json``.

    Raises:
        ConfigError: a bad key file, or an existing signature without ``overwrite``.
        InputError: not a release written by censusdp run.
        ValidationError: the release does not validate, or changed while being signed.
    """
    from censusdp.release.validate import require_valid

    run = Path(run_dir)
    manifest = read_manifest(run)
    recorded = _recorded_files(run, manifest)
    key = (
        private_key
        if isinstance(private_key, Ed25519PrivateKey)
        else load_private_key(private_key, passphrase, option=option)
    )
    target = run / SIGNATURE_FILE
    if os.path.lexists(target):
        if target.is_dir() or not (target.is_file() or target.is_symlink()):
            raise InputError(f"{target} exists and is not a file")
        if not overwrite:
            raise ConfigError(
                f"{target} exists (the release is signed already); pass --overwrite to "
                "replace the signature"
            )
    say(progress, f"sign: validating {run}")
    require_valid(run, what="sign", progress=progress)
    say(progress, f"sign: hashing every file of {run}")
    statement = _statement(run, manifest)
    changed = _first_difference(recorded, statement["files"])
    if changed or statement["manifest_sha256"] != sha256_of(run / MANIFEST_FILE):
        raise ValidationError(
            f"{run} changed while it was being signed: "
            f"{changed[0] if changed else 'manifest.json changed'}; nothing was signed"
        )
    message = canonical_json(statement)
    signature = key.sign(message)
    key.public_key().verify(signature, message)  # a broken key fails here, not later
    public_pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    record = {
        "format": SIGNATURE_FORMAT,
        "algorithm": ALGORITHM,
        "public_key": public_pem.decode("ascii"),
        "public_key_sha256": fingerprint(key),
        "statement": message.decode("ascii"),
        "statement_sha256": hashlib.sha256(message).hexdigest(),
        "signature": base64.b64encode(signature).decode("ascii"),
        "signed_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "signed_with": f"censusdp {__version__}",
    }
    write_json(record, target)
    return target


# -- verifying -------------------------------------------------------------------------


def _read_signature(run: Path) -> tuple[dict[str, Any] | None, str]:
    path = run / SIGNATURE_FILE
    if not os.path.lexists(path):
        return None, f"{run} is not signed (no {SIGNATURE_FILE})"
    if not path.is_file():
        return None, f"{SIGNATURE_FILE} is not a file"
    try:
        record = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, f"{SIGNATURE_FILE} is not readable JSON ({exc})"
    if not isinstance(record, dict):
        return None, f"{SIGNATURE_FILE} is not a signature (a JSON object)"
    if record.get("format") != SIGNATURE_FORMAT:
        return None, (
            f"{SIGNATURE_FILE} has format {record.get('format')!r}, not {SIGNATURE_FORMAT!r}"
        )
    if record.get("algorithm") != ALGORITHM:
        return None, f"{SIGNATURE_FILE} uses algorithm {record.get('algorithm')!r}, not Ed25519"
    for name in ("public_key_sha256", "signature", "statement", "statement_sha256"):
        if not isinstance(record.get(name), str):
            return None, f"{SIGNATURE_FILE} has no {name}"
    return record, ""


def verify_release(
    run_dir: str | os.PathLike[str],
    public_key: str | os.PathLike[str] | Ed25519PublicKey,
    *,
    option: str = "--public-key",
) -> tuple[bool, str]:
    """Check ``RUN/signature.json`` against ``public_key`` and the files on disk.

    The statement is recomputed from the release's bytes (every file hashed again, the
    manifest's own hashes not trusted) and the signature verified on it with the given
    key (never the key ``signature.json`` carries). Fails when the release is unsigned,
    was signed with another key (naming that key's fingerprint), or when any file,
    the manifest or the signature changed since signing, or a file was added or removed.

    Returns:
        ``(ok, detail)``: a line saying who signed what, or what is wrong.

    Raises:
        ConfigError: a bad public key file (only when given a path).
    """
    key = (
        public_key
        if isinstance(public_key, Ed25519PublicKey)
        else load_public_key(public_key, option=option)
    )
    run = Path(run_dir)
    record, problem = _read_signature(run)
    if record is None:
        return False, problem
    given = fingerprint(key)
    signer = record["public_key_sha256"]
    if signer != given:
        shown = f" ({public_key})" if not isinstance(public_key, Ed25519PublicKey) else ""
        return False, (f"signed with another key: {_short(signer)}, not {_short(given)}{shown}")
    try:
        signature = base64.b64decode(record["signature"], validate=True)
    except (binascii.Error, ValueError):
        return False, f"{SIGNATURE_FILE}: the signature is not base64"
    try:
        statement = _statement(run)
    except InputError as exc:
        return False, str(exc)
    message = canonical_json(statement)
    try:
        key.verify(signature, message)
    except InvalidSignature:
        return False, _why_not(record, statement)
    if (
        record["statement"] != message.decode("ascii")
        or record["statement_sha256"] != hashlib.sha256(message).hexdigest()
    ):
        return False, f"{SIGNATURE_FILE} was changed: its statement is not the one signed"
    budget = statement["budget"]
    eps, delta = budget.get("epsilon"), budget.get("delta")
    what = f"{len(statement['files'])} files and manifest.json"
    if isinstance(eps, int | float) and isinstance(delta, int | float):
        what += f" (epsilon {eps:g}, delta {delta:g})"
    return True, (
        f"signed with key {_short(given)} at {record.get('signed_at', '?')}: {what} as signed"
    )


def _why_not(record: Mapping[str, Any], now: Mapping[str, Any]) -> str:
    """Why a signature fails: what differs from the statement recorded at signing (a
    forged or altered signature.json when nothing does)."""
    try:
        signed = json.loads(record["statement"])
        if not isinstance(signed, dict):
            raise ValueError
    except ValueError:
        signed = None
    text = record["statement"].encode("utf-8", "surrogatepass")
    if signed is not None and hashlib.sha256(text).hexdigest() == record.get("statement_sha256"):
        files = signed.get("files")
        if isinstance(files, dict):
            changed = _first_difference(files, now["files"])
            if changed:
                more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
                return f"the release changed since it was signed: {changed[0]}{more}"
        if signed.get("manifest_sha256") != now["manifest_sha256"]:
            return "the release changed since it was signed: manifest.json changed"
        for name in ("budget", "randomness", "seed", "input_sha256"):
            if signed.get(name) != now.get(name):
                return f"the release changed since it was signed: its {name} changed"
    return "the signature does not verify: signature.json was forged or altered"
