"""The design lab's figures command writes PNGs and strict JSON, and never overwrites."""

from __future__ import annotations

import json

import pytest

from censusdp.cli import main
from censusdp.design.figures import FIGURE_FILES, make_figures
from censusdp.errors import ConfigError


@pytest.mark.slow
def test_make_figures_small(tmp_path) -> None:
    out = tmp_path / "figs"
    numbers = make_figures(out, seed=5, ns=(8, 16), small_ns=(1, 2, 3), restarts=1)
    for name in FIGURE_FILES.values():
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    stored = json.loads((out / "design_figures.json").read_text())
    assert stored["seed"] == 5 and numbers["seed"] == 5
    rows = stored["strategy_sweep"]
    assert {(r["workload"], r["privacy"]) for r in rows} == {
        (w, p) for w in ("all-range", "prefix") for p in ("zcdp", "pure")
    }
    # the optimised strategy is never worse than identity, and never below the bound
    for r in rows:
        assert r["ratio"] >= 1 - 1e-9
        if r["strategy"] == "optimized":
            ident = next(
                x["rootmse"]
                for x in rows
                if x["strategy"] == "identity"
                and (x["workload"], x["n"], x["privacy"]) == (r["workload"], r["n"], r["privacy"])
            )
            assert r["rootmse"] <= ident * (1 + 1e-9)
    assert {r["mechanism"] for r in stored["small_n_sweep"]} >= {
        "geometric_clamped",
        "fair",
        "lp_all",
    }
    # a second run into the same directory is refused, unless it may overwrite its own
    with pytest.raises(ConfigError, match="not empty"):
        make_figures(out, ns=(8,), small_ns=(1,), restarts=1)
    make_figures(out, ns=(8,), small_ns=(1,), restarts=1, overwrite=True)


def test_cli_refuses_non_empty_out(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.txt").write_text("mine")
    assert main(["design", "figures", "--out", str(tmp_path), "--quiet"]) == 2
    assert "pass --overwrite" in capsys.readouterr().err
    assert (tmp_path / "x.txt").read_text() == "mine"
    # --overwrite replaces only what censusdp made
    assert main(["design", "figures", "--out", str(tmp_path), "--quiet", "--overwrite"]) == 2
    assert "not a censusdp output" in capsys.readouterr().err
    assert (tmp_path / "x.txt").read_text() == "mine"
