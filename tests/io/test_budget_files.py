"""Where a budget comes from: the shipped presets and a user's config file, read in one
place (``censusdp.io.budget_files``), and the one way a preset or a config is chosen."""

from __future__ import annotations

import importlib.resources
import os
import re
from fractions import Fraction
from pathlib import Path

import pytest

from censusdp.errors import BudgetError, ConfigError
from censusdp.io.budget_files import (
    load_config,
    load_preset,
    preset_names,
    resolve_budget,
    resolve_release_budget,
    units_preset_for,
)
from censusdp.privacy.budget import BudgetConfigError


def preset_text(name: str) -> str:
    return (importlib.resources.files("censusdp.privacy") / "presets" / f"{name}.toml").read_text(
        encoding="utf-8"
    )


def test_preset_names_are_the_shipped_files() -> None:
    files = importlib.resources.files("censusdp.privacy") / "presets"
    shipped = sorted(f.name.removesuffix(".toml") for f in files.iterdir())
    assert list(preset_names()) == shipped
    assert {"pl94-2020", "pl94-2020-units", "ddp-2010", "dhc-lite-demo"} <= set(shipped)


def test_a_config_file_is_read_as_its_preset_is(tmp_path: Path) -> None:
    path = tmp_path / "demo.toml"
    path.write_text(preset_text("dhc-lite-demo"), encoding="utf-8")
    assert load_config(path) == load_preset("dhc-lite-demo")
    assert load_config(str(path)) == load_preset("dhc-lite-demo")


def test_a_bad_config_file_is_named_with_its_key_and_value(tmp_path: Path) -> None:
    path = tmp_path / "budget.toml"
    path.write_text("rhoo = 1\n" + preset_text("dhc-lite-demo"), encoding="utf-8")
    with pytest.raises(BudgetConfigError, match="key 'rhoo' = 1: unknown key") as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: ")
    assert isinstance(info.value, ConfigError) and isinstance(info.value, BudgetError)
    path.write_text("schema = [", encoding="utf-8")
    with pytest.raises(BudgetConfigError, match=f"^{re.escape(str(path))}: invalid TOML: "):
        load_config(path)


def test_a_config_that_cannot_be_read_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(BudgetConfigError, match="cannot read budget config"):
        load_config(tmp_path / "missing.toml")
    with pytest.raises(
        BudgetConfigError, match=f"^{re.escape(str(tmp_path))}: cannot read .*not a regular file$"
    ):
        load_config(tmp_path)
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)  # never opened: reading it would block
    with pytest.raises(BudgetConfigError, match="not a regular file"):
        load_config(fifo)
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b'name = "x"\n\xff')
    with pytest.raises(
        BudgetConfigError, match=r"not a TOML budget config: not UTF-8 text \(byte 11\)"
    ):
        load_config(binary)


def test_an_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(
        BudgetConfigError, match="unknown budget preset 'nope'; presets are"
    ) as info:
        load_preset("nope")
    assert all(name in str(info.value) for name in preset_names())


def test_a_person_preset_finds_its_units_companion() -> None:
    assert units_preset_for("pl94-2020") == "pl94-2020-units"
    assert units_preset_for("ddp-2010") == "ddp-2010-households"  # a household run first
    assert units_preset_for("dhc-lite-demo") is None


def test_resolve_budget_takes_a_preset_or_a_config_and_rescales(tmp_path: Path) -> None:
    assert resolve_budget() == load_preset("pl94-2020")
    assert resolve_budget(default_preset="dhc-lite-demo") == load_preset("dhc-lite-demo")
    path = tmp_path / "demo.toml"
    path.write_text(preset_text("dhc-lite-demo"), encoding="utf-8")
    assert resolve_budget(config=path) == load_preset("dhc-lite-demo")
    assert resolve_budget(preset="ddp-2010", rho="1/2").total == 1  # epsilon = sqrt(2 rho)
    assert resolve_budget(preset="pl94-2020", rho="2").total == Fraction(2)
    with pytest.raises(BudgetConfigError, match="give either a preset or a config file, not both"):
        resolve_budget(preset="pl94-2020", config=path)


def test_resolve_release_budget_pairs_the_units_run(tmp_path: Path) -> None:
    whole = resolve_release_budget()
    assert whole.persons == load_preset("pl94-2020")
    assert whole.units == load_preset("pl94-2020-units")
    assert resolve_release_budget(units=None).units is None
    assert resolve_release_budget(units="none").units is None
    path = tmp_path / "p.toml"
    path.write_text(preset_text("pl94-2020"), encoding="utf-8")
    assert resolve_release_budget(config=path).units is None  # no companion for a config
    assert resolve_release_budget(config=path, units="pl94-2020-units").units is not None
    scaled = resolve_release_budget(preset="pl94-2020", rho="3")
    assert scaled.rho == 3
    assert scaled.units.total / scaled.persons.total == whole.units.total / whole.persons.total
