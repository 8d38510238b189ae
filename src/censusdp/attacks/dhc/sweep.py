"""Reconstruction and re-identification across protections and privacy-loss budgets.

JASON's first recommendation (JASON (JSR-19-2F) sec. 8.4.1) is to run "substantially
equivalent methodologies as employed on the 2010 census data coupled with
probabilistic record linkage to assess re-identification risk as a function of the
privacy-loss parameter"; sec. 8.4.3 recommends swapping with DP on top.
:func:`attack_sweep` does that on one confidential file (CEF), for these releases:

* ``unprotected``: the block tables tabulated from the confidential file itself;
* ``swap``: the 2010-style swapped and top-coded file (:mod:`censusdp.protect`);
* ``dp``: a TopDown release with the ``dhc-lite-demo`` budget rescaled to each
  epsilon (``Budget.scaled(epsilon=...)``: the largest rho whose (epsilon, delta) at
  the preset's delta = 1e-10 is at most epsilon, Canonne-Kamath-Steinke 2020), plus
  the preset's own budget (rho = 2.556, epsilon about 17.14: the 2020 production
  budget);
* ``swap+dp``: DP at some epsilons on top of the swapped file;
* ``marginals``: the public-marginals-only baseline: each block gets its (true)
  number of records, drawn at random from its county's persons (so every record is
  plausible for the county and nothing is known about the block), fed through the
  same matching, linkage and confirmation.

For each release the attack reconstructs the persons (:mod:`.reconstruct`), scores
them against the truth (exact and age +-1, one to one), links them to one
synthetic commercial file (the same for every release) exactly and with
Fellegi-Sunter, and confirms (:mod:`.reid`). The modal-guess baseline
(``baseline_confirmed_share``: race-ethnicity guessed as the county's most common
one for the person's sex and age band) is reported too.

Outputs in ``out_dir``: ``releases/<name>/`` (the release run directories),
``attacks/<name>/rec`` and ``attacks/<name>/reid`` (the attack outputs, so that the
rates can be recomputed from files), ``sweep.json``, ``sweep.csv``, ``sweep.png`` and
``manifest.json``.
"""

from __future__ import annotations

import csv
import io
import math
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from censusdp.errors import ConfigError
from censusdp.io.atomic import atomic_path, write_json, write_parquet, write_text
from censusdp.io.output_rules import MANIFEST_FILE
from censusdp.io.rundir import RunDir
from censusdp.io.staging import staged_output
from censusdp.privacy.budget import Budget
from censusdp.privacy.randomness import experiment_generator
from censusdp.progress import Progress, say
from censusdp.version import __version__

__all__ = ["DEFAULT_EPSILONS", "SweepOptions", "attack_sweep", "marginals_reconstruction"]

DEFAULT_EPSILONS: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
"""The sweep's epsilon grid (JASON (JSR-19-2F) sec. 8.4.1 asks for risk as a function of epsilon)."""

DpRunner = Callable[..., Any]


def marginals_reconstruction(truth: dict[str, np.ndarray], *, seed: int) -> dict[str, np.ndarray]:
    """The public-marginals baseline "reconstruction": block sizes right, records from the county.

    Every block gets as many records as it has persons, each a copy of the (sex, age,
    race, Hispanic origin) of a person drawn uniformly with replacement from the
    block's county: the best an attacker can do from county-level tables alone, in
    distribution.
    """
    rng = experiment_generator(seed)
    geo = np.asarray(truth["geocode"]).astype("U16")
    county = geo.astype("U5")
    order = np.argsort(county, kind="stable")
    cty, start, count = np.unique(county[order], return_index=True, return_counts=True)
    ci = np.searchsorted(cty, county)
    pick = order[start[ci] + np.floor(rng.random(geo.size) * count[ci]).astype(np.int64)]
    return {
        "rec_id": np.arange(geo.size, dtype=np.int64),
        "geocode": geo,
        "sex": np.asarray(truth["sex"])[pick],
        "age": np.asarray(truth["age"])[pick],
        "hispanic": np.asarray(truth["hispanic"])[pick],
        "cenrace": np.asarray(truth["cenrace"])[pick],
    }


def _write_rec(cols: dict[str, np.ndarray], d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    write_parquet(
        pa.table(
            {
                k: pa.array(v.astype(object), pa.string())
                if k == "geocode"
                else pa.array(np.asarray(v, dtype=np.int64))
                for k, v in cols.items()
            }
        ),
        d / "reconstructed.parquet",
    )


def _default_dp(
    input_dir: Path, out_dir: Path, *, budget: Budget, seed: int, workers: int, progress: Progress
) -> dict:
    from censusdp.privacy.release_budget import ReleaseBudget
    from censusdp.release.options import Execution, ReleaseOptions
    from censusdp.release.pipeline import run_release

    return run_release(
        input_dir,
        out_dir,
        ReleaseBudget(budget),
        ReleaseOptions(seed=seed),
        Execution(workers=workers, progress=progress),
        overwrite=True,
    )


def _row(
    name: str,
    kind: str,
    epsilon: float | None,
    rho: float | None,
    rec: dict,
    reid: dict,
    seconds: dict,
) -> dict[str, Any]:
    m = rec.get("match", {})
    ex = reid["methods"].get("exact", {})
    fs = reid["methods"].get("fellegi-sunter", {})
    return {
        "name": name,
        "kind": kind,
        "epsilon": epsilon,
        "rho": rho,
        "records": rec.get("records"),
        "exact_rate": m.get("exact_rate"),
        "fuzzy_rate": m.get("fuzzy_rate"),
        "putative_rate": ex.get("putative_rate"),
        "confirmed_rate": ex.get("confirmed_rate"),
        "confirmed_share": ex.get("confirmed_share"),
        "confirmed_share_all_attributes": ex.get("confirmed_share_all_attributes"),
        "nonmodal_confirmed_share": ex.get("nonmodal_confirmed_share"),
        "uniques_confirmed_share": ex.get("uniques_confirmed_share"),
        "fs_putative_rate": fs.get("putative_rate"),
        "fs_confirmed_share": fs.get("confirmed_share"),
        "fs_nonmodal_confirmed_share": fs.get("nonmodal_confirmed_share"),
        "fs_uniques_confirmed_share": fs.get("uniques_confirmed_share"),
        "release_seconds": seconds.get("release"),
        "reconstruct_seconds": seconds.get("reconstruct"),
        "reid_seconds": seconds.get("reid"),
    }


CSV_COLUMNS = (
    "name",
    "kind",
    "epsilon",
    "rho",
    "records",
    "exact_rate",
    "fuzzy_rate",
    "putative_rate",
    "confirmed_rate",
    "confirmed_share",
    "confirmed_share_all_attributes",
    "nonmodal_confirmed_share",
    "uniques_confirmed_share",
    "fs_putative_rate",
    "fs_confirmed_share",
    "fs_nonmodal_confirmed_share",
    "fs_uniques_confirmed_share",
    "release_seconds",
    "reconstruct_seconds",
    "reid_seconds",
)


@dataclass(frozen=True)
class SweepOptions:
    """What one attack sweep is (``censusdp attack sweep``), checked once.

    Attributes:
        epsilons: DP epsilons ((epsilon, delta)-DP at the preset's delta); kept as a
            tuple of floats.
        production: also attack the preset's own budget (2020 production rho).
        swap_rate: household swap rate of the swapped releases.
        swap_dp_epsilons: epsilons of DP on top of swapping.
        swap_dp_production: also DP at the production budget on top of swapping.
        preset: budget preset with sex and age (``dhc-lite-demo``; checked when the
            sweep loads it).
        seed: master seed (swap, DP noise, commercial file, tie-breaking).
        age_detail: block table detail for the reconstruction.
        keep_releases: keep the release directories (``releases/``).
        reuse_releases: attack the releases already in ``out_dir/releases`` (from an
            earlier sweep with the same options) instead of making them again; the
            DP runs dominate the sweep's time.

    Raises:
        ConfigError: on construction, one line naming the value.
    """

    epsilons: Sequence[float] = DEFAULT_EPSILONS
    production: bool = True
    swap_rate: float = 0.05
    swap_dp_epsilons: Sequence[float] = (1.0, 4.0)
    swap_dp_production: bool = True
    preset: str = "dhc-lite-demo"
    seed: int = 0
    age_detail: str = "single"
    keep_releases: bool = True
    reuse_releases: bool = False

    def __post_init__(self) -> None:
        eps = [float(e) for e in self.epsilons]
        if any(not (e > 0 and math.isfinite(e)) for e in eps):
            raise ConfigError(f"sweep epsilons must be positive and finite, got {eps}")
        if not 0 <= self.swap_rate <= 1:
            raise ConfigError(f"swap rate must be in [0, 1], got {self.swap_rate}")
        object.__setattr__(self, "epsilons", tuple(eps))
        object.__setattr__(self, "swap_dp_epsilons", tuple(self.swap_dp_epsilons))


def attack_sweep(
    truth_dir: str | Path,
    out_dir: str | Path,
    options: SweepOptions | None = None,
    *,
    workers: int = 1,
    dp_runner: DpRunner | None = None,
    overwrite: bool = False,
    progress: Progress = None,
) -> dict[str, Any]:
    """Attack unprotected, swapped, DP and swapped+DP releases of one file; table and plot.

    Args:
        truth_dir: the CEF directory.
        out_dir: output directory (layout in the module docstring).
        options: the sweep's releases, seed and attack settings (default
            ``SweepOptions()``).
        workers: worker processes for TopDown and the block solves.
        dp_runner: the DP release function (default
            :func:`censusdp.release.pipeline.run_release`); tests pass a stand-in.
        overwrite: replace an earlier output of censusdp at ``out_dir`` (as
            ``options.reuse_releases`` does, starting from its releases).
        progress: progress callback.

    Returns:
        The result written to ``sweep.json``.
    """
    o = options or SweepOptions()
    base = _checked_base(o.preset)
    with staged_output(
        out_dir,
        overwrite or o.reuse_releases,
        [truth_dir],
        command="attack sweep",
        carry=("releases",) if o.reuse_releases else (),
    ) as staging:
        out = staging.path
        t0 = time.perf_counter()
        seeds = np.random.SeedSequence(o.seed).generate_state(8, dtype=np.uint32).tolist()
        setup = _SweepSetup(
            truth_dir=Path(truth_dir),
            out=out,
            base=base,
            dp=dp_runner or _default_dp,
            s_swap=seeds[0],
            s_dp=seeds[1],
            s_comm=seeds[2],
            swap_rate=o.swap_rate,
            workers=workers,
            age_detail=o.age_detail,
            keep_releases=o.keep_releases,
            reuse_releases=o.reuse_releases,
            progress=progress,
        )
        plan = _sweep_plan(o)
        rows, details = _attack_plan(setup, plan)
        row, details["marginals"] = _marginals_baseline(setup, s_marg=seeds[3])
        rows.append(row)
        ex = details["marginals"]["reid"]["methods"]["exact"]
        modal = {
            "confirmed_share": ex["baseline_confirmed_share"],
            "confirmed_share_all_attributes": ex["baseline_confirmed_share_all_attributes"],
            "uniques_confirmed_share": ex["baseline_uniques_confirmed_share"],
            "nonmodal_confirmed_share": ex["baseline_nonmodal_confirmed_share"],
        }
        result = {
            "truth": str(setup.truth_dir.resolve()),
            "population": ex["population"],
            "unique_share": ex["unique_share"],
            "nonmodal_share": ex["nonmodal_share"],
            "preset": o.preset,
            "swap_rate": o.swap_rate,
            "seed": o.seed,
            "epsilon_meaning": "(epsilon, delta)-DP at the preset's delta via Budget.scaled(epsilon=...)",
            "rows": rows,
            "modal_guess_baseline": modal,
            "details": details,
            "package_version": __version__,
            "seconds": round(time.perf_counter() - t0, 2),
        }
        _write_sweep(out, result, modal, o, workers)
        return result


@dataclass(frozen=True)
class _SweepSetup:
    """What every release of one sweep shares: paths, the base budget, seeds and options."""

    truth_dir: Path
    out: Path
    base: Budget
    dp: DpRunner
    s_swap: int
    s_dp: int
    s_comm: int
    swap_rate: float
    workers: int
    age_detail: str
    keep_releases: bool
    reuse_releases: bool
    progress: Progress


def _checked_base(preset: str) -> Budget:
    """The preset's budget, checked to have sex and age."""
    from censusdp.io.budget_files import resolve_budget

    base = resolve_budget(preset=preset)
    if "sex" not in _schema_attributes(base.schema) or "age" not in _schema_attributes(base.schema):
        raise ConfigError(
            f"preset {preset!r} has schema {base.schema!r} without sex and age; the "
            "reconstruction needs a schema with both (e.g. dhc-lite-demo)"
        )
    return base


def _sweep_plan(o: SweepOptions) -> list[tuple[str, str, float | None]]:
    """The releases to attack, in order, as ``(name, kind, epsilon or None)``."""
    plan: list[tuple[str, str, float | None]] = [("unprotected", "unprotected", None)]
    plan.append(("swap", "swap", None))
    for e in o.epsilons:
        plan.append((f"dp_eps{e:g}", "dp", e))
    if o.production:
        plan.append(("dp_production", "dp", None))
    for e in o.swap_dp_epsilons:
        plan.append((f"swap_dp_eps{float(e):g}", "swap+dp", float(e)))
    if o.swap_dp_production:
        plan.append(("swap_dp_production", "swap+dp", None))
    return plan


def _attack_plan(
    setup: _SweepSetup, plan: list[tuple[str, str, float | None]]
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Make (or reuse) each planned release and attack it; the table rows and details."""
    progress = setup.progress
    rows: list[dict[str, Any]] = []
    details: dict[str, Any] = {}
    for i, (name, kind, e) in enumerate(plan):
        say(progress, f"attack sweep: release {i + 1}/{len(plan)}, {name}")
        rel_dir = setup.out / "releases" / name
        reuse = setup.reuse_releases and RunDir(rel_dir).mdf_file("persons").exists()
        t = time.perf_counter()
        rho = epsilon = None
        if kind in ("unprotected", "swap"):
            source = _unprotected_or_swap(setup, kind, rel_dir, reuse)
        else:
            b = setup.base if e is None else setup.base.scaled(epsilon=str(e))
            rho, epsilon = _dp_release(setup, b, name, kind, rel_dir, reuse)
            source = rel_dir
        seconds = {"release": time.perf_counter() - t}
        if reuse and kind != "unprotected":
            seconds["release"] = _release_seconds(rel_dir)
        rec, reid = _attack_release(setup, source, name, seconds)
        row = _row(name, kind, epsilon, rho, rec, reid, seconds)
        rows.append(row)
        details[name] = {"reconstruct": rec, "reid": reid}
        say(
            progress,
            f"sweep {name}: exact {row['exact_rate']:.1%}, age+-1 {row['fuzzy_rate']:.1%}, "
            f"confirmed {row['confirmed_share']:.1%} of population "
            f"(release {seconds['release']:.1f}s, reconstruct {seconds['reconstruct']:.1f}s)",
        )
        if not setup.keep_releases and kind != "unprotected":
            import shutil

            shutil.rmtree(rel_dir, ignore_errors=True)
    return rows, details


def _unprotected_or_swap(setup: _SweepSetup, kind: str, rel_dir: Path, reuse: bool) -> Path:
    """The directory to attack for the unprotected file or the swapped release (made here)."""
    from censusdp.protect import SwapOptions, protect_swap

    if kind == "unprotected":
        return setup.truth_dir
    swap_cef = setup.out / "releases" / "swap_cef"
    if not (reuse and (swap_cef / "persons.parquet").is_file()):
        protect_swap(
            setup.truth_dir,
            rel_dir,
            SwapOptions(rate=setup.swap_rate, seed=setup.s_swap),
            cef_out=swap_cef,
            overwrite=True,
        )
    return rel_dir


def _dp_release(
    setup: _SweepSetup, b: Budget, name: str, kind: str, rel_dir: Path, reuse: bool
) -> tuple[float, float]:
    """Make one DP release at budget ``b`` (unless reused); its rho and epsilon.

    ``kind`` ``"dp"`` protects the truth, ``"swap+dp"`` the swapped CEF. The run's seed
    is drawn from ``SeedSequence([s_dp, crc32(name)])``, so each named release has its
    own stream whatever else the sweep contains.
    """
    from censusdp.privacy import accounting

    rho, epsilon = float(b.total), float(accounting.epsilon_from_rho(b.total, b.delta))
    inp = setup.truth_dir if kind == "dp" else setup.out / "releases" / "swap_cef"
    if not reuse:
        run_seed = int(
            np.random.SeedSequence([setup.s_dp, zlib.crc32(name.encode())]).generate_state(1)[0]
        )
        setup.dp(
            inp, rel_dir, budget=b, seed=run_seed, workers=setup.workers, progress=setup.progress
        )
    return rho, epsilon


def _attack_release(
    setup: _SweepSetup, source: Path, name: str, seconds: dict[str, float]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Reconstruct and re-identify one release; timings go into ``seconds``."""
    from censusdp.attacks.dhc.runs import ReconstructOptions, run_reconstruct, run_reid

    attack_dir = setup.out / "attacks" / name
    t = time.perf_counter()
    rec = run_reconstruct(
        source,
        attack_dir / "rec",
        ReconstructOptions(age_detail=setup.age_detail),
        truth_dir=setup.truth_dir,
        workers=setup.workers,
        overwrite=True,
    )
    seconds["reconstruct"] = time.perf_counter() - t
    t = time.perf_counter()
    reid = run_reid(
        attack_dir / "rec", setup.truth_dir, attack_dir / "reid", seed=setup.s_comm, overwrite=True
    )
    seconds["reid"] = time.perf_counter() - t
    return rec, reid


def _marginals_baseline(
    setup: _SweepSetup, *, s_marg: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The public-marginals baseline, through the same matching and linkage: row and details."""
    from censusdp.attacks.dhc.runs import read_truth, run_reid
    from censusdp.attacks.dhc.scoring import match_counts
    from censusdp.attacks.dhc.tables import keys_of

    base = setup.out / "attacks" / "marginals"
    t = time.perf_counter()
    truth = read_truth(setup.truth_dir)
    mrec = marginals_reconstruction(truth, seed=s_marg)
    _write_rec(mrec, base / "rec")
    m = match_counts(
        mrec["geocode"],
        keys_of(mrec["sex"], mrec["age"], mrec["hispanic"], mrec["cenrace"]),
        truth["geocode"],
        keys_of(truth["sex"], truth["age"], truth["hispanic"], truth["cenrace"]),
    )
    mrec_summary = {"records": int(mrec["geocode"].size), "match": m.to_dict()}
    write_json(mrec_summary, base / "rec" / "summary.json")
    reid = run_reid(base / "rec", setup.truth_dir, base / "reid", seed=setup.s_comm, overwrite=True)
    seconds = {"reconstruct": time.perf_counter() - t}
    row = _row("marginals", "baseline", None, None, mrec_summary, reid, seconds)
    return row, {"reconstruct": mrec_summary, "reid": reid}


def _write_sweep(
    out: Path, result: dict[str, Any], modal: dict[str, float], o: SweepOptions, workers: int
) -> None:
    """Write ``sweep.json``, ``sweep.csv``, ``sweep.png`` and ``manifest.json``."""
    rows = result["rows"]
    write_json(_json_ready(result), out / "sweep.json")
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(CSV_COLUMNS)
    for r in rows:
        w.writerow(["" if r[c] is None else r[c] for c in CSV_COLUMNS])
    write_text(buf.getvalue(), out / "sweep.csv")
    _plot(rows, modal, out / "sweep.png")
    manifest = {
        "command": "attack sweep",
        "truth": result["truth"],
        "epsilons": list(o.epsilons),
        "production": o.production,
        "swap_rate": result["swap_rate"],
        "swap_dp_epsilons": list(o.swap_dp_epsilons),
        "preset": result["preset"],
        "seed": result["seed"],
        "workers": workers,
        "package_version": __version__,
        "seconds": result["seconds"],
        "outputs": ["sweep.json", "sweep.csv", "sweep.png", "attacks/", "releases/"],
    }
    write_json(_json_ready(manifest), out / MANIFEST_FILE)


def _release_seconds(rel_dir: Path) -> float:
    """The total time recorded in a reused release's manifest (``nan`` if absent)."""
    import json

    try:
        man = json.loads((rel_dir / MANIFEST_FILE).read_text())
        return float(man["timings"]["total"])
    except (OSError, ValueError, KeyError, TypeError):
        return math.nan


def _schema_attributes(name: str) -> tuple[str, ...]:
    from censusdp.data.schema import get_schema

    return get_schema(name).attribute_names


def _json_ready(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _json_ready(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_ready(v) for v in obj]
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        x = float(obj)
        return x if math.isfinite(x) else None
    return obj


def _plot(rows: list[dict[str, Any]], modal: dict[str, float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dp = sorted(
        (r for r in rows if r["kind"] == "dp" and r["epsilon"] is not None),
        key=lambda r: r["epsilon"],
    )
    sdp = sorted(
        (r for r in rows if r["kind"] == "swap+dp" and r["epsilon"] is not None),
        key=lambda r: r["epsilon"],
    )
    named = {r["name"]: r for r in rows}
    fig, axes = plt.subplots(1, 2, figsize=(13, 6.2))
    panels = (
        (
            axes[0],
            "Reconstruction: records matching a person",
            (("exact_rate", "exact", "C0"), ("fuzzy_rate", "age +-1", "C1")),
        ),
        (
            axes[1],
            "Re-identification: share confirmed (of the population, or of the subgroup)",
            (
                ("confirmed_share", "confirmed (exact link)", "C2"),
                ("fs_confirmed_share", "confirmed (Fellegi-Sunter)", "C4"),
                ("nonmodal_confirmed_share", "confirmed among non-modal persons", "C3"),
                ("uniques_confirmed_share", "confirmed among block uniques", "C5"),
            ),
        ),
    )
    for ax, title, series in panels:
        for key, label, color in series:
            x = [r["epsilon"] for r in dp if r[key] is not None]
            y = [r[key] for r in dp if r[key] is not None]
            ax.plot(x, y, "o-", color=color, label=f"DP: {label}")
            xs = [r["epsilon"] for r in sdp if r[key] is not None]
            ys = [r[key] for r in sdp if r[key] is not None]
            if xs:
                ax.plot(xs, ys, "s", color=color, mfc="none", ms=8, label=f"swap+DP: {label}")
            for name, style in (("unprotected", ":"), ("swap", "-."), ("marginals", "--")):
                r = named.get(name)
                if r is not None and r[key] is not None:
                    ax.axhline(r[key], color=color, ls=style, lw=1, alpha=0.7)
        if ax is axes[1]:
            ax.axhline(
                modal["confirmed_share"],
                color="k",
                ls="--",
                lw=1,
                label="modal-guess baseline (confirmed)",
            )
        prod = named.get("dp_production")
        if prod is not None and prod["epsilon"] is not None:
            ax.axvline(prod["epsilon"], color="grey", ls=":", lw=1)
            ax.text(prod["epsilon"], 1.0, " 2020 production", fontsize=7, va="top", color="grey")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("epsilon ((epsilon, delta)-DP, delta = 1e-10)")
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    fig.text(
        0.5,
        0.005,
        "horizontal lines: dotted = unprotected tables, dash-dot = swapped, dashed = public-marginals baseline",
        ha="center",
        fontsize=8,
    )
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.subplots_adjust(bottom=0.33)
    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
