"""The DHC households pass by pass: production's outer passes, one outer pass, one pass.

Given a ``dhc-2020`` release (its household and unit run, ``dhc-2020-units``) and its
input, it re-estimates the release's households from its NMF (read, never measured
again: :func:`censusdp.release.dhc_units.estimate_dhch_run`, the units by ``tenvacgq``
then the households held to their tenure) in three modes:

* ``outer``: production's ordering as production runs it (``L2PlusRounder_interleaved``,
  the default): least squares of the six marginals, rounded in the two nested crosses
  of ``detailedcoupletypemultgendetownchildsize``; then least squares of the two
  ``hhage`` crosses and ``detailed`` holding those rounded crosses exactly, rounded in
  ``detailed``;
* ``flat``: the same passes in one outer pass (censusdp's plan before outer passes):
  both least-squares passes (the second holding nothing), then both rounding passes;
* ``single``: one least-squares pass over every query, cell-wise rounding.

After every pass of every family it tabulates the children's estimate (real after a
least-squares pass, integer after a rounding pass) in P16 (households by type, 9 lines)
and H9 (by size, 8 lines), and reports per pass and geolevel of the run's spine (State,
County, BlockGroup; a geounit bypassed as its parent's one child takes its parent's)
the accuracy ``1 - L1 / (2 POP)`` of the leaf lines against the truth (as
:func:`censusdp.evaluate.metrics.tvd`, on real counts too), what the pass holds, the
levels whose families went through it (``families_at``: a family whose level measured
one pass's queries only is solved in one pass), and the CPU seconds of each mode. ``released`` is the TopDown's final integer histogram.

    PYTHONPATH=src python benchmarks/bench_dhc_household_passes.py \\
        --input /tmp/vt1 --run /tmp/vt1-dhc
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from censusdp.data.schema import get_schema, unit_schema_of
from censusdp.data.schema_dhc import DHCH_2020
from censusdp.evaluate.dhc import truth_dhc_histograms
from censusdp.io.cef import read_cef
from censusdp.io.rundir import RunDir
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.release import dhc_units, estimation
from censusdp.release.manifest import recorded_budgets
from censusdp.release.options import ReleaseOptions
from censusdp.release.spine import geography_of_run, tabulation_levels
from censusdp.release.topdown import multipass, passes, tasks
from censusdp.tables.dhc import dhc_household_rows, dhc_table_definition

TABLES = ("P16", "H9")
LEVELS = ("State", "County", "BlockGroup")
MODES = ("outer", "flat", "single")


class Recorder:
    """Per stage (a pass's label) and level, the children's table lines after that pass."""

    def __init__(self, hierarchy: Any) -> None:
        self.sizes = [g.size for g in hierarchy.geocodes]
        self.lines = {
            t: dhc_household_rows(sp.identity(DHCH_2020.size, format="csr", dtype=np.int64))
            @ dhc_table_definition(t).matrix
            for t in TABLES
        }  # (1,578,528 x lines) per table
        self.stages: dict[str, dict[int, dict[str, np.ndarray]]] = {}
        self.active = False
        self.task: tasks.Task | None = None

    def record(self, stage: str, x: np.ndarray) -> None:
        t = self.task
        if not self.active or t is None or t.chunks:  # a split family's coarse solve: not children
            return
        level = t.level + 1
        at = self.stages.setdefault(stage, {}).setdefault(
            level,
            {n: np.full((self.sizes[level], m.shape[1]), np.nan) for n, m in self.lines.items()},
        )
        x = np.asarray(x, dtype=np.float64)
        for name, m in self.lines.items():
            lines = (sp.csr_matrix(x) @ m[t.kept]).toarray()
            at[name][t.child_start : t.child_start + x.shape[0]] = lines


def _instrument(rec: Recorder) -> dict[str, Any]:
    """Wrap the functions a household TopDown's passes go through; return the originals."""
    saved = {
        "run_task": tasks.run_task,
        "tasks.solve_l2": tasks.solve_l2,
        "run_l2": multipass._run_l2,
        "round": multipass.round_in_passes,
        "run_topdown": dhc_units.run_topdown,
    }

    def run_task(task: tasks.Task) -> tasks.TaskResult:
        rec.task = task
        return saved["run_task"](task)

    def solve_l2(sub: Any, **kw: Any) -> Any:
        res = saved["tasks.solve_l2"](sub, **kw)
        rec.record("least squares (one pass)", res.x)
        return res

    def run_l2(sub, l2, indices, exact, anchor, opts):  # type: ignore[no-untyped-def]
        results, holds = saved["run_l2"](sub, l2, indices, exact, anchor, opts)
        for p, res in zip(indices, results, strict=True):
            rec.record(f"least squares {p + 1}", res.x)
        return results, holds

    def round_in(sub, x, rounding, **kw):  # type: ignore[no-untyped-def]
        order = list(kw.pop("run", None) or range(len(rounding.passes)))
        for i, p in enumerate(order[:-1]):  # each earlier pass alone, for its snapshot
            rec.record(
                f"rounding {p + 1}", saved["round"](sub, x, rounding, run=order[: i + 1], **kw)
            )
        out = saved["round"](sub, x, rounding, run=order, **kw)
        rec.record(f"rounding {order[-1] + 1}", out)
        return out

    def run_topdown(ms: Any, *args: Any, **kw: Any) -> Any:
        rec.active = ms.schema.name == DHCH_2020.name
        try:
            return saved["run_topdown"](ms, *args, **kw)
        finally:
            rec.active = False

    tasks.run_task, tasks.solve_l2, multipass._run_l2 = run_task, solve_l2, run_l2
    tasks.round_in_passes = multipass.round_in_passes = round_in
    dhc_units.run_topdown = run_topdown
    return saved


def _restore(saved: dict[str, Any]) -> None:
    tasks.run_task, tasks.solve_l2 = saved["run_task"], saved["tasks.solve_l2"]
    multipass._run_l2 = saved["run_l2"]
    tasks.round_in_passes = multipass.round_in_passes = saved["round"]
    dhc_units.run_topdown = saved["run_topdown"]


def _fill_bypassed(lines: np.ndarray, parent: np.ndarray, above: np.ndarray) -> np.ndarray:
    """A geounit that is its parent's one child is its parent at every pass (its own
    family's least squares would only copy the parent's final counts)."""
    only = np.bincount(parent, minlength=above.shape[0])[parent] == 1
    lines = lines.copy()
    lines[only] = above[parent[only]]
    return lines


def accuracy(truth: np.ndarray, est: np.ndarray, leaves: list[int]) -> float:
    """``1 - L1 / (2 POP)`` of the leaf lines over a level's geounits."""
    t, r = truth[:, leaves], est[:, leaves]
    return float(1.0 - np.abs(r - t).sum() / (2.0 * t.sum()))


HOLDS = {
    "outer": {
        "least squares 1": "the six marginals; holds nothing for the next",
        "rounding 1": "the two nested crosses of detailedcoupletypemultgendetownchildsize; "
        "their rounded answers held exactly by every later pass",
        "least squares 2": "the two hhage crosses and detailed, holding the rounded crosses",
        "rounding 2": "detailed, holding the rounded crosses",
    },
    "flat": {
        "least squares 1": "the six marginals; holds nothing (its constrain-to query is "
        "not measured)",
        "least squares 2": "the two hhage crosses and detailed, from scratch",
        "rounding 1": "the two nested crosses, of the second least squares",
        "rounding 2": "detailed, holding the crosses of rounding 1",
    },
    "single": {
        "least squares (one pass)": "every measured query at once",
        "released": "cell-wise rounding",
    },
}


def _estimate(run: RunDir, mode: str, rec: Recorder, inputs: dict[str, Any]) -> dict[str, Any]:
    table = passes.PRODUCTION_PASSES
    saved_plan = table["dhch-2020"]
    if mode == "single":
        del table["dhch-2020"]
    elif mode == "flat":
        plan = saved_plan["*"]
        table["dhch-2020"] = {"*": replace(plan, l2_outer=(), rounder_outer=())}
    saved = _instrument(rec)
    c0, w0 = time.process_time(), time.perf_counter()
    try:
        units, households = dhc_units.estimate_dhch_run(
            inputs["households"], inputs["units"], inputs["hierarchy"], inputs["held"],
            inputs["options"],
        )  # fmt: skip
    finally:
        _restore(saved)
        table["dhch-2020"] = saved_plan
    cpu = time.process_time() - c0
    rec.stages.setdefault("released", {})
    for level, hist in enumerate(households.histograms):
        rec.stages["released"][level] = _tables(hist)
    return {"cpu_seconds": cpu, "wall_seconds": time.perf_counter() - w0}


def _tables(hist: sp.spmatrix) -> dict[str, np.ndarray]:
    """P16 and H9 of ``dhch-2020`` histogram rows, dense ``(rows x lines)``."""
    rows = dhc_household_rows(sp.csr_matrix(hist))
    return {t: (rows @ dhc_table_definition(t).matrix).toarray().astype(float) for t in TABLES}


def _truth(cef: Any, geo: Any, h: Any) -> dict[str, list[np.ndarray]]:
    """The truth's P16 and H9 at every level of the household run's hierarchy ``h`` (its
    spine: the blocks taken from tabulation order to the unit run's)."""
    blocks, _ = truth_dhc_histograms(cef.persons, cef.units, geo.tabulation)
    levels = [_tables(a) for a in h.aggregate(geo.units.to_estimation(blocks))]
    return {t: [lv[t] for lv in levels] for t in TABLES}


def _inputs(run: RunDir) -> dict[str, Any]:
    measured = run.manifest()
    spent = ReleaseBudget(*recorded_budgets(measured, str(run.manifest_file)))
    hierarchy, inv = run.invariants(tabulation_levels(spent.persons))
    geo = geography_of_run(run.path, measured, hierarchy)
    uh, uinv, _ = estimation.EstimationInputs.on(geo, inv, None, None).units_on()
    dhch = get_schema(DHCH_2020.name)
    options = ReleaseOptions()  # the release's defaults: what `censusdp run` estimated with
    return {
        "households": run.nmf_reader("units", dhch, geo.units.estimation, dhch.name),
        "units": run.nmf_reader(
            "units", unit_schema_of(dhch.name), geo.units.estimation, dhch.name
        ),
        "hierarchy": uh,
        "held": dhc_units.HeldUnits(dhc_units.gqhh_vector_of(uinv), uinv.h1_occupied),
        "geography": geo,
        "options": replace(
            estimation._topdown_options(options, "dhcp-2020"),
            estimator=options.estimator_for(DHCH_2020.name),
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", required=True, type=Path, help="the CEF the run read")
    ap.add_argument("--run", required=True, type=Path, help="a dhc-2020 release")
    ap.add_argument("--modes", default=",".join(MODES))
    args = ap.parse_args()
    run = RunDir(args.run)
    inputs = _inputs(run)
    h = inputs["hierarchy"]
    cef = read_cef(args.input)
    truth = _truth(cef, inputs["geography"], h)
    names = [g.name for g in h.geolevels]
    report: dict[str, Any] = {"input": str(args.input), "run": str(args.run), "levels": names}
    report["households_true"] = int(truth["H9"][0][:, 0].sum())
    for mode in args.modes.split(","):
        rec = Recorder(h)
        out = _estimate(run, mode, rec, inputs)
        out["stages"] = {}
        for stage, by_level in rec.stages.items():
            row: dict[str, Any] = {"holds": HOLDS[mode].get(stage, ""), "families_at": [
                names[lv] for lv in sorted(by_level)
            ]}  # fmt: skip
            filled: dict[str, np.ndarray] = {}
            for level, name in enumerate(names):
                for t in TABLES:
                    n_lines = dhc_table_definition(t).matrix.shape[1]
                    lines = by_level.get(level, {}).get(t)
                    if lines is None:
                        lines = np.full((h.geocodes[level].size, n_lines), np.nan)
                    if level:
                        lines = _fill_bypassed(lines, h.parent[level], filled[t])
                    filled[t] = lines
                    if name in LEVELS and not np.isnan(filled[t]).any():
                        leaves = list(dhc_table_definition(t).leaves)
                        row[f"{t} {name}"] = round(accuracy(truth[t][level], filled[t], leaves), 4)
            out["stages"][stage] = row
        out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        report[mode] = out
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
