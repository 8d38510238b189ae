"""The architecture as a test: one direction of dependency, no import circles.

docs/ARCHITECTURE.md draws these layers. Every import inside ``src/censusdp`` (at module
level or inside a function) must point to the same or a lower layer, packages must not
import each other in a circle, and a private module (``_name``) is imported only from
inside its own top-level package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "censusdp"

LAYERS: dict[str, int] = {
    "errors": 0,
    "progress": 0,
    "version": 0,
    "data": 1,
    "privacy": 2,
    "tables": 3,
    "io": 4,
    "execution": 4,
    "release": 5,
    "generate": 6,
    "protect": 6,
    "risk": 6,
    "evaluate": 6,
    "attacks": 6,
    "infer": 6,
    "design": 6,
    "tradeoff": 7,
    "demo": 8,
    "cli": 9,
    "api": 9,
    "__main__": 9,
}
"""Layer of each top-level package or module; an import may only go down or sideways."""


def _module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        mod = _module_name(path)
        is_pkg = path.name == "__init__.py"
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names if a.name.startswith("censusdp"))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if target.startswith("censusdp"):
                    out.add(target)
                    # "from censusdp.pkg import module" imports the module too
                    out.update(f"{target}.{a.name}" for a in node.names)
        graph[mod] = out
    known = set(graph)
    return {m: {t for t in ts if t in known and t != m} for m, ts in graph.items()}


def _top(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else ""


GRAPH = _imports()


def test_every_top_level_package_has_a_layer() -> None:
    tops = {_top(m) for m in GRAPH} - {""}
    assert tops <= set(LAYERS), f"add to LAYERS: {sorted(tops - set(LAYERS))}"


def test_no_upward_imports() -> None:
    bad = [
        f"{m} -> {t}"
        for m, ts in GRAPH.items()
        for t in ts
        if _top(m) and _top(t) and LAYERS[_top(t)] > LAYERS[_top(m)]
    ]
    assert not bad, "upward imports:\n" + "\n".join(sorted(bad))


def test_no_package_import_circles() -> None:
    edges: dict[str, set[str]] = {}
    for m, ts in GRAPH.items():
        for t in ts:
            if _top(m) and _top(t) and _top(m) != _top(t):
                edges.setdefault(_top(m), set()).add(_top(t))
    _assert_acyclic(edges)


def test_no_module_import_circles() -> None:
    # a package's __init__ re-exporting its own submodules is not a circle
    edges = {
        m: {t for t in ts if not (m.startswith(t + ".") or t.startswith(m + "."))}
        for m, ts in GRAPH.items()
    }
    _assert_acyclic(edges)


def test_private_modules_stay_inside_their_package() -> None:
    bad = [
        f"{m} -> {t}"
        for m, ts in GRAPH.items()
        for t in ts
        if any(p.startswith("_") and not p.startswith("__") for p in t.split(".")[1:])
        and _top(m) != _top(t)
    ]
    assert not bad, "private modules imported across packages:\n" + "\n".join(sorted(bad))


def _assert_acyclic(edges: dict[str, set[str]]) -> None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for t in sorted(edges.get(n, ())):
            if state.get(t) == 1:
                cycle = stack[stack.index(t) :] + [t]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        stack.pop()
        state[n] = 2

    for n in sorted(edges):
        if n not in state:
            visit(n)
