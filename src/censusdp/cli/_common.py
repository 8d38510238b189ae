"""Argument helpers shared by sub-commands (budget selection)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from censusdp.privacy.budget import Budget

__all__ = ["add_budget_arguments", "resolve_budget"]


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


def resolve_budget(args: argparse.Namespace) -> Budget:
    """The budget the arguments select (see :func:`censusdp.privacy.budget.resolve_budget`)."""
    from censusdp.privacy.budget import resolve_budget as resolve

    return resolve(
        preset=args.preset,
        config=args.config,
        rho=args.rho,
        epsilon=args.epsilon,
        default_preset=args.default_preset,
    )
