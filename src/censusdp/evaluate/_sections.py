"""The readable parts of a report page: summary, size table, map and place drill-down.

Shared by :mod:`censusdp.evaluate.report` (one release) and
:mod:`censusdp.evaluate.compare` (two releases side by side). Numbers come from
:mod:`censusdp.evaluate.summary`; this module only turns them into HTML.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from censusdp.evaluate._html import Split, esc, json_script, table
from censusdp.evaluate.maps import class_rule, county_map_svg
from censusdp.evaluate.summary import KEY_COUNTS, typical_errors

LEVEL_WORDS: dict[str, tuple[str, str]] = {
    "US": ("the nation", "nations"),
    "State": ("a state", "states"),
    "County": ("a county", "counties"),
    "Tract": ("a census tract", "census tracts"),
    "BlockGroup": ("a block group", "block groups"),
    "Block": ("a block", "blocks"),
}


def plural(level: str) -> str:
    """``"counties"`` for ``"County"``; the level name itself if unknown."""
    return LEVEL_WORDS.get(level, (level, level))[1]


def released_sentence(result: Mapping[str, Any], manifest: Mapping[str, Any]) -> str:
    """What was published: tables, places by level, people and housing units."""
    units = result.get("units") or {}
    levels = [lv for lv in result.get("geolevels", []) if lv != "US"]
    places = ", ".join(
        f"{units.get(lv, 0):,} {plural(lv) if units.get(lv, 0) != 1 else lv.lower()}"
        for lv in levels
    )
    people = manifest.get("persons_released")
    hus = manifest.get("units_released")
    what = "Tables P1-P5 (race, Hispanic origin, voting age, group quarters) and H1 (occupancy)"
    s = f"{what} for {places}"
    if isinstance(people, int):
        s += f": {people:,} people"
        if isinstance(hus, int):
            s += f" and {hus:,} housing units and group-quarters facilities"
    s += "."
    nm = manifest.get("noisy_measurements")
    if isinstance(nm, int):
        s += (
            f" The {nm:,} noisy measurements the tables were computed from are published too, "
            "so anyone can check or redo the estimation."
        )
    return s


def size_rows(
    levels: Sequence[str], scatter: Mapping[str, tuple[np.ndarray, np.ndarray]]
) -> dict[str, list[dict[str, Any]]]:
    """:func:`~censusdp.evaluate.summary.typical_errors` of total population per level."""
    return {lv: typical_errors(*scatter[lv]) for lv in levels if lv in scatter}


def _cell(rec: Mapping[str, Any] | None) -> Split:
    """The typical error shown with its 90th percentile and count; downloaded as three
    numbers (:func:`_size_columns`)."""
    if not rec:
        return Split("&ndash;", (None, None, None))
    return Split(
        f'<span class="big">{rec["median_abs"]:,}</span> '
        f"<small>(9 in 10 within {rec['q90_abs']:,}; n = {rec['n']:,})</small>",
        (rec["median_abs"], rec["q90_abs"], rec["n"]),
    )


def _size_columns(level: str) -> Split:
    """A level's column of :func:`size_table`, downloaded as three CSV columns."""
    name = plural(level)
    return Split(
        name,
        (f"{name}: typical error", f"{name}: 9 in 10 within", f"{name}: number of {name}"),
    )


def size_table(
    per_level: Mapping[str, list[dict[str, Any]]],
    caption: str,
    first: str = "true population of the place",
) -> str:
    """Rows: population classes (``first`` names them); columns: geolevels; cells: typical |error|."""
    levels = [lv for lv in per_level if lv not in ("US", "State")]
    lows: dict[str, int] = {}
    for lv in levels:
        for rec in per_level[lv]:
            lows[rec["label"]] = rec["low"]
    labels = sorted(lows, key=lows.__getitem__)
    rows = []
    for lab in labels:
        row = [esc(lab)]
        for lv in levels:
            rec = next((r for r in per_level[lv] if r["label"] == lab), None)
            row.append(_cell(rec))
        rows.append(row)
    return table(
        [first] + [_size_columns(lv) for lv in levels],
        rows,
        caption,
        name="typical_error_by_size",
        raw=True,
    )


def size_sentences(per_level: Mapping[str, list[dict[str, Any]]]) -> list[str]:
    """A plain sentence per level for its most common populated size class."""
    out = []
    for lv in ("County", "Tract", "BlockGroup", "Block"):
        recs = [r for r in per_level.get(lv, []) if r["low"] > 0]
        if not recs:
            continue
        r = max(recs, key=lambda x: x["n"])
        a = LEVEL_WORDS[lv][0]
        pct = r["median_abs_pct"]
        pct_s = ""
        if pct is not None and pct >= 0.05:
            share = f"{pct:.0f}" if pct >= 10 else f"{pct:.2g}"
            pct_s = f" ({share}% of its population)"
        out.append(
            f"For {a} with {r['label']}, the published population is typically off by "
            f"<b>{r['median_abs']:,}</b>{pct_s}; 9 in 10 are within {r['q90_abs']:,}."
        )
    return out


def summary_block(
    title: str,
    result: Mapping[str, Any],
    manifest: Mapping[str, Any],
    budget: Mapping[str, Any],
    per_level: Mapping[str, list[dict[str, Any]]],
) -> list[str]:
    """The plain-language summary of one release (a ``<section id="summary">``)."""
    parts = [f'<section class="summary" id="summary"><h2>{esc(title)}</h2>']
    parts.append(f"<p><b>What was released.</b> {esc(released_sentence(result, manifest))}</p>")
    parts.append("<p><b>Privacy.</b> " + " ".join(esc(s) for s in budget["sentences"]) + "</p>")
    sents = size_sentences(per_level)
    if sents:
        parts.append("<p><b>How far off are the counts?</b> " + " ".join(sents) + "</p>")
    parts.append(
        size_table(
            per_level,
            "Total population: typical difference between published and true count "
            "(median, with the range that holds 9 in 10 places)",
        )
    )
    inv = result.get("invariants") or {}
    exact = [
        k for k in ("state_population", "block_housing_units", "block_gq_facilities") if k in inv
    ]
    if exact:
        ok = all(inv[k]["ok"] for k in exact)
        parts.append(
            "<p><b>Exact counts.</b> State populations and every block's numbers of housing "
            "units and group-quarters facilities are published without noise: "
            + (
                '<span class="ok">checked, exact</span>.'
                if ok
                else '<span class="bad">NOT exact</span>.'
            )
            + " Counts are never negative and every place adds up to the places it contains.</p>"
        )
    parts.append("</section>")
    return parts


def county_values(
    rows: Sequence[Mapping[str, Any]], key: str = "population"
) -> tuple[dict[str, float], dict[str, str]]:
    """Percent error of ``key`` per county and a tooltip per county."""
    values: dict[str, float] = {}
    labels: dict[str, str] = {}
    for r in rows:
        if r["level"] != "County" or len(r["geocode"]) != 5:
            continue
        t, p = r["truth"][key], r["released"][key]
        pct = 100.0 * (p - t) / t if t > 0 else math.nan
        values[r["geocode"]] = pct
        labels[r["geocode"]] = (
            f"{r['NAME']}: published {p:,}, true {t:,}, {difference_words(p - t, t)}"
        )
    return values, labels


def difference_words(diff: int, true: int) -> str:
    """A difference in people and, where it means something, in percent of the truth.

    ``"exact"`` for none; ``"+2 people (under 0.1%)"`` when the percentage would round
    to zero (never ``+0.0%``); ``"-41 people (-1.3%)"`` otherwise; people only when the
    true count is 0.
    """
    if diff == 0:
        return "exact"
    people = f"{diff:+,} {'person' if abs(diff) == 1 else 'people'}"
    if true <= 0:
        return people
    return f"{people} ({fmt_pct(100.0 * diff / true)})"


def map_block(rows: Sequence[Mapping[str, Any]], title: str) -> list[str]:
    """The county map of percent error of the population (empty if no county maps).

    Colours are fixed classes of percent error (:data:`censusdp.evaluate.maps.PERCENT_CLASSES`),
    the same on every map, never stretched to the largest error of the data.
    """
    values, labels = county_values(rows)
    if not values:
        return []
    svg = county_map_svg(values, labels, title=title)
    if svg is None:
        return []
    return [
        f"<figure>{svg}<figcaption>{esc(title)}. Red: published above the truth; blue: "
        f"below. {esc(class_rule())} Hover a county for its numbers; click it to list its "
        "tracts. Boundaries: "
        "U.S. Census Bureau cartographic boundary files via the us-atlas package (ISC "
        "licence).</figcaption></figure>"
    ]


def places_payload(
    runs: Sequence[str], rows_per_run: Sequence[Sequence[Mapping[str, Any]]]
) -> dict[str, Any]:
    """The drill-down data: one entry per place with true and published key counts."""
    keys = [k for k, _, _, _ in KEY_COUNTS]
    base = rows_per_run[0]
    places = []
    for i, r in enumerate(base):
        places.append(
            {
                "l": r["level"],
                "c": r["geocode"],
                "g": r["GEOID"],
                "n": r["NAME"],
                "p": r["parent"],
                "t": [r["truth"][k] for k in keys],
                "r": [[rows[i]["released"][k] for k in keys] for rows in rows_per_run],
            }
        )
    return {
        "keys": keys,
        "labels": [lab for _, _, _, lab in KEY_COUNTS],
        "plural": {lv: w[1] for lv, w in LEVEL_WORDS.items()},
        "runs": list(runs),
        "places": places,
    }


def drill_block(payload: Mapping[str, Any]) -> list[str]:
    """The place drill-down: a count selector, breadcrumbs and the table (filled by JS)."""
    options = "".join(
        f'<option value="{esc(k)}">{esc(lab)}</option>'
        for k, lab in zip(payload["keys"], payload["labels"], strict=True)
    )
    return [
        '<section id="places"><h2>Places: published and true counts</h2>',
        "<p>Start from the state, click a name to see the places inside it (county, census "
        "tract, block group). Every table can be downloaded as CSV; GEOID joins to Census "
        "files.</p>",
        f'<label>Count shown: <select id="drill-count">{options}</select></label>',
        '<div id="drill" class="drill"><noscript>The drill-down needs JavaScript.</noscript></div>',
        json_script("places-data", payload),
        "</section>",
    ]


def fmt_pct(x: float | None) -> str:
    """``"+1.2%"``, ``"under 0.1%"`` for a nonzero percentage that rounds to zero,
    ``"0%"``, or a dash."""
    if x is None or not math.isfinite(x):
        return "&ndash;"
    if x == 0:
        return "0%"
    if abs(x) < 0.05:
        return "under 0.1%"
    return f"{x:+.1f}%"
