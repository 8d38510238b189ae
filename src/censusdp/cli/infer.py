"""``censusdp infer``: inference from a release's noisy measurements.

Two forms share the command (the contract in DESIGN.md):

* ``censusdp infer RUN --out DIR``: GLS estimates with standard deviations and integer
  90%/95% intervals of every published cell at every geolevel
  (:func:`censusdp.infer.release.infer_release`).
* ``censusdp infer posterior --n N --noisy X --noise LAW (--scale B | --rho R |
  --epsilon E)``: the mechanism-aware posterior of a proportion
  (:func:`censusdp.infer.posterior.infer_proportion`).

The first word after ``infer`` selects the form, so the two parsers are separate and
this module dispatches between them.
"""

from __future__ import annotations

import argparse
import json
import sys

from censusdp.cli._common import progress_printer

_FORMATTER = argparse.ArgumentDefaultsHelpFormatter


def _release_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="censusdp infer",
        formatter_class=_FORMATTER,
        description=(
            "GLS (best linear unbiased) estimates of every published cell (total, P1-P5, H1) "
            "at every geolevel from RUN's noisy measurements, invariants and manifest only: "
            "a bottom-up pass pools children into parents, a top-down pass passes each "
            "parent's refined estimate back. Writes DIR/estimates.parquet (geolevel, geocode, "
            "query, estimate, sd, ci90_low, ci90_high, ci95_low, ci95_high) and "
            "DIR/manifest.json. For a proportion from one noisy count see "
            "'censusdp infer posterior --help'."
        ),
    )
    p.add_argument("run", metavar="RUN", help="release directory written by 'censusdp run'")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory")
    p.add_argument(
        "--workers", type=int, default=1, help="worker processes for the block-level tasks"
    )
    p.add_argument(
        "--executor",
        choices=("auto", "inprocess", "pool", "spark"),
        default="auto",
        help="where the block-level tasks run; the output does not depend on it",
    )
    p.add_argument("--spark-master", default=None, metavar="URL", help="Spark master URL")
    p.add_argument(
        "--no-zero-constraints",
        action="store_true",
        help="do not enter the zeros implied by the block invariants (no household "
        "population without housing units, no GQ population without a facility)",
    )
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace DIR/estimates.parquet and DIR/manifest.json in a non-empty DIR",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def _posterior_parser() -> argparse.ArgumentParser:
    from censusdp.infer import NOISE_LAWS, POSTERIOR_METHODS

    p = argparse.ArgumentParser(
        prog="censusdp infer posterior",
        formatter_class=_FORMATTER,
        description=(
            "Posterior of theta, the proportion of the n people of a subgroup, from a noisy "
            "count X = k + Z with the exact likelihood of the release mechanism summed over "
            "the unknown true count k = 0..n (Gong 2022), a Beta(a, b) prior, and the naive "
            "analysis that ignores the noise. Several comma-separated --n/--noisy values share "
            "one theta. Noise parameters: laplace and geometric take the scale b = 1/epsilon "
            "(--rho R means epsilon = sqrt(2R)); discrete-gaussian and gaussian take "
            "--scale sigma, --rho R meaning sigma^2 = 1/R (bounded neighbours, the 2020 "
            "production convention), or --epsilon E meaning the largest rho with "
            "epsilon(rho, --delta) <= E."
        ),
    )
    p.add_argument("--n", required=True, help="size of the subgroup (or a comma-separated list)")
    p.add_argument(
        "--noisy", required=True, help="released noisy count (or a comma-separated list)"
    )
    p.add_argument("--noise", required=True, choices=NOISE_LAWS, help="noise law of the release")
    amount = p.add_mutually_exclusive_group(required=True)
    amount.add_argument("--scale", default=None, help="b (laplace, geometric) or sigma")
    amount.add_argument("--rho", default=None, help="zCDP parameter of the count, e.g. 0.5")
    amount.add_argument("--epsilon", default=None, help="epsilon of the count")
    p.add_argument("--delta", default="1e-10", help="delta for --epsilon with Gaussian laws")
    p.add_argument("--prior-a", type=float, default=1.0, help="Beta prior a")
    p.add_argument("--prior-b", type=float, default=1.0, help="Beta prior b")
    p.add_argument(
        "--method",
        choices=POSTERIOR_METHODS,
        default="exact",
        help="exact Beta mixture, ABC with the mechanism as kernel, or Gibbs MCMC",
    )
    p.add_argument("--draws", type=int, default=20_000, help="posterior draws (abc, mcmc)")
    p.add_argument("--seed", type=int, default=0, help="seed of the samplers (abc, mcmc)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``infer`` sub-command."""
    p = subparsers.add_parser(
        "infer",
        help="GLS estimates and intervals from a release; posterior of a proportion",
        add_help=False,
        usage=(
            "censusdp infer RUN --out DIR [options]\n"
            "       censusdp infer posterior --n N --noisy X --noise LAW "
            "(--scale B | --rho R | --epsilon E) [options]"
        ),
    )
    p.add_argument("argv", nargs=argparse.REMAINDER)
    p.set_defaults(func=_infer)


def _infer(args: argparse.Namespace) -> int:
    argv = list(args.argv)
    if not argv or argv[0] in ("-h", "--help"):
        _release_parser().print_help()
        print()
        _posterior_parser().print_help()
        return 0 if argv else 2
    if argv[0] == "posterior":
        return _posterior(_posterior_parser().parse_args(argv[1:]))
    return _release(_release_parser().parse_args(argv))


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
    from censusdp.infer import BetaPrior, NoiseLaw, NoisyCount, infer_proportion

    ns = _numbers(args.n, "--n", integer=True)
    xs = _numbers(args.noisy, "--noisy", integer=False)
    if len(ns) != len(xs):
        raise CensusDPError(f"--n has {len(ns)} values but --noisy has {len(xs)}")
    law = NoiseLaw.from_args(
        args.noise, scale=args.scale, rho=args.rho, epsilon=args.epsilon, delta=args.delta
    )
    out = infer_proportion(
        [NoisyCount(n, x) for n, x in zip(ns, xs, strict=True)],
        law,
        BetaPrior(args.prior_a, args.prior_b),
        method=args.method,
        draws=args.draws,
        seed=args.seed,
    )
    if args.json:
        print(json.dumps(out, indent=2, allow_nan=False))
        return 0
    lo, hi = out["ci95"]
    nv = out["naive"]
    print(
        f"theta = proportion of the {sum(ns):,} people ({args.method}, {law.law}, "
        f"variance {law.variance:.4g}, prior Beta({args.prior_a:g}, {args.prior_b:g}))\n"
        f"  posterior mean {out['mean']:.4f}, 95% interval [{lo:.4f}, {hi:.4f}]\n"
        f"  naive (noise ignored) mean {nv['mean']:.4f}, 95% interval "
        f"[{nv['ci95'][0]:.4f}, {nv['ci95'][1]:.4f}]"
        + (" (count clipped)" if nv["clipped"] else "")
    )
    if "true_count" in out:
        tc = out["true_count"]
        print(f"  true count: mean {tc['mean']:.2f}, 95% interval {tc['ci95']}")
    return 0


def _release(args: argparse.Namespace) -> int:
    from censusdp.infer.release import infer_release

    m = infer_release(
        args.run,
        args.out,
        overwrite=args.overwrite,
        workers=args.workers,
        executor=args.executor,
        spark_master=args.spark_master,
        zero_constraints=not args.no_zero_constraints,
        progress=progress_printer(args.quiet),
        command=sys.argv,
    )
    print(
        f"wrote {m['rows']:,} GLS estimates for {sum(m['geounits'].values()):,} geounits to "
        f"{args.out}/estimates.parquet in {m['timings']['total']:.1f}s"
    )
    return 0
