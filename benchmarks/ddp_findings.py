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
* ``age``: per geolevel, the mean TVD of the 5-year age distribution; blocks with
  persons under 18 and no adult (released and true); persons aged 100+ (released, true);
  the share of block groups whose median age is off by 5 years or more.

With ``--figures DIR`` it also draws ``population_bias.png`` (and ``occupancy.png``).
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
            r["occupancy"] = occupancy(truth_units, _units(run_dir / "mdf_units.parquet"), blocks)
        doc["releases"][label] = r
    if args.figures:
        _figures(doc, args.figures)
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
