"""``censusdp attack reid``: link reconstructed records to a commercial file and confirm."""

from __future__ import annotations

import argparse

from censusdp.cli._common import (
    add_cef_input,
    add_command,
    add_json_output,
    add_output,
    add_seed,
    announce_randomness,
    finish,
    input_option,
)
from censusdp.progress import printer as progress_printer

__all__ = ["register"]

_KEYS = (
    "links",
    "putative_rate",
    "confirmed_rate",
    "confirmed_share",
    "confirmed_share_all_attributes",
    "unique_share",
    "uniques_confirmed_share",
    "nonmodal_confirmed_share",
    "baseline_confirmed_share",
)


def _run(args: argparse.Namespace) -> int:
    from censusdp.attacks.dhc.reid import CommercialSpec
    from censusdp.attacks.dhc.runs import run_reid

    announce_randomness(args.seed, what="commercial file", release=False)
    spec = CommercialSpec(
        coverage_adult=args.coverage_adult,
        coverage_minor=args.coverage_minor,
        age_off_by_one=args.age_error,
        wrong_block=args.wrong_block,
    )
    s = run_reid(
        args.reconstructed,
        args.input,
        args.out,
        methods=tuple(args.methods),
        seed=args.seed,
        spec=spec,
        overwrite=args.overwrite,
        progress=progress_printer(args.quiet),
    )
    brief = {m: {k: r.get(k) for k in _KEYS} for m, r in s["methods"].items()}
    lines = [
        f"{m:<15} putative {r['putative_rate']:.3f}, confirmed {r['confirmed_rate']:.3f}"
        for m, r in brief.items()
    ]
    finish(
        args, "\n".join(lines + [f"wrote {args.out}"]), {"methods": brief, "timings": s["timings"]}
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``attack reid``."""
    p = add_command(
        subparsers,
        "reid",
        help="re-identify reconstructed records with a synthetic commercial file",
        description=(
            "Draw a commercial file from the truth (identifiers, block, sex, age; partial "
            "coverage, age errors, wrong blocks), link on block, sex and age (exact then "
            "age +-1) or by Fellegi-Sunter, and confirm race and ethnicity against the "
            "truth: the 2010 rates (JASON JSR-19-2F sec. 4.1) and a public-marginals baseline."
        ),
    )
    input_option(
        p.add_argument(
            "--reconstructed",
            required=True,
            metavar="REC",
            help="the reconstructed records ('censusdp attack reconstruct --out REC')",
        )
    )
    add_cef_input(p)
    add_output(p, metavar="OUT", help="directory for the links and rates")
    p.add_argument(
        "--methods",
        nargs="+",
        choices=("exact", "fellegi-sunter"),
        default=["exact", "fellegi-sunter"],
        help="record linkage: one-to-one on block, sex and age (then age +-1), as in 2010, "
        "and/or Fellegi-Sunter probabilistic matching",
    )
    add_seed(p, default=0, help="seed of the synthetic commercial file")
    p.add_argument(
        "--coverage-adult",
        type=float,
        default=0.85,
        help="share of persons 18 or over listed in the synthetic commercial file",
    )
    p.add_argument(
        "--coverage-minor",
        type=float,
        default=0.40,
        help="share of persons under 18 listed in it (marketing files list few children)",
    )
    p.add_argument("--age-error", type=float, default=0.15, help="share with age off by one")
    p.add_argument(
        "--wrong-block",
        type=float,
        default=0.10,
        help="share listed at another block of the same tract (moves, geocoding errors)",
    )
    add_json_output(p)
    p.set_defaults(func=_run)
