"""Design-lab benchmark: structured vs dense evaluation, optimiser vs baselines, and a
TopDown simulation of the optimised allocation against the production one. Prints JSON.

Sections (each compares with a baseline in the same run):

* ``strategy``: rootmse of the optimised strategy over the best standard strategy
  (identity, hierarchical b = 2/4/8/16, Haar wavelet) on all-range and prefix, both
  privacy models; and the time of censusdp's Gram-based evaluation of ``H_2`` against a
  dense ``numpy.linalg.pinv`` of the explicit matrices (same number, speed ratio).
* ``hdmm``: the optimised strategy on 1-D all-range and prefix (``--hdmm-ns``) and on
  product workloads (pl94, dhc-lite's SEX x AGE marginals, two-way marginals, 2-D
  ranges and prefixes), both privacy models, against HDMM's rootmse where it was
  measured (:data:`HDMM_REFERENCE`), censusdp's own figure before issue 38, the SVD
  bound and, under zCDP on one attribute, the certified L2 optimum; CPU seconds. The
  run exits with status 1, naming the case, when censusdp is worse than HDMM or than
  before, or slower than a limit.
* ``small_n``: wrong-answer rates of the LP mechanisms over the range-restricted
  geometric and fair mechanisms, and LP solve times.
* ``allocation``: error of the optimised allocation over ``pl94-2020`` on its own
  target workload (closed form and Monte Carlo), and the time of the block-decomposed
  error against the dense 2,016 x 2,016 computation.
* ``topdown`` (``--topdown``): generates a synthetic state at ``--scale``, releases it
  with ``pl94-2020`` and with the optimised allocation under the same seeds, and
  compares the released MDF's error on every target table at every geolevel (mean
  squared error per cell, averaged over geounits): post-processing (non-negativity,
  rounding, invariants, consistency across levels) included.

Run: ``.venv/bin/python benchmarks/bench_design.py [--ns 64,256] [--hdmm-ns 64,128,256,512,1024]
[--sections strategy,hdmm,small_n,allocation] [--topdown --scale 0.05 --seeds 1,2]``
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import scipy.sparse as sp  # noqa: E402

from censusdp.data.queries import make_query  # noqa: E402
from censusdp.data.schema import get_schema  # noqa: E402
from censusdp.design import (  # noqa: E402
    AllocationRequest,
    StrategyRequest,
    evaluate_strategy,
    optimize_allocation,
    own_target_workload,
    simulate_errors,
)
from censusdp.design._matrices import hierarchical_matrix  # noqa: E402
from censusdp.design.level_model import LevelErrorModel  # noqa: E402
from censusdp.design.small_n import SmallNRequest, optimal_mechanism, small_n_report  # noqa: E402
from censusdp.io.budget_files import load_preset  # noqa: E402


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def bench_strategy(ns: list[int], seed: int) -> dict:
    out: dict = {"rows": []}
    for workload in ("all-range", "prefix"):
        for privacy in ("zcdp", "pure"):
            for n in ns:
                std = {}
                for name, b in (
                    ("identity", 2),
                    ("hierarchical", 2),
                    ("hierarchical", 4),
                    ("hierarchical", 8),
                    ("hierarchical", 16),
                    ("wavelet", 2),
                ):
                    r = evaluate_strategy(
                        StrategyRequest(workload, n, name, branching=b, privacy=privacy)
                    )
                    std[f"{name}{b if name == 'hierarchical' else ''}"] = r.rootmse
                t = time.perf_counter()
                opt = evaluate_strategy(
                    StrategyRequest(workload, n, "optimized", privacy=privacy, seed=seed)
                )
                secs = time.perf_counter() - t
                best = min(std, key=std.get)
                out["rows"].append(
                    {
                        "workload": workload,
                        "privacy": privacy,
                        "n": n,
                        "best_standard": best,
                        "best_standard_rootmse": std[best],
                        "optimized_rootmse": opt.rootmse,
                        "optimized_over_best_standard": opt.rootmse / std[best],
                        "svd_bound": opt.svd_bound,
                        "optimized_over_svd_bound": opt.rootmse / opt.svd_bound,
                        "method": opt.optimizer["method"],
                        "optimize_seconds": round(secs, 3),
                    }
                )
                _say(
                    f"strategy {workload} {privacy} n={n}: {opt.rootmse / std[best]:.3f} of {best}"
                )
    # evaluation speed: Gram-based vs explicit pinv (all-range, H_2)
    n = max(ns)
    t = time.perf_counter()
    ours = evaluate_strategy(StrategyRequest("all-range", n, "hierarchical")).rootmse
    t_ours = time.perf_counter() - t
    t = time.perf_counter()
    i, j = np.triu_indices(n)
    w = np.zeros((i.size, n))
    for k, (a, b) in enumerate(zip(i, j, strict=True)):
        w[k, a : b + 1] = 1.0
    a = hierarchical_matrix(n, 2).toarray()
    sens = np.sqrt(np.square(a).sum(axis=0).max())
    dense = float(sens * np.linalg.norm(w @ np.linalg.pinv(a), "fro") / np.sqrt(w.shape[0]))
    t_dense = time.perf_counter() - t
    out["evaluation"] = {
        "n": n,
        "rootmse_structured": ours,
        "rootmse_dense": dense,
        "seconds_structured": round(t_ours, 4),
        "seconds_dense_pinv": round(t_dense, 4),
        "speedup": round(t_dense / t_ours, 1),
    }
    return out


# -- censusdp against HDMM -------------------------------------------------------------------

HDMM_REFERENCE: dict[tuple[str, str, str | None], str] = {
    ("zcdp", "all-range", "256"): "2.901435",
    ("zcdp", "all-range", "512"): "3.207253",
    ("zcdp", "all-range", "1024"): "3.515083",
    ("zcdp", "prefix", "1024"): "2.955452",
    ("pure", "prefix", "128"): "4.45388",
    ("pure", "pl94", None): "2.51803",
}
"""HDMM's rootmse (McKenna et al. 2018, their public code; unit-variance noise, L2 column
norm under zCDP with its convex solver, L1 under pure DP best of five seeds), as measured
side by side for issue 38 and re-scored by an independent evaluator. Kept as printed:
a figure is matched when censusdp is below it plus half a unit of its last digit."""

HDMM_CPU_SECONDS: dict[tuple[str, str, str | None], float] = {("zcdp", "prefix", "1024"): 72.0}
"""HDMM's CPU seconds where they were measured (issue 38)."""

CPU_LIMITS: dict[tuple[str, str, str | None], float] = {("zcdp", "all-range", "1024"): 60.0}
"""CPU seconds censusdp must stay within (issue 38: all-range n = 1024 under zCDP)."""

PREVIOUS: dict[tuple[str, str, str | None], float] = {
    ("pure", "all-range", "64"): 3.9261617778522253,
    ("pure", "all-range", "128"): 4.751875685205906,
    ("pure", "all-range", "256"): 5.695723926223013,
    ("pure", "all-range", "512"): 6.749281107197728,
    ("pure", "all-range", "1024"): 7.794654899033999,
    ("pure", "prefix", "64"): 3.763294439349343,
    ("pure", "prefix", "128"): 4.4763741711735365,
    ("pure", "prefix", "256"): 5.18786296299353,
    ("pure", "prefix", "512"): 5.948054490602569,
    ("pure", "prefix", "1024"): 6.744299837120233,
    ("pure", "pl94", None): 2.5180269285982426,
    ("pure", "marginals:2x116", None): 1.4877335481363922,
    ("pure", "marginals:8x2x2x63:2", None): 3.035192012415812,
    ("pure", "all-range", "32x32"): 10.120047210223186,
    ("pure", "prefix", "64x64"): 14.162384928392282,
    ("zcdp", "all-range", "64"): 2.3022129336586303,
    ("zcdp", "all-range", "128"): 2.598991735402981,
    ("zcdp", "all-range", "256"): 2.9014447956104195,
    ("zcdp", "all-range", "512"): 3.2100404894032586,
    ("zcdp", "all-range", "1024"): 3.524077579700692,
    ("zcdp", "prefix", "64"): 2.099856719003166,
    ("zcdp", "prefix", "128"): 2.3110028092850867,
    ("zcdp", "prefix", "256"): 2.524423401382154,
    ("zcdp", "prefix", "512"): 2.7394644397004124,
    ("zcdp", "prefix", "1024"): 2.991917501502013,
    ("zcdp", "pl94", None): 1.4740926554074825,
    ("zcdp", "marginals:2x116", None): 1.204562535608526,
    ("zcdp", "marginals:8x2x2x63:2", None): 1.701539666799831,
    ("zcdp", "all-range", "32x32"): 4.059728666461762,
    ("zcdp", "prefix", "64x64"): 4.409398240342741,
}
"""censusdp's rootmse before issue 38 (seed 0, default options): no workload may get worse."""

HDMM_WORKLOADS: tuple[tuple[str, str | None], ...] = (
    ("pl94", None),
    ("marginals:2x116", None),
    ("marginals:8x2x2x63:2", None),
    ("all-range", "32x32"),
    ("prefix", "64x64"),
)
"""Product workloads of the comparison: pl94's ten marginals, dhc-lite's SEX x AGE
marginals (all four), the two-way marginals of the PL94 histogram, 2-D ranges and 2-D
prefixes."""


def _half_unit(text: str) -> float:
    decimals = len(text.split(".")[1]) if "." in text else 0
    return 0.5 * 10.0**-decimals


def bench_hdmm(ns: list[int], seed: int) -> dict:
    """censusdp's optimised strategy on every workload and privacy model, against the
    HDMM reference, censusdp's figure before issue 38, the SVD bound and (1-D zCDP) the
    dual lower bound; CPU seconds by ``time.process_time`` (one BLAS thread)."""
    cases = [(w, str(n)) for w in ("all-range", "prefix") for n in ns] + list(HDMM_WORKLOADS)
    rows, failures = [], []
    for privacy in ("zcdp", "pure"):
        for workload, n in cases:
            key = (privacy, workload, n)
            cpu = time.process_time()
            r = evaluate_strategy(
                StrategyRequest(workload, n, "optimized", privacy=privacy, seed=seed)
            )
            cpu = time.process_time() - cpu
            ref = HDMM_REFERENCE.get(key)
            row = {
                "workload": workload,
                "n": n,
                "privacy": privacy,
                "rootmse": r.rootmse,
                "hdmm_rootmse": float(ref) if ref else None,
                "censusdp_before_rootmse": PREVIOUS.get(key),
                "svd_bound": r.svd_bound,
                "lower_bound_rootmse": r.optimizer["lower_bound_rootmse"],
                "method": r.optimizer["method"],
                "cpu_seconds": round(cpu, 2),
                "hdmm_cpu_seconds": HDMM_CPU_SECONDS.get(key),
            }
            if ref is not None and r.rootmse > float(ref) + _half_unit(ref):
                failures.append(f"{key}: censusdp {r.rootmse:.7f} worse than HDMM {ref}")
            if key in PREVIOUS and r.rootmse > PREVIOUS[key] * (1 + 1e-9):
                failures.append(f"{key}: {r.rootmse:.7f} worse than before, {PREVIOUS[key]:.7f}")
            if r.rootmse < r.svd_bound * (1 - 1e-9):
                failures.append(f"{key}: {r.rootmse:.7f} below the SVD bound {r.svd_bound:.7f}")
            limit = min(CPU_LIMITS.get(key, math.inf), HDMM_CPU_SECONDS.get(key, math.inf))
            if cpu > limit:
                failures.append(f"{key}: {cpu:.1f} CPU s, more than {limit:.0f}")
            rows.append(row)
            _say(
                f"hdmm {privacy} {workload} {n}: {r.rootmse:.7f} (HDMM {ref}, before "
                f"{PREVIOUS.get(key, math.nan):.7f}) {cpu:.1f} CPU s"
            )
    return {"rows": rows, "failures": failures}


def bench_small_n() -> dict:
    rows = []
    for n, eps in ((2, "1/2"), (10, "1/2"), (10, "1"), (30, "1/2")):
        t = time.perf_counter()
        report = small_n_report(SmallNRequest(n, eps))
        secs = time.perf_counter() - t
        rates = {m.name: m.wrong_answer_rate for m in report.mechanisms}
        worst = {m.name: 1 - float(m.correct_probability.min()) for m in report.mechanisms}
        t = time.perf_counter()
        optimal_mechanism(
            n, eps, ("weak_honesty", "symmetry", "column_honesty", "column_monotonicity")
        )
        lp_secs = time.perf_counter() - t
        rows.append(
            {
                "n": n,
                "epsilon": eps,
                "wrong_answer_rate": rates,
                "worst_case_wrong_answer_rate": worst,
                "lp_all_over_geometric": rates["lp_all"] / rates["geometric_clamped"],
                "lp_all_over_fair": rates["lp_all"] / rates["fair"],
                "report_seconds": round(secs, 3),
                "lp_all_seconds": round(lp_secs, 4),
            }
        )
        _say(
            f"small-n n={n} eps={eps}: lp_all {rates['lp_all']:.4f}, "
            f"geometric_clamped {rates['geometric_clamped']:.4f}"
        )
    return {"rows": rows}


def bench_allocation(trials: int, seed: int) -> dict:
    budget = load_preset("pl94-2020")
    targets = own_target_workload(budget)
    t = time.perf_counter()
    report = optimize_allocation(AllocationRequest(budget))
    t_opt = time.perf_counter() - t
    sim_orig = simulate_errors(budget, targets, trials=trials, seed=seed)
    sim_new = simulate_errors(report.budget, targets, trials=trials, seed=seed)
    # block-decomposed vs dense error of one geolevel
    schema = get_schema("pl94")
    level = "Tract"
    shares = [(q, float(s)) for q, s in budget.query_shares[level].items()]
    terms = [
        (t.query, 1.0 / make_query(schema, t.query).n_rows) for t in targets if t.geolevel == level
    ]
    t = time.perf_counter()
    model = LevelErrorModel(schema, [q for q, _ in shares])
    fast = model.level_error(shares, terms)[0]
    t_fast = time.perf_counter() - t
    t = time.perf_counter()
    m = np.zeros((schema.size, schema.size))
    for q, s in shares:
        mat = make_query(schema, q).matrix
        m += s * (mat.T @ mat).toarray()
    a = np.zeros_like(m)
    for q, c in terms:
        mat = make_query(schema, q).matrix
        a += c * (mat.T @ mat).toarray()
    dense = float(np.trace(np.linalg.solve(m, a)))
    t_dense = time.perf_counter() - t
    return {
        "budget": budget.name,
        "targets": "own (every measured query at every geolevel, weight 1)",
        "original_error": report.original_error,
        "optimized_error": report.optimized_error,
        "optimized_over_original": report.optimized_error / report.original_error,
        "optimize_seconds": round(t_opt, 2),
        "simulation": {"original": sim_orig, "optimized": sim_new},
        "level_error_check": {
            "geolevel": level,
            "block_decomposed": fast,
            "dense": dense,
            "seconds_block_decomposed": round(t_fast, 4),
            "seconds_dense": round(t_dense, 3),
            "speedup": round(t_dense / t_fast, 1),
        },
        "preset": {
            lv: {
                "share": str(report.budget.geolevel_shares[lv]),
                "queries": {q: str(s) for q, s in report.budget.query_shares[lv].items()},
            }
            for lv in report.budget.geolevel_names
        },
    }


def _level_answers(
    geocode: np.ndarray, cells: np.ndarray, length: int, queries: dict[str, sp.csr_matrix]
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    codes = np.array([g[:length] for g in geocode]) if length else np.zeros(len(geocode), "U1")
    uniq, inv = np.unique(codes, return_inverse=True)
    hist = sp.csr_matrix(
        (np.ones(len(cells)), (inv, cells)), shape=(len(uniq), queries["detailed"].shape[1])
    )
    return uniq, {q: np.asarray((hist @ m.T).todense()) for q, m in queries.items()}


def _cells(cols: dict, schema) -> np.ndarray:
    view = {
        "hhgq": cols["hhgq"],
        "hispanic": cols["hispanic"],
        "cenrace": cols["cenrace"],
        "age": cols["age"] if "age" in cols else np.where(cols["votingage"] == 1, 18, 17),
    }
    return schema.cells_of(view)


def _read(path: Path, columns: list[str]) -> dict:
    t = pq.read_table(path)
    return {c: t.column(c).to_numpy(zero_copy_only=False) for c in columns if c in t.column_names}


def bench_topdown(state: str, scale: float, seeds: list[int], workdir: Path) -> dict:
    from censusdp.design.allocation import budget_to_toml
    from censusdp.generate import generate_state
    from censusdp.release.pipeline import run_release

    schema = get_schema("pl94")
    cef = workdir / "cef"
    t = time.perf_counter()
    generate_state(state, seed=1, out_dir=cef, scale=scale)
    gen_secs = time.perf_counter() - t
    production = load_preset("pl94-2020")
    report = optimize_allocation(AllocationRequest(production))
    (workdir / "optimized.toml").write_text(budget_to_toml(report.budget))
    targets = own_target_workload(production)
    truth = _read(cef / "persons.parquet", ["geocode", "hhgq", "age", "hispanic", "cenrace"])
    truth_cells = _cells(truth, schema)
    qnames = sorted({t.query for t in targets} | {"detailed"})
    queries = {q: make_query(schema, q).matrix for q in qnames}
    levels = dict(production.geolevels)
    truth_by_level = {
        lv: _level_answers(truth["geocode"].astype(str), truth_cells, ln, queries)
        for lv, ln in levels.items()
    }
    result: dict = {
        "state": state,
        "scale": scale,
        "persons": int(len(truth_cells)),
        "seeds": seeds,
    }
    result["generate_seconds"] = round(gen_secs, 2)
    per_budget: dict = {}
    for label, budget in (("production", production), ("optimized", report.budget)):
        sums: dict = {}
        secs = []
        for seed in seeds:
            out = workdir / f"run-{label}-{seed}"
            t = time.perf_counter()
            run_release(cef, out, budget=budget, units_budget=None, seed=seed, workers=1)
            secs.append(time.perf_counter() - t)
            from censusdp.io.mdf_read import read_mdf_persons

            mdf = read_mdf_persons(out / "mdf_persons.parquet")
            cells = _cells(mdf, schema)
            for lv, ln in levels.items():
                t_codes, t_ans = truth_by_level[lv]
                r_codes, r_ans = _level_answers(mdf["geocode"].astype(str), cells, ln, queries)
                codes = np.union1d(t_codes, r_codes)
                for tab in targets:
                    if tab.geolevel != lv:
                        continue
                    tv = np.zeros((len(codes), queries[tab.query].shape[0]))
                    rv = np.zeros_like(tv)
                    tv[np.searchsorted(codes, t_codes)] = t_ans[tab.query]
                    rv[np.searchsorted(codes, r_codes)] = r_ans[tab.query]
                    mse = float(np.mean(np.square(rv - tv)))
                    sums.setdefault((lv, tab.query), []).append(mse)
            _say(f"topdown {label} seed {seed}: {secs[-1]:.1f} s")
        per_table = {f"{lv}/{q}": float(np.mean(v)) for (lv, q), v in sums.items()}
        per_level = {
            lv: float(sum(np.mean(v) for (lv2, _), v in sums.items() if lv2 == lv)) for lv in levels
        }
        per_budget[label] = {
            "objective": float(sum(per_level.values())),
            "per_level": per_level,
            "per_table": per_table,
            "run_seconds": [round(s, 1) for s in secs],
        }
    result["releases"] = per_budget
    result["optimized_over_production"] = (
        per_budget["optimized"]["objective"] / per_budget["production"]["objective"]
    )
    result["per_level_ratio"] = {
        lv: per_budget["optimized"]["per_level"][lv] / per_budget["production"]["per_level"][lv]
        for lv in levels
    }
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ns", default="64,256", help="domain sizes of the strategy section")
    ap.add_argument(
        "--hdmm-ns",
        default="64,128,256,512,1024",
        help="1-D sizes of the comparison with HDMM (all-range and prefix)",
    )
    ap.add_argument(
        "--sections",
        default="strategy,hdmm,small_n,allocation",
        help="comma-separated sections to run (topdown: --topdown)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trials", type=int, default=200, help="Monte Carlo trials (allocation)")
    ap.add_argument("--topdown", action="store_true", help="also run the TopDown simulation")
    ap.add_argument("--state", default="VT")
    ap.add_argument("--scale", type=float, default=0.05)
    ap.add_argument("--seeds", default="1,2", help="release seeds of the TopDown simulation")
    ap.add_argument("--dir", default=None, help="working directory (default: a temp dir)")
    args = ap.parse_args()
    sections = set(args.sections.split(","))
    result: dict = {"seed": args.seed}
    if "strategy" in sections:
        result["strategy"] = bench_strategy([int(x) for x in args.ns.split(",")], args.seed)
    if "hdmm" in sections:
        result["hdmm"] = bench_hdmm([int(x) for x in args.hdmm_ns.split(",")], args.seed)
    if "small_n" in sections:
        result["small_n"] = bench_small_n()
    if "allocation" in sections:
        result["allocation"] = bench_allocation(args.trials, args.seed)
    if args.topdown:
        work = Path(args.dir or tempfile.mkdtemp(prefix="censusdp-design-"))
        result["topdown"] = bench_topdown(
            args.state, args.scale, [int(s) for s in args.seeds.split(",")], work
        )
    print(json.dumps(result, indent=2, allow_nan=False))
    failures = result.get("hdmm", {}).get("failures", [])
    if failures:
        _say("FAILED: censusdp is worse than a reference:\n  " + "\n  ".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
