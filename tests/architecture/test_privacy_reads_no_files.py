"""privacy/ does not know about files (docs/ARCHITECTURE.md): it parses TOML text and
mappings handed to it; opening a user's config or the shipped presets (package data) is
``censusdp.io.budget_files``. Checked on the source, by AST, for every module of
``censusdp.privacy``."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "censusdp"
PRIVACY = SRC / "privacy"

FORBIDDEN_MODULES = ("censusdp.io", "importlib.resources", "shutil", "glob")
"""Modules (and their submodules) a privacy module may not import: censusdp's file layer,
package-data access, and the standard library's file modules."""

FORBIDDEN_NAMES = {
    "tomllib": {"load"},  # tomllib.loads (text) is the TOML parser; tomllib.load reads a file
    "pathlib": {"Path", "PosixPath", "WindowsPath"},  # PurePath only: names, never the disk
    "os": {"open", "fdopen", "listdir", "scandir", "walk", "stat", "remove", "rename"},
    "os.path": {"exists", "isfile", "isdir", "getsize"},
    "io": {"open", "FileIO"},
    "importlib": {"resources"},
}
"""Names of a module a privacy module may not use (by ``from m import n`` or ``m.n``)."""

FILE_METHODS = {
    "open",
    "read_text",
    "read_bytes",
    "write_text",
    "write_bytes",
    "iterdir",
    "glob",
    "rglob",
    "exists",
    "is_file",
    "is_dir",
}
"""Methods of ``Path`` (and of ``importlib.resources`` traversables) that touch the disk."""


def file_handling(source: str, module: str = "censusdp.privacy.example") -> list[str]:
    """Every file-handling import or call in a module's source, as ``line: what``.

    ``module`` is the module's dotted name (``censusdp.privacy.x``; a package is named
    ``censusdp.privacy.x.__init__``), to resolve its relative imports.
    """
    found: list[str] = []
    aliases: dict[str, str] = {}  # local name -> the module or name it is bound to
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if _forbidden_module(a.name):
                    found.append(f"{node.lineno}: import {a.name}")
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module)
            for a in node.names:
                full = f"{base}.{a.name}"
                if (
                    _forbidden_module(base)
                    or _forbidden_module(full)
                    or a.name in FORBIDDEN_NAMES.get(base, ())
                ):
                    found.append(f"{node.lineno}: from {base} import {a.name}")
                aliases[a.asname or a.name] = full
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == "open":
                found.append(f"{node.lineno}: open(...)")
            elif isinstance(func, ast.Attribute) and func.attr in FILE_METHODS:
                found.append(f"{node.lineno}: .{func.attr}(...)")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner = _dotted(node.value, aliases)
            if owner is not None and node.attr in FORBIDDEN_NAMES.get(owner, ()):
                found.append(f"{node.lineno}: {owner}.{node.attr}")
    return sorted(set(found), key=lambda s: int(s.split(":")[0]))


def _absolute(node: ast.ImportFrom, module: str) -> str:
    """The absolute module a ``from ... import`` reads from (relative ones resolved)."""
    if not node.level:
        return node.module or ""
    parts = module.split(".")[: -node.level]
    return ".".join(parts + ([node.module] if node.module else []))


def _forbidden_module(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in FORBIDDEN_MODULES)


def _dotted(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """The module an expression like ``tomllib`` or ``os.path`` names, if any."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, aliases)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(SRC.parent).with_suffix("").parts)


def test_no_privacy_module_handles_files() -> None:
    modules = sorted(PRIVACY.rglob("*.py"))
    assert len(modules) > 5
    bad = [
        f"{path.relative_to(SRC.parent)}:{hit}"
        for path in modules
        for hit in file_handling(path.read_text(encoding="utf-8"), _module_name(path))
    ]
    assert not bad, "privacy/ handles files (move it to censusdp.io):\n" + "\n".join(bad)


def test_the_check_sees_each_way_of_reading_a_file() -> None:
    """The check itself: each pattern it must catch, and what privacy/ may do."""
    caught = {
        "import censusdp.io.budget_files": "import censusdp.io.budget_files",
        "from censusdp.io import budget_files": "from censusdp.io import budget_files",
        "from censusdp.io.budget_files import load_config": "from censusdp.io.budget_files",
        "import importlib.resources": "import importlib.resources",
        "from importlib import resources": "from importlib import resources",
        "from importlib.resources import files": "from importlib.resources import files",
        "import tomllib\ntomllib.load(f)": "tomllib.load",
        "import tomllib as t\nt.load(f)": "tomllib.load",
        "from tomllib import load": "from tomllib import load",
        "from pathlib import Path": "from pathlib import Path",
        "import pathlib\npathlib.Path(x)": "pathlib.Path",
        "import os\nos.listdir('.')": "os.listdir",
        "import os\nos.path.exists(p)": "os.path.exists",
        "open('x')": "open(...)",
        "p.read_text()": ".read_text(...)",
        "p.read_bytes()": ".read_bytes(...)",
        "p.open()": ".open(...)",
        "d.iterdir()": ".iterdir(...)",
        "import shutil": "import shutil",
        "import io\nio.open(p)": "io.open",
        "from ..io import budget_files": "from censusdp.io import budget_files",
        "from ..io.budget_files import load_preset": "from censusdp.io.budget_files",
    }
    for source, what in caught.items():
        hits = file_handling(source, "censusdp.privacy.example")
        assert any(what in h for h in hits), (source, hits)
    allowed = (
        "import tomllib\ntomllib.loads(text)\n"
        "from pathlib import PurePath\nPurePath(origin).stem\n"
        "import os\nos.urandom(32)\n"
        "from censusdp.privacy.budget import Budget\n"
        "from .budget import Budget\n"
        "from io import StringIO\n"
    )
    assert file_handling(allowed) == []
