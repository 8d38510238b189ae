"""``censusdp budget``: the allocation table of a preset or a config file, and its errors
as one line with exit code 2."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from censusdp.cli import main


def test_cli_budget(capsys, tmp_path: Path) -> None:
    assert main(["budget", "--preset", "pl94-2020", "--json"]) == 0
    out = capsys.readouterr().out
    assert '"epsilon_at_delta": 17.14' in out
    assert main(["budget", "--preset", "ddp-2010"]) == 0
    assert "geometric" in capsys.readouterr().out
    preset = importlib.resources.files("censusdp.privacy") / "presets" / "pl94-2020.toml"
    bad = tmp_path / "budget.toml"
    bad.write_text(
        preset.read_text(encoding="utf-8").replace('share = "104/4099"', 'share = "1/4099"', 1),
        encoding="utf-8",
    )
    assert main(["budget", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "shares sum to 3996/4099" in err
    assert main(["budget", "--rho", "-1"]) == 2
    assert "rho is -1" in capsys.readouterr().err
    assert main(["budget", "--delta", "2"]) == 2
    assert "delta is 2; it must satisfy 0 < delta < 1" in capsys.readouterr().err
