"""The production spine against the geocode hierarchy, on generated states. Prints JSON.

For each state (generated with its synthetic AIAN areas and places / MCDs):

* geounits per level and fan-out (median, max children) of the geocode hierarchy and of
  the spine (``censusdp.data.spine``, production rules; and with tract groups);
* how far places / MCDs are from each spine: the off-spine entity distance (OSED;
  Abowd et al. 2021, "Geographic spines in the 2020 Census Disclosure Avoidance System
  TopDown algorithm", Algorithm 1) of every place within its county, i.e. the fewest
  geounits added or subtracted to compose it; reported as mean, median, 90th
  percentile and share on the spine (OSED 1);
* units left unmeasured under the ``pl94-2020`` geolevel shares: single children
  bypassed (and, with tract groups, the whole TractGroup level, which ``pl94-2020``
  gives no share);
* seconds to build the spine, and its ratio to building the geocode hierarchy.

Run: ``python benchmarks/bench_spine.py [--states VT,SD,NM] [--seed 1]
[--figure docs/figures/spine_osed.png] [--json OUT.json]``
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from fractions import Fraction  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from censusdp.data.geography import Hierarchy  # noqa: E402
from censusdp.data.invariants import compute_invariants  # noqa: E402
from censusdp.data.spine import BlockAttributes, SpineRules, build_spine, bypass_shares  # noqa: E402
from censusdp.generate import generate_state  # noqa: E402
from censusdp.io.atomic import write_json  # noqa: E402
from censusdp.io.budget_files import load_preset  # noqa: E402
from censusdp.io.cef import read_cef  # noqa: E402


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def place_oseds(h: Hierarchy, place_of_block: np.ndarray) -> np.ndarray:
    """OSED of every (county unit, place) at the county level (Algorithm 1).

    ``place_of_block`` is aligned with ``h.blocks``. Per county, blocks carry
    ``(c_k, c_not_k) = (1, 0)`` inside the place and ``(0, 1)`` outside; each level up,
    ``c_k = min(sum c_k, sum c_not_k + 1)`` and symmetrically.
    """
    county = h.geolevels.index("County")
    chain = [h.ancestor_index(li) for li in range(county, h.n_levels)]
    out = []
    for c in range(h.n_units(county)):
        sel = np.flatnonzero(chain[0] == c)
        local = [np.unique(a[sel], return_inverse=True)[1].ravel() for a in chain]
        for code in np.unique(place_of_block[sel]):
            if code == "":
                continue
            ck = (place_of_block[sel] == code).astype(np.int64)
            cn = 1 - ck
            for lvl in range(len(chain) - 2, -1, -1):
                n = int(local[lvl].max()) + 1
                # unit of level lvl of each unit of level lvl + 1
                up = np.zeros(int(local[lvl + 1].max()) + 1, dtype=np.int64)
                up[local[lvl + 1]] = local[lvl]
                sk = np.bincount(up, weights=ck, minlength=n).astype(np.int64)
                sn = np.bincount(up, weights=cn, minlength=n).astype(np.int64)
                ck, cn = np.minimum(sk, sn + 1), np.minimum(sk + 1, sn)
            out.append(int(ck[0]))
    return np.asarray(out, dtype=np.int64)


def _summary(osed: np.ndarray) -> dict:
    return {
        "places": int(osed.size),
        "mean": round(float(osed.mean()), 3),
        "median": float(np.median(osed)),
        "p90": float(np.percentile(osed, 90)),
        "max": int(osed.max()),
        "share_on_spine": round(float((osed <= 1).mean()), 4),
    }


def _shape(h: Hierarchy) -> dict:
    fan = [np.diff(h.child_ptr[li]) for li in range(h.n_levels - 1)]
    return {
        "levels": list(h.geolevels.names),
        "units": [h.n_units(li) for li in range(h.n_levels)],
        "median_children": [float(np.median(f)) for f in fan],
        "max_children": [int(f.max()) for f in fan],
    }


def bench_state(state: str, seed: int, tmp: Path) -> tuple[dict, dict]:
    _say(f"{state}: generating")
    generate_state(state, seed, tmp / state)
    cef = read_cef(tmp / state)
    t = time.perf_counter()
    std = Hierarchy.from_blocks(cef.units["geocode"])
    t_std = time.perf_counter() - t
    inv = compute_invariants(cef.persons, cef.units, std)
    _, first = np.unique(cef.units["geocode"], return_index=True)
    attrs = BlockAttributes(
        cef.units["aian_area"][first], cef.units["place"][first], inv.gq_facilities
    )
    shares = list(load_preset("pl94-2020").geolevel_shares.values())
    row = {"state": state, "blocks": int(std.blocks.size), "geocode": _shape(std)}
    row["geocode"]["seconds"] = round(t_std, 3)
    osed = {"geocode": place_oseds(std, attrs.place)}
    row["geocode"]["place_osed"] = _summary(osed["geocode"])
    for name, rules in (
        ("spine", SpineRules()),
        ("spine_tract_groups", SpineRules(tract_groups=True)),
    ):
        t = time.perf_counter()
        spine = build_spine(std.blocks, attrs, rules)
        h = spine.hierarchy
        secs = time.perf_counter() - t
        lv = list(shares)
        if rules.tract_groups:
            lv = lv[:3] + [Fraction(0)] + lv[3:]
        bypass = bypass_shares(h, lv)
        osed[name] = place_oseds(h, attrs.place[spine.order])
        row[name] = {
            **_shape(h),
            "seconds": round(secs, 3),
            "seconds_ratio_to_geocode_hierarchy": round(secs / max(t_std, 1e-9), 1),
            "unmeasured_units": [int((~bypass.measured(li)).sum()) for li in range(h.n_levels)],
            "place_osed": _summary(osed[name]),
        }
        _say(f"{state}: {name} built in {secs:.2f}s, place OSED mean {osed[name].mean():.2f}")
    return row, osed


def _figure(path: Path, osed: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    states = list(osed)
    fig, axes = plt.subplots(1, len(states), figsize=(4.2 * len(states), 3.4), squeeze=False)
    for ax, state in zip(axes[0], states, strict=True):
        top = 12
        bins = np.arange(1, top + 2) - 0.5
        for name, color in (("geocode", "#888888"), ("spine", "#1f77b4")):
            v = np.minimum(osed[state][name], top)
            ax.hist(v, bins=bins, histtype="step", linewidth=2, color=color,
                    label=f"{name} (mean {osed[state][name].mean():.1f})")  # fmt: skip
        ax.set_title(f"{state}: places / MCDs")
        ax.set_xlabel(f"off-spine entity distance (>= {top} pooled)")
        ax.set_ylabel("places")
        ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--states", default="VT,SD,NM")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--figure", default=None, help="write the OSED histogram PNG here")
    ap.add_argument("--json", default=None, help="also write the JSON here")
    args = ap.parse_args(argv)
    rows, oseds = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for state in [s for s in args.states.split(",") if s]:
            row, osed = bench_state(state, args.seed, Path(tmp))
            rows.append(row)
            oseds[state] = osed
    out = {"benchmark": "production spine vs geocode hierarchy", "seed": args.seed, "states": rows}
    print(json.dumps(out, indent=2, allow_nan=False))
    if args.json:
        write_json(out, Path(args.json))
    if args.figure:
        _figure(Path(args.figure), oseds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
