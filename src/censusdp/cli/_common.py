"""Argument helpers shared by the sub-commands: one name and one parser per concept.

Every command is made with :func:`add_command` (its help shows each option's default),
and takes its common options from here: ``--out`` with ``--overwrite``, ``--quiet`` and
``-v/--verbose``, ``--workers``, ``--seed``, ``--json PATH``, the CEF directory
(``--input``), and the budget (``--preset | --config``, ``--rho | --epsilon``), which
:func:`resolve_budget` turns into a :class:`~censusdp.privacy.budget.Budget` through the
library's one budget loader, :mod:`censusdp.io.budget_files` (``run`` and ``budget`` call
its :func:`~censusdp.io.budget_files.resolve_release_budget` for a whole release).
:func:`finalize` walks the finished parser so that every
command, including those whose parsers are made by hand, shows its defaults and takes
``--quiet`` and ``-v``; :func:`verbosity` turns those into the level
:func:`censusdp.progress.configure` prints at, and :func:`announce_randomness` states on
every run whether its noise is secure or seeded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from censusdp.privacy.budget import Budget

__all__ = [
    "Parser",
    "add_budget_arguments",
    "add_executor",
    "add_cef_input",
    "add_command",
    "add_json_output",
    "add_output",
    "add_page_output",
    "add_quiet",
    "add_release",
    "add_seed",
    "add_workers",
    "announce_randomness",
    "guard_outputs",
    "input_option",
    "output_option",
    "target_option",
    "comma_list",
    "emit_json",
    "finalize",
    "finish",
    "positive_int",
    "resolve_budget",
    "resolve_release",
    "verbosity",
]


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line (``--help`` shows the usage), and
    which refuses an argument that is not UTF-8 (a path of other bytes: Python passes
    them on as lone surrogates, which no file name censusdp writes or reads can hold)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        """:meth:`argparse.ArgumentParser.parse_known_args`, every value UTF-8."""
        ns, rest = super().parse_known_args(args, namespace)
        for action in self._actions:
            value = getattr(ns, action.dest, None)
            for v in value if isinstance(value, list) else [value]:
                if isinstance(v, str) and not v.isascii():
                    try:
                        v.encode("utf-8")
                    except UnicodeEncodeError:
                        name = "/".join(action.option_strings) or action.metavar or action.dest
                        self.error(f"argument {name}: {v!r} is not valid UTF-8")
        return ns, rest


class _HelpFormatter(argparse.HelpFormatter):
    """Shows every option's default (unless its help already states it)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        shown = not (default is None or default is False or default is argparse.SUPPRESS)
        if isinstance(action, argparse._CountAction) and default == 0:  # -v
            shown = False
        if "default" not in text and shown and action.option_strings:
            if isinstance(default, list | tuple):
                default = ",".join(str(v) for v in default) or "none"
            text += f" (default: {default})"
        # argparse %-formats help: escape a lone "%" ("100%"), keep "%%" and "%(default)s"
        return _LONE_PERCENT.sub(lambda m: "%%" if m.group(0) == "%" else m.group(0), text)


_LONE_PERCENT = re.compile(r"%%|%\(\w+\)[a-z]|%")


def add_command(
    subparsers: argparse._SubParsersAction, name: str, *, help: str, description: str | None = None
) -> argparse.ArgumentParser:
    """A sub-command parser whose ``--help`` shows defaults, with ``--quiet`` and ``-v``."""
    parser = subparsers.add_parser(
        name, help=help, description=description or help, formatter_class=_HelpFormatter
    )
    add_quiet(parser)
    return parser


def _subcommands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers of ``parser``'s sub-commands (one level)."""
    return [
        sub
        for action in parser._actions  # noqa: SLF001 - argparse keeps them only here
        if isinstance(action, argparse._SubParsersAction)
        for sub in dict.fromkeys(action.choices.values())
    ]


def finalize(parser: argparse.ArgumentParser) -> None:
    """Give every command below ``parser`` the shared habits.

    Each command (a parser without sub-commands) gets ``--quiet``, ``-v/--verbose`` and
    ``--debug`` (unless it has them), ``--overwrite`` if it writes an output path, and its own
    parser as ``args.command_parser`` (so that :func:`guard_outputs` finds its input
    and output options); every parser's help shows the defaults.
    """
    for sub in _subcommands(parser):
        sub.formatter_class = _HelpFormatter
        if _subcommands(sub):
            finalize(sub)
            continue
        add_quiet(sub)
        have = sub._option_string_actions  # noqa: SLF001 - the documented way to probe
        if "--debug" not in have:  # also after the command's name, not only before it
            sub.add_argument(
                "--debug",
                action="store_true",
                default=argparse.SUPPRESS,
                help="show the traceback of an error (for bug reports)",
            )
        writes = [a for a in sub._actions if getattr(a, ROLE, None) in _OUTPUT_ROLES]  # noqa: SLF001
        if writes and "--overwrite" not in have:
            names = "/".join(a.option_strings[0] for a in writes)
            sub.add_argument(
                "--overwrite", action="store_true", help=f"replace an existing {names}"
            )
        sub.set_defaults(command_parser=sub)


ROLE = "censusdp_role"
"""The attribute of an argparse action that says it names a path the command reads
(``"input"``), writes (``"output-dir"``, ``"output-file"``) or amends in place
(``"target"``: the release ``censusdp sign`` adds its signature to):
:func:`guard_outputs` protects every input and checks every output before the command
runs, and a test walks every parser so that no path option goes without a role."""

_OUTPUT_ROLES = ("output-dir", "output-file", "output-new")


def input_option(action: argparse.Action) -> argparse.Action:
    """Mark ``action`` as naming an input path (never written by the command)."""
    setattr(action, ROLE, "input")
    return action


def target_option(action: argparse.Action) -> argparse.Action:
    """Mark ``action`` as naming the directory the command exists to amend (``sign``):
    not protected as an input, and no other output may lie in it."""
    setattr(action, ROLE, "target")
    return action


def output_option(action: argparse.Action, kind: str = "file") -> argparse.Action:
    """Mark ``action`` as naming an output (``kind``: ``"dir"``, ``"file"``, or ``"new"``:
    files the command creates exclusively and never replaces, whatever ``--overwrite``
    says, such as a key)."""
    if kind not in ("dir", "file", "new"):
        raise ValueError(f"output kind must be 'dir', 'file' or 'new', got {kind!r}")
    setattr(action, ROLE, f"output-{kind}")
    return action


def guard_outputs(args: argparse.Namespace) -> contextlib.AbstractContextManager[None]:
    """Check every output path of the command against all its inputs and ``--overwrite``
    before any work, and return the context (:func:`censusdp.io.command_inputs.guarded_command`)
    in which the command runs: whatever it writes there is checked against the same
    inputs again when it is written.

    Raises:
        ConfigError: for the first output path that may not be written.
    """
    from censusdp.io.command_inputs import guarded_command
    from censusdp.io.output_rules import check_output_dir, check_output_file

    parser = getattr(args, "command_parser", None)
    actions = list(parser._actions) if parser is not None else []  # noqa: SLF001
    inputs: list[str] = []
    targets: list[str] = []
    outputs: list[tuple[str, str, str]] = []
    for action in actions:
        role = getattr(action, ROLE, None)
        value = getattr(args, action.dest, None)
        if role is None or value is None:
            continue
        values = value if isinstance(value, list) else [value]
        shown = action.option_strings[0] if action.option_strings else action.metavar
        for v in values:
            if role == "input":
                inputs.append(v)
            elif role == "target":
                targets.append(v)
            elif v != "-":
                outputs.append((role, str(shown), v))
    overwrite = bool(getattr(args, "overwrite", False))
    context = guarded_command(inputs, overwrite=overwrite)
    with guarded_command([*inputs, *targets], overwrite=overwrite):
        for role, shown, value in outputs:
            if role == "output-dir":
                check_output_dir(
                    value,
                    overwrite or _keeps_output(args, value),
                    option=shown,
                    resume=bool(getattr(args, "resume", False)),
                )
            else:  # a "new" file: the command refuses an existing one itself, saying why
                check_output_file(value, overwrite or role == "output-new", option=shown)
    return context


def _keeps_output(args: argparse.Namespace, value: str) -> bool:
    """Whether the command replaces the output ``value`` as ``--overwrite`` would (and by
    the same rules) without being told: it continues its existing output
    (``attack sweep --reuse-releases``), or the output is an earlier one of a command
    that makes it from built-in data alone (``demo``: ``args.replaces_own``)."""
    from censusdp.io.output_rules import is_output_of

    own = getattr(args, "replaces_own", None)
    return bool(getattr(args, "reuse_releases", False)) or (
        own is not None and is_output_of(value, own)
    )


def comma_list(
    convert: Callable[[str], Any] = float, *, option: str, positive: bool = True
) -> Callable[[str], list[Any]]:
    """An argparse type for ``A,B,C``: a non-empty list, each item converted (and > 0)."""

    def parse(text: str) -> list[Any]:
        try:
            values = [convert(x.strip()) for x in text.split(",") if x.strip()]
        except (ValueError, ArithmeticError):
            raise argparse.ArgumentTypeError(
                f"{option} must be a comma-separated list of numbers, got {text!r}"
            ) from None
        if not values:
            raise argparse.ArgumentTypeError(f"{option} needs at least one value, got {text!r}")
        if positive and any(not float(v) > 0 for v in values):
            raise argparse.ArgumentTypeError(f"{option} values must be positive, got {text!r}")
        return values

    return parse


def positive_int(option: str) -> Callable[[str], int]:
    """An argparse type for a whole number >= 1, naming ``option`` in its error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{option} must be a whole number, got {text!r}"
            ) from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"{option} must be at least 1, got {value}")
        return value

    return parse


def add_output(
    parser: argparse.ArgumentParser, *, metavar: str = "DIR", help: str = "output directory"
) -> None:
    """``--out`` (required, an output directory) and ``--overwrite``."""
    output_option(parser.add_argument("--out", required=True, metavar=metavar, help=help), "dir")
    parser.add_argument(
        "--overwrite", action="store_true", help=f"replace an existing {metavar} made by censusdp"
    )


def add_page_output(
    parser: argparse.ArgumentParser,
    *,
    metavar: str = "REPORT.html",
    help: str = "also write an HTML report",
    required: bool = True,
) -> None:
    """``--html FILE.html``: one page written (``--out`` is always a directory)."""
    output_option(
        parser.add_argument("--html", required=required, default=None, metavar=metavar, help=help)
    )


def add_quiet(parser: argparse.ArgumentParser) -> None:
    """``-q/--quiet`` (warnings only) and ``-v/--verbose`` (debug lines); idempotent."""
    have = parser._option_string_actions  # noqa: SLF001 - the documented way to probe
    if "--quiet" not in have:
        names = ("--quiet",) if "-q" in have else ("-q", "--quiet")
        parser.add_argument(
            *names,
            action="store_true",
            help="only warnings and errors on stderr (no progress lines or bars)",
        )
    if "--verbose" not in have:
        names = ("--verbose",) if "-v" in have else ("-v", "--verbose")
        parser.add_argument(
            *names,
            action="count",
            default=0,
            help="also debug lines on stderr (and the logs of Spark and py4j)",
        )


def verbosity(args: argparse.Namespace) -> int:
    """``-1`` for ``--quiet``, else the number of ``-v`` (0: progress and info lines)."""
    if getattr(args, "quiet", False):
        return -1
    return int(getattr(args, "verbose", 0) or 0)


def announce_randomness(
    seed: object | None, *, what: str = "noise", release: bool = True, option: str = "--seed"
) -> str:
    """State (on stderr, through the log, at INFO) whether a run's randomness is secure or
    seeded.

    ``release``: the noise protects published data; seeded noise of a release is stated
    as reproducible and NOT secure (and the release's own summary line and manifest
    say so too). ``--quiet`` hides the line, so that a mistake in the arguments is still
    reported as one line. Returns the line.
    """
    from censusdp.progress import logger

    if seed is None:
        line = f"{what}: secure randomness (operating-system entropy; not reproducible)"
        logger.info(line)
    elif release:
        line = (
            f"{what}: SEEDED with {option} {seed}: reproducible and NOT secure "
            "(for experiments, not for publication)"
        )
        logger.info(line)
    else:
        line = f"{what}: seeded with {option} {seed} (a reproducible experiment, not a release)"
        logger.info(line)
    return line


def add_cef_input(
    parser: argparse.ArgumentParser,
    *,
    required: bool = True,
    help: str = "the CEF directory (persons.parquet and units.parquet)",
) -> None:
    """``--input DIR``: the confidential input (CEF), one name in every command.

    ``--truth`` is accepted as an older spelling of the same option.
    """
    input_option(
        parser.add_argument(
            "--input",
            "--truth",
            dest="input",
            required=required,
            default=None,
            metavar="DIR",
            help=help,
        )
    )


def add_release(
    parser: argparse.ArgumentParser, *, help: str = "the release directory (made by 'censusdp run')"
) -> None:
    """The release a command reads: ``RUN``, the first positional argument.

    ``--release RUN``, an older spelling, is still accepted (not shown in ``--help``), so
    scripts written for it keep working; :func:`resolve_release` puts the one given in
    ``args.release``.
    """
    input_option(parser.add_argument("release", nargs="?", default=None, metavar="RUN", help=help))
    input_option(
        parser.add_argument(
            "--release",
            dest="release_option",
            default=None,
            metavar="RUN",
            help=argparse.SUPPRESS,  # an older spelling of RUN, kept for scripts
        )
    )


def resolve_release(args: argparse.Namespace) -> None:
    """Settle ``RUN`` / ``--release RUN`` (see :func:`add_release`) into ``args.release``.

    Raises:
        CensusDPError: when neither is given, or both are and name different directories.
    """
    if not hasattr(args, "release_option"):
        return
    from censusdp.errors import CensusDPError

    positional, option = args.release, args.release_option
    if positional is None and option is None:
        raise CensusDPError("the release directory is missing: give RUN or --release RUN")
    if positional is not None and option is not None and positional != option:
        raise CensusDPError(
            f"two release directories given: RUN {positional!r} and --release {option!r}"
        )
    args.release = positional if positional is not None else option


def add_workers(parser: argparse.ArgumentParser, *, default: int = 1) -> None:
    """``--workers K``: worker processes."""
    parser.add_argument(
        "--workers",
        type=positive_int("--workers"),
        default=default,
        metavar="K",
        help="worker processes",
    )


def add_executor(parser: Any, *, what: str = "tasks") -> None:
    """``--workers K``, ``--executor`` and ``--spark-master`` (parser or argument group)."""
    add_workers(parser)
    parser.add_argument(
        "--executor",
        choices=("auto", "inprocess", "pool", "spark"),
        default="auto",
        help=f"where {what} run: 'auto' (in-process for --workers 1, else a process pool), "
        "'inprocess', 'pool' or 'spark' (needs censusdp[spark] and Java 17); the output "
        "is byte-identical whichever is used",
    )
    parser.add_argument(
        "--spark-master",
        default=None,
        metavar="URL",
        help="Spark master URL for --executor spark (default local[*]; e.g. local[2], "
        "spark://host:7077, yarn, k8s://https://host:443)",
    )


def add_seed(parser: argparse.ArgumentParser, *, default: int | None = 0, help: str) -> None:
    """``--seed N`` with a command-specific meaning."""
    parser.add_argument("--seed", type=int, default=default, metavar="N", help=help)


def add_json_output(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    """``--json PATH``: write the machine-readable result to PATH (``-``: standard output)."""
    output_option(
        parser.add_argument(
            "--json",
            required=required,
            nargs=None if required else "?",
            const=None if required else "-",
            default=None,
            metavar="PATH",
            help="write the result as JSON to PATH ('-' or no PATH: standard output)",
        )
    )


def finish(args: argparse.Namespace, text: str, obj: Any) -> None:
    """Print ``text`` for a person and write ``obj`` to ``--json`` (if given).

    With ``--json -`` (or a bare ``--json``) standard output holds the JSON alone, so a
    script can parse it; the readable text is then left out.
    """
    path = getattr(args, "json", None)
    if path != "-":
        print(text)
    if obj is not None:
        emit_json(obj, path)


def emit_json(obj: Any, path: str | None) -> bool:
    """Write ``obj`` as strict JSON to ``path`` (``-``: stdout); nothing when ``None``.

    Returns whether the JSON went to stdout, where it must be the only output.
    """
    if path is None:
        return False
    from censusdp.io.atomic import strict_json

    text = json.dumps(strict_json(obj), indent=2, allow_nan=False, default=str) + "\n"
    if path == "-":
        sys.stdout.write(text)
        return True
    from censusdp.io.output_files import write_output_text

    write_output_text(text, Path(path), option="--json")
    return False


def add_budget_arguments(
    parser: argparse.ArgumentParser,
    *,
    default_preset: str | None,
    amounts: tuple[str, ...] = ("rho", "epsilon"),
) -> None:
    """``--preset | --config`` and ``--rho | --epsilon`` (those of ``amounts``)."""
    src = parser.add_mutually_exclusive_group()
    src.add_argument(
        "--preset", default=None, help=f"built-in budget preset (default: {default_preset})"
    )
    input_option(
        src.add_argument("--config", default=None, metavar="FILE.toml", help="budget config file")
    )
    amount = parser.add_mutually_exclusive_group()
    if "rho" in amounts:
        amount.add_argument(
            "--rho",
            default=None,
            help="total rho (zCDP) of everything released, e.g. 2.63 or (542/339)**2 as "
            "293764/114921 (default: the budget's own)",
        )
    if "epsilon" in amounts:
        amount.add_argument(
            "--epsilon",
            default=None,
            help="total epsilon of everything released, at the budget's delta (zCDP: the "
            "largest rho whose epsilon is at most this; default: the budget's own)",
        )
    parser.set_defaults(default_preset=default_preset)


def resolve_budget(args: argparse.Namespace) -> Budget:
    """The budget the arguments select (see :func:`censusdp.io.budget_files.resolve_budget`)."""
    from censusdp.io.budget_files import resolve_budget as resolve

    return resolve(
        preset=args.preset,
        config=args.config,
        rho=getattr(args, "rho", None),
        epsilon=getattr(args, "epsilon", None),
        default_preset=args.default_preset,
    )
