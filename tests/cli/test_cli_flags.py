"""One flag vocabulary across every command (docs/cli.md), checked on every parser.

The walk fails on a deviation: an option without help, an ``--out`` that is not a
directory, a command without an optional ``--json PATH``, a release named otherwise than
as the positional ``RUN`` (``--release RUN`` is a hidden older spelling), an ``--input``
that does not also take ``--truth``, a ``--rho`` without ``--epsilon``, and an option
whose absence means a default that its help does not state.
"""

from __future__ import annotations

import argparse
import json

import pytest

from censusdp.cli import build_parser, main
from censusdp.cli._common import (
    ROLE,
    add_cef_input,
    add_command,
    add_json_output,
    add_output,
    add_release,
    finalize,
    output_option,
)

# options that name a release but are not the release a command reads (documented in
# docs/cli.md): run re-estimates from the measurements of another release
OTHER_RELEASE_OPTIONS = {("run", "--from-measurements")}

# the dests of the hidden ``--release RUN`` (sign's is its own: it signs nothing with
# --new-key, so it does not need a release)
RELEASE_ALIASES = {"release_option", "release_alias"}

# options whose default is None in argparse but stands for a value the help must state
STATED_DEFAULTS = {
    "--delta",
    "--preset",
    "--rho",
    "--epsilon",
    "--spine",
    "--estimator",
    "--simulations",
    "--district-targets",
}
# ... except where they have no default (a required amount, or an analysis's own input)
NO_DEFAULT = {
    ("attack dn", "--epsilon"),
    ("design small-n", "--epsilon"),
    ("tradeoff rr", "--epsilon"),
    ("infer", "--rho"),
    ("infer", "--epsilon"),
}


def leaves(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
    if not subs:
        return {prefix.strip(): parser}
    out: dict[str, argparse.ArgumentParser] = {}
    for action in subs:
        for name, sub in action.choices.items():
            out.update(leaves(sub, f"{prefix} {name}"))
    return out


def deviations(name: str, parser: argparse.ArgumentParser) -> list[str]:
    """Every way ``parser`` (the command ``name``) departs from the vocabulary."""
    bad: list[str] = []
    opts = parser._option_string_actions  # noqa: SLF001
    visible = {a.dest for a in parser._actions if a.help != argparse.SUPPRESS}  # noqa: SLF001
    fmt = parser._get_formatter()  # noqa: SLF001
    for action in parser._actions:  # noqa: SLF001
        shown = "/".join(action.option_strings) or action.dest
        if action.help == argparse.SUPPRESS:
            if action.dest not in visible and action.dest not in RELEASE_ALIASES:
                bad.append(f"{shown} is hidden and is no alias of a shown option")
            continue
        if not (action.help or "").strip():
            bad.append(f"{shown} has no help")
        first = action.option_strings[0] if action.option_strings else None
        if first in STATED_DEFAULTS and (name, first) not in NO_DEFAULT and not action.required:
            if "default" not in fmt._get_help_string(action):  # noqa: SLF001
                bad.append(f"{shown} does not state its default")
        if getattr(action, ROLE, None) in ("input", "target") and action.metavar == "RUN":
            other = (name, first) in OTHER_RELEASE_OPTIONS
            if action.option_strings and not other:
                bad.append(f"{shown} names the release by an option, not as RUN")
    if "--out" in opts and getattr(opts["--out"], ROLE, None) != "output-dir":
        bad.append("--out is not a directory")
    json_opt = opts.get("--json")
    if json_opt is None:
        bad.append("no --json PATH")
    elif json_opt.required or json_opt.nargs != "?" or json_opt.metavar != "PATH":
        bad.append("--json is not an optional PATH ('-' or bare: standard output)")
    if "--release" in opts:
        positional = [a for a in parser._actions if a.dest == "release" and not a.option_strings]  # noqa: SLF001
        if not positional or positional[0].metavar != "RUN":
            bad.append("--release without the positional RUN")
        elif opts["--release"].help != argparse.SUPPRESS:
            bad.append("--release is shown in --help (it is the hidden older spelling of RUN)")
    if ("--input" in opts) != ("--truth" in opts) or opts.get("--input") is not opts.get(
        "--truth", opts.get("--input")
    ):
        bad.append("--input and --truth are not one option")
    if "--rho" in opts and "--epsilon" not in opts:
        bad.append("--rho without --epsilon")
    return bad


COMMANDS = leaves(build_parser())


def test_the_walk_sees_every_leaf_command() -> None:
    assert len(COMMANDS) >= 25
    assert {"run", "evaluate", "risk", "attack reid", "sweep", "explore", "compare"} <= set(
        COMMANDS
    )


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_speaks_the_vocabulary(name: str) -> None:
    assert deviations(name, COMMANDS[name]) == []


def test_the_walk_fails_on_each_deviation() -> None:
    """The checker itself can fail: a command breaking every rule is caught on each."""
    top = argparse.ArgumentParser()
    sub = top.add_subparsers()
    p = add_command(sub, "x", help="x")
    p.add_argument("--postprocess", default="topdown")  # no help
    output_option(p.add_argument("--out", metavar="PAGE.html", help="a page"), "file")
    p.add_argument("--release", metavar="RUN", help="the release")  # shown, no positional
    p.add_argument("--input", metavar="DIR", help="the CEF")  # no --truth
    p.add_argument("--rho", help="rho")  # no --epsilon, default not stated
    p.add_argument("--delta", help="delta")  # default not stated
    finalize(top)
    found = " | ".join(deviations("x", p))
    for words in (
        "--postprocess has no help",
        "--out is not a directory",
        "no --json PATH",
        "--release without the positional RUN",
        "--input and --truth",
        "--rho without --epsilon",
        "--rho does not state its default",
        "--delta does not state its default",
    ):
        assert words in found, words


def test_the_shared_helpers_speak_it() -> None:
    top = argparse.ArgumentParser()
    sub = top.add_subparsers()
    p = add_command(sub, "x", help="x")
    add_release(p)
    add_cef_input(p)
    add_output(p)
    add_json_output(p)
    finalize(top)
    assert deviations("x", p) == []
    assert "--release" not in p.format_help()  # hidden, still accepted
    args = top.parse_args(["x", "--release", "r", "--truth", "t", "--out", "o"])
    assert (args.release_option, args.input) == ("r", "t")


def test_evaluate_takes_html_alone() -> None:
    args = build_parser().parse_args(["evaluate", "r", "--input", "c", "--html", "e.html"])
    assert (args.release, args.json, args.html) == ("r", None, "e.html")


def test_a_page_is_html_and_out_a_directory() -> None:
    for argv in (["compare", "a", "b", "--input", "c"], ["explore", "res"]):
        args = build_parser().parse_args([*argv, "--html", "p.html"])
        assert args.html == "p.html"


def test_risk_takes_epsilon_as_the_budget_s_total(monkeypatch, tmp_path) -> None:
    """``risk --epsilon E`` hands the library the budget's largest rho at epsilon E."""
    import censusdp.risk.report as report
    from censusdp.io.budget_files import resolve_budget

    seen = {}

    def fake_run_risk(input_dir, out_dir, options, **kwargs):
        seen["rho"], seen["sweep"] = options.rho, list(options.sweep)
        return report.RiskRun(out_dir=tmp_path, summary={}, seconds={})

    monkeypatch.setattr(report, "run_risk", fake_run_risk)
    monkeypatch.setattr(report.RiskRun, "format", lambda self: "risk")
    (tmp_path / "cef").mkdir()
    cef, out = str(tmp_path / "cef"), str(tmp_path / "o")
    argv = ["risk", "--input", cef, "--out", out, "--epsilon", "4"]
    assert main([*argv, "-q"]) == 0
    want = resolve_budget(preset="pl94-2020", config=None, epsilon="4").rho
    assert seen["rho"] == want
    full = resolve_budget(preset="pl94-2020", config=None).rho
    assert 0 < want < full  # 4 is below the preset's own epsilon (17.14)
    seen.clear()
    assert main([*argv[:-2], "--sweep-epsilon", "4", "-q", "--overwrite"]) == 0
    assert seen["rho"] is None and seen["sweep"] == [want]
    with pytest.raises(SystemExit) as refused:  # one amount only
        main([*argv, "--rho", "1", "-q"])
    assert refused.value.code == 2


def test_validate_on_a_directory_that_is_not_a_release(tmp_path, capsys) -> None:
    cef = tmp_path / "vt"
    cef.mkdir()
    manifest = {"created_by": "censusdp", "kind": "censusdp synthetic CEF", "files": []}
    (cef / "manifest.json").write_text(json.dumps(manifest))
    assert main(["validate", str(cef)]) == 1
    err = capsys.readouterr().err.strip()
    assert "is not a release but a censusdp synthetic CEF" in err
    assert len(err.splitlines()) == 1 and "checksums" not in err
    out = tmp_path / "gls"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"created_by": "censusdp", "command": "infer"}))
    assert main(["validate", str(out)]) == 1
    assert "the output of 'censusdp infer'" in capsys.readouterr().err


def test_json_of_a_command_that_had_none(tmp_path, capsys) -> None:
    """``sign --new-key K --json -``: standard output holds the JSON alone."""
    key = tmp_path / "k.key"
    assert main(["sign", "--new-key", str(key), "--json", "-", "-q"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["public_key"] == f"{key}.pub" and record["fingerprint"].startswith("SHA256:")


def test_the_method_help_names_the_size_above_which_piqp_is_clarabel() -> None:
    """``run --method``'s help states the chain's PIQP limit (the CLI does not import the
    solvers to print it)."""
    from censusdp.release.topdown.solvers.chain import PIQP_MAX_VARIABLES

    run = leaves(build_parser())["run"]
    method = next(a for a in run._actions if a.dest == "method")  # noqa: SLF001
    assert f"more than {PIQP_MAX_VARIABLES:,} variables" in method.help
