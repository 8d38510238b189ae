"""``censusdp compare``: two releases of the same truth, side by side in one HTML page."""

from __future__ import annotations

import argparse

from censusdp.cli._common import (
    add_cef_input,
    add_command,
    add_json_output,
    add_page_output,
    comma_list,
    emit_json,
    input_option,
)
from censusdp.progress import printer as progress_printer


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``compare`` sub-command."""
    p = add_command(
        subparsers,
        "compare",
        help="two releases of the same truth side by side: summaries, accuracy, maps, places",
        description=(
            "Evaluate RUN_A and RUN_B against the CEF in DIR and write one self-contained "
            "HTML page comparing them: plain-language summaries, which is closer to the "
            "truth at each geolevel, county maps on one colour scale, and every place's "
            "two published counts with CSV download."
        ),
    )
    input_option(p.add_argument("run_a", metavar="RUN_A", help="first release run directory"))
    input_option(p.add_argument("run_b", metavar="RUN_B", help="second release run directory"))
    add_cef_input(p, help="the CEF both releases were made from")
    add_page_output(p, metavar="COMPARE.html", help="the HTML page to write")
    add_json_output(p)
    p.add_argument(
        "--names",
        type=comma_list(str, option="--names", positive=False),
        default=None,
        metavar="A,B",
        help="labels of the two releases (default: A and B with their directory names)",
    )
    p.add_argument("--overwrite", action="store_true", help="replace existing --html/--json files")
    p.add_argument(
        "--allow-invalid",
        action="store_true",
        help="compare releases that fail 'censusdp validate' (the failed checks are recorded)",
    )
    p.set_defaults(func=_compare)


def _compare(args: argparse.Namespace) -> int:
    from censusdp.evaluate.compare import compare_releases

    to_file = args.json not in (None, "-")
    out = compare_releases(
        args.run_a,
        args.run_b,
        args.input,
        names=args.names,
        html_path=args.html,
        json_path=args.json if to_file else None,
        allow_invalid=args.allow_invalid,
        progress=progress_printer(args.quiet),
    )
    if args.json == "-":
        emit_json(out, "-")
        return 0
    a, b = (r["name"] for r in out["runs"])
    w = max(len(a), len(b), 8) + 6
    print(f"{'geolevel':<11}{'places':>8}  {'MAE ' + a:>{w}}  {'MAE ' + b:>{w}}{'B/A':>8}")
    for rec in out["levels"]:
        ratio = rec["mae_ratio_b_over_a"]
        print(
            f"{rec['geolevel']:<11}{rec['units']:>8,}  {rec['mae'][0]:>{w}.3f}  "
            f"{rec['mae'][1]:>{w}.3f}{'' if ratio is None else f'{ratio:.3f}':>8}"
        )
    for rec in out.get("households") or []:  # a release with a household run
        n = ", ".join("-" if x is None else f"{x:,}" for x in rec["households"])
        print(f"households {rec['geolevel']}: true {rec['households_true']:,}; released {n}")
    print(f"wrote {args.html}" + (f" and {args.json}" if args.json else ""))
    return 0
