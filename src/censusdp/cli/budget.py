"""``censusdp budget``: print a budget's allocation table (rho, variance, epsilon)."""

from __future__ import annotations

import argparse

from censusdp.cli._common import add_budget_arguments, add_command, add_json_output, finish
from censusdp.io.budget_files import resolve_release_budget
from censusdp.privacy.budget_report import budget_report


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``budget`` sub-command."""
    p = add_command(
        subparsers,
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
    add_budget_arguments(p, default_preset="pl94-2020")
    p.add_argument(
        "--delta",
        default=None,
        help="report epsilons at this delta (default: the budget's own delta, 1e-10 for "
        "the pl94-2020 presets)",
    )
    add_json_output(p)
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    release = resolve_release_budget(
        preset=args.preset, config=args.config, rho=args.rho, epsilon=args.epsilon
    )
    report = budget_report(release, delta=args.delta)
    finish(args, report.to_text(), report.to_dict())
    return 0
