"""``censusdp budget``: print a budget's allocation table (rho, variance, epsilon)."""

from __future__ import annotations

import argparse
import json

from censusdp.privacy.budget import budget_report


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``budget`` sub-command."""
    p = subparsers.add_parser(
        "budget",
        help="show a privacy-loss budget: rho, noise variance and epsilon per query",
        description=(
            "Print the allocation of a budget preset or TOML config: per geolevel and query "
            "the share, rho, noise variance and epsilon at delta (Canonne-Kamath-Steinke "
            "Cor. 13), then totals per geolevel, per query and per attribute. "
            "--epsilon on a zCDP budget picks the largest rho whose epsilon at the "
            "budget's delta is at most E; --rho on a pure-DP budget picks epsilon = sqrt(2 rho)."
        ),
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--preset", default=None, help="built-in preset (default: pl94-2020)")
    src.add_argument("--config", default=None, metavar="FILE.toml", help="budget config file")
    amount = p.add_mutually_exclusive_group()
    amount.add_argument("--rho", default=None, help="rescale to this global rho, e.g. 2.56")
    amount.add_argument("--epsilon", default=None, help="rescale to this global epsilon")
    p.add_argument("--delta", default=None, help="report epsilons at this delta")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    report = budget_report(
        preset=args.preset,
        config=args.config,
        rho=args.rho,
        epsilon=args.epsilon,
        delta=args.delta,
    )
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.to_text())
    return 0
