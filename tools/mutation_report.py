"""Read a mutmut 3 run (``mutants/``) and print each module's score and its survivors.

Usage (from the repository root, after ``mutmut run``; ``tools/mutation.sh`` does both)::

    python tools/mutation_report.py [--config tools/mutation.toml] [--json OUT] [MODULE ...]
    python tools/mutation_report.py --globs [MODULE ...]   # the mutant globs to pass to mutmut

The score of a module is ``killed / (mutants - equivalent)``, where ``killed`` counts
mutants that made a test fail or time out, and ``equivalent`` the mutants listed in the
config's ``[[equivalent]]`` table whose recorded change still matches the mutant (a listed
mutant whose code changed is reported as stale and counted like any other). Mutants that
were not run (no covering test, or not checked yet) count against the score.

Exit status: 0 when every module reaches its ``target``, 1 otherwise, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import fnmatch
import json
import sys
import tomllib
from pathlib import Path

# mutmut 3.8 exit codes (mutmut/stats.py)
KILLED = {1, 3, 36, 24, -24, 152, 255}  # test failure, pytest internal error, timeouts
STATUS = {0: "survived", 1: "killed", 3: "killed", 5: "no tests", 33: "no tests", 34: "skipped"}
STATUS.update({36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout"})
STATUS.update({35: "suspicious", -11: "segfault", -9: "segfault", None: "not checked"})


def load_results(root: Path) -> dict[str, int | None]:
    """``mutant name -> exit code`` from every ``.meta`` file mutmut wrote."""
    out: dict[str, int | None] = {}
    for meta in sorted((root / "mutants").rglob("*.py.meta")):
        out.update(json.loads(meta.read_text())["exit_code_by_key"])
    return out


def _functions(path: Path, cache: dict[Path, dict[str, str]]) -> dict[str, str]:
    if path not in cache:
        src = path.read_text()
        lines = src.splitlines()
        cache[path] = {
            node.name: "\n".join(lines[node.lineno - 1 : node.end_lineno or node.lineno])
            for node in ast.walk(ast.parse(src))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
    return cache[path]


def mutant_diff(root: Path, name: str, cache: dict[Path, dict[str, str]]) -> list[str]:
    """The changed lines of one mutant (``-`` original, ``+`` mutant), read from ``mutants/``."""
    module, func = name.rsplit(".", 1)
    path = root / "mutants" / "src" / (module.replace(".", "/") + ".py")
    if not path.exists():
        return ["(source not found)"]
    funcs = _functions(path, cache)
    base = func.split("__mutmut_")[0]
    orig, mutant = funcs.get(base + "__mutmut_orig"), funcs.get(func)
    if orig is None or mutant is None:
        return ["(source not found)"]
    lines = difflib.unified_diff(orig.splitlines(), mutant.splitlines(), lineterm="", n=0)
    return [
        line.rstrip()
        for line in lines
        if line[:1] in "+-" and line[:3] not in ("+++", "---") and "__mutmut_" not in line
    ]


def _norm(text: str) -> str:
    return " ".join(text.split())


def report(config: dict, root: Path, modules: list[str]) -> tuple[dict, bool]:
    """Per-module counts, score and survivors; and whether every target was met."""
    results = load_results(root)
    equivalent = {e["mutant"]: e for e in config.get("equivalent", [])}
    cache: dict[Path, dict[str, str]] = {}
    out: dict[str, dict] = {}
    all_ok = True
    for mod in modules:
        spec = config["modules"][mod]
        names = sorted(n for n in results if any(fnmatch.fnmatchcase(n, g) for g in spec["globs"]))
        counts: dict[str, int] = {}
        survivors, excluded, stale = [], [], []
        for n in names:
            code = results[n]
            status = STATUS.get(code, "suspicious")
            counts[status] = counts.get(status, 0) + 1
            if code in KILLED:
                continue
            diff = mutant_diff(root, n, cache)
            eq = equivalent.get(n)
            if eq is not None:
                added = " ".join(_norm(d[1:]) for d in diff if d.startswith("+"))
                if _norm(eq["change"]) in added:
                    excluded.append({"mutant": n, "status": status, "reason": eq["reason"]})
                    continue
                stale.append(n)
            survivors.append({"mutant": n, "status": status, "diff": diff})
        killed = sum(1 for n in names if results[n] in KILLED)
        denominator = len(names) - len(excluded)
        score = killed / denominator if denominator else 0.0
        target = float(spec.get("target", config.get("target", 0.9)))
        ok = bool(names) and score >= target
        all_ok &= ok
        out[mod] = {
            "mutants": len(names),
            "killed": killed,
            "equivalent": len(excluded),
            "score": round(score, 4),
            "target": target,
            "meets_target": ok,
            "counts": counts,
            "survivors": survivors,
            "excluded": excluded,
            "stale_equivalents": stale,
        }
    return out, all_ok


def _print(result: dict) -> None:
    for mod, r in result.items():
        print(
            f"{mod}: score {100 * r['score']:.1f}% (target {100 * r['target']:.0f}%): "
            f"{r['killed']} killed of {r['mutants']} mutants, {r['equivalent']} equivalent "
            f"excluded; {', '.join(f'{v} {k}' for k, v in sorted(r['counts'].items()))}"
        )
        for s in r["survivors"]:
            print(f"  {s['status']}: {s['mutant']}")
            for line in s["diff"]:
                print(f"      {line.strip()}")
        for n in r["stale_equivalents"]:
            print(f"  STALE equivalent entry (the mutant changed; re-check it): {n}")
    total_k = sum(r["killed"] for r in result.values())
    total_d = sum(r["mutants"] - r["equivalent"] for r in result.values())
    if total_d:
        print(f"all modules: {100 * total_k / total_d:.1f}% ({total_k} / {total_d})")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default="tools/mutation.toml", help="default: %(default)s")
    p.add_argument("--json", help="also write the report as JSON here")
    p.add_argument("--globs", action="store_true", help="print the modules' mutant globs and stop")
    p.add_argument("modules", nargs="*", help="modules of the config (default: all)")
    args = p.parse_args(argv)
    root = Path.cwd()
    config = tomllib.loads(Path(args.config).read_text())
    modules = args.modules or list(config["modules"])
    unknown = [m for m in modules if m not in config["modules"]]
    if unknown:
        print(f"unknown module(s) {unknown}; the config has {list(config['modules'])}")
        return 2
    if args.globs:
        print("\n".join(g for m in modules for g in config["modules"][m]["globs"]))
        return 0
    if not (root / "mutants").is_dir():
        print("no mutants/ directory here: run tools/mutation.sh (or mutmut run) first")
        return 2
    result, ok = report(config, root, modules)
    _print(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
