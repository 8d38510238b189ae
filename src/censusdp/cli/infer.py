"""``censusdp infer``: inference from a release's noisy measurements.

Two forms share the command (docs/inference.md):

* ``censusdp infer RUN --out DIR``: GLS estimates with standard deviations and integer
  90%/95% intervals of every published cell at every geolevel
  (:func:`censusdp.infer.release.infer_release`).
* ``censusdp infer posterior --n N --noisy X --noise LAW (--scale B | --rho R |
  --epsilon E)``: the mechanism-aware posterior of a proportion
  (:func:`censusdp.infer.posterior.infer_proportion`).

The positional argument selects the form (``posterior`` or a release directory); one
parser holds both forms' options in two groups, so options may come in any order, and
an option of the other form is an error.
"""

from __future__ import annotations

import argparse
import os
import sys

from censusdp.cli._common import (
    add_executor,
    add_json_output,
    add_release,
    emit_json,
    input_option,
    output_option,
)
from censusdp.progress import printer as progress_printer

_RELEASE_DEFAULTS = {
    "out": None,
    "workers": 1,
    "executor": "auto",
    "spark_master": None,
    "no_zero_constraints": False,
    "geography": None,
    "format": "parquet,csv",
    "simulations": 0,
    "calibration_simulations": 0,
    "amc_truth": "rough",
    "overwrite": False,
}
_POSTERIOR_DEFAULTS = {
    "n": None,
    "noisy": None,
    "noise": None,
    "scale": None,
    "rho": None,
    "epsilon": None,
    "delta": "1e-10",
    "prior_a": 1.0,
    "prior_b": 1.0,
    "method": "exact",
    "draws": 20_000,
    "json": None,
    "plot": None,
}


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``infer`` sub-command (both forms; options may come in any order)."""
    p = subparsers.add_parser(
        "infer",
        help="GLS estimates and intervals from a release; posterior of a proportion",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        usage=(
            "censusdp infer RUN --out DIR [release options]\n"
            "       censusdp infer posterior --n N --noisy X --noise LAW "
            "(--scale B | --rho R | --epsilon E) [posterior options]"
        ),
        description=(
            "censusdp infer RUN --out DIR: GLS (best linear unbiased) estimates of every "
            "published cell (total, P1-P5, H1) at every geolevel from RUN's noisy "
            "measurements, invariants and manifest only: a bottom-up pass pools children into "
            "parents, a top-down pass passes each parent's refined estimate back. Writes "
            "DIR/estimates.parquet (geolevel, geocode, query, estimate, sd, ci90_low, "
            "ci90_high, ci95_low, ci95_high) for the geounits measured, DIR/margins.parquet and "
            "margins.csv (long form: GEOID, SUMLEV, NAME, geolevel, table, variable, value, "
            "moe90, moe95, gls_estimate, gls_sd, gls_moe90, gls_moe95, intervals) for every "
            "published geounit, joining tables/ by GEOID, and with --geography PLAN "
            "DIR/districts.* for the plan's districts; DIR/manifest.json. "
            "censusdp infer posterior: the posterior of theta, the proportion of the n people "
            "of a subgroup, from a noisy count X = k + Z with the exact likelihood of the "
            "release mechanism summed over the unknown true count k = 0..n (Gong 2022), a "
            "Beta(a, b) prior, and the naive analysis that ignores the noise; several "
            "comma-separated --n/--noisy values share one theta."
        ),
    )
    add_release(p, help="release directory written by 'censusdp run', or 'posterior'")
    _add_release_options(p)
    _add_posterior_options(p)
    p.set_defaults(func=_infer)


def _add_release_options(parser: argparse.ArgumentParser) -> None:
    """Options of ``infer RUN --out DIR`` (GLS from a release)."""
    g = parser.add_argument_group("GLS from a release (censusdp infer RUN --out DIR)")
    output_option(g.add_argument("--out", metavar="DIR", help="output directory (required)"), "dir")
    add_executor(g, what="block-level tasks")
    input_option(
        g.add_argument(
            "--geography",
            metavar="PLAN",
            help="a plan: CSV (comma, pipe or tab; header optional) or Parquet mapping every "
            "block's GEOID to a district id (a block-assignment file); writes DIR/districts.* "
            "(published totals, GLS estimate, sd, 90%%/95%% margins and intervals per district)",
        )
    )
    g.add_argument(
        "--format",
        default="parquet,csv",
        help="formats of the long-form outputs margins.* and districts.* (comma-separated: "
        "parquet, csv; the blocks go to the CSV only when no Parquet is written: a state's "
        "block rows are gigabytes of text)",
    )
    g.add_argument(
        "--simulations",
        type=int,
        default=0,
        metavar="K",
        help="margins of the published counts (moe90, moe95) by K Approximate Monte Carlo "
        "re-releases of the release's microdata with its own plan, spine and estimator "
        "(each costs about one TopDown run; 0: none, the columns are null)",
    )
    g.add_argument(
        "--calibration-simulations",
        type=int,
        default=0,
        metavar="K2",
        help="second-generation re-releases (of the first replicate) that scale the AMC "
        "margins by how much one re-release shrinks the error (an iterated bootstrap; on "
        "generated Vermont the factor is about 1, so it is off by default; default 0: the "
        "plain AMC; needs --amc-truth release)",
    )
    g.add_argument(
        "--amc-truth",
        choices=("rough", "release"),
        default="rough",
        help="the plausible truth the --simulations re-release: rough (default: the "
        "release's block sizes and cells deconvolved by the law its own first K "
        "re-releases show, then re-released K more times: 2K in all) or release (its "
        "microdata as published, the Census Bureau's AMC: K re-releases, margins about "
        "20%% short at block groups and blocks)",
    )
    g.add_argument(
        "--no-zero-constraints",
        action="store_true",
        help="do not enter the zeros implied by the block invariants (no household "
        "population without housing units, no GQ population without a facility)",
    )
    g.add_argument(
        "--overwrite",
        action="store_true",
        help="replace DIR/estimates.parquet and DIR/manifest.json in a non-empty DIR "
        "(with 'posterior': replace the --plot file)",
    )


def _add_posterior_options(parser: argparse.ArgumentParser) -> None:
    """Options of ``infer posterior`` (a proportion from noisy counts)."""
    from censusdp.infer import NOISE_LAWS, POSTERIOR_METHODS

    q = parser.add_argument_group(
        "posterior of a proportion (censusdp infer posterior ...)",
        "Noise parameters: laplace and geometric take the scale b = 1/epsilon (--rho R "
        "means epsilon = sqrt(2R)); discrete-gaussian and gaussian take --scale sigma, "
        "--rho R meaning sigma^2 = 1/R (bounded neighbours, the 2020 production "
        "convention), or --epsilon E meaning the largest rho with epsilon(rho, --delta) <= E.",
    )
    q.add_argument("--n", help="size of the subgroup (or a comma-separated list)")
    q.add_argument("--noisy", help="released noisy count (or a comma-separated list)")
    q.add_argument("--noise", choices=NOISE_LAWS, help="noise law of the release")
    q.add_argument("--scale", help="b (laplace, geometric) or sigma (Gaussians)")
    q.add_argument("--rho", help="zCDP parameter of the count, e.g. 0.5")
    q.add_argument("--epsilon", help="epsilon of the count")
    q.add_argument("--delta", default="1e-10", help="delta for --epsilon with Gaussian laws")
    q.add_argument("--prior-a", type=float, default=1.0, help="Beta prior a")
    q.add_argument("--prior-b", type=float, default=1.0, help="Beta prior b")
    q.add_argument(
        "--method",
        choices=POSTERIOR_METHODS,
        default="exact",
        help="exact Beta mixture, ABC with the mechanism as kernel, or Gibbs MCMC",
    )
    q.add_argument("--draws", type=int, default=20_000, help="posterior draws (abc, mcmc)")
    q.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the samplers (abc, mcmc); with RUN, of the --simulations",
    )
    add_json_output(q)
    output_option(
        q.add_argument(
            "--plot",
            metavar="FILE.png",
            help="also draw the posterior and the naive one (refused if FILE exists, unless "
            "--overwrite)",
        )
    )


def _misused(args: argparse.Namespace, defaults: dict, form: str) -> None:
    from censusdp.errors import CensusDPError

    wrong = [k for k, v in defaults.items() if getattr(args, k) != v]
    if wrong:
        opts = ", ".join("--" + k.replace("_", "-") for k in wrong)
        raise CensusDPError(f"{opts} {'does' if len(wrong) == 1 else 'do'} not apply to {form}")


def _infer(args: argparse.Namespace) -> int:
    from censusdp.errors import CensusDPError

    if args.release == "posterior":
        release_only = {k: v for k, v in _RELEASE_DEFAULTS.items() if k != "overwrite"}
        _misused(args, release_only, "'infer posterior'")
        missing = [k for k in ("n", "noisy", "noise") if getattr(args, k) is None]
        if missing:
            raise CensusDPError("infer posterior needs " + ", ".join("--" + k for k in missing))
        return _posterior(args)
    _misused(args, _POSTERIOR_DEFAULTS, "'infer RUN' (they belong to 'infer posterior')")
    if args.out is None:
        raise CensusDPError("infer RUN needs --out DIR")
    return _release(args)


def _numbers(text: str, what: str, integer: bool) -> list:
    from censusdp.errors import CensusDPError

    out = []
    for part in text.split(","):
        try:
            v = float(part)
        except ValueError:
            raise CensusDPError(f"{what} must be numbers, got {part!r}") from None
        if integer:
            if v != int(v):
                raise CensusDPError(f"{what} must be integers, got {part!r}")
            v = int(v)
        out.append(v)
    return out


def _posterior(args: argparse.Namespace) -> int:
    from censusdp.errors import CensusDPError
    from censusdp.infer import BetaPrior, NoiseLaw, NoisyCount
    from censusdp.infer.report import PosteriorFigure, posterior_report

    ns = _numbers(args.n, "--n", integer=True)
    xs = _numbers(args.noisy, "--noisy", integer=False)
    if len(ns) != len(xs):
        raise CensusDPError(f"--n has {len(ns)} values but --noisy has {len(xs)}")
    law = NoiseLaw.from_args(
        args.noise, scale=args.scale, rho=args.rho, epsilon=args.epsilon, delta=args.delta
    )  # raises unless exactly one of --scale, --rho, --epsilon
    out = posterior_report(
        [NoisyCount(n, x) for n, x in zip(ns, xs, strict=True)],
        law,
        BetaPrior(args.prior_a, args.prior_b),
        method=args.method,
        draws=args.draws,
        seed=args.seed,
        figure=None if args.plot is None else PosteriorFigure(args.plot, args.overwrite),
    )
    if emit_json(out, args.json):
        return 0
    lo, hi = out["ci95"]
    nv = out["naive"]
    print(
        f"theta = proportion of the {sum(ns):,} people ({args.method}, {law.law}, "
        f"variance {law.variance:,.2f}, prior Beta({args.prior_a:g}, {args.prior_b:g}))\n"
        f"  posterior mean {out['mean']:.4f}, 95% interval [{lo:.4f}, {hi:.4f}]\n"
        f"  naive (noise ignored) mean {nv['mean']:.4f}, 95% interval "
        f"[{nv['ci95'][0]:.4f}, {nv['ci95'][1]:.4f}]"
        + (" (count clipped)" if nv["clipped"] else "")
    )
    if "true_count" in out:
        tc = out["true_count"]
        print(f"  true count: mean {tc['mean']:.2f}, 95% interval {tc['ci95']}")
    if "plot" in out:
        print(f"  figure: {out['plot']}")
    return 0


def _release(args: argparse.Namespace) -> int:
    from censusdp.infer.options import InferOptions, MarginOptions
    from censusdp.infer.release import infer_release
    from censusdp.release.options import Execution

    options = InferOptions(
        zero_constraints=not args.no_zero_constraints,
        margins=MarginOptions(
            geography=args.geography,
            formats=tuple(f.strip() for f in args.format.split(",") if f.strip()),
            simulations=args.simulations,
            seed=args.seed,
            calibration=args.calibration_simulations,
            truth=args.amc_truth,
        ),
    )
    execution = Execution(
        executor=args.executor,
        workers=args.workers,
        spark_master=args.spark_master,
        progress=progress_printer(args.quiet),
    )
    m = infer_release(
        args.release, args.out, options, execution, overwrite=args.overwrite, command=sys.argv
    )
    mg = m["margins"]
    print(
        f"wrote {m['rows']:,} GLS estimates for {sum(m['geounits'].values()):,} geounits to "
        f"{os.path.join(args.out, 'estimates.parquet')} and {mg['rows']:,} margins of published counts for "
        f"{sum(mg['geounits'].values()):,} published geounits"
        + (f" (districts: {mg['geounits'].get('District', 0):,})" if args.geography else "")
        + f" ({', '.join(mg['files'])}) in {m['timings']['total']:.1f}s"
    )
    skipped = m.get("not_estimated") or {}
    if skipped:  # a household run's lines: one line naming them and why
        print(f"{', '.join(skipped)} not estimated: {next(iter(skipped.values()))}")
    return 0
