"""File output of the design lab: the allocation files and workload target files.

Algorithm modules (:mod:`censusdp.design.strategy`, ...) never write files; this module
and :mod:`censusdp.design.figures` do.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from censusdp.design._errors import DesignError
from censusdp.io.atomic import write_json, write_text
from censusdp.io.staging import staged_output
from censusdp.privacy.budget import Budget

__all__ = ["load_targets", "load_workload", "resolve_targets", "write_allocation"]


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
    except UnicodeDecodeError as exc:
        raise DesignError(
            f"{p}: not a TOML target workload: not UTF-8 text (byte {exc.start})"
        ) from None
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


def load_workload(
    path: str | os.PathLike[str], *, rho: object = None, neighbours: str | None = None
) -> Any:
    """Read a workload file (``.json``, else TOML) into a
    :class:`~censusdp.design.workload.CustomWorkload`; ``rho`` and ``neighbours``, when
    given, override the file's.

    Raises:
        DesignError: one line naming the file, the field and the value.
    """
    import json
    import tomllib

    from censusdp.design.workload import workload_from_mapping

    p = Path(path)
    kind = "JSON" if p.suffix.lower() == ".json" else "TOML"
    try:
        text = p.read_text(encoding="utf-8")
        data = json.loads(text) if kind == "JSON" else tomllib.loads(text)
    except OSError as exc:
        raise DesignError(f"{p}: cannot read workload: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise DesignError(f"{p}: not a workload: not UTF-8 text (byte {exc.start})") from None
    except ValueError as exc:  # TOMLDecodeError and JSONDecodeError
        raise DesignError(f"{p}: invalid {kind}: {exc}") from None
    return workload_from_mapping(data, str(p), rho=rho, neighbours=neighbours)


def write_allocation(
    report: Any, out_dir: str | os.PathLike[str], *, overwrite: bool = False
) -> dict[str, Path]:
    """Write ``allocation.json``, the preset ``<name>.toml`` and the heat table PNG."""
    with staged_output(out_dir, overwrite, command="design allocation") as staging:
        _write_allocation_into(report, _allocation_files(report, staging.path))
    return _allocation_files(report, staging.out_dir)


def _allocation_files(report: Any, out: Path) -> dict[str, Path]:
    """The files written; a preset only for a budget (a workload file's own schema
    cannot be released by ``censusdp run``)."""
    files = {"json": out / "allocation.json"}
    if isinstance(report.budget, Budget):
        files["preset"] = out / f"{report.budget.name}.toml"
    files["heat"] = out / "design_allocation_heat.png"
    return files


def _write_allocation_into(report: Any, paths: dict[str, Path]) -> None:
    from censusdp.design.allocation import budget_to_toml
    from censusdp.design.figures import plot_allocation_heat

    write_json(report.to_dict(), paths["json"])
    plot_allocation_heat(report, paths["heat"])
    if "preset" not in paths:
        return
    header = [
        f"{report.budget.description}.",
        f"Written by censusdp design allocation (censusdp {report.to_dict()['package_version']}).",
        f"Target workload error (weighted MSE per cell): {report.original_error:.6g} with "
        f"{report.request.budget.name}, {report.optimized_error:.6g} with this allocation.",
    ]
    write_text(budget_to_toml(report.budget, header), paths["preset"])


def resolve_targets(spec: str, budget: Budget) -> tuple[Any, ...]:
    """``"own"``, ``"revealed"`` (see :mod:`censusdp.design.allocation`) or a TOML path."""
    from censusdp.design.allocation import own_target_workload, revealed_target_workload

    if spec == "own":
        return own_target_workload(budget)
    if spec == "revealed":
        return revealed_target_workload(budget)
    return load_targets(spec)
