"""``censusdp design``: the mechanism design lab (strategies, small counts, allocation).

Sub-commands: ``strategy`` (error of a matrix-mechanism strategy on a workload, and
the SVD bound), ``small-n`` (mechanisms for one count in ``{0..n}``), ``allocation``
(geolevel and query budget shares for a TopDown workload) and ``figures``.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from censusdp.cli._common import (
    add_budget_arguments,
    add_json_output,
    add_output,
    add_seed,
    emit_json,
    finish,
    input_option,
    output_option,
)
from censusdp.progress import printer as progress_printer

if TYPE_CHECKING:
    from censusdp.design.allocation import AllocationRequest

__all__ = ["register"]


def _emit(data: dict, json_target: str | None, overwrite: bool, text: str) -> None:
    """Print JSON (``--json`` alone), write it (``--json FILE``), or print ``text``."""
    if json_target not in (None, "-"):
        text += f"\nwrote {json_target}"
    if json_target != "-":
        print(text)
    emit_json(data, json_target)


def _add_output(p: argparse.ArgumentParser) -> None:
    add_json_output(p)
    p.add_argument("--overwrite", action="store_true", help="replace an existing --json PATH")


def _strategy(args: argparse.Namespace) -> int:
    from censusdp.design import StrategyRequest, evaluate_strategy

    report = evaluate_strategy(
        StrategyRequest(
            workload=args.workload,
            n=args.n,
            strategy=args.strategy,
            branching=args.branching,
            privacy=args.privacy,
            seed=args.seed,
            restarts=args.restarts,
            p=args.p,
            maxiter=args.maxiter,
            rho=args.rho,
            epsilon=args.epsilon,
            delta=args.delta,
        ),
        progress=progress_printer(args.quiet or args.json == "-"),
    )
    _emit(report.to_dict(), args.json, args.overwrite, report.format())
    return 0


def _small_n(args: argparse.Namespace) -> int:
    from censusdp.design.small_n import SmallNRequest, small_n_report

    report = small_n_report(SmallNRequest(n=args.n, epsilon=args.epsilon, loss=args.loss))
    _emit(report.to_dict(), args.json, args.overwrite, report.format())
    return 0


def _allocation_request(args: argparse.Namespace) -> AllocationRequest:
    """The request: a budget and its targets, or a workload file of the user's own."""
    from censusdp.cli._common import resolve_budget
    from censusdp.design import DesignError
    from censusdp.design.allocation import AllocationRequest
    from censusdp.design.report import load_workload, resolve_targets

    if args.workload is None:
        budget = resolve_budget(args)
        targets = resolve_targets(args.targets, budget)
        return AllocationRequest(
            budget,
            targets=targets,
            neighbours=args.neighbours,
            denominator=args.denominator,
            name=args.name or "",
        )
    used = [f for f, v in (("--preset", args.preset), ("--config", args.config)) if v]
    used += ["--epsilon"] if args.epsilon is not None else []
    used += ["--targets"] if args.targets != "own" else []
    if used:
        raise DesignError(
            f"{used[0]} does not go with --workload (the file gives the schema, targets and "
            "rho; --rho overrides its rho)"
        )
    workload = load_workload(args.workload, rho=args.rho)
    return AllocationRequest(
        workload.plan,
        targets=workload.targets,
        neighbours=args.neighbours,
        denominator=args.denominator,
        name=args.name or "",
    )


def _allocation(args: argparse.Namespace) -> int:
    from censusdp.design.allocation import optimize_allocation
    from censusdp.design.report import write_allocation

    report = optimize_allocation(
        _allocation_request(args),
        progress=progress_printer(args.quiet or args.json == "-"),
        simulate_trials=args.simulate,
        seed=args.seed,
    )
    text = report.format()
    if args.out:
        paths = write_allocation(report, args.out, overwrite=args.overwrite)
        text += "\nwrote " + ", ".join(str(p) for p in paths.values())
    _emit(report.to_dict(), args.json, args.overwrite, text)
    return 0


def _figures(args: argparse.Namespace) -> int:
    from censusdp.design.figures import FIGURE_FILES, make_figures

    ns = tuple(2**k for k in range(4, args.max_n.bit_length()) if 2**k <= args.max_n)
    numbers = make_figures(
        args.out,
        seed=args.seed,
        ns=ns,
        restarts=args.restarts,
        overwrite=args.overwrite,
        progress=progress_printer(args.quiet),
    )
    text = (
        f"wrote {', '.join(FIGURE_FILES.values())} and design_figures.json to {args.out} "
        f"({numbers['seconds']} s, seed {numbers['seed']})"
    )
    finish(args, text, numbers)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``design`` command group."""
    fmt = argparse.ArgumentDefaultsHelpFormatter
    group = subparsers.add_parser(
        "design",
        help="mechanism design lab: strategies, small-count mechanisms, budget allocation",
        description=(
            "The mechanism design lab: error of matrix-mechanism strategies (strategy), "
            "mechanisms for one small count (small-n), budget allocation (allocation) and "
            "the figures of the design lab's documentation (figures)."
        ),
        formatter_class=fmt,
    )
    sub = group.add_subparsers(dest="design_command", metavar="SUBCOMMAND")
    group.set_defaults(func=lambda _args: group.print_help() or 2)

    _add_strategy(sub, fmt)
    _add_small_n(sub, fmt)
    _add_figures(sub, fmt)
    _add_allocation(sub, fmt)


def _add_strategy(sub: argparse._SubParsersAction, fmt: type[argparse.HelpFormatter]) -> None:
    """The ``strategy`` sub-command."""
    p = sub.add_parser(
        "strategy",
        help="error of a strategy on a workload (for a stated rho or epsilon), and the SVD "
        "lower bound",
        description=(
            "Expected error of the matrix mechanism: rootmse = sqrt(sens(A)^2 ||W A^+||_F^2 / m) "
            "with unit-variance noise (sens = largest column L2 norm for zcdp, L1 for pure), "
            "and the SVD bound sqrt((sum of singular values of W)^2 / (n m)); with --rho or "
            "--epsilon both also as the root mean squared error per query at that budget."
        ),
        formatter_class=fmt,
    )
    p.add_argument(
        "--workload",
        required=True,
        help="all-range, prefix, identity, total (join with '*' for a product), or "
        "marginals:D1xD2x...[:WAYS]",
    )
    p.add_argument("--n", default=None, help="cells: N, or N1xN2x... for several attributes")
    p.add_argument(
        "--strategy",
        required=True,
        choices=["identity", "hierarchical", "wavelet", "workload", "optimized"],
        help="strategy to evaluate",
    )
    p.add_argument("--branching", type=int, default=2, help="branching of the hierarchical tree")
    p.add_argument("--privacy", choices=["zcdp", "pure"], default="zcdp", help="privacy model")
    p.add_argument("--seed", type=int, default=0, help="seed of the optimiser's random starts")
    p.add_argument("--restarts", type=int, default=4, help="random starts of the optimiser")
    p.add_argument(
        "--p",
        type=int,
        default=None,
        help="rows of Theta per attribute (default n/4 zcdp, n/16 pure)",
    )
    p.add_argument("--maxiter", type=int, default=1000, help="L-BFGS-B iterations per solve")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument(
        "--rho",
        default=None,
        help="zCDP budget (--privacy zcdp): also report the errors with Gaussian noise of "
        "variance 1/(2 rho) (default: unit-variance noise only)",
    )
    budget.add_argument(
        "--epsilon",
        default=None,
        help="pure-DP budget (--privacy pure: Laplace noise of variance 2/epsilon^2), or "
        "under zcdp an (epsilon, --delta) target turned into the largest rho meeting it "
        "(default: unit-variance noise only)",
    )
    p.add_argument(
        "--delta", default="1e-10", help="delta of an --epsilon target under --privacy zcdp"
    )
    _add_output(p)
    p.set_defaults(func=_strategy)


def _add_small_n(sub: argparse._SubParsersAction, fmt: type[argparse.HelpFormatter]) -> None:
    """The ``small-n`` sub-command."""
    p = sub.add_parser(
        "small-n",
        help="geometric, fair and LP-optimal mechanisms for one count in 0..n",
        description=(
            "Mechanisms for a count in {0..n} under epsilon-DP (JASON JSR-19-2F sec. 5.2.3): "
            "uniform, range-restricted and truncated geometric, the fair mechanism, and "
            "LP-optimal mechanisms (HiGHS) with the report's honesty and symmetry "
            "constraints; wrong-answer rates and full output distributions."
        ),
        formatter_class=fmt,
    )
    p.add_argument("--n", type=int, required=True, help="largest possible count")
    p.add_argument("--epsilon", required=True, help="pure-DP epsilon, e.g. 1 or 1/2")
    p.add_argument(
        "--loss",
        choices=["wrong", "abs", "worst"],
        default="wrong",
        help="what the LP minimises: wrong-answer rate, expected |error|, or the worst "
        "case wrong-answer rate over true counts",
    )
    _add_output(p)
    p.set_defaults(func=_small_n)


def _add_figures(sub: argparse._SubParsersAction, fmt: type[argparse.HelpFormatter]) -> None:
    """The ``figures`` sub-command."""
    p = sub.add_parser(
        "figures",
        help="the design lab's figures (error vs n, strategy comparison, small n)",
        description="Run the sweeps behind the design lab's documented figures and write the PNG "
        "figures and "
        "design_figures.json (every plotted number and the seed) into OUT.",
        formatter_class=fmt,
    )
    add_output(p, metavar="OUT")
    add_seed(p, default=0, help="seed of the optimiser's random starts")
    p.add_argument("--max-n", type=int, default=256, help="largest n of the error-vs-n sweep")
    p.add_argument("--restarts", type=int, default=4, help="random starts of the optimiser")
    add_json_output(p)
    p.set_defaults(func=_figures)


def _add_allocation(sub: argparse._SubParsersAction, fmt: type[argparse.HelpFormatter]) -> None:
    """The ``allocation`` sub-command."""
    p = sub.add_parser(
        "allocation",
        help="optimise geolevel and query budget shares for a target workload",
        description=(
            "Choose geolevel and query shares that minimise the weighted mean squared error "
            "per cell of a target workload of tables, each answered by least squares from "
            "its geounit's noisy measurements (sigma^2 = 1/rho, rho the query's share of the "
            "budget, for bounded neighbours, 1/(2 rho) for unbounded, as the budget states unless --neighbours is given); "
            "compare with the budget's own allocation and write a preset TOML."
        ),
        formatter_class=fmt,
    )
    add_budget_arguments(p, default_preset="pl94-2020")
    input_option(
        p.add_argument(
            "--workload",
            default=None,
            metavar="FILE.toml|FILE.json",
            help="a histogram and target workload of your own instead of a budget: "
            "[[attributes]] (name, size), [[queries]] (attributes, weight, geolevel), "
            "optional geolevels, measure, rho, neighbours; starts from equal shares",
        )
    )
    input_option(
        p.add_argument(
            "--targets",
            default="own",
            metavar="own|revealed|FILE.toml",
            help="target workload: the budget's measured queries with weight 1 (own), weighted "
            "by the square of their share of rho (revealed), or [[tables]] from a TOML file",
        )
    )
    p.add_argument(
        "--neighbours",
        choices=["bounded", "unbounded"],
        default=None,
        help="noise variance 1/rho (bounded) or 1/(2 rho) (unbounded), rho the query's; "
        "default: the "
        "budget file's own neighbours",
    )
    p.add_argument("--denominator", type=int, default=10_000, help="shares are k/denominator")
    p.add_argument(
        "--name", default=None, help="name of the emitted preset (default NAME-optimized)"
    )
    p.add_argument(
        "--simulate",
        type=int,
        default=0,
        metavar="TRIALS",
        help="also estimate both errors by Monte Carlo (discrete Gaussian noise, dense GLS)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the simulation")
    output_option(
        p.add_argument(
            "--out",
            default=None,
            metavar="DIR",
            help="write allocation.json, NAME.toml and the heat table PNG here",
        ),
        "dir",
    )
    _add_output(p)
    p.set_defaults(func=_allocation)
