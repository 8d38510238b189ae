"""``censusdp evaluate``: accuracy of a release against the truth it was made from."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from censusdp.cli._common import (
    add_cef_input,
    add_command,
    add_json_output,
    add_page_output,
    add_release,
    add_seed,
    add_workers,
    announce_randomness,
    comma_list,
    emit_json,
    finish,
    positive_int,
)
from censusdp.errors import ConfigError
from censusdp.progress import printer as progress_printer


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``evaluate`` sub-command."""
    p = add_command(
        subparsers,
        "evaluate",
        help="accuracy of a release vs the truth: errors by place and table, error bars, "
        "HTML report",
        description=(
            "Compare RUN (MDF, tables, noisy measurements) with the CEF in DIR: accuracy "
            "(1 - TVD, the total variation distance), MAE, RMSE and bias per geolevel and true-count bin for total population, P1-P5, H1, "
            "sex by age (P12, PCT12) where the release has age, a household run's tables "
            "and the detailed histogram; largest errors; 100%-occupancy and 100%-under-18 "
            "shares; random districts built from blocks (as school or voting districts are); invariants re-checked; the NMF's stated "
            "noise checked; with --trials K, empirical error bars from K reruns. Without "
            "--input: the expected errors of the released counts (simulated from the public "
            "noise law) and of the GLS estimates and raw measurements (closed form), from "
            "the release alone."
        ),
    )
    add_cef_input(
        p,
        required=False,
        help="the CEF the release was made from (persons/units.parquet); without it, "
        "expected errors from RUN alone",
    )
    add_release(p, help="the release directory to evaluate")
    add_json_output(p)
    add_page_output(p, required=False)
    p.add_argument(
        "--trials",
        type=positive_int("--trials"),
        default=None,
        metavar="K",
        help="rerun the release mechanism K times on DIR (budget from RUN's manifest) for error bars",
    )
    p.add_argument(
        "--trial-seed", type=int, default=0, help="master seed of the reruns (default 0)"
    )
    p.add_argument(
        "--simulations",
        type=positive_int("--simulations"),
        default=None,
        metavar="K",
        help="simulated releases behind the errors expected from RUN alone (default without "
        "--input: 10; with --input: none unless given, then shown next to the measured ones)",
    )
    add_workers(p)
    p.add_argument(
        "--district-targets",
        type=comma_list(int, option="--district-targets"),
        default=None,
        metavar="N,N,...",
        help="target populations of the random districts (default 500,2000,10000,50000)",
    )
    p.add_argument(
        "--district-draws",
        type=positive_int("--district-draws"),
        default=5,
        help="random district maps per target",
    )
    add_seed(
        p, default=0, help="seed of the random districts (without --input: of the simulations)"
    )
    p.add_argument("--overwrite", action="store_true", help="replace existing --json/--html files")
    p.add_argument(
        "--allow-invalid",
        action="store_true",
        help="evaluate a release that fails 'censusdp validate' (broken or hand-made releases; "
        "the failed checks are recorded)",
    )
    p.set_defaults(func=_evaluate)


def _evaluate(args: argparse.Namespace) -> int:
    from censusdp.evaluate import DEFAULT_DISTRICT_TARGETS, EvaluateOptions, evaluate
    from censusdp.release.options import Execution

    if args.trials:
        announce_randomness(args.trial_seed, what="evaluation reruns", release=False)
    emit = progress_printer(args.quiet)
    if args.input is None:
        return _expected(args, emit)
    options = EvaluateOptions(
        trials=args.trials,
        trial_seed=args.trial_seed,
        district_targets=tuple(args.district_targets or DEFAULT_DISTRICT_TARGETS),
        district_draws=args.district_draws,
        seed=args.seed,
        simulations=args.simulations,
        allow_invalid=args.allow_invalid,
    )
    result = evaluate(
        args.input,
        args.release,
        options,
        execution=Execution(workers=args.workers, progress=emit),
        json_path=None if args.json == "-" else args.json,
        html_path=args.html,
    )
    if args.json == "-":
        emit_json(result, "-")
        return 0
    tp = result["metrics"]["total_population"]
    rh = result["metrics"]["hispanic*cenrace"]
    print(
        "accuracy = 1 - TVD, the total variation distance (1: every count exact; 0.98: 2% of people in a wrong cell); "
        "MAE: mean |published - true| population of a place"
    )
    print(
        f"{'geolevel':<11}{'places':>8}{'population MAE':>16}{'population accuracy':>21}"
        f"{'race x Hispanic accuracy':>26}"
    )
    for lv in result["geolevels"]:
        r = tp[lv]
        print(
            f"{lv:<11}{result['units'][lv]:>8,}{_fmt(r['mae'], 16, 3)}{_fmt(r['tvd'], 21, 4)}"
            f"{_fmt(rh[lv]['tvd'], 26, 4)}"
        )
    _print_households(result.get("households"), result["geolevels"])
    bad = [k for k, v in result["invariants"].items() if not v["ok"]]
    print("invariants: " + ("all hold" if not bad else "VIOLATED: " + ", ".join(bad)))
    _say_written(args)
    return 0


def _expected(args: argparse.Namespace, emit: Callable[[str], None] | None) -> int:
    """``evaluate RUN`` without ``--input``: expected errors from RUN alone."""
    from censusdp.evaluate.errorbars import DEFAULT_SIMULATIONS, expected_errors

    if args.trials:
        raise ConfigError("--trials reruns the mechanism on the truth: it needs --input DIR")
    result = expected_errors(
        args.release,
        simulations=args.simulations or DEFAULT_SIMULATIONS,
        seed=args.seed,
        workers=args.workers,
        html_path=args.html,
        progress=None if args.json == "-" else emit,
    )
    rel = result["released"]["by_level"]["total_population"]
    gls = (result.get("gls") or {}).get("by_level", {}).get("total_population", {})
    raw = (result.get("raw") or {}).get("by_level", {}).get("total_population", {})
    moe = (result["released"].get("margins") or {}).get("total_population", {})
    lines = [
        f"expected error of total population ({result['released']['simulations']} simulations)",
        "MAE: mean |published - true| population of a place; MC se: its Monte Carlo "
        "standard error; GLS sd / raw sd: standard deviation of the least-squares estimate "
        "from all noisy measurements / of the place's own noisy count; moe90: the published "
        "count's margin of error (the root mean square of censusdp infer's moe90)",
        f"{'geolevel':<11}{'places':>8}{'released MAE':>14}{'MC se':>8}{'9 in 10 within':>16}"
        f"{'GLS sd':>9}{'raw sd':>9}{'moe90':>9}",
    ]
    for lv in result["geolevels"]:
        r = rel[lv]
        lines.append(
            f"{lv:<11}{result['units'][lv]:>8,}{_fmt(r['mae'], 14, 2)}{_fmt(r['mae_mc_se'], 8, 2)}"
            f"{r['abs_q90']:>16,}{_fmt(gls.get(lv, {}).get('mean_sd'), 9, 2)}"
            f"{_fmt(raw.get(lv, {}).get('mean_sd'), 9, 2)}"
            f"{_fmt(moe.get(lv, {}).get('moe90'), 9, 2)}"
        )
    if result.get("gls", {}).get("available") is False:
        lines.append(f"GLS: not available ({result['gls']['reason']})")
    household = result["released"].get("household_run")
    if household:  # the household run's tables, re-released with the persons
        lines.append(
            f"{', '.join(household['tables'])}: error bars of the household run "
            f"({household['schema']}), re-released with the persons; the persons "
            f"{household['person_run']}"
        )
    held = result["released"].get("held_to_pl94_release")
    if held:  # counts every re-release holds to the same P.L. 94 release
        lines.append(held["note"])
    written = [p for p in (args.json, args.html) if p not in (None, "-")]
    if written:
        lines.append("wrote " + " and ".join(written))
    finish(args, "\n".join(lines), result)
    return 0


def _print_households(hh: dict | None, levels: list[str]) -> None:
    """The household run's lines (a release with one): households and their accuracy."""
    from censusdp.evaluate.households import size_and_type_tables

    if not hh:
        return
    if not hh["available"]:
        print(f"households: not compared ({hh['reason']})")
        return
    print(
        f"{'households':<11}{'true':>8}{'released':>10}{'MAE':>9}{'RMSE':>9}"
        f"{'size accuracy':>15}{'type accuracy':>15}{'100% occupied':>15}"
    )
    size, kind = size_and_type_tables(hh["schema"])
    for lv in levels:
        t, occ = hh["totals"][lv], hh["occupancy_100"][lv]
        full = f"{occ['released']['n_full']}/{occ['truth']['n_full']}"
        print(
            f"{lv:<11}{t['truth']:>8,}{t['released']:>10,}{_fmt(t['mae'], 9, 2)}"
            f"{_fmt(t['rmse'], 9, 2)}{_fmt(hh['tables'][size]['levels'][lv]['tvd'], 15, 4)}"
            f"{_fmt(hh['tables'][kind]['levels'][lv]['tvd'], 15, 4)}{full:>15}"
        )
    print("100% occupied: geounits released / true at 100% occupancy")


def _say_written(args: argparse.Namespace) -> None:
    """The files written (``--json`` and ``--html``, each optional)."""
    written = [p for p in (args.json, args.html) if p not in (None, "-")]
    if written:
        print("wrote " + " and ".join(written))


def _fmt(value: float | None, width: int, digits: int) -> str:
    """A right-aligned number, or ``n/a`` where the metric is undefined (no persons: TVD)."""
    return f"{'n/a':>{width}}" if value is None else f"{value:>{width}.{digits}f}"
