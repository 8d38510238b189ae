"""``censusdp generate``: a synthetic census for one state on real 2010 tract totals."""

from __future__ import annotations

import argparse

from censusdp.cli._common import add_command, add_json_output, add_output, finish
from censusdp.progress import printer as progress_printer


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``generate`` sub-command."""
    p = add_command(
        subparsers,
        "generate",
        help="synthetic CEF (persons.parquet, units.parquet) for a state on real 2010 totals",
        description=(
            "Write DIR/persons.parquet, DIR/units.parquet and DIR/manifest.json: every tract "
            "has its real 2010 population and race/ethnicity counts; blocks, housing units, "
            "households, group quarters, sex, age and the 63 race categories are synthetic."
        ),
    )
    p.add_argument("--state", required=True, help="postal code (VT) or FIPS code (50)")
    p.add_argument("--seed", type=int, required=True, help="non-negative integer seed")
    add_output(p, help="output directory for persons.parquet and units.parquet")
    p.add_argument(
        "--scale",
        type=float,
        default=1.0,
        metavar="F",
        help="keep a random fraction F of the tracts (0 < F <= 1; default 1)",
    )
    add_json_output(p)
    p.set_defaults(func=_generate)


def _generate(args: argparse.Namespace) -> int:
    from dataclasses import replace
    from pathlib import Path

    from censusdp.generate import generate_state

    summary = generate_state(
        args.state,
        args.seed,
        args.out,
        scale=args.scale,
        progress=progress_printer(args.quiet),
        overwrite=args.overwrite,
    )
    record = {
        "out": str(args.out),
        "state": summary.state,
        "fips": summary.fips,
        "name": summary.name,
        "seed": summary.seed,
        "scale": summary.scale,
        **summary.counts(),
    }
    # the output as the user named it, not where it lies on this machine
    text = replace(summary, out_dir=Path(args.out)).format()
    if summary.scale < 1:
        text += (
            f"\nnote: a random {summary.scale:.0%} of {summary.name}'s tracts, not the whole "
            "state: the other tracts, and any county left with none, are in no output"
        )
    finish(args, text, record)
    return 0
