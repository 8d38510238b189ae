"""``censusdp attack sweep``: reconstruction and re-identification vs protection and epsilon."""

from __future__ import annotations

import argparse
import json

from censusdp.progress import printer as progress_printer

__all__ = ["register"]


def _floats(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated positive numbers, got {text!r}"
        ) from None
    if any(not v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"values must be positive, got {text!r}")
    return values


def _run(args: argparse.Namespace) -> int:
    from censusdp.attacks.dhc.sweep import attack_sweep

    r = attack_sweep(
        args.truth,
        args.out,
        epsilons=args.epsilons,
        production=not args.no_production,
        swap_rate=args.swap_rate,
        swap_dp_epsilons=args.swap_dp_epsilons,
        swap_dp_production=not args.no_production,
        preset=args.preset,
        seed=args.seed,
        workers=args.workers,
        keep_releases=not args.drop_releases,
        reuse_releases=args.reuse_releases,
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
    print(
        json.dumps(
            {
                "rows": table,
                "modal_guess_baseline": r["modal_guess_baseline"],
                "seconds": r["seconds"],
            },
            indent=2,
        )
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``attack sweep``."""
    p = subparsers.add_parser(
        "sweep",
        help="attack unprotected, swapped, DP (over epsilon) and swap+DP releases; table + plot",
        description=(
            "Run the reconstruction and re-identification attacks against the unprotected "
            "tables, a swapped release, DP releases over epsilon (dhc-lite-demo rescaled) "
            "and the production budget, and DP on top of swapping; write sweep.json, "
            "sweep.csv and sweep.png with a public-marginals baseline (seed 000 sec. 8.4)."
        ),
    )
    p.add_argument("--truth", required=True, metavar="DIR", help="CEF directory")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument(
        "--epsilons",
        type=_floats,
        default=[0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0],
        metavar="E1,E2,...",
    )
    p.add_argument("--swap-dp-epsilons", type=_floats, default=[1.0, 4.0], metavar="E1,...")
    p.add_argument("--no-production", action="store_true", help="skip the production budget")
    p.add_argument("--swap-rate", type=float, default=0.05)
    p.add_argument("--preset", default="dhc-lite-demo")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--drop-releases", action="store_true", help="delete release dirs after use")
    p.add_argument(
        "--reuse-releases",
        action="store_true",
        help="attack the releases already in OUT/releases instead of making them again",
    )
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=_run)
