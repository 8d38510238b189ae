"""``censusdp attack``: the group of attack sub-commands.

The group has its own sub-parsers. ``dn`` (the Dinur-Nissim reconstruction laboratory,
JASON JSR-19-2F secs. 4-5) and ``dn-figures`` are defined here. Another attack adds itself by
creating ``censusdp.cli.attack_<name>`` with ``register(subparsers)`` (same protocol
as top-level commands: add a parser, set ``func``) and listing the module name in
:data:`ATTACK_MODULES`.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from censusdp.cli._common import (
    add_command,
    add_json_output,
    add_seed,
    add_workers,
    announce_randomness,
    finish,
    output_option,
    positive_int,
)
from censusdp.progress import printer as progress_printer

__all__ = ["ATTACK_MODULES", "register"]

# Modules ``censusdp.cli.<name>`` that add sub-commands to ``censusdp attack``.
ATTACK_MODULES: tuple[str, ...] = ("attack_reconstruct", "attack_reid", "attack_sweep")


def _multiples(text: str) -> list[float]:
    """``start:stop:step`` (inclusive of stop) or a comma-separated list of query multiples."""
    try:
        if ":" in text:
            parts = [float(x) for x in text.split(":")]
            if len(parts) != 3:
                raise ValueError
            start, stop, step = parts
            if step <= 0 or start <= 0 or stop < start:
                raise ValueError
            count = int(round((stop - start) / step)) + 1
            values = [round(start + i * step, 12) for i in range(count)]
            values = [v for v in values if v <= stop + 1e-9]
        else:
            values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--multiples must be START:STOP:STEP with 0 < START <= STOP and STEP > 0, or a "
            f"comma-separated list of positive numbers; got {text!r}"
        ) from None
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"--multiples must be positive; got {text!r}")
    return values


def _dn(args: argparse.Namespace) -> int:
    from censusdp.attacks import DnOptions, run_dn_report

    announce_randomness(args.seed, what="attack trials", release=False)
    options = DnOptions(
        n=args.n,
        multiples=args.multiples,
        noise=args.noise,
        epsilon=args.epsilon,
        variance=args.variance,
        trials=args.trials,
        seed=args.seed,
        family=args.family,
        solver=args.solver,
        nested=not args.fresh_queries,
    )
    out = run_dn_report(
        options,
        workers=args.workers,
        json_path=None if args.json in (None, "-") else args.json,
        plot_path=args.plot,
        progress=progress_printer(args.quiet),
    )
    frac = out["fraction_recovered"]
    rows = [
        {"queries": m, "mean": round(a, 4), "p10": round(b, 4), "p90": round(c, 4)}
        for m, a, b, c in zip(
            out["query_counts"], frac["mean"], frac["p10"], frac["p90"], strict=True
        )
    ]
    lines = [
        f"Dinur-Nissim reconstruction, n = {out['n']}, {out['trials']} trials, "
        f"solver {out['solver']}",
        f"{'queries':>8}{'mean':>8}{'p10':>8}{'p90':>8}   (fraction of bits recovered)",
    ]
    lines += [f"{r['queries']:>8}{r['mean']:>8.3f}{r['p10']:>8.3f}{r['p90']:>8.3f}" for r in rows]
    lines.append(
        f"first full recovery at {out['first_full_recovery_queries']} queries; "
        f"{out['timings']['wall_seconds']:.1f} s"
    )
    finish(args, "\n".join(lines), out if args.json == "-" else None)
    return 0


def _dn_figures(args: argparse.Namespace) -> int:
    from censusdp.attacks import FiguresOptions, reproduce_figures

    options = FiguresOptions(figures=args.figures, quick=args.quick, seed=args.seed)
    out = reproduce_figures(
        args.out,
        options,
        workers=args.workers,
        overwrite=args.overwrite,
        progress=progress_printer(args.quiet),
    )
    done = ", ".join(f"{fig} ({s:.1f} s)" for fig, s in out["timings_seconds"].items())
    finish(args, f"wrote JASON figures {done} to {args.out}", out)
    return 0


def _group_help(parser: argparse.ArgumentParser) -> object:
    def show(_args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return 2

    return show


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``attack`` group and its sub-commands."""
    group = subparsers.add_parser(
        "attack",
        help="attacks on published statistics (reconstruction, ...)",
        description="Attacks on published statistics. Run 'censusdp attack COMMAND --help'.",
    )
    group.set_defaults(func=_group_help(group))
    sub = group.add_subparsers(dest="attack_command", metavar="COMMAND")

    _add_dn(sub)
    _add_dn_figures(sub)
    for name in ATTACK_MODULES:
        importlib.import_module(f"censusdp.cli.{name}").register(sub)


def _add_dn(sub: argparse._SubParsersAction) -> None:
    """The ``dn`` sub-command."""
    dn = add_command(
        sub,
        "dn",
        help="Dinur-Nissim reconstruction: fraction of secret bits recovered vs number of queries",
        description=(
            "Reconstruct a secret n-bit database from m random subset-sum answers (exact or "
            "noisy) by bounded least squares and rounding (JASON (JSR-19-2F) sec. 4.3-4.4, 5.6); many "
            "seeded trials, deciles, and Appendix A's information-theoretic predictions. "
            "Noise here is experiment noise, not release noise."
        ),
    )
    dn.add_argument(
        "--n", type=positive_int("--n"), default=1000, help="number of secret bits (default 1000)"
    )
    dn.add_argument(
        "--multiples",
        type=_multiples,
        default=_multiples("0.1:1.0:0.05"),
        metavar="A:B:STEP|X,Y,...",
        help="numbers of queries as multiples of n (default 0.1:1.0:0.05)",
    )
    dn.add_argument(
        "--noise",
        choices=("none", "gaussian", "laplace", "geometric"),
        default="none",
        help="noise added to each query answer before the reconstruction",
    )
    dn.add_argument(
        "--epsilon", type=float, default=None, help="epsilon of laplace/geometric noise"
    )
    dn.add_argument(
        "--variance",
        default=None,
        metavar="V|jason|jason-matlab",
        help="Gaussian variance; 'jason' (default) = sqrt(n) ln(n)/2 as in sec. 4.4, "
        "'jason-matlab' = (sqrt(n) ln(n)/2)^2 as App. B's code does",
    )
    dn.add_argument(
        "--trials", type=positive_int("--trials"), default=100, help="seeded trials per query count"
    )
    add_seed(dn, default=0, help="master seed of the trials")
    dn.add_argument(
        "--family",
        choices=("random", "pairs", "msequence", "hadamard"),
        default="random",
        help="query family (msequence needs n = 2^k - 1, hadamard a power of two)",
    )
    dn.add_argument(
        "--solver",
        choices=("fista", "lsq_linear", "lp"),
        default="fista",
        help="reconstruction: bounded least squares by FISTA on the Gram matrix (fast), "
        "by scipy's lsq_linear (MATLAB lsqlin's peer), or Dinur and Nissim's linear program",
    )
    dn.add_argument(
        "--fresh-queries",
        action="store_true",
        help="draw a new query matrix for every m (as JASON's MATLAB) instead of nested prefixes",
    )
    add_workers(dn)
    add_json_output(dn)
    output_option(
        dn.add_argument(
            "--plot", default=None, metavar="OUT.png", help="write the recovery plot here"
        )
    )
    dn.set_defaults(func=_dn)


def _add_dn_figures(sub: argparse._SubParsersAction) -> None:
    """The ``dn-figures`` sub-command."""
    figs = add_command(
        sub,
        "dn-figures",
        help="rerun JASON's Dinur-Nissim figures 4-1..4-4, 5-6, 5-7 (PNG + JSON + timings)",
        description="Reproduce JASON (JSR-19-2F) figs. 4-1, 4-2/4-3, 4-4, 5-6 and 5-7 into a directory.",
    )
    output_option(
        figs.add_argument("--out", required=True, metavar="DIR", help="output directory"), "dir"
    )
    figs.add_argument(
        "--figures",
        nargs="+",
        choices=("4-1", "4-2", "4-4", "5-6", "5-7"),
        default=["4-1", "4-2", "4-4", "5-6", "5-7"],
        help="the JASON (JSR-19-2F) figures to reproduce",
    )
    figs.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    add_seed(figs, default=2020, help="master seed of the trials")
    add_workers(figs, default=2)
    add_json_output(figs)
    figs.set_defaults(func=_dn_figures)
