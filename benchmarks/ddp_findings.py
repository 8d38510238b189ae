"""The 2010 Demonstration Data Product's headline findings, measured on a generated state.

Van Riper, Kugler & Ruggles (2020), sec. 3, found in the DDP (i) occupancy rates driven
to 100% (vacant units erased) in small geographies, because non-negativity turns noise
into extra households and the housing-unit invariant caps them; (ii) a size bias: small
geounits and small groups gain persons, large ones lose them; (iii) implausible ages in
small areas. For a truth directory (``censusdp generate``) and one or more releases
(``censusdp run``), this prints one JSON document with, per release:

* ``population_bias``: per geolevel, the mean signed error of the total population
  (released - true) per class of true size (0, 1-9, 10-49, 50-249, ... persons);
* ``occupancy`` (releases with a unit run): per geolevel, the share of geounits with
  housing units whose occupancy rate is 100%, released and true, and the mean signed
  error of occupied units per class of true occupied units;
* ``households`` (releases whose unit run is a household run, ``household2010``; its unit
  MDF's occupied units are its households): the households released and true; the
  household-count bias by county size quintile (the paper's Fig. 2: counties in five
  classes of true population, the mean of ``(released - true) / true`` households per
  class); blocks with housing units and no true household that gained households, and
  small blocks (1-4 true households): how many gained, and the mean gain;
* ``age``: per geolevel, the mean TVD of the 5-year age distribution; blocks with
  persons under 18 and no adult (released and true); persons aged 100+ (released, true);
  the share of block groups whose median age is off by 5 years or more.

With ``--figures DIR`` it also draws ``population_bias.png`` (and ``occupancy.png``; for a
household run ``household_bias.png``: Fig. 2's county quintiles, and the blocks' mean
error in households by class of true households).
Wall times are not measured here (see the run manifests).

    .venv/bin/python benchmarks/ddp_findings.py --truth vt/ --release ddp=vt-ddp/ \\
        --release pl94-e1=vt-e1/ --figures docs/figures/ddp-2010
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from censusdp.io.mdf_read import iter_mdf_persons, read_mdf_units

LEVELS = (("County", 5), ("Tract", 11), ("BlockGroup", 12), ("Block", 16))


def _persons(path: Path) -> dict[str, np.ndarray]:
    """Geocodes and (when the schema has it: not ``pl94``) single-year ages of the
    confidential persons (``censusdp generate``'s ``persons.parquet``)."""
    has_age = "age" in pq.ParquetFile(path).schema_arrow.names
    t = pq.read_table(path, columns=["geocode", "age"] if has_age else ["geocode"])
    geo = np.asarray(t.column("geocode").cast("string").to_numpy(zero_copy_only=False))
    out = {"geocode": geo.astype("U16")}
    if has_age:
        out["age"] = t.column("age").to_numpy().astype(np.int64)
    return out


def _released_persons(path: Path) -> dict[str, np.ndarray]:
    """The same columns of a release's ``mdf_persons.parquet`` (the MDF2020 layout:
    ``TABBLKST``.. ``TABBLK``, ``QAGE``, ...), decoded by ``censusdp.io.mdf_read`` a batch at
    a time."""
    geo, age = [], []
    for batch in iter_mdf_persons(path):
        geo.append(batch["geocode"].astype("U16"))
        if "age" in batch:
            age.append(np.asarray(batch["age"], dtype=np.int64))
    out = {"geocode": np.concatenate(geo) if geo else np.zeros(0, "U16")}
    if age:
        out["age"] = np.concatenate(age)
    return out


def _units(path: Path) -> dict[str, np.ndarray]:
    """Housing units and their occupancy: the truth's ``units.parquet``, or a release's
    ``mdf_units.parquet`` (decoded by ``censusdp.io.mdf_read.read_mdf_units``)."""
    if path.name == "mdf_units.parquet":
        u = read_mdf_units(path)
        return {
            "geocode": np.asarray(u["geocode"]).astype("U16"),
            "hu": np.asarray(u["gqtype"]) == 0,
            "occupied": np.asarray(u["occupied"]).astype(bool),
        }
    t = pq.read_table(path, columns=["geocode", "gqtype", "occupied"])
    geo = np.asarray(t.column("geocode").cast("string").to_numpy(zero_copy_only=False))
    return {
        "geocode": geo.astype("U16"),
        "hu": t.column("gqtype").to_numpy() == 0,
        "occupied": t.column("occupied").to_numpy(zero_copy_only=False).astype(bool),
    }


def _index(units: np.ndarray, codes: np.ndarray, n: int) -> np.ndarray:
    cut = codes.astype(f"U{n}")
    i = np.searchsorted(units, cut)
    i = np.minimum(i, units.size - 1)
    if not (units[i] == cut).all():
        raise SystemExit(f"release geocodes at length {n} are not in the truth")
    return i


SIZE_EDGES = (0, 1, 10, 50, 250, 1000, 5000)


def _by_size(true: np.ndarray, err: np.ndarray) -> list[dict]:
    """Mean signed error per class of true size: 0, 1-9, 10-49, 50-249, ... persons."""
    bins = np.searchsorted(np.asarray(SIZE_EDGES), true, side="right") - 1
    out = []
    for b in range(len(SIZE_EDGES)):
        sel = bins == b
        if sel.any():
            hi = SIZE_EDGES[b + 1] - 1 if b + 1 < len(SIZE_EDGES) else None
            out.append(
                {
                    "class": b,
                    "size": f"{SIZE_EDGES[b]}" + (f"-{hi}" if hi != SIZE_EDGES[b] else "")
                    if hi is not None
                    else f"{SIZE_EDGES[b]}+",
                    "true_mean": round(float(true[sel].mean()), 2),
                    "mean_error": round(float(err[sel].mean()), 3),
                    "units": int(sel.sum()),
                }
            )
    return out


def population_bias(truth: dict, rel: dict, blocks: np.ndarray) -> dict:
    out = {}
    for name, n in LEVELS:
        units = np.unique(blocks.astype(f"U{n}"))
        t = np.bincount(_index(units, truth["geocode"], n), minlength=units.size)
        r = np.bincount(_index(units, rel["geocode"], n), minlength=units.size)
        out[name] = _by_size(t.astype(float), (r - t).astype(float))
    return out


def occupancy(truth_units: dict, rel_units: dict, blocks: np.ndarray) -> dict:
    out = {}
    for name, n in LEVELS:
        units = np.unique(blocks.astype(f"U{n}"))
        res = {}
        for label, u in (("true", truth_units), ("released", rel_units)):
            i = _index(units, u["geocode"][u["hu"]], n)
            hu = np.bincount(i, minlength=units.size)
            occ = np.bincount(i, weights=u["occupied"][u["hu"]], minlength=units.size)
            res[label] = (hu, occ)
        hu, occ_t = res["true"]
        occ_r = res["released"][1]
        has = hu > 0
        out[name] = {
            "geounits_with_housing": int(has.sum()),
            "share_100pct_true": round(float((occ_t[has] == hu[has]).mean()), 4),
            "share_100pct_released": round(float((occ_r[has] == hu[has]).mean()), 4),
            "occupied_bias_by_size": _by_size(occ_t[has], occ_r[has] - occ_t[has]),
        }
    return out


QUINTILES = 5
BLOCK_CLASSES = ((0, 0), (1, 4), (5, 9), (10, 24), (25, None))
"""Classes of true households of a block (inclusive; ``None``: no upper end)."""


def _occupied_by(units: dict, index: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Housing units and occupied ones (households) per geounit of ``index``'s level."""
    hu = np.bincount(index, minlength=n)
    occ = np.bincount(index, weights=units["occupied"][units["hu"]], minlength=n)
    return hu, occ


def household_findings(truth: dict, truth_units: dict, rel_units: dict, blocks: np.ndarray) -> dict:
    """The occupancy findings of a household run (module docstring, ``households``)."""
    out: dict = {}
    counties = np.unique(blocks.astype("U5"))
    pop = np.bincount(_index(counties, truth["geocode"], 5), minlength=counties.size)
    per = {}
    for label, u in (("true", truth_units), ("released", rel_units)):
        per[label] = _occupied_by(u, _index(counties, u["geocode"][u["hu"]], 5), counties.size)
    t, r = per["true"][1], per["released"][1]
    out["households_true"], out["households_released"] = int(t.sum()), int(r.sum())
    out["households_error_pct"] = round(100 * (r.sum() - t.sum()) / max(t.sum(), 1), 2)
    # quintiles of the counties' true population (ranks, so ties split evenly)
    q = (np.argsort(np.argsort(pop, kind="stable")) * QUINTILES) // max(counties.size, 1)
    rows = []
    for k in range(QUINTILES):
        sel = (q == k) & (t > 0)
        if sel.any():
            rel_err = (r[sel] - t[sel]) / t[sel]
            rows.append({"quintile": k + 1, "counties": int(sel.sum()),
                         "true_population_mean": round(float(pop[sel].mean()), 1),
                         "true_households": int(t[sel].sum()),
                         "mean_relative_error_pct": round(100 * float(rel_err.mean()), 2)})  # fmt: skip
    out["county_bias_by_size_quintile"] = rows
    bi = {}
    for label, u in (("true", truth_units), ("released", rel_units)):
        bi[label] = _occupied_by(u, _index(blocks, u["geocode"][u["hu"]], 16), blocks.size)
    hu, bt = bi["true"]
    br = bi["released"][1]
    rows = []
    for lo, hi in BLOCK_CLASSES:
        sel = (hu > 0) & (bt >= lo) & ((bt <= hi) if hi is not None else True)
        if sel.any():
            gain = br[sel] - bt[sel]
            rows.append({"true_households": f"{lo}" if lo == hi else f"{lo}-{hi}" if hi else f"{lo}+",
                         "blocks": int(sel.sum()),
                         "share_gaining": round(float((gain > 0).mean()), 4),
                         "share_losing": round(float((gain < 0).mean()), 4),
                         "mean_error": round(float(gain.mean()), 3),
                         "households_true": int(bt[sel].sum()),
                         "households_released": int(br[sel].sum())})  # fmt: skip
    out["blocks_by_true_households"] = rows
    return out


def age_findings(truth: dict, rel: dict, blocks: np.ndarray) -> dict:
    out = {}
    for name, n in LEVELS:
        units = np.unique(blocks.astype(f"U{n}"))
        ti = _index(units, truth["geocode"], n)
        ri = _index(units, rel["geocode"], n)
        bins_t = np.minimum(truth["age"] // 5, 20)
        bins_r = np.minimum(rel["age"] // 5, 20)
        t = np.zeros((units.size, 21))
        r = np.zeros((units.size, 21))
        np.add.at(t, (ti, bins_t), 1)
        np.add.at(r, (ri, bins_r), 1)
        tp, rp = t.sum(axis=1), r.sum(axis=1)
        tv = 0.5 * np.abs(t / np.maximum(tp, 1)[:, None] - r / np.maximum(rp, 1)[:, None]).sum(
            axis=1
        )
        tv[rp == 0] = 1.0
        row = {"mean_age_tvd": round(float(tv[tp > 0].mean()), 4)}
        kids_t = np.bincount(ti, weights=truth["age"] < 18, minlength=units.size)
        kids_r = np.bincount(ri, weights=rel["age"] < 18, minlength=units.size)
        adults_t, adults_r = tp - kids_t, rp - kids_r
        row["children_without_adults_true"] = int(((kids_t > 0) & (adults_t == 0)).sum())
        row["children_without_adults_released"] = int(((kids_r > 0) & (adults_r == 0)).sum())
        if name == "BlockGroup":
            med_t = np.array([np.median(truth["age"][ti == u]) for u in range(units.size)])
            med_r = np.array(
                [
                    np.median(rel["age"][ri == u]) if (ri == u).any() else -99
                    for u in range(units.size)
                ]
            )
            row["median_age_off_5y_share"] = round(float((np.abs(med_r - med_t) >= 5).mean()), 4)
        out[name] = row
    out["persons_100_plus"] = {
        "true": int((truth["age"] >= 100).sum()),
        "released": int((rel["age"] >= 100).sum()),
    }
    return out


def _figures(doc: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    rels = doc["releases"]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for ax, level in zip(axes, ("Tract", "BlockGroup", "Block"), strict=True):
        for label, r in rels.items():
            rows = r["population_bias"][level]
            ax.plot([q["class"] for q in rows], [q["mean_error"] for q in rows], "o-", label=label)
            ax.set_xticks([q["class"] for q in rows], [q["size"] for q in rows], fontsize=7)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_title(f"{level}: released - true persons")
        ax.set_xlabel("true population of the geounit")
    axes[0].set_ylabel("mean signed error (persons)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "population_bias.png", dpi=110)
    plt.close(fig)
    occ = {k: r["occupancy"] for k, r in rels.items() if "occupancy" in r}
    if occ:
        fig, ax = plt.subplots(figsize=(6.5, 3.6))
        levels = [name for name, _ in LEVELS]
        width = 0.8 / (len(occ) + 1)
        x = np.arange(len(levels))
        first = next(iter(occ.values()))
        ax.bar(x, [first[lv]["share_100pct_true"] for lv in levels], width, label="truth")
        for j, (label, o) in enumerate(occ.items(), start=1):
            ax.bar(
                x + j * width, [o[lv]["share_100pct_released"] for lv in levels], width, label=label
            )
        ax.set_xticks(x + width * len(occ) / 2, levels)
        ax.set_ylabel("share of geounits at 100% occupancy")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "occupancy.png", dpi=110)
        plt.close(fig)
    hh = {k: r["households"] for k, r in rels.items() if "households" in r}
    if hh:
        _household_figure(hh, out)


def _household_figure(hh: dict, out: Path) -> None:
    """Fig. 2 (county quintiles) and the blocks by class of true households."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    width = 0.8 / len(hh)
    for j, (label, h) in enumerate(hh.items()):
        rows = h["county_bias_by_size_quintile"]
        axes[0].bar([q["quintile"] + j * width for q in rows],
                    [q["mean_relative_error_pct"] for q in rows], width, label=label)  # fmt: skip
        rows = h["blocks_by_true_households"]
        axes[1].bar([i + j * width for i in range(len(rows))], [q["mean_error"] for q in rows],
                    width, label=label)  # fmt: skip
        axes[1].set_xticks(range(len(rows)), [q["true_households"] for q in rows])
    axes[0].set_xticks(range(1, QUINTILES + 1))
    axes[0].axhline(0, color="grey", lw=0.8)
    axes[0].set_xlabel("county quintile of true population (1: smallest)")
    axes[0].set_ylabel("mean (released - true) / true households, %")
    axes[0].set_title("households by county size (the DDP paper's Fig. 2)")
    axes[1].axhline(0, color="grey", lw=0.8)
    axes[1].set_xlabel("true households of the block (blocks with housing units)")
    axes[1].set_ylabel("mean released - true households")
    axes[1].set_title("blocks: households gained or lost")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "household_bias.png", dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--truth", required=True, type=Path)
    ap.add_argument("--release", action="append", required=True, metavar="LABEL=RUN")
    ap.add_argument("--figures", type=Path, default=None)
    args = ap.parse_args()
    truth = _persons(args.truth / "persons.parquet")
    truth_units = _units(args.truth / "units.parquet")
    blocks = np.unique(np.concatenate([truth["geocode"], truth_units["geocode"]]))
    doc = {"truth": str(args.truth), "persons": int(truth["geocode"].size), "releases": {}}
    for spec in args.release:
        label, _, run = spec.partition("=")
        run_dir = Path(run)
        manifest = json.loads((run_dir / "manifest.json").read_text())
        rel = _released_persons(run_dir / "mdf_persons.parquet")
        r = {
            "preset": manifest["persons"].get("name")
            if isinstance(manifest.get("persons"), dict)
            else None,
            "persons_released": manifest.get("persons_released"),
            "epsilon": manifest.get("epsilon"),
            "population_bias": population_bias(truth, rel, blocks),
        }
        if "age" in rel:
            r["age"] = age_findings(truth, rel, blocks)
        if "occupancy" not in manifest:  # the unit run released occupancy
            rel_units = _units(run_dir / "mdf_units.parquet")
            r["occupancy"] = occupancy(truth_units, rel_units, blocks)
            if (manifest.get("units") or {}).get("schema") == "household2010":
                r["households"] = household_findings(truth, truth_units, rel_units, blocks)
        doc["releases"][label] = r
    if args.figures:
        _figures(doc, args.figures)
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
