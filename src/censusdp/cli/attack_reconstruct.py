"""``censusdp attack reconstruct``: rebuild person records from a release's block tables."""

from __future__ import annotations

import argparse

from censusdp.cli._common import (
    add_cef_input,
    add_command,
    add_json_output,
    add_output,
    add_release,
    add_workers,
    finish,
)
from censusdp.progress import printer as progress_printer

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    from censusdp.attacks.dhc.runs import ReconstructOptions, run_reconstruct

    options = ReconstructOptions(
        age_detail=args.age_detail, time_limit=args.time_limit, refine=args.refine_tract
    )
    s = run_reconstruct(
        args.release,
        args.out,
        options,
        truth_dir=args.input,
        workers=args.workers,
        overwrite=args.overwrite,
        progress=progress_printer(args.quiet),
    )
    brief = {k: s[k] for k in ("source", "blocks", "records", "status", "timings")}
    if "match" in s:
        brief["match"] = s["match"]
    text = f"reconstructed {s['records']:,} records in {s['blocks']:,} blocks ({s['source']})"
    if "match" in s:
        text += "\nmatch: " + ", ".join(f"{k} {v}" for k, v in s["match"].items())
    finish(args, text + f"\nwrote {args.out}", brief)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``attack reconstruct``."""
    p = add_command(
        subparsers,
        "reconstruct",
        help="reconstruct block, sex, age, race, ethnicity records from block tables (MILP)",
        description=(
            "Tabulate the DHC-style block tables (P1, P9, P11, P12, P12A-I, P14; tract "
            "PCT12A-O) of a release (or of a CEF: unprotected tables) and reconstruct every "
            "block's persons by integer programming with HiGHS (JASON JSR-19-2F sec. 4.1). With "
            "--input, report one-to-one exact and age +-1 match rates."
        ),
    )
    add_release(p, help="the release directory (or a CEF directory: unprotected tables)")
    add_output(p, metavar="REC", help="directory for the reconstructed records")
    add_cef_input(p, required=False, help="the CEF to score the reconstruction against")
    p.add_argument(
        "--age-detail",
        choices=("single", "sf1"),
        default="single",
        help="the block sex-by-age table P12 by single year of age, or in the age bands of "
        "the 2010 SF1 (then P14 gives the single years under 20)",
    )
    add_workers(p)
    p.add_argument("--time-limit", type=float, default=30.0, help="HiGHS seconds per block")
    p.add_argument(
        "--refine-tract",
        action="store_true",
        help="re-pair ages and races within blocks to meet the tract tables PCT12A-O",
    )
    add_json_output(p)
    p.set_defaults(func=_run)
