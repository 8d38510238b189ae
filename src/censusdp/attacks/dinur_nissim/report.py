"""Files and plots for the Dinur-Nissim laboratory (the I/O side; algorithms live elsewhere).

:func:`run_dn_report` runs one recovery curve and writes its JSON (with a manifest:
config, seed, package version, timings) and plot; :func:`reproduce_figures` reruns
JASON's figures 4-1 to 4-4, 5-6 and 5-7 and writes PNGs, JSON tables and timings.
Each takes its options (:class:`DnOptions`, :class:`FiguresOptions`: what the command
runs, checked once) and how to run it. All files are written atomically.
"""

from __future__ import annotations

import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from censusdp.attacks.dinur_nissim.curves import (
    JASON_FIG57_EPSILONS,
    JASON_FIG57_MULTIPLES,
    LaplaceGrid,
    LaplaceGridOptions,
    RecoveryCurve,
    RecoveryCurveOptions,
    laplace_grid,
    recovery_curve,
)
from censusdp.attacks.dinur_nissim.noise import NoiseSpec, jason_gaussian_variance
from censusdp.attacks.dinur_nissim.sum_accuracy import (
    JASON_FIG56_EPSILONS,
    JASON_FIG56_SIZES,
    SumAccuracy,
    sum_query_accuracy,
)
from censusdp.attacks.dinur_nissim.thresholds import (
    RecoveryThresholds,
    RecoveryThresholdsOptions,
    recovery_thresholds,
)
from censusdp.errors import CensusDPError
from censusdp.io.atomic import write_json
from censusdp.io.output_files import output_file, write_output_json
from censusdp.io.staging import staged_output
from censusdp.progress import Progress, say
from censusdp.version import __version__

__all__ = [
    "FIGURES",
    "DnOptions",
    "FiguresOptions",
    "plot_laplace_grid",
    "plot_recovery_curves",
    "plot_sum_accuracy",
    "plot_thresholds",
    "reproduce_figures",
    "run_dn_report",
]

FIGURES: tuple[str, ...] = ("4-1", "4-2", "4-4", "5-6", "5-7")


def _manifest(config: dict[str, Any], seed: int, timings: dict[str, float]) -> dict[str, Any]:
    return {
        "package_version": __version__,
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "platform": platform.platform(),
        "seed": seed,
        "config": config,
        "timings": timings,
        "randomness": "experiment noise from censusdp.privacy.randomness.experiment_generator (not release noise)",
    }


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: str | Path, option: str = "output") -> None:
    plt = _pyplot()
    try:
        with output_file(path, suffix=".png", option=option) as tmp:
            fig.savefig(tmp, format="png", dpi=90)
    finally:
        plt.close(fig)


def plot_recovery_curves(
    curves: Sequence[RecoveryCurve],
    path: str | Path,
    title: str | None = None,
    *,
    option: str = "output",
) -> None:
    """Fraction recovered vs queries: mean and 10/50/90% deciles (JASON (JSR-19-2F) figs. 4-1, 4-4)."""
    plt = _pyplot()
    k = len(curves)
    fig, axes = plt.subplots(1, k, figsize=(4.2 * k, 3.4), squeeze=False)
    for ax, c in zip(axes[0], curves, strict=True):
        m = c.query_counts
        ax.fill_between(
            m, c.fractions.min(axis=0), c.fractions.max(axis=0), color="0.9", label="min-max"
        )
        ax.plot(m, c.quantile(0.1), color="tab:red", lw=1, label="10%")
        ax.plot(m, c.quantile(0.5), color="goldenrod", lw=1, label="50%")
        ax.plot(m, c.quantile(0.9), color="tab:purple", lw=1, label="90%")
        ax.plot(m, c.mean, color="tab:blue", lw=2, label="mean")
        ax.axvline(c.n / 2, color="0.5", ls=":", lw=1)
        ax.set_xlabel("number of queries m")
        ax.set_ylabel("fraction of bits recovered")
        ax.set_ylim(0.45, 1.02)
        ax.set_title(f"n = {c.n}, {c.noise.label()}, {c.trials} trials", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="lower right")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    _save(fig, path, option)


def plot_thresholds(thr: RecoveryThresholds, path: str | Path) -> None:
    """Queries for full recovery vs n, and normalised by n (JASON (JSR-19-2F) figs. 4-2, 4-3)."""
    plt = _pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(8.4, 3.4))
    ns = thr.ns
    mean = thr.thresholds.mean(axis=1)
    a1.fill_between(
        ns,
        np.quantile(thr.thresholds, 0.1, axis=1),
        np.quantile(thr.thresholds, 0.9, axis=1),
        color="0.85",
        label="10-90%",
    )
    a1.plot(ns, mean, "o-", label="mean")
    a1.plot(ns, thr.thresholds.max(axis=1), "s--", ms=3, lw=1, label="max")
    a1.plot(
        ns,
        thr.slope_mean * ns + thr.intercept_mean,
        "k:",
        lw=1,
        label=f"fit slope {thr.slope_mean:.3f}",
    )
    a1.plot(ns, 2 * ns / np.log2(ns), "g-.", lw=1, label="2n/log2 n (App. A)")
    a1.set_xlabel("n (bits)")
    a1.set_ylabel("queries for 100% recovery")
    a1.legend(fontsize=7)
    a1.grid(alpha=0.3)
    a2.plot(ns, mean / ns, "o-", label="mean / n")
    a2.plot(ns, thr.thresholds.max(axis=1) / ns, "s--", ms=3, lw=1, label="max / n")
    a2.axhline(0.5, color="k", ls=":", lw=1, label="1/2")
    a2.set_xlabel("n (bits)")
    a2.set_ylabel("queries / n")
    a2.set_ylim(0.3, 0.8)
    a2.legend(fontsize=7)
    a2.grid(alpha=0.3)
    fig.suptitle(
        f"Noiseless full recovery ({thr.trials} trials per n, solver {thr.solver})", fontsize=10
    )
    fig.tight_layout()
    _save(fig, path)


def plot_sum_accuracy(acc: SumAccuracy, path: str | Path) -> None:
    """Accuracy of a Laplace-noised sum vs epsilon for several N (JASON (JSR-19-2F) fig. 5-6)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.6, 3.8))
    for i, n in enumerate(acc.ns):
        line = ax.plot(acc.epsilons, acc.measured[i], "o", ms=3, label=f"N = {n}")[0]
        ax.plot(acc.epsilons, acc.expected[i], "-", lw=1, color=line.get_color())
    ax.set_xlim(0, 1.0)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("privacy loss parameter epsilon")
    ax.set_ylabel("query accuracy A (mean)")
    ax.set_title(
        f"Sum query accuracy, {acc.trials} trials (dots) vs exact expectation (lines)", fontsize=9
    )
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    _save(fig, path)


def plot_laplace_grid(grid: LaplaceGrid, path: str | Path) -> None:
    """Fraction recovered vs epsilon and query multiple (JASON (JSR-19-2F) fig. 5-7)."""
    plt = _pyplot()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9.6, 3.9))
    mean = grid.mean
    im = a1.imshow(mean, aspect="auto", origin="lower", cmap="viridis", vmin=0.5, vmax=1.0)
    a1.set_xticks(range(len(grid.multiples)), [f"{m:g}" for m in grid.multiples])
    a1.set_yticks(range(len(grid.epsilons)), [f"{e:g}" for e in grid.epsilons])
    for i in range(mean.shape[0]):
        for j in range(mean.shape[1]):
            a1.text(
                j,
                i,
                f"{mean[i, j]:.3f}",
                ha="center",
                va="center",
                fontsize=6,
                color="w" if mean[i, j] < 0.8 else "k",
            )
    a1.set_xlabel("query multiple (m / n)")
    a1.set_ylabel("epsilon")
    fig.colorbar(im, ax=a1, label="mean fraction recovered")
    for j, mult in enumerate(grid.multiples):
        a2.plot(grid.epsilons, mean[:, j], "o-", ms=3, label=f"multiple {mult:g}")
    a2.set_xscale("log")
    a2.set_ylim(0.45, 1.02)
    a2.set_xlabel("epsilon")
    a2.set_ylabel("mean fraction recovered")
    a2.legend(fontsize=7)
    a2.grid(alpha=0.3)
    fig.suptitle(f"n = {grid.n}, {grid.mechanism} noise, {grid.trials} trials", fontsize=10)
    fig.tight_layout()
    _save(fig, path)


def _parse_noise(
    noise: str, n: int, epsilon: float | None, variance: float | str | None
) -> NoiseSpec:
    if noise == "none":
        if epsilon is not None or variance is not None:
            raise CensusDPError("--noise none takes neither --epsilon nor --variance")
        return NoiseSpec.none()
    if noise == "gaussian":
        if epsilon is not None:
            raise CensusDPError("--noise gaussian takes --variance, not --epsilon")
        if variance is None or variance == "jason":
            return NoiseSpec.gaussian(jason_gaussian_variance(n, "text"))
        if variance == "jason-matlab":
            return NoiseSpec.gaussian(jason_gaussian_variance(n, "matlab"))
        try:
            return NoiseSpec.gaussian(float(variance))
        except ValueError:
            raise CensusDPError(
                f"--variance must be a number, 'jason' or 'jason-matlab'; got {variance!r}"
            ) from None
    if noise in ("laplace", "geometric"):
        if epsilon is None:
            raise CensusDPError(f"--noise {noise} needs --epsilon")
        if variance is not None:
            raise CensusDPError(f"--noise {noise} takes --epsilon, not --variance")
        return NoiseSpec(noise, epsilon=epsilon)  # type: ignore[arg-type]
    raise CensusDPError(f"--noise must be none, gaussian, laplace or geometric; got {noise!r}")


@dataclass(frozen=True)
class DnOptions:
    """What one ``censusdp attack dn`` experiment is, in the command's terms, checked once.

    Attributes:
        n: number of bits.
        multiples: query counts as multiples of ``n`` (rounded, de-duplicated, >= 1);
            kept as a tuple of floats.
        noise: ``none``, ``gaussian``, ``laplace`` or ``geometric``.
        epsilon: for laplace / geometric noise.
        variance: Gaussian variance, or ``"jason"`` (default, ``sqrt(n) ln(n)/2``) or
            ``"jason-matlab"`` (``(sqrt(n) ln(n)/2)^2``).
        trials, seed, family, solver, nested: see
            :class:`censusdp.attacks.dinur_nissim.curves.RecoveryCurveOptions`.
        curve: the recovery-curve experiment these make (derived, not an argument).

    Raises:
        CensusDPError: on construction, one line naming the flag or value.
    """

    n: int
    multiples: Sequence[float]
    noise: str = "none"
    epsilon: float | None = None
    variance: float | str | None = None
    trials: int = 100
    seed: int = 0
    family: str = "random"
    solver: str = "fista"
    nested: bool = True
    curve: RecoveryCurveOptions = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        multiples = tuple(float(x) for x in self.multiples)
        object.__setattr__(self, "multiples", multiples)
        spec = _parse_noise(self.noise, self.n, self.epsilon, self.variance)
        counts = sorted({max(1, int(round(x * self.n))) for x in multiples})
        curve = RecoveryCurveOptions(
            self.n,
            counts,
            trials=self.trials,
            seed=self.seed,
            noise=spec,
            family=self.family,
            solver=self.solver,
            nested=self.nested,
        )
        object.__setattr__(self, "curve", curve)


def run_dn_report(
    options: DnOptions,
    *,
    workers: int = 1,
    json_path: str | Path | None = None,
    plot_path: str | Path | None = None,
    progress: Progress = None,
) -> dict[str, Any]:
    """Run one recovery curve (``censusdp attack dn``) and write its JSON and plot.

    Args:
        options: the experiment (:class:`DnOptions`).
        workers: processes (the results do not depend on it).
        json_path: where to write the summary (with manifest), if given.
        plot_path: where to write the PNG, if given.
        progress: ``None`` (silent) or a callable taking lines: trials done / total.

    Returns:
        the summary dict (also written to ``json_path``).
    """
    curve = recovery_curve(options.curve, workers=workers, progress=progress)
    out = curve.to_dict()
    config = {
        "n": options.n,
        "multiples": list(options.multiples),
        "noise": options.curve.noise.to_dict(),
        "trials": options.trials,
        "family": options.family,
        "solver": options.solver,
        "nested": options.nested,
        "workers": workers,
    }
    out["manifest"] = _manifest(config, options.seed, out["timings"])
    if json_path is not None:
        write_output_json(out, json_path, option="--json")
    if plot_path is not None:
        plot_recovery_curves([curve], plot_path, option="--plot")
    return out


@dataclass(frozen=True)
class FiguresOptions:
    """Which of JASON's figures :func:`reproduce_figures` reruns, at what size and seed.

    Attributes:
        figures: among :data:`FIGURES` (kept as a tuple).
        quick: shrink every size for a smoke run.
        seed: master seed (figure 4-4's sizes add ``n`` to it).
        prefix: file names start with it.

    Raises:
        CensusDPError: on construction, naming unknown figures.
    """

    figures: Sequence[str] = FIGURES
    quick: bool = False
    seed: int = 2020
    prefix: str = "dn_"

    def __post_init__(self) -> None:
        unknown = [f for f in self.figures if f not in FIGURES]
        if unknown:
            raise CensusDPError(f"figures must be among {FIGURES}; got {unknown}")
        object.__setattr__(self, "figures", tuple(self.figures))


def reproduce_figures(
    out_dir: str | Path,
    options: FiguresOptions | None = None,
    *,
    workers: int = 2,
    overwrite: bool = False,
    progress: Progress = None,
) -> dict[str, Any]:
    """Rerun JASON's Dinur-Nissim figures and write ``<prefix>fig_<id>.png`` / ``.json``.

    Default sizes (``quick=False``), chosen to finish in minutes on 2 cores: fig. 4-1
    n = 1000, 20 trials, m = 0.04n..n; figs. 4-2/4-3 n = 100..1000, 6 trials per n;
    fig. 4-4 n = 10, 40, 100 with Gaussian variance ``sqrt(n) ln n / 2``, 100 trials,
    m up to 20n; fig. 5-6 the Listing-4 grid, 1000 trials; fig. 5-7 n = 4000, multiples
    1, 5, 10, 20, the twelve Listing-5 epsilons, 6 trials (JASON: 10). Larger runs: call
    the library functions or ``censusdp attack dn`` directly. ``quick=True`` shrinks every size for a smoke run.
    Writes ``timings.json`` (seconds per figure) and a manifest; ``out_dir`` is made
    whole or not at all (:func:`censusdp.io.staging.staged_output`), and replaced only
    with ``overwrite`` when it is an earlier output of censusdp.

    Args:
        out_dir: the output directory.
        options: the figures, sizes, seed and file prefix (default ``FiguresOptions()``).
        workers: processes (the results do not depend on it).
        overwrite: replace an earlier output of censusdp at ``out_dir``.
        progress: ``None`` (silent) or a callable taking lines.
    """
    options = options or FiguresOptions()
    with staged_output(out_dir, overwrite, command="attack dn-figures") as staging:
        run = _FigureRun(staging.path, options, workers, progress)
        return _reproduce_into(run)


def _reproduce_into(run: _FigureRun) -> dict[str, Any]:
    timings: dict[str, float] = {}
    summary: dict[str, Any] = {}
    runners = {"4-1": _fig_4_1, "4-2": _fig_4_2, "4-4": _fig_4_4, "5-6": _fig_5_6, "5-7": _fig_5_7}
    figures = run.options.figures
    for fig in FIGURES:
        if fig in figures:
            timings[fig], summary[fig] = runners[fig](run)
    result = {"timings_seconds": timings, "summary": summary}
    write_json(
        {
            **result,
            "manifest": _manifest(
                {"figures": list(figures), "quick": run.quick, "workers": run.workers},
                run.seed,
                timings,
            ),
        },
        run.path("timings.json"),
    )
    return result


@dataclass(frozen=True)
class _FigureRun:
    """The settings every figure of :func:`reproduce_figures` shares."""

    out: Path
    options: FiguresOptions
    workers: int
    progress: Progress

    @property
    def quick(self) -> bool:
        """Small sizes."""
        return self.options.quick

    @property
    def seed(self) -> int:
        """The master seed."""
        return self.options.seed

    def path(self, name: str) -> Path:
        """``out/<prefix><name>``."""
        return self.out / f"{self.options.prefix}{name}"

    def execution(self, label: str) -> dict[str, Any]:
        """``workers`` and ``progress`` for an experiment function.

        Its progress lines (trials done / total, ETA) start with ``label``.
        """

        def cb(line: str) -> None:
            say(self.progress, f"{label}: {line}")

        return {"workers": self.workers, "progress": None if self.progress is None else cb}

    def write(self, record: dict[str, Any], name: str, seconds: float) -> None:
        """Add ``seconds_to_reproduce`` to ``record`` and write it as ``<prefix><name>``."""
        record["seconds_to_reproduce"] = seconds
        write_json(record, self.path(name))


def _fig_4_1(run: _FigureRun) -> tuple[float, dict[str, Any]]:
    """Fig. 4-1: noiseless random subset sums, fraction recovered vs queries."""
    t0 = time.perf_counter()
    n, trials = (200, 10) if run.quick else (1000, 20)
    counts = [int(round(f * n)) for f in np.arange(0.04, 1.0 + 1e-9, 0.04)]
    curve = recovery_curve(
        RecoveryCurveOptions(n, counts, trials=trials, seed=run.seed), **run.execution("fig 4-1")
    )
    plot_recovery_curves(
        [curve],
        run.path("fig_4-1.png"),
        title="Fig. 4-1 reproduction: noiseless random subset sums",
    )
    seconds = time.perf_counter() - t0
    d = curve.to_dict()
    run.write(d, "fig_4-1.json", seconds)
    return seconds, {"first_full_recovery_queries": d["first_full_recovery_queries"], "n": n}


def _fig_4_2(run: _FigureRun) -> tuple[float, dict[str, Any]]:
    """Figs. 4-2 and 4-3: queries needed for full recovery vs n."""
    t0 = time.perf_counter()
    ns = [50, 100, 150, 200] if run.quick else [100, 200, 300, 400, 500, 600, 800, 1000]
    thr = recovery_thresholds(
        RecoveryThresholdsOptions(ns, trials=5 if run.quick else 6, seed=run.seed),
        **run.execution("fig 4-2"),
    )
    plot_thresholds(thr, run.path("fig_4-2_4-3.png"))
    seconds = time.perf_counter() - t0
    d = thr.to_dict()
    d["per_trial"] = thr.thresholds.tolist()
    run.write(d, "fig_4-2_4-3.json", seconds)
    return seconds, {
        "slope_mean": thr.slope_mean,
        "slope_max": thr.slope_max,
        "mean_over_n": d["normalized_by_n"],
    }


def _fig_4_4(run: _FigureRun) -> tuple[float, dict[str, Any]]:
    """Fig. 4-4: recovery under Gaussian noise of variance ``sqrt(n) ln(n) / 2``."""
    t0 = time.perf_counter()
    curves = []
    trials = 20 if run.quick else 100
    for n in (10, 40, 100):
        counts = sorted(
            {
                max(1, int(round(f * n)))
                for f in np.geomspace(0.1, 20.0, 30 if not run.quick else 10)
            }
        )
        spec = NoiseSpec.gaussian(jason_gaussian_variance(n))
        experiment = RecoveryCurveOptions(n, counts, trials=trials, seed=run.seed + n, noise=spec)
        curves.append(recovery_curve(experiment, **run.execution(f"fig 4-4 n={n}")))
    plot_recovery_curves(
        curves,
        run.path("fig_4-4.png"),
        title="Fig. 4-4 reproduction: Gaussian noise, variance sqrt(n) ln(n)/2",
    )
    seconds = time.perf_counter() - t0
    run.write({"curves": [c.to_dict() for c in curves]}, "fig_4-4.json", seconds)
    return seconds, {
        f"n={c.n}": {"final_mean": float(c.mean[-1]), "queries": int(c.query_counts[-1])}
        for c in curves
    }


def _fig_5_6(run: _FigureRun) -> tuple[float, dict[str, Any]]:
    """Fig. 5-6: accuracy of Laplace-noised sum queries against the expected error."""
    t0 = time.perf_counter()
    acc = sum_query_accuracy(
        JASON_FIG56_SIZES, JASON_FIG56_EPSILONS, trials=200 if run.quick else 1000, seed=run.seed
    )
    plot_sum_accuracy(acc, run.path("fig_5-6.png"))
    seconds = time.perf_counter() - t0
    d = acc.to_dict()
    run.write(d, "fig_5-6.json", seconds)
    return seconds, {
        "max_abs_z": float(np.max(np.abs(acc.measured - acc.expected) / acc.standard_error))
    }


def _fig_5_7(run: _FigureRun) -> tuple[float, dict[str, Any]]:
    """Fig. 5-7: recovery from Laplace-noised queries over epsilon and query multiple."""
    t0 = time.perf_counter()
    n, trials = (400, 3) if run.quick else (4000, 6)
    experiment = LaplaceGridOptions(
        n, JASON_FIG57_EPSILONS, JASON_FIG57_MULTIPLES, trials=trials, seed=run.seed
    )
    grid = laplace_grid(experiment, **run.execution("fig 5-7"))
    plot_laplace_grid(grid, run.path("fig_5-7.png"))
    seconds = time.perf_counter() - t0
    d = grid.to_dict()
    run.write(d, "fig_5-7.json", seconds)
    return seconds, {"mean": d["mean"]}
