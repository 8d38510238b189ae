"""``censusdp explore``: the interactive page over a ``censusdp tradeoff census`` result."""

from __future__ import annotations

import argparse

from censusdp.cli._common import add_json_output, add_page_output, finish, input_option

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``explore`` sub-command."""
    p = subparsers.add_parser(
        "explore",
        help="self-contained interactive HTML page over a 'tradeoff census' result",
        description=(
            "Write one HTML file (inline JavaScript and CSS, no network) with sliders for the "
            "total epsilon, the allocation (with or without a block-level release), the "
            "geography and the prices of the social choice, and linked plots of accuracy, "
            "re-identification and Bayesian risk against epsilon, with the optimum marked."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    input_option(
        p.add_argument("results", metavar="RESULTS", help="output directory of 'tradeoff census'")
    )
    add_page_output(p, metavar="FILE.html", help="the page to write")
    add_json_output(p)
    p.add_argument("--overwrite", action="store_true", help="replace an existing --html/--json")
    p.set_defaults(func=_explore)


def _explore(args: argparse.Namespace) -> int:
    from censusdp.tradeoff.explore import write_explorer

    info = write_explorer(args.results, args.html, overwrite=args.overwrite)
    opt = info["python_optimum"]
    lines = [f"wrote {info['out']} ({info['bytes']:,} bytes, {info['points']} measured points)"]
    if opt is not None:
        lines.append(
            f"optimum at the default prices ({opt['level']}): epsilon {opt['epsilon']:.4g}"
            + ("" if opt["interior"] else " (at the edge of the range)")
        )
    finish(args, "\n".join(lines), info)
    return 0
