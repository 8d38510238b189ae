"""Two releases of the same truth, side by side (``censusdp compare``).

Each release is evaluated against the truth as :func:`censusdp.evaluate.evaluate_data`
does (a DP release must first pass ``censusdp validate``). The page puts the two
plain-language summaries next to each other, then a table of which release is closer
to the truth at each geolevel (mean absolute error of the population, its ratio, and
the total variation distance of every table; JASON, *Formal Privacy Methods for the
2020 Census*, 2020, sec. 6.1, shown as accuracy = 1 - TVD), the two county maps on
one fixed colour scale, a drill-down
listing both published counts of every place, and both error-vs-size scatters on shared axes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from censusdp.errors import InputError
from censusdp.evaluate import _sections as sec
from censusdp.evaluate._html import esc, img, page, table
from censusdp.evaluate._scatter import _scatter_figure, scatter_limits
from censusdp.evaluate.core import check_dp_release, evaluate_data, json_ready, read_release
from censusdp.evaluate.households import household_comparison
from censusdp.evaluate.summary import budget_words, place_rows
from censusdp.io.cef import read_cef
from censusdp.io.output_files import write_output_json, write_output_text
from censusdp.progress import say
from censusdp.tables import TABLE_NAMES
from censusdp.tables.dhc import SEX_BY_AGE_TABLE_NAMES

__all__ = ["compare_releases", "render_comparison"]


def _names(runs: Sequence[Path], names: Sequence[str] | None) -> list[str]:
    if names is not None:
        if len(names) != 2 or len(set(names)) != 2:
            raise InputError(f"names must be two different labels, got {list(names)}")
        return list(names)
    base = [r.resolve().name for r in runs]
    return [f"A ({base[0]})", f"B ({base[1]})"] if base[0] != base[1] else ["A", "B"]


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or not math.isfinite(a) or not math.isfinite(b) or a == 0:
        return None
    return b / a


def _accuracy_rows(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per geolevel: MAE of the population in each run and B/A, TVD of every table."""
    a, b = results
    rows = []
    for lv in a["geolevels"]:
        if lv not in b["metrics"]["total_population"]:
            continue
        ma = a["metrics"]["total_population"][lv]["mae"]
        mb = b["metrics"]["total_population"][lv]["mae"]
        rows.append(
            {
                "geolevel": lv,
                "units": a["units"][lv],
                "mae": [ma, mb],
                "mae_ratio_b_over_a": _ratio(ma, mb),
                "tvd": {
                    t: [r["metrics"][t][lv]["tvd"] for r in results]
                    for t in (*TABLE_NAMES, *SEX_BY_AGE_TABLE_NAMES)
                    if t in a["metrics"] and t in b["metrics"]
                },
            }
        )
    return rows


def compare_releases(
    run_a: str | Path,
    run_b: str | Path,
    truth_dir: str | Path,
    *,
    names: Sequence[str] | None = None,
    html_path: str | Path | None = None,
    json_path: str | Path | None = None,
    allow_invalid: bool = False,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Evaluate two releases of the same truth and compare them.

    Args:
        run_a, run_b: release run directories.
        truth_dir: the CEF both were made from.
        names: labels of the two releases (default ``A (<dir name>)``, ``B (...)``).
        html_path: where to write the side-by-side page (optional).
        json_path: where to write the comparison as strict JSON (optional).
        allow_invalid: compare releases that fail validation (recorded in the result).
        progress: callback for progress lines (``None``: silent).

    Returns:
        JSON-ready: ``runs`` (name, path, epsilon, rho, delta, validation), ``levels``
        (per geolevel: population MAE of each run, their ratio B/A and each table's
        TVD), ``households`` (per geolevel, when either release has a household run:
        :func:`~censusdp.evaluate.households.household_comparison`, ``None`` in the
        place of a release without one) and ``typical_errors`` (per run, per level, by
        true size).

    Raises:
        InputError: for unreadable inputs, identical runs or bad names.
        ValidationError: if a DP release fails validation and not ``allow_invalid``.
    """
    runs = [Path(run_a), Path(run_b)]
    if runs[0].resolve() == runs[1].resolve():
        raise InputError(f"compare needs two different releases; both are {run_a}")
    labels = _names(runs, names)
    cef = read_cef(truth_dir, progress=progress)
    say(progress, f"read truth ({cef.n_persons:,} persons)")
    results, details, validations = [], [], []
    for label, run in zip(labels, runs, strict=True):
        release = read_release(run)
        validation = check_dp_release(release, allow_invalid, "compare", progress)
        result, detail = evaluate_data(
            cef.persons, cef.units, release, district_targets=(), progress=progress
        )
        results.append(json_ready(result))
        details.append(detail)
        validations.append(validation)
        say(progress, f"evaluated {label}")
    per_level = [
        sec.size_rows(r["geolevels"], d["scatter"]) for r, d in zip(results, details, strict=True)
    ]
    out = {
        "truth": str(Path(truth_dir).resolve()),
        "runs": [
            {
                "name": label,
                "path": str(run.resolve()),
                "epsilon": d["manifest"].get("epsilon"),
                "rho": d["manifest"].get("rho"),
                "delta": d["manifest"].get("delta"),
                "seed": d["manifest"].get("seed"),
                "invariants_ok": r["invariants_ok"],
                "validation": v,
            }
            for label, run, r, d, v in zip(labels, runs, results, details, validations, strict=True)
        ],
        "levels": _accuracy_rows(results),
        "households": household_comparison(results),
        "typical_errors": {label: pl for label, pl in zip(labels, per_level, strict=True)},
    }
    out = json_ready(out)
    if json_path is not None:
        write_output_json(out, json_path, option="--json")
        say(progress, f"wrote {json_path}")
    if html_path is not None:
        write_output_text(render_comparison(out, results, details), html_path, option="--html")
        say(progress, f"wrote {html_path}")
    return out


def _aligned_rows(details: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Place rows of both runs, in the first run's order (zeros where B lacks a place)."""
    rows = [place_rows(d["hierarchy"], d["truth_tables"], d["release_tables"]) for d in details]
    index = {r["geocode"]: r for r in rows[1]}
    zero = {k: 0 for k in rows[0][0]["released"]} if rows[0] else {}
    second = [index.get(r["geocode"], {**r, "released": zero}) for r in rows[0]]
    return [rows[0], second]


def _closer_sentence(level: str, ma: float, mb: float, labels: Sequence[str]) -> str:
    """How far off a level's populations are in each release, and which is closer (or
    that they are as close: the same numbers never make one of them the closer)."""

    def people(x: float) -> str:
        return f"{x:.3g} " + ("person" if f"{x:.3g}" == "1" else "people")

    a, b = f"{ma:.3g}", f"{mb:.3g}"
    closer = "as close" if a == b else f"{labels[0] if ma < mb else labels[1]} is closer"
    return (
        f"{sec.plural(level).capitalize()}: populations are off by {people(ma)} on average "
        f"in {labels[0]} and {people(mb)} in {labels[1]} ({closer})."
    )


def render_comparison(
    comparison: dict[str, Any], results: Sequence[dict[str, Any]], details: Sequence[dict[str, Any]]
) -> str:
    """The side-by-side page (see the module docstring)."""
    labels = [r["name"] for r in comparison["runs"]]
    parts = [
        "<h1>Two census releases, side by side</h1>",
        f'<p class="sub">{esc(labels[0])} and {esc(labels[1])}, both compared with the '
        "confidential data they were made from.</p>",
        '<div class="cols">',
    ]
    for label, result, detail in zip(labels, results, details, strict=True):
        per_level = comparison["typical_errors"][label]
        budget = budget_words(detail["manifest"])
        parts += [
            "<div>",
            *sec.summary_block(label, result, detail["manifest"], budget, per_level),
            "</div>",
        ]
    parts.append("</div>")
    parts.append('<section id="accuracy"><h2>Which is closer to the truth?</h2>')
    rows, sentences = [], []
    levels = comparison["levels"]
    shown = [t for t in ("P1", "P2", "H1", "P12") if levels and t in levels[0]["tvd"]]
    for rec in levels:
        ma, mb = rec["mae"]
        ratio = rec["mae_ratio_b_over_a"]
        tv = rec["tvd"]
        rows.append(
            [rec["geolevel"], rec["units"], ma, mb, ratio] + [x for t in shown for x in tv[t]]
        )
        if rec["units"] > 1 and ratio is not None and ma and mb:
            sentences.append(_closer_sentence(rec["geolevel"], ma, mb, labels))
    head = ["geolevel", "places", f"MAE {labels[0]}", f"MAE {labels[1]}", "MAE ratio B/A"]
    for t in shown:  # P12 (sex by age) when both releases have age
        head += [f"accuracy {t} {labels[0]}", f"accuracy {t} {labels[1]}"]
    parts.append("<p>" + " ".join(esc(s) for s in sentences) + "</p>")
    parts.append(
        table(
            head,
            rows,
            "Mean absolute error of the population, and accuracy = 1 - TVD (total variation "
            "distance) of each table "
            "(1 = every person counted in the right cell; 0.98 = 2% of people misplaced)",
            name="compare_accuracy",
        )
    )
    parts.append("</section>")
    parts += _household_block(comparison.get("households") or [], labels)
    rows_per_run = _aligned_rows(details)
    maps = []
    for label, rows in zip(labels, rows_per_run, strict=True):
        mp = sec.map_block(rows, f"{label}: published minus true population, percent")
        if mp:
            maps += ["<div>", *mp, "</div>"]
    if maps:
        parts += [
            '<section id="map"><h2>Maps (one colour scale)</h2><div class="cols">',
            *maps,
            "</div></section>",
        ]
    parts += sec.drill_block(sec.places_payload(labels, rows_per_run))
    parts.append(
        '<section id="scatter"><h2>Error against size</h2><p>Both releases are drawn on '
        'the same axes, so their errors can be compared by eye.</p><div class="cols">'
    )
    for lv in ("County", "Block"):
        pairs = [d["scatter"][lv] for d in details if lv in d["scatter"]]
        if not pairs:
            continue
        limits = scatter_limits(pairs)
        for label, detail in zip(labels, details, strict=True):
            if lv in detail["scatter"]:
                t, r = detail["scatter"][lv]
                png = _scatter_figure(t, r, lv, limits=limits)
                parts.append(img(png, f"{label}: {lv} error against size"))
    parts.append("</div></section>")
    return page("Two census releases, side by side", "\n".join(parts))


def _household_block(rows: Sequence[dict[str, Any]], labels: Sequence[str]) -> list[str]:
    """The household tables of the two releases side by side (none: no section)."""
    if not rows:
        return []

    def cell(x: Any) -> Any:
        return "no household run" if x is None else x

    measures = rows[0]["measures"]
    body = []
    for rec in rows:
        line = [rec["geolevel"], rec["households_true"]]
        line += [cell(x) for key in ("households", "mae", "rmse") for x in rec[key]]
        line += [cell(x) for n in measures for x in rec["tvd"][n]]
        line += [cell(x) for x in rec["occupancy_100"]] + [rec["occupancy_100_true"]]
        body.append(line)
    head = ["geolevel", "households, true"]
    for what in ("households", "MAE", "RMSE"):
        head += [f"{what} {labels[0]}", f"{what} {labels[1]}"]
    for n in measures:
        head += [f"accuracy {n} {labels[0]}", f"accuracy {n} {labels[1]}"]
    head += [f"100% occupied {labels[0]}", f"100% occupied {labels[1]}", "100% occupied, true"]
    words = ", ".join(f"{n} {w}" for n, w in measures.items())
    return [
        '<section id="households"><h2>Households</h2>',
        "<p>The household tables of each release with a household run, against the "
        f"households of the confidential data ({esc(words)}).</p>",
        table(
            head,
            body,
            "Households per geounit (MAE, RMSE), accuracy = 1 - TVD of each household "
            "table, and the share of geounits with housing units at 100% occupancy",
            name="compare_households",
        ),
        "</section>",
    ]
