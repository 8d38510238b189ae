"""Every written rule of docs/ARCHITECTURE.md, enforced.

The page is the source of the rules: its layer diagram must match
``test_layers.LAYERS``, and its table of forbidden imports is read here and checked
against every module's imports, so the page and the code cannot drift apart. The
size rules (files, functions, parameter lists), the one spelling of the release
directory's file names and the docstrings' references are checked on every module of
``src/censusdp``.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest
from test_layers import LAYERS, SRC

DOC = SRC.parents[1] / "docs" / "ARCHITECTURE.md"

MAX_FILE_LINES = 800
MAX_FUNCTION_LINES = 100
MAX_PARAMETERS = 8
REASON = "Long because"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()
TREES = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in MODULES.items()}


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


# -- the page ---------------------------------------------------------------------------


def doc_layers(text: str) -> dict[str, int]:
    """The layer of each package the diagram of the page names (``layer N  a/  b.py``)."""
    layers = {}
    for m in re.finditer(r"^ layer (\d+) (.*)$", text, re.M):
        for token in m.group(2).split():
            if not token.endswith(("/", ".py")):
                break
            layers[token.rstrip("/").removesuffix(".py")] = int(m.group(1))
    return layers


def doc_forbidden(text: str) -> list[tuple[str, str]]:
    """The rows of the page's table of forbidden imports: (modules, may not import)."""
    section = text.split("## Forbidden imports", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("censusdp"):
            for who in cells[0].split("`, `"):
                for what in cells[1].split("`, `"):
                    rows.append((who, what))
    return rows


def test_the_diagram_is_the_layers_the_tests_enforce():
    drawn = doc_layers(DOC.read_text(encoding="utf-8"))
    # api and __main__ sit with the cli; the diagram names the packages
    assert drawn == {k: v for k, v in LAYERS.items() if k not in ("api", "__main__")}


def _imported(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def forbidden_imports(rules: list[tuple[str, str]], trees: dict[str, ast.AST]) -> list[str]:
    """``module imports target`` for each import a rule forbids."""
    found = []
    for module, tree in trees.items():
        imported = _imported(tree)
        for who, what in rules:
            if _within(module, who):
                found += [f"{module} imports {t}" for t in sorted(imported) if _within(t, what)]
    return found


def test_no_module_imports_what_the_page_forbids():
    rules = doc_forbidden(DOC.read_text(encoding="utf-8"))
    assert len(rules) >= 3, "the page lists its forbidden imports"
    for who, _ in rules:
        assert any(_within(m, who) for m in MODULES), f"the page names no module: {who}"
    assert forbidden_imports(rules, TREES) == []


def test_the_forbidden_imports_check_catches_a_violation():
    tree = ast.parse("from censusdp.io.rundir import RunDir\n")
    rules = [("censusdp.release.topdown", "censusdp.io")]
    assert forbidden_imports(rules, {"censusdp.release.topdown.driver": tree}) == [
        "censusdp.release.topdown.driver imports censusdp.io.rundir",
        "censusdp.release.topdown.driver imports censusdp.io.rundir.RunDir",
    ]
    assert forbidden_imports(rules, {"censusdp.release.pipeline": tree}) == []


# -- sizes ------------------------------------------------------------------------------


def long_files(paths: dict[str, Path]) -> list[str]:
    out = []
    for name, path in paths.items():
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > MAX_FILE_LINES:
            out.append(f"{name}: {n} lines")
    return out


def body_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines of a function's body after its docstring."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:] or body
    return fn.end_lineno - body[0].lineno + 1  # type: ignore[operator]


def unexplained_long_functions(trees: dict[str, ast.AST]) -> list[str]:
    out = []
    for name, tree in trees.items():
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                n = body_lines(fn)
                if n > MAX_FUNCTION_LINES and REASON not in (ast.get_docstring(fn) or ""):
                    out.append(f"{name}.{fn.name} (line {fn.lineno}): {n} lines")
    return out


def parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    names = [p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]]
    return [n for n in names if n not in ("self", "cls")]


def long_parameter_lists(trees: dict[str, ast.AST]) -> list[str]:
    out = []
    for name, tree in trees.items():
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                n = len(parameters(fn))
                if n > MAX_PARAMETERS:
                    out.append(f"{name}.{fn.name} (line {fn.lineno}): {n} parameters")
    return out


def test_no_file_is_too_long():
    assert long_files(MODULES) == []


def test_every_long_function_says_why():
    assert unexplained_long_functions(TREES) == []


def test_no_parameter_list_is_too_long():
    assert long_parameter_lists(TREES) == []


def test_the_size_checks_catch_violations(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES + 1))
    long_fn = ast.parse(f'def f():\n    """Doc."""\n{body}\n')
    assert unexplained_long_functions({"m": long_fn}) == [
        f"m.f (line 1): {MAX_FUNCTION_LINES + 1} lines"
    ]
    why = ast.parse(f'def f():\n    """Doc. {REASON} it must."""\n{body}\n')
    assert unexplained_long_functions({"m": why}) == []
    args = ", ".join(f"a{i}" for i in range(MAX_PARAMETERS + 1))
    assert long_parameter_lists({"m": ast.parse(f"def g(self, {args}): pass\n")}) == [
        f"m.g (line 1): {MAX_PARAMETERS + 1} parameters"
    ]
    big = tmp_path / "big.py"
    big.write_text("x = 1\n" * (MAX_FILE_LINES + 1))
    assert long_files({"big": big}) == [f"big: {MAX_FILE_LINES + 1} lines"]


# -- one spelling of the release directory's file names --------------------------------


LAYOUT_MODULES = {"censusdp.io.layout", "censusdp.io.output_rules"}
"""Where the names are spelled: the layout (and the guard, for every output's manifest
and signature)."""


def spelled_names(trees: dict[str, ast.AST], names: set[str]) -> list[str]:
    out = []
    for module, tree in trees.items():
        if module in LAYOUT_MODULES:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in names:
                out.append(f"{module} (line {node.lineno}): {node.value!r}")
    return out


def test_release_file_names_are_spelled_once():
    from censusdp.io import layout

    names = set(layout.RELEASE_FILE_NAMES) - {layout.TABLES_DIR} | {layout.CODEBOOK_FILE}
    assert spelled_names(TREES, names) == []
    tree = ast.parse('path = run / "mdf_persons.parquet"\n')
    assert spelled_names({"censusdp.evaluate.x": tree}, names) == [
        "censusdp.evaluate.x (line 1): 'mdf_persons.parquet'"
    ]


# -- docstring references -----------------------------------------------------------------


ROLE = re.compile(r":(?:func|class|mod|data|meth|attr|exc):`~?(censusdp(?:\.\w+)+)`")


def resolves(path: str) -> bool:
    """Whether ``censusdp.a.b.C.d`` names a module, or a symbol defined in the module it
    names (or exported by that package's ``__all__``), and its attributes."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        obj: object = module
        for k, attr in enumerate(parts[i:]):
            if not hasattr(obj, attr):
                fields = getattr(obj, "__dataclass_fields__", {})
                return attr in fields or attr in getattr(obj, "__annotations__", {})
            obj = getattr(obj, attr)
            if k == 0 and not _defined_in(obj, module):
                return False
        return True
    return False


def _defined_in(obj: object, module: object) -> bool:
    """``obj`` (a class, function or value) belongs to ``module``: defined there, or
    declared in its ``__all__`` (its public surface), or a value (constants have no home
    module)."""
    home = getattr(obj, "__module__", None)
    if home is None or not callable(obj):
        return True
    return home == module.__name__ or obj.__name__ in getattr(module, "__all__", ())


def broken_references(trees: dict[str, ast.AST]) -> list[str]:
    out = []
    for module, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for ref in ROLE.findall(node.value):
                    if not resolves(ref):
                        out.append(f"{module} (line {node.lineno}): {ref}")
    return sorted(set(out))


def test_docstrings_name_symbols_that_exist():
    assert broken_references(TREES) == []


@pytest.mark.parametrize(
    "ref, ok",
    [
        ("censusdp.io.rundir.RunDir", True),
        ("censusdp.io.rundir.RunDir.invariants", True),
        ("censusdp.release.measure.MeasurementSet", False),
        ("censusdp.no_such_module", False),
    ],
)
def test_the_reference_check_catches_a_missing_symbol(ref, ok):
    assert resolves(ref) is ok
