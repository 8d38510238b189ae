"""``censusdp risk``: Bayesian disclosure risk of a release configuration (Kazan & Reiter)."""

from __future__ import annotations

import argparse

from censusdp.cli._common import (
    add_budget_arguments,
    add_cef_input,
    add_command,
    add_json_output,
    add_output,
    add_seed,
    announce_randomness,
    comma_list,
    finish,
    positive_int,
    resolve_budget,
)
from censusdp.progress import printer as progress_printer


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``risk`` sub-command."""
    p = add_command(
        subparsers,
        "risk",
        help="disclosure risk of a release for every person unique in their block",
        description=(
            "For every person unique in their block on the PL94 detailed cell: the intruder's "
            "posterior (belief that the person has their cell), the disclosure risk (how many "
            "times that belief exceeds the prior one) and the probability of a correct 0-1 decision "
            "(Kazan & Reiter 2022), from the block-level rho of the detailed query and, with "
            "hierarchy, the block group's. Writes OUT/risk.json, OUT/risk_persons.parquet, "
            "plots in the style of the paper's Figs. 1-3 and 6, and OUT/manifest.json."
        ),
    )
    add_cef_input(p, help="persons.parquet + units.parquet")
    add_output(p, metavar="OUT")
    add_budget_arguments(p, default_preset="pl94-2020")
    sweep = p.add_mutually_exclusive_group()
    sweep.add_argument(
        "--sweep-rho",
        type=comma_list(str, option="--sweep-rho"),
        default=[],
        metavar="R1,R2,...",
        help="global rho values to sweep",
    )
    sweep.add_argument(
        "--sweep-epsilon",
        type=comma_list(str, option="--sweep-epsilon"),
        default=[],
        metavar="E1,E2,...",
        help="global epsilons to sweep (each the budget's largest rho whose epsilon at its "
        "delta is at most it)",
    )
    p.add_argument(
        "--priors",
        type=comma_list(option="--priors"),
        default=[0.5, 0.2, 0.1, 0.02],
        help="intruder priors p",
    )
    p.add_argument("--prior", type=float, default=0.5, help="prior for the two-level results")
    p.add_argument(
        "--draws",
        type=positive_int("--draws"),
        default=None,
        help="decide from N posterior draws (ties to the target) as the paper's MCMC does; "
        "default: exact posterior",
    )
    add_seed(p, default=0, help="seed of the simulated release")
    p.add_argument(
        "--noise-law",
        choices=("release", "paper"),
        default="release",
        help="'release': the noise the budget's mechanisms add (bounded neighbours: "
        "sigma^2 = 1/rho of the query); 'paper': Kazan & Reiter's sigma^2 = 1/(2 rho), to "
        "reproduce "
        "their tables",
    )
    add_json_output(p)
    p.set_defaults(func=_risk)


def _risk(args: argparse.Namespace) -> int:
    from censusdp.risk.report import RiskOptions, run_risk

    announce_randomness(args.seed, what="simulated release", release=False)
    rho = args.rho
    if args.epsilon is not None:  # the largest rho of the budget whose epsilon is at most it
        rho = resolve_budget(args).rho
    sweep = list(args.sweep_rho)
    for epsilon in args.sweep_epsilon:
        sweep.append(resolve_budget(argparse.Namespace(**{**vars(args), "epsilon": epsilon})).rho)
    options = RiskOptions(
        preset=None if args.config else (args.preset or args.default_preset),
        config=args.config,
        rho=rho,
        sweep=sweep,
        priors=[float(x) for x in args.priors],
        primary_prior=args.prior,
        draws=args.draws,
        seed=args.seed,
        noise_law=args.noise_law,
    )
    run = run_risk(
        args.input,
        args.out,
        options,
        progress=progress_printer(args.quiet),
        overwrite=args.overwrite,
    )
    summary = {"out": str(run.out_dir), "summary": run.summary, "seconds": run.seconds}
    finish(args, run.format(), summary)
    return 0
