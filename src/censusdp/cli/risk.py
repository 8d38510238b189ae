"""``censusdp risk``: Bayesian disclosure risk of a release configuration (Kazan & Reiter)."""

from __future__ import annotations

import argparse

from censusdp.progress import printer as progress_printer


def _floats(text: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list of numbers, got {text!r}"
        )
    return items


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``risk`` sub-command."""
    p = subparsers.add_parser(
        "risk",
        help="disclosure risk of a release for every person unique in their block",
        description=(
            "For every person unique in their block on the PL94 detailed cell: the intruder's "
            "posterior, the disclosure risk R and the probability of a correct 0-1 decision "
            "(Kazan & Reiter 2022), from the block-level rho of the detailed query and, with "
            "hierarchy, the block group's. Writes OUT/risk.json, OUT/risk_persons.parquet, "
            "plots in the style of the paper's Figs. 1-3 and 6, and OUT/manifest.json."
        ),
    )
    p.add_argument("--input", required=True, metavar="DIR", help="persons.parquet + units.parquet")
    p.add_argument("--out", required=True, metavar="OUT", help="output directory")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--preset", default=None, help="budget preset (default pl94-2020)")
    src.add_argument("--config", default=None, metavar="FILE.toml", help="budget config file")
    p.add_argument("--rho", default=None, help="rescale to this global rho (shares kept)")
    p.add_argument(
        "--sweep-rho",
        type=_floats,
        default=[],
        metavar="R1,R2,...",
        help="global rho values to sweep",
    )
    p.add_argument(
        "--priors", type=_floats, default=["0.5", "0.2", "0.1", "0.02"], help="intruder priors p"
    )
    p.add_argument("--prior", type=float, default=0.5, help="prior for the two-level results")
    p.add_argument(
        "--draws",
        type=int,
        default=None,
        help="decide from N posterior draws (ties to the target) as the paper's MCMC does; "
        "default: exact posterior",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the simulated release")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=_risk)


def _risk(args: argparse.Namespace) -> int:
    from censusdp.risk.report import run_risk

    run = run_risk(
        args.input,
        args.out,
        preset=None if args.config else (args.preset or "pl94-2020"),
        config=args.config,
        rho=args.rho,
        sweep=args.sweep_rho,
        priors=[float(x) for x in args.priors],
        primary_prior=args.prior,
        draws=args.draws,
        seed=args.seed,
        progress=progress_printer(args.quiet),
    )
    print(run.format())
    return 0
