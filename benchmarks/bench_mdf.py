"""Writing and reading the MDF in production's layout vs censusdp's former integer layout.

On a generated state's persons (their ``pl94`` block histogram, as a release writes it):

* ``write_production``: :class:`censusdp.io.mdf_write.MDFPersonWriter` (Parquet + text, string
  codes, ``EPNUM``), and ``read_production``: :func:`censusdp.io.mdf_read.iter_mdf_persons`
  decoded back to a block histogram;
* ``write_integer`` / ``read_integer``: what censusdp wrote before (Parquet with ``geocode``
  and one int64 column per attribute, plus the former 11-column text file), done here
  inline as the baseline.

It prints one JSON document with the seconds of each, their ratios and the file sizes,
and checks that both read back to the same histogram.

    .venv/bin/python benchmarks/bench_mdf.py --state VT --seed 1
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import scipy.sparse as sp


def _best(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--state", default="VT")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()

    from censusdp.data.geography import Hierarchy
    from censusdp.data.histograms import person_histogram
    from censusdp.data.schema import get_schema
    from censusdp.generate import generate_state
    from censusdp.io.cef import read_cef
    from censusdp.io.columns import dictionary_strings
    from censusdp.io.mdf_read import iter_mdf_persons
    from censusdp.io.mdf_records import iter_mdf_blocks
    from censusdp.io.mdf_write import MDFPersonWriter

    schema = get_schema("pl94")
    with tempfile.TemporaryDirectory(prefix="censusdp-bench-mdf-") as tmp:
        d = Path(tmp)
        generate_state(args.state, args.seed, d / "cef", scale=args.scale)
        cef = read_cef(d / "cef")
        h = Hierarchy.from_blocks(cef.units["geocode"])
        hist = person_histogram(cef.persons, h, schema)

        def write_production():
            with MDFPersonWriter(h, d / "p.parquet", d / "p.txt", schema) as w:
                for cols in iter_mdf_blocks(hist, schema):
                    w.write(cols)
            return w.persons

        geo_parts = {"st": (0, 2), "cou": (2, 5), "tract": (5, 11), "bg": (11, 12), "blk": (12, 16)}
        geo_dict = {
            k: pa.array(np.array([b[a:z] for b in h.blocks], dtype=object), pa.string())
            for k, (a, z) in geo_parts.items()
        }

        def write_integer():
            """The former writer: integer Parquet plus the former 11-column text file."""
            writer = None
            first = 0
            with open(d / "i.txt", "wb") as txt:
                for k, cols in enumerate(iter_mdf_blocks(hist, schema)):
                    idx = cols["block"].astype(np.int32)
                    geo = dictionary_strings(idx, h.blocks).cast(pa.string())
                    names = schema.mdf_columns(np.zeros(0))
                    table = pa.table(
                        {"geocode": geo} | {c: pa.array(cols[c], pa.int64()) for c in names}
                    )
                    if writer is None:
                        writer = pq.ParquetWriter(d / "i.parquet", table.schema, compression="zstd")
                    writer.write_table(table, row_group_size=1 << 20)
                    n = idx.size
                    text = {
                        g: pa.DictionaryArray.from_arrays(pa.array(idx), v).cast(pa.string())
                        for g, v in geo_dict.items()
                    }
                    text["EPNUM"] = pa.array(np.arange(first + 1, first + n + 1))
                    text["RTYPE"] = pa.array(np.where(cols["hhgq"] == 0, 3, 5))
                    text["GQTYPE_PL"] = pa.array(cols["hhgq"])
                    text["VOTING_AGE"] = pa.array(cols["votingage"] + 1)
                    text["CENHISP"] = pa.array(cols["hispanic"] + 1)
                    cenrace = pa.array(cols["cenrace"]).cast(pa.string())
                    text["CENRACE"] = pc.utf8_lpad(cenrace, width=2, padding="0")
                    pacsv.write_csv(
                        pa.table(text),
                        txt,
                        write_options=pacsv.WriteOptions(
                            delimiter="|", quoting_style="none", include_header=k == 0
                        ),
                    )
                    first += n
            writer.close()

        def read_production():
            out = sp.csr_matrix(hist.shape, dtype=np.int64)
            for cols in iter_mdf_persons(d / "p.parquet"):
                out = out + person_histogram(cols, h, schema)
            return out

        def read_integer():
            out = sp.csr_matrix(hist.shape, dtype=np.int64)
            for batch in pq.ParquetFile(d / "i.parquet").iter_batches(batch_size=1 << 22):
                cols = {
                    c: batch.column(c).to_numpy(zero_copy_only=False) for c in batch.schema.names
                }
                out = out + person_histogram(cols, h, schema)
            return out

        t_wp, persons = _best(write_production, args.repeat)
        t_wi, _ = _best(write_integer, args.repeat)
        t_rp, back_p = _best(read_production, args.repeat)
        t_ri, back_i = _best(read_integer, args.repeat)
        same = (back_p != hist).nnz == 0 and (back_i != hist).nnz == 0
        result = {
            "state": args.state,
            "seed": args.seed,
            "scale": args.scale,
            "persons": int(persons),
            "seconds": {
                "write_production_parquet_and_text": round(t_wp, 3),
                "write_integer_parquet_and_former_text": round(t_wi, 3),
                "read_production": round(t_rp, 3),
                "read_integer": round(t_ri, 3),
            },
            "ratio_write_production_over_integer": round(t_wp / t_wi, 2),
            "ratio_read_production_over_integer": round(t_rp / t_ri, 2),
            "mb": {
                "production_parquet": round((d / "p.parquet").stat().st_size / 2**20, 2),
                "production_text": round((d / "p.txt").stat().st_size / 2**20, 2),
                "integer_parquet": round((d / "i.parquet").stat().st_size / 2**20, 2),
                "former_text": round((d / "i.txt").stat().st_size / 2**20, 2),
            },
            "both_read_back_exactly": bool(same),
        }
    json.dump(result, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
