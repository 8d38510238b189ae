"""End-to-end tests of ``evaluate`` on a synthetic truth and a perturbed "release".

Every checked number is recomputed independently from the raw Parquet columns with
plain Python counters (no censusdp code), as the issue's judging script would.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections import Counter

import numpy as np
import pyarrow.parquet as pq
import pytest

from censusdp.cli import main
from censusdp.errors import InputError
from censusdp.evaluate import EvaluateOptions, evaluate
from censusdp.release.options import Execution

LEVELS = (("US", 0), ("State", 2), ("County", 5), ("Tract", 11), ("BlockGroup", 12), ("Block", 16))


@pytest.fixture(scope="module")
def evaluated(truth_release, tmp_path_factory):
    truth_dir, release_dir, _, _ = truth_release
    out = tmp_path_factory.mktemp("out")
    result = evaluate(
        truth_dir,
        release_dir,
        json_path=out / "eval.json",
        html_path=out / "report.html",
        options=EvaluateOptions(district_targets=(100, 400), allow_invalid=True),
        execution=Execution(progress=lambda _m: None),
    )
    return result, out


def _read(path):
    return pq.read_table(path).to_pydict()


_GEO = ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLKGRPCE", "TABBLK")


def _mdf_persons(path):
    """The released persons decoded by hand from the production MDF codes."""
    t = _read(path)
    return {
        "geocode": ["".join(p) for p in zip(*(t[c] for c in _GEO), strict=True)],
        "hhgq": [int(v) for v in t["GQTYPE_PL"]],
        "votingage": [int(v) - 1 for v in t["VOTING_AGE"]],
        "hispanic": [int(v) - 1 for v in t["CENHISP"]],
        "cenrace": [int(v) for v in t["CENRACE"]],
    }


def _mdf_units(path):
    """Released units decoded by hand: housing units (RTYPE 2) with occupancy (HH_STATUS 1)."""
    t = _read(path)
    return {
        "geocode": ["".join(p) for p in zip(*(t[c] for c in _GEO), strict=True)],
        "gqtype": [0 if r == "2" else -1 for r in t["RTYPE"]],  # facility types: invariants
        "occupied": [s != "2" for s in t["HH_STATUS"]],
    }


def _population_by_level(geocodes, blocks_universe):
    out = {}
    for name, length in LEVELS:
        c = Counter(g[:length] for g in geocodes)
        units = sorted({b[:length] for b in blocks_universe})
        out[name] = {u: c.get(u, 0) for u in units}
    return out


def test_total_population_metrics_match_independent_recomputation(truth_release, evaluated):
    truth_dir, release_dir, _, _ = truth_release
    result, out = evaluated
    tp = _read(truth_dir / "persons.parquet")["geocode"]
    tu = _read(truth_dir / "units.parquet")["geocode"]
    rp = _mdf_persons(release_dir / "mdf_persons.parquet")["geocode"]
    universe = set(tp) | set(tu) | set(rp)
    t = _population_by_level(tp, universe)
    r = _population_by_level(rp, universe)
    on_disk = json.loads((out / "eval.json").read_text())
    for name, _ in LEVELS:
        errs = [r[name][u] - t[name][u] for u in t[name]]
        pop = sum(t[name].values())
        l1 = sum(abs(e) for e in errs)
        rec = on_disk["metrics"]["total_population"][name]
        assert rec["tvd"] == pytest.approx(1 - l1 / (2 * pop))
        assert rec["l1"] == l1 and rec["pop"] == pop
        assert rec["mae"] == pytest.approx(l1 / len(errs))
        assert rec["bias"] == pytest.approx(sum(errs) / len(errs))
        assert rec["rmse"] == pytest.approx(math.sqrt(sum(e * e for e in errs) / len(errs)))
        small = [e for u, e in zip(t[name], errs, strict=True) if 1 <= t[name][u] <= 9]
        if small:
            assert rec["by_bin"]["1-9"]["bias"] == pytest.approx(sum(small) / len(small))
    # Moving people inside counties leaves county and state totals exact.
    assert on_disk["metrics"]["total_population"]["County"]["tvd"] == 1.0
    assert on_disk["metrics"]["total_population"]["Block"]["tvd"] < 1.0
    assert result["metrics"]["total_population"]["Block"]["mae"] > 0


def test_detailed_and_race_hispanic_tvd_match_independent_recomputation(truth_release, evaluated):
    truth_dir, release_dir, _, _ = truth_release
    result, _ = evaluated
    tp = _read(truth_dir / "persons.parquet")
    rp = _mdf_persons(release_dir / "mdf_persons.parquet")
    t_rows = list(
        zip(
            tp["geocode"],
            tp["hhgq"],
            [int(a >= 18) for a in tp["age"]],
            tp["hispanic"],
            tp["cenrace"],
            strict=True,
        )
    )
    r_rows = list(
        zip(rp["geocode"], rp["hhgq"], rp["votingage"], rp["hispanic"], rp["cenrace"], strict=True)
    )
    for name, length in (("County", 5), ("Block", 16)):
        for measure, key in (("detailed", lambda x: x[1:]), ("hispanic*cenrace", lambda x: x[3:])):
            ct = Counter((row[0][:length], key(row)) for row in t_rows)
            cr = Counter((row[0][:length], key(row)) for row in r_rows)
            l1 = sum(abs(ct[k] - cr[k]) for k in set(ct) | set(cr))
            expected = 1 - l1 / (2 * len(t_rows))
            assert result["metrics"][measure][name]["tvd"] == pytest.approx(expected)


def test_table_metrics_and_h1_pathology(truth_release, evaluated):
    truth_dir, release_dir, _, _ = truth_release
    result, _ = evaluated
    tu = _read(truth_dir / "units.parquet")
    ru = _mdf_units(release_dir / "mdf_units.parquet")
    universe = set(tu["geocode"]) | set(ru["geocode"])
    universe |= set(_read(truth_dir / "persons.parquet")["geocode"])
    universe |= set(_mdf_persons(release_dir / "mdf_persons.parquet")["geocode"])
    for name, length in (("County", 5), ("Block", 16)):

        def occ(units, length=length):
            hu, oc = Counter(), Counter()
            for g, gq, o in zip(units["geocode"], units["gqtype"], units["occupied"], strict=True):
                if gq == 0:
                    hu[g[:length]] += 1
                    oc[g[:length]] += int(o)
            return hu, oc

        thu, toc = occ(tu)
        rhu, roc = occ(ru)
        full = sum(1 for u in rhu if rhu[u] > 0 and roc[u] == rhu[u])
        rec = result["pathologies"]["occupancy_100"][name]["released"]
        assert rec["n_full"] == full and rec["n_units"] == sum(1 for u in rhu if rhu[u] > 0)
        # H1: occupied + vacant lines; L1 over both leaves / (2 x housing units).
        l1 = sum(abs(roc[u] - toc[u]) + abs((rhu[u] - roc[u]) - (thu[u] - toc[u])) for u in thu)
        assert result["metrics"]["H1"][name]["tvd"] == pytest.approx(
            1 - l1 / (2 * sum(thu.values()))
        )
        # MAE of H1 is over its 3 lines at every geounit (Total is exact: invariant).
        n_units = len({b[:length] for b in universe})
        assert result["metrics"]["H1"][name]["mae"] == pytest.approx(l1 / (3 * n_units))


def test_invariants_hold_for_a_consistent_release(evaluated):
    result, _ = evaluated
    assert result["invariants_ok"], result["invariants"]
    assert set(result["invariants"]) >= {
        "state_population",
        "block_housing_units",
        "block_gq_facilities",
        "children_sum_to_parents",
        "tables_match_mdf",
        "structural_zeros",
        "gq_population_bounds",
    }


def test_invariants_violated_are_reported(broken_release, tmp_path):
    truth_dir, release_dir, _, _ = broken_release
    result = evaluate(
        truth_dir,
        release_dir,
        EvaluateOptions(district_targets=(100,), allow_invalid=True),
        execution=Execution(progress=lambda _m: None),
    )
    inv = result["invariants"]
    assert not result["invariants_ok"]
    assert not inv["state_population"]["ok"] and "released" in inv["state_population"]["example"]
    assert not inv["block_housing_units"]["ok"] and inv["block_housing_units"]["violations"] == 1
    assert inv["block_gq_facilities"]["ok"]
    assert result["noisy_measurements"] == {}


def test_nmf_closed_form_sd_is_checked_against_truth(evaluated):
    from conftest import NMF_VARIANCE

    result, _ = evaluated
    by_level = result["noisy_measurements"]["persons"]["by_level"]
    for (level, query), var in NMF_VARIANCE.items():
        rec = by_level[level][query]
        assert rec["sd_mean_variance"] == pytest.approx(math.sqrt(var + 1 / 12))
    big = by_level["Block"]["detailed"]["empirical"]
    # ~190k draws: the realised noise variance matches the stated one within 2%.
    assert big["variance_ratio"] == pytest.approx(1.0, abs=0.02)
    assert big["coverage90"] == pytest.approx(0.90, abs=0.01)
    assert abs(big["mean_error"]) < 0.02


def test_outputs_are_strict_json_and_report_has_plots(evaluated):
    result, out = evaluated

    def no_nan(token):
        raise AssertionError(f"non-standard JSON constant {token}")

    json.loads((out / "eval.json").read_text(), parse_constant=no_nan)
    html = (out / "report.html").read_text()
    assert html.startswith("<!DOCTYPE html>")
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(images) >= 5
    for b64 in images:
        png = base64.b64decode(b64)
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        assert width > 200 and height > 200
    for words in ("closed-form", "empirical", "realised", "100% occupancy", "not census areas"):
        assert words in html
    assert "<img" in html and 'src="http' not in html


def test_districts_reported(evaluated):
    result, _ = evaluated
    d = result["districts"]
    assert set(d) == {"100", "400"}
    assert d["100"]["n_districts"] > d["400"]["n_districts"] > 0
    assert d["100"]["total_population"]["mae"] > 0


def test_cli_evaluate(truth_release, tmp_path, capsys):
    truth_dir, release_dir, _, _ = truth_release
    code = main(
        [
            "evaluate",
            "--truth",
            str(truth_dir),
            "--release",
            str(release_dir),
            "--json",
            str(tmp_path / "e.json"),
            "--district-targets",
            "200",
            "--quiet",
        ]
    )
    # the hand-made release of the fixture has no checksums: refused by default
    assert code == 1 and "does not validate" in capsys.readouterr().err
    assert not (tmp_path / "e.json").exists()
    code = main(
        [
            "evaluate",
            "--truth",
            str(truth_dir),
            "--release",
            str(release_dir),
            "--json",
            str(tmp_path / "e.json"),
            "--district-targets",
            "200",
            "--quiet",
            "--allow-invalid",
        ]
    )
    assert code == 0
    text = capsys.readouterr().out
    assert "Block" in text and "invariants: all hold" in text
    # accuracy = 1 - TVD said in words; no bias column (0 by construction for population)
    assert "accuracy = 1 - TVD, the total variation distance (1: every count exact" in text
    header = next(line for line in text.splitlines() if line.startswith("geolevel"))
    assert header.split() == [
        "geolevel", "places", "population", "MAE", "population", "accuracy", "race", "x",
        "Hispanic", "accuracy",
    ]  # fmt: skip
    assert "TVD total" not in text and "bias" not in text
    assert json.loads((tmp_path / "e.json").read_text())["geolevels"][-1] == "Block"
    code = main(
        [
            "evaluate",
            "--truth",
            str(truth_dir),
            "--release",
            str(tmp_path / "nope"),
            "--json",
            str(tmp_path / "x.json"),
        ]
    )
    assert code == 1  # a data error (a missing release), not a usage error
    err = capsys.readouterr().err
    assert "does not exist" in err and err.count("\n") == 1
    assert not (tmp_path / "x.json").exists()


def test_missing_release_files(truth_release, tmp_path):
    truth_dir, _, _, _ = truth_release
    (tmp_path / "run").mkdir()
    with pytest.raises(InputError, match="lacks mdf_persons.parquet"):
        evaluate(truth_dir, tmp_path / "run", EvaluateOptions(allow_invalid=True))


def test_release_without_tables_uses_mdf(truth_release, tmp_path):
    import shutil

    truth_dir, release_dir, _, _ = truth_release
    shutil.copytree(release_dir, tmp_path / "run", ignore=shutil.ignore_patterns("tables"))
    result = evaluate(
        truth_dir,
        tmp_path / "run",
        EvaluateOptions(district_targets=(100,), allow_invalid=True),
    )
    assert "tabulated from the MDF" in result["tables_source"]
    assert "tables_match_mdf" not in result["invariants"]
    np.testing.assert_equal(result["metrics"]["P1"]["Block"]["tvd"] < 1, True)


def test_cli_evaluate_of_a_release_without_persons(tmp_path, capsys):
    """No persons: TVD is undefined (n/a in the summary, null in JSON), errors are 0."""
    from censusdp.io.budget_files import load_preset
    from censusdp.privacy.release_budget import ReleaseBudget
    from censusdp.release.options import ReleaseOptions
    from censusdp.release.pipeline import run_release
    from synth import block_codes, make_cef, write_cef

    persons, units = make_cef(np.random.default_rng(5), block_codes(1, 1, 1, 2), gq_rate=0.0)
    persons = {k: v[:0] for k, v in persons.items()}
    units["occupied"][:] = False
    write_cef(tmp_path / "cef", persons, units)
    run_release(
        tmp_path / "cef",
        tmp_path / "run",
        ReleaseBudget(load_preset("pl94-2020")),
        ReleaseOptions(seed=1),
    )
    argv = ["evaluate", "--truth", str(tmp_path / "cef"), "--release", str(tmp_path / "run")]
    assert main([*argv, "--json", str(tmp_path / "e.json"), "--quiet"]) == 0
    rows = capsys.readouterr().out.splitlines()
    block = next(r.split() for r in rows if r.startswith("Block "))
    assert block == ["Block", "2", "0.000", "n/a", "n/a"]  # MAE, accuracy, race x Hispanic
    tp = json.loads((tmp_path / "e.json").read_text())["metrics"]["total_population"]
    assert tp["Block"]["tvd"] is None and tp["Block"]["mae"] == 0.0
