"""``censusdp validate``: check a release from its own files (whole, consistent, untampered)."""

from __future__ import annotations

import argparse

from censusdp.cli._common import (
    add_cef_input,
    add_command,
    add_json_output,
    add_release,
    add_workers,
    finish,
    input_option,
)
from censusdp.progress import printer as progress_printer

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``validate`` sub-command."""
    p = add_command(
        subparsers,
        "validate",
        help="check a release: checksums, NMF, invariants, constraints, tables (exit 0 if valid)",
        description=(
            "Check RUN from its own files: every file's SHA-256 against the manifest, and "
            "nothing else in the directory (no extra file, link, FIFO or empty directory); "
            "the stated rho, epsilon and delta against the recorded budgets; the seeded or "
            "secure record against the release's history; the noisy measurements against "
            "the recorded budget (every geounit once, every cell, the stated variance); "
            "every invariant and constraint in the MDF; the text MDF against the Parquet "
            "MDF; the tables against the MDF, with the geography's GEOID, SUMLEV and NAME, "
            "and their codebook. With --input, also that RUN was made from that input; with "
            "--public-key P, that RUN/signature.json is a signature by P's key of RUN's "
            "files as they are (censusdp sign); "
            "--workers K reads the part files of the NMF and the MDF on K processes. Exit 0 "
            "only when everything holds; otherwise one line per failed check and exit 1."
        ),
    )
    add_release(p)
    add_cef_input(p, required=False, help="the CEF the release came from")
    add_json_output(p)
    add_workers(p)
    input_option(
        p.add_argument(
            "--public-key",
            metavar="KEY.pub",
            default=None,
            help="also check RUN's signature (RUN/signature.json) with this Ed25519 public key",
        )
    )
    p.set_defaults(func=_validate)


def _validate(args: argparse.Namespace) -> int:
    from censusdp.release.validate import validate_run

    signed = args.public_key is not None
    if signed:  # a bad key file is refused before the long checks
        from censusdp.release.signing import load_public_key

        load_public_key(args.public_key)
    report = validate_run(
        args.release, args.input, progress=progress_printer(args.quiet), workers=args.workers
    )
    if signed:
        from censusdp.release.signing import verify_release

        report.add("signature", *verify_release(args.release, args.public_key))
    if report.ok:
        text = f"{args.release}: valid ({len(report.checks)} checks passed)"
        if signed:
            text += f"; {report.checks['signature']['detail']}"
    else:
        text = "\n".join(f"{args.release}: INVALID: {line}" for line in report.failures())
    finish(args, text, report.to_dict())
    return 0 if report.ok else 1
