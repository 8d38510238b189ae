"""``censusdp infer RUN --out DIR`` on a real (small) release of a generated state."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from censusdp.cli import main
from censusdp.data.geography import GeoLevels, Hierarchy
from censusdp.data.queries import make_query
from censusdp.data.schema import get_schema
from censusdp.infer.gls import Z90, Z95
from censusdp.infer.options import InferOptions
from censusdp.infer.release import ESTIMATE_COLUMNS, infer_release
from censusdp.io.cef import read_cef
from censusdp.io.nmf_files import read_nmf_rows
from censusdp.release.measure import measured_rows
from censusdp.release.options import Execution
from censusdp.tables import TABLE_NAMES, table_definition, tables_to_arrays, tabulate


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Vermont at 2% of its tracts (2 tracts, ~1,900 blocks), released with seed 1."""
    d = tmp_path_factory.mktemp("infer")
    cef, run, out = d / "cef", d / "run", d / "gls"
    assert (
        main(
            [
                "generate",
                "--state",
                "VT",
                "--scale",
                "0.02",
                "--seed",
                "1",
                "--out",
                str(cef),
                "--quiet",
            ]
        )
        == 0
    )
    # on the tabulation hierarchy: the estimates are compared with the tables' geounits
    # (a spine release's are the spine's: tests/release/pipeline/test_spine_release.py)
    run_args = ["--seed", "1", "--spine", "tabulation", "--quiet"]
    assert main(["run", "--input", str(cef), "--out", str(run), *run_args]) == 0
    assert main(["infer", str(run), "--out", str(out), "--quiet"]) == 0
    return {"cef": cef, "run": run, "out": out}


def _read(out: Path) -> dict[str, np.ndarray]:
    t = pq.read_table(out / "estimates.parquet")
    cols = {}
    for c in t.column_names:
        v = t.column(c).to_numpy(zero_copy_only=False)
        cols[c] = (
            np.asarray(v).astype(str) if c in ("geolevel", "geocode", "query") else np.asarray(v)
        )
    return cols


def _hierarchy(run: Path) -> Hierarchy:
    m = json.loads((run / "manifest.json").read_text())
    b = pq.read_table(run / "invariants.parquet")
    codes = np.asarray(b.column("geocode").to_numpy(zero_copy_only=False)).astype("U16")
    return Hierarchy.from_blocks(codes, GeoLevels.from_pairs(m["geolevels"]))


def test_columns_rows_and_interval_rule(release) -> None:
    """The column contract, one row per unit and line, and the integer interval rule exactly."""
    t = pq.read_table(release["out"] / "estimates.parquet")
    assert tuple(t.column_names) == ESTIMATE_COLUMNS
    for c in ("ci90_low", "ci90_high", "ci95_low", "ci95_high"):
        assert str(t.schema.field(c).type) == "int64"
    cols = _read(release["out"])
    h = _hierarchy(release["run"])
    n_lines = 1 + sum(table_definition(n).n_lines for n in TABLE_NAMES)
    assert n_lines == 302
    assert t.num_rows == n_lines * sum(h.n_units(i) for i in range(h.n_levels))
    names = set(cols["query"])
    assert {"total", "P1_001N", "P1_003N", "P2_002N", "P5_010N", "H1_001N", "H1_003N"} <= names
    e, s = cols["estimate"], cols["sd"]
    for z, lo, hi in ((Z90, "ci90_low", "ci90_high"), (Z95, "ci95_low", "ci95_high")):
        assert z == pytest.approx({"ci90_low": 1.6448536, "ci95_low": 1.9599640}[lo], abs=1e-6)
        t = 1e-9 * np.maximum(1.0, np.abs(e))  # round-off slack (docs/inference.md)
        np.testing.assert_array_equal(
            cols[lo], np.maximum(np.ceil(e - z * s - t), 0).astype(np.int64)
        )
        np.testing.assert_array_equal(
            cols[hi], np.maximum(np.floor(e + z * s + t), 0).astype(np.int64)
        )
        assert (cols[lo] <= cols[hi]).all()
    assert (s >= 0).all() and np.isfinite(e).all()


def test_invariants_exact_and_hierarchy_consistent(release) -> None:
    """State total and housing units are exact (sd 0); children add up to their parents."""
    cols = _read(release["out"])
    h = _hierarchy(release["run"])
    inv = pq.read_table(release["run"] / "invariant_totals.parquet").to_pylist()[0]
    for lv in ("US", "State"):
        k = (cols["geolevel"] == lv) & (cols["query"] == "total")
        assert cols["estimate"][k].tolist() == [inv["population"]] and cols["sd"][k].tolist() == [
            0.0
        ]
    hu = pq.read_table(release["run"] / "invariants.parquet").column("housing_units").to_numpy()
    k = (cols["geolevel"] == "Block") & (cols["query"] == "H1_001N")
    np.testing.assert_array_equal(cols["estimate"][k], hu)
    assert (cols["sd"][k] == 0).all()
    # consistency: each line's estimates sum over children to the parent's estimate
    names = h.geolevels.names
    for li in range(1, h.n_levels):
        for q in ("total", "P1_003N", "P2_002N", "P4_001N", "H1_002N"):
            kc = (cols["geolevel"] == names[li]) & (cols["query"] == q)
            kp = (cols["geolevel"] == names[li - 1]) & (cols["query"] == q)
            sums = np.zeros(h.n_units(li - 1))
            unit = np.searchsorted(h.geocodes[li], cols["geocode"][kc])
            np.add.at(sums, h.parent[li][unit], cols["estimate"][kc])
            up = np.searchsorted(h.geocodes[li - 1], cols["geocode"][kp])
            np.testing.assert_allclose(sums[up], cols["estimate"][kp], atol=1e-6)


@pytest.mark.slow
def test_never_less_precise_than_the_raw_measurement(release) -> None:
    """GLS sd <= sd of the raw noisy answer of the same cell, at every geolevel.

    Independent of the library: from the NMF's variance column, the raw sd of ``total``
    is that of the level's total query (or of the sum of the detailed query's cells),
    and of a table line the sum of the detailed query's cells it covers.
    """
    cols = _read(release["out"])
    nmf = read_nmf_rows(
        release["run"] / "noisy_measurements.parquet", columns=["geolevel", "query", "variance"]
    )
    gl = np.asarray(nmf.column("geolevel").to_numpy(zero_copy_only=False)).astype(str)
    qu = np.asarray(nmf.column("query").to_numpy(zero_copy_only=False)).astype(str)
    var = nmf.column("variance").to_numpy()
    pl94 = get_schema("pl94")
    live = ~pl94.structural_zero_mask
    checked = 0
    for lv in np.unique(gl):
        vd = float(var[(gl == lv) & (qu == "detailed")][0])
        tot = var[(gl == lv) & (qu == "total")]
        for q in (
            "total",
            "P1_001N",
            "P1_003N",
            "P1_010N",
            "P2_002N",
            "P3_001N",
            "P4_005N",
            "P5_004N",
        ):
            if q == "total":
                raw = math.sqrt(float(tot[0])) if tot.size else math.sqrt(live.sum() * vd)
            else:
                t, j = q.split("_")[0], int(q.split("_")[1][:3]) - 1
                cells = table_definition(t).matrix.toarray()[:, j].astype(bool) & live
                raw = math.sqrt(cells.sum() * vd)
            k = (cols["geolevel"] == lv) & (cols["query"] == q)
            assert (cols["sd"][k] <= raw * (1 + 1e-12)).all(), (lv, q)
            checked += int(k.sum())
    assert checked > 10_000
    assert (
        make_query(pl94, "detailed").n_rows == 2016
        and measured_rows(pl94, make_query(pl94, "detailed")).size == 1890
    )
    m = json.loads((release["out"] / "manifest.json").read_text())
    for lv, stats in m["levels"].items():
        if lv == "US":  # one state: the US is the nation's, not measured (no direct sd)
            assert stats["max_sd_over_direct_sd"] is None
            continue
        assert stats["max_sd_over_direct_sd"] <= 1.0 + 1e-12, lv


def test_coverage_against_the_truth(release) -> None:
    """Against the confidential truth: z-scores have variance ~1 and intervals reach nominal.

    Block-level errors live on the integer lattice (discrete Gaussian noise of variance
    about 5 per cell), so integer intervals over-cover there (about 95% for 90%); a
    standard deviation off by a factor 2 would give about 60% or 100%.
    """
    cols = _read(release["out"])
    h = _hierarchy(release["run"])
    cef = read_cef(release["cef"])
    arr = tables_to_arrays(tabulate(cef.persons, cef.units, h), h)
    where = {v: (t, j) for t in TABLE_NAMES for j, v in enumerate(table_definition(t).variables)}
    truth = np.zeros(cols["estimate"].size)
    for li, lv in enumerate(h.geolevels.names):
        k = cols["geolevel"] == lv
        unit = np.searchsorted(h.geocodes[li], cols["geocode"][k])
        qq = cols["query"][k]
        tv = np.zeros(k.sum())
        for name in np.unique(qq):
            sel = qq == name
            t, j = where["P1_001N" if name == "total" else name]
            tv[sel] = arr[t][li][unit[sel], j]
        truth[k] = tv
    s, e = cols["sd"], cols["estimate"]
    exact = s == 0
    np.testing.assert_array_equal(e[exact], truth[exact])  # exact rows are the truth
    pos = ~exact
    z = (truth[pos] - e[pos]) / s[pos]
    assert abs(z.mean()) < 0.01 and 0.95 < z.var() < 1.05
    cov90 = ((truth >= cols["ci90_low"]) & (truth <= cols["ci90_high"]))[pos].mean()
    cov95 = ((truth >= cols["ci95_low"]) & (truth <= cols["ci95_high"]))[pos].mean()
    assert 0.90 <= cov90 <= 0.97 and 0.95 <= cov95 <= 0.99, (cov90, cov95)


def test_manifest_is_strict_json_and_records_inputs(release) -> None:
    text = (release["out"] / "manifest.json").read_text()
    m = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert m["seed"] is None and m["schema"] == "pl94"
    assert m["constraints"]["zeros_from_block_invariants"] is True
    assert m["noise_variances"]["Block"]["detailed"] > 0
    assert m["rows"] == pq.ParquetFile(release["out"] / "estimates.parquet").metadata.num_rows


@pytest.mark.slow
def test_output_directory_rules(release, tmp_path: Path, capsys) -> None:
    """Refuse a non-empty --out (and the release itself); --overwrite touches only our files."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert main(["infer", str(release["run"]), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "not empty" in err and err.count("\n") == 1
    assert main(["infer", str(release["run"]), "--out", str(release["run"]), "--quiet"]) == 2
    assert "overlaps the input" in capsys.readouterr().err
    assert main(["infer", str(tmp_path / "nope"), "--out", str(tmp_path / "x"), "--quiet"]) == 1
    assert "missing file" in capsys.readouterr().err
    # --overwrite replaces only a directory censusdp made, never the user's
    assert main(["infer", str(release["run"]), "--out", str(out), "--overwrite", "--quiet"]) == 2
    assert "not a censusdp output" in capsys.readouterr().err
    assert (out / "keep.txt").read_text() == "mine"
    ours = tmp_path / "ours"
    assert main(["infer", str(release["run"]), "--out", str(ours), "--quiet"]) == 0
    assert main(["infer", str(release["run"]), "--out", str(ours), "--overwrite", "--quiet"]) == 0
    assert sorted(p.name for p in ours.iterdir()) == [
        "estimates.parquet",
        "manifest.json",
        "margins.csv",
        "margins.parquet",
    ]


@pytest.mark.slow
def test_pool_executor_and_without_zero_constraints(release, tmp_path: Path) -> None:
    """Two worker processes give the same estimates; dropping the zeros never lowers an sd.

    (Floats may differ in the last bits when this process's BLAS runs several threads
    and the workers' one; the CLI runs single-threaded BLAS everywhere.)
    """
    infer_release(release["run"], tmp_path / "pool", execution=Execution(workers=2))
    a, b = _read(release["out"]), _read(tmp_path / "pool")
    for c in ESTIMATE_COLUMNS:
        if a[c].dtype.kind == "f":
            np.testing.assert_allclose(a[c], b[c], rtol=0, atol=1e-9)
        else:
            np.testing.assert_array_equal(a[c], b[c])
    infer_release(release["run"], tmp_path / "nz", InferOptions(zero_constraints=False))
    c = _read(tmp_path / "nz")
    base = _read(release["out"])
    assert (c["sd"] >= base["sd"] - 1e-9).all()
    assert (c["sd"] > base["sd"] + 1e-6).mean() > 0.5


@pytest.mark.slow
def test_release_variants(release, tmp_path: Path, capsys) -> None:
    """Without the housing-unit NMF only H1_001N (the invariant) is reported; a release on
    another schema is refused with one line."""
    import shutil

    run = tmp_path / "run"
    run.mkdir()
    for name in (
        "manifest.json",
        "noisy_measurements.parquet",
        "invariants.parquet",
        "invariant_totals.parquet",
    ):
        src = release["run"] / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, run / name)
    m = infer_release(run, tmp_path / "nu")
    assert m["lines"][-1] == "H1_001N" and "not measured" in m["housing_units"]
    cols = _read(tmp_path / "nu")
    k = (cols["geolevel"] == "Block") & (cols["query"] == "H1_001N")
    hu = pq.read_table(run / "invariants.parquet").column("housing_units").to_numpy()
    np.testing.assert_array_equal(cols["estimate"][k], hu)
    assert (cols["sd"][k] == 0).all() and "H1_002N" not in set(cols["query"])
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["schema"] = "dhc-lite"
    (run / "manifest.json").write_text(json.dumps(manifest))
    assert main(["infer", str(run), "--out", str(tmp_path / "d"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "pl94 schema" in err and err.count("\n") == 1


def test_what_infer_cannot_read_is_refused_before_validating(
    release, tmp_path: Path, capsys
) -> None:
    """A release on another schema than pl94 (a DHC release's, with or without its
    household run) is one line before the release is validated (its NMF here is absent:
    validating would fail first) and nothing is written."""
    run = tmp_path / "run"
    run.mkdir()
    manifest = json.loads((release["run"] / "manifest.json").read_text())
    edit = {"schema": "dhcp-2020", "units": {"schema": "dhch-2020"}}
    (run / "manifest.json").write_text(json.dumps({**manifest, **edit}))
    out = tmp_path / "gls"
    assert main(["infer", str(run), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "pl94 schema only" in err and "\n" not in err and "missing" not in err
    assert not out.exists()
