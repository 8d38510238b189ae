"""``censusdp compare``: two releases of one truth, side by side."""

from __future__ import annotations

import json

import numpy as np
import pytest

from censusdp.cli import main
from censusdp.errors import InputError
from censusdp.evaluate.compare import compare_releases


def _mae(truth_codes, released_codes, length):
    """Mean |released - true| population over the units of one level (independent)."""
    t = np.unique(np.asarray(truth_codes).astype(f"U{length}"), return_counts=True)
    r = np.unique(np.asarray(released_codes).astype(f"U{length}"), return_counts=True)
    units = sorted(set(t[0]) | set(r[0]))
    tc, rc = dict(zip(*t, strict=True)), dict(zip(*r, strict=True))
    return float(np.mean([abs(rc.get(u, 0) - tc.get(u, 0)) for u in units]))


def test_cli_writes_page_and_json(truth_release, broken_release, tmp_path, capsys):
    truth_dir, run_a, truth, rel_a = truth_release
    _, run_b, _, rel_b = broken_release
    page, js = tmp_path / "c.html", tmp_path / "c.json"
    argv = ["compare", str(run_a), str(run_b), "--truth", str(truth_dir), "--html", str(page)]
    argv += ["--json", str(js), "--allow-invalid", "--quiet", "--names", "A,B"]
    assert main(argv) == 0
    out = json.loads(js.read_text())
    assert "NaN" not in js.read_text() and "Infinity" not in js.read_text()
    assert [r["name"] for r in out["runs"]] == ["A", "B"]
    # the broken release dropped persons and a housing unit: validation recorded
    assert out["runs"][0]["invariants_ok"] is True and out["runs"][1]["invariants_ok"] is False
    levels = {r["geolevel"]: r for r in out["levels"]}
    codes = truth["persons"]["geocode"]
    for lv, length in (("County", 5), ("Tract", 11), ("Block", 16)):
        ma, mb = levels[lv]["mae"]
        assert ma == pytest.approx(_mae(codes, rel_a["persons"]["geocode"], length))
        assert mb == pytest.approx(_mae(codes, rel_b["persons"]["geocode"], length))
        ratio = levels[lv]["mae_ratio_b_over_a"]
        assert ratio is None if ma == 0 else ratio == pytest.approx(mb / ma)
    assert levels["County"]["mae"][0] == 0 and levels["Tract"]["mae_ratio_b_over_a"] > 1
    assert set(levels["Block"]["tvd"]) == {"P1", "P2", "P3", "P4", "P5", "H1"}
    text = page.read_text()
    assert text.count('id="summary"') == 2 and "Which is closer to the truth?" in text
    printed = capsys.readouterr().out
    assert "MAE A" in printed and f"wrote {page}" in printed

    # an existing page is not replaced without --overwrite; the inputs are never outputs
    assert main(argv) == 2
    assert "exists" in capsys.readouterr().err
    assert main(argv + ["--overwrite"]) == 0
    bad = ["compare", str(run_a), str(run_b), "--truth", str(truth_dir)]
    assert main(bad + ["--html", str(run_a / "manifest.json"), "--overwrite"]) == 2


def test_refuses_one_release_twice_and_bad_names(truth_release):
    truth_dir, run_a, _, _ = truth_release
    with pytest.raises(InputError, match="two different releases"):
        compare_releases(run_a, run_a, truth_dir)
    with pytest.raises(InputError, match="two different labels"):
        compare_releases(run_a, run_a.parent / "other", truth_dir, names=["x", "x"])


def test_dp_release_must_validate(truth_release, broken_release, tmp_path, capsys):
    truth_dir, run_a, _, _ = truth_release
    _, run_b, _, _ = broken_release
    # the fixture releases claim a DP mechanism but have no checksums: refused
    argv = ["compare", str(run_a), str(run_b), "--truth", str(truth_dir)]
    assert main(argv + ["--html", str(tmp_path / "x.html"), "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "validat" in err[0]
    assert not (tmp_path / "x.html").exists()
