"""The HTML page of ``censusdp evaluate RUN`` without the truth: expected errors.

One self-contained page (the building blocks of :mod:`censusdp.evaluate._html`): a
plain-language summary ("published counts for census tracts are typically off by about N
people"), the expected typical error by size of place, then per measure a table of the
expected errors of the released counts (simulated), of the GLS estimates and of the raw
noisy measurements (closed form), and how they were derived. The numbers come from
:func:`censusdp.evaluate.errorbars.expected_errors`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from censusdp.evaluate import _sections as sec
from censusdp.evaluate._html import Split, dir_name, esc, fmt, num, page, table
from censusdp.evaluate.summary import budget_words
from censusdp.io.output_files import write_output_text

__all__ = [
    "expected_sentences",
    "predicted_section",
    "render_expected_report",
    "write_expected_report",
]

_MEASURE_TITLES = {
    "total_population": "Total population",
    "P1": "P1 Race",
    "P2": "P2 Hispanic or Latino, and not Hispanic or Latino by race",
    "P3": "P3 Race for the population 18 years and over",
    "P4": "P4 Hispanic or Latino by race, 18 years and over",
    "P5": "P5 Group quarters population by type",
    "H1": "H1 Occupancy status",
    "P12": "P12 Sex by age for selected age categories",
    "PCT12": "PCT12 Sex by single-year age",
    "GQ1": "GQ1 Group quarters population by detailed type",
    "P15": "P15 Hispanic or Latino origin of householder by race of householder",
    "P18": "P18 Household type",
    "P22": "P22 Household type by age of householder",
    "H13": "H13 Household size",
    "P16": "P16 Household type",
    "H3": "H3 Occupancy status",
    "H4": "H4 Tenure",
    "H5": "H5 Vacancy status",
    "H9": "H9 Household size",
}


def _num(x: float | None, digits: int = 1) -> str:
    if x is None:
        return "?"
    return f"{x:,.{digits}f}" if abs(x) < 100 else f"{x:,.0f}"


def expected_sentences(result: Mapping[str, Any]) -> list[str]:
    """One plain sentence per level below the state: how far off its counts typically are."""
    rel = result["released"]["by_level"].get("total_population", {})
    margins = (result["released"].get("margins") or {}).get("total_population", {})
    gls = (result.get("gls") or {}).get("by_level", {}).get("total_population", {})
    k = result["released"]["simulations"]
    out = []
    for lv in ("County", "Tract", "BlockGroup", "Block"):
        r = rel.get(lv)
        if r is None:
            continue
        a = sec.LEVEL_WORDS[lv][1]
        mg = margins.get(lv)
        if mg is not None:
            out.append(
                f"The margin of error (90%) of a published population count for {a} is "
                f"<b>&plusmn;{_num(mg['moe90'])}</b> people (root mean square over the "
                "places of the <code>moe90</code> that <code>censusdp infer --simulations"
                "</code> writes for each count: one margin per count)."
            )
        mc = (
            f"Monte Carlo error &plusmn;{_num(r['mae_mc_se'], 2)} over {k} simulated releases"
            if r.get("mae_mc_se") is not None
            else f"{k} simulated release{'s' if k != 1 else ''}, no Monte Carlo error"
        )
        s = (
            f"Published population counts for {a} are typically off by about "
            f"<b>{_num(r['mae'])}</b> people (expected mean absolute error; {mc}); "
            f"9 in 10 are within {r['abs_q90']:,}."
        )
        g = gls.get(lv)
        if g is not None:
            s += (
                f" Estimated from all the noisy measurements (GLS, <code>censusdp infer</code>), "
                f"they have a standard deviation of {_num(g['mean_sd'])}, and their 90% "
                f"interval is &plusmn;{_num(g['ci90_halfwidth'])}."
            )
        out.append(s)
    return out


def _measure_table(result: Mapping[str, Any], measure: str) -> str:
    rel = result["released"]["by_level"].get(measure, {})
    gls = (result.get("gls") or {}).get("by_level", {}).get(measure, {})
    raw = (result.get("raw") or {}).get("by_level", {}).get(measure, {})
    margins = (result["released"].get("margins") or {}).get(measure, {})
    rows = []
    for lv in result["geolevels"]:
        r, g, w = rel.get(lv, {}), gls.get(lv, {}), raw.get(lv, {})
        mg = margins.get(lv, {})
        iv = r.get("interval90") or (None, None)
        rows.append(
            [
                esc(lv),
                num(result["units"].get(lv)),
                num(mg.get("moe90"), 3),
                Split(
                    fmt(r.get("mae"), 3) + " &plusmn; " + fmt(r.get("mae_mc_se"), 2),
                    (r.get("mae"), r.get("mae_mc_se")),
                ),
                num(r.get("rmse"), 3),
                Split(
                    esc(f"[{iv[0]}, {iv[1]}]") if iv and iv[0] is not None else "&ndash;",
                    (iv[0], iv[1]) if iv else (None, None),
                ),
                num(r.get("abs_q90")),
                num(g.get("mae"), 3),
                num(g.get("rmse"), 3),
                num(g.get("ci90_halfwidth"), 3),
                num(w.get("rmse"), 3),
            ]
        )
    return table(
        [
            "geolevel",
            "places",
            "published: margin of error (90%)",
            Split("released: MAE ± MC se", ("released: MAE", "released: MAE MC se")),
            "released: RMSE",
            Split(
                "released: 90% of errors in",
                ("released: 90% of errors from", "released: 90% of errors to"),
            ),
            "released: 9 in 10 within",
            "GLS: MAE",
            "GLS: RMSE",
            "GLS: 90% interval ±",
            "raw measurement: RMSE",
        ],
        rows,
        f"{_MEASURE_TITLES.get(measure, measure)}: expected errors per count",
        name=f"expected_{measure}",
        raw=True,
    ) + _bias_note(result, rel)


def _bias_note(result: Mapping[str, Any], rel: Mapping[str, Any]) -> str:
    """The mean signed error in words: the root's, which every level's only divides."""
    levels = result.get("geolevels") or []
    root = levels[0] if levels else None
    b = (rel.get(root) or {}).get("bias") if root else None
    if b is None or abs(b) < 5e-4:
        return ""
    return (
        f'<p class="note">On average the published counts are {abs(b):.3f} '
        f"{'above' if b > 0 else 'below'} the true ones at the {esc(root)} level (mean "
        "signed error, expected); at a level of n places it is this divided by n.</p>"
    )


def predicted_section(result: Mapping[str, Any]) -> list[str]:
    """With the truth and ``--simulations``: predicted against measured MAE of the release.

    Empty when the evaluation has no ``expected`` block.
    """
    exp = result.get("expected")
    if not exp:
        return []
    metrics = result.get("metrics") or {}
    rows = []
    for m in exp.get("measures", []):
        for lv in exp.get("geolevels", []):
            p = exp["released"]["by_level"].get(m, {}).get(lv)
            a = metrics.get(m, {}).get(lv, {}).get("mae")
            if p is None or a is None:
                continue
            ratio = a / p["mae"] if p["mae"] else None
            rows.append(
                [
                    esc(m),
                    esc(lv),
                    num(a, 3),
                    Split(
                        fmt(p["mae"], 3) + " &plusmn; " + fmt(p.get("mae_mc_se"), 2),
                        (p["mae"], p.get("mae_mc_se")),
                    ),
                    num(p.get("mae_sd_one_release"), 2),
                    num(ratio, 3),
                ]
            )
    k = exp["released"]["simulations"]
    return [
        '<section id="predicted"><h2>Predicted from the release alone, against measured</h2>',
        '<p class="note">What <code>censusdp evaluate RUN</code> without the truth '
        f"predicts ({k} simulated releases around the release itself, re-estimated), "
        "next to the MAE measured here against the truth. One release's MAE scatters "
        "around its expectation by about the sd shown.</p>",
        table(
            [
                "measure",
                "geolevel",
                "MAE measured",
                Split("MAE predicted ± MC se", ("MAE predicted", "MAE predicted MC se")),
                "sd of one release",
                "measured / predicted",
            ],  # fmt: skip
            rows,
            "Mean absolute error of the published counts: measured and predicted",
            name="predicted_vs_measured",
            raw=True,
        ),
        "</section>",
    ]


def render_expected_report(
    result: Mapping[str, Any],
    manifest: Mapping[str, Any] | None = None,
    title: str = "How accurate is this census release? Expected errors",
) -> str:
    """The page as one HTML string.

    Args:
        result: the dict of :func:`censusdp.evaluate.errorbars.expected_errors`.
        manifest: the release manifest (for what was released and the privacy budget).
        title: the page title.
    """
    manifest = manifest or result.get("release_manifest") or {}
    rel = result["released"]
    parts = [f"<h1>{esc(title)}</h1>"]
    if result.get("release"):
        parts.append(
            f'<p class="sub">Release <code>{esc(dir_name(result["release"]))}</code>. No confidential '
            "data was used: every number below is derived from the published noisy "
            "measurements and the public noise law.</p>"
        )
    parts.append('<section class="summary" id="summary"><h2>Summary</h2>')
    parts.append(f"<p><b>What was released.</b> {esc(sec.released_sentence(result, manifest))}</p>")
    parts.append(
        "<p><b>Privacy.</b> "
        + " ".join(esc(s) for s in budget_words(manifest)["sentences"])
        + "</p>"
    )
    sents = expected_sentences(result)
    if sents:
        parts.append("<p><b>How far off are the counts?</b> " + " ".join(sents) + "</p>")
    by_size = rel.get("by_size") or {}
    if by_size:
        parts.append(
            sec.size_table(
                by_size,
                "Total population: expected typical difference between published and true "
                "count (median, with the range that holds 9 in 10 places), by the size of "
                "the place in the release",
                first="population of the place in the release",
            )
        )
    k2 = rel.get("calibration_simulations", 0)
    parts.append(
        "<p><b>How these were derived.</b> "
        f"The release's own measurement plan and noise law were applied {rel['simulations']} "
        "times to a plausible truth (the release itself) and the post-processing "
        f"({esc(rel.get('postprocess', 'topdown'))}) re-run each time, with seed "
        f"{rel['seed']}; the errors are those of the re-estimated counts. "
        + (
            f"Because the release is smoother than the truth, {k2} more re-releases of the "
            "first simulated release measure how much one re-release shrinks the error, "
            "and the margins of error are scaled up by that factor (per level and line). "
            if k2
            else ""
        )
        + "These margins are the numbers <code>censusdp infer RUN --simulations K</code> "
        "writes for each published count (<code>moe90</code>, with the same seed), pooled "
        "here by level. The GLS and raw measurement errors are exact closed forms from "
        "the variances in the noisy measurement file; the published count is the number "
        "to use (its margin is smaller) except for small groups in large areas, where "
        "the GLS estimate is unbiased.</p>"
    )
    gls = result.get("gls") or {}
    if gls.get("available") is False:
        parts.append(f"<p><b>GLS estimates:</b> not available: {esc(gls.get('reason'))}</p>")
    household = rel.get("household_run")
    if household:  # the household run's tables, re-released with the persons
        parts.append(
            f'<p id="household-run"><b>{esc(", ".join(household["tables"]))}</b> are made '
            f"by the release's household run ({esc(household['schema'])}): "
            f"{esc(household['re_released'])}. Its plausible truth: "
            f"{esc(household['households_truth'])}. The persons are "
            f"{esc(household['person_run'])}.</p>"
        )
    parts.append("</section>")
    parts.append('<section id="expected"><h2>Expected errors by geolevel and table</h2>')
    parts.append(
        '<p class="note">Per count: every line of the table at every geounit of the level. '
        "Margin of error (90%): the root mean square of the published counts' "
        "<code>moe90</code> (1.645 times the simulated RMSE, as in "
        "<code>censusdp infer</code>'s margins). MAE: mean absolute error; RMSE: root mean squared error; MC se: Monte Carlo "
        "standard error of the simulated MAE; '90% of errors in': the 5th and 95th "
        "percentiles of the signed error (published minus true); GLS MAE is "
        "sqrt(2/pi) times its standard deviation. There is no mean signed error (bias) "
        "column: the counts of every level add up to the top level's, so a level's mean "
        "signed error is the top level's divided by its number of places (0 for the total "
        "population and H1, whose totals are published exactly); where it is not 0, a line "
        "under the table states it (the JSON output keeps every level's).</p>"
    )
    for m in result.get("measures", []):
        parts.append(_measure_table(result, m))
    parts.append("</section>")
    return page(title, "\n".join(parts))


def write_expected_report(
    result: Mapping[str, Any], path: str | Path, manifest: Mapping[str, Any] | None = None
) -> None:
    """Render :func:`render_expected_report` and write it atomically to ``path``."""
    write_output_text(render_expected_report(result, manifest), path, option="--html")
