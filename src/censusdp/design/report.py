"""File output of the design lab: strict JSON, refusing to overwrite what it did not create.

Algorithm modules (:mod:`censusdp.design.strategy`, ...) never write files; this module
and :mod:`censusdp.design.figures` do.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np

from censusdp.design._errors import DesignError
from censusdp.io.atomic import write_text

__all__ = [
    "check_output",
    "load_targets",
    "resolve_targets",
    "strict_json",
    "write_allocation",
    "write_output",
]


def _plain(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_plain(v) for v in obj.tolist()]
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        obj = float(obj)
    if isinstance(obj, float) and not math.isfinite(obj):
        raise DesignError(f"refusing to write a non-finite number ({obj}) to JSON")
    return obj


def strict_json(obj: Any, *, indent: int | None = 2) -> str:
    """JSON text with numpy values converted; NaN and infinity are refused."""
    return json.dumps(_plain(obj), indent=indent, allow_nan=False) + "\n"


def check_output(path: str | os.PathLike[str], overwrite: bool) -> Path:
    """Refuse an existing non-empty file (or a non-empty directory) unless ``overwrite``."""
    p = Path(path)
    if p.is_dir():
        if any(p.iterdir()) and not overwrite:
            raise DesignError(f"{p} exists and is not empty; pass --overwrite to replace it")
    elif p.exists() and p.stat().st_size > 0 and not overwrite:
        raise DesignError(f"{p} exists and is not empty; pass --overwrite to replace it")
    return p


def write_output(text: str, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write ``text`` to ``path`` atomically, refusing to replace a non-empty file."""
    p = check_output(path, overwrite)
    if p.is_dir():
        raise DesignError(f"{p} is a directory; give a file name")
    write_text(text, p)
    return p


def load_targets(path: str | os.PathLike[str]) -> tuple[Any, ...]:
    """Read a target workload TOML: ``[[tables]]`` with ``geolevel``, ``query``, ``weight``.

    Raises:
        DesignError: naming the file, the entry and the problem.
    """
    import tomllib

    from censusdp.design.allocation import TargetTable

    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DesignError(f"{p}: cannot read target workload: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise DesignError(f"{p}: invalid TOML: {exc}") from None
    tables = data.get("tables")
    if not isinstance(tables, list) or not tables:
        raise DesignError(f"{p}: expected a non-empty array of [[tables]]")
    out = []
    for i, t in enumerate(tables):
        if not isinstance(t, dict) or not {"geolevel", "query"} <= set(t):
            raise DesignError(f"{p}: tables[{i}] needs keys 'geolevel' and 'query'")
        extra = set(t) - {"geolevel", "query", "weight"}
        if extra:
            raise DesignError(f"{p}: tables[{i}] has unknown key {sorted(extra)[0]!r}")
        try:
            out.append(TargetTable(str(t["geolevel"]), str(t["query"]), t.get("weight", 1.0)))
        except DesignError as exc:
            raise DesignError(f"{p}: tables[{i}]: {exc}") from None
    return tuple(out)


def write_allocation(
    report: Any, out_dir: str | os.PathLike[str], *, overwrite: bool = False
) -> dict[str, Path]:
    """Write ``allocation.json``, the preset ``<name>.toml`` and the heat table PNG."""
    from censusdp.design.allocation import budget_to_toml
    from censusdp.design.figures import plot_allocation_heat

    out = check_output(out_dir, overwrite)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": out / "allocation.json",
        "preset": out / f"{report.budget.name}.toml",
        "heat": out / "design_allocation_heat.png",
    }
    write_text(strict_json(report.to_dict()), paths["json"])
    header = [
        f"{report.budget.description}.",
        f"Written by censusdp design allocation (censusdp {report.to_dict()['package_version']}).",
        f"Target workload error (weighted MSE per cell): {report.original_error:.6g} with "
        f"{report.request.budget.name}, {report.optimized_error:.6g} with this allocation.",
    ]
    write_text(budget_to_toml(report.budget, header), paths["preset"])
    plot_allocation_heat(report, paths["heat"])
    return paths


def resolve_targets(spec: str, budget: Any) -> tuple[Any, ...]:
    """``"own"``, ``"revealed"`` (see :mod:`censusdp.design.allocation`) or a TOML path."""
    from censusdp.design.allocation import own_target_workload, revealed_target_workload

    if spec == "own":
        return own_target_workload(budget)
    if spec == "revealed":
        return revealed_target_workload(budget)
    return load_targets(spec)
