"""``censusdp sign``: sign a release with an Ed25519 key, or make a key pair."""

from __future__ import annotations

import argparse

from censusdp.cli._common import (
    add_command,
    add_json_output,
    finish,
    input_option,
    output_option,
    target_option,
)
from censusdp.progress import printer as progress_printer

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``sign`` sub-command."""
    p = add_command(
        subparsers,
        "sign",
        help="sign a release with an Ed25519 key (or make a key pair: --new-key K)",
        description=(
            "censusdp sign RUN --key K: check that RUN validates, then write "
            "RUN/signature.json, an Ed25519 signature by the private key K over a canonical "
            "statement of the release: every file's SHA-256 (so the file list), the "
            "SHA-256 of manifest.json, the budget, the randomness (seeded or secure) and "
            "the input's hashes. Anyone with the public key checks it with censusdp "
            "validate RUN --public-key K.pub (or with openssl: the statement is described with "
            "the release's file formats). "
            "censusdp sign --new-key K: make a key pair, the private key K (mode 0600) and "
            "the public key K.pub; an existing file is never overwritten. A signature "
            "proves who published the bytes, not that the noise was drawn correctly or "
            "securely."
        ),
    )
    # RUN is the one directory a command amends in place (RUN/signature.json)
    target_option(
        p.add_argument(
            "release", nargs="?", default=None, metavar="RUN", help="the release to sign"
        )
    )
    target_option(
        p.add_argument(
            "--release",
            dest="release_alias",
            default=None,
            metavar="RUN",
            help=argparse.SUPPRESS,  # an older spelling of RUN, kept for scripts
        )
    )
    input_option(
        p.add_argument("--key", metavar="KEY", default=None, help="the Ed25519 private key file")
    )
    output_option(
        p.add_argument(
            "--new-key",
            metavar="KEY",
            default=None,
            help="make a new key pair instead: the private key KEY and the public key KEY.pub",
        ),
        "new",
    )
    p.add_argument(
        "--passphrase-env",
        metavar="VAR",
        default=None,
        help="the environment variable holding the private key's passphrase (to decrypt "
        "--key, or to encrypt --new-key); never the passphrase itself on the command line",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing RUN/signature.json (a key file is never replaced)",
    )
    add_json_output(p)
    p.set_defaults(func=_sign)


def _release(args: argparse.Namespace) -> str | None:
    from censusdp.errors import CensusDPError

    positional, option = args.release, args.release_alias
    if positional is not None and option is not None and positional != option:
        raise CensusDPError(
            f"two release directories given: RUN {positional!r} and --release {option!r}"
        )
    return positional if positional is not None else option


def _sign(args: argparse.Namespace) -> int:
    from censusdp.errors import CensusDPError
    from censusdp.release import signing

    run = _release(args)
    passphrase = signing.passphrase_from_env(args.passphrase_env)
    if args.new_key is not None:
        if run is not None or args.key is not None or args.overwrite:
            given = "RUN" if run is not None else "--key" if args.key is not None else "--overwrite"
            raise CensusDPError(
                f"--new-key makes a key pair and signs nothing: drop {given} (then sign with "
                "censusdp sign RUN --key K)"
            )
        public, fp = signing.generate_key(args.new_key, passphrase=passphrase)
        encrypted = "encrypted with the passphrase, " if passphrase else "unencrypted, "
        text = (
            f"wrote the private key {args.new_key} ({encrypted}mode 0600: keep it secret) "
            f"and the public key {public} (publish it); fingerprint SHA256:{fp}"
        )
        record = {"private_key": str(args.new_key), "public_key": str(public)}
        finish(args, text, {**record, "fingerprint": f"SHA256:{fp}"})
        return 0
    if run is None:
        raise CensusDPError("the release directory is missing: give RUN --key K (or --new-key K)")
    if args.key is None:
        raise CensusDPError(f"--key K is missing: the private key to sign {run} with")
    key = signing.load_private_key(args.key, passphrase)
    path = signing.sign_release(
        run, key, overwrite=args.overwrite, progress=progress_printer(args.quiet)
    )
    fp = f"SHA256:{signing.fingerprint(key)}"
    finish(
        args,
        f"{run}: signed with key {fp}; wrote {path}",
        {"release": str(run), "signature": str(path), "fingerprint": fp},
    )
    return 0
