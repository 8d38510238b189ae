"""``censusdp protect``: traditional disclosure limitation (the 2010 baseline).

``censusdp protect swap --input DIR --out RUN --rate R --seed S`` swaps households
and top-codes ages and writes a release in the run layout of ``censusdp run``;
``censusdp protect swap-dp`` also runs DP (TopDown) on top of the swapped file.
"""

from __future__ import annotations

import argparse
import sys

from censusdp.cli._common import (
    add_budget_arguments,
    add_cef_input,
    add_command,
    add_json_output,
    add_output,
    add_seed,
    add_workers,
    announce_randomness,
    finish,
    output_option,
    resolve_budget,
)
from censusdp.progress import printer as progress_printer

__all__ = ["register"]


def _topcode(text: str) -> int | None:
    if text.lower() in ("none", "off", "0"):
        return None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--topcode must be an age 1..115 or 'none', got {text!r}"
        ) from None


def _swap(args: argparse.Namespace) -> int:
    from censusdp.protect import SwapOptions, protect_swap

    announce_randomness(args.seed, what="swap")
    swap = SwapOptions(
        rate=args.rate,
        seed=args.seed,
        topcode=args.topcode,
        risk_weight=args.risk_weight,
        small_block=args.small_block,
    )
    m = protect_swap(
        args.input,
        args.out,
        swap,
        cef_out=args.cef_out,
        overwrite=args.overwrite,
        progress=progress_printer(args.quiet),
    )
    _summary(args, m)
    return 0


def _swap_dp(args: argparse.Namespace) -> int:
    from censusdp.privacy.release_budget import ReleaseBudget
    from censusdp.protect import SwapOptions, swap_then_dp
    from censusdp.release.options import Execution, ReleaseOptions

    announce_randomness(args.seed, what="swap")
    announce_randomness(args.dp_seed, what="DP noise", option="--dp-seed")
    swap = SwapOptions(rate=args.rate, seed=args.seed, topcode=args.topcode)
    m = swap_then_dp(
        args.input,
        args.out,
        swap,
        ReleaseBudget(resolve_budget(args)),
        ReleaseOptions(seed=args.dp_seed),
        execution=Execution(workers=args.workers, progress=progress_printer(args.quiet)),
        overwrite=args.overwrite,
    )
    _summary(args, m)
    return 0


def _summary(args: argparse.Namespace, manifest: dict) -> None:
    swap = manifest["swap"]
    line = f"wrote {args.out}: swapped at rate {swap['rate']}"
    if manifest.get("epsilon") is not None:
        line += f", then DP at epsilon {manifest['epsilon']:.3f}"
    keys = ("rho", "epsilon", "delta", "mechanism", "swap", "timings")
    finish(args, line, {"out": args.out, **{k: manifest.get(k) for k in keys}})


def _common(p: argparse.ArgumentParser) -> None:
    add_cef_input(p, help="CEF directory")
    add_output(p, metavar="RUN", help="release run directory to write")
    p.add_argument("--rate", type=float, default=0.05, help="share of households swapped")
    add_seed(p, default=0, help="seed of the swap")
    p.add_argument(
        "--topcode",
        type=_topcode,
        default=90,
        metavar="AGE|none",
        help="top-code ages above AGE (default 90)",
    )
    add_json_output(p)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``protect`` with ``swap`` and ``swap-dp``."""
    group = subparsers.add_parser(
        "protect",
        help="traditional disclosure limitation: household swapping, top-coding (2010)",
        description="Traditional disclosure limitation. Run 'censusdp protect COMMAND --help'.",
    )

    def show(_args: argparse.Namespace) -> int:
        group.print_help(sys.stderr)
        return 2

    group.set_defaults(func=show)
    sub = group.add_subparsers(dest="protect_command", metavar="COMMAND")
    swap = add_command(
        sub,
        "swap",
        help="targeted household swapping + age top-coding; writes a release run directory",
        description=(
            "Swap households (at-risk ones at a higher rate) with households of the same "
            "size and number of adults in another block of the same county, top-code ages, "
            "and write mdf_persons/mdf_units/tables/manifest like 'censusdp run' "
            "(JASON JSR-19-2F sec. 3.3)."
        ),
    )
    _common(swap)
    swap.add_argument(
        "--risk-weight", type=float, default=10.0, help="selection weight of at-risk households"
    )
    swap.add_argument(
        "--small-block",
        type=int,
        default=15,
        help="blocks with at most this many persons are at risk",
    )
    output_option(
        swap.add_argument(
            "--cef-out",
            default=None,
            metavar="DIR",
            help="also write the swapped file as a CEF here",
        ),
        "dir",
    )
    swap.set_defaults(func=_swap)

    sdp = add_command(
        sub,
        "swap-dp",
        help="swap, then a DP (TopDown) release of the swapped file (JASON JSR-19-2F sec. 8.4.3)",
        description="Swapping with DP on top, as JASON recommends (JASON JSR-19-2F sec. 8.4.3).",
    )
    _common(sdp)
    add_budget_arguments(sdp, default_preset="dhc-lite-demo")
    sdp.add_argument(
        "--dp-seed", type=int, default=None, help="seed of the DP noise (default: secure)"
    )
    add_workers(sdp)
    sdp.set_defaults(func=_swap_dp)
