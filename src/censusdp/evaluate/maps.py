"""County choropleth maps as inline SVG, from the us-atlas TopoJSON bundled as data.

The boundaries are ``counties-albers-10m.json`` of the npm package us-atlas 3.0.1
(ISC licence, ``data/us-atlas-LICENSE.txt``; U.S. Census Bureau cartographic boundary
files, 1:10,000,000, already projected to Albers USA in a 975 x 610 pixel frame). The
file is TopoJSON: shared borders are stored once as *arcs* of delta-encoded integer
points, and each county is a list of rings of arc indices (``~i`` for arc ``i``
reversed). :func:`decode_counties` undoes the quantization (``x = sum(dx) * sx + tx``)
and stitches each ring; :func:`county_map_svg` draws the counties of the states in a
release, coloured by fixed classes of a value per county (:data:`PERCENT_CLASSES`). Nothing is fetched from the network.

County codes renamed since the file was made are matched through :data:`RENAMED`.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

import numpy as np

__all__ = [
    "PERCENT_CLASSES",
    "RENAMED",
    "class_color",
    "class_rule",
    "county_map_svg",
    "decode_counties",
    "diverging_color",
]

RENAMED: dict[str, str] = {"46113": "46102", "02270": "02158"}
"""2010 county codes and the code of the same county in the boundary file."""

PERCENT_CLASSES: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0)
"""Edges of the map's colour classes, in percent of the true count, on each side of 0.

The classes are exact (0), under 0.5%, 0.5-1%, 1-2%, 2-5% and 5% or more, above (red)
and below (blue) the truth. They are fixed: a county's colour depends on its own error
only, never on the largest error of the release, so a 2-person error in a county of
thousands is a pale tint on every map and two maps can be compared by eye.
"""


@cache
def _topology() -> dict[str, Any]:
    ref = resources.files("censusdp.evaluate").joinpath("data/counties-albers-10m.json")
    return json.loads(ref.read_text("utf-8"))


def _arcs(topo: Mapping[str, Any]) -> list[np.ndarray]:
    sx, sy = topo["transform"]["scale"]
    tx, ty = topo["transform"]["translate"]
    out = []
    for arc in topo["arcs"]:
        a = np.cumsum(np.asarray(arc, dtype=np.float64), axis=0)
        out.append(np.column_stack([a[:, 0] * sx + tx, a[:, 1] * sy + ty]))
    return out


def _ring(indices: list[int], arcs: list[np.ndarray]) -> np.ndarray:
    pts = []
    for k, i in enumerate(indices):
        a = arcs[i] if i >= 0 else arcs[~i][::-1]
        pts.append(a if k == 0 else a[1:])
    return np.concatenate(pts, axis=0)


def decode_counties(states: set[str] | None = None) -> dict[str, list[np.ndarray]]:
    """County rings by 5-digit FIPS code (planar pixel coordinates, y down).

    Args:
        states: 2-digit state codes to keep (``None``: every county).

    Returns:
        For each county, its rings (outer boundaries and holes) as ``(k, 2)`` arrays.
    """
    topo = _topology()
    arcs = _arcs(topo)
    out: dict[str, list[np.ndarray]] = {}
    for g in topo["objects"]["counties"]["geometries"]:
        fips = str(g["id"])
        if states is not None and fips[:2] not in states:
            continue
        polys = [g["arcs"]] if g["type"] == "Polygon" else g["arcs"]
        out[fips] = [_ring(ring, arcs) for poly in polys for ring in poly]
    return out


def diverging_color(v: float, vmax: float) -> str:
    """Hex colour of ``v`` on a blue (negative) - white - red (positive) scale to ``+-vmax``."""
    if not math.isfinite(v) or vmax <= 0:
        return "#dddddd"
    s = max(-1.0, min(1.0, v / vmax))
    lo, mid, hi = (33, 102, 172), (247, 247, 247), (178, 24, 43)
    end = hi if s > 0 else lo
    a = abs(s)
    rgb = [round(m + (e - m) * a) for m, e in zip(mid, end, strict=True)]
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def class_color(v: float, edges: tuple[float, ...] = PERCENT_CLASSES) -> str:
    """Hex colour of ``v`` by its class of :data:`PERCENT_CLASSES` (or ``edges``).

    0 is white-grey; a nonzero ``|v|`` below ``edges[0]`` is the palest tint of red
    (positive) or blue (negative); each further class is a step darker, and
    ``|v| >= edges[-1]`` is the darkest.
    """
    if not math.isfinite(v):
        return "#dddddd"
    if v == 0:
        return diverging_color(0.0, 1.0)
    k = int(np.searchsorted(np.asarray(edges), abs(v), side="right")) + 1
    return diverging_color(math.copysign(k / (len(edges) + 1), v), 1.0)


def class_rule(edges: tuple[float, ...] = PERCENT_CLASSES, unit: str = "%") -> str:
    """The colour rule in words, for the legend and the caption."""
    bounds = [f"{e:g}" for e in edges]
    spans = [f"under {bounds[0]}{unit}"]
    spans += [f"{a}-{b}{unit}" for a, b in zip(bounds, bounds[1:], strict=False)]
    spans.append(f"{bounds[-1]}{unit} or more")
    return (
        "Colours are fixed classes of the difference, the same on every map (not "
        "scaled to the largest difference): exact, " + ", ".join(spans) + "."
    )


def _legend(width: int, ly: int, edges: tuple[float, ...], unit: str) -> str:
    """Swatches of the fixed classes, below and above the truth, with their edges."""
    k = len(edges) + 1
    vals = [-(e + 1e-9) for e in reversed(edges)] + [-edges[0] / 2, 0.0, edges[0] / 2]
    vals += [e + 1e-9 for e in edges]
    sw = min(22, (width - 120) // len(vals))
    parts = []
    for i, v in enumerate(vals):
        parts.append(
            f'<rect class="legend-class" x="{10 + i * sw}" y="{ly}" width="{sw}" height="10" '
            f'fill="{class_color(v, edges)}" stroke="#999"/>'
        )
    ticks = [f"-{e:g}" for e in reversed(edges)] + [f"+{e:g}" for e in edges]
    pos = list(range(1, k)) + list(range(k + 2, 2 * k + 1))
    for i, t in zip(pos, ticks, strict=True):
        parts.append(
            f'<text x="{10 + i * sw}" y="{ly + 22}" font-size="9" text-anchor="middle">{t}</text>'
        )
    parts.append(
        f'<text x="{10 + (k + 0.5) * sw}" y="{ly + 22}" font-size="9" text-anchor="middle">0</text>'
    )
    right = 10 + len(vals) * sw
    parts.append(
        f'<text x="{right + 4}" y="{ly + 9}" font-size="10">{unit} of the true count</text>'
    )
    parts.append(
        f'<rect x="{right + 4}" y="{ly + 14}" width="10" height="10" fill="#dddddd" stroke="#999"/>'
        f'<text x="{right + 18}" y="{ly + 23}" font-size="10">no data</text>'
    )
    return "".join(parts)


def _path(rings: list[np.ndarray], x0: float, y0: float, k: float) -> str:
    parts = []
    for r in rings:
        pts = " ".join(f"{(x - x0) * k:.1f},{(y - y0) * k:.1f}" for x, y in r)
        parts.append(f"M{pts}Z")
    return "".join(parts)


def county_map_svg(
    values: Mapping[str, float],
    labels: Mapping[str, str],
    *,
    title: str,
    unit: str = "%",
    width: int = 560,
    max_height: int = 480,
    edges: tuple[float, ...] = PERCENT_CLASSES,
) -> str | None:
    """An SVG choropleth of the counties of every state that has a value.

    Args:
        values: value per 5-digit county FIPS (e.g. percent error of the population).
        labels: tooltip text per county FIPS (shown on hover, in a ``<title>``).
        title: the map's accessible title (``<title>`` of the SVG).
        unit: unit of the values, in the legend.
        width, max_height: the largest size in pixels; the shape of the states is kept.
        edges: the fixed class edges of the colours (:func:`class_color`); the legend
            shows them and the ``<svg>`` carries them (``data-classes``) with
            ``data-scale="fixed"``: the colours never depend on the data's range.

    Returns:
        The ``<svg>`` element, or ``None`` when no county of ``values`` is in the
        boundary file (Puerto Rico, or made-up codes).
    """
    mapped = {RENAMED.get(f, f): f for f in values}
    counties = decode_counties({f[:2] for f in mapped})
    if not any(f in counties for f in mapped):
        return None
    allpts = np.concatenate([r for rings in counties.values() for r in rings])
    x0, y0 = allpts.min(axis=0)
    x1, y1 = allpts.max(axis=0)
    k = min((width - 20) / max(x1 - x0, 1e-9), (max_height - 20) / max(y1 - y0, 1e-9))
    height = int((y1 - y0) * k) + 20
    width = max(int((x1 - x0) * k) + 20, 360)
    paths = []
    for fips in sorted(counties):
        orig = mapped.get(fips)
        v = values.get(orig, math.nan) if orig is not None else math.nan
        tip = labels.get(orig, f"county {fips}: not in this release") if orig else ""
        tip = tip or f"county {fips}: not in this release"
        paths.append(
            f'<path class="county" data-fips="{orig or fips}" d="{_path(counties[fips], x0 - 10 / k, y0 - 10 / k, k)}" '
            f'fill="{class_color(v, edges)}"><title>{html.escape(tip)}</title></path>'
        )
    legend = _legend(width, height + 8, edges, unit)
    rule = html.escape(class_rule(edges, unit))
    classes = ",".join(f"{e:g}" for e in edges)
    return (
        f'<svg class="map" role="img" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height + 36}" viewBox="0 0 {width} {height + 36}" data-scale="fixed" '
        f'data-classes="{classes}"><title>{html.escape(title)}</title><desc>{rule}</desc>'
        f'<g stroke="#666" stroke-width="0.5">{"".join(paths)}</g>{legend}</svg>'
    )
