"""File drivers of the reconstruction and re-identification attacks.

``run_reconstruct`` and ``run_reid`` read a release (or a CEF, for the unprotected
baseline) from disk, call the algorithms of :mod:`censusdp.attacks.dhc.reconstruct` and
:mod:`censusdp.attacks.dhc.reid`, and write their outputs atomically with a manifest:

* ``REC/reconstructed.parquet``: ``rec_id``, ``geocode``, ``sex`` (1/2), ``age``,
  ``hispanic`` (0/1), ``cenrace`` (1..63), one row per reconstructed person;
* ``REC/summary.json`` (and ``manifest.json``): solver status, timings and, when the
  truth is given, the one-to-one match counts and rates;
* ``OUT/commercial.parquet``: ``person_id``, ``geocode``, ``sex``, ``age``;
* ``OUT/links_<method>.parquet``: ``rec_id``, ``person_id``, ``kind`` (0 exact,
  1 age +-1, 2 probabilistic), ``weight``, ``confirmed``, ``confirmed_all_attributes``;
* ``OUT/summary.json`` (and ``manifest.json``): the rates of every method.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from censusdp.attacks.dhc.reconstruct import check_time_limit, reconstruct_blocks
from censusdp.attacks.dhc.reid import (
    CommercialSpec,
    baseline_guess,
    commercial_file,
    link_exact,
    link_fellegi_sunter,
    reid_rates,
)
from censusdp.attacks.dhc.scoring import match_counts
from censusdp.attacks.dhc.tables import AGE_DETAILS, dhc_tables, keys_of
from censusdp.errors import ConfigError, InputError
from censusdp.io.atomic import write_json, write_parquet
from censusdp.io.columns import read_columns
from censusdp.io.mdf_read import read_mdf_persons
from censusdp.io.output_rules import MANIFEST_FILE
from censusdp.io.rundir import RunDir
from censusdp.io.staging import staged_output
from censusdp.progress import Progress, say
from censusdp.version import __version__

__all__ = [
    "LINK_METHODS",
    "ReconstructOptions",
    "read_persons",
    "read_truth",
    "run_reconstruct",
    "run_reid",
]

LINK_METHODS = ("exact", "fellegi-sunter")


def read_persons(directory: str | Path) -> tuple[dict[str, np.ndarray], str]:
    """Person records of a release (``mdf_persons.parquet``) or a CEF (``persons.parquet``).

    Returns:
        The columns and ``"release"`` or ``"unprotected"`` (tables tabulated from the
        confidential file itself, as if published without protection).

    Raises:
        InputError: if neither file exists.
    """
    d = Path(directory)
    mdf = RunDir(d).mdf_file("persons")
    if mdf.exists():
        return read_mdf_persons(mdf), "release"
    if (d / "persons.parquet").exists():
        return read_columns(d / "persons.parquet"), "unprotected"
    raise InputError(
        f"{d}: neither mdf_persons.parquet (a release) nor persons.parquet (a CEF) exists"
    )


def read_truth(directory: str | Path) -> dict[str, np.ndarray]:
    """The confidential persons of a CEF directory (validated by ``read_cef``)."""
    from censusdp.io.cef import read_cef

    cef = read_cef(directory)
    return {k: np.asarray(v) for k, v in cef.persons.items()}


def _keys(cols: dict[str, np.ndarray]) -> np.ndarray:
    return keys_of(cols["sex"], cols["age"], cols["hispanic"], cols["cenrace"])


@dataclass(frozen=True)
class ReconstructOptions:
    """What one reconstruction attack is (``censusdp attack reconstruct``), checked once.

    Attributes:
        age_detail: ``"single"`` or ``"sf1"``: the block tables the attacker reads (see
            :mod:`censusdp.attacks.dhc.tables`).
        time_limit: HiGHS time limit per block (seconds).
        refine: re-pair within blocks to meet the tract tables (see
            :func:`censusdp.attacks.dhc.reconstruct.reconstruct_blocks`).

    Raises:
        ConfigError: on construction, one line naming the value.
    """

    age_detail: str = "single"
    time_limit: float = 30.0
    refine: bool = False

    def __post_init__(self) -> None:
        if self.age_detail not in AGE_DETAILS:
            raise ConfigError(f"age_detail must be one of {AGE_DETAILS}, got {self.age_detail!r}")
        check_time_limit(self.time_limit)


def run_reconstruct(
    release_dir: str | Path,
    out_dir: str | Path,
    options: ReconstructOptions | None = None,
    *,
    truth_dir: str | Path | None = None,
    workers: int = 1,
    overwrite: bool = False,
    progress: Progress = None,
) -> dict[str, Any]:
    """Tabulate a release's block tables, reconstruct its persons, and score them.

    Args:
        release_dir: a release run directory (its ``mdf_persons.parquet`` must have
            ``sex`` and ``age``: a ``dhc-lite`` DP run or a swapped release), or a
            CEF directory (the unprotected tables).
        out_dir: where to write ``reconstructed.parquet`` and ``summary.json``.
        options: the attack's tables and solver settings (default
            ``ReconstructOptions()``).
        truth_dir: optional CEF directory to score against (exact and age +-1).
        workers: worker processes for the block solves.
        overwrite: replace a non-empty ``out_dir``.
        progress: progress callback.

    Returns:
        The summary written to ``summary.json``.
    """
    options = options or ReconstructOptions()
    age_detail = options.age_detail
    t_all = time.perf_counter()
    out = Path(out_dir)
    with staged_output(
        out, overwrite, [release_dir, truth_dir], command="attack reconstruct"
    ) as staging:
        out = staging.path
        timings: dict[str, float] = {}
        t = time.perf_counter()
        persons, source = read_persons(release_dir)
        tables = dhc_tables(persons, age_detail=age_detail)
        del persons  # the attack sees the published tables only
        timings["tabulate"] = time.perf_counter() - t
        say(
            progress,
            f"reconstruct: {tables.blocks.size:,} populated blocks, {tables.n_published():,} "
            f"non-zero published cells ({source})",
        )
        rec = reconstruct_blocks(
            tables,
            workers=workers,
            time_limit=options.time_limit,
            refine=options.refine,
            progress=progress,
        )
        timings["solve"] = rec.seconds
        timings["solve_cpu"] = rec.extra.get("cpu_seconds", float("nan"))
        cols = rec.columns()
        t = time.perf_counter()
        table = pa.table(
            {
                "rec_id": pa.array(np.arange(rec.n_records, dtype=np.int64)),
                "geocode": pa.array(cols["geocode"].astype(object), pa.string()),
                "sex": pa.array(cols["sex"].astype(np.int64)),
                "age": pa.array(cols["age"].astype(np.int64)),
                "hispanic": pa.array(cols["hispanic"].astype(np.int64)),
                "cenrace": pa.array(cols["cenrace"].astype(np.int64)),
            }
        )
        write_parquet(table, out / "reconstructed.parquet")
        timings["write"] = time.perf_counter() - t
        summary: dict[str, Any] = {
            "release": str(Path(release_dir).resolve()),
            "source": source,
            "age_detail": age_detail,
            "refine_tract": options.refine,
            "blocks": int(tables.blocks.size),
            "published_cells": tables.n_published(),
            "records": rec.n_records,
            "status": rec.status.to_dict(),
            "solver": "HiGHS MILP via scipy.optimize.milp",
            "workers": workers,
        }
        if truth_dir is not None:
            t = time.perf_counter()
            truth = read_truth(truth_dir)
            m = match_counts(cols["geocode"], rec.keys, truth["geocode"], _keys(truth))
            summary["truth"] = str(Path(truth_dir).resolve())
            summary["match"] = m.to_dict()
            timings["match"] = time.perf_counter() - t
            say(
                progress,
                f"reconstruct: {m.exact_rate:.1%} of records match a person exactly, "
                f"{m.fuzzy_rate:.1%} with age +-1",
            )
        return _finish(summary, timings, t_all, out, "attack reconstruct")


def _link_table(rec_ids: np.ndarray, person_id: np.ndarray, links: Any, flags: dict) -> pa.Table:
    return pa.table(
        {
            "rec_id": pa.array(rec_ids[links.rec].astype(np.int64)),
            "person_id": pa.array(person_id[links.comm].astype(np.int64)),
            "kind": pa.array(links.kind.astype(np.int64)),
            "weight": pa.array(links.weight.astype(np.float64)),
            "confirmed": pa.array(flags["confirmed"]),
            "confirmed_all_attributes": pa.array(flags["all"]),
        }
    )


def _link_flags(rec: dict, truth: dict, comm: dict, links: Any) -> dict[str, np.ndarray]:
    t_id = truth["person_id"].astype(np.int64)
    order = np.argsort(t_id)
    pid = comm["person_id"].astype(np.int64)[links.comm]
    row = order[np.searchsorted(t_id[order], pid)]
    t_eth = truth["hispanic"] * 63 + truth["cenrace"]
    r_eth = rec["hispanic"] * 63 + rec["cenrace"]
    right = t_eth[row] == r_eth[links.rec]
    full = (
        right
        & (truth["geocode"][row] == rec["geocode"][links.rec])
        & (truth["sex"][row] == rec["sex"][links.rec])
        & (np.abs(truth["age"][row] - rec["age"][links.rec]) <= 1)
    )
    return {"confirmed": right, "all": full}


def run_reid(
    reconstructed_dir: str | Path,
    truth_dir: str | Path,
    out_dir: str | Path,
    *,
    methods: tuple[str, ...] = LINK_METHODS,
    seed: int = 0,
    spec: CommercialSpec | None = None,
    overwrite: bool = False,
    progress: Progress = None,
) -> dict[str, Any]:
    """Build the commercial file, link, confirm, and write rates and links.

    Args:
        reconstructed_dir: output of :func:`run_reconstruct`.
        truth_dir: the CEF directory the release was made from.
        out_dir: where to write ``commercial.parquet``, ``links_*.parquet``, ``summary.json``.
        methods: linkage methods: ``"exact"`` (2010) and/or ``"fellegi-sunter"``.
        seed: seed of the commercial file (``seed``) and of tie-breaking (``seed + 1``).
        spec: commercial file coverage and error rates.
        overwrite: replace a non-empty ``out_dir``.
        progress: progress callback.

    Returns:
        The summary written to ``summary.json``: per method, the rates of
        :func:`censusdp.attacks.dhc.reid.reid_rates`.
    """
    bad = [m for m in methods if m not in LINK_METHODS]
    if bad or not methods:
        raise ConfigError(f"link methods must be among {LINK_METHODS}, got {list(methods)}")
    t_all = time.perf_counter()
    out = Path(out_dir)
    with staged_output(
        out, overwrite, [reconstructed_dir, truth_dir], command="attack reid"
    ) as staging:
        out = staging.path
        path = Path(reconstructed_dir) / "reconstructed.parquet"
        if not path.exists():
            raise InputError(f"{path}: missing file (run 'censusdp attack reconstruct' first)")
        rec = read_columns(path)
        truth = read_truth(truth_dir)
        spec = spec or CommercialSpec()
        comm = commercial_file(truth, spec, seed=seed)
        write_parquet(
            pa.table(
                {
                    "person_id": pa.array(comm["person_id"].astype(np.int64)),
                    "geocode": pa.array(comm["geocode"].astype(object), pa.string()),
                    "sex": pa.array(comm["sex"].astype(np.int64)),
                    "age": pa.array(comm["age"].astype(np.int64)),
                }
            ),
            out / "commercial.parquet",
        )
        base = baseline_guess(truth, comm)
        summary: dict[str, Any] = {
            "reconstructed": str(Path(reconstructed_dir).resolve()),
            "truth": str(Path(truth_dir).resolve()),
            "seed": seed,
            "commercial_spec": dict(spec.__dict__),
            "methods": {},
        }
        timings: dict[str, float] = {}
        for method in methods:
            t = time.perf_counter()
            if method == "exact":
                links = link_exact(rec, comm, seed=seed + 1)
            else:
                links = link_fellegi_sunter(rec, comm, seed=seed + 1)
            rates = reid_rates(rec, truth, comm, links, baseline=base)
            if links.model:
                rates["model"] = links.model
            flags = _link_flags(rec, truth, comm, links)
            write_parquet(
                _link_table(rec["rec_id"], comm["person_id"], links, flags),
                out / f"links_{method.replace('-', '_')}.parquet",
            )
            timings[method] = time.perf_counter() - t
            summary["methods"][method] = rates
            say(
                progress,
                f"reid {method}: {rates['putative_rate']:.1%} of records linked, "
                f"{rates['confirmed_rate']:.1%} of links confirmed = "
                f"{rates['confirmed_share']:.1%} of the population "
                f"(marginals baseline {rates['baseline_confirmed_share']:.1%})",
            )
        return _finish(summary, timings, t_all, out, "attack reid")


def _finish(
    summary: dict[str, Any], timings: dict[str, float], t_all: float, out: Path, command: str
) -> dict[str, Any]:
    """Record the timings and version, write ``summary.json`` and the manifest."""
    timings["total"] = time.perf_counter() - t_all
    summary["timings"] = {k: round(v, 3) for k, v in timings.items()}
    summary["package_version"] = __version__
    write_json(summary, out / "summary.json")
    write_json({"command": command, **summary}, out / MANIFEST_FILE)
    return summary
