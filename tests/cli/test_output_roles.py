"""Every path option of every command has a role, so the output guard sees it.

`censusdp.cli._common.guard_outputs` protects every option marked as an input and
checks every option marked as an output before a command runs; an option that names a
path without a role would slip past it. This walks every command's parser.
"""

from __future__ import annotations

import argparse
import re

import pytest

from censusdp.cli import build_parser
from censusdp.cli._common import ROLE, add_command, finalize, guard_outputs
from censusdp.errors import ConfigError

OUTPUT_NAMES = {"--out", "--json", "--html", "--plot", "--cef-out", "--csv", "--new-key"}
PATHLIKE = re.compile(r"DIR|PATH|FILE|RUN|REC|OUT|RESULTS|KEY|PLAN|\.(html|png|json|csv|toml)")


def leaf_parsers(
    parser: argparse.ArgumentParser, prefix: str = ""
) -> dict[str, argparse.ArgumentParser]:
    out = {}
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
    if not subs:
        return {prefix.strip(): parser}
    for action in subs:
        for name, sub in action.choices.items():
            out.update(leaf_parsers(sub, f"{prefix} {name}"))
    return out


def unguarded(parser: argparse.ArgumentParser) -> list[str]:
    """The path options of one command that have no role, and output options marked as
    inputs."""
    bad = []
    for action in parser._actions:  # noqa: SLF001
        if action.nargs == 0:
            continue
        names = set(action.option_strings)
        metavar = action.metavar if isinstance(action.metavar, str) else ""
        role = getattr(action, ROLE, None)
        shown = "/".join(action.option_strings) or action.dest
        if names & OUTPUT_NAMES and not (role or "").startswith("output"):
            bad.append(f"{shown} writes a path but is not an output option")
        elif PATHLIKE.search(metavar) and role is None:
            bad.append(f"{shown} ({metavar}) names a path but has no role")
    return bad


COMMANDS = leaf_parsers(build_parser())


def test_the_walk_sees_every_command() -> None:
    assert {"run", "validate", "protect swap", "attack dn", "tradeoff census", "explore"} <= set(
        COMMANDS
    )


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_path_option_has_a_role(name: str) -> None:
    assert unguarded(COMMANDS[name]) == []


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_command_that_writes_takes_overwrite(name: str) -> None:
    p = COMMANDS[name]
    writes = [a for a in p._actions if (getattr(a, ROLE, None) or "").startswith("output")]  # noqa: SLF001
    if writes:
        assert "--overwrite" in p._option_string_actions  # noqa: SLF001


def test_the_walk_catches_an_unmarked_output() -> None:
    """The check itself can fail: a command with a plain ``--plot`` option."""
    top = argparse.ArgumentParser()
    sub = top.add_subparsers()
    p = add_command(sub, "x", help="x")
    p.add_argument("--plot", metavar="OUT.png")
    p.add_argument("--from", metavar="RUN")
    finalize(top)
    assert len(unguarded(p)) == 2


def test_guard_checks_every_output_against_every_input(tmp_path) -> None:
    """An output role is checked against all input roles of the command before it runs."""
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "data.csv").write_text("x")
    args = build_parser().parse_args(
        [
            "budget",
            "--config",
            str(inp / "data.csv"),
            "--json",
            str(inp / "data.csv"),
            "--overwrite",
        ]
    )
    with pytest.raises(ConfigError, match="--json .* overlaps the input"):
        guard_outputs(args)
    args = build_parser().parse_args(
        ["attack", "dn", "--plot", str(tmp_path / "p.png"), "--json", str(tmp_path / "r.json")]
    )
    (tmp_path / "p.png").write_text("mine")
    with pytest.raises(ConfigError, match="--plot .* exists"):
        guard_outputs(args)


@pytest.mark.parametrize(
    "argv",
    [
        ["explore", "{d}", "--html", "{d}/explore.html"],
        ["validate", "{d}", "--json", "{d}/report.json"],
        ["evaluate", "{d}", "--json", "-", "--html", "{d}/report.html"],
        ["compare", "{d}", "{d}", "--input", "{d}", "--html", "{d}/c.html"],
        [
            "tradeoff",
            "choose",
            "--frontier",
            "census",
            "--privacy-cost",
            "1",
            "--accuracy-value",
            "1",
            "--results",
            "{d}",
            "--plot",
            "{d}/f.png",
        ],
    ],
)
def test_no_command_writes_a_new_file_inside_its_input(tmp_path, argv) -> None:
    """A new file inside an input directory changes the input (a release with a file its
    manifest does not list no longer validates)."""
    d = tmp_path / "input"
    d.mkdir()
    args = build_parser().parse_args([a.format(d=d) for a in argv])
    with pytest.raises(ConfigError, match="overlaps the input"):
        guard_outputs(args)
    assert list(d.iterdir()) == []


def test_debug_is_taken_after_the_command_too(capsys) -> None:
    from censusdp.cli import main

    assert main(["budget", "--preset", "nope", "--debug"]) == 2
    assert "Traceback" in capsys.readouterr().err
    assert main(["budget", "--preset", "nope"]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_demo_replaces_its_own_earlier_output_only(tmp_path) -> None:
    """The set-up command can be run again: an earlier demo's directory (built-in data,
    nothing else in it) is replaced without --overwrite; anything else is not."""
    import json

    d = tmp_path / "censusdp-demo"
    d.mkdir()
    (d / "report.html").write_text("<html>")
    manifest = {"created_by": "censusdp", "command": "demo", "files": ["report.html"]}
    (d / "manifest.json").write_text(json.dumps(manifest))
    guard_outputs(build_parser().parse_args(["demo", "--out", str(d)]))  # no refusal
    (d / "NOTES.txt").write_text("mine")
    with pytest.raises(ConfigError, match="NOTES.txt"):
        guard_outputs(build_parser().parse_args(["demo", "--out", str(d)]))
    (d / "NOTES.txt").unlink()
    (d / "manifest.json").write_text(json.dumps({**manifest, "command": "risk"}))
    with pytest.raises(ConfigError, match="exists and is not empty"):
        guard_outputs(build_parser().parse_args(["demo", "--out", str(d)]))
