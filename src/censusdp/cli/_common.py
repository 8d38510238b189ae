"""Argument helpers shared by sub-commands (budget selection, progress)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_budget_arguments", "progress_printer", "resolve_budget"]


def add_budget_arguments(parser: argparse.ArgumentParser, *, default_preset: str | None) -> None:
    """``--preset | --config`` and ``--rho | --epsilon``."""
    src = parser.add_mutually_exclusive_group()
    src.add_argument(
        "--preset", default=None, help=f"built-in budget preset (default: {default_preset})"
    )
    src.add_argument("--config", default=None, metavar="FILE.toml", help="budget config file")
    amount = parser.add_mutually_exclusive_group()
    amount.add_argument("--rho", default=None, help="global rho (zCDP), e.g. 2.56 or 542/339")
    amount.add_argument(
        "--epsilon",
        default=None,
        help="global epsilon; for zCDP presets the largest rho whose epsilon at the preset delta is at most this",
    )
    parser.set_defaults(default_preset=default_preset)


def resolve_budget(args: argparse.Namespace) -> Any:
    """The budget the arguments select (library call; errors are ConfigError/BudgetError)."""
    from censusdp.privacy.budget import load_config, load_preset

    if args.config:
        budget = load_config(args.config)
    else:
        budget = load_preset(args.preset or args.default_preset)
    if args.rho is not None or args.epsilon is not None:
        budget = budget.scaled(rho=args.rho, epsilon=args.epsilon)
    return budget


def progress_printer(quiet: bool = False) -> Any:
    """A progress callback printing to stderr (or nothing with ``--quiet``)."""
    if quiet:
        return None

    def emit(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    return emit
