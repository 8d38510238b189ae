"""The demonstration: generate a small state, release it with the 2020 budget, summarise accuracy.

:func:`run_demo` is what ``censusdp demo`` calls: the whole pipeline on built-in data
(the synthetic census built on real 2010 tract totals), a short accuracy summary per
geolevel (computed from the published tables against the truth's tables), and the full
evaluation (``censusdp.evaluate``) with its self-contained HTML report.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from censusdp.data.geography import GeoLevels, Hierarchy
from censusdp.data.schema import HHGQ_LEVELS
from censusdp.io.budget_files import load_preset
from censusdp.io.cef import read_cef
from censusdp.io.rundir import RunDir
from censusdp.io.staging import staged_output
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.progress import Reporter
from censusdp.release.options import Execution, ReleaseOptions
from censusdp.release.pipeline import run_release
from censusdp.tables import table_definition, tables_to_arrays, tabulate

__all__ = ["DemoSummary", "accuracy_by_level", "run_demo"]


@dataclass(frozen=True)
class DemoSummary:
    """What the demo produced and how accurate the release is."""

    out_dir: Path
    persons: int
    units: int
    blocks_by_level: dict[str, int]
    gq_by_type: dict[str, int]
    accuracy: list[dict]
    manifest: dict
    report: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def accuracy_by_level(truth_dir: Path, run_dir: Path, geolevels: GeoLevels) -> list[dict]:
    """Per geolevel: mean absolute error of total population and of P2 cells, and TVD.

    TVD follows JASON JSR-19-2F sec. 6.1: ``1 - L1 / (2 POP)`` per geounit over the cells of
    table P2 (Hispanic origin by race), averaged over geounits with population > 0.
    """
    cef = read_cef(truth_dir)
    hierarchy = Hierarchy.from_blocks(
        np.concatenate([cef.units["geocode"], cef.persons["geocode"]]), geolevels
    )
    truth = tables_to_arrays(tabulate(cef.persons, cef.units, hierarchy), hierarchy)
    released = tables_to_arrays({n: RunDir(run_dir).table(n) for n in ("P1", "P2")}, hierarchy)
    out = []
    for li, lv in enumerate(geolevels.levels):
        t_tot = truth["P1"][li][:, 0].astype(float)
        r_tot = released["P1"][li][:, 0].astype(float)
        leaf = list(table_definition("P2").leaves)  # Hispanic + 63 not-Hispanic races
        t = truth["P2"][li][:, leaf].astype(float)
        r = released["P2"][li][:, leaf].astype(float)
        pop = t.sum(axis=1)
        has = pop > 0
        tvd = 1 - np.abs(r - t).sum(axis=1)[has] / (2 * pop[has])
        out.append(
            {
                "geolevel": lv.name,
                "units": int(t_tot.size),
                "mean_population": float(t_tot.mean()),
                "total_mae": float(np.abs(r_tot - t_tot).mean()),
                "race_hispanic_cell_mae": float(np.abs(r - t).mean()),
                "race_hispanic_tvd": float(tvd.mean()) if tvd.size else float("nan"),
            }
        )
    return out


def run_demo(
    out_dir: str | Path,
    *,
    state: str = "VT",
    scale: float = 0.05,
    seed: int = 2020,
    workers: int = 1,
    progress: Callable[[str], None] | None = None,
    overwrite: bool = False,
) -> DemoSummary:
    """Generate ``state`` (a ``scale`` fraction of its tracts, from ``seed``), release it
    with the 2020 production budget and secure randomness, and summarise it.

    ``out_dir`` gets ``cef/``, ``run/``, ``evaluation.json``, ``report.html`` and a
    ``manifest.json``; an existing demo directory is replaced only with ``overwrite``.
    """
    with staged_output(out_dir, overwrite, command="demo") as staging:
        shown = _shown_as(progress, str(staging.path), str(Path(out_dir)))
        summary = _demo_into(staging.path, state, scale, seed, workers, shown)
    final = staging.out_dir
    return replace(summary, out_dir=final, report=final / "report.html")


class _Renamed(Reporter):
    """The command line's reporter, its lines and bar labels naming ``new`` for ``old``."""

    def __init__(self, inner: Reporter, old: str, new: str) -> None:
        self.__dict__.update(inner.__dict__)  # the same stream, bars and lock
        self._old, self._new = old, new

    def __call__(self, msg: str) -> None:
        super().__call__(msg.replace(self._old, self._new))

    def log(self, level: int, msg: str) -> None:
        super().log(level, msg.replace(self._old, self._new))

    def open_bar(self, label: str, total: int | None, unit: str, *, keep: bool = True) -> Any:
        return super().open_bar(label.replace(self._old, self._new), total, unit, keep=keep)


def _shown_as(progress: Callable[[str], None] | None, old: str, new: str) -> Any:
    """``progress`` naming the demo's directory as the user named it, not by the staging
    directory it is built in (which is gone when the demo ends)."""
    if isinstance(progress, Reporter):
        return _Renamed(progress, old, new)
    if progress is None:
        return None
    return lambda msg: progress(msg.replace(old, new))


def _demo_into(
    out_dir: Path,
    state: str,
    scale: float,
    seed: int,
    workers: int,
    progress: Callable[[str], None] | None,
) -> DemoSummary:
    from censusdp.generate import generate_state

    cef_dir, run_dir = out_dir / "cef", out_dir / "run"
    gen = generate_state(state, seed, cef_dir, scale=scale, progress=progress, overwrite=True)
    budget = load_preset("pl94-2020")
    manifest = run_release(
        cef_dir,
        run_dir,
        ReleaseBudget(budget, load_preset("pl94-2020-units")),
        ReleaseOptions(seed=None),
        Execution(workers=workers, progress=progress),
        overwrite=True,
    )
    geolevels = GeoLevels.from_pairs(list(budget.geolevels))
    accuracy = accuracy_by_level(cef_dir, run_dir, geolevels)
    from censusdp.evaluate import evaluate

    report = out_dir / "report.html"
    evaluate(
        cef_dir,
        run_dir,
        json_path=out_dir / "evaluation.json",
        html_path=report,
        execution=Execution(progress=progress),
        shown_as=("cef/", "run/"),  # beside the report (the staging path is temporary)
    )
    return DemoSummary(
        out_dir=out_dir,
        persons=int(gen.persons),
        units=int(gen.units),
        blocks_by_level=dict(manifest["geounits"]),
        gq_by_type={HHGQ_LEVELS[int(g)]: int(n) for g, n in dict(gen.gq_persons).items()},
        accuracy=accuracy,
        manifest=manifest,
        report=report,
    )
