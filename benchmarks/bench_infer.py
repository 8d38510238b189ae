"""Benchmark of ``censusdp infer``: tree GLS against a dense direct GLS solve, and a whole state.

Baseline in the same run: the dense direct GLS (one KKT solve over every bottom cell,
:func:`censusdp.infer._dense.dense_gls`) on small trees, reporting the time ratio and the
largest differences of estimates and standard deviations (they must agree to rounding):

* ``pl94``: the 1,890-cell pl94 schema, the 11 pl94-2020 queries at the production
  variances of the preset, a 4-level tree with ``--dense-blocks`` blocks (2: 3,780
  unknowns; the dense solve is cubic in them);
* ``toy``: a 30-cell schema with 8, 32 and 128 blocks (the dense cost grows as the cube
  of the blocks, the tree's linearly).

Then the whole state: ``censusdp infer`` on a release of ``--state`` (generated and
released with seed 1 unless ``--run`` names an existing release), in a subprocess so its
peak memory is its own, with the release's own TopDown estimation time as the reference.

Usage::

    .venv/bin/python benchmarks/bench_infer.py [--state VT] [--run RUN] [--workers 1]
                                               [--dense-blocks 2] [--skip-state]

Prints one JSON document to stdout; progress goes to stderr.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "infer"))

from _gls_gen import TOY_QUERIES, measure_gaussian, toy_schema, tree, truth  # noqa: E402

from censusdp.data.schema import get_schema  # noqa: E402
from censusdp.infer._algebra import make_layout  # noqa: E402
from censusdp.infer._dense import dense_gls  # noqa: E402
from censusdp.infer.gls import Constraints, make_lines, tree_gls  # noqa: E402
from censusdp.io.budget_files import load_preset  # noqa: E402


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _lines(layout):
    s = layout.schema
    ind = np.concatenate(
        [np.ones((s.size, 1)), np.eye(s.size)[:, layout.cells.reshape(-1)]], axis=1
    )
    return make_lines(layout, ["total"] + [f"c{i}" for i in range(layout.size)], ind)


def _compare(schema, hierarchy, plan, queries, seed: int, mean: float) -> dict:
    rng = np.random.default_rng(seed)
    x = truth(schema, hierarchy, rng, mean=mean)
    ms = measure_gaussian(schema, hierarchy, x, plan, rng, discrete=True)
    layout = make_layout(schema, list(queries), ("hhgq",))
    lines = _lines(layout)
    totals = {1: np.asarray(hierarchy.aggregate(np.asarray(x.sum(axis=1)))[1], float).ravel()}
    cons = Constraints(None, totals)
    t = time.perf_counter()
    tree_out = list(tree_gls(ms, hierarchy, layout, lines, cons))
    t_tree = time.perf_counter() - t
    t = time.perf_counter()
    dense = dense_gls(ms, hierarchy, layout, lines, cons)
    t_dense = time.perf_counter() - t
    de = ds = 0.0
    for r in tree_out:
        e, s = dense[r.level]
        de = max(de, float(np.abs(r.estimate - e[r.start : r.stop]).max()))
        ds = max(ds, float(np.abs(r.sd**2 - s[r.start : r.stop] ** 2).max()))
    return {
        "schema": schema.name,
        "blocks": int(hierarchy.blocks.size),
        "unknowns": int(hierarchy.blocks.size * layout.size),
        "tree_seconds": round(t_tree, 4),
        "dense_seconds": round(t_dense, 4),
        "dense_over_tree": round(t_dense / t_tree, 1),
        "max_abs_estimate_diff": de,
        "max_abs_variance_diff": ds,
    }


def dense_vs_tree(dense_blocks: int) -> list[dict]:
    """Tree GLS against the dense KKT solve on small trees (module docstring)."""
    out = []
    budget = load_preset("pl94-2020")
    plan: dict[str, dict[str, float]] = {}
    for m in budget.measurements():
        plan.setdefault(m.geolevel, {})[m.query] = float(m.mechanism.variance)
    pl94 = get_schema("pl94")
    levels = ("US", "State", "County", "Block")
    from censusdp.data.geography import GeoLevels

    four = GeoLevels.from_pairs([("US", 0), ("State", 2), ("County", 5), ("Block", 16)])
    queries = sorted({q for lv in levels for q in plan.get(lv, {})})
    _say(f"dense vs tree: pl94, {dense_blocks} blocks")
    out.append(
        _compare(
            pl94,
            tree((1, 1, dense_blocks), four),
            {lv: plan[lv] for lv in levels},
            queries,
            seed=1,
            mean=0.05,
        )
    )
    toy = toy_schema(3)
    toy_plan = {lv: dict(zip(TOY_QUERIES, (2.0, 3.0, 5.0, 4.0, 7.0), strict=True)) for lv in levels}
    for blocks in (8, 32, 128):
        _say(f"dense vs tree: toy, {blocks} blocks")
        out.append(
            _compare(toy, tree((1, 2, blocks // 2)), toy_plan, TOY_QUERIES, seed=blocks, mean=3.0)
        )
    return out


def whole_state(state: str, run: str | None, workers: int, work: Path) -> dict:
    """``censusdp infer`` on a release of a whole state, in a subprocess."""
    py = sys.executable
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    if run is None:
        cef, run = work / "cef", str(work / "run")
        _say(f"generating {state} and releasing it (seed 1)")
        subprocess.run(
            [
                py,
                "-m",
                "censusdp",
                "generate",
                "--state",
                state,
                "--seed",
                "1",
                "--out",
                str(cef),
                "--quiet",
            ],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        subprocess.run(
            [
                py,
                "-m",
                "censusdp",
                "run",
                "--input",
                str(cef),
                "--out",
                run,
                "--seed",
                "1",
                "--quiet",
                "--workers",
                str(workers),
            ],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
        )
    out = work / "gls"
    _say(f"censusdp infer {run} (workers {workers})")
    t = time.perf_counter()
    subprocess.run(
        [
            py,
            "-m",
            "censusdp",
            "infer",
            run,
            "--out",
            str(out),
            "--workers",
            str(workers),
            "--quiet",
        ],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - t
    m = json.loads((out / "manifest.json").read_text())
    rel = json.loads((Path(run) / "manifest.json").read_text())
    topdown = sum(v for k, v in rel["timings"].items() if k.startswith("estimate"))
    return {
        "release": run,
        "geounits": m["geounits"],
        "rows": m["rows"],
        "workers": workers,
        "infer_wall_seconds": round(wall, 2),
        "infer_timings": m["timings"],
        "infer_peak_memory_mb": m["peak_memory_mb"],
        "topdown_estimation_seconds_of_the_release": round(topdown, 2),
        "infer_over_topdown": round(wall / topdown, 3) if topdown else None,
        "max_sd_over_direct_sd": {lv: v["max_sd_over_direct_sd"] for lv, v in m["levels"].items()},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--state", default="VT")
    ap.add_argument("--run", default=None, help="an existing release (else one is made)")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--dense-blocks", type=int, default=2)
    ap.add_argument("--skip-state", action="store_true")
    args = ap.parse_args()
    out: dict = {"benchmark": "bench_infer", "python": sys.version.split()[0]}
    out["dense_vs_tree"] = dense_vs_tree(args.dense_blocks)
    if not args.skip_state:
        with tempfile.TemporaryDirectory(prefix="bench_infer_") as tmp:
            out["state"] = whole_state(args.state, args.run, args.workers, Path(tmp))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
