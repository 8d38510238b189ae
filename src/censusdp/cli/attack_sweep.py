"""``censusdp attack sweep``: reconstruction and re-identification vs protection and epsilon."""

from __future__ import annotations

import argparse

from censusdp.cli._common import (
    add_cef_input,
    add_command,
    add_json_output,
    add_output,
    add_seed,
    add_workers,
    announce_randomness,
    comma_list,
    finish,
)
from censusdp.progress import printer as progress_printer

__all__ = ["register"]


def _run(args: argparse.Namespace) -> int:
    from censusdp.attacks.dhc.sweep import SweepOptions, attack_sweep

    announce_randomness(args.seed, what="attack sweep", release=False)
    options = SweepOptions(
        epsilons=args.epsilons,
        production=not args.no_production,
        swap_rate=args.swap_rate,
        swap_dp_epsilons=args.swap_dp_epsilons,
        swap_dp_production=not args.no_production,
        preset=args.preset,
        seed=args.seed,
        keep_releases=not args.drop_releases,
        reuse_releases=args.reuse_releases,
    )
    r = attack_sweep(
        args.input,
        args.out,
        options,
        workers=args.workers,
        overwrite=args.overwrite,
        progress=progress_printer(args.quiet),
    )
    cols = (
        "name",
        "epsilon",
        "exact_rate",
        "fuzzy_rate",
        "confirmed_share",
        "nonmodal_confirmed_share",
        "fs_confirmed_share",
    )
    table = [{c: row[c] for c in cols} for row in r["rows"]]
    lines = [f"{'release':<22}{'epsilon':>9}{'exact':>8}{'fuzzy':>8}{'confirmed':>11}"]
    for row in table:
        eps = "" if row["epsilon"] is None else f"{row['epsilon']:.3g}"
        lines.append(
            f"{row['name']:<22}{eps:>9}{row['exact_rate'] or 0:>8.3f}"
            f"{row['fuzzy_rate'] or 0:>8.3f}{row['confirmed_share'] or 0:>11.3f}"
        )
    lines.append(f"wrote {args.out}/sweep.json, sweep.csv, sweep.png")
    brief = {
        "rows": table,
        "modal_guess_baseline": r["modal_guess_baseline"],
        "seconds": r["seconds"],
    }
    finish(args, "\n".join(lines), brief)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``attack sweep``."""
    p = add_command(
        subparsers,
        "sweep",
        help="attack unprotected, swapped, DP (over epsilon) and swap+DP releases; table + plot",
        description=(
            "Run the reconstruction and re-identification attacks against the unprotected "
            "tables, a swapped release, DP releases over epsilon (dhc-lite-demo rescaled) "
            "and the production budget, and DP on top of swapping; write sweep.json, "
            "sweep.csv and sweep.png with a public-marginals baseline (JASON JSR-19-2F sec. 8.4)."
        ),
    )
    add_cef_input(p)
    add_output(p)
    p.add_argument(
        "--epsilons",
        type=comma_list(option="--epsilons"),
        default=[0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0],
        metavar="E1,E2,...",
        help="total epsilons of the DP releases",
    )
    p.add_argument(
        "--swap-dp-epsilons",
        type=comma_list(option="--swap-dp-epsilons"),
        default=[1.0, 4.0],
        metavar="E1,...",
        help="epsilons of DP on top of swapping",
    )
    p.add_argument("--no-production", action="store_true", help="skip the production budget")
    p.add_argument("--swap-rate", type=float, default=0.05, help="share of households swapped")
    p.add_argument(
        "--preset", default="dhc-lite-demo", help="budget preset rescaled to each epsilon"
    )
    add_seed(p, default=0, help="master seed (swap, DP noise, commercial file)")
    add_workers(p)
    p.add_argument("--drop-releases", action="store_true", help="delete release dirs after use")
    p.add_argument(
        "--reuse-releases",
        action="store_true",
        help="attack the releases already in OUT/releases instead of making them again",
    )
    add_json_output(p)
    p.set_defaults(func=_run)
