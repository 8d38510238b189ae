"""A self-contained HTML accuracy report with plots embedded as base64 PNGs.

The report renders the dict returned by :func:`censusdp.evaluate.evaluate`:

* TVD by geolevel (seed 000 sec. 6.1, Figs. 6-1 and 6-2 at one budget);
* released vs true total population for counties and blocks (like seed 000 Figs. 6-5
  and 6-6: points on the 45-degree line are exact; the pile-up at zero comes from
  non-negativity);
* bias (mean signed error) by true-count bin, per geolevel;
* the pathology shares (100% occupancy, 100% under 18) released vs true;
* the error-bar tables, labelled by where each number comes from: *realised* (this one
  release vs the truth), *closed-form* (stated noise of each noisy measurement in the
  NMF) or *empirical* (K reruns of the mechanism).

Plots use matplotlib's object API (``Figure`` + Agg canvas), never ``pyplot``, so no
global state or display is touched. The file needs no network and no other file.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from censusdp.io.atomic import write_text

__all__ = ["figure_png", "render_report", "sweep_figure", "write_report"]

_MEASURE_LABELS = {
    "total_population": "Total population",
    "hispanic*cenrace": "Race x Hispanic (MDF)",
    "detailed": "Detailed histogram (MDF)",
    "P1": "P1 race",
    "P2": "P2 Hispanic by race",
    "P3": "P3 race 18+",
    "P4": "P4 Hispanic by race 18+",
    "P5": "P5 group quarters",
    "H1": "H1 occupancy",
}


def figure_png(fig: Figure) -> bytes:
    """PNG bytes of a matplotlib figure (Agg canvas, no pyplot)."""
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<figure><img class="plot" alt="{html.escape(alt)}" src="data:image/png;base64,{data}"><figcaption>{html.escape(alt)}</figcaption></figure>'


def _fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return "&ndash;"
    if isinstance(x, bool):
        return "yes" if x else "<b>NO</b>"
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        if not math.isfinite(x):
            return "&ndash;"
        if x != 0 and (abs(x) >= 1e5 or abs(x) < 1e-3):
            return f"{x:.3g}"
        return f"{x:.{digits}g}" if abs(x) < 1 else f"{x:,.{max(digits - 2, 1)}f}"
    return html.escape(str(x))


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], caption: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(c)}</td>" for c in r) + "</tr>" for r in rows)
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# -- figures --------------------------------------------------------------------------


def _tvd_figure(result: Mapping[str, Any]) -> bytes:
    levels = [lv for lv in result["geolevels"]]
    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.add_subplot()
    x = np.arange(len(levels))
    for m in ("total_population", "P1", "P2", "P5", "H1", "hispanic*cenrace", "detailed"):
        if m not in result["metrics"]:
            continue
        y = [result["metrics"][m][lv]["tvd"] for lv in levels]
        y = [np.nan if v is None else v for v in y]
        ax.plot(x, y, marker="o", label=_MEASURE_LABELS.get(m, m))
    ax.set_xticks(x, levels)
    ax.set_ylabel("TVD = 1 - L1 / (2 POP)")
    ax.set_title("Accuracy by geolevel (1 = exact)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    return figure_png(fig)


def _scatter_figure(truth: np.ndarray, released: np.ndarray, level: str) -> bytes:
    fig = Figure(figsize=(5, 5))
    ax = fig.add_subplot()
    t = np.asarray(truth, dtype=float)
    r = np.asarray(released, dtype=float)
    if t.size > 20000:  # keep the PNG light; a fixed subsample is shown
        idx = np.linspace(0, t.size - 1, 20000).astype(int)
        t, r = t[idx], r[idx]
    ax.scatter(t, r, s=6 if t.size < 2000 else 2, alpha=0.5, color="tab:blue", linewidths=0)
    hi = max(float(t.max(initial=1)), float(r.max(initial=1))) * 1.1
    ax.plot([0, hi], [0, hi], color="tab:red", lw=1, label="released = true")
    ax.set_xscale("symlog", linthresh=10)
    ax.set_yscale("symlog", linthresh=10)
    ax.set_xlim(0, hi)
    ax.set_ylim(0, hi)
    ax.set_xlabel(f"true total population ({level})")
    ax.set_ylabel(f"released total population ({level})")
    ax.set_title(f"{level}: released vs true ({len(truth):,} units)")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    return figure_png(fig)


def _bias_figure(result: Mapping[str, Any], measure: str = "total_population") -> bytes:
    levels = result["geolevels"]
    bins = result["bins"]
    fig = Figure(figsize=(8, 4.2))
    ax = fig.add_subplot()
    width = 0.8 / max(len(levels), 1)
    x = np.arange(len(bins))
    for i, lv in enumerate(levels):
        bb = result["metrics"][measure][lv]["by_bin"]
        y = [bb[b]["bias"] if bb[b]["n"] else np.nan for b in bins]
        y = [np.nan if v is None else v for v in y]
        ax.bar(x + (i - (len(levels) - 1) / 2) * width, y, width, label=lv)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(x, bins)
    ax.set_xlabel("true count bin")
    ax.set_ylabel("bias: mean(released - true)")
    ax.set_title(f"Bias by size: {_MEASURE_LABELS.get(measure, measure)}")
    ax.legend(fontsize=8, ncol=3)
    ax.grid(alpha=0.3, axis="y")
    return figure_png(fig)


def _pathology_figure(result: Mapping[str, Any]) -> bytes:
    levels = result["geolevels"][1:] or result["geolevels"]
    fig = Figure(figsize=(9, 3.8))
    axes = fig.subplots(1, 2)
    x = np.arange(len(levels))
    occ = result["pathologies"]["occupancy_100"]
    u18 = result["pathologies"]["all_under18"]
    for ax, getter, title in (
        (axes[0], lambda lv, k: occ[lv][k]["share"], "Share of units at 100% occupancy"),
        (axes[1], lambda lv, k: u18[lv]["1"][k]["share"], "Share of units 100% under 18"),
    ):
        for off, key, color in ((-0.2, "truth", "tab:gray"), (0.2, "released", "tab:orange")):
            y = [getter(lv, key) for lv in levels]
            y = [np.nan if v is None else v for v in y]
            ax.bar(x + off, y, 0.4, label=key, color=color)
        ax.set_xticks(x, levels, fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3, axis="y")
    return figure_png(fig)


def _trials_figure(trials: Mapping[str, Any], bins: Sequence[str]) -> bytes:
    errs = trials["errors"]["total_population"]
    levels = list(errs)
    fig = Figure(figsize=(8, 4.2))
    ax = fig.add_subplot()
    width = 0.8 / max(len(levels), 1)
    x = np.arange(len(bins))
    for i, lv in enumerate(levels):
        pos, lo, hi, med = [], [], [], []
        for j, b in enumerate(bins):
            rec = errs[lv]["by_bin"].get(b)
            if not rec:
                continue
            q = rec["quantiles"]
            pos.append(x[j] + (i - (len(levels) - 1) / 2) * width)
            med.append(q["q50"])
            lo.append(q["q50"] - q["q05"])
            hi.append(q["q95"] - q["q50"])
        ax.errorbar(pos, med, yerr=[lo, hi], fmt="o", capsize=3, label=lv)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(x, bins)
    ax.set_xlabel("true count bin")
    ax.set_ylabel("released - true: median and 90% interval")
    ax.set_title(f"Empirical error bars, total population ({trials['trials']} reruns)")
    ax.legend(fontsize=8, ncol=3)
    ax.grid(alpha=0.3, axis="y")
    return figure_png(fig)


def sweep_figure(sweep: Mapping[str, Any]) -> bytes:
    """TVD vs epsilon by geolevel for total population and race x Hispanic (seed 000 Figs. 6-1, 6-2)."""
    fig = Figure(figsize=(11, 4.2))
    axes = fig.subplots(1, 2, sharey=True)
    eps = [p["epsilon"] for p in sweep["points"]]
    for ax, measure, title in (
        (axes[0], "total_population", "Total population (cf. seed 000 Fig. 6-1)"),
        (axes[1], "hispanic*cenrace", "Race x Hispanic origin (cf. seed 000 Fig. 6-2)"),
    ):
        for lv in sweep["geolevels"]:
            y = [p["tvd"][measure][lv]["mean"] for p in sweep["points"]]
            lo = [p["tvd"][measure][lv]["min"] for p in sweep["points"]]
            hi = [p["tvd"][measure][lv]["max"] for p in sweep["points"]]
            y = np.asarray([np.nan if v is None else v for v in y], dtype=float)
            line = ax.plot(eps, y, marker="o", label=lv)[0]
            if sweep.get("trials", 1) > 1:
                ax.fill_between(
                    eps,
                    np.asarray([np.nan if v is None else v for v in lo], dtype=float),
                    np.asarray([np.nan if v is None else v for v in hi], dtype=float),
                    color=line.get_color(),
                    alpha=0.15,
                )
        ax.set_xscale("log", base=2)
        ax.set_xlabel(f"epsilon ({sweep.get('epsilon_meaning', '')})")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("TVD = 1 - L1 / (2 POP)")
    axes[1].legend(fontsize=8, loc="lower right")
    return figure_png(fig)


# -- HTML --------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:1em 0;font-size:.85em}caption{text-align:left;font-weight:600;margin-bottom:.3em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
figure{display:inline-block;margin:.5em}img.plot{max-width:100%;border:1px solid #eee}
.note{background:#f7f7f0;border-left:4px solid #cc9;padding:.5em 1em;font-size:.9em}
.kind{display:inline-block;font-size:.75em;padding:.05em .5em;border-radius:.8em;color:#fff;margin-left:.4em;vertical-align:middle}
.realised{background:#3a7}.closed{background:#37a}.empirical{background:#a53}
"""

_SCRIPT = """
window.addEventListener('load',function(){var im=document.images,ok=0;
for(var i=0;i<im.length;i++){if(im[i].complete&&im[i].naturalWidth>0){ok++;}}
document.body.setAttribute('data-images-total',String(im.length));
document.body.setAttribute('data-images-loaded',String(ok));});
"""


def _kind(kind: str) -> str:
    label = {"realised": "realised", "closed": "closed-form", "empirical": "empirical"}[kind]
    return f'<span class="kind {kind}">{label}</span>'


def _release_section(result: Mapping[str, Any], title: str) -> list[str]:
    """The title, the release summary table and the note on the three kinds of numbers."""
    man = result.get("release_manifest") or {}
    ev = result.get("evaluation") or {}
    parts = [f"<h1>{html.escape(title)}</h1>"]
    parts.append(
        _table(
            ["item", "value"],
            [
                ["truth", ev.get("truth")],
                ["release", ev.get("release")],
                ["post-processing", man.get("postprocess")],
                ["mechanism", man.get("mechanism")],
                ["rho (zCDP)", man.get("rho")],
                ["epsilon", man.get("epsilon")],
                ["delta", man.get("delta")],
                ["tables used", result.get("tables_source")],
                ["invariants all hold", result.get("invariants_ok")],
            ],
            "Release",
        )
    )
    parts.append(
        '<p class="note">Three kinds of numbers appear below, each tagged: '
        f"{_kind('realised')} errors of <em>this</em> release against the truth; "
        f"{_kind('closed')} the standard deviation of each noisy measurement stated in the "
        f"noisy measurement file (known to any user, before post-processing); "
        f"{_kind('empirical')} error bars from K reruns of the whole mechanism on data whose "
        "truth is known (include post-processing bias). TVD = 1 - L1/(2 POP) (seed 000 "
        "sec. 6.1); 1 means exact.</p>"
    )
    return parts


def _accuracy_section(result: Mapping[str, Any]) -> list[str]:
    """TVD figure and tables of realised error by measure and geolevel."""
    levels = result["geolevels"]
    parts = [f"<h2>Accuracy by geolevel {_kind('realised')}</h2>"]
    parts.append(_img(_tvd_figure(result), "TVD by geolevel"))
    rows = []
    for m, per in result["metrics"].items():
        rows.append([_MEASURE_LABELS.get(m, m)] + [per[lv]["tvd"] for lv in levels])
    parts.append(_table(["TVD"] + list(levels), rows, "TVD by measure and geolevel"))
    rows = []
    for lv in levels:
        r = result["metrics"]["total_population"][lv]
        rows.append([lv, r["n"], r["mae"], r["rmse"], r["bias"], r["max_abs_error"], r["tvd"]])
    parts.append(
        _table(
            ["geolevel", "units", "MAE", "RMSE", "bias", "max |error|", "TVD"],
            rows,
            "Total population",
        )
    )
    rows = []
    for m in ("P1", "P2", "P3", "P4", "P5", "H1", "detailed", "hispanic*cenrace"):
        if m not in result["metrics"]:
            continue
        for lv in levels:
            r = result["metrics"][m][lv]
            rows.append([f"{m} {lv}", r["n"], r["mae"], r["rmse"], r["bias"], r["max_abs_error"]])
    parts.append(
        _table(
            ["measure, geolevel", "counts", "MAE", "RMSE", "bias", "max |error|"],
            rows,
            "Every count of each table / histogram",
        )
    )
    return parts


def _scatter_section(
    levels: list[str], scatter: Mapping[str, tuple[np.ndarray, np.ndarray]] | None
) -> list[str]:
    """Released-vs-true scatter plots for County and the lowest geolevel (if given)."""
    if not scatter:
        return []
    parts = [f"<h2>Released vs true counts {_kind('realised')}</h2>"]
    picks = [lv for lv in ("County", levels[-1]) if lv in scatter]
    for lv in dict.fromkeys(picks):
        t, r = scatter[lv]
        parts.append(_img(_scatter_figure(t, r, lv), f"{lv}: released vs true total population"))
    return parts


def _bias_section(result: Mapping[str, Any]) -> list[str]:
    """Bias by true-count bin: figure, total population table and P1 table."""
    levels = result["geolevels"]
    bins = result["bins"]
    parts = [f"<h2>Bias by size {_kind('realised')}</h2>"]
    parts.append(_img(_bias_figure(result), "Bias of total population by true-count bin"))
    rows = []
    for lv in levels:
        bb = result["metrics"]["total_population"][lv]["by_bin"]
        rows.append(
            [lv]
            + [f"{_fmt(bb[b]['bias'])} (n={bb[b]['n']:,})" if bb[b]["n"] else None for b in bins]
        )
    parts.append(
        _table(
            ["geolevel"] + [f"true {b}" for b in bins],
            rows,
            "Total population: bias by true-count bin",
        )
    )
    rows = []
    for lv in levels:
        bb = result["metrics"]["P1"][lv]["by_bin"]
        rows.append(
            [lv]
            + [
                f"{_fmt(bb[b]['bias'])} / {_fmt(bb[b]['mae'])}" if bb[b]["n"] else None
                for b in bins
            ]
        )
    parts.append(
        _table(
            ["geolevel"] + [f"true {b}" for b in bins],
            rows,
            "P1 lines: bias / MAE by true-count bin",
        )
    )
    return parts


def _pathology_section(result: Mapping[str, Any]) -> list[str]:
    """Shares of units at 100% occupancy or 100% under 18, released vs truth."""
    parts = [f"<h2>Pathologies {_kind('realised')}</h2>"]
    parts.append(
        "<p>The 2010 Demonstration Data Product released 310 of 3,221 counties at 100% "
        "occupancy against none in SF1 (seed 002 sec. 3), and enumeration districts with "
        "50+ people as 100% under 18 (seed 000 sec. 6.2).</p>"
    )
    parts.append(_img(_pathology_figure(result), "Pathology shares, released vs truth"))
    rows = []
    for lv in result["geolevels"]:
        o = result["pathologies"]["occupancy_100"][lv]
        u1 = result["pathologies"]["all_under18"][lv]["1"]
        u50 = result["pathologies"]["all_under18"][lv]["50"]
        rows.append(
            [
                lv,
                f"{o['released']['n_full']:,}/{o['released']['n_units']:,}",
                f"{o['truth']['n_full']:,}/{o['truth']['n_units']:,}",
                f"{u1['released']['n_all_under18']:,}/{u1['released']['n_units']:,}",
                f"{u1['truth']['n_all_under18']:,}/{u1['truth']['n_units']:,}",
                f"{u50['released']['n_all_under18']:,}/{u50['released']['n_units']:,}",
                f"{u50['truth']['n_all_under18']:,}/{u50['truth']['n_units']:,}",
            ]
        )
    parts.append(
        _table(
            [
                "geolevel",
                "100% occupied (released)",
                "(truth)",
                "100% under 18 (released)",
                "(truth)",
                "pop 50+: 100% under 18 (released)",
                "(truth)",
            ],
            rows,
            "Units with the pathology / units eligible",
        )
    )
    return parts


def _districts_section(result: Mapping[str, Any]) -> list[str]:
    """Realised error of random off-spine districts, one row per target population."""
    d = result.get("districts") or {}
    if not d:
        return []
    parts = [f"<h2>Off-spine districts {_kind('realised')}</h2>"]
    parts.append(
        "<p>Random contiguous districts of whole blocks (geocode order as the contiguity "
        "proxy; see docs/evaluation.md), pooled over several random maps.</p>"
    )
    rows = []
    for target, rec in d.items():
        if not rec.get("n_districts"):
            rows.append([target, 0, None, None, None, None, None, None])
            continue
        tp = rec["total_population"]
        rows.append(
            [
                int(target),
                rec["n_districts"],
                rec["mean_true_population"],
                tp["mae"],
                tp["rmse"],
                tp["bias"],
                rec["mean_abs_pct_error"],
                rec["tvd"].get("P2"),
            ]
        )
    parts.append(
        _table(
            [
                "target population",
                "districts",
                "mean true pop",
                "MAE",
                "RMSE",
                "bias",
                "mean |%error|",
                "TVD of P2",
            ],
            rows,
            "Total population of districts",
        )
    )
    return parts


def _trials_section(result: Mapping[str, Any]) -> list[str]:
    """The "Error bars" heading and the empirical error bars from K reruns (if any)."""
    bins = result["bins"]
    parts = ["<h2>Error bars</h2>"]
    tr = result.get("trials")
    if not tr:
        parts.append(
            "<p>No reruns in this evaluation (run with <code>--trials K</code> for empirical error bars).</p>"
        )
        return parts
    parts.append(f"<h3>From {tr['trials']} reruns of the mechanism {_kind('empirical')}</h3>")
    parts.append(_img(_trials_figure(tr, bins), "Empirical error bars of total population"))
    rows = []
    for m in ("total_population", "P1", "P2", "H1"):
        for lv, rec in tr["errors"].get(m, {}).items():
            for b in bins:
                e = rec["by_bin"].get(b)
                if not e:
                    continue
                rows.append(
                    [
                        f"{_MEASURE_LABELS.get(m, m)}",
                        lv,
                        b,
                        e["n"],
                        f"[{e['interval90'][0]}, {e['interval90'][1]}]",
                        e["abs_q90"],
                        e["mean"],
                        e["sd"],
                    ]
                )
    parts.append(
        _table(
            [
                "measure",
                "geolevel",
                "true count",
                "counts pooled",
                "90% interval of error",
                "90% of |error| <=",
                "mean error",
                "sd",
            ],
            rows,
            "Error of a published count by its size: read the interval as its error bar",
        )
    )
    return parts


def _nmf_section(result: Mapping[str, Any]) -> list[str]:
    """Closed-form sd of each noisy measurement, checked against the truth where possible."""
    parts: list[str] = []
    nmf = result.get("noisy_measurements") or {}
    for key, rec in nmf.items():
        parts.append(f"<h3>Noisy measurements ({html.escape(key)}) {_kind('closed')}</h3>")
        rows = []
        for lv, per in rec["by_level"].items():
            for qname, s in per.items():
                emp = s.get("empirical") or {}
                rows.append(
                    [
                        lv,
                        qname,
                        s["n"],
                        s["sd_mean_variance"],
                        s["interval90_halfwidth"],
                        emp.get("variance_ratio"),
                        emp.get("coverage90"),
                    ]
                )
        parts.append(
            _table(
                [
                    "geolevel",
                    "query",
                    "measurements",
                    "sd (closed form)",
                    "90% half-width",
                    "realised/stated variance",
                    "coverage of +-1.645 sd",
                ],
                rows,
                "Each noisy count y has sd = sqrt(variance) from the NMF; the last two columns check it against the truth",
            )
        )
    return parts


def _checks_section(result: Mapping[str, Any]) -> list[str]:
    """Invariant re-checks, the largest errors and the definitions list."""
    parts = ["<h2>Invariants and constraints, re-checked</h2>"]
    rows = [
        [k, v["ok"], v["violations"], v["checked"], v.get("example", "")]
        for k, v in result["invariants"].items()
    ]
    parts.append(_table(["check", "holds", "violations", "checked", "example"], rows))

    parts.append("<h2>Largest errors (total population)</h2>")
    rows = []
    for lv in result["geolevels"]:
        for e in result["largest_errors"]["total_population"][lv][:5]:
            rows.append([lv, e["geocode"] or "(US)", e["true"], e["released"], e["error"]])
    parts.append(_table(["geolevel", "geocode", "true", "released", "error"], rows))

    parts.append("<h2>Definitions</h2><ul>")
    for k, v in result.get("definitions", {}).items():
        parts.append(f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>")
    parts.append("</ul>")
    return parts


def render_report(
    result: Mapping[str, Any],
    scatter: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
    title: str = "censusdp accuracy report",
) -> str:
    """The report as one HTML string (see module docstring).

    Sections, in order: release summary, accuracy by geolevel, released-vs-true scatter,
    bias by size, pathologies, off-spine districts, error bars (reruns, then noisy
    measurements), invariants, largest errors and definitions.
    """
    parts = (
        _release_section(result, title)
        + _accuracy_section(result)
        + _scatter_section(result["geolevels"], scatter)
        + _bias_section(result)
        + _pathology_section(result)
        + _districts_section(result)
        + _trials_section(result)
        + _nmf_section(result)
        + _checks_section(result)
    )
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head>"
        f"<body>\n{body}\n<script>{_SCRIPT}</script></body></html>\n"
    )


def write_report(
    result: Mapping[str, Any],
    path: str | Path,
    scatter: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
) -> None:
    """Render :func:`render_report` and write it atomically to ``path``."""
    write_text(render_report(result, scatter), path)
