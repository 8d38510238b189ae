"""``censusdp demo``: the whole pipeline on built-in data, with a printed summary."""

from __future__ import annotations

import argparse
from pathlib import Path

from censusdp.cli._common import (
    add_command,
    add_json_output,
    add_seed,
    add_workers,
    announce_randomness,
    finish,
    output_option,
)
from censusdp.progress import printer as progress_printer


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``demo`` sub-command."""
    p = add_command(
        subparsers,
        "demo",
        help="generate a small state, release it with the 2020 budget, report accuracy",
    )
    output_option(
        p.add_argument("--out", default="censusdp-demo", metavar="DIR", help="output directory"),
        "dir",
    )
    p.add_argument("--state", default="VT", help="state (postal code or FIPS), default VT")
    p.add_argument(
        "--scale",
        type=float,
        default=0.05,
        help="keep a random fraction of the state's tracts (the rest, and counties left "
        "with none, are absent)",
    )
    add_seed(p, default=2020, help="seed of the synthetic state (the release itself is secure)")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a censusdp output at DIR (an earlier demo's is replaced anyway: it "
        "holds built-in data only, and nothing the demo did not write)",
    )
    add_workers(p)
    add_json_output(p)
    p.set_defaults(func=_demo, replaces_own="demo")


def _demo(args: argparse.Namespace) -> int:
    from censusdp.demo import run_demo
    from censusdp.io.output_rules import is_output_of

    announce_randomness(None, what="release noise")
    s = run_demo(
        args.out,
        state=args.state,
        scale=args.scale,
        seed=args.seed,
        workers=args.workers,
        progress=progress_printer(args.quiet),
        overwrite=args.overwrite or is_output_of(args.out, "demo"),
    )
    m = s.manifest
    out = Path(args.out)  # as the user named it, not where it lies on this machine
    lines = [f"\ncensusdp demo: {args.state} (scale {args.scale}), seed {args.seed}"]
    if args.scale < 1:
        lines.append(
            f"  (a random {args.scale:.0%} of the state's tracts, not all of it: the other "
            "tracts, and any county left with none, are in no output)"
        )
    lines.append(f"  input   {out / 'cef'}: {s.persons:,} persons, {s.units:,} units")
    lines.append("  geounits " + ", ".join(f"{k} {v:,}" for k, v in s.blocks_by_level.items()))
    if s.gq_by_type:
        lines.append(
            "  group quarters persons " + ", ".join(f"{k}: {v:,}" for k, v in s.gq_by_type.items())
        )
    lines.append(
        f"  release {out / 'run'}: rho {m['rho']:.4f} (persons + units), "
        f"epsilon {m['epsilon']:.2f} at delta {m['delta']:g}; validation "
        f"{'passed' if m['validation']['ok'] else 'FAILED'}; {m['timings']['total']:.1f}s"
    )
    lines.append(
        "\n  accuracy of the published tables (truth known because the data are synthetic)"
    )
    lines.append(
        f"  {'geolevel':<11}{'places':>8}{'mean pop':>11}{'MAE total':>11}{'MAE cell':>10}"
        f"{'accuracy':>10}"
    )
    for a in s.accuracy:
        lines.append(
            f"  {a['geolevel']:<11}{a['units']:>8,}{a['mean_population']:>11.1f}"
            f"{a['total_mae']:>11.2f}{a['race_hispanic_cell_mae']:>10.3f}"
            f"{a['race_hispanic_tvd']:>10.3f}"
        )
    lines.append(
        "  (accuracy = 1 - TVD of the Hispanic x race cells, TVD = L1/(2 POP) of JASON JSR-19-2F\n"
        "   sec. 6.1: 1 means every count exact, 0.98 means 2% of people in a wrong cell or place)"
    )
    spine = m.get("spine")
    if isinstance(spine, dict) and spine.get("kind") == "optimized":
        lines.append(
            "  (released on the production spine: its optimized block groups are measured, the "
            "published\n   block groups are sums of blocks, hence their larger error)"
        )
    if s.report is not None:
        lines.append(f"\n  report: {out / s.report.name}")
    record = {
        "out": str(s.out_dir),
        "state": args.state,
        "scale": args.scale,
        "seed": args.seed,
        "persons": s.persons,
        "units": s.units,
        "geounits": s.blocks_by_level,
        "release": {
            "dir": str(s.out_dir / "run"),
            "rho": m["rho"],
            "epsilon": m["epsilon"],
            "delta": m["delta"],
            "valid": bool(m["validation"]["ok"]),
        },
        "accuracy": s.accuracy,
        "report": None if s.report is None else str(s.report),
    }
    finish(args, "\n".join(lines), record)
    return 0 if m["validation"]["ok"] else 1
