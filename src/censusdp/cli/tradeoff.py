"""``censusdp tradeoff``: choosing epsilon (frontiers, the social optimum, the census sweep).

Sub-commands:

* ``rr``: the randomized-response frontier at one epsilon (Abowd & Schmutte App. B);
* ``choose``: the welfare-maximising epsilon where MRT = MRS, with a plot;
* ``census``: accuracy, re-identification and Bayesian risk of real releases over a
  grid of budgets, cached for ``censusdp explore``.
"""

from __future__ import annotations

import argparse
import math

from censusdp.cli._common import (
    add_cef_input,
    add_json_output,
    add_workers,
    announce_randomness,
    comma_list,
    emit_json,
    finish,
    input_option,
    output_option,
)
from censusdp.progress import printer as progress_printer

__all__ = ["register"]


def _ints(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"expected non-negative integers, got {text!r}")
    return values


def _range(text: str) -> tuple[float, float]:
    try:
        values = [float(x) for x in text.split(",")]
    except ValueError:
        values = []
    if len(values) != 2 or not 0 < values[0] < values[1] < math.inf:
        raise argparse.ArgumentTypeError(f"expected LO,HI with 0 < LO < HI, got {text!r}")
    return values[0], values[1]


def _add_population(parser: argparse.ArgumentParser, prefix: str) -> None:
    """``--n``, ``--pi``, ``--mu``: the randomized-response population."""
    parser.add_argument("--n", type=int, default=1, help=f"{prefix}population size N")
    parser.add_argument(
        "--pi", default="1/2", help=f"{prefix}population share with the sensitive trait"
    )
    parser.add_argument(
        "--mu", default="1/2", help=f"{prefix}probability of 'yes' to the innocuous question"
    )


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``tradeoff`` group and its sub-commands."""
    p = subparsers.add_parser(
        "tradeoff",
        help="choosing epsilon: privacy-accuracy frontiers, the social optimum, census sweep",
        description="Choosing the privacy-loss budget. Run 'censusdp tradeoff COMMAND --help'.",
    )
    sub = p.add_subparsers(dest="tradeoff_command", metavar="COMMAND")
    p.set_defaults(func=lambda _a: (p.print_help(), 2)[1])
    fmt = argparse.ArgumentDefaultsHelpFormatter

    _add_rr(sub, fmt)
    _add_choose(sub, fmt)
    _add_census(sub, fmt)


def _add_rr(sub: argparse._SubParsersAction, fmt: type[argparse.HelpFormatter]) -> None:
    """The ``rr`` sub-command."""
    rr = sub.add_parser(
        "rr",
        help="randomized-response frontier: I, dI/deps, d2I/deps2 at one epsilon",
        description=(
            "Abowd & Schmutte (2019), Online Appendix B: each respondent answers the "
            "sensitive question with probability q and an innocuous one otherwise; data "
            "quality I = Var[pi_hat(1)] - Var[pi_hat(q(eps))] (eqs. B-8, B-9, B-10), its "
            "slope dI/deps (B-11, B-12) and curvature. (The appendix writes q as rho; it is "
            "a probability, not the rho of zero-concentrated DP, and --json keeps the "
            "appendix's key.) --json prints N times the three quantities (I_times_N, "
            "dI_deps_times_N, d2I_deps2_times_N) and the values for population N."
        ),
        formatter_class=fmt,
    )
    rr.add_argument("--epsilon", required=True, help="privacy loss (> 0), e.g. 1 or 0.5")
    _add_population(rr, "")
    add_json_output(rr)
    rr.set_defaults(func=_rr)


def _add_choose(sub: argparse._SubParsersAction, fmt: type[argparse.HelpFormatter]) -> None:
    """The ``choose`` sub-command."""
    ch = sub.add_parser(
        "choose",
        help="the welfare-maximising epsilon (MRT = MRS), with the curve and optimum drawn",
        description=(
            "Social welfare SW = D(I) - C eps on a frontier I(eps) (randomized response, a "
            "census sweep, or the matrix mechanism's I = -(2/eps^2) Delta_A^2 ||Q A+||_F^2): "
            "linear D = B I "
            "(--accuracy-value B; Abowd & Schmutte eq. E-28) or the expected misallocation "
            "of funds distributed by population counts (--funds-per-person r). Prints the "
            "optimum where the frontier's slope (MRT) equals C / D'(I) (MRS)."
        ),
        formatter_class=fmt,
    )
    ch.add_argument(
        "--frontier",
        choices=("rr", "census", "matrix"),
        default="rr",
        help="randomized response (App. B), a measured census sweep, or the matrix "
        "mechanism (App. E; the Title I example of --areas school districts unless "
        "--matrices)",
    )
    ch.add_argument(
        "--privacy-cost", type=float, required=True, help="C: welfare lost per unit of epsilon"
    )
    pref = ch.add_mutually_exclusive_group(required=True)
    pref.add_argument("--accuracy-value", type=float, help="B: welfare per unit of accuracy I")
    pref.add_argument(
        "--funds-per-person", type=float, help="r: dollars distributed per counted person"
    )
    ch.add_argument(
        "--areas",
        type=int,
        default=None,
        help="G: areas funded (default: geounits of --geolevel, 1 for rr, the workload's "
        "rows for matrix; the Title I example's school districts, 10 if not given)",
    )
    ch.add_argument(
        "--strategy",
        choices=("identity", "hierarchical"),
        default=None,
        help="matrix: the Title I example measures each district (identity, the default) "
        "or each district and their total (hierarchical)",
    )
    input_option(
        ch.add_argument(
            "--matrices",
            default=None,
            metavar="FILE.json",
            help='matrix: {"workload": Q, "strategy": A} (lists of rows) instead of the '
            "Title I example",
        )
    )
    _add_population(ch, "rr: ")
    input_option(
        ch.add_argument("--results", default=None, metavar="RESULTS", help="census: results dir")
    )
    ch.add_argument(
        "--scenario",
        default="standard",
        choices=("standard", "no_block"),
        help="census: the allocation of the frontier, 'standard' or 'no_block' (no "
        "block-level release, its budget given to the levels above)",
    )
    ch.add_argument("--geolevel", default="County", help="census: geolevel of the accuracy")
    ch.add_argument("--measure", default="total_population", help="census: accuracy measure")
    ch.add_argument(
        "--range", type=_range, default=(0.01, 100.0), metavar="LO,HI", help="epsilons searched"
    )
    output_option(
        ch.add_argument("--plot", default=None, metavar="FILE.png", help="write the figure here")
    )
    ch.add_argument("--overwrite", action="store_true", help="replace an existing --plot")
    add_json_output(ch)
    ch.set_defaults(func=_choose)


def _add_census(sub: argparse._SubParsersAction, fmt: type[argparse.HelpFormatter]) -> None:
    """The ``census`` sub-command."""
    ce = sub.add_parser(
        "census",
        help="accuracy, re-identification and Bayesian risk over a grid of total budgets",
        description=(
            "For each total epsilon ((eps, delta)-DP of everything published) and seed, run "
            "releases on the engine and record MAE and TVD (total variation distance) by geolevel, the reconstruction and "
            "re-identification rates, and Kazan-Reiter risk, with and without a block-level "
            "release (JASON sec. 8). Writes RESULTS/results.json, runs.parquet, frontier.png, "
            "manifest.json and cache/ (an interrupted sweep resumes)."
        ),
        formatter_class=fmt,
    )
    add_cef_input(ce, help="CEF directory")
    output_option(
        ce.add_argument("--out", required=True, metavar="RESULTS", help="results directory"),
        "dir",
    )
    ce.add_argument(
        "--epsilons",
        type=comma_list(option="--epsilons"),
        default=[0.5, 1.0, 2.0, 4.0, 8.0, 16.0],
        metavar="E,E,...",
        help="total epsilons",
    )
    ce.add_argument("--seeds", type=_ints, default=[1], metavar="S,S,...", help="master seeds")
    ce.add_argument("--preset", default="pl94-2020", help="accuracy and risk budget preset")
    ce.add_argument(
        "--attack-preset",
        default="dhc-lite-demo",
        help="attacked release's preset (with sex and age); 'none' skips the attack",
    )
    ce.add_argument(
        "--scenarios",
        default="standard,no_block",
        help="comma-separated: standard, no_block",
    )
    ce.add_argument(
        "--two-level-risk",
        action="store_true",
        help="also the hierarchical Kazan-Reiter risk per unique person (slow below eps 4)",
    )
    add_workers(ce)
    ce.add_argument("--keep-runs", action="store_true", help="keep release dirs in RESULTS/runs")
    ce.add_argument("--overwrite", action="store_true", help="replace earlier outputs")
    add_json_output(ce)
    ce.set_defaults(func=_census)


def _rr(args: argparse.Namespace) -> int:
    from censusdp.tradeoff import rr_frontier

    point = rr_frontier(args.epsilon, pi=args.pi, n=args.n, mu=args.mu)
    d = point.as_dict()
    if emit_json(d, args.json):
        return 0
    print(
        f"randomized response at epsilon = {point.epsilon:g} "
        f"(pi = {point.pi:g}, mu = {point.mu:g}, N = {point.n})"
    )
    rows = (
        ("q(eps): P[sensitive question asked]", point.rho, "eq. B-10"),
        ("dq/deps", point.drho_deps, "eq. B-12"),
        ("Var[pi_hat(1)]  (no protection)", point.variance_no_privacy, "pi(1-pi)/N"),
        ("Var[pi_hat(q)]", point.variance, "eq. B-8"),
        ("data quality I", point.quality, "eq. B-9"),
        ("slope dI/deps (MRT)", point.slope, "eqs. B-11, B-12"),
        ("curvature d2I/deps2", point.curvature, "< 0: diminishing returns"),
    )
    for label, value, ref in rows:
        print(f"  {label:<37}{value:>16.8g}   {ref}")
    print(
        f"  per respondent: N*I = {d['I_times_N']:.8g}, N*dI/deps = {d['dI_deps_times_N']:.8g}, "
        f"N*d2I/deps2 = {d['d2I_deps2_times_N']:.8g}"
    )
    return 0


def _choose(args: argparse.Namespace) -> int:
    from censusdp.tradeoff import ChooseOptions, choose_epsilon

    options = ChooseOptions(
        frontier=args.frontier,
        privacy_cost=args.privacy_cost,
        accuracy_value=args.accuracy_value,
        funds_per_person=args.funds_per_person,
        areas=args.areas,
        pi=args.pi,
        n=args.n,
        mu=args.mu,
        results=args.results,
        scenario=args.scenario,
        geolevel=args.geolevel,
        measure=args.measure,
        search_range=args.range,
        strategy=args.strategy,
        matrices=args.matrices,
    )
    out = choose_epsilon(options, plot=args.plot, overwrite=args.overwrite)
    if emit_json(out, args.json):
        return 0
    o = out["optimum"]
    where = "MRT = MRS" if o["interior"] else "at the end of the search range (no crossing)"
    print(f"frontier: {out['frontier']['label']}")
    fr = out["frontier"]
    if fr["kind"] == "matrix":
        what = f"Title I example, {fr['strategy']} strategy" if fr["example"] else fr["matrices"]
        print(
            f"  {what}: {fr['workload_shape'][0]} workload queries, {fr['strategy_shape'][0]} "
            f"measured, L1 sensitivity {fr['sensitivity_l1']:g}, "
            f"Delta_A^2 ||Q A+||_F^2 = {fr['scale']:.6g}"
        )
    print(f"preferences: {out['preferences']}")
    print(f"optimal epsilon {o['epsilon']:.6g} ({where})")
    print(f"  accuracy I there {o['I']:.6g}; MRT {o['mrt']:.6g}, MRS {o['mrs']:.6g}")
    print(f"  social welfare {o['welfare']:.6g}")
    if "expected_misallocation" in o:
        print(f"  expected misallocation {o['expected_misallocation']:.6g}")
    if "plot" in out:
        print(f"wrote {out['plot']}")
    return 0


def _census(args: argparse.Namespace) -> int:
    from censusdp.release.options import Execution
    from censusdp.tradeoff.census import CensusTradeoffOptions, census_tradeoff

    emit = progress_printer(args.quiet)
    seeds = ",".join(str(s) for s in args.seeds)
    announce_randomness(seeds, what="tradeoff releases", release=False, option="--seeds")
    attack = None if args.attack_preset.lower() == "none" else args.attack_preset
    options = CensusTradeoffOptions(
        epsilons=args.epsilons,
        seeds=args.seeds,
        preset=args.preset,
        attack_preset=attack,
        scenarios=[s.strip() for s in args.scenarios.split(",") if s.strip()],
        two_level_risk=args.two_level_risk,
    )
    result = census_tradeoff(
        args.input,
        args.out,
        options,
        execution=Execution(workers=args.workers, progress=emit),
        keep_runs=args.keep_runs,
        overwrite=args.overwrite,
    )
    lines = [f"{'scenario':<10}{'epsilon':>9}{'MAE BG':>10}{'re-id':>9}{'P[correct]':>12}"]
    for p in result["points"]:
        m = p["metrics"]

        def get(key: str, m: dict = m) -> float:
            return m[key]["mean"] if key in m else math.nan

        lines.append(
            f"{p['scenario']:<10}{p['epsilon']:>9g}"
            f"{get('accuracy.total_population.BlockGroup.mae'):>10.3f}"
            f"{get('reid.confirmed_share'):>9.3f}{get('risk.p0.5.correct_decision'):>12.4f}"
        )
    lines.append(f"wrote {args.out}/results.json, runs.parquet, frontier.png")
    finish(args, "\n".join(lines), result)
    return 0
