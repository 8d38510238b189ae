"""``censusdp attack reconstruct``: rebuild person records from a release's block tables."""

from __future__ import annotations

import argparse
import json

from censusdp.progress import printer as progress_printer

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    from censusdp.attacks.dhc.runs import run_reconstruct

    s = run_reconstruct(
        args.release,
        args.out,
        truth_dir=args.truth,
        age_detail=args.age_detail,
        workers=args.workers,
        time_limit=args.time_limit,
        refine=args.refine_tract,
        overwrite=args.overwrite,
        progress=progress_printer(args.quiet),
    )
    brief = {k: s[k] for k in ("source", "blocks", "records", "status", "timings")}
    if "match" in s:
        brief["match"] = s["match"]
    print(json.dumps(brief, indent=2))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``attack reconstruct``."""
    p = subparsers.add_parser(
        "reconstruct",
        help="reconstruct block, sex, age, race, ethnicity records from block tables (MILP)",
        description=(
            "Tabulate the DHC-style block tables (P1, P9, P11, P12, P12A-I, P14; tract "
            "PCT12A-O) of a release (or of a CEF: unprotected tables) and reconstruct every "
            "block's persons by integer programming with HiGHS (seed 000 sec. 4.1). With "
            "--truth, report one-to-one exact and age +-1 match rates."
        ),
    )
    p.add_argument("--release", required=True, metavar="RUN", help="release run dir or CEF dir")
    p.add_argument("--out", required=True, metavar="REC")
    p.add_argument("--truth", default=None, metavar="DIR", help="CEF to score against")
    p.add_argument("--age-detail", choices=("single", "sf1"), default="single")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--time-limit", type=float, default=30.0, help="HiGHS seconds per block")
    p.add_argument(
        "--refine-tract",
        action="store_true",
        help="re-pair ages and races within blocks to meet the tract tables PCT12A-O",
    )
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=_run)
