"""Surface benchmark: reading one geolevel of the NMF, and naming every geounit. Prints JSON.

Sections (each against a baseline in the same run):

* ``nmf``: :func:`censusdp.io.nmf_levels.read_geolevel` (row groups found from the footer
  statistics) against what a pandas user does without it,
  ``pd.read_parquet(path)`` then a filter on ``geolevel``: seconds and Arrow memory
  for each geolevel, and the speed ratio. Decoding the attribute columns
  (:func:`censusdp.io.nmf_levels.decode_cells`) is timed on the same rows.
* ``identifiers``: GEOID, SUMLEV and NAME of every geounit
  (:func:`censusdp.tables.identifier_columns`) against the whole tabulation they are
  part of (:func:`censusdp.tables.tabulate_histograms` of the release's MDF): their
  share of its time.

Run on a release directory: ``.venv/bin/python benchmarks/bench_surface.py RUN``
(for example ``censusdp generate --state VT --scale 0.05 --seed 1 --out X`` and
``censusdp run --input X --out RUN --seed 1``).
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from censusdp.data.geography import Hierarchy
from censusdp.data.histograms import person_histogram, pl94_view, unit_histogram
from censusdp.io.mdf_read import read_mdf_persons, read_mdf_units
from censusdp.io.nmf_levels import decode_cells, nmf_geolevels, read_geolevel
from censusdp.tables import identifier_columns, tabulate_histograms


def _timed(fn):
    gc.collect()
    base = pa.total_allocated_bytes()
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0, pa.total_allocated_bytes() - base


def bench_nmf(path: Path) -> dict:
    rows = {}
    for level in nmf_geolevels(path):
        table, t_new, mem_new = _timed(lambda lv=level: read_geolevel(path, lv))
        n = table.num_rows
        _, t_dec, _ = _timed(lambda t=table: decode_cells(t))
        del table

        def pandas_filter(lv=level):
            df = pd.read_parquet(path)
            return df[df["geolevel"] == lv]

        df, t_pd, _ = _timed(pandas_filter)
        assert len(df) == n, (level, len(df), n)
        del df
        rows[level] = {
            "rows": n,
            "read_geolevel_s": round(t_new, 4),
            "read_geolevel_arrow_mb": round(mem_new / 2**20, 1),
            "decode_cells_s": round(t_dec, 4),
            "pandas_read_all_then_filter_s": round(t_pd, 4),
            "speedup": round(t_pd / max(t_new, 1e-9), 1),
        }
    return rows


def bench_identifiers(run: Path) -> dict:
    persons = read_mdf_persons(run / "mdf_persons.parquet")
    units = read_mdf_units(run / "mdf_units.parquet")
    h = Hierarchy.from_blocks(np.concatenate([persons["geocode"], units["geocode"]]))
    ph, uh = person_histogram(pl94_view(persons), h), unit_histogram(units, h)
    _, t_tab, _ = _timed(lambda: tabulate_histograms(ph, uh, h))
    _, t_ids, _ = _timed(lambda: identifier_columns(h))
    return {
        "blocks": int(h.n_units(len(h.geolevels) - 1)),
        "tabulate_all_tables_s": round(t_tab, 4),
        "identifier_columns_s": round(t_ids, 4),
        "identifier_share_of_tabulation": round(t_ids / max(t_tab, 1e-9), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run", type=Path, help="a release run directory")
    args = ap.parse_args()
    out = {
        "run": str(args.run),
        "nmf": bench_nmf(args.run / "noisy_measurements.parquet"),
        "identifiers": bench_identifiers(args.run),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
