"""Every ``--help`` speaks to a user: no ``docs/...`` paths (an installed package has no
docs folder), no module paths (``censusdp.release.topdown``), no Python names
(``Budget.scaled``, ``DEFAULT_MAX_CHILDREN``)."""

from __future__ import annotations

import argparse
import re

from censusdp.cli import build_parser

_FILES = {"toml", "html", "png", "json", "pub", "csv", "parquet", "md", "txt", "ipynb"}


def _parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("censusdp",)):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def _metavars(parser: argparse.ArgumentParser) -> set[str]:
    out = set()
    for a in parser._actions:
        for m in (a.metavar, a.dest.upper()):
            if isinstance(m, str):
                out.update(re.findall(r"[A-Z][A-Z0-9_]*", m))
    return out


def _leaks(parser: argparse.ArgumentParser) -> list[str]:
    text = parser.format_help()
    found = re.findall(r"docs/\S+", text)
    found += re.findall(r"\bcensusdp\.[a-z_]+\S*", text)
    found += [
        m.group(0)
        for m in re.finditer(r"\b[A-Z][A-Za-z]+\.([a-z_][a-z_]+)\b", text)
        if m.group(1) not in _FILES
    ]
    constants = set(re.findall(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b", text)) - _metavars(parser)
    # the papers' notation is for risk.json, not for help: a bare R (unless a metavar),
    # rho_1, rho_q, xi2, x1*, and an empty default
    named = set(re.findall(r"--[a-z-]+ ([A-Z]\w*)", text))  # "--rho R" names its R
    letters = set(re.findall(r"(?<![\w-])R(?![\w'])", text)) - _metavars(parser) - named
    jargon = re.findall(r"\brho_\w+|\bxi2\b|\b[xy][12]\*|\(default: \)|off-spine", text)
    if "total variation" not in text:
        jargon += re.findall(r"\bTVD\b", text)[:1]  # said in words once where it is used
    return found + sorted(constants) + sorted(letters) + jargon


def test_no_help_names_docs_modules_or_python_names():
    leaks = {" ".join(path): _leaks(p) for path, p in _parsers(build_parser())}
    assert {k: v for k, v in leaks.items() if v} == {}
    assert len(leaks) >= 25  # every leaf command was read


def test_the_check_finds_what_it_looks_for():
    p = argparse.ArgumentParser(
        prog="x",
        description="see docs/design.md; default DEFAULT_MAX_CHILDREN of "
        "censusdp.release.topdown.split via Budget.scaled",
    )
    p.add_argument("--out", metavar="FILE.toml")
    p.add_argument("--time-limit")
    p.epilog = "the disclosure risk R from rho_1, xi2 and x1* (default: ); TVD; off-spine"
    leaks = _leaks(p)
    assert {"R", "rho_1", "xi2", "x1*", "(default: )", "TVD", "off-spine"} <= set(leaks)
    q = argparse.ArgumentParser(prog="y", epilog="R1,R2 in Kazan & Reiter's R'")
    q.add_argument("--rho", metavar="R", help="sigma^2 = 1/R")
    assert _leaks(q) == []  # a metavar R and its formula are not jargon
    assert "docs/design.md;" in leaks and "Budget.scaled" in leaks
    assert "DEFAULT_MAX_CHILDREN" in leaks and any(x.startswith("censusdp.release") for x in leaks)
    assert "TIME_LIMIT" not in leaks and not any("FILE" in x for x in leaks)
