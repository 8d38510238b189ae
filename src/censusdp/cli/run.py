"""``censusdp run``: produce a release (NMF, MDF, tables, manifest) from a CEF."""

from __future__ import annotations

import argparse
import sys
from pathlib import PurePath
from typing import Any

from censusdp.cli._common import (
    add_budget_arguments,
    add_cef_input,
    add_command,
    add_executor,
    add_json_output,
    add_output,
    add_seed,
    announce_randomness,
    finish,
    input_option,
    positive_int,
)
from censusdp.errors import ConfigError
from censusdp.progress import printer as progress_printer


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``run`` sub-command."""
    p = add_command(
        subparsers,
        "run",
        help="measure, estimate (TopDown) and write a release",
        description=(
            "Read DIR/persons.parquet and DIR/units.parquet, add exact DP noise to every "
            "query of the budget's strategy, estimate consistent integer histograms "
            "top-down, and write RUN/noisy_measurements.parquet, RUN/mdf_persons.parquet, "
            "RUN/mdf_units.parquet, RUN/mdf_persons.txt, RUN/mdf_units.txt, RUN/tables/ and "
            "RUN/manifest.json (the NMF, the MDF and the tables as directories of part "
            "files written by the tasks)."
        ),
    )
    src = p.add_mutually_exclusive_group(required=True)
    add_cef_input(src, required=False, help="the CEF directory (persons.parquet, units.parquet)")
    input_option(
        src.add_argument(
            "--from-measurements",
            metavar="RUN",
            help="re-estimate from RUN's noisy measurements and invariants (no confidential "
            "data); the budget is the one RUN's measurements spent",
        )
    )
    add_output(p, metavar="RUN", help="run directory to create")
    add_budget_arguments(p, default_preset="pl94-2020")
    p.add_argument(
        "--units-preset",
        default="auto",
        help="budget of the unit run: a preset name, 'none', or 'auto' (the preset named "
        "'<preset>-households' if it exists, a household run estimated before the persons, "
        "else '<preset>-units'); --rho/--epsilon set the total of both runs, split as the "
        "presets split it",
    )
    input_option(
        p.add_argument(
            "--h1-from",
            metavar="RELEASE",
            default=None,
            help="hold the DHC runs (--preset dhc-2020) to RELEASE, a censusdp P.L. 94 "
            "release of the same input with its housing-unit run, as production held its "
            "DHC to its P.L. 94 release: at every block households = its occupied units "
            "and vacant = housing units - occupied (h1), and every geounit's persons by "
            "HHGQ x voting age x Hispanic x CENRACE = its counts (pl94), so P1-P5 and H1 "
            "are its tables (its budget is not spent again; default: both from this "
            "run's noise); with --units-preset none the person run alone, production's "
            "person run, holds its persons",
        )
    )
    add_seed(
        p,
        default=None,
        help="reproducible, NON-SECURE noise from this seed (default: secure OS randomness)",
    )
    _add_estimation_options(p)
    add_executor(p)
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted run of --out (killed, crashed, lost its machine) "
        "from its finished steps: noisy measurements already written are reused, never "
        "drawn again, and estimated geolevels are kept; refused unless the input, budget, "
        "seed and options are those of the interrupted run (with none to continue, the "
        "run starts afresh)",
    )
    add_json_output(p)
    p.set_defaults(func=_run, before_outputs=_finished_release)


def _finished_release(args: argparse.Namespace) -> int | None:
    """``--resume`` of a release that is already finished: nothing to do, exit 0 (and
    never a hint at ``--overwrite``, which would replace the release); ``None``
    otherwise, so the run goes on. ``--json`` gets the release's manifest, as after a
    run (with ``--json -`` standard output holds it alone)."""
    from censusdp.io.output_rules import is_censusdp_output
    from censusdp.io.rundir import not_a_release, read_manifest

    if not args.resume or args.overwrite or args.from_measurements:
        return None
    if not is_censusdp_output(args.out) or not_a_release(args.out) is not None:
        return None
    text = (
        f"{args.out} is a finished release (complete and validated); there is nothing "
        f"to resume ('censusdp validate {args.out}' checks it again)"
    )
    finish(args, text, read_manifest(args.out) if args.json is not None else None)
    return 0


def _add_estimation_options(p: argparse.ArgumentParser) -> None:
    """The options of :class:`censusdp.release.options.ReleaseOptions` beside the seed."""
    from censusdp.release.topdown.split import DEFAULT_MAX_CHILDREN

    p.add_argument(
        "--postprocess",
        choices=("topdown", "bottomup", "none"),
        default="topdown",
        help="estimation: TopDown, blocks alone (bottom-up), or measurements only",
    )
    p.add_argument(
        "--fidelity",
        choices=("default", "production"),
        default="default",
        help="'production': every deliberate difference from the 2020 production system "
        "off at once (no root pooling, units independent of persons, no failsafe: an "
        "infeasible subproblem is an error, production's rounder, no family splitting, "
        "structural zeros in the NMF); 'default' keeps "
        "censusdp's improvements, each stated in the manifest's 'fidelity' entry",
    )
    p.add_argument(
        "--units",
        choices=("consistent", "independent"),
        default=None,
        help="housing-unit run: 'consistent' holds each block's occupied units between one "
        "(where household persons were released) and its household persons; "
        "'independent' estimates units alone, as 2020 production did (default: "
        "consistent; independent with --fidelity production)",
    )
    p.add_argument(
        "--spine",
        choices=("tabulation", "optimized"),
        default=None,
        help="geography measured and estimated on: 'optimized' (the 2020 production spine: "
        "AIAN / non-AIAN state parts, optimized block groups, from the input's aian_area / "
        "place block attributes; a geounit with a single child takes its budget share and "
        "the child is not measured) or 'tabulation' (state > county > tract > block group "
        "> block); default: the budget's ('optimized' for pl94-2020 when the input has the "
        "block attributes), else 'tabulation'. MDF and tables are always tabulated by "
        "geocode",
    )
    p.add_argument(
        "--method",
        choices=("auto", "activeset", "interior", "admm", "clarabel", "piqp"),
        default="auto",
        help="least-squares solver of the estimation ('piqp' is Clarabel on a family of "
        "more than 350,000 variables, where PIQP's setup can crash)",
    )
    p.add_argument(
        "--estimator",
        choices=("ls", "maxent", "auto"),
        default=None,
        help="estimate of each parent-with-children problem: 'ls' least squares "
        "(production); 'maxent' maximum entropy over the measured marginals, each at the "
        "resolution (e.g. age groups) whose estimated error under the public noise law is "
        "least (does not collapse at small epsilon); 'auto' least squares where every "
        "measured query is worth fitting in full, maxent elsewhere (default: 'auto' for "
        "the dhc-lite schema, 'ls' otherwise)",
    )
    p.add_argument(
        "--passes",
        choices=("production", "single"),
        default="production",
        help="'production' (default): estimate and round in production's query orderings "
        "where the schema has them (pl94, the DHC's persons and households); 'single': "
        "every measured query in one least-squares pass and one rounding (the DHC's "
        "household tables are more accurate so); not with --fidelity production",
    )
    p.add_argument(
        "--max-children",
        type=_max_children,
        default="auto",
        metavar="N",
        help="estimate a family with more than N children (a county's tracts, a block "
        "group's blocks) as a coarse problem over chunks of at most N children, then one "
        f"task per chunk, so no single task bounds the run ('none' never splits; default: "
        f"{DEFAULT_MAX_CHILDREN}, recorded in the manifest)",
    )


def _randomness_words(manifest: dict) -> str:
    """How the summary line states the release's randomness (a re-estimate's is that of
    the measurements it re-estimated, and says so)."""
    record = manifest.get("randomness")
    record = record if isinstance(record, dict) else {}
    seeded = record.get("mode") == "seeded" or manifest.get("seed") is not None
    words = "SEEDED (not secure)" if seeded else "secure randomness"
    parent = record.get("measured_by")
    if isinstance(parent, dict) and parent.get("run"):
        # the release by its directory name, not where it lay on the machine that ran it
        words += f" (of the measurements of {PurePath(str(parent['run'])).name})"
    return words


def _max_children(text: str) -> int | str | None:
    if text.strip().lower() in ("none", "auto"):
        return None if text.strip().lower() == "none" else "auto"
    return positive_int("--max-children")(text)


def _run(args: argparse.Namespace) -> int:
    from censusdp.io.budget_files import resolve_release_budget
    from censusdp.release.options import Execution, ReleaseOptions
    from censusdp.release.pipeline import reestimate, run_release

    budget = None
    chose_budget = any(getattr(args, k) is not None for k in ("preset", "config", "rho", "epsilon"))
    if not args.from_measurements or chose_budget or args.units_preset != "auto":
        budget = resolve_release_budget(
            preset=args.preset,
            config=args.config,
            rho=args.rho,
            epsilon=args.epsilon,
            units=args.units_preset,
            default_preset=args.default_preset,
        )
    chosen = _chosen_options(args)
    execution = Execution(
        executor=args.executor,
        workers=args.workers,
        spark_master=args.spark_master,
        progress=progress_printer(args.quiet),
    )
    if args.from_measurements:
        if args.resume:
            raise ConfigError("--resume continues a run from --input, not --from-measurements")
        if args.spine is not None:
            raise ConfigError(
                "--spine applies to a fresh run; a re-estimate uses the spine of its "
                "measurements (drop --spine)"
            )
        manifest = reestimate(
            args.from_measurements,
            args.out,
            ReleaseOptions(**chosen),
            execution,
            budget=budget,
            overwrite=args.overwrite,
            command=sys.argv,
        )
        # the noise is the measurements': as seeded or as secure as they were
        announce_randomness(
            manifest["seed"],
            what=f"noise (the measurements of {args.from_measurements})",
            option="seed",
        )
    else:
        announce_randomness(args.seed)
        manifest = run_release(
            args.input,
            args.out,
            budget,
            ReleaseOptions(seed=args.seed, spine=args.spine, **chosen),
            execution,
            overwrite=args.overwrite,
            resume=args.resume,
            command=sys.argv,
        )
    v = manifest.get("validation", {})
    text = (
        f"release written to {args.out}: {manifest.get('persons_released', 0):,} persons, "
        f"total rho={manifest['rho']:.4f}, epsilon={manifest['epsilon']:.3f} "
        f"(delta={manifest['delta']:.3g}, {manifest['persons']['neighbours']} neighbours), "
        f"{_randomness_words(manifest)}, "
        f"validation {'passed' if v.get('ok', True) else 'FAILED'}, "
        f"{manifest['timings']['total']:.1f}s"
    )
    scale = manifest.get("input_scale")
    if scale is not None:
        text += "\n" + _sample_note(scale)
    h1 = manifest.get("h1_source")
    if isinstance(h1, dict):
        held = []
        if "occupied" in h1:
            held.append(
                f"households to its {h1['occupied']:,} occupied, {h1['vacant']:,} vacant units"
            )
        if "persons" in h1:
            held.append(
                f"persons to its {h1['persons']:,} by HHGQ x voting age x Hispanic x CENRACE "
                "at every geounit (its P1-P5)"
            )
        text += (
            f"\nh1: held to the P.L. 94 release {PurePath(str(h1['release'])).name} "
            f"(manifest SHA-256 {str(h1['manifest_sha256'])[:16]}...): {'; '.join(held)}; "
            "its privacy loss was spent by that release, not by this one"
        )
    fidelity = manifest.get("fidelity")
    if isinstance(fidelity, dict):
        text += f"\nfidelity {fidelity['mode']}: " + "; ".join(
            f"{k.replace('_', ' ')} {w}" for k, w in fidelity["differences"].items()
        )
    finish(args, text, dict(manifest))
    return 0 if v.get("ok", True) else 1


def _chosen_options(args: argparse.Namespace) -> dict[str, Any]:
    """The release options the command line chose (:class:`ReleaseOptions` keywords but
    the seed and spine); the choices ``--fidelity production`` overrides are refused."""
    from censusdp.release.options import refuse_with_production

    chosen: dict[str, Any] = dict(
        postprocess=args.postprocess,
        method=args.method,
        estimator=args.estimator,
        fidelity=args.fidelity,
        passes=args.passes,
    )
    if args.units is not None:
        chosen["unit_consistency"] = args.units
    if args.h1_from is not None:
        chosen["h1_from"] = args.h1_from
    if args.max_children != "auto":
        chosen["max_children"] = args.max_children
    if args.fidelity == "production":
        refuse_with_production(
            units=args.units,
            max_children=None if args.max_children in ("auto", None) else args.max_children,
        )
    return chosen


def _sample_note(scale: float) -> str:
    """What a release of a sampled synthetic input covers, in words."""
    return (
        f"note: the input keeps a random {scale:.0%} of its state's tracts ('censusdp "
        "generate --scale'); the other tracts, and any county left with none, are in no "
        "table of this release"
    )
