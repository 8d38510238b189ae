"""A self-contained HTML report of a release's accuracy, for readers and for analysts.

The page opens with a plain-language summary (:mod:`censusdp.evaluate.summary`): what
was released, the privacy-loss budget in words, and how far off the population of a
place of each size typically is. Then, for readers: a county map of the error, a
drill-down from the state to its counties, tracts and block groups with names, GEOIDs
and CSV downloads, the released-vs-true scatter (every county shown, log scale) and
the bias by size with its number of places. Then, for analysts:

* TVD by geolevel (JASON, *Formal Privacy Methods for the 2020 Census*, 2020,
  sec. 6.1 and Figs. 6-1, 6-2 at one budget);
* the pathology shares (100% occupancy, 100% under 18) released vs true;
* the error-bar tables, labelled by where each number comes from: *realised* (this one
  release vs the truth), *closed-form* (stated noise of each noisy measurement in the
  NMF) or *empirical* (K reruns of the mechanism);
* invariants re-checked, largest errors, definitions.

Plots use matplotlib's object API (``Figure`` + Agg canvas), never ``pyplot``, so no
global state or display is touched. The file needs no network and no other file.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from censusdp.evaluate import _sections as sec
from censusdp.evaluate._html import Split, dir_name, img, page
from censusdp.evaluate._html import fmt as _fmt
from censusdp.evaluate._html import table as _table
from censusdp.evaluate._scatter import _scatter_figure, figure_png, scatter_limits
from censusdp.evaluate.errorbars_report import predicted_section
from censusdp.evaluate.households import household_section
from censusdp.evaluate.summary import budget_words, place_rows
from censusdp.io.output_files import write_output_text
from censusdp.tables.geoids import geo_identifiers

__all__ = ["figure_png", "render_report", "scatter_limits", "sweep_figure", "write_report"]

ACCURACY_LABEL = "accuracy = 1 - TVD = 1 - L1 / (2 POP)"
"""Axis label of the evaluation's ``tvd`` metric: the JSON key keeps JASON's name, but the
number is one minus the total variation distance (1 = exact), and pages say so."""

ACCURACY_LEGEND = (
    "Accuracy = 1 - TVD, where TVD = L1 / (2 POP) is the total variation distance of "
    "JASON, Formal Privacy Methods for the 2020 Census (2020), sec. 6.1: L1 adds up "
    "|published - true| over every count of a table at every place of the level, and "
    "POP is the true number of people (or housing units) those counts add up to. "
    "1 means every count is exact; 0.98 means 2% of the people are counted in a wrong "
    'cell or place. The JSON output names it "tvd".'
)
"""The sentence that explains the accuracy numbers wherever a page shows them."""

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
    "H13": "H13 households by size",
    "P12": "P12 sex by age (groups)",
    "PCT12": "PCT12 sex by single year of age",
}


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
    ax.set_ylabel(ACCURACY_LABEL)
    ax.set_title("Accuracy by geolevel (1 = exact; 0.98 = 2% of people misplaced)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    return figure_png(fig)


def _bias_se(rec: Mapping[str, Any]) -> float:
    """Standard error of the mean error of a bin: ``sqrt(s^2 / n)``, ``s^2`` the sample
    variance ``(sum e^2 - (sum e)^2 / n) / (n - 1)``; 0 for ``n < 2``."""
    n = int(rec.get("n") or 0)
    if n < 2 or rec.get("sum_sq_error") is None or rec.get("sum_error") is None:
        return 0.0
    var = (float(rec["sum_sq_error"]) - float(rec["sum_error"]) ** 2 / n) / (n - 1)
    return float(np.sqrt(max(var, 0.0) / n))


def _bias_figure(result: Mapping[str, Any], measure: str = "total_population") -> bytes:
    """Mean signed error by true-count bin and geolevel, with 95% intervals and each n.

    Levels with a single unit (nation, one state) are left out: their error is fixed
    by the invariants. Each bar carries ``n`` (places in the bin) and an interval of
    +-1.96 standard errors of the mean (:func:`_bias_se`).
    """
    levels = [lv for lv in result["geolevels"] if (result.get("units") or {}).get(lv, 2) > 1]
    levels = levels or list(result["geolevels"])
    bins = result["bins"]
    fig = Figure(figsize=(8.5, 4.4))
    ax = fig.add_subplot()
    width = 0.8 / max(len(levels), 1)
    x = np.arange(len(bins))
    for i, lv in enumerate(levels):
        bb = result["metrics"][measure][lv]["by_bin"]
        pos = x + (i - (len(levels) - 1) / 2) * width
        y = np.asarray([bb[b]["bias"] if bb[b]["n"] else np.nan for b in bins], dtype=float)
        err = [1.96 * _bias_se(bb[b]) if bb[b]["n"] else 0.0 for b in bins]
        ax.bar(pos, y, width, yerr=err, capsize=2, label=lv, error_kw={"lw": 0.8})
        for p, b, yi, ei in zip(pos, bins, y, err, strict=True):
            if bb[b]["n"]:
                top = (yi if np.isfinite(yi) else 0) + (ei if (yi or 0) >= 0 else -ei)
                ax.annotate(
                    f"n={bb[b]['n']:,}",
                    (p, top),
                    fontsize=6,
                    rotation=90,
                    ha="center",
                    va="bottom" if top >= 0 else "top",
                    xytext=(0, 2 if top >= 0 else -2),
                    textcoords="offset points",
                )
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(x, [f"true {b}" for b in bins])
    ax.set_ylabel("bias: mean(published - true)")
    ax.set_title(
        f"Bias by size: {_MEASURE_LABELS.get(measure, measure)} (bars: 95% interval; n = places)",
        fontsize=10,
    )
    ax.margins(y=0.25)
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
    """Accuracy (1 - TVD) vs epsilon by geolevel for total population and race x Hispanic.

    The shape of JASON, *Formal Privacy Methods for the 2020 Census* (2020), Figs. 6-1, 6-2.
    """
    fig = Figure(figsize=(11, 4.2))
    axes = fig.subplots(1, 2, sharey=True)
    eps = [p["epsilon"] for p in sweep["points"]]
    for ax, measure, title in (
        (axes[0], "total_population", "Total population (cf. JASON 2020, Fig. 6-1)"),
        (axes[1], "hispanic*cenrace", "Race x Hispanic origin (cf. JASON 2020, Fig. 6-2)"),
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
    axes[0].set_ylabel(ACCURACY_LABEL)
    axes[1].legend(fontsize=8, loc="lower right")
    return figure_png(fig)


# -- HTML --------------------------------------------------------------------------------


def _kind(kind: str) -> str:
    label = {"realised": "realised", "closed": "closed-form", "empirical": "empirical"}[kind]
    return f'<span class="kind {kind}">{label}</span>'


def _release_section(result: Mapping[str, Any]) -> list[str]:
    """The release facts table and the note on the three kinds of numbers."""
    man = result.get("release_manifest") or {}
    ev = result.get("evaluation") or {}
    parts = ["<h2>Details for analysts</h2>"]
    parts.append(
        _table(
            ["item", "value"],
            [
                ["truth (directory)", dir_name(ev.get("truth"))],
                ["release (directory)", dir_name(ev.get("release"))],
                ["post-processing", man.get("postprocess")],
                ["mechanism", str(man.get("mechanism") or "").replace("_", " ")],
                ["rho (zCDP)", man.get("rho")],
                ["epsilon", man.get("epsilon")],
                ["delta", man.get("delta")],
                ["seed (null: secure randomness)", man.get("seed")],
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
        f"truth is known (include post-processing bias). {html.escape(ACCURACY_LEGEND)}</p>"
    )
    return parts


def _accuracy_section(result: Mapping[str, Any]) -> list[str]:
    """Accuracy (1 - TVD) figure and tables of realised error by measure and geolevel."""
    levels = result["geolevels"]
    parts = [f"<h2>Accuracy by geolevel {_kind('realised')}</h2>"]
    parts.append(f'<p class="note">{html.escape(ACCURACY_LEGEND)}</p>')
    parts.append(img(_tvd_figure(result), "Accuracy (1 - TVD) by geolevel"))
    rows = []
    for m, per in result["metrics"].items():
        rows.append([_MEASURE_LABELS.get(m, m)] + [per[lv]["tvd"] for lv in levels])
    parts.append(
        _table(
            ["accuracy (1 - TVD)"] + list(levels),
            rows,
            "Accuracy = 1 - TVD by measure and geolevel",
        )
    )
    rows = []
    for lv in levels:
        r = result["metrics"]["total_population"][lv]
        rows.append([lv, r["n"], r["mae"], r["rmse"], r["max_abs_error"], r["tvd"]])
    parts.append(
        _table(
            ["geolevel", "places", "MAE", "RMSE", "max |error|", "accuracy (1 - TVD)"],
            rows,
            "Total population",
        )
    )
    parts.append(
        '<p class="note">No bias column for total population: the state populations are '
        "published exact and every level adds up to them, so the errors of the places of "
        "a level always sum to 0 and their mean is 0 by construction. The bias by size "
        "above is not: small places can be pushed up and large ones down.</p>"
    )
    rows = []
    for m in ("P1", "P2", "P3", "P4", "P5", "H1", "P12", "PCT12", "detailed", "hispanic*cenrace"):
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
    parts.append(
        '<p class="note">The bias of H1 and of the histograms is 0 by construction: their '
        "counts split an exact total (housing units; the state's people) at every level. "
        "P1-P4 list totals and subtotals beside their parts, so their mean error need not "
        "be 0.</p>"
    )
    return parts


def _scatter_section(
    levels: list[str],
    scatter: Mapping[str, tuple[np.ndarray, np.ndarray]] | None,
    names: Mapping[str, Sequence[str]] | None = None,
) -> list[str]:
    """Error-vs-size scatter plots for County and the lowest geolevel (if given)."""
    if not scatter:
        return []
    parts = [f"<h2>Published vs true population {_kind('realised')}</h2>"]
    picks = [lv for lv in ("County", levels[-1]) if lv in scatter]
    for lv in dict.fromkeys(picks):
        t, r = scatter[lv]
        short = [n.split(", ")[0] for n in (names or {}).get(lv, [])] or None
        parts.append(
            img(
                _scatter_figure(t, r, lv, short),
                f"{lv}: published minus true population against true population",
            )
        )
    return parts


def _bias_section(result: Mapping[str, Any]) -> list[str]:
    """Bias by true-count bin: figure, total population table and P1 table."""
    levels = result["geolevels"]
    bins = result["bins"]
    parts = [f"<h2>Bias by size {_kind('realised')}</h2>"]
    parts.append(
        img(
            _bias_figure(result),
            "Bias of total population by true-count bin",
            "Mean of published - true by true size; each bar says how many places it "
            "averages (n) and its 95% interval.",
        )
    )
    rows = []
    for lv in levels:
        bb = result["metrics"]["total_population"][lv]["by_bin"]
        rows.append(
            [lv]
            + [
                Split(f"{_fmt(bb[b]['bias'])} (n={bb[b]['n']:,})", (bb[b]["bias"], bb[b]["n"]))
                if bb[b]["n"]
                else Split("&ndash;", (None, None))
                for b in bins
            ]
        )
    parts.append(
        _table(
            ["geolevel"] + [Split(f"true {b}", (f"true {b}: bias", f"true {b}: n")) for b in bins],
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
                Split(
                    f"{_fmt(bb[b]['bias'])} / {_fmt(bb[b]['mae'])}", (bb[b]["bias"], bb[b]["mae"])
                )
                if bb[b]["n"]
                else Split("&ndash;", (None, None))
                for b in bins
            ]
        )
    parts.append(
        _table(
            ["geolevel"]
            + [Split(f"true {b}", (f"true {b}: bias", f"true {b}: MAE")) for b in bins],
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
        "occupancy against none in SF1 (Van Riper, Kugler &amp; Ruggles, <em>Disclosure "
        "Avoidance in the Census Bureau's 2010 Demonstration Data Product</em>, 2020, "
        "sec. 3), and enumeration districts with 50+ people as 100% under 18 (JASON, "
        "<em>Formal Privacy Methods for the 2020 Census</em>, 2020, sec. 6.2).</p>"
    )
    parts.append(img(_pathology_figure(result), "Pathology shares, released vs truth"))

    def share(rec: Mapping[str, Any], key: str) -> Split:
        return Split(f"{rec[key]:,}/{rec['n_units']:,}", (rec[key], rec["n_units"]))

    rows = []
    for lv in result["geolevels"]:
        o = result["pathologies"]["occupancy_100"][lv]
        u1 = result["pathologies"]["all_under18"][lv]["1"]
        u50 = result["pathologies"]["all_under18"][lv]["50"]
        rows.append(
            [
                lv,
                share(o["released"], "n_full"),
                share(o["truth"], "n_full"),
                share(u1["released"], "n_all_under18"),
                share(u1["truth"], "n_all_under18"),
                share(u50["released"], "n_all_under18"),
                share(u50["truth"], "n_all_under18"),
            ]
        )
    titles = [
        ("100% occupied (released)", "100% occupied, released"),
        ("(truth)", "100% occupied, truth"),
        ("100% under 18 (released)", "100% under 18, released"),
        ("(truth)", "100% under 18, truth"),
        ("pop 50+: 100% under 18 (released)", "pop 50+: 100% under 18, released"),
        ("(truth)", "pop 50+: 100% under 18, truth"),
    ]
    parts.append(
        _table(
            ["geolevel"] + [Split(t, (f"{c}: units", f"{c}: eligible")) for t, c in titles],
            rows,
            "Units with the pathology / units eligible",
        )
    )
    return parts


def _districts_section(result: Mapping[str, Any]) -> list[str]:
    """Realised error of random districts of whole blocks (not census areas), one row per
    target population."""
    d = result.get("districts") or {}
    if not d:
        return []
    parts = [
        f"<h2>Districts that are not census areas (e.g. school or voting districts) "
        f"{_kind('realised')}</h2>"
    ]
    parts.append(
        "<p>Users add blocks up to areas the Census Bureau does not publish, such as "
        "school, voting or city-council districts. These are random districts of "
        "neighbouring whole blocks (blocks next to each other in code order), of about "
        "the target population, pooled over several random maps; the table shows how far "
        "off their population is when added up from published blocks.</p>"
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
                "accuracy (1 - TVD) of P2",
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
    parts.append(img(_trials_figure(tr, bins), "Empirical error bars of total population"))
    rows = []
    for m in ("total_population", "P1", "P2", "H1", "H13"):  # H13: a household run's
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
                        e["n"] // max(int(tr["trials"]), 1),
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
                "counts (per rerun)",
                "90% interval of error",
                "90% of |error| <=",
                "mean error",
                "sd",
            ],
            rows,
            f"Error of a published count by its size, over {tr['trials']} reruns (each "
            "count once per rerun): read the interval as its error bar",
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
                "Each noisy count y has sd = sqrt(variance) from the noisy measurement file; the last "
                "two columns check it against the truth",
            )
        )
    return parts


def _checks_section(result: Mapping[str, Any]) -> list[str]:
    """Invariant re-checks, the largest errors and the definitions list."""
    parts = ["<h2>Invariants and constraints, re-checked</h2>"]
    rows = [
        [_CHECK_WORDS.get(k, k.replace("_", " ")), v["ok"], v["violations"], v["checked"],
         v.get("example", "")]
        for k, v in result["invariants"].items()
    ]  # fmt: skip
    parts.append(_table(["check", "holds", "violations", "checked", "example"], rows))

    parts.append("<h2>Largest errors (total population)</h2>")
    rows = []
    for lv in result["geolevels"]:
        found = result["largest_errors"]["total_population"][lv][:5]
        codes = [str(e["geocode"] or "") for e in found]
        ids = _identifiers(codes, lv)
        for i, e in enumerate(found):
            geoid = ids["GEOID"][i]
            rows.append(
                [
                    lv,
                    ids["NAME"][i],
                    "none (block number not in its block group)" if geoid is None else geoid,
                ]
                + [e["true"], e["released"], e["error"]]
            )
    parts.append(_table(["geolevel", "NAME", "GEOID", "true", "published", "difference"], rows))

    parts.append("<h2>Definitions</h2><ul>")
    for k, v in result.get("definitions", {}).items():
        term = _TERM_WORDS.get(k, k.replace("_", " "))
        parts.append(f"<li><b>{html.escape(term)}</b>: {html.escape(v)}</li>")
    parts.append("</ul>")
    return parts


#: The re-checked invariants and the definitions, named in words (JSON keeps the keys).
_CHECK_WORDS = {
    "state_population": "state populations exact",
    "block_housing_units": "housing units of every block exact",
    "block_gq_facilities": "group-quarters facilities of every block exact",
    "nonnegative": "no negative count",
    "children_sum_to_parents": "places add up to the places that contain them",
    "tables_match_mdf": "tables agree with the microdata",
    "structural_zeros": "impossible cells stay empty",
    "gq_population_bounds": "group-quarters population within its bounds",
}
_TERM_WORDS = {
    "error": "error",
    "mae": "MAE (mean absolute error)",
    "rmse": "RMSE (root mean squared error)",
    "bias": "bias",
    "tvd": "accuracy (1 - total variation distance)",
    "bins": "size bins",
    "histogram_n": "counts of the detailed histogram",
    "tables_source": "where the numbers come from",
    "occupancy_100": "fully occupied places",
    "all_under18": "places with no adult",
    "nmf_sd": "noise of the measurements",
    "trials": "reruns",
}


def _identifiers(codes: Sequence[str], level: str) -> dict[str, list[Any]]:
    """NAME and GEOID of geocodes of one level (the Census identifiers, not our codes)."""
    if not codes:
        return {"NAME": [], "GEOID": []}
    ids = geo_identifiers(np.asarray(codes), len(codes[0]), level)
    return {"NAME": list(ids["NAME"]), "GEOID": list(ids["GEOID"])}


def _readable_parts(
    result: Mapping[str, Any],
    scatter: Mapping[str, tuple[np.ndarray, np.ndarray]] | None,
    detail: Mapping[str, Any] | None,
) -> tuple[list[str], dict[str, list[str]]]:
    """Summary, map and drill-down for readers; also each level's place names."""
    detail = detail or {}
    manifest = detail.get("manifest") or result.get("release_manifest") or {}
    budget = budget_words(manifest)
    per_level = sec.size_rows(result["geolevels"], scatter or {})
    parts = sec.summary_block("Summary", result, manifest, budget, per_level)
    names: dict[str, list[str]] = {}
    h = detail.get("hierarchy")
    if h is not None and detail.get("truth_tables") and detail.get("release_tables"):
        rows = place_rows(h, detail["truth_tables"], detail["release_tables"])
        for r in rows:
            names.setdefault(r["level"], []).append(r["NAME"])
        mp = sec.map_block(rows, "Published minus true population of each county, in percent")
        if mp:
            parts += ['<section id="map"><h2>Map</h2>', *mp, "</section>"]
        parts += sec.drill_block(sec.places_payload(["release"], [rows]))
    return parts, names


def render_report(
    result: Mapping[str, Any],
    scatter: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
    title: str = "How accurate is this census release?",
    *,
    detail: Mapping[str, Any] | None = None,
) -> str:
    """The report as one HTML string (see module docstring).

    Args:
        result: the dict of :func:`censusdp.evaluate.evaluate`.
        scatter: per geolevel, true and released total population of every unit.
        title: the page title.
        detail: the second value of :func:`censusdp.evaluate.evaluate_data`
            (``hierarchy``, ``truth_tables``, ``release_tables``, ``manifest``); with
            it the page has names, the county map and the place drill-down.
    """
    head = [f"<h1>{html.escape(title)}</h1>"]
    ev = result.get("evaluation") or {}
    if ev.get("release"):
        head.append(
            f'<p class="sub">Release <code>{html.escape(dir_name(ev["release"]))}</code> '
            f"compared with the confidential data it was made from.</p>"
        )
    readable, names = _readable_parts(result, scatter, detail)
    parts = (
        head
        + readable
        + _scatter_section(result["geolevels"], scatter, names)
        + _bias_section(result)
        + _release_section(result)
        + _accuracy_section(result)
        + _pathology_section(result)
        + household_section(result)
        + _districts_section(result)
        + _trials_section(result)
        + predicted_section(result)
        + _nmf_section(result)
        + _checks_section(result)
    )
    return page(title, "\n".join(parts))


def write_report(
    result: Mapping[str, Any],
    path: str | Path,
    scatter: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
    *,
    detail: Mapping[str, Any] | None = None,
) -> None:
    """Render :func:`render_report` and write it atomically to ``path``."""
    write_output_text(render_report(result, scatter, detail=detail), path, option="--html")
