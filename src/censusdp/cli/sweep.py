"""``censusdp sweep``: TVD vs epsilon by geolevel (JASON JSR-19-2F Figs. 6-1, 6-2)."""

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
    input_option,
    positive_int,
)
from censusdp.progress import printer as progress_printer


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``sweep`` sub-command."""
    p = add_command(
        subparsers,
        "sweep",
        help="rerun the release over a range of epsilons; accuracy (1 - total variation "
        "distance) by geolevel",
        description=(
            "For each epsilon, rescale the budget (zCDP presets: rho = epsilon^2/2 by "
            "default), run the release, and record accuracy = 1 - TVD, TVD = L1/(2 POP) the total "
            "variation distance (1: "
            "every count exact; 0.98: 2% of people in a wrong cell or place; the JSON and CSV "
            "call it tvd) by geolevel for total population and race x Hispanic origin. Writes OUT/sweep.json, "
            "OUT/sweep.csv, OUT/sweep.png and OUT/manifest.json."
        ),
    )
    add_cef_input(p, help="CEF directory")
    p.add_argument(
        "--epsilons",
        type=comma_list(option="--epsilons"),
        default=[0.25, 0.5, 1.0, 2.0, 4.0, 8.0],
        metavar="E,E,...",
        help="sweep values (default 0.25,0.5,1,2,4,8)",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--preset", default="pl94-2020", help="budget preset whose shares are rescaled"
    )
    input_option(
        src.add_argument("--config", default=None, metavar="FILE.toml", help="budget config file")
    )
    p.add_argument(
        "--epsilon-meaning",
        choices=("rho", "cks"),
        default="cks",
        help="'cks': epsilon is the total (epsilon, delta)-DP loss at the preset's delta, "
        "as in every censusdp command; 'rho': rho = epsilon^2/2 (to compare noise scales "
        "with pure-DP figures)",
    )
    p.add_argument(
        "--trials", type=positive_int("--trials"), default=1, metavar="K", help="runs per epsilon"
    )
    add_seed(p, default=0, help="master seed (runs are reproducible)")
    add_workers(p)
    p.add_argument(
        "--postprocess",
        choices=("topdown", "bottomup"),
        default="topdown",
        help="estimation of each release: TopDown (as 'censusdp run') or the blocks alone "
        "(bottom-up)",
    )
    add_output(p)
    add_json_output(p)
    p.set_defaults(func=_sweep)


def _sweep(args: argparse.Namespace) -> int:
    from censusdp.evaluate import SweepOptions, sweep
    from censusdp.release.options import Execution

    announce_randomness(args.seed, what="sweep releases", release=False)
    emit = progress_printer(args.quiet)
    options = SweepOptions(
        epsilons=args.epsilons,
        preset=args.preset,
        config=args.config,
        trials=args.trials,
        seed=args.seed,
        postprocess=args.postprocess,
        epsilon_meaning=args.epsilon_meaning,
    )
    result = sweep(
        args.input,
        options,
        out_dir=args.out,
        execution=Execution(workers=args.workers, progress=emit),
        overwrite=args.overwrite,
    )
    levels = result["geolevels"][1:]
    lines = [
        f"accuracy = 1 - TVD of total population, 1 = exact ({result['epsilon_meaning']})",
        f"{'epsilon':>8}{'rho':>10}" + "".join(f"{lv:>12}" for lv in levels),
    ]
    for pt in result["points"]:
        tv = pt["tvd"]["total_population"]
        lines.append(
            f"{pt['epsilon']:>8g}{pt['rho']:>10.4g}"
            + "".join(f"{tv[lv]['mean']:>12.4f}" for lv in levels)
        )
    lines.append(f"wrote {args.out}/sweep.json, sweep.csv, sweep.png")
    finish(args, "\n".join(lines), result)
    return 0
