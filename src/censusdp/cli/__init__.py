"""The ``censusdp`` command line.

The CLI only parses arguments, calls one library function per command, and maps
errors to exit codes. Every failure is one line on stderr, never a traceback (``--debug``
shows it): exit 2 for a usage or configuration mistake, 1 for data that fails a check or
an operating-system error (a full disk, a missing permission), 130 when interrupted
(SIGINT or SIGTERM, after the staging directory of an unfinished output is removed; a
``run`` keeps its checkpointed steps for ``--resume`` instead, and says so, as it does
when it fails for a reason other than its input or options).
Each sub-command lives in its own module ``censusdp.cli.<name>`` exposing
``register(subparsers)``, which adds its parser and sets ``func`` to a callable taking
the parsed namespace and returning an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import signal
import sys
import threading
import traceback
from collections.abc import Sequence

from censusdp.cli._common import (
    Parser,
    finalize,
    guard_outputs,
    resolve_release,
    verbosity,
)
from censusdp.errors import CensusDPError
from censusdp.execution.base import prefer_single_thread_blas
from censusdp.progress import configure
from censusdp.version import __version__

__all__ = ["main"]

# Sub-command modules, in the order they are listed in ``censusdp --help``.
COMMAND_MODULES: tuple[str, ...] = (
    "attack",
    "budget",
    "compare",
    "demo",
    "design",
    "evaluate",
    "explore",
    "generate",
    "infer",
    "protect",
    "risk",
    "run",
    "sign",
    "sweep",
    "tradeoff",
    "validate",
)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every registered sub-command."""
    parser = Parser(
        prog="censusdp",
        description="An open Disclosure Avoidance System for hierarchical census counts.",
    )
    parser.add_argument("--version", action="version", version=f"censusdp {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show the traceback of an error (for bug reports)"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"censusdp.cli.{name}").register(subparsers)
    finalize(parser)
    return parser


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that staging directories are cleaned up."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated()


def _os_error(exc: OSError) -> str:
    """An operating-system error in one line: its reason and file; a failed copy of a
    directory (``shutil.Error``: one failure per file, a full disk fails them all) by
    its first failure and how many more there were."""
    failures = exc.args[0] if isinstance(exc, shutil.Error) and exc.args else None
    if isinstance(failures, list) and failures and len(failures[0]) == 3:
        src, dst, why = failures[0]
        more = f" (and {len(failures) - 1:,} more files)" if len(failures) > 1 else ""
        reason = (str(why).strip().splitlines() or ["failed"])[0]
        return f"copying {src} to {dst}: {reason}{more}"
    where = f" ({exc.filename})" if exc.filename else ""
    return f"{exc.strerror or _first_line(exc)}{where}"


def _first_line(exc: BaseException) -> str:
    """The error's one line, with what the library noted on its way out (a failed run's
    kept steps) after a semicolon."""
    text = str(exc).strip() or type(exc).__name__
    return "; ".join([text.splitlines()[0], *getattr(exc, "__notes__", ())])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``censusdp`` command; returns the exit code."""
    # One BLAS thread per process: the engine parallelises over tasks (--workers), and
    # multithreaded BLAS on small solves oversubscribes the cores (10x slower measured).
    prefer_single_thread_blas()
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    name = " ".join(
        x
        for x in (
            args.command,
            getattr(args, "attack_command", None),
            getattr(args, "design_command", None),
            getattr(args, "protect_command", None),
            getattr(args, "tradeoff_command", None),
        )
        if x
    )
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        with configure(verbosity(args)):
            resolve_release(args)
            # a command may find there is nothing to do before its outputs are checked
            # (``run --resume`` of a finished release)
            early = getattr(args, "before_outputs", None)
            if early is not None and (code := early(args)) is not None:
                return int(code)
            with guard_outputs(args):
                return int(args.func(args) or 0)
    except CensusDPError as exc:
        if args.debug:
            traceback.print_exc()
        print(f"censusdp {name}: error: {_first_line(exc)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        what = "terminated" if isinstance(exc, _Terminated) else "interrupted"
        # a run keeps its checkpointed steps and says so; other outputs are removed
        detail = str(exc.args[0]) if exc.args else "unfinished output removed"
        print(f"censusdp {name}: {what}; {detail}", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader of our output went away (``censusdp budget | head``): not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except OSError as exc:
        if args.debug:
            traceback.print_exc()
        notes = "".join(f"; {n}" for n in getattr(exc, "__notes__", ()))
        print(f"censusdp {name}: error: {_os_error(exc)}{notes}", file=sys.stderr)
        return 1
    except Exception as exc:  # a bug: one line, and the traceback with --debug
        if args.debug:
            traceback.print_exc()
        print(
            f"censusdp {name}: internal error (a bug in censusdp; rerun with --debug and "
            f"report it): {type(exc).__name__}: {_first_line(exc)}",
            file=sys.stderr,
        )
        return 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
