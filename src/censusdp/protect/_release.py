"""Write a swapped release in the same run layout as a DP release, and DP on top of it.

:func:`protect_swap` reads a CEF, swaps households and top-codes ages
(:mod:`censusdp.protect.swap`), and writes a run directory that every downstream tool
reads like a ``censusdp run`` output:

* ``mdf_persons.parquet`` and ``.txt``: the swapped, top-coded persons in the full
  MDF2020 person layout (``QSEX``, ``QAGE``, ...; :mod:`censusdp.io.mdf_records`);
* ``mdf_units.parquet`` and ``.txt``: the units (they do not move; when the input has
  ``rel``, in production's household layout, each occupied housing unit carrying the
  variables of the household swapped into it: :mod:`censusdp.io.mdf_households`), and
  ``invariants.parquet`` with the facilities by type;
* ``tables/P1..P5,H1.parquet`` tabulated from them by :mod:`censusdp.tables`;
* ``manifest.json`` with ``mechanism = "swap"``, ``rho``/``epsilon``/``delta`` null
  (swapping has no formal privacy-loss parameter), the swap counts, seed and timings.

With ``cef_out`` the swapped file is also written as a CEF (``persons.parquet`` with
``rel`` and ``citizen`` when the input has them, ``units.parquet``) so that a DP run can be made on top of it (JASON's
recommendation, JASON (JSR-19-2F) sec. 8.4.3); :func:`swap_then_dp` does both in one call.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from censusdp.data.geography import DEFAULT_GEOLEVELS, Hierarchy
from censusdp.data.histograms import household_histogram
from censusdp.data.invariants import compute_invariants
from censusdp.io.atomic import write_json, write_parquet
from censusdp.io.cef import read_cef, unit_rows_of
from censusdp.io.cef_households import OPTIONAL_PERSON_COLUMNS, households_of
from censusdp.io.layout import INVARIANTS_FILE, TABLES_DIR
from censusdp.io.mdf_write import write_mdf_records
from censusdp.io.output_rules import MANIFEST_FILE
from censusdp.io.staging import staged_output
from censusdp.io.tables import write_tables
from censusdp.privacy.release_budget import ReleaseBudget
from censusdp.progress import Progress, say
from censusdp.protect.swap import SwapOptions, swap_households, top_code_ages
from censusdp.release.options import Execution, ReleaseOptions
from censusdp.tables import tabulate
from censusdp.version import __version__

__all__ = ["protect_swap", "swap_then_dp"]


def _i64(x: np.ndarray) -> pa.Array:
    return pa.array(np.asarray(x, dtype=np.int64), pa.int64())


def _write_cef(persons: dict[str, np.ndarray], units: dict[str, np.ndarray], d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    order = np.argsort(persons["person_id"], kind="stable")
    cols = ("person_id", "unit_id", "geocode", "hhgq", "sex", "age", "hispanic", "cenrace")
    # households move whole, so each person's relationship to the householder and
    # citizenship stay true of the swapped file: kept when the input has them
    cols += tuple(c for c in OPTIONAL_PERSON_COLUMNS if c in persons)
    write_parquet(
        pa.table(
            {
                c: (
                    pa.array(persons[c][order].astype(object), pa.string())
                    if c == "geocode"
                    else _i64(persons[c][order])
                )
                for c in cols
            }
        ),
        d / "persons.parquet",
    )
    write_parquet(
        pa.table(
            {
                "unit_id": _i64(units["unit_id"]),
                "geocode": pa.array(np.asarray(units["geocode"]).astype(object), pa.string()),
                "gqtype": _i64(units["gqtype"]),
                "occupied": pa.array(np.asarray(units["occupied"], dtype=bool)),
            }
        ),
        d / "units.parquet",
    )


def _households(
    persons: dict[str, np.ndarray], units: dict[str, np.ndarray], hierarchy: Hierarchy
) -> sp.csr_matrix | None:
    """The swapped file's ``(blocks x 387,072)`` households (``household2010``), derived
    from its persons as the reader derives them (households move whole, so each is a
    household of the input in another unit), or ``None`` without ``rel``."""
    if "rel" not in persons:
        return None
    unit_row = unit_rows_of(np.asarray(units["unit_id"]), np.asarray(persons["unit_id"]))
    households = households_of(persons, units, unit_row)
    return household_histogram(households, units["geocode"], hierarchy)


def _write_swapped_release(
    persons: dict[str, np.ndarray], units: dict[str, np.ndarray], out: Path
) -> Hierarchy:
    """Write the swapped file as the MDF (production layout; the units in the household
    layout when the input has ``rel``), ``invariants.parquet`` and ``tables/``; returns
    its geography.

    Persons are written in block order; the units do not move. ``invariants.parquet``
    publishes the housing units and facilities by type per block, as a DP release does
    (the units MDF carries no facility type).
    """
    hierarchy = Hierarchy.from_blocks(
        np.concatenate([units["geocode"], persons["geocode"]]), DEFAULT_GEOLEVELS
    )
    cols = {k: persons[k] for k in ("geocode", "hhgq", "sex", "age", "hispanic", "cenrace")}
    unit_cols = {k: units[k] for k in ("geocode", "gqtype", "occupied")}
    write_mdf_records(
        out, cols, unit_cols, hierarchy, "dhc-lite", _households(persons, units, hierarchy)
    )
    write_parquet(compute_invariants(cols, unit_cols, hierarchy).to_table(), out / INVARIANTS_FILE)
    write_tables(tabulate(cols, unit_cols, hierarchy), out / TABLES_DIR)
    return hierarchy


def protect_swap(
    input_dir: str | Path,
    out_dir: str | Path,
    swap: SwapOptions,
    *,
    cef_out: str | Path | None = None,
    overwrite: bool = False,
    progress: Progress = None,
) -> dict[str, Any]:
    """Swap households, top-code ages, and write a release run directory.

    Args:
        input_dir: CEF directory (``persons.parquet``, ``units.parquet``).
        out_dir: the run directory to write (layout in the module docstring).
        swap: the rate, seed, top-code and risk selection of the swap.
        cef_out: also write the swapped file as a CEF here (for DP on top of it).
        overwrite: replace a non-empty ``out_dir``.
        progress: progress callback.

    Returns:
        The manifest written to ``out_dir/manifest.json``.
    """
    t_all = time.perf_counter()
    out = Path(out_dir)
    with staged_output(out, overwrite, [input_dir, cef_out], command="protect swap") as staging:
        out = staging.path
        timings: dict[str, float] = {}
        t = time.perf_counter()
        cef = read_cef(input_dir, progress=progress)
        timings["read"] = time.perf_counter() - t
        t = time.perf_counter()
        res = swap_households(
            cef.persons,
            rate=swap.rate,
            seed=swap.seed,
            risk_weight=swap.risk_weight,
            small_block=swap.small_block,
        )
        persons = res.persons
        persons["age"] = top_code_ages(persons["age"], swap.topcode)
        timings["swap"] = time.perf_counter() - t
        say(
            progress,
            f"swap: {res.swapped:,} of {res.households:,} households swapped "
            f"({res.pairs:,} pairs, {res.swapped_at_risk:,} at risk), "
            f"{res.persons_moved:,} persons moved",
        )
        t = time.perf_counter()
        units = {k: np.asarray(v) for k, v in cef.units.items()}
        units["geocode"] = np.asarray(units["geocode"]).astype("U16")
        hierarchy = _write_swapped_release(persons, units, out)
        if cef_out is not None:
            with staged_output(
                cef_out, overwrite, [input_dir, out_dir], command="protect swap", option="--cef-out"
            ) as cef_staging:
                _write_cef(persons, units, cef_staging.path)
        timings["write"] = time.perf_counter() - t
        timings["total"] = time.perf_counter() - t_all
        manifest = {
            "release": "swap",
            "schema": "dhc-lite",
            "mechanism": "swap",
            "postprocess": "none",
            "rho": None,
            "epsilon": None,
            "delta": None,
            "geolevels": [[lv.name, lv.length] for lv in hierarchy.geolevels.levels],
            "seed": swap.seed,
            "swap": {
                "rate": swap.rate,
                "risk_weight": swap.risk_weight,
                "small_block": swap.small_block,
                "matching": "same household size and number of adults; other block of the "
                "same county, else of the same state",
                **res.summary(),
            },
            "topcode_age": swap.topcode,
            "persons_released": int(persons["age"].size),
            "units_released": int(units["gqtype"].size),
            "input": str(Path(input_dir).resolve()),
            "cef_out": str(Path(cef_out).resolve()) if cef_out is not None else None,
            "package_version": __version__,
            "outputs": sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
            + [MANIFEST_FILE],
            "timings": {k: round(v, 4) for k, v in timings.items()},
        }
        write_json(manifest, out / MANIFEST_FILE)
        return manifest


def swap_then_dp(
    input_dir: str | Path,
    out_dir: str | Path,
    swap: SwapOptions,
    budget: ReleaseBudget,
    release: ReleaseOptions | None = None,
    *,
    execution: Execution | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Swap (and top-code), then run the DP release on the swapped file (JASON (JSR-19-2F) sec. 8.4.3).

    The swapped CEF lives in a temporary directory removed afterwards; the run
    directory is a normal ``censusdp run`` output whose manifest also records the swap.

    Args:
        input_dir: CEF directory.
        out_dir: the DP run directory.
        swap: as in :func:`protect_swap`.
        budget: the release's budget (its person run must have a schema with sex and
            age for the reconstruction attack to read, e.g. ``dhc-lite-demo``; the
            unit run is optional).
        release: the DP release's options, e.g. its seed (default
            :class:`~censusdp.release.options.ReleaseOptions`: secure randomness).
        execution: where the release's tasks run and where progress goes (default: in
            process, silent).
        overwrite: replace a non-empty ``out_dir``.

    Returns:
        The run manifest (with a ``swap`` entry).
    """
    from censusdp.release.pipeline import run_release

    execution = execution or Execution()
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.swap-", dir=out.parent))
    try:
        swap_manifest = protect_swap(
            input_dir, tmp / "release", swap, cef_out=tmp / "cef", progress=execution.progress
        )
        manifest = run_release(
            tmp / "cef", out, budget, release or ReleaseOptions(), execution, overwrite=overwrite
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    manifest["swap"] = swap_manifest["swap"]
    manifest["topcode_age"] = swap.topcode
    manifest["input"] = str(Path(input_dir).resolve())
    write_json(manifest, out / MANIFEST_FILE)
    return manifest
