"""HTML building blocks shared by the evaluation report and the comparison page.

Every page is one self-contained file: inline CSS, inline JavaScript, PNG plots as
``data:`` URLs, maps as inline SVG, data for the drill-down as inline JSON. The script
adds a "Download CSV" button before every ``<table class="csv">``, runs the place
drill-down, and records its state on ``<body>`` (``data-ready``, ``data-csv-buttons``,
``data-drill-*``, ``data-error``; with ``#csv=1`` in the URL, ``data-csv`` holds the CSV
of the drill-down table) so a headless browser can check the page.

A table's CSV download holds numbers, not what the page shows: a number cell downloads
its value (``data-v``: ``2123``, not ``2,123``), and a cell that shows several numbers
(a :class:`Split`: ``12 (9 in 10 within 40; n = 2,123)``) downloads one column each,
named by its header's :class:`Split`.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.7em;margin-bottom:.2em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
.sub{color:#555;margin-top:0}
table{border-collapse:collapse;margin:.4em 0 1.2em;font-size:.85em}caption{text-align:left;font-weight:600;margin-bottom:.3em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:right;vertical-align:top}th{background:#f3f3f3}
td:first-child,th:first-child{text-align:left}td.name{text-align:left}
figure{display:inline-block;margin:.5em;vertical-align:top}img.plot{max-width:100%;border:1px solid #eee}
figcaption{font-size:.85em;color:#444;max-width:560px}
.note{background:#f7f7f0;border-left:4px solid #cc9;padding:.5em 1em;font-size:.9em}
.summary{background:#f4f8fb;border:1px solid #c9d9e6;border-radius:6px;padding:.3em 1.2em 1em;margin:1em 0}
.summary h2{border:none;margin-top:.8em;font-size:1.2em}.summary p{margin:.4em 0}
.big{font-size:1.15em}.ok{color:#176b2c;font-weight:600}.bad{color:#a11;font-weight:600}
.kind{display:inline-block;font-size:.75em;padding:.05em .5em;border-radius:.8em;color:#fff;margin-left:.4em;vertical-align:middle}
.realised{background:#3a7}.closed{background:#37a}.empirical{background:#a53}
button.dl{font-size:.75em;margin:.2em 0;padding:.15em .6em;cursor:pointer}
.crumbs a,.drill a{color:#14559a;text-decoration:none}.crumbs a:hover,.drill a:hover{text-decoration:underline}
.crumbs{margin:.3em 0}svg.map path.county{cursor:pointer}svg.map path.county:hover{stroke:#000;stroke-width:1.5}
.cols{display:flex;flex-wrap:wrap;gap:1.5em}.cols>div{flex:1 1 420px;min-width:0}
details{margin:.5em 0}summary{cursor:pointer;font-weight:600}
"""

SCRIPT = r"""
(function(){
var B=document.body;
window.addEventListener('error',function(e){B.setAttribute('data-error',String(e.message||e));});
function cell(s){s=String(s);return /[",\n]/.test(s)?'"'+s.replace(/"/g,'""')+'"':s;}
function tableCsv(t){var out=[];for(var i=0;i<t.rows.length;i++){var r=t.rows[i],c=[];
 for(var j=0;j<r.cells.length;j++){var x=r.cells[j];
  if(x.hasAttribute('data-csv')){var vs=JSON.parse(x.getAttribute('data-csv'));for(var k=0;k<vs.length;k++){c.push(cell(vs[k]===null?'':vs[k]));}}
  else{c.push(cell(x.hasAttribute('data-v')?x.getAttribute('data-v'):x.textContent.trim()));}}
 out.push(c.join(','));}return out.join('\n')+'\n';}
function download(name,text){var a=document.createElement('a');
 a.href=URL.createObjectURL(new Blob([text],{type:'text/csv'}));a.download=name;document.body.appendChild(a);a.click();
 setTimeout(function(){URL.revokeObjectURL(a.href);a.remove();},0);}
function buttons(){var ts=document.querySelectorAll('table.csv'),n=0;
 for(var i=0;i<ts.length;i++){var t=ts[i],p=t.previousElementSibling;
  if(!(p&&p.classList.contains('dl'))){var b=document.createElement('button');b.className='dl';b.type='button';
   b.textContent='Download CSV';b.onclick=(function(t){return function(){download((t.getAttribute('data-name')||'table')+'.csv',tableCsv(t));};})(t);
   t.parentNode.insertBefore(b,t);}n++;}
 B.setAttribute('data-csv-buttons',String(n));}
window.censusdpCsv=tableCsv;
function fmt(x){return x===null||x===undefined?'':Number(x).toLocaleString('en-US');}
function pcText(d,pc){if(pc===''){return '';}if(d===0){return '0%';}
 if(Math.abs(Number(pc))<0.1){return (d>0?'+':'-')+'&lt;0.1%';}return (d>0?'+':'')+pc+'%';}
function esc(s){return String(s).replace(/[&<>"]/g,function(c){return {'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c];});}
function drill(){var el=document.getElementById('places-data');if(!el){return;}
 var D=JSON.parse(el.textContent),P=D.places,by={},kids={},runs=D.runs;
 for(var i=0;i<P.length;i++){by[P[i].c]=P[i];var k=P[i].p===null?'':P[i].p;(kids[k]=kids[k]||[]).push(P[i]);}
 var sel=document.getElementById('drill-count'),host=document.getElementById('drill');
 function render(){var m=/place=([0-9]*)/.exec(location.hash),cur=m&&by[m[1]]?m[1]:'';
  if(!cur&&(kids['']||[]).length===1){cur=kids[''][0].c;}
  var key=sel.value,ki=D.keys.indexOf(key),rows=kids[cur]||[],crumbs=[],x=by[cur];
  while(x){crumbs.unshift('<a href="#place='+x.c+'">'+esc(x.n.split(', ')[0])+'</a>');x=x.p===null?null:by[x.p];}
  crumbs.unshift('<a href="#place=">All</a>');
  var h='<div class="crumbs">'+crumbs.join(' &rsaquo; ')+'</div>';
  var lvl=rows.length?rows[0].l:'';
  h+='<table class="csv drill" data-name="'+esc((cur||'all')+'_'+key)+'"><caption>'+esc(D.labels[ki])+': '+rows.length+' '+esc(D.plural[lvl]||'places')+(cur?' in '+esc(by[cur].n):'')+'</caption><thead><tr><th>Name</th><th>GEOID</th><th>true</th>';
  for(var r=0;r<runs.length;r++){h+='<th>published'+(runs.length>1?' ('+esc(runs[r])+')':'')+'</th><th>difference</th><th>% difference</th>';}
  h+='</tr></thead><tbody>';
  for(var i=0;i<rows.length;i++){var q=rows[i],t=q.t[ki],name=kids[q.c]?'<a href="#place='+q.c+'">'+esc(q.n.split(', ')[0])+'</a>':esc(q.n.split(', ')[0]);
   h+='<tr><td class="name" data-v="'+esc(q.n)+'">'+name+'</td><td data-v="'+esc(q.g||'')+'">'+esc(q.g||'')+'</td><td data-v="'+t+'">'+fmt(t)+'</td>';
   for(var r=0;r<runs.length;r++){var v=q.r[r][ki],d=v-t,pc=t>0?(100*d/t).toFixed(1):'';
    h+='<td data-v="'+v+'">'+fmt(v)+'</td><td data-v="'+d+'">'+(d>0?'+':'')+fmt(d)+'</td><td data-v="'+pc+'">'+pcText(d,pc)+'</td>';}
   h+='</tr>';}
  h+='</tbody></table>';host.innerHTML=h;buttons();
  if(/csv=1/.test(location.hash)){B.setAttribute('data-csv',tableCsv(host.querySelector('table')));}
  B.setAttribute('data-drill-place',cur);B.setAttribute('data-drill-level',lvl);B.setAttribute('data-drill-rows',String(rows.length));}
 sel.onchange=render;window.addEventListener('hashchange',render);
 var ps=document.querySelectorAll('svg.map path.county');
 for(var i=0;i<ps.length;i++){ps[i].addEventListener('click',function(){var f=this.getAttribute('data-fips');if(by[f]){location.hash='place='+f;document.getElementById('places').scrollIntoView();}});}
 render();}
function images(){var im=document.images,ok=0;for(var i=0;i<im.length;i++){if(im[i].complete&&im[i].naturalWidth>0){ok++;}}
 B.setAttribute('data-images-total',String(im.length));B.setAttribute('data-images-loaded',String(ok));}
buttons();drill();B.setAttribute('data-ready','1');
window.addEventListener('load',images);
})();
"""


def dir_name(path: Any) -> str:
    """The last part of a path: a page names a directory, never where it is on this machine."""
    if path is None or str(path) == "":
        return ""
    return PurePath(str(path)).name or str(path)


def esc(x: Any) -> str:
    """HTML-escaped ``str(x)``."""
    return html.escape(str(x))


def fmt(x: Any, digits: int = 4) -> str:
    """A number for a reader: thousands separators, a few significant digits, ``-`` for none."""
    if x is None:
        return "&ndash;"
    if isinstance(x, bool):
        return "yes" if x else "<b>NO</b>"
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        return plain_number(x, digits)
    return esc(x)


@dataclass(frozen=True)
class Split:
    """A cell shown as one thing and downloaded as several CSV columns.

    In a header, ``html`` is the column's title (text) and ``values`` the CSV columns'
    names; in a row, ``html`` is what the page shows and ``values`` the numbers
    downloaded (``None`` for none), as many as its header names.
    """

    html: str
    values: tuple[Any, ...]

    def attribute(self) -> str:
        """The ``data-csv`` attribute the page script downloads."""
        data = [_plain(v) for v in self.values]
        return f' data-csv="{esc(json.dumps(data, allow_nan=False))}"'


def _plain(v: Any) -> Any:
    """A value as JSON for the CSV: finite numbers as numbers (floats to 10 significant
    digits), nothing as ``None``."""
    if isinstance(v, float):
        return float(f"{v:.10g}") if math.isfinite(v) else None
    if v is None or isinstance(v, bool | int | float | str):
        return v
    return str(v)


def num(x: Any, digits: int = 4) -> Split:
    """A number shown as :func:`fmt` shows it, downloaded whole (for ``raw`` tables)."""
    return Split(fmt(x, digits), (x,))


def _data_v(c: Any) -> str:
    """The ``data-v`` attribute of a number cell: its value, without separators (a float
    to 10 significant digits)."""
    if c is None or (isinstance(c, float) and not math.isfinite(c)):
        return ' data-v=""'
    if isinstance(c, float):
        return f' data-v="{c:.10g}"'
    if isinstance(c, int) and not isinstance(c, bool):
        return f' data-v="{c}"'
    return ""


def _td(c: Any, raw: bool) -> str:
    if isinstance(c, Split):
        return f"<td{c.attribute()}>{c.html}</td>"
    if raw:
        return f"<td>{c}</td>"
    return f"<td{_data_v(c)}>{fmt(c)}</td>"


def _th(h: Any) -> str:
    if isinstance(h, Split):
        return f"<th{h.attribute()}>{esc(h.html)}</th>"
    return f"<th>{esc(h)}</th>"


def plain_number(x: float, digits: int = 4) -> str:
    """A float in positional notation, never in exponent form (``5.19e-05``).

    At least 1 the number has ``digits - 2`` decimals (at least one) and thousands
    separators (``1,234.57``); below 1 it has ``digits - 1`` decimals (``0.800``,
    ``0.052``); a nonzero number that rounds to zero there is written ``<0.001`` or
    ``-<0.001`` (so a table never shows ``5.19e-05`` beside ``0.8``). Not finite: a dash.
    """
    if not math.isfinite(x):
        return "&ndash;"
    if abs(x) >= 1:
        return f"{x:,.{max(digits - 2, 1)}f}"
    places = max(digits - 1, 1)
    text = f"{abs(x):.{places}f}"
    if float(text) == 0:
        if x == 0:
            return "0"
        return ("-" if x < 0 else "") + "&lt;" + "0." + "0" * (places - 1) + "1"
    return ("-" if x < 0 else "") + text


def table(
    header: Sequence[str | Split],
    rows: Sequence[Sequence[Any]],
    caption: str = "",
    *,
    name: str = "",
    raw: bool = False,
) -> str:
    """An HTML table with a CSV download button (added by the page script).

    Args:
        header: column titles (a :class:`Split` for a column downloaded as several).
        rows: cell values (formatted with :func:`fmt`, or inserted as is with ``raw``;
            a :class:`Split` shows its HTML and downloads its values).
        caption: the table caption.
        name: file name of the CSV download (without ``.csv``).
        raw: cells are already HTML.
    """
    head = "".join(_th(h) for h in header)
    body = "".join("<tr>" + "".join(_td(c, raw) for c in r) + "</tr>" for r in rows)
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    slug = "".join(ch if ch.isalnum() else "_" for ch in (name or caption or "table").lower())
    return (
        f'<table class="csv" data-name="{esc(slug.strip("_")[:60])}">{cap}'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def img(png: bytes, alt: str, caption: str = "") -> str:
    """A PNG as an inline ``<figure>``."""
    data = base64.b64encode(png).decode("ascii")
    cap = esc(caption or alt)
    return (
        f'<figure><img class="plot" alt="{esc(alt)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{cap}</figcaption></figure>"
    )


def json_script(element_id: str, data: Any) -> str:
    """Inline JSON in a ``<script type="application/json">`` (``</`` escaped)."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return f'<script type="application/json" id="{esc(element_id)}">{text}</script>'


def page(title: str, body: str) -> str:
    """The whole self-contained HTML document."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}</style></head>"
        f"<body>\n{body}\n<script>{SCRIPT}</script></body></html>\n"
    )
