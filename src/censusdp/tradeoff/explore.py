"""``censusdp explore``: one self-contained, interactive page over a ``tradeoff census`` result.

The page embeds the results as JSON and draws every plot with inline JavaScript and
SVG (no network, no external files). Controls: the total epsilon (a slider over the
measured grid), the allocation (all geolevels published, or no block-level release
with the block share moved up), the geolevel whose accuracy is shown, and the two
prices of the social choice (each person's willingness to pay to avoid one unit of
epsilon, and the funds distributed per counted person). Four linked plots share the
selected epsilon and the optimum:

1. accuracy against epsilon (MAE of total population, both allocations);
2. disclosure against epsilon (re-identified and confirmed share, Kazan-Reiter
   probability of a correct decision), with the unprotected tables as reference;
3. accuracy against disclosure (the frontier the choice is made on);
4. social welfare against epsilon, with the optimum where the measured frontier's
   slope (MRT) equals the price ratio (MRS).

The optimum uses :class:`~censusdp.tradeoff.social_choice.MisallocationPreferences` on
the power-law fit of :func:`~censusdp.tradeoff.census_results.frontier_from_results`; for
``I = -k eps^-alpha`` and ``SW = -r sqrt(2 G k / pi) eps^(-alpha/2) - C eps`` it is
``eps* = (r sqrt(2 G k / pi) alpha / (2 C))^(1 / (alpha/2 + 1))``, which the page
computes in the browser; the Python value at the default prices is written into the
page (``data-python-optimum``) so the two can be compared.
"""

from __future__ import annotations

import html
import json
from pathlib import Path, PurePath
from typing import Any

from censusdp.errors import ConfigError
from censusdp.io.output_files import write_output_text
from censusdp.io.output_rules import check_output_file

__all__ = ["DEFAULT_FUNDS_PER_PERSON", "DEFAULT_PRIVACY_PRICE", "render_explorer", "write_explorer"]

DEFAULT_FUNDS_PER_PERSON = 100.0
"""Default ``r``: dollars distributed per counted person."""

DEFAULT_PRIVACY_PRICE = 0.1
"""Default ``c``: dollars each person would pay to avoid one more unit of epsilon (``C = c N``)."""

_PREFERRED_LEVELS = ("County", "Tract", "BlockGroup")


def _default_level(results: dict[str, Any]) -> str | None:
    fits = results.get("frontier_fits", {}).get("standard", {})
    for lv in _PREFERRED_LEVELS:
        if lv in fits:
            return lv
    return next(iter(fits), None)


def _python_optimum(results: dict[str, Any], level: str | None) -> dict[str, Any] | None:
    from censusdp.tradeoff.census_results import frontier_from_results
    from censusdp.tradeoff.social_choice import MisallocationPreferences, optimal_epsilon

    if level is None:
        return None
    try:
        f, g = frontier_from_results(results, scenario="standard", geolevel=level)
    except ConfigError:
        return None
    eps = results["epsilons"]
    prefs = MisallocationPreferences(
        privacy_cost=DEFAULT_PRIVACY_PRICE * results["population"],
        funds_per_person=DEFAULT_FUNDS_PER_PERSON,
        areas=g,
    )
    lo, hi = min(eps) / 4, max(eps) * 4
    opt = optimal_epsilon(f, prefs, search_range=(lo, hi))
    return {"level": level, **opt.as_dict()}


def render_explorer(results: dict[str, Any]) -> str:
    """The explorer page for a ``tradeoff census`` result, as one HTML string.

    Raises:
        ConfigError: if the result has no measured points.
    """
    if not results.get("points"):
        raise ConfigError("the results have no measured points; run 'censusdp tradeoff census'")
    level = _default_level(results)
    py_opt = _python_optimum(results, level)
    payload = {
        "results": {
            k: results.get(k)
            for k in (
                "population",
                "epsilons",
                "seeds",
                "epsilon_meaning",
                "presets",
                "scenarios",
                "points",
                "references",
                "frontier_fits",
                "input",
            )
        },
        "defaults": {
            "level": level,
            "funds_per_person": DEFAULT_FUNDS_PER_PERSON,
            "privacy_price": DEFAULT_PRIVACY_PRICE,
        },
        "python_optimum": py_opt,
    }
    if payload["results"]["input"]:  # the input's name, never where it is on this machine
        payload["results"]["input"] = PurePath(str(payload["results"]["input"])).name
    data = json.dumps(payload, allow_nan=False, separators=(",", ":"))
    data = data.replace("</", "<\\/")  # never close the script element early
    title = "Choosing epsilon: accuracy, re-identification and disclosure risk"
    opt_attr = "" if py_opt is None else f"{py_opt['epsilon']:.10g}"
    return (
        _TEMPLATE.replace("@@TITLE@@", html.escape(title))
        .replace("@@PYOPT@@", html.escape(opt_attr))
        .replace("@@DATA@@", data)
        .replace("@@CSS@@", _CSS)
        .replace("@@JS@@", _JS)
    )


def write_explorer(
    results_dir: str | Path, out: str | Path, *, overwrite: bool = False
) -> dict[str, Any]:
    """Read ``RESULTS/results.json`` and write the explorer page to ``out``.

    Returns:
        ``{"out", "bytes", "points", "python_optimum"}``.

    Raises:
        InputError: if the results are missing or malformed.
        ConfigError: if ``out`` exists and ``overwrite`` is false.
    """
    from censusdp.tradeoff.report import read_results

    path = Path(out)
    check_output_file(path, overwrite, [results_dir], option="--html")
    if path.exists() and path.is_dir():
        raise ConfigError(f"{path} is a directory; --html must be a file path")
    results = read_results(results_dir)
    page = render_explorer(results)
    write_output_text(page, path, overwrite=overwrite, inputs=[results_dir], option="--html")
    opt = _python_optimum(results, _default_level(results))
    return {
        "out": str(path),
        "bytes": len(page.encode("utf-8")),
        "points": len(results["points"]),
        "python_optimum": opt,
    }


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;
 background:#fafafa;color:#222}
header{background:#1f3b57;color:#fff;padding:14px 24px}
header h1{font-size:20px;margin:0 0 4px}
header p{margin:0;font-size:13px;opacity:.9}
main{padding:12px 24px;max-width:1280px}
.controls{display:flex;flex-wrap:wrap;gap:18px;background:#fff;border:1px solid #ddd;
 border-radius:6px;padding:12px 16px;margin-bottom:12px}
.controls label{font-size:13px;display:block;margin-bottom:4px;font-weight:600}
.controls .val{font-weight:400;color:#1f3b57}
.readout{background:#fff;border-left:4px solid #1f3b57;padding:10px 14px;margin-bottom:12px;
 font-size:14px;line-height:1.5}
.grid{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:14px}
figure{background:#fff;border:1px solid #ddd;border-radius:6px;margin:0;padding:8px}
figcaption{font-size:13px;color:#444;padding:4px 6px 2px;line-height:1.4}
figure h2{font-size:14px;margin:2px 6px 4px}
svg{width:100%;height:auto;display:block}
.axis text{font-size:11px;fill:#555}
.axis line,.axis path{stroke:#999}
.axis line.gridline{stroke:#eee}
.legend{font-size:11px}
.note{font-size:12px;color:#555;margin-top:10px}
"""

_TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>@@TITLE@@</title>
<style>@@CSS@@</style></head>
<body data-ready="0" data-python-optimum="@@PYOPT@@">
<header><h1>@@TITLE@@</h1><p id="subtitle"></p></header>
<main>
<section class="controls">
 <div><label for="eps">Total privacy-loss budget &epsilon; <span class="val" id="eps-val"></span></label>
  <input type="range" id="eps" min="0" max="0" step="1" value="0"></div>
 <div><label>Allocation</label>
  <label class="val"><input type="radio" name="scenario" value="standard" checked> all geolevels published</label>
  <label class="val"><input type="radio" name="scenario" value="no_block"> no block-level release (block share moved up)</label></div>
 <div><label for="level">Geography for accuracy and funds</label><select id="level"></select></div>
 <div><label for="measure">Disclosure measure (plot 3)</label><select id="measure">
  <option value="reid.confirmed_share">re-identified and confirmed (everyone)</option>
  <option value="reid.uniques_confirmed_share">re-identified and confirmed (people unique in their area)</option>
  <option value="risk.p0.5.correct_decision">Bayesian: P[correct decision], prior 1/2</option>
 </select></div>
 <div><label for="price">Each person's price to avoid one unit of &epsilon; <span class="val" id="price-val"></span></label>
  <input type="range" id="price" min="-3" max="2" step="0.05" value="-1"></div>
 <div><label for="funds">Funds distributed per counted person <span class="val" id="funds-val"></span></label>
  <input type="range" id="funds" min="0" max="4" step="0.05" value="2"></div>
</section>
<div class="readout" id="readout"></div>
<div class="grid">
 <figure><h2>1. Accuracy gets better as &epsilon; grows</h2><svg id="plot-accuracy" viewBox="0 0 560 330"></svg>
  <figcaption id="cap-accuracy"></figcaption></figure>
 <figure><h2>2. Disclosure risk grows with &epsilon;</h2><svg id="plot-risk" viewBox="0 0 560 330"></svg>
  <figcaption id="cap-risk"></figcaption></figure>
 <figure><h2>3. The trade-off: accuracy against re-identification</h2><svg id="plot-frontier" viewBox="0 0 560 330"></svg>
  <figcaption id="cap-frontier"></figcaption></figure>
 <figure><h2>4. The social choice: where the marginal gain meets the price</h2><svg id="plot-welfare" viewBox="0 0 560 330"></svg>
  <figcaption id="cap-welfare"></figcaption></figure>
</div>
<p class="note" id="note"></p>
</main>
<script type="application/json" id="tradeoff-data">@@DATA@@</script>
<script>@@JS@@</script>
</body></html>
"""

_JS = r"""
(function(){
"use strict";
var D = JSON.parse(document.getElementById("tradeoff-data").textContent);
var R = D.results, EPS = R.epsilons.slice().sort(function(a,b){return a-b;});
var NS = "http://www.w3.org/2000/svg";
var MEASURES = {"reid.confirmed_share": "share re-identified and confirmed",
  "reid.uniques_confirmed_share": "confirmed among people unique in their area",
  "risk.p0.5.correct_decision": "P[correct decision] (Kazan-Reiter, prior 1/2)"};
var state = {i: 0, scenario: "standard", level: D.defaults.level, measure: "reid.confirmed_share",
  price: D.defaults.privacy_price, funds: D.defaults.funds_per_person};
var COLORS = {standard: "#1f77b4", no_block: "#d62728"};
var NAMES = {standard: "all geolevels", no_block: "no block level"};

function fmt(x, d){ if (x === null || x === undefined || !isFinite(x)) return "n/a";
  var a = Math.abs(x); d = d || 3;
  if (a !== 0 && a < 1e-3) return (x < 0 ? "-" : "") + "<0.001";
  if (a >= 1e5) return Math.round(x).toLocaleString("en-US");
  return Number(x.toPrecision(d)).toString(); }
function tick(v){ var a = Math.abs(v), t = function(x){ return Number(x.toPrecision(3)).toString(); };
  if (a >= 1e6) return t(v / 1e6) + "M"; if (a >= 1e4) return t(v / 1e3) + "k"; return fmt(v); }
function pct(x){ return (x === null || x === undefined || !isFinite(x)) ? "n/a" : (100*x).toFixed(1) + "%"; }
function point(s, e){ for (var k = 0; k < R.points.length; k++){ var p = R.points[k];
  if (p.scenario === s && p.epsilon === e) return p; } return null; }
function metric(s, e, key){ var p = point(s, e); if (!p || !p.metrics[key]) return null;
  return p.metrics[key]; }
function mean(s, e, key){ var m = metric(s, e, key); return m ? m.mean : null; }
function scenarios(){ return Object.keys(R.scenarios); }
function levelFor(s){ var lv = state.level; var g = R.scenarios[s].geolevels;
  return g.indexOf(lv) >= 0 ? lv : g[g.length-1]; }

// --- the social choice (same formulas as censusdp.tradeoff.social_choice) ---
function fitFor(s){ var f = (R.frontier_fits[s] || {})[levelFor(s)]; return f || null; }
function units(s){ return R.scenarios[s].units[levelFor(s)]; }
function optimum(s){
  var f = fitFor(s); if (!f) return null;
  var C = state.price * R.population, r = state.funds, G = units(s);
  var kk = r * Math.sqrt(2 * G / Math.PI);
  var a = f.alpha, k = f.k;
  var lo = EPS[0] / 4, hi = EPS[EPS.length-1] * 4;
  var e = Math.pow(kk * Math.sqrt(k) * a / (2 * C), 1 / (a / 2 + 1));
  var interior = e > lo && e < hi;
  e = Math.min(Math.max(e, lo), hi);
  return {eps: e, interior: interior, welfare: welfare(s, e)};
}
function welfare(s, e){ var f = fitFor(s); if (!f) return null;
  var kk = state.funds * Math.sqrt(2 * units(s) / Math.PI);
  return -kk * Math.sqrt(f.k * Math.pow(e, -f.alpha)) - state.price * R.population * e; }

// --- a small SVG plotting kit ---
function el(name, attrs, parent){ var n = document.createElementNS(NS, name);
  for (var a in attrs) n.setAttribute(a, attrs[a]); if (parent) parent.appendChild(n); return n; }
function txt(parent, x, y, s, attrs){ var t = el("text", Object.assign({x: x, y: y}, attrs || {}), parent);
  t.textContent = s; return t; }
function niceTicks(lo, hi, n){ var span = hi - lo; if (!(span > 0)) return [lo];
  var step = Math.pow(10, Math.floor(Math.log10(span / n))); var err = n / span * step;
  if (err <= 0.15) step *= 10; else if (err <= 0.35) step *= 5; else if (err <= 0.75) step *= 2;
  var out = []; for (var v = Math.ceil(lo / step) * step; v <= hi + 1e-12 * span; v += step) out.push(v);
  return out; }
function Plot(id, opts){
  var svg = document.getElementById(id); while (svg.firstChild) svg.removeChild(svg.firstChild);
  var W = 560, H = 330, m = {l: 62, r: 14, t: 12, b: 44};
  var xlog = opts.xlog, x0 = opts.x[0], x1 = opts.x[1], y0 = opts.y[0], y1 = opts.y[1];
  if (!(y1 > y0)) { y1 = y0 + 1; }
  var fx = function(x){ var u = xlog ? (Math.log(x) - Math.log(x0)) / (Math.log(x1) - Math.log(x0))
    : (x - x0) / (x1 - x0); return m.l + u * (W - m.l - m.r); };
  var fy = function(y){ return H - m.b - (y - y0) / (y1 - y0) * (H - m.t - m.b); };
  var ax = el("g", {"class": "axis"}, svg);
  el("line", {x1: m.l, y1: H - m.b, x2: W - m.r, y2: H - m.b}, ax);
  el("line", {x1: m.l, y1: m.t, x2: m.l, y2: H - m.b}, ax);
  var xt = xlog ? opts.xticks : niceTicks(x0, x1, 6), right = -Infinity;
  // a tick label that would touch the previous one is left out (its tick mark stays)
  xt.forEach(function(v){ var X = fx(v), s = opts.xfmt ? opts.xfmt(v) : tick(v), w = 7 * s.length;
    el("line", {x1: X, y1: H - m.b, x2: X, y2: H - m.b + 4}, ax);
    if (X - w / 2 < right + 6) return; right = X + w / 2;
    txt(ax, X, H - m.b + 16, s, {"text-anchor": "middle", "class": "tick-label"}); });
  niceTicks(y0, y1, 5).forEach(function(v){ var Y = fy(v);
    el("line", {x1: m.l - 4, y1: Y, x2: m.l, y2: Y}, ax);
    el("line", {x1: m.l, y1: Y, x2: W - m.r, y2: Y, "class": "gridline"}, ax);
    txt(ax, m.l - 6, Y + 4, opts.yfmt ? opts.yfmt(v) : tick(v), {"text-anchor": "end", "class": "tick-label"}); });
  txt(ax, (m.l + W - m.r) / 2, H - 8, opts.xlabel, {"text-anchor": "middle"});
  txt(ax, 14, (m.t + H - m.b) / 2, opts.ylabel, {"text-anchor": "middle",
    transform: "rotate(-90 14 " + ((m.t + H - m.b) / 2) + ")"});
  var legendY = opts.legendBottom ? H - m.b - 34 : m.t + 6, noted = [];
  // a line's label is left out where it would sit on another line's label
  // (tried at each height of ys in turn; legend entries count as taken places)
  function free(x, y, w){ for (var k = 0; k < noted.length; k++) { var o = noted[k];
      if (Math.abs(o[1] - y) < 12 && x < o[0] + o[2] + 4 && o[0] < x + w + 4) return false; }
    return true; }
  function note(x, ys, s, attrs){ var w = 6 * s.length;
    for (var k = 0; k < ys.length; k++) { if (free(x, ys[k], w)) {
      noted.push([x, ys[k], w]); txt(svg, x, ys[k], s, Object.assign({"class": "line-label"}, attrs)); return; } } }
  return {
    svg: svg, fx: fx, fy: fy,
    line: function(pts, attrs, label){ pts = pts.filter(function(p){ return p[1] !== null && isFinite(p[1]); });
      if (pts.length === 0) return;
      var d = pts.map(function(p, j){ return (j ? "L" : "M") + fx(p[0]).toFixed(1) + "," + fy(p[1]).toFixed(1); }).join("");
      el("path", Object.assign({d: d, fill: "none", "stroke-width": 2, "class": "series"}, attrs), svg);
      if (attrs.markers !== "none") pts.forEach(function(p){ el("circle", {cx: fx(p[0]), cy: fy(p[1]), r: 3,
        fill: attrs.stroke, "class": "marker"}, svg); });
      if (label) this.legend(label, attrs); },
    legend: function(label, attrs){ var g = el("g", {"class": "legend"}, svg);
      el("line", {x1: W - m.r - 190, y1: legendY, x2: W - m.r - 170, y2: legendY, stroke: attrs.stroke,
        "stroke-width": 2, "stroke-dasharray": attrs["stroke-dasharray"] || ""}, g);
      txt(g, W - m.r - 165, legendY + 4, label); noted.push([W - m.r - 192, legendY + 4, 192]);
      legendY += 14; },
    vline: function(x, color, label, cls){ if (!(x >= x0 && x <= x1)) return; var X = fx(x);
      el("line", {x1: X, y1: m.t, x2: X, y2: H - m.b, stroke: color, "stroke-dasharray": "4 3",
        "class": cls || ""}, svg); if (!label) return;
      var left = X > W - m.r - 6.5 * label.length;  // near the right edge: the label goes left
      note(left ? X - 3 - 6 * label.length : X + 3, [m.t + 10, H - m.b - 8, (m.t + H - m.b) / 2], label,
        {fill: color, "font-size": 11}); },
    hline: function(y, color, label){ if (!(y >= y0 && y <= y1)) return; var Y = fy(y);
      el("line", {x1: m.l, y1: Y, x2: W - m.r, y2: Y, stroke: color, "stroke-dasharray": "2 3"}, svg);
      if (label) note(m.l + 4, [Y - 3], label, {fill: color, "font-size": 10}); },
    dot: function(x, y, color, r, cls){ if (y === null || !isFinite(y)) return;
      el("circle", {cx: fx(x), cy: fy(y), r: r || 6, fill: "none", stroke: color, "stroke-width": 2.5,
        "class": cls || "selected"}, svg); }
  };
}
function range(vals, pad0){ var v = vals.filter(function(x){ return x !== null && isFinite(x); });
  if (!v.length) return [0, 1]; var lo = Math.min.apply(null, v), hi = Math.max.apply(null, v);
  if (pad0) lo = Math.min(lo, 0); var p = (hi - lo) * 0.08 || Math.abs(hi) * 0.1 || 1;
  return [pad0 ? lo : lo - p, hi + p]; }
function xdomain(){ return [EPS[0] / 1.5, EPS[EPS.length-1] * 1.5]; }
function xticks(){ return EPS; }

// --- the four plots ---
function drawAccuracy(opt){
  var key = function(s){ return "accuracy.total_population." + levelFor(s) + ".mae"; };
  var vals = []; scenarios().forEach(function(s){ EPS.forEach(function(e){ vals.push(mean(s, e, key(s))); }); });
  var P = Plot("plot-accuracy", {xlog: true, x: xdomain(), xticks: xticks(), y: range(vals, true),
    xlabel: "total epsilon", ylabel: "mean |error| (persons)"});
  scenarios().forEach(function(s){
    P.line(EPS.map(function(e){ return [e, mean(s, e, key(s))]; }),
      {stroke: COLORS[s], "stroke-dasharray": s === "no_block" ? "6 3" : "",
       "stroke-opacity": s === state.scenario ? 1 : 0.45}, NAMES[s] + " (" + levelFor(s) + ")"); });
  var e = EPS[state.i];
  P.dot(e, mean(state.scenario, e, key(state.scenario)), "#000");
  if (opt) P.vline(opt.eps, "#2ca02c", "optimum", "optimum-line");
  return mean(state.scenario, e, key(state.scenario));
}
function drawRisk(opt){
  var series = [["reid.confirmed_share", "re-identified and confirmed", "#9467bd"],
                ["reid.uniques_confirmed_share", "same, among unique people", "#8c564b"],
                ["risk.p0.5.correct_decision", "P[correct decision], prior 1/2", "#ff7f0e"]];
  var vals = [0, 1];
  var P = Plot("plot-risk", {xlog: true, x: xdomain(), xticks: xticks(), y: [0, 1],
    xlabel: "total epsilon", ylabel: "share / probability", yfmt: function(v){ return (100*v).toFixed(0) + "%"; }});
  series.forEach(function(sr){ scenarios().forEach(function(s){
    P.line(EPS.map(function(e){ return [e, mean(s, e, sr[0])]; }),
      {stroke: sr[2], "stroke-dasharray": s === "no_block" ? "6 3" : "",
       "stroke-opacity": s === state.scenario ? 1 : 0.45}, s === "standard" ? sr[1] : null); });
    var ref = (R.references[state.scenario] || {})[sr[0]];
    if (ref !== undefined && ref !== null) P.hline(ref, sr[2], "unprotected tables"); });
  var base = mean(state.scenario, EPS[EPS.length-1], "reid.baseline_confirmed_share");
  if (base !== null) P.hline(base, "#7f7f7f", "modal guess, no release (everyone)");
  var e = EPS[state.i];
  series.forEach(function(sr){ P.dot(e, mean(state.scenario, e, sr[0]), "#000"); });
  if (opt) P.vline(opt.eps, "#2ca02c", "optimum", "optimum-line");
  return vals;
}
function drawFrontier(){
  var s = state.scenario, lv = levelFor(s);
  var xkey = state.measure, ykey = "accuracy.total_population." + lv + ".mae";
  if (EPS.every(function(e){ return mean(s, e, xkey) === null; })) xkey = "risk.p0.5.correct_decision";
  var pts = EPS.map(function(e){ return [mean(s, e, xkey), mean(s, e, ykey), e]; })
    .filter(function(p){ return p[0] !== null && p[1] !== null; });
  var P = Plot("plot-frontier", {xlog: false, x: range(pts.map(function(p){ return p[0]; }), false),
    y: range(pts.map(function(p){ return p[1]; }), true),
    xlabel: MEASURES[xkey],
    ylabel: "MAE of total population (" + lv + ")"});
  P.line(pts.map(function(p){ return [p[0], p[1]]; }), {stroke: COLORS[s]}, NAMES[s]);
  pts.forEach(function(p){ txt(P.svg, P.fx(p[0]) + 5, P.fy(p[1]) - 6, "\u03b5=" + fmt(p[2]), {"font-size": 10, fill: "#555"}); });
  var e = EPS[state.i];
  P.dot(mean(s, e, xkey), mean(s, e, ykey), "#000");
  return pts.length;
}
function drawWelfare(opt){
  var s = state.scenario; var f = fitFor(s);
  var P; if (!f) { P = Plot("plot-welfare", {xlog: true, x: xdomain(), xticks: xticks(), y: [0, 1],
      xlabel: "total epsilon", ylabel: "social welfare"});
    txt(P.svg, 280, 160, "no error at this geography: choose a lower one", {"text-anchor": "middle"}); return; }
  var xs = []; var lo = xdomain()[0], hi = xdomain()[1];
  for (var j = 0; j <= 120; j++) xs.push(lo * Math.pow(hi / lo, j / 120));
  var ws = xs.map(function(x){ return welfare(s, x); });
  P = Plot("plot-welfare", {xlog: true, x: [lo, hi], xticks: xticks(), y: range(ws, false),
    xlabel: "total epsilon", ylabel: "welfare ($): -misallocation - privacy cost", legendBottom: true,
    yfmt: tick});
  P.line(xs.map(function(x, j){ return [x, ws[j]]; }), {stroke: "#2ca02c", markers: "none"}, "social welfare (fitted frontier)");
  if (opt) { P.vline(opt.eps, "#2ca02c", "optimum \u03b5* = " + fmt(opt.eps), "optimum-line");
    P.dot(opt.eps, opt.welfare, "#2ca02c", 6, "optimum-dot"); }
  var e = EPS[state.i]; P.dot(e, welfare(s, e), "#000");
}

function render(){
  var s = state.scenario, e = EPS[state.i], lv = levelFor(s);
  var opt = optimum(s);
  document.getElementById("eps-val").textContent = fmt(e);
  document.getElementById("price-val").textContent = "$" + fmt(state.price) + " (C = $" + fmt(state.price * R.population) + ")";
  document.getElementById("funds-val").textContent = "$" + fmt(state.funds);
  var mae = drawAccuracy(opt); drawRisk(opt); var npts = drawFrontier(); drawWelfare(opt);
  var conf = mean(s, e, "reid.confirmed_share"), kr = mean(s, e, "risk.p0.5.correct_decision");
  var ref = (R.references[s] || {})["reid.confirmed_share"];
  var p = point(s, e), nseed = p ? p.seeds.length : 0;
  var text = "At a total budget of \u03b5 = " + fmt(e) + " with " + NAMES[s] + " published, the population of a " +
    lv + " is off by " + fmt(mae) + " people on average";
  if (conf !== null) text += "; the reconstruction attack re-identifies and confirms " + pct(conf) +
    " of the people" + (ref !== undefined && ref !== null ? " (" + pct(ref) + " from unprotected tables)" : "");
  if (kr !== null) text += "; an intruder who knows everyone else in the " +
    (s === "standard" ? "block" : "block group") + " and starts from a 50/50 guess decides correctly " + pct(kr) + " of the time";
  text += " (" + nseed + " seed" + (nseed === 1 ? "" : "s") + ").";
  if (opt) text += " With these prices the best budget is \u03b5* \u2248 " + fmt(opt.eps) +
    (opt.interior ? "" : " (at the edge of the range: the curves do not cross inside it)") + ".";
  document.getElementById("readout").textContent = text;
  document.getElementById("cap-accuracy").textContent = "Average error of the total population of each " + lv +
    " after the whole disclosure-avoidance process, against the total budget. Dashed: no block-level tables, " +
    "with their budget moved to the higher levels. The black circle is the selected budget; green, the optimum.";
  document.getElementById("cap-risk").textContent = "Purple: share of people a 2010-style reconstruction and " +
    "record-linkage attack re-identifies and confirms (race and ethnicity right); brown: the same among people " +
    "unique in their smallest published area, the ones a release can expose. Grey: what guessing everyone's most " +
    "common race and ethnicity confirms with no release at all. Orange: how often an intruder who already knows " +
    "everyone else in the smallest published area guesses a target's detailed characteristics right (50% is a " +
    "coin flip). Dotted lines: the same attack on unprotected tables.";
  document.getElementById("cap-frontier").textContent = "Each point is one budget (mean over seeds). A larger " +
    "budget moves down (smaller errors) and to the right (more disclosure): accuracy is bought with privacy. " +
    "Choose the measure of disclosure above.";
  document.getElementById("cap-welfare").textContent = "If funds of $" + fmt(state.funds) + " per person go to each " +
    lv + " by its count, errors misallocate money; each unit of \u03b5 costs every person $" + fmt(state.price) +
    " of privacy. Welfare is minus both. It peaks where one more unit of \u03b5 saves exactly as much misallocation " +
    "as it costs in privacy (marginal rate of transformation = marginal rate of substitution; Abowd & Schmutte 2019).";
  document.getElementById("subtitle").textContent = R.population + " persons; budgets " + EPS.map(function(x){ return fmt(x); }).join(", ") +
    "; " + R.epsilon_meaning + "; accuracy and risk: " + R.presets.accuracy_and_risk + ", attack: " + (R.presets.attack || "none");
  document.getElementById("note").textContent = "Accuracy frontier fit for the optimum: I(\u03b5) = -k \u03b5^-\u03b1 " +
    "(minus the summed squared error of " + lv + " populations); " + (fitFor(s) ? "k = " + fmt(fitFor(s).k) + ", \u03b1 = " +
    fmt(fitFor(s).alpha) + ", R\u00b2 = " + fmt(fitFor(s).r_squared) : "no fit") + ". Expected misallocation assumes " +
    "unbiased Gaussian errors of equal variance across areas.";
  var b = document.body;
  b.setAttribute("data-selected-epsilon", String(e));
  b.setAttribute("data-scenario", s);
  b.setAttribute("data-level", lv);
  b.setAttribute("data-optimum", opt ? String(opt.eps) : "");
  b.setAttribute("data-frontier-points", String(npts));
  b.setAttribute("data-readout", text);
  b.setAttribute("data-label-overlaps", String(labelOverlaps()));
  b.setAttribute("data-plots", String(document.querySelectorAll("svg path.series").length > 0 ?
    Array.prototype.filter.call(document.querySelectorAll("svg"), function(sv){ return sv.querySelector("path.series"); }).length : 0));
}

// pairs of tick, axis and line labels of one plot that overlap on screen (0 when readable)
function labelOverlaps(){ var n = 0;
  Array.prototype.forEach.call(document.querySelectorAll("svg"), function(sv){
    var boxes = Array.prototype.map.call(sv.querySelectorAll("g.axis text, text.line-label"),
      function(t){ return t.getBoundingClientRect(); }).filter(function(r){ return r.width > 0; });
    for (var i = 0; i < boxes.length; i++) for (var j = i + 1; j < boxes.length; j++) {
      var a = boxes[i], c = boxes[j];
      if (a.left < c.right - 0.5 && c.left < a.right - 0.5 && a.top < c.bottom - 0.5 && c.top < a.bottom - 0.5) n++; } });
  return n; }

function init(){
  var eps = document.getElementById("eps"); eps.max = String(EPS.length - 1);
  var lvsel = document.getElementById("level");
  var all = []; scenarios().forEach(function(s){ R.scenarios[s].geolevels.forEach(function(l){ if (all.indexOf(l) < 0) all.push(l); }); });
  all.forEach(function(l){ var o = document.createElement("option"); o.value = l; o.textContent = l; lvsel.appendChild(o); });
  if (!state.level) state.level = all[all.length - 1];
  // initial state from the URL hash: #eps=4&scenario=no_block&level=Tract&price=0.1&funds=100
  var h = {}; (location.hash || "").replace(/^#/, "").split("&").forEach(function(kv){ var a = kv.split("=");
    if (a[0]) h[a[0]] = decodeURIComponent(a[1] || ""); });
  if (h.eps) { var t = parseFloat(h.eps), best = 0; EPS.forEach(function(e, j){
    if (Math.abs(Math.log(e / t)) < Math.abs(Math.log(EPS[best] / t))) best = j; }); state.i = best; }
  else state.i = Math.floor((EPS.length - 1) / 2);
  if (h.scenario && R.scenarios[h.scenario]) state.scenario = h.scenario;
  if (h.level && all.indexOf(h.level) >= 0) state.level = h.level;
  if (h.price && parseFloat(h.price) > 0) state.price = parseFloat(h.price);
  if (h.funds && parseFloat(h.funds) > 0) state.funds = parseFloat(h.funds);
  eps.value = String(state.i); lvsel.value = state.level;
  document.getElementById("price").value = String(Math.log10(state.price));
  document.getElementById("funds").value = String(Math.log10(state.funds));
  Array.prototype.forEach.call(document.querySelectorAll("input[name=scenario]"), function(r){
    r.checked = r.value === state.scenario; r.disabled = !R.scenarios[r.value];
    r.addEventListener("change", function(){ state.scenario = r.value; render(); }); });
  eps.addEventListener("input", function(){ state.i = parseInt(eps.value, 10); render(); });
  lvsel.addEventListener("change", function(){ state.level = lvsel.value; render(); });
  var msel = document.getElementById("measure");
  if (h.measure && MEASURES[h.measure]) state.measure = h.measure;
  msel.value = state.measure;
  msel.addEventListener("change", function(){ state.measure = msel.value; render(); });
  document.getElementById("price").addEventListener("input", function(ev){ state.price = Math.pow(10, parseFloat(ev.target.value)); render(); });
  document.getElementById("funds").addEventListener("input", function(ev){ state.funds = Math.pow(10, parseFloat(ev.target.value)); render(); });
  render();
  document.body.setAttribute("data-ready", "1");
}
try { init(); } catch (err) { document.body.setAttribute("data-error", String(err)); throw err; }
})();
"""
