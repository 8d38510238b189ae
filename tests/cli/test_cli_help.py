"""The shared habits of every command: defaults in --help, -q/-v, --json PATH, --input."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from censusdp.cli import build_parser, main
from censusdp.cli._common import Parser, add_command, finalize


def _leaves(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield " ".join(prefix), parser
        return
    for action in subs:
        for name, sub in action.choices.items():
            yield from _leaves(sub, (*prefix, name))


COMMANDS = dict(_leaves(build_parser()))


def test_every_command_is_listed() -> None:
    assert {"run", "validate", "attack dn", "tradeoff census", "design strategy"} <= set(COMMANDS)
    assert len(COMMANDS) >= 24


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_shows_defaults_and_the_shared_options(name: str) -> None:
    parser = COMMANDS[name]
    text = parser.format_help()
    assert "%%" not in text and "%(" not in text
    assert re.search(r"-q, --quiet|--quiet", text) and re.search(r"-v, --verbose", text)
    fmt = parser._get_formatter()
    for action in parser._actions:
        default = action.default
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue
        if default in (None, False, argparse.SUPPRESS) or isinstance(
            action, argparse._CountAction | argparse._HelpAction
        ):
            continue
        assert "default" in fmt._get_help_string(action), (name, action.option_strings)
    # no internal references in what a user reads
    for bad in ("DESIGN.md", "../shared", "seed 00"):
        assert bad not in text


@pytest.mark.parametrize(
    "name", sorted(n for n, p in COMMANDS.items() if "--json" in p._option_string_actions)
)
def test_json_is_a_path_everywhere(name: str) -> None:
    action = COMMANDS[name]._option_string_actions["--json"]
    assert action.metavar == "PATH"
    assert action.nargs in (None, "?")
    if action.nargs == "?":
        assert action.const == "-"  # bare --json: standard output
    assert "--overwrite" in COMMANDS[name]._option_string_actions


def test_the_cef_is_input_everywhere() -> None:
    for name, parser in COMMANDS.items():
        opts = parser._option_string_actions
        assert "--truth" not in opts or opts["--truth"] is opts["--input"], name


def test_percent_signs_are_printed_once() -> None:
    top = Parser(prog="x")
    sub = top.add_subparsers()
    p = add_command(sub, "c", help="c")
    p.add_argument("--share", default=0.5, help="at most 100% of the rows")
    p.add_argument("--keep", default="a", help="kept as %(default)s")
    finalize(top)
    text = p.format_help()
    assert "at most 100% of the rows (default: 0.5)" in " ".join(text.split())
    assert "kept as a" in text and "%%" not in text


def test_bare_json_goes_to_stdout_and_a_path_is_not_overwritten(tmp_path, capsys) -> None:
    assert main(["tradeoff", "rr", "--epsilon", "1", "--json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out)["epsilon"] == 1.0  # stdout holds the JSON alone
    target = tmp_path / "rr.json"
    assert main(["tradeoff", "rr", "--epsilon", "1", "--json", str(target)]) == 0
    assert "randomized response" in capsys.readouterr().out  # the text, not the JSON
    assert json.loads(target.read_text())["epsilon"] == 1.0
    assert main(["tradeoff", "rr", "--epsilon", "2", "--json", str(target)]) == 2
    assert "exists; choose another path or pass --overwrite" in capsys.readouterr().err
    assert json.loads(target.read_text())["epsilon"] == 1.0
    assert main(["tradeoff", "rr", "--epsilon", "2", "--json", str(target), "--overwrite"]) == 0
    assert json.loads(target.read_text())["epsilon"] == 2.0


def test_attack_dn_json_path_keeps_stdout_readable(tmp_path, capsys) -> None:
    target = tmp_path / "dn.json"
    argv = ["attack", "dn", "--n", "20", "--trials", "2", "--multiples", "1", "--json", str(target)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("Dinur-Nissim reconstruction") and "{" not in out
    assert json.loads(target.read_text())["n"] == 20


def _choices(command: str, option: str) -> tuple[str, ...]:
    return tuple(COMMANDS[command]._option_string_actions[option].choices)


def test_the_cli_offers_exactly_the_library_choices() -> None:
    """The CLI lists its choices literally (importing the solvers would slow every
    command's start-up); they must not drift from the names the library accepts."""
    from censusdp.attacks.dhc.runs import LINK_METHODS
    from censusdp.design.small_n import LOSSES
    from censusdp.design.strategy import STRATEGIES
    from censusdp.evaluate.sweep import EPSILON_MEANINGS
    from censusdp.execution import EXECUTOR_CHOICES
    from censusdp.privacy.budget import SPINES
    from censusdp.release.options import POSTPROCESS_CHOICES
    from censusdp.release.options import UNIT_CONSISTENCY_CHOICES as UNITS_CHOICES
    from censusdp.release.topdown.maxent import ESTIMATORS
    from censusdp.release.topdown.solvers.chain import METHODS

    assert _choices("run", "--method") == METHODS
    assert _choices("run", "--estimator") == ESTIMATORS
    assert _choices("run", "--postprocess") == POSTPROCESS_CHOICES
    assert _choices("run", "--units") == UNITS_CHOICES
    assert _choices("sweep", "--epsilon-meaning") == EPSILON_MEANINGS
    assert _choices("design strategy", "--strategy") == STRATEGIES
    assert _choices("design small-n", "--loss") == LOSSES
    assert _choices("attack reid", "--methods") == LINK_METHODS
    assert _choices("run", "--spine") == SPINES
    assert _choices("run", "--executor") == _choices("infer", "--executor") == EXECUTOR_CHOICES
