"""``censusdp sweep``: TVD vs epsilon by geolevel (seed 000 Figs. 6-1, 6-2)."""

from __future__ import annotations

import argparse

from censusdp.progress import printer as progress_printer


def _epsilons(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--epsilons must be comma-separated numbers, got {text!r}"
        ) from None
    if not values or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"--epsilons must be positive numbers, got {text!r}")
    return values


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``sweep`` sub-command."""
    p = subparsers.add_parser(
        "sweep",
        help="rerun the release over a range of epsilons; TVD by geolevel as table and plot",
        description=(
            "For each epsilon, rescale the budget (zCDP presets: rho = epsilon^2/2 by "
            "default), run the release, and record TVD = 1 - L1/(2 POP) by geolevel for "
            "total population and race x Hispanic origin. Writes OUT/sweep.json, "
            "OUT/sweep.csv, OUT/sweep.png and OUT/manifest.json."
        ),
    )
    p.add_argument("--input", required=True, metavar="DIR", help="CEF directory")
    p.add_argument(
        "--epsilons",
        type=_epsilons,
        default=[0.25, 0.5, 1.0, 2.0, 4.0, 8.0],
        metavar="E,E,...",
        help="sweep values (default 0.25,0.5,1,2,4,8)",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--preset", default="pl94-2020", help="budget preset whose shares are rescaled"
    )
    src.add_argument("--config", default=None, metavar="FILE.toml", help="budget config file")
    p.add_argument(
        "--epsilon-meaning",
        choices=("rho", "cks"),
        default="rho",
        help="zCDP presets: 'rho' uses rho = eps^2/2 (default); 'cks' reads eps as "
        "(eps, delta)-DP at the preset's delta",
    )
    p.add_argument("--trials", type=int, default=1, metavar="K", help="runs per epsilon")
    p.add_argument("--seed", type=int, default=0, help="master seed (runs are reproducible)")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--postprocess", choices=("topdown", "bottomup"), default="topdown")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=_sweep)


def _sweep(args: argparse.Namespace) -> int:
    from censusdp.evaluate import sweep

    emit = progress_printer(args.quiet)
    result = sweep(
        args.input,
        args.epsilons,
        out_dir=args.out,
        preset=args.preset,
        config=args.config,
        trials=args.trials,
        seed=args.seed,
        workers=args.workers,
        postprocess=args.postprocess,
        epsilon_meaning=args.epsilon_meaning,
        progress=emit if emit is not None else (lambda _msg: None),
    )
    levels = result["geolevels"][1:]
    print(f"TVD of total population ({result['epsilon_meaning']})")
    print(f"{'epsilon':>8}{'rho':>10}" + "".join(f"{lv:>12}" for lv in levels))
    for pt in result["points"]:
        tv = pt["tvd"]["total_population"]
        print(
            f"{pt['epsilon']:>8g}{pt['rho']:>10.4g}"
            + "".join(f"{tv[lv]['mean']:>12.4f}" for lv in levels)
        )
    print(f"wrote {args.out}/sweep.json, sweep.csv, sweep.png")
    return 0
